//! The configuration file: TOML as docs/contract.md gives it, parsed into raw structs, then
//! validated into [`Config`] with every secret reference resolved.
//!
//! Validation fails fast with one line naming the bad field, e.g.
//! `integration[0] (stripe-acme).provider: unknown provider "strip" (expected one of …)`.
//! No message ever contains a secret's value.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde::Deserialize;

use crate::secret::{Secret, SecretUrl};
use crate::verify::Provider;

mod custom;
mod rules;
mod sinks;
mod validate;

use rules::invalid;

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

/// How a GitHub hook encodes what it sends: `config.content_type` of the hook, `form`
/// unless whoever created it chose `json` (github/rest-api-description, "Create a
/// repository webhook": "Supported values include `json` and `form`. The default is
/// `form`"; a GitHub App's hook config shows `json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GithubContentType {
    /// `application/x-www-form-urlencoded`: the body is exactly one field, `payload`,
    /// whose value is the event's JSON. What GitHub creates by default.
    #[default]
    Form,
    /// `application/json`: the body is the event's JSON.
    Json,
}

impl GithubContentType {
    /// The configuration's name: `form` or `json`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Form => "form",
            Self::Json => "json",
        }
    }

    /// The media type GitHub declares for it.
    pub const fn media_type(self) -> &'static str {
        match self {
            Self::Form => "application/x-www-form-urlencoded",
            Self::Json => "application/json",
        }
    }
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
    /// Standard Webhooks only: the `whpk_` public keys `v1a` signatures are checked with
    /// (listed among `secrets` in the file; a public key verifies, it cannot sign).
    pub public_keys: Vec<crate::verify::PublicKey>,
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
    /// GitHub only: how the hook encodes its deliveries, chosen when it was created. The
    /// signed body is read this way and no other; a delivery declared the other way is
    /// refused (415). `None` for every other provider.
    pub github_content_type: Option<GithubContentType>,
    /// The team or rota that answers for this integration's receipts (an alert label and
    /// an `inboundctl` filter).
    pub owner: Option<String>,
    /// Alert when no verified delivery arrived for this long (providers disable an
    /// endpoint silently after repeated failures); `None`: no such alert.
    pub alert_when_silent_secs: Option<u64>,
    /// How long the provider waits for an answer; the ingress's p99 alert fires at half.
    pub provider_timeout_secs: u64,
    /// Providers `hmac` and `token`: the scheme and where the event's fields come from.
    pub custom: Option<Custom>,
    /// Stripe only: whose events the endpoint receives (`[integration.stripe]`).
    pub stripe: Option<StripeEndpoint>,
}

/// Whose events a Stripe endpoint receives (<https://docs.stripe.com/connect/webhooks>):
/// an account endpoint gets the account's own events, which name no `account`; a Connect
/// endpoint gets its connected accounts' events, each naming its `account` (and, a thin
/// event, its `context`). `inboundctl stripe backfill` lists the same events, and the
/// ingress takes an event of the other kind as out of scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StripeEndpoint {
    /// `account = "acct_…"`: the account's own events; the id is the account the API key
    /// must belong to.
    Account(String),
    /// `connect = true`: connected accounts' events (`expect.account` may pin one).
    Connect,
}

impl Integration {
    /// Whose events this Stripe integration receives: `[integration.stripe]`, else a
    /// Connect endpoint when `expect.account` names a connected account; `None` when the
    /// configuration does not say.
    pub fn stripe_endpoint(&self) -> Option<StripeEndpoint> {
        self.stripe.clone().or_else(|| {
            self.expect
                .account
                .as_ref()
                .map(|_| StripeEndpoint::Connect)
        })
    }
}

/// A configurable integration's scheme ([`crate::verify::custom`]) and fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Custom {
    /// How requests are verified.
    pub verifier: crate::verify::custom::CustomVerifier,
    /// Where the event id, type and scope come from.
    pub fields: Fields,
}

/// Where a configurable integration's event fields come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fields {
    /// The event id (the receipt key's second half).
    pub event_id: FieldSource,
    /// The event type (the route key).
    pub event_type: FieldSource,
    /// The scope (the receipt key's first half, after the integration), if any.
    pub scope: Option<FieldSource>,
}

/// A request header, or a JSON pointer into the verified body (a string, number or
/// boolean there).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldSource {
    /// A header (lower case).
    Header(String),
    /// A JSON pointer (`/event/id`).
    Pointer(String),
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
    /// Shopify: `X-Shopify-Shop-Domain` (`acme.myshopify.com`). Shopify signs no header:
    /// anyone replaying a signed body can set it, so it tells shops apart for an honest
    /// sender, not against one who holds a delivery.
    pub shop_domain: Option<String>,
    /// Zoom: `payload.account_id` of the signed body.
    pub account_id: Option<String>,
    /// Providers `hmac` and `token`: the value `[integration.fields].scope` reads.
    pub scope: Option<String>,
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
    /// JSON pointers naming the business object an event is about, tried in order
    /// (`subject = ["/data/object/customer"]`); empty: the provider's default
    /// ([`crate::verify::Provider::default_subject`]).
    pub subject: Vec<String>,
    /// `ordered = true`: receipts of one subject run one at a time, in the provider's
    /// event-time order (then arrival), and a failed or quarantined one holds the rest of
    /// its subject until it is replayed or closed (docs/contract.md, "Ordered routes").
    pub ordered: bool,
}

impl Route {
    /// The route's (first) sink.
    pub fn sink(&self) -> Option<&str> {
        self.sinks.first().map(String::as_str)
    }
}

/// The most subject pointers a route may name.
pub const MAX_SUBJECT_POINTERS: usize = 8;

/// The suffix that makes a route key a pattern.
pub const PATTERN_SUFFIX: &str = ".*";
/// The route key that matches every event type.
pub const CATCH_ALL: &str = "*";

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
        validate::parse(text, env_lookup)
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

#[cfg(test)]
mod tests;
