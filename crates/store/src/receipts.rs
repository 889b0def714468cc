//! Acceptance: the single statement that makes a receipt durable — one receipt, or a
//! batch of them gathered by the ingress (group commit).

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use sqlx::PgConnection;

use inbound_core::keys::{EventId, ReceiptId, SourceScope};

/// A verified, validated event about to be accepted.
#[derive(Debug, Clone, Copy)]
pub struct NewReceipt<'a> {
    /// The integration id.
    pub integration: &'a str,
    /// First half of the receipt key.
    pub source_scope: &'a SourceScope,
    /// Second half of the receipt key.
    pub event_id: &'a EventId,
    /// The event type as stored.
    pub event_type: &'a str,
    /// The route key that matched.
    pub route_key: &'a str,
    /// The payload as JSON text, meeting the storability contract ([`inbound_core::payload`]).
    pub payload_json: &'a str,
    /// The delivery's provider facts as a JSON object's text ([`inbound_core::event::Event`]).
    pub delivery_json: Option<&'a str>,
    /// The SHA-256 of the raw body, for integrations that deduplicate by content: a
    /// second receipt with the same digest in the same integration is a duplicate.
    pub content_digest: Option<&'a [u8]>,
    /// What the event is about and when the provider says it happened
    /// ([`inbound_core::event::subject`]), and whether its route is ordered.
    pub order: ReceiptOrder<'a>,
}

/// A receipt's subject, its provider's event time, and whether its route is ordered: an
/// ordered receipt with a subject runs after the earlier ones of its subject and never
/// beside one (docs/contract.md, "Ordered routes"). `Default`: about nothing, unordered.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReceiptOrder<'a> {
    /// The business object the event is about.
    pub subject: Option<&'a str>,
    /// The provider's own time of the event.
    pub event_at: Option<DateTime<Utc>>,
    /// Whether the route is `ordered = true` (without a subject, nothing is ordered).
    pub ordered: bool,
}

/// What [`insert_receipt`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InsertOutcome {
    /// A new pending receipt was committed, with its queue row.
    Accepted(ReceiptId),
    /// The receipt key (or the content key) was already present, in any state; nothing
    /// was written.
    Duplicate,
}

/// Accepts a receipt: one autocommitted statement inserts the receipt and its queue row,
/// or nothing when the receipt key (or its content key) is already present. When this
/// returns `Ok`, the outcome is durable; on `Err` nothing may be acknowledged.
pub async fn insert_receipt(
    conn: &mut PgConnection,
    receipt: NewReceipt<'_>,
) -> Result<InsertOutcome, sqlx::Error> {
    insert_receipts(conn, &[receipt])
        .await?
        .pop()
        .ok_or_else(|| sqlx::Error::Protocol("the insert answered for no receipt".to_owned()))
}

/// Accepts several receipts in one autocommitted statement (group commit): each new
/// receipt key gets a receipt and its queue row (which records the payload's size), a key
/// already present gets nothing. Rows are written in receipt-key order, so concurrent
/// batches never deadlock on their receipt keys.
/// The answer is in input order. A key repeated within `receipts` is inserted once: its
/// first occurrence is `Accepted`, the later ones `Duplicate`. When this returns `Ok`,
/// every outcome is durable; on `Err` nothing may be acknowledged for any of them.
pub async fn insert_receipts<'a>(
    conn: &mut PgConnection,
    receipts: &[NewReceipt<'a>],
) -> Result<Vec<InsertOutcome>, sqlx::Error> {
    insert_receipts_at(conn, receipts, None).await
}

/// [`insert_receipts`] with the clock that decides the receipt keys' period: `None` is the
/// database's `now()` (what the ingress passes); a test passes a time beside a period's
/// boundary. The receipts' ids and `received_at` are always the database's now.
pub async fn insert_receipts_at<'a>(
    conn: &mut PgConnection,
    receipts: &[NewReceipt<'a>],
    at: Option<DateTime<Utc>>,
) -> Result<Vec<InsertOutcome>, sqlx::Error> {
    let batch = UniqueBatch::of(receipts);
    let inserted = sqlx::query_file!(
        "queries/receipts/insert.sql",
        batch.column(|receipt| receipt.integration) as Vec<&str>,
        batch.column(|receipt| receipt.source_scope.as_str()) as Vec<&str>,
        batch.column(|receipt| receipt.event_id.as_str()) as Vec<&str>,
        batch.column(|receipt| receipt.event_type) as Vec<&str>,
        batch.column(|receipt| receipt.route_key) as Vec<&str>,
        batch.column(|receipt| receipt.payload_json) as Vec<&str>,
        batch.digests() as Vec<Option<&[u8]>>,
        batch.deliveries() as Vec<Option<&str>>,
        at,
        batch.subjects() as Vec<Option<&str>>,
        batch.event_times() as Vec<Option<DateTime<Utc>>>,
        &batch.ordered(),
    )
    .fetch_all(&mut *conn)
    .await?;
    Ok(batch.outcomes(inserted.into_iter().map(|row| (row.position, row.id))))
}

/// Stores events fetched over a provider's API with the account's key (`inboundctl
/// stripe backfill`) as [`insert_receipts`] stores deliveries, through the database's
/// `backfill_receipts` (migrations/0001_inbound.sql): marked `api`, their ids in input
/// order — the order the worker claims them in. The operator role inserts no receipt
/// itself, so it can never make one look like a verified delivery. Keys are claimed in
/// key order, as the ingress claims them.
pub async fn backfill_receipts<'a>(
    conn: &mut PgConnection,
    receipts: &[NewReceipt<'a>],
) -> Result<Vec<InsertOutcome>, sqlx::Error> {
    let batch = UniqueBatch::of(receipts);
    let inserted = sqlx::query!(
        r#"SELECT out_position AS "position!", out_id AS "id!"
         FROM backfill_receipts($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"#,
        batch.column(|receipt| receipt.integration) as Vec<&str>,
        batch.column(|receipt| receipt.source_scope.as_str()) as Vec<&str>,
        batch.column(|receipt| receipt.event_id.as_str()) as Vec<&str>,
        batch.column(|receipt| receipt.event_type) as Vec<&str>,
        batch.column(|receipt| receipt.route_key) as Vec<&str>,
        batch.column(|receipt| receipt.payload_json) as Vec<&str>,
        batch.deliveries() as Vec<Option<&str>>,
        batch.subjects() as Vec<Option<&str>>,
        batch.event_times() as Vec<Option<DateTime<Utc>>>,
        &batch.ordered(),
    )
    .fetch_all(&mut *conn)
    .await?;
    Ok(batch.outcomes(inserted.into_iter().map(|row| (row.position, row.id))))
}

/// A batch's first occurrence of each receipt key, in order: the later ones are
/// duplicates without asking the database.
struct UniqueBatch<'r, 'a> {
    receipts: &'r [NewReceipt<'a>],
    unique: Vec<usize>,
}

impl<'r, 'a> UniqueBatch<'r, 'a> {
    fn of(receipts: &'r [NewReceipt<'a>]) -> Self {
        let mut seen = HashSet::with_capacity(receipts.len());
        let unique = (0..receipts.len())
            .filter(|&index| {
                let receipt = &receipts[index];
                seen.insert((receipt.source_scope.as_str(), receipt.event_id.as_str()))
            })
            .collect();
        Self { receipts, unique }
    }

    /// One field of each unique receipt, in order.
    fn column(&self, field: fn(&NewReceipt<'a>) -> &'a str) -> Vec<&'a str> {
        self.unique
            .iter()
            .map(|&index| field(&self.receipts[index]))
            .collect()
    }

    fn digests(&self) -> Vec<Option<&'a [u8]>> {
        self.unique
            .iter()
            .map(|&index| self.receipts[index].content_digest)
            .collect()
    }

    fn deliveries(&self) -> Vec<Option<&'a str>> {
        self.unique
            .iter()
            .map(|&index| self.receipts[index].delivery_json)
            .collect()
    }

    fn subjects(&self) -> Vec<Option<&'a str>> {
        self.unique
            .iter()
            .map(|&index| self.receipts[index].order.subject)
            .collect()
    }

    fn event_times(&self) -> Vec<Option<DateTime<Utc>>> {
        self.unique
            .iter()
            .map(|&index| self.receipts[index].order.event_at)
            .collect()
    }

    fn ordered(&self) -> Vec<bool> {
        self.unique
            .iter()
            .map(|&index| self.receipts[index].order.ordered)
            .collect()
    }

    /// Each receipt's outcome, from the `(position, id)` of those the statement inserted
    /// (`position` 1-based over the unique ones).
    fn outcomes(&self, inserted: impl Iterator<Item = (i64, i64)>) -> Vec<InsertOutcome> {
        let mut accepted: HashMap<usize, i64> = inserted
            .filter_map(|(position, id)| {
                let position = usize::try_from(position).ok()?.checked_sub(1)?;
                Some((*self.unique.get(position)?, id))
            })
            .collect();
        (0..self.receipts.len())
            .map(|index| match accepted.remove(&index) {
                Some(id) => InsertOutcome::Accepted(ReceiptId(id)),
                None => InsertOutcome::Duplicate,
            })
            .collect()
    }
}

/// Which of the receipt keys `(source_scope, event_id)` are held now — in this key period
/// or the previous one, as the ingress decides — through receipt_keys' primary key: what
/// a backfill's dry run would skip.
pub async fn held_keys(
    conn: &mut PgConnection,
    keys: &[(SourceScope, EventId)],
) -> Result<HashSet<(String, String)>, sqlx::Error> {
    let scopes: Vec<&str> = keys.iter().map(|(scope, _)| scope.as_str()).collect();
    let event_ids: Vec<&str> = keys.iter().map(|(_, id)| id.as_str()).collect();
    let rows = sqlx::query!(
        "SELECT r.source_scope, r.event_id
         FROM unnest($1::text[], $2::text[]) AS k(source_scope, event_id)
         JOIN receipt_keys r ON r.source_scope = k.source_scope AND r.event_id = k.event_id
         WHERE r.period IN (key_period(now()), key_period(now()) - 90)",
        scopes as Vec<&str>,
        event_ids as Vec<&str>,
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| (row.source_scope, row.event_id))
        .collect())
}

/// Which of `event_ids` the integration holds a receipt for, in any of its scopes: one
/// lookup of the event-id index per id, however many scopes senders have made.
pub async fn held_event_ids(
    conn: &mut PgConnection,
    integration: &str,
    event_ids: &[&str],
) -> Result<HashSet<String>, sqlx::Error> {
    if event_ids.is_empty() {
        return Ok(HashSet::new());
    }
    // Through receipts_by_event_id.
    let rows = sqlx::query_scalar!(
        r#"SELECT DISTINCT event_id AS "event_id!" FROM receipts
         WHERE event_id = ANY ($2) AND integration = $1"#,
        integration,
        event_ids as &[&str],
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().collect())
}
