//! Hostile HTTP through the real ingress: oversized headers, invalid UTF-8, deeply nested
//! JSON, duplicate keys, gzip bodies, wrong content types and hundreds of idle connections
//! held against the connection limit. Each gets a clear 4xx (or the connection is closed),
//! and the process stays healthy and keeps accepting valid traffic.

use std::time::Duration;

use inbound_tests::fixtures::{Provider, Variant};
use inbound_tests::http::{Answer, HttpClient};
use inbound_tests::signing;
use inbound_tests::{SignedRequest, Stack};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn assert_still_serving(stack: &Stack, event_id: &str) {
    // A new connection: the ingress still accepts them.
    let client = HttpClient::new();
    assert_eq!(
        client
            .get(&stack.ingress.url("/healthz"))
            .await
            .expect("alive")
            .status,
        200
    );
    let answer = Provider::Stripe
        .request(Variant::Routed(event_id))
        .send(&client, &stack.ingress)
        .await
        .expect("an answer");
    assert_eq!(answer.json["status"], "accepted", "{answer:?}");
}

/// Sends `body` signed with the right Stripe secret, with no header but the signature and
/// `extra`.
async fn signed(stack: &Stack, body: Vec<u8>, extra: &[(&str, &str)]) -> Answer {
    let mut request = SignedRequest::stripe(body).without_header("content-type");
    for (name, value) in extra {
        request = request.with_header(name, value);
    }
    stack.deliver(&request).await
}

#[tokio::test]
async fn malformed_bodies_that_verify_are_clear_400s() {
    let stack = Stack::start().await;
    let valid = signing::stripe_body(
        "evt_shape",
        "payment_intent.succeeded",
        Some("acct_123"),
        true,
    );
    let mut invalid_utf8 = valid.clone().into_bytes();
    invalid_utf8.extend_from_slice(&[0xff, 0xfe]);
    let nested = format!(
        r#"{{"id":"evt_deep","type":"payment_intent.succeeded","account":"acct_123","livemode":true,"data":{}{}}}"#,
        "[".repeat(1500),
        "]".repeat(1500)
    );
    let duplicate_keys = r#"{"id":"evt_a","id":"evt_b","type":"payment_intent.succeeded","account":"acct_123","livemode":true}"#;
    // gzip of `valid` (providers never compress; a compressed body is not JSON to us).
    let gzipped = {
        let mut bytes = vec![0x1f, 0x8b, 0x08, 0x00, 0, 0, 0, 0, 0x00, 0xff];
        bytes.extend_from_slice(valid.as_bytes());
        bytes
    };
    for (name, body, extra) in [
        ("invalid UTF-8", invalid_utf8, vec![]),
        ("nested 1500 deep", nested.into_bytes(), vec![]),
        ("duplicate keys", duplicate_keys.as_bytes().to_vec(), vec![]),
    ] {
        let answer = signed(&stack, body, &extra).await;
        assert_eq!(answer.status, 400, "{name}: {answer:?}");
        assert_eq!(answer.json["error"], "malformed", "{name}");
    }
    // Verified, but declared as something we do not read: 415, even when the bytes
    // underneath would have parsed.
    for (name, body, extra) in [
        ("gzip", gzipped, vec![("content-encoding", "gzip")]),
        (
            "form body",
            b"payload=%7B%7D".to_vec(),
            vec![("content-type", "application/x-www-form-urlencoded")],
        ),
        (
            "valid JSON declared as text",
            valid.clone().into_bytes(),
            vec![("content-type", "text/plain")],
        ),
    ] {
        let answer = signed(&stack, body, &extra).await;
        assert_eq!(answer.status, 415, "{name}: {answer:?}");
        assert_eq!(answer.json["error"], "unsupported_media_type", "{name}");
    }
    // Wrong content type, no signature: refused before anything is read as JSON.
    let answer = stack
        .deliver(
            &SignedRequest::unsigned("stripe-acme", "hello")
                .with_header("content-type", "text/plain"),
        )
        .await;
    assert_eq!(answer.status, 401);
    assert_eq!(stack.database.receipt_count().await, 0);
    assert_still_serving(&stack, "evt_after_shapes").await;
}

#[tokio::test]
async fn oversized_headers_are_refused_and_the_process_stays_healthy() {
    let stack = Stack::start().await;
    let mut stream = TcpStream::connect(stack.ingress.addr)
        .await
        .expect("connect");
    let huge = "x".repeat(200 * 1024);
    let request = format!(
        "POST /webhooks/stripe-acme HTTP/1.1\r\nhost: x\r\nx-filler: {huge}\r\ncontent-length: 2\r\n\r\n{{}}"
    );
    // The server may close while this is still being written.
    let _ = stream.write_all(request.as_bytes()).await;
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer))
        .await
        .expect("refused with an answer or a close, not left hanging");
    let text = String::from_utf8_lossy(&answer);
    // An answer must be the refusal; no answer is acceptable only as a closed connection
    // (EOF or a reset because the unread rest of the request was discarded).
    if read.is_ok() && !text.is_empty() {
        assert!(
            text.starts_with("HTTP/1.1 431") || text.starts_with("HTTP/1.1 400"),
            "{text}"
        );
    }
    assert_still_serving(&stack, "evt_after_headers").await;
}

#[tokio::test]
async fn hundreds_of_idle_connections_are_shed_by_the_header_timeout() {
    let stack = Stack::builder()
        .ingress(|options| {
            options.with_args(&["--max-connections", "50", "--header-read-timeout-secs", "1"])
        })
        .start()
        .await;
    let mut idle = Vec::new();
    for _ in 0..400 {
        if let Ok(stream) = TcpStream::connect(stack.ingress.addr).await {
            idle.push(stream);
        }
    }
    // The first 50 hold every slot until the header timeout closes them; the rest wait in
    // the backlog and are shed the same way; a real request then gets through.
    let answered = tokio::time::timeout(
        Duration::from_secs(30),
        assert_still_serving(&stack, "evt_after_idle"),
    )
    .await;
    assert!(
        answered.is_ok(),
        "valid traffic was starved by idle connections"
    );
    drop(idle);
}

/// A flood of forged requests writes a few lines a second, not one each, and the next line
/// says how many it left out; every delivery is still logged.
#[tokio::test]
async fn a_flood_of_refusals_writes_a_few_lines_and_says_what_it_left_out() {
    let stack = inbound_tests::Stack::start().await;
    let forged = inbound_tests::SignedRequest::stripe_signed(
        "whsec_forged",
        inbound_tests::signing::stripe_body("evt_forged", "payment_intent.succeeded", None, true),
        0,
    );
    let started = std::time::Instant::now();
    for _ in 0..60 {
        assert_eq!(stack.deliver(&forged).await.status, 401);
    }
    let seconds = started.elapsed().as_secs() + 1;
    // The next second's first refusal names what was left out.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    assert_eq!(stack.deliver(&forged).await.status, 401);
    let accepted = stack.deliver_event("evt_after_the_flood").await;
    assert_eq!(accepted.json["status"], "accepted");
    stack
        .ingress
        .wait_for_log("the accepted delivery's line", |line| {
            line.contains("evt_after_the_flood")
        })
        .await;
    let logs = stack.ingress.logs();
    let refusals: Vec<&String> = logs
        .iter()
        .filter(|line| line.contains("\"outcome\":\"unauthorized\""))
        .collect();
    assert!(
        refusals.len() as u64 <= 10 * (seconds + 1) + 1,
        "{} lines for 61 refusals in {seconds} s",
        refusals.len()
    );
    assert!(
        refusals.iter().any(|line| line.contains("\"suppressed\":")),
        "no line says what was left out: {refusals:#?}"
    );
}

/// The request-duration histogram (what InboundIngressSlow reads) times the provider's
/// deliveries answered 2xx, not refusals: an unauthenticated slow-body flood must not page
/// as a slow ingress.
#[tokio::test]
async fn refusals_are_not_timed_as_deliveries() {
    let stack = inbound_tests::Stack::start().await;
    let forged = inbound_tests::SignedRequest::stripe_signed(
        "whsec_forged",
        inbound_tests::signing::stripe_body("evt_forged", "payment_intent.succeeded", None, true),
        0,
    );
    assert_eq!(stack.deliver(&forged).await.status, 401);
    let timed = |page: &str| {
        page.lines()
            .find_map(|line| {
                line.strip_prefix(
                    "inbound_ingress_request_duration_seconds_count{integration=\"stripe-acme\"} ",
                )
            })
            .map(str::to_owned)
    };
    let page = stack.ingress.metrics_page().await;
    assert_eq!(timed(&page), None, "{page}");
    assert_eq!(
        stack.deliver_event("evt_timed").await.json["status"],
        "accepted"
    );
    let page = stack.ingress.metrics_page().await;
    assert_eq!(timed(&page).as_deref(), Some("1"), "{page}");
}
