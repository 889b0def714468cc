//! A batch of claimed receipts, one attempt each, completed in one transaction.
//!
//! Each receipt goes: fence on the lease token (the queue row is deleted only if this
//! attempt still holds it, and stays locked until commit) → the handler's transition →
//! effect intents → the receipt's terminal state. A handler's writes commit only with an
//! `Applied` verdict: it runs in a savepoint that any other verdict rolls back. The batch
//! first runs *together*: one statement fences all, one finishes all, one savepoint per
//! run of receipts for one handler (rolled back, and the run applied receipt by receipt,
//! when a verdict is not `Applied`) — a handful of statements more than the handlers' own. If any receipt fails (transient error, a deadlock with another
//! batch, a missing route), that transaction rolls back whole and the batch runs again
//! *isolated*, each receipt in its own savepoint: a failure then rolls back alone and the
//! others commit together, once. A lost lease fails nothing: that receipt is skipped.
//! After the commit a separate single statement releases each failed receipt's lease
//! with a backoff delay, or marks it `failed` once attempts are exhausted (`outcome`).
//! Both name the lease token, so a worker that lost its lease changes nothing. If the
//! transaction itself fails, nothing of the batch committed and every member is recorded
//! as a transient failure.

use std::collections::HashSet;
use std::time::Instant;

use inbound_core::config::{Integration, Route};
use inbound_core::keys::{ReceiptId, ReceiptLease};
use inbound_runtime::database::with_connection;
use inbound_runtime::failpoint;
use inbound_store::effects::{self, SourceEvent};
use inbound_store::handlers::{HandlerError, HandlerInput, RegisteredHandler, Transition};
use inbound_store::queue::{self, ClaimedReceipt, Finish, FinishedReceipt, StoredPayload};
use inbound_store::savepoint;
use sqlx::{Acquire, PgConnection};

mod outcome;

use self::outcome::{record_attempt, record_failure};
use crate::Worker;
use crate::telemetry::{BATCHES_TOTAL, LEASE_RECLAIMS_TOTAL};

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

impl From<HandlerError> for Abort {
    fn from(error: HandlerError) -> Self {
        match error {
            HandlerError::Database(error) => error.into(),
            // Its cause's chain in full: what an operator reads as the receipt's error.
            transient => Self::Transient(error_chain(&transient)),
        }
    }
}

/// `error` and each of its sources, `: `-joined.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        // A transparent error repeats its source's text: said once.
        if !text.ends_with(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
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

/// The batch's transaction. First without savepoints — one fencing statement, the
/// handlers, one finishing statement, one commit — and, when any receipt fails (a
/// transient error, a deadlock, a missing route), rolled back whole and run again with a
/// savepoint per receipt so that the failure rolls back alone. `Err` means the
/// transaction did not commit (or its outcome is unknown: the fenced retry bookkeeping
/// then finds the lease gone if it did).
async fn apply_batch(
    worker: &Worker,
    batch: &[ClaimedReceipt],
) -> Result<Vec<Result<Transition, Abort>>, sqlx::Error> {
    // The whole transaction waits on the database at most the lease: past it another
    // worker may take the receipts, and a silent server must not hold this slot longer.
    with_connection(&worker.pool, worker.settings.lease, async |connection| {
        let applied = apply_together_or_isolated(worker, connection, batch).await;
        // Large payloads grew the connection's buffers: give them back rather than let
        // every pooled connection keep the largest batch it ever carried.
        let bytes: i64 = batch.iter().map(|claimed| claimed.payload_bytes).sum();
        if usize::try_from(bytes).unwrap_or(usize::MAX) > inbound_store::SHRINK_BUFFERS_AFTER_BYTES
        {
            sqlx::Connection::shrink_buffers(connection);
        }
        applied
    })
    .await
}

async fn apply_together_or_isolated(
    worker: &Worker,
    connection: &mut PgConnection,
    batch: &[ClaimedReceipt],
) -> Result<Vec<Result<Transition, Abort>>, sqlx::Error> {
    match apply_together(worker, connection, batch).await? {
        Together::Committed(results) => {
            metrics::counter!(BATCHES_TOTAL, "mode" => "together").increment(1);
            Ok(results)
        }
        // Alone, the failure is the receipt's own: there is nothing to isolate.
        Together::RolledBack(abort) if batch.len() == 1 => {
            metrics::counter!(BATCHES_TOTAL, "mode" => "together").increment(1);
            Ok(vec![Err(abort)])
        }
        Together::RolledBack(_) => {
            metrics::counter!(BATCHES_TOTAL, "mode" => "isolated").increment(1);
            apply_isolated(worker, connection, batch).await
        }
    }
}

/// How a batch applied without savepoints ended.
enum Together {
    /// Every fenced receipt's transition committed, in one transaction.
    Committed(Vec<Result<Transition, Abort>>),
    /// A receipt failed; nothing of the batch was written.
    RolledBack(Abort),
}

/// The batch in one transaction without savepoints; any failure rolls back all of it.
async fn apply_together(
    worker: &Worker,
    connection: &mut PgConnection,
    batch: &[ClaimedReceipt],
) -> Result<Together, sqlx::Error> {
    let mut transaction = connection.begin().await?;
    match transitions_together(worker, &mut transaction, batch).await {
        Ok(results) => {
            failpoint::hit("before_business_commit");
            transaction.commit().await?;
            failpoint::hit("after_business_commit");
            Ok(Together::Committed(results))
        }
        Err(abort) => {
            transaction.rollback().await?;
            Ok(Together::RolledBack(abort))
        }
    }
}

/// Fences every receipt in one statement, runs each fenced one's transition, and finishes
/// them all in one statement. The first failure stops the batch (the caller rolls back).
async fn transitions_together(
    worker: &Worker,
    transaction: &mut PgConnection,
    batch: &[ClaimedReceipt],
) -> Result<Vec<Result<Transition, Abort>>, Abort> {
    let leases: Vec<ReceiptLease> = batch.iter().map(ClaimedReceipt::lease).collect();
    let fenced: HashSet<ReceiptId> = queue::dequeue_fenced_all(transaction, &leases)
        .await?
        .ok_or_else(|| {
            Abort::Transient(
                "an ordered subject's lease was taken over as it was fenced".to_owned(),
            )
        })?
        .into_iter()
        .collect();
    let mut results = Vec::with_capacity(batch.len());
    // Consecutive receipts for one handler go to it together (`Handler::apply_all`).
    let mut run: Vec<(&ClaimedReceipt, Resolved<'_>, &serde_json::Value)> = Vec::new();
    for claimed in batch {
        let next = if fenced.contains(&claimed.receipt_id) {
            let route = resolve(worker, claimed)?;
            failpoint::hit("worker_in_business_tx");
            failpoint::pause("worker_in_business_tx").await;
            match readable_payload(claimed) {
                Ok(payload) => Some((route, payload)),
                Err(unreadable) => {
                    apply_run(transaction, &mut run, &mut results).await?;
                    results.push(Ok(unreadable));
                    None
                }
            }
        } else {
            apply_run(transaction, &mut run, &mut results).await?;
            results.push(Err(Abort::LeaseLost));
            None
        };
        if let Some((route, payload)) = next {
            if run
                .first()
                .is_some_and(|(_, first, _)| first.handler_name != route.handler_name)
            {
                apply_run(transaction, &mut run, &mut results).await?;
            }
            run.push((claimed, route, payload));
        }
    }
    apply_run(transaction, &mut run, &mut results).await?;
    let finished: Vec<FinishedReceipt<'_>> = batch
        .iter()
        .zip(&results)
        .filter_map(|(claimed, result)| {
            let transition = result.as_ref().ok()?;
            Some(FinishedReceipt {
                receipt_id: claimed.receipt_id,
                attempts: claimed.attempts,
                finish: finish_of(transition),
            })
        })
        .collect();
    if !finished.is_empty() {
        queue::finish_all(transaction, &finished).await?;
    }
    Ok(results)
}

/// The batch in one transaction with a savepoint per receipt: each failure rolls back
/// alone, the rest commits once.
async fn apply_isolated(
    worker: &Worker,
    connection: &mut PgConnection,
    batch: &[ClaimedReceipt],
) -> Result<Vec<Result<Transition, Abort>>, sqlx::Error> {
    let mut transaction = connection.begin().await?;
    let mut results = Vec::with_capacity(batch.len());
    for claimed in batch {
        let mut savepoint = transaction.begin().await?;
        let result = apply_one(worker, &mut savepoint, claimed).await;
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
async fn apply_one(
    worker: &Worker,
    transaction: &mut PgConnection,
    claimed: &ClaimedReceipt,
) -> Result<Transition, Abort> {
    let route = resolve(worker, claimed)?;
    if !queue::dequeue_fenced(transaction, claimed.lease()).await? {
        return Err(Abort::LeaseLost);
    }
    failpoint::hit("worker_in_business_tx");
    failpoint::pause("worker_in_business_tx").await;
    let transition = transition(transaction, claimed, &route).await?;
    queue::finish(
        transaction,
        claimed.receipt_id,
        claimed.attempts,
        finish_of(&transition),
    )
    .await?;
    Ok(transition)
}

/// Applies a run of receipts for one handler with [`Handler::apply_all`], records their
/// intents, and appends their transitions to `results`; empties the run.
async fn apply_run(
    transaction: &mut PgConnection,
    run: &mut Vec<(&ClaimedReceipt, Resolved<'_>, &serde_json::Value)>,
    results: &mut Vec<Result<Transition, Abort>>,
) -> Result<(), Abort> {
    let Some((_, first, _)) = run.first() else {
        return Ok(());
    };
    let handler = first.handler;
    let inputs = || {
        run.iter()
            .map(|(claimed, route, payload)| handler_input(claimed, route, payload))
    };
    // The run's writes commit only if every verdict is `Applied`; otherwise they are
    // rolled back and each receipt applied again alone, its own writes kept only if it
    // is applied (what applying them one by one in savepoints gives).
    savepoint::before_handlers(transaction).await?;
    let mut transitions = handler
        .apply_all(transaction, inputs().collect())
        .await
        .map_err(Abort::from)?;
    if transitions.len() != run.len() {
        return Err(Abort::Transient(format!(
            "handler returned {} transitions for {} receipts",
            transitions.len(),
            run.len()
        )));
    }
    // All applied: the savepoint is released with the commit (no round trip of its own).
    if !transitions.iter().all(Transition::is_applied) {
        savepoint::undo_handlers(transaction).await?;
        transitions.clear();
        for input in inputs() {
            transitions.push(apply_guarded(transaction, handler, input).await?);
        }
    }
    for ((claimed, route, _), transition) in run.drain(..).zip(transitions) {
        record_intents(transaction, claimed, &route, &transition).await?;
        results.push(Ok(transition));
    }
    Ok(())
}

/// What a receipt's route resolves to in the current configuration.
struct Resolved<'w> {
    integration: &'w Integration,
    handler_name: &'w str,
    handler: &'w RegisteredHandler,
    /// Its sinks and options.
    route: &'w Route,
}

/// The integration, handler, sinks and options of `claimed`'s route; a missing one is transient
/// (the configuration may be rolled back).
fn resolve<'w>(worker: &'w Worker, claimed: &ClaimedReceipt) -> Result<Resolved<'w>, Abort> {
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
    Ok(Resolved {
        integration,
        handler_name: &route.handler,
        handler,
        route,
    })
}

/// The handler's transition and its effect intents, after the fence.
async fn transition(
    transaction: &mut PgConnection,
    claimed: &ClaimedReceipt,
    route: &Resolved<'_>,
) -> Result<Transition, Abort> {
    let transition = match readable_payload(claimed) {
        Err(unreadable) => unreadable,
        Ok(payload) => {
            let input = handler_input(claimed, route, payload);
            apply_guarded(transaction, route.handler, input).await?
        }
    };
    record_intents(transaction, claimed, route, &transition).await?;
    Ok(transition)
}

/// One handler call in a savepoint, so that what it wrote commits only with `Applied`:
/// any other verdict rolls its writes back (the receipt still ends as the verdict says).
async fn apply_guarded(
    transaction: &mut PgConnection,
    handler: &RegisteredHandler,
    input: HandlerInput<'_>,
) -> Result<Transition, Abort> {
    let mut savepoint = transaction.begin().await?;
    let transition = handler.apply(&mut savepoint, input).await?;
    if transition.is_applied() {
        savepoint.commit().await?;
    } else {
        savepoint.rollback().await?;
    }
    Ok(transition)
}

/// The decoded payload, or the quarantine of a receipt whose payload cannot be read: one
/// purged (retention never purges pending receipts, so a person must look) or one that
/// does not decode (stored before the storability contract). Either costs only itself.
fn readable_payload(claimed: &ClaimedReceipt) -> Result<&serde_json::Value, Transition> {
    match &claimed.payload {
        StoredPayload::Decoded(payload) => Ok(payload),
        StoredPayload::Purged => Err(Transition::Quarantine {
            reason: "the payload is gone".to_owned(),
        }),
        StoredPayload::Undecodable(reason) => Err(Transition::Quarantine {
            reason: format!("the stored payload cannot be decoded: {reason}"),
        }),
    }
}

/// What the handler sees of `claimed`.
fn handler_input<'a>(
    claimed: &'a ClaimedReceipt,
    route: &Resolved<'a>,
    payload: &'a serde_json::Value,
) -> HandlerInput<'a> {
    HandlerInput {
        receipt_id: claimed.id(),
        integration: route.integration,
        event_id: &claimed.event_id,
        event_type: &claimed.event_type,
        source_scope: &claimed.source_scope,
        delivery: claimed.delivery.as_ref(),
        payload,
        sink: route.route.sink(),
        sinks: &route.route.sinks,
        options: &route.route.options,
        subject: claimed.subject.as_deref(),
        ordered: claimed.ordered_subject.is_some(),
    }
}

/// Records the effect intents of an applied transition, in its transaction. An intent
/// whose operation key another operation already holds is an error, never a silent
/// drop: the transition rolls back and is retried (it ends `failed`, the key named in
/// its error, if the handler's key does not identify one instance of the transition).
async fn record_intents(
    transaction: &mut PgConnection,
    claimed: &ClaimedReceipt,
    route: &Resolved<'_>,
    transition: &Transition,
) -> Result<(), Abort> {
    let Transition::Applied { effects } = transition else {
        return Ok(());
    };
    let event = SourceEvent {
        integration: &claimed.integration,
        id: &claimed.event_id,
        event_type: &claimed.event_type,
        delivery: claimed.delivery.as_ref(),
    };
    for intent in effects {
        effects::insert_intent(
            transaction,
            claimed.receipt_id,
            &route.integration.tenant,
            event,
            intent,
        )
        .await?
        .map_err(|collision| Abort::Transient(collision.to_string()))?;
    }
    Ok(())
}

/// The receipt's terminal state for a transition.
fn finish_of(transition: &Transition) -> Finish<'_> {
    match transition {
        Transition::Applied { .. } => Finish::Applied,
        Transition::Duplicate { reason } => Finish::Duplicate(bounded(reason)),
        Transition::Ignored { reason } => Finish::Ignored(bounded(reason)),
        Transition::Quarantine { reason } => Finish::Quarantined(bounded(reason)),
    }
}

/// The most of a reason or error that is stored and logged. Reasons name payload values
/// (an order id, a PaymentIntent id) that a sender chooses; this bounds what one can put
/// into every log line and row about it.
pub const MAX_REASON_BYTES: usize = 1024;

/// `text` cut to at most [`MAX_REASON_BYTES`], at a character boundary.
fn bounded(text: &str) -> &str {
    if text.len() <= MAX_REASON_BYTES {
        return text;
    }
    let mut end = MAX_REASON_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}
