//! A local server with the shape of Stripe's API as `inboundctl stripe backfill` reads it.
//! Never the real service; each answer follows Stripe's documented shape:
//!
//! - `GET /v1/events`: bearer authentication, `created[gte]`/`created[lt]`, `limit`, the
//!   `starting_after` cursor over events kept newest first, `has_more`. On behalf of a
//!   connected account (`Stripe-Account`) it lists that account's events only, without
//!   their `account` field (the platform's view of them carries it); else the key's own.
//! - `GET /v2/core/events`: thin events, `created[gte]`/`created[lt]` as RFC 3339
//!   instants, `limit`, and a relative `next_page_url` to follow; `Stripe-Context` for a
//!   connected account.
//! - `GET /v1/accounts`: the platform's connected accounts, paged like events.
//! - `GET /v1/account`: a secret key gets the account; a restricted key gets Stripe's 403
//!   permission error naming the key's account (stripe/stripe-node#2246), or — when asked —
//!   one that names none (singer-io/tap-stripe#38).
//! - Stripe's error body on a bad key, and — when asked — a 429 with `Retry-After`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response};
use serde_json::{Value, json};

use crate::local_server::{json_response, serve};

/// The restricted key the server accepts.
pub const API_KEY: &str = "rk_live_backfill_1f2e";
/// The secret key the server accepts.
pub const SECRET_KEY: &str = "sk_live_backfill_9c3a";
/// The account both keys belong to.
pub const PLATFORM_ACCOUNT: &str = "acct_platform";

#[derive(Default)]
struct State {
    /// Newest first, as Stripe lists them.
    events: Vec<Value>,
    /// Connected accounts, in listing order.
    accounts: Vec<String>,
    rate_limit_next: u32,
    /// The restricted key's permission error names no account.
    unnamed_permission_error: bool,
    requests: Vec<String>,
}

/// A running fake Stripe API.
pub struct StripeApi {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
}

impl StripeApi {
    /// Starts the server with `events` (any order; listed newest first by `created`):
    /// snapshot events belong to their `account` (the platform's when absent), thin
    /// events (`object` = `v2.core.event`) to their `context`.
    pub async fn start(mut events: Vec<Value>) -> Self {
        events.sort_by_key(|event| std::cmp::Reverse(created_millis(event)));
        let state = Arc::new(Mutex::new(State {
            events,
            ..State::default()
        }));
        let served = Arc::clone(&state);
        let addr = serve(move |_, request| answer(&served, request)).await;
        Self { addr, state }
    }

    /// The base URL (`--api-base`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The platform's connected accounts.
    pub fn connect_accounts(&self, accounts: &[&str]) {
        self.state.lock().expect("state").accounts = accounts
            .iter()
            .map(|account| (*account).to_owned())
            .collect();
    }

    /// The next `count` requests are answered 429 with `Retry-After: 1`.
    pub fn rate_limit_next(&self, count: u32) {
        self.state.lock().expect("state").rate_limit_next = count;
    }

    /// A restricted key's refusal of `GET /v1/account` names no account from now on.
    pub fn name_no_account_in_permission_errors(&self) {
        self.state.lock().expect("state").unnamed_permission_error = true;
    }

    /// `path?query` of the requests received, in order.
    pub fn requests(&self) -> Vec<String> {
        self.state.lock().expect("state").requests.clone()
    }
}

/// An event's `created` in milliseconds: Unix seconds (v1) or RFC 3339 (v2).
fn created_millis(event: &Value) -> i64 {
    match &event["created"] {
        Value::Number(seconds) => seconds.as_i64().unwrap_or(0) * 1000,
        Value::String(instant) => chrono::DateTime::parse_from_rfc3339(instant)
            .map(|instant| instant.timestamp_millis())
            .unwrap_or(0),
        _ => 0,
    }
}

fn is_thin(event: &Value) -> bool {
    event["object"] == "v2.core.event"
}

/// Whose event it is.
fn owner(event: &Value) -> &str {
    let field = if is_thin(event) { "context" } else { "account" };
    event[field].as_str().unwrap_or(PLATFORM_ACCOUNT)
}

fn error(status: u16, kind: &str, message: &str) -> Response<Full<Bytes>> {
    json_response(
        status,
        &json!({"error": {"type": kind, "message": message}}),
    )
}

fn answer<B>(state: &Mutex<State>, request: &Request<B>) -> Response<Full<Bytes>> {
    let mut state = state.lock().expect("state");
    let query = request.uri().query().unwrap_or_default().to_owned();
    let path = request.uri().path().to_owned();
    state.requests.push(format!("{path}?{query}"));
    let header = |name: &str| {
        request
            .headers()
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
    };
    let key = header("authorization")
        .and_then(|value| value.strip_prefix("Bearer ").map(str::to_owned))
        .filter(|key| key == API_KEY || key == SECRET_KEY);
    let Some(key) = key else {
        return error(
            401,
            "invalid_request_error",
            "Invalid API Key provided: rk_test_****",
        );
    };
    if state.rate_limit_next > 0 {
        state.rate_limit_next -= 1;
        let mut response = error(429, "rate_limit_error", "Too many requests");
        response
            .headers_mut()
            .insert("retry-after", "1".parse().expect("header"));
        return response;
    }
    let params: HashMap<String, String> = query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(key, value)| {
            (
                urlencoding::decode(key).expect("utf-8").into_owned(),
                urlencoding::decode(value).expect("utf-8").into_owned(),
            )
        })
        .collect();
    let limit = params
        .get("limit")
        .and_then(|value| value.parse::<usize>().ok())
        .unwrap_or(10)
        .clamp(1, 100);
    match path.as_str() {
        "/v1/account" => {
            if key == SECRET_KEY {
                let account = header("stripe-account").unwrap_or(PLATFORM_ACCOUNT.to_owned());
                return json_response(200, &json!({"id": account, "object": "account"}));
            }
            let on = if state.unnamed_permission_error {
                " on account".to_owned()
            } else {
                format!(" on account '{PLATFORM_ACCOUNT}'")
            };
            error(
                403,
                "invalid_request_error",
                &format!(
                    "The provided key 'rk_live_***1f2e' does not have the required permissions for this endpoint{on}. This is a restricted API key, but the required permissions are not available for use by restricted keys."
                ),
            )
        }
        "/v1/accounts" => {
            let accounts: Vec<Value> = state
                .accounts
                .iter()
                .map(|id| json!({"id": id, "object": "account"}))
                .collect();
            v1_list(&accounts, &params, limit, "/v1/accounts")
        }
        "/v1/events" => {
            let acting = header("stripe-account");
            let number = |name: &str| params.get(name).and_then(|value| value.parse::<i64>().ok());
            let listed: Vec<Value> = state
                .events
                .iter()
                .filter(|event| !is_thin(event))
                .filter(|event| owner(event) == acting.as_deref().unwrap_or(PLATFORM_ACCOUNT))
                .filter(|event| {
                    let created = event["created"].as_i64().unwrap_or(0);
                    number("created[gte]").is_none_or(|gte| created >= gte)
                        && number("created[lt]").is_none_or(|lt| created < lt)
                })
                .map(|event| {
                    let mut event = event.clone();
                    if acting.is_some() {
                        event.as_object_mut().expect("object").remove("account");
                    }
                    event
                })
                .collect();
            v1_list(&listed, &params, limit, "/v1/events")
        }
        "/v2/core/events" => {
            let acting = header("stripe-context");
            let instant = |name: &str| {
                params.get(name).map(|value| {
                    chrono::DateTime::parse_from_rfc3339(value)
                        .expect("an RFC 3339 created filter")
                        .timestamp_millis()
                })
            };
            let (gte, lt) = (instant("created[gte]"), instant("created[lt]"));
            let listed: Vec<&Value> = state
                .events
                .iter()
                .filter(|event| is_thin(event))
                .filter(|event| owner(event) == acting.as_deref().unwrap_or(PLATFORM_ACCOUNT))
                .filter(|event| {
                    let created = created_millis(event);
                    gte.is_none_or(|gte| created >= gte) && lt.is_none_or(|lt| created < lt)
                })
                .collect();
            let start: usize = params.get("page").map_or(0, |page| {
                page.parse().expect("a page token this server made")
            });
            let page: Vec<&Value> = listed.iter().skip(start).take(limit).copied().collect();
            let end = start + page.len();
            // The next page's URL carries the filters, as Stripe's opaque token does.
            let next = (end < listed.len()).then(|| {
                let mut next = format!("/v2/core/events?limit={limit}&page={end}");
                for name in ["created[gte]", "created[lt]"] {
                    if let Some(value) = params.get(name) {
                        next.push_str(&format!(
                            "&{}={}",
                            urlencoding::encode(name),
                            urlencoding::encode(value)
                        ));
                    }
                }
                next
            });
            json_response(
                200,
                &json!({"data": page, "next_page_url": next, "previous_page_url": null}),
            )
        }
        _ => error(404, "invalid_request_error", "Unrecognized request URL"),
    }
}

/// A v1 list answer over `items` (already in listing order) from `starting_after`.
fn v1_list(
    items: &[Value],
    params: &HashMap<String, String>,
    limit: usize,
    url: &str,
) -> Response<Full<Bytes>> {
    let start = match params.get("starting_after") {
        Some(after) => match items.iter().position(|item| item["id"] == after.as_str()) {
            Some(index) => index + 1,
            None => {
                return error(
                    400,
                    "invalid_request_error",
                    &format!("No such object: '{after}'"),
                );
            }
        },
        None => 0,
    };
    let page: Vec<&Value> = items.iter().skip(start).take(limit).collect();
    let has_more = start + page.len() < items.len();
    json_response(
        200,
        &json!({"object": "list", "url": url, "has_more": has_more, "data": page}),
    )
}
