//! What the database holds after a run with acknowledged deliveries, checked against the
//! promises: nothing acknowledged is missing, no transition applied twice, one intent per
//! applied transition, nothing left unfinished (the soak and the restart drills).

use sqlx::{PgConnection, PgPool};

async fn scalar(conn: &mut PgConnection, sql: &'static str) -> i64 {
    sqlx::query_scalar(sql)
        .fetch_one(conn)
        .await
        .expect("audit query")
}

/// What the database holds after a run, checked against the promises.
#[derive(Debug, Clone, Default)]
pub struct Audit {
    /// Rows in `receipts`.
    pub receipts: i64,
    /// Orders paid at some point (`paid` or `refunded`).
    pub orders_paid: i64,
    /// |applied payments − paid orders| + |applied refunds − refunded orders| + orders
    /// paid by more than one applied receipt + paid orders whose paying receipt is not an
    /// applied one: every term counts on its own, so none can hide another.
    pub duplicate_transitions: i64,
    /// The most effect intents one operation key has.
    pub max_intents_per_operation: i64,
    /// |applied transitions − effect intents|: each applied transition here has one.
    pub transitions_without_one_intent: i64,
    /// Acknowledged event ids with no receipt.
    pub acked_missing: i64,
    /// Receipts not `done`, plus queue rows without their pending receipt (a queue row
    /// belongs to a pending receipt only).
    pub stuck: i64,
    /// A few of them: event type, status and reason.
    pub stuck_examples: Vec<String>,
}

/// Checks the reference domain after a run in which `acknowledged` event ids (of
/// `stripe-acme`) were answered 2xx.
pub async fn audit(pool: &PgPool, acknowledged: &[String]) -> Audit {
    // One snapshot for every count, so they agree with each other.
    let mut snapshot = pool.begin().await.expect("begin audit");
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        .execute(&mut *snapshot)
        .await
        .expect("snapshot");
    let conn = &mut *snapshot;
    let applied_payments = scalar(
        conn,
        "SELECT count(*) FROM receipts WHERE outcome = 'applied' AND event_type = 'payment_intent.succeeded'",
    )
    .await;
    // Refunds that refunded an order: an applied `charge.refunded` that only noted a later
    // event time of an order already refunded (applied so that its write commits) has no
    // effect and changed no order.
    let applied_refunds = scalar(
        conn,
        "SELECT count(*) FROM receipts r WHERE r.outcome = 'applied' AND r.event_type = 'charge.refunded'
           AND EXISTS (SELECT 1 FROM effects e WHERE e.receipt_id = r.id)",
    )
    .await;
    let orders_paid = scalar(
        conn,
        "SELECT count(*) FROM orders WHERE status IN ('paid', 'refunded')",
    )
    .await;
    let orders_refunded = scalar(
        conn,
        "SELECT count(*) FROM orders WHERE status = 'refunded'",
    )
    .await;
    let intents = scalar(conn, "SELECT count(*) FROM effects").await;
    let acked_missing = sqlx::query_scalar(
        "SELECT count(*) FROM unnest($1::text[]) AS acked(event_id)
         WHERE NOT EXISTS (SELECT 1 FROM receipts r
                           WHERE r.integration = 'stripe-acme' AND r.event_id = acked.event_id)",
    )
    .bind(acknowledged)
    .fetch_one(&mut *conn)
    .await
    .expect("acked-but-missing");
    Audit {
        receipts: scalar(conn, "SELECT count(*) FROM receipts").await,
        orders_paid,
        // Each term on its own and never negative, so that errors cannot cancel out.
        duplicate_transitions: (applied_payments - orders_paid).abs()
            + (applied_refunds - orders_refunded).abs()
            + scalar(
                conn,
                "SELECT count(*) FROM (
                     SELECT p.payload #>> '{data,object,metadata,order_id}'
                     FROM receipts r JOIN receipt_payloads p ON p.receipt_id = r.id
                     WHERE r.outcome = 'applied' AND r.event_type = 'payment_intent.succeeded'
                     GROUP BY 1 HAVING count(*) > 1) AS paid_twice",
            )
            .await
            + scalar(
                conn,
                "SELECT count(*) FROM orders o
                 WHERE o.status IN ('paid', 'refunded')
                   AND NOT EXISTS (SELECT 1 FROM receipts r
                                   WHERE r.id = o.paid_receipt_id AND r.outcome = 'applied')",
            )
            .await,
        max_intents_per_operation: scalar(
            conn,
            "SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM effects GROUP BY operation_key) AS per_key",
        )
        .await,
        transitions_without_one_intent: (applied_payments + applied_refunds - intents).abs(),
        acked_missing,
        stuck: scalar(
            conn,
            "SELECT (SELECT count(*) FROM receipts WHERE status <> 'done')
                  + (SELECT count(*) FROM receipt_queue q
                     WHERE NOT EXISTS (SELECT 1 FROM receipts r
                                       WHERE r.id = q.receipt_id AND r.status = 'pending'))",
        )
        .await,
        stuck_examples: sqlx::query_scalar(
            "SELECT concat_ws(' ', r.event_id, r.event_type, r.status, r.outcome_reason,
                              'attempts', r.attempts, q.attempts, r.last_error, q.last_error,
                              'visible', q.visible_at - now(),
                              'same payment:', (
                                  SELECT string_agg(concat_ws(' ', p.event_id, p.event_type, p.status,
                                                              p.outcome, p.outcome_reason), '; ')
                                  FROM receipts p JOIN receipt_payloads pp ON pp.receipt_id = p.id
                                  WHERE p.id <> r.id
                                    AND coalesce(pp.payload #>> '{data,object,payment_intent}',
                                                 pp.payload #>> '{data,object,id}')
                                      = coalesce(rp.payload #>> '{data,object,payment_intent}',
                                                 rp.payload #>> '{data,object,id}')))
             FROM receipts r LEFT JOIN receipt_queue q ON q.receipt_id = r.id
             LEFT JOIN receipt_payloads rp ON rp.receipt_id = r.id
             WHERE r.status <> 'done' ORDER BY r.id LIMIT 5",
        )
        .fetch_all(&mut *conn)
        .await
        .expect("stuck examples"),
    }
}
