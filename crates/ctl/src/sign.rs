//! Builds a signed test request for an integration, as the provider would send it.

use anyhow::{Context, bail};
use inbound_core::clock::{Clock, SystemClock};
use inbound_core::config::Config;
use inbound_core::verify::{self, Provider};

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
    let types_in_a_header = [Provider::Github, Provider::Shopify];
    if header_event_type.is_some() && !types_in_a_header.contains(&integration.provider) {
        bail!(
            "--event-type is for GitHub (X-GitHub-Event) and Shopify (X-Shopify-Topic) integrations; {} names the type in the body",
            integration.provider.name()
        );
    }
    let Some(secret) = integration.secrets.first() else {
        bail!("integration {integration_id:?} has no secret");
    };
    let now = SystemClock.now_unix_secs();
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
            ("X-GitHub-Delivery".into(), format!("delivery-{now}")),
        ],
        Provider::Slack => vec![
            (
                "X-Slack-Signature".into(),
                verify::sign_slack(secret, now, body.as_bytes()),
            ),
            ("X-Slack-Request-Timestamp".into(), now.to_string()),
        ],
        Provider::Standard => {
            let id = format!("msg_{now}");
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
                ("X-Shopify-Webhook-Id".into(), format!("webhook-{now}")),
                ("X-Shopify-Event-Id".into(), format!("event-{now}")),
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

/// Single-quotes `text` for a POSIX shell.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}
