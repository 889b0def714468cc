//! `inbound-worker`: claims accepted receipts with leases and applies each business
//! transition exactly once.
//!
//! - [`runner`]: the claim loops (receipts, effects), their concurrency and drain.
//! - [`process`]: a batch of claimed receipts completed in one transaction (rerun with a
//!   savepoint each after a failure): the fenced business transition and how each outcome
//!   (applied, duplicate, ignored, quarantined, transient, lease lost) is recorded.
//! - [`dispatch`]: one effect, one step: deliver, judge a lost attempt, or reconcile.
//! - [`recorder`]: delivery outcomes group-committed, one statement for all waiting.
//! - [`backoff`]: exponential backoff with jitter.
//! - [`gauges`]: queue gauges refreshed from index-backed queries.
//! - [`telemetry`]: metric names, HELP text and buckets.

pub mod backoff;
pub mod dispatch;
pub mod gauges;
pub mod process;
pub mod recorder;
pub mod runner;
pub mod telemetry;

use std::sync::Arc;
use std::time::Duration;

use inbound_core::config::Config;
use inbound_core::handlers::Registry;
use sqlx::PgPool;

pub use runner::{Step, dispatch_once, run, run_once};

/// The largest `batch_size`: a batch rerun with a savepoint per receipt stays within
/// PostgreSQL's per-backend cache of 64 subtransactions (overflowing it slows every
/// snapshot in the cluster).
pub const MAX_BATCH_SIZE: usize = 64;

/// How a worker claims and retries.
#[derive(Debug, Clone)]
pub struct WorkerSettings {
    /// Business transactions in flight at once.
    pub concurrency: usize,
    /// Most receipts completed in one business transaction (≤ [`MAX_BATCH_SIZE`]).
    pub batch_size: usize,
    /// Effects delivered or reconciled at once.
    pub effect_concurrency: usize,
    /// How long a claim is held before another worker may take it over.
    pub lease: Duration,
    /// Sleep between claims when there is nothing to do.
    pub poll_interval: Duration,
    /// Attempts before a receipt is `failed` (and the budget of safe effect retries).
    pub max_attempts: i32,
    /// First retry delay.
    pub backoff_base: Duration,
    /// Longest retry delay.
    pub backoff_cap: Duration,
    /// Written to `receipt_queue.leased_by`.
    pub worker_id: String,
    /// Claim only these integrations (`None`: all).
    pub integrations: Option<Vec<String>>,
    /// How long in-flight transitions may take to finish after shutdown begins.
    pub shutdown_grace: Duration,
}

/// Everything a worker needs, shared by its tasks.
pub struct Worker {
    /// The database.
    pub pool: PgPool,
    /// The validated configuration.
    pub config: Arc<Config>,
    /// Handlers by route name.
    pub registry: Registry,
    /// Claiming and retry policy.
    pub settings: WorkerSettings,
}
