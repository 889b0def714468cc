//! The console's pages (GET changes nothing), a module each: [`overview`], [`receipts`]
//! (by filter, and one receipt), [`effects`] (by filter, and one effect) and [`review`]
//! (the queue of what needs a person). Each reads the store as `inboundctl` does, within
//! the console's database limit, and renders a checked template whose every value is
//! escaped. Here: the routing, the page frame, what a refusal shows, the query string, and
//! what the receipt and effect pages share.

use askama::Template;
use http::{Response, StatusCode};
use inbound_core::keys::{EffectId, ReceiptId};
use inbound_core::states::{EffectAction, EffectStatus, ReceiptStatus};
use inbound_runtime::http::Body;
use inbound_store::{admin, effects as store_effects};

use super::guard::Actor;
use super::{Console, respond, view};

mod effects;
mod overview;
mod receipts;
mod review;
mod subjects;

pub use effects::*;
use inbound_core::selection::{self, integration_owner, sink_owner};
pub use receipts::*;

/// Rows per page of a listing.
pub const PAGE_ROWS: i64 = 50;
/// Groups the review queue shows of each kind.
const REVIEW_GROUPS: i64 = 100;
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
pub struct ProblemPage {
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
        &ProblemPage {
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
    let query = match Query::parse(query) {
        Ok(query) => query,
        Err(refusal) => return refusal.page(context),
    };
    let page = match segments {
        [] => overview::overview(console, context).await,
        ["static", "console.css"] => return respond::stylesheet(),
        ["receipts"] => receipts::receipts(console, context, &query).await,
        ["receipts", id] => match id.parse::<ReceiptId>() {
            Ok(id) => receipts::receipt(console, context, id, &query).await,
            Err(_) => Err(Problem::NotFound(format!("no receipt has id {id:?}"))),
        },
        ["effects"] => effects::effects_page(console, context, &query).await,
        ["effects", id] => match id.parse::<EffectId>() {
            Ok(id) => effects::effect(console, context, id, &query).await,
            Err(_) => Err(Problem::NotFound(format!("no effect has id {id:?}"))),
        },
        ["review"] => review::review(console, context).await,
        ["subject"] => subjects::subject(console, context, &query).await,
        _ => Err(Problem::NotFound("no such page".to_owned())),
    };
    page.unwrap_or_else(|refusal| refusal.page(context))
}

/// Why a page is not shown: one kind of problem per answer, so a bad input or a missing
/// row is never reported as the database failing.
#[derive(Debug)]
pub enum Problem {
    /// A bad filter or form value: 400 with what is wrong.
    BadInput(String),
    /// No such page or id: 404.
    NotFound(String),
    /// A decision the row's state no longer allows (moved since its confirmation): 409.
    Conflict(String),
    /// The database failed or did not answer: 503. Only a `sqlx::Error` is one.
    Database(sqlx::Error),
}

impl Problem {
    pub fn page(self, context: &Context) -> Response<Body> {
        match self {
            Self::BadInput(message) => problem(context, StatusCode::BAD_REQUEST, message),
            Self::NotFound(message) => problem(context, StatusCode::NOT_FOUND, message),
            Self::Conflict(message) => problem(context, StatusCode::CONFLICT, message),
            Self::Database(error) => {
                // The details (host names, statements) stay in the log.
                tracing::warn!(%error, "a console page failed");
                problem(
                    context,
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the database failed or did not answer in time; the console's log says why",
                )
            }
        }
    }
}

impl From<sqlx::Error> for Problem {
    fn from(error: sqlx::Error) -> Self {
        Self::Database(error)
    }
}

impl From<admin::ReplayError> for Problem {
    fn from(error: admin::ReplayError) -> Self {
        match error {
            admin::ReplayError::Database(error) => Self::Database(error),
            admin::ReplayError::Unknown(_) => Self::NotFound(error.to_string()),
            refused => Self::Conflict(refused.to_string()),
        }
    }
}

impl From<admin::ReceiptResolveError> for Problem {
    fn from(error: admin::ReceiptResolveError) -> Self {
        match error {
            admin::ReceiptResolveError::Database(error) => Self::Database(error),
            admin::ReceiptResolveError::Unknown(_) => Self::NotFound(error.to_string()),
            refused => Self::Conflict(refused.to_string()),
        }
    }
}

impl From<store_effects::EffectResolveError> for Problem {
    fn from(error: store_effects::EffectResolveError) -> Self {
        match error {
            store_effects::EffectResolveError::Database(error) => Self::Database(error),
            store_effects::EffectResolveError::Unknown(_) => Self::NotFound(error.to_string()),
            refused => Self::Conflict(refused.to_string()),
        }
    }
}

type Page = Result<Response<Body>, Problem>;

/// A query string's fields (the first of each name; empty values are absent).
#[derive(Debug, Default)]
pub struct Query(Vec<(String, String)>);

impl Query {
    /// The fields of a query string or form. A NUL is refused here, as a bad input: no
    /// stored text holds one, and PostgreSQL would refuse the statement it reached (which
    /// the page would report as the database failing).
    pub fn parse(query: &str) -> Result<Self, Problem> {
        let fields: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes())
            .into_owned()
            .filter(|(_, value)| !value.trim().is_empty())
            .collect();
        if let Some((name, _)) = fields
            .iter()
            .find(|(name, value)| name.contains('\0') || value.contains('\0'))
        {
            return Err(Problem::BadInput(format!(
                "{}: contains a NUL character, which no stored text holds",
                name.replace('\0', "\\0")
            )));
        }
        Ok(Self(fields))
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.trim())
    }

    fn time(&self, name: &str) -> Result<Option<chrono::DateTime<chrono::Utc>>, Problem> {
        self.get(name)
            .map(|text| {
                selection::parse_time(text)
                    .map_err(|error| Problem::BadInput(format!("{name}: {error}")))
            })
            .transpose()
    }

    fn parsed<T: std::str::FromStr>(&self, name: &str) -> Result<Option<T>, Problem> {
        self.get(name)
            .map(|text| {
                text.parse::<T>()
                    .map_err(|_| Problem::BadInput(format!("{name}: {text:?} is not valid here")))
            })
            .transpose()
    }
}

// ---- what the receipt and effect pages share ----

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

/// How many ids of a closed status a page reads at most: `done` receipts and closed
/// effects grow with retention, and a selective filter over them would read until it found
/// a page; a window bounds each page's read, and "older" continues below it.
const WINDOW_IDS: i64 = 200_000;

/// Ids of one day: an id is its day times this, plus a serial (migrations/0001_inbound.sql).
const IDS_PER_DAY: i64 = 10_000_000_000;

/// The window a page of a closed status reads, from `highest`, the highest id below the
/// page's cursor (or the newest): the ids above the returned one, at most
/// [`WINDOW_IDS`] of them and never below `highest`'s day (ids jump between days; the
/// next window starts at the previous day's last id). `None` when the window reaches the
/// first id.
fn window_floor(highest: Option<i64>) -> Option<i64> {
    let highest = highest?;
    let day_start = highest - highest.rem_euclid(IDS_PER_DAY);
    let floor = (highest + 1 - WINDOW_IDS).max(day_start - 1);
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
