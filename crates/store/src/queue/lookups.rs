//! What a handler may ask about other receipts of its integration inside its
//! transaction: whether one still waiting, or one never applied, names a value (a payment
//! an event depends on, say).

use sqlx::PgConnection;

/// Receipts a handler may ask about, by state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReceiptState {
    /// Pending, waiting or leased: still to be applied. Read through the integration's
    /// queue rows only.
    Unfinished,
    /// Quarantined or failed: never applied. Read through `receipts_status_received`.
    Unapplied,
}

/// Whether a receipt of `integration` in `state` with one of `event_types` carries
/// `value` at `path` of its payload — e.g. a payment still waiting to be applied, for a
/// handler deciding whether an event that depends on it should wait (transient) or is
/// settled for what it is.
pub async fn receipt_names(
    conn: &mut PgConnection,
    state: ReceiptState,
    integration: &str,
    event_types: &[&str],
    path: &[&str],
    value: &str,
) -> Result<bool, sqlx::Error> {
    let found = match state {
        // Through the integration's queue rows only (receipt_queue_integration_age).
        ReceiptState::Unfinished => {
            sqlx::query_scalar!(
                r#"SELECT EXISTS (
                 SELECT 1 FROM receipt_queue q JOIN receipts r ON r.id = q.receipt_id
                 JOIN receipt_payloads p ON p.receipt_id = q.receipt_id
                 WHERE q.integration = $1 AND r.event_type = ANY ($2)
                   AND p.payload #>> $3::text[] = $4) AS "found!""#,
                integration,
                event_types as &[&str],
                path as &[&str],
                value,
            )
            .fetch_one(conn)
            .await?
        }
        // Through receipts_status_received: the unapplied are few.
        ReceiptState::Unapplied => {
            sqlx::query_scalar!(
                r#"SELECT EXISTS (
                 SELECT 1 FROM receipts r JOIN receipt_payloads p ON p.receipt_id = r.id
                 WHERE r.status IN ('quarantined', 'failed') AND r.integration = $1
                   AND r.event_type = ANY ($2) AND p.payload #>> $3::text[] = $4) AS "found!""#,
                integration,
                event_types as &[&str],
                path as &[&str],
                value,
            )
            .fetch_one(conn)
            .await?
        }
    };
    Ok(found)
}
