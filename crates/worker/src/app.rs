//! The worker as a library: the stock `inbound-worker` and a team's own worker are the
//! same few lines — parse the flags, register handlers, run.
//!
//! ```no_run
//! use inbound_worker::{Worker, WorkerArgs};
//! # use inbound_store::handlers::{Handler, HandlerFuture, HandlerInput, Transition};
//! # struct SyncSubscription;
//! # impl Handler for SyncSubscription {
//! #     fn apply<'a>(&'a self, _: &'a mut sqlx::PgConnection, _: HandlerInput<'a>) -> HandlerFuture<'a> {
//! #         Box::pin(async { Ok(Transition::Ignored { reason: String::new() }) })
//! #     }
//! # }
//! fn main() -> std::process::ExitCode {
//!     inbound_worker::main(|worker| worker.handler("subscriptions.sync", SyncSubscription))
//! }
//! ```
//!
//! [`main`] parses [`WorkerArgs`], sets up logging, runs until SIGTERM/SIGINT and turns
//! a start-up error into one log line and exit code 1. [`WorkerBuilder::run`] is the same
//! without the process around it (tests start workers in-process with it).

use std::future::Future;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use inbound_core::config::Config;
use inbound_runtime::process::{EXIT_POOL_CLOSE_LIMIT, close_pool};
use inbound_runtime::sessions::SessionGuard;
use inbound_runtime::signals::shutdown_signal;
use inbound_runtime::{logging, ops};
use inbound_store::handlers::{Handler, Registry};
use inbound_store::{self as store, PoolSettings, Schema};
use sqlx::migrate::Migrator;
use tokio::net::TcpListener;

use crate::args::WorkerArgs;
use crate::migrate::SchemaMigrations;
use crate::{Worker, gauges, telemetry};

/// A worker being put together: flags plus the handlers it runs (`forward` is always
/// registered).
pub struct WorkerBuilder {
    /// `None` in `migrate`, which collects the registrations only.
    args: Option<WorkerArgs>,
    registry: Registry,
    migrations: Vec<SchemaMigrations>,
    /// A registration refused (a schema name that is not one), reported by `run` and
    /// `migrate`.
    refused: Option<String>,
}

impl Worker {
    /// A worker from its flags, with inbound's built-in handlers registered.
    pub fn builder(args: WorkerArgs) -> WorkerBuilder {
        WorkerBuilder {
            args: Some(args),
            ..WorkerBuilder::registrations()
        }
    }
}

impl WorkerBuilder {
    /// A builder without flags, for what `configure` registers (`migrate` reads the
    /// migrations of it).
    pub(crate) fn registrations() -> Self {
        Self {
            args: None,
            registry: Registry::builtin(),
            migrations: Vec::new(),
            refused: None,
        }
    }

    /// Carries the team's migrations of `schema` (its tables, and its migration history):
    /// `<worker> migrate` applies them after inbound's and, with `--create-roles`, grants
    /// the schema to the worker role, so a team needs no migrate binary of its own.
    pub fn migrations(mut self, schema: &str, migrator: &'static Migrator) -> Self {
        match schema.parse::<Schema>() {
            Ok(schema) => self.migrations.push(SchemaMigrations { schema, migrator }),
            Err(error) => {
                self.refused
                    .get_or_insert(format!("migrations of schema {schema:?}: {error}"));
            }
        }
        self
    }

    /// These registrations with `args`: a builder that runs.
    #[cfg(feature = "testing")]
    pub(crate) fn with_args(mut self, args: WorkerArgs) -> Self {
        self.args = Some(args);
        self
    }

    /// The migrations registered so far.
    pub fn registered_migrations(&self) -> &[SchemaMigrations] {
        &self.migrations
    }

    /// Registers `handler` under `name`, the name routes give as `handler = "…"`.
    pub fn handler(mut self, name: &str, handler: impl Handler + 'static) -> Self {
        self.registry.register(name, handler);
        self
    }

    /// Registers several handlers at once (e.g. `inbound_example::register`).
    pub fn register(mut self, add: impl FnOnce(&mut Registry)) -> Self {
        add(&mut self.registry);
        self
    }

    /// The handlers registered so far.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Runs until `shutdown` resolves, then drains. Refuses to start — with one line
    /// naming the route — when a routed handler is not registered or refuses its
    /// options, and on flags out of range.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let Self {
            args,
            registry,
            refused,
            ..
        } = self;
        if let Some(refused) = refused {
            anyhow::bail!(refused);
        }
        let Some(args) = args else {
            anyhow::bail!(
                "this builder collects registrations only: build one with Worker::builder(args)"
            );
        };
        if args.list_handlers {
            for name in registry.names() {
                println!("{name}");
            }
            return Ok(());
        }
        args.check()?;
        let config = load_config(&args, &registry)?;
        if args.check_config {
            println!(
                "{}: ok for this worker ({} integrations, {} handlers)",
                args.common.config.display(),
                config.integrations().len(),
                registry.names().len()
            );
            return Ok(());
        }
        let metrics =
            telemetry::install_metrics(args.role).context("cannot install the metrics recorder")?;
        let pool = store::connect_pool_lazy(
            &args.common.database_url,
            &PoolSettings {
                max_connections: args.max_connections(),
                acquire_timeout: args.common.acquire_timeout(),
                statement_timeout: args.common.statement_timeout(),
                application_name: "inbound-worker".to_owned(),
                target: args.common.session_target(),
            },
        )?;
        let sessions =
            SessionGuard::start(&args.common.database_url, &args.common.session_target())?;
        let shutdown = sessions.or_tripped(shutdown);
        let settings = args.settings();
        let worker_id = settings.worker_id.clone();
        let role = settings.role;
        inbound_runtime::process_metrics::export_config(&config);
        let worker = Arc::new(Worker::new(
            pool.clone(),
            Arc::new(config),
            registry,
            settings,
        ));

        let metrics_listener = TcpListener::bind(args.metrics_listen)
            .await
            .with_context(|| format!("cannot listen on {}", args.metrics_listen))?;
        tracing::info!(metrics_addr = %metrics_listener.local_addr()?, worker_id, ?role, "listening");
        let readiness =
            ops::Readiness::start(pool.clone(), Duration::from_secs(1), sessions.gate());
        let ops_port = ops::spawn_ops_port(metrics_listener, metrics, readiness);
        let gauge_worker = Arc::clone(&worker);
        let gauge_interval = args.common.gauge_interval();
        // The gauges query the database like everything else: not before its sessions
        // are checked (an undeclared pooler would carry their statements).
        let gauge_gate = sessions.gate();
        let gauges = tokio::spawn(async move {
            gauges::initialise(&gauge_worker);
            gauge_gate.opened().await;
            gauges::refresh_forever(&gauge_worker, gauge_interval).await;
        });

        let client = crate::dispatcher::http_client().context("cannot build the HTTP client")?;
        // Nothing is claimed before the database sessions are checked; a refusal or a
        // signal before that ends the process without a claim.
        let (stop, stopped) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            shutdown.await;
            stop.send_replace(true);
        });
        let until_stopped = move || {
            let mut stopped = stopped.clone();
            async move {
                stopped.wait_for(|stopped| *stopped).await.ok();
            }
        };
        let checked = tokio::select! {
            () = sessions.gate().opened() => true,
            () = until_stopped() => false,
        };
        if checked {
            crate::run(Arc::clone(&worker), client, until_stopped()).await;
        }
        gauges.abort();
        // In a process that goes on (tests, an embedding), the ops port and with it the
        // readiness task end with the worker.
        ops_port.abort();
        close_pool(&pool, EXIT_POOL_CLOSE_LIMIT).await;
        sessions.finish()?;
        tracing::info!("drained; exiting");
        Ok(())
    }
}

/// The configuration, checked against the flags and the registered handlers.
fn load_config(args: &WorkerArgs, registry: &Registry) -> anyhow::Result<Config> {
    let config = Config::load(&args.common.config).context("invalid configuration")?;
    for integration in &args.integrations {
        anyhow::ensure!(
            config.integration(integration).is_some(),
            "--integration {integration}: no such integration in the configuration"
        );
    }
    // Only what this worker will apply: a dispatcher applies nothing, and a worker
    // pinned to some integrations never sees the others' routes.
    if args.role.runs_receipts() {
        let claimed = (!args.integrations.is_empty()).then_some(args.integrations.as_slice());
        check_routes(&config, registry, claimed).context("invalid configuration")?;
    }
    Ok(config)
}

/// Every route of the `integrations` a worker claims (all when `None`) names a registered
/// handler that accepts the integration's provider and the route's options.
pub fn check_routes(
    config: &Config,
    registry: &Registry,
    integrations: Option<&[String]>,
) -> anyhow::Result<()> {
    let claimed = |id: &str| integrations.is_none_or(|ids| ids.iter().any(|claimed| claimed == id));
    config.check_handlers(&registry.names(), &claimed)?;
    for (index, integration) in config.integrations().iter().enumerate() {
        if !claimed(&integration.id) {
            continue;
        }
        for (key, route) in &integration.routes {
            let Some(handler) = registry.get(&route.handler) else {
                continue;
            };
            if let Some(accepted) = handler.providers()
                && !accepted.contains(&integration.provider)
            {
                let names: Vec<&str> = accepted.iter().map(|provider| provider.name()).collect();
                anyhow::bail!(
                    "integration[{index}] ({}).routes.{key:?}.handler: {} accepts events from {} integrations only, not {}",
                    integration.id,
                    route.handler,
                    names.join(", "),
                    integration.provider.name()
                );
            }
            if let Err(reason) = handler.check_integration(integration) {
                anyhow::bail!(
                    "integration[{index}] ({}).routes.{key:?}.handler: {reason}",
                    integration.id
                );
            }
            if let Err(reason) = handler.check_options(&route.options) {
                anyhow::bail!(
                    "integration[{index}] ({}).routes.{key:?}.options: {reason}",
                    integration.id
                );
            }
        }
    }
    Ok(())
}

/// The flags of a run that reads no database — `--list-handlers` (nor the configuration)
/// and `--check-config` — when the only thing missing is what it never reads; `None`
/// otherwise (the parse error then says what is wrong).
fn offline_args() -> Option<WorkerArgs> {
    let mut argv: Vec<String> = std::env::args().collect();
    let given = |flag: &str, env: &str| {
        std::env::var_os(env).is_some()
            || argv
                .iter()
                .any(|arg| arg == flag || arg.starts_with(&format!("{flag}=")))
    };
    let listing = argv.iter().any(|arg| arg == "--list-handlers");
    let checking = argv.iter().any(|arg| arg == "--check-config");
    if !listing && !checking {
        return None;
    }
    let mut missing = Vec::new();
    if !given("--database-url", "DATABASE_URL") {
        missing.extend(["--database-url", "(not read)"]);
    }
    if listing && !given("--config", "INBOUND_CONFIG") {
        missing.extend(["--config", "(not read)"]);
    }
    argv.extend(missing.into_iter().map(str::to_owned));
    WorkerArgs::try_parse_from(argv).ok()
}

/// A whole worker process: flags from the command line and environment, logging, then
/// [`WorkerBuilder::run`] until SIGTERM/SIGINT. `configure` registers the handlers.
pub fn main(configure: impl FnOnce(WorkerBuilder) -> WorkerBuilder) -> ExitCode {
    if crate::migrate::requested() {
        let registered = configure(WorkerBuilder::registrations());
        if let Some(refused) = &registered.refused {
            eprintln!("migrate: {refused}");
            return ExitCode::FAILURE;
        }
        return crate::migrate::main(&registered.migrations);
    }
    let args = match inbound_runtime::usage::try_parse::<WorkerArgs>() {
        Ok(args) => args,
        Err(error) => offline_args().unwrap_or_else(|| error.exit()),
    };
    logging::init_logging(args.common.log_format);
    let builder = configure(Worker::builder(args));
    inbound_runtime::process::run_to_exit_code(|| builder.run(shutdown_signal()))
}
