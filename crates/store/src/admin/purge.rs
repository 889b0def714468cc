//! Retention by partition: payloads leave by day, receipt rows with their effects,
//! attempts and keys by key period, each a `DROP` of whole partitions (never a bulk
//! `DELETE` or `UPDATE`), carrying what may not go yet (a receipt not done, an effect not
//! closed) into the default partition first; and the dry run that lists what would go.
//! The rule lives in the database (`drop_payload_days`, `drop_key_periods`,
//! migrations/0001_inbound.sql): a role may call it, and no role may delete a receipt or
//! its payload any other way.

use chrono::{DateTime, NaiveDate, Utc};
use sqlx::PgConnection;

/// One dated partition of inbound's history (`history_partitions()`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryPartition {
    /// The partitioned table: `receipts`, `receipt_payloads`, `receipt_keys`, `effects`
    /// or `effect_attempts`.
    pub parent: String,
    /// The partition's name, `{parent}_{yyyymmdd}` of its first day.
    pub partition: String,
    /// The first day of its range.
    pub first_day: NaiveDate,
    /// The day after its last (a day for payloads, a 90-day key period for the rest).
    pub end_day: NaiveDate,
    /// The planner's estimate of its rows (0 before it was first analysed): not a count.
    pub estimated_rows: i64,
}

/// Every dated partition, by table then day.
pub async fn history_partitions(
    conn: &mut PgConnection,
) -> Result<Vec<HistoryPartition>, sqlx::Error> {
    sqlx::query_as!(
        HistoryPartition,
        r#"SELECT parent AS "parent!", partition AS "partition!", first_day AS "first_day!",
                end_day AS "end_day!", estimated_rows AS "estimated_rows!"
         FROM history_partitions()"#
    )
    .fetch_all(conn)
    .await
}

/// What retention with these ages would drop now: the payload days and the key periods
/// (their receipts partitions), with the planner's row estimates — a dry run that reads
/// the catalogue only, by the same rule as [`drop_payload_days`] and
/// [`drop_key_periods`].
pub async fn retention_preview(
    conn: &mut PgConnection,
    payload_days: u32,
    key_days: Option<u32>,
) -> Result<Vec<HistoryPartition>, sqlx::Error> {
    sqlx::query_as!(
        HistoryPartition,
        r#"SELECT parent AS "parent!", partition AS "partition!", first_day AS "first_day!",
                end_day AS "end_day!", estimated_rows AS "estimated_rows!"
         FROM history_partitions() h
         WHERE (h.parent = 'receipt_payloads'
                AND h.end_day <= date '1970-01-01' + history_day(now()) - least(greatest($1, 1), 36500))
            OR (h.parent = 'receipts' AND $2::int IS NOT NULL
                AND h.end_day <= date '1970-01-01' + history_day(now()) - least(greatest($2, 1), 36500)
                AND h.first_day < key_period(now()) - 90)"#,
        i32::try_from(payload_days).unwrap_or(i32::MAX),
        key_days.map(|days| i32::try_from(days).unwrap_or(i32::MAX)),
    )
    .fetch_all(conn)
    .await
}

/// One partition retention dropped: its first day, and how many rows it carried into the
/// default partition because they may not go yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dropped {
    /// The first day of the dropped range (a day, or a key period's first day).
    pub first_day: NaiveDate,
    /// Payloads (of a day) or receipts (of a period) kept in the default partition.
    pub carried: i64,
}

/// Drops the payloads of every day wholly older than `days` days, oldest first, one
/// [`drop_oldest_payload_day`] after another (each its own transaction on a connection
/// outside one).
pub async fn drop_payload_days(
    conn: &mut PgConnection,
    days: u32,
    at: Option<DateTime<Utc>>,
) -> Result<Vec<Dropped>, sqlx::Error> {
    drop_all(conn, Partitions::PayloadDays, days, at).await
}

/// Releases what the default partitions hold that may go, then drops the payloads of the
/// oldest day wholly older than `days` days, except those of receipts not done, queued or
/// with an effect not closed (carried into the default partition): that day, or `None`
/// when no day is that old. More than 10,000 payloads to carry refuse the drop (an error
/// naming the day). `at` is the clock: `None` is the server's, the only one the operator
/// role may use (`Some` is the table owner's, for tests).
pub async fn drop_oldest_payload_day(
    conn: &mut PgConnection,
    days: u32,
    at: Option<DateTime<Utc>>,
) -> Result<Option<Dropped>, sqlx::Error> {
    drop_oldest(conn, Partitions::PayloadDays, days, at).await
}

/// Drops every key period wholly older than `days` days except the current and the
/// previous one, oldest first, one [`drop_oldest_key_period`] after another.
pub async fn drop_key_periods(
    conn: &mut PgConnection,
    days: u32,
    at: Option<DateTime<Utc>>,
) -> Result<Vec<Dropped>, sqlx::Error> {
    drop_all(conn, Partitions::KeyPeriods, days, at).await
}

/// Releases what the default partitions hold that may go, then drops the oldest key
/// period wholly older than `days` days (never the current or the previous one) — its
/// receipts, their effects and attempts, and its receipt keys — except the receipts not
/// done, queued or with an effect not closed (carried, with all their effects, into the
/// default partitions): that period, or `None`. More than 10,000 receipts to carry
/// refuse the drop. `at` as in [`drop_oldest_payload_day`].
pub async fn drop_oldest_key_period(
    conn: &mut PgConnection,
    days: u32,
    at: Option<DateTime<Utc>>,
) -> Result<Option<Dropped>, sqlx::Error> {
    drop_oldest(conn, Partitions::KeyPeriods, days, at).await
}

/// What retention drops: payload days, or key periods.
#[derive(Debug, Clone, Copy)]
enum Partitions {
    PayloadDays,
    KeyPeriods,
}

/// [`drop_oldest`] until it drops nothing.
async fn drop_all(
    conn: &mut PgConnection,
    what: Partitions,
    days: u32,
    at: Option<DateTime<Utc>>,
) -> Result<Vec<Dropped>, sqlx::Error> {
    let mut dropped = Vec::new();
    while let Some(one) = drop_oldest(&mut *conn, what, days, at).await? {
        dropped.push(one);
    }
    Ok(dropped)
}

/// One call of the database's retention function for `what` (its `_at` form with a
/// clock), then the detached tables' files removed.
async fn drop_oldest(
    conn: &mut PgConnection,
    what: Partitions,
    days: u32,
    at: Option<DateTime<Utc>>,
) -> Result<Option<Dropped>, sqlx::Error> {
    let days = i32::try_from(days).unwrap_or(i32::MAX);
    let dropped = match (what, at) {
        (Partitions::PayloadDays, None) => sqlx::query_as!(
            Dropped,
            r#"SELECT day AS "first_day!", carried AS "carried!" FROM drop_payload_days($1)"#,
            days
        )
        .fetch_optional(&mut *conn)
        .await?,
        (Partitions::PayloadDays, Some(at)) => sqlx::query_as!(
            Dropped,
            r#"SELECT day AS "first_day!", carried AS "carried!" FROM drop_payload_days_at($1, $2)"#,
            days,
            at
        )
        .fetch_optional(&mut *conn)
        .await?,
        (Partitions::KeyPeriods, None) => sqlx::query_as!(
            Dropped,
            r#"SELECT period AS "first_day!", carried AS "carried!" FROM drop_key_periods($1)"#,
            days
        )
        .fetch_optional(&mut *conn)
        .await?,
        (Partitions::KeyPeriods, Some(at)) => sqlx::query_as!(
            Dropped,
            r#"SELECT period AS "first_day!", carried AS "carried!" FROM drop_key_periods_at($1, $2)"#,
            days,
            at
        )
        .fetch_optional(&mut *conn)
        .await?,
    };
    if dropped.is_some() {
        drop_detached_history(conn).await?;
    }
    Ok(dropped)
}

/// Removes the tables retention detached, one statement (and transaction) each: their
/// files go without any lock a writer needs (a key period's are gigabytes).
async fn drop_detached_history(conn: &mut PgConnection) -> Result<(), sqlx::Error> {
    while sqlx::query_scalar!(r#"SELECT drop_detached_history() AS "dropped""#)
        .fetch_one(&mut *conn)
        .await?
        .is_some()
    {}
    Ok(())
}

/// Creates the history partitions from yesterday to `days_ahead` days after `at` (`None`:
/// now) that are missing, moving into each the rows its default partition took while it
/// was missing; returns how many it created. The worker calls it hourly.
pub async fn ensure_history_partitions(
    conn: &mut PgConnection,
    at: Option<DateTime<Utc>>,
    days_ahead: i32,
) -> Result<i32, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT ensure_history_partitions(coalesce($1, now()), $2) AS "created!""#,
        at,
        days_ahead
    )
    .fetch_one(conn)
    .await
}

/// The most rows [`unpartitioned_rows`] counts per table: the gauge reads every few
/// seconds, and a day written while a partition was missing may be millions of rows.
pub const UNPARTITIONED_COUNTED_AT_MOST: i64 = 100_000;

/// Rows of the last day (at most [`UNPARTITIONED_COUNTED_AT_MOST`] each) that sit in a
/// default partition because their partition is
/// missing, per partitioned table with ids (zero rows are left out): what
/// `inbound_history_unpartitioned_rows` exports. Older rows there are the ones retention
/// carried or an earlier gap left, and are not counted; a receipt's key is written with
/// its receipt, so the receipts count for the keys.
pub async fn unpartitioned_rows(
    conn: &mut PgConnection,
) -> Result<Vec<(String, i64)>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"WITH since AS (SELECT (history_day(now()) - 1)::bigint * 10000000000 AS id)
         SELECT 'receipts' AS "parent!", count(*) AS "rows!"
           FROM (SELECT 1 FROM receipts_default, since
                 WHERE receipts_default.id >= since.id LIMIT $1) AS found
         UNION ALL
         SELECT 'receipt_payloads', count(*)
           FROM (SELECT 1 FROM receipt_payloads_default, since
                 WHERE receipt_payloads_default.receipt_id >= since.id LIMIT $1) AS found
         UNION ALL
         SELECT 'effects', count(*)
           FROM (SELECT 1 FROM effects_default, since
                 WHERE effects_default.id >= since.id LIMIT $1) AS found
         UNION ALL
         SELECT 'effect_attempts', count(*)
           FROM (SELECT 1 FROM effect_attempts_default, since
                 WHERE effect_attempts_default.effect_id >= since.id LIMIT $1) AS found"#,
        UNPARTITIONED_COUNTED_AT_MOST,
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .filter(|row| row.rows > 0)
        .map(|row| (row.parent, row.rows))
        .collect())
}

/// Seconds from now to the end of the newest payload partition (negative: today has none).
pub async fn history_seconds_ahead(conn: &mut PgConnection) -> Result<f64, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT coalesce(extract(epoch FROM (max(end_day)::timestamp AT TIME ZONE 'UTC') - now()),
                         -1)::float8 AS "ahead!"
         FROM history_partitions() WHERE parent = 'receipt_payloads'"#
    )
    .fetch_one(conn)
    .await
}
