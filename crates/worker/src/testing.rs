//! The testing kit for a team's handlers (feature `testing`): what every team's test of
//! its worker needs and would otherwise copy.
//!
//! - [`ScratchDatabase`]: a database of its own with inbound's migrations and the team's,
//!   dropped when the value is (also when an assertion fails first).
//! - [`TestStack`]: inbound's ingress and the team's worker running in-process on it,
//!   with a configuration whose `env:` secrets the kit supplies ([`TestStack::start`]):
//!   [`TestStack::send`] signs a delivery as the integration's sender would and posts it;
//!   [`TestStack::outcome`] waits until its receipt is finished.
//! - [`apply`]: one handler applied to one payload in one transaction, committed only
//!   when the verdict is `Applied` (the worker's rule), without any process running.
//!
//! `examples/custom-worker`'s tests are written with it. The database comes from
//! `DATABASE_URL` (a server the test may create databases on), else the local server.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use inbound_core::config::Config;
use inbound_core::keys::ReceiptId;
use inbound_core::states::{ReceiptOutcome, ReceiptStatus};
use inbound_store::handlers::{Handler, HandlerError, HandlerInput, Transition};
use inbound_store::{self as store, Schema, admin};
use sqlx::migrate::MigrateDatabase;
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{ConnectOptions, Connection};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::oneshot;

use crate::{WorkerArgs, WorkerBuilder};

/// The server the kit creates its databases on: `DATABASE_URL`, else the local one.
fn admin_url() -> String {
    std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

/// A database of its own for one test, with inbound's migrations and the team's; dropped
/// (`WITH (FORCE)`) when the value is.
pub struct ScratchDatabase {
    url: String,
    pool: PgPool,
}

impl ScratchDatabase {
    /// Creates the database and applies inbound's migrations, then each of
    /// `migrations` (`(schema, migrator)`, as [`WorkerBuilder::migrations`] takes them).
    pub async fn create(migrations: &[(&str, &'static Migrator)]) -> anyhow::Result<Self> {
        let admin = admin_url();
        let name = format!(
            "inbound_kit_{}_{}",
            std::process::id(),
            rand::random::<u32>()
        );
        let admin_options: PgConnectOptions = admin
            .parse()
            .context("DATABASE_URL is not a postgres:// URL")?;
        let url = admin_options
            .clone()
            .database(&name)
            .to_url_lossy()
            .to_string();
        sqlx::Postgres::create_database(&url)
            .await
            .context("cannot create the scratch database (is PostgreSQL at DATABASE_URL?)")?;
        // Sessions as inbound's have them: its schema first on the search_path.
        let target = store::SessionTarget {
            schema: Schema::default(),
            pooler: store::Pooler::None,
        };
        let options = store::connect_options(&url, &target)?;
        let database = Self {
            pool: PgPoolOptions::new()
                .max_connections(4)
                .connect_with(options.clone())
                .await
                .context("cannot connect to the scratch database")?,
            url,
        };
        store::migrate(&database.pool, &Schema::default())
            .await
            .context("inbound's migrations")?;
        for (schema, migrator) in migrations {
            let schema: Schema = schema.parse().map_err(|error| anyhow::anyhow!("{error}"))?;
            store::migrate_schema(&options, migrator, &schema)
                .await
                .with_context(|| format!("the migrations of schema {schema}"))?;
        }
        Ok(database)
    }

    /// Its URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A pool on it, for the test's own reads.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }
}

impl Drop for ScratchDatabase {
    fn drop(&mut self) {
        // Drop runs outside async: a thread of its own, with a runtime of its own. The
        // pool's connections belong to the test's runtime, which this drop blocks: they
        // are not closed from here (that would wait for that runtime), but ended by the
        // server (`WITH (FORCE)`).
        let url = self.url.clone();
        std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            runtime
                .block_on(sqlx::Postgres::force_drop_database(&url))
                .ok();
        })
        .join()
        .ok();
    }
}

/// How a receipt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// `done`, `quarantined` or `failed`.
    pub status: ReceiptStatus,
    /// `applied`, `duplicate` or `ignored` for a done receipt.
    pub outcome: Option<ReceiptOutcome>,
    /// Why (a verdict's reason, or the last error; at most 200 characters).
    pub reason: Option<String>,
}

/// inbound's ingress and a team's worker, in-process on a [`ScratchDatabase`].
pub struct TestStack {
    database: ScratchDatabase,
    config: Config,
    listen: SocketAddr,
    directory: PathBuf,
    stops: Vec<oneshot::Sender<()>>,
    tasks: Vec<tokio::task::JoinHandle<anyhow::Result<()>>>,
}

impl TestStack {
    /// Starts the ingress and the worker `configure` builds (as its `main` does: the
    /// handlers and migrations it registers) on a new scratch database, with the team's
    /// migrations applied. `config_toml` is the configuration; each `env:NAME` reference
    /// in it takes its value from `secrets` (`(NAME, value)`), the environment aside.
    pub async fn start(
        config_toml: &str,
        secrets: &[(&str, &str)],
        configure: impl FnOnce(WorkerBuilder) -> WorkerBuilder,
    ) -> anyhow::Result<Self> {
        let collected = configure(WorkerBuilder::registrations());
        let migrations: Vec<(String, &'static Migrator)> = collected
            .registered_migrations()
            .iter()
            .map(|team| (team.schema.as_str().to_owned(), team.migrator))
            .collect();
        let borrowed: Vec<(&str, &'static Migrator)> = migrations
            .iter()
            .map(|(schema, migrator)| (schema.as_str(), *migrator))
            .collect();
        let database = ScratchDatabase::create(&borrowed).await?;
        let directory = std::env::temp_dir().join(format!("inbound-kit-{}", rand::random::<u64>()));
        std::fs::create_dir_all(&directory).context("scratch directory")?;
        // Each secret in a file of its own, referenced as `file:` instead of `env:`.
        let mut text = config_toml.to_owned();
        for (name, value) in secrets {
            let path = directory.join(name);
            std::fs::write(&path, value).context("secret file")?;
            text = text.replace(
                &format!("\"env:{name}\""),
                &format!("\"file:{}\"", path.display()),
            );
        }
        let config_path = directory.join("inbound.toml");
        std::fs::write(&config_path, &text).context("configuration file")?;
        let config = Config::load(&config_path)?;
        let listen = free_port()?;
        let ingress = inbound_ingress::IngressArgs::try_parse_from([
            "inbound-ingress".to_owned(),
            format!("--config={}", config_path.display()),
            format!("--database-url={}", database.url),
            format!("--listen={listen}"),
            format!("--metrics-listen={}", free_port()?),
        ])?;
        let worker = WorkerArgs::try_parse_from([
            "worker".to_owned(),
            format!("--config={}", config_path.display()),
            format!("--database-url={}", database.url),
            format!("--metrics-listen={}", free_port()?),
            "--poll-interval-ms=50".to_owned(),
            "--shutdown-grace-secs=2".to_owned(),
        ])?;
        let worker = collected.with_args(worker);
        let (ingress_stop, ingress_stopped) = oneshot::channel::<()>();
        let (worker_stop, worker_stopped) = oneshot::channel::<()>();
        let tasks = vec![
            tokio::spawn(inbound_ingress::run(ingress, async move {
                ingress_stopped.await.ok();
            })),
            tokio::spawn(worker.run(async move {
                worker_stopped.await.ok();
            })),
        ];
        let mut stack = Self {
            database,
            config,
            listen,
            directory,
            stops: vec![ingress_stop, worker_stop],
            tasks,
        };
        stack.wait_until_listening().await?;
        Ok(stack)
    }

    /// The scratch database.
    pub fn database(&self) -> &ScratchDatabase {
        &self.database
    }

    /// A pool on the scratch database.
    pub fn pool(&self) -> &PgPool {
        self.database.pool()
    }

    /// Posts `body` to `integration`'s endpoint, signed as its sender signs it (with its
    /// first secret, now); `event_type` for the providers that send it in a header
    /// (GitHub, Shopify, a configured header). The HTTP status.
    pub async fn send(
        &self,
        integration: &str,
        body: &str,
        event_type: Option<&str>,
    ) -> anyhow::Result<u16> {
        let configured = self
            .config
            .integration(integration)
            .with_context(|| format!("no integration {integration:?} in the configuration"))?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_secs();
        // A GitHub hook that sends forms sends the JSON in its `payload` field.
        let (content_type, body) = inbound_core::sender::body_as_sent(configured, body);
        let headers = inbound_core::sender::signed_headers(
            configured,
            body.as_bytes(),
            i64::try_from(now)?,
            event_type,
        )?;
        let mut request = format!(
            "POST /webhooks/{integration} HTTP/1.1\r\nHost: inbound-test\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n",
            body.len()
        );
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str("\r\n");
        request.push_str(&body);
        let mut stream = tokio::net::TcpStream::connect(self.listen).await?;
        stream.write_all(request.as_bytes()).await?;
        let mut answer = Vec::new();
        tokio::time::timeout(Duration::from_secs(15), stream.read_to_end(&mut answer))
            .await
            .context("the ingress did not answer within 15 s")??;
        let answer = String::from_utf8_lossy(&answer);
        answer
            .split(' ')
            .nth(1)
            .and_then(|code| code.parse().ok())
            .with_context(|| format!("not an HTTP answer: {answer:?}"))
    }

    /// Waits (at most `limit`) until the receipt of `event_id` is no longer pending.
    pub async fn outcome(&self, event_id: &str, limit: Duration) -> anyhow::Result<Outcome> {
        let started = Instant::now();
        loop {
            let mut connection = self.pool().acquire().await?;
            let found = admin::receipts_by_event_id(&mut connection, event_id).await?;
            drop(connection);
            if let Some(receipt) = found.into_iter().next()
                && receipt.status != ReceiptStatus::Pending
            {
                return Ok(Outcome {
                    status: receipt.status,
                    outcome: receipt.outcome,
                    reason: receipt.reason,
                });
            }
            if started.elapsed() > limit {
                bail!("the receipt of {event_id} was not finished within {limit:?}");
            }
            self.fail_if_stopped()?;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Stops both, each drained; an error when either ended with one. The database stays
    /// until the stack is dropped, for the test's reads after the stop.
    pub async fn stop(&mut self) -> anyhow::Result<()> {
        for stop in self.stops.drain(..) {
            stop.send(()).ok();
        }
        for task in self.tasks.drain(..) {
            task.await??;
        }
        Ok(())
    }

    /// Waits until the ingress listens (10 s at most), failing if a service stopped.
    async fn wait_until_listening(&mut self) -> anyhow::Result<()> {
        let started = Instant::now();
        while tokio::net::TcpStream::connect(self.listen).await.is_err() {
            self.fail_if_stopped()?;
            if started.elapsed() > Duration::from_secs(10) {
                bail!("the ingress did not listen within 10 s");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }

    fn fail_if_stopped(&self) -> anyhow::Result<()> {
        if self.tasks.iter().any(tokio::task::JoinHandle::is_finished) {
            bail!("the ingress or the worker stopped (its log line says why)");
        }
        Ok(())
    }
}

impl Drop for TestStack {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
        std::fs::remove_dir_all(&self.directory).ok();
    }
}

/// A free port on 127.0.0.1.
fn free_port() -> anyhow::Result<SocketAddr> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?)
}

/// Applies `handler` to one `payload` of `integration` (its route for `event_type`
/// giving the sink and options) in one transaction on `pool`, committed only when the
/// verdict is `Applied` — as the worker would, without any process. The effect intents
/// are returned in the transition, not recorded.
pub async fn apply(
    pool: &PgPool,
    config: &Config,
    integration: &str,
    handler: &dyn Handler,
    event_type: &str,
    payload: &serde_json::Value,
) -> anyhow::Result<Result<Transition, HandlerError>> {
    let integration = config
        .integration(integration)
        .with_context(|| format!("no integration {integration:?} in the configuration"))?;
    let (_, route) = inbound_core::event::route_for_type(integration, event_type)
        .with_context(|| format!("no route of {} takes {event_type:?}", integration.id))?;
    let event_id = payload
        .get("id")
        .and_then(serde_json::Value::as_str)
        .unwrap_or("evt_kit");
    let input = HandlerInput {
        receipt_id: ReceiptId(0),
        integration,
        event_id,
        event_type,
        source_scope: &integration.id,
        delivery: None,
        payload,
        sink: route.sink(),
        sinks: &route.sinks,
        options: &route.options,
    };
    let mut connection = pool.acquire().await?;
    let mut transaction = connection.begin().await?;
    let transition = handler.apply(&mut transaction, input).await;
    if matches!(&transition, Ok(transition) if transition.is_applied()) {
        transaction.commit().await?;
    } else {
        transaction.rollback().await?;
    }
    Ok(transition)
}
