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
    // The candidates first, then their payloads by id: a join would name every day's
    // payload partition, and a generic plan locks each one it names (PostgreSQL 15).
    let candidates: Vec<i64> = match state {
        // Through the integration's queue rows only (receipt_queue_integration_age).
        ReceiptState::Unfinished => {
            sqlx::query_scalar!(
                r#"SELECT q.receipt_id AS "id!" FROM receipt_queue q
                 JOIN receipts r ON r.id = q.receipt_id
                 WHERE q.integration = $1 AND r.event_type = ANY ($2)"#,
                integration,
                event_types as &[&str],
            )
            .fetch_all(&mut *conn)
            .await?
        }
        // Through receipts_status_received: the unapplied are few.
        ReceiptState::Unapplied => {
            sqlx::query_scalar!(
                r#"SELECT r.id AS "id!" FROM receipts r
                 WHERE r.status IN ('quarantined', 'failed') AND r.integration = $1
                   AND r.event_type = ANY ($2)"#,
                integration,
                event_types as &[&str],
            )
            .fetch_all(&mut *conn)
            .await?
        }
    };
    if candidates.is_empty() {
        return Ok(false);
    }
    let found = sqlx::query_scalar!(
        r#"SELECT EXISTS (
             SELECT 1 FROM receipt_payloads p
             WHERE p.receipt_id = ANY ($1) AND p.payload #>> $2::text[] = $3) AS "found!""#,
        &candidates,
        path as &[&str],
        value,
    )
    // Planned for these ids (never a generic plan): only their days' partitions.
    .persistent(false)
    .fetch_one(conn)
    .await?;
    Ok(found)
}
