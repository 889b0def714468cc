//! Signed deliveries as each provider sends them, built with core's signers.

use inbound_core::secret::Secret;
use inbound_core::verify;

/// Header list for a request.
pub type HeaderList = Vec<(String, String)>;

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs() as i64
}

fn pair(name: &str, value: impl Into<String>) -> (String, String) {
    (name.to_owned(), value.into())
}

/// A Stripe event body.
pub fn stripe_body(
    event_id: &str,
    event_type: &str,
    account: Option<&str>,
    livemode: bool,
) -> String {
    let mut body = serde_json::json!({
        "id": event_id, "object": "event", "type": event_type, "livemode": livemode,
        "data": {"object": {"id": "pi_1", "amount_received": 1000, "currency": "usd"}}
    });
    if let Some(account) = account {
        body["account"] = account.into();
    }
    body.to_string()
}

/// `Stripe-Signature` headers for `body`, signed `age_secs` ago.
pub fn stripe_headers(secret: &str, body: &str, age_secs: i64) -> HeaderList {
    let secret = Secret::new(secret.as_bytes().to_vec());
    vec![
        pair("content-type", "application/json"),
        pair(
            "stripe-signature",
            verify::sign_stripe(&secret, now() - age_secs, body.as_bytes()),
        ),
    ]
}

/// GitHub headers for `body`.
pub fn github_headers(
    secret: &str,
    body: &str,
    delivery: &str,
    event: &str,
    target: &str,
) -> HeaderList {
    let secret = Secret::new(secret.as_bytes().to_vec());
    vec![
        pair("content-type", "application/json"),
        pair(
            "x-hub-signature-256",
            verify::sign_github(&secret, body.as_bytes()),
        ),
        pair("x-github-delivery", delivery),
        pair("x-github-event", event),
        pair("x-github-hook-installation-target-id", target),
    ]
}

/// Slack headers for `body`, signed `age_secs` ago.
pub fn slack_headers(secret: &str, body: &str, age_secs: i64) -> HeaderList {
    let secret = Secret::new(secret.as_bytes().to_vec());
    let timestamp = now() - age_secs;
    vec![
        pair("content-type", "application/json"),
        pair(
            "x-slack-signature",
            verify::sign_slack(&secret, timestamp, body.as_bytes()),
        ),
        pair("x-slack-request-timestamp", timestamp.to_string()),
    ]
}

/// Standard Webhooks headers for `body` with message id `id`, signed `age_secs` ago.
pub fn standard_headers(whsec: &str, id: &str, body: &str, age_secs: i64) -> HeaderList {
    let key = verify::decode_standard_secret(whsec).expect("test secret is whsec_ base64");
    let timestamp = now() - age_secs;
    vec![
        pair("content-type", "application/json"),
        pair("webhook-id", id),
        pair("webhook-timestamp", timestamp.to_string()),
        pair(
            "webhook-signature",
            verify::sign_standard(&key, id, timestamp, body.as_bytes()),
        ),
    ]
}
