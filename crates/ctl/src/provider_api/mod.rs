//! The providers' APIs the recovery commands call — Stripe's events and accounts
//! ([`stripe`]), GitHub's hook deliveries ([`github`]) — and what they share: one HTTP client
//! (bounded connect and request times, no redirects — a credential never follows one) and
//! answers read up to a bound.

pub mod github;
pub mod stripe;

use std::time::Duration;

use anyhow::{Context, bail};
use inbound_core::config::{Config, Integration};
use inbound_core::verify::Provider;

/// The integration named `id`, refused unless the configuration holds it and it is
/// `provider`'s: a recovery command must not store or ask for another sender's events.
pub fn integration_of<'c>(
    config: &'c Config,
    id: &str,
    provider: Provider,
) -> anyhow::Result<&'c Integration> {
    let integration = config
        .integration(id)
        .with_context(|| format!("no integration {id:?} in the configuration"))?;
    if integration.provider != provider {
        bail!(
            "integration {} is {}, not {}",
            integration.id,
            integration.provider.name(),
            provider.name()
        );
    }
    Ok(integration)
}

/// The client the recovery commands call providers with.
pub fn client() -> anyhow::Result<reqwest::Client> {
    // reqwest is built without a bundled crypto provider; ring is the one sqlx uses.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(30))
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("inboundctl/", env!("CARGO_PKG_VERSION")))
        .build()
        .context("cannot build the HTTP client")
}

/// An answer's body, refused past `max` bytes (`provider` names it in the error).
pub async fn read_bounded(
    mut response: reqwest::Response,
    max: usize,
    provider: &str,
) -> anyhow::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if bytes.len() + chunk.len() > max {
            bail!("{provider}'s answer is larger than {max} bytes");
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example() -> Config {
        let text = r#"
[[integration]]
id = "stripe-example"
provider = "stripe"
tenant = "acme"
secrets = ["env:SECRET"]

[[integration]]
id = "github-example"
provider = "github"
tenant = "acme"
secrets = ["env:SECRET"]
"#;
        let secret = |_: &str| Some("a-secret-of-enough-length".to_owned());
        Config::from_toml(text, &secret).expect("a valid configuration")
    }

    #[test]
    fn a_recovery_command_takes_only_a_named_integration_of_its_provider() {
        let config = example();
        let found = integration_of(&config, "stripe-example", Provider::Stripe).expect("found");
        assert_eq!(found.id, "stripe-example");
        let other = integration_of(&config, "github-example", Provider::Stripe)
            .expect_err("a GitHub integration is not Stripe's");
        assert_eq!(
            other.to_string(),
            "integration github-example is github, not stripe"
        );
        let missing = integration_of(&config, "nowhere", Provider::Github)
            .expect_err("an unknown integration is refused");
        assert_eq!(
            missing.to_string(),
            "no integration \"nowhere\" in the configuration"
        );
    }
}
