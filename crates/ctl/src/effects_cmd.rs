//! `inboundctl effects list|show|resolve`: the effects that need a person (uncertain,
//! review, failed), their attempt history, and recorded decisions about them. A
//! resolution fences out any dispatcher holding the effect (a reconciliation in
//! progress cannot overwrite it).

use crate::output::out;
use anyhow::bail;
use clap::Subcommand;
use inbound_core::store::effects::{self, Resolution};
use serde_json::json;
use sqlx::Connection;

use crate::operate::DatabaseArgs;

use effects::STATUSES;

/// `inboundctl effects …`.
#[derive(Debug, Subcommand)]
pub enum EffectsCommand {
    /// Effects in one state, newest first.
    List {
        #[command(flatten)]
        database: DatabaseArgs,
        /// pending | in_flight | completed | failed | uncertain | review | abandoned.
        #[arg(long)]
        status: String,
        /// Only this sink.
        #[arg(long)]
        sink: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: i64,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// One effect with its attempt history (times, status codes, errors) and decisions.
    Show {
        #[command(flatten)]
        database: DatabaseArgs,
        /// The effect id.
        id: i64,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Decide about an effect: it completed, send it again, or give it up.
    Resolve {
        #[command(flatten)]
        database: DatabaseArgs,
        /// Effect ids: all are resolved, or none.
        #[arg(required = true)]
        ids: Vec<i64>,
        /// It did happen (you checked with the receiver).
        #[arg(long, group = "action")]
        completed: bool,
        /// Send it again with the same operation key ("may have landed", the
        /// first-attempt time and the reconciliation count start afresh).
        #[arg(long, group = "action")]
        retry: bool,
        /// Give it up unsent (it becomes abandoned, which retention may purge).
        #[arg(long, group = "action")]
        abandon: bool,
        /// Why (recorded).
        #[arg(long)]
        note: String,
        /// Who (recorded); defaults to $USER.
        #[arg(long, env = "USER", default_value = "unknown")]
        by: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Runs an effects command.
pub async fn run(command: EffectsCommand) -> anyhow::Result<()> {
    match command {
        EffectsCommand::List {
            database,
            status,
            sink,
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
            let rows = effects::list(&mut connection, &status, sink.as_deref(), limit).await?;
            if json {
                out!("{}", serde_json::to_string(&rows)?);
                return Ok(());
            }
            out!(
                "{:>8}  {:>8}  {:<16} {:<10} {:>8}  operation key / last error",
                "id",
                "receipt",
                "sink",
                "status",
                "attempts"
            );
            for row in rows {
                out!(
                    "{:>8}  {:>8}  {:<16} {:<10} {:>8}  {}",
                    row.id,
                    row.receipt_id,
                    row.sink,
                    row.status,
                    row.attempts,
                    row.operation_key
                );
                if let Some(error) = row.last_error {
                    out!("{:>56}{error}", "");
                }
            }
            Ok(())
        }
        EffectsCommand::Show { database, id, json } => {
            let mut connection = database.connect().await?;
            let Some(effect) = effects::find(&mut connection, id).await? else {
                bail!("effect {id} does not exist");
            };
            let attempts = effects::attempts(&mut connection, id).await?;
            let resolutions = effects::resolutions(&mut connection, id).await?;
            if json {
                out!(
                    "{}",
                    json!({"effect": effect, "attempts": attempts, "resolutions": resolutions})
                );
                return Ok(());
            }
            out!(
                "effect {} ({} → {})",
                effect.id,
                effect.operation_key,
                effect.sink
            );
            out!("  kind            {}", effect.kind);
            out!("  receipt         {}", effect.receipt_id);
            out!(
                "  status          {} after {} attempt(s){}",
                effect.status,
                effect.attempts,
                if effect.maybe_delivered {
                    ", may have been delivered"
                } else {
                    ""
                }
            );
            if let Some(error) = &effect.last_error {
                out!("  last error      {error}");
            }
            out!("  recorded        {}", effect.created_at);
            if let Some(next) = effect.next_attempt_at {
                if effect.status == "pending" {
                    out!("  next attempt    {next} (effects resolve {id} --retry sends it now)");
                } else {
                    out!("  next check      {next} (its status URL is asked then)");
                }
            }
            out!("  history");
            for attempt in &attempts {
                out!(
                    "    #{} {:<9} {} → {}  {}{}{}",
                    attempt.attempt,
                    attempt.kind,
                    attempt.started_at,
                    attempt
                        .finished_at
                        .map(|at| at.to_string())
                        .unwrap_or_else(|| "(not recorded)".to_owned()),
                    attempt.outcome.as_deref().unwrap_or("-"),
                    attempt
                        .status_code
                        .map(|code| format!(" {code}"))
                        .unwrap_or_default(),
                    attempt
                        .error
                        .as_deref()
                        .map(|error| format!(" — {error}"))
                        .unwrap_or_default()
                );
            }
            for resolution in &resolutions {
                out!(
                    "  resolved        {} by {} at {} (was {}): {}",
                    resolution.action,
                    resolution.resolved_by,
                    resolution.resolved_at,
                    resolution.previous_status,
                    resolution.note
                );
            }
            Ok(())
        }
        EffectsCommand::Resolve {
            database,
            ids,
            completed,
            retry,
            abandon,
            note,
            by,
            json,
        } => {
            let resolution = match (completed, retry, abandon) {
                (true, _, _) => Resolution::Completed,
                (_, true, _) => Resolution::Retry,
                (_, _, true) => Resolution::Abandon,
                _ => bail!("say what happened: --completed, --retry or --abandon"),
            };
            if note.trim().is_empty() {
                bail!("--note must say why");
            }
            let mut connection = database.connect().await?;
            // One transaction (each resolution a savepoint within it): a refusal of any
            // id leaves every one as it was.
            let mut transaction = connection.begin().await?;
            for &id in &ids {
                effects::resolve(&mut transaction, id, resolution, &by, &note).await?;
            }
            transaction.commit().await?;
            if json {
                out!("{}", json!({"effects": ids, "action": resolution.action()}));
            } else {
                for id in &ids {
                    out!("effect {id}: {} (recorded for {by})", resolution.action());
                }
            }
            Ok(())
        }
    }
}
