//! The storability contract (`inbound_core::payload`) against PostgreSQL itself: every body
//! the contract accepts is stored by `jsonb` and decoded by the worker to the same value,
//! and every body `jsonb` refuses is refused by the contract — for hand-picked edge cases
//! and for generated ones.

use inbound_core::payload::{self, Unstorable};
use inbound_tests::TestDatabase;
use proptest::prelude::*;
use serde_json::Value;
use sqlx::PgPool;

/// What PostgreSQL makes of `body` as `jsonb`: its text form, or the error.
async fn stored_text(pool: &PgPool, body: &str) -> Result<String, String> {
    sqlx::query_scalar("SELECT $1::jsonb::text")
        .bind(body)
        .fetch_one(pool)
        .await
        .map_err(|error| error.to_string())
}

/// Equal as JSON values: numbers compare by value, whichever form each side wrote.
fn same_value(left: &Value, right: &Value) -> bool {
    match (left, right) {
        (Value::Number(left), Value::Number(right)) => match (left.as_i64(), right.as_i64()) {
            (Some(left), Some(right)) => left == right,
            _ => left.as_f64() == right.as_f64(),
        },
        (Value::Array(left), Value::Array(right)) => {
            left.len() == right.len() && left.iter().zip(right).all(|(l, r)| same_value(l, r))
        }
        (Value::Object(left), Value::Object(right)) => {
            left.len() == right.len()
                && left
                    .iter()
                    .all(|(key, l)| right.get(key).is_some_and(|r| same_value(l, r)))
        }
        _ => left == right,
    }
}

/// The contract's verdict and PostgreSQL's agree, and what is accepted reads back as sent.
async fn assert_agrees(pool: &PgPool, body: &str) {
    let shown: String = body.chars().take(80).collect();
    let verdict = payload::check_storable(body.as_bytes());
    match stored_text(pool, body).await {
        Err(error) => assert!(
            verdict.is_err(),
            "jsonb refuses {shown:?} ({error}) but the contract accepts it"
        ),
        Ok(text) if verdict.is_ok() => {
            // jsonb adds at most a space per byte; numbers grow by at most the bound.
            assert!(
                text.len() <= 2 * body.len() + payload::MAX_NUMBER_GROWTH_BYTES,
                "{shown:?} ({} bytes) is stored as {} bytes",
                body.len(),
                text.len()
            );
            let read_back = payload::decode(&text).unwrap_or_else(|error| {
                panic!("the worker cannot decode the stored form of {shown:?}: {error}")
            });
            let sent: Value = serde_json::from_str(body).expect("accepted bodies parse");
            assert!(
                same_value(&sent, &read_back),
                "{shown:?} reads back as {read_back}"
            );
        }
        // Stored, yet refused: numbers the worker's decoder cannot read, or that jsonb
        // writes out far longer than they were sent.
        Ok(text) if verdict == Err(Unstorable::NumbersTooLong) => assert!(
            text.len() > payload::MAX_NUMBER_GROWTH_BYTES,
            "{shown:?} is refused as too long although it is stored as {} bytes",
            text.len()
        ),
        Ok(text) => {
            assert_eq!(
                verdict,
                Err(Unstorable::NumberOutOfRange),
                "{shown:?} is refused although jsonb stores it"
            );
            assert!(
                payload::decode(&text).is_err(),
                "{shown:?} is refused although the worker reads its stored form"
            );
        }
    }
}

const EDGE_CASES: &[&str] = &[
    r#"{"a":"\u0000"}"#,
    r#"{"a":"\\u0000"}"#,
    r#"{"\u0000":1}"#,
    r#"{"a":"\ud83d"}"#,
    r#"{"a":"\ude00"}"#,
    r#"{"a":"\ud83d\ude00"}"#,
    r#"{"a":"\ud83d\u0041"}"#,
    r#"{"a":"\ud83dx"}"#,
    r#"{"n":1e400}"#,
    r#"{"n":-1e400}"#,
    r#"{"n":1e308}"#,
    r#"{"n":1.7976931348623157e308}"#,
    r#"{"n":1.7976931348623158e308}"#,
    r#"{"n":1.797693134862316e308}"#,
    r#"{"n":1e-400}"#,
    r#"{"n":1e-16383}"#,
    r#"{"n":[1e-16383,1e-16383,1e-16383,1e-16383,1e-16383]}"#,
    r#"{"n":[1e300,1e300,1e300,1e300,1e300,1e300,1e300,1e300,1e300,1e300]}"#,
    r#"{"n":1e-16384}"#,
    r#"{"n":0.1e-16382}"#,
    r#"{"n":0.1e-16383}"#,
    r#"{"n":0.0e-16383}"#,
    r#"{"n":0e1073741822}"#,
    r#"{"n":0e1073741823}"#,
    r#"{"n":0e-1073741823}"#,
    r#"{"n":1e1000000}"#,
    r#"{"n":1e-1000000}"#,
    r#"{"n":18446744073709551615}"#,
    r#"{"n":18446744073709551616}"#,
    r#"{"n":-9223372036854775808}"#,
    r#"{"n":-9223372036854775809}"#,
    r#"{"n":-0}"#,
    r#"{"n":-0.0e5}"#,
    r#"{"n":1E+2}"#,
    r#"{"n":4.9e-324}"#,
    r#"{"n":2.2250738585072014e-308}"#,
    r#"{"dup":1,"dup":2}"#,
];

#[tokio::test]
async fn the_contract_agrees_with_jsonb_and_the_decoder_on_edge_cases() {
    let database = TestDatabase::create().await;
    for body in EDGE_CASES {
        assert_agrees(database.pool(), body).await;
    }
    let long_fraction = format!(r#"{{"n":0.{}1}}"#, "0".repeat(16_382));
    let too_long_fraction = format!(r#"{{"n":0.{}1}}"#, "0".repeat(16_383));
    let long_integer = format!(r#"{{"n":1{}}}"#, "0".repeat(308));
    let too_long_integer = format!(r#"{{"n":1{}}}"#, "0".repeat(309));
    for body in [
        long_fraction,
        too_long_fraction,
        long_integer,
        too_long_integer,
    ] {
        assert_agrees(database.pool(), &body).await;
    }
}

/// A JSON number written the many ways senders write them.
fn number_text() -> impl Strategy<Value = String> {
    (
        any::<bool>(),
        "(0|[1-9][0-9]{0,25})",
        prop::option::of("[0-9]{1,30}"),
        prop::option::of((
            prop_oneof![Just("e"), Just("E")],
            prop_oneof![Just(""), Just("+"), Just("-")],
            prop_oneof![
                (0u32..400).prop_map(|e| e.to_string()),
                (16_370u32..16_400).prop_map(|e| e.to_string()),
                Just("1073741822".to_owned()),
                Just("1073741823".to_owned()),
                "[0-9]{1,12}",
            ],
        )),
    )
        .prop_map(|(negative, integer, fraction, exponent)| {
            let mut text = String::new();
            if negative {
                text.push('-');
            }
            text.push_str(&integer);
            if let Some(fraction) = fraction {
                text.push('.');
                text.push_str(&fraction);
            }
            if let Some((e, sign, digits)) = exponent {
                text.push_str(e);
                text.push_str(sign);
                text.push_str(&digits);
            }
            text
        })
}

/// A JSON string body (between the quotes), with escapes that pair, dangle or spell NUL.
fn string_text() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            "[a-z ]{1,4}",
            Just("\\u0000".to_owned()),
            Just("\\\\u0000".to_owned()),
            Just("\\ud83d".to_owned()),
            Just("\\ude00".to_owned()),
            Just("\\ud83d\\ude00".to_owned()),
            Just("\\u00e9".to_owned()),
            Just("\\n\\\"\\/".to_owned()),
            Just("é😀".to_owned()),
        ],
        0..4,
    )
    .prop_map(|parts| parts.concat())
}

fn value_text() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        number_text(),
        string_text().prop_map(|text| format!("\"{text}\"")),
        Just("true".to_owned()),
        Just("null".to_owned()),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4)
                .prop_map(|items| format!("[{}]", items.join(","))),
            prop::collection::vec((string_text(), inner), 0..4).prop_map(object_text),
        ]
    })
}

/// An object of `entries`. Keys get their position appended: with a repeated key, jsonb
/// keeps only the last value, so a refused number it overwrote would not be read back at
/// all (the contract still refuses it; `{"dup":1,"dup":2}` is among the edge cases).
fn object_text(entries: Vec<(String, String)>) -> String {
    let entries: Vec<String> = entries
        .into_iter()
        .enumerate()
        .map(|(position, (key, value))| format!("\"{key}{position}\":{value}"))
        .collect();
    format!("{{{}}}", entries.join(","))
}

fn body_text() -> impl Strategy<Value = String> {
    prop::collection::vec((string_text(), value_text()), 1..4).prop_map(object_text)
}

#[test]
fn the_contract_agrees_with_jsonb_and_the_decoder_on_generated_bodies() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let database = runtime.block_on(TestDatabase::create());
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 400,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    runner
        .run(&body_text(), |body| {
            runtime.block_on(assert_agrees(database.pool(), &body));
            Ok(())
        })
        .unwrap_or_else(|failure| panic!("{failure}"));
    drop(database);
}
