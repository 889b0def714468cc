//! The start-up check that `--db-pooler` matches what the database URL reaches, run in
//! the background so that a process still starts while the database is down (answering
//! 503 / not ready) and is checked the moment the database answers. Until it has passed,
//! the [`SessionGate`] stays closed: the ingress commits nothing (503) and the worker
//! claims nothing, so an undeclared pooler never carries a statement of ours.

use std::time::{Duration, Instant};

use inbound_store::{self as store, SessionTarget, session};
use tokio::sync::watch;

/// How long one attempt waits for a connection; attempts repeat every [`RETRY`] while the
/// database cannot be reached, with a warning at most every [`WARN_EVERY`].
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const RETRY: Duration = Duration::from_secs(1);
const WARN_EVERY: Duration = Duration::from_secs(30);

/// Where the check stands.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verdict {
    /// Not yet answered (the database may be down).
    Pending,
    /// The sessions are what the flags say.
    Passed,
    /// They are not: the one-line reason.
    Refused(String),
}

/// How long the check's statements may take, once both sessions are connected (each
/// connect has [`CONNECT_TIMEOUT`]): a server that answers none of them is given up on,
/// and the check tried again on new sessions.
const CHECK_STATEMENTS_LIMIT: Duration = Duration::from_secs(5);

/// One check: two sessions, then the statements that compare them, each phase bounded.
/// The sessions end with the attempt (dropped: a silent server gets no goodbye).
async fn check_once(
    options: &sqlx::postgres::PgConnectOptions,
    target: &SessionTarget,
) -> Result<Result<(), session::SessionMismatch>, sqlx::Error> {
    let (mut first, mut second) = session::connect_pair(options, target, CONNECT_TIMEOUT).await?;
    crate::failpoint::pause("session_check_connected").await;
    tokio::time::timeout(
        CHECK_STATEMENTS_LIMIT,
        session::check_connected(&mut first, &mut second, target),
    )
    .await
    .unwrap_or_else(|_| Err(store::bounded::gave_up(CHECK_STATEMENTS_LIMIT)))
}

/// Open once the check has passed; closed before (and for ever after a refusal).
#[derive(Debug, Clone)]
pub struct SessionGate(watch::Receiver<Verdict>);

impl SessionGate {
    /// A gate that is open from the start (for in-process tests and embeddings that
    /// check nothing).
    pub fn open() -> Self {
        let (_, receiver) = watch::channel(Verdict::Passed);
        Self(receiver)
    }

    /// A gate that never opens: a check that never passes.
    pub fn closed() -> Self {
        let (_, receiver) = watch::channel(Verdict::Pending);
        Self(receiver)
    }

    /// Whether the check has passed.
    pub fn is_open(&self) -> bool {
        *self.0.borrow() == Verdict::Passed
    }

    /// Resolves once the check has passed; never after a refusal.
    pub async fn opened(mut self) {
        if self
            .0
            .wait_for(|verdict| *verdict != Verdict::Pending)
            .await
            .is_err()
            || !self.is_open()
        {
            std::future::pending::<()>().await;
        }
    }
}

/// A running check: [`SessionGuard::gate`] for what may run, [`SessionGuard::or_tripped`]
/// to stop when it refuses.
pub struct SessionGuard {
    verdict: watch::Receiver<Verdict>,
    task: tokio::task::JoinHandle<()>,
}

impl SessionGuard {
    /// Starts checking the sessions `database_url` gives for `target`.
    pub fn start(database_url: &str, target: &SessionTarget) -> Result<Self, store::StoreError> {
        let options = store::parse_url(database_url)?.application_name("inbound-session-check");
        let target = target.clone();
        let (sender, verdict) = watch::channel(Verdict::Pending);
        let task = tokio::spawn(async move {
            let mut warned: Option<Instant> = None;
            let verdict = loop {
                match check_once(&options, &target).await {
                    Ok(Ok(())) => break Verdict::Passed,
                    Ok(Err(mismatch)) => break Verdict::Refused(mismatch.to_string()),
                    Err(error) => {
                        if let Some(explained) =
                            session::explain_connect_error(&error, target.pooler)
                        {
                            break Verdict::Refused(explained);
                        }
                        if warned.is_none_or(|at| at.elapsed() >= WARN_EVERY) {
                            tracing::warn!(%error, "cannot check the database sessions yet; nothing is committed or claimed until it can");
                            warned = Some(Instant::now());
                        }
                        tokio::time::sleep(RETRY).await;
                    }
                }
            };
            match &verdict {
                Verdict::Refused(reason) => tracing::error!(error = %reason, "refusing to run"),
                _ => tracing::info!(pooler = %target.pooler, "database sessions checked"),
            }
            sender.send_replace(verdict);
        });
        Ok(Self { verdict, task })
    }

    /// Open once the check has passed.
    pub fn gate(&self) -> SessionGate {
        SessionGate(self.verdict.clone())
    }

    /// `shutdown`, or the moment the sessions were found unusable as configured: the
    /// process then drains and [`SessionGuard::finish`] says why.
    pub fn or_tripped(
        &self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> impl Future<Output = ()> + Send + 'static {
        let mut verdict = self.verdict.clone();
        let tripped = async move {
            if verdict
                .wait_for(|verdict| matches!(verdict, Verdict::Refused(_)))
                .await
                .is_err()
            {
                // The check passed (its sender is gone without a refusal).
                std::future::pending::<()>().await;
            }
        };
        async move {
            tokio::select! {
                () = shutdown => {}
                () = tripped => {}
            }
        }
    }

    /// Stops the check; `Err` with the one-line reason if it refused.
    pub fn finish(self) -> anyhow::Result<()> {
        self.task.abort();
        match &*self.verdict.borrow() {
            Verdict::Refused(reason) => Err(anyhow::anyhow!(reason.clone())),
            Verdict::Pending | Verdict::Passed => Ok(()),
        }
    }
}
