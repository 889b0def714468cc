//! Headers carrying `v0=<hex>`, an HMAC-SHA256 of `"v0:{timestamp}:{body}"`, beside a
//! timestamp header checked against the tolerance both ways: Slack's and Zoom's scheme,
//! under their own header names.

use super::{VerifyContext, VerifyError, check_freshness, mac};
use crate::headers::Headers;
use crate::secret::Secret;

/// One provider's header names for the `v0` scheme.
pub(crate) struct V0 {
    /// The signature header (lower case).
    pub signature: &'static str,
    /// The timestamp header (lower case).
    pub timestamp: &'static str,
}

impl V0 {
    /// Verifies a request: both headers present, the timestamp fresh, the signature hex
    /// of an HMAC's length, matching under any secret.
    pub(crate) fn verify(
        &self,
        headers: &Headers<'_>,
        body: &[u8],
        context: VerifyContext<'_>,
    ) -> Result<(), VerifyError> {
        let signature = headers
            .get(self.signature)
            .ok_or(VerifyError::MissingHeader(self.signature))?;
        let timestamp = headers
            .get(self.timestamp)
            .ok_or(VerifyError::MissingHeader(self.timestamp))?;
        check_freshness(self.timestamp, timestamp, context)?;
        let candidate = signature
            .strip_prefix("v0=")
            .and_then(|encoded| hex::decode(encoded).ok())
            .filter(|candidate| candidate.len() == mac::MAC_LEN)
            .ok_or(VerifyError::MalformedHeader(self.signature))?;
        let parts: [&[u8]; 4] = [b"v0:", timestamp.as_bytes(), b":", body];
        if mac::any_matches(context.secrets, &parts, &[candidate]) {
            Ok(())
        } else {
            Err(VerifyError::NoMatchingSignature)
        }
    }

    /// The signature header's value for `body` at `timestamp`.
    pub(crate) fn sign(secret: &Secret, timestamp: i64, body: &[u8]) -> String {
        let timestamp = timestamp.to_string();
        let signature =
            mac::hmac_sha256(secret.expose(), &[b"v0:", timestamp.as_bytes(), b":", body]);
        format!("v0={}", hex::encode(signature))
    }
}
