//! Diagnostics: where foster's own log lines go and how many there are.
//!
//! Owns the one form of an error on standard error, `foster: error: MESSAGE` ([`report`]),
//! lines written whole ([`write_stderr`]), and the tracing subscriber. `RUST_LOG` wins when set; otherwise `-v` / `-q` move the level
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
    write_stderr(&format!("foster: error: {message}\n"));
}

/// Writes `line` to standard error with one `write` where the kernel takes it whole: a program
/// foster runs often writes to the same pipe, and a line written in pieces (as `eprintln!` does
/// on the unbuffered standard error) tears between them. A line of up to `PIPE_BUF` (4096)
/// bytes reaches a pipe whole; a longer one, or a full pipe's partial write, goes on from where
/// the kernel stopped. A closed or broken standard error ends it quietly.
pub fn write_stderr(line: &str) {
    let mut rest = line.as_bytes();
    while !rest.is_empty() {
        // SAFETY: writes from a live buffer of `rest.len()` bytes.
        let n = unsafe { libc::write(libc::STDERR_FILENO, rest.as_ptr().cast(), rest.len()) };
        if n > 0 {
            rest = &rest[n as usize..];
        } else if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
        {
            continue;
        } else {
            return;
        }
    }
}
