//! A delivery signed as an integration's sender signs it: the headers a provider (or a
//! configured scheme) sends with a body, for `inboundctl sign-event` and the worker's
//! testing kit. Each provider's headers are its home's ([`crate::provider`]); this module
//! holds the body as sent and why a delivery cannot be signed; `crate::provider::signed_headers`
//! makes the headers.

use crate::config::Integration;

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
