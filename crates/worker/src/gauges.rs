//! Queue gauges, refreshed every few seconds from index-backed queries: receipts and
//! effects by state, the queue ages of every configured integration
//! ([`inbound_runtime::queue_ages`], which the ingress exports too) and the oldest
//! undelivered effect of every sink (0 when none).

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Duration;

use inbound_core::states::{EffectStatus, ReceiptStatus};
use inbound_runtime::database::with_connection;
use inbound_runtime::failpoint;
use inbound_runtime::queue_ages;
use inbound_store::{admin, effects};
use sqlx::PgConnection;

use crate::Worker;
use crate::telemetry::{
    EFFECTS, EFFECTS_FAILED, EFFECTS_FINISHED_TOTAL, EFFECTS_FOR_UNKNOWN_SINKS,
    HISTORY_AHEAD_SECONDS, HISTORY_UNPARTITIONED_ROWS, LEASE_RECLAIMS_TOTAL,
    OLDEST_DUE_EFFECT_WAIT_SECONDS, OLDEST_EFFECT_AGE_SECONDS, RECEIPTS, RECEIPTS_FOR_REVIEW,
    SUBJECT_HELD_RECEIPTS, SUBJECTS_HELD,
};

/// The end states the dispatcher reaches (an operator's `abandoned` is not its own).
pub const FINISHED_STATES: [EffectStatus; 2] = [EffectStatus::Completed, EffectStatus::Failed];

/// Refreshes the gauges once, all its statements together waiting on the database at
/// most the statement limit.
pub async fn refresh(worker: &Worker) -> Result<(), sqlx::Error> {
    with_connection(
        &worker.pool,
        worker.settings.statement_limit,
        async |connection| {
            failpoint::pause("before_gauges").await;
            refresh_on(worker, connection).await
        },
    )
    .await
}

async fn refresh_on(worker: &Worker, connection: &mut PgConnection) -> Result<(), sqlx::Error> {
    if worker.settings.role().runs_receipts() {
        maintain_history(&mut *connection).await?;
        admin::sweep_subject_leases(&mut *connection).await?;
    }
    export_held_subjects(worker, &mut *connection).await?;
    let counts = admin::receipt_counts(&mut *connection).await?;
    for (state, count) in counts.by_state() {
        metrics::gauge!(RECEIPTS, "state" => state.as_str()).set(count as f64);
    }
    queue_ages::export(&mut *connection, &worker.config).await?;
    // Counted for every configured integration and sink, and for any other the rows name:
    // receipts of an integration since removed from the configuration (or effects of a
    // removed sink) still need a person, and their alert must not resolve by itself.
    let for_review = admin::review_counts(&mut *connection).await?;
    let configured: Vec<&str> = worker
        .config
        .integrations()
        .iter()
        .map(|integration| integration.id.as_str())
        .collect();
    for (integration, state, count) in counts_to_export(
        &REVIEW_SEEN,
        &for_review,
        &configured,
        ReceiptStatus::NEEDS_A_PERSON,
    ) {
        metrics::gauge!(RECEIPTS_FOR_REVIEW, "integration" => integration, "state" => state.as_str())
            .set(count as f64);
    }
    let open = effects::open_counts_by_sink(&mut *connection).await?;
    let configured: Vec<&str> = worker
        .config
        .sinks()
        .iter()
        .map(|sink| sink.id.as_str())
        .collect();
    for (sink, state, count) in counts_to_export(&OPEN_SEEN, &open, &configured, EffectStatus::OPEN)
    {
        metrics::gauge!(EFFECTS, "sink" => sink, "state" => state.as_str()).set(count as f64);
    }
    // Failed effects wait for a person: counted for every configured sink and any other
    // they name, so the alert stays while any remain.
    let failed: Vec<(String, EffectStatus, i64)> = effects::failed_counts_by_sink(&mut *connection)
        .await?
        .into_iter()
        .map(|(sink, count)| (sink, EffectStatus::Failed, count))
        .collect();
    for (sink, _, count) in
        counts_to_export(&FAILED_SEEN, &failed, &configured, &[EffectStatus::Failed])
    {
        metrics::gauge!(EFFECTS_FAILED, "sink" => sink).set(count as f64);
    }
    for sink in worker.config.sinks() {
        let age = effects::oldest_open_age_seconds(&mut *connection, &sink.id).await?;
        metrics::gauge!(OLDEST_EFFECT_AGE_SECONDS, "sink" => sink.id.clone()).set(age);
        let wait = effects::oldest_due_wait_seconds(&mut *connection, &sink.id).await?;
        metrics::gauge!(OLDEST_DUE_EFFECT_WAIT_SECONDS, "sink" => sink.id.clone()).set(wait);
    }
    // An operator who retried an effect of a paused sink believes it back: probe it now
    // rather than after a pause that may have doubled to minutes.
    for (sink, paused_at) in worker.sink_gates().paused() {
        if effects::retried_by_an_operator_since(&mut *connection, &sink, paused_at.into()).await? {
            worker.sink_gates().probe_now(&sink);
        }
    }
    let known: Vec<&str> = worker
        .config
        .sinks()
        .iter()
        .map(|sink| sink.id.as_str())
        .collect();
    let unknown = effects::open_for_unknown_sinks(&mut *connection, &known).await?;
    metrics::gauge!(EFFECTS_FOR_UNKNOWN_SINKS)
        .set(unknown.iter().map(|(_, count)| *count).sum::<i64>() as f64);
    if !unknown.is_empty() {
        let sinks: Vec<&str> = unknown.iter().map(|(sink, _)| sink.as_str()).collect();
        tracing::warn!(
            ?sinks,
            "undelivered effects name sinks this worker is not configured for; a worker that is will deliver them"
        );
    }
    Ok(())
}

/// The days of history partitions kept ready ahead of now.
const HISTORY_DAYS_READY: i32 = 7;

/// How often a worker creates the history partitions ahead (each refresh exports what
/// is missing): hourly, and at its first refresh.
const HISTORY_MAINTENANCE_EVERY: Duration = Duration::from_secs(3600);

/// After a failure, how soon partitions are tried again.
const HISTORY_MAINTENANCE_RETRY: Duration = Duration::from_secs(60);

/// When the partitions are next due (`None`: at the first refresh).
static HISTORY_DUE: Mutex<Option<std::time::Instant>> = Mutex::new(None);

/// Creates the history partitions a week ahead (hourly; idempotent, and no writer waits
/// for it), then exports the rows a missing partition left in a default one and how far
/// ahead the payload days reach.
async fn maintain_history(connection: &mut PgConnection) -> Result<(), sqlx::Error> {
    let due = HISTORY_DUE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .is_none_or(|due| std::time::Instant::now() >= due);
    if due {
        // A failure (a lock not had within 1 s) costs only this: the gauges below still
        // refresh, and the partitions are tried again a minute later.
        let next_try = match admin::ensure_history_partitions(
            &mut *connection,
            None,
            HISTORY_DAYS_READY,
        )
        .await
        {
            Ok(created) => {
                if created > 0 {
                    tracing::info!(created, "created history partitions ahead");
                }
                HISTORY_MAINTENANCE_EVERY
            }
            Err(error) => {
                tracing::warn!(%error, "could not create the history partitions ahead; trying again in a minute");
                HISTORY_MAINTENANCE_RETRY
            }
        };
        *HISTORY_DUE
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) =
            Some(std::time::Instant::now() + next_try);
    }
    let misplaced = admin::unpartitioned_rows(&mut *connection).await?;
    for parent in HISTORY_TABLES {
        let rows = misplaced
            .iter()
            .find(|(table, _)| table == parent)
            .map_or(0, |(_, rows)| *rows);
        metrics::gauge!(HISTORY_UNPARTITIONED_ROWS, "table" => parent).set(rows as f64);
    }
    let ahead = admin::history_seconds_ahead(&mut *connection).await?;
    metrics::gauge!(HISTORY_AHEAD_SECONDS).set(ahead);
    Ok(())
}

/// The partitioned tables whose default partitions the gauge watches.
const HISTORY_TABLES: [&str; 4] = ["receipts", "receipt_payloads", "effects", "effect_attempts"];

/// The keys (integration or sink) a refresh exported besides the configured ones: set to
/// 0 once their rows are gone, never left at their last count.
static REVIEW_SEEN: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
static HELD_SEEN: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// The held ordered subjects and the receipts waiting behind them, per integration: every
/// configured integration's (0 when none) and every one named before, so a series goes
/// back to 0 rather than stopping.
async fn export_held_subjects(
    worker: &Worker,
    connection: &mut PgConnection,
) -> Result<(), sqlx::Error> {
    let held = admin::held_counts(connection, admin::HELD_RECEIPTS_READ).await?;
    let mut seen = HELD_SEEN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    seen.extend(held.iter().map(|(integration, _, _)| integration.clone()));
    seen.extend(
        worker
            .config
            .integrations()
            .iter()
            .map(|integration| integration.id.clone()),
    );
    for integration in seen.iter() {
        let (subjects, waiting) = held
            .iter()
            .find(|(row, _, _)| row == integration)
            .map_or((0, 0), |(_, subjects, waiting)| (*subjects, *waiting));
        metrics::gauge!(SUBJECTS_HELD, "integration" => integration.clone()).set(subjects as f64);
        metrics::gauge!(SUBJECT_HELD_RECEIPTS, "integration" => integration.clone())
            .set(waiting as f64);
    }
    Ok(())
}

static OPEN_SEEN: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
static FAILED_SEEN: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// What to export from rows of `(key, state, count)`: every state of every configured
/// key, of every key a row names, and of every key named before (0 when no row has it).
fn counts_to_export<State: Copy + PartialEq>(
    seen: &Mutex<BTreeSet<String>>,
    rows: &[(String, State, i64)],
    configured: &[&str],
    states: &[State],
) -> Vec<(String, State, i64)> {
    let mut seen = seen
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    seen.extend(rows.iter().map(|(key, _, _)| key.clone()));
    seen.extend(configured.iter().map(|key| (*key).to_owned()));
    let mut exported = Vec::with_capacity(seen.len() * states.len());
    for key in seen.iter() {
        for &state in states {
            let count = rows
                .iter()
                .find(|(row_key, row_state, _)| row_key == key && *row_state == state)
                .map_or(0, |(_, _, count)| *count);
            exported.push((key.clone(), state, count));
        }
    }
    exported
}

/// Sets every series to 0 so each is present before the first refresh succeeds.
pub fn initialise(worker: &Worker) {
    metrics::counter!(LEASE_RECLAIMS_TOTAL).increment(0);
    queue_ages::initialise(&worker.config);
    for (state, _) in admin::ReceiptCounts::default().by_state() {
        metrics::gauge!(RECEIPTS, "state" => state.as_str()).set(0.0);
    }
    // The open states only: finished effects are counted as they finish
    // ([`EFFECTS_FINISHED_TOTAL`]).
    for sink in worker.config.sinks() {
        for state in EffectStatus::OPEN {
            metrics::gauge!(EFFECTS, "sink" => sink.id.clone(), "state" => state.as_str()).set(0.0);
        }
    }
    for integration in worker.config.integrations() {
        metrics::gauge!(SUBJECTS_HELD, "integration" => integration.id.clone()).set(0.0);
        metrics::gauge!(SUBJECT_HELD_RECEIPTS, "integration" => integration.id.clone()).set(0.0);
        for state in ReceiptStatus::NEEDS_A_PERSON {
            metrics::gauge!(RECEIPTS_FOR_REVIEW, "integration" => integration.id.clone(), "state" => state.as_str())
                .set(0.0);
        }
    }
    // Every series the alerts read exists from the start (an increase needs a first value).
    for sink in worker.config.sinks() {
        for status in FINISHED_STATES {
            metrics::counter!(EFFECTS_FINISHED_TOTAL, "sink" => sink.id.clone(), "status" => status.as_str())
                .increment(0);
        }
    }
    for sink in worker.config.sinks() {
        metrics::gauge!(EFFECTS_FAILED, "sink" => sink.id.clone()).set(0.0);
        metrics::gauge!(OLDEST_EFFECT_AGE_SECONDS, "sink" => sink.id.clone()).set(0.0);
        metrics::gauge!(OLDEST_DUE_EFFECT_WAIT_SECONDS, "sink" => sink.id.clone()).set(0.0);
    }
    metrics::gauge!(EFFECTS_FOR_UNKNOWN_SINKS).set(0.0);
    if worker.settings.role().runs_receipts() {
        for parent in HISTORY_TABLES {
            metrics::gauge!(HISTORY_UNPARTITIONED_ROWS, "table" => parent).set(0.0);
        }
        metrics::gauge!(HISTORY_AHEAD_SECONDS).set(0.0);
    }
    worker.sink_gates().initialise_metrics();
}

/// Refreshes every `interval` until the task is dropped; failures are logged and retried.
pub async fn refresh_forever(worker: &Worker, interval: Duration) {
    queue_ages::refresh_forever(interval, || refresh(worker)).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(key: &str, state: &'static str, count: i64) -> (String, &'static str, i64) {
        (key.to_owned(), state, count)
    }

    /// An integration removed from the configuration while receipts of it still need a
    /// person stays counted (its alert must not resolve), and drops to 0 — not to its
    /// last count — once they are dealt with.
    #[test]
    fn keys_outside_the_configuration_are_counted_then_zeroed() {
        let seen = Mutex::new(BTreeSet::new());
        let states = ["failed", "quarantined"];
        let first = counts_to_export(&seen, &[row("gone", "failed", 3)], &["kept"], &states);
        assert!(
            first.contains(&("gone".to_owned(), "failed", 3)),
            "{first:?}"
        );
        assert!(
            first.contains(&("kept".to_owned(), "failed", 0)),
            "{first:?}"
        );
        assert_eq!(first.len(), 4);
        let later = counts_to_export(&seen, &[], &["kept"], &states);
        assert!(
            later.contains(&("gone".to_owned(), "failed", 0)),
            "{later:?}"
        );
        assert!(
            later.contains(&("gone".to_owned(), "quarantined", 0)),
            "{later:?}"
        );
    }
}
