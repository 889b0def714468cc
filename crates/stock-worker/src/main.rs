//! `inbound-worker`: the stock worker — inbound's built-in handlers plus the reference
//! domain of `inbound-example`. A team's own worker is the same line with its handlers.

fn main() -> std::process::ExitCode {
    inbound_worker::main(|worker| {
        worker
            .register(inbound_example::register)
            .migrations(inbound_example::SCHEMA, &inbound_example::MIGRATOR)
    })
}
