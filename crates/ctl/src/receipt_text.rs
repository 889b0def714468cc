//! `inboundctl receipts show` as text: the receipt, the decisions about it, its effects
//! and its payload (pretty-printed, or as stored when it cannot be decoded).

use inbound_core::payload;
use inbound_core::states::ReceiptStatus;
use inbound_store::admin;

use crate::output::out;

/// The receipt, its history and its effects, one field per line.
pub fn print_receipt(
    detail: &admin::ReceiptDetail,
    effects: &[admin::EffectSummary],
    history: &[admin::ReceiptDecision],
    complete: bool,
) -> anyhow::Result<()> {
    out!(
        "receipt {} ({} / {})",
        detail.id,
        detail.integration,
        detail.event_id
    );
    out!("  scope        {}", detail.source_scope);
    out!(
        "  type         {} (route {})",
        detail.event_type,
        detail.route_key
    );
    out!(
        "  status       {}{}",
        detail.status,
        detail
            .outcome
            .map(|outcome| outcome.as_str())
            .map(|outcome| format!(" ({outcome})"))
            .unwrap_or_default()
    );
    if let Some(reason) = &detail.outcome_reason {
        out!("  reason       {reason}");
    }
    out!("  attempts     {}", detail.attempts);
    out!(
        "  complete     {}",
        if complete {
            "yes (done, every effect completed)"
        } else {
            "no"
        }
    );
    if let Some(error) = &detail.last_error {
        // A receipt that ended done after failed attempts keeps their error as history:
        // it is not the receipt's state.
        if detail.status == ReceiptStatus::Done {
            out!("  earlier error  {error} (before it was done)");
        } else {
            out!("  last error   {error}");
        }
    }
    if let Some(subject) = &detail.subject {
        out!(
            "  subject      {subject}{} (inboundctl subject show {} {subject:?})",
            if detail.ordered { ", ordered" } else { "" },
            detail.integration
        );
    }
    if let Some(event_at) = detail.event_at {
        out!("  event time   {event_at}");
    }
    out!("  received     {}", detail.received_at);
    if let Some(finished) = detail.finished_at {
        out!("  finished     {finished}");
    }
    if let Some(visible) = detail.visible_at {
        out!(
            "  next claim   {visible}{}",
            detail
                .leased_by
                .as_deref()
                .map(|by| format!(" (leased by {by})"))
                .unwrap_or_default()
        );
    }
    print_decisions(history);
    print_effects(effects);
    print_payload(detail)
}

fn print_decisions(history: &[admin::ReceiptDecision]) {
    for decision in history {
        let done = decision.action.done();
        out!(
            "  decision     {} {done} by {} as role {} (was {}): {}",
            decision.at,
            decision.by,
            decision.database_role,
            decision.previous_status,
            decision.reason
        );
    }
}

fn print_effects(effects: &[admin::EffectSummary]) {
    out!(
        "  effects      {}",
        if effects.is_empty() { "none" } else { "" }
    );
    for effect in effects {
        out!(
            "    {} {} → {} [{}] attempts {}",
            effect.id,
            effect.operation_key,
            effect.sink,
            effect.status,
            effect.attempts
        );
    }
}

fn print_payload(detail: &admin::ReceiptDetail) -> anyhow::Result<()> {
    match detail.payload.as_deref() {
        None if detail.payload_unreadable.is_some() => out!(
            "  payload      (cannot be rendered: {})",
            detail.payload_unreadable.as_deref().unwrap_or_default()
        ),
        None => out!("  payload      (purged)"),
        Some(text) => match payload::decode(text) {
            Ok(payload) => {
                out!("  payload");
                for line in serde_json::to_string_pretty(&payload)?.lines() {
                    out!("{line}");
                }
            }
            // Stored before the storability contract: show it exactly as stored.
            Err(error) => {
                out!("  payload      (not decodable: {error})");
                for line in text.lines() {
                    out!("{line}");
                }
            }
        },
    }
    Ok(())
}
