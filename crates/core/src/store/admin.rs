//! What operators read and change: queue gauges, receipt listings and details, replays of
//! failed or quarantined receipts, quarantining or failing pending ones, and bounded
//! retention purges. Every count reads the
//! small queue table or a partial index, never all receipts.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::{Connection, PgConnection};

use super::queue;
use crate::states::{EffectStatus, ReceiptOutcome, ReceiptStatus};

/// Receipts by state, as `inbound_receipts{state}` and `inboundctl status` report them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, sqlx::FromRow)]
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
    /// `(state label, count)` for every state, in a fixed order.
    pub fn by_state(&self) -> [(&'static str, i64); 5] {
        [
            ("pending", self.pending),
            ("leased", self.leased),
            ("waiting", self.waiting),
            ("quarantined", self.quarantined),
            ("failed", self.failed),
        ]
    }
}

/// Counts receipts by state from the queue table and the non-done partial index.
pub async fn receipt_counts(conn: &mut PgConnection) -> Result<ReceiptCounts, sqlx::Error> {
    sqlx::query_as(
        "SELECT
             (SELECT count(*) FROM receipt_queue WHERE visible_at <= now()) AS pending,
             (SELECT count(*) FROM receipt_queue WHERE visible_at > now() AND leased_by IS NOT NULL) AS leased,
             (SELECT count(*) FROM receipt_queue WHERE visible_at > now() AND leased_by IS NULL) AS waiting,
             (SELECT count(*) FROM receipts WHERE status = 'quarantined') AS quarantined,
             (SELECT count(*) FROM receipts WHERE status = 'failed') AS failed",
    )
    .fetch_one(conn)
    .await
}

/// Receipts that need a person (failed, quarantined) per integration and state, through
/// the `(status, received_at)` index: few rows, however long the retention.
pub async fn review_counts(
    conn: &mut PgConnection,
) -> Result<Vec<(String, ReceiptStatus, i64)>, sqlx::Error> {
    sqlx::query_as(
        "SELECT integration, status, count(*) FROM receipts
         WHERE status IN ('failed', 'quarantined') GROUP BY integration, status",
    )
    .fetch_all(conn)
    .await
}

/// The ages that page and scale, per integration (0 when none), in seconds.
#[derive(Debug, Clone, Copy, PartialEq, sqlx::FromRow, Serialize)]
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
    // receipt_queue_claimable (visible_at) over the claimable rows only; the waiting one
    // walks receipt_queue_integration_age (integration, enqueued_at).
    sqlx::query_as(
        "SELECT
             COALESCE(EXTRACT(EPOCH FROM now() - (
                 SELECT visible_at FROM receipt_queue
                 WHERE integration = $1 AND visible_at <= now()
                 ORDER BY visible_at LIMIT 1)), 0)::float8 AS pending,
             COALESCE(EXTRACT(EPOCH FROM now() - (
                 SELECT enqueued_at FROM receipt_queue
                 WHERE integration = $1 AND visible_at > now() AND leased_by IS NULL
                 ORDER BY enqueued_at LIMIT 1)), 0)::float8 AS waiting",
    )
    .bind(integration)
    .fetch_one(conn)
    .await
}

/// The integrations with unfinished receipts.
pub async fn queued_integrations(conn: &mut PgConnection) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar("SELECT DISTINCT integration FROM receipt_queue ORDER BY 1")
        .fetch_all(conn)
        .await
}

/// One line of `inboundctl receipts list`.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct ReceiptSummary {
    /// `receipts.id`.
    pub id: i64,
    /// The integration id.
    pub integration: String,
    /// The provider's event id.
    pub event_id: String,
    /// The event type.
    pub event_type: String,
    /// Where it stands.
    pub status: ReceiptStatus,
    /// How it ended, once done.
    pub outcome: Option<ReceiptOutcome>,
    /// Attempts so far.
    pub attempts: i32,
    /// When it was accepted.
    pub received_at: DateTime<Utc>,
    /// Why it ended as it did, or why its last attempt failed (at most 200 characters).
    pub reason: Option<String>,
}

/// Which receipts an operator means: one status, and optionally integrations, an event
/// type, a window of acceptance times and a cursor (ids below `before_id`).
#[derive(Debug, Clone)]
pub struct ReceiptFilter {
    /// The status.
    pub status: ReceiptStatus,
    /// Only these integrations (`None`: any).
    pub integrations: Option<Vec<String>>,
    /// Only this event type.
    pub event_type: Option<String>,
    /// Accepted at or after this.
    pub since: Option<DateTime<Utc>>,
    /// Accepted before this.
    pub until: Option<DateTime<Utc>>,
    /// Only ids below this (the previous page's last id).
    pub before_id: Option<i64>,
}

/// Receipts matching `filter`, newest first, at most `limit`: the primary key read
/// backwards, so a page of a common selection costs what it shows; a selective filter
/// over `done` receipts reads until it has found a page (bounded by the caller's
/// statement timeout).
pub async fn list_receipts(
    conn: &mut PgConnection,
    filter: &ReceiptFilter,
    limit: i64,
) -> Result<Vec<ReceiptSummary>, sqlx::Error> {
    sqlx::query_as(
        "SELECT id, integration, event_id, event_type, status, outcome, attempts, received_at,
                left(coalesce(outcome_reason, last_error), 200) AS reason
         FROM receipts
         WHERE status = $1
           AND ($2::text[] IS NULL OR integration = ANY ($2))
           AND ($3::text IS NULL OR event_type = $3)
           AND ($4::timestamptz IS NULL OR received_at >= $4)
           AND ($5::timestamptz IS NULL OR received_at < $5)
           AND ($6::int8 IS NULL OR id < $6)
         ORDER BY id DESC LIMIT $7",
    )
    .bind(filter.status)
    .bind(filter.integrations.as_deref())
    .bind(filter.event_type.as_deref())
    .bind(filter.since)
    .bind(filter.until)
    .bind(filter.before_id)
    .bind(limit)
    .fetch_all(conn)
    .await
}

/// The distinct receipt scopes, by a loose scan of the receipt-key index (one index probe
/// per scope, not a read of every receipt): there are few (integrations × accounts).
const DISTINCT_SCOPES: &str = "WITH RECURSIVE scopes (scope) AS (
         (SELECT source_scope FROM receipts ORDER BY source_scope LIMIT 1)
         UNION ALL
         SELECT (SELECT r.source_scope FROM receipts r WHERE r.source_scope > s.scope
                 ORDER BY r.source_scope LIMIT 1)
         FROM scopes s WHERE s.scope IS NOT NULL
     )";

/// The receipts holding the provider's event id `event_id` (Stripe `evt_…`, GitHub's
/// `X-GitHub-Delivery`, Slack's `event_id`, a Standard Webhooks `webhook-id`), in any
/// scope, through the receipt-key index.
pub async fn receipts_by_event_id(
    conn: &mut PgConnection,
    event_id: &str,
) -> Result<Vec<ReceiptSummary>, sqlx::Error> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "{DISTINCT_SCOPES}
         SELECT r.id, r.integration, r.event_id, r.event_type, r.status, r.outcome, r.attempts,
                r.received_at, left(coalesce(r.outcome_reason, r.last_error), 200) AS reason
         FROM scopes s JOIN receipts r ON r.source_scope = s.scope AND r.event_id = $1
         ORDER BY r.id"
    )))
    .bind(event_id)
    .fetch_all(conn)
    .await
}

/// The integrations that hold receipts (the first part of every scope), cheaply.
pub async fn integrations_with_receipts(
    conn: &mut PgConnection,
) -> Result<Vec<String>, sqlx::Error> {
    let scopes: Vec<Option<String>> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "{DISTINCT_SCOPES} SELECT scope FROM scopes"
    )))
    .fetch_all(&mut *conn)
    .await?;
    let mut integrations: Vec<String> = scopes
        .into_iter()
        .flatten()
        .map(|scope| crate::keys::SourceScope::first_part(&scope))
        .collect();
    integrations.sort();
    integrations.dedup();
    Ok(integrations)
}

/// One operator decision about a receipt: a replay or a resolution (quarantine, fail).
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct ReceiptDecision {
    /// When.
    pub at: DateTime<Utc>,
    /// `replay`, `quarantine` or `fail`.
    pub action: String,
    /// The status it left.
    pub previous_status: String,
    /// Who.
    pub by: String,
    /// Why.
    pub reason: String,
}

/// Every operator decision about receipt `id`, oldest first.
pub async fn receipt_history(
    conn: &mut PgConnection,
    id: i64,
) -> Result<Vec<ReceiptDecision>, sqlx::Error> {
    sqlx::query_as(
        "SELECT replayed_at AS at, 'replay' AS action, previous_status, replayed_by AS by, reason
         FROM receipt_replays WHERE receipt_id = $1
         UNION ALL
         SELECT resolved_at, action, previous_status, resolved_by, reason
         FROM receipt_resolutions WHERE receipt_id = $1
         ORDER BY at",
    )
    .bind(id)
    .fetch_all(conn)
    .await
}

/// Everything `inboundctl receipts show` prints.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct ReceiptDetail {
    /// `receipts.id`.
    pub id: i64,
    /// The integration id.
    pub integration: String,
    /// First half of the receipt key.
    pub source_scope: String,
    /// Second half of the receipt key.
    pub event_id: String,
    /// The event type.
    pub event_type: String,
    /// The route that matched.
    pub route_key: String,
    /// Where it stands.
    pub status: ReceiptStatus,
    /// How it ended, once done.
    pub outcome: Option<ReceiptOutcome>,
    /// Why it ended as it did (duplicate, ignored, quarantined).
    pub outcome_reason: Option<String>,
    /// Attempts so far.
    pub attempts: i32,
    /// The last transient error.
    pub last_error: Option<String>,
    /// When it was accepted.
    pub received_at: DateTime<Utc>,
    /// When it reached its terminal state.
    pub finished_at: Option<DateTime<Utc>>,
    /// When it is next claimable, while queued.
    pub visible_at: Option<DateTime<Utc>>,
    /// The worker holding its lease, while leased.
    pub leased_by: Option<String>,
    /// The payload as PostgreSQL renders it (`null` once purged, or when it cannot be
    /// rendered). Kept as text, so that any stored row can be shown, even one the worker
    /// cannot decode.
    #[serde(serialize_with = "raw_json")]
    pub payload: Option<String>,
    /// Why the payload could not be rendered (stored before the storability contract).
    #[sqlx(default)]
    pub payload_unreadable: Option<String>,
}

/// Writes stored JSON text into a JSON document as it is (PostgreSQL renders valid JSON).
fn raw_json<S: serde::Serializer>(text: &Option<String>, serializer: S) -> Result<S::Ok, S::Error> {
    use serde::Serialize;
    match text {
        None => serializer.serialize_none(),
        Some(text) => serde_json::value::RawValue::from_string(text.clone())
            .map_err(serde::ser::Error::custom)?
            .serialize(serializer),
    }
}

/// One effect of a receipt.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct EffectSummary {
    /// `effects.id`.
    pub id: i64,
    /// The idempotency key.
    pub operation_key: String,
    /// The sink id.
    pub sink: String,
    /// What happened.
    pub kind: String,
    /// Where it stands.
    pub status: EffectStatus,
    /// Delivery attempts so far.
    pub attempts: i32,
    /// The last delivery error.
    pub last_error: Option<String>,
}

/// The receipt with this id, with its queue state. A payload PostgreSQL cannot render
/// (stored before the storability contract) is left out, with the reason.
pub async fn receipt_detail(
    conn: &mut PgConnection,
    receipt_id: i64,
) -> Result<Option<ReceiptDetail>, sqlx::Error> {
    match read_receipt_detail(conn, receipt_id, true).await {
        Err(error) if queue::cannot_render_a_row(&error) => {
            let mut detail = read_receipt_detail(conn, receipt_id, false).await?;
            if let Some(detail) = &mut detail {
                detail.payload_unreadable = Some(error.to_string());
            }
            Ok(detail)
        }
        read => read,
    }
}

async fn read_receipt_detail(
    conn: &mut PgConnection,
    receipt_id: i64,
    with_payload: bool,
) -> Result<Option<ReceiptDetail>, sqlx::Error> {
    sqlx::query_as(
        "SELECT r.id, r.integration, r.source_scope, r.event_id, r.event_type, r.route_key, r.status,
                r.outcome, r.outcome_reason, r.attempts, COALESCE(q.last_error, r.last_error) AS last_error,
                r.received_at, r.finished_at, q.visible_at, q.leased_by,
                CASE WHEN $2 THEN r.payload::text END AS payload
         FROM receipts r LEFT JOIN receipt_queue q ON q.receipt_id = r.id
         WHERE r.id = $1",
    )
    .bind(receipt_id)
    .bind(with_payload)
    .fetch_optional(conn)
    .await
}

/// The effects of a receipt, oldest first.
pub async fn receipt_effects(
    conn: &mut PgConnection,
    receipt_id: i64,
) -> Result<Vec<EffectSummary>, sqlx::Error> {
    sqlx::query_as(
        "SELECT id, operation_key, sink, kind, status, attempts, last_error
         FROM effects WHERE receipt_id = $1 ORDER BY id",
    )
    .bind(receipt_id)
    .fetch_all(conn)
    .await
}

/// Why a replay was refused. Nothing is replayed when any id is refused.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// No receipt has this id.
    #[error("receipt {0} does not exist")]
    Unknown(i64),
    /// Chosen by a filter on one status, it has moved on since.
    #[error(
        "receipt {id} is {status} now, no longer {expected}: list again (--dry-run) and decide on what is there"
    )]
    Moved {
        /// The receipt.
        id: i64,
        /// Its status now.
        status: ReceiptStatus,
        /// The status the filter selected it in.
        expected: ReceiptStatus,
    },
    /// Only failed, quarantined and pending receipts can be replayed.
    #[error(
        "receipt {id} is {status}; only failed or quarantined receipts (queued again) and pending ones (run now) can be replayed"
    )]
    WrongState {
        /// The receipt.
        id: i64,
        /// Its status.
        status: ReceiptStatus,
    },
    /// A worker holds the receipt's lease: it is being processed now.
    #[error("receipt {0} is being processed by a worker now; replay it if it comes back to wait")]
    Leased(i64),
    /// The database failed.
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
}

/// Sends failed/quarantined receipts back to pending with attempts reset, and makes
/// pending ones waiting out a retry delay due now (attempts kept), recording who and why,
/// all in one transaction: either every id is replayed or none. With `expected`, each
/// must still be in that status (a replay chosen by a filter).
pub async fn replay(
    conn: &mut PgConnection,
    receipt_ids: &[i64],
    expected: Option<ReceiptStatus>,
    replayed_by: &str,
    reason: &str,
) -> Result<(), ReplayError> {
    let mut transaction = conn.begin().await?;
    for &id in receipt_ids {
        let status: Option<ReceiptStatus> =
            sqlx::query_scalar("SELECT status FROM receipts WHERE id = $1 FOR UPDATE")
                .bind(id)
                .fetch_optional(&mut *transaction)
                .await?;
        match status {
            None => return Err(ReplayError::Unknown(id)),
            // Chosen by a filter on one status, and moved on since: not what was shown.
            Some(status)
                if let Some(expected) = expected
                    && expected != status =>
            {
                return Err(ReplayError::Moved {
                    id,
                    status,
                    expected,
                });
            }
            Some(ReceiptStatus::Pending) => {
                // Waiting out a retry delay (after a fix, say): due now, attempts kept.
                let made_due = sqlx::query(
                    "WITH due AS (
                         UPDATE receipt_queue SET visible_at = now()
                         WHERE receipt_id = $1
                           AND NOT (leased_by IS NOT NULL AND visible_at > now())
                         RETURNING receipt_id
                     )
                     INSERT INTO receipt_replays (receipt_id, previous_status, replayed_by, reason)
                     SELECT receipt_id, 'pending', $2, $3 FROM due",
                )
                .bind(id)
                .bind(replayed_by)
                .bind(reason)
                .execute(&mut *transaction)
                .await?;
                if made_due.rows_affected() == 0 {
                    return Err(ReplayError::Leased(id));
                }
            }
            Some(status) if !ReceiptStatus::NEEDS_A_PERSON.contains(&status) => {
                return Err(ReplayError::WrongState { id, status });
            }
            Some(status) => {
                sqlx::query(
                    "WITH logged AS (
                         INSERT INTO receipt_replays (receipt_id, previous_status, replayed_by, reason)
                         VALUES ($1, $2, $3, $4)
                     ), queued AS (
                         INSERT INTO receipt_queue (receipt_id, integration, visible_at, enqueued_at,
                                                    payload_bytes)
                         -- Its stored size: rendering it could fail for the very payload
                         -- that made the receipt fail.
                         SELECT id, integration, now(), now(), coalesce(pg_column_size(payload), 0)
                         FROM receipts WHERE id = $1
                     )
                     UPDATE receipts
                     SET status = 'pending', outcome = NULL, outcome_reason = NULL, attempts = 0,
                         finished_at = NULL
                     WHERE id = $1",
                )
                .bind(id)
                .bind(status)
                .bind(replayed_by)
                .bind(reason)
                .execute(&mut *transaction)
                .await?;
            }
        }
    }
    transaction.commit().await?;
    Ok(())
}

/// What an operator decides about a pending receipt that must not be processed (as it
/// stands) or retried any longer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PendingResolution {
    /// `quarantined`, with the operator's reason as `outcome_reason`: a person must look.
    Quarantine,
    /// `failed`, with the operator's reason as `last_error`.
    Fail,
}

/// The `receipt_resolutions.action` of [`close`].
pub const CLOSE_ACTION: &str = "close";

impl PendingResolution {
    /// Every resolution of a pending receipt (`receipt_resolutions.action` allows their
    /// actions and [`CLOSE_ACTION`]).
    pub const ALL: &'static [Self] = &[Self::Quarantine, Self::Fail];

    /// The `receipt_resolutions.action`.
    pub fn action(self) -> &'static str {
        match self {
            Self::Quarantine => "quarantine",
            Self::Fail => "fail",
        }
    }
}

/// Why a resolution was refused. Nothing is resolved when any id is refused.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// No receipt has this id.
    #[error("receipt {0} does not exist")]
    Unknown(i64),
    /// Only pending receipts can be quarantined or failed by hand.
    #[error("receipt {id} is {status}; only pending receipts can be quarantined or failed by hand")]
    WrongState {
        /// The receipt.
        id: i64,
        /// Its status.
        status: ReceiptStatus,
    },
    /// Only failed or quarantined receipts can be closed.
    #[error("receipt {id} is {status}; only failed or quarantined receipts can be closed")]
    NotClosable {
        /// The receipt.
        id: i64,
        /// Its status.
        status: ReceiptStatus,
    },
    /// The database failed.
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
}

/// Takes pending receipts out of the queue as quarantined or failed, recording who and
/// why, in one transaction: either every id is resolved or none. A receipt a worker is
/// applying right now is waited for: if the worker commits, the receipt is no longer
/// pending (refused); if not, the worker's fenced bookkeeping finds its lease gone.
pub async fn resolve_pending(
    conn: &mut PgConnection,
    receipt_ids: &[i64],
    resolution: PendingResolution,
    resolved_by: &str,
    reason: &str,
) -> Result<(), ResolveError> {
    let mut ids = receipt_ids.to_vec();
    // One lock order for every caller: two operators never deadlock each other.
    ids.sort_unstable();
    ids.dedup();
    let mut transaction = conn.begin().await?;
    for id in ids {
        // The queue row first, as the worker's transaction locks it (then the receipt).
        let dequeued: Option<i64> = sqlx::query_scalar(
            "DELETE FROM receipt_queue WHERE receipt_id = $1 RETURNING receipt_id",
        )
        .bind(id)
        .fetch_optional(&mut *transaction)
        .await?;
        if dequeued.is_none() {
            let status: Option<ReceiptStatus> =
                sqlx::query_scalar("SELECT status FROM receipts WHERE id = $1")
                    .bind(id)
                    .fetch_optional(&mut *transaction)
                    .await?;
            return Err(match status {
                None => ResolveError::Unknown(id),
                Some(status) => ResolveError::WrongState { id, status },
            });
        }
        sqlx::query(
            "WITH logged AS (
                 INSERT INTO receipt_resolutions (receipt_id, previous_status, action, resolved_by, reason)
                 VALUES ($1, 'pending', $2, $3, $4)
             )
             UPDATE receipts
             SET status = CASE $2 WHEN 'quarantine' THEN 'quarantined' ELSE 'failed' END,
                 outcome = NULL,
                 outcome_reason = CASE $2 WHEN 'quarantine' THEN $4 END,
                 last_error = CASE $2 WHEN 'fail' THEN $4 ELSE last_error END,
                 finished_at = now()
             WHERE id = $1",
        )
        .bind(id)
        .bind(resolution.action())
        .bind(resolved_by)
        .bind(reason)
        .execute(&mut *transaction)
        .await?;
    }
    transaction.commit().await?;
    Ok(())
}

/// Closes failed or quarantined receipts an operator decided will not be processed: each
/// ends `done` with outcome `ignored` and the reason (its key stays, so a redelivery is a
/// duplicate; retention purges it like any done receipt), and the decision is recorded.
/// One transaction: every id is closed, or none.
pub async fn close(
    conn: &mut PgConnection,
    receipt_ids: &[i64],
    closed_by: &str,
    reason: &str,
) -> Result<(), ResolveError> {
    let mut ids = receipt_ids.to_vec();
    ids.sort_unstable();
    ids.dedup();
    let mut transaction = conn.begin().await?;
    for id in ids {
        let status: Option<ReceiptStatus> =
            sqlx::query_scalar("SELECT status FROM receipts WHERE id = $1 FOR UPDATE")
                .bind(id)
                .fetch_optional(&mut *transaction)
                .await?;
        match status {
            None => return Err(ResolveError::Unknown(id)),
            Some(status) if !ReceiptStatus::NEEDS_A_PERSON.contains(&status) => {
                return Err(ResolveError::NotClosable { id, status });
            }
            Some(status) => {
                sqlx::query(
                    "WITH logged AS (
                         INSERT INTO receipt_resolutions (receipt_id, previous_status, action, resolved_by, reason)
                         VALUES ($1, $2, $5, $3, $4)
                     )
                     UPDATE receipts
                     SET status = 'done', outcome = 'ignored',
                         outcome_reason = 'closed by an operator: ' || $4, finished_at = now()
                     WHERE id = $1",
                )
                .bind(id)
                .bind(status)
                .bind(closed_by)
                .bind(reason)
                .bind(CLOSE_ACTION)
                .execute(&mut *transaction)
                .await?;
            }
        }
    }
    transaction.commit().await?;
    Ok(())
}

/// What a purge with these ages would remove now: payloads dropped and receipt rows
/// (keys) deleted, by the same rules as the batches below (a dry run; it reads the done
/// receipts through the finished-at index).
pub async fn purge_preview(
    conn: &mut PgConnection,
    payload_days: u32,
    key_days: Option<u32>,
) -> Result<(i64, i64), sqlx::Error> {
    sqlx::query_as(
        "SELECT
             (SELECT count(*) FROM receipts r
              WHERE r.status = 'done' AND r.payload IS NOT NULL
                AND r.finished_at < now() - make_interval(days => $1)
                AND NOT EXISTS (SELECT 1 FROM effects e WHERE e.receipt_id = r.id
                                AND e.status NOT IN ('completed', 'abandoned'))),
             (SELECT count(*) FROM receipts r
              WHERE $2::int IS NOT NULL AND r.status = 'done'
                AND r.finished_at < now() - make_interval(days => $2)
                AND NOT EXISTS (SELECT 1 FROM effects e WHERE e.receipt_id = r.id
                                AND e.status NOT IN ('completed', 'abandoned')))",
    )
    .bind(i32::try_from(payload_days).unwrap_or(i32::MAX))
    .bind(key_days.map(|days| i32::try_from(days).unwrap_or(i32::MAX)))
    .fetch_one(conn)
    .await
}

/// Drops the payloads of up to `batch` done receipts finished more than `days` ago, except
/// those with an effect that is not closed (as [`purge_keys_batch`]); returns how many.
/// Call until it returns less than `batch`.
pub async fn purge_payloads_batch(
    conn: &mut PgConnection,
    days: u32,
    batch: i64,
) -> Result<u64, sqlx::Error> {
    let purged = sqlx::query(
        "WITH old AS MATERIALIZED (
             SELECT r.id FROM receipts r
             WHERE r.status = 'done' AND r.payload IS NOT NULL
               AND r.finished_at < now() - make_interval(days => $1)
               -- The person deciding about an open effect reads the event behind it.
               AND NOT EXISTS (
                   SELECT 1 FROM effects e
                   WHERE e.receipt_id = r.id AND e.status NOT IN ('completed', 'abandoned')
               )
             ORDER BY r.finished_at LIMIT $2
             FOR UPDATE OF r SKIP LOCKED
         )
         UPDATE receipts r SET payload = NULL FROM old WHERE r.id = old.id",
    )
    .bind(i32::try_from(days).unwrap_or(i32::MAX))
    .bind(batch)
    .execute(conn)
    .await?;
    Ok(purged.rows_affected())
}

/// Deletes up to `batch` done receipt rows (their keys) finished more than `days` ago,
/// keeping any with an effect that is not closed — closed means `completed`, or
/// `abandoned` by an operator; a `failed` effect stays (an operator may still retry
/// it), and so does one in review. Both closed states are final (no transition leaves
/// them), so what this statement saw cannot be reopened before the delete; the cascade
/// deletes only closed effects and their history. Returns how many.
pub async fn purge_keys_batch(
    conn: &mut PgConnection,
    days: u32,
    batch: i64,
) -> Result<u64, sqlx::Error> {
    let purged = sqlx::query(
        "WITH old AS MATERIALIZED (
             SELECT r.id FROM receipts r
             WHERE r.status = 'done' AND r.finished_at < now() - make_interval(days => $1)
               AND NOT EXISTS (
                   SELECT 1 FROM effects e
                   WHERE e.receipt_id = r.id AND e.status NOT IN ('completed', 'abandoned')
               )
             ORDER BY r.finished_at LIMIT $2
             FOR UPDATE SKIP LOCKED
         )
         DELETE FROM receipts r USING old WHERE r.id = old.id",
    )
    .bind(i32::try_from(days).unwrap_or(i32::MAX))
    .bind(batch)
    .execute(conn)
    .await?;
    Ok(purged.rows_affected())
}
