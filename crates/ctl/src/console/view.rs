//! How the console shows what a sender or a sink wrote: as text only. Control and
//! bidirectional-override characters become visible escapes (as in the terminal), the
//! templates then escape HTML, and a payload is pretty-printed up to a bound with its size
//! said. Times are shown in UTC with their age.

use chrono::{DateTime, Utc};

use crate::output::terminal_safe;

/// The most of a payload a page shows.
pub const PAYLOAD_SHOWN_BYTES: usize = 64 * 1024;

/// Text a sender, a sink or an operator wrote, with every control character visible.
pub fn text(value: &str) -> String {
    terminal_safe(value).into_owned()
}

/// An optional text, `-` when absent.
pub fn text_or_dash(value: Option<&str>) -> String {
    value.map_or_else(|| "-".to_owned(), text)
}

/// A payload as stored, pretty-printed, cut at [`PAYLOAD_SHOWN_BYTES`].
#[derive(Debug, Clone)]
pub struct PayloadView {
    /// What is shown.
    pub shown: String,
    /// The stored text's size in bytes.
    pub bytes: usize,
    /// Whether `shown` is cut.
    pub truncated: bool,
}

/// The stored JSON text `stored`, pretty-printed (as is when it does not parse), with its
/// control characters escaped, cut at a character boundary.
pub fn payload(stored: &str) -> PayloadView {
    let pretty = serde_json::from_str::<serde_json::Value>(stored)
        .ok()
        .and_then(|value| serde_json::to_string_pretty(&value).ok())
        .unwrap_or_else(|| stored.to_owned());
    // JSON escapes control characters inside strings; the bidi overrides it keeps are
    // made visible here (a layout character is a control character to terminal_safe only
    // where it is not a newline or an indent).
    let visible: String = pretty
        .lines()
        .map(|line| terminal_safe(line).into_owned())
        .collect::<Vec<_>>()
        .join("\n");
    let truncated = visible.len() > PAYLOAD_SHOWN_BYTES;
    let mut end = visible.len().min(PAYLOAD_SHOWN_BYTES);
    while !visible.is_char_boundary(end) {
        end -= 1;
    }
    PayloadView {
        shown: visible[..end].to_owned(),
        bytes: stored.len(),
        truncated,
    }
}

/// A moment as `2026-12-04 14:05:09 UTC`.
pub fn time(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// An optional moment, `-` when absent.
pub fn time_or_dash(at: Option<DateTime<Utc>>) -> String {
    at.map_or_else(|| "-".to_owned(), time)
}

/// A number of seconds as a short age: `42 s`, `7 min`, `3 h 5 min`, `2 d 4 h`.
pub fn age(seconds: f64) -> String {
    let seconds = seconds.max(0.0) as u64;
    match seconds {
        0..60 => format!("{seconds} s"),
        60..3600 => format!("{} min", seconds / 60),
        3600..86_400 => format!("{} h {} min", seconds / 3600, seconds % 3600 / 60),
        _ => format!("{} d {} h", seconds / 86_400, seconds % 86_400 / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_and_bidi_characters_are_shown_as_escapes() {
        assert_eq!(text("a\u{7}b\u{202e}c"), "a\\u{7}b\\u{202e}c");
        assert_eq!(text_or_dash(None), "-");
    }

    #[test]
    fn a_payload_is_pretty_printed_and_cut_with_its_size_said() {
        let shown = payload(r#"{"a":"x\u0000\u202e"}"#);
        assert!(shown.shown.contains("\\u0000"), "{}", shown.shown);
        assert!(shown.shown.contains("\\u{202e}"), "{}", shown.shown);
        assert!(!shown.truncated);
        let big = format!(r#"{{"a":"{}"}}"#, "é".repeat(PAYLOAD_SHOWN_BYTES));
        let cut = payload(&big);
        assert!(cut.truncated);
        assert!(cut.shown.len() <= PAYLOAD_SHOWN_BYTES);
        assert_eq!(cut.bytes, big.len());
        assert_eq!(payload("not json").shown, "not json");
    }

    #[test]
    fn ages_are_short() {
        assert_eq!(age(42.0), "42 s");
        assert_eq!(age(420.0), "7 min");
        assert_eq!(age(3.0 * 3600.0 + 300.0), "3 h 5 min");
        assert_eq!(age(2.0 * 86_400.0 + 4.0 * 3600.0), "2 d 4 h");
        assert_eq!(age(-5.0), "0 s");
    }
}
