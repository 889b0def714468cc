//! `forward`: no local change; one effect intent carrying the event to each of the route's
//! sinks, keyed by `(source_scope, event_id, sink)`.

use sqlx::PgConnection;

use super::{Handler, HandlerFuture, HandlerInput, Transition, effect_to};

/// Forwards the event to each sink.
pub(super) struct Forward;

impl Handler for Forward {
    fn apply<'a>(
        &'a self,
        _transaction: &'a mut PgConnection,
        input: HandlerInput<'a>,
    ) -> HandlerFuture<'a> {
        Box::pin(async move {
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
        })
    }
}
