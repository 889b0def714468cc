//! `inboundctl audit reads`: who read which payload in a window of time, as the console's
//! pages and `inboundctl receipts show` recorded it (the reader's name, the database role
//! that recorded it, where, and the server's time), oldest first; a table, or JSON with
//! `--json`.

use chrono::{DateTime, Utc};
use clap::{Args, Subcommand};
use inbound_core::keys::ReceiptId;
use inbound_store::admin;

use crate::operate::DatabaseArgs;
use crate::output::{out, out_exact};
use crate::selection::parse_time;

/// `inboundctl audit …`.
#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Who read which payload, oldest first: every console page and `receipts show` that
    /// showed one recorded the reader before showing it.
    Reads(ReadsArgs),
}

/// `inboundctl audit reads`.
#[derive(Debug, Args)]
pub struct ReadsArgs {
    #[command(flatten)]
    database: DatabaseArgs,
    /// Reads from this time on: RFC 3339 or an age (`2h`, `7d`).
    #[arg(long, value_parser = parse_time)]
    since: DateTime<Utc>,
    /// Reads before this time (default: now): RFC 3339 or an age.
    #[arg(long, value_parser = parse_time)]
    until: Option<DateTime<Utc>>,
    /// Only the reads of this name (as recorded).
    #[arg(long)]
    reader: Option<String>,
    /// Only the reads of this receipt's payload.
    #[arg(long)]
    receipt: Option<ReceiptId>,
    /// Stop after this many.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(i64).range(1..=100_000))]
    limit: i64,
    /// Print JSON (an array).
    #[arg(long)]
    json: bool,
}

/// Runs an `audit` subcommand.
pub async fn run(command: AuditCommand) -> anyhow::Result<()> {
    match command {
        AuditCommand::Reads(args) => reads(args).await,
    }
}

async fn reads(args: ReadsArgs) -> anyhow::Result<()> {
    if let Some(until) = args.until
        && until <= args.since
    {
        anyhow::bail!("--until ({until}) must be after --since ({})", args.since);
    }
    let filter = admin::ReadFilter {
        since: args.since,
        until: args.until,
        read_by: args.reader,
        receipt_id: args.receipt,
    };
    let mut db = args.database.connect().await?;
    let reads = db
        .run(async |connection| {
            Ok(admin::payload_reads_between(connection, &filter, args.limit).await?)
        })
        .await?;
    if args.json {
        out_exact!("{}", serde_json::to_string(&reads)?);
        return Ok(());
    }
    if reads.is_empty() {
        out!("no payload was read in that window");
        return Ok(());
    }
    for read in &reads {
        out!(
            "{}  receipt {}  read by {} as role {} ({})",
            read.read_at
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            read.receipt_id,
            read.read_by,
            read.database_role,
            read.surface
        );
    }
    if i64::try_from(reads.len()).unwrap_or(i64::MAX) == args.limit {
        out!(
            "stopped at --limit {}: narrow the window or raise the limit to see the rest",
            args.limit
        );
    }
    Ok(())
}
