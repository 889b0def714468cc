//! `inboundctl console` over HTTP, through the real binary: every page carries the strict
//! security headers and changes nothing; a decision is two POSTs — a confirmation that
//! says what will change, then the store's decision with the person's name — audited as
//! the CLI audits it; refused POSTs (another origin, no token, no identity, read-only)
//! change nothing; a decision on what moved since its confirmation is refused; bulk
//! decisions list exactly what they change; pages are keyset-paged.

use inbound_core::states::{EffectStatus, ReceiptOutcome, ReceiptStatus};
use inbound_tests::TestDatabase;
use inbound_tests::console::{Console, Session, hidden_value, text};
use inbound_tests::ctl::{Inboundctl, words};
use inbound_tests::domain;

/// How many operator decisions the audit tables hold.
async fn audit_rows(pool: &sqlx::PgPool) -> i64 {
    sqlx::query_scalar(
        "SELECT (SELECT count(*) FROM receipt_replays) + (SELECT count(*) FROM receipt_resolutions)
              + (SELECT count(*) FROM effect_resolutions)",
    )
    .fetch_one(pool)
    .await
    .expect("audit count")
}

/// `inboundctl args…` on `database` as JSON.
fn ctl_json(database: &TestDatabase, args: &str) -> serde_json::Value {
    let output = Inboundctl::new().database(database.url()).run(&words(args));
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("JSON")
}

#[tokio::test]
async fn every_page_carries_a_strict_policy_and_a_get_changes_nothing() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let failed = domain::receipt_in(pool, "evt_page", "failed").await;
    let effect = domain::effect_in(pool, "k-page", "review").await;
    let console = Console::start(database.url(), &["--by", "alice"]);
    let session = Session::open(&console).await;
    for path in [
        "/".to_owned(),
        "/review".to_owned(),
        "/receipts".to_owned(),
        "/receipts?status=quarantined&since=1h".to_owned(),
        format!("/receipts/{failed}"),
        "/effects".to_owned(),
        format!("/effects/{effect}"),
    ] {
        let page = session.get(&path).await;
        assert_eq!(page.status, 200, "{path}: {}", text(&page));
        let header = |name: &str| {
            page.headers
                .get(name)
                .and_then(|value| value.to_str().ok())
                .unwrap_or_default()
                .to_owned()
        };
        let policy = header("content-security-policy");
        for part in [
            "default-src 'none'",
            "frame-ancestors 'none'",
            "form-action 'self'",
        ] {
            assert!(policy.contains(part), "{path}: {policy}");
        }
        assert!(!policy.contains("script-src"), "no script at all: {policy}");
        assert_eq!(header("x-content-type-options"), "nosniff", "{path}");
        assert_eq!(header("referrer-policy"), "no-referrer", "{path}");
        assert_eq!(header("cache-control"), "no-store", "{path}");
        assert!(!text(&page).contains("<script"), "{path}");
    }
    let stylesheet = session.get("/static/console.css").await;
    assert_eq!(stylesheet.status, 200);
    // The overview counts what the newest receipts say: this one was applied.
    let overview = text(&session.get("/").await);
    assert!(overview.contains("0 of 2"), "ignored of recent: {overview}");
    assert!(
        stylesheet.headers["content-type"]
            .to_str()
            .expect("ascii")
            .starts_with("text/css")
    );
    assert_eq!(session.get("/nowhere").await.status, 404);
    assert_eq!(session.get("/receipts/x1").await.status, 404);
    assert_eq!(session.get("/receipts/999999").await.status, 404);
    let bad_filter = session.get("/receipts?since=yesterday").await;
    assert_eq!(bad_filter.status, 400);
    assert!(text(&bad_filter).contains("neither an RFC 3339 time"));
    // A NUL is no stored text's: a bad input, never "the database failed" (503).
    for nul in [
        "/receipts?event_id=evt%00",
        "/receipts?type=a%00b",
        "/effects?sink=%00",
    ] {
        let refused = session.get(nul).await;
        assert_eq!(refused.status, 400, "{nul}: {}", text(&refused));
        assert!(text(&refused).contains("NUL"), "{nul}: {}", text(&refused));
    }
    assert_eq!(audit_rows(pool).await, 0, "GETs decide nothing");
    assert_eq!(
        domain::receipt_state(pool, failed).await.0,
        ReceiptStatus::Failed
    );
}

#[tokio::test]
async fn a_replay_is_confirmed_with_what_changes_then_taken_and_audited_as_the_cli_does() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let failed = domain::receipt_in(pool, "evt_replay", "failed").await;
    let console = Console::start(database.url(), &["--by", "alice"]);
    let session = Session::open(&console).await;
    let page = format!("/receipts/{failed}");
    let token = session.token(&page).await.expect("a decision form");
    let decide = format!("{page}/decide");
    let fields = [
        ("csrf", token.as_str()),
        ("action", "replay"),
        ("reason", "order o1 created by hand"),
    ];
    let confirmation = session.post(&decide, &fields).await;
    assert_eq!(confirmation.status, 200, "{}", text(&confirmation));
    let html = text(&confirmation);
    assert!(
        html.contains(&format!(
            "Receipt {failed} (stripe-acme, event evt_replay) is failed and goes back to pending"
        )),
        "{html}"
    );
    assert!(html.contains("Recorded as replay by alice because: order o1 created by hand"));
    assert_eq!(audit_rows(pool).await, 0, "a confirmation changes nothing");
    assert_eq!(hidden_value(&html, "expected").as_deref(), Some("failed"));

    let taken = session.submit(&confirmation, "confirm").await;
    assert_eq!(taken.status, 303, "{}", text(&taken));
    assert_eq!(
        taken.headers["location"],
        format!("{page}?done=replay").as_str()
    );
    assert_eq!(
        domain::receipt_state(pool, failed).await.0,
        ReceiptStatus::Pending
    );
    let shown = ctl_json(&database, &format!("receipts show {failed} --json"));
    let history = shown["history"].as_array().expect("history");
    assert_eq!(history.len(), 1, "{shown}");
    assert_eq!(history[0]["by"], "alice");
    assert_eq!(history[0]["action"], "replay");
    assert_eq!(history[0]["reason"], "order o1 created by hand");
    let after = text(&session.get(&format!("{page}?done=replay")).await);
    assert!(after.contains("Done: replay"), "{after}");
    assert!(
        console
            .logs()
            .iter()
            .any(|line| line.contains("an operator decided")
                && line.contains("alice")
                && !line.contains("order o1 created by hand"))
    );
}

#[tokio::test]
async fn posts_from_another_origin_without_the_token_or_without_a_person_change_nothing() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let failed = domain::receipt_in(pool, "evt_refused", "failed").await;
    let console = Console::start(database.url(), &["--by", "alice"]);
    let session = Session::open(&console).await;
    let page = format!("/receipts/{failed}");
    let token = session.token(&page).await.expect("a decision form");
    let decide = format!("{page}/decide");
    let confirmed = |csrf: &'static str| {
        [
            ("csrf", csrf),
            ("action", "close"),
            ("reason", "not ours"),
            ("expected", "failed"),
            ("confirm", "yes"),
        ]
    };
    let token: &'static str = Box::leak(token.into_boxed_str());
    let forbidden = |answer: inbound_tests::http::Answer, what: &str| {
        assert_eq!(answer.status, 403, "{what}: {}", text(&answer));
    };
    forbidden(
        session
            .post_from(Some("http://evil.example"), &decide, &confirmed(token))
            .await,
        "another origin",
    );
    forbidden(
        session.post_from(None, &decide, &confirmed(token)).await,
        "no origin",
    );
    forbidden(session.post(&decide, &confirmed("")).await, "no token");
    forbidden(
        session.post(&decide, &confirmed("00ff")).await,
        "a wrong token",
    );
    let other = Session::open(&console).await;
    forbidden(
        other.post(&decide, &confirmed(token)).await,
        "another session's token",
    );
    // Without a person, and read-only: no form, and a POST is refused.
    for args in [&[][..], &["--by", "alice", "--read-only"][..]] {
        let viewer = Console::start(database.url(), args);
        let viewing = Session::open(&viewer).await;
        let html = text(&viewing.get(&page).await);
        assert!(!html.contains("<form method=\"post\""), "{args:?}: {html}");
        assert!(html.contains("read-only"), "{args:?}");
        forbidden(viewing.post(&decide, &confirmed(token)).await, "no person");
    }
    assert_eq!(audit_rows(pool).await, 0);
    assert_eq!(
        domain::receipt_state(pool, failed).await.0,
        ReceiptStatus::Failed
    );
}

/// Someone else replays `receipt` from the CLI.
fn replayed_by_someone_else(database: &TestDatabase, receipt: i64) {
    let output = Inboundctl::new()
        .database(database.url())
        .run(&words(&format!("receipts replay {receipt} --reason fixed")));
    assert!(output.status.success());
}

/// Someone else replays `receipt` from the CLI, and the worker fails it again, for
/// another reason: back in the status the person saw, but not the row they decided about.
async fn replayed_then_failed_again(database: &TestDatabase, receipt: i64) {
    replayed_by_someone_else(database, receipt);
    sqlx::query("DELETE FROM receipt_queue WHERE receipt_id = $1")
        .bind(receipt)
        .execute(database.pool())
        .await
        .expect("dequeue");
    sqlx::query(
        "UPDATE receipts SET status = 'failed', attempts = 8, last_error = 'deadlock detected',
             finished_at = now() WHERE id = $1",
    )
    .bind(receipt)
    .execute(database.pool())
    .await
    .expect("failed again");
}

/// The console refused a confirmation of a row that changed since: 409, saying so.
fn refused_as_changed(refused: &inbound_tests::http::Answer) {
    assert_eq!(refused.status, 409, "{}", text(refused));
    assert!(
        text(refused).contains("changed since the confirmation"),
        "{}",
        text(refused)
    );
}

/// The confirmation of closing a failed receipt, for `session`: what the person saw.
async fn close_confirmation(session: &Session<'_>, receipt: i64) -> inbound_tests::http::Answer {
    let page = format!("/receipts/{receipt}");
    let token = session.token(&page).await.expect("a decision form");
    let confirmation = session
        .post(
            &format!("{page}/decide"),
            &[
                ("csrf", &token),
                ("action", "close"),
                ("reason", "not ours"),
            ],
        )
        .await;
    assert_eq!(confirmation.status, 200, "{}", text(&confirmation));
    confirmation
}

#[tokio::test]
async fn a_decision_on_a_receipt_that_moved_since_its_confirmation_is_refused() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let failed = domain::receipt_in(pool, "evt_moved", "failed").await;
    let console = Console::start(database.url(), &["--by", "alice"]);
    let session = Session::open(&console).await;
    let confirmation = close_confirmation(&session, failed).await;
    // Someone else replays it from the CLI while the confirmation is open.
    replayed_by_someone_else(&database, failed);
    refused_as_changed(&session.submit(&confirmation, "confirm").await);
    assert_eq!(
        domain::receipt_state(pool, failed).await.0,
        ReceiptStatus::Pending
    );
    assert_eq!(audit_rows(pool).await, 1, "only the CLI's replay");
}

/// A receipt that left the status the person saw and came back to it (replayed, failed
/// again for another reason) is not the one they decided about.
#[tokio::test]
async fn a_confirmation_of_a_receipt_that_failed_again_since_is_refused() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let failed = domain::receipt_in(pool, "evt_again", "failed").await;
    let console = Console::start(database.url(), &["--by", "alice"]);
    let session = Session::open(&console).await;
    let confirmation = close_confirmation(&session, failed).await;
    replayed_then_failed_again(&database, failed).await;
    refused_as_changed(&session.submit(&confirmation, "confirm").await);
    assert_eq!(
        domain::receipt_state(pool, failed).await.0,
        ReceiptStatus::Failed
    );
    assert_eq!(audit_rows(pool).await, 1, "only the CLI's replay");
}

/// A confirmation is only what the console showed: a forged one (another status, other
/// ids, no dry run) is refused and changes nothing.
#[tokio::test]
async fn a_forged_confirmation_is_refused() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let failed = domain::receipt_in(pool, "evt_f", "failed").await;
    let pending = domain::receipt_in(pool, "evt_p", "pending").await;
    let console = Console::start(database.url(), &["--by", "alice"]);
    let session = Session::open(&console).await;
    let token = session
        .token("/receipts?status=failed&integration=stripe-acme")
        .await
        .expect("a token");
    let ids = format!("{pending},{failed}");
    let single = format!("/receipts/{failed}/decide");
    for (path, expected, ids) in [
        ("/receipts/bulk", "pending", ids.as_str()),
        ("/receipts/bulk", "failed", ids.as_str()),
        (single.as_str(), "failed", ""),
    ] {
        let forged = session
            .post(
                path,
                &[
                    ("csrf", &token),
                    ("status", "failed"),
                    ("integration", "stripe-acme"),
                    ("action", "replay"),
                    ("reason", "forged"),
                    ("expected", expected),
                    ("confirm", "yes"),
                    ("ids", ids),
                ],
            )
            .await;
        assert_eq!(forged.status, 400, "{path} {expected}: {}", text(&forged));
        assert!(text(&forged).contains("not a confirmation this console showed"));
    }
    assert_eq!(audit_rows(pool).await, 0);
    assert_eq!(
        domain::receipt_state(pool, pending).await.0,
        ReceiptStatus::Pending
    );
}

/// A page that rebinds its own name to the console's address is same-origin to the
/// browser, but its requests name another host: refused, read or decide.
#[tokio::test]
async fn a_request_naming_another_host_is_refused_so_a_rebound_name_reads_and_decides_nothing() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let failed = domain::receipt_in(pool, "evt_rebind", "failed").await;
    let console = Console::start(database.url(), &["--by", "alice"]);
    let port = console
        .origin()
        .rsplit(':')
        .next()
        .expect("a port")
        .to_owned();
    let client = inbound_tests::http::HttpClient::new();
    let rebound = format!("rebind.attacker.example:{port}");
    let read = client
        .send(
            "GET",
            &console.url(&format!("/receipts/{failed}")),
            &[("host".to_owned(), rebound.clone())],
            bytes::Bytes::new(),
        )
        .await
        .expect("an answer");
    assert_eq!(read.status, 421, "{}", text(&read));
    assert!(!text(&read).contains("evt_rebind"));
    let headers = [
        ("host".to_owned(), rebound.clone()),
        ("origin".to_owned(), format!("http://{rebound}")),
        ("sec-fetch-site".to_owned(), "same-origin".to_owned()),
        (
            "content-type".to_owned(),
            "application/x-www-form-urlencoded".to_owned(),
        ),
    ];
    let decided = client
        .send(
            "POST",
            &console.url(&format!("/receipts/{failed}/decide")),
            &headers,
            "action=close&reason=pwned&expected=failed&confirm=yes",
        )
        .await
        .expect("an answer");
    assert_eq!(decided.status, 421);
    for own in [format!("localhost:{port}"), format!("127.0.0.1:{port}")] {
        let page = client
            .send(
                "GET",
                &console.url("/"),
                &[("host".to_owned(), own.clone())],
                bytes::Bytes::new(),
            )
            .await
            .expect("an answer");
        assert_eq!(page.status, 200, "{own}");
    }
    assert_eq!(audit_rows(pool).await, 0);
}

/// `--by` names whoever reaches the console: it listens on loopback only.
#[test]
fn a_local_identity_is_refused_on_an_address_others_reach() {
    let (code, stderr) = refused_at_start("console --by alice --listen 0.0.0.0:0");
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("--by names whoever reaches the console"),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_bulk_close_lists_exactly_what_it_changes_then_closes_those_and_only_those() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let first = domain::receipt_in(pool, "evt_b1", "failed").await;
    let second = domain::receipt_in(pool, "evt_b2", "failed").await;
    let console = Console::start(database.url(), &["--by", "alice"]);
    let session = Session::open(&console).await;
    let listing = text(
        &session
            .get("/receipts?status=failed&integration=stripe-acme")
            .await,
    );
    assert!(listing.contains("id=\"bulk\""), "{listing}");
    let token = inbound_tests::console::form_token(&listing).expect("a token");
    let filter = [
        ("csrf", token.as_str()),
        ("status", "failed"),
        ("integration", "stripe-acme"),
        ("action", "close"),
        ("reason", "test events"),
    ];
    let dry_answer = session.post("/receipts/bulk", &filter).await;
    let dry = text(&dry_answer);
    assert!(dry.contains("These 2 failed receipts"), "{dry}");
    assert_eq!(
        hidden_value(&dry, "ids").as_deref(),
        Some(format!("{second},{first}").as_str())
    );
    assert_eq!(audit_rows(pool).await, 0, "the listing changes nothing");
    // A third arrives after the listing: it is not closed.
    let third = domain::receipt_in(pool, "evt_b3", "failed").await;
    let taken = session.submit(&dry_answer, "confirm").await;
    assert_eq!(taken.status, 303, "{}", text(&taken));
    for id in [first, second] {
        domain::assert_ended(
            pool,
            id,
            ReceiptStatus::Done,
            Some(ReceiptOutcome::Closed),
            "test events",
        )
        .await;
    }
    assert_eq!(
        domain::receipt_state(pool, third).await.0,
        ReceiptStatus::Failed
    );
    // Without a narrowing filter there is no bulk decision.
    let unnarrowed = session
        .post(
            "/receipts/bulk",
            &[
                ("csrf", &token),
                ("status", "failed"),
                ("action", "close"),
                ("reason", "all"),
            ],
        )
        .await;
    assert_eq!(unnarrowed.status, 400);
    assert!(text(&unnarrowed).contains("a narrowing filter"));
}

#[tokio::test]
async fn an_effect_in_review_is_resolved_as_completed_and_the_cli_shows_the_same_row() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let effect = domain::effect_in(pool, "k-review", "review").await;
    let console = Console::start(database.url(), &["--by", "alice"]);
    let session = Session::open(&console).await;
    let page = format!("/effects/{effect}");
    let token = session.token(&page).await.expect("a resolution form");
    let fields = [
        ("csrf", token.as_str()),
        ("action", "completed"),
        ("reason", "the sink's log shows it"),
    ];
    let confirmation_answer = session.post(&format!("{page}/resolve"), &fields).await;
    let confirmation = text(&confirmation_answer);
    assert!(
        confirmation.contains(&format!(
            "Effect {effect} (sink audit, order.paid) is review and becomes completed"
        )),
        "{confirmation}"
    );
    let taken = session.submit(&confirmation_answer, "confirm").await;
    assert_eq!(taken.status, 303, "{}", text(&taken));
    let shown = ctl_json(&database, &format!("effects show {effect} --json"));
    assert_eq!(
        shown["effect"]["status"],
        EffectStatus::Completed.as_str(),
        "{shown}"
    );
    let resolutions = shown["resolutions"].as_array().expect("resolutions");
    assert_eq!(resolutions.len(), 1, "{shown}");
    assert_eq!(resolutions[0]["resolved_by"], "alice");
    assert_eq!(resolutions[0]["note"], "the sink's log shows it");
    assert_eq!(resolutions[0]["previous_status"], "review");
}

#[tokio::test]
async fn the_proxys_user_header_names_the_person_only_from_the_trusted_proxy() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let failed = domain::receipt_in(pool, "evt_proxy", "failed").await;
    let page = format!("/receipts/{failed}");
    let trusted = Console::start(
        database.url(),
        &[
            "--user-header",
            "X-Forwarded-User",
            "--trusted-proxy",
            "127.0.0.1",
        ],
    );
    let client = inbound_tests::http::HttpClient::new();
    let as_bob = [("x-forwarded-user".to_owned(), "bob@example.com".to_owned())];
    let seen = client
        .send("GET", &trusted.url(&page), &as_bob, bytes::Bytes::new())
        .await
        .expect("a page");
    assert!(text(&seen).contains("deciding as bob@example.com"));
    let nobody = client.get(&trusted.url(&page)).await.expect("a page");
    assert!(text(&nobody).contains("read-only: the proxy named nobody"));
    let elsewhere = Console::start(
        database.url(),
        &[
            "--user-header",
            "X-Forwarded-User",
            "--trusted-proxy",
            "10.0.0.0/8",
        ],
    );
    let claimed = client
        .send("GET", &elsewhere.url(&page), &as_bob, bytes::Bytes::new())
        .await
        .expect("a page");
    // Not through the proxy: nothing is shown, not even read-only.
    assert_eq!(claimed.status, 403, "{}", text(&claimed));
    assert!(!text(&claimed).contains("evt_proxy"));
    // A header the proxy appended to instead of replacing names nobody.
    let twice = [
        ("x-forwarded-user".to_owned(), "mallory".to_owned()),
        ("x-forwarded-user".to_owned(), "bob@example.com".to_owned()),
    ];
    let doubled = client
        .send("GET", &trusted.url(&page), &twice, bytes::Bytes::new())
        .await
        .expect("a page");
    assert!(text(&doubled).contains("read-only"), "{}", text(&doubled));
    assert!(!text(&doubled).contains("deciding as"));
}

#[tokio::test]
async fn receipts_are_paged_by_id_and_a_form_that_is_not_one_is_refused() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let mut ids = Vec::new();
    for n in 0..53 {
        ids.push(domain::receipt_in(pool, &format!("evt_p{n}"), "failed").await);
    }
    let console = Console::start(database.url(), &["--by", "alice"]);
    let session = Session::open(&console).await;
    let first = text(&session.get("/receipts?status=failed").await);
    assert_eq!(first.matches("class=\"receipt-link\"").count(), 50);
    let next = first
        .split("id=\"next\"")
        .next()
        .and_then(|before| before.rsplit("href=\"").next())
        .and_then(|link| link.split('"').next())
        .expect("a next link")
        .replace("&#38;", "&");
    assert!(next.contains(&format!("before={}", ids[3])), "{next}");
    let second = text(&session.get(&next).await);
    assert_eq!(second.matches("class=\"receipt-link\"").count(), 3);
    assert!(!second.contains("id=\"next\""));
    // Not a form, or a form over the bound: refused before anything is read.
    let token = session
        .token(&format!("/receipts/{}", ids[0]))
        .await
        .expect("a token");
    let decide = format!("/receipts/{}/decide", ids[0]);
    let long_reason = "x".repeat(70 * 1024);
    let huge = session
        .post(
            &decide,
            &[
                ("csrf", &token),
                ("action", "close"),
                ("reason", &long_reason),
            ],
        )
        .await;
    assert_eq!(huge.status, 400);
    let wordy = "y".repeat(1001);
    let too_long = session
        .post(
            &decide,
            &[("csrf", &token), ("action", "close"), ("reason", &wordy)],
        )
        .await;
    assert_eq!(too_long.status, 400);
    assert!(text(&too_long).contains("at most 1000 characters"));
    let nul = session
        .post(
            &decide,
            &[("csrf", &token), ("action", "close"), ("reason", "a\u{0}b")],
        )
        .await;
    assert_eq!(nul.status, 400, "{}", text(&nul));
    let no_reason = session
        .post(&decide, &[("csrf", &token), ("action", "close")])
        .await;
    assert_eq!(no_reason.status, 400);
    assert!(text(&no_reason).contains("needs a reason"));
    assert_eq!(audit_rows(pool).await, 0);
}

/// A payload is shown as stored — numbers as their text, not as a float reads them — and
/// cut at 64 KiB with its size said, however large or deep it is.
#[tokio::test]
async fn a_large_payload_is_cut_with_its_size_said_and_its_numbers_kept() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let receipt = domain::receipt_in(pool, "evt_big", "failed").await;
    let deep = format!("{}0{}", "[".repeat(120), "]".repeat(120));
    let filler = vec!["0"; 200_000].join(",");
    let payload = format!(
        r#"{{"amount": 10.50, "id": 123456789012345678901234567890, "deep": {deep}, "filler": [{filler}]}}"#
    );
    sqlx::query("UPDATE receipt_payloads SET payload = $2::jsonb WHERE receipt_id = $1")
        .bind(receipt)
        .bind(&payload)
        .execute(pool)
        .await
        .expect("a large payload");
    let console = Console::start(database.url(), &["--by", "alice"]);
    let session = Session::open(&console).await;
    let page = session.get(&format!("/receipts/{receipt}")).await;
    assert_eq!(page.status, 200);
    let html = text(&page);
    assert!(html.contains("amount&#34;: 10.50"), "the number as stored");
    assert!(html.contains("123456789012345678901234567890"));
    assert!(
        html.contains("its first 65,536 characters are shown"),
        "cut, and said so"
    );
    assert!(page.body.len() < 200 * 1024, "{} bytes", page.body.len());
}

/// Effects in review are resolved by a narrowed filter as receipts are: a listing first,
/// then exactly the listed ids, audited as the CLI audits them.
#[tokio::test]
async fn effects_in_review_are_resolved_in_bulk_after_a_listing() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let one = domain::effect_in(pool, "k-bulk-1", "review").await;
    let two = domain::effect_in(pool, "k-bulk-2", "review").await;
    let console = Console::start(database.url(), &["--by", "alice"]);
    let session = Session::open(&console).await;
    let listing = session.get("/effects?status=review&sink=audit").await;
    let token = inbound_tests::console::form_token(&text(&listing)).expect("a token");
    let dry = session
        .post(
            "/effects/bulk",
            &[
                ("csrf", &token),
                ("status", "review"),
                ("sink", "audit"),
                ("action", "abandon"),
                ("reason", "the order was cancelled by hand"),
            ],
        )
        .await;
    assert!(
        text(&dry).contains("These 2 review effects"),
        "{}",
        text(&dry)
    );
    assert_eq!(audit_rows(pool).await, 0, "the listing changes nothing");
    let taken = session.submit(&dry, "confirm").await;
    assert_eq!(taken.status, 303, "{}", text(&taken));
    for effect in [one, two] {
        let shown = ctl_json(&database, &format!("effects show {effect} --json"));
        assert_eq!(shown["effect"]["status"], "abandoned", "{shown}");
        assert_eq!(shown["resolutions"][0]["resolved_by"], "alice");
    }
    // Unnarrowed, or a resolution the status does not allow: refused.
    let completed = session
        .post(
            "/effects/bulk",
            &[
                ("csrf", &token),
                ("status", "review"),
                ("action", "abandon"),
                ("reason", "all"),
            ],
        )
        .await;
    assert_eq!(completed.status, 400);
}

/// The console's exit status and error when started with `args` (it must not start).
fn refused_at_start(args: &str) -> (Option<i32>, String) {
    let mut child = Inboundctl::new()
        .database("postgres://postgres@127.0.0.1:1/none")
        .command(&words(args))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start");
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > std::time::Duration::from_secs(10) {
            child.kill().ok();
            panic!("the console started: {args}");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut stderr)
        .expect("stderr");
    (status.code(), stderr)
}

/// A console others can reach shows every payload: it needs the proxy that names the
/// person, and the proxy settings need each other; an origin is an origin.
#[test]
fn a_console_others_can_reach_needs_an_authenticating_proxy() {
    let (code, stderr) = refused_at_start("console --listen 0.0.0.0:0 --read-only");
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("listens on loopback only"), "{stderr}");
    let (code, stderr) = refused_at_start("console --trusted-proxy 10.0.0.0/8");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--user-header"), "{stderr}");
    let (code, stderr) =
        refused_at_start("console --allowed-origin https://inbound.example.com/console --by alice");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("is not an origin"), "{stderr}");
}

/// A bulk confirmation is for the receipts as listed: one replayed and failed again since
/// stops the whole decision.
#[tokio::test]
async fn a_bulk_confirmation_of_a_receipt_that_failed_again_since_decides_nothing() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let first = domain::receipt_in(pool, "evt_bm1", "failed").await;
    let second = domain::receipt_in(pool, "evt_bm2", "failed").await;
    let console = Console::start(database.url(), &["--by", "alice"]);
    let session = Session::open(&console).await;
    let listing = text(
        &session
            .get("/receipts?status=failed&integration=stripe-acme")
            .await,
    );
    let token = inbound_tests::console::form_token(&listing).expect("a token");
    let dry = session
        .post(
            "/receipts/bulk",
            &[
                ("csrf", &token),
                ("status", "failed"),
                ("integration", "stripe-acme"),
                ("action", "close"),
                ("reason", "test events"),
            ],
        )
        .await;
    replayed_then_failed_again(&database, first).await;
    refused_as_changed(&session.submit(&dry, "confirm").await);
    for id in [first, second] {
        assert_eq!(
            domain::receipt_state(pool, id).await.0,
            ReceiptStatus::Failed
        );
    }
    assert_eq!(audit_rows(pool).await, 1, "only the CLI's replay");
}

/// A confirmation acts once: posted again, it finds the receipt changed.
#[tokio::test]
async fn a_confirmation_posted_twice_decides_once() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let failed = domain::receipt_in(pool, "evt_twice", "failed").await;
    let console = Console::start(database.url(), &["--by", "alice"]);
    let session = Session::open(&console).await;
    let confirmation = close_confirmation(&session, failed).await;
    assert_eq!(session.submit(&confirmation, "confirm").await.status, 303);
    refused_as_changed(&session.submit(&confirmation, "confirm").await);
    assert_eq!(audit_rows(pool).await, 1);
}

/// A GET with raw header bytes (a name in UTF-8, which the test client's header type
/// refuses), as a proxy forwards it; the page's text.
async fn get_raw(console: &Console, path: &str, headers: &[(&str, &[u8])]) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = console.origin().trim_start_matches("http://").to_owned();
    let mut request =
        format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n").into_bytes();
    for (name, value) in headers {
        request.extend_from_slice(name.as_bytes());
        request.extend_from_slice(b": ");
        request.extend_from_slice(value);
        request.extend_from_slice(b"\r\n");
    }
    request.extend_from_slice(b"\r\n");
    let mut stream = tokio::net::TcpStream::connect(&address)
        .await
        .expect("connect");
    stream.write_all(&request).await.expect("send");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.expect("read");
    String::from_utf8_lossy(&answer).into_owned()
}

/// A name with an invisible character is another person who reads as the same one in
/// psql, an export or a SIEM: the proxy's header naming `al\u{200b}ice` names nobody,
/// and nothing can be decided in that name (red team 2026-12-05, F6).
#[tokio::test]
async fn a_name_with_invisible_characters_names_nobody() {
    let database = TestDatabase::create().await;
    let failed = domain::receipt_in(database.pool(), "evt_name", "failed").await;
    let console = Console::start(
        database.url(),
        &[
            "--user-header",
            "X-Forwarded-User",
            "--trusted-proxy",
            "127.0.0.1",
        ],
    );
    let page = format!("/receipts/{failed}");
    let alice = get_raw(
        &console,
        &page,
        &[("X-Forwarded-User", b"alice@example.com")],
    )
    .await;
    assert!(alice.contains("deciding as alice@example.com"), "{alice}");
    for disguised in [
        "al\u{200b}ice@example.com",
        "alice@example.com\u{202e}",
        "\u{2060}alice@example.com",
    ] {
        let seen = get_raw(
            &console,
            &page,
            &[("X-Forwarded-User", disguised.as_bytes())],
        )
        .await;
        assert!(
            seen.contains("read-only: the proxy&#39;s user header is not a usable name")
                || seen.contains("read-only: the proxy's user header is not a usable name"),
            "{disguised:?}: {seen}"
        );
        assert!(!seen.contains("deciding as"), "{disguised:?}");
    }
    // The CLI refuses such a name as well.
    let output = Inboundctl::new().database(database.url()).run(&[
        "receipts",
        "close",
        &failed.to_string(),
        "--reason",
        "not ours",
        "--by",
        "al\u{200b}ice",
    ]);
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("not a name the audit trail can record"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(audit_rows(database.pool()).await, 0);
}

/// Behind an HTTPS proxy the session cookie is `Secure` with the `__Host-` prefix, and a
/// session carrying it works (red team 2026-12-05, F6).
#[tokio::test]
async fn behind_an_https_proxy_the_session_cookie_is_secure_and_host_only() {
    let database = TestDatabase::create().await;
    let console = Console::start(
        database.url(),
        &[
            "--user-header",
            "X-Forwarded-User",
            "--trusted-proxy",
            "127.0.0.1",
            "--allowed-origin",
            "https://inbound.example.com",
        ],
    );
    let client = inbound_tests::http::HttpClient::new();
    let first = client.get(&console.url("/")).await.expect("the overview");
    let cookie = first
        .headers
        .get("set-cookie")
        .and_then(|value| value.to_str().ok())
        .expect("a session cookie")
        .to_owned();
    assert!(
        cookie.starts_with("__Host-inbound_console_session="),
        "{cookie}"
    );
    assert!(cookie.contains("; Secure"), "{cookie}");
    assert!(
        cookie.contains("; Path=/") && !cookie.contains("Domain"),
        "{cookie}"
    );
    // Sent back, it is the session: no new cookie is set.
    let pair = cookie.split(';').next().expect("name=value").to_owned();
    let again = client
        .send(
            "GET",
            &console.url("/"),
            &[("cookie".to_owned(), pair)],
            bytes::Bytes::new(),
        )
        .await
        .expect("the overview");
    assert!(
        again.headers.get("set-cookie").is_none(),
        "{:?}",
        again.headers
    );
}

/// A payload whose pretty-printed text would pass PostgreSQL's 1 GB limit — 10 MiB of
/// zeros 62 levels deep, which an integration with a larger `max_body_bytes` accepts — is
/// shown from its start like any other: the database renders the stored text once and
/// cuts it, the console indents the cut (red team 2026-12-05, F1: the database
/// pretty-printed the whole payload, twice, before cutting it).
#[tokio::test]
async fn a_payload_too_deep_to_pretty_print_whole_is_shown_from_its_start() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let receipt = domain::receipt_in(pool, "evt_deep", "failed").await;
    let depth = 62;
    let zeros = 10 * 1024 * 1024 / 2;
    let payload = format!(
        r#"{{"a": 10.50, "deep": {}{}{}}}"#,
        "[".repeat(depth),
        vec!["0"; zeros].join(","),
        "]".repeat(depth)
    );
    sqlx::query("UPDATE receipt_payloads SET payload = $2::jsonb WHERE receipt_id = $1")
        .bind(receipt)
        .bind(&payload)
        .execute(pool)
        .await
        .expect("a deep payload");
    let console = Console::start(database.url(), &["--by", "alice"]);
    let session = Session::open(&console).await;
    let page = session.get(&format!("/receipts/{receipt}")).await;
    let html = text(&page);
    assert_eq!(page.status, 200, "{html}");
    assert!(
        !html.contains("cannot be rendered"),
        "{}",
        &html[..html.len().min(2000)]
    );
    assert!(html.contains("id=\"payload\""), "the payload is shown");
    // jsonb orders keys by length: "a" comes first.
    assert!(
        html.contains("a&#34;: 10.50"),
        "its start, numbers as stored"
    );
    assert!(html.contains("its first 65,536 characters are shown"));
    assert!(page.body.len() < 200 * 1024, "{} bytes", page.body.len());
}

/// Every showing of a payload is recorded before it is shown — the console's page and
/// `inboundctl receipts show` alike — with the name given, the database role and the
/// server's time; the receipt's page lists its readers and `inboundctl audit reads`
/// lists who read what in a window.
#[tokio::test]
async fn who_read_a_payload_is_recorded_shown_and_listed() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let receipt = domain::receipt_in(pool, "evt_read", "failed").await;
    let console = Console::start(database.url(), &["--by", "alice"]);
    let session = Session::open(&console).await;
    let first = text(&session.get(&format!("/receipts/{receipt}")).await);
    assert!(first.contains("id=\"payload\""));
    let shown =
        Inboundctl::new()
            .database(database.url())
            .run(&["receipts", "show", &receipt.to_string()]);
    assert!(
        shown.status.success(),
        "{}",
        String::from_utf8_lossy(&shown.stderr)
    );
    let reads: Vec<(i64, String, String, String, bool)> = sqlx::query_as(
        "SELECT receipt_id, read_by, surface, database_role, read_at > now() - interval '1 minute'
         FROM payload_reads ORDER BY id",
    )
    .fetch_all(pool)
    .await
    .expect("reads");
    let role: String = sqlx::query_scalar("SELECT session_user::text")
        .fetch_one(pool)
        .await
        .expect("role");
    assert_eq!(
        reads,
        vec![
            (
                receipt,
                "alice".to_owned(),
                "console".to_owned(),
                role.clone(),
                true
            ),
            (
                receipt,
                "ops-test".to_owned(),
                "cli".to_owned(),
                role.clone(),
                true
            ),
        ]
    );
    // The page lists who read it, this reading included.
    let again = text(&session.get(&format!("/receipts/{receipt}")).await);
    let readers = again.split("id=\"reads\"").nth(1).expect("a readers table");
    assert!(
        readers.contains("alice") && readers.contains("ops-test"),
        "{readers}"
    );
    assert!(again.contains("3 in all"), "{again}");
    // And the CLI lists who read what in a window.
    let listed = ctl_json(&database, "audit reads --since 1h --json");
    let names: Vec<&str> = listed
        .as_array()
        .expect("an array")
        .iter()
        .map(|read| read["read_by"].as_str().expect("a name"))
        .collect();
    assert_eq!(names, ["alice", "ops-test", "alice"]);
    let only_cli = ctl_json(&database, "audit reads --since 1h --reader ops-test --json");
    assert_eq!(only_cli.as_array().map(Vec::len), Some(1));
    // A page that shows no payload (the receipts listing) records nothing.
    session.get("/receipts?status=failed").await;
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM payload_reads")
        .fetch_one(pool)
        .await
        .expect("count");
    assert_eq!(count, 3);
}

/// A payload is shown to a named person only, since every reading is recorded with a
/// name: a console nobody is named at shows the receipt without it, and records nothing.
#[tokio::test]
async fn an_unnamed_viewer_is_shown_no_payload() {
    let database = TestDatabase::create().await;
    let receipt = domain::receipt_in(database.pool(), "evt_unnamed", "failed").await;
    let console = Console::start(database.url(), &[]);
    let session = Session::open(&console).await;
    let page = text(&session.get(&format!("/receipts/{receipt}")).await);
    assert!(page.contains("evt_unnamed"), "the receipt is shown: {page}");
    assert!(!page.contains("id=\"payload\""), "{page}");
    assert!(page.contains("shown to a named person only"), "{page}");
    let reads: i64 = sqlx::query_scalar("SELECT count(*) FROM payload_reads")
        .fetch_one(database.pool())
        .await
        .expect("reads");
    assert_eq!(reads, 0);
}

/// An operator's close is told from a handler's `ignored` by the receipt's outcome, never
/// by the words of its reason: a handler that ignores an event "closed by an operator: …"
/// (its reason may quote what a sender sent) is still counted as ignored.
#[tokio::test]
async fn a_closed_receipt_is_told_from_an_ignored_one_by_its_outcome_not_its_reason() {
    use inbound_core::keys::ReceiptId;
    use inbound_store::admin;
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let ignored = domain::receipt_in(pool, "evt_ignored", "done").await;
    sqlx::query(
        "UPDATE receipts SET outcome = 'ignored',
             outcome_reason = 'closed by an operator: the words of a sender' WHERE id = $1",
    )
    .bind(ignored)
    .execute(pool)
    .await
    .expect("a handler's ignored receipt");
    let closed = domain::receipt_in(pool, "evt_closed", "failed").await;
    let mut connection = pool.acquire().await.expect("a connection");
    admin::close(
        &mut connection,
        &[ReceiptId(closed)],
        None,
        "alice",
        "test events",
    )
    .await
    .expect("closed");
    let recent = admin::recent_receipts(&mut connection, 100)
        .await
        .expect("recent receipts");
    assert_eq!(recent.len(), 1, "{recent:?}");
    assert_eq!(recent[0].count, 2);
    assert_eq!(recent[0].ignored, 1, "the handler's ignored receipt counts");
    domain::assert_ended(
        pool,
        closed,
        ReceiptStatus::Done,
        Some(ReceiptOutcome::Closed),
        "test events",
    )
    .await;
}

/// A decision the database does not finish within the page timeout (another session holds
/// the receipt's row) is answered 503, "the database failed or did not answer": the row has
/// not moved, so it is no 409 conflict, and nothing changed.
#[tokio::test]
async fn a_decision_the_database_cannot_finish_in_time_is_a_503_not_a_conflict() {
    use sqlx::Connection;
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let failed = domain::receipt_in(pool, "evt_locked", "failed").await;
    let console = Console::start(
        database.url(),
        &["--by", "alice", "--page-timeout-secs", "1"],
    );
    let session = Session::open(&console).await;
    let page = format!("/receipts/{failed}");
    let token = session.token(&page).await.expect("a decision form");
    let fields = [
        ("csrf", token.as_str()),
        ("action", "replay"),
        ("reason", "order o1 created by hand"),
    ];
    let confirmation = session.post(&format!("{page}/decide"), &fields).await;
    assert_eq!(confirmation.status, 200, "{}", text(&confirmation));
    let mut holder = sqlx::PgConnection::connect(database.url())
        .await
        .expect("a second session");
    let mut holding = holder.begin().await.expect("a transaction");
    sqlx::query("SELECT 1 FROM inbound.receipts WHERE id = $1 FOR UPDATE")
        .bind(failed)
        .execute(&mut *holding)
        .await
        .expect("the row held");
    let taken = session.submit(&confirmation, "confirm").await;
    holding.rollback().await.expect("released");
    assert_eq!(taken.status, 503, "{}", text(&taken));
    assert!(
        text(&taken).contains("the database failed or did not answer in time"),
        "{}",
        text(&taken)
    );
    assert_eq!(
        domain::receipt_state(pool, failed).await.0,
        ReceiptStatus::Failed
    );
    assert_eq!(audit_rows(pool).await, 0);
}

/// A subject's page: found from its receipt's page and by the search, every receipt of the
/// subject listed with its state, a subject a sender chose rendered as inert text, and bad
/// input answered 400, never as a database failure.
#[tokio::test]
async fn a_subjects_page_lists_its_receipts_and_shows_a_senders_subject_as_text() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let config = domain::config();
    let hostile = "pi_<b>bold</b>\u{202e}x";
    let object =
        serde_json::json!({"id": hostile, "object": "payment_intent", "status": "succeeded"});
    let first = domain::accept(
        pool,
        &config,
        &domain::stripe_event_at(
            "evt_s1",
            "payment_intent.succeeded",
            object.clone(),
            1_700_000_000,
        ),
    )
    .await
    .expect("new");
    domain::accept(
        pool,
        &config,
        &domain::stripe_event_at(
            "evt_s2",
            "payment_intent.payment_failed",
            object,
            1_699_999_000,
        ),
    )
    .await
    .expect("new");
    let console = Console::start(database.url(), &["--by", "alice"]);
    let session = Session::open(&console).await;

    let receipt = text(&session.get(&format!("/receipts/{first}")).await);
    let link = "/subject?integration=stripe-acme&#38;subject=pi_%3Cb%3Ebold%3C%2Fb%3E%E2%80%AEx";
    assert!(
        receipt.contains(link),
        "the receipt links to its subject: {receipt}"
    );
    let page = session
        .get("/subject?integration=stripe-acme&subject=pi_%3Cb%3Ebold%3C%2Fb%3E%E2%80%AEx")
        .await;
    assert_eq!(page.status, 200, "{}", text(&page));
    let html = text(&page);
    assert!(
        !html.contains("<b>bold"),
        "a sender's subject is text: {html}"
    );
    assert!(html.contains("&#60;b&#62;bold"), "{html}");
    assert!(
        !html.contains('\u{202e}'),
        "no bidirectional override reaches the page"
    );
    let s2 = html.find("evt_s2").expect("evt_s2 listed");
    let s1 = html.find("evt_s1").expect("evt_s1 listed");
    assert!(
        s2 < s1,
        "event-time order: the payment failure was created first"
    );
    assert!(html.contains("pending"), "{html}");

    let search = text(&session.get("/receipts").await);
    assert!(
        search.contains("id=\"subject-search\""),
        "the receipts page searches subjects"
    );
    let none = text(
        &session
            .get("/subject?integration=stripe-acme&subject=pi_none")
            .await,
    );
    assert!(none.contains("No receipt of this integration is about this subject"));
    assert_eq!(session.get("/subject").await.status, 200, "the search form");
    assert_eq!(session.get("/subject?subject=pi_1").await.status, 400);
    assert_eq!(
        session
            .get("/subject?integration=stripe-acme&subject=a%00b")
            .await
            .status,
        400
    );
    assert_eq!(audit_rows(pool).await, 0, "GETs decide nothing");
}
