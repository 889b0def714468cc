//! The start-up check that `--db-pooler` matches what the database URL reaches, run in
//! the background so that a process still starts while the database is down (answering
//! 503 / not ready) and is checked the moment the database answers.

use std::time::Duration;

use inbound_core::store::{self, SessionTarget, session};
use tokio::sync::watch;

/// How long one attempt waits for a connection; attempts repeat every [`RETRY`] while the
/// database cannot be reached.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const RETRY: Duration = Duration::from_secs(1);

/// A running check; see [`SessionGuard::tripped`].
pub struct SessionGuard {
    verdict: watch::Receiver<Option<String>>,
    task: tokio::task::JoinHandle<()>,
}

impl SessionGuard {
    /// Starts checking the sessions `database_url` gives for `target`.
    pub fn start(database_url: &str, target: &SessionTarget) -> Result<Self, store::StoreError> {
        let options = store::parse_url(database_url)?.application_name("inbound-session-check");
        let target = target.clone();
        let (sender, verdict) = watch::channel(None);
        let task = tokio::spawn(async move {
            loop {
                let mismatch =
                    match session::check_sessions(&options, &target, CONNECT_TIMEOUT).await {
                        Ok(Ok(())) => {
                            tracing::info!(pooler = %target.pooler, "database sessions checked");
                            return;
                        }
                        Ok(Err(mismatch)) => mismatch.to_string(),
                        Err(error) => match session::explain_connect_error(&error, target.pooler) {
                            Some(explained) => explained,
                            None => {
                                tokio::time::sleep(RETRY).await;
                                continue;
                            }
                        },
                    };
                tracing::error!(error = %mismatch, "refusing to run");
                let _ = sender.send(Some(mismatch));
                return;
            }
        });
        Ok(Self { verdict, task })
    }

    /// `shutdown`, or the moment the sessions were found unusable as configured: the
    /// process then drains and [`SessionGuard::finish`] says why.
    pub fn or_tripped(
        &self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> impl Future<Output = ()> + Send + 'static {
        let mut verdict = self.verdict.clone();
        let tripped = async move {
            if verdict.wait_for(Option::is_some).await.is_err() {
                // The check passed (its sender is gone without a verdict).
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

    /// Stops the check; `Err` with the one-line reason if it tripped.
    pub fn finish(self) -> anyhow::Result<()> {
        self.task.abort();
        match self.verdict.borrow().clone() {
            Some(mismatch) => Err(anyhow::anyhow!(mismatch)),
            None => Ok(()),
        }
    }
}
