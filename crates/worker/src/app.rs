//! The worker as a library and as a process. A team's `main.rs` is one line over
//! [`main`]; an embedding or a test starts a worker from values with
//! [`WorkerBuilder::start`] — a [`Config`], [`WorkerSettings`], a database URL and, when it
//! wants one, an already-bound ops port — and gets a [`RunningWorker`] to shut down.
//!
//! ```no_run
//! use inbound_worker::handlers::{Handler, HandlerError, HandlerInput, Transition};
//!
//! struct SyncSubscription;
//!
//! impl Handler for SyncSubscription {
//!     async fn apply(
//!         &self,
//!         _transaction: &mut sqlx::PgConnection,
//!         _input: HandlerInput<'_>,
//!     ) -> Result<Transition, HandlerError> {
//!         Ok(Transition::Ignored { reason: "nothing to do".to_owned() })
//!     }
//! }
//!
//! fn main() -> std::process::ExitCode {
//!     inbound_worker::main(|worker| worker.handler("subscriptions.sync", SyncSubscription))
//! }
//! ```
//!
//! [`main`] alone parses [`WorkerArgs`], answers `--list-handlers` and `--check-config`,
//! sets up logging, installs the process's metrics recorder, binds the ops port and runs
//! until SIGTERM/SIGINT; a start-up error is one log line and exit code 1.

use std::future::Future;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use inbound_core::config::Config;
use inbound_runtime::ops::{self, OpsPort};
use inbound_runtime::process::{EXIT_POOL_CLOSE_LIMIT, close_pool};
use inbound_runtime::sessions::SessionGuard;
use inbound_runtime::signals::shutdown_signal;
use inbound_store::handlers::{Handler, Registry};
use inbound_store::{self as store, PoolSettings, Schema};
use sqlx::migrate::Migrator;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::args::WorkerArgs;
use crate::migrate::SchemaMigrations;
use crate::{Worker, WorkerSettings, gauges, telemetry};

/// A worker being put together: the handlers it runs (`forward` is always registered)
/// and the team's migrations it carries.
///
/// ```
/// use inbound_worker::WorkerBuilder;
/// use inbound_worker::handlers::FORWARD;
///
/// let builder = WorkerBuilder::new();
/// assert_eq!(builder.registry().names(), [FORWARD]);
/// ```
#[must_use]
pub struct WorkerBuilder {
    registry: Registry,
    migrations: Vec<SchemaMigrations>,
    /// A registration refused (a schema name that is not one), reported by `start` and
    /// `migrate`.
    refused: Option<String>,
}

impl Default for WorkerBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl WorkerBuilder {
    /// A builder with inbound's built-in handlers registered.
    pub fn new() -> Self {
        Self {
            registry: Registry::builtin(),
            migrations: Vec::new(),
            refused: None,
        }
    }

    /// Carries the team's migrations of `schema` (its tables, and its migration history):
    /// `<worker> migrate` applies them after inbound's and, with `--create-roles`, grants
    /// the schema to the worker role, so a team needs no migrate binary of its own.
    pub fn migrations(self, schema: &str, migrator: &'static Migrator) -> Self {
        self.add_migrations(schema, migrator, None)
    }

    /// [`WorkerBuilder::migrations`], naming the directory they were embedded from
    /// (`concat!(env!("CARGO_MANIFEST_DIR"), "/migrations")`): where it still exists,
    /// `<worker> migrate` refuses a binary built before a file was added to it instead of
    /// applying only the old ones.
    pub fn migrations_from(
        self,
        schema: &str,
        migrator: &'static Migrator,
        source: &'static str,
    ) -> Self {
        self.add_migrations(schema, migrator, Some(source))
    }

    fn add_migrations(
        mut self,
        schema: &str,
        migrator: &'static Migrator,
        source: Option<&'static str>,
    ) -> Self {
        match schema.parse::<Schema>() {
            Ok(schema) => self.migrations.push(SchemaMigrations {
                schema,
                migrator,
                source,
            }),
            Err(error) => {
                self.refused
                    .get_or_insert(format!("migrations of schema {schema:?}: {error}"));
            }
        }
        self
    }

    /// The migrations registered so far.
    pub fn registered_migrations(&self) -> &[SchemaMigrations] {
        &self.migrations
    }

    /// Registers `handler` under `name`, the name routes give as `handler = "…"`.
    pub fn handler(mut self, name: &str, handler: impl Handler) -> Self {
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

    /// Checks `config` as this worker would run it (every route of the integrations it
    /// claims names a registered handler that accepts the provider and the options), for
    /// `settings`' role and integrations. The first route refused, named.
    pub fn check(&self, config: &Config, settings: &WorkerSettings) -> anyhow::Result<()> {
        if let Some(refused) = &self.refused {
            anyhow::bail!("{refused}");
        }
        if let Some(integrations) = settings.integrations() {
            for integration in integrations {
                anyhow::ensure!(
                    config.integration(integration).is_some(),
                    "--integration {integration}: no such integration in the configuration"
                );
            }
        }
        // Only what this worker will apply: a dispatcher applies nothing, and a worker
        // pinned to some integrations never sees the others' routes.
        if settings.role().runs_receipts() {
            check_routes(config, &self.registry, settings.integrations())
                .context("invalid configuration")?;
        }
        Ok(())
    }

    /// Starts the worker: checks `config` ([`WorkerBuilder::check`]), opens a pool on
    /// `database_url`, serves `ops` when given (`/metrics` with its recorder, `/healthz`,
    /// `/readyz`), checks the database sessions, then claims. Returns once it runs; nothing
    /// is claimed before the sessions are checked.
    pub async fn start(
        self,
        config: Config,
        settings: WorkerSettings,
        database_url: &str,
        ops: Option<OpsPort>,
    ) -> anyhow::Result<RunningWorker> {
        self.check(&config, &settings)?;
        let pool = store::connect_pool_lazy(
            database_url,
            &PoolSettings {
                max_connections: settings.max_connections(),
                acquire_timeout: settings.acquire_timeout(),
                statement_timeout: settings
                    .statement_limit()
                    .saturating_sub(store::bounded::STATEMENT_MARGIN),
                application_name: "inbound-worker".to_owned(),
                target: settings.session().clone(),
            },
        )?;
        let sessions = SessionGuard::start(database_url, settings.session())?;
        inbound_runtime::process_metrics::export_config(&config);
        let worker = Arc::new(Worker::new(
            pool.clone(),
            Arc::new(config),
            self.registry,
            settings,
        ));
        let readiness =
            ops::Readiness::start(pool.clone(), Duration::from_secs(1), sessions.gate());
        let (ops_address, ops_port) = match ops {
            Some(ops) => {
                let (address, task) = ops.spawn(readiness)?;
                (Some(address), Some(task))
            }
            None => (None, None),
        };
        let (worker_id, role) = (worker.settings.worker_id(), worker.settings.role());
        match ops_address {
            Some(address) => {
                tracing::info!(metrics_addr = %address, worker_id, ?role, "listening");
            }
            None => tracing::info!(worker_id, ?role, "started without an ops port"),
        }
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(serve(worker, pool, sessions, ops_port, stopped));
        Ok(RunningWorker {
            ops_address,
            stop,
            task,
        })
    }
}

/// A worker that runs: its ops port's address, and how to stop it.
///
/// ```no_run
/// use std::time::Duration;
///
/// use inbound_worker::{Config, WorkerBuilder, WorkerSettings};
///
/// # async fn run() -> anyhow::Result<()> {
/// let config = Config::load("inbound.toml".as_ref())?;
/// let settings = WorkerSettings::builder().batch_size(20).build()?;
/// let worker = WorkerBuilder::new()
///     .start(config, settings, "postgres://inbound_worker@db/app", None)
///     .await?;
/// // Claims until the future resolves, then drains what is in flight.
/// worker.run_until(tokio::time::sleep(Duration::from_secs(60))).await
/// # }
/// ```
#[must_use = "a worker runs until it is shut down or dropped with its runtime"]
pub struct RunningWorker {
    ops_address: Option<SocketAddr>,
    stop: watch::Sender<bool>,
    task: JoinHandle<anyhow::Result<()>>,
}

impl RunningWorker {
    /// Where its ops port listens, when it was given one.
    pub fn ops_addr(&self) -> Option<SocketAddr> {
        self.ops_address
    }

    /// Whether it has ended by itself (a session check that refused the database);
    /// [`RunningWorker::shutdown`] then returns why.
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    /// Stops claiming, lets what is in flight finish (within the settings' grace), closes
    /// the pool and returns how the worker ended.
    pub async fn shutdown(self) -> anyhow::Result<()> {
        self.stop.send_replace(true);
        self.task.await.context("the worker's task failed")?
    }

    /// Runs until `shutdown` resolves (then as [`RunningWorker::shutdown`]), or until the
    /// worker ends by itself (a session check that refused the database).
    pub async fn run_until(
        mut self,
        shutdown: impl Future<Output = ()> + Send,
    ) -> anyhow::Result<()> {
        tokio::select! {
            () = shutdown => self.shutdown().await,
            ended = &mut self.task => ended.context("the worker's task failed")?,
        }
    }
}

/// The worker's life: gauges once the sessions are checked, the claim loops until
/// `stopped`, then the drain, the pool closed and the session check's verdict.
async fn serve(
    worker: Arc<Worker>,
    pool: sqlx::PgPool,
    sessions: SessionGuard,
    ops_port: Option<JoinHandle<inbound_runtime::Drain>>,
    stopped: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let gauge_worker = Arc::clone(&worker);
    // The gauges query the database like everything else: not before its sessions are
    // checked (an undeclared pooler would carry their statements).
    let gauge_gate = sessions.gate();
    let gauges = tokio::spawn(async move {
        gauges::initialise(&gauge_worker);
        gauge_gate.opened().await;
        let interval = gauge_worker.settings.gauge_interval();
        gauges::refresh_forever(&gauge_worker, interval).await;
    });
    let until_stopped = {
        let stopped = stopped.clone();
        move || {
            let mut stopped = stopped.clone();
            async move {
                stopped.wait_for(|stopped| *stopped).await.ok();
            }
        }
    };
    // A refused session check stops the worker as a shutdown would.
    let tripped = sessions.or_tripped(until_stopped());
    let (tripped_stop, tripped_stopped) = watch::channel(false);
    let watch_trip = tokio::spawn(async move {
        tripped.await;
        tripped_stop.send_replace(true);
    });
    let stop_now = move || {
        let mut tripped_stopped = tripped_stopped.clone();
        async move {
            tripped_stopped.wait_for(|stopped| *stopped).await.ok();
        }
    };
    // Nothing is claimed before the database sessions are checked; a refusal or a stop
    // before that ends the worker without a claim.
    let checked = tokio::select! {
        () = sessions.gate().opened() => true,
        () = stop_now() => false,
    };
    let ran = if checked {
        crate::run(Arc::clone(&worker), stop_now()).await
    } else {
        Ok(())
    };
    gauges.abort();
    watch_trip.abort();
    // In a process that goes on (tests, an embedding), the ops port and with it the
    // readiness task end with the worker.
    if let Some(ops_port) = ops_port {
        ops_port.abort();
    }
    drop(worker);
    close_pool(&pool, EXIT_POOL_CLOSE_LIMIT).await;
    sessions.finish()?;
    ran?;
    tracing::info!("drained; exiting");
    Ok(())
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
/// [`WorkerBuilder::start`] until SIGTERM/SIGINT. `configure` registers the handlers (and
/// the migrations `<worker> migrate` applies).
pub fn main(configure: impl FnOnce(WorkerBuilder) -> WorkerBuilder) -> ExitCode {
    let builder = configure(WorkerBuilder::new());
    if crate::migrate::requested() {
        if let Some(refused) = &builder.refused {
            eprintln!("migrate: {refused}");
            return ExitCode::FAILURE;
        }
        return crate::migrate::main(&builder.migrations);
    }
    let args = match inbound_runtime::usage::try_parse::<WorkerArgs>() {
        Ok(args) => args,
        Err(error) => offline_args().unwrap_or_else(|| error.exit()),
    };
    inbound_runtime::logging::init_logging(args.common.log_format);
    inbound_runtime::process::run_to_exit_code(|| run_process(builder, args))
}

/// The process behind [`main`]: what the flags ask, then the worker until a signal.
async fn run_process(builder: WorkerBuilder, args: WorkerArgs) -> anyhow::Result<()> {
    if args.list_handlers {
        for name in builder.registry.names() {
            println!("{name}");
        }
        return Ok(());
    }
    let settings = args.settings()?;
    let config = Config::load(&args.common.config).context("invalid configuration")?;
    builder.check(&config, &settings)?;
    if args.check_config {
        println!(
            "{}: ok for this worker ({} integrations, {} handlers)",
            args.common.config.display(),
            config.integrations().len(),
            builder.registry.names().len()
        );
        return Ok(());
    }
    // Arm the signals before anything starts: a SIGTERM during start-up drains.
    let shutdown = shutdown_signal();
    let metrics = telemetry::install_metrics(settings.role())
        .context("cannot install the metrics recorder")?;
    let listener = TcpListener::bind(args.metrics_listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.metrics_listen))?;
    let running = builder
        .start(
            config,
            settings,
            &args.common.database_url,
            Some(OpsPort { listener, metrics }),
        )
        .await?;
    running.run_until(shutdown).await
}
