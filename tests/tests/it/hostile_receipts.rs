//! The receipt path under hostile and unlucky input, through the real binaries: a verified
//! event is either stored for good or refused for good with a 4xx, and one bad delivery,
//! row or crash-looping receipt costs only itself.

use std::time::{Duration, Instant};

use inbound_core::states::ReceiptStatus;
use inbound_tests::domain::{self, stripe_event};
use std::net::SocketAddr;

use inbound_tests::fixtures::{self, Provider, Variant};
use inbound_tests::http::{Answer, HttpClient};
use inbound_tests::signing;
use inbound_tests::{Service, ServiceOptions, SignedRequest, Stack, TestDatabase, eventually};
use sqlx::PgPool;

/// A Stripe event for `stripe-acme` whose PaymentIntent carries `extra` (raw JSON text,
/// so that escapes and numbers reach the ingress exactly as written).
fn raw_stripe_event(event_id: &str, extra: &str) -> String {
    format!(
        r#"{{"id":"{event_id}","object":"event","type":"payment_intent.succeeded","account":"acct_123","livemode":true,"data":{{"object":{{"id":"pi_{event_id}","status":"succeeded","metadata":{{"order_id":"o_{event_id}"}},"extra":{extra}}}}}}}"#
    )
}

async fn send_signed(stack: &Stack, body: String) -> Answer {
    stack.deliver(&SignedRequest::stripe(body)).await
}

async fn count(pool: &PgPool, sql: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned()))
        .fetch_one(pool)
        .await
        .expect("count")
}

#[tokio::test]
async fn a_number_beyond_a_double_is_refused_with_400_instead_of_stalling_the_worker() {
    let stack = Stack::start().await;
    for (event_id, extra) in [("evt_big", "1e400"), ("evt_long", &"9".repeat(400))] {
        let answer = send_signed(&stack, raw_stripe_event(event_id, extra)).await;
        assert_eq!(answer.status, 400, "{event_id}: {answer:?}");
        assert_eq!(answer.json["error"], "malformed");
    }
    assert_eq!(stack.database.receipt_count().await, 0, "nothing stored");
    // An ordinary large number is fine.
    let fine = send_signed(&stack, raw_stripe_event("evt_fine", "1e300")).await;
    assert_eq!(fine.json["status"], "accepted", "{fine:?}");
}

#[tokio::test]
async fn escaped_backslash_u0000_is_ordinary_text_and_is_stored() {
    let stack = Stack::start().await;
    // A comment quoting C code: the six characters \u0000, which jsonb stores.
    let body = raw_stripe_event("evt_c", r#""end the string with \\u0000""#);
    let answer = send_signed(&stack, body).await;
    assert_eq!(answer.json["status"], "accepted", "{answer:?}");
    let stored: String = sqlx::query_scalar(
        "SELECT p.payload #>> '{data,object,extra}' FROM receipts r
         JOIN receipt_payloads p ON p.receipt_id = r.id WHERE r.event_id = 'evt_c'",
    )
    .fetch_one(stack.pool())
    .await
    .expect("stored");
    assert_eq!(stored, r"end the string with \u0000");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_jsonb_cannot_store_is_refused_alone_and_its_batch_commits() {
    let stack = Stack::builder()
        .through_proxy()
        .ingress(|options| options.with_args(&["--commit-concurrency", "1"]))
        .start()
        .await;
    let warm = send_signed(&stack, raw_stripe_event("evt_warm", "1")).await;
    assert_eq!(warm.status, 200, "{warm:?}");

    // With the database stalled, everything sent now waits for one batch.
    stack.proxy().stall();
    let unstorable = [
        ("evt_surrogate", r#""cut inside an emoji \ud83d""#),
        ("evt_low_surrogate", r#""\ude00""#),
        ("evt_nul", r#""\u0000""#),
        ("evt_huge_exponent", "1e1000000"),
        ("evt_tiny_exponent", "1e-1000000"),
    ];
    let mut requests = Vec::new();
    for index in 0..10 {
        let event_id = format!("evt_good_{index}");
        requests.push((event_id.clone(), raw_stripe_event(&event_id, "1")));
        if let Some((event_id, extra)) = unstorable.get(index) {
            requests.push(((*event_id).to_owned(), raw_stripe_event(event_id, extra)));
        }
    }
    let pending: Vec<_> = requests
        .into_iter()
        .map(|(event_id, body)| {
            let (client, addr) = (stack.client.clone(), stack.ingress.addr);
            let request = SignedRequest::stripe(body);
            tokio::spawn(async move {
                let answer = request.send_to(&client, addr).await.expect("an answer");
                (event_id, answer)
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    stack.proxy().restore();
    for request in pending {
        let (event_id, answer) = request.await.expect("request");
        if event_id.starts_with("evt_good") {
            assert_eq!(answer.json["status"], "accepted", "{event_id}: {answer:?}");
        } else {
            assert_eq!(answer.status, 400, "{event_id}: {answer:?}");
            assert_eq!(answer.json["error"], "malformed", "{event_id}");
        }
    }
    assert_eq!(
        stack.database.receipt_count().await,
        11,
        "the ten good ones and the warm-up"
    );
}

/// A queued receipt of `event_id` whose payload is `extra` inside a Stripe event, stored
/// as an ingress without the storability contract stored it (straight into `jsonb`): its id.
async fn stored_without_the_storability_contract(
    pool: &PgPool,
    event_id: &str,
    extra: &str,
) -> i64 {
    sqlx::query_scalar(
        "WITH stored AS (
             INSERT INTO receipts (integration, source_scope, event_id, event_type, route_key)
             VALUES ('stripe-acme', 'stripe-acme/acct_123/live', $1,
                     'payment_intent.succeeded', 'payment_intent.succeeded')
             RETURNING id, integration, received_at
         ), payload AS (
             INSERT INTO receipt_payloads (receipt_id, payload) SELECT id, $2::jsonb FROM stored
         ), queued AS (
             INSERT INTO receipt_queue (receipt_id, integration, visible_at, enqueued_at)
             SELECT id, integration, received_at, received_at FROM stored
         )
         SELECT id FROM stored",
    )
    .bind(event_id)
    .bind(raw_stripe_event(event_id, extra))
    .fetch_one(pool)
    .await
    .expect("stored as before the contract")
}

/// Orders `o0`… awaiting 1000 usd and an accepted payment of each: the neighbours a bad
/// receipt must not hold up.
async fn neighbours_awaiting_payment(
    pool: &PgPool,
    config: &inbound_core::config::Config,
    count: usize,
) {
    for n in 0..count {
        let (order, payment) = (format!("o{n}"), format!("pi_{n}"));
        domain::seed_order(pool, &order, &payment, 1000, "usd").await;
        let body = stripe_event(
            &format!("evt_{n}"),
            "payment_intent.succeeded",
            domain::payment_intent(&payment, &order, 1000, "usd", "succeeded"),
        );
        domain::accept(pool, config, &body).await.expect("new");
    }
}

fn worker_options(database_url: &str, args: &[&str]) -> ServiceOptions {
    let mut options = fixtures::ingress_options(database_url);
    options.args = ["--poll-interval-ms", "50"]
        .iter()
        .chain(args)
        .map(|arg| (*arg).to_owned())
        .collect();
    options
}

#[tokio::test]
async fn a_stored_payload_the_worker_cannot_decode_is_quarantined_alone() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config();
    // As an ingress without the storability contract stored it: jsonb keeps 1e400 as a
    // 401-digit integer, which no double holds.
    let poison = stored_without_the_storability_contract(pool, "evt_poison", "1e400").await;
    neighbours_awaiting_payment(pool, &config, 10).await;

    let _worker = Service::worker(&worker_options(database.url(), &[]));
    eventually(
        "every receipt finished",
        Duration::from_secs(20),
        async || {
            (count(
                pool,
                "SELECT count(*) FROM receipts WHERE status = 'pending'",
            )
            .await
                == 0)
                .then_some(())
        },
    )
    .await;
    assert_eq!(
        count(pool, "SELECT count(*) FROM orders WHERE status = 'paid'").await,
        10,
        "its neighbours were applied"
    );
    let (status, _, reason) = domain::receipt_state(pool, poison).await;
    assert_eq!(status, ReceiptStatus::Quarantined);
    let reason = reason.expect("a reason");
    assert!(reason.contains("cannot be decoded"), "{reason}");

    // An operator can read it.
    let shown = inbound_tests::ctl::Inboundctl::new()
        .database(database.url())
        .run(&["receipts", "show", &poison.to_string(), "--json"]);
    assert!(shown.status.success(), "{shown:?}");
    // Valid JSON (checked without reading numbers, which no double holds), with the
    // payload exactly as stored.
    let shown = String::from_utf8(shown.stdout).expect("UTF-8");
    serde_json::from_str::<&serde_json::value::RawValue>(shown.trim()).expect("JSON");
    assert!(shown.contains(r#""event_id":"evt_poison""#), "{shown}");
    assert!(shown.contains(&format!("1{}", "0".repeat(400))), "{shown}");
}

#[tokio::test]
async fn a_receipt_that_kills_its_worker_every_time_ends_failed_after_max_attempts() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config();
    let receipt = domain::order_with_pending_payment(pool, &config).await;
    let mut options = worker_options(
        database.url(),
        &["--lease-secs", "1", "--max-attempts", "3"],
    );
    options.env.push((
        "INBOUND_FAILPOINT".to_owned(),
        "worker_in_business_tx".to_owned(),
    ));

    let mut deaths = 0;
    for _start in 0..6 {
        let (status, _, _) = domain::receipt_state(pool, receipt).await;
        if status == ReceiptStatus::Failed {
            break;
        }
        let mut worker = Service::worker(&options);
        // Each start either dies in the business transaction or, once the attempts are
        // spent, fails the receipt in its claim and lives on.
        let started = Instant::now();
        loop {
            if worker.wait_exit(Duration::from_millis(100)).is_some() {
                deaths += 1;
                break;
            }
            let (status, _, _) = domain::receipt_state(pool, receipt).await;
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "the worker neither died nor finished the receipt"
            );
            if status == ReceiptStatus::Failed {
                break;
            }
        }
    }
    let (status, attempts, last_error): (String, i32, Option<String>) =
        sqlx::query_as("SELECT status, attempts, last_error FROM receipts WHERE id = $1")
            .bind(receipt)
            .fetch_one(pool)
            .await
            .expect("receipt");
    assert_eq!(status, "failed", "{attempts} attempts, {deaths} deaths");
    assert_eq!((attempts, deaths), (3, 3));
    let last_error = last_error.expect("why");
    assert!(
        last_error.contains("never recorded an outcome"),
        "{last_error}"
    );
    assert_eq!(
        count(pool, "SELECT count(*) FROM receipt_queue").await,
        0,
        "it left the queue"
    );
}

/// Sends Stripe events with these ids to the ingress at `addr` one after another (each
/// request starts before the next), without waiting for answers.
fn send_in_order(
    client: &HttpClient,
    addr: SocketAddr,
    event_ids: Vec<String>,
) -> tokio::task::JoinHandle<Vec<Answer>> {
    let client = client.clone();
    tokio::spawn(async move {
        let mut requests = Vec::new();
        for event_id in event_ids {
            let request = Provider::Stripe.request(Variant::Routed(&event_id));
            let client = client.clone();
            requests.push(tokio::spawn(async move {
                request.send_to(&client, addr).await.expect("an answer")
            }));
            tokio::time::sleep(Duration::from_millis(3)).await;
        }
        let mut answers = Vec::new();
        for request in requests {
            answers.push(request.await.expect("request"));
        }
        answers
    })
}

/// Holds the receipt keys of `event_ids` uncommitted in a transaction of its own, so that
/// whoever inserts them waits for it.
async fn hold_keys(
    database: &TestDatabase,
    event_ids: &[&str],
) -> sqlx::Transaction<'static, sqlx::Postgres> {
    let mut transaction = database.pool().begin().await.expect("begin");
    for event_id in event_ids {
        sqlx::query(
            "INSERT INTO receipt_keys (period, source_scope, event_id, integration)
             VALUES (key_period(now()), 'stripe-acme/acct_123/live', $1, 'stripe-acme')",
        )
        .bind(event_id)
        .execute(&mut *transaction)
        .await
        .expect("hold the key");
    }
    transaction
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_ingresses_committing_the_same_keys_in_opposite_orders_never_deadlock() {
    let stack = Stack::builder()
        .ingress(|options| options.with_args(&["--commit-concurrency", "1"]))
        .start()
        .await;
    let second = Service::ingress(&stack.options().with_args(&["--commit-concurrency", "1"]));
    let (first, client) = (&stack.ingress, &stack.client);
    for round in 0..3 {
        // Each ingress's only committer waits on a key held here, while forty receipts
        // queue behind it: the same keys, in opposite orders. Released together, the two
        // batches insert the same keys at the same time.
        let plugs = [format!("evt_plug_a_{round}"), format!("evt_plug_b_{round}")];
        let held = hold_keys(&stack.database, &[&plugs[0], &plugs[1]]).await;
        let plug_first = send_in_order(client, first.addr, vec![plugs[0].clone()]);
        let plug_second = send_in_order(client, second.addr, vec![plugs[1].clone()]);
        tokio::time::sleep(Duration::from_millis(200)).await;
        let keys: Vec<String> = (0..40).map(|n| format!("evt_{round}_{n:02}")).collect();
        let reversed: Vec<String> = keys.iter().rev().cloned().collect();
        let forward = send_in_order(client, first.addr, keys);
        let backward = send_in_order(client, second.addr, reversed);
        tokio::time::sleep(Duration::from_millis(400)).await;
        held.rollback().await.expect("release");
        let mut answers = Vec::new();
        for requests in [plug_first, plug_second, forward, backward] {
            answers.extend(requests.await.expect("requests"));
        }
        for answer in &answers {
            assert_eq!(answer.status, 200, "round {round}: {answer:?}");
        }
        let accepted = answers
            .iter()
            .filter(|answer| answer.json["status"] == "accepted")
            .count();
        assert_eq!(accepted, 42, "round {round}: each key accepted once");
    }
    // Not merely rescued by committing members one by one after a deadlock: none happened.
    for ingress in [first, &second] {
        let rescued: Vec<String> = ingress
            .logs()
            .into_iter()
            .filter(|line| line.contains("one by one") || line.contains("deadlock"))
            .collect();
        assert!(rescued.is_empty(), "{rescued:#?}");
    }
}

#[tokio::test]
async fn github_scope_comes_from_the_signed_body_and_content_dedupe_stops_replays() {
    let stack = Stack::builder()
        .ingress(|mut options| {
            options.config_toml.push_str(
                r#"
[[integration]]
id = "gh-dedupe"
provider = "github"
tenant = "acme"
secrets = ["env:TEST_GITHUB_SECRET"]
content_dedupe = true
content_type = "json"
expect = { repository_id = "42" }
[integration.routes]
"push" = { handler = "forward", sink = "audit" }
"pull_request" = { handler = "forward", sink = "audit" }
"#,
            );
            options
        })
        .start()
        .await;
    let send =
        |integration: &'static str, delivery: &str, event: &str, target: &str, body: &str| {
            let headers =
                signing::github_headers(fixtures::GITHUB_SECRET, body, delivery, event, target);
            let (stack, request) = (
                &stack,
                SignedRequest::new(integration, headers, body.to_owned()),
            );
            async move { stack.deliver(&request).await }
        };

    // A body signed for repository 7 does not pass as repository 42 by its header.
    let foreign = r#"{"ref":"refs/heads/main","repository":{"id":7}}"#;
    let answer = send("gh-acme", "d-foreign", "push", "42", foreign).await;
    assert_eq!(
        answer.json,
        serde_json::json!({"status": "ignored"}),
        "out of scope: acknowledged, not stored: {answer:?}"
    );
    assert_eq!(stack.database.receipt_count().await, 0);

    // One signed body, replayed under fresh delivery ids and another event name.
    let body = r#"{"ref":"refs/heads/main","repository":{"id":42},"head_commit":{"id":"abc"}}"#;
    let first = send("gh-dedupe", "d-1", "push", "42", body).await;
    assert_eq!(first.json["status"], "accepted", "{first:?}");
    for (delivery, event) in [("d-2", "push"), ("d-3", "pull_request")] {
        let replay = send("gh-dedupe", delivery, event, "42", body).await;
        assert_eq!(replay.json["status"], "duplicate", "{delivery}: {replay:?}");
    }
    // Without content_dedupe, the delivery id alone is the key (documented).
    let plain_first = send("gh-acme", "d-1", "push", "42", body).await;
    let plain_again = send("gh-acme", "d-2", "push", "42", body).await;
    assert_eq!(
        (
            plain_first.json["status"].as_str(),
            plain_again.json["status"].as_str()
        ),
        (Some("accepted"), Some("accepted"))
    );

    // An unsigned header too long for any index is refused alone, not in a batch.
    let huge_target = "9".repeat(6_000);
    let refused = send("gh-acme", "d-huge", "push", &huge_target, body).await;
    assert_eq!(refused.status, 400, "{refused:?}");
    let scopes: Vec<String> = sqlx::query_scalar("SELECT source_scope FROM receipts ORDER BY id")
        .fetch_all(stack.pool())
        .await
        .expect("scopes");
    assert_eq!(
        scopes,
        [
            "gh-dedupe/repository:42",
            "gh-acme/repository:42",
            "gh-acme/repository:42"
        ]
    );
}

/// Stored before the contract bounded how much longer numbers may grow when written out:
/// a payload of 28 KB that PostgreSQL would render as more than 1 GB. Reading it fails
/// inside PostgreSQL; that must cost only its own receipt, never the claim of its
/// neighbours, and an operator can still look at the receipt.
#[tokio::test]
async fn a_stored_payload_postgres_cannot_render_is_quarantined_alone() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config();
    let numbers = vec!["1e-16383"; 66_000].join(",");
    let amplified =
        stored_without_the_storability_contract(pool, "evt_amplified", &format!("[{numbers}]"))
            .await;
    neighbours_awaiting_payment(pool, &config, 3).await;

    let _worker = Service::worker(&worker_options(database.url(), &[]));
    // A bound, not a timing: rendering the amplified payload takes seconds alone and
    // several times that beside the rest of the suite on two cores.
    eventually(
        "every receipt finished",
        Duration::from_secs(90),
        async || {
            (count(
                pool,
                "SELECT count(*) FROM receipts WHERE status = 'pending'",
            )
            .await
                == 0)
                .then_some(())
        },
    )
    .await;
    assert_eq!(
        count(pool, "SELECT count(*) FROM orders WHERE status = 'paid'").await,
        3,
        "its neighbours were applied"
    );
    let (status, _, reason) = domain::receipt_state(pool, amplified).await;
    assert_eq!(status, ReceiptStatus::Quarantined);
    let reason = reason.expect("a reason");
    assert!(reason.contains("cannot be read"), "{reason}");

    let shown = inbound_tests::ctl::Inboundctl::new()
        .database(database.url())
        .run(&["receipts", "show", &amplified.to_string()]);
    assert!(shown.status.success(), "{shown:?}");
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.contains("payload      (cannot be rendered"),
        "{shown}"
    );
}

/// GitHub signs the body, never its `Content-Type`: the header does not choose how the
/// signed bytes are read (red team 2026-12-05, F4). A JSON body carrying
/// `&payload=<another event>&` in a title, signed as the JSON hook sent it and re-sent
/// declared as a form under a fresh delivery id, is refused by the JSON hook (415); a
/// form hook refuses that JSON body (400: a form is exactly one `payload` field, never
/// searched for one) and a delivery declared JSON (415). Only what each hook really sent
/// is stored.
#[tokio::test]
async fn a_github_body_is_read_only_as_its_hook_sends_it() {
    let stack = Stack::builder()
        .ingress(|mut options| {
            options.config_toml.push_str(
                r#"
[[integration]]
id = "gh-form"
provider = "github"
tenant = "acme"
secrets = ["env:TEST_GITHUB_SECRET"]
expect = { repository_id = "42" }
[integration.routes]
"pull_request.opened" = { handler = "forward", sink = "audit" }
"#,
            );
            options
        })
        .start()
        .await;
    let inner = r#"{"action":"opened","pull_request":{"title":"SMUGGLED"},"repository":{"id":42}}"#;
    let outer = format!(
        r#"{{"action":"opened","pull_request":{{"title":"x&payload={}&y"}},"repository":{{"id":42}}}}"#,
        urlencoding::encode(inner)
    );
    let form = format!("payload={}", urlencoding::encode(inner));
    let declared = |integration: &'static str, delivery: &str, content_type: &str, body: &str| {
        let mut headers = signing::github_headers(
            fixtures::GITHUB_SECRET,
            body,
            delivery,
            "pull_request",
            "42",
        );
        headers.retain(|(name, _)| name != "content-type");
        SignedRequest::new(integration, headers, body.to_owned())
            .with_header("content-type", content_type)
    };
    let json = "application/json";
    let form_type = "application/x-www-form-urlencoded";
    let answers = [
        stack
            .deliver(&declared("gh-acme", "d-json", json, &outer))
            .await,
        stack
            .deliver(&declared("gh-acme", "d-as-form", form_type, &outer))
            .await,
        stack
            .deliver(&declared("gh-form", "d-json-as-form", form_type, &outer))
            .await,
        stack
            .deliver(&declared("gh-form", "d-declared-json", json, &form))
            .await,
        stack
            .deliver(&declared("gh-form", "d-form", form_type, &form))
            .await,
    ];
    let statuses: Vec<u16> = answers.iter().map(|answer| answer.status).collect();
    assert_eq!(statuses, [200, 415, 400, 415, 200], "{answers:#?}");
    let stored: Vec<(String, String, serde_json::Value)> = sqlx::query_as(
        "SELECT r.event_id, r.source_scope, p.payload FROM receipts r
             JOIN receipt_payloads p ON p.receipt_id = r.id ORDER BY r.id",
    )
    .fetch_all(stack.pool())
    .await
    .expect("receipts");
    let parsed = |text: &str| serde_json::from_str::<serde_json::Value>(text).expect("json");
    assert_eq!(
        stored,
        [
            (
                "d-json".to_owned(),
                "gh-acme/repository:42".to_owned(),
                parsed(&outer)
            ),
            (
                "d-form".to_owned(),
                "gh-form/repository:42".to_owned(),
                parsed(inner)
            ),
        ]
    );
}
