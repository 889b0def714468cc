//! Every outcome rule, for sinks with and without idempotency support: what is sent
//! again and when, what is reconciled, and where each budget ends.

use super::*;

const DAY: Duration = Duration::from_secs(86_400);
const SECOND: Duration = Duration::from_secs(1);
const BACKOFF: Backoff = Backoff {
    attempt: Duration::from_secs(4),
    reconciliation: Duration::from_secs(8),
};

fn sink(idempotent: bool, reconcilable: bool) -> SinkPolicy {
    SinkPolicy {
        idempotent,
        retention: DAY,
        reconcilable,
        timeout: Duration::from_secs(10),
        give_up_after: DAY * 3,
        reconcile_for: DAY,
    }
}

fn first(age: Duration) -> History {
    History {
        maybe_delivered: false,
        first_attempt_age: age,
        attempts: 1,
        max_attempts: 10,
        uncertain_age: Duration::ZERO,
    }
}

fn landed(history: History) -> History {
    History {
        maybe_delivered: true,
        ..history
    }
}

const IDEMPOTENT: SinkPolicy = SinkPolicy {
    idempotent: true,
    retention: DAY,
    reconcilable: false,
    timeout: Duration::from_secs(10),
    give_up_after: Duration::from_secs(3 * 86_400),
    reconcile_for: DAY,
};
const PLAIN: SinkPolicy = SinkPolicy {
    idempotent: false,
    ..IDEMPOTENT
};

fn maybe_landed() -> [Delivery; 5] {
    [
        Delivery::Unknown("timeout".into()),
        Delivery::Unknown("connection reset".into()),
        Delivery::from_status(500, None),
        Delivery::from_status(503, None),
        Delivery::from_status(409, None),
    ]
}

#[test]
fn success_completes_and_a_first_rejection_fails_for_every_sink() {
    for policy in [IDEMPOTENT, PLAIN] {
        assert_eq!(
            decide(
                &Delivery::from_status(204, None),
                policy,
                first(Duration::ZERO),
                BACKOFF
            ),
            Decision::Complete
        );
        for status in [400, 401, 403, 404, 410, 422] {
            assert!(
                matches!(
                    decide(
                        &Delivery::from_status(status, None),
                        policy,
                        first(Duration::ZERO),
                        BACKOFF
                    ),
                    Decision::Fail(_)
                ),
                "{status}"
            );
        }
    }
}

#[test]
fn a_rejection_after_an_attempt_that_may_have_landed_is_reviewed() {
    let history = landed(first(Duration::from_secs(60)));
    for policy in [IDEMPOTENT, PLAIN] {
        assert!(matches!(
            decide(&Delivery::from_status(422, None), policy, history, BACKOFF),
            Decision::Review(_)
        ));
    }
}

#[test]
fn redirects_and_unbuildable_requests_are_reviewed_as_not_processed() {
    for status in [301, 302, 303, 307, 308] {
        let delivery = Delivery::from_status(status, None);
        assert!(!delivery.may_have_landed(), "{status}");
        assert!(
            matches!(decide(&delivery, IDEMPOTENT, first(Duration::ZERO), BACKOFF), Decision::Review(reason) if reason.contains("redirect")),
            "{status}"
        );
    }
    let unbuilt = Delivery::NotBuilt("invalid header value".into());
    assert!(!unbuilt.may_have_landed());
    assert!(matches!(
        decide(&unbuilt, IDEMPOTENT, first(Duration::ZERO), BACKOFF),
        Decision::Review(_)
    ));
}

#[test]
fn idempotent_sink_resends_what_may_have_landed_only_within_retention_minus_timeout() {
    for delivery in &maybe_landed() {
        assert_eq!(
            decide(
                delivery,
                IDEMPOTENT,
                first(Duration::from_secs(60)),
                BACKOFF
            ),
            Decision::Retry {
                after: BACKOFF.attempt
            },
            "{delivery:?}"
        );
        // The delay is brought forward so that the resend begins before retention − timeout.
        let late = first(DAY - Duration::from_secs(12));
        assert_eq!(
            decide(delivery, IDEMPOTENT, late, BACKOFF),
            Decision::Retry {
                after: Duration::from_secs(2)
            },
            "{delivery:?}"
        );
        // No time left: not sent again.
        let too_late = first(DAY - Duration::from_secs(10));
        assert!(
            matches!(
                decide(delivery, IDEMPOTENT, too_late, BACKOFF),
                Decision::Review(_)
            ),
            "{delivery:?}"
        );
        assert!(
            matches!(decide(delivery, sink(true, true), too_late, BACKOFF), Decision::Reconcile { after, .. } if after == BACKOFF.reconciliation),
            "{delivery:?}"
        );
    }
}

#[test]
fn plain_sink_never_resends_what_may_have_landed() {
    for delivery in &maybe_landed() {
        assert!(
            matches!(
                decide(delivery, PLAIN, first(Duration::ZERO), BACKOFF),
                Decision::Review(_)
            ),
            "{delivery:?}"
        );
        assert!(
            matches!(
                decide(delivery, sink(false, true), first(Duration::ZERO), BACKOFF),
                Decision::Reconcile { .. }
            ),
            "{delivery:?}"
        );
    }
    // A later attempt that surely did not land does not clear an earlier maybe.
    for delivery in [
        Delivery::NotSent("refused".into()),
        Delivery::from_status(429, None),
    ] {
        assert!(matches!(
            decide(&delivery, PLAIN, landed(first(Duration::ZERO)), BACKOFF),
            Decision::Review(_)
        ));
    }
}

#[test]
fn what_never_reached_the_sink_is_retried_within_the_time_budget_then_reviewed() {
    let refused = Delivery::NotSent("connection refused".into());
    let many = History {
        attempts: 500,
        ..first(DAY * 2)
    };
    assert_eq!(
        decide(&refused, PLAIN, many, BACKOFF),
        Decision::Retry {
            after: BACKOFF.attempt
        },
        "past max_attempts, within the time budget: an outage is not a verdict"
    );
    let over = first(DAY * 3 - SECOND);
    let decision = decide(&refused, PLAIN, over, BACKOFF);
    assert!(
        matches!(&decision, Decision::Review(reason) if reason.contains("give_up_after_secs")),
        "{decision:?}"
    );
    assert!(
        !matches!(
            decide(&refused, IDEMPOTENT, over, BACKOFF),
            Decision::Fail(_)
        ),
        "never failed"
    );
}

#[test]
fn retry_after_is_honoured_and_capped_and_safe_resends_are_bounded() {
    let slow_down = Delivery::from_status(429, Some(Duration::from_secs(30)));
    assert_eq!(
        decide(&slow_down, PLAIN, first(Duration::ZERO), BACKOFF),
        Decision::Retry {
            after: Duration::from_secs(30)
        }
    );
    let absurd = Delivery::from_status(429, Some(Duration::from_secs(10_000_000_000_000)));
    assert_eq!(
        decide(&absurd, PLAIN, first(Duration::ZERO), BACKOFF),
        Decision::Retry {
            after: MAX_STEP_DELAY
        }
    );
    let exhausted = History {
        attempts: 10,
        ..first(Duration::ZERO)
    };
    assert!(
        matches!(
            decide(
                &Delivery::from_status(503, None),
                IDEMPOTENT,
                exhausted,
                BACKOFF
            ),
            Decision::Review(_)
        ),
        "resends spent: review"
    );
}

#[test]
fn retry_after_reads_seconds_and_http_dates() {
    let now = std::time::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    assert_eq!(
        parse_retry_after(" 120 ", now),
        Some(Duration::from_secs(120))
    );
    assert_eq!(
        parse_retry_after("99999999999999999999999", now),
        Some(Duration::from_secs(u64::MAX))
    );
    let later = httpdate::fmt_http_date(now + Duration::from_secs(90));
    assert_eq!(
        parse_retry_after(&later, now),
        Some(Duration::from_secs(90))
    );
    let earlier = httpdate::fmt_http_date(now - Duration::from_secs(90));
    assert_eq!(parse_retry_after(&earlier, now), Some(Duration::ZERO));
    for garbage in ["", "-5", "soon", "1.5"] {
        assert_eq!(parse_retry_after(garbage, now), None, "{garbage:?}");
    }
}

#[test]
fn the_claim_refuses_a_resend_past_the_horizon() {
    let horizon = DAY - Duration::from_secs(10);
    assert!(
        resend_is_still_safe(PLAIN, false, DAY * 5),
        "never landed: always safe"
    );
    assert!(!resend_is_still_safe(PLAIN, true, Duration::ZERO));
    assert!(resend_is_still_safe(IDEMPOTENT, true, horizon - SECOND));
    assert!(!resend_is_still_safe(IDEMPOTENT, true, horizon));
    assert!(matches!(
        decide_unsent_resend(sink(true, true), landed(first(horizon)), BACKOFF),
        Decision::Reconcile { .. }
    ));
    assert!(matches!(
        decide_unsent_resend(IDEMPOTENT, landed(first(horizon)), BACKOFF),
        Decision::Review(_)
    ));
}

#[test]
fn reconciliation_answers() {
    let policy = sink(false, true);
    let history = landed(first(Duration::from_secs(10)));
    let read = |status, body: &str| Reconciliation::from_answer(status, None, body.as_bytes());
    let decide = |answer: &Reconciliation, policy, history| {
        decide_reconciliation(answer, policy, history, BACKOFF)
    };
    assert_eq!(
        decide(&read(200, r#"{"status":"completed"}"#), policy, history),
        Decision::Complete
    );
    assert!(matches!(
        decide(&read(200, r#"{"status":"failed"}"#), policy, history),
        Decision::Fail(_)
    ));
    assert!(
        matches!(decide(&read(200, r#"{"status":"pending"}"#), policy, history), Decision::Reconcile { after, .. } if after == BACKOFF.reconciliation)
    );
    assert!(matches!(
        decide(&read(503, ""), policy, history),
        Decision::Reconcile { .. }
    ));
    let busy = Reconciliation::from_answer(429, Some(Duration::from_secs(300)), b"");
    assert!(
        matches!(decide(&busy, policy, history), Decision::Reconcile { after, .. } if after == Duration::from_secs(300))
    );
    assert!(matches!(
        decide(&read(404, ""), policy, history),
        Decision::Review(_)
    ));
    assert!(matches!(
        decide(&read(200, r#"{"status":"weird"}"#), policy, history),
        Decision::Review(_)
    ));
    // An idempotent sink that does not know the key, within retention: send again,
    // after a delay, and only while resends are left.
    assert_eq!(
        decide(&read(404, ""), sink(true, true), history),
        Decision::Retry {
            after: BACKOFF.attempt
        }
    );
    let spent = History {
        attempts: 10,
        ..history
    };
    assert!(matches!(
        decide(&read(404, ""), sink(true, true), spent),
        Decision::Review(_)
    ));
    let late = landed(first(DAY * 2));
    assert!(matches!(
        decide(&read(404, ""), sink(true, true), late),
        Decision::Review(_)
    ));
}

#[test]
fn reconciliation_ends_in_review_after_its_horizon() {
    let policy = sink(false, true);
    let history = History {
        uncertain_age: DAY - Duration::from_secs(7),
        ..landed(first(DAY))
    };
    for answer in [
        Reconciliation::Pending,
        Reconciliation::Unreachable {
            reason: "status_url answered 503".into(),
            retry_after: None,
        },
    ] {
        let decision = decide_reconciliation(&answer, policy, history, BACKOFF);
        assert!(
            matches!(&decision, Decision::Review(reason) if reason.contains("reconcile_for_secs")),
            "{decision:?}"
        );
    }
}

#[test]
fn signature_headers_verify_with_our_verifier_and_every_secret() {
    use crate::headers::Headers;
    use crate::verify::{Provider, VerifyContext, decode_standard_secret};
    let old = decode_standard_secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").expect("secret");
    let new = decode_standard_secret("whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD").expect("secret");
    let body = br#"{"operation_key":"order.paid:acme:o1"}"#;
    let headers = signature_headers(
        &[old.clone(), new.clone()],
        "order.paid:acme:o1",
        1_700_000_000,
        body,
    );
    let view: Headers = headers
        .iter()
        .map(|(name, value)| (*name, value.as_bytes()))
        .collect();
    for secret in [old, new] {
        let context = VerifyContext {
            secrets: std::slice::from_ref(&secret),
            public_keys: &[],
            tolerance_secs: 300,
            now_unix_secs: 1_700_000_000,
        };
        assert_eq!(
            crate::provider::verify(Provider::Standard, &view, body, context),
            Ok(())
        );
    }
}

#[test]
fn status_url_encodes_the_key() {
    assert_eq!(
        status_url("http://s/ops/{key}", "order.paid:acme:o 1/x"),
        "http://s/ops/order.paid%3Aacme%3Ao%201%2Fx"
    );
}
