//! The claim loops. Each claims only as many items as it has free slots, so every claimed
//! item starts at once (there is never a claimed-but-unstarted lease to give back). Under
//! load it waits until a quarter of its slots are free (at most a poll interval) so that a
//! claim serves many slots, not one per completion. When idle it polls; when the database fails it backs off and holds no transaction. On
//! shutdown it stops claiming and lets in-flight items finish within the grace period;
//! anything still running after that is dropped and its lease simply expires.
//!
//! Two loops run in a worker: receipts ([`process_batch`], a slot per batch) and effects
//! ([`dispatcher::advance`], a slot per effect).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use inbound_runtime::database::with_connection;
use inbound_runtime::failpoint;
use inbound_store::queue::{ClaimLimits, ClaimedReceipt, ExhaustedReceipt};
use inbound_store::{self as store, effects, queue};
use sqlx::Connection;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinSet;

use crate::Worker;
use crate::dispatcher;
use crate::dispatcher::recorder::Recorder;
use crate::dispatcher::sinks::SinkPermit;
use crate::process::{Attempt, process_batch};
use crate::telemetry::RECEIPT_ATTEMPTS_TOTAL;

/// What one round of [`run_once`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Round {
    /// Receipts were claimed and processed.
    Processed(Vec<Attempt>),
    /// Nothing was claimable.
    Idle,
}

/// Claims up to `concurrency` batches of receipts and processes the batches concurrently
/// (for tests and tools that drive the worker step by step). Attempts come back in
/// receipt order.
pub async fn run_once(worker: &Arc<Worker>) -> Result<Round, sqlx::Error> {
    let batches = claim_receipts(worker, worker.settings.concurrency).await?;
    if batches.is_empty() {
        return Ok(Round::Idle);
    }
    let mut tasks = JoinSet::new();
    for batch in batches {
        let worker = Arc::clone(worker);
        tasks.spawn(async move {
            let first = batch
                .receipts
                .first()
                .map_or(0, |receipt| receipt.receipt_id.0);
            (first, batch.process(&worker).await)
        });
    }
    let mut results = tasks.join_all().await;
    results.sort_by_key(|(first, _)| *first);
    Ok(Round::Processed(
        results
            .into_iter()
            .flat_map(|(_, attempts)| attempts)
            .collect(),
    ))
}

/// Claims up to `effect_concurrency` due effects (each sink within its free slots) and
/// moves each one step (for tests).
pub async fn dispatch_once(
    worker: &Arc<Worker>,
    client: &reqwest::Client,
) -> Result<Vec<dispatcher::Step>, sqlx::Error> {
    let claimed = claim_effects(worker, worker.settings.effect_concurrency).await?;
    let recorder = Recorder::start(
        &worker.pool,
        &worker.settings.session,
        &worker.clock,
        worker.settings.statement_limit,
    );
    let mut tasks = JoinSet::new();
    for (effect, permit) in claimed {
        let (worker, client, recorder) = (Arc::clone(worker), client.clone(), recorder.clone());
        tasks.spawn(async move {
            dispatcher::advance(&worker, &client, &recorder, effect, permit).await
        });
    }
    let mut steps = tasks.join_all().await;
    steps.sort_by_key(|step| step.effect_id);
    Ok(steps)
}

/// Receipts claimed to be applied in one transaction, with their share of the payload
/// budget, which returns when the batch is done.
struct ClaimedBatch {
    receipts: Vec<ClaimedReceipt>,
    budget: Option<OwnedSemaphorePermit>,
}

impl ClaimedBatch {
    async fn process(self, worker: &Worker) -> Vec<Attempt> {
        let attempts = process_batch(worker, self.receipts).await;
        drop(self.budget);
        attempts
    }
}

/// Claims up to `slots` × `batch_size` receipts in one statement, within what is left of
/// the payload budget, and splits them into at most `slots` batches of even size: a short
/// queue still gets all its parallelism, a long one fills every batch.
async fn claim_receipts(worker: &Worker, slots: usize) -> Result<Vec<ClaimedBatch>, sqlx::Error> {
    let budget = worker.payload_budget();
    let available = budget.available_permits();
    let limits = ClaimLimits {
        receipts: i64::try_from(slots.max(1) * worker.settings.batch_size.max(1))
            .unwrap_or(i64::MAX),
        payload_bytes: i64::try_from(available).unwrap_or(i64::MAX),
        // With nothing in flight, a receipt larger than the whole budget is still taken
        // (alone), or it would never be.
        allow_one_larger: available >= worker.settings.payload_budget_bytes,
        max_attempts: worker.settings.max_attempts,
        statement_limit: worker.settings.statement_limit,
    };
    // Each of the claim's statements is bounded by the statement limit; the whole, by the
    // lease it takes (a claim that outlives its lease is worth nothing).
    let claim = with_connection(&worker.pool, worker.settings.lease, async |connection| {
        failpoint::pause("before_claim").await;
        let cursor = worker.subject_cursor();
        let claim = queue::claim_batch(
            connection,
            limits,
            worker.settings.lease,
            &worker.settings.worker_id,
            worker.settings.integrations.as_deref(),
            &cursor,
            worker.clock.now(),
        )
        .await?;
        worker.advance_subject_cursor(&claim);
        let bytes: i64 = claim
            .claimed
            .iter()
            .map(|receipt| receipt.payload_bytes)
            .sum();
        if usize::try_from(bytes).unwrap_or(usize::MAX) > store::SHRINK_BUFFERS_AFTER_BYTES {
            connection.shrink_buffers();
        }
        Ok::<_, sqlx::Error>(claim)
    })
    .await?;
    for exhausted in &claim.exhausted {
        record_exhausted(exhausted, worker.settings.max_attempts);
    }
    Ok(split_evenly(claim.claimed, slots.max(1))
        .into_iter()
        .map(|receipts| {
            let bytes: i64 = receipts.iter().map(|receipt| receipt.payload_bytes).sum();
            // The claim took no more than was available (or one receipt while nothing
            // was in flight), and only claims take from the budget.
            let share = u32::try_from(bytes)
                .unwrap_or(u32::MAX)
                .min(u32::try_from(budget.available_permits()).unwrap_or(u32::MAX));
            ClaimedBatch {
                receipts,
                budget: Arc::clone(budget).try_acquire_many_owned(share).ok(),
            }
        })
        .collect())
}

/// Counts and logs a receipt the claim failed because its attempts were spent.
fn record_exhausted(exhausted: &ExhaustedReceipt, max_attempts: i32) {
    metrics::counter!(RECEIPT_ATTEMPTS_TOTAL, "integration" => exhausted.integration.clone(), "outcome" => "failed")
        .increment(1);
    tracing::warn!(
        integration = exhausted.integration,
        receipt_id = exhausted.receipt_id.0,
        event_id = exhausted.event_id,
        attempt = exhausted.attempts,
        max_attempts,
        outcome = "failed",
        reason = "attempts spent; the last never recorded an outcome (its worker stopped or hung)",
        "receipt"
    );
}

/// `items` in order, in at most `parts` consecutive chunks whose sizes differ by at most one.
fn split_evenly<T>(items: Vec<T>, parts: usize) -> Vec<Vec<T>> {
    let parts = parts.min(items.len()).max(1);
    let (base, extra) = (items.len() / parts, items.len() % parts);
    let mut items = items.into_iter();
    (0..parts)
        .map(|part| {
            items
                .by_ref()
                .take(base + usize::from(part < extra))
                .collect()
        })
        .filter(|chunk: &Vec<T>| !chunk.is_empty())
        .collect()
}

/// Claims up to `limit` due effects of the sinks with free slots, and takes a slot of
/// its sink for each.
async fn claim_effects(
    worker: &Worker,
    limit: usize,
) -> Result<Vec<(effects::ClaimedEffect, SinkPermit)>, sqlx::Error> {
    let sinks = dispatcher::sink_claims(worker, limit);
    if sinks.is_empty() {
        return Ok(Vec::new());
    }
    let claimed = with_connection(
        &worker.pool,
        worker.settings.statement_limit,
        async |connection| {
            effects::claim_batch(
                connection,
                i64::try_from(limit).unwrap_or(i64::MAX),
                worker.settings.lease,
                &worker.settings.worker_id,
                &sinks,
                worker.clock.now(),
            )
            .await
        },
    )
    .await?;
    Ok(claimed
        .into_iter()
        .filter_map(|effect| {
            // Every claimed effect's sink was among those asked for, so it has a gate.
            let permit = worker.sink_gates().admit(&effect.sink)?;
            Some((effect, permit))
        })
        .collect())
}

/// Runs the claim loops of the worker's role until `shutdown` resolves, then drains them
/// (within the settings' grace). The sinks' HTTP client is the worker's own: pooled
/// connections, a connect timeout and no redirects, which the contract promises (a sink
/// that redirects is never followed nor completed). `Err` only when that client cannot be
/// built.
pub async fn run(
    worker: Arc<Worker>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let client = dispatcher::http_client()
        .map_err(|error| anyhow::anyhow!("cannot build the sinks' HTTP client: {error}"))?;
    let (stop_sender, stop) = watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        stop_sender.send_replace(true);
    });
    let role = worker.settings.role;
    let receipts_stop = stop.clone();
    let receipts_worker = Arc::clone(&worker);
    let receipts = async move {
        if !role.runs_receipts() {
            return;
        }
        let worker = receipts_worker;
        claim_loop(
            "receipts",
            worker.settings.concurrency,
            Arc::clone(&worker),
            receipts_stop,
            move |limit| {
                let worker = Arc::clone(&worker);
                async move { claim_receipts(&worker, limit).await }
            },
            |worker, batch: ClaimedBatch| async move {
                batch.process(&worker).await;
            },
        )
        .await;
    };
    let effects = async move {
        if !role.runs_effects() {
            return;
        }
        let worker = Arc::clone(&worker);
        let recorder = Recorder::start(
            &worker.pool,
            &worker.settings.session,
            &worker.clock,
            worker.settings.statement_limit,
        );
        claim_loop(
            "effects",
            worker.settings.effect_concurrency,
            Arc::clone(&worker),
            stop,
            move |limit| {
                let worker = Arc::clone(&worker);
                async move { claim_effects(&worker, limit).await }
            },
            move |worker, (effect, permit)| {
                let (client, recorder) = (client.clone(), recorder.clone());
                async move {
                    dispatcher::advance(&worker, &client, &recorder, effect, permit).await;
                }
            },
        )
        .await;
    };
    tokio::join!(receipts, effects);
    Ok(())
}

/// Claims into free slots, processes each item in its own task, backs off on errors,
/// and drains on stop.
async fn claim_loop<T, C, CF, P, PF>(
    name: &'static str,
    concurrency: usize,
    worker: Arc<Worker>,
    mut stop: watch::Receiver<bool>,
    claim: C,
    process: P,
) where
    T: Send + 'static,
    C: Fn(usize) -> CF,
    CF: Future<Output = Result<Vec<T>, sqlx::Error>>,
    P: Fn(Arc<Worker>, T) -> PF,
    PF: Future<Output = ()> + Send + 'static,
{
    let poll_interval = worker.settings.poll_interval;
    let concurrency = concurrency.max(1);
    let slots = Arc::new(Semaphore::new(concurrency));
    let worth_a_claim = (concurrency / 4).max(1);
    let mut tasks = JoinSet::new();
    let mut failure_delay = poll_interval;
    let mut gather_until: Option<tokio::time::Instant> = None;
    while !*stop.borrow() {
        while tasks.try_join_next().is_some() {}
        let free = slots.available_permits();
        if free == 0 {
            tokio::select! {
                _ = tasks.join_next() => {}
                _ = stop.changed() => {}
            }
            continue;
        }
        // Under load, let a quarter of the slots free up (for at most a poll interval)
        // so that one claim statement serves several of them.
        let deadline =
            *gather_until.get_or_insert_with(|| tokio::time::Instant::now() + poll_interval);
        if free < worth_a_claim && tokio::time::Instant::now() < deadline {
            tokio::select! {
                _ = tasks.join_next() => {}
                () = tokio::time::sleep_until(deadline) => {}
                _ = stop.changed() => {}
            }
            continue;
        }
        gather_until = None;
        let pause = match claim(free).await {
            // Nothing claimable now. Work in flight may be what holds it back (a sink
            // at its slot limit): a completion ends the pause early.
            Ok(claimed) if claimed.is_empty() => {
                if !tasks.is_empty() {
                    tokio::select! {
                        _ = tasks.join_next() => {}
                        () = tokio::time::sleep(poll_interval) => {}
                        _ = stop.changed() => {}
                    }
                    continue;
                }
                Some(poll_interval)
            }
            Ok(claimed) => {
                failure_delay = poll_interval;
                spawn_each(claimed, &slots, &mut tasks, |item| {
                    process(Arc::clone(&worker), item)
                })
                .await;
                None
            }
            Err(error) => {
                tracing::warn!(loop_name = name, %error, retry_in_ms = failure_delay.as_millis() as u64, "claim failed; backing off");
                let pause = failure_delay;
                failure_delay = (failure_delay * 2).min(Duration::from_secs(5));
                Some(pause)
            }
        };
        if let Some(pause) = pause {
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                _ = stop.changed() => {}
            }
        }
    }
    drain(name, tasks, worker.settings.shutdown_grace).await;
}

/// Runs each claimed item in a task of its own holding one slot until it ends.
async fn spawn_each<T, PF>(
    claimed: Vec<T>,
    slots: &Arc<Semaphore>,
    tasks: &mut JoinSet<()>,
    process: impl Fn(T) -> PF,
) where
    PF: Future<Output = ()> + Send + 'static,
{
    for item in claimed {
        // At most the free slots' worth was claimed and only the claim loop takes slots,
        // so acquiring never waits; the semaphore is never closed.
        let Ok(slot) = Arc::clone(slots).acquire_owned().await else {
            break;
        };
        let work = process(item);
        tasks.spawn(async move {
            work.await;
            drop(slot);
        });
    }
}

/// Lets in-flight work finish within `grace`; what is left is aborted (its leases expire
/// and another worker takes it).
async fn drain(name: &'static str, mut tasks: JoinSet<()>, grace: Duration) {
    tracing::info!(
        loop_name = name,
        in_flight = tasks.len(),
        "stopped claiming; finishing in-flight work"
    );
    let drained =
        tokio::time::timeout(grace, async { while tasks.join_next().await.is_some() {} }).await;
    if drained.is_err() {
        tracing::warn!(
            loop_name = name,
            abandoned = tasks.len(),
            "grace period over; abandoned work is reclaimed when its leases expire"
        );
        tasks.abort_all();
    }
}

#[cfg(test)]
mod tests {
    use super::split_evenly;

    #[test]
    fn batches_are_even_ordered_and_never_empty() {
        assert_eq!(split_evenly(vec![1, 2, 3], 8), [[1], [2], [3]]);
        assert_eq!(
            split_evenly((1..=7).collect(), 3),
            [vec![1, 2, 3], vec![4, 5], vec![6, 7]]
        );
        assert_eq!(split_evenly(Vec::<u8>::new(), 4), Vec::<Vec<u8>>::new());
        assert_eq!(split_evenly(vec![1, 2], 1), [[1, 2]]);
    }
}
