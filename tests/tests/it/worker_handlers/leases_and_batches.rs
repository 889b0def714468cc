//! Leases, fencing and batches: a worker whose lease was taken over cannot complete, claims
//! are bounded by payload bytes, and a batch commits its good receipts and only what an
//! `Applied` verdict wrote.

use super::*;

#[tokio::test]
async fn a_worker_whose_lease_was_taken_over_cannot_complete() {
    let fixture = domain::Fixture::new().await;
    let (pool, config) = (fixture.pool(), &fixture.config);
    domain::seed_order(pool, "o1", "pi_1", 1000, "usd").await;
    accept_succeeded(pool, config, "evt_1", "pi_1", "o1", 1000, "usd").await;

    let mut connection = pool.acquire().await.expect("conn");
    // Worker A claims with a 30 s lease; 31 s later worker B takes over.
    let stale = domain::claim(&mut connection, 1, Duration::from_secs(30), "worker-a")
        .await
        .remove(0);
    let later = clock::ahead(Duration::from_secs(31));
    let current = domain::claim_at(
        &mut connection,
        1,
        Duration::from_secs(30),
        "worker-b",
        later,
    )
    .await
    .remove(0);
    assert!(current.reclaimed && current.lease_token > stale.lease_token);
    drop(connection);

    let worker = domain::worker(pool, domain::settings());
    assert_eq!(
        process(&worker, stale.clone()).await,
        Attempt::LeaseLost,
        "A's transaction rolls back"
    );
    assert_eq!(domain::order_status(pool, "o1").await, "awaiting_payment");
    assert!(matches!(
        process(&worker, current).await,
        Attempt::Committed(Transition::Applied { .. })
    ));
    assert_eq!(domain::order_status(pool, "o1").await, "paid");
    // A's late bookkeeping is fenced too.
    let mut connection = pool.acquire().await.expect("conn");
    assert!(
        !queue::release_for_retry(&mut connection, stale.lease(), Duration::ZERO, "late", None)
            .await
            .expect("query")
    );
    assert!(
        !queue::fail_exhausted(&mut connection, stale.lease(), "late")
            .await
            .expect("query")
    );
    assert_eq!(
        domain::receipt_state(pool, stale.receipt_id.0).await.0,
        ReceiptStatus::Done
    );
}

/// A replayed receipt starts a new life; a worker stalled with a token from the earlier
/// one must not match any token of the new life, however many claims it sees.
#[tokio::test]
async fn a_stale_token_from_before_a_replay_never_matches_again() {
    let fixture = domain::Fixture::new().await;
    let (pool, config) = (fixture.pool(), &fixture.config);
    let receipt = domain::order_with_pending_payment(pool, config).await;
    let mut connection = pool.acquire().await.expect("conn");
    // Life one: two claims (the second after the first lease ran out), then an operator
    // gives up.
    let lease = Duration::from_secs(30);
    let after_leases = |leases: u32| clock::ahead((lease + Duration::from_secs(1)) * leases);
    domain::claim(&mut connection, 1, lease, "worker-a").await;
    let stale = domain::claim_at(&mut connection, 1, lease, "worker-a", after_leases(1))
        .await
        .remove(0);
    admin::resolve_pending(
        &mut connection,
        &[inbound_core::keys::ReceiptId(receipt)],
        admin::PendingResolution::Quarantine,
        "ops",
        "looks wrong",
    )
    .await
    .expect("quarantine");
    admin::replay(
        &mut connection,
        &[inbound_core::keys::ReceiptId(receipt)],
        None,
        "ops",
        "looked again",
    )
    .await
    .expect("replay");
    // Life two: as many claims as life one had, and more.
    let mut tokens = Vec::new();
    for leases in 2..5 {
        let claimed = domain::claim_at(&mut connection, 1, lease, "worker-b", after_leases(leases))
            .await
            .remove(0);
        assert!(
            claimed.lease_token > stale.lease_token,
            "{claimed:?} vs {stale:?}"
        );
        tokens.push(claimed.lease_token);
    }
    assert!(
        tokens.windows(2).all(|pair| pair[1] > pair[0]),
        "{tokens:?}"
    );
    drop(connection);
    let worker = domain::worker(pool, domain::settings());
    assert_eq!(process(&worker, stale).await, Attempt::LeaseLost);
    assert_eq!(domain::order_status(pool, "o1").await, "awaiting_payment");
}

/// Claims stop at the payload budget: a worker holds at most that many payload bytes of
/// claimed receipts (one larger receipt is taken alone when nothing else is in flight).
#[tokio::test]
async fn claims_are_bounded_by_payload_bytes() {
    let fixture = domain::Fixture::new().await;
    let (pool, config) = (fixture.pool(), &fixture.config);
    let padding = "x".repeat(3_000);
    let mut bytes = Vec::new();
    for n in 0..10 {
        let mut object = payment_intent(
            &format!("pi_{n}"),
            &format!("o{n}"),
            1000,
            "usd",
            "succeeded",
        );
        object["description"] = padding.clone().into();
        let body = stripe_event(&format!("evt_{n}"), "payment_intent.succeeded", object);
        bytes.push(body.len());
        domain::accept(pool, config, &body).await.expect("new");
    }
    let one = bytes[0];
    // Room for three and a half receipts.
    let settings = domain::settings_with(|settings| settings.payload_budget_bytes(one * 7 / 2));
    let worker = domain::worker(pool, settings.clone());
    assert_eq!(
        step(&worker).await.len(),
        3,
        "three fit, the fourth would not"
    );

    // Smaller than one receipt: still one at a time, never none.
    let settings = settings
        .to_builder()
        .payload_budget_bytes(one / 2)
        .build()
        .expect("settings");
    let worker = domain::worker(pool, settings);
    assert_eq!(step(&worker).await.len(), 1);
    assert_eq!(step(&worker).await.len(), 1);
    let queued_bytes: Vec<i32> = sqlx::query_scalar("SELECT payload_bytes FROM receipt_queue")
        .fetch_all(pool)
        .await
        .expect("queue");
    assert!(
        queued_bytes.iter().all(|&size| size as usize == one),
        "{queued_bytes:?} vs {one}"
    );
}

/// One batch, one transaction, a savepoint per receipt: a receipt whose order does not
/// exist yet and one whose lease was taken over each roll back alone; the others commit.
#[tokio::test]
async fn a_batch_commits_its_good_receipts_and_rolls_back_each_failure_alone() {
    let fixture = domain::Fixture::new().await;
    let (pool, config) = (fixture.pool(), &fixture.config);
    seed_three_orders(pool).await;
    accept_succeeded(pool, config, "evt_1", "pi_1", "o1", 1000, "usd").await;
    let missing = accept_succeeded(pool, config, "evt_9", "pi_9", "o9", 1000, "usd").await;
    let taken_over = accept_succeeded(pool, config, "evt_2", "pi_2", "o2", 1000, "usd").await;
    accept_succeeded(pool, config, "evt_3", "pi_3", "o3", 1000, "usd").await;

    let batch = claim_all(pool).await;
    assert_eq!(batch.len(), 4);
    // Another worker took over evt_2's lease meanwhile.
    sqlx::query("UPDATE receipt_queue SET lease_token = lease_token + 1 WHERE receipt_id = $1")
        .bind(taken_over)
        .execute(pool)
        .await
        .expect("take over");

    let worker = domain::worker(pool, domain::settings());
    let attempts = process_batch(&worker, batch).await;
    assert!(
        matches!(attempts[0], Attempt::Committed(Transition::Applied { .. })),
        "{attempts:?}"
    );
    assert!(
        matches!(attempts[1], Attempt::Retrying { .. }),
        "{attempts:?}"
    );
    assert_eq!(attempts[2], Attempt::LeaseLost);
    assert!(
        matches!(attempts[3], Attempt::Committed(Transition::Applied { .. })),
        "{attempts:?}"
    );

    assert_eq!(domain::order_status(pool, "o1").await, "paid");
    assert_eq!(domain::order_status(pool, "o2").await, "awaiting_payment");
    assert_eq!(domain::order_status(pool, "o3").await, "paid");
    assert_eq!(
        domain::operation_keys(pool).await,
        ["order.paid:acme:o1:pi_1", "order.paid:acme:o3:pi_3"]
    );
    assert_eq!(
        domain::receipt_state(pool, missing).await.0,
        ReceiptStatus::Pending
    );
    assert_eq!(
        domain::receipt_state(pool, taken_over).await.0,
        ReceiptStatus::Pending
    );
    let queued: Vec<(i64, Option<String>)> =
        sqlx::query_as("SELECT receipt_id, last_error FROM receipt_queue ORDER BY receipt_id")
            .fetch_all(pool)
            .await
            .expect("queue");
    assert_eq!(queued.len(), 2, "{queued:?}");
    assert!(
        queued[0]
            .1
            .as_deref()
            .is_some_and(|error| error.contains("does not exist")),
        "the missing order's retry is recorded: {queued:?}"
    );
    assert_eq!(
        queued[1].1, None,
        "the taken-over receipt is left to its new holder"
    );
}

/// `orders.mark_paid`, except that for `evt_2` it fails *after* the order was written.
struct FailsAfterWriting(RegisteredHandler);

impl Handler for FailsAfterWriting {
    async fn apply(
        &self,
        transaction: &mut sqlx::PgConnection,
        input: HandlerInput<'_>,
    ) -> Result<Transition, HandlerError> {
        let transition = self.0.apply(transaction, input).await?;
        if input.event_id == "evt_2" {
            return Err(HandlerError::transient("failed after writing"));
        }
        Ok(transition)
    }
}

#[tokio::test]
async fn a_handler_failing_after_its_write_leaves_no_trace_and_the_rest_of_its_batch_commits() {
    let fixture = domain::Fixture::new().await;
    let (pool, config) = (fixture.pool(), &fixture.config);
    seed_three_orders(pool).await;
    let mut receipts = Vec::new();
    for n in 1..=3 {
        let (order, payment, event) = (format!("o{n}"), format!("pi_{n}"), format!("evt_{n}"));
        receipts.push(accept_succeeded(pool, config, &event, &payment, &order, 1000, "usd").await);
    }
    let mut registry = domain::stock_registry();
    let mark_paid = registry.get(ORDERS_MARK_PAID).expect("registered").clone();
    registry.register(ORDERS_MARK_PAID, FailsAfterWriting(mark_paid));
    let worker = inbound_worker::Worker::new(
        pool.clone(),
        std::sync::Arc::new(config.clone()),
        registry,
        domain::settings(),
    );

    let batch = claim_all(pool).await;
    let attempts = process_batch(&worker, batch).await;
    assert!(
        matches!(
            attempts[..],
            [
                Attempt::Committed(Transition::Applied { .. }),
                Attempt::Retrying { .. },
                Attempt::Committed(Transition::Applied { .. })
            ]
        ),
        "{attempts:?}"
    );
    assert_eq!(domain::order_status(pool, "o1").await, "paid");
    assert_eq!(
        domain::order_status(pool, "o2").await,
        "awaiting_payment",
        "the failed receipt's write was rolled back"
    );
    assert_eq!(domain::order_status(pool, "o3").await, "paid");
    assert_eq!(
        domain::operation_keys(pool).await,
        ["order.paid:acme:o1:pi_1", "order.paid:acme:o3:pi_3"]
    );
    assert_eq!(
        domain::receipt_state(pool, receipts[0]).await.0,
        ReceiptStatus::Done
    );
    assert_eq!(
        domain::receipt_state(pool, receipts[1]).await.0,
        ReceiptStatus::Pending
    );
    assert_eq!(
        domain::receipt_state(pool, receipts[2]).await.0,
        ReceiptStatus::Done
    );
    let last_error: Option<String> =
        sqlx::query_scalar("SELECT last_error FROM receipt_queue WHERE receipt_id = $1")
            .bind(receipts[1])
            .fetch_one(pool)
            .await
            .expect("still queued");
    assert_eq!(last_error.as_deref(), Some("failed after writing"));
}

/// A handler that writes (marks the order paid) and then gives a verdict other than
/// `Applied` for some events — or fails.
struct VerdictAfterWriting(RegisteredHandler);

impl Handler for VerdictAfterWriting {
    async fn apply(
        &self,
        transaction: &mut sqlx::PgConnection,
        input: HandlerInput<'_>,
    ) -> Result<Transition, HandlerError> {
        let transition = self.0.apply(transaction, input).await?;
        let reason = "decided after writing".to_owned();
        Ok(match input.event_id {
            "evt_2" | "evt_6" => Transition::Quarantine { reason },
            "evt_3" => Transition::Ignored { reason },
            "evt_4" => Transition::Duplicate { reason },
            "evt_5" => return Err(HandlerError::transient(reason)),
            _ => transition,
        })
    }
}

/// Seeds order `o{n}` awaiting 1000 usd through `pi_{n}` and accepts `evt_{n}` paying
/// it, for each `n` of `numbers`; returns the receipts in order.
async fn orders_with_pending_payments(
    pool: &sqlx::PgPool,
    config: &inbound_core::config::Config,
    numbers: std::ops::RangeInclusive<u32>,
) -> Vec<i64> {
    let mut receipts = Vec::new();
    for n in numbers {
        let (order, payment, event) = (format!("o{n}"), format!("pi_{n}"), format!("evt_{n}"));
        domain::seed_order(pool, &order, &payment, 1000, "usd").await;
        receipts.push(accept_succeeded(pool, config, &event, &payment, &order, 1000, "usd").await);
    }
    receipts
}

/// A worker whose `orders.mark_paid` is wrapped in [`VerdictAfterWriting`].
fn verdict_after_writing_worker(
    pool: &sqlx::PgPool,
    config: &inbound_core::config::Config,
) -> inbound_worker::Worker {
    let stock = domain::stock_registry();
    let mut registry = stock.clone();
    let mark_paid = stock.get(ORDERS_MARK_PAID).expect("registered").clone();
    registry.register(ORDERS_MARK_PAID, VerdictAfterWriting(mark_paid));
    inbound_worker::Worker::new(
        pool.clone(),
        std::sync::Arc::new(config.clone()),
        registry,
        domain::settings(),
    )
}

/// Only `Applied` commits what a handler wrote: a handler that writes and then answers
/// `Quarantine`, `Ignored` or `Duplicate` leaves nothing behind (its receipt still ends as
/// it said) — here in a batch applied together; receipt by receipt in the test below. So
/// a replay after the cause is fixed applies the transition instead of reading as a false
/// `Duplicate` (the test after it).
#[tokio::test]
async fn only_an_applied_verdict_commits_the_handlers_writes() {
    let fixture = domain::Fixture::new().await;
    let (pool, config) = (fixture.pool(), &fixture.config);
    let receipts = orders_with_pending_payments(pool, config, 1..=4).await;
    let worker = verdict_after_writing_worker(pool, config);

    // Together: evt_1 to evt_4 in one transaction.
    let mut connection = pool.acquire().await.expect("conn");
    let together = domain::claim(&mut connection, 4, Duration::from_secs(30), "w").await;
    let attempts = process_batch(&worker, together).await;
    assert!(
        matches!(
            attempts[..],
            [
                Attempt::Committed(Transition::Applied { .. }),
                Attempt::Committed(Transition::Quarantine { .. }),
                Attempt::Committed(Transition::Ignored { .. }),
                Attempt::Committed(Transition::Duplicate { .. }),
            ]
        ),
        "{attempts:?}"
    );
    assert_eq!(domain::order_status(pool, "o1").await, "paid");
    for order in ["o2", "o3", "o4"] {
        assert_eq!(
            domain::order_status(pool, order).await,
            "awaiting_payment",
            "{order}: the handler's write stayed behind a verdict other than applied"
        );
    }
    assert_eq!(
        domain::operation_keys(pool).await,
        ["order.paid:acme:o1:pi_1"]
    );
    for (receipt, status, outcome) in [
        (receipts[1], ReceiptStatus::Quarantined, None),
        (
            receipts[2],
            ReceiptStatus::Done,
            Some(ReceiptOutcome::Ignored),
        ),
        (
            receipts[3],
            ReceiptStatus::Done,
            Some(ReceiptOutcome::Duplicate),
        ),
    ] {
        domain::assert_ended(pool, receipt, status, outcome, "decided after writing").await;
    }
}

/// [`only_an_applied_verdict_commits_the_handlers_writes`] for a batch applied receipt by
/// receipt (one of its receipts fails, so each is isolated): a verdict other than
/// `Applied` commits nothing there either.
#[tokio::test]
async fn a_verdict_other_than_applied_commits_nothing_when_the_batch_runs_receipt_by_receipt() {
    let fixture = domain::Fixture::new().await;
    let (pool, config) = (fixture.pool(), &fixture.config);
    let receipts = orders_with_pending_payments(pool, config, 5..=6).await;
    let worker = verdict_after_writing_worker(pool, config);

    // Receipt by receipt (evt_5 fails, so its batch is isolated): evt_6 quarantined.
    let mut connection = pool.acquire().await.expect("conn");
    let isolated = domain::claim(&mut connection, 2, Duration::from_secs(30), "w").await;
    let attempts = process_batch(&worker, isolated).await;
    assert!(
        matches!(
            attempts[..],
            [
                Attempt::Retrying { .. },
                Attempt::Committed(Transition::Quarantine { .. })
            ]
        ),
        "{attempts:?}"
    );
    for order in ["o5", "o6"] {
        assert_eq!(
            domain::order_status(pool, order).await,
            "awaiting_payment",
            "{order}: the handler's write stayed behind a verdict other than applied"
        );
    }
    let effects = domain::operation_keys(pool).await;
    assert!(effects.is_empty(), "{effects:?}");
    domain::assert_ended(
        pool,
        receipts[1],
        ReceiptStatus::Quarantined,
        None,
        "decided after writing",
    )
    .await;
}

/// A receipt quarantined by a handler that had written: once the cause is fixed (the stock
/// handler back), the replay applies — no false duplicate from the write that stayed
/// behind.
#[tokio::test]
async fn a_replay_after_the_handler_is_fixed_applies_instead_of_reading_as_a_duplicate() {
    let fixture = domain::Fixture::new().await;
    let (pool, config) = (fixture.pool(), &fixture.config);
    let receipts = orders_with_pending_payments(pool, config, 2..=2).await;
    let worker = verdict_after_writing_worker(pool, config);
    let mut connection = pool.acquire().await.expect("conn");
    let quarantined = domain::claim(&mut connection, 1, Duration::from_secs(30), "w").await;
    let attempts = process_batch(&worker, quarantined).await;
    assert!(
        matches!(
            attempts[..],
            [Attempt::Committed(Transition::Quarantine { .. })]
        ),
        "{attempts:?}"
    );

    // The cause fixed (the stock handler back), the replay applies: no false duplicate.
    admin::replay(
        &mut connection,
        &[inbound_core::keys::ReceiptId(receipts[0])],
        None,
        "test",
        "handler fixed",
    )
    .await
    .expect("replay");
    let fixed = domain::worker(pool, domain::settings());
    let attempts = step(&fixed).await;
    assert!(
        matches!(
            attempts[..],
            [Attempt::Committed(Transition::Applied { .. })]
        ),
        "{attempts:?}"
    );
    assert_eq!(domain::order_status(pool, "o2").await, "paid");
}
