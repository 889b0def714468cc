//! What providers really send, through the real `inbound-ingress` (and worker): Shopify's
//! event id shared by the topics of one merchant action, the delivery headers handlers and
//! sinks see, Stripe's thin events and test-mode events at a live endpoint, GitHub's
//! default form encoding, Slack's `app_rate_limited` notice, and a GitLab event no route
//! takes that lacks the routed events' fields. Each is something the sender does by
//! default; a refusal would be retried and count towards disabling the endpoint.

use std::time::Duration;

use inbound_tests::config::ConfigEdit;
use inbound_tests::fixtures::{self, SHOPIFY_SHOP};
use inbound_tests::http::Answer;
use inbound_tests::signing::{self, SignedRequest};
use inbound_tests::sink::TestSink;
use inbound_tests::{ServiceOptions, Stack};

/// The fixture with `extra` routes (TOML `"key" = { … }` lines) added to integration
/// `id`'s routes table.
fn with_routes(mut options: ServiceOptions, id: &str, extra: &str) -> ServiceOptions {
    let mut config = ConfigEdit::parse(&options.config_toml);
    let added: toml::Table = extra.parse().expect("routes in TOML");
    config.routes(id).extend(added);
    options.config_toml = config.to_toml();
    options
}

/// Asserts the ingress answered `ignored`, stored nothing, and counts `series` once.
async fn assert_acknowledged_and_counted(stack: &Stack, answer: &Answer, series: &str) {
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.json, serde_json::json!({"status": "ignored"}));
    assert_eq!(stack.database.receipt_count().await, 0);
    let page = stack.ingress.metrics_page().await;
    assert!(
        page.lines()
            .any(|line| line.starts_with(series) && line.ends_with(" 1")),
        "{series}: {page}"
    );
}

async fn stored(stack: &Stack, sql: &str) -> Vec<serde_json::Value> {
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned()))
        .fetch_all(stack.pool())
        .await
        .expect("query")
}

/// Shopify documents `X-Shopify-Event-Id` as shared by the deliveries one merchant action
/// produces: `orders/create` and `orders/paid` of one checkout are two events, and each
/// is routed. The same topic reaching a second subscription (another webhook id) is one.
#[tokio::test]
async fn shopify_topics_sharing_an_event_id_are_two_receipts_that_keep_their_headers() {
    let sink = TestSink::start().await;
    let sink_url = sink.url();
    let configure = move |options: ServiceOptions| {
        let options = with_routes(
            options,
            "shop-acme",
            "\"orders/paid\" = { handler = \"forward\", sink = \"audit\" }",
        );
        fixtures::with_audit_sink(options, &sink_url, true)
    };
    let configure_worker = configure.clone();
    let stack = Stack::builder()
        .ingress(configure)
        .worker(move |mut options| {
            options.args = vec!["--poll-interval-ms".into(), "50".into()];
            configure_worker(options)
        })
        .start()
        .await;
    let body =
        serde_json::json!({"id": 820982911946154508_u64, "total_price": "10.00"}).to_string();
    let delivery = |topic: &str, webhook_id: &str| {
        let headers = signing::shopify_headers(
            fixtures::SHOPIFY_SECRET,
            &body,
            "evt-checkout-1",
            topic,
            SHOPIFY_SHOP,
        );
        SignedRequest::new("shop-acme", headers, body.clone())
            .without_header("x-shopify-webhook-id")
            .with_header("x-shopify-webhook-id", webhook_id)
            .with_header("x-shopify-triggered-at", "2026-12-04T10:00:00.123Z")
    };
    let created = stack.deliver(&delivery("orders/create", "wh-1")).await;
    assert_eq!(created.json["status"], "accepted", "{created:?}");
    let paid = stack.deliver(&delivery("orders/paid", "wh-2")).await;
    assert_eq!(paid.json["status"], "accepted", "{paid:?}");
    let second_subscription = stack.deliver(&delivery("orders/create", "wh-3")).await;
    assert_eq!(
        second_subscription.json["status"], "duplicate",
        "{second_subscription:?}"
    );
    let deliveries = stored(&stack, "SELECT delivery FROM receipts ORDER BY id").await;
    assert_eq!(
        deliveries,
        vec![
            serde_json::json!({"event_id": "evt-checkout-1", "webhook_id": "wh-1",
                "triggered_at": "2026-12-04T10:00:00.123Z", "api_version": "2025-07"}),
            serde_json::json!({"event_id": "evt-checkout-1", "webhook_id": "wh-2",
                "triggered_at": "2026-12-04T10:00:00.123Z", "api_version": "2025-07"}),
        ]
    );
    // What the sink is sent names the delivery too.
    inbound_tests::eventually(
        "the two forwarded events at the sink",
        Duration::from_secs(20),
        async || {
            if sink.received().len() >= 2 {
                Ok(())
            } else {
                Err(format!("{:?}", stack.worker().logs()))
            }
        },
    )
    .await;
    let mut sent: Vec<serde_json::Value> = sink
        .received()
        .iter()
        .map(|received| received.json()["event"].clone())
        .collect();
    sent.sort_by_key(|event| event["type"].to_string());
    assert_eq!(sent[0]["type"], "orders/create", "{sent:?}");
    assert_eq!(sent[0]["delivery"]["webhook_id"], "wh-1", "{sent:?}");
    assert_eq!(
        sent[1]["delivery"]["triggered_at"], "2026-12-04T10:00:00.123Z",
        "{sent:?}"
    );
}

/// GitHub's hook id and Stripe's API version are kept with the receipt too.
#[tokio::test]
async fn github_hook_id_and_stripe_api_version_are_kept_with_the_receipt() {
    let stack = Stack::start().await;
    let body = r#"{"action":"opened","repository":{"id":42}}"#;
    let request = SignedRequest::new(
        "gh-acme",
        signing::github_headers(
            fixtures::GITHUB_SECRET,
            body,
            "d-hook",
            "pull_request",
            "42",
        ),
        body,
    )
    .with_header("x-github-hook-id", "123456")
    .with_header("x-github-hook-installation-target-type", "repository");
    assert_eq!(stack.deliver(&request).await.json["status"], "accepted");
    let mut event: serde_json::Value = serde_json::from_str(&signing::stripe_body(
        "evt_versioned",
        "payment_intent.succeeded",
        Some("acct_123"),
        true,
    ))
    .expect("json");
    event["api_version"] = "2025-03-31.basil".into();
    let answer = stack
        .deliver(&SignedRequest::stripe(event.to_string()))
        .await;
    assert_eq!(answer.json["status"], "accepted", "{answer:?}");
    assert_eq!(
        stored(&stack, "SELECT delivery FROM receipts ORDER BY id").await,
        vec![
            serde_json::json!({"hook_id": "123456", "installation_target_type": "repository",
                "installation_target_id": "42"}),
            serde_json::json!({"api_version": "2025-03-31.basil"}),
        ]
    );
}

/// A Connect endpoint receives test-mode events and other accounts' events at the same
/// URL: acknowledged, never stored, never refused.
#[tokio::test]
async fn a_test_mode_event_at_a_live_endpoint_is_acknowledged_and_not_stored() {
    let stack = Stack::start().await;
    let body = signing::stripe_body(
        "evt_test_mode",
        "payment_intent.succeeded",
        Some("acct_123"),
        false,
    );
    let answer = stack.deliver(&SignedRequest::stripe(body)).await;
    assert_acknowledged_and_counted(
        &stack,
        &answer,
        "inbound_ingress_out_of_scope_total{integration=\"stripe-acme\",reason=\"mode\"}",
    )
    .await;
    // Unverified is still 401.
    let forged = SignedRequest::stripe_signed(
        "whsec_dGhlIHdyb25nIHNlY3JldA==",
        signing::stripe_body("evt_forged", "payment_intent.succeeded", None, false),
        0,
    );
    assert_eq!(stack.deliver(&forged).await.status, 401);
}

/// A thin event (`v2.core.event`, event destinations) names its connected account in
/// `context`: that is its scope.
#[tokio::test]
async fn a_stripe_thin_event_is_scoped_by_its_context() {
    let stack = Stack::builder()
        .ingress(|options| {
            with_routes(
                options,
                "stripe-acme",
                "\"v1.billing.meter.error_report_triggered\" = { handler = \"forward\", sink = \"audit\" }",
            )
        })
        .start()
        .await;
    let thin = |id: &str, context: &str| {
        serde_json::json!({
            "id": id, "object": "v2.core.event",
            "type": "v1.billing.meter.error_report_triggered",
            "livemode": true, "created": "2026-12-04T10:00:00.000Z", "context": context,
            "related_object": {"id": "mtr_1", "type": "billing.meter",
                "url": "/v1/billing/meters/mtr_1"},
            "reason": {"type": "request", "request": {"id": "req_1", "idempotency_key": "k"}}
        })
        .to_string()
    };
    let ours = stack
        .deliver(&SignedRequest::stripe(thin("evt_thin_1", "acct_123")))
        .await;
    assert_eq!(ours.json["status"], "accepted", "{ours:?}");
    let scopes: Vec<String> = sqlx::query_scalar("SELECT source_scope FROM receipts")
        .fetch_all(stack.pool())
        .await
        .expect("scopes");
    assert_eq!(scopes, ["stripe-acme/acct_123/live"]);
    let theirs = stack
        .deliver(&SignedRequest::stripe(thin("evt_thin_2", "acct_other")))
        .await;
    assert_eq!(
        theirs.json,
        serde_json::json!({"status": "ignored"}),
        "{theirs:?}"
    );
    assert_eq!(stack.database.receipt_count().await, 1);
}

/// A hook created with GitHub's defaults sends `application/x-www-form-urlencoded` with
/// the JSON in `payload`, signed as sent: verified over the raw form, stored as the JSON
/// (an integration's `content_type` is `form` unless it says `json`).
#[tokio::test]
async fn github_form_encoded_deliveries_are_verified_as_sent_and_stored_as_json() {
    let stack = Stack::builder()
        .ingress(|mut options| {
            options.config_toml.push_str(
                r#"
[[integration]]
id = "gh-form"
provider = "github"
tenant = "acme"
secrets = ["env:TEST_GITHUB_SECRET"]
expect = { repository_id = "42" }
[integration.routes]
"pull_request.opened" = { handler = "forward", sink = "audit" }
"#,
            );
            options
        })
        .start()
        .await;
    let json = r#"{"action":"opened","number":7,"repository":{"id":42},"title":"a+b & c=d"}"#;
    let form = format!("payload={}", urlencoding::encode(json));
    let form_request = |delivery: &str, form: &str| {
        let mut headers = signing::github_headers(
            fixtures::GITHUB_SECRET,
            form,
            delivery,
            "pull_request",
            "42",
        );
        headers.retain(|(name, _)| name != "content-type");
        SignedRequest::new("gh-form", headers, form.to_owned())
            .with_header("content-type", "application/x-www-form-urlencoded")
    };
    let answer = stack.deliver(&form_request("d-form", &form)).await;
    assert_eq!(answer.json["status"], "accepted", "{answer:?}");
    let payloads = stored(&stack, "SELECT payload FROM receipt_payloads").await;
    assert_eq!(
        payloads,
        vec![serde_json::from_str::<serde_json::Value>(json).expect("json")]
    );
    // No payload field, or two: malformed (the signature held, so the detail is safe).
    for body in ["other=1".to_owned(), format!("{form}&{form}")] {
        let answer = stack.deliver(&form_request("d-bad", &body)).await;
        assert_eq!(answer.status, 400, "{body}: {answer:?}");
    }
    // The form's signature is over the form, not the JSON inside it.
    let mut resigned = form_request("d-json-signed", &form);
    resigned
        .headers
        .retain(|(name, _)| name != "x-hub-signature-256");
    let signed_json = signing::github_headers(
        fixtures::GITHUB_SECRET,
        json,
        "d-json-signed",
        "pull_request",
        "42",
    );
    resigned.headers.extend(
        signed_json
            .into_iter()
            .filter(|(name, _)| name == "x-hub-signature-256"),
    );
    assert_eq!(stack.deliver(&resigned).await.status, 401);
    // Form encoding is GitHub's: another sender's form body is still 415.
    let slack_form = "payload=%7B%7D";
    let slack = SignedRequest::new(
        "slack-acme",
        signing::slack_headers(fixtures::SLACK_SECRET, slack_form, 0),
        slack_form,
    )
    .without_header("content-type")
    .with_header("content-type", "application/x-www-form-urlencoded");
    assert_eq!(stack.deliver(&slack).await.status, 415);
}

/// Slack's `app_rate_limited` is the only sign that Slack is dropping the app's events:
/// acknowledged, counted per team, logged as a warning; never stored.
#[tokio::test]
async fn slack_app_rate_limited_is_acknowledged_and_counted_per_team() {
    let stack = Stack::start().await;
    let body = serde_json::json!({
        "token": "Jhj5dZrVaK7ZwHHjRyZWjbDl", "type": "app_rate_limited", "team_id": "T1",
        "minute_rate_limited": 1518467820, "api_app_id": "A1"
    })
    .to_string();
    let request = SignedRequest::new(
        "slack-acme",
        signing::slack_headers(fixtures::SLACK_SECRET, &body, 0),
        body,
    );
    let answer = stack.deliver(&request).await;
    assert_acknowledged_and_counted(
        &stack,
        &answer,
        "inbound_ingress_slack_rate_limited_total{integration=\"slack-acme\",team=\"T1\"}",
    )
    .await;
    stack
        .ingress
        .wait_for_log("a warning names app_rate_limited", |line| {
            line.contains("\"WARN\"") && line.contains("app_rate_limited")
        })
        .await;
}

/// GitLab's group and member events carry no `/project/id`. A type no route takes is
/// `ignored` without reading any other field; a routed one still needs its fields.
#[tokio::test]
async fn a_configured_sender_decides_the_route_before_reading_fields() {
    let stack = Stack::start().await;
    let member = serde_json::json!({"event_name": "user_add_to_group", "group_id": 7}).to_string();
    let unrouted = SignedRequest::new(
        "token-acme",
        signing::token_headers(fixtures::TOKEN_SECRET, "e-member", "Member Hook"),
        member.clone(),
    );
    let answer = stack.deliver(&unrouted).await;
    assert_eq!(
        answer.json,
        serde_json::json!({"status": "ignored"}),
        "{answer:?}"
    );
    // Not even an event id is needed to be ignored.
    let answer = stack
        .deliver(&unrouted.clone().without_header("x-event-id"))
        .await;
    assert_eq!(
        answer.json,
        serde_json::json!({"status": "ignored"}),
        "{answer:?}"
    );
    // Without a type, no route can be decided: malformed, not silently ignored (a typo in
    // the type's source would otherwise drop every delivery).
    assert_eq!(
        stack
            .deliver(&unrouted.clone().without_header("x-event-type"))
            .await
            .status,
        400
    );
    // A routed event without its scope field is still malformed.
    let routed = SignedRequest::new(
        "token-acme",
        signing::token_headers(fixtures::TOKEN_SECRET, "e-push", "Push Hook"),
        member,
    );
    assert_eq!(stack.deliver(&routed).await.status, 400);
    assert_eq!(stack.database.receipt_count().await, 0);
}
