//! Group commit for delivery outcomes. Each delivery task hands the end of its attempt to
//! one recorder task and waits for the answer; the recorder writes everything waiting in
//! one fenced statement ([`store::effects::finish_deliveries`]) and answers each task. An idle
//! recorder takes a lone outcome at once (no timer), so an outcome waits at most for the
//! statement already in flight — the "remote success, not yet recorded" window stays
//! the length of one short statement.
//!
//! An outcome the sink already acted on must not be lost to someone else's trouble, so:
//! - the recorder writes on a connection of its own, which nothing else can take;
//! - a statement refused for what it carries (one row's data) is retried member by
//!   member, so that only the offender goes unrecorded;
//! - a statement the database does not answer within the statement limit is given up
//!   and its connection replaced, like an unavailable database;
//! - when the database is unavailable, it retries (50 ms doubling to 1 s) until each
//!   outcome's deadline — the end of its in-flight lease, after which another worker may
//!   judge the attempt lost — and only then gives that outcome up.

use std::sync::Arc;
use std::time::{Duration, Instant};

use inbound_runtime::database::with_connection;
use inbound_runtime::failpoint;
use inbound_store::{self as store, effects::FinishedDelivery};
use sqlx::PgPool;
use tokio::sync::{mpsc, oneshot};

/// The most outcomes written by one statement.
const MAX_BATCH: usize = 256;

/// How long the recorder waits for its own connection before retrying.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Whether an outcome was recorded: `Ok(false)` when its lease was lost.
pub type Recorded = Result<bool, NotRecorded>;

/// Why an outcome was not recorded (it crosses from the recorder task to the delivery
/// task: a type, not a string; the database error is shared by every outcome it failed).
#[derive(Debug, Clone, thiserror::Error)]
pub enum NotRecorded {
    /// The database refused or was unavailable until the outcome's deadline.
    #[error("{0}")]
    Database(std::sync::Arc<sqlx::Error>),
    /// The recorder task is gone (the worker is shutting down).
    #[error("the recorder has stopped")]
    Stopped,
}

impl From<sqlx::Error> for NotRecorded {
    fn from(error: sqlx::Error) -> Self {
        Self::Database(std::sync::Arc::new(error))
    }
}

struct Waiting {
    outcome: FinishedDelivery,
    /// Give up recording after this (its in-flight lease is about to end).
    deadline: Instant,
    reply: oneshot::Sender<Recorded>,
}

impl Waiting {
    fn answer(self, recorded: Recorded) {
        // A task that stopped waiting no longer needs the answer.
        let _ = self.reply.send(recorded);
    }
}

/// A handle to the recorder task; the task ends when every handle is dropped.
#[derive(Clone)]
pub struct Recorder {
    sender: mpsc::Sender<Waiting>,
}

impl Recorder {
    /// Starts the recorder task on the current runtime, with a connection of its own to
    /// `pool`'s database (so a worker's pool needs one connection more than its slots).
    pub fn start(
        pool: &PgPool,
        session: &store::SessionTarget,
        clock: &Arc<store::StatementClock>,
        statement_limit: Duration,
    ) -> Self {
        let (sender, receiver) = mpsc::channel(MAX_BATCH);
        let database = Database {
            pool: store::dedicated_connection(pool, session, CONNECT_TIMEOUT),
            clock: Arc::clone(clock),
            statement_limit,
        };
        tokio::spawn(record_loop(database, receiver));
        Self { sender }
    }

    /// Records `finished` with whatever else is waiting; resolves once it is committed,
    /// or once `deadline` passed with the database still unavailable.
    pub async fn record(&self, finished: FinishedDelivery, deadline: Instant) -> Recorded {
        let (reply, answer) = oneshot::channel();
        let waiting = Waiting {
            outcome: finished,
            deadline,
            reply,
        };
        self.sender
            .send(waiting)
            .await
            .map_err(|_| NotRecorded::Stopped)?;
        answer.await.unwrap_or(Err(NotRecorded::Stopped))
    }
}

async fn record_loop(database: Database, mut receiver: mpsc::Receiver<Waiting>) {
    let mut waiting = Vec::with_capacity(MAX_BATCH);
    while receiver.recv_many(&mut waiting, MAX_BATCH).await > 0 {
        write_until_deadlines(&database, std::mem::take(&mut waiting)).await;
    }
}

/// Writes `waiting` together; on a statement error, member by member; on unavailability,
/// again after a pause, answering each outcome once written or once its deadline passed.
/// The recorder's connection, the time its statements compare with, and how long one
/// statement may wait on the database.
struct Database {
    pool: PgPool,
    clock: Arc<store::StatementClock>,
    statement_limit: Duration,
}

async fn write_until_deadlines(database: &Database, mut waiting: Vec<Waiting>) {
    let mut pause = Duration::from_millis(50);
    loop {
        let error = match write(database, &waiting).await {
            Ok(recorded) => {
                for one in waiting {
                    let id = one.outcome.effect_id;
                    one.answer(Ok(recorded.contains(&id)));
                }
                return;
            }
            Err(error) => error,
        };
        if !store::is_unavailability(&error) {
            waiting = write_one_by_one(database, waiting).await;
        }
        let now = Instant::now();
        let (late, rest): (Vec<Waiting>, Vec<Waiting>) = waiting
            .into_iter()
            .partition(|one| one.deadline <= now + pause);
        let error = NotRecorded::from(error);
        for one in late {
            tracing::warn!(effect_id = one.outcome.effect_id.0, %error, "could not record a delivery outcome before its in-flight lease ends");
            one.answer(Err(error.clone()));
        }
        waiting = rest;
        if waiting.is_empty() {
            return;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(1));
    }
}

/// Writes each outcome alone: answers those written and those refused for their own
/// sake, and returns those the database was unavailable for.
async fn write_one_by_one(database: &Database, waiting: Vec<Waiting>) -> Vec<Waiting> {
    let mut unavailable = Vec::new();
    for one in waiting {
        match write(database, std::slice::from_ref(&one)).await {
            Ok(recorded) => {
                let id = one.outcome.effect_id;
                one.answer(Ok(recorded.contains(&id)));
            }
            Err(error) if store::is_unavailability(&error) => unavailable.push(one),
            Err(error) => {
                tracing::warn!(effect_id = one.outcome.effect_id.0, %error, "the database refused this delivery outcome");
                one.answer(Err(error.into()));
            }
        }
    }
    unavailable
}

async fn write(
    database: &Database,
    waiting: &[Waiting],
) -> Result<Vec<inbound_core::keys::EffectId>, sqlx::Error> {
    let outcomes: Vec<FinishedDelivery> = waiting.iter().map(|one| one.outcome.clone()).collect();
    let now = database.clock.now();
    with_connection(
        &database.pool,
        database.statement_limit,
        async |connection| {
            failpoint::pause("before_recording").await;
            store::effects::finish_deliveries(connection, &outcomes, now).await
        },
    )
    .await
}
