//! SIGTERM and SIGINT as one future, for the drain.

use std::future::Future;

/// Installs the SIGTERM and SIGINT handlers now, so that from this call on neither signal
/// ends the process, and returns a future that resolves on the first of them, even one that
/// arrived before it was first polled. Call it inside a tokio runtime, before start-up
/// work. The future resolves at once if the handlers cannot be installed.
pub fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    use tokio::signal::unix::{SignalKind, signal};
    let handlers = signal(SignalKind::terminate())
        .and_then(|terminate| Ok((terminate, signal(SignalKind::interrupt())?)));
    async move {
        let Ok((mut terminate, mut interrupt)) = handlers else {
            tracing::error!("cannot install signal handlers; stopping at once");
            return;
        };
        tokio::select! {
            _ = terminate.recv() => tracing::info!("SIGTERM: draining"),
            _ = interrupt.recv() => tracing::info!("SIGINT: draining"),
        }
    }
}
