//! The ingress's flags (each with an `INBOUND_…` environment twin).

use std::net::SocketAddr;

use inbound_runtime::args::CommonArgs;

/// The inbound webhook receiver: verify, durably accept, answer.
#[derive(Debug, clap::Parser)]
#[command(version, about)]
pub struct IngressArgs {
    /// Configuration, database, logging and drain.
    #[command(flatten)]
    pub common: CommonArgs,
    /// Address for webhooks and /healthz, /readyz.
    #[arg(long, env = "INBOUND_LISTEN", default_value = "0.0.0.0:8080")]
    pub listen: SocketAddr,
    /// Address for /metrics (and /healthz, /readyz).
    #[arg(long, env = "INBOUND_METRICS_LISTEN", default_value = "0.0.0.0:9090")]
    pub metrics_listen: SocketAddr,
    /// Database connections in the pool.
    #[arg(long, env = "INBOUND_DB_MAX_CONNECTIONS", default_value_t = 16)]
    pub db_max_connections: u32,
    /// Whole-request budget (body, verification, commit).
    #[arg(long, env = "INBOUND_REQUEST_TIMEOUT_SECS", default_value_t = 10)]
    pub request_timeout_secs: u64,
    /// A request head must arrive within this; idle keep-alive connections close after it.
    #[arg(long, env = "INBOUND_HEADER_READ_TIMEOUT_SECS", default_value_t = 5)]
    pub header_read_timeout_secs: u64,
    /// Connections served at once.
    #[arg(long, env = "INBOUND_MAX_CONNECTIONS", default_value_t = 1024)]
    pub max_connections: usize,
    /// Most receipts committed in one statement (group commit).
    #[arg(long, env = "INBOUND_COMMIT_BATCH_MAX", default_value_t = 128)]
    pub commit_batch_max: usize,
    /// Group-commit statements in flight at once (each holds a pooled connection). One
    /// is fastest on the benchmark machine: a second splits the batches, doubling the
    /// commits and the WAL flushes they contend on (BENCHMARKS.md).
    #[arg(long, env = "INBOUND_COMMIT_CONCURRENCY", default_value_t = 1)]
    pub commit_concurrency: usize,
    /// Bytes of request bodies held at once, all requests together; past it, requests
    /// get 503 + Retry-After. Must be at least every integration's max_body_bytes.
    #[arg(long, env = "INBOUND_BODY_BUDGET_BYTES", default_value_t = 32 * 1024 * 1024)]
    pub body_budget_bytes: usize,
}
