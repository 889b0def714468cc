//! Operators' commands over the whole installation: `status` and `purge`, and the
//! database connection every command shares. Each prints a readable table, or JSON with
//! `--json`, and refuses bad input (bad ages, a floor it would cross) with a clear message
//! and a non-zero exit.

use crate::output::{out, out_exact};
use std::path::Path;
use std::time::Duration;

use crate::db::Db;
use anyhow::bail;
use clap::Args;
use inbound_core::config::Config;
use inbound_core::verify::Provider;
use inbound_store::{self as store, admin, effects};
use serde_json::json;

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
    /// Cancel any one statement after this many seconds (0: never): a listing with a
    /// selective filter over a long retention, or a purge count, reads many rows. Behind
    /// a transaction pooler the role's setting applies instead.
    #[arg(long, env = "INBOUND_CTL_STATEMENT_TIMEOUT_SECS", default_value_t = 60)]
    statement_timeout_secs: u64,
}

impl DatabaseArgs {
    /// Connects within 10 s, checks the session ([`crate::db::connect_checked`]), and
    /// bounds every unit of work by the statement timeout and a margin. Directly, the
    /// limits are startup options of the session (never a `SET` a pooler could carry to
    /// another client); behind a transaction pooler the role's settings apply.
    pub async fn connect(&self) -> anyhow::Result<Db> {
        let target = store::SessionTarget {
            schema: self.schema.clone(),
            pooler: self.db_pooler,
        };
        let mut options = store::connect_options(&self.database_url, &target)?;
        let statement_timeout = Duration::from_secs(self.statement_timeout_secs);
        if target.pooler == store::Pooler::None {
            options = store::with_session_limits(options, statement_timeout);
        }
        let connection =
            crate::db::connect_checked(&options, &target, Duration::from_secs(10)).await?;
        inbound_runtime::failpoint::pause("ctl_connected").await;
        let limit = (!statement_timeout.is_zero())
            .then(|| statement_timeout + store::bounded::STATEMENT_MARGIN);
        Ok(Db::new(connection, limit))
    }
}

impl DatabaseArgs {
    /// A pool of at most `max_connections` for a long-running command (the console),
    /// each statement cancelled after `statement_timeout` (a page's bound, shorter than a
    /// command's; the lesser of the two when `--statement-timeout-secs` is shorter): the
    /// session is checked once as [`DatabaseArgs::connect`] checks it, then each
    /// connection carries the limits. Also returns how long one unit of work may take
    /// (the statement timeout and a margin).
    pub async fn pool(
        &self,
        max_connections: u32,
        statement_timeout: Duration,
        application_name: &str,
    ) -> anyhow::Result<(sqlx::PgPool, Duration)> {
        drop(self.connect().await?);
        let statement_timeout = match self.statement_timeout_secs {
            0 => statement_timeout,
            secs => statement_timeout.min(Duration::from_secs(secs)),
        };
        let settings = store::PoolSettings {
            max_connections,
            acquire_timeout: Duration::from_secs(5),
            statement_timeout,
            application_name: application_name.to_owned(),
            target: store::SessionTarget {
                schema: self.schema.clone(),
                pooler: self.db_pooler,
            },
        };
        let pool = store::connect_pool_lazy(&self.database_url, &settings)?;
        Ok((pool, statement_timeout + store::bounded::STATEMENT_MARGIN))
    }
}

/// `inboundctl status`.
pub async fn status(
    database: &DatabaseArgs,
    config: Option<&Path>,
    owner: Option<&str>,
    as_json: bool,
) -> anyhow::Result<()> {
    let mut db = database.connect().await?;
    let (counts, effects, mut integrations) = db
        .run(async |connection| {
            let counts = admin::receipt_counts(&mut *connection).await?;
            let effects =
                effects::counts(&mut *connection, inbound_core::states::EffectStatus::ALL).await?;
            let integrations = admin::queued_integrations(&mut *connection).await?;
            Ok((counts, effects, integrations))
        })
        .await?;
    let config = config.map(Config::load).transpose()?;
    if let Some(config) = &config {
        integrations.extend(
            config
                .integrations()
                .iter()
                .map(|integration| integration.id.clone()),
        );
        integrations.sort();
        integrations.dedup();
    }
    if let Some(owned) = crate::selection::integrations_selected(None, owner, config.as_ref())? {
        integrations.retain(|integration| owned.contains(integration));
    }
    let mut ages = Vec::new();
    for integration in &integrations {
        let integration_ages = db
            .run(async |connection| Ok(admin::queue_ages(connection, integration).await?))
            .await?;
        ages.push((integration.clone(), integration_ages));
    }
    if as_json {
        let by_integration = |age: fn(&admin::QueueAges) -> f64| {
            ages.iter()
                .map(|(id, ages)| (id.clone(), json!(age(ages))))
                .collect::<serde_json::Map<String, serde_json::Value>>()
        };
        let effects: serde_json::Map<String, serde_json::Value> = effects
            .into_iter()
            .map(|(state, n)| (state.as_str().to_owned(), json!(n)))
            .collect();
        out_exact!(
            "{}",
            json!({"receipts": counts, "effects": effects,
                   "owners": ages.iter()
                       .map(|(id, _)| (id.clone(), json!(crate::selection::integration_owner(config.as_ref(), id))))
                       .collect::<serde_json::Map<String, serde_json::Value>>(),
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
    out!("oldest age (s)            owner              claimable   waiting out a retry");
    if ages.is_empty() {
        out!("  (nothing pending)");
    }
    for (integration, ages) in ages {
        out!(
            "  {integration:<24} {:<16} {:>9.1}   {:>9.1}",
            crate::selection::integration_owner(config.as_ref(), &integration),
            ages.pending,
            ages.waiting
        );
    }
    Ok(())
}

/// What `inboundctl purge` may remove, and how it runs.
pub struct PurgeOptions {
    /// Drop the payloads of days wholly older than this many days.
    pub payload_days: u32,
    /// Drop the key periods (receipt rows, effects, keys) wholly older than this many days.
    pub key_days: Option<u32>,
    /// List what would go; remove nothing.
    pub dry_run: bool,
    /// Purge keys younger than a provider's redelivery horizon.
    pub force: bool,
    /// Names the integrations (and so the providers) whose horizons apply.
    pub config: Option<Config>,
}

/// The longest redelivery horizon among the configured integrations' providers (every
/// provider's without a configuration), and the provider it belongs to.
fn redelivery_floor(config: Option<&Config>) -> (u32, &'static str) {
    let providers: Vec<Provider> = match config {
        Some(config) => config
            .integrations()
            .iter()
            .map(|integration| integration.provider)
            .collect(),
        None => Provider::ALL.to_vec(),
    };
    providers
        .into_iter()
        .map(|provider| (provider.redelivery_horizon_days(), provider.name()))
        .max()
        .unwrap_or((0, "none"))
}

/// The ages the database's retention functions take, in days: at least a day (a receipt
/// is never purged on the day it finished), at most 100 years.
const PURGE_DAYS: std::ops::RangeInclusive<u32> = 1..=36_500;

/// Refuses ages outside [`PURGE_DAYS`], ages that would purge keys before their payloads,
/// keys younger than the configured providers' redelivery horizon (unless forced), and
/// empty batches.
fn check_purge(options: &PurgeOptions) -> anyhow::Result<()> {
    for (flag, days) in [
        ("--payloads-older-than-days", Some(options.payload_days)),
        ("--keys-older-than-days", options.key_days),
    ] {
        if let Some(days) = days
            && !PURGE_DAYS.contains(&days)
        {
            bail!(
                "{flag} {days} is outside 1 to 36500 days: the database purges nothing younger than a day"
            );
        }
    }
    if let Some(key_days) = options.key_days {
        if key_days < options.payload_days {
            bail!(
                "--keys-older-than-days ({key_days}) must be at least --payloads-older-than-days ({})",
                options.payload_days
            );
        }
        let (floor, provider) = redelivery_floor(options.config.as_ref());
        if key_days < floor && !options.force {
            bail!(
                "--keys-older-than-days {key_days} is below {provider}'s redelivery horizon ({floor} days{}): a redelivery after its key is gone would be accepted again (the business key still refuses a second transition); keep keys longer, or --force",
                if options.config.is_none() {
                    ", the longest of any provider: --config narrows it to yours"
                } else {
                    ""
                }
            );
        }
    }
    Ok(())
}

/// `inboundctl purge`: payload days, then key periods, each partition dropped in a
/// transaction of its own (what may not go yet is carried, not lost).
pub async fn purge(
    database: &DatabaseArgs,
    options: PurgeOptions,
    as_json: bool,
) -> anyhow::Result<()> {
    check_purge(&options)?;
    let mut db = database.connect().await?;
    if options.dry_run {
        return preview_purge(&mut db, &options, as_json).await;
    }
    // One partition per unit of work: each its own transaction and its own time bound.
    let mut days = Vec::new();
    while let Some(day) = db
        .run(async |connection| {
            Ok(admin::drop_oldest_payload_day(connection, options.payload_days, None).await?)
        })
        .await?
    {
        days.push(day);
    }
    let mut periods = Vec::new();
    if let Some(key_days) = options.key_days {
        while let Some(period) = db
            .run(async |connection| {
                Ok(admin::drop_oldest_key_period(connection, key_days, None).await?)
            })
            .await?
        {
            periods.push(period);
        }
    }
    if as_json {
        let listed = |dropped: &[admin::Dropped]| {
            dropped
                .iter()
                .map(|dropped| json!({"first_day": dropped.first_day, "carried": dropped.carried}))
                .collect::<Vec<_>>()
        };
        out_exact!(
            "{}",
            json!({"payload_days": listed(&days), "key_periods": listed(&periods)})
        );
    } else {
        for dropped in &days {
            out!(
                "dropped the payloads of {} ({} kept: their receipts are not done, queued, or have an effect not closed)",
                dropped.first_day,
                dropped.carried
            );
        }
        for dropped in &periods {
            out!(
                "dropped the key period from {} (receipts, effects, keys; {} receipt(s) kept: not done, queued, or with an effect not closed)",
                dropped.first_day,
                dropped.carried
            );
        }
        out!(
            "dropped {} payload day(s) and {} key period(s)",
            days.len(),
            periods.len()
        );
    }
    Ok(())
}

/// `purge --dry-run`: what a purge would drop now, with the planner's row estimates.
async fn preview_purge(db: &mut Db, options: &PurgeOptions, as_json: bool) -> anyhow::Result<()> {
    let partitions = db
        .run(async |connection| {
            Ok(
                admin::retention_preview(connection, options.payload_days, options.key_days)
                    .await?,
            )
        })
        .await?;
    if as_json {
        let listed: Vec<_> = partitions
            .iter()
            .map(|partition| {
                json!({
                    "table": partition.parent,
                    "first_day": partition.first_day,
                    "end_day": partition.end_day,
                    "estimated_rows": partition.estimated_rows,
                })
            })
            .collect();
        out_exact!("{}", json!({"dry_run": true, "partitions": listed}));
    } else {
        for partition in &partitions {
            let what = if partition.parent == "receipt_payloads" {
                "the payloads of"
            } else {
                "the key period (receipts, effects, keys) from"
            };
            out!(
                "would drop {what} {} (about {} row(s))",
                partition.first_day,
                partition.estimated_rows
            );
        }
        out!(
            "would drop {} partition(s); nothing changed",
            partitions.len()
        );
    }
    Ok(())
}
