//! The short chaos soak: the `make soak` run at a size that fits beside the rest of the
//! suite (two ingress, two workers, a worker SIGKILLed every 2 s, a 2 s database outage,
//! every process replaced in turn by a rolling restart), and its variants: through a
//! transaction pooler, and with the outage a failover to a standby.
//! Every "must be 0" column must be 0, and the run must actually have seen 2xx, 503 and
//! kills.

use inbound_programs::soak::{self, Replication, SoakOptions, SoakReport};

/// Prints the summary line and fails on any "must be 0" column that is not.
fn assert_every_promise_kept(report: &SoakReport) {
    println!("{}", report.summary());
    let violations = report.violations();
    assert!(
        violations.is_empty(),
        "{}: {violations:#?}",
        report.summary()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn short_chaos_soak_keeps_every_promise() {
    let options = SoakOptions::short();
    let report = soak::run(&options).await;
    assert_every_promise_kept(&report);
    // The rolling deploy replaced every process, each exiting 0 on SIGTERM.
    assert_eq!(
        report.rolling_restarts,
        (options.ingresses + options.workers) as u64,
        "{}",
        report.summary()
    );
}

/// The same soak through PgBouncer 1.18 in `pool_mode = transaction` (`--db-pooler
/// transaction`), the pooler restarted once mid-load besides the outage: the ingress, the
/// worker and its dispatcher keep every promise, each logged in as its own role.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn short_chaos_soak_through_a_transaction_pooler_keeps_every_promise() {
    let report = soak::run(&SoakOptions {
        pooler: true,
        ..SoakOptions::short()
    })
    .await;
    assert_every_promise_kept(&report);
    assert_eq!(report.pooler_restarts, 1, "{}", report.summary());
}

/// The audit's duplicate count cannot be cancelled by another error: an order paid twice
/// and an order paid without its applied receipt add up, where a plain difference of
/// totals (two applied payments, two paid orders) would show nothing.
#[tokio::test]
async fn the_audit_sees_a_double_payment_hidden_behind_a_missing_one() {
    use inbound_tests::{TestDatabase, domain};
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config();
    domain::seed_order(pool, "o1", "pi_1", 1000, "usd").await;
    domain::seed_order(pool, "o2", "pi_2", 1000, "usd").await;
    let mut applied = Vec::new();
    for event_id in ["evt_a", "evt_b"] {
        let object = domain::payment_intent("pi_1", "o1", 1000, "usd", "succeeded");
        applied.push(
            domain::accept_event(pool, &config, event_id, "payment_intent.succeeded", object).await,
        );
    }
    sqlx::query("DELETE FROM receipt_queue")
        .execute(pool)
        .await
        .expect("dequeue");
    sqlx::query("UPDATE receipts SET status = 'done', outcome = 'applied', finished_at = now()")
        .execute(pool)
        .await
        .expect("applied twice");
    sqlx::query(
        "UPDATE orders SET status = 'paid', paid_receipt_id = CASE id WHEN 'o1' THEN $1 END",
    )
    .bind(applied[0])
    .execute(pool)
    .await
    .expect("both paid");
    let audit = inbound_tests::audit::audit(pool, &[]).await;
    assert_eq!(audit.duplicate_transitions, 2, "{audit:?}");
}

/// Failover loses no acknowledged receipt with a synchronous standby: mid-load the primary
/// is killed (`pg_ctl stop -m immediate`), its standby promoted and the address the
/// processes use moved to it. Every 2xx answered before, during and after is there
/// afterwards, each order is paid once, nothing is stuck after lease + 30 s, and while no
/// primary answers the ingress says 503 (never 2xx) and recovers without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failover_to_a_synchronous_standby_loses_no_acknowledged_receipt() {
    let report = soak::run(&SoakOptions {
        failover: Some(Replication::Synchronous),
        ..SoakOptions::short()
    })
    .await;
    assert_every_promise_kept(&report);
}

/// The same failover with an asynchronous standby: reported, not asserted — the receipts
/// committed and acknowledged in the last moments before the crash that had not reached
/// the standby are lost (`acked_missing`), and the provider never sends them again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failover_to_an_asynchronous_standby_reports_what_it_lost() {
    let report = soak::run(&SoakOptions {
        failover: Some(Replication::Asynchronous),
        ..SoakOptions::short()
    })
    .await;
    println!(
        "asynchronous failover: {} acknowledged receipts lost of {} acknowledged; {}",
        report.audit.acked_missing,
        report.ok,
        report.summary()
    );
    assert!(
        report.ok > 0 && report.unavailable > 0,
        "{}",
        report.summary()
    );
}
