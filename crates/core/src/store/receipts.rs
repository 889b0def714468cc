//! Acceptance: the single statement that makes a receipt durable — one receipt, or a
//! batch of them gathered by the ingress (group commit).

use std::collections::{HashMap, HashSet};

use sqlx::PgConnection;

use crate::keys::{EventId, ReceiptId, SourceScope};

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
    /// The payload as JSON text (an object `jsonb` accepts).
    pub payload_json: &'a str,
}

/// What [`insert_receipt`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InsertOutcome {
    /// A new pending receipt was committed, with its queue row.
    Accepted(ReceiptId),
    /// The receipt key was already present, in any state; nothing was written.
    Duplicate,
}

/// Accepts a receipt: one autocommitted statement inserts the receipt and its queue row,
/// or nothing when the receipt key is already present. When this returns `Ok`, the
/// outcome is durable; on `Err` nothing may be acknowledged.
pub async fn insert_receipt(
    conn: &mut PgConnection,
    receipt: NewReceipt<'_>,
) -> Result<InsertOutcome, sqlx::Error> {
    let inserted: Option<(i64,)> = sqlx::query_as(
        "WITH inserted AS (
             INSERT INTO receipts (integration, source_scope, event_id, event_type, route_key, payload)
             VALUES ($1, $2, $3, $4, $5, $6::jsonb)
             ON CONFLICT (source_scope, event_id) DO NOTHING
             RETURNING id, integration, received_at
         ), queued AS (
             INSERT INTO receipt_queue (receipt_id, integration, visible_at, enqueued_at)
             SELECT id, integration, received_at, received_at FROM inserted
         )
         SELECT id FROM inserted",
    )
    .bind(receipt.integration)
    .bind(receipt.source_scope.as_str())
    .bind(receipt.event_id.as_str())
    .bind(receipt.event_type)
    .bind(receipt.route_key)
    .bind(receipt.payload_json)
    .fetch_optional(&mut *conn)
    .await?;
    Ok(match inserted {
        Some((id,)) => InsertOutcome::Accepted(ReceiptId(id)),
        None => InsertOutcome::Duplicate,
    })
}

/// Accepts several receipts in one autocommitted statement (group commit): each new
/// receipt key gets a receipt and its queue row, a key already present gets nothing.
/// The answer is in input order. A key repeated within `receipts` is inserted once: its
/// first occurrence is `Accepted`, the later ones `Duplicate`. When this returns `Ok`,
/// every outcome is durable; on `Err` nothing may be acknowledged for any of them.
pub async fn insert_receipts<'a>(
    conn: &mut PgConnection,
    receipts: &[NewReceipt<'a>],
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
    let inserted: Vec<(i64, i64)> = sqlx::query_as(
        "WITH input AS (
             SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[])
                 WITH ORDINALITY AS input (integration, source_scope, event_id, event_type, route_key, payload, position)
         ), inserted AS (
             INSERT INTO receipts (integration, source_scope, event_id, event_type, route_key, payload)
             SELECT integration, source_scope, event_id, event_type, route_key, payload::jsonb
             FROM input ORDER BY position
             ON CONFLICT (source_scope, event_id) DO NOTHING
             RETURNING id, integration, source_scope, event_id, received_at
         ), queued AS (
             INSERT INTO receipt_queue (receipt_id, integration, visible_at, enqueued_at)
             SELECT id, integration, received_at, received_at FROM inserted
         )
         SELECT input.position, inserted.id
         FROM inserted JOIN input USING (source_scope, event_id)",
    )
    .bind(column(|receipt| receipt.integration))
    .bind(column(|receipt| receipt.source_scope.as_str()))
    .bind(column(|receipt| receipt.event_id.as_str()))
    .bind(column(|receipt| receipt.event_type))
    .bind(column(|receipt| receipt.route_key))
    .bind(column(|receipt| receipt.payload_json))
    .fetch_all(&mut *conn)
    .await?;
    // `position` is 1-based over `unique`.
    let mut accepted: HashMap<usize, i64> = inserted
        .into_iter()
        .filter_map(|(position, id)| {
            let position = usize::try_from(position).ok()?.checked_sub(1)?;
            Some((unique[position], id))
        })
        .collect();
    Ok((0..receipts.len())
        .map(|index| match accepted.remove(&index) {
            Some(id) => InsertOutcome::Accepted(ReceiptId(id)),
            None => InsertOutcome::Duplicate,
        })
        .collect())
}
