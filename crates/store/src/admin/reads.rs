//! Who read which payload: every console page and `inboundctl receipts show` that shows a
//! receipt's payload records the reader first ([`record_payload_reads`]), in the same unit
//! of work as the read, so no payload is shown unrecorded. The rows are insert-only for
//! every role, with the server's time and the database role beside the name given
//! (store/roles.rs), and purge never removes them.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgConnection;

use inbound_core::keys::ReceiptId;

/// Where a payload was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadSurface {
    /// A page of `inboundctl console`.
    Console,
    /// `inboundctl receipts show`.
    Cli,
}

impl ReadSurface {
    fn as_str(self) -> &'static str {
        match self {
            Self::Console => "console",
            Self::Cli => "cli",
        }
    }
}

/// Records that `read_by` is being shown the payloads of `receipt_ids` on `surface`.
pub async fn record_payload_reads(
    conn: &mut PgConnection,
    receipt_ids: &[ReceiptId],
    read_by: &str,
    surface: ReadSurface,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO payload_reads (receipt_id, read_by, surface)
         SELECT id, $2, $3 FROM unnest($1::int8[]) AS shown (id)",
        receipt_ids as &[ReceiptId],
        read_by,
        surface.as_str(),
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// One recorded read of a payload.
#[derive(Debug, Clone, Serialize)]
pub struct PayloadRead {
    /// The receipt whose payload was shown.
    pub receipt_id: ReceiptId,
    /// The name the reader gave (the proxy's user header, `--by`, `INBOUND_OPERATOR` or
    /// `$USER`).
    pub read_by: String,
    /// The database role that recorded it.
    pub database_role: String,
    /// `console` or `cli`.
    pub surface: String,
    /// When, by the database's clock.
    pub read_at: DateTime<Utc>,
}

/// The newest `limit` reads of receipt `receipt_id`'s payload, newest first, and how many
/// there are in all (through `payload_reads_by_receipt`).
pub async fn payload_reads_of(
    conn: &mut PgConnection,
    receipt_id: ReceiptId,
    limit: i64,
) -> Result<(Vec<PayloadRead>, i64), sqlx::Error> {
    let reads = sqlx::query_as!(
        PayloadRead,
        r#"SELECT receipt_id AS "receipt_id: ReceiptId", read_by, database_role, surface, read_at
         FROM payload_reads WHERE receipt_id = $1
         ORDER BY read_at DESC, id DESC LIMIT $2"#,
        receipt_id as ReceiptId,
        limit,
    )
    .fetch_all(&mut *conn)
    .await?;
    let total = sqlx::query_scalar!(
        r#"SELECT count(*) AS "total!" FROM payload_reads WHERE receipt_id = $1"#,
        receipt_id as ReceiptId,
    )
    .fetch_one(conn)
    .await?;
    Ok((reads, total))
}

/// Which reads an operator means: a window of time, optionally one reader or one receipt.
#[derive(Debug, Clone)]
pub struct ReadFilter {
    /// Read at or after this.
    pub since: DateTime<Utc>,
    /// Read before this (`None`: now).
    pub until: Option<DateTime<Utc>>,
    /// Only this reader's name.
    pub read_by: Option<String>,
    /// Only this receipt.
    pub receipt_id: Option<ReceiptId>,
}

/// The reads `filter` names, oldest first, at most `limit` (through `payload_reads_by_time`).
pub async fn payload_reads_between(
    conn: &mut PgConnection,
    filter: &ReadFilter,
    limit: i64,
) -> Result<Vec<PayloadRead>, sqlx::Error> {
    sqlx::query_as!(
        PayloadRead,
        r#"SELECT receipt_id AS "receipt_id: ReceiptId", read_by, database_role, surface, read_at
         FROM payload_reads
         WHERE read_at >= $1 AND ($2::timestamptz IS NULL OR read_at < $2)
           AND ($3::text IS NULL OR read_by = $3)
           AND ($4::int8 IS NULL OR receipt_id = $4)
         ORDER BY read_at, id LIMIT $5"#,
        filter.since,
        filter.until,
        filter.read_by.as_deref(),
        filter.receipt_id as Option<ReceiptId>,
        limit,
    )
    .fetch_all(conn)
    .await
}
