//! Retry delays: exponential in the attempt number, capped, with "equal jitter" (half
//! fixed, half random) so that receipts failing together do not retry together.

use std::time::Duration;

/// The delay before retrying after failed attempt number `attempt` (1-based).
/// `jitter` is uniform in `[0, 1)`: the delay lies in `[d/2, d)` where
/// `d = min(cap, base · 2^(attempt-1))`.
pub fn retry_delay(attempt: i32, base: Duration, cap: Duration, jitter: f64) -> Duration {
    let exponent = u32::try_from(attempt.saturating_sub(1))
        .unwrap_or(0)
        .min(32);
    let full = base.saturating_mul(2u32.saturating_pow(exponent)).min(cap);
    let half = full / 2;
    half + half.mul_f64(jitter.clamp(0.0, 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: Duration = Duration::from_millis(1000);
    const CAP: Duration = Duration::from_secs(600);

    #[test]
    fn doubles_per_attempt_within_the_jitter_band() {
        for attempt in 1..=6 {
            let full = BASE * 2u32.pow(attempt as u32 - 1);
            assert_eq!(retry_delay(attempt, BASE, CAP, 0.0), full / 2);
            assert_eq!(retry_delay(attempt, BASE, CAP, 1.0), full);
            let middle = retry_delay(attempt, BASE, CAP, 0.5);
            assert!(middle > full / 2 && middle < full, "{attempt}: {middle:?}");
        }
    }

    #[test]
    fn is_capped_and_never_overflows() {
        assert_eq!(retry_delay(20, BASE, CAP, 1.0), CAP);
        assert_eq!(retry_delay(i32::MAX, BASE, CAP, 1.0), CAP);
        assert_eq!(retry_delay(0, BASE, CAP, 1.0), BASE);
        assert_eq!(retry_delay(-3, BASE, CAP, 0.0), BASE / 2);
    }
}
