//! The on-call engineer's `inboundctl`, through the real binary: find a receipt by the
//! provider's id; list by status, integration, owner, type and time a page at a time;
//! decide in bulk only after a dry run or an explicit `--yes`; close what will never be
//! processed; audits that always name someone; purge that counts first, keeps keys past
//! the providers' redelivery horizons and stops at a time budget; and shell completions.

use std::process::Output;

use inbound_core::states::{ReceiptOutcome, ReceiptStatus};
use inbound_tests::TestDatabase;
use inbound_tests::ctl::{Inboundctl, words};
use inbound_tests::domain;
use inbound_tests::fixtures;
use inbound_tests::process::ScratchDir;

/// inboundctl on the test database with the fixture's secrets.
fn inboundctl(database: &TestDatabase, args: &[&str], env: &[(&str, &str)]) -> Output {
    Inboundctl::new()
        .with_fixture_secrets()
        .database(database.url())
        .envs(env)
        .run(args)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn json_of(output: Output) -> serde_json::Value {
    assert!(output.status.success(), "{}", text(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("JSON")
}

fn ids(listed: &serde_json::Value) -> Vec<i64> {
    listed
        .as_array()
        .expect("an array")
        .iter()
        .map(|row| row["id"].as_i64().expect("an id"))
        .collect()
}

fn refused(output: &Output, message: &str) {
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stdout));
    assert!(
        text(&output.stderr).contains(message),
        "{}",
        text(&output.stderr)
    );
}

/// The test configuration with owners, written into `scratch`.
fn owned_config(scratch: &ScratchDir) -> String {
    let mut config = fixtures::config_edit();
    config.set("stripe-acme", "owner", "payments");
    config
        .sink("audit")
        .insert("owner".to_owned(), "audit-oncall".into());
    fixtures::write_config(&config, scratch)
}

/// `receipts close` takes a filter as `replay` does: a dry run first, `--yes` to act, a
/// narrowing filter besides the status, and only what is still in the status it chose.
#[tokio::test]
async fn receipts_are_closed_in_bulk_by_filter_after_a_dry_run() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let quarantined = [
        domain::receipt_in(pool, "evt_q1", "quarantined").await,
        domain::receipt_in(pool, "evt_q2", "quarantined").await,
    ];
    let failed = domain::receipt_in(pool, "evt_f1", "failed").await;
    let close = |extra: &[&str]| {
        let mut args = vec!["receipts", "close"];
        args.extend(extra);
        inboundctl(&database, &args, &[])
    };
    let dry = close(&words(
        "--status quarantined --integration stripe-acme --dry-run",
    ));
    assert!(dry.status.success(), "{}", text(&dry.stderr));
    assert!(
        text(&dry.stdout).contains("would close 2 receipt(s)"),
        "{}",
        text(&dry.stdout)
    );
    assert_eq!(
        domain::receipt_state(pool, quarantined[0]).await.0,
        ReceiptStatus::Quarantined
    );
    refused(
        &close(&words(
            "--status quarantined --integration stripe-acme --reason x",
        )),
        "the filter selects 2 receipt(s): add --yes",
    );
    refused(
        &close(&words("--status quarantined --yes --reason x")),
        "a change by filter needs more than a status",
    );
    refused(
        &close(&words("--status pending --since 1h --yes --reason x")),
        "cannot be closed",
    );
    let closed = close(&[
        "--status",
        "quarantined",
        "--since",
        "1h",
        "--yes",
        "--reason",
        "test-mode events sent to live (INC-9)",
    ]);
    assert!(closed.status.success(), "{}", text(&closed.stderr));
    for id in quarantined {
        assert_eq!(
            domain::receipt_state(pool, id).await,
            (
                ReceiptStatus::Done,
                Some(ReceiptOutcome::Closed),
                Some("test-mode events sent to live (INC-9)".into())
            )
        );
    }
    assert_eq!(
        domain::receipt_state(pool, failed).await.0,
        ReceiptStatus::Failed
    );
}

/// Receipts in the states an operator meets: two failed, one quarantined, one pending, in
/// a configuration with owners.
struct Seeded {
    database: TestDatabase,
    /// Holds the configuration file.
    _scratch: ScratchDir,
    config: String,
    first: i64,
    second: i64,
    odd: i64,
    waiting: i64,
}

async fn seeded() -> Seeded {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let scratch = ScratchDir::new();
    let config = owned_config(&scratch);
    let first = domain::receipt_in(pool, "evt_first", "failed").await;
    let second = domain::receipt_in(pool, "evt_second", "failed").await;
    let odd = domain::receipt_in(pool, "evt_odd", "quarantined").await;
    let waiting = domain::receipt_in(pool, "evt_waiting", "pending").await;
    Seeded {
        database,
        _scratch: scratch,
        config,
        first,
        second,
        odd,
        waiting,
    }
}

#[tokio::test]
async fn receipts_are_found_filtered_and_paged() {
    let Seeded {
        database,
        _scratch,
        first,
        second,
        ..
    } = seeded().await;
    // By the provider's id, in whatever scope it was stored.
    let found = json_of(inboundctl(
        &database,
        &words("receipts find --event-id evt_second --json"),
        &[],
    ));
    assert_eq!(ids(&found), vec![second]);
    refused(
        &inboundctl(&database, &words("receipts find --event-id evt_never"), &[]),
        "no receipt holds event id \"evt_never\"",
    );

    // Filters and a cursor.
    let list = |extra: &[&str]| {
        let mut args = vec!["receipts", "list", "--json"];
        args.extend(extra);
        json_of(inboundctl(&database, &args, &[]))
    };
    assert_eq!(ids(&list(&["--status", "failed"])), vec![second, first]);
    assert_eq!(
        ids(&list(&words(
            "--status failed --integration stripe-acme --since 1h"
        ))),
        vec![second, first]
    );
    assert_eq!(
        ids(&list(&words("--status failed --until 1h"))),
        Vec::<i64>::new()
    );
    assert_eq!(
        ids(&list(&words(
            "--status failed --type payment_intent.succeeded"
        )))
        .len(),
        2
    );
    assert_eq!(
        ids(&list(&words("--status failed --type charge.refunded"))),
        Vec::<i64>::new()
    );
    assert_eq!(
        ids(&list(&words(&format!("--status failed --before {second}")))),
        vec![first]
    );
    let page = inboundctl(
        &database,
        &words("receipts list --status failed --limit 1"),
        &[],
    );
    assert!(
        text(&page.stdout).contains(&format!("(more: --before {second})")),
        "{}",
        text(&page.stdout)
    );
}

/// A filter that names nothing is an error, not an empty list; a time that is none is a
/// usage error.
#[tokio::test]
async fn a_receipt_filter_that_names_nothing_is_an_error_not_an_empty_list() {
    let Seeded {
        database, _scratch, ..
    } = seeded().await;
    refused(
        &inboundctl(
            &database,
            &words("receipts list --status failed --integration stripe-acme-typo"),
            &[],
        ),
        "no integration \"stripe-acme-typo\"",
    );
    let bad_time = inboundctl(
        &database,
        &words("receipts list --status failed --since yesterday"),
        &[],
    );
    assert_eq!(
        bad_time.status.code(),
        Some(2),
        "{}",
        text(&bad_time.stderr)
    );
}

#[tokio::test]
async fn receipts_are_listed_by_owner_from_the_configuration() {
    let Seeded {
        database,
        _scratch,
        config,
        first,
        second,
        ..
    } = seeded().await;
    // Owners, from the configuration.
    let owned = json_of(inboundctl(
        &database,
        &words(&format!(
            "receipts list --status failed --owner payments --config {config} --json"
        )),
        &[],
    ));
    assert_eq!(ids(&owned), vec![second, first]);
    let shown = inboundctl(
        &database,
        &words(&format!("receipts list --status failed --config {config}")),
        &[],
    );
    assert!(
        text(&shown.stdout).contains("payments"),
        "{}",
        text(&shown.stdout)
    );
    refused(
        &inboundctl(
            &database,
            &words(&format!(
                "receipts list --status failed --owner nobody --config {config}"
            )),
            &[],
        ),
        "no integration is owned by \"nobody\"",
    );
    refused(
        &inboundctl(
            &database,
            &words("receipts list --status failed --owner payments"),
            &[],
        ),
        "--owner needs the configuration",
    );
    let status = json_of(inboundctl(
        &database,
        &words(&format!("status --config {config} --owner payments --json")),
        &[],
    ));
    assert_eq!(status["owners"]["stripe-acme"], "payments", "{status}");
    assert!(status["owners"].get("gh-acme").is_none(), "{status}");
}

#[tokio::test]
async fn receipts_are_replayed_in_bulk_after_a_dry_run_and_audited() {
    let Seeded {
        database,
        _scratch,
        first,
        second,
        ..
    } = seeded().await;
    let pool = database.pool();
    // Bulk replay: a dry run changes nothing, --yes replays all, audited.
    let dry = inboundctl(
        &database,
        &words("receipts replay --status failed --integration stripe-acme --dry-run"),
        &[],
    );
    assert!(dry.status.success(), "{}", text(&dry.stderr));
    assert!(
        text(&dry.stdout).contains("would replay 2 receipt(s)"),
        "{}",
        text(&dry.stdout)
    );
    assert_eq!(
        domain::receipt_state(pool, first).await.0,
        ReceiptStatus::Failed
    );
    let replayed = inboundctl(
        &database,
        &[
            "receipts",
            "replay",
            "--status",
            "failed",
            "--since",
            "1h",
            "--yes",
            "--reason",
            "order sync fixed (INC-7)",
        ],
        &[("INBOUND_OPERATOR", "carol")],
    );
    assert!(replayed.status.success(), "{}", text(&replayed.stderr));
    assert_eq!(
        domain::receipt_state(pool, first).await.0,
        ReceiptStatus::Pending
    );
    assert_eq!(
        domain::receipt_state(pool, second).await.0,
        ReceiptStatus::Pending
    );
    let by: Vec<String> =
        sqlx::query_scalar("SELECT replayed_by FROM receipt_replays ORDER BY receipt_id")
            .fetch_all(pool)
            .await
            .expect("replays");
    assert_eq!(by, vec!["carol", "carol"]);
}

/// A replay by filter is refused without `--yes` or a filter narrower than a status, and
/// never selects pending receipts; ids are exactly those ids, so a filter or `--yes` beside
/// them is refused rather than ignored.
#[tokio::test]
async fn a_bulk_replay_needs_yes_and_a_narrowing_filter_and_ids_take_neither() {
    let Seeded {
        database,
        _scratch,
        first,
        ..
    } = seeded().await;
    let replay_refused = |args: &[&str], message: &str| {
        let mut call = vec!["receipts", "replay"];
        call.extend(args);
        refused(&inboundctl(&database, &call, &[]), message);
    };
    replay_refused(
        &words("--status failed --integration stripe-acme --reason fixed"),
        "the filter selects 2 receipt(s): add --yes",
    );
    // A status alone selects everything in it: a narrowing filter is required.
    replay_refused(
        &words("--status failed --yes --reason fixed"),
        "a change by filter needs more than a status",
    );
    // Ids are exactly those ids: a filter beside them, or --yes, is a mistake, not ignored.
    let first_id = first.to_string();
    replay_refused(
        &[&first_id, "--integration", "stripe-acme", "--reason", "x"],
        "with ids, exactly those ids are changed",
    );
    replay_refused(
        &[&first_id, "--yes", "--reason", "x"],
        "--dry-run and --yes go with a filter",
    );
    replay_refused(
        &words("--status pending --since 1h --yes --reason x"),
        "cannot be replayed by filter",
    );
}

#[tokio::test]
async fn a_closed_receipt_ends_closed_with_its_reason_and_nobody_decides_anonymously() {
    let Seeded {
        database,
        _scratch,
        first,
        odd,
        waiting,
        ..
    } = seeded().await;
    let pool = database.pool();
    // Close: the quarantined receipt ends done/closed with the reason, and says so.
    refused(
        &inboundctl(
            &database,
            &words(&format!("receipts close {waiting} --reason x")),
            &[],
        ),
        "only failed or quarantined receipts can be closed",
    );
    let closed = inboundctl(
        &database,
        &[
            "receipts",
            "close",
            &odd.to_string(),
            "--reason",
            "a test-mode event sent to live",
        ],
        &[],
    );
    assert!(closed.status.success(), "{}", text(&closed.stderr));
    let (state, outcome): (String, Option<String>) =
        sqlx::query_as("SELECT status, outcome FROM receipts WHERE id = $1")
            .bind(odd)
            .fetch_one(pool)
            .await
            .expect("closed");
    assert_eq!(
        (state.as_str(), outcome.as_deref()),
        ("done", Some("closed"))
    );
    let history = inboundctl(&database, &["receipts", "show", &odd.to_string()], &[]);
    assert!(
        text(&history.stdout).contains("closed by ops-test as role "),
        "{}",
        text(&history.stdout)
    );
    assert!(
        text(&history.stdout).contains("(was quarantined): a test-mode event sent to live"),
        "{}",
        text(&history.stdout)
    );

    // An audit never records "unknown": with no --by, INBOUND_OPERATOR or $USER, refused.
    let anonymous = Inboundctl::new()
        .database(database.url())
        .command(&words(&format!("receipts close {first} --reason x")))
        .env_remove("INBOUND_OPERATOR")
        .output()
        .expect("run inboundctl");
    refused(
        &anonymous,
        "say who decides or reads: --by NAME (or set INBOUND_OPERATOR)",
    );
}

/// Effects for sink `audit`, in a database of their own: two in review, then one
/// uncertain.
async fn two_in_review_and_one_uncertain(pool: &sqlx::PgPool) -> [i64; 3] {
    [
        domain::effect_in(pool, "k-1", "review").await,
        domain::effect_in(pool, "k-2", "review").await,
        domain::effect_in(pool, "k-3", "uncertain").await,
    ]
}

#[tokio::test]
async fn effects_are_filtered_by_sink_and_owner_and_resolved_in_bulk() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let scratch = ScratchDir::new();
    let config = owned_config(&scratch);
    let [one, two, other] = two_in_review_and_one_uncertain(pool).await;
    let listed = json_of(inboundctl(
        &database,
        &words(&format!(
            "effects list --status review --owner audit-oncall --config {config} --json"
        )),
        &[],
    ));
    assert_eq!(ids(&listed), vec![two, one]);

    let dry = inboundctl(
        &database,
        &words("effects resolve --status review --sink audit --dry-run"),
        &[],
    );
    assert!(dry.status.success(), "{}", text(&dry.stderr));
    assert!(
        text(&dry.stdout).contains("would resolve 2 effect(s)"),
        "{}",
        text(&dry.stdout)
    );
    refused(
        &inboundctl(
            &database,
            &words("effects resolve --status review --sink audit --abandon --note n"),
            &[],
        ),
        "add --yes",
    );
    let resolved = inboundctl(
        &database,
        &[
            "effects",
            "resolve",
            "--status",
            "review",
            "--sink",
            "audit",
            "--abandon",
            "--yes",
            "--note",
            "the customer cancelled (INC-9)",
        ],
        &[],
    );
    assert!(resolved.status.success(), "{}", text(&resolved.stderr));
    let statuses: Vec<(i64, String)> = sqlx::query_as("SELECT id, status FROM effects ORDER BY id")
        .fetch_all(pool)
        .await
        .expect("statuses");
    assert_eq!(
        statuses,
        vec![
            (one, "abandoned".to_owned()),
            (two, "abandoned".to_owned()),
            (other, "uncertain".to_owned())
        ]
    );
}

/// Effects are paged with `--before`; a sink that does not exist is an error, not an
/// empty list, and an unknown status is a usage error listing the statuses there are.
#[tokio::test]
async fn effects_are_paged_and_a_filter_that_names_nothing_is_refused() {
    let database = TestDatabase::create().await;
    let [one, two, _other] = two_in_review_and_one_uncertain(database.pool()).await;
    let page = json_of(inboundctl(
        &database,
        &words(&format!(
            "effects list --status review --before {two} --json"
        )),
        &[],
    ));
    assert_eq!(ids(&page), vec![one]);
    refused(
        &inboundctl(
            &database,
            &words("effects list --status review --sink audit-typo"),
            &[],
        ),
        "no sink \"audit-typo\"",
    );
    let unknown_status = inboundctl(&database, &words("effects list --status stuck"), &[]);
    assert_eq!(unknown_status.status.code(), Some(2));
    assert!(
        text(&unknown_status.stderr).contains("in_flight"),
        "{}",
        text(&unknown_status.stderr)
    );
}

/// Chosen by a filter on `review`, an effect that moved on since (a dispatcher judged it)
/// is not decided about blindly: the whole resolution is refused.
#[tokio::test]
async fn an_effect_that_moved_on_since_a_filter_chose_it_is_not_resolved_blindly() {
    let database = TestDatabase::create().await;
    let [_one, _two, other] = two_in_review_and_one_uncertain(database.pool()).await;
    let mut connection = database.pool().acquire().await.expect("connection");
    let moved = inbound_store::effects::resolve(
        &mut connection,
        inbound_core::keys::EffectId(other),
        inbound_core::states::EffectAction::Complete,
        Some(inbound_core::states::EffectStatus::Review),
        "ops-test",
        "n",
    )
    .await
    .expect_err("moved on");
    assert!(
        moved
            .to_string()
            .contains("is uncertain now, no longer review"),
        "{moved}"
    );
}

#[tokio::test]
async fn purge_lists_first_and_keeps_keys_past_redelivery() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    // A done receipt accepted 300 days ago, in the partitions of its day and period.
    sqlx::raw_sql(
        "SELECT ensure_history_partitions(now() - interval '300 days', 0);
         WITH old AS (
             INSERT INTO receipts (id, integration, source_scope, event_id, event_type,
                                   route_key, status, outcome, received_at, finished_at)
             VALUES (history_day(now() - interval '300 days')::int8 * 10000000000 + 1,
                     'stripe-acme', 'stripe-acme/acct_123/live', 'evt_old', 't', 't', 'done',
                     'applied', now() - interval '300 days', now() - interval '300 days')
             RETURNING id)
         INSERT INTO receipt_payloads SELECT id, '{}' FROM old;",
    )
    .execute(pool)
    .await
    .expect("an old receipt");

    let preview = json_of(inboundctl(
        &database,
        &words("purge --payloads-older-than-days 30 --keys-older-than-days 95 --dry-run --json"),
        &[],
    ));
    let tables: Vec<&str> = preview["partitions"]
        .as_array()
        .expect("partitions")
        .iter()
        .map(|partition| partition["table"].as_str().expect("table"))
        .collect();
    assert_eq!(
        tables,
        [
            "receipt_payloads",
            "receipt_payloads",
            "receipts",
            "receipts"
        ],
        "{preview}"
    );
    assert_eq!(
        database.receipt_count().await,
        1,
        "a dry run removes nothing"
    );

    // Below the longest horizon (90 days: Paddle replays and Svix retains that long, and
    // the configurable schemes take the longest): refused unless forced.
    refused(
        &inboundctl(
            &database,
            &words("purge --payloads-older-than-days 1 --keys-older-than-days 60"),
            &[],
        ),
        "(90 days",
    );
    refused(
        &inboundctl(
            &database,
            &words("purge --payloads-older-than-days 1 --keys-older-than-days 7"),
            &[],
        ),
        "redelivery horizon",
    );
    let forced = json_of(inboundctl(
        &database,
        &words("purge --payloads-older-than-days 1 --keys-older-than-days 7 --force --json"),
        &[],
    ));
    assert_eq!(
        forced["payload_days"].as_array().map(Vec::len),
        Some(2),
        "{forced}"
    );
    assert_eq!(
        forced["key_periods"].as_array().map(Vec::len),
        Some(2),
        "{forced}"
    );
    assert_eq!(database.receipt_count().await, 0);
    // The current and previous key periods never go: deduplication reads them.
    let periods: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM history_partitions() WHERE parent = 'receipt_keys'",
    )
    .fetch_one(pool)
    .await
    .expect("periods");
    assert_eq!(periods, 2);
}

#[test]
fn completions_are_printed_for_each_shell() {
    for (shell, marker) in [
        ("bash", "complete -F _inboundctl"),
        ("zsh", "#compdef inboundctl"),
        ("fish", "complete -c inboundctl"),
    ] {
        let output = Inboundctl::new().run(&["completions", shell]);
        assert!(output.status.success(), "{shell}");
        let script = text(&output.stdout);
        assert!(script.contains(marker), "{shell}: {script}");
        assert!(
            script.contains("quarantined"),
            "{shell}: the status values complete"
        );
    }
}

/// An id named twice is one decision: a failed receipt replayed as `ID ID` is queued once
/// and audited once (the second mention must not find it pending and "run it now" again),
/// and the ids are taken in one lock order whatever order they were given in.
#[tokio::test]
async fn an_id_named_twice_is_decided_once() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let first = domain::receipt_in(pool, "evt_twice_a", "failed").await;
    let second = domain::receipt_in(pool, "evt_twice_b", "failed").await;
    let (a, b) = (first.to_string(), second.to_string());
    let replayed = inboundctl(
        &database,
        &words(&format!("receipts replay {b} {a} {b} --reason fixed")),
        &[],
    );
    assert!(replayed.status.success(), "{}", text(&replayed.stderr));
    let audits: Vec<(i64, String)> =
        sqlx::query_as("SELECT receipt_id, previous_status FROM receipt_replays ORDER BY id")
            .fetch_all(pool)
            .await
            .expect("replays");
    assert_eq!(
        audits,
        vec![(first, "failed".to_owned()), (second, "failed".to_owned())],
        "one replay each, in id order"
    );
}

/// Several effect ids are decided all or none in one transaction: when one is refused (an
/// effect in flight), the one before it is left exactly as it was, with no resolution
/// recorded.
#[tokio::test]
async fn effect_ids_are_resolved_all_or_none() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let review = domain::effect_in(pool, "k-all-1", "review").await;
    let in_flight = domain::effect_in(pool, "k-all-2", "in_flight").await;
    let refused_call = inboundctl(
        &database,
        &words(&format!(
            "effects resolve {review} {in_flight} --abandon --note n"
        )),
        &[],
    );
    refused(&refused_call, "is in_flight");
    let (status, resolutions): (String, i64) = sqlx::query_as(
        "SELECT e.status, (SELECT count(*) FROM effect_resolutions) FROM effects e WHERE e.id = $1",
    )
    .bind(review)
    .fetch_one(pool)
    .await
    .expect("effect");
    assert_eq!((status.as_str(), resolutions), ("review", 0));
}

/// What a sender wrote reaches the operator's terminal as text: an escape sequence (ESC,
/// the one-byte CSI U+009B), a carriage return, a newline that would forge a line, a
/// DEL and a bidirectional override in an event id, type, reason or error are printed
/// escaped by every human-readable command; `--json` keeps them exactly.
#[tokio::test]
async fn sender_bytes_never_reach_the_terminal_as_control_characters() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let hostile = "evt_\u{1b}[31mred\u{9b}2J\r\nreceipt 1 replayed\u{7f}\u{202e}";
    let id = domain::receipt_in(pool, "evt_plain", "quarantined").await;
    sqlx::query(
        "UPDATE receipts SET event_id = $2, event_type = $2, outcome_reason = $2, last_error = $2
         WHERE id = $1",
    )
    .bind(id)
    .bind(hostile)
    .execute(pool)
    .await
    .expect("hostile fields");
    let effect = domain::effect_in(pool, "op_hostile", "review").await;
    sqlx::query("UPDATE effects SET last_error = $2 WHERE id = $1")
        .bind(effect)
        .bind(hostile)
        .execute(pool)
        .await
        .expect("hostile error");
    let id_text = id.to_string();
    let effect_text = effect.to_string();
    for args in [
        &words("receipts list --status quarantined")[..],
        &["receipts", "find", "--event-id", hostile],
        &["receipts", "show", &id_text],
        &words("effects list --status review"),
        &["effects", "show", &effect_text],
    ] {
        let output = inboundctl(&database, args, &[]);
        assert!(
            output.status.success(),
            "{args:?}: {}",
            text(&output.stderr)
        );
        let stdout = text(&output.stdout);
        let controls: Vec<char> = stdout
            .chars()
            .filter(|c| (c.is_control() && *c != '\n') || *c == '\u{202e}')
            .collect();
        assert!(
            controls.is_empty(),
            "{args:?} printed {controls:?}: {stdout}"
        );
        assert!(
            !stdout
                .lines()
                .any(|line| line.starts_with("receipt 1 replayed")),
            "{args:?} let a newline forge a line: {stdout}"
        );
        assert!(stdout.contains(r"\u{1b}[31mred"), "{args:?}: {stdout}");
    }
    let listed = json_of(inboundctl(
        &database,
        &words("receipts list --status quarantined --json"),
        &[],
    ));
    assert_eq!(listed[0]["event_id"], hostile, "JSON stays exact");
}

/// A receipt that was applied after failed attempts keeps their last error as history:
/// `receipts show` says it came before the outcome, never as the receipt's current error.
#[tokio::test]
async fn an_applied_receipt_shows_its_earlier_error_as_history() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let id = domain::receipt_in(pool, "evt_recovered", "done_later").await;
    sqlx::query("UPDATE receipts SET attempts = 2, last_error = 'order o1 does not exist yet' WHERE id = $1")
        .bind(id)
        .execute(pool)
        .await
        .expect("an earlier failure");
    let shown = inboundctl(&database, &["receipts", "show", &id.to_string()], &[]);
    let shown = text(&shown.stdout);
    assert!(
        shown.contains("earlier error  order o1 does not exist yet (before it was done)"),
        "{shown}"
    );
    assert!(!shown.contains("last error"), "{shown}");
}

/// How many index and table scans of `receipts` this transaction has made so far.
async fn receipt_scans(transaction: &mut sqlx::PgConnection) -> i64 {
    sqlx::query_scalar(
        "SELECT (SELECT coalesce(sum(pg_stat_get_xact_numscans(indexrelid)), 0)
                 FROM pg_index WHERE indrelid = 'receipts'::regclass)::int8
              + pg_stat_get_xact_numscans('receipts'::regclass)",
    )
    .fetch_one(transaction)
    .await
    .expect("scans")
}

/// Senders create scopes (Shopify's unsigned shop header, Connect accounts, GitHub
/// installations), so "what did the provider send for this id?" must not cost a
/// descent per scope: with 5,000 scopes, finding an event id, checking which ids an
/// integration holds (backfill, redeliver) and naming the integrations that hold
/// receipts each take a handful of scans (red team 2026-12-05, F3: one per scope, ~1 s
/// at 200,000 scopes).
#[tokio::test]
async fn an_event_id_is_found_in_a_few_scans_however_many_scopes_senders_made() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    sqlx::raw_sql(
        "INSERT INTO receipts (integration, source_scope, event_id, event_type, route_key,
                               status, outcome, finished_at)
         SELECT 'shop-acme', 'shop-acme/shop' || g || '.myshopify.com/orders%2Fcreate', 'wh_' || g,
                'orders/create', 'orders/create', 'done', 'applied', now()
         FROM generate_series(1, 5000) g;
         INSERT INTO receipts (integration, source_scope, event_id, event_type, route_key,
                               status, outcome, finished_at)
         SELECT 'stripe-acme', 'stripe-acme/acct_' || g || '/live', 'evt_' || g, 't', 't',
                'done', 'applied', now()
         FROM generate_series(1, 2000) g;
         -- An integration whose id the other extends: its bare scope sorts before
         -- `stripe-acme/…`, its own `stripe/…` after them.
         INSERT INTO receipts (integration, source_scope, event_id, event_type, route_key,
                               status, outcome, finished_at)
         VALUES ('stripe', 'stripe', 'evt_bare', 't', 't', 'done', 'applied', now()),
                ('stripe', 'stripe/acct_1/live', 'evt_own', 't', 't', 'done', 'applied', now());
         ANALYZE receipts;",
    )
    .execute(pool)
    .await
    .expect("many scopes");
    let mut transaction = pool.begin().await.expect("a transaction");
    let before = receipt_scans(&mut transaction).await;
    let found = inbound_store::admin::receipts_by_event_id(&mut transaction, "wh_4321")
        .await
        .expect("found");
    assert_eq!(found.len(), 1);
    let by_id = receipt_scans(&mut transaction).await - before;
    let held = inbound_store::receipts::held_event_ids(
        &mut transaction,
        "shop-acme",
        &["wh_7", "wh_nothing", "evt_7"],
    )
    .await
    .expect("held");
    assert_eq!(held, ["wh_7".to_owned()].into_iter().collect());
    let held_scans = receipt_scans(&mut transaction).await - before - by_id;
    let integrations = inbound_store::admin::integrations_with_receipts(&mut transaction)
        .await
        .expect("integrations");
    assert_eq!(integrations, ["shop-acme", "stripe", "stripe-acme"]);
    let integration_scans = receipt_scans(&mut transaction).await - before - by_id - held_scans;
    assert!(
        by_id <= 2 && held_scans <= 4 && integration_scans <= 12,
        "scans for 7,000 scopes: by id {by_id}, held ids {held_scans}, integrations {integration_scans}"
    );
}
