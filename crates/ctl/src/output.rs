//! Standard output for commands whose output is piped: `inboundctl … | head` closes the
//! pipe early, and the command then ends quietly with success (as it would on SIGPIPE)
//! instead of panicking, as `println!` does on a failed write.

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
