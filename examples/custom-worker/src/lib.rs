//! A team's own transition on inbound, built without touching inbound's source: Stripe
//! `customer.subscription.created|updated|deleted` kept in the team's table
//! `subscriptions_example.subscriptions`.
//!
//! - The **business key** is `(tenant, subscription id)`: one row per subscription.
//! - The **ordering guard**: Stripe neither orders its events nor versions a subscription,
//!   and its event ids are random. So each kind of event moves the row only where it
//!   cannot be a step back:
//!   - `created` only inserts: arriving after any other event of the subscription, it
//!     changes nothing (`Ignored`);
//!   - `deleted` is terminal: it applies unless the row is already deleted, and nothing
//!     changes a deleted row afterwards (`Ignored`);
//!   - `updated` applies when its event time (`created`, seconds) is later than the row's,
//!     so a late update never regresses newer state, while every newer update applies —
//!     a legitimate repeated update is not a duplicate, because the key of an *update*
//!     is the event, not the object. Two updates **within the same second** cannot be
//!     ordered from what Stripe sends: the event id breaks the tie so that every worker
//!     converges on the same row, which may be either of the two. A provider that sends
//!     an object version (or a sequence) should be guarded by that instead.
//! - The same event applied again (an operator's replay) is a `Duplicate`.
//! - With `options = { notify = true }` and a sink on the route, each applied change
//!   records an effect intent keyed by the event (one transition instance).
//!
//! `docs/handlers.md` walks through this crate.

use inbound_worker::WorkerBuilder;
use inbound_worker::handlers::{
    Handler, HandlerError, HandlerInput, StripeHandler, Transition, quarantine, text_at,
};
use serde_json::json;
use sqlx::PgConnection;
use sqlx::migrate::Migrator;

/// The name routes give this handler.
pub const SUBSCRIPTIONS_SYNC: &str = "subscriptions.sync";

/// The handler as the worker registers it: inside the library's Stripe guard, so a route
/// to it from another provider's integration, or from one that does not pin
/// `expect.livemode`, stops the worker at start-up (another signer must never forge
/// Stripe's shapes, and a live endpoint also receives test-mode events).
pub fn handler() -> StripeHandler<SyncSubscription> {
    StripeHandler(SyncSubscription)
}

/// The schema of this crate's tables.
pub const SCHEMA: &str = "subscriptions_example";

/// This crate's migrations: the worker carries them (`custom-worker migrate` applies
/// them after inbound's and grants the schema to the worker role). `build.rs` makes cargo
/// rebuild the crate when a file is added to `migrations/`.
pub static MIGRATOR: Migrator = sqlx::migrate!("./migrations");

/// Where [`MIGRATOR`] was embedded from: `migrate` refuses a build that misses a file
/// there.
pub const MIGRATIONS_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/migrations");

/// The worker as `main` builds it: the handler and the team's migrations.
pub fn configure(worker: WorkerBuilder) -> WorkerBuilder {
    worker
        .handler(SUBSCRIPTIONS_SYNC, handler())
        .migrations_from(SCHEMA, &MIGRATOR, MIGRATIONS_DIR)
}

/// Keeps one row per subscription at its newest state.
pub struct SyncSubscription;

/// What the route's `options` may say.
#[derive(Debug, Default, PartialEq, Eq)]
struct Options {
    /// Record an effect intent for each applied change (needs a sink on the route).
    notify: bool,
}

impl Options {
    fn parse(options: &serde_json::Value) -> Result<Self, String> {
        let table = options.as_object().ok_or("options must be a table")?;
        let mut parsed = Self::default();
        for (key, value) in table {
            match (key.as_str(), value) {
                ("notify", serde_json::Value::Bool(notify)) => parsed.notify = *notify,
                ("notify", _) => return Err("notify must be true or false".to_owned()),
                (other, _) => return Err(format!("unknown option {other:?} (known: notify)")),
            }
        }
        Ok(parsed)
    }
}

impl Handler for SyncSubscription {
    fn check_options(&self, options: &serde_json::Value) -> Result<(), String> {
        Options::parse(options).map(|_| ())
    }

    async fn apply(
        &self,
        transaction: &mut PgConnection,
        input: HandlerInput<'_>,
    ) -> Result<Transition, HandlerError> {
        sync(transaction, input).await
    }
}

/// The columns every statement writes, `$1`–`$9`.
macro_rules! upsert {
    ($conflict:literal) => {
        concat!(
            "INSERT INTO subscriptions_example.subscriptions AS s
                 (tenant_id, subscription_id, customer_id, status, price_id, deleted,
                  event_created, event_id, receipt_id)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ",
            $conflict
        )
    };
}

/// `created`: the first state, never written over anything.
const INSERT_IF_NEW: &str = upsert!("ON CONFLICT (tenant_id, subscription_id) DO NOTHING");

/// `updated`: only over an older, undeleted row (same second: the larger event id).
const UPDATE_IF_NEWER: &str = upsert!(
    "ON CONFLICT (tenant_id, subscription_id) DO UPDATE
     SET customer_id = EXCLUDED.customer_id, status = EXCLUDED.status,
         price_id = EXCLUDED.price_id, event_created = EXCLUDED.event_created,
         event_id = EXCLUDED.event_id, receipt_id = EXCLUDED.receipt_id, updated_at = now()
     WHERE NOT s.deleted
       AND (s.event_created, s.event_id) < (EXCLUDED.event_created, EXCLUDED.event_id)"
);

/// `deleted`: terminal, whatever its time.
const DELETE_UNLESS_DELETED: &str = upsert!(
    "ON CONFLICT (tenant_id, subscription_id) DO UPDATE
     SET status = EXCLUDED.status, deleted = true, event_created = EXCLUDED.event_created,
         event_id = EXCLUDED.event_id, receipt_id = EXCLUDED.receipt_id, updated_at = now()
     WHERE NOT s.deleted"
);

async fn sync(
    transaction: &mut PgConnection,
    input: HandlerInput<'_>,
) -> Result<Transition, HandlerError> {
    let payload = input.payload;
    let deleted = match input.event_type {
        "customer.subscription.created" | "customer.subscription.updated" => false,
        "customer.subscription.deleted" => true,
        other => {
            return Ok(Transition::Ignored {
                reason: format!("{other} is not a subscription event"),
            });
        }
    };
    // Shapes Stripe always sends; anything else is an inconsistency for a person.
    let (Some(subscription), Some(customer), Some(status), Some(created)) = (
        text_at(payload, "/data/object/id"),
        text_at(payload, "/data/object/customer"),
        text_at(payload, "/data/object/status"),
        payload.get("created").and_then(serde_json::Value::as_i64),
    ) else {
        return Ok(quarantine(
            "a subscription event without data.object.id, customer, status or created",
        ));
    };
    let price = text_at(payload, "/data/object/items/data/0/price/id");
    let tenant = input.integration.tenant.as_str();
    let statement = match (input.event_type, deleted) {
        ("customer.subscription.created", _) => INSERT_IF_NEW,
        (_, true) => DELETE_UNLESS_DELETED,
        _ => UPDATE_IF_NEWER,
    };
    // The row lock the upsert takes orders concurrent workers on one subscription.
    let changed = sqlx::query(statement)
        .bind(tenant)
        .bind(subscription)
        .bind(customer)
        .bind(status)
        .bind(price)
        .bind(deleted)
        .bind(created)
        .bind(input.event_id)
        .bind(input.receipt_id.0)
        .execute(&mut *transaction)
        .await?
        .rows_affected()
        == 1;
    if !changed {
        let (current_created, current_event, current_deleted): (i64, String, bool) =
            sqlx::query_as(
                "SELECT event_created, event_id, deleted FROM subscriptions_example.subscriptions
                 WHERE tenant_id = $1 AND subscription_id = $2",
            )
            .bind(tenant)
            .bind(subscription)
            .fetch_one(&mut *transaction)
            .await?;
        let reason = if current_event == input.event_id {
            return Ok(Transition::Duplicate {
                reason: format!("subscription {subscription} already reflects this event"),
            });
        } else if current_deleted {
            format!(
                "subscription {subscription} was deleted ({current_event}); nothing changes it after that"
            )
        } else if input.event_type == "customer.subscription.created" {
            format!(
                "stale: subscription {subscription} already exists ({current_event}); a creation never overwrites it"
            )
        } else {
            format!(
                "stale: subscription {subscription} already reflects a later event ({current_event}, created {current_created})"
            )
        };
        return Ok(Transition::Ignored { reason });
    }
    let options = Options::parse(input.options).map_err(HandlerError::transient)?;
    let effects = if options.notify {
        let data = json!({"subscription_id": subscription, "customer_id": customer,
                          "status": status, "deleted": deleted});
        // One instance of this transition per event: the event id is in the key.
        input
            .effect(
                "subscription.changed",
                &[tenant, subscription, input.event_id],
                data,
            )
            .into_iter()
            .collect()
    } else {
        Vec::new()
    };
    Ok(Transition::Applied { effects })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_checked_when_the_worker_starts() {
        let handler = SyncSubscription;
        assert!(handler.check_options(&json!({})).is_ok());
        assert!(handler.check_options(&json!({"notify": true})).is_ok());
        assert_eq!(
            handler.check_options(&json!({"notify": "yes"})),
            Err("notify must be true or false".to_owned())
        );
        assert!(
            handler
                .check_options(&json!({"notfy": true}))
                .is_err_and(|error| error.contains("unknown option \"notfy\""))
        );
    }

    /// Stripe's shapes are trusted from Stripe integrations only, with the mode pinned:
    /// the registered handler is the library's guard around this one.
    #[test]
    fn the_registered_handler_trusts_stripe_alone() {
        let handler = handler();
        assert_eq!(
            handler.providers(),
            Some(&[inbound_worker::Provider::Stripe][..])
        );
    }
}
