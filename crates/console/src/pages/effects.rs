//! Effects: a keyset page of one status by filter, and one effect — its attempts with what
//! the sink answered, its decisions and what may be decided about it.

use super::*;

#[derive(Debug)]
pub struct EffectListRow {
    pub id: String,
    pub receipt_id: String,
    pub sink: String,
    pub owner: String,
    pub kind: String,
    pub status: String,
    pub attempts: i32,
    pub created_at: String,
    pub next_attempt_at: String,
    pub last_error: String,
}

#[derive(Debug, Default)]
pub struct EffectForm {
    pub status: String,
    pub sink: String,
    pub owner: String,
    pub since: String,
    pub until: String,
}

#[derive(Template)]
#[template(path = "console/effects.html")]
pub struct Effects {
    pub frame: Frame,
    pub form: EffectForm,
    pub statuses: Vec<&'static str>,
    pub rows: Vec<EffectListRow>,
    pub next: Option<String>,
    /// What a page that ended at its window's floor searched.
    pub searched: String,
    /// The resolutions a decision by this (narrowed) filter offers; none when it does not
    /// narrow or selects nothing.
    pub bulk: Vec<Offer>,
}

/// The effect filter a query names, as the form shows it, and whether it narrows more
/// than the status (what a decision by filter needs).
pub fn effect_filter(
    console: &Console,
    query: &Query,
) -> Result<(store_effects::EffectFilter, EffectForm, bool), Problem> {
    let status = query
        .parsed::<EffectStatus>("status")?
        .unwrap_or(EffectStatus::Review);
    let sinks = selection::sinks_selected(query.get("sink"), query.get("owner"), console.config())
        .map_err(|error| Problem::BadInput(format!("{error:#}")))?;
    let filter = store_effects::EffectFilter {
        status,
        sinks,
        since: query.time("since")?,
        until: query.time("until")?,
        before_id: query.parsed::<EffectId>("before")?,
        after_id: None,
    };
    let narrowed = filter.sinks.is_some() || filter.since.is_some() || filter.until.is_some();
    let text = |name| query.get(name).unwrap_or("").to_owned();
    let form = EffectForm {
        status: status.as_str().to_owned(),
        sink: text("sink"),
        owner: text("owner"),
        since: text("since"),
        until: text("until"),
    };
    Ok((filter, form, narrowed))
}

/// The rows a listing of `found` shows.
pub fn effect_rows(console: &Console, found: &[store_effects::EffectLine]) -> Vec<EffectListRow> {
    found
        .iter()
        .map(|line| EffectListRow {
            id: line.id.to_string(),
            receipt_id: line.receipt_id.to_string(),
            sink: view::text(&line.sink),
            owner: view::text(&sink_owner(console.config(), &line.sink)),
            kind: view::text(&line.kind),
            status: line.status.to_string(),
            attempts: line.attempts,
            created_at: view::time(line.created_at),
            next_attempt_at: view::time_or_dash(line.next_attempt_at),
            last_error: view::text_or_dash(line.last_error.as_deref()),
        })
        .collect()
}

pub(super) async fn effects_page(console: &Console, context: &Context, query: &Query) -> Page {
    let (mut filter, form, narrowed) = effect_filter(console, query)?;
    let (mut floor, mut top) = (None, None);
    if EffectStatus::CLOSED.contains(&filter.status) {
        let before = filter.before_id;
        let highest = console
            .db(async |connection| Ok(store_effects::effect_id_below(connection, before).await?))
            .await?;
        top = filter
            .before_id
            .map(|id| id.0)
            .or(highest.map(|id| id.0 + 1));
        floor = window_floor(highest.map(|id| id.0));
        filter.after_id = floor.map(EffectId);
    }
    let found = console
        .db(async |connection| Ok(store_effects::list(connection, &filter, PAGE_ROWS).await?))
        .await?;
    let full_page_last = (found.len() as i64 == PAGE_ROWS)
        .then(|| found.last().map(|last| last.id.0))
        .flatten();
    let (next, searched) = continuation(query, full_page_last, floor, top);
    let bulk = effect_offers(filter.status);
    Ok(respond::page(
        StatusCode::OK,
        &Effects {
            frame: context.frame("Effects"),
            form,
            statuses: EffectStatus::names().collect(),
            rows: effect_rows(console, &found),
            next,
            searched,
            bulk: if narrowed && !found.is_empty() {
                bulk
            } else {
                Vec::new()
            },
        },
    ))
}

#[derive(Debug)]
pub struct AttemptRow {
    pub attempt: i32,
    pub kind: String,
    pub started_at: String,
    pub finished_at: String,
    pub outcome: String,
    pub status_code: String,
    pub error: String,
}

#[derive(Template)]
#[template(path = "console/effect.html")]
pub struct EffectPage {
    pub frame: Frame,
    pub decision_path: String,
    pub decision_id: &'static str,
    pub decision_title: &'static str,
    pub receipt_id: String,
    pub lines: Vec<Line>,
    pub attempts: Vec<AttemptRow>,
    pub history: Vec<DecisionRow>,
    pub offers: Vec<Offer>,
    pub notice: String,
}

/// What may be decided about an effect in `status` (the store checks again under lock).
pub fn effect_offers(status: EffectStatus) -> Vec<Offer> {
    let mut offers = Vec::new();
    if EffectAction::Complete.allows(status) {
        offers.push(Offer {
            action: EffectAction::Complete.as_str(),
            label: "Completed",
            explains: "you confirmed with the sink that it happened: never sent again",
        });
    }
    if EffectAction::Retry.allows(status) {
        offers.push(Offer {
            action: EffectAction::Retry.as_str(),
            label: "Retry",
            explains: "sent again now with the same idempotency key (a pending one: due now)",
        });
    }
    if EffectAction::Abandon.allows(status) {
        offers.push(Offer {
            action: EffectAction::Abandon.as_str(),
            label: "Abandon",
            explains: "closed unsent: never sent again",
        });
    }
    offers
}

pub(super) async fn effect(
    console: &Console,
    context: &Context,
    id: EffectId,
    query: &Query,
) -> Page {
    let (line, attempts, resolutions) = console
        .db(async |connection| {
            Ok((
                store_effects::find(&mut *connection, id).await?,
                store_effects::attempts(&mut *connection, id).await?,
                store_effects::resolutions(&mut *connection, id).await?,
            ))
        })
        .await?;
    let Some(line) = line else {
        return Err(Problem::NotFound(format!("no effect has id {id}")));
    };
    let next = match line.status {
        EffectStatus::Pending => format!("sent at {}", view::time_or_dash(line.next_attempt_at)),
        EffectStatus::Uncertain => {
            format!("reconciled at {}", view::time_or_dash(line.next_attempt_at))
        }
        EffectStatus::InFlight => "being sent now".to_owned(),
        _ => "nothing: a person decides, or it is closed".to_owned(),
    };
    let lines = vec![
        Line {
            label: "status",
            value: line.status.to_string(),
        },
        Line {
            label: "sink",
            value: view::text(&line.sink),
        },
        Line {
            label: "owner",
            value: view::text(&sink_owner(console.config(), &line.sink)),
        },
        Line {
            label: "kind",
            value: view::text(&line.kind),
        },
        Line {
            label: "operation key",
            value: view::text(&line.operation_key),
        },
        Line {
            label: "attempts",
            value: line.attempts.to_string(),
        },
        Line {
            label: "may have landed",
            value: if line.maybe_delivered { "yes" } else { "no" }.to_owned(),
        },
        Line {
            label: "last error",
            value: view::text_or_dash(line.last_error.as_deref()),
        },
        Line {
            label: "recorded",
            value: view::time(line.created_at),
        },
        Line {
            label: "next",
            value: next,
        },
    ];
    Ok(respond::page(
        StatusCode::OK,
        &EffectPage {
            frame: context.frame(format!("Effect {id}")),
            decision_path: format!("/effects/{id}/resolve"),
            decision_id: "resolve",
            decision_title: "Resolve",
            receipt_id: line.receipt_id.to_string(),
            lines,
            attempts: attempts
                .into_iter()
                .map(|attempt| AttemptRow {
                    attempt: attempt.attempt,
                    kind: view::text(&attempt.kind),
                    started_at: view::time(attempt.started_at),
                    finished_at: view::time_or_dash(attempt.finished_at),
                    outcome: view::text_or_dash(attempt.outcome.as_deref()),
                    status_code: attempt
                        .status_code
                        .map_or_else(|| "-".to_owned(), |code| code.to_string()),
                    error: view::text_or_dash(attempt.error.as_deref()),
                })
                .collect(),
            history: resolutions
                .into_iter()
                .map(|resolution| DecisionRow {
                    at: view::time(resolution.resolved_at),
                    action: view::text(resolution.action.as_str()),
                    previous_status: view::text(resolution.previous_status.as_str()),
                    by: view::text(&resolution.resolved_by),
                    role: view::text(&resolution.database_role),
                    reason: view::text(&resolution.note),
                })
                .collect(),
            offers: effect_offers(line.status),
            notice: notice(query),
        },
    ))
}
