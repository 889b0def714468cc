//! `inboundctl dev-sink`: a receiver for local runs and for people wiring their own. It
//! prints every effect it receives, verifies Standard Webhooks signatures when given the
//! secret, remembers operation keys (a repeated key is printed as such and not applied
//! twice), answers `GET /operations/{key}` for reconciliation, and can fail the first N
//! requests or hang, to watch the dispatcher's rules at work.

use crate::output::out;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use inbound_core::clock::{Clock, SystemClock};
use inbound_core::headers::Headers;
use inbound_core::provider;
use inbound_core::secret::Secret;
use inbound_core::verify::{Provider, VerifyContext};
use inbound_runtime::http::{Body, json_response};
use inbound_runtime::{ServerLimits, serve};
use serde_json::json;

/// How the dev sink behaves.
pub struct DevSink {
    /// Verify signatures with these keys (decoded `whsec_` secrets); none: do not verify.
    pub secrets: Vec<Secret>,
    /// Answer 503 to this many requests first.
    pub fail_first: AtomicU64,
    /// Never answer.
    pub hang: bool,
    /// Operation key → how many times it was received.
    seen: Mutex<HashMap<String, u64>>,
}

impl DevSink {
    /// A sink with these settings.
    pub fn new(secrets: Vec<Secret>, fail_first: u64, hang: bool) -> Self {
        Self {
            secrets,
            fail_first: AtomicU64::new(fail_first),
            hang,
            seen: Mutex::new(HashMap::new()),
        }
    }
}

/// Serves until Ctrl-C.
pub async fn run(listen: SocketAddr, sink: DevSink) -> anyhow::Result<()> {
    // Before "listening": a script that sees the line may stop the sink at once.
    let shutdown = inbound_runtime::signals::shutdown_signal();
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    out!(
        "dev-sink listening on http://{} (POST effects anywhere; GET /operations/{{key}})",
        listener.local_addr()?
    );
    let sink = Arc::new(sink);
    let limits = ServerLimits {
        header_read_timeout: Duration::from_secs(5),
        max_connections: 256,
        shutdown_grace: Duration::from_secs(1),
        max_buf_size: 64 * 1024,
        record_peer: false,
    };
    serve(
        listener,
        limits,
        move |request| answer(Arc::clone(&sink), request),
        shutdown,
    )
    .await;
    Ok(())
}

async fn answer(sink: Arc<DevSink>, request: Request<Incoming>) -> Response<Body> {
    if request.method() == Method::GET
        && let Some(key) = request.uri().path().strip_prefix("/operations/")
    {
        return status_of(&sink, key);
    }
    if request.method() != Method::POST {
        return json_response(
            StatusCode::METHOD_NOT_ALLOWED,
            &json!({"error": "method_not_allowed"}),
        );
    }
    let (parts, body) = request.into_parts();
    let Ok(body) = Limited::new(body, 1024 * 1024)
        .collect()
        .await
        .map(|collected| collected.to_bytes())
    else {
        return json_response(
            StatusCode::PAYLOAD_TOO_LARGE,
            &json!({"error": "payload_too_large"}),
        );
    };
    if sink.hang {
        out!("received a request; hanging (--hang)");
        std::future::pending::<()>().await;
    }
    if sink.fail_first.load(Ordering::SeqCst) > 0 {
        let left = sink.fail_first.fetch_sub(1, Ordering::SeqCst) - 1;
        out!("received a request; answering 503 (--fail-first, {left} left)");
        return json_response(
            StatusCode::SERVICE_UNAVAILABLE,
            &json!({"error": "failing on purpose"}),
        );
    }
    let Some(signature) = check_signature(&sink, &parts.headers, &body) else {
        return json_response(StatusCode::UNAUTHORIZED, &json!({"error": "unauthorized"}));
    };
    apply(&sink, &parts.headers, &body, signature)
}

/// `GET /operations/{key}`: whether the sink has applied the operation.
fn status_of(sink: &DevSink, key: &str) -> Response<Body> {
    let key = inbound_core::effects::percent_decode(key);
    let seen = sink
        .seen
        .lock()
        .map(|seen| seen.contains_key(&key))
        .unwrap_or(false);
    if seen {
        json_response(StatusCode::OK, &json!({"status": "completed"}))
    } else {
        json_response(
            StatusCode::NOT_FOUND,
            &json!({"error": "unknown operation"}),
        )
    }
}

/// How the request's signature was judged (`None`: refused, and said so).
fn check_signature(
    sink: &DevSink,
    headers: &hyper::HeaderMap,
    body: &[u8],
) -> Option<&'static str> {
    if sink.secrets.is_empty() {
        return Some("not checked");
    }
    let headers: Headers = headers
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_bytes()))
        .collect();
    let context = VerifyContext {
        secrets: &sink.secrets,
        public_keys: &[],
        tolerance_secs: 300,
        now_unix_secs: SystemClock.now_unix_secs(),
    };
    match provider::verify(Provider::Standard, &headers, body, context) {
        Ok(()) => Some("valid"),
        Err(error) => {
            out!("rejected a request: signature {error}");
            None
        }
    }
}

/// Applies the effect once per operation key and prints it (a repeat says so).
fn apply(
    sink: &DevSink,
    headers: &hyper::HeaderMap,
    body: &[u8],
    signature: &str,
) -> Response<Body> {
    let effect: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    let key = effect["operation_key"]
        .as_str()
        .unwrap_or("(no operation_key)")
        .to_owned();
    let times = {
        let Ok(mut seen) = sink.seen.lock() else {
            return json_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                &json!({"error": "internal"}),
            );
        };
        let times = seen.entry(key.clone()).or_insert(0);
        *times += 1;
        *times
    };
    let idempotency = headers
        .get("idempotency-key")
        .and_then(|value| value.to_str().ok())
        .unwrap_or("-");
    let repeat = if times == 1 {
        "applied".to_owned()
    } else {
        format!("repeat #{times}, already applied")
    };
    out!(
        "effect {key} kind={} tenant={} data={} idempotency-key={idempotency} signature={signature}: {repeat}",
        effect["kind"].as_str().unwrap_or("-"),
        effect["tenant"].as_str().unwrap_or("-"),
        effect["data"]
    );
    json_response(StatusCode::OK, &json!({"status": "completed"}))
}
