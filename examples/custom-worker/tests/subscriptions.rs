//! The custom worker as a team runs it, with inbound's testing kit
//! (`inbound_worker::testing`, feature `testing`): a scratch database with inbound's
//! migrations and this crate's, inbound's ingress and this worker in-process (started
//! from values, as the roles `migrate --create-roles` makes), signed Stripe events over
//! HTTP with the ingress's verdict, and the team's table checked in a real PostgreSQL
//! (`INBOUND_TEST_DATABASE_URL`, else `DATABASE_URL`, else the local server). The kit
//! drops the database even when an assertion fails.

use std::time::Duration;

use custom_worker::{MIGRATOR, SCHEMA, SUBSCRIPTIONS_SYNC, configure, handler};
use inbound_worker::handlers::Transition;
use inbound_worker::testing::{Outcome, ScratchDatabase, TestStack, Verdict, apply};
use inbound_worker::{Config, ReceiptOutcome, Role, WorkerBuilder, WorkerSettings};
use serde_json::json;
use sqlx::postgres::PgPool;

const SECRET: &str = "whsec_custom_worker_example_secret";

/// The team's configuration: one Stripe integration routing subscription events to the
/// handler, with `route_options` added to its route.
fn config(route_options: &str) -> String {
    format!(
        r#"
[[integration]]
id = "stripe-test"
provider = "stripe"
tenant = "acme"
secrets = ["env:STRIPE_SECRET"]
expect = {{ livemode = false }}

[integration.routes]
"customer.subscription.*" = {{ handler = "{SUBSCRIPTIONS_SYNC}"{route_options} }}
"#
    )
}

/// The stack with this worker, as production runs it: each process as its own role.
async fn start(route_options: &str) -> TestStack {
    TestStack::builder(
        &config(route_options),
        &[("STRIPE_SECRET", SECRET)],
        configure,
    )
    .as_roles()
    .database_prefix("custom_worker_")
    .start()
    .await
    .expect("the stack starts")
}

/// The configuration as the worker reads it.
fn parsed_config(route_options: &str) -> Config {
    Config::from_toml(&config(route_options), &|name| {
        (name == "STRIPE_SECRET").then(|| SECRET.to_owned())
    })
    .expect("config")
}

/// A Stripe subscription event as Stripe sends it (the fields this handler reads).
fn subscription_event(event_id: &str, event_type: &str, created: i64, status: &str) -> String {
    json!({
        "id": event_id, "object": "event", "type": event_type, "created": created,
        "livemode": false,
        "data": {"object": {
            "id": "sub_1", "object": "subscription", "customer": "cus_1", "status": status,
            "items": {"data": [{"price": {"id": "price_pro"}}]}
        }}
    })
    .to_string()
}

async fn row(pool: &PgPool) -> (String, bool, String) {
    sqlx::query_as(
        "SELECT status, deleted, event_id FROM subscriptions_example.subscriptions
         WHERE tenant_id = 'acme' AND subscription_id = 'sub_1'",
    )
    .fetch_one(pool)
    .await
    .expect("the subscription row")
}

/// Subscription events in delivery order, with the outcome each must get: event id, type,
/// `created`, the subscription's status, outcome. Stripe event ids are random: the ids are
/// chosen so that id order would get each case wrong.
fn out_of_order_deliveries() -> [(&'static str, &'static str, i64, &'static str, &'static str); 8] {
    [
        (
            "evt_5",
            "customer.subscription.updated",
            200,
            "active",
            "applied",
        ),
        // The creation arrives after an update of the same second, with a larger id.
        (
            "evt_9",
            "customer.subscription.created",
            200,
            "incomplete",
            "ignored",
        ),
        (
            "evt_3",
            "customer.subscription.updated",
            300,
            "past_due",
            "applied",
        ),
        // A second, legitimate update: a new event, not a duplicate.
        (
            "evt_1",
            "customer.subscription.updated",
            301,
            "active",
            "applied",
        ),
        // An older update delivered late never regresses the row.
        (
            "evt_8",
            "customer.subscription.updated",
            250,
            "past_due",
            "ignored",
        ),
        (
            "evt_2",
            "customer.subscription.deleted",
            400,
            "canceled",
            "applied",
        ),
        // After the deletion nothing changes the row, not even an update of that second.
        (
            "evt_7",
            "customer.subscription.updated",
            400,
            "active",
            "ignored",
        ),
        (
            "evt_6",
            "customer.subscription.updated",
            500,
            "active",
            "ignored",
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_events_never_regress_and_repeated_updates_are_not_duplicates() {
    let mut stack = start("").await;
    let steps = out_of_order_deliveries();
    for (event_id, event_type, created, status, expected) in steps {
        let body = subscription_event(event_id, event_type, created, status);
        assert!(
            matches!(send(&stack, &body).await, Verdict::Accepted { .. }),
            "{event_id}"
        );
        let finished = outcome(&stack, event_id).await;
        assert_eq!(
            finished.outcome,
            Some(expected.parse::<ReceiptOutcome>().expect("an outcome")),
            "{event_id}: {finished:?}"
        );
    }
    assert_eq!(
        row(stack.pool()).await,
        ("canceled".to_owned(), true, "evt_2".to_owned())
    );
    let reason = outcome(&stack, "evt_8").await.reason;
    assert!(
        reason.is_some_and(|reason| reason.starts_with("stale:")),
        "the reason says why"
    );
    let reason = outcome(&stack, "evt_6").await.reason;
    assert!(
        reason.is_some_and(|reason| reason.contains("was deleted")),
        "the reason says why"
    );
    // A redelivery is a duplicate receipt at the ingress: nothing new to apply.
    let again = subscription_event("evt_3", "customer.subscription.updated", 300, "past_due");
    assert_eq!(send(&stack, &again).await, Verdict::Duplicate);
    stack.stop().await.expect("both stop cleanly");
    // Nothing of inbound's or the team's landed in public.
    assert_eq!(relations_in_public(stack.pool()).await, 0);
}

/// How many tables, sequences and indexes the database holds in `public`.
async fn relations_in_public(pool: &PgPool) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = 'public' AND c.relkind IN ('r', 'S', 'i')",
    )
    .fetch_one(pool)
    .await
    .expect("catalog")
}

/// A burst of one subscription's events in any order converges on the same row: send
/// them all, drain, read the final state (each verdict depends on how the worker raced;
/// the row does not). An event no route takes is acknowledged and never stored, and the
/// kit says so at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_in_any_order_converges_and_an_unrouted_event_is_never_stored() {
    let stack = start("").await;
    for (event_id, event_type, created, status, _) in out_of_order_deliveries() {
        let body = subscription_event(event_id, event_type, created, status);
        assert!(matches!(
            send(&stack, &body).await,
            Verdict::Accepted { .. }
        ));
    }
    stack.drain(Duration::from_secs(20)).await.expect("drained");
    assert_eq!(
        row(stack.pool()).await,
        ("canceled".to_owned(), true, "evt_2".to_owned())
    );
    let unrouted = json!({"id": "evt_cus", "type": "customer.created", "livemode": false,
                          "data": {"object": {"id": "cus_1"}}})
    .to_string();
    assert_eq!(send(&stack, &unrouted).await, Verdict::Ignored);
    let never_stored = stack
        .outcome("evt_cus", Duration::from_secs(20))
        .await
        .expect_err("nothing to wait for");
    assert!(
        never_stored
            .to_string()
            .contains("no receipt holds evt_cus"),
        "{never_stored}"
    );
}

/// The worker refuses, before it starts, routes it cannot apply — a handler's options it
/// does not take, a handler it does not have — and a dispatcher, which applies no
/// transition, starts whatever the routes name. Checked from values: no flags, no files.
#[tokio::test]
async fn a_worker_refuses_routes_it_cannot_apply_and_a_dispatcher_needs_no_handlers() {
    let settings = WorkerSettings::builder().build().expect("settings");
    let error = WorkerBuilder::new()
        .handler(SUBSCRIPTIONS_SYNC, handler())
        .check(&parsed_config(", options = { notfy = true }"), &settings)
        .expect_err("refused");
    let error = format!("{error:#}");
    assert!(
        error.contains(r#"routes."customer.subscription.*".options: unknown option "notfy""#),
        "{error}"
    );
    // The stock worker has no subscriptions.sync: it names the route instead of starting.
    let error = WorkerBuilder::new()
        .check(&parsed_config(""), &settings)
        .expect_err("refused");
    let error = format!("{error:#}");
    assert!(
        error.contains(r#"routes."customer.subscription.*".handler: handler "subscriptions.sync" is not registered"#),
        "{error}"
    );
    // A dispatcher applies no transition: it starts whatever the routes name.
    let dispatcher = WorkerSettings::builder()
        .role(Role::Effects)
        .build()
        .expect("settings");
    WorkerBuilder::new()
        .check(&parsed_config(""), &dispatcher)
        .expect("an effects-only stock worker starts beside a custom one");
    let database = ScratchDatabase::create(&[(SCHEMA, &MIGRATOR)])
        .await
        .expect("scratch database");
    WorkerBuilder::new()
        .start(parsed_config(""), dispatcher, database.url(), None)
        .await
        .expect("the dispatcher starts")
        .shutdown()
        .await
        .expect("and stops");
}

/// The handler alone, without any process: the kit's `apply` runs it on one payload in
/// one transaction, committing only an `Applied` verdict.
#[tokio::test]
async fn the_handler_applies_directly_to_one_payload() {
    let database = ScratchDatabase::create(&[(SCHEMA, &MIGRATOR)])
        .await
        .expect("scratch database");
    let config = parsed_config("");
    let payload: serde_json::Value = serde_json::from_str(&subscription_event(
        "evt_direct",
        "customer.subscription.created",
        100,
        "active",
    ))
    .expect("json");
    let applied = apply(
        database.pool(),
        &config,
        "stripe-test",
        &handler(),
        "customer.subscription.created",
        &payload,
    )
    .await
    .expect("applied")
    .expect("no handler error");
    assert!(matches!(applied, Transition::Applied { .. }), "{applied:?}");
    assert_eq!(
        row(database.pool()).await,
        ("active".to_owned(), false, "evt_direct".to_owned())
    );
    // The same event again: a duplicate, and nothing changes.
    let again = apply(
        database.pool(),
        &config,
        "stripe-test",
        &handler(),
        "customer.subscription.created",
        &payload,
    )
    .await
    .expect("applied")
    .expect("no handler error");
    assert!(!again.is_applied(), "{again:?}");
}

/// Signs and posts `body` as Stripe would; what the ingress answered.
async fn send(stack: &TestStack, body: &str) -> Verdict {
    stack
        .send("stripe-test", body, None)
        .await
        .expect("an answer")
}

/// Waits for the receipt of `event_id` to finish.
async fn outcome(stack: &TestStack, event_id: &str) -> Outcome {
    stack
        .outcome(event_id, Duration::from_secs(20))
        .await
        .expect("finished")
}
