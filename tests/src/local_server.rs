//! A local HTTP/1.1 server answering each request with a function, for the suites' fake
//! provider APIs ([`crate::stripe_api`], [`crate::github_api`]).

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

/// Serves on a loopback port chosen by the OS until the test's runtime ends; `answer`
/// sees the server's own address (for links to itself) and each request.
pub async fn serve(
    answer: impl Fn(SocketAddr, &Request<Incoming>) -> Response<Full<Bytes>> + Send + Sync + 'static,
) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let answer = Arc::new(answer);
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let answer = Arc::clone(&answer);
            tokio::spawn(async move {
                let service = service_fn(move |request| {
                    let response = answer(addr, &request);
                    async move { Ok::<_, hyper::Error>(response) }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    addr
}

/// A JSON answer.
pub fn json_response(status: u16, body: &serde_json::Value) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .expect("response")
}
