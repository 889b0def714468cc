//! `inbound-ingress`: parse flags, set up telemetry, build the pool, bind, and serve until
//! SIGTERM/SIGINT, then drain.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Parser;
use inbound_core::clock::SystemClock;
use inbound_core::config::Config;
use inbound_core::store::{self, PoolSettings};
use inbound_ingress::body::BodyBudget;
use inbound_ingress::group_commit::{GroupCommit, GroupCommitSettings};
use inbound_ingress::telemetry;
use inbound_ingress::{App, AppSettings};
use inbound_service::args::CommonArgs;
use inbound_service::logging;
use inbound_service::signals::shutdown_signal;
use inbound_service::{Drain, ServerLimits, ops, serve};
use tokio::net::TcpListener;

/// The inbound webhook receiver: verify, durably accept, answer.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(flatten)]
    common: CommonArgs,
    /// Address for webhooks and /healthz, /readyz.
    #[arg(long, env = "INBOUND_LISTEN", default_value = "0.0.0.0:8080")]
    listen: SocketAddr,
    /// Address for /metrics (and /healthz, /readyz).
    #[arg(long, env = "INBOUND_METRICS_LISTEN", default_value = "0.0.0.0:9090")]
    metrics_listen: SocketAddr,
    /// Database connections in the pool.
    #[arg(long, env = "INBOUND_DB_MAX_CONNECTIONS", default_value_t = 16)]
    db_max_connections: u32,
    /// Whole-request budget (body, verification, commit).
    #[arg(long, env = "INBOUND_REQUEST_TIMEOUT_SECS", default_value_t = 10)]
    request_timeout_secs: u64,
    /// A request head must arrive within this; idle keep-alive connections close after it.
    #[arg(long, env = "INBOUND_HEADER_READ_TIMEOUT_SECS", default_value_t = 5)]
    header_read_timeout_secs: u64,
    /// Connections served at once.
    #[arg(long, env = "INBOUND_MAX_CONNECTIONS", default_value_t = 1024)]
    max_connections: usize,
    /// Most receipts committed in one statement (group commit).
    #[arg(long, env = "INBOUND_COMMIT_BATCH_MAX", default_value_t = 128)]
    commit_batch_max: usize,
    /// Group-commit statements in flight at once (each holds a pooled connection).
    #[arg(long, env = "INBOUND_COMMIT_CONCURRENCY", default_value_t = 2)]
    commit_concurrency: usize,
    /// Bytes of request bodies held at once, all requests together; past it, requests
    /// get 503 + Retry-After. Must be at least every integration's max_body_bytes.
    #[arg(long, env = "INBOUND_BODY_BUDGET_BYTES", default_value_t = 32 * 1024 * 1024)]
    body_budget_bytes: usize,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    logging::init_logging(cli.common.log_format);
    if let Err(error) = run(cli).await {
        // One line, then a non-zero exit: start-up errors are read by people.
        tracing::error!("{error:#}");
        std::process::exit(1);
    }
    Ok(())
}

async fn run(cli: Cli) -> anyhow::Result<()> {
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
    let metrics = telemetry::install_metrics().context("cannot install the metrics recorder")?;
    let statement_timeout = cli.common.statement_timeout();
    let acquire_timeout = cli.common.acquire_timeout();
    let pool = store::connect_pool_lazy(
        &cli.common.database_url,
        &PoolSettings {
            max_connections: cli.db_max_connections,
            acquire_timeout,
            statement_timeout,
            application_name: "inbound-ingress".to_owned(),
        },
    )?;
    let settings = AppSettings {
        request_timeout: Duration::from_secs(cli.request_timeout_secs),
        database_timeout: acquire_timeout + statement_timeout,
    };
    let readiness = ops::Readiness::start(pool.clone(), Duration::from_secs(1));
    let group_commit = GroupCommit::start(
        pool.clone(),
        GroupCommitSettings {
            max_batch: cli.commit_batch_max,
            // Leave a connection for /readyz.
            committers: cli
                .commit_concurrency
                .min(cli.db_max_connections.saturating_sub(1).max(1) as usize),
        },
    );
    let app = Arc::new(App::new(
        Arc::new(config),
        pool,
        group_commit,
        BodyBudget::new(cli.body_budget_bytes),
        readiness.clone(),
        Arc::new(SystemClock),
        settings,
    ));
    let limits = ServerLimits {
        header_read_timeout: Duration::from_secs(cli.header_read_timeout_secs),
        max_connections: cli.max_connections,
        shutdown_grace: cli.common.shutdown_grace(),
        max_buf_size: inbound_service::server::MAX_REQUEST_HEAD_BYTES,
    };

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

    // The ops port keeps its own small connection budget: probes and scrapes get
    // through whatever the public port is going through.
    tokio::spawn(serve(
        metrics_listener,
        ops::ops_limits(),
        move |request| ops::serve_ops(request, metrics.clone(), readiness.clone()),
        std::future::pending(),
    ));

    let handler_app = Arc::clone(&app);
    let drain = serve(
        listener,
        limits,
        move |request| Arc::clone(&handler_app).handle(request),
        shutdown_signal(),
    )
    .await;
    match drain {
        Drain::Complete => tracing::info!("drained; exiting"),
        Drain::TimedOut => tracing::warn!("grace period over with requests still open; exiting"),
    }
    app.pool().close().await;
    Ok(())
}
