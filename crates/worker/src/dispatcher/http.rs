//! The dispatcher's HTTP exchanges with sinks, and nothing else: the shared client (no
//! redirects, pooled connections), one signed POST of an effect classified by whether it
//! can have left, and one bounded `GET status_url`. Errors never carry the sink's URL
//! (it may hold a token).

use std::time::{Duration, Instant, SystemTime};

use inbound_core::config::Sink;
use inbound_core::effects::{self, Delivery, Reconciliation};
use inbound_store::effects::ClaimedEffect;

use super::{MAX_STATUS_BODY_BYTES, POOL_IDLE_TIMEOUT};
use crate::telemetry::EFFECT_DELIVERY_SECONDS;

/// The shared HTTP client: pooled connections (idle for at most `POOL_IDLE_TIMEOUT`),
/// rustls, and no redirects.
pub fn http_client() -> reqwest::Result<reqwest::Client> {
    // reqwest is built without a bundled crypto provider; ring is the one sqlx already uses.
    // Installing twice is harmless (the second call reports the first).
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .pool_idle_timeout(POOL_IDLE_TIMEOUT)
        .connect_timeout(Duration::from_secs(5))
        .redirect(reqwest::redirect::Policy::none())
        .build()
}

/// One POST. Errors are classified by whether the request can have left.
pub(super) async fn send(
    client: &reqwest::Client,
    sink: &Sink,
    effect: &ClaimedEffect,
    timeout: Duration,
) -> Delivery {
    let body = effects::request_body(
        &effect.operation_key,
        &effect.kind,
        &effect.tenant,
        &effect.sink,
        &effect.data,
        &effect.event,
    )
    .to_string();
    let mut request = client
        .post(sink.url.expose())
        .timeout(timeout)
        .header(reqwest::header::CONTENT_TYPE, "application/json");
    if let Some(header) = &sink.idempotency_header {
        request = request.header(header.as_str(), effect.operation_key.as_str());
    }
    if !sink.secrets.is_empty() {
        let now = chrono::Utc::now().timestamp();
        for (name, value) in
            effects::signature_headers(&sink.secrets, &effect.operation_key, now, body.as_bytes())
        {
            request = request.header(name, value);
        }
    }
    let sent = Instant::now();
    let answered = request.body(body).send().await;
    // Until the sink answered or the request failed (a timeout counts at its length).
    metrics::histogram!(EFFECT_DELIVERY_SECONDS, "sink" => effect.sink.clone())
        .record(sent.elapsed().as_secs_f64());
    match answered {
        Ok(response) => Delivery::from_status(response.status().as_u16(), retry_after(&response)),
        Err(error) => classify_error(&error.without_url()),
    }
}

/// The response's `Retry-After` (seconds or an HTTP date); the rules cap it.
fn retry_after(response: &reqwest::Response) -> Option<Duration> {
    let value = response.headers().get(reqwest::header::RETRY_AFTER)?;
    effects::parse_retry_after(value.to_str().ok()?, SystemTime::now())
}

/// Classifies a request error whose URL has been removed ([`reqwest::Error::without_url`]):
/// the detail is stored and logged, and a sink URL may carry a token.
fn classify_error(error: &reqwest::Error) -> Delivery {
    let detail = error_chain(error);
    if error.is_builder() {
        Delivery::NotBuilt(detail)
    } else if error.is_connect() {
        Delivery::NotSent(detail)
    } else if error.is_timeout() {
        Delivery::Unknown(format!("timed out: {detail}"))
    } else {
        Delivery::Unknown(detail)
    }
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// `GET status_url`, reading at most [`MAX_STATUS_BODY_BYTES`] of the answer, all within
/// the sink's timeout. `Err`: no answer at all.
pub(super) async fn ask(
    client: &reqwest::Client,
    url: &str,
    timeout: Duration,
) -> Result<Reconciliation, String> {
    let exchange = async {
        let mut response = client.get(url).send().await?;
        let status = response.status().as_u16();
        let retry_after = retry_after(&response);
        let mut body = Vec::new();
        while body.len() < MAX_STATUS_BODY_BYTES {
            let Some(chunk) = response.chunk().await? else {
                break;
            };
            let room = MAX_STATUS_BODY_BYTES - body.len();
            body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        }
        Ok::<_, reqwest::Error>(Reconciliation::from_answer(status, retry_after, &body))
    };
    match tokio::time::timeout(timeout, exchange).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(error)) => Err(error_chain(&error.without_url())),
        Err(_) => Err(format!(
            "status_url gave no complete answer within {} s",
            timeout.as_secs()
        )),
    }
}
