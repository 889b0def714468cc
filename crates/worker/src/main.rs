//! `inbound-worker`: parse flags, set up telemetry, build the pool, serve the ops port,
//! and claim and apply receipts until SIGTERM/SIGINT, then drain.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, ensure};
use clap::Parser;
use inbound_core::config::Config;
use inbound_core::handlers::Registry;
use inbound_core::store::{self, PoolSettings};
use inbound_service::args::CommonArgs;
use inbound_service::logging;
use inbound_service::signals::shutdown_signal;
use inbound_service::{ops, serve};
use inbound_worker::{MAX_BATCH_SIZE, Worker, WorkerSettings, gauges, telemetry};
use tokio::net::TcpListener;

/// The inbound worker: claim accepted receipts and apply each transition exactly once.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(flatten)]
    common: CommonArgs,
    /// Address for /metrics, /healthz and /readyz.
    #[arg(long, env = "INBOUND_METRICS_LISTEN", default_value = "0.0.0.0:9091")]
    metrics_listen: SocketAddr,
    /// Business transactions in flight at once.
    #[arg(long, env = "INBOUND_CONCURRENCY", default_value_t = 8)]
    concurrency: usize,
    /// Most receipts completed in one business transaction; 1 commits every receipt on
    /// its own. At most 64: a batch rerun with a savepoint per receipt must stay within
    /// PostgreSQL's per-backend subtransaction cache (64), past which every snapshot in
    /// the cluster slows down.
    #[arg(long, env = "INBOUND_BATCH_SIZE", default_value_t = 50)]
    batch_size: usize,
    /// Effects delivered or reconciled at once.
    #[arg(long, env = "INBOUND_EFFECT_CONCURRENCY", default_value_t = 8)]
    effect_concurrency: usize,
    /// Lease length; an expired lease is claimable by another worker.
    #[arg(long, env = "INBOUND_LEASE_SECS", default_value_t = 30)]
    lease_secs: u64,
    /// Sleep between claims when idle.
    #[arg(long, env = "INBOUND_POLL_INTERVAL_MS", default_value_t = 500)]
    poll_interval_ms: u64,
    /// Attempts before a receipt is failed (also enforced when a claim finds a receipt
    /// whose attempts are spent without an outcome: its worker died each time).
    #[arg(long, env = "INBOUND_MAX_ATTEMPTS", default_value_t = 10)]
    max_attempts: i32,
    /// Payload bytes of claimed receipts held at once (as accepted; decoded payloads take
    /// a few times more). A larger receipt is claimed alone when nothing else is in flight.
    #[arg(long, env = "INBOUND_PAYLOAD_BUDGET_BYTES", default_value_t = 4 * 1024 * 1024)]
    payload_budget_bytes: usize,
    /// First retry delay.
    #[arg(long, env = "INBOUND_BACKOFF_BASE_MS", default_value_t = 1000)]
    backoff_base_ms: u64,
    /// Longest retry delay.
    #[arg(long, env = "INBOUND_BACKOFF_CAP_SECS", default_value_t = 600)]
    backoff_cap_secs: u64,
    /// Claim only these integrations (repeat the flag); all when absent.
    #[arg(
        long = "integration",
        env = "INBOUND_INTEGRATIONS",
        value_delimiter = ','
    )]
    integrations: Vec<String>,
    /// Identifies this worker in `receipt_queue.leased_by`.
    #[arg(long, env = "INBOUND_WORKER_ID")]
    worker_id: Option<String>,
    /// How often the queue gauges are refreshed.
    #[arg(long, env = "INBOUND_GAUGE_INTERVAL_SECS", default_value_t = 5)]
    gauge_interval_secs: u64,
}

#[tokio::main]
async fn main() {
    let cli = Cli::parse();
    logging::init_logging(cli.common.log_format);
    if let Err(error) = run(cli).await {
        tracing::error!("{error:#}");
        std::process::exit(1);
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    ensure!(
        (1..=86_400).contains(&cli.lease_secs),
        "--lease-secs must be between 1 and 86400"
    );
    // A zero backoff would turn every retry and reconciliation into a zero-delay loop.
    ensure!(
        cli.backoff_base_ms >= 1,
        "--backoff-base-ms must be at least 1"
    );
    ensure!(
        (1..=3600).contains(&cli.backoff_cap_secs)
            && cli.backoff_cap_secs.saturating_mul(1000) >= cli.backoff_base_ms,
        "--backoff-cap-secs must be between 1 and 3600 and at least --backoff-base-ms"
    );
    ensure!(
        (1..=MAX_BATCH_SIZE).contains(&cli.batch_size),
        "--batch-size must be between 1 and {MAX_BATCH_SIZE}"
    );
    ensure!(cli.concurrency >= 1, "--concurrency must be at least 1");
    ensure!(
        cli.effect_concurrency >= 1,
        "--effect-concurrency must be at least 1"
    );
    ensure!(cli.max_attempts >= 1, "--max-attempts must be at least 1");
    ensure!(
        cli.payload_budget_bytes >= 1,
        "--payload-budget-bytes must be at least 1"
    );
    let registry = Registry::builtin();
    let config = Config::load_with_handlers(&cli.common.config, &registry.names())
        .context("invalid configuration")?;
    for integration in &cli.integrations {
        ensure!(
            config.integration(integration).is_some(),
            "--integration {integration}: no such integration in the configuration"
        );
    }
    let metrics = telemetry::install_metrics().context("cannot install the metrics recorder")?;
    let pool = store::connect_pool_lazy(
        &cli.common.database_url,
        &PoolSettings {
            // One per receipt batch and per effect in flight, one for claims, one for
            // gauges, one spare. The outcome recorder opens one more of its own.
            max_connections: u32::try_from(cli.concurrency.saturating_add(cli.effect_concurrency))
                .unwrap_or(u32::MAX)
                .saturating_add(3),
            acquire_timeout: cli.common.acquire_timeout(),
            statement_timeout: cli.common.statement_timeout(),
            application_name: "inbound-worker".to_owned(),
        },
    )?;
    let worker_id = cli.worker_id.unwrap_or_else(|| {
        let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "worker".to_owned());
        format!("{host}-{}", std::process::id())
    });
    let worker = Arc::new(Worker::new(
        pool.clone(),
        Arc::new(config),
        registry,
        WorkerSettings {
            concurrency: cli.concurrency,
            batch_size: cli.batch_size,
            effect_concurrency: cli.effect_concurrency,
            lease: Duration::from_secs(cli.lease_secs),
            poll_interval: Duration::from_millis(cli.poll_interval_ms),
            max_attempts: cli.max_attempts,
            backoff_base: Duration::from_millis(cli.backoff_base_ms),
            backoff_cap: Duration::from_secs(cli.backoff_cap_secs),
            worker_id: worker_id.clone(),
            integrations: (!cli.integrations.is_empty()).then_some(cli.integrations),
            shutdown_grace: cli.common.shutdown_grace(),
            payload_budget_bytes: cli.payload_budget_bytes,
        },
    ));

    let metrics_listener = TcpListener::bind(cli.metrics_listen)
        .await
        .with_context(|| format!("cannot listen on {}", cli.metrics_listen))?;
    tracing::info!(metrics_addr = %metrics_listener.local_addr()?, worker_id, "listening");
    let readiness = ops::Readiness::start(pool.clone(), Duration::from_secs(1));
    tokio::spawn(serve(
        metrics_listener,
        ops::ops_limits(),
        move |request| ops::serve_ops(request, metrics.clone(), readiness.clone()),
        std::future::pending(),
    ));
    let gauge_worker = Arc::clone(&worker);
    let gauge_interval = Duration::from_secs(cli.gauge_interval_secs.max(1));
    let gauges =
        tokio::spawn(async move { gauges::refresh_forever(&gauge_worker, gauge_interval).await });

    let client = inbound_worker::dispatch::http_client().context("cannot build the HTTP client")?;
    inbound_worker::run(Arc::clone(&worker), client, shutdown_signal()).await;
    gauges.abort();
    pool.close().await;
    tracing::info!("drained; exiting");
    Ok(())
}
