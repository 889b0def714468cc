//! `inboundctl` through the real binary: `check-config`, `migrate`, and `sign-event`, whose
//! printed curl command must be accepted by a running ingress.

use std::process::{Command, Output};

use inbound_tests::database::{admin_url, with_database};
use inbound_tests::fixtures;
use inbound_tests::process::{ScratchDir, binary};
use inbound_tests::{Service, TestDatabase};

fn inboundctl(args: &[&str], env: &[(String, String)]) -> Output {
    Command::new(binary("inboundctl"))
        .args(args)
        .env_remove("DATABASE_URL")
        .env_remove("INBOUND_CONFIG")
        .envs(env.iter().map(|(name, value)| (name, value)))
        .output()
        .expect("run inboundctl")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Writes the test configuration (and its secret file) into `scratch`.
fn write_config(scratch: &ScratchDir, edit: impl Fn(String) -> String) -> String {
    let options = fixtures::ingress_options("unused");
    for (name, contents) in &options.files {
        std::fs::write(scratch.path().join(name), contents).expect("write file");
    }
    let config = edit(
        options
            .config_toml
            .replace("{scratch}", &scratch.path().display().to_string()),
    );
    let path = scratch.path().join("config.toml");
    std::fs::write(&path, config).expect("write config");
    path.display().to_string()
}

#[test]
fn check_config_accepts_a_valid_file() {
    let scratch = ScratchDir::new();
    let path = write_config(&scratch, |config| config);
    let output = inboundctl(
        &["check-config", "--config", &path],
        &fixtures::secret_env(),
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        text(&output.stdout).contains("ok (4 integrations, 1 sinks)"),
        "{}",
        text(&output.stdout)
    );
}

#[test]
fn check_config_names_the_bad_field_in_one_line() {
    let scratch = ScratchDir::new();
    let cases: [(&str, &str, &str); 4] = [
        (
            "provider = \"slack\"",
            "provider = \"slak\"",
            "integration[2] (slack-acme).provider: unknown provider \"slak\"",
        ),
        (
            "handler = \"orders.mark_paid\"",
            "handler = \"orders.pay\"",
            "integration[0] (stripe-acme).routes.\"payment_intent.succeeded\".handler: unknown handler \"orders.pay\"",
        ),
        (
            "id = \"gh-acme\"",
            "id = \"stripe-acme\"",
            "integration[1] (stripe-acme).id: duplicate integration id",
        ),
        (
            "sink = \"audit\" }\n\"push\"",
            "sink = \"elsewhere\" }\n\"push\"",
            "integration[1] (gh-acme).routes.\"pull_request.opened\".sink: unknown sink \"elsewhere\"",
        ),
    ];
    for (from, to, expected) in cases {
        let path = write_config(&scratch, |config| {
            assert!(config.contains(from), "fixture holds {from}");
            config.replacen(from, to, 1)
        });
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
fn check_config_refuses_a_bad_standard_secret_without_printing_it() {
    let scratch = ScratchDir::new();
    let path = write_config(&scratch, |config| config);
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

#[tokio::test]
async fn migrate_creates_the_database_and_is_idempotent() {
    let name = format!("inbound_ctl_migrate_{}", rand::random::<u32>());
    let url = with_database(&admin_url(), &name);
    for _ in 0..2 {
        let output = inboundctl(
            &["migrate", "--create-database"],
            &[("DATABASE_URL".to_owned(), url.clone())],
        );
        assert!(output.status.success(), "{}", text(&output.stderr));
        assert!(text(&output.stdout).contains("migrations applied"));
    }
    let pool = sqlx::PgPool::connect(&url).await.expect("connect");
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1",
    )
    .fetch_all(&pool)
    .await
    .expect("tables");
    assert!(
        tables.contains(&"receipts".to_owned()) && tables.contains(&"receipt_queue".to_owned()),
        "{tables:?}"
    );
    pool.close().await;
    let admin = sqlx::PgPool::connect(&admin_url()).await.expect("admin");
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE {name} WITH (FORCE)"
    )))
    .execute(&admin)
    .await
    .expect("drop");
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
async fn sign_event_prints_a_curl_command_the_ingress_accepts() {
    let database = TestDatabase::create().await;
    let ingress = Service::ingress(&fixtures::ingress_options(database.url()));
    let scratch = ScratchDir::new();
    let path = write_config(&scratch, |config| config);
    let body = r#"{"id":"evt_from_curl","type":"payment_intent.succeeded","account":"acct_123","livemode":true}"#;
    let base = format!("http://{}", ingress.addr);
    let output = inboundctl(
        &[
            "sign-event",
            "--config",
            &path,
            "--integration",
            "stripe-acme",
            "--body",
            body,
            "--url",
            &base,
        ],
        &fixtures::secret_env(),
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let command = text(&output.stdout);
    let sent = Command::new("sh")
        .args(["-c", command.trim()])
        .output()
        .expect("run curl");
    let answer: serde_json::Value = serde_json::from_slice(&sent.stdout).expect("JSON answer");
    assert_eq!(answer["status"], "accepted", "{command}");
    assert_eq!(database.receipt_count().await, 1);
}

#[tokio::test]
async fn status_list_show_replay_and_purge_through_the_binary() {
    use inbound_tests::domain;
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config();
    let env = [("DATABASE_URL".to_owned(), database.url().to_owned())];
    let body = domain::stripe_event(
        "evt_1",
        "payment_intent.succeeded",
        domain::payment_intent("pi_1", "o1", 1000, "usd", "succeeded"),
    );
    let receipt = domain::accept(pool, &config, &body).await.expect("new");
    let json_of = |output: Output| -> serde_json::Value {
        assert!(output.status.success(), "{}", text(&output.stderr));
        serde_json::from_slice(&output.stdout).expect("JSON")
    };

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
        &["receipts", "list", "--status", "pending", "--json"],
        &env,
    ));
    assert_eq!(listed[0]["id"], receipt);
    let refused = inboundctl(&["receipts", "list", "--status", "stuck"], &env);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        text(&refused.stderr)
            .contains("--status \"stuck\" is not one of pending, done, quarantined, failed")
    );

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
        &["receipts", "show", &receipt.to_string(), "--json"],
        &env,
    ));
    assert_eq!(shown["receipt"]["status"], "quarantined");
    assert_eq!(shown["receipt"]["outcome_reason"], "amount mismatch");
    assert_eq!(shown["receipt"]["payload"]["id"], "evt_1");
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
    assert_eq!(domain::receipt_state(pool, receipt).await.0, "pending");
    let again = inboundctl(
        &[
            "receipts",
            "replay",
            &receipt.to_string(),
            "--reason",
            "again",
        ],
        &env,
    );
    assert_eq!(again.status.code(), Some(1));
    assert!(
        text(&again.stderr)
            .contains("is pending; only failed or quarantined receipts can be replayed")
    );

    let bad_ages = inboundctl(
        &[
            "purge",
            "--payloads-older-than-days",
            "30",
            "--keys-older-than-days",
            "7",
        ],
        &env,
    );
    assert_eq!(bad_ages.status.code(), Some(1));
    let purged = json_of(inboundctl(
        &["purge", "--payloads-older-than-days", "30", "--json"],
        &env,
    ));
    assert_eq!(
        purged,
        serde_json::json!({"payloads_purged": 0, "keys_purged": 0})
    );
}
