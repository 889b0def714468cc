//! The hyper 1.x accept loop: at most `max_connections` connections at once (further ones
//! wait in the listen backlog), a header-read timeout that also closes idle keep-alive
//! connections, and a graceful drain when `shutdown` resolves: stop accepting, let every
//! in-flight request finish (its commit and its answer), then return — or give up after
//! the grace period.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::http::Body;

/// The largest request head, and what a connection's read buffer grows to: provider
/// heads are a few KiB, and 1,024 connections × 16 KiB bounds what open connections hold.
pub const MAX_REQUEST_HEAD_BYTES: usize = 16 * 1024;

/// Connection-level limits.
#[derive(Debug, Clone)]
pub struct ServerLimits {
    /// A client must send a complete request head within this; idle keep-alive
    /// connections are closed after it too.
    pub header_read_timeout: Duration,
    /// Connections served at once.
    pub max_connections: usize,
    /// How long the drain may take after shutdown begins.
    pub shutdown_grace: Duration,
    /// The most a connection's read buffer grows to (hyper's `max_buf_size`, at least
    /// 8 KiB): bounds the request head, and the memory of every open connection.
    pub max_buf_size: usize,
    /// Put each request's [`PeerAddr`] in its extensions (the console's proxy check);
    /// off where nothing reads it (the ingress's hot path allocates nothing for it).
    pub record_peer: bool,
}

/// The address a request's connection came from, in the request's extensions (the
/// console believes a proxy's user header only from the proxy's address).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerAddr(pub std::net::SocketAddr);

/// How the drain ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drain {
    /// Every connection finished.
    Complete,
    /// The grace period ran out with connections still open.
    TimedOut,
}

/// Serves `handler` on `listener` until `shutdown` resolves, then drains.
pub async fn serve<H, F>(
    listener: TcpListener,
    limits: ServerLimits,
    handler: H,
    shutdown: impl Future<Output = ()>,
) -> Drain
where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Body>> + Send + 'static,
{
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .keep_alive(true)
        .max_buf_size(limits.max_buf_size.max(8 * 1024));
    let graceful = GracefulShutdown::new();
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let record_peer = limits.record_peer;
    let mut shutdown = std::pin::pin!(shutdown);

    loop {
        let permit = tokio::select! {
            biased;
            () = &mut shutdown => break,
            permit = Arc::clone(&permits).acquire_owned() => permit,
        };
        // The semaphore is never closed, so acquiring cannot fail.
        let Ok(permit) = permit else { break };
        let (stream, peer) = tokio::select! {
            biased;
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Usually EMFILE: back off instead of spinning.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        stream.set_nodelay(true).ok();
        let handler = handler.clone();
        let connection = builder.serve_connection(
            TokioIo::new(stream),
            service_fn(move |mut request: Request<Incoming>| {
                if record_peer {
                    request.extensions_mut().insert(PeerAddr(peer));
                }
                let response = handler(request);
                async move { Ok::<_, std::convert::Infallible>(response.await) }
            }),
        );
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            // Errors here are the client's (reset, header timeout, bad request line).
            if let Err(error) = connection.await {
                tracing::debug!(%error, "connection ended with an error");
            }
            drop(permit);
        });
    }
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => Drain::Complete,
        () = tokio::time::sleep(limits.shutdown_grace) => Drain::TimedOut,
    }
}
