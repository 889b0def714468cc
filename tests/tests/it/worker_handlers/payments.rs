//! `orders.mark_paid`: a payment applies once, and every payment that changes no row is
//! classified (duplicate, mismatch, not yet, stale), one by one or set-based in a batch.

use super::*;

/// An order that exists, but in another tenant than the integration's (a configuration
/// mistake): the retry's error says where it is instead of "does not exist (yet)".
#[tokio::test]
async fn a_payment_for_an_order_of_another_tenant_says_where_the_order_is() {
    let fixture = domain::Fixture::new().await;
    let (pool, config) = (fixture.pool(), &fixture.config);
    let worker = slowly_retrying_worker(pool);
    domain::seed_order_of(pool, "globex", "o_elsewhere", "pi_e", 1000, "usd").await;
    let receipt = accept_succeeded(pool, config, "evt_e", "pi_e", "o_elsewhere", 1000, "usd").await;
    step(&worker).await;
    let detail = admin::receipt_detail(
        &mut pool.acquire().await.expect("conn"),
        inbound_core::keys::ReceiptId(receipt),
    )
    .await
    .expect("query")
    .expect("row");
    let error = detail.last_error.unwrap_or_default();
    assert!(
        error.contains("o_elsewhere") && error.contains("tenant globex") && error.contains("acme"),
        "{error}"
    );
    assert!(!error.contains("(yet)"), "{error}");
}

/// A payment whose guarded UPDATE matches no row of its order, although the order awaits
/// 1000 usd through `expected`; `reason` is a part of why it is quarantined.
struct Mismatch {
    order: &'static str,
    expected: &'static str,
    event: &'static str,
    payment: &'static str,
    amount: i64,
    currency: &'static str,
    reason: &'static str,
}

/// The payments that differ from their order: in amount, in currency, in PaymentIntent.
fn mismatched_payments() -> [Mismatch; 3] {
    [
        Mismatch {
            order: "o_amount",
            expected: "pi_amount",
            event: "evt_a",
            payment: "pi_amount",
            amount: 999,
            currency: "usd",
            reason: "pi_amount does not pay order o_amount: the amount differs",
        },
        Mismatch {
            order: "o_currency",
            expected: "pi_currency",
            event: "evt_c",
            payment: "pi_currency",
            amount: 1000,
            currency: "eur",
            reason: "the currency differs",
        },
        Mismatch {
            order: "o_other",
            expected: "pi_expected",
            event: "evt_o",
            payment: "pi_unexpected",
            amount: 1000,
            currency: "usd",
            reason: "expects PaymentIntent pi_expected",
        },
    ]
}

/// A payment applies once; one that changes no row is classified: the same payment again
/// is a duplicate, one that differs from its order is quarantined and leaves it unpaid.
/// (An order not created yet, and a failure after the payment: the two tests below.)
#[tokio::test]
async fn mark_paid_applies_once_and_classifies_every_zero_row_update() {
    let fixture = domain::Fixture::new().await;
    let (pool, config) = (fixture.pool(), &fixture.config);
    let worker = slowly_retrying_worker(pool);
    domain::seed_order(pool, "o1", "pi_1", 1000, "usd").await;
    let paid = accept_succeeded(pool, config, "evt_1", "pi_1", "o1", 1000, "usd").await;
    let mut mismatched = Vec::new();
    for case in mismatched_payments() {
        domain::seed_order(pool, case.order, case.expected, 1000, "usd").await;
        let receipt = accept_succeeded(
            pool,
            config,
            case.event,
            case.payment,
            case.order,
            case.amount,
            case.currency,
        )
        .await;
        mismatched.push((receipt, case));
    }
    step(&worker).await;

    assert_eq!(
        domain::receipt_state(pool, paid).await,
        (ReceiptStatus::Done, Some(ReceiptOutcome::Applied), None)
    );
    assert_eq!(domain::order_status(pool, "o1").await, "paid");
    assert_eq!(
        domain::operation_keys(pool).await,
        ["order.paid:acme:o1:pi_1"]
    );
    for (receipt, case) in mismatched {
        domain::assert_ended(pool, receipt, ReceiptStatus::Quarantined, None, case.reason).await;
        let order = case.order;
        assert_eq!(
            domain::order_status(pool, order).await,
            "awaiting_payment",
            "{order} unchanged"
        );
    }

    // The same payment under a new event id, and a redelivery: nothing applies twice.
    let again = domain::accept(
        pool,
        config,
        &succeeded("evt_1_bis", "pi_1", "o1", 1000, "usd"),
    )
    .await
    .expect("new id");
    assert_eq!(
        domain::accept(pool, config, &succeeded("evt_1", "pi_1", "o1", 1000, "usd")).await,
        None,
        "same key"
    );
    step(&worker).await;
    domain::assert_ended(
        pool,
        again,
        ReceiptStatus::Done,
        Some(ReceiptOutcome::Duplicate),
        "already paid",
    )
    .await;
    assert_eq!(
        domain::operation_keys(pool).await.len(),
        1,
        "no second intent"
    );
}

/// The order does not exist yet: transient, the payment still pending with its error,
/// backing off.
#[tokio::test]
async fn a_payment_for_an_order_not_created_yet_waits_with_its_error_and_backs_off() {
    let fixture = domain::Fixture::new().await;
    let (pool, config) = (fixture.pool(), &fixture.config);
    let worker = slowly_retrying_worker(pool);
    let missing = accept_succeeded(pool, config, "evt_m", "pi_m", "o_missing", 1000, "usd").await;
    step(&worker).await;

    let (status, _, _) = domain::receipt_state(pool, missing).await;
    assert_eq!(status, ReceiptStatus::Pending);
    let detail = receipt_detail(pool, missing).await;
    assert!(
        detail
            .last_error
            .as_deref()
            .is_some_and(|error| error.contains("o_missing does not exist")),
        "{detail:?}"
    );
    assert!(
        detail.visible_at.expect("queued") > chrono::Utc::now(),
        "backing off"
    );
}

/// A stale `payment_intent.payment_failed` after the order was paid changes nothing and
/// says why.
#[tokio::test]
async fn a_payment_failure_after_the_order_was_paid_changes_nothing_and_says_why() {
    let fixture = domain::Fixture::new().await;
    let (pool, config) = (fixture.pool(), &fixture.config);
    let worker = slowly_retrying_worker(pool);
    domain::seed_order(pool, "o1", "pi_1", 1000, "usd").await;
    accept_succeeded(pool, config, "evt_1", "pi_1", "o1", 1000, "usd").await;
    step(&worker).await;

    let failed_body = stripe_event(
        "evt_f",
        "payment_intent.payment_failed",
        payment_intent("pi_1", "o1", 0, "usd", "requires_payment_method"),
    );
    let stale = domain::accept(pool, config, &failed_body)
        .await
        .expect("new");
    step(&worker).await;
    domain::assert_ended(
        pool,
        stale,
        ReceiptStatus::Done,
        Some(ReceiptOutcome::Ignored),
        "requires_payment_method",
    )
    .await;
    assert_eq!(domain::order_status(pool, "o1").await, "paid");
}

#[tokio::test]
async fn payments_in_one_batch_are_set_based_yet_classified_as_one_by_one_in_order() {
    let fixture = domain::Fixture::new().await;
    let (pool, config) = (fixture.pool(), &fixture.config);
    seed_three_orders(pool).await;
    let first = accept_succeeded(pool, config, "evt_a", "pi_1", "o1", 1000, "usd").await;
    // The same payment again under a new event id, in the same batch.
    accept_succeeded(pool, config, "evt_b", "pi_1", "o1", 1000, "usd").await;
    let other = accept_succeeded(pool, config, "evt_c", "pi_2", "o2", 1000, "usd").await;
    accept_succeeded(pool, config, "evt_d", "pi_3", "o3", 999, "usd").await;

    let batch = claim_all(pool).await;
    let worker = domain::worker(pool, domain::settings());
    let attempts = process_batch(&worker, batch).await;
    assert!(
        matches!(
            &attempts[..],
            [
                Attempt::Committed(Transition::Applied { .. }),
                Attempt::Committed(Transition::Duplicate { .. }),
                Attempt::Committed(Transition::Applied { .. }),
                Attempt::Committed(Transition::Quarantine { .. }),
            ]
        ),
        "{attempts:?}"
    );
    let paid_by: Vec<(String, Option<i64>)> =
        sqlx::query_as("SELECT id, paid_receipt_id FROM orders ORDER BY id")
            .fetch_all(pool)
            .await
            .expect("orders");
    assert_eq!(
        paid_by,
        [
            ("o1".to_owned(), Some(first)),
            ("o2".to_owned(), Some(other)),
            ("o3".to_owned(), None)
        ],
        "the first payment in the batch is the one that applied"
    );
    assert_eq!(
        domain::operation_keys(pool).await,
        ["order.paid:acme:o1:pi_1", "order.paid:acme:o2:pi_2"]
    );
}

/// A Stripe-shaped handler trusts the shape of what Stripe signs; routed from another
/// signer (a partner's Standard Webhooks secret), anyone holding that secret could forge
/// a payment (PaymentIntent ids are not secret). The worker refuses such a route.
#[test]
fn stripe_shaped_handlers_refuse_routes_from_other_signers() {
    let config = domain::config_edited(|config| {
        // A Stripe-shaped route on std-acme, a Standard Webhooks integration.
        config.routes("std-acme").insert(
            "payment_intent.succeeded".to_owned(),
            toml::toml! { handler = "orders.mark_paid" }.into(),
        );
    });
    let error = inbound_worker::test_hooks::check_routes(&config, &domain::stock_registry(), None)
        .expect_err("refused")
        .to_string();
    assert!(
        error.contains(
            "(std-acme).routes.\"payment_intent.succeeded\".handler: orders.mark_paid accepts events from stripe integrations only, not standard"
        ),
        "{error}"
    );
    inbound_worker::test_hooks::check_routes(&domain::config(), &domain::stock_registry(), None)
        .expect("the fixture routes them from stripe only");
}
