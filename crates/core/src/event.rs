//! After a request verifies: validate its shape, extract the event id and type, derive the
//! source scope from verified data, check it against `expect`, and find the route. What a
//! provider's fields mean is in its home ([`crate::provider`]); this module holds what
//! they share: the storability check, GitHub's form decoding, the bounded identifiers and
//! `expect` checks, and routing.
//!
//! Shape problems are [`ExtractError::Malformed`] (400). A verified event from another
//! mode, account, installation, team or shop than the integration's is
//! [`Extracted::OutOfScope`]: acknowledged 200 `ignored` and not stored, never refused —
//! a sender retries a refusal and counts it towards disabling the endpoint, which would
//! also stop the events we want (docs/contract.md, "Acknowledged without being stored").
//! Payloads must meet the storability contract ([`crate::payload`]): PostgreSQL's `jsonb`
//! stores them and the worker reads them back, so a 2xx never acknowledges an event that
//! cannot be processed.

use std::borrow::Cow;

use serde::Deserialize;

use crate::config::{CATCH_ALL, GithubContentType, Integration, PATTERN_SUFFIX, Route};
use crate::headers::Headers;
use crate::keys::{EventId, SourceScope};
use crate::payload;
pub use crate::payload::MAX_JSON_DEPTH;
use crate::verify::Provider;

mod form;
pub(crate) mod pointer;
pub mod subject;

/// The longest event id or type we store; longer ones are malformed, not truncated.
pub const MAX_IDENTIFIER_LEN: usize = 255;

/// A verified delivery, understood.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Extracted<'body> {
    /// Verified, but of another mode, account, installation, team, shop or scope than the
    /// integration takes: acknowledged, not stored.
    OutOfScope(OutOfScope),
    /// Verified, and of a type no route takes, found before reading the fields only a
    /// routed event needs (configured senders: GitLab's group events have no project).
    Unrouted {
        /// The event type.
        event_type: String,
    },
    /// Slack's `app_rate_limited`: Slack is dropping this app's events from the team
    /// (more than 30,000 an hour). Acknowledged and counted; it carries no event.
    SlackRateLimited {
        /// `team_id`.
        team_id: String,
    },
    /// Slack's endpoint check: answer with the challenge, store nothing.
    UrlVerification {
        /// The value to echo.
        challenge: String,
    },
    /// Zoom's endpoint validation: answer with the plain token and its HMAC under the
    /// secret that signed the request, store nothing.
    ZoomUrlValidation {
        /// `payload.plainToken`.
        plain_token: String,
    },
    /// An ordinary event.
    Event(Event<'body>),
}

/// One event, ready to route and store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event<'body> {
    /// The provider's id for the event: the second half of the receipt key.
    pub event_id: EventId,
    /// The event type as stored (GitHub: `event.action` when there is an action).
    pub event_type: String,
    /// Route keys to try, most specific first (GitHub: `event.action`, then `event`).
    pub route_keys: Vec<String>,
    /// The first half of the receipt key.
    pub source_scope: SourceScope,
    /// The provider's facts about this delivery that handlers and sinks may need, as a
    /// JSON object (`receipts.delivery`): Shopify's triggered-at, webhook id, event id and
    /// API version, GitHub's hook id and target, Stripe's `api_version`. `None` when the
    /// provider sends none.
    pub delivery: Option<String>,
    /// The business object the event is about, by its provider's default
    /// ([`subject`]); a route's own subject pointers replace it ([`subject_for`]).
    pub subject: Option<String>,
    /// The provider's own time of the event, when it sends one ([`subject`]).
    pub event_at: Option<chrono::DateTime<chrono::Utc>>,
    /// The payload as UTF-8 JSON text, checked against the storability contract: the
    /// body itself, or the JSON a form-encoded body carries (GitHub's default).
    pub payload_json: Cow<'body, str>,
}

/// A verified event the integration does not take, and what it said of its scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutOfScope {
    /// Which part of the scope differs: `mode`, `account`, `installation`,
    /// `organization`, `repository`, `installation_target`, `team`, `app`, `shop` or
    /// `scope` (the `reason` label of `inbound_ingress_out_of_scope_total`).
    pub reason: &'static str,
    /// What the event said, e.g. `acct_9` or `test` (logged; `-` when it said nothing).
    pub found: String,
    /// The event type, when the event has one.
    pub event_type: Option<String>,
}

/// Why a verified request is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExtractError {
    /// Not parseable, no event id or type, or a shape we do not support (400).
    #[error("malformed: {0}")]
    Malformed(Cow<'static, str>),
}

pub(crate) fn malformed(reason: impl Into<Cow<'static, str>>) -> ExtractError {
    ExtractError::Malformed(reason.into())
}

/// Reads a verified request's body as `integration`'s sender sends it, then hands the JSON
/// to `understand` (its provider's reading, `crate::provider::extract`). The body of a
/// GitHub integration whose hook sends forms (`content_type = "form"`, GitHub's default)
/// is read from its one `payload` field; every other body is the JSON itself; either must
/// be storable. The delivery's `Content-Type` is not signed, so it never decides how the
/// signed bytes are read (the ingress refuses a delivery declared the other way).
pub(crate) fn read_delivery<'body>(
    integration: &Integration,
    headers: &Headers<'_>,
    body: &'body [u8],
    understand: for<'json> fn(
        &Integration,
        &Headers<'_>,
        &'json str,
    ) -> Result<Extracted<'json>, ExtractError>,
) -> Result<Extracted<'body>, ExtractError> {
    if reads_a_form(integration) {
        let json = form::payload_field(body).map_err(malformed)?;
        payload::check_storable(json.as_bytes())
            .map_err(|unstorable| malformed(unstorable.to_string()))?;
        // The event's payload is the decoded text itself, moved in, never copied again.
        let mut extracted = understand(integration, headers, &json)?.detached();
        if let Extracted::Event(event) = &mut extracted {
            event.payload_json = Cow::Owned(json);
        }
        return Ok(extracted);
    }
    let payload_json =
        payload::check_storable(body).map_err(|unstorable| malformed(unstorable.to_string()))?;
    understand(integration, headers, payload_json)
}

/// Whether `read_delivery` reads this integration's bodies as GitHub's form encoding (its
/// `payload` field is the event, at most as long as the body).
pub fn reads_a_form(integration: &Integration) -> bool {
    integration.github_content_type == Some(GithubContentType::Form)
}

/// Why a verified delivery's declared `Content-Type` (`None`: no header) is not the
/// encoding `integration` reads, if it is not: a GitHub form hook declares
/// `application/x-www-form-urlencoded`; every other integration (a GitHub JSON hook too)
/// declares `application/json`, a `+json` type or nothing. Parameters (`; charset=utf-8`)
/// and case do not matter.
pub fn undeclared_encoding(integration: &Integration, declared: Option<&str>) -> Option<String> {
    let media_type = declared.map(|value| {
        value
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase()
    });
    let form = media_type.as_deref() == Some(form::FORM);
    if reads_a_form(integration) {
        return (!form).then(|| {
            format!(
                "content type {:?} is not the form this hook sends (content_type = \"form\")",
                media_type.as_deref().unwrap_or("none")
            )
        });
    }
    match media_type {
        Some(media_type) if media_type != "application/json" && !media_type.ends_with("+json") => {
            Some(if form && integration.provider == Provider::Github {
                format!(
                    "content type {media_type:?} is a form, and this hook sends JSON (content_type = \"json\")"
                )
            } else {
                format!("content type {media_type:?} is not JSON")
            })
        }
        _ => None,
    }
}

impl Extracted<'_> {
    /// The same delivery without its payload's borrow: an event's payload text is left
    /// empty, for the caller to put the owned text in.
    fn detached(self) -> Extracted<'static> {
        match self {
            Self::Event(event) => Extracted::Event(Event {
                payload_json: Cow::Borrowed(""),
                ..event
            }),
            Self::OutOfScope(out) => Extracted::OutOfScope(out),
            Self::Unrouted { event_type } => Extracted::Unrouted { event_type },
            Self::SlackRateLimited { team_id } => Extracted::SlackRateLimited { team_id },
            Self::UrlVerification { challenge } => Extracted::UrlVerification { challenge },
            Self::ZoomUrlValidation { plain_token } => Extracted::ZoomUrlValidation { plain_token },
        }
    }
}

/// The route for `event` and the key it is configured under. The event's keys are tried
/// most specific first (GitHub: `event.action`, then `event`), and for each key an exact
/// route, else the longest `prefix.*` pattern it starts with; `*` comes last. So
/// `pull_request.*` catches every action even beside a `pull_request` route, which then
/// takes the deliveries without an action. `None`: not routed, so ignored.
pub fn find_route<'i>(
    integration: &'i Integration,
    event: &Event<'_>,
) -> Option<(&'i str, &'i Route)> {
    route_for_keys(integration, &event.route_keys)
}

/// The route an event of `event_type` takes (as its route key), if any: exact, then the
/// longest pattern, then the catch-all.
pub fn route_for_type<'i>(
    integration: &'i Integration,
    event_type: &str,
) -> Option<(&'i str, &'i Route)> {
    route_for_keys(integration, &[event_type.to_owned()])
}

/// [`find_route`] for an event's route keys alone.
pub(crate) fn route_for_keys<'i>(
    integration: &'i Integration,
    route_keys: &[String],
) -> Option<(&'i str, &'i Route)> {
    let routes = &integration.routes;
    let longest_pattern = |event_key: &str| {
        routes
            .iter()
            .filter(|(key, _)| {
                key.strip_suffix('*')
                    .filter(|_| key.ends_with(PATTERN_SUFFIX))
                    .is_some_and(|prefix| event_key.starts_with(prefix))
            })
            .max_by_key(|(key, _)| key.len())
    };
    route_keys
        .iter()
        .find_map(|key| routes.get_key_value(key).or_else(|| longest_pattern(key)))
        .or_else(|| routes.get_key_value(CATCH_ALL))
        .map(|(key, route)| (key.as_str(), route))
}

/// The subject `event` is stored under on `route`: the first of the route's subject
/// pointers present in `payload_json` (the payload as stored: a form's read-out JSON;
/// one streaming pass, only when the route names pointers), else the provider's default
/// the event was read with.
pub fn subject_for(route: &Route, event: &Event<'_>, payload_json: &str) -> Option<String> {
    if route.subject.is_empty() {
        event.subject.clone()
    } else {
        subject::subject_at(payload_json, &route.subject)
    }
}

/// Parses the fields we need; duplicate keys among them are refused by serde.
pub(crate) fn parse_fields<'a, T: Deserialize<'a>>(text: &'a str) -> Result<T, ExtractError> {
    serde_json::from_str(text).map_err(|error| {
        if error.to_string().starts_with("duplicate field") {
            malformed("a field appears twice")
        } else {
            malformed("a field has the wrong type")
        }
    })
}

pub(crate) fn required_identifier(
    value: Option<Cow<'_, str>>,
    what: &'static str,
) -> Result<String, ExtractError> {
    match value {
        Some(value) if !value.is_empty() && value.len() <= MAX_IDENTIFIER_LEN => {
            Ok(value.into_owned())
        }
        Some(value) if !value.is_empty() => Err(malformed(format!(
            "{what} is longer than {MAX_IDENTIFIER_LEN} bytes"
        ))),
        _ => Err(malformed(format!("no {what}"))),
    }
}

pub(crate) fn header_identifier(
    headers: &Headers<'_>,
    name: &'static str,
    what: &'static str,
) -> Result<String, ExtractError> {
    required_identifier(headers.get(name).map(Cow::Borrowed), what)
}

/// The first of `checks` — `(expected, found, reason)` — whose `expect` value the event
/// does not have.
pub(crate) fn out_of_scope<const N: usize>(
    checks: [(&Option<String>, Option<&str>, &'static str); N],
    event_type: Option<&str>,
) -> Option<OutOfScope> {
    checks
        .into_iter()
        .find(|(expected, found, _)| {
            expected
                .as_deref()
                .is_some_and(|expected| Some(expected) != *found)
        })
        .map(|(_, found, reason)| OutOfScope {
            reason,
            found: found.unwrap_or("-").to_owned(),
            event_type: event_type.map(str::to_owned),
        })
}

/// `pairs` with a value, as the JSON object `receipts.delivery` keeps; `None` when none
/// has one. Each value is an identifier the provider sent, bounded like one.
pub(crate) fn delivery_facts(
    pairs: &[(&str, Option<&str>)],
) -> Result<Option<String>, ExtractError> {
    let mut facts = serde_json::Map::new();
    for (name, value) in pairs {
        let Some(value) = value.filter(|value| !value.is_empty()) else {
            continue;
        };
        if value.len() > MAX_IDENTIFIER_LEN {
            return Err(malformed(format!(
                "{name} is longer than {MAX_IDENTIFIER_LEN} bytes"
            )));
        }
        facts.insert((*name).to_owned(), serde_json::Value::from(value));
    }
    Ok((!facts.is_empty()).then(|| serde_json::Value::Object(facts).to_string()))
}
