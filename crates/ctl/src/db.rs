//! `inboundctl`'s database session: one connection, checked as the binaries check theirs
//! (an undeclared transaction pooler is refused: a session setting of ours would stay on
//! a server connection other clients then use), its limits given at connect time (never
//! `SET` for the session), and every unit of work on it bounded on the client as well as
//! by the server's `statement_timeout` — a database that went silent, or a proxy that
//! acknowledges for a server that is gone, ends the command with an error instead of
//! holding it (a CronJob's purge, an operator's terminal) until the kernel gives up.

use std::time::Duration;

use anyhow::{Context, bail};
use inbound_store::{self as store, bounded};
use sqlx::{Connection, PgConnection};

/// One connection and how long a unit of work on it may wait.
pub struct Db {
    connection: PgConnection,
    /// `None`: `--statement-timeout-secs 0`, no bound asked for.
    limit: Option<Duration>,
    /// A unit of work was given up: the session is in an unknown state.
    abandoned: bool,
}

impl Db {
    /// The session `connection`, each unit of work bounded by `limit`.
    pub fn new(connection: PgConnection, limit: Option<Duration>) -> Self {
        Self {
            connection,
            limit,
            abandoned: false,
        }
    }

    /// Runs one unit of work (a statement, or a transaction of a few) within the limit.
    pub async fn run<T>(
        &mut self,
        work: impl AsyncFnOnce(&mut PgConnection) -> anyhow::Result<T>,
    ) -> anyhow::Result<T> {
        if self.abandoned {
            bail!("the database stopped answering earlier in this command");
        }
        let Some(limit) = self.limit else {
            return work(&mut self.connection).await;
        };
        match tokio::time::timeout(limit, work(&mut self.connection)).await {
            Ok(outcome) => outcome,
            Err(_elapsed) => {
                self.abandoned = true;
                Err(bounded::gave_up(limit)).context(
                    "gave up on the database (raise --statement-timeout-secs if a statement legitimately takes longer)",
                )
            }
        }
    }
}

/// Connects to `options` for `target` within `connect_timeout`, and checks the session as
/// the binaries do: directly, that no transaction pooler is in the way (the error is then
/// a [`store::session::SessionMismatch`]); behind one, that the role gives inbound's
/// schema and durable commits. Each step waits at most `connect_timeout`.
pub async fn connect_checked(
    options: &sqlx::postgres::PgConnectOptions,
    target: &store::SessionTarget,
    connect_timeout: Duration,
) -> anyhow::Result<PgConnection> {
    let connected = tokio::time::timeout(connect_timeout, PgConnection::connect_with(options))
        .await
        .context("cannot connect to PostgreSQL: timed out")?;
    let mut connection: PgConnection = match connected {
        Ok(connection) => connection,
        Err(error) => match store::session::explain_connect_error(&error, target.pooler) {
            Some(explained) => bail!("cannot connect to PostgreSQL: {explained}"),
            None => return Err(error).context("cannot connect to PostgreSQL"),
        },
    };
    match target.pooler {
        store::Pooler::Transaction => {
            tokio::time::timeout(
                connect_timeout,
                store::session::role_settings_hold(&mut connection, &target.schema),
            )
            .await
            .unwrap_or_else(|_| Err(bounded::gave_up(connect_timeout)))
            .context("cannot use this database session")?;
        }
        store::Pooler::None => {
            if let Err(mismatch) = store::session::check_sessions(options, target, connect_timeout)
                .await
                .context("cannot check the database sessions")?
            {
                return Err(anyhow::Error::new(mismatch));
            }
        }
    }
    Ok(connection)
}
