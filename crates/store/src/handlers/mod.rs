//! The handler model: one receipt becomes one business transition inside the worker's
//! transaction.
//!
//! A [`Handler`] gets the open transaction and the receipt ([`HandlerInput`]) and returns a
//! [`Transition`] — applied (with effect intents), accepted duplicate, ignored, or
//! quarantine — or a [`HandlerError`], which rolls the transaction back and retries later.
//! The worker owns the transaction: it fenced the lease before calling, and it records
//! the outcome and the intents and commits after. A handler never commits, never calls
//! the network, and makes its transition idempotent with a uniqueness rule on the
//! *business* key (not the event id), so a new event id for the same operation changes
//! nothing twice.

mod forward;
mod stripe;

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use sqlx::PgConnection;

use inbound_core::config::Integration;
use inbound_core::keys::ReceiptId;

/// What a handler may ask about other receipts of its integration, inside its transaction.
pub use crate::queue::{ReceiptState, receipt_names};
pub use inbound_core::config::FORWARD;
pub use inbound_core::effects::EffectIntent;
pub use stripe::StripeHandler;

/// Every handler built into inbound itself (business handlers come from other crates).
pub const BUILTIN_HANDLERS: &[&str] = &[FORWARD];

/// What a handler sees of the receipt it transitions.
///
/// ```
/// use inbound_store::handlers::{EffectIntent, HandlerInput, text_at};
///
/// /// The intent a paid order sends to the route's sink: keyed by the order and the
/// /// payment, so a redelivery or a second event id for the same payment maps to the
/// /// same Idempotency-Key (`None` when the route names no sink).
/// fn order_paid(input: &HandlerInput<'_>) -> Option<EffectIntent> {
///     let order = text_at(input.payload, "/data/object/metadata/order_id")?;
///     let payment = text_at(input.payload, "/data/object/id")?;
///     input.effect(
///         "order.paid",
///         &[&input.integration.tenant, order, payment],
///         serde_json::json!({ "order": order, "event": input.event_id }),
///     )
/// }
/// ```
#[derive(Debug, Clone, Copy)]
pub struct HandlerInput<'a> {
    /// The receipt being applied.
    pub receipt_id: ReceiptId,
    /// Its integration (tenant, entitlement map, …).
    pub integration: &'a Integration,
    /// The provider's event id.
    pub event_id: &'a str,
    /// The stored event type.
    pub event_type: &'a str,
    /// The receipt key's scope.
    pub source_scope: &'a str,
    /// The delivery's provider facts, when the provider sent any: a JSON object with
    /// Shopify's `triggered_at` (to tell a stale retry from a fresh event), `webhook_id`,
    /// `event_id` and `api_version`, GitHub's `hook_id`, `installation_target_type` and
    /// `installation_target_id`, or Stripe's `api_version` (docs/contract.md).
    pub delivery: Option<&'a serde_json::Value>,
    /// The validated payload.
    pub payload: &'a serde_json::Value,
    /// The sink the route names, if any: effects go there.
    pub sink: Option<&'a str>,
    /// Every sink the route names (`forward` fans out to each).
    pub sinks: &'a [String],
    /// The route's `options` table (an empty object when absent), as
    /// [`Handler::check_options`] accepted it when the worker started.
    pub options: &'a serde_json::Value,
    /// The business object the receipt is about (its route's subject pointers, else its
    /// provider's default: docs/contract.md, "Subjects"), when it names one.
    pub subject: Option<&'a str>,
    /// Whether it runs in its subject's order (an `ordered = true` route): no other
    /// ordered receipt of `subject` runs beside it, and every one accepted before it with
    /// an earlier event time has finished (one that arrives later may still come after,
    /// and receipts accepted unordered — before the route was ordered, or by another
    /// route — are in no order: docs/handlers.md, "Ordered routes").
    pub ordered: bool,
}

impl HandlerInput<'_> {
    /// An effect intent towards the route's sink, or `None` when the route has no sink.
    /// `business_key` must identify one instance of the transition — not the event (a
    /// redelivered or re-sent event must map to the same key), and not just the object (an
    /// order paid again after a refund and a reopen is a new transition: name the payment
    /// too). The key is the Idempotency-Key the sink sees; an intent whose key another
    /// operation already holds fails its receipt instead of being dropped.
    pub fn effect(
        &self,
        kind: &str,
        business_key: &[&str],
        data: serde_json::Value,
    ) -> Option<EffectIntent> {
        Some(effect_to(self.sink?, kind, business_key, data))
    }
}

/// An effect intent towards `sink` (see [`HandlerInput::effect`] for what `business_key`
/// must identify; with several sinks, name the sink in it too, so each intent has its own
/// key).
pub fn effect_to(
    sink: &str,
    kind: &str,
    business_key: &[&str],
    data: serde_json::Value,
) -> EffectIntent {
    EffectIntent {
        operation_key: operation_key(kind, business_key),
        sink: sink.to_owned(),
        kind: kind.to_owned(),
        data,
    }
}

/// `kind:part:part…`, with `%` and `:` escaped in the parts so keys never alias.
pub fn operation_key(kind: &str, business_key: &[&str]) -> String {
    let mut key = kind.to_owned();
    for part in business_key {
        key.push(':');
        key.push_str(&part.replace('%', "%25").replace(':', "%3A"));
    }
    key
}

/// How a receipt ends when its handler succeeds.
///
/// ```
/// use inbound_store::handlers::{Transition, effect_to, quarantine};
///
/// // Applied, with one intent towards the sink `billing`, keyed by the order and the
/// // payment (one instance of the transition, whichever event id carried it).
/// let paid = Transition::Applied {
///     effects: vec![effect_to("billing", "order.paid", &["o_1", "pi_1"], serde_json::json!({"order": "o_1"}))],
/// };
/// let Transition::Applied { effects } = &paid else { unreachable!() };
/// assert_eq!(effects[0].operation_key, "order.paid:o_1:pi_1");
///
/// // A permanent inconsistency for a person to decide.
/// let wrong = quarantine("amount 900 differs from the order's 1000");
/// assert!(matches!(wrong, Transition::Quarantine { .. }));
/// ```
///
/// Only `Applied` commits what the handler wrote: the worker runs every handler call in a
/// savepoint and rolls it back for any other verdict (the receipt still ends as the
/// verdict says, with its reason). A handler that must keep a record while changing no
/// order (a fact that later events are judged by) returns `Applied` with no effects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transition {
    /// The business change happened now; its writes commit; deliver these effects.
    Applied {
        /// Zero or more intents, committed with the transition.
        effects: Vec<EffectIntent>,
    },
    /// The business change had already happened (another event id, a redelivery);
    /// nothing the handler wrote commits.
    Duplicate {
        /// Why, for operators.
        reason: String,
    },
    /// Nothing to do for this event (stale, partial, unmapped); nothing the handler
    /// wrote commits.
    Ignored {
        /// Why, for operators.
        reason: String,
    },
    /// A permanent inconsistency that needs a person; nothing the handler wrote commits,
    /// so a replay after the fix starts from where the event found the business tables.
    Quarantine {
        /// Why, for operators.
        reason: String,
    },
}

impl Transition {
    /// Whether this is [`Transition::Applied`]: the only verdict whose writes commit.
    pub fn is_applied(&self) -> bool {
        matches!(self, Self::Applied { .. })
    }
}

/// A handler failure: the transaction rolls back and the receipt is retried with backoff.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HandlerError {
    /// Something that may resolve itself (the order does not exist yet, …), with its
    /// cause: build one with [`HandlerError::transient`].
    #[error(transparent)]
    Transient(Box<dyn std::error::Error + Send + Sync>),
    /// The database failed; retried like any transient failure.
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
}

impl HandlerError {
    /// A transient failure: `cause` is a message or an error, kept as the source.
    ///
    /// ```
    /// use inbound_store::handlers::HandlerError;
    ///
    /// let waiting = HandlerError::transient("order o1 does not exist yet");
    /// assert_eq!(waiting.to_string(), "order o1 does not exist yet");
    /// let parse: Result<u32, _> = "x".parse::<u32>();
    /// let failed = HandlerError::transient(parse.unwrap_err());
    /// assert!(failed.to_string().contains("invalid digit"));
    /// ```
    pub fn transient(cause: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self::Transient(cause.into())
    }
}

/// A business transition. Implement it for your own domain and register it by name; a
/// handler is written as `async fn`s.
///
/// ```
/// use inbound_store::handlers::{Handler, HandlerError, HandlerInput, Transition, text_at};
/// use sqlx::PgConnection;
///
/// /// Marks a customer's account active, once per customer.
/// struct Activate;
///
/// impl Handler for Activate {
///     async fn apply(
///         &self,
///         transaction: &mut PgConnection,
///         input: HandlerInput<'_>,
///     ) -> Result<Transition, HandlerError> {
///         let Some(customer) = text_at(input.payload, "/data/object/customer") else {
///             return Ok(Transition::Ignored { reason: "no customer".to_owned() });
///         };
///         // The business key guards the transition: a redelivery or a second event id
///         // for the same customer changes nothing twice.
///         let changed = sqlx::query("UPDATE accounts SET active = true WHERE customer = $1 AND NOT active")
///             .bind(customer)
///             .execute(&mut *transaction)
///             .await?
///             .rows_affected();
///         Ok(match changed {
///             1 => Transition::Applied { effects: Vec::new() },
///             _ => Transition::Duplicate { reason: format!("{customer} is active already") },
///         })
///     }
/// }
/// ```
pub trait Handler: Send + Sync + 'static {
    /// The providers whose integrations may route to it (`None`: any). A handler that
    /// trusts one provider's payload shape names it, so that no other signer — a
    /// partner's Standard Webhooks secret, say — can forge that shape; the worker
    /// refuses to start on a route from another provider.
    fn providers(&self) -> Option<&'static [inbound_core::verify::Provider]> {
        None
    }

    /// Checks an integration that routes to it when the worker starts (after
    /// [`Handler::providers`]); an `Err` stops the worker with the route named and this
    /// message. The default accepts any.
    fn check_integration(&self, _integration: &Integration) -> Result<(), String> {
        Ok(())
    }

    /// Checks a route's `options` when the worker starts; an `Err` stops the worker with
    /// the route named and this message. The default accepts only no options, so a typo
    /// in a handler that takes none is caught rather than ignored.
    fn check_options(&self, options: &serde_json::Value) -> Result<(), String> {
        match options.as_object() {
            Some(table) if table.is_empty() => Ok(()),
            _ => Err("this handler takes no options".to_owned()),
        }
    }

    /// Applies the transition for `input` inside `transaction` (do not commit it).
    fn apply(
        &self,
        transaction: &mut PgConnection,
        input: HandlerInput<'_>,
    ) -> impl Future<Output = Result<Transition, HandlerError>> + Send;

    /// Applies the transitions for consecutive receipts of one batch, in order, inside
    /// `transaction`; one transition per input. The result must be what applying them
    /// one by one with [`Handler::apply`] could give — which the default does. Override
    /// it to use set-based statements. Any error fails all of them: the worker rolls the
    /// batch back and applies each receipt alone.
    fn apply_all(
        &self,
        transaction: &mut PgConnection,
        inputs: Vec<HandlerInput<'_>>,
    ) -> impl Future<Output = Result<Vec<Transition>, HandlerError>> + Send {
        async move {
            let mut transitions = Vec::with_capacity(inputs.len());
            for input in inputs {
                transitions.push(self.apply(transaction, input).await?);
            }
            Ok(transitions)
        }
    }
}

/// A boxed future of a registered handler.
type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, HandlerError>> + Send + 'a>>;

/// [`Handler`] as the registry holds any of them: the same methods, futures boxed.
trait DynHandler: Send + Sync {
    fn providers(&self) -> Option<&'static [inbound_core::verify::Provider]>;
    fn check_integration(&self, integration: &Integration) -> Result<(), String>;
    fn check_options(&self, options: &serde_json::Value) -> Result<(), String>;
    fn apply<'a>(
        &'a self,
        transaction: &'a mut PgConnection,
        input: HandlerInput<'a>,
    ) -> BoxFuture<'a, Transition>;
    fn apply_all<'a>(
        &'a self,
        transaction: &'a mut PgConnection,
        inputs: Vec<HandlerInput<'a>>,
    ) -> BoxFuture<'a, Vec<Transition>>;
}

impl<H: Handler> DynHandler for H {
    fn providers(&self) -> Option<&'static [inbound_core::verify::Provider]> {
        Handler::providers(self)
    }

    fn check_integration(&self, integration: &Integration) -> Result<(), String> {
        Handler::check_integration(self, integration)
    }

    fn check_options(&self, options: &serde_json::Value) -> Result<(), String> {
        Handler::check_options(self, options)
    }

    fn apply<'a>(
        &'a self,
        transaction: &'a mut PgConnection,
        input: HandlerInput<'a>,
    ) -> BoxFuture<'a, Transition> {
        Box::pin(Handler::apply(self, transaction, input))
    }

    fn apply_all<'a>(
        &'a self,
        transaction: &'a mut PgConnection,
        inputs: Vec<HandlerInput<'a>>,
    ) -> BoxFuture<'a, Vec<Transition>> {
        Box::pin(Handler::apply_all(self, transaction, inputs))
    }
}

/// A handler as a [`Registry`] holds it, whatever its type.
#[derive(Clone)]
pub struct RegisteredHandler(Arc<dyn DynHandler>);

impl RegisteredHandler {
    /// [`Handler::providers`].
    pub fn providers(&self) -> Option<&'static [inbound_core::verify::Provider]> {
        self.0.providers()
    }

    /// [`Handler::check_integration`].
    pub fn check_integration(&self, integration: &Integration) -> Result<(), String> {
        self.0.check_integration(integration)
    }

    /// [`Handler::check_options`].
    pub fn check_options(&self, options: &serde_json::Value) -> Result<(), String> {
        self.0.check_options(options)
    }

    /// [`Handler::apply`].
    pub async fn apply(
        &self,
        transaction: &mut PgConnection,
        input: HandlerInput<'_>,
    ) -> Result<Transition, HandlerError> {
        self.0.apply(transaction, input).await
    }

    /// [`Handler::apply_all`].
    pub async fn apply_all(
        &self,
        transaction: &mut PgConnection,
        inputs: Vec<HandlerInput<'_>>,
    ) -> Result<Vec<Transition>, HandlerError> {
        self.0.apply_all(transaction, inputs).await
    }
}

/// Handlers by route name.
///
/// ```
/// use inbound_store::handlers::{FORWARD, Registry};
///
/// let registry = Registry::builtin();
/// assert!(registry.get(FORWARD).is_some());
/// assert_eq!(registry.names(), [FORWARD]);
/// ```
#[derive(Clone, Default)]
pub struct Registry {
    handlers: BTreeMap<String, RegisteredHandler>,
}

impl Registry {
    /// The handlers built into inbound: `forward`.
    pub fn builtin() -> Self {
        let mut registry = Self::default();
        registry.register(FORWARD, forward::Forward);
        registry
    }

    /// Adds (or replaces) the handler called `name`.
    pub fn register(&mut self, name: &str, handler: impl Handler) {
        self.handlers
            .insert(name.to_owned(), RegisteredHandler(Arc::new(handler)));
    }

    /// The handler called `name`.
    pub fn get(&self, name: &str) -> Option<&RegisteredHandler> {
        self.handlers.get(name)
    }

    /// Every registered name (for configuration validation).
    pub fn names(&self) -> Vec<&str> {
        self.handlers.keys().map(String::as_str).collect()
    }
}

/// The non-empty string at a JSON pointer (`/data/object/id`), for handlers reading payloads.
pub fn text_at<'v>(value: &'v serde_json::Value, pointer: &str) -> Option<&'v str> {
    value
        .pointer(pointer)
        .and_then(serde_json::Value::as_str)
        .filter(|text| !text.is_empty())
}

/// [`Transition::Quarantine`] with `reason`.
pub fn quarantine(reason: impl Into<String>) -> Transition {
    Transition::Quarantine {
        reason: reason.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operation_keys_escape_their_separator() {
        assert_eq!(
            operation_key("order.paid", &["acme", "o:1"]),
            "order.paid:acme:o%3A1"
        );
        assert_ne!(
            operation_key("k", &["a:b", "c"]),
            operation_key("k", &["a", "b:c"])
        );
    }

    #[test]
    fn every_builtin_is_registered() {
        let registry = Registry::builtin();
        assert_eq!(registry.names().len(), BUILTIN_HANDLERS.len());
        for name in BUILTIN_HANDLERS {
            assert!(registry.get(name).is_some(), "{name}");
        }
    }
}
