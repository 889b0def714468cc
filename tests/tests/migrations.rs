//! Every migration may be interrupted and run again, and none stalls the live system
//! behind a lock it waits for (`inbound_core::store::migrations`).

use std::time::{Duration, Instant};

use inbound_core::store::{self, MIGRATOR};
use inbound_tests::TestDatabase;
use sqlx::{Connection, PgPool};

/// The newest migration's version.
fn latest_version() -> i64 {
    MIGRATOR
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
    let database = TestDatabase::create_unmigrated().await;
    let pool = database.pool();
    MIGRATOR
        .run_to(3, pool)
        .await
        .expect("the migrations before the index");
    // An open snapshot makes CREATE INDEX CONCURRENTLY wait at its end, with the index
    // already in the catalog and not yet valid — where a cancel, a statement timeout or
    // a killed pod leaves it.
    let mut snapshot = sqlx::PgConnection::connect(database.url())
        .await
        .expect("connect");
    sqlx::query("BEGIN ISOLATION LEVEL REPEATABLE READ")
        .execute(&mut snapshot)
        .await
        .expect("begin");
    sqlx::query("SELECT 1")
        .execute(&mut snapshot)
        .await
        .expect("snapshot");
    let migrating = tokio::spawn({
        let pool = pool.clone();
        async move { store::migrate(&pool).await }
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

    store::migrate(pool).await.expect("the rerun succeeds");
    assert_eq!(
        index_validity(pool, "receipts_payload_held").await,
        Some(true),
        "rebuilt"
    );
    assert_eq!(applied_versions(pool).await.last(), Some(&latest_version()));
    // And a third run has nothing to do.
    store::migrate(pool).await.expect("idempotent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_waiting_for_a_lock_gives_way_to_the_live_system_and_retries() {
    let database = TestDatabase::create_unmigrated().await;
    let pool = database.pool();
    MIGRATOR
        .run_to(4, pool)
        .await
        .expect("the migrations before 0005");
    // A long transaction holds a lock 0005's ALTER TABLE conflicts with.
    let mut long = sqlx::PgConnection::connect(database.url())
        .await
        .expect("connect");
    sqlx::query("BEGIN")
        .execute(&mut long)
        .await
        .expect("begin");
    sqlx::query("SELECT count(*) FROM receipt_queue")
        .execute(&mut long)
        .await
        .expect("lock");
    let migrating = tokio::spawn({
        let pool = pool.clone();
        async move { store::migrate(&pool).await }
    });
    backend_running(pool, "-- What the receipt path needs").await;
    // A claim arriving now would queue behind the migration's lock request for as long as
    // the long transaction lasts; the lock timeout lets it through within seconds.
    let mut live = sqlx::PgConnection::connect(database.url())
        .await
        .expect("connect");
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
    assert_eq!(applied_versions(pool).await.last(), Some(&latest_version()));
}

/// A concurrent index build waits for older transactions to end; that blocks no one, so
/// a long report or a pg_dump must delay it, not fail it — and a second migrator started
/// meanwhile waits for the first instead of taking its build for an interrupted one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_concurrent_build_outwaits_a_long_transaction_and_a_second_migrator_waits_its_turn() {
    let database = TestDatabase::create_unmigrated().await;
    let pool = database.pool();
    MIGRATOR
        .run_to(5, pool)
        .await
        .expect("the migrations before 0006");
    let mut report = sqlx::PgConnection::connect(database.url())
        .await
        .expect("connect");
    sqlx::query("BEGIN ISOLATION LEVEL REPEATABLE READ")
        .execute(&mut report)
        .await
        .expect("begin");
    sqlx::query("SELECT txid_current()")
        .execute(&mut report)
        .await
        .expect("snapshot");
    // One run each, no retry: waiting must not be a lock timeout retried in a loop.
    let migrators: Vec<_> = (0..2)
        .map(|_| {
            let options = pool.connect_options();
            tokio::spawn(async move { store::migrations::migrate_with(&options, 1).await })
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
    assert_eq!(applied_versions(pool).await.last(), Some(&latest_version()));
}
