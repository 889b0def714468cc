//! The worker's flags (each with an `INBOUND_…` environment twin), shared by the stock
//! binary and every worker built on this library, and their checks.

use std::net::SocketAddr;
use std::time::Duration;

use inbound_runtime::args::CommonArgs;

use crate::WorkerSettings;

/// What a worker process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Role {
    /// Receipts (business transitions) and effects (the dispatcher).
    #[default]
    All,
    /// Only receipts: claim and apply transitions, record intents.
    Receipts,
    /// Only effects: deliver, reconcile and record outcomes.
    Effects,
}

impl Role {
    /// Whether this role claims receipts.
    pub fn runs_receipts(self) -> bool {
        matches!(self, Self::All | Self::Receipts)
    }

    /// Whether this role dispatches effects.
    pub fn runs_effects(self) -> bool {
        matches!(self, Self::All | Self::Effects)
    }
}

/// The inbound worker: claim accepted receipts and apply each transition exactly once;
/// deliver their effects.
#[derive(Debug, clap::Parser)]
#[command(version, about)]
pub struct WorkerArgs {
    /// Configuration, database, logging and drain.
    #[command(flatten)]
    pub common: CommonArgs,
    /// Print the registered handler names, one per line, and exit (for
    /// `inboundctl check-config --handlers`).
    #[arg(long)]
    pub list_handlers: bool,
    /// Check the configuration as this worker would at start-up — every route's handler
    /// registered, its providers and options accepted, its integration's own checks
    /// (a Stripe business handler needs `expect.livemode`) — and exit; reads no database.
    #[arg(long)]
    pub check_config: bool,
    /// receipts: apply transitions only; effects: deliver effects only; all: both.
    #[arg(long, env = "INBOUND_ROLE", value_enum, default_value_t = Role::All)]
    pub role: Role,
    /// Address for /metrics, /healthz and /readyz.
    #[arg(long, env = "INBOUND_METRICS_LISTEN", default_value = "0.0.0.0:9091")]
    pub metrics_listen: SocketAddr,
    /// Business transactions in flight at once.
    #[arg(long, env = "INBOUND_CONCURRENCY", default_value_t = 8)]
    pub concurrency: usize,
    /// Most receipts completed in one business transaction; 1 commits every receipt on
    /// its own. At most 64: a batch rerun with a savepoint per receipt must stay within
    /// PostgreSQL's per-backend subtransaction cache (64), past which every snapshot in
    /// the cluster slows down.
    #[arg(long, env = "INBOUND_BATCH_SIZE", default_value_t = 50)]
    pub batch_size: usize,
    /// Effects delivered or reconciled at once.
    #[arg(long, env = "INBOUND_EFFECT_CONCURRENCY", default_value_t = 8)]
    pub effect_concurrency: usize,
    /// Lease length; an expired lease is claimable by another worker.
    #[arg(long, env = "INBOUND_LEASE_SECS", default_value_t = 30)]
    pub lease_secs: u64,
    /// Sleep between claims when idle.
    #[arg(long, env = "INBOUND_POLL_INTERVAL_MS", default_value_t = 500)]
    pub poll_interval_ms: u64,
    /// Attempts before a receipt is failed (also enforced when a claim finds a receipt
    /// whose attempts are spent without an outcome: its worker died each time).
    #[arg(long, env = "INBOUND_MAX_ATTEMPTS", default_value_t = 10)]
    pub max_attempts: i32,
    /// Payload bytes of claimed receipts held at once (as accepted; decoded payloads take
    /// a few times more). A larger receipt is claimed alone when nothing else is in flight.
    #[arg(long, env = "INBOUND_PAYLOAD_BUDGET_BYTES", default_value_t = 4 * 1024 * 1024)]
    pub payload_budget_bytes: usize,
    /// First retry delay.
    #[arg(long, env = "INBOUND_BACKOFF_BASE_MS", default_value_t = 1000)]
    pub backoff_base_ms: u64,
    /// Longest retry delay.
    #[arg(long, env = "INBOUND_BACKOFF_CAP_SECS", default_value_t = 600)]
    pub backoff_cap_secs: u64,
    /// Claim only these integrations (repeat the flag); all when absent.
    #[arg(
        long = "integration",
        env = "INBOUND_INTEGRATIONS",
        value_delimiter = ','
    )]
    pub integrations: Vec<String>,
    /// Identifies this worker in `receipt_queue.leased_by`.
    #[arg(long, env = "INBOUND_WORKER_ID")]
    pub worker_id: Option<String>,
}

impl WorkerArgs {
    /// The claiming and retry policy these flags describe, or the flag out of its range
    /// (one line naming it: the process exits 1).
    pub fn settings(&self) -> anyhow::Result<WorkerSettings> {
        let mut builder = WorkerSettings::builder()
            .concurrency(self.concurrency)
            .batch_size(self.batch_size)
            .effect_concurrency(self.effect_concurrency)
            .lease(Duration::from_secs(self.lease_secs))
            .statement_timeout(self.common.statement_timeout())
            .acquire_timeout(self.common.acquire_timeout())
            .poll_interval(Duration::from_millis(self.poll_interval_ms))
            .max_attempts(self.max_attempts)
            .payload_budget_bytes(self.payload_budget_bytes)
            .backoff_base(Duration::from_millis(self.backoff_base_ms))
            .backoff_cap(Duration::from_secs(self.backoff_cap_secs))
            .integrations((!self.integrations.is_empty()).then(|| self.integrations.clone()))
            .shutdown_grace(self.common.shutdown_grace())
            .gauge_interval(self.common.gauge_interval())
            .role(self.role)
            .session(self.common.session_target());
        if let Some(worker_id) = &self.worker_id {
            builder = builder.worker_id(worker_id.clone());
        }
        builder.build().map_err(|invalid| {
            // The flags that set a duration in other units say so in their name.
            let flag = match invalid.setting {
                "lease" => "--lease-secs must be between 1 and 86400".to_owned(),
                "backoff_base" => "--backoff-base-ms must be at least 1".to_owned(),
                "backoff_cap" => {
                    "--backoff-cap-secs must be between 1 and 3600 and at least --backoff-base-ms"
                        .to_owned()
                }
                "poll_interval" => "--poll-interval-ms must be between 1 and 60000".to_owned(),
                "statement_timeout" => {
                    "--db-statement-timeout-ms must be between 1 and 3600000".to_owned()
                }
                "acquire_timeout" => {
                    "--db-acquire-timeout-ms must be between 1 and 60000".to_owned()
                }
                "shutdown_grace" => "--shutdown-grace-secs must be at most 3600".to_owned(),
                _ => invalid.as_flag(),
            };
            anyhow::anyhow!(flag)
        })
    }
}
