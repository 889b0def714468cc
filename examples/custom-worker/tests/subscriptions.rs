//! The custom worker as a team runs it: inbound's ingress and this crate's worker started
//! in-process through their library entry points, signed Stripe events over HTTP, and the
//! team's table checked in a real PostgreSQL (`DATABASE_URL`, else the local server).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Parser;
use custom_worker::{SUBSCRIPTIONS_SYNC, handler};
use inbound_core::secret::Secret;
use inbound_core::store::{self, Schema};
use inbound_ingress::IngressArgs;
use inbound_worker::{Worker, WorkerArgs};
use serde_json::json;
use sqlx::postgres::{PgConnectOptions, PgPool};
use sqlx::{ConnectOptions, Connection};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::oneshot;

const SECRET: &str = "whsec_custom_worker_example_secret";

fn admin_url() -> String {
    std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

/// A scratch database with inbound's schema and this crate's; dropped by [`Scratch::drop`].
struct Scratch {
    admin: PgConnectOptions,
    name: String,
    url: String,
    pool: PgPool,
    dir: PathBuf,
}

impl Scratch {
    async fn new() -> Self {
        let admin: PgConnectOptions = admin_url().parse().expect("DATABASE_URL parses");
        let name = format!("custom_worker_test_{}", rand::random::<u32>());
        let mut connection = admin.connect().await.expect("PostgreSQL is running");
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut connection)
            .await
            .expect("create database");
        connection.close().await.ok();
        let options = admin.clone().database(&name);
        let url = options.to_url_lossy().to_string();
        let pool = PgPool::connect_with(options.clone())
            .await
            .expect("connect");
        store::migrate(&pool, &Schema::default())
            .await
            .expect("inbound's migrations");
        custom_worker::migrate(&options)
            .await
            .expect("the team's migrations");
        let dir = std::env::temp_dir().join(&name);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        std::fs::write(dir.join("stripe-secret"), SECRET).expect("secret file");
        Self {
            admin,
            name,
            url,
            pool,
            dir,
        }
    }

    fn config(&self, route_options: &str) -> PathBuf {
        let path = self.dir.join("inbound.toml");
        let secret = self.dir.join("stripe-secret");
        std::fs::write(
            &path,
            format!(
                r#"
[[integration]]
id = "stripe-test"
provider = "stripe"
tenant = "acme"
secrets = ["file:{}"]
expect = {{ livemode = false }}

[integration.routes]
"customer.subscription.*" = {{ handler = "{SUBSCRIPTIONS_SYNC}"{route_options} }}
"#,
                secret.display()
            ),
        )
        .expect("config");
        path
    }

    async fn drop(self) {
        self.pool.close().await;
        std::fs::remove_dir_all(&self.dir).ok();
        if let Ok(mut connection) = self.admin.connect().await {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            )))
            .execute(&mut connection)
            .await
            .ok();
        }
    }
}

fn free_port() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
}

/// Ingress and worker, each on its library entry point, until [`Running::stop`].
struct Running {
    listen: SocketAddr,
    stops: Vec<oneshot::Sender<()>>,
    tasks: Vec<tokio::task::JoinHandle<anyhow::Result<()>>>,
}

impl Running {
    async fn start(scratch: &Scratch, config: &std::path::Path) -> Self {
        let listen = free_port();
        let ingress = IngressArgs::try_parse_from([
            "inbound-ingress".to_owned(),
            format!("--config={}", config.display()),
            format!("--database-url={}", scratch.url),
            format!("--listen={listen}"),
            format!("--metrics-listen={}", free_port()),
        ])
        .expect("ingress flags");
        let worker = worker_args(scratch, config);
        let (ingress_stop, ingress_stopped) = oneshot::channel::<()>();
        let (worker_stop, worker_stopped) = oneshot::channel::<()>();
        let tasks = vec![
            tokio::spawn(inbound_ingress::run(ingress, async move {
                ingress_stopped.await.ok();
            })),
            tokio::spawn(
                Worker::builder(worker)
                    .handler(SUBSCRIPTIONS_SYNC, handler())
                    .run(async move {
                        worker_stopped.await.ok();
                    }),
            ),
        ];
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut tasks = tasks;
        if let Some(index) = tasks.iter().position(tokio::task::JoinHandle::is_finished) {
            let outcome = tasks.swap_remove(index).await.expect("task");
            panic!("a service stopped at start-up: {outcome:?}");
        }
        Self {
            listen,
            stops: vec![ingress_stop, worker_stop],
            tasks,
        }
    }

    async fn stop(self) {
        for stop in self.stops {
            stop.send(()).ok();
        }
        for task in self.tasks {
            task.await.expect("task").expect("clean exit");
        }
    }
}

fn worker_args(scratch: &Scratch, config: &std::path::Path) -> WorkerArgs {
    WorkerArgs::try_parse_from([
        "custom-worker".to_owned(),
        format!("--config={}", config.display()),
        format!("--database-url={}", scratch.url),
        format!("--metrics-listen={}", free_port()),
        "--poll-interval-ms=50".to_owned(),
        "--shutdown-grace-secs=2".to_owned(),
    ])
    .expect("worker flags")
}

/// A Stripe subscription event as Stripe sends it (the fields this handler reads).
fn subscription_event(event_id: &str, event_type: &str, created: i64, status: &str) -> String {
    json!({
        "id": event_id, "object": "event", "type": event_type, "created": created,
        "livemode": false,
        "data": {"object": {
            "id": "sub_1", "object": "subscription", "customer": "cus_1", "status": status,
            "items": {"data": [{"price": {"id": "price_pro"}}]}
        }}
    })
    .to_string()
}

/// POSTs a signed event; the HTTP status. Retries while the ingress is still binding.
async fn send(listen: SocketAddr, body: &str) -> u16 {
    let secret = Secret::new(SECRET.as_bytes().to_vec());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    let signature = inbound_core::verify::sign_stripe(
        &secret,
        i64::try_from(now).expect("time"),
        body.as_bytes(),
    );
    let request = format!(
        "POST /webhooks/stripe-test HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n\
         Stripe-Signature: {signature}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let started = Instant::now();
    loop {
        if let Ok(mut stream) = tokio::net::TcpStream::connect(listen).await {
            stream.write_all(request.as_bytes()).await.expect("write");
            let mut answer = String::new();
            stream.read_to_string(&mut answer).await.expect("read");
            let status = answer
                .split(' ')
                .nth(1)
                .and_then(|code| code.parse().ok())
                .expect("an HTTP status line");
            return status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "ingress never listened"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the receipt of `event_id` is finished; its `(outcome, reason)`.
async fn outcome(pool: &PgPool, event_id: &str) -> (String, Option<String>) {
    let started = Instant::now();
    loop {
        let row: Option<(String, Option<String>, Option<String>)> = sqlx::query_as(
            "SELECT status, outcome, outcome_reason FROM inbound.receipts WHERE event_id = $1",
        )
        .bind(event_id)
        .fetch_optional(pool)
        .await
        .expect("receipt");
        if let Some((status, outcome, reason)) = row
            && status != "pending"
        {
            return (outcome.unwrap_or(status), reason);
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{event_id} never finished"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn row(pool: &PgPool) -> (String, bool, String) {
    sqlx::query_as(
        "SELECT status, deleted, event_id FROM subscriptions_example.subscriptions
         WHERE tenant_id = 'acme' AND subscription_id = 'sub_1'",
    )
    .fetch_one(pool)
    .await
    .expect("the subscription row")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_events_never_regress_and_repeated_updates_are_not_duplicates() {
    let scratch = Scratch::new().await;
    let config = scratch.config("");
    let running = Running::start(&scratch, &config).await;
    let pool = &scratch.pool;
    // Stripe event ids are random: the ids below are chosen so that id order would get
    // each case wrong.
    let steps = [
        (
            "evt_5",
            "customer.subscription.updated",
            200,
            "active",
            "applied",
        ),
        // The creation arrives after an update of the same second, with a larger id.
        (
            "evt_9",
            "customer.subscription.created",
            200,
            "incomplete",
            "ignored",
        ),
        (
            "evt_3",
            "customer.subscription.updated",
            300,
            "past_due",
            "applied",
        ),
        // A second, legitimate update: a new event, not a duplicate.
        (
            "evt_1",
            "customer.subscription.updated",
            301,
            "active",
            "applied",
        ),
        // An older update delivered late never regresses the row.
        (
            "evt_8",
            "customer.subscription.updated",
            250,
            "past_due",
            "ignored",
        ),
        (
            "evt_2",
            "customer.subscription.deleted",
            400,
            "canceled",
            "applied",
        ),
        // After the deletion nothing changes the row, not even an update of that second.
        (
            "evt_7",
            "customer.subscription.updated",
            400,
            "active",
            "ignored",
        ),
        (
            "evt_6",
            "customer.subscription.updated",
            500,
            "active",
            "ignored",
        ),
    ];
    for (event_id, event_type, created, status, expected) in steps {
        let body = subscription_event(event_id, event_type, created, status);
        assert_eq!(send(running.listen, &body).await, 200, "{event_id}");
        let (outcome, reason) = outcome(pool, event_id).await;
        assert_eq!(outcome, expected, "{event_id}: {reason:?}");
    }
    assert_eq!(
        row(pool).await,
        ("canceled".to_owned(), true, "evt_2".to_owned())
    );
    let (_, reason) = outcome(pool, "evt_8").await;
    assert!(
        reason.is_some_and(|reason| reason.starts_with("stale:")),
        "the reason says why"
    );
    let (_, reason) = outcome(pool, "evt_6").await;
    assert!(
        reason.is_some_and(|reason| reason.contains("was deleted")),
        "the reason says why"
    );
    // A redelivery is a duplicate receipt at the ingress: nothing new to apply.
    let again = subscription_event("evt_3", "customer.subscription.updated", 300, "past_due");
    assert_eq!(send(running.listen, &again).await, 200);
    let receipts: i64 = sqlx::query_scalar("SELECT count(*) FROM inbound.receipts")
        .fetch_one(pool)
        .await
        .expect("count");
    assert_eq!(receipts, 8);
    running.stop().await;
    // Nothing of inbound's or the team's landed in public.
    let in_public: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = 'public' AND c.relkind IN ('r', 'S', 'i')",
    )
    .fetch_one(pool)
    .await
    .expect("catalog");
    assert_eq!(in_public, 0);
    scratch.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_refuses_routes_it_cannot_apply_and_a_dispatcher_needs_no_handlers() {
    let scratch = Scratch::new().await;
    let config = scratch.config(", options = { notfy = true }");
    let error = Worker::builder(worker_args(&scratch, &config))
        .handler(SUBSCRIPTIONS_SYNC, handler())
        .run(std::future::pending())
        .await
        .expect_err("refused");
    let error = format!("{error:#}");
    assert!(
        error.contains(r#"routes."customer.subscription.*".options: unknown option "notfy""#),
        "{error}"
    );
    // The stock worker has no subscriptions.sync: it names the route instead of starting.
    let config = scratch.config("");
    let error = Worker::builder(worker_args(&scratch, &config))
        .run(std::future::pending())
        .await
        .expect_err("refused");
    let error = format!("{error:#}");
    assert!(
        error.contains(r#"routes."customer.subscription.*".handler: handler "subscriptions.sync" is not registered"#),
        "{error}"
    );
    // A dispatcher applies no transition: it starts whatever the routes name.
    let mut dispatcher = worker_args(&scratch, &config);
    dispatcher.role = inbound_worker::Role::Effects;
    Worker::builder(dispatcher)
        .run(async {})
        .await
        .expect("an effects-only stock worker starts beside a custom one");
    scratch.drop().await;
}
