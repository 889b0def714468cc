//! The outside of a binary, written once: an async runtime, the service until it ends
//! (SIGTERM/SIGINT), a start-up error as one log line and exit code 1, and the pool closed
//! at exit without waiting for ever.

use std::future::Future;
use std::process::ExitCode;
use std::time::Duration;

use sqlx::PgPool;

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
    let exit = match runtime.block_on(service) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // One line, then a non-zero exit: start-up errors are read by people.
            tracing::error!("{error:#}");
            ExitCode::FAILURE
        }
    };
    // Dropping the runtime would wait without a limit for its blocking threads (a name
    // lookup of a connection attempt, say); the service has drained already.
    runtime.shutdown_timeout(RUNTIME_SHUTDOWN_LIMIT);
    exit
}

/// How long the exit waits for the runtime's blocking threads after the service ended.
const RUNTIME_SHUTDOWN_LIMIT: Duration = Duration::from_secs(1);

/// Closes `pool` for a process that is exiting: waits at most `limit` for the connections
/// still checked out to come back (one whose server went silent may never come back; the
/// pool tests each returned connection with a ping that has no time limit), then leaves
/// the rest to the exit, which closes their sockets. Says so in the log when it gave up.
pub async fn close_pool(pool: &PgPool, limit: Duration) {
    if tokio::time::timeout(limit, pool.close()).await.is_err() {
        tracing::warn!(
            limit_ms = limit.as_millis() as u64,
            not_returned = pool.size().saturating_sub(pool.num_idle() as u32),
            "connections not back when the pool closed; exiting without them"
        );
    }
}

/// How long a process that has drained waits for its connections at exit
/// ([`close_pool`]): the drain already bounded the work on them.
pub const EXIT_POOL_CLOSE_LIMIT: Duration = Duration::from_secs(5);

#[cfg(test)]
mod tests {
    use super::*;

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
