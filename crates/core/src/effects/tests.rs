//! Every outcome rule, for sinks with and without idempotency support.

use super::*;

const DAY: Duration = Duration::from_secs(86_400);
const BACKOFF: Duration = Duration::from_secs(4);

fn sink(idempotent: bool, reconcilable: bool) -> SinkPolicy {
    SinkPolicy {
        idempotent,
        retention: DAY,
        reconcilable,
    }
}

fn first(age: Duration) -> History {
    History {
        maybe_delivered: false,
        first_attempt_age: age,
        attempts: 1,
        max_attempts: 10,
    }
}

const IDEMPOTENT: SinkPolicy = SinkPolicy {
    idempotent: true,
    retention: DAY,
    reconcilable: false,
};
const PLAIN: SinkPolicy = SinkPolicy {
    idempotent: false,
    retention: DAY,
    reconcilable: false,
};

#[test]
fn success_completes_and_rejection_fails_for_every_sink() {
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
fn idempotent_sink_retries_maybe_delivered_attempts_within_retention_only() {
    let maybe = [
        Delivery::Unknown("timeout".into()),
        Delivery::Unknown("connection reset".into()),
        Delivery::from_status(500, None),
        Delivery::from_status(503, None),
        Delivery::from_status(409, None),
    ];
    for delivery in &maybe {
        assert_eq!(
            decide(
                delivery,
                IDEMPOTENT,
                first(Duration::from_secs(60)),
                BACKOFF
            ),
            Decision::Retry { after: BACKOFF },
            "{delivery:?}"
        );
        let late = decide(
            delivery,
            IDEMPOTENT,
            first(DAY + Duration::from_secs(1)),
            BACKOFF,
        );
        assert!(
            matches!(late, Decision::Review(_)),
            "{delivery:?} past retention: {late:?}"
        );
        let late = decide(
            delivery,
            sink(true, true),
            first(DAY + Duration::from_secs(1)),
            BACKOFF,
        );
        assert!(
            matches!(late, Decision::Reconcile { .. }),
            "{delivery:?} past retention with status_url: {late:?}"
        );
    }
    for status in [408, 425, 429] {
        assert_eq!(
            decide(
                &Delivery::from_status(status, None),
                IDEMPOTENT,
                first(Duration::ZERO),
                BACKOFF
            ),
            Decision::Retry { after: BACKOFF }
        );
    }
}

#[test]
fn plain_sink_never_resends_what_may_have_landed() {
    for delivery in [
        Delivery::Unknown("timeout".into()),
        Delivery::Unknown("reset".into()),
        Delivery::from_status(502, None),
    ] {
        assert!(
            matches!(
                decide(&delivery, PLAIN, first(Duration::ZERO), BACKOFF),
                Decision::Review(_)
            ),
            "{delivery:?}"
        );
        assert!(
            matches!(
                decide(&delivery, sink(false, true), first(Duration::ZERO), BACKOFF),
                Decision::Reconcile { .. }
            ),
            "{delivery:?}"
        );
    }
    // Proven not sent, or the receiver says it did not act: safe to retry.
    assert_eq!(
        decide(
            &Delivery::NotSent("connection refused".into()),
            PLAIN,
            first(Duration::ZERO),
            BACKOFF
        ),
        Decision::Retry { after: BACKOFF }
    );
    assert_eq!(
        decide(
            &Delivery::from_status(429, None),
            PLAIN,
            first(Duration::ZERO),
            BACKOFF
        ),
        Decision::Retry { after: BACKOFF }
    );
    // ... unless an earlier attempt may have landed.
    let after_unknown = History {
        maybe_delivered: true,
        ..first(Duration::ZERO)
    };
    assert!(matches!(
        decide(
            &Delivery::NotSent("refused".into()),
            PLAIN,
            after_unknown,
            BACKOFF
        ),
        Decision::Review(_)
    ));
    assert_eq!(
        decide(
            &Delivery::NotSent("refused".into()),
            IDEMPOTENT,
            after_unknown,
            BACKOFF
        ),
        Decision::Retry { after: BACKOFF }
    );
}

#[test]
fn retry_after_is_honoured_and_safe_retries_are_bounded() {
    let slow_down = Delivery::from_status(429, Some(Duration::from_secs(30)));
    assert_eq!(
        decide(&slow_down, PLAIN, first(Duration::ZERO), BACKOFF),
        Decision::Retry {
            after: Duration::from_secs(30)
        }
    );
    let exhausted = History {
        attempts: 10,
        ..first(Duration::ZERO)
    };
    assert!(
        matches!(
            decide(
                &Delivery::NotSent("refused".into()),
                PLAIN,
                exhausted,
                BACKOFF
            ),
            Decision::Fail(_)
        ),
        "never sent: failed"
    );
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
        "may have landed: review"
    );
}

#[test]
fn reconciliation_answers() {
    let policy = sink(false, true);
    let history = first(Duration::from_secs(10));
    let read = |status, body: &str| Reconciliation::from_answer(status, body.as_bytes());
    assert_eq!(
        decide_reconciliation(
            &read(200, r#"{"status":"completed"}"#),
            policy,
            history,
            BACKOFF
        ),
        Decision::Complete
    );
    assert!(matches!(
        decide_reconciliation(
            &read(200, r#"{"status":"failed"}"#),
            policy,
            history,
            BACKOFF
        ),
        Decision::Fail(_)
    ));
    assert!(
        matches!(decide_reconciliation(&read(200, r#"{"status":"pending"}"#), policy, history, BACKOFF), Decision::Reconcile { after, .. } if after == BACKOFF)
    );
    assert!(matches!(
        decide_reconciliation(&read(503, ""), policy, history, BACKOFF),
        Decision::Reconcile { .. }
    ));
    assert!(matches!(
        decide_reconciliation(&read(404, ""), policy, history, BACKOFF),
        Decision::Review(_)
    ));
    assert!(matches!(
        decide_reconciliation(
            &read(200, r#"{"status":"weird"}"#),
            policy,
            history,
            BACKOFF
        ),
        Decision::Review(_)
    ));
    // An idempotent sink that does not know the key, within retention: send again.
    assert_eq!(
        decide_reconciliation(&read(404, ""), sink(true, true), history, BACKOFF),
        Decision::Retry {
            after: Duration::ZERO
        }
    );
    let late = first(DAY * 2);
    assert!(matches!(
        decide_reconciliation(&read(404, ""), sink(true, true), late, BACKOFF),
        Decision::Review(_)
    ));
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
            tolerance_secs: 300,
            now_unix_secs: 1_700_000_000,
        };
        assert_eq!(
            crate::verify::verify(Provider::Standard, &view, body, context),
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
