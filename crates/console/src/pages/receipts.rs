//! Receipts: a keyset page of one status by filter (or by the provider's event id), and
//! one receipt — its facts, its payload (to a named person, the read recorded first), its
//! decisions, who read it, its effects and what may be decided about it.

use super::*;

#[derive(Debug)]
pub struct ReceiptRow {
    pub id: String,
    pub integration: String,
    pub owner: String,
    pub event_id: String,
    pub event_type: String,
    pub state: String,
    pub attempts: i32,
    pub received_at: String,
    pub reason: String,
}

/// The receipt filter as the form shows it.
#[derive(Debug, Default)]
pub struct ReceiptForm {
    pub status: String,
    pub integration: String,
    pub owner: String,
    pub event_type: String,
    pub since: String,
    pub until: String,
    pub event_id: String,
}

#[derive(Template)]
#[template(path = "console/receipts.html")]
pub struct Receipts {
    pub frame: Frame,
    pub form: ReceiptForm,
    pub statuses: Vec<&'static str>,
    pub rows: Vec<ReceiptRow>,
    pub next: Option<String>,
    /// What a page that ended at its window's floor searched.
    pub searched: String,
    /// Whether the filter may be decided on in bulk (failed or quarantined, narrowed).
    pub bulk: bool,
}

/// The receipt filter a query names.
pub fn receipt_filter(
    console: &Console,
    query: &Query,
) -> Result<(admin::ReceiptFilter, ReceiptForm, bool), Problem> {
    let status = query
        .parsed::<ReceiptStatus>("status")?
        .unwrap_or(ReceiptStatus::Failed);
    let integrations = selection::integrations_selected(
        query.get("integration"),
        query.get("owner"),
        console.config(),
    )
    .map_err(|error| Problem::BadInput(format!("{error:#}")))?;
    let filter = admin::ReceiptFilter {
        status,
        integrations,
        event_type: query.get("type").map(str::to_owned),
        since: query.time("since")?,
        until: query.time("until")?,
        before_id: query.parsed::<ReceiptId>("before")?,
        after_id: None,
    };
    let narrowed = filter.integrations.is_some()
        || filter.event_type.is_some()
        || filter.since.is_some()
        || filter.until.is_some();
    let text = |name| query.get(name).unwrap_or("").to_owned();
    let form = ReceiptForm {
        status: status.as_str().to_owned(),
        integration: text("integration"),
        owner: text("owner"),
        event_type: text("type"),
        since: text("since"),
        until: text("until"),
        event_id: text("event_id"),
    };
    Ok((filter, form, narrowed))
}

pub fn receipt_rows(console: &Console, found: &[admin::ReceiptSummary]) -> Vec<ReceiptRow> {
    found
        .iter()
        .map(|row| ReceiptRow {
            id: row.id.to_string(),
            integration: view::text(&row.integration),
            owner: view::text(&integration_owner(console.config(), &row.integration)),
            event_id: view::text(&row.event_id),
            event_type: view::text(&row.event_type),
            state: match row.outcome {
                Some(outcome) => format!("{} ({})", row.status, outcome),
                None => row.status.to_string(),
            },
            attempts: row.attempts,
            received_at: view::time(row.received_at),
            reason: view::text_or_dash(row.reason.as_deref()),
        })
        .collect()
}
pub(super) async fn receipts(console: &Console, context: &Context, query: &Query) -> Page {
    let (mut filter, form, narrowed) = receipt_filter(console, query)?;
    let by_event_id = query.get("event_id").is_some();
    let (mut floor, mut top) = (None, None);
    if filter.status == ReceiptStatus::Done && !by_event_id {
        let before = filter.before_id;
        let highest = console
            .db(async |connection| Ok(admin::receipt_id_below(connection, before).await?))
            .await?;
        top = filter
            .before_id
            .map(|id| id.0)
            .or(highest.map(|id| id.0 + 1));
        floor = window_floor(highest.map(|id| id.0));
        filter.after_id = floor.map(ReceiptId);
    }
    let found = match query.get("event_id") {
        Some(event_id) => {
            let event_id = event_id.to_owned();
            console
                .db(async |connection| Ok(admin::receipts_by_event_id(connection, &event_id).await?))
                .await?
        }
        None => {
            console
                .db(async |connection| admin::list_receipts(connection, &filter, PAGE_ROWS).await)
                .await?
        }
    };
    let full_page_last = (found.len() as i64 == PAGE_ROWS)
        .then(|| found.last().map(|last| last.id.0))
        .flatten();
    let (next, searched) = if by_event_id {
        (None, String::new())
    } else {
        continuation(query, full_page_last, floor, top)
    };
    let bulk = ReceiptStatus::NEEDS_A_PERSON.contains(&filter.status)
        && narrowed
        && query.get("event_id").is_none()
        && !found.is_empty();
    Ok(respond::page(
        StatusCode::OK,
        &Receipts {
            frame: context.frame("Receipts"),
            rows: receipt_rows(console, &found),
            form,
            statuses: ReceiptStatus::names().collect(),
            next,
            searched,
            bulk,
        },
    ))
}

/// The query of the next page: this one's, with `before` the last id shown.

#[derive(Template)]
#[template(path = "console/receipt.html")]
pub struct ReceiptPage {
    pub frame: Frame,
    pub decision_path: String,
    pub decision_id: &'static str,
    pub decision_title: &'static str,
    pub lines: Vec<Line>,
    pub payload: Option<view::PayloadView>,
    pub payload_note: String,
    pub receipt_id: String,
    /// The newest reads of the payload, and how many there are.
    pub reads: Vec<ReadRow>,
    pub reads_total: i64,
    /// Whether there are more than are listed.
    pub reads_unlisted: bool,
    pub history: Vec<DecisionRow>,
    pub effects: Vec<EffectRow>,
    pub offers: Vec<Offer>,
    pub notice: String,
    /// The receipt's subject and the query of its timeline page.
    pub subject_link: Option<SubjectLink>,
}

/// A link from a receipt to its subject's timeline.
#[derive(Debug)]
pub struct SubjectLink {
    pub subject: String,
    pub query: String,
    pub ordered: bool,
}

/// One recorded read of a payload.
#[derive(Debug)]
pub struct ReadRow {
    pub at: String,
    pub by: String,
    pub role: String,
    pub surface: String,
}

/// What may be decided about a receipt in `status` (the store checks again under lock).
pub fn receipt_offers(status: ReceiptStatus) -> Vec<Offer> {
    match status {
        ReceiptStatus::Failed | ReceiptStatus::Quarantined => vec![
            Offer {
                action: "replay",
                label: "Replay",
                explains: "queued again now, its attempts reset",
            },
            Offer {
                action: "close",
                label: "Close",
                explains: "ends done (closed) with your reason; never processed",
            },
        ],
        ReceiptStatus::Pending => vec![
            Offer {
                action: "replay",
                label: "Run now",
                explains: "a receipt waiting out a retry delay is due now, attempts kept",
            },
            Offer {
                action: "quarantine",
                label: "Quarantine",
                explains: "taken out of the queue until a person replays or closes it",
            },
            Offer {
                action: "fail",
                label: "Fail",
                explains: "taken out of the queue as failed, your reason as its error",
            },
        ],
        ReceiptStatus::Done => Vec::new(),
    }
}

/// The newest reads of a payload its page lists.
const READS_LISTED: i64 = 20;

pub(super) async fn receipt(
    console: &Console,
    context: &Context,
    id: ReceiptId,
    query: &Query,
) -> Page {
    let (detail, payload, history, effect_list, (reads, reads_total)) = console
        .db(async |connection| {
            // Shown to a named person only, and recorded before it is shown, in the
            // same transaction: a read that cannot be recorded shows nothing.
            let payload = match &context.reader {
                Some(reader) => {
                    let payload = admin::receipt_payload_excerpt(
                        &mut *connection,
                        id,
                        view::PAYLOAD_SHOWN_CHARS,
                    )
                    .await?;
                    if matches!(payload, admin::PayloadShown::Excerpt(_)) {
                        admin::record_payload_reads(
                            &mut *connection,
                            &[id],
                            reader,
                            admin::ReadSurface::Console,
                        )
                        .await?;
                    }
                    Some(payload)
                }
                None => None,
            };
            Ok((
                admin::receipt_facts(&mut *connection, id).await?,
                payload,
                admin::receipt_history(&mut *connection, id).await?,
                admin::receipt_effects(&mut *connection, id).await?,
                admin::payload_reads_of(&mut *connection, id, READS_LISTED).await?,
            ))
        })
        .await?;
    let Some(detail) = detail else {
        return Err(Problem::NotFound(format!("no receipt has id {id}")));
    };
    let config = console.config();
    let state = match detail.outcome {
        Some(outcome) => format!("{} ({})", detail.status, outcome),
        None => detail.status.to_string(),
    };
    let lines = vec![
        Line {
            label: "state",
            value: state,
        },
        Line {
            label: "integration",
            value: view::text(&detail.integration),
        },
        Line {
            label: "owner",
            value: view::text(&integration_owner(config, &detail.integration)),
        },
        Line {
            label: "receipt key: scope",
            value: view::text(&detail.source_scope),
        },
        Line {
            label: "receipt key: event id",
            value: view::text(&detail.event_id),
        },
        Line {
            label: "event type",
            value: view::text(&detail.event_type),
        },
        Line {
            label: "route",
            value: view::text(&detail.route_key),
        },
        Line {
            label: "attempts",
            value: detail.attempts.to_string(),
        },
        Line {
            label: "reason",
            value: view::text_or_dash(detail.outcome_reason.as_deref()),
        },
        Line {
            label: "last error",
            value: view::text_or_dash(detail.last_error.as_deref()),
        },
        Line {
            label: "received",
            value: view::time(detail.received_at),
        },
        Line {
            label: "finished",
            value: view::time_or_dash(detail.finished_at),
        },
        Line {
            label: "next claimable",
            value: view::time_or_dash(detail.visible_at),
        },
        Line {
            label: "leased by",
            value: view::text_or_dash(detail.leased_by.as_deref()),
        },
    ];
    let (payload, payload_note) = match payload {
        None => (
            None,
            "shown to a named person only, and every reading is recorded: start the console with --by NAME, or reach it through the proxy that names you".to_owned(),
        ),
        Some(admin::PayloadShown::Excerpt(excerpt)) => {
            (Some(view::payload(&excerpt)), String::new())
        }
        Some(admin::PayloadShown::Purged) => {
            (None, "purged by retention (the key is kept)".to_owned())
        }
        Some(admin::PayloadShown::Unreadable(why)) => (
            None,
            format!(
                "the stored payload cannot be rendered: {}",
                view::text(&why)
            ),
        ),
    };
    Ok(respond::page(
        StatusCode::OK,
        &ReceiptPage {
            frame: context.frame(format!("Receipt {id}")),
            decision_path: format!("/receipts/{id}/decide"),
            decision_id: "decide",
            decision_title: "Decide",
            lines,
            payload,
            payload_note,
            receipt_id: id.to_string(),
            reads_unlisted: reads_total > i64::try_from(reads.len()).unwrap_or(i64::MAX),
            reads: reads
                .into_iter()
                .map(|read| ReadRow {
                    at: view::time(read.read_at),
                    by: view::text(&read.read_by),
                    role: view::text(&read.database_role),
                    surface: view::text(&read.surface),
                })
                .collect(),
            reads_total,
            history: history
                .into_iter()
                .map(|decision| DecisionRow {
                    at: view::time(decision.at),
                    action: view::text(decision.action.as_str()),
                    previous_status: view::text(decision.previous_status.as_str()),
                    by: view::text(&decision.by),
                    role: view::text(&decision.database_role),
                    reason: view::text(&decision.reason),
                })
                .collect(),
            effects: effect_list
                .into_iter()
                .map(|effect| EffectRow {
                    id: effect.id.to_string(),
                    sink: view::text(&effect.sink),
                    kind: view::text(&effect.kind),
                    status: effect.status.to_string(),
                    attempts: effect.attempts,
                    operation_key: view::text(&effect.operation_key),
                    last_error: view::text_or_dash(effect.last_error.as_deref()),
                })
                .collect(),
            offers: receipt_offers(detail.status),
            notice: notice(query),
            subject_link: detail.subject.as_deref().map(|subject| SubjectLink {
                subject: view::text(subject),
                query: form_urlencoded::Serializer::new(String::new())
                    .append_pair("integration", &detail.integration)
                    .append_pair("subject", subject)
                    .finish(),
                ordered: detail.ordered,
            }),
        },
    ))
}
