//! `inboundctl subject show|held` through the real binary: one subject's history in
//! event-time order with its decisions, JSON exact and text escaped; the ordered subjects
//! held, with what waits behind each.

use super::*;
use inbound_tests::domain;

/// Accepts a `payment_intent.*` event about `payment`, created at `created`.
async fn about(
    pool: &sqlx::PgPool,
    config: &inbound_core::config::Config,
    event_id: &str,
    event_type: &str,
    payment: &str,
    created: i64,
) -> i64 {
    let body = domain::stripe_event_at(
        event_id,
        event_type,
        domain::payment_intent(payment, "o1", 1000, "usd", "succeeded"),
        created,
    );
    domain::accept(pool, config, &body).await.expect("new")
}

#[tokio::test]
async fn subject_show_lists_a_subjects_receipts_in_event_time_order_and_held_names_what_holds_it() {
    let database = TestDatabase::create().await;
    let pool = database.pool();
    let env = [("DATABASE_URL".to_owned(), database.url().to_owned())];
    let config = domain::config_edited(|config| {
        config
            .route("stripe-acme", "payment_intent.succeeded")
            .insert("ordered".to_owned(), true.into());
    });
    // Accepted in one order, created in the other; the first one quarantined by hand.
    let later = about(
        pool,
        &config,
        "evt_later",
        "payment_intent.succeeded",
        "pi_\u{1b}[31mred",
        1_700_000_200,
    )
    .await;
    let earlier = about(
        pool,
        &config,
        "evt_earlier",
        "payment_intent.succeeded",
        "pi_\u{1b}[31mred",
        1_700_000_100,
    )
    .await;
    let id = earlier.to_string();
    let quarantined = inboundctl(
        &[
            "receipts",
            "quarantine",
            &id,
            "--reason",
            "checking with finance",
            "--by",
            "ops",
        ],
        &env,
    );
    assert!(
        quarantined.status.success(),
        "{}",
        text(&quarantined.stderr)
    );

    let shown = inboundctl(
        &["subject", "show", "stripe-acme", "pi_\u{1b}[31mred"],
        &env,
    );
    assert!(shown.status.success(), "{}", text(&shown.stderr));
    let out = text(&shown.stdout);
    assert!(
        !out.contains('\u{1b}'),
        "no escape reaches the terminal: {out:?}"
    );
    let (first, second) = (
        out.find("evt_earlier").expect("listed"),
        out.find("evt_later").expect("listed"),
    );
    assert!(first < second, "event-time order: {out}");
    assert!(
        out.contains(&format!(
            "HELD: its later ordered receipts wait until receipt {earlier}"
        )),
        "{out}"
    );
    assert!(
        out.contains("quarantine by ops"),
        "the decision and its person: {out}"
    );

    let json = inboundctl(
        &[
            "subject",
            "show",
            "stripe-acme",
            "pi_\u{1b}[31mred",
            "--json",
        ],
        &env,
    );
    let timeline: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(timeline["subject"], "pi_\u{1b}[31mred", "JSON stays exact");
    let ids: Vec<i64> = timeline["receipts"]
        .as_array()
        .expect("receipts")
        .iter()
        .map(|receipt| receipt["id"].as_i64().expect("id"))
        .collect();
    assert_eq!(ids, [earlier, later]);
    assert_eq!(timeline["held_by"], serde_json::json!([earlier]));

    let held = inboundctl(&["subject", "held", "--json"], &env);
    let held: serde_json::Value = serde_json::from_slice(&held.stdout).expect("JSON");
    assert_eq!(held[0]["held_by"], earlier);
    assert_eq!(held[0]["waiting"], 1, "the later receipt waits");
    assert_eq!(held[0]["status"], "quarantined");
    let none = inboundctl(&["subject", "show", "stripe-acme", "pi_none"], &env);
    assert!(text(&none.stdout).contains("no receipt of integration stripe-acme is about"));
}
