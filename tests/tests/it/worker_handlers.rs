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

/// An order that exists, but in another tenant than the integration's (a configuration
/// mistake): the retry's error says where it is instead of "does not exist (yet)".
#[tokio::test]
async fn a_payment_for_an_order_of_another_tenant_says_where_the_order_is() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config();
    let worker = slowly_retrying_worker(pool);
    domain::seed_order_of(pool, "globex", "o_elsewhere", "pi_e", 1000, "usd").await;
    let receipt =
        accept_succeeded(pool, &config, "evt_e", "pi_e", "o_elsewhere", 1000, "usd").await;
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

/// A payment applies once; one that changes no row is classified: the same payment again
/// is a duplicate, one that differs from its order is quarantined and leaves it unpaid.
/// (An order not created yet, and a failure after the payment: the two tests below.)
#[tokio::test]
async fn mark_paid_applies_once_and_classifies_every_zero_row_update() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config();
    let worker = slowly_retrying_worker(pool);
    domain::seed_order(pool, "o1", "pi_1", 1000, "usd").await;
    let paid = accept_succeeded(pool, &config, "evt_1", "pi_1", "o1", 1000, "usd").await;
    let mut mismatched = Vec::new();
    for case in mismatched_payments() {
        domain::seed_order(pool, case.order, case.expected, 1000, "usd").await;
        let receipt = accept_succeeded(
            pool,
            &config,
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
        &config,
        &succeeded("evt_1_bis", "pi_1", "o1", 1000, "usd"),
    )
    .await
    .expect("new id");
    assert_eq!(
        domain::accept(
            pool,
            &config,
            &succeeded("evt_1", "pi_1", "o1", 1000, "usd")
        )
        .await,
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
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config();
    let worker = slowly_retrying_worker(pool);
    let missing = accept_succeeded(pool, &config, "evt_m", "pi_m", "o_missing", 1000, "usd").await;
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
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config();
    let worker = slowly_retrying_worker(pool);
    domain::seed_order(pool, "o1", "pi_1", 1000, "usd").await;
    accept_succeeded(pool, &config, "evt_1", "pi_1", "o1", 1000, "usd").await;
    step(&worker).await;

    let failed_body = stripe_event(
        "evt_f",
        "payment_intent.payment_failed",
        payment_intent("pi_1", "o1", 0, "usd", "requires_payment_method"),
    );
    let stale = domain::accept(pool, &config, &failed_body)
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
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config();
    let worker = slowly_retrying_worker(pool);
    let renewal = domain::accept_event(
        pool,
        &config,
        "evt_renewal",
        "payment_intent.succeeded",
        serde_json::json!({
            "id": "pi_sub", "object": "payment_intent", "status": "succeeded",
            "amount_received": 2000, "currency": "usd", "invoice": "in_sub", "metadata": {}
        }),
    )
    .await;
    // The order is not created yet: its payment waits, and so will the refund behind it.
    let waiting_payment = accept_succeeded(
        pool,
        &config,
        "evt_p_late",
        "pi_late",
        "o_late",
        1000,
        "usd",
    )
    .await;
    step(&worker).await;
    // The refunds come once their payments were handled: a refund racing its payment in
    // another batch waits a backoff, then is judged again.
    // A subscription's charge names no order: on API versions from 2025-03-31 (basil) it
    // names no invoice either.
    let renewal_charge = charge("pi_sub", 2000, 2000);
    let renewal_refund =
        accept_refund_of(pool, &config, "evt_renewal_refund", renewal_charge).await;
    let waiting_refund = accept_refund_of(
        pool,
        &config,
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
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config();
    let worker = slowly_retrying_worker(pool);
    let unseen_charge = domain::order_charge("pi_unseen", "o_unseen", 1000, 1000);
    let unseen_refund = accept_refund_of(pool, &config, "evt_r_unseen", unseen_charge).await;
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
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config();
    let worker = slowly_retrying_worker(pool);
    domain::seed_order(pool, "o_dbl", "pi_dbl_1", 1000, "usd").await;
    let double = accept_succeeded(pool, &config, "evt_dbl", "pi_dbl_2", "o_dbl", 1000, "usd").await;
    step(&worker).await;
    assert_eq!(
        domain::receipt_state(pool, double).await.0,
        ReceiptStatus::Quarantined
    );
    let double_refund = accept_refund_of(
        pool,
        &config,
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
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config();
    let worker = domain::worker(pool, domain::settings());
    // The refund overtakes the payment: transient until the payment applies.
    let early_refund = unpaid_order_with_a_full_refund(pool, &config).await;
    step(&worker).await;
    assert_eq!(
        domain::receipt_state(pool, early_refund).await.0,
        ReceiptStatus::Pending
    );
    accept_succeeded(pool, &config, "evt_p1", "pi_1", "o1", 1000, "usd").await;
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

    let partial = accept_refund(pool, &config, "evt_r2", "pi_1", 1000, 400).await;
    // The same full refund again, told by an event no later than the first (a later one
    // would be noted as the refund's latest time: applied, with no effect). An hour back,
    // so that the second the test crosses never decides it.
    let repeat = domain::accept(
        pool,
        &config,
        &domain::stripe_event_at(
            "evt_r3",
            "charge.refunded",
            charge("pi_1", 1000, 1000),
            chrono::Utc::now().timestamp() - 3600,
        ),
    )
    .await
    .expect("a new receipt");
    let late_success = accept_succeeded(pool, &config, "evt_p2", "pi_1", "o1", 1000, "usd").await;
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
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config();
    let worker = domain::worker(pool, domain::settings());
    let refund = unpaid_order_with_a_full_refund(pool, &config).await;

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

#[tokio::test]
async fn a_routes_price_options_take_the_place_of_the_integrations_map() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config_edited(|config| {
        config.route("stripe-acme", "invoice.paid").insert(
            "options".to_owned(),
            toml::toml! { prices = { price_gold = "gold" } }.into(),
        );
    });
    inbound_worker::test_hooks::check_routes(&config, &domain::stock_registry(), None)
        .expect("the grant handler accepts its options");
    let worker = domain::worker_with_config(pool, config.clone(), domain::settings());
    let receipt = domain::accept_event(
        pool,
        &config,
        "evt_g1",
        "invoice.paid",
        invoice("in_9", "cus_g", &["price_gold", "price_pro"]),
    )
    .await;
    step(&worker).await;
    assert_eq!(
        domain::receipt_state(pool, receipt).await.1,
        Some(ReceiptOutcome::Applied)
    );
    let grants: Vec<String> =
        sqlx::query_scalar("SELECT entitlement FROM entitlement_grants ORDER BY 1")
            .fetch_all(pool)
            .await
            .expect("grants");
    assert_eq!(grants, ["gold"], "the route's map, not the integration's");

    let refused = domain::config_edited(|config| {
        config.routes("stripe-acme").insert(
            "invoice.paid".to_owned(),
            toml::toml! { handler = "entitlements.grant" options = { prices = { price_gold = 3 } } }
                .into(),
        );
    });
    let error = inbound_worker::test_hooks::check_routes(&refused, &domain::stock_registry(), None)
        .expect_err("refused at start-up")
        .to_string();
    assert!(
        error.contains(
            ".routes.\"invoice.paid\".options: prices.price_gold must name an entitlement"
        ),
        "{error}"
    );
}

/// A line of an invoice: its price, its amount (minor units), and whether it prorates.
fn invoice_line(price: &str, amount: i64, proration: bool) -> serde_json::Value {
    serde_json::json!({"price": {"id": price}, "amount": amount, "proration": proration})
}

/// Invoice `in_down` of `cus_a`, paid: a downgrade from pro to team — unused time on pro
/// is credited, team is charged.
fn downgrade_invoice() -> serde_json::Value {
    domain::invoice_with_lines(
        "in_down",
        "cus_a",
        "paid",
        vec![
            invoice_line("price_pro", -1500, true),
            invoice_line("price_team", 500, true),
        ],
        false,
    )
}

/// The fixture's configuration with `invoice.finalized` routed to the grant handler too,
/// and a worker over `pool` with it.
fn finalized_invoices_routed(
    pool: &sqlx::PgPool,
) -> (
    inbound_core::config::Config,
    std::sync::Arc<inbound_worker::Worker>,
) {
    let config = domain::config_edited(|config| {
        config.routes("stripe-acme").insert(
            "invoice.finalized".to_owned(),
            toml::toml! { handler = "entitlements.grant" }.into(),
        );
    });
    let worker = domain::worker_with_config(pool, config.clone(), domain::settings());
    (config, worker)
}

/// Every grant, as `(account, entitlement)`, in order.
async fn entitlement_grants(pool: &sqlx::PgPool) -> Vec<(String, String)> {
    sqlx::query_as("SELECT account_id, entitlement FROM entitlement_grants ORDER BY 1, 2")
        .fetch_all(pool)
        .await
        .expect("grants")
}

/// Invoices as Stripe sends them: a downgrade carries a credit line for the old plan, and
/// a long invoice says `has_more`. (An invoice is finalized before it is paid, and an
/// invoice has exactly one customer: the two tests below.)
#[tokio::test]
async fn grants_read_invoices_as_stripe_sends_them() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let (config, worker) = finalized_invoices_routed(pool);
    let downgrade = domain::accept_event(
        pool,
        &config,
        "evt_down",
        "invoice.paid",
        downgrade_invoice(),
    )
    .await;
    let truncated = domain::accept_event(
        pool,
        &config,
        "evt_long",
        "invoice.paid",
        domain::invoice_with_lines(
            "in_long",
            "cus_a",
            "paid",
            vec![invoice_line("price_x", 100, false)],
            true,
        ),
    )
    .await;
    step(&worker).await;

    assert_eq!(
        domain::receipt_state(pool, downgrade).await.1,
        Some(ReceiptOutcome::Applied)
    );
    assert_eq!(
        entitlement_grants(pool).await,
        [("cus_a".into(), "team".into())],
        "a credit grants nothing"
    );
    let (status, _, reason) = domain::receipt_state(pool, truncated).await;
    assert_eq!(status, ReceiptStatus::Quarantined);
    assert!(reason.is_some_and(|reason| reason.contains("has_more")));
}

/// An invoice is finalized before it is paid: a finalized invoice, still open, grants
/// nothing yet.
#[tokio::test]
async fn an_invoice_finalized_but_not_paid_is_ignored() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let (config, worker) = finalized_invoices_routed(pool);
    let unpaid = domain::accept_event(
        pool,
        &config,
        "evt_final",
        "invoice.finalized",
        domain::invoice_with_lines(
            "in_open",
            "cus_a",
            "open",
            vec![invoice_line("price_pro", 1000, false)],
            false,
        ),
    )
    .await;
    step(&worker).await;
    domain::assert_ended(
        pool,
        unpaid,
        ReceiptStatus::Done,
        Some(ReceiptOutcome::Ignored),
        "not paid",
    )
    .await;
}

/// The same invoice, granted to one customer, named under another: an invoice has one
/// customer, so this one is quarantined, naming the first.
#[tokio::test]
async fn an_invoice_granted_to_one_customer_is_quarantined_under_another() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let (config, worker) = finalized_invoices_routed(pool);
    domain::accept_event(
        pool,
        &config,
        "evt_down",
        "invoice.paid",
        downgrade_invoice(),
    )
    .await;
    step(&worker).await;
    let other_customer = domain::accept_event(
        pool,
        &config,
        "evt_other",
        "invoice.paid",
        domain::invoice_with_lines(
            "in_down",
            "cus_b",
            "paid",
            vec![invoice_line("price_team", 500, true)],
            false,
        ),
    )
    .await;
    step(&worker).await;
    let (status, _, reason) = domain::receipt_state(pool, other_customer).await;
    assert_eq!(status, ReceiptStatus::Quarantined, "{reason:?}");
    assert!(reason.is_some_and(|reason| reason.contains("cus_a")));
}

#[tokio::test]
async fn grants_once_per_business_key_and_an_invoice_has_one_customer() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config();
    let worker = domain::worker(pool, domain::settings());
    let first = domain::accept_event(
        pool,
        &config,
        "evt_i1",
        "invoice.paid",
        invoice(
            "in_1",
            "cus_a",
            &["price_pro", "price_team", "price_unmapped"],
        ),
    )
    .await;
    step(&worker).await;
    let repeat = domain::accept_event(
        pool,
        &config,
        "evt_i3",
        "invoice.paid",
        invoice("in_1", "cus_a", &["price_pro", "price_team"]),
    )
    .await;
    let other_customer = domain::accept_event(
        pool,
        &config,
        "evt_i2",
        "invoice.paid",
        invoice("in_1", "cus_b", &["price_pro"]),
    )
    .await;
    step(&worker).await;

    assert_eq!(
        domain::receipt_state(pool, first).await.1,
        Some(ReceiptOutcome::Applied)
    );
    let (status, _, reason) = domain::receipt_state(pool, other_customer).await;
    assert_eq!(
        status,
        ReceiptStatus::Quarantined,
        "an invoice has one customer"
    );
    assert!(reason.is_some_and(|reason| reason.contains("was granted to customer cus_a")));
    assert_eq!(
        domain::receipt_state(pool, repeat).await.1,
        Some(ReceiptOutcome::Duplicate)
    );
    assert_eq!(
        entitlement_grants(pool).await,
        [
            ("cus_a".into(), "pro".into()),
            ("cus_a".into(), "team".into()),
        ]
    );
    assert_eq!(
        domain::operation_keys(pool).await.len(),
        2,
        "one effect per grant: {:?}",
        domain::operation_keys(pool).await
    );
}

/// An invoice none of whose prices maps to an entitlement is ignored, and grants nothing.
#[tokio::test]
async fn an_invoice_of_unmapped_prices_is_ignored() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config();
    let worker = domain::worker(pool, domain::settings());
    let unmapped = domain::accept_event(
        pool,
        &config,
        "evt_i4",
        "invoice.paid",
        invoice("in_2", "cus_a", &["price_unmapped"]),
    )
    .await;
    step(&worker).await;
    assert_eq!(
        domain::receipt_state(pool, unmapped).await.1,
        Some(ReceiptOutcome::Ignored)
    );
    let grants = entitlement_grants(pool).await;
    assert!(grants.is_empty(), "no grant: {grants:?}");
    let effects = domain::operation_keys(pool).await;
    assert!(effects.is_empty(), "no effect: {effects:?}");
}

#[tokio::test]
async fn a_worker_whose_lease_was_taken_over_cannot_complete() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config();
    domain::seed_order(pool, "o1", "pi_1", 1000, "usd").await;
    accept_succeeded(pool, &config, "evt_1", "pi_1", "o1", 1000, "usd").await;

    let mut connection = pool.acquire().await.expect("conn");
    // Worker A claims with a 30 s lease; 31 s later worker B takes over.
    let stale = domain::claim(&mut connection, 1, Duration::from_secs(30), "worker-a")
        .await
        .remove(0);
    let later = clock::ahead(Duration::from_secs(31));
    let current = domain::claim_at(
        &mut connection,
        1,
        Duration::from_secs(30),
        "worker-b",
        later,
    )
    .await
    .remove(0);
    assert!(current.reclaimed && current.lease_token > stale.lease_token);
    drop(connection);

    let worker = domain::worker(pool, domain::settings());
    assert_eq!(
        process(&worker, stale.clone()).await,
        Attempt::LeaseLost,
        "A's transaction rolls back"
    );
    assert_eq!(domain::order_status(pool, "o1").await, "awaiting_payment");
    assert!(matches!(
        process(&worker, current).await,
        Attempt::Committed(Transition::Applied { .. })
    ));
    assert_eq!(domain::order_status(pool, "o1").await, "paid");
    // A's late bookkeeping is fenced too.
    let mut connection = pool.acquire().await.expect("conn");
    assert!(
        !queue::release_for_retry(&mut connection, stale.lease(), Duration::ZERO, "late", None)
            .await
            .expect("query")
    );
    assert!(
        !queue::fail_exhausted(&mut connection, stale.lease(), "late")
            .await
            .expect("query")
    );
    assert_eq!(
        domain::receipt_state(pool, stale.receipt_id.0).await.0,
        ReceiptStatus::Done
    );
}

/// A replayed receipt starts a new life; a worker stalled with a token from the earlier
/// one must not match any token of the new life, however many claims it sees.
#[tokio::test]
async fn a_stale_token_from_before_a_replay_never_matches_again() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config();
    let receipt = domain::order_with_pending_payment(pool, &config).await;
    let mut connection = pool.acquire().await.expect("conn");
    // Life one: two claims (the second after the first lease ran out), then an operator
    // gives up.
    let lease = Duration::from_secs(30);
    let after_leases = |leases: u32| clock::ahead((lease + Duration::from_secs(1)) * leases);
    domain::claim(&mut connection, 1, lease, "worker-a").await;
    let stale = domain::claim_at(&mut connection, 1, lease, "worker-a", after_leases(1))
        .await
        .remove(0);
    admin::resolve_pending(
        &mut connection,
        &[inbound_core::keys::ReceiptId(receipt)],
        admin::PendingResolution::Quarantine,
        "ops",
        "looks wrong",
    )
    .await
    .expect("quarantine");
    admin::replay(
        &mut connection,
        &[inbound_core::keys::ReceiptId(receipt)],
        None,
        "ops",
        "looked again",
    )
    .await
    .expect("replay");
    // Life two: as many claims as life one had, and more.
    let mut tokens = Vec::new();
    for leases in 2..5 {
        let claimed = domain::claim_at(&mut connection, 1, lease, "worker-b", after_leases(leases))
            .await
            .remove(0);
        assert!(
            claimed.lease_token > stale.lease_token,
            "{claimed:?} vs {stale:?}"
        );
        tokens.push(claimed.lease_token);
    }
    assert!(
        tokens.windows(2).all(|pair| pair[1] > pair[0]),
        "{tokens:?}"
    );
    drop(connection);
    let worker = domain::worker(pool, domain::settings());
    assert_eq!(process(&worker, stale).await, Attempt::LeaseLost);
    assert_eq!(domain::order_status(pool, "o1").await, "awaiting_payment");
}

/// Claims stop at the payload budget: a worker holds at most that many payload bytes of
/// claimed receipts (one larger receipt is taken alone when nothing else is in flight).
#[tokio::test]
async fn claims_are_bounded_by_payload_bytes() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config();
    let padding = "x".repeat(3_000);
    let mut bytes = Vec::new();
    for n in 0..10 {
        let mut object = payment_intent(
            &format!("pi_{n}"),
            &format!("o{n}"),
            1000,
            "usd",
            "succeeded",
        );
        object["description"] = padding.clone().into();
        let body = stripe_event(&format!("evt_{n}"), "payment_intent.succeeded", object);
        bytes.push(body.len());
        domain::accept(pool, &config, &body).await.expect("new");
    }
    let one = bytes[0];
    // Room for three and a half receipts.
    let settings = domain::settings_with(|settings| settings.payload_budget_bytes(one * 7 / 2));
    let worker = domain::worker(pool, settings.clone());
    assert_eq!(
        step(&worker).await.len(),
        3,
        "three fit, the fourth would not"
    );

    // Smaller than one receipt: still one at a time, never none.
    let settings = settings
        .to_builder()
        .payload_budget_bytes(one / 2)
        .build()
        .expect("settings");
    let worker = domain::worker(pool, settings);
    assert_eq!(step(&worker).await.len(), 1);
    assert_eq!(step(&worker).await.len(), 1);
    let queued_bytes: Vec<i32> = sqlx::query_scalar("SELECT payload_bytes FROM receipt_queue")
        .fetch_all(pool)
        .await
        .expect("queue");
    assert!(
        queued_bytes.iter().all(|&size| size as usize == one),
        "{queued_bytes:?} vs {one}"
    );
}

/// One batch, one transaction, a savepoint per receipt: a receipt whose order does not
/// exist yet and one whose lease was taken over each roll back alone; the others commit.
#[tokio::test]
async fn a_batch_commits_its_good_receipts_and_rolls_back_each_failure_alone() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config();
    seed_three_orders(pool).await;
    accept_succeeded(pool, &config, "evt_1", "pi_1", "o1", 1000, "usd").await;
    let missing = accept_succeeded(pool, &config, "evt_9", "pi_9", "o9", 1000, "usd").await;
    let taken_over = accept_succeeded(pool, &config, "evt_2", "pi_2", "o2", 1000, "usd").await;
    accept_succeeded(pool, &config, "evt_3", "pi_3", "o3", 1000, "usd").await;

    let batch = claim_all(pool).await;
    assert_eq!(batch.len(), 4);
    // Another worker took over evt_2's lease meanwhile.
    sqlx::query("UPDATE receipt_queue SET lease_token = lease_token + 1 WHERE receipt_id = $1")
        .bind(taken_over)
        .execute(pool)
        .await
        .expect("take over");

    let worker = domain::worker(pool, domain::settings());
    let attempts = process_batch(&worker, batch).await;
    assert!(
        matches!(attempts[0], Attempt::Committed(Transition::Applied { .. })),
        "{attempts:?}"
    );
    assert!(
        matches!(attempts[1], Attempt::Retrying { .. }),
        "{attempts:?}"
    );
    assert_eq!(attempts[2], Attempt::LeaseLost);
    assert!(
        matches!(attempts[3], Attempt::Committed(Transition::Applied { .. })),
        "{attempts:?}"
    );

    assert_eq!(domain::order_status(pool, "o1").await, "paid");
    assert_eq!(domain::order_status(pool, "o2").await, "awaiting_payment");
    assert_eq!(domain::order_status(pool, "o3").await, "paid");
    assert_eq!(
        domain::operation_keys(pool).await,
        ["order.paid:acme:o1:pi_1", "order.paid:acme:o3:pi_3"]
    );
    assert_eq!(
        domain::receipt_state(pool, missing).await.0,
        ReceiptStatus::Pending
    );
    assert_eq!(
        domain::receipt_state(pool, taken_over).await.0,
        ReceiptStatus::Pending
    );
    let queued: Vec<(i64, Option<String>)> =
        sqlx::query_as("SELECT receipt_id, last_error FROM receipt_queue ORDER BY receipt_id")
            .fetch_all(pool)
            .await
            .expect("queue");
    assert_eq!(queued.len(), 2, "{queued:?}");
    assert!(
        queued[0]
            .1
            .as_deref()
            .is_some_and(|error| error.contains("does not exist")),
        "the missing order's retry is recorded: {queued:?}"
    );
    assert_eq!(
        queued[1].1, None,
        "the taken-over receipt is left to its new holder"
    );
}

#[tokio::test]
async fn payments_in_one_batch_are_set_based_yet_classified_as_one_by_one_in_order() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config();
    seed_three_orders(pool).await;
    let first = accept_succeeded(pool, &config, "evt_a", "pi_1", "o1", 1000, "usd").await;
    // The same payment again under a new event id, in the same batch.
    accept_succeeded(pool, &config, "evt_b", "pi_1", "o1", 1000, "usd").await;
    let other = accept_succeeded(pool, &config, "evt_c", "pi_2", "o2", 1000, "usd").await;
    accept_succeeded(pool, &config, "evt_d", "pi_3", "o3", 999, "usd").await;

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

/// `orders.mark_paid`, except that for `evt_2` it fails *after* the order was written.
struct FailsAfterWriting(RegisteredHandler);

impl Handler for FailsAfterWriting {
    async fn apply(
        &self,
        transaction: &mut sqlx::PgConnection,
        input: HandlerInput<'_>,
    ) -> Result<Transition, HandlerError> {
        let transition = self.0.apply(transaction, input).await?;
        if input.event_id == "evt_2" {
            return Err(HandlerError::transient("failed after writing"));
        }
        Ok(transition)
    }
}

#[tokio::test]
async fn a_handler_failing_after_its_write_leaves_no_trace_and_the_rest_of_its_batch_commits() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config();
    seed_three_orders(pool).await;
    let mut receipts = Vec::new();
    for n in 1..=3 {
        let (order, payment, event) = (format!("o{n}"), format!("pi_{n}"), format!("evt_{n}"));
        receipts.push(accept_succeeded(pool, &config, &event, &payment, &order, 1000, "usd").await);
    }
    let mut registry = domain::stock_registry();
    let mark_paid = registry.get(ORDERS_MARK_PAID).expect("registered").clone();
    registry.register(ORDERS_MARK_PAID, FailsAfterWriting(mark_paid));
    let worker = inbound_worker::Worker::new(
        pool.clone(),
        std::sync::Arc::new(config),
        registry,
        domain::settings(),
    );

    let batch = claim_all(pool).await;
    let attempts = process_batch(&worker, batch).await;
    assert!(
        matches!(
            attempts[..],
            [
                Attempt::Committed(Transition::Applied { .. }),
                Attempt::Retrying { .. },
                Attempt::Committed(Transition::Applied { .. })
            ]
        ),
        "{attempts:?}"
    );
    assert_eq!(domain::order_status(pool, "o1").await, "paid");
    assert_eq!(
        domain::order_status(pool, "o2").await,
        "awaiting_payment",
        "the failed receipt's write was rolled back"
    );
    assert_eq!(domain::order_status(pool, "o3").await, "paid");
    assert_eq!(
        domain::operation_keys(pool).await,
        ["order.paid:acme:o1:pi_1", "order.paid:acme:o3:pi_3"]
    );
    assert_eq!(
        domain::receipt_state(pool, receipts[0]).await.0,
        ReceiptStatus::Done
    );
    assert_eq!(
        domain::receipt_state(pool, receipts[1]).await.0,
        ReceiptStatus::Pending
    );
    assert_eq!(
        domain::receipt_state(pool, receipts[2]).await.0,
        ReceiptStatus::Done
    );
    let last_error: Option<String> =
        sqlx::query_scalar("SELECT last_error FROM receipt_queue WHERE receipt_id = $1")
            .bind(receipts[1])
            .fetch_one(pool)
            .await
            .expect("still queued");
    assert_eq!(last_error.as_deref(), Some("failed after writing"));
}

/// A handler that writes (marks the order paid) and then gives a verdict other than
/// `Applied` for some events — or fails.
struct VerdictAfterWriting(RegisteredHandler);

impl Handler for VerdictAfterWriting {
    async fn apply(
        &self,
        transaction: &mut sqlx::PgConnection,
        input: HandlerInput<'_>,
    ) -> Result<Transition, HandlerError> {
        let transition = self.0.apply(transaction, input).await?;
        let reason = "decided after writing".to_owned();
        Ok(match input.event_id {
            "evt_2" | "evt_6" => Transition::Quarantine { reason },
            "evt_3" => Transition::Ignored { reason },
            "evt_4" => Transition::Duplicate { reason },
            "evt_5" => return Err(HandlerError::transient(reason)),
            _ => transition,
        })
    }
}

/// Seeds order `o{n}` awaiting 1000 usd through `pi_{n}` and accepts `evt_{n}` paying
/// it, for each `n` of `numbers`; returns the receipts in order.
async fn orders_with_pending_payments(
    pool: &sqlx::PgPool,
    config: &inbound_core::config::Config,
    numbers: std::ops::RangeInclusive<u32>,
) -> Vec<i64> {
    let mut receipts = Vec::new();
    for n in numbers {
        let (order, payment, event) = (format!("o{n}"), format!("pi_{n}"), format!("evt_{n}"));
        domain::seed_order(pool, &order, &payment, 1000, "usd").await;
        receipts.push(accept_succeeded(pool, config, &event, &payment, &order, 1000, "usd").await);
    }
    receipts
}

/// A worker whose `orders.mark_paid` is wrapped in [`VerdictAfterWriting`].
fn verdict_after_writing_worker(
    pool: &sqlx::PgPool,
    config: &inbound_core::config::Config,
) -> inbound_worker::Worker {
    let stock = domain::stock_registry();
    let mut registry = stock.clone();
    let mark_paid = stock.get(ORDERS_MARK_PAID).expect("registered").clone();
    registry.register(ORDERS_MARK_PAID, VerdictAfterWriting(mark_paid));
    inbound_worker::Worker::new(
        pool.clone(),
        std::sync::Arc::new(config.clone()),
        registry,
        domain::settings(),
    )
}

/// Only `Applied` commits what a handler wrote: a handler that writes and then answers
/// `Quarantine`, `Ignored` or `Duplicate` leaves nothing behind (its receipt still ends as
/// it said) — here in a batch applied together; receipt by receipt in the test below. So
/// a replay after the cause is fixed applies the transition instead of reading as a false
/// `Duplicate` (the test after it).
#[tokio::test]
async fn only_an_applied_verdict_commits_the_handlers_writes() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config();
    let receipts = orders_with_pending_payments(pool, &config, 1..=4).await;
    let worker = verdict_after_writing_worker(pool, &config);

    // Together: evt_1 to evt_4 in one transaction.
    let mut connection = pool.acquire().await.expect("conn");
    let together = domain::claim(&mut connection, 4, Duration::from_secs(30), "w").await;
    let attempts = process_batch(&worker, together).await;
    assert!(
        matches!(
            attempts[..],
            [
                Attempt::Committed(Transition::Applied { .. }),
                Attempt::Committed(Transition::Quarantine { .. }),
                Attempt::Committed(Transition::Ignored { .. }),
                Attempt::Committed(Transition::Duplicate { .. }),
            ]
        ),
        "{attempts:?}"
    );
    assert_eq!(domain::order_status(pool, "o1").await, "paid");
    for order in ["o2", "o3", "o4"] {
        assert_eq!(
            domain::order_status(pool, order).await,
            "awaiting_payment",
            "{order}: the handler's write stayed behind a verdict other than applied"
        );
    }
    assert_eq!(
        domain::operation_keys(pool).await,
        ["order.paid:acme:o1:pi_1"]
    );
    for (receipt, status, outcome) in [
        (receipts[1], ReceiptStatus::Quarantined, None),
        (
            receipts[2],
            ReceiptStatus::Done,
            Some(ReceiptOutcome::Ignored),
        ),
        (
            receipts[3],
            ReceiptStatus::Done,
            Some(ReceiptOutcome::Duplicate),
        ),
    ] {
        domain::assert_ended(pool, receipt, status, outcome, "decided after writing").await;
    }
}

/// [`only_an_applied_verdict_commits_the_handlers_writes`] for a batch applied receipt by
/// receipt (one of its receipts fails, so each is isolated): a verdict other than
/// `Applied` commits nothing there either.
#[tokio::test]
async fn a_verdict_other_than_applied_commits_nothing_when_the_batch_runs_receipt_by_receipt() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config();
    let receipts = orders_with_pending_payments(pool, &config, 5..=6).await;
    let worker = verdict_after_writing_worker(pool, &config);

    // Receipt by receipt (evt_5 fails, so its batch is isolated): evt_6 quarantined.
    let mut connection = pool.acquire().await.expect("conn");
    let isolated = domain::claim(&mut connection, 2, Duration::from_secs(30), "w").await;
    let attempts = process_batch(&worker, isolated).await;
    assert!(
        matches!(
            attempts[..],
            [
                Attempt::Retrying { .. },
                Attempt::Committed(Transition::Quarantine { .. })
            ]
        ),
        "{attempts:?}"
    );
    for order in ["o5", "o6"] {
        assert_eq!(
            domain::order_status(pool, order).await,
            "awaiting_payment",
            "{order}: the handler's write stayed behind a verdict other than applied"
        );
    }
    let effects = domain::operation_keys(pool).await;
    assert!(effects.is_empty(), "{effects:?}");
    domain::assert_ended(
        pool,
        receipts[1],
        ReceiptStatus::Quarantined,
        None,
        "decided after writing",
    )
    .await;
}

/// A receipt quarantined by a handler that had written: once the cause is fixed (the stock
/// handler back), the replay applies — no false duplicate from the write that stayed
/// behind.
#[tokio::test]
async fn a_replay_after_the_handler_is_fixed_applies_instead_of_reading_as_a_duplicate() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config();
    let receipts = orders_with_pending_payments(pool, &config, 2..=2).await;
    let worker = verdict_after_writing_worker(pool, &config);
    let mut connection = pool.acquire().await.expect("conn");
    let quarantined = domain::claim(&mut connection, 1, Duration::from_secs(30), "w").await;
    let attempts = process_batch(&worker, quarantined).await;
    assert!(
        matches!(
            attempts[..],
            [Attempt::Committed(Transition::Quarantine { .. })]
        ),
        "{attempts:?}"
    );

    // The cause fixed (the stock handler back), the replay applies: no false duplicate.
    admin::replay(
        &mut connection,
        &[inbound_core::keys::ReceiptId(receipts[0])],
        None,
        "test",
        "handler fixed",
    )
    .await
    .expect("replay");
    let fixed = domain::worker(pool, domain::settings());
    let attempts = step(&fixed).await;
    assert!(
        matches!(
            attempts[..],
            [Attempt::Committed(Transition::Applied { .. })]
        ),
        "{attempts:?}"
    );
    assert_eq!(domain::order_status(pool, "o2").await, "paid");
}

/// Replays `receipts` as operator `ops`, giving `reason`.
async fn replay_as_ops(
    pool: &sqlx::PgPool,
    receipts: &[i64],
    reason: &str,
) -> Result<(), admin::ReplayError> {
    let ids: Vec<_> = receipts
        .iter()
        .map(|&id| inbound_core::keys::ReceiptId(id))
        .collect();
    let mut connection = pool.acquire().await.expect("conn");
    admin::replay(&mut connection, &ids, None, "ops", reason).await
}

#[tokio::test]
async fn a_poison_receipt_fails_after_max_attempts_on_schedule_and_a_replay_applies_it() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config();
    let settings = domain::settings_with(|settings| {
        // Minutes of backoff, passed on the worker's clock instead of waited out.
        settings
            .max_attempts(4)
            .backoff_base(Duration::from_secs(60))
            .backoff_cap(Duration::from_secs(3600))
    });
    let worker = domain::worker(pool, settings);
    let poison = accept_succeeded(pool, &config, "evt_p", "pi_p", "o_late", 1000, "usd").await;

    // The worker's clock stands in for waiting: each delay is kept, then passed.
    let mut delays = Vec::new();
    for attempt in 1..=4 {
        match &step(&worker).await[..] {
            [Attempt::Retrying { delay_ms, .. }] if attempt < 4 => {
                delays.push(*delay_ms);
                let delay = Duration::from_millis(u64::try_from(*delay_ms).expect("ms"));
                worker.clock().advance(delay - Duration::from_secs(1));
                assert!(step(&worker).await.is_empty(), "claimed before its delay");
                worker.clock().advance(Duration::from_secs(2));
            }
            [Attempt::Failed { error }] if attempt == 4 => {
                assert!(error.contains("o_late does not exist"))
            }
            other => panic!("attempt {attempt}: {other:?}"),
        }
    }
    // Equal jitter around 60 s · 2^(n-1): [30, 60), [60, 120), [120, 240) seconds.
    for (index, delay) in delays.iter().enumerate() {
        let full = 60_000u128 << index;
        assert!(
            (full / 2..=full).contains(delay),
            "attempt {} waited {delay} ms",
            index + 1
        );
    }
    let detail = receipt_detail(pool, poison).await;
    assert_eq!(
        (detail.status.as_str(), detail.attempts, detail.visible_at),
        ("failed", 4, None)
    );

    // The order appears; an operator replays the receipt and it applies.
    domain::seed_order(pool, "o_late", "pi_p", 1000, "usd").await;
    replay_as_ops(pool, &[poison], "order created")
        .await
        .expect("replay");
    step(&worker).await;
    assert_eq!(
        domain::receipt_state(pool, poison).await,
        (ReceiptStatus::Done, Some(ReceiptOutcome::Applied), None)
    );
    let replays: (String, String, String) = sqlx::query_as(
        "SELECT previous_status, replayed_by, reason FROM receipt_replays WHERE receipt_id = $1",
    )
    .bind(poison)
    .fetch_one(pool)
    .await
    .expect("replay recorded");
    assert_eq!(
        replays,
        ("failed".into(), "ops".into(), "order created".into())
    );
}

/// A replay that names a receipt which does not exist is refused whole, and so is one of
/// a receipt that is done: only failed or quarantined receipts, and pending ones, replay.
#[tokio::test]
async fn a_replay_naming_an_unknown_receipt_or_a_done_one_is_refused() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config();
    // Failed at its first attempt, its order not created yet.
    let settings = domain::settings_with(|settings| settings.max_attempts(1));
    let worker = domain::worker(pool, settings);
    let poison = accept_succeeded(pool, &config, "evt_p", "pi_p", "o_late", 1000, "usd").await;
    let attempts = step(&worker).await;
    assert!(
        matches!(attempts[..], [Attempt::Failed { .. }]),
        "{attempts:?}"
    );

    domain::seed_order(pool, "o_late", "pi_p", 1000, "usd").await;
    let refused = replay_as_ops(pool, &[poison, 999_999], "order created").await;
    assert!(refused.is_err_and(|error| error.to_string() == "receipt 999999 does not exist"));
    replay_as_ops(pool, &[poison], "order created")
        .await
        .expect("replay");
    step(&worker).await;
    let wrong_state = replay_as_ops(pool, &[poison], "again").await;
    assert!(wrong_state.is_err_and(|error| {
        error
            .to_string()
            .contains("is done; only failed or quarantined receipts (queued again) and pending")
    }));
}

#[tokio::test]
async fn purge_drops_payloads_then_keys_and_duplicates_stay_detected_until_then() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config();
    let worker = domain::worker(pool, domain::settings());
    domain::seed_order(pool, "o1", "pi_1", 1000, "usd").await;
    let body = succeeded("evt_1", "pi_1", "o1", 1000, "usd");
    let receipt = domain::accept(pool, &config, &body).await.expect("new");
    step(&worker).await;
    // The effect is completed by the dispatcher in production; here by hand, so the key
    // row becomes purgeable.
    sqlx::query("UPDATE effects SET status = 'completed'")
        .execute(pool)
        .await
        .expect("complete");
    // Purged as if 10 days had passed.
    domain::age_receipts(pool, 10).await;

    let mut connection = pool.acquire().await.expect("conn");
    assert_eq!(
        admin::purge_payloads_batch(&mut connection, 7, 100)
            .await
            .expect("purge"),
        1
    );
    let detail = admin::receipt_detail(&mut connection, inbound_core::keys::ReceiptId(receipt))
        .await
        .expect("query")
        .expect("row");
    assert!(detail.payload.is_none(), "payload dropped");
    assert_eq!(
        domain::accept(pool, &config, &body).await,
        None,
        "the key row still detects the duplicate"
    );
    assert_eq!(
        admin::purge_keys_batch(&mut connection, 30, 100)
            .await
            .expect("purge"),
        0,
        "not old enough"
    );
    assert_eq!(
        admin::purge_keys_batch(&mut connection, 7, 100)
            .await
            .expect("purge"),
        1
    );
    assert!(
        admin::receipt_detail(&mut connection, inbound_core::keys::ReceiptId(receipt))
            .await
            .expect("query")
            .is_none()
    );
    assert_eq!(
        domain::order_status(pool, "o1").await,
        "paid",
        "business state stays"
    );
}

/// No foreign key ties a queue row to its receipt (migration 0004: it cost the hot insert
/// a trigger per row): purge itself never deletes a receipt that still has one, however
/// it got there, so no queue row is ever left without its receipt.
#[tokio::test]
async fn purge_never_strands_a_queue_row() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config();
    let receipt = domain::accept(
        pool,
        &config,
        &succeeded("evt_1", "pi_1", "o1", 1000, "usd"),
    )
    .await
    .expect("new");
    // A done receipt that still has its queue row: no statement of inbound's leaves one,
    // so it is made by hand.
    sqlx::query(
        "UPDATE receipts SET status = 'done', outcome = 'ignored', finished_at = now() - interval '30 days',
                             received_at = now() - interval '30 days'",
    )
    .execute(pool)
    .await
    .expect("done by hand");
    let mut connection = pool.acquire().await.expect("conn");
    let (_, keys) = admin::purge_preview(&mut connection, 7, Some(7))
        .await
        .expect("preview");
    assert_eq!(keys, 0, "the dry run counts what purge would delete");
    assert_eq!(
        admin::purge_keys_batch(&mut connection, 7, 100)
            .await
            .expect("purge"),
        0
    );
    let queued: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM receipt_queue q JOIN receipts r ON r.id = q.receipt_id WHERE r.id = $1",
    )
    .bind(receipt)
    .fetch_one(pool)
    .await
    .expect("queue row");
    assert_eq!(queued, 1, "the receipt and its queue row both stay");
}

#[tokio::test]
async fn key_rows_with_undelivered_effects_are_kept() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config();
    let worker = domain::worker(pool, domain::settings());
    domain::seed_order(pool, "o1", "pi_1", 1000, "usd").await;
    accept_succeeded(pool, &config, "evt_1", "pi_1", "o1", 1000, "usd").await;
    step(&worker).await;
    domain::age_receipts(pool, 10).await;
    let mut connection = pool.acquire().await.expect("conn");
    assert_eq!(
        admin::purge_keys_batch(&mut connection, 7, 100)
            .await
            .expect("purge"),
        0,
        "its effect is still pending"
    );
}

/// A sender chooses the ids that reasons name: however long they are, what is stored and
/// logged about one receipt stays bounded.
#[tokio::test]
async fn reasons_naming_payload_values_are_bounded() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config();
    let long_order = "o".repeat(20_000);
    let receipt = accept_succeeded(pool, &config, "evt_1", "pi_1", &long_order, 1000, "usd").await;
    let worker = domain::worker(pool, domain::settings());
    let attempts = step(&worker).await;
    let Attempt::Retrying { error, .. } = &attempts[0] else {
        panic!("{attempts:?}")
    };
    assert!(
        error.len() <= inbound_worker::test_hooks::MAX_REASON_BYTES,
        "{}",
        error.len()
    );
    let stored: String = sqlx::query_scalar("SELECT last_error FROM receipts WHERE id = $1")
        .bind(receipt)
        .fetch_one(pool)
        .await
        .expect("receipt");
    assert!(stored.len() <= inbound_worker::test_hooks::MAX_REASON_BYTES);
}

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
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config();
    let worker = slowly_retrying_worker(pool);
    seed_classification_orders(pool).await;
    for (event, payment, order) in [
        ("evt_p1", "pi_paid", "o_paid"),
        ("evt_p2", "pi_cp", "o_cancel_paid"),
        ("evt_p3", "pi_ra", "o_refund_amount"),
        ("evt_p4", "pi_cap", "o_capture"),
    ] {
        accept_succeeded(pool, &config, event, payment, order, 1000, "usd").await;
    }
    let upper = accept_succeeded(pool, &config, "evt_up", "pi_upper", "o_upper", 1000, "usd").await;
    step(&worker).await;
    sqlx::query(
        "UPDATE orders SET status = 'canceled' WHERE id IN ('o_cancel_paid', 'o_cancel_unpaid')",
    )
    .execute(pool)
    .await
    .expect("the business cancels two orders");
    let mut decided = Vec::new();
    for decision in classification_decisions() {
        let receipt = domain::accept(pool, &config, &decision.event).await;
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
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config();
    let worker = domain::worker(pool, domain::settings());
    let now = chrono::Utc::now().timestamp();
    paid_then_refunded(pool, &config, &worker, now).await;
    assert_eq!(domain::order_status(pool, "o1").await, "refunded");

    let failed = accept_new(pool, &config, &re_1_updated("evt_u1", "failed", now - 50)).await;
    step(&worker).await;
    assert_eq!(
        domain::receipt_state(pool, failed).await.1,
        Some(ReceiptOutcome::Applied)
    );
    assert_eq!(domain::order_status(pool, "o1").await, "paid");
    // The same failure again (another event id: Stripe's refund.updated beside it).
    let again = accept_new(pool, &config, &re_1_updated("evt_u2", "failed", now - 40)).await;
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
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config();
    let worker = domain::worker(pool, domain::settings());
    let now = chrono::Utc::now().timestamp();
    refunded_then_failed(pool, &config, &worker, now).await;

    let stale = accept_new(pool, &config, &o1_refunded("evt_r1_late", now - 100)).await;
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
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config();
    let worker = domain::worker(pool, domain::settings());
    let now = chrono::Utc::now().timestamp();
    refunded_then_failed(pool, &config, &worker, now).await;

    let second = accept_new(pool, &config, &o1_refunded("evt_r2", now)).await;
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
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config();
    let worker = domain::worker(pool, domain::settings());
    let now = chrono::Utc::now().timestamp();
    paid_then_refunded(pool, &config, &worker, now).await;

    let pending = accept_new(pool, &config, &re_1_updated("evt_u0", "pending", now - 90)).await;
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
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config();
    let worker = domain::worker(pool, domain::settings());
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
    accept_succeeded(pool, &config, "evt_p1", "pi_1", "o1", 1000, "usd").await;
    step(&worker).await;
    domain::accept(pool, &config, &refunded("evt_r1", now - 300))
        .await
        .expect("new");
    step(&worker).await;
    assert_eq!(domain::order_status(pool, "o1").await, "refunded");
    // The second refund (created after the failure) is processed first.
    domain::accept(pool, &config, &refunded("evt_r2", now - 100))
        .await
        .expect("new");
    step(&worker).await;
    let failure = domain::stripe_event_at(
        "evt_u1",
        "charge.refund.updated",
        domain::refund("re_1", "pi_1", 1000, "failed"),
        now - 200,
    );
    let failure = domain::accept(pool, &config, &failure).await.expect("new");
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
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config();
    let worker = domain::worker(pool, domain::settings());
    let now = chrono::Utc::now().timestamp();
    domain::seed_order(pool, "o1", "pi_1", 1000, "usd").await;
    accept_succeeded(pool, &config, "evt_p1", "pi_1", "o1", 1000, "usd").await;
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
    domain::accept(pool, &config, &refunded).await.expect("new");
    step(&worker).await;
    assert_eq!(domain::order_status(pool, "o1").await, "refunded");
    let failure = domain::stripe_event_at(
        "evt_u1",
        "charge.refund.updated",
        domain::refund("re_1", "pi_1", 1000, "failed"),
        now - 50,
    );
    domain::accept(pool, &config, &failure).await.expect("new");
    step(&worker).await;
    assert_eq!(domain::order_status(pool, "o1").await, "canceled");
}

/// A refund and the failure of that refund, processed at once by two workers: whichever
/// commits first, the order ends `paid`. The failure's transaction is held open here
/// after recording the failure (as `orders.refund` does, under the payment's lock); the
/// refund must wait for it and then see the failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refund_racing_its_own_failure_never_leaves_the_order_refunded() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config();
    let worker = domain::worker(pool, domain::settings());
    let now = chrono::Utc::now().timestamp();
    domain::seed_order(pool, "o1", "pi_1", 1000, "usd").await;
    accept_succeeded(pool, &config, "evt_p1", "pi_1", "o1", 1000, "usd").await;
    step(&worker).await;
    let refunded = domain::stripe_event_at(
        "evt_r1",
        "charge.refunded",
        domain::order_charge("pi_1", "o1", 1000, 1000),
        now - 100,
    );
    let refund = domain::accept(pool, &config, &refunded).await.expect("new");

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
