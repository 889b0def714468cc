//! Slack: `X-Slack-Signature: v0=<hex>`, HMAC-SHA256 of `"v0:{ts}:{body}"` where `ts` is
//! `X-Slack-Request-Timestamp`, which must be within tolerance of now.

use super::{VerifyContext, VerifyError, check_freshness, mac};
use crate::headers::Headers;
use crate::secret::Secret;

const SIGNATURE_HEADER: &str = "x-slack-signature";
const TIMESTAMP_HEADER: &str = "x-slack-request-timestamp";

/// Verifies a Slack request.
pub(super) fn verify(
    headers: &Headers<'_>,
    body: &[u8],
    context: VerifyContext<'_>,
) -> Result<(), VerifyError> {
    let signature = headers
        .get(SIGNATURE_HEADER)
        .ok_or(VerifyError::MissingHeader(SIGNATURE_HEADER))?;
    let timestamp = headers
        .get(TIMESTAMP_HEADER)
        .ok_or(VerifyError::MissingHeader(TIMESTAMP_HEADER))?;
    check_freshness(TIMESTAMP_HEADER, timestamp, context)?;
    let hex_signature = signature
        .strip_prefix("v0=")
        .ok_or(VerifyError::MalformedHeader(SIGNATURE_HEADER))?;
    let candidate =
        hex::decode(hex_signature).map_err(|_| VerifyError::MalformedHeader(SIGNATURE_HEADER))?;
    let parts: [&[u8]; 4] = [b"v0:", timestamp.as_bytes(), b":", body];
    if mac::any_matches(context.secrets, &parts, &[candidate]) {
        Ok(())
    } else {
        Err(VerifyError::NoMatchingSignature)
    }
}

/// The `X-Slack-Signature` value Slack would send for `body` at `timestamp`.
pub fn sign(secret: &Secret, timestamp: i64, body: &[u8]) -> String {
    let timestamp = timestamp.to_string();
    let signature = mac::hmac_sha256(secret.expose(), &[b"v0:", timestamp.as_bytes(), b":", body]);
    format!("v0={}", hex::encode(signature))
}
