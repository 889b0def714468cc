//! A real HTTP sink for dispatcher tests: answers `POST` requests from a script (status
//! codes, `Retry-After`, hanging, cutting the connection), records every request, and
//! answers `GET /operations/{key}` from a table the test fills in.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

/// How the sink answers one POST.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// This status, with an empty JSON body.
    Status(u16),
    /// This status with `Retry-After: secs`.
    RetryAfter(u16, u64),
    /// Read the request, never answer.
    Hang,
    /// Read the request, then drop the connection without answering.
    Cut,
}

/// One request the sink received.
#[derive(Debug, Clone)]
pub struct Received {
    /// Header name (lowercase) → value.
    pub headers: HashMap<String, String>,
    /// The body.
    pub body: Bytes,
}

impl Received {
    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("effect bodies are JSON")
    }
}

#[derive(Default)]
struct State {
    script: VecDeque<Answer>,
    received: Vec<Received>,
    operations: HashMap<String, (u16, String)>,
}

/// A running sink.
#[derive(Clone)]
pub struct TestSink {
    /// Where it listens.
    pub addr: SocketAddr,
    state: Arc<Mutex<State>>,
}

impl TestSink {
    /// Starts a sink that answers 200 unless scripted otherwise.
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind sink");
        let addr = listener.local_addr().expect("sink addr");
        let state = Arc::new(Mutex::new(State::default()));
        let shared = Arc::clone(&state);
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let state = Arc::clone(&shared);
                tokio::spawn(async move {
                    let service = service_fn(move |request| answer(Arc::clone(&state), request));
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self { addr, state }
    }

    /// `http://addr/effects`.
    pub fn url(&self) -> String {
        format!("http://{}/effects", self.addr)
    }

    /// `http://addr/operations/{key}`.
    pub fn status_url(&self) -> String {
        format!("http://{}/operations/{{key}}", self.addr)
    }

    /// Queues answers for the next POSTs (afterwards: 200).
    pub fn script(&self, answers: impl IntoIterator<Item = Answer>) {
        self.state.lock().expect("sink lock").script.extend(answers);
    }

    /// What `GET /operations/{key}` answers for `key` (404 otherwise).
    pub fn set_operation(&self, key: &str, status: u16, body: &str) {
        self.state
            .lock()
            .expect("sink lock")
            .operations
            .insert(key.to_owned(), (status, body.to_owned()));
    }

    /// Every POST received so far.
    pub fn received(&self) -> Vec<Received> {
        self.state.lock().expect("sink lock").received.clone()
    }
}

/// `Err` makes hyper drop the connection without an answer (the "cut" case).
async fn answer(
    state: Arc<Mutex<State>>,
    request: Request<hyper::body::Incoming>,
) -> Result<Response<Full<Bytes>>, std::io::Error> {
    let (parts, body) = request.into_parts();
    let body = body
        .collect()
        .await
        .map(|collected| collected.to_bytes())
        .unwrap_or_default();
    if parts.method == hyper::Method::GET {
        let key = parts
            .uri
            .path()
            .strip_prefix("/operations/")
            .unwrap_or_default();
        let key = inbound_core::effects::percent_decode(key);
        let (status, body) = state
            .lock()
            .expect("sink lock")
            .operations
            .get(&key)
            .cloned()
            .unwrap_or((404, "{}".to_owned()));
        return Ok(respond(status, None, body));
    }
    let headers = parts
        .headers
        .iter()
        .map(|(name, value)| {
            (
                name.as_str().to_owned(),
                value.to_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let next = {
        let mut state = state.lock().expect("sink lock");
        state.received.push(Received { headers, body });
        state.script.pop_front().unwrap_or(Answer::Status(200))
    };
    match next {
        Answer::Status(status) => Ok(respond(status, None, "{}".to_owned())),
        Answer::RetryAfter(status, secs) => Ok(respond(status, Some(secs), "{}".to_owned())),
        Answer::Hang => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok(respond(200, None, "{}".to_owned()))
        }
        Answer::Cut => Err(std::io::Error::other("cut")),
    }
}

fn respond(status: u16, retry_after: Option<u64>, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = hyper::StatusCode::from_u16(status).expect("valid status");
    if let Some(secs) = retry_after {
        response.headers_mut().insert("retry-after", secs.into());
    }
    response
}
