//! The configurable schemes, `hmac` and `token`: for senders without a verifier of their
//! own, each integration says how its sender signs (`[integration.hmac]`, or
//! `[integration.token]`, [`crate::verify::custom`]) and where the event's id, type and
//! scope are (`[integration.fields]`: a header, or a JSON pointer into the body).

use std::borrow::Cow;

use super::{Signing, Spec, Verifier};
use crate::config::{FieldSource, Integration};
use crate::event::{
    Event, ExtractError, Extracted, malformed, out_of_scope, pointer, required_identifier,
    route_for_keys,
};
use crate::headers::Headers;
use crate::keys::{EventId, SourceScope};
use crate::sender::SignError;
use crate::verify::custom::{self, CustomVerifier, TimestampUnit};

/// What inbound knows of the configurable schemes (both `hmac` and `token`).
///
/// Redelivery horizon: senders differ and none is named, so the longest any known sender
/// documents, 90 days.
pub(crate) static SPEC: Spec = Spec {
    verify: Verifier::Configured,
    extract,
    sign: signed_headers,
    type_in_a_header: false,
    redelivery_horizon_days: 90,
    known_events: None,
    free_form_actions: &[],
    default_subject: None,
};

/// The headers of a configurable scheme: its signature (or token), its timestamp, and the
/// fields its `[integration.fields]` reads from headers.
fn signed_headers(signing: &Signing<'_>) -> Result<Vec<(String, String)>, SignError> {
    let Signing {
        integration,
        secret,
        now,
        body,
        header_event_type,
        unique,
    } = *signing;
    let Some(custom) = &integration.custom else {
        return Err(SignError::NoScheme(integration.id.clone()));
    };
    let mut headers = match &custom.verifier {
        CustomVerifier::Hmac(scheme) => {
            let timestamp = match scheme.timestamp_unit {
                TimestampUnit::Seconds => now.to_string(),
                TimestampUnit::Milliseconds => (now * 1000).to_string(),
            };
            let mut headers = vec![(
                scheme.header.clone(),
                custom::sign(scheme, secret, &timestamp, body),
            )];
            if let Some(name) = &scheme.timestamp_header {
                headers.push((name.clone(), timestamp));
            }
            headers
        }
        CustomVerifier::Token(scheme) => {
            let token =
                std::str::from_utf8(secret.expose()).map_err(|_| SignError::TokenNotText)?;
            vec![(scheme.header.clone(), token.to_owned())]
        }
    };
    if let FieldSource::Header(name) = &custom.fields.event_id {
        headers.push((name.clone(), format!("evt-{unique}")));
    }
    if let FieldSource::Header(name) = &custom.fields.event_type {
        let Some(event_type) = header_event_type else {
            return Err(SignError::TypeNeeded {
                integration: integration.id.clone(),
                header: name.clone(),
            });
        };
        headers.push((name.clone(), event_type.to_owned()));
    }
    if let Some(FieldSource::Header(name)) = &custom.fields.scope {
        let scope = integration.expect.scope.as_deref().unwrap_or("example");
        headers.push((name.clone(), scope.to_owned()));
    }
    Ok(headers)
}

/// The configurable schemes: each field from the header or the body's JSON pointer its
/// `[integration.fields]` names (a string, or a number or boolean as written).
///
/// The route is decided first: an event of a type no route takes needs no other field and
/// is `ignored` (GitLab's group and member events have no `/project/id`; a 400 for them
/// counts towards GitLab disabling the hook after 4 failures in a row, which also stops
/// the routed events: gitlab-org/gitlab MR 166329). Only a routed event must carry its id
/// and scope.
pub(crate) fn extract<'body>(
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
        subject: None,
        event_at: None,
        payload_json: Cow::Borrowed(payload_json),
    }))
}
