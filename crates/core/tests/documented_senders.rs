//! Every configuration docs/providers.md gives verifies a request signed the way its
//! sender documents it — built here by hand, not by the scheme's own signer — extracts
//! the documented id, type and scope, and refuses the request tampered.

use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use inbound_core::config::{Config, Integration};
use inbound_core::event::{self, Extracted};
use inbound_core::headers::Headers;
use inbound_core::provider;
use inbound_core::secret::Secret;
use inbound_core::verify::{self, VerifyContext, VerifyError};

const PAGE: &str = include_str!("../../../docs/providers.md");
const SECRET: &str = "the-sender-secret";
const NOW: i64 = 1_796_197_000;

fn hmac_hex<M: Mac + KeyInit>(body: &[u8]) -> String {
    let mut mac = <M as KeyInit>::new_from_slice(SECRET.as_bytes()).expect("any key");
    mac.update(body);
    hex::encode(mac.finalize().into_bytes())
}

/// The `toml` blocks of the page, each one integration, with the sink they route to.
fn documented() -> Vec<Config> {
    let blocks: Vec<&str> = PAGE
        .split("```toml\n")
        .skip(1)
        .map(|rest| rest.split("```").next().expect("a closed block"))
        .collect();
    assert_eq!(blocks.len(), 6, "one block per sender on the page");
    blocks
        .into_iter()
        .map(|block| {
            let text = format!("{block}\n[[sink]]\nid = \"s\"\nurl = \"http://sink.internal/\"\n");
            Config::from_toml(&text, &|_| Some(SECRET.to_owned()))
                .unwrap_or_else(|error| panic!("{error}\n{text}"))
        })
        .collect()
}

/// A request as the sender sends it: headers, body, and the id, type and scope it carries.
struct Sent {
    headers: Vec<(&'static str, String)>,
    body: String,
    id: &'static str,
    event_type: &'static str,
    scope: Option<&'static str>,
}

fn as_sent(integration: &str) -> Sent {
    match integration {
        "linear" => {
            let body = r#"{"action":"create","type":"Issue","organizationId":"8f1e2d3c-0000-4000-8000-000000000001","webhookTimestamp":1796197000000,"data":{"id":"i1"}}"#.to_owned();
            Sent {
                headers: vec![
                    (
                        "linear-signature",
                        hmac_hex::<Hmac<sha2::Sha256>>(body.as_bytes()),
                    ),
                    ("linear-delivery", "d-123".to_owned()),
                ],
                body,
                id: "d-123",
                event_type: "Issue",
                scope: Some("8f1e2d3c-0000-4000-8000-000000000001"),
            }
        }
        "intercom" => {
            let body = r#"{"type":"notification_event","app_id":"ab12cd34","id":"notif_1","topic":"conversation.user.created","data":{}}"#.to_owned();
            Sent {
                headers: vec![(
                    "x-hub-signature",
                    format!("sha1={}", hmac_hex::<Hmac<sha1::Sha1>>(body.as_bytes())),
                )],
                body,
                id: "notif_1",
                event_type: "conversation.user.created",
                scope: Some("ab12cd34"),
            }
        }
        "pagerduty" => {
            let body = r#"{"event":{"id":"01DEN3OFO5OYZN0UTPYHTKP3BC","event_type":"incident.triggered","resource_type":"incident","data":{}}}"#.to_owned();
            let signature = hmac_hex::<Hmac<sha2::Sha256>>(body.as_bytes());
            Sent {
                // Rotation: the old secret's signature first, the current one second.
                headers: vec![(
                    "x-pagerduty-signature",
                    format!("v1={},v1={signature}", "0".repeat(64)),
                )],
                body,
                id: "01DEN3OFO5OYZN0UTPYHTKP3BC",
                event_type: "incident.triggered",
                scope: None,
            }
        }
        "vercel" => {
            let body = r#"{"id":"evt_vercel_1","type":"deployment.succeeded","createdAt":1796197000000,"payload":{}}"#.to_owned();
            Sent {
                headers: vec![(
                    "x-vercel-signature",
                    hmac_hex::<Hmac<sha1::Sha1>>(body.as_bytes()),
                )],
                body,
                id: "evt_vercel_1",
                event_type: "deployment.succeeded",
                scope: None,
            }
        }
        "gitlab" => Sent {
            headers: vec![
                ("x-gitlab-token", SECRET.to_owned()),
                ("idempotency-key", "f0e7a8b9-1".to_owned()),
                ("x-gitlab-event", "Push Hook".to_owned()),
            ],
            body: r#"{"object_kind":"push","project":{"id":42,"name":"app"}}"#.to_owned(),
            id: "f0e7a8b9-1",
            event_type: "Push Hook",
            scope: Some("42"),
        },
        "in-house" => {
            let body = r#"{"kind":"order.placed","order":"o1"}"#.to_owned();
            let timestamp = (NOW * 1000 + 123).to_string();
            let mut mac =
                <Hmac<sha2::Sha512> as KeyInit>::new_from_slice(SECRET.as_bytes()).expect("key");
            mac.update(format!("{timestamp}.{body}").as_bytes());
            let signature =
                base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes());
            Sent {
                headers: vec![
                    ("x-signature", format!("v1={signature}")),
                    ("x-timestamp", timestamp),
                    ("x-event-id", "ih-1".to_owned()),
                ],
                body,
                id: "ih-1",
                event_type: "order.placed",
                scope: None,
            }
        }
        other => panic!("no request written for documented sender {other}"),
    }
}

/// The request's headers as the verifiers read them.
fn headers_of(sent: &Sent) -> Headers<'_> {
    sent.headers
        .iter()
        .map(|(name, value)| (*name, value.as_bytes()))
        .collect()
}

/// Verifies `body` as `integration` does at `NOW`, with `secrets` in place of its own.
fn verify_with_secrets(
    integration: &Integration,
    headers: &Headers,
    body: &[u8],
    secrets: &[Secret],
) -> Result<(), VerifyError> {
    let scheme = integration.custom.as_ref().map(|custom| &custom.verifier);
    let context = VerifyContext {
        secrets,
        public_keys: &[],
        tolerance_secs: integration.tolerance_secs,
        now_unix_secs: NOW,
    };
    provider::verify_with(integration.provider, scheme, headers, body, context)
}

/// The request verifies, also with a rotated secret list, and not with another secret or
/// a tampered body (except a token's, which signs nothing).
fn assert_verifies_only_as_sent(integration: &Integration, sent: &Sent) {
    let (name, headers, body) = (&integration.id, headers_of(sent), sent.body.as_bytes());
    let check =
        |body: &[u8], secrets: &[Secret]| verify_with_secrets(integration, &headers, body, secrets);
    assert_eq!(check(body, &integration.secrets), Ok(()), "{name}");
    let mut tampered = body.to_vec();
    tampered.push(b' ');
    if integration.provider == verify::Provider::Token {
        // A token signs nothing: a tampered body passes. That is the scheme's weakness.
        assert_eq!(check(&tampered, &integration.secrets), Ok(()), "{name}");
    } else {
        assert_eq!(
            check(&tampered, &integration.secrets),
            Err(VerifyError::NoMatchingSignature),
            "{name}"
        );
    }
    // Rotation: another secret first, the sender's second, still verifies.
    let rotated = [
        Secret::new(b"the old secret".to_vec()),
        integration.secrets[0].clone(),
    ];
    assert_eq!(check(body, &rotated), Ok(()), "{name}: rotation");
    let wrong = [Secret::new(b"another".to_vec())];
    assert_eq!(
        check(body, &wrong),
        Err(VerifyError::NoMatchingSignature),
        "{name}: another secret"
    );
}

/// The request yields the documented id, type and scope, and a route.
fn assert_extracts_what_it_sends(integration: &Integration, sent: &Sent) {
    let name = &integration.id;
    let Ok(Extracted::Event(event)) =
        provider::extract(integration, &headers_of(sent), sent.body.as_bytes())
    else {
        panic!("{name}: no event extracted");
    };
    assert_eq!(event.event_id.as_str(), sent.id, "{name}");
    assert_eq!(event.event_type, sent.event_type, "{name}");
    let scope = match sent.scope {
        Some(scope) => format!("{name}/{scope}"),
        None => name.to_string(),
    };
    assert_eq!(event.source_scope.as_str(), scope, "{name}");
    assert!(
        event::find_route(integration, &event).is_some(),
        "{name}: routed"
    );
}

#[test]
fn every_documented_sender_verifies_and_extracts_what_it_sends() {
    for config in documented() {
        let integration = &config.integrations()[0];
        let sent = as_sent(&integration.id);
        assert_verifies_only_as_sent(integration, &sent);
        assert_extracts_what_it_sends(integration, &sent);
    }
}

#[test]
fn a_signed_timestamp_outside_the_tolerance_is_refused() {
    let config = documented()
        .into_iter()
        .find(|config| config.integrations()[0].id == "in-house")
        .expect("in-house");
    let integration = &config.integrations()[0];
    let sent = as_sent("in-house");
    let headers = headers_of(&sent);
    let scheme = integration.custom.as_ref().map(|custom| &custom.verifier);
    let at = |now| {
        let context = VerifyContext {
            secrets: &integration.secrets,
            public_keys: &[],
            tolerance_secs: 300,
            now_unix_secs: now,
        };
        provider::verify_with(
            integration.provider,
            scheme,
            &headers,
            sent.body.as_bytes(),
            context,
        )
    };
    assert_eq!(at(NOW + 300), Ok(()));
    assert_eq!(at(NOW + 301), Err(VerifyError::TimestampTooOld));
    assert_eq!(at(NOW - 301), Err(VerifyError::TimestampInFuture));
}
