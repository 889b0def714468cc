//! The dispatcher against a real HTTP sink, driven step by step: every outcome rule for
//! sinks with and without idempotency support, reconciliation answers, an attempt lost in
//! flight, the request's shape and signature, and one delivery per business operation.

use std::time::Duration;

use inbound_core::config::Config;
use inbound_core::headers::Headers;
use inbound_core::provider;
use inbound_core::states::EffectStatus;
use inbound_core::verify::{self, Provider, VerifyContext};
use inbound_tests::dispatcher::Harness;
use inbound_tests::domain::{self, payment_intent, stripe_event};
use inbound_tests::sink::{Answer, TestSink};

const SINK_SECRET: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";

fn config(sink: &TestSink) -> Config {
    let text = format!(
        r#"
[[integration]]
id = "stripe-acme"
provider = "stripe"
tenant = "acme"
secrets = ["env:S"]
expect = {{ account = "acct_123", livemode = true }}
[integration.routes]
"payment_intent.succeeded" = {{ handler = "orders.mark_paid", sink = "idem" }}

[[sink]]
id = "idem"
url = "{url}"
idempotency_header = "Idempotency-Key"
status_url = "{status}"
secrets = ["env:SINK_SECRET"]
timeout_secs = 1
max_concurrency = 8

[[sink]]
id = "idem_late"
url = "{url}"
idempotency_header = "Idempotency-Key"
idempotency_retention_secs = 0
timeout_secs = 1

[[sink]]
id = "plain"
url = "{url}"
timeout_secs = 1

[[sink]]
id = "plain_reconcilable"
url = "{url}"
status_url = "{status}"
timeout_secs = 1

[[sink]]
id = "unreachable"
url = "http://127.0.0.1:1/effects"
timeout_secs = 1
"#,
        url = sink.url(),
        status = sink.status_url()
    );
    Config::from_toml(&text, &|name| match name {
        "S" => Some("whsec_stripe".to_owned()),
        "SINK_SECRET" => Some(SINK_SECRET.to_owned()),
        _ => None,
    })
    .expect("dispatcher test config")
}

async fn start() -> Harness {
    let settings = domain::settings_with(|settings| settings.backoff_base(Duration::from_secs(2)));
    Harness::start(config, settings).await
}

#[tokio::test]
async fn success_completes_with_the_key_the_body_and_a_verifiable_signature() {
    let harness = start().await;
    harness.intent("idem", "order.paid:acme:o1").await;
    harness.step().await;
    assert_eq!(
        harness.effect("order.paid:acme:o1").await.0,
        EffectStatus::Completed
    );
    let received = harness.sink.received();
    assert_eq!(received.len(), 1);
    let request = &received[0];
    assert_eq!(request.headers["idempotency-key"], "order.paid:acme:o1");
    assert_eq!(request.headers["content-type"], "application/json");
    let body = request.json();
    assert_eq!(body["operation_key"], "order.paid:acme:o1");
    assert_eq!(body["kind"], "order.paid");
    assert_eq!(
        (body["tenant"].as_str(), body["sink"].as_str()),
        (Some("acme"), Some("idem"))
    );
    assert_eq!(body["data"]["order_id"], "o");
    assert_eq!(
        body["event"],
        serde_json::json!({"integration": "stripe-acme", "id": "evt", "type": "payment_intent.succeeded"})
    );
    // The signature verifies with our own verifier, as a receiver would check it.
    assert_eq!(request.headers["webhook-id"], "order.paid:acme:o1");
    let headers: Headers = request
        .headers
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_bytes()))
        .collect();
    let key = verify::decode_standard_secret(SINK_SECRET).expect("secret");
    let now = chrono::Utc::now().timestamp();
    let context = VerifyContext {
        secrets: std::slice::from_ref(&key),
        public_keys: &[],
        tolerance_secs: 300,
        now_unix_secs: now,
    };
    assert_eq!(
        provider::verify(Provider::Standard, &headers, &request.body, context),
        Ok(())
    );
    // The unsigned sink sends no signature headers.
    harness.intent("plain", "plain:1").await;
    harness.step().await;
    assert!(
        !harness.sink.received()[1]
            .headers
            .contains_key("webhook-signature")
    );
    assert!(
        !harness.sink.received()[1]
            .headers
            .contains_key("idempotency-key")
    );
}

#[tokio::test]
async fn outcomes_recorded_together_each_keep_their_own_answer() {
    let harness = start().await;
    harness.sink.script(
        [Answer::Status(200), Answer::Status(503)]
            .into_iter()
            .cycle()
            .take(8),
    );
    for n in 0..8 {
        harness.intent("idem", &format!("k{n}")).await;
    }
    let steps = harness.step().await;
    assert_eq!(steps.len(), 8);
    assert!(steps.iter().all(|step| step.recorded), "{steps:?}");
    // Which effect met which answer depends on the order the requests arrived in; each
    // effect's row and its attempt's history row must tell the same story.
    // (status, last_status_code, the attempt's status_code, its outcome, whether it closed)
    type EffectAndAttempt = (String, Option<i32>, Option<i32>, Option<String>, bool);
    let rows: Vec<EffectAndAttempt> = sqlx::query_as(
        "SELECT e.status, e.last_status_code, a.status_code, a.outcome, a.finished_at IS NOT NULL
         FROM effects e JOIN effect_attempts a ON a.effect_id = e.id ORDER BY e.id",
    )
    .fetch_all(harness.pool())
    .await
    .expect("effects");
    assert_eq!(rows.len(), 8, "one attempt each: {rows:?}");
    for (status, last_code, attempt_code, outcome, finished) in &rows {
        assert!(finished, "{rows:?}");
        assert_eq!(last_code, attempt_code, "{rows:?}");
        match attempt_code {
            Some(200) => {
                assert_eq!(
                    (status.as_str(), outcome.as_deref()),
                    ("completed", Some("completed"))
                )
            }
            Some(503) => assert_eq!(status, "pending", "{rows:?}"),
            other => panic!("unexpected answer {other:?}: {rows:?}"),
        }
    }
    let completed = rows.iter().filter(|row| row.0 == "completed").count();
    assert_eq!(completed, 4, "{rows:?}");
}

#[tokio::test]
async fn rejection_fails_for_every_sink() {
    let harness = start().await;
    harness
        .sink
        .script([Answer::Status(422), Answer::Status(400)]);
    harness.intent("idem", "a").await;
    harness.step().await;
    harness.intent("plain", "b").await;
    harness.step().await;
    assert_eq!(harness.effect("a").await.0, EffectStatus::Failed);
    assert_eq!(harness.effect("b").await.0, EffectStatus::Failed);
}

#[tokio::test]
async fn idempotent_sink_retries_with_the_same_key_within_retention_and_honours_retry_after() {
    let harness = start().await;
    harness.sink.script([
        Answer::Status(503),
        Answer::Cut,
        Answer::Hang,
        Answer::RetryAfter(429, 30),
    ]);
    harness.intent("idem", "k").await;
    for expected_attempt in 1..=4 {
        harness.step().await;
        let (status, attempts, _, due_in) = harness.effect("k").await;
        assert_eq!(
            (status.as_str(), attempts),
            ("pending", expected_attempt),
            "attempt {expected_attempt}"
        );
        if expected_attempt == 4 {
            assert!(due_in > 25.0, "Retry-After: 30 honoured, due in {due_in}");
        }
        harness.expedite().await;
    }
    harness.step().await;
    assert_eq!(harness.effect("k").await.0, EffectStatus::Completed);
    let keys: Vec<String> = harness
        .sink
        .received()
        .iter()
        .map(|request| request.headers["idempotency-key"].clone())
        .collect();
    assert_eq!(keys, ["k"; 5], "every attempt carried the same key");
}

#[tokio::test]
async fn idempotent_sink_past_retention_is_not_resent() {
    let harness = start().await;
    harness.sink.script([Answer::Status(500)]);
    harness.intent("idem_late", "late").await;
    harness.step().await;
    let (status, _, maybe_delivered, _) = harness.effect("late").await;
    assert_eq!((status.as_str(), maybe_delivered), ("review", true));
    assert_eq!(harness.sink.received().len(), 1);
}

#[tokio::test]
async fn plain_sink_never_resends_what_may_have_landed() {
    let harness = start().await;
    harness.sink.script([
        Answer::Status(502),
        Answer::Cut,
        Answer::Hang,
        Answer::Status(503),
    ]);
    for key in ["p1", "p2", "p3"] {
        harness.intent("plain", key).await;
        harness.step().await;
        let (status, attempts, maybe_delivered, _) = harness.effect(key).await;
        assert_eq!(
            (status.as_str(), attempts, maybe_delivered),
            ("review", 1, true),
            "{key}"
        );
    }
    harness.intent("plain_reconcilable", "p4").await;
    harness.step().await;
    assert_eq!(
        harness.effect("p4").await.0,
        EffectStatus::Uncertain,
        "reconcilable: asks instead of resending"
    );
    harness.expedite().await;
    harness.step().await;
    assert_eq!(harness.sink.received().len(), 4, "nothing was sent twice");
}

#[tokio::test]
async fn a_request_that_never_left_is_retried_for_every_sink() {
    let harness = start().await;
    harness.intent("unreachable", "u").await;
    harness.step().await;
    let (status, attempts, maybe_delivered, due_in) = harness.effect("u").await;
    assert_eq!(
        (status.as_str(), attempts, maybe_delivered),
        ("pending", 1, false)
    );
    assert!(due_in > 0.5, "backing off: {due_in}");
    let error: String = sqlx::query_scalar("SELECT error FROM effect_attempts WHERE attempt = 1")
        .fetch_one(harness.pool())
        .await
        .expect("attempt history");
    assert!(!error.is_empty());
}

#[tokio::test]
async fn uncertain_effects_are_reconciled_through_status_url() {
    let harness = start().await;
    harness
        .sink
        .script(std::iter::repeat_n(Answer::Status(500), 4));
    for key in ["done", "broken", "waiting", "unknown"] {
        harness.intent("plain_reconcilable", key).await;
    }
    harness.step().await;
    for key in ["done", "broken", "waiting", "unknown"] {
        assert_eq!(
            harness.effect(key).await.0,
            EffectStatus::Uncertain,
            "{key}"
        );
    }
    harness
        .sink
        .set_operation("done", 200, r#"{"status":"completed"}"#);
    harness
        .sink
        .set_operation("broken", 200, r#"{"status":"failed"}"#);
    harness
        .sink
        .set_operation("waiting", 200, r#"{"status":"pending"}"#);
    harness.expedite().await;
    harness.step().await;
    assert_eq!(harness.effect("done").await.0, EffectStatus::Completed);
    assert_eq!(harness.effect("broken").await.0, EffectStatus::Failed);
    let (status, _, _, due_in) = harness.effect("waiting").await;
    assert!(
        status == EffectStatus::Uncertain && due_in > 0.5,
        "asks again later: {status} {due_in}"
    );
    assert_eq!(
        harness.effect("unknown").await.0,
        EffectStatus::Review,
        "not found, not idempotent: a person decides"
    );
    assert_eq!(
        harness.sink.received().len(),
        4,
        "reconciliation never re-sends"
    );

    // An idempotent sink that does not know the key, within retention: send it again.
    harness.sink.script([Answer::Status(500)]);
    harness.intent("idem", "idem-unknown").await;
    sqlx::query("UPDATE effects SET status = 'uncertain', maybe_delivered = true WHERE operation_key = 'idem-unknown'")
        .execute(harness.pool())
        .await
        .expect("make uncertain");
    harness.step().await;
    assert_eq!(
        harness.effect("idem-unknown").await.0,
        EffectStatus::Pending
    );
}

#[tokio::test]
async fn an_attempt_lost_in_flight_is_judged_as_a_timeout() {
    let harness = start().await;
    harness.intent("idem", "lost-idem").await;
    harness.intent("plain", "lost-plain").await;
    // As if a worker had committed the attempts, sent them and died before recording.
    sqlx::query(
        "WITH started AS (
             UPDATE effects SET status = 'in_flight', attempts = 1, first_attempt_at = now(), visible_at = now()
             RETURNING id
         )
         INSERT INTO effect_attempts (effect_id, attempt, kind) SELECT id, 1, 'delivery' FROM started",
    )
    .execute(harness.pool())
    .await
    .expect("in flight");
    harness.step().await;
    assert_eq!(
        harness.effect("lost-idem").await.0,
        EffectStatus::Pending,
        "idempotent: retried with the same key"
    );
    let (status, _, maybe_delivered, _) = harness.effect("lost-plain").await;
    assert_eq!(
        (status.as_str(), maybe_delivered),
        ("review", true),
        "plain: never re-sent blindly"
    );
    let outcomes: Vec<String> =
        sqlx::query_scalar("SELECT outcome FROM effect_attempts ORDER BY id")
            .fetch_all(harness.pool())
            .await
            .expect("history");
    assert_eq!(outcomes, ["lost_in_flight", "lost_in_flight"]);
    assert!(harness.sink.received().is_empty());
}

#[tokio::test]
async fn two_events_for_one_business_operation_make_one_intent_and_one_delivery() {
    let harness = start().await;
    let pool = harness.pool();
    domain::seed_order(pool, "o1", "pi_1", 1000, "usd").await;
    for event_id in ["evt_a", "evt_b"] {
        let body = stripe_event(
            event_id,
            "payment_intent.succeeded",
            payment_intent("pi_1", "o1", 1000, "usd", "succeeded"),
        );
        domain::accept(pool, harness.worker.config(), &body)
            .await
            .expect("new");
    }
    inbound_worker::test_hooks::run_once(&harness.worker)
        .await
        .expect("apply");
    harness.step().await;
    harness.step().await;
    assert_eq!(
        domain::operation_keys(pool).await,
        ["order.paid:acme:o1:pi_1"]
    );
    assert_eq!(harness.sink.received().len(), 1);
    assert_eq!(
        harness.effect("order.paid:acme:o1:pi_1").await.0,
        EffectStatus::Completed
    );
}

/// What scales dispatchers counts only effects that are due and waiting for a slot: not
/// one waiting out a retry delay, nor one being reconciled, however old.
#[tokio::test]
async fn the_due_wait_gauge_counts_only_effects_a_dispatcher_could_take_now() {
    let database = inbound_tests::TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config();
    let receipt = domain::accept_event(
        pool,
        &config,
        "evt_w1",
        "payment_intent.succeeded",
        payment_intent("pi_w", "o_w", 1000, "usd", "succeeded"),
    )
    .await;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "INSERT INTO effects (id, receipt_id, operation_key, sink, kind, tenant, data, event, status,
                              visible_at, created_at)
         VALUES (effect_id_for({receipt}), {receipt}, 'k:due', 'audit', 'k', 'acme', '{{}}', '{{}}', 'pending',
                 now() - interval '40 seconds', now() - interval '1 hour'),
                (effect_id_for({receipt}), {receipt}, 'k:later', 'audit', 'k', 'acme', '{{}}', '{{}}', 'pending',
                 now() + interval '10 minutes', now() - interval '2 days'),
                (effect_id_for({receipt}), {receipt}, 'k:uncertain', 'audit', 'k', 'acme', '{{}}', '{{}}', 'uncertain',
                 now() - interval '5 hours', now() - interval '3 days')"
    )))
    .execute(pool)
    .await
    .expect("effects");
    let mut connection = pool.acquire().await.expect("connection");
    let wait = inbound_store::effects::oldest_due_wait_seconds(&mut connection, "audit")
        .await
        .expect("gauge");
    assert!((40.0..45.0).contains(&wait), "{wait}");
    let age = inbound_store::effects::oldest_open_age_seconds(&mut connection, "audit")
        .await
        .expect("age");
    assert!(
        age >= 3.0 * 86_400.0,
        "the age gauge still sees every open effect: {age}"
    );
}
