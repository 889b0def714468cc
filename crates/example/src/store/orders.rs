//! The reference `orders` table: payment and refund transitions, each guarded by the
//! order's state and bound to the payment's facts in the `UPDATE … WHERE`.

use sqlx::PgConnection;

/// What a successful PaymentIntent says about an order.
#[derive(Debug, Clone, Copy)]
pub struct Payment<'a> {
    /// The tenant of the integration.
    pub tenant: &'a str,
    /// `metadata.order_id`.
    pub order_id: &'a str,
    /// The PaymentIntent id.
    pub payment_id: &'a str,
    /// `amount_received`, in minor units.
    pub amount_minor: i64,
    /// Lowercase ISO currency code, as Stripe sends it.
    pub currency: &'a str,
}

/// An order as the handlers need to classify a zero-row update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderState {
    /// The order id.
    pub id: String,
    /// The PaymentIntent the business expects.
    pub provider_payment_id: Option<String>,
    /// The amount due.
    pub total_minor: i64,
    /// The currency due.
    pub currency: String,
    /// `awaiting_payment | paid | refunded | canceled`.
    pub status: String,
    /// What the paying PaymentIntent received (once paid).
    pub amount_received_minor: Option<i64>,
    /// Whether a payment was ever applied (a canceled order may have been paid first).
    pub was_paid: bool,
}

/// `awaiting_payment → paid`, only when payment id, amount and currency all match.
/// `true` when the row changed.
pub async fn mark_paid(
    conn: &mut PgConnection,
    payment: Payment<'_>,
    receipt_id: i64,
) -> Result<bool, sqlx::Error> {
    let updated = sqlx::query!(
        "UPDATE inbound_example.orders
         SET status = 'paid', amount_received_minor = $4, paid_receipt_id = $6,
             paid_at = now(), updated_at = now()
         WHERE tenant_id = $1 AND id = $2 AND status = 'awaiting_payment'
           AND provider_payment_id = $3 AND total_minor = $4 AND lower(currency) = lower($5)",
        payment.tenant,
        payment.order_id,
        payment.payment_id,
        payment.amount_minor,
        payment.currency,
        receipt_id,
    )
    .execute(conn)
    .await?;
    Ok(updated.rows_affected() == 1)
}

/// [`mark_paid`] for many payments in one statement, each `(payment, receipt id)`;
/// returns the receipt ids whose payment changed its order. Of several payments matching
/// one order, one changes it (the others then find it paid).
pub async fn mark_paid_all(
    conn: &mut PgConnection,
    payments: &[(Payment<'_>, i64)],
) -> Result<Vec<i64>, sqlx::Error> {
    let mut tenants = Vec::with_capacity(payments.len());
    let mut order_ids = Vec::with_capacity(payments.len());
    let mut payment_ids = Vec::with_capacity(payments.len());
    let mut amounts = Vec::with_capacity(payments.len());
    let mut currencies = Vec::with_capacity(payments.len());
    let mut receipt_ids = Vec::with_capacity(payments.len());
    for (payment, receipt_id) in payments {
        tenants.push(payment.tenant);
        order_ids.push(payment.order_id);
        payment_ids.push(payment.payment_id);
        amounts.push(payment.amount_minor);
        currencies.push(payment.currency);
        receipt_ids.push(*receipt_id);
    }
    // Lock the orders in key order first: the UPDATE's join would lock them in whatever
    // order it meets them (the receipts' arrival order, or the table's), and two batches
    // paying the same orders in opposite orders would then deadlock.
    sqlx::query_scalar!(
        "SELECT 1 FROM inbound_example.orders o
         JOIN unnest($1::text[], $2::text[]) AS p(tenant_id, order_id)
           ON o.tenant_id = p.tenant_id AND o.id = p.order_id
         ORDER BY o.tenant_id, o.id
         FOR UPDATE OF o",
        &tenants as &[&str],
        &order_ids as &[&str],
    )
    .fetch_all(&mut *conn)
    .await?;
    sqlx::query_scalar!(
        r#"UPDATE inbound_example.orders o
         SET status = 'paid', amount_received_minor = p.amount_minor,
             paid_receipt_id = p.receipt_id, paid_at = now(), updated_at = now()
         FROM unnest($1::text[], $2::text[], $3::text[], $4::int8[], $5::text[], $6::int8[])
              AS p(tenant_id, order_id, payment_id, amount_minor, currency, receipt_id)
         WHERE o.tenant_id = p.tenant_id AND o.id = p.order_id AND o.status = 'awaiting_payment'
           AND o.provider_payment_id = p.payment_id AND o.total_minor = p.amount_minor
           AND lower(o.currency) = lower(p.currency)
         RETURNING o.paid_receipt_id AS "receipt_id!""#,
        tenants as Vec<&str>,
        order_ids as Vec<&str>,
        payment_ids as Vec<&str>,
        &amounts,
        currencies as Vec<&str>,
        &receipt_ids,
    )
    .fetch_all(conn)
    .await
}

/// The order with this id, if any, locked for this transaction. The lock waits out a
/// concurrent transition, so what it returns is the latest committed state (the
/// guarded `UPDATE` before it may have judged an older one).
pub async fn find_for_update(
    conn: &mut PgConnection,
    tenant: &str,
    order_id: &str,
) -> Result<Option<OrderState>, sqlx::Error> {
    // The columns are find_by_payment_for_update's.
    sqlx::query_as!(
        OrderState,
        r#"SELECT id, provider_payment_id, total_minor, currency, status, amount_received_minor,
                  paid_receipt_id IS NOT NULL AS "was_paid!"
           FROM inbound_example.orders
           WHERE tenant_id = $1 AND id = $2 FOR UPDATE"#,
        tenant,
        order_id,
    )
    .fetch_optional(conn)
    .await
}

/// Other tenants holding an order with this id (at most three, sorted): when the
/// integration's tenant has none, this tells a missing order from a misconfigured tenant.
pub async fn tenants_with_order(
    conn: &mut PgConnection,
    order_id: &str,
) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar!(
        "SELECT tenant_id FROM inbound_example.orders WHERE id = $1 ORDER BY tenant_id LIMIT 3",
        order_id
    )
    .fetch_all(conn)
    .await
}

/// The order paid by this PaymentIntent, if any, locked like [`find_for_update`].
pub async fn find_by_payment_for_update(
    conn: &mut PgConnection,
    tenant: &str,
    payment_id: &str,
) -> Result<Option<OrderState>, sqlx::Error> {
    // The columns are find_for_update's.
    sqlx::query_as!(
        OrderState,
        r#"SELECT id, provider_payment_id, total_minor, currency, status, amount_received_minor,
                  paid_receipt_id IS NOT NULL AS "was_paid!"
           FROM inbound_example.orders
           WHERE tenant_id = $1 AND provider_payment_id = $2 FOR UPDATE"#,
        tenant,
        payment_id,
    )
    .fetch_optional(conn)
    .await
}

/// `paid → refunded` (or `canceled → refunded` for an order canceled after it was paid)
/// for the order of this PaymentIntent, when the refund is of the amount it received;
/// returns the order id when the row changed.
pub async fn mark_refunded(
    conn: &mut PgConnection,
    tenant: &str,
    payment_id: &str,
    refunded_minor: i64,
    receipt_id: i64,
    event_created: i64,
) -> Result<Option<String>, sqlx::Error> {
    sqlx::query_scalar!(
        "UPDATE inbound_example.orders
         SET status = 'refunded', status_before_refund = status, refunded_receipt_id = $4,
             refunded_at = now(), refund_event_at = to_timestamp($5::int8), updated_at = now()
         WHERE tenant_id = $1 AND provider_payment_id = $2 AND amount_received_minor = $3
           AND (status = 'paid' OR (status = 'canceled' AND paid_receipt_id IS NOT NULL))
         RETURNING id",
        tenant,
        payment_id,
        refunded_minor,
        receipt_id,
        event_created,
    )
    .fetch_optional(conn)
    .await
}

/// A full refund seen while the order is already `refunded` (a redelivery, or a new
/// refund whose predecessor's failure is still on its way): remembers its event time when
/// it is later than the one known, so that a failure reported before it does not undo the
/// order's refund. Whether it was later (and so written).
pub async fn note_refund_event(
    conn: &mut PgConnection,
    tenant: &str,
    payment_id: &str,
    event_created: i64,
) -> Result<bool, sqlx::Error> {
    let noted = sqlx::query!(
        "UPDATE inbound_example.orders
         SET refund_event_at = to_timestamp($3::int8)
         WHERE tenant_id = $1 AND provider_payment_id = $2 AND status = 'refunded'
           AND (refund_event_at IS NULL OR refund_event_at < to_timestamp($3::int8))",
        tenant,
        payment_id,
        event_created,
    )
    .execute(conn)
    .await?;
    Ok(noted.rows_affected() > 0)
}

/// A refund that failed or was canceled, as `charge.refund.updated` says.
#[derive(Debug, Clone, Copy)]
pub struct RefundFailure<'a> {
    /// The tenant.
    pub tenant: &'a str,
    /// `re_…`: the business key.
    pub refund_id: &'a str,
    /// The PaymentIntent it would have refunded.
    pub payment_id: &'a str,
    /// The amount that did not go back.
    pub amount_minor: i64,
    /// When Stripe created the event that says so (Unix seconds).
    pub event_created: i64,
    /// The receipt that applied it.
    pub receipt_id: i64,
}

/// Records `failure` once; `false` when this refund's failure was already recorded.
pub async fn record_refund_failure(
    conn: &mut PgConnection,
    failure: RefundFailure<'_>,
) -> Result<bool, sqlx::Error> {
    let inserted = sqlx::query_scalar!(
        "INSERT INTO inbound_example.refund_failures
             (tenant_id, refund_id, provider_payment_id, amount_minor, event_created_at,
              receipt_id)
         VALUES ($1, $2, $3, $4, to_timestamp($5::int8), $6)
         ON CONFLICT DO NOTHING
         RETURNING 1 AS \"one!\"",
        failure.tenant,
        failure.refund_id,
        failure.payment_id,
        failure.amount_minor,
        failure.event_created,
        failure.receipt_id,
    )
    .fetch_optional(conn)
    .await?;
    Ok(inserted.is_some())
}

/// `refunded →` the status before the refund (`paid`, or `canceled` after payment) for
/// the order of this PaymentIntent refunded in full by `amount_minor`, unless a refund
/// event newer than the failure (`failure_created`, Unix seconds) was seen: the money of
/// that refund never went back. Returns the order id when the row changed.
pub async fn undo_refund(
    conn: &mut PgConnection,
    tenant: &str,
    payment_id: &str,
    amount_minor: i64,
    failure_created: i64,
) -> Result<Option<String>, sqlx::Error> {
    sqlx::query_scalar!(
        "UPDATE inbound_example.orders
         SET status = coalesce(status_before_refund, 'paid'), status_before_refund = NULL,
             refunded_receipt_id = NULL, refunded_at = NULL, refund_event_at = NULL,
             updated_at = now()
         WHERE tenant_id = $1 AND provider_payment_id = $2 AND amount_received_minor = $3
           AND status = 'refunded'
           AND (refund_event_at IS NULL OR refund_event_at <= to_timestamp($4::int8))
         RETURNING id",
        tenant,
        payment_id,
        amount_minor,
        failure_created,
    )
    .fetch_optional(conn)
    .await
}

/// Whether a failure of a refund of `amount_minor` of this PaymentIntent was reported by
/// an event created at or after `event_created` (Unix seconds): a `charge.refunded` from
/// before it is a stale snapshot of a refund that did not happen.
pub async fn refund_failed_since(
    conn: &mut PgConnection,
    tenant: &str,
    payment_id: &str,
    amount_minor: i64,
    event_created: i64,
) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT EXISTS (
             SELECT 1 FROM inbound_example.refund_failures
             WHERE tenant_id = $1 AND provider_payment_id = $2 AND amount_minor = $3
               AND event_created_at >= to_timestamp($4::int8)
         ) AS "failed!""#,
        tenant,
        payment_id,
        amount_minor,
        event_created,
    )
    .fetch_one(conn)
    .await
}

/// The refund of this PaymentIntent whose failure was reported last, if any.
pub async fn latest_refund_failure(
    conn: &mut PgConnection,
    tenant: &str,
    payment_id: &str,
) -> Result<Option<String>, sqlx::Error> {
    sqlx::query_scalar!(
        "SELECT refund_id FROM inbound_example.refund_failures
         WHERE tenant_id = $1 AND provider_payment_id = $2
         ORDER BY event_created_at DESC, refund_id DESC LIMIT 1",
        tenant,
        payment_id,
    )
    .fetch_optional(conn)
    .await
}

/// Serializes every refund decision about this PaymentIntent — a refund and that
/// refund's failure, handled by two workers at once — for the rest of the transaction
/// (an advisory lock: the order may not exist yet, and payments do not wait for it).
pub async fn lock_payment(
    conn: &mut PgConnection,
    tenant: &str,
    payment_id: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT pg_advisory_xact_lock(hashtextextended('inbound_example.refund:' || $1 || ':' || $2, 0)) AS "locked!: ()""#,
        tenant,
        payment_id,
    )
    .fetch_one(conn)
    .await?;
    Ok(())
}
