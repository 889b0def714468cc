//! The bounds on what one request can make a verifier do: signatures per header and
//! Ed25519 checks are capped before anything is checked, keys per integration are capped
//! by the configuration, and [`worst_case_cost`] states the rest.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use ed25519_dalek::Signer;

use super::*;
use crate::verify::*;

const NOW: i64 = 1_700_000_000;
const BODY: &[u8] = br#"{"id":"evt_1","type":"t"}"#;

fn headers_of<'a>(pairs: &'a [(&'a str, String)]) -> Headers<'a> {
    pairs
        .iter()
        .map(|(name, value)| (*name, value.as_bytes()))
        .collect()
}

fn context<'a>(secrets: &'a [Secret], public_keys: &'a [PublicKey]) -> VerifyContext<'a> {
    VerifyContext {
        secrets,
        public_keys,
        tolerance_secs: 300,
        now_unix_secs: NOW,
    }
}

/// `count` wrong signatures shaped like `right`, then `right` itself.
fn padded(right: &str, wrong: &str, count: usize, separator: &str) -> String {
    let mut entries = vec![wrong.to_owned(); count];
    entries.push(right.to_owned());
    entries.join(separator)
}

/// The headers of a request listing that many wrong signatures before the right one.
type HeadersWith<'a> = Box<dyn Fn(usize) -> Vec<(&'static str, String)> + 'a>;

/// Eight signatures verify when one of them is right; a ninth is refused before any is
/// checked — the right one among them does not help.
#[test]
fn a_header_listing_more_signatures_than_any_sender_is_refused_before_any_check() {
    let secret = Secret::new(b"whsec_the_secret".to_vec());
    let secrets = [secret.clone()];
    let wrong_hex = "0".repeat(64);
    let stripe_signature = sign_stripe(&secret, NOW, BODY);
    let stripe_right = stripe_signature.split(',').nth(1).expect("v1=…");
    let paddle_signature = sign_paddle(&secret, NOW, BODY);
    let paddle_right = paddle_signature.split(';').nth(1).expect("h1=…");
    let standard_right = sign_standard(&secret, "msg_1", NOW, BODY);
    let wrong_base64 = format!("v1,{}", BASE64.encode([0u8; 32]));
    let cases: Vec<(Provider, HeadersWith<'_>)> = vec![
        (
            Provider::Stripe,
            Box::new(|wrong| {
                let listed = padded(stripe_right, &format!("v1={wrong_hex}"), wrong, ",");
                vec![("stripe-signature", format!("t={NOW},{listed}"))]
            }),
        ),
        (
            Provider::Paddle,
            Box::new(|wrong| {
                let listed = padded(paddle_right, &format!("h1={wrong_hex}"), wrong, ";");
                vec![("paddle-signature", format!("ts={NOW};{listed}"))]
            }),
        ),
        (
            Provider::Standard,
            Box::new(|wrong| {
                vec![
                    ("webhook-id", "msg_1".to_owned()),
                    ("webhook-timestamp", NOW.to_string()),
                    (
                        "webhook-signature",
                        padded(&standard_right, &wrong_base64, wrong, " "),
                    ),
                ]
            }),
        ),
    ];
    for (provider, headers) in cases {
        let most = headers(MAX_SIGNATURES_PER_HEADER - 1);
        assert_eq!(
            verify(provider, &headers_of(&most), BODY, context(&secrets, &[])),
            Ok(()),
            "{provider:?}: {MAX_SIGNATURES_PER_HEADER} listed"
        );
        let too_many = headers(MAX_SIGNATURES_PER_HEADER);
        assert_eq!(
            verify(
                provider,
                &headers_of(&too_many),
                BODY,
                context(&secrets, &[])
            ),
            Err(VerifyError::TooManySignatures),
            "{provider:?}: {} listed",
            MAX_SIGNATURES_PER_HEADER + 1
        );
    }
}

/// A configured scheme with a separator is held to the same count.
#[test]
fn a_configured_separator_is_held_to_the_same_count() {
    let scheme = custom::HmacScheme {
        header: "x-sig".to_owned(),
        prefix: "sha256=".to_owned(),
        separator: Some(",".to_owned()),
        algorithm: custom::Algorithm::Sha256,
        encoding: custom::Encoding::Hex,
        signed: vec![custom::Part::Body],
        timestamp_header: None,
        timestamp_unit: custom::TimestampUnit::Seconds,
    };
    let secret = Secret::new(b"secret".to_vec());
    let right = custom::sign(&scheme, &secret, "", BODY);
    let wrong = format!("sha256={}", "0".repeat(64));
    let verifier = custom::CustomVerifier::Hmac(scheme);
    let secrets = [secret];
    let run = |wrong_count| {
        let pairs = [("x-sig", padded(&right, &wrong, wrong_count, ","))];
        verify_with(
            Provider::Hmac,
            Some(&verifier),
            &headers_of(&pairs),
            BODY,
            context(&secrets, &[]),
        )
    };
    assert_eq!(run(MAX_SIGNATURES_PER_HEADER - 1), Ok(()));
    assert_eq!(
        run(MAX_SIGNATURES_PER_HEADER),
        Err(VerifyError::TooManySignatures)
    );
}

/// The Ed25519 signature of `"{id}.{timestamp}.{body}"` under the key made from `seed`,
/// as a `v1a` entry, and the public key.
fn signed_v1a(seed: u8, body: &[u8]) -> (String, PublicKey) {
    let key = ed25519_dalek::SigningKey::from_bytes(&[seed; 32]);
    let mut message = format!("msg_1.{NOW}.").into_bytes();
    message.extend_from_slice(body);
    let signature = key.sign(&message);
    (
        format!("v1a,{}", BASE64.encode(signature.to_bytes())),
        PublicKey(key.verifying_key().to_bytes()),
    )
}

/// More distinct `v1a` signatures than [`MAX_ED25519_SIGNATURES`], or signatures × public
/// keys beyond [`MAX_ED25519_CHECKS`], are refused before any check, whatever the header's
/// length; the same signature listed twice is checked once.
#[test]
fn ed25519_checks_are_capped_and_each_signature_checked_once() {
    let (first, first_key) = signed_v1a(1, BODY);
    let (second, second_key) = signed_v1a(2, BODY);
    let (third, _) = signed_v1a(3, BODY);
    let run = |entries: &[&str], keys: &[PublicKey]| {
        let pairs = [
            ("webhook-id", "msg_1".to_owned()),
            ("webhook-timestamp", NOW.to_string()),
            ("webhook-signature", entries.join(" ")),
        ];
        verify(
            Provider::Standard,
            &headers_of(&pairs),
            BODY,
            context(&[], keys),
        )
    };
    let both_keys = [first_key, second_key];
    assert_eq!(run(&[&third, &second], &both_keys), Ok(()), "2 × 2 checks");
    assert_eq!(
        run(&[&third, &third, &third, &first], &both_keys),
        Ok(()),
        "a repeated signature counts once"
    );
    assert_eq!(
        run(&[&third, &first, &second], &both_keys),
        Err(VerifyError::TooManySignatures),
        "3 signatures"
    );
    let (_, fourth_key) = signed_v1a(4, BODY);
    assert_eq!(
        run(&[&third, &first], &[fourth_key, second_key, first_key]),
        Err(VerifyError::TooManySignatures),
        "2 × 3 checks"
    );
    assert_eq!(
        run(&[&third, &third, &first], &[first_key]),
        Ok(()),
        "2 × 1 checks"
    );
    assert_eq!(
        run(&[&third, &second, &first], &[first_key]),
        Err(VerifyError::TooManySignatures),
        "3 signatures: more than a rotating sender lists"
    );
    // The red team's request: 170 zero signatures, refused by their count.
    let zero = format!("v1a,{}", BASE64.encode([0u8; 64]));
    assert_eq!(
        run(&vec![zero.as_str(); 170], &both_keys),
        Err(VerifyError::TooManySignatures)
    );
}

/// The configuration refuses more keys than [`MAX_KEYS`]: each is tried on every request.
#[test]
fn an_integration_holds_at_most_max_keys_secrets() {
    let secrets = ["\"env:S\""; MAX_KEYS + 1].join(", ");
    let text = format!(
        "[[integration]]\nid = \"s\"\nprovider = \"stripe\"\ntenant = \"t\"\nsecrets = [{secrets}]\n"
    );
    let error = crate::config::Config::from_toml(&text, &|_| Some("k".to_owned()))
        .expect_err("too many secrets");
    assert!(error.to_string().contains("more than 4 secrets"), "{error}");
}

/// The stated bound: one pass per secret, SHA-512 thrice, Ed25519 checks only where keys
/// are held, nothing for a token.
#[test]
fn the_worst_case_cost_counts_each_pass_the_caps_allow() {
    let mib = 1024 * 1024;
    assert_eq!(
        worst_case_cost(Provider::Stripe, None, 2, 0, mib),
        2 * 1024 * 1024
    );
    assert_eq!(
        worst_case_cost(Provider::Standard, None, 1, 0, mib),
        1024 * 1024
    );
    assert_eq!(
        worst_case_cost(Provider::Standard, None, 1, 1, mib),
        1024 * 1024 + 2 * (3 * 1024 * 1024 + 64 * 1024),
        "one key: two signatures"
    );
    assert_eq!(
        worst_case_cost(Provider::Standard, None, 1, 3, mib),
        1024 * 1024 + MAX_ED25519_CHECKS as u64 * (3 * 1024 * 1024 + 64 * 1024),
        "three keys: four checks"
    );
    let token = custom::CustomVerifier::Token(custom::TokenScheme {
        header: "x-token".to_owned(),
    });
    assert_eq!(worst_case_cost(Provider::Token, Some(&token), 2, 0, mib), 0);
    let with_head = mib + 16 * 1024;
    assert!(worst_case_cost(Provider::Github, None, 1, 0, with_head) <= INLINE_COST_LIMIT);
    assert!(worst_case_cost(Provider::Github, None, 2, 0, with_head) > INLINE_COST_LIMIT);
    assert!(worst_case_cost(Provider::Standard, None, 1, 1, 200 * 1024) <= INLINE_COST_LIMIT);
    assert!(worst_case_cost(Provider::Standard, None, 1, 1, 300 * 1024) > INLINE_COST_LIMIT);
}
