//! The queue's gauges and `inboundctl status`: receipts by state, those that need a person
//! per integration, and the ages that page and scale. Every count reads the small queue
//! table or a partial index, never all receipts.

use serde::Serialize;
use sqlx::PgConnection;

use inbound_core::states::{QueueState, ReceiptStatus};

/// Receipts by state, as `inbound_receipts{state}` and `inboundctl status` report them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ReceiptCounts {
    /// Claimable now (including expired leases).
    pub pending: i64,
    /// Held by a worker under a live lease.
    pub leased: i64,
    /// Backing off after a transient failure.
    pub waiting: i64,
    /// Permanent inconsistency, needs a person.
    pub quarantined: i64,
    /// Attempts exhausted, needs an owner.
    pub failed: i64,
}

impl ReceiptCounts {
    /// `(state, count)` for every state, in [`QueueState::ALL`]'s order.
    pub fn by_state(&self) -> [(QueueState, i64); 5] {
        [
            (QueueState::Pending, self.pending),
            (QueueState::Leased, self.leased),
            (QueueState::Waiting, self.waiting),
            (QueueState::Quarantined, self.quarantined),
            (QueueState::Failed, self.failed),
        ]
    }
}

/// Counts receipts by state from the queue table and the non-done partial index.
pub async fn receipt_counts(conn: &mut PgConnection) -> Result<ReceiptCounts, sqlx::Error> {
    // The queue table is small; the two statuses are read through receipts_status_received.
    sqlx::query_as!(
        ReceiptCounts,
        r#"SELECT
             (SELECT count(*) FROM receipt_queue WHERE visible_at <= now()) AS "pending!",
             (SELECT count(*) FROM receipt_queue WHERE visible_at > now() AND leased_by IS NOT NULL) AS "leased!",
             (SELECT count(*) FROM receipt_queue WHERE visible_at > now() AND leased_by IS NULL) AS "waiting!",
             (SELECT count(*) FROM receipts WHERE status = 'quarantined') AS "quarantined!",
             (SELECT count(*) FROM receipts WHERE status = 'failed') AS "failed!""#
    )
    .fetch_one(conn)
    .await
}

/// Receipts that need a person (failed, quarantined) per integration and state, through
/// the `(status, received_at)` index: few rows, however long the retention.
pub async fn review_counts(
    conn: &mut PgConnection,
) -> Result<Vec<(String, ReceiptStatus, i64)>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT integration, status AS "status: ReceiptStatus", count(*) AS "count!"
         FROM receipts
         WHERE status IN ('failed', 'quarantined') GROUP BY integration, status"#
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| (row.integration, row.status, row.count))
        .collect())
}

/// The ages that page and scale, per integration (0 when none), in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct QueueAges {
    /// How long the longest-claimable receipt has been claimable without a worker taking
    /// it (since it was accepted, or since its retry came due): what more workers help.
    pub pending: f64,
    /// How long ago the oldest receipt waiting out a retry delay was accepted: work that
    /// is failing (a missing order, a bug), which more workers do not help.
    pub waiting: f64,
}

/// [`QueueAges`] of `integration`'s queue rows. Claimable is `visible_at <= now()`, so an
/// expired lease (a dead worker's) counts from when it expired.
pub async fn queue_ages(
    conn: &mut PgConnection,
    integration: &str,
) -> Result<QueueAges, sqlx::Error> {
    // Each age is the first row in an index order, not an aggregate over the integration's
    // whole queue (which a backlog makes large): the claimable one walks
    // receipt_queue_claimable (visible_at) over the unordered claimable rows; the ordered
    // ones, when the integration has any (one descent of receipt_queue_subject_order), are
    // read from its 10,000 oldest queued rows (receipt_queue_integration_age: a due
    // ordered row's visible_at is its enqueued_at unless a lease or a retry moved it),
    // passing those of a held subject (a person's, not a worker's, to move:
    // InboundSubjectHeld says so); the waiting one walks receipt_queue_integration_age.
    sqlx::query_as!(
        QueueAges,
        r#"SELECT
             COALESCE(EXTRACT(EPOCH FROM now() - LEAST(
                 (SELECT visible_at FROM receipt_queue
                  WHERE integration = $1 AND subject IS NULL AND visible_at <= now()
                  ORDER BY visible_at LIMIT 1),
                 (SELECT o.visible_at FROM (
                      SELECT q.subject, q.visible_at, q.enqueued_at FROM receipt_queue q
                      WHERE q.integration = $1
                        AND EXISTS (SELECT 1 FROM receipt_queue s
                                    WHERE s.integration = $1 AND s.subject IS NOT NULL)
                      ORDER BY q.enqueued_at LIMIT 10000) o
                  WHERE o.subject IS NOT NULL AND o.visible_at <= now()
                    AND NOT EXISTS (SELECT 1 FROM subject_leases l
                                    WHERE l.integration = $1 AND l.subject = o.subject
                                      AND l.leased_until = 'infinity')
                  ORDER BY o.enqueued_at LIMIT 1))), 0)::float8 AS "pending!",
             COALESCE(EXTRACT(EPOCH FROM now() - (
                 SELECT enqueued_at FROM receipt_queue
                 WHERE integration = $1 AND visible_at > now() AND leased_by IS NULL
                 ORDER BY enqueued_at LIMIT 1)), 0)::float8 AS "waiting!""#,
        integration,
    )
    .fetch_one(conn)
    .await
}

/// The integrations with unfinished receipts.
pub async fn queued_integrations(conn: &mut PgConnection) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar!("SELECT DISTINCT integration FROM receipt_queue ORDER BY 1")
        .fetch_all(conn)
        .await
}

/// How many receipts of `integrations` (`None`: all) a worker could claim now or is
/// applying now (a queue row due, or one leased): zero when every such receipt is finished
/// or waiting out a retry delay. A bounded read of the queue, which holds only unfinished
/// receipts (the testing kit's `drain`).
pub async fn claimable_or_leased(
    conn: &mut PgConnection,
    integrations: Option<&[String]>,
) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT count(*) AS "busy!" FROM receipt_queue q
         WHERE (q.visible_at <= now() OR q.leased_by IS NOT NULL)
           AND ($1::text[] IS NULL OR q.integration = ANY($1))
           AND NOT (q.subject IS NOT NULL
                    AND EXISTS (SELECT 1 FROM subject_leases l
                                WHERE l.integration = q.integration AND l.subject = q.subject
                                  AND l.leased_until = 'infinity'))"#,
        integrations as Option<&[String]>
    )
    .fetch_one(conn)
    .await
}
