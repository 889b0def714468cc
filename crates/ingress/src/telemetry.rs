//! The ingress's metrics: names fixed by docs/contract.md, HELP text and buckets.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;

use metrics::{Counter, Gauge, Histogram};

use metrics_exporter_prometheus::PrometheusHandle;

/// Counter: webhook requests by integration and outcome.
pub const REQUESTS_TOTAL: &str = "inbound_ingress_requests_total";
/// Histogram: how long verified deliveries answered 2xx took, by integration, in seconds
/// (refusals are counted, not timed).
pub const REQUEST_DURATION_SECONDS: &str = "inbound_ingress_request_duration_seconds";

/// Counter: verified deliveries no route takes (answered 200 `ignored`, stored nowhere),
/// by integration and event type.
pub const IGNORED_TOTAL: &str = "inbound_ingress_ignored_total";

/// Distinct event types the ignored counter keeps per integration; later types are
/// counted as `event_type="other"`, so a sender inventing types cannot grow the page (and
/// GitHub's type is the unsigned `X-GitHub-Event`).
pub const MAX_IGNORED_TYPES: usize = 200;

/// Counter: verified deliveries of another mode, account, installation, team, shop or
/// scope than the integration takes (answered 200 `ignored`, stored nowhere), by
/// integration and `reason` (which part differs: a fixed set, see
/// `inbound_core::event::OutOfScope`).
pub const OUT_OF_SCOPE_TOTAL: &str = "inbound_ingress_out_of_scope_total";

/// Counter: Slack's `app_rate_limited` notices (Slack is dropping the app's events from a
/// workspace), by integration and team.
pub const SLACK_RATE_LIMITED_TOTAL: &str = "inbound_ingress_slack_rate_limited_total";

/// Distinct teams the Slack notice counter keeps per integration; later ones are counted
/// as `team="other"` (a notice verified and names the integration's team when it expects
/// one, but a bound is a bound).
pub const MAX_RATE_LIMITED_TEAMS: usize = 200;

/// Gauge: when the integration's last verified delivery was answered 2xx (Unix time,
/// seconds), per integration; absent until the first. The silence alert reads its newest
/// value over a week, so a restart forgets nothing.
pub const LAST_DELIVERY_TIMESTAMP_SECONDS: &str = "inbound_ingress_last_delivery_timestamp_seconds";
/// Gauge: when this process started serving the integration (Unix time, seconds): the
/// silence alert counts from the earliest of these over a week when no delivery came.
pub const INTEGRATION_SINCE_TIMESTAMP_SECONDS: &str =
    "inbound_ingress_integration_since_timestamp_seconds";

/// Histogram: receipts per group-commit statement.
pub const COMMIT_BATCH_SIZE: &str = "inbound_ingress_commit_batch_size";

/// Buckets for batch sizes, up to the largest `--commit-batch-max` worth having.
const BATCH_SIZE_BUCKETS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0];

/// Buckets for request durations: a commit is milliseconds; the tail is the timeouts.
const DURATION_BUCKETS_SECONDS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Installs the global Prometheus recorder and describes every metric (HELP text).
pub fn install_metrics() -> anyhow::Result<PrometheusHandle> {
    let handle = inbound_runtime::ops::install_recorder(
        "ingress",
        &[
            (REQUEST_DURATION_SECONDS, DURATION_BUCKETS_SECONDS),
            (COMMIT_BATCH_SIZE, BATCH_SIZE_BUCKETS),
        ],
    )?;
    inbound_runtime::queue_ages::describe();
    metrics::describe_counter!(
        REQUESTS_TOTAL,
        "Webhook requests answered, by integration (\"unknown\" for unknown ids) and outcome."
    );
    metrics::describe_histogram!(
        REQUEST_DURATION_SECONDS,
        metrics::Unit::Seconds,
        "Time from request start to answer of verified deliveries answered 2xx, by integration (refusals are not timed)."
    );
    metrics::describe_counter!(
        IGNORED_TOTAL,
        "Verified deliveries no route takes (200 ignored, not stored), by integration and event type (\"other\" past an integration's first 200 types)."
    );
    metrics::describe_counter!(
        OUT_OF_SCOPE_TOTAL,
        "Verified deliveries of another mode, account, installation, team, shop or scope than the integration takes (200 ignored, not stored), by integration and reason."
    );
    metrics::describe_counter!(
        SLACK_RATE_LIMITED_TOTAL,
        "Slack app_rate_limited notices: Slack is dropping this app's events from the team (over 30,000 an hour). By integration and team (\"other\" past an integration's first 200 teams)."
    );
    metrics::describe_gauge!(
        LAST_DELIVERY_TIMESTAMP_SECONDS,
        metrics::Unit::Seconds,
        "When the integration's last verified delivery was answered 2xx (Unix time); absent until the first."
    );
    metrics::describe_gauge!(
        INTEGRATION_SINCE_TIMESTAMP_SECONDS,
        metrics::Unit::Seconds,
        "When this process started serving the integration (Unix time)."
    );
    metrics::describe_histogram!(
        COMMIT_BATCH_SIZE,
        "Receipts written per group-commit statement (one commit each)."
    );
    Ok(handle)
}

/// Records one verified delivery that no route took.
pub fn record_ignored(integration: &str, event_type: &str) {
    static SEEN: LabelSet = LabelSet::new(MAX_IGNORED_TYPES);
    let label = SEEN.label(integration, event_type);
    metrics::counter!(IGNORED_TOTAL, "integration" => integration.to_owned(), "event_type" => label)
        .increment(1);
}

/// Records one verified delivery outside the integration's scope.
pub fn record_out_of_scope(integration: &str, reason: &'static str) {
    metrics::counter!(OUT_OF_SCOPE_TOTAL, "integration" => integration.to_owned(), "reason" => reason)
        .increment(1);
}

/// Records one Slack `app_rate_limited` notice.
pub fn record_slack_rate_limited(integration: &str, team_id: &str) {
    static SEEN: LabelSet = LabelSet::new(MAX_RATE_LIMITED_TEAMS);
    let label = SEEN.label(integration, team_id);
    metrics::counter!(SLACK_RATE_LIMITED_TOTAL, "integration" => integration.to_owned(), "team" => label)
        .increment(1);
}

/// The label values one counter has used, at most `limit` per integration: a value first
/// seen past its integration's limit is labelled `other`, so senders cannot grow the page,
/// and one integration's senders cannot spend another's budget. Integrations are the
/// configuration's (an unknown id never verifies), so the whole set is bounded too.
struct LabelSet {
    limit: usize,
    seen: Mutex<Option<HashMap<String, HashSet<String>>>>,
}

impl LabelSet {
    const fn new(limit: usize) -> Self {
        Self {
            limit,
            seen: Mutex::new(None),
        }
    }

    fn label(&self, integration: &str, value: &str) -> String {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        let values = seen
            .get_or_insert_with(HashMap::new)
            .entry(integration.to_owned())
            .or_default();
        if values.contains(value) {
            return value.to_owned();
        }
        if values.len() < self.limit {
            values.insert(value.to_owned());
            value.to_owned()
        } else {
            "other".to_owned()
        }
    }
}

/// Records the size of one group-commit batch.
pub fn record_commit_batch(receipts: usize) {
    metrics::histogram!(COMMIT_BATCH_SIZE).record(receipts as f64);
}

/// Records when this process started serving each integration; the queue ages start at 0.
pub fn initialise(config: &inbound_core::config::Config) {
    inbound_runtime::queue_ages::initialise(config);
    let now = unix_now();
    for integration in config.integrations() {
        metrics::gauge!(INTEGRATION_SINCE_TIMESTAMP_SECONDS, "integration" => integration.id.clone())
            .set(now);
    }
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |since| since.as_secs_f64())
}

/// The per-request metrics of one integration (or of unknown ids), each handle
/// registered on its first use, as the labelled macros would: a `metrics::counter!` call
/// with labels allocates their values and searches the registry every time, which was
/// ~2 % of the ingress's CPU.
#[derive(Debug)]
pub struct RequestMetrics {
    integration: String,
    duration: OnceLock<Histogram>,
    last_delivery: OnceLock<Gauge>,
    /// One counter per outcome seen (a handful).
    outcomes: Mutex<Vec<(&'static str, Counter)>>,
}

impl RequestMetrics {
    /// The metrics labelled `integration="{integration}"`.
    pub fn new(integration: &str) -> Self {
        Self {
            integration: integration.to_owned(),
            duration: OnceLock::new(),
            last_delivery: OnceLock::new(),
            outcomes: Mutex::new(Vec::new()),
        }
    }

    /// Records one answered webhook request (`delivered`: verified and answered 2xx).
    pub fn record(&self, outcome: &'static str, delivered: bool, elapsed: Duration) {
        if delivered {
            self.last_delivery
                .get_or_init(|| {
                    metrics::gauge!(LAST_DELIVERY_TIMESTAMP_SECONDS, "integration" => self.integration.clone())
                })
                .set(unix_now());
        }
        self.outcome_counter(outcome).increment(1);
        // The provider's deliveries answered 2xx are what its timeout applies to; a refused
        // request (a forged or slow-body flood) is counted, never timed as one.
        if delivered {
            self.duration
                .get_or_init(|| {
                    metrics::histogram!(REQUEST_DURATION_SECONDS, "integration" => self.integration.clone())
                })
                .record(elapsed.as_secs_f64());
        }
    }

    fn outcome_counter(&self, outcome: &'static str) -> Counter {
        let mut outcomes = self.outcomes.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, counter)) = outcomes.iter().find(|(seen, _)| *seen == outcome) {
            return counter.clone();
        }
        let counter = metrics::counter!(REQUESTS_TOTAL, "integration" => self.integration.clone(), "outcome" => outcome);
        outcomes.push((outcome, counter.clone()));
        counter
    }
}

#[cfg(test)]
mod tests {
    use super::LabelSet;

    /// Each integration has a budget of its own: one whose senders invent values spends
    /// its own, and another's new values keep their names (red team 2026-12-05, F5).
    #[test]
    fn one_integrations_values_never_spend_anothers_budget() {
        let labels = LabelSet::new(3);
        for value in ["a", "b", "c"] {
            assert_eq!(labels.label("noisy", value), value);
        }
        assert_eq!(labels.label("noisy", "d"), "other");
        assert_eq!(
            labels.label("noisy", "a"),
            "a",
            "a value seen keeps its name"
        );
        assert_eq!(labels.label("quiet", "d"), "d");
        assert_eq!(labels.label("quiet", "e"), "e");
    }
}
