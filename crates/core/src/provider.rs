//! One home per provider: everything inbound knows about a sender lives in its file —
//! how it signs (verify and sign), what its body and headers mean (extract: id, type,
//! route keys, scope and `expect`), the headers `sign-event` sends, how long it waits and
//! redelivers, and the event types it is known to send (`known_events/<name>.txt`).
//!
//! This module is the top of core: it dispatches [`verify`], [`extract`] and
//! [`signed_headers`] to a provider's home, and the homes build on what every provider
//! shares below it — [`crate::verify`] (the signature machinery, the cost caps and the
//! [`Provider`] names the configuration reads), [`crate::event`] (the storability check,
//! GitHub's form decoding, bounded identifiers, routing), [`crate::sender`] and
//! [`crate::config`]. ARCHITECTURE.md, "Adding a provider", lists what a new one needs.

use std::sync::OnceLock;

use crate::config::{FieldSource, Integration};
use crate::event::{self, ExtractError, Extracted};
use crate::headers::Headers;
use crate::secret::Secret;
use crate::sender::SignError;
pub use crate::verify::Provider;
use crate::verify::{VerifyContext, VerifyError, custom};

mod configured;
mod github;
mod paddle;
mod shopify;
mod slack;
mod standard;
mod stripe;
mod zoom;

pub use github::sign as sign_github;
pub use paddle::sign as sign_paddle;
pub use shopify::sign as sign_shopify;
pub use slack::sign as sign_slack;
pub use standard::sign as sign_standard;
pub use stripe::sign as sign_stripe;
pub use zoom::{encrypted_token as zoom_encrypted_token, sign as sign_zoom};

#[cfg(test)]
mod extract_tests;
#[cfg(test)]
mod limits;
#[cfg(test)]
mod vectors;

impl Provider {
    /// Everything inbound knows about this provider, from its home.
    pub(crate) fn spec(self) -> &'static Spec {
        match self {
            Self::Stripe => &stripe::SPEC,
            Self::Github => &github::SPEC,
            Self::Slack => &slack::SPEC,
            Self::Standard => &standard::SPEC,
            Self::Shopify => &shopify::SPEC,
            Self::Paddle => &paddle::SPEC,
            Self::Zoom => &zoom::SPEC,
            Self::Hmac | Self::Token => &configured::SPEC,
        }
    }

    /// How long after an event the provider may still deliver it again, by itself or at
    /// an operator's request: a receipt key purged sooner lets that redelivery be accepted
    /// as new (the business key still refuses a second transition). `inboundctl purge`
    /// keeps keys at least this long unless forced. Each provider's home cites its words.
    pub fn redelivery_horizon_days(self) -> u32 {
        self.spec().redelivery_horizon_days
    }

    /// The event types this provider is known to send, sorted in byte order; `None` when
    /// every sender names its own (Standard Webhooks, `hmac`, `token`). A warning aid for
    /// `check-config`, never a filter: routing does not consult it.
    pub fn known_event_types(self) -> Option<&'static [&'static str]> {
        self.spec().known_events.map(KnownEvents::types)
    }

    /// What names the business object of this provider's events by default (the
    /// subject), in words: `None` when a route must name it with `subject` pointers
    /// (Slack, Standard Webhooks, `hmac`, `token`). docs/contract.md, "Subjects".
    pub fn default_subject(self) -> Option<&'static str> {
        self.spec().default_subject
    }

    /// Route keys under which any action is known: `event.` followed by anything (GitHub's
    /// `repository_dispatch`, whose action is the dispatching client's `event_type`).
    pub fn free_form_actions(self) -> &'static [&'static str] {
        self.spec().free_form_actions
    }
}

/// Verifies one request for `provider` over the raw `body` bytes (a configurable scheme:
/// [`verify_with`]).
pub fn verify(
    provider: Provider,
    headers: &Headers<'_>,
    body: &[u8],
    context: VerifyContext<'_>,
) -> Result<(), VerifyError> {
    verify_with(provider, None, headers, body, context)
}

/// [`verify`], with the integration's configurable scheme for [`Provider::Hmac`] and
/// [`Provider::Token`] (without one they verify nothing).
pub fn verify_with(
    provider: Provider,
    scheme: Option<&custom::CustomVerifier>,
    headers: &Headers<'_>,
    body: &[u8],
    context: VerifyContext<'_>,
) -> Result<(), VerifyError> {
    match (&provider.spec().verify, scheme) {
        (Verifier::Fixed(verify), _) => verify(headers, body, context),
        (Verifier::Configured, Some(scheme)) => custom::verify(scheme, headers, body, context),
        (Verifier::Configured, None) => Err(VerifyError::NoMatchingSignature),
    }
}

/// The first of `context.secrets` that verifies the request on its own: the one to answer
/// a challenge with (Zoom's endpoint validation is answered under the signing secret).
pub fn matching_secret<'a>(
    provider: Provider,
    headers: &Headers<'_>,
    body: &[u8],
    context: VerifyContext<'a>,
) -> Option<&'a Secret> {
    context.secrets.iter().find(|secret| {
        let alone = VerifyContext {
            secrets: std::slice::from_ref(*secret),
            public_keys: &[],
            ..context
        };
        verify(provider, headers, body, alone).is_ok()
    })
}

/// Understands one verified request for `integration`: its body read as its sender sends
/// it (`event::read_delivery`: the JSON, or a GitHub form's `payload` field, and
/// storable), then by its provider.
pub fn extract<'body>(
    integration: &Integration,
    headers: &Headers<'_>,
    body: &'body [u8],
) -> Result<Extracted<'body>, ExtractError> {
    event::read_delivery(
        integration,
        headers,
        body,
        integration.provider.spec().extract,
    )
}

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
        None => integration.provider.spec().type_in_a_header,
    };
    if header_event_type.is_some() && !type_in_a_header {
        return Err(SignError::TypeNotInAHeader(integration.id.clone()));
    }
    let Some(secret) = integration.secrets.first() else {
        return Err(SignError::NoSecret(integration.id.clone()));
    };
    (integration.provider.spec().sign)(&Signing {
        integration,
        secret,
        now,
        body,
        header_event_type,
        unique: fresh_id(),
    })
}

/// A fresh part for the ids a sender makes anew for each event (the nanoseconds now):
/// two sends within one second are two events, never a duplicate.
fn fresh_id() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos())
}

/// A provider's own verifier, or the integration's configured scheme.
pub(crate) enum Verifier {
    /// Verifies a request under the provider's fixed scheme.
    Fixed(fn(&Headers<'_>, &[u8], VerifyContext<'_>) -> Result<(), VerifyError>),
    /// The integration's `[integration.hmac]` or `[integration.token]` decides.
    Configured,
}

/// Understands a verified request's JSON (the body, or a form's `payload` field).
pub(crate) type Extract =
    for<'body> fn(&Integration, &Headers<'_>, &'body str) -> Result<Extracted<'body>, ExtractError>;

/// The headers a provider's sender sends with a body: `(name, value)` pairs.
pub(crate) type Sign = fn(&Signing<'_>) -> Result<Vec<(String, String)>, SignError>;

/// What a signed delivery is made of: [`crate::sender::signed_headers`]'s request.
pub(crate) struct Signing<'a> {
    /// The integration whose sender is imitated.
    pub integration: &'a Integration,
    /// Its first secret.
    pub secret: &'a Secret,
    /// Unix seconds.
    pub now: i64,
    /// The body as sent.
    pub body: &'a [u8],
    /// The type, for a provider that sends it in a header.
    pub header_event_type: Option<&'a str>,
    /// A fresh number for the ids a sender makes anew for each delivery.
    pub unique: u128,
}

/// Everything inbound knows about one provider.
pub(crate) struct Spec {
    /// How its requests are verified.
    pub verify: Verifier,
    /// How a verified request is understood.
    pub extract: Extract,
    /// The headers its sender sends with a body.
    pub sign: Sign,
    /// Whether it names the event type in a header (`sign-event --event-type`).
    pub type_in_a_header: bool,
    /// [`Provider::redelivery_horizon_days`].
    pub redelivery_horizon_days: u32,
    /// [`Provider::known_event_types`].
    pub known_events: Option<&'static KnownEvents>,
    /// [`Provider::free_form_actions`].
    pub free_form_actions: &'static [&'static str],
    /// [`Provider::default_subject`].
    pub default_subject: Option<&'static str>,
}

/// A provider's known event types: a data file of one type per line, sorted, read once.
pub(crate) struct KnownEvents {
    text: &'static str,
    types: OnceLock<Vec<&'static str>>,
}

impl KnownEvents {
    /// The list in `text` (one type per line; blank lines are skipped).
    pub(crate) const fn new(text: &'static str) -> Self {
        Self {
            text,
            types: OnceLock::new(),
        }
    }

    /// The types, in file order.
    fn types(&'static self) -> &'static [&'static str] {
        self.types.get_or_init(|| {
            self.text
                .lines()
                .map(str::trim)
                .filter(|line| !line.is_empty())
                .collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_provider_is_found_by_its_name() {
        for provider in Provider::ALL {
            assert_eq!(Provider::from_name(provider.name()), Some(provider));
        }
    }

    #[test]
    fn known_event_lists_are_sorted_plain_route_keys_without_duplicates() {
        for provider in Provider::ALL {
            let Some(list) = provider.known_event_types() else {
                continue;
            };
            let name = provider.name();
            assert!(!list.is_empty(), "{name} is empty");
            for pair in list.windows(2) {
                assert!(
                    pair[0] < pair[1],
                    "{name}: {:?} must sort after {:?} (byte order, no duplicates)",
                    pair[1],
                    pair[0]
                );
            }
            for known in list {
                assert!(
                    !known.contains('*')
                        && !known.starts_with('.')
                        && !known.ends_with('.')
                        && known.bytes().all(|byte| byte.is_ascii_graphic()),
                    "{name}: {known:?}"
                );
            }
        }
    }
}
