//! The team's worker: inbound's flags, metrics, ops port, dispatcher and drain, with one
//! handler of its own.

use custom_worker::{SUBSCRIPTIONS_SYNC, handler};

fn main() -> std::process::ExitCode {
    inbound_worker::main(|worker| worker.handler(SUBSCRIPTIONS_SYNC, handler()))
}
