//! Acceptance: the single statement that makes a receipt durable — one receipt, or a
//! batch of them gathered by the ingress (group commit).

use std::collections::{HashMap, HashSet};

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
    insert_receipts_ordered(conn, receipts, false).await
}

/// [`insert_receipts`], the receipt ids given in input order — the order the worker
/// claims them in — for a writer that stores events in the order they happened
/// (`inboundctl stripe backfill`). Beside concurrent writers this order can deadlock on
/// a receipt key: PostgreSQL then aborts one statement, which the caller may rerun.
pub async fn insert_receipts_in_given_order<'a>(
    conn: &mut PgConnection,
    receipts: &[NewReceipt<'a>],
) -> Result<Vec<InsertOutcome>, sqlx::Error> {
    insert_receipts_ordered(conn, receipts, true).await
}

async fn insert_receipts_ordered<'a>(
    conn: &mut PgConnection,
    receipts: &[NewReceipt<'a>],
    in_given_order: bool,
) -> Result<Vec<InsertOutcome>, sqlx::Error> {
    // Only the first occurrence of each key is sent; the later ones are duplicates.
    let mut seen = HashSet::with_capacity(receipts.len());
    let unique: Vec<usize> = (0..receipts.len())
        .filter(|&index| {
            let receipt = &receipts[index];
            seen.insert((receipt.source_scope.as_str(), receipt.event_id.as_str()))
        })
        .collect();
    let column = |field: fn(&NewReceipt<'a>) -> &'a str| -> Vec<&'a str> {
        unique
            .iter()
            .map(|&index| field(&receipts[index]))
            .collect()
    };
    let digests: Vec<Option<&[u8]>> = unique
        .iter()
        .map(|&index| receipts[index].content_digest)
        .collect();
    let deliveries: Vec<Option<&str>> = unique
        .iter()
        .map(|&index| receipts[index].delivery_json)
        .collect();
    let inserted = sqlx::query_file!(
        "queries/receipts/insert.sql",
        column(|receipt| receipt.integration) as Vec<&str>,
        column(|receipt| receipt.source_scope.as_str()) as Vec<&str>,
        column(|receipt| receipt.event_id.as_str()) as Vec<&str>,
        column(|receipt| receipt.event_type) as Vec<&str>,
        column(|receipt| receipt.route_key) as Vec<&str>,
        column(|receipt| receipt.payload_json) as Vec<&str>,
        digests as Vec<Option<&[u8]>>,
        deliveries as Vec<Option<&str>>,
        in_given_order,
    )
    .fetch_all(&mut *conn)
    .await?;
    // `position` is 1-based over `unique`.
    let mut accepted: HashMap<usize, i64> = inserted
        .into_iter()
        .filter_map(|row| {
            let position = usize::try_from(row.position).ok()?.checked_sub(1)?;
            Some((unique[position], row.id))
        })
        .collect();
    Ok((0..receipts.len())
        .map(|index| match accepted.remove(&index) {
            Some(id) => InsertOutcome::Accepted(ReceiptId(id)),
            None => InsertOutcome::Duplicate,
        })
        .collect())
}

/// Marks `receipt_ids` as fetched over the provider's API rather than delivered signed
/// (`receipts.provenance = 'api'`), in the transaction that inserted them, so that no
/// worker sees them before they say where they came from.
pub async fn mark_fetched(
    conn: &mut PgConnection,
    receipt_ids: &[ReceiptId],
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE receipts SET provenance = 'api' WHERE id = ANY ($1)",
        receipt_ids as &[ReceiptId],
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Which of the receipt keys `(source_scope, event_id)` are held (in any state), through
/// the receipt-key index: what a backfill's dry run would skip.
pub async fn held_keys(
    conn: &mut PgConnection,
    keys: &[(SourceScope, EventId)],
) -> Result<HashSet<(String, String)>, sqlx::Error> {
    let scopes: Vec<&str> = keys.iter().map(|(scope, _)| scope.as_str()).collect();
    let event_ids: Vec<&str> = keys.iter().map(|(_, id)| id.as_str()).collect();
    let rows = sqlx::query!(
        "SELECT r.source_scope, r.event_id
         FROM unnest($1::text[], $2::text[]) AS k(source_scope, event_id)
         JOIN receipts r ON r.source_scope = k.source_scope AND r.event_id = k.event_id",
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
/// descent of the receipt-key index per scope of the integration (a loose index scan of
/// `{integration}/…`, a contiguous range since the key compares bytes), then one per id;
/// other integrations' scopes, however many, are never visited.
pub async fn held_event_ids(
    conn: &mut PgConnection,
    integration: &str,
    event_ids: &[&str],
) -> Result<HashSet<String>, sqlx::Error> {
    if event_ids.is_empty() {
        return Ok(HashSet::new());
    }
    // A scope is the integration's id alone, or the id, `/` and more: `/` sorts just
    // before `0`, so "{id}/" ≤ scope < "{id}0" holds exactly the longer ones.
    let alone = SourceScope::from_parts([integration]);
    let first = format!("{}/", alone.as_str());
    let past = format!("{}0", alone.as_str());
    let rows = sqlx::query_scalar!(
        r#"WITH RECURSIVE scopes (scope) AS (
             (SELECT source_scope FROM receipts
              WHERE source_scope >= $3 AND source_scope < $4
              ORDER BY source_scope LIMIT 1)
             UNION ALL
             SELECT (SELECT r.source_scope FROM receipts r
                     WHERE r.source_scope > s.scope AND r.source_scope < $4
                     ORDER BY r.source_scope LIMIT 1)
             FROM scopes s WHERE s.scope IS NOT NULL
         )
         SELECT r.event_id AS "event_id!"
         FROM scopes s JOIN receipts r ON r.source_scope = s.scope AND r.event_id = ANY ($2)
         WHERE r.integration = $1
         UNION
         SELECT event_id FROM receipts
         WHERE source_scope = $5 AND event_id = ANY ($2) AND integration = $1"#,
        integration,
        event_ids as &[&str],
        first,
        past,
        alone.as_str(),
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().collect())
}
