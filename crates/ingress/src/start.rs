//! The ingress as a library: [`main`] is the whole `inbound-ingress` process, [`run`] the
//! same without the process around it (flags given, shutdown chosen by the caller).

use std::future::Future;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use inbound_core::clock::SystemClock;
use inbound_core::config::Config;
use inbound_runtime::process::{EXIT_POOL_CLOSE_LIMIT, close_pool};
use inbound_runtime::sessions::SessionGuard;
use inbound_runtime::signals::shutdown_signal;
use inbound_runtime::{Drain, ServerLimits, logging, ops, serve};
use inbound_store::{self as store, PoolSettings};
use tokio::net::TcpListener;

use crate::app::{App, AppSettings};
use crate::args::IngressArgs;
use crate::body::BodyBudget;
use crate::group_commit::{GroupCommit, GroupCommitSettings};
use crate::telemetry;

/// The whole ingress process: flags from the command line and environment, logging,
/// then [`run`] until SIGTERM/SIGINT; a start-up error is one log line and exit code 1.
pub fn main() -> ExitCode {
    let args: IngressArgs = inbound_runtime::usage::parse();
    logging::init_logging(args.common.log_format);
    inbound_runtime::process::run_to_exit_code(|| run(args, shutdown_signal()))
}

/// The configuration, refused when a flag makes it unusable (a body budget smaller than
/// an integration's largest body could never read one).
fn load_config(cli: &IngressArgs) -> anyhow::Result<Config> {
    let config = Config::load(&cli.common.config).context("invalid configuration")?;
    if let Some(integration) = config
        .integrations()
        .iter()
        .find(|integration| integration.max_body_bytes > cli.body_budget_bytes)
    {
        bail!(
            "--body-budget-bytes {} is smaller than integration {}'s max_body_bytes {}: such a body could never be read",
            cli.body_budget_bytes,
            integration.id,
            integration.max_body_bytes
        );
    }
    Ok(config)
}

/// Serves until `shutdown` resolves, then drains. Refuses to start on an invalid
/// configuration or flags that could never work.
pub async fn run(
    cli: IngressArgs,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let config = load_config(&cli)?;
    let metrics = telemetry::install_metrics().context("cannot install the metrics recorder")?;
    inbound_runtime::process_metrics::export_config(&config);
    telemetry::initialise(&config);
    let statement_timeout = cli.common.statement_timeout();
    let acquire_timeout = cli.common.acquire_timeout();
    let pool = store::connect_pool_lazy(
        &cli.common.database_url,
        &PoolSettings {
            max_connections: cli.db_max_connections,
            acquire_timeout,
            statement_timeout,
            application_name: "inbound-ingress".to_owned(),
            target: cli.common.session_target(),
        },
    )?;
    let sessions = SessionGuard::start(&cli.common.database_url, &cli.common.session_target())?;
    let shutdown = sessions.or_tripped(shutdown);
    let settings = AppSettings {
        request_timeout: Duration::from_secs(cli.request_timeout_secs),
        database_timeout: acquire_timeout + statement_timeout,
    };
    let readiness = ops::Readiness::start(pool.clone(), Duration::from_secs(1), sessions.gate());
    let group_commit = start_group_commit(&cli, pool.clone()).gated_by(sessions.gate());
    let config = Arc::new(config);
    let app = Arc::new(App::new(
        Arc::clone(&config),
        pool,
        group_commit,
        BodyBudget::new(cli.body_budget_bytes),
        readiness.clone(),
        Arc::new(SystemClock),
        settings,
    ));
    let limits = server_limits(&cli);

    let listener = TcpListener::bind(cli.listen)
        .await
        .with_context(|| format!("cannot listen on {}", cli.listen))?;
    let metrics_listener = TcpListener::bind(cli.metrics_listen)
        .await
        .with_context(|| format!("cannot listen on {}", cli.metrics_listen))?;
    tracing::info!(
        addr = %listener.local_addr()?,
        metrics_addr = %metrics_listener.local_addr()?,
        "listening"
    );

    let ops_port = ops::spawn_ops_port(metrics_listener, metrics, readiness);
    let queue_ages = spawn_queue_ages(&cli, app.pool().clone(), config, sessions.gate());

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
        Drain::TimedOut => tracing::warn!("grace period over with requests still open; exiting"),
    }
    // In a process that goes on (tests, an embedding), the ops port and with it the
    // readiness task end with the ingress.
    ops_port.abort();
    queue_ages.abort();
    // The committers end with the last handle on the app (the queue's sender) and give
    // their connections back: closing the pool waits (a bounded time) for every connection.
    let pool = app.pool().clone();
    drop(app);
    close_pool(&pool, EXIT_POOL_CLOSE_LIMIT).await;
    sessions.finish()
}

/// The queue ages, exported here too so that they outlive every worker (a crash loop, a
/// bad deploy): read after the database sessions are checked, each refresh bounded by
/// the statement limit.
fn spawn_queue_ages(
    cli: &IngressArgs,
    pool: sqlx::PgPool,
    config: Arc<Config>,
    gate: inbound_runtime::sessions::SessionGate,
) -> tokio::task::JoinHandle<()> {
    let interval = cli.common.gauge_interval();
    let limit = cli.common.statement_timeout() + inbound_store::bounded::STATEMENT_MARGIN;
    tokio::spawn(async move {
        gate.opened().await;
        inbound_runtime::queue_ages::export_forever(pool, &config, interval, limit).await;
    })
}

/// The group commit, with a connection left for `/readyz`.
fn start_group_commit(cli: &IngressArgs, pool: sqlx::PgPool) -> GroupCommit {
    GroupCommit::start(
        pool,
        GroupCommitSettings {
            max_batch: cli.commit_batch_max,
            committers: cli
                .commit_concurrency
                .min(cli.db_max_connections.saturating_sub(1).max(1) as usize),
            // The server cancels a slow statement itself: only a server that went silent is
            // given up on (store::bounded).
            statement_limit: cli.common.statement_timeout() + store::bounded::STATEMENT_MARGIN,
        },
    )
}

fn server_limits(cli: &IngressArgs) -> ServerLimits {
    ServerLimits {
        header_read_timeout: Duration::from_secs(cli.header_read_timeout_secs),
        max_connections: cli.max_connections,
        shutdown_grace: cli.common.shutdown_grace(),
        max_buf_size: inbound_runtime::server::MAX_REQUEST_HEAD_BYTES,
        record_peer: false,
    }
}
