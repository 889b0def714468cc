//! The configuration file: TOML as docs/contract.md gives it, parsed into raw structs, then
//! validated into [`Config`] with every secret reference resolved.
//!
//! Validation fails fast with one line naming the bad field, e.g.
//! `integration[0] (stripe-acme).provider: unknown provider "strip" (expected one of …)`.
//! No message ever contains a secret's value.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde::Deserialize;

use crate::secret::{Secret, SecretUrl, is_reference, resolve_reference};
use crate::verify::{Provider, decode_standard_secret};

/// The handler that changes nothing locally and only carries the event to its sinks (the
/// one route handler that may name several sinks).
pub const FORWARD: &str = "forward";

/// Default distance allowed between a signed timestamp and now.
pub const DEFAULT_TOLERANCE_SECS: u64 = 300;
/// Default per-integration body limit (1 MiB).
pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;
/// The largest body limit a configuration may set (64 MiB).
pub const MAX_MAX_BODY_BYTES: usize = 64 * 1024 * 1024;
/// Default time a sink keeps idempotency keys.
pub const DEFAULT_IDEMPOTENCY_RETENTION_SECS: u64 = 86_400;
/// Default per-request timeout towards a sink.
pub const DEFAULT_SINK_TIMEOUT_SECS: u64 = 10;
/// How long an effect that never reached its sink keeps being retried before it goes to
/// review, unless the sink says otherwise: three days (an outage is not a verdict).
pub const DEFAULT_GIVE_UP_AFTER_SECS: u64 = 3 * 86_400;
/// How long an uncertain effect keeps being reconciled before it goes to review, unless
/// the sink says otherwise: a day.
pub const DEFAULT_RECONCILE_FOR_SECS: u64 = 86_400;
/// Consecutive transport failures (refused, reset, timed out) that open a sink's circuit
/// breaker, unless the sink says otherwise.
pub const DEFAULT_BREAKER_FAILURES: u32 = 5;
/// How long an open breaker pauses its sink before one probe, unless the sink says
/// otherwise.
pub const DEFAULT_BREAKER_PAUSE_SECS: u64 = 30;
/// The longest duration a sink setting may name (ten years): every duration stays far
/// from overflowing PostgreSQL's interval arithmetic.
pub const MAX_SINK_SECS: u64 = 10 * 365 * 86_400;

/// Why a configuration cannot be used. Each variant displays as one line.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {reason}")]
    Unreadable {
        /// The path given.
        path: String,
        /// The operating system's reason.
        reason: String,
    },
    /// The TOML does not parse or does not fit the schema.
    #[error("config line {line}, column {column}: {message}")]
    Syntax {
        /// 1-based line of the offending text.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What the parser said, flattened to one line.
        message: String,
    },
    /// A field holds a value that is not allowed.
    #[error("{field}: {message}")]
    Invalid {
        /// The path of the field, e.g. `integration[1] (gh).routes."push".sink`.
        field: String,
        /// What is wrong with it.
        message: String,
    },
}

/// A validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    integrations: Vec<Integration>,
    integration_index: HashMap<String, usize>,
    sinks: Vec<Sink>,
}

/// One webhook source, reachable at `POST /webhooks/{id}`.
#[derive(Debug, Clone)]
pub struct Integration {
    /// The route segment and the first part of every source scope.
    pub id: String,
    /// Which verifier and extractor apply.
    pub provider: Provider,
    /// The business tenant this integration's events belong to.
    pub tenant: String,
    /// Every active secret; any one may verify (rotation). Standard Webhooks secrets are
    /// already base64-decoded.
    pub secrets: Vec<Secret>,
    /// Allowed clock distance for signed timestamps, either way.
    pub tolerance_secs: u64,
    /// The body limit, enforced while streaming.
    pub max_body_bytes: usize,
    /// Which account/installation/team verified events must come from.
    pub expect: Expect,
    /// Event type (or GitHub `event.action`) → handler; unlisted types are ignored.
    pub routes: BTreeMap<String, Route>,
    /// Stripe price id → entitlement name, for `entitlements.grant`.
    pub entitlements: BTreeMap<String, String>,
    /// GitHub only: a second receipt key on the SHA-256 of the raw body, so that a signed
    /// body replayed under a new (unsigned) delivery id is a duplicate while its receipt
    /// is kept.
    pub content_dedupe: bool,
    /// The team or rota that answers for this integration's receipts (an alert label and
    /// an `inboundctl` filter).
    pub owner: Option<String>,
    /// Alert when no verified delivery arrived for this long (providers disable an
    /// endpoint silently after repeated failures); `None`: no such alert.
    pub alert_when_silent_secs: Option<u64>,
    /// How long the provider waits for an answer; the ingress's p99 alert fires at half.
    pub provider_timeout_secs: u64,
}

/// Expected scope values; `None` means "any".
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// Stripe: the connected account (`account`), or absent for platform events.
    pub account: Option<String>,
    /// Stripe: `livemode`.
    pub livemode: Option<bool>,
    /// GitHub: the signed body's `installation.id` (GitHub Apps), as a string.
    pub installation_id: Option<String>,
    /// GitHub: the signed body's `organization.id`, as a string.
    pub organization_id: Option<String>,
    /// GitHub: the signed body's `repository.id`, as a string.
    pub repository_id: Option<String>,
    /// GitHub: `X-GitHub-Hook-Installation-Target-ID`, as a string. GitHub does not sign
    /// it: anyone replaying a signed body can set it, so prefer the three above.
    pub installation_target_id: Option<String>,
    /// Slack: `team_id`.
    pub team_id: Option<String>,
    /// Slack: `api_app_id`.
    pub api_app_id: Option<String>,
}

/// Where a routed event goes. The key it is configured under is an event type, a
/// pattern `prefix.*` (every type that starts with `prefix.`), or `*` (every type); see
/// [`crate::event::find_route`] for which wins.
#[derive(Debug, Clone, PartialEq)]
pub struct Route {
    /// A handler name. Only the worker that runs it knows whether it exists: the ingress
    /// and `inboundctl check-config` accept any name, and a worker refuses to start when a
    /// routed handler is not registered.
    pub handler: String,
    /// The sinks that receive the transition's effects: at most one, except for
    /// `forward`, which sends one intent to each.
    pub sinks: Vec<String>,
    /// The route's `options` table, for the handler (validated by it when a worker
    /// starts); an empty object when absent.
    pub options: serde_json::Value,
}

impl Route {
    /// The route's (first) sink.
    pub fn sink(&self) -> Option<&str> {
        self.sinks.first().map(String::as_str)
    }
}

/// The suffix that makes a route key a pattern.
pub const PATTERN_SUFFIX: &str = ".*";
/// The route key that matches every event type.
pub const CATCH_ALL: &str = "*";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRoute {
    handler: String,
    sink: Option<String>,
    sinks: Option<Vec<String>>,
    options: Option<toml::Table>,
}

/// A downstream service that receives effects.
#[derive(Debug, Clone)]
pub struct Sink {
    /// Referenced by routes.
    pub id: String,
    /// Where effects are POSTed (from the file, or from an `env:`/`file:` reference when
    /// it carries a token).
    pub url: SecretUrl,
    /// The header that carries the operation key, when the receiver supports idempotency.
    pub idempotency_header: Option<String>,
    /// How long the receiver remembers idempotency keys.
    pub idempotency_retention_secs: u64,
    /// Reconciliation endpoint with a `{key}` placeholder (a reference too, if need be).
    pub status_url: Option<SecretUrl>,
    /// Per-request timeout.
    pub timeout_secs: u64,
    /// Standard Webhooks signing keys (decoded); empty means unsigned.
    pub secrets: Vec<Secret>,
    /// Deliveries and reconciliations in flight to it at once, per worker (`None`: the
    /// worker's default, half its `--effect-concurrency`).
    pub max_concurrency: Option<usize>,
    /// How long an effect that never reached it keeps being retried before review.
    pub give_up_after_secs: u64,
    /// How long an uncertain effect keeps being reconciled before review.
    pub reconcile_for_secs: u64,
    /// Consecutive transport failures that open its circuit breaker.
    pub breaker_failures: u32,
    /// How long an open breaker pauses it before one probe.
    pub breaker_pause_secs: u64,
    /// The team or rota that answers for this sink's effects (an alert label and an
    /// `inboundctl` filter).
    pub owner: Option<String>,
}

impl Config {
    /// Reads, parses and validates the file at `path`, resolving `env:` references from
    /// the process environment.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Unreadable {
            path: path.display().to_string(),
            reason: error.kind().to_string(),
        })?;
        Self::from_toml(&text, &|name| std::env::var(name).ok())
    }

    /// Parses and validates `text`; `env_lookup` resolves `env:` references.
    pub fn from_toml(
        text: &str,
        env_lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let raw: RawConfig = toml::from_str(text).map_err(|error| syntax_error(text, &error))?;
        validate(raw, env_lookup)
    }

    /// The first route of an integration `checked` selects whose handler is not among
    /// `known_handlers`, as a one-line error naming it (a worker refuses to start on it;
    /// `check-config --handlers` reports it).
    pub fn check_handlers(
        &self,
        known_handlers: &[&str],
        checked: &dyn Fn(&str) -> bool,
    ) -> Result<(), ConfigError> {
        let mut listed: Vec<&str> = known_handlers.to_vec();
        listed.sort_unstable();
        listed.dedup();
        for (index, integration) in self.integrations.iter().enumerate() {
            if !checked(&integration.id) {
                continue;
            }
            for (key, route) in &integration.routes {
                if !known_handlers.contains(&route.handler.as_str()) {
                    return Err(invalid(
                        format!(
                            "integration[{index}] ({}).routes.{key:?}.handler",
                            integration.id
                        ),
                        format!(
                            "handler {:?} is not registered in this worker (it has: {})",
                            route.handler,
                            listed.join(", ")
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Every integration, in file order.
    pub fn integrations(&self) -> &[Integration] {
        &self.integrations
    }

    /// The integration with this id.
    pub fn integration(&self, id: &str) -> Option<&Integration> {
        self.integration_index
            .get(id)
            .map(|&index| &self.integrations[index])
    }

    /// Every sink, in file order.
    pub fn sinks(&self) -> &[Sink] {
        &self.sinks
    }

    /// The sink with this id.
    pub fn sink(&self, id: &str) -> Option<&Sink> {
        self.sinks.iter().find(|sink| sink.id == id)
    }
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
    owner: Option<String>,
    alert_when_silent_secs: Option<u64>,
    provider_timeout_secs: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSink {
    id: String,
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

fn invalid(field: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        field: field.into(),
        message: message.into(),
    }
}

/// Ids appear in URLs and metric labels: keep them to a safe, boring alphabet.
fn is_valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.'))
}

const ID_RULE: &str = "must be 1-64 characters of letters, digits, '-', '_' or '.'";

/// The shortest silence worth an alert: below it, the gap between two ordinary
/// deliveries would page.
const MIN_SILENCE_SECS: u64 = 60;
/// The longest: the alert looks back a week for the last delivery (so that restarts
/// forget nothing), and a threshold must fit inside with room to fire.
const MAX_SILENCE_SECS: u64 = 6 * 86_400;

/// An owner is a metric label and an alert route: the id alphabet, or nothing.
fn validate_owner(path: &str, owner: Option<String>) -> Result<Option<String>, ConfigError> {
    match owner {
        Some(owner) if !is_valid_id(&owner) => Err(invalid(format!("{path}.owner"), ID_RULE)),
        owner => Ok(owner),
    }
}

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
    let provider = Provider::from_name(&raw.provider).ok_or_else(|| {
        let names: Vec<&str> = Provider::ALL
            .iter()
            .map(|provider| provider.name())
            .collect();
        invalid(
            format!("{path}.provider"),
            format!(
                "unknown provider {:?} (expected one of {})",
                raw.provider,
                names.join(", ")
            ),
        )
    })?;
    if raw.tenant.trim().is_empty() {
        return Err(invalid(format!("{path}.tenant"), "must not be empty"));
    }
    let secrets = resolve_secrets(
        path,
        &raw.secrets,
        provider == Provider::Standard,
        env_lookup,
    )?;
    if secrets.is_empty() {
        return Err(invalid(
            format!("{path}.secrets"),
            "needs at least one secret reference",
        ));
    }
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
    validate_expect(path, provider, &raw.expect)?;
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
    if raw.content_dedupe && provider != Provider::Github {
        return Err(invalid(
            format!("{path}.content_dedupe"),
            format!(
                "applies to provider github only ({} signs its event ids)",
                provider.name()
            ),
        ));
    }
    let mut routes = BTreeMap::new();
    for (key, raw_route) in raw.routes {
        let route_path = format!("{path}.routes.{key:?}");
        let route = validate_route(&route_path, &key, raw_route, sinks)?;
        routes.insert(key, route);
    }
    Ok(Integration {
        id: raw.id,
        provider,
        tenant: raw.tenant,
        secrets,
        tolerance_secs,
        max_body_bytes,
        expect: raw.expect,
        routes,
        entitlements: raw.entitlements,
        content_dedupe: raw.content_dedupe,
        owner: validate_owner(path, raw.owner)?,
        alert_when_silent_secs,
        provider_timeout_secs,
    })
}

/// A route key, its sinks and its options.
fn validate_route(
    route_path: &str,
    key: &str,
    raw: RawRoute,
    sinks: &[Sink],
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
    Ok(Route {
        handler: raw.handler,
        sinks: sinks_named,
        options,
    })
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
        Provider::Standard => &[],
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

fn resolve_secrets(
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

fn validate_sink(
    path: &str,
    raw: RawSink,
    env_lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Sink, ConfigError> {
    if !is_valid_id(&raw.id) {
        return Err(invalid(format!("{path}.id"), ID_RULE));
    }
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
    if let Some(header) = &raw.idempotency_header
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
    let timeout_secs = seconds(
        "timeout_secs",
        raw.timeout_secs,
        DEFAULT_SINK_TIMEOUT_SECS,
        1,
    )?;
    let idempotency_retention_secs = seconds(
        "idempotency_retention_secs",
        raw.idempotency_retention_secs,
        DEFAULT_IDEMPOTENCY_RETENTION_SECS,
        0,
    )?;
    let give_up_after_secs = seconds(
        "give_up_after_secs",
        raw.give_up_after_secs,
        DEFAULT_GIVE_UP_AFTER_SECS,
        1,
    )?;
    let reconcile_for_secs = seconds(
        "reconcile_for_secs",
        raw.reconcile_for_secs,
        DEFAULT_RECONCILE_FOR_SECS,
        1,
    )?;
    let breaker_pause_secs = seconds(
        "breaker_pause_secs",
        raw.breaker_pause_secs,
        DEFAULT_BREAKER_PAUSE_SECS,
        1,
    )?;
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
    let secrets = resolve_secrets(path, &raw.secrets, true, env_lookup)?;
    Ok(Sink {
        id: raw.id,
        url,
        idempotency_header: raw.idempotency_header,
        idempotency_retention_secs,
        status_url,
        timeout_secs,
        secrets,
        max_concurrency: raw.max_concurrency,
        give_up_after_secs,
        reconcile_for_secs,
        breaker_failures,
        breaker_pause_secs,
        owner: validate_owner(path, raw.owner)?,
    })
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

#[cfg(test)]
mod tests;
