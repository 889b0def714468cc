//! The classification table of payments and refunds, the providers a Stripe-shaped handler
//! accepts, its pinned mode, and reasons bounded in size.

use super::*;

/// Two batches paying the same orders in opposite orders must not deadlock: the set-based
/// payment locks its orders in key order, whatever order its receipts arrived in. Seen
/// from outside: while the batch waits for `o1` (held here), it holds no lock on `o2`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_of_payments_locks_its_orders_in_key_order() {
    use inbound_example::store::orders::{Payment, mark_paid_all};
    let database = TestDatabase::create().await;
    let pool = database.pool();
    // Inserted (and so stored) o2 first: scan order and arrival order both put it first.
    domain::seed_order(pool, "o2", "pi_2", 1000, "usd").await;
    domain::seed_order(pool, "o1", "pi_1", 1000, "usd").await;
    let mut holder = pool.begin().await.expect("begin");
    sqlx::query("SELECT 1 FROM orders WHERE id = 'o1' FOR UPDATE")
        .execute(&mut *holder)
        .await
        .expect("hold o1");
    let batch = tokio::spawn({
        let pool = pool.clone();
        async move {
            let mut transaction = pool.begin().await.expect("begin");
            let payment = |order_id: &'static str, payment_id: &'static str| Payment {
                tenant: domain::TENANT,
                order_id,
                payment_id,
                amount_minor: 1000,
                currency: "usd",
            };
            let changed = mark_paid_all(
                &mut transaction,
                &[(payment("o2", "pi_2"), 2), (payment("o1", "pi_1"), 1)],
            )
            .await
            .expect("pays");
            transaction.commit().await.expect("commit");
            changed.len()
        }
    });
    // Wait until the batch is blocked on a row lock.
    wait_for_a_lock_wait(pool, "the batch never waited for o1").await;
    let mut probe = pool.begin().await.expect("begin");
    let o2_free = sqlx::query("SELECT 1 FROM orders WHERE id = 'o2' FOR UPDATE NOWAIT")
        .execute(&mut *probe)
        .await;
    probe.rollback().await.expect("rollback");
    holder.rollback().await.expect("release o1");
    assert_eq!(batch.await.expect("batch"), 2);
    assert!(
        o2_free.is_ok(),
        "the batch held o2 while waiting for o1 (arrival order): {o2_free:?}"
    );
}

/// The orders of the classification decisions, each awaiting 1000 (`o_upper` in `USD`),
/// and `o_unattached`, which has no PaymentIntent attached yet.
async fn seed_classification_orders(pool: &sqlx::PgPool) {
    for (order, payment, currency) in [
        ("o_paid", "pi_paid", "usd"),
        ("o_upper", "pi_upper", "USD"),
        ("o_cancel_paid", "pi_cp", "usd"),
        ("o_cancel_unpaid", "pi_cu", "usd"),
        ("o_refund_amount", "pi_ra", "usd"),
        ("o_capture", "pi_cap", "usd"),
    ] {
        domain::seed_order(pool, order, payment, 1000, currency).await;
    }
    sqlx::query(
        "INSERT INTO orders (tenant_id, id, provider_payment_id, total_minor, currency)
         VALUES ('acme', 'o_unattached', NULL, 1000, 'usd')",
    )
    .execute(pool)
    .await
    .expect("order without a PaymentIntent");
}

/// One case of the classification decisions: its event, and how its receipt ends — its
/// status, its outcome and, where the case says why, a part of its reason.
struct Decision {
    case: &'static str,
    event: String,
    status: ReceiptStatus,
    outcome: Option<ReceiptOutcome>,
    reason: Option<&'static str>,
}

/// The cases of issue 15, item 3, in the order they arrive once the first payments were
/// applied and two of the orders canceled. Case (d) is one of the first payments.
fn classification_decisions() -> Vec<Decision> {
    use ReceiptOutcome::{Applied, Duplicate, Ignored};
    use ReceiptStatus::{Done, Pending, Quarantined};
    let decision = |case, event, status, outcome, reason| Decision {
        case,
        event,
        status,
        outcome,
        reason,
    };
    let refund = |event_id, payment, amount| {
        stripe_event(event_id, "charge.refunded", charge(payment, amount, amount))
    };
    // (c) A PaymentIntent without a status is not taken as succeeded.
    let mut no_status = payment_intent("pi_ns", "o_paid", 1000, "usd", "succeeded");
    no_status.as_object_mut().expect("object").remove("status");
    // A partially captured charge, fully refunded: `amount` is what was authorised.
    let captured = serde_json::json!({"id": "ch_cap", "object": "charge", "payment_intent": "pi_cap",
        "amount": 1500, "amount_captured": 1000, "amount_refunded": 1000, "refunded": true});
    vec![
        // (a) The same PaymentIntent id with another amount is no duplicate: quarantined.
        decision(
            "(a) another amount",
            succeeded("evt_p1b", "pi_paid", "o_paid", 999, "usd"),
            Quarantined,
            None,
            None,
        ),
        decision(
            "(a) the same again",
            succeeded("evt_p1c", "pi_paid", "o_paid", 1000, "usd"),
            Done,
            Some(Duplicate),
            None,
        ),
        // (b) An order with no PaymentIntent attached yet waits for it.
        decision(
            "(b) waits",
            succeeded("evt_un", "pi_un", "o_unattached", 1000, "usd"),
            Pending,
            None,
            None,
        ),
        decision(
            "(c) no status",
            stripe_event("evt_ns", "payment_intent.succeeded", no_status),
            Quarantined,
            None,
            Some("no status"),
        ),
        // (e) A full refund of another amount than the order received is inconsistent.
        decision(
            "(e) another amount refunded",
            refund("evt_ra", "pi_ra", 1200),
            Quarantined,
            None,
            None,
        ),
        decision(
            "partial capture, full refund",
            stripe_event("evt_rcap", "charge.refunded", captured),
            Done,
            Some(Applied),
            None,
        ),
        // (f) Cancel, then refund: a paid order is refunded; an unpaid one has nothing to
        // undo.
        decision(
            "(f) canceled after it was paid",
            refund("evt_rcp", "pi_cp", 1000),
            Done,
            Some(Applied),
            None,
        ),
        decision(
            "(f) canceled unpaid",
            refund("evt_rcu", "pi_cu", 1000),
            Done,
            Some(Ignored),
            None,
        ),
    ]
}

/// The classification decisions of issue 15, item 3, each with its case: the cases are
/// `classification_decisions`, run in one batch after the first payments.
#[tokio::test]
async fn payment_and_refund_classification_decisions() {
    let fixture = domain::Fixture::new().await;
    let (pool, config) = (fixture.pool(), &fixture.config);
    let worker = slowly_retrying_worker(pool);
    seed_classification_orders(pool).await;
    for (event, payment, order) in [
        ("evt_p1", "pi_paid", "o_paid"),
        ("evt_p2", "pi_cp", "o_cancel_paid"),
        ("evt_p3", "pi_ra", "o_refund_amount"),
        ("evt_p4", "pi_cap", "o_capture"),
    ] {
        accept_succeeded(pool, config, event, payment, order, 1000, "usd").await;
    }
    let upper = accept_succeeded(pool, config, "evt_up", "pi_upper", "o_upper", 1000, "usd").await;
    step(&worker).await;
    sqlx::query(
        "UPDATE orders SET status = 'canceled' WHERE id IN ('o_cancel_paid', 'o_cancel_unpaid')",
    )
    .execute(pool)
    .await
    .expect("the business cancels two orders");
    let mut decided = Vec::new();
    for decision in classification_decisions() {
        let receipt = domain::accept(pool, config, &decision.event).await;
        decided.push((receipt.expect("a new receipt"), decision));
    }
    step(&worker).await;

    let state = |receipt: i64| domain::receipt_state(pool, receipt);
    // (d) Currencies compare without case (ISO codes): USD on the order, usd from Stripe.
    assert_eq!(
        state(upper).await.1,
        Some(ReceiptOutcome::Applied),
        "{:?}",
        state(upper).await
    );
    for (receipt, decision) in decided {
        let (status, outcome, reason) = state(receipt).await;
        let case = decision.case;
        assert_eq!(
            (status, outcome),
            (decision.status, decision.outcome),
            "{case} {reason:?}"
        );
        if let Some(part) = decision.reason {
            assert!(reason.is_some_and(|reason| reason.contains(part)), "{case}");
        }
    }
    assert_eq!(
        domain::order_status(pool, "o_cancel_paid").await,
        "refunded"
    );
    assert_eq!(
        domain::order_status(pool, "o_cancel_unpaid").await,
        "canceled"
    );
}

/// A live Connect endpoint also receives test-mode events, and events of every connected
/// account: a Stripe business handler needs `expect.livemode` pinned (the worker refuses
/// to start without it), and a Connect event from an account the integration does not pin
/// is quarantined rather than applied to this tenant's orders.
#[tokio::test]
async fn stripe_business_handlers_need_the_mode_pinned_and_refuse_unpinned_connect_accounts() {
    let unpinned_mode = domain::config_edited(|config| {
        config
            .integration("stripe-acme")
            .remove("expect")
            .expect("the fixture pins stripe-acme");
    });
    let error =
        inbound_worker::test_hooks::check_routes(&unpinned_mode, &domain::stock_registry(), None)
            .expect_err("refused")
            .to_string();
    assert!(
        error.contains("(stripe-acme).routes.") && error.contains("expect.livemode"),
        "{error}"
    );

    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config_edited(|config| {
        config.set("stripe-acme", "expect", toml::toml! { livemode = true });
    });
    inbound_worker::test_hooks::check_routes(&config, &domain::stock_registry(), None)
        .expect("the mode is pinned");
    let worker = domain::worker_with_config(pool, config.clone(), domain::settings());
    domain::seed_order(pool, "o1", "pi_1", 1000, "usd").await;
    let body = serde_json::json!({
        "id": "evt_connect", "object": "event", "type": "payment_intent.succeeded",
        "account": "acct_999", "livemode": true,
        "data": {"object": domain::payment_intent("pi_1", "o1", 1000, "usd", "succeeded")}
    })
    .to_string();
    let receipt = domain::accept(pool, &config, &body).await.expect("new");
    step(&worker).await;
    let (status, _, reason) = domain::receipt_state(pool, receipt).await;
    assert_eq!(status, ReceiptStatus::Quarantined, "{reason:?}");
    assert!(reason.is_some_and(|reason| reason.contains("acct_999")));
    assert_eq!(domain::order_status(pool, "o1").await, "awaiting_payment");
}
