//! `entitlements.grant`: one grant per `(tenant, invoice, entitlement)` for each
//! charged (non-negative) line of a *paid* Stripe Invoice whose price the route maps to an
//! entitlement. A credit line grants nothing (a downgrade never re-grants the plan left);
//! an invoice whose lines are truncated (`lines.has_more`) is quarantined (a handler may
//! not fetch the rest); an unpaid one is ignored; an invoice granted to one customer and
//! named under another is quarantined. Prices map to entitlements in the route's
//! `options = { prices = { price_pro_monthly = "pro" } }`. (A configuration from before
//! route options maps prices in `[integration.entitlements]`; it is read when the route
//! names no `prices`.)

use std::collections::BTreeSet;

use serde_json::{Value, json};
use sqlx::PgConnection;

use crate::store::grants::{self, Grant as GrantKey};
use inbound_store::handlers::{
    Handler, HandlerError, HandlerInput, Transition, quarantine, text_at,
};

/// Grants mapped entitlements from a paid invoice.
pub(crate) struct Grant;

impl Handler for Grant {
    fn check_options(&self, options: &Value) -> Result<(), String> {
        let table = options.as_object().ok_or("options must be a table")?;
        for (key, value) in table {
            match (key.as_str(), value) {
                ("prices", Value::Object(prices)) => {
                    if let Some((price, _)) = prices
                        .iter()
                        .find(|(_, name)| name.as_str().is_none_or(str::is_empty))
                    {
                        return Err(format!(
                            "prices.{price} must name an entitlement (a non-empty string)"
                        ));
                    }
                }
                ("prices", _) => {
                    return Err("prices must be a table of price id = entitlement".to_owned());
                }
                (other, _) => return Err(format!("unknown option {other:?} (known: prices)")),
            }
        }
        Ok(())
    }

    async fn apply(
        &self,
        transaction: &mut PgConnection,
        input: HandlerInput<'_>,
    ) -> Result<Transition, HandlerError> {
        grant(transaction, input).await
    }
}

/// The price id of an invoice line, in any of the shapes Stripe's API versions use.
fn line_price(line: &Value) -> Option<&str> {
    ["/price/id", "/pricing/price_details/price", "/plan/id"]
        .iter()
        .find_map(|pointer| text_at(line, pointer))
}

/// What a paid invoice event says: enough to grant from.
struct PaidInvoice<'p> {
    id: &'p str,
    customer: &'p str,
    lines: &'p [Value],
}

/// The invoice an event carries, or the transition that settles the event without a
/// grant (no invoice or customer, not paid, lines missing from the event).
fn paid_invoice(payload: &Value) -> Result<PaidInvoice<'_>, Transition> {
    let Some(id) = text_at(payload, "/data/object/id") else {
        return Err(quarantine("the event carries no invoice id"));
    };
    // `customer` is an id, or an expanded object with one.
    let Some(customer) = text_at(payload, "/data/object/customer")
        .or_else(|| text_at(payload, "/data/object/customer/id"))
    else {
        return Err(quarantine(format!("invoice {id} has no customer")));
    };
    // Only a paid invoice grants: `invoice.finalized` routed here must not grant before
    // the payment.
    let paid = text_at(payload, "/data/object/status") == Some("paid")
        || payload
            .pointer("/data/object/paid")
            .and_then(Value::as_bool)
            == Some(true);
    if !paid {
        return Err(Transition::Ignored {
            reason: format!(
                "invoice {id} is {}, not paid: grants wait for its payment",
                text_at(payload, "/data/object/status").unwrap_or("of no status")
            ),
        });
    }
    // A handler may not fetch the rest of a long invoice: deciding on part of it would
    // silently leave a mapped price ungranted.
    if payload
        .pointer("/data/object/lines/has_more")
        .and_then(Value::as_bool)
        == Some(true)
    {
        return Err(quarantine(format!(
            "invoice {id} has more lines than the event carries (lines.has_more); grant them by hand"
        )));
    }
    let lines = payload
        .pointer("/data/object/lines/data")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    Ok(PaidInvoice {
        id,
        customer,
        lines,
    })
}

/// The entitlements the invoice's charged lines map to (the handler's `prices` option,
/// else the integration's entitlements).
fn mapped_entitlements<'a>(lines: &'a [Value], input: &HandlerInput<'a>) -> BTreeSet<&'a str> {
    lines
        .iter()
        // A credit (a negative line: the unused time of a plan left by a downgrade) grants
        // nothing; a charged line grants, proration or not (an upgrade's new plan).
        .filter(|line| {
            line.get("amount")
                .and_then(Value::as_i64)
                .is_none_or(|amount| amount >= 0)
        })
        .filter_map(line_price)
        .filter_map(|price| match input.options.get("prices") {
            Some(prices) => prices.get(price).and_then(Value::as_str),
            None => input
                .integration
                .entitlements
                .get(price)
                .map(String::as_str),
        })
        .collect()
}

async fn grant(
    transaction: &mut PgConnection,
    input: HandlerInput<'_>,
) -> Result<Transition, HandlerError> {
    let invoice = match paid_invoice(input.payload) {
        Ok(invoice) => invoice,
        Err(settled) => return Ok(settled),
    };
    let entitlements = mapped_entitlements(invoice.lines, &input);
    if entitlements.is_empty() {
        return Ok(Transition::Ignored {
            reason: format!("no line of invoice {} has a mapped price", invoice.id),
        });
    }
    let tenant = input.integration.tenant.as_str();
    // One invoice's grants are decided one event at a time, so that two events naming
    // different customers cannot both pass the check below with disjoint entitlements.
    grants::lock_invoice(transaction, tenant, invoice.id).await?;
    if let Some(other) =
        grants::other_customer_of_invoice(transaction, tenant, invoice.id, invoice.customer).await?
    {
        return Ok(quarantine(format!(
            "invoice {} was granted to customer {other}, and this event names {}: an invoice has one customer",
            invoice.id, invoice.customer
        )));
    }
    insert_grants(transaction, &input, &invoice, &entitlements).await
}

/// Inserts each grant the invoice does not hold yet, with its effect: `Applied` when any
/// was new, `Duplicate` when the invoice had granted them all.
async fn insert_grants(
    transaction: &mut PgConnection,
    input: &HandlerInput<'_>,
    invoice: &PaidInvoice<'_>,
    entitlements: &BTreeSet<&str>,
) -> Result<Transition, HandlerError> {
    let tenant = input.integration.tenant.as_str();
    let (invoice_id, customer) = (invoice.id, invoice.customer);
    let mut effects = Vec::new();
    // Counted apart from the effects: without a sink a new grant has none.
    let mut granted = 0;
    for entitlement in entitlements {
        let key = GrantKey {
            tenant,
            account_id: customer,
            invoice_id,
            entitlement,
        };
        let inserted = grants::insert(transaction, key, input.receipt_id.0).await?;
        if !inserted
            && grants::other_customer_of_invoice(transaction, tenant, invoice_id, customer)
                .await?
                .is_some()
        {
            // Another customer's event for this invoice committed while this one ran:
            // roll back what this one granted, and let the retry quarantine it.
            return Err(HandlerError::transient(format!(
                "invoice {invoice_id} was granted to another customer meanwhile"
            )));
        }
        if inserted {
            granted += 1;
            let data = json!({"account_id": customer, "invoice_id": invoice_id, "entitlement": entitlement});
            effects.extend(input.effect(
                "entitlement.granted",
                &[tenant, customer, invoice_id, entitlement],
                data,
            ));
        }
    }
    if granted == 0 {
        return Ok(Transition::Duplicate {
            reason: format!(
                "invoice {invoice_id} already granted {}",
                entitlements.iter().copied().collect::<Vec<_>>().join(", ")
            ),
        });
    }
    Ok(Transition::Applied { effects })
}
