//! Extraction: shapes, ids, scopes, `expect` and routing for each provider.

use super::*;
use crate::config::Config;
use crate::event::*;
use crate::keys::SourceScope;

const CONFIG: &str = r#"
[[integration]]
id = "stripe-acme"
provider = "stripe"
tenant = "acme"
secrets = ["env:S"]
expect = { account = "acct_1", livemode = true }
routes = { "payment_intent.succeeded" = { handler = "orders.mark_paid" } }

[[integration]]
id = "stripe-any"
provider = "stripe"
tenant = "acme"
secrets = ["env:S"]

[[integration]]
id = "gh"
provider = "github"
tenant = "acme"
secrets = ["env:S"]
content_type = "json"
expect = { installation_target_id = "42" }
routes = { "pull_request.opened" = { handler = "forward", sink = "s" }, "pull_request" = { handler = "forward", sink = "s" } }

[[integration]]
id = "gh-signed"
provider = "github"
tenant = "acme"
secrets = ["env:S"]
content_dedupe = true
content_type = "json"
expect = { repository_id = "42" }

[[integration]]
id = "gh-form"
provider = "github"
tenant = "acme"
secrets = ["env:S"]
expect = { repository_id = "42" }

[[integration]]
id = "slack"
provider = "slack"
tenant = "acme"
secrets = ["env:S"]
expect = { team_id = "T1", api_app_id = "A1" }

[[integration]]
id = "std"
provider = "standard"
tenant = "acme"
secrets = ["env:S"]

[[integration]]
id = "paddle"
provider = "paddle"
tenant = "acme"
secrets = ["env:S"]
routes = { "transaction.completed" = { handler = "forward", sink = "s" } }

[[integration]]
id = "zoom"
provider = "zoom"
tenant = "acme"
secrets = ["env:S"]
expect = { account_id = "AAAAAABBBB" }
routes = { "meeting.started" = { handler = "forward", sink = "s" } }

[[integration]]
id = "shop"
provider = "shopify"
tenant = "acme"
secrets = ["env:S"]
expect = { shop_domain = "acme.myshopify.com" }
routes = { "orders/create" = { handler = "forward", sink = "s" } }

[[integration]]
id = "custom"
provider = "hmac"
tenant = "acme"
secrets = ["env:S"]
routes = { "*" = { handler = "forward", sink = "s" } }
[integration.hmac]
header = "x-sig"
algorithm = "sha256"
encoding = "hex"
[integration.fields]
event_id = { pointer = "/event/id" }
event_type = { pointer = "/type" }
scope = { pointer = "/account" }

[[integration]]
id = "gitlab"
provider = "token"
tenant = "acme"
secrets = ["env:S"]
expect = { scope = "42" }
routes = { "Push Hook" = { handler = "forward", sink = "s" } }
[integration.token]
header = "x-gitlab-token"
[integration.fields]
event_id = { header = "x-gitlab-event-uuid" }
event_type = { header = "x-gitlab-event" }
scope = { pointer = "/project/id" }

[[sink]]
id = "s"
url = "http://sink.internal/"
"#;

fn config() -> Config {
    Config::from_toml(CONFIG, &|_| {
        Some("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".to_owned())
    })
    .expect("config")
}

fn run<'b>(
    integration: &str,
    headers: &[(&str, &str)],
    body: &'b str,
) -> Result<Extracted<'b>, ExtractError> {
    let config = config();
    let integration = config.integration(integration).expect("integration");
    let headers: Headers = headers
        .iter()
        .map(|(name, value)| (*name, value.as_bytes()))
        .collect();
    extract(integration, &headers, body.as_bytes())
}

fn event(delivery: Result<Extracted<'_>, ExtractError>) -> Event<'_> {
    match delivery {
        Ok(Extracted::Event(event)) => event,
        other => panic!("expected an event, got {other:?}"),
    }
}

fn is_malformed(result: Result<Extracted<'_>, ExtractError>) -> bool {
    matches!(result, Err(ExtractError::Malformed(_)))
}

#[test]
fn stripe_event_scope_includes_account_and_mode() {
    let body = r#"{"id":"evt_1","type":"payment_intent.succeeded","account":"acct_1","livemode":true,"data":{}}"#;
    let event = event(run("stripe-acme", &[], body));
    assert_eq!(event.event_id.as_str(), "evt_1");
    assert_eq!(event.event_type, "payment_intent.succeeded");
    assert_eq!(event.source_scope.as_str(), "stripe-acme/acct_1/live");
    assert_eq!(event.payload_json, body);
    let platform = event_of_platform();
    assert_eq!(platform.source_scope.as_str(), "stripe-any/platform/test");
}

fn event_of_platform() -> Event<'static> {
    event(run(
        "stripe-any",
        &[],
        r#"{"id":"evt_2","type":"x","livemode":false}"#,
    ))
}

/// What an out-of-scope delivery said, or a panic naming what it was instead.
fn out_of_scope(delivery: Result<Extracted<'_>, ExtractError>) -> (&'static str, String) {
    match delivery {
        Ok(Extracted::OutOfScope(out)) => (out.reason, out.found),
        other => panic!("expected an out-of-scope event, got {other:?}"),
    }
}

#[test]
fn stripe_events_of_another_account_or_mode_are_out_of_scope_not_refused() {
    let wrong_account = r#"{"id":"evt_1","type":"t","account":"acct_2","livemode":true}"#;
    assert_eq!(
        out_of_scope(run("stripe-acme", &[], wrong_account)),
        ("account", "acct_2".to_owned())
    );
    let no_account = r#"{"id":"evt_1","type":"t","livemode":true}"#;
    assert_eq!(
        out_of_scope(run("stripe-acme", &[], no_account)),
        ("account", "-".to_owned())
    );
    let test_mode = r#"{"id":"evt_1","type":"t","account":"acct_1","livemode":false}"#;
    assert_eq!(
        out_of_scope(run("stripe-acme", &[], test_mode)),
        ("mode", "test".to_owned())
    );
}

#[test]
fn a_stripe_thin_event_is_scoped_by_its_context() {
    let thin = |context: &str| {
        format!(
            r#"{{"id":"evt_t","object":"v2.core.event","type":"v1.billing.meter.no_meter_found","livemode":true,"created":"2026-12-04T10:00:00.000Z","context":"{context}"}}"#
        )
    };
    let ours = thin("acct_1");
    let thin_event = event(run("stripe-acme", &[], &ours));
    assert_eq!(thin_event.source_scope.as_str(), "stripe-acme/acct_1/live");
    assert_eq!(
        thin_event.delivery, None,
        "thin events carry no api_version"
    );
    assert_eq!(
        out_of_scope(run("stripe-acme", &[], &thin("acct_2"))),
        ("account", "acct_2".to_owned())
    );
    // A snapshot event's `context` is not its account.
    let snapshot = r#"{"id":"evt_s","object":"event","type":"t","livemode":true,"context":"acct_1","api_version":"2025-03-31.basil"}"#;
    let platform = out_of_scope(run("stripe-acme", &[], snapshot));
    assert_eq!(platform, ("account", "-".to_owned()));
    let kept = event(run(
        "stripe-any",
        &[],
        r#"{"id":"evt_v","type":"t","livemode":false,"api_version":"2025-03-31.basil"}"#,
    ));
    assert_eq!(
        kept.delivery.as_deref(),
        Some(r#"{"api_version":"2025-03-31.basil"}"#)
    );
}

#[test]
fn shape_problems_are_malformed() {
    for body in [
        "",
        "[]",
        "not json",
        r#"{"id":"evt_1","type":"t","livemode":true"#,
        r#"{"type":"t","livemode":true}"#,
        r#"{"id":"","type":"t","livemode":true}"#,
        r#"{"id":"evt_1","livemode":true}"#,
        r#"{"id":5,"type":"t","livemode":true}"#,
        r#"{"id":"evt_1","type":"t"}"#,
        r#"{"id":"evt_1","id":"evt_2","type":"t","livemode":true}"#,
        r#"{"id":"evt_1","type":"t\u0000","livemode":true}"#,
    ] {
        assert!(is_malformed(run("stripe-any", &[], body)), "{body:?}");
    }
    let long_id = format!(
        r#"{{"id":"{}","type":"t","livemode":true}}"#,
        "e".repeat(300)
    );
    assert!(is_malformed(run("stripe-any", &[], &long_id)));
    let deep = format!(
        "{{\"id\":\"e\",\"type\":\"t\",\"livemode\":true,\"x\":{}{}}}",
        "[".repeat(200),
        "]".repeat(200)
    );
    assert!(is_malformed(run("stripe-any", &[], &deep)));
}

#[test]
fn github_routes_action_before_event_and_checks_target() {
    let headers = [
        ("x-github-delivery", "d-1"),
        ("x-github-event", "pull_request"),
        ("x-github-hook-installation-target-id", "42"),
    ];
    let event = event(run("gh", &headers, r#"{"action":"opened"}"#));
    assert_eq!(event.event_id.as_str(), "d-1");
    assert_eq!(event.event_type, "pull_request.opened");
    assert_eq!(event.route_keys, ["pull_request.opened", "pull_request"]);
    // The target header is unsigned: it takes no part in the scope.
    assert_eq!(event.source_scope.as_str(), "gh/-");
    let config = config();
    let integration = config.integration("gh").expect("gh");
    assert_eq!(
        find_route(integration, &event).map(|(key, _)| key),
        Some("pull_request.opened")
    );
    let closed = crate::event::Event {
        route_keys: vec!["pull_request.closed".into(), "pull_request".into()],
        ..event.clone()
    };
    assert_eq!(
        find_route(integration, &closed).map(|(key, _)| key),
        Some("pull_request")
    );
    let ping = crate::event::Event {
        route_keys: vec!["ping".into()],
        ..event
    };
    assert_eq!(find_route(integration, &ping), None);

    let wrong_target = [
        headers[0],
        headers[1],
        ("x-github-hook-installation-target-id", "7"),
    ];
    assert_eq!(
        out_of_scope(run("gh", &wrong_target, "{}")),
        ("installation_target", "7".to_owned())
    );
    assert!(
        is_malformed(run("gh", &headers[1..], "{}")),
        "no delivery id"
    );
    assert!(
        is_malformed(run("gh", &[headers[0], headers[2]], "{}")),
        "no event name"
    );
    assert!(
        is_malformed(run("gh", &headers, "payload=%7B%7D")),
        "form-encoded body"
    );
}

#[test]
fn github_scope_and_expect_come_from_the_signed_body() {
    let headers = [
        ("x-github-delivery", "d-1"),
        ("x-github-event", "push"),
        // Whatever the unsigned header says, the body decides.
        ("x-github-hook-installation-target-id", "999"),
    ];
    let in_org = r#"{"repository":{"id":42,"full_name":"acme/app"},"organization":{"id":9}}"#;
    assert_eq!(
        event(run("gh-signed", &headers, in_org))
            .source_scope
            .as_str(),
        "gh-signed/organization:9"
    );
    let alone = r#"{"repository":{"id":42}}"#;
    assert_eq!(
        event(run("gh-signed", &headers, alone))
            .source_scope
            .as_str(),
        "gh-signed/repository:42"
    );
    let app = r#"{"installation":{"id":5},"organization":{"id":9},"repository":{"id":42}}"#;
    assert_eq!(
        event(run("gh-signed", &headers, app)).source_scope.as_str(),
        "gh-signed/installation:5"
    );
    for (body, found) in [
        (r#"{"repository":{"id":7}}"#, "7"),
        (r#"{"organization":{"id":9}}"#, "-"),
        ("{}", "-"),
    ] {
        assert_eq!(
            out_of_scope(run("gh-signed", &headers, body)),
            ("repository", found.to_owned()),
            "{body}"
        );
    }
    assert!(
        is_malformed(run("gh-signed", &headers, r#"{"repository":{"id":"42"}}"#)),
        "ids are numbers"
    );
    let long_target = "9".repeat(6_000);
    let long_header = [
        headers[0],
        headers[1],
        ("x-github-hook-installation-target-id", &long_target),
    ];
    assert!(is_malformed(run("gh-signed", &long_header, alone)));
}

#[test]
fn every_identifier_is_bounded_so_a_receipt_key_fits_its_index() {
    let long = "a".repeat(MAX_IDENTIFIER_LEN + 1);
    let account = format!(r#"{{"id":"evt_1","type":"t","livemode":true,"account":"{long}"}}"#);
    assert!(is_malformed(run("stripe-any", &[], &account)));
    // The longest scope and event id the extractors allow, with every byte escaped three
    // times over, stays well under btree's 2704-byte index row.
    let widest = "/".repeat(MAX_IDENTIFIER_LEN);
    let scope = SourceScope::from_parts([&"i".repeat(64), widest.as_str(), widest.as_str()]);
    assert!(
        scope.as_str().len() + MAX_IDENTIFIER_LEN < 2_400,
        "{}",
        scope.as_str().len()
    );
}

#[test]
fn slack_url_verification_and_events() {
    let challenge = run(
        "slack",
        &[],
        r#"{"token":"t","challenge":"abc123","type":"url_verification"}"#,
    );
    assert_eq!(
        challenge,
        Ok(Extracted::UrlVerification {
            challenge: "abc123".into()
        })
    );
    let body = r#"{"type":"event_callback","event_id":"Ev1","team_id":"T1","api_app_id":"A1","event":{"type":"app_mention"}}"#;
    let event = event(run("slack", &[], body));
    assert_eq!(
        (event.event_id.as_str(), event.event_type.as_str()),
        ("Ev1", "app_mention")
    );
    assert_eq!(event.source_scope.as_str(), "slack/T1/A1");
    let other_team = body.replace("\"T1\"", "\"T2\"");
    assert_eq!(
        out_of_scope(run("slack", &[], &other_team)),
        ("team", "T2".to_owned())
    );
    // Slack's notice names the team and app it is about; one of a team or app the
    // integration does not serve is out of scope, never counted as its own (red team
    // 2026-12-05, F5).
    let rate_limited = r#"{"token":"x","type":"app_rate_limited","team_id":"T1","minute_rate_limited":1518467820,"api_app_id":"A1"}"#;
    assert_eq!(
        run("slack", &[], rate_limited),
        Ok(Extracted::SlackRateLimited {
            team_id: "T1".to_owned()
        })
    );
    assert_eq!(
        out_of_scope(run("slack", &[], &rate_limited.replace("\"T1\"", "\"T9\""))),
        ("team", "T9".to_owned())
    );
    assert_eq!(
        out_of_scope(run("slack", &[], &rate_limited.replace("\"A1\"", "\"A9\""))),
        ("app", "A9".to_owned())
    );
    assert_eq!(
        out_of_scope(run(
            "slack",
            &[],
            &rate_limited.replace(",\"api_app_id\":\"A1\"", "")
        )),
        ("app", "-".to_owned())
    );
    assert!(is_malformed(run(
        "slack",
        &[],
        r#"{"type":"event_callback","team_id":"T1","api_app_id":"A1","event":{"type":"x"}}"#
    )));
}

#[test]
fn standard_takes_id_from_header_and_type_from_payload() {
    let event = event(run(
        "std",
        &[("webhook-id", "msg_1")],
        r#"{"type":"invoice.paid","data":{}}"#,
    ));
    assert_eq!(
        (event.event_id.as_str(), event.event_type.as_str()),
        ("msg_1", "invoice.paid")
    );
    assert_eq!(event.source_scope.as_str(), "std");
    let aliased = event_from_svix();
    assert_eq!(aliased.event_id.as_str(), "msg_2");
    assert!(is_malformed(run(
        "std",
        &[("webhook-id", "msg_1")],
        r#"{"data":{}}"#
    )));
}

fn event_from_svix() -> Event<'static> {
    event(run("std", &[("svix-id", "msg_2")], r#"{"type":"x"}"#))
}

#[test]
fn an_exact_route_wins_over_the_longest_pattern_which_wins_over_the_catch_all() {
    let text = CONFIG.replacen(
        r#"routes = { "payment_intent.succeeded" = { handler = "orders.mark_paid" } }"#,
        r#"routes = { "invoice.paid" = { handler = "exact" }, "invoice.*" = { handler = "invoices" }, "invoice.payment.*" = { handler = "payments" }, "*" = { handler = "rest" } }"#,
        1,
    );
    let config = Config::from_toml(&text, &|_| {
        Some("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".to_owned())
    })
    .expect("config");
    let integration = &config.integrations()[0];
    let headers = [
        ("x-github-delivery", "d-1"),
        ("x-github-event", "pull_request"),
        ("x-github-hook-installation-target-id", "42"),
    ];
    let template = event(run("gh", &headers, "{}"));
    let routed = |event_type: &str| {
        let event = crate::event::Event {
            route_keys: vec![event_type.into()],
            ..template.clone()
        };
        find_route(integration, &event).map(|(key, route)| (key.to_owned(), route.handler.clone()))
    };
    let pair = |key: &str, handler: &str| Some((key.to_owned(), handler.to_owned()));
    assert_eq!(routed("invoice.paid"), pair("invoice.paid", "exact"));
    assert_eq!(routed("invoice.finalized"), pair("invoice.*", "invoices"));
    assert_eq!(
        routed("invoice.payment.failed"),
        pair("invoice.payment.*", "payments")
    );
    assert_eq!(routed("invoicex.paid"), pair("*", "rest"));
    assert_eq!(
        routed("invoice"),
        pair("*", "rest"),
        "`invoice.*` needs the dot"
    );
}

#[test]
fn a_pattern_of_an_events_specific_key_wins_over_an_exact_match_of_its_general_one() {
    // GitHub routes `pull_request.opened`, then `pull_request`: `pull_request.*` must
    // not be hidden for ever behind `pull_request` (which every pull_request event has).
    let text = CONFIG.replacen(
        r#"routes = { "pull_request.opened" = { handler = "forward", sink = "s" }, "pull_request" = { handler = "forward", sink = "s" } }"#,
        r#"routes = { "pull_request.*" = { handler = "actions", sink = "s" }, "pull_request" = { handler = "bare", sink = "s" } }"#,
        1,
    );
    let config = Config::from_toml(&text, &|_| {
        Some("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".to_owned())
    })
    .expect("config");
    let integration = config.integration("gh").expect("gh");
    let headers = [
        ("x-github-delivery", "d-1"),
        ("x-github-event", "pull_request"),
        ("x-github-hook-installation-target-id", "42"),
    ];
    let with_action = event(run("gh", &headers, r#"{"action":"opened"}"#));
    let routed = |event: &crate::event::Event<'_>| {
        find_route(integration, event).map(|(key, route)| (key.to_owned(), route.handler.clone()))
    };
    assert_eq!(
        routed(&with_action),
        Some(("pull_request.*".to_owned(), "actions".to_owned()))
    );
    let without_action = crate::event::Event {
        route_keys: vec!["pull_request".into()],
        ..with_action.clone()
    };
    assert_eq!(
        routed(&without_action),
        Some(("pull_request".to_owned(), "bare".to_owned()))
    );
}

#[test]
fn shopify_takes_ids_topic_and_shop_from_headers() {
    let headers = [
        ("x-shopify-event-id", "ev-1"),
        ("x-shopify-webhook-id", "wh-1"),
        ("x-shopify-topic", "orders/create"),
        ("x-shopify-shop-domain", "acme.myshopify.com"),
    ];
    let order = event(run("shop", &headers, r#"{"id":1}"#));
    assert_eq!(
        order.event_id.as_str(),
        "ev-1",
        "the event id, not the delivery's"
    );
    assert_eq!(order.event_type, "orders/create");
    assert_eq!(order.route_keys, ["orders/create"]);
    assert_eq!(
        order.source_scope.as_str(),
        "shop/acme.myshopify.com/orders%2Fcreate",
        "the topic is part of the key: Shopify shares an event id across topics"
    );
    assert_eq!(
        order.delivery.as_deref(),
        Some(r#"{"event_id":"ev-1","webhook_id":"wh-1"}"#)
    );
    let config = config();
    let integration = config.integration("shop").expect("shop");
    assert_eq!(
        find_route(integration, &order).map(|(key, _)| key),
        Some("orders/create")
    );

    // Without an event id (an older API version), the delivery's id keys the receipt.
    let without_event_id = event(run("shop", &headers[1..], "{}"));
    assert_eq!(without_event_id.event_id.as_str(), "wh-1");

    let other_shop = [
        headers[0],
        headers[1],
        headers[2],
        ("x-shopify-shop-domain", "evil.myshopify.com"),
    ];
    assert_eq!(
        out_of_scope(run("shop", &other_shop, "{}")),
        ("shop", "evil.myshopify.com".to_owned())
    );
    assert!(is_malformed(run("shop", &[], "{}")), "no header at all");
    assert!(
        is_malformed(run("shop", &[headers[0], headers[3]], "{}")),
        "no topic"
    );
    assert!(
        is_malformed(run("shop", &[headers[0], headers[2]], "{}")),
        "no shop"
    );
    assert!(
        is_malformed(run("shop", &[headers[2], headers[3]], "{}")),
        "no event or webhook id"
    );
    assert!(
        is_malformed(run(
            "shop",
            &[("x-shopify-event-id", ""), headers[2], headers[3]],
            "{}"
        )),
        "an empty event id"
    );
}

#[test]
fn paddle_takes_event_id_and_type_from_the_signed_body() {
    let body = r#"{"event_id":"evt_01h","event_type":"transaction.completed","notification_id":"ntf_1","data":{}}"#;
    let paid = event(run("paddle", &[], body));
    assert_eq!(
        paid.event_id.as_str(),
        "evt_01h",
        "the event's id, not the notification's"
    );
    assert_eq!(paid.event_type, "transaction.completed");
    assert_eq!(paid.route_keys, ["transaction.completed"]);
    assert_eq!(paid.source_scope.as_str(), "paddle");
    assert!(
        is_malformed(run(
            "paddle",
            &[],
            r#"{"event_type":"transaction.completed"}"#
        )),
        "no event_id"
    );
    assert!(
        is_malformed(run("paddle", &[], r#"{"event_id":"evt_1"}"#)),
        "no event_type"
    );
    assert!(
        is_malformed(run("paddle", &[], r#"{"event_id":1,"event_type":"x"}"#)),
        "a numeric id"
    );
    assert!(
        is_malformed(run(
            "paddle",
            &[],
            r#"{"event_id":"a","event_id":"b","event_type":"x"}"#
        )),
        "a repeated id"
    );
}

#[test]
fn zoom_keys_a_receipt_by_its_body_and_answers_the_endpoint_validation() {
    let body = r#"{"event":"meeting.started","event_ts":1626230691572,"payload":{"account_id":"AAAAAABBBB","object":{"id":"1"}}}"#;
    let started = event(run("zoom", &[], body));
    assert_eq!(
        started.event_id.as_str(),
        hex::encode(crate::keys::content_digest(body.as_bytes())),
        "Zoom sends no event id: the body's digest keys the receipt"
    );
    assert_eq!(started.event_type, "meeting.started");
    assert_eq!(started.route_keys, ["meeting.started"]);
    assert_eq!(started.source_scope.as_str(), "zoom/AAAAAABBBB");
    let retry = event(run("zoom", &[], body));
    assert_eq!(
        retry.event_id, started.event_id,
        "a retry is the same receipt"
    );

    let other = body.replace("AAAAAABBBB", "CCCC");
    assert_eq!(out_of_scope(run("zoom", &[], &other)).0, "account");
    assert!(
        is_malformed(run("zoom", &[], r#"{"payload":{}}"#)),
        "no event"
    );

    let validation = r#"{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1654503849680,"event":"endpoint.url_validation"}"#;
    assert_eq!(
        run("zoom", &[], validation),
        Ok(Extracted::ZoomUrlValidation {
            plain_token: "qgg8vlvZRS6UYooatFL8Aw".to_owned()
        })
    );
    assert!(
        is_malformed(run(
            "zoom",
            &[],
            r#"{"event":"endpoint.url_validation","payload":{}}"#
        )),
        "a validation without its token"
    );
}

/// A configured field holding a number keeps the number as written: two ids beyond u64
/// that one f64 would render alike are two receipt keys, and `1.0` is not `1`.
#[test]
fn configured_numeric_ids_keep_their_exact_text() {
    let id_of = |body: &str| event(run("custom", &[], body)).event_id.as_str().to_owned();
    let first = id_of(r#"{"event":{"id":18446744073709551616},"type":"t","account":7}"#);
    let second = id_of(r#"{"event":{"id":18446744073709551617},"type":"t","account":7}"#);
    assert_eq!(first, "18446744073709551616");
    assert_eq!(second, "18446744073709551617");
    assert_eq!(
        id_of(r#"{"event":{"id":1.0},"type":"t","account":7}"#),
        "1.0"
    );
    let scoped = event(run(
        "custom",
        &[],
        r#"{"event":{"id":"e"},"type":"t","account":123456789012345678901234567890}"#,
    ));
    assert_eq!(
        scoped.source_scope,
        SourceScope::from_parts(["custom", "123456789012345678901234567890"])
    );
}

/// A configured field whose key repeats is refused: which one a reader takes is the
/// sender's choice to exploit.
#[test]
fn configured_fields_with_a_repeated_key_are_malformed() {
    assert!(is_malformed(run(
        "custom",
        &[],
        r#"{"event":{"id":"a"},"type":"t","type":"u","account":"x"}"#,
    )));
}

/// GitLab's group and member events carry no `/project/id`: a type no route takes is
/// ignored before any field is read; a routed one still needs every field.
#[test]
fn configured_senders_decide_the_route_before_reading_fields() {
    let member = r#"{"event_name":"user_add_to_group","group_id":7}"#;
    let unrouted = [("x-gitlab-event", "Member Hook")];
    assert_eq!(
        run("gitlab", &unrouted, member),
        Ok(Extracted::Unrouted {
            event_type: "Member Hook".to_owned()
        })
    );
    assert!(
        is_malformed(run("gitlab", &[], member)),
        "without a type no route can be decided"
    );
    let routed = [
        ("x-gitlab-event", "Push Hook"),
        ("x-gitlab-event-uuid", "u-1"),
    ];
    assert!(is_malformed(run("gitlab", &routed, member)), "no project");
    assert!(
        is_malformed(run("gitlab", &routed[..1], r#"{"project":{"id":42}}"#)),
        "no event id"
    );
    let push = event(run("gitlab", &routed, r#"{"project":{"id":42}}"#));
    assert_eq!(push.source_scope.as_str(), "gitlab/42");
    assert_eq!(
        out_of_scope(run("gitlab", &routed, r#"{"project":{"id":7}}"#)),
        ("scope", "7".to_owned())
    );
    // With a catch-all route, every event is routed, so a missing type is malformed.
    assert!(is_malformed(run(
        "custom",
        &[],
        r#"{"event":{"id":"e"},"account":1}"#
    )));
}

#[test]
fn a_github_form_delivery_is_read_from_its_payload_field() {
    let json = r#"{"action":"opened","repository":{"id":42}}"#;
    let form = format!(
        "payload={}",
        percent_encoding::utf8_percent_encode(json, percent_encoding::NON_ALPHANUMERIC)
    );
    let headers = [
        ("x-github-delivery", "d-1"),
        ("x-github-event", "pull_request"),
        ("content-type", "application/x-www-form-urlencoded"),
    ];
    let delivery = event(run("gh-form", &headers, &form));
    assert_eq!(delivery.payload_json, json);
    assert!(is_malformed(run("gh-form", &headers, "other=1")));
    // Another provider's form body is not read as a form (the ingress answers 415).
    assert!(is_malformed(run(
        "slack",
        &[("content-type", "application/x-www-form-urlencoded")],
        &form
    )));
}

/// The integration says how its hook encodes deliveries; the unsigned `Content-Type`
/// never chooses how the signed bytes are read. A JSON body carrying
/// `&payload=<another event>&` in a string, re-sent declared as a form, is never stored
/// as that other event (red team 2026-12-05, F4).
#[test]
fn a_github_body_is_read_as_its_integration_says_whatever_the_header_declares() {
    let inner =
        r#"{"action":"opened","repository":{"id":999},"pull_request":{"title":"SMUGGLED"}}"#;
    let smuggled = format!(
        r#"{{"action":"opened","pull_request":{{"title":"x&payload={}&y"}},"repository":{{"id":42}}}}"#,
        percent_encoding::utf8_percent_encode(inner, percent_encoding::NON_ALPHANUMERIC)
    );
    let as_form = [
        ("x-github-delivery", "d-form"),
        ("x-github-event", "pull_request"),
        ("content-type", "application/x-www-form-urlencoded"),
    ];
    // A JSON hook reads the JSON, whatever the header says: the outer event, scope 42.
    let read = event(run("gh-signed", &as_form, &smuggled));
    assert_eq!(read.payload_json, smuggled);
    assert_eq!(read.source_scope.as_str(), "gh-signed/repository:42");
    // A form hook's body is exactly one `payload=` field: a JSON body is refused, never
    // searched for a field.
    assert!(is_malformed(run("gh-form", &as_form, &smuggled)));
}

#[test]
fn a_stripe_endpoint_takes_only_its_kind_of_event() {
    let config = Config::from_toml(
        r#"
[[integration]]
id = "direct"
provider = "stripe"
tenant = "acme"
secrets = ["env:S"]
stripe = { account = "acct_own" }

[[integration]]
id = "connect"
provider = "stripe"
tenant = "acme"
secrets = ["env:S"]
stripe = { connect = true }
"#,
        &|_| Some("whsec_x".to_owned()),
    )
    .expect("config");
    let no_headers: Headers = std::iter::empty::<(&str, &[u8])>().collect();
    let run = |id: &str, body: &'static str| {
        extract(
            config.integration(id).expect("integration"),
            &no_headers,
            body.as_bytes(),
        )
    };
    let own = r#"{"id":"evt_1","type":"t","livemode":true}"#;
    let connected = r#"{"id":"evt_2","type":"t","livemode":true,"account":"acct_9"}"#;
    assert_eq!(
        event(run("direct", own)).source_scope.as_str(),
        "direct/platform/live"
    );
    assert_eq!(
        out_of_scope(run("direct", connected)),
        ("account", "acct_9".to_owned())
    );
    assert_eq!(
        event(run("connect", connected)).source_scope.as_str(),
        "connect/acct_9/live"
    );
    assert_eq!(
        out_of_scope(run("connect", own)),
        ("account", "-".to_owned())
    );
}

/// Each provider's documented delivery names its subject and event time by default
/// (docs/contract.md, "Subjects"); the shapes are the providers' own samples, trimmed.
#[test]
fn each_provider_names_its_subject_and_event_time() {
    let about = |event: Event<'_>| (event.subject, event.event_at.map(|at| at.to_rfc3339()));
    // Stripe: a PaymentIntent's own id; a charge's and a refund's PaymentIntent.
    let stripe = |object: &str| {
        format!(
            r#"{{"id":"evt_1","type":"x","livemode":true,"account":"acct_1","created":1700000000,"data":{{"object":{object}}}}}"#
        )
    };
    let at = Some("2023-11-14T22:13:20+00:00".to_owned());
    for (object, subject) in [
        (r#"{"id":"pi_1","object":"payment_intent"}"#, "pi_1"),
        (
            r#"{"id":"ch_1","object":"charge","payment_intent":"pi_1"}"#,
            "pi_1",
        ),
        (
            r#"{"id":"re_1","object":"refund","payment_intent":"pi_1"}"#,
            "pi_1",
        ),
        // No PaymentIntent (a charge made without one), or an expanded one: its own id.
        (
            r#"{"id":"ch_2","object":"charge","payment_intent":null}"#,
            "ch_2",
        ),
        (
            r#"{"id":"ch_3","object":"charge","payment_intent":{"id":"pi_9"}}"#,
            "ch_3",
        ),
        // An invoice names a PaymentIntent too, but is its own object.
        (
            r#"{"id":"in_1","object":"invoice","payment_intent":"pi_1"}"#,
            "in_1",
        ),
    ] {
        let body = stripe(object);
        assert_eq!(
            about(event(run("stripe-acme", &[], &body))),
            (Some(subject.to_owned()), at.clone()),
            "{object}"
        );
    }
    // A thin event: its related object, and an RFC 3339 `created`.
    let thin = r#"{"id":"evt_t","object":"v2.core.event","type":"v1.billing.meter.error_report_triggered","livemode":true,"context":"acct_1","created":"2024-09-26T18:58:38.911Z","related_object":{"id":"mtr_1","type":"billing.meter"}}"#;
    let (subject, time) = about(event(run("stripe-acme", &[], thin)));
    assert_eq!(subject.as_deref(), Some("mtr_1"));
    assert_eq!(time.as_deref(), Some("2024-09-26T18:58:38.911+00:00"));
    // No data, or data of another shape: no subject, never a refusal.
    for body in [
        r#"{"id":"evt_1","type":"x","livemode":true,"account":"acct_1"}"#,
        r#"{"id":"evt_1","type":"x","livemode":true,"account":"acct_1","data":[1],"created":"soon"}"#,
        r#"{"id":"evt_1","type":"x","livemode":true,"account":"acct_1","data":{"object":"x"}}"#,
    ] {
        assert_eq!(
            about(event(run("stripe-acme", &[], body))),
            (None, None),
            "{body}"
        );
    }

    // GitHub: the repository, and the issue or pull request; no event time.
    fn github(body: &str) -> Event<'_> {
        event(run(
            "gh",
            &[
                ("x-github-delivery", "d-1"),
                ("x-github-event", "pull_request"),
                ("x-github-hook-installation-target-id", "42"),
            ],
            body,
        ))
    }
    let pr = r#"{"action":"opened","number":42,"pull_request":{"number":42},"repository":{"id":7,"full_name":"octo/repo"}}"#;
    assert_eq!(about(github(pr)), (Some("octo/repo#42".to_owned()), None));
    let push = r#"{"ref":"refs/heads/main","repository":{"id":7,"full_name":"octo/repo"}}"#;
    assert_eq!(about(github(push)), (Some("octo/repo".to_owned()), None));
    let issue = r#"{"action":"opened","issue":{"number":1347},"repository":{"id":7,"full_name":"octo/repo"}}"#;
    assert_eq!(about(github(issue)).0.as_deref(), Some("octo/repo#1347"));

    // Paddle: `data.id` and `occurred_at`.
    let paddle = r#"{"event_id":"evt_01","event_type":"transaction.completed","occurred_at":"2024-04-12T13:16:10.809640Z","data":{"id":"txn_01"}}"#;
    let (subject, time) = about(event(run("paddle", &[], paddle)));
    assert_eq!(subject.as_deref(), Some("txn_01"));
    assert_eq!(time.as_deref(), Some("2024-04-12T13:16:10.809640+00:00"));

    // Zoom: `payload.object.id` (a number on some events) and `event_ts` in milliseconds.
    let zoom = r#"{"event":"meeting.started","event_ts":1635885799302,"payload":{"account_id":"AAAAAABBBB","object":{"id":85392211234,"uuid":"x"}}}"#;
    let (subject, time) = about(event(run("zoom", &[], zoom)));
    assert_eq!(subject.as_deref(), Some("85392211234"));
    assert_eq!(time.as_deref(), Some("2021-11-02T20:43:19.302+00:00"));

    // Shopify: the resource's GraphQL id, else its id; triggered-at from the header.
    let shop_headers = [
        ("x-shopify-webhook-id", "w-1"),
        ("x-shopify-topic", "orders/create"),
        ("x-shopify-shop-domain", "acme.myshopify.com"),
        ("x-shopify-triggered-at", "2025-03-11T20:54:30.516267807Z"),
    ];
    let order = r#"{"id":820982911946154508,"admin_graphql_api_id":"gid://shopify/Order/820982911946154508"}"#;
    let (subject, time) = about(event(run("shop", &shop_headers, order)));
    assert_eq!(
        subject.as_deref(),
        Some("gid://shopify/Order/820982911946154508")
    );
    assert_eq!(time.as_deref(), Some("2025-03-11T20:54:30.516267807+00:00"));
    let deleted = r#"{"id":820982911946154508}"#;
    assert_eq!(
        about(event(run("shop", &shop_headers, deleted)))
            .0
            .as_deref(),
        Some("820982911946154508")
    );
    // A repeated key on the subject's path: no subject, still accepted.
    let repeated = r#"{"id":1,"id":2}"#;
    assert_eq!(about(event(run("shop", &shop_headers, repeated))).0, None);
}

#[test]
fn a_route_names_its_own_subject_with_pointers_tried_in_order() {
    let text = CONFIG.replace(
        r#"routes = { "transaction.completed" = { handler = "forward", sink = "s" } }"#,
        r#"routes = { "transaction.completed" = { handler = "forward", sink = "s", subject = ["/data/subscription_id", "/data/customer_id"], ordered = true } }"#,
    );
    let config = Config::from_toml(&text, &|_| {
        Some("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".to_owned())
    })
    .expect("config");
    let integration = config.integration("paddle").expect("paddle");
    let headers: Headers = std::iter::empty::<(&str, &[u8])>().collect();
    let subject_of = |body: &str| {
        let Ok(Extracted::Event(event)) = extract(integration, &headers, body.as_bytes()) else {
            panic!("an event");
        };
        let (_, route) = find_route(integration, &event).expect("routed");
        assert!(route.ordered);
        subject_for(route, &event, body)
    };
    let both = r#"{"event_id":"e","event_type":"transaction.completed","data":{"id":"txn_1","subscription_id":"sub_1","customer_id":"ctm_1"}}"#;
    assert_eq!(subject_of(both).as_deref(), Some("sub_1"));
    let customer = r#"{"event_id":"e","event_type":"transaction.completed","data":{"id":"txn_1","subscription_id":null,"customer_id":"ctm_1"}}"#;
    assert_eq!(subject_of(customer).as_deref(), Some("ctm_1"));
    let neither = r#"{"event_id":"e","event_type":"transaction.completed","data":{"id":"txn_1"}}"#;
    assert_eq!(
        subject_of(neither),
        None,
        "the route's pointers replace the default"
    );
}

#[test]
fn an_ordered_route_needs_a_subject_and_pointers_must_be_pointers() {
    let with_route = |route: &str| {
        CONFIG.replace(
            r#"expect = { team_id = "T1", api_app_id = "A1" }"#,
            &format!("expect = {{ team_id = \"T1\", api_app_id = \"A1\" }}\nroutes = {{ \"message\" = {route} }}"),
        )
    };
    let load = |text: &str| {
        Config::from_toml(text, &|_| {
            Some("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".to_owned())
        })
    };
    let error = load(&with_route(
        r#"{ handler = "forward", sink = "s", ordered = true }"#,
    ))
    .expect_err("slack has no default subject");
    assert!(error.to_string().contains("subject"), "{error}");
    assert!(
        load(&with_route(
            r#"{ handler = "forward", sink = "s", ordered = true, subject = ["/event/channel"] }"#
        ))
        .is_ok()
    );
    for bad in [
        r#"[]"#,
        r#"["event/channel"]"#,
        r#"["/a","/b","/c","/d","/e","/f","/g","/h","/i"]"#,
    ] {
        let error = load(&with_route(&format!(
            r#"{{ handler = "forward", sink = "s", subject = {bad} }}"#
        )))
        .expect_err(bad);
        assert!(error.to_string().contains(".subject"), "{bad}: {error}");
    }
}
