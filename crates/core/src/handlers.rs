//! The business handlers a route may name. The worker implements them; the configuration
//! only needs their names to refuse a route to a handler that does not exist.

/// Marks an order paid from a Stripe PaymentIntent.
pub const ORDERS_MARK_PAID: &str = "orders.mark_paid";
/// Marks a paid order refunded from a fully refunded Stripe Charge.
pub const ORDERS_REFUND: &str = "orders.refund";
/// Grants entitlements for each mapped line price of a Stripe Invoice.
pub const ENTITLEMENTS_GRANT: &str = "entitlements.grant";
/// No local change; only an effect intent carrying the event to a sink.
pub const FORWARD: &str = "forward";

/// Every built-in handler name, in the order the documentation lists them.
pub const BUILTIN_HANDLERS: &[&str] =
    &[ORDERS_MARK_PAID, ORDERS_REFUND, ENTITLEMENTS_GRANT, FORWARD];

/// Whether `name` is a handler this build knows.
pub fn is_known_handler(name: &str) -> bool {
    BUILTIN_HANDLERS.contains(&name)
}
