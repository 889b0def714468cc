//! Zoom: `x-zm-signature: v0=<hex>` with `x-zm-request-timestamp`, HMAC-SHA256 of
//! `"v0:{timestamp}:{body}"` keyed by the app's secret token. The endpoint validation
//! (`endpoint.url_validation`, signed like any event) is answered with the plain token and
//! its HMAC under the same secret ([`encrypted_token`]).

use super::v0::V0;
use super::{VerifyContext, VerifyError, mac};
use crate::headers::Headers;
use crate::secret::Secret;

const ZOOM: V0 = V0 {
    signature: "x-zm-signature",
    timestamp: "x-zm-request-timestamp",
};

/// Verifies a Zoom delivery ([`super::v0`], under Zoom's header names).
pub(super) fn verify(
    headers: &Headers<'_>,
    body: &[u8],
    context: VerifyContext<'_>,
) -> Result<(), VerifyError> {
    ZOOM.verify(headers, body, context)
}

/// The `x-zm-signature` value Zoom would send for `body` at `timestamp`.
pub fn sign(secret: &Secret, timestamp: i64, body: &[u8]) -> String {
    V0::sign(secret, timestamp, body)
}

/// The `encryptedToken` of Zoom's endpoint validation: HMAC-SHA256 hex of the plain token.
pub fn encrypted_token(secret: &Secret, plain_token: &str) -> String {
    hex::encode(mac::hmac_sha256(secret.expose(), &[plain_token.as_bytes()]))
}
