//! Paddle Billing: `Paddle-Signature: ts=<unix>;h1=<hex>[;h1=<hex>…]`, HMAC-SHA256 of
//! `"{ts}:{body}"` keyed by the notification destination's secret key. While a secret
//! rotates Paddle sends one `h1` per active key: any may match.

use super::{VerifyContext, VerifyError, check_freshness, mac};
use crate::headers::Headers;
use crate::secret::Secret;

const HEADER: &str = "paddle-signature";

/// Verifies a Paddle Billing delivery.
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
    for item in value.split(';') {
        let (key, item_value) = item
            .trim()
            .split_once('=')
            .ok_or(VerifyError::MalformedHeader(HEADER))?;
        match key {
            "ts" if timestamp.is_none() => timestamp = Some(item_value),
            "ts" => return Err(VerifyError::MalformedHeader(HEADER)),
            // An h1 that is not hex of the right length can never match: skipped.
            "h1" => {
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
    let parts: [&[u8]; 3] = [timestamp.as_bytes(), b":", body];
    if mac::any_matches(context.secrets, &parts, &candidates) {
        Ok(())
    } else {
        Err(VerifyError::NoMatchingSignature)
    }
}

/// The `Paddle-Signature` value Paddle would send for `body` at `timestamp`.
pub fn sign(secret: &Secret, timestamp: i64, body: &[u8]) -> String {
    let timestamp = timestamp.to_string();
    let signature = mac::hmac_sha256(secret.expose(), &[timestamp.as_bytes(), b":", body]);
    format!("ts={timestamp};h1={}", hex::encode(signature))
}
