//! A batch of claimed receipts, one attempt each, completed in one transaction.
//!
//! Each receipt runs inside its own savepoint: fence on the lease token (the queue row is
//! deleted only if this attempt still holds it, and stays locked until commit) → the
//! handler's transition → effect intents → the receipt's terminal state. A receipt that
//! fails (transient error, lost lease, a deadlock with another batch) rolls back to its
//! savepoint alone; the others commit together, once. After the commit a separate single
//! statement releases each failed receipt's lease with a backoff delay, or marks it
//! `failed` once attempts are exhausted. Both name the lease token, so a worker that lost
//! its lease changes nothing. If the transaction itself fails, nothing of the batch
//! committed and every member is recorded as a transient failure.

use std::time::Instant;

use inbound_core::handlers::{HandlerError, HandlerInput, Transition};
use inbound_core::store::effects::{self, SourceEvent};
use inbound_core::store::queue::{self, ClaimedReceipt, Finish};
use inbound_service::failpoint;
use sqlx::{Acquire, PgConnection};

use crate::Worker;
use crate::backoff::retry_delay;
use crate::telemetry::{ACCEPT_TO_DONE_SECONDS, LEASE_RECLAIMS_TOTAL, RECEIPT_ATTEMPTS_TOTAL};

/// How an attempt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// The transition and the receipt's terminal state committed together.
    Committed(Transition),
    /// Another worker holds the lease now; nothing was written.
    LeaseLost,
    /// Rolled back; the receipt is visible again after the backoff.
    Retrying {
        /// The error, as recorded in `last_error`.
        error: String,
        /// The delay before the next attempt.
        delay_ms: u128,
    },
    /// Rolled back for the last time; the receipt is `failed`.
    Failed {
        /// The error, as recorded in `last_error`.
        error: String,
    },
}

impl Attempt {
    /// The `outcome` label of `inbound_receipt_attempts_total`.
    pub fn outcome_label(&self) -> &'static str {
        match self {
            Self::Committed(Transition::Applied { .. }) => "applied",
            Self::Committed(Transition::Duplicate { .. }) => "duplicate",
            Self::Committed(Transition::Ignored { .. }) => "ignored",
            Self::Committed(Transition::Quarantine { .. }) => "quarantined",
            Self::LeaseLost => "lease_lost",
            Self::Retrying { .. } => "transient",
            Self::Failed { .. } => "failed",
        }
    }
}

/// Why the business transaction did not commit.
enum Abort {
    /// The fence matched no row.
    LeaseLost,
    /// Roll back and retry.
    Transient(String),
}

impl From<sqlx::Error> for Abort {
    fn from(error: sqlx::Error) -> Self {
        Self::Transient(format!("database: {error}"))
    }
}

/// Processes one claimed receipt (a batch of one).
pub async fn process(worker: &Worker, claimed: ClaimedReceipt) -> Attempt {
    process_batch(worker, vec![claimed])
        .await
        .pop()
        .expect("one attempt per receipt")
}

/// Processes claimed receipts in one transaction and records each attempt's outcome, in
/// order. Errors while recording a retry are logged: the lease then simply expires and
/// the receipt is claimed again, so nothing is lost.
pub async fn process_batch(worker: &Worker, batch: Vec<ClaimedReceipt>) -> Vec<Attempt> {
    let started = Instant::now();
    let reclaimed = batch.iter().filter(|claimed| claimed.reclaimed).count();
    metrics::counter!(LEASE_RECLAIMS_TOTAL).increment(reclaimed as u64);
    let results = match apply_batch(worker, &batch).await {
        Ok(results) => results,
        // Nothing of the batch committed.
        Err(error) => batch
            .iter()
            .map(|_| Err(Abort::Transient(format!("database: {error}"))))
            .collect(),
    };
    let mut attempts = Vec::with_capacity(batch.len());
    for (claimed, result) in batch.iter().zip(results) {
        let attempt = match result {
            Ok(transition) => Attempt::Committed(transition),
            Err(Abort::LeaseLost) => Attempt::LeaseLost,
            Err(Abort::Transient(error)) => record_failure(worker, claimed, error).await,
        };
        record_attempt(claimed, &attempt, started);
        attempts.push(attempt);
    }
    attempts
}

/// Counts, times and logs one attempt.
fn record_attempt(claimed: &ClaimedReceipt, attempt: &Attempt, started: Instant) {
    metrics::counter!(RECEIPT_ATTEMPTS_TOTAL, "integration" => claimed.integration.clone(), "outcome" => attempt.outcome_label())
        .increment(1);
    if let Attempt::Committed(
        Transition::Applied { .. } | Transition::Duplicate { .. } | Transition::Ignored { .. },
    ) = attempt
    {
        let accepted_to_done = chrono::Utc::now() - claimed.received_at;
        metrics::histogram!(ACCEPT_TO_DONE_SECONDS)
            .record(accepted_to_done.as_seconds_f64().max(0.0));
    }
    log_attempt(claimed, attempt, started);
}

/// The batch's transaction: one savepoint per receipt, one commit. `Err` means the
/// transaction did not commit (or its outcome is unknown: the fenced retry bookkeeping
/// then finds the lease gone if it did).
async fn apply_batch(
    worker: &Worker,
    batch: &[ClaimedReceipt],
) -> Result<Vec<Result<Transition, Abort>>, sqlx::Error> {
    let mut connection = worker.pool.acquire().await?;
    let mut transaction = connection.begin().await?;
    let mut results = Vec::with_capacity(batch.len());
    for claimed in batch {
        let mut savepoint = transaction.begin().await?;
        let result = apply(worker, &mut savepoint, claimed).await;
        if result.is_ok() {
            savepoint.commit().await?;
        } else {
            savepoint.rollback().await?;
        }
        results.push(result);
    }
    failpoint::hit("before_business_commit");
    transaction.commit().await?;
    failpoint::hit("after_business_commit");
    Ok(results)
}

/// One receipt's part of the business transaction, inside its savepoint.
async fn apply(
    worker: &Worker,
    transaction: &mut PgConnection,
    claimed: &ClaimedReceipt,
) -> Result<Transition, Abort> {
    let integration = worker
        .config
        .integration(&claimed.integration)
        .ok_or_else(|| {
            Abort::Transient(format!(
                "integration {} is not configured",
                claimed.integration
            ))
        })?;
    let route = integration.routes.get(&claimed.route_key).ok_or_else(|| {
        Abort::Transient(format!("route {:?} is not configured", claimed.route_key))
    })?;
    let handler = worker.registry.get(&route.handler).ok_or_else(|| {
        Abort::Transient(format!("handler {:?} is not registered", route.handler))
    })?;

    if !queue::take_fenced(transaction, claimed.receipt_id, claimed.lease_token).await? {
        return Err(Abort::LeaseLost);
    }
    failpoint::hit("worker_in_business_tx");
    let transition = match &claimed.payload {
        // Pending payloads are never purged; if one is missing, a person must look.
        None => Transition::Quarantine {
            reason: "the payload is gone".to_owned(),
        },
        Some(payload) => {
            let input = HandlerInput {
                receipt_id: claimed.id(),
                integration,
                event_id: &claimed.event_id,
                event_type: &claimed.event_type,
                source_scope: &claimed.source_scope,
                payload,
                sink: route.sink.as_deref(),
            };
            match handler.apply(transaction, input).await {
                Ok(transition) => transition,
                Err(HandlerError::Transient(reason)) => return Err(Abort::Transient(reason)),
                Err(HandlerError::Database(error)) => return Err(error.into()),
            }
        }
    };
    let finish = match &transition {
        Transition::Applied { effects } => {
            let event = SourceEvent {
                integration: &claimed.integration,
                id: &claimed.event_id,
                event_type: &claimed.event_type,
            };
            for intent in effects {
                effects::insert_intent(
                    transaction,
                    claimed.receipt_id,
                    &integration.tenant,
                    event,
                    intent,
                )
                .await?;
            }
            Finish::Applied
        }
        Transition::Duplicate { reason } => Finish::Duplicate(reason),
        Transition::Ignored { reason } => Finish::Ignored(reason),
        Transition::Quarantine { reason } => Finish::Quarantined(reason),
    };
    queue::finish(transaction, claimed.receipt_id, claimed.attempts, finish).await?;
    Ok(transition)
}

/// Records a rolled-back attempt: retry later, or `failed` when attempts are exhausted.
async fn record_failure(worker: &Worker, claimed: &ClaimedReceipt, error: String) -> Attempt {
    let exhausted = claimed.attempts >= worker.settings.max_attempts;
    let delay = retry_delay(
        claimed.attempts,
        worker.settings.backoff_base,
        worker.settings.backoff_cap,
        rand::random::<f64>(),
    );
    let recorded = match worker.pool.acquire().await {
        Ok(mut connection) if exhausted => {
            queue::fail_exhausted(
                &mut connection,
                claimed.receipt_id,
                claimed.lease_token,
                &error,
            )
            .await
        }
        Ok(mut connection) => {
            queue::release_for_retry(
                &mut connection,
                claimed.receipt_id,
                claimed.lease_token,
                delay,
                &error,
            )
            .await
        }
        Err(acquire_error) => Err(acquire_error),
    };
    match recorded {
        Ok(false) => return Attempt::LeaseLost,
        Ok(true) => {}
        Err(record_error) => {
            tracing::warn!(receipt_id = claimed.receipt_id, error = %record_error, "could not record the failed attempt; the lease will expire");
        }
    }
    if exhausted {
        Attempt::Failed { error }
    } else {
        Attempt::Retrying {
            error,
            delay_ms: delay.as_millis(),
        }
    }
}

/// One structured line per attempt.
fn log_attempt(claimed: &ClaimedReceipt, attempt: &Attempt, started: Instant) {
    let duration_ms = started.elapsed().as_secs_f64() * 1000.0;
    let outcome = attempt.outcome_label();
    let (reason, retry_in_ms, effects) = match attempt {
        Attempt::Committed(Transition::Applied { effects }) => (None, None, effects.len()),
        Attempt::Committed(
            Transition::Duplicate { reason }
            | Transition::Ignored { reason }
            | Transition::Quarantine { reason },
        ) => (Some(reason.as_str()), None, 0),
        Attempt::LeaseLost => (None, None, 0),
        Attempt::Retrying { error, delay_ms } => (Some(error.as_str()), Some(*delay_ms), 0),
        Attempt::Failed { error } => (Some(error.as_str()), None, 0),
    };
    let retry_in_ms = retry_in_ms.map(|ms| ms as u64);
    // Outcomes that need a person are warnings; the rest is the normal flow.
    if matches!(
        attempt,
        Attempt::Failed { .. }
            | Attempt::LeaseLost
            | Attempt::Committed(Transition::Quarantine { .. })
    ) {
        tracing::warn!(
            integration = claimed.integration,
            receipt_id = claimed.receipt_id,
            event_id = claimed.event_id,
            attempt = claimed.attempts,
            outcome,
            reason,
            duration_ms,
            "receipt"
        );
    } else {
        tracing::info!(
            integration = claimed.integration,
            receipt_id = claimed.receipt_id,
            event_id = claimed.event_id,
            attempt = claimed.attempts,
            outcome,
            reason,
            retry_in_ms,
            effects,
            duration_ms,
            "receipt"
        );
    }
}
