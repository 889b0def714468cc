//! Arbitrary headers and body against every provider's verifier: never a panic, and never
//! a pass without the secret (the input cannot know it).
#![no_main]

use arbitrary::Arbitrary;
use inbound_core::headers::Headers;
use inbound_core::provider;
use inbound_core::secret::Secret;
use inbound_core::verify::{Provider, VerifyContext};
use libfuzzer_sys::fuzz_target;

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
];

#[derive(Debug, Arbitrary)]
struct Request<'a> {
    headers: Vec<(u8, &'a [u8])>,
    now: i64,
    body: &'a [u8],
}

fuzz_target!(|request: Request<'_>| {
    let secrets = [Secret::new(b"fuzz-secret-never-in-the-input".to_vec())];
    let headers: Headers = request
        .headers
        .iter()
        .map(|(name, value)| {
            (
                HEADER_NAMES[usize::from(*name) % HEADER_NAMES.len()],
                *value,
            )
        })
        .collect();
    let context = VerifyContext {
        secrets: &secrets,
        public_keys: &[],
        tolerance_secs: 300,
        now_unix_secs: request.now,
    };
    for provider in Provider::ALL {
        assert!(provider::verify(provider, &headers, request.body, context).is_err());
    }
});
