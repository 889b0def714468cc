//! Every way a request ends, mapped to its HTTP status, JSON body and metric label in one
//! place. Bodies tell an unauthenticated caller nothing it could use: a 401 never says
//! which check failed, a 503 never says why the database failed (that goes to the log).

use http::header::{ALLOW, RETRY_AFTER};
use http::{HeaderValue, Response, StatusCode};
use inbound_core::keys::ReceiptId;
pub use inbound_runtime::http::{Body, json_response};
use serde_json::json;

/// Seconds a client should wait before retrying after a 503.
pub const RETRY_AFTER_SECS: u64 = 5;

/// How a webhook request ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// Verified, and a new receipt is committed.
    Accepted(ReceiptId),
    /// Verified, and the receipt key was already committed.
    Duplicate,
    /// Verified, but the event type is not routed: counted, not stored.
    Ignored,
    /// Verified, but of another mode, account, installation, team or shop than the
    /// integration takes: answered as `ignored` (a refusal would be retried and count
    /// towards disabling the endpoint), counted, not stored.
    OutOfScope,
    /// Slack's `app_rate_limited` notice: answered as `ignored`, counted per team.
    SlackRateLimited,
    /// Slack `url_verification`, verified: echo the challenge.
    Challenge(String),
    /// Zoom `endpoint.url_validation`, verified: the plain token and its HMAC.
    ZoomUrlValidation {
        /// As sent.
        plain_token: String,
        /// HMAC-SHA256 hex of the plain token under the signing secret.
        encrypted_token: String,
    },
    /// Verified, but declared as something other than uncompressed JSON.
    UnsupportedMediaType,
    /// Verified, but the body cannot be understood (the reason is safe to return: the
    /// caller proved it holds the secret).
    Malformed(String),
    /// Signature missing or wrong, or timestamp outside tolerance.
    Unauthorized,
    /// No integration with that id.
    UnknownIntegration,
    /// Body over the integration's limit.
    PayloadTooLarge,
    /// The body did not arrive within the request timeout.
    RequestTimeout,
    /// The database did not confirm the commit: retry later.
    Unavailable,
    /// The in-flight body budget is full: retry later.
    Overloaded,
    /// A method other than POST on a webhook route.
    MethodNotAllowed(&'static str),
    /// No such route.
    NotFound,
}

impl Reply {
    /// A verified delivery answered 2xx: the provider is sending (the silence alert).
    pub fn is_delivery(&self) -> bool {
        matches!(
            self,
            Self::Accepted(_)
                | Self::Duplicate
                | Self::Ignored
                | Self::OutOfScope
                | Self::SlackRateLimited
                | Self::Challenge(_)
                | Self::ZoomUrlValidation { .. }
        )
    }

    /// The `outcome` label of `inbound_ingress_requests_total`.
    pub fn outcome_label(&self) -> &'static str {
        match self {
            Self::Accepted(_) => "accepted",
            Self::Duplicate => "duplicate",
            Self::Ignored => "ignored",
            Self::OutOfScope => "out_of_scope",
            Self::SlackRateLimited => "slack_rate_limited",
            Self::Challenge(_) | Self::ZoomUrlValidation { .. } => "challenge",
            Self::UnsupportedMediaType => "unsupported_media_type",
            Self::Malformed(_) => "malformed",
            Self::Unauthorized => "unauthorized",
            Self::UnknownIntegration => "unknown_integration",
            Self::PayloadTooLarge => "payload_too_large",
            Self::RequestTimeout => "request_timeout",
            Self::Unavailable => "unavailable",
            Self::Overloaded => "overloaded",
            Self::MethodNotAllowed(_) => "method_not_allowed",
            Self::NotFound => "not_found",
        }
    }

    /// The HTTP response.
    pub fn into_response(self) -> Response<Body> {
        let (status, body) = match &self {
            Self::Accepted(id) => (
                StatusCode::OK,
                json!({"status": "accepted", "receipt_id": id.0}),
            ),
            Self::Duplicate => (StatusCode::OK, json!({"status": "duplicate"})),
            Self::Ignored | Self::OutOfScope | Self::SlackRateLimited => {
                (StatusCode::OK, json!({"status": "ignored"}))
            }
            Self::Challenge(challenge) => (StatusCode::OK, json!({"challenge": challenge})),
            Self::ZoomUrlValidation {
                plain_token,
                encrypted_token,
            } => (
                StatusCode::OK,
                json!({"plainToken": plain_token, "encryptedToken": encrypted_token}),
            ),
            Self::UnsupportedMediaType => (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                json!({"error": "unsupported_media_type"}),
            ),
            Self::Malformed(detail) => (
                StatusCode::BAD_REQUEST,
                json!({"error": "malformed", "detail": detail}),
            ),
            Self::Unauthorized => (StatusCode::UNAUTHORIZED, json!({"error": "unauthorized"})),
            Self::UnknownIntegration => (
                StatusCode::NOT_FOUND,
                json!({"error": "unknown_integration"}),
            ),
            Self::PayloadTooLarge => (
                StatusCode::PAYLOAD_TOO_LARGE,
                json!({"error": "payload_too_large"}),
            ),
            Self::RequestTimeout => (
                StatusCode::REQUEST_TIMEOUT,
                json!({"error": "request_timeout"}),
            ),
            Self::Unavailable | Self::Overloaded => (
                StatusCode::SERVICE_UNAVAILABLE,
                json!({"error": "unavailable"}),
            ),
            Self::MethodNotAllowed(_) => (
                StatusCode::METHOD_NOT_ALLOWED,
                json!({"error": "method_not_allowed"}),
            ),
            Self::NotFound => (StatusCode::NOT_FOUND, json!({"error": "not_found"})),
        };
        let mut response = json_response(status, &body);
        match self {
            Self::Unavailable => {
                response
                    .headers_mut()
                    .insert(RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
            }
            // The body was not read: close rather than drain it.
            Self::Overloaded => {
                let headers = response.headers_mut();
                headers.insert(RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
                headers.insert(http::header::CONNECTION, HeaderValue::from_static("close"));
            }
            Self::MethodNotAllowed(allow) => {
                response
                    .headers_mut()
                    .insert(ALLOW, HeaderValue::from_static(allow));
            }
            // The rest of an oversized or late body is unread: close rather than drain it.
            Self::PayloadTooLarge | Self::RequestTimeout => {
                response
                    .headers_mut()
                    .insert(http::header::CONNECTION, HeaderValue::from_static("close"));
            }
            _ => {}
        }
        response
    }
}
