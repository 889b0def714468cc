//! A real HTTP sink for dispatcher tests: answers `POST` requests from a script (status
//! codes, `Retry-After` in seconds or as an HTTP date, redirects, hanging, cutting the
//! connection), records every request, and answers `GET /operations/{key}` from a table
//! the test fills in (or with an endless body). It can also act like a server that
//! closes idle keep-alive connections, and it can be made to answer per path, so that
//! two sinks share one listener.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

/// How the sink answers one POST.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// This status, with an empty JSON body.
    Status(u16),
    /// This status with `Retry-After: secs`.
    RetryAfter(u16, u64),
    /// This status with `Retry-After` exactly as given (an HTTP date, or anything).
    RetryAfterText(u16, String),
    /// This status (3xx) with `Location`.
    Redirect(u16, String),
    /// Read the request, never answer.
    Hang,
    /// Read the request, then drop the connection without answering.
    Cut,
}

/// One request the sink received.
#[derive(Debug, Clone)]
pub struct Received {
    /// The method.
    pub method: String,
    /// The path.
    pub path: String,
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

/// What `GET /operations/{key}` answers.
#[derive(Debug, Clone)]
enum Operation {
    Known(u16, String),
    Endless,
}

#[derive(Default)]
struct State {
    script: VecDeque<Answer>,
    /// Answers cycled through once the script is spent (empty: 200).
    pattern: Vec<Answer>,
    pattern_next: usize,
    /// Scripts for POSTs to one path, e.g. a second sink (other paths share `script`).
    path_scripts: HashMap<String, VecDeque<Answer>>,
    received: Vec<Received>,
    status_requests: Vec<String>,
    operations: HashMap<String, Operation>,
    /// Act like a server that closed a keep-alive connection idle this long: a request
    /// arriving on it afterwards is dropped unanswered and unprocessed.
    closes_idle_after: Option<Duration>,
}

/// A running sink.
#[derive(Clone)]
pub struct TestSink {
    /// Where it listens.
    pub addr: SocketAddr,
    state: Arc<Mutex<State>>,
    endless_bytes: Arc<AtomicU64>,
}

type SinkBody = BoxBody<Bytes, std::io::Error>;

impl TestSink {
    /// Starts a sink that answers 200 unless scripted otherwise.
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind sink");
        let addr = listener.local_addr().expect("sink addr");
        let sink = Self {
            addr,
            state: Arc::new(Mutex::new(State::default())),
            endless_bytes: Arc::new(AtomicU64::new(0)),
        };
        let shared = sink.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let sink = shared.clone();
                tokio::spawn(async move {
                    let last_answered = Arc::new(Mutex::new(None::<Instant>));
                    let service = service_fn(move |request| {
                        let (sink, last_answered) = (sink.clone(), Arc::clone(&last_answered));
                        async move { sink.answer(request, last_answered).await }
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        sink
    }

    /// `http://addr/effects`.
    pub fn url(&self) -> String {
        format!("http://{}/effects", self.addr)
    }

    /// `http://addr{path}`.
    pub fn url_at(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// `http://addr/operations/{key}`.
    pub fn status_url(&self) -> String {
        format!("http://{}/operations/{{key}}", self.addr)
    }

    /// Queues answers for the next POSTs to any path without a script of its own
    /// (afterwards: the cycle, if any, else 200).
    pub fn script(&self, answers: impl IntoIterator<Item = Answer>) {
        self.state.lock().expect("sink lock").script.extend(answers);
    }

    /// Once the script is spent, answer POSTs to paths without a script of their own
    /// with `pattern`, cycling.
    pub fn cycle(&self, pattern: Vec<Answer>) {
        let mut state = self.state.lock().expect("sink lock");
        state.pattern = pattern;
        state.pattern_next = 0;
    }

    /// Queues answers for the next POSTs to `path` only (afterwards: 200).
    pub fn script_path(&self, path: &str, answers: impl IntoIterator<Item = Answer>) {
        self.state
            .lock()
            .expect("sink lock")
            .path_scripts
            .entry(path.to_owned())
            .or_default()
            .extend(answers);
    }

    /// What `GET /operations/{key}` answers for `key` (404 otherwise).
    pub fn set_operation(&self, key: &str, status: u16, body: &str) {
        self.state
            .lock()
            .expect("sink lock")
            .operations
            .insert(key.to_owned(), Operation::Known(status, body.to_owned()));
    }

    /// `GET /operations/{key}` answers 200 with a body that never ends.
    pub fn set_endless_operation(&self, key: &str) {
        self.state
            .lock()
            .expect("sink lock")
            .operations
            .insert(key.to_owned(), Operation::Endless);
    }

    /// Bytes of endless bodies the client has taken so far.
    pub fn endless_bytes_taken(&self) -> u64 {
        self.endless_bytes.load(Ordering::Relaxed)
    }

    /// Behave like a server that closes keep-alive connections idle for `idle`.
    pub fn close_idle_connections_after(&self, idle: Duration) {
        self.state.lock().expect("sink lock").closes_idle_after = Some(idle);
    }

    /// Every POST received so far.
    pub fn received(&self) -> Vec<Received> {
        self.state.lock().expect("sink lock").received.clone()
    }

    /// POSTs received so far whose path is `path`.
    pub fn received_at(&self, path: &str) -> usize {
        self.received()
            .iter()
            .filter(|request| request.path == path)
            .count()
    }

    /// The keys of every `GET /operations/{key}` so far.
    pub fn status_requests(&self) -> Vec<String> {
        self.state
            .lock()
            .expect("sink lock")
            .status_requests
            .clone()
    }

    /// `Err` makes hyper drop the connection without an answer (the "cut" case).
    async fn answer(
        &self,
        request: Request<hyper::body::Incoming>,
        last_answered: Arc<Mutex<Option<Instant>>>,
    ) -> Result<Response<SinkBody>, std::io::Error> {
        let (parts, body) = request.into_parts();
        let body = body
            .collect()
            .await
            .map(|collected| collected.to_bytes())
            .unwrap_or_default();
        let idle_limit = self.state.lock().expect("sink lock").closes_idle_after;
        let idle_since = *last_answered.lock().expect("connection lock");
        if let (Some(limit), Some(since)) = (idle_limit, idle_since)
            && since.elapsed() >= limit
        {
            // This server closed the connection; the request was never read.
            return Err(std::io::Error::other("closed while idle"));
        }
        let response = self.respond_to(&parts, body).await;
        *last_answered.lock().expect("connection lock") = Some(Instant::now());
        response
    }

    async fn respond_to(
        &self,
        parts: &hyper::http::request::Parts,
        body: Bytes,
    ) -> Result<Response<SinkBody>, std::io::Error> {
        let path = parts.uri.path().to_owned();
        if parts.method == hyper::Method::GET {
            let Some(key) = path.strip_prefix("/operations/") else {
                return Ok(respond(200, None, "{}".to_owned()));
            };
            let key = inbound_core::effects::percent_decode(key);
            let operation = {
                let mut state = self.state.lock().expect("sink lock");
                state.status_requests.push(key.clone());
                state.operations.get(&key).cloned()
            };
            return Ok(match operation {
                Some(Operation::Known(status, body)) => respond(status, None, body),
                Some(Operation::Endless) => endless(Arc::clone(&self.endless_bytes)),
                None => respond(404, None, "{}".to_owned()),
            });
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
            let mut state = self.state.lock().expect("sink lock");
            state.received.push(Received {
                method: parts.method.to_string(),
                path: path.clone(),
                headers,
                body,
            });
            let own_script = state.path_scripts.contains_key(&path);
            let script = match state.path_scripts.get_mut(&path) {
                Some(script) => script,
                None => &mut state.script,
            };
            let scripted = script.pop_front();
            scripted.unwrap_or_else(|| {
                if own_script || state.pattern.is_empty() {
                    return Answer::Status(200);
                }
                let next = state.pattern_next % state.pattern.len();
                state.pattern_next = next + 1;
                state.pattern[next].clone()
            })
        };
        match next {
            Answer::Status(status) => Ok(respond(status, None, "{}".to_owned())),
            Answer::RetryAfter(status, secs) => Ok(respond(
                status,
                Some(("retry-after", secs.to_string())),
                "{}".to_owned(),
            )),
            Answer::RetryAfterText(status, text) => Ok(respond(
                status,
                Some(("retry-after", text)),
                "{}".to_owned(),
            )),
            Answer::Redirect(status, location) => Ok(respond(
                status,
                Some(("location", location)),
                "{}".to_owned(),
            )),
            Answer::Hang => {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok(respond(200, None, "{}".to_owned()))
            }
            Answer::Cut => Err(std::io::Error::other("cut")),
        }
    }
}

fn respond(status: u16, header: Option<(&str, String)>, body: String) -> Response<SinkBody> {
    let body = Full::new(Bytes::from(body)).map_err(|never| match never {});
    let mut response = Response::new(BodyExt::boxed(body));
    *response.status_mut() = hyper::StatusCode::from_u16(status).expect("valid status");
    if let Some((name, value)) = header {
        response.headers_mut().insert(
            hyper::header::HeaderName::from_bytes(name.as_bytes()).expect("header name"),
            value.parse().expect("header value"),
        );
    }
    response
}

/// `200` with a JSON-looking body that never ends, counting what the client takes.
fn endless(taken: Arc<AtomicU64>) -> Response<SinkBody> {
    let mut response = Response::new(BodyExt::boxed(Endless {
        taken,
        started: false,
    }));
    *response.status_mut() = hyper::StatusCode::OK;
    response
}

struct Endless {
    taken: Arc<AtomicU64>,
    started: bool,
}

impl Body for Endless {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _context: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        const CHUNK: usize = 16 * 1024;
        let chunk = if self.started {
            Bytes::from(vec![b' '; CHUNK])
        } else {
            self.started = true;
            let mut start = br#"{"status":"pending","padding":""#.to_vec();
            start.resize(CHUNK, b'x');
            Bytes::from(start)
        };
        self.taken.fetch_add(CHUNK as u64, Ordering::Relaxed);
        Poll::Ready(Some(Ok(Frame::data(chunk))))
    }
}
