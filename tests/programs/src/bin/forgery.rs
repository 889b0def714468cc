//! `inbound-forgery`: what a forged request costs the ingress, per signature scheme, for
//! benchmarks (`make bench`, `make bench-forgery`).
//!
//! For each scheme it sends, for `--seconds`, requests shaped as expensively as that
//! scheme allows an unauthenticated sender: a fresh timestamp (so freshness passes), as
//! many signature entries as the header may list (all wrong), a head padded to just under
//! the server's 16 KiB limit, and a body of `--body-bytes`. It reports the ingress's CPU
//! (utime + stime of `--cpu-of`, from `/proc`) per answered request, and the answers
//! seen. Integrations are expected under the ids `forged-<scheme>` (bench/forgery.sh
//! writes the configuration). Prints one JSON object.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use bytes::Bytes;
use clap::Parser;
use http_body_util::{BodyExt, Full};
use inbound_core::verify::MAX_SIGNATURES_PER_HEADER;
use inbound_programs::cpu::{TICKS_PER_SECOND, process_ticks};
use tokio::net::TcpStream;

#[derive(Debug, Parser)]
struct Args {
    /// Ingress address, host:port.
    #[arg(long)]
    addr: String,
    /// The ingress's pid, whose CPU is measured.
    #[arg(long)]
    cpu_of: u32,
    /// Body size of every request (the default integration limit is 1 MiB).
    #[arg(long, default_value_t = 1024 * 1024)]
    body_bytes: usize,
    /// How long each scheme is sent.
    #[arg(long, default_value_t = 3)]
    seconds: u64,
    /// Connections sending at once.
    #[arg(long, default_value_t = 2)]
    connections: usize,
    /// Schemes to send (default: all).
    #[arg(long = "scheme")]
    schemes: Vec<String>,
}

/// The head the server accepts is 16 KiB; this leaves room for the request line and the
/// headers hyper adds.
const HEAD_BYTES: usize = 15 * 1024;

/// A signature entry: 32 bytes as hex.
fn hex_entry(index: usize) -> String {
    format!("{index:064x}")
}

/// 32 or 64 bytes as base64, distinct per index.
fn base64_entry(index: usize, length: usize) -> String {
    let mut bytes = vec![0u8; length];
    bytes[0] = u8::try_from(index % 256).unwrap_or(0);
    bytes[1] = 0x5a;
    BASE64.encode(bytes)
}

/// The headers of a forged request to `scheme` at `now`, before padding.
fn forged_headers(scheme: &str, now: u64) -> Vec<(String, String)> {
    let most = MAX_SIGNATURES_PER_HEADER;
    let listed = |render: &dyn Fn(usize) -> String, separator: &str| {
        (0..most).map(render).collect::<Vec<_>>().join(separator)
    };
    let pairs: Vec<(&str, String)> = match scheme {
        "stripe" => vec![(
            "stripe-signature",
            format!(
                "t={now},{}",
                listed(&|i| format!("v1={}", hex_entry(i)), ",")
            ),
        )],
        "github" => vec![
            ("x-hub-signature-256", format!("sha256={}", hex_entry(1))),
            ("x-github-event", "push".to_owned()),
            ("x-github-delivery", "d1".to_owned()),
        ],
        "slack" => vec![
            ("x-slack-signature", format!("v0={}", hex_entry(1))),
            ("x-slack-request-timestamp", now.to_string()),
        ],
        "shopify" => vec![("x-shopify-hmac-sha256", base64_entry(1, 32))],
        "paddle" => vec![(
            "paddle-signature",
            format!(
                "ts={now};{}",
                listed(&|i| format!("h1={}", hex_entry(i)), ";")
            ),
        )],
        "zoom" => vec![
            ("x-zm-signature", format!("v0={}", hex_entry(1))),
            ("x-zm-request-timestamp", now.to_string()),
        ],
        "standard" => vec![
            ("webhook-id", "msg_forged".to_owned()),
            ("webhook-timestamp", now.to_string()),
            (
                "webhook-signature",
                listed(&|i| format!("v1,{}", base64_entry(i, 32)), " "),
            ),
        ],
        // One public key: two distinct `v1a` entries are the most Ed25519 checks a
        // request may ask for; the other entries are `v1`.
        "standard-v1a" => vec![
            ("webhook-id", "msg_forged".to_owned()),
            ("webhook-timestamp", now.to_string()),
            (
                "webhook-signature",
                listed(
                    &|i| {
                        if i < 2 {
                            format!("v1a,{}", base64_entry(i, 64))
                        } else {
                            format!("v1,{}", base64_entry(i, 32))
                        }
                    },
                    " ",
                ),
            ),
        ],
        // The red team's request (2026-12-03): 170 zero `v1a` entries, past the cap.
        "standard-v1a-170" => vec![
            ("webhook-id", "msg_forged".to_owned()),
            ("webhook-timestamp", now.to_string()),
            (
                "webhook-signature",
                vec![format!("v1a,{}", BASE64.encode([0u8; 64])); 170].join(" "),
            ),
        ],
        "hmac-sha256" | "hmac-sha512" => vec![
            (
                "x-forged-signature",
                listed(&|i| format!("v1={}", base64_entry(i, 64)), ","),
            ),
            ("x-forged-timestamp", now.to_string()),
        ],
        "token" => vec![("x-forged-token", "not-the-token".to_owned())],
        other => panic!("unknown scheme {other}"),
    };
    pairs
        .into_iter()
        .map(|(name, value)| (name.to_owned(), value))
        .collect()
}

/// Every scheme, in the order reported.
const SCHEMES: [&str; 12] = [
    "stripe",
    "github",
    "slack",
    "shopify",
    "paddle",
    "zoom",
    "standard",
    "standard-v1a",
    "standard-v1a-170",
    "hmac-sha256",
    "hmac-sha512",
    "token",
];

/// What one scheme's run saw.
#[derive(Default)]
struct Tally {
    statuses: BTreeMap<u16, u64>,
    errors: u64,
}

async fn send_for(addr: String, scheme: String, body: Bytes, until: Instant) -> Tally {
    let mut tally = Tally::default();
    let Ok(stream) = TcpStream::connect(&addr).await else {
        tally.errors += 1;
        return tally;
    };
    stream.set_nodelay(true).ok();
    let Ok((mut sender, driver)) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await
    else {
        tally.errors += 1;
        return tally;
    };
    tokio::spawn(driver);
    // The 170-entry request goes to the `v1a` integration.
    let integration = scheme.strip_suffix("-170").unwrap_or(&scheme);
    let path = format!("/webhooks/forged-{integration}");
    while Instant::now() < until {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_secs());
        let headers = forged_headers(&scheme, now);
        let used: usize = headers
            .iter()
            .map(|(name, value)| name.len() + value.len() + 4)
            .sum();
        let mut request = hyper::Request::post(path.as_str())
            .header("host", addr.as_str())
            .header("content-type", "application/json");
        for (name, value) in &headers {
            request = request.header(name.as_str(), value.as_str());
        }
        let padding = "p".repeat(HEAD_BYTES.saturating_sub(used + 200));
        let request = request
            .header("x-padding", padding)
            .body(Full::new(body.clone()))
            .expect("request");
        match sender.send_request(request).await {
            Ok(response) => {
                let status = response.status().as_u16();
                response.into_body().collect().await.ok();
                *tally.statuses.entry(status).or_default() += 1;
            }
            Err(_) => {
                tally.errors += 1;
                break;
            }
        }
    }
    tally
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let schemes: Vec<String> = if args.schemes.is_empty() {
        SCHEMES.iter().map(|scheme| (*scheme).to_owned()).collect()
    } else {
        args.schemes.clone()
    };
    let pad = "x".repeat(args.body_bytes.saturating_sub(12));
    let body = Bytes::from(format!(r#"{{"pad":"{pad}"}}"#));
    let stat = format!("/proc/{}/stat", args.cpu_of);
    // Unmeasured: the ingress's buffers, pages and blocking threads warm up first.
    let warm_until = Instant::now() + Duration::from_secs(1);
    futures_join_all(
        (0..args.connections)
            .map(|_| {
                send_for(
                    args.addr.clone(),
                    schemes[0].clone(),
                    body.clone(),
                    warm_until,
                )
            })
            .collect(),
    )
    .await;
    let mut report = serde_json::Map::new();
    for scheme in &schemes {
        let before = process_ticks(&stat).expect("the ingress's /proc stat");
        let until = Instant::now() + Duration::from_secs(args.seconds);
        let runs: Vec<_> = (0..args.connections)
            .map(|_| send_for(args.addr.clone(), scheme.clone(), body.clone(), until))
            .collect();
        let tallies = futures_join_all(runs).await;
        let after = process_ticks(&stat).expect("the ingress's /proc stat");
        let mut statuses: BTreeMap<u16, u64> = BTreeMap::new();
        let mut errors = 0;
        for tally in tallies {
            errors += tally.errors;
            for (status, count) in tally.statuses {
                *statuses.entry(status).or_default() += count;
            }
        }
        let answered: u64 = statuses.values().sum();
        let cpu_ms = (after - before) as f64 * 1000.0 / TICKS_PER_SECOND as f64;
        report.insert(
            scheme.clone(),
            serde_json::json!({
                "answered": answered,
                "statuses": statuses.iter().map(|(status, count)| (status.to_string(), count)).collect::<BTreeMap<_, _>>(),
                "errors": errors,
                "cpu_ms": cpu_ms,
                "cpu_ms_per_request": if answered > 0 { cpu_ms / answered as f64 } else { f64::NAN },
            }),
        );
        eprintln!(
            "forgery: {scheme}: {answered} answered, {:.3} ms of ingress CPU each",
            cpu_ms / answered.max(1) as f64
        );
    }
    println!(
        "{}",
        serde_json::json!({ "body_bytes": args.body_bytes, "head_bytes": HEAD_BYTES, "schemes": report })
    );
}

/// Runs `futures` concurrently, results in order.
async fn futures_join_all<F: Future<Output = Tally> + Send + 'static>(
    futures: Vec<F>,
) -> Vec<Tally> {
    let handles: Vec<_> = futures.into_iter().map(tokio::spawn).collect();
    let mut tallies = Vec::with_capacity(handles.len());
    for handle in handles {
        tallies.push(handle.await.expect("sender task"));
    }
    tallies
}
