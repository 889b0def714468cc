//! Log set-up: one line per event to stderr, JSON or text, filtered by `RUST_LOG`.

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One JSON object per line (the default when stderr is not a terminal).
    Json,
    /// Human-readable lines.
    Text,
}

/// Sets up `tracing` to stderr, filtered by `RUST_LOG` (default `info`).
pub fn init_logging(format: Option<LogFormat>) {
    use std::io::IsTerminal;
    let on_terminal = std::io::stderr().is_terminal();
    let format = format.unwrap_or(if on_terminal {
        LogFormat::Text
    } else {
        LogFormat::Json
    });
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .init(),
        LogFormat::Text => builder.with_ansi(on_terminal).init(),
    }
}

/// `elapsed` in milliseconds to the microsecond, as log lines carry it: `11.03`, never a
/// float's noise (`11.030562000000002`).
pub fn millis(elapsed: std::time::Duration) -> f64 {
    // A whole number of microseconds over 1000 prints as its shortest decimal.
    elapsed.as_micros() as f64 / 1000.0
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    #[test]
    fn milliseconds_are_logged_to_the_microsecond() {
        assert_eq!(
            super::millis(Duration::from_nanos(11_030_562)).to_string(),
            "11.03"
        );
        assert_eq!(super::millis(Duration::from_nanos(999)).to_string(), "0");
        assert_eq!(
            super::millis(Duration::from_micros(1_234_567)).to_string(),
            "1234.567"
        );
    }
}
