//! Test support for the end-to-end suites: a fresh migrated database per test, the real
//! binaries started as child processes (with their logs captured), a small HTTP client,
//! provider signers, a TCP proxy that can cut the database away, and a private PostgreSQL
//! server that a test may crash and restart.
//!
//! Binaries are taken from the workspace's target directory (`make test` builds them
//! first, with the `failpoints` feature); `INBOUND_BIN_DIR` overrides the location.

pub mod audit;
pub mod cluster;
pub mod database;
pub mod dispatcher;
pub mod domain;
pub mod fixtures;
pub mod http;
pub mod pgbouncer;
pub mod process;
pub mod proxy;
pub mod signing;
pub mod sink;

pub use database::TestDatabase;
pub use process::{Service, ServiceOptions};
