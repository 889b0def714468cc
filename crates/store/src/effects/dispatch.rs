//! The dispatcher's statements: the per-sink claim (which begins delivery attempts and
//! refuses resends past their horizon), the group-committed ends of delivery attempts and
//! the steps that send nothing new, every one fenced on the claim's lease token and with
//! its delays clamped before they are bound.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::PgConnection;

use inbound_core::effects::MAX_STEP_DELAY;
use inbound_core::keys::{EffectId, LeaseToken, ReceiptId};
use inbound_core::states::EffectStatus;

/// An effect claimed by one dispatcher for one step (a delivery or a reconciliation).
#[derive(Debug, Clone)]
pub struct ClaimedEffect {
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
    now: Option<DateTime<Utc>>,
) -> Result<Vec<ClaimedEffect>, sqlx::Error> {
    let columns = SinkColumns::of(sinks, limit);
    sqlx::query_file_as!(
        ClaimedEffect,
        "queries/effects/claim.sql",
        limit,
        millis(lease),
        worker_id,
        columns.ids as Vec<&str>,
        &columns.limits,
        &columns.leases,
        columns.horizons as Vec<Option<i64>>,
        now,
    )
    .fetch_all(conn)
    .await
}

/// The sinks of a claim as the statement's arrays: id, slots (at most the claim's
/// limit), in-flight lease and resend horizon in milliseconds.
struct SinkColumns<'a> {
    ids: Vec<&'a str>,
    limits: Vec<i64>,
    leases: Vec<i64>,
    horizons: Vec<Option<i64>>,
}

impl<'a> SinkColumns<'a> {
    fn of(sinks: &'a [SinkClaim], limit: i64) -> Self {
        Self {
            ids: sinks.iter().map(|one| one.sink.as_str()).collect(),
            limits: sinks.iter().map(|one| one.limit.min(limit)).collect(),
            leases: sinks
                .iter()
                .map(|one| millis(one.in_flight_lease))
                .collect(),
            horizons: sinks
                .iter()
                .map(|one| one.resend_horizon.map(millis))
                .collect(),
        }
    }
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
    pub effect_id: EffectId,
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
    now: Option<DateTime<Utc>>,
) -> Result<Vec<EffectId>, sqlx::Error> {
    let ids: Vec<EffectId> = finished.iter().map(|one| one.effect_id).collect();
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
    sqlx::query_file_scalar!(
        "queries/effects/finish_deliveries.sql",
        ids as Vec<EffectId>,
        tokens as Vec<LeaseToken>,
        &attempts,
        statuses as Vec<EffectStatus>,
        &delays,
        errors as Vec<Option<&str>>,
        &maybe,
        outcomes as Vec<&str>,
        codes as Vec<Option<i32>>,
        now,
    )
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
    effect_id: EffectId,
    lease_token: LeaseToken,
    kind: StepKind,
    record: &StepRecord<'_>,
    now: Option<DateTime<Utc>>,
) -> Result<bool, sqlx::Error> {
    let reconcile = kind == StepKind::Reconcile;
    let recorded = sqlx::query_scalar!(
        r#"WITH updated AS (
             UPDATE effects
             SET status = $3,
                 visible_at = coalesce($10, now()) + $4::int8 * interval '1 millisecond',
                 last_error = $5, maybe_delivered = $6, leased_by = NULL,
                 reconciliations = reconciliations + $9::bool::int,
                 uncertain_since = CASE WHEN $3 = 'uncertain'
                                        THEN COALESCE(uncertain_since, $10, now())
                                        ELSE uncertain_since END,
                 completed_at = CASE WHEN $3 = 'completed' THEN coalesce($10, now()) END
             WHERE id = $1 AND lease_token = $2
             RETURNING id, attempts
         ), closed AS (
             -- A delivery left open by a dead worker is closed with this verdict.
             UPDATE effect_attempts a
             SET finished_at = coalesce($10, now()), outcome = $7, error = $5
             FROM updated WHERE NOT $9 AND a.effect_id = updated.id AND a.attempt = updated.attempts
               AND a.kind = 'delivery' AND a.finished_at IS NULL
         ), logged AS (
             INSERT INTO effect_attempts (effect_id, attempt, kind, finished_at, outcome,
                                          status_code, error)
             SELECT id, attempts, 'reconcile', coalesce($10, now()), $7, $8, $5
             FROM updated WHERE $9
         )
         SELECT count(*) AS "recorded!" FROM updated"#,
        effect_id as EffectId,
        lease_token as LeaseToken,
        record.status as EffectStatus,
        delay_ms(record.visible_after),
        bounded_error(record.error),
        record.maybe_delivered,
        record.outcome,
        record.status_code.map(i32::from),
        reconcile,
        now,
    )
    .fetch_one(conn)
    .await?;
    Ok(recorded == 1)
}
