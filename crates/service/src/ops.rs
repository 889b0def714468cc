//! The operations surface: `/metrics` in the Prometheus text format, `/healthz` (the
//! process is alive) and `/readyz` (the database answers within the readiness timeout).

use std::time::Duration;

use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use serde_json::json;
use sqlx::PgPool;

use crate::http::{Body, json_response};

/// Installs the global Prometheus recorder with histogram buckets per metric name.
pub fn install_recorder(buckets: &[(&str, &[f64])]) -> anyhow::Result<PrometheusHandle> {
    let mut builder = PrometheusBuilder::new();
    for (name, bounds) in buckets {
        builder = builder.set_buckets_for_metric(Matcher::Full((*name).to_owned()), bounds)?;
    }
    Ok(builder.install_recorder()?)
}

/// `200 ready` when the database answers within `timeout`, else `503 unavailable`.
pub async fn readiness(pool: &PgPool, timeout: Duration) -> Response<Body> {
    match tokio::time::timeout(timeout, inbound_core::store::ping(pool)).await {
        Ok(Ok(())) => json_response(StatusCode::OK, &json!({"status": "ready"})),
        _ => json_response(
            StatusCode::SERVICE_UNAVAILABLE,
            &json!({"status": "unavailable"}),
        ),
    }
}

/// `200 ok` while the process serves requests.
pub fn liveness() -> Response<Body> {
    json_response(StatusCode::OK, &json!({"status": "ok"}))
}

/// The rendered metrics.
pub fn metrics(handle: &PrometheusHandle) -> Response<Body> {
    handle.run_upkeep();
    let mut response = Response::new(Full::new(bytes::Bytes::from(handle.render())));
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    response
}

/// Answers one request on a metrics port: `/metrics`, `/healthz`, `/readyz`.
pub async fn serve_ops(
    request: Request<Incoming>,
    handle: PrometheusHandle,
    pool: PgPool,
    readiness_timeout: Duration,
) -> Response<Body> {
    match (request.method(), request.uri().path()) {
        (&Method::GET, "/metrics") => metrics(&handle),
        (&Method::GET | &Method::HEAD, "/healthz") => liveness(),
        (&Method::GET | &Method::HEAD, "/readyz") => readiness(&pool, readiness_timeout).await,
        _ => json_response(StatusCode::NOT_FOUND, &json!({"error": "not_found"})),
    }
}
