//! The reference business domain: what a team's own handlers look like, and what the
//! stock `inbound-worker`, the demo and the tests run.
//!
//! - `orders.mark_paid`, `orders.refund` (`orders`): a Stripe PaymentIntent pays an
//!   order, a fully refunded Charge refunds it; each a guarded `UPDATE` on the order.
//! - `entitlements.grant` (`entitlements`): one grant per mapped price of a paid invoice.
//! - each is wrapped in [`inbound_store::handlers::StripeHandler`]: the checks every Stripe
//!   business handler makes (Stripe signers, the mode pinned, no unpinned Connect
//!   account), from the library, as a team's own handlers use it.
//! - [`store`]: the SQL, on tables in schema [`SCHEMA`] (installed by [`migrate`], which
//!   the stock `inbound-worker migrate` runs). Statements name their tables qualified: a
//!   worker's sessions see only inbound's schema.
//!
//! Nothing in inbound's core depends on this crate.

mod entitlements;
mod orders;
pub mod store;

use inbound_store::handlers::{Registry, StripeHandler};
use inbound_store::{InvalidSchema, Migrated, MigrationError, Schema, migrate_schema};
use sqlx::migrate::Migrator;
use sqlx::postgres::PgConnectOptions;

/// Marks an order paid from a Stripe PaymentIntent.
pub const ORDERS_MARK_PAID: &str = "orders.mark_paid";
/// Marks a paid order refunded from a fully refunded Stripe Charge.
pub const ORDERS_REFUND: &str = "orders.refund";
/// Grants entitlements for each mapped line price of a Stripe Invoice.
pub const ENTITLEMENTS_GRANT: &str = "entitlements.grant";

/// Every handler of this crate, in the order the documentation lists them.
pub const HANDLERS: &[&str] = &[ORDERS_MARK_PAID, ORDERS_REFUND, ENTITLEMENTS_GRANT];

/// The schema of the example's tables.
pub const SCHEMA: &str = "inbound_example";

/// The example's migrations (history in `inbound_example._sqlx_migrations`).
pub static MIGRATOR: Migrator = sqlx::migrate!("./migrations");

/// Adds this crate's handlers to `registry`.
pub fn register(registry: &mut Registry) {
    registry.register(ORDERS_MARK_PAID, StripeHandler(orders::MarkPaid));
    registry.register(ORDERS_REFUND, StripeHandler(orders::Refund));
    registry.register(ENTITLEMENTS_GRANT, StripeHandler(entitlements::Grant));
}

/// Installs (or brings up to date) the example's tables in [`SCHEMA`].
pub async fn migrate(options: &PgConnectOptions) -> Result<Migrated, MigrationError> {
    let schema: Schema = SCHEMA
        .parse()
        .map_err(|error: InvalidSchema| MigrationError::Refused(error.to_string()))?;
    migrate_schema(options, &MIGRATOR, &schema).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_handler_is_registered_and_the_schema_is_usable() {
        let mut registry = Registry::default();
        register(&mut registry);
        for name in HANDLERS {
            assert!(registry.get(name).is_some(), "{name}");
        }
        assert!(SCHEMA.parse::<Schema>().is_ok());
    }
}
