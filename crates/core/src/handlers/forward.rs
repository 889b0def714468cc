//! `forward`: no local change; one effect intent carrying the event to the route's sink,
//! keyed by `(source_scope, event_id, sink)`.

use sqlx::PgConnection;

use super::{Handler, HandlerFuture, HandlerInput, Transition};

/// Forwards the event to the sink.
pub(super) struct Forward;

impl Handler for Forward {
    fn apply<'a>(
        &'a self,
        _transaction: &'a mut PgConnection,
        input: HandlerInput<'a>,
    ) -> HandlerFuture<'a> {
        Box::pin(async move {
            let sink = input.sink.unwrap_or_default();
            let effects = input
                .effect(
                    "event.forwarded",
                    &[input.source_scope, input.event_id, sink],
                    input.payload.clone(),
                )
                .into_iter()
                .collect();
            Ok(Transition::Applied { effects })
        })
    }
}
