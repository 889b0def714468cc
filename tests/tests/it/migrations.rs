//! Every migration may be interrupted and run again, and none blocks the live system
//! (`inbound_store::migrations`). The migrator's mechanics — an interrupted
//! concurrent index build repaired, a lock waited for briefly and the run retried, one
//! migrator at a time, a database a newer release migrated — are exercised on migrations
//! these tests write for the purpose. Then every migration after the baseline is applied
//! to a million receipts while a writer inserts, beside two written to show the check
//! tells a migration that blocks writers from one that does not.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use inbound_store::{self as store, MIGRATOR, Schema};
use inbound_tests::TestDatabase;
use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::{Connection, PgPool, SqlSafeStr};

/// A session of its own that sees what the tests' pool sees.
async fn connect(url: &str) -> Result<sqlx::PgConnection, sqlx::Error> {
    let options: sqlx::postgres::PgConnectOptions = url.parse()?;
    sqlx::PgConnection::connect_with(&inbound_tests::database::test_session(options)).await
}

/// A migration of the tests' own.
fn migration(version: i64, sql: &'static str) -> Migration {
    let no_tx = sql.starts_with("-- no-transaction");
    Migration::new(
        version,
        format!("test migration {version}").into(),
        MigrationType::Simple,
        sql.into_sql_str(),
        no_tx,
    )
}

/// Several steps, two of them concurrent index builds, each starting with a comment the
/// tests find it by in `pg_stat_activity`.
fn mechanics() -> Vec<Migration> {
    vec![
        migration(
            1,
            "-- tables\nCREATE TABLE items (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, kind text NOT NULL, note text);\n\
             CREATE TABLE queue (item_id bigint PRIMARY KEY, visible_at timestamptz NOT NULL DEFAULT now());\n\
             INSERT INTO items (kind, note) SELECT 'k' || (n % 10), 'note ' || n FROM generate_series(1, 20000) n;",
        ),
        migration(
            2,
            "-- no-transaction\nCREATE INDEX CONCURRENTLY IF NOT EXISTS items_kind ON items (kind);",
        ),
        migration(
            3,
            "-- queue constraint\nALTER TABLE queue ADD CONSTRAINT queue_visible CHECK (visible_at IS NOT NULL) NOT VALID;",
        ),
        migration(
            4,
            "-- no-transaction\nCREATE INDEX CONCURRENTLY IF NOT EXISTS items_note ON items (note);",
        ),
    ]
}

/// The migrations up to `version`.
fn up_to(migrations: &[Migration], version: i64) -> Migrator {
    Migrator::with_migrations(
        migrations
            .iter()
            .filter(|migration| migration.version <= version)
            .cloned()
            .collect(),
    )
}

/// A fresh database with `migrations` applied up to `version` (schema `inbound`).
async fn migrated_up_to(migrations: &[Migration], version: i64) -> TestDatabase {
    let database = TestDatabase::create_unmigrated().await;
    migrate(database.pool(), &up_to(migrations, version), 1)
        .await
        .expect("the first migrations");
    database
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
    inbound_tests::eventually(
        &format!("a backend running {prefix}"),
        Duration::from_secs(10),
        async || {
            sqlx::query_scalar(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query LIKE $1 || '%' AND pid <> pg_backend_pid()",
            )
            .bind(prefix)
            .fetch_optional(pool)
            .await
            .expect("activity")
        },
    )
    .await
}

/// A transaction on a session of its own, holding a snapshot (and whatever `statement`
/// locks) until it is committed.
async fn open_transaction(url: &str, isolation: &str, statement: &str) -> sqlx::PgConnection {
    let mut session = connect(url).await.expect("connect");
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "BEGIN {isolation}; {statement}"
    )))
    .execute(&mut session)
    .await
    .expect("begin");
    session
}

async fn commit(mut session: sqlx::PgConnection) {
    sqlx::raw_sql("COMMIT")
        .execute(&mut session)
        .await
        .expect("commit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_concurrent_index_build_is_rebuilt_when_migrations_run_again() {
    let migrations = mechanics();
    let database = migrated_up_to(&migrations, 1).await;
    let pool = database.pool();
    // An open snapshot makes CREATE INDEX CONCURRENTLY wait at its end, with the index
    // already in the catalog and not yet valid — where a cancel, a statement timeout or
    // a killed pod leaves it.
    let snapshot = open_transaction(
        database.url(),
        "ISOLATION LEVEL REPEATABLE READ",
        "SELECT 1",
    )
    .await;
    let migrator = Arc::new(up_to(&migrations, 2));
    let migrating = tokio::spawn({
        let (pool, migrator) = (pool.clone(), Arc::clone(&migrator));
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
        index_validity(pool, "items_kind").await,
        Some(false),
        "left INVALID"
    );
    assert!(!applied_versions(pool).await.contains(&2));
    commit(snapshot).await;

    migrate(pool, &migrator, 1)
        .await
        .expect("the rerun succeeds");
    assert_eq!(
        index_validity(pool, "items_kind").await,
        Some(true),
        "rebuilt"
    );
    assert_eq!(applied_versions(pool).await, [1, 2]);
    // And a third run has nothing to do.
    migrate(pool, &migrator, 1).await.expect("idempotent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_waiting_for_a_lock_gives_way_to_the_live_system_and_retries() {
    let migrations = mechanics();
    let database = migrated_up_to(&migrations, 2).await;
    let pool = database.pool();
    // A long transaction holds a lock migration 3's ALTER TABLE conflicts with.
    let long = open_transaction(database.url(), "", "SELECT count(*) FROM queue").await;
    let migrator = Arc::new(up_to(&migrations, 3));
    let migrating = tokio::spawn({
        let (pool, migrator) = (pool.clone(), Arc::clone(&migrator));
        async move { migrate(&pool, &migrator, store::migrations::MAX_RUNS).await }
    });
    backend_running(pool, "-- queue constraint").await;
    // A reader arriving now would queue behind the migration's lock request for as long
    // as the long transaction lasts; the lock timeout lets it through within seconds.
    let mut live = connect(database.url()).await.expect("connect");
    sqlx::query("SET statement_timeout = '4s'")
        .execute(&mut live)
        .await
        .expect("set");
    let asked = Instant::now();
    sqlx::query("SELECT count(*) FROM queue")
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
    commit(long).await;
    migrating
        .await
        .expect("task")
        .expect("the migration retried and finished");
    assert_eq!(applied_versions(pool).await, [1, 2, 3]);
}

/// A concurrent index build waits for older transactions to end; that blocks no one, so
/// a long report or a pg_dump must delay it, not fail it — and a second migrator started
/// meanwhile waits for the first instead of taking its build for an interrupted one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_concurrent_build_outwaits_a_long_transaction_and_a_second_migrator_waits_its_turn() {
    let migrations = mechanics();
    let database = migrated_up_to(&migrations, 3).await;
    let pool = database.pool();
    let report = open_transaction(
        database.url(),
        "ISOLATION LEVEL REPEATABLE READ",
        "SELECT txid_current()",
    )
    .await;
    // One run each, no retry: waiting must not be a lock timeout retried in a loop.
    let migrator = Arc::new(up_to(&migrations, 4));
    let migrators: Vec<_> = (0..2)
        .map(|_| {
            let (pool, migrator) = (pool.clone(), Arc::clone(&migrator));
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
    commit(report).await;
    for migrator in migrators {
        migrator
            .await
            .expect("task")
            .expect("each migrator succeeds");
    }
    assert_eq!(index_validity(pool, "items_note").await, Some(true));
    assert_eq!(applied_versions(pool).await, [1, 2, 3, 4]);
}

/// A rollback: the previous release's pods migrate in their init containers against a
/// database a newer release already migrated. Knowing fewer migrations than the database
/// holds is not an error (migrations only add); nothing is applied or undone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_release_migrates_a_database_a_newer_one_already_migrated() {
    let migrations = mechanics();
    let database = migrated_up_to(&migrations, 4).await;
    let migrated = migrate(database.pool(), &up_to(&migrations, 3), 1)
        .await
        .expect("the older release starts against the newer schema");
    assert_eq!(migrated.newer, vec![4], "it says the database is ahead");
    assert_eq!(
        applied_versions(database.pool()).await,
        [1, 2, 3, 4],
        "the newer migration stays"
    );

    // An unknown version *among* the known ones is not a newer release's: a migration
    // renumbered or removed, or another history in the schema. Refused.
    let holed: Vec<_> = migrations
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

/// Receipts in the table when a later migration is applied: enough that a scan of them
/// under a lock writers need outlasts [`WRITER_LOCK_WAIT`] several times. Machines of this
/// kind differ: a million receipts took 235 ms to check a new column's `IN (…)` constraint
/// on one, 80 ms on a later one, under the writer's patience; a pattern constraint takes
/// about 380 ms on the later one, which is why the blocking example checks a pattern.
const RECEIPTS: i64 = 1_000_000;

/// The longest the writer's insert may wait for a lock while a migration runs: far below
/// the migrator's own lock timeout (2 s), and far above the moment a catalog-only change
/// holds its lock.
const WRITER_LOCK_WAIT: &str = "100ms";

/// [`RECEIPTS`] finished receipts, as a table that has lived a while holds.
async fn fill_receipts(pool: &PgPool) {
    sqlx::query(
        "INSERT INTO receipts (integration, source_scope, event_id, event_type, route_key,
                               status, outcome, finished_at)
         SELECT 'bulk', 'bulk/scope', 'evt_' || n, 't', 't', 'done', 'applied', now()
         FROM generate_series(1, $1) n",
    )
    .bind(RECEIPTS)
    .execute(pool)
    .await
    .expect("a million receipts");
}

/// Applies inbound's migrations, then `extra`, whichever are pending, while a writer
/// inserts receipts one by one, as the ingress does; `Err` says how the writer was held
/// up.
async fn apply_beside_a_writer(database: &TestDatabase, extra: &[Migration]) -> Result<(), String> {
    let pool = database.pool();
    let stop = Arc::new(AtomicBool::new(false));
    let inserted = Arc::new(AtomicU64::new(0));
    let mut writer = connect(database.url()).await.expect("connect");
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "SET lock_timeout = '{WRITER_LOCK_WAIT}'"
    )))
    .execute(&mut writer)
    .await
    .expect("set");
    let writing = tokio::spawn({
        let (stop, inserted) = (Arc::clone(&stop), Arc::clone(&inserted));
        let run = rand::random::<u64>();
        async move {
            let mut next = 0u64;
            while !stop.load(Ordering::Relaxed) {
                next += 1;
                sqlx::query(
                    "INSERT INTO receipts (integration, source_scope, event_id, event_type, route_key)
                     VALUES ('live', 'live/scope', $1, 't', 't')",
                )
                .bind(format!("evt_{run}_{next}"))
                .execute(&mut writer)
                .await
                .map_err(|error| format!("insert {next} during the migration: {error}"))?;
                inserted.fetch_add(1, Ordering::Relaxed);
            }
            Ok::<(), String>(())
        }
    });
    // The writer is running before the first migration starts.
    while inserted.load(Ordering::Relaxed) < 10 {
        assert!(
            !writing.is_finished(),
            "the writer stopped before the migration"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut all: Vec<Migration> = MIGRATOR.iter().cloned().collect();
    all.extend(extra.iter().cloned());
    let at_start = inserted.load(Ordering::Relaxed);
    let migrated = migrate(pool, &Migrator::with_migrations(all), 1).await;
    let before_stop = inserted.load(Ordering::Relaxed);
    stop.store(true, Ordering::Relaxed);
    let written = writing.await.expect("writer task");
    migrated.map_err(|error| format!("the migration failed: {error}"))?;
    written?;
    assert!(before_stop > at_start, "the writer went on writing");
    Ok(())
}

/// Every migration after the baseline leaves writers running; and the check can tell: a
/// column with a `CHECK` in one statement, as the first version of
/// `0003_receipt_provenance.sql` had (it checks every existing row under an exclusive
/// lock), is caught, and the same column with its constraint added `NOT VALID` and
/// validated in a migration of its own is not. The caught example checks a pattern
/// rather than the first version's `IN (…)`: the scan under the lock is what is caught,
/// and a pattern keeps that scan longer than the writer's patience on a fast machine too
/// ([`RECEIPTS`]).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_migration_after_the_baseline_holds_up_a_writer() {
    let baseline = MIGRATOR
        .iter()
        .map(|migration| migration.version)
        .min()
        .expect("a baseline");
    let inbound: Vec<Migration> = MIGRATOR.iter().cloned().collect();
    let safe = [
        migration(
            1_000_001,
            "ALTER TABLE receipts ADD COLUMN origin text NOT NULL DEFAULT 'webhook';\n\
             ALTER TABLE receipts ADD CONSTRAINT receipts_origin_check CHECK (origin IN ('webhook', 'api')) NOT VALID;",
        ),
        migration(
            1_000_002,
            "ALTER TABLE receipts VALIDATE CONSTRAINT receipts_origin_check;",
        ),
    ];
    let blocking = [migration(
        1_000_003,
        "ALTER TABLE receipts ADD COLUMN provenance_again text NOT NULL DEFAULT 'webhook'\n\
         CHECK (provenance_again ~ '^(webhook|api)$');",
    )];
    let database = migrated_up_to(&inbound, baseline).await;
    fill_receipts(database.pool()).await;
    apply_beside_a_writer(&database, &safe)
        .await
        .expect("inbound's later migrations and the safe one leave the writer running");
    let mut then_blocking = safe.to_vec();
    then_blocking.extend(blocking);
    let caught = apply_beside_a_writer(&database, &then_blocking)
        .await
        .expect_err("a scan under an exclusive lock holds the writer up");
    assert!(caught.contains("lock timeout"), "{caught}");
}
