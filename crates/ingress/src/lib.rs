//! `inbound-ingress`: the thin HTTP receiver. It verifies, validates, commits a pending
//! receipt and only then answers 2xx. No business logic, no outbound calls.
//!
//! - [`server`]: the hyper accept loop (connection limit, timeouts, graceful drain).
//! - [`app`]: routing of paths and methods, health endpoints.
//! - [`receive`]: the `POST /webhooks/{integration}` pipeline.
//! - [`reply`]: every outcome, mapped to its status and body in one place.
//! - [`telemetry`]: metric names, the Prometheus recorder and log set-up.
//! - [`failpoint`]: deterministic crash points for the crash-table tests (feature-gated).

pub mod app;
pub mod failpoint;
pub mod receive;
pub mod reply;
pub mod server;
pub mod telemetry;

pub use app::{App, AppSettings};
pub use server::{ServerLimits, serve};
