//! The effect delivery rules, as pure functions: how one attempt's outcome (or one
//! reconciliation answer) moves an effect, given what the sink promises.
//!
//! The guiding fact: once any attempt *may* have reached the sink, sending again is safe
//! only for a sink that deduplicates by idempotency key and still remembers the key
//! (within `idempotency_retention_secs` of the first attempt). Otherwise the outcome is
//! uncertain: reconciled through `status_url` when the sink has one, else left for review.

use std::time::Duration;

use serde_json::{Value, json};

use crate::secret::Secret;
use crate::verify;

/// How one POST to a sink ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// 2xx.
    Accepted(u16),
    /// 4xx other than 408/409/425/429: the receiver refused it for good.
    Rejected(u16),
    /// 408, 425, 429: the receiver says it did not act; it may name when to come back.
    NotProcessed {
        /// The status code.
        status: u16,
        /// `Retry-After`, when given in seconds.
        retry_after: Option<Duration>,
    },
    /// 5xx or 409: the receiver may have acted.
    ServerError {
        /// The status code.
        status: u16,
        /// `Retry-After`, when given in seconds.
        retry_after: Option<Duration>,
    },
    /// The request never left: connection refused, DNS, connect timeout.
    NotSent(String),
    /// It may have left: timeout after sending, connection reset, or a worker that died
    /// while the attempt was in flight.
    Unknown(String),
}

impl Delivery {
    /// Classifies an HTTP status code.
    pub fn from_status(status: u16, retry_after: Option<Duration>) -> Self {
        match status {
            200..=299 => Self::Accepted(status),
            408 | 425 | 429 => Self::NotProcessed {
                status,
                retry_after,
            },
            409 | 500..=599 => Self::ServerError {
                status,
                retry_after,
            },
            _ => Self::Rejected(status),
        }
    }

    /// The `outcome` label of `inbound_effect_attempts_total`.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Accepted(_) => "completed",
            Self::Rejected(_) => "rejected",
            Self::NotProcessed { .. } => "not_processed",
            Self::ServerError { .. } => "server_error",
            Self::NotSent(_) => "not_sent",
            Self::Unknown(_) => "unknown",
        }
    }

    /// The status code, when the sink answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Accepted(status) | Self::Rejected(status) => Some(*status),
            Self::NotProcessed { status, .. } | Self::ServerError { status, .. } => Some(*status),
            Self::NotSent(_) | Self::Unknown(_) => None,
        }
    }

    /// Whether this attempt may have reached the sink and been acted on.
    pub fn may_have_landed(&self) -> bool {
        matches!(
            self,
            Self::Accepted(_) | Self::ServerError { .. } | Self::Unknown(_)
        )
    }

    fn describe(&self) -> String {
        match self {
            Self::Accepted(status) => format!("accepted with {status}"),
            Self::Rejected(status) => format!("rejected with {status}"),
            Self::NotProcessed { status, .. } => format!("not processed ({status})"),
            Self::ServerError { status, .. } => format!("server error {status}"),
            Self::NotSent(error) => format!("not sent: {error}"),
            Self::Unknown(error) => format!("outcome unknown: {error}"),
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::NotProcessed { retry_after, .. } | Self::ServerError { retry_after, .. } => {
                *retry_after
            }
            _ => None,
        }
    }
}

/// What a sink promises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SinkPolicy {
    /// It deduplicates by the idempotency header.
    pub idempotent: bool,
    /// How long it remembers a key.
    pub retention: Duration,
    /// It has a `status_url` to ask.
    pub reconcilable: bool,
}

/// Where the effect goes next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// `completed`.
    Complete,
    /// `failed`: needs an owner.
    Fail(String),
    /// `pending` again after the delay, with the same operation key.
    Retry {
        /// Delay before the next attempt.
        after: Duration,
    },
    /// `uncertain`: reconcile through `status_url` after the delay.
    Reconcile {
        /// Why the outcome is unknown.
        reason: String,
        /// Delay before asking.
        after: Duration,
    },
    /// `review`: a person decides.
    Review(String),
}

impl Decision {
    /// The effect status this decision writes.
    pub fn status(&self) -> &'static str {
        match self {
            Self::Complete => "completed",
            Self::Fail(_) => "failed",
            Self::Retry { .. } => "pending",
            Self::Reconcile { .. } => "uncertain",
            Self::Review(_) => "review",
        }
    }
}

/// Facts about the effect so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct History {
    /// Some earlier attempt may have reached the sink.
    pub maybe_delivered: bool,
    /// Time since the first attempt began.
    pub first_attempt_age: Duration,
    /// Attempts so far, this one included.
    pub attempts: i32,
    /// The attempt budget for retries that are safe.
    pub max_attempts: i32,
}

/// Decides after a delivery attempt. `backoff` is the delay the caller would wait.
pub fn decide(
    delivery: &Delivery,
    policy: SinkPolicy,
    history: History,
    backoff: Duration,
) -> Decision {
    match delivery {
        Delivery::Accepted(_) => return Decision::Complete,
        Delivery::Rejected(status) => {
            return Decision::Fail(format!("the sink rejected the effect with {status}"));
        }
        _ => {}
    }
    let maybe_delivered = history.maybe_delivered || delivery.may_have_landed();
    let within_retention = history.first_attempt_age < policy.retention;
    let resend_is_safe = !maybe_delivered || (policy.idempotent && within_retention);
    let reason = delivery.describe();
    if resend_is_safe && history.attempts < history.max_attempts {
        let after = backoff.max(delivery.retry_after().unwrap_or_default());
        return Decision::Retry { after };
    }
    if !maybe_delivered {
        return Decision::Fail(format!(
            "{reason}; gave up after {} attempts",
            history.attempts
        ));
    }
    unknown_outcome(policy, reason)
}

/// The outcome may have landed and must not be re-sent blindly.
fn unknown_outcome(policy: SinkPolicy, reason: String) -> Decision {
    if policy.reconcilable {
        Decision::Reconcile {
            reason,
            after: Duration::ZERO,
        }
    } else {
        Decision::Review(format!("{reason}; no status_url to reconcile with"))
    }
}

/// What `GET status_url` said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reconciliation {
    /// `200 {"status":"completed"}`.
    Completed,
    /// `200 {"status":"failed"}`.
    Failed,
    /// `200 {"status":"pending"}`.
    Pending,
    /// `404`, or an answer we do not understand.
    Unknown(String),
    /// No answer (unreachable, timeout, 5xx): ask again later.
    Unreachable(String),
}

impl Reconciliation {
    /// Reads an answer: status code and body.
    pub fn from_answer(status: u16, body: &[u8]) -> Self {
        if status == 404 {
            return Self::Unknown("the sink does not know the operation (404)".to_owned());
        }
        if status >= 500 || status == 408 || status == 429 {
            return Self::Unreachable(format!("status_url answered {status}"));
        }
        let reported = serde_json::from_slice::<Value>(body)
            .ok()
            .and_then(|value| {
                value
                    .get("status")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            });
        match (status, reported.as_deref()) {
            (200, Some("completed")) => Self::Completed,
            (200, Some("failed")) => Self::Failed,
            (200, Some("pending")) => Self::Pending,
            _ => Self::Unknown(format!(
                "status_url answered {status} with an unknown status"
            )),
        }
    }

    /// The `outcome` label of a reconciliation attempt.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Completed => "reconciled_completed",
            Self::Failed => "reconciled_failed",
            Self::Pending => "reconciled_pending",
            Self::Unknown(_) => "reconciled_unknown",
            Self::Unreachable(_) => "reconcile_unreachable",
        }
    }
}

/// Decides after asking `status_url`. `backoff` is the delay before asking again.
pub fn decide_reconciliation(
    answer: &Reconciliation,
    policy: SinkPolicy,
    history: History,
    backoff: Duration,
) -> Decision {
    match answer {
        Reconciliation::Completed => Decision::Complete,
        Reconciliation::Failed => {
            Decision::Fail("the sink reports the operation failed".to_owned())
        }
        Reconciliation::Pending => Decision::Reconcile {
            reason: "the sink reports the operation pending".to_owned(),
            after: backoff,
        },
        Reconciliation::Unreachable(reason) => Decision::Reconcile {
            reason: reason.clone(),
            after: backoff,
        },
        Reconciliation::Unknown(_)
            if policy.idempotent && history.first_attempt_age < policy.retention =>
        {
            Decision::Retry {
                after: Duration::ZERO,
            }
        }
        Reconciliation::Unknown(reason) => Decision::Review(reason.clone()),
    }
}

/// The JSON body POSTed to a sink.
pub fn request_body(
    operation_key: &str,
    kind: &str,
    tenant: &str,
    sink: &str,
    data: &Value,
    event: &Value,
) -> Value {
    json!({"operation_key": operation_key, "kind": kind, "tenant": tenant, "sink": sink, "data": data, "event": event})
}

/// Standard Webhooks headers for `body` (`webhook-id` is the operation key), signed with
/// every secret (space-separated, so a receiver mid-rotation verifies with either).
pub fn signature_headers(
    secrets: &[Secret],
    operation_key: &str,
    timestamp: i64,
    body: &[u8],
) -> Vec<(&'static str, String)> {
    let signatures: Vec<String> = secrets
        .iter()
        .map(|secret| verify::sign_standard(secret, operation_key, timestamp, body))
        .collect();
    vec![
        ("webhook-id", operation_key.to_owned()),
        ("webhook-timestamp", timestamp.to_string()),
        ("webhook-signature", signatures.join(" ")),
    ]
}

/// `status_url` with `{key}` replaced by the URL-encoded operation key.
pub fn status_url(template: &str, operation_key: &str) -> String {
    let mut encoded = String::with_capacity(operation_key.len());
    for byte in operation_key.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            encoded.push(byte as char);
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    template.replace("{key}", &encoded)
}

/// The inverse of the encoding in [`status_url`] (`%XX` escapes; anything else as is).
pub fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let escaped = (bytes[index] == b'%')
            .then(|| text.get(index + 1..index + 3))
            .flatten()
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match escaped {
            Some(byte) => {
                decoded.push(byte);
                index += 3;
            }
            None => {
                decoded.push(bytes[index]);
                index += 1;
            }
        }
    }
    String::from_utf8_lossy(&decoded).into_owned()
}

#[cfg(test)]
mod tests;
