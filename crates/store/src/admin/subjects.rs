//! One business object's history (its **subject**: docs/contract.md, "Subjects"): every
//! receipt about it in any status, the effects they recorded with what each sink
//! answered, and every person's decision, in the provider's event-time order; and the
//! ordered subjects a failed or quarantined receipt holds now.
//!
//! Each read is bounded by an index however many receipts the table holds: a subject's
//! receipts through `receipts_by_subject (integration, subject, id)` — the newest
//! `limit` by id, one descent per key period, then sorted by event time — and their
//! effects, attempts and decisions by the receipt and effect ids found.

use chrono::{DateTime, Utc};
use inbound_core::keys::{EffectId, ReceiptId};
use inbound_core::states::{EffectStatus, ReceiptOutcome, ReceiptStatus};
use serde::Serialize;
use sqlx::PgConnection;

use super::listing::ReceiptDecision;
use crate::effects::{AttemptLine, ResolutionLine};

/// The most receipts one timeline read returns ([`subject_timeline`]'s `limit` is
/// clamped to it).
pub const MAX_TIMELINE_RECEIPTS: i64 = 10_000;

/// The most attempts shown per effect: its latest (a reconciled effect may have asked
/// its sink for hours).
pub const MAX_TIMELINE_ATTEMPTS: i64 = 20;

/// Everything inbound knows about one subject.
#[derive(Debug, Clone, Serialize)]
pub struct SubjectTimeline {
    /// The integration.
    pub integration: String,
    /// The subject.
    pub subject: String,
    /// Its receipts, in event-time order (the provider's time, else acceptance; then id).
    pub receipts: Vec<TimelineReceipt>,
    /// Whether older receipts than these exist (ask again with `before` = the first id).
    pub older: bool,
    /// The ordered receipts that hold the subject now (failed or quarantined; at most
    /// 100, whatever page is shown): none of its receipts runs until each is replayed or
    /// closed.
    pub held_by: Vec<ReceiptId>,
}

/// One receipt in a timeline.
#[derive(Debug, Clone, Serialize)]
pub struct TimelineReceipt {
    /// `receipts.id`.
    pub id: ReceiptId,
    /// The provider's event id.
    pub event_id: String,
    /// The event type.
    pub event_type: String,
    /// The provider's time of the event, when it sends one.
    pub event_at: Option<DateTime<Utc>>,
    /// When it was accepted.
    pub received_at: DateTime<Utc>,
    /// Where it stands.
    pub status: ReceiptStatus,
    /// How it ended, once done.
    pub outcome: Option<ReceiptOutcome>,
    /// Why (duplicate, ignored, quarantined, closed).
    pub outcome_reason: Option<String>,
    /// Its last transient error.
    pub last_error: Option<String>,
    /// Attempts so far.
    pub attempts: i32,
    /// Whether its route was ordered when it was accepted.
    pub ordered: bool,
    /// When it reached its terminal state.
    pub finished_at: Option<DateTime<Utc>>,
    /// The effects it recorded.
    pub effects: Vec<TimelineEffect>,
    /// Every person's decision about it, oldest first.
    pub decisions: Vec<ReceiptDecision>,
}

/// One effect in a timeline, with what its sink answered.
#[derive(Debug, Clone, Serialize)]
pub struct TimelineEffect {
    /// `effects.id`.
    pub id: EffectId,
    /// The idempotency key.
    pub operation_key: String,
    /// The sink.
    pub sink: String,
    /// What happened.
    pub kind: String,
    /// Where it stands.
    pub status: EffectStatus,
    /// Its latest deliveries and reconciliations (at most [`MAX_TIMELINE_ATTEMPTS`]),
    /// oldest first.
    pub attempts: Vec<AttemptLine>,
    /// Every person's decision about it, oldest first.
    pub decisions: Vec<ResolutionLine>,
}

/// The timeline of `subject` in `integration`: its newest `limit` receipts (older than
/// `before`, when given; `limit` at most [`MAX_TIMELINE_RECEIPTS`]) in event-time order.
/// Six statements, each through an index: receipts, effects, attempts, the two kinds of
/// decision, and the subject's holding receipts.
pub async fn subject_timeline(
    conn: &mut PgConnection,
    integration: &str,
    subject: &str,
    limit: i64,
    before: Option<ReceiptId>,
) -> Result<SubjectTimeline, sqlx::Error> {
    let limit = limit.clamp(1, MAX_TIMELINE_RECEIPTS);
    let mut rows = sqlx::query!(
        r#"SELECT r.id AS "id: ReceiptId", r.event_id, r.event_type, r.event_at, r.received_at,
                r.status AS "status: ReceiptStatus", r.outcome AS "outcome: ReceiptOutcome",
                r.outcome_reason, COALESCE(q.last_error, r.last_error) AS last_error,
                r.attempts, r.ordered, r.finished_at
         FROM (SELECT * FROM receipts
               WHERE integration = $1 AND subject = $2 AND ($4::int8 IS NULL OR id < $4)
               ORDER BY id DESC LIMIT $3::int8 + 1) r
         LEFT JOIN receipt_queue q ON q.receipt_id = r.id"#,
        integration,
        subject,
        limit,
        before as Option<ReceiptId>,
    )
    .fetch_all(&mut *conn)
    .await?;
    rows.sort_by_key(|row| std::cmp::Reverse(row.id));
    let older = rows.len() as i64 > limit;
    rows.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
    rows.sort_by_key(|row| (row.event_at.unwrap_or(row.received_at), row.id));
    let receipt_ids: Vec<ReceiptId> = rows.iter().map(|row| row.id).collect();
    let mut effects = timeline_effects(conn, &receipt_ids).await?;
    let mut decisions = receipt_decisions(conn, &receipt_ids).await?;
    // Whatever page is shown: the holding receipts of the subject, older ones too.
    let held_by = sqlx::query_scalar!(
        r#"SELECT id AS "id!: ReceiptId" FROM receipts
         WHERE integration = $1 AND subject = $2 AND ordered
           AND status IN ('failed', 'quarantined')
         ORDER BY id LIMIT 100"#,
        integration,
        subject,
    )
    .fetch_all(&mut *conn)
    .await?;
    let receipts = rows
        .into_iter()
        .map(|row| TimelineReceipt {
            effects: effects.remove(&row.id).unwrap_or_default(),
            decisions: decisions.remove(&row.id).unwrap_or_default(),
            id: row.id,
            event_id: row.event_id,
            event_type: row.event_type,
            event_at: row.event_at,
            received_at: row.received_at,
            status: row.status,
            outcome: row.outcome,
            outcome_reason: row.outcome_reason,
            last_error: row.last_error,
            attempts: row.attempts,
            ordered: row.ordered,
            finished_at: row.finished_at,
        })
        .collect();
    Ok(SubjectTimeline {
        integration: integration.to_owned(),
        subject: subject.to_owned(),
        receipts,
        older,
        held_by,
    })
}

type ByReceipt<T> = std::collections::HashMap<ReceiptId, Vec<T>>;

/// The effects of `receipts` with their latest attempts and their decisions.
async fn timeline_effects(
    conn: &mut PgConnection,
    receipts: &[ReceiptId],
) -> Result<ByReceipt<TimelineEffect>, sqlx::Error> {
    let effects = sqlx::query!(
        r#"SELECT id AS "id: EffectId", receipt_id AS "receipt_id: ReceiptId", operation_key,
                sink, kind, status AS "status: EffectStatus"
         FROM effects WHERE receipt_id = ANY($1) ORDER BY id"#,
        receipts as &[ReceiptId],
    )
    .fetch_all(&mut *conn)
    .await?;
    let effect_ids: Vec<EffectId> = effects.iter().map(|effect| effect.id).collect();
    let mut attempts = std::collections::HashMap::<EffectId, Vec<AttemptLine>>::new();
    for row in sqlx::query!(
        r#"SELECT a.effect_id AS "effect_id!: EffectId", a.attempt AS "attempt!",
                a.kind AS "kind!", a.started_at AS "started_at!", a.finished_at, a.outcome,
                a.status_code, a.error
         FROM unnest($1::int8[]) AS e(id)
         CROSS JOIN LATERAL (
             SELECT * FROM effect_attempts a WHERE a.effect_id = e.id
             ORDER BY a.id DESC LIMIT $2) a
         ORDER BY a.effect_id, a.id"#,
        &effect_ids as &[EffectId],
        MAX_TIMELINE_ATTEMPTS,
    )
    .fetch_all(&mut *conn)
    .await?
    {
        attempts
            .entry(row.effect_id)
            .or_default()
            .push(AttemptLine {
                attempt: row.attempt,
                kind: row.kind,
                started_at: row.started_at,
                finished_at: row.finished_at,
                outcome: row.outcome,
                status_code: row.status_code,
                error: row.error,
            });
    }
    let mut decisions = std::collections::HashMap::<EffectId, Vec<ResolutionLine>>::new();
    for row in sqlx::query!(
        r#"SELECT effect_id AS "effect_id: EffectId",
                previous_status AS "previous_status: EffectStatus",
                action AS "action: inbound_core::states::EffectAction", resolved_by, note,
                resolved_at, database_role
         FROM effect_resolutions WHERE effect_id = ANY($1) ORDER BY id"#,
        &effect_ids as &[EffectId],
    )
    .fetch_all(&mut *conn)
    .await?
    {
        decisions
            .entry(row.effect_id)
            .or_default()
            .push(ResolutionLine {
                previous_status: row.previous_status,
                action: row.action,
                resolved_by: row.resolved_by,
                note: row.note,
                resolved_at: row.resolved_at,
                database_role: row.database_role,
            });
    }
    let mut by_receipt = ByReceipt::new();
    for effect in effects {
        by_receipt
            .entry(effect.receipt_id)
            .or_default()
            .push(TimelineEffect {
                attempts: attempts.remove(&effect.id).unwrap_or_default(),
                decisions: decisions.remove(&effect.id).unwrap_or_default(),
                id: effect.id,
                operation_key: effect.operation_key,
                sink: effect.sink,
                kind: effect.kind,
                status: effect.status,
            });
    }
    Ok(by_receipt)
}

/// Every replay and resolution of `receipts`, oldest first.
async fn receipt_decisions(
    conn: &mut PgConnection,
    receipts: &[ReceiptId],
) -> Result<ByReceipt<ReceiptDecision>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT receipt_id AS "receipt_id!: ReceiptId", replayed_at AS "at!",
                'replay' AS "action!: inbound_core::states::ReceiptAction",
                previous_status AS "previous_status!: ReceiptStatus",
                replayed_by AS "by!", reason AS "reason!", database_role AS "database_role!"
         FROM receipt_replays WHERE receipt_id = ANY($1)
         UNION ALL
         SELECT receipt_id, resolved_at, action, previous_status, resolved_by, reason,
                database_role
         FROM receipt_resolutions WHERE receipt_id = ANY($1)
         ORDER BY 2 -- at"#,
        receipts as &[ReceiptId],
    )
    .fetch_all(conn)
    .await?;
    let mut by_receipt = ByReceipt::new();
    for row in rows {
        by_receipt
            .entry(row.receipt_id)
            .or_default()
            .push(ReceiptDecision {
                at: row.at,
                action: row.action,
                previous_status: row.previous_status,
                by: row.by,
                reason: row.reason,
                database_role: row.database_role,
            });
    }
    Ok(by_receipt)
}

/// An ordered subject held by a failed or quarantined receipt, and what waits behind it.
#[derive(Debug, Clone, Serialize)]
pub struct HeldSubject {
    /// The integration.
    pub integration: String,
    /// The subject.
    pub subject: String,
    /// The first receipt that holds it (by event time).
    pub held_by: ReceiptId,
    /// Its event id.
    pub event_id: String,
    /// `failed` or `quarantined`.
    pub status: ReceiptStatus,
    /// Its reason or last error.
    pub reason: Option<String>,
    /// Since when it holds the subject.
    pub since: Option<DateTime<Utc>>,
    /// The subject's queued receipts waiting behind it.
    pub waiting: i64,
}

/// The most failed or quarantined ordered receipts one read of the held subjects looks at
/// (an incident that holds more still shows this many).
pub const HELD_RECEIPTS_READ: i64 = 100_000;

/// The most queued receipts counted as waiting behind one held subject.
pub const MAX_WAITING_COUNTED: i64 = 10_000;

/// The ordered subjects held now (of `integration`, when given), the longest held first:
/// at most `limit`, from at most [`HELD_RECEIPTS_READ`] holding receipts, each with up to
/// [`MAX_WAITING_COUNTED`] waiting. Through `receipts_holding_subject` (partial: only
/// failed and quarantined ordered receipts) and the queue's subject order.
pub async fn held_subjects(
    conn: &mut PgConnection,
    integration: Option<&str>,
    limit: i64,
) -> Result<Vec<HeldSubject>, sqlx::Error> {
    sqlx::query_as!(
        HeldSubject,
        r#"SELECT h.integration AS "integration!", h.subject AS "subject!",
                h.id AS "held_by!: ReceiptId", h.event_id AS "event_id!",
                h.status AS "status!: ReceiptStatus", h.reason, h.since,
                (SELECT count(*) FROM (SELECT 1 FROM receipt_queue q
                                       WHERE q.integration = h.integration
                                         AND q.subject = h.subject
                                       LIMIT $4) waiting) AS "waiting!"
         FROM (SELECT DISTINCT ON (r.integration, r.subject)
                      r.integration, r.subject, r.id, r.event_id, r.status,
                      COALESCE(r.outcome_reason, r.last_error) AS reason, r.finished_at AS since
               FROM (SELECT * FROM receipts
                     WHERE ordered AND status IN ('failed', 'quarantined')
                       AND ($1::text IS NULL OR integration = $1)
                     LIMIT $3) r
               ORDER BY r.integration, r.subject, coalesce(r.event_at, r.received_at), r.id) h
         ORDER BY h.since NULLS LAST, h.integration, h.subject
         LIMIT $2"#,
        integration,
        limit,
        HELD_RECEIPTS_READ,
        MAX_WAITING_COUNTED,
    )
    .fetch_all(conn)
    .await
}

/// Per integration: how many ordered subjects are held, and how many queued receipts
/// wait behind them, up to [`MAX_WAITING_COUNTED`] a subject (the gauges
/// `inbound_subjects_held` and `inbound_subject_held_receipts`). Reads at most `limit`
/// holding receipts, through `receipts_holding_subject`.
pub async fn held_counts(
    conn: &mut PgConnection,
    limit: i64,
) -> Result<Vec<(String, i64, i64)>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"WITH held AS (
             SELECT DISTINCT integration, subject FROM (
                 SELECT integration, subject FROM receipts
                 WHERE ordered AND status IN ('failed', 'quarantined')
                 LIMIT $1) holding
         )
         SELECT h.integration AS "integration!", count(*) AS "subjects!",
                coalesce(sum((SELECT count(*) FROM (SELECT 1 FROM receipt_queue q
                                                    WHERE q.integration = h.integration
                                                      AND q.subject = h.subject
                                                    LIMIT $2) waiting)), 0)::int8 AS "waiting!"
         FROM held h GROUP BY h.integration ORDER BY 1"#,
        limit,
        MAX_WAITING_COUNTED,
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| (row.integration, row.subjects, row.waiting))
        .collect())
}

/// Removes subject lease rows nothing needs any more, at most 1,000 of each kind a call:
/// leases that ended or expired over an hour ago (a subject not claimed again since; a
/// dead worker's; one left by an operator's take-out of a leased head), and holds no
/// failed or quarantined receipt stands behind (none should exist: a safeguard, so that
/// no subject can stay held by a row alone). Each kind is deleted only as it still is when
/// deleted: an ended lease a claim or a hold took over since stays, and a hold's row is
/// locked before its holders are read, in a statement of their own (a receipt failing at
/// the same time writes that row too). Run with the gauges; returns how many went.
pub async fn sweep_subject_leases(conn: &mut PgConnection) -> Result<u64, sqlx::Error> {
    use sqlx::Connection;
    let stale = sqlx::query!(
        r#"DELETE FROM subject_leases l
         USING (SELECT integration, subject FROM subject_leases
                WHERE leased_until < now() - interval '1 hour' LIMIT 1000) gone
         WHERE l.integration = gone.integration AND l.subject = gone.subject
           AND l.leased_until < now() - interval '1 hour'"#
    )
    .execute(&mut *conn)
    .await?
    .rows_affected();
    let mut transaction = conn.begin().await?;
    let holds = sqlx::query!(
        r#"SELECT integration, subject FROM subject_leases
         WHERE leased_until = 'infinity' LIMIT 1000 FOR UPDATE SKIP LOCKED"#
    )
    .fetch_all(&mut *transaction)
    .await?;
    let (integrations, subjects): (Vec<String>, Vec<String>) = holds
        .into_iter()
        .map(|hold| (hold.integration, hold.subject))
        .unzip();
    let orphaned = sqlx::query!(
        r#"DELETE FROM subject_leases l
         USING unnest($1::text[], $2::text[]) AS hold(integration, subject)
         WHERE l.integration = hold.integration AND l.subject = hold.subject
           AND l.leased_until = 'infinity'
           AND NOT EXISTS (SELECT 1 FROM receipts r
                           WHERE r.integration = hold.integration AND r.subject = hold.subject
                             AND r.ordered AND r.status IN ('failed', 'quarantined'))"#,
        &integrations,
        &subjects,
    )
    .execute(&mut *transaction)
    .await?
    .rows_affected();
    transaction.commit().await?;
    Ok(stale + orphaned)
}
