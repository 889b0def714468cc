//! A local server with the shape of Stripe's events API, for `inboundctl stripe backfill`:
//! `GET /v1/events` with bearer authentication, `created[gte]`/`created[lt]`, `limit` and
//! the `starting_after` cursor over events kept newest first, `has_more`, Stripe's error
//! body on a bad key, `GET /v1/account` (the `Stripe-Account` it acts for, else the
//! platform's), and — when asked — a 429 with `Retry-After` before the first answer.
//! Never the real service.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response};
use serde_json::{Value, json};

use crate::local_server::{json_response, serve};

/// The key the server accepts.
pub const API_KEY: &str = "rk_live_backfill_1f2e";

#[derive(Default)]
struct State {
    /// Newest first, as Stripe lists them.
    events: Vec<Value>,
    rate_limit_next: u32,
    requests: Vec<String>,
}

/// A running fake events API.
pub struct StripeApi {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
}

impl StripeApi {
    /// Starts the server with `events` (any order; listed newest first by `created`).
    pub async fn start(mut events: Vec<Value>) -> Self {
        events.sort_by_key(|event| std::cmp::Reverse(event["created"].as_i64().unwrap_or(0)));
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

    /// The next `count` requests are answered 429 with `Retry-After: 1`.
    pub fn rate_limit_next(&self, count: u32) {
        self.state.lock().expect("state").rate_limit_next = count;
    }

    /// The query strings of the requests received, in order.
    pub fn requests(&self) -> Vec<String> {
        self.state.lock().expect("state").requests.clone()
    }
}

fn answer<B>(state: &Mutex<State>, request: &Request<B>) -> Response<Full<Bytes>> {
    let mut state = state.lock().expect("state");
    let query = request.uri().query().unwrap_or_default().to_owned();
    state.requests.push(query.clone());
    let path = request.uri().path();
    if path != "/v1/events" && path != "/v1/account" {
        return json_response(
            404,
            &json!({"error": {"message": "Unrecognized request URL"}}),
        );
    }
    let authorized = request
        .headers()
        .get("authorization")
        .and_then(|value| value.to_str().ok())
        == Some(&format!("Bearer {API_KEY}"));
    if !authorized {
        return json_response(
            401,
            &json!({"error": {"type": "invalid_request_error", "message": "Invalid API Key provided: rk_test_****"}}),
        );
    }
    if state.rate_limit_next > 0 {
        state.rate_limit_next -= 1;
        let mut response = json_response(
            429,
            &json!({"error": {"type": "rate_limit_error", "message": "Too many requests"}}),
        );
        response
            .headers_mut()
            .insert("retry-after", "1".parse().expect("header"));
        return response;
    }
    if path == "/v1/account" {
        let account = request
            .headers()
            .get("stripe-account")
            .and_then(|value| value.to_str().ok())
            .unwrap_or("acct_platform");
        return json_response(200, &json!({"id": account, "object": "account"}));
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
    let number = |name: &str| params.get(name).and_then(|value| value.parse::<i64>().ok());
    let limit = number("limit").unwrap_or(10).clamp(1, 100) as usize;
    let in_window: Vec<&Value> = state
        .events
        .iter()
        .filter(|event| {
            let created = event["created"].as_i64().unwrap_or(0);
            number("created[gte]").is_none_or(|gte| created >= gte)
                && number("created[lt]").is_none_or(|lt| created < lt)
        })
        .collect();
    let start = match params.get("starting_after") {
        Some(after) => match in_window
            .iter()
            .position(|event| event["id"] == after.as_str())
        {
            Some(index) => index + 1,
            None => {
                return json_response(
                    400,
                    &json!({"error": {"message": format!("No such event: '{after}'")}}),
                );
            }
        },
        None => 0,
    };
    let page: Vec<Value> = in_window
        .iter()
        .skip(start)
        .take(limit)
        .map(|event| (*event).clone())
        .collect();
    let has_more = start + page.len() < in_window.len();
    json_response(
        200,
        &json!({"object": "list", "url": "/v1/events", "has_more": has_more, "data": page}),
    )
}
