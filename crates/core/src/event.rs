//! After a request verifies: validate its shape, extract the event id and type, derive the
//! source scope from verified data, check it against `expect`, and find the route.
//!
//! Shape problems are [`ExtractError::Malformed`] (400); a verified event from the wrong
//! account, installation or team is [`ExtractError::Forbidden`] (403). Payloads must meet
//! the storability contract ([`crate::payload`]): PostgreSQL's `jsonb` stores them and the
//! worker reads them back, so a 2xx never acknowledges an event that cannot be processed.

use std::borrow::Cow;

use serde::Deserialize;

use crate::config::{CATCH_ALL, FieldSource, Integration, PATTERN_SUFFIX, Route};
use crate::headers::Headers;
use crate::keys::{EventId, SourceScope};
use crate::payload;
pub use crate::payload::MAX_JSON_DEPTH;
use crate::verify::Provider;

mod pointer;

/// The longest event id or type we store; longer ones are malformed, not truncated.
pub const MAX_IDENTIFIER_LEN: usize = 255;

/// A verified delivery, understood.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Extracted<'body> {
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
    /// The body as UTF-8 JSON text, checked against the storability contract.
    pub payload_json: &'body str,
}

/// Why a verified request is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExtractError {
    /// Not parseable, no event id or type, or a shape we do not support (400).
    #[error("malformed: {0}")]
    Malformed(Cow<'static, str>),
    /// Authentic, but from an account/installation/team this integration does not expect (403).
    #[error("forbidden: {0}")]
    Forbidden(&'static str),
}

fn malformed(reason: impl Into<Cow<'static, str>>) -> ExtractError {
    ExtractError::Malformed(reason.into())
}

/// Understands one verified request for `integration`.
pub fn extract<'body>(
    integration: &Integration,
    headers: &Headers<'_>,
    body: &'body [u8],
) -> Result<Extracted<'body>, ExtractError> {
    let payload_json =
        payload::check_storable(body).map_err(|unstorable| malformed(unstorable.to_string()))?;
    match integration.provider {
        Provider::Stripe => extract_stripe(integration, payload_json),
        Provider::Github => extract_github(integration, headers, payload_json),
        Provider::Slack => extract_slack(integration, payload_json),
        Provider::Standard => extract_standard(integration, headers, payload_json),
        Provider::Shopify => extract_shopify(integration, headers, payload_json),
        Provider::Paddle => extract_paddle(integration, payload_json),
        Provider::Zoom => extract_zoom(integration, payload_json),
        Provider::Hmac | Provider::Token => extract_configured(integration, headers, payload_json),
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
    event
        .route_keys
        .iter()
        .find_map(|key| routes.get_key_value(key).or_else(|| longest_pattern(key)))
        .or_else(|| routes.get_key_value(CATCH_ALL))
        .map(|(key, route)| (key.as_str(), route))
}

/// Parses the fields we need; duplicate keys among them are refused by serde.
fn parse_fields<'a, T: Deserialize<'a>>(text: &'a str) -> Result<T, ExtractError> {
    serde_json::from_str(text).map_err(|error| {
        if error.to_string().starts_with("duplicate field") {
            malformed("a field appears twice")
        } else {
            malformed("a field has the wrong type")
        }
    })
}

fn required_identifier(
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

fn header_identifier(
    headers: &Headers<'_>,
    name: &'static str,
    what: &'static str,
) -> Result<String, ExtractError> {
    required_identifier(headers.get(name).map(Cow::Borrowed), what)
}

fn expect_equal(
    expected: &Option<String>,
    actual: Option<&str>,
    reason: &'static str,
) -> Result<(), ExtractError> {
    match expected {
        Some(expected) if Some(expected.as_str()) != actual => Err(ExtractError::Forbidden(reason)),
        _ => Ok(()),
    }
}

#[derive(Deserialize)]
struct StripeFields<'a> {
    #[serde(borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, rename = "type")]
    event_type: Option<Cow<'a, str>>,
    #[serde(borrow)]
    account: Option<Cow<'a, str>>,
    livemode: Option<bool>,
}

fn extract_stripe<'body>(
    integration: &Integration,
    payload_json: &'body str,
) -> Result<Extracted<'body>, ExtractError> {
    let fields: StripeFields = parse_fields(payload_json)?;
    let event_id = required_identifier(fields.id, "event id")?;
    let event_type = required_identifier(fields.event_type, "event type")?;
    let livemode = fields.livemode.ok_or_else(|| malformed("no livemode"))?;
    let account = fields
        .account
        .map(|account| required_identifier(Some(account), "account"))
        .transpose()?;
    let account = account.as_deref();
    expect_equal(&integration.expect.account, account, "unexpected account")?;
    if integration
        .expect
        .livemode
        .is_some_and(|expected| expected != livemode)
    {
        return Err(ExtractError::Forbidden("unexpected livemode"));
    }
    let mode = if livemode { "live" } else { "test" };
    Ok(Extracted::Event(Event {
        event_id: EventId::new(event_id),
        route_keys: vec![event_type.clone()],
        event_type,
        source_scope: SourceScope::from_parts([
            integration.id.as_str(),
            account.unwrap_or("platform"),
            mode,
        ]),
        payload_json,
    }))
}

#[derive(Deserialize)]
struct GithubFields<'a> {
    #[serde(borrow)]
    action: Option<Cow<'a, str>>,
    installation: Option<GithubAccount>,
    organization: Option<GithubAccount>,
    repository: Option<GithubAccount>,
}

/// The signed id of an installation, organization or repository.
#[derive(Deserialize)]
struct GithubAccount {
    id: Option<u64>,
}

fn account_id(account: Option<GithubAccount>) -> Option<String> {
    account?.id.map(|id| id.to_string())
}

/// GitHub signs only the body. The delivery id (receipt key) and the event name (route)
/// exist only as headers and are bounded like every identifier; the scope and the
/// `expect` checks come from the signed body's `installation`, `organization` and
/// `repository` ids. `X-GitHub-Hook-Installation-Target-ID` is read only for the
/// (unsigned, weaker) `expect.installation_target_id`.
fn extract_github<'body>(
    integration: &Integration,
    headers: &Headers<'_>,
    payload_json: &'body str,
) -> Result<Extracted<'body>, ExtractError> {
    let event_id = header_identifier(headers, "x-github-delivery", "X-GitHub-Delivery")?;
    let event_name = header_identifier(headers, "x-github-event", "X-GitHub-Event")?;
    let fields: GithubFields = parse_fields(payload_json)?;
    let target = headers
        .get("x-github-hook-installation-target-id")
        .filter(|target| !target.is_empty());
    if target.is_some_and(|target| target.len() > MAX_IDENTIFIER_LEN) {
        return Err(malformed(format!(
            "X-GitHub-Hook-Installation-Target-ID is longer than {MAX_IDENTIFIER_LEN} bytes"
        )));
    }
    let installation = account_id(fields.installation);
    let organization = account_id(fields.organization);
    let repository = account_id(fields.repository);
    let expect = &integration.expect;
    expect_equal(
        &expect.installation_id,
        installation.as_deref(),
        "unexpected installation",
    )?;
    expect_equal(
        &expect.organization_id,
        organization.as_deref(),
        "unexpected organization",
    )?;
    expect_equal(
        &expect.repository_id,
        repository.as_deref(),
        "unexpected repository",
    )?;
    expect_equal(
        &expect.installation_target_id,
        target,
        "unexpected installation target",
    )?;
    // The most encompassing signed account: an App installation, else the organization,
    // else the repository (a repository hook outside any organization).
    let account = installation
        .map(|id| format!("installation:{id}"))
        .or_else(|| organization.map(|id| format!("organization:{id}")))
        .or_else(|| repository.map(|id| format!("repository:{id}")));
    let mut route_keys = Vec::with_capacity(2);
    if let Some(action) = fields.action.filter(|action| !action.is_empty()) {
        route_keys.push(format!("{event_name}.{action}"));
    }
    route_keys.push(event_name);
    let event_type = route_keys[0].clone();
    if event_type.len() > MAX_IDENTIFIER_LEN {
        return Err(malformed("event type is too long"));
    }
    Ok(Extracted::Event(Event {
        event_id: EventId::new(event_id),
        event_type,
        route_keys,
        source_scope: SourceScope::from_parts([
            integration.id.as_str(),
            account.as_deref().unwrap_or("-"),
        ]),
        payload_json,
    }))
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
}

#[derive(Deserialize)]
struct SlackInnerEvent<'a> {
    #[serde(borrow, rename = "type")]
    event_type: Option<Cow<'a, str>>,
}

fn extract_slack<'body>(
    integration: &Integration,
    payload_json: &'body str,
) -> Result<Extracted<'body>, ExtractError> {
    let fields: SlackFields = parse_fields(payload_json)?;
    if fields.envelope_type.as_deref() == Some("url_verification") {
        // It carries no team, so no scope check applies (docs/contract.md).
        let challenge = fields.challenge.ok_or_else(|| malformed("no challenge"))?;
        return Ok(Extracted::UrlVerification {
            challenge: challenge.into_owned(),
        });
    }
    let event_id = required_identifier(fields.event_id, "event id")?;
    let event_type = required_identifier(
        fields.event.and_then(|event| event.event_type),
        "event type",
    )?;
    let team_id = required_identifier(fields.team_id, "team_id")?;
    let api_app_id = required_identifier(fields.api_app_id, "api_app_id")?;
    expect_equal(
        &integration.expect.team_id,
        Some(&team_id),
        "unexpected team",
    )?;
    expect_equal(
        &integration.expect.api_app_id,
        Some(&api_app_id),
        "unexpected app",
    )?;
    Ok(Extracted::Event(Event {
        event_id: EventId::new(event_id),
        route_keys: vec![event_type.clone()],
        event_type,
        source_scope: SourceScope::from_parts([integration.id.as_str(), &team_id, &api_app_id]),
        payload_json,
    }))
}

#[derive(Deserialize)]
struct StandardFields<'a> {
    #[serde(borrow, rename = "type")]
    event_type: Option<Cow<'a, str>>,
}

fn extract_standard<'body>(
    integration: &Integration,
    headers: &Headers<'_>,
    payload_json: &'body str,
) -> Result<Extracted<'body>, ExtractError> {
    let event_id = required_identifier(
        headers
            .get_any(&["webhook-id", "svix-id"])
            .map(Cow::Borrowed),
        "event id",
    )?;
    let fields: StandardFields = parse_fields(payload_json)?;
    let event_type = required_identifier(fields.event_type, "event type")?;
    Ok(Extracted::Event(Event {
        event_id: EventId::new(event_id),
        route_keys: vec![event_type.clone()],
        event_type,
        source_scope: SourceScope::from_parts([integration.id.as_str()]),
        payload_json,
    }))
}

/// Shopify: every identifier travels in headers beside the signed body. The event id is
/// `X-Shopify-Event-Id` (one per event: a retry, and each subscription's copy, carries the
/// same), else `X-Shopify-Webhook-Id` (one per delivery, kept across its retries); the type
/// is the topic (`orders/create`), the only route key; the scope is the shop.
fn extract_shopify<'body>(
    integration: &Integration,
    headers: &Headers<'_>,
    payload_json: &'body str,
) -> Result<Extracted<'body>, ExtractError> {
    let event_id = match headers.get("x-shopify-event-id") {
        Some(event_id) => required_identifier(Some(Cow::Borrowed(event_id)), "event id")?,
        None => header_identifier(headers, "x-shopify-webhook-id", "webhook id")?,
    };
    let topic = header_identifier(headers, "x-shopify-topic", "topic")?;
    let shop = header_identifier(headers, "x-shopify-shop-domain", "shop domain")?;
    expect_equal(
        &integration.expect.shop_domain,
        Some(&shop),
        "unexpected shop",
    )?;
    Ok(Extracted::Event(Event {
        event_id: EventId::new(event_id),
        route_keys: vec![topic.clone()],
        event_type: topic,
        source_scope: SourceScope::from_parts([integration.id.as_str(), &shop]),
        payload_json,
    }))
}

#[derive(Deserialize)]
struct PaddleFields<'a> {
    #[serde(borrow)]
    event_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    event_type: Option<Cow<'a, str>>,
}

/// Paddle Billing: the event id and type from the signed body. `event_id` is the event's
/// (each destination's notification of it, and every retry, carries the same); the body
/// names no seller, so the scope is the integration.
fn extract_paddle<'body>(
    integration: &Integration,
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
        payload_json,
    }))
}

#[derive(Deserialize)]
struct ZoomFields<'a> {
    #[serde(borrow)]
    event: Option<Cow<'a, str>>,
    #[serde(borrow)]
    payload: Option<ZoomPayload<'a>>,
}

#[derive(Deserialize)]
struct ZoomPayload<'a> {
    #[serde(borrow)]
    account_id: Option<Cow<'a, str>>,
    #[serde(borrow, rename = "plainToken")]
    plain_token: Option<Cow<'a, str>>,
}

/// Zoom: the type is `event`; Zoom sends no event id, so the receipt key is the SHA-256 of
/// the signed body (its `event_ts` and payload make it the event's, and a retry sends the
/// same body); the scope is `payload.account_id` (`-` when absent).
fn extract_zoom<'body>(
    integration: &Integration,
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
    let account_id = payload.and_then(|payload| payload.account_id);
    let account_id = account_id.as_deref().filter(|id| !id.is_empty());
    if account_id.is_some_and(|id| id.len() > MAX_IDENTIFIER_LEN) {
        return Err(malformed(format!(
            "payload.account_id is longer than {MAX_IDENTIFIER_LEN} bytes"
        )));
    }
    expect_equal(
        &integration.expect.account_id,
        account_id,
        "unexpected account",
    )?;
    Ok(Extracted::Event(Event {
        event_id: EventId::new(hex::encode(crate::keys::content_digest(
            payload_json.as_bytes(),
        ))),
        route_keys: vec![event_type.clone()],
        event_type,
        source_scope: SourceScope::from_parts([integration.id.as_str(), account_id.unwrap_or("-")]),
        payload_json,
    }))
}

/// The configurable schemes: each field from the header or the body's JSON pointer its
/// `[integration.fields]` names (a string, or a number or boolean as written).
fn extract_configured<'body>(
    integration: &Integration,
    headers: &Headers<'_>,
    payload_json: &'body str,
) -> Result<Extracted<'body>, ExtractError> {
    let Some(custom) = &integration.custom else {
        return Err(malformed("the integration has no [integration.fields]"));
    };
    let fields = &custom.fields;
    let sources = [
        Some(&fields.event_id),
        Some(&fields.event_type),
        fields.scope.as_ref(),
    ];
    // The body's fields in one streaming pass, never as a tree (pointer.rs).
    let pointers: Vec<&str> = sources
        .iter()
        .flatten()
        .filter_map(|source| match source {
            FieldSource::Pointer(pointer) => Some(pointer.as_str()),
            FieldSource::Header(_) => None,
        })
        .collect();
    let mut from_body = pointer::read_fields(payload_json, &pointers)
        .map_err(|error| malformed(error.to_string()))?
        .into_iter();
    // Taken in the order of `sources`, which is the order of `pointers`.
    let mut value = |source: &FieldSource| match source {
        FieldSource::Header(name) => headers.get(name).map(Cow::Borrowed),
        FieldSource::Pointer(_) => from_body.next().flatten(),
    };
    let event_id = required_identifier(value(&fields.event_id), "event id")?;
    let event_type = required_identifier(value(&fields.event_type), "event type")?;
    let scope = fields
        .scope
        .as_ref()
        .map(|source| required_identifier(value(source), "scope"))
        .transpose()?;
    expect_equal(
        &integration.expect.scope,
        scope.as_deref(),
        "unexpected scope",
    )?;
    let source_scope = match &scope {
        Some(scope) => SourceScope::from_parts([integration.id.as_str(), scope]),
        None => SourceScope::from_parts([integration.id.as_str()]),
    };
    Ok(Extracted::Event(Event {
        event_id: EventId::new(event_id),
        route_keys: vec![event_type.clone()],
        event_type,
        source_scope,
        payload_json,
    }))
}

#[cfg(test)]
mod tests;
