//! A delivery signed as an integration's sender signs it: the headers a provider (or a
//! configured scheme) sends with a body, for `inboundctl sign-event` and the worker's
//! testing kit. The signers are [`crate::verify`]'s; this module only chooses the headers.

use crate::config::{FieldSource, Integration};
use crate::secret::Secret;
use crate::verify::custom::{self, CustomVerifier, TimestampUnit};
use crate::verify::{self, Provider};

/// Why a delivery cannot be signed as `integration`'s sender would.
#[derive(Debug, thiserror::Error)]
pub enum SignError {
    /// A type was given, but the provider names it in the body.
    #[error(
        "an event type header is for integrations that send the type in a header (GitHub, Shopify, a configured header); {0} names it in the body"
    )]
    TypeNotInAHeader(String),
    /// The provider names the type in a header, and none was given.
    #[error("integration {integration} reads the type from header {header}: give the event type")]
    TypeNeeded {
        /// The integration.
        integration: String,
        /// The header it reads.
        header: String,
    },
    /// The integration has no secret to sign with.
    #[error("integration {0:?} has no secret")]
    NoSecret(String),
    /// An `hmac` or `token` integration without its scheme.
    #[error("integration {0} has no configured scheme")]
    NoScheme(String),
    /// A token scheme's token is not text.
    #[error("the token is not text, so no header can carry it")]
    TokenNotText,
}

/// What `integration`'s sender puts on the wire for the event `json`: its `Content-Type`
/// and body. A GitHub hook that sends forms (`content_type = "form"`) sends `payload=` and
/// the JSON percent-encoded (every byte but `A-Z a-z 0-9 * - . _`, a space as `+`, as a
/// browser's form encoder writes it); every other sender sends the JSON itself. The
/// signature is over what this returns.
pub fn body_as_sent(integration: &Integration, json: &str) -> (&'static str, String) {
    if crate::event::reads_a_form(integration) {
        let encoded: String = percent_encoding::utf8_percent_encode(json, FORM_VALUE)
            .to_string()
            .replace("%20", "+");
        (
            crate::config::GithubContentType::Form.media_type(),
            format!("payload={encoded}"),
        )
    } else {
        ("application/json", json.to_owned())
    }
}

/// What a form's value keeps as it is: the unreserved characters of
/// `application/x-www-form-urlencoded` (WHATWG URL, "urlencoded serializing").
const FORM_VALUE: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'*')
    .remove(b'-')
    .remove(b'.')
    .remove(b'_');

/// The headers `integration`'s sender sends with `body` at `now` (Unix seconds), signed
/// with its first secret; ids a sender makes anew for each delivery are fresh.
/// `header_event_type` is the type of the providers that send it in a header: GitHub's
/// `X-GitHub-Event` (default `ping`), Shopify's `X-Shopify-Topic` (required) and a
/// configured header.
pub fn signed_headers(
    integration: &Integration,
    body: &[u8],
    now: i64,
    header_event_type: Option<&str>,
) -> Result<Vec<(String, String)>, SignError> {
    let type_in_a_header = match &integration.custom {
        Some(custom) => matches!(custom.fields.event_type, FieldSource::Header(_)),
        None => matches!(integration.provider, Provider::Github | Provider::Shopify),
    };
    if header_event_type.is_some() && !type_in_a_header {
        return Err(SignError::TypeNotInAHeader(integration.id.clone()));
    }
    let Some(secret) = integration.secrets.first() else {
        return Err(SignError::NoSecret(integration.id.clone()));
    };
    let unique = fresh_id();
    Ok(match integration.provider {
        Provider::Stripe => vec![(
            "Stripe-Signature".into(),
            verify::sign_stripe(secret, now, body),
        )],
        Provider::Github => vec![
            (
                "X-Hub-Signature-256".into(),
                verify::sign_github(secret, body),
            ),
            (
                "X-GitHub-Event".into(),
                header_event_type.unwrap_or("ping").to_owned(),
            ),
            ("X-GitHub-Delivery".into(), format!("delivery-{unique}")),
        ],
        Provider::Slack => vec![
            (
                "X-Slack-Signature".into(),
                verify::sign_slack(secret, now, body),
            ),
            ("X-Slack-Request-Timestamp".into(), now.to_string()),
        ],
        Provider::Standard => {
            let id = format!("msg_{unique}");
            vec![
                (
                    "webhook-signature".into(),
                    verify::sign_standard(secret, &id, now, body),
                ),
                ("webhook-timestamp".into(), now.to_string()),
                ("webhook-id".into(), id),
            ]
        }
        Provider::Paddle => vec![(
            "Paddle-Signature".into(),
            verify::sign_paddle(secret, now, body),
        )],
        Provider::Hmac | Provider::Token => {
            configured_headers(integration, secret, now, body, header_event_type)?
        }
        Provider::Zoom => vec![
            (
                "x-zm-signature".into(),
                verify::sign_zoom(secret, now, body),
            ),
            ("x-zm-request-timestamp".into(), now.to_string()),
        ],
        Provider::Shopify => {
            let Some(topic) = header_event_type else {
                return Err(SignError::TypeNeeded {
                    integration: integration.id.clone(),
                    header: "X-Shopify-Topic".to_owned(),
                });
            };
            // The shop the integration expects, so the request passes its scope check.
            let shop = integration
                .expect
                .shop_domain
                .as_deref()
                .unwrap_or("example.myshopify.com");
            vec![
                (
                    "X-Shopify-Hmac-Sha256".into(),
                    verify::sign_shopify(secret, body),
                ),
                ("X-Shopify-Topic".into(), topic.to_owned()),
                ("X-Shopify-Shop-Domain".into(), shop.to_owned()),
                ("X-Shopify-Webhook-Id".into(), format!("webhook-{unique}")),
                ("X-Shopify-Event-Id".into(), format!("event-{unique}")),
            ]
        }
    })
}

/// A fresh part for the ids a sender makes anew for each event (the nanoseconds now):
/// two sends within one second are two events, never a duplicate.
fn fresh_id() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos())
}

/// The headers of a configurable scheme: its signature (or token), its timestamp, and the
/// fields its `[integration.fields]` reads from headers.
fn configured_headers(
    integration: &Integration,
    secret: &Secret,
    now: i64,
    body: &[u8],
    header_event_type: Option<&str>,
) -> Result<Vec<(String, String)>, SignError> {
    let Some(custom) = &integration.custom else {
        return Err(SignError::NoScheme(integration.id.clone()));
    };
    let mut headers = match &custom.verifier {
        CustomVerifier::Hmac(scheme) => {
            let timestamp = match scheme.timestamp_unit {
                TimestampUnit::Seconds => now.to_string(),
                TimestampUnit::Milliseconds => (now * 1000).to_string(),
            };
            let mut headers = vec![(
                scheme.header.clone(),
                custom::sign(scheme, secret, &timestamp, body),
            )];
            if let Some(name) = &scheme.timestamp_header {
                headers.push((name.clone(), timestamp));
            }
            headers
        }
        CustomVerifier::Token(scheme) => {
            let token =
                std::str::from_utf8(secret.expose()).map_err(|_| SignError::TokenNotText)?;
            vec![(scheme.header.clone(), token.to_owned())]
        }
    };
    if let FieldSource::Header(name) = &custom.fields.event_id {
        headers.push((name.clone(), format!("evt-{}", fresh_id())));
    }
    if let FieldSource::Header(name) = &custom.fields.event_type {
        let Some(event_type) = header_event_type else {
            return Err(SignError::TypeNeeded {
                integration: integration.id.clone(),
                header: name.clone(),
            });
        };
        headers.push((name.clone(), event_type.to_owned()));
    }
    if let Some(FieldSource::Header(name)) = &custom.fields.scope {
        let scope = integration.expect.scope.as_deref().unwrap_or("example");
        headers.push((name.clone(), scope.to_owned()));
    }
    Ok(headers)
}
