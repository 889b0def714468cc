//! `inbound-ingress`: the thin HTTP receiver. It verifies, validates, commits a pending
//! receipt and only then answers 2xx. No business logic, no outbound calls.
//!
//! - [`start`]: the whole process as a library ([`main`], [`run`]); [`args`]: its flags.
//! - [`app`]: routing of paths and methods, health endpoints.
//! - [`receive`]: the `POST /webhooks/{integration}` pipeline.
//! - [`body`]: request bodies read into one buffer within the limit and the shared budget.
//! - [`group_commit`]: concurrent receipts committed together, one statement per batch.
//! - [`reply`]: every outcome, mapped to its status and body in one place.
//! - [`verification`]: where signatures are checked: inline, or off the async threads
//!   when a forged request could cost more than about a millisecond.
//! - [`telemetry`]: metric names, HELP text and buckets.
//! - [`log_budget`]: how many lines a flood of refusals may write.
//!
//! # Errors
//!
//! Every outcome of a request is a [`reply::Reply`] variant, mapped to its status and
//! body in one place. What went wrong inside (a verifier's reason, the database's error,
//! a body read failure: `body::BodyError`, `group_commit::CommitError`) goes to the
//! request's log line as `reason`, never into the body (401 says nothing more; 400
//! says which rule). `anyhow` is used only at start-up, where the context chain is
//! printed once and the process exits 1.

pub mod app;
pub mod args;
pub mod body;
pub mod group_commit;
pub mod log_budget;
pub mod receive;
pub mod reply;
pub mod start;
pub mod telemetry;
pub mod verification;

pub use app::{App, AppSettings};
pub use args::IngressArgs;
pub use start::{main, run};
