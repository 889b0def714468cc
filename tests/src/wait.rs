//! Waiting for a condition instead of sleeping: [`eventually`] asks again every 50 ms
//! until the probe says yes, and fails the test with what it waited for — and, when the
//! probe says what it saw, the last thing it saw — when the limit passes first.

use std::fmt::Display;
use std::time::{Duration, Instant};

/// What a probe answers: `Some(value)` / `Ok(value)` when the wait is over; `None`, or
/// `Err(what it saw)` to be shown if the wait times out, to ask again.
pub trait Probed {
    /// What the wait resolves to.
    type Value;
    /// The value, or what was seen instead (if anything worth showing).
    fn ready(self) -> Result<Self::Value, Option<String>>;
}

impl<T> Probed for Option<T> {
    type Value = T;
    fn ready(self) -> Result<T, Option<String>> {
        self.ok_or(None)
    }
}

impl<T, Seen: Display> Probed for Result<T, Seen> {
    type Value = T;
    fn ready(self) -> Result<T, Option<String>> {
        self.map_err(|seen| Some(seen.to_string()))
    }
}

/// Resolves once `probe` answers ready, with its value; panics naming `what` (and the
/// probe's last observation) when `limit` passes first.
pub async fn eventually<P: Probed>(
    what: &str,
    limit: Duration,
    mut probe: impl AsyncFnMut() -> P,
) -> P::Value {
    let started = Instant::now();
    loop {
        let seen = match probe().await.ready() {
            Ok(value) => return value,
            Err(seen) => seen,
        };
        if started.elapsed() >= limit {
            match seen {
                Some(seen) => panic!("{what}: not within {limit:?}; last seen: {seen}"),
                None => panic!("{what}: not within {limit:?}"),
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
