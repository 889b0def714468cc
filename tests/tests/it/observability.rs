//! What operators see: every metric name the alert rules and the Grafana dashboard use is
//! exported by the running binaries, with HELP text; and the logs of a full run (accept,
//! apply, deliver) never contain a secret, a signature or a payload field.

use std::collections::BTreeSet;
use std::time::Duration;

use inbound_tests::domain::{self, payment_intent, stripe_event};
use inbound_tests::fixtures;
use inbound_tests::signing;
use inbound_tests::sink::TestSink;
use inbound_tests::{Service, ServiceOptions, SignedRequest, Stack, TestDatabase, eventually};
use serde_json::json;

/// A payload field that must never reach a log line.
const PAYLOAD_MARKER: &str = "card-fingerprint-5f3a9c";

fn workspace_file(path: &str) -> String {
    std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(path),
    )
    .unwrap_or_else(|error| panic!("{path}: {error}"))
}

/// Every `inbound_…` metric name in `text`, with histogram suffixes folded into the base.
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let bytes = text.as_bytes();
    let mut index = 0;
    while let Some(offset) = text[index..].find("inbound_") {
        let start = index + offset;
        let preceded_by_word =
            start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_');
        let end = text[start..]
            .find(|character: char| !(character.is_ascii_alphanumeric() || character == '_'))
            .map_or(text.len(), |length| start + length);
        if !preceded_by_word {
            let name = &text[start..end];
            let base = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|suffix| name.strip_suffix(suffix))
                .unwrap_or(name);
            names.insert(base.to_owned());
        }
        index = end;
    }
    names
}

/// Owners and a silence threshold, as an operator writes them.
fn with_owners(mut options: ServiceOptions) -> ServiceOptions {
    let mut config = inbound_tests::config::ConfigEdit::parse(&options.config_toml);
    config.set("stripe-acme", "owner", "payments").set(
        "stripe-acme",
        "alert_when_silent_secs",
        3600,
    );
    config
        .sink("audit")
        .insert("owner".to_owned(), "audit-oncall".into());
    options.config_toml = config.to_toml();
    options
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_and_dashboard_use_only_exported_metrics_and_logs_hold_no_secrets() {
    let sink = TestSink::start().await;
    let sink_url = sink.url();
    let stack = Stack::builder()
        .ingress(with_owners)
        .worker(move |options| {
            fixtures::with_audit_sink(with_owners(options), &sink_url, false).with_args(&[
                "--poll-interval-ms",
                "50",
                "--gauge-interval-secs",
                "1",
            ])
        })
        .start()
        .await;
    let (ingress, worker) = (&stack.ingress, stack.worker());
    let signature = observed_traffic(&stack, &sink).await;
    let mut exported = BTreeSet::new();
    for (service, role) in [(ingress, "ingress"), (worker, "worker")] {
        exported.extend(exports_of(&stack.client, service, role).await);
    }
    rules_use_only(&exported);
    let mut logs = ingress.logs();
    logs.extend(worker.logs());
    assert!(
        logs.iter()
            .any(|line| line.contains("\"effect\"") && line.contains("order.paid:acme:o1")),
        "effect attempts are logged"
    );
    for line in &logs {
        for secret in fixtures::ALL_SECRETS
            .iter()
            .chain([&signature.as_str(), &PAYLOAD_MARKER])
        {
            assert!(!line.contains(secret), "{secret} reached the log: {line}");
        }
    }
}

/// One event through everything (accepted, applied, delivered), a forged one, and what
/// the out-of-scope and Slack alerts count; returns the accepted delivery's signature.
async fn observed_traffic(stack: &Stack, sink: &TestSink) -> String {
    let pool = stack.pool();
    domain::seed_order(pool, "o1", "pi_1", 1000, "usd").await;
    let mut object = payment_intent("pi_1", "o1", 1000, "usd", "succeeded");
    object["payment_method_details"] = serde_json::json!({"fingerprint": PAYLOAD_MARKER});
    let body = stripe_event("evt_observed", "payment_intent.succeeded", object);
    let request = SignedRequest::stripe(body.clone());
    let signature = request
        .headers
        .iter()
        .find(|(name, _)| name == "stripe-signature")
        .map(|(_, value)| value.clone())
        .expect("signed");
    assert_eq!(stack.deliver(&request).await.json["status"], "accepted");
    let forged = SignedRequest::stripe_signed("whsec_forged", body, 0);
    assert_eq!(stack.deliver(&forged).await.status, 401);
    // What the out-of-scope and Slack alerts count: a test-mode event at the live
    // integration, and Slack's rate-limit notice.
    let test_mode = stripe_event("evt_test_mode", "payment_intent.succeeded", json!({}))
        .replace("\"livemode\":true", "\"livemode\":false");
    assert_eq!(
        stack.deliver(&SignedRequest::stripe(test_mode)).await.json["status"],
        "ignored"
    );
    let notice = json!({"token": "t", "type": "app_rate_limited", "team_id": "T1",
        "minute_rate_limited": 1518467820, "api_app_id": "A1"})
    .to_string();
    let notice = SignedRequest::new(
        "slack-acme",
        signing::slack_headers(fixtures::SLACK_SECRET, &notice, 0),
        notice,
    );
    assert_eq!(stack.deliver(&notice).await.json["status"], "ignored");
    eventually(
        "the effect delivered",
        Duration::from_secs(20),
        async || (!sink.received().is_empty()).then_some(()),
    )
    .await;
    // The sink answered; the outcome is recorded, counted and logged after that.
    let finished = "inbound_effects_finished_total{sink=\"audit\",status=\"completed\"} 1";
    eventually(finished, Duration::from_secs(10), async || {
        let page = stack
            .client
            .get(&stack.worker().metrics_url("/metrics"))
            .await
            .expect("metrics");
        let logged = stack
            .worker()
            .logs()
            .iter()
            .any(|line| line.contains("\"effect\"") && line.contains("order.paid:acme:o1"));
        (String::from_utf8_lossy(&page.body).contains(finished) && logged).then_some(())
    })
    .await;

    signature
}

/// The metric names `service` (the `role`) exports, each checked for HELP text, beside
/// the series every process and its role must export.
async fn exports_of(
    client: &inbound_tests::http::HttpClient,
    service: &Service,
    role: &str,
) -> BTreeSet<String> {
    let mut exported = BTreeSet::new();
    // CPU time to the hundredth: every process here has used some, which whole seconds
    // would read as 0. The kernel counts it in ticks of 10 ms, which a process that has
    // done little since it started may not have reached yet: the page is read again (each
    // read costs the process some) until it has. Whole seconds would not get there in
    // this time.
    let what = format!("{role}'s process_cpu_seconds_total above 0");
    let text = eventually(&what, Duration::from_secs(10), async || {
        let text = String::from_utf8(
            client
                .get(&service.metrics_url("/metrics"))
                .await
                .expect("metrics")
                .body
                .to_vec(),
        )
        .expect("utf-8");
        let cpu: f64 = text
            .lines()
            .find_map(|line| line.strip_prefix("process_cpu_seconds_total "))
            .and_then(|value| value.trim().parse().ok())
            .expect("process_cpu_seconds_total");
        (cpu > 0.0).then_some(text)
    })
    .await;
    for name in metric_names(&text) {
        assert!(
            text.contains(&format!("# HELP {name} ")),
            "{name} has no HELP text"
        );
        exported.insert(name);
    }
    // Every process: its build, its process series, its pool, and the owners.
    for wanted in [
        format!("inbound_build_info{{version=\"{}\",role=\"{role}\"}} 1", env!("CARGO_PKG_VERSION")),
        "process_cpu_seconds_total ".to_owned(),
        "process_resident_memory_bytes ".to_owned(),
        "process_open_fds ".to_owned(),
        "inbound_db_pool_connections{state=\"in_use\"} ".to_owned(),
        "inbound_db_pool_connections{state=\"idle\"} ".to_owned(),
        "inbound_db_pool_max_connections ".to_owned(),
        "inbound_db_pool_acquire_seconds_count ".to_owned(),
        "inbound_integration_info{integration=\"stripe-acme\",provider=\"stripe\",owner=\"payments\"} 1".to_owned(),
        "inbound_integration_provider_timeout_seconds{integration=\"stripe-acme\"} 10".to_owned(),
        "inbound_integration_silence_alert_seconds{integration=\"stripe-acme\"} 3600".to_owned(),
        "inbound_sink_info{sink=\"audit\",owner=\"audit-oncall\"} 1".to_owned(),
    ] {
        assert!(text.contains(&wanted), "{role} does not export `{wanted}`: {text}");
    }
    if role == "worker" {
        for wanted in [
            "inbound_effects_finished_total{sink=\"audit\",status=\"completed\"} 1",
            "inbound_effect_delivery_seconds_count{sink=\"audit\"} 1",
            "inbound_effects{sink=\"audit\",state=\"review\"} 0",
            "inbound_receipts_for_review{integration=\"stripe-acme\",state=\"failed\"} 0",
        ] {
            assert!(
                text.contains(wanted),
                "the worker does not export `{wanted}`: {text}"
            );
        }
    } else {
        // The accepted delivery moved the silence clock.
        let delivered = text
            .lines()
            .find_map(|line| {
                line.strip_prefix(
                    "inbound_ingress_last_delivery_timestamp_seconds{integration=\"stripe-acme\"} ",
                )
            })
            .and_then(|value| value.parse::<f64>().ok())
            .expect("the stripe-acme silence clock");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_secs_f64();
        assert!((now - delivered).abs() < 60.0, "{delivered} vs {now}");
        // Every integration's serving clock exists from the start; no delivery clock
        // for one that never delivered (a restart must not look like a delivery).
        assert!(
            text.contains(
                "inbound_ingress_integration_since_timestamp_seconds{integration=\"gh-acme\"} "
            ),
            "{text}"
        );
        assert!(
            !text.contains(
                "inbound_ingress_last_delivery_timestamp_seconds{integration=\"gh-acme\"}"
            ),
            "{text}"
        );
    }
    exported
}

/// Every metric the alert rules, the dashboard and the KEDA scalers read is one a binary
/// exports.
fn rules_use_only(exported: &BTreeSet<String>) {
    for file in [
        "deploy/prometheus/alerts.yaml",
        "deploy/grafana/inbound.json",
        "deploy/kubernetes/components/keda/worker-scaledobject.yaml",
        "deploy/kubernetes/components/dispatcher-keda/dispatcher-scaledobject.yaml",
    ] {
        let used = metric_names(&workspace_file(file));
        assert!(!used.is_empty(), "{file} names no metric");
        let missing: Vec<&String> = used.difference(exported).collect();
        assert!(
            missing.is_empty(),
            "{file} uses metrics no binary exports: {missing:?} (exported: {exported:?})"
        );
    }
}

/// What must never reach a log line, a metric or an error body: personal data from
/// payloads, amounts, and the secret parts of sink URLs.
const NEVER_LOGGED: &[&str] = &[
    "Leakwell",
    "jane.leakwell@example.com",
    "42 Leakage Street",
    "+1-555-0142-77",
    "918273645",
    "564738291",
    "112233445",
    "T0KEN-in-the-path",
    "query-s3cret",
    "pa55w0rd-93ab",
];

fn leaks(text: &str) -> Vec<&'static str> {
    NEVER_LOGGED
        .iter()
        .filter(|needle| text.contains(*needle))
        .copied()
        .collect()
}

/// A stack whose audit sink's URL carries credentials (userinfo, a path token, a query
/// token) and is given as a secret reference; every delivery hangs until the 1 s timeout.
async fn start_with_a_secret_hanging_sink(sink: &TestSink) -> Stack {
    let secret_url = sink.url().replace("http://", "http://hook:pa55w0rd-93ab@")
        + "/T0KEN-in-the-path?token=query-s3cret";
    sink.script((0..10).map(|_| inbound_tests::sink::Answer::Hang));
    let with_secret_sink = move |mut options: ServiceOptions| {
        let mut config = inbound_tests::config::ConfigEdit::parse(&options.config_toml);
        let sink = config.sink("audit");
        sink.insert("url".to_owned(), "env:TEST_AUDIT_URL".into());
        sink.insert("timeout_secs".to_owned(), 1.into());
        options.config_toml = config.to_toml();
        options.env.push(("TEST_AUDIT_URL".to_owned(), secret_url));
        options
    };
    Stack::builder()
        .ingress(with_secret_sink.clone())
        .worker(move |options| {
            with_secret_sink(options).with_args(&[
                "--poll-interval-ms",
                "50",
                "--gauge-interval-secs",
                "1",
            ])
        })
        .start()
        .await
}

/// The personal data every payload here carries.
fn person() -> serde_json::Value {
    serde_json::json!({
        "name": "Jane Q. Leakwell",
        "email": "jane.leakwell@example.com",
        "phone": "+1-555-0142-77",
        "address": {"line1": "42 Leakage Street", "city": "Leakville"},
    })
}

/// Three accepted events carrying personal data and amounts: one paid in full, one paid
/// the wrong amount, one refunded in part.
async fn deliver_accepted_events_with_personal_data(stack: &Stack) {
    let pool = stack.pool();
    // Paid in full: applied, and its effect hangs at the sink (timed out → review).
    domain::seed_order(pool, "o1", "pi_1", 918_273_645, "usd").await;
    let mut paid = payment_intent("pi_1", "o1", 918_273_645, "usd", "succeeded");
    paid["billing_details"] = person();
    // Paid the wrong amount: quarantined.
    domain::seed_order(pool, "o2", "pi_2", 112_233_445, "usd").await;
    let mut wrong = payment_intent("pi_2", "o2", 564_738_291, "usd", "succeeded");
    wrong["billing_details"] = person();
    // Refunded in part: ignored.
    let mut partial = domain::charge("pi_1", 918_273_645, 564_738_291);
    partial["billing_details"] = person();
    for (event_id, event_type, object) in [
        ("evt_paid", "payment_intent.succeeded", paid),
        ("evt_wrong", "payment_intent.succeeded", wrong),
        ("evt_partial", "charge.refunded", partial),
    ] {
        let body = stripe_event(event_id, event_type, object);
        let answer = stack.deliver(&SignedRequest::stripe(body)).await;
        assert_eq!(answer.json["status"], "accepted", "{answer:?}");
    }
}

/// Refused requests whose bodies carry the same data (malformed, and forged); returns the
/// error bodies they were answered with.
async fn refused_error_bodies_of_personal_data(stack: &Stack) -> Vec<String> {
    let mut error_bodies = Vec::new();
    let mut malformed = serde_json::json!({"id": "evt_bad", "type": "payment_intent.succeeded", "livemode": true, "account": "acct_123"});
    malformed["id"] = person();
    let malformed = malformed.to_string();
    for request in [
        SignedRequest::stripe(malformed.clone()),
        SignedRequest::stripe_signed("whsec_forged", malformed, 0),
    ] {
        let answer = stack.deliver(&request).await;
        assert!(answer.status >= 400, "{answer:?}");
        error_bodies.push(String::from_utf8_lossy(&answer.body).into_owned());
    }
    error_bodies
}

/// Waits until each receipt is finished and the effect has been judged; the wrong amount
/// was quarantined.
async fn wait_until_everything_is_judged(pool: &sqlx::PgPool) {
    eventually("four settled", Duration::from_secs(20), async || {
        let settled: i64 = sqlx::query_scalar(
            "SELECT (SELECT count(*) FROM receipts WHERE status <> 'pending')
                  + (SELECT count(*) FROM effects WHERE status = 'review')",
        )
        .fetch_one(pool)
        .await
        .expect("count");
        if settled == 4 { Ok(()) } else { Err(settled) }
    })
    .await;
    let second: i64 = sqlx::query_scalar("SELECT id FROM receipts ORDER BY id OFFSET 1 LIMIT 1")
        .fetch_one(pool)
        .await
        .expect("the second receipt");
    let (status, _, reason) = domain::receipt_state(pool, second).await;
    assert_eq!(
        status,
        inbound_core::states::ReceiptStatus::Quarantined,
        "the wrong amount was judged: {reason:?}"
    );
}

/// The metrics pages of the ingress and the worker.
async fn metrics_pages(stack: &Stack) -> Vec<String> {
    let mut pages = Vec::new();
    for service in [&stack.ingress, stack.worker()] {
        let page = stack
            .client
            .get(&service.metrics_url("/metrics"))
            .await
            .expect("metrics");
        pages.push(String::from_utf8_lossy(&page.body).into_owned());
    }
    pages
}

/// The log lines of the ingress and the worker; the hung delivery is among them.
fn logs_with_the_hung_delivery(stack: &Stack) -> Vec<String> {
    let mut logs = stack.ingress.logs();
    logs.extend(stack.worker().logs());
    assert!(
        logs.iter()
            .any(|line| line.contains("\"effect\"") && line.contains("\"review\"")),
        "the hung delivery was logged"
    );
    logs
}

/// The errors stored for effects and their attempts.
async fn stored_effect_errors(pool: &sqlx::PgPool) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT coalesce(last_error, '') FROM effects
         UNION ALL SELECT coalesce(error, '') FROM effect_attempts",
    )
    .fetch_all(pool)
    .await
    .expect("errors")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn personal_data_amounts_and_url_tokens_never_reach_logs_metrics_or_error_bodies() {
    let sink = TestSink::start().await;
    let stack = start_with_a_secret_hanging_sink(&sink).await;
    deliver_accepted_events_with_personal_data(&stack).await;
    let error_bodies = refused_error_bodies_of_personal_data(&stack).await;
    wait_until_everything_is_judged(stack.pool()).await;

    let pages = metrics_pages(&stack).await;
    let logs = logs_with_the_hung_delivery(&stack);
    let stored_errors = stored_effect_errors(stack.pool()).await;
    for (what, texts) in [
        ("log line", &logs),
        ("metrics page", &pages),
        ("error body", &error_bodies),
        ("stored effect error", &stored_errors),
    ] {
        for text in texts {
            assert!(
                leaks(text).is_empty(),
                "{:?} reached a {what}: {text}",
                leaks(text)
            );
        }
    }
}

/// A delivery no route takes (a misspelled route key, say) is answered 200 `ignored` and
/// stored nowhere: the log line names its type, and a counter per integration and type
/// shows it, so the silent drop can be seen and alerted on. The type label is bounded.
#[tokio::test]
async fn ignored_deliveries_are_logged_and_counted_by_type() {
    let stack = Stack::start().await;
    let (ingress, client) = (&stack.ingress, &stack.client);
    for event_id in ["evt_unrouted_1", "evt_unrouted_2"] {
        let body = stripe_event(
            event_id,
            "customer.created",
            serde_json::json!({"id": "cus_1"}),
        );
        let answer = stack.deliver(&SignedRequest::stripe(body)).await;
        assert_eq!(answer.json["status"], "ignored");
    }
    eventually(
        "an ignored line naming the type",
        Duration::from_secs(5),
        async || {
            let logs = ingress.logs();
            let named = logs.iter().any(|line| {
                line.contains("\"outcome\":\"ignored\"")
                    && line.contains("\"event_type\":\"customer.created\"")
            });
            if named {
                Ok(())
            } else {
                Err(format!("{logs:#?}"))
            }
        },
    )
    .await;
    let metrics = client
        .get(&ingress.metrics_url("/metrics"))
        .await
        .expect("metrics");
    let page = String::from_utf8_lossy(&metrics.body).into_owned();
    assert!(
        page.lines()
            .any(|line| line.starts_with("inbound_ingress_ignored_total{")
                && line.contains("event_type=\"customer.created\"")
                && line.contains("integration=\"stripe-acme\"")
                && line.ends_with(" 2")),
        "{page}"
    );
    assert_eq!(stack.database.receipt_count().await, 0);
}

/// An effect attempt that could not be sent is logged with why (connection refused,
/// here), so a retry storm can be read from the logs alone.
#[tokio::test]
async fn an_effect_retry_line_says_what_went_wrong() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    domain::seed_order(pool, "o1", "pi_1", 1000, "usd").await;
    // The fixture's audit sink is 127.0.0.1:9, where nothing listens.
    let worker = Service::worker(
        &fixtures::ingress_options(database.url()).with_args(&["--poll-interval-ms", "50"]),
    );
    let body = stripe_event(
        "evt_unsent",
        "payment_intent.succeeded",
        payment_intent("pi_1", "o1", 1000, "usd", "succeeded"),
    );
    domain::accept(pool, &domain::config(), &body)
        .await
        .expect("new");
    let line = eventually(
        "a not_sent effect line",
        Duration::from_secs(15),
        async || {
            let logs = worker.logs();
            logs.iter()
                .find(|line| {
                    line.contains("\"message\":\"effect\"")
                        && line.contains("\"outcome\":\"not_sent\"")
                })
                .cloned()
                .ok_or_else(|| format!("{logs:#?}"))
        },
    )
    .await;
    assert!(line.contains("\"error\":\""), "no error text: {line}");
}

/// The drill "all workers gone, traffic continues": the age that pages and scales must not
/// vanish with the role it scales. The ingress, running alone as its own least-privilege
/// role, exports the claimable age of the receipts it accepted (and when it last read
/// them), so the alert and KEDA see the backlog grow with no worker up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_every_worker_gone_the_ingress_exports_the_age_of_what_it_accepted() {
    use inbound_store::roles::Process;
    let database = TestDatabase::create().await;
    let roles = inbound_tests::database::TestRoles::create(&database).await;
    let ingress = Service::ingress(
        &fixtures::ingress_options(&roles.url(database.url(), Process::Ingress))
            .with_args(&["--gauge-interval-secs", "1"]),
    );
    let client = inbound_tests::http::HttpClient::new();
    let answer = SignedRequest::stripe(stripe_event(
        "evt_no_worker",
        "payment_intent.succeeded",
        payment_intent("pi_no_worker", "order_none", 100, "usd", "succeeded"),
    ))
    .send(&client, &ingress)
    .await
    .expect("answer");
    assert_eq!(answer.status, 200, "{answer:?}");
    let value = |page: &str, series: &str| -> Option<f64> {
        page.lines()
            .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
    };
    let page = inbound_tests::eventually(
        "the ingress's pending age of stripe-acme above 1 s",
        Duration::from_secs(15),
        async || {
            let page = ingress.metrics_page().await;
            (value(
                &page,
                "inbound_oldest_pending_age_seconds{integration=\"stripe-acme\"}",
            )? > 1.0)
                .then_some(page)
        },
    )
    .await;
    assert!(
        value(&page, "inbound_gauges_refreshed_timestamp_seconds").is_some_and(|at| at > 0.0),
        "{page}"
    );
    assert_eq!(
        value(
            &page,
            "inbound_oldest_pending_age_seconds{integration=\"gh-acme\"}"
        ),
        Some(0.0),
        "{page}"
    );
    assert!(
        !ingress
            .logs()
            .iter()
            .any(|line| line.contains("could not refresh")),
        "{:#?}",
        ingress.logs()
    );
}
