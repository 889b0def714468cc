//! Effects, by concern. This module: intents, written in the business transaction and
//! keyed by a UNIQUE operation key derived from the business key, so one business
//! operation has at most one intent. [`dispatch`]: the dispatcher's claim and its fenced
//! records; [`counts`](mod@counts): the gauges; [`operate`]: what operators read and
//! decide.
//! Everything is re-exported here, so callers name `store::effects::…`.

pub mod counts;
pub mod dispatch;
pub mod operate;

pub use counts::*;
pub use dispatch::*;
pub use operate::*;

use sqlx::PgConnection;

use inbound_core::effects::EffectIntent;
use inbound_core::keys::{EffectId, ReceiptId};

/// The source event an effect carries (`event` in the sink request).
#[derive(Debug, Clone, Copy)]
pub struct SourceEvent<'a> {
    /// The integration id.
    pub integration: &'a str,
    /// The provider's event id.
    pub id: &'a str,
    /// The event type.
    pub event_type: &'a str,
    /// The delivery's provider facts (`receipts.delivery`), when the provider sent any.
    pub delivery: Option<&'a serde_json::Value>,
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
    pub effect_id: EffectId,
    /// That effect's receipt.
    pub receipt_id: ReceiptId,
}

/// The first key of the advisory locks that serialise intents with one operation key
/// (`pg_advisory_xact_lock(OPERATION_KEY_LOCKS, hashtext(key))`): "ib" and 1, apart from
/// any lock a team's own code may take with one key.
const OPERATION_KEY_LOCKS: i32 = 0x6962_0001;

/// Records `intent` for `receipt_id`. `Ok(Err(collision))` when an intent with the same
/// operation key already exists: nothing is written, and the caller must not treat the
/// transition as complete (its intent would silently never be sent).
pub async fn insert_intent(
    conn: &mut PgConnection,
    receipt_id: ReceiptId,
    tenant: &str,
    event: SourceEvent<'_>,
    intent: &EffectIntent,
) -> Result<Result<EffectId, KeyCollision>, sqlx::Error> {
    let mut event_json = serde_json::json!({
        "integration": event.integration,
        "id": event.id,
        "type": event.event_type,
    });
    if let Some(delivery) = event.delivery {
        event_json["delivery"] = delivery.clone();
    }
    // The operation key is unique across the effects' partitions (a few key periods): a
    // transaction-scoped lock on the key makes a concurrent twin wait for this
    // transaction, and the look in every partition's operation-key index comes after it,
    // in a statement of its own, so it sees what a twin committed.
    sqlx::query!(
        "SELECT pg_advisory_xact_lock($1, hashtext($2))",
        OPERATION_KEY_LOCKS,
        &intent.operation_key,
    )
    .execute(&mut *conn)
    .await?;
    let inserted = sqlx::query_scalar!(
        r#"INSERT INTO effects (id, receipt_id, operation_key, sink, kind, tenant, data, event)
         SELECT effect_id_for($1), $1, $2, $3, $4, $5, $6, $7
         WHERE NOT EXISTS (SELECT 1 FROM effects WHERE operation_key = $2)
         RETURNING id AS "id: EffectId""#,
        receipt_id as ReceiptId,
        &intent.operation_key,
        &intent.sink,
        &intent.kind,
        tenant,
        &intent.data,
        event_json,
    )
    .fetch_optional(&mut *conn)
    .await?;
    if let Some(id) = inserted {
        return Ok(Ok(id));
    }
    let holder = sqlx::query!(
        r#"SELECT id AS "effect_id: EffectId", receipt_id AS "receipt_id: ReceiptId"
         FROM effects WHERE operation_key = $1 LIMIT 1"#,
        &intent.operation_key,
    )
    .fetch_one(conn)
    .await?;
    let (effect_id, holder) = (holder.effect_id, holder.receipt_id);
    Ok(Err(KeyCollision {
        operation_key: intent.operation_key.clone(),
        effect_id,
        receipt_id: holder,
    }))
}
