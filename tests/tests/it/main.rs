//! The workspace's integration suites, one module each, in one test binary: the dependencies
//! are compiled and linked once, not once per suite. Each suite drives the real binaries
//! against real PostgreSQL (a fresh database per test); `tests/src` is their shared kit.

mod abuse;
mod architecture;
mod console;
mod console_browser;
mod crash;
mod ctl;
mod database_in_production;
mod database_outage;
mod durability;
mod effects_dispatch;
mod effects_hostile_sinks;
mod example_day;
mod group_commit;
mod hardening;
mod history;
mod hostile_receipts;
mod local_setup;
mod migrations;
mod observability;
mod operator_tool;
mod real_senders;
mod recovery;
mod server_restart;
mod silent_database;
mod states;
mod status_table;
mod storability;
mod subjects;
mod testing_kit;
mod worker_e2e;
mod worker_handlers;
