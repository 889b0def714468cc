//! The effects dispatcher: claims due effects with leases (fenced like receipts) and moves
//! each one step along its state machine ([`inbound_core::effects`]).
//!
//! - `pending`: the claim itself committed the attempt as `in_flight` (one statement for
//!   the whole claim); POST to the sink with the operation key as idempotency key (and
//!   Standard Webhooks signature headers when the sink has secrets), then record what the
//!   rules decide, group-committed with other outcomes ([`crate::recorder`]). No
//!   transaction is open during the request.
//! - `in_flight` (claimable only after its holder's lease expired: the worker died with
//!   the request possibly sent): judged as an attempt whose outcome is unknown.
//! - `uncertain`: ask `status_url` and record what the rules decide.

use std::time::{Duration, Instant};

use inbound_core::config::Sink;
use inbound_core::effects::{self, Decision, Delivery, History, Reconciliation, SinkPolicy};
use inbound_core::store::effects::{
    self as store, ClaimedEffect, FinishedDelivery, InFlightLease, StepRecord,
};
use inbound_service::failpoint;

use crate::Worker;
use crate::backoff::retry_delay;
use crate::recorder::{Recorded, Recorder};
use crate::telemetry::EFFECT_ATTEMPTS_TOTAL;

/// Extra lease beyond the sink timeout for an in-flight attempt to be recorded (one
/// short statement after the answer).
const IN_FLIGHT_MARGIN: Duration = Duration::from_secs(2);

/// The most of a reconciliation answer we read.
const MAX_STATUS_BODY_BYTES: usize = 64 * 1024;

/// Each configured sink's in-flight lease, for claims that begin delivery attempts.
pub fn in_flight_leases(worker: &Worker) -> Vec<InFlightLease> {
    worker
        .config
        .sinks()
        .iter()
        .map(|sink| InFlightLease {
            sink: sink.id.clone(),
            lease: Duration::from_secs(sink.timeout_secs) + IN_FLIGHT_MARGIN,
        })
        .collect()
}

/// The shared HTTP client: pooled connections, rustls.
pub fn http_client() -> reqwest::Result<reqwest::Client> {
    // reqwest is built without a bundled crypto provider; ring is the one sqlx already uses.
    // Installing twice is harmless (the second call reports the first).
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .pool_idle_timeout(Duration::from_secs(60))
        .connect_timeout(Duration::from_secs(5))
        .build()
}

/// What one step did, for tests and logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// The effect.
    pub effect_id: i64,
    /// The status written.
    pub status: &'static str,
    /// The outcome label counted.
    pub outcome: &'static str,
    /// Whether the fenced write matched (false: the lease was lost; nothing written).
    pub recorded: bool,
}

fn policy(sink: &Sink) -> SinkPolicy {
    SinkPolicy {
        idempotent: sink.idempotency_header.is_some(),
        retention: Duration::from_secs(sink.idempotency_retention_secs),
        reconcilable: sink.status_url.is_some(),
    }
}

fn history(worker: &Worker, effect: &ClaimedEffect, attempts: i32) -> History {
    History {
        maybe_delivered: effect.maybe_delivered,
        first_attempt_age: Duration::from_secs_f64(effect.first_attempt_age_secs.max(0.0)),
        attempts,
        max_attempts: worker.settings.max_attempts,
    }
}

fn backoff(worker: &Worker, attempts: i32) -> Duration {
    retry_delay(
        attempts.max(1),
        worker.settings.backoff_base,
        worker.settings.backoff_cap,
        rand::random::<f64>(),
    )
}

/// When a decided effect is due again, and the reason the decision carries.
fn due_after_and_reason(decision: &Decision) -> (Duration, Option<&str>) {
    match decision {
        Decision::Complete => (Duration::ZERO, None),
        Decision::Fail(reason) | Decision::Review(reason) => {
            (Duration::ZERO, Some(reason.as_str()))
        }
        Decision::Retry { after } => (*after, None),
        Decision::Reconcile { reason, after } => (*after, Some(reason.as_str())),
    }
}

fn step_record<'a>(
    decision: &'a Decision,
    maybe_delivered: bool,
    outcome: &'a str,
    status_code: Option<u16>,
) -> StepRecord<'a> {
    let (visible_after, error) = due_after_and_reason(decision);
    StepRecord {
        status: decision.status(),
        visible_after,
        error,
        maybe_delivered,
        outcome,
        status_code,
    }
}

/// Moves one claimed effect one step.
pub async fn advance(
    worker: &Worker,
    client: &reqwest::Client,
    recorder: &Recorder,
    effect: ClaimedEffect,
) -> Step {
    let started = Instant::now();
    let Some(sink) = worker.config.sink(&effect.sink) else {
        let decision = Decision::Review(format!("sink {} is not configured", effect.sink));
        return record(
            worker,
            &effect,
            "delivery",
            &decision,
            effect.maybe_delivered,
            "sink_missing",
            None,
            started,
        )
        .await;
    };
    match effect.status.as_str() {
        "in_flight" => {
            let lost =
                Delivery::Unknown("the worker died while the attempt was in flight".to_owned());
            let decision = effects::decide(
                &lost,
                policy(sink),
                history(worker, &effect, effect.attempts),
                backoff(worker, effect.attempts),
            );
            record(
                worker,
                &effect,
                "delivery",
                &decision,
                true,
                "lost_in_flight",
                None,
                started,
            )
            .await
        }
        "uncertain" => reconcile(worker, client, sink, &effect, started).await,
        _ if effect.delivery_begun => {
            deliver(worker, client, recorder, sink, &effect, started).await
        }
        // Claimed without beginning an attempt (its sink was not among the claim's): nothing
        // was sent; the lease expires and the effect is claimed again.
        _ => {
            tracing::warn!(
                effect_id = effect.id,
                sink = effect.sink,
                "claimed without an attempt begun"
            );
            Step {
                effect_id: effect.id,
                status: "pending",
                outcome: "not_started",
                recorded: false,
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn record(
    worker: &Worker,
    effect: &ClaimedEffect,
    kind: &str,
    decision: &Decision,
    maybe_delivered: bool,
    outcome: &'static str,
    status_code: Option<u16>,
    started: Instant,
) -> Step {
    let record = step_record(decision, maybe_delivered, outcome, status_code);
    let recorded = match worker.pool.acquire().await {
        Ok(mut connection) => {
            store::record_step(
                &mut connection,
                effect.id,
                effect.lease_token,
                kind,
                &record,
            )
            .await
        }
        Err(error) => Err(error),
    };
    finish_step(
        effect,
        decision,
        outcome,
        recorded.map_err(|error| error.to_string()),
        started,
    )
}

fn finish_step(
    effect: &ClaimedEffect,
    decision: &Decision,
    outcome: &'static str,
    recorded: Recorded,
    started: Instant,
) -> Step {
    metrics::counter!(EFFECT_ATTEMPTS_TOTAL, "sink" => effect.sink.clone(), "outcome" => outcome)
        .increment(1);
    let recorded = match recorded {
        Ok(recorded) => recorded,
        Err(error) => {
            tracing::warn!(effect_id = effect.id, operation_key = effect.operation_key, %error, "could not record the effect step; its lease will expire");
            false
        }
    };
    let reason = match decision {
        Decision::Fail(reason) | Decision::Review(reason) | Decision::Reconcile { reason, .. } => {
            Some(reason.as_str())
        }
        Decision::Complete | Decision::Retry { .. } => None,
    };
    let status = decision.status();
    let duration_ms = started.elapsed().as_secs_f64() * 1000.0;
    let integration = effect.event["integration"].as_str();
    let event_id = effect.event["id"].as_str();
    if matches!(decision, Decision::Fail(_) | Decision::Review(_)) {
        tracing::warn!(
            effect_id = effect.id,
            receipt_id = effect.receipt_id,
            integration,
            event_id,
            operation_key = effect.operation_key,
            sink = effect.sink,
            attempt = effect.attempts,
            outcome,
            status,
            reason,
            recorded,
            duration_ms,
            "effect"
        );
    } else {
        tracing::info!(
            effect_id = effect.id,
            receipt_id = effect.receipt_id,
            integration,
            event_id,
            operation_key = effect.operation_key,
            sink = effect.sink,
            attempt = effect.attempts,
            outcome,
            status,
            reason,
            recorded,
            duration_ms,
            "effect"
        );
    }
    Step {
        effect_id: effect.id,
        status,
        outcome,
        recorded,
    }
}

async fn deliver(
    worker: &Worker,
    client: &reqwest::Client,
    recorder: &Recorder,
    sink: &Sink,
    effect: &ClaimedEffect,
    started: Instant,
) -> Step {
    let timeout = Duration::from_secs(sink.timeout_secs);
    // The claim committed this attempt as `in_flight`.
    let attempt = effect.attempts;
    failpoint::hit("before_effect_sent");
    let delivery = send(client, sink, effect, timeout).await;
    failpoint::hit("after_effect_sent");
    let decision = effects::decide(
        &delivery,
        policy(sink),
        history(worker, effect, attempt),
        backoff(worker, attempt),
    );
    let maybe_delivered = effect.maybe_delivered || delivery.may_have_landed();
    let (visible_after, decided_reason) = due_after_and_reason(&decision);
    // The decision's reason, else what went wrong with the request.
    let error = decided_reason.map(str::to_owned).or(match &delivery {
        Delivery::NotSent(error) | Delivery::Unknown(error) => Some(error.clone()),
        _ => None,
    });
    let recorded = recorder
        .record(FinishedDelivery {
            effect_id: effect.id,
            lease_token: effect.lease_token,
            attempt,
            status: decision.status(),
            visible_after,
            error,
            maybe_delivered,
            outcome: delivery.label(),
            status_code: delivery.status(),
        })
        .await;
    finish_step(effect, &decision, delivery.label(), recorded, started)
}

/// One POST. Errors are classified by whether the request can have left.
async fn send(
    client: &reqwest::Client,
    sink: &Sink,
    effect: &ClaimedEffect,
    timeout: Duration,
) -> Delivery {
    let body = effects::request_body(
        &effect.operation_key,
        &effect.kind,
        &effect.tenant,
        &effect.sink,
        &effect.data,
        &effect.event,
    )
    .to_string();
    let mut request = client
        .post(sink.url.expose())
        .timeout(timeout)
        .header(reqwest::header::CONTENT_TYPE, "application/json");
    if let Some(header) = &sink.idempotency_header {
        request = request.header(header.as_str(), effect.operation_key.as_str());
    }
    if !sink.secrets.is_empty() {
        let now = chrono::Utc::now().timestamp();
        for (name, value) in
            effects::signature_headers(&sink.secrets, &effect.operation_key, now, body.as_bytes())
        {
            request = request.header(name, value);
        }
    }
    match request.body(body).send().await {
        Ok(response) => {
            let retry_after = response
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|value| value.to_str().ok())
                .and_then(|value| value.trim().parse::<u64>().ok())
                .map(Duration::from_secs);
            Delivery::from_status(response.status().as_u16(), retry_after)
        }
        Err(error) => classify_error(&error.without_url()),
    }
}

/// Classifies a request error whose URL has been removed ([`reqwest::Error::without_url`]):
/// the detail is stored and logged, and a sink URL may carry a token.
fn classify_error(error: &reqwest::Error) -> Delivery {
    let detail = error_chain(error);
    if error.is_connect() {
        Delivery::NotSent(detail)
    } else if error.is_timeout() {
        Delivery::Unknown(format!("timed out: {detail}"))
    } else {
        Delivery::Unknown(detail)
    }
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

async fn reconcile(
    worker: &Worker,
    client: &reqwest::Client,
    sink: &Sink,
    effect: &ClaimedEffect,
    started: Instant,
) -> Step {
    let Some(template) = &sink.status_url else {
        let decision =
            Decision::Review("outcome unknown and the sink has no status_url".to_owned());
        return record(
            worker,
            effect,
            "reconcile",
            &decision,
            effect.maybe_delivered,
            "reconciled_unknown",
            None,
            started,
        )
        .await;
    };
    let url = effects::status_url(template.expose(), &effect.operation_key);
    let answer = match client
        .get(&url)
        .timeout(Duration::from_secs(sink.timeout_secs))
        .send()
        .await
    {
        Ok(response) => {
            let status = response.status().as_u16();
            let body = response.bytes().await.unwrap_or_default();
            Reconciliation::from_answer(status, &body[..body.len().min(MAX_STATUS_BODY_BYTES)])
        }
        Err(error) => Reconciliation::Unreachable(error_chain(&error.without_url())),
    };
    let decision = effects::decide_reconciliation(
        &answer,
        policy(sink),
        history(worker, effect, effect.attempts),
        backoff(worker, effect.attempts),
    );
    record(
        worker,
        effect,
        "reconcile",
        &decision,
        effect.maybe_delivered,
        answer.label(),
        None,
        started,
    )
    .await
}
