//! Operators' commands for stuck work and retention: `status`, `receipts list|show|replay`
//! and `purge`. Each prints a readable table, or JSON with `--json`, and refuses bad input
//! (unknown id, wrong state, bad ages) with a clear message and a non-zero exit.

use crate::output::out;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use inbound_core::config::Config;
use inbound_core::payload;
use inbound_core::store::{self, admin, effects};
use serde_json::json;
use sqlx::{Connection, PgConnection};

/// How to reach the database.
#[derive(Debug, Args)]
pub struct DatabaseArgs {
    /// PostgreSQL URL.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    database_url: String,
    /// The schema of inbound's tables.
    #[arg(long, env = "INBOUND_SCHEMA", default_value = store::DEFAULT_SCHEMA,
          value_parser = store::Schema::parse_own)]
    schema: store::Schema,
    /// How the URL reaches PostgreSQL: none (directly, or a session pooler) or
    /// transaction (a transaction-pooling proxy; docs/operations.md).
    #[arg(long, env = "INBOUND_DB_POOLER", default_value = "none")]
    db_pooler: store::Pooler,
}

impl DatabaseArgs {
    /// Connects, giving up after 10 s.
    pub async fn connect(&self) -> anyhow::Result<PgConnection> {
        let target = store::SessionTarget {
            schema: self.schema.clone(),
            pooler: self.db_pooler,
        };
        connect(
            &store::connect_options(&self.database_url, &target)?,
            &target,
            Duration::from_secs(10),
        )
        .await
    }
}

/// One session for `target` within `timeout`; behind a transaction pooler it is checked
/// as every pooled session is (the role's schema and durability), and a pooler refusing
/// a direct session's startup options is named with the flag that fixes it.
pub async fn connect(
    options: &sqlx::postgres::PgConnectOptions,
    target: &store::SessionTarget,
    timeout: Duration,
) -> anyhow::Result<PgConnection> {
    let connected = tokio::time::timeout(timeout, PgConnection::connect_with(options))
        .await
        .context("cannot connect to PostgreSQL: timed out")?;
    let mut connection = match connected {
        Ok(connection) => connection,
        Err(error) => match store::session::explain_connect_error(&error, target.pooler) {
            Some(explained) => bail!("cannot connect to PostgreSQL: {explained}"),
            None => return Err(error).context("cannot connect to PostgreSQL"),
        },
    };
    if target.pooler == store::Pooler::Transaction {
        store::session::role_settings_hold(&mut connection, &target.schema)
            .await
            .context("cannot use this database session")?;
    }
    Ok(connection)
}

/// `inboundctl receipts …`.
#[derive(Debug, Subcommand)]
pub enum ReceiptsCommand {
    /// Receipts in one state, newest first.
    List {
        #[command(flatten)]
        database: DatabaseArgs,
        /// pending | done | quarantined | failed.
        #[arg(long)]
        status: String,
        /// Only this integration.
        #[arg(long)]
        integration: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: i64,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// One receipt: payload, attempts, last error, outcome and effects.
    Show {
        #[command(flatten)]
        database: DatabaseArgs,
        /// The receipt id.
        id: i64,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Take pending receipts out of the queue as quarantined: a person must look.
    Quarantine {
        #[command(flatten)]
        resolution: ResolutionArgs,
    },
    /// Take pending receipts out of the queue as failed: no worker will try them again.
    Fail {
        #[command(flatten)]
        resolution: ResolutionArgs,
    },
    /// Send failed or quarantined receipts back to pending (attempts reset).
    Replay {
        #[command(flatten)]
        database: DatabaseArgs,
        /// Receipt ids.
        #[arg(required = true)]
        ids: Vec<i64>,
        /// Why (recorded).
        #[arg(long)]
        reason: String,
        /// Who (recorded); defaults to $USER.
        #[arg(long, env = "USER", default_value = "unknown")]
        by: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Which pending receipts to resolve, who decides and why.
#[derive(Debug, Args)]
pub struct ResolutionArgs {
    #[command(flatten)]
    database: DatabaseArgs,
    /// Receipt ids.
    #[arg(required = true)]
    ids: Vec<i64>,
    /// Why (recorded).
    #[arg(long)]
    reason: String,
    /// Who (recorded); defaults to $USER.
    #[arg(long, env = "USER", default_value = "unknown")]
    by: String,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

const STATUSES: [&str; 4] = ["pending", "done", "quarantined", "failed"];

/// `inboundctl status`.
pub async fn status(
    database: &DatabaseArgs,
    config: Option<&Path>,
    as_json: bool,
) -> anyhow::Result<()> {
    let mut connection = database.connect().await?;
    let counts = admin::receipt_counts(&mut connection).await?;
    let effects = effects::counts(&mut connection, effects::STATUSES).await?;
    let mut integrations = admin::queued_integrations(&mut connection).await?;
    if let Some(path) = config {
        let config = Config::load(path)?;
        integrations.extend(
            config
                .integrations()
                .iter()
                .map(|integration| integration.id.clone()),
        );
        integrations.sort();
        integrations.dedup();
    }
    let mut ages = Vec::new();
    for integration in &integrations {
        ages.push((
            integration.clone(),
            admin::queue_ages(&mut connection, integration).await?,
        ));
    }
    if as_json {
        let by_integration = |age: fn(&admin::QueueAges) -> f64| {
            ages.iter()
                .map(|(id, ages)| (id.clone(), json!(age(ages))))
                .collect::<serde_json::Map<String, serde_json::Value>>()
        };
        let effects: serde_json::Map<String, serde_json::Value> = effects
            .into_iter()
            .map(|(state, n)| (state, json!(n)))
            .collect();
        out!(
            "{}",
            json!({"receipts": counts, "effects": effects,
                   "oldest_pending_age_seconds": by_integration(|ages| ages.pending),
                   "oldest_waiting_age_seconds": by_integration(|ages| ages.waiting)})
        );
        return Ok(());
    }
    out!("receipts");
    for (state, count) in counts.by_state() {
        out!("  {state:<12} {count}");
    }
    out!("effects");
    for (state, count) in &effects {
        out!("  {state:<12} {count}");
    }
    out!("oldest age (s)            claimable   waiting out a retry");
    if ages.is_empty() {
        out!("  (nothing pending)");
    }
    for (integration, ages) in ages {
        out!(
            "  {integration:<24} {:>9.1}   {:>9.1}",
            ages.pending,
            ages.waiting
        );
    }
    Ok(())
}

/// `inboundctl receipts …`.
pub async fn receipts(command: ReceiptsCommand) -> anyhow::Result<()> {
    match command {
        ReceiptsCommand::List {
            database,
            status,
            integration,
            limit,
            json,
        } => {
            if !STATUSES.contains(&status.as_str()) {
                bail!("--status {status:?} is not one of {}", STATUSES.join(", "));
            }
            if limit < 1 {
                bail!("--limit must be at least 1");
            }
            let mut connection = database.connect().await?;
            let rows =
                admin::list_receipts(&mut connection, &status, integration.as_deref(), limit)
                    .await?;
            if json {
                out!("{}", serde_json::to_string(&rows)?);
            } else {
                out!(
                    "{:>10}  {:<20} {:<12} {:<10} {:>8}  {:<28} {:<28} reason",
                    "id",
                    "integration",
                    "status",
                    "outcome",
                    "attempts",
                    "event type",
                    "event"
                );
                for row in rows {
                    out!(
                        "{:>10}  {:<20} {:<12} {:<10} {:>8}  {:<28} {:<28} {}",
                        row.id,
                        row.integration,
                        row.status,
                        row.outcome.as_deref().unwrap_or("-"),
                        row.attempts,
                        row.event_type,
                        row.event_id,
                        row.reason.as_deref().unwrap_or("-")
                    );
                }
            }
            Ok(())
        }
        ReceiptsCommand::Show { database, id, json } => {
            let mut connection = database.connect().await?;
            let Some(detail) = admin::receipt_detail(&mut connection, id).await? else {
                bail!("receipt {id} does not exist");
            };
            let effects = admin::receipt_effects(&mut connection, id).await?;
            let history = admin::receipt_history(&mut connection, id).await?;
            // Complete end to end: the transition is done and every effect delivered.
            let complete = detail.status == "done"
                && effects.iter().all(|effect| effect.status == "completed");
            if json {
                /// Serialized straight to text: the payload is written as stored, never
                /// parsed into a value (which numbers beyond a double would fail).
                #[derive(serde::Serialize)]
                struct Shown<'a> {
                    receipt: &'a admin::ReceiptDetail,
                    effects: &'a [admin::EffectSummary],
                    history: &'a [admin::ReceiptDecision],
                    complete: bool,
                }
                let shown = Shown {
                    receipt: &detail,
                    effects: &effects,
                    history: &history,
                    complete,
                };
                out!("{}", serde_json::to_string(&shown)?);
                return Ok(());
            }
            out!(
                "receipt {} ({} / {})",
                detail.id,
                detail.integration,
                detail.event_id
            );
            out!("  scope        {}", detail.source_scope);
            out!(
                "  type         {} (route {})",
                detail.event_type,
                detail.route_key
            );
            out!(
                "  status       {}{}",
                detail.status,
                detail
                    .outcome
                    .as_deref()
                    .map(|outcome| format!(" ({outcome})"))
                    .unwrap_or_default()
            );
            if let Some(reason) = &detail.outcome_reason {
                out!("  reason       {reason}");
            }
            out!("  attempts     {}", detail.attempts);
            out!(
                "  complete     {}",
                if complete {
                    "yes (done, every effect completed)"
                } else {
                    "no"
                }
            );
            if let Some(error) = &detail.last_error {
                out!("  last error   {error}");
            }
            out!("  received     {}", detail.received_at);
            if let Some(finished) = detail.finished_at {
                out!("  finished     {finished}");
            }
            if let Some(visible) = detail.visible_at {
                out!(
                    "  next claim   {visible}{}",
                    detail
                        .leased_by
                        .as_deref()
                        .map(|by| format!(" (leased by {by})"))
                        .unwrap_or_default()
                );
            }
            for decision in &history {
                let done = match decision.action.as_str() {
                    "replay" => "replayed",
                    "quarantine" => "quarantined",
                    _ => "failed",
                };
                out!(
                    "  decision     {} {done} by {} (was {}): {}",
                    decision.at,
                    decision.by,
                    decision.previous_status,
                    decision.reason
                );
            }
            out!(
                "  effects      {}",
                if effects.is_empty() { "none" } else { "" }
            );
            for effect in &effects {
                out!(
                    "    {} {} → {} [{}] attempts {}",
                    effect.id,
                    effect.operation_key,
                    effect.sink,
                    effect.status,
                    effect.attempts
                );
            }
            match detail.payload.as_deref() {
                None if detail.payload_unreadable.is_some() => out!(
                    "  payload      (cannot be rendered: {})",
                    detail.payload_unreadable.as_deref().unwrap_or_default()
                ),
                None => out!("  payload      (purged)"),
                Some(text) => match payload::decode(text) {
                    Ok(payload) => {
                        out!("  payload\n{}", serde_json::to_string_pretty(&payload)?);
                    }
                    // Stored before the storability contract: show it exactly as stored.
                    Err(error) => out!("  payload      (not decodable: {error})\n{text}"),
                },
            }
            Ok(())
        }
        ReceiptsCommand::Quarantine { resolution } => {
            resolve_pending(resolution, admin::PendingResolution::Quarantine).await
        }
        ReceiptsCommand::Fail { resolution } => {
            resolve_pending(resolution, admin::PendingResolution::Fail).await
        }
        ReceiptsCommand::Replay {
            database,
            ids,
            reason,
            by,
            json,
        } => {
            if reason.trim().is_empty() {
                bail!("--reason must say why");
            }
            let mut connection = database.connect().await?;
            admin::replay(&mut connection, &ids, &by, &reason).await?;
            if json {
                out!("{}", json!({"replayed": ids}));
            } else {
                out!(
                    "replayed {} receipt(s): {}",
                    ids.len(),
                    ids.iter()
                        .map(i64::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
            Ok(())
        }
    }
}

/// `inboundctl receipts quarantine|fail`.
async fn resolve_pending(
    args: ResolutionArgs,
    resolution: admin::PendingResolution,
) -> anyhow::Result<()> {
    if args.reason.trim().is_empty() {
        bail!("--reason must say why");
    }
    let mut connection = args.database.connect().await?;
    admin::resolve_pending(
        &mut connection,
        &args.ids,
        resolution,
        &args.by,
        &args.reason,
    )
    .await?;
    let verb = match resolution {
        admin::PendingResolution::Quarantine => "quarantined",
        admin::PendingResolution::Fail => "failed",
    };
    if args.json {
        out!("{}", json!({ verb: args.ids }));
    } else {
        let ids: Vec<String> = args.ids.iter().map(i64::to_string).collect();
        out!("{verb} {} receipt(s): {}", args.ids.len(), ids.join(", "));
    }
    Ok(())
}

/// `inboundctl purge`.
pub async fn purge(
    database: &DatabaseArgs,
    payload_days: u32,
    key_days: Option<u32>,
    batch_size: i64,
    as_json: bool,
) -> anyhow::Result<()> {
    if let Some(key_days) = key_days
        && key_days < payload_days
    {
        bail!(
            "--keys-older-than-days ({key_days}) must be at least --payloads-older-than-days ({payload_days})"
        );
    }
    if batch_size < 1 {
        bail!("--batch-size must be at least 1");
    }
    let mut connection = database.connect().await?;
    let mut payloads = 0;
    loop {
        let purged = admin::purge_payloads_batch(&mut connection, payload_days, batch_size).await?;
        payloads += purged;
        if purged < batch_size as u64 {
            break;
        }
    }
    let mut keys = 0;
    if let Some(key_days) = key_days {
        loop {
            let purged = admin::purge_keys_batch(&mut connection, key_days, batch_size).await?;
            keys += purged;
            if purged < batch_size as u64 {
                break;
            }
        }
    }
    if as_json {
        out!(
            "{}",
            json!({"payloads_purged": payloads, "keys_purged": keys})
        );
    } else {
        out!("purged {payloads} payload(s) and {keys} receipt key row(s)");
    }
    Ok(())
}
