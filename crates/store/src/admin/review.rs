//! What the console's overview and review queue read: the queue per integration, what
//! the newest receipts say of each (within a bounded look-back), and what needs a person
//! (failed and quarantined receipts, effects in review) grouped by reason, oldest first.
//! Each reads the small queue table, a partial index or a bounded range of the primary key,
//! never all receipts.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgConnection;

use inbound_core::keys::{EffectId, ReceiptId};
use inbound_core::states::{EffectStatus, ReceiptStatus};

/// One integration's queue, as `inbound_receipts{state}` counts it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IntegrationQueue {
    /// The integration id.
    pub integration: String,
    /// Claimable now (including expired leases).
    pub pending: i64,
    /// Held by a worker under a live lease.
    pub leased: i64,
    /// Backing off after a transient failure.
    pub waiting: i64,
}

/// The queue per integration (integrations with nothing queued are absent).
pub async fn queue_by_integration(
    conn: &mut PgConnection,
) -> Result<Vec<IntegrationQueue>, sqlx::Error> {
    // The queue table holds only unfinished receipts.
    sqlx::query_as!(
        IntegrationQueue,
        r#"SELECT integration,
                count(*) FILTER (WHERE visible_at <= now()) AS "pending!",
                count(*) FILTER (WHERE visible_at > now() AND leased_by IS NOT NULL) AS "leased!",
                count(*) FILTER (WHERE visible_at > now() AND leased_by IS NULL) AS "waiting!"
         FROM receipt_queue GROUP BY integration ORDER BY integration"#
    )
    .fetch_all(conn)
    .await
}

/// What the newest receipts say of one integration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RecentReceipts {
    /// The integration id.
    pub integration: String,
    /// When its newest receipt was accepted.
    pub newest_at: DateTime<Utc>,
    /// How many of them its handlers found outside their domain (`done`, `ignored`; an
    /// operator's close is `closed`).
    pub ignored: i64,
    /// How many of them there are.
    pub count: i64,
}

/// [`RecentReceipts`] per integration among the newest `look_back` receipts: one read of
/// the primary key's end (each key period's, merged), whatever the table's size. An integration absent from them
/// has received nothing recently.
pub async fn recent_receipts(
    conn: &mut PgConnection,
    look_back: i64,
) -> Result<Vec<RecentReceipts>, sqlx::Error> {
    sqlx::query_as!(
        RecentReceipts,
        r#"SELECT integration, max(received_at) AS "newest_at!",
                count(*) FILTER (WHERE outcome = 'ignored') AS "ignored!",
                count(*) AS "count!"
         FROM (SELECT integration, received_at, outcome FROM receipts
               ORDER BY id DESC LIMIT $1) AS newest
         GROUP BY integration ORDER BY integration"#,
        look_back,
    )
    .fetch_all(conn)
    .await
}

/// Receipts that need a person, grouped by integration, status and reason.
#[derive(Debug, Clone, Serialize)]
pub struct ReceiptReviewGroup {
    /// The integration id.
    pub integration: String,
    /// `failed` or `quarantined`.
    pub status: ReceiptStatus,
    /// The reason (at most 160 characters).
    pub reason: String,
    /// How many.
    pub count: i64,
    /// The oldest one.
    pub oldest_id: ReceiptId,
    /// When the oldest was accepted.
    pub oldest_at: DateTime<Utc>,
}

/// Failed and quarantined receipts by integration, status and reason, oldest group first,
/// at most `limit` groups. Reads only receipts needing a person
/// (`receipts_status_received`).
pub async fn receipt_review_groups(
    conn: &mut PgConnection,
    limit: i64,
) -> Result<Vec<ReceiptReviewGroup>, sqlx::Error> {
    sqlx::query_as!(
        ReceiptReviewGroup,
        r#"SELECT integration, status AS "status!: ReceiptStatus",
                left(coalesce(outcome_reason, last_error, '(no reason recorded)'), 160) AS "reason!",
                count(*) AS "count!", min(id) AS "oldest_id!: ReceiptId",
                min(received_at) AS "oldest_at!"
         FROM receipts WHERE status IN ('failed', 'quarantined')
         GROUP BY 1, 2, 3 ORDER BY min(received_at), 1, 2, 3 LIMIT $1"#,
        limit,
    )
    .fetch_all(conn)
    .await
}

/// Effects that need a person, grouped by sink, status and last error.
#[derive(Debug, Clone, Serialize)]
pub struct EffectReviewGroup {
    /// The sink id.
    pub sink: String,
    /// `review` or `failed`.
    pub status: EffectStatus,
    /// The last error (at most 160 characters).
    pub reason: String,
    /// How many.
    pub count: i64,
    /// The oldest one.
    pub oldest_id: EffectId,
    /// When the oldest was recorded.
    pub oldest_at: DateTime<Utc>,
}

/// Effects in review or failed, by sink, status and last error, oldest group first, at
/// most `limit` groups (`effects_status`).
pub async fn effect_review_groups(
    conn: &mut PgConnection,
    limit: i64,
) -> Result<Vec<EffectReviewGroup>, sqlx::Error> {
    sqlx::query_as!(
        EffectReviewGroup,
        r#"SELECT sink, status AS "status!: EffectStatus",
                left(coalesce(last_error, '(no error recorded)'), 160) AS "reason!",
                count(*) AS "count!", min(id) AS "oldest_id!: EffectId",
                min(created_at) AS "oldest_at!"
         FROM effects WHERE status IN ('review', 'failed')
         GROUP BY 1, 2, 3 ORDER BY min(created_at), 1, 2, 3 LIMIT $1"#,
        limit,
    )
    .fetch_all(conn)
    .await
}
