//! The worker's transitions, driven in process step by step (`run_once`) against a real
//! database: every classification of `orders.mark_paid`, refunds, grants, ordering,
//! fencing, backoff, replay and purge.

use std::time::Duration;

use inbound_core::states::{ReceiptOutcome, ReceiptStatus};
use inbound_example::ORDERS_MARK_PAID;
use inbound_store::handlers::{Handler, HandlerError, HandlerInput, RegisteredHandler, Transition};
use inbound_store::{admin, clock, queue};
use inbound_tests::TestDatabase;
use inbound_tests::domain::{self, charge, invoice, payment_intent, stripe_event};
use inbound_worker::test_hooks::{Attempt, process, process_batch};
use inbound_worker::test_hooks::{Round, run_once};

mod classification;
mod entitlements;
mod leases_and_batches;
mod payments;
mod refunds;
mod replay_and_purge;

async fn step(worker: &std::sync::Arc<inbound_worker::Worker>) -> Vec<Attempt> {
    match run_once(worker).await.expect("run_once") {
        Round::Processed(attempts) => attempts,
        Round::Idle => Vec::new(),
    }
}

fn succeeded(event_id: &str, payment: &str, order: &str, amount: i64, currency: &str) -> String {
    stripe_event(
        event_id,
        "payment_intent.succeeded",
        payment_intent(payment, order, amount, currency, "succeeded"),
    )
}

/// Accepts a new `payment_intent.succeeded` event; returns its receipt id.
async fn accept_succeeded(
    pool: &sqlx::PgPool,
    config: &inbound_core::config::Config,
    event_id: &str,
    payment: &str,
    order: &str,
    amount: i64,
    currency: &str,
) -> i64 {
    let object = payment_intent(payment, order, amount, currency, "succeeded");
    domain::accept_event(pool, config, event_id, "payment_intent.succeeded", object).await
}

/// Accepts a `charge.refunded` of `payment` (`refunded` of `amount` minor units).
async fn accept_refund(
    pool: &sqlx::PgPool,
    config: &inbound_core::config::Config,
    event_id: &str,
    payment: &str,
    amount: i64,
    refunded: i64,
) -> i64 {
    domain::accept_event(
        pool,
        config,
        event_id,
        "charge.refunded",
        charge(payment, amount, refunded),
    )
    .await
}

/// Waits until some session of this database waits for a lock (10 s at most), panicking
/// with `never` otherwise: a racing step has reached the row or advisory lock the test holds.
async fn wait_for_a_lock_wait(pool: &sqlx::PgPool, never: &str) {
    inbound_tests::eventually(never, Duration::from_secs(10), async || {
        let blocked: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity
             WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .fetch_one(pool)
        .await
        .expect("activity");
        (blocked > 0).then_some(())
    })
    .await;
}

/// Orders `o1`–`o3`, each awaiting 1000 usd through `pi_1`–`pi_3`.
async fn seed_three_orders(pool: &sqlx::PgPool) {
    for (order, payment) in [("o1", "pi_1"), ("o2", "pi_2"), ("o3", "pi_3")] {
        domain::seed_order(pool, order, payment, 1000, "usd").await;
    }
}

/// Claims every visible receipt (up to 10) as one batch, the way one worker slot would.
async fn claim_all(pool: &sqlx::PgPool) -> Vec<queue::ClaimedReceipt> {
    let mut connection = pool.acquire().await.expect("conn");
    domain::claim(&mut connection, 10, Duration::from_secs(30), "w").await
}

/// An in-process worker whose first retry waits a minute: long enough that a receipt is
/// still backing off when a test inspects it.
fn slowly_retrying_worker(pool: &sqlx::PgPool) -> std::sync::Arc<inbound_worker::Worker> {
    let settings = domain::settings_with(|settings| {
        settings
            .backoff_base(Duration::from_secs(60))
            .backoff_cap(Duration::from_secs(600))
    });
    domain::worker(pool, settings)
}

/// A receipt's detail, as an operator reads it.
async fn receipt_detail(pool: &sqlx::PgPool, receipt: i64) -> admin::ReceiptDetail {
    admin::receipt_detail(
        &mut pool.acquire().await.expect("conn"),
        inbound_core::keys::ReceiptId(receipt),
    )
    .await
    .expect("query")
    .expect("row")
}
