//! Sinks and secret references: a sink's URL (or the reference that holds it), its
//! idempotency, reconciliation and time budgets, and every `env:`/`file:` secret resolved
//! without its value ever reaching a message.

use serde::Deserialize;

use super::rules::{ID_RULE, invalid, is_valid_id, validate_owner};
use super::*;
use crate::secret::{Secret, SecretUrl, is_reference, resolve_reference};
use crate::verify::decode_standard_secret;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSink {
    pub(super) id: String,
    url: String,
    idempotency_header: Option<String>,
    idempotency_retention_secs: Option<u64>,
    status_url: Option<String>,
    timeout_secs: Option<u64>,
    #[serde(default)]
    secrets: Vec<String>,
    max_concurrency: Option<usize>,
    give_up_after_secs: Option<u64>,
    reconcile_for_secs: Option<u64>,
    breaker_failures: Option<u32>,
    breaker_pause_secs: Option<u64>,
    owner: Option<String>,
}

pub(super) fn resolve_secrets(
    path: &str,
    references: &[String],
    standard_encoding: bool,
    env_lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<Secret>, ConfigError> {
    references
        .iter()
        .enumerate()
        .map(|(index, reference)| {
            let field = format!("{path}.secrets[{index}]");
            let value = resolve_reference(reference, env_lookup)
                .map_err(|error| invalid(&field, error.to_string()))?;
            if standard_encoding {
                decode_standard_secret(&value).map_err(|_| {
                    invalid(
                        &field,
                        format!(
                            "{reference} is not a Standard Webhooks secret (expected whsec_ followed by base64)"
                        ),
                    )
                })
            } else {
                Ok(Secret::new(value.into_bytes()))
            }
        })
        .collect()
}

/// A Standard Webhooks integration's keys: each reference resolves to a `whsec_` secret
/// (`v1`, HMAC) or a `whpk_` public key (`v1a`, Ed25519). Errors name the reference, never
/// the value.
pub(super) fn resolve_standard_keys(
    path: &str,
    references: &[String],
    env_lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<(Vec<Secret>, Vec<crate::verify::PublicKey>), ConfigError> {
    let mut secrets = Vec::new();
    let mut public_keys = Vec::new();
    for (index, reference) in references.iter().enumerate() {
        let field = format!("{path}.secrets[{index}]");
        let value = resolve_reference(reference, env_lookup)
            .map_err(|error| invalid(&field, error.to_string()))?;
        if value.starts_with("whpk_") {
            let key = crate::verify::decode_standard_public_key(&value).map_err(|_| {
                invalid(
                    &field,
                    format!("{reference} is not a Standard Webhooks public key (expected whpk_ followed by the base64 of 32 bytes)"),
                )
            })?;
            public_keys.push(key);
        } else {
            secrets.push(decode_standard_secret(&value).map_err(|_| {
                invalid(
                    &field,
                    format!(
                        "{reference} is not a Standard Webhooks secret (expected whsec_ followed by base64) or public key (whpk_)"
                    ),
                )
            })?);
        }
    }
    Ok((secrets, public_keys))
}

pub(super) fn validate_sink(
    path: &str,
    raw: RawSink,
    env_lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Sink, ConfigError> {
    if !is_valid_id(&raw.id) {
        return Err(invalid(format!("{path}.id"), ID_RULE));
    }
    let (url, status_url) = sink_urls(path, &raw, env_lookup)?;
    check_idempotency_header(path, raw.idempotency_header.as_deref())?;
    let times = SinkTimes::read(path, &raw)?;
    let breaker_failures = breaker_failures(path, &raw)?;
    let secrets = resolve_secrets(path, &raw.secrets, true, env_lookup)?;
    Ok(Sink {
        id: raw.id,
        url,
        idempotency_header: raw.idempotency_header,
        idempotency_retention_secs: times.idempotency_retention_secs,
        status_url,
        timeout_secs: times.timeout_secs,
        secrets,
        max_concurrency: raw.max_concurrency,
        give_up_after_secs: times.give_up_after_secs,
        reconcile_for_secs: times.reconcile_for_secs,
        breaker_failures,
        breaker_pause_secs: times.breaker_pause_secs,
        owner: validate_owner(path, raw.owner)?,
    })
}

/// The sink's URL and status URL (with `{key}`), each an http(s) URL once resolved.
fn sink_urls(
    path: &str,
    raw: &RawSink,
    env_lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<(SecretUrl, Option<SecretUrl>), ConfigError> {
    let url = resolve_url(&format!("{path}.url"), &raw.url, env_lookup)?;
    if !is_http_url(url.expose()) {
        return Err(invalid(
            format!("{path}.url"),
            "must be an http:// or https:// URL",
        ));
    }
    let status_url = raw
        .status_url
        .as_deref()
        .map(|status_url| resolve_url(&format!("{path}.status_url"), status_url, env_lookup))
        .transpose()?;
    if let Some(status_url) = &status_url
        && (!is_http_url(status_url.expose()) || !status_url.expose().contains("{key}"))
    {
        return Err(invalid(
            format!("{path}.status_url"),
            "must be an http:// or https:// URL containing {key}",
        ));
    }
    Ok((url, status_url))
}

fn check_idempotency_header(path: &str, header: Option<&str>) -> Result<(), ConfigError> {
    if let Some(header) = header
        && (header.is_empty()
            || !header
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-'))
    {
        return Err(invalid(
            format!("{path}.idempotency_header"),
            "must be a header name of letters, digits and '-'",
        ));
    }
    Ok(())
}

/// A sink's times in seconds, each defaulted and within its bounds.
struct SinkTimes {
    timeout_secs: u64,
    idempotency_retention_secs: u64,
    give_up_after_secs: u64,
    reconcile_for_secs: u64,
    breaker_pause_secs: u64,
}

impl SinkTimes {
    fn read(path: &str, raw: &RawSink) -> Result<Self, ConfigError> {
        let seconds = |field: &str, value: Option<u64>, default: u64, least: u64| {
            let value = value.unwrap_or(default);
            if (least..=MAX_SINK_SECS).contains(&value) {
                Ok(value)
            } else {
                Err(invalid(
                    format!("{path}.{field}"),
                    format!("must be {least} to {MAX_SINK_SECS} seconds"),
                ))
            }
        };
        Ok(Self {
            timeout_secs: seconds(
                "timeout_secs",
                raw.timeout_secs,
                DEFAULT_SINK_TIMEOUT_SECS,
                1,
            )?,
            idempotency_retention_secs: seconds(
                "idempotency_retention_secs",
                raw.idempotency_retention_secs,
                DEFAULT_IDEMPOTENCY_RETENTION_SECS,
                0,
            )?,
            give_up_after_secs: seconds(
                "give_up_after_secs",
                raw.give_up_after_secs,
                DEFAULT_GIVE_UP_AFTER_SECS,
                1,
            )?,
            reconcile_for_secs: seconds(
                "reconcile_for_secs",
                raw.reconcile_for_secs,
                DEFAULT_RECONCILE_FOR_SECS,
                1,
            )?,
            breaker_pause_secs: seconds(
                "breaker_pause_secs",
                raw.breaker_pause_secs,
                DEFAULT_BREAKER_PAUSE_SECS,
                1,
            )?,
        })
    }
}

/// The breaker's failure count (defaulted), after checking the sink's concurrency bound.
fn breaker_failures(path: &str, raw: &RawSink) -> Result<u32, ConfigError> {
    if raw
        .max_concurrency
        .is_some_and(|limit| !(1..=1024).contains(&limit))
    {
        return Err(invalid(
            format!("{path}.max_concurrency"),
            "must be 1 to 1024",
        ));
    }
    let breaker_failures = raw.breaker_failures.unwrap_or(DEFAULT_BREAKER_FAILURES);
    if !(1..=1000).contains(&breaker_failures) {
        return Err(invalid(
            format!("{path}.breaker_failures"),
            "must be 1 to 1000",
        ));
    }
    Ok(breaker_failures)
}

/// A sink URL as written, or resolved from its `env:`/`file:` reference. Errors name the
/// field and the reference, never the value.
fn resolve_url(
    field: &str,
    value: &str,
    env_lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<SecretUrl, ConfigError> {
    if !is_reference(value) {
        return Ok(SecretUrl::new(value));
    }
    resolve_reference(value, env_lookup)
        .map(SecretUrl::new)
        .map_err(|error| invalid(field, error.to_string()))
}

fn is_http_url(url: &str) -> bool {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"));
    rest.is_some_and(|rest| {
        let host = rest.split(['/', '?', '#']).next().unwrap_or("");
        !host.is_empty() && !rest.contains(char::is_whitespace)
    })
}
