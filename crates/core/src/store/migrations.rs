//! Applying the schema so that any migration can be interrupted and run again, and none
//! stalls the live system behind a lock it waits for.
//!
//! - Transactional migrations are atomic: an interrupted one left nothing behind.
//! - A `-- no-transaction` migration that builds an index concurrently, when interrupted
//!   (cancelled, timed out, its session killed), leaves an INVALID index that its
//!   `IF NOT EXISTS` would skip for ever. Before migrating, every invalid index on our
//!   tables is rebuilt (`REINDEX INDEX CONCURRENTLY`), and the transient copies an
//!   interrupted rebuild leaves (`…_ccnew`, `…_ccold`) are dropped.
//! - Each run uses its own session with `lock_timeout` [`LOCK_TIMEOUT`]: a migration that
//!   needs a lock held by a long transaction gives up quickly instead of queueing every
//!   claim and insert behind its lock request, and the whole run is retried with backoff
//!   (a session of its own each time, so that sqlx's advisory lock ends with it).
//!   `statement_timeout` is off for this session: index builds on a large table take long.

use std::time::Duration;

use sqlx::migrate::MigrateError;
use sqlx::postgres::{PgConnectOptions, PgPool};
use sqlx::{Connection, PgConnection};

use super::MIGRATOR;

/// How long a migration statement may wait for a lock before the run is retried.
pub const LOCK_TIMEOUT: Duration = Duration::from_secs(2);

/// Runs before giving up when locks stay taken; with the backoff, about 90 s in all.
pub const MAX_RUNS: u32 = 20;

/// The tables our migrations create; only their indexes are repaired.
const OWN_TABLES: &[&str] = &[
    "receipts",
    "receipt_queue",
    "receipt_replays",
    "receipt_resolutions",
    "effects",
    "effect_attempts",
    "effect_resolutions",
    "orders",
    "entitlement_grants",
];

/// Applies every pending migration (see the module doc for how interruptions and locks
/// are handled).
pub async fn migrate(pool: &PgPool) -> Result<(), MigrateError> {
    migrate_with(pool.connect_options().as_ref(), LOCK_TIMEOUT, MAX_RUNS).await
}

/// [`migrate`] with its lock timeout and number of runs chosen by the caller.
pub async fn migrate_with(
    options: &PgConnectOptions,
    lock_timeout: Duration,
    max_runs: u32,
) -> Result<(), MigrateError> {
    let lock_timeout_ms = lock_timeout.as_millis().to_string();
    let options = options.clone().options([
        ("lock_timeout", lock_timeout_ms.as_str()),
        ("statement_timeout", "0"),
    ]);
    let mut delay = Duration::from_millis(250);
    let mut run = 1;
    loop {
        match run_once(&options).await {
            Err(error) if run < max_runs && waited_for_a_lock(&error) => {
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(5));
                run += 1;
            }
            outcome => return outcome,
        }
    }
}

async fn run_once(options: &PgConnectOptions) -> Result<(), MigrateError> {
    let mut connection = PgConnection::connect_with(options).await?;
    let outcome = async {
        repair_interrupted_index_builds(&mut connection).await?;
        MIGRATOR.run_direct(None, &mut connection, false).await
    }
    .await;
    // Closing ends the session, and with it any advisory lock a failed run still holds.
    connection.close().await.ok();
    outcome
}

/// Whether the run failed only because a lock was not granted in time.
fn waited_for_a_lock(error: &MigrateError) -> bool {
    let database_error = match error {
        MigrateError::Execute(error) | MigrateError::ExecuteMigration(error, _) => {
            error.as_database_error()
        }
        _ => None,
    };
    database_error
        .and_then(|error| error.code())
        .is_some_and(|code| code == "55P03")
}

/// Rebuilds every invalid index on our tables and drops the leftovers of interrupted
/// rebuilds. Each statement runs on its own (neither may run in a transaction).
async fn repair_interrupted_index_builds(connection: &mut PgConnection) -> Result<(), sqlx::Error> {
    let invalid: Vec<(String, String)> = sqlx::query_as(
        "SELECT format('%I.%I', n.nspname, c.relname), c.relname
         FROM pg_index i
         JOIN pg_class c ON c.oid = i.indexrelid
         JOIN pg_class t ON t.oid = i.indrelid
         JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE NOT i.indisvalid AND n.nspname = current_schema() AND t.relname = ANY ($1)
         ORDER BY c.relname",
    )
    .bind(OWN_TABLES)
    .fetch_all(&mut *connection)
    .await?;
    for (qualified_name, name) in invalid {
        // The name was quoted by PostgreSQL itself (`format('%I')`), so it is one identifier.
        let statement = if is_rebuild_leftover(&name) {
            format!("DROP INDEX CONCURRENTLY IF EXISTS {qualified_name}")
        } else {
            format!("REINDEX INDEX CONCURRENTLY {qualified_name}")
        };
        sqlx::raw_sql(sqlx::AssertSqlSafe(statement))
            .execute(&mut *connection)
            .await?;
    }
    Ok(())
}

/// `REINDEX CONCURRENTLY` names its transient copies `<index>_ccnew[N]` and
/// `<index>_ccold[N]`.
fn is_rebuild_leftover(name: &str) -> bool {
    ["_ccnew", "_ccold"].iter().any(|marker| {
        name.rfind(marker).is_some_and(|at| {
            name[at + marker.len()..]
                .bytes()
                .all(|byte| byte.is_ascii_digit())
        })
    })
}

#[cfg(test)]
mod tests {
    use super::is_rebuild_leftover;

    #[test]
    fn leftovers_of_interrupted_rebuilds_are_recognised() {
        assert!(is_rebuild_leftover("receipts_payload_held_ccnew"));
        assert!(is_rebuild_leftover("receipts_payload_held_ccnew1"));
        assert!(is_rebuild_leftover("effects_status_ccold"));
        assert!(!is_rebuild_leftover("receipts_payload_held"));
        assert!(!is_rebuild_leftover("receipts_ccnewest"));
    }
}
