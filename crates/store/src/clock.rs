//! The time statements compare with.
//!
//! Every statement that compares with the clock — claims and their leases, retry delays,
//! resend horizons, reconciliation ages, retention — takes it as a parameter,
//! `coalesce($now, now())` (as River does): in production `None`, the database's own
//! `now()`; in a test, a time the test moves forward ([`StatementClock::advance`]) instead of
//! sleeping through a delay or rewriting rows into the past.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};

/// The time a process's statements see: the database's, unless a test moved it ahead.
#[derive(Debug, Default)]
pub struct StatementClock {
    /// How far ahead of the real time, in milliseconds; 0 is the database's own `now()`.
    ahead_ms: AtomicI64,
}

impl StatementClock {
    /// The `$now` to bind: `None` (the database's `now()`) unless moved ahead.
    pub fn now(&self) -> Option<DateTime<Utc>> {
        match self.ahead_ms.load(Ordering::Relaxed) {
            0 => None,
            ahead => Some(Utc::now() + chrono::Duration::milliseconds(ahead)),
        }
    }

    /// Moves the time ahead by `by` (for tests: a retry delay or a horizon passes at once).
    pub fn advance(&self, by: Duration) {
        let by = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        self.ahead_ms.fetch_add(by, Ordering::Relaxed);
    }
}

/// `now` moved ahead by `by` from the real time (for a single statement in a test).
pub fn ahead(by: Duration) -> Option<DateTime<Utc>> {
    let clock = StatementClock::default();
    clock.advance(by);
    clock.now()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_database_clock_binds_nothing_and_an_advanced_one_a_later_time() {
        let clock = StatementClock::default();
        assert_eq!(clock.now(), None);
        clock.advance(Duration::from_secs(3600));
        let now = clock.now().expect("a time");
        let ahead = now - Utc::now();
        assert!(ahead > chrono::Duration::minutes(59) && ahead <= chrono::Duration::hours(1));
    }
}
