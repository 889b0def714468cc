//! Effects against sinks that are slow, lying or misconfigured, as real receivers
//! sometimes are: absurd or dated `Retry-After`, redirects, hanging, endless status
//! bodies, idle connections closed under the client, status pages that never settle, and
//! sinks this worker does not know. Each test names the promise it holds: nothing is sent
//! once it is no longer safe, nothing is marked completed that the sink did not process,
//! every delay is bounded and grows, every budget ends in `review`, and one sink or one
//! outcome never costs the others.

use std::time::Duration;

use inbound_core::config::Config;
use inbound_core::states::EffectStatus;
use inbound_core::states::ReceiptStatus;
use inbound_store::effects as store;
use inbound_tests::dispatcher::Harness;
use inbound_tests::domain::{self, charge, payment_intent};
use inbound_tests::sink::{Answer, TestSink};
use inbound_worker::WorkerSettings;

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
"payment_intent.succeeded" = {{ handler = "orders.mark_paid", sink = "fulfillment" }}
"charge.refunded" = {{ handler = "orders.refund", sink = "fulfillment" }}

[[sink]]
id = "fulfillment"
url = "{url}"
idempotency_header = "Idempotency-Key"
status_url = "{status}"
timeout_secs = 1
max_concurrency = 8

[[sink]]
id = "idem_short"
url = "{url}"
idempotency_header = "Idempotency-Key"
idempotency_retention_secs = 5
status_url = "{status}"
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
id = "hanging"
url = "{hang}"
timeout_secs = 5
breaker_failures = 1000

[[sink]]
id = "unreachable"
url = "http://127.0.0.1:1/effects"
timeout_secs = 1
breaker_failures = 1000

[[sink]]
id = "down"
url = "http://127.0.0.1:1/effects"
timeout_secs = 1
breaker_failures = 3
breaker_pause_secs = 1

[[sink]]
id = "down_long"
url = "http://127.0.0.1:1/effects"
timeout_secs = 1
breaker_failures = 1
breaker_pause_secs = 300
"#,
        url = sink.url(),
        status = sink.status_url(),
        hang = sink.url_at("/hang"),
    );
    Config::from_toml(&text, &|name| {
        (name == "S").then(|| "whsec_stripe".to_owned())
    })
    .expect("dispatcher test config")
}

fn settings() -> WorkerSettings {
    domain::settings_with(|settings| {
        settings
            .backoff_base(Duration::from_secs(1))
            .backoff_cap(Duration::from_secs(60))
    })
}

async fn start() -> Harness {
    Harness::start(config, settings()).await
}

async fn last_error(harness: &Harness, key: &str) -> String {
    sqlx::query_scalar("SELECT COALESCE(last_error, '') FROM effects WHERE operation_key = $1")
        .bind(key)
        .fetch_one(harness.pool())
        .await
        .expect("effect")
}

/// Hole 1: a retry whose delay (here a sink's `Retry-After`) would carry it past the
/// sink's idempotency retention is brought forward into the retention, and a retry that
/// comes due after the retention anyway is not sent by the claim.
#[tokio::test]
async fn a_retry_never_lands_after_the_idempotency_retention() {
    let harness = start().await;
    harness.sink.script([Answer::RetryAfter(503, 30)]);
    harness.intent("idem_short", "short").await;
    harness.step().await;
    let (status, _, maybe_delivered, due_in) = harness.effect("short").await;
    assert_eq!((status.as_str(), maybe_delivered), ("pending", true));
    assert!(
        due_in <= 4.0,
        "retention 5 s minus the 1 s timeout bounds the delay: due in {due_in}"
    );

    // Due again only after the retention (a worker that was down, a long queue): the
    // claim refuses to send it and hands it to reconciliation.
    harness.advance(Duration::from_secs(10));
    harness.step().await;
    assert_eq!(harness.sink.received().len(), 1, "not sent past retention");
    assert_eq!(harness.effect("short").await.0, EffectStatus::Uncertain);
    assert!(
        last_error(&harness, "short").await.contains("retention"),
        "{}",
        last_error(&harness, "short").await
    );
}

/// Hole 1: `Retry-After` as an HTTP date is honoured; an absurd one is capped.
#[tokio::test]
async fn retry_after_is_read_as_seconds_or_a_date_and_capped() {
    let harness = start().await;
    let in_two_minutes =
        httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(120));
    harness.sink.script([
        Answer::RetryAfterText(429, in_two_minutes),
        Answer::RetryAfter(429, 10_000_000_000_000),
    ]);
    harness.intent("plain", "dated").await;
    harness.step().await;
    let (status, _, _, due_in) = harness.effect("dated").await;
    assert_eq!(status, EffectStatus::Pending);
    assert!((100.0..=125.0).contains(&due_in), "due in {due_in}");

    harness.intent("plain", "absurd").await;
    harness.step().await;
    let (status, _, _, due_in) = harness.effect("absurd").await;
    assert_eq!(status, EffectStatus::Pending);
    assert!(
        (3599.0..=3600.5).contains(&due_in),
        "honoured, and capped at an hour: {due_in}"
    );
}

/// Hole 2: one sink's absurd `Retry-After` is recorded with everyone else's outcome, not
/// instead of it.
#[tokio::test]
async fn one_absurd_retry_after_loses_no_other_outcome() {
    let harness = start().await;
    harness.sink.script(
        [
            Answer::Status(200),
            Answer::RetryAfter(429, 10_000_000_000_000),
        ]
        .into_iter()
        .cycle()
        .take(8),
    );
    for n in 0..8 {
        harness.intent("fulfillment", &format!("k{n}")).await;
    }
    let steps = harness.step().await;
    assert_eq!(steps.len(), 8);
    assert!(steps.iter().all(|step| step.recorded), "{steps:?}");
    let completed: i64 =
        sqlx::query_scalar("SELECT count(*) FROM effects WHERE status = 'completed'")
            .fetch_one(harness.pool())
            .await
            .expect("count");
    assert_eq!(completed, 4);
}

/// Hole 2: outcomes are recorded even while every pooled connection is busy elsewhere.
#[tokio::test]
async fn outcomes_are_recorded_while_the_pool_is_exhausted() {
    let harness = start().await;
    harness.intent("fulfillment", "busy").await;
    let recorder = inbound_worker::test_hooks::Recorder::start(
        harness.pool(),
        domain::settings().session(),
        harness.worker.clock(),
        domain::settings().statement_limit(),
    );
    let claimed = {
        let mut connection = harness.pool().acquire().await.expect("conn");
        store::claim_batch(
            &mut connection,
            1,
            Duration::from_secs(30),
            "test",
            &inbound_worker::test_hooks::sink_claims(&harness.worker, 1),
            None,
        )
        .await
        .expect("claim")
    };
    assert_eq!(claimed.len(), 1);
    let mut held = Vec::new();
    for _ in 0..harness.pool().options().get_max_connections() {
        held.push(harness.pool().acquire().await.expect("hold a connection"));
    }
    let effect = &claimed[0];
    let recorded = tokio::time::timeout(
        Duration::from_secs(10),
        recorder.record(
            store::FinishedDelivery {
                effect_id: effect.id,
                lease_token: effect.lease_token,
                attempt: effect.attempts,
                status: inbound_core::states::EffectStatus::Completed,
                visible_after: Duration::ZERO,
                error: None,
                maybe_delivered: true,
                outcome: "completed",
                status_code: Some(200),
            },
            std::time::Instant::now() + Duration::from_secs(5),
        ),
    )
    .await
    .expect("recorded without waiting for the pool");
    assert!(matches!(recorded, Ok(true)), "{recorded:?}");
    drop(held);
    assert_eq!(harness.effect("busy").await.0, EffectStatus::Completed);
}

/// Hole 3: a redirect is never followed — neither as a GET that "succeeds" nor as the
/// signed POST to wherever `Location` points — and is not a completion.
#[tokio::test]
async fn redirects_are_never_followed_nor_completed() {
    let harness = start().await;
    let elsewhere = harness.sink.url_at("/elsewhere");
    harness.sink.script([
        Answer::Redirect(302, elsewhere.clone()),
        Answer::Redirect(307, elsewhere.clone()),
        Answer::Redirect(308, elsewhere),
    ]);
    for key in ["r302", "r307", "r308"] {
        harness.intent("plain", key).await;
        harness.step().await;
        let (status, _, maybe_delivered, _) = harness.effect(key).await;
        assert_eq!(
            (status.as_str(), maybe_delivered),
            ("review", false),
            "{key}"
        );
        assert!(
            last_error(&harness, key).await.contains("redirect"),
            "{key}: {}",
            last_error(&harness, key).await
        );
    }
    let received = harness.sink.received();
    assert_eq!(received.len(), 3, "{received:?}");
    assert!(received.iter().all(|request| request.path == "/effects"));
}

/// Hole 4: reconciling backs off on its own count, and a status that never settles ends
/// in `review`.
#[tokio::test]
async fn reconciliation_backs_off_on_its_own_count() {
    let harness = start().await;
    harness.sink.script([Answer::Status(500)]);
    harness.intent("plain_reconcilable", "waiting").await;
    harness
        .sink
        .set_operation("waiting", 200, r#"{"status":"pending"}"#);
    harness.step().await;
    assert_eq!(harness.effect("waiting").await.0, EffectStatus::Uncertain);
    let mut delays = Vec::new();
    for _ in 0..4 {
        harness.expedite().await;
        harness.step().await;
        let (status, attempts, _, due_in) = harness.effect("waiting").await;
        assert_eq!((status.as_str(), attempts), ("uncertain", 1));
        delays.push(due_in);
    }
    assert!(
        delays.windows(2).all(|pair| pair[1] > pair[0]),
        "each reconciliation waits longer: {delays:?}"
    );
    let reconciliations: i64 =
        sqlx::query_scalar("SELECT count(*) FROM effect_attempts WHERE kind = 'reconcile'")
            .fetch_one(harness.pool())
            .await
            .expect("history");
    assert_eq!(reconciliations, 4);
}

/// Hole 5: a sink that hangs holds only its own share of the dispatcher's slots.
#[tokio::test]
async fn a_hanging_sink_does_not_starve_the_others() {
    let harness = start().await;
    harness
        .sink
        .script_path("/hang", std::iter::repeat_n(Answer::Hang, 100));
    for n in 0..100 {
        harness.intent("hanging", &format!("h{n}")).await;
    }
    for n in 0..10 {
        harness.intent("fulfillment", &format!("f{n}")).await;
    }
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(inbound_worker::run(harness.worker.clone(), async move {
        let _ = stopped.await;
    }));
    // Within the hanging sink's 5 s timeout: its breaker never opens, so only its share
    // of the slots can leave room for the healthy sink.
    let deadline = tokio::time::Instant::now() + Duration::from_millis(4500);
    let completed = loop {
        let completed: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM effects WHERE sink = 'fulfillment' AND status = 'completed'",
        )
        .fetch_one(harness.pool())
        .await
        .expect("count");
        if completed == 10 || tokio::time::Instant::now() > deadline {
            break completed;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let _ = stop.send(());
    running.abort();
    assert_eq!(completed, 10, "the healthy sink's effects completed");
}

/// Hole 7: an effect for a sink this worker's configuration does not name (a rolling
/// deploy that adds it) is left for a worker that knows it.
#[tokio::test]
async fn an_effect_for_a_sink_this_worker_does_not_know_is_left_pending() {
    let harness = start().await;
    harness.intent("added_by_the_next_release", "new").await;
    harness.step().await;
    let (status, attempts, _, _) = harness.effect("new").await;
    assert_eq!((status.as_str(), attempts), ("pending", 0));
}

/// Hole 8: a request that could not be built was never sent.
#[tokio::test]
async fn a_request_that_cannot_be_built_was_never_sent() {
    let harness = start().await;
    harness.intent("fulfillment", "bad\nkey").await;
    harness.step().await;
    let (status, _, maybe_delivered, _) = harness.effect("bad\nkey").await;
    assert!(!maybe_delivered, "nothing left");
    assert_eq!(status, EffectStatus::Review);
    assert!(harness.sink.received().is_empty());
}

/// Hole 8: a refusal after an attempt that may have landed is not a "did not happen".
#[tokio::test]
async fn a_rejection_after_an_attempt_that_may_have_landed_goes_to_review() {
    let harness = start().await;
    harness
        .sink
        .script([Answer::Status(503), Answer::Status(422)]);
    harness.intent("fulfillment", "twice").await;
    harness.step().await;
    assert_eq!(harness.effect("twice").await.0, EffectStatus::Pending);
    harness.expedite().await;
    harness.step().await;
    assert_eq!(harness.effect("twice").await.0, EffectStatus::Review);
}

/// Hole 8: a status page that never ends is read only as far as its bound.
#[tokio::test]
async fn an_endless_status_body_is_read_only_to_its_bound() {
    let harness = start().await;
    harness.sink.script([Answer::Status(500)]);
    harness.intent("plain_reconcilable", "endless").await;
    harness.sink.set_endless_operation("endless");
    harness.step().await;
    harness.expedite().await;
    harness.step().await;
    // What was read is not a JSON answer: not known, and this sink cannot be resent to.
    assert_eq!(harness.effect("endless").await.0, EffectStatus::Review);
    let taken = harness.sink.endless_bytes_taken();
    assert!(
        taken < 16 * 1024 * 1024,
        "read {taken} bytes of an endless body"
    );
}

/// Hole 9: a connection the server has closed while idle is not reused for a delivery
/// (which would fail after the write and read as "may have landed").
#[tokio::test]
async fn a_connection_the_sink_closed_while_idle_is_not_reused() {
    let harness = start().await;
    harness
        .sink
        .close_idle_connections_after(Duration::from_secs(5));
    harness.intent("plain", "first").await;
    harness.step().await;
    assert_eq!(harness.effect("first").await.0, EffectStatus::Completed);
    tokio::time::sleep(Duration::from_millis(5500)).await;
    harness.intent("plain", "second").await;
    harness.step().await;
    assert_eq!(harness.effect("second").await.0, EffectStatus::Completed);
}

/// Hole 10: the verdict on an attempt lost in flight says it was recorded.
#[tokio::test]
async fn the_verdict_on_a_lost_attempt_reports_that_it_was_recorded() {
    let harness = start().await;
    harness.intent("fulfillment", "lost").await;
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
    let steps = harness.step().await;
    assert_eq!(steps.len(), 1);
    assert!(steps[0].recorded, "{steps:?}");
    assert_eq!(harness.effect("lost").await.0, EffectStatus::Pending);
}

/// Hole 11: a sink whose POSTs fail with 503 and whose status page does not know the key
/// gets a bounded number of requests, each after a delay, and the effect ends in review.
#[tokio::test]
async fn a_failing_idempotent_sink_gets_bounded_delayed_requests_then_review() {
    let settings = settings()
        .to_builder()
        .max_attempts(3)
        .build()
        .expect("settings");
    let harness = Harness::start(config, settings).await;
    harness
        .sink
        .script(std::iter::repeat_n(Answer::Status(503), 100));
    harness.intent("fulfillment", "storm").await;
    let mut steps = 0;
    loop {
        harness.step().await;
        steps += 1;
        let (status, _, _, due_in) = harness.effect("storm").await;
        if status == EffectStatus::Review {
            break;
        }
        assert!(due_in > 0.2, "step {steps}: {status} due again in {due_in}");
        assert!(steps < 40, "no review after {steps} steps");
        harness.expedite().await;
    }
    assert_eq!(harness.sink.received().len(), 3, "max_attempts POSTs");
    assert!(harness.sink.status_requests().len() <= 3);
}

/// Hole 12: purge keeps a receipt whose effect failed (an operator may still retry it).
#[tokio::test]
async fn purge_keeps_receipts_whose_effects_are_not_closed() {
    let harness = start().await;
    harness.sink.script([Answer::Status(422)]);
    harness.intent("plain", "refused").await;
    harness.step().await;
    assert_eq!(harness.effect("refused").await.0, EffectStatus::Failed);
    // The intent was recorded by hand: its receipt is finished by hand too, as the
    // worker's finish does (done, and out of the queue).
    sqlx::query("UPDATE receipts SET status = 'done', outcome = 'applied', finished_at = now()")
        .execute(harness.pool())
        .await
        .expect("a done receipt");
    sqlx::query("DELETE FROM receipt_queue")
        .execute(harness.pool())
        .await
        .expect("out of the queue");
    // Retention 30 days on: the receipt and its payload are carried, not dropped.
    let later = Some(chrono::Utc::now() + chrono::Duration::days(200));
    let mut connection = harness.pool().acquire().await.expect("conn");
    let periods = inbound_store::admin::drop_key_periods(&mut connection, 7, later)
        .await
        .expect("purge");
    assert!(
        periods.iter().any(|period| period.carried == 1),
        "{periods:?}"
    );
    assert_eq!(harness.effect("refused").await.0, EffectStatus::Failed);
    // Nor its payload: the person deciding about the effect reads the event behind it.
    let days = inbound_store::admin::drop_payload_days(&mut connection, 7, later)
        .await
        .expect("purge payloads");
    assert!(days.iter().any(|day| day.carried == 1), "{days:?}");
    let payloads: i64 = sqlx::query_scalar("SELECT count(*) FROM receipt_payloads")
        .fetch_one(harness.pool())
        .await
        .expect("count");
    assert_eq!(
        payloads, 1,
        "a payload whose effect is still open was purged"
    );

    // Closed by an operator: now it goes.
    let id: i64 = sqlx::query_scalar("SELECT id FROM effects")
        .fetch_one(harness.pool())
        .await
        .expect("effect");
    store::resolve(
        &mut connection,
        inbound_core::keys::EffectId(id),
        inbound_core::states::EffectAction::Abandon,
        None,
        "alice",
        "never needed",
    )
    .await
    .expect("abandon");
    inbound_store::admin::drop_payload_days(&mut connection, 7, later)
        .await
        .expect("purge payloads");
    inbound_store::admin::drop_key_periods(&mut connection, 7, later)
        .await
        .expect("purge");
    let left: (i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM receipt_payloads), (SELECT count(*) FROM receipts),
                (SELECT count(*) FROM effects)",
    )
    .fetch_one(harness.pool())
    .await
    .expect("count");
    assert_eq!(left, (0, 0, 0));
}

/// Hole 13: an order paid again after a refund and a reopen is a new transition, with
/// its own operation key and its own delivery.
#[tokio::test]
async fn a_second_payment_after_a_refund_makes_a_second_effect() {
    let harness = start().await;
    let pool = harness.pool();
    let config = harness.worker.config();
    domain::seed_order(pool, "o1", "pi_1", 1000, "usd").await;
    domain::accept_event(
        pool,
        config,
        "evt_pay_1",
        "payment_intent.succeeded",
        payment_intent("pi_1", "o1", 1000, "usd", "succeeded"),
    )
    .await;
    inbound_worker::test_hooks::run_once(&harness.worker)
        .await
        .expect("pay");
    domain::accept_event(
        pool,
        config,
        "evt_refund",
        "charge.refunded",
        charge("pi_1", 1000, 1000),
    )
    .await;
    inbound_worker::test_hooks::run_once(&harness.worker)
        .await
        .expect("refund");
    // The business reopens the order with a new PaymentIntent.
    sqlx::query(
        "UPDATE orders SET status = 'awaiting_payment', provider_payment_id = 'pi_2' WHERE id = 'o1'",
    )
    .execute(pool)
    .await
    .expect("reopen");
    domain::accept_event(
        pool,
        config,
        "evt_pay_2",
        "payment_intent.succeeded",
        payment_intent("pi_2", "o1", 1000, "usd", "succeeded"),
    )
    .await;
    inbound_worker::test_hooks::run_once(&harness.worker)
        .await
        .expect("pay again");
    assert_eq!(domain::order_status(pool, "o1").await, "paid");
    let keys = domain::operation_keys(pool).await;
    assert_eq!(keys.len(), 3, "paid, refunded, paid again: {keys:?}");
}

/// Hole 13: an intent whose key is already taken by another operation is never dropped
/// silently: the receipt does not complete, and its error names the key.
#[tokio::test]
async fn an_intent_colliding_with_another_operations_key_is_an_error() {
    let harness = start().await;
    let pool = harness.pool();
    harness
        .intent("fulfillment", "order.paid:acme:o1:pi_1")
        .await;
    harness.intent("fulfillment", "order.paid:acme:o1").await;
    let receipt = domain::order_with_pending_payment(pool, harness.worker.config()).await;
    inbound_worker::test_hooks::run_once(&harness.worker)
        .await
        .expect("apply");
    let (status, _, _) = domain::receipt_state(pool, receipt).await;
    assert_ne!(
        status,
        ReceiptStatus::Done,
        "the collision is not a silent success"
    );
    let error: Option<String> =
        sqlx::query_scalar("SELECT last_error FROM receipt_queue WHERE receipt_id = $1")
            .bind(receipt)
            .fetch_optional(pool)
            .await
            .expect("queue row")
            .flatten();
    assert!(
        error
            .as_deref()
            .is_some_and(|error| error.contains("order.paid:acme:o1")),
        "{error:?}"
    );
}

/// Hole 14: a sink outage of minutes is not a verdict: an effect that never reached the
/// sink keeps being retried past `--max-attempts`, and only after the sink's time budget
/// (`give_up_after_secs`, days by default) does a person decide — it is never `failed`.
#[tokio::test]
async fn an_outage_never_fails_an_effect_that_was_never_sent() {
    let harness = start().await;
    harness.intent("unreachable", "outage").await;
    for _ in 0..12 {
        harness.step().await;
        harness.expedite().await;
    }
    let (status, attempts, maybe_delivered, _) = harness.effect("outage").await;
    assert_eq!((status.as_str(), maybe_delivered), ("pending", false));
    assert!(attempts >= 12, "{attempts}");

    harness.advance(Duration::from_secs(3 * 24 * 3600));
    harness.step().await;
    let (status, _, maybe_delivered, _) = harness.effect("outage").await;
    assert_eq!((status.as_str(), maybe_delivered), ("review", false));
    assert!(
        last_error(&harness, "outage")
            .await
            .contains("give_up_after_secs")
    );
}

/// Hole 5: consecutive transport failures open a sink's breaker: its effects wait (not
/// claimed, not failed) until a single probe after the pause, which reopens it for longer
/// when it fails too.
#[tokio::test]
async fn a_sink_that_cannot_be_reached_is_paused_by_its_breaker() {
    let harness = start().await;
    harness.intent("down", "paused").await;
    for _ in 0..3 {
        harness.step().await;
        harness.expedite().await;
    }
    assert!(harness.worker.sink_gates().is_open("down"));
    assert!(
        harness.step().await.is_empty(),
        "nothing of the sink is claimed"
    );
    assert_eq!(harness.effect("paused").await.1, 3);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(harness.step().await.len(), 1, "one probe after the pause");
    harness.expedite().await;
    assert!(
        harness.step().await.is_empty(),
        "the failed probe paused it again"
    );
    let (status, attempts, _, _) = harness.effect("paused").await;
    assert_eq!((status.as_str(), attempts), ("pending", 4));
}

/// On call, after the sink is back: an operator's retry of one of a paused sink's effects
/// ends the breaker's pause at the next gauge refresh (a probe now), instead of waiting out
/// a pause that may have doubled to minutes.
#[tokio::test]
async fn an_operators_retry_ends_a_breakers_pause_with_a_probe_now() {
    let harness = start().await;
    harness.intent("down_long", "waiting").await;
    harness.step().await;
    harness.expedite().await;
    assert!(harness.worker.sink_gates().is_open("down_long"));
    inbound_worker::test_hooks::refresh(&harness.worker)
        .await
        .expect("gauges");
    assert!(
        harness.step().await.is_empty(),
        "paused for 300 s: nothing of the sink is claimed"
    );
    let id: i64 = sqlx::query_scalar("SELECT id FROM effects WHERE operation_key = 'waiting'")
        .fetch_one(harness.pool())
        .await
        .expect("effect");
    let mut connection = harness.pool().acquire().await.expect("conn");
    store::resolve(
        &mut connection,
        inbound_core::keys::EffectId(id),
        inbound_core::states::EffectAction::Retry,
        None,
        "alice",
        "the receiver is back",
    )
    .await
    .expect("retry");
    inbound_worker::test_hooks::refresh(&harness.worker)
        .await
        .expect("gauges");
    assert_eq!(
        harness.step().await.len(),
        1,
        "the retry ended the pause: one probe now"
    );
    // The probe failed (the sink is still unreachable here): paused again, and the same
    // retry does not end the new pause.
    harness.expedite().await;
    inbound_worker::test_hooks::refresh(&harness.worker)
        .await
        .expect("gauges");
    assert!(
        harness.step().await.is_empty(),
        "the failed probe paused it again"
    );
}

/// Hole 6: an operator's decision fences out a reconciliation already in progress.
#[tokio::test]
async fn an_operator_decision_fences_out_a_reconciliation_in_progress() {
    let harness = start().await;
    harness.intent("plain_reconcilable", "decided").await;
    sqlx::query(
        "UPDATE effects SET status = 'uncertain', attempts = 1, maybe_delivered = true,
                first_attempt_at = now()",
    )
    .execute(harness.pool())
    .await
    .expect("uncertain");
    let mut connection = harness.pool().acquire().await.expect("conn");
    let claimed = store::claim_batch(
        &mut connection,
        1,
        Duration::from_secs(30),
        "reconciler",
        &inbound_worker::test_hooks::sink_claims(&harness.worker, 1),
        None,
    )
    .await
    .expect("claim");
    assert_eq!(claimed.len(), 1);
    // While the reconciler waits for the sink, an operator decides.
    store::resolve(
        &mut connection,
        claimed[0].id,
        inbound_core::states::EffectAction::Abandon,
        None,
        "alice",
        "checked with the receiver: never to be sent",
    )
    .await
    .expect("resolve");
    let decided = harness.effect("decided").await.0;
    let recorded = store::record_step(
        &mut connection,
        claimed[0].id,
        claimed[0].lease_token,
        store::StepKind::Reconcile,
        &store::StepRecord {
            status: inbound_core::states::EffectStatus::Pending,
            visible_after: Duration::ZERO,
            error: None,
            maybe_delivered: true,
            outcome: "reconciled_unknown",
            status_code: Some(404),
        },
        None,
    )
    .await
    .expect("record");
    assert!(!recorded, "the reconciler's lease was fenced out");
    assert_eq!(harness.effect("decided").await.0, decided);
}
