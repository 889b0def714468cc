//! `inbound-ingress`: verify, durably accept, answer — see [`inbound_ingress::main`].

fn main() -> std::process::ExitCode {
    inbound_ingress::main()
}
