//! Every row of docs/contract.md's HTTP status table, for every provider, through the real
//! `inbound-ingress` binary against a real database — and no configured secret in its logs.

use inbound_tests::fixtures::{self, PROVIDERS, Provider, Variant};
use inbound_tests::http::Answer;
use inbound_tests::signing::{self, SignedRequest};
use inbound_tests::{Service, Stack};

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
    let stack = Stack::start().await;
    let name = format!("{provider:?}");
    let event_id = format!("evt-{}", name.to_lowercase());

    // 200 accepted, with the committed receipt's id.
    let request = provider.request(Variant::Routed(&event_id));
    let accepted = stack.deliver(&request).await;
    assert_status(&accepted, 200, &format!("{name} accepted"));
    assert_eq!(accepted.json["status"], "accepted", "{name}");
    let receipt_id = accepted.json["receipt_id"].as_i64().expect("receipt_id");
    assert!(
        stack.database.receipt_is_committed(receipt_id).await,
        "{name}: receipt committed"
    );
    let (stored_event_id, integration): (String, String) =
        sqlx::query_as("SELECT event_id, integration FROM receipts WHERE id = $1")
            .bind(receipt_id)
            .fetch_one(stack.database.pool())
            .await
            .expect("receipt row");
    assert_eq!(
        (stored_event_id, integration.as_str()),
        (
            provider.receipt_event_id(&request, &event_id),
            provider.integration()
        )
    );

    // 200 duplicate: same receipt key, nothing new stored.
    let duplicate = stack
        .deliver(&provider.request(Variant::Routed(&event_id)))
        .await;
    assert_status(&duplicate, 200, &format!("{name} duplicate"));
    assert_eq!(duplicate.json, serde_json::json!({"status": "duplicate"}));
    assert_eq!(
        stack.database.receipt_count().await,
        1,
        "{name}: one receipt"
    );

    // 200 ignored: verified, unrouted, not stored.
    let ignored = stack
        .deliver(&provider.request(Variant::Unrouted(&format!("{event_id}-unrouted"))))
        .await;
    assert_status(&ignored, 200, &format!("{name} ignored"));
    assert_eq!(ignored.json, serde_json::json!({"status": "ignored"}));
    assert_eq!(
        stack.database.receipt_count().await,
        1,
        "{name}: ignored is not stored"
    );

    // 400 malformed: verified, but no event id (type, for Standard Webhooks).
    let malformed = stack.deliver(&provider.request(Variant::NoEventId)).await;
    assert_status(&malformed, 400, &format!("{name} malformed"));
    assert_eq!(malformed.json["error"], "malformed", "{name}");

    // 401: wrong secret; and a malformed body with a bad signature is 401, not 400.
    for variant in [
        Variant::WrongSecret("evt-wrong"),
        Variant::GarbageWithBadSignature,
    ] {
        let unauthorized = stack.deliver(&provider.request(variant)).await;
        assert_status(&unauthorized, 401, &format!("{name} {variant:?}"));
        assert_eq!(
            unauthorized.json,
            serde_json::json!({"error": "unauthorized"}),
            "{name}: no detail"
        );
    }
    // 401 without any signature headers.
    let signed = provider.request(Variant::Routed("evt-unsigned"));
    let unsigned = stack
        .deliver(&SignedRequest::unsigned(
            provider.integration(),
            signed.body,
        ))
        .await;
    assert_status(&unsigned, 401, &format!("{name} unsigned"));

    // 401: timestamp outside tolerance, both ways.
    if provider.signs_timestamp() {
        for age in [301 + 60, -(301 + 60)] {
            let stale = stack
                .deliver(&provider.request(Variant::Aged("evt-aged", age)))
                .await;
            assert_status(&stale, 401, &format!("{name} aged {age}"));
        }
        let fresh_enough = stack
            .deliver(&provider.request(Variant::Aged(&format!("{event_id}-aged-ok"), 200)))
            .await;
        assert_status(&fresh_enough, 200, &format!("{name} inside tolerance"));
    }

    // 200 ignored: verified, but another account, installation, team or shop. Never
    // refused: the sender would retry it and count it towards disabling the endpoint.
    // Not stored; counted per integration and logged with its scope.
    if provider.has_scope() {
        let out_of_scope = stack
            .deliver(&provider.request(Variant::ForeignScope("evt-foreign")))
            .await;
        assert_status(&out_of_scope, 200, &format!("{name} out of scope"));
        assert_eq!(
            out_of_scope.json,
            serde_json::json!({"status": "ignored"}),
            "{name}"
        );
        let counted = format!(
            "inbound_ingress_out_of_scope_total{{integration=\"{}\",",
            provider.integration()
        );
        let page = stack.ingress.metrics_page().await;
        assert!(
            page.lines()
                .any(|line| line.starts_with(&counted) && line.ends_with(" 1")),
            "{name}: {page}"
        );
        stack
            .ingress
            .wait_for_log("the out-of-scope line names the scope", |line| {
                line.contains("\"outcome\":\"out_of_scope\"") && line.contains("\"scope\":")
            })
            .await;
    }

    // 404 unknown integration.
    let unknown = stack
        .deliver(
            &provider
                .request(Variant::Routed("evt-404"))
                .to("no-such-integration"),
        )
        .await;
    assert_status(&unknown, 404, &format!("{name} unknown integration"));
    assert_eq!(
        unknown.json,
        serde_json::json!({"error": "unknown_integration"})
    );

    // 413 over the limit, checked before the signature (this one is unsigned).
    let oversized = "x".repeat(fixtures::MAX_BODY_BYTES + 1);
    let too_large = stack
        .deliver(&SignedRequest::unsigned(provider.integration(), oversized))
        .await;
    assert_status(&too_large, 413, &format!("{name} too large"));
    assert_eq!(
        too_large.json,
        serde_json::json!({"error": "payload_too_large"})
    );

    // 405 for another method on the webhook route.
    let get = stack
        .client
        .get(&stack.ingress.webhook_url(provider.integration()))
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
        stack.database.receipt_count().await,
        expected_receipts,
        "{name}: nothing else stored"
    );
    assert_no_secret_in_logs(&stack.ingress);
}

fn assert_no_secret_in_logs(ingress: &Service) {
    let logs = ingress.logs();
    assert!(
        logs.iter().any(|line| line.contains("\"webhook\"")),
        "request lines are logged"
    );
    // Durations are written to the microsecond, never with a float's noise
    // (`11.030562000000002`).
    for line in logs.iter().filter(|line| line.contains("\"webhook\"")) {
        let value: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
        let text = value["duration_ms"].to_string();
        let decimals = text
            .split_once('.')
            .map_or(0, |(_, fraction)| fraction.len());
        assert!(decimals <= 3, "duration_ms {text} in {line}");
    }
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
async fn shopify_status_table() {
    status_table_for(Provider::Shopify).await;
}

#[tokio::test]
async fn paddle_status_table() {
    status_table_for(Provider::Paddle).await;
}

#[tokio::test]
async fn zoom_status_table() {
    status_table_for(Provider::Zoom).await;
}

#[tokio::test]
async fn configurable_hmac_status_table() {
    status_table_for(Provider::Hmac).await;
}

#[tokio::test]
async fn shared_token_status_table() {
    status_table_for(Provider::Token).await;
}

/// Standard Webhooks `v1a`: an integration that holds only the sender's `whpk_` public key
/// accepts a request signed with the private key, and refuses one signed with another.
#[tokio::test]
async fn standard_webhooks_v1a_verifies_with_a_public_key() {
    use base64::Engine;
    use ring::signature::{Ed25519KeyPair, KeyPair};
    let base64 = base64::engine::general_purpose::STANDARD;
    let sender = Ed25519KeyPair::from_seed_unchecked(&[9; 32]).expect("seed");
    let public_key = format!("whpk_{}", base64.encode(sender.public_key().as_ref()));
    let stack = Stack::builder()
        .ingress(move |mut options| {
            options.config_toml.push_str(
                "\n[[integration]]\nid = \"std-v1a\"\nprovider = \"standard\"\ntenant = \"acme\"\nsecrets = [\"env:TEST_STANDARD_PUBLIC_KEY\"]\n[integration.routes]\n\"invoice.paid\" = { handler = \"forward\", sink = \"audit\" }\n",
            );
            options.env.push(("TEST_STANDARD_PUBLIC_KEY".into(), public_key));
            options
        })
        .start()
        .await;
    let body = r#"{"type":"invoice.paid","data":{"invoice":"in_1"}}"#;
    let signed_by = |key: &Ed25519KeyPair, id: &str, body: &str| {
        let timestamp = chrono::Utc::now().timestamp().to_string();
        let signature = key.sign(format!("{id}.{timestamp}.{body}").as_bytes());
        let headers = vec![
            ("content-type".to_owned(), "application/json".to_owned()),
            ("webhook-id".to_owned(), id.to_owned()),
            ("webhook-timestamp".to_owned(), timestamp),
            (
                "webhook-signature".to_owned(),
                format!("v1a,{}", base64.encode(signature.as_ref())),
            ),
        ];
        SignedRequest::new("std-v1a", headers, body.to_owned())
    };
    let accepted = stack.deliver(&signed_by(&sender, "msg_v1a_1", body)).await;
    assert_status(&accepted, 200, "v1a");
    assert_eq!(accepted.json["status"], "accepted");
    let impostor = Ed25519KeyPair::from_seed_unchecked(&[8; 32]).expect("seed");
    let forged = stack
        .deliver(&signed_by(&impostor, "msg_v1a_2", body))
        .await;
    assert_status(&forged, 401, "v1a under another key");
    assert_eq!(stack.database.receipt_count().await, 1);
    // A body large enough that its worst case is checked on the verification threads
    // verifies there, and is refused there under another key.
    let large = format!(
        r#"{{"type":"invoice.paid","data":{{"pad":"{}"}}}}"#,
        "x".repeat(600 * 1024)
    );
    let accepted = stack
        .deliver(&signed_by(&sender, "msg_v1a_large", &large))
        .await;
    assert_status(&accepted, 200, "a large v1a delivery");
    let forged = stack
        .deliver(&signed_by(&impostor, "msg_v1a_large_forged", &large))
        .await;
    assert_status(&forged, 401, "a large v1a delivery under another key");
    // The red team's forgery: 170 zero signatures, refused by their count.
    let mut listed = signed_by(&sender, "msg_v1a_listed", body);
    let zeros = vec![format!("v1a,{}", base64.encode([0u8; 64])); 170].join(" ");
    for (name, value) in &mut listed.headers {
        if name == "webhook-signature" {
            *value = format!("{zeros} {value}");
        }
    }
    let refused = stack.deliver(&listed).await;
    assert_status(&refused, 401, "170 listed signatures");
    stack
        .ingress
        .wait_for_log("the log names why", |line| {
            line.contains("more signatures than any sender lists")
        })
        .await;
    assert_eq!(stack.database.receipt_count().await, 2);
}

/// Zoom's endpoint validation is answered as Zoom specifies (the plain token and its
/// HMAC-SHA256 under the secret token) only when it verifies, and stores nothing.
#[tokio::test]
async fn zoom_url_validation_is_answered_only_when_verified() {
    let stack = Stack::start().await;
    let body = r#"{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1654503849680,"event":"endpoint.url_validation"}"#;
    let signed =
        |secret| SignedRequest::new("zoom-acme", signing::zoom_headers(secret, body, 0), body);
    let answer = stack.deliver(&signed(fixtures::ZOOM_SECRET)).await;
    assert_status(&answer, 200, "validation");
    let secret = inbound_core::secret::Secret::new(fixtures::ZOOM_SECRET.as_bytes().to_vec());
    assert_eq!(
        answer.json,
        serde_json::json!({
            "plainToken": "qgg8vlvZRS6UYooatFL8Aw",
            "encryptedToken": inbound_core::provider::zoom_encrypted_token(&secret, "qgg8vlvZRS6UYooatFL8Aw"),
        })
    );
    let answer = stack.deliver(&signed("not-the-token")).await;
    assert_status(&answer, 401, "forged validation");
    assert_eq!(stack.database.receipt_count().await, 0);
}

#[tokio::test]
async fn slack_url_verification_echoes_the_challenge_only_when_verified() {
    let stack = Stack::start().await;
    let body = r#"{"token":"legacy","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}"#;
    let signed =
        |secret| SignedRequest::new("slack-acme", signing::slack_headers(secret, body, 0), body);
    let answer = stack.deliver(&signed(fixtures::SLACK_SECRET)).await;
    assert_status(&answer, 200, "challenge");
    assert_eq!(
        answer.json,
        serde_json::json!({"challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"})
    );
    let answer = stack.deliver(&signed("not-the-secret")).await;
    assert_status(&answer, 401, "forged challenge");
    assert_eq!(stack.database.receipt_count().await, 0);
}

#[tokio::test]
async fn rotated_secret_from_file_still_verifies() {
    let stack = Stack::start().await;
    let body = signing::stripe_body(
        "evt_rotated",
        "payment_intent.succeeded",
        Some("acct_123"),
        true,
    );
    let answer = stack
        .deliver(&SignedRequest::stripe_signed(
            fixtures::STRIPE_PREVIOUS_SECRET,
            body,
            0,
        ))
        .await;
    assert_status(&answer, 200, "previous secret");
    assert_eq!(answer.json["status"], "accepted");
}

#[tokio::test]
async fn github_action_route_is_tried_before_the_bare_event_and_ping_is_ignored() {
    let stack = Stack::start().await;
    let github = |body: &'static str, delivery, event| {
        let headers = signing::github_headers(fixtures::GITHUB_SECRET, body, delivery, event, "42");
        SignedRequest::new("gh-acme", headers, body)
    };
    let push_body = r#"{"ref":"refs/heads/main","repository":{"id":42}}"#;
    let answer = stack.deliver(&github(push_body, "d-push", "push")).await;
    assert_eq!(
        answer.json["status"], "accepted",
        "bare event route: {answer:?}"
    );
    let ping_body = r#"{"zen":"Keep it logically awesome.","hook_id":1,"repository":{"id":42}}"#;
    let answer = stack.deliver(&github(ping_body, "d-ping", "ping")).await;
    assert_eq!(answer.json["status"], "ignored");
    stack
        .deliver(&Provider::Github.request(Variant::Routed("d-opened")))
        .await;
    let route_keys: Vec<(String, String)> =
        sqlx::query_as("SELECT event_type, route_key FROM receipts ORDER BY id")
            .fetch_all(stack.database.pool())
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
    let stack = Stack::start().await;
    for url in [
        stack.ingress.url("/healthz"),
        stack.ingress.metrics_url("/healthz"),
    ] {
        assert_eq!(
            stack.client.get(&url).await.expect("answer").status,
            200,
            "{url}"
        );
    }
    for url in [
        stack.ingress.url("/readyz"),
        stack.ingress.metrics_url("/readyz"),
    ] {
        stack.client.get_status_once(&url, 200).await;
        let ready = stack.client.get(&url).await.expect("answer");
        assert_eq!(
            (ready.status, ready.json["status"].as_str()),
            (200, Some("ready")),
            "{url}"
        );
    }
    assert_eq!(
        stack
            .client
            .get(&stack.ingress.url("/nope"))
            .await
            .expect("answer")
            .status,
        404
    );
    for provider in PROVIDERS {
        stack
            .deliver(&provider.request(Variant::Routed("evt-metrics")))
            .await;
        stack
            .deliver(&provider.request(Variant::WrongSecret("evt-metrics-bad")))
            .await;
    }
    let metrics = stack
        .client
        .get(&stack.ingress.metrics_url("/metrics"))
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
