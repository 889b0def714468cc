//! Each provider's own recovery, run by `inboundctl` against a local server with the
//! documented API shape (never the real service): `stripe backfill` pages through the
//! events API, stores what inbound does not hold as `api`-provenance receipts exactly once,
//! leaves what it holds, does not route or may not accept alone, and says so.

use std::process::{Command, Output};

use chrono::Utc;
use inbound_tests::process::{ScratchDir, binary};
use inbound_tests::stripe_api::{API_KEY, StripeApi};
use inbound_tests::{TestDatabase, domain, fixtures};
use serde_json::{Value, json};

fn inboundctl(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(binary("inboundctl"))
        .args(args)
        .env_remove("DATABASE_URL")
        .env_remove("INBOUND_CONFIG")
        .env_remove("STRIPE_API_KEY")
        .env("INBOUND_OPERATOR", "ops-test")
        // The configuration's own secrets (the ingress's), then the test's.
        .envs(fixtures::secret_env())
        .envs(env.iter().copied())
        .output()
        .expect("run inboundctl")
}

/// The suites' configuration (integration `stripe-acme`: account `acct_123`, live mode).
fn config_file(scratch: &ScratchDir) -> String {
    let options = fixtures::ingress_options("unused");
    for (name, contents) in &options.files {
        std::fs::write(scratch.path().join(name), contents).expect("write file");
    }
    let config = options
        .config_toml
        .replace("{scratch}", &scratch.path().display().to_string());
    let path = scratch.path().join("config.toml");
    std::fs::write(&path, config).expect("write config");
    path.display().to_string()
}

fn event(id: &str, event_type: &str, created: i64, account: &str) -> Value {
    json!({
        "id": id, "object": "event", "type": event_type, "created": created,
        "livemode": true, "account": account,
        "data": {"object": {"id": format!("pi_{id}"), "object": "payment_intent"}}
    })
}

fn summary(output: &Output) -> Value {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("a JSON summary")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stripe_backfill_stores_what_inbound_missed_exactly_once() {
    let database = TestDatabase::create().await;
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
    let scratch = ScratchDir::new();
    let config = config_file(&scratch);
    let base = api.base_url();
    let args = |extra: &[&'static str]| -> Vec<String> {
        let mut args: Vec<String> = [
            "stripe",
            "backfill",
            "--config",
            &config,
            "--integration",
            "stripe-acme",
            "--since",
            "2d",
            "--api-base",
            &base,
            "--requests-per-second",
            "100",
            "--json",
        ]
        .iter()
        .map(|arg| (*arg).to_owned())
        .collect();
        args.extend(extra.iter().map(|arg| (*arg).to_owned()));
        args
    };
    let env = [
        ("DATABASE_URL", database.url()),
        ("STRIPE_API_KEY", API_KEY),
    ];
    let run = |extra: &[&'static str]| {
        let args = args(extra);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        inboundctl(&refs, &env)
    };

    // A dry run counts and stores nothing (through a 429 it waits out).
    let dry = summary(&run(&["--dry-run"]));
    assert_eq!(
        dry,
        json!({"listed": 124, "stored": 2, "held": 1, "not_routed": 120, "other_scope": 1, "malformed": 0, "dry_run": true})
    );
    assert_eq!(database.receipt_count().await, 1);
    let requests = api.requests();
    assert!(
        requests.len() >= 3,
        "a 429 retried and two pages: {requests:?}"
    );
    assert!(
        requests
            .iter()
            .any(|query| query.contains("starting_after=evt_"))
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

    // Again: nothing new.
    let again = summary(&run(&[]));
    assert_eq!(
        (again["stored"].as_u64(), again["held"].as_u64()),
        (Some(0), Some(3))
    );
    assert_eq!(database.receipt_count().await, 3);

    // A key Stripe refuses: one line naming Stripe's answer, and exit 1.
    let refused = inboundctl(
        &args(&[]).iter().map(String::as_str).collect::<Vec<_>>(),
        &[
            ("DATABASE_URL", database.url()),
            ("STRIPE_API_KEY", "rk_test_wrong"),
        ],
    );
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("401") && stderr.contains("Invalid API Key"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("rk_test_wrong"),
        "the key is never shown: {stderr}"
    );
}
