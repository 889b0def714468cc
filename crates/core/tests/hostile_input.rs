//! Property tests: arbitrary bytes and headers never panic the verifiers, the header view
//! or the payload extraction, and never verify without the secret — for every scheme,
//! the configured `hmac` and `token` ones included. Each "never" has a control beside it
//! that runs the same harness with the right secret and must verify, so the property
//! cannot hold merely because a scheme's headers were never sent.

use inbound_core::config::{Config, Integration};
use inbound_core::event::{self, ExtractError, Extracted};
use inbound_core::headers::Headers;
use inbound_core::provider;
use inbound_core::verify::{self, Provider, VerifyContext};
use proptest::prelude::*;

/// Every header a scheme of the configuration below reads.
const HEADER_NAMES: &[&str] = &[
    "stripe-signature",
    "x-hub-signature-256",
    "x-slack-signature",
    "x-slack-request-timestamp",
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
    "svix-id",
    "svix-timestamp",
    "svix-signature",
    "x-github-delivery",
    "x-github-event",
    "x-github-hook-installation-target-id",
    "x-shopify-hmac-sha256",
    "x-shopify-topic",
    "x-shopify-shop-domain",
    "x-shopify-event-id",
    "x-shopify-webhook-id",
    "paddle-signature",
    "x-zm-signature",
    "x-zm-request-timestamp",
    "x-custom-signature",
    "x-custom-timestamp",
    "x-custom-token",
    "x-custom-id",
    "x-custom-type",
];

/// The secret every integration holds, as the configuration resolves it.
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn header_pairs() -> impl Strategy<Value = Vec<(usize, Vec<u8>)>> {
    prop::collection::vec(
        (
            0..HEADER_NAMES.len(),
            prop::collection::vec(any::<u8>(), 0..120),
        ),
        0..8,
    )
}

/// Header values shaped like the real ones, with arbitrary parts.
fn plausible_value() -> impl Strategy<Value = String> {
    prop_oneof![
        "t=[0-9]{1,12},v1=[0-9a-f]{0,64}(,v1=[0-9a-f]{64})?(,v0=[a-z0-9]{0,8})?",
        "ts=[0-9]{1,12};h1=[0-9a-f]{0,64}(;h1=[0-9a-f]{64})?",
        "sha256=[0-9a-f]{0,70}",
        "v0=[0-9a-f]{0,70}",
        "(v1,[A-Za-z0-9+/=]{0,50} ?){0,3}",
        "(v1a,[A-Za-z0-9+/=]{0,90} ?){0,3}",
        "[A-Za-z0-9+/=]{40,48}",
        "[0-9]{0,15}",
        ".{0,40}",
    ]
}

/// One integration per scheme, each with [`SECRET`] (Standard Webhooks' also reads it as a
/// `whsec_` key).
const CONFIG: &str = r#"
[[integration]]
id = "stripe"
provider = "stripe"
tenant = "t"
secrets = ["env:K"]
routes = { "a" = { handler = "forward", sink = "x" } }
[[integration]]
id = "github"
provider = "github"
tenant = "t"
secrets = ["env:K"]
content_type = "json"
[[integration]]
id = "slack"
provider = "slack"
tenant = "t"
secrets = ["env:K"]
[[integration]]
id = "standard"
provider = "standard"
tenant = "t"
secrets = ["env:K"]
[[integration]]
id = "shopify"
provider = "shopify"
tenant = "t"
secrets = ["env:K"]
[[integration]]
id = "paddle"
provider = "paddle"
tenant = "t"
secrets = ["env:K"]
[[integration]]
id = "zoom"
provider = "zoom"
tenant = "t"
secrets = ["env:K"]
[[integration]]
id = "hmac"
provider = "hmac"
tenant = "t"
secrets = ["env:K"]
[integration.hmac]
header = "x-custom-signature"
prefix = "v1="
separator = ","
algorithm = "sha512"
encoding = "base64"
signed = "{timestamp}.{body}"
timestamp_header = "x-custom-timestamp"
[integration.fields]
event_id = { pointer = "/id" }
event_type = { header = "x-custom-type" }
scope = { pointer = "/account/id" }
[[integration]]
id = "token"
provider = "token"
tenant = "t"
secrets = ["env:K"]
[integration.token]
header = "x-custom-token"
[integration.fields]
event_id = { header = "x-custom-id" }
event_type = { pointer = "/type" }
[[sink]]
id = "x"
url = "http://x/"
"#;

fn config() -> Config {
    Config::from_toml(CONFIG, &|_| Some(SECRET.to_owned())).expect("config")
}

fn verify(
    integration: &Integration,
    headers: &Headers<'_>,
    body: &[u8],
    now: i64,
) -> Result<(), verify::VerifyError> {
    let context = VerifyContext {
        secrets: &integration.secrets,
        public_keys: &integration.public_keys,
        tolerance_secs: 300,
        now_unix_secs: now,
    };
    let scheme = integration.custom.as_ref().map(|custom| &custom.verifier);
    provider::verify_with(integration.provider, scheme, headers, body, context)
}

/// The headers the sender of `integration` would send for `body` at `now`, signed with
/// [`SECRET`] (the control: these must verify).
fn signed_headers(integration: &Integration, body: &[u8], now: i64) -> Vec<(&'static str, String)> {
    let secret = &integration.secrets[0];
    match integration.provider {
        Provider::Stripe => vec![("stripe-signature", provider::sign_stripe(secret, now, body))],
        Provider::Github => vec![("x-hub-signature-256", provider::sign_github(secret, body))],
        Provider::Slack => vec![
            ("x-slack-signature", provider::sign_slack(secret, now, body)),
            ("x-slack-request-timestamp", now.to_string()),
        ],
        Provider::Standard => vec![
            ("webhook-id", "msg_1".to_owned()),
            ("webhook-timestamp", now.to_string()),
            (
                "webhook-signature",
                provider::sign_standard(secret, "msg_1", now, body),
            ),
        ],
        Provider::Shopify => vec![(
            "x-shopify-hmac-sha256",
            provider::sign_shopify(secret, body),
        )],
        Provider::Paddle => vec![("paddle-signature", provider::sign_paddle(secret, now, body))],
        Provider::Zoom => vec![
            ("x-zm-signature", provider::sign_zoom(secret, now, body)),
            ("x-zm-request-timestamp", now.to_string()),
        ],
        Provider::Hmac => {
            let Some(verify::custom::CustomVerifier::Hmac(scheme)) =
                integration.custom.as_ref().map(|custom| &custom.verifier)
            else {
                unreachable!("the hmac integration has an hmac scheme")
            };
            vec![
                (
                    "x-custom-signature",
                    verify::custom::sign(scheme, secret, &now.to_string(), body),
                ),
                ("x-custom-timestamp", now.to_string()),
            ]
        }
        Provider::Token => vec![("x-custom-token", SECRET.to_owned())],
    }
}

fn view<'a>(owned: &'a [(&'a str, Vec<u8>)]) -> Headers<'a> {
    owned
        .iter()
        .map(|(name, value)| (*name, value.as_slice()))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Arbitrary and plausible headers never verify under any scheme; the control
    /// beside them, the sender's own headers over the same body, verifies under every
    /// scheme, and stops verifying once the body changes (for the schemes that sign it).
    #[test]
    fn arbitrary_requests_never_panic_and_never_verify(
        pairs in header_pairs(),
        shaped in prop::collection::vec((0..HEADER_NAMES.len(), plausible_value()), 0..6),
        body in prop::collection::vec(any::<u8>(), 0..512),
        now in 1_000_000i64..4_000_000_000,
    ) {
        let config = config();
        let mut owned: Vec<(&str, Vec<u8>)> = pairs.into_iter().map(|(name, value)| (HEADER_NAMES[name], value)).collect();
        owned.extend(shaped.into_iter().map(|(name, value)| (HEADER_NAMES[name], value.into_bytes())));
        for integration in config.integrations() {
            prop_assert!(
                verify(integration, &view(&owned), &body, now).is_err(),
                "{} verified arbitrary headers", integration.id
            );
            let signed: Vec<(&str, Vec<u8>)> = signed_headers(integration, &body, now)
                .into_iter()
                .map(|(name, value)| (name, value.into_bytes()))
                .collect();
            prop_assert_eq!(verify(integration, &view(&signed), &body, now), Ok(()), "{}", &integration.id);
            let mut tampered = body.clone();
            tampered.push(b' ');
            if integration.provider != Provider::Token {
                prop_assert!(verify(integration, &view(&signed), &tampered, now).is_err(), "{}", &integration.id);
            }
        }
    }

    /// No extractor panics on any body, however its headers look.
    #[test]
    fn arbitrary_bodies_never_panic_the_extractors(
        body in prop::collection::vec(any::<u8>(), 0..512),
        text in ".{0,300}",
        pairs in header_pairs(),
    ) {
        let config = config();
        let owned: Vec<(&str, Vec<u8>)> = pairs.into_iter().map(|(name, value)| (HEADER_NAMES[name], value)).collect();
        let headers = view(&owned);
        prop_assert_eq!(config.integrations().len(), Provider::ALL.len(), "one integration per scheme");
        for integration in config.integrations() {
            let _ = provider::extract(integration, &headers, &body);
            let _ = provider::extract(integration, &headers, text.as_bytes());
        }
    }

    /// A Stripe-shaped body extracts exactly when its id, type and livemode are there and
    /// it is not nested too deeply; otherwise it is refused with the reason that applies
    /// first, never another.
    #[test]
    fn json_shaped_bodies_extract_or_refuse_cleanly(
        id in prop::option::of("[ -~]{0,300}"),
        event_type in prop::option::of("[ -~]{0,40}"),
        depth in 0usize..100,
        livemode in prop::option::of(any::<bool>()),
    ) {
        let config = config();
        let stripe = config.integration("stripe").expect("stripe");
        let mut body = serde_json::json!({"data": {}});
        if let Some(id) = &id { body["id"] = id.clone().into(); }
        if let Some(event_type) = &event_type { body["type"] = event_type.clone().into(); }
        if let Some(livemode) = livemode { body["livemode"] = livemode.into(); }
        let nested = format!("{}0{}", "[".repeat(depth), "]".repeat(depth));
        let text = body.to_string().replacen("\"data\":{}", &format!("\"data\":{nested}"), 1);
        // The object itself is one level, the arrays under "data" the rest.
        let expected_refusal = if depth + 1 > event::MAX_JSON_DEPTH {
            Some("body is nested too deeply".to_owned())
        } else if id.as_deref().is_none_or(str::is_empty) {
            Some("no event id".to_owned())
        } else if id.as_ref().is_some_and(|id| id.len() > event::MAX_IDENTIFIER_LEN) {
            Some(format!("event id is longer than {} bytes", event::MAX_IDENTIFIER_LEN))
        } else if event_type.as_deref().is_none_or(str::is_empty) {
            Some("no event type".to_owned())
        } else if livemode.is_none() {
            Some("no livemode".to_owned())
        } else {
            None
        };
        match (provider::extract(stripe, &Headers::default(), text.as_bytes()), expected_refusal) {
            (Ok(Extracted::Event(event)), None) => {
                prop_assert_eq!(Some(event.event_id.as_str()), id.as_deref());
                prop_assert_eq!(Some(event.event_type.as_str()), event_type.as_deref());
            }
            (Err(ExtractError::Malformed(reason)), Some(expected)) => prop_assert_eq!(reason, expected),
            (outcome, expected) => prop_assert!(false, "{:?}, expected refusal {:?}", outcome, expected),
        }
    }
}
