//! Group commit: receipts from concurrent requests go into one multi-row
//! `INSERT … ON CONFLICT DO NOTHING` ([`store::insert_receipts`]), so the database commits
//! once per batch instead of once per request.
//!
//! A few committer tasks share one queue. An idle committer takes the first receipt at once
//! (a lone request is never delayed); while committers are busy, arrivals queue and the
//! next free committer takes everything waiting, up to `max_batch`. The batch size thus
//! follows the load with no timer. Each request is answered only from its batch's result:
//! `Ok` after the statement returned (committed), and a failed batch fails every member
//! (503). A request that gave up waiting (its deadline) is answered 503 even if its batch
//! commits later — the provider's redelivery is then a duplicate.

use std::sync::Arc;

use inbound_core::keys::{EventId, SourceScope};
use inbound_core::store::{self, InsertOutcome, NewReceipt};
use inbound_service::failpoint;
use sqlx::PgPool;
use tokio::sync::{Mutex, mpsc, oneshot};

use crate::telemetry;

/// How receipts are gathered.
#[derive(Debug, Clone, Copy)]
pub struct GroupCommitSettings {
    /// Most receipts in one statement.
    pub max_batch: usize,
    /// Statements in flight at once (each holds one pooled connection).
    pub committers: usize,
}

/// A receipt that outlives its request's borrow while it waits in the queue.
#[derive(Debug)]
struct QueuedReceipt {
    integration: String,
    source_scope: SourceScope,
    event_id: EventId,
    event_type: String,
    route_key: String,
    payload_json: String,
}

impl QueuedReceipt {
    fn new(receipt: &NewReceipt<'_>) -> Self {
        Self {
            integration: receipt.integration.to_owned(),
            source_scope: receipt.source_scope.clone(),
            event_id: receipt.event_id.clone(),
            event_type: receipt.event_type.to_owned(),
            route_key: receipt.route_key.to_owned(),
            payload_json: receipt.payload_json.to_owned(),
        }
    }

    fn as_new(&self) -> NewReceipt<'_> {
        NewReceipt {
            integration: &self.integration,
            source_scope: &self.source_scope,
            event_id: &self.event_id,
            event_type: &self.event_type,
            route_key: &self.route_key,
            payload_json: &self.payload_json,
        }
    }
}

/// What a committer answers: the durable outcome, or why nothing may be acknowledged.
type Answer = Result<InsertOutcome, String>;

struct Job {
    receipt: QueuedReceipt,
    answer: oneshot::Sender<Answer>,
}

/// The queue requests submit to; committers drain it.
pub struct GroupCommit {
    queue: mpsc::Sender<Job>,
}

impl GroupCommit {
    /// Starts `settings.committers` committer tasks over `pool`.
    pub fn start(pool: PgPool, settings: GroupCommitSettings) -> Self {
        let max_batch = settings.max_batch.max(1);
        let (queue, receiver) = mpsc::channel(max_batch * settings.committers.max(1) * 4);
        let receiver = Arc::new(Mutex::new(receiver));
        for _ in 0..settings.committers.max(1) {
            tokio::spawn(commit_loop(pool.clone(), Arc::clone(&receiver), max_batch));
        }
        Self { queue }
    }

    /// Commits `receipt` with whatever else is waiting. The caller bounds the wait.
    pub async fn commit(&self, receipt: &NewReceipt<'_>) -> Answer {
        let (answer, answered) = oneshot::channel();
        let job = Job {
            receipt: QueuedReceipt::new(receipt),
            answer,
        };
        self.queue
            .send(job)
            .await
            .map_err(|_| "the committers have stopped".to_owned())?;
        answered
            .await
            .unwrap_or_else(|_| Err("the committer stopped before answering".to_owned()))
    }
}

/// Takes the next batch and commits it, until every sender is gone.
async fn commit_loop(pool: PgPool, receiver: Arc<Mutex<mpsc::Receiver<Job>>>, max_batch: usize) {
    let mut batch = Vec::with_capacity(max_batch);
    loop {
        {
            let mut receiver = receiver.lock().await;
            if receiver.recv_many(&mut batch, max_batch).await == 0 {
                return;
            }
        }
        telemetry::record_commit_batch(batch.len());
        let outcome = commit_batch(&pool, &batch).await;
        for (index, job) in batch.drain(..).enumerate() {
            let answer = match &outcome {
                Ok(outcomes) => Ok(outcomes[index]),
                Err(reason) => Err(reason.clone()),
            };
            // The request may have given up (deadline): its answer is then dropped.
            job.answer.send(answer).ok();
        }
    }
}

async fn commit_batch(pool: &PgPool, batch: &[Job]) -> Result<Vec<InsertOutcome>, String> {
    let mut connection = pool
        .acquire()
        .await
        .map_err(|error| format!("database: {error}"))?;
    failpoint::hit("before_receipt_commit");
    let receipts: Vec<NewReceipt<'_>> = batch.iter().map(|job| job.receipt.as_new()).collect();
    store::insert_receipts(&mut connection, &receipts)
        .await
        .map_err(|error| format!("database: {error}"))
}
