//! Property tests: arbitrary bytes and headers never panic the verifiers, the header view
//! or the payload extraction, and never verify without the secret.

use inbound_core::config::Config;
use inbound_core::event;
use inbound_core::headers::Headers;
use inbound_core::secret::Secret;
use inbound_core::verify::{self, Provider, VerifyContext};
use proptest::prelude::*;

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
];

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
        "sha256=[0-9a-f]{0,70}",
        "v0=[0-9a-f]{0,70}",
        "(v1,[A-Za-z0-9+/=]{0,50} ?){0,3}",
        "[0-9]{0,15}",
        ".{0,40}",
    ]
}

fn config() -> Config {
    let text = r#"
[[integration]]
id = "s"
provider = "stripe"
tenant = "t"
secrets = ["env:K"]
routes = { "a" = { handler = "forward", sink = "x" } }
[[integration]]
id = "g"
provider = "github"
tenant = "t"
secrets = ["env:K"]
[[integration]]
id = "l"
provider = "slack"
tenant = "t"
secrets = ["env:K"]
[[integration]]
id = "w"
provider = "standard"
tenant = "t"
secrets = ["env:K"]
[[sink]]
id = "x"
url = "http://x/"
"#;
    Config::from_toml(text, &|_| {
        Some("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".to_owned())
    })
    .expect("config")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_requests_never_panic_and_never_verify(
        pairs in header_pairs(),
        shaped in prop::collection::vec((0..HEADER_NAMES.len(), plausible_value()), 0..6),
        body in prop::collection::vec(any::<u8>(), 0..512),
        now in 0i64..4_000_000_000,
    ) {
        let secrets = [Secret::new(b"whsec_the_real_secret".to_vec())];
        let mut owned: Vec<(&str, Vec<u8>)> = pairs.into_iter().map(|(name, value)| (HEADER_NAMES[name], value)).collect();
        owned.extend(shaped.into_iter().map(|(name, value)| (HEADER_NAMES[name], value.into_bytes())));
        let headers: Headers = owned.iter().map(|(name, value)| (*name, value.as_slice())).collect();
        let context = VerifyContext { secrets: &secrets, public_keys: &[], tolerance_secs: 300, now_unix_secs: now };
        for provider in Provider::ALL {
            prop_assert!(verify::verify(provider, &headers, &body, context).is_err());
        }
    }

    #[test]
    fn arbitrary_bodies_never_panic_the_extractors(
        body in prop::collection::vec(any::<u8>(), 0..512),
        text in ".{0,300}",
        pairs in header_pairs(),
    ) {
        let config = config();
        let owned: Vec<(&str, Vec<u8>)> = pairs.into_iter().map(|(name, value)| (HEADER_NAMES[name], value)).collect();
        let headers: Headers = owned.iter().map(|(name, value)| (*name, value.as_slice())).collect();
        for integration in config.integrations() {
            let _ = event::extract(integration, &headers, &body);
            let _ = event::extract(integration, &headers, text.as_bytes());
        }
    }

    #[test]
    fn json_shaped_bodies_extract_or_refuse_cleanly(
        id in prop::option::of("[ -~]{0,300}"),
        event_type in prop::option::of("[ -~]{0,40}"),
        depth in 0usize..100,
        livemode in prop::option::of(any::<bool>()),
    ) {
        let config = config();
        let stripe = config.integration("s").expect("s");
        let mut body = serde_json::json!({"data": {}});
        if let Some(id) = &id { body["id"] = id.clone().into(); }
        if let Some(event_type) = &event_type { body["type"] = event_type.clone().into(); }
        if let Some(livemode) = livemode { body["livemode"] = livemode.into(); }
        let nested = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        let text = body.to_string().replacen("\"data\":{}", &format!("\"data\":{nested}"), 1);
        match event::extract(stripe, &Headers::default(), text.as_bytes()) {
            Ok(event::Extracted::Event(event)) => {
                prop_assert_eq!(Some(event.event_id.as_str()), id.as_deref());
                prop_assert!(depth < event::MAX_JSON_DEPTH);
            }
            Ok(other) => prop_assert!(false, "unexpected {:?}", other),
            Err(_) => {}
        }
    }
}
