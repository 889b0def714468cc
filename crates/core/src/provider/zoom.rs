//! Zoom: its signature, what its deliveries mean, and what inbound knows of it.
//!
//! Signature: `x-zm-signature: v0=<hex>` with `x-zm-request-timestamp`, HMAC-SHA256 of
//! `"v0:{timestamp}:{body}"` keyed by the app's secret token. The endpoint validation
//! (`endpoint.url_validation`, signed like any event) is answered with the plain token and
//! its HMAC under the same secret ([`encrypted_token`]).

use std::borrow::Cow;

use serde::Deserialize;

use super::{KnownEvents, Signing, Spec, Verifier};
use crate::config::Integration;
use crate::event::subject::{self, Lenient, Raw};
use crate::event::{
    Event, ExtractError, Extracted, MAX_IDENTIFIER_LEN, malformed, out_of_scope, parse_fields,
    required_identifier,
};
use crate::headers::Headers;
use crate::keys::{EventId, SourceScope};
use crate::secret::Secret;
use crate::sender::SignError;
use crate::verify::v0::V0;
use crate::verify::{VerifyContext, VerifyError, mac};

/// What inbound knows of Zoom.
///
/// Redelivery horizon: Zoom retries 3 times: 5 minutes after the first attempt, then 20 and
/// 60 minutes after each retry, about 85 minutes in all
/// (<https://developers.zoom.us/blog/webhook-delays>); 1 day leaves a margin.
pub(crate) static SPEC: Spec = Spec {
    verify: Verifier::Fixed(verify),
    extract,
    sign: signed_headers,
    type_in_a_header: false,
    redelivery_horizon_days: 1,
    known_events: Some(&KNOWN_EVENTS),
    free_form_actions: &[],
    default_subject: Some("`payload.object.id`"),
};

/// The event types Zoom sends: `known_events/zoom.txt`, which lists the `event` names of
/// the webhook events typed in Zoom's `@zoom/rivet` 0.3.0
/// (<https://github.com/zoom/rivet-javascript>): Meetings (with webinars and cloud
/// recordings), Phone, Team Chat, Chatbot, Users, Accounts, Marketplace and Video SDK,
/// spot-checked against Zoom's event reference
/// (<https://developers.zoom.us/docs/api/webhooks/>). `endpoint.url_validation` is not
/// listed: the ingress answers it itself and never routes it. Products Rivet does not cover
/// (Rooms, Contact Center, Zoom Events, Whiteboard, RTMS, …) send events that are not
/// listed here either: a route for one gets a warning, and routes as configured all the
/// same.
static KNOWN_EVENTS: KnownEvents = KnownEvents::new(include_str!("known_events/zoom.txt"));

const ZOOM: V0 = V0 {
    signature: "x-zm-signature",
    timestamp: "x-zm-request-timestamp",
};

/// Verifies a Zoom delivery (the `v0` scheme, under Zoom's header names).
pub(crate) fn verify(
    headers: &Headers<'_>,
    body: &[u8],
    context: VerifyContext<'_>,
) -> Result<(), VerifyError> {
    ZOOM.verify(headers, body, context)
}

/// The `x-zm-signature` value Zoom would send for `body` at `timestamp`.
pub fn sign(secret: &Secret, timestamp: i64, body: &[u8]) -> String {
    V0::sign(secret, timestamp, body)
}

/// The `encryptedToken` of Zoom's endpoint validation: HMAC-SHA256 hex of the plain token.
pub fn encrypted_token(secret: &Secret, plain_token: &str) -> String {
    hex::encode(mac::hmac_sha256(secret.expose(), &[plain_token.as_bytes()]))
}

/// The headers Zoom sends with `body`.
fn signed_headers(signing: &Signing<'_>) -> Result<Vec<(String, String)>, SignError> {
    Ok(vec![
        (
            "x-zm-signature".into(),
            sign(signing.secret, signing.now, signing.body),
        ),
        ("x-zm-request-timestamp".into(), signing.now.to_string()),
    ])
}

#[derive(Deserialize)]
struct ZoomFields<'a> {
    #[serde(borrow)]
    event: Option<Cow<'a, str>>,
    #[serde(borrow)]
    payload: Option<ZoomPayload<'a>>,
    /// "A timestamp when the event occurred", int64 (developers.zoom.us, meeting
    /// events); milliseconds since the epoch in Zoom's samples (zoom/webhook-sample).
    #[serde(borrow)]
    event_ts: Raw<'a>,
}

#[derive(Deserialize)]
struct ZoomPayload<'a> {
    #[serde(borrow)]
    account_id: Option<Cow<'a, str>>,
    #[serde(borrow, rename = "plainToken")]
    plain_token: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    object: Lenient<ZoomObject<'a>>,
}

/// The meeting, webinar, user or recording an event is about: its `id` (a number on some
/// events, a string on others) is the subject.
#[derive(Deserialize)]
struct ZoomObject<'a> {
    #[serde(borrow)]
    id: Raw<'a>,
}

/// Zoom: the type is `event`; Zoom sends no event id, so the receipt key is the SHA-256 of
/// the signed body (its `event_ts` and payload make it the event's, and a retry sends the
/// same body); the scope is `payload.account_id` (`-` when absent).
pub(crate) fn extract<'body>(
    integration: &Integration,
    _headers: &Headers<'_>,
    payload_json: &'body str,
) -> Result<Extracted<'body>, ExtractError> {
    let fields: ZoomFields = parse_fields(payload_json)?;
    let event_type = required_identifier(fields.event, "event")?;
    let payload = fields.payload;
    if event_type == "endpoint.url_validation" {
        // It carries no account, so no scope check applies (as Slack's url_verification).
        let plain_token = payload.and_then(|payload| payload.plain_token);
        return Ok(Extracted::ZoomUrlValidation {
            plain_token: required_identifier(plain_token, "plainToken")?,
        });
    }
    let (account_id, object) = payload.map_or((None, None), |payload| {
        (payload.account_id, payload.object.0)
    });
    let subject = object.and_then(|object| subject::bounded(subject::text(object.id)));
    let account_id = account_id.as_deref().filter(|id| !id.is_empty());
    if account_id.is_some_and(|id| id.len() > MAX_IDENTIFIER_LEN) {
        return Err(malformed(format!(
            "payload.account_id is longer than {MAX_IDENTIFIER_LEN} bytes"
        )));
    }
    if let Some(out) = out_of_scope(
        [(&integration.expect.account_id, account_id, "account")],
        Some(&event_type),
    ) {
        return Ok(Extracted::OutOfScope(out));
    }
    Ok(Extracted::Event(Event {
        event_id: EventId::new(hex::encode(crate::keys::content_digest(
            payload_json.as_bytes(),
        ))),
        route_keys: vec![event_type.clone()],
        event_type,
        source_scope: SourceScope::from_parts([integration.id.as_str(), account_id.unwrap_or("-")]),
        delivery: None,
        subject,
        event_at: subject::unix_millis(fields.event_ts),
        payload_json: Cow::Borrowed(payload_json),
    }))
}
