//! The console's decisions, each a POST in two steps: the first shows exactly what will
//! change (and changes nothing), the second — with `confirm=yes` and the status the
//! person saw — calls the store's one implementation of the decision, the CLI's, with the
//! person's name and reason, then redirects to the changed page. Before a form is read the
//! request must name a person and come from the console's own origin; the form must carry
//! the session's token. Bulk decisions by filter are bounded as in the CLI.

use askama::Template;
use http::header::CONTENT_TYPE;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use inbound_core::keys::{EffectId, ReceiptId};
use inbound_core::states::{EffectAction, EffectStatus, ReceiptAction, ReceiptStatus};
use inbound_runtime::http::Body;
use inbound_store::{admin, effects};

use super::guard::{self, Actor, Forbidden};
use super::pages::{self, Context, EffectListRow, Frame, Problem, Query, ReceiptRow};
use super::{Console, respond, view};

/// The largest form body read.
const MAX_FORM_BYTES: usize = 64 * 1024;
/// How long a form body may take to arrive.
pub const FORM_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
/// The longest reason recorded.
const MAX_REASON_CHARS: usize = 1000;
/// At most this many receipts in one bulk decision (the CLI's `--max` default): one
/// transaction holds them all.
pub const BULK_MAX: i64 = 200;

/// Routes a POST after the person, origin and token checks.
pub async fn post(
    console: &Console,
    context: &Context,
    actor: &Actor,
    session: &str,
    request: Request<Incoming>,
) -> Response<Body> {
    let Some(person) = actor.person() else {
        return refused(context, Forbidden::NoIdentity);
    };
    if let Err(refusal) = guard::same_origin(request.headers(), &console.allowed_origins) {
        return refused(context, refusal);
    }
    let path = request.uri().path().to_owned();
    let form = match read_form(request).await {
        Ok(form) => form,
        Err(refusal) => return refusal.page(context),
    };
    if !console
        .csrf
        .verify(session, person, form.get("csrf").unwrap_or(""))
    {
        return refused(context, Forbidden::BadToken);
    }
    let segments: Vec<&str> = path.split('/').filter(|part| !part.is_empty()).collect();
    // The path a confirmation is sealed for, however the request spelled it.
    let canonical = format!("/{}", segments.join("/"));
    let who = Who {
        person,
        session,
        path: &canonical,
    };
    let decided = match segments.as_slice() {
        ["receipts", "bulk"] => bulk(console, context, &who, &form).await,
        ["effects", "bulk"] => effects_bulk(console, context, &who, &form).await,
        ["receipts", id, "decide"] => match id.parse::<ReceiptId>() {
            Ok(id) => decide_receipt(console, context, &who, id, &form).await,
            Err(_) => Err(Problem::NotFound(format!("no receipt has id {id:?}"))),
        },
        ["effects", id, "resolve"] => match id.parse::<EffectId>() {
            Ok(id) => resolve_effect(console, context, &who, id, &form).await,
            Err(_) => Err(Problem::NotFound(format!("no effect has id {id:?}"))),
        },
        _ => Err(Problem::NotFound("no such decision".to_owned())),
    };
    decided.unwrap_or_else(|refusal| refusal.page(context))
}

fn refused(context: &Context, refusal: Forbidden) -> Response<Body> {
    tracing::warn!(
        ?refusal,
        "a console decision was refused before its form was read"
    );
    pages::problem(context, StatusCode::FORBIDDEN, refusal.explain())
}

/// The form of a POST: `application/x-www-form-urlencoded`, at most [`MAX_FORM_BYTES`],
/// within [`FORM_TIMEOUT`].
async fn read_form(request: Request<Incoming>) -> Result<Query, Problem> {
    let urlencoded = request
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| {
            value
                .to_ascii_lowercase()
                .starts_with("application/x-www-form-urlencoded")
        });
    if !urlencoded {
        return Err(Problem::BadInput(
            "a decision is a form (application/x-www-form-urlencoded)".to_owned(),
        ));
    }
    let body = Limited::new(request.into_body(), MAX_FORM_BYTES);
    let collected = tokio::time::timeout(FORM_TIMEOUT, body.collect())
        .await
        .map_err(|_| Problem::BadInput("the form did not arrive in time".to_owned()))?
        .map_err(|_| {
            Problem::BadInput(format!(
                "the form is over {MAX_FORM_BYTES} bytes or was cut"
            ))
        })?;
    let bytes = collected.to_bytes();
    let text = std::str::from_utf8(&bytes)
        .map_err(|_| Problem::BadInput("the form is not UTF-8".to_owned()))?;
    Query::parse(text)
}

/// Who decides, in which session, on which path: what a confirmation is sealed for.
struct Who<'a> {
    person: &'a str,
    session: &'a str,
    path: &'a str,
}

/// What a confirmation shows and seals: the decision, its reason, the status the person
/// saw, the ids of a bulk decision (empty for one row) and the rows' version.
struct Shown<'a> {
    action: &'a str,
    reason: &'a str,
    expected: &'a str,
    ids: &'a str,
    version: &'a str,
}

impl Shown<'_> {
    /// What the seal covers besides the path and the time: every field shown.
    fn parts(&self) -> [&str; 5] {
        [
            self.action,
            self.reason,
            self.expected,
            self.ids,
            self.version,
        ]
    }
}

/// A confirmation page: what is shown and sealed, the change in words, the rows listed and
/// where "Cancel" goes.
struct Confirmation<'a> {
    shown: Shown<'a>,
    title: String,
    change: String,
    rows: Vec<ReceiptRow>,
    effect_rows: Vec<EffectListRow>,
    back: String,
}

impl Who<'_> {
    /// The confirmation page, sealed for this person, session and path, issued now: its
    /// form posts back to the same path with everything shown and the seal.
    fn confirmation_page(
        &self,
        console: &Console,
        context: &Context,
        confirmation: Confirmation<'_>,
    ) -> Response<Body> {
        let Confirmation {
            shown,
            title,
            change,
            rows,
            effect_rows,
            back,
        } = confirmation;
        let issued = chrono::Utc::now().timestamp().to_string();
        let mut sealed = vec![self.path, issued.as_str()];
        sealed.extend(shown.parts());
        let seal = console.csrf.seal(self.session, self.person, &sealed);
        let fields = [
            ("action", shown.action),
            ("reason", shown.reason),
            ("expected", shown.expected),
            ("ids", shown.ids),
            ("version", shown.version),
            ("confirm", "yes"),
            ("issued", &issued),
            ("seal", &seal),
        ];
        respond::page(
            StatusCode::OK,
            &Confirm {
                frame: context.frame(title),
                action_path: self.path.to_owned(),
                changes: vec![
                    change,
                    format!(
                        "Recorded as {} by {} because: {}",
                        shown.action,
                        view::text(self.person),
                        view::text(shown.reason)
                    ),
                ],
                rows,
                effect_rows,
                hidden: fields
                    .iter()
                    .filter(|(_, value)| !value.is_empty())
                    .map(|(name, value)| Hidden {
                        name: (*name).to_owned(),
                        value: (*value).to_owned(),
                    })
                    .collect(),
                back,
            },
        )
    }

    /// What the posted confirmation shows, once its seal is checked: refused when its
    /// fields are not the ones the console showed and sealed, or when it was issued more
    /// than [`CONFIRMATION_LIFETIME_SECS`] ago.
    fn confirmed<'f>(
        &self,
        console: &Console,
        form: &'f Query,
        action: &'f str,
        reason: &'f str,
    ) -> Result<Shown<'f>, Problem> {
        let shown = Shown {
            action,
            reason,
            expected: form.get("expected").unwrap_or(""),
            ids: form.get("ids").unwrap_or(""),
            version: form.get("version").unwrap_or(""),
        };
        let issued = form.get("issued").unwrap_or("");
        let mut sealed = vec![self.path, issued];
        sealed.extend(shown.parts());
        let seal = form.get("seal").unwrap_or("");
        if !console
            .csrf
            .verify_seal(self.session, self.person, &sealed, seal)
        {
            return Err(Problem::BadInput(
                "not a confirmation this console showed (an old page, or one changed since): look again and decide on what is there".to_owned(),
            ));
        }
        let issued = issued.parse::<i64>().unwrap_or(0);
        if !fresh(issued, chrono::Utc::now().timestamp()) {
            return Err(Problem::BadInput(format!(
                "this confirmation is more than {} minutes old: look again and decide on what is there",
                CONFIRMATION_LIFETIME_SECS / 60
            )));
        }
        Ok(shown)
    }
}

/// How long a confirmation may be acted on.
const CONFIRMATION_LIFETIME_SECS: i64 = 15 * 60;

/// Whether a confirmation issued at `issued` may still be acted on at `now` (Unix seconds).
fn fresh(issued: i64, now: i64) -> bool {
    (0..=CONFIRMATION_LIFETIME_SECS).contains(&(now - issued))
}

/// One digest of many rows' versions (a bulk confirmation seals it, not the list).
fn digest(versions: &[String]) -> String {
    use sha2::Digest;
    let mut hasher = sha2::Sha256::new();
    for version in versions {
        hasher.update(version.as_bytes());
        hasher.update(b"\n");
    }
    hex::encode(hasher.finalize())
}

/// The reason a decision records: required, at most [`MAX_REASON_CHARS`].
fn reason(form: &Query) -> Result<String, Problem> {
    match form.get("reason") {
        Some(reason) if reason.chars().any(char::is_control) => Err(Problem::BadInput(
            "a reason is one line of printable text".to_owned(),
        )),
        Some(reason) if reason.chars().count() <= MAX_REASON_CHARS => Ok(reason.to_owned()),
        Some(_) => Err(Problem::BadInput(format!(
            "a reason is at most {MAX_REASON_CHARS} characters"
        ))),
        None => Err(Problem::BadInput(
            "say why: a decision needs a reason, recorded with your name".to_owned(),
        )),
    }
}

/// The status the person saw, which must still hold when the decision is taken.
fn expected<T: std::str::FromStr>(shown: &Shown<'_>) -> Result<T, Problem> {
    shown
        .expected
        .parse()
        .map_err(|_| Problem::BadInput("the form does not say which status you saw".to_owned()))
}

fn confirmed(form: &Query) -> bool {
    form.get("confirm") == Some("yes")
}

/// A hidden form field the confirmation repeats.
#[derive(Debug)]
pub struct Hidden {
    pub name: String,
    pub value: String,
}

/// The confirmation step: what will change, and the form that does it.
#[derive(Template)]
#[template(path = "console/confirm.html")]
pub struct Confirm {
    pub frame: Frame,
    pub action_path: String,
    pub changes: Vec<String>,
    pub rows: Vec<ReceiptRow>,
    pub effect_rows: Vec<EffectListRow>,
    pub hidden: Vec<Hidden>,
    pub back: String,
}

/// The decision a form names.
fn receipt_action(form: &Query) -> Result<ReceiptAction, Problem> {
    let action = form.get("action").unwrap_or("");
    action
        .parse()
        .map_err(|_| Problem::BadInput(format!("{action:?} is not a decision about a receipt")))
}

/// How a receipt decision reads to the person.
fn receipt_change(action: ReceiptAction, status: ReceiptStatus) -> Result<&'static str, Problem> {
    use ReceiptAction::{Close, Fail, Quarantine, Replay};
    use ReceiptStatus::{Failed, Pending, Quarantined};
    Ok(match (action, status) {
        (Replay, Failed | Quarantined) => "goes back to pending: queued again now, attempts reset",
        (Replay, Pending) => "is made due now if it waits out a retry delay (attempts kept)",
        (Close, Failed | Quarantined) => {
            "ends done (closed) with your reason: never processed; a redelivery stays a duplicate"
        }
        (Quarantine, Pending) => {
            "leaves the queue as quarantined until a person replays or closes it"
        }
        (Fail, Pending) => "leaves the queue as failed, your reason as its error",
        _ => {
            return Err(Problem::BadInput(format!(
                "a {status} receipt cannot be sent to {action}"
            )));
        }
    })
}

/// Takes `action` on `ids` (each still `expected`, for a replay or a close) in one
/// transaction, or on none.
async fn take_receipt_decision(
    connection: &mut sqlx::PgConnection,
    action: ReceiptAction,
    ids: &[ReceiptId],
    expected: ReceiptStatus,
    person: &str,
    reason: &str,
) -> Result<(), Problem> {
    let resolution = match action {
        ReceiptAction::Replay => {
            admin::replay(connection, ids, Some(expected), person, reason).await?;
            return Ok(());
        }
        ReceiptAction::Close => {
            admin::close(connection, ids, Some(expected), person, reason).await?;
            return Ok(());
        }
        ReceiptAction::Quarantine => admin::PendingResolution::Quarantine,
        ReceiptAction::Fail => admin::PendingResolution::Fail,
    };
    admin::resolve_pending(connection, ids, resolution, person, reason).await?;
    Ok(())
}

/// A receipt as the person saw it: its status, attempts, when it finished and how many
/// decisions its audit trail holds. A confirmation is for this version only.
async fn receipt_version(
    console: &Console,
    id: ReceiptId,
) -> Result<(admin::ReceiptDetail, String), Problem> {
    let (detail, decisions) = console
        .db(async |connection| {
            Ok((
                admin::receipt_facts(&mut *connection, id).await?,
                admin::receipt_history(&mut *connection, id).await?.len(),
            ))
        })
        .await?;
    let detail = detail.ok_or_else(|| Problem::NotFound(format!("no receipt has id {id}")))?;
    let version = format!(
        "{}/{}/{:?}/{decisions}",
        detail.status, detail.attempts, detail.finished_at
    );
    Ok((detail, version))
}

/// 409 for a row that is not the one the person confirmed.
fn changed_since(what: String) -> Result<Response<Body>, Problem> {
    Err(Problem::Conflict(format!(
        "{what} changed since the confirmation: look again and decide on what is there; nothing was changed"
    )))
}

async fn decide_receipt(
    console: &Console,
    context: &Context,
    who: &Who<'_>,
    id: ReceiptId,
    form: &Query,
) -> Result<Response<Body>, Problem> {
    let action = receipt_action(form)?;
    let reason = reason(form)?;
    if !confirmed(form) {
        let (detail, version) = receipt_version(console, id).await?;
        let change = receipt_change(action, detail.status)?;
        let status = detail.status.as_str();
        return Ok(who.confirmation_page(
            console,
            context,
            Confirmation {
                shown: Shown {
                    action: action.as_str(),
                    reason: &reason,
                    expected: status,
                    ids: "",
                    version: &version,
                },
                title: format!("Confirm: {action} receipt {id}"),
                change: format!(
                    "Receipt {id} ({}, event {}) is {status} and {change}.",
                    view::text(&detail.integration),
                    view::text(&detail.event_id)
                ),
                rows: Vec::new(),
                effect_rows: Vec::new(),
                back: format!("/receipts/{id}"),
            },
        ));
    }
    let shown = who.confirmed(console, form, action.as_str(), &reason)?;
    let expected: ReceiptStatus = expected(&shown)?;
    receipt_change(action, expected)?;
    // The row as the person saw it, or refused: a status that left and came back (a
    // replay that failed again) is another receipt to decide about.
    let (_, version) = receipt_version(console, id).await?;
    if version != shown.version {
        return changed_since(format!("receipt {id}"));
    }
    let person = who.person;
    console
        .decide(async |connection| {
            take_receipt_decision(connection, action, &[id], expected, person, &reason).await
        })
        .await?;
    tracing::info!(person, %action, receipt = %id, "an operator decided in the console");
    Ok(respond::see_other(&format!("/receipts/{id}?done={action}")))
}

/// An effect as the person saw it: its status, attempts and how many resolutions.
async fn effect_version(
    console: &Console,
    id: EffectId,
) -> Result<(effects::EffectLine, String), Problem> {
    let (line, resolutions) = console
        .db(async |connection| {
            Ok((
                effects::find(&mut *connection, id).await?,
                effects::resolutions(&mut *connection, id).await?.len(),
            ))
        })
        .await?;
    let line = line.ok_or_else(|| Problem::NotFound(format!("no effect has id {id}")))?;
    let version = format!("{}/{}/{resolutions}", line.status, line.attempts);
    Ok((line, version))
}

async fn resolve_effect(
    console: &Console,
    context: &Context,
    who: &Who<'_>,
    id: EffectId,
    form: &Query,
) -> Result<Response<Body>, Problem> {
    let action = form.get("action").unwrap_or("").to_owned();
    let resolution: EffectAction = action
        .parse()
        .map_err(|_| Problem::BadInput(format!("{action:?} is not a resolution of an effect")))?;
    let note = reason(form)?;
    if !confirmed(form) {
        let (line, version) = effect_version(console, id).await?;
        if !resolution.allows(line.status) {
            return Err(Problem::BadInput(format!(
                "a {} effect cannot be resolved as {action}",
                line.status
            )));
        }
        let change = effect_change(resolution, line.status, Some(&line.operation_key));
        let status = line.status.as_str();
        return Ok(who.confirmation_page(
            console,
            context,
            Confirmation {
                shown: Shown {
                    action: &action,
                    reason: &note,
                    expected: status,
                    ids: "",
                    version: &version,
                },
                title: format!("Confirm: {action} effect {id}"),
                change: format!(
                    "Effect {id} (sink {}, {}) is {status} and {change}.",
                    view::text(&line.sink),
                    view::text(&line.kind)
                ),
                rows: Vec::new(),
                effect_rows: Vec::new(),
                back: format!("/effects/{id}"),
            },
        ));
    }
    let shown = who.confirmed(console, form, &action, &note)?;
    let expected: EffectStatus = expected(&shown)?;
    let (_, version) = effect_version(console, id).await?;
    if version != shown.version {
        return changed_since(format!("effect {id}"));
    }
    let person = who.person;
    console
        .decide(async |connection| {
            effects::resolve(connection, id, resolution, Some(expected), person, &note).await
        })
        .await?;
    tracing::info!(person, action, effect = %id, "an operator decided in the console");
    Ok(respond::see_other(&format!("/effects/{id}?done={action}")))
}

/// Replays or closes the failed or quarantined receipts a narrowed filter selects: the
/// first step lists them (at most [`BULK_MAX`]) and seals exactly those ids with the
/// status listed; the second decides about those ids, each still in that status.
async fn bulk(
    console: &Console,
    context: &Context,
    who: &Who<'_>,
    form: &Query,
) -> Result<Response<Body>, Problem> {
    let action = receipt_action(form)?;
    if !matches!(action, ReceiptAction::Replay | ReceiptAction::Close) {
        return Err(Problem::BadInput(format!(
            "{action}: receipts are replayed or closed by filter"
        )));
    }
    let reason = reason(form)?;
    if confirmed(form) {
        return bulk_confirmed(console, who, form, action, &reason).await;
    }
    let (mut filter, _, narrowed) = pages::receipt_filter(console, form)?;
    if !ReceiptStatus::NEEDS_A_PERSON.contains(&filter.status) || !narrowed {
        return Err(Problem::BadInput(
            "a decision by filter takes failed or quarantined receipts and a narrowing filter (integration, owner, type, since or until)".to_owned(),
        ));
    }
    let status = filter.status;
    filter.before_id = None;
    let selected = console
        .db(async |connection| admin::list_receipts(connection, &filter, BULK_MAX).await)
        .await?;
    if selected.is_empty() {
        return Err(Problem::BadInput(format!(
            "the filter selects no receipt: nothing to {action}"
        )));
    }
    let change = receipt_change(action, status)?;
    let listed: Vec<ReceiptId> = selected.iter().map(|row| row.id).collect();
    let (ids, capped) = bulk_selection(&listed);
    let versions = console
        .db(async |connection| admin::receipt_versions(connection, &listed).await)
        .await?;
    let version = digest(&versions);
    Ok(who.confirmation_page(
        console,
        context,
        Confirmation {
            shown: Shown {
                action: action.as_str(),
                reason: &reason,
                expected: status.as_str(),
                ids: &ids,
                version: &version,
            },
            title: format!("Confirm: {action} {} receipts", selected.len()),
            change: format!(
                "These {} {status} receipts{capped}: each {change}. Any that is no longer {status} stops the whole decision.",
                selected.len()
            ),
            rows: pages::receipt_rows(console, &selected),
            effect_rows: Vec::new(),
            back: "/receipts".to_owned(),
        },
    ))
}

/// What a bulk confirmation seals of its selection, the ids comma-separated, and, when
/// the selection filled the cap, the note that the rest need another decision.
fn bulk_selection<T: std::fmt::Display>(listed: &[T]) -> (String, String) {
    let ids: Vec<String> = listed.iter().map(ToString::to_string).collect();
    let capped = if ids.len() as i64 == BULK_MAX {
        format!(" (at most {BULK_MAX} at a time: decide again for the rest)")
    } else {
        String::new()
    };
    (ids.join(","), capped)
}

/// The second step of [`bulk`]: exactly the sealed ids, each still in the sealed status.
async fn bulk_confirmed(
    console: &Console,
    who: &Who<'_>,
    form: &Query,
    action: ReceiptAction,
    reason: &str,
) -> Result<Response<Body>, Problem> {
    let shown = who.confirmed(console, form, action.as_str(), reason)?;
    let expected: ReceiptStatus = expected(&shown)?;
    let ids: Vec<ReceiptId> = shown
        .ids
        .split(',')
        .map(|id| id.trim().parse::<ReceiptId>())
        .collect::<Result<_, _>>()
        .map_err(|_| Problem::BadInput("the confirmed ids are not receipt ids".to_owned()))?;
    let ids = inbound_store::in_lock_order(&ids);
    // Each as listed, or none: one replayed and failed again since is another receipt.
    let versions = console
        .db(async |connection| admin::receipt_versions(connection, &ids).await)
        .await?;
    if digest(&versions) != shown.version {
        return changed_since("one of these receipts".to_owned());
    }
    let person = who.person;
    console
        .decide(async |connection| {
            take_receipt_decision(connection, action, &ids, expected, person, reason).await
        })
        .await?;
    tracing::info!(
        person,
        %action,
        receipts = ids.len(),
        "an operator decided in the console by filter"
    );
    let mut back = form_urlencoded::Serializer::new(String::new());
    back.append_pair("status", expected.as_str());
    Ok(respond::see_other(&format!("/receipts?{}", back.finish())))
}

/// How an effect resolution reads to the person, from the status it leaves (and the
/// operation key a resend carries, for one effect).
fn effect_change(
    resolution: EffectAction,
    status: EffectStatus,
    operation_key: Option<&str>,
) -> String {
    match (resolution, status) {
        (EffectAction::Complete, _) => "becomes completed: never sent again".to_owned(),
        (EffectAction::Retry, EffectStatus::Pending) => {
            "is made due now (its history unchanged)".to_owned()
        }
        (EffectAction::Retry, _) => format!(
            "goes back to pending and is sent again with the same idempotency key{}; what an earlier attempt may have done no longer holds it back",
            operation_key.map_or_else(String::new, |key| format!(" ({})", view::text(key)))
        ),
        (EffectAction::Abandon, _) => "becomes abandoned: never sent".to_owned(),
    }
}

/// Resolves the effects a narrowed filter selects (completed, retry or abandon, as its
/// status allows): the first step lists them (at most [`BULK_MAX`]) and seals exactly
/// those ids with the status listed; the second resolves those ids in one transaction,
/// each still in that status ([`effects::resolve_all`], the CLI's).
async fn effects_bulk(
    console: &Console,
    context: &Context,
    who: &Who<'_>,
    form: &Query,
) -> Result<Response<Body>, Problem> {
    let action = form.get("action").unwrap_or("").to_owned();
    let resolution: EffectAction = action
        .parse()
        .map_err(|_| Problem::BadInput(format!("{action:?} is not a resolution of an effect")))?;
    let note = reason(form)?;
    if confirmed(form) {
        let shown = who.confirmed(console, form, &action, &note)?;
        let expected: EffectStatus = expected(&shown)?;
        let ids: Vec<EffectId> = shown
            .ids
            .split(',')
            .map(|id| id.trim().parse::<EffectId>())
            .collect::<Result<_, _>>()
            .map_err(|_| Problem::BadInput("the confirmed ids are not effect ids".to_owned()))?;
        // Each as listed (a claim or a resolution since takes a new lease token), or none.
        let mut in_order = ids.clone();
        in_order.sort();
        let versions = console
            .db(async |connection| effects::versions(connection, &in_order).await)
            .await?;
        if digest(&versions) != shown.version {
            return changed_since("one of these effects".to_owned());
        }
        let person = who.person;
        console
            .decide(async |connection| {
                effects::resolve_all(connection, &ids, resolution, Some(expected), person, &note)
                    .await
            })
            .await?;
        tracing::info!(
            person,
            action,
            effects = ids.len(),
            "an operator decided in the console by filter"
        );
        let mut back = form_urlencoded::Serializer::new(String::new());
        back.append_pair("status", expected.as_str());
        return Ok(respond::see_other(&format!("/effects?{}", back.finish())));
    }
    let (mut filter, _, narrowed) = pages::effect_filter(console, form)?;
    if !narrowed || !resolution.allows(filter.status) {
        return Err(Problem::BadInput(format!(
            "a resolution by filter takes effects it applies to and a narrowing filter (sink, owner, since or until); {action} does not apply to {}",
            filter.status
        )));
    }
    let status = filter.status;
    filter.before_id = None;
    let selected = console
        .db(async |connection| effects::list(connection, &filter, BULK_MAX).await)
        .await?;
    if selected.is_empty() {
        return Err(Problem::BadInput(format!(
            "the filter selects no effect: nothing to {action}"
        )));
    }
    let change = effect_change(resolution, status, None);
    let listed: Vec<EffectId> = selected.iter().map(|line| line.id).collect();
    let (ids, capped) = bulk_selection(&listed);
    let versions = console
        .db(async |connection| effects::versions(connection, &listed).await)
        .await?;
    let version = digest(&versions);
    Ok(who.confirmation_page(
        console,
        context,
        Confirmation {
            shown: Shown {
                action: &action,
                reason: &note,
                expected: status.as_str(),
                ids: &ids,
                version: &version,
            },
            title: format!("Confirm: {action} {} effects", selected.len()),
            change: format!(
                "These {} {status} effects{capped}: each {change}. Any that is no longer {status} stops the whole decision.",
                selected.len()
            ),
            rows: Vec::new(),
            effect_rows: pages::effect_rows(console, &selected),
            back: "/effects".to_owned(),
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_confirmation_lives_fifteen_minutes() {
        let issued = 1_800_000_000;
        assert!(fresh(issued, issued));
        assert!(fresh(issued, issued + 15 * 60));
        assert!(!fresh(issued, issued + 15 * 60 + 1));
        assert!(!fresh(issued, issued - 1), "issued in the future");
        assert!(!fresh(0, issued), "no issue time");
    }
}
