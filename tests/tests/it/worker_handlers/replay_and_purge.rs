//! Backoff to `failed`, operator replay (and what it refuses), and purge of payloads and
//! keys without stranding a queue row or losing deduplication early.

use super::*;

/// Replays `receipts` as operator `ops`, giving `reason`.
async fn replay_as_ops(
    pool: &sqlx::PgPool,
    receipts: &[i64],
    reason: &str,
) -> Result<(), admin::ReplayError> {
    let ids: Vec<_> = receipts
        .iter()
        .map(|&id| inbound_core::keys::ReceiptId(id))
        .collect();
    let mut connection = pool.acquire().await.expect("conn");
    admin::replay(&mut connection, &ids, None, "ops", reason).await
}

#[tokio::test]
async fn a_poison_receipt_fails_after_max_attempts_on_schedule_and_a_replay_applies_it() {
    let fixture = domain::Fixture::new().await;
    let (pool, config) = (fixture.pool(), &fixture.config);
    let settings = domain::settings_with(|settings| {
        // Minutes of backoff, passed on the worker's clock instead of waited out.
        settings
            .max_attempts(4)
            .backoff_base(Duration::from_secs(60))
            .backoff_cap(Duration::from_secs(3600))
    });
    let worker = domain::worker(pool, settings);
    let poison = accept_succeeded(pool, config, "evt_p", "pi_p", "o_late", 1000, "usd").await;

    // The worker's clock stands in for waiting: each delay is kept, then passed.
    let mut delays = Vec::new();
    for attempt in 1..=4 {
        match &step(&worker).await[..] {
            [Attempt::Retrying { delay_ms, .. }] if attempt < 4 => {
                delays.push(*delay_ms);
                let delay = Duration::from_millis(u64::try_from(*delay_ms).expect("ms"));
                worker.clock().advance(delay - Duration::from_secs(1));
                assert!(step(&worker).await.is_empty(), "claimed before its delay");
                worker.clock().advance(Duration::from_secs(2));
            }
            [Attempt::Failed { error }] if attempt == 4 => {
                assert!(error.contains("o_late does not exist"))
            }
            other => panic!("attempt {attempt}: {other:?}"),
        }
    }
    // Equal jitter around 60 s · 2^(n-1): [30, 60), [60, 120), [120, 240) seconds.
    for (index, delay) in delays.iter().enumerate() {
        let full = 60_000u128 << index;
        assert!(
            (full / 2..=full).contains(delay),
            "attempt {} waited {delay} ms",
            index + 1
        );
    }
    let detail = receipt_detail(pool, poison).await;
    assert_eq!(
        (detail.status.as_str(), detail.attempts, detail.visible_at),
        ("failed", 4, None)
    );

    // The order appears; an operator replays the receipt and it applies.
    domain::seed_order(pool, "o_late", "pi_p", 1000, "usd").await;
    replay_as_ops(pool, &[poison], "order created")
        .await
        .expect("replay");
    step(&worker).await;
    assert_eq!(
        domain::receipt_state(pool, poison).await,
        (ReceiptStatus::Done, Some(ReceiptOutcome::Applied), None)
    );
    let replays: (String, String, String) = sqlx::query_as(
        "SELECT previous_status, replayed_by, reason FROM receipt_replays WHERE receipt_id = $1",
    )
    .bind(poison)
    .fetch_one(pool)
    .await
    .expect("replay recorded");
    assert_eq!(
        replays,
        ("failed".into(), "ops".into(), "order created".into())
    );
}

/// A replay that names a receipt which does not exist is refused whole, and so is one of
/// a receipt that is done: only failed or quarantined receipts, and pending ones, replay.
#[tokio::test]
async fn a_replay_naming_an_unknown_receipt_or_a_done_one_is_refused() {
    let fixture = domain::Fixture::new().await;
    let (pool, config) = (fixture.pool(), &fixture.config);
    // Failed at its first attempt, its order not created yet.
    let settings = domain::settings_with(|settings| settings.max_attempts(1));
    let worker = domain::worker(pool, settings);
    let poison = accept_succeeded(pool, config, "evt_p", "pi_p", "o_late", 1000, "usd").await;
    let attempts = step(&worker).await;
    assert!(
        matches!(attempts[..], [Attempt::Failed { .. }]),
        "{attempts:?}"
    );

    domain::seed_order(pool, "o_late", "pi_p", 1000, "usd").await;
    let refused = replay_as_ops(pool, &[poison, 999_999], "order created").await;
    assert!(refused.is_err_and(|error| error.to_string() == "receipt 999999 does not exist"));
    replay_as_ops(pool, &[poison], "order created")
        .await
        .expect("replay");
    step(&worker).await;
    let wrong_state = replay_as_ops(pool, &[poison], "again").await;
    assert!(wrong_state.is_err_and(|error| {
        error
            .to_string()
            .contains("is done; only failed or quarantined receipts (queued again) and pending")
    }));
}

/// The dropped key period that held today's receipts (the newest one dropped).
fn todays_period(dropped: &[admin::Dropped]) -> admin::Dropped {
    *dropped
        .iter()
        .max_by_key(|dropped| dropped.first_day)
        .expect("a period dropped")
}

/// The clock `days` days from now, for retention: what it drops is decided against it.
fn days_ahead(days: i64) -> Option<chrono::DateTime<chrono::Utc>> {
    Some(chrono::Utc::now() + chrono::Duration::days(days))
}

#[tokio::test]
async fn purge_drops_payloads_then_keys_and_duplicates_stay_detected_until_then() {
    let fixture = domain::Fixture::new().await;
    let (pool, config, worker) = (fixture.pool(), &fixture.config, fixture.worker());
    domain::seed_order(pool, "o1", "pi_1", 1000, "usd").await;
    let body = succeeded("evt_1", "pi_1", "o1", 1000, "usd");
    let receipt = domain::accept(pool, config, &body).await.expect("new");
    step(&worker).await;
    // The effect is completed by the dispatcher in production; here by hand, so the
    // receipt may leave.
    sqlx::query("UPDATE effects SET status = 'completed'")
        .execute(pool)
        .await
        .expect("complete");

    let mut connection = pool.acquire().await.expect("conn");
    let dropped = admin::drop_payload_days(&mut connection, 7, days_ahead(10))
        .await
        .expect("purge");
    let today = chrono::Utc::now().date_naive();
    assert!(
        dropped
            .iter()
            .any(|day| day.first_day == today && day.carried == 0),
        "{dropped:?}"
    );
    let detail = admin::receipt_detail(&mut connection, inbound_core::keys::ReceiptId(receipt))
        .await
        .expect("query")
        .expect("row");
    assert!(detail.payload.is_none(), "payload dropped");
    assert_eq!(
        domain::accept(pool, config, &body).await,
        None,
        "the key still detects the duplicate"
    );
    // 20 days on, today's key period is the current or the previous one: deduplication
    // still reads it.
    assert_eq!(
        admin::drop_key_periods(&mut connection, 7, days_ahead(20))
            .await
            .expect("purge"),
        vec![],
        "not old enough"
    );
    let dropped = admin::drop_key_periods(&mut connection, 7, days_ahead(200))
        .await
        .expect("purge");
    assert_eq!(todays_period(&dropped).carried, 0, "{dropped:?}");
    assert!(
        admin::receipt_detail(&mut connection, inbound_core::keys::ReceiptId(receipt))
            .await
            .expect("query")
            .is_none()
    );
    assert_eq!(
        domain::order_status(pool, "o1").await,
        "paid",
        "business state stays"
    );
}

/// No foreign key ties a queue row to its receipt (it cost the hot insert a trigger per
/// row): retention carries a receipt that still has one, however it got there, so no
/// queue row is ever left without its receipt.
#[tokio::test]
async fn purge_never_strands_a_queue_row() {
    let fixture = domain::Fixture::new().await;
    let (pool, config) = (fixture.pool(), &fixture.config);
    let receipt = domain::accept(pool, config, &succeeded("evt_1", "pi_1", "o1", 1000, "usd"))
        .await
        .expect("new");
    // A done receipt that still has its queue row: no statement of inbound's leaves one,
    // so it is made by hand.
    sqlx::query("UPDATE receipts SET status = 'done', outcome = 'ignored', finished_at = now()")
        .execute(pool)
        .await
        .expect("done by hand");
    let mut connection = pool.acquire().await.expect("conn");
    let dropped = admin::drop_key_periods(&mut connection, 7, days_ahead(200))
        .await
        .expect("purge");
    assert_eq!(todays_period(&dropped).carried, 1, "carried, not dropped");
    let queued: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM receipt_queue q JOIN receipts r ON r.id = q.receipt_id WHERE r.id = $1",
    )
    .bind(receipt)
    .fetch_one(pool)
    .await
    .expect("queue row");
    assert_eq!(queued, 1, "the receipt and its queue row both stay");
}

#[tokio::test]
async fn receipts_with_undelivered_effects_are_carried_past_their_period() {
    let fixture = domain::Fixture::new().await;
    let (pool, config, worker) = (fixture.pool(), &fixture.config, fixture.worker());
    domain::seed_order(pool, "o1", "pi_1", 1000, "usd").await;
    let receipt = accept_succeeded(pool, config, "evt_1", "pi_1", "o1", 1000, "usd").await;
    step(&worker).await;
    let mut connection = pool.acquire().await.expect("conn");
    let dropped = admin::drop_key_periods(&mut connection, 7, days_ahead(200))
        .await
        .expect("purge");
    assert_eq!(
        todays_period(&dropped).carried,
        1,
        "its effect is still pending"
    );
    let effects = admin::receipt_effects(&mut connection, inbound_core::keys::ReceiptId(receipt))
        .await
        .expect("effects");
    assert_eq!(effects.len(), 1, "carried with its receipt");
    // Closed now, it goes with the next run.
    sqlx::query("UPDATE effects SET status = 'completed'")
        .execute(pool)
        .await
        .expect("complete");
    admin::drop_key_periods(&mut connection, 7, days_ahead(200))
        .await
        .expect("purge");
    assert!(
        admin::receipt_detail(&mut connection, inbound_core::keys::ReceiptId(receipt))
            .await
            .expect("query")
            .is_none(),
        "the carried receipt left once its effect closed"
    );
}

/// A sender chooses the ids that reasons name: however long they are, what is stored and
/// logged about one receipt stays bounded.
#[tokio::test]
async fn reasons_naming_payload_values_are_bounded() {
    let fixture = domain::Fixture::new().await;
    let (pool, config) = (fixture.pool(), &fixture.config);
    let long_order = "o".repeat(20_000);
    let receipt = accept_succeeded(pool, config, "evt_1", "pi_1", &long_order, 1000, "usd").await;
    let worker = domain::worker(pool, domain::settings());
    let attempts = step(&worker).await;
    let Attempt::Retrying { error, .. } = &attempts[0] else {
        panic!("{attempts:?}")
    };
    assert!(
        error.len() <= inbound_worker::test_hooks::MAX_REASON_BYTES,
        "{}",
        error.len()
    );
    let stored: String = sqlx::query_scalar("SELECT last_error FROM receipts WHERE id = $1")
        .bind(receipt)
        .fetch_one(pool)
        .await
        .expect("receipt");
    assert!(stored.len() <= inbound_worker::test_hooks::MAX_REASON_BYTES);
}
