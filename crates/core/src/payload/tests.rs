//! The storability contract, rule by rule. `tests/tests/it/storability.rs` holds the same
//! cases against PostgreSQL itself.

use super::*;

fn verdict(body: &str) -> Result<(), Unstorable> {
    check_storable(body.as_bytes()).map(|_| ())
}

#[test]
fn ordinary_bodies_are_storable() {
    for body in [
        r#"{}"#,
        r#" {"id":"evt_1","n":[1,-2,3.5,1e10,-0,0.0,1E+2,2e-5],"b":true,"z":null}"#,
        r#"{"emoji":"\ud83d\ude00","text":"caf\u00e9","slash":"\/"}"#,
        r#"{"quoted":"use \\u0000 to end a C string"}"#,
        r#"{"big":1e308,"small":1e-308,"tiny":1e-400,"long":12345678901234567890123}"#,
        r#"{"zero_with_huge_exponent":0e1073741822}"#,
    ] {
        assert_eq!(verdict(body), Ok(()), "{body}");
    }
}

#[test]
fn strings_jsonb_cannot_hold_are_refused() {
    for (body, why) in [
        (r#"{"a":"\u0000"}"#, Unstorable::NulCharacter),
        (r#"{"a":"text\u0000more"}"#, Unstorable::NulCharacter),
        (r#"{"\u0000":1}"#, Unstorable::NulCharacter),
        (r#"{"a":"\ud83d"}"#, Unstorable::LoneSurrogate),
        (
            r#"{"a":"cut inside an emoji \ud83d"}"#,
            Unstorable::LoneSurrogate,
        ),
        (r#"{"a":"\ude00"}"#, Unstorable::LoneSurrogate),
        (r#"{"a":"\ud83d\u0041"}"#, Unstorable::LoneSurrogate),
        (r#"{"\ud800":1}"#, Unstorable::LoneSurrogate),
    ] {
        assert_eq!(verdict(body), Err(why), "{body}");
    }
}

#[test]
fn numbers_the_decoder_or_numeric_cannot_hold_are_refused() {
    let many_fraction_digits = format!(r#"{{"n":0.{}1}}"#, "0".repeat(16_383));
    let huge_integer = format!(r#"{{"n":1{}}}"#, "0".repeat(400));
    for (body, why) in [
        (r#"{"n":1e400}"#.to_owned(), Unstorable::NumberOutOfRange),
        (r#"{"n":-1e400}"#.to_owned(), Unstorable::NumberOutOfRange),
        (huge_integer, Unstorable::NumberOutOfRange),
        (r#"{"n":1e1000000}"#.to_owned(), Unstorable::NumbersTooLong),
        (r#"{"n":1e-16384}"#.to_owned(), Unstorable::NumberTooPrecise),
        (
            r#"{"n":0.0e-16383}"#.to_owned(),
            Unstorable::NumberTooPrecise,
        ),
        (many_fraction_digits, Unstorable::NumberTooPrecise),
        (
            r#"{"n":0e1073741823}"#.to_owned(),
            Unstorable::ExponentTooLarge,
        ),
        (
            r#"{"n":0e-99999999999999999999999}"#.to_owned(),
            Unstorable::ExponentTooLarge,
        ),
        (
            r#"{"deep":[{"n":1e1000}]}"#.to_owned(),
            Unstorable::NumberOutOfRange,
        ),
    ] {
        assert_eq!(verdict(&body), Err(why), "{}", &body[..body.len().min(60)]);
    }
}

#[test]
fn numbers_that_would_be_stored_far_longer_than_written_are_refused() {
    // 1e-16383 is 8 bytes written and 16,385 stored: a few of them are fine, a body of
    // them would render to megabytes.
    let few = format!(r#"{{"n":[{}]}}"#, ["1e-16383"; 3].join(","));
    assert_eq!(verdict(&few), Ok(()));
    let many = format!(r#"{{"n":[{}]}}"#, ["1e-16383"; 5].join(","));
    assert_eq!(verdict(&many), Err(Unstorable::NumbersTooLong));
    let big = format!(r#"{{"n":[{}]}}"#, ["1e300"; 300].join(","));
    assert_eq!(verdict(&big), Err(Unstorable::NumbersTooLong));
    // Written in full, the same values cost nothing extra.
    let written_out = format!(
        r#"{{"n":[{}]}}"#,
        vec![format!("1{}", "0".repeat(300)); 300].join(",")
    );
    assert_eq!(verdict(&written_out), Ok(()));
}

#[test]
fn rendered_growth_is_counted_as_numeric_writes_numbers() {
    for (number, growth) in [
        ("1", 0),
        ("-0", 0),
        ("0e1073741822", 0),
        ("0.000", 0),
        ("1e10", 7),
        ("2e-5", 3),
        ("1.5e3", 0),
        ("0.001e5", 0),
        ("-1e-3", 1),
        ("123.456e-1", 0),
    ] {
        let bytes = number.as_bytes();
        assert_eq!(
            check_number(bytes, 0),
            Ok((bytes.len(), growth)),
            "{number}"
        );
    }
}

#[test]
fn limits_are_inclusive_where_numeric_is() {
    assert_eq!(verdict(r#"{"n":1e-16383}"#), Ok(()));
    assert_eq!(verdict(r#"{"n":0.1e-16382}"#), Ok(()));
    assert_eq!(verdict(r#"{"n":1.7976931348623157e308}"#), Ok(()));
}

#[test]
fn shapes_and_syntax_are_refused() {
    for (body, why) in [
        ("[1,2]", Unstorable::NotAnObject),
        ("\"text\"", Unstorable::NotAnObject),
        ("", Unstorable::NotAnObject),
        (r#"{"a":1"#, Unstorable::Syntax),
        (r#"{"a":1} trailing"#, Unstorable::Syntax),
        (r#"{"a":01}"#, Unstorable::Syntax),
        ("{\"a\":\"raw control char \u{1}\"}", Unstorable::Syntax),
        (r#"{"a":NaN}"#, Unstorable::Syntax),
    ] {
        assert_eq!(verdict(body), Err(why), "{body:?}");
    }
    assert_eq!(
        check_storable(&[b'{', 0xff, b'}']),
        Err(Unstorable::NotUtf8)
    );
    let deep = format!("{{\"a\":{}1{}}}", "[".repeat(64), "]".repeat(64));
    assert_eq!(verdict(&deep), Err(Unstorable::TooDeep));
    let deep_enough = format!("{{\"a\":{}1{}}}", "[".repeat(63), "]".repeat(63));
    assert_eq!(verdict(&deep_enough), Ok(()));
}

#[test]
fn brackets_and_digits_inside_strings_are_text() {
    let body = format!(
        r#"{{"a":"{}1e999999 0.{}1"}}"#,
        "[".repeat(200),
        "0".repeat(20_000)
    );
    assert_eq!(verdict(&body), Ok(()));
}

/// The scan jumps from quote to backslash inside strings: an escaped quote must not end a
/// string (what follows stays text), and an escaped backslash must not hide the quote
/// after it (what follows is read again).
#[test]
fn escapes_end_strings_exactly_where_json_does() {
    let numbers = ["1e-16383"; 5].join(",");
    let escaped_quote = format!(r#"{{"a":"\"[[[ {numbers} ]]]\\"}}"#);
    assert_eq!(verdict(&escaped_quote), Ok(()), "{escaped_quote}");
    let escaped_backslash = format!(r#"{{"a":"\\","n":[{numbers}]}}"#);
    assert_eq!(
        verdict(&escaped_backslash),
        Err(Unstorable::NumbersTooLong),
        "{escaped_backslash}"
    );
    // A backslash as the last byte of a body: refused as syntax, never read past.
    assert_eq!(verdict(r#"{"a":"\"#), Err(Unstorable::Syntax));
}

#[test]
fn reasons_never_repeat_the_content() {
    let body = r#"{"email":"jane@example.com","n":1e400}"#;
    let reason = verdict(body).expect_err("refused").to_string();
    assert!(!reason.contains("jane"), "{reason}");
}

#[test]
fn every_storable_body_decodes() {
    for body in [
        r#"{"big":1e308,"tiny":1e-400,"long":12345678901234567890123,"z":0e1073741822}"#,
        r#"{"quoted":"\\u0000","emoji":"\ud83d\ude00"}"#,
    ] {
        assert_eq!(verdict(body), Ok(()));
        decode(body).expect("decodes");
    }
}
