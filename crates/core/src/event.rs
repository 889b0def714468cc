//! After a request verifies: validate its shape, extract the event id and type, derive the
//! source scope from verified data, check it against `expect`, and find the route.
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

use crate::config::{
    CATCH_ALL, FieldSource, GithubContentType, Integration, PATTERN_SUFFIX, Route, StripeEndpoint,
};
use crate::headers::Headers;
use crate::keys::{EventId, SourceScope};
use crate::payload;
pub use crate::payload::MAX_JSON_DEPTH;
use crate::verify::Provider;

mod form;
mod pointer;

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

fn malformed(reason: impl Into<Cow<'static, str>>) -> ExtractError {
    ExtractError::Malformed(reason.into())
}

/// Understands one verified request for `integration`. The body of a GitHub integration
/// whose hook sends forms (`content_type = "form"`, GitHub's default) is read from its one
/// `payload` field; every other body is the JSON itself. The delivery's `Content-Type` is
/// not signed, so it never decides how the signed bytes are read (the ingress refuses a
/// delivery declared the other way).
pub fn extract<'body>(
    integration: &Integration,
    headers: &Headers<'_>,
    body: &'body [u8],
) -> Result<Extracted<'body>, ExtractError> {
    if reads_a_form(integration) {
        let json = form::payload_field(body).map_err(malformed)?;
        payload::check_storable(json.as_bytes())
            .map_err(|unstorable| malformed(unstorable.to_string()))?;
        // The event's payload is the decoded text itself, moved in, never copied again.
        let mut extracted = extract_json(integration, headers, &json)?.detached();
        if let Extracted::Event(event) = &mut extracted {
            event.payload_json = Cow::Owned(json);
        }
        return Ok(extracted);
    }
    let payload_json =
        payload::check_storable(body).map_err(|unstorable| malformed(unstorable.to_string()))?;
    extract_json(integration, headers, payload_json)
}

/// Whether `extract` reads this integration's bodies as GitHub's form encoding (its
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

fn extract_json<'body>(
    integration: &Integration,
    headers: &Headers<'_>,
    payload_json: &'body str,
) -> Result<Extracted<'body>, ExtractError> {
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
fn route_for_keys<'i>(
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

/// The first of `checks` — `(expected, found, reason)` — whose `expect` value the event
/// does not have.
fn out_of_scope<const N: usize>(
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
fn delivery_facts(pairs: &[(&str, Option<&str>)]) -> Result<Option<String>, ExtractError> {
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

#[derive(Deserialize)]
struct StripeFields<'a> {
    #[serde(borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, rename = "type")]
    event_type: Option<Cow<'a, str>>,
    #[serde(borrow)]
    object: Option<Cow<'a, str>>,
    #[serde(borrow)]
    account: Option<Cow<'a, str>>,
    #[serde(borrow)]
    context: Option<Cow<'a, str>>,
    livemode: Option<bool>,
    #[serde(borrow)]
    api_version: Option<Cow<'a, str>>,
}

/// The `object` of a thin event (API v2, event destinations).
const STRIPE_THIN_EVENT: &str = "v2.core.event";

/// Stripe: the id, type and mode from the signed body. The account is `account` on a
/// snapshot event (a Connect endpoint's connected account; absent for the platform's
/// own), and `context` on a thin event (`object` = `v2.core.event`), which is the account
/// path Stripe names in `Stripe-Context` (`acct_…`, or `acct_…/acct_…` for an
/// organization's: <https://docs.stripe.com/context>; stripe-python
/// `stripe/v2/core/_event.py`). A Connect endpoint receives test-mode events and every
/// connected account's at one URL (<https://docs.stripe.com/connect/webhooks>): those the
/// integration does not take are out of scope, not refused.
fn extract_stripe<'body>(
    integration: &Integration,
    payload_json: &'body str,
) -> Result<Extracted<'body>, ExtractError> {
    let fields: StripeFields = parse_fields(payload_json)?;
    let event_id = required_identifier(fields.id, "event id")?;
    let event_type = required_identifier(fields.event_type, "event type")?;
    let livemode = fields.livemode.ok_or_else(|| malformed("no livemode"))?;
    let thin = fields.object.as_deref() == Some(STRIPE_THIN_EVENT);
    let (account, what) = if thin {
        (fields.context, "context")
    } else {
        (fields.account, "account")
    };
    let account = account
        .filter(|account| !account.is_empty())
        .map(|account| required_identifier(Some(account), what))
        .transpose()?;
    let account = account.as_deref();
    let mode = if livemode { "live" } else { "test" };
    let expected_mode = integration
        .expect
        .livemode
        .map(|live| if live { "live" } else { "test" }.to_owned());
    if let Some(out) = out_of_scope(
        [
            (&expected_mode, Some(mode), "mode"),
            (&integration.expect.account, account, "account"),
        ],
        Some(&event_type),
    ) {
        return Ok(Extracted::OutOfScope(out));
    }
    // An account endpoint's events name no connected account; a Connect endpoint's each
    // name one.
    let other_kind = match integration.stripe_endpoint() {
        Some(StripeEndpoint::Account(_)) => account.is_some(),
        Some(StripeEndpoint::Connect) => account.is_none(),
        None => false,
    };
    if other_kind {
        return Ok(Extracted::OutOfScope(OutOfScope {
            reason: "account",
            found: account.unwrap_or("-").to_owned(),
            event_type: Some(event_type),
        }));
    }
    let delivery = delivery_facts(&[("api_version", fields.api_version.as_deref())])?;
    Ok(Extracted::Event(Event {
        event_id: EventId::new(event_id),
        route_keys: vec![event_type.clone()],
        event_type,
        source_scope: SourceScope::from_parts([
            integration.id.as_str(),
            account.unwrap_or("platform"),
            mode,
        ]),
        delivery,
        payload_json: Cow::Borrowed(payload_json),
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
    let mut route_keys = Vec::with_capacity(2);
    if let Some(action) = fields.action.filter(|action| !action.is_empty()) {
        route_keys.push(format!("{event_name}.{action}"));
    }
    route_keys.push(event_name);
    let event_type = route_keys[0].clone();
    if event_type.len() > MAX_IDENTIFIER_LEN {
        return Err(malformed("event type is too long"));
    }
    let expect = &integration.expect;
    if let Some(out) = out_of_scope(
        [
            (
                &expect.installation_id,
                installation.as_deref(),
                "installation",
            ),
            (
                &expect.organization_id,
                organization.as_deref(),
                "organization",
            ),
            (&expect.repository_id, repository.as_deref(), "repository"),
            (
                &expect.installation_target_id,
                target,
                "installation_target",
            ),
        ],
        Some(&event_type),
    ) {
        return Ok(Extracted::OutOfScope(out));
    }
    // The most encompassing signed account: an App installation, else the organization,
    // else the repository (a repository hook outside any organization).
    let account = installation
        .map(|id| format!("installation:{id}"))
        .or_else(|| organization.map(|id| format!("organization:{id}")))
        .or_else(|| repository.map(|id| format!("repository:{id}")));
    let delivery = delivery_facts(&[
        ("hook_id", headers.get("x-github-hook-id")),
        (
            "installation_target_type",
            headers.get("x-github-hook-installation-target-type"),
        ),
        ("installation_target_id", target),
    ])?;
    Ok(Extracted::Event(Event {
        event_id: EventId::new(event_id),
        event_type,
        route_keys,
        source_scope: SourceScope::from_parts([
            integration.id.as_str(),
            account.as_deref().unwrap_or("-"),
        ]),
        delivery,
        payload_json: Cow::Borrowed(payload_json),
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

/// The envelope type of Slack's rate-limit notice
/// (<https://docs.slack.dev/reference/events/app_rate_limited>).
const SLACK_APP_RATE_LIMITED: &str = "app_rate_limited";

/// Slack's Events API: the envelope's `event_id`, the inner `event.type`, scoped by team
/// and app. `url_verification` is answered with its challenge; `app_rate_limited` (no
/// event id, no inner event: Slack is dropping the app's events for the team) is
/// acknowledged and counted once its team and app are the integration's, since refusing
/// it counts against the app too.
fn extract_slack<'body>(
    integration: &Integration,
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
        payload_json: Cow::Borrowed(payload_json),
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
        delivery: None,
        payload_json: Cow::Borrowed(payload_json),
    }))
}

/// Shopify: every identifier travels in headers beside the signed body. The event id is
/// `X-Shopify-Event-Id`, else `X-Shopify-Webhook-Id` (one per delivery, kept across its
/// retries); the type is the topic (`orders/create`), the only route key.
///
/// Shopify's event id names the merchant action, and the deliveries that one action
/// produces share it across topics (`orders/create` and `orders/paid` of one checkout):
/// the topic is part of the scope, so each topic's event is a receipt of its own, while
/// the same topic reaching two subscriptions (two webhook ids) stays one
/// (<https://shopify.dev/docs/apps/build/webhooks/ignore-duplicates>; shopify-app-js
/// `lib/webhooks/types.ts`). Triggered-at, which tells a stale retry from a fresh event
/// (Shopify changelog, 2024-09-10), the webhook and event ids and the API version are
/// kept as the delivery's facts. Shopify's Events preview signs with
/// `Shopify-Hmac-Sha256` and sends the other headers without `X-` too.
fn extract_shopify<'body>(
    integration: &Integration,
    headers: &Headers<'_>,
    payload_json: &'body str,
) -> Result<Extracted<'body>, ExtractError> {
    let header = |name: &str| {
        headers
            .get(&format!("x-{name}"))
            .or_else(|| headers.get(name))
    };
    let event_id = header("shopify-event-id");
    let webhook_id = header("shopify-webhook-id");
    let event_id = required_identifier(event_id.or(webhook_id).map(Cow::Borrowed), "event id")?;
    let topic = required_identifier(header("shopify-topic").map(Cow::Borrowed), "topic")?;
    let shop = required_identifier(
        header("shopify-shop-domain").map(Cow::Borrowed),
        "shop domain",
    )?;
    if let Some(out) = out_of_scope(
        [(&integration.expect.shop_domain, Some(&shop), "shop")],
        Some(&topic),
    ) {
        return Ok(Extracted::OutOfScope(out));
    }
    let delivery = delivery_facts(&[
        ("event_id", header("shopify-event-id")),
        ("webhook_id", webhook_id),
        ("triggered_at", header("shopify-triggered-at")),
        ("api_version", header("shopify-api-version")),
    ])?;
    Ok(Extracted::Event(Event {
        event_id: EventId::new(event_id),
        route_keys: vec![topic.clone()],
        source_scope: SourceScope::from_parts([integration.id.as_str(), &shop, &topic]),
        event_type: topic,
        delivery,
        payload_json: Cow::Borrowed(payload_json),
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
        delivery: None,
        payload_json: Cow::Borrowed(payload_json),
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
        payload_json: Cow::Borrowed(payload_json),
    }))
}

/// The configurable schemes: each field from the header or the body's JSON pointer its
/// `[integration.fields]` names (a string, or a number or boolean as written).
///
/// The route is decided first: an event of a type no route takes needs no other field and
/// is `ignored` (GitLab's group and member events have no `/project/id`; a 400 for them
/// counts towards GitLab disabling the hook after 4 failures in a row, which also stops
/// the routed events: gitlab-org/gitlab MR 166329). Only a routed event must carry its id
/// and scope.
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
        Some(&fields.event_type),
        Some(&fields.event_id),
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
    // Without a type no route can be decided: that is malformed (a wrong `event_type`
    // source would otherwise drop every delivery as unrouted).
    let event_type = required_identifier(value(&fields.event_type), "event type")?;
    let route_keys = vec![event_type.clone()];
    if route_for_keys(integration, &route_keys).is_none() {
        return Ok(Extracted::Unrouted { event_type });
    }
    let event_id = required_identifier(value(&fields.event_id), "event id")?;
    let scope = fields
        .scope
        .as_ref()
        .map(|source| required_identifier(value(source), "scope"))
        .transpose()?;
    if let Some(out) = out_of_scope(
        [(&integration.expect.scope, scope.as_deref(), "scope")],
        Some(&event_type),
    ) {
        return Ok(Extracted::OutOfScope(out));
    }
    let source_scope = match &scope {
        Some(scope) => SourceScope::from_parts([integration.id.as_str(), scope]),
        None => SourceScope::from_parts([integration.id.as_str()]),
    };
    Ok(Extracted::Event(Event {
        event_id: EventId::new(event_id),
        route_keys,
        event_type,
        source_scope,
        delivery: None,
        payload_json: Cow::Borrowed(payload_json),
    }))
}

#[cfg(test)]
mod tests;
