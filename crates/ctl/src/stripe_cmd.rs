//! `inboundctl stripe backfill`: Stripe retries a delivery for days, but an endpoint that
//! was disabled, misconfigured or down past its retries misses events for good. This reads
//! Stripe's events API over a window — `/v1/events` for snapshot events, `/v2/core/events`
//! for the thin events an event destination sends — oldest first ([`crate::provider_api::stripe`]),
//! and stores, as pending receipts, the events the integration routes and inbound does not
//! hold, marked `provenance = 'api'` (fetched with the account's key, not delivered
//! signed), so the worker processes them exactly like delivered ones and in the order they
//! happened. Events inbound holds are left alone (the receipt key decides), as are events
//! out of the integration's scope and types it does not route.
//!
//! Whose events: an account endpoint's (`[integration.stripe] account = "acct_…"`) are the
//! key's own, and the key must belong to that account — checked with `GET /v1/account`,
//! which a restricted key is refused but whose permission error names the key's account;
//! a Connect endpoint's (`connect = true`, or `expect.account`) are each connected
//! account's, listed on its behalf (`Stripe-Account`, or `Stripe-Context` for thin events):
//! the one `expect.account` names, else every one `GET /v1/accounts` lists.
//!
//! Bounded: at most `--requests-per-second` requests, 100 events each; a 429 or 5xx is
//! retried after its `Retry-After` (at most 60 s) or a doubling pause, at most 5 times in a
//! row; any other refusal ends the run with what was stored so far reported.

use std::path::PathBuf;

use anyhow::{Context, bail};
use chrono::{DateTime, Utc};
use clap::{Args, Subcommand};
use inbound_core::config::{Config, Integration, StripeEndpoint};
use inbound_core::event::{self, ExtractError, Extracted};
use inbound_core::headers::Headers;
use inbound_core::keys::ReceiptId;
use inbound_core::keys::{EventId, SourceScope};
use inbound_core::provider;
use inbound_core::verify::Provider;
use inbound_store::{self as store, InsertOutcome, NewReceipt, ReceiptOrder};
use serde_json::Value;

use crate::operate::DatabaseArgs;
use crate::output::{out, out_exact};
use crate::provider_api;
use crate::provider_api::stripe::{Acting, Chronological, KeyAccount, Listing, StripeApi};
use crate::selection::{parse_time, secret_from};

/// `inboundctl stripe …`.
#[derive(Debug, Subcommand)]
pub enum StripeCommand {
    /// Store, as receipts, the events of a window that the integration routes and inbound
    /// does not hold (an endpoint that was down or disabled past Stripe's retries).
    #[command(after_help = "Examples:
  inboundctl stripe backfill --integration stripe-live --since 2d --dry-run
  STRIPE_API_KEY=rk_live_… inboundctl stripe backfill --integration stripe-live --since 2026-11-28T00:00:00Z

The key needs read access to Events only: a restricted key (rk_…) with \"Events: Read\"; for
a Connect endpoint, Connect read access too (and \"Connected accounts: Read\" to list them
when expect.account names none). Thin events (/v2/core/events) need a secret key where
Stripe does not yet take a restricted one.")]
    Backfill(BackfillArgs),
}

/// `inboundctl stripe backfill`.
#[derive(Debug, Args)]
pub struct BackfillArgs {
    #[command(flatten)]
    database: DatabaseArgs,
    /// Configuration file (TOML): the integration's routes, `expect` and `[integration.stripe]`.
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
    /// An account endpoint's backfill when Stripe will not say whose the key is (its
    /// refusal of `GET /v1/account` names no account): go on unchecked. The cost: a key of
    /// another account would store that account's events as this integration's.
    #[arg(long)]
    skip_account_check: bool,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
}

/// What a backfill found, by what it did with each event.
#[derive(Debug, Default, serde::Serialize)]
struct Summary {
    /// Accounts whose events were read (the key's own, or connected ones).
    accounts: u64,
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
    let api = StripeApi::new(&args.api_base, key, args.requests_per_second)?;
    let accounts = accounts_to_read(&api, integration, args.skip_account_check).await?;
    let mut db = args.database.connect().await?;
    let mut summary = Summary {
        dry_run: args.dry_run,
        accounts: accounts.len() as u64,
        ..Summary::default()
    };
    for acting in accounts {
        for listing in listings_of(integration) {
            let mut walk = Chronological::new(
                listing,
                acting.clone(),
                args.since.timestamp(),
                until.timestamp(),
            );
            while let Some(mut events) = walk.next(&api).await? {
                summary.listed += events.len() as u64;
                if let Acting::Connected(account) = &acting {
                    name_the_account(&mut events, listing, account);
                }
                let storable = sort_events(integration, &events, &mut summary);
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
            }
        }
    }
    report(&summary, args.json)
}

/// Whose events to read: the key's own for an account endpoint (once the key is known to
/// be that account's), or each connected account's for a Connect endpoint.
async fn accounts_to_read(
    api: &StripeApi,
    integration: &Integration,
    skip_account_check: bool,
) -> anyhow::Result<Vec<Acting>> {
    match integration.stripe_endpoint() {
        Some(StripeEndpoint::Account(account)) => {
            match api.key_account().await? {
                KeyAccount::Known(id) if id == account => {}
                KeyAccount::Known(id) => bail!(
                    "the key belongs to account {id}, and integration {} is account {account}'s",
                    integration.id
                ),
                KeyAccount::Unknown(message) if skip_account_check => eprintln!(
                    "inboundctl: Stripe would not say whose the key is ({}); going on unchecked as asked",
                    crate::output::terminal_safe(&message)
                ),
                KeyAccount::Unknown(message) => bail!(
                    "Stripe refused GET /v1/account without saying whose the key is ({message}): grant the key read access to the account, or pass --skip-account-check, and a key of another account would store that account's events as {}'s",
                    integration.id
                ),
            }
            Ok(vec![Acting::Own])
        }
        Some(StripeEndpoint::Connect) => match &integration.expect.account {
            Some(account) => Ok(vec![Acting::Connected(account.clone())]),
            None => Ok(api
                .connected_accounts()
                .await?
                .into_iter()
                .map(Acting::Connected)
                .collect()),
        },
        None => bail!(
            "integration {} does not say whose events it receives: set [integration.stripe] account = \"acct_…\" (an account endpoint: the account's own events) or connect = true (a Connect endpoint)",
            integration.id
        ),
    }
}

/// The lists the integration's routes need: `/v2/core/events` when a route takes a thin
/// event type (they begin `v1.` or `v2.`: `v1.billing.meter.error_report_triggered`),
/// `/v1/events` when a route takes any other (or every type).
fn listings_of(integration: &Integration) -> Vec<Listing> {
    let thin = |key: &str| key.starts_with("v1.") || key.starts_with("v2.");
    let mut listings = Vec::with_capacity(2);
    if integration.routes.keys().any(|key| !thin(key)) {
        listings.push(Listing::Snapshot);
    }
    if integration.routes.keys().any(|key| thin(key)) {
        listings.push(Listing::Thin);
    }
    listings
}

/// Events listed on a connected account's behalf are that account's, as their delivery
/// would say (`account`, or a thin event's `context`), when the answer leaves it out.
fn name_the_account(events: &mut [Value], listing: Listing, account: &str) {
    let field = match listing {
        Listing::Snapshot => "account",
        Listing::Thin => "context",
    };
    for event in events {
        if event.get(field).is_none_or(Value::is_null) {
            event[field] = Value::String(account.to_owned());
        }
    }
}

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
    subject: Option<String>,
    event_at: Option<chrono::DateTime<chrono::Utc>>,
    ordered: bool,
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
        let event = match provider::extract(integration, &no_headers, json.as_bytes()) {
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
        let Some((route_key, route)) = event::find_route(integration, &event) else {
            summary.not_routed += 1;
            continue;
        };
        let route_key = route_key.to_owned();
        // The subject and event time a delivery of it would have had: a late event found
        // by the backfill takes its place in its subject's order.
        let subject = event::subject_for(route, &event, &json);
        let (event_at, ordered) = (event.event_at, route.ordered);
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
            subject,
            event_at,
            ordered,
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
            order: ReceiptOrder {
                subject: one.subject.as_deref(),
                event_at: one.event_at,
                ordered: one.ordered,
            },
        })
        .collect();
    // In creation order (the worker claims by receipt id); a deadlock with the ingress on
    // a receipt key aborts the whole transaction, which is then simply run again.
    let mut attempt = 1;
    let (outcomes, stored) = loop {
        match store_in_order(connection, &receipts).await {
            Err(error) if is_deadlock(&error) && attempt < MAX_DEADLOCK_RETRIES => attempt += 1,
            result => break result?,
        }
    };
    summary.stored += stored.len() as u64;
    summary.held += (outcomes.len() - stored.len()) as u64;
    Ok(())
}

/// Times a page's transaction is rerun after PostgreSQL broke a deadlock by aborting it.
const MAX_DEADLOCK_RETRIES: u32 = 3;

/// Stores `receipts` in the given order, marked fetched, in one statement: each outcome,
/// and the ids stored.
async fn store_in_order(
    connection: &mut sqlx::PgConnection,
    receipts: &[NewReceipt<'_>],
) -> Result<(Vec<InsertOutcome>, Vec<ReceiptId>), sqlx::Error> {
    let outcomes = store::receipts::backfill_receipts(connection, receipts).await?;
    let stored: Vec<ReceiptId> = outcomes
        .iter()
        .filter_map(|outcome| match outcome {
            InsertOutcome::Accepted(id) => Some(*id),
            InsertOutcome::Duplicate => None,
        })
        .collect();
    Ok((outcomes, stored))
}

/// PostgreSQL's `deadlock_detected` (40P01).
fn is_deadlock(error: &sqlx::Error) -> bool {
    error
        .as_database_error()
        .and_then(|error| error.code())
        .is_some_and(|code| code == "40P01")
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
            accounts: 1,
        };
        assert_eq!(
            serde_json::to_value(&summary).expect("json"),
            json!({"accounts": 1, "listed": 5, "stored": 1, "held": 2, "not_routed": 1, "other_scope": 1, "malformed": 0, "dry_run": true})
        );
    }
}
