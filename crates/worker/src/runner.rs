//! The claim loop. It claims only as many receipts as it has free slots, so every claimed
//! receipt starts at once (there is never a claimed-but-unstarted lease to give back).
//! When idle it polls; when the database fails it backs off and holds no transaction.
//! On shutdown it stops claiming and lets in-flight transitions finish within the grace
//! period; anything still running after that is dropped and its lease simply expires.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use inbound_core::store::queue;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

use crate::Worker;
use crate::process::{Attempt, process};

/// What one [`run_once`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Receipts were claimed and processed.
    Processed(Vec<Attempt>),
    /// Nothing was claimable.
    Idle,
}

/// Claims up to `concurrency` receipts and processes them concurrently (for tests and
/// tools that drive the worker step by step).
pub async fn run_once(worker: &Arc<Worker>) -> Result<Step, sqlx::Error> {
    let claimed = claim(worker, worker.settings.concurrency).await?;
    if claimed.is_empty() {
        return Ok(Step::Idle);
    }
    let mut tasks = JoinSet::new();
    for receipt in claimed {
        let worker = Arc::clone(worker);
        tasks.spawn(async move { process(&worker, receipt).await });
    }
    let mut attempts = Vec::new();
    while let Some(attempt) = tasks.join_next().await {
        if let Ok(attempt) = attempt {
            attempts.push(attempt);
        }
    }
    Ok(Step::Processed(attempts))
}

async fn claim(worker: &Worker, limit: usize) -> Result<Vec<queue::ClaimedReceipt>, sqlx::Error> {
    let mut connection = worker.pool.acquire().await?;
    queue::claim_batch(
        &mut connection,
        i64::try_from(limit).unwrap_or(i64::MAX),
        worker.settings.lease,
        &worker.settings.worker_id,
        worker.settings.integrations.as_deref(),
    )
    .await
}

/// Gives back a claim that will not be started: visible again at once, attempt uncounted.
async fn release_unstarted(worker: &Worker, receipt: &queue::ClaimedReceipt) {
    let released = match worker.pool.acquire().await {
        Ok(mut connection) => {
            queue::release_unstarted(&mut connection, receipt.receipt_id, receipt.lease_token).await
        }
        Err(error) => Err(error),
    };
    if let Err(error) = released {
        tracing::warn!(receipt_id = receipt.receipt_id, %error, "could not release an unstarted claim; its lease will expire");
    }
}

/// Runs until `shutdown` resolves, then drains.
pub async fn run(worker: Arc<Worker>, shutdown: impl Future<Output = ()> + Send + 'static) {
    let (stop_sender, mut stop) = watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        stop_sender.send_replace(true);
    });
    let slots = Arc::new(Semaphore::new(worker.settings.concurrency.max(1)));
    let mut tasks = JoinSet::new();
    let mut failure_delay = worker.settings.poll_interval;
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
        let pause = match claim(&worker, free).await {
            Ok(claimed) if claimed.is_empty() => Some(worker.settings.poll_interval),
            Ok(claimed) => {
                failure_delay = worker.settings.poll_interval;
                for receipt in claimed {
                    // `free` permits were available and only this loop takes them, so a
                    // slot is always there; should one not be, give the lease back.
                    let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
                        release_unstarted(&worker, &receipt).await;
                        continue;
                    };
                    let worker = Arc::clone(&worker);
                    tasks.spawn(async move {
                        process(&worker, receipt).await;
                        drop(slot);
                    });
                }
                None
            }
            Err(error) => {
                tracing::warn!(%error, retry_in_ms = failure_delay.as_millis() as u64, "claim failed; backing off");
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
    tracing::info!(
        in_flight = tasks.len(),
        "stopped claiming; finishing in-flight receipts"
    );
    let drained = tokio::time::timeout(worker.settings.shutdown_grace, async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            abandoned = tasks.len(),
            "grace period over; abandoned receipts will be reclaimed when their leases expire"
        );
        tasks.abort_all();
    }
}
