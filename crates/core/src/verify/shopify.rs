//! Shopify: `X-Shopify-Hmac-Sha256: <base64>`, HMAC-SHA256 of the raw body under the app's
//! client secret. Shopify signs no timestamp, so there is no freshness check (replays are
//! caught by the receipt key), and it signs no header: the topic, the shop domain and the
//! ids travel beside the signature, not under it. Shopify's Events (preview) deliveries
//! name the headers without `X-` (`Shopify-Hmac-Sha256`, …); either name is read.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;

use super::{VerifyContext, VerifyError, mac};
use crate::headers::Headers;
use crate::secret::Secret;

const HEADER: &str = "x-shopify-hmac-sha256";
/// The same header as Shopify's Events preview names it.
const EVENTS_HEADER: &str = "shopify-hmac-sha256";

/// Verifies a Shopify delivery.
pub(super) fn verify(
    headers: &Headers<'_>,
    body: &[u8],
    context: VerifyContext<'_>,
) -> Result<(), VerifyError> {
    let value = headers
        .get_any(&[HEADER, EVENTS_HEADER])
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_events_preview_header_name_verifies_too() {
        let secret = Secret::new(b"shpss_1".to_vec());
        let body = br#"{"id":1}"#;
        let signature = sign(&secret, body);
        let secrets = [secret];
        let context = VerifyContext {
            secrets: &secrets,
            public_keys: &[],
            tolerance_secs: 300,
            now_unix_secs: 0,
        };
        for name in ["x-shopify-hmac-sha256", "shopify-hmac-sha256"] {
            let headers: Headers = [(name, signature.as_bytes())].into_iter().collect();
            assert_eq!(verify(&headers, body, context), Ok(()), "{name}");
        }
    }
}
