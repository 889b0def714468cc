//! The reference business domain for worker tests: seeded orders, Stripe events as the
//! worker sees them, receipts accepted through core's real acceptance path, and an
//! in-process worker over a test database.

use std::sync::Arc;
use std::time::Duration;

use inbound_core::config::Config;
use inbound_core::event::{self, Extracted};
use inbound_core::headers::Headers;
use inbound_core::provider;
use inbound_core::states::{ReceiptOutcome, ReceiptStatus};
use inbound_store as store;
use inbound_store::handlers::Registry;
use inbound_worker::{Worker, WorkerSettings, WorkerSettingsBuilder};
use serde_json::{Value, json};
use sqlx::PgPool;

use crate::config::ConfigEdit;
use crate::fixtures;
use crate::process::ScratchDir;

/// The tenant of `stripe-acme`.
pub const TENANT: &str = "acme";

/// Inserts an order of [`TENANT`] awaiting payment.
pub async fn seed_order(
    pool: &PgPool,
    order_id: &str,
    payment_id: &str,
    total_minor: i64,
    currency: &str,
) {
    seed_order_of(pool, TENANT, order_id, payment_id, total_minor, currency).await;
}

/// Inserts an order of `tenant` awaiting payment.
pub async fn seed_order_of(
    pool: &PgPool,
    tenant: &str,
    order_id: &str,
    payment_id: &str,
    total_minor: i64,
    currency: &str,
) {
    sqlx::query(
        "INSERT INTO orders (tenant_id, id, provider_payment_id, total_minor, currency) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(tenant)
    .bind(order_id)
    .bind(payment_id)
    .bind(total_minor)
    .bind(currency)
    .execute(pool)
    .await
    .expect("seed order");
}

/// The status of an order.
pub async fn order_status(pool: &PgPool, order_id: &str) -> String {
    sqlx::query_scalar("SELECT status FROM orders WHERE tenant_id = $1 AND id = $2")
        .bind(TENANT)
        .bind(order_id)
        .fetch_one(pool)
        .await
        .expect("order exists")
}

/// A Stripe event body for `stripe-acme` with `object` as `data.object`.
pub fn stripe_event(event_id: &str, event_type: &str, object: Value) -> String {
    stripe_event_at(event_id, event_type, object, chrono::Utc::now().timestamp())
}

/// [`stripe_event`] created at `created` (Unix seconds).
pub fn stripe_event_at(event_id: &str, event_type: &str, object: Value, created: i64) -> String {
    json!({
        "id": event_id, "object": "event", "type": event_type, "account": "acct_123",
        "livemode": true, "created": created, "data": {"object": object}
    })
    .to_string()
}

/// The Charge of an order's PaymentIntent (Stripe copies the PaymentIntent's metadata,
/// `order_id` with it, onto the charge it creates), `refunded` of `amount`.
pub fn order_charge(payment_id: &str, order_id: &str, amount: i64, refunded: i64) -> Value {
    let mut charge = charge(payment_id, amount, refunded);
    charge["metadata"] = json!({"order_id": order_id});
    charge
}

/// A Refund object (`charge.refund.updated`) of `amount` for `payment_id`, in `status`.
pub fn refund(refund_id: &str, payment_id: &str, amount: i64, status: &str) -> Value {
    json!({
        "id": refund_id, "object": "refund", "amount": amount, "currency": "usd",
        "charge": format!("ch_{payment_id}"), "payment_intent": payment_id, "status": status,
        "failure_reason": if status == "failed" { json!("expired_or_canceled_card") } else { Value::Null }
    })
}

/// A PaymentIntent object.
pub fn payment_intent(
    payment_id: &str,
    order_id: &str,
    amount: i64,
    currency: &str,
    status: &str,
) -> Value {
    json!({
        "id": payment_id, "object": "payment_intent", "status": status,
        "amount_received": amount, "currency": currency, "metadata": {"order_id": order_id}
    })
}

/// A Charge object refunding `refunded` of `amount`.
pub fn charge(payment_id: &str, amount: i64, refunded: i64) -> Value {
    json!({
        "id": format!("ch_{payment_id}"), "object": "charge", "payment_intent": payment_id,
        "amount": amount, "amount_refunded": refunded, "refunded": refunded == amount
    })
}

/// A paid Invoice object with one line per price (each 1000, not a proration).
pub fn invoice(invoice_id: &str, customer: &str, prices: &[&str]) -> Value {
    let lines: Vec<Value> = prices
        .iter()
        .map(|price| json!({"price": {"id": price}, "amount": 1000, "proration": false}))
        .collect();
    invoice_with_lines(invoice_id, customer, "paid", lines, false)
}

/// An Invoice object as Stripe sends it: its status, its lines (`lines.data`) and
/// whether more lines exist than the event carries (`lines.has_more`).
pub fn invoice_with_lines(
    invoice_id: &str,
    customer: &str,
    status: &str,
    lines: Vec<Value>,
    has_more: bool,
) -> Value {
    json!({
        "id": invoice_id, "object": "invoice", "customer": customer, "status": status,
        "paid": status == "paid",
        "lines": {"object": "list", "data": lines, "has_more": has_more}
    })
}

/// The test configuration, loaded in process (secrets from the fixture values).
pub fn config() -> Config {
    config_edited(|_| {})
}

/// [`config`] with `edit` applied to it first.
pub fn config_edited(edit: impl FnOnce(&mut ConfigEdit)) -> Config {
    let scratch = ScratchDir::new();
    let options = fixtures::ingress_options("unused");
    for (name, contents) in &options.files {
        std::fs::write(scratch.path().join(name), contents).expect("write file");
    }
    let mut config = ConfigEdit::parse(&options.config_toml);
    edit(&mut config);
    let text = config
        .to_toml()
        .replace("{scratch}", &scratch.path().display().to_string());
    let env: std::collections::HashMap<String, String> = options.env.into_iter().collect();
    Config::from_toml(&text, &|name| env.get(name).cloned()).expect("fixture config is valid")
}

/// Accepts `body` for `stripe-acme` exactly as the ingress would (after verification);
/// `Some(receipt id)` when new, `None` for a duplicate receipt key.
pub async fn accept(pool: &PgPool, config: &Config, body: &str) -> Option<i64> {
    accept_routed(pool, config, "stripe-acme", body)
        .await
        .expect("fixture event is routed")
}

/// Accepts `body` for `integration` exactly as the ingress would (after verification):
/// `None` when no route takes it (not stored), else `Some(receipt id)` when new and
/// `Some(None)` for a duplicate receipt key.
pub async fn accept_routed(
    pool: &PgPool,
    config: &Config,
    integration: &str,
    body: &str,
) -> Option<Option<i64>> {
    accept_with_headers(pool, config, integration, &[], body).await
}

/// [`accept_routed`] for a provider that reads headers (GitHub's delivery id and event).
pub async fn accept_with_headers(
    pool: &PgPool,
    config: &Config,
    integration: &str,
    headers: &[(&str, &[u8])],
    body: &str,
) -> Option<Option<i64>> {
    let integration = config.integration(integration).expect("integration");
    let headers: Headers = headers.iter().copied().collect();
    let Ok(Extracted::Event(event)) = provider::extract(integration, &headers, body.as_bytes())
    else {
        panic!("fixture event does not extract: {body}");
    };
    let (route_key, route) = event::find_route(integration, &event)?;
    // What the ingress would store: the route's subject and order.
    let subject = event::subject_for(route, &event, &event.payload_json);
    let receipt = store::NewReceipt {
        integration: &integration.id,
        source_scope: &event.source_scope,
        event_id: &event.event_id,
        event_type: &event.event_type,
        route_key,
        payload_json: &event.payload_json,
        content_digest: None,
        delivery_json: event.delivery.as_deref(),
        order: store::ReceiptOrder {
            subject: subject.as_deref(),
            event_at: event.event_at,
            ordered: route.ordered,
        },
    };
    let mut connection = pool.acquire().await.expect("connection");
    Some(
        match store::insert_receipt(&mut connection, receipt)
            .await
            .expect("insert receipt")
        {
            store::InsertOutcome::Accepted(id) => Some(id.0),
            store::InsertOutcome::Duplicate => None,
        },
    )
}

/// Accepts a new Stripe event built from `object` and returns its receipt id (panics on a
/// duplicate: callers use fresh event ids).
pub async fn accept_event(
    pool: &PgPool,
    config: &Config,
    event_id: &str,
    event_type: &str,
    object: Value,
) -> i64 {
    accept(pool, config, &stripe_event(event_id, event_type, object))
        .await
        .expect("a new receipt")
}

/// Seeds order `o1` (PaymentIntent `pi_1`, 1000 usd) and accepts `evt_1` paying it.
pub async fn order_with_pending_payment(pool: &PgPool, config: &Config) -> i64 {
    seed_order(pool, "o1", "pi_1", 1000, "usd").await;
    accept_event(
        pool,
        config,
        "evt_1",
        "payment_intent.succeeded",
        payment_intent("pi_1", "o1", 1000, "usd", "succeeded"),
    )
    .await
}

/// Where most handler tests start: a fresh database with the reference domain's tables and
/// its configuration ([`config`]).
pub struct Fixture {
    /// The scratch database.
    pub database: crate::TestDatabase,
    /// The reference domain's configuration.
    pub config: Config,
}

impl Fixture {
    /// A fresh database and [`config`].
    pub async fn new() -> Self {
        Self {
            database: crate::TestDatabase::create().await,
            config: config(),
        }
    }

    /// The database's pool.
    pub fn pool(&self) -> &PgPool {
        self.database.pool()
    }

    /// An in-process worker over the database with the test [`settings`].
    pub fn worker(&self) -> Arc<Worker> {
        worker(self.pool(), settings())
    }
}

/// Settings for an in-process worker: small, fast, and deterministic enough for tests.
pub fn settings() -> WorkerSettings {
    settings_with(|settings| settings)
}

/// [`settings`], adjusted (`|settings| settings.max_attempts(3)`).
pub fn settings_with(
    adjust: impl FnOnce(WorkerSettingsBuilder) -> WorkerSettingsBuilder,
) -> WorkerSettings {
    let builder = WorkerSettings::builder()
        .concurrency(8)
        // Batches of up to 4: steps with more than 8 receipts complete them together.
        .batch_size(4)
        .effect_concurrency(8)
        .lease(Duration::from_secs(30))
        .statement_timeout(Duration::from_secs(5))
        .poll_interval(Duration::from_millis(50))
        .max_attempts(10)
        .backoff_base(Duration::from_millis(100))
        .backoff_cap(Duration::from_secs(2))
        .worker_id("test-worker")
        .shutdown_grace(Duration::from_secs(5))
        .payload_budget_bytes(8 * 1024 * 1024);
    adjust(builder).build().expect("test settings within range")
}

/// The stock worker's handlers: inbound's built-ins and the example domain's.
pub fn stock_registry() -> Registry {
    let mut registry = Registry::builtin();
    inbound_example::register(&mut registry);
    registry
}

/// A worker over `pool` in this process.
pub fn worker(pool: &PgPool, settings: WorkerSettings) -> Arc<Worker> {
    worker_with_config(pool, config(), settings)
}

/// A worker over `pool` with its own configuration.
pub fn worker_with_config(pool: &PgPool, config: Config, settings: WorkerSettings) -> Arc<Worker> {
    Arc::new(Worker::new(
        pool.clone(),
        Arc::new(config),
        stock_registry(),
        settings,
    ))
}

/// Claims up to `receipts` visible receipts for `worker_id` with no byte bound, as a
/// worker slot would (attempts bounded as [`settings`] bounds them).
pub async fn claim(
    connection: &mut sqlx::PgConnection,
    receipts: i64,
    lease: Duration,
    worker_id: &str,
) -> Vec<store::queue::ClaimedReceipt> {
    claim_at(connection, receipts, lease, worker_id, None).await
}

/// [`claim`] at the time `now` (`None`: the database's), as a worker whose clock reads it.
pub async fn claim_at(
    connection: &mut sqlx::PgConnection,
    receipts: i64,
    lease: Duration,
    worker_id: &str,
    now: Option<chrono::DateTime<chrono::Utc>>,
) -> Vec<store::queue::ClaimedReceipt> {
    let limits = store::queue::ClaimLimits {
        receipts,
        payload_bytes: i64::MAX,
        allow_one_larger: true,
        max_attempts: settings().max_attempts(),
        statement_limit: settings().statement_limit(),
    };
    let cursor = store::queue::SubjectCursor::default();
    store::queue::claim_batch(connection, limits, lease, worker_id, None, &cursor, now)
        .await
        .expect("claim")
        .claimed
}

/// A receipt's `(status, outcome, outcome_reason)`, the states as their enums.
pub async fn receipt_state(
    pool: &PgPool,
    receipt_id: i64,
) -> (ReceiptStatus, Option<ReceiptOutcome>, Option<String>) {
    sqlx::query_as("SELECT status, outcome, outcome_reason FROM receipts WHERE id = $1")
        .bind(receipt_id)
        .fetch_one(pool)
        .await
        .expect("receipt exists")
}

/// Asserts that `receipt_id` ended `status` with `outcome`, its reason containing
/// `reason_part`.
pub async fn assert_ended(
    pool: &PgPool,
    receipt_id: i64,
    status: ReceiptStatus,
    outcome: Option<ReceiptOutcome>,
    reason_part: &str,
) {
    let (actual_status, actual_outcome, reason) = receipt_state(pool, receipt_id).await;
    assert_eq!(
        (actual_status, actual_outcome),
        (status, outcome),
        "receipt {receipt_id}: {reason:?}"
    );
    assert!(
        reason
            .as_deref()
            .is_some_and(|reason| reason.contains(reason_part)),
        "receipt {receipt_id}: {reason:?} does not say {reason_part:?}"
    );
}

/// The operation keys of every effect, in order.
pub async fn operation_keys(pool: &PgPool) -> Vec<String> {
    sqlx::query_scalar("SELECT operation_key FROM effects ORDER BY id")
        .fetch_all(pool)
        .await
        .expect("effects")
}

/// A payment receipt of `stripe-acme` set to `status` (out of the queue unless pending).
pub async fn receipt_in(pool: &sqlx::PgPool, event_id: &str, status: &str) -> i64 {
    let body = stripe_event(
        event_id,
        "payment_intent.succeeded",
        payment_intent(&format!("pi_{event_id}"), "o1", 1000, "usd", "succeeded"),
    );
    let id = accept(pool, &config(), &body).await.expect("new");
    if status != "pending" {
        sqlx::query("DELETE FROM receipt_queue WHERE receipt_id = $1")
            .bind(id)
            .execute(pool)
            .await
            .expect("dequeue");
        // "done_later": applied (its effects are added by the caller).
        let status = if status == "done_later" {
            "done"
        } else {
            status
        };
        sqlx::query(
            "UPDATE receipts SET status = $2, finished_at = now(),
                 outcome = CASE $2 WHEN 'done' THEN 'applied' END,
                 outcome_reason = CASE $2 WHEN 'quarantined' THEN 'amount mismatch' END,
                 last_error = CASE $2 WHEN 'failed' THEN 'order does not exist' END
             WHERE id = $1",
        )
        .bind(id)
        .bind(status)
        .execute(pool)
        .await
        .expect("set status");
    }
    id
}

/// An effect in `status` for sink `audit`.
pub async fn effect_in(pool: &sqlx::PgPool, key: &str, status: &str) -> i64 {
    let receipt = receipt_in(pool, &format!("evt_{key}"), "done_later").await;
    sqlx::query_scalar(
        "INSERT INTO effects (id, receipt_id, operation_key, sink, kind, tenant, data, event, status, attempts, last_error)
         VALUES (effect_id_for($1), $1, $2, 'audit', 'order.paid', 'acme', '{}', '{}', $3, 1, 'unknown outcome') RETURNING id",
    )
    .bind(receipt)
    .bind(key)
    .bind(status)
    .fetch_one(pool)
    .await
    .expect("effect")
}
