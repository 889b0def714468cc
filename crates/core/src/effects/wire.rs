//! What a sink receives: the JSON body, the Standard Webhooks signature headers (the
//! operation key as `webhook-id`), and the status URL a reconciliation asks.

use serde_json::{Value, json};

use crate::secret::Secret;

/// The JSON body POSTed to a sink.
pub fn request_body(
    operation_key: &str,
    kind: &str,
    tenant: &str,
    sink: &str,
    data: &Value,
    event: &Value,
) -> Value {
    json!({"operation_key": operation_key, "kind": kind, "tenant": tenant, "sink": sink, "data": data, "event": event})
}

/// Standard Webhooks headers for `body` (`webhook-id` is the operation key), signed with
/// every secret (space-separated, so a receiver mid-rotation verifies with either).
pub fn signature_headers(
    secrets: &[Secret],
    operation_key: &str,
    timestamp: i64,
    body: &[u8],
) -> Vec<(&'static str, String)> {
    let signatures: Vec<String> = secrets
        .iter()
        .map(|secret| crate::provider::sign_standard(secret, operation_key, timestamp, body))
        .collect();
    vec![
        ("webhook-id", operation_key.to_owned()),
        ("webhook-timestamp", timestamp.to_string()),
        ("webhook-signature", signatures.join(" ")),
    ]
}

/// `status_url` with `{key}` replaced by the URL-encoded operation key.
pub fn status_url(template: &str, operation_key: &str) -> String {
    let mut encoded = String::with_capacity(operation_key.len());
    for byte in operation_key.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            encoded.push(byte as char);
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    template.replace("{key}", &encoded)
}

/// The inverse of the encoding in [`status_url`] (`%XX` escapes; anything else as is).
pub fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let escaped = (bytes[index] == b'%')
            .then(|| text.get(index + 1..index + 3))
            .flatten()
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match escaped {
            Some(byte) => {
                decoded.push(byte);
                index += 3;
            }
            None => {
                decoded.push(bytes[index]);
                index += 1;
            }
        }
    }
    String::from_utf8_lossy(&decoded).into_owned()
}
