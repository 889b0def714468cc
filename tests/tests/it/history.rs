//! History laid out by time (migrations/0001_inbound.sql): receipt keys deduplicate
//! across a key period's boundary and for the whole horizon, two first deliveries on
//! either side of a boundary meet in one index, a missing partition costs no delivery
//! (its rows wait in the default partition until the partition is made), and retention
//! drops a day while the ingress writes.

use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use inbound_core::keys::{EventId, SourceScope};
use inbound_store::{self as store, InsertOutcome, NewReceipt, admin};
use inbound_tests::TestDatabase;

/// The key periods' length in days (`key_period` in the migration).
const PERIOD_DAYS: i64 = 90;

/// The first instant of the key period that holds `at`.
fn period_start(at: DateTime<Utc>) -> DateTime<Utc> {
    let day = at.timestamp().div_euclid(86_400);
    Utc.timestamp_opt((day - day.rem_euclid(PERIOD_DAYS)) * 86_400, 0)
        .single()
        .expect("a time")
}

fn receipt<'a>(scope: &'a SourceScope, event_id: &'a EventId) -> NewReceipt<'a> {
    NewReceipt {
        integration: "stripe-acme",
        source_scope: scope,
        event_id,
        event_type: "payment_intent.succeeded",
        route_key: "payment_intent.succeeded",
        payload_json: r#"{"id":"x"}"#,
        content_digest: None,
        delivery_json: None,
        order: Default::default(),
    }
}

fn scope() -> SourceScope {
    SourceScope::from_parts(["stripe-acme", "acct_1", "live"])
}

/// Accepts `event_id` with the key period decided at `at`.
async fn accept_at(database: &TestDatabase, event_id: &str, at: DateTime<Utc>) -> InsertOutcome {
    let (scope, event_id) = (scope(), EventId::new(event_id));
    let mut connection = database.pool().acquire().await.expect("connection");
    store::insert_receipts_at(&mut connection, &[receipt(&scope, &event_id)], Some(at))
        .await
        .expect("insert")[0]
}

#[tokio::test]
async fn a_key_is_held_for_the_whole_horizon_across_a_period_boundary() {
    let database = TestDatabase::create().await;
    let start = period_start(Utc::now());
    // First delivered in the last second of the previous period.
    let first = start - chrono::Duration::seconds(1);
    assert!(matches!(
        accept_at(&database, "evt_edge", first).await,
        InsertOutcome::Accepted(_)
    ));
    // Redelivered after the opening day, and on the last day of the horizon (89 days
    // and 23 hours later, still in the next period): each a duplicate, found in the
    // previous period's partition.
    for later in [
        start + chrono::Duration::days(2),
        first + chrono::Duration::days(PERIOD_DAYS - 1) + chrono::Duration::hours(23),
    ] {
        assert_eq!(
            accept_at(&database, "evt_edge", later).await,
            InsertOutcome::Duplicate,
            "redelivered at {later}"
        );
    }
    // Inside one period, and the content key beside it, as before.
    assert_eq!(
        accept_at(&database, "evt_edge", first).await,
        InsertOutcome::Duplicate
    );
    // Two periods on, the key has left the horizon (at least 90 days passed).
    assert!(matches!(
        accept_at(
            &database,
            "evt_edge",
            start + chrono::Duration::days(PERIOD_DAYS + 1)
        )
        .await,
        InsertOutcome::Accepted(_)
    ));
}

/// The race the opening day closes: a first delivery still uncommitted at the end of a
/// period, and a second one of the same event just after the boundary. Without the
/// opening day's second key row, the second would look in the previous period, miss the
/// uncommitted row and be accepted too.
#[tokio::test]
async fn two_first_deliveries_on_either_side_of_a_boundary_meet_in_one_index() {
    let database = TestDatabase::create().await;
    let start = period_start(Utc::now());
    let (scope, event_id) = (scope(), EventId::new("evt_race"));
    let mut first = database.pool().begin().await.expect("transaction");
    let accepted = store::insert_receipts_at(
        &mut first,
        &[receipt(&scope, &event_id)],
        Some(start - chrono::Duration::seconds(1)),
    )
    .await
    .expect("insert")[0];
    assert!(matches!(accepted, InsertOutcome::Accepted(_)));
    let pool = database.pool().clone();
    let second = tokio::spawn(async move {
        let (scope, event_id) = (self::scope(), EventId::new("evt_race"));
        let mut connection = pool.acquire().await.expect("connection");
        store::insert_receipts_at(
            &mut connection,
            &[receipt(&scope, &event_id)],
            Some(start + chrono::Duration::seconds(1)),
        )
        .await
        .expect("insert")[0]
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !second.is_finished(),
        "the second delivery waits for the first's key"
    );
    first.commit().await.expect("commit");
    assert_eq!(second.await.expect("task"), InsertOutcome::Duplicate);
    let receipts: i64 = sqlx::query_scalar("SELECT count(*) FROM receipts")
        .fetch_one(database.pool())
        .await
        .expect("count");
    assert_eq!(receipts, 1);
}

#[tokio::test]
async fn a_missing_partition_costs_no_delivery_and_is_made_again_without_a_lock() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let today = Utc::now().date_naive().format("%Y%m%d").to_string();
    let period = period_start(Utc::now())
        .date_naive()
        .format("%Y%m%d")
        .to_string();
    // As if no worker had run for a week: today's partitions are missing.
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP TABLE receipt_payloads_{today}, receipts_{period}, receipt_keys_{period}"
    )))
    .execute(pool)
    .await
    .expect("drop");
    let mut connection = pool.acquire().await.expect("connection");
    let accepted = accept_at(&database, "evt_homeless", Utc::now()).await;
    let InsertOutcome::Accepted(id) = accepted else {
        panic!("refused: {accepted:?}");
    };
    assert_eq!(
        accept_at(&database, "evt_homeless", Utc::now()).await,
        InsertOutcome::Duplicate,
        "deduplicated in the default partition too"
    );
    let mut misplaced = admin::unpartitioned_rows(&mut connection)
        .await
        .expect("gauge");
    misplaced.sort();
    assert_eq!(
        misplaced,
        [
            ("receipt_payloads".to_owned(), 1),
            ("receipts".to_owned(), 1)
        ]
    );
    // Made again without moving a row under a lock: the receipts' partition starts
    // tomorrow, after the rows the default partition took; today's payloads and this
    // period's keys stay in their default partitions (retention removes them by row).
    let created = admin::ensure_history_partitions(&mut connection, None, 7)
        .await
        .expect("ensure");
    assert_eq!(created, 1, "the receipts' partition, from tomorrow");
    let tomorrow = (Utc::now() + chrono::Duration::days(1))
        .date_naive()
        .format("%Y%m%d")
        .to_string();
    let made: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM history_partitions() WHERE partition = 'receipts_' || $1",
    )
    .bind(&tomorrow)
    .fetch_one(pool)
    .await
    .expect("partitions");
    assert_eq!(made, 1);
    let (in_default, payload): (i64, Option<String>) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM receipts_default WHERE id = $1),
                (SELECT payload::text FROM receipt_payloads WHERE receipt_id = $1)",
    )
    .bind(id.0)
    .fetch_one(pool)
    .await
    .expect("where it is");
    assert_eq!(in_default, 1);
    assert_eq!(payload.as_deref(), Some(r#"{"id": "x"}"#));
    assert_eq!(
        accept_at(&database, "evt_homeless", Utc::now()).await,
        InsertOutcome::Duplicate,
        "its key still holds"
    );
    assert!(matches!(
        accept_at(&database, "evt_next", Utc::now()).await,
        InsertOutcome::Accepted(_)
    ));
}

/// A day's payloads leave by one DROP while the ingress keeps accepting: no insert fails
/// or is lost, and the pending receipts of that day keep their payloads.
#[tokio::test]
async fn a_day_leaves_while_the_ingress_writes() {
    let database = TestDatabase::create().await;
    let pool = database.pool().clone();
    // Ten days ago's partitions, holding a done receipt and a pending one.
    let past = Utc::now() - chrono::Duration::days(10);
    let mut connection = pool.acquire().await.expect("connection");
    admin::ensure_history_partitions(&mut connection, Some(past), 0)
        .await
        .expect("past partitions");
    let day = past.timestamp().div_euclid(86_400);
    let (done, pending) = (day * 10_000_000_000 + 1, day * 10_000_000_000 + 2);
    sqlx::query(
        "INSERT INTO receipts (id, integration, source_scope, event_id, event_type, route_key,
                               status, outcome, finished_at, received_at)
         VALUES ($1, 'stripe-acme', 's', 'evt_old_done', 't', 't', 'done', 'applied', $3, $3),
                ($2, 'stripe-acme', 's', 'evt_old_pending', 't', 't', 'pending', NULL, NULL, $3);
         ",
    )
    .bind(done)
    .bind(pending)
    .bind(past)
    .execute(&pool)
    .await
    .expect("old receipts");
    sqlx::query("INSERT INTO receipt_payloads VALUES ($1, '{\"old\": 1}'), ($2, '{\"old\": 2}')")
        .bind(done)
        .bind(pending)
        .execute(&pool)
        .await
        .expect("old payloads");
    sqlx::query(
        "INSERT INTO receipt_queue (receipt_id, integration, enqueued_at) VALUES ($1, 'stripe-acme', $2)",
    )
    .bind(pending)
    .bind(past)
    .execute(&pool)
    .await
    .expect("queued");

    let writers: Vec<_> = (0..4)
        .map(|writer| {
            let pool = pool.clone();
            tokio::spawn(async move {
                let scope = scope();
                let mut accepted = 0;
                for n in 0..150 {
                    let event_id = EventId::new(format!("evt_{writer}_{n}"));
                    let mut connection = pool.acquire().await.expect("connection");
                    let outcome =
                        store::insert_receipt(&mut connection, receipt(&scope, &event_id))
                            .await
                            .expect("an insert beside the drop");
                    assert!(matches!(outcome, InsertOutcome::Accepted(_)));
                    accepted += 1;
                }
                accepted
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let dropped = admin::drop_payload_days(&mut connection, 7, None)
        .await
        .expect("drop");
    let mut accepted = 0;
    for writer in writers {
        accepted += writer.await.expect("writer");
    }
    assert_eq!(accepted, 600);
    let past_day = past.date_naive();
    assert!(
        dropped
            .iter()
            .any(|dropped| dropped.first_day == past_day && dropped.carried == 1),
        "{dropped:?}"
    );
    let payloads: Vec<(i64, String)> = sqlx::query_as(
        "SELECT receipt_id, payload::text FROM receipt_payloads WHERE receipt_id < $1 ORDER BY 1",
    )
    .bind((day + 1) * 10_000_000_000)
    .fetch_all(&pool)
    .await
    .expect("payloads");
    assert_eq!(payloads, [(pending, r#"{"old": 2}"#.to_owned())]);
    let today: i64 =
        sqlx::query_scalar("SELECT count(*) FROM receipt_payloads WHERE receipt_id >= $1")
            .bind((day + 1) * 10_000_000_000)
            .fetch_one(&pool)
            .await
            .expect("count");
    assert_eq!(
        today, 600,
        "every payload accepted beside the drop is there"
    );
    let detached: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_class
         WHERE relname ~ '^receipt_payloads_[0-9]{8}$' AND relkind = 'r' AND NOT relispartition",
    )
    .fetch_one(&pool)
    .await
    .expect("detached tables");
    assert_eq!(detached, 0, "the detached day's table was dropped after it");
}

/// A lookup by id names its day, so however many days of payloads are kept, reading one
/// locks only that day's partition — also once PostgreSQL has switched the prepared
/// statement to a generic plan (PostgreSQL 15 locks every partition a generic plan names
/// before pruning, and 400 days would fill the lock table beside a few workers).
#[tokio::test]
async fn a_payload_read_locks_only_its_days_partition_however_many_days_are_kept() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let mut connection = pool.acquire().await.expect("connection");
    let created = admin::ensure_history_partitions(
        &mut connection,
        Some(Utc::now() - chrono::Duration::days(120)),
        127,
    )
    .await
    .expect("120 days of partitions");
    assert!(created > 100, "{created}");
    let InsertOutcome::Accepted(id) = accept_at(&database, "evt_read", Utc::now()).await else {
        panic!("refused");
    };
    let mut transaction = sqlx::Connection::begin(&mut *connection)
        .await
        .expect("begin");
    // Past the five custom plans after which PostgreSQL may choose a generic one.
    for _ in 0..8 {
        let shown = admin::receipt_payload_excerpt(&mut transaction, id, 100)
            .await
            .expect("read");
        assert!(matches!(shown, admin::PayloadShown::Excerpt(_)));
    }
    let locked: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
         WHERE l.pid = pg_backend_pid() AND c.relname LIKE 'receipt\\_payloads\\_%'",
    )
    .fetch_one(&mut *transaction)
    .await
    .expect("locks");
    assert!(
        locked <= 4,
        "{locked} payload partitions and indexes locked to read one payload"
    );
}

/// A worker that finishes a receipt of an old key period — recording its effect — while
/// retention drops that period: the drop waits for it, and what it committed is neither
/// lost nor turned back (before the drop took its locks first, it read what to carry,
/// then waited, and put back the receipt as it was before the worker's commit: pending
/// again, its new effect gone).
#[tokio::test]
async fn a_receipt_finished_while_its_period_is_dropped_keeps_what_its_worker_committed() {
    let database = TestDatabase::create().await;
    let pool = database.pool().clone();
    let past = Utc::now() - chrono::Duration::days(300);
    let mut connection = pool.acquire().await.expect("connection");
    admin::ensure_history_partitions(&mut connection, Some(past), 0)
        .await
        .expect("past partitions");
    // The period before it too was made: gone, so that this receipt's period is the
    // oldest, and the first the drop takes.
    sqlx::raw_sql(
        "DO $$ DECLARE p record; BEGIN
           FOR p IN SELECT partition FROM history_partitions()
                    WHERE parent <> 'receipt_payloads'
                      AND end_day <= key_period(now() - interval '300 days') LOOP
             EXECUTE format('DROP TABLE %I', p.partition);
           END LOOP;
         END $$",
    )
    .execute(&pool)
    .await
    .expect("the older period gone");
    let id = past.timestamp().div_euclid(86_400) * 10_000_000_000 + 1;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "INSERT INTO receipts (id, integration, source_scope, event_id, event_type, route_key, received_at)
         VALUES ({id}, 'stripe-acme', 's', 'evt_late', 't', 't', now() - interval '300 days');
         INSERT INTO receipt_queue (receipt_id, integration, enqueued_at) VALUES ({id}, 'stripe-acme', now());"
    )))
    .execute(&pool)
    .await
    .expect("an old pending receipt");
    // The worker's business transaction: its effect, then the receipt done and dequeued.
    let mut worker = pool.begin().await.expect("begin");
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "INSERT INTO effects (id, receipt_id, operation_key, sink, kind, tenant, data, event)
           VALUES (effect_id_for({id}), {id}, 'op-late', 'audit', 'order.paid', 'acme', '{{}}', '{{}}');
         DELETE FROM receipt_queue WHERE receipt_id = {id};
         UPDATE receipts SET status = 'done', outcome = 'applied', finished_at = now() WHERE id = {id};"
    )))
    .execute(&mut *worker)
    .await
    .expect("the worker's transaction");
    let dropping = tokio::spawn({
        let pool = pool.clone();
        async move {
            let mut connection = pool.acquire().await.expect("connection");
            admin::drop_key_periods(&mut connection, 7, None).await
        }
    });
    // Within the drop's 250 ms wait for each lock.
    tokio::time::sleep(Duration::from_millis(150)).await;
    worker.commit().await.expect("commit");
    let dropped = dropping
        .await
        .expect("task")
        .expect("the drop, once the worker committed");
    assert!(!dropped.is_empty(), "the old period was dropped");
    let kept: Option<(String, i64)> = sqlx::query_as(
        "SELECT r.status, (SELECT count(*) FROM effects e WHERE e.receipt_id = r.id)
         FROM receipts r WHERE r.id = $1",
    )
    .bind(id)
    .fetch_optional(&pool)
    .await
    .expect("the receipt");
    assert_eq!(
        kept,
        Some(("done".to_owned(), 1)),
        "carried as the worker left it: done, with the effect it recorded (still pending)"
    );
}
