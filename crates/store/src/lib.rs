//! `inbound-store`: all of inbound's SQL, the embedded migrations, the database roles,
//! and the handler model. The rules it stores by — keys, states, effect rules, the
//! storability contract, the configuration — are `inbound-core`'s, which does no I/O.
//!
//! **For a team writing handlers, [`handlers`] is the API**: the `Handler` trait, the
//! `Transition` it returns, effect intents, the registry, the built-in `forward`, the
//! `StripeHandler` guard, and what a handler may ask about other receipts
//! (`receipt_names`). A handler runs inside the worker's transaction, so it takes a
//! connection, and that is why it lives with the SQL.
//!
//! Everything else here is the statements inbound's own binaries run, hidden from this
//! documentation and free to change in any release (ARCHITECTURE.md has their map):
//! `receipts` (acceptance), `queue` (claims with leases, the fenced start of a business
//! transaction, finishing), `effects` (the outbox and its dispatch), `admin` (what
//! operators read and decide), `bounded` (every wait bounded on the client), `clock`,
//! `savepoint`, `session`, `roles` and `migrations` (which `inbound-example` also uses for
//! its own schema). Functions take a `&mut PgConnection`; those on the
//! hot paths never commit on the caller's behalf, except where one autocommitted statement
//! *is* the unit of work; an operator's decision opens and commits its own transaction; no
//! function holds a transaction across a network call.
//!
//! # Errors
//!
//! A handler's failure is [`handlers::HandlerError`] (the receipt is retried). The store's
//! decisions have their own enums, written for the operator who asked; a statement's
//! failure is `sqlx::Error`, passed through unchanged: only the caller knows what it means
//! (the ingress answers 503, the worker retries).

// The patched sqlx. inbound's promises behind a transaction pooler (one batch per
// statement) and against a vanished server (TCP keepalive) rest on the vendored
// sqlx-postgres and sqlx-core (vendor/README.md), which a workspace gets only by copying
// the two `[patch.crates-io]` lines of this repository's Cargo.toml. Naming an item only
// the patched copies define makes a build without them fail here, with this comment
// beside the error, instead of running unpatched.
const _: () = sqlx_postgres::PATCHED_FOR_INBOUND_ONE_BATCH_UNNAMED;
const _: () = sqlx_core::PATCHED_FOR_INBOUND_TCP_KEEPALIVE;

/// A CTE named `durable` that raises `synchronous_commit` to `on` for the statement's own
/// transaction when the session is at `off` or `local` (`remote_write`, `on` and
/// `remote_apply` stay). Behind a transaction pooler the session is not ours — a server
/// connection may predate the role's setting — so the statements whose commit a promise
/// rests on (a 2xx, a `done`) carry it themselves. Join it (`LEFT JOIN durable ON true`):
/// a CTE nothing references is not evaluated.
///
/// The query macros take only literal SQL (or a file of it), so each such statement spells
/// the CTE out; a test holds the insert behind a 2xx and the worker's `done`
/// (`queries/receipts/insert.sql`, `queries/queue/finish.sql`, `finish_all.sql`) to this
/// text and to joining it.
#[doc(hidden)]
pub const DURABLE: &str = "durable AS (
             SELECT set_config('synchronous_commit', 'on', true)
             WHERE current_setting('synchronous_commit') IN ('off', 'local')
         )";

#[doc(hidden)]
pub mod admin;
#[doc(hidden)]
pub mod bounded;
#[doc(hidden)]
pub mod clock;
#[doc(hidden)]
pub mod effects;
pub mod handlers;
#[doc(hidden)]
pub mod migrations;
#[doc(hidden)]
pub mod queue;
#[doc(hidden)]
pub mod receipts;
#[doc(hidden)]
pub mod roles;
#[doc(hidden)]
pub mod savepoint;
mod schema;
#[doc(hidden)]
pub mod session;

#[doc(hidden)]
pub use clock::StatementClock;
#[doc(hidden)]
pub use migrations::{Migrated, MigrationError, NewerThanThisBuild, migrate, migrate_schema};
#[doc(hidden)]
pub use receipts::{
    InsertOutcome, NewReceipt, ReceiptOrder, insert_receipt, insert_receipts, insert_receipts_at,
};
#[doc(hidden)]
pub use schema::{DEFAULT_SCHEMA, InvalidSchema, Schema};
use session::durable_sessions;
#[doc(hidden)]
pub use session::{Pooler, SessionTarget};

use std::time::Duration;

use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{Executor, Postgres};

/// The schema, embedded from `migrations/` at build time.
// `migrations` links to the repository's top-level `migrations/`, so the published crate
// carries them too.
#[doc(hidden)]
pub static MIGRATOR: Migrator = sqlx::migrate!("./migrations");

/// A connection that carried more payload than this in one statement has its buffers
/// shrunk afterwards, so that pooled connections do not each keep the largest payloads
/// they ever carried.
#[doc(hidden)]
pub const SHRINK_BUFFERS_AFTER_BYTES: usize = 256 * 1024;

/// `ids` deduplicated, in the one order every operator decision locks rows in: an id
/// named twice is one decision, and two operators deciding about overlapping sets at once
/// never deadlock each other.
#[doc(hidden)]
pub fn in_lock_order<Id: Ord + Copy>(ids: &[Id]) -> Vec<Id> {
    let mut ordered = ids.to_vec();
    ordered.sort_unstable();
    ordered.dedup();
    ordered
}

/// Why a pool could not be set up. (Statements return `sqlx::Error`; callers decide what
/// a failure means, e.g. the ingress answers 503.)
#[derive(Debug, thiserror::Error)]
#[doc(hidden)]
pub enum StoreError {
    /// The database URL is not one we can use; the message never repeats the URL, which
    /// may hold a password.
    #[error("invalid database URL: {0}")]
    InvalidUrl(String),
}

/// How a process talks to PostgreSQL.
#[derive(Debug, Clone)]
#[doc(hidden)]
pub struct PoolSettings {
    /// Upper bound on open connections.
    pub max_connections: u32,
    /// How long a caller waits for a free connection before giving up.
    pub acquire_timeout: Duration,
    /// Server-side `statement_timeout` for every statement.
    pub statement_timeout: Duration,
    /// `application_name`, shown in `pg_stat_activity`.
    pub application_name: String,
    /// The schema of inbound's tables and how sessions reach them.
    pub target: SessionTarget,
}

/// Builds a pool that connects lazily, so a process starts (and answers 503 / not ready)
/// while the database is still down, and recovers on its own when it returns.
#[doc(hidden)]
pub fn connect_pool_lazy(
    database_url: &str,
    settings: &PoolSettings,
) -> Result<PgPool, StoreError> {
    let mut options = connect_options(database_url, &settings.target)?
        .application_name(&settings.application_name);
    // Behind a transaction pooler the role's settings apply (session.rs, roles.rs).
    if settings.target.pooler == Pooler::None {
        options = with_session_limits(options, settings.statement_timeout);
    }
    Ok(pool_options(&settings.target)
        .max_connections(settings.max_connections)
        .acquire_timeout(settings.acquire_timeout)
        .idle_timeout(Duration::from_secs(60))
        .connect_lazy_with(options))
}

/// `options` whose sessions carry their limits from the start (startup options, never a
/// `SET`): `statement_timeout` (zero: none) and `idle_in_transaction_session_timeout`
/// ([`bounded::IDLE_IN_TRANSACTION_TIMEOUT`]). Only for direct sessions: behind a
/// transaction pooler they come from the role.
#[doc(hidden)]
pub fn with_session_limits(
    options: PgConnectOptions,
    statement_timeout: Duration,
) -> PgConnectOptions {
    let statement_timeout_ms = statement_timeout.as_millis().to_string();
    let idle_in_transaction_ms = bounded::IDLE_IN_TRANSACTION_TIMEOUT.as_millis().to_string();
    options.options([
        ("statement_timeout", statement_timeout_ms.as_str()),
        (
            "idle_in_transaction_session_timeout",
            idle_in_transaction_ms.as_str(),
        ),
    ])
}

/// `options` whose sessions see `schema` alone: inbound's unqualified names resolve there
/// and objects its migrations create land there, never in `public`.
pub(crate) fn in_schema(options: PgConnectOptions, schema: &Schema) -> PgConnectOptions {
    options.options([("search_path", search_path(schema))])
}

/// Every session's `search_path`: `schema`, then the session's temporary schema last.
/// Unlisted, PostgreSQL searches temporary tables first, so a temporary `receipts` or
/// `payload_reads` made by whoever shares a pooled server session would stand in for
/// inbound's own.
pub(crate) fn search_path(schema: &Schema) -> String {
    format!("{},pg_temp", schema.quoted())
}

/// Parses `database_url` for sessions of `target` (what `session::session_options` sets).
#[doc(hidden)]
pub fn connect_options(
    database_url: &str,
    target: &SessionTarget,
) -> Result<PgConnectOptions, StoreError> {
    Ok(session::session_options(parse_url(database_url)?, target))
}

/// Parses `database_url`, never repeating it in the error.
#[doc(hidden)]
pub fn parse_url(database_url: &str) -> Result<PgConnectOptions, StoreError> {
    database_url
        .parse()
        .map_err(|error: sqlx::Error| StoreError::InvalidUrl(redact_url_error(&error)))
}

/// A pool of one connection with `pool`'s connect options (URL, `application_name`,
/// `statement_timeout`), for a task whose writes must never wait behind the pool's other
/// users. It connects lazily and reconnects after a failure, like any pool.
#[doc(hidden)]
pub fn dedicated_connection(
    pool: &PgPool,
    target: &SessionTarget,
    acquire_timeout: Duration,
) -> PgPool {
    pool_options(target)
        .max_connections(1)
        .acquire_timeout(acquire_timeout)
        .connect_lazy_with((*pool.connect_options()).clone())
}

/// What every pool of inbound's starts from: sessions that commit durably, and idle
/// connections checked within a bound before they are handed out.
fn pool_options(target: &SessionTarget) -> PgPoolOptions {
    bounded::idle_check_bounded(durable_sessions(PgPoolOptions::new(), target))
}

/// Whether `error` says the database or the connection failed (it may succeed if tried
/// again: unreachable, restarting, out of connections, a deadlock, a lock wait) rather
/// than that the statement itself, or the data it carried, was refused.
#[doc(hidden)]
pub fn is_unavailability(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(error) => {
            let code = error.code().unwrap_or_default();
            ["08", "40", "53", "57"]
                .iter()
                .any(|class| code.starts_with(class))
                || code == "55P03"
        }
        _ => false,
    }
}

/// The URL may hold a password: say only what kind of problem it is.
fn redact_url_error(error: &sqlx::Error) -> String {
    match error {
        sqlx::Error::Configuration(_) => "cannot parse it as a postgres:// URL".to_owned(),
        _ => "cannot be used".to_owned(),
    }
}

/// Answers whether the database executes a trivial statement.
#[expect(
    clippy::disallowed_methods,
    reason = "Runtime SQL: the simple protocol prepares nothing, which any pooler passes through."
)]
#[doc(hidden)]
pub async fn ping<'c, E: Executor<'c, Database = Postgres>>(
    executor: E,
) -> Result<(), sqlx::Error> {
    executor.execute("SELECT 1").await.map(|_| ())
}

#[cfg(test)]
mod tests {
    /// A statement's text with its SQL comments dropped and whitespace collapsed.
    fn statement_text(sql: &str) -> String {
        sql.lines()
            .map(|line| line.split("--").next().unwrap_or_default())
            .flat_map(str::split_whitespace)
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn a_join_in_a_comment_does_not_count() {
        let text = statement_text(
            "SELECT 1 FROM t -- LEFT JOIN durable ON true\n-- LEFT JOIN durable ON true\n",
        );
        assert_eq!(text, "SELECT 1 FROM t");
    }

    /// Each statement a promise rests on — the insert behind a 2xx, the worker's `done`
    /// (`finish`, `finish_all`) — spells [`super::DURABLE`] exactly and joins it, outside
    /// any comment.
    #[test]
    fn every_durable_commit_is_spelled_as_the_one_and_joined() {
        let durable: String = super::DURABLE
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        for (name, sql, source, function) in [
            (
                "receipts/insert.sql",
                include_str!("../queries/receipts/insert.sql"),
                include_str!("receipts.rs"),
                "pub async fn insert_receipts_at<",
            ),
            (
                "queue/finish.sql",
                include_str!("../queries/queue/finish.sql"),
                include_str!("queue.rs"),
                "pub async fn finish(",
            ),
            (
                "queue/finish_all.sql",
                include_str!("../queries/queue/finish_all.sql"),
                include_str!("queue.rs"),
                "pub async fn finish_all(",
            ),
        ] {
            // The function behind the promise runs this file, not a copy of it.
            let body = &source[source.find(function).expect("the function")..];
            let body = &body[..body.find("\n}\n").expect("its end")];
            assert!(
                body.contains(&format!("\"queries/{name}\"")),
                "{function} does not run queries/{name}"
            );
            let text = statement_text(sql);
            assert!(
                text.contains(&durable),
                "{name}: the durable CTE differs or is gone"
            );
            assert!(
                text.contains("LEFT JOIN durable ON true"),
                "{name}: the durable CTE is not joined"
            );
        }
    }
}
