//! `inboundctl github redeliver`: GitHub does not redeliver a failed delivery by itself.
//! This lists a hook's recent deliveries through GitHub's REST API (a repository's, an
//! organization's, or a GitHub App's hook), finds the events whose every delivery failed
//! *and* that inbound holds no receipt for (by delivery id, the receipt key), and asks
//! GitHub to redeliver each once — newest first, at most `--max`. Suitable for a CronJob.
//!
//! GitHub's guidance redelivers every failed delivery ("the data for a failed delivery
//! will have a `status` value that is not `OK`": docs.github.com, "Automatically
//! redelivering failed deliveries"). By default this asks again for what inbound could
//! not take then — no answer, a 408 (the body did not arrive in time), a 429 or a 5xx —
//! and, with `--include-status`, for the 4xx an operator has since fixed the cause of (a
//! 401 after a half-done secret rotation, a 404 after renaming an integration). The
//! held-receipt check keeps any of them from being stored twice.
//!
//! Authentication is a token (`--token env:NAME`: a fine-grained token with "Webhooks:
//! read and write" on the repository or organization) or, for an App's hook, the App's own
//! JWT (`--app-id` and `--app-key file:/key.pem`, signed RS256 here). Both are references,
//! never printed. Requests are paced; a 429, or a 403 with the rate limit spent, waits for
//! `Retry-After` or `X-RateLimit-Reset` (at most 60 s), at most 5 times in a row.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context, bail};
use chrono::{DateTime, Utc};
use clap::{Args, Subcommand};
use inbound_core::config::Config;
use inbound_core::verify::Provider;
use inbound_store as store;

use crate::operate::DatabaseArgs;
use crate::output::{out, out_exact};
use crate::provider_api;
use crate::provider_api::github::{Auth, GithubApi};
use crate::selection::{parse_time, secret_from};

/// `inboundctl github …`.
#[derive(Debug, Subcommand)]
pub enum GithubCommand {
    /// Ask GitHub to redeliver the events of a hook that failed and inbound does not hold.
    #[command(after_help = "Examples:
  inboundctl github redeliver --integration gh-acme --repo acme/app --hook-id 123 --since 1d --dry-run
  inboundctl github redeliver --integration gh-app --app --app-id 4567 --app-key file:/etc/inbound/app.pem --since 3d

A token needs \"Webhooks: read and write\" on the repository or organization; an App's hook
is read and redelivered with the App's JWT.")]
    Redeliver(RedeliverArgs),
}

/// `inboundctl github redeliver`.
#[derive(Debug, Args)]
pub struct RedeliverArgs {
    #[command(flatten)]
    database: DatabaseArgs,
    /// Configuration file (TOML): the integration must be there, and GitHub's.
    #[arg(long, env = "INBOUND_CONFIG")]
    config: PathBuf,
    /// The GitHub integration whose receipts say what inbound holds.
    #[arg(long)]
    integration: String,
    /// A repository's hook (`owner/name`).
    #[arg(long, conflicts_with_all = ["org", "app"])]
    repo: Option<String>,
    /// An organization's hook.
    #[arg(long, conflicts_with_all = ["repo", "app"])]
    org: Option<String>,
    /// The GitHub App's own hook (authenticates as the App: --app-id, --app-key).
    #[arg(long, conflicts_with_all = ["repo", "org"])]
    app: bool,
    /// The hook's id (repository and organization hooks).
    #[arg(long)]
    hook_id: Option<u64>,
    /// Deliveries at or after this (RFC 3339, or an age: 6h, 1d). GitHub keeps 3 days.
    #[arg(long, value_parser = parse_time)]
    since: DateTime<Utc>,
    /// A token, as a reference (`env:NAME` or `file:/path`).
    #[arg(long, default_value = "env:GITHUB_TOKEN")]
    token: String,
    /// The App's id (with --app).
    #[arg(long)]
    app_id: Option<u64>,
    /// The App's private key (PEM), as a reference (with --app).
    #[arg(long)]
    app_key: Option<String>,
    /// List what would be redelivered; ask for nothing.
    #[arg(long)]
    dry_run: bool,
    /// Also redeliver events whose last delivery inbound answered with this 4xx, once its
    /// cause is fixed (401 after a secret rotation, 404 after a rename); `4xx` for every
    /// one. Repeatable. 408 is always redelivered.
    #[arg(long = "include-status", value_parser = parse_included_status)]
    include_status: Vec<IncludedStatus>,
    /// Redeliver at most this many events in this run (newest first).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=1000))]
    max: u32,
    /// At most this many API requests per second.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=50))]
    requests_per_second: u32,
    /// GitHub's API base URL (a test server in the suite).
    #[arg(long, default_value = "https://api.github.com", hide = true)]
    api_base: String,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
}

/// What a run found and did.
#[derive(Debug, Default, serde::Serialize)]
struct Summary {
    /// Deliveries listed in the window.
    deliveries: u64,
    /// Events (delivery ids) none of whose deliveries succeeded.
    failed_events: u64,
    /// Of those, the ones inbound holds a receipt for (it stored them; GitHub's answer was lost).
    held: u64,
    /// Of those, the ones inbound refused for what they are (a 4xx other than 408 that
    /// `--include-status` does not name: a bad signature, too large) — a redelivery would
    /// be refused again.
    refused_by_inbound: u64,
    /// Redeliveries asked for (or, in a dry run, that would be).
    redelivered: u64,
    /// Redeliveries GitHub refused (each named on stderr).
    refused: u64,
    /// Left for the next run by `--max`.
    left: u64,
    /// Whether this was a dry run.
    dry_run: bool,
}

/// Runs `inboundctl github …`.
pub async fn run(command: GithubCommand) -> anyhow::Result<()> {
    match command {
        GithubCommand::Redeliver(args) => redeliver(args).await,
    }
}

/// The newest delivery of an event (its guid) and whether any of its deliveries succeeded.
struct EventDeliveries {
    newest_id: u64,
    newest_at: String,
    newest_status: u64,
    succeeded: bool,
}

impl EventDeliveries {
    /// Whether a redelivery can succeed where the last one failed: no answer (0), a 408
    /// (the body was not received in time), a 429 or a 5xx (inbound unavailable), or a
    /// 4xx the operator names (`included`): any other 4xx is inbound's verdict on the
    /// request itself, which asking again would not change.
    fn worth_redelivering(&self, included: &[IncludedStatus]) -> bool {
        let status = self.newest_status;
        status == 0
            || status == 408
            || status == 429
            || status >= 500
            || included.iter().any(|include| include.covers(status))
    }
}

/// A 4xx `--include-status` names: one status, or every one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IncludedStatus {
    One(u64),
    Every4xx,
}

impl IncludedStatus {
    fn covers(self, status: u64) -> bool {
        match self {
            Self::One(one) => one == status,
            Self::Every4xx => (400..500).contains(&status),
        }
    }
}

fn parse_included_status(value: &str) -> Result<IncludedStatus, String> {
    if value.eq_ignore_ascii_case("4xx") {
        return Ok(IncludedStatus::Every4xx);
    }
    match value.parse::<u64>() {
        Ok(status) if (400..500).contains(&status) => Ok(IncludedStatus::One(status)),
        _ => Err(format!(
            "{value:?} is not a 4xx status (400-499) or \"4xx\"; 0, 408, 429 and 5xx are always redelivered"
        )),
    }
}

async fn redeliver(args: RedeliverArgs) -> anyhow::Result<()> {
    let config = Config::load(&args.config).context("invalid configuration")?;
    let integration = provider_api::integration_of(&config, &args.integration, Provider::Github)?;
    let hook_path = hook_path(&args)?;
    let auth = if args.app {
        let id = args.app_id.context("--app needs --app-id")?;
        let reference = args
            .app_key
            .as_deref()
            .context("--app needs --app-key file:/key.pem")?;
        // Refused now, not after the listing: a key that cannot sign.
        Auth::app(id, secret_from("--app-key", reference)?)?
    } else {
        Auth::Token(secret_from("--token", &args.token)?)
    };
    let api = GithubApi::new(&args.api_base, auth, args.requests_per_second)?;
    let deliveries = api.deliveries(&hook_path, args.since).await?;
    let mut summary = Summary {
        dry_run: args.dry_run,
        deliveries: deliveries.len() as u64,
        ..Summary::default()
    };
    let mut events: BTreeMap<String, EventDeliveries> = BTreeMap::new();
    for delivery in deliveries {
        let succeeded = (200..300).contains(&delivery.status_code);
        let entry = events
            .entry(delivery.guid)
            .or_insert_with(|| EventDeliveries {
                newest_id: delivery.id,
                newest_at: delivery.at.clone(),
                newest_status: delivery.status_code,
                succeeded: false,
            });
        entry.succeeded |= succeeded;
        if delivery.at > entry.newest_at {
            (entry.newest_id, entry.newest_at, entry.newest_status) =
                (delivery.id, delivery.at, delivery.status_code);
        }
    }
    let mut failed: Vec<(&String, &EventDeliveries)> = events
        .iter()
        .filter(|(_, event)| !event.succeeded)
        .collect();
    failed.sort_by(|left, right| right.1.newest_at.cmp(&left.1.newest_at));
    summary.failed_events = failed.len() as u64;
    let guids: Vec<&str> = failed.iter().map(|(guid, _)| guid.as_str()).collect();
    let mut db = args.database.connect().await?;
    let held = db
        .run(async |connection| {
            Ok(store::receipts::held_event_ids(connection, &integration.id, &guids).await?)
        })
        .await?;
    summary.held = held.len() as u64;
    let not_held: Vec<_> = failed
        .into_iter()
        .filter(|(guid, _)| !held.contains(guid.as_str()))
        .collect();
    let (to_redeliver, refused): (Vec<_>, Vec<_>) = not_held
        .into_iter()
        .partition(|(_, event)| event.worth_redelivering(&args.include_status));
    summary.refused_by_inbound = refused.len() as u64;
    let max = args.max as usize;
    summary.left = to_redeliver.len().saturating_sub(max) as u64;
    for (guid, event) in to_redeliver.into_iter().take(max) {
        if args.dry_run {
            if !args.json {
                out!("would redeliver {guid} (delivery {})", event.newest_id);
            }
            summary.redelivered += 1;
            continue;
        }
        match api.redeliver(&hook_path, event.newest_id).await {
            Ok(()) => summary.redelivered += 1,
            Err(error) => {
                eprintln!(
                    "inboundctl: redelivery of {} refused: {}",
                    crate::output::terminal_safe(guid),
                    crate::output::terminal_safe(&format!("{error:#}"))
                );
                summary.refused += 1;
            }
        }
    }
    report(&summary, args.json)?;
    if summary.refused > 0 {
        bail!("GitHub refused {} redelivery request(s)", summary.refused);
    }
    Ok(())
}

/// The hook's API path: `/repos/{o}/{r}/hooks/{id}`, `/orgs/{o}/hooks/{id}` or `/app/hook`.
fn hook_path(args: &RedeliverArgs) -> anyhow::Result<String> {
    let hook_id = || {
        args.hook_id
            .context("--hook-id is needed for a repository or organization hook")
    };
    match (&args.repo, &args.org, args.app) {
        (Some(repo), None, false) => {
            let Some((owner, name)) = repo.split_once('/').filter(|(owner, name)| {
                !owner.is_empty() && !name.is_empty() && !name.contains('/')
            }) else {
                bail!("--repo must be owner/name");
            };
            Ok(format!(
                "/repos/{}/{}/hooks/{}",
                urlencoding::encode(owner),
                urlencoding::encode(name),
                hook_id()?
            ))
        }
        (None, Some(org), false) => Ok(format!(
            "/orgs/{}/hooks/{}",
            urlencoding::encode(org),
            hook_id()?
        )),
        (None, None, true) => Ok("/app/hook".to_owned()),
        _ => bail!("name the hook: --repo owner/name, --org name (each with --hook-id), or --app"),
    }
}

fn report(summary: &Summary, as_json: bool) -> anyhow::Result<()> {
    if as_json {
        out_exact!("{}", serde_json::to_string(summary)?);
        return Ok(());
    }
    let verb = if summary.dry_run {
        "would redeliver"
    } else {
        "redelivered"
    };
    out!(
        "{} deliveries: {} event(s) failed, {} of them held by inbound, {} refused by inbound for what they are; {verb} {}, refused {}, left for the next run {}",
        summary.deliveries,
        summary.failed_events,
        summary.held,
        summary.refused_by_inbound,
        summary.redelivered,
        summary.refused,
        summary.left
    );
    Ok(())
}
