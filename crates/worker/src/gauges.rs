//! Queue gauges, refreshed every few seconds from index-backed queries: receipts and
//! effects by state, the oldest pending age of every configured integration and the
//! oldest undelivered effect of every sink (0 when none).

use std::time::Duration;

use inbound_core::store::{admin, effects};

use crate::Worker;
use crate::telemetry::{
    EFFECTS, EFFECTS_FINISHED_TOTAL, EFFECTS_FOR_UNKNOWN_SINKS, GAUGES_REFRESHED_TIMESTAMP_SECONDS,
    LEASE_RECLAIMS_TOTAL, OLDEST_DUE_EFFECT_WAIT_SECONDS, OLDEST_EFFECT_AGE_SECONDS,
    OLDEST_PENDING_AGE_SECONDS, OLDEST_WAITING_AGE_SECONDS, RECEIPTS, RECEIPTS_FOR_REVIEW,
};

/// The end states the dispatcher reaches (an operator's `abandoned` is not its own).
pub const FINISHED_STATES: [&str; 2] = ["completed", "failed"];

/// Refreshes the gauges once.
pub async fn refresh(worker: &Worker) -> Result<(), sqlx::Error> {
    let mut connection = worker.pool.acquire().await?;
    let counts = admin::receipt_counts(&mut connection).await?;
    for (state, count) in counts.by_state() {
        metrics::gauge!(RECEIPTS, "state" => state).set(count as f64);
    }
    for integration in worker.config.integrations() {
        let ages = admin::queue_ages(&mut connection, &integration.id).await?;
        metrics::gauge!(OLDEST_PENDING_AGE_SECONDS, "integration" => integration.id.clone())
            .set(ages.pending);
        metrics::gauge!(OLDEST_WAITING_AGE_SECONDS, "integration" => integration.id.clone())
            .set(ages.waiting);
    }
    let for_review = admin::review_counts(&mut connection).await?;
    for integration in worker.config.integrations() {
        for state in REVIEW_STATES {
            let count = count_of(&for_review, &integration.id, state);
            metrics::gauge!(RECEIPTS_FOR_REVIEW, "integration" => integration.id.clone(), "state" => state)
                .set(count as f64);
        }
    }
    let open = effects::open_counts_by_sink(&mut connection).await?;
    for sink in worker.config.sinks() {
        for &state in effects::OPEN_STATUSES {
            let count = count_of(&open, &sink.id, state);
            metrics::gauge!(EFFECTS, "sink" => sink.id.clone(), "state" => state).set(count as f64);
        }
    }
    for sink in worker.config.sinks() {
        let age = effects::oldest_open_age_seconds(&mut connection, &sink.id).await?;
        metrics::gauge!(OLDEST_EFFECT_AGE_SECONDS, "sink" => sink.id.clone()).set(age);
        let wait = effects::oldest_due_wait_seconds(&mut connection, &sink.id).await?;
        metrics::gauge!(OLDEST_DUE_EFFECT_WAIT_SECONDS, "sink" => sink.id.clone()).set(wait);
    }
    let known: Vec<&str> = worker
        .config
        .sinks()
        .iter()
        .map(|sink| sink.id.as_str())
        .collect();
    let unknown = effects::open_for_unknown_sinks(&mut connection, &known).await?;
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

/// The receipt states that need a person.
const REVIEW_STATES: [&str; 2] = ["failed", "quarantined"];

/// The count for `(key, state)` in rows of `(key, state, count)` (0 when absent).
fn count_of(rows: &[(String, String, i64)], key: &str, state: &str) -> i64 {
    rows.iter()
        .find(|(row_key, row_state, _)| row_key == key && row_state == state)
        .map_or(0, |(_, _, count)| *count)
}

/// Sets every series to 0 so each is present before the first refresh succeeds.
pub fn initialise(worker: &Worker) {
    metrics::counter!(LEASE_RECLAIMS_TOTAL).increment(0);
    metrics::gauge!(GAUGES_REFRESHED_TIMESTAMP_SECONDS).set(0.0);
    for (state, _) in admin::ReceiptCounts::default().by_state() {
        metrics::gauge!(RECEIPTS, "state" => state).set(0.0);
    }
    for integration in worker.config.integrations() {
        metrics::gauge!(OLDEST_PENDING_AGE_SECONDS, "integration" => integration.id.clone())
            .set(0.0);
        metrics::gauge!(OLDEST_WAITING_AGE_SECONDS, "integration" => integration.id.clone())
            .set(0.0);
    }
    // The open states only: finished effects are counted as they finish
    // ([`EFFECTS_FINISHED_TOTAL`]).
    for sink in worker.config.sinks() {
        for &state in effects::OPEN_STATUSES {
            metrics::gauge!(EFFECTS, "sink" => sink.id.clone(), "state" => state).set(0.0);
        }
    }
    for integration in worker.config.integrations() {
        for state in REVIEW_STATES {
            metrics::gauge!(RECEIPTS_FOR_REVIEW, "integration" => integration.id.clone(), "state" => state)
                .set(0.0);
        }
    }
    // Every series the alerts read exists from the start (an increase needs a first value).
    for sink in worker.config.sinks() {
        for status in FINISHED_STATES {
            metrics::counter!(EFFECTS_FINISHED_TOTAL, "sink" => sink.id.clone(), "status" => status)
                .increment(0);
        }
    }
    for sink in worker.config.sinks() {
        metrics::gauge!(OLDEST_EFFECT_AGE_SECONDS, "sink" => sink.id.clone()).set(0.0);
        metrics::gauge!(OLDEST_DUE_EFFECT_WAIT_SECONDS, "sink" => sink.id.clone()).set(0.0);
    }
    metrics::gauge!(EFFECTS_FOR_UNKNOWN_SINKS).set(0.0);
    worker.sink_gates().initialise_metrics();
}

/// Refreshes every `interval` until the task is dropped; failures are logged and retried.
pub async fn refresh_forever(worker: &Worker, interval: Duration) {
    initialise(worker);
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        match refresh(worker).await {
            Ok(()) => {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0.0, |since| since.as_secs_f64());
                metrics::gauge!(GAUGES_REFRESHED_TIMESTAMP_SECONDS).set(now);
            }
            // The values stay as they were; the timestamp says how old they are.
            Err(error) => tracing::warn!(%error, "could not refresh the queue gauges"),
        }
    }
}
