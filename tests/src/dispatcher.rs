//! A dispatcher driven step by step against a real HTTP sink ([`crate::sink::TestSink`]),
//! with effect intents recorded the way the worker records them.

use std::sync::Arc;
use std::time::Duration;

use inbound_core::config::Config;
use inbound_core::states::EffectStatus;
use inbound_store::effects::{self, SourceEvent};
use inbound_store::handlers::EffectIntent;
use inbound_worker::test_hooks::{self as dispatcher, dispatch_once};
use inbound_worker::{Worker, WorkerSettings};
use sqlx::PgPool;

use crate::TestDatabase;
use crate::domain::{self, payment_intent, stripe_event};
use crate::sink::TestSink;

/// A migrated database, a sink, and a worker configured for it.
pub struct Harness {
    /// The database.
    pub database: TestDatabase,
    /// The sink every configured sink URL points at.
    pub sink: TestSink,
    /// The worker.
    pub worker: Arc<Worker>,
    /// The dispatcher's HTTP client.
    pub client: reqwest::Client,
}

/// `(status, attempts, maybe_delivered, seconds until due)`.
pub type EffectState = (EffectStatus, i32, bool, f64);

impl Harness {
    /// Starts a sink, then a worker whose configuration `config` builds for it.
    pub async fn start(config: impl FnOnce(&TestSink) -> Config, settings: WorkerSettings) -> Self {
        let database = TestDatabase::create().await;
        let sink = TestSink::start().await;
        let worker = domain::worker_with_config(database.pool(), config(&sink), settings);
        Self {
            database,
            sink,
            worker,
            client: dispatcher::http_client().expect("client"),
        }
    }

    /// The database pool.
    pub fn pool(&self) -> &PgPool {
        self.database.pool()
    }

    /// Records an intent for `sink` (with a receipt of its own) and returns its key.
    pub async fn intent(&self, sink: &str, key: &str) -> String {
        let body = stripe_event(
            &format!("evt_{key}"),
            "payment_intent.succeeded",
            payment_intent("pi", "o", 1, "usd", "succeeded"),
        );
        let receipt = domain::accept(self.pool(), self.worker.config(), &body)
            .await
            .expect("new receipt");
        let intent = EffectIntent {
            operation_key: key.to_owned(),
            sink: sink.to_owned(),
            kind: "order.paid".to_owned(),
            data: serde_json::json!({"order_id": "o"}),
        };
        let event = SourceEvent {
            integration: "stripe-acme",
            id: "evt",
            event_type: "payment_intent.succeeded",
            delivery: None,
        };
        let mut connection = self.pool().acquire().await.expect("conn");
        effects::insert_intent(
            &mut connection,
            inbound_core::keys::ReceiptId(receipt),
            "acme",
            event,
            &intent,
        )
        .await
        .expect("insert")
        .expect("a new operation key");
        key.to_owned()
    }

    /// Claims what is due and moves each effect one step.
    pub async fn step(&self) -> Vec<dispatcher::Step> {
        dispatch_once(&self.worker, &self.client)
            .await
            .expect("dispatch")
    }

    /// The effect's [`EffectState`], its due time counted from the worker's clock.
    pub async fn effect(&self, key: &str) -> EffectState {
        sqlx::query_as(
            "SELECT status, attempts, maybe_delivered,
                    EXTRACT(EPOCH FROM visible_at - coalesce($2, now()))::float8
             FROM effects WHERE operation_key = $1",
        )
        .bind(key)
        .bind(self.worker.clock().now())
        .fetch_one(self.pool())
        .await
        .expect("effect")
    }

    /// Moves the worker's clock to when every open effect is due, as waiting would (every
    /// effect ages by as much), instead of sleeping through backoffs or rewriting rows.
    pub async fn expedite(&self) {
        let latest: Option<f64> = sqlx::query_scalar(
            "SELECT EXTRACT(EPOCH FROM max(visible_at) - coalesce($1, now()))::float8
             FROM effects WHERE status IN ('pending', 'in_flight', 'uncertain')",
        )
        .bind(self.worker.clock().now())
        .fetch_one(self.pool())
        .await
        .expect("the latest due time");
        if let Some(seconds) = latest.filter(|seconds| *seconds > 0.0) {
            self.advance(Duration::from_secs_f64(seconds) + Duration::from_millis(1));
        }
    }

    /// Moves the worker's clock ahead by `by` (a horizon or a retention passes at once).
    pub fn advance(&self, by: Duration) {
        self.worker.clock().advance(by);
    }
}
