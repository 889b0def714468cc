//! Stripe's API as `inboundctl stripe backfill` reads it: events in creation order over a
//! window, for the key's own account or on behalf of a connected one, from `/v1/events`
//! (snapshot events) or `/v2/core/events` (thin events); the connected accounts of a
//! platform (`/v1/accounts`); and which account a key belongs to. Paced and retried.
//!
//! Stripe lists newest first (<https://docs.stripe.com/api/pagination>), and a backfill
//! must store oldest first or the worker replays the gap backwards (a refund before its
//! payment). [`Chronological`] walks the window forwards without holding it: it asks for
//! the oldest part of the window that fits one page (`has_more` false), halving the part
//! until it does and doubling it after a sparse one, and orders each page oldest first. Only a single
//! second holding more than a page is read whole, bounded by [`MAX_EVENTS_IN_ONE_SECOND`].
//!
//! Listed events are rendered in the API version of their creation, not the key's or the
//! endpoint's (stripe-node `resources/Events.ts`: "Each event data is rendered according
//! to Stripe API version at its creation time").

use std::time::Duration;

use anyhow::{Context, bail};
use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::Value;

use crate::provider_api;

/// Retries of one request in a row before the run gives up.
const MAX_RETRIES: u32 = 5;
/// The longest wait a `Retry-After` may ask for.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
/// The largest answer read (a page of 100 events).
const MAX_ANSWER_BYTES: usize = 32 * 1024 * 1024;
/// Events per request (Stripe's largest page).
const PAGE_SIZE: u32 = 100;
/// The events of one second read whole at most (more is refused: narrow the window).
pub const MAX_EVENTS_IN_ONE_SECOND: usize = 10_000;
/// The connected accounts one run lists at most.
pub const MAX_ACCOUNTS: usize = 100_000;

/// Which list the events come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listing {
    /// `GET /v1/events`: snapshot events (`object` = `event`).
    Snapshot,
    /// `GET /v2/core/events`: thin events (`object` = `v2.core.event`).
    Thin,
}

/// Whom a request acts for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acting {
    /// The key's own account.
    Own,
    /// A connected account: `Stripe-Account` (v1) or `Stripe-Context` (v2).
    Connected(String),
}

/// What `GET /v1/account` says of the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyAccount {
    /// The account the key belongs to: answered, or named in the permission error a
    /// restricted key gets ("… on account 'acct_…'": stripe/stripe-node#2246).
    Known(String),
    /// Refused without naming the account.
    Unknown(String),
}

/// One page of a list.
struct Page {
    items: Vec<Value>,
    next: Option<Cursor>,
}

/// Where the next page of the same list starts.
enum Cursor {
    /// v1: `starting_after` the last item's id.
    StartingAfter(String),
    /// v2: the `next_page_url` Stripe answered (a path on the API base).
    Url(String),
}

/// Stripe's API, paced and retried.
pub struct StripeApi {
    client: reqwest::Client,
    base: String,
    key: String,
    pause: Duration,
}

impl StripeApi {
    /// A client for `base` with `key`, at most `requests_per_second`.
    pub fn new(base: &str, key: String, requests_per_second: u32) -> anyhow::Result<Self> {
        Ok(Self {
            client: provider_api::client()?,
            base: base.trim_end_matches('/').to_owned(),
            key,
            pause: Duration::from_secs(1) / requests_per_second.max(1),
        })
    }

    /// Which account the key belongs to. A restricted key with only "Events: Read" is
    /// refused `GET /v1/account` (stripe/stripe-node#2246, dj-stripe#1131), and Stripe's
    /// permission error names the account; a refusal that names none is `Unknown`.
    pub async fn key_account(&self) -> anyhow::Result<KeyAccount> {
        let (status, body) = self
            .send(&format!("{}/v1/account", self.base), &Acting::Own)
            .await?;
        if status.is_success() {
            return match body["id"].as_str() {
                Some(id) => Ok(KeyAccount::Known(id.to_owned())),
                None => bail!("Stripe's account answer names no account"),
            };
        }
        let message = error_message(&body);
        if status.as_u16() == 403 {
            return Ok(match account_named_in(message) {
                Some(account) => KeyAccount::Known(account),
                None => KeyAccount::Unknown(message.to_owned()),
            });
        }
        bail!("Stripe refused GET /v1/account with {status}: {message}")
    }

    /// Every connected account of the key's platform (`GET /v1/accounts`, "Connect:
    /// read"), at most [`MAX_ACCOUNTS`].
    pub async fn connected_accounts(&self) -> anyhow::Result<Vec<String>> {
        let mut accounts = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let mut url = format!("{}/v1/accounts?limit={PAGE_SIZE}", self.base);
            if let Some(after) = &after {
                url.push_str(&format!("&starting_after={}", urlencoding::encode(after)));
            }
            let page = self.v1_page(&url, &Acting::Own).await?;
            for account in &page.items {
                let Some(id) = account["id"].as_str() else {
                    bail!("Stripe listed an account without an id");
                };
                accounts.push(id.to_owned());
            }
            if accounts.len() > MAX_ACCOUNTS {
                bail!("the platform has more than {MAX_ACCOUNTS} connected accounts");
            }
            match page.next {
                Some(Cursor::StartingAfter(id)) => after = Some(id),
                _ => return Ok(accounts),
            }
        }
    }

    /// The events created in `[since, until)` seconds, one page's worth at a time.
    async fn page(
        &self,
        listing: Listing,
        acting: &Acting,
        since: i64,
        until: i64,
        cursor: Option<Cursor>,
    ) -> anyhow::Result<Page> {
        match (listing, cursor) {
            (Listing::Thin, Some(Cursor::Url(path))) => {
                if !path.starts_with('/') {
                    bail!("Stripe's next_page_url is not a path on its API: {path}");
                }
                self.v2_page(&format!("{}{path}", self.base), acting).await
            }
            (Listing::Thin, _) => {
                let url = format!(
                    "{}/v2/core/events?limit={PAGE_SIZE}&created%5Bgte%5D={}&created%5Blt%5D={}",
                    self.base,
                    urlencoding::encode(&rfc3339(since)?),
                    urlencoding::encode(&rfc3339(until)?),
                );
                self.v2_page(&url, acting).await
            }
            (Listing::Snapshot, cursor) => {
                let mut url = format!(
                    "{}/v1/events?limit={PAGE_SIZE}&created%5Bgte%5D={since}&created%5Blt%5D={until}",
                    self.base
                );
                if let Some(Cursor::StartingAfter(after)) = cursor {
                    url.push_str(&format!("&starting_after={}", urlencoding::encode(&after)));
                }
                self.v1_page(&url, acting).await
            }
        }
    }

    async fn v1_page(&self, url: &str, acting: &Acting) -> anyhow::Result<Page> {
        let body = self.get(url, acting).await?;
        let Some(items) = body["data"].as_array() else {
            bail!("Stripe's answer has no data list");
        };
        let next = if body["has_more"].as_bool().unwrap_or(false) {
            let Some(last) = items.last().and_then(|item| item["id"].as_str()) else {
                bail!("Stripe said there were more but the page ended without an id");
            };
            Some(Cursor::StartingAfter(last.to_owned()))
        } else {
            None
        };
        Ok(Page {
            items: items.clone(),
            next,
        })
    }

    async fn v2_page(&self, url: &str, acting: &Acting) -> anyhow::Result<Page> {
        let body = self.get(url, acting).await?;
        let Some(items) = body["data"].as_array() else {
            bail!("Stripe's answer has no data list");
        };
        Ok(Page {
            items: items.clone(),
            next: body["next_page_url"]
                .as_str()
                .map(|path| Cursor::Url(path.to_owned())),
        })
    }

    /// One GET's JSON body; any answer but a 2xx ends the run with Stripe's message.
    async fn get(&self, url: &str, acting: &Acting) -> anyhow::Result<Value> {
        let (status, body) = self.send(url, acting).await?;
        if status.is_success() {
            return Ok(body);
        }
        bail!(
            "Stripe refused the request with {status}: {}",
            error_message(&body)
        )
    }

    /// One GET, paced, retried on a 429, a 5xx or no answer (at most [`MAX_RETRIES`]
    /// times in a row); the final status and JSON body.
    async fn send(
        &self,
        url: &str,
        acting: &Acting,
    ) -> anyhow::Result<(reqwest::StatusCode, Value)> {
        let mut backoff = Duration::from_secs(1);
        for attempt in 0..=MAX_RETRIES {
            tokio::time::sleep(self.pause).await;
            let mut request = self.client.get(url).bearer_auth(&self.key);
            if let Acting::Connected(account) = acting {
                let header = if url.contains("/v2/") {
                    "stripe-context"
                } else {
                    "stripe-account"
                };
                request = request.header(header, account);
            }
            let response = match request.send().await {
                Ok(response) => response,
                Err(error) if attempt < MAX_RETRIES => {
                    eprintln!(
                        "inboundctl: Stripe did not answer ({error}); retrying in {backoff:?}"
                    );
                    tokio::time::sleep(backoff).await;
                    backoff *= 2;
                    continue;
                }
                Err(error) => return Err(error).context("Stripe did not answer"),
            };
            let status = response.status();
            let retryable = status.as_u16() == 429 || status.is_server_error();
            if retryable && attempt < MAX_RETRIES {
                let wait = retry_after(&response)
                    .unwrap_or(backoff)
                    .min(MAX_RETRY_AFTER);
                eprintln!("inboundctl: Stripe answered {status}; retrying in {wait:?}");
                tokio::time::sleep(wait).await;
                backoff *= 2;
                continue;
            }
            let bytes = provider_api::read_bounded(response, MAX_ANSWER_BYTES, "Stripe").await?;
            let body = if status.is_success() {
                serde_json::from_slice(&bytes).context("Stripe's answer is not JSON")?
            } else {
                serde_json::from_slice(&bytes).unwrap_or(Value::Null)
            };
            return Ok((status, body));
        }
        unreachable!("the loop returns on its last attempt")
    }
}

/// The events of one list over a window, in creation order (see the module header).
pub struct Chronological {
    listing: Listing,
    acting: Acting,
    start: i64,
    until: i64,
    width: i64,
}

impl Chronological {
    /// A walk over `[since, until)` (Unix seconds).
    pub fn new(listing: Listing, acting: Acting, since: i64, until: i64) -> Self {
        Self {
            listing,
            acting,
            start: since,
            until,
            width: (until - since).max(1),
        }
    }

    /// The next events, oldest first; `None` past the window.
    pub async fn next(&mut self, api: &StripeApi) -> anyhow::Result<Option<Vec<Value>>> {
        if self.start >= self.until {
            return Ok(None);
        }
        loop {
            let end = self.start.saturating_add(self.width).min(self.until);
            let page = api
                .page(self.listing, &self.acting, self.start, end, None)
                .await?;
            if page.next.is_none() {
                self.start = end;
                // Grow only past sparse parts: a part that nearly filled its page would
                // overflow when doubled, costing a request to halve it again.
                if page.items.len() <= PAGE_SIZE as usize / 2 {
                    self.width = self.width.saturating_mul(2);
                }
                return Ok(Some(oldest_first(page.items)));
            }
            if end - self.start > 1 {
                self.width = (end - self.start) / 2;
                continue;
            }
            // One second holds more than a page: read it whole, then order it.
            let mut events = page.items;
            let mut cursor = page.next;
            while let Some(next) = cursor {
                if events.len() > MAX_EVENTS_IN_ONE_SECOND {
                    bail!(
                        "more than {MAX_EVENTS_IN_ONE_SECOND} events were created in the second at {}",
                        rfc3339(self.start)?
                    );
                }
                let page = api
                    .page(self.listing, &self.acting, self.start, end, Some(next))
                    .await?;
                // Every page of a list that goes on holds something: an empty one that
                // promises more would be followed for ever.
                if page.items.is_empty() && page.next.is_some() {
                    bail!("Stripe answered an empty page that says there is more");
                }
                events.extend(page.items);
                cursor = page.next;
            }
            self.start = end;
            return Ok(Some(oldest_first(events)));
        }
    }
}

/// `events` (as Stripe lists them: newest first) in creation order; events of the same
/// instant keep the list's order reversed.
fn oldest_first(mut events: Vec<Value>) -> Vec<Value> {
    events.reverse();
    events.sort_by_key(created_millis);
    events
}

/// An event's `created`: Unix seconds (v1) or an RFC 3339 instant (v2), in milliseconds.
fn created_millis(event: &Value) -> i64 {
    match &event["created"] {
        Value::Number(seconds) => seconds.as_i64().unwrap_or(0).saturating_mul(1000),
        Value::String(instant) => DateTime::parse_from_rfc3339(instant)
            .map(|instant| instant.timestamp_millis())
            .unwrap_or(0),
        _ => 0,
    }
}

fn rfc3339(unix_seconds: i64) -> anyhow::Result<String> {
    DateTime::<Utc>::from_timestamp(unix_seconds, 0)
        .map(|instant| instant.to_rfc3339_opts(SecondsFormat::Millis, true))
        .context("a time outside what Stripe can list")
}

fn error_message(body: &Value) -> &str {
    body["error"]["message"].as_str().unwrap_or("no message")
}

/// The account a permission error names: "… for this endpoint on account 'acct_…'."
fn account_named_in(message: &str) -> Option<String> {
    let (_, after) = message.split_once("on account '")?;
    let (account, _) = after.split_once('\'')?;
    (account.starts_with("acct_")
        && account.len() > "acct_".len()
        && account
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_'))
    .then(|| account.to_owned())
}

fn retry_after(response: &reqwest::Response) -> Option<Duration> {
    let value = response.headers().get("retry-after")?.to_str().ok()?;
    value.trim().parse::<u64>().ok().map(Duration::from_secs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_permission_error_names_the_keys_account() {
        assert_eq!(
            account_named_in(
                "The provided key 'rk_test_***abc' does not have the required permissions for this endpoint on account 'acct_1PJBLEBBLEfV'. Having the 'rak_accounts_kyc_id_numbers_read' permission would allow this request to continue."
            ),
            Some("acct_1PJBLEBBLEfV".to_owned())
        );
        for message in [
            "The provided key  does not have the required permissions for this endpoint on account.",
            "on account 'acct_'",
            "on account 'acct_x y'",
            "no message",
        ] {
            assert_eq!(account_named_in(message), None, "{message}");
        }
    }

    #[test]
    fn pages_are_ordered_oldest_first_for_either_kind_of_created() {
        let listed = vec![
            json!({"id": "c", "created": 30}),
            json!({"id": "b2", "created": 20}),
            json!({"id": "b1", "created": 20}),
            json!({"id": "a", "created": 10}),
        ];
        let ids: Vec<Value> = oldest_first(listed)
            .into_iter()
            .map(|event| event["id"].clone())
            .collect();
        assert_eq!(ids, [json!("a"), json!("b1"), json!("b2"), json!("c")]);
        let thin = vec![
            json!({"id": "y", "created": "2026-12-04T10:00:00.500Z"}),
            json!({"id": "x", "created": "2026-12-04T10:00:00.100Z"}),
        ];
        assert_eq!(oldest_first(thin)[0]["id"], "x");
    }
}
