//! An injectable clock. Freshness checks take the time from here so tests can pin it.

use std::sync::atomic::{AtomicI64, Ordering};

/// A source of the current Unix time in whole seconds.
pub trait Clock: Send + Sync {
    /// Seconds since the Unix epoch.
    fn now_unix_secs(&self) -> i64;
}

/// The real wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_unix_secs(&self) -> i64 {
        chrono::Utc::now().timestamp()
    }
}

/// A clock that says what a test tells it to.
#[derive(Debug, Default)]
pub struct FixedClock(AtomicI64);

impl FixedClock {
    /// A clock standing at `unix_secs`.
    pub fn at(unix_secs: i64) -> Self {
        Self(AtomicI64::new(unix_secs))
    }

    /// Moves the clock to `unix_secs`.
    pub fn set(&self, unix_secs: i64) {
        self.0.store(unix_secs, Ordering::SeqCst);
    }
}

impl Clock for FixedClock {
    fn now_unix_secs(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}
