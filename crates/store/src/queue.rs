//! The receipt queue: claim with leases, fence the business transaction on the lease
//! token, and record how an attempt ended.
//!
//! A lease is visibility: a claimed row's `visible_at` moves `lease` into the future, so
//! an expired lease is simply claimable again. Every claim draws a new `lease_token` from
//! one sequence (so a receipt's token only grows, across replays too); every later write
//! about that attempt names the token, and a stale one matches no row.

use inbound_core::keys::{LeaseToken, ReceiptLease};
use inbound_core::states::{ReceiptOutcome, ReceiptStatus};
use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::PgConnection;

use inbound_core::keys::ReceiptId;

mod lookups;
mod payloads;
pub use lookups::{ReceiptState, receipt_names};
pub use payloads::StoredPayload;
pub(crate) use payloads::cannot_render_a_row;
use payloads::stored_payloads;

/// A receipt claimed by one worker for one attempt.
#[derive(Debug, Clone)]
pub struct ClaimedReceipt {
    /// `receipts.id`.
    pub receipt_id: ReceiptId,
    /// The fencing token of this attempt.
    pub lease_token: LeaseToken,
    /// Attempts including this one.
    pub attempts: i32,
    /// Whether the row was taken over from a holder whose lease expired.
    pub reclaimed: bool,
    /// The integration id.
    pub integration: String,
    /// First half of the receipt key.
    pub source_scope: String,
    /// Second half of the receipt key.
    pub event_id: String,
    /// The stored event type.
    pub event_type: String,
    /// The route that matched at acceptance.
    pub route_key: String,
    /// The delivery's provider facts (`receipts.delivery`), when the provider sent any.
    pub delivery: Option<serde_json::Value>,
    /// The payload, decoded on its own: one that cannot be decoded costs only its receipt.
    pub payload: StoredPayload,
    /// The payload's size as accepted (what the claim counted against its byte budget).
    pub payload_bytes: i64,
    /// When the ingress committed the receipt.
    pub received_at: DateTime<Utc>,
    /// What the event is about ([`inbound_core::event::subject`]), if it names anything.
    pub subject: Option<String>,
    /// The provider's own time of the event, if it sends one.
    pub event_at: Option<DateTime<Utc>>,
    /// The subject it was claimed under, when its route is ordered: no other receipt of
    /// the subject runs until this one's transaction ends or its lease does.
    pub ordered_subject: Option<String>,
}

impl ClaimedReceipt {
    /// The receipt and the token this claim holds.
    pub fn lease(&self) -> ReceiptLease {
        ReceiptLease {
            receipt_id: self.receipt_id,
            token: self.lease_token,
        }
    }

    /// The receipt id as a newtype.
    pub fn id(&self) -> ReceiptId {
        self.receipt_id
    }
}

/// A receipt the claim found with its attempts spent although the last attempt never
/// recorded an outcome (its worker died or hung each time): it is now `failed`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExhaustedReceipt {
    /// `receipts.id`.
    pub receipt_id: ReceiptId,
    /// The integration id.
    pub integration: String,
    /// The provider's event id.
    pub event_id: String,
    /// Attempts claimed.
    pub attempts: i32,
}

/// What one claim took.
#[derive(Debug, Clone, Default)]
pub struct Claim {
    /// Leased to this worker, oldest first by id.
    pub claimed: Vec<ClaimedReceipt>,
    /// Failed by the claim itself: attempts spent without an outcome.
    pub exhausted: Vec<ExhaustedReceipt>,
    /// The ordered subject (integration, subject) the claim's walk stopped at, if it
    /// walked any: where the worker's next claim resumes ([`SubjectCursor`]).
    pub walked_to: Option<(String, String)>,
}

/// How much one claim may take.
#[derive(Debug, Clone, Copy)]
pub struct ClaimLimits {
    /// Receipts at most.
    pub receipts: i64,
    /// Payload bytes at most (counted as accepted)…
    pub payload_bytes: i64,
    /// …unless this is set and the first receipt alone is larger: it is then claimed
    /// alone (a worker with nothing in flight must still make progress).
    pub allow_one_larger: bool,
    /// A visible receipt with this many attempts is failed instead of claimed.
    pub max_attempts: i32,
    /// How long each of the claim's statements (the claim, the payload reads) may wait
    /// on the database ([`super::bounded`]).
    pub statement_limit: Duration,
}

struct ClaimRow {
    /// `claimed`, `exhausted`, or `walked_to` (where the walk over subjects stopped).
    kind: String,
    receipt_id: ReceiptId,
    lease_token: LeaseToken,
    attempts: i32,
    reclaimed: bool,
    integration: String,
    source_scope: String,
    event_id: String,
    event_type: String,
    route_key: String,
    delivery: Option<serde_json::Value>,
    payload_bytes: i32,
    received_at: DateTime<Utc>,
    ordered_subject: Option<String>,
    subject: Option<String>,
    event_at: Option<DateTime<Utc>>,
}

/// Claims visible receipts in one statement, leasing them for `lease`, within `limits`;
/// `integrations`, when given, pins the claim to those integrations. A visible receipt
/// whose attempts are spent is failed in the same statement instead (a crash loop ends).
/// The payloads are read afterwards (`stored_payloads`), so that no payload can fail the
/// claim itself.
pub async fn claim_batch(
    conn: &mut PgConnection,
    limits: ClaimLimits,
    lease: Duration,
    worker_id: &str,
    integrations: Option<&[String]>,
    cursor: &SubjectCursor,
    now: Option<DateTime<Utc>>,
) -> Result<Claim, sqlx::Error> {
    let (after_integration, after_subject) = match &cursor.last {
        Some((integration, subject)) => (Some(integration.as_str()), Some(subject.as_str())),
        None => (None, None),
    };
    let claim = sqlx::query_file_as!(
        ClaimRow,
        "queries/queue/claim.sql",
        limits.receipts,
        i64::try_from(lease.as_millis()).unwrap_or(i64::MAX),
        worker_id,
        integrations as Option<&[String]>,
        limits.payload_bytes,
        limits.max_attempts,
        limits.allow_one_larger,
        now,
        after_integration,
        after_subject,
    )
    .fetch_all(&mut *conn);
    let rows = super::bounded::statement(limits.statement_limit, claim).await?;
    let claimed_ids: Vec<ReceiptId> = rows
        .iter()
        .filter(|row| row.kind == "claimed")
        .map(|row| row.receipt_id)
        .collect();
    let payloads = stored_payloads(conn, &claimed_ids, limits.statement_limit).await?;
    Ok(Claim::from_rows(rows, payloads))
}

/// Where a worker's walk over ordered subjects resumes: after the subject its last walk
/// stopped at, to the last subject and round from the first (`queries/queue/claim.sql`),
/// so that a queue of many subjects is served in turn rather than always from its first.
/// `Default`: from the first subject.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubjectCursor {
    last: Option<(String, String)>,
}

impl SubjectCursor {
    /// Moves to where `claim`'s walk stopped; unchanged when it walked no subject.
    pub fn advance(&mut self, claim: &Claim) {
        if let Some(walked_to) = &claim.walked_to {
            self.last = Some(walked_to.clone());
        }
    }
}

impl Claim {
    /// The claim's rows, each claimed one with its payload.
    fn from_rows(rows: Vec<ClaimRow>, mut payloads: HashMap<ReceiptId, StoredPayload>) -> Self {
        let mut claim = Self::default();
        for row in rows {
            if row.kind == "walked_to" {
                claim.walked_to = row
                    .ordered_subject
                    .map(|subject| (row.integration, subject));
                continue;
            }
            if row.kind == "exhausted" {
                claim.exhausted.push(ExhaustedReceipt {
                    receipt_id: row.receipt_id,
                    integration: row.integration,
                    event_id: row.event_id,
                    attempts: row.attempts,
                });
                continue;
            }
            claim.claimed.push(ClaimedReceipt {
                receipt_id: row.receipt_id,
                lease_token: row.lease_token,
                attempts: row.attempts,
                reclaimed: row.reclaimed,
                integration: row.integration,
                source_scope: row.source_scope,
                event_id: row.event_id,
                event_type: row.event_type,
                route_key: row.route_key,
                delivery: row.delivery,
                payload: payloads
                    .remove(&row.receipt_id)
                    .unwrap_or(StoredPayload::Purged),
                payload_bytes: i64::from(row.payload_bytes),
                received_at: row.received_at,
                subject: row.subject,
                event_at: row.event_at,
                ordered_subject: row.ordered_subject,
            });
        }
        claim
    }
}

/// The first statement of a business transaction: removes the queue row if this attempt
/// still holds the lease — and, for an ordered receipt, its subject's lease too. `false`
/// means the lease was lost: roll back. The row (and the subject's lease row) stays locked
/// until the transaction ends, so no other worker can claim it (or the subject) meanwhile.
pub async fn dequeue_fenced(
    conn: &mut PgConnection,
    lease: ReceiptLease,
) -> Result<bool, sqlx::Error> {
    Ok(dequeue_fenced_all(conn, &[lease])
        .await?
        .is_some_and(|fenced| fenced.len() == 1))
}

/// [`dequeue_fenced`] for a whole batch in one statement: removes each queue row whose
/// attempt still holds its lease — an ordered receipt's only while its subject's lease is
/// still this attempt's — and returns those receipt ids; the rest lost their lease. The
/// removed rows stay locked until the transaction ends.
///
/// `None`: a subject's lease was taken over by a claim that committed while this statement
/// ran (a worker that outlived its lease, in the instant another claim took the subject):
/// the queue row is gone in this transaction but the subject is no longer this attempt's,
/// so the caller rolls the transaction back.
pub async fn dequeue_fenced_all(
    conn: &mut PgConnection,
    leases: &[ReceiptLease],
) -> Result<Option<Vec<ReceiptId>>, sqlx::Error> {
    let receipt_ids: Vec<ReceiptId> = leases.iter().map(|lease| lease.receipt_id).collect();
    let lease_tokens: Vec<LeaseToken> = leases.iter().map(|lease| lease.token).collect();
    // An ordered row is fenced only while its subject's lease (in this statement's
    // snapshot) still carries its token: a worker that outlived its lease, whose subject
    // another claim took for a later head, loses the lease here. The subject's lease row
    // is then ended with the row (locked until the transaction ends: a claim of the
    // subject waits for it); one that changed since the snapshot matches nothing, and the
    // transaction must not commit.
    let rows = sqlx::query!(
        r#"WITH fenced AS (
             DELETE FROM receipt_queue q
             USING unnest($1::bigint[], $2::bigint[]) AS fence(receipt_id, lease_token)
             WHERE q.receipt_id = fence.receipt_id AND q.lease_token = fence.lease_token
               AND (q.subject IS NULL
                    OR EXISTS (SELECT 1 FROM subject_leases l
                               WHERE l.integration = q.integration AND l.subject = q.subject
                                 AND l.lease_token = q.lease_token))
             RETURNING q.receipt_id, q.integration, q.subject, q.lease_token
         ), released AS (
             -- Given back by ending it now (an update in place, no index touched: the row
             -- is the subject's next lease too; the gauges' sweep deletes it an hour on).
             UPDATE subject_leases l SET leased_until = now()
             FROM fenced f
             WHERE l.integration = f.integration AND l.subject = f.subject
               AND l.lease_token = f.lease_token
             RETURNING l.lease_token
         )
         SELECT f.receipt_id AS "receipt_id!: ReceiptId",
                (f.subject IS NULL OR f.lease_token IN (SELECT lease_token FROM released))
                    AS "held!"
         FROM fenced f"#,
        receipt_ids as Vec<ReceiptId>,
        lease_tokens as Vec<LeaseToken>,
    )
    .fetch_all(conn)
    .await?;
    if rows.iter().any(|row| !row.held) {
        return Ok(None);
    }
    Ok(Some(rows.into_iter().map(|row| row.receipt_id).collect()))
}

/// A terminal state written in the business transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish<'a> {
    /// `done` with `applied`.
    Applied,
    /// `done` with `duplicate` and why.
    Duplicate(&'a str),
    /// `done` with `ignored` and why.
    Ignored(&'a str),
    /// `quarantined` with why.
    Quarantined(&'a str),
}

impl<'a> Finish<'a> {
    /// `(status, outcome, outcome_reason)` as stored in `receipts`.
    fn columns(self) -> (ReceiptStatus, Option<ReceiptOutcome>, Option<&'a str>) {
        use ReceiptOutcome::{Applied, Duplicate, Ignored};
        use ReceiptStatus::{Done, Quarantined};
        match self {
            Finish::Applied => (Done, Some(Applied), None),
            Finish::Duplicate(reason) => (Done, Some(Duplicate), Some(reason)),
            Finish::Ignored(reason) => (Done, Some(Ignored), Some(reason)),
            Finish::Quarantined(reason) => (Quarantined, None, Some(reason)),
        }
    }
}

/// One receipt's terminal state for [`finish_all`].
#[derive(Debug, Clone, Copy)]
pub struct FinishedReceipt<'a> {
    /// `receipts.id`.
    pub receipt_id: ReceiptId,
    /// Attempts including the one that finished it.
    pub attempts: i32,
    /// How it ended.
    pub finish: Finish<'a>,
}

/// Records the terminal state, inside the business transaction (after [`dequeue_fenced`]).
pub async fn finish(
    conn: &mut PgConnection,
    receipt_id: ReceiptId,
    attempts: i32,
    finish: Finish<'_>,
) -> Result<(), sqlx::Error> {
    let (status, outcome, reason) = finish.columns();
    sqlx::query_file!(
        "queries/queue/finish.sql",
        receipt_id as ReceiptId,
        status as ReceiptStatus,
        outcome as Option<ReceiptOutcome>,
        reason,
        attempts,
    )
    .fetch_one(conn)
    .await?;
    Ok(())
}

/// [`finish`] for a whole batch in one statement, inside the business transaction (after
/// [`dequeue_fenced_all`]).
pub async fn finish_all(
    conn: &mut PgConnection,
    finished: &[FinishedReceipt<'_>],
) -> Result<(), sqlx::Error> {
    let mut receipt_ids = Vec::with_capacity(finished.len());
    let mut attempts = Vec::with_capacity(finished.len());
    let mut statuses = Vec::with_capacity(finished.len());
    let mut outcomes = Vec::with_capacity(finished.len());
    let mut reasons = Vec::with_capacity(finished.len());
    for one in finished {
        let (status, outcome, reason) = one.finish.columns();
        receipt_ids.push(one.receipt_id);
        attempts.push(one.attempts);
        statuses.push(status);
        outcomes.push(outcome);
        reasons.push(reason);
    }
    sqlx::query_file!(
        "queries/queue/finish_all.sql",
        receipt_ids as Vec<ReceiptId>,
        statuses as Vec<ReceiptStatus>,
        outcomes as Vec<Option<ReceiptOutcome>>,
        reasons as Vec<Option<&str>>,
        &attempts,
    )
    .fetch_one(conn)
    .await?;
    Ok(())
}

/// After a transient failure (its transaction rolled back): releases the lease and makes
/// the receipt visible again after `delay`, recording the error. One statement. `false`
/// when the lease was already lost.
pub async fn release_for_retry(
    conn: &mut PgConnection,
    lease: ReceiptLease,
    delay: Duration,
    error: &str,
    now: Option<DateTime<Utc>>,
) -> Result<bool, sqlx::Error> {
    let updated = sqlx::query!(
        "WITH released AS (
             UPDATE receipt_queue
             SET visible_at = coalesce($5, now()) + $3::int8 * interval '1 millisecond',
                 leased_by = NULL, leased_at = NULL, last_error = $4
             WHERE receipt_id = $1 AND lease_token = $2
             RETURNING receipt_id, attempts, integration, subject, lease_token
         ), subject_released AS (
             -- A waiting head keeps its place (its queue row sorts first): its subject
             -- still waits for it, but no worker holds it.
             UPDATE subject_leases l SET leased_until = coalesce($5, now())
             FROM released f
             WHERE l.integration = f.integration AND l.subject = f.subject
               AND l.lease_token = f.lease_token
         )
         UPDATE receipts r SET attempts = released.attempts, last_error = $4
         FROM released WHERE r.id = released.receipt_id",
        lease.receipt_id as ReceiptId,
        lease.token as LeaseToken,
        i64::try_from(delay.as_millis()).unwrap_or(i64::MAX),
        error,
        now,
    )
    .execute(conn)
    .await?;
    Ok(updated.rows_affected() == 1)
}

/// Attempts exhausted: the receipt leaves the queue as `failed` with its last error. One
/// statement. `false` when the lease was already lost.
pub async fn fail_exhausted(
    conn: &mut PgConnection,
    lease: ReceiptLease,
    error: &str,
) -> Result<bool, sqlx::Error> {
    let updated = sqlx::query!(
        "WITH removed AS (
             DELETE FROM receipt_queue WHERE receipt_id = $1 AND lease_token = $2
             RETURNING receipt_id, attempts, integration, subject, lease_token
         ), subject_held AS (
             -- An ordered receipt that failed holds its subject from now on: its lease
             -- row becomes one that never expires (queue/finish.sql says why).
             INSERT INTO subject_leases (integration, subject, lease_token, leased_until)
             SELECT integration, subject, 0, 'infinity' FROM removed
             WHERE subject IS NOT NULL
             ON CONFLICT (integration, subject)
             DO UPDATE SET lease_token = 0, leased_until = 'infinity'
         )
         UPDATE receipts r
         SET status = 'failed', attempts = removed.attempts, last_error = $3, finished_at = now()
         FROM removed WHERE r.id = removed.receipt_id",
        lease.receipt_id as ReceiptId,
        lease.token as LeaseToken,
        error,
    )
    .execute(conn)
    .await?;
    Ok(updated.rows_affected() == 1)
}
