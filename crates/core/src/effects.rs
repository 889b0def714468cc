//! The effect delivery rules, as pure functions: how one attempt's outcome (or one
//! reconciliation answer) moves an effect, given what the sink promises.
//!
//! The guiding fact: once any attempt *may* have reached the sink, sending again is safe
//! only for a sink that deduplicates by idempotency key and still remembers the key
//! (within `idempotency_retention_secs` of the first attempt). Otherwise the outcome is
//! uncertain: reconciled through `status_url` when the sink has one, else left for review.
//! What goes over the wire to a sink (body, signature headers, status URL) is `wire`.

use crate::states::EffectStatus;
use std::time::Duration;

use serde_json::Value;

mod wire;
pub use wire::{percent_decode, request_body, signature_headers, status_url};

/// A request to deliver something to a sink once the transition commits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectIntent {
    /// Stable, derived from the business key; the Idempotency-Key sent to the sink.
    pub operation_key: String,
    /// The sink id.
    pub sink: String,
    /// What happened, e.g. `order.paid`.
    pub kind: String,
    /// The effect's data.
    pub data: serde_json::Value,
}

/// The longest any effect waits before its next step, whatever a sink's `Retry-After`
/// or the backoff says: an hour.
pub const MAX_STEP_DELAY: Duration = Duration::from_secs(3600);

/// How one POST to a sink ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// 2xx.
    Accepted(u16),
    /// 4xx other than 408/409/425/429: the receiver refused it for good.
    Rejected(u16),
    /// 3xx: redirects are never followed (a POST would become a GET, or the signed
    /// request would go wherever `Location` points), so nothing was processed.
    Redirected(u16),
    /// 408, 425, 429: the receiver says it did not act; it may name when to come back.
    NotProcessed {
        /// The status code.
        status: u16,
        /// `Retry-After`, when given.
        retry_after: Option<Duration>,
    },
    /// 5xx, 409, or a status no class explains: the receiver may have acted.
    ServerError {
        /// The status code.
        status: u16,
        /// `Retry-After`, when given.
        retry_after: Option<Duration>,
    },
    /// The request could not even be built (e.g. a header value with a control
    /// character): nothing was sent, and sending again would fail the same way.
    NotBuilt(String),
    /// The request never left: connection refused, DNS, connect timeout, or the sink's
    /// circuit breaker was open.
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
            300..=399 => Self::Redirected(status),
            408 | 425 | 429 => Self::NotProcessed {
                status,
                retry_after,
            },
            409 => Self::ServerError {
                status,
                retry_after,
            },
            400..=499 => Self::Rejected(status),
            _ => Self::ServerError {
                status,
                retry_after,
            },
        }
    }

    /// The `outcome` label of `inbound_effect_attempts_total`.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Accepted(_) => "completed",
            Self::Rejected(_) => "rejected",
            Self::Redirected(_) => "redirected",
            Self::NotProcessed { .. } => "not_processed",
            Self::ServerError { .. } => "server_error",
            Self::NotBuilt(_) => "not_built",
            Self::NotSent(_) => "not_sent",
            Self::Unknown(_) => "unknown",
        }
    }

    /// The status code, when the sink answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Accepted(status) | Self::Rejected(status) | Self::Redirected(status) => {
                Some(*status)
            }
            Self::NotProcessed { status, .. } | Self::ServerError { status, .. } => Some(*status),
            Self::NotBuilt(_) | Self::NotSent(_) | Self::Unknown(_) => None,
        }
    }

    /// Whether this attempt may have reached the sink and been acted on.
    pub fn may_have_landed(&self) -> bool {
        matches!(
            self,
            Self::Accepted(_) | Self::ServerError { .. } | Self::Unknown(_)
        )
    }

    /// Whether the sink could not be reached at all, or did not answer: what the circuit
    /// breaker counts. An answer, whatever its status, is not a transport failure.
    pub fn is_transport_failure(&self) -> bool {
        matches!(self, Self::NotSent(_) | Self::Unknown(_))
    }

    fn describe(&self) -> String {
        match self {
            Self::Accepted(status) => format!("accepted with {status}"),
            Self::Rejected(status) => format!("rejected with {status}"),
            Self::Redirected(status) => format!(
                "the sink answered {status}, a redirect, which is never followed: nothing was \
                 processed; the sink's url is probably misconfigured"
            ),
            Self::NotProcessed { status, .. } => format!("not processed ({status})"),
            Self::ServerError { status, .. } => format!("server error {status}"),
            Self::NotBuilt(error) => {
                format!("the request could not be built, so nothing was sent: {error}")
            }
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

/// Reads a `Retry-After` value: delay-seconds or an HTTP date (the three formats HTTP
/// allows), relative to `now`. A date in the past is "now"; garbage is ignored. Callers
/// cap what it says (see [`MAX_STEP_DELAY`]).
pub fn parse_retry_after(value: &str, now: std::time::SystemTime) -> Option<Duration> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|byte| byte.is_ascii_digit()) {
        // Any run of digits is a delay; one too long for u64 is "very long".
        return Some(Duration::from_secs(value.parse().unwrap_or(u64::MAX)));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or_default())
}

/// What a sink promises, and the bounds inbound keeps with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SinkPolicy {
    /// It deduplicates by the idempotency header.
    pub idempotent: bool,
    /// How long it remembers a key.
    pub retention: Duration,
    /// It has a `status_url` to ask.
    pub reconcilable: bool,
    /// Its request timeout: a resend must begin at least this long before the retention
    /// ends, so that it also lands within it.
    pub timeout: Duration,
    /// How long an effect that never reached it keeps being retried before review.
    pub give_up_after: Duration,
    /// How long an uncertain effect keeps being reconciled before review.
    pub reconcile_for: Duration,
}

impl SinkPolicy {
    /// How long after the first attempt a resend with the same key may still begin:
    /// the retention minus the timeout (`None`: never, for a sink without idempotency).
    pub fn resend_horizon(&self) -> Option<Duration> {
        self.idempotent
            .then(|| self.retention.saturating_sub(self.timeout))
    }
}

/// Where the effect goes next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// `completed`.
    Complete,
    /// `failed`: the sink refused it (a verdict, never a timeout).
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
    pub fn status(&self) -> EffectStatus {
        match self {
            Self::Complete => EffectStatus::Completed,
            Self::Fail(_) => EffectStatus::Failed,
            Self::Retry { .. } => EffectStatus::Pending,
            Self::Reconcile { .. } => EffectStatus::Uncertain,
            Self::Review(_) => EffectStatus::Review,
        }
    }

    /// The delay before the effect is due again (0 for a final decision).
    pub fn delay(&self) -> Duration {
        match self {
            Self::Retry { after } | Self::Reconcile { after, .. } => *after,
            Self::Complete | Self::Fail(_) | Self::Review(_) => Duration::ZERO,
        }
    }

    /// The reason it carries, if any.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Self::Fail(reason) | Self::Review(reason) | Self::Reconcile { reason, .. } => {
                Some(reason)
            }
            Self::Complete | Self::Retry { .. } => None,
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
    /// Delivery attempts so far, this one included.
    pub attempts: i32,
    /// The budget of resends after an attempt that may have landed.
    pub max_attempts: i32,
    /// Time since the effect first became uncertain (zero if it never was).
    pub uncertain_age: Duration,
}

/// The delays the caller's backoff proposes for the next step of each kind (each
/// already grown with its own count: delivery attempts, reconciliations).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// Before the next delivery attempt.
    pub attempt: Duration,
    /// Before the next reconciliation.
    pub reconciliation: Duration,
}

/// `max(backoff, Retry-After)`, never more than [`MAX_STEP_DELAY`].
fn bounded_delay(backoff: Duration, retry_after: Option<Duration>) -> Duration {
    backoff
        .max(retry_after.unwrap_or_default())
        .min(MAX_STEP_DELAY)
}

/// Decides after a delivery attempt.
pub fn decide(
    delivery: &Delivery,
    policy: SinkPolicy,
    history: History,
    backoff: Backoff,
) -> Decision {
    let reason = delivery.describe();
    match delivery {
        Delivery::Accepted(_) => return Decision::Complete,
        Delivery::Redirected(_) | Delivery::NotBuilt(_) => return Decision::Review(reason),
        // After an attempt that may have landed, a refusal of this one says nothing of
        // that one: a person decides.
        Delivery::Rejected(_) if history.maybe_delivered => {
            return Decision::Review(format!(
                "{reason}, after an earlier attempt that may have landed"
            ));
        }
        Delivery::Rejected(status) => {
            return Decision::Fail(format!("the sink rejected the effect with {status}"));
        }
        _ => {}
    }
    let delay = bounded_delay(backoff.attempt, delivery.retry_after());
    let maybe_delivered = history.maybe_delivered || delivery.may_have_landed();
    if !maybe_delivered {
        // Nothing reached the sink yet: an outage is not a verdict. Retry within the
        // sink's time budget, then a person decides.
        if history.first_attempt_age + delay < policy.give_up_after {
            return Decision::Retry { after: delay };
        }
        return Decision::Review(format!(
            "{reason}; still not delivered {} s after the first attempt (give_up_after_secs)",
            history.first_attempt_age.as_secs()
        ));
    }
    if history.attempts < history.max_attempts
        && let Some(after) = resend_delay(policy, history.first_attempt_age, delay)
    {
        return Decision::Retry { after };
    }
    unknown_outcome(policy, history, reason, backoff.reconciliation)
}

/// The delay before a resend that must begin within the sink's retention (minus its
/// timeout): `delay`, brought forward if need be; `None` when no time is left.
fn resend_delay(
    policy: SinkPolicy,
    first_attempt_age: Duration,
    delay: Duration,
) -> Option<Duration> {
    let left = policy
        .resend_horizon()?
        .checked_sub(first_attempt_age)
        .filter(|left| !left.is_zero())?;
    Some(delay.min(left))
}

/// The outcome may have landed and must not be re-sent blindly: reconcile within the
/// horizon, else a person decides.
fn unknown_outcome(
    policy: SinkPolicy,
    history: History,
    reason: String,
    after: Duration,
) -> Decision {
    if !policy.reconcilable {
        return Decision::Review(format!("{reason}; no status_url to reconcile with"));
    }
    if history.uncertain_age + after >= policy.reconcile_for {
        return Decision::Review(format!(
            "{reason}; not reconciled {} s after it became uncertain (reconcile_for_secs)",
            history.uncertain_age.as_secs()
        ));
    }
    Decision::Reconcile {
        reason,
        after: after.min(MAX_STEP_DELAY),
    }
}

/// What a claim found when a resend came due: whether it may still be sent. A resend
/// after an attempt that may have landed is safe only to an idempotent sink, and only
/// if it begins within the retention minus the timeout.
pub fn resend_is_still_safe(
    policy: SinkPolicy,
    maybe_delivered: bool,
    first_attempt_age: Duration,
) -> bool {
    !maybe_delivered
        || policy
            .resend_horizon()
            .is_some_and(|horizon| first_attempt_age < horizon)
}

/// The verdict on a resend the claim did not send (see [`resend_is_still_safe`]).
pub fn decide_unsent_resend(policy: SinkPolicy, history: History, backoff: Backoff) -> Decision {
    let reason = format!(
        "a resend came due {} s after the first attempt, past the sink's idempotency \
         retention minus its timeout; not sent",
        history.first_attempt_age.as_secs()
    );
    unknown_outcome(policy, history, reason, backoff.reconciliation)
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
    /// No answer (unreachable, timeout, 5xx, 429): ask again later.
    Unreachable {
        /// What happened.
        reason: String,
        /// `Retry-After`, when given.
        retry_after: Option<Duration>,
    },
}

impl Reconciliation {
    /// Reads an answer: status code, `Retry-After`, and (the start of) the body.
    pub fn from_answer(status: u16, retry_after: Option<Duration>, body: &[u8]) -> Self {
        if status == 404 {
            return Self::Unknown("the sink does not know the operation (404)".to_owned());
        }
        if status >= 500 || status == 408 || status == 429 {
            return Self::Unreachable {
                reason: format!("status_url answered {status}"),
                retry_after,
            };
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
            Self::Unreachable { .. } => "reconcile_unreachable",
        }
    }
}

/// Decides after asking `status_url`.
pub fn decide_reconciliation(
    answer: &Reconciliation,
    policy: SinkPolicy,
    history: History,
    backoff: Backoff,
) -> Decision {
    match answer {
        Reconciliation::Completed => Decision::Complete,
        Reconciliation::Failed => {
            Decision::Fail("the sink reports the operation failed".to_owned())
        }
        Reconciliation::Pending => unknown_outcome(
            policy,
            history,
            "the sink reports the operation pending".to_owned(),
            backoff.reconciliation,
        ),
        Reconciliation::Unreachable {
            reason,
            retry_after,
        } => unknown_outcome(
            policy,
            history,
            reason.clone(),
            bounded_delay(backoff.reconciliation, *retry_after),
        ),
        // The sink does not know the key: a resend with the same key is safe while the
        // sink would still deduplicate it, and counts against the attempt budget.
        Reconciliation::Unknown(reason) => {
            let delay = bounded_delay(backoff.attempt, None);
            match resend_delay(policy, history.first_attempt_age, delay) {
                Some(after) if history.attempts < history.max_attempts => Decision::Retry { after },
                _ => Decision::Review(reason.clone()),
            }
        }
    }
}

#[cfg(test)]
mod tests;
