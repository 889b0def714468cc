//! How many request lines a refusal may write: a flood of requests refused for what they
//! are (forged signatures, a full body budget, an unknown path) must not write a line each
//! — 265,101 lines in a two-minute flood drown the lines that matter. Each integration
//! writes at most [`LINES_PER_SECOND`] lines a second per refusal outcome; the next line
//! it writes says how many were left out (`suppressed`). Deliveries answered 2xx are
//! always logged.

use std::sync::{Mutex, PoisonError};

use tokio::time::Instant;

/// Lines one integration writes per refusal outcome and second at most.
pub const LINES_PER_SECOND: u32 = 10;

/// One integration's budget, per outcome (a handful of fixed labels: a bounded list).
#[derive(Debug)]
pub struct LogBudget {
    started: Instant,
    windows: Mutex<Vec<Window>>,
}

#[derive(Debug)]
struct Window {
    outcome: &'static str,
    second: u64,
    written: u32,
    suppressed: u64,
}

impl Default for LogBudget {
    fn default() -> Self {
        Self {
            started: Instant::now(),
            windows: Mutex::new(Vec::new()),
        }
    }
}

impl LogBudget {
    /// Whether a refusal with `outcome` may write its line now: `Some(left out)` — the
    /// lines of this outcome suppressed since the last one written — or `None`.
    pub fn admit(&self, outcome: &'static str) -> Option<u64> {
        self.admit_at(outcome, self.started.elapsed().as_secs())
    }

    fn admit_at(&self, outcome: &'static str, second: u64) -> Option<u64> {
        let mut windows = self.windows.lock().unwrap_or_else(PoisonError::into_inner);
        let index = match windows.iter().position(|window| window.outcome == outcome) {
            Some(index) => index,
            None => {
                windows.push(Window {
                    outcome,
                    second,
                    written: 0,
                    suppressed: 0,
                });
                windows.len() - 1
            }
        };
        let window = &mut windows[index];
        if window.second != second {
            window.second = second;
            window.written = 0;
        }
        if window.written >= LINES_PER_SECOND {
            window.suppressed += 1;
            return None;
        }
        window.written += 1;
        Some(std::mem::take(&mut window.suppressed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_writes_a_few_lines_a_second_and_says_what_it_left_out() {
        let budget = LogBudget::default();
        let written: Vec<Option<u64>> = (0..25)
            .map(|_| budget.admit_at("unauthorized", 7))
            .collect();
        assert_eq!(written.iter().filter(|line| line.is_some()).count(), 10);
        assert_eq!(written[0], Some(0));
        // Another outcome has a budget of its own.
        assert_eq!(budget.admit_at("overloaded", 7), Some(0));
        // The next second's first line names the 15 left out.
        assert_eq!(budget.admit_at("unauthorized", 8), Some(15));
        assert_eq!(budget.admit_at("unauthorized", 8), Some(0));
    }
}
