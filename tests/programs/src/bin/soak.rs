//! `inbound-soak`: the chaos soak (`make soak`). Runs the real binaries against the server
//! at `DATABASE_URL` (a fresh database, dropped afterwards), prints one summary line, and
//! exits non-zero when any "must be 0" column is not.

use std::time::Duration;

use clap::Parser;
use inbound_programs::soak::{self, SoakOptions};

#[derive(Debug, Parser)]
struct Args {
    /// How long the load runs, in seconds (the final drain and checks are extra).
    #[arg(long, default_value_t = 60)]
    duration_secs: u64,
    /// Ingress processes.
    #[arg(long, default_value_t = 2)]
    ingresses: usize,
    /// Worker processes.
    #[arg(long, default_value_t = 3)]
    workers: usize,
    /// Concurrent HTTP senders.
    #[arg(long, default_value_t = 64)]
    connections: usize,
    /// Deliveries per second, all senders together.
    #[arg(long, default_value_t = 400)]
    rate: u32,
    /// Seconds between worker SIGKILLs.
    #[arg(long, default_value_t = 3)]
    kill_every_secs: u64,
    /// Seconds the database is cut away, once, mid-run.
    #[arg(long, default_value_t = 3)]
    outage_secs: u64,
    /// Through PgBouncer in transaction mode (`--db-pooler transaction`), restarted once.
    #[arg(long)]
    pooler: bool,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let options = SoakOptions {
        ingresses: args.ingresses.max(1),
        workers: args.workers.max(1),
        connections: args.connections.max(1),
        rate: args.rate.max(1),
        kill_every: Duration::from_secs(args.kill_every_secs.max(1)),
        outage: Duration::from_secs(args.outage_secs),
        pooler: args.pooler,
        ..SoakOptions::full(Duration::from_secs(args.duration_secs.max(4)))
    };
    let report = soak::run(&options).await;
    println!("{}", report.summary());
    let violations = report.violations();
    for violation in &violations {
        eprintln!("soak: {violation}");
    }
    if violations.is_empty() {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    }
}
