//! An injectable clock. The ingress reads the time for freshness checks from a `Clock` it
//! is given; the verifiers themselves take the time as a plain number, so their tests pin
//! it without any clock at all.

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
