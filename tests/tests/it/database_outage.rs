//! The database goes away (cut, or stalled mid-commit) between the ingress and PostgreSQL:
//! the ingress answers 503 with `Retry-After`, never 2xx, reports not ready, and recovers
//! without a restart once the database is back.

use std::time::Duration;

use inbound_tests::fixtures::{self, PROVIDERS, Variant};
use inbound_tests::http::{Answer, HttpClient};
use inbound_tests::proxy::{DbProxy, database_addr};
use inbound_tests::stack::StackBuilder;
use inbound_tests::{Service, Stack, TestDatabase};

async fn start() -> Stack {
    with_short_budgets(Stack::builder().through_proxy()).await
}

/// The ingress through the proxy, cut before it starts.
async fn start_with_the_database_down() -> Stack {
    with_short_budgets(Stack::builder().through_a_cut_proxy()).await
}

async fn with_short_budgets(builder: StackBuilder) -> Stack {
    // Short budgets keep the test quick; the behaviour is the same at the defaults.
    builder
        .ingress(|options| {
            options.with_args(&[
                "--db-acquire-timeout-ms",
                "500",
                "--db-statement-timeout-ms",
                "1000",
            ])
        })
        .start()
        .await
}

async fn status_of(stack: &Stack, path: &str) -> u16 {
    stack
        .client
        .get(&stack.ingress.url(path))
        .await
        .expect("an answer")
        .status
}

/// `/readyz` once it answers `expected` (it follows a background probe that pings the
/// database every second); fails the test if it has not within 5 s.
async fn readiness(stack: &Stack, expected: u16) -> u16 {
    inbound_tests::eventually(
        &format!("/readyz answering {expected}"),
        Duration::from_secs(5),
        async || {
            let status = status_of(stack, "/readyz").await;
            if status == expected {
                Ok(status)
            } else {
                Err(status)
            }
        },
    )
    .await
}

fn assert_unavailable(answer: &Answer) {
    assert_eq!(answer.status, 503, "{answer:?}");
    assert_eq!(answer.json, serde_json::json!({"error": "unavailable"}));
    let retry_after = answer
        .headers
        .get("retry-after")
        .and_then(|value| value.to_str().ok());
    assert!(
        retry_after
            .and_then(|value| value.parse::<u64>().ok())
            .is_some_and(|secs| secs > 0),
        "{answer:?}"
    );
}

#[tokio::test]
async fn cut_database_answers_503_then_recovers_without_restart() {
    let stack = start().await;
    assert_eq!(
        stack.deliver_event("evt_before").await.json["status"],
        "accepted"
    );
    assert_eq!(readiness(&stack, 200).await, 200);

    stack.proxy().cut();
    for attempt in 0..3 {
        let answer = stack.deliver_event("evt_during_outage").await;
        assert_unavailable(&answer);
        assert_ne!(answer.status, 200, "attempt {attempt}");
    }
    // Every provider's verified, routed event gets the same 503 while the database is gone.
    for provider in PROVIDERS {
        let answer = stack
            .deliver(&provider.request(Variant::Routed("evt_outage_each")))
            .await;
        assert_unavailable(&answer);
    }
    assert_eq!(readiness(&stack, 503).await, 503);

    stack.proxy().restore();
    let answer = stack.deliver_event("evt_during_outage").await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(
        answer.json["status"], "accepted",
        "the refused delivery is new, not a duplicate"
    );
    assert_eq!(readiness(&stack, 200).await, 200);
    assert_eq!(stack.database.receipt_count().await, 2);
}

#[tokio::test]
async fn stalled_commit_times_out_as_503_and_is_deduplicated_on_redelivery() {
    let stack = start().await;
    assert_eq!(
        stack.deliver_event("evt_warm").await.json["status"],
        "accepted"
    );

    stack.proxy().stall();
    let started = std::time::Instant::now();
    let answer = stack.deliver_event("evt_stalled").await;
    assert_unavailable(&answer);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "bounded by the database budget: {:?}",
        started.elapsed()
    );

    stack.proxy().restore();
    // The stalled statement never reached the server, so the redelivery is new. Either
    // way the provider's retry leaves exactly one receipt.
    let answer = stack.deliver_event("evt_stalled").await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let again = stack.deliver_event("evt_stalled").await;
    assert_eq!(again.json["status"], "duplicate");
    let count: i64 =
        sqlx::query_scalar("SELECT count(*) FROM receipts WHERE event_id = 'evt_stalled'")
            .fetch_one(stack.database.pool())
            .await
            .expect("count");
    assert_eq!(count, 1);
}

#[tokio::test]
async fn ingress_starts_while_the_database_is_down_and_serves_once_it_is_up() {
    let stack = start_with_the_database_down().await;
    assert_eq!(status_of(&stack, "/healthz").await, 200, "alive");
    assert_eq!(readiness(&stack, 503).await, 503, "not ready");
    assert_unavailable(&stack.deliver_event("evt_cold").await);
    stack.proxy().restore();
    assert_eq!(readiness(&stack, 200).await, 200);
    assert_eq!(
        stack.deliver_event("evt_cold").await.json["status"],
        "accepted"
    );
    assert_eq!(stack.database.receipt_count().await, 1);
}

/// `/readyz` on the public port answers from the background probe: anyone may ask it as
/// often as they like, and the database never hears of it. (It used to ping the database
/// once per request, through the pool the receipts need.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn public_readiness_requests_never_reach_the_database() {
    // The queue-age gauges are read once at start and then each minute (the longest
    // interval allowed), so their own reads cannot fall inside the measured window.
    let stack = Stack::builder()
        .through_proxy()
        .ingress(|options| options.with_args(&["--gauge-interval-secs", "60"]))
        .start()
        .await;
    assert_eq!(
        readiness(&stack, 200).await,
        200,
        "ready once the probe answered"
    );
    // The start-up session check (two sessions of its own) and the first read of the
    // queue ages are over.
    inbound_tests::eventually(
        "the session check and the first gauge refresh",
        Duration::from_secs(10),
        async || {
            let checked = stack
                .ingress
                .logs()
                .iter()
                .any(|line| line.contains("database sessions checked"));
            let refreshed = stack.ingress.metrics_page().await.lines().any(|line| {
                line.strip_prefix("inbound_gauges_refreshed_timestamp_seconds ")
                    .and_then(|at| at.trim().parse::<f64>().ok())
                    .is_some_and(|at| at > 0.0)
            });
            (checked && refreshed).then_some(())
        },
    )
    .await;
    let before = stack.proxy().bytes_sent_to_server();
    let requests: Vec<_> = (0..300)
        .map(|_| {
            let (client, url) = (stack.client.clone(), stack.ingress.url("/readyz"));
            tokio::spawn(async move { client.get(&url).await.expect("an answer").status })
        })
        .collect();
    for request in requests {
        assert_eq!(request.await.expect("request"), 200);
    }
    let sent = stack.proxy().bytes_sent_to_server() - before;
    // At most a few of the background probe's own pings (14 bytes each, once a second).
    assert!(
        sent < 200,
        "{sent} bytes reached the database for 300 readiness requests"
    );
}

/// The worker's gauges cannot be refreshed while the database is away: rather than let
/// their last values pass for current, it exports when they were last refreshed
/// (`inbound_gauges_refreshed_timestamp_seconds`), which stops advancing, and an alert
/// reads it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_worker_says_when_its_gauges_were_last_refreshed() {
    let database = TestDatabase::create().await;
    let proxy = DbProxy::start(database_addr(database.url())).await;
    let worker = Service::worker(
        &fixtures::ingress_options(&proxy.rewrite_url(database.url())).with_args(&[
            "--gauge-interval-secs",
            "1",
            "--db-acquire-timeout-ms",
            "500",
        ]),
    );
    let client = HttpClient::new();
    let refreshed = || {
        let (client, url) = (client.clone(), worker.metrics_url("/metrics"));
        async move {
            let page = client.get(&url).await.expect("metrics").body;
            String::from_utf8_lossy(&page)
                .lines()
                .find_map(|line| {
                    line.strip_prefix("inbound_gauges_refreshed_timestamp_seconds ")?
                        .trim()
                        .parse::<f64>()
                        .ok()
                })
                .expect("the refresh timestamp is exported")
        }
    };
    // Each refresh within the bounds the sleeps it replaces gave: 1.5 s at a 1 s interval,
    // 2.5 s once the database is back (a pooled connection is opened again first).
    let advanced_past = async |before: f64, limit: Duration| {
        inbound_tests::eventually(&format!("a refresh after {before}"), limit, async || {
            let now = refreshed().await;
            if now > before { Ok(now) } else { Err(now) }
        })
        .await
    };
    let first = advanced_past(0.0, Duration::from_millis(1500)).await;
    advanced_past(first, Duration::from_millis(1500)).await;
    proxy.cut();
    // A refresh under way when the cut came may still land: then nothing more may.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let during = refreshed().await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(
        refreshed().await,
        during,
        "frozen while the database is away"
    );
    proxy.restore();
    advanced_past(during, Duration::from_millis(2500)).await;
}

/// A process exiting closes its pool; a connection that never comes back (its server
/// went silent under a ping with no time limit, say) must not hold the exit for ever.
#[tokio::test]
async fn closing_the_pool_at_exit_gives_up_on_a_connection_that_never_comes_back() {
    let database = TestDatabase::create().await;
    let pool = inbound_tests::database::connect(database.url()).await;
    let held = pool.acquire().await.expect("a connection");
    let closed = tokio::time::timeout(
        Duration::from_secs(10),
        inbound_runtime::process::close_pool(&pool, Duration::from_millis(300)),
    )
    .await;
    assert!(
        closed.is_ok(),
        "closing the pool waited on the held connection"
    );
    assert!(pool.is_closed(), "no new connection is handed out");
    drop(held);
}
