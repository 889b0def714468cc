//! Any body, signed the way each provider signs it, verifies; the same signature over a
//! body one byte longer does not.
#![no_main]

use arbitrary::Arbitrary;
use inbound_core::headers::Headers;
use inbound_core::provider;
use inbound_core::secret::Secret;
use inbound_core::verify::{Provider, VerifyContext};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
struct Signed<'a> {
    secret: &'a [u8],
    id: &'a str,
    timestamp: u32,
    skew: i16,
    body: &'a [u8],
}

fuzz_target!(|signed: Signed<'_>| {
    if signed.secret.is_empty() {
        return;
    }
    let secret = Secret::new(signed.secret.to_vec());
    let timestamp = i64::from(signed.timestamp);
    let now = timestamp + i64::from(signed.skew) % 300;
    let timestamp_text = timestamp.to_string();
    // As HTTP delivers a header value: visible ASCII, no surrounding whitespace.
    let id = signed
        .id
        .replace(|c: char| c.is_control() || !c.is_ascii(), "")
        .trim()
        .to_owned();
    for provider in Provider::ALL {
        let headers: Vec<(&str, String)> = match provider {
            Provider::Stripe => vec![(
                "stripe-signature",
                provider::sign_stripe(&secret, timestamp, signed.body),
            )],
            Provider::Github => vec![(
                "x-hub-signature-256",
                provider::sign_github(&secret, signed.body),
            )],
            Provider::Slack => vec![
                ("x-slack-request-timestamp", timestamp_text.clone()),
                (
                    "x-slack-signature",
                    provider::sign_slack(&secret, timestamp, signed.body),
                ),
            ],
            Provider::Standard => vec![
                ("webhook-id", id.clone()),
                ("webhook-timestamp", timestamp_text.clone()),
                (
                    "webhook-signature",
                    provider::sign_standard(&secret, &id, timestamp, signed.body),
                ),
            ],
            Provider::Shopify => vec![(
                "x-shopify-hmac-sha256",
                provider::sign_shopify(&secret, signed.body),
            )],
            Provider::Paddle => vec![(
                "paddle-signature",
                provider::sign_paddle(&secret, timestamp, signed.body),
            )],
            Provider::Zoom => vec![
                ("x-zm-request-timestamp", timestamp_text.clone()),
                (
                    "x-zm-signature",
                    provider::sign_zoom(&secret, timestamp, signed.body),
                ),
            ],
            // Configured per integration: no scheme here, so nothing verifies.
            Provider::Hmac | Provider::Token => continue,
        };
        let view: Headers = headers
            .iter()
            .map(|(name, value)| (*name, value.as_bytes()))
            .collect();
        let secrets = [secret.clone()];
        let context = VerifyContext {
            secrets: &secrets,
            public_keys: &[],
            tolerance_secs: 300,
            now_unix_secs: now,
        };
        if provider == Provider::Standard && id.is_empty() {
            assert!(provider::verify(provider, &view, signed.body, context).is_err());
            continue;
        }
        assert!(
            provider::verify(provider, &view, signed.body, context).is_ok(),
            "{provider:?} refused its own signature"
        );
        let mut longer = signed.body.to_vec();
        longer.push(b' ');
        assert!(provider::verify(provider, &view, &longer, context).is_err());
    }
});
