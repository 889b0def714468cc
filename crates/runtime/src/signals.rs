//! SIGTERM and SIGINT as one future, for the drain.

/// Resolves on the first SIGTERM or SIGINT (at once if the handlers cannot be installed).
pub async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut terminate), Ok(mut interrupt)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        tracing::error!("cannot install signal handlers; stopping at once");
        return;
    };
    tokio::select! {
        _ = terminate.recv() => tracing::info!("SIGTERM: draining"),
        _ = interrupt.recv() => tracing::info!("SIGINT: draining"),
    }
}
