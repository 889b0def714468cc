//! A real PostgreSQL crash and restart under load. The server is a private one
//! (`cluster::PrivateCluster`): stopping the shared server would break the tests running
//! beside this one. `pg_ctl stop -m immediate` is a crash — no checkpoint, every
//! connection cut — so the restart replays the WAL.
//!
//! While the server is down the ingress answers 503 with `Retry-After` (never 2xx) and is
//! not ready; the worker logs, backs off and stays up. After the restart both resume
//! without being restarted themselves, every event answered 2xx has its receipt (it was
//! durable before the answer), and each order is paid exactly once.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use inbound_tests::cluster::PrivateCluster;
use inbound_tests::domain::{self, payment_intent, stripe_event};
use inbound_tests::http::HttpClient;
use inbound_tests::{Service, SignedRequest, TestDatabase, audit, eventually, fixtures};
use sqlx::PgPool;

const ORDERS: usize = 300;

fn event(order: usize) -> (String, String) {
    let event_id = format!("evt_restart_{order}");
    let body = stripe_event(
        &event_id,
        "payment_intent.succeeded",
        payment_intent(
            &format!("pi_{order}"),
            &format!("o{order}"),
            1000,
            "usd",
            "succeeded",
        ),
    );
    (event_id, body)
}

/// Delivers one event to the ingress at `addr` (the senders run on tasks of their own);
/// `true` when it was answered 2xx. Anything but 2xx or 503 fails.
async fn deliver(client: &HttpClient, addr: SocketAddr, order: usize) -> bool {
    let (_, body) = event(order);
    match SignedRequest::stripe(body).send_to(client, addr).await {
        Ok(answer) if answer.status == 200 => true,
        Ok(answer) => {
            assert_eq!(answer.status, 503, "{answer:?}");
            assert!(answer.headers.contains_key("retry-after"), "{answer:?}");
            false
        }
        Err(_) => false,
    }
}

/// One order per payment intent, each paid once by its event.
async fn seed_orders(pool: &PgPool) {
    for order in 0..ORDERS {
        domain::seed_order(
            pool,
            &format!("o{order}"),
            &format!("pi_{order}"),
            1000,
            "usd",
        )
        .await;
    }
}

/// An ingress that gives up on the database quickly, so the outage is answered at once.
fn start_ingress(database_url: &str) -> Service {
    Service::ingress(&fixtures::ingress_options(database_url).with_args(&[
        "--db-acquire-timeout-ms",
        "500",
        "--db-statement-timeout-ms",
        "1000",
    ]))
}

/// A worker that polls and backs off briefly, so it resumes soon after the restart.
fn start_worker(database_url: &str) -> Service {
    Service::worker(&fixtures::ingress_options(database_url).with_args(&[
        "--poll-interval-ms",
        "50",
        "--backoff-base-ms",
        "100",
        "--backoff-cap-secs",
        "1",
        "--db-acquire-timeout-ms",
        "500",
    ]))
}

/// Load from 8 senders, each taking the next order; what is not answered 2xx waits for
/// redelivery.
struct Load {
    next: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    acknowledged: Arc<Mutex<Vec<String>>>,
    unacknowledged: Arc<Mutex<Vec<usize>>>,
    senders: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    fn start(addr: SocketAddr) -> Self {
        let next = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let acknowledged = Arc::new(Mutex::new(Vec::new()));
        let unacknowledged = Arc::new(Mutex::new(Vec::new()));
        let senders = (0..8)
            .map(|_| {
                let (next, stop) = (Arc::clone(&next), Arc::clone(&stop));
                let (acknowledged, unacknowledged) =
                    (Arc::clone(&acknowledged), Arc::clone(&unacknowledged));
                tokio::spawn(async move {
                    let client = HttpClient::new();
                    while !stop.load(Ordering::SeqCst) {
                        let order = next.fetch_add(1, Ordering::SeqCst);
                        if order >= ORDERS {
                            return;
                        }
                        if deliver(&client, addr, order).await {
                            acknowledged.lock().expect("lock").push(event(order).0);
                        } else {
                            unacknowledged.lock().expect("lock").push(order);
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                    }
                })
            })
            .collect();
        Self {
            next,
            stop,
            acknowledged,
            unacknowledged,
            senders,
        }
    }

    async fn wait_for_some_acknowledged(&self) {
        eventually(
            "some load acknowledged",
            Duration::from_secs(20),
            async || (self.acknowledged.lock().expect("lock").len() >= 20).then_some(()),
        )
        .await;
    }

    /// Stops the senders; returns what was acknowledged and the orders the provider must
    /// redeliver: those not answered 2xx and those never sent.
    async fn stop(self) -> (Vec<String>, Vec<usize>) {
        self.stop.store(true, Ordering::SeqCst);
        for sender in self.senders {
            sender.await.expect("sender");
        }
        let mut redeliver: Vec<usize> =
            std::mem::take(&mut *self.unacknowledged.lock().expect("lock"));
        redeliver.extend(self.next.load(Ordering::SeqCst).min(ORDERS)..ORDERS);
        let acknowledged = self.acknowledged.lock().expect("lock").clone();
        (acknowledged, redeliver)
    }
}

/// Crashes the server; while it is down the ingress answers no 2xx and is not ready.
async fn crash_and_check_the_ingress_refuses(
    cluster: &Arc<PrivateCluster>,
    client: &HttpClient,
    ingress: &Service,
    down_order: usize,
) {
    let crashing = Arc::clone(cluster);
    tokio::task::spawn_blocking(move || crashing.crash())
        .await
        .expect("crash the server");
    for _ in 0..3 {
        assert!(
            !deliver(client, ingress.addr, down_order).await,
            "a 2xx while the database is down"
        );
    }
    assert_eq!(
        client.get_status_once(&ingress.url("/readyz"), 503).await,
        503
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
}

/// Restarts the server and waits for the ingress to be ready again (it is not restarted).
async fn restart_and_wait_until_ready(
    cluster: &Arc<PrivateCluster>,
    client: &HttpClient,
    ingress: &Service,
) {
    let restarting = Arc::clone(cluster);
    tokio::task::spawn_blocking(move || restarting.start_server())
        .await
        .expect("restart the server");
    eventually("ingress ready again", Duration::from_secs(30), async || {
        client
            .get(&ingress.url("/readyz"))
            .await
            .is_ok_and(|answer| answer.status == 200)
            .then_some(())
    })
    .await;
}

/// Redelivers each order until it is answered 2xx; returns their event ids.
async fn redeliver_until_acknowledged(
    client: &HttpClient,
    addr: SocketAddr,
    orders: Vec<usize>,
) -> Vec<String> {
    let mut acknowledged = Vec::new();
    for order in orders {
        eventually(
            "a redelivery answered 2xx",
            Duration::from_secs(20),
            async || deliver(client, addr, order).await.then_some(()),
        )
        .await;
        acknowledged.push(event(order).0);
    }
    acknowledged
}

async fn wait_until_every_receipt_is_done(pool: &PgPool) {
    eventually("every receipt done", Duration::from_secs(60), async || {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM receipts WHERE status <> 'done'")
            .fetch_one(pool)
            .await
            .is_ok_and(|count| count == 0)
            .then_some(())
    })
    .await;
}

/// Every acknowledged event has its receipt, and each order was paid exactly once.
async fn assert_nothing_acknowledged_lost_and_each_order_paid_once(
    pool: &PgPool,
    acknowledged: &[String],
) {
    let audit = audit::audit(pool, acknowledged).await;
    assert_eq!(audit.acked_missing, 0, "{audit:?}");
    assert_eq!(audit.receipts, ORDERS as i64, "{audit:?}");
    assert_eq!(audit.orders_paid, ORDERS as i64, "{audit:?}");
    assert_eq!(audit.duplicate_transitions, 0, "{audit:?}");
    assert_eq!(audit.max_intents_per_operation, 1, "{audit:?}");
    assert_eq!(audit.transitions_without_one_intent, 0, "{audit:?}");
}

/// The worker is still running, and it logged the outage.
fn assert_the_worker_rode_out_the_restart(worker: &mut Service) {
    assert_eq!(
        worker.wait_exit(Duration::from_millis(100)),
        None,
        "the worker rode out the restart"
    );
    assert!(
        worker
            .logs()
            .iter()
            .any(|line| line.contains("\"level\":\"WARN\"") || line.contains("\"level\":\"ERROR\"")),
        "the worker logged the outage"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_crash_and_restart_loses_no_acknowledged_receipt_and_pays_each_order_once() {
    let cluster = Arc::new(PrivateCluster::start());
    let database = TestDatabase::create_on(&cluster.url()).await;
    let pool = database.pool().clone();
    seed_orders(&pool).await;
    let ingress = start_ingress(database.url());
    let mut worker = start_worker(database.url());
    let load = Load::start(ingress.addr);
    load.wait_for_some_acknowledged().await;

    let client = HttpClient::new();
    let down_order = ORDERS - 1;
    crash_and_check_the_ingress_refuses(&cluster, &client, &ingress, down_order).await;
    restart_and_wait_until_ready(&cluster, &client, &ingress).await;
    let (mut acknowledged, mut redeliver) = load.stop().await;

    // The provider redelivers everything not answered 2xx, and the events never sent.
    redeliver.push(down_order);
    acknowledged.extend(redeliver_until_acknowledged(&client, ingress.addr, redeliver).await);
    wait_until_every_receipt_is_done(&pool).await;

    assert_nothing_acknowledged_lost_and_each_order_paid_once(&pool, &acknowledged).await;
    assert_the_worker_rode_out_the_restart(&mut worker);
}
