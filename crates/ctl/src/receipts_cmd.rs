//! `inboundctl receipts list|find|show|quarantine|fail|replay|close`: finding receipts
//! (by the provider's event id, or by status, integration, owner, type and time, a page at
//! a time) and deciding about them, one by one or by filter (`--dry-run`, `--yes`). Every
//! decision is recorded with who and why, and refused whole when any receipt is in the
//! wrong state.

use crate::output::{out, out_exact};
use crate::selection::{
    ConfigArg, Confirmation, Operator, ReceiptStatus, Window, check_bulk, integration_owner,
    integrations_selected, next_page_hint,
};
use inbound_core::keys::ReceiptId;

use anyhow::bail;
use clap::{Args, Subcommand};
use inbound_core::config::Config;
use inbound_store::admin;
use serde_json::json;
use sqlx::PgConnection;

use crate::operate::DatabaseArgs;
use crate::receipt_text;

/// `inboundctl receipts …`.
#[derive(Debug, Subcommand)]
pub enum ReceiptsCommand {
    /// Receipts in one state, newest first, a page at a time.
    #[command(after_help = "Examples:
  inboundctl receipts list --status failed --integration stripe-live --since 1d
  inboundctl receipts list --status quarantined --owner payments --config config.toml
  inboundctl receipts list --status failed --before 81234   # the next page")]
    List {
        #[command(flatten)]
        database: DatabaseArgs,
        /// The status.
        #[arg(long, value_parser = crate::selection::receipt_status())]
        status: ReceiptStatus,
        #[command(flatten)]
        filter: ReceiptFilterArgs,
        /// Only ids below this: the `--before` a previous page printed.
        #[arg(long)]
        before: Option<ReceiptId>,
        /// At most this many.
        #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(i64).range(1..=10_000))]
        limit: i64,
        /// Print JSON (an array; page on with the smallest id as --before).
        #[arg(long)]
        json: bool,
    },
    /// The receipts holding a provider's event id, in any scope: Stripe `evt_…`, GitHub's
    /// `X-GitHub-Delivery`, Slack's `event_id`, a Standard Webhooks `webhook-id`.
    #[command(after_help = "Examples:
  inboundctl receipts find --event-id evt_1PqR2sT3uV4wX5yZ
  inboundctl receipts find --event-id 72d3162e-cc78-11e3-81ab-4c9367dc0958   # a GitHub delivery")]
    Find {
        #[command(flatten)]
        database: DatabaseArgs,
        /// The provider's id of the event (for GitHub, the delivery id).
        #[arg(long)]
        event_id: String,
        #[command(flatten)]
        config: ConfigArg,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// One receipt: payload, attempts, last error, outcome, decisions and effects.
    /// Shows one receipt with its payload; the read is recorded with who reads
    /// (`inboundctl audit reads`).
    Show {
        #[command(flatten)]
        database: DatabaseArgs,
        #[command(flatten)]
        operator: Operator,
        /// The receipt id.
        id: ReceiptId,
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
    /// Send failed or quarantined receipts back to pending (attempts reset), or make a
    /// pending receipt waiting out a retry delay due now — by id, or every failed or
    /// quarantined receipt a filter selects.
    #[command(after_help = "Examples:
  inboundctl receipts replay 81234 81240 --reason \"order sync fixed (INC-42)\"
  inboundctl receipts replay --status failed --integration stripe-live --since 6h --dry-run
  inboundctl receipts replay --status failed --integration stripe-live --since 6h --yes --reason \"INC-42\"")]
    Replay(DecisionArgs),
    /// Close failed or quarantined receipts that will not be processed: each ends done
    /// (outcome closed, the reason kept), its key stays so a redelivery is a duplicate,
    /// and the alert about it clears — by id, or every one in a status a filter selects.
    #[command(after_help = "Examples:
  inboundctl receipts close 81234 --reason \"test-mode event sent to live (INC-42); nothing to apply\"
  inboundctl receipts close --status quarantined --integration stripe-live --since 6h --dry-run
  inboundctl receipts close --status quarantined --integration stripe-live --since 6h --yes --reason \"INC-42: test-mode events\"")]
    Close(DecisionArgs),
}

/// `receipts replay` and `receipts close`: which receipts (ids, or a filter with its
/// confirmation), who decides and why.
#[derive(Debug, Args)]
pub struct DecisionArgs {
    #[command(flatten)]
    database: DatabaseArgs,
    /// Receipt ids: the decision applies to all of them, or to none.
    #[arg(required_unless_present = "status", conflicts_with = "status")]
    ids: Vec<ReceiptId>,
    /// Every receipt in this status the filter selects (failed or quarantined).
    #[arg(long, value_parser = crate::selection::receipt_status())]
    status: Option<ReceiptStatus>,
    #[command(flatten)]
    filter: ReceiptFilterArgs,
    #[command(flatten)]
    confirmation: Confirmation,
    /// Why (recorded).
    #[arg(long, required_unless_present = "dry_run")]
    reason: Option<String>,
    #[command(flatten)]
    operator: Operator,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Which receipts, besides their status.
#[derive(Debug, Clone, Args)]
pub struct ReceiptFilterArgs {
    /// Only this integration (exit 1 when none by that id exists).
    #[arg(long)]
    integration: Option<String>,
    /// Only integrations this owner answers for (needs --config).
    #[arg(long)]
    owner: Option<String>,
    /// Only this event type.
    #[arg(long = "type")]
    event_type: Option<String>,
    #[command(flatten)]
    window: Window,
    #[command(flatten)]
    config: ConfigArg,
}

impl ReceiptFilterArgs {
    /// Whether anything besides the status narrows the selection.
    fn narrows(&self) -> bool {
        self.integration.is_some()
            || self.owner.is_some()
            || self.event_type.is_some()
            || self.window.since.is_some()
            || self.window.until.is_some()
    }
}

/// Which pending receipts to resolve, who decides and why.
#[derive(Debug, Args)]
pub struct ResolutionArgs {
    #[command(flatten)]
    database: DatabaseArgs,
    /// Receipt ids.
    #[arg(required = true)]
    ids: Vec<ReceiptId>,
    /// Why (recorded).
    #[arg(long)]
    reason: String,
    #[command(flatten)]
    operator: Operator,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// `inboundctl receipts …`.
pub async fn run(command: ReceiptsCommand) -> anyhow::Result<()> {
    match command {
        ReceiptsCommand::List {
            database,
            status,
            filter,
            before,
            limit,
            json,
        } => list(database, status, filter, before, limit, json).await,
        ReceiptsCommand::Find {
            database,
            event_id,
            config,
            json,
        } => find(database, event_id, config, json).await,
        ReceiptsCommand::Show {
            database,
            operator,
            id,
            json,
        } => show(database, &operator, id, json).await,
        ReceiptsCommand::Quarantine { resolution } => {
            resolve_pending(resolution, admin::PendingResolution::Quarantine).await
        }
        ReceiptsCommand::Fail { resolution } => {
            resolve_pending(resolution, admin::PendingResolution::Fail).await
        }
        ReceiptsCommand::Replay(args) => decide(Decision::Replay, args).await,
        ReceiptsCommand::Close(args) => decide(Decision::Close, args).await,
    }
}

/// Lists receipts in one state, a page at a time.
async fn list(
    database: DatabaseArgs,
    status: ReceiptStatus,
    filter: ReceiptFilterArgs,
    before: Option<ReceiptId>,
    limit: i64,
    json: bool,
) -> anyhow::Result<()> {
    let config = filter.config.load()?;
    let mut db = database.connect().await?;
    let selected = db
        .run(async |connection| {
            select(connection, status, &filter, config.as_ref(), before, limit).await
        })
        .await?;
    print_receipts(&selected, config.as_ref(), json)?;
    next_page_hint(
        selected.len(),
        limit,
        selected.last().map(|row| row.id),
        json,
    );
    Ok(())
}

/// Finds the receipts holding a provider's event id.
async fn find(
    database: DatabaseArgs,
    event_id: String,
    config: ConfigArg,
    json: bool,
) -> anyhow::Result<()> {
    let config = config.load()?;
    let mut db = database.connect().await?;
    let found = db
        .run(async |connection| Ok(admin::receipts_by_event_id(connection, &event_id).await?))
        .await?;
    if found.is_empty() {
        bail!(
            "no receipt holds event id {event_id:?}: it never arrived, was answered `ignored` (no route: see inbound_ingress_ignored_total), or its key was purged"
        );
    }
    print_receipts(&found, config.as_ref(), json)
}

/// What an operator decides about receipts chosen by id or by filter.
#[derive(Debug, Clone, Copy)]
enum Decision {
    /// Back to pending (failed, quarantined), or due now (pending).
    Replay,
    /// Done and closed for good (failed, quarantined).
    Close,
}

impl Decision {
    /// The verb, and its past participle as reports say it.
    fn verbs(self) -> (&'static str, &'static str) {
        match self {
            Self::Replay => ("replay", "replayed"),
            Self::Close => ("close", "closed"),
        }
    }
}

/// Makes `decision` about receipts, by id or by filter (dry run, `--yes`, each still in
/// the status it was chosen in), all or none, audited.
async fn decide(decision: Decision, args: DecisionArgs) -> anyhow::Result<()> {
    let DecisionArgs {
        database,
        ids,
        status,
        filter,
        confirmation,
        reason,
        operator,
        json,
    } = args;
    check_bulk(status.is_some(), filter.narrows(), &confirmation)?;
    let mut db = database.connect().await?;
    let ids = match status {
        None => ids,
        Some(status) => {
            let Some(ids) =
                chosen_by_filter(&mut db, status, &filter, &confirmation, decision, json).await?
            else {
                return Ok(());
            };
            ids
        }
    };
    let reason = required_reason(reason.as_deref())?;
    let by = operator.name()?;
    let ids = inbound_store::in_lock_order(&ids);
    db.run(async |connection| {
        match decision {
            Decision::Replay => admin::replay(connection, &ids, status, &by, &reason).await?,
            Decision::Close => admin::close(connection, &ids, status, &by, &reason).await?,
        }
        Ok(())
    })
    .await?;
    report(&ids, decision.verbs().1, json);
    if status.is_some() {
        confirmation.more_may_match(ids.len(), json);
    }
    Ok(())
}

/// The failed or quarantined receipts a filter selects, confirmed (`--yes`) or shown
/// (`--dry-run`: `None`) for `decision`.
async fn chosen_by_filter(
    db: &mut crate::db::Db,
    status: ReceiptStatus,
    filter: &ReceiptFilterArgs,
    confirmation: &Confirmation,
    decision: Decision,
    json: bool,
) -> anyhow::Result<Option<Vec<ReceiptId>>> {
    let (verb, done) = decision.verbs();
    if !ReceiptStatus::NEEDS_A_PERSON.contains(&status) {
        bail!(
            "--status {} cannot be {done} by filter: only failed or quarantined{}",
            status.as_str(),
            if matches!(decision, Decision::Replay) {
                " (a pending receipt is replayed by id)"
            } else {
                ""
            }
        );
    }
    let config = filter.config.load()?;
    let selected = db
        .run(async |connection| {
            select(
                connection,
                status,
                filter,
                config.as_ref(),
                None,
                confirmation.max,
            )
            .await
        })
        .await?;
    let ids = selected.iter().map(|row| row.id).collect();
    let print = || print_receipts(&selected, config.as_ref(), json);
    confirmation.ids(ids, "receipt", verb, json, print)
}

/// The receipts `status` and `filter` select, newest first; exit 1 when the filter names
/// an integration that does not exist (neither in the configuration nor in any receipt).
async fn select(
    connection: &mut PgConnection,
    status: ReceiptStatus,
    filter: &ReceiptFilterArgs,
    config: Option<&Config>,
    before: Option<ReceiptId>,
    limit: i64,
) -> anyhow::Result<Vec<admin::ReceiptSummary>> {
    let integrations = integrations_selected(
        filter.integration.as_deref(),
        filter.owner.as_deref(),
        config,
    )?;
    let core_filter = admin::ReceiptFilter {
        status,
        integrations,
        event_type: filter.event_type.clone(),
        since: filter.window.since,
        until: filter.window.until,
        before_id: before,
        after_id: None,
    };
    let rows = admin::list_receipts(connection, &core_filter, limit).await?;
    if rows.is_empty()
        && let Some(integration) = &filter.integration
        && config.is_none_or(|config| config.integration(integration).is_none())
        && !admin::integrations_with_receipts(connection)
            .await?
            .contains(integration)
    {
        bail!(
            "no integration {integration:?}: no receipt names it{}",
            if config.is_some() {
                " and the configuration does not"
            } else {
                " (with --config, the configuration's ids count too)"
            }
        );
    }
    Ok(rows)
}

fn required_reason(reason: Option<&str>) -> anyhow::Result<String> {
    match reason {
        Some(reason) if !reason.trim().is_empty() => Ok(reason.to_owned()),
        _ => bail!("--reason must say why"),
    }
}

fn report(ids: &[ReceiptId], verb: &str, json: bool) {
    if json {
        out_exact!("{}", json!({ verb: ids }));
    } else {
        let listed: Vec<String> = ids.iter().map(ReceiptId::to_string).collect();
        out!("{verb} {} receipt(s): {}", ids.len(), listed.join(", "));
    }
}

fn print_receipts(
    rows: &[admin::ReceiptSummary],
    config: Option<&Config>,
    json: bool,
) -> anyhow::Result<()> {
    if json {
        out_exact!("{}", serde_json::to_string(rows)?);
        return Ok(());
    }
    out!(
        "{:>10}  {:<20} {:<16} {:<12} {:<10} {:>8}  {:<28} {:<28} reason",
        "id",
        "integration",
        "owner",
        "status",
        "outcome",
        "attempts",
        "event type",
        "event"
    );
    for row in rows {
        out!(
            "{:>10}  {:<20} {:<16} {:<12} {:<10} {:>8}  {:<28} {:<28} {}",
            row.id,
            row.integration,
            integration_owner(config, &row.integration),
            row.status,
            row.outcome.map_or("-", |outcome| outcome.as_str()),
            row.attempts,
            row.event_type,
            row.event_id,
            row.reason.as_deref().unwrap_or("-")
        );
    }
    Ok(())
}

/// `inboundctl receipts quarantine|fail`.
async fn resolve_pending(
    args: ResolutionArgs,
    resolution: admin::PendingResolution,
) -> anyhow::Result<()> {
    let reason = required_reason(Some(&args.reason))?;
    let by = args.operator.name()?;
    let mut db = args.database.connect().await?;
    db.run(async |connection| {
        Ok(admin::resolve_pending(connection, &args.ids, resolution, &by, &reason).await?)
    })
    .await?;
    report(&args.ids, resolution.action().done(), args.json);
    Ok(())
}

/// `inboundctl receipts show`.
async fn show(
    database: DatabaseArgs,
    operator: &Operator,
    id: ReceiptId,
    json: bool,
) -> anyhow::Result<()> {
    let reader = operator.name()?;
    let mut db = database.connect().await?;
    let (detail, effects, history) = db
        .run(async |connection| {
            let Some(detail) = admin::receipt_detail(&mut *connection, id).await? else {
                bail!("receipt {id} does not exist");
            };
            // Recorded before it is shown: a read that cannot be recorded shows nothing.
            if detail.payload.is_some() {
                admin::record_payload_reads(
                    &mut *connection,
                    &[id],
                    &reader,
                    admin::ReadSurface::Cli,
                )
                .await?;
            }
            let effects = admin::receipt_effects(&mut *connection, id).await?;
            let history = admin::receipt_history(&mut *connection, id).await?;
            Ok((detail, effects, history))
        })
        .await?;
    // Complete end to end: the transition is done and every effect delivered.
    let complete = detail.status == ReceiptStatus::Done
        && effects
            .iter()
            .all(|effect| effect.status == inbound_core::states::EffectStatus::Completed);
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
        out_exact!("{}", serde_json::to_string(&shown)?);
        return Ok(());
    }
    receipt_text::print_receipt(&detail, &effects, &history, complete)
}
