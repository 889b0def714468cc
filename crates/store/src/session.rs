//! How a process's sessions reach PostgreSQL: directly (or through a session pooler), or
//! through a transaction-pooling proxy (PgBouncer `pool_mode = transaction`, RDS Proxy,
//! Supavisor), and the start-up check that the two are not confused.
//!
//! Directly, every session carries its settings from the start (`search_path`,
//! `statement_timeout` as startup options; `synchronous_commit` raised after connecting)
//! and statements are prepared once per connection and cached.
//!
//! Behind a transaction pooler a client's consecutive transactions may run on different
//! servers, and a server serves many clients, so nothing may outlive a transaction:
//! - no named prepared statements — the statement cache is off, and the vendored
//!   sqlx-postgres then sends each statement unnamed in one batch (vendor/README.md);
//! - no startup options and no session `SET`: the schema, `statement_timeout` and
//!   `synchronous_commit` come from the role (`ALTER ROLE … SET`, which `inboundctl
//!   migrate --create-roles` writes), and every new connection checks that they hold,
//!   refusing to be used when the schema is wrong or commits would not be durable.
//!
//! [`check_sessions`] tells, at start-up, whether the mode matches what the URL reaches.

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Connection, PgConnection};

use super::Schema;

/// The `--db-pooler` modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Pooler {
    /// A direct connection, or a pooler in session mode: sessions keep their state.
    #[default]
    None,
    /// A transaction-pooling proxy: nothing outlives a transaction.
    Transaction,
}

impl Pooler {
    /// The flag's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Transaction => "transaction",
        }
    }
}

impl std::fmt::Display for Pooler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Pooler {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        match value {
            "none" | "session" => Ok(Self::None),
            "transaction" => Ok(Self::Transaction),
            other => Err(format!(
                "unknown pooler mode {other:?}: expected none (direct, or a session pooler) or transaction"
            )),
        }
    }
}

/// Where and how a process's sessions connect.
#[derive(Debug, Clone)]
pub struct SessionTarget {
    /// The schema of inbound's tables.
    pub schema: Schema,
    /// How the URL reaches PostgreSQL.
    pub pooler: Pooler,
}

/// `options` for `target`: directly, the schema (and any further startup options) travel
/// with the session; behind a transaction pooler nothing does, and the statement cache is
/// off (see the module header).
pub(crate) fn session_options(
    options: PgConnectOptions,
    target: &SessionTarget,
) -> PgConnectOptions {
    match target.pooler {
        Pooler::None => super::in_schema(options, &target.schema),
        Pooler::Transaction => options
            .statement_cache_capacity(0)
            // Not a parameter poolers pass on: PgBouncer refuses the connection.
            .extra_float_digits(None),
    }
}

/// `options` whose every new session commits durably: a 2xx and a `done` promise commits
/// that survive a crash, so a server, database or role default of `synchronous_commit =
/// off` — or `local`, which does not wait for a synchronous standby — is raised to `on`
/// for inbound's sessions. Stronger settings (`remote_write`, `remote_apply`) stay.
///
/// Behind a transaction pooler a session `SET` would stay with the server, not with us:
/// each new connection instead checks the role's settings and is refused when they
/// would weaken a commit or point at another schema.
pub(crate) fn durable_sessions(options: PgPoolOptions, target: &SessionTarget) -> PgPoolOptions {
    let target = target.clone();
    options.after_connect(move |connection, _| {
        let target = target.clone();
        Box::pin(async move {
            match target.pooler {
                Pooler::None => sqlx::query_scalar!(
                    "SELECT set_config('synchronous_commit', 'on', false)
                     WHERE current_setting('synchronous_commit') IN ('off', 'local')",
                )
                .fetch_optional(connection)
                .await
                .map(|_| ()),
                Pooler::Transaction => role_settings_hold(connection, &target.schema)
                    .await
                    .map_err(|mismatch| sqlx::Error::Configuration(mismatch.into())),
            }
        })
    })
}

/// Why sessions cannot be used as configured. The message is one line and names the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionMismatch {
    /// A transaction pooler was detected, but `--db-pooler transaction` is not set.
    #[error(
        "the database URL reaches a transaction-pooling proxy ({0}); start with --db-pooler transaction (INBOUND_DB_POOLER=transaction)"
    )]
    UndeclaredPooler(String),
    /// The role's settings do not give inbound's schema or durable commits.
    #[error("{0}")]
    RoleSettings(String),
}

/// What a new transaction-pooled session sees must be what a direct one is given: the
/// error (`Configuration`) names the `ALTER ROLE` that fixes it.
pub async fn role_settings_hold(
    connection: &mut PgConnection,
    schema: &Schema,
) -> Result<(), sqlx::Error> {
    let settings = sqlx::query!(
        r#"SELECT current_schema()::text AS schema,
                  current_setting('synchronous_commit') AS "synchronous_commit!",
                  current_user::text AS "role!""#
    )
    .fetch_one(&mut *connection)
    .await?;
    let (current_schema, synchronous_commit, role) =
        (settings.schema, settings.synchronous_commit, settings.role);
    if current_schema.as_deref() != Some(schema.as_str()) {
        return Err(sqlx::Error::Configuration(
            SessionMismatch::RoleSettings(format!(
                "behind a transaction pooler the schema comes from the role, and role {role} resolves to {}: ALTER ROLE {role} SET search_path = {} (inboundctl migrate --create-roles does this)",
                current_schema.as_deref().unwrap_or("no schema"),
                schema.quoted()
            ))
            .into(),
        ));
    }
    if matches!(synchronous_commit.as_str(), "off" | "local") {
        return Err(sqlx::Error::Configuration(
            SessionMismatch::RoleSettings(format!(
                "behind a transaction pooler durability comes from the role, and role {role} has synchronous_commit = {synchronous_commit}: ALTER ROLE {role} SET synchronous_commit = on"
            ))
            .into(),
        ));
    }
    Ok(())
}

/// Whether the URL reaches PostgreSQL the way `target` says, from two sessions of its
/// own: `Ok(Err(_))` names the mismatch, `Err(_)` is a database that could not be asked.
///
/// A transaction pooler shows itself by a session that moves between servers: the
/// backend pid of one connection changes between two transactions, or a second
/// connection's transaction runs in the first one's backend. PgBouncer reuses the server
/// a client just released, so one round reveals it; the check runs three rounds for
/// poolers that choose otherwise. A pooler that refuses startup options (PgBouncer
/// does) fails the connection itself, which [`explain_connect_error`] words.
pub async fn check_sessions(
    options: &PgConnectOptions,
    target: &SessionTarget,
    timeout: Duration,
) -> Result<Result<(), SessionMismatch>, sqlx::Error> {
    let (mut first, mut second) = connect_pair(options, target, timeout).await?;
    tokio::time::timeout(timeout, check_connected(&mut first, &mut second, target))
        .await
        .unwrap_or_else(|_| Err(super::bounded::gave_up(timeout)))
}

/// The two sessions [`check_sessions`] compares, each connected within `timeout`.
pub async fn connect_pair(
    options: &PgConnectOptions,
    target: &SessionTarget,
    timeout: Duration,
) -> Result<(PgConnection, PgConnection), sqlx::Error> {
    let options = session_options(options.clone(), target);
    let connect = || async {
        tokio::time::timeout(timeout, PgConnection::connect_with(&options))
            .await
            .map_err(|_| sqlx::Error::PoolTimedOut)?
    };
    Ok((connect().await?, connect().await?))
}

/// [`check_sessions`] on two sessions already connected; the caller bounds how long it
/// may wait (a server that went silent would answer none of its statements).
pub async fn check_connected(
    first: &mut PgConnection,
    second: &mut PgConnection,
    target: &SessionTarget,
) -> Result<Result<(), SessionMismatch>, sqlx::Error> {
    let verdict = match target.pooler {
        Pooler::Transaction => match role_settings_hold(first, &target.schema).await {
            Ok(()) => Ok(()),
            Err(sqlx::Error::Configuration(error)) => {
                Err(SessionMismatch::RoleSettings(error.to_string()))
            }
            Err(error) => return Err(error),
        },
        Pooler::None => moves_between_servers(first, second).await?,
    };
    Ok(verdict)
}

async fn moves_between_servers(
    first: &mut PgConnection,
    second: &mut PgConnection,
) -> Result<Result<(), SessionMismatch>, sqlx::Error> {
    for _ in 0..3 {
        let before = backend_pid(first).await?;
        let mut held = second.begin().await?;
        let other = backend_pid(&mut held).await?;
        let after = backend_pid(first).await?;
        held.commit().await?;
        if before != after {
            return Ok(Err(SessionMismatch::UndeclaredPooler(format!(
                "one connection ran in backends {before} and {after}"
            ))));
        }
        if other == before {
            return Ok(Err(SessionMismatch::UndeclaredPooler(format!(
                "two connections shared backend {before}"
            ))));
        }
    }
    Ok(Ok(()))
}

/// The session's backend, asked in the simple protocol: this runs before we know whether
/// named statements are safe.
#[expect(
    clippy::disallowed_methods,
    reason = "Runtime SQL: the simple protocol, before named statements are known to be safe."
)]
async fn backend_pid(connection: &mut PgConnection) -> Result<i32, sqlx::Error> {
    use sqlx::Row;
    sqlx::raw_sql("SELECT pg_backend_pid()")
        .fetch_one(connection)
        .await?
        .try_get(0)
}

/// A connection error in words that name the fix when a pooler refused what a direct
/// session sends (PgBouncer: "unsupported startup parameter").
pub fn explain_connect_error(error: &sqlx::Error, pooler: Pooler) -> Option<String> {
    let text = error.to_string();
    (pooler == Pooler::None && text.contains("unsupported startup parameter")).then(|| {
        SessionMismatch::UndeclaredPooler(format!("it refused a startup parameter: {text}"))
            .to_string()
    })
}
