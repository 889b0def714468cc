//! `inboundctl`: the operators' tool. Each subcommand is a small function over core.
//!
//! - `migrate [--create-database]`: apply inbound's embedded migrations into the schema
//!   (`--schema`, default `inbound`); a worker's business tables are its own `migrate`'s.
//! - `check-config --config F [--handlers a,b]`: validate a configuration; exits 1 with a
//!   one-line error (with `--handlers`, also when a route names another handler).
//! - `sign-event --config F --integration ID --body JSON`: print a ready-to-paste `curl`
//!   command that sends a correctly signed test event (for local runs and demos).
//! - `status` and `purge` (see [`operate`]); `receipts list|find|show|quarantine|fail|
//!   replay|close` (see [`receipts_cmd`]); `effects list|show|resolve` (see
//!   [`effects_cmd`]); each takes `--json`. Shared filters and confirmations: [`selection`].
//! - `audit reads --since T`: who read which payload (see [`audit_cmd`]).
//! - `completions SHELL`: a shell completion script.
//! - `console`: the operator's console in a browser (the `inbound-console` crate; flags in [`console_cmd`]).
//! - `dev-sink`: a local effect receiver that prints and verifies what it gets.

mod audit_cmd;
mod console_cmd;
mod db;
mod dev_sink;
mod effects_cmd;
mod github_cmd;
mod known_events;
mod operate;
mod output;
mod provider_api;
mod receipt_text;
mod receipts_cmd;
mod selection;
mod sign;
mod stripe_cmd;
mod subject_cmd;
mod subject_notes;

use output::{out, out_exact};

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use inbound_core::config::Config;
use inbound_store as store;
use sqlx::Connection;
use sqlx::migrate::MigrateDatabase;

/// Operate an inbound installation: migrate its database, check a configuration, see
/// what is stuck, find receipts and effects, decide about them (every decision recorded
/// with who and why), purge old data, and try events locally.
#[derive(Debug, Parser)]
#[command(
    version,
    after_help = "Every database command reads DATABASE_URL (and INBOUND_SCHEMA, INBOUND_DB_POOLER);
decisions record --by, else INBOUND_OPERATOR, else $USER; --config defaults to INBOUND_CONFIG.

Examples:
  inboundctl status --config config.toml
  inboundctl receipts find --event-id evt_1PqR2sT3uV4wX5yZ
  inboundctl receipts list --status failed --since 1d
  inboundctl receipts replay --status failed --integration stripe-live --since 6h --dry-run
  inboundctl effects list --status review --owner fulfillment-oncall --config config.toml
  inboundctl purge --payloads-older-than-days 7 --keys-older-than-days 30 --dry-run"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Apply the database migrations.
    Migrate(MigrateArgs),
    /// Validate a configuration file (secrets are resolved, never printed).
    CheckConfig {
        /// Configuration file (TOML).
        #[arg(long, env = "INBOUND_CONFIG")]
        config: PathBuf,
        /// The handlers the worker registers (`forward` always is), e.g. the output of
        /// `inbound-worker --list-handlers`; every route must name one of them. Without
        /// it any handler name passes: only the worker that runs it knows.
        #[arg(long, value_delimiter = ',')]
        handlers: Option<Vec<String>>,
        /// Exit 1 on warnings too (a route key the provider is not known to send).
        #[arg(long)]
        deny_warnings: bool,
    },
    /// Receipts and effects by state, and the oldest pending age per integration.
    Status {
        #[command(flatten)]
        database: operate::DatabaseArgs,
        /// Configuration file, to list every integration (even those with nothing
        /// pending) and its owner.
        #[arg(long, env = "INBOUND_CONFIG")]
        config: Option<PathBuf>,
        /// Only the integrations this owner answers for (needs --config).
        #[arg(long)]
        owner: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Find, list, show, quarantine, fail, replay or close receipts.
    Receipts {
        #[command(subcommand)]
        command: receipts_cmd::ReceiptsCommand,
    },
    /// One business object's history in event-time order, and the ordered subjects held.
    Subject {
        #[command(subcommand)]
        command: subject_cmd::SubjectCommand,
    },
    /// List, show or resolve effects (by id or by filter).
    Effects {
        #[command(subcommand)]
        command: effects_cmd::EffectsCommand,
    },
    /// The audit trail: who read which payload (`audit reads --since 1d`).
    Audit {
        #[command(subcommand)]
        command: audit_cmd::AuditCommand,
    },
    /// The operator's console in a browser: overview, receipts, effects, the review
    /// queue, and decisions by a named person (docs/console.md).
    Console(console_cmd::ConsoleArgs),
    /// A local effect receiver: prints and verifies what it receives.
    DevSink {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:8181")]
        listen: std::net::SocketAddr,
        /// Verify Standard Webhooks signatures with this secret (`whsec_…`, or env:/file: reference).
        #[arg(long)]
        secret: Option<String>,
        /// Answer 503 to the first N requests.
        #[arg(long, default_value_t = 0)]
        fail_first: u64,
        /// Never answer (to watch timeouts).
        #[arg(long)]
        hang: bool,
    },
    /// Retention: drop payloads of done receipts, later their key rows, in bounded batches
    /// (`--dry-run` counts; keys are kept past each provider's redelivery horizon).
    Purge(PurgeArgs),
    /// GitHub's own recovery: ask GitHub to redeliver what failed and inbound does not hold.
    Github {
        #[command(subcommand)]
        command: github_cmd::GithubCommand,
    },
    /// Stripe's own recovery: store the events an outage or a disabled endpoint missed.
    Stripe {
        #[command(subcommand)]
        command: stripe_cmd::StripeCommand,
    },
    /// Print a shell completion script: `inboundctl completions bash > /etc/bash_completion.d/inboundctl`.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print a curl command that sends a signed test event to a running ingress.
    SignEvent {
        /// Configuration file (TOML).
        #[arg(long, env = "INBOUND_CONFIG")]
        config: PathBuf,
        /// Integration id.
        #[arg(long)]
        integration: String,
        /// The JSON body to send.
        #[arg(long)]
        body: String,
        /// Base URL of the ingress.
        #[arg(long, default_value = "http://127.0.0.1:8080")]
        url: String,
        /// GitHub: the event (`X-GitHub-Event`, e.g. `pull_request`; default `ping`).
        /// Shopify: the topic (`X-Shopify-Topic`, e.g. `orders/create`; required).
        /// Other providers name the type in the body.
        #[arg(long)]
        event_type: Option<String>,
    },
}

/// `inboundctl migrate`.
#[derive(Debug, Args)]
struct MigrateArgs {
    /// PostgreSQL URL.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    database_url: String,
    /// The schema of inbound's tables.
    #[arg(long, env = "INBOUND_SCHEMA", default_value = store::DEFAULT_SCHEMA,
      value_parser = store::Schema::parse_own)]
    schema: store::Schema,
    /// Create the database first when it does not exist.
    #[arg(long)]
    create_database: bool,
    /// Give up connecting after this many seconds.
    #[arg(long, default_value_t = 10)]
    connect_timeout_secs: u64,
    /// Also create (when missing) and grant one login role per process — ingress,
    /// worker, dispatcher, operator — with only what it needs, and the settings a
    /// transaction pooler cannot carry. Idempotent: run it with every migration.
    #[arg(long)]
    create_roles: bool,
    /// With `--create-roles`: a schema of your handlers' tables, granted to the worker
    /// role (repeatable).
    #[arg(long = "grant-schema")]
    grant_schemas: Vec<store::Schema>,
    /// The roles' name prefix (`inbound_` gives `inbound_ingress`, …).
    #[arg(long, default_value = store::roles::RolePrefix::DEFAULT,
          value_parser = store::roles::RolePrefix::parse)]
    role_prefix: store::roles::RolePrefix,
    /// Migrations need a session of their own (a lock held across transactions, DDL in
    /// the schema): `transaction` is refused with a message saying so.
    #[arg(long, env = "INBOUND_DB_POOLER", default_value = "none")]
    db_pooler: store::Pooler,
    /// Run on a database a newer build migrated (a rollback): its extra migrations are
    /// left as they are. Without it, such a database is refused, naming the versions.
    #[arg(long)]
    accept_newer: bool,
}

impl MigrateArgs {
    async fn run(self) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.db_pooler == store::Pooler::None,
            "migrations hold a session-level lock across transactions, which a transaction pooler cannot keep: run inboundctl migrate with a direct DATABASE_URL (or through a session-mode pool)"
        );
        migrate(
            &self.database_url,
            &self.schema,
            MigrateOptions {
                create_database: self.create_database,
                connect_timeout: Duration::from_secs(self.connect_timeout_secs),
                roles: self.create_roles.then_some(self.role_prefix),
                grant_schemas: self.grant_schemas,
                accept_newer: self.accept_newer,
            },
        )
        .await
    }
}

/// `inboundctl purge`.
#[derive(Debug, Args)]
struct PurgeArgs {
    #[command(flatten)]
    database: operate::DatabaseArgs,
    /// Drop the payloads of days wholly older than this many days (payloads leave by
    /// the day they were accepted; a receipt not done, or with an effect not closed,
    /// keeps its payload until it is).
    #[arg(long)]
    payloads_older_than_days: u32,
    /// Drop the 90-day key periods wholly older than this many days — their receipt
    /// rows, effects and keys — never the current or previous period (deduplication
    /// reads them); at least the payload age. Omit to keep every period.
    #[arg(long)]
    keys_older_than_days: Option<u32>,
    /// List what would be dropped; remove nothing.
    #[arg(long)]
    dry_run: bool,
    /// Drop keys younger than a provider's redelivery horizon (Paddle, Standard
    /// Webhooks, hmac and token 90 days, Stripe 30, GitHub 3, Slack, Shopify and Zoom 1:
    /// of the configured integrations with --config, else the longest).
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    config: selection::ConfigArg,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

impl PurgeArgs {
    async fn run(self) -> anyhow::Result<()> {
        let options = operate::PurgeOptions {
            payload_days: self.payloads_older_than_days,
            key_days: self.keys_older_than_days,
            dry_run: self.dry_run,
            force: self.force,
            config: self.config.load()?,
        };
        operate::purge(&self.database, options, self.json).await
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    match run(inbound_runtime::usage::parse::<Cli>()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // An error may quote what a provider's API or a sender wrote.
            eprintln!(
                "inboundctl: {}",
                output::terminal_safe(&output::error_line(&error))
            );
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Migrate(args) => args.run().await,
        Command::Status {
            database,
            config,
            owner,
            json,
        } => operate::status(&database, config.as_deref(), owner.as_deref(), json).await,
        Command::Receipts { command } => receipts_cmd::run(command).await,
        Command::Audit { command } => audit_cmd::run(command).await,
        Command::Subject { command } => subject_cmd::run(command).await,
        Command::Completions { shell } => {
            clap_complete::generate(
                shell,
                &mut <Cli as clap::CommandFactory>::command(),
                "inboundctl",
                &mut std::io::stdout(),
            );
            Ok(())
        }
        Command::Purge(args) => args.run().await,
        Command::Stripe { command } => stripe_cmd::run(command).await,
        Command::Github { command } => github_cmd::run(command).await,
        Command::Effects { command } => effects_cmd::run(command).await,
        Command::Console(args) => console_cmd::run(args).await,
        Command::DevSink {
            listen,
            secret,
            fail_first,
            hang,
        } => dev_sink_command(listen, secret, fail_first, hang).await,
        Command::CheckConfig {
            config,
            handlers,
            deny_warnings,
        } => check_config(config, handlers, deny_warnings),
        Command::SignEvent {
            config,
            integration,
            body,
            url,
            event_type,
        } => {
            let loaded = sign::load_for_signing(&config, &integration)?;
            out_exact!(
                "{}",
                sign::curl_command(&loaded, &integration, &body, &url, event_type.as_deref())?
            );
            Ok(())
        }
    }
}

/// `inboundctl dev-sink`.
async fn dev_sink_command(
    listen: std::net::SocketAddr,
    secret: Option<String>,
    fail_first: u64,
    hang: bool,
) -> anyhow::Result<()> {
    let secrets = match secret {
        None => Vec::new(),
        Some(secret) => {
            let value = if secret.starts_with("env:") || secret.starts_with("file:") {
                inbound_core::secret::resolve_reference(&secret, &|name| std::env::var(name).ok())?
            } else {
                secret
            };
            vec![
                inbound_core::verify::decode_standard_secret(&value)
                    .context("--secret is not a whsec_ base64 secret")?,
            ]
        }
    };
    dev_sink::run(listen, dev_sink::DevSink::new(secrets, fail_first, hang)).await
}

/// `inboundctl check-config`.
fn check_config(
    config: PathBuf,
    handlers: Option<Vec<String>>,
    deny_warnings: bool,
) -> anyhow::Result<()> {
    let loaded = Config::load(&config)?;
    if let Some(handlers) = handlers {
        let mut known: Vec<&str> = handlers
            .iter()
            .map(|name| name.trim())
            .filter(|name| !name.is_empty())
            .collect();
        known.extend(inbound_store::handlers::BUILTIN_HANDLERS);
        loaded.check_handlers(&known, &|_| true)?;
    }
    // A misspelled event type would be answered 200 `ignored` for ever: say so.
    let warnings = known_events::route_key_warnings(&loaded);
    for warning in &warnings {
        eprintln!("warning: {warning}");
    }
    if deny_warnings && !warnings.is_empty() {
        anyhow::bail!("{} warning(s) (--deny-warnings)", warnings.len());
    }
    // A route whose receipts name no subject has no timeline and cannot be ordered.
    for note in subject_notes::routes_without_a_subject(&loaded) {
        eprintln!("note: {note}");
    }
    out!(
        "{}: ok ({} integrations, {} sinks)",
        config.display(),
        loaded.integrations().len(),
        loaded.sinks().len()
    );
    Ok(())
}

/// What `inboundctl migrate` does besides applying inbound's migrations.
struct MigrateOptions {
    create_database: bool,
    connect_timeout: Duration,
    /// Create and grant the per-process roles with this prefix.
    roles: Option<store::roles::RolePrefix>,
    /// Business schemas granted to the worker role.
    grant_schemas: Vec<store::Schema>,
    /// Run on a database a newer build migrated (a rollback).
    accept_newer: bool,
}

async fn migrate(
    database_url: &str,
    schema: &store::Schema,
    options: MigrateOptions,
) -> anyhow::Result<()> {
    if options.grant_schemas.contains(schema) {
        anyhow::bail!(
            "--grant-schema {schema} names inbound's own schema: the worker would get every right on inbound's tables, the audit trail included; grant only your handlers' schemas"
        );
    }
    // Each wait on the database is bounded; only the migrations' own statements (an
    // index build on a large table) may take longer.
    let connect_timeout = options.connect_timeout;
    let bounded = move |what: &'static str| {
        move |_elapsed| anyhow::anyhow!("{what}: no answer within {connect_timeout:?}")
    };
    if options.create_database
        && !tokio::time::timeout(
            options.connect_timeout,
            sqlx::Postgres::database_exists(database_url),
        )
        .await
        .map_err(bounded("cannot reach PostgreSQL"))?
        .context("cannot reach PostgreSQL")?
    {
        tokio::time::timeout(
            options.connect_timeout,
            sqlx::Postgres::create_database(database_url),
        )
        .await
        .map_err(bounded("cannot create the database"))?
        .context("cannot create the database")?;
        out!("created the database");
    }
    let target = store::SessionTarget {
        schema: schema.clone(),
        pooler: store::Pooler::None,
    };
    let connect_options = store::connect_options(database_url, &target)?;
    // Reachable at all, within the timeout (the migrator itself retries only on locks),
    // and never through a pooler that passes the startup options on but moves sessions
    // between servers: a migration holds a session lock across transactions.
    let mut probe =
        match db::connect_checked(&connect_options, &target, options.connect_timeout).await {
            Ok(probe) => probe,
            Err(error) => match error.downcast_ref::<store::session::SessionMismatch>() {
                Some(mismatch) => anyhow::bail!(
                    "{mismatch}; migrations need a direct connection (or a session-mode pool)"
                ),
                None => return Err(error),
            },
        };
    let migrated =
        store::migrations::migrate_with(&connect_options, schema, store::migrations::MAX_RUNS)
            .await
            .context("migration failed")?;
    out!("{}", migrated.report(schema, options.accept_newer)?);
    // The history partitions of the coming week, as the workers keep them (hourly): a
    // migration run after days without a worker makes them and moves what waited in a
    // default partition.
    let created = tokio::time::timeout(
        options.connect_timeout,
        store::admin::ensure_history_partitions(&mut probe, None, 7),
    )
    .await
    .map_err(bounded("cannot create the history partitions"))?
    .context("cannot create the history partitions")?;
    if created > 0 {
        out!("created {created} history partition(s) for the coming week");
    }
    let business_schemas = options.grant_schemas;
    if let Some(prefix) = options.roles {
        let missing = store::roles::missing_schemas(&mut probe, &business_schemas).await?;
        if let Some(first) = missing.first() {
            anyhow::bail!(
                "schema {first} does not exist yet, so it cannot be granted: apply your tables' migrations first (a worker that carries them: `<your worker> migrate --create-roles` applies them and grants the roles in one step), then run this again"
            );
        }
        let roles = tokio::time::timeout(
            options.connect_timeout,
            store::roles::create_roles(&mut probe, schema, &prefix, &business_schemas),
        )
        .await
        .map_err(bounded("cannot create or grant the roles"))?
        .context("cannot create or grant the roles (needs CREATEROLE and the tables' owner)")?;
        out!("roles granted: {}", roles.join(", "));
    }
    probe.close().await.ok();
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// clap's own consistency checks (conflicting groups, flags required unless a missing
    /// one, duplicate names) over every subcommand.
    #[test]
    fn the_command_line_is_consistent() {
        super::Cli::command().debug_assert();
    }
}
