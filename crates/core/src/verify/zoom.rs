//! Zoom: `x-zm-signature: v0=<hex>` with `x-zm-request-timestamp`, HMAC-SHA256 of
//! `"v0:{timestamp}:{body}"` keyed by the app's secret token. The endpoint validation
//! (`endpoint.url_validation`, signed like any event) is answered with the plain token and
//! its HMAC under the same secret ([`encrypted_token`]).

use super::{VerifyContext, VerifyError, check_freshness, mac};
use crate::headers::Headers;
use crate::secret::Secret;

const SIGNATURE: &str = "x-zm-signature";
const TIMESTAMP: &str = "x-zm-request-timestamp";

/// Verifies a Zoom delivery.
pub(super) fn verify(
    headers: &Headers<'_>,
    body: &[u8],
    context: VerifyContext<'_>,
) -> Result<(), VerifyError> {
    let signature = headers
        .get(SIGNATURE)
        .ok_or(VerifyError::MissingHeader(SIGNATURE))?;
    let timestamp = headers
        .get(TIMESTAMP)
        .ok_or(VerifyError::MissingHeader(TIMESTAMP))?;
    let candidate = signature
        .strip_prefix("v0=")
        .and_then(|encoded| hex::decode(encoded).ok())
        .filter(|candidate| candidate.len() == mac::MAC_LEN)
        .ok_or(VerifyError::MalformedHeader(SIGNATURE))?;
    check_freshness(TIMESTAMP, timestamp, context)?;
    let parts: [&[u8]; 4] = [b"v0:", timestamp.as_bytes(), b":", body];
    if mac::any_matches(context.secrets, &parts, &[candidate]) {
        Ok(())
    } else {
        Err(VerifyError::NoMatchingSignature)
    }
}

/// The `x-zm-signature` value Zoom would send for `body` at `timestamp`.
pub fn sign(secret: &Secret, timestamp: i64, body: &[u8]) -> String {
    let timestamp = timestamp.to_string();
    let signature = mac::hmac_sha256(secret.expose(), &[b"v0:", timestamp.as_bytes(), b":", body]);
    format!("v0={}", hex::encode(signature))
}

/// The `encryptedToken` of Zoom's endpoint validation: HMAC-SHA256 hex of the plain token.
pub fn encrypted_token(secret: &Secret, plain_token: &str) -> String {
    hex::encode(mac::hmac_sha256(secret.expose(), &[plain_token.as_bytes()]))
}
