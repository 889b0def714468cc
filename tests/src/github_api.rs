//! A local server with the shape of GitHub's hook-deliveries API, for `inboundctl github
//! redeliver`: `GET {hook}/deliveries` newest first with `per_page` and a `cursor` in the
//! `Link: rel="next"` header, `POST {hook}/deliveries/{id}/attempts` (202), a token for
//! repository and organization hooks and an RS256 App JWT (checked with the suite's test
//! key) for `/app/hook`, GitHub's error body on bad credentials, and — when asked — a 403
//! with the rate limit spent before the first answer. Never the real service.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use base64::Engine;
use bytes::Bytes;
use http_body_util::Full;
use hyper::{Method, Request, Response};
use serde_json::{Value, json};

use crate::local_server::{json_response, serve};

/// The token the server accepts for repository and organization hooks.
pub const TOKEN: &str = "github_pat_test_redeliver_3d7a";
/// The App id its JWTs must name.
pub const APP_ID: u64 = 4567;
/// The App's private key (PEM), made for the suite alone.
pub const APP_KEY_PEM: &str = include_str!("../testdata/github-app-test-key.pem");
const APP_PUBLIC_KEY_DER: &[u8] = include_bytes!("../testdata/github-app-test-key.pub.der");

#[derive(Default)]
struct State {
    /// Newest first, as GitHub lists them.
    deliveries: Vec<Value>,
    rate_limit_next: u32,
    redelivered: Vec<u64>,
    requests: Vec<String>,
}

/// A running fake API.
pub struct GithubApi {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
}

impl GithubApi {
    /// Starts the server with `deliveries` (any order; listed newest first).
    pub async fn start(mut deliveries: Vec<Value>) -> Self {
        deliveries.sort_by(|left, right| {
            right["delivered_at"]
                .as_str()
                .cmp(&left["delivered_at"].as_str())
        });
        let state = Arc::new(Mutex::new(State {
            deliveries,
            ..State::default()
        }));
        let served = Arc::clone(&state);
        let addr = serve(move |addr, request| answer(addr, &served, request)).await;
        Self { addr, state }
    }

    /// The base URL (`--api-base`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The next `count` requests are answered 403 with the rate limit spent.
    pub fn rate_limit_next(&self, count: u32) {
        self.state.lock().expect("state").rate_limit_next = count;
    }

    /// The delivery ids redelivered, in order.
    pub fn redelivered(&self) -> Vec<u64> {
        self.state.lock().expect("state").redelivered.clone()
    }

    /// `METHOD path?query` of every request, in order.
    pub fn requests(&self) -> Vec<String> {
        self.state.lock().expect("state").requests.clone()
    }
}

/// Whether `authorization` carries a valid App JWT (RS256 under the test key, naming the
/// App, not expired).
fn valid_app_jwt(authorization: &str) -> bool {
    let Some(token) = authorization.strip_prefix("Bearer ") else {
        return false;
    };
    let decode = |part: &str| {
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(part)
            .ok()
    };
    let mut parts = token.split('.');
    let (Some(header), Some(claims), Some(signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    let Some(signature) = decode(signature) else {
        return false;
    };
    let key = ring::signature::UnparsedPublicKey::new(
        &ring::signature::RSA_PKCS1_2048_8192_SHA256,
        APP_PUBLIC_KEY_DER,
    );
    if key
        .verify(format!("{header}.{claims}").as_bytes(), &signature)
        .is_err()
    {
        return false;
    }
    let Some(claims) =
        decode(claims).and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
    else {
        return false;
    };
    let now = chrono::Utc::now().timestamp();
    claims["iss"]
        .as_str()
        .and_then(|iss| iss.parse::<u64>().ok())
        == Some(APP_ID)
        && claims["exp"].as_i64().is_some_and(|exp| exp > now)
}

fn answer<B>(
    addr: SocketAddr,
    state: &Mutex<State>,
    request: &Request<B>,
) -> Response<Full<Bytes>> {
    let mut state = state.lock().expect("state");
    let path = request.uri().path().to_owned();
    let query = request.uri().query().unwrap_or_default().to_owned();
    state
        .requests
        .push(format!("{} {path}?{query}", request.method()));
    let authorization = request
        .headers()
        .get("authorization")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default();
    let authorized = if path.starts_with("/app/hook") {
        valid_app_jwt(authorization)
    } else {
        authorization == format!("Bearer {TOKEN}")
    };
    if !authorized {
        return json_response(
            401,
            &json!({"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"}),
        );
    }
    if state.rate_limit_next > 0 {
        state.rate_limit_next -= 1;
        let mut response = json_response(403, &json!({"message": "API rate limit exceeded"}));
        let reset = (chrono::Utc::now().timestamp() + 1).to_string();
        let headers = response.headers_mut();
        headers.insert("x-ratelimit-remaining", "0".parse().expect("header"));
        headers.insert("x-ratelimit-reset", reset.parse().expect("header"));
        return response;
    }
    let hook = ["/repos/", "/orgs/", "/app/hook"]
        .iter()
        .any(|prefix| path.starts_with(prefix));
    if !hook {
        return json_response(404, &json!({"message": "Not Found"}));
    }
    if request.method() == Method::POST {
        let id = path
            .strip_suffix("/attempts")
            .and_then(|rest| rest.rsplit('/').next())
            .and_then(|id| id.parse::<u64>().ok());
        return match id {
            Some(id) if state.deliveries.iter().any(|delivery| delivery["id"] == id) => {
                state.redelivered.push(id);
                json_response(202, &json!({}))
            }
            _ => json_response(404, &json!({"message": "Not Found"})),
        };
    }
    let Some(hook_path) = path.strip_suffix("/deliveries") else {
        return json_response(404, &json!({"message": "Not Found"}));
    };
    let param = |name: &str| {
        query
            .split('&')
            .filter_map(|pair| pair.split_once('='))
            .find(|(key, _)| *key == name)
            .and_then(|(_, value)| value.parse::<usize>().ok())
    };
    let per_page = param("per_page").unwrap_or(30).clamp(1, 100);
    let start = param("cursor").unwrap_or(0);
    let page: Vec<Value> = state
        .deliveries
        .iter()
        .skip(start)
        .take(per_page)
        .cloned()
        .collect();
    let mut response = json_response(200, &Value::Array(page));
    if start + per_page < state.deliveries.len() {
        let next = format!(
            "<http://{addr}{hook_path}/deliveries?per_page={per_page}&cursor={}>; rel=\"next\"",
            start + per_page
        );
        response
            .headers_mut()
            .insert("link", next.parse().expect("header"));
    }
    response
}
