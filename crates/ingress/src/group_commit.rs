//! Group commit: receipts from concurrent requests go into one multi-row
//! `INSERT … ON CONFLICT DO NOTHING` ([`store::insert_receipts`]), so the database commits
//! once per batch instead of once per request.
//!
//! A few committer tasks share one queue. An idle committer takes the first receipt at once
//! (a lone request is never delayed); while committers are busy, arrivals queue and the
//! next free committer takes everything waiting, up to `max_batch` receipts and
//! [`MAX_BATCH_PAYLOAD_BYTES`] of payload (the first receipt always goes). The batch size
//! thus follows the load with no timer. Each request is answered only from its batch's
//! result: `Ok` after the statement returned (committed).
//!
//! One bad receipt costs only itself: when a batch fails on something a member's own data
//! can cause (a data error, a limit, a constraint — SQLSTATE classes 22, 23, 54 — or a
//! deadlock or serialization failure, class 40), the members are committed again one by
//! one, so that only the offender fails — with [`CommitError::Unstorable`] (400) for its
//! data, [`CommitError::Unavailable`] (503) otherwise. Any other failure (the database is
//! unreachable, a timeout) answers 503 to every member. A request that gave up waiting
//! (its deadline) is answered 503 even if its batch commits later — the provider's
//! redelivery is then a duplicate.
//!
//! A busy committer keeps its connection between statements (`HeldConnection`): the
//! pool would check it with a round trip when taken and again when given back. It gives
//! the connection up when the server ended the session or did not answer within the
//! statement timeout and a margin (a server that vanished), and back after a second idle.

use std::sync::Arc;
use std::time::{Duration, Instant};

use inbound_core::keys::{EventId, SourceScope};
use inbound_runtime::failpoint;
use inbound_runtime::sessions::SessionGate;
use inbound_store::{self as store, InsertOutcome, NewReceipt, ReceiptOrder};
use sqlx::pool::PoolConnection;
use sqlx::{Connection, PgConnection, PgPool, Postgres};
use tokio::sync::{Mutex, mpsc, oneshot};

use crate::body::{HeldBody, HeldText};
use crate::telemetry;

/// Payload bytes one statement carries at most (unless its first receipt alone is
/// larger). Bounds the memory of a statement being encoded and its duration.
pub const MAX_BATCH_PAYLOAD_BYTES: usize = 4 * 1024 * 1024;

/// How receipts are gathered.
#[derive(Debug, Clone, Copy)]
pub struct GroupCommitSettings {
    /// Most receipts in one statement.
    pub max_batch: usize,
    /// Statements in flight at once (each holds one pooled connection).
    pub committers: usize,
    /// How long a statement may go unanswered before its connection is given up: the
    /// server's `statement_timeout` plus a margin, so that only a server that is gone
    /// (silent, not even cancelling) reaches it.
    pub statement_limit: Duration,
}

/// Why a receipt was not committed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommitError {
    /// The database did not confirm the commit: nothing may be acknowledged; retry later.
    #[error("{0}")]
    Unavailable(String),
    /// PostgreSQL refused this receipt's own data: it can never be stored as sent.
    #[error("{0}")]
    Unstorable(String),
}

/// A receipt that outlives its request's borrow while it waits in the queue. The body
/// is shared with the request (no copy) and keeps its in-flight budget until both are done.
#[derive(Debug)]
struct QueuedReceipt {
    integration: String,
    source_scope: SourceScope,
    event_id: EventId,
    event_type: String,
    route_key: String,
    content_digest: Option<Vec<u8>>,
    delivery_json: Option<String>,
    subject: Option<String>,
    event_at: Option<chrono::DateTime<chrono::Utc>>,
    ordered: bool,
    payload: CommitPayload,
}

/// Where a queued receipt's payload is: the request body itself, shared with the request
/// (no copy), or the text read out of it (GitHub's form `payload`), held within the body
/// budget like the body.
#[derive(Debug)]
pub struct CommitPayload {
    /// The request body: its budget is kept until both the request and the queue are done.
    pub body: Arc<HeldBody>,
    /// The payload read out of the body, when it is not the body itself.
    pub read_out: Option<Arc<HeldText>>,
}

impl CommitPayload {
    /// A payload that is the body itself.
    pub fn body(body: Arc<HeldBody>) -> Self {
        Self {
            body,
            read_out: None,
        }
    }
}

impl QueuedReceipt {
    /// The receipt as the store takes it; `None` if the body is not UTF-8, which the
    /// request's own validation has already excluded.
    fn as_new(&self) -> Option<NewReceipt<'_>> {
        Some(NewReceipt {
            integration: &self.integration,
            source_scope: &self.source_scope,
            event_id: &self.event_id,
            event_type: &self.event_type,
            route_key: &self.route_key,
            payload_json: match &self.payload.read_out {
                Some(text) => text.text(),
                None => std::str::from_utf8(self.payload.body.bytes()).ok()?,
            },
            content_digest: self.content_digest.as_deref(),
            delivery_json: self.delivery_json.as_deref(),
            order: ReceiptOrder {
                subject: self.subject.as_deref(),
                event_at: self.event_at,
                ordered: self.ordered,
            },
        })
    }
}

/// What a committer answers: the durable outcome, or why nothing may be acknowledged.
type Answer = Result<InsertOutcome, CommitError>;

struct Job {
    receipt: QueuedReceipt,
    answer: oneshot::Sender<Answer>,
}

/// The queue requests submit to; committers drain it.
pub struct GroupCommit {
    queue: mpsc::Sender<Job>,
    /// Closed until the start-up session check passed: nothing is committed before.
    gate: SessionGate,
}

impl GroupCommit {
    /// Starts `settings.committers` committer tasks over `pool`.
    pub fn start(pool: PgPool, settings: GroupCommitSettings) -> Self {
        let max_batch = settings.max_batch.max(1);
        let (queue, receiver) = mpsc::channel(max_batch * settings.committers.max(1) * 4);
        let receiver = Arc::new(Mutex::new(receiver));
        for _ in 0..settings.committers.max(1) {
            tokio::spawn(commit_loop(
                pool.clone(),
                Arc::clone(&receiver),
                max_batch,
                settings.statement_limit,
            ));
        }
        Self {
            queue,
            gate: SessionGate::open(),
        }
    }

    /// Commits nothing until `gate` opens: [`GroupCommit::commit`] waits for it, within
    /// the caller's deadline.
    pub fn gated_by(self, gate: SessionGate) -> Self {
        Self { gate, ..self }
    }

    /// Commits `receipt`, whose payload is in `payload`, with whatever else is waiting.
    /// The
    /// caller bounds the wait.
    pub async fn commit(&self, receipt: &NewReceipt<'_>, payload: CommitPayload) -> Answer {
        let (answer, answered) = oneshot::channel();
        let job = Job {
            receipt: QueuedReceipt {
                integration: receipt.integration.to_owned(),
                source_scope: receipt.source_scope.clone(),
                event_id: receipt.event_id.clone(),
                event_type: receipt.event_type.to_owned(),
                route_key: receipt.route_key.to_owned(),
                content_digest: receipt.content_digest.map(<[u8]>::to_vec),
                delivery_json: receipt.delivery_json.map(str::to_owned),
                subject: receipt.order.subject.map(str::to_owned),
                event_at: receipt.order.event_at,
                ordered: receipt.order.ordered,
                payload,
            },
            answer,
        };
        let unavailable = |reason: &str| CommitError::Unavailable(reason.to_owned());
        // Until the start-up session check passed, wait for it as for a connection (the
        // caller's deadline answers 503 if it does not come).
        if !self.gate.is_open() {
            self.gate.clone().opened().await;
        }
        self.queue
            .send(job)
            .await
            .map_err(|_| unavailable("the committers have stopped"))?;
        answered
            .await
            .unwrap_or_else(|_| Err(unavailable("the committer stopped before answering")))
    }
}

/// Takes the next batch and commits it, until every sender is gone.
async fn commit_loop(
    pool: PgPool,
    receiver: Arc<Mutex<mpsc::Receiver<Job>>>,
    max_batch: usize,
    statement_limit: Duration,
) {
    // Jobs taken from the queue beyond the byte bound wait here for this committer's
    // next statement.
    let mut waiting: Vec<Job> = Vec::with_capacity(max_batch);
    let mut held = HeldConnection::default();
    loop {
        if waiting.is_empty() {
            // An idle committer gives its connection back once it could no longer use it
            // unchecked (closing the pool waits for it); receiving is cancel-safe.
            let next = receive(&receiver, &mut waiting, max_batch);
            let received = match tokio::time::timeout(HOLD_WHILE_BUSY, next).await {
                Ok(received) => received,
                Err(_idle) => {
                    held.release();
                    receive(&receiver, &mut waiting, max_batch).await
                }
            };
            if received == 0 {
                return;
            }
        }
        let batch: Vec<Job> = waiting.drain(..batch_length(&waiting, max_batch)).collect();
        telemetry::record_commit_batch(batch.len());
        let answers = commit_batch(&pool, &mut held, &batch, statement_limit).await;
        for (job, answer) in batch.into_iter().zip(answers) {
            // The request may have given up (deadline): its answer is then dropped.
            job.answer.send(answer).ok();
        }
    }
}

/// Waits for the queue (one committer at a time) and moves up to `max_batch` jobs into
/// `waiting`; 0 once every sender is gone.
async fn receive(
    receiver: &Mutex<mpsc::Receiver<Job>>,
    waiting: &mut Vec<Job>,
    max_batch: usize,
) -> usize {
    receiver.lock().await.recv_many(waiting, max_batch).await
}

/// A connection its committer used this recently is known to be alive: it is used again
/// without a check.
const HOLD_WHILE_BUSY: Duration = Duration::from_secs(1);
/// A committer hands its connection back to the pool after this long at most, so that the
/// pool's lifetime and idle rules still apply to it.
const HOLD_AT_MOST: Duration = Duration::from_secs(60);

/// The connection a committer keeps between consecutive statements. The pool checks a
/// connection with a round trip when it is taken and again when it is given back: two
/// round trips per batch, for nothing while the committer is busy.
#[derive(Default)]
struct HeldConnection {
    held: Option<Held>,
}

struct Held {
    connection: PoolConnection<Postgres>,
    taken_at: Instant,
    used_at: Instant,
}

impl HeldConnection {
    /// The connection for the next statement: the one held, if it was used within
    /// [`HOLD_WHILE_BUSY`] and taken within [`HOLD_AT_MOST`]; else (the held one going
    /// back to the pool) one the pool has checked.
    async fn take(&mut self, pool: &PgPool) -> Result<Held, sqlx::Error> {
        if let Some(held) = self.held.take()
            && held.used_at.elapsed() < HOLD_WHILE_BUSY
            && held.taken_at.elapsed() < HOLD_AT_MOST
        {
            return Ok(held);
        }
        let connection = inbound_runtime::process_metrics::acquire(pool).await?;
        let now = Instant::now();
        Ok(Held {
            connection,
            taken_at: now,
            used_at: now,
        })
    }

    /// Gives the held connection back to the pool.
    fn release(&mut self) {
        self.held = None;
    }

    /// Keeps `held` for the next statement, or closes it when its last statement left it
    /// unusable (the next batch then gets a checked one).
    fn keep(&mut self, mut held: Held, usable: bool) {
        if usable {
            held.used_at = Instant::now();
            self.held = Some(held);
        } else {
            // Dropped without a goodbye (a silent server would never take one); the pool
            // may open a replacement.
            drop(held.connection.detach());
        }
    }
}

/// How many of the first `jobs` fit one statement: at most `max_batch`, and at most
/// [`MAX_BATCH_PAYLOAD_BYTES`] of payload unless the first alone is larger.
fn batch_length(jobs: &[Job], max_batch: usize) -> usize {
    let mut bytes = 0;
    jobs.iter()
        .take(max_batch)
        .take_while(|job| {
            bytes += job.receipt.payload.body.bytes().len();
            bytes <= MAX_BATCH_PAYLOAD_BYTES
        })
        .count()
        .max(1)
        .min(jobs.len())
}

/// One answer per job, in order.
async fn commit_batch(
    pool: &PgPool,
    held: &mut HeldConnection,
    batch: &[Job],
    statement_limit: Duration,
) -> Vec<Answer> {
    let mut connection = match held.take(pool).await {
        Ok(connection) => connection,
        Err(error) => {
            let reason = CommitError::Unavailable(format!("database: {error}"));
            return batch.iter().map(|_| Err(reason.clone())).collect();
        }
    };
    failpoint::hit("before_receipt_commit");
    let (answers, usable) =
        insert_isolating_members(&mut connection.connection, batch, statement_limit).await;
    // A large statement grew the connection's buffers: give them back rather than let
    // every pooled connection keep the largest batch it ever sent.
    if batch_bytes(batch) > store::SHRINK_BUFFERS_AFTER_BYTES {
        connection.connection.shrink_buffers();
    }
    held.keep(connection, usable);
    answers
}

/// Payload bytes of `batch`.
fn batch_bytes(batch: &[Job]) -> usize {
    batch
        .iter()
        .map(|job| job.receipt.payload.body.bytes().len())
        .sum()
}

/// One answer per job: the batch in one statement, or member by member when the
/// statement failed on what a member's data can cause. Also whether the connection is
/// still usable afterwards.
async fn insert_isolating_members(
    connection: &mut PgConnection,
    batch: &[Job],
    statement_limit: Duration,
) -> (Vec<Answer>, bool) {
    match insert(connection, batch, statement_limit).await {
        Ok(outcomes) => (outcomes.into_iter().map(Ok).collect(), true),
        Err(error) if batch.len() > 1 && caused_by_a_member(&error) => {
            tracing::warn!(
                receipts = batch.len(),
                %error,
                "a group-commit batch failed on one member's data; committing its members one by one"
            );
            let mut answers = Vec::with_capacity(batch.len());
            let mut usable = true;
            for job in batch {
                if !usable {
                    // The connection is gone: the rest are not tried on it, one timeout each.
                    answers.push(Err(CommitError::Unavailable(
                        "database: the connection was lost".to_owned(),
                    )));
                    continue;
                }
                let member = std::slice::from_ref(job);
                answers.push(match insert(connection, member, statement_limit).await {
                    Ok(mut outcomes) => Ok(outcomes.remove(0)),
                    Err(error) => {
                        usable &= leaves_connection_usable(&error);
                        Err(commit_error(&error))
                    }
                });
            }
            (answers, usable)
        }
        Err(error) => {
            let reason = commit_error(&error);
            (
                batch.iter().map(|_| Err(reason.clone())).collect(),
                leaves_connection_usable(&error),
            )
        }
    }
}

/// One statement for `batch`, given up (`store::bounded`: an I/O error, so the connection
/// is then dropped) when no answer came within `statement_limit`.
async fn insert(
    connection: &mut PgConnection,
    batch: &[Job],
    statement_limit: Duration,
) -> Result<Vec<InsertOutcome>, sqlx::Error> {
    let receipts: Option<Vec<NewReceipt<'_>>> =
        batch.iter().map(|job| job.receipt.as_new()).collect();
    let Some(receipts) = receipts else {
        return Err(sqlx::Error::Decode("a queued body is not UTF-8".into()));
    };
    store::bounded::statement(
        statement_limit,
        store::insert_receipts(connection, &receipts),
    )
    .await
}

/// The SQLSTATE class of a database error (`"22"` for data exceptions).
fn sqlstate_class(error: &sqlx::Error) -> Option<String> {
    let code = error.as_database_error()?.code()?;
    Some(code.get(..2)?.to_owned())
}

/// Whether one member's data (or the order members met another batch in) can explain
/// the failure, so that committing them one by one isolates it.
fn caused_by_a_member(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Decode(_))
        || matches!(
            sqlstate_class(error).as_deref(),
            Some("22" | "23" | "54" | "40")
        )
}

/// Whether a connection whose statement failed with `error` can take the next one: the
/// server refused it (the session is intact), or it never left (our own encoding).
/// Anything else (I/O, protocol, a timeout) may have left the session in any state.
fn leaves_connection_usable(error: &sqlx::Error) -> bool {
    match error {
        // The server ended the session (SQLSTATE 57P01–57P05: terminated, shut down,
        // idle too long) or lost it (08: connection exceptions): a FATAL, not a refusal.
        sqlx::Error::Database(error) => !error
            .code()
            .is_some_and(|code| code.starts_with("57P") || code.starts_with("08")),
        sqlx::Error::Decode(_) | sqlx::Error::Encode(_) => true,
        _ => false,
    }
}

/// How a failed statement is answered: the receipt's own data refused → unstorable.
fn commit_error(error: &sqlx::Error) -> CommitError {
    let reason = format!("database: {error}");
    if matches!(error, sqlx::Error::Decode(_))
        || matches!(sqlstate_class(error).as_deref(), Some("22" | "23" | "54"))
    {
        CommitError::Unstorable(reason)
    } else {
        CommitError::Unavailable(reason)
    }
}
