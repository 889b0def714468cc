//! The subject page (`/subject?integration=…&subject=…`): one business object's timeline
//! — every receipt about it in any status, their outcomes and reasons, the effects they
//! recorded with what each sink answered, and every person's decision — in the provider's
//! event-time order, read as `inboundctl subject show` reads it
//! (`store::admin::subject_timeline`). With no subject given, the page is the search form.

use askama::Template;
use http::StatusCode;
use inbound_core::keys::ReceiptId;
use inbound_store::admin;

use super::{Console, Context, Frame, Page, Problem, Query, respond, view};

/// Receipts a subject page shows (the newest, by id; `before` pages back).
const SUBJECT_ROWS: i64 = 200;

#[derive(Template)]
#[template(path = "console/subject.html")]
pub struct SubjectPage {
    pub frame: Frame,
    pub integration: String,
    pub subject: String,
    pub searched: bool,
    pub held_by: Vec<String>,
    pub rows: Vec<SubjectRow>,
    /// The query of the page of older receipts, if there are any.
    pub older: Option<String>,
}

/// One receipt of the timeline, with what followed from it.
#[derive(Debug)]
pub struct SubjectRow {
    pub id: String,
    pub time: String,
    /// Whether `time` is the provider's (else the time it was accepted).
    pub provider_time: bool,
    pub event_type: String,
    pub event_id: String,
    pub state: String,
    pub reason: String,
    /// One line per effect, decision and attempt, in that order.
    pub effects: Vec<SubjectEffect>,
    pub decisions: Vec<String>,
}

/// An effect of a timeline's receipt and what its sink answered.
#[derive(Debug)]
pub struct SubjectEffect {
    pub id: String,
    pub summary: String,
    pub answers: Vec<String>,
}

/// `/subject`.
pub(super) async fn subject(console: &Console, context: &Context, query: &Query) -> Page {
    let integration = query.get("integration").unwrap_or("").trim().to_owned();
    let subject = query.get("subject").unwrap_or("").to_owned();
    let before = query.parsed::<ReceiptId>("before")?;
    // What the form shows again: as text, like anything a link may carry.
    let mut page = SubjectPage {
        frame: context.frame("Subject"),
        integration: view::text(&integration),
        subject: view::text(&subject),
        searched: false,
        held_by: Vec::new(),
        rows: Vec::new(),
        older: None,
    };
    if integration.is_empty() || subject.is_empty() {
        if !integration.is_empty() || !subject.is_empty() {
            return Err(Problem::BadInput(
                "a subject is found by its integration and its name: give both".to_owned(),
            ));
        }
        return Ok(respond::page(StatusCode::OK, &page));
    }
    let timeline = console
        .db(async |connection| {
            admin::subject_timeline(connection, &integration, &subject, SUBJECT_ROWS, before).await
        })
        .await?;
    page.frame = context.frame(format!("Subject {}", view::text(&subject)));
    page.searched = true;
    page.held_by = timeline.held_by.iter().map(ToString::to_string).collect();
    page.older = timeline
        .older
        .then(|| timeline.receipts.iter().map(|receipt| receipt.id).min())
        .flatten()
        .map(|first| {
            form_urlencoded::Serializer::new(String::new())
                .append_pair("integration", &integration)
                .append_pair("subject", &subject)
                .append_pair("before", &first.to_string())
                .finish()
        });
    page.rows = timeline.receipts.iter().map(subject_row).collect();
    Ok(respond::page(StatusCode::OK, &page))
}

fn subject_row(receipt: &admin::TimelineReceipt) -> SubjectRow {
    SubjectRow {
        id: receipt.id.to_string(),
        time: view::time(receipt.event_at.unwrap_or(receipt.received_at)),
        provider_time: receipt.event_at.is_some(),
        event_type: view::text(&receipt.event_type),
        event_id: view::text(&receipt.event_id),
        state: match receipt.outcome {
            Some(outcome) => format!("{} ({outcome})", receipt.status),
            None => receipt.status.to_string(),
        },
        reason: view::text_or_dash(
            receipt
                .outcome_reason
                .as_deref()
                .or(receipt.last_error.as_deref()),
        ),
        decisions: receipt
            .decisions
            .iter()
            .map(|decision| {
                format!(
                    "{}: {} by {} (role {}): {}",
                    view::time(decision.at),
                    decision.action,
                    view::text(&decision.by),
                    view::text(&decision.database_role),
                    view::text(&decision.reason)
                )
            })
            .collect(),
        effects: receipt
            .effects
            .iter()
            .map(|effect| SubjectEffect {
                id: effect.id.to_string(),
                summary: format!(
                    "{} → {}: {} (key {})",
                    view::text(&effect.kind),
                    view::text(&effect.sink),
                    effect.status,
                    view::text(&effect.operation_key)
                ),
                answers: effect
                    .attempts
                    .iter()
                    .map(|attempt| {
                        format!(
                            "{} {} #{}: {}{}{}",
                            view::time(attempt.started_at),
                            attempt.kind,
                            attempt.attempt,
                            attempt.status_code.map_or_else(
                                || "no answer".to_owned(),
                                |code| format!("HTTP {code}")
                            ),
                            attempt
                                .outcome
                                .as_deref()
                                .map_or_else(String::new, |outcome| format!(
                                    ", {}",
                                    view::text(outcome)
                                )),
                            attempt
                                .error
                                .as_deref()
                                .map_or_else(String::new, |error| format!(
                                    ": {}",
                                    view::text(error)
                                ))
                        )
                    })
                    .chain(effect.decisions.iter().map(|decision| {
                        format!(
                            "{}: {} by {} (role {}): {}",
                            view::time(decision.resolved_at),
                            decision.action,
                            view::text(&decision.resolved_by),
                            view::text(&decision.database_role),
                            view::text(&decision.note)
                        )
                    }))
                    .collect(),
            })
            .collect(),
    }
}
