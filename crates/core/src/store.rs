//! All SQL, and the embedded migrations.
//!
//! Functions take a `&mut PgConnection` (or an executor) and never commit on the caller's
//! behalf except where a single autocommitted statement *is* the unit of work, as with
//! [`insert_receipt`]. No function holds a transaction across a network call.

use std::time::Duration;

use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{Executor, PgConnection, Postgres};

use crate::keys::{EventId, ReceiptId, SourceScope};

/// The schema, embedded from `migrations/` at build time.
pub static MIGRATOR: Migrator = sqlx::migrate!("../../migrations");

/// Why a database operation did not happen. Callers treat every variant as "not stored".
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database refused or could not be reached.
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    /// The operation did not finish within its deadline; it may or may not have committed.
    #[error("database operation timed out")]
    Timeout,
    /// The database URL is not one we can use.
    #[error("invalid database URL: {0}")]
    InvalidUrl(String),
}

/// How a process talks to PostgreSQL.
#[derive(Debug, Clone)]
pub struct PoolSettings {
    /// Upper bound on open connections.
    pub max_connections: u32,
    /// How long a caller waits for a free connection before giving up.
    pub acquire_timeout: Duration,
    /// Server-side `statement_timeout` for every statement.
    pub statement_timeout: Duration,
    /// `application_name`, shown in `pg_stat_activity`.
    pub application_name: String,
}

/// Builds a pool that connects lazily, so a process starts (and answers 503 / not ready)
/// while the database is still down, and recovers on its own when it returns.
pub fn connect_pool_lazy(
    database_url: &str,
    settings: &PoolSettings,
) -> Result<PgPool, StoreError> {
    let options: PgConnectOptions = database_url
        .parse()
        .map_err(|error: sqlx::Error| StoreError::InvalidUrl(redact_url_error(&error)))?;
    let statement_timeout_ms = settings.statement_timeout.as_millis().to_string();
    let options = options
        .application_name(&settings.application_name)
        .options([("statement_timeout", statement_timeout_ms.as_str())]);
    Ok(PgPoolOptions::new()
        .max_connections(settings.max_connections)
        .acquire_timeout(settings.acquire_timeout)
        .idle_timeout(Duration::from_secs(60))
        .connect_lazy_with(options))
}

/// The URL may hold a password: say only what kind of problem it is.
fn redact_url_error(error: &sqlx::Error) -> String {
    match error {
        sqlx::Error::Configuration(_) => "cannot parse it as a postgres:// URL".to_owned(),
        _ => "cannot be used".to_owned(),
    }
}

/// Applies every pending migration.
pub async fn migrate(pool: &PgPool) -> Result<(), sqlx::migrate::MigrateError> {
    MIGRATOR.run(pool).await
}

/// Answers whether the database executes a trivial statement.
pub async fn ping<'c, E: Executor<'c, Database = Postgres>>(
    executor: E,
) -> Result<(), sqlx::Error> {
    executor.execute("SELECT 1").await.map(|_| ())
}

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
