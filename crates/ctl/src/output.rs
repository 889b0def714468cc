//! What a command prints. Standard output for commands whose output is piped:
//! `inboundctl … | head` closes the pipe early, and the command then ends quietly with
//! success (as it would on SIGPIPE) instead of panicking, as `println!` does on a failed
//! write. And the one line an error becomes ([`error_line`]).

use std::io::Write;

/// Writes one line to standard output; on a closed pipe, exits 0; on any other write
/// error, says so and exits 1.
pub fn line(text: std::fmt::Arguments<'_>) {
    let mut stdout = std::io::stdout().lock();
    let written = stdout
        .write_fmt(text)
        .and_then(|()| stdout.write_all(b"\n"))
        .and_then(|()| stdout.flush());
    match written {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        Err(error) => {
            eprintln!("inboundctl: cannot write the output: {error}");
            std::process::exit(1);
        }
    }
}

/// `println!` that ends the command quietly when standard output was closed.
macro_rules! out {
    () => {
        $crate::output::line(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::output::line(format_args!($($arg)*))
    };
}
pub(crate) use out;

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

/// `text` without each " at line N" (digits).
fn without_server_source_line(text: &str) -> String {
    let mut cleaned = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(" at line ") {
        let after = &rest[start + " at line ".len()..];
        let digits = after.chars().take_while(char::is_ascii_digit).count();
        cleaned.push_str(&rest[..start]);
        if digits == 0 {
            cleaned.push_str(" at line ");
        }
        rest = &after[digits..];
    }
    cleaned.push_str(rest);
    cleaned
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
    }
}
