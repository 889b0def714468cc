//! `entitlements.grant`: one grant per `(tenant, customer, invoice, entitlement)` for each
//! line of a Stripe Invoice whose price the route maps to an entitlement:
//! `options = { prices = { price_pro_monthly = "pro" } }`. (A configuration from before
//! route options maps prices in `[integration.entitlements]`; it is read when the route
//! names no `prices`.)

use std::collections::BTreeSet;

use serde_json::{Value, json};
use sqlx::PgConnection;

use crate::store::grants::{self, Grant as GrantKey};
use inbound_core::handlers::{
    Handler, HandlerError, HandlerFuture, HandlerInput, Transition, quarantine, text_at,
};
use inbound_core::verify::Provider;

/// Grants mapped entitlements from a paid invoice.
pub(crate) struct Grant;

impl Handler for Grant {
    fn providers(&self) -> Option<&'static [Provider]> {
        Some(&[Provider::Stripe])
    }

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

    fn apply<'a>(
        &'a self,
        transaction: &'a mut PgConnection,
        input: HandlerInput<'a>,
    ) -> HandlerFuture<'a> {
        Box::pin(grant(transaction, input))
    }
}

/// The price id of an invoice line, in any of the shapes Stripe's API versions use.
fn line_price(line: &Value) -> Option<&str> {
    ["/price/id", "/pricing/price_details/price", "/plan/id"]
        .iter()
        .find_map(|pointer| text_at(line, pointer))
}

async fn grant(
    transaction: &mut PgConnection,
    input: HandlerInput<'_>,
) -> Result<Transition, HandlerError> {
    let payload = input.payload;
    let Some(invoice_id) = text_at(payload, "/data/object/id") else {
        return Ok(quarantine("the event carries no invoice id"));
    };
    // `customer` is an id, or an expanded object with one.
    let Some(customer) = text_at(payload, "/data/object/customer")
        .or_else(|| text_at(payload, "/data/object/customer/id"))
    else {
        return Ok(quarantine(format!("invoice {invoice_id} has no customer")));
    };
    let lines = payload
        .pointer("/data/object/lines/data")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let entitlements: BTreeSet<&str> = lines
        .iter()
        .filter_map(line_price)
        .filter_map(|price| match input.options.get("prices") {
            Some(prices) => prices.get(price).and_then(Value::as_str),
            None => input
                .integration
                .entitlements
                .get(price)
                .map(String::as_str),
        })
        .collect();
    if entitlements.is_empty() {
        return Ok(Transition::Ignored {
            reason: format!("no line of invoice {invoice_id} has a mapped price"),
        });
    }
    let tenant = input.integration.tenant.as_str();
    let mut effects = Vec::new();
    let mut granted = 0;
    for entitlement in &entitlements {
        let key = GrantKey {
            tenant,
            account_id: customer,
            invoice_id,
            entitlement,
        };
        if grants::insert(transaction, key, input.receipt_id.0).await? {
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
                entitlements.into_iter().collect::<Vec<_>>().join(", ")
            ),
        });
    }
    Ok(Transition::Applied { effects })
}
