//! The configuration and signed requests shared by the end-to-end suites: one integration
//! per provider, each with routes, an `expect` scope and (Stripe) a rotated file secret.

use crate::config::ConfigEdit;
use crate::process::ScratchDir;
use crate::signing::{self, HeaderList, SignedRequest};

/// Stripe's current secret (from the environment).
pub use crate::signing::STRIPE_SECRET;
/// Stripe's previous secret (from a file), still accepted during rotation.
pub const STRIPE_PREVIOUS_SECRET: &str = "whsec_stripe_previous_77aa";
/// GitHub's secret.
pub const GITHUB_SECRET: &str = "gh-secret-2b9e";
/// Slack's signing secret.
pub const SLACK_SECRET: &str = "slack-secret-51d0";
/// Standard Webhooks secret (`whsec_` + base64).
pub const STANDARD_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
/// Shopify's app client secret.
pub const SHOPIFY_SECRET: &str = "shpss_acme_4e1d";
/// Paddle's notification destination secret.
pub const PADDLE_SECRET: &str = "pdl_ntfset_acme_9b71";
/// Zoom's secret token.
pub const ZOOM_SECRET: &str = "zoom_acme_secret_token_31c8";
/// `hmac-acme`'s secret (a configurable HMAC scheme).
pub const HMAC_SECRET: &str = "hmac-acme-secret-62af";
/// `token-acme`'s shared token.
pub const TOKEN_SECRET: &str = "token-acme-shared-0c5e";
/// The shop `shop-acme` expects.
pub const SHOPIFY_SHOP: &str = "acme.myshopify.com";

/// Every configured secret value, for scanning logs.
pub const ALL_SECRETS: &[&str] = &[
    STRIPE_SECRET,
    STRIPE_PREVIOUS_SECRET,
    GITHUB_SECRET,
    SLACK_SECRET,
    STANDARD_SECRET,
    "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    SHOPIFY_SECRET,
    PADDLE_SECRET,
    ZOOM_SECRET,
    HMAC_SECRET,
    TOKEN_SECRET,
];

/// Body limit of every test integration.
pub const MAX_BODY_BYTES: usize = 4096;

/// How to start an ingress with the test configuration on `database_url`.
pub fn ingress_options(database_url: &str) -> crate::ServiceOptions {
    crate::ServiceOptions {
        config_toml: config_toml(),
        files: vec![(
            "stripe-previous".to_owned(),
            format!("  {STRIPE_PREVIOUS_SECRET}\n"),
        )],
        database_url: database_url.to_owned(),
        env: secret_env(),
        args: Vec::new(),
    }
}

/// `options` with the fixture's `audit` sink pointed at `url` (1 s timeout), sent an
/// `Idempotency-Key` header when `idempotent`.
pub fn with_audit_sink(
    mut options: crate::ServiceOptions,
    url: &str,
    idempotent: bool,
) -> crate::ServiceOptions {
    let mut config = ConfigEdit::parse(&options.config_toml);
    let sink = config.sink("audit");
    sink.insert("url".to_owned(), url.into());
    sink.insert("timeout_secs".to_owned(), 1.into());
    if idempotent {
        sink.insert("idempotency_header".to_owned(), "Idempotency-Key".into());
    }
    options.config_toml = config.to_toml();
    options
}

/// The test configuration, to edit ([`ConfigEdit`]).
pub fn config_edit() -> ConfigEdit {
    ConfigEdit::parse(&config_toml())
}

/// Writes `config` into `scratch` as `config.toml`, with the fixture's secret file beside
/// it; returns the file's path.
pub fn write_config(config: &ConfigEdit, scratch: &ScratchDir) -> String {
    config.write_into(scratch, &ingress_options("unused").files)
}

/// The test configuration; `{scratch}` holds the file `stripe-previous`.
pub fn config_toml() -> String {
    format!(
        r#"
[[integration]]
id = "stripe-acme"
provider = "stripe"
tenant = "acme"
secrets = ["env:TEST_STRIPE_SECRET", "file:{{scratch}}/stripe-previous"]
max_body_bytes = {MAX_BODY_BYTES}
expect = {{ account = "acct_123", livemode = true }}
[integration.routes]
"payment_intent.succeeded" = {{ handler = "orders.mark_paid", sink = "audit" }}
"payment_intent.payment_failed" = {{ handler = "orders.mark_paid" }}
"charge.refunded" = {{ handler = "orders.refund", sink = "audit" }}
"charge.refund.updated" = {{ handler = "orders.refund", sink = "audit" }}
"invoice.paid" = {{ handler = "entitlements.grant", sink = "audit" }}
[integration.entitlements]
"price_pro" = "pro"
"price_team" = "team"

[[integration]]
id = "gh-acme"
provider = "github"
tenant = "acme"
secrets = ["env:TEST_GITHUB_SECRET"]
content_type = "json"
max_body_bytes = {MAX_BODY_BYTES}
expect = {{ repository_id = "42" }}
[integration.routes]
"pull_request.opened" = {{ handler = "forward", sink = "audit" }}
"push" = {{ handler = "forward", sink = "audit" }}

[[integration]]
id = "slack-acme"
provider = "slack"
tenant = "acme"
secrets = ["env:TEST_SLACK_SECRET"]
max_body_bytes = {MAX_BODY_BYTES}
expect = {{ team_id = "T1", api_app_id = "A1" }}
[integration.routes]
"app_mention" = {{ handler = "forward", sink = "audit" }}

[[integration]]
id = "std-acme"
provider = "standard"
tenant = "acme"
secrets = ["env:TEST_STANDARD_SECRET"]
max_body_bytes = {MAX_BODY_BYTES}
[integration.routes]
"invoice.paid" = {{ handler = "forward", sink = "audit" }}

[[integration]]
id = "shop-acme"
provider = "shopify"
tenant = "acme"
secrets = ["env:TEST_SHOPIFY_SECRET"]
max_body_bytes = {MAX_BODY_BYTES}
expect = {{ shop_domain = "{SHOPIFY_SHOP}" }}
[integration.routes]
"orders/create" = {{ handler = "forward", sink = "audit" }}

[[integration]]
id = "paddle-acme"
provider = "paddle"
tenant = "acme"
secrets = ["env:TEST_PADDLE_SECRET"]
max_body_bytes = {MAX_BODY_BYTES}
[integration.routes]
"transaction.completed" = {{ handler = "forward", sink = "audit" }}

[[integration]]
id = "zoom-acme"
provider = "zoom"
tenant = "acme"
secrets = ["env:TEST_ZOOM_SECRET"]
max_body_bytes = {MAX_BODY_BYTES}
expect = {{ account_id = "acct_zoom_1" }}
[integration.routes]
"meeting.started" = {{ handler = "forward", sink = "audit" }}

[[integration]]
id = "hmac-acme"
provider = "hmac"
tenant = "acme"
secrets = ["env:TEST_HMAC_SECRET"]
max_body_bytes = {MAX_BODY_BYTES}
expect = {{ scope = "acct_1" }}
[integration.hmac]
header = "X-Signature"
prefix = "v1="
separator = ","
algorithm = "sha256"
encoding = "hex"
signed = "{{timestamp}}.{{body}}"
timestamp_header = "X-Timestamp"
[integration.fields]
event_id = {{ pointer = "/id" }}
event_type = {{ pointer = "/type" }}
scope = {{ pointer = "/account" }}
[integration.routes]
"order.placed" = {{ handler = "forward", sink = "audit" }}

[[integration]]
id = "token-acme"
provider = "token"
tenant = "acme"
secrets = ["env:TEST_TOKEN_SECRET"]
max_body_bytes = {MAX_BODY_BYTES}
expect = {{ scope = "42" }}
[integration.token]
header = "X-Webhook-Token"
[integration.fields]
event_id = {{ header = "X-Event-Id" }}
event_type = {{ header = "X-Event-Type" }}
scope = {{ pointer = "/project/id" }}
[integration.routes]
"Push Hook" = {{ handler = "forward", sink = "audit" }}

[[sink]]
id = "audit"
url = "http://127.0.0.1:9/audit"
"#
    )
}

/// The environment the test configuration's `env:` references need.
pub fn secret_env() -> Vec<(String, String)> {
    [
        ("TEST_STRIPE_SECRET", STRIPE_SECRET),
        ("TEST_GITHUB_SECRET", GITHUB_SECRET),
        ("TEST_SLACK_SECRET", SLACK_SECRET),
        ("TEST_STANDARD_SECRET", STANDARD_SECRET),
        ("TEST_SHOPIFY_SECRET", SHOPIFY_SECRET),
        ("TEST_PADDLE_SECRET", PADDLE_SECRET),
        ("TEST_ZOOM_SECRET", ZOOM_SECRET),
        ("TEST_HMAC_SECRET", HMAC_SECRET),
        ("TEST_TOKEN_SECRET", TOKEN_SECRET),
    ]
    .into_iter()
    .map(|(name, value)| (name.to_owned(), value.to_owned()))
    .collect()
}

/// The providers, as the suites iterate over them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    /// `stripe-acme`.
    Stripe,
    /// `gh-acme`.
    Github,
    /// `slack-acme`.
    Slack,
    /// `std-acme`.
    Standard,
    /// `shop-acme`.
    Shopify,
    /// `paddle-acme`.
    Paddle,
    /// `zoom-acme`.
    Zoom,
    /// `hmac-acme`: a configurable HMAC scheme with a signed timestamp.
    Hmac,
    /// `token-acme`: a shared token (GitLab's shape).
    Token,
}

/// Every provider.
pub const PROVIDERS: [Provider; 9] = [
    Provider::Stripe,
    Provider::Github,
    Provider::Slack,
    Provider::Standard,
    Provider::Shopify,
    Provider::Paddle,
    Provider::Zoom,
    Provider::Hmac,
    Provider::Token,
];

/// Which request to build.
#[derive(Debug, Clone, Copy)]
pub enum Variant<'a> {
    /// A valid, signed event that is routed.
    Routed(&'a str),
    /// A valid, signed event of a type that is not routed.
    Unrouted(&'a str),
    /// Signed now with the right secret, but without an event id (Standard Webhooks signs
    /// its id, so there the body lacks the event type instead).
    NoEventId,
    /// A routed event signed with a wrong secret.
    WrongSecret(&'a str),
    /// A routed event whose signed timestamp is `age` seconds old (negative: future).
    Aged(&'a str, i64),
    /// Verified but from another account/installation/team.
    ForeignScope(&'a str),
    /// A body that is not JSON, signed with a wrong secret.
    GarbageWithBadSignature,
}

impl Provider {
    /// The integration id.
    pub fn integration(self) -> &'static str {
        match self {
            Self::Stripe => "stripe-acme",
            Self::Github => "gh-acme",
            Self::Slack => "slack-acme",
            Self::Standard => "std-acme",
            Self::Shopify => "shop-acme",
            Self::Paddle => "paddle-acme",
            Self::Zoom => "zoom-acme",
            Self::Hmac => "hmac-acme",
            Self::Token => "token-acme",
        }
    }

    /// Whether the provider signs a timestamp.
    pub fn signs_timestamp(self) -> bool {
        !matches!(self, Self::Github | Self::Shopify | Self::Token)
    }

    /// Whether the provider has a scope to check.
    pub fn has_scope(self) -> bool {
        !matches!(self, Self::Standard | Self::Paddle)
    }

    /// The event id a receipt of `request` (built with `event_id`) is stored under: the id
    /// itself, except for Zoom, which sends none (the body's SHA-256 stands in).
    pub fn receipt_event_id(self, request: &SignedRequest, event_id: &str) -> String {
        match self {
            Self::Zoom => hex::encode(inbound_core::keys::content_digest(&request.body)),
            _ => event_id.to_owned(),
        }
    }

    /// The request for `variant`, to this provider's integration.
    pub fn request(self, variant: Variant<'_>) -> SignedRequest {
        let (headers, body) = self.headers_and_body(variant);
        SignedRequest::new(self.integration(), headers, body)
    }

    fn headers_and_body(self, variant: Variant<'_>) -> (HeaderList, String) {
        let (event_id, routed, age, wrong_secret, foreign) = match variant {
            Variant::Routed(id) => (Some(id), true, 0, false, false),
            Variant::Unrouted(id) => (Some(id), false, 0, false, false),
            Variant::NoEventId => (None, true, 0, false, false),
            Variant::WrongSecret(id) => (Some(id), true, 0, true, false),
            Variant::Aged(id, age) => (Some(id), true, age, false, false),
            Variant::ForeignScope(id) => (Some(id), true, 0, false, true),
            Variant::GarbageWithBadSignature => {
                let body = "this is { not json".to_owned();
                let signing = Signing {
                    event_id: "evt_garbage",
                    routed: true,
                    age: 0,
                    wrong_secret: true,
                    missing_id: false,
                    foreign: false,
                };
                let (headers, _) = self.sign(&body, signing);
                return (headers, body);
            }
        };
        let body = self.body(event_id, routed, foreign);
        let signing = Signing {
            event_id: event_id.unwrap_or("msg_without_type"),
            routed,
            age,
            wrong_secret,
            missing_id: event_id.is_none(),
            foreign,
        };
        self.sign(&body, signing)
    }

    fn body(self, event_id: Option<&str>, routed: bool, foreign: bool) -> String {
        match self {
            Self::Stripe => {
                let event_type = if routed {
                    "payment_intent.succeeded"
                } else {
                    "customer.created"
                };
                let account = if foreign { "acct_other" } else { "acct_123" };
                let mut body: serde_json::Value = serde_json::from_str(&signing::stripe_body(
                    event_id.unwrap_or(""),
                    event_type,
                    Some(account),
                    true,
                ))
                .expect("json");
                if event_id.is_none() {
                    body.as_object_mut().expect("object").remove("id");
                }
                body.to_string()
            }
            Self::Github => {
                let action = if routed { "opened" } else { "closed" };
                // The repository id is the signed scope `expect` checks.
                let repository = if foreign { 7 } else { 42 };
                serde_json::json!({"action": action, "number": 7, "repository": {"id": repository, "full_name": "acme/app"}}).to_string()
            }
            Self::Slack => {
                let event_type = if routed {
                    "app_mention"
                } else {
                    "reaction_added"
                };
                let team = if foreign { "T_OTHER" } else { "T1" };
                let mut body = serde_json::json!({
                    "type": "event_callback", "team_id": team, "api_app_id": "A1",
                    "event": {"type": event_type, "text": "hello"}
                });
                if let Some(event_id) = event_id {
                    body["event_id"] = event_id.into();
                }
                body.to_string()
            }
            Self::Standard => {
                let event_type = if routed {
                    "invoice.paid"
                } else {
                    "invoice.created"
                };
                let mut body = serde_json::json!({"type": event_type, "data": {"invoice": "in_1"}});
                if event_id.is_none() {
                    body.as_object_mut().expect("object").remove("type");
                }
                body.to_string()
            }
            Self::Paddle => {
                let event_type = if routed {
                    "transaction.completed"
                } else {
                    "transaction.created"
                };
                let mut body = serde_json::json!({
                    "event_type": event_type, "notification_id": "ntf_1",
                    "data": {"id": "txn_1", "status": "completed"}
                });
                if let Some(event_id) = event_id {
                    body["event_id"] = event_id.into();
                }
                body.to_string()
            }
            Self::Hmac => {
                let event_type = if routed {
                    "order.placed"
                } else {
                    "order.updated"
                };
                let account = if foreign { "acct_other" } else { "acct_1" };
                let mut body = serde_json::json!({"type": event_type, "account": account});
                if let Some(event_id) = event_id {
                    body["id"] = event_id.into();
                }
                body.to_string()
            }
            // The id and type are headers (`sign`); the body holds the project.
            Self::Token => {
                let project = if foreign { 7 } else { 42 };
                serde_json::json!({"object_kind": "push", "project": {"id": project}}).to_string()
            }
            // Zoom sends no event id (the body's digest keys the receipt): without one here
            // means without its type.
            Self::Zoom => {
                let event_type = if routed {
                    "meeting.started"
                } else {
                    "meeting.ended"
                };
                let account = if foreign { "acct_other" } else { "acct_zoom_1" };
                let mut body = serde_json::json!({
                    "event": event_type, "event_ts": 1626230691572_u64,
                    "payload": {"account_id": account, "object": {"id": event_id.unwrap_or("-")}}
                });
                if event_id.is_none() {
                    body.as_object_mut().expect("object").remove("event");
                }
                body.to_string()
            }
            // The topic, the shop and the ids are headers (`sign`); the body is the order.
            Self::Shopify => serde_json::json!({
                "id": 820982911946154508_u64, "email": "jon@example.com", "total_price": "10.00"
            })
            .to_string(),
        }
    }

    /// Signs `body` as `signing` says.
    fn sign(self, body: &str, signing: Signing<'_>) -> (HeaderList, String) {
        let Signing {
            event_id,
            routed,
            age,
            wrong_secret,
            missing_id,
            foreign,
        } = signing;
        let secret = |right: &'static str| {
            if wrong_secret {
                "whsec_dGhlIHdyb25nIHNlY3JldA=="
            } else {
                right
            }
        };
        let mut headers = match self {
            Self::Stripe => signing::stripe_headers(secret(STRIPE_SECRET), body, age),
            Self::Github => {
                let target = if foreign { "7" } else { "42" };
                signing::github_headers(
                    secret(GITHUB_SECRET),
                    body,
                    event_id,
                    "pull_request",
                    target,
                )
            }
            Self::Slack => signing::slack_headers(secret(SLACK_SECRET), body, age),
            Self::Standard => {
                signing::standard_headers(secret(STANDARD_SECRET), event_id, body, age)
            }
            Self::Paddle => signing::paddle_headers(secret(PADDLE_SECRET), body, age),
            Self::Zoom => signing::zoom_headers(secret(ZOOM_SECRET), body, age),
            Self::Hmac => signing::hmac_scheme_headers(secret(HMAC_SECRET), body, age),
            Self::Token => {
                let event_type = if routed { "Push Hook" } else { "Tag Push Hook" };
                signing::token_headers(secret(TOKEN_SECRET), event_id, event_type)
            }
            Self::Shopify => {
                let topic = if routed {
                    "orders/create"
                } else {
                    "customers/create"
                };
                let shop = if foreign {
                    "other.myshopify.com"
                } else {
                    SHOPIFY_SHOP
                };
                signing::shopify_headers(secret(SHOPIFY_SECRET), body, event_id, topic, shop)
            }
        };
        if missing_id {
            // GitHub's delivery id, Shopify's event and webhook ids: the receipt key's half.
            headers.retain(|(name, _)| {
                !matches!(
                    (self, name.as_str()),
                    (Self::Github, "x-github-delivery")
                        | (Self::Shopify, "x-shopify-event-id" | "x-shopify-webhook-id")
                        | (Self::Token, "x-event-id")
                )
            });
        }
        (headers, body.to_owned())
    }
}

/// How [`Provider::request`] signs one request.
#[derive(Debug, Clone, Copy)]
struct Signing<'a> {
    event_id: &'a str,
    /// A routed type (where the type travels in a header).
    routed: bool,
    /// Seconds since the signed timestamp.
    age: i64,
    wrong_secret: bool,
    /// Without the header that carries the event id.
    missing_id: bool,
    /// Another account, installation, team or shop.
    foreign: bool,
}
