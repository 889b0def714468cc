//! Slack: its signature, what its deliveries mean, and what inbound knows of it.
//!
//! Signature: `X-Slack-Signature: v0=<hex>`, HMAC-SHA256 of `"v0:{ts}:{body}"` where `ts` is
//! `X-Slack-Request-Timestamp`, which must be within tolerance of now ([`super::v0`]).

use std::borrow::Cow;

use serde::Deserialize;

use super::{KnownEvents, Signing, Spec, Verifier};
use crate::config::Integration;
use crate::event::subject::{self, Raw};
use crate::event::{
    Event, ExtractError, Extracted, malformed, out_of_scope, parse_fields, required_identifier,
};
use crate::headers::Headers;
use crate::keys::{EventId, SourceScope};
use crate::secret::Secret;
use crate::sender::SignError;
use crate::verify::v0::V0;
use crate::verify::{VerifyContext, VerifyError};

/// What inbound knows of Slack.
///
/// Redelivery horizon: Slack retries 3 times within minutes (immediately, after 1 and 5
/// minutes); 1 day leaves a margin.
pub(crate) static SPEC: Spec = Spec {
    verify: Verifier::Fixed(verify),
    extract,
    sign: signed_headers,
    type_in_a_header: false,
    redelivery_horizon_days: 1,
    known_events: Some(&KNOWN_EVENTS),
    free_form_actions: &[],
    default_subject: None,
};

/// The event types Slack sends: `known_events/slack.txt`, which lists the Events API types
/// of Slack's event reference (<https://docs.slack.dev/reference/events>), cross-checked
/// against the `SlackEvent` union of `@slack/types`
/// (<https://github.com/slackapi/node-slack-sdk>). The route key is the inner `event.type`,
/// so RTM-only types, the envelope types `url_verification` (answered by the ingress
/// itself) and `app_rate_limited` (it carries no inner event), and the subscription names
/// `message.channels`, `message.im`, … are not listed: those subscriptions deliver events
/// of type `message`.
static KNOWN_EVENTS: KnownEvents = KnownEvents::new(include_str!("known_events/slack.txt"));

const SLACK: V0 = V0 {
    signature: "x-slack-signature",
    timestamp: "x-slack-request-timestamp",
};

/// Verifies a Slack request.
pub(crate) fn verify(
    headers: &Headers<'_>,
    body: &[u8],
    context: VerifyContext<'_>,
) -> Result<(), VerifyError> {
    SLACK.verify(headers, body, context)
}

/// The `X-Slack-Signature` value Slack would send for `body` at `timestamp`.
pub fn sign(secret: &Secret, timestamp: i64, body: &[u8]) -> String {
    V0::sign(secret, timestamp, body)
}

/// The headers Slack sends with `body`.
fn signed_headers(signing: &Signing<'_>) -> Result<Vec<(String, String)>, SignError> {
    Ok(vec![
        (
            "X-Slack-Signature".into(),
            sign(signing.secret, signing.now, signing.body),
        ),
        ("X-Slack-Request-Timestamp".into(), signing.now.to_string()),
    ])
}

#[derive(Deserialize)]
struct SlackFields<'a> {
    #[serde(borrow, rename = "type")]
    envelope_type: Option<Cow<'a, str>>,
    #[serde(borrow)]
    challenge: Option<Cow<'a, str>>,
    #[serde(borrow)]
    event_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    team_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    api_app_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    event: Option<SlackInnerEvent<'a>>,
    /// "The epoch timestamp in seconds indicating when this event was dispatched"
    /// (<https://api.slack.com/types/event>).
    #[serde(borrow)]
    event_time: Raw<'a>,
}

#[derive(Deserialize)]
struct SlackInnerEvent<'a> {
    #[serde(borrow, rename = "type")]
    event_type: Option<Cow<'a, str>>,
}

/// The envelope type of Slack's rate-limit notice
/// (<https://docs.slack.dev/reference/events/app_rate_limited>).
const SLACK_APP_RATE_LIMITED: &str = "app_rate_limited";

/// Slack's Events API: the envelope's `event_id`, the inner `event.type`, scoped by team
/// and app. `url_verification` is answered with its challenge; `app_rate_limited` (no
/// event id, no inner event: Slack is dropping the app's events for the team) is
/// acknowledged and counted once its team and app are the integration's, since refusing
/// it counts against the app too.
pub(crate) fn extract<'body>(
    integration: &Integration,
    _headers: &Headers<'_>,
    payload_json: &'body str,
) -> Result<Extracted<'body>, ExtractError> {
    let fields: SlackFields = parse_fields(payload_json)?;
    match fields.envelope_type.as_deref() {
        Some("url_verification") => {
            // It carries no team, so no scope check applies (docs/contract.md).
            let challenge = fields.challenge.ok_or_else(|| malformed("no challenge"))?;
            return Ok(Extracted::UrlVerification {
                challenge: challenge.into_owned(),
            });
        }
        Some(SLACK_APP_RATE_LIMITED) => {
            // The notice names the team and app it is about: one the integration does not
            // serve is out of scope, never counted as its own.
            let team_id = required_identifier(fields.team_id, "team_id")?;
            if let Some(out) = out_of_scope(
                [
                    (&integration.expect.team_id, Some(&team_id), "team"),
                    (
                        &integration.expect.api_app_id,
                        fields.api_app_id.as_deref(),
                        "app",
                    ),
                ],
                Some(SLACK_APP_RATE_LIMITED),
            ) {
                return Ok(Extracted::OutOfScope(out));
            }
            return Ok(Extracted::SlackRateLimited { team_id });
        }
        _ => {}
    }
    let event_at = subject::unix_seconds(fields.event_time);
    let event_id = required_identifier(fields.event_id, "event id")?;
    let event_type = required_identifier(
        fields.event.and_then(|event| event.event_type),
        "event type",
    )?;
    let team_id = required_identifier(fields.team_id, "team_id")?;
    let api_app_id = required_identifier(fields.api_app_id, "api_app_id")?;
    if let Some(out) = out_of_scope(
        [
            (&integration.expect.team_id, Some(&team_id), "team"),
            (&integration.expect.api_app_id, Some(&api_app_id), "app"),
        ],
        Some(&event_type),
    ) {
        return Ok(Extracted::OutOfScope(out));
    }
    Ok(Extracted::Event(Event {
        event_id: EventId::new(event_id),
        route_keys: vec![event_type.clone()],
        event_type,
        source_scope: SourceScope::from_parts([integration.id.as_str(), &team_id, &api_app_id]),
        delivery: None,
        // Slack's events share no object field (a message names a channel, a reaction an
        // item): a route names its subject with pointers.
        subject: None,
        event_at,
        payload_json: Cow::Borrowed(payload_json),
    }))
}
