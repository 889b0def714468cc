//! Queue gauges, refreshed every few seconds from index-backed queries: receipts by state
//! and the oldest pending age of every configured integration (0 when none).

use std::time::Duration;

use inbound_core::store::admin;

use crate::Worker;
use crate::telemetry::{LEASE_RECLAIMS_TOTAL, OLDEST_PENDING_AGE_SECONDS, RECEIPTS};

/// Refreshes the gauges once.
pub async fn refresh(worker: &Worker) -> Result<(), sqlx::Error> {
    let mut connection = worker.pool.acquire().await?;
    let counts = admin::receipt_counts(&mut connection).await?;
    for (state, count) in counts.by_state() {
        metrics::gauge!(RECEIPTS, "state" => state).set(count as f64);
    }
    for integration in worker.config.integrations() {
        let age = admin::oldest_pending_age_seconds(&mut connection, &integration.id).await?;
        metrics::gauge!(OLDEST_PENDING_AGE_SECONDS, "integration" => integration.id.clone())
            .set(age);
    }
    Ok(())
}

/// Sets every series to 0 so each is present before the first refresh succeeds.
pub fn initialise(worker: &Worker) {
    metrics::counter!(LEASE_RECLAIMS_TOTAL).increment(0);
    for (state, _) in admin::ReceiptCounts::default().by_state() {
        metrics::gauge!(RECEIPTS, "state" => state).set(0.0);
    }
    for integration in worker.config.integrations() {
        metrics::gauge!(OLDEST_PENDING_AGE_SECONDS, "integration" => integration.id.clone())
            .set(0.0);
    }
}

/// Refreshes every `interval` until the task is dropped; failures are logged and retried.
pub async fn refresh_forever(worker: &Worker, interval: Duration) {
    initialise(worker);
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        if let Err(error) = refresh(worker).await {
            tracing::warn!(%error, "could not refresh the queue gauges");
        }
    }
}
