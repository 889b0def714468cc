//! The ingress's flags (each with an `INBOUND_…` environment twin).

use std::net::SocketAddr;
use std::time::Duration;

use inbound_runtime::args::CommonArgs;

use crate::IngressSettings;

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

impl IngressArgs {
    /// The settings these flags describe, or the flag out of its range (one line naming
    /// it: the process exits 1).
    pub fn settings(&self) -> anyhow::Result<IngressSettings> {
        IngressSettings::builder()
            .session(self.common.session_target())
            .db_max_connections(self.db_max_connections)
            .db_acquire_timeout(self.common.acquire_timeout())
            .db_statement_timeout(self.common.statement_timeout())
            .request_timeout(Duration::from_secs(self.request_timeout_secs))
            .header_read_timeout(Duration::from_secs(self.header_read_timeout_secs))
            .max_connections(self.max_connections)
            .commit_batch_max(self.commit_batch_max)
            .commit_concurrency(self.commit_concurrency)
            .body_budget_bytes(self.body_budget_bytes)
            .shutdown_grace(self.common.shutdown_grace())
            .gauge_interval(self.common.gauge_interval())
            .build()
            .map_err(|invalid| {
                let flag = match invalid.setting {
                    "db_acquire_timeout" => "--db-acquire-timeout-ms",
                    "db_statement_timeout" => "--db-statement-timeout-ms",
                    "request_timeout" => "--request-timeout-secs",
                    "header_read_timeout" => "--header-read-timeout-secs",
                    "shutdown_grace" => "--shutdown-grace-secs",
                    "gauge_interval" => "--gauge-interval-secs",
                    "db_max_connections" => "--db-max-connections",
                    "max_connections" => "--max-connections",
                    "commit_batch_max" => "--commit-batch-max",
                    "commit_concurrency" => "--commit-concurrency",
                    _ => "--body-budget-bytes",
                };
                anyhow::anyhow!("{flag}: {invalid}")
            })
    }
}
