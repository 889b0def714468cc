//! `inboundctl subject show` and `inboundctl subject held`: one business object's
//! history — every receipt about it in any status with its outcome and reason, the
//! effects each recorded and what their sinks answered, and every person's decision — in
//! the provider's event-time order; and the ordered subjects a failed or quarantined
//! receipt holds now, with what waits behind each (docs/operations.md, "A held subject").

use clap::{Args, Subcommand};
use inbound_core::keys::ReceiptId;
use inbound_store::admin::{self, SubjectTimeline};

use crate::operate::DatabaseArgs;
use crate::output::{out, out_exact};

/// `inboundctl subject …`.
#[derive(Debug, Subcommand)]
pub enum SubjectCommand {
    /// Everything inbound knows about one subject (`cus_123`, `pi_…`, `octo/repo#42`), in
    /// event-time order.
    Show(ShowArgs),
    /// The ordered subjects held by a failed or quarantined receipt, and what waits.
    Held(HeldArgs),
}

/// `inboundctl subject show`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    #[command(flatten)]
    database: DatabaseArgs,
    /// The integration.
    integration: String,
    /// The subject, as stored (`inboundctl receipts show` names a receipt's).
    subject: String,
    /// The newest this many receipts.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(i64).range(1..=admin::MAX_TIMELINE_RECEIPTS))]
    limit: i64,
    /// Only receipts older than this one (the next page back).
    #[arg(long)]
    before: Option<ReceiptId>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// `inboundctl subject held`.
#[derive(Debug, Args)]
pub struct HeldArgs {
    #[command(flatten)]
    database: DatabaseArgs,
    /// Only this integration's.
    #[arg(long)]
    integration: Option<String>,
    /// Stop after this many subjects.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(i64).range(1..=10_000))]
    limit: i64,
    /// Print JSON (an array).
    #[arg(long)]
    json: bool,
}

/// Runs a `subject` subcommand.
pub async fn run(command: SubjectCommand) -> anyhow::Result<()> {
    match command {
        SubjectCommand::Show(args) => show(args).await,
        SubjectCommand::Held(args) => held(args).await,
    }
}

async fn show(args: ShowArgs) -> anyhow::Result<()> {
    let mut db = args.database.connect().await?;
    let (integration, subject) = (args.integration.as_str(), args.subject.as_str());
    let timeline = db
        .run(async |connection| {
            Ok(
                admin::subject_timeline(connection, integration, subject, args.limit, args.before)
                    .await?,
            )
        })
        .await?;
    if args.json {
        out_exact!("{}", serde_json::to_string(&timeline)?);
        return Ok(());
    }
    print_timeline(&timeline);
    Ok(())
}

fn print_timeline(timeline: &SubjectTimeline) {
    if timeline.receipts.is_empty() {
        out!(
            "no receipt of integration {} is about {:?}",
            timeline.integration,
            timeline.subject
        );
        return;
    }
    out!(
        "subject {:?} of integration {}",
        timeline.subject,
        timeline.integration
    );
    if !timeline.held_by.is_empty() {
        let held: Vec<String> = timeline.held_by.iter().map(ToString::to_string).collect();
        out!(
            "HELD: its later ordered receipts wait until receipt {} is replayed or closed",
            held.join(", ")
        );
    }
    for receipt in &timeline.receipts {
        let time = receipt.event_at.unwrap_or(receipt.received_at);
        let outcome = receipt.outcome.map_or_else(
            || receipt.status.to_string(),
            |outcome| format!("{} {outcome}", receipt.status),
        );
        out!(
            "{}  receipt {}  {}  {}  {}{}",
            time.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            receipt.id,
            receipt.event_type,
            receipt.event_id,
            outcome,
            if receipt.event_at.is_none() {
                "  (time of arrival)"
            } else {
                ""
            }
        );
        if let Some(reason) = &receipt.outcome_reason {
            out!("    reason: {reason}");
        }
        if let Some(error) = &receipt.last_error {
            out!("    last error (attempt {}): {error}", receipt.attempts);
        }
        for decision in &receipt.decisions {
            out!(
                "    {}  {} by {} (role {}): {}",
                decision
                    .at
                    .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                decision.action,
                decision.by,
                decision.database_role,
                decision.reason
            );
        }
        for effect in &receipt.effects {
            out!(
                "    effect {}  {} → {}  {}  key {}",
                effect.id,
                effect.kind,
                effect.sink,
                effect.status,
                effect.operation_key
            );
            for attempt in &effect.attempts {
                let answer = attempt
                    .status_code
                    .map_or_else(|| "no answer".to_owned(), |code| format!("HTTP {code}"));
                out!(
                    "      {} {} #{}: {}{}{}",
                    attempt
                        .started_at
                        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                    attempt.kind,
                    attempt.attempt,
                    answer,
                    attempt
                        .outcome
                        .as_deref()
                        .map_or_else(String::new, |outcome| format!(", {outcome}")),
                    attempt
                        .error
                        .as_deref()
                        .map_or_else(String::new, |error| format!(": {error}"))
                );
            }
            for decision in &effect.decisions {
                out!(
                    "      {}  {} by {} (role {}): {}",
                    decision
                        .resolved_at
                        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                    decision.action,
                    decision.resolved_by,
                    decision.database_role,
                    decision.note
                );
            }
        }
    }
    if timeline.older
        && let Some(first) = timeline.receipts.iter().map(|receipt| receipt.id).min()
    {
        out!("older receipts exist: --before {first}");
    }
}

async fn held(args: HeldArgs) -> anyhow::Result<()> {
    let mut db = args.database.connect().await?;
    let integration = args.integration.as_deref();
    let held = db
        .run(
            async |connection| Ok(admin::held_subjects(connection, integration, args.limit).await?),
        )
        .await?;
    if args.json {
        out_exact!("{}", serde_json::to_string(&held)?);
        return Ok(());
    }
    if held.is_empty() {
        out!("no ordered subject is held");
        return Ok(());
    }
    for subject in &held {
        out!(
            "{}  {:?}  held by receipt {} ({} {}), {} waiting{}",
            subject.integration,
            subject.subject,
            subject.held_by,
            subject.status,
            subject.event_id,
            subject.waiting,
            subject
                .reason
                .as_deref()
                .map_or_else(String::new, |reason| format!(": {reason}"))
        );
    }
    out!(
        "replay or close the holding receipt (inboundctl receipts replay|close) to release the rest"
    );
    Ok(())
}
