//! What every Stripe business handler of this crate asks, written once: events from
//! Stripe integrations only (no other signer may forge Stripe's shapes), the mode pinned
//! (a live endpoint, a Connect platform's too, also receives test-mode events), and no
//! Connect event from an account the integration does not pin (one tenant's orders and
//! grants never move on any connected account's event).

use inbound_core::config::Integration;
use inbound_core::handlers::{
    Handler, HandlerBatchFuture, HandlerFuture, HandlerInput, Transition, quarantine, text_at,
};
use inbound_core::verify::Provider;
use sqlx::PgConnection;

/// A Stripe business handler: `H` with the checks above.
pub(crate) struct Stripe<H>(pub(crate) H);

impl<H: Handler> Handler for Stripe<H> {
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

    fn apply<'a>(
        &'a self,
        transaction: &'a mut PgConnection,
        input: HandlerInput<'a>,
    ) -> HandlerFuture<'a> {
        match unpinned_connect_account(&input) {
            Some(refused) => Box::pin(async move { Ok(refused) }),
            None => self.0.apply(transaction, input),
        }
    }

    fn apply_all<'a>(
        &'a self,
        transaction: &'a mut PgConnection,
        inputs: Vec<HandlerInput<'a>>,
    ) -> HandlerBatchFuture<'a> {
        if !inputs
            .iter()
            .any(|input| unpinned_connect_account(input).is_some())
        {
            return self.0.apply_all(transaction, inputs);
        }
        // Rare: the refused ones among them, and the rest one by one, in order.
        Box::pin(async move {
            let mut transitions = Vec::with_capacity(inputs.len());
            for input in inputs {
                transitions.push(self.apply(transaction, input).await?);
            }
            Ok(transitions)
        })
    }
}

/// The quarantine of a Connect event (it names an `account`) from an integration that
/// pins no account; pinned accounts are enforced by the ingress (403).
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
