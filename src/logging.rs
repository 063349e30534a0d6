//! Diagnostics: where foster's own log lines go and how many there are.
//!
//! Owns the one form of an error on standard error, `foster: error: MESSAGE` ([`report`]), and
//! the tracing subscriber. `RUST_LOG` wins when set; otherwise `-v` / `-q` move the level
//! from the default `warn` (so `-v` is info, `-vv` debug, `-vvv` trace, `-q` errors only).
//! Lines go to standard error, so standard output stays the command's own; colours only when
//! standard error is a terminal, so a log file or a pipe gets plain text.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// The level for a verbosity count (`-v` adds one, `-q` removes one).
pub fn level_for(verbosity: i8) -> &'static str {
    match verbosity {
        i8::MIN..=-2 => "off",
        -1 => "error",
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    }
}

/// Installs the subscriber once; later calls do nothing.
pub fn init(verbosity: i8) {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(format!("foster={}", level_for(verbosity))));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .try_init();
}

/// Writes `foster: error: MESSAGE` and a newline to standard error in one write: the one form of
/// every error foster reports there, usage and runtime errors alike.
pub fn report(message: impl std::fmt::Display) {
    use std::io::Write;
    let line = format!("foster: error: {message}\n");
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}
