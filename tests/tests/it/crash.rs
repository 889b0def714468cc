//! Crash-table rows 1 and 2 at the ingress, with real process deaths:
//!
//! - `crash_before_receipt_commit`: the process dies before the INSERT; nothing is stored,
//!   no 2xx was sent, and the redelivery is accepted as new.
//! - `crash_after_commit_before_ack`: the process dies after the commit, before answering;
//!   the receipt survives, the redelivery is a duplicate, one receipt.
//! - `sigkill_under_load_loses_no_acknowledged_receipt`: SIGKILL at a random point under
//!   concurrent load; every request that got a 200 has its receipt, and redelivering the
//!   unanswered ones leaves exactly one receipt per event.
//!
//! The first two use failpoints (the `failpoints` feature, which `make test` enables).

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use inbound_tests::fixtures::{Provider, Variant};
use inbound_tests::http::HttpClient;
use inbound_tests::{Service, Stack};
use tokio::task::JoinHandle;

/// Delivers `event_id` to `ingress` (the stack's own, or one restarted beside it): the
/// answer's JSON when it is a 200.
async fn deliver(
    client: &HttpClient,
    ingress: &Service,
    event_id: &str,
) -> Result<serde_json::Value, String> {
    let answer = Provider::Stripe
        .request(Variant::Routed(event_id))
        .send(client, ingress)
        .await?;
    if answer.status == 200 {
        Ok(answer.json)
    } else {
        Err(format!("status {}", answer.status))
    }
}

/// A stack whose ingress died at `failpoint` on its first delivery, and an ingress
/// restarted (without the failpoint) on its database.
async fn crash_at(failpoint: &'static str) -> (Stack, Service) {
    let mut stack = Stack::builder()
        .ingress(move |mut options| {
            options
                .env
                .push(("INBOUND_FAILPOINT".into(), failpoint.into()));
            options
        })
        .start()
        .await;
    let answer = deliver(&stack.client, &stack.ingress, "evt_crash").await;
    assert!(
        answer.is_err(),
        "no answer may come from a process that died: {answer:?}"
    );
    let doomed = &mut stack.ingress;
    let status = doomed
        .wait_exit(Duration::from_secs(10))
        .expect("the process died at the failpoint");
    assert!(!status.success(), "{status}");
    assert!(
        doomed
            .logs()
            .iter()
            .any(|line| line.contains(&format!("failpoint {failpoint} hit")))
    );
    let restarted = Service::ingress(&stack.options());
    (stack, restarted)
}

#[tokio::test]
async fn crash_before_receipt_commit() {
    let (stack, restarted) = crash_at("before_receipt_commit").await;
    assert_eq!(stack.database.receipt_count().await, 0, "nothing accepted");
    let answer = deliver(&HttpClient::new(), &restarted, "evt_crash")
        .await
        .expect("200");
    assert_eq!(answer["status"], "accepted", "the redelivery is new");
    assert_eq!(stack.database.receipt_count().await, 1);
}

#[tokio::test]
async fn crash_after_commit_before_ack() {
    let (stack, restarted) = crash_at("after_receipt_commit").await;
    let (status, queued): (String, bool) = sqlx::query_as(
        "SELECT r.status, EXISTS (SELECT 1 FROM receipt_queue q WHERE q.receipt_id = r.id)
         FROM receipts r WHERE r.event_id = 'evt_crash'",
    )
    .fetch_one(stack.pool())
    .await
    .expect("the receipt survived the crash");
    assert_eq!(
        (status.as_str(), queued),
        ("pending", true),
        "pending and queued for the worker"
    );
    let answer = deliver(&HttpClient::new(), &restarted, "evt_crash")
        .await
        .expect("200");
    assert_eq!(answer["status"], "duplicate");
    assert_eq!(stack.database.receipt_count().await, 1);
}

/// Concurrent senders of the load, and how many events each sends.
const SENDERS: usize = 16;
const PER_SENDER: usize = 60;

/// Every event id of the load, sender by sender.
fn load_event_ids() -> impl Iterator<Item = String> {
    (0..SENDERS)
        .flat_map(|sender| (0..PER_SENDER).map(move |index| format!("evt_load_{sender}_{index}")))
}

/// What was answered 200: each event id with its receipt id.
type Acknowledged = Arc<Mutex<Vec<(String, i64)>>>;

/// The load: each sender delivers its events in turn to `addr`, recording what was
/// answered 200, and stops at the first refused or cut connection.
fn spawn_load(
    client: &HttpClient,
    addr: SocketAddr,
    acknowledged: &Acknowledged,
) -> Vec<JoinHandle<()>> {
    (0..SENDERS)
        .map(|sender| {
            let (client, acknowledged) = (client.clone(), Arc::clone(acknowledged));
            tokio::spawn(async move {
                for index in 0..PER_SENDER {
                    let event_id = format!("evt_load_{sender}_{index}");
                    let request = Provider::Stripe.request(Variant::Routed(&event_id));
                    match request.send_to(&client, addr).await {
                        Ok(answer) if answer.status == 200 => {
                            let receipt_id = answer.json["receipt_id"]
                                .as_i64()
                                .expect("accepted carries an id");
                            acknowledged
                                .lock()
                                .expect("lock")
                                .push((event_id, receipt_id));
                        }
                        // A refused or cut connection: the process is gone; the provider
                        // would redeliver later.
                        _ => return,
                    }
                }
            })
        })
        .collect()
}

/// Waits until a good share (a third) of the load has been acknowledged.
async fn wait_for_a_third_acknowledged(acknowledged: &Acknowledged) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while acknowledged.lock().expect("lock").len() < SENDERS * PER_SENDER / 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "load made no progress"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The kill interrupted the load, and every event answered 200 has its receipt.
async fn assert_every_acknowledged_receipt_survived(stack: &Stack, acknowledged: &[(String, i64)]) {
    assert!(
        acknowledged.len() < SENDERS * PER_SENDER,
        "the kill interrupted the load"
    );
    for (event_id, receipt_id) in acknowledged {
        assert!(
            stack.database.receipt_is_committed(*receipt_id).await,
            "{event_id} got 200 but receipt {receipt_id} is missing"
        );
    }
}

/// The provider redelivers everything that was not acknowledged, to `restarted`; each is
/// answered 200 (accepted or duplicate). Returns how many were redelivered.
async fn redeliver_the_unacknowledged(
    client: &HttpClient,
    restarted: &Service,
    acknowledged: &[(String, i64)],
) -> usize {
    let acknowledged_ids: BTreeSet<&str> = acknowledged
        .iter()
        .map(|(event_id, _)| event_id.as_str())
        .collect();
    let mut redelivered = 0;
    for event_id in load_event_ids() {
        if !acknowledged_ids.contains(event_id.as_str()) {
            let answer = deliver(client, restarted, &event_id)
                .await
                .expect("200 after restart");
            assert!(
                answer["status"] == "accepted" || answer["status"] == "duplicate",
                "{answer}"
            );
            redelivered += 1;
        }
    }
    redelivered
}

#[tokio::test]
async fn sigkill_under_load_loses_no_acknowledged_receipt() {
    let mut stack = Stack::start().await;
    let client = stack.client.clone();
    let acknowledged = Acknowledged::default();
    let tasks = spawn_load(&client, stack.ingress.addr, &acknowledged);
    // Kill once a good share of the load has been acknowledged, mid-stream.
    wait_for_a_third_acknowledged(&acknowledged).await;
    stack.ingress.kill();
    for task in tasks {
        task.await.expect("sender task");
    }
    let acknowledged = acknowledged.lock().expect("lock").clone();
    assert_every_acknowledged_receipt_survived(&stack, &acknowledged).await;

    let restarted = Service::ingress(&stack.options());
    let redelivered = redeliver_the_unacknowledged(&client, &restarted, &acknowledged).await;
    assert!(redelivered > 0);
    assert_eq!(
        stack.database.receipt_count().await,
        (SENDERS * PER_SENDER) as i64,
        "exactly one receipt per event"
    );
}
