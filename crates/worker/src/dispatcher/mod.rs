//! The effects dispatcher: claims due effects with leases (fenced like receipts), each
//! sink within its own share of the slots and behind its own circuit breaker
//! ([`sinks`]), and moves each one step along its state machine
//! ([`inbound_core::effects`]).
//!
//! - `pending`: the claim itself committed the attempt as `in_flight` (one statement for
//!   the whole claim); POST to the sink with the operation key as idempotency key (and
//!   Standard Webhooks signature headers when the sink has secrets), then record what the
//!   rules decide, group-committed with other outcomes ([`recorder`]). No
//!   transaction is open during the request. A resend the claim found past its sink's
//!   resend horizon is not sent: it is judged instead.
//! - `in_flight` (claimable only after its holder's lease expired: the worker died with
//!   the request possibly sent): judged as an attempt whose outcome is unknown.
//! - `uncertain`: ask `status_url` (reading at most [`MAX_STATUS_BODY_BYTES`]) and record
//!   what the rules decide.
//!
//! Redirects are never followed, for deliveries or reconciliation: a 3xx is an answer.
//! The HTTP exchanges themselves are `http`'s. The claim loop that feeds this module is
//! `runner`'s (`--role effects|all`).

mod http;
pub mod recorder;
pub mod sinks;

use inbound_core::states::EffectStatus;
use std::time::{Duration, Instant};

use inbound_core::config::Sink;
use inbound_core::effects::{
    self, Backoff, Decision, Delivery, History, Reconciliation, SinkPolicy,
};
use inbound_runtime::database::with_connection;
use inbound_runtime::failpoint;
use inbound_store::effects::{
    self as store, ClaimedEffect, FinishedDelivery, SinkClaim, StepKind, StepRecord,
};

pub use self::http::http_client;
use self::http::{ask, send};
use self::recorder::{NotRecorded, Recorded, Recorder};
use self::sinks::SinkPermit;
use crate::Worker;
use crate::backoff::retry_delay;
use crate::telemetry::{EFFECT_ATTEMPTS_TOTAL, EFFECTS_FINISHED_TOTAL};

/// Extra lease beyond the sink timeout for an in-flight attempt to be recorded: the
/// recorder retries within it while the database is briefly unavailable.
const IN_FLIGHT_MARGIN: Duration = Duration::from_secs(5);

/// How long before its in-flight lease ends the recorder gives an outcome up.
const RECORD_DEADLINE_MARGIN: Duration = Duration::from_millis(500);

/// The most of a reconciliation answer we read.
pub const MAX_STATUS_BODY_BYTES: usize = 64 * 1024;

/// How long an idle pooled connection to a sink is kept. Below the keep-alive timeouts
/// of common servers (Node.js and Apache close idle connections after 5 s): a request
/// written into a connection the server is closing fails after the write, and reads as
/// "may have landed" — which sends a plain sink's effect to review for nothing.
pub const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(3);

/// Each sink with free slots, as a share of a claim of at most `limit` effects.
pub fn sink_claims(worker: &Worker, limit: usize) -> Vec<SinkClaim> {
    worker
        .sink_gates()
        .free_slots()
        .into_iter()
        .filter_map(|(id, free)| {
            let sink = worker.config.sink(&id)?;
            let policy = policy(sink);
            Some(SinkClaim {
                sink: id,
                limit: i64::try_from(free.min(limit)).unwrap_or(i64::MAX),
                in_flight_lease: in_flight_lease(sink),
                resend_horizon: policy.resend_horizon(),
            })
        })
        .collect()
}

fn in_flight_lease(sink: &Sink) -> Duration {
    Duration::from_secs(sink.timeout_secs) + IN_FLIGHT_MARGIN
}

/// What one step did, for tests and logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// The effect.
    pub effect_id: inbound_core::keys::EffectId,
    /// The status written.
    pub status: EffectStatus,
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
        timeout: Duration::from_secs(sink.timeout_secs),
        give_up_after: Duration::from_secs(sink.give_up_after_secs),
        reconcile_for: Duration::from_secs(sink.reconcile_for_secs),
    }
}

fn history(worker: &Worker, effect: &ClaimedEffect) -> History {
    History {
        maybe_delivered: effect.maybe_delivered,
        first_attempt_age: seconds(effect.first_attempt_age_secs),
        attempts: effect.attempts,
        max_attempts: worker.settings.max_attempts,
        uncertain_age: seconds(effect.uncertain_age_secs),
    }
}

fn seconds(value: f64) -> Duration {
    Duration::try_from_secs_f64(value.max(0.0)).unwrap_or(Duration::MAX)
}

/// The next delays, each grown with its own count: delivery attempts so far, and
/// reconciliations including the one this step may be.
fn backoff(worker: &Worker, effect: &ClaimedEffect) -> Backoff {
    let delay = |count: i32| {
        retry_delay(
            count.max(1),
            worker.settings.backoff_base,
            worker.settings.backoff_cap,
            rand::random::<f64>(),
        )
    };
    Backoff {
        attempt: delay(effect.attempts),
        reconciliation: delay(effect.reconciliations.saturating_add(1)),
    }
}

fn step_record<'a>(
    decision: &'a Decision,
    maybe_delivered: bool,
    outcome: &'a str,
    status_code: Option<u16>,
) -> StepRecord<'a> {
    StepRecord {
        status: decision.status(),
        visible_after: decision.delay(),
        error: decision.reason(),
        maybe_delivered,
        outcome,
        status_code,
    }
}

/// Moves one claimed effect one step, holding one of its sink's slots (`permit`).
pub async fn advance(
    worker: &Worker,
    client: &reqwest::Client,
    recorder: &Recorder,
    effect: ClaimedEffect,
    permit: SinkPermit,
) -> Step {
    let started = Instant::now();
    // The claim names only configured sinks.
    let Some(sink) = worker.config.sink(&effect.sink) else {
        return Step {
            effect_id: effect.id,
            status: EffectStatus::Pending,
            outcome: "sink_unknown",
            recorded: false,
        };
    };
    match effect.status {
        EffectStatus::InFlight => {
            let lost =
                Delivery::Unknown("the worker died while the attempt was in flight".to_owned());
            let decision = effects::decide(
                &lost,
                policy(sink),
                history(worker, &effect),
                backoff(worker, &effect),
            );
            record_step(
                worker,
                &effect,
                StepKind::Verdict,
                &decision,
                true,
                "lost_in_flight",
                started,
            )
            .await
        }
        EffectStatus::Uncertain => reconcile(worker, client, sink, &effect, &permit, started).await,
        _ if effect.delivery_begun => {
            deliver(worker, client, recorder, sink, &effect, &permit, started).await
        }
        // A resend the claim found past the sink's resend horizon: never sent.
        _ => {
            let decision = effects::decide_unsent_resend(
                policy(sink),
                history(worker, &effect),
                backoff(worker, &effect),
            );
            let maybe_delivered = effect.maybe_delivered;
            record_step(
                worker,
                &effect,
                StepKind::Verdict,
                &decision,
                maybe_delivered,
                "resend_refused",
                started,
            )
            .await
        }
    }
}

async fn record_step(
    worker: &Worker,
    effect: &ClaimedEffect,
    kind: StepKind,
    decision: &Decision,
    maybe_delivered: bool,
    outcome: &'static str,
    started: Instant,
) -> Step {
    let record = step_record(decision, maybe_delivered, outcome, None);
    let now = worker.clock.now();
    let recorded = with_connection(
        &worker.pool,
        worker.settings.statement_limit,
        async |connection| {
            store::record_step(
                connection,
                effect.id,
                effect.lease_token,
                kind,
                &record,
                now,
            )
            .await
        },
    )
    .await;
    finish_step(
        effect,
        decision,
        outcome,
        recorded.map_err(NotRecorded::from),
        started,
        None,
    )
}

/// Counts, logs and reports one step. `error` is what went wrong with the request (as
/// stored with the effect: bounded, the sink URL's secret parts never in it), logged
/// with the step so that a run of retries can be read from the logs alone.
fn finish_step(
    effect: &ClaimedEffect,
    decision: &Decision,
    outcome: &'static str,
    recorded: Recorded,
    started: Instant,
    error: Option<&str>,
) -> Step {
    metrics::counter!(EFFECT_ATTEMPTS_TOTAL, "sink" => effect.sink.clone(), "outcome" => outcome)
        .increment(1);
    let recorded = match recorded {
        Ok(recorded) => recorded,
        Err(error) => {
            tracing::warn!(effect_id = effect.id.0, operation_key = effect.operation_key, %error, "could not record the effect step; its lease will expire");
            false
        }
    };
    let reason = decision.reason();
    let status = decision.status();
    if recorded && crate::gauges::FINISHED_STATES.contains(&status) {
        metrics::counter!(EFFECTS_FINISHED_TOTAL, "sink" => effect.sink.clone(), "status" => status.as_str())
            .increment(1);
    }
    let duration_ms = inbound_runtime::logging::millis(started.elapsed());
    let integration = effect.event["integration"].as_str();
    let event_id = effect.event["id"].as_str();
    if matches!(decision, Decision::Fail(_) | Decision::Review(_)) {
        tracing::warn!(
            effect_id = effect.id.0,
            receipt_id = effect.receipt_id.0,
            integration,
            event_id,
            operation_key = effect.operation_key,
            sink = effect.sink,
            attempt = effect.attempts,
            outcome,
            status = status.as_str(),
            reason,
            error,
            recorded,
            duration_ms,
            "effect"
        );
    } else {
        tracing::info!(
            effect_id = effect.id.0,
            receipt_id = effect.receipt_id.0,
            integration,
            event_id,
            operation_key = effect.operation_key,
            sink = effect.sink,
            attempt = effect.attempts,
            outcome,
            status = status.as_str(),
            reason,
            error,
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
    permit: &SinkPermit,
    started: Instant,
) -> Step {
    let timeout = Duration::from_secs(sink.timeout_secs);
    // The claim committed this attempt as `in_flight`.
    failpoint::hit("before_effect_sent");
    let delivery = send(client, sink, effect, timeout).await;
    failpoint::hit("after_effect_sent");
    if !matches!(delivery, Delivery::NotBuilt(_)) {
        permit.report(delivery.is_transport_failure());
    }
    let decision = effects::decide(
        &delivery,
        policy(sink),
        history(worker, effect),
        backoff(worker, effect),
    );
    let maybe_delivered = effect.maybe_delivered || delivery.may_have_landed();
    // What went wrong with the request, if anything; stored as the decision's reason,
    // else as that.
    let request_error = match &delivery {
        Delivery::NotSent(error) | Delivery::Unknown(error) => Some(error.as_str()),
        _ => None,
    };
    let error = decision.reason().or(request_error).map(str::to_owned);
    let deadline = (started + in_flight_lease(sink))
        .checked_sub(RECORD_DEADLINE_MARGIN)
        .unwrap_or(started);
    let recorded = recorder
        .record(
            FinishedDelivery {
                effect_id: effect.id,
                lease_token: effect.lease_token,
                attempt: effect.attempts,
                status: decision.status(),
                visible_after: decision.delay(),
                error,
                maybe_delivered,
                outcome: delivery.label(),
                status_code: delivery.status(),
            },
            deadline,
        )
        .await;
    finish_step(
        effect,
        &decision,
        delivery.label(),
        recorded,
        started,
        request_error,
    )
}

async fn reconcile(
    worker: &Worker,
    client: &reqwest::Client,
    sink: &Sink,
    effect: &ClaimedEffect,
    permit: &SinkPermit,
    started: Instant,
) -> Step {
    let answer = match &sink.status_url {
        Some(template) => {
            let url = effects::status_url(template.expose(), &effect.operation_key);
            let timeout = Duration::from_secs(sink.timeout_secs);
            let answer = ask(client, &url, timeout).await;
            permit.report(answer.is_err());
            answer.unwrap_or_else(|reason| Reconciliation::Unreachable {
                reason,
                retry_after: None,
            })
        }
        // The sink lost its status_url since the effect became uncertain.
        None => Reconciliation::Unknown("the sink has no status_url to reconcile with".to_owned()),
    };
    let decision = effects::decide_reconciliation(
        &answer,
        policy(sink),
        history(worker, effect),
        backoff(worker, effect),
    );
    let maybe_delivered = effect.maybe_delivered;
    record_step(
        worker,
        effect,
        StepKind::Reconcile,
        &decision,
        maybe_delivered,
        answer.label(),
        started,
    )
    .await
}
