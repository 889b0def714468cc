//! GitHub: its signature, what its deliveries mean, and what inbound knows of it.
//!
//! Signature: `X-Hub-Signature-256: sha256=<hex>`, HMAC-SHA256 of the body. GitHub signs no
//! timestamp, so there is no freshness check; replays are caught by the receipt key.

use std::borrow::Cow;

use serde::Deserialize;

use super::{KnownEvents, Signing, Spec, Verifier};
use crate::config::Integration;
use crate::event::subject::{self, Lenient, Raw};
use crate::event::{
    Event, ExtractError, Extracted, MAX_IDENTIFIER_LEN, delivery_facts, header_identifier,
    malformed, out_of_scope, parse_fields,
};
use crate::headers::Headers;
use crate::keys::{EventId, SourceScope};
use crate::secret::Secret;
use crate::sender::SignError;
use crate::verify::{VerifyContext, VerifyError, mac};

/// What inbound knows of GitHub.
///
/// Redelivery horizon: GitHub never retries, but "you can redeliver webhook deliveries that
/// occurred in the past 3 days" (7 on GitHub Enterprise Server 3.16+, which a github.com
/// integration never is):
/// <https://docs.github.com/webhooks/testing-and-troubleshooting-webhooks/redelivering-webhooks>.
/// `repository_dispatch`'s action is whatever `event_type` the dispatching client chose, so
/// every `repository_dispatch.…` key is known.
pub(crate) static SPEC: Spec = Spec {
    verify: Verifier::Fixed(verify),
    extract,
    sign: signed_headers,
    type_in_a_header: true,
    redelivery_horizon_days: 3,
    known_events: Some(&KNOWN_EVENTS),
    free_form_actions: &["repository_dispatch"],
    default_subject: Some(
        "`repository.full_name`, then `#` and `issue.number` or `pull_request.number` when there is one",
    ),
};

/// The event types GitHub sends: `known_events/github.txt`, which follows GitHub's "Webhook
/// events and payloads"
/// (<https://docs.github.com/en/webhooks/webhook-events-and-payloads>): every event name
/// (the `X-GitHub-Event` header) and, for events with an `action`, every documented
/// `event.action`, which are the two route keys a delivery is tried under
/// (`crate::event`). Cross-checked against the generated list of
/// `@octokit/webhooks` (<https://github.com/octokit/webhooks.js>). `repository_dispatch` is
/// the exception: its `action` is whatever `event_type` the dispatching client chose, so
/// every `repository_dispatch.…` key is accepted ([`GITHUB_FREE_FORM_ACTIONS`]).
static KNOWN_EVENTS: KnownEvents = KnownEvents::new(include_str!("known_events/github.txt"));

const HEADER: &str = "x-hub-signature-256";

/// Verifies a GitHub delivery.
pub(crate) fn verify(
    headers: &Headers<'_>,
    body: &[u8],
    context: VerifyContext<'_>,
) -> Result<(), VerifyError> {
    let value = headers
        .get(HEADER)
        .ok_or(VerifyError::MissingHeader(HEADER))?;
    let hex_signature = value
        .strip_prefix("sha256=")
        .ok_or(VerifyError::MalformedHeader(HEADER))?;
    let candidate = hex::decode(hex_signature).map_err(|_| VerifyError::MalformedHeader(HEADER))?;
    if mac::any_matches(context.secrets, &[body], &[candidate]) {
        Ok(())
    } else {
        Err(VerifyError::NoMatchingSignature)
    }
}

/// The `X-Hub-Signature-256` value GitHub would send for `body`.
pub fn sign(secret: &Secret, body: &[u8]) -> String {
    format!(
        "sha256={}",
        hex::encode(mac::hmac_sha256(secret.expose(), &[body]))
    )
}

/// The headers a GitHub hook sends with `body`: the event (default `ping`) and a fresh
/// delivery id.
fn signed_headers(signing: &Signing<'_>) -> Result<Vec<(String, String)>, SignError> {
    Ok(vec![
        (
            "X-Hub-Signature-256".into(),
            sign(signing.secret, signing.body),
        ),
        (
            "X-GitHub-Event".into(),
            signing.header_event_type.unwrap_or("ping").to_owned(),
        ),
        (
            "X-GitHub-Delivery".into(),
            format!("delivery-{}", signing.unique),
        ),
    ])
}

#[derive(Deserialize)]
struct GithubFields<'a> {
    #[serde(borrow)]
    action: Option<Cow<'a, str>>,
    installation: Option<GithubAccount>,
    organization: Option<GithubAccount>,
    #[serde(borrow)]
    repository: Option<GithubRepository<'a>>,
    #[serde(borrow, default)]
    issue: Lenient<GithubNumbered<'a>>,
    #[serde(borrow, default)]
    pull_request: Lenient<GithubNumbered<'a>>,
}

/// The signed id of an installation or organization.
#[derive(Deserialize)]
struct GithubAccount {
    id: Option<u64>,
}

/// The signed id of a repository, and its name (the subject's first part).
#[derive(Deserialize)]
struct GithubRepository<'a> {
    id: Option<u64>,
    #[serde(borrow)]
    full_name: Raw<'a>,
}

/// An issue or pull request: its number in the repository.
#[derive(Deserialize)]
struct GithubNumbered<'a> {
    #[serde(borrow)]
    number: Raw<'a>,
}

fn account_id(account: Option<GithubAccount>) -> Option<String> {
    account?.id.map(|id| id.to_string())
}

/// The subject: the repository (`octo/repo`), and the issue or pull request a delivery
/// is about (`octo/repo#42`). GitHub: "Webhook payloads contain the `repository` property
/// when the event occurs from activity in a repository" (github/docs,
/// `content/webhooks/webhook-events-and-payloads.md`). A renamed repository starts a new
/// subject. GitHub sends no event time: its receipts are ordered by arrival.
fn github_subject(
    repository: Option<&GithubRepository<'_>>,
    issue: &Lenient<GithubNumbered<'_>>,
    pull_request: &Lenient<GithubNumbered<'_>>,
) -> Option<String> {
    let name = subject::text(repository?.full_name)?;
    let number = pull_request
        .0
        .as_ref()
        .or(issue.0.as_ref())
        .and_then(|numbered| subject::text(numbered.number));
    subject::bounded(Some(match number {
        Some(number) => Cow::Owned(format!("{name}#{number}")),
        None => name,
    }))
}

/// GitHub signs only the body. The delivery id (receipt key) and the event name (route)
/// exist only as headers and are bounded like every identifier; the scope and the
/// `expect` checks come from the signed body's `installation`, `organization` and
/// `repository` ids. `X-GitHub-Hook-Installation-Target-ID` is read only for the
/// (unsigned, weaker) `expect.installation_target_id`.
pub(crate) fn extract<'body>(
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
    let subject = github_subject(
        fields.repository.as_ref(),
        &fields.issue,
        &fields.pull_request,
    );
    let repository = fields
        .repository
        .and_then(|repository| repository.id.map(|id| id.to_string()));
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
        subject,
        event_at: None,
        payload_json: Cow::Borrowed(payload_json),
    }))
}
