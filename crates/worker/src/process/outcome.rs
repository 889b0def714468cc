//! What an attempt leaves behind outside its transaction: a rolled-back attempt's
//! fenced release (retry after a backoff) or final failure, and every attempt's counter,
//! timing and log line.

use std::time::Instant;

use inbound_runtime::database::with_connection;
use inbound_store::handlers::Transition;
use inbound_store::queue::{self, ClaimedReceipt};

use super::{Attempt, bounded};
use crate::Worker;
use crate::backoff::retry_delay;
use crate::telemetry::{ACCEPT_TO_DONE_SECONDS, RECEIPT_ATTEMPTS_TOTAL};

/// Counts, times and logs one attempt.
pub(super) fn record_attempt(claimed: &ClaimedReceipt, attempt: &Attempt, started: Instant) {
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

/// Records a rolled-back attempt: retry later, or `failed` when attempts are exhausted.
pub(super) async fn record_failure(
    worker: &Worker,
    claimed: &ClaimedReceipt,
    error: String,
) -> Attempt {
    let error = bounded(&error).to_owned();
    let exhausted = claimed.attempts >= worker.settings.max_attempts;
    let delay = retry_delay(
        claimed.attempts,
        worker.settings.backoff_base,
        worker.settings.backoff_cap,
        rand::random::<f64>(),
    );
    let now = worker.clock.now();
    let recorded = with_connection(
        &worker.pool,
        worker.settings.statement_limit,
        async |connection| {
            if exhausted {
                queue::fail_exhausted(connection, claimed.lease(), &error).await
            } else {
                queue::release_for_retry(connection, claimed.lease(), delay, &error, now).await
            }
        },
    )
    .await;
    match recorded {
        Ok(false) => return Attempt::LeaseLost,
        Ok(true) => {}
        Err(record_error) => {
            tracing::warn!(receipt_id = claimed.receipt_id.0, error = %record_error, "could not record the failed attempt; the lease will expire");
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
    let duration_ms = inbound_runtime::logging::millis(started.elapsed());
    let outcome = attempt.outcome_label();
    let (reason, retry_in_ms, effects) = match attempt {
        Attempt::Committed(Transition::Applied { effects }) => (None, None, effects.len()),
        Attempt::Committed(
            Transition::Duplicate { reason }
            | Transition::Ignored { reason }
            | Transition::Quarantine { reason },
        ) => (Some(bounded(reason)), None, 0),
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
            receipt_id = claimed.receipt_id.0,
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
            receipt_id = claimed.receipt_id.0,
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
