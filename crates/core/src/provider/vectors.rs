//! Known-answer tests: every vector in `testdata/signatures.json` (the project's signature
//! test vectors) verifies, signs to the same header, and fails once its body, header or
//! secret is tampered with.

use serde_json::Value;

use super::*;
use crate::verify::*;

/// A vectors file of `testdata/`.
fn load(file: &str) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata")
        .join(file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    serde_json::from_str(&text).expect("vectors are JSON")
}

fn load_vectors() -> Value {
    load("signatures.json")
}

fn text<'v>(vector: &'v Value, field: &str) -> &'v str {
    vector[field]
        .as_str()
        .unwrap_or_else(|| panic!("vector field {field}"))
}

fn number(vector: &Value, field: &str) -> i64 {
    vector[field]
        .as_i64()
        .unwrap_or_else(|| panic!("vector field {field}"))
}

fn headers_of<'a>(pairs: &'a [(&'a str, String)]) -> Headers<'a> {
    pairs
        .iter()
        .map(|(name, value)| (*name, value.as_bytes()))
        .collect()
}

fn context(secrets: &[Secret], now: i64) -> VerifyContext<'_> {
    VerifyContext {
        secrets,
        public_keys: &[],
        tolerance_secs: 300,
        now_unix_secs: now,
    }
}

/// Asserts `pairs` verify, and that changing the body or using another secret does not.
fn assert_verifies_only_untampered(
    provider: Provider,
    pairs: &[(&str, String)],
    body: &str,
    secret: Secret,
    now: i64,
) {
    let right = [secret];
    let wrong = [Secret::new(b"another secret".to_vec())];
    let headers = headers_of(pairs);
    assert_eq!(
        verify(provider, &headers, body.as_bytes(), context(&right, now)),
        Ok(())
    );
    let mut tampered_body = body.as_bytes().to_vec();
    tampered_body.push(b' ');
    assert_eq!(
        verify(provider, &headers, &tampered_body, context(&right, now)),
        Err(VerifyError::NoMatchingSignature)
    );
    assert_eq!(
        verify(provider, &headers, body.as_bytes(), context(&wrong, now)),
        Err(VerifyError::NoMatchingSignature)
    );
    // Rotation: the right secret second in the list still verifies.
    let rotated = [wrong[0].clone(), right[0].clone()];
    assert_eq!(
        verify(provider, &headers, body.as_bytes(), context(&rotated, now)),
        Ok(())
    );
}

/// Shopify publishes no fixed vector: these were signed, and each validated, by its
/// official SDK (`testdata/shopify-sdk.json` names the version; the generator is
/// `testdata/generators/shopify.js`).
#[test]
fn shopify_vectors_from_the_official_sdk() {
    let vectors = load("shopify-sdk.json");
    assert!(text(&vectors, "sdk").starts_with("@shopify/shopify-api "));
    let secret = Secret::new(text(&vectors, "secret").as_bytes().to_vec());
    let cases = vectors["cases"].as_array().expect("cases");
    assert!(!cases.is_empty());
    for case in cases {
        let (body, hmac) = (text(case, "body"), text(case, "hmac"));
        assert_eq!(sign_shopify(&secret, body.as_bytes()), hmac, "{body}");
        let pairs = [("x-shopify-hmac-sha256", hmac.to_owned())];
        assert_verifies_only_untampered(Provider::Shopify, &pairs, body, secret.clone(), 0);
        // One flipped character of the header is a different signature.
        let mut tampered = hmac.to_owned();
        let first = if tampered.starts_with('A') { "B" } else { "A" };
        tampered.replace_range(0..1, first);
        let tampered = [("x-shopify-hmac-sha256", tampered)];
        let keys = [secret.clone()];
        assert_eq!(
            verify(
                Provider::Shopify,
                &headers_of(&tampered),
                body.as_bytes(),
                context(&keys, 0)
            ),
            Err(VerifyError::NoMatchingSignature)
        );
    }
}

/// Paddle publishes the header's shape but no fixed vector: these were signed with its
/// official Node SDK's HMAC and validated by that SDK's own `WebhooksValidator`
/// (`testdata/paddle-sdk.json`; the generator is `testdata/generators/paddle.js`).
#[test]
fn paddle_vectors_from_the_official_sdk() {
    let vectors = load("paddle-sdk.json");
    assert!(text(&vectors, "sdk").starts_with("@paddle/paddle-node-sdk "));
    let secret = Secret::new(text(&vectors, "secret").as_bytes().to_vec());
    let cases = vectors["cases"].as_array().expect("cases");
    assert!(!cases.is_empty());
    for case in cases {
        let (body, header, signed_at) =
            (text(case, "body"), text(case, "header"), number(case, "ts"));
        assert_eq!(
            sign_paddle(&secret, signed_at, body.as_bytes()),
            header,
            "{body}"
        );
        let pairs = [("paddle-signature", header.to_owned())];
        assert_verifies_only_untampered(Provider::Paddle, &pairs, body, secret.clone(), signed_at);
        let keys = [secret.clone()];
        let at = |pairs: &[(&str, String)], now| {
            verify(
                Provider::Paddle,
                &headers_of(pairs),
                body.as_bytes(),
                context(&keys, now),
            )
        };
        // The timestamp is signed: moved, it no longer matches.
        let moved = [(
            "paddle-signature",
            header.replace(&format!("ts={signed_at}"), &format!("ts={}", signed_at + 1)),
        )];
        assert_eq!(at(&moved, signed_at), Err(VerifyError::NoMatchingSignature));
        // Rotation: Paddle sends one h1 per active key; the right one second still verifies.
        let h1 = header.split_once(";h1=").expect("h1").1;
        let rotating = [(
            "paddle-signature",
            format!("ts={signed_at};h1={};h1={h1}", "0".repeat(64)),
        )];
        assert_eq!(at(&rotating, signed_at), Ok(()));
        // Freshness both ways.
        assert_eq!(
            at(&pairs, signed_at + 301),
            Err(VerifyError::TimestampTooOld)
        );
        assert_eq!(
            at(&pairs, signed_at - 301),
            Err(VerifyError::TimestampInFuture)
        );
    }
}

#[test]
fn paddle_headers_without_a_timestamp_or_with_two_are_malformed() {
    let keys = [Secret::new(b"k".to_vec())];
    let h1 = "0".repeat(64);
    for value in [
        format!("h1={h1}"),
        format!("ts=1;ts=2;h1={h1}"),
        "garbage".to_owned(),
        format!("ts=abc;h1={h1}"),
    ] {
        let pairs = [("paddle-signature", value.clone())];
        assert_eq!(
            verify(
                Provider::Paddle,
                &headers_of(&pairs),
                b"{}",
                context(&keys, 1)
            ),
            Err(VerifyError::MalformedHeader("paddle-signature")),
            "{value:?}"
        );
    }
    let no_h1 = [("paddle-signature", "ts=1".to_owned())];
    assert_eq!(
        verify(
            Provider::Paddle,
            &headers_of(&no_h1),
            b"{}",
            context(&keys, 1)
        ),
        Err(VerifyError::NoMatchingSignature)
    );
    assert_eq!(
        verify(Provider::Paddle, &headers_of(&[]), b"{}", context(&keys, 1)),
        Err(VerifyError::MissingHeader("paddle-signature"))
    );
}

/// Zoom publishes the scheme but no fixed vector: each request here was accepted (and a
/// forged copy refused) by the official Zoom SDK's receiver, whose answer to the endpoint
/// validation is recorded (`testdata/zoom-sdk.json`; `testdata/generators/zoom.js`).
#[test]
fn zoom_vectors_from_the_official_sdk() {
    let vectors = load("zoom-sdk.json");
    assert!(text(&vectors, "sdk").starts_with("@zoom/rivet "));
    let secret = Secret::new(text(&vectors, "secret").as_bytes().to_vec());
    let cases = vectors["cases"].as_array().expect("cases");
    let mut validations = 0;
    for case in cases {
        let (body, signature, signed_at) = (
            text(case, "body"),
            text(case, "signature"),
            number(case, "ts"),
        );
        assert_eq!(
            sign_zoom(&secret, signed_at, body.as_bytes()),
            signature,
            "{body}"
        );
        let pairs = [
            ("x-zm-signature", signature.to_owned()),
            ("x-zm-request-timestamp", signed_at.to_string()),
        ];
        assert_verifies_only_untampered(Provider::Zoom, &pairs, body, secret.clone(), signed_at);
        let keys = [secret.clone()];
        let at = |pairs: &[(&str, String)], now| {
            verify(
                Provider::Zoom,
                &headers_of(pairs),
                body.as_bytes(),
                context(&keys, now),
            )
        };
        let moved = [
            pairs[0].clone(),
            ("x-zm-request-timestamp", (signed_at + 1).to_string()),
        ];
        assert_eq!(at(&moved, signed_at), Err(VerifyError::NoMatchingSignature));
        assert_eq!(
            at(&pairs, signed_at + 301),
            Err(VerifyError::TimestampTooOld)
        );
        assert_eq!(
            at(&pairs, signed_at - 301),
            Err(VerifyError::TimestampInFuture)
        );
        if let Some(answer) = case.get("answer") {
            validations += 1;
            assert_eq!(
                zoom_encrypted_token(&secret, text(answer, "plainToken")),
                text(answer, "encryptedToken")
            );
            // The answer is made under the secret that signed the request, wherever it is
            // in the list.
            let rotated = [Secret::new(b"the old token".to_vec()), secret.clone()];
            let context = context(&rotated, signed_at);
            let signer = matching_secret(
                Provider::Zoom,
                &headers_of(&pairs),
                body.as_bytes(),
                context,
            );
            assert_eq!(signer.map(Secret::expose), Some(secret.expose()));
        }
    }
    assert_eq!(
        validations, 1,
        "the endpoint validation is among the vectors"
    );
}

#[test]
fn zoom_headers_that_are_missing_or_not_v0_hex_are_refused() {
    let keys = [Secret::new(b"k".to_vec())];
    let run = |pairs: &[(&str, String)]| {
        verify(Provider::Zoom, &headers_of(pairs), b"{}", context(&keys, 1))
    };
    let ts = ("x-zm-request-timestamp", "1".to_owned());
    for value in ["", "v1=00", "v0=zz", "v0=0011"] {
        assert_eq!(
            run(&[("x-zm-signature", value.to_owned()), ts.clone()]),
            Err(VerifyError::MalformedHeader("x-zm-signature")),
            "{value:?}"
        );
    }
    assert_eq!(
        run(std::slice::from_ref(&ts)),
        Err(VerifyError::MissingHeader("x-zm-signature"))
    );
    assert_eq!(
        run(&[("x-zm-signature", format!("v0={}", "0".repeat(64)))]),
        Err(VerifyError::MissingHeader("x-zm-request-timestamp"))
    );
}

/// The Ed25519 primitive `v1a` rests on is held to RFC 8032's first test vector.
#[test]
fn ed25519_verifies_rfc_8032s_first_vector() {
    // RFC 8032, section 7.1, TEST 1: the empty message.
    let rfc_key = hex::decode("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
        .expect("hex");
    let rfc_signature = hex::decode("e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b").expect("hex");
    let rfc_key =
        ed25519_dalek::VerifyingKey::from_bytes(&<[u8; 32]>::try_from(rfc_key).expect("32 bytes"))
            .expect("a point");
    let rfc_signature = ed25519_dalek::Signature::from_slice(&rfc_signature).expect("64 bytes");
    assert!(ed25519_dalek::Verifier::verify(&rfc_key, b"", &rfc_signature).is_ok());
}

/// `v1a`: no official Standard Webhooks library here signs it, so the vectors come from
/// `cryptography`'s Ed25519 (`testdata/standard-v1a.json`; its generator names why).
#[test]
fn standard_webhooks_v1a_vectors() {
    let vectors = load("standard-v1a.json");
    let public_key = decode_standard_public_key(text(&vectors, "public_key")).expect("whpk_");
    let keys = [public_key];
    let secret_for_v1 = [Secret::new(b"an HMAC key".to_vec())];
    for case in vectors["cases"].as_array().expect("cases") {
        let (id, body, signature) = (
            text(case, "id"),
            text(case, "body"),
            text(case, "signature"),
        );
        let signed_at = number(case, "timestamp");
        let pairs = [
            ("webhook-id", id.to_owned()),
            ("webhook-timestamp", signed_at.to_string()),
            (
                "webhook-signature",
                format!("v1,{} {signature}", "A".repeat(44)),
            ),
        ];
        let context = |public_keys| VerifyContext {
            secrets: &secret_for_v1,
            public_keys,
            tolerance_secs: 300,
            now_unix_secs: signed_at,
        };
        let check = |pairs: &[(&str, String)], body: &[u8], public_keys| {
            verify(
                Provider::Standard,
                &headers_of(pairs),
                body,
                context(public_keys),
            )
        };
        assert_eq!(check(&pairs, body.as_bytes(), &keys), Ok(()), "{id}");
        assert_eq!(
            check(&pairs, body.as_bytes(), &[]),
            Err(VerifyError::NoMatchingSignature),
            "{id}: without the public key"
        );
        let mut tampered = body.as_bytes().to_vec();
        tampered.push(b' ');
        assert_eq!(
            check(&pairs, &tampered, &keys),
            Err(VerifyError::NoMatchingSignature)
        );
        let other_id = [
            ("webhook-id", format!("{id}x")),
            pairs[1].clone(),
            pairs[2].clone(),
        ];
        assert_eq!(
            check(&other_id, body.as_bytes(), &keys),
            Err(VerifyError::NoMatchingSignature)
        );
        // Rotation: another public key first, the right one second.
        let rotated = [PublicKey([7; 32]), public_key];
        assert_eq!(check(&pairs, body.as_bytes(), &rotated), Ok(()));
    }
}

/// A `whpk_` key that is not 32 bytes, or a small-order point that would verify anyone's
/// signature, is refused.
#[test]
fn standard_webhooks_public_keys_of_small_order_are_refused() {
    assert!(
        decode_standard_public_key("whpk_AAAA").is_err(),
        "not 32 bytes"
    );
    // The identity point and its kin would verify anyone's signature, in every spelling a
    // verifier accepts: the sign bit set, and y = p + 1.
    let encode = |bytes: [u8; 32]| {
        format!(
            "whpk_{}",
            base64::Engine::encode(&base64::engine::general_purpose::STANDARD, bytes)
        )
    };
    let mut identity = [0u8; 32];
    identity[0] = 1;
    let mut identity_signed = identity;
    identity_signed[31] |= 0x80;
    let mut p_plus_one = [0xff; 32];
    p_plus_one[0] = 0xee;
    p_plus_one[31] = 0x7f;
    let mut p_plus_one_signed = p_plus_one;
    p_plus_one_signed[31] = 0xff;
    for small in [
        identity,
        identity_signed,
        p_plus_one,
        p_plus_one_signed,
        [0; 32],
    ] {
        assert!(
            decode_standard_public_key(&encode(small)).is_err(),
            "{}",
            hex::encode(small)
        );
    }
}

#[test]
fn shopify_headers_that_are_not_a_base64_mac_are_malformed() {
    let keys = [Secret::new(b"k".to_vec())];
    for value in ["", "not base64!", "AAAA", "sha256=abc"] {
        let pairs = [("x-shopify-hmac-sha256", value.to_owned())];
        assert_eq!(
            verify(
                Provider::Shopify,
                &headers_of(&pairs),
                b"{}",
                context(&keys, 0)
            ),
            Err(VerifyError::MalformedHeader("x-shopify-hmac-sha256")),
            "{value:?}"
        );
    }
    assert_eq!(
        verify(
            Provider::Shopify,
            &headers_of(&[]),
            b"{}",
            context(&keys, 0)
        ),
        Err(VerifyError::MissingHeader("x-shopify-hmac-sha256"))
    );
}

#[test]
fn standard_webhooks_vectors() {
    let vectors = load_vectors();
    let list = vectors["standard_webhooks"].as_array().expect("list");
    assert!(!list.is_empty());
    for vector in list {
        let key = decode_standard_secret(text(vector, "secret")).expect("secret decodes");
        let (id, body, timestamp) = (
            text(vector, "id"),
            text(vector, "body"),
            number(vector, "timestamp"),
        );
        assert_eq!(
            sign_standard(&key, id, timestamp, body.as_bytes()),
            text(vector, "signature")
        );
        let pairs = [
            ("webhook-id", id.to_owned()),
            ("webhook-timestamp", timestamp.to_string()),
            ("webhook-signature", text(vector, "signature").to_owned()),
        ];
        assert_verifies_only_untampered(Provider::Standard, &pairs, body, key.clone(), timestamp);
        // The svix-* aliases carry the same scheme.
        let aliased = [
            ("svix-id", id.to_owned()),
            ("svix-timestamp", timestamp.to_string()),
            ("svix-signature", text(vector, "signature").to_owned()),
        ];
        assert_verifies_only_untampered(Provider::Standard, &aliased, body, key.clone(), timestamp);
        // A tampered id or timestamp header breaks the signature.
        let keys = [key.clone()];
        for (index, replacement) in [(0, format!("{id}x")), (1, (timestamp + 1).to_string())] {
            let mut tampered = pairs.clone();
            tampered[index].1 = replacement;
            assert_eq!(
                verify(
                    Provider::Standard,
                    &headers_of(&tampered),
                    body.as_bytes(),
                    context(&keys, timestamp)
                ),
                Err(VerifyError::NoMatchingSignature)
            );
        }
        // A list with an unknown version and a wrong v1 before the right one verifies.
        let mut listed = pairs.clone();
        listed[2].1 = format!("v1a,abcd v1,AAAA {}", text(vector, "signature"));
        assert_eq!(
            verify(
                Provider::Standard,
                &headers_of(&listed),
                body.as_bytes(),
                context(&keys, timestamp)
            ),
            Ok(())
        );
        if let Some(rejected) = vector["must_reject_signature"].as_str() {
            let mut bad = pairs.clone();
            bad[2].1 = rejected.to_owned();
            assert_eq!(
                verify(
                    Provider::Standard,
                    &headers_of(&bad),
                    body.as_bytes(),
                    context(&keys, timestamp)
                ),
                Err(VerifyError::NoMatchingSignature)
            );
        }
    }
}

#[test]
fn github_vectors() {
    let vectors = load_vectors();
    for vector in vectors["github"].as_array().expect("list") {
        let secret = Secret::new(text(vector, "secret").as_bytes().to_vec());
        let body = text(vector, "body");
        let header = text(vector, "x_hub_signature_256");
        assert_eq!(sign_github(&secret, body.as_bytes()), header);
        let pairs = [("x-hub-signature-256", header.to_owned())];
        assert_verifies_only_untampered(Provider::Github, &pairs, body, secret.clone(), 0);
        let flipped = [(
            "x-hub-signature-256",
            header.replace("sha256=7", "sha256=8"),
        )];
        assert_eq!(
            verify(
                Provider::Github,
                &headers_of(&flipped),
                body.as_bytes(),
                context(&[secret], 0)
            ),
            Err(VerifyError::NoMatchingSignature)
        );
    }
}

#[test]
fn slack_vectors() {
    let vectors = load_vectors();
    for vector in vectors["slack"].as_array().expect("list") {
        let secret = Secret::new(text(vector, "secret").as_bytes().to_vec());
        let (body, timestamp) = (text(vector, "body"), number(vector, "timestamp"));
        let header = text(vector, "x_slack_signature");
        assert_eq!(sign_slack(&secret, timestamp, body.as_bytes()), header);
        let pairs = [
            ("x-slack-signature", header.to_owned()),
            ("x-slack-request-timestamp", timestamp.to_string()),
        ];
        assert_verifies_only_untampered(Provider::Slack, &pairs, body, secret.clone(), timestamp);
        // The timestamp is signed: moving it breaks the signature even inside tolerance.
        let moved = [
            pairs[0].clone(),
            ("x-slack-request-timestamp", (timestamp - 1).to_string()),
        ];
        assert_eq!(
            verify(
                Provider::Slack,
                &headers_of(&moved),
                body.as_bytes(),
                context(&[secret], timestamp)
            ),
            Err(VerifyError::NoMatchingSignature)
        );
    }
}

#[test]
fn stripe_vectors() {
    let vectors = load_vectors();
    for vector in vectors["stripe"].as_array().expect("list") {
        let secret = Secret::new(text(vector, "secret").as_bytes().to_vec());
        let (body, timestamp) = (text(vector, "body"), number(vector, "timestamp"));
        let header = text(vector, "stripe_signature");
        assert_eq!(sign_stripe(&secret, timestamp, body.as_bytes()), header);
        let pairs = [("stripe-signature", header.to_owned())];
        assert_verifies_only_untampered(Provider::Stripe, &pairs, body, secret.clone(), timestamp);
        let v1 = header.split_once(",v1=").expect("v1").1;
        let keys = [secret];
        // Any v1 may match; v0 entries are ignored, even when they would match.
        let several = [(
            "stripe-signature",
            format!("t={timestamp},v1={},v0={v1},v1={v1}", "0".repeat(64)),
        )];
        assert_eq!(
            verify(
                Provider::Stripe,
                &headers_of(&several),
                body.as_bytes(),
                context(&keys, timestamp)
            ),
            Ok(())
        );
        let only_v0 = [("stripe-signature", format!("t={timestamp},v0={v1}"))];
        assert_eq!(
            verify(
                Provider::Stripe,
                &headers_of(&only_v0),
                body.as_bytes(),
                context(&keys, timestamp)
            ),
            Err(VerifyError::NoMatchingSignature)
        );
        // The timestamp is signed.
        let moved = [("stripe-signature", format!("t={},v1={v1}", timestamp + 1))];
        assert_eq!(
            verify(
                Provider::Stripe,
                &headers_of(&moved),
                body.as_bytes(),
                context(&keys, timestamp)
            ),
            Err(VerifyError::NoMatchingSignature)
        );
    }
}

#[test]
fn freshness_is_two_sided_for_every_timestamped_provider() {
    let secret = Secret::new(b"whsec_test_secret".to_vec());
    let signed_at = 1_700_000_000;
    let body = br#"{"id":"evt_1"}"#;
    let stripe = [("stripe-signature", sign_stripe(&secret, signed_at, body))];
    let slack = [
        ("x-slack-signature", sign_slack(&secret, signed_at, body)),
        ("x-slack-request-timestamp", signed_at.to_string()),
    ];
    let standard = [
        ("webhook-id", "msg_1".to_owned()),
        ("webhook-timestamp", signed_at.to_string()),
        (
            "webhook-signature",
            sign_standard(&secret, "msg_1", signed_at, body),
        ),
    ];
    let keys = [secret.clone()];
    for (provider, pairs) in [
        (Provider::Stripe, &stripe[..]),
        (Provider::Slack, &slack[..]),
        (Provider::Standard, &standard[..]),
    ] {
        let headers = headers_of(pairs);
        let at = |now| verify(provider, &headers, body, context(&keys, now));
        assert_eq!(at(signed_at + 300), Ok(()), "{provider:?} at the old edge");
        assert_eq!(
            at(signed_at - 300),
            Ok(()),
            "{provider:?} at the future edge"
        );
        assert_eq!(
            at(signed_at + 301),
            Err(VerifyError::TimestampTooOld),
            "{provider:?}"
        );
        assert_eq!(
            at(signed_at - 301),
            Err(VerifyError::TimestampInFuture),
            "{provider:?}"
        );
    }
}

#[test]
fn missing_and_malformed_headers_are_named() {
    let keys = [Secret::new(b"k".to_vec())];
    let none = Headers::default();
    let ctx = context(&keys, 0);
    assert_eq!(
        verify(Provider::Stripe, &none, b"", ctx),
        Err(VerifyError::MissingHeader("stripe-signature"))
    );
    assert_eq!(
        verify(Provider::Github, &none, b"", ctx),
        Err(VerifyError::MissingHeader("x-hub-signature-256"))
    );
    assert_eq!(
        verify(Provider::Slack, &none, b"", ctx),
        Err(VerifyError::MissingHeader("x-slack-signature"))
    );
    assert_eq!(
        verify(Provider::Standard, &none, b"", ctx),
        Err(VerifyError::MissingHeader("webhook-id"))
    );
    let pairs = [("stripe-signature", "garbage".to_owned())];
    assert_eq!(
        verify(Provider::Stripe, &headers_of(&pairs), b"", ctx),
        Err(VerifyError::MalformedHeader("stripe-signature"))
    );
    let pairs = [("stripe-signature", "t=-5,v1=00".to_owned())];
    assert_eq!(
        verify(Provider::Stripe, &headers_of(&pairs), b"", ctx),
        Err(VerifyError::MalformedHeader("stripe-signature"))
    );
    let pairs = [("x-hub-signature-256", "sha1=00".to_owned())];
    assert_eq!(
        verify(Provider::Github, &headers_of(&pairs), b"", ctx),
        Err(VerifyError::MalformedHeader("x-hub-signature-256"))
    );
    let pairs = [
        ("webhook-id", "msg".to_owned()),
        ("webhook-signature", "v1,AAAA".to_owned()),
    ];
    assert_eq!(
        verify(Provider::Standard, &headers_of(&pairs), b"", ctx),
        Err(VerifyError::MissingHeader("webhook-timestamp"))
    );
}

#[test]
fn standard_secret_must_be_base64() {
    assert!(decode_standard_secret("whsec_not*base64").is_err());
    assert!(decode_standard_secret("whsec_").is_err());
    assert!(decode_standard_secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").is_ok());
}
