//! Effect intents: written in the business transaction, keyed by a UNIQUE operation key
//! derived from the business key, so one business operation has at most one intent.

use std::time::Duration;

use sqlx::PgConnection;

use crate::effects::MAX_STEP_DELAY;
use crate::handlers::EffectIntent;
use crate::keys::LeaseToken;
use crate::states::EffectStatus;

/// The source event an effect carries (`event` in the sink request).
#[derive(Debug, Clone, Copy)]
pub struct SourceEvent<'a> {
    /// The integration id.
    pub integration: &'a str,
    /// The provider's event id.
    pub id: &'a str,
    /// The event type.
    pub event_type: &'a str,
}

/// Another operation already holds an intent's operation key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "operation key {operation_key} is already effect {effect_id} of receipt {receipt_id}: \
     a key must identify one instance of a transition, so this intent would never be sent"
)]
pub struct KeyCollision {
    /// The key.
    pub operation_key: String,
    /// The effect that holds it.
    pub effect_id: i64,
    /// That effect's receipt.
    pub receipt_id: i64,
}

/// Records `intent` for `receipt_id`. `Ok(Err(collision))` when an intent with the same
/// operation key already exists: nothing is written, and the caller must not treat the
/// transition as complete (its intent would silently never be sent).
pub async fn insert_intent(
    conn: &mut PgConnection,
    receipt_id: i64,
    tenant: &str,
    event: SourceEvent<'_>,
    intent: &EffectIntent,
) -> Result<Result<i64, KeyCollision>, sqlx::Error> {
    let event_json = serde_json::json!({
        "integration": event.integration,
        "id": event.id,
        "type": event.event_type,
    });
    let inserted: Option<i64> = sqlx::query_scalar(
        "INSERT INTO effects (receipt_id, operation_key, sink, kind, tenant, data, event)
         VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT (operation_key) DO NOTHING
         RETURNING id",
    )
    .bind(receipt_id)
    .bind(&intent.operation_key)
    .bind(&intent.sink)
    .bind(&intent.kind)
    .bind(tenant)
    .bind(&intent.data)
    .bind(event_json)
    .fetch_optional(&mut *conn)
    .await?;
    if let Some(id) = inserted {
        return Ok(Ok(id));
    }
    let (effect_id, holder): (i64, i64) =
        sqlx::query_as("SELECT id, receipt_id FROM effects WHERE operation_key = $1")
            .bind(&intent.operation_key)
            .fetch_one(conn)
            .await?;
    Ok(Err(KeyCollision {
        operation_key: intent.operation_key.clone(),
        effect_id,
        receipt_id: holder,
    }))
}

/// An effect claimed by one dispatcher for one step (a delivery or a reconciliation).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ClaimedEffect {
    /// `effects.id`.
    pub id: i64,
    /// The receipt whose transition recorded it.
    pub receipt_id: i64,
    /// The idempotency key.
    pub operation_key: String,
    /// The sink id.
    pub sink: String,
    /// What happened.
    pub kind: String,
    /// The tenant.
    pub tenant: String,
    /// The effect's data.
    pub data: serde_json::Value,
    /// The source event (`integration`, `id`, `type`).
    pub event: serde_json::Value,
    /// The status when claimed: `pending`, `in_flight` (its last holder's lease expired)
    /// or `uncertain`.
    pub status: EffectStatus,
    /// Delivery attempts so far, including the one the claim began.
    pub attempts: i32,
    /// The fencing token of this claim.
    pub lease_token: LeaseToken,
    /// Seconds since the first delivery attempt began (0 before any).
    pub first_attempt_age_secs: f64,
    /// Some attempt may have reached the sink.
    pub maybe_delivered: bool,
    /// Reconciliations so far (not counting the one this claim may be for).
    pub reconciliations: i32,
    /// Seconds since it first became uncertain (0 if it never was).
    pub uncertain_age_secs: f64,
    /// The claim began delivery attempt `attempts` (committed `in_flight`): send it now.
    /// A `pending` effect claimed without one is a resend the claim found unsafe (past
    /// its sink's idempotency retention minus timeout): it must not be sent.
    pub delivery_begun: bool,
}

/// One sink's share of a claim.
#[derive(Debug, Clone)]
pub struct SinkClaim {
    /// The sink id.
    pub sink: String,
    /// The most of its effects to claim (its free slots).
    pub limit: i64,
    /// How long an attempt to it stays `in_flight` before another worker may judge it
    /// lost: its request timeout plus time to record the answer.
    pub in_flight_lease: Duration,
    /// How long after the first attempt a resend may still begin (its idempotency
    /// retention minus its timeout); `None` for a sink without idempotency support.
    pub resend_horizon: Option<Duration>,
}

/// Claims due effects of the sinks named (at most `limit` in all, and each sink's own
/// limit), in due order, in one statement. Effects of any other sink are left alone —
/// a worker whose configuration does not name a sink never touches its effects.
///
/// A `pending` effect *begins its delivery attempt* in the same statement — `in_flight`,
/// `attempts + 1`, an open history row, leased for its sink's in-flight time — so the
/// attempt is committed before any request is sent; unless it is a resend after an
/// attempt that may have landed and the sink's resend horizon has passed, which is only
/// leased (for `lease`), never begun. Everything else (an `in_flight` effect whose
/// holder died, an `uncertain` one) is only leased for `lease`.
pub async fn claim_batch(
    conn: &mut PgConnection,
    limit: i64,
    lease: Duration,
    worker_id: &str,
    sinks: &[SinkClaim],
) -> Result<Vec<ClaimedEffect>, sqlx::Error> {
    let ids: Vec<&str> = sinks.iter().map(|one| one.sink.as_str()).collect();
    let limits: Vec<i64> = sinks.iter().map(|one| one.limit.min(limit)).collect();
    let leases: Vec<i64> = sinks
        .iter()
        .map(|one| millis(one.in_flight_lease))
        .collect();
    let horizons: Vec<Option<i64>> = sinks
        .iter()
        .map(|one| one.resend_horizon.map(millis))
        .collect();
    sqlx::query_as(
        "WITH s AS (
             SELECT * FROM unnest($4::text[], $5::int8[], $6::int8[], $7::int8[])
                 AS s(sink, slots, lease_ms, horizon_ms)
         ), due AS MATERIALIZED (
             SELECT id, status, lease_ms,
                    status = 'pending' AND COALESCE(
                        NOT maybe_delivered
                        OR first_attempt_at + horizon_ms * interval '1 millisecond' > now(),
                        false) AS begins
             FROM (
                 SELECT d.*, s.lease_ms, s.horizon_ms
                 FROM s CROSS JOIN LATERAL (
                     SELECT id, status, visible_at, maybe_delivered, first_attempt_at FROM effects
                     WHERE sink = s.sink AND status IN ('pending', 'in_flight', 'uncertain')
                       AND visible_at <= now()
                     ORDER BY visible_at, id
                     LIMIT s.slots
                     FOR UPDATE SKIP LOCKED
                 ) d
             ) candidates
             ORDER BY visible_at, id
             LIMIT $1
         ), claimed AS (
             UPDATE effects e
             SET lease_token = e.lease_token + 1, leased_by = $3,
                 status = CASE WHEN due.begins THEN 'in_flight' ELSE e.status END,
                 attempts = e.attempts + due.begins::int,
                 first_attempt_at = CASE WHEN due.begins THEN COALESCE(e.first_attempt_at, now())
                                         ELSE e.first_attempt_at END,
                 -- A step that sends nothing (a reconciliation, a verdict) is leased at
                 -- least as long as a request to its sink may take, so its answer is never
                 -- fenced out by a second claim of the same effect.
                 visible_at = now() + CASE WHEN due.begins THEN due.lease_ms
                                           ELSE GREATEST($2, due.lease_ms) END
                                      * interval '1 millisecond'
             FROM due
             WHERE e.id = due.id
             RETURNING e.id, e.receipt_id, e.operation_key, e.sink, e.kind, e.tenant, e.data, e.event,
                       due.status, e.attempts, e.lease_token,
                       COALESCE(EXTRACT(EPOCH FROM now() - e.first_attempt_at), 0)::float8 AS first_attempt_age_secs,
                       e.maybe_delivered, e.reconciliations,
                       COALESCE(EXTRACT(EPOCH FROM now() - e.uncertain_since), 0)::float8 AS uncertain_age_secs,
                       due.begins AS delivery_begun
         ), logged AS (
             INSERT INTO effect_attempts (effect_id, attempt, kind)
             SELECT id, attempts, 'delivery' FROM claimed WHERE delivery_begun
         )
         SELECT * FROM claimed ORDER BY id",
    )
    .bind(limit)
    .bind(millis(lease))
    .bind(worker_id)
    .bind(ids)
    .bind(limits)
    .bind(leases)
    .bind(horizons)
    .fetch_all(conn)
    .await
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// A delay as bound into a statement: never more than [`MAX_STEP_DELAY`], whatever the
/// caller computed, so `now() + delay` can never overflow and fail the statement for
/// every outcome written with it.
fn delay_ms(delay: Duration) -> i64 {
    millis(delay.min(MAX_STEP_DELAY))
}

/// An error or reason as stored: at most [`MAX_ERROR_BYTES`], cut at a character
/// boundary.
fn bounded_error(error: Option<&str>) -> Option<&str> {
    error.map(|text| {
        let mut end = text.len().min(MAX_ERROR_BYTES);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        &text[..end]
    })
}

/// The most of an error or reason stored with an effect.
pub const MAX_ERROR_BYTES: usize = 1024;

/// How a step ended, for the effect row and its attempt history.
#[derive(Debug, Clone)]
pub struct StepRecord<'a> {
    /// The effect status to write.
    pub status: EffectStatus,
    /// Delay before it is due again (for `pending` and `uncertain`).
    pub visible_after: Duration,
    /// The error or reason, if any.
    pub error: Option<&'a str>,
    /// Whether some attempt may now have reached the sink.
    pub maybe_delivered: bool,
    /// The attempt-history outcome label.
    pub outcome: &'a str,
    /// The sink's status code, when it answered.
    pub status_code: Option<u16>,
}

/// The end of one delivery attempt, for [`finish_deliveries`].
#[derive(Debug, Clone)]
pub struct FinishedDelivery {
    /// The effect.
    pub effect_id: i64,
    /// The fencing token of the claim that began the attempt.
    pub lease_token: LeaseToken,
    /// The attempt number (its history row is closed).
    pub attempt: i32,
    /// The effect status to write.
    pub status: EffectStatus,
    /// Delay before it is due again (for `pending` and `uncertain`).
    pub visible_after: Duration,
    /// The error or reason, if any.
    pub error: Option<String>,
    /// Whether some attempt may now have reached the sink.
    pub maybe_delivered: bool,
    /// The attempt-history outcome label.
    pub outcome: &'static str,
    /// The sink's status code, when it answered.
    pub status_code: Option<u16>,
}

/// Records the ends of delivery attempts in one statement, each fenced on its lease
/// token; returns the ids of the effects recorded (the others lost their lease).
pub async fn finish_deliveries(
    conn: &mut PgConnection,
    finished: &[FinishedDelivery],
) -> Result<Vec<i64>, sqlx::Error> {
    let ids: Vec<i64> = finished.iter().map(|one| one.effect_id).collect();
    let tokens: Vec<LeaseToken> = finished.iter().map(|one| one.lease_token).collect();
    let attempts: Vec<i32> = finished.iter().map(|one| one.attempt).collect();
    let statuses: Vec<EffectStatus> = finished.iter().map(|one| one.status).collect();
    let delays: Vec<i64> = finished
        .iter()
        .map(|one| delay_ms(one.visible_after))
        .collect();
    let errors: Vec<Option<&str>> = finished
        .iter()
        .map(|one| bounded_error(one.error.as_deref()))
        .collect();
    let maybe: Vec<bool> = finished.iter().map(|one| one.maybe_delivered).collect();
    let outcomes: Vec<&str> = finished.iter().map(|one| one.outcome).collect();
    let codes: Vec<Option<i32>> = finished
        .iter()
        .map(|one| one.status_code.map(i32::from))
        .collect();
    sqlx::query_scalar(
        "WITH f AS (
             SELECT * FROM unnest($1::int8[], $2::int8[], $3::int4[], $4::text[], $5::int8[],
                                  $6::text[], $7::bool[], $8::text[], $9::int4[])
                 AS f(id, lease_token, attempt, status, delay_ms, error, maybe_delivered,
                      outcome, status_code)
         ), updated AS (
             UPDATE effects e
             SET status = f.status, visible_at = now() + f.delay_ms * interval '1 millisecond',
                 last_error = f.error, maybe_delivered = f.maybe_delivered,
                 last_status_code = f.status_code, leased_by = NULL,
                 uncertain_since = CASE WHEN f.status = 'uncertain'
                                        THEN COALESCE(e.uncertain_since, now())
                                        ELSE e.uncertain_since END,
                 completed_at = CASE WHEN f.status = 'completed' THEN now() END
             FROM f WHERE e.id = f.id AND e.lease_token = f.lease_token
             RETURNING e.id
         ), closed AS (
             UPDATE effect_attempts a
             SET finished_at = now(), outcome = f.outcome, status_code = f.status_code,
                 error = f.error
             FROM f JOIN updated u ON u.id = f.id
             WHERE a.effect_id = f.id AND a.attempt = f.attempt AND a.kind = 'delivery'
         )
         SELECT id FROM updated",
    )
    .bind(ids)
    .bind(tokens)
    .bind(attempts)
    .bind(statuses)
    .bind(delays)
    .bind(errors)
    .bind(maybe)
    .bind(outcomes)
    .bind(codes)
    .fetch_all(conn)
    .await
}

/// What a step that sent nothing new was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepKind {
    /// A reconciliation: counted, with its own history row.
    Reconcile,
    /// A verdict without a request: on an attempt whose worker died in flight (its open
    /// history row is closed with the step's outcome), or on a resend the claim found
    /// unsafe.
    Verdict,
}

/// Records a step that sent nothing new. Fenced; `false` when the lease was lost (an
/// operator's decision, or another worker, took the effect over).
pub async fn record_step(
    conn: &mut PgConnection,
    effect_id: i64,
    lease_token: LeaseToken,
    kind: StepKind,
    record: &StepRecord<'_>,
) -> Result<bool, sqlx::Error> {
    let reconcile = kind == StepKind::Reconcile;
    let recorded: i64 = sqlx::query_scalar(
        "WITH updated AS (
             UPDATE effects
             SET status = $3, visible_at = now() + $4 * interval '1 millisecond', last_error = $5,
                 maybe_delivered = $6, leased_by = NULL,
                 reconciliations = reconciliations + $9::bool::int,
                 uncertain_since = CASE WHEN $3 = 'uncertain' THEN COALESCE(uncertain_since, now())
                                        ELSE uncertain_since END,
                 completed_at = CASE WHEN $3 = 'completed' THEN now() END
             WHERE id = $1 AND lease_token = $2
             RETURNING id, attempts
         ), closed AS (
             -- A delivery left open by a dead worker is closed with this verdict.
             UPDATE effect_attempts a SET finished_at = now(), outcome = $7, error = $5
             FROM updated WHERE NOT $9 AND a.effect_id = updated.id AND a.attempt = updated.attempts
               AND a.kind = 'delivery' AND a.finished_at IS NULL
         ), logged AS (
             INSERT INTO effect_attempts (effect_id, attempt, kind, finished_at, outcome, status_code, error)
             SELECT id, attempts, 'reconcile', now(), $7, $8, $5 FROM updated WHERE $9
         )
         SELECT count(*) FROM updated",
    )
    .bind(effect_id)
    .bind(lease_token)
    .bind(record.status)
    .bind(delay_ms(record.visible_after))
    .bind(bounded_error(record.error))
    .bind(record.maybe_delivered)
    .bind(record.outcome)
    .bind(record.status_code.map(i32::from))
    .bind(reconcile)
    .fetch_one(conn)
    .await?;
    Ok(recorded == 1)
}

/// Effects in each of `statuses`, in that order (0 when none), for `inboundctl status`
/// ([`EffectStatus::ALL`]).
pub async fn counts(
    conn: &mut PgConnection,
    statuses: &[EffectStatus],
) -> Result<Vec<(EffectStatus, i64)>, sqlx::Error> {
    sqlx::query_as(
        "SELECT s.status, COALESCE(c.n, 0)
         FROM unnest($1::text[]) WITH ORDINALITY AS s (status, position)
         LEFT JOIN (SELECT status, count(*) AS n FROM effects
                    WHERE status = ANY ($1) GROUP BY status) c ON c.status = s.status
         ORDER BY s.position",
    )
    .bind(statuses)
    .fetch_all(conn)
    .await
}

/// Open effects ([`EffectStatus::OPEN`]) per sink and status, through the status index
/// (the finished ones, which grow with retention, are never read).
pub async fn open_counts_by_sink(
    conn: &mut PgConnection,
) -> Result<Vec<(String, EffectStatus, i64)>, sqlx::Error> {
    sqlx::query_as(
        "SELECT sink, status, count(*) FROM effects
         WHERE status = ANY ($1) GROUP BY sink, status",
    )
    .bind(EffectStatus::OPEN)
    .fetch_all(conn)
    .await
}

/// Seconds since the oldest undelivered (pending, in flight or uncertain) effect of `sink`
/// was recorded (0 when none).
pub async fn oldest_open_age_seconds(
    conn: &mut PgConnection,
    sink: &str,
) -> Result<f64, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT COALESCE(EXTRACT(EPOCH FROM now() - min(created_at)), 0)::float8
         FROM effects WHERE sink = $1 AND status IN ('pending', 'in_flight', 'uncertain')",
    )
    .bind(sink)
    .fetch_one(conn)
    .await
}

/// Seconds the longest-waiting *due* effect of `sink` (pending or in flight, its time come)
/// has waited for a dispatcher slot (0 when none): what more dispatchers would shorten,
/// unlike the age of effects waiting out a retry delay or being reconciled. Read through
/// `effects_due_by_sink`.
pub async fn oldest_due_wait_seconds(
    conn: &mut PgConnection,
    sink: &str,
) -> Result<f64, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT COALESCE(EXTRACT(EPOCH FROM now() - min(visible_at)), 0)::float8
         FROM effects
         WHERE sink = $1 AND status IN ('pending', 'in_flight') AND visible_at <= now()",
    )
    .bind(sink)
    .fetch_one(conn)
    .await
}

/// Undelivered effects per sink not among `known`, at most 20 sinks (a worker counts what
/// it leaves for workers configured for those sinks).
pub async fn open_for_unknown_sinks(
    conn: &mut PgConnection,
    known: &[&str],
) -> Result<Vec<(String, i64)>, sqlx::Error> {
    sqlx::query_as(
        "SELECT sink, count(*) FROM effects
         WHERE status IN ('pending', 'in_flight', 'uncertain') AND sink <> ALL($1::text[])
         GROUP BY sink ORDER BY sink LIMIT 20",
    )
    .bind(known)
    .fetch_all(conn)
    .await
}

/// One line of `inboundctl effects list`.
#[derive(Debug, Clone, serde::Serialize, sqlx::FromRow)]
pub struct EffectLine {
    /// `effects.id`.
    pub id: i64,
    /// The receipt whose transition recorded it.
    pub receipt_id: i64,
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

/// The columns of an [`EffectLine`].
macro_rules! effect_line_columns {
    () => {
        "SELECT id, receipt_id, operation_key, sink, kind, status, attempts, maybe_delivered,
                last_error, created_at,
                CASE WHEN status IN ('pending', 'uncertain') THEN visible_at END AS next_attempt_at
         FROM effects "
    };
}

/// Which effects an operator means: one status, and optionally sinks, a window of
/// creation times and a cursor (ids below `before_id`).
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
    /// Only ids below this (the previous page's last id).
    pub before_id: Option<i64>,
}

/// Effects matching `filter`, newest first, at most `limit`.
pub async fn list(
    conn: &mut PgConnection,
    filter: &EffectFilter,
    limit: i64,
) -> Result<Vec<EffectLine>, sqlx::Error> {
    sqlx::query_as(concat!(
        effect_line_columns!(),
        "WHERE status = $1
           AND ($2::text[] IS NULL OR sink = ANY ($2))
           AND ($3::timestamptz IS NULL OR created_at >= $3)
           AND ($4::timestamptz IS NULL OR created_at < $4)
           AND ($5::int8 IS NULL OR id < $5)
         ORDER BY id DESC LIMIT $6"
    ))
    .bind(filter.status)
    .bind(filter.sinks.as_deref())
    .bind(filter.since)
    .bind(filter.until)
    .bind(filter.before_id)
    .bind(limit)
    .fetch_all(conn)
    .await
}

/// Whether any effect names `sink` (for a filter that matched nothing: a typo or a sink
/// with no effects yet). Reads until the first match; only an operator's empty result
/// pays for it.
pub async fn sink_has_effects(conn: &mut PgConnection, sink: &str) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM effects WHERE sink = $1)")
        .bind(sink)
        .fetch_one(conn)
        .await
}

/// The effect with this id.
pub async fn find(
    conn: &mut PgConnection,
    effect_id: i64,
) -> Result<Option<EffectLine>, sqlx::Error> {
    sqlx::query_as(concat!(effect_line_columns!(), "WHERE id = $1"))
        .bind(effect_id)
        .fetch_optional(conn)
        .await
}

/// One delivery or reconciliation in an effect's history.
#[derive(Debug, Clone, serde::Serialize, sqlx::FromRow)]
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
    effect_id: i64,
) -> Result<Vec<AttemptLine>, sqlx::Error> {
    sqlx::query_as(
        "SELECT attempt, kind, started_at, finished_at, outcome, status_code, error
         FROM effect_attempts WHERE effect_id = $1 ORDER BY id",
    )
    .bind(effect_id)
    .fetch_all(conn)
    .await
}

/// One operator decision about an effect.
#[derive(Debug, Clone, serde::Serialize, sqlx::FromRow)]
pub struct ResolutionLine {
    /// The status before.
    pub previous_status: String,
    /// `completed`, `retry` or `abandon`.
    pub action: String,
    /// Who.
    pub resolved_by: String,
    /// Why.
    pub note: String,
    /// When.
    pub resolved_at: chrono::DateTime<chrono::Utc>,
}

/// An effect's operator decisions, oldest first.
pub async fn resolutions(
    conn: &mut PgConnection,
    effect_id: i64,
) -> Result<Vec<ResolutionLine>, sqlx::Error> {
    sqlx::query_as(
        "SELECT previous_status, action, resolved_by, note, resolved_at
         FROM effect_resolutions WHERE effect_id = $1 ORDER BY id",
    )
    .bind(effect_id)
    .fetch_all(conn)
    .await
}

/// What an operator decides about an effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// It did happen (checked with the receiver): `completed`.
    Completed,
    /// Send it again, with the same key: `pending`, due now. From `pending` (waiting out
    /// a retry delay) it only makes the effect due: its history stands.
    Retry,
    /// Give up without sending (again): `abandoned`, which retention may purge.
    Abandon,
}

impl Resolution {
    /// Every resolution (`effect_resolutions.action` allows exactly their actions).
    pub const ALL: &'static [Self] = &[Self::Completed, Self::Retry, Self::Abandon];

    /// The recorded action name.
    pub fn action(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::Retry => "retry",
            Self::Abandon => "abandon",
        }
    }

    /// The statuses this resolution may start from. `in_flight` never (a delivery may be
    /// running), `completed` and `abandoned` never (closed).
    pub fn allowed_from(self) -> &'static [EffectStatus] {
        use EffectStatus::{Failed, Pending, Review, Uncertain};
        match self {
            Self::Completed => &[Uncertain, Review, Failed],
            Self::Retry | Self::Abandon => &[Pending, Uncertain, Review, Failed],
        }
    }

    /// The status it leaves the effect in.
    pub fn new_status(self) -> EffectStatus {
        match self {
            Self::Completed => EffectStatus::Completed,
            Self::Retry => EffectStatus::Pending,
            Self::Abandon => EffectStatus::Abandoned,
        }
    }
}

/// Why a resolution was refused. Nothing is written then.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// No effect has this id.
    #[error("effect {0} does not exist")]
    Unknown(i64),
    /// The state machine forbids it.
    #[error("effect {id} is {status}; --{action} applies only to {allowed}")]
    NotAllowed {
        /// The effect.
        id: i64,
        /// Its status.
        status: EffectStatus,
        /// The action refused.
        action: &'static str,
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
        id: i64,
        /// Its status now.
        status: EffectStatus,
        /// The status the filter selected it in.
        expected: EffectStatus,
    },
    /// The database failed.
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
}

/// Applies an operator's resolution, recorded with who and why, in one transaction. With
/// `expected`, the effect must still be in that status (a resolution chosen by a filter).
pub async fn resolve(
    conn: &mut PgConnection,
    effect_id: i64,
    resolution: Resolution,
    expected: Option<EffectStatus>,
    by: &str,
    note: &str,
) -> Result<(), ResolveError> {
    use sqlx::Connection;
    let mut transaction = conn.begin().await?;
    let status: Option<EffectStatus> =
        sqlx::query_scalar("SELECT status FROM effects WHERE id = $1 FOR UPDATE")
            .bind(effect_id)
            .fetch_optional(&mut *transaction)
            .await?;
    let Some(status) = status else {
        return Err(ResolveError::Unknown(effect_id));
    };
    if let Some(expected) = expected
        && expected != status
    {
        return Err(ResolveError::Moved {
            id: effect_id,
            status,
            expected,
        });
    }
    if !resolution.allowed_from().contains(&status) {
        let allowed: Vec<&str> = resolution
            .allowed_from()
            .iter()
            .map(|status| status.as_str())
            .collect();
        return Err(ResolveError::NotAllowed {
            id: effect_id,
            status,
            action: resolution.action(),
            allowed: allowed.join(", "),
        });
    }
    if resolution == Resolution::Retry && status == EffectStatus::Pending {
        // Waiting out a delay: due now, nothing else changes (whether an attempt may have
        // landed still decides how it is sent; the claim checks the sink's breaker and
        // horizon as for any due effect).
        sqlx::query(
            "WITH logged AS (
                 INSERT INTO effect_resolutions (effect_id, previous_status, action, resolved_by, note)
                 VALUES ($1, 'pending', 'retry', $2, $3)
             )
             -- A new lease token fences out a dispatcher holding it for a step that
             -- sends nothing (a wait it was about to record), as every resolution does.
             UPDATE effects SET visible_at = now(), leased_by = NULL, lease_token = lease_token + 1
             WHERE id = $1",
        )
        .bind(effect_id)
        .bind(by)
        .bind(note)
        .execute(&mut *transaction)
        .await?;
        transaction.commit().await?;
        return Ok(());
    }
    sqlx::query(
        "WITH logged AS (
             INSERT INTO effect_resolutions (effect_id, previous_status, action, resolved_by, note)
             VALUES ($1, $2, $3, $4, $5)
         )
         -- A new lease token fences out any holder (a reconciliation in progress) so
         -- that its answer cannot overwrite this decision. A retry starts afresh: the
         -- operator has decided that sending again is right, so neither an earlier
         -- 'may have landed' nor the time budgets hold it back (attempts are kept).
         UPDATE effects
         SET status = $6, visible_at = now(), leased_by = NULL, lease_token = lease_token + 1,
             last_error = CASE WHEN $6 = 'abandoned' THEN 'abandoned: ' || $5 ELSE last_error END,
             completed_at = CASE WHEN $6 = 'completed' THEN now() END,
             maybe_delivered = CASE WHEN $3 = 'retry' THEN false ELSE maybe_delivered END,
             first_attempt_at = CASE WHEN $3 = 'retry' THEN NULL ELSE first_attempt_at END,
             uncertain_since = CASE WHEN $3 = 'retry' THEN NULL ELSE uncertain_since END,
             reconciliations = CASE WHEN $3 = 'retry' THEN 0 ELSE reconciliations END
         WHERE id = $1",
    )
    .bind(effect_id)
    .bind(status)
    .bind(resolution.action())
    .bind(by)
    .bind(note)
    .bind(resolution.new_status())
    .execute(&mut *transaction)
    .await?;
    transaction.commit().await?;
    Ok(())
}
