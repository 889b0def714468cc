//! How the ingress runs besides its configuration: [`IngressSettings`], built only through
//! [`IngressSettingsBuilder::build`], which refuses a value out of its range (a zero
//! budget, a zero timeout) — whether it came from a flag or from code.

use std::time::Duration;

use inbound_store::SessionTarget;

/// How the ingress runs: its database pool and bounds, its request and body bounds, and
/// its group commit. Read it with the getters; build it with [`IngressSettings::builder`],
/// whose defaults are the flags'.
///
/// ```
/// use inbound_ingress::IngressSettings;
///
/// let settings = IngressSettings::builder().db_max_connections(32).build().expect("in range");
/// assert_eq!(settings.db_max_connections(), 32);
/// assert!(IngressSettings::builder().body_budget_bytes(0).build().is_err());
/// ```
#[derive(Debug, Clone)]
pub struct IngressSettings {
    pub(crate) session: SessionTarget,
    pub(crate) db_max_connections: u32,
    pub(crate) db_acquire_timeout: Duration,
    pub(crate) db_statement_timeout: Duration,
    pub(crate) request_timeout: Duration,
    pub(crate) header_read_timeout: Duration,
    pub(crate) max_connections: usize,
    pub(crate) commit_batch_max: usize,
    pub(crate) commit_concurrency: usize,
    pub(crate) body_budget_bytes: usize,
    pub(crate) shutdown_grace: Duration,
    pub(crate) gauge_interval: Duration,
}

/// The most pooled database connections (PostgreSQL's own `max_connections` is far lower
/// on any machine this runs on).
const MAX_DB_CONNECTIONS: u32 = 1000;

/// The most connections served at once (each holds a task and its buffers).
const MAX_CONNECTIONS: usize = 65_536;

/// A setting out of its range: which one (as the builder names it) and the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{setting} must be {rule}")]
pub struct InvalidSetting {
    /// The setting.
    pub setting: &'static str,
    /// What it must be.
    pub rule: &'static str,
}

/// [`IngressSettings`] being put together; [`IngressSettingsBuilder::build`] checks them.
#[derive(Debug, Clone)]
#[must_use]
pub struct IngressSettingsBuilder(IngressSettings);

impl IngressSettings {
    /// The flags' defaults: 16 connections, a 2 s acquire and 5 s statement timeout, 10 s
    /// a request, 5 s a request head, 1,024 connections, batches of 128 receipts, one
    /// commit in flight, a 32 MiB body budget, a 20 s drain, gauges every 5 s, inbound's
    /// schema reached directly.
    pub fn builder() -> IngressSettingsBuilder {
        IngressSettingsBuilder(Self {
            session: SessionTarget {
                schema: inbound_store::Schema::default(),
                pooler: inbound_store::Pooler::None,
            },
            db_max_connections: 16,
            db_acquire_timeout: Duration::from_secs(2),
            db_statement_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(5),
            max_connections: 1024,
            commit_batch_max: 128,
            commit_concurrency: 1,
            body_budget_bytes: 32 * 1024 * 1024,
            shutdown_grace: Duration::from_secs(20),
            gauge_interval: Duration::from_secs(5),
        })
    }

    /// inbound's schema and how sessions reach the database.
    pub fn session(&self) -> &SessionTarget {
        &self.session
    }

    /// Database connections in the pool.
    pub fn db_max_connections(&self) -> u32 {
        self.db_max_connections
    }

    /// The longest wait for a pooled connection.
    pub fn db_acquire_timeout(&self) -> Duration {
        self.db_acquire_timeout
    }

    /// The server's statement timeout on the ingress's sessions.
    pub fn db_statement_timeout(&self) -> Duration {
        self.db_statement_timeout
    }

    /// The whole request's budget: body, verification and commit.
    pub fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    /// How long a request head may take to arrive (and an idle connection live).
    pub fn header_read_timeout(&self) -> Duration {
        self.header_read_timeout
    }

    /// Connections served at once.
    pub fn max_connections(&self) -> usize {
        self.max_connections
    }

    /// Most receipts in one group-commit statement.
    pub fn commit_batch_max(&self) -> usize {
        self.commit_batch_max
    }

    /// Group-commit statements in flight at once.
    pub fn commit_concurrency(&self) -> usize {
        self.commit_concurrency
    }

    /// Bytes of request bodies held at once, all requests together.
    pub fn body_budget_bytes(&self) -> usize {
        self.body_budget_bytes
    }

    /// How long open requests may take to finish after shutdown begins.
    pub fn shutdown_grace(&self) -> Duration {
        self.shutdown_grace
    }

    /// How often the queue ages are read from the database.
    pub fn gauge_interval(&self) -> Duration {
        self.gauge_interval
    }
}

impl IngressSettingsBuilder {
    /// inbound's schema and how sessions reach the database.
    pub fn session(mut self, session: SessionTarget) -> Self {
        self.0.session = session;
        self
    }

    /// Database connections in the pool: 1 to 1000.
    pub fn db_max_connections(mut self, connections: u32) -> Self {
        self.0.db_max_connections = connections;
        self
    }

    /// The longest wait for a pooled connection: 1 ms to 1 minute.
    pub fn db_acquire_timeout(mut self, timeout: Duration) -> Self {
        self.0.db_acquire_timeout = timeout;
        self
    }

    /// The server's statement timeout: 1 ms to 1 minute.
    pub fn db_statement_timeout(mut self, timeout: Duration) -> Self {
        self.0.db_statement_timeout = timeout;
        self
    }

    /// The whole request's budget: 1 s to 10 minutes.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.0.request_timeout = timeout;
        self
    }

    /// How long a request head may take: 1 s to 10 minutes.
    pub fn header_read_timeout(mut self, timeout: Duration) -> Self {
        self.0.header_read_timeout = timeout;
        self
    }

    /// Connections served at once: 1 to 65536.
    pub fn max_connections(mut self, connections: usize) -> Self {
        self.0.max_connections = connections;
        self
    }

    /// Most receipts in one group-commit statement: 1 to 1,024.
    pub fn commit_batch_max(mut self, receipts: usize) -> Self {
        self.0.commit_batch_max = receipts;
        self
    }

    /// Group-commit statements in flight at once: 1 to 64.
    pub fn commit_concurrency(mut self, statements: usize) -> Self {
        self.0.commit_concurrency = statements;
        self
    }

    /// Bytes of request bodies held at once: at least 1 (and, when the ingress starts, at
    /// least every integration's `max_body_bytes`).
    pub fn body_budget_bytes(mut self, bytes: usize) -> Self {
        self.0.body_budget_bytes = bytes;
        self
    }

    /// How long open requests may take after shutdown begins: at most 1 hour.
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.0.shutdown_grace = grace;
        self
    }

    /// How often the queue ages are read: 1 s to 1 minute.
    pub fn gauge_interval(mut self, interval: Duration) -> Self {
        self.0.gauge_interval = interval;
        self
    }

    /// The settings, or the first one out of its range.
    pub fn build(self) -> Result<IngressSettings, InvalidSetting> {
        let settings = self.0;
        let millisecond = Duration::from_millis(1);
        let second = Duration::from_secs(1);
        let minute = Duration::from_secs(60);
        let checks: [(bool, &'static str, &'static str); 11] = [
            (
                (1..=MAX_DB_CONNECTIONS).contains(&settings.db_max_connections),
                "db_max_connections",
                "between 1 and 1000",
            ),
            (
                (millisecond..=minute).contains(&settings.db_acquire_timeout),
                "db_acquire_timeout",
                "between 1 ms and 1 minute",
            ),
            (
                (millisecond..=minute).contains(&settings.db_statement_timeout),
                "db_statement_timeout",
                "between 1 ms and 1 minute",
            ),
            (
                (second..=10 * minute).contains(&settings.request_timeout),
                "request_timeout",
                "between 1 s and 10 minutes",
            ),
            (
                (second..=10 * minute).contains(&settings.header_read_timeout),
                "header_read_timeout",
                "between 1 s and 10 minutes",
            ),
            (
                (1..=MAX_CONNECTIONS).contains(&settings.max_connections),
                "max_connections",
                "between 1 and 65536",
            ),
            (
                (1..=1024).contains(&settings.commit_batch_max),
                "commit_batch_max",
                "between 1 and 1024",
            ),
            (
                (1..=64).contains(&settings.commit_concurrency),
                "commit_concurrency",
                "between 1 and 64",
            ),
            (
                settings.body_budget_bytes >= 1,
                "body_budget_bytes",
                "at least 1",
            ),
            (
                settings.shutdown_grace <= 60 * minute,
                "shutdown_grace",
                "at most 1 hour",
            ),
            (
                (second..=minute).contains(&settings.gauge_interval),
                "gauge_interval",
                "between 1 s and 1 minute",
            ),
        ];
        match checks.into_iter().find(|(holds, _, _)| !holds) {
            Some((_, setting, rule)) => Err(InvalidSetting { setting, rule }),
            None => Ok(settings),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What would panic when the ingress starts (a semaphore of usize::MAX permits) is
    /// refused when the settings are built.
    #[test]
    fn every_limit_is_held_when_the_settings_are_built() {
        let refused = |builder: IngressSettingsBuilder| builder.build().expect_err("refused");
        let base = IngressSettings::builder;
        assert_eq!(
            refused(base().max_connections(usize::MAX)).setting,
            "max_connections"
        );
        assert_eq!(
            refused(base().db_max_connections(u32::MAX)).setting,
            "db_max_connections"
        );
        assert_eq!(
            refused(base().db_statement_timeout(Duration::MAX)).setting,
            "db_statement_timeout"
        );
        assert!(base().max_connections(65_536).build().is_ok());
    }
}
