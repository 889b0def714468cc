//! How the console shows what a sender or a sink wrote: as text only. Control and
//! bidirectional-override characters become visible escapes (as in the terminal), the
//! templates then escape HTML, and a payload is pretty-printed up to a bound with its size
//! said. Times are shown in UTC with their age.

use chrono::{DateTime, Utc};

use crate::output::terminal_safe;

/// The most of a payload a page shows, in characters (PostgreSQL cuts it: what leaves
/// the database is bounded however large the payload).
pub const PAYLOAD_SHOWN_CHARS: i32 = 64 * 1024;

/// Text a sender, a sink or an operator wrote, with every control character visible.
pub fn text(value: &str) -> String {
    terminal_safe(value).into_owned()
}

/// An optional text, `-` when absent.
pub fn text_or_dash(value: Option<&str>) -> String {
    value.map_or_else(|| "-".to_owned(), text)
}

/// A payload's start as a page shows it.
#[derive(Debug, Clone)]
pub struct PayloadView {
    /// What is shown.
    pub shown: String,
    /// The stored payload's size in bytes.
    pub bytes: i64,
    /// Whether `shown` is cut.
    pub truncated: bool,
}

/// The excerpt PostgreSQL pretty-printed, each line with its control and invisible
/// characters made visible (JSON escapes control characters inside strings; a U+2028 or a
/// bidi override it keeps would otherwise fake a line or turn text around).
pub fn payload(excerpt: &inbound_store::admin::PayloadExcerpt) -> PayloadView {
    let shown = excerpt
        .text
        .lines()
        .map(|line| terminal_safe(line).into_owned())
        .collect::<Vec<_>>()
        .join("\n");
    PayloadView {
        shown,
        bytes: excerpt.bytes,
        truncated: excerpt.truncated,
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
    fn a_payloads_lines_show_their_invisible_characters() {
        let excerpt = inbound_store::admin::PayloadExcerpt {
            text: "{\n    \"a\": \"x\\u0000\u{202e}\u{2028}y\"\n}".to_owned(),
            truncated: true,
            bytes: 70_000,
        };
        let shown = payload(&excerpt);
        assert!(shown.shown.contains("\\u0000"), "{}", shown.shown);
        assert!(
            shown.shown.contains("\\u{202e}\\u{2028}y"),
            "{}",
            shown.shown
        );
        assert_eq!(shown.shown.lines().count(), 3);
        assert!(shown.truncated);
        assert_eq!(shown.bytes, 70_000);
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
