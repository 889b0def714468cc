//! `inbound-ingress`: the thin HTTP receiver. It verifies, validates, commits a pending
//! receipt and only then answers 2xx. No business logic, no outbound calls.
//!
//! What an embedder uses: [`start`], which runs the ingress from values — a
//! [`Config`](inbound_core::config::Config), [`IngressSettings`], a database URL, an
//! already-bound listener and an optional [`OpsPort`] — and returns a [`RunningIngress`];
//! the whole process, [`main`], and its flags, [`IngressArgs`]. The modules behind them
//! are private:
//!
//! - `start`: the start from values, and the process; `args`: its flags; `settings`: the
//!   checked settings.
//! - `app`: routing of paths and methods, health endpoints.
//! - `receive`: the `POST /webhooks/{integration}` pipeline.
//! - `body`: request bodies read into one buffer within the limit and the shared budget.
//! - `group_commit`: concurrent receipts committed together, one statement per batch.
//! - `reply`: every outcome, mapped to its status and body in one place.
//! - `verification`: where signatures are checked: inline, or off the async threads
//!   when a forged request could cost more than about a millisecond.
//! - `telemetry`: metric names, HELP text and buckets.
//! - `log_budget`: how many lines a flood of refusals may write.
//!
//! # Errors
//!
//! Every outcome of a request is a `reply::Reply` variant, mapped to its status and
//! body in one place. What went wrong inside (a verifier's reason, the database's error,
//! a body read failure: `body::BodyError`, `group_commit::CommitError`) goes to the
//! request's log line as `reason`, never into the body (401 says nothing more; 400
//! says which rule). `anyhow` is used only at start-up, where the context chain is
//! printed once and the process exits 1.

mod app;
mod args;
mod body;
mod group_commit;
mod log_budget;
mod receive;
mod reply;
mod settings;
mod start;
mod telemetry;
mod verification;

pub use args::IngressArgs;
pub use inbound_runtime::ops::OpsPort;
pub use settings::{IngressSettings, IngressSettingsBuilder, InvalidSetting};
pub use start::{RunningIngress, main, start};
/// Installs the process's Prometheus recorder with the ingress's buckets and HELP text and
/// returns the handle an [`OpsPort`] renders `/metrics` with — for an embedding that
/// serves the ops port itself. [`main`] does it for the binary; a later call in the same
/// process returns the recorder installed first.
pub use telemetry::install_metrics as install_metrics_recorder;

/// The parts the workspace's own tests drive directly. Not part of the API: hidden from
/// the documentation, and may change in any release.
#[doc(hidden)]
pub mod test_hooks {
    pub use crate::body::{BodyBudget, read_body};
    pub use crate::group_commit::{CommitError, CommitPayload, GroupCommit, GroupCommitSettings};
}
