//! Capture: the pipes of every helper and the one thread that reads them.
//!
//! Owns [`start`] and [`Capture`], what the supervisor holds: for each helper whose output is
//! captured, two pipes (standard output, standard error) made once and kept for the helper's
//! whole life; foster keeps their write ends (close-on-exec) and hands a copy of each to every
//! launch ([`Capture::stdio`]), so whatever of the helper's tree still writes, and a helper
//! that printed and exited at once, reach the same pipe. The read ends (non-blocking) sit in
//! one epoll on a thread of their own, which waits without a timeout unless a count of lines
//! not relayed is due (see the module docs of [`crate::supervision::output`]): an idle helper costs
//! foster no wake-up. Each readable pipe is read in 64 KiB chunks (a few per turn, so that one
//! helper cannot starve the others; a pipe found full grows to [`GROWN_PIPE`] and is read in
//! [`GROWN_CHUNK`]s), and the lines of each read cut into one [`Batch`], kept, written to the
//! log file and relayed together (line by line to a relay that takes lines one by one); log
//! files are flushed whenever epoll has nothing more ready, so no timer is needed.
//! Commands (reopen the log files, finish) reach the thread through an eventfd in the same
//! epoll.
//!
//! Counts of lines the relay could not take go to the supervisor as [`Report`]s, at most one
//! per helper per [`REPORT_EVERY`] while they go on, and one when they stop.

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc as std_mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nix::fcntl::OFlag;
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use nix::sys::eventfd::{EfdFlags, EventFd};
use tokio::sync::mpsc as tokio_mpsc;
use tokio::sync::oneshot;
use tracing::{info, warn};

use super::file::LogFile;
use super::line::Splitter;
use super::relay::{Format, Offer, Relay};
use super::{Batch, Line, Mode, Output, Stream, ring};
use crate::base::logfile::Rotation;

/// Counts of lines not relayed are reported at most this often per helper.
pub const REPORT_EVERY: Duration = Duration::from_secs(1);

/// Bytes read at once from a pipe, at first: a pipe's own size.
const CHUNK: usize = 64 * 1024;

/// What a pipe found full grows to (within `/proc/sys/fs/pipe-max-size`), and how many pipes
/// may be grown at once: a helper that writes faster than foster reads is then read in fewer,
/// larger pieces, with fewer wake-ups of either side. The bound keeps foster within a quarter
/// of the pipe memory an unprivileged user may have (`/proc/sys/fs/pipe-user-pages-soft`,
/// 64 MiB by default), past which the kernel would give that user's new pipes one page.
const GROWN_PIPE: usize = 1 << 20;
const GROWN_PIPES: usize = 16;

/// Bytes read at once once a pipe has grown.
const GROWN_CHUNK: usize = 128 * 1024;

/// Chunks read from one pipe before the others get their turn.
const CHUNKS_PER_TURN: usize = 4;

/// At foster's end, what is read from a pipe at most (its writers are gone: what is left is
/// the pipe's buffer; this bounds a writer outside the tree that got the descriptor somehow).
const FINAL_DRAIN: usize = 16 << 20;

/// What a helper's output needs: its name, where its output goes, and its log file.
#[derive(Debug, Clone)]
pub struct HelperOutput {
    pub name: String,
    pub mode: Mode,
    /// A log file for its captured lines, and its rotation.
    pub log: Option<(PathBuf, Rotation)>,
    /// The bounds of its kept lines.
    pub ring: ring::Bounds,
}

/// A log file opened again ([`Capture::reopen`]): its helper and path, and the error if it
/// could not be (the lines then go on to the file it had).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reopened {
    pub helper: String,
    pub path: PathBuf,
    pub error: Option<String>,
}

/// Something the reading thread tells the supervisor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Report {
    /// `lines` lines of `helper` were not relayed to foster's standard output (its queue was
    /// full) since the last report.
    Dropped { helper: String, lines: u64 },
}

/// Where a helper's standard output and error go, held for its life.
#[derive(Debug)]
enum Stdio {
    /// The write ends of its two pipes.
    Pipes {
        out: OwnedFd,
        err: OwnedFd,
    },
    Inherit,
    /// `/dev/null`, open for writing.
    Null(OwnedFd),
}

enum Command {
    /// Open every log file again; the results to the sender, when there is one.
    Reopen(Option<oneshot::Sender<Vec<Reopened>>>),
    /// A helper at an index (see [`Capture::set`]).
    Set(Box<Set>),
    /// Read what is left, flush everything, end.
    Finish,
}

/// The capture of every helper's output, held by the supervisor.
#[derive(Debug)]
pub struct Capture {
    output: Arc<Output>,
    /// By helper index.
    stdio: Vec<Stdio>,
    commands: std_mpsc::Sender<Command>,
    wake: Arc<EventFd>,
    reports: tokio_mpsc::UnboundedReceiver<Report>,
    /// The reading thread, once a helper's output is captured.
    thread: Option<JoinHandle<()>>,
    /// The reader, until its thread starts: it starts with the first captured helper (at
    /// [`start`], or when a reload adds one).
    waiting: Option<Box<Reader>>,
    format: Format,
    /// `/dev/null`, once a helper needs it.
    null: Option<OwnedFd>,
}

/// Opens the log files, makes the pipes of every helper whose output is captured and starts
/// the reading thread (and the relay thread, unless `format` is [`Format::None`]); no thread
/// while no helper is captured. A log file that cannot be opened, or is refused (see
/// [`crate::base::logfile::Trust::Owned`]), is an error naming it. Threads started here (or later,
/// by [`Capture::set`]) inherit the caller's signal mask.
pub fn start(helpers: &[HelperOutput], format: Format) -> io::Result<Capture> {
    let output = Arc::new(Output::new(&[], ring::DEFAULT_LINES, ring::DEFAULT_BYTES));
    let (reports_tx, reports) = tokio_mpsc::unbounded_channel();
    let (commands, commands_rx) = std_mpsc::channel();
    let wake = Arc::new(
        EventFd::from_value_and_flags(0, EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)
            .map_err(io::Error::from)?,
    );
    let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC).map_err(io::Error::from)?;
    epoll
        .add(wake.as_fd(), EpollEvent::new(EpollFlags::EPOLLIN, WAKE))
        .map_err(io::Error::from)?;
    let reader = Reader {
        epoll,
        sources: Vec::new(),
        output: output.clone(),
        relay: None,
        drops: Vec::new(),
        files: Vec::new(),
        reports: reports_tx,
        names: Vec::new(),
        captured: Vec::new(),
        buf: vec![0; CHUNK],
        batch: Batch::default(),
        lines: Vec::new(),
        wake: wake.clone(),
        commands: commands_rx,
        finishing: false,
    };
    let mut capture = Capture {
        output,
        stdio: Vec::new(),
        commands,
        wake,
        reports,
        thread: None,
        waiting: Some(Box::new(reader)),
        format,
        null: None,
    };
    // Every log file is opened before any pipe is made: a refused one names itself first.
    let mut files = Vec::with_capacity(helpers.len());
    for h in helpers {
        files.push(open_log(h)?);
    }
    for (i, (h, file)) in helpers.iter().zip(files).enumerate() {
        capture.install(i, h, file)?;
    }
    capture.spawn_if_captured()?;
    Ok(capture)
}

/// The log file of `h`, opened, when it has one and its output is captured.
fn open_log(h: &HelperOutput) -> io::Result<Option<LogFile>> {
    match (&h.log, h.mode) {
        (Some((path, rotation)), Mode::Capture) => {
            Ok(Some(LogFile::open(&h.name, path, *rotation)?))
        }
        _ => Ok(None),
    }
}

/// A pipe: (read end, non-blocking; write end), both close-on-exec.
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let (r, w) = nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(io::Error::from)?;
    let flags = nix::fcntl::fcntl(&r, nix::fcntl::FcntlArg::F_GETFL).map_err(io::Error::from)?;
    nix::fcntl::fcntl(
        &r,
        nix::fcntl::FcntlArg::F_SETFL(OFlag::from_bits_truncate(flags) | OFlag::O_NONBLOCK),
    )
    .map_err(io::Error::from)?;
    Ok((r, w))
}

fn open_null() -> io::Result<OwnedFd> {
    Ok(std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/null")?
        .into())
}

impl Capture {
    /// Index `i` is helper `h`'s from now on (a helper a reload added: `i` one past the last;
    /// or one taking the index of a removed helper, or a changed helper whose output or log
    /// changed): its log file opened, its pipes made, the reading thread told (started if it
    /// was not). What the index's former pipes still hold is read first, under its former
    /// name; its kept lines go. Call it once no process of the former helper is left.
    pub fn set(&mut self, i: usize, h: &HelperOutput) -> io::Result<()> {
        let file = open_log(h)?;
        self.install(i, h, file)?;
        self.spawn_if_captured()
    }

    /// Helper `i` was removed by a reload: foster's write ends of its pipes are closed (the
    /// pipes end with the last process of its tree); it is never launched again.
    pub fn retire(&mut self, i: usize) {
        if let Some(s) = self.stdio.get_mut(i) {
            *s = Stdio::Inherit;
        }
    }

    /// Makes index `i`'s stdio (pipes, `/dev/null` or foster's own) and hands its read ends
    /// and log file to the reader: directly while its thread has not started, else as a
    /// command.
    fn install(&mut self, i: usize, h: &HelperOutput, file: Option<LogFile>) -> io::Result<()> {
        let mut sources = Vec::new();
        let stdio = match h.mode {
            Mode::Inherit => Stdio::Inherit,
            Mode::Null => {
                let fd = match &self.null {
                    Some(fd) => fd.try_clone()?,
                    None => self.null.insert(open_null()?).try_clone()?,
                };
                Stdio::Null(fd)
            }
            Mode::Capture => {
                let (out_r, out) = pipe()?;
                let (err_r, err) = pipe()?;
                sources.push((out_r, Stream::Stdout));
                sources.push((err_r, Stream::Stderr));
                Stdio::Pipes { out, err }
            }
        };
        // Indices stay those of the supervisor's helpers, even past one that failed here.
        while self.stdio.len() < i {
            self.stdio.push(Stdio::Inherit);
        }
        if i < self.stdio.len() {
            self.stdio[i] = stdio;
        } else {
            self.stdio.push(stdio);
        }
        let set = Set {
            helper: i,
            name: h.name.clone(),
            captured: h.mode == Mode::Capture,
            ring: h.ring,
            sources,
            file,
        };
        match &mut self.waiting {
            Some(reader) => reader.set(set),
            None => {
                self.command(Command::Set(Box::new(set)));
            }
        }
        Ok(())
    }

    /// Starts the reading thread (and the relay) once a helper's output is captured.
    fn spawn_if_captured(&mut self) -> io::Result<()> {
        let Some(reader) = &self.waiting else {
            return Ok(());
        };
        if reader.sources.is_empty() {
            return Ok(());
        }
        let mut reader = self.waiting.take().expect("checked above");
        reader.relay = match self.format {
            Format::None => None,
            format => {
                let out = nix::unistd::dup(std::io::stdout().as_fd()).map_err(io::Error::from)?;
                // Relayed names: the captured helpers' (the kept lines' own names, which
                // their lines share).
                let relayed: Vec<Arc<str>> = reader
                    .output
                    .helpers()
                    .into_iter()
                    .zip(&reader.captured)
                    .filter(|(_, c)| **c)
                    .map(|(n, _)| n)
                    .collect();
                let colour = super::relay::colour_for(&out);
                Some(Relay::start(out, format, &relayed, colour)?)
            }
        };
        let thread = std::thread::Builder::new()
            .name("foster-output".into())
            .spawn(move || reader.run())?;
        self.thread = Some(thread);
        Ok(())
    }

    /// The kept lines and live followers of every helper.
    pub fn output(&self) -> &Arc<Output> {
        &self.output
    }

    /// The standard output and error for a launch of helper `i` (`None`: foster's own): copies
    /// of its pipes' write ends, or of `/dev/null`.
    pub fn stdio(&self, i: usize) -> io::Result<(Option<OwnedFd>, Option<OwnedFd>)> {
        Ok(match self.stdio.get(i) {
            Some(Stdio::Pipes { out, err }) => (Some(out.try_clone()?), Some(err.try_clone()?)),
            Some(Stdio::Null(fd)) => (Some(fd.try_clone()?), Some(fd.try_clone()?)),
            Some(Stdio::Inherit) | None => (None, None),
        })
    }

    /// The next report of the reading thread (pending forever when there is none to come).
    pub async fn report(&mut self) -> Report {
        match self.reports.recv().await {
            Some(r) => r,
            None => std::future::pending().await,
        }
    }

    /// Opens every helper's log file again at its path (after an outside rotation: logrotate
    /// without `copytruncate`); each result is logged, and sent on `reply` when given. Never
    /// waits for the reading thread (which may be writing to a slow disk).
    pub fn reopen(&self, reply: Option<oneshot::Sender<Vec<Reopened>>>) {
        // Without a reading thread there is no log file: the sender, dropped, says so.
        self.command(Command::Reopen(reply));
    }

    fn command(&self, c: Command) -> bool {
        if self.thread.is_none() || self.commands.send(c).is_err() {
            return false;
        }
        let _ = self.wake.write(1);
        true
    }

    /// foster's end: closes foster's write ends, reads what the pipes still hold, flushes the
    /// log files, lets the relay write what it has queued (see [`Relay::finish`]), and returns
    /// the reports not yet taken. Call it once nothing of the tree is left.
    pub fn finish(mut self) -> Vec<Report> {
        self.stdio.clear();
        if self.command(Command::Finish) {
            if let Some(t) = self.thread.take() {
                let _ = t.join();
            }
        }
        let mut left = Vec::new();
        while let Ok(r) = self.reports.try_recv() {
            left.push(r);
        }
        left
    }
}

/// What the reader takes for one helper index: its name, whether its output is captured, the
/// read ends of its pipes, its log file.
struct Set {
    helper: usize,
    name: String,
    captured: bool,
    ring: ring::Bounds,
    sources: Vec<(OwnedFd, Stream)>,
    file: Option<LogFile>,
}

/// epoll's data for the command eventfd.
const WAKE: u64 = u64::MAX;

struct Source {
    helper: usize,
    stream: Stream,
    fd: OwnedFd,
    split: Splitter,
    open: bool,
    /// Whether its pipe was found full (and grown if it could be, see [`GROWN_PIPE`]).
    full: bool,
    /// Whether its pipe was grown.
    grown: bool,
}

/// Lines of one helper the relay could not take.
#[derive(Debug, Default)]
struct Drops {
    /// Not yet reported.
    pending: u64,
    /// The last report.
    last: Option<Instant>,
}

impl Drops {
    /// Whether its count may be reported at `now`.
    fn due(&self, now: Instant) -> bool {
        self.last.is_none_or(|t| now >= t + REPORT_EVERY)
    }

    /// When its count may be reported (`now` when it may already).
    fn due_at(&self, now: Instant) -> Instant {
        self.last.map_or(now, |t| (t + REPORT_EVERY).max(now))
    }
}

struct Reader {
    epoll: Epoll,
    sources: Vec<Source>,
    output: Arc<Output>,
    relay: Option<Relay>,
    drops: Vec<Drops>,
    files: Vec<Option<LogFile>>,
    reports: tokio_mpsc::UnboundedSender<Report>,
    names: Vec<String>,
    /// Whether each helper's output is captured (for the relay's names).
    captured: Vec<bool>,
    buf: Vec<u8>,
    /// The lines cut from the last read, before they are published.
    batch: Batch,
    lines: Vec<Arc<Line>>,
    wake: Arc<EventFd>,
    commands: std_mpsc::Receiver<Command>,
    finishing: bool,
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader")
            .field("names", &self.names)
            .field("sources", &self.sources.len())
            .finish_non_exhaustive()
    }
}

/// The largest pipe an unprivileged process may ask for (`/proc/sys/fs/pipe-max-size`; 1 MiB
/// when it cannot be read, the kernel's default).
fn pipe_max_size() -> usize {
    std::fs::read_to_string("/proc/sys/fs/pipe-max-size")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1 << 20)
}

/// Milliseconds since the Unix epoch, now.
fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Reader {
    fn run(&mut self) {
        let mut events = vec![EpollEvent::empty(); 64];
        while !self.finishing {
            let mut n = self.wait(&mut events, EpollTimeout::ZERO);
            if n == 0 {
                // Nothing more ready: what is buffered goes out now, not on a timer.
                self.idle();
                n = self.wait(&mut events, self.timeout());
            }
            for e in &events[..n] {
                match e.data() {
                    WAKE => self.commands(),
                    k => self.read(k as usize, CHUNKS_PER_TURN * self.buf.len()),
                }
            }
            self.report(false);
        }
        self.end();
    }

    fn wait(&self, events: &mut [EpollEvent], timeout: EpollTimeout) -> usize {
        loop {
            match self.epoll.wait(events, timeout) {
                Ok(n) => return n,
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => {
                    warn!("epoll_wait on the helpers' output pipes: {e}");
                    return 0;
                }
            }
        }
    }

    /// No timeout, unless a count of lines not relayed waits for its turn.
    fn timeout(&self) -> EpollTimeout {
        let now = Instant::now();
        let due = self
            .drops
            .iter()
            .filter(|d| d.pending > 0)
            .map(|d| d.due_at(now))
            .min();
        match due {
            None => EpollTimeout::NONE,
            Some(t) => {
                let left = t.saturating_duration_since(now);
                // Rounded up: a timeout of 0 ms before the instant would spin.
                let ms = left.as_micros().div_ceil(1000).min(i32::MAX as u128);
                EpollTimeout::try_from(ms as i32).unwrap_or(EpollTimeout::NONE)
            }
        }
    }

    fn commands(&mut self) {
        let _ = self.wake.read();
        while let Ok(c) = self.commands.try_recv() {
            match c {
                Command::Finish => self.finishing = true,
                Command::Set(set) => self.set(*set),
                Command::Reopen(reply) => {
                    let done = self.reopen();
                    if let Some(r) = reply {
                        let _ = r.send(done);
                    }
                }
            }
        }
    }

    /// Index `set.helper` is a new helper's: the former pipes of that index are read to their
    /// end (what they hold is delivered under its former name) and leave the epoll, its
    /// count of lines not relayed is reported, then the new pipes join the epoll, each in the
    /// place of a source that has ended when there is one.
    fn set(&mut self, set: Set) {
        let i = set.helper;
        self.drain_helper(i);
        self.place_helper(i, set.name.clone(), set.captured, set.file);
        self.output.set(i, &set.name, set.ring);
        if !set.captured {
            self.output.not_captured(i);
        }
        for (fd, stream) in set.sources {
            self.watch(i, fd, stream, &set.name);
        }
    }

    /// Reads the open pipes of helper `i` to their end, then closes them.
    fn drain_helper(&mut self, i: usize) {
        for k in 0..self.sources.len() {
            if self.sources[k].helper == i && self.sources[k].open {
                self.read(k, FINAL_DRAIN);
                if self.sources[k].open {
                    self.close(k);
                }
            }
        }
    }

    /// Gives index `i` to a helper named `name`: the indexes before it filled with vacant
    /// ones, and the former helper's count of lines not relayed reported when it had one.
    fn place_helper(&mut self, i: usize, name: String, captured: bool, file: Option<LogFile>) {
        while self.names.len() < i {
            self.names.push(String::new());
            self.captured.push(false);
            self.drops.push(Drops::default());
            self.files.push(None);
        }
        if i < self.names.len() {
            self.report(true);
            self.names[i] = name;
            self.captured[i] = captured;
            self.drops[i] = Drops::default();
            self.files[i] = file;
        } else {
            self.names.push(name);
            self.captured.push(captured);
            self.drops.push(Drops::default());
            self.files.push(file);
        }
    }

    /// Adds pipe `fd`, the `stream` of helper `i` (named `name`), to the sources and the
    /// epoll, in the place of a source that has ended when there is one; a pipe the epoll
    /// refuses is not captured, with a warning.
    fn watch(&mut self, i: usize, fd: OwnedFd, stream: Stream, name: &str) {
        let source = Source {
            helper: i,
            stream,
            fd,
            split: Splitter::new(),
            open: true,
            full: false,
            grown: false,
        };
        let k = match self.sources.iter().position(|s| !s.open) {
            Some(k) => {
                self.sources[k] = source;
                k
            }
            None => {
                self.sources.push(source);
                self.sources.len() - 1
            }
        };
        if let Err(e) = self.epoll.add(
            self.sources[k].fd.as_fd(),
            EpollEvent::new(EpollFlags::EPOLLIN, k as u64),
        ) {
            warn!(
                "cannot watch the {} of helper {}: {e}; it is not captured",
                stream.name(),
                name
            );
            self.sources[k].open = false;
        }
    }

    fn reopen(&mut self) -> Vec<Reopened> {
        let mut done = Vec::new();
        for (i, f) in self.files.iter_mut().enumerate() {
            let Some(f) = f else { continue };
            let error = match f.reopen() {
                Ok(()) => {
                    info!("reopened {}", f.path().display());
                    None
                }
                Err(e) => {
                    warn!("cannot reopen it: {e}; its lines go on to the file it had");
                    Some(e.to_string())
                }
            };
            done.push(Reopened {
                helper: self.names[i].clone(),
                path: f.path().to_path_buf(),
                error,
            });
        }
        done
    }

    /// Reads source `k`: until the pipe is empty or `budget` bytes were read.
    fn read(&mut self, k: usize, budget: usize) {
        let mut left = budget;
        while self.sources[k].open && left > 0 {
            let fd = self.sources[k].fd.as_raw_fd();
            // SAFETY: reads into our own buffer of its length.
            let n = unsafe { libc::read(fd, self.buf.as_mut_ptr().cast(), self.buf.len()) };
            if n < 0 {
                match io::Error::last_os_error().kind() {
                    io::ErrorKind::Interrupted => continue,
                    io::ErrorKind::WouldBlock => return,
                    _ => {
                        warn!(
                            "cannot read the {} of helper {}: {}; it is no longer captured",
                            self.sources[k].stream.name(),
                            self.names[self.sources[k].helper],
                            io::Error::last_os_error()
                        );
                        self.close(k);
                        return;
                    }
                }
            }
            if n == 0 {
                self.close(k);
                return;
            }
            let n = n as usize;
            if n == self.buf.len() && !self.sources[k].full {
                self.grow(k);
            }
            left = left.saturating_sub(n);
            let s = &mut self.sources[k];
            let batch = &mut self.batch;
            s.split.feed(&self.buf[..n], |p, cont| batch.push(p, cont));
            self.deliver(k);
        }
    }

    /// Source `k`'s pipe held a whole read: its helper writes faster than foster reads. The
    /// pipe grows to [`GROWN_PIPE`] when fewer than [`GROWN_PIPES`] have, and the reads to
    /// [`GROWN_CHUNK`]; once per source, best effort (the kernel may refuse: its limits).
    fn grow(&mut self, k: usize) {
        self.sources[k].full = true;
        let grown = self.sources.iter().filter(|s| s.open && s.grown).count();
        if grown >= GROWN_PIPES {
            return;
        }
        let size = GROWN_PIPE.min(pipe_max_size());
        // SAFETY: F_SETPIPE_SZ on a pipe of ours, with an integer argument.
        let r = unsafe {
            libc::fcntl(
                self.sources[k].fd.as_raw_fd(),
                libc::F_SETPIPE_SZ,
                size as libc::c_int,
            )
        };
        if r < 0 {
            return;
        }
        self.sources[k].grown = true;
        if self.buf.len() < GROWN_CHUNK && r as usize > CHUNK {
            self.buf.resize(GROWN_CHUNK, 0);
        }
    }

    /// Every writer is gone: the last line, and the pipe leaves the epoll.
    fn close(&mut self, k: usize) {
        let s = &mut self.sources[k];
        s.open = false;
        let _ = self.epoll.delete(s.fd.as_fd());
        let batch = &mut self.batch;
        s.split.finish(|p, cont| batch.push(p, cont));
        self.deliver(k);
    }

    /// The pieces cut from source `k`: kept, sent to followers, written to the log file, and
    /// relayed: as one batch when the relay writes text to a file, else line by line.
    fn deliver(&mut self, k: usize) {
        if self.batch.is_empty() {
            return;
        }
        let (i, stream) = (self.sources[k].helper, self.sources[k].stream);
        let ts_ms = now_ms();
        let by_line = self.relay.as_ref().is_some_and(Relay::wants_lines);
        self.output.publish(
            i,
            stream,
            ts_ms,
            &self.batch,
            by_line.then_some(&mut self.lines),
        );
        if let Some(f) = &mut self.files[i] {
            f.append(stream, ts_ms, &self.batch);
        }
        if let Some(relay) = &mut self.relay {
            if by_line {
                for line in self.lines.drain(..) {
                    if relay.offer(&line) == Offer::Full {
                        self.drops[i].pending += 1;
                    }
                }
            } else {
                relay.write_batch(&self.names[i], stream, &self.batch);
            }
        }
        self.batch.clear();
    }

    /// Nothing is ready: what the log files gathered is written, counts due are reported.
    fn idle(&mut self) {
        for f in self.files.iter_mut().flatten() {
            f.flush();
        }
        if let Some(r) = &mut self.relay {
            r.flush();
        }
        self.report(false);
    }

    /// Reports the counts that are due (all of them when `all`).
    fn report(&mut self, all: bool) {
        let now = Instant::now();
        for (i, d) in self.drops.iter_mut().enumerate() {
            if d.pending > 0 && (all || d.due(now)) {
                let _ = self.reports.send(Report::Dropped {
                    helper: self.names[i].clone(),
                    lines: d.pending,
                });
                d.pending = 0;
                d.last = Some(now);
            }
        }
    }

    /// foster's end: what the pipes still hold, the lines held, the last counts, the relay.
    fn end(&mut self) {
        for k in 0..self.sources.len() {
            self.read(k, FINAL_DRAIN);
            if self.sources[k].open {
                let s = &mut self.sources[k];
                let batch = &mut self.batch;
                s.split.finish(|p, cont| batch.push(p, cont));
                self.deliver(k);
            }
        }
        self.idle();
        self.report(true);
        if let Some(r) = self.relay.take() {
            r.finish();
        }
    }
}
