//! What a delivery is about and when it happened: its **subject** (the business object
//! its event concerns, e.g. a PaymentIntent or `octo/repo#42`) and the provider's own
//! **event time**. Both are read in the provider's one streaming pass over the body
//! (fields typed `Raw` and `Lenient` in its serde struct: no tree, and no value of an
//! unexpected type ever refuses a verified delivery), or, for a route that names its own
//! subject pointers, in one pointer pass ([`subject_at`]). Neither ever refuses a
//! delivery: a subject that is absent, not a string or number, empty or longer than
//! [`MAX_SUBJECT_LEN`] is no subject, and a time that does not parse is no time (the
//! receipt is then ordered by its arrival). docs/contract.md, "Subjects", lists each
//! provider's default and cites its documentation.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use chrono::{DateTime, Utc};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, de::value::MapAccessDeserializer};
use serde_json::value::RawValue;

use super::pointer;

/// The longest subject kept (bytes); a longer one is no subject.
pub const MAX_SUBJECT_LEN: usize = 255;

/// A field of any JSON type, kept as written: read with [`text`].
pub(crate) type Raw<'a> = Option<&'a RawValue>;

/// An object whose fields `T` reads; any other JSON value (a string, `null`, an array) is
/// `Lenient(None)` rather than an error, so a field the provider changed the type of never
/// refuses the delivery.
pub(crate) struct Lenient<T>(pub Option<T>);

impl<T> Default for Lenient<T> {
    fn default() -> Self {
        Self(None)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Lenient<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ObjectOrNothing<T>(PhantomData<T>);

        impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjectOrNothing<T> {
            type Value = Lenient<T>;

            fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                formatter.write_str("any JSON value")
            }

            fn visit_map<M: MapAccess<'de>>(self, map: M) -> Result<Self::Value, M::Error> {
                T::deserialize(MapAccessDeserializer::new(map)).map(|inner| Lenient(Some(inner)))
            }

            fn visit_seq<S: de::SeqAccess<'de>>(self, mut seq: S) -> Result<Self::Value, S::Error> {
                while seq.next_element::<de::IgnoredAny>()?.is_some() {}
                Ok(Lenient(None))
            }

            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok(Lenient(None))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
                Ok(Lenient(None))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
                Ok(Lenient(None))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
                Ok(Lenient(None))
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
                Ok(Lenient(None))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Lenient(None))
            }
            fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Lenient(None))
            }
        }

        deserializer.deserialize_any(ObjectOrNothing(PhantomData))
    }
}

/// A [`Raw`] field's text: a string unescaped, a number as written (never converted, so
/// two ids beyond `u64` stay two); `None` for anything else.
pub(crate) fn text<'a>(raw: Raw<'a>) -> Option<Cow<'a, str>> {
    let raw = raw?.get();
    match raw.as_bytes().first() {
        Some(b'"' | b'-' | b'0'..=b'9') => pointer::scalar_text(raw).ok().flatten(),
        _ => None,
    }
}

/// `text` as a subject, if it is one: not empty, at most [`MAX_SUBJECT_LEN`] bytes.
pub(crate) fn bounded(text: Option<Cow<'_, str>>) -> Option<String> {
    text.filter(|text| !text.is_empty() && text.len() <= MAX_SUBJECT_LEN)
        .map(Cow::into_owned)
}

/// The first of `pointers` (JSON pointers, each starting with `/`) present in `json` as a
/// string or number, bounded as a subject; `None` when none is, or when a key on one of
/// their paths appears twice (which one a reader takes is the sender's choice).
pub fn subject_at(json: &str, pointers: &[String]) -> Option<String> {
    let pointers: Vec<&str> = pointers.iter().map(String::as_str).collect();
    let fields = pointer::read_fields(json, &pointers).ok()?;
    fields
        .into_iter()
        .flatten()
        // A boolean is no object's name.
        .find(|field| field.as_ref() != "true" && field.as_ref() != "false")
        .and_then(|field| bounded(Some(field)))
}

/// An event time given in whole seconds since the Unix epoch (Stripe `created`, Slack
/// `event_time`), as written in `raw`.
pub(crate) fn unix_seconds(raw: Raw<'_>) -> Option<DateTime<Utc>> {
    let seconds: i64 = text(raw)?.parse().ok()?;
    DateTime::from_timestamp(seconds, 0).filter(plausible)
}

/// An event time given in milliseconds since the Unix epoch (Zoom `event_ts`).
pub(crate) fn unix_millis(raw: Raw<'_>) -> Option<DateTime<Utc>> {
    let millis: i64 = text(raw)?.parse().ok()?;
    DateTime::from_timestamp_millis(millis).filter(plausible)
}

/// An RFC 3339 event time (Paddle `occurred_at`, Shopify `X-Shopify-Triggered-At`, a
/// Stripe thin event's `created`), any fraction of a second; kept to the microsecond
/// PostgreSQL stores.
pub fn rfc3339(text: &str) -> Option<DateTime<Utc>> {
    let parsed = DateTime::parse_from_rfc3339(text.trim()).ok()?;
    Some(parsed.with_timezone(&Utc)).filter(plausible)
}

/// [`rfc3339`] of a [`Raw`] string field.
pub(crate) fn rfc3339_field(raw: Raw<'_>) -> Option<DateTime<Utc>> {
    rfc3339(&text(raw)?)
}

/// Within what PostgreSQL's `timestamptz` holds and a microsecond count can carry: years
/// 1 to 9999.
fn plausible(time: &DateTime<Utc>) -> bool {
    use chrono::Datelike;
    (1..=9999).contains(&time.year())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Probe<'a> {
        #[serde(borrow)]
        id: Raw<'a>,
        #[serde(default)]
        inner: Lenient<Inner<'a>>,
    }

    #[derive(Deserialize)]
    struct Inner<'a> {
        #[serde(borrow)]
        id: Raw<'a>,
    }

    fn probe(json: &str) -> (Option<String>, Option<String>) {
        let probe: Probe<'_> = serde_json::from_str(json).expect("parses");
        let inner = probe.inner.0.and_then(|inner| bounded(text(inner.id)));
        (bounded(text(probe.id)), inner)
    }

    #[test]
    fn a_field_of_any_type_is_read_or_ignored_never_refused() {
        assert_eq!(
            probe(r#"{"id":"pi_1","inner":{"id":18446744073709551617}}"#),
            (Some("pi_1".into()), Some("18446744073709551617".into()))
        );
        for odd in [
            r#"{"id":null,"inner":null}"#,
            r#"{"id":[1],"inner":"text"}"#,
            r#"{"id":{"a":1},"inner":[{"id":1}]}"#,
            r#"{"id":true,"inner":7}"#,
            r#"{"id":"","inner":{}}"#,
            "{}",
        ] {
            assert_eq!(probe(odd), (None, None), "{odd}");
        }
        assert_eq!(probe(r#"{"id":"a\"b\u0041"}"#).0.as_deref(), Some("a\"bA"));
        let long = format!(r#"{{"id":"{}"}}"#, "x".repeat(MAX_SUBJECT_LEN + 1));
        assert_eq!(probe(&long).0, None);
        let longest = format!(r#"{{"id":"{}"}}"#, "x".repeat(MAX_SUBJECT_LEN));
        assert!(probe(&longest).0.is_some());
    }

    #[test]
    fn route_pointers_take_the_first_present_string_or_number() {
        let json = r#"{"a":{"b":null},"c":true,"d":42,"e":"x"}"#;
        let pointers = |list: &[&str]| list.iter().map(|p| (*p).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            subject_at(json, &pointers(&["/a/b", "/c", "/d"])),
            Some("42".into())
        );
        assert_eq!(subject_at(json, &pointers(&["/e", "/d"])), Some("x".into()));
        assert_eq!(subject_at(json, &pointers(&["/missing"])), None);
        assert_eq!(subject_at(r#"{"e":"x","e":"y"}"#, &pointers(&["/e"])), None);
    }

    #[test]
    fn event_times_parse_in_each_providers_form_or_are_absent() {
        let raw = |text: &'static str| Some(serde_json::from_str::<&RawValue>(text).expect("raw"));
        assert_eq!(
            unix_seconds(raw("1700000000")).map(|t| t.timestamp()),
            Some(1_700_000_000)
        );
        assert_eq!(unix_seconds(raw("1.5e9")), None);
        assert_eq!(unix_seconds(raw("99999999999999999")), None);
        assert_eq!(
            unix_millis(raw("1635885799302")).map(|t| t.timestamp_millis()),
            Some(1_635_885_799_302)
        );
        let nanos = rfc3339("2025-03-11T20:54:30.516267807Z").expect("nanoseconds");
        assert_eq!(nanos.timestamp_subsec_nanos(), 516_267_807);
        assert!(rfc3339("2024-04-12T13:16:10.809640Z").is_some());
        assert!(rfc3339("2024-04-12T13:16:10+02:00").is_some());
        assert_eq!(rfc3339("yesterday"), None);
        assert_eq!(rfc3339_field(raw("12")), None);
    }
}
