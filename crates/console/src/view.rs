//! How the console shows what a sender or a sink wrote: as text only. Control and
//! bidirectional-override characters become visible escapes (as in the terminal), the
//! templates then escape HTML, and a payload is pretty-printed up to a bound with its size
//! said. Times are shown in UTC with their age.

use chrono::{DateTime, Utc};

use inbound_core::display::terminal_safe;

/// The most of a payload's stored text a page reads, and the most it shows once indented,
/// in characters: PostgreSQL cuts the stored text (rendered once, never pretty-printed
/// there), the console indents the cut text, so the work of a page is bounded by its
/// size, not by the payload's size or depth.
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

/// The excerpt PostgreSQL cut, indented ([`indent_json`]) and cut again at
/// [`PAYLOAD_SHOWN_CHARS`], each line with its control and invisible characters made
/// visible (JSON escapes control characters inside strings; a U+2028 or a bidi override
/// it keeps would otherwise fake a line or turn text around).
pub fn payload(excerpt: &inbound_store::admin::PayloadExcerpt) -> PayloadView {
    let limit = usize::try_from(PAYLOAD_SHOWN_CHARS).unwrap_or(usize::MAX);
    let (indented, cut) = indent_json(&excerpt.text, limit);
    let shown = indented
        .lines()
        .map(|line| terminal_safe(line).into_owned())
        .collect::<Vec<_>>()
        .join("\n");
    PayloadView {
        shown,
        bytes: excerpt.bytes,
        truncated: excerpt.truncated || cut,
    }
}

/// `json` — JSON text as PostgreSQL renders a stored payload, perhaps cut anywhere —
/// with one member or element per line and four spaces per level, as `jsonb_pretty`
/// writes it; strings and numbers exactly as they are. Reads `json` once and writes at
/// most `max_chars` characters; whether it stopped there. An unfinished string or
/// structure at the end of a cut text is shown as far as it goes.
pub fn indent_json(json: &str, max_chars: usize) -> (String, bool) {
    let mut out = String::with_capacity(json.len().min(max_chars) + 64);
    let mut written = 0_usize;
    let mut depth = 0_usize;
    let mut in_string = false;
    let mut escaped = false;
    let mut chars = json.chars().peekable();
    // Appends `text` unless the budget is spent; false once it is.
    let mut emit = |out: &mut String, text: &str| -> bool {
        let count = text.chars().count();
        if written + count > max_chars {
            out.extend(text.chars().take(max_chars - written));
            written = max_chars;
            return false;
        }
        out.push_str(text);
        written += count;
        true
    };
    let newline = |depth: usize| format!("\n{}", "    ".repeat(depth));
    while let Some(c) = chars.next() {
        let mut buffer = [0_u8; 4];
        let fits = if in_string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            emit(&mut out, c.encode_utf8(&mut buffer))
        } else {
            match c {
                '"' => {
                    in_string = true;
                    emit(&mut out, "\"")
                }
                '{' | '[' => {
                    while chars.next_if(|next| next.is_whitespace()).is_some() {}
                    let close = if c == '{' { '}' } else { ']' };
                    if chars.next_if_eq(&close).is_some() {
                        emit(&mut out, if c == '{' { "{}" } else { "[]" })
                    } else {
                        depth += 1;
                        emit(&mut out, c.encode_utf8(&mut buffer))
                            && emit(&mut out, &newline(depth))
                    }
                }
                '}' | ']' => {
                    depth = depth.saturating_sub(1);
                    emit(&mut out, &newline(depth)) && emit(&mut out, c.encode_utf8(&mut buffer))
                }
                ',' => emit(&mut out, ",") && emit(&mut out, &newline(depth)),
                ':' => emit(&mut out, ": "),
                c if c.is_whitespace() => true,
                c => emit(&mut out, c.encode_utf8(&mut buffer)),
            }
        };
        if !fits {
            return (out, true);
        }
    }
    (out, false)
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
            text: "{\"a\": \"x\\u0000\u{202e}\u{2028}y\"}".to_owned(),
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

    /// Indented as PostgreSQL's `jsonb_pretty` writes it: strings (with their commas,
    /// colons, brackets and escaped quotes) and numbers exactly as stored.
    #[test]
    fn json_is_indented_as_jsonb_pretty_writes_it() {
        let stored = r#"{"a": [1, 10.50, {}], "b": {"c\"]": "x, y: {z}"}, "d": []}"#;
        let expected = "{\n    \"a\": [\n        1,\n        10.50,\n        {}\n    ],\n    \"b\": {\n        \"c\\\"]\": \"x, y: {z}\"\n    },\n    \"d\": []\n}";
        assert_eq!(indent_json(stored, 1_000), (expected.to_owned(), false));
    }

    /// A cut text is indented as far as it goes, and the output stops at its bound
    /// however deep the nesting (62 levels of indentation per element would otherwise
    /// make a 1 MiB payload 133 MB: red team 2026-12-05, F1).
    #[test]
    fn a_cut_or_deep_text_is_shown_within_the_bound() {
        let (cut, stopped) = indent_json(r#"{"a": [1, 2, "unfinish"#, 1_000);
        assert_eq!(
            cut,
            "{\n    \"a\": [\n        1,\n        2,\n        \"unfinish"
        );
        assert!(!stopped);
        let deep = format!("{}{}", "[".repeat(62), vec!["0"; 20_000].join(", "));
        let (shown, stopped) = indent_json(&deep, 65_536);
        assert!(stopped);
        assert_eq!(shown.chars().count(), 65_536);
        let multibyte = "\"é\"".repeat(10);
        let (shown, stopped) = indent_json(&multibyte, 7);
        assert_eq!((shown.as_str(), stopped), ("\"é\"\"é\"\"", true));
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
