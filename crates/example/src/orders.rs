//! `orders.mark_paid` and `orders.refund`: the reference payment transitions.
//!
//! The transition is one guarded `UPDATE … WHERE` with the payment's facts bound in it
//! (for a run of payments in one batch, one set-based `UPDATE` for all of them).
//! When it changes no row, the order is read back *locked* and the zero is classified:
//! never regress state, quarantine real inconsistencies, retry what may resolve itself.
//!
//! Under READ COMMITTED the `UPDATE` judges the row as its statement found it; a
//! transition committed by another transaction just then (the payment beside its own
//! refund, the business creating the order) is seen only by the locked read. When that
//! read shows the transition now applies, the `UPDATE` runs once more under the lock
//! instead of classifying a state that is already gone.

use std::collections::HashSet;

use serde_json::json;
use sqlx::PgConnection;

use inbound_store as store;
use inbound_store::handlers::ReceiptState;

use crate::store::orders::{self, OrderState, Payment};
use inbound_store::handlers::{
    Handler, HandlerError, HandlerInput, Transition, quarantine, text_at,
};

/// `awaiting_payment → paid` from a Stripe PaymentIntent (`metadata.order_id`).
pub(crate) struct MarkPaid;

/// `paid → refunded` from a fully refunded Stripe Charge (by `payment_intent`), and back
/// to `paid` when that refund fails or is canceled (`charge.refund.updated`).
pub(crate) struct Refund;

impl Handler for MarkPaid {
    async fn apply(
        &self,
        transaction: &mut PgConnection,
        input: HandlerInput<'_>,
    ) -> Result<Transition, HandlerError> {
        mark_paid(transaction, input).await
    }

    async fn apply_all(
        &self,
        transaction: &mut PgConnection,
        inputs: Vec<HandlerInput<'_>>,
    ) -> Result<Vec<Transition>, HandlerError> {
        mark_paid_all(transaction, inputs).await
    }
}

impl Handler for Refund {
    async fn apply(
        &self,
        transaction: &mut PgConnection,
        input: HandlerInput<'_>,
    ) -> Result<Transition, HandlerError> {
        refund(transaction, input).await
    }
}

async fn mark_paid(
    transaction: &mut PgConnection,
    input: HandlerInput<'_>,
) -> Result<Transition, HandlerError> {
    match payment_of(input) {
        Ok(payment) => settle_payment(transaction, input, payment).await,
        Err(transition) => Ok(transition),
    }
}

/// [`mark_paid`] for consecutive receipts: one set-based `UPDATE` for the first payment
/// of each order, then each receipt it did not change settled alone, in order — what
/// applying them one by one gives.
async fn mark_paid_all(
    transaction: &mut PgConnection,
    inputs: Vec<HandlerInput<'_>>,
) -> Result<Vec<Transition>, HandlerError> {
    let parsed: Vec<Result<Payment<'_>, Transition>> =
        inputs.iter().map(|input| payment_of(*input)).collect();
    let mut orders_seen = HashSet::new();
    let first_payments: Vec<(Payment<'_>, i64)> = inputs
        .iter()
        .zip(&parsed)
        .filter_map(|(input, parsed)| Some((*parsed.as_ref().ok()?, input.receipt_id.0)))
        .filter(|(payment, _)| orders_seen.insert((payment.tenant, payment.order_id)))
        .collect();
    let changed: HashSet<i64> = if first_payments.is_empty() {
        HashSet::new()
    } else {
        orders::mark_paid_all(transaction, &first_payments)
            .await?
            .into_iter()
            .collect()
    };
    let mut transitions = Vec::with_capacity(inputs.len());
    for (input, parsed) in inputs.into_iter().zip(parsed) {
        transitions.push(match parsed {
            Err(transition) => transition,
            Ok(payment) if changed.contains(&input.receipt_id.0) => paid(input, payment),
            Ok(payment) => settle_payment(transaction, input, payment).await?,
        });
    }
    Ok(transitions)
}

/// The payment a PaymentIntent event describes, or the transition for one that cannot
/// pay an order (stale, failed, incomplete).
fn payment_of(input: HandlerInput<'_>) -> Result<Payment<'_>, Transition> {
    let payload = input.payload;
    let Some(payment_id) = text_at(payload, "/data/object/id") else {
        return Err(quarantine("the event carries no PaymentIntent id"));
    };
    // A stale or failed PaymentIntent (payment_failed routed here, or a canceled one)
    // must never change an order.
    // A PaymentIntent always has a status: one without is not taken as succeeded.
    let Some(status) = text_at(payload, "/data/object/status") else {
        return Err(quarantine(format!(
            "PaymentIntent {payment_id} has no status"
        )));
    };
    if status != "succeeded" {
        return Err(Transition::Ignored {
            reason: format!("PaymentIntent {payment_id} is {status}, not succeeded"),
        });
    }
    // Stripe sends every PaymentIntent of the account: a subscription or invoice payment
    // names no order and is not this domain's to judge.
    let Some(order_id) = text_at(payload, "/data/object/metadata/order_id") else {
        return Err(Transition::Ignored {
            reason: format!(
                "PaymentIntent {payment_id} has no metadata.order_id: not an order's payment"
            ),
        });
    };
    let Some(amount_minor) = payload
        .pointer("/data/object/amount_received")
        .and_then(serde_json::Value::as_i64)
    else {
        return Err(quarantine(format!(
            "PaymentIntent {payment_id} has no amount_received"
        )));
    };
    let Some(currency) = text_at(payload, "/data/object/currency") else {
        return Err(quarantine(format!(
            "PaymentIntent {payment_id} has no currency"
        )));
    };
    Ok(Payment {
        tenant: input.integration.tenant.as_str(),
        order_id,
        payment_id,
        amount_minor,
        currency,
    })
}

/// The guarded `UPDATE` for one payment, and the classification when it changes nothing.
async fn settle_payment(
    transaction: &mut PgConnection,
    input: HandlerInput<'_>,
    payment: Payment<'_>,
) -> Result<Transition, HandlerError> {
    for _ in 0..2 {
        if orders::mark_paid(transaction, payment, input.receipt_id.0).await? {
            return Ok(paid(input, payment));
        }
        let order = orders::find_for_update(transaction, payment.tenant, payment.order_id).await?;
        if order.is_none() {
            let elsewhere = orders::tenants_with_order(transaction, payment.order_id).await?;
            if !elsewhere.is_empty() {
                // Still transient: this tenant may yet create the order.
                return Err(HandlerError::transient(format!(
                    "order {} does not exist in tenant {}, but in tenant {}: is the integration's tenant right?",
                    payment.order_id,
                    payment.tenant,
                    elsewhere.join(", ")
                )));
            }
        }
        if !order
            .as_ref()
            .is_some_and(|order| payable_by(order, payment))
        {
            return classify_unpaid(order, payment);
        }
    }
    Err(changed_under_us(payment.order_id))
}

/// `Applied`, with the `order.paid` effect when the route has a sink.
fn paid(input: HandlerInput<'_>, payment: Payment<'_>) -> Transition {
    let data = json!({
        "order_id": payment.order_id,
        "payment_id": payment.payment_id,
        "amount_minor": payment.amount_minor,
        "currency": payment.currency,
    });
    Transition::Applied {
        effects: input
            .effect(
                "order.paid",
                &[payment.tenant, payment.order_id, payment.payment_id],
                data,
            )
            .into_iter()
            .collect(),
    }
}

/// Whether the guarded `UPDATE` of `mark_paid` matches this order.
fn payable_by(order: &OrderState, payment: Payment<'_>) -> bool {
    order.status == "awaiting_payment"
        && order.provider_payment_id.as_deref() == Some(payment.payment_id)
        && order.total_minor == payment.amount_minor
        && order.currency.eq_ignore_ascii_case(payment.currency)
}

/// A locked order that still does not take a transition it matches: retry later.
fn changed_under_us(order_id: &str) -> HandlerError {
    HandlerError::transient(format!("order {order_id} changed while it was classified"))
}

/// Why `awaiting_payment → paid` changed nothing.
fn classify_unpaid(
    order: Option<OrderState>,
    payment: Payment<'_>,
) -> Result<Transition, HandlerError> {
    let Some(order) = order else {
        // The business may not have created the order yet: retry with backoff.
        return Err(HandlerError::transient(format!(
            "order {} does not exist (yet)",
            payment.order_id
        )));
    };
    let Some(expected) = order.provider_payment_id.as_deref() else {
        // The business attaches the PaymentIntent to the order; it may not have yet.
        return Err(HandlerError::transient(format!(
            "order {} has no PaymentIntent attached (yet)",
            order.id
        )));
    };
    if expected != payment.payment_id {
        return Ok(quarantine(format!(
            "order {} expects PaymentIntent {}, not {}",
            order.id,
            order.provider_payment_id.as_deref().unwrap_or("(none)"),
            payment.payment_id
        )));
    }
    let same_facts = order.amount_received_minor == Some(payment.amount_minor)
        && order.currency.eq_ignore_ascii_case(payment.currency);
    Ok(match order.status.as_str() {
        "paid" | "refunded" if same_facts => Transition::Duplicate {
            reason: format!(
                "order {} is already {} by PaymentIntent {}",
                order.id, order.status, payment.payment_id
            ),
        },
        // The same PaymentIntent with other facts is no redelivery of the same payment.
        "paid" | "refunded" => quarantine(format!(
            "order {} was {} by PaymentIntent {} with another amount or currency than this event says",
            order.id, order.status, payment.payment_id
        )),
        "canceled" => quarantine(format!(
            "order {} is canceled but PaymentIntent {} succeeded",
            order.id, payment.payment_id
        )),
        // Which fact differs, never the values: reasons reach log lines, and amounts do
        // not belong there (the payload and the order hold them).
        _ => quarantine(format!(
            "PaymentIntent {} does not pay order {}: {} differs",
            payment.payment_id,
            order.id,
            match (
                order.total_minor == payment.amount_minor,
                order.currency.eq_ignore_ascii_case(payment.currency)
            ) {
                (false, false) => "the amount and the currency",
                (false, true) => "the amount",
                _ => "the currency",
            }
        )),
    })
}

async fn refund(
    transaction: &mut PgConnection,
    input: HandlerInput<'_>,
) -> Result<Transition, HandlerError> {
    let payload = input.payload;
    // `charge.refund.updated` (and `refund.updated`) carry the Refund itself.
    if text_at(payload, "/data/object/object") == Some("refund") {
        return refund_updated(transaction, input).await;
    }
    let Some(payment_id) = text_at(payload, "/data/object/payment_intent") else {
        return Ok(quarantine("the charge carries no payment_intent"));
    };
    // What was charged: a partially captured charge is fully refunded at its captured
    // amount (Stripe then says `refunded: true` with `amount_refunded == amount_captured`).
    let amount = payload
        .pointer("/data/object/amount_captured")
        .or_else(|| payload.pointer("/data/object/amount"))
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
                "partial refund of PaymentIntent {payment_id}: only full refunds change an order"
            ),
        });
    }
    let (Some(refunded), tenant) = (refunded, input.integration.tenant.as_str()) else {
        return Ok(quarantine(format!(
            "the refund of PaymentIntent {payment_id} has no amount"
        )));
    };
    let Some(created) = event_created(payload) else {
        return Ok(quarantine("the event has no created time"));
    };
    // One refund decision about this payment at a time: this refund and its failure,
    // handled by two workers at once, see each other. Taken on an ordered route too: a
    // receipt accepted before the route was ordered, or by another route, is in no order.
    orders::lock_payment(transaction, tenant, payment_id).await?;
    // A snapshot from before the refund failed (Stripe does not order its events).
    if orders::refund_failed_since(transaction, tenant, payment_id, refunded, created).await? {
        return Ok(Transition::Ignored {
            reason: format!(
                "a later event says the refund of PaymentIntent {payment_id} failed: the money did not go back"
            ),
        });
    }
    for _ in 0..2 {
        if let Some(order_id) = orders::mark_refunded(
            transaction,
            tenant,
            payment_id,
            refunded,
            input.receipt_id.0,
            created,
        )
        .await?
        {
            let data =
                json!({"order_id": order_id, "payment_id": payment_id, "amount_minor": refunded});
            // A refund after an earlier one failed is another instance of the transition:
            // its key names the failure it follows.
            let after = orders::latest_refund_failure(transaction, tenant, payment_id).await?;
            let mut key = vec![tenant, order_id.as_str(), payment_id];
            key.extend(after.as_deref());
            return Ok(Transition::Applied {
                effects: input
                    .effect("order.refunded", &key, data)
                    .into_iter()
                    .collect(),
            });
        }
        let order = orders::find_by_payment_for_update(transaction, tenant, payment_id).await?;
        match order {
            // Paid by a transaction that committed after our UPDATE looked: now it applies.
            Some(order)
                if (order.status == "paid" || (order.status == "canceled" && order.was_paid))
                    && order.amount_received_minor == Some(refunded) =>
            {
                continue;
            }
            None => return classify_orderless_refund(transaction, input, payment_id).await,
            Some(order) if order.status == "refunded" => {
                // A redelivery, or a new refund whose predecessor's failure is still on
                // its way: a failure reported before this event must not undo it. Noting
                // a later event time is a write the order is judged by, so it is applied
                // (only `Applied` commits a handler's writes), with no effect to send.
                if orders::note_refund_event(transaction, tenant, payment_id, created).await? {
                    return Ok(Transition::Applied {
                        effects: Vec::new(),
                    });
                }
                return classify_unrefunded(order, payment_id);
            }
            Some(order) => return classify_unrefunded(order, payment_id),
        }
    }
    Err(changed_under_us(payment_id))
}

/// A full refund of a PaymentIntent no order expects, classified for what it is:
/// - a charge that names no order (`metadata.order_id`, which Stripe copies from the
///   PaymentIntent onto the charge it creates: "how metadata works with related objects")
///   is no order's — a subscription's, an invoice's, a payment link's: ignored at once.
///   (A Charge's `invoice`, which told a subscription's before, is gone from API version
///   2025-03-31, basil.)
/// - while a payment event for the PaymentIntent is unfinished, it waits (its order may
///   not exist yet);
/// - the refund of a payment that was quarantined or failed (a double payment, say)
///   settles that payment: ignored;
/// - otherwise it waits too (Stripe does not order its events, and its payment may still
///   come), ending `failed` for a person after `--max-attempts` rather than ignored while
///   a late payment could still mark the order paid.
async fn classify_orderless_refund(
    transaction: &mut PgConnection,
    input: HandlerInput<'_>,
    payment_id: &str,
) -> Result<Transition, HandlerError> {
    if text_at(input.payload, "/data/object/metadata/order_id").is_none() {
        return Ok(Transition::Ignored {
            reason: format!(
                "the refunded charge of PaymentIntent {payment_id} names no order (no metadata.order_id): not an order's"
            ),
        });
    }
    let path = ["data", "object", "id"];
    let payments = ["payment_intent.succeeded"];
    let integration = input.integration.id.as_str();
    let mut payment_in = async |state| {
        store::handlers::receipt_names(
            transaction,
            state,
            integration,
            &payments,
            &path,
            payment_id,
        )
        .await
    };
    if payment_in(ReceiptState::Unfinished).await? {
        return Err(HandlerError::transient(format!(
            "no order for PaymentIntent {payment_id} yet; its payment is still to be applied"
        )));
    }
    if payment_in(ReceiptState::Unapplied).await? {
        return Ok(Transition::Ignored {
            reason: format!(
                "refunds PaymentIntent {payment_id}, whose payment was quarantined or failed: this settles it"
            ),
        });
    }
    Err(HandlerError::transient(format!(
        "no order expects PaymentIntent {payment_id} and no payment for it was seen: waiting in case it comes late"
    )))
}

/// Why `paid → refunded` changed nothing, for an order that is not `paid`.
fn classify_unrefunded(order: OrderState, payment_id: &str) -> Result<Transition, HandlerError> {
    match order.status.as_str() {
        "refunded" => Ok(Transition::Duplicate {
            reason: format!("order {} is already refunded", order.id),
        }),
        // Which fact differs, never the values (reasons reach log lines).
        "paid" | "canceled" if order.was_paid => Ok(quarantine(format!(
            "the full refund of PaymentIntent {payment_id} is not the amount order {} received",
            order.id
        ))),
        // Canceled before any payment: this refund undoes no payment of the order (the
        // payment that succeeded after the cancellation was quarantined for a person).
        "canceled" => Ok(Transition::Ignored {
            reason: format!(
                "order {} was canceled before it was paid: the refund of PaymentIntent {payment_id} changes nothing",
                order.id
            ),
        }),
        // The refund overtook the payment event: wait for the payment to apply.
        "awaiting_payment" => Err(HandlerError::transient(format!(
            "order {} is not paid yet",
            order.id
        ))),
        _ => Ok(quarantine(format!(
            "order {} is {} and cannot be refunded (PaymentIntent {payment_id})",
            order.id, order.status
        ))),
    }
}

/// The event's `created` (Unix seconds), which every Stripe event carries.
fn event_created(payload: &serde_json::Value) -> Option<i64> {
    payload.get("created").and_then(serde_json::Value::as_i64)
}

/// A Refund that changed (`charge.refund.updated`). A refund can end `failed` (or
/// `canceled`) after `charge.refunded` said the charge was refunded — a closed card, say
/// (stripe-node `resources/Refunds.ts`: `failure_reason`) — and then the money never
/// went back: the order is `paid` again, with effect `order.refund_failed` keyed by the
/// order and the refund. The failure is recorded once per refund, whether or not the order
/// was marked refunded yet, so that a `charge.refunded` snapshot from before it (events
/// arrive in any order) changes nothing. Any other status changes nothing.
async fn refund_updated(
    transaction: &mut PgConnection,
    input: HandlerInput<'_>,
) -> Result<Transition, HandlerError> {
    let payload = input.payload;
    let Some(refund_id) = text_at(payload, "/data/object/id") else {
        return Ok(quarantine("the refund carries no id"));
    };
    let status = text_at(payload, "/data/object/status").unwrap_or("unknown");
    if status != "failed" && status != "canceled" {
        return Ok(Transition::Ignored {
            reason: format!(
                "refund {refund_id} is {status}: only a failed or canceled refund changes an order"
            ),
        });
    }
    let Some(payment_id) = text_at(payload, "/data/object/payment_intent") else {
        return Ok(Transition::Ignored {
            reason: format!("refund {refund_id} refunds no PaymentIntent: not an order's"),
        });
    };
    let Some(amount) = payload
        .pointer("/data/object/amount")
        .and_then(serde_json::Value::as_i64)
    else {
        return Ok(quarantine(format!("refund {refund_id} has no amount")));
    };
    let Some(event_created) = event_created(payload) else {
        return Ok(quarantine("the event has no created time"));
    };
    let tenant = input.integration.tenant.as_str();
    orders::lock_payment(transaction, tenant, payment_id).await?;
    let failure = orders::RefundFailure {
        tenant,
        refund_id,
        payment_id,
        amount_minor: amount,
        event_created,
        receipt_id: input.receipt_id.0,
    };
    if !orders::record_refund_failure(transaction, failure).await? {
        return Ok(Transition::Duplicate {
            reason: format!("the failure of refund {refund_id} is already recorded"),
        });
    }
    if let Some(order_id) =
        orders::undo_refund(transaction, tenant, payment_id, amount, event_created).await?
    {
        let data = json!({
            "order_id": order_id, "payment_id": payment_id, "refund_id": refund_id,
            "amount_minor": amount, "refund_status": status,
        });
        return Ok(Transition::Applied {
            effects: input
                .effect("order.refund_failed", &[tenant, &order_id, refund_id], data)
                .into_iter()
                .collect(),
        });
    }
    // The failure is recorded though no order changed: a write later events are judged
    // by, so the transition is applied (only `Applied` commits a handler's writes), with
    // no effect to send; why no order changed is logged.
    let order = orders::find_by_payment_for_update(transaction, tenant, payment_id).await?;
    let why = match order {
        None => format!(
            "refund {refund_id} {status}, and no order expects PaymentIntent {payment_id}: recorded, so a late charge.refunded changes nothing"
        ),
        Some(order)
            if order.status == "refunded" && order.amount_received_minor == Some(amount) =>
        {
            format!(
                "refund {refund_id} {status}, but a later refund of order {} was seen: that later refund stands",
                order.id
            )
        }
        Some(order) if order.status == "refunded" => format!(
            "refund {refund_id} {status} for another amount than order {} received: its full refund stands",
            order.id
        ),
        Some(order) => format!(
            "refund {refund_id} {status} before order {} was marked refunded (it is {}): recorded, so the refund's charge.refunded changes nothing",
            order.id, order.status
        ),
    };
    tracing::info!(receipt_id = input.receipt_id.0, %why, "refund failure recorded; no order changed");
    Ok(Transition::Applied {
        effects: Vec::new(),
    })
}
