//! A fresh, migrated database per test, dropped when the test ends.

use std::sync::atomic::{AtomicU32, Ordering};

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{ConnectOptions, Connection};

/// The server tests run against: `DATABASE_URL` (`make test` sets it from
/// `scripts/ensure-postgres.sh`), else the local trust-auth cluster.
pub fn admin_url() -> String {
    std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

/// `url` with its database name replaced by `name` (query parameters kept).
pub fn with_database(url: &str, name: &str) -> String {
    let (base, query) = url
        .split_once('?')
        .map_or((url, None), |(base, query)| (base, Some(query)));
    let authority_start = base.find("://").map_or(0, |index| index + 3);
    let path_start = base[authority_start..]
        .find('/')
        .map_or(base.len(), |index| authority_start + index);
    let mut rebuilt = format!("{}/{name}", &base[..path_start]);
    if let Some(query) = query {
        rebuilt.push('?');
        rebuilt.push_str(query);
    }
    rebuilt
}

/// What test sessions see: inbound's schema, then the example domain's, so assertions
/// name tables unqualified as the binaries' own sessions (and the example handlers) see them.
pub const TEST_SEARCH_PATH: &str = "inbound, inbound_example";

/// `options` with the tests' search path.
pub fn test_session(options: PgConnectOptions) -> PgConnectOptions {
    options.options([("search_path", TEST_SEARCH_PATH)])
}

/// A pool on `url` for assertions, seeing what [`TEST_SEARCH_PATH`] names.
pub async fn connect(url: &str) -> PgPool {
    let options: PgConnectOptions = url.parse().expect("database URL parses");
    PgPoolOptions::new()
        .max_connections(4)
        .connect_with(test_session(options))
        .await
        .expect("connect to test database")
}

/// Applies inbound's migrations (schema `inbound`) and the example domain's.
pub async fn migrate_all(pool: &PgPool) {
    inbound_store::migrate(pool, &inbound_store::Schema::default())
        .await
        .expect("migrate test database");
    inbound_example::migrate(&pool.connect_options())
        .await
        .expect("migrate the example domain");
}

/// A database of its own for one test.
pub struct TestDatabase {
    admin_url: String,
    name: String,
    url: String,
    pool: PgPool,
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

impl TestDatabase {
    /// Creates and migrates a new database named after the test process, on the server
    /// at `DATABASE_URL`.
    pub async fn create() -> Self {
        Self::create_on(&admin_url()).await
    }

    /// Creates and migrates a new database on the server `admin_url` connects to.
    pub async fn create_on(admin_url: &str) -> Self {
        let database = Self::create_unmigrated_on(admin_url).await;
        migrate_all(&database.pool).await;
        database
    }

    /// Creates a new, empty database (no migration applied) on `DATABASE_URL`'s server.
    pub async fn create_unmigrated() -> Self {
        Self::create_unmigrated_on(&admin_url()).await
    }

    async fn create_unmigrated_on(admin_url: &str) -> Self {
        let name = format!(
            "inbound_test_{}_{}_{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst),
            rand::random::<u32>()
        );
        let admin: PgConnectOptions = admin_url.parse().expect("DATABASE_URL parses");
        let mut connection = admin.connect().await.unwrap_or_else(|error| {
            panic!("cannot connect to PostgreSQL at DATABASE_URL ({error}); is the server running, and does it take these credentials? `make test` starts it and finds a URL that does")
        });
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut connection)
            .await
            .expect("create test database");
        connection.close().await.ok();
        let options = admin.database(&name);
        let url = with_database(admin_url, &name);
        let pool = PgPoolOptions::new()
            .max_connections(4)
            .connect_with(test_session(options))
            .await
            .expect("connect to test database");
        Self {
            admin_url: admin_url.to_owned(),
            name,
            url,
            pool,
        }
    }

    /// The URL of this database.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A pool on this database, for assertions.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Rows in `receipts`.
    pub async fn receipt_count(&self) -> i64 {
        sqlx::query_scalar("SELECT count(*) FROM receipts")
            .fetch_one(&self.pool)
            .await
            .expect("count receipts")
    }

    /// Whether a receipt with this id exists (and has its queue row while pending).
    pub async fn receipt_is_committed(&self, receipt_id: i64) -> bool {
        sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM receipts r JOIN receipt_queue q ON q.receipt_id = r.id
                            WHERE r.id = $1 AND r.status = 'pending')",
        )
        .bind(receipt_id)
        .fetch_one(&self.pool)
        .await
        .expect("look up receipt")
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        run_while_dropping(vec![(
            self.admin_url.clone(),
            format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
        )]);
    }
}

/// Runs each `(url, statement)` in turn, best effort, from a `Drop` (outside any async
/// context: on a thread with its own small runtime).
fn run_while_dropping(statements: Vec<(String, String)>) {
    let runner = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .ok()?;
        runtime.block_on(async {
            for (url, statement) in statements {
                let Ok(options) = url.parse::<PgConnectOptions>() else {
                    continue;
                };
                let Ok(mut connection) = options.connect().await else {
                    continue;
                };
                sqlx::query(sqlx::AssertSqlSafe(statement))
                    .execute(&mut connection)
                    .await
                    .ok();
            }
            Some(())
        })
    });
    runner.join().ok();
}

/// The per-process roles (`inboundctl migrate --create-roles`) on one test database, under
/// a prefix of their own so that tests running side by side never share a role; revoked
/// and dropped when the test ends.
pub struct TestRoles {
    database_url: String,
    admin_url: String,
    prefix: inbound_store::roles::RolePrefix,
}

/// The password every test role logs in with (the server may ask for one).
const TEST_ROLE_PASSWORD: &str = "inbound-test-role";

impl TestRoles {
    /// Creates and grants the roles on `database` (the example domain granted to the
    /// worker), each with [`TEST_ROLE_PASSWORD`].
    pub async fn create(database: &TestDatabase) -> Self {
        use inbound_store::roles::{Process, RolePrefix};
        use inbound_store::{Schema, roles};
        let prefix = RolePrefix::parse(&format!(
            "t{}_{}_",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        ))
        .expect("test role prefix");
        let mut connection = database.pool().acquire().await.expect("connection");
        let example: Schema = inbound_example::SCHEMA.parse().expect("example schema");
        roles::create_roles(&mut connection, &Schema::default(), &prefix, &[example])
            .await
            .expect("create roles");
        for process in Process::ALL {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "ALTER ROLE {} PASSWORD '{TEST_ROLE_PASSWORD}'",
                prefix.role(process)
            )))
            .execute(&mut *connection)
            .await
            .expect("role password");
        }
        Self {
            database_url: database.url().to_owned(),
            admin_url: database.admin_url.clone(),
            prefix,
        }
    }

    /// The roles with `prefix` that a process under test creates on `database`, revoked
    /// and dropped when the test ends like [`TestRoles::create`]'s.
    pub fn dropped_when_done(
        database: &TestDatabase,
        prefix: inbound_store::roles::RolePrefix,
    ) -> Self {
        Self {
            database_url: database.url().to_owned(),
            admin_url: database.admin_url.clone(),
            prefix,
        }
    }

    /// The role of `process`.
    pub fn role(&self, process: inbound_store::roles::Process) -> String {
        self.prefix.role(process)
    }

    /// `url` logging in as `process`'s role.
    pub fn url(&self, url: &str, process: inbound_store::roles::Process) -> String {
        let (scheme, rest) = url.split_once("://").expect("URL has a scheme");
        let host = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
        format!(
            "{scheme}://{}:{TEST_ROLE_PASSWORD}@{host}",
            self.role(process)
        )
    }

    /// Every role with its password, e.g. for a pooler's user list.
    pub fn credentials(&self) -> Vec<(String, String)> {
        inbound_store::roles::Process::ALL
            .iter()
            .map(|&process| (self.role(process), TEST_ROLE_PASSWORD.to_owned()))
            .collect()
    }
}

impl Drop for TestRoles {
    fn drop(&mut self) {
        let list = inbound_store::roles::Process::ALL
            .iter()
            .map(|&process| self.prefix.role(process))
            .collect::<Vec<_>>()
            .join(", ");
        // Their grants live in the test database; the roles in the cluster.
        run_while_dropping(vec![
            (self.database_url.clone(), format!("DROP OWNED BY {list}")),
            (
                self.admin_url.clone(),
                format!("DROP ROLE IF EXISTS {list}"),
            ),
        ]);
    }
}
