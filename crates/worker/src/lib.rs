//! `inbound-worker`: claims accepted receipts with leases and applies each business
//! transition exactly once.
//!
//! What an embedder uses: [`main`] and [`WorkerBuilder`] (from [`Worker::builder`]) —
//! the stock binary (`inbound-stock-worker`) and a team's own worker are each a few lines
//! over them — the flags ([`WorkerArgs`], [`Role`]), [`run`] for a [`Worker`] built by
//! hand, and, with the feature `testing`, the kit for a team's handler tests. The modules
//! behind them are private:
//!
//! - `app`: the builder and the process's start; `args`: the flags.
//! - `runner`: the claim loops (receipts, effects), their concurrency and drain.
//! - `process`: a batch of claimed receipts completed in one transaction (rerun with a
//!   savepoint each after a failure): the fenced business transition and how each outcome
//!   (applied, duplicate, ignored, quarantined, transient, lease lost) is recorded.
//! - `dispatcher`: the effects dispatcher — one effect, one step: deliver, judge a lost
//!   attempt, or reconcile; `dispatcher::recorder`: delivery outcomes group-committed on
//!   a connection of its own; `dispatcher::sinks`: each sink's share of the effect
//!   slots and its circuit breaker. `--role effects` runs only this.
//! - `backoff`: exponential backoff with jitter.
//! - `gauges`: queue gauges refreshed from index-backed queries.
//! - `migrate`: `<worker> migrate`: inbound's migrations and the team's the worker
//!   carries ([`WorkerBuilder::migrations`]), then the roles.
//! - `telemetry`: metric names, HELP text and buckets.
//! - `testing` (feature `testing`): the kit for a team's handler tests — a scratch
//!   database with inbound's and the team's migrations, ingress and worker in-process,
//!   signed sends, waiting for an outcome, a direct `apply`.
//!
//! # Errors
//!
//! - `anyhow` only at the process's edge ([`main`], [`Worker::builder`]): start-up
//!   failures (configuration, routes no handler takes, the pool, the ops port) with their
//!   context, printed once, exit 1.
//! - In the loops an error is a value that decides a fate, never a string passed along:
//!   a handler's `HandlerError` or a database error rolls the batch back and retries the
//!   receipt with backoff (`transient`); a `Transition::Quarantine` is permanent; the
//!   dispatcher's `Delivery` and `Reconciliation` classify every answer and failure of a
//!   sink, and `dispatcher::recorder::NotRecorded` crosses from the recorder task.
//! - What reaches people: one log line per attempt or step with the ids and the error,
//!   and the bounded `last_error` / `outcome_reason` of the row (`inboundctl show`).

mod app;
mod args;
mod backoff;
mod dispatcher;
mod gauges;
mod migrate;
mod process;
mod runner;
mod telemetry;
#[cfg(feature = "testing")]
pub mod testing;

/// The steps the workspace's own tests drive the worker through one at a time. Not part
/// of the API: hidden from the documentation, and may change in any release.
#[doc(hidden)]
pub mod test_hooks {
    pub use crate::app::check_routes;
    pub use crate::dispatcher::recorder::Recorder;
    pub use crate::dispatcher::sinks::SinkGates;
    pub use crate::dispatcher::{Step, http_client, sink_claims};
    pub use crate::gauges::refresh;
    pub use crate::process::{Attempt, MAX_REASON_BYTES, process, process_batch};
    pub use crate::runner::{Round, dispatch_once, run_once};
}

use std::sync::Arc;
use std::time::Duration;

use inbound_core::config::Config;
use inbound_store as store;
use inbound_store::handlers::Registry;
use sqlx::PgPool;
use tokio::sync::Semaphore;

use crate::dispatcher::sinks::SinkGates;

pub use app::{WorkerBuilder, main};
pub use args::{Role, WorkerArgs};
pub use runner::run;

/// The largest `batch_size`: a batch rerun with a savepoint per receipt stays within
/// PostgreSQL's per-backend cache of 64 subtransactions (overflowing it slows every
/// snapshot in the cluster).
pub const MAX_BATCH_SIZE: usize = 64;

/// A sink's share of the effect slots when its configuration names none: half of
/// `--effect-concurrency` (at least one), so that one slow or hanging sink leaves the
/// other half to the rest.
pub fn default_sink_concurrency(effect_concurrency: usize) -> usize {
    (effect_concurrency / 2).max(1)
}

/// How a worker claims and retries.
#[derive(Debug, Clone)]
pub struct WorkerSettings {
    /// Business transactions in flight at once.
    pub concurrency: usize,
    /// Most receipts completed in one business transaction (≤ [`MAX_BATCH_SIZE`]).
    pub batch_size: usize,
    /// Effects delivered or reconciled at once.
    pub effect_concurrency: usize,
    /// How long a claim is held before another worker may take it over; also the longest
    /// a business transaction may wait on the database before it is given up.
    pub lease: Duration,
    /// The longest one statement (a claim, a recording, a refresh of the gauges) waits on
    /// the database: the server's statement timeout and a margin.
    pub statement_limit: Duration,
    /// Sleep between claims when there is nothing to do.
    pub poll_interval: Duration,
    /// Attempts before a receipt is `failed` (and the budget of an effect's resends after
    /// an attempt that may have landed). The
    /// claim enforces it too: a receipt whose attempts are spent without an outcome (its
    /// worker died each time) is failed instead of claimed again.
    pub max_attempts: i32,
    /// Payload bytes of claimed receipts held at once, all batches together (counted as
    /// accepted; decoded payloads take a few times more). A single larger receipt is
    /// claimed alone when nothing else is in flight.
    pub payload_budget_bytes: usize,
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
    /// Which claim loops run: receipts, effects, or both.
    pub role: Role,
    /// inbound's schema and how sessions reach the database (for connections the worker
    /// opens beside its pool).
    pub session: inbound_store::SessionTarget,
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
    /// What is left of `settings.payload_budget_bytes`.
    payload_budget: Arc<Semaphore>,
    /// Each sink's slots and circuit breaker.
    sink_gates: SinkGates,
    /// The time its statements compare with (the database's, unless a test moves it).
    pub clock: Arc<store::StatementClock>,
}

impl Worker {
    /// A worker over `pool` with its configuration, handlers and policy.
    pub fn new(
        pool: PgPool,
        config: Arc<Config>,
        registry: Registry,
        settings: WorkerSettings,
    ) -> Self {
        let budget = settings
            .payload_budget_bytes
            .clamp(1, Semaphore::MAX_PERMITS);
        let sink_gates = SinkGates::new(
            &config,
            default_sink_concurrency(settings.effect_concurrency),
        );
        Self {
            pool,
            config,
            registry,
            settings,
            payload_budget: Arc::new(Semaphore::new(budget)),
            sink_gates,
            clock: Arc::default(),
        }
    }

    /// Each sink's slots and circuit breaker.
    pub fn sink_gates(&self) -> &SinkGates {
        &self.sink_gates
    }

    /// The payload bytes claimed receipts may still take.
    pub(crate) fn payload_budget(&self) -> &Arc<Semaphore> {
        &self.payload_budget
    }
}
