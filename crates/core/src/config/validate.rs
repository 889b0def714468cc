//! From TOML to a validated [`Config`](super::Config): the raw structs serde reads, and
//! the checks on integrations, routes and scopes, each failing with one line that names
//! the field. Sinks and secret references are [`super::sinks`]'s.

use std::collections::{BTreeMap, HashMap};

use serde::Deserialize;

use super::rules::{ID_RULE, invalid, is_valid_id, validate_owner};
use super::sinks::{RawSink, resolve_secrets, validate_sink};
use super::*;
use crate::verify::{MAX_KEYS, Provider};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRoute {
    handler: String,
    sink: Option<String>,
    sinks: Option<Vec<String>>,
    options: Option<toml::Table>,
    subject: Option<Vec<String>>,
    #[serde(default)]
    ordered: bool,
}

/// Parses and validates `text` (the body of [`Config::from_toml`]).
pub(super) fn parse(
    text: &str,
    env_lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, ConfigError> {
    let raw: RawConfig = toml::from_str(text).map_err(|error| syntax_error(text, &error))?;
    validate(raw, env_lookup)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    integration: Vec<RawIntegration>,
    #[serde(default)]
    sink: Vec<RawSink>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawIntegration {
    id: String,
    provider: String,
    tenant: String,
    secrets: Vec<String>,
    tolerance_secs: Option<u64>,
    max_body_bytes: Option<usize>,
    #[serde(default)]
    expect: Expect,
    #[serde(default)]
    routes: BTreeMap<String, RawRoute>,
    #[serde(default)]
    entitlements: BTreeMap<String, String>,
    #[serde(default)]
    content_dedupe: bool,
    content_type: Option<String>,
    owner: Option<String>,
    alert_when_silent_secs: Option<u64>,
    provider_timeout_secs: Option<u64>,
    hmac: Option<super::custom::RawHmac>,
    token: Option<super::custom::RawToken>,
    fields: Option<super::custom::RawFields>,
    stripe: Option<RawStripe>,
}

/// `[integration.stripe]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStripe {
    account: Option<String>,
    #[serde(default)]
    connect: bool,
}

fn syntax_error(text: &str, error: &toml::de::Error) -> ConfigError {
    let offset = error.span().map_or(0, |span| span.start).min(text.len());
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before
        .rfind('\n')
        .map_or(offset, |newline| offset - newline - 1)
        + 1;
    ConfigError::Syntax {
        line,
        column,
        message: error
            .message()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" "),
    }
}

/// The shortest silence worth an alert: below it, the gap between two ordinary
/// deliveries would page.
const MIN_SILENCE_SECS: u64 = 60;
/// The longest: the alert looks back a week for the last delivery (so that restarts
/// forget nothing), and a threshold must fit inside with room to fire.
const MAX_SILENCE_SECS: u64 = 6 * 86_400;

fn validate(
    raw: RawConfig,
    env_lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, ConfigError> {
    let mut sinks = Vec::with_capacity(raw.sink.len());
    for (index, raw_sink) in raw.sink.into_iter().enumerate() {
        let path = format!("sink[{index}] ({})", raw_sink.id);
        if sinks.iter().any(|sink: &Sink| sink.id == raw_sink.id) {
            return Err(invalid(format!("{path}.id"), "duplicate sink id"));
        }
        sinks.push(validate_sink(&path, raw_sink, env_lookup)?);
    }

    let mut integrations = Vec::with_capacity(raw.integration.len());
    let mut integration_index = HashMap::new();
    for (index, raw_integration) in raw.integration.into_iter().enumerate() {
        let path = format!("integration[{index}] ({})", raw_integration.id);
        if integration_index.contains_key(&raw_integration.id) {
            return Err(invalid(format!("{path}.id"), "duplicate integration id"));
        }
        let integration = validate_integration(&path, raw_integration, &sinks, env_lookup)?;
        integration_index.insert(integration.id.clone(), integrations.len());
        integrations.push(integration);
    }
    Ok(Config {
        integrations,
        integration_index,
        sinks,
    })
}

fn validate_integration(
    path: &str,
    raw: RawIntegration,
    sinks: &[Sink],
    env_lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Integration, ConfigError> {
    if !is_valid_id(&raw.id) {
        return Err(invalid(format!("{path}.id"), ID_RULE));
    }
    let provider = provider_named(path, &raw.provider)?;
    if raw.tenant.trim().is_empty() {
        return Err(invalid(format!("{path}.tenant"), "must not be empty"));
    }
    let (secrets, public_keys) = if provider == Provider::Standard {
        super::sinks::resolve_standard_keys(path, &raw.secrets, env_lookup)?
    } else {
        (
            resolve_secrets(path, &raw.secrets, false, env_lookup)?,
            Vec::new(),
        )
    };
    if secrets.is_empty() && public_keys.is_empty() {
        return Err(invalid(
            format!("{path}.secrets"),
            "needs at least one secret reference",
        ));
    }
    // Every secret and key is tried on every request, verified or forged (verify.rs).
    if secrets.len() > MAX_KEYS || public_keys.len() > MAX_KEYS {
        return Err(invalid(
            format!("{path}.secrets"),
            format!(
                "holds more than {MAX_KEYS} secrets or {MAX_KEYS} public keys: each is tried on every request (a rotation needs two)"
            ),
        ));
    }
    let limits = IntegrationLimits::read(path, provider, &raw)?;
    validate_expect(path, provider, &raw.expect)?;
    let custom = super::custom::validate_custom(
        path,
        provider,
        super::custom::RawCustom {
            hmac: raw.hmac,
            token: raw.token,
            fields: raw.fields,
        },
    )?;
    if raw.expect.scope.is_some()
        && custom
            .as_ref()
            .is_some_and(|custom| custom.fields.scope.is_none())
    {
        return Err(invalid(
            format!("{path}.expect.scope"),
            "needs [integration.fields].scope: where the scope comes from",
        ));
    }
    if raw.content_dedupe && provider != Provider::Github {
        return Err(invalid(
            format!("{path}.content_dedupe"),
            format!(
                "applies to provider github only ({} signs its event ids)",
                provider.name()
            ),
        ));
    }
    let github_content_type = validate_content_type(path, provider, raw.content_type)?;
    let stripe = validate_stripe(path, provider, raw.stripe, &raw.expect)?;
    let mut routes = BTreeMap::new();
    for (key, raw_route) in raw.routes {
        let route_path = format!("{path}.routes.{key:?}");
        let route = validate_route(&route_path, &key, raw_route, sinks, provider)?;
        routes.insert(key, route);
    }
    Ok(Integration {
        id: raw.id,
        provider,
        tenant: raw.tenant,
        secrets,
        public_keys,
        tolerance_secs: limits.tolerance_secs,
        max_body_bytes: limits.max_body_bytes,
        expect: raw.expect,
        routes,
        entitlements: raw.entitlements,
        content_dedupe: raw.content_dedupe,
        github_content_type,
        owner: validate_owner(path, raw.owner)?,
        alert_when_silent_secs: limits.alert_when_silent_secs,
        provider_timeout_secs: limits.provider_timeout_secs,
        custom,
        stripe,
    })
}

/// `content_type`: GitHub's alone (`form`, its default, or `json`); every other provider
/// sends JSON.
fn validate_content_type(
    path: &str,
    provider: Provider,
    raw: Option<String>,
) -> Result<Option<GithubContentType>, ConfigError> {
    let field = format!("{path}.content_type");
    if provider != Provider::Github {
        return match raw {
            None => Ok(None),
            Some(_) => Err(invalid(
                field,
                format!(
                    "applies to provider github only ({} sends JSON)",
                    provider.name()
                ),
            )),
        };
    }
    match raw.as_deref() {
        None => Ok(Some(GithubContentType::default())),
        Some("form") => Ok(Some(GithubContentType::Form)),
        Some("json") => Ok(Some(GithubContentType::Json)),
        Some(other) => Err(invalid(
            field,
            format!(
                "is {other:?}: use \"form\" (application/x-www-form-urlencoded, what GitHub creates by default) or \"json\" (application/json), as the hook's Content type says"
            ),
        )),
    }
}

/// `[integration.stripe]`: exactly one of `account` (an account endpoint's own account)
/// and `connect = true`; an account endpoint's events name no connected account, so
/// `expect.account` contradicts it.
fn validate_stripe(
    path: &str,
    provider: Provider,
    raw: Option<RawStripe>,
    expect: &Expect,
) -> Result<Option<StripeEndpoint>, ConfigError> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let field = format!("{path}.stripe");
    if provider != Provider::Stripe {
        return Err(invalid(
            field,
            format!("applies to provider stripe only, not {}", provider.name()),
        ));
    }
    match (raw.account, raw.connect) {
        (Some(account), false) => {
            if !account.starts_with("acct_") || account.len() > 255 {
                return Err(invalid(
                    format!("{field}.account"),
                    "must be a Stripe account id (acct_…)",
                ));
            }
            if expect.account.is_some() {
                return Err(invalid(
                    format!("{path}.expect.account"),
                    "names a connected account, and stripe.account says this is an account endpoint, whose events name none: use stripe.connect = true",
                ));
            }
            Ok(Some(StripeEndpoint::Account(account)))
        }
        (None, true) => Ok(Some(StripeEndpoint::Connect)),
        _ => Err(invalid(
            field,
            "needs exactly one of account = \"acct_…\" (an account endpoint: the account's own events) and connect = true (a Connect endpoint: connected accounts' events)",
        )),
    }
}

fn provider_named(path: &str, name: &str) -> Result<Provider, ConfigError> {
    Provider::from_name(name).ok_or_else(|| {
        let names: Vec<&str> = Provider::ALL
            .iter()
            .map(|provider| provider.name())
            .collect();
        invalid(
            format!("{path}.provider"),
            format!(
                "unknown provider {name:?} (expected one of {})",
                names.join(", ")
            ),
        )
    })
}

/// An integration's times and sizes, each defaulted and within its bounds.
struct IntegrationLimits {
    tolerance_secs: u64,
    max_body_bytes: usize,
    alert_when_silent_secs: Option<u64>,
    provider_timeout_secs: u64,
}

impl IntegrationLimits {
    fn read(path: &str, provider: Provider, raw: &RawIntegration) -> Result<Self, ConfigError> {
        let tolerance_secs = raw.tolerance_secs.unwrap_or(DEFAULT_TOLERANCE_SECS);
        if tolerance_secs == 0 {
            return Err(invalid(
                format!("{path}.tolerance_secs"),
                "must be at least 1",
            ));
        }
        let max_body_bytes = raw.max_body_bytes.unwrap_or(DEFAULT_MAX_BODY_BYTES);
        if max_body_bytes == 0 || max_body_bytes > MAX_MAX_BODY_BYTES {
            return Err(invalid(
                format!("{path}.max_body_bytes"),
                format!("must be between 1 and {MAX_MAX_BODY_BYTES}"),
            ));
        }
        let alert_when_silent_secs = raw.alert_when_silent_secs;
        if alert_when_silent_secs
            .is_some_and(|secs| !(MIN_SILENCE_SECS..=MAX_SILENCE_SECS).contains(&secs))
        {
            return Err(invalid(
                format!("{path}.alert_when_silent_secs"),
                format!(
                    "must be between {MIN_SILENCE_SECS} and {MAX_SILENCE_SECS} (6 days: the alert looks back a week)"
                ),
            ));
        }
        let provider_timeout_secs = raw
            .provider_timeout_secs
            .unwrap_or_else(|| provider.delivery_timeout_secs());
        if provider_timeout_secs == 0 {
            return Err(invalid(
                format!("{path}.provider_timeout_secs"),
                "must be at least 1",
            ));
        }
        Ok(Self {
            tolerance_secs,
            max_body_bytes,
            alert_when_silent_secs,
            provider_timeout_secs,
        })
    }
}

/// A route key, its sinks and its options.
fn validate_route(
    route_path: &str,
    key: &str,
    raw: RawRoute,
    sinks: &[Sink],
    provider: Provider,
) -> Result<Route, ConfigError> {
    if key.is_empty() {
        return Err(invalid(route_path, "event type must not be empty"));
    }
    let prefix = key.strip_suffix(PATTERN_SUFFIX).unwrap_or(key);
    if key != CATCH_ALL && (prefix.contains('*') || prefix.is_empty()) {
        return Err(invalid(
            route_path,
            "`*` may only end a pattern as `prefix.*` (every type starting with `prefix.`) or be the whole key `*`",
        ));
    }
    if raw.handler.trim().is_empty() {
        return Err(invalid(
            format!("{route_path}.handler"),
            "must not be empty",
        ));
    }
    let sinks_named = match (raw.sink, raw.sinks) {
        (Some(_), Some(_)) => {
            return Err(invalid(
                route_path,
                "give either `sink` or `sinks`, not both",
            ));
        }
        (Some(sink), None) => vec![sink],
        (None, Some(list)) => list,
        (None, None) => Vec::new(),
    };
    for (index, sink) in sinks_named.iter().enumerate() {
        if !sinks.iter().any(|known| &known.id == sink) {
            return Err(invalid(
                format!("{route_path}.sink"),
                format!("unknown sink {sink:?} (no [[sink]] has that id)"),
            ));
        }
        if sinks_named[..index].contains(sink) {
            return Err(invalid(
                format!("{route_path}.sinks"),
                format!("sink {sink:?} is named twice"),
            ));
        }
    }
    if raw.handler == FORWARD && sinks_named.is_empty() {
        return Err(invalid(
            format!("{route_path}.sink"),
            "the forward handler needs a sink to forward to",
        ));
    }
    if raw.handler != FORWARD && sinks_named.len() > 1 {
        return Err(invalid(
            format!("{route_path}.sinks"),
            "only forward sends to several sinks; a business handler names one",
        ));
    }
    let options = options_as_json(raw.options.unwrap_or_default()).ok_or_else(|| {
        invalid(
            format!("{route_path}.options"),
            "cannot be passed to a handler (dates and non-finite numbers are not supported; write them as strings)",
        )
    })?;
    let subject = validate_subject(route_path, raw.subject)?;
    if raw.ordered && subject.is_empty() && provider.default_subject().is_none() {
        return Err(invalid(
            format!("{route_path}.ordered"),
            format!(
                "{} events name no subject by default: give the route `subject = [\"/json/pointer\", …]`",
                provider.name()
            ),
        ));
    }
    Ok(Route {
        handler: raw.handler,
        sinks: sinks_named,
        options,
        subject,
        ordered: raw.ordered,
    })
}

/// A route's subject pointers: JSON pointers into the body, at most
/// [`MAX_SUBJECT_POINTERS`].
fn validate_subject(
    route_path: &str,
    pointers: Option<Vec<String>>,
) -> Result<Vec<String>, ConfigError> {
    let Some(pointers) = pointers else {
        return Ok(Vec::new());
    };
    let field = format!("{route_path}.subject");
    if pointers.is_empty() || pointers.len() > MAX_SUBJECT_POINTERS {
        return Err(invalid(
            field,
            format!("name 1 to {MAX_SUBJECT_POINTERS} JSON pointers, tried in order"),
        ));
    }
    if let Some(bad) = pointers
        .iter()
        .find(|pointer| !pointer.starts_with('/') || pointer.len() > 1024)
    {
        return Err(invalid(
            field,
            format!("{bad:?} is not a JSON pointer into the body (it starts with '/')"),
        ));
    }
    Ok(pointers)
}

/// A route's options as the JSON its handler reads; `None` for a TOML date or a
/// non-finite float, which JSON cannot carry faithfully.
fn options_as_json(table: toml::Table) -> Option<serde_json::Value> {
    fn convert(value: toml::Value) -> Option<serde_json::Value> {
        Some(match value {
            toml::Value::String(text) => serde_json::Value::String(text),
            toml::Value::Integer(number) => serde_json::Value::from(number),
            toml::Value::Float(number) => {
                serde_json::Value::Number(serde_json::Number::from_f64(number)?)
            }
            toml::Value::Boolean(flag) => serde_json::Value::Bool(flag),
            toml::Value::Datetime(_) => return None,
            toml::Value::Array(items) => {
                serde_json::Value::Array(items.into_iter().map(convert).collect::<Option<_>>()?)
            }
            toml::Value::Table(table) => table_as_json(table)?,
        })
    }
    fn table_as_json(table: toml::Table) -> Option<serde_json::Value> {
        let mut object = serde_json::Map::new();
        for (key, value) in table {
            object.insert(key, convert(value)?);
        }
        Some(serde_json::Value::Object(object))
    }
    table_as_json(table)
}

fn validate_expect(path: &str, provider: Provider, expect: &Expect) -> Result<(), ConfigError> {
    let present = [
        ("account", expect.account.is_some()),
        ("livemode", expect.livemode.is_some()),
        ("installation_id", expect.installation_id.is_some()),
        ("organization_id", expect.organization_id.is_some()),
        ("repository_id", expect.repository_id.is_some()),
        (
            "installation_target_id",
            expect.installation_target_id.is_some(),
        ),
        ("team_id", expect.team_id.is_some()),
        ("api_app_id", expect.api_app_id.is_some()),
        ("shop_domain", expect.shop_domain.is_some()),
        ("account_id", expect.account_id.is_some()),
        ("scope", expect.scope.is_some()),
    ];
    let allowed: &[&str] = match provider {
        Provider::Stripe => &["account", "livemode"],
        Provider::Github => &[
            "installation_id",
            "organization_id",
            "repository_id",
            "installation_target_id",
        ],
        Provider::Slack => &["team_id", "api_app_id"],
        Provider::Standard | Provider::Paddle => &[],
        Provider::Shopify => &["shop_domain"],
        Provider::Zoom => &["account_id"],
        Provider::Hmac | Provider::Token => &["scope"],
    };
    for (key, is_set) in present {
        if is_set && !allowed.contains(&key) {
            return Err(invalid(
                format!("{path}.expect.{key}"),
                format!("does not apply to provider {}", provider.name()),
            ));
        }
    }
    Ok(())
}
