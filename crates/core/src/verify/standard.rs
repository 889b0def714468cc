//! Standard Webhooks: `webhook-id`, `webhook-timestamp` and `webhook-signature` (a
//! space-separated list of `v1,<base64>` and `v1a,<base64>`; the `svix-*` names are
//! accepted as aliases). `v1`: HMAC-SHA256 of `"{id}.{timestamp}.{body}"`, keyed by the
//! base64 after `whsec_`. `v1a`: an Ed25519 signature of the same, checked against the
//! `whpk_` public keys — the sender keeps the private key, so a leaked key forges nothing.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;

use super::{
    MAX_ED25519_CHECKS, MAX_ED25519_SIGNATURES, PublicKey, VerifyContext, VerifyError,
    check_freshness, check_signature_count, mac,
};
use crate::headers::Headers;
use crate::secret::Secret;

const ID_HEADERS: [&str; 2] = ["webhook-id", "svix-id"];
const TIMESTAMP_HEADERS: [&str; 2] = ["webhook-timestamp", "svix-timestamp"];
const SIGNATURE_HEADERS: [&str; 2] = ["webhook-signature", "svix-signature"];

/// Verifies a Standard Webhooks delivery. `context.secrets` hold decoded key bytes.
pub(super) fn verify(
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

/// The y-coordinates (sign bit cleared) of Ed25519's small-order points, with the
/// non-canonical p and p + 1 — libsodium's list: a "public key" among them verifies
/// signatures anyone can make, whatever its sign bit (verifiers ignore it, and accept
/// y ≥ p).
const SMALL_ORDER: [&str; 7] = [
    "0000000000000000000000000000000000000000000000000000000000000000",
    "0100000000000000000000000000000000000000000000000000000000000000",
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
    "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
];

/// Decodes a `whpk_<base64>` public key (32 bytes), refusing the small-order points.
pub fn decode_public_key(key: &str) -> Result<PublicKey, base64::DecodeError> {
    let encoded = key.strip_prefix("whpk_").unwrap_or(key);
    let bytes = BASE64.decode(encoded)?;
    let key: [u8; 32] = bytes
        .try_into()
        .map_err(|bytes: Vec<u8>| base64::DecodeError::InvalidLength(bytes.len()))?;
    let mut y = key;
    y[31] &= 0x7f;
    if SMALL_ORDER.contains(&hex::encode(y).as_str()) {
        return Err(base64::DecodeError::InvalidLength(0));
    }
    Ok(PublicKey(key))
}

/// Decodes a `whsec_<base64>` secret (the prefix is optional) into key bytes.
pub fn decode_secret(secret: &str) -> Result<Secret, base64::DecodeError> {
    let encoded = secret.strip_prefix("whsec_").unwrap_or(secret);
    let bytes = BASE64.decode(encoded)?;
    if bytes.is_empty() {
        return Err(base64::DecodeError::InvalidLength(0));
    }
    Ok(Secret::new(bytes))
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
