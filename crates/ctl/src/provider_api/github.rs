//! GitHub's REST API as `inboundctl github redeliver` calls it: a hook's deliveries (a
//! repository's, an organization's or an App's), read page by page along `Link:
//! rel="next"` on GitHub's own origin only, and one redelivery at a time. Authenticated by
//! a token or an App's JWT (RS256, made afresh for each request); paced, and a 429 or a
//! 403 with the rate limit spent waits for `Retry-After` or `X-RateLimit-Reset` (at most
//! 60 s), at most 5 times in a row.

use std::time::Duration;

use anyhow::{Context, bail};
use base64::Engine;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::provider_api;

/// Retries of one request in a row before the run gives up.
const MAX_RETRIES: u32 = 5;
/// The longest wait a rate limit may ask for.
const MAX_WAIT: Duration = Duration::from_secs(60);
/// The pages one run reads at most (100,000 deliveries): a cursor that never ends stops.
const MAX_PAGES: u32 = 1_000;
/// The largest answer read (a page of 100 deliveries).
const MAX_ANSWER_BYTES: usize = 8 * 1024 * 1024;
/// GitHub asks for at least a second between writes.
const WRITE_PAUSE: Duration = Duration::from_secs(1);

/// One delivery, as much of it as the decision needs.
pub struct Delivery {
    /// GitHub's id of this delivery (what a redelivery names).
    pub id: u64,
    /// The event's delivery id (`X-GitHub-Delivery`, inbound's receipt key).
    pub guid: String,
    /// When it was delivered (RFC 3339).
    pub at: String,
    /// The status it was answered with (0: no answer).
    pub status_code: u64,
}

/// How requests authenticate.
pub enum Auth {
    /// A token (fine-grained, "Webhooks: read and write").
    Token(String),
    /// The App's JWT, made afresh for every request (it lives 9 minutes; a run may not).
    App { id: u64, pem: String },
}

impl Auth {
    /// A GitHub App's own credential: its id and private key (PEM), refused now if the
    /// key cannot sign a JWT.
    pub fn app(id: u64, pem: String) -> anyhow::Result<Self> {
        app_jwt(id, &pem, Utc::now().timestamp())?;
        Ok(Self::App { id, pem })
    }

    fn header(&self) -> anyhow::Result<reqwest::header::HeaderValue> {
        let value = match self {
            Self::Token(token) => format!("Bearer {token}"),
            Self::App { id, pem } => {
                format!("Bearer {}", app_jwt(*id, pem, Utc::now().timestamp())?)
            }
        };
        let mut value = reqwest::header::HeaderValue::from_str(&value)
            .map_err(|_| anyhow::anyhow!("the credential cannot travel in a header"))?;
        value.set_sensitive(true);
        Ok(value)
    }
}

/// GitHub's REST API, paced and retried.
pub struct GithubApi {
    client: reqwest::Client,
    base: String,
    auth: Auth,
    pause: Duration,
}

impl GithubApi {
    /// The API at `base` (`https://api.github.com`), authenticated by `auth`, at most
    /// `requests_per_second` requests a second.
    pub fn new(base: &str, auth: Auth, requests_per_second: u32) -> anyhow::Result<Self> {
        Ok(Self {
            client: provider_api::client()?,
            base: base.trim_end_matches('/').to_owned(),
            auth,
            pause: Duration::from_secs(1) / requests_per_second.max(1),
        })
    }

    /// Every delivery of the hook since `since`, newest first, following `Link: rel="next"`
    /// on GitHub's own origin only.
    pub async fn deliveries(
        &self,
        hook_path: &str,
        since: DateTime<Utc>,
    ) -> anyhow::Result<Vec<Delivery>> {
        let mut url = format!("{}{hook_path}/deliveries?per_page=100", self.base);
        let mut all = Vec::new();
        for _ in 0..MAX_PAGES {
            let (page, next) = self.get_page(&url).await?;
            let mut older = false;
            for delivery in page {
                let at = delivery.at.as_str();
                // A delivery whose time cannot be read is outside the window.
                match DateTime::parse_from_rfc3339(at) {
                    Ok(at) if at >= since => all.push(delivery),
                    _ => older = true,
                }
            }
            match next {
                Some(next) if !older => url = next,
                _ => return Ok(all),
            }
        }
        eprintln!("inboundctl: stopped after {MAX_PAGES} pages of deliveries");
        Ok(all)
    }

    async fn get_page(&self, url: &str) -> anyhow::Result<(Vec<Delivery>, Option<String>)> {
        let response = self.send(|client| client.get(url), true).await?;
        let next = response
            .headers()
            .get("link")
            .and_then(|link| link.to_str().ok())
            .and_then(next_link);
        if let Some(next) = &next
            && !next.starts_with(&format!("{}/", self.base))
        {
            bail!(
                "GitHub's next page is not on {}: refusing to send the credential there",
                self.base
            );
        }
        let bytes = provider_api::read_bounded(response, MAX_ANSWER_BYTES, "GitHub").await?;
        let page: Value = serde_json::from_slice(&bytes).context("GitHub's answer is not JSON")?;
        let Some(deliveries) = page.as_array() else {
            bail!("GitHub's answer is not a list of deliveries");
        };
        let deliveries = deliveries
            .iter()
            .filter_map(|delivery| {
                Some(Delivery {
                    id: delivery["id"].as_u64()?,
                    guid: delivery["guid"].as_str()?.to_owned(),
                    at: delivery["delivered_at"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                    status_code: delivery["status_code"].as_u64().unwrap_or(0),
                })
            })
            .collect();
        Ok((deliveries, next))
    }

    /// Asks for one redelivery. Not retried on a 5xx (GitHub may have queued it already):
    /// only a 202 counts.
    pub async fn redeliver(&self, hook_path: &str, delivery_id: u64) -> anyhow::Result<()> {
        tokio::time::sleep(WRITE_PAUSE.saturating_sub(self.pause)).await;
        let url = format!("{}{hook_path}/deliveries/{delivery_id}/attempts", self.base);
        let response = self.send(|client| client.post(&url), false).await?;
        if response.status().as_u16() != 202 {
            bail!(
                "GitHub answered {} instead of 202 Accepted",
                response.status()
            );
        }
        Ok(())
    }

    /// One request, paced, retried on a rate limit (primary or secondary) and, when
    /// `retry_server_errors`, on a 5xx.
    async fn send(
        &self,
        request: impl Fn(&reqwest::Client) -> reqwest::RequestBuilder,
        retry_server_errors: bool,
    ) -> anyhow::Result<reqwest::Response> {
        let mut backoff = Duration::from_secs(1);
        for attempt in 0..=MAX_RETRIES {
            tokio::time::sleep(self.pause).await;
            let response = request(&self.client)
                .header("authorization", self.auth.header()?)
                .header("accept", "application/vnd.github+json")
                .header("x-github-api-version", "2022-11-28")
                .send()
                .await
                .context("GitHub did not answer")?;
            let status = response.status();
            if status.is_success() {
                return Ok(response);
            }
            let header = |name: &str| {
                response
                    .headers()
                    .get(name)
                    .and_then(|value| value.to_str().ok())
            };
            let spent = header("x-ratelimit-remaining") == Some("0");
            let secondary = header("retry-after").is_some();
            let limited =
                status.as_u16() == 429 || (status.as_u16() == 403 && (spent || secondary));
            let retryable = limited || (retry_server_errors && status.is_server_error());
            if retryable && attempt < MAX_RETRIES {
                let wait = rate_limit_wait(&response).unwrap_or(backoff).min(MAX_WAIT);
                eprintln!("inboundctl: GitHub answered {status}; retrying in {wait:?}");
                tokio::time::sleep(wait).await;
                backoff *= 2;
                continue;
            }
            let bytes = provider_api::read_bounded(response, MAX_ANSWER_BYTES, "GitHub")
                .await
                .unwrap_or_default();
            let detail: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            let message = detail["message"].as_str().unwrap_or("no message");
            bail!("GitHub refused the request with {status}: {message}");
        }
        unreachable!("the loop returns on its last attempt")
    }
}

/// How long a rate-limited answer asks to wait: `Retry-After`, else until `X-RateLimit-Reset`.
fn rate_limit_wait(response: &reqwest::Response) -> Option<Duration> {
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.trim().parse::<i64>().ok())
    };
    if let Some(seconds) = header("retry-after") {
        return Some(Duration::from_secs(seconds.max(0) as u64));
    }
    header("x-ratelimit-reset")
        .map(|reset| Duration::from_secs((reset - Utc::now().timestamp()).max(1) as u64))
}

/// The `rel="next"` URL of a `Link` header.
fn next_link(link: &str) -> Option<String> {
    link.split(',').find_map(|part| {
        let (url, params) = part.split_once(';')?;
        params
            .split(';')
            .any(|param| param.trim() == "rel=\"next\"")
            .then(|| {
                url.trim()
                    .trim_start_matches('<')
                    .trim_end_matches('>')
                    .to_owned()
            })
    })
}

/// A GitHub App JWT: RS256 over `{"iat": now - 60, "exp": now + 540, "iss": app_id}` (GitHub
/// allows 10 minutes and a clock a minute behind).
fn app_jwt(app_id: u64, pem: &str, now: i64) -> anyhow::Result<String> {
    let encode = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    let der = pem_body(pem).context("--app-key is not a PEM private key")?;
    let key = ring::signature::RsaKeyPair::from_der(&der)
        .or_else(|_| ring::signature::RsaKeyPair::from_pkcs8(&der))
        .map_err(|error| anyhow::anyhow!("--app-key is not an RSA private key: {error}"))?;
    let header = encode(br#"{"alg":"RS256","typ":"JWT"}"#);
    let claims = encode(
        json!({"iat": now - 60, "exp": now + 540, "iss": app_id.to_string()})
            .to_string()
            .as_bytes(),
    );
    let signed = format!("{header}.{claims}");
    let mut signature = vec![0; key.public().modulus_len()];
    key.sign(
        &ring::signature::RSA_PKCS1_SHA256,
        &ring::rand::SystemRandom::new(),
        signed.as_bytes(),
        &mut signature,
    )
    .map_err(|_| anyhow::anyhow!("cannot sign the App's JWT"))?;
    Ok(format!("{signed}.{}", encode(&signature)))
}

/// The DER inside a PEM block.
fn pem_body(pem: &str) -> Option<Vec<u8>> {
    let body: String = pem
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with("-----"))
        .collect();
    base64::engine::general_purpose::STANDARD.decode(body).ok()
}

#[cfg(test)]
mod tests {
    use super::next_link;

    #[test]
    fn the_next_page_is_read_from_the_link_header() {
        let link = r#"<https://api.github.com/repos/a/b/hooks/1/deliveries?per_page=100&cursor=v1_2>; rel="next", <https://api.github.com/x>; rel="prev""#;
        assert_eq!(
            next_link(link).as_deref(),
            Some("https://api.github.com/repos/a/b/hooks/1/deliveries?per_page=100&cursor=v1_2")
        );
        assert_eq!(next_link(r#"<https://x>; rel="prev""#), None);
    }
}
