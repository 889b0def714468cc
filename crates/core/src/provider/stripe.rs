//! Stripe: its signature, what its deliveries mean, and what inbound knows of it.
//!
//! Signature: `Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>…][,v0=…]`, HMAC-SHA256 of
//! `"{t}.{body}"` keyed by the whole `whsec_…` string. Any `v1` may match; `v0` (the old
//! test-mode scheme) is ignored.

use std::borrow::Cow;

use serde::Deserialize;

use super::{KnownEvents, Signing, Spec, Verifier};
use crate::config::{Integration, StripeEndpoint};
use crate::event::subject::{self, Lenient, Raw};
use crate::event::{
    Event, ExtractError, Extracted, OutOfScope, delivery_facts, malformed, out_of_scope,
    parse_fields, required_identifier,
};
use crate::headers::Headers;
use crate::keys::{EventId, SourceScope};
use crate::secret::Secret;
use crate::sender::SignError;
use crate::verify::listed::Listed;
use crate::verify::{VerifyContext, VerifyError};

/// What inbound knows of Stripe.
///
/// Redelivery horizon: Stripe resends undelivered events "for up to three days", and events
/// can be listed (and resent) for 30
/// (<https://docs.stripe.com/webhooks/process-undelivered-events>).
pub(crate) static SPEC: Spec = Spec {
    verify: Verifier::Fixed(verify),
    extract,
    sign: signed_headers,
    type_in_a_header: false,
    redelivery_horizon_days: 30,
    known_events: Some(&KNOWN_EVENTS),
    free_form_actions: &[],
    default_subject: Some(
        "`data.object.payment_intent` for a charge or refund, else `data.object.id` (a thin event: `related_object.id`)",
    ),
};

/// The event types Stripe sends: `known_events/stripe.txt`, which lists the generally
/// available types of Stripe's API reference, "Types of events"
/// (<https://docs.stripe.com/api/events/types>), which is the `enabled_events` enum of
/// `POST /v1/webhook_endpoints` in Stripe's OpenAPI description
/// (<https://github.com/stripe/openapi>). Public- and private-preview types (`capital.*`,
/// `account_notice.*`, `privacy.*`, …) are left out.
static KNOWN_EVENTS: KnownEvents = KnownEvents::new(include_str!("known_events/stripe.txt"));

const HEADER: &str = "stripe-signature";

const STRIPE: Listed = Listed {
    header: HEADER,
    separator: ',',
    timestamp: "t",
    signature: "v1",
    joiner: b".",
};

/// Verifies a Stripe delivery.
pub(crate) fn verify(
    headers: &Headers<'_>,
    body: &[u8],
    context: VerifyContext<'_>,
) -> Result<(), VerifyError> {
    STRIPE.verify(headers, body, context)
}

/// The `Stripe-Signature` value Stripe would send for `body` at `timestamp`.
pub fn sign(secret: &Secret, timestamp: i64, body: &[u8]) -> String {
    STRIPE.sign(secret, timestamp, body)
}

/// The headers Stripe sends with `body`.
fn signed_headers(signing: &Signing<'_>) -> Result<Vec<(String, String)>, SignError> {
    Ok(vec![(
        "Stripe-Signature".into(),
        sign(signing.secret, signing.now, signing.body),
    )])
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
    /// Unix seconds on a snapshot event; RFC 3339 on a thin one.
    #[serde(borrow)]
    created: Raw<'a>,
    #[serde(borrow, default)]
    data: Lenient<StripeData<'a>>,
    /// A thin event's object (`{"id": …, "type": …}`).
    #[serde(borrow, default)]
    related_object: Lenient<StripeObject<'a>>,
}

#[derive(Deserialize)]
struct StripeData<'a> {
    #[serde(borrow, default)]
    object: Lenient<StripeObject<'a>>,
}

/// The fields of an event's object that name its subject.
#[derive(Deserialize)]
struct StripeObject<'a> {
    #[serde(borrow)]
    id: Raw<'a>,
    #[serde(borrow)]
    object: Raw<'a>,
    #[serde(borrow)]
    payment_intent: Raw<'a>,
}

impl StripeFields<'_> {
    /// The subject: a charge's or refund's PaymentIntent (so a payment's events and its
    /// refunds are one history), else the object's id; a thin event's related object.
    /// Stripe: "ID of the PaymentIntent associated with this charge" / "that's refunded"
    /// (stripe-node `types/Charges.d.ts`, `types/Refunds.d.ts`); an expanded or null one
    /// falls back to the object's own id.
    fn subject(&self) -> Option<String> {
        if let Some(related) = &self.related_object.0 {
            return subject::bounded(subject::text(related.id));
        }
        let object = self.data.0.as_ref()?.object.0.as_ref()?;
        let kind = subject::text(object.object);
        let names_its_payment = matches!(kind.as_deref(), Some("charge" | "refund"));
        names_its_payment
            .then(|| subject::bounded(subject::text(object.payment_intent)))
            .flatten()
            .or_else(|| subject::bounded(subject::text(object.id)))
    }

    /// `created`: "Time at which the object was created. Measured in seconds since the
    /// Unix epoch" (stripe-node `types/Events.d.ts`); a thin event's is RFC 3339.
    fn event_at(&self) -> Option<chrono::DateTime<chrono::Utc>> {
        subject::unix_seconds(self.created).or_else(|| subject::rfc3339_field(self.created))
    }
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
pub(crate) fn extract<'body>(
    integration: &Integration,
    _headers: &Headers<'_>,
    payload_json: &'body str,
) -> Result<Extracted<'body>, ExtractError> {
    let fields: StripeFields = parse_fields(payload_json)?;
    let (subject, event_at) = (fields.subject(), fields.event_at());
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
        subject,
        event_at,
        payload_json: Cow::Borrowed(payload_json),
    }))
}
