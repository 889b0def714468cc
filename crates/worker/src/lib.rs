//! `inbound-worker`: claims accepted receipts with leases and applies each business
//! transition exactly once.
//!
//! The one inbound crate a team's worker depends on. What it uses: the handler model
//! ([`handlers`]), [`main`] — the whole process, a few lines in a team's `main.rs` — and
//! [`WorkerBuilder`], which registers handlers and migrations and
//! [starts](WorkerBuilder::start) a worker from values (a [`Config`], [`WorkerSettings`], a
//! database URL, an optional ops port) into a [`RunningWorker`]; [`run`] for a [`Worker`]
//! built by hand; the flags ([`WorkerArgs`], [`Role`]) for a process; and, with the feature
//! `testing`, the kit for a team's handler tests. The modules behind them are private:
//!
//! - `app`: the builder, the start from values, and the process; `args`: the flags;
//!   `settings`: the checked settings.
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
//! - A setting out of its range is an [`InvalidSetting`], refused when the settings are
//!   built. `anyhow` only at the process's edge ([`main`], [`WorkerBuilder::start`]):
//!   start-up failures (configuration, routes no handler takes, the pool) with their
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

use inbound_store as store;
use sqlx::PgPool;
use tokio::sync::Semaphore;

use crate::dispatcher::sinks::SinkGates;

pub use app::{RunningWorker, WorkerBuilder, main};
pub use args::{Role, WorkerArgs};
pub use runner::run;
pub use settings::{InvalidSetting, WorkerSettings, WorkerSettingsBuilder};

/// The handler model a team implements and registers: [`Handler`](handlers::Handler),
/// the [`Transition`](handlers::Transition) it returns, [`HandlerError`](handlers::HandlerError),
/// effect intents, the [`Registry`](handlers::Registry), the built-in `forward` and the
/// [`StripeHandler`](handlers::StripeHandler) guard. Re-exported from `inbound-store`, so
/// a team's worker depends on this crate alone.
pub mod handlers {
    pub use inbound_store::handlers::*;
}

/// The configuration a worker and its handlers read, and the providers it names.
pub use inbound_core::config::{Config, ConfigError, Integration};
/// Where a receipt stands and how it ended (what the testing kit's `Outcome` reports).
pub use inbound_core::states::{ReceiptOutcome, ReceiptStatus};
pub use inbound_core::verify::Provider;
/// The ops port [`WorkerBuilder::start`] serves when given one: a bound listener and the
/// handle of the recorder the process installed.
pub use inbound_runtime::ops::OpsPort;
/// Where a worker's sessions connect: inbound's schema, and whether a transaction
/// pooler is in between.
pub use inbound_store::{Pooler, Schema, SessionTarget};
/// Installs the process's Prometheus recorder with the worker's buckets and HELP text and
/// returns the handle an [`OpsPort`] renders `/metrics` with — for an embedding that
/// serves the ops port itself. [`main`] does it for a worker's binary; a later call in the
/// same process returns the recorder installed first.
pub use telemetry::install_metrics as install_metrics_recorder;

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

mod settings;

/// Everything a worker needs, shared by its tasks: the pool, the validated
/// configuration, the handlers by route name and the settings. Built with
/// [`Worker::new`]; run with [`run`], or as a process with [`WorkerBuilder::start`].
pub struct Worker {
    pub(crate) pool: PgPool,
    pub(crate) config: Arc<Config>,
    pub(crate) registry: handlers::Registry,
    pub(crate) settings: WorkerSettings,
    /// What is left of `settings.payload_budget_bytes`.
    payload_budget: Arc<Semaphore>,
    /// Each sink's slots and circuit breaker.
    sink_gates: SinkGates,
    /// The time its statements compare with (the database's, unless a test moves it).
    pub(crate) clock: Arc<store::StatementClock>,
    /// Where its next claim resumes the walk over ordered subjects.
    pub(crate) subject_cursor: std::sync::Mutex<store::queue::SubjectCursor>,
}

impl Worker {
    /// A worker over `pool` with its configuration, handlers and settings. The
    /// configuration's routes are checked against the handlers by [`WorkerBuilder`]; a
    /// worker built by hand runs whatever routes name.
    pub fn new(
        pool: PgPool,
        config: Arc<Config>,
        registry: handlers::Registry,
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
            subject_cursor: std::sync::Mutex::default(),
        }
    }

    /// Where the next claim resumes its walk over ordered subjects.
    pub(crate) fn subject_cursor(&self) -> store::queue::SubjectCursor {
        self.subject_cursor
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Moves the walk past the subjects `claim` took.
    pub(crate) fn advance_subject_cursor(&self, claim: &store::queue::Claim) {
        self.subject_cursor
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .advance(claim);
    }

    /// The database.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// The validated configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The handlers by route name.
    pub fn registry(&self) -> &handlers::Registry {
        &self.registry
    }

    /// How it claims and retries.
    pub fn settings(&self) -> &WorkerSettings {
        &self.settings
    }

    /// Each sink's slots and circuit breaker (the workspace's tests).
    #[doc(hidden)]
    pub fn sink_gates(&self) -> &SinkGates {
        &self.sink_gates
    }

    /// The clock its statements compare with, which the workspace's tests move.
    #[doc(hidden)]
    pub fn clock(&self) -> &Arc<store::StatementClock> {
        &self.clock
    }

    /// The payload bytes claimed receipts may still take.
    pub(crate) fn payload_budget(&self) -> &Arc<Semaphore> {
        &self.payload_budget
    }
}
