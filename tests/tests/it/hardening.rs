//! HTTP hardening of the real binary: concurrent identical deliveries, graceful drain on
//! SIGTERM, header-read and whole-request timeouts, the connection limit, and start-up
//! that fails fast on a bad configuration.

use std::time::Duration;

use inbound_tests::fixtures::{self, Provider, Variant};
use inbound_tests::http::HttpClient;
use inbound_tests::{Service, Stack, TestDatabase};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn start_with_args(args: &'static [&'static str]) -> Stack {
    Stack::builder()
        .ingress(|options| options.with_args(args))
        .start()
        .await
}

/// A raw HTTP/1.1 request head for a signed Stripe delivery to the stack's ingress, and
/// its body.
fn raw_request(stack: &Stack, event_id: &str) -> (String, bytes::Bytes) {
    let request = Provider::Stripe.request(Variant::Routed(event_id));
    let mut head = format!(
        "POST /webhooks/{} HTTP/1.1\r\nhost: {}\r\n",
        request.integration, stack.ingress.addr
    );
    for (name, value) in request.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!("content-length: {}\r\n\r\n", request.body.len()));
    (head, request.body)
}

/// Reads until the server closes or a full response with a JSON body has arrived.
async fn read_response(stream: &mut TcpStream, limit: Duration) -> String {
    let mut received = Vec::new();
    let _ = tokio::time::timeout(limit, async {
        let mut buffer = [0u8; 4096];
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(read) => {
                    received.extend_from_slice(&buffer[..read]);
                    if String::from_utf8_lossy(&received).trim_end().ends_with('}') {
                        break;
                    }
                }
            }
        }
    })
    .await;
    String::from_utf8_lossy(&received).into_owned()
}

#[tokio::test]
async fn fifty_concurrent_identical_deliveries_make_one_receipt() {
    let stack = start_with_args(&[]).await;
    let request = Provider::Stripe.request(Variant::Routed("evt_same"));
    let mut tasks = Vec::new();
    for _ in 0..50 {
        // A client each: separate connections, truly concurrent.
        let (request, addr) = (request.clone(), stack.ingress.addr);
        tasks.push(tokio::spawn(async move {
            request.send_to(&HttpClient::new(), addr).await
        }));
    }
    let mut accepted = 0;
    let mut duplicates = 0;
    for task in tasks {
        let answer = task.await.expect("task").expect("answer");
        assert_eq!(answer.status, 200, "{answer:?}");
        match answer.json["status"].as_str() {
            Some("accepted") => accepted += 1,
            Some("duplicate") => duplicates += 1,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!((accepted, duplicates), (1, 49));
    assert_eq!(stack.database.receipt_count().await, 1);
}

#[tokio::test]
async fn sigterm_drains_in_flight_requests_then_exits_zero() {
    let mut stack = start_with_args(&["--shutdown-grace-secs", "10"]).await;
    let (head, body) = raw_request(&stack, "evt_in_flight");
    let mut stream = TcpStream::connect(stack.ingress.addr)
        .await
        .expect("connect");
    // The request is in flight: head and half the body sent.
    let half = body.len() / 2;
    stream.write_all(head.as_bytes()).await.expect("write head");
    stream.write_all(&body[..half]).await.expect("write half");
    tokio::time::sleep(Duration::from_millis(200)).await;
    stack.ingress.terminate();
    tokio::time::sleep(Duration::from_millis(300)).await;
    // New connections are no longer accepted while the old one drains.
    assert!(
        HttpClient::new()
            .get(&stack.ingress.url("/healthz"))
            .await
            .is_err(),
        "the listener closed on SIGTERM"
    );
    stream.write_all(&body[half..]).await.expect("write rest");
    let response = read_response(&mut stream, Duration::from_secs(5)).await;
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.contains("\"accepted\""), "{response}");
    let status = stack
        .ingress
        .wait_exit(Duration::from_secs(10))
        .expect("exits after the drain");
    assert!(status.success(), "{status}");
    assert_eq!(stack.database.receipt_count().await, 1);
}

#[tokio::test]
async fn slow_headers_are_cut_by_the_header_timeout() {
    let stack = start_with_args(&["--header-read-timeout-secs", "1"]).await;
    let mut stream = TcpStream::connect(stack.ingress.addr)
        .await
        .expect("connect");
    stream
        .write_all(b"POST /webhooks/stripe-acme HTTP/1.1\r\nhost: x\r\n")
        .await
        .expect("partial head");
    let started = std::time::Instant::now();
    let mut buffer = [0u8; 1024];
    let read = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buffer)).await;
    let elapsed = started.elapsed();
    // hyper closes the connection (possibly after a 408): either way, not held open.
    assert!(
        matches!(read, Ok(Ok(_)) | Ok(Err(_))),
        "connection still open after {elapsed:?}"
    );
    assert!(
        elapsed >= Duration::from_millis(800),
        "closed too early: {elapsed:?}"
    );
    // The server keeps serving.
    assert_eq!(
        HttpClient::new()
            .get(&stack.ingress.url("/healthz"))
            .await
            .expect("answer")
            .status,
        200
    );
}

#[tokio::test]
async fn a_body_that_never_finishes_gets_408() {
    let stack = start_with_args(&["--request-timeout-secs", "1"]).await;
    let (head, body) = raw_request(&stack, "evt_slow_body");
    let mut stream = TcpStream::connect(stack.ingress.addr)
        .await
        .expect("connect");
    stream.write_all(head.as_bytes()).await.expect("head");
    stream.write_all(&body[..10]).await.expect("some body");
    let response = read_response(&mut stream, Duration::from_secs(5)).await;
    assert!(response.starts_with("HTTP/1.1 408"), "{response}");
    assert!(response.contains("request_timeout"), "{response}");
    assert_eq!(stack.database.receipt_count().await, 0);
}

#[tokio::test]
async fn chunked_body_past_the_limit_is_413_while_streaming() {
    let stack = start_with_args(&[]).await;
    let mut stream = TcpStream::connect(stack.ingress.addr)
        .await
        .expect("connect");
    let head =
        "POST /webhooks/stripe-acme HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n";
    stream.write_all(head.as_bytes()).await.expect("head");
    let chunk = "x".repeat(1024);
    // Five 1 KiB chunks pass the 4 KiB limit; the answer comes without a final chunk.
    for _ in 0..5 {
        let framed = format!("{:x}\r\n{chunk}\r\n", chunk.len());
        if stream.write_all(framed.as_bytes()).await.is_err() {
            break;
        }
    }
    let response = read_response(&mut stream, Duration::from_secs(5)).await;
    assert!(response.starts_with("HTTP/1.1 413"), "{response}");
}

#[tokio::test]
async fn connections_past_the_limit_wait_until_one_is_free() {
    let stack = start_with_args(&["--max-connections", "2"]).await;
    let held_one = TcpStream::connect(stack.ingress.addr)
        .await
        .expect("connect");
    let _held_two = TcpStream::connect(stack.ingress.addr)
        .await
        .expect("connect");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let url = stack.ingress.url("/healthz");
    let waiting = tokio::spawn(async move { HttpClient::new().get(&url).await });
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(
        !waiting.is_finished(),
        "a third connection was served past the limit of 2"
    );
    drop(held_one);
    let answer = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("served once a slot is free")
        .expect("task")
        .expect("answer");
    assert_eq!(answer.status, 200);
}

#[tokio::test]
async fn bad_configuration_stops_start_up_with_one_line_naming_the_field() {
    let database = TestDatabase::create().await;
    let mut options = fixtures::ingress_options(database.url());
    options.env.retain(|(name, _)| name != "TEST_GITHUB_SECRET");
    let logs = match Service::try_ingress(&options) {
        Ok(_) => panic!("started without its GitHub secret"),
        Err(logs) => logs,
    };
    let error = logs
        .iter()
        .find(|line| line.contains("\"ERROR\""))
        .expect("an error line");
    assert!(error.contains("integration[1] (gh-acme).secrets[0]: environment variable TEST_GITHUB_SECRET is not set or is empty"), "{error}");
    for line in &logs {
        for secret in fixtures::ALL_SECRETS {
            assert!(!line.contains(secret), "{line}");
        }
    }
}

/// Bodies held at once share one budget: when slow senders have reserved it, the next
/// request is told to come back (503 + Retry-After) instead of growing the process, and
/// the budget is whole again once they are gone.
#[tokio::test]
async fn a_full_body_budget_answers_503_and_frees_when_the_senders_leave() {
    // Two slow senders declare 4,000 bytes each and send one: 8,000 of 8,100 reserved.
    let stack = start_with_args(&["--body-budget-bytes", "8100"]).await;
    let mut slow = Vec::new();
    for _ in 0..2 {
        let mut stream = TcpStream::connect(stack.ingress.addr)
            .await
            .expect("connect");
        let head =
            "POST /webhooks/stripe-acme HTTP/1.1\r\nhost: x\r\ncontent-length: 4000\r\n\r\n{";
        stream.write_all(head.as_bytes()).await.expect("head");
        slow.push(stream);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let request = Provider::Stripe.request(Variant::Routed("evt_third"));
    let refused = request
        .send(&HttpClient::new(), &stack.ingress)
        .await
        .expect("an answer");
    assert_eq!(refused.status, 503, "{refused:?}");
    assert_eq!(refused.json["error"], "unavailable");
    assert!(refused.headers.contains_key("retry-after"));
    drop(slow);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let accepted = request
        .send(&HttpClient::new(), &stack.ingress)
        .await
        .expect("an answer");
    assert_eq!(accepted.json["status"], "accepted", "{accepted:?}");
}

#[tokio::test]
async fn a_body_budget_smaller_than_a_body_limit_stops_start_up() {
    let database = TestDatabase::create().await;
    let mut options = fixtures::ingress_options(database.url());
    options.args = vec!["--body-budget-bytes".into(), "1000".into()];
    let logs = match Service::try_ingress(&options) {
        Ok(_) => panic!("started with a budget smaller than a body"),
        Err(logs) => logs,
    };
    assert!(
        logs.iter().any(|line| line.contains(
            "the body budget (1000 bytes, --body-budget-bytes) is smaller than integration stripe-acme's max_body_bytes 4096"
        )),
        "{logs:#?}"
    );
}
