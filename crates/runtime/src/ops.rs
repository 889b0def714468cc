//! The operations surface: `/metrics` in the Prometheus text format, `/healthz` (the
//! process is alive) and `/readyz` (the database answered a recent probe).
//!
//! Readiness is probed by one background task ([`Readiness`]), never by a request: a
//! flood of `/readyz` requests (the ingress also answers it on its public port) costs no
//! database round trip and no pooled connection.

use std::time::{Duration, Instant};

use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use serde_json::json;
use sqlx::PgPool;
use tokio::sync::watch;

use crate::http::{Body, json_response};
use crate::sessions::SessionGate;

/// The recorder this process installed, if any (a lock, not a once-cell: two services
/// starting together must not both try to install one).
static RECORDER: std::sync::Mutex<Option<PrometheusHandle>> = std::sync::Mutex::new(None);

/// Installs the global Prometheus recorder with histogram buckets per metric name, and
/// sets `inbound_build_info` for `role` (`ingress`, `worker`). A
/// process that runs the ingress and a worker together (tests, an embedding) installs it
/// once: later calls get the first recorder, with the first caller's buckets.
pub fn install_recorder(
    role: &'static str,
    buckets: &[(&str, &[f64])],
) -> anyhow::Result<PrometheusHandle> {
    let mut installed = RECORDER
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(handle) = installed.as_ref() {
        return Ok(handle.clone());
    }
    let mut builder = PrometheusBuilder::new();
    let own: &[(&str, &[f64])] = &[(
        crate::process_metrics::DB_POOL_ACQUIRE_SECONDS,
        crate::process_metrics::ACQUIRE_BUCKETS_SECONDS,
    )];
    for (name, bounds) in buckets.iter().chain(own) {
        builder = builder.set_buckets_for_metric(Matcher::Full((*name).to_owned()), bounds)?;
    }
    let handle = builder.install_recorder()?;
    crate::process_metrics::describe(role);
    *installed = Some(handle.clone());
    Ok(handle)
}

/// An ops port a library entry serves: a bound listener and the recorder's handle that
/// renders `/metrics` (the process installs the recorder; a second process-wide install
/// would silently be the first).
#[derive(Debug)]
pub struct OpsPort {
    /// Where `/metrics`, `/healthz` and `/readyz` are served.
    pub listener: tokio::net::TcpListener,
    /// The installed recorder's handle.
    pub metrics: PrometheusHandle,
}

impl OpsPort {
    /// Serves `/metrics`, `/healthz` and `/readyz` for the life of the process, with the
    /// ops port's own small connection budget, so probes and scrapes get through whatever
    /// the public port is going through. Returns the address it serves and its task.
    pub fn spawn(
        self,
        ready: Readiness,
    ) -> std::io::Result<(std::net::SocketAddr, tokio::task::JoinHandle<crate::Drain>)> {
        let address = self.listener.local_addr()?;
        let handle = self.metrics;
        let task = tokio::spawn(crate::serve(
            self.listener,
            ops_limits(),
            move |request| serve_ops(request, handle.clone(), ready.clone()),
            std::future::pending(),
        ));
        Ok((address, task))
    }
}

/// How often the readiness task pings the database.
pub const READINESS_INTERVAL: Duration = Duration::from_secs(1);

/// A success older than this no longer counts (the probe task is stuck or gone).
const READINESS_FRESHNESS: Duration = Duration::from_secs(3);

/// Whether the process can work: its database sessions were checked (the
/// [`SessionGate`] is open) and the database answered the readiness task's last ping,
/// recently. The same task samples the pool's gauges.
#[derive(Debug, Clone)]
pub struct Readiness {
    last_success: watch::Receiver<Option<Instant>>,
    sessions: SessionGate,
}

impl Readiness {
    /// Starts the task that pings the database through `pool` every
    /// [`READINESS_INTERVAL`], each ping (its wait for a connection too) bounded by
    /// `timeout`. It stops when every clone of the returned handle is gone. Until
    /// `sessions` opens, the process is not ready whatever the pings say: a session check
    /// that hangs or has not passed leaves it unable to commit or claim.
    pub fn start(pool: PgPool, timeout: Duration, sessions: SessionGate) -> Self {
        let (last_success, receiver) = watch::channel(None);
        tokio::spawn(async move {
            while !last_success.is_closed() {
                // The wait for a connection and the ping are bounded apart: a ping cut
                // short by an outer timer would send its connection back to the pool
                // unanswered, where sqlx pings it again without a limit.
                let answered =
                    match tokio::time::timeout(timeout, crate::process_metrics::acquire(&pool))
                        .await
                    {
                        Ok(Ok(mut connection)) => inbound_store::bounded::within(
                            &mut connection,
                            timeout,
                            async |connection| inbound_store::ping(connection).await,
                        )
                        .await
                        .is_ok(),
                        _ => false,
                    };
                last_success.send_replace(answered.then(Instant::now));
                crate::process_metrics::sample_pool(&pool);
                tokio::time::sleep(READINESS_INTERVAL).await;
            }
        });
        Self {
            last_success: receiver,
            sessions,
        }
    }

    /// Whether the sessions were checked and the last ping succeeded, recently.
    pub fn is_ready(&self) -> bool {
        self.sessions.is_open()
            && self
                .last_success
                .borrow()
                .is_some_and(|at| at.elapsed() < READINESS_FRESHNESS)
    }
}

/// `200 ready` when the database answered the readiness task recently, else
/// `503 unavailable`.
pub fn readiness(readiness: &Readiness) -> Response<Body> {
    if readiness.is_ready() {
        json_response(StatusCode::OK, &json!({"status": "ready"}))
    } else {
        json_response(
            StatusCode::SERVICE_UNAVAILABLE,
            &json!({"status": "unavailable"}),
        )
    }
}

/// The connection limits of an ops port: a small budget of its own, so that probes and
/// scrapes are served whatever the public port is going through.
pub fn ops_limits() -> crate::ServerLimits {
    crate::ServerLimits {
        header_read_timeout: Duration::from_secs(5),
        max_connections: 32,
        shutdown_grace: Duration::from_secs(1),
        max_buf_size: crate::server::MAX_REQUEST_HEAD_BYTES,
        record_peer: false,
    }
}

/// `200 ok` while the process serves requests.
pub fn liveness() -> Response<Body> {
    json_response(StatusCode::OK, &json!({"status": "ok"}))
}

/// The rendered metrics.
pub fn metrics(handle: &PrometheusHandle) -> Response<Body> {
    crate::process_metrics::collect_process();
    handle.run_upkeep();
    let page = crate::process_metrics::with_precise_cpu_seconds(handle.render());
    let mut response = Response::new(Full::new(bytes::Bytes::from(page)));
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
    ready: Readiness,
) -> Response<Body> {
    match (request.method(), request.uri().path()) {
        (&Method::GET, "/metrics") => metrics(&handle),
        (&Method::GET | &Method::HEAD, "/healthz") => liveness(),
        (&Method::GET | &Method::HEAD, "/readyz") => readiness(&ready),
        _ => json_response(StatusCode::NOT_FOUND, &json!({"error": "not_found"})),
    }
}
