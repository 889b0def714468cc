//! A realistic day of a subscription business, replayed through the shipped example
//! configuration (`config/example.toml`) and the stock handlers: ordinary traffic must put
//! nothing in the queues meant for people (no receipt quarantined or failed), and grant
//! exactly what was paid for.

use std::process::Child;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use inbound_core::config::Config;
use inbound_tests::TestDatabase;
use inbound_tests::ctl::Inboundctl;
use inbound_tests::domain;
use inbound_worker::Worker;
use inbound_worker::test_hooks::{Round, run_once};
use serde_json::{Value, json};

/// The shipped example configuration's text.
fn example_toml() -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../config/example.toml"
    ))
    .expect("config/example.toml")
}

/// The secrets `make run` would put in `.env.local`, for `config/example.toml`.
fn example_secret(name: &str) -> String {
    match name {
        "EXAMPLE_STANDARD_SECRET" | "EXAMPLE_SINK_SECRET" => {
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".to_owned()
        }
        _ => "example-secret".to_owned(),
    }
}

fn example_config() -> Config {
    Config::from_toml(&example_toml(), &|name| Some(example_secret(name)))
        .expect("the shipped example configuration loads")
}

/// A test-mode Stripe event as the example integration receives it.
fn event(id: &str, event_type: &str, created: i64, object: Value) -> String {
    json!({"id": id, "object": "event", "type": event_type, "created": created,
           "livemode": false, "data": {"object": object}})
    .to_string()
}

fn invoice(id: &str, customer: &str, lines: Vec<Value>) -> Value {
    json!({"id": id, "object": "invoice", "customer": customer, "status": "paid", "paid": true,
           "subscription": format!("sub_{customer}"),
           "lines": {"object": "list", "data": lines, "has_more": false}})
}

fn line(price: &str, amount: i64, proration: bool) -> Value {
    json!({"object": "line_item", "price": {"id": price}, "amount": amount, "proration": proration})
}

fn invoice_payment(id: &str, invoice: &str, amount: i64) -> Value {
    json!({"id": id, "object": "payment_intent", "status": "succeeded", "invoice": invoice,
           "amount_received": amount, "currency": "usd", "metadata": {}})
}

fn charge_refund(payment: &str, invoice: &str, amount: i64) -> Value {
    json!({"id": format!("ch_{payment}"), "object": "charge", "payment_intent": payment,
           "invoice": invoice, "amount": amount, "amount_refunded": amount, "refunded": true})
}

/// A day of a subscription business's Stripe traffic, as the example routes it: new
/// subscribers, renewals, refunds, a redelivery, and two types no route takes.
fn a_days_events() -> Vec<String> {
    vec![
        // New subscribers: invoice paid (mapped price), its PaymentIntent, the renewal of others.
        event(
            "evt_01",
            "invoice.paid",
            1_000,
            invoice(
                "in_a1",
                "cus_a",
                vec![line("price_pro_monthly", 2000, false)],
            ),
        ),
        event(
            "evt_02",
            "payment_intent.succeeded",
            1_001,
            invoice_payment("pi_a1", "in_a1", 2000),
        ),
        event(
            "evt_03",
            "invoice.paid",
            1_100,
            invoice(
                "in_b1",
                "cus_b",
                vec![line("price_basic_monthly", 900, false)],
            ),
        ),
        event(
            "evt_04",
            "payment_intent.succeeded",
            1_101,
            invoice_payment("pi_b1", "in_b1", 900),
        ),
        // Renewals, one delivered twice under one event id and once under a new one.
        event(
            "evt_05",
            "invoice.paid",
            2_000,
            invoice(
                "in_c7",
                "cus_c",
                vec![line("price_pro_monthly", 2000, false)],
            ),
        ),
        event(
            "evt_05",
            "invoice.paid",
            2_000,
            invoice(
                "in_c7",
                "cus_c",
                vec![line("price_pro_monthly", 2000, false)],
            ),
        ),
        event(
            "evt_06",
            "invoice.paid",
            2_000,
            invoice(
                "in_c7",
                "cus_c",
                vec![line("price_pro_monthly", 2000, false)],
            ),
        ),
        event(
            "evt_07",
            "payment_intent.succeeded",
            2_001,
            invoice_payment("pi_c7", "in_c7", 2000),
        ),
        // A downgrade from pro to basic mid-cycle: the unused pro time is credited.
        event(
            "evt_08",
            "invoice.paid",
            3_000,
            invoice(
                "in_a2",
                "cus_a",
                vec![
                    line("price_pro_monthly", -1200, true),
                    line("price_basic_monthly", 500, true),
                ],
            ),
        ),
        event(
            "evt_09",
            "payment_intent.succeeded",
            3_001,
            invoice_payment("pi_a2", "in_a2", 0),
        ),
        // An upgrade from basic to pro: the new plan's proration line grants pro.
        event(
            "evt_10",
            "invoice.paid",
            3_500,
            invoice(
                "in_b2",
                "cus_b",
                vec![
                    line("price_basic_monthly", -400, true),
                    line("price_pro_monthly", 1100, true),
                ],
            ),
        ),
        event(
            "evt_11",
            "payment_intent.succeeded",
            3_501,
            invoice_payment("pi_b2", "in_b2", 700),
        ),
        // A refund of a subscription charge, and a late partial one.
        event(
            "evt_12",
            "charge.refunded",
            4_000,
            charge_refund("pi_c7", "in_c7", 2000),
        ),
        event(
            "evt_13",
            "charge.refunded",
            4_100,
            json!({"id": "ch_pi_b1", "object": "charge",
            "payment_intent": "pi_b1", "amount": 900, "amount_refunded": 300, "refunded": false}),
        ),
        // An invoice for something this integration maps to nothing.
        event(
            "evt_14",
            "invoice.paid",
            5_000,
            invoice("in_d1", "cus_d", vec![line("price_addon", 300, false)]),
        ),
        // Events the configuration does not route: answered 200 ignored, never stored.
        event(
            "evt_15",
            "customer.subscription.updated",
            5_100,
            json!({"id": "sub_cus_a", "object": "subscription"}),
        ),
        event(
            "evt_16",
            "invoice.finalized",
            5_200,
            invoice("in_e1", "cus_e", vec![]),
        ),
    ]
}

#[tokio::test]
async fn a_day_of_subscription_traffic_needs_no_person() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = example_config();
    let day = a_days_events();
    let mut stored = 0;
    for body in &day {
        if let Some(Some(_)) = domain::accept_routed(pool, &config, "stripe-example", body).await {
            stored += 1;
        }
    }
    assert_eq!(
        stored, 14,
        "two unrouted events and one redelivery are not stored"
    );

    let settings =
        domain::settings_with(|settings| settings.backoff_base(Duration::from_millis(10)));
    let worker = Arc::new(Worker::new(
        pool.clone(),
        Arc::new(config.clone()),
        domain::stock_registry(),
        settings,
    ));
    for _ in 0..50 {
        if matches!(run_once(&worker).await.expect("step"), Round::Idle) {
            let left: i64 = sqlx::query_scalar("SELECT count(*) FROM receipt_queue")
                .fetch_one(pool)
                .await
                .expect("queue");
            if left == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let needing_a_person: Vec<(String, String, Option<String>)> = sqlx::query_as(
        "SELECT event_id, status, COALESCE(outcome_reason, last_error) FROM receipts
         WHERE status <> 'done' ORDER BY event_id",
    )
    .fetch_all(pool)
    .await
    .expect("receipts");
    assert!(needing_a_person.is_empty(), "{needing_a_person:?}");
    let grants: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT account_id, invoice_id, entitlement FROM entitlement_grants ORDER BY 1, 2, 3",
    )
    .fetch_all(pool)
    .await
    .expect("grants");
    assert_eq!(
        grants,
        [
            ("cus_a".into(), "in_a1".into(), "pro".into()),
            ("cus_b".into(), "in_b2".into(), "pro".into()),
            ("cus_c".into(), "in_c7".into(), "pro".into()),
        ],
        "the downgrade re-grants nothing; the upgrade grants pro; a renewal once"
    );
}

/// Every secret the example configuration names, as `make run` sets them.
fn example_secrets() -> Vec<(String, String)> {
    [
        "EXAMPLE_STRIPE_SECRET",
        "EXAMPLE_GITHUB_SECRET",
        "EXAMPLE_SLACK_SECRET",
        "EXAMPLE_STANDARD_SECRET",
        "EXAMPLE_SHOPIFY_SECRET",
        "EXAMPLE_PADDLE_SECRET",
        "EXAMPLE_ZOOM_SECRET",
        "EXAMPLE_LINEAR_SECRET",
        "EXAMPLE_GITLAB_TOKEN",
        "EXAMPLE_SINK_SECRET",
    ]
    .iter()
    .map(|name| ((*name).to_owned(), example_secret(name)))
    .collect()
}

/// `inboundctl dev-sink --secret env:EXAMPLE_SINK_SECRET` on `port`, and its captured
/// output.
fn start_dev_sink(port: u16, secrets: &[(String, String)]) -> (Child, Arc<Mutex<Vec<String>>>) {
    let mut sink = Inboundctl::new()
        .envs(secrets)
        .command(&[
            "dev-sink",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--secret",
            "env:EXAMPLE_SINK_SECRET",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("dev-sink");
    let sink_log = inbound_tests::process::capture_lines(sink.stdout.take().expect("stdout"));
    (sink, sink_log)
}

/// A worker with the shipped example configuration, its sinks at the dev-sink's `port`.
fn start_example_worker(
    database: &TestDatabase,
    port: u16,
    secrets: &[(String, String)],
) -> inbound_tests::Service {
    inbound_tests::Service::worker(&inbound_tests::ServiceOptions {
        config_toml: example_toml().replace("127.0.0.1:8181", &format!("127.0.0.1:{port}")),
        database_url: database.url().to_owned(),
        env: secrets.to_vec(),
        args: vec!["--poll-interval-ms".to_owned(), "50".to_owned()],
        ..inbound_tests::ServiceOptions::default()
    })
}

/// An invoice that grants (the provisioning sink) and an order's payment (the fulfillment
/// sink), accepted through the example configuration.
async fn accept_a_grant_and_a_payment(pool: &sqlx::PgPool) {
    domain::seed_order_of(pool, "example", "o_demo", "pi_demo", 2000, "usd").await;
    let config = example_config();
    for body in [
        event(
            "evt_demo_grant",
            "invoice.paid",
            1_000,
            invoice(
                "in_demo",
                "cus_demo",
                vec![line("price_pro_monthly", 2000, false)],
            ),
        ),
        event(
            "evt_demo_paid",
            "payment_intent.succeeded",
            1_001,
            domain::payment_intent("pi_demo", "o_demo", 2000, "usd", "succeeded"),
        ),
    ] {
        domain::accept_routed(pool, &config, "stripe-example", &body)
            .await
            .expect("routed")
            .expect("new");
    }
}

/// Waits until both effects are past delivery; returns each one's sink and status.
async fn effects_once_both_delivered(
    pool: &sqlx::PgPool,
    sink_log: &Mutex<Vec<String>>,
) -> Vec<(String, String)> {
    inbound_tests::eventually(
        "both effects past delivery",
        Duration::from_secs(20),
        async || {
            let states: Vec<(String, String)> =
                sqlx::query_as("SELECT sink, status FROM effects ORDER BY sink")
                    .fetch_all(pool)
                    .await
                    .expect("effects");
            let delivered = states.len() == 2
                && states
                    .iter()
                    .all(|(_, status)| status != "pending" && status != "in_flight");
            if delivered {
                Ok(states)
            } else {
                Err(format!(
                    "effects {states:?}; dev-sink: {:?}",
                    sink_log.lock().expect("log")
                ))
            }
        },
    )
    .await
}

/// `make run` and `make demo` as shipped: the example configuration, a worker, and
/// `inboundctl dev-sink --secret env:EXAMPLE_SINK_SECRET` at the sinks' address. Both
/// sinks' effects reach the dev-sink and complete — the provisioning sink used to be
/// unsigned, so the verifying dev-sink refused every grant (401, `failed`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_stack_delivers_to_both_of_its_sinks() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let port = inbound_tests::ports::free_port();
    let secrets = example_secrets();
    let (mut sink, sink_log) = start_dev_sink(port, &secrets);
    let _worker = start_example_worker(&database, port, &secrets);
    accept_a_grant_and_a_payment(pool).await;
    let states = effects_once_both_delivered(pool, &sink_log).await;
    sink.kill().ok();
    sink.wait().ok();
    assert_eq!(
        states,
        [
            ("fulfillment".to_owned(), "completed".to_owned()),
            ("provisioning".to_owned(), "completed".to_owned())
        ],
        "dev-sink: {:?}",
        sink_log.lock().expect("log")
    );
}
