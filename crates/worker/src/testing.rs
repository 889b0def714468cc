//! The testing kit for a team's handlers (feature `testing`): what every team's test of
//! its worker needs and would otherwise copy.
//!
//! - [`ScratchDatabase`]: a database of its own with inbound's migrations and the team's,
//!   dropped when the value is (also when an assertion fails first).
//! - [`TestStack`]: inbound's ingress and the team's worker running in-process on it,
//!   started from values (the configuration parsed with the kit's secrets, the worker's
//!   settings the test's to set, listeners bound by the kit): [`TestStack::send`] signs a
//!   delivery as the integration's sender would, posts it and returns the ingress's
//!   [`Verdict`]; [`TestStack::outcome`] waits until its receipt is finished (and says at
//!   once when none was stored); [`TestStack::drain`] waits until nothing is claimable.
//!   [`TestStack::builder`] sets the worker's settings, runs each process as the roles
//!   `migrate --create-roles` makes (so the tests cover least privilege) and names the
//!   scratch databases.
//! - [`apply`]: one handler applied to one payload in one transaction, committed only
//!   when the verdict is `Applied` (the worker's rule), without any process running.
//!
//! The server the kit creates databases on is `INBOUND_TEST_DATABASE_URL`, else
//! `DATABASE_URL`, else the local one (`postgres://postgres@127.0.0.1:5432/postgres`): a
//! role that may create databases (`CREATEDB`) — and, for
//! [`TestStackBuilder::as_roles`], roles (`CREATEROLE`). A worker's own `DATABASE_URL`
//! (its least-privilege role) cannot: set `INBOUND_TEST_DATABASE_URL` beside it.
//!
//! ```no_run
//! # async fn example() -> anyhow::Result<()> {
//! use std::time::Duration;
//! use inbound_worker::testing::{TestStack, Verdict};
//!
//! let config = r#"
//! [[integration]]
//! id = "stripe-live"
//! provider = "stripe"
//! tenant = "acme"
//! secrets = ["env:STRIPE_SECRET"]
//! [integration.routes]
//! "customer.created" = { handler = "forward", sink = "audit" }
//! [[sink]]
//! id = "audit"
//! url = "http://127.0.0.1:9/audit"
//! "#;
//! let stack = TestStack::builder(config, &[("STRIPE_SECRET", "whsec_dGVzdA==")], |worker| worker)
//!     .worker_settings(|settings| settings.concurrency(1))
//!     .start()
//!     .await?;
//! let body = r#"{"id":"evt_1","type":"customer.created","livemode":true,"data":{"object":{}}}"#;
//! assert!(matches!(stack.send("stripe-live", body, None).await?, Verdict::Accepted { .. }));
//! let outcome = stack.outcome("evt_1", Duration::from_secs(10)).await?;
//! println!("{outcome:?}");
//! # Ok(())
//! # }
//! ```

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
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

use crate::{RunningWorker, WorkerBuilder, WorkerSettings, WorkerSettingsBuilder};

/// The server the kit creates its databases (and roles) on: `INBOUND_TEST_DATABASE_URL`,
/// else `DATABASE_URL`, else the local one.
fn admin_url() -> String {
    std::env::var("INBOUND_TEST_DATABASE_URL")
        .or_else(|_| std::env::var("DATABASE_URL"))
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

/// A database of its own for one test, with inbound's migrations and the team's; dropped
/// (`WITH (FORCE)`) when the value is.
pub struct ScratchDatabase {
    url: String,
    pool: PgPool,
}

impl ScratchDatabase {
    /// Creates a database named `inbound_kit_<pid>_<random>` and applies inbound's
    /// migrations, then each of `migrations` (`(schema, migrator)`, as
    /// [`WorkerBuilder::migrations`] takes them).
    pub async fn create(migrations: &[(&str, &'static Migrator)]) -> anyhow::Result<Self> {
        Self::create_named("inbound_kit_", migrations).await
    }

    /// [`ScratchDatabase::create`], its name starting with `prefix` (lower-case letters,
    /// digits and `_`, at most 40), then the process id and a random number.
    pub async fn create_named(
        prefix: &str,
        migrations: &[(&str, &'static Migrator)],
    ) -> anyhow::Result<Self> {
        let valid = !prefix.is_empty()
            && prefix.len() <= 40
            && prefix
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        anyhow::ensure!(
            valid,
            "database prefix {prefix:?}: use 1 to 40 lower-case letters, digits or _"
        );
        let admin = admin_url();
        let name = format!("{prefix}{}_{}", std::process::id(), rand::random::<u32>());
        let admin_options: PgConnectOptions = admin
            .parse()
            .context("INBOUND_TEST_DATABASE_URL (or DATABASE_URL) is not a postgres:// URL")?;
        let url = admin_options
            .clone()
            .database(&name)
            .to_url_lossy()
            .to_string();
        if let Err(error) = sqlx::Postgres::create_database(&url).await {
            bail!(
                "cannot create the scratch database {name}: {error} — the kit needs a role that may create databases (CREATEDB) at INBOUND_TEST_DATABASE_URL, else DATABASE_URL (a worker's own role cannot)"
            );
        }
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
    /// `applied`, `duplicate` or `ignored` (by its handler) or `closed` (by a person) for
    /// a done receipt.
    pub outcome: Option<ReceiptOutcome>,
    /// Why (a verdict's reason, or the last error; at most 200 characters).
    pub reason: Option<String>,
}

/// What the ingress answered a delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verdict {
    /// Stored (`200 {"status":"accepted"}`): its receipt.
    Accepted {
        /// The receipt's id.
        receipt_id: i64,
    },
    /// Its receipt key (or content key) is held already: nothing stored.
    Duplicate,
    /// Verified, but no route takes it, or it is out of the integration's scope: nothing
    /// stored.
    Ignored,
    /// A handshake answered, not an event: a URL-verification challenge (Slack's
    /// `url_verification`, Zoom's `endpoint.url_validation`) echoed in a 200; nothing
    /// stored.
    Handshake {
        /// The answer's body, as the provider reads it.
        body: String,
    },
    /// Answered otherwise: the status and the body's `error` (`unauthorized`,
    /// `malformed`, `unsupported_media_type`, …).
    Refused {
        /// The HTTP status.
        status: u16,
        /// The body's `error`, or the body when it has none.
        error: String,
    },
}

/// The processes' roles of a [`TestStack`] run [`TestStackBuilder::as_roles`]; dropped
/// with the stack.
struct TestRoles {
    prefix: store::roles::RolePrefix,
    admin_url: String,
}

impl TestRoles {
    /// The URL of `database_url` as `process`'s role.
    fn url(&self, database_url: &str, process: store::roles::Process) -> anyhow::Result<String> {
        let options: PgConnectOptions = database_url.parse()?;
        Ok(options
            .username(&self.prefix.role(process))
            .to_url_lossy()
            .to_string())
    }
}

impl Drop for TestRoles {
    fn drop(&mut self) {
        let admin = self.admin_url.clone();
        let roles: Vec<String> = store::roles::Process::ALL
            .iter()
            .map(|&process| self.prefix.role(process))
            .collect();
        std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            runtime.block_on(async move {
                let Ok(mut connection) = sqlx::PgConnection::connect(&admin).await else {
                    return;
                };
                for role in roles {
                    // A role owns nothing and holds grants in the dropped database only.
                    #[expect(
                        clippy::disallowed_methods,
                        reason = "Runtime SQL: a role name the kit made (letters, digits, _)."
                    )]
                    let _ =
                        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("DROP ROLE IF EXISTS {role}")))
                            .execute(&mut connection)
                            .await;
                }
            });
        })
        .join()
        .ok();
    }
}

/// How to start a [`TestStack`]: [`TestStack::builder`].
#[must_use]
pub struct TestStackBuilder<'a> {
    config_toml: &'a str,
    secrets: &'a [(&'a str, &'a str)],
    worker: WorkerBuilder,
    settings: WorkerSettingsBuilder,
    as_roles: bool,
    database_prefix: String,
}

impl TestStackBuilder<'_> {
    /// The worker's settings, adjusted from the kit's (a 50 ms poll, a 2 s drain, and the
    /// rest as the flags' defaults): `|settings| settings.concurrency(1).batch_size(1)`.
    pub fn worker_settings(
        mut self,
        adjust: impl FnOnce(WorkerSettingsBuilder) -> WorkerSettingsBuilder,
    ) -> Self {
        self.settings = adjust(self.settings);
        self
    }

    /// Runs the ingress and the worker as the roles `migrate --create-roles` makes (the
    /// team's schemas granted to the worker role), as production does: a handler that
    /// writes where its role may not fails here, not in production. Needs `CREATEROLE` on
    /// the kit's server and a server that lets those roles in without a password (trust,
    /// as a local test server has it).
    pub fn as_roles(mut self) -> Self {
        self.as_roles = true;
        self
    }

    /// Names the scratch database `{prefix}{pid}_{random}` (default `inbound_kit_`).
    pub fn database_prefix(mut self, prefix: &str) -> Self {
        prefix.clone_into(&mut self.database_prefix);
        self
    }

    /// Creates the scratch database with the migrations the worker carries, then starts
    /// the ingress and the worker on it.
    pub async fn start(self) -> anyhow::Result<TestStack> {
        let migrations: Vec<(String, &'static Migrator)> = self
            .worker
            .registered_migrations()
            .iter()
            .map(|team| (team.schema.as_str().to_owned(), team.migrator))
            .collect();
        let borrowed: Vec<(&str, &'static Migrator)> = migrations
            .iter()
            .map(|(schema, migrator)| (schema.as_str(), *migrator))
            .collect();
        let database = ScratchDatabase::create_named(&self.database_prefix, &borrowed).await?;
        let secrets = self.secrets;
        let config = Config::from_toml(self.config_toml, &|name| {
            secrets
                .iter()
                .find(|(secret, _)| *secret == name)
                .map(|(_, value)| (*value).to_owned())
                .or_else(|| std::env::var(name).ok())
        })
        .context("the configuration")?;
        let settings = self.settings.build()?;
        let (roles, ingress_url, worker_url) = if self.as_roles {
            let roles = create_roles(&database, &migrations).await?;
            let ingress = roles.url(&database.url, store::roles::Process::Ingress)?;
            let worker = roles.url(
                &database.url,
                if settings.role() == crate::Role::Effects {
                    store::roles::Process::Dispatcher
                } else {
                    store::roles::Process::Worker
                },
            )?;
            (Some(roles), ingress, worker)
        } else {
            (None, database.url.clone(), database.url.clone())
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .context("a port for the ingress")?;
        let ingress_settings = inbound_ingress::IngressSettings::builder()
            .shutdown_grace(Duration::from_secs(2))
            .build()?;
        let ingress = inbound_ingress::start(
            config.clone(),
            ingress_settings,
            &ingress_url,
            listener,
            None,
        )
        .await
        .context("the ingress")?;
        let claims = settings
            .role()
            .runs_receipts()
            .then(|| settings.integrations().map(<[String]>::to_vec));
        let worker = self
            .worker
            .start(config.clone(), settings, &worker_url, None)
            .await
            .context("the worker")?;
        Ok(TestStack {
            claims,
            listen: ingress.local_addr(),
            ingress: Some(ingress),
            worker: Some(worker),
            config,
            _roles: roles,
            database,
        })
    }
}

/// Creates the per-process roles (a prefix of their own: roles are the server's, not the
/// database's) and grants them inbound's schema and the team's.
async fn create_roles(
    database: &ScratchDatabase,
    migrations: &[(String, &'static Migrator)],
) -> anyhow::Result<TestRoles> {
    let prefix = store::roles::RolePrefix::parse(&format!("kit{}_", rand::random::<u32>()))
        .map_err(|error| anyhow::anyhow!(error))?;
    let business: Vec<Schema> = migrations
        .iter()
        .map(|(schema, _)| schema.parse())
        .collect::<Result<_, _>>()
        .map_err(|error| anyhow::anyhow!("{error}"))?;
    let roles = TestRoles {
        prefix,
        admin_url: admin_url(),
    };
    let mut connection = database.pool.acquire().await?;
    store::roles::create_roles(
        &mut connection,
        &Schema::default(),
        &roles.prefix,
        &business,
    )
    .await
    .context("cannot create the processes' roles (the kit's role needs CREATEROLE)")?;
    Ok(roles)
}

/// The receipts the stack's worker claims, which [`TestStack::drain`] waits for: those
/// of these integrations (`Some(None)`: all; `None`: its role claims none).
type Claims = Option<Option<Vec<String>>>;

/// inbound's ingress and a team's worker, in-process on a [`ScratchDatabase`].
pub struct TestStack {
    // Dropped in this order: the processes, the database, then the roles (a role with
    // grants in a database that still exists cannot be dropped).
    ingress: Option<inbound_ingress::RunningIngress>,
    worker: Option<RunningWorker>,
    config: Config,
    claims: Claims,
    listen: SocketAddr,
    database: ScratchDatabase,
    /// Held only to be dropped last (the roles go with it).
    _roles: Option<TestRoles>,
}

impl TestStack {
    /// Starts the ingress and the worker `configure` builds (as its `main` does: the
    /// handlers and migrations it registers) on a new scratch database, with the team's
    /// migrations applied and the kit's settings. `config_toml` is the configuration;
    /// each `env:NAME` reference in it takes its value from `secrets` (`(NAME, value)`),
    /// else from the environment.
    pub async fn start(
        config_toml: &str,
        secrets: &[(&str, &str)],
        configure: impl FnOnce(WorkerBuilder) -> WorkerBuilder,
    ) -> anyhow::Result<Self> {
        Self::builder(config_toml, secrets, configure).start().await
    }

    /// [`TestStack::start`] with the worker's settings, roles and database name to set.
    pub fn builder<'a>(
        config_toml: &'a str,
        secrets: &'a [(&'a str, &'a str)],
        configure: impl FnOnce(WorkerBuilder) -> WorkerBuilder,
    ) -> TestStackBuilder<'a> {
        TestStackBuilder {
            config_toml,
            secrets,
            worker: configure(WorkerBuilder::new()),
            settings: WorkerSettings::builder()
                .poll_interval(Duration::from_millis(50))
                .shutdown_grace(Duration::from_secs(2))
                .worker_id("kit-worker"),
            as_roles: false,
            database_prefix: "inbound_kit_".to_owned(),
        }
    }

    /// The scratch database.
    pub fn database(&self) -> &ScratchDatabase {
        &self.database
    }

    /// A pool on the scratch database.
    pub fn pool(&self) -> &PgPool {
        self.database.pool()
    }

    /// The configuration the ingress and the worker run.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Where the ingress receives webhooks.
    pub fn ingress_addr(&self) -> SocketAddr {
        self.listen
    }

    /// Posts `body` to `integration`'s endpoint, signed as its sender signs it (with its
    /// first secret, now); `event_type` for the providers that send it in a header
    /// (GitHub, Shopify, a configured header). What the ingress answered.
    pub async fn send(
        &self,
        integration: &str,
        body: &str,
        event_type: Option<&str>,
    ) -> anyhow::Result<Verdict> {
        let configured = self
            .config
            .integration(integration)
            .with_context(|| format!("no integration {integration:?} in the configuration"))?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_secs();
        // A GitHub hook that sends forms sends the JSON in its `payload` field.
        let (content_type, body) = inbound_core::sender::body_as_sent(configured, body);
        let headers = inbound_core::provider::signed_headers(
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
        verdict_of(&String::from_utf8_lossy(&answer))
    }

    /// Waits (at most `limit`) until the receipt of `event_id` is no longer pending. When
    /// no receipt holds `event_id` — the ingress answered `ignored` or a refusal, or
    /// nothing was sent — it says so at once rather than waiting out `limit`; a
    /// `duplicate` is the receipt that holds the event already. An event id several
    /// receipts hold (two integrations, or two scopes of one: two shops) is refused as
    /// ambiguous: [`TestStack::receipt_outcome`] takes the receipt `send` answered with.
    pub async fn outcome(&self, event_id: &str, limit: Duration) -> anyhow::Result<Outcome> {
        let started = Instant::now();
        loop {
            let mut connection = self.pool().acquire().await?;
            let found = admin::receipts_by_event_id(&mut connection, event_id).await?;
            drop(connection);
            if found.len() > 1 {
                let holders: Vec<String> = found
                    .iter()
                    .map(|receipt| format!("{} of {}", receipt.id, receipt.integration))
                    .collect();
                bail!(
                    "{event_id} is held by several receipts ({}): which one is meant is ambiguous; receipt_outcome takes the receipt send answered with",
                    holders.join(", ")
                );
            }
            let Some(receipt) = found.into_iter().next() else {
                bail!(
                    "no receipt holds {event_id}: the ingress stored nothing for it (send says what it answered: duplicate, ignored or a refusal)"
                );
            };
            if receipt.status != ReceiptStatus::Pending {
                return Ok(Outcome {
                    status: receipt.status,
                    outcome: receipt.outcome,
                    reason: receipt.reason,
                });
            }
            if started.elapsed() > limit {
                bail!("the receipt of {event_id} was still pending after {limit:?}");
            }
            self.fail_if_stopped()?;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits (at most `limit`) until the receipt `receipt_id` (what `send` answered
    /// `Accepted` with) is no longer pending; an error at once when no receipt has it.
    pub async fn receipt_outcome(
        &self,
        receipt_id: i64,
        limit: Duration,
    ) -> anyhow::Result<Outcome> {
        let started = Instant::now();
        loop {
            let mut connection = self.pool().acquire().await?;
            let found =
                admin::receipt_detail(&mut connection, inbound_core::keys::ReceiptId(receipt_id))
                    .await?;
            drop(connection);
            let Some(receipt) = found else {
                bail!("no receipt has id {receipt_id}");
            };
            if receipt.status != ReceiptStatus::Pending {
                let reason = receipt.outcome_reason.or(receipt.last_error);
                return Ok(Outcome {
                    status: receipt.status,
                    outcome: receipt.outcome,
                    reason: reason.map(|reason| reason.chars().take(200).collect()),
                });
            }
            if started.elapsed() > limit {
                bail!("receipt {receipt_id} was still pending after {limit:?}");
            }
            self.fail_if_stopped()?;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits (at most `limit`) until no receipt the stack's worker claims is claimable
    /// or being applied: every receipt of its integrations is finished or waiting out a
    /// retry delay (none for a worker whose role dispatches effects only). Send a burst,
    /// drain, then read the final state, which does not depend on the order the worker
    /// applied them in. Effects are not waited for: one towards a sink that is down
    /// stays due for as long as its breaker is open; read them with the pool.
    pub async fn drain(&self, limit: Duration) -> anyhow::Result<()> {
        let started = Instant::now();
        loop {
            let mut connection = self.pool().acquire().await?;
            let receipts = match &self.claims {
                Some(integrations) => {
                    admin::claimable_or_leased(&mut connection, integrations.as_deref()).await?
                }
                None => 0,
            };
            drop(connection);
            if receipts == 0 {
                return Ok(());
            }
            if started.elapsed() > limit {
                bail!("{receipts} receipt(s) still claimable or being applied after {limit:?}");
            }
            self.fail_if_stopped()?;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Stops both, each drained; an error when either ended with one. The database stays
    /// until the stack is dropped, for the test's reads after the stop.
    pub async fn stop(&mut self) -> anyhow::Result<()> {
        let ingress = match self.ingress.take() {
            Some(ingress) => ingress.shutdown().await,
            None => Ok(()),
        };
        let worker = match self.worker.take() {
            Some(worker) => worker.shutdown().await,
            None => Ok(()),
        };
        ingress.and(worker)
    }

    /// An error when the stack was stopped, or when the ingress or the worker ended by
    /// itself (a session check that refused the database): waiting on would only wait out
    /// the limit. `stop` returns how it ended.
    fn fail_if_stopped(&self) -> anyhow::Result<()> {
        match (&self.ingress, &self.worker) {
            (None, _) | (_, None) => bail!("the stack was stopped"),
            (Some(ingress), _) if ingress.is_finished() => {
                bail!("the ingress ended by itself: stop() returns why")
            }
            (_, Some(worker)) if worker.is_finished() => {
                bail!("the worker ended by itself: stop() returns why")
            }
            _ => Ok(()),
        }
    }
}

/// What an HTTP answer of the ingress says.
fn verdict_of(answer: &str) -> anyhow::Result<Verdict> {
    let status: u16 = answer
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .with_context(|| format!("not an HTTP answer: {answer:?}"))?;
    let body = answer.split("\r\n\r\n").nth(1).unwrap_or_default();
    let json: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    Ok(match (status, json["status"].as_str()) {
        (200..=299, Some("accepted")) => Verdict::Accepted {
            receipt_id: json["receipt_id"]
                .as_i64()
                .with_context(|| format!("an accepted answer without its receipt: {body}"))?,
        },
        (200..=299, Some("duplicate")) => Verdict::Duplicate,
        (200..=299, Some("ignored")) => Verdict::Ignored,
        (200..=299, None)
            if json.get("challenge").is_some() || json.get("plainToken").is_some() =>
        {
            Verdict::Handshake {
                body: body.to_owned(),
            }
        }
        _ => Verdict::Refused {
            status,
            error: json["error"]
                .as_str()
                .map_or_else(|| body.to_owned(), str::to_owned),
        },
    })
}

/// Applies `handler` to one `payload` of `integration` (its route for `event_type`
/// giving the sink and options) in one transaction on `pool`, committed only when the
/// verdict is `Applied` — as the worker would, without any process. The effect intents
/// are returned in the transition, not recorded.
pub async fn apply(
    pool: &PgPool,
    config: &Config,
    integration: &str,
    handler: &impl Handler,
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
        // Applied alone, outside any subject's order.
        subject: None,
        ordered: false,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ingress_answer_is_read_as_its_verdict() {
        let answer = |status: &str, body: &str| {
            format!("HTTP/1.1 {status}\r\ncontent-type: application/json\r\n\r\n{body}")
        };
        assert_eq!(
            verdict_of(&answer("200 OK", r#"{"receipt_id":7,"status":"accepted"}"#)).ok(),
            Some(Verdict::Accepted { receipt_id: 7 })
        );
        assert_eq!(
            verdict_of(&answer("200 OK", r#"{"status":"duplicate"}"#)).ok(),
            Some(Verdict::Duplicate)
        );
        assert_eq!(
            verdict_of(&answer("200 OK", r#"{"status":"ignored"}"#)).ok(),
            Some(Verdict::Ignored)
        );
        assert_eq!(
            verdict_of(&answer("401 Unauthorized", r#"{"error":"unauthorized"}"#)).ok(),
            Some(Verdict::Refused {
                status: 401,
                error: "unauthorized".to_owned()
            })
        );
    }
}
