//! The team's worker: inbound's flags, metrics, ops port, dispatcher and drain, with one
//! handler of its own and its migrations (`custom-worker migrate`).

fn main() -> std::process::ExitCode {
    inbound_worker::main(custom_worker::configure)
}
