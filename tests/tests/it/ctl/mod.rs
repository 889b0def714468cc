//! `inboundctl` through the real binary, a module per command family: `check-config`,
//! `migrate`, `sign-event`, `receipts`, `effects` and `dev-sink`. The helpers here run the
//! binary and read what it prints.

use sqlx::ConnectOptions;
use std::process::{Command, Output};

use inbound_core::states::ReceiptStatus;
use inbound_tests::config::ConfigEdit;
use inbound_tests::ctl::{Inboundctl, words};
use inbound_tests::database::{admin_url, with_database};
use inbound_tests::fixtures;
use inbound_tests::process::{ScratchDir, binary};
use inbound_tests::{Stack, TestDatabase};

mod check_config;
mod dev_sink;
mod effects;
mod migrate;
mod receipts;
mod sign_event;
mod subject;

/// Runs inboundctl with `env` alone on top of a clean environment (no fixture secrets:
/// these tests say which secrets exist).
fn inboundctl(args: &[&str], env: &[(String, String)]) -> Output {
    Inboundctl::new().envs(env).run(args)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Writes the test configuration, edited by `edit`, into `scratch`.
fn write_config(scratch: &ScratchDir, edit: impl FnOnce(&mut ConfigEdit)) -> String {
    let mut config = fixtures::config_edit();
    edit(&mut config);
    fixtures::write_config(&config, scratch)
}

fn json_of(output: Output) -> serde_json::Value {
    assert!(output.status.success(), "{}", text(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("JSON")
}
