//! The console as a person uses it, in a real browser (headless chromium through
//! chromedriver): find a quarantined receipt by the provider's event id, read its payload
//! and reason, replay it with a reason and see it done with the decision in its audit
//! trail; resolve an effect in review and find the same audit row in the CLI; close in
//! bulk after a listing; a payload an attacker wrote stays inert text; a cross-site form,
//! a form without its token and one posted without a person or `--read-only` change
//! nothing, and no action is offered without a person; a held subject followed from its
//! receipt to its timeline and released. Screenshots of the overview, a receipt, the
//! review queue and a subject are saved under `target/console-screenshots/`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use inbound_core::states::{ReceiptOutcome, ReceiptStatus};
use inbound_tests::browser::Browser;
use inbound_tests::console::Console;
use inbound_tests::ctl::{Inboundctl, words};
use inbound_tests::fixtures;
use inbound_tests::process::ScratchDir;
use inbound_tests::signing::{STRIPE_SECRET, SignedRequest, stripe_headers};
use inbound_tests::{Stack, domain, eventually};

/// The receipt id of `event_id` (stored by the ingress).
async fn receipt_of(pool: &sqlx::PgPool, event_id: &str) -> i64 {
    eventually(
        "the receipt is stored",
        Duration::from_secs(10),
        async || {
            sqlx::query_scalar::<_, i64>("SELECT id FROM receipts WHERE event_id = $1")
                .bind(event_id)
                .fetch_optional(pool)
                .await
                .expect("a query")
        },
    )
    .await
}

/// Sends a signed `payment_intent.succeeded` for `order` paying `amount` (USD cents), with
/// `description` in the PaymentIntent.
async fn send_payment(stack: &Stack, event_id: &str, order: &str, amount: i64, description: &str) {
    let mut object =
        domain::payment_intent(&format!("pi_{order}"), order, amount, "usd", "succeeded");
    object["description"] = description.into();
    let body = domain::stripe_event(event_id, "payment_intent.succeeded", object);
    let request = SignedRequest::new("stripe-acme", stripe_headers(STRIPE_SECRET, &body, 0), body);
    assert_eq!(stack.deliver(&request).await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_finds_a_quarantined_receipt_by_its_event_id_and_replays_it() {
    let stack = Stack::builder().worker(|options| options).start().await;
    let pool = stack.pool();
    domain::seed_order(pool, "o7", "pi_o7", 2500, "usd").await;
    send_payment(&stack, "evt_3QmB7xLq", "o7", 2000, "order o7").await;
    let receipt = receipt_of(pool, "evt_3QmB7xLq").await;
    eventually(
        "the worker quarantines it",
        Duration::from_secs(20),
        async || {
            (domain::receipt_state(pool, receipt).await.0 == ReceiptStatus::Quarantined)
                .then_some(())
        },
    )
    .await;
    // The configuration names owners, as on-call rotations do.
    let scratch = ScratchDir::new();
    let mut config = fixtures::config_edit();
    config.set("stripe-acme", "owner", "payments-oncall");
    config
        .sink("audit")
        .insert("owner".to_owned(), "audit-oncall".into());
    let config = fixtures::write_config(&config, &scratch);
    let console = Console::start(
        stack.database.url(),
        &["--by", "alice", "--config", &config],
    );
    let browser = Browser::start().await;

    browser.open(&console.url("/")).await;
    assert!(
        browser
            .text_of("#integrations")
            .await
            .contains("payments-oncall")
    );
    assert!(
        browser
            .text_of("#integrations")
            .await
            .contains("stripe-acme")
    );
    browser.screenshot("overview").await;
    browser.open(&console.url("/review")).await;
    assert!(
        browser
            .text_of("#review-receipts")
            .await
            .contains("does not pay order o7")
    );
    browser.screenshot("review-queue").await;

    // Find it by the provider's event id, whatever its status.
    browser.open(&console.url("/receipts")).await;
    browser.type_into("#event_id", "evt_3QmB7xLq").await;
    browser.click("#find").await;
    browser.click("a.receipt-link").await;
    assert!(
        browser
            .text_of("#payload")
            .await
            .contains("\"amount_received\": 2000")
    );
    let reason = browser.text_of("dd[data-field='reason']").await;
    assert!(
        reason.contains("does not pay order o7: the amount differs"),
        "{reason}"
    );
    browser.screenshot("receipt").await;

    // The order's total was wrong; fixed, the payment is replayed with a reason.
    sqlx::query("UPDATE orders SET total_minor = 2000 WHERE id = 'o7'")
        .execute(pool)
        .await
        .expect("fix the order");
    browser
        .type_into("#reason", "order o7 total corrected to 20.00 (INC-481)")
        .await;
    browser.click("#action-replay").await;
    let changes = browser.text_of("#changes").await;
    assert!(
        changes.contains("is quarantined and goes back to pending"),
        "{changes}"
    );
    browser.click("#confirm-button").await;
    assert!(browser.text_of("#notice").await.contains("Done: replay"));
    eventually(
        "the replay is applied",
        Duration::from_secs(20),
        async || {
            (domain::receipt_state(pool, receipt).await.1 == Some(ReceiptOutcome::Applied))
                .then_some(())
        },
    )
    .await;
    browser.client().refresh().await.expect("reload");
    assert_eq!(
        browser.text_of("dd[data-field='state']").await,
        "done (applied)"
    );
    let trail = browser.text_of("#history").await;
    assert!(trail.contains("replay"), "{trail}");
    assert!(trail.contains("alice"), "{trail}");
    assert!(
        trail.contains("order o7 total corrected to 20.00 (INC-481)"),
        "{trail}"
    );
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_resolves_an_effect_in_review_and_the_cli_shows_the_same_audit_row() {
    let database = inbound_tests::TestDatabase::create().await;
    let effect = domain::effect_in(database.pool(), "k-browser", "review").await;
    let console = Console::start(database.url(), &["--by", "alice"]);
    let browser = Browser::start().await;
    browser.open(&console.url("/review")).await;
    browser.click("#review-effects a.oldest").await;
    browser
        .type_into("#reason", "the sink's own log shows order.paid for o1")
        .await;
    browser.click("#action-completed").await;
    assert!(
        browser
            .text_of("#changes")
            .await
            .contains("is review and becomes completed")
    );
    browser.click("#confirm-button").await;
    assert_eq!(
        browser.text_of("dd[data-field='status']").await,
        "completed"
    );
    let output = Inboundctl::new()
        .database(database.url())
        .run(&words(&format!("effects show {effect} --json")));
    let shown: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let row = &shown["resolutions"][0];
    assert_eq!(row["action"], "completed", "{shown}");
    assert_eq!(row["resolved_by"], "alice");
    assert_eq!(row["note"], "the sink's own log shows order.paid for o1");
    assert!(
        browser
            .text_of("#history")
            .await
            .contains("the sink's own log shows order.paid for o1")
    );
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payload_an_attacker_wrote_renders_as_inert_text() {
    // Anything that reaches this server was fetched because of the payload.
    let fetched = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&fetched);
    let elsewhere = inbound_tests::local_server::serve(move |_, _| {
        counter.fetch_add(1, Ordering::SeqCst);
        inbound_tests::local_server::json_response(200, &serde_json::json!({}))
    })
    .await;
    let stack = Stack::start().await;
    let hostile = format!(
        "<script>alert(1)</script><img src=http://{elsewhere}/img onerror=alert(2)>\
         <a href=\"javascript:alert(3)\">click</a><iframe src=http://{elsewhere}/frame></iframe>\
         \u{7}\u{1b}[31mred\u{202e}txt.exe"
    );
    send_payment(&stack, "evt_hostile", "o1", 1000, &hostile).await;
    let receipt = receipt_of(stack.pool(), "evt_hostile").await;
    let console = Console::start(stack.database.url(), &["--by", "alice"]);
    let browser = Browser::start().await;
    browser
        .open(&console.url(&format!("/receipts/{receipt}")))
        .await;
    let payload = browser.text_of("#payload").await;
    assert!(payload.contains("<script>alert(1)</script>"), "{payload}");
    assert!(payload.contains("javascript:alert(3)"), "{payload}");
    assert!(
        payload.contains("\\u0007\\u001b[31mred\\u{202e}txt.exe"),
        "{payload}"
    );
    assert!(!browser.dialog_open().await, "a script ran");
    for element in ["script", "img", "iframe", "a[href^='javascript']"] {
        assert_eq!(browser.count(element).await, 0, "{element} was interpreted");
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        fetched.load(Ordering::SeqCst),
        0,
        "a request left for another origin"
    );
    browser
        .open(&console.url("/receipts?event_id=evt_hostile"))
        .await;
    assert!(!browser.dialog_open().await);
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cross_site_form_changes_nothing_and_read_only_offers_no_action() {
    let database = inbound_tests::TestDatabase::create().await;
    let pool = database.pool();
    let failed = domain::receipt_in(pool, "evt_csrf", "failed").await;
    let console = Console::start(database.url(), &["--by", "alice"]);
    let target = console.url(&format!("/receipts/{failed}/decide"));
    // Another site's page with a form aimed at the console, submitted by the person.
    let page = format!(
        "<form method=post action=\"{target}\"><input name=action value=close>\
         <input name=reason value=pwned><input name=expected value=failed>\
         <input name=confirm value=yes><button id=go>win a prize</button></form>"
    );
    let attacker = inbound_tests::local_server::serve(move |_, _| {
        hyper::Response::builder()
            .header("content-type", "text/html")
            .body(http_body_util::Full::new(bytes::Bytes::from(page.clone())))
            .expect("a page")
    })
    .await;
    let browser = Browser::start().await;
    // The person has a session with the console.
    browser
        .open(&console.url(&format!("/receipts/{failed}")))
        .await;
    browser.open(&format!("http://{attacker}/")).await;
    browser.click("#go").await;
    let refused = browser.text_of("#problem").await;
    assert!(refused.contains("nothing was changed"), "{refused}");
    assert_eq!(
        domain::receipt_state(pool, failed).await.0,
        ReceiptStatus::Failed
    );
    // The console's own form with its token taken out: refused.
    browser
        .open(&console.url(&format!("/receipts/{failed}")))
        .await;
    browser
        .client()
        .execute(
            "document.querySelector('input[name=csrf]').remove()",
            vec![],
        )
        .await
        .expect("a script");
    browser.type_into("#reason", "no token").await;
    browser.click("#action-close").await;
    assert!(browser.text_of("#problem").await.contains("token"));
    // Without a person, and read-only: no decision offered, and a form the page is made
    // to post anyway is refused.
    for args in [&[][..], &["--by", "alice", "--read-only"][..]] {
        let viewer = Console::start(database.url(), args);
        let page = viewer.url(&format!("/receipts/{failed}"));
        browser.open(&page).await;
        assert_eq!(browser.count("form.decision").await, 0, "{args:?}");
        assert!(browser.text_of("#who").await.contains("read-only"));
        browser
            .client()
            .execute(POST_A_CLOSE, vec![format!("{page}/decide").into()])
            .await
            .expect("a script");
        let refused = browser.text_of("#problem").await;
        assert!(refused.contains("nobody is named"), "{args:?}: {refused}");
    }
    assert_eq!(
        domain::receipt_state(pool, failed).await.0,
        ReceiptStatus::Failed
    );
    browser.close().await;
}

/// Builds a form closing a receipt, aimed at `arguments[0]`, and submits it.
const POST_A_CLOSE: &str = "const form = document.createElement('form');
    form.method = 'post'; form.action = arguments[0];
    for (const [name, value] of Object.entries({action: 'close', reason: 'x', expected: 'failed', confirm: 'yes'})) {
        const input = document.createElement('input'); input.name = name; input.value = value;
        form.appendChild(input);
    }
    document.body.appendChild(form); form.submit();";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bulk_close_lists_what_it_will_change_and_closes_exactly_that() {
    let database = inbound_tests::TestDatabase::create().await;
    let pool = database.pool();
    let first = domain::receipt_in(pool, "evt_bulk_1", "failed").await;
    let second = domain::receipt_in(pool, "evt_bulk_2", "failed").await;
    let console = Console::start(database.url(), &["--by", "alice"]);
    let browser = Browser::start().await;
    browser
        .open(&console.url("/receipts?status=failed&integration=stripe-acme"))
        .await;
    browser.type_into("#bulk-reason", "test-mode events").await;
    browser.click("#bulk-close").await;
    let changes = browser.text_of("#changes").await;
    assert!(changes.contains("These 2 failed receipts"), "{changes}");
    assert_eq!(browser.count("#selected tbody tr").await, 2);
    assert_eq!(
        domain::receipt_state(pool, first).await.0,
        ReceiptStatus::Failed,
        "the listing changes nothing"
    );
    browser.click("#confirm-button").await;
    browser.element("#filter").await;
    for id in [first, second] {
        assert_eq!(
            domain::receipt_state(pool, id).await.1,
            Some(ReceiptOutcome::Closed)
        );
    }
    browser.close().await;
}

/// The fixture configuration's payment and refund routes ordered (by PaymentIntent).
fn ordered(mut options: inbound_tests::ServiceOptions) -> inbound_tests::ServiceOptions {
    let mut config = inbound_tests::config::ConfigEdit::parse(&options.config_toml);
    for route in ["payment_intent.succeeded", "charge.refunded"] {
        config
            .route("stripe-acme", route)
            .insert("ordered".to_owned(), true.into());
    }
    options.config_toml = config.to_toml();
    options
}

/// On call: a refund waits behind its PaymentIntent's quarantined payment (an ordered
/// route). From the payment's page, its subject's page shows the whole history — the
/// payment quarantined and why, the refund pending behind it, the banner naming the receipt
/// that holds it — and after the fix a replay lets both run, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_follows_a_held_subject_from_its_receipt_to_its_timeline_and_releases_it() {
    let stack = Stack::builder()
        .ingress(ordered)
        .worker(ordered)
        .start()
        .await;
    let pool = stack.pool();
    domain::seed_order(pool, "o9", "pi_o9", 2500, "usd").await;
    send_payment(&stack, "evt_pay_o9", "o9", 2000, "order o9").await;
    let payment = receipt_of(pool, "evt_pay_o9").await;
    eventually(
        "the worker quarantines the payment",
        Duration::from_secs(20),
        async || {
            (domain::receipt_state(pool, payment).await.0 == ReceiptStatus::Quarantined)
                .then_some(())
        },
    )
    .await;
    let body = domain::stripe_event(
        "evt_refund_o9",
        "charge.refunded",
        domain::order_charge("pi_o9", "o9", 2000, 2000),
    );
    let request = SignedRequest::new("stripe-acme", stripe_headers(STRIPE_SECRET, &body, 0), body);
    assert_eq!(stack.deliver(&request).await.status, 200);
    let refund = receipt_of(pool, "evt_refund_o9").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        domain::receipt_state(pool, refund).await.0,
        ReceiptStatus::Pending,
        "held behind the quarantined payment"
    );

    let console = Console::start(stack.database.url(), &["--by", "alice"]);
    let browser = Browser::start().await;
    browser
        .open(&console.url(&format!("/receipts/{payment}")))
        .await;
    browser.click("#subject-link a").await;
    let held = browser.text_of("#held").await;
    assert!(held.contains(&format!("receipt {payment}")), "{held}");
    let timeline = browser.text_of("#timeline").await;
    assert!(timeline.contains("evt_pay_o9"), "{timeline}");
    assert!(
        timeline.contains("does not pay order o9"),
        "the reason: {timeline}"
    );
    assert!(timeline.contains("evt_refund_o9"), "{timeline}");
    assert!(timeline.contains("pending"), "{timeline}");
    browser.screenshot("subject").await;

    // Fixed, the payment is replayed from its page: it runs, then the refund behind it.
    sqlx::query("UPDATE orders SET total_minor = 2000 WHERE id = 'o9'")
        .execute(pool)
        .await
        .expect("fix the order");
    browser
        .click(&format!("a[href='/receipts/{payment}']"))
        .await;
    browser
        .type_into("#reason", "order o9 total corrected (INC-512)")
        .await;
    browser.click("#action-replay").await;
    browser.click("#confirm-button").await;
    eventually("both run", Duration::from_secs(20), async || {
        let refunded = domain::receipt_state(pool, refund).await
            == (ReceiptStatus::Done, Some(ReceiptOutcome::Applied), None);
        refunded.then_some(())
    })
    .await;
    assert_eq!(domain::order_status(pool, "o9").await, "refunded");
    browser.close().await;
}
