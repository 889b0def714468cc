//! The worker's metrics: names fixed by docs/contract.md, HELP text and buckets.

use metrics_exporter_prometheus::PrometheusHandle;

// The queue ages and their refresh time are `inbound_runtime::queue_ages`'s: the ingress
// exports them too.

/// Gauge: receipts by state (pending, leased, waiting, quarantined, failed).
pub const RECEIPTS: &str = "inbound_receipts";
/// Counter: processing attempts by integration and outcome.
pub const RECEIPT_ATTEMPTS_TOTAL: &str = "inbound_receipt_attempts_total";
/// Histogram: seconds from acceptance to done.
pub const ACCEPT_TO_DONE_SECONDS: &str = "inbound_accept_to_done_seconds";
/// Counter: business transactions by mode (`together`, or `isolated` after a failure).
pub const BATCHES_TOTAL: &str = "inbound_worker_batches_total";
/// Counter: claims that took over an expired lease.
pub const LEASE_RECLAIMS_TOTAL: &str = "inbound_lease_reclaims_total";

/// Gauge: receipts that need a person (failed, quarantined), per integration.
pub const RECEIPTS_FOR_REVIEW: &str = "inbound_receipts_for_review";

/// Gauge: effects in an open state (pending, in_flight, uncertain, review), per sink.
pub const EFFECTS: &str = "inbound_effects";
/// Histogram: how long a sink took to answer a delivery (or to fail it), per sink.
pub const EFFECT_DELIVERY_SECONDS: &str = "inbound_effect_delivery_seconds";
/// Gauge: failed effects no person has closed yet (retried or abandoned), per sink: what
/// `InboundEffectsFailed` reads while they remain.
pub const EFFECTS_FAILED: &str = "inbound_effects_failed";
/// Counter: effects this worker brought to an end (completed, failed), per sink.
pub const EFFECTS_FINISHED_TOTAL: &str = "inbound_effects_finished_total";
/// Gauge: seconds since the oldest undelivered effect was recorded, per sink.
pub const OLDEST_EFFECT_AGE_SECONDS: &str = "inbound_oldest_effect_age_seconds";
/// Gauge: how long the longest-waiting due effect has waited for a slot, per sink (what
/// scales dispatchers).
pub const OLDEST_DUE_EFFECT_WAIT_SECONDS: &str = "inbound_oldest_due_effect_wait_seconds";
/// Counter: delivery and reconciliation steps by sink and outcome.
pub const EFFECT_ATTEMPTS_TOTAL: &str = "inbound_effect_attempts_total";
/// Gauge: 1 while a sink's circuit breaker is open or half-open, per sink.
pub const SINK_CIRCUIT_OPEN: &str = "inbound_sink_circuit_open";
/// Gauge: undelivered effects whose sink this worker's configuration does not name (left
/// for a worker that does: a rolling deploy adding a sink, or a sink removed too early).
pub const EFFECTS_FOR_UNKNOWN_SINKS: &str = "inbound_effects_for_unknown_sinks";

/// Gauge: rows of the last day in a default partition because their history partition
/// is missing, per partitioned table (`InboundHistoryPartitionMissing`).
pub const HISTORY_UNPARTITIONED_ROWS: &str = "inbound_history_unpartitioned_rows";
/// Gauge: seconds from now to the end of the last payload partition created ahead (the
/// worker keeps a week ahead; below a day, partition maintenance is failing).
pub const HISTORY_AHEAD_SECONDS: &str = "inbound_history_ahead_seconds";

/// Gauge: ordered subjects held by a failed or quarantined receipt, per integration
/// (`InboundSubjectHeld`; `inboundctl subject held` names them).
pub const SUBJECTS_HELD: &str = "inbound_subjects_held";
/// Gauge: queued receipts waiting behind a held subject's failed or quarantined receipt,
/// per integration.
pub const SUBJECT_HELD_RECEIPTS: &str = "inbound_subject_held_receipts";

/// From a fast commit to a receipt retried for an hour.
const ACCEPT_TO_DONE_BUCKETS_SECONDS: &[f64] = &[
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0,
];

/// From a sink answering at once to its timeout.
const DELIVERY_BUCKETS_SECONDS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// Installs the global Prometheus recorder and describes every metric (HELP text). The
/// build info's role is `worker` for a process that applies receipts, `dispatcher` for one
/// that only delivers effects (so the absent-worker alert sees a split deployment).
pub fn install_metrics(role: crate::args::Role) -> anyhow::Result<PrometheusHandle> {
    let handle = inbound_runtime::ops::install_recorder(
        if role.runs_receipts() {
            "worker"
        } else {
            "dispatcher"
        },
        &[
            (ACCEPT_TO_DONE_SECONDS, ACCEPT_TO_DONE_BUCKETS_SECONDS),
            (EFFECT_DELIVERY_SECONDS, DELIVERY_BUCKETS_SECONDS),
        ],
    )?;
    describe_receipt_metrics();
    describe_effect_metrics();
    Ok(handle)
}

/// HELP text of the receipt side: ages, counts, attempts, batches.
fn describe_receipt_metrics() {
    inbound_runtime::queue_ages::describe();
    metrics::describe_gauge!(
        RECEIPTS,
        "Receipts by state: pending, leased, waiting, quarantined, failed."
    );
    metrics::describe_counter!(
        RECEIPT_ATTEMPTS_TOTAL,
        "Receipt processing attempts by integration and outcome (applied, duplicate, ignored, quarantined, transient, failed, lease_lost)."
    );
    metrics::describe_histogram!(
        ACCEPT_TO_DONE_SECONDS,
        metrics::Unit::Seconds,
        "Time from the ingress's commit to the receipt's done commit."
    );
    metrics::describe_counter!(
        LEASE_RECLAIMS_TOTAL,
        "Claims that took over a receipt whose lease had expired."
    );
    metrics::describe_gauge!(
        HISTORY_UNPARTITIONED_ROWS,
        "Rows of the last day in a default partition because their history partition is missing, by table (the worker creates it and moves them)."
    );
    metrics::describe_gauge!(
        HISTORY_AHEAD_SECONDS,
        metrics::Unit::Seconds,
        "Seconds from now to the end of the last payload partition created ahead (a week when maintenance works)."
    );
    metrics::describe_gauge!(
        SUBJECTS_HELD,
        "Ordered subjects held by a failed or quarantined receipt (their later receipts wait until it is replayed or closed), by integration."
    );
    metrics::describe_gauge!(
        SUBJECT_HELD_RECEIPTS,
        "Queued receipts waiting behind a held subject's failed or quarantined receipt, by integration."
    );
    metrics::describe_counter!(
        BATCHES_TOTAL,
        "Business transactions by mode: together (no savepoints), isolated (rerun with a savepoint per receipt after a failure)."
    );
}

/// HELP text of what needs a person (receipts, effects in review) and of the effect
/// side: open effects, deliveries, sinks.
fn describe_effect_metrics() {
    metrics::describe_gauge!(
        RECEIPTS_FOR_REVIEW,
        "Receipts that need a person, by integration and state (failed, quarantined)."
    );
    metrics::describe_gauge!(
        EFFECTS,
        "Effects in an open state by sink: pending, in_flight, uncertain, review (finished ones are counted by inbound_effects_finished_total)."
    );
    metrics::describe_histogram!(
        EFFECT_DELIVERY_SECONDS,
        metrics::Unit::Seconds,
        "Time a sink took to answer a delivery (or to fail it: a timeout counts at its length), by sink."
    );
    metrics::describe_counter!(
        EFFECTS_FINISHED_TOTAL,
        "Effects this worker brought to an end, by sink and status (completed, failed)."
    );
    metrics::describe_gauge!(
        OLDEST_EFFECT_AGE_SECONDS,
        metrics::Unit::Seconds,
        "Age of the oldest undelivered (pending, in flight, uncertain) effect per sink (0 when none)."
    );
    metrics::describe_gauge!(
        OLDEST_DUE_EFFECT_WAIT_SECONDS,
        metrics::Unit::Seconds,
        "How long the longest-waiting due effect (pending or in flight, its time come) has waited for a dispatcher, per sink (0 when none)."
    );
    metrics::describe_counter!(
        EFFECT_ATTEMPTS_TOTAL,
        "Effect delivery and reconciliation steps by sink and outcome."
    );
    metrics::describe_gauge!(
        SINK_CIRCUIT_OPEN,
        "1 while the sink's circuit breaker is open (its effects wait), per sink."
    );
    metrics::describe_gauge!(
        EFFECTS_FOR_UNKNOWN_SINKS,
        "Undelivered effects whose sink this worker's configuration does not name."
    );
    metrics::describe_gauge!(
        EFFECTS_FAILED,
        "Failed effects (refused by their sink) that no person has retried or abandoned yet, per sink."
    );
}
