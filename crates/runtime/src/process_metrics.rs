//! Metrics every inbound process exports besides its own: what build it is
//! (`inbound_build_info`), the standard `process_*` series (CPU, memory, file
//! descriptors, threads, start time; read at each scrape), and its database pool
//! (connections in use and idle, sampled each second, and how long an acquire waited),
//! and what its configuration says alerts need: each integration's and sink's owner, an
//! integration's provider timeout and silence threshold.

use std::time::{Duration, Instant};

use inbound_core::config::Config;
use sqlx::PgPool;
use sqlx::pool::PoolConnection;
use sqlx::postgres::Postgres;

/// Gauge (always 1): the running build, by version and role (`ingress`, `worker`,
/// `dispatcher`): the "absent" alerts read it.
pub const BUILD_INFO: &str = "inbound_build_info";
/// Gauge: pooled database connections by state (`in_use`, `idle`).
pub const DB_POOL_CONNECTIONS: &str = "inbound_db_pool_connections";
/// Gauge: the pool's most connections (`--db-max-connections`).
pub const DB_POOL_MAX_CONNECTIONS: &str = "inbound_db_pool_max_connections";
/// Histogram: time spent waiting for a pooled connection on the hot paths, in seconds.
pub const DB_POOL_ACQUIRE_SECONDS: &str = "inbound_db_pool_acquire_seconds";

/// Gauge (always 1): an integration's provider and owner ("" when none), for alerts to
/// join on `integration`.
pub const INTEGRATION_INFO: &str = "inbound_integration_info";
/// Gauge: how long the integration's provider waits for an answer, in seconds.
pub const INTEGRATION_PROVIDER_TIMEOUT_SECONDS: &str =
    "inbound_integration_provider_timeout_seconds";
/// Gauge: the integration's `alert_when_silent_secs` (absent when not set).
pub const INTEGRATION_SILENCE_ALERT_SECONDS: &str = "inbound_integration_silence_alert_seconds";
/// Gauge (always 1): a sink's owner ("" when none), for alerts to join on `sink`.
pub const SINK_INFO: &str = "inbound_sink_info";

/// Buckets for acquire waits: an idle connection is microseconds; the tail is the
/// acquire timeout.
pub const ACQUIRE_BUCKETS_SECONDS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

/// Describes these metrics and sets the build info; called once, with the recorder.
pub fn describe(role: &'static str) {
    metrics_process::Collector::default().describe();
    metrics::describe_gauge!(
        BUILD_INFO,
        "Always 1: the running build of inbound, by version and role."
    );
    metrics::describe_gauge!(
        DB_POOL_CONNECTIONS,
        "Pooled database connections by state (in_use, idle), sampled each second."
    );
    metrics::describe_gauge!(
        DB_POOL_MAX_CONNECTIONS,
        "The database pool's most connections."
    );
    metrics::describe_histogram!(
        DB_POOL_ACQUIRE_SECONDS,
        metrics::Unit::Seconds,
        "Time waited for a pooled database connection (commits, claims, deliveries)."
    );
    metrics::gauge!(BUILD_INFO, "version" => env!("CARGO_PKG_VERSION"), "role" => role).set(1.0);
}

/// Exports what the configuration says about integrations and sinks (owners, provider
/// timeouts, silence thresholds); both roles do, so alerts find them from either.
pub fn export_config(config: &Config) {
    metrics::describe_gauge!(
        INTEGRATION_INFO,
        "Always 1: an integration's provider and owner (\"\" when none)."
    );
    metrics::describe_gauge!(
        INTEGRATION_PROVIDER_TIMEOUT_SECONDS,
        metrics::Unit::Seconds,
        "How long the integration's provider waits for an answer (provider_timeout_secs)."
    );
    metrics::describe_gauge!(
        INTEGRATION_SILENCE_ALERT_SECONDS,
        metrics::Unit::Seconds,
        "Alert when the integration has had no verified delivery for this long (alert_when_silent_secs)."
    );
    metrics::describe_gauge!(SINK_INFO, "Always 1: a sink's owner (\"\" when none).");
    for integration in config.integrations() {
        let id = integration.id.clone();
        metrics::gauge!(
            INTEGRATION_INFO,
            "integration" => id.clone(),
            "provider" => integration.provider.name(),
            "owner" => integration.owner.clone().unwrap_or_default()
        )
        .set(1.0);
        metrics::gauge!(INTEGRATION_PROVIDER_TIMEOUT_SECONDS, "integration" => id.clone())
            .set(integration.provider_timeout_secs as f64);
        if let Some(secs) = integration.alert_when_silent_secs {
            metrics::gauge!(INTEGRATION_SILENCE_ALERT_SECONDS, "integration" => id)
                .set(secs as f64);
        }
    }
    for sink in config.sinks() {
        metrics::gauge!(SINK_INFO, "sink" => sink.id.clone(), "owner" => sink.owner.clone().unwrap_or_default())
            .set(1.0);
    }
}

/// Reads the `process_*` series now (at each scrape).
pub fn collect_process() {
    metrics_process::Collector::default().collect();
}

/// `page` with `process_cpu_seconds_total` to the hundredth of a second. The collector
/// keeps it in an integer counter, so a process that used 0.13 s of CPU read 0; this reads
/// the same counter (user + system time, `/proc/self/stat`) and writes it as Prometheus's
/// own process collector does. Elsewhere than Linux the page is left as it is.
pub fn with_precise_cpu_seconds(page: String) -> String {
    match cpu_seconds() {
        Some(seconds) => replace_cpu_seconds(page, seconds),
        None => page,
    }
}

/// User + system CPU time of this process, in seconds (Linux's `USER_HZ` is 100).
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command name, which is in parentheses and may hold spaces.
    let (_, after_name) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // utime and stime are the 14th and 15th fields; `after_name` starts at the 3rd.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) as f64 / 100.0)
}

fn replace_cpu_seconds(page: String, seconds: f64) -> String {
    const NAME: &str = "process_cpu_seconds_total ";
    if !page.lines().any(|line| line.starts_with(NAME)) {
        return page;
    }
    page.lines()
        .map(|line| {
            if line.starts_with(NAME) {
                format!("{NAME}{seconds}")
            } else {
                line.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// Records the pool's connections in use and idle.
pub fn sample_pool(pool: &PgPool) {
    let size = f64::from(pool.size());
    let idle = pool.num_idle() as f64;
    metrics::gauge!(DB_POOL_CONNECTIONS, "state" => "in_use").set((size - idle).max(0.0));
    metrics::gauge!(DB_POOL_CONNECTIONS, "state" => "idle").set(idle);
    metrics::gauge!(DB_POOL_MAX_CONNECTIONS).set(f64::from(pool.options().get_max_connections()));
}

/// `pool.acquire()`, recording how long it waited (also when it failed: a timeout is the
/// wait that matters most).
pub async fn acquire(pool: &PgPool) -> Result<PoolConnection<Postgres>, sqlx::Error> {
    let started = Instant::now();
    let connection = pool.acquire().await;
    record_acquire(started.elapsed());
    connection
}

fn record_acquire(waited: Duration) {
    metrics::histogram!(DB_POOL_ACQUIRE_SECONDS).record(waited.as_secs_f64());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_seconds_are_written_to_the_hundredth() {
        let page = "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 0\nprocess_open_fds 9\n";
        assert_eq!(
            replace_cpu_seconds(page.to_owned(), 0.13),
            "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 0.13\nprocess_open_fds 9\n"
        );
        assert_eq!(replace_cpu_seconds("a 1\n".to_owned(), 0.13), "a 1\n");
        if cfg!(target_os = "linux") {
            assert!(cpu_seconds().is_some_and(|seconds| seconds >= 0.0));
        }
    }
}
