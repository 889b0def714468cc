//! `inboundctl receipts`/`status`: list, show, replay, and quarantine or fail by hand, each
//! decision audited and all or nothing.

use super::*;

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
        serde_json::json!({"payload_days": [], "key_periods": []})
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
