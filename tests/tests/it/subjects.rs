//! Subjects and ordered routes (docs/contract.md, "Subjects", "Ordered routes"), against a
//! real database with in-process workers: one subject's receipts never run at once and run
//! in the provider's event-time order across concurrent workers, a transient failure
//! holds its subject while it waits, a failed or quarantined head holds only its own
//! subject until it is replayed or closed, and a subject's timeline lists receipts of
//! every status with their effects and decisions. The crash between claim and commit is
//! `worker_e2e::an_ordered_subject_waits_out_a_dead_workers_lease_then_runs_in_order`.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use inbound_core::config::Config;
use inbound_core::keys::ReceiptId;
use inbound_core::states::{ReceiptOutcome, ReceiptStatus};
use inbound_store::admin;
use inbound_store::handlers::{Handler, HandlerError, HandlerInput, Transition};
use inbound_tests::domain;
use inbound_worker::Worker;
use inbound_worker::test_hooks::{Round, run_once};
use serde_json::json;
use sqlx::PgPool;

/// The handler the ordered test route runs: records what ran, when, beside what.
const RECORD: &str = "test.record";
/// The route it takes (Stripe's default subject: the subscription's id).
const ROUTE: &str = "customer.subscription.updated";

#[derive(Default)]
struct Recorded {
    /// Subjects being applied now.
    running: HashSet<String>,
    /// Subjects seen applied twice at once.
    overlaps: Vec<String>,
    /// Each subject's applied `created` times, in the order they ran.
    applied: BTreeMap<String, Vec<i64>>,
    /// Event ids that fail once with a transient error.
    fail_once: HashSet<String>,
    /// Event ids quarantined.
    quarantine: HashSet<String>,
    /// An event id whose handler waits for this before it goes on.
    hold: Option<(String, Arc<tokio::sync::Notify>)>,
}

#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Recorded>>);

impl Recorder {
    fn state(&self) -> std::sync::MutexGuard<'_, Recorded> {
        self.0.lock().expect("recorder")
    }
}

impl Handler for Recorder {
    async fn apply(
        &self,
        _transaction: &mut sqlx::PgConnection,
        input: HandlerInput<'_>,
    ) -> Result<Transition, HandlerError> {
        let subject = input
            .subject
            .expect("an ordered receipt names its subject")
            .to_owned();
        assert!(input.ordered, "claimed in its subject's order");
        let created = input.payload["created"].as_i64().expect("created");
        {
            let mut state = self.state();
            if !state.running.insert(subject.clone()) {
                state.overlaps.push(subject.clone());
            }
        }
        // Long enough for another worker to claim beside it, were that possible.
        tokio::time::sleep(Duration::from_millis(15)).await;
        let hold = self
            .state()
            .hold
            .clone()
            .filter(|(event_id, _)| event_id == input.event_id);
        if let Some((_, release)) = hold {
            release.notified().await;
        }
        let mut state = self.state();
        state.running.remove(&subject);
        if state.fail_once.remove(input.event_id) {
            return Err(HandlerError::transient("the test's one transient failure"));
        }
        if state.quarantine.contains(input.event_id) {
            return Ok(Transition::Quarantine {
                reason: "the test quarantines it".to_owned(),
            });
        }
        state.applied.entry(subject).or_default().push(created);
        Ok(Transition::Applied {
            effects: Vec::new(),
        })
    }
}

/// The fixture configuration with [`ROUTE`] ordered and run by [`RECORD`].
fn ordered_config() -> Config {
    domain::config_edited(|config| {
        let mut route = toml::Table::new();
        route.insert("handler".to_owned(), RECORD.into());
        route.insert("ordered".to_owned(), true.into());
        config
            .routes("stripe-acme")
            .insert(ROUTE.to_owned(), toml::Value::Table(route));
    })
}

fn worker(pool: &PgPool, config: &Config, recorder: &Recorder, id: &str) -> Arc<Worker> {
    let mut registry = domain::stock_registry();
    registry.register(RECORD, recorder.clone());
    Arc::new(Worker::new(
        pool.clone(),
        Arc::new(config.clone()),
        registry,
        domain::settings_with(|settings| settings.worker_id(id).concurrency(4).batch_size(2)),
    ))
}

/// Accepts event `event_id` about subscription `subject`, created at `created`.
async fn accept(
    pool: &PgPool,
    config: &Config,
    event_id: &str,
    subject: &str,
    created: i64,
) -> i64 {
    let body = domain::stripe_event_at(
        event_id,
        ROUTE,
        json!({"id": subject, "object": "subscription", "status": "active"}),
        created,
    );
    domain::accept(pool, config, &body).await.expect("new")
}

/// Runs `workers` concurrently, each claiming round after round, until nothing is queued
/// or waiting but what `held` names can no longer move (or 30 s pass).
async fn run_until_settled(pool: &PgPool, workers: &[Arc<Worker>], stuck: i64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut tasks = tokio::task::JoinSet::new();
    for worker in workers {
        let (worker, pool) = (Arc::clone(worker), pool.clone());
        tasks.spawn(async move {
            while Instant::now() < deadline {
                let queued: i64 = sqlx::query_scalar("SELECT count(*) FROM receipt_queue")
                    .fetch_one(&pool)
                    .await
                    .expect("count");
                if queued <= stuck {
                    return;
                }
                if run_once(&worker).await.expect("round") == Round::Idle {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        });
    }
    tasks.join_all().await;
    assert!(Instant::now() < deadline, "the queue settled in time");
}

#[tokio::test]
async fn an_ordered_subject_runs_one_receipt_at_a_time_in_event_time_order_across_workers() {
    let database = inbound_tests::TestDatabase::create().await;
    let pool = database.pool();
    let config = ordered_config();
    let recorder = Recorder::default();
    // Four subscriptions, eight events each, accepted out of order (the order Stripe may
    // deliver them in); one fails once, so its subject waits for its retry.
    let base = 1_700_000_000;
    let arrival = [3, 7, 0, 5, 1, 6, 2, 4];
    for k in arrival {
        for subject in 0..4 {
            accept(
                pool,
                &config,
                &format!("evt_{subject}_{k}"),
                &format!("sub_{subject}"),
                base + k * 10,
            )
            .await;
        }
    }
    recorder.state().fail_once.insert("evt_0_2".to_owned());
    let workers: Vec<_> = ["w1", "w2", "w3"]
        .iter()
        .map(|id| worker(pool, &config, &recorder, id))
        .collect();
    run_until_settled(pool, &workers, 0).await;

    {
        let state = recorder.state();
        assert!(
            state.overlaps.is_empty(),
            "ran at once: {:?}",
            state.overlaps
        );
        let in_order: Vec<i64> = (0..8).map(|k| base + k * 10).collect();
        for subject in 0..4 {
            assert_eq!(
                state.applied[&format!("sub_{subject}")],
                in_order,
                "sub_{subject} ran in event-time order, its retried event holding the rest"
            );
        }
    }
    let done: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM receipts WHERE status = 'done' AND ordered AND subject LIKE 'sub_%'",
    )
    .fetch_one(pool)
    .await
    .expect("count");
    assert_eq!(done, 32);
    assert_eq!(
        sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM subject_leases WHERE leased_until > now()"
        )
        .fetch_one(pool)
        .await
        .expect("count"),
        0,
        "every subject's lease went with its head"
    );
}

/// A late event that sorts first (created earlier) arrives while its subject's head runs:
/// it is the subject's first queue row now, yet no worker takes it until the head's
/// transaction ends (the subject's lease), and then it runs. It ran after an event it
/// precedes: ordering cannot undo what already ran (docs/handlers.md keeps that guard).
#[tokio::test]
async fn a_late_event_that_sorts_first_waits_while_its_subjects_head_runs() {
    let database = inbound_tests::TestDatabase::create().await;
    let pool = database.pool();
    let config = ordered_config();
    let recorder = Recorder::default();
    let release = Arc::new(tokio::sync::Notify::new());
    recorder.state().hold = Some(("evt_head".to_owned(), Arc::clone(&release)));
    accept(pool, &config, "evt_head", "sub_1", 1_700_000_100).await;
    let (first, second) = (
        worker(pool, &config, &recorder, "w1"),
        worker(pool, &config, &recorder, "w2"),
    );
    let running = tokio::spawn({
        let first = Arc::clone(&first);
        async move { run_once(&first).await.expect("round") }
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    while !recorder.state().running.contains("sub_1") {
        assert!(Instant::now() < deadline, "the head started");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(30)).await;
    accept(pool, &config, "evt_late", "sub_1", 1_700_000_050).await;
    assert_eq!(
        run_once(&second).await.expect("round"),
        Round::Idle,
        "the late event waits while its subject runs"
    );
    release.notify_one();
    assert!(matches!(
        running.await.expect("joined"),
        Round::Processed(_)
    ));
    assert!(matches!(
        run_once(&second).await.expect("round"),
        Round::Processed(_)
    ));
    let state = recorder.state();
    assert!(state.overlaps.is_empty(), "{:?}", state.overlaps);
    assert_eq!(state.applied["sub_1"], [1_700_000_100, 1_700_000_050]);
}

/// Two claims at once, the second's snapshot older than the first's commit: the first
/// leases the head, a late event that sorts before it is committed, and the second claim
/// sees that event as the subject's head and no lease. Its `INSERT … ON CONFLICT` on the
/// subject's lease reads the latest row whatever its snapshot: it waits for the first claim
/// and then leaves the subject alone.
#[tokio::test]
async fn a_claim_whose_snapshot_missed_a_lease_still_cannot_take_the_subject() {
    let database = inbound_tests::TestDatabase::create().await;
    let pool = database.pool();
    let config = ordered_config();
    accept(pool, &config, "evt_head", "sub_1", 1_700_000_100).await;
    let mut first = pool.begin().await.expect("begin");
    let lease = Duration::from_secs(30);
    let claimed = domain::claim(&mut first, 10, lease, "first").await;
    assert_eq!(claimed.len(), 1, "the head");
    // Committed while the first claim is not: the subject's first queue row now.
    let late = accept(pool, &config, "evt_late", "sub_1", 1_700_000_050).await;
    let second = tokio::spawn({
        let pool = pool.clone();
        async move {
            let mut connection = pool.acquire().await.expect("connection");
            domain::claim(&mut connection, 10, lease, "second").await
        }
    });
    // The second claim is waiting on the first's lease row, not done.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !second.is_finished(),
        "it waits for the first claim's lease"
    );
    first.commit().await.expect("commit");
    let taken = second.await.expect("joined");
    assert!(taken.is_empty(), "the subject is leased: {taken:?}");
    assert_eq!(
        domain::receipt_state(pool, late).await.0,
        ReceiptStatus::Pending
    );
}

#[tokio::test]
async fn a_failed_head_holds_only_its_subject_until_it_is_replayed_or_closed() {
    let database = inbound_tests::TestDatabase::create().await;
    let pool = database.pool();
    let config = ordered_config();
    let recorder = Recorder::default();
    let base = 1_700_000_000;
    let mut ids = BTreeMap::new();
    for (event, subject, k) in [
        ("evt_a0", "sub_a", 0),
        ("evt_a1", "sub_a", 1),
        ("evt_a2", "sub_a", 2),
        ("evt_b0", "sub_b", 0),
        ("evt_b1", "sub_b", 1),
        ("evt_c0", "sub_c", 0),
        ("evt_c1", "sub_c", 1),
    ] {
        ids.insert(event, accept(pool, &config, event, subject, base + k).await);
    }
    recorder
        .state()
        .quarantine
        .extend(["evt_a0".to_owned(), "evt_c0".to_owned()]);
    let workers = [
        worker(pool, &config, &recorder, "w1"),
        worker(pool, &config, &recorder, "w2"),
    ];
    // a1, a2 and c1 wait behind their quarantined heads; b runs through.
    run_until_settled(pool, &workers, 3).await;
    for _ in 0..3 {
        assert_eq!(
            run_once(&workers[0]).await.expect("round"),
            Round::Idle,
            "held: nothing to claim"
        );
    }
    let state = |event: &'static str| {
        let id = ids[event];
        async move { domain::receipt_state(pool, id).await.0 }
    };
    assert_eq!(state("evt_a0").await, ReceiptStatus::Quarantined);
    assert_eq!(state("evt_a1").await, ReceiptStatus::Pending);
    assert_eq!(state("evt_a2").await, ReceiptStatus::Pending);
    assert_eq!(
        state("evt_b0").await,
        ReceiptStatus::Done,
        "another subject flows"
    );
    assert_eq!(state("evt_b1").await, ReceiptStatus::Done);
    assert_eq!(state("evt_c1").await, ReceiptStatus::Pending);
    let attempts: i64 = sqlx::query_scalar(
        "SELECT sum(attempts)::int8 FROM receipts WHERE event_id IN ('evt_a1', 'evt_a2', 'evt_c1')",
    )
    .fetch_one(pool)
    .await
    .expect("attempts");
    assert_eq!(attempts, 0, "nothing behind a held head was even tried");

    let mut connection = pool.acquire().await.expect("connection");
    let held = admin::held_subjects(&mut connection, Some("stripe-acme"), 10)
        .await
        .expect("held");
    let named: Vec<(&str, ReceiptId, i64)> = held
        .iter()
        .map(|held| (held.subject.as_str(), held.held_by, held.waiting))
        .collect();
    assert_eq!(
        named,
        [
            ("sub_a", ReceiptId(ids["evt_a0"]), 2),
            ("sub_c", ReceiptId(ids["evt_c0"]), 1)
        ]
    );
    assert_eq!(
        admin::held_counts(&mut connection, 1000)
            .await
            .expect("counts"),
        [("stripe-acme".to_owned(), 2, 3)]
    );
    // What waits behind a held subject is a person's to move, not a worker's: the age
    // that pages and scales workers does not count it.
    let ages = admin::queue_ages(&mut connection, "stripe-acme")
        .await
        .expect("ages");
    assert_eq!(ages.pending, 0.0, "{ages:?}");

    // The cause fixed, a replay releases sub_a in order; a close releases sub_c.
    recorder.state().quarantine.clear();
    admin::replay(
        &mut connection,
        &[ReceiptId(ids["evt_a0"])],
        None,
        "ops",
        "fixed",
    )
    .await
    .expect("replay");
    admin::close(
        &mut connection,
        &[ReceiptId(ids["evt_c0"])],
        None,
        "ops",
        "refunded by hand",
    )
    .await
    .expect("close");
    drop(connection);
    run_until_settled(pool, &workers, 0).await;
    let applied = recorder.state().applied.clone();
    assert_eq!(applied["sub_a"], [base, base + 1, base + 2]);
    assert_eq!(
        applied["sub_c"],
        [base + 1],
        "the closed head never ran; the rest did"
    );
    assert_eq!(
        domain::receipt_state(pool, ids["evt_c0"]).await,
        (
            ReceiptStatus::Done,
            Some(ReceiptOutcome::Closed),
            Some("refunded by hand".to_owned())
        )
    );
}

#[tokio::test]
async fn a_subjects_timeline_lists_every_status_its_effects_and_decisions_in_event_time_order() {
    let fixture = domain::Fixture::new().await;
    let (pool, config) = (fixture.pool(), &fixture.config);
    // One PaymentIntent's history: its payment, its refund, and a second payment event
    // for another amount, accepted last, quarantined and replayed (pending again).
    domain::seed_order(pool, "o1", "pi_1", 1000, "usd").await;
    let object = domain::payment_intent("pi_1", "o1", 1000, "usd", "succeeded");
    let refund = domain::stripe_event_at(
        "evt_refund",
        "charge.refunded",
        domain::order_charge("pi_1", "o1", 1000, 1000),
        1_700_000_300,
    );
    let paid = domain::stripe_event_at(
        "evt_paid",
        "payment_intent.succeeded",
        object,
        1_700_000_100,
    );
    let other = domain::stripe_event_at(
        "evt_other",
        "payment_intent.succeeded",
        domain::payment_intent("pi_1", "o1", 999, "usd", "succeeded"),
        1_700_000_200,
    );
    let paid_id = domain::accept(pool, config, &paid).await.expect("new");
    let refund_id = domain::accept(pool, config, &refund).await.expect("new");
    let worker = fixture.worker();
    while run_once(&worker).await.expect("round") != Round::Idle {}
    // Accepted last, created before the refund: quarantined (another amount than paid),
    // then replayed by a person.
    let other_id = domain::accept(pool, config, &other).await.expect("new");
    while run_once(&worker).await.expect("round") != Round::Idle {}
    assert_eq!(
        domain::receipt_state(pool, other_id).await.0,
        ReceiptStatus::Quarantined
    );
    let mut connection = pool.acquire().await.expect("connection");
    admin::replay(
        &mut connection,
        &[ReceiptId(other_id)],
        None,
        "ops",
        "look again",
    )
    .await
    .expect("replay");

    let timeline = admin::subject_timeline(&mut connection, "stripe-acme", "pi_1", 100, None)
        .await
        .expect("timeline");
    let rows: Vec<(&str, ReceiptStatus)> = timeline
        .receipts
        .iter()
        .map(|receipt| (receipt.event_id.as_str(), receipt.status))
        .collect();
    assert_eq!(
        rows,
        [
            ("evt_paid", ReceiptStatus::Done),
            ("evt_other", ReceiptStatus::Pending),
            ("evt_refund", ReceiptStatus::Done),
        ],
        "event-time order, not arrival: {rows:?}"
    );
    let paid_row = &timeline.receipts[0];
    assert_eq!(paid_row.id, ReceiptId(paid_id));
    assert_eq!(
        paid_row.effects.len(),
        1,
        "the payment's effect to the audit sink"
    );
    assert_eq!(paid_row.effects[0].kind, "order.paid");
    let other_row = &timeline.receipts[1];
    assert_eq!(other_row.decisions.len(), 1, "the replay, by its person");
    assert_eq!(other_row.decisions[0].by, "ops");
    assert!(
        timeline.held_by.is_empty(),
        "an unordered route holds nothing"
    );
    assert!(!timeline.older);
    let refund_row = &timeline.receipts[2];
    assert_eq!(refund_row.id, ReceiptId(refund_id));
    assert_eq!(refund_row.outcome, Some(ReceiptOutcome::Applied));

    // Paged back from the newest: the oldest id is left for the next page.
    let page = admin::subject_timeline(&mut connection, "stripe-acme", "pi_1", 2, None)
        .await
        .expect("page");
    assert!(page.older);
    assert_eq!(page.receipts.len(), 2);
    assert!(
        page.receipts
            .iter()
            .all(|receipt| receipt.id != ReceiptId(paid_id))
    );
    let before = page.receipts.iter().map(|receipt| receipt.id).min();
    let rest = admin::subject_timeline(&mut connection, "stripe-acme", "pi_1", 2, before)
        .await
        .expect("rest");
    assert_eq!(rest.receipts.len(), 1);
    assert!(!rest.older);
}

/// A worker that outlived its lease: another claim took its subject for a later-accepted
/// head that sorts first. The late worker's fence finds the subject's lease no longer its
/// own and loses the receipt (before, it passed and ran beside the other).
#[tokio::test]
async fn a_worker_that_outlived_its_lease_cannot_fence_a_subject_another_claim_took() {
    let database = inbound_tests::TestDatabase::create().await;
    let pool = database.pool();
    let config = ordered_config();
    accept(pool, &config, "evt_head", "sub_1", 1_700_000_100).await;
    let lease = Duration::from_secs(30);
    let mut connection = pool.acquire().await.expect("connection");
    let late = domain::claim(&mut connection, 10, lease, "late").await;
    assert_eq!(late.len(), 1);
    accept(pool, &config, "evt_first", "sub_1", 1_700_000_050).await;
    // A minute on, by the claims' clock: the late worker's lease is over.
    let later = chrono::Utc::now() + chrono::Duration::seconds(60);
    let taken = domain::claim_at(&mut connection, 10, lease, "other", Some(later)).await;
    let events: Vec<&str> = taken
        .iter()
        .map(|receipt| receipt.event_id.as_str())
        .collect();
    assert_eq!(
        events,
        ["evt_first"],
        "the subject's head, under a new lease"
    );
    let mut transaction = sqlx::Acquire::begin(&mut *connection).await.expect("begin");
    assert!(
        !inbound_store::queue::dequeue_fenced(&mut transaction, late[0].lease())
            .await
            .expect("fence"),
        "the late worker's lease is lost"
    );
    transaction.rollback().await.expect("rollback");
}

/// A worker quarantines its head while a claim, whose snapshot saw the subject free, waits
/// for the subject's lease row: the hold is written there too, at its latest, so the claim
/// takes nothing once the worker commits.
#[tokio::test]
async fn a_claim_that_waited_for_a_quarantine_sees_the_subject_held() {
    let database = inbound_tests::TestDatabase::create().await;
    let pool = database.pool();
    let config = ordered_config();
    let head = accept(pool, &config, "evt_head", "sub_1", 1_700_000_100).await;
    let lease = Duration::from_secs(30);
    let mut connection = pool.acquire().await.expect("connection");
    let claimed = domain::claim(&mut connection, 10, lease, "worker").await;
    assert_eq!(claimed[0].receipt_id, ReceiptId(head));
    accept(pool, &config, "evt_first", "sub_1", 1_700_000_050).await;
    let mut transaction = sqlx::Acquire::begin(&mut *connection).await.expect("begin");
    assert!(
        inbound_store::queue::dequeue_fenced(&mut transaction, claimed[0].lease())
            .await
            .expect("fence")
    );
    // The other claim's clock is past the worker's lease: its snapshot sees the subject
    // free and the late event as its head, and it waits for the worker's lease row.
    let later = chrono::Utc::now() + chrono::Duration::seconds(60);
    let other = tokio::spawn({
        let pool = pool.clone();
        async move {
            let mut connection = pool.acquire().await.expect("connection");
            domain::claim_at(&mut connection, 10, lease, "other", Some(later)).await
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !other.is_finished(),
        "it waits for the worker's transaction"
    );
    inbound_store::queue::finish(
        &mut transaction,
        ReceiptId(head),
        1,
        inbound_store::queue::Finish::Quarantined("the test quarantines it"),
    )
    .await
    .expect("finish");
    transaction.commit().await.expect("commit");
    let taken = other.await.expect("joined");
    assert!(taken.is_empty(), "the subject is held: {taken:?}");
}

/// The gauges' sweep removes a hold no receipt stands behind and ended leases an hour old,
/// never a hold a receipt stands behind: the subject stays held until a person decides.
#[tokio::test]
async fn the_sweep_keeps_a_hold_a_receipt_stands_behind_and_removes_one_none_does() {
    let database = inbound_tests::TestDatabase::create().await;
    let pool = database.pool();
    let config = ordered_config();
    let head = accept(pool, &config, "evt_head", "sub_held", 1_700_000_000).await;
    accept(pool, &config, "evt_next", "sub_held", 1_700_000_001).await;
    let mut connection = pool.acquire().await.expect("connection");
    inbound_store::admin::resolve_pending(
        &mut connection,
        &[ReceiptId(head)],
        inbound_store::admin::PendingResolution::Quarantine,
        "ops",
        "checking",
    )
    .await
    .expect("quarantine");
    sqlx::query(
        "INSERT INTO subject_leases (integration, subject, lease_token, leased_until) VALUES
           ('stripe-acme', 'sub_orphan', 0, 'infinity'),
           ('stripe-acme', 'sub_ended', 7, now() - interval '2 hours')",
    )
    .execute(pool)
    .await
    .expect("rows");
    let swept = admin::sweep_subject_leases(&mut connection)
        .await
        .expect("sweep");
    assert_eq!(swept, 2, "the orphaned hold and the old ended lease");
    let left: Vec<String> = sqlx::query_scalar("SELECT subject FROM subject_leases ORDER BY 1")
        .fetch_all(pool)
        .await
        .expect("left");
    assert_eq!(left, ["sub_held"]);
    let claimed = domain::claim(&mut connection, 10, Duration::from_secs(30), "w").await;
    assert!(claimed.is_empty(), "still held: {claimed:?}");
}
