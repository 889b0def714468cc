//! Applying the schema so that any migration can be interrupted and run again, and none
//! stalls the live system behind a lock it waits for.
//!
//! - Transactional migrations are atomic: an interrupted one left nothing behind.
//! - A `-- no-transaction` migration that builds an index concurrently, when interrupted
//!   (cancelled, timed out, its session killed), leaves an INVALID index that its
//!   `IF NOT EXISTS` would skip for ever. Before migrating, every invalid index in the
//!   schema being migrated is rebuilt (`REINDEX INDEX CONCURRENTLY`), and the transient copies an
//!   interrupted rebuild leaves (`…_ccnew`, `…_ccold`) are dropped.
//! - One migrator at a time: each run takes an advisory lock of its own (waiting without
//!   limit: a migrator waiting for a migrator holds up no one) before it repairs or
//!   migrates, so a peer's build in progress is never mistaken for an interrupted one.
//! - A transactional migration waits for each lock at most [`LOCK_TIMEOUT`]: one that
//!   needs a lock held by a long transaction gives up quickly instead of queueing every
//!   claim and insert behind its lock request, and the whole run is retried with backoff
//!   (a session of its own each time). Concurrent index builds and rebuilds have no lock
//!   timeout: they wait for older transactions to end, which blocks no one, and a long
//!   report or `pg_dump` must not fail them. `statement_timeout` is off for the session:
//!   index builds on a large table take long.
//! - Everything lands in the configured schema (the session's whole `search_path`), the
//!   history too (`<schema>._sqlx_migrations`); nothing outside it is read or changed.
//! - Migrations never block writers beyond [`LOCK_TIMEOUT`]: after the baseline, none
//!   rewrites or scans a table under a lock writers need — a column gets a constant
//!   default, a constraint on existing rows is added `NOT VALID` and validated apart, an
//!   index is built concurrently. `make lint` checks every migration with squawk
//!   (`.squawk.toml`), and `tests/tests/it/migrations.rs` applies each one to a table of a
//!   million receipts while a writer inserts.

use std::borrow::Cow;
use std::time::Duration;

use sqlx::migrate::{MigrateError, Migrator};
use sqlx::postgres::{PgConnectOptions, PgPool};
use sqlx::{Connection, PgConnection};

use super::{MIGRATOR, Schema, in_schema};

/// How long a migration statement may wait for a lock before the run is retried.
pub const LOCK_TIMEOUT: Duration = Duration::from_secs(2);

/// Runs before giving up when locks stay taken; with the backoff, about 90 s in all.
pub const MAX_RUNS: u32 = 20;

/// Why migrating stopped.
#[derive(Debug, thiserror::Error)]
pub enum MigrationError {
    /// A migration or the bookkeeping around it failed.
    #[error(transparent)]
    Migrate(#[from] MigrateError),
    /// The database holds something inbound will not touch on its own; says what to do.
    #[error("{0}")]
    Refused(String),
}

impl From<sqlx::Error> for MigrationError {
    fn from(error: sqlx::Error) -> Self {
        Self::Migrate(MigrateError::Execute(error))
    }
}

/// What a migration run found and did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Migrated {
    /// The versions this run applied, in order (none when the schema was current).
    pub applied_now: Vec<i64>,
    /// The newest version the schema holds now (`None`: no migration at all).
    pub version: Option<i64>,
    /// Applied migrations newer than this release knows (a newer release migrated the
    /// database): left as they are.
    pub newer: Vec<i64>,
}

/// A schema holds migrations this build does not carry (see [`Migrated::report`]).
#[derive(Debug, thiserror::Error)]
#[error(
    "schema {schema} holds migration version(s) {} that this binary does not carry: a newer build migrated it, or this one was built before those files were added (cargo rebuilds a crate for a new migration only when its build.rs says `cargo:rerun-if-changed=migrations`); run the build that carries them (or, for a rollback, pass --accept-newer)",
    joined(versions)
)]
pub struct NewerThanThisBuild {
    /// The schema.
    pub schema: Schema,
    /// The versions it holds that this build does not carry, in order.
    pub versions: Vec<i64>,
}

/// `1, 2, 3`.
fn joined(versions: &[i64]) -> String {
    versions
        .iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

impl Migrated {
    /// One line for `migrate`'s output — the schema's version and what this run applied —
    /// or, when the schema holds versions this build does not carry and `accept_newer`
    /// (a rollback) is not given, the refusal naming them.
    pub fn report(
        &self,
        schema: &Schema,
        accept_newer: bool,
    ) -> Result<String, NewerThanThisBuild> {
        if !self.newer.is_empty() && !accept_newer {
            return Err(NewerThanThisBuild {
                schema: schema.clone(),
                versions: self.newer.clone(),
            });
        }
        let at = self.version.map_or_else(
            || "no migration".to_owned(),
            |version| format!("version {version}"),
        );
        let now = if self.applied_now.is_empty() {
            "none".to_owned()
        } else {
            joined(&self.applied_now)
        };
        let ahead = if self.newer.is_empty() {
            String::new()
        } else {
            format!(
                "; ahead of this build (version(s) {} of a newer one, accepted)",
                joined(&self.newer)
            )
        };
        Ok(format!(
            "schema {schema}: at {at}; applied now: {now}{ahead}"
        ))
    }
}

/// Applies every pending migration of inbound's own into `schema`, creating it (see the
/// module doc for how interruptions and locks are handled).
pub async fn migrate(pool: &PgPool, schema: &Schema) -> Result<Migrated, MigrationError> {
    migrate_with(pool.connect_options().as_ref(), schema, MAX_RUNS).await
}

/// [`migrate`] on a connection made from `options`, giving up after `max_runs` runs that
/// each timed out on a lock.
pub async fn migrate_with(
    options: &PgConnectOptions,
    schema: &Schema,
    max_runs: u32,
) -> Result<Migrated, MigrationError> {
    run_with_retries(options, &MIGRATOR, schema, max_runs).await
}

/// Applies another crate's migrations (the example domain's, a team's own) into their own
/// `schema`, with their history in that schema: one migrator at a time under inbound's
/// migration lock, each lock waited for briefly and the run retried, interrupted
/// concurrent index builds repaired — like inbound's own. Their statements should name
/// their tables qualified (the session's `search_path` is `schema` alone while they run).
pub async fn migrate_schema(
    options: &PgConnectOptions,
    migrator: &Migrator,
    schema: &Schema,
) -> Result<Migrated, MigrationError> {
    migrate_schema_with(options, migrator, schema, MAX_RUNS).await
}

/// [`migrate_schema`], giving up after `max_runs` runs that each timed out on a lock.
pub async fn migrate_schema_with(
    options: &PgConnectOptions,
    migrator: &Migrator,
    schema: &Schema,
    max_runs: u32,
) -> Result<Migrated, MigrationError> {
    run_with_retries(options, migrator, schema, max_runs).await
}

/// One set of migrations and where it goes.
struct Plan<'a> {
    migrator: &'a Migrator,
    schema: &'a Schema,
}

async fn run_with_retries(
    options: &PgConnectOptions,
    migrator: &Migrator,
    schema: &Schema,
    max_runs: u32,
) -> Result<Migrated, MigrationError> {
    let plan = &Plan { migrator, schema };
    let options = in_schema(options.clone(), plan.schema).options([("statement_timeout", "0")]);
    let mut delay = Duration::from_millis(250);
    let mut run = 1;
    loop {
        match run_once(&options, plan).await {
            Err(MigrationError::Migrate(error)) if run < max_runs && waited_for_a_lock(&error) => {
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(5));
                run += 1;
            }
            outcome => return outcome,
        }
    }
}

/// Identifies inbound's migrator among PostgreSQL's advisory locks ("inbound" in ASCII).
const MIGRATION_LOCK_ID: i64 = 0x0069_6e62_6f75_6e64;

/// How long a migrator waits to connect.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

async fn run_once(options: &PgConnectOptions, plan: &Plan<'_>) -> Result<Migrated, MigrationError> {
    let mut connection =
        super::bounded::statement(CONNECT_TIMEOUT, PgConnection::connect_with(options)).await?;
    let outcome = migrate_locked(&mut connection, plan).await;
    // Closing ends the session, and with it the advisory lock whatever happened.
    connection.close().await.ok();
    outcome
}

/// How often a migrator asks again for the migration lock a peer holds.
const LOCK_POLL_INTERVAL: Duration = Duration::from_millis(250);

/// One migrator at a time: the repair and every pending migration under one advisory
/// lock, waited for without a timeout (a migrator waiting for a migrator holds up no one).
async fn migrate_locked(
    connection: &mut PgConnection,
    plan: &Plan<'_>,
) -> Result<Migrated, MigrationError> {
    // Asked for again and again rather than waited for in one statement: a concurrent
    // index build of the peer waits for every older snapshot to end, and a statement
    // blocked on the lock would hold one — each waiting for the other.
    while !sqlx::query_scalar!(
        r#"SELECT pg_try_advisory_lock($1) AS "locked!""#,
        MIGRATION_LOCK_ID
    )
    .fetch_one(&mut *connection)
    .await?
    {
        tokio::time::sleep(LOCK_POLL_INTERVAL).await;
    }
    let mut migrator = Migrator::with_migrations(plan.migrator.iter().cloned().collect());
    migrator.set_locking(false);
    // A database migrated by a newer release (a rollback, or an older pod started
    // during a rollout): its extra migrations only added, so this release runs on it.
    // Only *newer* unknown versions are let through (checked below, once the history's
    // schema is known): an unknown version among the known ones is refused.
    migrator.set_ignore_missing(true);
    migrator.dangerous_set_table_name(Cow::Owned(plan.schema.qualify("_sqlx_migrations")));
    let mut migrated = Migrated::default();
    create_schema_if_missing(connection, plan.schema).await?;
    // Unqualified statements create where the session's search_path points: make sure it
    // is the schema (a pooler that drops startup options would leave it at `public`).
    let current = sqlx::query_scalar!("SELECT current_schema()::text")
        .fetch_one(&mut *connection)
        .await?;
    if current.as_deref() != Some(plan.schema.as_str()) {
        return Err(MigrationError::Refused(format!(
            "the session's search_path resolves to {}, not {}: the connection's startup options \
             were dropped (a pooler?); migrate over a direct connection",
            current.as_deref().unwrap_or("no schema"),
            plan.schema
        )));
    }
    let applied = applied_versions(connection, plan).await?;
    migrated.newer = newer_migrations(&applied, plan, &migrator)?;
    migrated.applied_now = migrator
        .iter()
        .filter(|migration| migration.migration_type.is_up_migration())
        .map(|migration| migration.version)
        .filter(|version| !applied.contains(version))
        .collect();
    migrated.version = applied.iter().chain(&migrated.applied_now).copied().max();
    // Concurrent builds wait for older transactions to end, which blocks no one: no lock
    // timeout for them (a long report or pg_dump would otherwise fail them).
    set_lock_timeout(connection, Duration::ZERO).await?;
    repair_interrupted_index_builds(connection, plan.schema).await?;
    for migration in migrator.iter() {
        // A transactional migration takes table locks the live system needs: it waits
        // for them briefly. A concurrent build takes none of those.
        let wait = if migration.no_tx {
            Duration::ZERO
        } else {
            LOCK_TIMEOUT
        };
        set_lock_timeout(connection, wait).await?;
        migrator
            .run_direct(Some(migration.version), connection, false)
            .await?;
    }
    Ok(migrated)
}

/// The versions the schema's history holds, in order (none without a history).
async fn applied_versions(
    connection: &mut PgConnection,
    plan: &Plan<'_>,
) -> Result<Vec<i64>, MigrationError> {
    let table = plan.schema.qualify("_sqlx_migrations");
    if !table_exists(connection, &table).await? {
        return Ok(Vec::new());
    }
    #[expect(
        clippy::disallowed_methods,
        reason = "Runtime SQL: the history's table is in the schema being migrated, named only now."
    )]
    let applied: Vec<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT version FROM {table} ORDER BY version"
    )))
    .fetch_all(&mut *connection)
    .await?;
    Ok(applied)
}

/// The applied versions this release does not know, all newer than every one it knows (a
/// newer release migrated the database). An unknown version below the newest known one
/// means a migration was renumbered or removed, or the schema holds another history:
/// refused, as sqlx would without `ignore_missing`.
fn newer_migrations(
    applied: &[i64],
    plan: &Plan<'_>,
    migrator: &Migrator,
) -> Result<Vec<i64>, MigrationError> {
    let table = plan.schema.qualify("_sqlx_migrations");
    let newest_known = migrator
        .iter()
        .map(|migration| migration.version)
        .max()
        .unwrap_or(0);
    let unknown: Vec<i64> = applied
        .iter()
        .copied()
        .filter(|version| {
            migrator
                .iter()
                .all(|migration| migration.version != *version)
        })
        .collect();
    if let Some(hole) = unknown.iter().find(|version| **version <= newest_known) {
        return Err(MigrationError::Refused(format!(
            "{table} holds migration {hole}, which this release does not know although it knows \
             later ones: a migration was renumbered or removed, or the schema holds another \
             history"
        )));
    }
    Ok(unknown)
}

/// Whether `qualified` (`schema.table`, quoted as needed) names an existing relation.
async fn table_exists(connection: &mut PgConnection, qualified: &str) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT to_regclass($1) IS NOT NULL AS "exists!""#,
        qualified
    )
    .fetch_one(connection)
    .await
}

/// Creates `schema` only when it does not exist: `CREATE SCHEMA IF NOT EXISTS` needs the
/// CREATE privilege on the database even when the schema is there, and a role on managed
/// PostgreSQL often has only a schema a DBA created for it.
async fn create_schema_if_missing(
    connection: &mut PgConnection,
    schema: &Schema,
) -> Result<(), sqlx::Error> {
    let exists = sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1) AS "exists!""#,
        schema.as_str()
    )
    .fetch_one(&mut *connection)
    .await?;
    if !exists {
        #[expect(
            clippy::disallowed_methods,
            reason = "Runtime SQL: DDL takes no parameters; the name is quoted by Schema."
        )]
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "CREATE SCHEMA IF NOT EXISTS {}",
            schema.quoted()
        )))
        .execute(&mut *connection)
        .await?;
    }
    Ok(())
}

/// `lock_timeout` for this session; zero waits without limit.
async fn set_lock_timeout(
    connection: &mut PgConnection,
    wait: Duration,
) -> Result<(), sqlx::Error> {
    sqlx::query_scalar!(
        "SELECT set_config('lock_timeout', $1, false)",
        format!("{}ms", wait.as_millis())
    )
    .fetch_one(connection)
    .await
    .map(|_| ())
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

/// Rebuilds every invalid index in `schema` (whose objects only migrators create) and
/// drops the leftovers of interrupted rebuilds. Each statement runs on its own (neither
/// may run in a transaction). Only ever under the migration lock: then an invalid index
/// is no peer's build in progress.
async fn repair_interrupted_index_builds(
    connection: &mut PgConnection,
    schema: &Schema,
) -> Result<(), sqlx::Error> {
    let invalid = sqlx::query!(
        r#"SELECT format('%I.%I', n.nspname, c.relname) AS "qualified_name!",
                  c.relname::text AS "name!"
         FROM pg_index i
         JOIN pg_class c ON c.oid = i.indexrelid
         JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE NOT i.indisvalid AND n.nspname = $1
         ORDER BY c.relname"#,
        schema.as_str()
    )
    .fetch_all(&mut *connection)
    .await?;
    for index in invalid {
        let (qualified_name, name) = (index.qualified_name, index.name);
        // The name was quoted by PostgreSQL itself (`format('%I')`), so it is one identifier.
        let statement = if is_rebuild_leftover(&name) {
            format!("DROP INDEX CONCURRENTLY IF EXISTS {qualified_name}")
        } else {
            format!("REINDEX INDEX CONCURRENTLY {qualified_name}")
        };
        #[expect(
            clippy::disallowed_methods,
            reason = "Runtime SQL: DDL takes no parameters; the name was quoted by PostgreSQL."
        )]
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
    use super::{Migrated, Schema, is_rebuild_leftover};

    /// A schema holding versions this build does not carry is refused, naming them and
    /// what to do, unless a rollback accepts it; what was applied is named either way.
    #[test]
    fn a_report_names_the_versions_and_refuses_newer_ones_unless_accepted() {
        let schema: Schema = "inbound".parse().expect("a schema");
        let fresh = Migrated {
            applied_now: vec![1, 2],
            version: Some(2),
            newer: Vec::new(),
        };
        assert_eq!(
            fresh.report(&schema, false).expect("current"),
            "schema inbound: at version 2; applied now: 1, 2"
        );
        let ahead = Migrated {
            applied_now: Vec::new(),
            version: Some(3),
            newer: vec![3],
        };
        let refused = ahead.report(&schema, false).expect_err("newer").to_string();
        assert!(
            refused.contains("holds migration version(s) 3 that this binary does not carry")
                && refused.contains("--accept-newer"),
            "{refused}"
        );
        assert_eq!(
            ahead.report(&schema, true).expect("accepted"),
            "schema inbound: at version 3; applied now: none; ahead of this build \
             (version(s) 3 of a newer one, accepted)"
        );
    }

    #[test]
    fn leftovers_of_interrupted_rebuilds_are_recognised() {
        assert!(is_rebuild_leftover("receipts_payload_held_ccnew"));
        assert!(is_rebuild_leftover("receipts_payload_held_ccnew1"));
        assert!(is_rebuild_leftover("effects_status_ccold"));
        assert!(!is_rebuild_leftover("receipts_payload_held"));
        assert!(!is_rebuild_leftover("receipts_ccnewest"));
    }
}
