//! Shopify: `X-Shopify-Hmac-Sha256: <base64>`, HMAC-SHA256 of the raw body under the app's
//! client secret. Shopify signs no timestamp, so there is no freshness check (replays are
//! caught by the receipt key), and it signs no header: the topic, the shop domain and the
//! ids travel beside the signature, not under it.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;

use super::{VerifyContext, VerifyError, mac};
use crate::headers::Headers;
use crate::secret::Secret;

const HEADER: &str = "x-shopify-hmac-sha256";

/// Verifies a Shopify delivery.
pub(super) fn verify(
    headers: &Headers<'_>,
    body: &[u8],
    context: VerifyContext<'_>,
) -> Result<(), VerifyError> {
    let value = headers
        .get(HEADER)
        .ok_or(VerifyError::MissingHeader(HEADER))?;
    let candidate = BASE64
        .decode(value)
        .ok()
        .filter(|candidate| candidate.len() == mac::MAC_LEN)
        .ok_or(VerifyError::MalformedHeader(HEADER))?;
    if mac::any_matches(context.secrets, &[body], &[candidate]) {
        Ok(())
    } else {
        Err(VerifyError::NoMatchingSignature)
    }
}

/// The `X-Shopify-Hmac-Sha256` value Shopify would send for `body`.
pub fn sign(secret: &Secret, body: &[u8]) -> String {
    BASE64.encode(mac::hmac_sha256(secret.expose(), &[body]))
}
