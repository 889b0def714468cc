//! The console's responses: every one carries a strict Content-Security-Policy (no
//! script at all, styles only from the console, no framing, forms only to itself),
//! `nosniff`, no referrer and no caching (pages show payloads); pages are HTML rendered
//! from checked templates, decisions answer with a redirect (303) or a page that says what
//! was refused.

use askama::Template;
use bytes::Bytes;
use http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, LOCATION, REFERRER_POLICY, SET_COOKIE,
    X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use http::{HeaderValue, Response, StatusCode};
use http_body_util::Full;
use inbound_runtime::http::Body;

use super::guard::SessionCookie;

/// The console's stylesheet, inside the binary.
const STYLESHEET: &str = include_str!("console.css");

/// What a page may load and do: nothing but the console's own stylesheet, and forms posted
/// back to the console.
pub const CONTENT_SECURITY_POLICY_VALUE: &str = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// Adds the security headers to `response`.
pub fn secure(response: &mut Response<Body>) {
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY_VALUE),
    );
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers
        .entry(CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
}

/// Sets the session cookie ([`SessionCookie::set`]).
pub fn set_session_cookie(response: &mut Response<Body>, cookie: SessionCookie, session: &str) {
    if let Ok(value) = HeaderValue::from_str(&cookie.set(session)) {
        response.headers_mut().append(SET_COOKIE, value);
    }
}

fn with_body(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Body> {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// A rendered page with `status`.
pub fn page(status: StatusCode, template: &impl Template) -> Response<Body> {
    match template.render() {
        Ok(html) => with_body(status, "text/html; charset=utf-8", html),
        Err(error) => {
            tracing::error!(%error, "a console page did not render");
            with_body(
                StatusCode::INTERNAL_SERVER_ERROR,
                "text/plain; charset=utf-8",
                "the page did not render; the console's log says why",
            )
        }
    }
}

/// The stylesheet.
pub fn stylesheet() -> Response<Body> {
    let mut response = with_body(StatusCode::OK, "text/css; charset=utf-8", STYLESHEET);
    response
        .headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("max-age=300"));
    response
}

/// After a decision: see the page it changed (a reload does not post again).
pub fn see_other(location: &str) -> Response<Body> {
    let mut response = with_body(StatusCode::SEE_OTHER, "text/plain; charset=utf-8", "");
    if let Ok(value) = HeaderValue::from_str(location) {
        response.headers_mut().insert(LOCATION, value);
    }
    response
}

/// 405 for anything but GET, HEAD and POST.
pub fn method_not_allowed() -> Response<Body> {
    let mut response = with_body(
        StatusCode::METHOD_NOT_ALLOWED,
        "text/plain; charset=utf-8",
        "the console answers GET, HEAD and POST only",
    );
    response.headers_mut().insert(
        http::header::ALLOW,
        HeaderValue::from_static("GET, HEAD, POST"),
    );
    response
}

/// 421 for a request naming a host that is not the console's.
pub fn misdirected() -> Response<Body> {
    with_body(
        StatusCode::MISDIRECTED_REQUEST,
        "text/plain; charset=utf-8",
        "this console does not answer for that host",
    )
}

/// 403 before anything was read (a request that did not come through the proxy).
pub fn forbidden(why: &'static str) -> Response<Body> {
    with_body(StatusCode::FORBIDDEN, "text/plain; charset=utf-8", why)
}

/// 503 when a page or decision did not finish within the console's limit.
pub fn unavailable(why: &'static str) -> Response<Body> {
    let mut response = with_body(
        StatusCode::SERVICE_UNAVAILABLE,
        "text/plain; charset=utf-8",
        why,
    );
    response
        .headers_mut()
        .insert(http::header::RETRY_AFTER, HeaderValue::from_static("5"));
    response
}
