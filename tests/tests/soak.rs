//! The short chaos soak: the `make soak` run at a size that fits beside the rest of the
//! suite (two ingress, two workers, a worker SIGKILLed every 2 s, a 2 s database outage).
//! Every "must be 0" column must be 0, and the run must actually have seen 2xx, 503 and
//! kills.

use inbound_tests::soak::{self, SoakOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn short_chaos_soak_keeps_every_promise() {
    let report = soak::run(&SoakOptions::short()).await;
    println!("{}", report.summary());
    let violations = report.violations();
    assert!(
        violations.is_empty(),
        "{}: {violations:#?}",
        report.summary()
    );
}
