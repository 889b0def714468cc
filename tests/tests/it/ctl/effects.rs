//! `inboundctl effects`: listed oldest first and summarised per sink, shown, retried and
//! resolved with their history kept.

use super::*;

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
        "INSERT INTO effects (id, receipt_id, operation_key, sink, kind, tenant, data, event, status, attempts, last_error)
         VALUES (effect_id_for($1), $1, $2, 'audit', 'order.paid', 'acme', '{}', '{}', $3, 1, 'server error 502') RETURNING id",
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
            "is completed; retry applies only to pending, uncertain, review, failed",
        ),
        (
            in_flight,
            vec!["--abandon"],
            "is in_flight; abandon applies only to pending, uncertain, review, failed",
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
