//! GitHub: `X-Hub-Signature-256: sha256=<hex>`, HMAC-SHA256 of the body. GitHub signs no
//! timestamp, so there is no freshness check; replays are caught by the receipt key.

use super::{VerifyContext, VerifyError, mac};
use crate::headers::Headers;
use crate::secret::Secret;

const HEADER: &str = "x-hub-signature-256";

/// Verifies a GitHub delivery.
pub(super) fn verify(
    headers: &Headers<'_>,
    body: &[u8],
    context: VerifyContext<'_>,
) -> Result<(), VerifyError> {
    let value = headers
        .get(HEADER)
        .ok_or(VerifyError::MissingHeader(HEADER))?;
    let hex_signature = value
        .strip_prefix("sha256=")
        .ok_or(VerifyError::MalformedHeader(HEADER))?;
    let candidate = hex::decode(hex_signature).map_err(|_| VerifyError::MalformedHeader(HEADER))?;
    if mac::any_matches(context.secrets, &[body], &[candidate]) {
        Ok(())
    } else {
        Err(VerifyError::NoMatchingSignature)
    }
}

/// The `X-Hub-Signature-256` value GitHub would send for `body`.
pub fn sign(secret: &Secret, body: &[u8]) -> String {
    format!(
        "sha256={}",
        hex::encode(mac::hmac_sha256(secret.expose(), &[body]))
    )
}
