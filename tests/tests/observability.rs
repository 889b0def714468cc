//! What operators see: every metric name the alert rules and the Grafana dashboard use is
//! exported by the running binaries, with HELP text; and the logs of a full run (accept,
//! apply, deliver) never contain a secret, a signature or a payload field.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use inbound_tests::domain::{self, payment_intent, stripe_event};
use inbound_tests::fixtures;
use inbound_tests::http::HttpClient;
use inbound_tests::signing;
use inbound_tests::sink::TestSink;
use inbound_tests::{Service, TestDatabase};

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_and_dashboard_use_only_exported_metrics_and_logs_hold_no_secrets() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let sink = TestSink::start().await;
    domain::seed_order(pool, "o1", "pi_1", 1000, "usd").await;
    let ingress = Service::ingress(&fixtures::ingress_options(database.url()));
    let worker_options = fixtures::with_audit_sink(
        fixtures::ingress_options(database.url()),
        &sink.url(),
        false,
    )
    .with_args(&["--poll-interval-ms", "50", "--gauge-interval-secs", "1"]);
    let worker = Service::worker(&worker_options);

    // One event through everything: accepted, applied, delivered; plus a forged one.
    let mut object = payment_intent("pi_1", "o1", 1000, "usd", "succeeded");
    object["payment_method_details"] = serde_json::json!({"fingerprint": PAYLOAD_MARKER});
    let body = stripe_event("evt_observed", "payment_intent.succeeded", object);
    let headers = signing::stripe_headers(fixtures::STRIPE_SECRET, &body, 0);
    let signature = headers
        .iter()
        .find(|(name, _)| name == "stripe-signature")
        .map(|(_, value)| value.clone())
        .expect("signed");
    let client = HttpClient::new();
    let url = ingress.webhook_url("stripe-acme");
    assert_eq!(
        client
            .post(&url, &headers, body.clone())
            .await
            .expect("answer")
            .json["status"],
        "accepted"
    );
    let forged = signing::stripe_headers("whsec_forged", &body, 0);
    assert_eq!(
        client
            .post(&url, &forged, body)
            .await
            .expect("answer")
            .status,
        401
    );
    let started = Instant::now();
    while sink.received().is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the effect was never delivered"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;

    let mut exported = BTreeSet::new();
    for service in [&ingress, &worker] {
        let text = String::from_utf8(
            client
                .get(&service.metrics_url("/metrics"))
                .await
                .expect("metrics")
                .body
                .to_vec(),
        )
        .expect("utf-8");
        for name in metric_names(&text) {
            assert!(
                text.contains(&format!("# HELP {name} ")),
                "{name} has no HELP text"
            );
            exported.insert(name);
        }
    }
    for file in [
        "deploy/prometheus/alerts.yaml",
        "deploy/grafana/inbound.json",
        "deploy/kubernetes/base/worker-scaledobject.yaml",
    ] {
        let used = metric_names(&workspace_file(file));
        assert!(!used.is_empty(), "{file} names no metric");
        let missing: Vec<&String> = used.difference(&exported).collect();
        assert!(
            missing.is_empty(),
            "{file} uses metrics no binary exports: {missing:?} (exported: {exported:?})"
        );
    }

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
