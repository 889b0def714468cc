//! The flags both binaries share, flattened into each binary's own clap parser.

use std::path::PathBuf;
use std::time::Duration;

use crate::logging::LogFormat;

/// Configuration, database, logging and drain flags.
#[derive(Debug, clap::Args)]
pub struct CommonArgs {
    /// Configuration file (TOML).
    #[arg(long, env = "INBOUND_CONFIG")]
    pub config: PathBuf,
    /// PostgreSQL URL.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: String,
    /// The schema of inbound's tables (every session's whole search_path).
    #[arg(long, env = "INBOUND_SCHEMA", default_value = inbound_store::DEFAULT_SCHEMA,
          value_parser = inbound_store::Schema::parse_own)]
    pub schema: inbound_store::Schema,
    /// How the URL reaches PostgreSQL: `none` (directly, or a pooler in session mode) or
    /// `transaction` (PgBouncer `pool_mode = transaction`, RDS Proxy, Supavisor): then no
    /// named prepared statements and no session settings; the role supplies the schema,
    /// `synchronous_commit` and `statement_timeout` (docs/operations.md).
    #[arg(long, env = "INBOUND_DB_POOLER", default_value = "none")]
    pub db_pooler: inbound_store::Pooler,
    /// Log format; JSON when stderr is not a terminal.
    #[arg(long, env = "INBOUND_LOG_FORMAT", value_enum)]
    pub log_format: Option<LogFormat>,
    /// Wait at most this long for a database connection.
    #[arg(long, env = "INBOUND_DB_ACQUIRE_TIMEOUT_MS", default_value_t = 2000)]
    pub db_acquire_timeout_ms: u64,
    /// Server-side statement timeout.
    #[arg(long, env = "INBOUND_DB_STATEMENT_TIMEOUT_MS", default_value_t = 5000)]
    pub db_statement_timeout_ms: u64,
    /// Drain budget after SIGTERM/SIGINT.
    #[arg(long, env = "INBOUND_SHUTDOWN_GRACE_SECS", default_value_t = 20)]
    pub shutdown_grace_secs: u64,
    /// How often the queue gauges are read from the database (at most 60: the alerts and
    /// KEDA count a process's gauges stale after 120 s without a refresh).
    #[arg(long, env = "INBOUND_GAUGE_INTERVAL_SECS", default_value_t = 5,
          value_parser = clap::value_parser!(u64).range(1..=60))]
    pub gauge_interval_secs: u64,
}

impl CommonArgs {
    /// `--schema` and `--db-pooler`.
    pub fn session_target(&self) -> inbound_store::SessionTarget {
        inbound_store::SessionTarget {
            schema: self.schema.clone(),
            pooler: self.db_pooler,
        }
    }

    /// `--db-acquire-timeout-ms`.
    pub fn acquire_timeout(&self) -> Duration {
        Duration::from_millis(self.db_acquire_timeout_ms)
    }

    /// `--db-statement-timeout-ms`.
    pub fn statement_timeout(&self) -> Duration {
        Duration::from_millis(self.db_statement_timeout_ms)
    }

    /// `--gauge-interval-secs`.
    pub fn gauge_interval(&self) -> Duration {
        Duration::from_secs(self.gauge_interval_secs)
    }

    /// `--shutdown-grace-secs`.
    pub fn shutdown_grace(&self) -> Duration {
        Duration::from_secs(self.shutdown_grace_secs)
    }
}
