//! Builds a signed test request for an integration, as the provider would send it.

use anyhow::Context;
use inbound_core::clock::{Clock, SystemClock};
use inbound_core::config::Config;
use inbound_core::sender::SignError;
use inbound_core::verify::Provider;

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
    load_with_stand_ins(path, Some(integration_id))
}

/// The configuration at `path` for reading its ids, owners and routes (the console): every
/// unset `env:` reference gets a stand-in, since none of its secrets is used.
pub fn load_for_reading(path: &std::path::Path) -> anyhow::Result<Config> {
    load_with_stand_ins(path, None)
}

/// The configuration at `path`, each unset `env:` reference a stand-in except the
/// secrets of `integration_id`.
fn load_with_stand_ins(
    path: &std::path::Path,
    integration_id: Option<&str>,
) -> anyhow::Result<Config> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
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
    integration_id: Option<&str>,
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
        if integration_id.is_some()
            && integration.get("id").and_then(toml::Value::as_str) == integration_id
        {
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
    if integration.provider == Provider::Token {
        eprintln!(
            "inboundctl: the command below carries the integration's shared token itself; keep it out of shells' history and logs"
        );
    }
    // A GitHub hook that sends forms sends the JSON in its `payload` field, signed as sent.
    let (content_type, body) = inbound_core::sender::body_as_sent(integration, body);
    let headers = inbound_core::provider::signed_headers(
        integration,
        body.as_bytes(),
        SystemClock.now_unix_secs(),
        header_event_type,
    )
    .map_err(flag_terms)?;
    let mut command = format!(
        "curl -sS -X POST {}/webhooks/{} -H 'Content-Type: {content_type}'",
        base_url.trim_end_matches('/'),
        integration.id
    );
    for (name, value) in headers {
        command.push_str(&format!(" -H {}", shell_quote(&format!("{name}: {value}"))));
    }
    command.push_str(&format!(" --data-binary {}", shell_quote(&body)));
    Ok(command)
}

/// A signing error in `sign-event`'s terms (its flag is `--event-type`).
fn flag_terms(error: SignError) -> anyhow::Error {
    match error {
        SignError::TypeNotInAHeader(integration) => anyhow::anyhow!(
            "--event-type is for integrations that send the type in a header (GitHub, Shopify, a configured header); {integration} names it in the body"
        ),
        SignError::TypeNeeded { header, .. } if header == "X-Shopify-Topic" => anyhow::anyhow!(
            "Shopify sends the type as X-Shopify-Topic: give --event-type (e.g. orders/create)"
        ),
        SignError::TypeNeeded {
            integration,
            header,
        } => anyhow::anyhow!(
            "integration {integration} reads the type from header {header}: give --event-type"
        ),
        other => other.into(),
    }
}

/// Single-quotes `text` for a POSIX shell.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}
