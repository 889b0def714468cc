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

pub use inbound_core::display::{person_name, terminal_safe};
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
