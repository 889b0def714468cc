//! Metrics (names fixed by DESIGN.md) and logging set-up for the ingress.

use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Counter: webhook requests by integration and outcome.
pub const REQUESTS_TOTAL: &str = "inbound_ingress_requests_total";
/// Histogram: webhook request duration by integration, in seconds.
pub const REQUEST_DURATION_SECONDS: &str = "inbound_ingress_request_duration_seconds";

/// Buckets for request durations: a commit is milliseconds; the tail is the timeouts.
const DURATION_BUCKETS_SECONDS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Installs the global Prometheus recorder and describes every metric (HELP text).
pub fn install_metrics() -> anyhow::Result<PrometheusHandle> {
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Full(REQUEST_DURATION_SECONDS.to_owned()),
            DURATION_BUCKETS_SECONDS,
        )?
        .install_recorder()?;
    metrics::describe_counter!(
        REQUESTS_TOTAL,
        "Webhook requests answered, by integration (\"unknown\" for unknown ids) and outcome."
    );
    metrics::describe_histogram!(
        REQUEST_DURATION_SECONDS,
        metrics::Unit::Seconds,
        "Time from request start to answer, by integration."
    );
    Ok(handle)
}

/// Records one answered webhook request.
pub fn record_request(integration: &str, outcome: &'static str, elapsed: Duration) {
    metrics::counter!(REQUESTS_TOTAL, "integration" => integration.to_owned(), "outcome" => outcome).increment(1);
    metrics::histogram!(REQUEST_DURATION_SECONDS, "integration" => integration.to_owned())
        .record(elapsed.as_secs_f64());
}

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One JSON object per line (the default when stderr is not a terminal).
    Json,
    /// Human-readable lines.
    Text,
}

/// Sets up `tracing` to stderr, filtered by `RUST_LOG` (default `info`).
pub fn init_logging(format: Option<LogFormat>) {
    use std::io::IsTerminal;
    let on_terminal = std::io::stderr().is_terminal();
    let format = format.unwrap_or(if on_terminal {
        LogFormat::Text
    } else {
        LogFormat::Json
    });
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .init(),
        LogFormat::Text => builder.with_ansi(on_terminal).init(),
    }
}

/// The metrics port: `/metrics`, `/healthz` and `/readyz`.
pub async fn serve_metrics_port(
    app: std::sync::Arc<crate::App>,
    handle: PrometheusHandle,
    request: http::Request<hyper::body::Incoming>,
) -> http::Response<crate::reply::Body> {
    use crate::reply::Reply;
    match (request.method(), request.uri().path()) {
        (&http::Method::GET, "/metrics") => {
            handle.run_upkeep();
            let mut response = http::Response::new(http_body_util::Full::new(bytes::Bytes::from(
                handle.render(),
            )));
            response.headers_mut().insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
            );
            response
        }
        (&http::Method::GET, "/readyz") => app.readiness().await,
        (&http::Method::GET, "/healthz") => {
            crate::reply::json_response(http::StatusCode::OK, &serde_json::json!({"status": "ok"}))
        }
        _ => Reply::NotFound.into_response(),
    }
}
