//! Client-side bounds on database waits. A server's `statement_timeout` ends a slow
//! statement, but not a wait on a server that went silent: after a failover the old
//! primary may drop packets, or a proxy in front of it keep acknowledging while nothing
//! answers, and then only the kernel (minutes), or nothing, ends the wait. Every statement
//! and transaction of inbound's processes is given up on the client after its limit
//! ([`within`]); the connection is then closed, never reused (its session is in an unknown
//! state), and the caller treats the error as unavailability ([`super::is_unavailability`]:
//! an I/O error).
//!
//! The limits: a single statement waits at most the server's `statement_timeout` and
//! [`STATEMENT_MARGIN`] (the server cancels a slow statement itself, so only a silent one
//! is given up on); a business transaction at most its lease (after which another worker
//! may take its receipts); the round trip that checks an idle connection before the pool
//! hands it out, [`STATEMENT_MARGIN`] alone (`idle_check_bounded`); connects and pool
//! acquisitions their own timeouts. On the server side, a transaction whose client went
//! silent is ended by `idle_in_transaction_session_timeout`
//! ([`IDLE_IN_TRANSACTION_TIMEOUT`]), which frees its locks.

use std::time::Duration;

use sqlx::pool::PoolConnection;
use sqlx::postgres::PgPoolOptions;
use sqlx::{Connection, PgConnection, Postgres};

/// How much longer than the server's `statement_timeout` a client waits for an answer.
pub const STATEMENT_MARGIN: Duration = Duration::from_secs(1);

/// How long the server lets a session of ours sit idle inside a transaction before it
/// ends the session (and releases its locks): a client whose network went silent
/// mid-transaction never sends its COMMIT or ROLLBACK, and until the server ends it, the
/// rows it locked (a fenced queue row) stay locked. No transaction of inbound's waits on
/// anything between its statements but its own CPU (a handler, a payload decoded):
/// milliseconds, so 10 s leaves a wide margin.
pub const IDLE_IN_TRANSACTION_TIMEOUT: Duration = Duration::from_secs(10);

/// `options` whose pool checks an idle connection within [`STATEMENT_MARGIN`] before
/// handing it out. sqlx's own check (`test_before_acquire`, a ping) has no bound of its
/// own: on a connection whose server went silent it waits out the caller's whole acquire
/// timeout, once for every such connection idle in the pool. A check given up is an error
/// of `before_acquire`: sqlx then drops the connection without a goodbye and opens a fresh
/// one within the same acquisition.
pub(crate) fn idle_check_bounded(options: PgPoolOptions) -> PgPoolOptions {
    options
        .test_before_acquire(false)
        .before_acquire(|connection, _| {
            Box::pin(async move {
                statement(STATEMENT_MARGIN, connection.ping())
                    .await
                    .map(|()| true)
            })
        })
}

/// What a wait given up says: the limit it was given.
#[derive(Debug, thiserror::Error)]
#[error("the database did not answer within {} ms", .0.as_millis())]
pub struct GaveUp(pub Duration);

/// The error of a wait given up: an I/O error, so unavailability.
pub fn gave_up(limit: Duration) -> sqlx::Error {
    sqlx::Error::Io(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        GaveUp(limit),
    ))
}

/// Whether `error` is a wait given up ([`gave_up`]): the connection it happened on is in
/// an unknown state.
pub(crate) fn is_gave_up(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Io(io) if io.get_ref().is_some_and(|inner| inner.is::<GaveUp>()))
}

/// One statement, given up after `limit`. The caller must not use the connection again
/// after a [`gave_up`] error: [`within`] closes it.
pub async fn statement<T>(
    limit: Duration,
    work: impl Future<Output = Result<T, sqlx::Error>>,
) -> Result<T, sqlx::Error> {
    tokio::time::timeout(limit, work)
        .await
        .unwrap_or_else(|_elapsed| Err(gave_up(limit)))
}

/// Runs `work` on `connection`, giving up after `limit`: the connection is then closed
/// when dropped instead of going back to the pool (a session whose statement was
/// abandoned mid-way may answer it later, or never) — as it is when `work` gave up on
/// one of its own statements ([`statement`]).
pub async fn within<T>(
    connection: &mut PoolConnection<Postgres>,
    limit: Duration,
    work: impl AsyncFnOnce(&mut PgConnection) -> Result<T, sqlx::Error>,
) -> Result<T, sqlx::Error> {
    let outcome = statement(limit, work(&mut **connection)).await;
    if let Err(error) = &outcome
        && is_gave_up(error)
    {
        connection.close_on_drop();
    }
    outcome
}

/// Cancels any statement of the caller's open transaction after `timeout` on the server,
/// until the transaction ends: a bound of its own for one unit of work (a console page),
/// shorter than the session's, which holds behind a transaction pooler too (it is the
/// transaction's setting, not the session's).
pub async fn limit_statements_in_transaction(
    transaction: &mut PgConnection,
    timeout: Duration,
) -> Result<(), sqlx::Error> {
    let millis = format!("{}ms", timeout.as_millis());
    sqlx::query!(
        r#"SELECT set_config('statement_timeout', $1, true) AS "set!""#,
        millis,
    )
    .fetch_one(transaction)
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_given_up_is_unavailability_and_told_from_other_io_errors() {
        let error = gave_up(Duration::from_millis(1500));
        assert!(super::super::is_unavailability(&error));
        assert!(is_gave_up(&error));
        assert!(error.to_string().contains("within 1500 ms"), "{error}");
        let reset = sqlx::Error::Io(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "reset by peer",
        ));
        assert!(!is_gave_up(&reset));
    }
}
