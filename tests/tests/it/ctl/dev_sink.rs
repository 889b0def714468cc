//! `inboundctl dev-sink`: verifies a dispatcher's signatures, counts repeats and answers
//! reconciliation.

use super::*;

/// What `inboundctl dev-sink` prints after its first line.
type PrintedLines = std::io::Lines<std::io::BufReader<std::process::ChildStdout>>;

/// `inboundctl dev-sink` on a free port, verifying with `secret`, with `extra` flags: the
/// running child, the lines it prints after its first, and the address the first names.
fn start_dev_sink(secret: &str, extra: &[&str]) -> (std::process::Child, PrintedLines, String) {
    use std::io::BufRead;
    let mut args = vec!["dev-sink", "--listen", "127.0.0.1:0", "--secret", secret];
    args.extend_from_slice(extra);
    let mut child = Inboundctl::new()
        .command(&args)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn dev-sink");
    let mut lines = std::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let first = lines.next().expect("a line").expect("utf-8");
    let addr = first
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .expect("address")
        .to_owned();
    (child, lines, addr)
}

/// The signature headers a dispatcher sends `body` of `operation_key` with, under `secret`.
fn signed_as_a_dispatcher(secret: &str, operation_key: &str, body: &str) -> Vec<(String, String)> {
    let key = inbound_core::verify::decode_standard_secret(secret).expect("secret");
    inbound_core::effects::signature_headers(
        &[key],
        operation_key,
        chrono::Utc::now().timestamp(),
        body.as_bytes(),
    )
    .into_iter()
    .map(|(name, value)| (name.to_owned(), value))
    .collect()
}

/// The status the sink answers `POST url` of `body` with `headers`.
async fn posted(
    client: &inbound_tests::http::HttpClient,
    url: &str,
    headers: &[(String, String)],
    body: &'static str,
) -> u16 {
    client
        .post(url, headers, body)
        .await
        .expect("answer")
        .status
}

#[tokio::test]
async fn dev_sink_verifies_signatures_counts_repeats_and_answers_reconciliation() {
    let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let (mut child, lines, addr) = start_dev_sink(secret, &["--fail-first", "1"]);
    let client = inbound_tests::http::HttpClient::new();
    let url = format!("http://{addr}/effects");
    let body =
        r#"{"operation_key":"order.paid:acme:o1","kind":"order.paid","tenant":"acme","data":{}}"#;
    let signed = signed_as_a_dispatcher(secret, "order.paid:acme:o1", body);
    assert_eq!(
        posted(&client, &url, &signed, body).await,
        503,
        "--fail-first 1"
    );
    assert_eq!(posted(&client, &url, &signed, body).await, 200);
    assert_eq!(posted(&client, &url, &signed, body).await, 200);
    assert_eq!(posted(&client, &url, &[], body).await, 401, "unsigned");
    let known = client
        .get(&format!("http://{addr}/operations/order.paid%3Aacme%3Ao1"))
        .await
        .expect("answer");
    assert_eq!(
        (known.status, known.json["status"].as_str()),
        (200, Some("completed"))
    );
    assert_eq!(
        client
            .get(&format!("http://{addr}/operations/nope"))
            .await
            .expect("answer")
            .status,
        404
    );
    child.kill().ok();
    child.wait().ok();
    let printed: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(
        printed
            .iter()
            .any(|line| line.contains("order.paid:acme:o1")
                && line.contains("signature=valid: applied")),
        "{printed:#?}"
    );
    assert!(
        printed
            .iter()
            .any(|line| line.contains("repeat #2, already applied")),
        "{printed:#?}"
    );
}
