//! Group commit for delivery outcomes. Each delivery task hands the end of its attempt to
//! one recorder task and waits for the answer; the recorder writes everything waiting in
//! one fenced statement ([`store::finish_deliveries`]) and answers each task. An idle
//! recorder takes a lone outcome at once (no timer), so an outcome waits at most for the
//! statement already in flight — the "remote success, not yet recorded" window stays
//! the length of one short statement.

use inbound_core::store::effects::{self as store, FinishedDelivery};
use sqlx::PgPool;
use tokio::sync::{mpsc, oneshot};

/// The most outcomes written by one statement.
const MAX_BATCH: usize = 256;

/// Whether an outcome was recorded: `Ok(false)` when its lease was lost.
pub type Recorded = Result<bool, String>;

type Waiting = (FinishedDelivery, oneshot::Sender<Recorded>);

/// A handle to the recorder task; the task ends when every handle is dropped.
#[derive(Clone)]
pub struct Recorder {
    sender: mpsc::Sender<Waiting>,
}

impl Recorder {
    /// Starts the recorder task on the current runtime.
    pub fn start(pool: PgPool) -> Self {
        let (sender, receiver) = mpsc::channel(MAX_BATCH);
        tokio::spawn(record_loop(pool, receiver));
        Self { sender }
    }

    /// Records `finished` with whatever else is waiting; resolves once it is committed.
    pub async fn record(&self, finished: FinishedDelivery) -> Recorded {
        let (reply, answer) = oneshot::channel();
        self.sender
            .send((finished, reply))
            .await
            .map_err(|_| "the recorder has stopped".to_owned())?;
        answer
            .await
            .unwrap_or_else(|_| Err("the recorder has stopped".to_owned()))
    }
}

async fn record_loop(pool: PgPool, mut receiver: mpsc::Receiver<Waiting>) {
    let mut waiting = Vec::with_capacity(MAX_BATCH);
    while receiver.recv_many(&mut waiting, MAX_BATCH).await > 0 {
        let (outcomes, replies): (Vec<FinishedDelivery>, Vec<oneshot::Sender<Recorded>>) =
            waiting.drain(..).unzip();
        let written = match pool.acquire().await {
            Ok(mut connection) => store::finish_deliveries(&mut connection, &outcomes).await,
            Err(error) => Err(error),
        };
        match written {
            Ok(recorded) => {
                for (outcome, reply) in outcomes.iter().zip(replies) {
                    // A task that stopped waiting no longer needs the answer.
                    let _ = reply.send(Ok(recorded.contains(&outcome.effect_id)));
                }
            }
            Err(error) => {
                let error = error.to_string();
                for reply in replies {
                    let _ = reply.send(Err(error.clone()));
                }
            }
        }
    }
}
