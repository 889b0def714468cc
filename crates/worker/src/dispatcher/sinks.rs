//! Per-sink admission for the dispatcher: each sink's share of the effect slots, and a
//! circuit breaker that pauses a sink after consecutive transport failures, so that one
//! slow, hanging or dead sink costs only its own effects.
//!
//! Breaker states: `closed` (claims up to the sink's limit) → after `breaker_failures`
//! consecutive transport failures (refused, reset, timed out) → `open` (nothing of the
//! sink is claimed for `breaker_pause_secs`) → `half-open` (one effect is claimed as a
//! probe) → `closed` on any answer from the sink, `open` again (for twice the pause, at
//! most [`MAX_PAUSE`]) on another transport failure. An operator's retry of one of a
//! paused sink's effects, seen at the next gauge refresh, ends the pause: half-open at
//! once. State is per worker process and starts closed; effects a paused sink leaves
//! behind simply wait, due, in the table.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use inbound_core::config::Config;

use crate::telemetry::SINK_CIRCUIT_OPEN;

/// The longest an open breaker pauses its sink.
pub const MAX_PAUSE: Duration = Duration::from_secs(600);

/// Admission state of every configured sink.
pub struct SinkGates {
    gates: HashMap<String, Arc<Gate>>,
}

struct Gate {
    sink: String,
    limit: usize,
    failures_to_open: u32,
    pause: Duration,
    state: Mutex<GateState>,
}

#[derive(Debug, Default)]
struct GateState {
    in_use: usize,
    consecutive_failures: u32,
    /// `Some`: open until then (afterwards half-open).
    open_until: Option<Instant>,
    /// The pause the breaker opened with last (doubles while probes fail).
    current_pause: Duration,
    /// A half-open probe is in flight.
    probing: bool,
    /// When the breaker last opened (wall clock, to compare with an operator's retry).
    opened_at: Option<SystemTime>,
}

/// A claimed effect's hold on one of its sink's slots; released on drop.
pub struct SinkPermit {
    gate: Arc<Gate>,
    probe: bool,
}

impl Drop for SinkPermit {
    fn drop(&mut self) {
        let mut state = self.gate.lock();
        state.in_use = state.in_use.saturating_sub(1);
        if self.probe {
            state.probing = false;
        }
    }
}

impl SinkPermit {
    /// Reports how the step went: `true` when the sink could not be reached or did not
    /// answer (a transport failure), `false` when it answered, whatever it said.
    pub fn report(&self, transport_failure: bool) {
        self.gate.report(transport_failure, self.probe);
    }
}

impl SinkGates {
    /// Gates for every sink of `config`; a sink without `max_concurrency` gets
    /// `default_limit`.
    pub fn new(config: &Config, default_limit: usize) -> Self {
        let gates = config
            .sinks()
            .iter()
            .map(|sink| {
                let gate = Gate {
                    sink: sink.id.clone(),
                    limit: sink.max_concurrency.unwrap_or(default_limit).max(1),
                    failures_to_open: sink.breaker_failures.max(1),
                    pause: Duration::from_secs(sink.breaker_pause_secs).min(MAX_PAUSE),
                    state: Mutex::new(GateState::default()),
                };
                (sink.id.clone(), Arc::new(gate))
            })
            .collect();
        Self { gates }
    }

    /// How many effects of each sink may be claimed now (sinks with none are left out).
    pub fn free_slots(&self) -> Vec<(String, usize)> {
        let now = Instant::now();
        let mut free: Vec<(String, usize)> = self
            .gates
            .values()
            .filter_map(|gate| {
                let slots = gate.free_slots(now);
                (slots > 0).then(|| (gate.sink.clone(), slots))
            })
            .collect();
        free.sort();
        free
    }

    /// Takes one of `sink`'s slots for a claimed effect (`None` for a sink without a
    /// gate, which the claim never asks for). While the breaker is open, the one effect
    /// claimed is its probe.
    pub fn admit(&self, sink: &str) -> Option<SinkPermit> {
        let gate = self.gates.get(sink)?;
        let mut state = gate.lock();
        state.in_use += 1;
        let probe = state.open_until.is_some() && !state.probing;
        if probe {
            state.probing = true;
        }
        drop(state);
        Some(SinkPermit {
            gate: Arc::clone(gate),
            probe,
        })
    }

    /// Whether `sink`'s breaker is open or half-open.
    pub fn is_open(&self, sink: &str) -> bool {
        self.gates
            .get(sink)
            .is_some_and(|gate| gate.lock().open_until.is_some())
    }

    /// The sinks whose breaker is open and waiting out its pause (no probe in flight),
    /// with when it opened.
    pub fn paused(&self) -> Vec<(String, SystemTime)> {
        let now = Instant::now();
        let mut paused: Vec<(String, SystemTime)> = self
            .gates
            .values()
            .filter_map(|gate| {
                let state = gate.lock();
                let waiting = state.open_until.is_some_and(|until| until > now) && !state.probing;
                waiting
                    .then_some(state.opened_at)
                    .flatten()
                    .map(|opened| (gate.sink.clone(), opened))
            })
            .collect();
        paused.sort();
        paused
    }

    /// Ends `sink`'s pause now: the next claim takes one effect as the probe (an
    /// operator retried one of its effects, so the sink is believed back).
    pub fn probe_now(&self, sink: &str) {
        let Some(gate) = self.gates.get(sink) else {
            return;
        };
        let mut state = gate.lock();
        if state.open_until.is_some() && !state.probing {
            state.open_until = Some(Instant::now());
            drop(state);
            tracing::info!(
                sink,
                "an operator retried an effect of a paused sink: probing it now"
            );
        }
    }

    /// Sets every sink's breaker gauge (0: closed), so each series exists from the start.
    pub fn initialise_metrics(&self) {
        for gate in self.gates.values() {
            metrics::gauge!(SINK_CIRCUIT_OPEN, "sink" => gate.sink.clone()).set(0.0);
        }
    }
}

impl Gate {
    fn lock(&self) -> std::sync::MutexGuard<'_, GateState> {
        // A panic while holding this lock leaves plain counters behind: still usable.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn free_slots(&self, now: Instant) -> usize {
        let state = self.lock();
        match state.open_until {
            None => self.limit.saturating_sub(state.in_use),
            // Half-open: one probe at a time.
            Some(until) if now >= until && !state.probing => 1,
            Some(_) => 0,
        }
    }

    /// While the breaker is open only the probe's failure counts (it reopens the breaker
    /// for twice the pause); late failures of requests sent before it opened change
    /// nothing. Any answer closes it.
    fn report(&self, transport_failure: bool, probe: bool) {
        let mut state = self.lock();
        if transport_failure && state.open_until.is_some() && !probe {
            return;
        }
        if !transport_failure {
            state.consecutive_failures = 0;
            if state.open_until.take().is_some() {
                state.current_pause = Duration::ZERO;
                state.opened_at = None;
                drop(state);
                metrics::gauge!(SINK_CIRCUIT_OPEN, "sink" => self.sink.clone()).set(0.0);
                tracing::info!(sink = self.sink, "circuit closed: the sink answers again");
            }
            return;
        }
        state.consecutive_failures = state.consecutive_failures.saturating_add(1);
        let reopening = state.open_until.is_some();
        if !reopening && state.consecutive_failures < self.failures_to_open {
            return;
        }
        let pause = if reopening {
            (state.current_pause * 2).clamp(self.pause, MAX_PAUSE.max(self.pause))
        } else {
            self.pause
        };
        state.current_pause = pause;
        state.open_until = Some(Instant::now() + pause);
        state.opened_at = Some(SystemTime::now());
        let failures = state.consecutive_failures;
        drop(state);
        metrics::gauge!(SINK_CIRCUIT_OPEN, "sink" => self.sink.clone()).set(1.0);
        tracing::warn!(
            sink = self.sink,
            consecutive_failures = failures,
            pause_secs = pause.as_secs(),
            "circuit open: the sink is not reachable; its effects wait"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gates(failures: u32, pause_secs: u64, limit: usize) -> SinkGates {
        let text = format!(
            r#"
[[sink]]
id = "s"
url = "http://127.0.0.1:9/x"
breaker_failures = {failures}
breaker_pause_secs = {pause_secs}
max_concurrency = {limit}
"#
        );
        let config = Config::from_toml(&text, &|_| None).expect("config");
        SinkGates::new(&config, 8)
    }

    #[test]
    fn a_sink_takes_at_most_its_limit() {
        let gates = gates(5, 30, 2);
        assert_eq!(gates.free_slots(), [("s".to_owned(), 2)]);
        let first = gates.admit("s").expect("gate");
        let _second = gates.admit("s").expect("gate");
        assert!(gates.free_slots().is_empty());
        drop(first);
        assert_eq!(gates.free_slots(), [("s".to_owned(), 1)]);
        assert!(gates.admit("unknown").is_none());
    }

    #[test]
    fn consecutive_transport_failures_open_the_breaker_and_an_answer_closes_it() {
        let gates = gates(3, 1, 4);
        for _ in 0..2 {
            gates.admit("s").expect("gate").report(true);
        }
        // An answer in between resets the count.
        gates.admit("s").expect("gate").report(false);
        for _ in 0..2 {
            gates.admit("s").expect("gate").report(true);
        }
        assert!(!gates.is_open("s"));
        gates.admit("s").expect("gate").report(true);
        assert!(gates.is_open("s"));
        assert!(gates.free_slots().is_empty(), "paused");
        std::thread::sleep(Duration::from_millis(1100));
        assert_eq!(gates.free_slots(), [("s".to_owned(), 1)], "one probe");
        let probe = gates.admit("s").expect("gate");
        assert!(gates.free_slots().is_empty(), "only one probe at a time");
        probe.report(false);
        drop(probe);
        assert!(!gates.is_open("s"));
        assert_eq!(gates.free_slots(), [("s".to_owned(), 4)]);
    }

    #[test]
    fn late_failures_of_requests_sent_before_the_breaker_opened_change_nothing() {
        let gates = gates(1, 1, 4);
        let early = gates.admit("s").expect("gate");
        gates.admit("s").expect("gate").report(true);
        assert!(gates.is_open("s"));
        early.report(true);
        drop(early);
        std::thread::sleep(Duration::from_millis(1100));
        assert_eq!(
            gates.free_slots(),
            [("s".to_owned(), 1)],
            "the pause was not extended"
        );
    }

    #[test]
    fn a_failed_probe_reopens_for_longer() {
        let gates = gates(1, 1, 4);
        gates.admit("s").expect("gate").report(true);
        std::thread::sleep(Duration::from_millis(1100));
        let probe = gates.admit("s").expect("gate");
        probe.report(true);
        drop(probe);
        std::thread::sleep(Duration::from_millis(1100));
        assert!(gates.free_slots().is_empty(), "paused for twice as long");
    }
}
