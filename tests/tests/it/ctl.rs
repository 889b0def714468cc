//! `inboundctl` through the real binary: `check-config`, `migrate`, and `sign-event`, whose
//! printed curl command must be accepted by a running ingress.

use sqlx::ConnectOptions;
use std::process::{Command, Output};

use inbound_core::states::ReceiptStatus;
use inbound_tests::config::ConfigEdit;
use inbound_tests::ctl::{Inboundctl, words};
use inbound_tests::database::{admin_url, with_database};
use inbound_tests::fixtures;
use inbound_tests::process::{ScratchDir, binary};
use inbound_tests::{Stack, TestDatabase};

/// Runs inboundctl with `env` alone on top of a clean environment (no fixture secrets:
/// these tests say which secrets exist).
fn inboundctl(args: &[&str], env: &[(String, String)]) -> Output {
    Inboundctl::new().envs(env).run(args)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Writes the test configuration, edited by `edit`, into `scratch`.
fn write_config(scratch: &ScratchDir, edit: impl FnOnce(&mut ConfigEdit)) -> String {
    let mut config = fixtures::config_edit();
    edit(&mut config);
    fixtures::write_config(&config, scratch)
}

#[test]
fn check_config_accepts_a_valid_file() {
    let scratch = ScratchDir::new();
    let path = write_config(&scratch, |_| {});
    let output = inboundctl(
        &["check-config", "--config", &path],
        &fixtures::secret_env(),
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        text(&output.stdout).contains("ok (9 integrations, 1 sinks)"),
        "{}",
        text(&output.stdout)
    );
}

/// A misspelled event type in a route would be answered 200 `ignored` for ever:
/// check-config warns with the closest type the provider sends, still exits 0 (a provider
/// may send types the list does not know yet), and exits 1 with `--deny-warnings`.
#[test]
fn check_config_warns_about_route_keys_the_provider_never_sends() {
    let scratch = ScratchDir::new();
    let clean = write_config(&scratch, |_| {});
    let output = inboundctl(
        &["check-config", "--config", &clean],
        &fixtures::secret_env(),
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        !text(&output.stderr).contains("warning"),
        "{}",
        text(&output.stderr)
    );

    let typo = write_config(&scratch, |config| {
        config.rename_route(
            "stripe-acme",
            "payment_intent.succeeded",
            "payment_intent.succeded",
        );
    });
    let warned = inboundctl(
        &["check-config", "--config", &typo],
        &fixtures::secret_env(),
    );
    assert!(warned.status.success(), "{}", text(&warned.stderr));
    let stderr = text(&warned.stderr);
    assert!(
        stderr.contains("warning: integration stripe-acme: route \"payment_intent.succeded\"")
            && stderr.contains("did you mean \"payment_intent.succeeded\""),
        "{stderr}"
    );
    let denied = inboundctl(
        &words(&format!("check-config --config {typo} --deny-warnings")),
        &fixtures::secret_env(),
    );
    assert_eq!(denied.status.code(), Some(1), "{}", text(&denied.stderr));
}

/// Shopify topics are checked too, `/` and all: `orders/created` is no topic, and the
/// warning names `orders/create`.
#[test]
fn check_config_warns_about_a_shopify_topic_typo() {
    let scratch = ScratchDir::new();
    let typo = write_config(&scratch, |config| {
        config.rename_route("shop-acme", "orders/create", "orders/created");
    });
    let warned = inboundctl(
        &["check-config", "--config", &typo],
        &fixtures::secret_env(),
    );
    assert!(warned.status.success(), "{}", text(&warned.stderr));
    let stderr = text(&warned.stderr);
    assert!(
        stderr.contains("warning: integration shop-acme: route \"orders/created\"")
            && stderr.contains("did you mean \"orders/create\""),
        "{stderr}"
    );
    assert_eq!(stderr.matches("warning:").count(), 1, "{stderr}");
}

/// `inboundctl … | head` closes the pipe early: the command stops printing and finishes
/// with its own exit status instead of panicking on the failed write.
#[test]
fn a_closed_output_pipe_ends_the_command_quietly() {
    let scratch = ScratchDir::new();
    let path = write_config(&scratch, |_| {});
    let mut child = Inboundctl::new()
        .with_fixture_secrets()
        .command(&["check-config", "--config", &path])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run inboundctl");
    // The reader is gone before the first line is written.
    drop(child.stdout.take());
    let output = child.wait_with_output().expect("wait");
    let stderr = text(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(output.status.success(), "{:?}: {stderr}", output.status);
}

#[test]
fn check_config_names_the_bad_field_in_one_line() {
    let scratch = ScratchDir::new();
    type Edit = fn(&mut ConfigEdit);
    let cases: [(Edit, &str); 3] = [
        (
            |config| {
                config.set("slack-acme", "provider", "slak");
            },
            "integration[2] (slack-acme).provider: unknown provider \"slak\"",
        ),
        (
            |config| {
                config.set("gh-acme", "id", "stripe-acme");
            },
            "integration[1] (stripe-acme).id: duplicate integration id",
        ),
        (
            |config| {
                config
                    .route("gh-acme", "pull_request.opened")
                    .insert("sink".to_owned(), "elsewhere".into());
            },
            "integration[1] (gh-acme).routes.\"pull_request.opened\".sink: unknown sink \"elsewhere\"",
        ),
    ];
    for (edit, expected) in cases {
        let path = write_config(&scratch, edit);
        let output = inboundctl(
            &["check-config", "--config", &path],
            &fixtures::secret_env(),
        );
        assert_eq!(output.status.code(), Some(1), "{expected}");
        let stderr = text(&output.stderr);
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains(expected),
            "expected {expected:?} in {stderr:?}"
        );
    }
    let missing = inboundctl(
        &["check-config", "--config", "/nonexistent/inbound.toml"],
        &[],
    );
    assert_eq!(missing.status.code(), Some(1));
    assert!(text(&missing.stderr).contains("cannot read config file /nonexistent/inbound.toml"));
}

#[test]
fn check_config_accepts_any_handler_unless_told_which_the_worker_has() {
    let scratch = ScratchDir::new();
    let path = write_config(&scratch, |config| {
        config
            .route("stripe-acme", "payment_intent.succeeded")
            .insert("handler".to_owned(), "orders.pay".into());
    });
    // Only the worker that runs a handler knows it: the ingress's check passes.
    let output = inboundctl(
        &["check-config", "--config", &path],
        &fixtures::secret_env(),
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    // Told the worker's registry (e.g. `inbound-worker --list-handlers`, which needs no
    // configuration and no database), it names the route.
    let listed = std::process::Command::new(inbound_tests::process::binary("inbound-worker"))
        .arg("--list-handlers")
        .env_remove("INBOUND_CONFIG")
        .env_remove("DATABASE_URL")
        .output()
        .expect("inbound-worker --list-handlers");
    assert!(listed.status.success(), "{}", text(&listed.stderr));
    let handlers = text(&listed.stdout);
    assert_eq!(
        handlers.lines().collect::<Vec<_>>(),
        [
            "entitlements.grant",
            "forward",
            "orders.mark_paid",
            "orders.refund"
        ]
    );
    let handlers = handlers.lines().collect::<Vec<_>>().join(",");
    let output = inboundctl(
        &words(&format!(
            "check-config --config {path} --handlers {handlers}"
        )),
        &fixtures::secret_env(),
    );
    assert_eq!(output.status.code(), Some(1));
    let stderr = text(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("integration[0] (stripe-acme).routes.\"payment_intent.succeeded\".handler: handler \"orders.pay\" is not registered"),
        "{stderr}"
    );
}

/// What `check-config --handlers` cannot know — a handler's own start-up checks (a
/// Stripe business handler needs `expect.livemode`) — the worker checks offline:
/// `inbound-worker --check-config` reads no database.
#[test]
fn the_worker_checks_a_configuration_offline_with_its_handlers_own_checks() {
    let scratch = ScratchDir::new();
    let check = |path: &str| {
        std::process::Command::new(inbound_tests::process::binary("inbound-worker"))
            .args(["--check-config", "--config", path])
            .env_remove("DATABASE_URL")
            .envs(fixtures::secret_env())
            .output()
            .expect("inbound-worker --check-config")
    };
    let fine = write_config(&scratch, |_| {});
    let output = check(&fine);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let unpinned = write_config(&scratch, |config| {
        config.set(
            "stripe-acme",
            "expect",
            toml::toml! { account = "acct_123" },
        );
    });
    let output = check(&unpinned);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stdout));
    assert!(
        text(&output.stderr).contains("expect.livemode"),
        "{}",
        text(&output.stderr)
    );
}

#[test]
fn check_config_refuses_a_bad_standard_secret_without_printing_it() {
    let scratch = ScratchDir::new();
    let path = write_config(&scratch, |_| {});
    let mut env = fixtures::secret_env();
    for (name, value) in &mut env {
        if name == "TEST_STANDARD_SECRET" {
            *value = "whsec_%%%definitely-not-base64%%%".to_owned();
        }
    }
    let output = inboundctl(&["check-config", "--config", &path], &env);
    assert_eq!(output.status.code(), Some(1));
    let stderr = text(&output.stderr);
    assert!(stderr.contains("integration[3] (std-acme).secrets[0]: env:TEST_STANDARD_SECRET is not a Standard Webhooks secret"), "{stderr}");
    assert!(!stderr.contains("definitely-not-base64"), "{stderr}");
}

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
         WHERE n.nspname = $1 AND c.relkind IN ('r', 'S') ORDER BY 1",
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

/// GitHub names the event in a header: `--event-type` sets it, so a routed GitHub event
/// can be tried (without it the command sends `ping`, which no route takes); other
/// providers carry the type in the body and refuse the flag.
#[tokio::test]
async fn sign_event_sends_the_github_event_type_it_is_given() {
    let stack = Stack::start().await;
    let scratch = ScratchDir::new();
    let path = write_config(&scratch, |_| {});
    let body = r#"{"action":"opened","number":7,"repository":{"id":42,"full_name":"acme/app"}}"#;
    let base = format!("http://{}", stack.ingress.addr);
    let answer = sign_and_send(
        &path,
        "gh-acme",
        body,
        &base,
        &["--event-type", "pull_request"],
    )
    .expect("signed");
    assert_eq!(answer["status"], "accepted", "{answer}");
    assert_eq!(stack.database.receipt_count().await, 1);

    let refused = sign_and_send(&path, "stripe-acme", "{}", &base, &["--event-type", "x"])
        .expect_err("refused");
    assert!(refused.contains("--event-type"), "{refused}");

    // Two events sent within the same second are two events, not a duplicate.
    let other = r#"{"action":"opened","number":8,"repository":{"id":42,"full_name":"acme/app"}}"#;
    let again = sign_and_send(
        &path,
        "gh-acme",
        other,
        &base,
        &["--event-type", "pull_request"],
    )
    .expect("signed");
    assert_eq!(again["status"], "accepted", "{again}");
    assert_eq!(stack.database.receipt_count().await, 2);
}

/// Shopify names the topic in a header too: `--event-type` is required, and the request
/// carries the shop the integration expects, so it passes the scope check.
#[tokio::test]
async fn sign_event_sends_the_shopify_topic_it_is_given() {
    let stack = Stack::start().await;
    let scratch = ScratchDir::new();
    let path = write_config(&scratch, |_| {});
    let body = r#"{"id":820982911946154508,"email":"jon@example.com"}"#;
    let base = format!("http://{}", stack.ingress.addr);
    let answer = sign_and_send(
        &path,
        "shop-acme",
        body,
        &base,
        &["--event-type", "orders/create"],
    )
    .expect("signed");
    assert_eq!(answer["status"], "accepted", "{answer}");
    assert_eq!(stack.database.receipt_count().await, 1);

    let refused = sign_and_send(&path, "shop-acme", body, &base, &[]).expect_err("refused");
    assert!(refused.contains("--event-type"), "{refused}");
}

/// Runs `inboundctl sign-event` for `integration` (with `extra` flags), then the `curl`
/// command it printed: the ingress's JSON answer, or what sign-event said when it refused.
fn sign_and_send(
    config: &str,
    integration: &str,
    body: &str,
    base: &str,
    extra: &[&str],
) -> Result<serde_json::Value, String> {
    let mut args = vec![
        "sign-event",
        "--config",
        config,
        "--integration",
        integration,
        "--body",
        body,
        "--url",
        base,
    ];
    args.extend_from_slice(extra);
    let output = inboundctl(&args, &fixtures::secret_env());
    if !output.status.success() {
        return Err(text(&output.stderr));
    }
    let command = text(&output.stdout);
    let sent = Command::new("sh")
        .args(["-c", command.trim()])
        .output()
        .expect("run curl");
    Ok(serde_json::from_slice(&sent.stdout)
        .unwrap_or_else(|_| panic!("no JSON answer to {command}: {}", text(&sent.stdout))))
}

#[tokio::test]
async fn sign_event_prints_a_curl_command_the_ingress_accepts() {
    let stack = Stack::start().await;
    let scratch = ScratchDir::new();
    let path = write_config(&scratch, |_| {});
    let body = r#"{"id":"evt_from_curl","type":"payment_intent.succeeded","account":"acct_123","livemode":true}"#;
    let base = format!("http://{}", stack.ingress.addr);
    let answer = sign_and_send(&path, "stripe-acme", body, &base, &[]).expect("signed");
    assert_eq!(answer["status"], "accepted", "{answer}");
    assert_eq!(stack.database.receipt_count().await, 1);
}

/// A succeeded payment of `stripe-acme` accepted as the ingress would: its receipt id.
async fn accepted_payment(pool: &sqlx::PgPool, event_id: &str, payment: &str, order: &str) -> i64 {
    use inbound_tests::domain;
    let body = domain::stripe_event(
        event_id,
        "payment_intent.succeeded",
        domain::payment_intent(payment, order, 1000, "usd", "succeeded"),
    );
    domain::accept(pool, &domain::config(), &body)
        .await
        .expect("new")
}

/// A payment receipt waiting out its retry delay after three attempts, in a database of
/// its own: the database, the environment that names it, and the receipt's id.
async fn a_receipt_in_backoff() -> (TestDatabase, [(String, String); 1], i64) {
    let database = TestDatabase::create().await;
    let env = [("DATABASE_URL".to_owned(), database.url().to_owned())];
    let receipt = accepted_payment(database.pool(), "evt_wait", "pi_w", "o_w").await;
    sqlx::query(
        "UPDATE receipt_queue SET visible_at = now() + interval '1 hour', attempts = 3 WHERE receipt_id = $1",
    )
    .bind(receipt)
    .execute(database.pool())
    .await
    .expect("backing off");
    (database, env, receipt)
}

/// `receipts replay RECEIPT --reason "order created" --by ops`, which must succeed.
fn replay_by_ops(env: &[(String, String)], receipt: i64) {
    let id = receipt.to_string();
    let output = inboundctl(
        &[
            "receipts",
            "replay",
            &id,
            "--reason",
            "order created",
            "--by",
            "ops",
        ],
        env,
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
}

/// After a fix, a receipt waiting out its retry delay can be run now: `receipts replay`
/// makes it due at once (audited like any replay), keeping its attempts.
#[tokio::test]
async fn replay_runs_a_receipt_waiting_in_backoff_now() {
    let (database, env, receipt) = a_receipt_in_backoff().await;
    let pool = database.pool();
    replay_by_ops(&env, receipt);
    let (due, attempts): (bool, i32) = sqlx::query_as(
        "SELECT visible_at <= now(), attempts FROM receipt_queue WHERE receipt_id = $1",
    )
    .bind(receipt)
    .fetch_one(pool)
    .await
    .expect("queue row");
    assert!(due, "made due now");
    assert_eq!(attempts, 3, "its attempts are kept");
    let audited: (String, String, String) = sqlx::query_as(
        "SELECT previous_status, replayed_by, reason FROM receipt_replays WHERE receipt_id = $1",
    )
    .bind(receipt)
    .fetch_one(pool)
    .await
    .expect("audited");
    assert_eq!(
        audited,
        (
            "pending".to_owned(),
            "ops".to_owned(),
            "order created".to_owned()
        )
    );
}

/// A receipt a worker is processing is not replayed: refused, and nothing is written.
#[tokio::test]
async fn replay_refuses_a_receipt_a_worker_is_processing() {
    let (database, env, receipt) = a_receipt_in_backoff().await;
    let pool = database.pool();
    replay_by_ops(&env, receipt);
    // A worker holds it: refused, nothing written.
    sqlx::query(
        "UPDATE receipt_queue SET leased_by = 'worker-1', visible_at = now() + interval '30 seconds' WHERE receipt_id = $1",
    )
    .bind(receipt)
    .execute(pool)
    .await
    .expect("leased");
    let output = inboundctl(
        &words(&format!("receipts replay {receipt} --reason again")),
        &env,
    );
    assert!(!output.status.success());
    assert!(
        text(&output.stderr).contains("being processed"),
        "{}",
        text(&output.stderr)
    );
    let replays: i64 = sqlx::query_scalar("SELECT count(*) FROM receipt_replays")
        .fetch_one(pool)
        .await
        .expect("count");
    assert_eq!(replays, 1);
}

/// Triage without psql: the list says why a receipt waits, the receipt says who replayed
/// it and why.
#[tokio::test]
async fn a_waiting_receipt_is_listed_with_its_error_and_shown_with_who_replayed_it() {
    let (database, env, receipt) = a_receipt_in_backoff().await;
    let pool = database.pool();
    replay_by_ops(&env, receipt);
    sqlx::query("UPDATE receipts SET last_error = 'order o_w does not exist (yet)' WHERE id = $1")
        .bind(receipt)
        .execute(pool)
        .await
        .expect("an error");
    let listed = inboundctl(&words("receipts list --status pending"), &env);
    assert!(
        text(&listed.stdout).contains("order o_w does not exist (yet)"),
        "{}",
        text(&listed.stdout)
    );
    let listed = inboundctl(&words("receipts list --status pending --json"), &env);
    let rows: serde_json::Value = serde_json::from_slice(&listed.stdout).expect("JSON");
    assert_eq!(
        rows[0]["reason"], "order o_w does not exist (yet)",
        "{rows}"
    );
    let shown = inboundctl(&["receipts", "show", &receipt.to_string()], &env);
    // Who, as they named themselves, and the database role that recorded it.
    let role: String = sqlx::query_scalar("SELECT session_user::text")
        .fetch_one(pool)
        .await
        .expect("role");
    assert!(
        text(&shown.stdout).contains(&format!(
            "replayed by ops as role {role} (was pending): order created"
        )),
        "{}",
        text(&shown.stdout)
    );
    let shown = inboundctl(&words(&format!("receipts show {receipt} --json")), &env);
    let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).expect("JSON");
    assert_eq!(shown["history"][0]["by"], "ops", "{shown}");
}

/// A database holding one accepted payment, the environment that names it, and the
/// receipt's id.
async fn one_accepted_payment() -> (TestDatabase, [(String, String); 1], i64) {
    let database = TestDatabase::create().await;
    let env = [("DATABASE_URL".to_owned(), database.url().to_owned())];
    let receipt = accepted_payment(database.pool(), "evt_1", "pi_1", "o1").await;
    (database, env, receipt)
}

fn json_of(output: Output) -> serde_json::Value {
    assert!(output.status.success(), "{}", text(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("JSON")
}

#[tokio::test]
async fn status_and_list_through_the_binary() {
    let (_database, env, receipt) = one_accepted_payment().await;
    let status = json_of(inboundctl(&["status", "--json"], &env));
    assert_eq!(status["receipts"]["pending"], 1, "{status}");
    assert_eq!(status["effects"]["pending"], 0, "{status}");
    assert!(
        status["oldest_pending_age_seconds"]["stripe-acme"]
            .as_f64()
            .is_some(),
        "{status}"
    );

    let listed = json_of(inboundctl(
        &words("receipts list --status pending --json"),
        &env,
    ));
    assert_eq!(listed[0]["id"], receipt);
    // A usage error (exit 2) that lists the statuses there are.
    let refused = inboundctl(&words("receipts list --status stuck"), &env);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        text(&refused.stderr).contains("[possible values: pending, done, quarantined, failed]"),
        "{}",
        text(&refused.stderr)
    );
}

#[tokio::test]
async fn a_quarantined_receipt_is_shown_and_replayed_through_the_binary() {
    use inbound_tests::domain;
    let (database, env, receipt) = one_accepted_payment().await;
    let pool = database.pool();
    // A quarantined receipt, shown, then replayed with who and why.
    sqlx::query("DELETE FROM receipt_queue")
        .execute(pool)
        .await
        .expect("dequeue");
    sqlx::query("UPDATE receipts SET status = 'quarantined', outcome_reason = 'amount mismatch', finished_at = now()")
        .execute(pool)
        .await
        .expect("quarantine");
    let shown = json_of(inboundctl(
        &words(&format!("receipts show {receipt} --json")),
        &env,
    ));
    assert_eq!(shown["receipt"]["status"], "quarantined");
    assert_eq!(shown["receipt"]["outcome_reason"], "amount mismatch");
    assert_eq!(shown["receipt"]["payload"]["id"], "evt_1");
    assert_eq!(shown["complete"], false, "quarantined is not complete");
    let human = inboundctl(&["receipts", "show", &receipt.to_string()], &env);
    assert!(
        text(&human.stdout).contains("reason       amount mismatch"),
        "{}",
        text(&human.stdout)
    );
    let unknown = inboundctl(&["receipts", "show", "424242"], &env);
    assert_eq!(unknown.status.code(), Some(1));
    assert!(text(&unknown.stderr).contains("receipt 424242 does not exist"));

    let replayed = inboundctl(
        &[
            "receipts",
            "replay",
            &receipt.to_string(),
            "--reason",
            "fixed the order",
            "--by",
            "alice",
        ],
        &env,
    );
    assert!(replayed.status.success(), "{}", text(&replayed.stderr));
    assert_eq!(
        domain::receipt_state(pool, receipt).await.0,
        ReceiptStatus::Pending
    );
    let again = inboundctl(
        &words(&format!("receipts replay {receipt} --reason again")),
        &env,
    );
    // Pending again and not held by a worker: replaying runs it now (audited too).
    assert!(again.status.success(), "{}", text(&again.stderr));
    let replays: i64 = sqlx::query_scalar("SELECT count(*) FROM receipt_replays")
        .fetch_one(pool)
        .await
        .expect("replays");
    assert_eq!(replays, 2);
}

#[tokio::test]
async fn purge_through_the_binary_checks_its_ages_and_answers_in_json() {
    let (_database, env, _receipt) = one_accepted_payment().await;
    let bad_ages = inboundctl(
        &words("purge --payloads-older-than-days 30 --keys-older-than-days 7"),
        &env,
    );
    assert_eq!(bad_ages.status.code(), Some(1));
    let purged = json_of(inboundctl(
        &words("purge --payloads-older-than-days 30 --json"),
        &env,
    ));
    assert_eq!(
        purged,
        serde_json::json!({"payloads_purged": 0, "keys_purged": 0, "finished": true})
    );
}

/// Three pending payments of `stripe-acme` (o1 to o3) in a database of their own, every one
/// claimed by worker `w`: an operator's decision must win over a worker's lease.
struct HeldPayments {
    database: TestDatabase,
    env: [(String, String); 1],
    receipts: Vec<i64>,
    claimed: Vec<inbound_store::queue::ClaimedReceipt>,
}

impl HeldPayments {
    /// Receipt `n`'s id, as an argument.
    fn id(&self, n: usize) -> String {
        self.receipts[n].to_string()
    }
}

/// Seeds [`HeldPayments`].
async fn three_payments_a_worker_holds() -> HeldPayments {
    use inbound_tests::domain;
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config();
    let env = [("DATABASE_URL".to_owned(), database.url().to_owned())];
    let mut receipts = Vec::new();
    for n in 1..=3 {
        let body = domain::stripe_event(
            &format!("evt_{n}"),
            "payment_intent.succeeded",
            domain::payment_intent(
                &format!("pi_{n}"),
                &format!("o{n}"),
                1000,
                "usd",
                "succeeded",
            ),
        );
        receipts.push(domain::accept(pool, &config, &body).await.expect("new"));
    }
    // A worker holds their leases: the operator's decision wins, and the worker's fenced
    // completion later finds nothing to complete.
    let mut connection = pool.acquire().await.expect("connection");
    let claimed = domain::claim(&mut connection, 3, std::time::Duration::from_secs(30), "w").await;
    drop(connection);
    HeldPayments {
        database,
        env,
        receipts,
        claimed,
    }
}

/// `receipts quarantine` of the first `count` receipts `--reason "poison payload" --by bob`,
/// which must succeed and leave each of them quarantined for that reason.
async fn quarantine_by_bob(held: &HeldPayments, count: usize) {
    use inbound_tests::domain;
    let ids: Vec<String> = (0..count).map(|n| held.id(n)).collect();
    let mut args = vec!["receipts", "quarantine"];
    args.extend(ids.iter().map(String::as_str));
    args.extend(["--reason", "poison payload", "--by", "bob"]);
    let quarantined = inboundctl(&args, &held.env);
    assert!(
        quarantined.status.success(),
        "{}",
        text(&quarantined.stderr)
    );
    for &receipt in &held.receipts[..count] {
        let (status, outcome, reason) = domain::receipt_state(held.database.pool(), receipt).await;
        assert_eq!(
            (status.as_str(), outcome, reason.as_deref()),
            ("quarantined", None, Some("poison payload"))
        );
    }
}

#[tokio::test]
async fn pending_receipts_can_be_quarantined_or_failed_by_hand_and_are_audited() {
    use inbound_tests::domain;
    let held = three_payments_a_worker_holds().await;
    let (pool, receipts) = (held.database.pool(), &held.receipts);
    quarantine_by_bob(&held, 2).await;
    let failed = inboundctl(
        &[
            "receipts",
            "fail",
            &held.id(2),
            "--reason",
            "give up",
            "--by",
            "carol",
            "--json",
        ],
        &held.env,
    );
    assert!(failed.status.success(), "{}", text(&failed.stderr));
    let last_error: Option<String> =
        sqlx::query_scalar("SELECT last_error FROM receipts WHERE id = $1")
            .bind(receipts[2])
            .fetch_one(pool)
            .await
            .expect("receipt");
    assert_eq!(
        domain::receipt_state(pool, receipts[2]).await.0,
        ReceiptStatus::Failed
    );
    assert_eq!(last_error.as_deref(), Some("give up"));
    let queued: i64 = sqlx::query_scalar("SELECT count(*) FROM receipt_queue")
        .fetch_one(pool)
        .await
        .expect("count");
    assert_eq!(queued, 0, "none of them is claimable any more");
    let audit: Vec<(i64, String, String, String, String)> = sqlx::query_as(
        "SELECT receipt_id, previous_status, action, resolved_by, reason FROM receipt_resolutions ORDER BY id",
    )
    .fetch_all(pool)
    .await
    .expect("audit");
    let expected = |n: usize, action: &str, by: &str, reason: &str| {
        (
            receipts[n],
            "pending".to_owned(),
            action.to_owned(),
            by.to_owned(),
            reason.to_owned(),
        )
    };
    assert_eq!(
        audit,
        [
            expected(0, "quarantine", "bob", "poison payload"),
            expected(1, "quarantine", "bob", "poison payload"),
            expected(2, "fail", "carol", "give up"),
        ]
    );
}

/// The worker whose lease an operator's quarantine overrode finds, at its fenced
/// completion, nothing to complete: the receipt stays quarantined.
#[tokio::test]
async fn a_worker_finds_nothing_to_complete_on_a_receipt_quarantined_by_hand() {
    use inbound_tests::domain;
    let held = three_payments_a_worker_holds().await;
    let pool = held.database.pool();
    quarantine_by_bob(&held, 2).await;
    let worker = domain::worker(pool, domain::settings());
    let attempt = inbound_worker::test_hooks::process(&worker, held.claimed[1].clone()).await;
    assert_eq!(attempt, inbound_worker::test_hooks::Attempt::LeaseLost);
    assert_eq!(
        domain::receipt_state(pool, held.receipts[1]).await.0,
        ReceiptStatus::Quarantined
    );
}

/// A decision by hand is all or nothing: one id that is not pending refuses the whole
/// command; an unknown id, or a reason that says nothing, is refused too.
#[tokio::test]
async fn a_decision_by_hand_is_all_or_nothing_and_needs_a_known_id_and_a_reason() {
    use inbound_tests::domain;
    let held = three_payments_a_worker_holds().await;
    let (pool, receipts, env) = (held.database.pool(), &held.receipts, &held.env);
    quarantine_by_bob(&held, 2).await;
    // All or nothing: one id that is not pending refuses the whole command.
    let refused = inboundctl(
        &[
            "receipts",
            "fail",
            &held.id(2),
            &held.id(0),
            "--reason",
            "give up",
        ],
        env,
    );
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        text(&refused.stderr).contains(&format!(
            "receipt {} is quarantined; only pending receipts can be quarantined or failed by hand",
            receipts[0]
        )),
        "{}",
        text(&refused.stderr)
    );
    assert_eq!(
        domain::receipt_state(pool, receipts[2]).await.0,
        ReceiptStatus::Pending
    );
    let unknown = inboundctl(&words("receipts fail 424242 --reason x"), env);
    assert!(text(&unknown.stderr).contains("receipt 424242 does not exist"));
    let no_reason = inboundctl(&["receipts", "fail", &held.id(2), "--reason", " "], env);
    assert!(text(&no_reason.stderr).contains("--reason must say why"));
}

/// A receipt quarantined by hand can be replayed as any quarantined one.
#[tokio::test]
async fn a_receipt_quarantined_by_hand_can_be_replayed() {
    use inbound_tests::domain;
    let held = three_payments_a_worker_holds().await;
    quarantine_by_bob(&held, 2).await;
    let replayed = inboundctl(
        &["receipts", "replay", &held.id(0), "--reason", "fixed"],
        &held.env,
    );
    assert!(replayed.status.success(), "{}", text(&replayed.stderr));
    assert_eq!(
        domain::receipt_state(held.database.pool(), held.receipts[0])
            .await
            .0,
        ReceiptStatus::Pending
    );
}

/// Makes an effect in `status` with one recorded attempt; returns its id.
async fn effect_in(pool: &sqlx::PgPool, key: &str, status: &str) -> i64 {
    use inbound_tests::domain;
    let config = domain::config();
    let body = domain::stripe_event(
        &format!("evt_{key}"),
        "payment_intent.succeeded",
        domain::payment_intent("pi", "o", 1, "usd", "succeeded"),
    );
    let receipt = domain::accept(pool, &config, &body).await.expect("new");
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO effects (receipt_id, operation_key, sink, kind, tenant, data, event, status, attempts, last_error)
         VALUES ($1, $2, 'audit', 'order.paid', 'acme', '{}', '{}', $3, 1, 'server error 502') RETURNING id",
    )
    .bind(receipt)
    .bind(key)
    .bind(status)
    .fetch_one(pool)
    .await
    .expect("effect");
    sqlx::query("INSERT INTO effect_attempts (effect_id, attempt, kind, finished_at, outcome, status_code, error) VALUES ($1, 1, 'delivery', now(), 'server_error', 502, 'bad gateway')")
        .bind(id)
        .execute(pool)
        .await
        .expect("attempt");
    id
}

/// On call, failed effects are read from their first: `effects list --oldest-first` pages
/// upwards with `--after`, and `--summary` gives each sink's count, age and first error,
/// so the error that started it is found without paging or guessing.
#[tokio::test]
async fn effects_are_listed_oldest_first_and_summarised_per_sink_with_the_first_error() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let env = [("DATABASE_URL".to_owned(), database.url().to_owned())];
    let mut ids = Vec::new();
    for (key, sink, error) in [
        ("first", "audit", "refused: 422 unknown customer"),
        ("second", "audit", "refused: 400 bad address"),
        ("third", "billing", "refused: 409 conflict"),
        ("fourth", "audit", "refused: 400 bad address"),
    ] {
        let id = effect_in(pool, key, "failed").await;
        sqlx::query("UPDATE effects SET sink = $2, last_error = $3 WHERE id = $1")
            .bind(id)
            .bind(sink)
            .bind(error)
            .execute(pool)
            .await
            .expect("sink and error");
        ids.push(id);
    }
    let keys = |listed: &serde_json::Value| -> Vec<String> {
        listed
            .as_array()
            .expect("array")
            .iter()
            .map(|row| row["operation_key"].as_str().expect("key").to_owned())
            .collect()
    };
    let first_page = json_of(inboundctl(
        &words("effects list --status failed --oldest-first --limit 2 --json"),
        &env,
    ));
    assert_eq!(keys(&first_page), ["first", "second"]);
    let second_page = json_of(inboundctl(
        &[
            "effects",
            "list",
            "--status",
            "failed",
            "--oldest-first",
            "--after",
            &ids[1].to_string(),
            "--json",
        ],
        &env,
    ));
    assert_eq!(keys(&second_page), ["third", "fourth"]);
    let summary = json_of(inboundctl(
        &words("effects list --status failed --summary --json"),
        &env,
    ));
    assert_eq!(summary[0]["sink"], "audit");
    assert_eq!(summary[0]["count"], 3);
    assert_eq!(summary[0]["first_error"], "refused: 422 unknown customer");
    assert_eq!(summary[0]["first_id"], ids[0]);
    assert_eq!(summary[1]["sink"], "billing");
    assert_eq!(summary[1]["count"], 1);
    let printed = inboundctl(&words("effects list --status failed --summary"), &env);
    let printed = text(&printed.stdout);
    assert!(
        printed.contains("refused: 422 unknown customer") && printed.contains("billing"),
        "{printed}"
    );
    // Newest first stays the default; --after belongs to oldest first.
    let newest = json_of(inboundctl(
        &words("effects list --status failed --limit 1 --json"),
        &env,
    ));
    assert_eq!(keys(&newest), ["fourth"]);
    let refused = inboundctl(&words("effects list --status failed --after 1"), &env);
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused.stderr));
}

/// `sign-event` needs the secret of the integration it signs for, and only that one: with
/// only `EXAMPLE_STRIPE_SECRET` set, `config/example.toml` signs a Stripe event (no
/// sink's or other integration's secret asked for), and without it the error names it.
#[test]
fn sign_event_needs_only_the_secret_of_the_integration_it_signs_for() {
    let config = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../config/example.toml")
        .display()
        .to_string();
    let body = r#"{"id":"evt_only_stripe","object":"event","type":"payment_intent.succeeded","livemode":false}"#;
    let args = [
        "sign-event",
        "--config",
        &config,
        "--integration",
        "stripe-example",
        "--body",
        body,
    ];
    let signed = inboundctl(
        &args,
        &[(
            "EXAMPLE_STRIPE_SECRET".to_owned(),
            "whsec_only_this_one".to_owned(),
        )],
    );
    assert!(signed.status.success(), "{}", text(&signed.stderr));
    assert!(
        text(&signed.stdout).contains("Stripe-Signature"),
        "{}",
        text(&signed.stdout)
    );
    let unsigned = inboundctl(&args, &[]);
    assert_eq!(unsigned.status.code(), Some(1));
    assert!(
        text(&unsigned.stderr).contains("EXAMPLE_STRIPE_SECRET"),
        "{}",
        text(&unsigned.stderr)
    );
}

/// Usage lines do not mark a flag the environment can give (`--database-url` from
/// `DATABASE_URL`, `--config` from `INBOUND_CONFIG`) as required; the help says where it
/// comes from, and leaving both out is still a usage error naming the flag and variable.
#[test]
fn usage_lines_do_not_demand_flags_the_environment_gives() {
    for (binary_name, args) in [
        ("inboundctl", &["status", "--help"][..]),
        ("inboundctl", &["receipts", "replay", "--help"][..]),
        ("inbound-ingress", &["--help"][..]),
        ("inbound-worker", &["--help"][..]),
    ] {
        let output = Command::new(binary(binary_name))
            .args(args)
            .output()
            .expect("help");
        let help = text(&output.stdout);
        let usage = help
            .lines()
            .find(|line| line.starts_with("Usage:"))
            .unwrap_or_else(|| panic!("{binary_name} {args:?}: no usage line: {help}"));
        assert!(
            !usage.contains("--database-url") && !usage.contains("--config <"),
            "{binary_name} {args:?}: {usage}"
        );
        assert!(
            help.contains("[env: DATABASE_URL]"),
            "{binary_name} {args:?}: {help}"
        );
    }
    let missing = inboundctl(&["status"], &[]);
    assert_eq!(missing.status.code(), Some(2), "{}", text(&missing.stderr));
    let error = text(&missing.stderr);
    assert!(
        error.contains("--database-url") && error.contains("DATABASE_URL"),
        "{error}"
    );
}

/// A completed effect was delivered: `effects show` says so, never "may have been
/// delivered" (which is for an attempt whose outcome is unknown).
#[tokio::test]
async fn a_completed_effect_is_shown_as_delivered() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let env = [("DATABASE_URL".to_owned(), database.url().to_owned())];
    let id = effect_in(pool, "op_done", "completed").await;
    sqlx::query("UPDATE effects SET maybe_delivered = true WHERE id = $1")
        .bind(id)
        .execute(pool)
        .await
        .expect("delivered");
    let shown = text(&inboundctl(&["effects", "show", &id.to_string()], &env).stdout);
    assert!(
        shown.contains("completed after 1 attempt(s), delivered"),
        "{shown}"
    );
    assert!(!shown.contains("may have been"), "{shown}");
}

/// How many resolutions are recorded for `effects`.
async fn resolutions_of(pool: &sqlx::PgPool, effects: &[i64]) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM effect_resolutions WHERE effect_id = ANY($1)")
        .bind(effects)
        .fetch_one(pool)
        .await
        .expect("resolutions")
}

/// After a fix at the receiver, an effect waiting out its retry delay can be sent now:
/// `effects resolve --retry` on a pending effect makes it due at once (audited) and keeps
/// what its history says (an attempt that may have landed is still resent only with the
/// same key).
#[tokio::test]
async fn retry_sends_a_pending_effect_now_and_keeps_its_history() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let env = [("DATABASE_URL".to_owned(), database.url().to_owned())];
    let id = effect_in(pool, "op_waiting", "pending").await;
    sqlx::query(
        "UPDATE effects SET visible_at = now() + interval '1 hour', maybe_delivered = true,
                            first_attempt_at = now() - interval '1 minute'
         WHERE id = $1",
    )
    .bind(id)
    .execute(pool)
    .await
    .expect("backing off");
    // When it would go next is shown, so the operator knows what waiting costs.
    let shown = inboundctl(&["effects", "show", &id.to_string()], &env);
    assert!(
        text(&shown.stdout).contains("next attempt"),
        "{}",
        text(&shown.stdout)
    );
    let shown = inboundctl(&words(&format!("effects show {id} --json")), &env);
    let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).expect("JSON");
    assert!(shown["effect"]["next_attempt_at"].is_string(), "{shown}");
    let output = inboundctl(
        &[
            "effects",
            "resolve",
            &id.to_string(),
            "--retry",
            "--note",
            "sink fixed",
            "--by",
            "ops",
        ],
        &env,
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let (status, due, maybe_delivered, first_attempt_kept): (String, bool, bool, bool) =
        sqlx::query_as(
            "SELECT status, visible_at <= now(), maybe_delivered, first_attempt_at IS NOT NULL
             FROM effects WHERE id = $1",
        )
        .bind(id)
        .fetch_one(pool)
        .await
        .expect("effect");
    assert_eq!(status, "pending");
    assert!(due, "made due now");
    assert!(maybe_delivered && first_attempt_kept, "its history is kept");
    let audited: (String, String) = sqlx::query_as(
        "SELECT previous_status, action FROM effect_resolutions WHERE effect_id = $1",
    )
    .bind(id)
    .fetch_one(pool)
    .await
    .expect("audited");
    assert_eq!(audited, ("pending".to_owned(), "retry".to_owned()));
}

/// After an outage, several pending effects are retried in one command, each audited.
#[tokio::test]
async fn several_pending_effects_are_retried_at_once_after_an_outage() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let env = [("DATABASE_URL".to_owned(), database.url().to_owned())];
    let first = effect_in(pool, "op_outage_1", "pending").await;
    let second = effect_in(pool, "op_outage_2", "pending").await;
    let output = inboundctl(
        &[
            "effects",
            "resolve",
            &first.to_string(),
            &second.to_string(),
            "--retry",
            "--note",
            "outage over",
        ],
        &env,
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(resolutions_of(pool, &[first, second]).await, 2);
}

/// An effect being delivered is not retried, and with it the whole command is refused:
/// the pending effect named beside it is not resolved either.
#[tokio::test]
async fn retrying_an_effect_being_delivered_refuses_the_whole_command() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let env = [("DATABASE_URL".to_owned(), database.url().to_owned())];
    let in_flight = effect_in(pool, "op_in_flight", "in_flight").await;
    let waiting = effect_in(pool, "op_waiting_too", "pending").await;
    let output = inboundctl(
        &words(&format!(
            "effects resolve {waiting} {in_flight} --retry --note now"
        )),
        &env,
    );
    assert!(!output.status.success());
    assert_eq!(resolutions_of(pool, &[waiting]).await, 0, "all or nothing");
}

/// A database error is said once, without the driver's "at line N".
#[tokio::test]
async fn a_database_error_is_printed_once() {
    let database = TestDatabase::create_unmigrated().await;
    let env = [("DATABASE_URL".to_owned(), database.url().to_owned())];
    let output = inboundctl(&["status"], &env);
    assert!(!output.status.success());
    let stderr = text(&output.stderr);
    assert_eq!(stderr.matches("does not exist").count(), 1, "{stderr}");
    assert!(!stderr.contains(" at line "), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

#[tokio::test]
async fn effects_list_show_and_resolve_through_the_binary() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let env = [("DATABASE_URL".to_owned(), database.url().to_owned())];
    let review = effect_in(pool, "k-review", "review").await;
    let in_flight = effect_in(pool, "k-flight", "in_flight").await;
    let listed = json_of(inboundctl(
        &words("effects list --status review --json"),
        &env,
    ));
    assert_eq!(listed.as_array().map(Vec::len), Some(1));
    assert_eq!(listed[0]["operation_key"], "k-review");
    let shown = json_of(inboundctl(
        &words(&format!("effects show {review} --json")),
        &env,
    ));
    assert_eq!(shown["attempts"][0]["status_code"], 502);
    assert_eq!(shown["attempts"][0]["error"], "bad gateway");

    let resolved = inboundctl(
        &[
            "effects",
            "resolve",
            &review.to_string(),
            "--completed",
            "--note",
            "checked with the fulfilment team",
            "--by",
            "bob",
        ],
        &env,
    );
    assert!(resolved.status.success(), "{}", text(&resolved.stderr));
    let shown = json_of(inboundctl(
        &words(&format!("effects show {review} --json")),
        &env,
    ));
    assert_eq!(shown["effect"]["status"], "completed");
    assert_eq!(shown["resolutions"][0]["resolved_by"], "bob");
    assert_eq!(shown["resolutions"][0]["previous_status"], "review");

    for (id, args, message) in [
        (
            review,
            vec!["--retry"],
            "is completed; --retry applies only to pending, uncertain, review, failed",
        ),
        (
            in_flight,
            vec!["--abandon"],
            "is in_flight; --abandon applies only to pending, uncertain, review, failed",
        ),
        (424242, vec!["--completed"], "effect 424242 does not exist"),
    ] {
        let id = id.to_string();
        let mut call = vec!["effects", "resolve", id.as_str()];
        call.extend(args);
        call.extend(["--note", "n"]);
        let refused = inboundctl(&call, &env);
        assert_eq!(refused.status.code(), Some(1), "{call:?}");
        assert!(
            text(&refused.stderr).contains(message),
            "{}",
            text(&refused.stderr)
        );
    }
    let no_action = inboundctl(
        &words(&format!("effects resolve {in_flight} --note n")),
        &env,
    );
    assert_eq!(no_action.status.code(), Some(1));
    assert!(text(&no_action.stderr).contains("--completed, --retry or --abandon"));
}

/// What `inboundctl dev-sink` prints after its first line.
type PrintedLines = std::io::Lines<std::io::BufReader<std::process::ChildStdout>>;

/// `inboundctl dev-sink` on a free port, verifying with `secret`, with `extra` flags: the
/// running child, the lines it prints after its first, and the address the first names.
fn start_dev_sink(secret: &str, extra: &[&str]) -> (std::process::Child, PrintedLines, String) {
    use std::io::BufRead;
    let mut args = vec!["dev-sink", "--listen", "127.0.0.1:0", "--secret", secret];
    args.extend_from_slice(extra);
    let mut child = Inboundctl::new()
        .command(&args)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn dev-sink");
    let mut lines = std::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let first = lines.next().expect("a line").expect("utf-8");
    let addr = first
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .expect("address")
        .to_owned();
    (child, lines, addr)
}

/// The signature headers a dispatcher sends `body` of `operation_key` with, under `secret`.
fn signed_as_a_dispatcher(secret: &str, operation_key: &str, body: &str) -> Vec<(String, String)> {
    let key = inbound_core::verify::decode_standard_secret(secret).expect("secret");
    inbound_core::effects::signature_headers(
        &[key],
        operation_key,
        chrono::Utc::now().timestamp(),
        body.as_bytes(),
    )
    .into_iter()
    .map(|(name, value)| (name.to_owned(), value))
    .collect()
}

/// The status the sink answers `POST url` of `body` with `headers`.
async fn posted(
    client: &inbound_tests::http::HttpClient,
    url: &str,
    headers: &[(String, String)],
    body: &'static str,
) -> u16 {
    client
        .post(url, headers, body)
        .await
        .expect("answer")
        .status
}

#[tokio::test]
async fn dev_sink_verifies_signatures_counts_repeats_and_answers_reconciliation() {
    let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let (mut child, lines, addr) = start_dev_sink(secret, &["--fail-first", "1"]);
    let client = inbound_tests::http::HttpClient::new();
    let url = format!("http://{addr}/effects");
    let body =
        r#"{"operation_key":"order.paid:acme:o1","kind":"order.paid","tenant":"acme","data":{}}"#;
    let signed = signed_as_a_dispatcher(secret, "order.paid:acme:o1", body);
    assert_eq!(
        posted(&client, &url, &signed, body).await,
        503,
        "--fail-first 1"
    );
    assert_eq!(posted(&client, &url, &signed, body).await, 200);
    assert_eq!(posted(&client, &url, &signed, body).await, 200);
    assert_eq!(posted(&client, &url, &[], body).await, 401, "unsigned");
    let known = client
        .get(&format!("http://{addr}/operations/order.paid%3Aacme%3Ao1"))
        .await
        .expect("answer");
    assert_eq!(
        (known.status, known.json["status"].as_str()),
        (200, Some("completed"))
    );
    assert_eq!(
        client
            .get(&format!("http://{addr}/operations/nope"))
            .await
            .expect("answer")
            .status,
        404
    );
    child.kill().ok();
    child.wait().ok();
    let printed: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(
        printed
            .iter()
            .any(|line| line.contains("order.paid:acme:o1")
                && line.contains("signature=valid: applied")),
        "{printed:#?}"
    );
    assert!(
        printed
            .iter()
            .any(|line| line.contains("repeat #2, already applied")),
        "{printed:#?}"
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
