//! Retention: payloads of done receipts, then their key rows, in bounded batches that
//! lock with SKIP LOCKED (purge runs beside the workers), never a receipt with an effect
//! that is not closed; and the dry run that counts what a purge would remove.

use chrono::{DateTime, Utc};
use inbound_core::states::EffectStatus;
use sqlx::PgConnection;

/// What a purge with these ages would remove now: payloads dropped and receipt rows
/// (keys) deleted, by the same rules as the batches below (a dry run; it reads the done
/// receipts through the finished-at index).
pub async fn purge_preview(
    conn: &mut PgConnection,
    payload_days: u32,
    key_days: Option<u32>,
    now: Option<DateTime<Utc>>,
) -> Result<(i64, i64), sqlx::Error> {
    let counts = sqlx::query!(
        r#"SELECT
             (SELECT count(*) FROM receipts r
              WHERE r.status = 'done' AND r.payload IS NOT NULL
                AND r.finished_at < coalesce($4, now()) - make_interval(days => $1)
                AND NOT EXISTS (SELECT 1 FROM effects e WHERE e.receipt_id = r.id
                                AND e.status <> ALL ($3))) AS "payloads!",
             (SELECT count(*) FROM receipts r
              WHERE $2::int IS NOT NULL AND r.status = 'done'
                AND r.finished_at < coalesce($4, now()) - make_interval(days => $2)
                AND NOT EXISTS (SELECT 1 FROM effects e WHERE e.receipt_id = r.id
                                AND e.status <> ALL ($3))
                AND NOT EXISTS (SELECT 1 FROM receipt_queue q
                                WHERE q.receipt_id = r.id)) AS "keys!""#,
        i32::try_from(payload_days).unwrap_or(i32::MAX),
        key_days.map(|days| i32::try_from(days).unwrap_or(i32::MAX)),
        EffectStatus::CLOSED as &[EffectStatus],
        now,
    )
    .fetch_one(conn)
    .await?;
    Ok((counts.payloads, counts.keys))
}

/// Drops the payloads of up to `batch` done receipts finished more than `days` ago, except
/// those with an effect that is not closed (as [`purge_keys_batch`]); returns how many.
/// Call until it returns less than `batch`.
pub async fn purge_payloads_batch(
    conn: &mut PgConnection,
    days: u32,
    batch: i64,
    now: Option<DateTime<Utc>>,
) -> Result<u64, sqlx::Error> {
    let purged = sqlx::query_file!(
        "queries/admin/purge_payloads.sql",
        i32::try_from(days).unwrap_or(i32::MAX),
        batch,
        EffectStatus::CLOSED as &[EffectStatus],
        now,
    )
    .execute(conn)
    .await?;
    Ok(purged.rows_affected())
}

/// Deletes up to `batch` done receipt rows (their keys) finished more than `days` ago,
/// keeping any with an effect that is not closed — closed means `completed`, or
/// `abandoned` by an operator; a `failed` effect stays (an operator may still retry
/// it), and so does one in review. Both closed states are final (no transition leaves
/// them), so what this statement saw cannot be reopened before the delete; the cascade
/// deletes only closed effects and their history. Returns how many.
pub async fn purge_keys_batch(
    conn: &mut PgConnection,
    days: u32,
    batch: i64,
    now: Option<DateTime<Utc>>,
) -> Result<u64, sqlx::Error> {
    let purged = sqlx::query_file!(
        "queries/admin/purge_keys.sql",
        i32::try_from(days).unwrap_or(i32::MAX),
        batch,
        EffectStatus::CLOSED as &[EffectStatus],
        now,
    )
    .execute(conn)
    .await?;
    Ok(purged.rows_affected())
}
