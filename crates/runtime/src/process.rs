//! The outside of a binary, written once: an async runtime, the service until it ends
//! (SIGTERM/SIGINT), and a start-up error as one log line and exit code 1.

use std::future::Future;
use std::process::ExitCode;

/// Builds the service with `service` inside a multi-threaded runtime and runs it there;
/// logging must already be set up. Building it inside the runtime is what lets
/// [`crate::signals::shutdown_signal`] install its handlers before any start-up work, so a
/// SIGTERM during start-up drains instead of killing the process.
pub fn run_to_exit_code<Service>(service: impl FnOnce() -> Service) -> ExitCode
where
    Service: Future<Output = anyhow::Result<()>>,
{
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
    let service = {
        let _inside = runtime.enter();
        service()
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Sends SIGTERM to this very process (nextest runs each test in its own).
    fn terminate_this_process() {
        let status = std::process::Command::new("kill")
            .args(["-TERM", &std::process::id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -TERM failed");
    }

    #[test]
    fn a_sigterm_before_the_service_waits_for_it_drains_instead_of_killing() {
        // The service does its start-up (here: a signal arrives during it) before it
        // first polls its shutdown future; the signal must be waiting there, not have
        // ended the process with the default action.
        let exit = run_to_exit_code(|| {
            let shutdown = crate::signals::shutdown_signal();
            async move {
                terminate_this_process();
                tokio::time::sleep(Duration::from_millis(100)).await;
                tokio::time::timeout(Duration::from_secs(10), shutdown)
                    .await
                    .map_err(|_| anyhow::anyhow!("the SIGTERM never reached the shutdown"))
            }
        });
        assert_eq!(exit, ExitCode::SUCCESS);
    }
}
