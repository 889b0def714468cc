//! Text a sender, a sink or a person wrote, made safe to show: every control character
//! and every invisible or line-breaking one escaped ([`terminal_safe`]), so one line shown
//! is one line seen in a terminal or a page; and a person's name as the audit trail
//! records it ([`person_name`]). One rule for `inboundctl`'s lines and the console's pages.

use std::borrow::Cow;

/// `text` with every control character escaped as Rust writes it in a literal (`\u{1b}`,
/// `\n`), and every invisible or line-breaking one ([`invisible`]: bidirectional overrides,
/// zero-width characters, U+2028) as `\u{202e}`; everything else, any script, as it is.
pub fn terminal_safe(text: &str) -> Cow<'_, str> {
    let unsafe_char = |c: char| c.is_control() || invisible(c);
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut escaped = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_control() {
            escaped.extend(c.escape_debug());
        } else if invisible(c) {
            escaped.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            escaped.push(c);
        }
    }
    Cow::Owned(escaped)
}

/// `raw` as a person's name the audit trail records: trimmed, not empty, at most
/// `max_chars` characters, none of them a control or invisible character ([`invisible`]:
/// a zero-width space makes `al\u{200b}ice` another name that reads as `alice` in psql, an
/// export or a SIEM) or a comma (how a proxy that appends joins a client's value to its
/// own). `None` when it is not one.
pub fn person_name(raw: &str, max_chars: usize) -> Option<String> {
    let name = raw.trim();
    let usable = name
        .chars()
        .all(|c| !c.is_control() && !invisible(c) && c != ',');
    (usable && !name.is_empty() && name.chars().count() <= max_chars).then(|| name.to_owned())
}

/// A character that shows nothing or breaks a line where none is seen: every Unicode
/// `Default_Ignorable_Code_Point` (DerivedCoreProperties.txt: the soft hyphen, the
/// combining grapheme joiner, the Arabic letter mark, Hangul and Khmer fillers, Mongolian
/// variation selectors, zero-width spaces, joiners and direction marks, the bidirectional
/// embeddings, overrides and isolates, invisible operators, variation selectors, a
/// byte-order mark, shorthand format controls, musical symbol format controls, tag
/// characters and the unassigned rest of those blocks), the line and paragraph separators,
/// and the interlinear annotation marks.
pub fn invisible(c: char) -> bool {
    matches!(c,
        '\u{ad}' | '\u{34f}' | '\u{61c}' | '\u{115f}'..='\u{1160}' | '\u{17b4}'..='\u{17b5}'
        | '\u{180b}'..='\u{180f}' | '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}'
        | '\u{2060}'..='\u{206f}' | '\u{3164}' | '\u{fe00}'..='\u{fe0f}' | '\u{feff}'
        | '\u{ffa0}' | '\u{fff0}'..='\u{fffb}' | '\u{1bca0}'..='\u{1bca3}'
        | '\u{1d173}'..='\u{1d17a}' | '\u{e0000}'..='\u{e0fff}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_and_overrides_are_escaped_and_the_rest_kept() {
        assert_eq!(
            terminal_safe("evt_\u{1b}[31m\u{9b}2J\r\nline\u{7f}\u{202e}é漢"),
            "evt_\\u{1b}[31m\\u{9b}2J\\r\\nline\\u{7f}\\u{202e}é漢"
        );
        assert!(matches!(terminal_safe("plain évent"), Cow::Borrowed(_)));
    }

    /// Characters that are invisible or break a line where none is seen — a soft hyphen,
    /// zero-width spaces and joiners, the marks that turn text around, the line and
    /// paragraph separators, a byte-order mark, tag characters — would make two ids look
    /// alike or a payload show a line it does not hold: each is shown as an escape.
    #[test]
    fn invisible_and_line_breaking_characters_are_escaped() {
        for invisible in [
            '\u{ad}',
            '\u{61c}',
            '\u{180e}',
            '\u{200b}',
            '\u{200d}',
            '\u{200f}',
            '\u{2028}',
            '\u{2029}',
            '\u{2060}',
            '\u{2066}',
            '\u{206f}',
            '\u{feff}',
            '\u{fff9}',
            '\u{e0041}',
        ] {
            let text = format!("evt_1{invisible}");
            assert_eq!(
                terminal_safe(&text),
                format!("evt_1\\u{{{:x}}}", invisible as u32),
                "U+{:04X}",
                invisible as u32
            );
        }
    }

    #[test]
    fn controls_and_invisibles_are_escaped_and_names_refused_with_them() {
        assert_eq!(terminal_safe("a\u{1b}[31mb\nc"), "a\\u{1b}[31mb\\nc");
        assert_eq!(terminal_safe("x\u{202e}y\u{fe0f}"), "x\\u{202e}y\\u{fe0f}");
        assert_eq!(terminal_safe("plain é"), "plain é");
        assert_eq!(person_name(" alice ", 200).as_deref(), Some("alice"));
        assert_eq!(person_name("al\u{200b}ice", 200), None);
        assert_eq!(person_name("a,b", 200), None);
        assert_eq!(person_name("abc", 2), None);
    }
}
