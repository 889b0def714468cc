//! `POST /webhooks/{integration}`: the order of checks is the contract's — integration
//! (404) → body limit (413, even unsigned) → signature and freshness (401; its cost
//! bounded, a costly one checked off the async threads: `verification`) → media type
//! (415: a declared type other than JSON — GitHub's form encoding aside — or any content
//! coding) → shape, event id and type (400) → scope (200 ignored: out of scope) → route
//! (200 ignored) → commit → 200. Nothing answers 2xx for an event until its batch's
//! [`inbound_store::insert_receipts`] has returned, i.e. committed.
//!
//! [`receive`] is those checks as four stages — `read_and_verify`, `understand`, `route`,
//! `commit` — each handing its result to the next or ending the request with an
//! [`Outcome`]: the reply and what its log line says.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use http::request::Parts;
use hyper::body::Incoming;
use inbound_core::clock::Clock;
use inbound_core::config::{Integration, Route};
use inbound_core::event::{self, Event, ExtractError, Extracted};
use inbound_core::headers::Headers;
use inbound_core::keys::{self, EventId};
use inbound_core::provider;
use inbound_core::verify::VerifyContext;
use inbound_runtime::failpoint;
use inbound_store::{InsertOutcome, NewReceipt, ReceiptOrder};
use tokio::time::Instant;

use crate::body::{self, BodyBudget, BodyError, HeldBody, HeldText};
use crate::group_commit::{CommitError, CommitPayload, GroupCommit};
use crate::reply::Reply;
use crate::telemetry;
use crate::verification::{Unverified, Verification};

/// The timing policy of a request.
#[derive(Debug, Clone, Copy)]
pub struct AppSettings {
    /// Whole-request budget: body read, verification and commit.
    pub request_timeout: Duration,
    /// Budget for acquiring a connection and committing the receipt.
    pub database_timeout: Duration,
}

/// What the pipeline needs of the process: where receipts are committed, the budget
/// request bodies share, where signatures are checked, the clock freshness checks read,
/// and the timing policy. The application owns one (`app::App`); the pipeline knows
/// nothing else of it.
pub struct Pipeline {
    group_commit: GroupCommit,
    body_budget: BodyBudget,
    verification: Verification,
    clock: Arc<dyn Clock>,
    settings: AppSettings,
}

impl Pipeline {
    /// Assembles the pipeline's parts.
    pub fn new(
        group_commit: GroupCommit,
        body_budget: BodyBudget,
        verification: Verification,
        clock: Arc<dyn Clock>,
        settings: AppSettings,
    ) -> Self {
        Self {
            group_commit,
            body_budget,
            verification,
            clock,
            settings,
        }
    }
}

/// What the request log line says besides the reply.
#[derive(Debug, Default)]
pub struct Details {
    /// The event id, once the request verified and had one.
    pub event_id: Option<EventId>,
    /// The event type, once the request verified (logged, and counted when ignored).
    pub event_type: Option<String>,
    /// Why it was refused, for the log only (never in the response).
    pub reason: Option<String>,
    /// What an out-of-scope event or a Slack rate-limit notice said of its scope (the
    /// account, mode, team or shop), for the log.
    pub scope: Option<String>,
}

/// How one request ended: the reply, and what its log line says.
#[derive(Debug)]
pub struct Outcome {
    /// What the sender is answered.
    pub reply: Reply,
    /// What the log line adds.
    pub details: Details,
}

impl Outcome {
    /// `reply`, with nothing more to log.
    fn answer(reply: Reply) -> Self {
        Self {
            reply,
            details: Details::default(),
        }
    }

    /// The request ends here: a stage's `Err`.
    fn into_box(self) -> Box<Self> {
        Box::new(self)
    }

    /// `reply`, logged with `reason`.
    fn refuse(reply: Reply, reason: impl Into<String>) -> Self {
        let mut outcome = Self::answer(reply);
        outcome.details.reason = Some(reason.into());
        outcome
    }
}

/// A stage's result: what the next stage takes, or how the request ended.
type Stage<T> = Result<T, Box<Outcome>>;

/// Runs the pipeline for one webhook request to a known integration, in the contract's
/// order of checks; each stage either hands its result on or ends the request.
pub async fn receive(
    pipeline: &Pipeline,
    integration: &Integration,
    parts: &Parts,
    body: Incoming,
    deadline: Instant,
) -> Outcome {
    let stages = async {
        let verified = read_and_verify(pipeline, integration, parts, body, deadline).await?;
        let headers = header_view(parts);
        let event = understand(pipeline, integration, &headers, &verified)?;
        let routed = route(integration, &event)?;
        Stage::Ok(commit(pipeline, integration, event, routed, &verified, deadline).await)
    };
    stages.await.unwrap_or_else(|ended| *ended)
}

/// A body read whole within its limits, whose signature verified and whose declared
/// encoding is the integration's.
struct Verified {
    held: Arc<HeldBody>,
    now_unix_secs: i64,
}

/// Integration known, body within its limit (413) and the budget (503), signature and
/// freshness (401; a busy verifier pool is 503), media type (415).
async fn read_and_verify(
    pipeline: &Pipeline,
    integration: &Integration,
    parts: &Parts,
    body: Incoming,
    deadline: Instant,
) -> Stage<Verified> {
    let held = read_body(pipeline, parts, body, integration.max_body_bytes, deadline)
        .await
        .map_err(|reply| Outcome::answer(reply).into_box())?;
    let held = Arc::new(held);
    let now_unix_secs = pipeline.clock.now_unix_secs();
    let verified = pipeline
        .verification
        .verify(integration, &parts.headers, &held, now_unix_secs, deadline)
        .await;
    match verified {
        Ok(()) => {}
        Err(Unverified::Refused(error)) => {
            return Err(Outcome::refuse(Reply::Unauthorized, error.to_string()).into_box());
        }
        Err(Unverified::Busy) => {
            return Err(Outcome::refuse(
                Reply::Overloaded,
                "every verification thread stayed busy",
            )
            .into_box());
        }
    }
    if let Some(reason) = unsupported_media(&parts.headers, integration) {
        return Err(Outcome::refuse(Reply::UnsupportedMediaType, reason).into_box());
    }
    Ok(Verified {
        held,
        now_unix_secs,
    })
}

/// The request's headers as core reads them.
fn header_view(parts: &Parts) -> Headers<'_> {
    parts
        .headers
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_bytes()))
        .collect()
}

/// A verified event, understood: what is stored, and the payload text read out of a form
/// (held within the body budget).
struct Understood<'body> {
    event: Event<'body>,
    read_out: Option<Arc<HeldText>>,
}

/// Shape, id and type (400), scope (200 ignored), and the deliveries answered without a
/// receipt: Slack's and Zoom's endpoint checks, Slack's rate-limit notice, an unrouted
/// configured event.
fn understand<'body>(
    pipeline: &Pipeline,
    integration: &Integration,
    headers: &Headers<'_>,
    verified: &'body Verified,
) -> Stage<Understood<'body>> {
    let body = verified.held.bytes();
    // A form's payload, read out of the body, is held within the budget too (it is at
    // most as long as the body).
    let text_reservation = if event::reads_a_form(integration) {
        let reservation = pipeline
            .body_budget
            .try_reserve(body.len())
            .ok_or_else(|| {
                Outcome::refuse(Reply::Overloaded, "the in-flight body budget is full").into_box()
            })?;
        Some(reservation)
    } else {
        None
    };
    let extracted = provider::extract(integration, headers, body).map_err(|error| {
        let ExtractError::Malformed(reason) = error;
        Outcome::refuse(Reply::Malformed(reason.to_string()), reason).into_box()
    })?;
    let mut event = event_to_store(integration, headers, verified, extracted)?;
    // A payload read out of the body moves into the commit queue as it is.
    let read_out = match (std::mem::take(&mut event.payload_json), text_reservation) {
        (Cow::Owned(text), Some(reservation)) => Some(Arc::new(HeldText::new(text, reservation))),
        (payload, _) => {
            event.payload_json = payload;
            None
        }
    };
    Ok(Understood { event, read_out })
}

/// The event to store, or how a verified delivery that stores nothing is answered.
fn event_to_store<'body>(
    integration: &Integration,
    headers: &Headers<'_>,
    verified: &Verified,
    extracted: Extracted<'body>,
) -> Stage<Event<'body>> {
    Err(Box::new(match extracted {
        Extracted::Event(event) => return Ok(event),
        Extracted::UrlVerification { challenge } => Outcome::answer(Reply::Challenge(challenge)),
        Extracted::ZoomUrlValidation { plain_token } => {
            // Answered under the secret that signed it (the request verified, so one did).
            let context = VerifyContext {
                secrets: &integration.secrets,
                public_keys: &integration.public_keys,
                tolerance_secs: integration.tolerance_secs,
                now_unix_secs: verified.now_unix_secs,
            };
            let body = verified.held.bytes();
            match provider::matching_secret(integration.provider, headers, body, context) {
                Some(secret) => Outcome::answer(Reply::ZoomUrlValidation {
                    encrypted_token: provider::zoom_encrypted_token(secret, &plain_token),
                    plain_token,
                }),
                None => Outcome::answer(Reply::Unauthorized),
            }
        }
        Extracted::OutOfScope(out) => {
            telemetry::record_out_of_scope(&integration.id, out.reason);
            let mut outcome = Outcome::refuse(
                Reply::OutOfScope,
                format!("another {} than the integration's", out.reason),
            );
            outcome.details.event_type = out.event_type;
            outcome.details.scope = Some(out.found);
            outcome
        }
        Extracted::Unrouted { event_type } => {
            telemetry::record_ignored(&integration.id, &event_type);
            let mut outcome = Outcome::answer(Reply::Ignored);
            outcome.details.event_type = Some(event_type);
            outcome
        }
        Extracted::SlackRateLimited { team_id } => {
            telemetry::record_slack_rate_limited(&integration.id, &team_id);
            tracing::warn!(
                integration = %integration.id,
                team = %team_id,
                "Slack sent app_rate_limited: it is dropping this app's events from the team \
                 (over 30,000 an hour); see docs/operations.md"
            );
            let mut outcome = Outcome::answer(Reply::SlackRateLimited);
            outcome.details.scope = Some(team_id);
            outcome
        }
    }))
}

/// The route the event takes (200 ignored when none) and the key it is configured under.
fn route<'i>(
    integration: &'i Integration,
    understood: &Understood<'_>,
) -> Stage<(&'i str, &'i Route)> {
    let event = &understood.event;
    match event::find_route(integration, event) {
        Some(routed) => Ok(routed),
        None => {
            telemetry::record_ignored(&integration.id, &event.event_type);
            let mut outcome = Outcome::answer(Reply::Ignored);
            outcome.details.event_id = Some(event.event_id.clone());
            outcome.details.event_type = Some(event.event_type.clone());
            Err(outcome.into_box())
        }
    }
}

/// Commits the receipt (200 accepted or duplicate once its statement returned; 503 when
/// the database did not confirm it; 400 when PostgreSQL refused the event's own data).
async fn commit(
    pipeline: &Pipeline,
    integration: &Integration,
    understood: Understood<'_>,
    (route_key, route): (&str, &Route),
    verified: &Verified,
    deadline: Instant,
) -> Outcome {
    let Understood { event, read_out } = understood;
    let payload_json = read_out
        .as_deref()
        .map_or(&*event.payload_json, HeldText::text);
    let subject = event::subject_for(route, &event, payload_json);
    // GitHub signs no delivery id: with content_dedupe, the body itself is a second key.
    let digest = integration
        .content_dedupe
        .then(|| keys::content_digest(verified.held.bytes()));
    let receipt = NewReceipt {
        integration: &integration.id,
        source_scope: &event.source_scope,
        event_id: &event.event_id,
        event_type: &event.event_type,
        route_key,
        payload_json,
        content_digest: digest.as_ref().map(|digest| &digest[..]),
        delivery_json: event.delivery.as_deref(),
        order: ReceiptOrder {
            subject: subject.as_deref(),
            event_at: event.event_at,
            ordered: route.ordered,
        },
    };
    let payload = CommitPayload {
        body: Arc::clone(&verified.held),
        read_out: read_out.clone(),
    };
    let mut outcome = match commit_receipt(pipeline, receipt, payload, deadline).await {
        Ok(InsertOutcome::Accepted(receipt_id)) => {
            failpoint::hit("after_receipt_commit");
            Outcome::answer(Reply::Accepted(receipt_id))
        }
        Ok(InsertOutcome::Duplicate) => Outcome::answer(Reply::Duplicate),
        Err(CommitError::Unstorable(reason)) => {
            Outcome::refuse(Reply::Malformed(UNSTORABLE.to_owned()), reason)
        }
        Err(CommitError::Unavailable(reason)) => Outcome::refuse(Reply::Unavailable, reason),
    };
    outcome.details.event_id = Some(event.event_id);
    outcome.details.event_type = Some(event.event_type);
    outcome
}

/// Why a verified body is not one we read, judged by its headers: a declared
/// `Content-Type` other than the integration's encoding (JSON: `application/json`, a `+json`
/// type or none; a GitHub form hook: `application/x-www-form-urlencoded`, read by
/// [`inbound_core::event`] from its `payload` field), or any `Content-Encoding` but
/// `identity`. Other senders' forms (Slack's interactivity and slash commands) are not
/// webhooks inbound stores: docs/contract.md says why.
fn unsupported_media(headers: &http::HeaderMap, integration: &Integration) -> Option<String> {
    // A header that is not text declares nothing we read: refused as an empty type.
    let declared = headers
        .get(http::header::CONTENT_TYPE)
        .map(|value| value.to_str().unwrap_or_default());
    if let Some(reason) = event::undeclared_encoding(integration, declared) {
        return Some(reason);
    }
    headers
        .get_all(http::header::CONTENT_ENCODING)
        .iter()
        .map(|value| {
            value
                .to_str()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase()
        })
        .find(|coding| coding != "identity")
        .map(|coding| format!("content coding {coding:?} is not accepted"))
}

/// Reads the whole body within the integration's limit and the in-flight budget.
async fn read_body(
    pipeline: &Pipeline,
    parts: &Parts,
    body: Incoming,
    limit: usize,
    deadline: Instant,
) -> Result<HeldBody, Reply> {
    let declared = parts
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    let reading = body::read_body(body, declared, limit, &pipeline.body_budget);
    match tokio::time::timeout_at(deadline, reading).await {
        Err(_elapsed) => Err(Reply::RequestTimeout),
        Ok(Ok(held)) => Ok(held),
        Ok(Err(BodyError::TooLarge)) => Err(Reply::PayloadTooLarge),
        Ok(Err(BodyError::BudgetFull)) => Err(Reply::Overloaded),
        Ok(Err(error @ BodyError::Unreadable)) => Err(Reply::Malformed(error.to_string())),
    }
}

/// The 400 detail when PostgreSQL refused the event's own data (its reason goes to the
/// log only).
const UNSTORABLE: &str = "the event cannot be stored as sent";

/// Commits the receipt (with whatever else is waiting: group commit) within the database
/// deadline. `Unavailable` → 503 and the provider redelivers (then `accepted` or
/// `duplicate`); `Unstorable` → 400, since a redelivery would fail the same way.
async fn commit_receipt(
    pipeline: &Pipeline,
    receipt: NewReceipt<'_>,
    payload: CommitPayload,
    deadline: Instant,
) -> Result<InsertOutcome, CommitError> {
    let database_deadline = deadline.min(Instant::now() + pipeline.settings.database_timeout);
    let committing = pipeline.group_commit.commit(&receipt, payload);
    match tokio::time::timeout_at(database_deadline, committing).await {
        Ok(outcome) => outcome,
        Err(_elapsed) => Err(CommitError::Unavailable(
            "the database did not confirm the commit in time".to_owned(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::unsupported_media;
    use http::HeaderMap;
    use inbound_core::config::Config;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(name, value)| {
                (
                    http::HeaderName::from_static(name),
                    http::HeaderValue::from_static(value),
                )
            })
            .collect()
    }

    /// A Stripe, a Shopify and a Slack integration, and a GitHub hook of each encoding.
    fn config() -> Config {
        let integration = |id: &str, provider: &str, extra: &str| {
            format!(
                "[[integration]]\nid = \"{id}\"\nprovider = \"{provider}\"\ntenant = \"t\"\nsecrets = [\"env:S\"]\n{extra}\n"
            )
        };
        let text = [
            integration("stripe", "stripe", ""),
            integration("shopify", "shopify", ""),
            integration("slack", "slack", ""),
            integration("gh-form", "github", ""),
            integration("gh-json", "github", "content_type = \"json\""),
        ]
        .concat();
        Config::from_toml(&text, &|_| {
            Some("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".to_owned())
        })
        .expect("config")
    }

    fn refused(id: &str, pairs: &[(&'static str, &'static str)]) -> Option<String> {
        let config = config();
        unsupported_media(
            &headers(pairs),
            config.integration(id).expect("integration"),
        )
    }

    #[test]
    fn json_types_and_no_type_are_read() {
        for pairs in [
            &[][..],
            &[("content-type", "application/json")],
            &[("content-type", "Application/JSON; charset=utf-8")],
            &[("content-type", "application/cloudevents+json")],
            &[("content-encoding", "identity")],
        ] {
            assert_eq!(refused("stripe", pairs), None, "{pairs:?}");
            assert_eq!(refused("gh-json", pairs), None, "{pairs:?}");
        }
    }

    #[test]
    fn other_types_and_any_coding_are_refused() {
        for pairs in [
            &[("content-type", "text/plain")][..],
            &[("content-type", "application/x-www-form-urlencoded")],
            &[("content-type", "")],
            &[("content-type", "application/jsonp")],
            &[("content-encoding", "gzip")],
        ] {
            assert!(refused("slack", pairs).is_some(), "{pairs:?}");
        }
    }

    /// A GitHub hook sends the one content type it was created with: a form hook's
    /// deliveries are forms, a JSON hook's JSON; the other is refused, since the header is
    /// not signed and must not choose how the signed bytes are read.
    #[test]
    fn a_github_hook_is_read_only_as_its_integration_says() {
        let form = [("content-type", "application/x-www-form-urlencoded")];
        assert_eq!(refused("gh-form", &form), None);
        assert!(refused("gh-json", &form).is_some());
        assert!(refused("shopify", &form).is_some());
        for pairs in [
            &[][..],
            &[("content-type", "application/json")],
            &[
                ("content-type", "application/x-www-form-urlencoded"),
                ("content-encoding", "gzip"),
            ],
        ] {
            assert!(refused("gh-form", pairs).is_some(), "{pairs:?}");
        }
    }
}
