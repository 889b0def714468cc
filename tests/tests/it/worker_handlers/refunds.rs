//! Refunds: applied once, never regressed, waiting for their payment, and a refund that
//! fails later (or whose failure arrives late) leaves the order as its payment left it.

use super::*;

/// Seeds order `o1` (PaymentIntent `pi_1`, unpaid) and accepts `evt_r1` refunding it in
/// full; returns the refund's receipt id.
async fn unpaid_order_with_a_full_refund(
    pool: &sqlx::PgPool,
    config: &inbound_core::config::Config,
) -> i64 {
    domain::seed_order(pool, "o1", "pi_1", 1000, "usd").await;
    domain::accept_event(
        pool,
        config,
        "evt_r1",
        "charge.refunded",
        charge("pi_1", 1000, 1000),
    )
    .await
}

/// Accepts a `charge.refunded` of `charge`; returns its receipt id.
async fn accept_refund_of(
    pool: &sqlx::PgPool,
    config: &inbound_core::config::Config,
    event_id: &str,
    charge: serde_json::Value,
) -> i64 {
    domain::accept_event(pool, config, event_id, "charge.refunded", charge).await
}

/// Stripe sends every PaymentIntent and Charge of the account: subscription renewals and
/// their refunds are no order's. They are ignored with their reason — never quarantined
/// (a person paged for each renewal) nor retried until `failed` — while a refund whose
/// payment is still waiting to be applied waits for it. (A refund of a payment nobody has
/// seen, and one of a quarantined payment: the two tests below.)
#[tokio::test]
async fn payments_and_refunds_of_no_order_are_ignored_and_a_refund_waits_only_for_a_pending_payment()
 {
    let fixture = domain::Fixture::new().await;
    let (pool, config) = (fixture.pool(), &fixture.config);
    let worker = slowly_retrying_worker(pool);
    let renewal = domain::accept_event(
        pool,
        config,
        "evt_renewal",
        "payment_intent.succeeded",
        serde_json::json!({
            "id": "pi_sub", "object": "payment_intent", "status": "succeeded",
            "amount_received": 2000, "currency": "usd", "invoice": "in_sub", "metadata": {}
        }),
    )
    .await;
    // The order is not created yet: its payment waits, and so will the refund behind it.
    let waiting_payment =
        accept_succeeded(pool, config, "evt_p_late", "pi_late", "o_late", 1000, "usd").await;
    step(&worker).await;
    // The refunds come once their payments were handled: a refund racing its payment in
    // another batch waits a backoff, then is judged again.
    // A subscription's charge names no order: on API versions from 2025-03-31 (basil) it
    // names no invoice either.
    let renewal_charge = charge("pi_sub", 2000, 2000);
    let renewal_refund = accept_refund_of(pool, config, "evt_renewal_refund", renewal_charge).await;
    let waiting_refund = accept_refund_of(
        pool,
        config,
        "evt_r_late",
        domain::order_charge("pi_late", "o_late", 1000, 1000),
    )
    .await;
    step(&worker).await;

    domain::assert_ended(
        pool,
        renewal,
        ReceiptStatus::Done,
        Some(ReceiptOutcome::Ignored),
        "no metadata.order_id",
    )
    .await;
    domain::assert_ended(
        pool,
        renewal_refund,
        ReceiptStatus::Done,
        Some(ReceiptOutcome::Ignored),
        "names no order",
    )
    .await;
    assert_eq!(
        domain::receipt_state(pool, waiting_payment).await.0,
        ReceiptStatus::Pending
    );
    assert_eq!(
        domain::receipt_state(pool, waiting_refund).await.0,
        ReceiptStatus::Pending
    );
}

/// A refund of an order's payment nobody has seen (its charge names the order; no
/// payment event yet) waits: the payment may come late, and must not then mark an order
/// paid that was refunded.
#[tokio::test]
async fn a_refund_of_an_orders_payment_nobody_has_seen_waits_for_the_payment() {
    let fixture = domain::Fixture::new().await;
    let (pool, config) = (fixture.pool(), &fixture.config);
    let worker = slowly_retrying_worker(pool);
    let unseen_charge = domain::order_charge("pi_unseen", "o_unseen", 1000, 1000);
    let unseen_refund = accept_refund_of(pool, config, "evt_r_unseen", unseen_charge).await;
    step(&worker).await;
    assert_eq!(
        domain::receipt_state(pool, unseen_refund).await.0,
        ReceiptStatus::Pending
    );
}

/// A double payment is quarantined; its refund settles it and is ignored, rather than
/// waiting for a payment that will not apply.
#[tokio::test]
async fn the_refund_of_a_quarantined_double_payment_settles_it_and_is_ignored() {
    let fixture = domain::Fixture::new().await;
    let (pool, config) = (fixture.pool(), &fixture.config);
    let worker = slowly_retrying_worker(pool);
    domain::seed_order(pool, "o_dbl", "pi_dbl_1", 1000, "usd").await;
    let double = accept_succeeded(pool, config, "evt_dbl", "pi_dbl_2", "o_dbl", 1000, "usd").await;
    step(&worker).await;
    assert_eq!(
        domain::receipt_state(pool, double).await.0,
        ReceiptStatus::Quarantined
    );
    let double_refund = accept_refund_of(
        pool,
        config,
        "evt_dbl_refund",
        domain::order_charge("pi_dbl_2", "o_dbl", 1000, 1000),
    )
    .await;
    step(&worker).await;
    domain::assert_ended(
        pool,
        double_refund,
        ReceiptStatus::Done,
        Some(ReceiptOutcome::Ignored),
        "quarantined or failed",
    )
    .await;
}

#[tokio::test]
async fn refunds_apply_once_never_regress_and_wait_for_the_payment() {
    let fixture = domain::Fixture::new().await;
    let (pool, config, worker) = (fixture.pool(), &fixture.config, fixture.worker());
    // The refund overtakes the payment: transient until the payment applies.
    let early_refund = unpaid_order_with_a_full_refund(pool, config).await;
    step(&worker).await;
    assert_eq!(
        domain::receipt_state(pool, early_refund).await.0,
        ReceiptStatus::Pending
    );
    accept_succeeded(pool, config, "evt_p1", "pi_1", "o1", 1000, "usd").await;
    step(&worker).await;
    assert_eq!(domain::order_status(pool, "o1").await, "paid");
    // Past the refund's backoff (at most the 2 s cap) on the worker's clock, rather than
    // sleeping through it.
    worker.clock().advance(Duration::from_secs(3));
    step(&worker).await;
    assert_eq!(
        domain::receipt_state(pool, early_refund).await,
        (ReceiptStatus::Done, Some(ReceiptOutcome::Applied), None)
    );
    assert_eq!(domain::order_status(pool, "o1").await, "refunded");

    let partial = accept_refund(pool, config, "evt_r2", "pi_1", 1000, 400).await;
    // The same full refund again, told by an event no later than the first (a later one
    // would be noted as the refund's latest time: applied, with no effect). An hour back,
    // so that the second the test crosses never decides it.
    let repeat = domain::accept(
        pool,
        config,
        &domain::stripe_event_at(
            "evt_r3",
            "charge.refunded",
            charge("pi_1", 1000, 1000),
            chrono::Utc::now().timestamp() - 3600,
        ),
    )
    .await
    .expect("a new receipt");
    let late_success = accept_succeeded(pool, config, "evt_p2", "pi_1", "o1", 1000, "usd").await;
    step(&worker).await;
    assert_eq!(
        domain::receipt_state(pool, partial).await.1,
        Some(ReceiptOutcome::Ignored)
    );
    assert_eq!(
        domain::receipt_state(pool, repeat).await.1,
        Some(ReceiptOutcome::Duplicate)
    );
    let (_, outcome, reason) = domain::receipt_state(pool, late_success).await;
    assert_eq!(
        outcome,
        Some(ReceiptOutcome::Duplicate),
        "succeeded after refunded never regresses"
    );
    assert!(reason.is_some_and(|reason| reason.contains("already refunded")));
    assert_eq!(domain::order_status(pool, "o1").await, "refunded");
    assert_eq!(
        domain::operation_keys(pool).await,
        ["order.paid:acme:o1:pi_1", "order.refunded:acme:o1:pi_1"]
    );
}

/// The payment commits in another transaction while the refund's transaction is between
/// its guarded UPDATE (which saw `awaiting_payment`) and its classification: the locked
/// read waits for that commit, sees `paid`, and the refund applies in the same attempt —
/// neither quarantined as "cannot be refunded" nor sent round a retry. The chaos soak
/// found this race.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refund_racing_its_payment_applies_in_the_same_attempt() {
    let fixture = domain::Fixture::new().await;
    let (pool, config, worker) = (fixture.pool(), &fixture.config, fixture.worker());
    let refund = unpaid_order_with_a_full_refund(pool, config).await;

    let mut payment = pool.begin().await.expect("begin");
    // As orders.mark_paid writes a payment (the refund checks the amount received).
    sqlx::query(
        "UPDATE orders SET status = 'paid', amount_received_minor = 1000, paid_receipt_id = 0,
                           paid_at = now()
         WHERE id = 'o1'",
    )
    .execute(&mut *payment)
    .await
    .expect("pay, uncommitted");
    let racing = tokio::spawn({
        let worker = worker.clone();
        async move { step(&worker).await }
    });
    wait_for_a_lock_wait(pool, "the refund never waited for the payment's row lock").await;
    payment.commit().await.expect("the payment commits");
    racing.await.expect("step");

    assert_eq!(
        domain::receipt_state(pool, refund).await,
        (ReceiptStatus::Done, Some(ReceiptOutcome::Applied), None)
    );
    assert_eq!(domain::order_status(pool, "o1").await, "refunded");
}

/// `charge.refunded` of order `o1`'s PaymentIntent `pi_1`, in full, created at `created`.
fn o1_refunded(event_id: &str, created: i64) -> String {
    domain::stripe_event_at(
        event_id,
        "charge.refunded",
        domain::order_charge("pi_1", "o1", 1000, 1000),
        created,
    )
}

/// `charge.refund.updated` of refund `re_1` (1000 of `pi_1`), now `status`, created at
/// `created`.
fn re_1_updated(event_id: &str, status: &str, created: i64) -> String {
    domain::stripe_event_at(
        event_id,
        "charge.refund.updated",
        domain::refund("re_1", "pi_1", 1000, status),
        created,
    )
}

/// Accepts `body` as a new receipt; returns its id.
async fn accept_new(pool: &sqlx::PgPool, config: &inbound_core::config::Config, body: &str) -> i64 {
    domain::accept(pool, config, body).await.expect("new")
}

/// Seeds order `o1` (`pi_1`, 1000 usd), accepts its payment and steps the worker through
/// it, then its full refund (`evt_r1`, created at `now - 100`). One at a time: accepted
/// together, the two are claimed into two batches that run at once, and a refund whose
/// transaction reads the order before the payment's has written it waits a backoff
/// (`payments_and_refunds_of_no_order_are_ignored_and_a_refund_waits_only_for_a_pending_payment`),
/// past the next step.
async fn paid_then_refunded(
    pool: &sqlx::PgPool,
    config: &inbound_core::config::Config,
    worker: &std::sync::Arc<inbound_worker::Worker>,
    now: i64,
) {
    domain::seed_order(pool, "o1", "pi_1", 1000, "usd").await;
    accept_succeeded(pool, config, "evt_p1", "pi_1", "o1", 1000, "usd").await;
    step(worker).await;
    accept_new(pool, config, &o1_refunded("evt_r1", now - 100)).await;
    step(worker).await;
}

/// [`paid_then_refunded`], then that refund fails (`evt_u1`, created at `now - 50`).
async fn refunded_then_failed(
    pool: &sqlx::PgPool,
    config: &inbound_core::config::Config,
    worker: &std::sync::Arc<inbound_worker::Worker>,
    now: i64,
) {
    paid_then_refunded(pool, config, worker, now).await;
    accept_new(pool, config, &re_1_updated("evt_u1", "failed", now - 50)).await;
    step(worker).await;
}

/// A refund can fail (or be canceled) after `charge.refunded` said the charge was
/// refunded: the money never went back, so the order is `paid` again, once per refund.
/// (A late snapshot from before the failure, a later new refund, and other refund
/// statuses: the three tests below.)
#[tokio::test]
async fn a_refund_that_fails_later_leaves_the_order_paid_once() {
    let fixture = domain::Fixture::new().await;
    let (pool, config, worker) = (fixture.pool(), &fixture.config, fixture.worker());
    let now = chrono::Utc::now().timestamp();
    paid_then_refunded(pool, config, &worker, now).await;
    assert_eq!(domain::order_status(pool, "o1").await, "refunded");

    let failed = accept_new(pool, config, &re_1_updated("evt_u1", "failed", now - 50)).await;
    step(&worker).await;
    assert_eq!(
        domain::receipt_state(pool, failed).await.1,
        Some(ReceiptOutcome::Applied)
    );
    assert_eq!(domain::order_status(pool, "o1").await, "paid");
    // The same failure again (another event id: Stripe's refund.updated beside it).
    let again = accept_new(pool, config, &re_1_updated("evt_u2", "failed", now - 40)).await;
    step(&worker).await;
    domain::assert_ended(
        pool,
        again,
        ReceiptStatus::Done,
        Some(ReceiptOutcome::Duplicate),
        "already recorded",
    )
    .await;
    assert_eq!(domain::order_status(pool, "o1").await, "paid");
    assert_eq!(
        domain::operation_keys(pool).await,
        [
            "order.paid:acme:o1:pi_1",
            "order.refunded:acme:o1:pi_1",
            "order.refund_failed:acme:o1:re_1",
        ],
        "one effect per transition: the failure once"
    );
}

/// The refund's `charge.refunded`, redelivered late under another id — a snapshot from
/// before the refund failed — changes nothing: the order stays `paid`.
#[tokio::test]
async fn a_refund_snapshot_from_before_its_failure_arriving_late_changes_nothing() {
    let fixture = domain::Fixture::new().await;
    let (pool, config, worker) = (fixture.pool(), &fixture.config, fixture.worker());
    let now = chrono::Utc::now().timestamp();
    refunded_then_failed(pool, config, &worker, now).await;

    let stale = accept_new(pool, config, &o1_refunded("evt_r1_late", now - 100)).await;
    step(&worker).await;
    domain::assert_ended(
        pool,
        stale,
        ReceiptStatus::Done,
        Some(ReceiptOutcome::Ignored),
        "failed",
    )
    .await;
    assert_eq!(domain::order_status(pool, "o1").await, "paid");
}

/// A new full refund, created after the first refund failed, applies: a new operation.
#[tokio::test]
async fn a_new_full_refund_after_a_failed_one_applies_as_a_new_operation() {
    let fixture = domain::Fixture::new().await;
    let (pool, config, worker) = (fixture.pool(), &fixture.config, fixture.worker());
    let now = chrono::Utc::now().timestamp();
    refunded_then_failed(pool, config, &worker, now).await;

    let second = accept_new(pool, config, &o1_refunded("evt_r2", now)).await;
    step(&worker).await;
    assert_eq!(
        domain::receipt_state(pool, second).await.1,
        Some(ReceiptOutcome::Applied)
    );
    assert_eq!(domain::order_status(pool, "o1").await, "refunded");
    assert_eq!(
        domain::operation_keys(pool).await,
        [
            "order.paid:acme:o1:pi_1",
            "order.refunded:acme:o1:pi_1",
            "order.refund_failed:acme:o1:re_1",
            "order.refunded:acme:o1:pi_1:re_1"
        ],
        "one effect per transition: the refund after the failure is a new operation"
    );
}

/// A refund update of another status than failed or canceled (here `pending`) changes
/// nothing.
#[tokio::test]
async fn a_refund_update_neither_failed_nor_canceled_changes_nothing() {
    let fixture = domain::Fixture::new().await;
    let (pool, config, worker) = (fixture.pool(), &fixture.config, fixture.worker());
    let now = chrono::Utc::now().timestamp();
    paid_then_refunded(pool, config, &worker, now).await;

    let pending = accept_new(pool, config, &re_1_updated("evt_u0", "pending", now - 90)).await;
    step(&worker).await;
    domain::assert_ended(
        pool,
        pending,
        ReceiptStatus::Done,
        Some(ReceiptOutcome::Ignored),
        "is pending",
    )
    .await;
    assert_eq!(domain::order_status(pool, "o1").await, "refunded");
}

/// Stripe does not order its events: a new full refund, created after the first refund
/// failed, may be processed before that failure is. The failure then must not make the
/// order `paid` — the later refund's money did go back.
#[tokio::test]
async fn a_later_refund_outlives_the_failure_of_an_earlier_one() {
    let fixture = domain::Fixture::new().await;
    let (pool, config, worker) = (fixture.pool(), &fixture.config, fixture.worker());
    let now = chrono::Utc::now().timestamp();
    let refunded = |id: &str, created: i64| {
        domain::stripe_event_at(
            id,
            "charge.refunded",
            domain::order_charge("pi_1", "o1", 1000, 1000),
            created,
        )
    };
    domain::seed_order(pool, "o1", "pi_1", 1000, "usd").await;
    accept_succeeded(pool, config, "evt_p1", "pi_1", "o1", 1000, "usd").await;
    step(&worker).await;
    domain::accept(pool, config, &refunded("evt_r1", now - 300))
        .await
        .expect("new");
    step(&worker).await;
    assert_eq!(domain::order_status(pool, "o1").await, "refunded");
    // The second refund (created after the failure) is processed first.
    domain::accept(pool, config, &refunded("evt_r2", now - 100))
        .await
        .expect("new");
    step(&worker).await;
    let failure = domain::stripe_event_at(
        "evt_u1",
        "charge.refund.updated",
        domain::refund("re_1", "pi_1", 1000, "failed"),
        now - 200,
    );
    let failure = domain::accept(pool, config, &failure).await.expect("new");
    step(&worker).await;
    // The failure is recorded (applied, though no order changed and no effect is sent).
    assert_eq!(
        domain::receipt_state(pool, failure).await,
        (ReceiptStatus::Done, Some(ReceiptOutcome::Applied), None)
    );
    assert_eq!(domain::order_status(pool, "o1").await, "refunded");
    assert!(
        !domain::operation_keys(pool)
            .await
            .iter()
            .any(|key| key.starts_with("order.refund_failed")),
        "{:?}",
        domain::operation_keys(pool).await
    );
}

/// An order canceled after it was paid, then refunded: when that refund fails, it is
/// canceled again (paid, and its money kept), not `paid`.
#[tokio::test]
async fn a_failed_refund_of_a_canceled_order_leaves_it_canceled() {
    let fixture = domain::Fixture::new().await;
    let (pool, config, worker) = (fixture.pool(), &fixture.config, fixture.worker());
    let now = chrono::Utc::now().timestamp();
    domain::seed_order(pool, "o1", "pi_1", 1000, "usd").await;
    accept_succeeded(pool, config, "evt_p1", "pi_1", "o1", 1000, "usd").await;
    step(&worker).await;
    sqlx::query("UPDATE inbound_example.orders SET status = 'canceled' WHERE id = 'o1'")
        .execute(pool)
        .await
        .expect("cancel after payment");
    let refunded = domain::stripe_event_at(
        "evt_r1",
        "charge.refunded",
        domain::order_charge("pi_1", "o1", 1000, 1000),
        now - 100,
    );
    domain::accept(pool, config, &refunded).await.expect("new");
    step(&worker).await;
    assert_eq!(domain::order_status(pool, "o1").await, "refunded");
    let failure = domain::stripe_event_at(
        "evt_u1",
        "charge.refund.updated",
        domain::refund("re_1", "pi_1", 1000, "failed"),
        now - 50,
    );
    domain::accept(pool, config, &failure).await.expect("new");
    step(&worker).await;
    assert_eq!(domain::order_status(pool, "o1").await, "canceled");
}

/// A refund and the failure of that refund, processed at once by two workers: whichever
/// commits first, the order ends `paid`. The failure's transaction is held open here
/// after recording the failure (as `orders.refund` does, under the payment's lock); the
/// refund must wait for it and then see the failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refund_racing_its_own_failure_never_leaves_the_order_refunded() {
    let fixture = domain::Fixture::new().await;
    let (pool, config, worker) = (fixture.pool(), &fixture.config, fixture.worker());
    let now = chrono::Utc::now().timestamp();
    domain::seed_order(pool, "o1", "pi_1", 1000, "usd").await;
    accept_succeeded(pool, config, "evt_p1", "pi_1", "o1", 1000, "usd").await;
    step(&worker).await;
    let refunded = domain::stripe_event_at(
        "evt_r1",
        "charge.refunded",
        domain::order_charge("pi_1", "o1", 1000, 1000),
        now - 100,
    );
    let refund = domain::accept(pool, config, &refunded).await.expect("new");

    let mut failing = pool.begin().await.expect("begin");
    inbound_example::store::orders::lock_payment(&mut failing, "acme", "pi_1")
        .await
        .expect("lock");
    inbound_example::store::orders::record_refund_failure(
        &mut failing,
        inbound_example::store::orders::RefundFailure {
            tenant: "acme",
            refund_id: "re_1",
            payment_id: "pi_1",
            amount_minor: 1000,
            event_created: now - 50,
            receipt_id: 0,
        },
    )
    .await
    .expect("record");
    let racing = tokio::spawn({
        let worker = worker.clone();
        async move { step(&worker).await }
    });
    wait_for_a_lock_wait(
        pool,
        "the refund never waited for the failure's lock on the payment",
    )
    .await;
    failing.commit().await.expect("the failure commits");
    racing.await.expect("step");
    domain::assert_ended(
        pool,
        refund,
        ReceiptStatus::Done,
        Some(ReceiptOutcome::Ignored),
        "failed",
    )
    .await;
    assert_eq!(domain::order_status(pool, "o1").await, "paid");
}
