//! GitHub's default content type: `application/x-www-form-urlencoded`, the event's JSON in
//! the form field `payload` (github/rest-api-description, webhook `config.content_type`:
//! "Supported values include `json` and `form`. The default is `form`"). GitHub signs the
//! form as sent, so the signature is checked over the raw body first; only then is the
//! JSON read out of it, exactly: strict UTF-8, one `payload` field, nothing replaced.

use std::borrow::Cow;

use crate::headers::Headers;

/// The media type of a form-encoded body.
const FORM: &str = "application/x-www-form-urlencoded";

/// The field GitHub puts the JSON in.
const PAYLOAD_FIELD: &[u8] = b"payload";

/// Whether the delivery declares a form-encoded body.
pub(super) fn is_form(headers: &Headers<'_>) -> bool {
    headers.get("content-type").is_some_and(|declared| {
        declared
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .eq_ignore_ascii_case(FORM)
    })
}

/// The decoded value of the form's one `payload` field. At most as long as `body`.
pub(super) fn payload_field(body: &[u8]) -> Result<String, Cow<'static, str>> {
    let mut found: Option<String> = None;
    for pair in body.split(|&byte| byte == b'&') {
        let (name, value) = match pair.iter().position(|&byte| byte == b'=') {
            Some(at) => (&pair[..at], &pair[at + 1..]),
            None => (pair, &pair[pair.len()..]),
        };
        if decode(name).as_deref() != Some(PAYLOAD_FIELD) {
            continue;
        }
        if found.is_some() {
            return Err("the form has two payload fields".into());
        }
        let value = decode(value).ok_or("the form's payload is not percent-encoded")?;
        found = Some(String::from_utf8(value).map_err(|_| "the form's payload is not UTF-8 text")?);
    }
    found.ok_or_else(|| "the form has no payload field".into())
}

/// `+` is a space; `%XX` is a byte. `None` for a `%` not followed by two hex digits.
fn decode(encoded: &[u8]) -> Option<Vec<u8>> {
    let bad_escape = encoded.iter().enumerate().any(|(at, &byte)| {
        byte == b'%'
            && !encoded
                .get(at + 1..at + 3)
                .is_some_and(|digits| digits.iter().all(u8::is_ascii_hexdigit))
    });
    if bad_escape {
        return None;
    }
    let spaced: Vec<u8> = encoded
        .iter()
        .map(|&byte| if byte == b'+' { b' ' } else { byte })
        .collect();
    Some(percent_encoding::percent_decode(&spaced).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(content_type: &str) -> Headers<'_> {
        [("content-type", content_type.as_bytes())]
            .into_iter()
            .collect()
    }

    #[test]
    fn the_form_media_type_is_recognised_with_parameters_and_any_case() {
        assert!(is_form(&headers("application/x-www-form-urlencoded")));
        assert!(is_form(&headers(
            "Application/X-WWW-Form-Urlencoded; charset=utf-8"
        )));
        assert!(!is_form(&headers("application/json")));
        assert!(!is_form(&[].into_iter().collect()));
    }

    #[test]
    fn the_payload_is_decoded_exactly() {
        assert_eq!(
            payload_field(b"payload=%7B%22a%22%3A%22b+c%2Bd%22%7D").as_deref(),
            Ok(r#"{"a":"b c+d"}"#)
        );
        assert_eq!(
            payload_field(b"other=1&payload=%7B%7D&x").as_deref(),
            Ok("{}")
        );
        assert_eq!(
            payload_field("payload=%C3%A9".as_bytes()).as_deref(),
            Ok("é")
        );
    }

    #[test]
    fn missing_repeated_or_broken_payloads_are_refused() {
        for body in [
            &b"other=1"[..],
            b"",
            b"payload=1&payload=2",
            b"payload=%7",
            b"payload=%zz",
            b"payload=%FF",
        ] {
            assert!(
                payload_field(body).is_err(),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }
}
