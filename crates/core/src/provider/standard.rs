//! Standard Webhooks: its signature, what its deliveries mean, and what inbound knows of it.
//!
//! Signature: `webhook-id`, `webhook-timestamp` and `webhook-signature` (a
//! space-separated list of `v1,<base64>` and `v1a,<base64>`; the `svix-*` names are
//! accepted as aliases). `v1`: HMAC-SHA256 of `"{id}.{timestamp}.{body}"`, keyed by the
//! base64 after `whsec_`. `v1a`: an Ed25519 signature of the same, checked against the
//! `whpk_` public keys — the sender keeps the private key, so a leaked key forges nothing.

use std::borrow::Cow;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::Deserialize;

use super::{Signing, Spec, Verifier};
use crate::config::Integration;
use crate::event::{Event, ExtractError, Extracted, parse_fields, required_identifier};
use crate::headers::Headers;
use crate::keys::{EventId, SourceScope};
use crate::secret::Secret;
use crate::sender::SignError;
use crate::verify::{
    MAX_ED25519_CHECKS, MAX_ED25519_SIGNATURES, PublicKey, VerifyContext, VerifyError,
    check_freshness, check_signature_count, mac,
};

/// What inbound knows of Standard Webhooks.
///
/// Redelivery horizon: Svix "retains all message payloads … for 90 days" and replays them
/// on request (<https://docs.svix.com/retention>); its retries end after about 28 hours
/// (<https://docs.svix.com/retries>). Standard Webhooks senders: 90.
pub(crate) static SPEC: Spec = Spec {
    verify: Verifier::Fixed(verify),
    extract,
    sign: signed_headers,
    type_in_a_header: false,
    redelivery_horizon_days: 90,
    known_events: None,
    free_form_actions: &[],
    default_subject: None,
};

const ID_HEADERS: [&str; 2] = ["webhook-id", "svix-id"];
const TIMESTAMP_HEADERS: [&str; 2] = ["webhook-timestamp", "svix-timestamp"];
const SIGNATURE_HEADERS: [&str; 2] = ["webhook-signature", "svix-signature"];

/// Verifies a Standard Webhooks delivery. `context.secrets` hold decoded key bytes.
pub(crate) fn verify(
    headers: &Headers<'_>,
    body: &[u8],
    context: VerifyContext<'_>,
) -> Result<(), VerifyError> {
    let id = headers
        .get_any(&ID_HEADERS)
        .filter(|id| !id.is_empty())
        .ok_or(VerifyError::MissingHeader(ID_HEADERS[0]))?;
    let timestamp = headers
        .get_any(&TIMESTAMP_HEADERS)
        .ok_or(VerifyError::MissingHeader(TIMESTAMP_HEADERS[0]))?;
    let signatures = headers
        .get_any(&SIGNATURE_HEADERS)
        .ok_or(VerifyError::MissingHeader(SIGNATURE_HEADERS[0]))?;
    let entries = || signatures.split(' ').filter(|entry| !entry.is_empty());
    check_signature_count(entries().count())?;
    check_freshness(TIMESTAMP_HEADERS[0], timestamp, context)?;
    // `v1` entries are HMACs; `v1a` entries (Ed25519) are checked against the public keys
    // below; other versions and undecodable entries are skipped: a sender may list several.
    let candidates: Vec<Vec<u8>> = entries()
        .filter_map(|entry| entry.strip_prefix("v1,"))
        .filter_map(|encoded| BASE64.decode(encoded).ok())
        .collect();
    let mut asymmetric: Vec<ed25519_dalek::Signature> = Vec::new();
    for bytes in entries()
        .filter_map(|entry| entry.strip_prefix("v1a,"))
        .filter_map(|encoded| BASE64.decode(encoded).ok())
        .filter_map(|bytes| <[u8; 64]>::try_from(bytes).ok())
    {
        let signature = ed25519_dalek::Signature::from_bytes(&bytes);
        if !asymmetric.contains(&signature) {
            asymmetric.push(signature);
        }
    }
    if asymmetric.len() > MAX_ED25519_SIGNATURES
        || asymmetric.len().saturating_mul(context.public_keys.len()) > MAX_ED25519_CHECKS
    {
        return Err(VerifyError::TooManySignatures);
    }
    let parts: [&[u8]; 5] = [id.as_bytes(), b".", timestamp.as_bytes(), b".", body];
    let symmetric = mac::any_matches(context.secrets, &parts, &candidates);
    if symmetric || asymmetric_matches(&asymmetric, &parts, context.public_keys) {
        Ok(())
    } else {
        Err(VerifyError::NoMatchingSignature)
    }
}

/// Whether any of `signatures` is an Ed25519 signature of the concatenated `parts` under
/// any public key, the message hashed part by part (never copied). Keys and signatures are
/// public: nothing here needs constant time.
fn asymmetric_matches(
    signatures: &[ed25519_dalek::Signature],
    parts: &[&[u8]],
    public_keys: &[PublicKey],
) -> bool {
    public_keys.iter().any(|key| {
        // The configuration decoded the key and refused the small-order points; a key
        // that is no point on the curve verifies nothing.
        let Ok(key) = ed25519_dalek::VerifyingKey::from_bytes(&key.0) else {
            return false;
        };
        signatures.iter().any(|signature| {
            let Ok(mut verifier) = key.verify_stream(signature) else {
                return false;
            };
            for part in parts {
                verifier.update(part);
            }
            verifier.finalize_and_verify().is_ok()
        })
    })
}

/// The `webhook-signature` value for `body` under decoded `key`.
pub fn sign(key: &Secret, id: &str, timestamp: i64, body: &[u8]) -> String {
    let timestamp = timestamp.to_string();
    let signature = mac::hmac_sha256(
        key.expose(),
        &[id.as_bytes(), b".", timestamp.as_bytes(), b".", body],
    );
    format!("v1,{}", BASE64.encode(signature))
}

/// The headers a Standard Webhooks sender sends with `body`, under a fresh message id.
fn signed_headers(signing: &Signing<'_>) -> Result<Vec<(String, String)>, SignError> {
    let id = format!("msg_{}", signing.unique);
    Ok(vec![
        (
            "webhook-signature".into(),
            sign(signing.secret, &id, signing.now, signing.body),
        ),
        ("webhook-timestamp".into(), signing.now.to_string()),
        ("webhook-id".into(), id),
    ])
}

#[derive(Deserialize)]
struct StandardFields<'a> {
    #[serde(borrow, rename = "type")]
    event_type: Option<Cow<'a, str>>,
}

pub(crate) fn extract<'body>(
    integration: &Integration,
    headers: &Headers<'_>,
    payload_json: &'body str,
) -> Result<Extracted<'body>, ExtractError> {
    let event_id = required_identifier(
        headers
            .get_any(&["webhook-id", "svix-id"])
            .map(Cow::Borrowed),
        "event id",
    )?;
    let fields: StandardFields = parse_fields(payload_json)?;
    let event_type = required_identifier(fields.event_type, "event type")?;
    Ok(Extracted::Event(Event {
        event_id: EventId::new(event_id),
        route_keys: vec![event_type.clone()],
        event_type,
        source_scope: SourceScope::from_parts([integration.id.as_str()]),
        delivery: None,
        subject: None,
        event_at: None,
        payload_json: Cow::Borrowed(payload_json),
    }))
}
