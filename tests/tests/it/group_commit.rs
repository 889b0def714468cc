//! Group commit at the ingress: one multi-row statement for many concurrent receipts,
//! each request answered from its batch — accepted or duplicate once committed, 503 for
//! every member when the batch fails.
//!
//! The HTTP tests run the ingress with one committer and stall the database through the
//! proxy, so that requests pile up behind a commit that cannot finish: what happens to
//! that pile is then deterministic.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use inbound_core::keys::{EventId, SourceScope};
use inbound_ingress::test_hooks::{
    BodyBudget, CommitError, CommitPayload, GroupCommit, GroupCommitSettings, read_body,
};
use inbound_store::{self as store, InsertOutcome, NewReceipt};
use inbound_tests::fixtures::{Provider, Variant};
use inbound_tests::http::{Answer, HttpClient};
use inbound_tests::{Stack, TestDatabase};
use tokio::task::JoinHandle;

#[tokio::test]
async fn a_batch_answers_in_order_with_duplicates_inside_and_outside_it() {
    let database = TestDatabase::create().await;
    let scope = SourceScope::from_parts(["stripe-acme", "acct_1", "live"]);
    let ids: Vec<EventId> = ["evt_old", "evt_a", "evt_b"]
        .into_iter()
        .map(EventId::new)
        .collect();
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
    let mut connection = database.pool().acquire().await.expect("connection");
    let old = store::insert_receipt(&mut connection, receipt(&scope, &ids[0]))
        .await
        .expect("insert");
    assert!(matches!(old, InsertOutcome::Accepted(_)));

    let batch = [
        receipt(&scope, &ids[1]),
        receipt(&scope, &ids[0]),
        receipt(&scope, &ids[1]),
        receipt(&scope, &ids[2]),
    ];
    let outcomes = store::insert_receipts(&mut connection, &batch)
        .await
        .expect("insert batch");
    assert!(
        matches!(outcomes[0], InsertOutcome::Accepted(_)),
        "{outcomes:?}"
    );
    assert_eq!(outcomes[1], InsertOutcome::Duplicate, "already present");
    assert_eq!(
        outcomes[2],
        InsertOutcome::Duplicate,
        "repeated in the batch"
    );
    assert!(
        matches!(outcomes[3], InsertOutcome::Accepted(_)),
        "{outcomes:?}"
    );
    assert_ne!(
        outcomes[0], outcomes[3],
        "each accepted receipt has its own id"
    );
    let queued: i64 = sqlx::query_scalar("SELECT count(*) FROM receipt_queue")
        .fetch_one(database.pool())
        .await
        .expect("count");
    assert_eq!(database.receipt_count().await, 3);
    assert_eq!(queued, 3, "every new receipt is queued with it");
    // The ids line up with the keys they were answered for.
    for (outcome, event_id) in [(outcomes[0], "evt_a"), (outcomes[3], "evt_b")] {
        let InsertOutcome::Accepted(id) = outcome else {
            unreachable!()
        };
        let stored: String = sqlx::query_scalar("SELECT event_id FROM receipts WHERE id = $1")
            .bind(id.0)
            .fetch_one(database.pool())
            .await
            .expect("receipt");
        assert_eq!(stored, event_id);
    }
}

/// The ingress with one committer, through a proxy that can stall the database.
async fn start() -> Stack {
    start_with(&["--db-statement-timeout-ms", "4000"]).await
}

/// [`start`] with other flags.
async fn start_with(args: &[&str]) -> Stack {
    let args: Vec<String> = ["--commit-concurrency", "1"]
        .iter()
        .chain(args)
        .map(|arg| (*arg).to_owned())
        .collect();
    Stack::builder()
        .through_proxy()
        .ingress(move |options| {
            options.with_args(&args.iter().map(String::as_str).collect::<Vec<_>>())
        })
        .start()
        .await
}

/// With the database stalled: the first request's commit hangs, the rest queue.
async fn pile_up(stack: &Stack, count: usize) -> Vec<tokio::task::JoinHandle<Answer>> {
    // A warm connection, so the stall catches a statement rather than a connect.
    assert_eq!(stack.deliver_event("evt_warm").await.status, 200);
    stack.proxy().stall();
    let pile = (0..count)
        .map(|index| {
            let addr = stack.ingress.addr;
            let request = Provider::Stripe.request(Variant::Routed(&format!(
                "evt_pile_{}",
                index % (count - 2)
            )));
            tokio::spawn(async move {
                request
                    .send_to(&HttpClient::new(), addr)
                    .await
                    .expect("an answer")
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    pile
}

async fn batches(stack: &Stack) -> (f64, f64) {
    let page = stack
        .client
        .get(&stack.ingress.metrics_url("/metrics"))
        .await
        .expect("metrics");
    let text = String::from_utf8_lossy(&page.body).into_owned();
    let value = |name: &str| -> f64 {
        text.lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.trim().parse().ok())
            .unwrap_or(0.0)
    };
    (
        value("inbound_ingress_commit_batch_size_count"),
        value("inbound_ingress_commit_batch_size_sum"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_waiting_behind_a_commit_share_the_next_one() {
    let stack = start().await;
    // 20 requests for 18 distinct events: two are repeats within the pile.
    let pile = pile_up(&stack, 20).await;
    stack.proxy().restore();
    let mut accepted = 0;
    let mut duplicate = 0;
    for request in pile {
        let answer = request.await.expect("request");
        assert_eq!(answer.status, 200, "{answer:?}");
        match answer.json["status"].as_str() {
            Some("accepted") => accepted += 1,
            Some("duplicate") => duplicate += 1,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!((accepted, duplicate), (18, 2));
    assert_eq!(stack.database.receipt_count().await, 19, "18 + the warm-up");
    let (statements, receipts) = batches(&stack).await;
    assert_eq!(receipts, 21.0, "every request went through a batch");
    assert!(
        statements <= 4.0,
        "the pile was committed together: {statements} statements for 21 receipts"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_batch_answers_503_to_every_member() {
    let stack = start().await;
    let pile = pile_up(&stack, 12).await;
    stack.proxy().cut();
    for request in pile {
        let answer = request.await.expect("request");
        assert_eq!(answer.status, 503, "{answer:?}");
        assert!(answer.headers.contains_key("retry-after"));
    }
    stack.proxy().restore();
    assert_eq!(stack.database.receipt_count().await, 1, "only the warm-up");
    let again = stack.deliver_event("evt_pile_0").await;
    assert_eq!(again.json["status"], "accepted", "the refused event is new");
}

/// The ingress's group commit with one committer, batching up to 64 receipts.
fn one_committer(database: &TestDatabase) -> Arc<GroupCommit> {
    Arc::new(GroupCommit::start(
        database.pool().clone(),
        GroupCommitSettings {
            max_batch: 64,
            committers: 1,
            statement_limit: Duration::from_secs(10),
        },
    ))
}

/// Reads `payload` as a request body within `budget` and commits it through `group` as
/// `event_id` of `scope`, on a task of its own.
fn spawn_commit(
    group: &Arc<GroupCommit>,
    budget: &BodyBudget,
    scope: &SourceScope,
    event_id: &str,
    payload: &'static str,
) -> JoinHandle<Result<InsertOutcome, CommitError>> {
    let (group, budget, scope) = (Arc::clone(group), budget.clone(), scope.clone());
    let event_id = EventId::new(event_id);
    tokio::spawn(async move {
        let body = read_body(Full::new(Bytes::from(payload)), None, 1 << 20, &budget)
            .await
            .expect("body");
        let receipt = NewReceipt {
            integration: "stripe-acme",
            source_scope: &scope,
            event_id: &event_id,
            event_type: "t",
            route_key: "t",
            payload_json: payload,
            content_digest: None,
            delivery_json: None,
            order: Default::default(),
        };
        group
            .commit(&receipt, CommitPayload::body(Arc::new(body)))
            .await
    })
}

/// Holds `evt_plug`'s key of `scope` in an open transaction: a committer inserting it
/// waits until the transaction ends.
async fn hold_the_plug_key(
    database: &TestDatabase,
    scope: &SourceScope,
) -> sqlx::Transaction<'static, sqlx::Postgres> {
    let mut held = database.pool().begin().await.expect("begin");
    sqlx::query(
        "INSERT INTO receipt_keys (period, source_scope, event_id, integration)
         VALUES (key_period(now()), $1, 'evt_plug', 'stripe-acme')",
    )
    .bind(scope.as_str())
    .execute(&mut *held)
    .await
    .expect("hold");
    held
}

/// The store-level guarantee behind the group commit: when PostgreSQL refuses one member's
/// data, the rest of its batch still commits and only that member is refused — as
/// unstorable (400), not unavailable. (The ingress's own validation refuses such bodies
/// first; this holds for whatever it might miss.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_postgres_refuses_fails_alone_and_the_rest_of_its_batch_commits() {
    let database = TestDatabase::create().await;
    let group = one_committer(&database);
    let budget = BodyBudget::new(1 << 20);
    let scope = SourceScope::from_parts(["stripe-acme", "acct_1", "live"]);
    let commit = |event_id: &str, payload: &'static str| {
        spawn_commit(&group, &budget, &scope, event_id, payload)
    };
    // The only committer waits on a key held here while the batch gathers behind it.
    let held = hold_the_plug_key(&database, &scope).await;
    let plug = commit("evt_plug", "{}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let good: Vec<_> = (0..5)
        .map(|n| commit(&format!("evt_good_{n}"), r#"{"fine":true}"#))
        .collect();
    let bad = commit("evt_bad", r#"{"cut":"\ud83d"}"#);
    tokio::time::sleep(Duration::from_millis(200)).await;
    held.rollback().await.expect("release");

    let plugged = plug.await.expect("task");
    assert!(
        matches!(plugged, Ok(InsertOutcome::Accepted(_))),
        "{plugged:?}"
    );
    for request in good {
        let outcome = request.await.expect("task");
        assert!(
            matches!(outcome, Ok(InsertOutcome::Accepted(_))),
            "{outcome:?}"
        );
    }
    let refused = bad.await.expect("task");
    assert!(
        matches!(refused, Err(CommitError::Unstorable(_))),
        "{refused:?}"
    );
    assert_eq!(database.receipt_count().await, 6);
    assert_eq!(
        budget.available_bytes(),
        budget.total_bytes(),
        "every body released"
    );
}

/// Until the start-up session check has passed (`--db-pooler` matches what the URL
/// reaches), the group commit commits nothing: a request waits until its deadline (then
/// 503) and no receipt is written, so an undeclared pooler never carries a receipt of ours.
#[tokio::test]
async fn nothing_is_committed_before_the_session_check_passed() {
    use inbound_runtime::sessions::SessionGate;

    let database = TestDatabase::create().await;
    let group = GroupCommit::start(
        database.pool().clone(),
        GroupCommitSettings {
            max_batch: 8,
            committers: 1,
            statement_limit: Duration::from_secs(10),
        },
    )
    .gated_by(SessionGate::closed());
    let budget = BodyBudget::new(1 << 20);
    let body = read_body(Full::new(Bytes::from_static(b"{}")), None, 1 << 20, &budget)
        .await
        .expect("body");
    let scope = SourceScope::from_parts(["stripe-acme", "acct_1", "live"]);
    let event_id = EventId::new("evt_gated");
    let answer = tokio::time::timeout(
        std::time::Duration::from_millis(500),
        group.commit(
            &NewReceipt {
                integration: "stripe-acme",
                source_scope: &scope,
                event_id: &event_id,
                event_type: "t",
                route_key: "t",
                payload_json: "{}",
                content_digest: None,
                delivery_json: None,
                order: Default::default(),
            },
            CommitPayload::body(Arc::new(body)),
        ),
    )
    .await;
    assert!(
        answer.is_err(),
        "answered before the gate opened: {answer:?}"
    );
    assert_eq!(database.receipt_count().await, 0);
}

/// A committer keeps its connection between statements without asking the pool to check
/// it. When the server behind it vanishes without a word (its address moved on, the old
/// host silent), the statement on it is given up after the statement timeout and a
/// margin, the connection dropped, and the next batch goes through a fresh one: 503s for
/// the requests caught, never a committer stuck until TCP gives up (minutes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_whose_server_vanished_is_given_up_and_replaced() {
    let stack = start_with(&[
        "--db-statement-timeout-ms",
        "1000",
        "--request-timeout-secs",
        "4",
    ])
    .await;
    assert_eq!(stack.deliver_event("evt_warm").await.status, 200);
    stack.proxy().strand_open();
    let caught = stack.deliver_event("evt_caught").await;
    assert_eq!(caught.status, 503, "{caught:?}");
    let started = std::time::Instant::now();
    let after = stack.deliver_event("evt_after").await;
    assert_eq!(
        after.status, 200,
        "a fresh connection takes the next batch: {after:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    // The caught one was never confirmed: its redelivery is accepted (or a duplicate).
    assert_eq!(stack.deliver_event("evt_caught").await.status, 200);
}

/// A server that ends the session (an operator's `pg_terminate_backend`, a fast shutdown)
/// sends a FATAL error: the committer's connection is done for, and the next batch must
/// not be tried on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_the_server_ended_is_not_used_again() {
    let stack = Stack::builder()
        .ingress(|options| options.with_args(&["--commit-concurrency", "1"]))
        .start()
        .await;
    assert_eq!(stack.deliver_event("evt_warm").await.status, 200);
    let ended: i64 = sqlx::query_scalar(
        // The sessions are chosen first (MATERIALIZED): in one WHERE clause PostgreSQL may
        // call pg_terminate_backend before it has checked the database, and end the
        // committers of tests running beside this one. The committer's last statement is
        // the receipt insert, whose text begins with its header comment
        // (crates/store/queries/receipts/insert.sql; pg_stat_activity keeps only the first
        // 1 kB, track_activity_query_size).
        "WITH chosen AS MATERIALIZED (
             SELECT pid FROM pg_stat_activity
             WHERE datname = current_database() AND application_name = 'inbound-ingress'
               AND query LIKE '-- Accepts a batch of receipts in one autocommitted statement%'
         )
         SELECT count(*) FROM chosen WHERE pg_terminate_backend(pid)",
    )
    .fetch_one(stack.pool())
    .await
    .expect("terminate the committer's session");
    assert_eq!(ended, 1);
    // The first batch after it may learn of the end (503); the one after must not.
    let first = stack.deliver_event("evt_1").await;
    assert!(matches!(first.status, 200 | 503), "{first:?}");
    assert_eq!(stack.deliver_event("evt_2").await.status, 200);
}
