//! The chaos soak: several ingress and worker processes on one database behind a proxy,
//! a provider-like load of signed Stripe events (new payments, exact redeliveries, new
//! event ids for paid orders, refunds that often overtake their payment), a worker
//! SIGKILLed and restarted every few seconds, and one database outage mid-run. The load
//! redelivers whatever was not answered 2xx, as a provider does. At the end SQL checks
//! what must hold, every log line and metrics page is scanned for secrets, signatures and
//! payload fields, and [`SoakReport::summary`] prints it all on one line.
//!
//! `make soak` runs it from the `inbound-soak` binary; the suite runs a short one.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use inbound_store::roles::Process;
use rand::Rng;
use sqlx::PgPool;

use inbound_tests::audit::{Audit, audit};
use inbound_tests::cluster::PrivateCluster;
use inbound_tests::database::TestRoles;
use inbound_tests::domain::{self, TENANT};
use inbound_tests::fixtures;
use inbound_tests::http::HttpClient;
use inbound_tests::pgbouncer::{PgBouncer, PoolerOptions};
use inbound_tests::process::Service;
use inbound_tests::proxy::{DbProxy, database_addr};
use inbound_tests::signing;
use inbound_tests::sink::{Answer, TestSink};
use inbound_tests::{ServiceOptions, TestDatabase};

/// How big and how long.
#[derive(Debug, Clone)]
pub struct SoakOptions {
    /// How long the load runs (the drain afterwards is extra).
    pub duration: Duration,
    /// Ingress processes.
    pub ingresses: usize,
    /// Worker processes (one of them is killed every `kill_every`).
    pub workers: usize,
    /// Concurrent HTTP senders.
    pub connections: usize,
    /// Deliveries per second across all senders: a provider's pace that the workers can
    /// keep up with, not a benchmark's (a backlog that only grows would make "nothing
    /// stuck after lease + 30 s" a test of capacity instead of correctness).
    pub rate: u32,
    /// Time between worker kills.
    pub kill_every: Duration,
    /// How long the database is cut away, once, mid-run.
    pub outage: Duration,
    /// The workers' `--lease-secs`.
    pub lease_secs: u64,
    /// Pool size of each ingress (`--db-max-connections`).
    pub ingress_pool: u32,
    /// `--concurrency` of each worker.
    pub worker_concurrency: usize,
    /// Reach the database through PgBouncer in `pool_mode = transaction` (the binaries
    /// with `--db-pooler transaction`), restarted once mid-load besides the outage.
    pub pooler: bool,
    /// Run the database on a private primary with a standby, and make the mid-run outage
    /// a failover: the primary is killed, the standby promoted, the proxy moved to it.
    pub failover: Option<Replication>,
    /// Mid-run, replace every ingress (a new one first, then SIGTERM to the old) and every
    /// worker (SIGTERM, then its successor) in turn: a rolling deploy under load.
    pub rolling_restart: bool,
}

/// How the standby of a failover soak follows its primary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replication {
    /// A commit returns once the standby flushed it (`synchronous_standby_names`).
    Synchronous,
    /// A commit returns at once; the standby follows as fast as it can.
    Asynchronous,
}

impl SoakOptions {
    /// The soak `make soak` runs, for `duration`.
    pub fn full(duration: Duration) -> Self {
        Self {
            duration,
            ingresses: 2,
            workers: 3,
            connections: 64,
            rate: 400,
            kill_every: Duration::from_secs(3),
            outage: Duration::from_secs(3),
            lease_secs: 5,
            ingress_pool: 8,
            worker_concurrency: 8,
            pooler: false,
            failover: None,
            rolling_restart: true,
        }
    }

    /// A few seconds of the same, small enough to run beside the rest of the suite.
    pub fn short() -> Self {
        Self {
            duration: Duration::from_secs(10),
            ingresses: 2,
            workers: 2,
            connections: 16,
            rate: 150,
            kill_every: Duration::from_secs(2),
            outage: Duration::from_secs(2),
            lease_secs: 2,
            ingress_pool: 4,
            worker_concurrency: 4,
            pooler: false,
            failover: None,
            rolling_restart: true,
        }
    }
}

/// What the soak saw and what the database holds afterwards.
#[derive(Debug, Clone, Default)]
pub struct SoakReport {
    /// Seconds the load ran.
    pub seconds: u64,
    /// Deliveries sent (redeliveries included).
    pub sent: u64,
    /// Answered 2xx.
    pub ok: u64,
    /// Answered 503.
    pub unavailable: u64,
    /// Answered 503 without `Retry-After` (must be 0).
    pub unavailable_without_retry_after: u64,
    /// No answer (connection refused or reset).
    pub no_answer: u64,
    /// Any other status: a bug for valid signed events.
    pub other_status: u64,
    /// Events still not answered 2xx when the redeliveries stopped (must be 0).
    pub never_acknowledged: u64,
    /// What the database holds afterwards.
    pub audit: Audit,
    /// Worker SIGKILLs survived.
    pub kills: u64,
    /// Seconds the database was cut away.
    pub outage_secs: f64,
    /// Times the pooler was restarted under load.
    pub pooler_restarts: u64,
    /// Processes replaced by the rolling restart.
    pub rolling_restarts: u64,
    /// Processes of the rolling restart that did not exit 0 after SIGTERM (must be 0).
    pub unclean_exits: u64,
    /// Log lines and metric lines holding a secret, a signature or a payload field
    /// (must be 0).
    pub leaks: u64,
    /// A few of those lines, with what leaked masked.
    pub leak_examples: Vec<String>,
}

impl SoakReport {
    /// The one summary line.
    pub fn summary(&self) -> String {
        format!(
            "soak {}s: sent={} 2xx={} 503={} no_answer={} other_status={} \
             never_acknowledged={} receipts={} orders_paid={} duplicate_transitions={} intents_per_operation={} \
             transitions_without_one_intent={} acked_missing={} stuck_after_lease_plus_30s={} \
             kills_survived={} outage_secs={:.1} pooler_restarts={} rolling_restarts={} unclean_exits={} leaks={}",
            self.seconds,
            self.sent,
            self.ok,
            self.unavailable,
            self.no_answer,
            self.other_status,
            self.never_acknowledged,
            self.audit.receipts,
            self.audit.orders_paid,
            self.audit.duplicate_transitions,
            self.audit.max_intents_per_operation,
            self.audit.transitions_without_one_intent,
            self.audit.acked_missing,
            self.audit.stuck,
            self.kills,
            self.outage_secs,
            self.pooler_restarts,
            self.rolling_restarts,
            self.unclean_exits,
            self.leaks,
        )
    }

    /// Every promise the run broke, in words; empty when it kept them all.
    pub fn violations(&self) -> Vec<String> {
        let must_be_zero = [
            ("other_status", self.other_status as i64),
            (
                "unavailable_without_retry_after",
                self.unavailable_without_retry_after as i64,
            ),
            ("never_acknowledged", self.never_acknowledged as i64),
            ("duplicate_transitions", self.audit.duplicate_transitions),
            (
                "transitions_without_one_intent",
                self.audit.transitions_without_one_intent,
            ),
            ("acked_missing", self.audit.acked_missing),
            ("stuck", self.audit.stuck),
            ("leaks", self.leaks as i64),
            ("unclean_exits", self.unclean_exits as i64),
        ];
        let mut broken: Vec<String> = must_be_zero
            .iter()
            .filter(|(_, value)| *value != 0)
            .map(|(name, value)| format!("{name} = {value}, must be 0"))
            .collect();
        if self.audit.stuck != 0 {
            broken.push(format!("stuck receipts: {:?}", self.audit.stuck_examples));
        }
        if self.leaks != 0 {
            broken.push(format!("leaking lines: {:#?}", self.leak_examples));
        }
        if self.audit.max_intents_per_operation > 1 {
            broken.push(format!(
                "an operation has {} effect intents, must be 1",
                self.audit.max_intents_per_operation
            ));
        }
        for (name, value) in [
            ("2xx", self.ok),
            ("503", self.unavailable),
            ("kills", self.kills),
        ] {
            if value == 0 {
                broken.push(format!("{name} = 0: the soak did not exercise it"));
            }
        }
        broken
    }
}

/// One delivery: the event id and its exact body (a redelivery resends the same bytes).
#[derive(Debug, Clone)]
struct Delivery {
    event_id: String,
    body: Arc<str>,
}

/// The provider's side: what to send next, what to redeliver, what was acknowledged.
#[derive(Default)]
struct Provider {
    next_event: u64,
    next_order: u64,
    /// Orders whose payment event has been sent, newest last.
    paid_orders: Vec<u64>,
    /// Recent deliveries, for exact redeliveries.
    recent: VecDeque<Delivery>,
    /// Not answered 2xx: redelivered (the provider's retry), oldest first.
    unacknowledged: VecDeque<Delivery>,
    /// Event ids answered 2xx.
    acknowledged: Vec<String>,
}

const RECENT: usize = 4096;

impl Provider {
    /// The next delivery of a provider-like mix.
    fn next(&mut self, retry_only: bool) -> Option<Delivery> {
        if let Some(retry) = self.unacknowledged.pop_front() {
            return Some(retry);
        }
        if retry_only {
            return None;
        }
        let mut random = rand::rng();
        let roll: f64 = random.random();
        if roll < 0.30 && !self.recent.is_empty() {
            let index = random.random_range(0..self.recent.len());
            return Some(self.recent[index].clone());
        }
        let delivery = if roll < 0.40 && !self.paid_orders.is_empty() {
            // A new event id for an order already paid.
            let order = self.paid_orders[random.random_range(0..self.paid_orders.len())];
            self.event("payment_intent.succeeded", payment(order))
        } else if roll < 0.48 && !self.paid_orders.is_empty() {
            // A refund, half the time for the newest payment (likely still pending: the
            // worker sees the refund first and must wait for the payment).
            let order = if random.random_bool(0.5) {
                self.paid_orders[self.paid_orders.len() - 1]
            } else {
                self.paid_orders[random.random_range(0..self.paid_orders.len())]
            };
            self.event("charge.refunded", refund(order))
        } else {
            let order = self.next_order;
            self.next_order += 1;
            self.paid_orders.push(order);
            self.event("payment_intent.succeeded", payment(order))
        };
        if self.recent.len() == RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back(delivery.clone());
        Some(delivery)
    }

    fn event(&mut self, event_type: &str, object: serde_json::Value) -> Delivery {
        self.next_event += 1;
        let event_id = format!("evt_soak_{}", self.next_event);
        let body = domain::stripe_event(&event_id, event_type, object);
        Delivery {
            event_id,
            body: body.into(),
        }
    }
}

/// Personal data every soak payment carries: [`find_leaks`] looks for it in every log
/// line and metrics page.
const SOAK_PERSON_NAME: &str = "Soak T. Leakwell";
const SOAK_PERSON_EMAIL: &str = "soak.leakwell@example.com";

fn payment(order: u64) -> serde_json::Value {
    let mut payment = domain::payment_intent(
        &format!("pi_{order}"),
        &format!("o{order}"),
        1000,
        "usd",
        "succeeded",
    );
    payment["billing_details"] =
        serde_json::json!({"name": SOAK_PERSON_NAME, "email": SOAK_PERSON_EMAIL});
    payment
}

fn refund(order: u64) -> serde_json::Value {
    domain::charge(&format!("pi_{order}"), 1000, 1000)
}

#[derive(Default)]
struct Counters {
    sent: AtomicU64,
    ok: AtomicU64,
    unavailable: AtomicU64,
    unavailable_without_retry_after: AtomicU64,
    no_answer: AtomicU64,
    other_status: AtomicU64,
}

/// Every process started, the dead ones kept for their logs.
struct Fleet {
    ingress: Vec<Service>,
    workers: Vec<Option<Service>>,
    dead: Vec<Service>,
    ingress_options: ServiceOptions,
    worker_options: ServiceOptions,
}

/// Runs the soak against a fresh database on the server at `DATABASE_URL`. Needs a
/// multi-threaded runtime.
pub async fn run(options: &SoakOptions) -> SoakReport {
    // The standby streams through a proxy of its own, so that replication can be made to
    // lag just before the failover.
    let (servers, replication_link) = match options.failover {
        Some(replication) => {
            let primary = tokio::task::spawn_blocking(PrivateCluster::start)
                .await
                .expect("a primary");
            let link = DbProxy::start(primary.addr()).await;
            let via = link.addr;
            let servers = tokio::task::spawn_blocking(move || {
                let standby = PrivateCluster::standby_of(via);
                match replication {
                    Replication::Synchronous => primary.require_synchronous_standby(),
                    Replication::Asynchronous => primary.wait_for_standby("async"),
                }
                (primary, standby)
            })
            .await
            .expect("a standby");
            (Some(Arc::new(servers)), Some(link))
        }
        None => (None, None),
    };
    let database = match &servers {
        Some(servers) => TestDatabase::create_on(&servers.0.url()).await,
        None => TestDatabase::create().await,
    };
    let pool = database.pool().clone();
    seed_orders(&pool, options).await;
    // Each process logs in as its own role (least privilege, and the role's settings
    // are what a transaction pooler relies on).
    let roles = TestRoles::create(&database).await;
    let mut pooler = options.pooler.then(|| {
        PgBouncer::start(
            database.url(),
            &PoolerOptions {
                users: roles.credentials(),
                ..PoolerOptions::default()
            },
        )
    });
    let server = pooler
        .as_ref()
        .map_or_else(|| database_addr(database.url()), PgBouncer::addr);
    let proxy = DbProxy::start(server).await;
    // After a failover only the proxy knows where the database is.
    let audit_pool = if servers.is_some() {
        inbound_tests::database::connect(&proxy.rewrite_url(database.url())).await
    } else {
        pool.clone()
    };
    let urls = FleetUrls {
        ingress: proxy.rewrite_url(&roles.url(database.url(), Process::Ingress)),
        worker: proxy.rewrite_url(&roles.url(database.url(), Process::Worker)),
        pooler: options.pooler,
    };
    let sink = TestSink::start().await;
    // A sink as real receivers sometimes are: mostly fine, but some answers redirect, some
    // say "come back in 300,000 years", and some never come.
    sink.cycle(
        std::iter::repeat_n(Answer::Status(200), 7)
            .chain([
                Answer::Redirect(302, sink.url_at("/elsewhere")),
                Answer::RetryAfter(429, 10_000_000_000_000),
                Answer::Hang,
            ])
            .collect(),
    );
    let fleet = Arc::new(Mutex::new(start_fleet(options, &urls, &sink).await));
    // Where senders deliver: one URL per ingress slot, replaced when a rolling restart
    // replaces the ingress (as a load balancer's endpoints are).
    let ingress_urls: Arc<Mutex<Vec<String>>> = Arc::new(Mutex::new(
        fleet
            .lock()
            .expect("fleet")
            .ingress
            .iter()
            .map(|service| service.webhook_url("stripe-acme"))
            .collect(),
    ));

    let provider = Arc::new(Mutex::new(Provider::default()));
    let counters = Arc::new(Counters::default());
    let load_over = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let senders: Vec<_> = (0..options.connections)
        .map(|index| {
            tokio::spawn(send_loop(
                Arc::clone(&ingress_urls),
                index,
                options.connections as f64 / f64::from(options.rate.max(1)),
                Arc::clone(&provider),
                Arc::clone(&counters),
                Arc::clone(&load_over),
            ))
        })
        .collect();
    let outage_active = Arc::new(AtomicBool::new(false));
    let killer = tokio::spawn(kill_loop(
        Arc::clone(&fleet),
        options.kill_every,
        Arc::clone(&load_over),
        Arc::clone(&outage_active),
    ));

    // One outage in the middle of the run: the database cut away, or lost to a failover.
    tokio::time::sleep(options.duration / 2).await;
    outage_active.store(true, Ordering::SeqCst);
    proxy.cut();
    let outage_started = Instant::now();
    if let (Some(servers), Some(link)) = (&servers, &replication_link) {
        // Replication lags (its link stalls) while the load goes on against the primary —
        // the proxy in front of the processes reopened for it — then the primary dies
        // the way a machine does, its standby is promoted, and the address every process
        // uses moves to it. A synchronous primary cannot confirm a commit meanwhile; an
        // asynchronous one does, and those receipts are lost with it.
        proxy.restore();
        link.stall();
        tokio::time::sleep(REPLICATION_LAG).await;
        proxy.cut();
        link.cut();
        let failing_over = Arc::clone(servers);
        tokio::task::spawn_blocking(move || {
            failing_over.0.crash();
            failing_over.1.promote();
        })
        .await
        .expect("failover");
        proxy.retarget(servers.1.addr());
    }
    tokio::time::sleep(options.outage.saturating_sub(outage_started.elapsed())).await;
    proxy.restore();
    let outage_secs = outage_started.elapsed().as_secs_f64();
    outage_active.store(false, Ordering::SeqCst);
    let mut pooler_restarts = 0;
    if let Some(pooler) = pooler.as_mut() {
        // Every client and server connection of the pooler drops at once.
        tokio::time::sleep((options.duration * 3 / 4).saturating_sub(started.elapsed())).await;
        pooler.restart();
        pooler_restarts += 1;
    }
    let (mut rolling_restarts, mut unclean_exits) = (0, 0);
    if options.rolling_restart {
        tokio::time::sleep((options.duration * 3 / 5).saturating_sub(started.elapsed())).await;
        let (fleet, urls) = (Arc::clone(&fleet), Arc::clone(&ingress_urls));
        (rolling_restarts, unclean_exits) =
            tokio::task::spawn_blocking(move || rolling_restart(&fleet, &urls))
                .await
                .expect("rolling restart");
    }
    tokio::time::sleep(options.duration.saturating_sub(started.elapsed())).await;
    let seconds = started.elapsed().as_secs();
    load_over.store(true, Ordering::SeqCst);
    let kills = killer.await.expect("killer");
    for sender in senders {
        sender.await.expect("sender");
    }

    // Every worker process is alive again; give them lease + 30 s to finish everything.
    let limit = Duration::from_secs(options.lease_secs + 30);
    let settle_started = Instant::now();
    while settle_started.elapsed() < limit && pending(&audit_pool).await > 0 {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (acknowledged, never_acknowledged) = {
        let mut provider = provider.lock().expect("provider");
        (
            std::mem::take(&mut provider.acknowledged),
            provider.unacknowledged.len() as u64,
        )
    };
    let (logs, metrics_urls) = {
        let fleet = fleet.lock().expect("fleet");
        let live: Vec<&Service> = fleet
            .ingress
            .iter()
            .chain(fleet.workers.iter().flatten())
            .collect();
        let logs: Vec<String> = live
            .iter()
            .copied()
            .chain(fleet.dead.iter())
            .flat_map(|service| service.logs())
            .collect();
        let urls: Vec<String> = live
            .iter()
            .map(|service| service.metrics_url("/metrics"))
            .collect();
        (logs, urls)
    };
    let mut metric_lines = Vec::new();
    let client = HttpClient::new();
    for url in metrics_urls {
        if let Ok(answer) = client.get(&url).await {
            metric_lines.extend(
                String::from_utf8_lossy(&answer.body)
                    .lines()
                    .map(str::to_owned),
            );
        }
    }
    let leaked_lines = find_leaks(logs.into_iter().chain(metric_lines));
    // Nothing moves while the database is audited.
    tokio::task::spawn_blocking(move || drop(fleet))
        .await
        .expect("stop the fleet");
    let audit = audit(&audit_pool, &acknowledged).await;
    SoakReport {
        seconds,
        sent: counters.sent.load(Ordering::SeqCst),
        ok: counters.ok.load(Ordering::SeqCst),
        unavailable: counters.unavailable.load(Ordering::SeqCst),
        unavailable_without_retry_after: counters
            .unavailable_without_retry_after
            .load(Ordering::SeqCst),
        no_answer: counters.no_answer.load(Ordering::SeqCst),
        other_status: counters.other_status.load(Ordering::SeqCst),
        never_acknowledged,
        audit,
        kills,
        outage_secs,
        pooler_restarts,
        rolling_restarts,
        unclean_exits,
        leaks: leaked_lines.len() as u64,
        leak_examples: leaked_lines.into_iter().take(3).collect(),
    }
}

/// Enough orders awaiting payment for any rate this machine reaches.
async fn seed_orders(pool: &PgPool, options: &SoakOptions) {
    let orders = (options.duration.as_secs() * 3000).max(10_000) as i64;
    sqlx::query(
        "INSERT INTO orders (tenant_id, id, provider_payment_id, total_minor, currency)
         SELECT $1, 'o' || n, 'pi_' || n, 1000, 'usd' FROM generate_series(0, $2 - 1) AS n",
    )
    .bind(TENANT)
    .bind(orders)
    .execute(pool)
    .await
    .expect("seed orders");
}

/// Where the fleet's processes connect, each as its own role.
struct FleetUrls {
    ingress: String,
    worker: String,
    /// Through a transaction pooler: `--db-pooler transaction`.
    pooler: bool,
}

async fn start_fleet(options: &SoakOptions, urls: &FleetUrls, sink: &TestSink) -> Fleet {
    let pooler_args: &[&str] = if urls.pooler {
        &["--db-pooler", "transaction"]
    } else {
        &[]
    };
    let ingress_pool = options.ingress_pool.to_string();
    let ingress_args: Vec<&str> = [
        "--db-max-connections",
        &ingress_pool,
        "--db-acquire-timeout-ms",
        "1000",
        "--db-statement-timeout-ms",
        "2000",
    ]
    .into_iter()
    .chain(pooler_args.iter().copied())
    .collect();
    let ingress_options = fixtures::ingress_options(&urls.ingress).with_args(&ingress_args);
    let concurrency = options.worker_concurrency.to_string();
    let lease_secs = options.lease_secs.to_string();
    let worker_args: Vec<&str> = [
        "--concurrency",
        &concurrency,
        "--effect-concurrency",
        &concurrency,
        "--lease-secs",
        &lease_secs,
        "--poll-interval-ms",
        "100",
        "--backoff-base-ms",
        "100",
        "--backoff-cap-secs",
        "2",
        "--max-attempts",
        "1000",
        "--db-acquire-timeout-ms",
        "1000",
    ]
    .into_iter()
    .chain(pooler_args.iter().copied())
    .collect();
    let worker_options =
        fixtures::with_audit_sink(fixtures::ingress_options(&urls.worker), &sink.url(), true)
            .with_args(&worker_args);
    let ingresses = options.ingresses;
    let workers = options.workers;
    tokio::task::spawn_blocking(move || Fleet {
        ingress: (0..ingresses)
            .map(|_| Service::ingress(&ingress_options))
            .collect(),
        workers: (0..workers)
            .map(|_| Some(Service::worker(&worker_options)))
            .collect(),
        dead: Vec::new(),
        ingress_options,
        worker_options,
    })
    .await
    .expect("start the fleet")
}

/// How long replication is stalled before a failover.
const REPLICATION_LAG: Duration = Duration::from_secs(1);

/// How long, after the load, the senders keep redelivering what was not acknowledged.
const DRAIN_LIMIT: Duration = Duration::from_secs(60);

/// Sends until the load is over, then redelivers until everything was acknowledged (or
/// [`DRAIN_LIMIT`] passed: what is left is reported as never acknowledged).
async fn send_loop(
    urls: Arc<Mutex<Vec<String>>>,
    index: usize,
    seconds_between_sends: f64,
    provider: Arc<Mutex<Provider>>,
    counters: Arc<Counters>,
    load_over: Arc<AtomicBool>,
) {
    let client = HttpClient::new();
    let mut pace = tokio::time::interval(Duration::from_secs_f64(seconds_between_sends));
    pace.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut drain_started: Option<Instant> = None;
    loop {
        pace.tick().await;
        let retry_only = load_over.load(Ordering::SeqCst);
        if retry_only && drain_started.get_or_insert_with(Instant::now).elapsed() > DRAIN_LIMIT {
            return;
        }
        let Some(delivery) = provider.lock().expect("provider").next(retry_only) else {
            return;
        };
        let url = {
            let urls = urls.lock().expect("urls");
            urls[index % urls.len()].clone()
        };
        let headers = signing::stripe_headers(fixtures::STRIPE_SECRET, delivery.body.as_bytes(), 0);
        counters.sent.fetch_add(1, Ordering::Relaxed);
        let answer = client
            .post(&url, &headers, delivery.body.as_bytes().to_vec())
            .await;
        let acknowledged = match answer {
            Ok(answer) if (200..300).contains(&answer.status) => {
                counters.ok.fetch_add(1, Ordering::Relaxed);
                true
            }
            Ok(answer) if answer.status == 503 => {
                counters.unavailable.fetch_add(1, Ordering::Relaxed);
                if !answer.headers.contains_key("retry-after") {
                    counters
                        .unavailable_without_retry_after
                        .fetch_add(1, Ordering::Relaxed);
                }
                false
            }
            Ok(_) => {
                counters.other_status.fetch_add(1, Ordering::Relaxed);
                false
            }
            Err(_) => {
                counters.no_answer.fetch_add(1, Ordering::Relaxed);
                false
            }
        };
        if acknowledged {
            let mut provider = provider.lock().expect("provider");
            provider.acknowledged.push(delivery.event_id);
        } else {
            provider
                .lock()
                .expect("provider")
                .unacknowledged
                .push_back(delivery);
            // A provider waits before it retries.
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// SIGKILLs one worker every `every` (round robin) and starts a successor at once; not
/// while the database is away (a successor's start needs it). Returns the kill count.
async fn kill_loop(
    fleet: Arc<Mutex<Fleet>>,
    every: Duration,
    load_over: Arc<AtomicBool>,
    outage_active: Arc<AtomicBool>,
) -> u64 {
    let mut kills = 0;
    while !load_over.load(Ordering::SeqCst) {
        tokio::time::sleep(every).await;
        if outage_active.load(Ordering::SeqCst) || load_over.load(Ordering::SeqCst) {
            continue;
        }
        let fleet = Arc::clone(&fleet);
        let slot = kills as usize;
        tokio::task::spawn_blocking(move || {
            let mut fleet = fleet.lock().expect("fleet");
            let slot = slot % fleet.workers.len();
            if let Some(mut victim) = fleet.workers[slot].take() {
                victim.kill();
                fleet.dead.push(victim);
            }
            let successor = Service::worker(&fleet.worker_options);
            fleet.workers[slot] = Some(successor);
        })
        .await
        .expect("kill and restart a worker");
        kills += 1;
    }
    kills
}

/// Replaces every ingress (its successor first, then SIGTERM to it, its URL swapped in
/// between) and then every worker (SIGTERM, then its successor), one at a time, as a
/// rolling deploy does. Returns the processes replaced and those that did not exit 0.
fn rolling_restart(fleet: &Mutex<Fleet>, urls: &Mutex<Vec<String>>) -> (u64, u64) {
    const EXIT_LIMIT: Duration = Duration::from_secs(30);
    let (mut replaced, mut unclean) = (0, 0);
    let mut retire = |fleet: &mut Fleet, mut old: Service| {
        old.terminate();
        let exit = old.wait_exit(EXIT_LIMIT);
        if !exit.is_some_and(|status| status.success()) {
            unclean += 1;
            // The count alone cannot tell a hang from a signal or an error exit.
            let logs = old.logs();
            eprintln!(
                "soak: process {} did not exit 0 within {EXIT_LIMIT:?} of SIGTERM ({}); its last log lines: {:#?}",
                old.pid(),
                exit.map_or_else(|| "still running".to_owned(), |status| status.to_string()),
                &logs[logs.len().saturating_sub(10)..]
            );
        }
        fleet.dead.push(old);
        replaced += 1;
    };
    let ingresses = fleet.lock().expect("fleet").ingress.len();
    for slot in 0..ingresses {
        let options = fleet.lock().expect("fleet").ingress_options.clone();
        let successor = Service::ingress(&options);
        urls.lock().expect("urls")[slot] = successor.webhook_url("stripe-acme");
        let mut fleet = fleet.lock().expect("fleet");
        let old = std::mem::replace(&mut fleet.ingress[slot], successor);
        retire(&mut fleet, old);
    }
    let workers = fleet.lock().expect("fleet").workers.len();
    for slot in 0..workers {
        // Held throughout, so that the SIGKILL loop does not pick this slot meanwhile.
        let mut fleet = fleet.lock().expect("fleet");
        if let Some(old) = fleet.workers[slot].take() {
            retire(&mut fleet, old);
        }
        let successor = Service::worker(&fleet.worker_options);
        fleet.workers[slot] = Some(successor);
    }
    (replaced, unclean)
}

async fn pending(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM receipts WHERE status = 'pending'")
        .fetch_one(pool)
        .await
        .expect("pending receipts")
}

/// Lines (of a log or a metrics page) that hold a configured secret, a Stripe
/// signature, a payload field or the personal data soak payments carry; each returned with what matched replaced by
/// `<LEAKED>`, so that reporting a leak does not repeat it.
pub fn find_leaks(lines: impl Iterator<Item = String>) -> Vec<String> {
    // Payload keys as JSON writes them, raw or escaped inside a log line's string, so
    // that SQL text naming a column such as `amount_received_minor` is not mistaken.
    const PAYLOAD_FIELDS: &[&str] = &[
        "amount_received\":",
        "amount_received\\\":",
        "metadata\":",
        "metadata\\\":",
        "livemode\":",
        "livemode\\\":",
    ];
    let needles: Vec<&str> = fixtures::ALL_SECRETS
        .iter()
        .chain(PAYLOAD_FIELDS)
        .copied()
        .chain(["v1=", SOAK_PERSON_NAME, SOAK_PERSON_EMAIL])
        .collect();
    lines
        .filter(|line| needles.iter().any(|needle| line.contains(needle)))
        .map(|line| {
            needles
                .iter()
                .fold(line, |line, needle| line.replace(needle, "<LEAKED>"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::find_leaks;
    use inbound_tests::fixtures;

    #[test]
    fn payloads_secrets_and_signatures_are_found_and_masked_but_column_names_are_not() {
        let lines = [
            r#"{"message":"receipt","payload":"{\"amount_received\":2000}"}"#.to_owned(),
            r#"{"metadata":{"order_id":"o1"}}"#.to_owned(),
            format!("secret {}", fixtures::STRIPE_SECRET),
            "stripe-signature: t=1,v1=abc".to_owned(),
            r#"{"db.statement":"UPDATE orders SET amount_received_minor = $4"}"#.to_owned(),
            r#"{"message":"webhook","outcome":"accepted"}"#.to_owned(),
            format!(r#"{{"reason":"order of {}"}}"#, super::SOAK_PERSON_EMAIL),
        ];
        let leaks = find_leaks(lines.into_iter());
        assert_eq!(leaks.len(), 5, "{leaks:#?}");
        assert!(leaks.iter().all(|line| line.contains("<LEAKED>")));
        assert!(
            !leaks
                .iter()
                .any(|line| line.contains(fixtures::STRIPE_SECRET))
        );
    }
}
