//! What operators read and decide about effects: listings by filter, one effect with its
//! attempts and resolutions, and the fenced resolutions (completed, retry, abandon).

use sqlx::PgConnection;

use inbound_core::keys::{EffectId, ReceiptId};
use inbound_core::states::{EffectAction, EffectStatus};

/// One line of `inboundctl effects list`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct EffectLine {
    /// `effects.id`.
    pub id: EffectId,
    /// The receipt whose transition recorded it.
    pub receipt_id: ReceiptId,
    /// The idempotency key.
    pub operation_key: String,
    /// The sink id.
    pub sink: String,
    /// What happened.
    pub kind: String,
    /// The effect status.
    pub status: EffectStatus,
    /// Delivery attempts so far.
    pub attempts: i32,
    /// Some attempt may have reached the sink.
    pub maybe_delivered: bool,
    /// The last error or reason.
    pub last_error: Option<String>,
    /// When the intent was committed.
    pub created_at: chrono::DateTime<chrono::Utc>,
    /// When a dispatcher will next take it (pending and uncertain effects only).
    pub next_attempt_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// Which effects an operator means: one status, and optionally sinks, a window of
/// creation times and a cursor (ids below `before_id` newest first, above `after_id`
/// oldest first).
#[derive(Debug, Clone)]
pub struct EffectFilter {
    /// The status.
    pub status: EffectStatus,
    /// Only these sinks (`None`: any).
    pub sinks: Option<Vec<String>>,
    /// Recorded at or after this.
    pub since: Option<chrono::DateTime<chrono::Utc>>,
    /// Recorded before this.
    pub until: Option<chrono::DateTime<chrono::Utc>>,
    /// Only ids below this (the previous page's last id, newest first).
    pub before_id: Option<EffectId>,
    /// Only ids above this: the previous page's last id ([`list_oldest_first`]), or the
    /// lower end of a window ([`list`]).
    pub after_id: Option<EffectId>,
}

/// Effects matching `filter`, newest first, at most `limit` (ids between `after_id` and
/// `before_id` when given: a window keeps a selective filter over a closed status to a
/// bounded read).
pub async fn list(
    conn: &mut PgConnection,
    filter: &EffectFilter,
    limit: i64,
) -> Result<Vec<EffectLine>, sqlx::Error> {
    // Through effects_status (one status); the columns are find's.
    sqlx::query_as!(
        EffectLine,
        r#"SELECT id AS "id: EffectId", receipt_id AS "receipt_id: ReceiptId", operation_key,
                sink, kind, status AS "status: EffectStatus", attempts, maybe_delivered,
                last_error, created_at,
                CASE WHEN status IN ('pending', 'uncertain') THEN visible_at END AS next_attempt_at
         FROM effects
         WHERE status = $1
           AND ($2::text[] IS NULL OR sink = ANY ($2))
           AND ($3::timestamptz IS NULL OR created_at >= $3)
           AND ($4::timestamptz IS NULL OR created_at < $4)
           AND ($5::int8 IS NULL OR id < $5)
           AND ($6::int8 IS NULL OR id > $6)
         ORDER BY id DESC LIMIT $7"#,
        filter.status as EffectStatus,
        filter.sinks.as_deref() as Option<&[String]>,
        filter.since,
        filter.until,
        filter.before_id as Option<EffectId>,
        filter.after_id as Option<EffectId>,
        limit,
    )
    .fetch_all(conn)
    .await
}

/// Effects matching `filter`, oldest first, at most `limit`: where a run of failures
/// began.
pub async fn list_oldest_first(
    conn: &mut PgConnection,
    filter: &EffectFilter,
    limit: i64,
) -> Result<Vec<EffectLine>, sqlx::Error> {
    // As list, upwards.
    sqlx::query_as!(
        EffectLine,
        r#"SELECT id AS "id: EffectId", receipt_id AS "receipt_id: ReceiptId", operation_key,
                sink, kind, status AS "status: EffectStatus", attempts, maybe_delivered,
                last_error, created_at,
                CASE WHEN status IN ('pending', 'uncertain') THEN visible_at END AS next_attempt_at
         FROM effects
         WHERE status = $1
           AND ($2::text[] IS NULL OR sink = ANY ($2))
           AND ($3::timestamptz IS NULL OR created_at >= $3)
           AND ($4::timestamptz IS NULL OR created_at < $4)
           AND ($5::int8 IS NULL OR id > $5)
         ORDER BY id LIMIT $6"#,
        filter.status as EffectStatus,
        filter.sinks.as_deref() as Option<&[String]>,
        filter.since,
        filter.until,
        filter.after_id as Option<EffectId>,
        limit,
    )
    .fetch_all(conn)
    .await
}

/// One sink's effects in one status (`inboundctl effects list --summary`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct SinkSummary {
    /// The sink id.
    pub sink: String,
    /// How many.
    pub count: i64,
    /// When the oldest was recorded.
    pub oldest_at: chrono::DateTime<chrono::Utc>,
    /// When the newest was recorded.
    pub newest_at: chrono::DateTime<chrono::Utc>,
    /// The oldest one with an error, and its error: where the run of failures began.
    pub first_id: Option<EffectId>,
    /// Its error.
    pub first_error: Option<String>,
}

/// Per sink, the effects `filter` selects (its cursors aside): counts, ages and the first
/// error. Reads every selected row once (an operator's question, bounded by the
/// operator's statement timeout), through effects_status.
pub async fn summary_by_sink(
    conn: &mut PgConnection,
    filter: &EffectFilter,
) -> Result<Vec<SinkSummary>, sqlx::Error> {
    sqlx::query_as!(
        SinkSummary,
        r#"WITH per_sink AS (
             SELECT sink, count(*) AS n, min(created_at) AS oldest, max(created_at) AS newest,
                    min(id) FILTER (WHERE last_error IS NOT NULL) AS first_id
             FROM effects
             WHERE status = $1
               AND ($2::text[] IS NULL OR sink = ANY ($2))
               AND ($3::timestamptz IS NULL OR created_at >= $3)
               AND ($4::timestamptz IS NULL OR created_at < $4)
             GROUP BY sink)
         SELECT p.sink AS "sink!", p.n AS "count!", p.oldest AS "oldest_at!",
                p.newest AS "newest_at!", p.first_id AS "first_id: EffectId",
                e.last_error AS first_error
         FROM per_sink p LEFT JOIN effects e ON e.id = p.first_id
         ORDER BY p.sink"#,
        filter.status as EffectStatus,
        filter.sinks.as_deref() as Option<&[String]>,
        filter.since,
        filter.until,
    )
    .fetch_all(conn)
    .await
}

/// What identifies the state of each of `effect_ids` now — status, attempts and lease
/// token (every claim and resolution takes a new one) — in id order: a bulk confirmation
/// is for these versions only.
pub async fn versions(
    conn: &mut PgConnection,
    effect_ids: &[EffectId],
) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT id || ':' || status || ':' || attempts || ':' || lease_token AS "version!"
         FROM effects WHERE id = ANY ($1) ORDER BY id"#,
        effect_ids as &[EffectId],
    )
    .fetch_all(conn)
    .await
}

/// The highest effect id below `before` (the newest without it): one descent per
/// partition of the primary key; the id below a day's first is an earlier day's last.
pub async fn effect_id_below(
    conn: &mut PgConnection,
    before: Option<EffectId>,
) -> Result<Option<EffectId>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT max(id) AS "id: EffectId" FROM effects WHERE $1::int8 IS NULL OR id < $1"#,
        before as Option<EffectId>
    )
    // Planned for this cursor: a generic plan would read every partition above it.
    .persistent(false)
    .fetch_one(conn)
    .await
}

/// Whether any effect names `sink` (for a filter that matched nothing: a typo or a sink
/// with no effects yet). Reads until the first match; only an operator's empty result
/// pays for it.
pub async fn sink_has_effects(conn: &mut PgConnection, sink: &str) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM effects WHERE sink = $1) AS "exists!""#,
        sink
    )
    .fetch_one(conn)
    .await
}

/// The effect with this id.
pub async fn find(
    conn: &mut PgConnection,
    effect_id: EffectId,
) -> Result<Option<EffectLine>, sqlx::Error> {
    // The columns are list's.
    sqlx::query_as!(
        EffectLine,
        r#"SELECT id AS "id: EffectId", receipt_id AS "receipt_id: ReceiptId", operation_key,
                sink, kind, status AS "status: EffectStatus", attempts, maybe_delivered,
                last_error, created_at,
                CASE WHEN status IN ('pending', 'uncertain') THEN visible_at END AS next_attempt_at
         FROM effects WHERE id = $1"#,
        effect_id as EffectId,
    )
    .fetch_optional(conn)
    .await
}

/// One delivery or reconciliation in an effect's history.
#[derive(Debug, Clone, serde::Serialize)]
pub struct AttemptLine {
    /// The delivery attempt number it belongs to.
    pub attempt: i32,
    /// `delivery` or `reconcile`.
    pub kind: String,
    /// When it began.
    pub started_at: chrono::DateTime<chrono::Utc>,
    /// When it was recorded (`None`: still in flight, or its worker died).
    pub finished_at: Option<chrono::DateTime<chrono::Utc>>,
    /// How it ended.
    pub outcome: Option<String>,
    /// The sink's status code.
    pub status_code: Option<i32>,
    /// The error, if any.
    pub error: Option<String>,
}

/// An effect's attempt history, oldest first.
pub async fn attempts(
    conn: &mut PgConnection,
    effect_id: EffectId,
) -> Result<Vec<AttemptLine>, sqlx::Error> {
    sqlx::query_as!(
        AttemptLine,
        "SELECT attempt, kind, started_at, finished_at, outcome, status_code, error
         FROM effect_attempts WHERE effect_id = $1 ORDER BY id",
        effect_id as EffectId,
    )
    .fetch_all(conn)
    .await
}

/// One operator decision about an effect.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ResolutionLine {
    /// The status before.
    pub previous_status: EffectStatus,
    /// What was decided.
    pub action: EffectAction,
    /// Who, as they named themselves.
    pub resolved_by: String,
    /// Why.
    pub note: String,
    /// When, by the database's clock.
    pub resolved_at: chrono::DateTime<chrono::Utc>,
    /// The database role that recorded it.
    pub database_role: String,
}

/// An effect's operator decisions, oldest first.
pub async fn resolutions(
    conn: &mut PgConnection,
    effect_id: EffectId,
) -> Result<Vec<ResolutionLine>, sqlx::Error> {
    sqlx::query_as!(
        ResolutionLine,
        r#"SELECT previous_status AS "previous_status: EffectStatus",
                action AS "action: EffectAction", resolved_by, note, resolved_at, database_role
         FROM effect_resolutions WHERE effect_id = $1 ORDER BY id"#,
        effect_id as EffectId,
    )
    .fetch_all(conn)
    .await
}

/// Whether `action` may apply to effect `id` in `status` (chosen by a filter on
/// `expected`).
fn check(
    action: EffectAction,
    id: EffectId,
    status: EffectStatus,
    expected: Option<EffectStatus>,
) -> Result<(), EffectResolveError> {
    if let Some(expected) = expected
        && expected != status
    {
        return Err(EffectResolveError::Moved {
            id,
            status,
            expected,
        });
    }
    if !action.allows(status) {
        return Err(EffectResolveError::NotAllowed {
            id,
            status,
            action,
            allowed: allowed_names(action),
        });
    }
    Ok(())
}

/// The statuses `action` may start from, as a message lists them.
fn allowed_names(action: EffectAction) -> String {
    let allowed: Vec<&str> = action
        .allowed_from()
        .iter()
        .map(|status| status.as_str())
        .collect();
    allowed.join(", ")
}

/// Why a resolution was refused. Nothing is written then.
#[derive(Debug, thiserror::Error)]
pub enum EffectResolveError {
    /// No effect has this id.
    #[error("effect {0} does not exist")]
    Unknown(EffectId),
    /// The state machine forbids it.
    #[error("effect {id} is {status}; {action} applies only to {allowed}")]
    NotAllowed {
        /// The effect.
        id: EffectId,
        /// Its status.
        status: EffectStatus,
        /// The action refused.
        action: EffectAction,
        /// Where it may start from.
        allowed: String,
    },
    /// Chosen by a filter on one status, it has moved on since (a dispatcher delivered or
    /// judged it): deciding on what the operator did not see is refused.
    #[error(
        "effect {id} is {status} now, no longer {expected}: list again (--dry-run) and decide on what is there"
    )]
    Moved {
        /// The effect.
        id: EffectId,
        /// Its status now.
        status: EffectStatus,
        /// The status the filter selected it in.
        expected: EffectStatus,
    },
    /// The database failed.
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
}

/// [`resolve_in`] as a transaction of its own ([`resolve_all`] of one).
pub async fn resolve(
    conn: &mut PgConnection,
    effect_id: EffectId,
    action: EffectAction,
    expected: Option<EffectStatus>,
    by: &str,
    note: &str,
) -> Result<(), EffectResolveError> {
    resolve_all(conn, &[effect_id], action, expected, by, note).await
}

/// Resolves every one of `effect_ids` (in lock order) in one transaction, or none: a
/// refusal of any id (unknown, not allowed from its status, moved from `expected`) leaves
/// every one as it was. What `inboundctl effects resolve` and the console's bulk decision
/// both call.
pub async fn resolve_all(
    conn: &mut PgConnection,
    effect_ids: &[EffectId],
    action: EffectAction,
    expected: Option<EffectStatus>,
    by: &str,
    note: &str,
) -> Result<(), EffectResolveError> {
    use sqlx::Connection;
    let mut transaction = conn.begin().await?;
    for id in crate::in_lock_order(effect_ids) {
        resolve_in(&mut transaction, id, action, expected, by, note).await?;
    }
    transaction.commit().await?;
    Ok(())
}

/// Applies an operator's resolution, recorded with who and why, inside the caller's
/// transaction (a decision about many effects is one transaction without a savepoint
/// each: more than 64 subtransactions slow every snapshot in the cluster). With
/// `expected`, the effect must still be in that status (a resolution chosen by a filter).
pub async fn resolve_in(
    conn: &mut PgConnection,
    effect_id: EffectId,
    action: EffectAction,
    expected: Option<EffectStatus>,
    by: &str,
    note: &str,
) -> Result<(), EffectResolveError> {
    // The row lock holds off a dispatcher's claim until the decision commits.
    let status = sqlx::query_scalar!(
        r#"SELECT decision_lock_effect($1) AS "status: EffectStatus""#,
        effect_id as EffectId,
    )
    .fetch_one(&mut *conn)
    .await?;
    let Some(status) = status else {
        return Err(EffectResolveError::Unknown(effect_id));
    };
    check(action, effect_id, status, expected)?;
    // The database's decision checks the state machine again, writes the change and its
    // audit row (migrations/0001_inbound.sql): the operator role writes no effect itself.
    let left = sqlx::query_scalar!(
        r#"SELECT decision_resolve_effect($1, $2, $3, $4) AS "left: EffectStatus""#,
        effect_id as EffectId,
        action as EffectAction,
        by,
        note,
    )
    .fetch_one(&mut *conn)
    .await?;
    if left != Some(status) {
        return Err(EffectResolveError::NotAllowed {
            id: effect_id,
            status,
            action,
            allowed: allowed_names(action),
        });
    }
    Ok(())
}
