//! Signed deliveries as each provider sends them, built with core's signers.

use bytes::Bytes;
use inbound_core::provider;
use inbound_core::secret::Secret;
use inbound_core::verify;

/// The fixture integration `stripe-acme`'s current secret (`fixtures` configures it).
pub const STRIPE_SECRET: &str = "whsec_stripe_current_8c1f";

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

/// `Stripe-Signature` headers for `body` (any bytes), signed `age_secs` ago.
pub fn stripe_headers(secret: &str, body: impl AsRef<[u8]>, age_secs: i64) -> HeaderList {
    let secret = Secret::new(secret.as_bytes().to_vec());
    vec![
        pair("content-type", "application/json"),
        pair(
            "stripe-signature",
            provider::sign_stripe(&secret, now() - age_secs, body.as_ref()),
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
            provider::sign_github(&secret, body.as_bytes()),
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
            provider::sign_slack(&secret, timestamp, body.as_bytes()),
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
            provider::sign_standard(&key, id, timestamp, body.as_bytes()),
        ),
    ]
}

/// `Paddle-Signature` headers for `body`, signed `age_secs` ago.
pub fn paddle_headers(secret: &str, body: &str, age_secs: i64) -> HeaderList {
    let secret = Secret::new(secret.as_bytes().to_vec());
    vec![
        pair("content-type", "application/json"),
        pair(
            "paddle-signature",
            provider::sign_paddle(&secret, now() - age_secs, body.as_bytes()),
        ),
    ]
}

/// Headers of the fixture's configurable HMAC scheme (`hmac-acme`): `X-Signature: v1=<hex>`
/// of `"{timestamp}.{body}"`, the timestamp `age_secs` ago in `X-Timestamp`.
pub fn hmac_scheme_headers(secret: &str, body: &str, age_secs: i64) -> HeaderList {
    let timestamp = (now() - age_secs).to_string();
    let signature = verify::custom::mac(
        verify::custom::Algorithm::Sha256,
        secret.as_bytes(),
        &[timestamp.as_bytes(), b".", body.as_bytes()],
    );
    vec![
        pair("content-type", "application/json"),
        pair("x-signature", format!("v1={}", hex::encode(signature))),
        pair("x-timestamp", timestamp),
    ]
}

/// Headers of the fixture's shared-token scheme (`token-acme`, GitLab's shape).
pub fn token_headers(token: &str, event_id: &str, event_type: &str) -> HeaderList {
    vec![
        pair("content-type", "application/json"),
        pair("x-webhook-token", token),
        pair("x-event-id", event_id),
        pair("x-event-type", event_type),
    ]
}

/// Zoom headers for `body`, signed `age_secs` ago.
pub fn zoom_headers(secret: &str, body: &str, age_secs: i64) -> HeaderList {
    let secret = Secret::new(secret.as_bytes().to_vec());
    let timestamp = now() - age_secs;
    vec![
        pair("content-type", "application/json"),
        pair(
            "x-zm-signature",
            provider::sign_zoom(&secret, timestamp, body.as_bytes()),
        ),
        pair("x-zm-request-timestamp", timestamp.to_string()),
    ]
}

/// Shopify headers for `body`: signed with `secret`, with event id `event_id` (and a
/// webhook id derived from it), `topic` and `shop`.
pub fn shopify_headers(
    secret: &str,
    body: &str,
    event_id: &str,
    topic: &str,
    shop: &str,
) -> HeaderList {
    let secret = Secret::new(secret.as_bytes().to_vec());
    vec![
        pair("content-type", "application/json"),
        pair(
            "x-shopify-hmac-sha256",
            provider::sign_shopify(&secret, body.as_bytes()),
        ),
        pair("x-shopify-event-id", event_id),
        pair("x-shopify-webhook-id", format!("webhook-{event_id}")),
        pair("x-shopify-topic", topic),
        pair("x-shopify-shop-domain", shop),
        pair("x-shopify-api-version", "2025-07"),
    ]
}

/// A webhook request as a provider sends it: the integration it is addressed to, its
/// headers and its raw body. Every suite builds its requests as this — from the signers
/// above, or `fixtures::Provider::request` — and sends them one way:
/// [`SignedRequest::send`] (or [`crate::stack::Stack::deliver`]; from a spawned task,
/// [`SignedRequest::send_to`]).
#[derive(Debug, Clone)]
pub struct SignedRequest {
    /// The integration id (`/webhooks/{integration}`).
    pub integration: String,
    /// The headers, signature included.
    pub headers: HeaderList,
    /// The raw body, exactly as signed (any bytes: a test may sign what is not text).
    pub body: Bytes,
}

impl SignedRequest {
    /// `body` to `integration` with `headers`.
    pub fn new(integration: &str, headers: HeaderList, body: impl Into<Bytes>) -> Self {
        Self {
            integration: integration.to_owned(),
            headers,
            body: body.into(),
        }
    }

    /// `body` to `integration` with no header at all (no signature, no content type).
    pub fn unsigned(integration: &str, body: impl Into<Bytes>) -> Self {
        Self::new(integration, Vec::new(), body)
    }

    /// The same request addressed to `integration` instead.
    pub fn to(mut self, integration: &str) -> Self {
        self.integration = integration.to_owned();
        self
    }

    /// A Stripe event to the fixture's `stripe-acme`, signed now with its current secret.
    pub fn stripe(body: impl Into<Bytes>) -> Self {
        Self::stripe_signed(STRIPE_SECRET, body, 0)
    }

    /// A Stripe event to `stripe-acme` signed with `secret`, `age_secs` ago.
    pub fn stripe_signed(secret: &str, body: impl Into<Bytes>, age_secs: i64) -> Self {
        let body: Bytes = body.into();
        let headers = stripe_headers(secret, &body, age_secs);
        Self::new("stripe-acme", headers, body)
    }

    /// The same request with one more header (or a second value of one it has).
    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        self.headers.push(pair(name, value));
        self
    }

    /// The same request without the headers named `name`.
    pub fn without_header(mut self, name: &str) -> Self {
        self.headers
            .retain(|(header, _)| !header.eq_ignore_ascii_case(name));
        self
    }

    /// `POST`s it to `ingress` with `client`; `Err` when no answer came.
    pub async fn send(
        &self,
        client: &crate::http::HttpClient,
        ingress: &crate::Service,
    ) -> Result<crate::http::Answer, String> {
        self.send_to(client, ingress.addr).await
    }

    /// [`SignedRequest::send`] to the ingress listening at `addr`: for a sender spawned on a
    /// task of its own, which cannot borrow the ingress's [`crate::Service`] (nor keep the
    /// test from killing it meanwhile).
    pub async fn send_to(
        &self,
        client: &crate::http::HttpClient,
        addr: std::net::SocketAddr,
    ) -> Result<crate::http::Answer, String> {
        client
            .post(
                &format!("http://{addr}/webhooks/{}", self.integration),
                &self.headers,
                self.body.clone(),
            )
            .await
    }
}
