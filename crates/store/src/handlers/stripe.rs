//! What every Stripe business handler asks, written once — wrap yours in
//! [`StripeHandler`]: events from Stripe integrations only (no other signer may forge
//! Stripe's shapes), the mode pinned (a live endpoint, a Connect platform's too, also
//! receives test-mode events), and no Connect event from an account the integration does
//! not pin (one tenant's business rows never move on any connected account's event).

use sqlx::PgConnection;

use super::{Handler, HandlerError, HandlerInput, Transition, quarantine, text_at};
use inbound_core::config::Integration;
use inbound_core::verify::Provider;

/// A Stripe business handler: `H` with the checks above. Register
/// `StripeHandler(YourHandler)`; the worker then refuses to start on a route to it from
/// another provider's integration, or from one that does not pin `expect.livemode`.
///
/// ```
/// use inbound_store::handlers::{Handler, HandlerError, HandlerInput, Registry, StripeHandler, Transition};
/// use inbound_core::verify::Provider;
///
/// struct Fulfil;
///
/// impl Handler for Fulfil {
///     async fn apply(
///         &self,
///         _transaction: &mut sqlx::PgConnection,
///         _input: HandlerInput<'_>,
///     ) -> Result<Transition, HandlerError> {
///         Ok(Transition::Applied { effects: Vec::new() })
///     }
/// }
///
/// let guarded = StripeHandler(Fulfil);
/// assert_eq!(guarded.providers(), Some(&[Provider::Stripe][..]));
/// let mut registry = Registry::default();
/// registry.register("orders.fulfil", guarded);
/// ```
pub struct StripeHandler<H>(pub H);

impl<H: Handler> Handler for StripeHandler<H> {
    fn providers(&self) -> Option<&'static [Provider]> {
        Some(&[Provider::Stripe])
    }

    fn check_integration(&self, integration: &Integration) -> Result<(), String> {
        if integration.expect.livemode.is_none() {
            return Err(
                "a Stripe business handler needs expect.livemode pinned: a live endpoint (of a \
                 Connect platform too) also receives test-mode events"
                    .to_owned(),
            );
        }
        self.0.check_integration(integration)
    }

    fn check_options(&self, options: &serde_json::Value) -> Result<(), String> {
        self.0.check_options(options)
    }

    async fn apply(
        &self,
        transaction: &mut PgConnection,
        input: HandlerInput<'_>,
    ) -> Result<Transition, HandlerError> {
        match unpinned_connect_account(&input) {
            Some(refused) => Ok(refused),
            None => self.0.apply(transaction, input).await,
        }
    }

    async fn apply_all(
        &self,
        transaction: &mut PgConnection,
        inputs: Vec<HandlerInput<'_>>,
    ) -> Result<Vec<Transition>, HandlerError> {
        if !inputs
            .iter()
            .any(|input| unpinned_connect_account(input).is_some())
        {
            return self.0.apply_all(transaction, inputs).await;
        }
        // Rare: the refused ones among them, and the rest one by one, in order.
        let mut transitions = Vec::with_capacity(inputs.len());
        for input in inputs {
            transitions.push(self.apply(transaction, input).await?);
        }
        Ok(transitions)
    }
}

/// The quarantine of a Connect event (it names an `account`) from an integration that
/// pins no account; another account than a pinned one never reaches a handler (the
/// ingress acknowledges it as out of scope and stores nothing).
fn unpinned_connect_account(input: &HandlerInput<'_>) -> Option<Transition> {
    let account = text_at(input.payload, "/account")?;
    if input.integration.expect.account.is_some() {
        return None;
    }
    Some(quarantine(format!(
        "a Connect event of account {account} reached an integration that pins no account: \
         set expect.account, or route Connect traffic to a handler keyed by account"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handlers::forward::Forward;
    use inbound_core::config::Config;

    #[test]
    fn a_stripe_handler_names_its_signer_and_needs_the_mode_pinned() {
        let handler = StripeHandler(Forward);
        assert_eq!(handler.providers(), Some(&[Provider::Stripe][..]));
        let config = |expect: &str| {
            Config::from_toml(
                &format!(
                    "[[integration]]\nid = \"s\"\nprovider = \"stripe\"\ntenant = \"t\"\nsecrets = [\"env:S\"]\n{expect}\n"
                ),
                &|_| Some("whsec_x".to_owned()),
            )
            .expect("config")
        };
        let unpinned = config("");
        assert!(
            handler
                .check_integration(unpinned.integration("s").expect("s"))
                .is_err()
        );
        let pinned = config("expect = { livemode = true }");
        assert_eq!(
            handler.check_integration(pinned.integration("s").expect("s")),
            Ok(())
        );
    }
}
