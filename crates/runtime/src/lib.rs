//! `inbound-runtime`: the process runtime both binaries share and neither owns — flags,
//! serving, the ops port, logging, signals and the start-up session check.
//!
//! - [`args`]: the flags every binary shares (config, database, logging, drain).
//! - [`server`]: the hyper 1.x accept loop with limits and a graceful drain.
//! - [`http`]: the response body type and JSON responses.
//! - [`ops`]: `/metrics`, `/healthz` and `/readyz`, and the Prometheus recorder.
//! - [`database`]: a unit of database work, bounded on the client.
//! - [`queue_ages`]: the ages that page and scale, exported by workers and the ingress.
//! - [`process`]: a binary's runtime and exit code.
//! - [`logging`]: `--log-format json|text` and `RUST_LOG`.
//! - [`signals`]: SIGTERM/SIGINT as a future.
//! - [`usage`]: command lines parsed with usage lines that do not demand what the
//!   environment gives.
//! - [`sessions`]: the start-up check that `--db-pooler` matches the database URL.
//! - [`failpoint`]: crash points for the crash-table tests (feature `failpoints`).
//!
//! # Errors
//!
//! Start-up failures (binding, the recorder, a session check that cannot run) are
//! `anyhow` errors with context, printed once by [`process`] before exit 1. A session
//! check that finds the wrong pooler mode is a refusal naming the fix, which drains the
//! process. A connection's own failure (a slow or broken client) is logged and costs only
//! that connection.

pub mod args;
pub mod database;
pub mod failpoint;
pub mod http;
pub mod logging;
pub mod ops;
pub mod process;
pub mod process_metrics;
pub mod queue_ages;
pub mod server;
pub mod sessions;
pub mod signals;
pub mod usage;

pub use server::{Drain, ServerLimits, serve};
