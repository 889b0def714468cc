//! How a worker claims and retries: [`WorkerSettings`], built only through
//! [`WorkerSettingsBuilder::build`], which refuses a value out of its range — so neither a
//! flag nor a hand-built value can make the worker a busy loop, an unbounded one, or one
//! whose batches overflow PostgreSQL's subtransaction cache.

use std::time::Duration;

use inbound_store::SessionTarget;

use crate::{MAX_BATCH_SIZE, Role};

/// The most receipt transactions, or effects, in flight at once: each may hold a
/// database connection, and PostgreSQL's own `max_connections` is far lower.
const MAX_CONCURRENCY: usize = 1024;

/// How a worker claims and retries. Read it with the getters; build it with
/// [`WorkerSettings::builder`], whose defaults are the flags' defaults.
///
/// ```
/// use std::time::Duration;
/// use inbound_worker::WorkerSettings;
///
/// let settings = WorkerSettings::builder()
///     .concurrency(4)
///     .lease(Duration::from_secs(60))
///     .build()
///     .expect("within range");
/// assert_eq!(settings.batch_size(), 50);
/// let refused = WorkerSettings::builder().batch_size(500).build();
/// assert!(refused.unwrap_err().to_string().contains("batch_size must be between 1 and 64"));
/// ```
#[derive(Debug, Clone)]
pub struct WorkerSettings {
    pub(crate) concurrency: usize,
    pub(crate) batch_size: usize,
    pub(crate) effect_concurrency: usize,
    pub(crate) lease: Duration,
    pub(crate) statement_limit: Duration,
    pub(crate) acquire_timeout: Duration,
    pub(crate) poll_interval: Duration,
    pub(crate) max_attempts: i32,
    pub(crate) payload_budget_bytes: usize,
    pub(crate) backoff_base: Duration,
    pub(crate) backoff_cap: Duration,
    pub(crate) worker_id: String,
    pub(crate) integrations: Option<Vec<String>>,
    pub(crate) shutdown_grace: Duration,
    pub(crate) gauge_interval: Duration,
    pub(crate) role: Role,
    pub(crate) session: SessionTarget,
}

/// A setting out of its range: which one (`batch_size`, as its flag `--batch-size` names it
/// too) and the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{setting} must be {rule}")]
pub struct InvalidSetting {
    /// The setting, as the builder names it.
    pub setting: &'static str,
    /// What it must be.
    pub rule: String,
}

impl InvalidSetting {
    /// The same refusal in the words of the flag that sets it (`--batch-size must be …`).
    pub fn as_flag(&self) -> String {
        // One setting takes a list its flag gives an entry at a time.
        let flag = match self.setting {
            "integrations" => "integration".to_owned(),
            setting => setting.replace('_', "-"),
        };
        format!("--{flag} must be {}", self.rule)
    }
}

/// [`WorkerSettings`] being put together; [`WorkerSettingsBuilder::build`] checks them.
#[derive(Debug, Clone)]
#[must_use]
pub struct WorkerSettingsBuilder(WorkerSettings);

impl WorkerSettings {
    /// The flags' defaults: 8 business transactions and 8 effects at once, batches of 50,
    /// a 30 s lease, 10 attempts, retries from 1 s to 10 min, a 4 MiB payload budget, a
    /// 5 s statement timeout (and a 1 s margin), a 2 s wait for a connection, every integration, both roles, inbound's
    /// schema reached directly.
    pub fn builder() -> WorkerSettingsBuilder {
        WorkerSettingsBuilder(Self {
            concurrency: 8,
            batch_size: 50,
            effect_concurrency: 8,
            lease: Duration::from_secs(30),
            statement_limit: Duration::from_secs(5) + inbound_store::bounded::STATEMENT_MARGIN,
            acquire_timeout: Duration::from_secs(2),
            poll_interval: Duration::from_millis(500),
            max_attempts: 10,
            payload_budget_bytes: 4 * 1024 * 1024,
            backoff_base: Duration::from_secs(1),
            backoff_cap: Duration::from_secs(600),
            worker_id: default_worker_id(),
            integrations: None,
            shutdown_grace: Duration::from_secs(20),
            gauge_interval: Duration::from_secs(5),
            role: Role::All,
            session: SessionTarget {
                schema: inbound_store::Schema::default(),
                pooler: inbound_store::Pooler::None,
            },
        })
    }

    /// These settings to change: a builder holding them.
    pub fn to_builder(&self) -> WorkerSettingsBuilder {
        WorkerSettingsBuilder(self.clone())
    }

    /// Business transactions in flight at once.
    pub fn concurrency(&self) -> usize {
        self.concurrency
    }

    /// Most receipts completed in one business transaction (≤ [`MAX_BATCH_SIZE`]).
    pub fn batch_size(&self) -> usize {
        self.batch_size
    }

    /// Effects delivered or reconciled at once.
    pub fn effect_concurrency(&self) -> usize {
        self.effect_concurrency
    }

    /// How long a claim is held before another worker may take it over; also the longest
    /// a business transaction may wait on the database before it is given up.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// The longest one statement waits on the database (the server's statement timeout
    /// and a margin).
    pub fn statement_limit(&self) -> Duration {
        self.statement_limit
    }

    /// The longest a unit of work waits for a pooled connection.
    pub fn acquire_timeout(&self) -> Duration {
        self.acquire_timeout
    }

    /// Sleep between claims when there is nothing to do.
    pub fn poll_interval(&self) -> Duration {
        self.poll_interval
    }

    /// Attempts before a receipt is `failed` (and the budget of an effect's resends after
    /// an attempt that may have landed).
    pub fn max_attempts(&self) -> i32 {
        self.max_attempts
    }

    /// Payload bytes of claimed receipts held at once, all batches together.
    pub fn payload_budget_bytes(&self) -> usize {
        self.payload_budget_bytes
    }

    /// First retry delay.
    pub fn backoff_base(&self) -> Duration {
        self.backoff_base
    }

    /// Longest retry delay.
    pub fn backoff_cap(&self) -> Duration {
        self.backoff_cap
    }

    /// What `receipt_queue.leased_by` says of this worker.
    pub fn worker_id(&self) -> &str {
        &self.worker_id
    }

    /// The integrations it claims (`None`: all).
    pub fn integrations(&self) -> Option<&[String]> {
        self.integrations.as_deref()
    }

    /// How long in-flight transitions may take to finish after shutdown begins.
    pub fn shutdown_grace(&self) -> Duration {
        self.shutdown_grace
    }

    /// How often the queue gauges are read from the database.
    pub fn gauge_interval(&self) -> Duration {
        self.gauge_interval
    }

    /// Which claim loops run: receipts, effects, or both.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The pool's connections: one per receipt batch and per effect in flight (of the
    /// loops its role runs), one for claims, one for gauges, one spare. The outcome
    /// recorder opens one more of its own.
    pub fn max_connections(&self) -> u32 {
        let receipts = if self.role.runs_receipts() {
            self.concurrency
        } else {
            0
        };
        let effects = if self.role.runs_effects() {
            self.effect_concurrency
        } else {
            0
        };
        u32::try_from(receipts.saturating_add(effects))
            .unwrap_or(u32::MAX)
            .saturating_add(3)
    }

    /// inbound's schema and how sessions reach the database.
    pub fn session(&self) -> &SessionTarget {
        &self.session
    }
}

impl WorkerSettingsBuilder {
    /// Business transactions in flight at once: 1 to 1024.
    pub fn concurrency(mut self, concurrency: usize) -> Self {
        self.0.concurrency = concurrency;
        self
    }

    /// Most receipts in one business transaction: 1 to [`MAX_BATCH_SIZE`] (a batch rerun
    /// with a savepoint per receipt must stay within PostgreSQL's cache of 64
    /// subtransactions, past which every snapshot in the cluster slows down).
    pub fn batch_size(mut self, batch_size: usize) -> Self {
        self.0.batch_size = batch_size;
        self
    }

    /// Effects delivered or reconciled at once: 1 to 1024.
    pub fn effect_concurrency(mut self, effect_concurrency: usize) -> Self {
        self.0.effect_concurrency = effect_concurrency;
        self
    }

    /// The lease: 1 s to 1 day.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.0.lease = lease;
        self
    }

    /// The server's statement timeout the worker's sessions carry; a statement is given
    /// up on after it and a margin. 1 ms to 1 hour.
    pub fn statement_timeout(mut self, timeout: Duration) -> Self {
        self.0.statement_limit = timeout.saturating_add(inbound_store::bounded::STATEMENT_MARGIN);
        self
    }

    /// The longest a unit of work waits for a pooled connection: 1 ms to 1 minute.
    pub fn acquire_timeout(mut self, timeout: Duration) -> Self {
        self.0.acquire_timeout = timeout;
        self
    }

    /// Sleep between claims when idle: 1 ms to 1 minute.
    pub fn poll_interval(mut self, poll_interval: Duration) -> Self {
        self.0.poll_interval = poll_interval;
        self
    }

    /// Attempts before a receipt fails: at least 1.
    pub fn max_attempts(mut self, max_attempts: i32) -> Self {
        self.0.max_attempts = max_attempts;
        self
    }

    /// Payload bytes of claimed receipts held at once: at least 1.
    pub fn payload_budget_bytes(mut self, bytes: usize) -> Self {
        self.0.payload_budget_bytes = bytes;
        self
    }

    /// First retry delay: at least 1 ms (a zero would make every retry a busy loop).
    pub fn backoff_base(mut self, base: Duration) -> Self {
        self.0.backoff_base = base;
        self
    }

    /// Longest retry delay: 1 s to 1 hour, and at least the base.
    pub fn backoff_cap(mut self, cap: Duration) -> Self {
        self.0.backoff_cap = cap;
        self
    }

    /// What `receipt_queue.leased_by` says of this worker: 1 to 200 printable characters
    /// (by default the host name and the process id).
    pub fn worker_id(mut self, worker_id: impl Into<String>) -> Self {
        self.0.worker_id = worker_id.into();
        self
    }

    /// Claims only these integrations, at least one (`None`: all).
    pub fn integrations(mut self, integrations: Option<Vec<String>>) -> Self {
        self.0.integrations = integrations;
        self
    }

    /// How long in-flight transitions may take to finish after shutdown begins: at most
    /// 1 hour.
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.0.shutdown_grace = grace;
        self
    }

    /// How often the queue gauges are read: 1 s to 1 minute (the alerts and KEDA count a
    /// process's gauges stale after 2 minutes without a refresh).
    pub fn gauge_interval(mut self, interval: Duration) -> Self {
        self.0.gauge_interval = interval;
        self
    }

    /// Which claim loops run.
    pub fn role(mut self, role: Role) -> Self {
        self.0.role = role;
        self
    }

    /// inbound's schema and how sessions reach the database.
    pub fn session(mut self, session: SessionTarget) -> Self {
        self.0.session = session;
        self
    }

    /// The settings, or the first one out of its range.
    pub fn build(self) -> Result<WorkerSettings, InvalidSetting> {
        let settings = self.0;
        let refuse = |setting: &'static str, rule: &str| {
            Err(InvalidSetting {
                setting,
                rule: rule.to_owned(),
            })
        };
        let second = Duration::from_secs(1);
        let hour = Duration::from_secs(3600);
        if !(1..=MAX_BATCH_SIZE).contains(&settings.batch_size) {
            return refuse("batch_size", &format!("between 1 and {MAX_BATCH_SIZE}"));
        }
        if !(1..=MAX_CONCURRENCY).contains(&settings.concurrency) {
            return refuse("concurrency", &format!("between 1 and {MAX_CONCURRENCY}"));
        }
        if !(1..=MAX_CONCURRENCY).contains(&settings.effect_concurrency) {
            return refuse(
                "effect_concurrency",
                &format!("between 1 and {MAX_CONCURRENCY}"),
            );
        }
        if !(second..=Duration::from_secs(86_400)).contains(&settings.lease) {
            return refuse("lease", "between 1 s and 1 day");
        }
        let margin = inbound_store::bounded::STATEMENT_MARGIN;
        if !(margin + Duration::from_millis(1)..=hour + margin).contains(&settings.statement_limit)
        {
            return refuse("statement_timeout", "between 1 ms and 1 hour");
        }
        let minute = Duration::from_secs(60);
        if !(Duration::from_millis(1)..=minute).contains(&settings.acquire_timeout) {
            return refuse("acquire_timeout", "between 1 ms and 1 minute");
        }
        if !(Duration::from_millis(1)..=minute).contains(&settings.poll_interval) {
            return refuse("poll_interval", "between 1 ms and 1 minute");
        }
        if settings.max_attempts < 1 {
            return refuse("max_attempts", "at least 1");
        }
        if settings.payload_budget_bytes < 1 {
            return refuse("payload_budget_bytes", "at least 1");
        }
        if settings.backoff_base < Duration::from_millis(1) {
            return refuse("backoff_base", "at least 1 ms");
        }
        if !(second..=hour).contains(&settings.backoff_cap)
            || settings.backoff_cap < settings.backoff_base
        {
            return refuse(
                "backoff_cap",
                "between 1 s and 1 hour and at least the backoff base",
            );
        }
        let id = &settings.worker_id;
        if id.trim().is_empty() || id.chars().count() > 200 || id.chars().any(char::is_control) {
            return refuse("worker_id", "1 to 200 printable characters");
        }
        if let Some(names) = &settings.integrations
            && (names.is_empty() || names.iter().any(|name| name.trim().is_empty()))
        {
            return refuse(
                "integrations",
                "a non-empty integration id, and at least one when given (none given claims them all)",
            );
        }
        if settings.shutdown_grace > hour {
            return refuse("shutdown_grace", "at most 1 hour");
        }
        if !(second..=Duration::from_secs(60)).contains(&settings.gauge_interval) {
            return refuse("gauge_interval", "between 1 s and 1 minute");
        }
        Ok(settings)
    }
}

/// The host name and the process id.
fn default_worker_id() -> String {
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "worker".to_owned());
    format!("{host}-{}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_limit_is_held_when_the_settings_are_built() {
        let refused = |builder: WorkerSettingsBuilder| builder.build().expect_err("refused");
        let base = WorkerSettings::builder;
        assert_eq!(refused(base().batch_size(0)).setting, "batch_size");
        assert_eq!(refused(base().batch_size(65)).setting, "batch_size");
        assert_eq!(refused(base().concurrency(0)).setting, "concurrency");
        assert_eq!(refused(base().lease(Duration::ZERO)).setting, "lease");
        assert_eq!(
            refused(base().backoff_base(Duration::ZERO)).setting,
            "backoff_base"
        );
        assert_eq!(
            refused(base().backoff_cap(Duration::from_millis(10))).setting,
            "backoff_cap"
        );
        assert_eq!(refused(base().max_attempts(0)).setting, "max_attempts");
        assert_eq!(refused(base().worker_id(" ")).setting, "worker_id");
        assert_eq!(
            refused(base().batch_size(500)).as_flag(),
            "--batch-size must be between 1 and 64"
        );
        // What would panic later (a semaphore of usize::MAX permits, a duration overflow)
        // or claim nothing for ever (an empty list) is refused here.
        assert_eq!(
            refused(base().concurrency(usize::MAX)).setting,
            "concurrency"
        );
        assert_eq!(
            refused(base().effect_concurrency(usize::MAX)).setting,
            "effect_concurrency"
        );
        assert_eq!(
            refused(base().statement_timeout(Duration::MAX)).setting,
            "statement_timeout"
        );
        assert_eq!(refused(base().worker_id("\tkit\n")).setting, "worker_id");
        assert_eq!(
            refused(base().integrations(Some(Vec::new()))).setting,
            "integrations"
        );
        assert_eq!(
            refused(base().integrations(Some(vec![" ".to_owned()]))).setting,
            "integrations"
        );
        let built = base().batch_size(64).build().expect("the largest batch");
        assert_eq!(built.batch_size(), 64);
        assert_eq!(
            built
                .to_builder()
                .concurrency(2)
                .build()
                .map(|s| s.concurrency()),
            Ok(2)
        );
    }
}
