//! `inboundctl effects list|show|resolve`: the effects that need a person (uncertain,
//! review, failed) by status, sink, owner and time, a page at a time; their attempt
//! history; and recorded decisions about them, by id or by filter (`--dry-run`, `--yes`).
//! A resolution fences out any dispatcher holding the effect (a reconciliation in
//! progress cannot overwrite it).

use crate::output::{out, out_exact};
use crate::selection::{
    ConfigArg, Confirmation, EffectStatus, Operator, Window, check_bulk, next_page_hint,
    sink_owner, sinks_selected,
};
use anyhow::bail;
use clap::{Args, Subcommand};
use inbound_core::config::Config;
use inbound_core::keys::EffectId;
use inbound_core::states::EffectAction;
use inbound_store::effects;
use serde_json::json;
use sqlx::PgConnection;

use crate::operate::DatabaseArgs;

/// `inboundctl effects …`.
#[derive(Debug, Subcommand)]
pub enum EffectsCommand {
    /// Effects in one state, newest first (or oldest first), a page at a time, or a
    /// summary per sink with its first error.
    #[command(after_help = "Examples:
  inboundctl effects list --status review
  inboundctl effects list --status failed --summary
  inboundctl effects list --status failed --sink fulfillment --oldest-first
  inboundctl effects list --status failed --sink fulfillment --since 1d
  inboundctl effects list --status uncertain --owner fulfillment-oncall --config config.toml")]
    List {
        #[command(flatten)]
        database: DatabaseArgs,
        /// The status.
        #[arg(long, value_parser = crate::selection::effect_status())]
        status: EffectStatus,
        #[command(flatten)]
        filter: EffectFilterArgs,
        /// Only ids below this: the `--before` a previous page printed (newest first).
        #[arg(long, conflicts_with_all = ["oldest_first", "summary"])]
        before: Option<EffectId>,
        /// Oldest first: where a run of failures began.
        #[arg(long, conflicts_with = "summary")]
        oldest_first: bool,
        /// Only ids above this: the `--after` a previous page printed (oldest first).
        #[arg(long, requires = "oldest_first")]
        after: Option<EffectId>,
        /// Per sink: how many, the oldest and newest, and the first error (the oldest
        /// effect with one).
        #[arg(long)]
        summary: bool,
        /// At most this many.
        #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(i64).range(1..=10_000))]
        limit: i64,
        /// Print JSON (an array; page on with the last id as --before, or --after oldest first).
        #[arg(long)]
        json: bool,
    },
    /// One effect with its attempt history (times, status codes, errors) and decisions.
    Show {
        #[command(flatten)]
        database: DatabaseArgs,
        /// The effect id.
        id: EffectId,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Decide about effects — it completed, send it again, or give it up — by id, or
    /// every effect in one status a filter selects.
    #[command(after_help = "Examples:
  inboundctl effects resolve 512 --completed --note \"confirmed in the fulfillment console\"
  inboundctl effects resolve --status review --sink fulfillment --since 2h --dry-run
  inboundctl effects resolve --status review --sink fulfillment --since 2h --retry --yes --note \"INC-42 fixed\"")]
    Resolve(ResolveArgs),
}

/// `effects resolve`: which effects (ids, or a filter with its confirmation), what
/// happened, who decides and why.
#[derive(Debug, Args)]
pub struct ResolveArgs {
    #[command(flatten)]
    database: DatabaseArgs,
    /// Effect ids: all are resolved, or none.
    #[arg(required_unless_present = "status", conflicts_with = "status")]
    ids: Vec<EffectId>,
    /// Resolve every effect in this status the filter selects.
    #[arg(long, value_parser = crate::selection::effect_status())]
    status: Option<EffectStatus>,
    #[command(flatten)]
    filter: EffectFilterArgs,
    #[command(flatten)]
    confirmation: Confirmation,
    /// It did happen (you checked with the receiver).
    #[arg(long, group = "action")]
    completed: bool,
    /// Send it again with the same operation key ("may have landed", the
    /// first-attempt time and the reconciliation count start afresh); a pending
    /// effect goes now.
    #[arg(long, group = "action")]
    retry: bool,
    /// Give it up unsent (it becomes abandoned, which retention may purge).
    #[arg(long, group = "action")]
    abandon: bool,
    /// Why (recorded).
    #[arg(long, required_unless_present = "dry_run")]
    note: Option<String>,
    #[command(flatten)]
    operator: Operator,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Which effects, besides their status.
#[derive(Debug, Clone, Args)]
pub struct EffectFilterArgs {
    /// Only this sink (exit 1 when no effect names it and the configuration does not).
    #[arg(long)]
    sink: Option<String>,
    /// Only sinks this owner answers for (needs --config).
    #[arg(long)]
    owner: Option<String>,
    #[command(flatten)]
    window: Window,
    #[command(flatten)]
    config: ConfigArg,
}

impl EffectFilterArgs {
    /// Whether anything besides the status narrows the selection.
    fn narrows(&self) -> bool {
        self.sink.is_some()
            || self.owner.is_some()
            || self.window.since.is_some()
            || self.window.until.is_some()
    }
}

/// The effects `status` and `filter` select, newest first; exit 1 when the filter names a
/// sink that neither the configuration nor any effect names.
async fn select(
    connection: &mut PgConnection,
    status: EffectStatus,
    filter: &EffectFilterArgs,
    config: Option<&Config>,
    page: Page,
    limit: i64,
) -> anyhow::Result<Vec<effects::EffectLine>> {
    let mut core_filter = effects::EffectFilter {
        status,
        sinks: sinks_selected(filter.sink.as_deref(), filter.owner.as_deref(), config)?,
        since: filter.window.since,
        until: filter.window.until,
        before_id: None,
        after_id: None,
    };
    let rows = match page {
        Page::NewestFirst { before } => {
            core_filter.before_id = before;
            effects::list(connection, &core_filter, limit).await?
        }
        Page::OldestFirst { after } => {
            core_filter.after_id = after;
            effects::list_oldest_first(connection, &core_filter, limit).await?
        }
    };
    if rows.is_empty()
        && let Some(sink) = &filter.sink
        && config.is_none_or(|config| config.sinks().iter().all(|known| &known.id != sink))
        && !effects::sink_has_effects(connection, sink).await?
    {
        bail!(
            "no sink {sink:?}: no effect names it{}",
            if config.is_some() {
                " and the configuration does not"
            } else {
                " (with --config, the configuration's ids count too)"
            }
        );
    }
    Ok(rows)
}

/// A page of a listing: newest first below a cursor, or oldest first above one.
#[derive(Debug, Clone, Copy)]
enum Page {
    NewestFirst { before: Option<EffectId> },
    OldestFirst { after: Option<EffectId> },
}

/// `effects list --summary`: per sink, how many, since when, and the first error.
async fn summarise(
    database: DatabaseArgs,
    status: EffectStatus,
    filter: EffectFilterArgs,
    json: bool,
) -> anyhow::Result<()> {
    let config = filter.config.load()?;
    let core_filter = effects::EffectFilter {
        status,
        sinks: sinks_selected(
            filter.sink.as_deref(),
            filter.owner.as_deref(),
            config.as_ref(),
        )?,
        since: filter.window.since,
        until: filter.window.until,
        before_id: None,
        after_id: None,
    };
    let mut db = database.connect().await?;
    let rows = db
        .run(async |connection| Ok(effects::summary_by_sink(connection, &core_filter).await?))
        .await?;
    if json {
        out_exact!("{}", serde_json::to_string(&rows)?);
        return Ok(());
    }
    out!(
        "{:<16} {:<16} {:>8}  {:<20} {:<20} first error (effect)",
        "sink",
        "owner",
        "count",
        "oldest",
        "newest"
    );
    for row in &rows {
        let first = match (&row.first_error, row.first_id) {
            (Some(error), Some(id)) => format!("{error} ({id})"),
            _ => "-".to_owned(),
        };
        out!(
            "{:<16} {:<16} {:>8}  {:<20} {:<20} {first}",
            row.sink,
            sink_owner(config.as_ref(), &row.sink),
            row.count,
            row.oldest_at.format("%Y-%m-%d %H:%M:%S").to_string(),
            row.newest_at.format("%Y-%m-%d %H:%M:%S").to_string(),
        );
    }
    if let Some(row) = rows.first() {
        out!(
            "\nFrom the first: inboundctl effects list --status {status} --sink {} --oldest-first",
            row.sink
        );
    }
    Ok(())
}

fn print_effects(
    rows: &[effects::EffectLine],
    config: Option<&Config>,
    json: bool,
) -> anyhow::Result<()> {
    if json {
        out_exact!("{}", serde_json::to_string(rows)?);
        return Ok(());
    }
    out!(
        "{:>8}  {:>8}  {:<16} {:<16} {:<10} {:>8}  operation key / last error",
        "id",
        "receipt",
        "sink",
        "owner",
        "status",
        "attempts"
    );
    for row in rows {
        out!(
            "{:>8}  {:>8}  {:<16} {:<16} {:<10} {:>8}  {}",
            row.id,
            row.receipt_id,
            row.sink,
            sink_owner(config, &row.sink),
            row.status,
            row.attempts,
            row.operation_key
        );
        if let Some(error) = &row.last_error {
            out!("{:>73}{error}", "");
        }
    }
    Ok(())
}

/// Runs an effects command.
pub async fn run(command: EffectsCommand) -> anyhow::Result<()> {
    match command {
        EffectsCommand::List {
            database,
            status,
            filter,
            summary: true,
            json,
            ..
        } => summarise(database, status, filter, json).await,
        EffectsCommand::List {
            database,
            status,
            filter,
            before,
            oldest_first,
            after,
            limit,
            json,
            ..
        } => {
            let page = if oldest_first {
                Page::OldestFirst { after }
            } else {
                Page::NewestFirst { before }
            };
            list(database, status, filter, page, limit, json).await
        }
        EffectsCommand::Show { database, id, json } => show(database, id, json).await,
        EffectsCommand::Resolve(args) => resolve(args).await,
    }
}

/// Lists effects in one state, a page at a time.
async fn list(
    database: DatabaseArgs,
    status: EffectStatus,
    filter: EffectFilterArgs,
    page: Page,
    limit: i64,
    json: bool,
) -> anyhow::Result<()> {
    let config = filter.config.load()?;
    let mut db = database.connect().await?;
    let rows = db
        .run(async |connection| {
            select(connection, status, &filter, config.as_ref(), page, limit).await
        })
        .await?;
    print_effects(&rows, config.as_ref(), json)?;
    let last = rows.last().map(|row| row.id);
    match page {
        Page::NewestFirst { .. } => next_page_hint(rows.len(), limit, last, json),
        Page::OldestFirst { .. } if !json && rows.len() as i64 == limit => {
            if let Some(last) = last {
                out!("(more: --after {last})");
            }
        }
        Page::OldestFirst { .. } => {}
    }
    Ok(())
}

/// Shows one effect with its history.
async fn show(database: DatabaseArgs, id: EffectId, json: bool) -> anyhow::Result<()> {
    let mut db = database.connect().await?;
    let (effect, attempts, resolutions) = db
        .run(async |connection| {
            let Some(effect) = effects::find(&mut *connection, id).await? else {
                bail!("effect {id} does not exist");
            };
            let attempts = effects::attempts(&mut *connection, id).await?;
            let resolutions = effects::resolutions(&mut *connection, id).await?;
            Ok((effect, attempts, resolutions))
        })
        .await?;
    if json {
        out_exact!(
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
        match (effect.status, effect.maybe_delivered) {
            // The sink answered 2xx: delivered, not "may have been".
            (EffectStatus::Completed, _) => ", delivered",
            (_, true) => ", may have been delivered",
            (_, false) => "",
        }
    );
    if let Some(error) = &effect.last_error {
        out!("  last error      {error}");
    }
    out!("  recorded        {}", effect.created_at);
    if let Some(next) = effect.next_attempt_at {
        if effect.status == EffectStatus::Pending {
            out!(
                "  next attempt    {next} (effects resolve {id} --retry makes it due now; if the sink's breaker is open, each worker ends its pause at its next gauge refresh, within --gauge-interval-secs, and sends it as the probe)"
            );
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
            "  resolved        {} by {} as role {} at {} (was {}): {}",
            resolution.action,
            resolution.resolved_by,
            resolution.database_role,
            resolution.resolved_at,
            resolution.previous_status,
            resolution.note
        );
    }
    Ok(())
}

/// Decides about effects, by id or by filter.
async fn resolve(args: ResolveArgs) -> anyhow::Result<()> {
    let ResolveArgs {
        database,
        ids,
        status,
        filter,
        confirmation,
        completed,
        retry,
        abandon,
        note,
        operator,
        json,
    } = args;
    let resolution = match (completed, retry, abandon) {
        (true, _, _) => Some(EffectAction::Complete),
        (_, true, _) => Some(EffectAction::Retry),
        (_, _, true) => Some(EffectAction::Abandon),
        _ => None,
    };
    check_bulk(status.is_some(), filter.narrows(), &confirmation)?;
    let mut db = database.connect().await?;
    let ids = match status {
        None => ids,
        Some(status) => {
            let config = filter.config.load()?;
            let selected = db
                .run(async |connection| {
                    select(
                        connection,
                        status,
                        &filter,
                        config.as_ref(),
                        Page::NewestFirst { before: None },
                        confirmation.max,
                    )
                    .await
                })
                .await?;
            let ids = selected.iter().map(|row| row.id).collect();
            let print = || print_effects(&selected, config.as_ref(), json);
            let Some(ids) = confirmation.ids(ids, "effect", "resolve", json, print)? else {
                return Ok(());
            };
            ids
        }
    };
    let Some(resolution) = resolution else {
        bail!("say what happened: --completed, --retry or --abandon");
    };
    let note = match note {
        Some(note) if !note.trim().is_empty() => note,
        _ => bail!("--note must say why"),
    };
    let by = operator.name()?;
    // One transaction, no savepoints: a refusal of any id leaves every one as it was.
    let ids = inbound_store::in_lock_order(&ids);
    db.run(async |connection| {
        effects::resolve_all(connection, &ids, resolution, status, &by, &note).await?;
        Ok(())
    })
    .await?;
    if json {
        out_exact!("{}", json!({"effects": ids, "action": resolution.as_str()}));
    } else {
        for id in &ids {
            out!("effect {id}: {} (recorded for {by})", resolution.as_str());
        }
        if status.is_some() {
            confirmation.more_may_match(ids.len(), false);
        }
    }
    Ok(())
}
