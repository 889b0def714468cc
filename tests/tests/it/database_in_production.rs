//! The database as production runs it (issue 16): behind a transaction-pooling proxy
//! (PgBouncer 1.18 from Debian's packages, `pool_mode = transaction`) and with one
//! least-privilege role per process. The soak runs the whole fleet through the pooler
//! (`soak.rs`); here each binary's start-up check, `inboundctl`, and what each role must
//! not be able to do.

use std::process::Output;
use std::time::Duration;

use inbound_store::roles::Process;
use inbound_tests::ctl::{Inboundctl, words};
use inbound_tests::database::{TestRoles, admin_url};
use inbound_tests::pgbouncer::{PgBouncer, PoolerOptions};
use inbound_tests::{Service, TestDatabase, eventually, fixtures};
use sqlx::{Connection, PgConnection};

fn inboundctl(args: &[&str], database_url: &str) -> Output {
    Inboundctl::new().database(database_url).run(args)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Starts `process` (ingress or worker) on `url` with `args` and returns its exit status
/// and logs once it has exited, or fails when it is still running after 20 s.
fn exits(worker: bool, url: &str, args: &[&str]) -> (std::process::ExitStatus, String) {
    let options = fixtures::ingress_options(url).with_args(args);
    let mut service = if worker {
        Service::worker(&options)
    } else {
        Service::ingress(&options)
    };
    let status = service
        .wait_exit(Duration::from_secs(20))
        .unwrap_or_else(|| panic!("still running: {:#?}", service.logs()));
    (status, service.logs().join("\n"))
}

/// Through a transaction pooler that refuses a direct session's startup options (PgBouncer
/// as installed), the ingress, the worker and `inboundctl` stop with one line naming the
/// flag.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_direct_session_refused_by_a_pooler_names_the_flag() {
    let database = TestDatabase::create().await;
    let pooler = PgBouncer::start(database.url(), &PoolerOptions::default());
    let url = pooler.rewrite_url(database.url());
    for worker in [false, true] {
        let (status, logs) = exits(worker, &url, &[]);
        assert!(!status.success(), "{logs}");
        assert!(logs.contains("--db-pooler transaction"), "{logs}");
    }
    let output = inboundctl(&["status"], &url);
    assert!(!output.status.success());
    assert!(
        text(&output.stderr).contains("--db-pooler transaction"),
        "{}",
        text(&output.stderr)
    );
}

/// A pooler that lets the startup options through (and ignores them) is caught by its
/// sessions moving between servers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pooler_that_ignores_startup_options_is_detected_by_moving_sessions() {
    let database = TestDatabase::create().await;
    let pooler = PgBouncer::start(
        database.url(),
        &PoolerOptions {
            ignore_startup_parameters: vec!["options".to_owned(), "extra_float_digits".to_owned()],
            ..PoolerOptions::default()
        },
    );
    let url = pooler.rewrite_url(database.url());
    for worker in [false, true] {
        let (status, logs) = exits(worker, &url, &[]);
        assert!(!status.success(), "{logs}");
        assert!(
            logs.contains("transaction-pooling proxy") && logs.contains("--db-pooler transaction"),
            "{logs}"
        );
    }
    // A migration, which holds a session lock across transactions, refuses it too.
    let output = inboundctl(&["migrate"], &url);
    assert!(!output.status.success());
    assert!(
        text(&output.stderr).contains("transaction-pooling proxy"),
        "{}",
        text(&output.stderr)
    );
    // So does every operating command: its session limits would stay on a server
    // connection the pooler then hands to other clients.
    for args in [&["status"][..], &words("receipts list --status failed")] {
        let output = inboundctl(args, &url);
        assert_eq!(output.status.code(), Some(1), "{args:?}");
        assert!(
            text(&output.stderr).contains("transaction-pooling proxy")
                && text(&output.stderr).contains("--db-pooler transaction"),
            "{args:?}: {}",
            text(&output.stderr)
        );
    }
}

/// In transaction mode the role must carry inbound's schema and durable commits: a role
/// without them (here the superuser, whose search_path is `"$user", public`) is refused
/// with the `ALTER ROLE` that fixes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transaction_mode_refuses_a_role_without_inbounds_settings() {
    let database = TestDatabase::create().await;
    let pooler = PgBouncer::start(database.url(), &PoolerOptions::default());
    let (status, logs) = exits(
        false,
        &pooler.rewrite_url(database.url()),
        &["--db-pooler", "transaction"],
    );
    assert!(!status.success(), "{logs}");
    assert!(logs.contains("SET search_path"), "{logs}");

    // A role whose default would not wait for the commit to be durable.
    let roles = TestRoles::create(&database).await;
    let ingress = roles.role(Process::Ingress);
    let name = database.url().rsplit('/').next().expect("database name");
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "ALTER ROLE {ingress} IN DATABASE {name} SET synchronous_commit = off"
    )))
    .execute(database.pool())
    .await
    .expect("weaken the role");
    let pooler = PgBouncer::start(
        database.url(),
        &PoolerOptions {
            users: roles.credentials(),
            ..PoolerOptions::default()
        },
    );
    let (status, logs) = exits(
        false,
        &pooler.rewrite_url(&roles.url(database.url(), Process::Ingress)),
        &["--db-pooler", "transaction"],
    );
    assert!(!status.success(), "{logs}");
    assert!(logs.contains("synchronous_commit = on"), "{logs}");
}

/// `inboundctl` works through the pooler in transaction mode as the operators' role, and
/// `migrate` refuses it (a migration holds a lock across transactions).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inboundctl_operates_through_the_pooler_and_migrate_refuses_it() {
    let database = TestDatabase::create().await;
    let roles = TestRoles::create(&database).await;
    let pooler = PgBouncer::start(
        database.url(),
        &PoolerOptions {
            users: roles.credentials(),
            ..PoolerOptions::default()
        },
    );
    let operator = pooler.rewrite_url(&roles.url(database.url(), Process::Operator));
    for args in [
        &["status", "--db-pooler", "transaction"][..],
        &words("receipts list --status pending --db-pooler transaction")[..],
        &words("effects list --status review --db-pooler transaction")[..],
    ] {
        let output = inboundctl(args, &operator);
        assert!(
            output.status.success(),
            "{args:?}: {}",
            text(&output.stderr)
        );
    }
    let output = inboundctl(&["migrate", "--db-pooler", "transaction"], &operator);
    assert!(!output.status.success());
    assert!(
        text(&output.stderr).contains("direct DATABASE_URL"),
        "{}",
        text(&output.stderr)
    );
}

async fn connect_as(roles: &TestRoles, database: &TestDatabase, process: Process) -> PgConnection {
    let options: sqlx::postgres::PgConnectOptions = roles
        .url(database.url(), process)
        .parse()
        .expect("role URL");
    PgConnection::connect_with(&options.options([("search_path", "inbound, inbound_example")]))
        .await
        .expect("connect as the role")
}

/// Runs `statement` as `process`'s role and asserts it fails with a permission error.
async fn assert_refused(
    roles: &TestRoles,
    database: &TestDatabase,
    process: Process,
    statement: &'static str,
) {
    let mut connection = connect_as(roles, database, process).await;
    let error = sqlx::raw_sql(statement)
        .execute(&mut connection)
        .await
        .expect_err(statement);
    let code = error
        .as_database_error()
        .and_then(|error| error.code().map(|code| code.into_owned()));
    // 42501 insufficient_privilege; 42809/42P01-style errors would mean the
    // statement was wrong, not refused.
    assert_eq!(
        code.as_deref(),
        Some("42501"),
        "{process:?}: {statement}: {error}"
    );
}

/// The audit trail — operators' decisions and who read which payload — is insert-only
/// for every process: no role that acts on receipts and effects can rewrite or erase who
/// decided or read what.
const REWRITE_AUDIT: [&str; 8] = [
    "UPDATE receipt_replays SET reason = 'rewritten'",
    "DELETE FROM receipt_replays",
    "UPDATE receipt_resolutions SET resolved_by = 'someone else'",
    "DELETE FROM receipt_resolutions",
    "UPDATE effect_resolutions SET note = 'rewritten'",
    "DELETE FROM effect_resolutions",
    "UPDATE payload_reads SET read_by = 'someone else'",
    "DELETE FROM payload_reads",
];

/// What each process must not do, statement by statement.
fn refused_statements() -> Vec<(Process, &'static str)> {
    let ingress = [
        "SELECT payload FROM receipt_payloads",
        "SELECT * FROM receipts",
        "UPDATE receipts SET status = 'done'",
        "DELETE FROM receipt_queue",
        // It reads when queue rows became claimable (the ages it exports), not what
        // they hold.
        "SELECT last_error FROM receipt_queue",
        "UPDATE receipt_queue SET visible_at = now()",
        "SELECT * FROM effects",
        "SELECT * FROM inbound_example.orders",
        "UPDATE inbound_example.orders SET status = 'paid'",
        "DROP TABLE receipts",
        // The id and the acceptance time are the database's: an id taken ahead would make
        // a later delivery's insert a silent "duplicate".
        "INSERT INTO receipts (id, integration, source_scope, event_id, event_type, route_key) VALUES (999999, 'i', 's', 'e', 't', 't')",
        "INSERT INTO receipts (integration, source_scope, event_id, event_type, route_key, received_at) VALUES ('i', 's', 'e2', 't', 't', now())",
        // Nor does it drop or rewrite what it stored, or the keys that make it new.
        "DELETE FROM receipt_keys",
        "UPDATE receipt_payloads SET payload = '{}'",
        "DELETE FROM receipt_payloads",
    ];
    let worker = [
        "DROP TABLE receipts",
        "ALTER TABLE receipts ADD COLUMN x int",
        "TRUNCATE receipts",
        "DELETE FROM _sqlx_migrations",
        "CREATE TABLE inbound.sneaky (x int)",
        // Only purge, an operator's command, removes receipts, by retention's rule.
        "DELETE FROM receipts",
        "SELECT * FROM drop_key_periods(1)",
        "SELECT * FROM drop_key_periods_at(1, now() + interval '1 year')",
        "DROP TABLE receipts_default",
        // What was received is not the worker's to rewrite either, nor an id its to pick.
        "UPDATE receipt_payloads SET payload = NULL",
        "DELETE FROM receipt_payloads",
        "DELETE FROM receipt_keys",
        "UPDATE receipts SET received_at = now() - interval '1 year'",
        "SELECT decision_close_receipt(1, 'w', 'r')",
        "INSERT INTO receipt_replays (receipt_id, previous_status, replayed_by, reason) VALUES (1, 'failed', 'w', 'r')",
    ];
    let dispatcher = [
        "SELECT payload FROM receipt_payloads",
        "UPDATE receipts SET status = 'done'",
        "SELECT * FROM inbound_example.orders",
        "DROP TABLE effects",
        "INSERT INTO effect_resolutions (effect_id, previous_status, action, resolved_by, note) VALUES (1, 'review', 'retry', 'd', 'n')",
        "INSERT INTO payload_reads (receipt_id, read_by, surface) VALUES (1, 'd', 'cli')",
        "SELECT * FROM drop_payload_days(1)",
        "SELECT ensure_history_partitions(now(), 1)",
    ];
    let operator = [
        "DROP TABLE receipts",
        "ALTER TABLE effects DROP COLUMN sink",
        "TRUNCATE receipt_replays",
        // Receipts leave only by retention's rule (the database's purge functions): a
        // delete would erase accepted work, and with it, by cascade, the effects that
        // explain what it caused (red team 2026-12-05, F2).
        "DELETE FROM receipts",
        // What was received is evidence: its payload, key and acceptance time are not the
        // operator's to rewrite (only purge's rule drops a payload).
        "UPDATE receipt_payloads SET payload = '{\"rewritten\": true}'",
        "DELETE FROM receipt_payloads",
        "DELETE FROM receipt_keys",
        // Retention is by the server's clock: a clock of the operator's could drop today.
        "SELECT * FROM drop_payload_days_at(1, now() + interval '1 year')",
        "SELECT * FROM drop_key_periods_at(1, now() + interval '1 year')",
        "SELECT history_attach('receipts', 'id', 0, 1)",
        "UPDATE receipts SET event_id = 'evt_other'",
        "UPDATE receipts SET received_at = now() - interval '1 year'",
        // Every change an operator makes is a decision the database records: no status,
        // queue row or effect is the role's to write by hand, so none goes unaudited (a
        // receipt made done by hand would be purgeable; an effect's sink, data or
        // "may have landed" rewritten would be sent again).
        "UPDATE receipts SET status = 'done', outcome = 'ignored', finished_at = now() - interval '1 year'",
        "SELECT id FROM receipts FOR UPDATE",
        "INSERT INTO receipts (integration, source_scope, event_id, event_type, route_key) VALUES ('i', 's', 'e', 't', 't')",
        "INSERT INTO receipt_queue (receipt_id, integration, enqueued_at) VALUES (1, 'i', now())",
        "DELETE FROM receipt_queue",
        "UPDATE effects SET status = 'abandoned'",
        "UPDATE effects SET maybe_delivered = false, sink = 'elsewhere'",
        // An audit row's time and database role are the server's, not the writer's.
        "INSERT INTO receipt_replays (receipt_id, previous_status, replayed_by, reason, replayed_at) VALUES (1, 'failed', 'carol', 'forged', '2020-01-01')",
        "INSERT INTO receipt_resolutions (receipt_id, previous_status, action, resolved_by, reason, resolved_at) VALUES (1, 'failed', 'close', 'carol', 'forged', '2020-01-01')",
        "INSERT INTO effect_resolutions (effect_id, previous_status, action, resolved_by, note, resolved_at) VALUES (1, 'review', 'completed', 'carol', 'forged', '2020-01-01')",
        "INSERT INTO effect_resolutions (effect_id, previous_status, action, resolved_by, note, database_role) VALUES (1, 'review', 'completed', 'carol', 'forged', 'inbound_worker')",
        "INSERT INTO payload_reads (receipt_id, read_by, surface, read_at) VALUES (1, 'carol', 'console', '2020-01-01')",
    ];
    let of = |process: Process, statements: &[&'static str]| -> Vec<(Process, &'static str)> {
        statements
            .iter()
            .map(|statement| (process, *statement))
            .collect()
    };
    [
        of(Process::Ingress, &ingress),
        of(Process::Worker, &worker),
        of(Process::Worker, &REWRITE_AUDIT),
        of(Process::Dispatcher, &dispatcher),
        of(Process::Dispatcher, &REWRITE_AUDIT),
        of(Process::Operator, &operator),
        of(Process::Operator, &REWRITE_AUDIT),
    ]
    .concat()
}

/// Each role may do only what its process does: what it must not do fails with a
/// permission error.
#[tokio::test]
async fn each_role_is_refused_what_its_process_must_not_do() {
    let database = TestDatabase::create().await;
    let roles = TestRoles::create(&database).await;
    for (process, statement) in refused_statements() {
        assert_refused(&roles, &database, process, statement).await;
    }
    // What the ingress does is allowed: a receipt in, its id back.
    let mut ingress = connect_as(&roles, &database, Process::Ingress).await;
    sqlx::raw_sql(
        "WITH k AS (SELECT * FROM claim_receipt_keys(ARRAY['stripe-acme'], ARRAY['s'], ARRAY['evt_role'], ARRAY[NULL::bytea], NULL)),
              r AS (INSERT INTO receipts (integration, source_scope, event_id, event_type, route_key)
                    SELECT 'stripe-acme', 's', 'evt_role', 't', 't' FROM k RETURNING id, integration, received_at),
              p AS (INSERT INTO receipt_payloads (receipt_id, payload) SELECT id, '{}' FROM r)
         INSERT INTO receipt_queue (receipt_id, integration, visible_at, enqueued_at, payload_bytes)
         SELECT id, integration, received_at, received_at, 2 FROM r",
    )
    .execute(&mut ingress)
    .await
    .expect("the ingress role accepts a receipt");
}

/// A team's own tables beside inbound's: a schema of its own, and a table in public.
async fn create_a_teams_own_tables(database: &TestDatabase) {
    sqlx::raw_sql(
        "CREATE SCHEMA team_billing; CREATE TABLE team_billing.invoices (id int);
         CREATE TABLE public.team_ledger (id int)",
    )
    .execute(database.pool())
    .await
    .expect("a team's own schema");
}

/// `inboundctl migrate --create-roles` with roles named `prefix…`, granting the
/// worker the team's schemas.
fn migrate_creating_roles(database: &TestDatabase, prefix: &str) -> Output {
    inboundctl(
        &[
            "migrate",
            "--create-roles",
            "--role-prefix",
            prefix,
            "--grant-schema",
            "team_billing",
            // A team's tables may well live in public.
            "--grant-schema",
            "public",
        ],
        database.url(),
    )
}

/// The answer of a privilege query (`has_…_privilege`).
async fn privilege(database: &TestDatabase, sql: String) -> bool {
    sqlx::query_scalar::<_, bool>(sqlx::AssertSqlSafe(sql))
        .fetch_one(database.pool())
        .await
        .expect("privilege")
}

/// Drops the roles `prefix…` created, and what they were granted.
async fn drop_roles(database: &TestDatabase, prefix: &str) {
    let roles: Vec<String> = ["ingress", "worker", "dispatcher", "operator"]
        .iter()
        .map(|suffix| format!("{prefix}{suffix}"))
        .collect();
    let list = roles.join(", ");
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("DROP OWNED BY {list}")))
        .execute(database.pool())
        .await
        .expect("revoke");
    let admin = sqlx::PgPool::connect(&admin_url()).await.expect("admin");
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("DROP ROLE {list}")))
        .execute(&admin)
        .await
        .expect("drop roles");
}

/// `inboundctl migrate --create-roles` through the binary: the four roles exist, and a
/// second run (as after a later migration) succeeds again.
#[tokio::test]
async fn migrate_creates_and_regrants_the_roles() {
    let database = TestDatabase::create().await;
    let prefix = format!("ctl{}_", rand::random::<u32>());
    create_a_teams_own_tables(&database).await;
    for run in 0..2 {
        let output = migrate_creating_roles(&database, &prefix);
        assert!(output.status.success(), "{}", text(&output.stderr));
        assert!(text(&output.stdout).contains(&format!("{prefix}ingress")));
        for table in ["team_billing.invoices", "public.team_ledger"] {
            assert!(
                privilege(
                    &database,
                    format!("SELECT has_table_privilege('{prefix}worker', '{table}', 'UPDATE')")
                )
                .await,
                "{table}"
            );
        }
        let reads_payloads = privilege(
            &database,
            format!(
                "SELECT has_table_privilege('{prefix}ingress', 'inbound.receipt_payloads', 'SELECT')"
            ),
        )
        .await;
        assert!(!reads_payloads, "run {run}: the ingress reads payloads");
        // Someone widened the ingress's grant by hand: the next run takes it back.
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "GRANT SELECT ON inbound.receipts TO {prefix}ingress"
        )))
        .execute(database.pool())
        .await
        .expect("widen by hand");
    }
    let created: i64 =
        sqlx::query_scalar("SELECT count(*) FROM pg_roles WHERE rolname LIKE $1 || '%'")
            .bind(&prefix)
            .fetch_one(database.pool())
            .await
            .expect("roles");
    assert_eq!(created, 4);
    drop_roles(&database, &prefix).await;
}

/// The ingress, a receipts worker and a separate dispatcher, each as its own role: a
/// payment is accepted, applied and its effect delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ingress_worker_and_dispatcher_do_their_work_under_their_roles() {
    use inbound_tests::{SignedRequest, domain, http::HttpClient, sink::TestSink};
    let database = TestDatabase::create().await;
    let roles = TestRoles::create(&database).await;
    let pool = database.pool();
    domain::seed_order(pool, "o1", "pi_1", 1000, "usd").await;
    let sink = TestSink::start().await;
    let url = |process| roles.url(database.url(), process);
    let ingress = Service::ingress(&fixtures::ingress_options(&url(Process::Ingress)));
    let worker_args = |role: &'static str| {
        fixtures::with_audit_sink(fixtures::ingress_options("unused"), &sink.url(), true)
            .with_args(&["--role", role, "--poll-interval-ms", "50"])
    };
    let mut receipts = worker_args("receipts");
    receipts.database_url = url(Process::Worker);
    let mut effects = worker_args("effects");
    effects.database_url = url(Process::Dispatcher);
    let _receipts = Service::worker(&receipts);
    let _effects = Service::worker(&effects);
    let body = domain::stripe_event(
        "evt_roles_1",
        "payment_intent.succeeded",
        domain::payment_intent("pi_1", "o1", 1000, "usd", "succeeded"),
    );
    let answer = SignedRequest::stripe(body)
        .send(&HttpClient::new(), &ingress)
        .await
        .expect("answer");
    assert_eq!(answer.status, 200);
    eventually("an effect completed", Duration::from_secs(20), async || {
        sqlx::query_scalar::<_, bool>(
            "SELECT EXISTS (SELECT 1 FROM effects WHERE status = 'completed')",
        )
        .fetch_one(pool)
        .await
        .expect("condition")
        .then_some(())
    })
    .await;
    assert_eq!(domain::order_status(pool, "o1").await, "paid");
}

/// The operators' role does every decision `inboundctl` records — replay, quarantine,
/// fail, close, resolve — and purges, with the audit trail insert-only.
#[tokio::test]
async fn operators_decide_and_purge_under_their_role() {
    let database = TestDatabase::create().await;
    let roles = TestRoles::create(&database).await;
    sqlx::raw_sql(
        "INSERT INTO receipts (id, integration, source_scope, event_id, event_type, route_key, status, attempts)
         VALUES
           (1, 'stripe-acme', 's', 'evt_failed', 't', 't', 'failed', 10),
           (2, 'stripe-acme', 's', 'evt_to_quarantine', 't', 't', 'pending', 0),
           (3, 'stripe-acme', 's', 'evt_to_fail', 't', 't', 'pending', 0);
         INSERT INTO receipt_payloads SELECT id, '{}' FROM receipts;
         INSERT INTO receipt_queue (receipt_id, integration, enqueued_at)
           SELECT id, integration, received_at FROM receipts WHERE status = 'pending';
         INSERT INTO receipts (id, integration, source_scope, event_id, event_type, route_key,
                               status, outcome, received_at, finished_at)
         VALUES
           (4, 'stripe-acme', 's', 'evt_old', 't', 't', 'done', 'applied',
            now() - interval '100 days', now() - interval '100 days');
         INSERT INTO effects (id, receipt_id, operation_key, sink, kind, tenant, data, event, status)
           VALUES (1, 4, 'op-1', 'audit', 'forward', 'acme', '{}', '{}', 'review');",
    )
    .execute(database.pool())
    .await
    .expect("seed");
    let operator = roles.url(database.url(), Process::Operator);
    let run = |args: &[&str]| {
        let output = inboundctl(args, &operator);
        assert!(
            output.status.success(),
            "{args:?}: {}",
            text(&output.stderr)
        );
    };
    for args in [
        &words("receipts replay 1 --reason fixed --by ops")[..],
        &[
            "receipts",
            "quarantine",
            "2",
            "--reason",
            "looks wrong",
            "--by",
            "ops",
        ],
        &[
            "receipts", "close", "2", "--reason", "not ours", "--by", "ops",
        ],
        &words("receipts fail 3 --reason poison --by ops"),
        &[
            "effects",
            "resolve",
            "1",
            "--completed",
            "--note",
            "sent by hand",
            "--by",
            "ops",
        ],
    ] {
        run(args);
    }
    let audit: i64 = sqlx::query_scalar(
        "SELECT (SELECT count(*) FROM receipt_replays) + (SELECT count(*) FROM receipt_resolutions)
              + (SELECT count(*) FROM effect_resolutions)",
    )
    .fetch_one(database.pool())
    .await
    .expect("audit rows");
    assert_eq!(audit, 5, "one row per decision");
    run(&words(
        "purge --payloads-older-than-days 31 --keys-older-than-days 91",
    ));
    let purged: i64 = sqlx::query_scalar("SELECT count(*) FROM receipts WHERE id = 4")
        .fetch_one(database.pool())
        .await
        .expect("purged");
    assert_eq!(
        purged, 0,
        "the old receipt's key is gone with its closed effect"
    );
}

/// The audit trail outlives what it explains and says who wrote it: an effect an operator
/// resolved keeps its decision after purge removes the effect with its receipt (no
/// cascade into it), each row carries the database role that wrote it and the server's
/// time, and purge's rule is the database's — an operator asking for an age of 0 purges
/// nothing younger than a day (red team 2026-12-05, F2).
#[tokio::test]
async fn the_audit_trail_outlives_what_it_explains_and_names_the_role_that_wrote_it() {
    let database = TestDatabase::create().await;
    let roles = TestRoles::create(&database).await;
    sqlx::raw_sql(
        "INSERT INTO receipts (id, integration, source_scope, event_id, event_type, route_key,
                               status, outcome, received_at, finished_at)
         VALUES
           (1, 'stripe-acme', 's', 'evt_old', 't', 't', 'done', 'applied',
            now() - interval '100 days', now() - interval '100 days'),
           (history_day(now())::bigint * 10000000000 + 2, 'stripe-acme', 's', 'evt_fresh', 't',
            't', 'done', 'applied', now(), now());
         INSERT INTO effects (id, receipt_id, operation_key, sink, kind, tenant, data, event, status)
           VALUES (1, 1, 'op-audited', 'audit', 'forward', 'acme', '{}', '{}', 'review');",
    )
    .execute(database.pool())
    .await
    .expect("seed");
    let operator = roles.url(database.url(), Process::Operator);
    let output = inboundctl(
        &[
            "effects",
            "resolve",
            "1",
            "--completed",
            "--note",
            "sent by hand",
            "--by",
            "ops",
        ],
        &operator,
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let operator_role = roles.role(Process::Operator);
    let (by, role, recent): (String, String, bool) = sqlx::query_as(
        "SELECT resolved_by, database_role, resolved_at > now() - interval '1 minute'
         FROM effect_resolutions WHERE effect_id = 1",
    )
    .fetch_one(database.pool())
    .await
    .expect("the decision");
    assert_eq!(
        (by.as_str(), role.as_str(), recent),
        ("ops", operator_role.as_str(), true)
    );
    // Retention's rule is the database's: the operator role calls it with an age of 0,
    // and only what is done, closed and more than a day old goes — the old receipt, not
    // the one that finished now.
    let mut connection = connect_as(&roles, &database, Process::Operator).await;
    sqlx::query("SELECT * FROM drop_key_periods(0)")
        .fetch_all(&mut connection)
        .await
        .expect("purge as the operator");
    let left: Vec<i64> = sqlx::query_scalar("SELECT id FROM receipts ORDER BY id")
        .fetch_all(database.pool())
        .await
        .expect("receipts");
    let today: i64 = sqlx::query_scalar("SELECT history_day(now())::int8")
        .fetch_one(database.pool())
        .await
        .expect("today");
    assert_eq!(
        left,
        [today * 10_000_000_000 + 2],
        "the old receipt went by the rule; the fresh one stayed"
    );
    let decisions: i64 = sqlx::query_scalar("SELECT count(*) FROM effect_resolutions")
        .fetch_one(database.pool())
        .await
        .expect("decisions");
    assert_eq!(
        decisions, 1,
        "who resolved the purged effect is still on record"
    );
}

/// Temporary tables come last in every session's search_path, as inbound's sessions and
/// roles set it: one made by whoever shared a pooled server session cannot stand in for
/// inbound's own table, so a read recorded through it lands in the audit trail.
#[tokio::test]
async fn a_temporary_table_never_stands_in_for_inbounds_own() {
    let database = TestDatabase::create().await;
    let roles = TestRoles::create(&database).await;
    let options = inbound_store::connect_options(
        &roles.url(database.url(), Process::Operator),
        &inbound_store::SessionTarget {
            schema: inbound_store::Schema::default(),
            pooler: inbound_store::Pooler::None,
        },
    )
    .expect("options");
    let mut connection = PgConnection::connect_with(&options).await.expect("connect");
    sqlx::raw_sql(
        "CREATE TEMP TABLE payload_reads (receipt_id bigint, read_by text, surface text)",
    )
    .execute(&mut connection)
    .await
    .expect("a temporary table");
    inbound_store::admin::record_payload_reads(
        &mut connection,
        &[inbound_core::keys::ReceiptId(1)],
        "alice",
        inbound_store::admin::ReadSurface::Console,
    )
    .await
    .expect("recorded");
    let recorded: i64 = sqlx::query_scalar("SELECT count(*) FROM inbound.payload_reads")
        .fetch_one(database.pool())
        .await
        .expect("count");
    assert_eq!(
        recorded, 1,
        "the read is in the audit trail, not the temporary table"
    );
    // The role's own setting (what a transaction pooler's sessions get) says the same.
    let setting: String = sqlx::query_scalar(
        "SELECT array_to_string(setconfig, ' ') FROM pg_db_role_setting s
         JOIN pg_roles r ON r.oid = s.setrole WHERE r.rolname = $1",
    )
    .bind(roles.role(Process::Operator))
    .fetch_one(database.pool())
    .await
    .expect("the role's settings");
    assert!(
        setting.contains("search_path=inbound, pg_temp"),
        "{setting}"
    );
}

/// Retention runs as the tables' owner: what it keeps while it drops a partition must
/// live where no caller can reach it. A temporary table the operator made beforehand,
/// named as a retention function's working table and carrying a trigger, ran as the
/// owner inside the drop — enough to erase the audit trail (red team of the partitioned
/// history). The carried rows now live in the function's own variables.
#[tokio::test]
async fn retention_runs_nothing_an_operator_left_in_its_session() {
    let database = TestDatabase::create().await;
    let roles = TestRoles::create(&database).await;
    // A pending receipt with its payload, ten days old, and an audit row.
    sqlx::raw_sql(
        "SELECT ensure_history_partitions(now() - interval '10 days', 0);
         WITH old AS (
             INSERT INTO receipts (id, integration, source_scope, event_id, event_type, route_key, received_at)
             VALUES (history_day(now() - interval '10 days')::int8 * 10000000000 + 1,
                     'stripe-acme', 's', 'evt_old', 't', 't', now() - interval '10 days')
             RETURNING id)
         INSERT INTO receipt_payloads SELECT id, '{}' FROM old;
         INSERT INTO receipt_replays (receipt_id, previous_status, replayed_by, reason)
           VALUES (1, 'failed', 'alice', 'on record');",
    )
    .execute(database.pool())
    .await
    .expect("seed");
    let mut operator = connect_as(&roles, &database, Process::Operator).await;
    sqlx::raw_sql(
        "CREATE TEMP TABLE carried_payloads (receipt_id bigint, payload jsonb);
         CREATE FUNCTION pg_temp.erase() RETURNS trigger LANGUAGE plpgsql AS
           $$ BEGIN DELETE FROM inbound.receipt_replays; RETURN NEW; END $$;
         CREATE TRIGGER erase BEFORE INSERT ON pg_temp.carried_payloads
           FOR EACH ROW EXECUTE FUNCTION pg_temp.erase();
         GRANT ALL ON pg_temp.carried_payloads TO PUBLIC;",
    )
    .execute(&mut operator)
    .await
    .expect("the operator's temporary table");
    let dropped = inbound_store::admin::drop_payload_days(&mut operator, 7, None)
        .await
        .expect("retention as the operator");
    assert!(
        dropped.iter().any(|day| day.carried == 1),
        "the pending receipt's payload was carried: {dropped:?}"
    );
    let audit: i64 = sqlx::query_scalar("SELECT count(*) FROM receipt_replays")
        .fetch_one(database.pool())
        .await
        .expect("audit");
    assert_eq!(audit, 1, "the audit trail is untouched");
}
