//! Effect intents: written in the business transaction, keyed by a UNIQUE operation key
//! derived from the business key, so one business operation has at most one intent.

use sqlx::PgConnection;

use crate::handlers::EffectIntent;

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

/// Records `intent` for `receipt_id`; `false` when an intent with the same operation key
/// already exists (nothing is written then).
pub async fn insert_intent(
    conn: &mut PgConnection,
    receipt_id: i64,
    tenant: &str,
    event: SourceEvent<'_>,
    intent: &EffectIntent,
) -> Result<bool, sqlx::Error> {
    let event_json = serde_json::json!({
        "integration": event.integration,
        "id": event.id,
        "type": event.event_type,
    });
    let inserted = sqlx::query(
        "INSERT INTO effects (receipt_id, operation_key, sink, kind, tenant, data, event)
         VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT (operation_key) DO NOTHING",
    )
    .bind(receipt_id)
    .bind(&intent.operation_key)
    .bind(&intent.sink)
    .bind(&intent.kind)
    .bind(tenant)
    .bind(&intent.data)
    .bind(event_json)
    .execute(conn)
    .await?;
    Ok(inserted.rows_affected() == 1)
}
