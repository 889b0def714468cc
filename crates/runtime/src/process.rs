//! The outside of a binary, written once: an async runtime, the service until it ends
//! (SIGTERM/SIGINT), and a start-up error as one log line and exit code 1.

use std::future::Future;
use std::process::ExitCode;

/// Runs `service` — built with [`crate::signals::shutdown_signal`] as its shutdown, and
/// not yet polled — on a multi-threaded runtime; logging must already be set up.
pub fn run_to_exit_code(service: impl Future<Output = anyhow::Result<()>>) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            tracing::error!("cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(service) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // One line, then a non-zero exit: start-up errors are read by people.
            tracing::error!("{error:#}");
            ExitCode::FAILURE
        }
    }
}
