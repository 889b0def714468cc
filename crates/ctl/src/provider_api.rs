//! What the recovery commands share when they call a provider's API: one HTTP client
//! (bounded connect and request times, no redirects — a credential never follows one) and
//! answers read up to a bound.

use std::time::Duration;

use anyhow::{Context, bail};

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
