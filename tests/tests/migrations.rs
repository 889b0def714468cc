//! Every migration may be interrupted and run again, and none stalls the live system
//! behind a lock it waits for (`inbound_core::store::migrations`). The migrator's
//! mechanics are exercised with the pre-schema migrations (`migrations/legacy`): several
//! steps, concurrent index builds among them, applied into schema `inbound` here.

use std::path::Path;
use std::time::{Duration, Instant};

use inbound_core::store::{self, Schema};
use inbound_tests::TestDatabase;
use sqlx::migrate::Migrator;
use sqlx::{Connection, PgPool};

/// A session of its own that sees what the tests' pool sees.
async fn connect(url: &str) -> Result<sqlx::PgConnection, sqlx::Error> {
    let options: sqlx::postgres::PgConnectOptions = url.parse()?;
    sqlx::PgConnection::connect_with(&inbound_tests::database::test_session(options)).await
}

/// The pre-schema migrations, read from the repository.
async fn legacy() -> Migrator {
    Migrator::new(Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../migrations/legacy"
    )))
    .await
    .expect("legacy migrations")
}

/// A fresh database with schema `inbound` (first in the tests' search path) and the
/// legacy migrations applied up to `version`.
async fn legacy_up_to(version: i64) -> (TestDatabase, Migrator) {
    let database = TestDatabase::create_unmigrated().await;
    sqlx::query("CREATE SCHEMA inbound")
        .execute(database.pool())
        .await
        .expect("schema");
    let migrator = legacy().await;
    migrator
        .run_to(version, database.pool())
        .await
        .expect("the first legacy migrations");
    (database, migrator)
}

/// The migrator under test, on `migrator`'s migrations into schema `inbound`.
async fn migrate(
    pool: &PgPool,
    migrator: &Migrator,
    max_runs: u32,
) -> Result<store::Migrated, store::MigrationError> {
    store::migrations::migrate_schema_with(
        &pool.connect_options(),
        migrator,
        &Schema::default(),
        max_runs,
    )
    .await
}

/// The newest legacy migration's version.
fn latest_version(migrator: &Migrator) -> i64 {
    migrator
        .iter()
        .map(|migration| migration.version)
        .max()
        .expect("migrations")
}

async fn applied_versions(pool: &PgPool) -> Vec<i64> {
    sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success ORDER BY version")
        .fetch_all(pool)
        .await
        .expect("migration history")
}

async fn index_validity(pool: &PgPool, name: &str) -> Option<bool> {
    sqlx::query_scalar(
        "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = $1",
    )
    .bind(name)
    .fetch_optional(pool)
    .await
    .expect("index")
}

/// Waits until a backend runs a statement starting with `prefix`; returns its pid.
async fn backend_running(pool: &PgPool, prefix: &str) -> i32 {
    let started = Instant::now();
    loop {
        let pid: Option<i32> = sqlx::query_scalar(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query LIKE $1 || '%' AND pid <> pg_backend_pid()",
        )
        .bind(prefix)
        .fetch_optional(pool)
        .await
        .expect("activity");
        if let Some(pid) = pid {
            return pid;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "nothing ran {prefix}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_concurrent_index_build_is_rebuilt_when_migrations_run_again() {
    let (database, migrator) = legacy_up_to(3).await;
    let pool = database.pool();
    // An open snapshot makes CREATE INDEX CONCURRENTLY wait at its end, with the index
    // already in the catalog and not yet valid — where a cancel, a statement timeout or
    // a killed pod leaves it.
    let mut snapshot = connect(database.url()).await.expect("connect");
    sqlx::query("BEGIN ISOLATION LEVEL REPEATABLE READ")
        .execute(&mut snapshot)
        .await
        .expect("begin");
    sqlx::query("SELECT 1")
        .execute(&mut snapshot)
        .await
        .expect("snapshot");
    let migrator = std::sync::Arc::new(migrator);
    let migrating = tokio::spawn({
        let (pool, migrator) = (pool.clone(), std::sync::Arc::clone(&migrator));
        async move { migrate(&pool, &migrator, store::migrations::MAX_RUNS).await }
    });
    let builder = backend_running(pool, "-- no-transaction").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    sqlx::query("SELECT pg_cancel_backend($1)")
        .bind(builder)
        .execute(pool)
        .await
        .expect("cancel");
    let interrupted = migrating.await.expect("task");
    assert!(interrupted.is_err(), "the cancelled build failed the run");
    assert_eq!(
        index_validity(pool, "receipts_payload_held").await,
        Some(false),
        "left INVALID"
    );
    assert!(!applied_versions(pool).await.contains(&4));
    sqlx::query("COMMIT")
        .execute(&mut snapshot)
        .await
        .expect("commit");

    migrate(pool, &migrator, 1)
        .await
        .expect("the rerun succeeds");
    assert_eq!(
        index_validity(pool, "receipts_payload_held").await,
        Some(true),
        "rebuilt"
    );
    assert_eq!(
        applied_versions(pool).await.last(),
        Some(&latest_version(&migrator))
    );
    // And a third run has nothing to do.
    migrate(pool, &migrator, 1).await.expect("idempotent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_waiting_for_a_lock_gives_way_to_the_live_system_and_retries() {
    let (database, migrator) = legacy_up_to(4).await;
    let pool = database.pool();
    // A long transaction holds a lock 0005's ALTER TABLE conflicts with.
    let mut long = connect(database.url()).await.expect("connect");
    sqlx::query("BEGIN")
        .execute(&mut long)
        .await
        .expect("begin");
    sqlx::query("SELECT count(*) FROM receipt_queue")
        .execute(&mut long)
        .await
        .expect("lock");
    let migrator = std::sync::Arc::new(migrator);
    let migrating = tokio::spawn({
        let (pool, migrator) = (pool.clone(), std::sync::Arc::clone(&migrator));
        async move { migrate(&pool, &migrator, store::migrations::MAX_RUNS).await }
    });
    backend_running(pool, "-- What the receipt path needs").await;
    // A claim arriving now would queue behind the migration's lock request for as long as
    // the long transaction lasts; the lock timeout lets it through within seconds.
    let mut live = connect(database.url()).await.expect("connect");
    sqlx::query("SET statement_timeout = '4s'")
        .execute(&mut live)
        .await
        .expect("set");
    let asked = Instant::now();
    sqlx::query("SELECT count(*) FROM receipt_queue")
        .execute(&mut live)
        .await
        .expect("the live query is not stalled behind the migration");
    assert!(
        asked.elapsed() < Duration::from_secs(3),
        "{:?}",
        asked.elapsed()
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        !migrating.is_finished(),
        "still waiting for the long transaction"
    );
    sqlx::query("COMMIT")
        .execute(&mut long)
        .await
        .expect("commit");
    migrating
        .await
        .expect("task")
        .expect("the migration retried and finished");
    assert_eq!(
        applied_versions(pool).await.last(),
        Some(&latest_version(&migrator))
    );
}

/// A concurrent index build waits for older transactions to end; that blocks no one, so
/// a long report or a pg_dump must delay it, not fail it — and a second migrator started
/// meanwhile waits for the first instead of taking its build for an interrupted one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_concurrent_build_outwaits_a_long_transaction_and_a_second_migrator_waits_its_turn() {
    let (database, migrator) = legacy_up_to(5).await;
    let pool = database.pool();
    let mut report = connect(database.url()).await.expect("connect");
    sqlx::query("BEGIN ISOLATION LEVEL REPEATABLE READ")
        .execute(&mut report)
        .await
        .expect("begin");
    sqlx::query("SELECT txid_current()")
        .execute(&mut report)
        .await
        .expect("snapshot");
    // One run each, no retry: waiting must not be a lock timeout retried in a loop.
    let migrator = std::sync::Arc::new(migrator);
    let migrators: Vec<_> = (0..2)
        .map(|_| {
            let (pool, migrator) = (pool.clone(), std::sync::Arc::clone(&migrator));
            tokio::spawn(async move { migrate(&pool, &migrator, 1).await })
        })
        .collect();
    backend_running(pool, "-- no-transaction").await;
    // Well past the 2 s lock timeout of transactional migrations.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(
        migrators.iter().all(|migrator| !migrator.is_finished()),
        "both still waiting"
    );
    sqlx::query("COMMIT")
        .execute(&mut report)
        .await
        .expect("commit");
    for migrator in migrators {
        migrator
            .await
            .expect("task")
            .expect("each migrator succeeds");
    }
    assert_eq!(
        index_validity(pool, "receipts_content_key").await,
        Some(true)
    );
    assert_eq!(
        applied_versions(pool).await.last(),
        Some(&latest_version(&migrator))
    );
}

/// A rollback: the previous release's pods migrate in their init containers against a
/// database a newer release already migrated. Knowing fewer migrations than the database
/// holds is not an error (migrations only add); nothing is applied or undone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_release_migrates_a_database_a_newer_one_already_migrated() {
    let (database, migrator) = legacy_up_to(1).await;
    migrate(database.pool(), &migrator, 1)
        .await
        .expect("the newer release migrates");
    let newest = latest_version(&migrator);
    let older: Vec<_> = migrator
        .iter()
        .filter(|migration| migration.version < newest)
        .cloned()
        .collect();
    let older = Migrator::with_migrations(older);
    let migrated = migrate(database.pool(), &older, 1)
        .await
        .expect("the older release starts against the newer schema");
    assert_eq!(
        migrated.newer,
        vec![newest],
        "it says the database is ahead"
    );
    assert_eq!(
        applied_versions(database.pool()).await.last(),
        Some(&newest),
        "the newer migration stays"
    );

    // An unknown version *among* the known ones is not a newer release's: a migration
    // renumbered or removed, or another history in the schema. Refused.
    let holed: Vec<_> = migrator
        .iter()
        .filter(|migration| migration.version != 2)
        .cloned()
        .collect();
    let refused = migrate(database.pool(), &Migrator::with_migrations(holed), 1)
        .await
        .expect_err("a hole in the history");
    assert!(
        refused
            .to_string()
            .contains("holds migration 2, which this release does not know"),
        "{refused}"
    );
}
