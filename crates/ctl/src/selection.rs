//! What the operator commands share: the statuses' value parsers (the core's states,
//! listed in `--help`, completable), who decides (`--by`, never "unknown"), times (`--since 2h` or RFC 3339),
//! owners resolved through the configuration, a filter value that names nothing (exit 1,
//! not an empty list), and the confirmation a bulk change needs (`--dry-run`, `--yes`).

use std::path::PathBuf;

use crate::output::out;
use anyhow::{Context, bail};
use chrono::{DateTime, Utc};
use clap::Args;
use clap::builder::{PossibleValuesParser, TypedValueParser};
use inbound_core::config::Config;
pub use inbound_core::states::{EffectStatus, ReceiptStatus};

/// `--status` of receipts: the values of [`ReceiptStatus`], listed in `--help` and
/// completable.
pub fn receipt_status() -> impl TypedValueParser<Value = ReceiptStatus> {
    PossibleValuesParser::new(ReceiptStatus::names().collect::<Vec<_>>()).map(|name| {
        name.parse::<ReceiptStatus>()
            .expect("a possible value names a status")
    })
}

/// `--status` of effects: the values of [`EffectStatus`].
pub fn effect_status() -> impl TypedValueParser<Value = EffectStatus> {
    PossibleValuesParser::new(EffectStatus::names().collect::<Vec<_>>()).map(|name| {
        name.parse::<EffectStatus>()
            .expect("a possible value names a status")
    })
}

/// The longest person name the audit trail records (the console's bound too).
const MAX_NAME_CHARS: usize = 200;

/// Who decides or reads a payload: recorded with every decision and every read.
#[derive(Debug, Clone, Args)]
pub struct Operator {
    /// Who decides or reads (recorded): defaults to $INBOUND_OPERATOR, else $USER. Set
    /// INBOUND_OPERATOR in a pod, where $USER is unset.
    #[arg(long, env = "INBOUND_OPERATOR")]
    by: Option<String>,
}

impl Operator {
    /// The name recorded; refused when nothing names anyone, or the name holds a
    /// character a reader of the audit trail would not see.
    pub fn name(&self) -> anyhow::Result<String> {
        let name = self
            .by
            .clone()
            .or_else(|| std::env::var("USER").ok())
            .unwrap_or_default();
        if name.trim().is_empty() {
            bail!(
                "say who decides or reads: --by NAME (or set INBOUND_OPERATOR); audits never record \"unknown\""
            );
        }
        crate::output::person_name(&name, MAX_NAME_CHARS).ok_or_else(|| {
            anyhow::anyhow!(
                "{:?} is not a name the audit trail can record: at most {MAX_NAME_CHARS} characters, none of them a control or invisible character, and no comma",
                crate::output::terminal_safe(&name)
            )
        })
    }
}

pub use inbound_core::selection::{integration_owner, parse_time, sink_owner};

/// The integrations an `--integration` / `--owner` pair selects (`None`: any).
pub fn integrations_selected(
    integration: Option<&str>,
    owner: Option<&str>,
    config: Option<&Config>,
) -> anyhow::Result<Option<Vec<String>>> {
    inbound_core::selection::integrations_selected(integration, owner, config)
        .map_err(|error| anyhow::anyhow!(error))
}

/// The sinks a `--sink` / `--owner` pair selects (`None`: any).
pub fn sinks_selected(
    sink: Option<&str>,
    owner: Option<&str>,
    config: Option<&Config>,
) -> anyhow::Result<Option<Vec<String>>> {
    inbound_core::selection::sinks_selected(sink, owner, config)
        .map_err(|error| anyhow::anyhow!(error))
}

/// A window of times and a page.
#[derive(Debug, Clone, Args)]
pub struct Window {
    /// Only those from this time on: RFC 3339 or an age (`2h`, `7d`).
    #[arg(long, value_parser = parse_time)]
    pub since: Option<DateTime<Utc>>,
    /// Only those before this time: RFC 3339 or an age.
    #[arg(long, value_parser = parse_time)]
    pub until: Option<DateTime<Utc>>,
}

/// The configuration, for owners and for the ids it names.
#[derive(Debug, Clone, Args)]
pub struct ConfigArg {
    /// Configuration file: shows owners, resolves `--owner`, and names the integrations
    /// and sinks that exist.
    #[arg(long, env = "INBOUND_CONFIG")]
    pub config: Option<PathBuf>,
}

impl ConfigArg {
    /// The loaded configuration, if one is given.
    pub fn load(&self) -> anyhow::Result<Option<Config>> {
        self.config
            .as_deref()
            .map(|path| Config::load(path).with_context(|| format!("{}", path.display())))
            .transpose()
    }
}

/// How a change chosen by a filter (not by ids) is confirmed.
#[derive(Debug, Clone, Args)]
pub struct Confirmation {
    /// Show what the filter selects and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Change everything the filter selects (required without --dry-run: a filter can
    /// select more than you think).
    #[arg(long, conflicts_with = "dry_run")]
    pub yes: bool,
    /// At most this many in one run (run again for the rest): one transaction holds
    /// them all.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(i64).range(1..=1000))]
    pub max: i64,
}

impl Confirmation {
    /// What a change chosen by a filter applies to: `None` after a dry run (`print` shows
    /// the selection), an error without `--yes`, the ids with it. `noun` is what is
    /// changed (`receipt`), `verb` how (`replay`).
    pub fn ids<Id>(
        &self,
        ids: Vec<Id>,
        noun: &str,
        verb: &str,
        json: bool,
        print: impl FnOnce() -> anyhow::Result<()>,
    ) -> anyhow::Result<Option<Vec<Id>>> {
        let capped = if ids.len() as i64 == self.max {
            format!(" (at most --max {}; run again for the rest)", self.max)
        } else {
            String::new()
        };
        if self.dry_run {
            print()?;
            if !json {
                out!(
                    "would {verb} {} {noun}(s){capped}; nothing changed (--yes to do it)",
                    ids.len()
                );
            }
            return Ok(None);
        }
        if ids.is_empty() {
            bail!("the filter selects no {noun}: nothing to {verb}");
        }
        if !self.yes {
            bail!(
                "the filter selects {} {noun}(s){capped}: add --yes to {verb} them, or --dry-run to list them",
                ids.len()
            );
        }
        Ok(Some(ids))
    }

    /// After a change by filter that reached `--max`: more may match.
    pub fn more_may_match(&self, changed: usize, json: bool) {
        if changed as i64 == self.max && !json {
            out!("(at most --max {}: more may match; run it again)", self.max);
        }
    }
}

/// A change by filter needs a narrowing filter; a change by ids takes no filter at all
/// (it would be ignored) and no `--dry-run` or `--yes` (there is nothing to list).
pub fn check_bulk(
    by_filter: bool,
    narrowed: bool,
    confirmation: &Confirmation,
) -> anyhow::Result<()> {
    match (by_filter, narrowed) {
        (true, false) => bail!(
            "a change by filter needs more than a status: narrow it (--integration/--sink, --owner, --type, --since or --until)"
        ),
        (false, true) => bail!(
            "filters select by --status; with ids, exactly those ids are changed (drop the filter, or the ids)"
        ),
        (false, false) if confirmation.dry_run || confirmation.yes => bail!(
            "--dry-run and --yes go with a filter (--status …); with ids, exactly those ids are changed"
        ),
        _ => Ok(()),
    }
}

/// After a full page of a listing: how to ask for the next one.
pub fn next_page_hint(
    shown: usize,
    limit: i64,
    last_id: Option<impl std::fmt::Display>,
    json: bool,
) {
    if !json
        && shown as i64 == limit
        && let Some(last) = last_id
    {
        out!("(more: --before {last})");
    }
}

/// The secret a `flag` names as a reference (`env:NAME` or `file:/path`). A value that is
/// not a reference is refused without being repeated: it may be the key itself.
pub fn secret_from(flag: &str, reference: &str) -> anyhow::Result<String> {
    if !inbound_core::secret::is_reference(reference) {
        anyhow::bail!(
            "{flag} must be a reference (env:NAME or file:/path), never the secret itself"
        );
    }
    inbound_core::secret::resolve_reference(reference, &|name| std::env::var(name).ok())
        .map_err(|error| anyhow::anyhow!("{flag} {reference}: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339_or_ages_and_anything_else_is_an_error() {
        let at = parse_time("2026-12-01T08:00:00Z").expect("RFC 3339");
        assert_eq!(at.to_rfc3339(), "2026-12-01T08:00:00+00:00");
        let age = Utc::now() - parse_time("2h").expect("an age");
        assert!((age.num_seconds() - 7200).abs() < 5, "{age}");
        for bad in ["yesterday", "5µ", "µ", "", "-3h", "10w", "99999999999d"] {
            assert!(parse_time(bad).is_err(), "{bad:?} parsed");
        }
    }
}
