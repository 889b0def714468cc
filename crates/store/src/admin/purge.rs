//! Retention: payloads of done receipts, then their key rows, in bounded batches that
//! lock with SKIP LOCKED (purge runs beside the workers), never a receipt with an effect
//! that is not closed; and the dry run that counts what a purge would remove. The rule
//! lives in the database (`purge_receipt_payloads`, `purge_receipt_keys`): a role may call
//! it, and no role may delete a receipt or write a payload any other way.

use inbound_core::states::EffectStatus;
use sqlx::PgConnection;

/// What a purge with these ages would remove now: payloads dropped and receipt rows
/// (keys) deleted, by the same rules as the batches below (a dry run; it reads the done
/// receipts through the finished-at index).
pub async fn purge_preview(
    conn: &mut PgConnection,
    payload_days: u32,
    key_days: Option<u32>,
) -> Result<(i64, i64), sqlx::Error> {
    let counts = sqlx::query!(
        r#"SELECT
             (SELECT count(*) FROM receipts r
              WHERE r.status = 'done' AND r.payload IS NOT NULL
                AND r.finished_at < now() - make_interval(days => $1)
                AND r.received_at < now() - make_interval(days => $1)
                AND NOT EXISTS (SELECT 1 FROM effects e WHERE e.receipt_id = r.id
                                AND e.status <> ALL ($3))) AS "payloads!",
             (SELECT count(*) FROM receipts r
              WHERE $2::int IS NOT NULL AND r.status = 'done'
                AND r.finished_at < now() - make_interval(days => $2)
                AND r.received_at < now() - make_interval(days => $2)
                AND NOT EXISTS (SELECT 1 FROM effects e WHERE e.receipt_id = r.id
                                AND e.status <> ALL ($3))
                AND NOT EXISTS (SELECT 1 FROM receipt_queue q
                                WHERE q.receipt_id = r.id)) AS "keys!""#,
        i32::try_from(payload_days).unwrap_or(i32::MAX),
        key_days.map(|days| i32::try_from(days).unwrap_or(i32::MAX)),
        EffectStatus::CLOSED as &[EffectStatus],
    )
    .fetch_one(conn)
    .await?;
    Ok((counts.payloads, counts.keys))
}

/// Drops the payloads of up to `batch` done receipts accepted and finished more than
/// `days` ago, except those with an effect that is not closed (as [`purge_keys_batch`]);
/// returns how many. Call until it returns less than `batch`. The rule is the database's
/// (`purge_receipt_payloads`, migrations/0001_inbound.sql), run with its clock.
pub async fn purge_payloads_batch(
    conn: &mut PgConnection,
    days: u32,
    batch: i64,
) -> Result<u64, sqlx::Error> {
    let purged = sqlx::query_scalar!(
        r#"SELECT purge_receipt_payloads($1, $2) AS "purged!""#,
        i32::try_from(days).unwrap_or(i32::MAX),
        i32::try_from(batch).unwrap_or(i32::MAX),
    )
    .fetch_one(conn)
    .await?;
    Ok(u64::try_from(purged).unwrap_or_default())
}

/// Deletes up to `batch` done receipt rows (their keys) accepted and finished more than
/// `days` ago, keeping any with an effect that is not closed — closed means `completed`,
/// or `abandoned` by an operator; a `failed` effect stays (an operator may still retry
/// it), and so does one in review. Both closed states are final (no transition leaves
/// them), so what the statement saw cannot be reopened before the delete; the cascade
/// deletes only closed effects and their attempts, and the audit trail stays. Returns how
/// many. The rule is the database's (`purge_receipt_keys`): no role may delete a receipt
/// any other way.
pub async fn purge_keys_batch(
    conn: &mut PgConnection,
    days: u32,
    batch: i64,
) -> Result<u64, sqlx::Error> {
    let purged = sqlx::query_scalar!(
        r#"SELECT purge_receipt_keys($1, $2) AS "purged!""#,
        i32::try_from(days).unwrap_or(i32::MAX),
        i32::try_from(batch).unwrap_or(i32::MAX),
    )
    .fetch_one(conn)
    .await?;
    Ok(u64::try_from(purged).unwrap_or_default())
}
