//! What a command prints. Standard output for commands whose output is piped:
//! `inboundctl … | head` closes the pipe early; the command then stops printing but
//! finishes its work (a migration half done because nobody read its progress would be
//! worse than the panic `println!` gives) and exits as it would have. And the one line an
//! error becomes ([`error_line`]).
//!
//! Human-readable lines ([`out!`]) hold what senders wrote (event ids, types, reasons,
//! errors, payloads): every control character in them (C0, DEL, C1 — an escape sequence
//! for the terminal, a carriage return or newline that forges a line) and every
//! bidirectional override is printed escaped (`\u{1b}`, `\n`), so one line printed is one
//! line seen. JSON and commands to paste ([`out_exact!`]) are printed exactly: a program
//! reads them.

use std::borrow::Cow;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once standard output was found closed: nothing more is written to it.
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes one human-readable line to standard output, its control characters escaped
/// ([`terminal_safe`]).
pub fn line(text: std::fmt::Arguments<'_>) {
    exact_line(&terminal_safe(&text.to_string()));
}

/// Writes one line exactly (JSON, a command to paste) to standard output.
pub fn exact(text: std::fmt::Arguments<'_>) {
    exact_line(&text.to_string());
}

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
fn invisible(c: char) -> bool {
    matches!(c,
        '\u{ad}' | '\u{34f}' | '\u{61c}' | '\u{115f}'..='\u{1160}' | '\u{17b4}'..='\u{17b5}'
        | '\u{180b}'..='\u{180f}' | '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}'
        | '\u{2060}'..='\u{206f}' | '\u{3164}' | '\u{fe00}'..='\u{fe0f}' | '\u{feff}'
        | '\u{ffa0}' | '\u{fff0}'..='\u{fffb}' | '\u{1bca0}'..='\u{1bca3}'
        | '\u{1d173}'..='\u{1d17a}' | '\u{e0000}'..='\u{e0fff}')
}

/// Writes `text` and a newline to standard output; once it is closed, writes nothing; on
/// any other write error, says so on standard error and goes on (the work matters more).
fn exact_line(text: &str) {
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut stdout = std::io::stdout().lock();
    let written = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.write_all(b"\n"))
        .and_then(|()| stdout.flush());
    if let Err(error) = written {
        STDOUT_CLOSED.store(true, Ordering::Relaxed);
        if error.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("inboundctl: cannot write the output any more: {error}");
        }
    }
}

/// `println!` for people: control characters escaped, and the command ends quietly when
/// standard output was closed.
macro_rules! out {
    () => {
        $crate::output::line(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::output::line(format_args!($($arg)*))
    };
}
pub(crate) use out;

/// `println!` for what a program reads or a shell runs (JSON, a command to paste): exactly
/// as written, and the command ends quietly when standard output was closed.
macro_rules! out_exact {
    ($($arg:tt)*) => {
        $crate::output::exact(format_args!($($arg)*))
    };
}
pub(crate) use out_exact;

/// `error` and its causes on one line, each said once, without the PostgreSQL source
/// line the driver appends to a database error (" at line 1392": a line of the server's
/// C code, meaningless to an operator).
pub fn error_line(error: &anyhow::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for cause in error.chain() {
        let text = without_server_source_line(&cause.to_string());
        // A wrapper that prints its source already said it.
        if parts.iter().any(|said| said.contains(&text)) {
            continue;
        }
        parts.push(text);
    }
    parts.join(": ")
}

/// `text` without a trailing " at line N" (digits, ending the message): what the driver
/// appends to a database error. A position inside a message ("at line 1 column 7") stays.
fn without_server_source_line(text: &str) -> String {
    if let Some(start) = text.rfind(" at line ") {
        let digits = &text[start + " at line ".len()..];
        if !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit()) {
            return text[..start].to_owned();
        }
    }
    text.to_owned()
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
    fn a_cause_already_said_is_left_out_and_server_lines_are_dropped() {
        let error = anyhow::anyhow!("relation \"x\" does not exist at line 1392")
            .context("error returned from database: relation \"x\" does not exist at line 1392");
        assert_eq!(
            error_line(&error),
            "error returned from database: relation \"x\" does not exist"
        );
        let error = anyhow::anyhow!("connection refused").context("cannot connect to PostgreSQL");
        assert_eq!(
            error_line(&error),
            "cannot connect to PostgreSQL: connection refused"
        );
        assert_eq!(without_server_source_line("at line x"), "at line x");
        assert_eq!(
            without_server_source_line("expected value at line 1 column 7"),
            "expected value at line 1 column 7"
        );
    }
}
