//! What operators read: receipts by filter a page at a time, by the provider's event id
//! (one lookup of its index), one receipt's detail, decisions and effects.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgConnection;

use crate::queue;
use inbound_core::keys::{EffectId, ReceiptId};
use inbound_core::states::{EffectStatus, ReceiptAction, ReceiptOutcome, ReceiptStatus};

/// One line of `inboundctl receipts list`.
#[derive(Debug, Clone, Serialize)]
pub struct ReceiptSummary {
    /// `receipts.id`.
    pub id: ReceiptId,
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
    pub before_id: Option<ReceiptId>,
    /// Only ids above this: the lower end of a window, so a selective filter over `done`
    /// receipts reads a bounded range of the primary key (the console's pages).
    pub after_id: Option<ReceiptId>,
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
    // Through receipts_status_received (one status), newest first.
    sqlx::query_as!(
        ReceiptSummary,
        r#"SELECT id AS "id: ReceiptId", integration, event_id, event_type,
                status AS "status: ReceiptStatus", outcome AS "outcome: ReceiptOutcome",
                attempts, received_at, left(coalesce(outcome_reason, last_error), 200) AS reason
         FROM receipts
         WHERE status = $1
           AND ($2::text[] IS NULL OR integration = ANY ($2))
           AND ($3::text IS NULL OR event_type = $3)
           AND ($4::timestamptz IS NULL OR received_at >= $4)
           AND ($5::timestamptz IS NULL OR received_at < $5)
           AND ($6::int8 IS NULL OR id < $6)
           AND ($7::int8 IS NULL OR id > $7)
         ORDER BY id DESC LIMIT $8"#,
        filter.status as ReceiptStatus,
        filter.integrations.as_deref() as Option<&[String]>,
        filter.event_type.as_deref(),
        filter.since,
        filter.until,
        filter.before_id as Option<ReceiptId>,
        filter.after_id as Option<ReceiptId>,
        limit,
    )
    .fetch_all(conn)
    .await
}

/// The most receipts [`receipts_by_event_id`] returns: one event id in many scopes is a
/// sender replaying one body under unsigned headers, and a search stays a bounded read.
pub const EVENT_ID_MATCHES_LISTED: i64 = 200;

/// The receipts holding the provider's event id `event_id` (Stripe `evt_…`, GitHub's
/// `X-GitHub-Delivery`, Slack's `event_id`, a Standard Webhooks `webhook-id`), in any
/// scope, oldest first and at most [`EVENT_ID_MATCHES_LISTED`]: one lookup of the
/// event-id index, however many scopes senders have made.
pub async fn receipts_by_event_id(
    conn: &mut PgConnection,
    event_id: &str,
) -> Result<Vec<ReceiptSummary>, sqlx::Error> {
    // Through receipts_by_event_id.
    sqlx::query_as!(
        ReceiptSummary,
        r#"SELECT r.id AS "id: ReceiptId", r.integration, r.event_id, r.event_type,
                r.status AS "status: ReceiptStatus", r.outcome AS "outcome: ReceiptOutcome",
                r.attempts, r.received_at,
                left(coalesce(r.outcome_reason, r.last_error), 200) AS reason
         FROM receipts r WHERE r.event_id = $1
         ORDER BY r.id LIMIT $2"#,
        event_id,
        EVENT_ID_MATCHES_LISTED,
    )
    .fetch_all(conn)
    .await
}

/// What identifies the state of each of `receipt_ids` now — status, attempts, when it
/// finished (a replay clears it, a new failure sets it again) — in id order: a bulk
/// confirmation is for these versions only.
pub async fn receipt_versions(
    conn: &mut PgConnection,
    receipt_ids: &[ReceiptId],
) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT id || ':' || status || ':' || attempts || ':' || coalesce(finished_at::text, '-')
                AS "version!"
         FROM receipts WHERE id = ANY ($1) ORDER BY id"#,
        receipt_ids as &[ReceiptId],
    )
    .fetch_all(conn)
    .await
}

/// The highest receipt id below `before` (the newest without it): one descent of the
/// primary key. Ids name their day, so the id below a day's first is the previous day's
/// last, however far apart the two numbers are.
pub async fn receipt_id_below(
    conn: &mut PgConnection,
    before: Option<ReceiptId>,
) -> Result<Option<ReceiptId>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT max(id) AS "id: ReceiptId" FROM receipts WHERE $1::int8 IS NULL OR id < $1"#,
        before as Option<ReceiptId>
    )
    // Planned for this cursor: a generic plan would read every partition above it.
    .persistent(false)
    .fetch_one(conn)
    .await
}

/// The integrations that hold receipts (the first part of every scope): a few descents
/// of the receipt-key index per integration, however many scopes each has. An
/// integration's scopes are its escaped id `p` alone or `p/` and more, compared byte by
/// byte, so from a scope `p/…` the next scope of another integration is the first from
/// `p0` on (`/` sorts just before `0`); from the bare `p` it is the next scope (an id that
/// extends `p` with a byte below `/`, like `p-eu`, sorts between `p` and `p/`). Each step
/// moves forward; an integration such an id interleaves is met twice and listed once.
pub async fn integrations_with_receipts(
    conn: &mut PgConnection,
) -> Result<Vec<String>, sqlx::Error> {
    let scopes = sqlx::query_scalar!(
        "WITH RECURSIVE scopes (scope) AS (
             (SELECT source_scope FROM receipts ORDER BY source_scope LIMIT 1)
             UNION ALL
             -- The smallest string above a bare `p` is `p` and the byte 1.
             SELECT (SELECT r.source_scope FROM receipts r
                     WHERE r.source_scope >= CASE WHEN strpos(s.scope, '/') = 0
                                                  THEN s.scope || chr(1)
                                                  ELSE split_part(s.scope, '/', 1) || '0' END
                     ORDER BY r.source_scope LIMIT 1)
             FROM scopes s WHERE s.scope IS NOT NULL
         )
         SELECT scope FROM scopes"
    )
    .fetch_all(&mut *conn)
    .await?;
    let mut integrations: Vec<String> = scopes
        .into_iter()
        .flatten()
        .map(|scope| inbound_core::keys::SourceScope::first_part(&scope))
        .collect();
    integrations.sort();
    integrations.dedup();
    Ok(integrations)
}

/// One operator decision about a receipt: a replay or a resolution (quarantine, fail,
/// close).
#[derive(Debug, Clone, Serialize)]
pub struct ReceiptDecision {
    /// When, by the database's clock.
    pub at: DateTime<Utc>,
    /// What was decided.
    pub action: ReceiptAction,
    /// The status it left.
    pub previous_status: ReceiptStatus,
    /// Who, as they named themselves.
    pub by: String,
    /// Why.
    pub reason: String,
    /// The database role that recorded it.
    pub database_role: String,
}

/// Every operator decision about receipt `id`, oldest first.
pub async fn receipt_history(
    conn: &mut PgConnection,
    id: ReceiptId,
) -> Result<Vec<ReceiptDecision>, sqlx::Error> {
    sqlx::query_as!(
        ReceiptDecision,
        r#"SELECT replayed_at AS "at!", 'replay' AS "action!: ReceiptAction",
                previous_status AS "previous_status!: ReceiptStatus",
                replayed_by AS "by!", reason AS "reason!", database_role AS "database_role!"
         FROM receipt_replays WHERE receipt_id = $1
         UNION ALL
         SELECT resolved_at, action, previous_status, resolved_by, reason, database_role
         FROM receipt_resolutions WHERE receipt_id = $1
         ORDER BY 1 -- at"#,
        id as ReceiptId,
    )
    .fetch_all(conn)
    .await
}

/// Everything `inboundctl receipts show` prints.
#[derive(Debug, Clone, Serialize)]
pub struct ReceiptDetail {
    /// `receipts.id`.
    pub id: ReceiptId,
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
    /// The business object it is about (its timeline: `inboundctl subject show`).
    pub subject: Option<String>,
    /// The provider's own time of the event, when it sends one.
    pub event_at: Option<DateTime<Utc>>,
    /// Whether its route was ordered when it was accepted.
    pub ordered: bool,
    /// The payload as PostgreSQL renders it (`null` once purged, or when it cannot be
    /// rendered). Kept as text, so that any stored row can be shown, even one the worker
    /// cannot decode.
    #[serde(serialize_with = "raw_json")]
    pub payload: Option<String>,
    /// Why the payload could not be rendered (stored before the storability contract).
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
#[derive(Debug, Clone, Serialize)]
pub struct EffectSummary {
    /// `effects.id`.
    pub id: EffectId,
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
    receipt_id: ReceiptId,
) -> Result<Option<ReceiptDetail>, sqlx::Error> {
    let Some(mut detail) = read_receipt_detail(conn, receipt_id).await? else {
        return Ok(None);
    };
    // Planned for this id (never a generic plan, which would name — and lock — every
    // day's payload partition): one partition read.
    let payload = sqlx::query_scalar!(
        r#"SELECT payload::text AS "payload!" FROM receipt_payloads WHERE receipt_id = $1"#,
        receipt_id as ReceiptId,
    )
    .persistent(false)
    .fetch_optional(conn)
    .await;
    match payload {
        Ok(payload) => detail.payload = payload,
        Err(error) if queue::cannot_render_a_row(&error) => {
            detail.payload_unreadable = Some(error.to_string());
        }
        Err(error) => return Err(error),
    }
    Ok(Some(detail))
}

/// [`receipt_detail`] without the payload (the console reads an excerpt instead,
/// [`receipt_payload_excerpt`]).
pub async fn receipt_facts(
    conn: &mut PgConnection,
    receipt_id: ReceiptId,
) -> Result<Option<ReceiptDetail>, sqlx::Error> {
    read_receipt_detail(conn, receipt_id).await
}

/// At most the first `max_chars` characters of a stored payload's text as PostgreSQL
/// renders it (compact; numbers keep their text), whether more follows, and the stored
/// size in bytes. The payload is rendered once and never pretty-printed by the database:
/// indentation multiplies a deep payload's size by its depth (a 1 MiB body 62 levels deep
/// pretty-prints to 133 MB), so the reader indents the excerpt. Whatever the payload's
/// size or depth, the database's work is one rendering of at most the body limit, and
/// what leaves it is bounded.
#[derive(Debug, Clone)]
pub struct PayloadExcerpt {
    /// The start of the stored payload's text.
    pub text: String,
    /// Whether the stored payload's text is longer.
    pub truncated: bool,
    /// The stored payload's size as text, in bytes.
    pub bytes: i64,
}

/// What of a receipt's payload can be shown.
#[derive(Debug, Clone)]
pub enum PayloadShown {
    /// Its start.
    Excerpt(PayloadExcerpt),
    /// Purged by retention (or no such receipt).
    Purged,
    /// Stored before the storability contract, and PostgreSQL cannot render it: why.
    Unreadable(String),
}

/// [`PayloadShown`] of receipt `receipt_id`'s payload.
pub async fn receipt_payload_excerpt(
    conn: &mut PgConnection,
    receipt_id: ReceiptId,
    max_chars: i32,
) -> Result<PayloadShown, sqlx::Error> {
    // The rendering is a LATERAL subquery that is not flattened (OFFSET 0), so it runs
    // once for the excerpt, the cut and the size.
    // Planned for this id (never a generic plan, which would name — and lock — every
    // day's payload partition). One text, `{bytes} {more: 0|1} {excerpt}`: a scalar is
    // what a statement planned per call may return here.
    let read = sqlx::query_scalar!(
        r#"SELECT octet_length(rendered.text) || ' ' || (length(rendered.text) > $2)::int
                  || ' ' || left(rendered.text, $2) AS "read!"
         FROM receipt_payloads p, LATERAL (SELECT p.payload::text AS text OFFSET 0) rendered
         WHERE p.receipt_id = $1"#,
        receipt_id as ReceiptId,
        max_chars,
    )
    .persistent(false)
    .fetch_optional(conn)
    .await;
    match read {
        Ok(Some(read)) => {
            let (bytes, rest) = read.split_once(' ').unwrap_or_default();
            let (more, text) = rest.split_once(' ').unwrap_or_default();
            Ok(PayloadShown::Excerpt(PayloadExcerpt {
                text: text.to_owned(),
                truncated: more == "1",
                bytes: bytes.parse().unwrap_or_default(),
            }))
        }
        Ok(None) => Ok(PayloadShown::Purged),
        Err(error) if queue::cannot_render_a_row(&error) => {
            Ok(PayloadShown::Unreadable(error.to_string()))
        }
        Err(error) => Err(error),
    }
}

async fn read_receipt_detail(
    conn: &mut PgConnection,
    receipt_id: ReceiptId,
) -> Result<Option<ReceiptDetail>, sqlx::Error> {
    sqlx::query_as!(
        ReceiptDetail,
        r#"SELECT r.id AS "id: ReceiptId", r.integration, r.source_scope, r.event_id,
                r.event_type, r.route_key, r.status AS "status: ReceiptStatus",
                r.outcome AS "outcome: ReceiptOutcome", r.outcome_reason, r.attempts,
                COALESCE(q.last_error, r.last_error) AS last_error,
                r.received_at, r.finished_at, q.visible_at AS "visible_at?",
                q.leased_by AS "leased_by?", r.subject, r.event_at, r.ordered,
                NULL::text AS payload,
                NULL::text AS payload_unreadable
         FROM receipts r LEFT JOIN receipt_queue q ON q.receipt_id = r.id
         WHERE r.id = $1"#,
        receipt_id as ReceiptId,
    )
    .fetch_optional(conn)
    .await
}

/// The effects of a receipt, oldest first.
pub async fn receipt_effects(
    conn: &mut PgConnection,
    receipt_id: ReceiptId,
) -> Result<Vec<EffectSummary>, sqlx::Error> {
    // Through effects_by_receipt.
    sqlx::query_as!(
        EffectSummary,
        r#"SELECT id AS "id: EffectId", operation_key, sink, kind,
                status AS "status: EffectStatus", attempts, last_error
         FROM effects WHERE receipt_id = $1 ORDER BY id"#,
        receipt_id as ReceiptId,
    )
    .fetch_all(conn)
    .await
}
