//! `migrate` through the real binaries: beside a team's own tables, in a schema of its
//! own, as a role that is no superuser, and what it refuses before touching a database.

use super::*;

/// `public` tables of a team that already uses the database, with names inbound and its
/// example domain also use — a migration history among them, as a live installation of
/// another tool (or of an older inbound) keeps there.
const TEAM_TABLES: &str = "CREATE TABLE public.orders (order_no integer PRIMARY KEY, note text);
     CREATE TABLE public.receipts (receipt_no integer PRIMARY KEY);
     CREATE TABLE public.receipt_queue (receipt_no integer PRIMARY KEY);
     CREATE TABLE public._sqlx_migrations (version bigint PRIMARY KEY, description text NOT NULL,
         installed_on timestamptz NOT NULL DEFAULT now(), success boolean NOT NULL,
         checksum bytea NOT NULL, execution_time bigint NOT NULL);
     INSERT INTO public._sqlx_migrations (version, description, success, checksum, execution_time)
         SELECT n, 'theirs', true, '\\x00', 1 FROM generate_series(1, 10) n;
     INSERT INTO public.orders VALUES (1, 'the team''s own');";

async fn relations_in(pool: &sqlx::PgPool, schema: &str) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'S') ORDER BY 1",
    )
    .bind(schema)
    .fetch_all(pool)
    .await
    .expect("catalog")
}

async fn drop_database(name: &str) {
    let admin = sqlx::PgPool::connect(&admin_url()).await.expect("admin");
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
    )))
    .execute(&admin)
    .await
    .expect("drop");
}

/// The relations the team's tables put in `public` (see [`TEAM_TABLES`]).
const TEAM_RELATIONS: [&str; 4] = ["_sqlx_migrations", "orders", "receipt_queue", "receipts"];

/// A database of its own made by `migrate --create-database`, with the team's tables in
/// `public`: its name, its URL and a pool on it.
async fn a_teams_database() -> (String, String, sqlx::PgPool) {
    let name = format!("inbound_ctl_migrate_{}", rand::random::<u32>());
    let url = with_database(&admin_url(), &name);
    let created = inboundctl(
        &["migrate", "--create-database"],
        &[("DATABASE_URL".to_owned(), url.clone())],
    );
    assert!(created.status.success(), "{}", text(&created.stderr));
    let pool = sqlx::PgPool::connect(&url).await.expect("connect");
    // A database whose public schema already holds tables named like ours: only a schema
    // of our own makes migrating it possible at all.
    sqlx::raw_sql(TEAM_TABLES)
        .execute(&pool)
        .await
        .expect("team tables");
    (name, url, pool)
}

/// The stock worker's `migrate` on `url`, which must apply inbound's migrations and the
/// example domain's.
fn migrate_example(url: &str) {
    let output = worker_migrate(url);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    assert!(stdout.contains("schema inbound: at version 1;"), "{stdout}");
    assert!(
        stdout.contains("schema inbound_example: at version 1;"),
        "{stdout}"
    );
}

/// `inbound-worker migrate` on `url`.
fn worker_migrate(url: &str) -> Output {
    Command::new(binary("inbound-worker"))
        .arg("migrate")
        .env("DATABASE_URL", url)
        .output()
        .expect("inbound-worker migrate")
}

#[tokio::test]
async fn migrate_lives_beside_a_teams_own_tables_and_creates_nothing_in_public() {
    let (name, url, pool) = a_teams_database().await;
    for _ in 0..2 {
        migrate_example(&url);
    }
    // Nothing outside inbound's schemas is read or moved (a pre-schema layout once was).
    assert_eq!(relations_in(&pool, "public").await, TEAM_RELATIONS);
    let note: String = sqlx::query_scalar("SELECT note FROM public.orders")
        .fetch_one(&pool)
        .await
        .expect("the team's row");
    assert_eq!(note, "the team's own");
    let inbound = relations_in(&pool, "inbound").await;
    for table in [
        "_sqlx_migrations",
        "receipts",
        "receipt_queue",
        "effects",
        "receipt_lease_tokens",
    ] {
        assert!(
            inbound.contains(&table.to_owned()),
            "{table} in {inbound:?}"
        );
    }
    assert!(!inbound.contains(&"orders".to_owned()), "{inbound:?}");
    assert_eq!(
        relations_in(&pool, "inbound_example").await,
        [
            "_sqlx_migrations",
            "entitlement_grants",
            "orders",
            "refund_failures"
        ]
    );
    pool.close().await;
    drop_database(&name).await;
}

/// `inboundctl migrate` names the version it left the schema at and what it applied, and
/// refuses a database a newer build migrated — naming the versions — unless told it is a
/// rollback (`--accept-newer`), as the worker's `migrate` does.
#[tokio::test]
async fn inboundctl_migrate_names_its_versions_and_refuses_a_newer_database_unless_accepted() {
    let (name, url, pool) = a_teams_database().await;
    let env = [("DATABASE_URL".to_owned(), url.clone())];
    let again = inboundctl(&["migrate"], &env);
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert_eq!(
        text(&again.stdout).trim(),
        "schema inbound: at version 1; applied now: none"
    );
    // A newer build's migration, as its history records one.
    sqlx::query(
        "INSERT INTO inbound._sqlx_migrations (version, description, success, checksum, execution_time)
         VALUES (9001, 'a newer build', true, '\\x00', 1)",
    )
    .execute(&pool)
    .await
    .expect("a newer version");
    let refused = inboundctl(&["migrate"], &env);
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused.stdout));
    let said = text(&refused.stderr);
    assert!(
        said.contains("holds migration version(s) 9001 that this binary does not carry")
            && said.contains("--accept-newer"),
        "{said}"
    );
    let accepted = inboundctl(&["migrate", "--accept-newer"], &env);
    assert!(accepted.status.success(), "{}", text(&accepted.stderr));
    assert!(
        text(&accepted.stdout)
            .contains("ahead of this build (version(s) 9001 of a newer one, accepted)"),
        "{}",
        text(&accepted.stdout)
    );
    pool.close().await;
    drop_database(&name).await;
}

/// Another schema name serves a second installation in the same database: the team's
/// tables and their migration history are left alone.
#[tokio::test]
async fn a_second_installation_migrates_into_a_schema_of_its_own() {
    let (name, url, pool) = a_teams_database().await;
    migrate_example(&url);
    let output = inboundctl(
        &["migrate", "--schema", "billing_inbound"],
        &[("DATABASE_URL".to_owned(), url.clone())],
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        relations_in(&pool, "billing_inbound")
            .await
            .contains(&"receipts".to_owned())
    );
    assert_eq!(relations_in(&pool, "public").await, TEAM_RELATIONS);
    let history: i64 = sqlx::query_scalar("SELECT count(*) FROM public._sqlx_migrations")
        .fetch_one(&pool)
        .await
        .expect("their history");
    assert_eq!(history, 10, "another installation's history is left alone");
    pool.close().await;
    drop_database(&name).await;
}

/// `--schema` takes an identifier that is not `public`: anything else is a usage error,
/// refused before any database is reached.
#[test]
fn migrate_refuses_a_schema_name_that_is_invalid_or_public() {
    let env = [(
        "DATABASE_URL".to_owned(),
        "postgres://postgres@127.0.0.1:1/none".to_owned(),
    )];
    let refused = inboundctl(&["migrate", "--schema", "Billing; DROP"], &env);
    assert_eq!(refused.status.code(), Some(2), "clap refuses the value");
    assert!(text(&refused.stderr).contains("invalid schema name"));
    let refused = inboundctl(&["migrate", "--schema", "public"], &env);
    assert_eq!(refused.status.code(), Some(2));
    assert!(text(&refused.stderr).contains("never creates anything in public"));
}

#[tokio::test]
async fn migrate_without_a_reachable_database_fails_clearly() {
    let output = inboundctl(
        &["migrate", "--connect-timeout-secs", "1"],
        &[(
            "DATABASE_URL".to_owned(),
            "postgres://postgres@127.0.0.1:1/none".to_owned(),
        )],
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(
        text(&output.stderr).starts_with("inboundctl: cannot connect to PostgreSQL"),
        "{}",
        text(&output.stderr)
    );
}

#[tokio::test]
async fn migrate_works_for_a_role_that_is_no_superuser_and_may_not_create_schemas() {
    let name = format!("inbound_ctl_role_{}", rand::random::<u32>());
    let role = format!("{name}_app");
    let admin = sqlx::PgPool::connect(&admin_url()).await.expect("admin");
    for statement in [
        format!("CREATE ROLE {role} LOGIN"),
        format!("CREATE DATABASE {name}"),
        format!("REVOKE CREATE ON DATABASE {name} FROM PUBLIC"),
    ] {
        sqlx::query(sqlx::AssertSqlSafe(statement))
            .execute(&admin)
            .await
            .expect("set up");
    }
    // As a managed PostgreSQL's main user: no superuser, no CREATE on the database; a DBA
    // created the two schemas for it.
    let url = with_database(&admin_url(), &name);
    let database = sqlx::PgPool::connect(&url).await.expect("connect");
    for statement in [
        format!("CREATE SCHEMA inbound AUTHORIZATION {role}"),
        format!("CREATE SCHEMA inbound_example AUTHORIZATION {role}"),
    ] {
        sqlx::query(sqlx::AssertSqlSafe(statement))
            .execute(&database)
            .await
            .expect("schemas");
    }
    database.close().await;
    let mut as_role: sqlx::postgres::PgConnectOptions = url.parse().expect("url");
    as_role = as_role.username(&role);
    let role_url = as_role.to_url_lossy().to_string();
    let output = worker_migrate(&role_url);
    let stderr = text(&output.stderr);
    drop_database(&name).await;
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP ROLE {role}")))
        .execute(&admin)
        .await
        .expect("drop role");
    assert!(output.status.success(), "{stderr}");
    assert!(text(&output.stdout).contains("schema inbound_example: at version 1; applied now: 1"));
}

/// Granting inbound's own schema to the worker as if it were a handlers' schema would
/// give the worker every right on the audit trail: refused before anything is done.
/// A worker carries its team's migrations: `<worker> migrate --create-roles` applies
/// inbound's, then the team's, then grants the team's schema to the worker role — in the
/// order that works. `inboundctl migrate --grant-schema` of a schema that does not exist
/// yet says so instead of a misleading permission error.
#[tokio::test]
async fn a_worker_migrates_its_teams_schema_and_grants_it_to_the_worker_role() {
    use inbound_store::roles::{Process, RolePrefix};
    let database = TestDatabase::create_unmigrated().await;
    let prefix = RolePrefix::parse(&format!("tw{}_", rand::random::<u32>())).expect("prefix");
    let roles = inbound_tests::database::TestRoles::dropped_when_done(&database, prefix.clone());
    let env = [("DATABASE_URL".to_owned(), database.url().to_owned())];
    let prefix_flag = format!(
        "--role-prefix={}",
        roles.role(Process::Ingress).trim_end_matches("ingress")
    );
    let refused = inboundctl(
        &words(&format!(
            "migrate --create-roles --grant-schema inbound_example {prefix_flag}"
        )),
        &env,
    );
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused.stdout));
    assert!(
        text(&refused.stderr).contains("schema inbound_example does not exist yet"),
        "{}",
        text(&refused.stderr)
    );
    let migrated = Command::new(binary("inbound-worker"))
        .args(["migrate", "--create-roles", &prefix_flag])
        .env("DATABASE_URL", database.url())
        .output()
        .expect("inbound-worker migrate");
    assert!(migrated.status.success(), "{}", text(&migrated.stderr));
    let said = text(&migrated.stdout);
    assert!(
        said.contains("schema inbound: at version 1;")
            && said.contains("schema inbound_example: at version 1; applied now: 1")
            && said.contains("roles granted"),
        "{said}"
    );
    let granted: bool = sqlx::query_scalar(
        "SELECT has_table_privilege($1, 'inbound_example.orders', 'SELECT, UPDATE')",
    )
    .bind(roles.role(Process::Worker))
    .fetch_one(database.pool())
    .await
    .expect("privilege");
    assert!(granted, "the worker role may change the team's tables");
    let ingress: bool =
        sqlx::query_scalar("SELECT has_table_privilege($1, 'inbound_example.orders', 'SELECT')")
            .bind(roles.role(Process::Ingress))
            .fetch_one(database.pool())
            .await
            .expect("privilege");
    assert!(!ingress, "the ingress role may not read the team's tables");
    // `migrate --help` is the subcommand's, named after the worker.
    let help = Command::new(binary("inbound-worker"))
        .args(["migrate", "--help"])
        .output()
        .expect("help");
    assert!(
        text(&help.stdout).contains("Usage: inbound-worker migrate"),
        "{}",
        text(&help.stdout)
    );
}

#[tokio::test]
async fn migrate_refuses_to_grant_inbounds_own_schema_to_the_worker() {
    let output = inboundctl(
        &words("migrate --create-roles --grant-schema inbound"),
        &[(
            "DATABASE_URL".to_owned(),
            "postgres://postgres@127.0.0.1:1/none".to_owned(),
        )],
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(
        text(&output.stderr).contains("names inbound's own schema"),
        "{}",
        text(&output.stderr)
    );
}
