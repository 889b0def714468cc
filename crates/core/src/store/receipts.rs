//! Acceptance: the single statement that makes a receipt durable.

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
