//! The ingress application: paths and methods, health endpoints, and the per-request
//! metrics and log line. [`App::handle`] is what the server calls for every request.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use http::{Method, Request, Response};
use hyper::body::Incoming;
use inbound_core::clock::Clock;
use inbound_core::config::Config;
use inbound_runtime::ops::{self, Readiness};
use sqlx::PgPool;
use tokio::time::Instant;

use crate::body::BodyBudget;
use crate::group_commit::GroupCommit;
use crate::log_budget::LogBudget;
pub use crate::receive::AppSettings;
use crate::receive::{self, Details, Pipeline};
use crate::reply::{Body, Reply};
use crate::telemetry::RequestMetrics;
use crate::verification::Verification;

/// Shared state of every request.
pub struct App {
    config: Arc<Config>,
    pool: PgPool,
    readiness: Readiness,
    pipeline: Pipeline,
    request_timeout: Duration,
    /// Per integration id.
    request_metrics: HashMap<String, RequestMetrics>,
    /// Requests to ids no integration has.
    unknown_metrics: RequestMetrics,
    /// How many refusal lines each integration (and `unknown`) may write.
    log_budgets: HashMap<String, LogBudget>,
    unknown_log_budget: LogBudget,
}

impl App {
    /// Builds the application over a validated config, a (lazy) pool, the group commit
    /// that writes receipts through it, the budget request bodies share and the
    /// database's readiness as the background probe last saw it.
    pub fn new(
        config: Arc<Config>,
        pool: PgPool,
        group_commit: GroupCommit,
        body_budget: BodyBudget,
        readiness: Readiness,
        clock: Arc<dyn Clock>,
        settings: AppSettings,
    ) -> Self {
        let request_metrics = config
            .integrations()
            .iter()
            .map(|integration| (integration.id.clone(), RequestMetrics::new(&integration.id)))
            .collect();
        let verification =
            Verification::new(Arc::clone(&config), Verification::default_concurrency());
        let log_budgets = config
            .integrations()
            .iter()
            .map(|integration| (integration.id.clone(), LogBudget::default()))
            .collect();
        Self {
            request_metrics,
            unknown_metrics: RequestMetrics::new("unknown"),
            log_budgets,
            unknown_log_budget: LogBudget::default(),
            config,
            pool,
            readiness,
            request_timeout: settings.request_timeout,
            pipeline: Pipeline::new(group_commit, body_budget, verification, clock, settings),
        }
    }

    /// The database pool.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Answers one request.
    pub async fn handle(self: Arc<Self>, request: Request<Incoming>) -> Response<Body> {
        let path = request.uri().path();
        if let Some(integration_id) = path.strip_prefix("/webhooks/") {
            let integration_id = integration_id.to_owned();
            return self.handle_webhook(integration_id, request).await;
        }
        match (request.method(), path) {
            (&Method::GET | &Method::HEAD, "/healthz") => ops::liveness(),
            // Answered from the background probe: a public request never reaches the
            // database.
            (&Method::GET | &Method::HEAD, "/readyz") => ops::readiness(&self.readiness),
            (_, "/healthz" | "/readyz") => Reply::MethodNotAllowed("GET, HEAD").into_response(),
            _ => Reply::NotFound.into_response(),
        }
    }

    async fn handle_webhook(
        &self,
        integration_id: String,
        request: Request<Incoming>,
    ) -> Response<Body> {
        let started = Instant::now();
        let deadline = started + self.request_timeout;
        let integration = self.config.integration(&integration_id);
        let (reply, details) = if request.method() != Method::POST {
            (Reply::MethodNotAllowed("POST"), Details::default())
        } else if let Some(integration) = integration {
            let (parts, body) = request.into_parts();
            let outcome =
                receive::receive(&self.pipeline, integration, &parts, body, deadline).await;
            (outcome.reply, outcome.details)
        } else {
            (Reply::UnknownIntegration, Details::default())
        };
        // Unknown ids come from the caller: never let them become label values.
        let label = integration.map_or("unknown", |integration| integration.id.as_str());
        let elapsed = started.elapsed();
        self.request_metrics
            .get(label)
            .unwrap_or(&self.unknown_metrics)
            .record(reply.outcome_label(), reply.is_delivery(), elapsed);
        // Every delivery is logged; refusals within a budget (log_budget.rs).
        let suppressed = if reply.is_delivery() {
            Some(0)
        } else {
            self.log_budgets
                .get(label)
                .unwrap_or(&self.unknown_log_budget)
                .admit(reply.outcome_label())
        };
        let Some(suppressed) = suppressed else {
            return reply.into_response();
        };
        tracing::info!(
            integration = label,
            outcome = reply.outcome_label(),
            event_id = details.event_id.as_ref().map(|id| id.as_str()),
            event_type = details.event_type.as_deref(),
            receipt_id = match &reply {
                Reply::Accepted(id) => Some(id.0),
                _ => None,
            },
            reason = details.reason.as_deref(),
            scope = details.scope.as_deref(),
            suppressed = (suppressed > 0).then_some(suppressed),
            duration_ms = inbound_runtime::logging::millis(elapsed),
            "webhook"
        );
        reply.into_response()
    }
}
