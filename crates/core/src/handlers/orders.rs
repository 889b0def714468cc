//! `orders.mark_paid` and `orders.refund`: the reference payment transitions.
//!
//! The transition is one guarded `UPDATE … WHERE` with the payment's facts bound in it.
//! When it changes no row, the order is read back and the zero is classified: never
//! regress state, quarantine real inconsistencies, retry what may resolve itself.

use serde_json::json;
use sqlx::PgConnection;

use super::{Handler, HandlerError, HandlerFuture, HandlerInput, Transition, quarantine, text_at};
use crate::store::orders::{self, OrderState, Payment};

/// `awaiting_payment → paid` from a Stripe PaymentIntent (`metadata.order_id`).
pub(super) struct MarkPaid;

/// `paid → refunded` from a fully refunded Stripe Charge (by `payment_intent`).
pub(super) struct Refund;

impl Handler for MarkPaid {
    fn apply<'a>(
        &'a self,
        transaction: &'a mut PgConnection,
        input: HandlerInput<'a>,
    ) -> HandlerFuture<'a> {
        Box::pin(mark_paid(transaction, input))
    }
}

impl Handler for Refund {
    fn apply<'a>(
        &'a self,
        transaction: &'a mut PgConnection,
        input: HandlerInput<'a>,
    ) -> HandlerFuture<'a> {
        Box::pin(refund(transaction, input))
    }
}

async fn mark_paid(
    transaction: &mut PgConnection,
    input: HandlerInput<'_>,
) -> Result<Transition, HandlerError> {
    let payload = input.payload;
    let Some(payment_id) = text_at(payload, "/data/object/id") else {
        return Ok(quarantine("the event carries no PaymentIntent id"));
    };
    // A stale or failed PaymentIntent (payment_failed routed here, or a canceled one)
    // must never change an order.
    if let Some(status) = text_at(payload, "/data/object/status")
        && status != "succeeded"
    {
        return Ok(Transition::Ignored {
            reason: format!("PaymentIntent {payment_id} is {status}, not succeeded"),
        });
    }
    let Some(order_id) = text_at(payload, "/data/object/metadata/order_id") else {
        return Ok(quarantine(format!(
            "PaymentIntent {payment_id} has no metadata.order_id"
        )));
    };
    let Some(amount_minor) = payload
        .pointer("/data/object/amount_received")
        .and_then(serde_json::Value::as_i64)
    else {
        return Ok(quarantine(format!(
            "PaymentIntent {payment_id} has no amount_received"
        )));
    };
    let Some(currency) = text_at(payload, "/data/object/currency") else {
        return Ok(quarantine(format!(
            "PaymentIntent {payment_id} has no currency"
        )));
    };
    let tenant = input.integration.tenant.as_str();
    let payment = Payment {
        tenant,
        order_id,
        payment_id,
        amount_minor,
        currency,
    };
    if orders::mark_paid(transaction, payment, input.receipt_id.0).await? {
        let data = json!({"order_id": order_id, "payment_id": payment_id, "amount_minor": amount_minor, "currency": currency});
        return Ok(Transition::Applied {
            effects: input
                .effect("order.paid", &[tenant, order_id], data)
                .into_iter()
                .collect(),
        });
    }
    let order = orders::find(transaction, tenant, order_id).await?;
    classify_unpaid(order, payment)
}

/// Why `awaiting_payment → paid` changed nothing.
fn classify_unpaid(
    order: Option<OrderState>,
    payment: Payment<'_>,
) -> Result<Transition, HandlerError> {
    let Some(order) = order else {
        // The business may not have created the order yet: retry with backoff.
        return Err(HandlerError::Transient(format!(
            "order {} does not exist (yet)",
            payment.order_id
        )));
    };
    if order.provider_payment_id.as_deref() != Some(payment.payment_id) {
        return Ok(quarantine(format!(
            "order {} expects PaymentIntent {}, not {}",
            order.id,
            order.provider_payment_id.as_deref().unwrap_or("(none)"),
            payment.payment_id
        )));
    }
    Ok(match order.status.as_str() {
        "paid" | "refunded" => Transition::Duplicate {
            reason: format!(
                "order {} is already {} by PaymentIntent {}",
                order.id, order.status, payment.payment_id
            ),
        },
        "canceled" => quarantine(format!(
            "order {} is canceled but PaymentIntent {} succeeded",
            order.id, payment.payment_id
        )),
        _ => quarantine(format!(
            "order {} expects {} {}, PaymentIntent {} received {} {}",
            order.id,
            order.total_minor,
            order.currency,
            payment.payment_id,
            payment.amount_minor,
            payment.currency
        )),
    })
}

async fn refund(
    transaction: &mut PgConnection,
    input: HandlerInput<'_>,
) -> Result<Transition, HandlerError> {
    let payload = input.payload;
    let Some(payment_id) = text_at(payload, "/data/object/payment_intent") else {
        return Ok(quarantine("the charge carries no payment_intent"));
    };
    let amount = payload
        .pointer("/data/object/amount")
        .and_then(serde_json::Value::as_i64);
    let refunded = payload
        .pointer("/data/object/amount_refunded")
        .and_then(serde_json::Value::as_i64);
    let fully = payload
        .pointer("/data/object/refunded")
        .and_then(serde_json::Value::as_bool)
        == Some(true);
    if !fully || amount.is_none() || amount != refunded {
        return Ok(Transition::Ignored {
            reason: format!(
                "partial refund of PaymentIntent {payment_id} ({} of {}): only full refunds change an order",
                refunded.unwrap_or(0),
                amount.unwrap_or(0)
            ),
        });
    }
    let tenant = input.integration.tenant.as_str();
    if let Some(order_id) =
        orders::mark_refunded(transaction, tenant, payment_id, input.receipt_id.0).await?
    {
        let data =
            json!({"order_id": order_id, "payment_id": payment_id, "amount_minor": refunded});
        return Ok(Transition::Applied {
            effects: input
                .effect("order.refunded", &[tenant, &order_id], data)
                .into_iter()
                .collect(),
        });
    }
    Ok(
        match orders::find_by_payment(transaction, tenant, payment_id).await? {
            None => {
                return Err(HandlerError::Transient(format!(
                    "no order for PaymentIntent {payment_id} (yet)"
                )));
            }
            Some(order) if order.status == "refunded" => Transition::Duplicate {
                reason: format!("order {} is already refunded", order.id),
            },
            // The refund overtook the payment event: wait for the payment to apply.
            Some(order) if order.status == "awaiting_payment" => {
                return Err(HandlerError::Transient(format!(
                    "order {} is not paid yet",
                    order.id
                )));
            }
            Some(order) => quarantine(format!(
                "order {} is {} and cannot be refunded",
                order.id, order.status
            )),
        },
    )
}
