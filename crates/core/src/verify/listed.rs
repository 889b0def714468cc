//! Headers that list a timestamp and signatures as `key=value` items — Stripe's
//! `t=…,v1=…`, Paddle's `ts=…;h1=…` — over an HMAC-SHA256 hex of
//! `"{timestamp}{joiner}{body}"`.

use super::{VerifyContext, VerifyError, check_freshness, check_signature_count, mac};
use crate::headers::Headers;
use crate::secret::Secret;

/// A header that lists a timestamp and signatures as `key=value` items (Stripe's
/// `t=…,v1=…`, Paddle's `ts=…;h1=…`): an HMAC-SHA256 hex of
/// `"{timestamp}{joiner}{body}"`, any listed signature matching.
pub(crate) struct Listed {
    /// The header (lower case).
    pub header: &'static str,
    /// Between items.
    pub separator: char,
    /// The timestamp's key.
    pub timestamp: &'static str,
    /// The signatures' key (other keys are skipped).
    pub signature: &'static str,
    /// Between the timestamp and the body in what is signed.
    pub joiner: &'static [u8],
}

impl Listed {
    /// Verifies a request whose `header` lists its timestamp and signatures.
    pub(crate) fn verify(
        &self,
        headers: &Headers<'_>,
        body: &[u8],
        context: VerifyContext<'_>,
    ) -> Result<(), VerifyError> {
        let value = headers
            .get(self.header)
            .ok_or(VerifyError::MissingHeader(self.header))?;
        check_signature_count(
            value
                .split(self.separator)
                .filter(|item| {
                    item.trim().split_once('=').map(|(key, _)| key) == Some(self.signature)
                })
                .count(),
        )?;
        let mut timestamp = None;
        let mut candidates = Vec::new();
        for item in value.split(self.separator) {
            let (key, item_value) = item
                .trim()
                .split_once('=')
                .ok_or(VerifyError::MalformedHeader(self.header))?;
            if key == self.timestamp {
                if timestamp.is_some() {
                    return Err(VerifyError::MalformedHeader(self.header));
                }
                timestamp = Some(item_value);
            } else if key == self.signature
                // A signature that is not hex of the right length can never match; skip
                // it rather than fail, as the providers' own libraries do.
                && let Ok(bytes) = hex::decode(item_value)
                && bytes.len() == mac::MAC_LEN
            {
                candidates.push(bytes);
            }
        }
        let timestamp = timestamp.ok_or(VerifyError::MalformedHeader(self.header))?;
        check_freshness(self.header, timestamp, context)?;
        if candidates.is_empty() {
            return Err(VerifyError::NoMatchingSignature);
        }
        let parts: [&[u8]; 3] = [timestamp.as_bytes(), self.joiner, body];
        if mac::any_matches(context.secrets, &parts, &candidates) {
            Ok(())
        } else {
            Err(VerifyError::NoMatchingSignature)
        }
    }

    /// The header value for `body` at `timestamp`, with one signature.
    pub(crate) fn sign(&self, secret: &Secret, timestamp: i64, body: &[u8]) -> String {
        let timestamp = timestamp.to_string();
        let signature =
            mac::hmac_sha256(secret.expose(), &[timestamp.as_bytes(), self.joiner, body]);
        format!(
            "{}={timestamp}{}{}={}",
            self.timestamp,
            self.separator,
            self.signature,
            hex::encode(signature)
        )
    }
}
