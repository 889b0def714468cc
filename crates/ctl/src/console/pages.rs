//! The console's pages (GET changes nothing): the overview, receipts and effects by filter
//! a keyset page at a time, one receipt, one effect, and the review queue. Each reads the
//! store as `inboundctl` does, within the console's database limit, and renders a checked
//! template whose every value is escaped.

use askama::Template;
use http::{Response, StatusCode};
use inbound_core::keys::{EffectId, ReceiptId};
use inbound_core::states::{EffectStatus, ReceiptStatus};
use inbound_runtime::http::Body;
use inbound_store::{admin, effects};

use super::guard::Actor;
use super::{Console, respond, view};
use crate::selection::{self, integration_owner, sink_owner};

/// Rows per page of a listing.
pub const PAGE_ROWS: i64 = 50;
/// Groups the review queue shows of each kind.
const REVIEW_GROUPS: i64 = 100;
/// The effect states the overview counts: all but the closed ones.
const UNCLOSED_EFFECTS: &[EffectStatus] = &[
    EffectStatus::Pending,
    EffectStatus::InFlight,
    EffectStatus::Uncertain,
    EffectStatus::Review,
    EffectStatus::Failed,
];
/// How far back (in receipts of all integrations) the overview looks for a newest delivery.
const NEWEST_LOOK_BACK: i64 = 100_000;

/// What every page shows around its content.
#[derive(Debug, Clone)]
pub struct Frame {
    /// Who is acting, or why nobody may decide.
    pub who: String,
    /// The form token, when the actor may decide.
    pub csrf: Option<String>,
    /// The page's heading.
    pub title: String,
}

/// What a request's pages share: who acts and the token their forms carry.
pub struct Context {
    who: String,
    /// The name a payload read is recorded with ([`Actor::reader`]); `None`: no payload
    /// is shown.
    reader: Option<String>,
    csrf: Option<String>,
}

impl Context {
    pub fn new(console: &Console, actor: &Actor, session: &str) -> Self {
        Self {
            who: super::who(actor),
            reader: actor.reader().map(str::to_owned),
            csrf: actor
                .person()
                .map(|person| console.csrf.token(session, person)),
        }
    }

    /// The frame of a page titled `title`.
    pub fn frame(&self, title: impl Into<String>) -> Frame {
        Frame {
            who: self.who.clone(),
            csrf: self.csrf.clone(),
            title: title.into(),
        }
    }
}

/// A page that says what went wrong (a bad filter, an unknown id, a refused decision).
#[derive(Template)]
#[template(path = "console/problem.html")]
pub struct Problem {
    pub frame: Frame,
    pub message: String,
}

/// The problem page with `status`.
pub fn problem(
    context: &Context,
    status: StatusCode,
    message: impl Into<String>,
) -> Response<Body> {
    respond::page(
        status,
        &Problem {
            frame: context.frame("Not done"),
            message: view::text(&message.into()),
        },
    )
}

/// Routes a GET.
pub async fn get(
    console: &Console,
    context: &Context,
    segments: &[&str],
    query: &str,
) -> Response<Body> {
    let query = Query::parse(query);
    let page = match segments {
        [] => overview(console, context).await,
        ["static", "console.css"] => return respond::stylesheet(),
        ["receipts"] => receipts(console, context, &query).await,
        ["receipts", id] => match id.parse::<ReceiptId>() {
            Ok(id) => receipt(console, context, id, &query).await,
            Err(_) => Err(Refusal::NotFound(format!("no receipt has id {id:?}"))),
        },
        ["effects"] => effects_page(console, context, &query).await,
        ["effects", id] => match id.parse::<EffectId>() {
            Ok(id) => effect(console, context, id, &query).await,
            Err(_) => Err(Refusal::NotFound(format!("no effect has id {id:?}"))),
        },
        ["review"] => review(console, context).await,
        _ => Err(Refusal::NotFound("no such page".to_owned())),
    };
    page.unwrap_or_else(|refusal| refusal.page(context))
}

/// Why a page is not shown.
pub enum Refusal {
    /// A bad filter or form value: 400 with what is wrong.
    BadInput(String),
    /// No such page or id: 404.
    NotFound(String),
    /// A decision the row's state no longer allows (moved since its confirmation): 409.
    Conflict(String),
    /// The database failed or did not answer: 503.
    Database(anyhow::Error),
}

impl Refusal {
    pub fn page(self, context: &Context) -> Response<Body> {
        match self {
            Self::BadInput(message) => problem(context, StatusCode::BAD_REQUEST, message),
            Self::NotFound(message) => problem(context, StatusCode::NOT_FOUND, message),
            Self::Conflict(message) => problem(context, StatusCode::CONFLICT, message),
            Self::Database(error) => {
                // The details (host names, statements) stay in the log.
                tracing::warn!(error = %format!("{error:#}"), "a console page failed");
                problem(
                    context,
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the database failed or did not answer in time; the console's log says why",
                )
            }
        }
    }
}

impl From<anyhow::Error> for Refusal {
    fn from(error: anyhow::Error) -> Self {
        Self::Database(error)
    }
}

type Page = Result<Response<Body>, Refusal>;

/// A query string's fields (the first of each name; empty values are absent).
#[derive(Debug, Default)]
pub struct Query(Vec<(String, String)>);

impl Query {
    pub fn parse(query: &str) -> Self {
        Self(
            form_urlencoded::parse(query.as_bytes())
                .into_owned()
                .filter(|(_, value)| !value.trim().is_empty())
                .collect(),
        )
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.trim())
    }

    fn time(&self, name: &str) -> Result<Option<chrono::DateTime<chrono::Utc>>, Refusal> {
        self.get(name)
            .map(|text| {
                selection::parse_time(text)
                    .map_err(|error| Refusal::BadInput(format!("{name}: {error}")))
            })
            .transpose()
    }

    fn parsed<T: std::str::FromStr>(&self, name: &str) -> Result<Option<T>, Refusal> {
        self.get(name)
            .map(|text| {
                text.parse::<T>()
                    .map_err(|_| Refusal::BadInput(format!("{name}: {text:?} is not valid here")))
            })
            .transpose()
    }
}

// ---- overview ----

#[derive(Debug)]
pub struct IntegrationRow {
    pub id: String,
    pub owner: String,
    pub pending: i64,
    pub leased: i64,
    pub waiting: i64,
    pub failed: i64,
    pub quarantined: i64,
    pub claimable_age: String,
    pub waiting_age: String,
    pub newest: String,
    /// Ignored by the worker among its receipts in the look-back.
    pub ignored: String,
}

#[derive(Debug)]
pub struct SinkRow {
    pub id: String,
    pub owner: String,
    pub counts: Vec<(String, i64)>,
    pub failed: i64,
    pub oldest_open: String,
    pub due_wait: String,
}

#[derive(Template)]
#[template(path = "console/overview.html")]
pub struct Overview {
    pub frame: Frame,
    pub integrations: Vec<IntegrationRow>,
    pub sinks: Vec<SinkRow>,
    pub open_statuses: Vec<&'static str>,
    pub effect_totals: Vec<(String, i64)>,
}

async fn overview(console: &Console, context: &Context) -> Page {
    let config = console.config();
    let mut integrations: Vec<String> = config
        .map(|config| config.integrations().iter().map(|i| i.id.clone()).collect())
        .unwrap_or_default();
    let mut sinks: Vec<String> = config
        .map(|config| config.sinks().iter().map(|s| s.id.clone()).collect())
        .unwrap_or_default();
    let (queues, review, recent, open, failed, totals) = console
        .db(async |connection| {
            Ok((
                admin::queue_by_integration(&mut *connection).await?,
                admin::review_counts(&mut *connection).await?,
                admin::recent_receipts(&mut *connection, NEWEST_LOOK_BACK).await?,
                effects::open_counts_by_sink(&mut *connection).await?,
                effects::failed_counts_by_sink(&mut *connection).await?,
                // Open and failed only: the closed ones grow with retention, and
                // counting them reads every effect.
                effects::counts(&mut *connection, UNCLOSED_EFFECTS).await?,
            ))
        })
        .await?;
    integrations.extend(queues.iter().map(|queue| queue.integration.clone()));
    integrations.extend(review.iter().map(|(integration, _, _)| integration.clone()));
    integrations.extend(recent.iter().map(|recent| recent.integration.clone()));
    integrations.sort();
    integrations.dedup();
    sinks.extend(open.iter().map(|(sink, _, _)| sink.clone()));
    sinks.extend(failed.iter().map(|(sink, _)| sink.clone()));
    sinks.sort();
    sinks.dedup();
    let mut integration_rows = Vec::with_capacity(integrations.len());
    for id in integrations {
        let ages = console
            .db(async |connection| Ok(admin::queue_ages(&mut *connection, &id).await?))
            .await?;
        let recently = recent.iter().find(|recent| recent.integration == id);
        let queue = queues.iter().find(|queue| queue.integration == id);
        let needing = |status| {
            review
                .iter()
                .find(|(integration, state, _)| *integration == id && *state == status)
                .map_or(0, |(_, _, count)| *count)
        };
        integration_rows.push(IntegrationRow {
            owner: integration_owner(config, &id),
            pending: queue.map_or(0, |queue| queue.pending),
            leased: queue.map_or(0, |queue| queue.leased),
            waiting: queue.map_or(0, |queue| queue.waiting),
            failed: needing(ReceiptStatus::Failed),
            quarantined: needing(ReceiptStatus::Quarantined),
            claimable_age: view::age(ages.pending),
            waiting_age: view::age(ages.waiting),
            newest: recently.map_or_else(
                || format!("none in the newest {NEWEST_LOOK_BACK} receipts"),
                |recent| view::time(recent.newest_at),
            ),
            ignored: recently.map_or_else(
                || "-".to_owned(),
                |recent| format!("{} of {}", recent.ignored, recent.count),
            ),
            id,
        });
    }
    let mut sink_rows = Vec::with_capacity(sinks.len());
    for id in sinks {
        let (oldest_open, due_wait) = console
            .db(async |connection| {
                Ok((
                    effects::oldest_open_age_seconds(&mut *connection, &id).await?,
                    effects::oldest_due_wait_seconds(&mut *connection, &id).await?,
                ))
            })
            .await?;
        sink_rows.push(SinkRow {
            owner: sink_owner(config, &id),
            counts: EffectStatus::OPEN
                .iter()
                .map(|status| {
                    let count = open
                        .iter()
                        .find(|(sink, state, _)| *sink == id && state == status)
                        .map_or(0, |(_, _, count)| *count);
                    (status.as_str().to_owned(), count)
                })
                .collect(),
            failed: failed
                .iter()
                .find(|(sink, _)| *sink == id)
                .map_or(0, |(_, count)| *count),
            oldest_open: view::age(oldest_open),
            due_wait: view::age(due_wait),
            id,
        });
    }
    Ok(respond::page(
        StatusCode::OK,
        &Overview {
            frame: context.frame("Overview"),
            integrations: integration_rows,
            sinks: sink_rows,
            open_statuses: EffectStatus::OPEN
                .iter()
                .map(|status| status.as_str())
                .collect(),
            effect_totals: totals
                .into_iter()
                .map(|(status, count)| (status.as_str().to_owned(), count))
                .collect(),
        },
    ))
}

// ---- receipts ----

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
) -> Result<(admin::ReceiptFilter, ReceiptForm, bool), Refusal> {
    let status = query
        .parsed::<ReceiptStatus>("status")?
        .unwrap_or(ReceiptStatus::Failed);
    let integrations = selection::integrations_selected(
        query.get("integration"),
        query.get("owner"),
        console.config(),
    )
    .map_err(|error| Refusal::BadInput(format!("{error:#}")))?;
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

/// How many ids of a closed status a page reads at most: `done` receipts and closed
/// effects grow with retention, and a selective filter over them would read until it found
/// a page; a window bounds each page's read, and "older" continues below it.
const WINDOW_IDS: i64 = 200_000;

/// The window below `before` (or the newest id) a page of a closed status reads: the ids
/// above the returned one. `None` when the window reaches the first id.
fn window_floor(before: Option<i64>, newest: Option<i64>) -> Option<i64> {
    let top = before.or(newest.map(|newest| newest + 1))?;
    let floor = top - WINDOW_IDS;
    (floor > 0).then_some(floor)
}

/// Where the next page starts: below the last row of a full page, else below the window
/// read (with what was searched), else nowhere.
fn continuation(
    query: &Query,
    full_page_last: Option<i64>,
    floor: Option<i64>,
    top: Option<i64>,
) -> (Option<String>, String) {
    match (full_page_last, floor) {
        (Some(last), _) => (Some(next_page(query, last.to_string())), String::new()),
        (None, Some(floor)) => (
            Some(next_page(query, (floor + 1).to_string())),
            format!(
                "Searched ids {} to {}: a page reads at most {WINDOW_IDS} ids of a closed status.",
                floor + 1,
                top.map_or_else(|| "the newest".to_owned(), |top| (top - 1).to_string())
            ),
        ),
        (None, None) => (None, String::new()),
    }
}

async fn receipts(console: &Console, context: &Context, query: &Query) -> Page {
    let (mut filter, form, narrowed) = receipt_filter(console, query)?;
    let by_event_id = query.get("event_id").is_some();
    let (mut floor, mut top) = (None, None);
    if filter.status == ReceiptStatus::Done && !by_event_id {
        let newest = console
            .db(async |connection| Ok(admin::newest_receipt_id(connection).await?))
            .await?;
        top = filter
            .before_id
            .map(|id| id.0)
            .or(newest.map(|id| id.0 + 1));
        floor = window_floor(filter.before_id.map(|id| id.0), newest.map(|id| id.0));
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
                .db(async |connection| {
                    Ok(admin::list_receipts(connection, &filter, PAGE_ROWS).await?)
                })
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
fn next_page(query: &Query, last_id: String) -> String {
    let mut serializer = form_urlencoded::Serializer::new(String::new());
    for (name, value) in &query.0 {
        if name != "before" {
            serializer.append_pair(name, value);
        }
    }
    serializer.append_pair("before", &last_id);
    serializer.finish()
}

// ---- one receipt ----

#[derive(Debug)]
pub struct Line {
    pub label: &'static str,
    pub value: String,
}

#[derive(Debug)]
pub struct DecisionRow {
    pub at: String,
    pub action: String,
    pub previous_status: String,
    pub by: String,
    /// The database role that recorded it.
    pub role: String,
    pub reason: String,
}

#[derive(Debug)]
pub struct EffectRow {
    pub id: String,
    pub sink: String,
    pub kind: String,
    pub status: String,
    pub attempts: i32,
    pub operation_key: String,
    pub last_error: String,
}

/// A decision the page offers: its action name and what it does, in words.
#[derive(Debug)]
pub struct Offer {
    pub action: &'static str,
    pub label: &'static str,
    pub explains: &'static str,
}

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
                explains: "ends done (ignored) with your reason; never processed",
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

async fn receipt(console: &Console, context: &Context, id: ReceiptId, query: &Query) -> Page {
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
        return Err(Refusal::NotFound(format!("no receipt has id {id}")));
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
                    action: view::text(&decision.action),
                    previous_status: view::text(&decision.previous_status),
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
        },
    ))
}

/// What a redirect after a decision says (`?done=replay`): the action taken, in words.
fn notice(query: &Query) -> String {
    const ACTIONS: [&str; 7] = [
        "replay",
        "close",
        "quarantine",
        "fail",
        "completed",
        "retry",
        "abandon",
    ];
    match query.get("done") {
        Some(action) if ACTIONS.contains(&action) => {
            format!("Done: {action}, recorded in the audit trail below.")
        }
        _ => String::new(),
    }
}

// ---- effects ----

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
) -> Result<(effects::EffectFilter, EffectForm, bool), Refusal> {
    let status = query
        .parsed::<EffectStatus>("status")?
        .unwrap_or(EffectStatus::Review);
    let sinks = selection::sinks_selected(query.get("sink"), query.get("owner"), console.config())
        .map_err(|error| Refusal::BadInput(format!("{error:#}")))?;
    let filter = effects::EffectFilter {
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
pub fn effect_rows(console: &Console, found: &[effects::EffectLine]) -> Vec<EffectListRow> {
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

async fn effects_page(console: &Console, context: &Context, query: &Query) -> Page {
    let (mut filter, form, narrowed) = effect_filter(console, query)?;
    let (mut floor, mut top) = (None, None);
    if EffectStatus::CLOSED.contains(&filter.status) {
        let newest = console
            .db(async |connection| Ok(effects::newest_effect_id(connection).await?))
            .await?;
        top = filter
            .before_id
            .map(|id| id.0)
            .or(newest.map(|id| id.0 + 1));
        floor = window_floor(filter.before_id.map(|id| id.0), newest.map(|id| id.0));
        filter.after_id = floor.map(EffectId);
    }
    let found = console
        .db(async |connection| Ok(effects::list(connection, &filter, PAGE_ROWS).await?))
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

// ---- one effect ----

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
    if effects::Resolution::Completed.allows(status) {
        offers.push(Offer {
            action: "completed",
            label: "Completed",
            explains: "you confirmed with the sink that it happened: never sent again",
        });
    }
    if effects::Resolution::Retry.allows(status) {
        offers.push(Offer {
            action: "retry",
            label: "Retry",
            explains: "sent again now with the same idempotency key (a pending one: due now)",
        });
    }
    if effects::Resolution::Abandon.allows(status) {
        offers.push(Offer {
            action: "abandon",
            label: "Abandon",
            explains: "closed unsent: never sent again",
        });
    }
    offers
}

async fn effect(console: &Console, context: &Context, id: EffectId, query: &Query) -> Page {
    let (line, attempts, resolutions) = console
        .db(async |connection| {
            Ok((
                effects::find(&mut *connection, id).await?,
                effects::attempts(&mut *connection, id).await?,
                effects::resolutions(&mut *connection, id).await?,
            ))
        })
        .await?;
    let Some(line) = line else {
        return Err(Refusal::NotFound(format!("no effect has id {id}")));
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
                    action: view::text(&resolution.action),
                    previous_status: view::text(&resolution.previous_status),
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

// ---- review queue ----

#[derive(Debug)]
pub struct ReviewRow {
    pub subject: String,
    pub owner: String,
    pub status: String,
    pub reason: String,
    pub count: i64,
    pub oldest_link: String,
    pub oldest_id: String,
    pub oldest_at: String,
    pub list_link: String,
}

#[derive(Template)]
#[template(path = "console/review.html")]
pub struct Review {
    pub frame: Frame,
    pub receipts: Vec<ReviewRow>,
    pub effects: Vec<ReviewRow>,
}

async fn review(console: &Console, context: &Context) -> Page {
    let (receipt_groups, effect_groups) = console
        .db(async |connection| {
            Ok((
                admin::receipt_review_groups(&mut *connection, REVIEW_GROUPS).await?,
                admin::effect_review_groups(&mut *connection, REVIEW_GROUPS).await?,
            ))
        })
        .await?;
    let config = console.config();
    let link = |path: &str, pairs: &[(&str, &str)]| {
        let mut serializer = form_urlencoded::Serializer::new(String::new());
        for (name, value) in pairs {
            serializer.append_pair(name, value);
        }
        format!("{path}?{}", serializer.finish())
    };
    Ok(respond::page(
        StatusCode::OK,
        &Review {
            frame: context.frame("Review queue"),
            receipts: receipt_groups
                .iter()
                .map(|group| ReviewRow {
                    subject: view::text(&group.integration),
                    owner: view::text(&integration_owner(config, &group.integration)),
                    status: group.status.to_string(),
                    reason: view::text(&group.reason),
                    count: group.count,
                    oldest_link: format!("/receipts/{}", group.oldest_id),
                    oldest_id: group.oldest_id.to_string(),
                    oldest_at: view::time(group.oldest_at),
                    list_link: link(
                        "/receipts",
                        &[
                            ("status", group.status.as_str()),
                            ("integration", &group.integration),
                        ],
                    ),
                })
                .collect(),
            effects: effect_groups
                .iter()
                .map(|group| ReviewRow {
                    subject: view::text(&group.sink),
                    owner: view::text(&sink_owner(config, &group.sink)),
                    status: group.status.to_string(),
                    reason: view::text(&group.reason),
                    count: group.count,
                    oldest_link: format!("/effects/{}", group.oldest_id),
                    oldest_id: group.oldest_id.to_string(),
                    oldest_at: view::time(group.oldest_at),
                    list_link: link(
                        "/effects",
                        &[("status", group.status.as_str()), ("sink", &group.sink)],
                    ),
                })
                .collect(),
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_of_a_closed_status_reads_a_window_and_continues_below_it() {
        // The newest id is 1,000,000: the first page reads ids above 800,001.
        assert_eq!(
            window_floor(None, Some(1_000_000)),
            Some(1_000_001 - WINDOW_IDS)
        );
        // Below a cursor, the window starts there; near the first id there is none.
        assert_eq!(
            window_floor(Some(500_000), Some(1_000_000)),
            Some(500_000 - WINDOW_IDS)
        );
        assert_eq!(window_floor(Some(150_000), Some(1_000_000)), None);
        assert_eq!(window_floor(None, None), None);
        let query = Query::parse("status=done&type=never.sent&before=500000");
        // A full page continues below its last row.
        let (next, searched) = continuation(&query, Some(499_950), Some(300_000), Some(500_000));
        assert_eq!(
            next.as_deref(),
            Some("status=done&type=never.sent&before=499950")
        );
        assert!(searched.is_empty());
        // A page that ran out at the floor continues below the floor, saying what it read.
        let (next, searched) = continuation(&query, None, Some(300_000), Some(500_000));
        assert_eq!(
            next.as_deref(),
            Some("status=done&type=never.sent&before=300001")
        );
        assert_eq!(
            searched,
            "Searched ids 300001 to 499999: a page reads at most 200000 ids of a closed status."
        );
        assert_eq!(
            continuation(&query, None, None, None),
            (None, String::new())
        );
    }
}
