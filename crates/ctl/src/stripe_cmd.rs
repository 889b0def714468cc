//! `inboundctl stripe backfill`: Stripe retries a delivery for days, but an endpoint that
//! was disabled, misconfigured or down past its retries misses events for good. This pages
//! through Stripe's events API (`GET /v1/events`, newest first, `starting_after` cursor)
//! over a window and stores, as pending receipts, the events the integration routes and
//! inbound does not hold — marked `provenance = 'api'` (fetched with the account's key, not
//! delivered signed) — so the worker processes them exactly like delivered ones. Events
//! inbound holds are left alone (the receipt key decides), as are events of another
//! account than the integration's `expect` and types it does not route.
//!
//! Bounded: at most `--requests-per-second` requests, 100 events each; a 429 or 5xx is
//! retried after its `Retry-After` (at most 60 s) or a doubling pause, at most 5 times in a
//! row; any other refusal ends the run with what was stored so far reported.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use chrono::{DateTime, Utc};
use clap::{Args, Subcommand};
use inbound_core::config::{Config, Integration};
use inbound_core::event::{self, ExtractError, Extracted};
use inbound_core::headers::Headers;
use inbound_core::keys::ReceiptId;
use inbound_core::keys::{EventId, SourceScope};
use inbound_core::store::{self, InsertOutcome, NewReceipt};
use inbound_core::verify::Provider;
use serde_json::Value;
use sqlx::Connection;

use crate::operate::DatabaseArgs;
use crate::output::{out, out_exact};
use crate::provider_api;
use crate::selection::{parse_time, secret_from};

/// `inboundctl stripe …`.
#[derive(Debug, Subcommand)]
pub enum StripeCommand {
    /// Store, as receipts, the events of a window that the integration routes and inbound
    /// does not hold (an endpoint that was down or disabled past Stripe's retries).
    #[command(after_help = "Examples:
  inboundctl stripe backfill --integration stripe-live --since 2d --dry-run
  STRIPE_API_KEY=rk_live_… inboundctl stripe backfill --integration stripe-live --since 2026-11-28T00:00:00Z

The key needs read access to Events only: a restricted key (rk_…) with \"Events: Read\".")]
    Backfill(BackfillArgs),
}

/// `inboundctl stripe backfill`.
#[derive(Debug, Args)]
pub struct BackfillArgs {
    #[command(flatten)]
    database: DatabaseArgs,
    /// Configuration file (TOML): the integration's routes and `expect`.
    #[arg(long, env = "INBOUND_CONFIG")]
    config: PathBuf,
    /// The Stripe integration to backfill.
    #[arg(long)]
    integration: String,
    /// The API key, as a reference (`env:NAME` or `file:/path`); never a literal.
    #[arg(long, default_value = "env:STRIPE_API_KEY")]
    api_key: String,
    /// Events created at or after this (RFC 3339, or an age: 30m, 6h, 2d). Stripe keeps
    /// events for 30 days.
    #[arg(long, value_parser = parse_time)]
    since: DateTime<Utc>,
    /// Events created before this (default: now).
    #[arg(long, value_parser = parse_time)]
    until: Option<DateTime<Utc>>,
    /// Count what would be stored; store nothing.
    #[arg(long)]
    dry_run: bool,
    /// At most this many API requests per second (Stripe allows 100 in live mode).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=100))]
    requests_per_second: u32,
    /// Stripe's API base URL (a test server in the suite).
    #[arg(long, default_value = "https://api.stripe.com", hide = true)]
    api_base: String,
    /// For an integration without `expect.account` (the key's own events): the account the
    /// key must belong to, checked with `GET /v1/account` before anything is read.
    #[arg(long)]
    account: Option<String>,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
}

/// What a backfill found, by what it did with each event.
#[derive(Debug, Default, serde::Serialize)]
struct Summary {
    /// Events the API listed in the window.
    listed: u64,
    /// Stored as new pending receipts (or, in a dry run, would be).
    stored: u64,
    /// Already held by inbound (delivered, or stored by an earlier backfill).
    held: u64,
    /// Of a type the integration does not route.
    not_routed: u64,
    /// Of another account or mode than the integration's `expect`.
    other_scope: u64,
    /// Refused by the storability rules (named on stderr, one line each).
    malformed: u64,
    /// Whether this was a dry run.
    dry_run: bool,
}

/// Runs `inboundctl stripe …`.
pub async fn run(command: StripeCommand) -> anyhow::Result<()> {
    match command {
        StripeCommand::Backfill(args) => backfill(args).await,
    }
}

async fn backfill(args: BackfillArgs) -> anyhow::Result<()> {
    let config = Config::load(&args.config).context("invalid configuration")?;
    let integration = provider_api::integration_of(&config, &args.integration, Provider::Stripe)?;
    let key = secret_from("--api-key", &args.api_key)?;
    check_mode(integration, &key)?;
    let until = args.until.unwrap_or_else(Utc::now);
    if args.since >= until {
        bail!("--since must be before --until");
    }
    // A connected account's events are listed on its behalf (`Stripe-Account`); otherwise
    // the key's own, and the operator names the account it must belong to.
    let connected = integration.expect.account.clone();
    let Some(account) = connected.clone().or_else(|| args.account.clone()) else {
        bail!(
            "integration {} has no expect.account: name the account the key belongs to with --account acct_…",
            integration.id
        );
    };
    let api = StripeApi::new(&args, key, connected.clone())?;
    api.check_account(&account).await?;
    let mut db = args.database.connect().await?;
    let mut summary = Summary {
        dry_run: args.dry_run,
        ..Summary::default()
    };
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let mut page = api
            .events_page(args.since, until, cursor.as_deref())
            .await?;
        summary.listed += page.events.len() as u64;
        if let Some(account) = &connected {
            // Listed for the connected account: each is that account's, as its delivery
            // would say.
            for listed in &mut page.events {
                if listed.get("account").is_none() {
                    listed["account"] = Value::String(account.clone());
                }
            }
        }
        let storable = sort_events(integration, &page.events, &mut summary);
        db.run(async |connection| {
            store_page(
                connection,
                integration,
                &storable,
                args.dry_run,
                &mut summary,
            )
            .await
        })
        .await?;
        if !page.has_more {
            return report(&summary, args.json);
        }
        cursor = page
            .events
            .last()
            .and_then(|event| event["id"].as_str())
            .map(str::to_owned);
        if cursor.is_none() {
            bail!("Stripe said there were more events but the page ended without an id");
        }
    }
    eprintln!("inboundctl: stopped after {MAX_PAGES} pages; run again with a later --since");
    report(&summary, args.json)
}

/// The pages one run reads at most (a million events): a cursor that never ends stops.
const MAX_PAGES: u32 = 10_000;

/// The largest answer read (a page of 100 events).
const MAX_ANSWER_BYTES: usize = 32 * 1024 * 1024;

/// The key's mode must be the integration's (`expect.livemode`, which backfill requires):
/// a test key must never fill a live integration, nor a live key a test one.
fn check_mode(integration: &Integration, key: &str) -> anyhow::Result<()> {
    let Some(livemode) = integration.expect.livemode else {
        bail!(
            "integration {} has no expect.livemode: backfill stores events only into an integration that says which mode it takes",
            integration.id
        );
    };
    let key_live = match key.get(..8) {
        Some("sk_live_" | "rk_live_") => true,
        Some("sk_test_" | "rk_test_") => false,
        _ => bail!("--api-key is not a Stripe secret or restricted key (sk_… or rk_…)"),
    };
    if key_live != livemode {
        let mode = |live| if live { "live" } else { "test" };
        bail!(
            "--api-key is a {} key, and integration {} takes {} events",
            mode(key_live),
            integration.id,
            mode(livemode)
        );
    }
    Ok(())
}

/// One event ready to store: its JSON text and what the ingress would have extracted.
struct Storable {
    json: String,
    source_scope: SourceScope,
    event_id: EventId,
    event_type: String,
    route_key: String,
    delivery: Option<String>,
}

/// Extracts each listed event as the ingress would, counting the ones it would not store.
fn sort_events(
    integration: &Integration,
    events: &[Value],
    summary: &mut Summary,
) -> Vec<Storable> {
    let no_headers: Headers = std::iter::empty::<(&str, &[u8])>().collect();
    let mut storable = Vec::new();
    for listed in events {
        let json = listed.to_string();
        if json.len() > integration.max_body_bytes {
            summary.malformed += 1;
            eprintln!(
                "inboundctl: event {} not stored: larger than the integration's max_body_bytes",
                crate::output::terminal_safe(&listed["id"].to_string())
            );
            continue;
        }
        let event = match event::extract(integration, &no_headers, json.as_bytes()) {
            Ok(Extracted::Event(event)) => event,
            Ok(Extracted::OutOfScope(_)) => {
                summary.other_scope += 1;
                continue;
            }
            Ok(Extracted::Unrouted { .. }) => {
                summary.not_routed += 1;
                continue;
            }
            Ok(
                Extracted::UrlVerification { .. }
                | Extracted::ZoomUrlValidation { .. }
                | Extracted::SlackRateLimited { .. },
            ) => continue,
            Err(ExtractError::Malformed(reason)) => {
                summary.malformed += 1;
                eprintln!(
                    "inboundctl: event {} not stored: {reason}",
                    crate::output::terminal_safe(&listed["id"].to_string())
                );
                continue;
            }
        };
        let Some((route_key, _)) = event::find_route(integration, &event) else {
            summary.not_routed += 1;
            continue;
        };
        let route_key = route_key.to_owned();
        let (source_scope, event_id, event_type, delivery) = (
            event.source_scope,
            event.event_id,
            event.event_type,
            event.delivery,
        );
        storable.push(Storable {
            json,
            source_scope,
            event_id,
            event_type,
            route_key,
            delivery,
        });
    }
    storable
}

/// Stores a page's new events in one transaction, marked as fetched; a dry run counts
/// what it would store.
async fn store_page(
    connection: &mut sqlx::PgConnection,
    integration: &Integration,
    storable: &[Storable],
    dry_run: bool,
    summary: &mut Summary,
) -> anyhow::Result<()> {
    if storable.is_empty() {
        return Ok(());
    }
    if dry_run {
        let keys: Vec<_> = storable
            .iter()
            .map(|one| (one.source_scope.clone(), one.event_id.clone()))
            .collect();
        let held = store::receipts::held_keys(connection, &keys).await?;
        let already = storable
            .iter()
            .filter(|one| {
                held.contains(&(
                    one.source_scope.as_str().to_owned(),
                    one.event_id.as_str().to_owned(),
                ))
            })
            .count() as u64;
        summary.held += already;
        summary.stored += storable.len() as u64 - already;
        return Ok(());
    }
    let receipts: Vec<NewReceipt<'_>> = storable
        .iter()
        .map(|one| NewReceipt {
            integration: &integration.id,
            source_scope: &one.source_scope,
            event_id: &one.event_id,
            event_type: &one.event_type,
            route_key: &one.route_key,
            payload_json: &one.json,
            content_digest: None,
            delivery_json: one.delivery.as_deref(),
        })
        .collect();
    let mut transaction = connection.begin().await?;
    let outcomes = store::insert_receipts(&mut transaction, &receipts).await?;
    let stored: Vec<ReceiptId> = outcomes
        .iter()
        .filter_map(|outcome| match outcome {
            InsertOutcome::Accepted(id) => Some(*id),
            InsertOutcome::Duplicate => None,
        })
        .collect();
    store::receipts::mark_fetched(&mut transaction, &stored).await?;
    transaction.commit().await?;
    summary.stored += stored.len() as u64;
    summary.held += (outcomes.len() - stored.len()) as u64;
    Ok(())
}

fn report(summary: &Summary, as_json: bool) -> anyhow::Result<()> {
    if as_json {
        out_exact!("{}", serde_json::to_string(summary)?);
        return Ok(());
    }
    let verb = if summary.dry_run {
        "would store"
    } else {
        "stored"
    };
    out!(
        "listed {} event(s): {verb} {}, already held {}, not routed {}, another account or mode {}, malformed {}",
        summary.listed,
        summary.stored,
        summary.held,
        summary.not_routed,
        summary.other_scope,
        summary.malformed
    );
    Ok(())
}

/// One page of `GET /v1/events`.
struct Page {
    events: Vec<Value>,
    has_more: bool,
}

/// Stripe's events API, paced and retried.
struct StripeApi {
    client: reqwest::Client,
    base: String,
    key: String,
    pause: Duration,
    /// `Stripe-Account`: the connected account the requests act for.
    connected: Option<String>,
}

/// Retries of one request in a row before the run gives up.
const MAX_RETRIES: u32 = 5;
/// The longest wait a `Retry-After` may ask for.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

impl StripeApi {
    fn new(args: &BackfillArgs, key: String, connected: Option<String>) -> anyhow::Result<Self> {
        let client = provider_api::client()?;
        Ok(Self {
            client,
            base: args.api_base.trim_end_matches('/').to_owned(),
            key,
            pause: Duration::from_secs(1) / args.requests_per_second,
            connected,
        })
    }

    /// Refuses a key of another account than `account` (`GET /v1/account`).
    async fn check_account(&self, account: &str) -> anyhow::Result<()> {
        let body = self.get(&format!("{}/v1/account", self.base)).await?;
        match body["id"].as_str() {
            Some(id) if id == account => Ok(()),
            Some(id) => bail!("the key acts for account {id}, not {account}"),
            None => bail!("Stripe's account answer names no account"),
        }
    }

    async fn events_page(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        after: Option<&str>,
    ) -> anyhow::Result<Page> {
        let mut url = format!(
            "{}/v1/events?limit=100&created%5Bgte%5D={}&created%5Blt%5D={}",
            self.base,
            since.timestamp(),
            until.timestamp()
        );
        if let Some(after) = after {
            url.push_str(&format!("&starting_after={}", urlencoding::encode(after)));
        }
        let body = self.get(&url).await?;
        let Some(events) = body["data"].as_array() else {
            bail!("Stripe's answer has no data list");
        };
        Ok(Page {
            events: events.clone(),
            has_more: body["has_more"].as_bool().unwrap_or(false),
        })
    }

    /// One GET, paced, retried on a 429, a 5xx or no answer; its JSON body.
    async fn get(&self, url: &str) -> anyhow::Result<Value> {
        let mut backoff = Duration::from_secs(1);
        for attempt in 0..=MAX_RETRIES {
            tokio::time::sleep(self.pause).await;
            let mut request = self.client.get(url).bearer_auth(&self.key);
            if let Some(account) = &self.connected {
                request = request.header("stripe-account", account);
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
            if status.is_success() {
                let bytes =
                    provider_api::read_bounded(response, MAX_ANSWER_BYTES, "Stripe").await?;
                return serde_json::from_slice(&bytes).context("Stripe's answer is not JSON");
            }
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
            let bytes = provider_api::read_bounded(response, MAX_ANSWER_BYTES, "Stripe")
                .await
                .unwrap_or_default();
            let detail: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            let message = detail["error"]["message"].as_str().unwrap_or("no message");
            bail!("Stripe refused the request with {status}: {message}");
        }
        unreachable!("the loop returns on its last attempt")
    }
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
    fn the_json_summary_names_every_count() {
        let summary = Summary {
            listed: 5,
            stored: 1,
            held: 2,
            not_routed: 1,
            other_scope: 1,
            malformed: 0,
            dry_run: true,
        };
        assert_eq!(
            serde_json::to_value(&summary).expect("json"),
            json!({"listed": 5, "stored": 1, "held": 2, "not_routed": 1, "other_scope": 1, "malformed": 0, "dry_run": true})
        );
    }
}
