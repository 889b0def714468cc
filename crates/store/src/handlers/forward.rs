//! `forward`: no local change; one effect intent carrying the event to each of the route's
//! sinks, keyed by `(source_scope, event_id, sink)`.

use sqlx::PgConnection;

use super::{Handler, HandlerError, HandlerInput, Transition, effect_to};

/// Forwards the event to each sink.
pub(super) struct Forward;

impl Handler for Forward {
    async fn apply(
        &self,
        _transaction: &mut PgConnection,
        input: HandlerInput<'_>,
    ) -> Result<Transition, HandlerError> {
        let effects = input
            .sinks
            .iter()
            .map(|sink| {
                effect_to(
                    sink,
                    "event.forwarded",
                    &[input.source_scope, input.event_id, sink],
                    input.payload.clone(),
                )
            })
            .collect();
        Ok(Transition::Applied { effects })
    }
}
