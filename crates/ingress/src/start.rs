//! The ingress as a library and as a process. [`start`] runs it from values — a
//! [`Config`], [`IngressSettings`], a database URL, an already-bound listener and, when
//! wanted, an ops port — and returns a [`RunningIngress`] to shut down; [`main`] alone
//! parses the flags, installs the process's metrics recorder, binds the ports and runs it
//! until SIGTERM/SIGINT.

use std::future::Future;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use inbound_core::clock::SystemClock;
use inbound_core::config::Config;
use inbound_runtime::ops::{self, OpsPort};
use inbound_runtime::process::{EXIT_POOL_CLOSE_LIMIT, close_pool};
use inbound_runtime::sessions::SessionGuard;
use inbound_runtime::signals::shutdown_signal;
use inbound_runtime::{Drain, ServerLimits, logging, serve};
use inbound_store::{self as store, PoolSettings};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::app::{App, AppSettings};
use crate::args::IngressArgs;
use crate::body::BodyBudget;
use crate::group_commit::{GroupCommit, GroupCommitSettings};
use crate::settings::IngressSettings;
use crate::telemetry;

/// The whole ingress process: flags from the command line and environment, logging, the
/// metrics recorder and the two ports, then [`start`] until SIGTERM/SIGINT; a start-up
/// error is one log line and exit code 1.
pub fn main() -> ExitCode {
    let args: IngressArgs = inbound_runtime::usage::parse();
    logging::init_logging(args.common.log_format);
    inbound_runtime::process::run_to_exit_code(|| run_process(args))
}

/// The process behind [`main`].
async fn run_process(args: IngressArgs) -> anyhow::Result<()> {
    // Armed before anything starts: a SIGTERM during start-up drains.
    let shutdown = shutdown_signal();
    let settings = args.settings()?;
    let config = Config::load(&args.common.config).context("invalid configuration")?;
    let metrics = telemetry::install_metrics().context("cannot install the metrics recorder")?;
    let listener = TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let ops_listener = TcpListener::bind(args.metrics_listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.metrics_listen))?;
    let running = start(
        config,
        settings,
        &args.common.database_url,
        listener,
        Some(OpsPort {
            listener: ops_listener,
            metrics,
        }),
    )
    .await?;
    running.run_until(shutdown).await
}

/// Refuses a configuration the settings make unusable (a body budget smaller than an
/// integration's largest body could never read one).
fn check_config(config: &Config, settings: &IngressSettings) -> anyhow::Result<()> {
    if let Some(integration) = config
        .integrations()
        .iter()
        .find(|integration| integration.max_body_bytes > settings.body_budget_bytes)
    {
        bail!(
            "the body budget ({} bytes, --body-budget-bytes) is smaller than integration {}'s max_body_bytes {}: such a body could never be read",
            settings.body_budget_bytes,
            integration.id,
            integration.max_body_bytes
        );
    }
    Ok(())
}

/// Starts the ingress on `listener`: a pool on `database_url`, the group commit, the ops
/// port when given (`/metrics` with its recorder, `/healthz`, `/readyz`), and the start-up
/// check of the database sessions (nothing is committed before it passes). Returns once
/// it serves.
///
/// ```no_run
/// # async fn example() -> anyhow::Result<()> {
/// use inbound_ingress::{IngressSettings, start};
///
/// let config = inbound_core::config::Config::load("inbound.toml".as_ref())?;
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// let running = start(
///     config,
///     IngressSettings::builder().build()?,
///     "postgres://inbound_ingress@127.0.0.1/inbound",
///     listener,
///     None,
/// )
/// .await?;
/// println!("webhooks at http://{}/webhooks/…", running.local_addr());
/// running.shutdown().await
/// # }
/// ```
pub async fn start(
    config: Config,
    settings: IngressSettings,
    database_url: &str,
    listener: TcpListener,
    ops: Option<OpsPort>,
) -> anyhow::Result<RunningIngress> {
    check_config(&config, &settings)?;
    inbound_runtime::process_metrics::export_config(&config);
    telemetry::initialise(&config);
    let pool = store::connect_pool_lazy(
        database_url,
        &PoolSettings {
            max_connections: settings.db_max_connections,
            acquire_timeout: settings.db_acquire_timeout,
            statement_timeout: settings.db_statement_timeout,
            application_name: "inbound-ingress".to_owned(),
            target: settings.session.clone(),
        },
    )?;
    let sessions = SessionGuard::start(database_url, &settings.session)?;
    let app_settings = AppSettings {
        request_timeout: settings.request_timeout,
        database_timeout: settings.db_acquire_timeout + settings.db_statement_timeout,
    };
    let readiness = ops::Readiness::start(
        pool.clone(),
        std::time::Duration::from_secs(1),
        sessions.gate(),
    );
    let group_commit = start_group_commit(&settings, pool.clone()).gated_by(sessions.gate());
    let config = Arc::new(config);
    let app = Arc::new(App::new(
        Arc::clone(&config),
        pool,
        group_commit,
        BodyBudget::new(settings.body_budget_bytes),
        readiness.clone(),
        Arc::new(SystemClock),
        app_settings,
    ));
    let address = listener.local_addr()?;
    let (ops_address, ops_port) = match ops {
        Some(ops) => {
            let (address, task) = ops.spawn(readiness)?;
            (Some(address), Some(task))
        }
        None => (None, None),
    };
    match ops_address {
        Some(ops_address) => {
            tracing::info!(addr = %address, metrics_addr = %ops_address, "listening")
        }
        None => tracing::info!(addr = %address, "listening"),
    }
    let queue_ages = spawn_queue_ages(&settings, app.pool().clone(), config, sessions.gate());
    let limits = server_limits(&settings);
    let (stop, mut stopped) = watch::channel(false);
    let shutdown = sessions.or_tripped(async move {
        stopped.wait_for(|stopped| *stopped).await.ok();
    });
    let task = tokio::spawn(async move {
        let handler_app = Arc::clone(&app);
        let drain = serve(
            listener,
            limits,
            move |request| Arc::clone(&handler_app).handle(request),
            shutdown,
        )
        .await;
        match drain {
            Drain::Complete => tracing::info!("drained; exiting"),
            Drain::TimedOut => {
                tracing::warn!("grace period over with requests still open; exiting");
            }
        }
        // In a process that goes on (tests, an embedding), the ops port and with it the
        // readiness task end with the ingress.
        if let Some(ops_port) = ops_port {
            ops_port.abort();
        }
        queue_ages.abort();
        // The committers end with the last handle on the app (the queue's sender) and
        // give their connections back: closing the pool waits (a bounded time) for every
        // connection.
        let pool = app.pool().clone();
        drop(app);
        close_pool(&pool, EXIT_POOL_CLOSE_LIMIT).await;
        sessions.finish()
    });
    Ok(RunningIngress {
        address,
        ops_address,
        stop,
        task,
    })
}

/// An ingress that serves: its addresses, and how to stop it.
#[must_use = "an ingress serves until it is shut down or dropped with its runtime"]
pub struct RunningIngress {
    address: SocketAddr,
    ops_address: Option<SocketAddr>,
    stop: watch::Sender<bool>,
    task: JoinHandle<anyhow::Result<()>>,
}

impl RunningIngress {
    /// Where webhooks are received.
    pub fn local_addr(&self) -> SocketAddr {
        self.address
    }

    /// Where its ops port listens, when it was given one.
    pub fn ops_addr(&self) -> Option<SocketAddr> {
        self.ops_address
    }

    /// Whether it has ended by itself (a session check that refused the database);
    /// [`RunningIngress::shutdown`] then returns why.
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    /// Stops accepting, lets open requests finish (within the settings' grace), closes
    /// the pool and returns how the ingress ended.
    pub async fn shutdown(self) -> anyhow::Result<()> {
        self.stop.send_replace(true);
        self.task.await.context("the ingress's task failed")?
    }

    /// Serves until `shutdown` resolves (then as [`RunningIngress::shutdown`]), or until
    /// the ingress ends by itself (a session check that refused the database).
    pub async fn run_until(
        mut self,
        shutdown: impl Future<Output = ()> + Send,
    ) -> anyhow::Result<()> {
        tokio::select! {
            () = shutdown => self.shutdown().await,
            ended = &mut self.task => ended.context("the ingress's task failed")?,
        }
    }
}

/// The queue ages, exported here too so that they outlive every worker (a crash loop, a
/// bad deploy): read after the database sessions are checked, each refresh bounded by
/// the statement limit.
fn spawn_queue_ages(
    settings: &IngressSettings,
    pool: sqlx::PgPool,
    config: Arc<Config>,
    gate: inbound_runtime::sessions::SessionGate,
) -> tokio::task::JoinHandle<()> {
    let interval = settings.gauge_interval;
    let limit = settings.db_statement_timeout + inbound_store::bounded::STATEMENT_MARGIN;
    tokio::spawn(async move {
        gate.opened().await;
        inbound_runtime::queue_ages::export_forever(pool, &config, interval, limit).await;
    })
}

/// The group commit, with a connection left for `/readyz`.
fn start_group_commit(settings: &IngressSettings, pool: sqlx::PgPool) -> GroupCommit {
    GroupCommit::start(
        pool,
        GroupCommitSettings {
            max_batch: settings.commit_batch_max,
            committers: settings
                .commit_concurrency
                .min(settings.db_max_connections.saturating_sub(1).max(1) as usize),
            // The server cancels a slow statement itself: only a server that went silent is
            // given up on (store::bounded).
            statement_limit: settings.db_statement_timeout + store::bounded::STATEMENT_MARGIN,
        },
    )
}

fn server_limits(settings: &IngressSettings) -> ServerLimits {
    ServerLimits {
        header_read_timeout: settings.header_read_timeout,
        max_connections: settings.max_connections,
        shutdown_grace: settings.shutdown_grace,
        max_buf_size: inbound_runtime::server::MAX_REQUEST_HEAD_BYTES,
        record_peer: false,
    }
}
