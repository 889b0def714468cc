//! Stripe: `Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>…][,v0=…]`, HMAC-SHA256 of
//! `"{t}.{body}"` keyed by the whole `whsec_…` string. Any `v1` may match; `v0` (the old
//! test-mode scheme) is ignored.

use super::{VerifyContext, VerifyError, check_freshness, mac};
use crate::headers::Headers;
use crate::secret::Secret;

const HEADER: &str = "stripe-signature";

/// Verifies a Stripe delivery.
pub(super) fn verify(
    headers: &Headers<'_>,
    body: &[u8],
    context: VerifyContext<'_>,
) -> Result<(), VerifyError> {
    let value = headers
        .get(HEADER)
        .ok_or(VerifyError::MissingHeader(HEADER))?;
    let mut timestamp = None;
    let mut candidates = Vec::new();
    for item in value.split(',') {
        let (key, item_value) = item
            .trim()
            .split_once('=')
            .ok_or(VerifyError::MalformedHeader(HEADER))?;
        match key {
            "t" if timestamp.is_none() => timestamp = Some(item_value),
            "t" => return Err(VerifyError::MalformedHeader(HEADER)),
            // A v1 that is not hex of the right length can never match; skip it rather
            // than fail, as Stripe's own libraries do.
            "v1" => {
                if let Ok(bytes) = hex::decode(item_value)
                    && bytes.len() == mac::MAC_LEN
                {
                    candidates.push(bytes);
                }
            }
            _ => {}
        }
    }
    let timestamp = timestamp.ok_or(VerifyError::MalformedHeader(HEADER))?;
    check_freshness(HEADER, timestamp, context)?;
    if candidates.is_empty() {
        return Err(VerifyError::NoMatchingSignature);
    }
    let parts: [&[u8]; 3] = [timestamp.as_bytes(), b".", body];
    if mac::any_matches(context.secrets, &parts, &candidates) {
        Ok(())
    } else {
        Err(VerifyError::NoMatchingSignature)
    }
}

/// The `Stripe-Signature` value Stripe would send for `body` at `timestamp`.
pub fn sign(secret: &Secret, timestamp: i64, body: &[u8]) -> String {
    let timestamp = timestamp.to_string();
    let signature = mac::hmac_sha256(secret.expose(), &[timestamp.as_bytes(), b".", body]);
    format!("t={timestamp},v1={}", hex::encode(signature))
}
