//! Entitlement grants from paid invoices: prices mapped per route, downgrades and long
//! invoices read as Stripe sends them, one customer per invoice.

use super::*;

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
    let fixture = domain::Fixture::new().await;
    let (pool, config, worker) = (fixture.pool(), &fixture.config, fixture.worker());
    let first = domain::accept_event(
        pool,
        config,
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
        config,
        "evt_i3",
        "invoice.paid",
        invoice("in_1", "cus_a", &["price_pro", "price_team"]),
    )
    .await;
    let other_customer = domain::accept_event(
        pool,
        config,
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
    let fixture = domain::Fixture::new().await;
    let (pool, config, worker) = (fixture.pool(), &fixture.config, fixture.worker());
    let unmapped = domain::accept_event(
        pool,
        config,
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
