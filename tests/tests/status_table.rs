//! Every row of docs/contract.md's HTTP status table, for every provider, through the real
//! `inbound-ingress` binary against a real database — and no configured secret in its logs.

use inbound_tests::fixtures::{self, PROVIDERS, Provider, Variant};
use inbound_tests::http::{Answer, HttpClient};
use inbound_tests::{Service, TestDatabase};

struct Harness {
    database: TestDatabase,
    ingress: Service,
    client: HttpClient,
}

async fn start() -> Harness {
    let database = TestDatabase::create().await;
    let ingress = Service::ingress(&fixtures::ingress_options(database.url()));
    Harness {
        database,
        ingress,
        client: HttpClient::new(),
    }
}

impl Harness {
    async fn send(&self, provider: Provider, variant: Variant<'_>) -> Answer {
        let (headers, body) = provider.request(variant);
        self.client
            .post(
                &self.ingress.webhook_url(provider.integration()),
                &headers,
                body,
            )
            .await
            .expect("an answer")
    }
}

fn assert_status(answer: &Answer, status: u16, context: &str) {
    assert_eq!(answer.status, status, "{context}: {answer:?}");
    assert_eq!(
        answer
            .headers
            .get("content-type")
            .and_then(|value| value.to_str().ok()),
        Some("application/json"),
        "{context}"
    );
}

async fn status_table_for(provider: Provider) {
    let harness = start().await;
    let name = format!("{provider:?}");
    let event_id = format!("evt-{}", name.to_lowercase());

    // 200 accepted, with the committed receipt's id.
    let accepted = harness.send(provider, Variant::Routed(&event_id)).await;
    assert_status(&accepted, 200, &format!("{name} accepted"));
    assert_eq!(accepted.json["status"], "accepted", "{name}");
    let receipt_id = accepted.json["receipt_id"].as_i64().expect("receipt_id");
    assert!(
        harness.database.receipt_is_committed(receipt_id).await,
        "{name}: receipt committed"
    );
    let (stored_event_id, integration): (String, String) =
        sqlx::query_as("SELECT event_id, integration FROM receipts WHERE id = $1")
            .bind(receipt_id)
            .fetch_one(harness.database.pool())
            .await
            .expect("receipt row");
    assert_eq!(
        (stored_event_id.as_str(), integration.as_str()),
        (event_id.as_str(), provider.integration())
    );

    // 200 duplicate: same receipt key, nothing new stored.
    let duplicate = harness.send(provider, Variant::Routed(&event_id)).await;
    assert_status(&duplicate, 200, &format!("{name} duplicate"));
    assert_eq!(duplicate.json, serde_json::json!({"status": "duplicate"}));
    assert_eq!(
        harness.database.receipt_count().await,
        1,
        "{name}: one receipt"
    );

    // 200 ignored: verified, unrouted, not stored.
    let ignored = harness
        .send(provider, Variant::Unrouted(&format!("{event_id}-unrouted")))
        .await;
    assert_status(&ignored, 200, &format!("{name} ignored"));
    assert_eq!(ignored.json, serde_json::json!({"status": "ignored"}));
    assert_eq!(
        harness.database.receipt_count().await,
        1,
        "{name}: ignored is not stored"
    );

    // 400 malformed: verified, but no event id (type, for Standard Webhooks).
    let malformed = harness.send(provider, Variant::NoEventId).await;
    assert_status(&malformed, 400, &format!("{name} malformed"));
    assert_eq!(malformed.json["error"], "malformed", "{name}");

    // 401: wrong secret; and a malformed body with a bad signature is 401, not 400.
    for variant in [
        Variant::WrongSecret("evt-wrong"),
        Variant::GarbageWithBadSignature,
    ] {
        let unauthorized = harness.send(provider, variant).await;
        assert_status(&unauthorized, 401, &format!("{name} {variant:?}"));
        assert_eq!(
            unauthorized.json,
            serde_json::json!({"error": "unauthorized"}),
            "{name}: no detail"
        );
    }
    // 401 without any signature headers.
    let (_, body) = provider.request(Variant::Routed("evt-unsigned"));
    let unsigned = harness
        .client
        .post(
            &harness.ingress.webhook_url(provider.integration()),
            &[],
            body,
        )
        .await
        .expect("answer");
    assert_status(&unsigned, 401, &format!("{name} unsigned"));

    // 401: timestamp outside tolerance, both ways.
    if provider.signs_timestamp() {
        for age in [301 + 60, -(301 + 60)] {
            let stale = harness.send(provider, Variant::Aged("evt-aged", age)).await;
            assert_status(&stale, 401, &format!("{name} aged {age}"));
        }
        let fresh_enough = harness
            .send(provider, Variant::Aged(&format!("{event_id}-aged-ok"), 200))
            .await;
        assert_status(&fresh_enough, 200, &format!("{name} inside tolerance"));
    }

    // 403: verified, but another account/installation/team.
    if provider.has_scope() {
        let forbidden = harness
            .send(provider, Variant::ForeignScope("evt-foreign"))
            .await;
        assert_status(&forbidden, 403, &format!("{name} forbidden"));
        assert_eq!(forbidden.json["error"], "forbidden");
    }

    // 404 unknown integration.
    let (headers, body) = provider.request(Variant::Routed("evt-404"));
    let unknown = harness
        .client
        .post(
            &harness.ingress.webhook_url("no-such-integration"),
            &headers,
            body,
        )
        .await
        .expect("answer");
    assert_status(&unknown, 404, &format!("{name} unknown integration"));
    assert_eq!(
        unknown.json,
        serde_json::json!({"error": "unknown_integration"})
    );

    // 413 over the limit, checked before the signature (this one is unsigned).
    let oversized = "x".repeat(fixtures::MAX_BODY_BYTES + 1);
    let too_large = harness
        .client
        .post(
            &harness.ingress.webhook_url(provider.integration()),
            &[],
            oversized,
        )
        .await
        .expect("answer");
    assert_status(&too_large, 413, &format!("{name} too large"));
    assert_eq!(
        too_large.json,
        serde_json::json!({"error": "payload_too_large"})
    );

    // 405 for another method on the webhook route.
    let get = harness
        .client
        .get(&harness.ingress.webhook_url(provider.integration()))
        .await
        .expect("answer");
    assert_status(&get, 405, &format!("{name} GET"));
    assert_eq!(
        get.headers
            .get("allow")
            .and_then(|value| value.to_str().ok()),
        Some("POST")
    );

    let expected_receipts = if provider.signs_timestamp() { 2 } else { 1 };
    assert_eq!(
        harness.database.receipt_count().await,
        expected_receipts,
        "{name}: nothing else stored"
    );
    assert_no_secret_in_logs(&harness.ingress);
}

fn assert_no_secret_in_logs(ingress: &Service) {
    let logs = ingress.logs();
    assert!(
        logs.iter().any(|line| line.contains("\"webhook\"")),
        "request lines are logged"
    );
    for line in &logs {
        for secret in fixtures::ALL_SECRETS {
            assert!(!line.contains(secret), "a secret reached the log: {line}");
        }
    }
}

#[tokio::test]
async fn stripe_status_table() {
    status_table_for(Provider::Stripe).await;
}

#[tokio::test]
async fn github_status_table() {
    status_table_for(Provider::Github).await;
}

#[tokio::test]
async fn slack_status_table() {
    status_table_for(Provider::Slack).await;
}

#[tokio::test]
async fn standard_status_table() {
    status_table_for(Provider::Standard).await;
}

#[tokio::test]
async fn slack_url_verification_echoes_the_challenge_only_when_verified() {
    let harness = start().await;
    let body = r#"{"token":"legacy","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}"#;
    let headers = inbound_tests::signing::slack_headers(fixtures::SLACK_SECRET, body, 0);
    let url = harness.ingress.webhook_url("slack-acme");
    let answer = harness
        .client
        .post(&url, &headers, body)
        .await
        .expect("answer");
    assert_status(&answer, 200, "challenge");
    assert_eq!(
        answer.json,
        serde_json::json!({"challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"})
    );
    let forged = inbound_tests::signing::slack_headers("not-the-secret", body, 0);
    let answer = harness
        .client
        .post(&url, &forged, body)
        .await
        .expect("answer");
    assert_status(&answer, 401, "forged challenge");
    assert_eq!(harness.database.receipt_count().await, 0);
}

#[tokio::test]
async fn rotated_secret_from_file_still_verifies() {
    let harness = start().await;
    let body = inbound_tests::signing::stripe_body(
        "evt_rotated",
        "payment_intent.succeeded",
        Some("acct_123"),
        true,
    );
    let headers =
        inbound_tests::signing::stripe_headers(fixtures::STRIPE_PREVIOUS_SECRET, &body, 0);
    let answer = harness
        .client
        .post(&harness.ingress.webhook_url("stripe-acme"), &headers, body)
        .await
        .expect("answer");
    assert_status(&answer, 200, "previous secret");
    assert_eq!(answer.json["status"], "accepted");
}

#[tokio::test]
async fn github_action_route_is_tried_before_the_bare_event_and_ping_is_ignored() {
    let harness = start().await;
    let url = harness.ingress.webhook_url("gh-acme");
    let push_body = r#"{"ref":"refs/heads/main","repository":{"id":42}}"#;
    let push = inbound_tests::signing::github_headers(
        fixtures::GITHUB_SECRET,
        push_body,
        "d-push",
        "push",
        "42",
    );
    let answer = harness
        .client
        .post(&url, &push, push_body)
        .await
        .expect("answer");
    assert_eq!(
        answer.json["status"], "accepted",
        "bare event route: {answer:?}"
    );
    let ping_body = r#"{"zen":"Keep it logically awesome.","hook_id":1,"repository":{"id":42}}"#;
    let ping = inbound_tests::signing::github_headers(
        fixtures::GITHUB_SECRET,
        ping_body,
        "d-ping",
        "ping",
        "42",
    );
    let answer = harness
        .client
        .post(&url, &ping, ping_body)
        .await
        .expect("answer");
    assert_eq!(answer.json["status"], "ignored");
    let (headers, body) = Provider::Github.request(Variant::Routed("d-opened"));
    harness
        .client
        .post(&url, &headers, body)
        .await
        .expect("answer");
    let route_keys: Vec<(String, String)> =
        sqlx::query_as("SELECT event_type, route_key FROM receipts ORDER BY id")
            .fetch_all(harness.database.pool())
            .await
            .expect("rows");
    assert_eq!(
        route_keys,
        [
            ("push".to_owned(), "push".to_owned()),
            (
                "pull_request.opened".to_owned(),
                "pull_request.opened".to_owned()
            )
        ]
    );
}

#[tokio::test]
async fn health_readiness_and_metrics_are_served() {
    let harness = start().await;
    for url in [
        harness.ingress.url("/healthz"),
        harness.ingress.metrics_url("/healthz"),
    ] {
        assert_eq!(
            harness.client.get(&url).await.expect("answer").status,
            200,
            "{url}"
        );
    }
    for url in [
        harness.ingress.url("/readyz"),
        harness.ingress.metrics_url("/readyz"),
    ] {
        harness.client.get_status_once(&url, 200).await;
        let ready = harness.client.get(&url).await.expect("answer");
        assert_eq!(
            (ready.status, ready.json["status"].as_str()),
            (200, Some("ready")),
            "{url}"
        );
    }
    assert_eq!(
        harness
            .client
            .get(&harness.ingress.url("/nope"))
            .await
            .expect("answer")
            .status,
        404
    );
    for provider in PROVIDERS {
        harness.send(provider, Variant::Routed("evt-metrics")).await;
        harness
            .send(provider, Variant::WrongSecret("evt-metrics-bad"))
            .await;
    }
    let metrics = harness
        .client
        .get(&harness.ingress.metrics_url("/metrics"))
        .await
        .expect("answer");
    let text = String::from_utf8(metrics.body.to_vec()).expect("utf-8");
    assert!(
        text.contains("# HELP inbound_ingress_requests_total"),
        "{text}"
    );
    assert!(
        text.contains("# HELP inbound_ingress_request_duration_seconds"),
        "{text}"
    );
    assert!(
        text.contains("# TYPE inbound_ingress_request_duration_seconds histogram"),
        "{text}"
    );
    assert!(text.contains("inbound_ingress_request_duration_seconds_bucket{integration=\"stripe-acme\",le=\"0.005\"}"), "{text}");
    for provider in PROVIDERS {
        for outcome in ["accepted", "unauthorized"] {
            let series = format!(
                "inbound_ingress_requests_total{{integration=\"{}\",outcome=\"{outcome}\"}} 1",
                provider.integration()
            );
            assert!(text.contains(&series), "missing {series} in {text}");
        }
    }
}
