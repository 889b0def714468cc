//! The real `inbound-worker` binary: several workers racing over shared orders, crash-table
//! rows 3 and 4 with real process deaths, the drain on SIGTERM, a database outage, and the
//! ops port with its queue gauges.

use std::time::{Duration, Instant};

use inbound_core::states::{ReceiptOutcome, ReceiptStatus};
use inbound_tests::domain::{self, stripe_event};
use inbound_tests::fixtures;
use inbound_tests::http::HttpClient;
use inbound_tests::proxy::{DbProxy, database_addr};
use inbound_tests::sink::TestSink;
use inbound_tests::{Service, TestDatabase, eventually};
use sqlx::PgPool;

/// Points the fixture's `audit` sink at `sink` (1 s timeout), idempotent or not.
fn with_sink(
    options: inbound_tests::ServiceOptions,
    sink: &TestSink,
    idempotent: bool,
) -> inbound_tests::ServiceOptions {
    fixtures::with_audit_sink(options, &sink.url(), idempotent)
}

fn worker_options(database_url: &str, args: &[&str]) -> inbound_tests::ServiceOptions {
    let mut options = fixtures::ingress_options(database_url);
    options.args = ["--poll-interval-ms", "50", "--gauge-interval-secs", "1"]
        .iter()
        .chain(args)
        .map(|arg| (*arg).to_owned())
        .collect();
    options
}

fn succeeded(event_id: &str, payment: &str, order: &str) -> String {
    stripe_event(
        event_id,
        "payment_intent.succeeded",
        domain::payment_intent(payment, order, 1000, "usd", "succeeded"),
    )
}

async fn count(pool: &PgPool, sql: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned()))
        .fetch_one(pool)
        .await
        .expect("count")
}

/// Polls `sql` (a count) until it equals `expected`, or panics after `limit`.
async fn wait_for_count(pool: &PgPool, sql: &str, expected: i64, limit: Duration) {
    eventually(&format!("{sql} = {expected}"), limit, async || {
        let current = count(pool, sql).await;
        if current == expected {
            Ok(())
        } else {
            Err(current)
        }
    })
    .await;
}

const ORDERS: usize = 500;

/// Orders `o0`…`o499`, each awaiting its payment `pi_…`.
async fn seed_orders(pool: &PgPool) {
    for order in 0..ORDERS {
        domain::seed_order(
            pool,
            &format!("o{order}"),
            &format!("pi_{order}"),
            1000,
            "usd",
        )
        .await;
    }
}

/// Per order: the event, a redelivery (same key: refused), and three new event ids for
/// the same payment (cross-id repeats); returns how many were accepted.
async fn accept_four_events_per_payment(pool: &PgPool) -> i32 {
    let config = domain::config();
    let mut accepted = 0;
    for order in 0..ORDERS {
        for copy in 0..4 {
            let body = succeeded(
                &format!("evt_{order}_{copy}"),
                &format!("pi_{order}"),
                &format!("o{order}"),
            );
            accepted += i32::from(domain::accept(pool, &config, &body).await.is_some());
            if copy == 0 {
                assert_eq!(
                    domain::accept(pool, &config, &body).await,
                    None,
                    "redelivery"
                );
            }
        }
    }
    accepted
}

/// Every order paid by one applied receipt, the repeats judged duplicates, one intent
/// per operation, and nothing left queued.
async fn assert_each_order_applied_once(pool: &PgPool) {
    assert_eq!(
        count(pool, "SELECT count(*) FROM orders WHERE status = 'paid'").await,
        500
    );
    assert_eq!(
        count(
            pool,
            "SELECT count(*) FROM receipts WHERE outcome = 'applied'"
        )
        .await,
        500
    );
    assert_eq!(
        count(
            pool,
            "SELECT count(*) FROM receipts WHERE outcome = 'duplicate'"
        )
        .await,
        1500
    );
    assert_eq!(
        count(pool, "SELECT count(*) FROM effects").await,
        500,
        "one intent per operation"
    );
    assert_eq!(
        count(pool, "SELECT count(DISTINCT paid_receipt_id) FROM orders").await,
        500
    );
    assert_eq!(count(pool, "SELECT count(*) FROM receipt_queue").await, 0);
}

/// At least two of the workers applied something.
fn assert_the_work_was_shared(workers: &[Service]) {
    let busy = workers
        .iter()
        .filter(|worker| {
            worker
                .logs()
                .iter()
                .any(|line| line.contains("\"outcome\":\"applied\""))
        })
        .count();
    assert!(
        busy >= 2,
        "the work was shared ({busy} workers applied something)"
    );
}

#[tokio::test]
async fn four_workers_apply_two_thousand_receipts_over_five_hundred_orders_once_each() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    seed_orders(pool).await;
    assert_eq!(accept_four_events_per_payment(pool).await, 2000);
    let workers: Vec<Service> = (0..4)
        .map(|_| Service::worker(&worker_options(database.url(), &["--concurrency", "8"])))
        .collect();
    wait_for_count(
        pool,
        "SELECT count(*) FROM receipts WHERE status = 'done'",
        2000,
        Duration::from_secs(60),
    )
    .await;
    assert_each_order_applied_once(pool).await;
    assert_the_work_was_shared(&workers);
}

/// Holds a row lock on the order in an open transaction until it is rolled back.
async fn lock_order(
    database: &TestDatabase,
    order: &str,
) -> sqlx::Transaction<'static, sqlx::Postgres> {
    let pool = inbound_tests::database::connect(database.url()).await;
    let mut lock = pool.begin().await.expect("begin");
    sqlx::query("SELECT 1 FROM orders WHERE id = $1 FOR UPDATE")
        .bind(order)
        .execute(&mut *lock)
        .await
        .expect("lock");
    lock
}

/// Waits until a worker's backend is blocked on a lock (it is inside its business transaction).
async fn wait_until_worker_blocked(pool: &PgPool) {
    wait_for_count(
        pool,
        "SELECT least(count(*), 1) FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'inbound-worker' AND wait_event_type = 'Lock'",
        1,
        Duration::from_secs(20),
    )
    .await;
}

#[tokio::test]
async fn crash_during_business_tx() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config();
    let receipt = domain::order_with_pending_payment(pool, &config).await;

    // Hold the order row so the worker blocks inside its transaction, then kill it there.
    let lock = lock_order(&database, "o1").await;
    let mut doomed = Service::worker(&worker_options(database.url(), &["--lease-secs", "2"]));
    wait_until_worker_blocked(pool).await;
    doomed.kill();
    lock.rollback().await.expect("release");

    // The dead worker's transaction rolled back: pending, queued, nothing applied.
    wait_for_count(pool, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'inbound-worker'", 0, Duration::from_secs(10)).await;
    assert_eq!(
        domain::receipt_state(pool, receipt).await.0,
        ReceiptStatus::Pending
    );
    assert_eq!(count(pool, "SELECT count(*) FROM receipt_queue").await, 1);
    assert_eq!(domain::order_status(pool, "o1").await, "awaiting_payment");
    assert_eq!(count(pool, "SELECT count(*) FROM effects").await, 0);

    // A new worker applies it once, after the lease expires.
    let started = Instant::now();
    let successor = Service::worker(&worker_options(database.url(), &["--lease-secs", "2"]));
    wait_for_count(
        pool,
        "SELECT count(*) FROM receipts WHERE status = 'done'",
        1,
        Duration::from_secs(20),
    )
    .await;
    assert!(
        started.elapsed() >= Duration::from_millis(500),
        "it waited for the lease"
    );
    assert_eq!(
        domain::receipt_state(pool, receipt).await,
        (ReceiptStatus::Done, Some(ReceiptOutcome::Applied), None)
    );
    assert_eq!(
        count(pool, "SELECT attempts::bigint FROM receipts").await,
        2
    );
    assert_eq!(count(pool, "SELECT count(*) FROM effects").await, 1);
    let metrics = HttpClient::new()
        .get(&successor.metrics_url("/metrics"))
        .await
        .expect("metrics");
    let text = String::from_utf8_lossy(&metrics.body);
    assert!(text.contains("inbound_lease_reclaims_total 1"), "{text}");
}

// The sink runs on this runtime while the test blocks waiting for the process to exit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_local_commit() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let sink = TestSink::start().await;
    let config = domain::config();
    let receipt = domain::order_with_pending_payment(pool, &config).await;
    // One claim per loop at start-up, then none for a minute: the doomed worker's
    // dispatcher must not claim (and so begin) the new effect in the instant between the
    // commit and the abort.
    let mut options = with_sink(
        fixtures::ingress_options(database.url()).with_args(&["--poll-interval-ms", "60000"]),
        &sink,
        false,
    );
    options
        .env
        .push(("INBOUND_FAILPOINT".into(), "after_business_commit".into()));
    let mut doomed = Service::worker(&options);
    doomed
        .wait_exit(Duration::from_secs(20))
        .expect("died at the failpoint");
    assert!(
        doomed
            .logs()
            .iter()
            .any(|line| line.contains("failpoint after_business_commit hit"))
    );

    // Everything local survived, committed together; the effect was not yet sent.
    assert_eq!(
        domain::receipt_state(pool, receipt).await,
        (ReceiptStatus::Done, Some(ReceiptOutcome::Applied), None)
    );
    assert_eq!(domain::order_status(pool, "o1").await, "paid");
    assert_eq!(
        domain::operation_keys(pool).await,
        ["order.paid:acme:o1:pi_1"]
    );
    assert!(sink.received().is_empty());

    // A restarted worker redoes nothing local and delivers the one intent once.
    let successor = Service::worker(&with_sink(
        worker_options(database.url(), &["--lease-secs", "1"]),
        &sink,
        false,
    ));
    wait_for_count(
        pool,
        "SELECT count(*) FROM effects WHERE status = 'completed'",
        1,
        Duration::from_secs(20),
    )
    .await;
    assert!(
        !successor
            .logs()
            .iter()
            .any(|line| line.contains("\"receipt\"")),
        "no receipt was processed again"
    );
    assert_eq!(
        count(pool, "SELECT attempts::bigint FROM receipts").await,
        1
    );
    assert_eq!(sink.received().len(), 1);
    assert_eq!(
        sink.received()[0].json()["operation_key"],
        "order.paid:acme:o1:pi_1"
    );
}

/// The sink answers, then the worker dies before recording: what happens next.
async fn crash_after_remote_success_with(idempotent: bool) -> (TestDatabase, TestSink, Service) {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let sink = TestSink::start().await;
    let config = domain::config();
    domain::order_with_pending_payment(pool, &config).await;
    let mut options = with_sink(worker_options(database.url(), &[]), &sink, idempotent);
    options
        .env
        .push(("INBOUND_FAILPOINT".into(), "after_effect_sent".into()));
    let mut doomed = Service::worker(&options);
    doomed
        .wait_exit(Duration::from_secs(20))
        .expect("died at the failpoint");
    assert_eq!(
        sink.received().len(),
        1,
        "the sink got the request: {:#?}",
        doomed.logs()
    );
    let status: String = sqlx::query_scalar("SELECT status FROM effects")
        .fetch_one(pool)
        .await
        .expect("effect");
    assert_eq!(
        status, "in_flight",
        "the attempt was committed before sending"
    );
    let successor = Service::worker(&with_sink(
        worker_options(database.url(), &[]),
        &sink,
        idempotent,
    ));
    (database, sink, successor)
}

/// Crash-table row 5: the sink answered, the worker died before recording it.
mod crash_after_remote_success {
    use super::*;

    // The sink runs on this runtime while the test blocks waiting for the process to exit.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn plain_sink_is_never_resent() {
        let (database, sink, _successor) = super::crash_after_remote_success_with(false).await;
        wait_for_count(
            database.pool(),
            "SELECT count(*) FROM effects WHERE status = 'review'",
            1,
            Duration::from_secs(20),
        )
        .await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(
            sink.received().len(),
            1,
            "the sink never sees a second request"
        );
        let outcomes: Vec<String> =
            sqlx::query_scalar("SELECT outcome FROM effect_attempts ORDER BY id")
                .fetch_all(database.pool())
                .await
                .expect("history");
        assert_eq!(outcomes, ["lost_in_flight"]);
    }

    // The sink runs on this runtime while the test blocks waiting for the process to exit.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn idempotent_sink_is_retried_with_the_same_key() {
        let (database, sink, _successor) = super::crash_after_remote_success_with(true).await;
        wait_for_count(
            database.pool(),
            "SELECT count(*) FROM effects WHERE status = 'completed'",
            1,
            Duration::from_secs(20),
        )
        .await;
        let keys: Vec<String> = sink
            .received()
            .iter()
            .map(|request| request.headers["idempotency-key"].clone())
            .collect();
        assert_eq!(keys, ["order.paid:acme:o1:pi_1", "order.paid:acme:o1:pi_1"]);
    }
}

#[tokio::test]
async fn sigterm_finishes_the_in_flight_transition_then_exits_zero() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config();
    let receipt = domain::order_with_pending_payment(pool, &config).await;
    let lock = lock_order(&database, "o1").await;
    let mut worker = Service::worker(&worker_options(
        database.url(),
        &["--shutdown-grace-secs", "10"],
    ));
    wait_until_worker_blocked(pool).await;
    worker.terminate();
    tokio::time::sleep(Duration::from_millis(300)).await;
    lock.rollback().await.expect("release");
    let status = worker
        .wait_exit(Duration::from_secs(10))
        .expect("exits after the drain");
    assert!(status.success(), "{status}");
    assert_eq!(
        domain::receipt_state(pool, receipt).await.1,
        Some(ReceiptOutcome::Applied)
    );
}

#[tokio::test]
async fn the_worker_survives_a_database_outage_and_resumes() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config();
    let proxy = DbProxy::start(database_addr(database.url())).await;
    let worker = Service::worker(&worker_options(
        &proxy.rewrite_url(database.url()),
        &["--db-acquire-timeout-ms", "300"],
    ));
    domain::seed_order(pool, "o1", "pi_1", 1000, "usd").await;
    domain::seed_order(pool, "o2", "pi_2", 1000, "usd").await;
    domain::accept(pool, &config, &succeeded("evt_1", "pi_1", "o1"))
        .await
        .expect("new");
    wait_for_count(
        pool,
        "SELECT count(*) FROM receipts WHERE status = 'done'",
        1,
        Duration::from_secs(10),
    )
    .await;

    proxy.cut();
    domain::accept(pool, &config, &succeeded("evt_2", "pi_2", "o2"))
        .await
        .expect("new");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        worker
            .logs()
            .iter()
            .any(|line| line.contains("claim failed; backing off")),
        "it noticed the outage"
    );
    // No transaction of the worker stays open across the outage.
    assert_eq!(count(pool, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'inbound-worker' AND state LIKE 'idle in transaction%'").await, 0);
    let client = HttpClient::new();
    assert_eq!(
        client
            .get_status_once(&worker.metrics_url("/readyz"), 503)
            .await,
        503
    );
    assert_eq!(
        client
            .get(&worker.metrics_url("/healthz"))
            .await
            .expect("answer")
            .status,
        200
    );

    proxy.restore();
    wait_for_count(
        pool,
        "SELECT count(*) FROM receipts WHERE status = 'done'",
        2,
        Duration::from_secs(15),
    )
    .await;
    assert_eq!(
        count(pool, "SELECT count(*) FROM orders WHERE status = 'paid'").await,
        2
    );
    assert_eq!(
        client
            .get_status_once(&worker.metrics_url("/readyz"), 200)
            .await,
        200
    );
}

/// A worker whose one receipt backs off for a minute (its order does not exist), with
/// the metrics page once its gauges show the receipt waiting; the database and the worker
/// live as long as the value.
async fn one_receipt_waiting() -> (TestDatabase, Service, HttpClient, String) {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config();
    // An order that does not exist keeps one receipt backing off.
    domain::accept(pool, &config, &succeeded("evt_1", "pi_1", "o_missing"))
        .await
        .expect("new");
    let worker = Service::worker(&worker_options(
        database.url(),
        &["--backoff-base-ms", "60000"],
    ));
    wait_for_count(
        pool,
        "SELECT count(*) FROM receipt_queue WHERE attempts = 1 AND leased_by IS NULL",
        1,
        Duration::from_secs(10),
    )
    .await;
    let client = HttpClient::new();
    let text = eventually(
        "the gauges show the waiting receipt",
        Duration::from_secs(10),
        async || {
            let metrics = client
                .get(&worker.metrics_url("/metrics"))
                .await
                .expect("metrics");
            let text = String::from_utf8_lossy(&metrics.body).into_owned();
            // The counts and the ages are set one after the other by each refresh: a
            // scrape between the two sees the new count beside the old age, so wait for
            // both.
            let waiting_age = text.lines().find_map(|line| {
                line.strip_prefix(
                    "inbound_oldest_waiting_age_seconds{integration=\"stripe-acme\"}",
                )?
                .trim()
                .parse::<f64>()
                .ok()
            });
            if text.contains("inbound_receipts{state=\"waiting\"} 1")
                && waiting_age.is_some_and(|age| age > 0.0)
            {
                Ok(text)
            } else {
                Err(text)
            }
        },
    )
    .await;
    (database, worker, client, text)
}

#[tokio::test]
async fn ops_port_serves_health_and_every_queue_gauge() {
    let (_database, worker, client, text) = one_receipt_waiting().await;
    assert_eq!(
        client
            .get(&worker.metrics_url("/healthz"))
            .await
            .expect("answer")
            .status,
        200
    );
    assert_eq!(
        client
            .get_status_once(&worker.metrics_url("/readyz"), 200)
            .await,
        200
    );
    for state in ["pending", "leased", "quarantined", "failed"] {
        assert!(
            text.contains(&format!("inbound_receipts{{state=\"{state}\"}} 0")),
            "{state}: {text}"
        );
    }
    for integration in ["stripe-acme", "gh-acme", "slack-acme", "std-acme"] {
        assert!(
            text.contains(&format!(
                "inbound_oldest_pending_age_seconds{{integration=\"{integration}\"}}"
            )),
            "{integration}: {text}"
        );
    }
    assert!(
        text.contains("inbound_oldest_pending_age_seconds{integration=\"gh-acme\"} 0"),
        "{text}"
    );
    // Every series recorded so far carries its HELP text.
    for name in [
        "inbound_oldest_pending_age_seconds",
        "inbound_receipts",
        "inbound_receipt_attempts_total",
    ] {
        assert!(text.contains(&format!("# HELP {name} ")), "{name}: {text}");
    }
}

/// The receipt backing off is not claimable: it neither pages nor scales workers, and is
/// reported on its own.
#[tokio::test]
async fn a_receipt_backing_off_is_gauged_waiting_not_pending() {
    let (_database, _worker, _client, text) = one_receipt_waiting().await;
    // The receipt backing off is not claimable: it neither pages nor scales workers (the
    // pending age is what a worker could act on now), and is reported on its own.
    let value = |series: &str| -> f64 {
        text.lines()
            .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {series}: {text}"))
    };
    assert_eq!(
        value("inbound_oldest_pending_age_seconds{integration=\"stripe-acme\"}"),
        0.0
    );
    assert!(value("inbound_oldest_waiting_age_seconds{integration=\"stripe-acme\"}") > 0.0);
    assert_eq!(
        value("inbound_oldest_waiting_age_seconds{integration=\"gh-acme\"}"),
        0.0
    );
}

#[tokio::test]
async fn effects_are_gauged_while_open_and_counted_when_they_finish() {
    let (_database, _worker, _client, text) = one_receipt_waiting().await;
    // Open states are gauged per sink; finished effects are counted as they finish (a
    // gauge of every completed effect would count the whole retention every few seconds).
    for state in ["pending", "in_flight", "uncertain", "review"] {
        assert!(
            text.contains(&format!(
                "inbound_effects{{sink=\"audit\",state=\"{state}\"}} 0"
            )),
            "{state}: {text}"
        );
    }
    for state in ["completed", "failed", "abandoned"] {
        assert!(
            !text.contains(&format!(
                "inbound_effects{{sink=\"audit\",state=\"{state}\"}}"
            )),
            "{state} is gauged: {text}"
        );
    }
    for status in ["completed", "failed"] {
        assert!(
            text.contains(&format!(
                "inbound_effects_finished_total{{sink=\"audit\",status=\"{status}\"}} 0"
            )),
            "{status}: {text}"
        );
    }
    assert!(
        text.contains("inbound_oldest_effect_age_seconds{sink=\"audit\"} 0"),
        "{text}"
    );
    assert!(
        text.contains(
            "inbound_receipt_attempts_total{integration=\"stripe-acme\",outcome=\"transient\"} 1"
        ),
        "{text}"
    );
}

#[test]
fn the_worker_refuses_a_batch_size_outside_one_to_sixty_four() {
    for size in ["0", "65"] {
        let output = std::process::Command::new(inbound_tests::process::binary("inbound-worker"))
            .args(["--config", "/nonexistent/inbound.toml"])
            .args(["--database-url", "postgres://postgres@127.0.0.1:1/unused"])
            .args(["--batch-size", size])
            .env_remove("INBOUND_BATCH_SIZE")
            .output()
            .expect("run the worker");
        assert_eq!(output.status.code(), Some(1), "--batch-size {size}");
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            said.contains("--batch-size must be between 1 and 64"),
            "--batch-size {size}: {said}"
        );
    }
}

/// `--role receipts` applies transitions and records intents but sends nothing; a
/// `--role effects` worker beside it delivers them and applies nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roles_split_receipts_from_effects() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let sink = TestSink::start().await;
    let config = domain::config();
    domain::seed_order(pool, "o1", "pi_1", 1000, "usd").await;
    let receipts_only = Service::worker(&with_sink(
        worker_options(database.url(), &["--role", "receipts"]),
        &sink,
        false,
    ));
    domain::accept(pool, &config, &succeeded("evt_r1", "pi_1", "o1"))
        .await
        .expect("new receipt");
    wait_for_count(
        pool,
        "SELECT count(*) FROM receipts WHERE status = 'done'",
        1,
        Duration::from_secs(20),
    )
    .await;
    assert_eq!(domain::order_status(pool, "o1").await, "paid");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        count(
            pool,
            "SELECT count(*) FROM effects WHERE status = 'pending'"
        )
        .await,
        1,
        "the intent waits for a dispatcher"
    );
    assert!(sink.received().is_empty());

    let effects_only = Service::worker(&with_sink(
        worker_options(database.url(), &["--role", "effects"]),
        &sink,
        false,
    ));
    domain::seed_order(pool, "o2", "pi_2", 1000, "usd").await;
    domain::accept(pool, &config, &succeeded("evt_r2", "pi_2", "o2"))
        .await
        .expect("new receipt");
    wait_for_count(
        pool,
        "SELECT count(*) FROM effects WHERE status = 'completed'",
        2,
        Duration::from_secs(20),
    )
    .await;
    assert_eq!(sink.received().len(), 2);
    // Which process applied the second payment: the receipts worker, never the dispatcher.
    let applied = |worker: &Service| {
        worker
            .logs()
            .iter()
            .any(|line| line.contains("\"event_id\":\"evt_r2\"") && line.contains("\"receipt\""))
    };
    assert!(applied(&receipts_only), "{:?}", receipts_only.logs());
    assert!(!applied(&effects_only), "{:?}", effects_only.logs());
}

/// Failed effects wait for a person (retry or abandon): the worker gauges them per sink
/// for as long as they remain, so their alert does not resolve while they wait.
#[tokio::test]
async fn failed_effects_are_gauged_until_a_person_closes_them() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    sqlx::raw_sql(
        "INSERT INTO receipts (id, integration, source_scope, event_id, event_type, route_key,
                               status, outcome)
         VALUES (1, 'stripe-acme', 's', 'evt_1', 't', 't', 'done', 'applied');
         INSERT INTO effects (id, receipt_id, operation_key, sink, kind, tenant, data, event, status)
           VALUES (1, 1, 'op-1', 'audit', 'forward', 'acme', '{}', '{}', 'failed'),
                  (2, 1, 'op-2', 'audit', 'forward', 'acme', '{}', '{}', 'failed');",
    )
    .execute(pool)
    .await
    .expect("two failed effects");
    let worker = Service::worker(&worker_options(database.url(), &[]));
    let client = HttpClient::new();
    let gauged = async |expected: &str| {
        let series = format!("inbound_effects_failed{{sink=\"audit\"}} {expected}");
        eventually(&series, Duration::from_secs(10), async || {
            let metrics = client
                .get(&worker.metrics_url("/metrics"))
                .await
                .expect("metrics");
            let text = String::from_utf8_lossy(&metrics.body).into_owned();
            if text.contains(&series) {
                Ok(())
            } else {
                Err(text)
            }
        })
        .await;
    };
    gauged("2").await;
    sqlx::query("UPDATE effects SET status = 'abandoned' WHERE operation_key = 'op-1'")
        .execute(pool)
        .await
        .expect("a person abandons one");
    gauged("1").await;
}

/// The fixture's payment and refund routes ordered (Stripe's default subject: the
/// PaymentIntent), as `config/example.toml` orders them.
fn ordered_payments(config: &mut inbound_tests::config::ConfigEdit) {
    for route in [
        "payment_intent.succeeded",
        "charge.refunded",
        "charge.refund.updated",
    ] {
        config
            .route("stripe-acme", route)
            .insert("ordered".to_owned(), true.into());
    }
}

/// Crash-table row "after an ordered head's claim, before its commit": a worker dies inside
/// the business transaction of a PaymentIntent's payment, holding the subject's lease. The
/// refund behind it (later `created`) is not run while the lease lasts — nothing of the
/// subject runs beside or before its head — and once the lease expires a new worker runs
/// the payment, then the refund, each once.
#[tokio::test]
async fn an_ordered_subject_waits_out_a_dead_workers_lease_then_runs_in_order() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config_edited(ordered_payments);
    domain::seed_order(pool, "o1", "pi_1", 1000, "usd").await;
    // The refund arrives first; the payment sorts first (Stripe's `created`).
    let refund = domain::accept(
        pool,
        &config,
        &domain::stripe_event_at(
            "evt_refund",
            "charge.refunded",
            domain::order_charge("pi_1", "o1", 1000, 1000),
            1_700_000_010,
        ),
    )
    .await
    .expect("new");
    let payment = domain::accept(
        pool,
        &config,
        &domain::stripe_event_at(
            "evt_pay",
            "payment_intent.succeeded",
            domain::payment_intent("pi_1", "o1", 1000, "usd", "succeeded"),
            1_700_000_000,
        ),
    )
    .await
    .expect("new");
    let mut options = worker_options(database.url(), &["--lease-secs", "3"]);
    let mut edit = inbound_tests::config::ConfigEdit::parse(&options.config_toml);
    ordered_payments(&mut edit);
    options.config_toml = edit.to_toml();
    let mut doomed_options = options.clone();
    doomed_options
        .env
        .push(("INBOUND_FAILPOINT".into(), "worker_in_business_tx".into()));
    let mut doomed = Service::worker(&doomed_options);
    let status = doomed
        .wait_exit(Duration::from_secs(20))
        .expect("the worker died at the failpoint");
    assert!(!status.success(), "{status}");

    // The dead worker's lease holds the subject: its head claimed once, the refund never.
    assert_eq!(
        count(
            pool,
            &format!("SELECT attempts::int8 FROM receipt_queue WHERE receipt_id = {payment}")
        )
        .await,
        1
    );
    assert_eq!(
        count(
            pool,
            &format!("SELECT attempts::int8 FROM receipt_queue WHERE receipt_id = {refund}")
        )
        .await,
        0
    );
    assert_eq!(
        count(
            pool,
            "SELECT count(*) FROM subject_leases WHERE leased_until > now()"
        )
        .await,
        1
    );

    let started = Instant::now();
    let _successor = Service::worker(&options);
    wait_for_count(
        pool,
        "SELECT count(*) FROM receipts WHERE status = 'done'",
        2,
        Duration::from_secs(30),
    )
    .await;
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "it waited for the dead worker's lease"
    );
    assert_eq!(
        domain::receipt_state(pool, payment).await,
        (ReceiptStatus::Done, Some(ReceiptOutcome::Applied), None)
    );
    assert_eq!(
        domain::receipt_state(pool, refund).await,
        (ReceiptStatus::Done, Some(ReceiptOutcome::Applied), None)
    );
    assert_eq!(domain::order_status(pool, "o1").await, "refunded");
    assert_eq!(
        count(
            pool,
            &format!("SELECT attempts::int8 FROM receipts WHERE id = {refund}")
        )
        .await,
        1,
        "the refund ran once, after its payment: it never overtook it"
    );
    assert_eq!(
        count(
            pool,
            &format!(
                "SELECT ((SELECT finished_at FROM receipts WHERE id = {refund}) > \
                 (SELECT finished_at FROM receipts WHERE id = {payment}))::int::int8"
            )
        )
        .await,
        1
    );
    assert_eq!(
        count(
            pool,
            "SELECT count(*) FROM subject_leases WHERE leased_until > now()"
        )
        .await,
        0
    );
}
