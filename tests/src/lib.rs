//! Test support for the end-to-end suites. One harness for a running stack, [`Stack`] (a
//! fresh migrated database, the real ingress and perhaps a worker as child processes with
//! their logs captured, optionally behind a proxy that cuts or stalls the database), and
//! one way to deliver a signed request, [`SignedRequest`] (built by the provider signers or
//! [`fixtures::Provider::request`]). Besides: the in-process dispatcher harness
//! ([`dispatcher::Harness`]), a test sink, the reference domain's helpers, PgBouncer, a
//! private PostgreSQL cluster a test may crash and restart, the audit of a run, and
//! [`eventually`], the one way to wait for a condition.
//!
//! Binaries are taken from the workspace's target directory (`make test` builds them
//! first, with the `failpoints` feature); `INBOUND_BIN_DIR` overrides the location.

pub mod audit;
pub mod browser;
pub mod cluster;
pub mod config;
pub mod console;
pub mod ctl;
pub mod database;
pub mod dispatcher;
pub mod domain;
pub mod fixtures;
pub mod github_api;
pub mod http;
pub mod local_server;
pub mod pgbouncer;
pub mod ports;
pub mod process;
pub mod proxy;
pub mod signing;
pub mod sink;
pub mod stack;
pub mod stripe_api;
pub mod wait;

pub use database::TestDatabase;
pub use process::{Service, ServiceOptions};
pub use signing::SignedRequest;
pub use stack::Stack;
pub use wait::eventually;
