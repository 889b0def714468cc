//! Paddle: its signature, what its deliveries mean, and what inbound knows of it.
//!
//! Signature: `Paddle-Signature: ts=<unix>;h1=<hex>[;h1=<hex>…]`, HMAC-SHA256 of
//! `"{ts}:{body}"` keyed by the notification destination's secret key. While a secret
//! rotates Paddle sends one `h1` per active key: any may match.

use std::borrow::Cow;

use serde::Deserialize;

use super::{KnownEvents, Signing, Spec, Verifier};
use crate::config::Integration;
use crate::event::subject::{self, Lenient, Raw};
use crate::event::{Event, ExtractError, Extracted, parse_fields, required_identifier};
use crate::headers::Headers;
use crate::keys::{EventId, SourceScope};
use crate::secret::Secret;
use crate::sender::SignError;
use crate::verify::listed::Listed;
use crate::verify::{VerifyContext, VerifyError};

/// What inbound knows of Paddle.
///
/// Redelivery horizon: Paddle retries for 3 days (live), and a notification can be replayed
/// through its API with the same `event_id` for 90 days ("Notifications older than 90 days
/// aren't retained":
/// <https://developer.paddle.com/api-reference/notifications/replay-notification>).
pub(crate) static SPEC: Spec = Spec {
    verify: Verifier::Fixed(verify),
    extract,
    sign: signed_headers,
    type_in_a_header: false,
    redelivery_horizon_days: 90,
    known_events: Some(&KNOWN_EVENTS),
    free_form_actions: &[],
    default_subject: Some("`data.id`"),
};

/// The event types Paddle sends: `known_events/paddle.txt`, which lists the Paddle Billing
/// event types (`event_type`), the `EventName` enum of `@paddle/paddle-node-sdk` 3.8.0
/// (<https://github.com/PaddleHQ/paddle-node-sdk>), cross-checked against the `event_type`
/// values of Paddle's webhook reference (<https://developer.paddle.com/webhooks>).
static KNOWN_EVENTS: KnownEvents = KnownEvents::new(include_str!("known_events/paddle.txt"));

const PADDLE: Listed = Listed {
    header: "paddle-signature",
    separator: ';',
    timestamp: "ts",
    signature: "h1",
    joiner: b":",
};

/// Verifies a Paddle Billing delivery.
pub(crate) fn verify(
    headers: &Headers<'_>,
    body: &[u8],
    context: VerifyContext<'_>,
) -> Result<(), VerifyError> {
    PADDLE.verify(headers, body, context)
}

/// The `Paddle-Signature` value Paddle would send for `body` at `timestamp`.
pub fn sign(secret: &Secret, timestamp: i64, body: &[u8]) -> String {
    PADDLE.sign(secret, timestamp, body)
}

/// The headers Paddle sends with `body`.
fn signed_headers(signing: &Signing<'_>) -> Result<Vec<(String, String)>, SignError> {
    Ok(vec![(
        "Paddle-Signature".into(),
        sign(signing.secret, signing.now, signing.body),
    )])
}

#[derive(Deserialize)]
struct PaddleFields<'a> {
    #[serde(borrow)]
    event_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    event_type: Option<Cow<'a, str>>,
    /// "RFC 3339 datetime string of when this event occurred"
    /// (<https://developer.paddle.com/api-reference/events/list-events>).
    #[serde(borrow)]
    occurred_at: Raw<'a>,
    #[serde(borrow, default)]
    data: Lenient<PaddleEntity<'a>>,
}

/// The entity an event is about: its `id` (`sub_…`, `txn_…`, `ctm_…`) is the subject.
#[derive(Deserialize)]
struct PaddleEntity<'a> {
    #[serde(borrow)]
    id: Raw<'a>,
}

/// Paddle Billing: the event id and type from the signed body. `event_id` is the event's
/// (each destination's notification of it, and every retry, carries the same); the body
/// names no seller, so the scope is the integration.
pub(crate) fn extract<'body>(
    integration: &Integration,
    _headers: &Headers<'_>,
    payload_json: &'body str,
) -> Result<Extracted<'body>, ExtractError> {
    let fields: PaddleFields = parse_fields(payload_json)?;
    let event_id = required_identifier(fields.event_id, "event_id")?;
    let event_type = required_identifier(fields.event_type, "event_type")?;
    Ok(Extracted::Event(Event {
        event_id: EventId::new(event_id),
        route_keys: vec![event_type.clone()],
        event_type,
        source_scope: SourceScope::from_parts([integration.id.as_str()]),
        delivery: None,
        subject: fields
            .data
            .0
            .and_then(|entity| subject::bounded(subject::text(entity.id))),
        event_at: subject::rfc3339_field(fields.occurred_at),
        payload_json: Cow::Borrowed(payload_json),
    }))
}
