//! A minimal HTTP/1.1 client for driving the real binaries.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

/// An answer, fully read.
#[derive(Debug, Clone)]
pub struct Answer {
    /// Status code.
    pub status: u16,
    /// Response headers.
    pub headers: hyper::HeaderMap,
    /// The body parsed as JSON (`Null` when it is not JSON).
    pub json: serde_json::Value,
    /// The raw body.
    pub body: Bytes,
}

/// A pooled keep-alive client.
#[derive(Clone)]
pub struct HttpClient {
    inner: Client<HttpConnector, Full<Bytes>>,
}

impl Default for HttpClient {
    fn default() -> Self {
        Self::new()
    }
}

impl HttpClient {
    /// A client with keep-alive.
    pub fn new() -> Self {
        Self {
            inner: Client::builder(TokioExecutor::new()).build_http(),
        }
    }

    /// Sends a request; `Err` when no answer came (connection refused, reset, closed).
    pub async fn send(
        &self,
        method: &str,
        url: &str,
        headers: &[(String, String)],
        body: impl Into<Bytes>,
    ) -> Result<Answer, String> {
        let mut request = hyper::Request::builder().method(method).uri(url);
        for (name, value) in headers {
            request = request.header(name.as_str(), value.as_str());
        }
        let request = request
            .body(Full::new(body.into()))
            .map_err(|error| error.to_string())?;
        let response = self
            .inner
            .request(request)
            .await
            .map_err(|error| format!("{error:?}"))?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|error| error.to_string())?
            .to_bytes();
        let json = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
        Ok(Answer {
            status,
            headers,
            json,
            body,
        })
    }

    /// `POST` with headers.
    pub async fn post(
        &self,
        url: &str,
        headers: &[(String, String)],
        body: impl Into<Bytes>,
    ) -> Result<Answer, String> {
        self.send("POST", url, headers, body).await
    }

    /// `GET`.
    pub async fn get(&self, url: &str) -> Result<Answer, String> {
        self.send("GET", url, &[], Bytes::new()).await
    }

    /// `GET url` until it answers `expected` (for endpoints that follow a background
    /// probe, such as `/readyz`), or whatever it answers after 5 s.
    pub async fn get_status_once(&self, url: &str, expected: u16) -> u16 {
        let started = std::time::Instant::now();
        loop {
            let status = self.get(url).await.map_or(0, |answer| answer.status);
            if status == expected || started.elapsed() > std::time::Duration::from_secs(5) {
                return status;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }
}
