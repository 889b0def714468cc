//! Waiting for a condition instead of sleeping: [`eventually`] asks again every 50 ms
//! until the probe says yes, and fails the test with what it waited for when the limit
//! passes first.

use std::time::{Duration, Instant};

/// Resolves once `probe` returns `Some(value)`, with the value; panics naming `what` when
/// `limit` passes first.
pub async fn eventually<T>(
    what: &str,
    limit: Duration,
    mut probe: impl AsyncFnMut() -> Option<T>,
) -> T {
    let started = Instant::now();
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(started.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
