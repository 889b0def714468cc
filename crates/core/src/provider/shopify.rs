//! Shopify: its signature, what its deliveries mean, and what inbound knows of it.
//!
//! Signature: `X-Shopify-Hmac-Sha256: <base64>`, HMAC-SHA256 of the raw body under the app's
//! client secret. Shopify signs no timestamp, so there is no freshness check (replays are
//! caught by the receipt key), and it signs no header: the topic, the shop domain and the
//! ids travel beside the signature, not under it. Shopify's Events (preview) deliveries
//! name the headers without `X-` (`Shopify-Hmac-Sha256`, …); either name is read.

use std::borrow::Cow;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;

use serde::Deserialize;

use super::{KnownEvents, Signing, Spec, Verifier};
use crate::config::Integration;
use crate::event::subject::{self, Raw};
use crate::event::{
    Event, ExtractError, Extracted, delivery_facts, out_of_scope, required_identifier,
};
use crate::headers::Headers;
use crate::keys::{EventId, SourceScope};
use crate::secret::Secret;
use crate::sender::SignError;
use crate::verify::{VerifyContext, VerifyError, mac};

/// What inbound knows of Shopify.
///
/// Redelivery horizon: Shopify retries "8 times over 4 hours" (changelog, 2024-09-10); 1
/// day leaves a margin.
pub(crate) static SPEC: Spec = Spec {
    verify: Verifier::Fixed(verify),
    extract,
    sign: signed_headers,
    type_in_a_header: true,
    redelivery_horizon_days: 1,
    known_events: Some(&KNOWN_EVENTS),
    free_form_actions: &[],
    default_subject: Some("`admin_graphql_api_id`, else `id` (the resource the body is)"),
};

/// The event types Shopify sends: `known_events/shopify.txt`, which lists the topics (the
/// `X-Shopify-Topic` header, which is the route key) of the `WebhookSubscriptionTopic` enum
/// of Shopify's GraphQL Admin API, version 2026-07
/// (<https://shopify.dev/docs/api/admin-graphql/latest/enums/WebhookSubscriptionTopic>),
/// each spelled as its description names it. The enum value is the topic upper-cased with
/// its `/` (or `.`) made `_`, as `topicForStorage` of `@shopify/shopify-api`
/// (<https://github.com/Shopify/shopify-app-js>) maps a topic, but the separator sits at no
/// fixed place: `ORDERS_CREATE` is `orders/create`, `APP_SCOPES_UPDATE` is
/// `app/scopes_update`, `CUSTOMERS_EMAIL_MARKETING_CONSENT_UPDATE` is
/// `customers_email_marketing_consent/update`, `CUSTOMER_TAGS_ADDED` is
/// `customer.tags_added`. Added to them, the mandatory compliance topics
/// `customers/data_request`, `customers/redact` and `shop/redact`, which are subscribed in
/// the app configuration and are not in the enum
/// (<https://shopify.dev/docs/apps/build/compliance/privacy-law-compliance>). A pattern
/// cannot split a topic at its `/`: the configuration refuses `orders/*`, and `prefix.*`
/// matches only the four `customer.…` topics.
static KNOWN_EVENTS: KnownEvents = KnownEvents::new(include_str!("known_events/shopify.txt"));

const HEADER: &str = "x-shopify-hmac-sha256";
/// The same header as Shopify's Events preview names it.
const EVENTS_HEADER: &str = "shopify-hmac-sha256";

/// Verifies a Shopify delivery.
pub(crate) fn verify(
    headers: &Headers<'_>,
    body: &[u8],
    context: VerifyContext<'_>,
) -> Result<(), VerifyError> {
    let value = headers
        .get_any(&[HEADER, EVENTS_HEADER])
        .ok_or(VerifyError::MissingHeader(HEADER))?;
    let candidate = BASE64
        .decode(value)
        .ok()
        .filter(|candidate| candidate.len() == mac::MAC_LEN)
        .ok_or(VerifyError::MalformedHeader(HEADER))?;
    if mac::any_matches(context.secrets, &[body], &[candidate]) {
        Ok(())
    } else {
        Err(VerifyError::NoMatchingSignature)
    }
}

/// The `X-Shopify-Hmac-Sha256` value Shopify would send for `body`.
pub fn sign(secret: &Secret, body: &[u8]) -> String {
    BASE64.encode(mac::hmac_sha256(secret.expose(), &[body]))
}

/// The headers Shopify sends with `body`: the topic (required), the shop the integration
/// expects (so the request passes its scope check) and fresh webhook and event ids.
fn signed_headers(signing: &Signing<'_>) -> Result<Vec<(String, String)>, SignError> {
    let Some(topic) = signing.header_event_type else {
        return Err(SignError::TypeNeeded {
            integration: signing.integration.id.clone(),
            header: "X-Shopify-Topic".to_owned(),
        });
    };
    let shop = signing
        .integration
        .expect
        .shop_domain
        .as_deref()
        .unwrap_or("example.myshopify.com");
    Ok(vec![
        (
            "X-Shopify-Hmac-Sha256".into(),
            sign(signing.secret, signing.body),
        ),
        ("X-Shopify-Topic".into(), topic.to_owned()),
        ("X-Shopify-Shop-Domain".into(), shop.to_owned()),
        (
            "X-Shopify-Webhook-Id".into(),
            format!("webhook-{}", signing.unique),
        ),
        (
            "X-Shopify-Event-Id".into(),
            format!("event-{}", signing.unique),
        ),
    ])
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
pub(crate) fn extract<'body>(
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
    let triggered_at = header("shopify-triggered-at").and_then(subject::rfc3339);
    Ok(Extracted::Event(Event {
        event_id: EventId::new(event_id),
        route_keys: vec![topic.clone()],
        source_scope: SourceScope::from_parts([integration.id.as_str(), &shop, &topic]),
        event_type: topic,
        delivery,
        subject: shopify_subject(payload_json),
        event_at: triggered_at,
        payload_json: Cow::Borrowed(payload_json),
    }))
}

/// The resource a body is ("By default, the body is the full REST resource payload for
/// the topic": <https://shopify.dev/docs/apps/build/webhooks/delivery-structure>).
#[derive(Deserialize)]
struct ShopifyResource<'a> {
    #[serde(borrow)]
    admin_graphql_api_id: Raw<'a>,
    #[serde(borrow)]
    id: Raw<'a>,
}

/// The subject: the resource's GraphQL id (`gid://shopify/Order/820982911946154508`, which
/// names its kind), else its `id` (an `orders/delete` body is only `{"id": …}`). Shopify
/// sends every identifier in headers, so this is the one read of its body; one it cannot
/// read (a repeated key) has no subject and is still accepted.
fn shopify_subject(payload_json: &str) -> Option<String> {
    let resource: ShopifyResource<'_> = serde_json::from_str(payload_json).ok()?;
    subject::bounded(subject::text(resource.admin_graphql_api_id))
        .or_else(|| subject::bounded(subject::text(resource.id)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_events_preview_header_name_verifies_too() {
        let secret = Secret::new(b"shpss_1".to_vec());
        let body = br#"{"id":1}"#;
        let signature = sign(&secret, body);
        let secrets = [secret];
        let context = VerifyContext {
            secrets: &secrets,
            public_keys: &[],
            tolerance_secs: 300,
            now_unix_secs: 0,
        };
        for name in ["x-shopify-hmac-sha256", "shopify-hmac-sha256"] {
            let headers: Headers = [(name, signature.as_bytes())].into_iter().collect();
            assert_eq!(verify(&headers, body, context), Ok(()), "{name}");
        }
    }
}
