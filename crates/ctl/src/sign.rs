//! Builds a signed test request for an integration, as the provider would send it.

use anyhow::{Context, bail};
use inbound_core::clock::{Clock, SystemClock};
use inbound_core::config::{Config, FieldSource, Integration};
use inbound_core::secret::Secret;
use inbound_core::verify::custom::{self, CustomVerifier, TimestampUnit};
use inbound_core::verify::{self, Provider};

/// Stands in for a Standard Webhooks key, or any secret, that signing does not use.
const STAND_IN_SECRET: &str = "whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
/// Stands in for a sink URL given by reference that signing does not use.
const STAND_IN_URL: &str = "http://127.0.0.1:9/not-used-by-sign-event";

/// The configuration at `path` as `sign-event` needs it: the secrets of `integration_id`
/// from the environment (a missing one is named), and every other `env:` reference that
/// is not set — a sink's secret or URL, another integration's secret — a stand-in, since
/// signing one integration's event reads none of them. So the hint `make run` prints works
/// in a terminal that exported only the secret of the integration it signs for.
pub fn load_for_signing(path: &std::path::Path, integration_id: &str) -> anyhow::Result<Config> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let (needed, urls) = match toml::from_str::<toml::Table>(&text) {
        Ok(table) => env_references(&table, integration_id),
        // Not TOML: the configuration's own parser says what is wrong.
        Err(_) => Default::default(),
    };
    let lookup = |name: &str| {
        std::env::var(name)
            .ok()
            .filter(|value| !value.is_empty())
            .or_else(|| {
                (!needed.contains(name)).then(|| {
                    if urls.contains(name) {
                        STAND_IN_URL.to_owned()
                    } else {
                        STAND_IN_SECRET.to_owned()
                    }
                })
            })
    };
    Ok(Config::from_toml(&text, &lookup)?)
}

/// The `env:` names the integration `integration_id` references (its own secrets), and
/// those any `url` or `status_url` references.
fn env_references(
    table: &toml::Table,
    integration_id: &str,
) -> (
    std::collections::HashSet<String>,
    std::collections::HashSet<String>,
) {
    fn walk(value: &toml::Value, key: &str, found: &mut dyn FnMut(&str, &str)) {
        match value {
            toml::Value::String(text) => {
                if let Some(name) = text.strip_prefix("env:") {
                    found(key, name);
                }
            }
            toml::Value::Array(items) => items.iter().for_each(|item| walk(item, key, found)),
            toml::Value::Table(table) => {
                for (inner, value) in table {
                    walk(value, inner, found);
                }
            }
            _ => {}
        }
    }
    let mut needed = std::collections::HashSet::new();
    let mut urls = std::collections::HashSet::new();
    let integrations = table.get("integration").and_then(toml::Value::as_array);
    for integration in integrations.into_iter().flatten() {
        if integration.get("id").and_then(toml::Value::as_str) == Some(integration_id) {
            walk(integration, "integration", &mut |_, name| {
                needed.insert(name.to_owned());
            });
        }
    }
    walk(&toml::Value::Table(table.clone()), "", &mut |key, name| {
        if key == "url" || key == "status_url" {
            urls.insert(name.to_owned());
        }
    });
    (needed, urls)
}

/// A `curl` command line that POSTs `body` to `base_url` for `integration_id`, signed with
/// the integration's first secret and the current time. `header_event_type` is the type
/// of the providers that send it in a header: GitHub's `X-GitHub-Event` (default `ping`)
/// and Shopify's `X-Shopify-Topic` (required); the others refuse it.
pub fn curl_command(
    config: &Config,
    integration_id: &str,
    body: &str,
    base_url: &str,
    header_event_type: Option<&str>,
) -> anyhow::Result<String> {
    let integration = config
        .integration(integration_id)
        .with_context(|| format!("no integration {integration_id:?} in the configuration"))?;
    let type_in_a_header = match &integration.custom {
        Some(custom) => matches!(custom.fields.event_type, FieldSource::Header(_)),
        None => matches!(integration.provider, Provider::Github | Provider::Shopify),
    };
    if header_event_type.is_some() && !type_in_a_header {
        bail!(
            "--event-type is for integrations that send the type in a header (GitHub, Shopify, a configured header); {} names it in the body",
            integration.id
        );
    }
    let Some(secret) = integration.secrets.first() else {
        bail!("integration {integration_id:?} has no secret");
    };
    let now = SystemClock.now_unix_secs();
    let unique = fresh_id();
    let headers: Vec<(String, String)> = match integration.provider {
        Provider::Stripe => vec![(
            "Stripe-Signature".into(),
            verify::sign_stripe(secret, now, body.as_bytes()),
        )],
        Provider::Github => vec![
            (
                "X-Hub-Signature-256".into(),
                verify::sign_github(secret, body.as_bytes()),
            ),
            (
                "X-GitHub-Event".into(),
                header_event_type.unwrap_or("ping").to_owned(),
            ),
            ("X-GitHub-Delivery".into(), format!("delivery-{unique}")),
        ],
        Provider::Slack => vec![
            (
                "X-Slack-Signature".into(),
                verify::sign_slack(secret, now, body.as_bytes()),
            ),
            ("X-Slack-Request-Timestamp".into(), now.to_string()),
        ],
        Provider::Standard => {
            let id = format!("msg_{unique}");
            vec![
                (
                    "webhook-signature".into(),
                    verify::sign_standard(secret, &id, now, body.as_bytes()),
                ),
                ("webhook-timestamp".into(), now.to_string()),
                ("webhook-id".into(), id),
            ]
        }
        Provider::Paddle => vec![(
            "Paddle-Signature".into(),
            verify::sign_paddle(secret, now, body.as_bytes()),
        )],
        Provider::Hmac | Provider::Token => {
            configured_headers(integration, secret, now, body, header_event_type)?
        }
        Provider::Zoom => vec![
            (
                "x-zm-signature".into(),
                verify::sign_zoom(secret, now, body.as_bytes()),
            ),
            ("x-zm-request-timestamp".into(), now.to_string()),
        ],
        Provider::Shopify => {
            let Some(topic) = header_event_type else {
                bail!(
                    "Shopify sends the type as X-Shopify-Topic: give --event-type (e.g. orders/create)"
                );
            };
            // The shop the integration expects, so the request passes its scope check.
            let shop = integration
                .expect
                .shop_domain
                .as_deref()
                .unwrap_or("example.myshopify.com");
            vec![
                (
                    "X-Shopify-Hmac-Sha256".into(),
                    verify::sign_shopify(secret, body.as_bytes()),
                ),
                ("X-Shopify-Topic".into(), topic.to_owned()),
                ("X-Shopify-Shop-Domain".into(), shop.to_owned()),
                ("X-Shopify-Webhook-Id".into(), format!("webhook-{unique}")),
                ("X-Shopify-Event-Id".into(), format!("event-{unique}")),
            ]
        }
    };
    let mut command = format!(
        "curl -sS -X POST {}/webhooks/{} -H 'Content-Type: application/json'",
        base_url.trim_end_matches('/'),
        integration.id
    );
    for (name, value) in headers {
        command.push_str(&format!(" -H {}", shell_quote(&format!("{name}: {value}"))));
    }
    command.push_str(&format!(" --data-binary {}", shell_quote(body)));
    Ok(command)
}

/// A fresh part for the ids a sender makes anew for each event (the nanoseconds now):
/// two sends within one second are two events, never a duplicate.
fn fresh_id() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos())
}

/// The headers of a configurable scheme: its signature (or token), its timestamp, and the
/// fields its `[integration.fields]` reads from headers.
fn configured_headers(
    integration: &Integration,
    secret: &Secret,
    now: i64,
    body: &str,
    header_event_type: Option<&str>,
) -> anyhow::Result<Vec<(String, String)>> {
    let Some(custom) = &integration.custom else {
        bail!("integration {} has no configured scheme", integration.id);
    };
    let mut headers = match &custom.verifier {
        CustomVerifier::Hmac(scheme) => {
            let timestamp = match scheme.timestamp_unit {
                TimestampUnit::Seconds => now.to_string(),
                TimestampUnit::Milliseconds => (now * 1000).to_string(),
            };
            let mut headers = vec![(
                scheme.header.clone(),
                custom::sign(scheme, secret, &timestamp, body.as_bytes()),
            )];
            if let Some(name) = &scheme.timestamp_header {
                headers.push((name.clone(), timestamp));
            }
            headers
        }
        CustomVerifier::Token(scheme) => {
            let token = std::str::from_utf8(secret.expose())
                .context("the token is not text, so no header can carry it")?;
            eprintln!(
                "inboundctl: the command below carries the integration's shared token itself; keep it out of shells' history and logs"
            );
            vec![(scheme.header.clone(), token.to_owned())]
        }
    };
    if let FieldSource::Header(name) = &custom.fields.event_id {
        headers.push((name.clone(), format!("evt-{}", fresh_id())));
    }
    if let FieldSource::Header(name) = &custom.fields.event_type {
        let Some(event_type) = header_event_type else {
            bail!(
                "integration {} reads the type from header {name}: give --event-type",
                integration.id
            );
        };
        headers.push((name.clone(), event_type.to_owned()));
    }
    if let Some(FieldSource::Header(name)) = &custom.fields.scope {
        let scope = integration.expect.scope.as_deref().unwrap_or("example");
        headers.push((name.clone(), scope.to_owned()));
    }
    Ok(headers)
}

/// Single-quotes `text` for a POSIX shell.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}
