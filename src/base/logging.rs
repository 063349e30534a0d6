//! Diagnostics: where foster's own lines go and how many there are.
//!
//! Owns foster's standard error: the one form of an error, `foster: error: MESSAGE`
//! ([`report`]), every line written whole ([`write_stderr`]), the tracing subscriber, the
//! verbosity, and the writer thread that keeps a supervisor from waiting on its standard error
//! ([`background`]). `RUST_LOG` wins for tracing's lines when set; otherwise `-v` / `-q` move
//! the level from the default `warn` (so `-v` is info, `-vv` debug, `-vvv` trace, `-q` errors
//! only). Every line reads `foster: MESSAGE`, the level said in words where it is not info
//! (`foster: warning: ...`, `foster: debug: ...`), plain text whatever standard error is. Lines
//! go to standard error, so standard output stays the command's own.

use std::io;
use std::sync::atomic::{AtomicI8, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tracing::{Level, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::{self, FormatEvent, FormatFields};
use tracing_subscriber::fmt::{FmtContext, MakeWriter};
use tracing_subscriber::registry::LookupSpan;

/// The verbosity given on the command line: `-v` adds one, `-q` removes one.
static VERBOSITY: AtomicI8 = AtomicI8::new(0);

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

/// The verbosity [`init`] was given (0 before): what `foster run`'s lines for people follow
/// (`RUST_LOG` does not change it).
pub fn verbosity() -> i8 {
    VERBOSITY.load(Ordering::Relaxed)
}

/// Installs the subscriber once; later calls do nothing.
pub fn init(verbosity: i8) {
    VERBOSITY.store(verbosity, Ordering::Relaxed);
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(format!("foster={}", level_for(verbosity))));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(WholeLines)
        .with_ansi(false)
        .event_format(Plain)
        .try_init();
}

/// tracing's lines in foster's form: `foster: warning: MESSAGE key=value`.
struct Plain;

impl<S, N> FormatEvent<S, N> for Plain
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        let level = match *event.metadata().level() {
            Level::ERROR => "error: ",
            Level::WARN => "warning: ",
            Level::INFO => "",
            Level::DEBUG => "debug: ",
            Level::TRACE => "trace: ",
        };
        write!(writer, "foster: {level}")?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

/// The writer of tracing's lines: each line gathered, then handed whole to [`write_stderr`].
struct WholeLines;

impl<'a> MakeWriter<'a> for WholeLines {
    type Writer = Line;
    fn make_writer(&'a self) -> Line {
        Line(Vec::new())
    }
}

/// One line of tracing's, written on drop.
struct Line(Vec<u8>);

impl io::Write for Line {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        if !self.0.is_empty() {
            write_stderr(&String::from_utf8_lossy(&self.0));
        }
    }
}

/// Writes `foster: error: MESSAGE` and a newline to standard error in one write: the one form of
/// every error foster reports there, usage and runtime errors alike.
pub fn report(message: impl std::fmt::Display) {
    write_stderr(&format!("foster: error: {message}\n"));
}

/// Lines that may wait for the writer thread of [`background`]; more are dropped and counted.
pub const QUEUED_LINES: usize = 4096;

/// How long dropping a [`Background`] waits for the lines still queued to be written.
pub const DRAIN: Duration = Duration::from_secs(2);

/// The writer thread's queue, while a [`Background`] lives.
static QUEUE: Mutex<Option<Queue>> = Mutex::new(None);

struct Queue {
    lines: SyncSender<String>,
    dropped: Arc<AtomicU64>,
}

/// While it lives, [`write_stderr`] (so every line of foster's: tracing's, [`report`], `foster
/// run`'s lines for people) hands its lines to a thread of their own, in order, and never
/// waits: a standard error nobody reads (a full pipe, a terminal stopped by Ctrl-S) does not
/// stall the caller. At most [`QUEUED_LINES`] wait; beyond them a line is dropped and counted,
/// and the count is written before the next line that goes out (`foster: warning: N lines
/// for standard error were dropped ...`). Dropping it waits up to [`DRAIN`] for the queued
/// lines, then lines are written directly again.
#[must_use = "the writer thread is used while this lives"]
pub struct Background {
    done: Receiver<()>,
}

/// Starts the writer thread of [`Background`]. Call it where threads may exist (a thread
/// changes what `unshare` and `fork` allow: `foster run` starts it once contained).
pub fn background() -> io::Result<Background> {
    let (tx, rx) = mpsc::sync_channel::<String>(QUEUED_LINES);
    let (done_tx, done) = mpsc::channel();
    let dropped = Arc::new(AtomicU64::new(0));
    let counted = dropped.clone();
    std::thread::Builder::new()
        .name("stderr".into())
        .spawn(move || {
            let say_dropped = || {
                let n = counted.swap(0, Ordering::Relaxed);
                if n > 0 {
                    write_direct(&format!(
                        "foster: warning: {n} line{} for standard error {} dropped: it was not \
                         read fast enough\n",
                        if n == 1 { "" } else { "s" },
                        if n == 1 { "was" } else { "were" }
                    ));
                }
            };
            for line in rx {
                say_dropped();
                write_direct(&line);
            }
            say_dropped();
            let _ = done_tx.send(());
        })?;
    *lock_queue() = Some(Queue { lines: tx, dropped });
    Ok(Background { done })
}

impl Drop for Background {
    fn drop(&mut self) {
        // Closing the queue ends the thread once it has written what it holds.
        drop(lock_queue().take());
        let _ = self.done.recv_timeout(DRAIN);
    }
}

fn lock_queue() -> std::sync::MutexGuard<'static, Option<Queue>> {
    QUEUE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Writes `line` to standard error whole: handed to the writer thread while a [`Background`]
/// lives, else written at once ([`write_direct`]).
pub fn write_stderr(line: &str) {
    if let Some(q) = lock_queue().as_ref() {
        match q.lines.try_send(line.to_string()) {
            Ok(()) => return,
            Err(TrySendError::Full(_)) => {
                q.dropped.fetch_add(1, Ordering::Relaxed);
                return;
            }
            Err(TrySendError::Disconnected(_)) => {}
        }
    }
    write_direct(line);
}

/// Writes `line` to standard error with one `write` where the kernel takes it whole: a program
/// foster runs often writes to the same pipe, and a line written in pieces (as `eprintln!` does
/// on the unbuffered standard error) tears between them. A line of up to `PIPE_BUF` (4096)
/// bytes reaches a pipe whole; a longer one, or a full pipe's partial write, goes on from where
/// the kernel stopped. A closed or broken standard error ends it quietly.
fn write_direct(line: &str) {
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
