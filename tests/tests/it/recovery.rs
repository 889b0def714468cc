//! Each provider's own recovery, run by `inboundctl` against a local server with the
//! documented API shape (never the real service): `stripe backfill` reads the events API
//! oldest first, for the key's own account (a restricted key's account known from Stripe's
//! permission error) or each connected account, snapshot and thin events, stores what
//! inbound does not hold as `api`-provenance receipts exactly once, leaves what it holds,
//! does not route or may not accept alone, and says so; `github redeliver` asks GitHub
//! again for what failed.

use std::process::Output;

use chrono::Utc;
use inbound_tests::ctl::{Inboundctl, words};
use inbound_tests::process::ScratchDir;
use inbound_tests::stripe_api::{API_KEY, PLATFORM_ACCOUNT, SECRET_KEY, StripeApi};
use inbound_tests::{TestDatabase, domain, fixtures};
use serde_json::{Value, json};

/// inboundctl with the configuration's own secrets (the ingress's), then the test's.
fn inboundctl(args: &[&str], env: &[(&str, &str)]) -> Output {
    Inboundctl::new().with_fixture_secrets().envs(env).run(args)
}

/// The suites' configuration (integration `stripe-acme`: account `acct_123`, live mode).
fn config_file(scratch: &ScratchDir) -> String {
    fixtures::write_config(&fixtures::config_edit(), scratch)
}

fn event(id: &str, event_type: &str, created: i64, account: &str) -> Value {
    json!({
        "id": id, "object": "event", "type": event_type, "created": created,
        "livemode": true, "account": account,
        "data": {"object": {"id": format!("pi_{id}"), "object": "payment_intent"}}
    })
}

/// The suites' configuration with `extra` integrations after it.
fn config_file_with(scratch: &ScratchDir, extra: &str) -> String {
    let mut config = fixtures::config_edit();
    config.add_integrations(extra);
    fixtures::write_config(&config, scratch)
}

/// `inboundctl stripe backfill --integration {integration} --since 2d` against `api`.
fn backfill(
    database: &TestDatabase,
    api: &StripeApi,
    config: &str,
    integration: &str,
    key: &str,
    extra: &[&str],
) -> Output {
    let base = api.base_url();
    let mut args = vec![
        "stripe",
        "backfill",
        "--config",
        config,
        "--integration",
        integration,
        "--since",
        "2d",
        "--api-base",
        &base,
        "--requests-per-second",
        "100",
        "--json",
    ];
    args.extend_from_slice(extra);
    inboundctl(
        &args,
        &[("DATABASE_URL", database.url()), ("STRIPE_API_KEY", key)],
    )
}

/// The event ids of the receipts, in the order they were stored.
async fn stored_order(database: &TestDatabase) -> Vec<String> {
    sqlx::query_scalar("SELECT event_id FROM receipts ORDER BY id")
        .fetch_all(database.pool())
        .await
        .expect("receipts")
}

/// `inboundctl github redeliver --integration gh-acme --since 1d` against `base`, with
/// `extra` arguments and `env` besides the database.
fn github_redeliver(
    database: &TestDatabase,
    config: &str,
    base: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Output {
    let mut args = vec![
        "github",
        "redeliver",
        "--config",
        config,
        "--integration",
        "gh-acme",
        "--since",
        "1d",
        "--api-base",
        base,
        "--requests-per-second",
        "50",
        "--json",
    ];
    args.extend_from_slice(extra);
    let mut env = env.to_vec();
    env.push(("DATABASE_URL", database.url()));
    inboundctl(&args, &env)
}

fn summary(output: &Output) -> Value {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("a JSON summary")
}

/// A Stripe API holding one event inbound has, two it missed, one of another account, one
/// before the window and 120 of a type no route takes; inbound holding the one.
async fn backfill_scene(database: &TestDatabase) -> StripeApi {
    let pool = database.pool();
    let now = Utc::now().timestamp();
    // Delivered before the outage: inbound holds it.
    let held = event(
        "evt_held",
        "payment_intent.succeeded",
        now - 3600,
        "acct_123",
    );
    domain::accept(pool, &domain::config(), &held.to_string())
        .await
        .expect("delivered");
    let mut events = vec![
        held,
        event(
            "evt_missed_1",
            "payment_intent.succeeded",
            now - 7200,
            "acct_123",
        ),
        event("evt_missed_2", "charge.refunded", now - 1800, "acct_123"),
        event(
            "evt_other_account",
            "payment_intent.succeeded",
            now - 900,
            "acct_other",
        ),
        // Before the window: never asked for.
        event(
            "evt_too_old",
            "payment_intent.succeeded",
            now - 10 * 86400,
            "acct_123",
        ),
    ];
    // More than a page of types the integration does not route.
    events.extend((0..120).map(|index| {
        event(
            &format!("evt_customer_{index}"),
            "customer.updated",
            now - 60 - index,
            "acct_123",
        )
    }));
    let api = StripeApi::start(events).await;
    api.rate_limit_next(1);
    api
}

/// `inboundctl stripe backfill` of the suites' `stripe-acme` over two days from `api`, as
/// JSON, with `extra` arguments.
fn backfill_args(config: &str, api: &StripeApi, extra: &[&str]) -> Vec<String> {
    let base = api.base_url();
    let mut args: Vec<String> = words(&format!(
        "stripe backfill --config {config} --integration stripe-acme --since 2d --api-base {base} --requests-per-second 100 --json"
    ))
    .into_iter()
    .map(str::to_owned)
    .collect();
    args.extend(extra.iter().map(|arg| (*arg).to_owned()));
    args
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stripe_backfill_stores_what_inbound_missed_exactly_once() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let api = backfill_scene(&database).await;
    let scratch = ScratchDir::new();
    let config = config_file(&scratch);
    let env = [
        ("DATABASE_URL", database.url()),
        ("STRIPE_API_KEY", API_KEY),
    ];
    let run = |extra: &[&str]| {
        let args = backfill_args(&config, &api, extra);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        inboundctl(&refs, &env)
    };

    // A dry run counts and stores nothing (through a 429 it waits out). Only acct_123's
    // events are listed: on its behalf (`Stripe-Account`), as its own.
    let dry = summary(&run(&["--dry-run"]));
    assert_eq!(
        dry,
        json!({"accounts": 1, "listed": 123, "stored": 2, "held": 1, "not_routed": 120, "other_scope": 0, "malformed": 0, "dry_run": true})
    );
    assert_eq!(database.receipt_count().await, 1);
    let requests = api.requests();
    assert!(
        requests.len() >= 4,
        "a 429 retried, and more than a page's window halved: {requests:?}"
    );
    assert!(
        requests
            .iter()
            .all(|request| request.starts_with("/v1/events?")),
        "a Connect endpoint's one account needs no account check: {requests:?}"
    );

    // The run stores the two missed events, as fetched, queued for the worker.
    let stored = summary(&run(&[]));
    assert_eq!(
        (stored["stored"].as_u64(), stored["held"].as_u64()),
        (Some(2), Some(1))
    );
    let rows: Vec<(String, String, String, bool)> = sqlx::query_as(
        "SELECT r.event_id, r.provenance, r.status,
                EXISTS (SELECT 1 FROM receipt_queue q WHERE q.receipt_id = r.id)
         FROM receipts r ORDER BY r.event_id",
    )
    .fetch_all(pool)
    .await
    .expect("receipts");
    let pending = |id: &str, provenance: &str, queued: bool| {
        (
            id.to_owned(),
            provenance.to_owned(),
            "pending".to_owned(),
            queued,
        )
    };
    assert_eq!(
        rows,
        [
            pending("evt_held", "webhook", true),
            pending("evt_missed_1", "api", true),
            pending("evt_missed_2", "api", true),
        ]
    );
    assert_eq!(
        stored_order(&database).await,
        ["evt_held", "evt_missed_1", "evt_missed_2"],
        "stored oldest first: the worker replays the gap in the order it happened"
    );

    // Again: nothing new.
    let again = summary(&run(&[]));
    assert_eq!(
        (again["stored"].as_u64(), again["held"].as_u64()),
        (Some(0), Some(3))
    );
    assert_eq!(database.receipt_count().await, 3);
}

/// Refusals, each one line and exit 1, never showing a key: a key Stripe refuses, a test
/// key for a live integration, and a key given as it is instead of by reference.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stripe_backfill_refuses_a_wrong_key_in_one_line_without_showing_it() {
    let database = TestDatabase::create().await;
    let api = backfill_scene(&database).await;
    let scratch = ScratchDir::new();
    let config = config_file(&scratch);
    let held = database.receipt_count().await;
    let refused_with = |api_key: &str| {
        let args = backfill_args(&config, &api, &[]);
        let mut refs: Vec<&str> = args.iter().map(String::as_str).collect();
        refs.extend(["--api-key", api_key]);
        let env = [
            ("DATABASE_URL", database.url()),
            ("WRONG_KEY", "rk_live_wrong"),
            ("TEST_KEY", "rk_test_1"),
        ];
        let output = inboundctl(&refs, &env);
        assert!(!output.status.success());
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    let stderr = refused_with("env:WRONG_KEY");
    assert!(
        stderr.contains("401") && stderr.contains("Invalid API Key"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("rk_live_wrong"),
        "the key is never shown: {stderr}"
    );
    let stderr = refused_with("env:TEST_KEY");
    assert!(
        stderr.contains("test key") && stderr.contains("live"),
        "{stderr}"
    );
    let stderr = refused_with("sk_live_pasted_by_mistake");
    assert!(stderr.contains("must be a reference"), "{stderr}");
    assert!(!stderr.contains("sk_live_pasted_by_mistake"), "{stderr}");
    assert_eq!(
        database.receipt_count().await,
        held,
        "a refused run stores nothing"
    );
}

fn delivery(id: u64, guid: &str, minutes_ago: i64, status_code: u64) -> Value {
    let at = Utc::now() - chrono::Duration::minutes(minutes_ago);
    json!({
        "id": id, "guid": guid, "delivered_at": at.to_rfc3339(), "redelivery": false,
        "duration": 0.3, "status": if status_code == 200 { "OK" } else { "Service Unavailable" },
        "status_code": status_code, "event": "push", "action": null,
        "installation_id": null, "repository_id": 42
    })
}

/// An account endpoint's own events: 150 a minute apart, then 130 in one second, then 20
/// more.
fn account_endpoint_events(now: i64) -> Vec<Value> {
    let own = |id: String, created: i64| {
        json!({
            "id": id, "object": "event", "type": "payment_intent.succeeded",
            "created": created, "livemode": true, "api_version": "2025-03-31.basil",
            "data": {"object": {"id": "pi_1", "object": "payment_intent"}}
        })
    };
    let mut events: Vec<Value> = (0..150)
        .map(|index| own(format!("evt_a{index:03}"), now - 20_000 + index * 60))
        .collect();
    events.extend((0..130).map(|index| own(format!("evt_b{index:03}"), now - 5_000)));
    events.extend((0..20).map(|index| own(format!("evt_c{index:03}"), now - 3_000 + index)));
    events
}

/// The suites' configuration with two account endpoints: `stripe-direct` (the platform's
/// account, whose key the test holds) and `stripe-elsewhere` (another account).
fn account_endpoints_config(scratch: &ScratchDir) -> String {
    let integration = |id: &str, account: &str| {
        format!(
            r#"
[[integration]]
id = "{id}"
provider = "stripe"
tenant = "acme"
secrets = ["env:TEST_STRIPE_SECRET"]
expect = {{ livemode = true }}
stripe = {{ account = "{account}" }}
[integration.routes]
"payment_intent.succeeded" = {{ handler = "forward", sink = "audit" }}
"#
        )
    };
    config_file_with(
        scratch,
        &(integration("stripe-direct", PLATFORM_ACCOUNT)
            + &integration("stripe-elsewhere", "acct_elsewhere")),
    )
}

/// Stripe lists newest first; inbound stored oldest first: every window, and the crowded
/// second whole before what came after it — in few requests, each event as delivered.
async fn assert_stored_oldest_first_in_few_requests(database: &TestDatabase, api: &StripeApi) {
    let order = stored_order(database).await;
    let named = |prefix: &str, count: i64| -> Vec<String> {
        (0..count)
            .map(|index| format!("{prefix}{index:03}"))
            .collect()
    };
    assert_eq!(order.len(), 300);
    assert_eq!(order[..150], named("evt_a", 150), "across windows");
    let mut crowded = order[150..280].to_vec();
    crowded.sort();
    assert_eq!(
        crowded,
        named("evt_b", 130),
        "the crowded second, read whole"
    );
    assert_eq!(order[280..], named("evt_c", 20), "after the crowded second");
    let listings = api
        .requests()
        .iter()
        .filter(|request| request.starts_with("/v1/events?"))
        .count();
    eprintln!("300 events over a 2-day window in {listings} requests");
    assert!(
        listings <= 60,
        "the walk halves to the parts that fit a page, then keeps their size: {listings}"
    );
    let delivery: Value =
        sqlx::query_scalar("SELECT delivery FROM receipts WHERE event_id = 'evt_a000'")
            .fetch_one(database.pool())
            .await
            .expect("delivery");
    assert_eq!(delivery, json!({"api_version": "2025-03-31.basil"}));
}

/// A key of another account is refused before anything is read.
fn assert_a_key_of_another_account_is_refused(
    database: &TestDatabase,
    api: &StripeApi,
    config: &str,
) {
    let elsewhere = backfill(database, api, config, "stripe-elsewhere", API_KEY, &[]);
    assert!(!elsewhere.status.success());
    let stderr = String::from_utf8_lossy(&elsewhere.stderr);
    assert!(
        stderr.contains("belongs to account acct_platform"),
        "{stderr}"
    );
}

/// A refusal that names no account: refused, unless the operator takes the cost.
fn assert_an_unnamed_account_is_read_only_with_skip_account_check(
    database: &TestDatabase,
    api: &StripeApi,
    config: &str,
) {
    api.name_no_account_in_permission_errors();
    let unnamed = backfill(database, api, config, "stripe-direct", API_KEY, &[]);
    assert!(!unnamed.status.success());
    let stderr = String::from_utf8_lossy(&unnamed.stderr);
    assert!(stderr.contains("--skip-account-check"), "{stderr}");
    let unchecked = summary(&backfill(
        database,
        api,
        config,
        "stripe-direct",
        API_KEY,
        &["--skip-account-check"],
    ));
    assert_eq!(unchecked["held"], 300, "{unchecked}");
}

/// An account endpoint's own events. The key the docs prescribe — a restricted key with
/// "Events: Read" — is refused `GET /v1/account`, and Stripe's refusal names the key's
/// account: that is the check. Events are stored oldest first, across windows and within
/// a second holding more than a page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stripe_backfill_reads_an_account_endpoint_with_a_restricted_key_oldest_first() {
    let database = TestDatabase::create().await;
    let api = StripeApi::start(account_endpoint_events(Utc::now().timestamp())).await;
    let scratch = ScratchDir::new();
    let config = account_endpoints_config(&scratch);
    let stored = summary(&backfill(
        &database,
        &api,
        &config,
        "stripe-direct",
        API_KEY,
        &[],
    ));
    assert_eq!(
        (stored["accounts"].as_u64(), stored["stored"].as_u64()),
        (Some(1), Some(300)),
        "{stored}"
    );
    assert_stored_oldest_first_in_few_requests(&database, &api).await;
    assert_a_key_of_another_account_is_refused(&database, &api, &config);
    assert_an_unnamed_account_is_read_only_with_skip_account_check(&database, &api, &config);
    // A secret key is answered with its account.
    let secret = summary(&backfill(
        &database,
        &api,
        &config,
        "stripe-direct",
        SECRET_KEY,
        &[],
    ));
    assert_eq!(secret["held"], 300, "{secret}");
    assert_eq!(database.receipt_count().await, 300);
}

/// Events are stored in the order they were created even when their ids sort the other
/// way (receipt ids follow the input, not the receipt key).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stripe_backfill_stores_a_page_in_creation_order_whatever_its_ids() {
    let database = TestDatabase::create().await;
    let now = Utc::now().timestamp();
    let api = StripeApi::start(vec![
        event("evt_z", "payment_intent.succeeded", now - 300, "acct_123"),
        event("evt_m", "payment_intent.succeeded", now - 200, "acct_123"),
        event("evt_a", "payment_intent.succeeded", now - 100, "acct_123"),
    ])
    .await;
    let scratch = ScratchDir::new();
    let config = config_file(&scratch);
    summary(&backfill(
        &database,
        &api,
        &config,
        "stripe-acme",
        API_KEY,
        &[],
    ));
    assert_eq!(stored_order(&database).await, ["evt_z", "evt_m", "evt_a"]);
}

/// A Connect endpoint's API: two connected accounts' events, the platform's own, and thin
/// events of one account and of the platform.
async fn connect_api() -> StripeApi {
    let now = Utc::now().timestamp();
    let thin = |id: &str, context: &str, ago: i64| {
        let created = chrono::DateTime::from_timestamp(now - ago, 0)
            .expect("time")
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        json!({
            "id": id, "object": "v2.core.event",
            "type": "v1.billing.meter.error_report_triggered", "livemode": true,
            "created": created, "context": context,
            "related_object": {"id": "mtr_1", "type": "billing.meter", "url": "/v1/billing/meters/mtr_1"}
        })
    };
    let api = StripeApi::start(vec![
        event("evt_a1", "payment_intent.succeeded", now - 600, "acct_a"),
        event("evt_b1", "payment_intent.succeeded", now - 500, "acct_b"),
        // The platform's own event: an account endpoint's, not this one's.
        json!({"id": "evt_own", "object": "event", "type": "payment_intent.succeeded",
               "created": now - 400, "livemode": true, "data": {"object": {}}}),
        thin("evt_thin_a1", "acct_a", 300),
        thin("evt_thin_a2", "acct_a", 200),
        thin("evt_thin_own", PLATFORM_ACCOUNT, 100),
    ])
    .await;
    api.connect_accounts(&["acct_a", "acct_b"]);
    api
}

/// A Connect endpoint taking every connected account, routing a thin event type.
const CONNECT_INTEGRATION: &str = r#"
[[integration]]
id = "stripe-connect"
provider = "stripe"
tenant = "acme"
secrets = ["env:TEST_STRIPE_SECRET"]
expect = { livemode = true }
stripe = { connect = true }
[integration.routes]
"payment_intent.succeeded" = { handler = "forward", sink = "audit" }
"v1.billing.meter.error_report_triggered" = { handler = "forward", sink = "audit" }
"#;

/// Each connected account's events and thin events, stored in its own scope, account by
/// account; the accounts and the thin events were listed.
async fn assert_stored_per_connected_account(database: &TestDatabase, api: &StripeApi) {
    let rows: Vec<(String, String)> =
        sqlx::query_as("SELECT event_id, source_scope FROM receipts ORDER BY id")
            .fetch_all(database.pool())
            .await
            .expect("receipts");
    assert_eq!(
        rows,
        [
            ("evt_a1".to_owned(), "stripe-connect/acct_a/live".to_owned()),
            (
                "evt_thin_a1".to_owned(),
                "stripe-connect/acct_a/live".to_owned()
            ),
            (
                "evt_thin_a2".to_owned(),
                "stripe-connect/acct_a/live".to_owned()
            ),
            ("evt_b1".to_owned(), "stripe-connect/acct_b/live".to_owned()),
        ]
    );
    let requests = api.requests();
    assert!(
        requests
            .iter()
            .any(|request| request.starts_with("/v1/accounts?")),
        "{requests:?}"
    );
    assert!(
        requests
            .iter()
            .any(|request| request.starts_with("/v2/core/events?")),
        "{requests:?}"
    );
}

/// Without a way to tell whose events an integration takes, nothing is read.
fn assert_an_integration_of_no_account_reads_nothing(database: &TestDatabase, api: &StripeApi) {
    let scratch = ScratchDir::new();
    let unsaid = config_file_with(
        &scratch,
        r#"
[[integration]]
id = "stripe-unsaid"
provider = "stripe"
tenant = "acme"
secrets = ["env:TEST_STRIPE_SECRET"]
expect = { livemode = true }
[integration.routes]
"payment_intent.succeeded" = { handler = "forward", sink = "audit" }
"#,
    );
    let output = backfill(database, api, &unsaid, "stripe-unsaid", SECRET_KEY, &[]);
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("[integration.stripe]"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A Connect endpoint that takes every connected account: each account's events, listed
/// on its behalf; and thin events from `/v2/core/events` when a route takes them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stripe_backfill_covers_every_connected_account_and_thin_events() {
    let database = TestDatabase::create().await;
    let api = connect_api().await;
    let scratch = ScratchDir::new();
    let config = config_file_with(&scratch, CONNECT_INTEGRATION);
    let stored = summary(&backfill(
        &database,
        &api,
        &config,
        "stripe-connect",
        SECRET_KEY,
        &[],
    ));
    assert_eq!(
        (
            stored["accounts"].as_u64(),
            stored["listed"].as_u64(),
            stored["stored"].as_u64()
        ),
        (Some(2), Some(4), Some(4)),
        "{stored}"
    );
    assert_stored_per_connected_account(&database, &api).await;
    assert_an_integration_of_no_account_reads_nothing(&database, &api);
}

/// A GitHub hook's deliveries: failed ones, one failed and then redelivered, one inbound
/// holds, one failed twice, one before the window, one inbound refused, and more than a
/// page that succeeded; inbound holding `d-held`. The API's first answer is a rate limit.
async fn github_scene(database: &TestDatabase) -> inbound_tests::github_api::GithubApi {
    // Inbound holds d-held (it stored the delivery; GitHub saw it fail on the way back).
    let held_body = json!({"ref": "refs/heads/main", "repository": {"id": 42}}).to_string();
    let headers: Vec<(&str, &[u8])> = vec![
        ("x-github-delivery", b"d-held"),
        ("x-github-event", b"push"),
    ];
    domain::accept_with_headers(
        database.pool(),
        &domain::config(),
        "gh-acme",
        &headers,
        &held_body,
    )
    .await
    .expect("stored");
    let mut deliveries = vec![
        delivery(1, "d-ok", 10, 200),
        delivery(2, "d-failed", 20, 503),
        // Failed, then redelivered by hand successfully: nothing to do.
        delivery(3, "d-recovered", 30, 502),
        delivery(4, "d-recovered", 25, 200),
        delivery(5, "d-held", 40, 504),
        // Failed twice: asked again once, for its newest delivery.
        delivery(6, "d-twice", 50, 500),
        delivery(7, "d-twice", 45, 500),
        // Before the window.
        delivery(8, "d-too-old", 3 * 24 * 60, 500),
        // Refused by inbound for what it is (a bad signature): asking again changes nothing.
        delivery(9, "d-forged", 15, 401),
    ];
    // More than a page of deliveries that succeeded.
    deliveries
        .extend((0..110).map(|index| delivery(100 + index, &format!("d-fine-{index}"), 5, 200)));
    let api = inbound_tests::github_api::GithubApi::start(deliveries).await;
    api.rate_limit_next(1);
    api
}

/// The App's private key written to `scratch`, as a `file:` reference.
fn app_key_reference(scratch: &ScratchDir) -> String {
    let key_path = scratch.path().join("app.pem");
    std::fs::write(&key_path, inbound_tests::github_api::APP_KEY_PEM).expect("key");
    format!("file:{}", key_path.display())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn github_redeliver_asks_again_only_for_what_failed_and_inbound_does_not_hold() {
    use inbound_tests::github_api::{APP_ID, TOKEN};
    let database = TestDatabase::create().await;
    let api = github_scene(&database).await;
    let base = api.base_url();
    let scratch = ScratchDir::new();
    let config = config_file(&scratch);
    let run = |extra: &[&str], env: &[(&str, &str)]| {
        github_redeliver(&database, &config, &base, extra, env)
    };
    let repo = ["--repo", "acme/app", "--hook-id", "123"];
    let token = [("GITHUB_TOKEN", TOKEN)];

    let dry = summary(&run(&[&repo[..], &["--dry-run"]].concat(), &token));
    assert_eq!(
        dry,
        json!({"deliveries": 118, "failed_events": 4, "held": 1, "refused_by_inbound": 1, "redelivered": 2, "refused": 0, "left": 0, "dry_run": true})
    );
    assert!(api.redelivered().is_empty(), "a dry run asks for nothing");
    assert!(
        api.requests()
            .iter()
            .any(|request| request.contains("cursor=100")),
        "the next page was followed"
    );

    let done = summary(&run(&repo, &token));
    assert_eq!(done["redelivered"], 2);
    let mut redelivered = api.redelivered();
    redelivered.sort_unstable();
    assert_eq!(
        redelivered,
        [2, 7],
        "each failed event once, by its newest delivery"
    );

    // --max bounds a run; the rest is left for the next one.
    let bounded = summary(&run(
        &[&repo[..], &["--max", "1", "--dry-run"]].concat(),
        &token,
    ));
    assert_eq!(
        (bounded["redelivered"].as_u64(), bounded["left"].as_u64()),
        (Some(1), Some(1))
    );

    // An App's hook, with the App's JWT.
    let key_file = ScratchDir::new();
    let key_reference = app_key_reference(&key_file);
    let app_id = APP_ID.to_string();
    let app = summary(&run(
        &words(&format!(
            "--app --app-id {app_id} --app-key {key_reference} --dry-run"
        )),
        &[],
    ));
    assert_eq!(app["failed_events"], 4);

    // A token GitHub refuses: one line naming its answer, and exit 1; never the token.
    let refused = run(&repo, &[("GITHUB_TOKEN", "github_pat_wrong")]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("401") && stderr.contains("Bad credentials"),
        "{stderr}"
    );
    assert!(!stderr.contains("github_pat_wrong"), "{stderr}");
}

/// A 4xx can be an outage of ours: a 408 (the body did not arrive in time) is asked again
/// by default; a 401 after a half-done secret rotation or a 404 after renaming an
/// integration, once the operator fixed it, with `--include-status`. GitHub's own guidance
/// redelivers every failed delivery; inbound's held-receipt check keeps it from storing any
/// twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn github_redeliver_asks_again_for_a_408_by_default_and_other_4xx_on_request() {
    use inbound_tests::github_api::{GithubApi, TOKEN};
    let database = TestDatabase::create().await;
    let api = GithubApi::start(vec![
        delivery(1, "d-timeout", 10, 408),
        delivery(2, "d-rotation", 20, 401),
        delivery(3, "d-renamed", 30, 404),
        delivery(4, "d-ok", 40, 200),
    ])
    .await;
    let base = api.base_url();
    let scratch = ScratchDir::new();
    let config = config_file(&scratch);
    let run = |extra: &[&str]| {
        let repo = ["--repo", "acme/app", "--hook-id", "123"];
        github_redeliver(
            &database,
            &config,
            &base,
            &[&repo[..], extra].concat(),
            &[("GITHUB_TOKEN", TOKEN)],
        )
    };
    let counts = |summary: &Value| {
        (
            summary["redelivered"].as_u64(),
            summary["refused_by_inbound"].as_u64(),
        )
    };
    let default = summary(&run(&["--dry-run"]));
    assert_eq!(counts(&default), (Some(1), Some(2)), "{default}");
    let named = summary(&run(&["--dry-run", "--include-status", "401"]));
    assert_eq!(counts(&named), (Some(2), Some(1)), "{named}");
    let every = summary(&run(&["--include-status", "4xx"]));
    assert_eq!(counts(&every), (Some(3), Some(0)), "{every}");
    let mut redelivered = api.redelivered();
    redelivered.sort_unstable();
    assert_eq!(redelivered, [1, 2, 3]);
    let nonsense = run(&["--dry-run", "--include-status", "200"]);
    assert!(!nonsense.status.success());
}

/// How many times the receipts' indexes (every partition's) were scanned in this
/// transaction so far.
async fn receipt_key_scans(connection: &mut sqlx::PgConnection) -> i64 {
    sqlx::query_scalar(
        "SELECT coalesce(sum(pg_stat_get_xact_numscans(i.indexrelid)), 0)::int8
         FROM pg_index i JOIN pg_inherits p ON p.inhrelid = i.indrelid
         WHERE p.inhparent = 'receipts'::regclass",
    )
    .fetch_one(connection)
    .await
    .expect("index statistics")
}

/// `github redeliver` asks which deliveries inbound holds by walking the receipt key's
/// index one scope at a time: only the integration's own scopes, however many scopes
/// other integrations (a Stripe Connect endpoint: one per account and mode) hold — and an
/// integration whose id begins with this one's is another integration.
#[tokio::test]
async fn held_deliveries_are_looked_up_in_the_integrations_own_scopes_only() {
    let database = TestDatabase::create().await;
    sqlx::raw_sql(
        "INSERT INTO receipts (integration, source_scope, event_id, event_type, route_key)
         SELECT 'stripe-connect', 'stripe-connect/acct_' || n || '/live', 'evt_' || n, 't', 't'
         FROM generate_series(1, 3000) n;
         INSERT INTO receipts (integration, source_scope, event_id, event_type, route_key) VALUES
           ('gh', 'gh/installation/1', 'guid-1', 'push', 'push'),
           ('gh', 'gh/installation/2', 'guid-2', 'push', 'push'),
           ('gh', 'gh', 'guid-3', 'push', 'push'),
           ('gh-other', 'gh-other/installation/1', 'guid-4', 'push', 'push'),
           ('gh.b', 'gh.b/installation/1', 'guid-5', 'push', 'push');
         ANALYZE receipts;",
    )
    .execute(database.pool())
    .await
    .expect("receipts");
    let mut connection = database.pool().acquire().await.expect("connection");
    let mut transaction = sqlx::Connection::begin(&mut *connection)
        .await
        .expect("begin");
    let before = receipt_key_scans(&mut transaction).await;
    let held = inbound_store::receipts::held_event_ids(
        &mut transaction,
        "gh",
        &words("guid-1 guid-2 guid-3 guid-4 guid-5 guid-6 evt_7"),
    )
    .await
    .expect("held");
    let scans = receipt_key_scans(&mut transaction).await - before;
    let mut held: Vec<String> = held.into_iter().collect();
    held.sort();
    assert_eq!(held, ["guid-1", "guid-2", "guid-3"]);
    assert!(
        scans < 40,
        "{scans} scans of the receipt key for 3 scopes among 3,000 of another integration"
    );
}
