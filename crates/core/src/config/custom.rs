//! The configurable schemes' tables: `[integration.hmac]` or `[integration.token]`, and
//! `[integration.fields]` (where the event id, type and scope come from). Combinations
//! that would verify nothing — no signature header, a template that does not sign the
//! body, a timestamp read but not signed — are refused with the field named.

use serde::Deserialize;

use super::rules::invalid;
use super::{ConfigError, Custom, FieldSource, Fields};
use crate::verify::Provider;
use crate::verify::custom::{
    Algorithm, CustomVerifier, Encoding, HmacScheme, Part, TimestampUnit, TokenScheme,
};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHmac {
    header: String,
    #[serde(default)]
    prefix: String,
    separator: Option<String>,
    algorithm: String,
    encoding: String,
    signed: Option<String>,
    timestamp_header: Option<String>,
    timestamp_unit: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawToken {
    header: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFields {
    event_id: RawSource,
    event_type: RawSource,
    scope: Option<RawSource>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSource {
    header: Option<String>,
    pointer: Option<String>,
}

/// What an integration's tables say, before checking.
pub(super) struct RawCustom {
    pub hmac: Option<RawHmac>,
    pub token: Option<RawToken>,
    pub fields: Option<RawFields>,
}

/// The integration's configurable scheme: required for `hmac` and `token`, refused for
/// every other provider (whose verifier and fields are built in).
pub(super) fn validate_custom(
    path: &str,
    provider: Provider,
    raw: RawCustom,
) -> Result<Option<Custom>, ConfigError> {
    let configurable = matches!(provider, Provider::Hmac | Provider::Token);
    if !configurable {
        for (table, present) in [
            ("hmac", raw.hmac.is_some()),
            ("token", raw.token.is_some()),
            ("fields", raw.fields.is_some()),
        ] {
            if present {
                return Err(invalid(
                    format!("{path}.{table}"),
                    format!(
                        "applies to providers hmac and token only ({} has its own)",
                        provider.name()
                    ),
                ));
            }
        }
        return Ok(None);
    }
    let verifier = match (provider, raw.hmac, raw.token) {
        (Provider::Hmac, Some(hmac), None) => CustomVerifier::Hmac(validate_hmac(path, hmac)?),
        (Provider::Token, None, Some(token)) => CustomVerifier::Token(TokenScheme {
            header: header_name(&format!("{path}.token.header"), &token.header)?,
        }),
        (Provider::Hmac, _, _) => {
            return Err(invalid(
                format!("{path}.hmac"),
                "provider hmac needs an [integration.hmac] table (and no token table)",
            ));
        }
        _ => {
            return Err(invalid(
                format!("{path}.token"),
                "provider token needs an [integration.token] table (and no hmac table)",
            ));
        }
    };
    let fields = raw.fields.ok_or_else(|| {
        invalid(
            format!("{path}.fields"),
            "needs an [integration.fields] table: where event_id and event_type come from",
        )
    })?;
    let fields = Fields {
        event_id: source(&format!("{path}.fields.event_id"), fields.event_id)?,
        event_type: source(&format!("{path}.fields.event_type"), fields.event_type)?,
        scope: fields
            .scope
            .map(|scope| source(&format!("{path}.fields.scope"), scope))
            .transpose()?,
    };
    // The signature or token header read as a field would be logged and stored.
    let secret_header = match &verifier {
        CustomVerifier::Hmac(scheme) => &scheme.header,
        CustomVerifier::Token(scheme) => &scheme.header,
    };
    for (name, source) in [
        ("event_id", Some(&fields.event_id)),
        ("event_type", Some(&fields.event_type)),
        ("scope", fields.scope.as_ref()),
    ] {
        if source == Some(&FieldSource::Header(secret_header.clone())) {
            return Err(invalid(
                format!("{path}.fields.{name}"),
                "must not read the signature or token header: it would be logged and stored",
            ));
        }
    }
    Ok(Some(Custom { verifier, fields }))
}

fn validate_hmac(path: &str, raw: RawHmac) -> Result<HmacScheme, ConfigError> {
    let field = |name: &str| format!("{path}.hmac.{name}");
    let header = header_name(&field("header"), &raw.header)?;
    let algorithm = match raw.algorithm.as_str() {
        "sha1" => Algorithm::Sha1,
        "sha256" => Algorithm::Sha256,
        "sha512" => Algorithm::Sha512,
        _ => {
            return Err(invalid(
                field("algorithm"),
                "must be sha1, sha256 or sha512",
            ));
        }
    };
    let encoding = match raw.encoding.as_str() {
        "hex" => Encoding::Hex,
        "base64" => Encoding::Base64,
        _ => return Err(invalid(field("encoding"), "must be hex or base64")),
    };
    match raw.separator.as_deref() {
        Some("") => {
            return Err(invalid(
                field("separator"),
                "must not be empty (omit it for one signature)",
            ));
        }
        Some(separator) if raw.prefix.contains(separator) => {
            return Err(invalid(
                field("separator"),
                "occurs in the prefix, so no signature would keep its prefix",
            ));
        }
        _ => {}
    }
    let signed = template(&field("signed"), raw.signed.as_deref().unwrap_or("{body}"))?;
    let signs_timestamp = signed.contains(&Part::Timestamp);
    let timestamp_header = match (raw.timestamp_header, signs_timestamp) {
        (Some(name), true) => Some(header_name(&field("timestamp_header"), &name)?),
        (None, false) => None,
        (None, true) => {
            return Err(invalid(
                field("timestamp_header"),
                "the template signs {timestamp}: name the header it comes from",
            ));
        }
        (Some(_), false) => {
            return Err(invalid(
                field("timestamp_header"),
                "the template does not sign {timestamp}: an unsigned timestamp proves no freshness",
            ));
        }
    };
    if raw.timestamp_unit.is_some() && !signs_timestamp {
        return Err(invalid(
            field("timestamp_unit"),
            "the template signs no {timestamp}",
        ));
    }
    let timestamp_unit = match raw.timestamp_unit.as_deref() {
        None | Some("seconds") => TimestampUnit::Seconds,
        Some("milliseconds") => TimestampUnit::Milliseconds,
        Some(_) => {
            return Err(invalid(
                field("timestamp_unit"),
                "must be seconds or milliseconds",
            ));
        }
    };
    Ok(HmacScheme {
        header,
        prefix: raw.prefix,
        separator: raw.separator,
        algorithm,
        encoding,
        signed,
        timestamp_header,
        timestamp_unit,
    })
}

/// `{timestamp}` and `{body}` between literal text; the body exactly once.
fn template(field: &str, text: &str) -> Result<Vec<Part>, ConfigError> {
    let mut parts = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let next = rest.find('{').unwrap_or(rest.len());
        if rest[..next].contains('}') {
            return Err(invalid(
                field,
                "only {timestamp} and {body} may stand in braces",
            ));
        }
        if next > 0 {
            parts.push(Part::Literal(rest[..next].to_owned()));
        }
        rest = &rest[next..];
        if let Some(after) = rest.strip_prefix("{body}") {
            parts.push(Part::Body);
            rest = after;
        } else if let Some(after) = rest.strip_prefix("{timestamp}") {
            parts.push(Part::Timestamp);
            rest = after;
        } else if !rest.is_empty() {
            return Err(invalid(
                field,
                "only {timestamp} and {body} may stand in braces",
            ));
        }
    }
    let count = |wanted: &Part| parts.iter().filter(|part| *part == wanted).count();
    if count(&Part::Body) != 1 {
        return Err(invalid(field, "must sign {body} exactly once"));
    }
    if count(&Part::Timestamp) > 1 {
        return Err(invalid(field, "may sign {timestamp} at most once"));
    }
    Ok(parts)
}

/// A header name as configured, stored lower case (as requests present them).
fn header_name(field: &str, name: &str) -> Result<String, ConfigError> {
    if name.is_empty()
        || !name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_')
    {
        return Err(invalid(
            field,
            "must be a header name of letters, digits, '-' and '_'",
        ));
    }
    Ok(name.to_ascii_lowercase())
}

fn source(field: &str, raw: RawSource) -> Result<FieldSource, ConfigError> {
    match (raw.header, raw.pointer) {
        (Some(header), None) => Ok(FieldSource::Header(header_name(field, &header)?)),
        (None, Some(pointer)) if pointer.starts_with('/') => Ok(FieldSource::Pointer(pointer)),
        (None, Some(_)) => Err(invalid(
            field,
            "pointer must be a JSON pointer into the body, starting with '/'",
        )),
        _ => Err(invalid(field, "give either header or pointer")),
    }
}
