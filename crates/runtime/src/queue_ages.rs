//! The queue ages that page and scale, exported by every process that can read the queue:
//! the workers and the ingress. The age that scales workers must not vanish with them —
//! when every worker is down (a crash loop, a bad deploy) the ingress, which is up and
//! still accepting, keeps exporting it, so `InboundOldestPendingAgeHigh` fires and KEDA
//! sees the backlog. Rules read `max by (integration)` over the fresh exporters.

use std::time::Duration;

use inbound_core::config::Config;
use inbound_store::admin;
use sqlx::{PgConnection, PgPool};

/// Gauge: how long the longest-claimable receipt has waited for a worker, per
/// integration (what scales workers and pages).
pub const OLDEST_PENDING_AGE_SECONDS: &str = "inbound_oldest_pending_age_seconds";
/// Gauge: how long ago the oldest receipt waiting out a retry delay was accepted, per
/// integration (failing work that more workers do not help).
pub const OLDEST_WAITING_AGE_SECONDS: &str = "inbound_oldest_waiting_age_seconds";
/// Gauge: when the process last read its gauges from the database (Unix time, seconds):
/// it stops advancing while the database cannot be read, so their values are known to be
/// stale.
pub const GAUGES_REFRESHED_TIMESTAMP_SECONDS: &str = "inbound_gauges_refreshed_timestamp_seconds";

/// HELP text of the three gauges.
pub fn describe() {
    metrics::describe_gauge!(
        OLDEST_PENDING_AGE_SECONDS,
        metrics::Unit::Seconds,
        "How long the longest-claimable receipt has waited for a worker, per integration (0 when none): since it was accepted, or since its retry came due. Exported by workers and the ingress."
    );
    metrics::describe_gauge!(
        OLDEST_WAITING_AGE_SECONDS,
        metrics::Unit::Seconds,
        "How long ago the oldest receipt waiting out a retry delay was accepted, per integration (0 when none). Exported by workers and the ingress."
    );
    metrics::describe_gauge!(
        GAUGES_REFRESHED_TIMESTAMP_SECONDS,
        metrics::Unit::Seconds,
        "When this process last refreshed its gauges from the database (Unix time); 0 before the first refresh."
    );
}

/// Sets every integration's ages and the refresh time to 0, so each series is present
/// before the first refresh succeeds.
pub fn initialise(config: &Config) {
    metrics::gauge!(GAUGES_REFRESHED_TIMESTAMP_SECONDS).set(0.0);
    for integration in config.integrations() {
        metrics::gauge!(OLDEST_PENDING_AGE_SECONDS, "integration" => integration.id.clone())
            .set(0.0);
        metrics::gauge!(OLDEST_WAITING_AGE_SECONDS, "integration" => integration.id.clone())
            .set(0.0);
    }
}

/// Reads and sets every configured integration's ages (index-backed, one row each).
pub async fn export(connection: &mut PgConnection, config: &Config) -> Result<(), sqlx::Error> {
    for integration in config.integrations() {
        let ages = admin::queue_ages(&mut *connection, &integration.id).await?;
        metrics::gauge!(OLDEST_PENDING_AGE_SECONDS, "integration" => integration.id.clone())
            .set(ages.pending);
        metrics::gauge!(OLDEST_WAITING_AGE_SECONDS, "integration" => integration.id.clone())
            .set(ages.waiting);
    }
    Ok(())
}

/// Records that the gauges were just read.
pub fn mark_refreshed() {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |since| since.as_secs_f64());
    metrics::gauge!(GAUGES_REFRESHED_TIMESTAMP_SECONDS).set(now);
}

/// Runs `refresh` every `interval` until the task is dropped, marking each success;
/// failures are logged and retried, the values left as they were (the refresh time says
/// how old they are).
pub async fn refresh_forever<Refresh: Future<Output = Result<(), sqlx::Error>>>(
    interval: Duration,
    mut refresh: impl FnMut() -> Refresh,
) {
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        match refresh().await {
            Ok(()) => mark_refreshed(),
            Err(error) => tracing::warn!(%error, "could not refresh the queue gauges"),
        }
    }
}

/// The ingress's loop: only the ages, each refresh bounded by `limit` on one pooled
/// connection.
pub async fn export_forever(pool: PgPool, config: &Config, interval: Duration, limit: Duration) {
    refresh_forever(interval, || {
        crate::database::with_connection(&pool, limit, async |connection| {
            export(connection, config).await
        })
    })
    .await;
}
