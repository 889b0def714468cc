//! GitHub's default content type: `application/x-www-form-urlencoded`, the event's JSON in
//! the form field `payload` (github/rest-api-description, webhook `config.content_type`:
//! "Supported values include `json` and `form`. The default is `form`"). GitHub signs the
//! form as sent, so the signature is checked over the raw body first; only then is the
//! JSON read out of it, exactly: strict UTF-8, the body one `payload` field and nothing
//! else, nothing replaced. Whether a body is read as a form is the integration's
//! `content_type`, never the delivery's unsigned `Content-Type`.

use std::borrow::Cow;

use crate::config::GithubContentType;

/// The media type of a form-encoded body.
pub(super) const FORM: &str = GithubContentType::Form.media_type();

/// The field GitHub puts the JSON in.
const PAYLOAD_FIELD: &[u8] = b"payload";

/// The decoded value of the form's one field, `payload`: the body is `payload=` and the
/// percent-encoded JSON, with no other field (GitHub encodes every `&` and `=` of the JSON).
/// Anything else is refused, never searched for a field: a JSON text holding
/// `&payload=…&` in a string is not a form. At most as long as `body`.
pub(super) fn payload_field(body: &[u8]) -> Result<String, Cow<'static, str>> {
    let value = body
        .strip_prefix(PAYLOAD_FIELD)
        .and_then(|rest| rest.strip_prefix(b"="))
        .ok_or("the form does not start with its payload field")?;
    if value.contains(&b'&') {
        return Err("the form has a field besides payload".into());
    }
    let value = decode(value).ok_or("the form's payload is not percent-encoded")?;
    String::from_utf8(value).map_err(|_| "the form's payload is not UTF-8 text".into())
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

    #[test]
    fn the_payload_is_decoded_exactly() {
        assert_eq!(
            payload_field(b"payload=%7B%22a%22%3A%22b+c%2Bd%22%7D").as_deref(),
            Ok(r#"{"a":"b c+d"}"#)
        );
        assert_eq!(
            payload_field("payload=%C3%A9".as_bytes()).as_deref(),
            Ok("é")
        );
    }

    /// GitHub's form body is `payload=` and the encoded JSON, nothing else: a body that
    /// merely contains such a field among others (a JSON text with `&payload=…&` in a
    /// string) is refused, never searched.
    #[test]
    fn anything_but_one_payload_field_is_refused() {
        for body in [
            &b"other=1&payload=%7B%7D&x"[..],
            b"payload=%7B%7D&x",
            b"x&payload=%7B%7D",
            br#"{"title":"x&payload=%7B%7D&y"}"#,
            b"payload%3D%7B%7D",
            b"Payload=%7B%7D",
        ] {
            assert!(
                payload_field(body).is_err(),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
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
