//! The relay: helpers' lines on foster's standard output, named.
//!
//! Owns [`Relay`], a thread of its own that writes the lines it is offered to foster's standard
//! output, and the two forms it writes ([`Format`]):
//!
//! - text: `NAME | line` for standard output and `NAME ! line` for standard error, names
//!   padded to the longest, each line escaped for a terminal ([`crate::base::sanitize::escape`]:
//!   ESC, other control bytes and bytes that are not UTF-8 shown as `\e`, `\xNN`...; always,
//!   since a file written today is shown on a terminal tomorrow); a piece of a line longer than
//!   the bound ends with `…` when the next piece continues it. Colours (one per helper, the `!`
//!   red) only when standard output is a terminal and `NO_COLOR` is unset or empty.
//! - JSON: one object per line ([`super::Line`]'s form), written with
//!   [`crate::base::sanitize::to_json`] so that it is safe on a terminal too.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

use tracing::warn;

use super::{Batch, Line, Stream};

/// Lines the relay may have queued.
pub const QUEUE_LINES: usize = 8192;

/// Bytes of lines the relay may have queued: 4 MiB.
pub const QUEUE_BYTES: usize = 4 << 20;

/// How long foster's end waits for a relay that writes nothing more (its standard output is
/// not read) before it gives up on the lines still queued.
pub const FINISH_STALL: Duration = Duration::from_secs(1);

/// What foster writes on its standard output for its helpers' lines (`foster run --output`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// `NAME | line`, `NAME ! line` for standard error.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
    /// Nothing: lines are only kept and written to log files (`foster demo`'s dashboard).
    None,
}

/// What became of a line offered to the relay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offer {
    Queued,
    /// The queue is full: not relayed.
    Full,
    /// The relay has ended (standard output closed).
    Closed,
}

/// The relay: a thread and its queue, or a file written directly.
///
/// [`Renderer`] gives these forms to whoever else shows lines (`foster ctl logs`, the
/// dashboard's log pane), so that a line reads the same wherever it is shown.
///
/// Where the lines go decides how ([`Relay::start`]):
///
/// - a terminal, a pipe, a socket (something someone reads, at their pace): through a queue to
///   a thread of its own, bounded in lines ([`QUEUE_LINES`]) and in bytes ([`QUEUE_BYTES`]).
///   [`Relay::offer`] never waits; when the queue is full it says so and the caller counts the
///   line as not relayed. The thread's writes are buffered and flushed whenever the queue is
///   empty.
/// - a regular file, or `/dev/null` (`foster run x.toml > out`): a record, like a log file. The
///   reading thread writes it itself, buffered, flushed when the pipes are idle
///   ([`Relay::flush`]); nothing is dropped, and a slow disk slows the helpers as a log file
///   does. In text, it takes the lines of a read together ([`Relay::write_batch`]), checked
///   once for anything to escape, and the same bytes as line by line.
///
/// When standard output is closed (`EPIPE`) or fails, relaying ends for the rest of the run,
/// with one warning (none for a reader that went away).
#[derive(Debug)]
pub enum Relay {
    Queue(Queue),
    Direct(Direct),
}

/// The relay thread and its queue.
#[derive(Debug)]
pub struct Queue {
    tx: Option<SyncSender<Arc<Line>>>,
    shared: Arc<Shared>,
    done: Receiver<()>,
    thread: Option<JoinHandle<()>>,
}

/// A regular file (or `/dev/null`), written by the caller's thread.
#[derive(Debug)]
pub struct Direct {
    out: Out,
    format: Format,
    prefixes: Prefixes,
    failed: bool,
}

/// Lines rendered into a buffer, written when it holds [`Out::BUFFER`] bytes or on
/// [`Out::flush`].
#[derive(Debug)]
struct Out {
    file: File,
    buf: Vec<u8>,
}

impl Out {
    const BUFFER: usize = 64 * 1024;

    fn new(file: File) -> Out {
        Out {
            file,
            buf: Vec::with_capacity(Out::BUFFER + 1024),
        }
    }

    /// Renders `line`; returns the bytes it took.
    fn line(&mut self, line: &Line, format: Format, prefixes: &Prefixes) -> io::Result<usize> {
        let before = self.buf.len();
        render(&mut self.buf, line, format, prefixes);
        let n = self.buf.len() - before;
        if self.buf.len() >= Out::BUFFER {
            self.flush()?;
        }
        Ok(n)
    }

    /// Renders the pieces of `batch` as text, each after `prefix`, as [`render`] renders each
    /// line. The batch's bytes are checked once for anything to escape: when there is nothing
    /// (the usual case), each piece is copied as it is, without a check of its own.
    fn batch(&mut self, prefix: &[u8], batch: &Batch) -> io::Result<()> {
        let plain = crate::base::sanitize::is_plain(batch.bytes());
        for (piece, continued) in batch.pieces() {
            render_piece(&mut self.buf, prefix, piece, continued, plain);
            if self.buf.len() >= Out::BUFFER {
                self.flush()?;
            }
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        let r = self.file.write_all(&self.buf);
        self.buf.clear();
        if self.buf.capacity() > 4 * Out::BUFFER {
            self.buf.shrink_to(Out::BUFFER + 1024);
        }
        r
    }
}

/// Whether `out` is a record, written without dropping: a regular file or `/dev/null`.
fn is_record(out: &File) -> bool {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    out.metadata().is_ok_and(|m| {
        m.file_type().is_file()
            || (m.file_type().is_char_device() && m.rdev() == libc::makedev(1, 3))
    })
}

#[derive(Debug, Default)]
struct Shared {
    /// Bytes queued.
    queued: AtomicUsize,
    /// Bytes written so far (progress, for [`Relay::finish`]).
    written: AtomicU64,
    closed: AtomicBool,
}

impl Relay {
    /// Starts relaying to `out` (a copy of foster's standard output) in `format`, for
    /// helpers named `names` (the padding is the longest of them; the lines of a helper share
    /// its name's allocation, [`super::Output::helpers`]). `colour` for a terminal.
    /// A regular file or `/dev/null` is written directly, anything else through the queue.
    pub fn start(
        out: OwnedFd,
        format: Format,
        names: &[Arc<str>],
        colour: bool,
    ) -> io::Result<Relay> {
        let out = File::from(out);
        if is_record(&out) {
            return Ok(Relay::Direct(Direct {
                out: Out::new(out),
                format,
                prefixes: Prefixes::new(names, colour),
                failed: false,
            }));
        }
        Queue::start(out, format, names, colour).map(Relay::Queue)
    }

    /// Relays `line`: writes it (direct), or queues it unless the queue is full or the relay
    /// has ended; the queue never blocks.
    pub fn offer(&mut self, line: &Arc<Line>) -> Offer {
        match self {
            Relay::Queue(q) => q.offer(line),
            Relay::Direct(d) => d.write(line),
        }
    }

    /// Whether it takes lines one by one ([`Relay::offer`]) rather than a read's batch
    /// ([`Relay::write_batch`]): the queue, and JSON.
    pub fn wants_lines(&self) -> bool {
        match self {
            Relay::Queue(_) => true,
            Relay::Direct(d) => d.format != Format::Text,
        }
    }

    /// Relays the lines of `batch`, read from `helper`'s `stream`, as text: only for a relay
    /// that does not [`Relay::wants_lines`] (the lines are then offered one by one).
    pub fn write_batch(&mut self, helper: &str, stream: Stream, batch: &Batch) -> Offer {
        match self {
            Relay::Direct(d) if d.format == Format::Text => d.write_batch(helper, stream, batch),
            _ => Offer::Closed,
        }
    }

    /// Writes what a direct relay has gathered (nothing to do for the queue's thread, which
    /// flushes whenever its queue is empty).
    pub fn flush(&mut self) {
        if let Relay::Direct(d) = self
            && !d.failed
            && let Err(e) = d.out.flush()
        {
            d.failed = fail(None, &e);
        }
    }

    /// Writes what is left; see [`Queue::finish`].
    pub fn finish(mut self) {
        self.flush();
        if let Relay::Queue(q) = self {
            q.finish();
        }
    }
}

impl Direct {
    fn write(&mut self, line: &Line) -> Offer {
        if self.failed {
            return Offer::Closed;
        }
        if let Err(e) = self.out.line(line, self.format, &self.prefixes) {
            self.failed = fail(None, &e);
            return Offer::Closed;
        }
        Offer::Queued
    }
}

impl Direct {
    fn write_batch(&mut self, helper: &str, stream: Stream, batch: &Batch) -> Offer {
        if self.failed {
            return Offer::Closed;
        }
        let prefix = self.prefixes.named(helper, stream);
        if let Err(e) = self.out.batch(prefix.as_bytes(), batch) {
            self.failed = fail(None, &e);
            return Offer::Closed;
        }
        Offer::Queued
    }
}

impl Queue {
    fn start(out: File, format: Format, names: &[Arc<str>], colour: bool) -> io::Result<Queue> {
        let (tx, rx) = mpsc::sync_channel(QUEUE_LINES);
        let (done_tx, done) = mpsc::channel();
        let shared = Arc::new(Shared::default());
        let prefixes = Prefixes::new(names, colour);
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("foster-relay".into())
            .spawn(move || {
                run(rx, out, format, &prefixes, &s);
                let _ = done_tx.send(());
            })?;
        Ok(Queue {
            tx: Some(tx),
            shared,
            done,
            thread: Some(thread),
        })
    }

    /// Queues `line` unless the queue is full or the relay has ended. Never blocks.
    fn offer(&self, line: &Arc<Line>) -> Offer {
        let Some(tx) = &self.tx else {
            return Offer::Closed;
        };
        if self.shared.closed.load(Ordering::Relaxed) {
            return Offer::Closed;
        }
        let len = line.bytes.len() + 64;
        if self.shared.queued.load(Ordering::Relaxed) + len > QUEUE_BYTES {
            return Offer::Full;
        }
        self.shared.queued.fetch_add(len, Ordering::Relaxed);
        match tx.try_send(line.clone()) {
            Ok(()) => Offer::Queued,
            Err(e) => {
                self.shared.queued.fetch_sub(len, Ordering::Relaxed);
                match e {
                    TrySendError::Full(_) => Offer::Full,
                    TrySendError::Disconnected(_) => Offer::Closed,
                }
            }
        }
    }

    /// Writes what is queued and ends the thread; waits as long as it makes progress, and no
    /// more than [`FINISH_STALL`] after it stops making any (a standard output nobody reads).
    fn finish(mut self) {
        drop(self.tx.take());
        let mut seen = self.shared.written.load(Ordering::Relaxed);
        loop {
            match self.done.recv_timeout(FINISH_STALL) {
                Ok(()) | Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => {
                    let now = self.shared.written.load(Ordering::Relaxed);
                    if now == seen {
                        warn!(
                            "foster's standard output takes nothing: the helpers' last lines \
                             are not relayed (the kept lines and log files have them)"
                        );
                        // The thread is left blocked in its write; the process is ending.
                        self.thread.take();
                        return;
                    }
                    seen = now;
                }
            }
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Lines in the relay's forms, for whoever else shows them: the same names, padding, marks,
/// colours, escaping and JSON as the relay's.
#[derive(Debug)]
pub struct Renderer {
    format: Format,
    prefixes: Prefixes,
}

impl Renderer {
    /// Renders in `format` ([`Format::None`] is text), names padded to the longest of `names`
    /// and coloured when `colour` (see [`colour_for`]).
    pub fn new(names: &[&str], format: Format, colour: bool) -> Renderer {
        let names: Vec<Arc<str>> = names.iter().map(|n| Arc::from(*n)).collect();
        Renderer {
            format,
            prefixes: Prefixes::new(&names, colour),
        }
    }

    /// `line` as the relay writes it, newline included, appended to `buf`.
    pub fn render(&self, line: &Line, buf: &mut Vec<u8>) {
        render(buf, line, self.format, &self.prefixes);
    }
}

/// The start of each relayed line, per helper and stream.
#[derive(Debug)]
struct Prefixes {
    /// Each helper's name, and its (standard output's, standard error's) prefix. Few: found
    /// by the name's allocation first (lines share their helper's), then by its text.
    by_name: Vec<(Arc<str>, (String, String))>,
    /// The names' width, for a helper not named at start (shown without colour).
    fallback_pad: usize,
}

/// Colours of names, one per helper in turn (red is kept for standard error's mark).
const PALETTE: [&str; 6] = ["36", "33", "32", "35", "34", "96"];

impl Prefixes {
    fn new(names: &[Arc<str>], colour: bool) -> Prefixes {
        let width = names
            .iter()
            .map(|n| crate::base::sanitize::escape(n.as_bytes()).chars().count())
            .max()
            .unwrap_or(0);
        let by_name = names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let c = colour.then(|| PALETTE[i % PALETTE.len()]);
                (
                    n.clone(),
                    (prefix(n, width, c, false), prefix(n, width, c, true)),
                )
            })
            .collect();
        Prefixes {
            by_name,
            fallback_pad: width,
        }
    }

    fn get(&self, line: &Line) -> std::borrow::Cow<'_, str> {
        let found = self
            .by_name
            .iter()
            .find(|(n, _)| Arc::ptr_eq(n, &line.helper))
            .or_else(|| self.by_name.iter().find(|(n, _)| *n == line.helper));
        self.pick(found, &line.helper, line.stream)
    }

    /// The prefix of `helper`'s lines of `stream`, found by its name's text.
    fn named(&self, helper: &str, stream: Stream) -> std::borrow::Cow<'_, str> {
        let found = self.by_name.iter().find(|(n, _)| **n == *helper);
        self.pick(found, helper, stream)
    }

    fn pick<'a>(
        &'a self,
        found: Option<&'a (Arc<str>, (String, String))>,
        helper: &str,
        stream: Stream,
    ) -> std::borrow::Cow<'a, str> {
        let err = stream == Stream::Stderr;
        match found {
            Some((_, (o, e))) => std::borrow::Cow::Borrowed(if err { e } else { o }),
            None => std::borrow::Cow::Owned(prefix(helper, self.fallback_pad, None, err)),
        }
    }
}

/// `NAME   | ` or `NAME   ! `, coloured when `colour` gives the name's colour.
fn prefix(name: &str, width: usize, colour: Option<&str>, stderr: bool) -> String {
    let shown = crate::base::sanitize::escape(name.as_bytes());
    let pad = " ".repeat(width.saturating_sub(shown.chars().count()));
    match (colour, stderr) {
        (None, false) => format!("{shown}{pad} | "),
        (None, true) => format!("{shown}{pad} ! "),
        (Some(c), false) => format!("\x1b[{c}m{shown}{pad}\x1b[0m | "),
        (Some(c), true) => format!("\x1b[{c}m{shown}{pad}\x1b[0m \x1b[31m!\x1b[0m "),
    }
}

/// Whether the relay should colour: standard output a terminal, `NO_COLOR` unset or empty.
pub fn colour_for(out: &impl AsFd) -> bool {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    !no_color && nix::unistd::isatty(out.as_fd()).unwrap_or(false)
}

/// One relayed line in `format`, newline included, appended to `buf`.
fn render(buf: &mut Vec<u8>, line: &Line, format: Format, prefixes: &Prefixes) {
    match format {
        Format::Text | Format::None => {
            let prefix = prefixes.get(line);
            render_piece(buf, prefix.as_bytes(), &line.bytes, line.continued, false);
        }
        Format::Json => {
            if let Ok(j) = crate::base::sanitize::to_json(line) {
                buf.extend_from_slice(j.as_bytes());
                buf.push(b'\n');
            }
        }
    }
}

/// A piece in text after `prefix`: escaped (unless the caller knows it is `plain`, see
/// [`crate::base::sanitize::is_plain`]), `…` when the next piece `continued` it, a newline.
fn render_piece(buf: &mut Vec<u8>, prefix: &[u8], piece: &[u8], continued: bool, plain: bool) {
    buf.extend_from_slice(prefix);
    if plain {
        buf.extend_from_slice(piece);
    } else {
        crate::base::sanitize::escape_into(piece, buf);
    }
    if continued {
        buf.extend_from_slice("…".as_bytes());
    }
    buf.push(b'\n');
}

fn run(rx: Receiver<Arc<Line>>, out: File, format: Format, prefixes: &Prefixes, s: &Shared) {
    let mut w = Out::new(out);
    let mut failed = false;
    let mut next = rx.recv().ok();
    while let Some(line) = next {
        s.queued.fetch_sub(line.bytes.len() + 64, Ordering::Relaxed);
        if !failed {
            match w.line(&line, format, prefixes) {
                Ok(n) => {
                    s.written.fetch_add(n as u64, Ordering::Relaxed);
                }
                Err(e) => failed = fail(Some(s), &e),
            }
        }
        drop(line);
        next = match rx.try_recv() {
            Ok(l) => Some(l),
            Err(mpsc::TryRecvError::Empty) => {
                if !failed && let Err(e) = w.flush() {
                    failed = fail(Some(s), &e);
                }
                rx.recv().ok()
            }
            Err(mpsc::TryRecvError::Disconnected) => None,
        };
    }
    if !failed {
        let _ = w.flush();
    }
}

/// Relaying ends for good: one warning (none for a reader that went away).
fn fail(s: Option<&Shared>, e: &io::Error) -> bool {
    if let Some(s) = s {
        s.closed.store(true, Ordering::Relaxed);
    }
    if e.kind() != io::ErrorKind::BrokenPipe {
        warn!(
            "cannot write the helpers' output to foster's standard output: {e}; it is no \
             longer relayed (the kept lines and log files have it)"
        );
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(helper: &str, stream: Stream, bytes: &[u8], continued: bool) -> Line {
        Line {
            seq: 1,
            helper: Arc::from(helper),
            stream,
            helper_pid: None,
            outer_pid: None,
            ts_ms: 5,
            continued,
            bytes: bytes.to_vec(),
        }
    }

    /// The bytes a direct relay to a file writes for `reads` of one stream of `helper`, cut
    /// into lines of at most `max` bytes and written a read's batch at a time, against the
    /// same lines rendered one by one; `names` the relay's helpers.
    fn batched_and_by_line(
        names: &[&str],
        colour: bool,
        helper: &str,
        stream: Stream,
        reads: &[&[u8]],
        max: usize,
    ) -> (Vec<u8>, Vec<u8>) {
        static N: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "foster-relay-batch-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let file = File::create(&path).unwrap();
        let arcs: Vec<Arc<str>> = names.iter().map(|n| Arc::from(*n)).collect();
        let mut relay = Relay::start(file.into(), Format::Text, &arcs, colour).unwrap();
        assert!(!relay.wants_lines(), "a file is written a batch at a time");
        let renderer = Renderer::new(names, Format::Text, colour);
        let mut want = Vec::new();
        let mut split = super::super::line::Splitter::with_max(max);
        let mut batch = Batch::default();
        let mut each = |batch: &mut Batch, relay: &mut Relay| {
            for (p, cont) in batch.pieces() {
                renderer.render(&line(helper, stream, p, cont), &mut want);
            }
            assert_eq!(relay.write_batch(helper, stream, batch), Offer::Queued);
            batch.clear();
        };
        for r in reads {
            split.feed(r, |p, cont| batch.push(p, cont));
            each(&mut batch, &mut relay);
        }
        split.finish(|p, cont| batch.push(p, cont));
        each(&mut batch, &mut relay);
        relay.finish();
        let got = std::fs::read(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        (got, want)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]

        /// A read's lines written as one batch are, byte for byte, the lines rendered one by
        /// one: with escapes, bytes that are not UTF-8, long lines cut into pieces, reads cut
        /// anywhere, names known or not, coloured or not.
        #[test]
        fn a_batch_is_written_as_its_lines_are_rendered(
            data in proptest::collection::vec(
                proptest::prop_oneof![
                    6 => proptest::sample::select(b"abc xyz-0123456789\n".to_vec()),
                    1 => proptest::sample::select(b"\x1b\\\r\t\x7f\xff\xc3\xa9\xe2\x80\xae".to_vec()),
                    1 => proptest::prelude::any::<u8>(),
                ],
                0..2000,
            ),
            cuts in proptest::collection::vec(0usize..2000, 0..12),
            max in 1usize..300,
            named in proptest::prelude::any::<bool>(),
            colour in proptest::prelude::any::<bool>(),
            err in proptest::prelude::any::<bool>(),
        ) {
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(data.len())).collect();
            cuts.sort_unstable();
            let mut reads = Vec::new();
            let mut at = 0;
            for c in cuts.into_iter().chain([data.len()]) {
                reads.push(&data[at..c]);
                at = c;
            }
            let helper = if named { "web" } else { "other\x1b" };
            let stream = if err { Stream::Stderr } else { Stream::Stdout };
            let (got, want) =
                batched_and_by_line(&["web", "db-primary"], colour, helper, stream, &reads, max);
            proptest::prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn a_batch_larger_than_the_buffer_is_written_whole_and_in_order() {
        // 3 x 300 KiB of 100-byte lines, plain but for one line of each read, and a line
        // longer than the bound: several buffers' worth per read.
        let mut reads = Vec::new();
        for r in 0..3u8 {
            let mut v = Vec::new();
            for k in 0..3000u32 {
                let mut l = format!("{r}:{k:06} ").into_bytes();
                l.resize(99, b'x');
                if k == 1500 {
                    l[50] = 0x1b;
                }
                v.extend_from_slice(&l);
                v.push(b'\n');
            }
            v.extend(std::iter::repeat_n(b'y', 70_000));
            reads.push(v);
        }
        let reads: Vec<&[u8]> = reads.iter().map(|r| &r[..]).collect();
        let (got, want) =
            batched_and_by_line(&["gen"], false, "gen", Stream::Stdout, &reads, 64 * 1024);
        assert!(got.len() > 900_000, "{}", got.len());
        assert!(got == want, "the batch path differs from the line path");
    }

    fn text(p: &Prefixes, l: &Line, f: Format) -> String {
        let mut b = Vec::new();
        render(&mut b, l, f, p);
        String::from_utf8(b).unwrap()
    }

    #[test]
    fn lines_are_named_padded_marked_and_escaped() {
        let p = Prefixes::new(&[Arc::from("web"), Arc::from("db-primary")], false);
        assert_eq!(
            text(
                &p,
                &line("web", Stream::Stdout, b"hello", false),
                Format::Text
            ),
            "web        | hello\n"
        );
        assert_eq!(
            text(
                &p,
                &line("db-primary", Stream::Stderr, b"oops", false),
                Format::Text
            ),
            "db-primary ! oops\n"
        );
        assert_eq!(
            text(
                &p,
                &line("web", Stream::Stdout, b"\x1b]0;x\x07\xff", true),
                Format::Text
            ),
            "web        | \\e]0;x\\x07\\xff…\n"
        );
        let j = text(
            &p,
            &line("web", Stream::Stdout, b"a\x1bb", false),
            Format::Json,
        );
        assert!(!j.contains('\x1b'), "{j:?}");
        let v: serde_json::Value = serde_json::from_str(&j).unwrap();
        assert_eq!(v["text"], "a\x1bb");
        let c = Prefixes::new(&[Arc::from("web"), Arc::from("db")], true);
        let shown = text(&c, &line("db", Stream::Stderr, b"x", false), Format::Text);
        assert_eq!(shown, "\x1b[33mdb \x1b[0m \x1b[31m!\x1b[0m x\n");
    }
}
