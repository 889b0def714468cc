//! Would pipelining the ingress's commits pay? Runs the ingress's group-commit statement
//! (`store::insert_receipts`, read from its source so it cannot drift) over 16 receipts of
//! ~0.9 kB on ONE connection with `depth` statements in flight: depth 1 is what the
//! ingress does through sqlx (send, wait for the answer, send the next); depth 2 and 3 send
//! the next while the previous one's commit is being flushed. Every statement is its own
//! implicit transaction (its own Sync), so each still commits, and is flushed, on its own.
//! Statements in flight share the same arrivals, whether on one connection or on two (two
//! committers), so in the ingress each carries about half as many receipts: depth 2 and
//! two connections are measured with 16 receipts per statement and with 8.
//! Shapes alternate in order from round to round; the database is checkpointed before
//! each measure.
//!
//! Usage: `inbound-probe-pipelining URL [SECONDS] [ROUNDS]`, URL a migrated database whose
//! schema is `inbound`.

use std::time::{Duration, Instant};

use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio_postgres::{Client, NoTls, Statement};

const RECEIPTS_SOURCE: &str = include_str!("../../../crates/core/src/store/receipts.rs");

/// What one measure does: `connections` connections, each with `depth` statements of
/// `receipts` receipts in flight.
#[derive(Clone, Copy)]
struct Shape {
    connections: usize,
    depth: usize,
    receipts: usize,
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let arguments: Vec<String> = std::env::args().collect();
    let url = arguments
        .get(1)
        .expect("usage: inbound-probe-pipelining URL [SECONDS] [ROUNDS]");
    let seconds: u64 = arguments
        .get(2)
        .map_or(10, |text| text.parse().expect("SECONDS"));
    let rounds: usize = arguments
        .get(3)
        .map_or(4, |text| text.parse().expect("ROUNDS"));
    let shape = |connections, depth, receipts| Shape {
        connections,
        depth,
        receipts,
    };
    let shapes = [
        shape(1, 1, 16),
        shape(1, 2, 16),
        shape(1, 2, 8),
        shape(1, 3, 16),
        shape(2, 1, 16),
        shape(2, 1, 8),
    ];
    let admin = connect(url).await;
    let mut results: Vec<Vec<f64>> = vec![Vec::new(); shapes.len()];
    for round in 0..rounds {
        let mut order: Vec<usize> = (0..shapes.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for index in order {
            admin.batch_execute("CHECKPOINT").await.expect("checkpoint");
            let shape = shapes[index];
            let measures = (0..shape.connections).map(|connection| {
                measure(
                    url,
                    shape,
                    format!("r{round}s{index}c{connection}"),
                    seconds,
                )
            });
            let receipts_per_second: f64 = futures_util::future::join_all(measures)
                .await
                .into_iter()
                .sum();
            println!(
                "round {} {}: {receipts_per_second:.0} receipts/s",
                round + 1,
                shape.describe()
            );
            results[index].push(receipts_per_second);
        }
    }
    println!(
        "\nreceipts/s (min–max over {rounds} rounds), and each round's ratio to the first shape:"
    );
    for (shape, rates) in shapes.iter().zip(&results) {
        let ratios: Vec<String> = rates
            .iter()
            .zip(&results[0])
            .map(|(rate, base)| format!("{:.2}", rate / base))
            .collect();
        println!(
            "{}: {:.0}–{:.0}  ratios {}",
            shape.describe(),
            rates.iter().copied().fold(f64::INFINITY, f64::min),
            rates.iter().copied().fold(0.0, f64::max),
            ratios.join(" ")
        );
    }
}

async fn connect(url: &str) -> Client {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await.expect("connect");
    tokio::spawn(connection);
    client
        .batch_execute("SET search_path = inbound")
        .await
        .expect("search_path");
    client
}

impl Shape {
    fn describe(&self) -> String {
        format!(
            "connections {} depth {} receipts {}",
            self.connections, self.depth, self.receipts
        )
    }
}

/// Receipts per second committed on one new connection with `shape.depth` statements of
/// `shape.receipts` in flight.
async fn measure(url: &str, shape: Shape, tag: String, seconds: u64) -> f64 {
    let client = connect(url).await;
    let statement = client
        .prepare(&insert_receipts_sql())
        .await
        .expect("prepare the statement");
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let started = Instant::now();
    let mut in_flight = FuturesUnordered::new();
    let mut statements_sent = 0;
    let mut receipts = 0;
    loop {
        while in_flight.len() < shape.depth && Instant::now() < deadline {
            in_flight.push(insert(
                &client,
                &statement,
                shape.receipts,
                &tag,
                statements_sent,
            ));
            statements_sent += 1;
        }
        match in_flight.next().await {
            Some(inserted) => receipts += inserted,
            None => break,
        }
    }
    receipts as f64 / started.elapsed().as_secs_f64()
}

/// One statement of new receipts; how many it inserted.
async fn insert(
    client: &Client,
    statement: &Statement,
    receipts: usize,
    tag: &str,
    sequence: usize,
) -> usize {
    let note = "x".repeat(700);
    let event_ids: Vec<String> = (0..receipts)
        .map(|position| format!("evt_{tag}_{sequence}_{position}"))
        .collect();
    let payloads: Vec<String> = event_ids
        .iter()
        .map(|id| {
            format!(
                r#"{{"id":"{id}","type":"payment_intent.succeeded","livemode":false,"data":{{"object":{{"id":"pi_1","amount_received":2000,"metadata":{{"order_id":"o1","note":"{note}"}}}}}}}}"#
            )
        })
        .collect();
    let integrations = vec!["stripe-bench"; receipts];
    let scopes = vec!["stripe-bench/platform/test"; receipts];
    let types = vec!["payment_intent.succeeded"; receipts];
    let event_ids: Vec<&str> = event_ids.iter().map(String::as_str).collect();
    let payloads: Vec<&str> = payloads.iter().map(String::as_str).collect();
    let digests: Vec<Option<&[u8]>> = vec![None; receipts];
    client
        .query(
            statement,
            &[
                &integrations,
                &scopes,
                &event_ids,
                &types,
                &types,
                &payloads,
                &digests,
            ],
        )
        .await
        .expect("the statement commits")
        .len()
}

/// The statement `store::insert_receipts` sends, taken from its source.
fn insert_receipts_sql() -> String {
    let function = &RECEIPTS_SOURCE[RECEIPTS_SOURCE
        .find("pub async fn insert_receipts")
        .expect("insert_receipts in store/receipts.rs")..];
    let start = function.find("r#\"").expect("the statement's opening") + 3;
    let length = function[start..].find("\"#").expect("the statement's end");
    function[start..start + length].to_owned()
}
