//! `foster run`: the supervisor. Config → launches; restarts; orphan policy; shutdown.
//!
//! Owns the life of one supervision: it makes foster a subreaper (verified with `PR_GET`),
//! launches every helper through the [`Spawner`] thread (the gate, arm-then-check), routes the [`Reaper`]'s statuses to
//! each helper's restart state machine, reads what changed in its [`Subtree`] when something of
//! the tree ended (a SIGCHLD, the pidfd of a deeper parent, `watch.rs`, or the kernel's
//! announcement of an end, `births.rs`, which also puts each birth in the tree at once; never on
//! a timer unless `supervisor.rescan` asks where births are not announced) so that [`Registry`]
//! can classify every adoption, applies the orphan policy of each adopted
//! process's generation (its signal, its grace, then SIGKILL), and owns the one idempotent
//! shutdown, whose progress is one phase type (`Stage`). Each helper's readiness and liveness
//! checks run on the same loop (`checks.rs`).
//!
//! ## Threads and signals
//!
//! [`run`] is called on the main thread before any other thread exists. It blocks SIGCHLD and
//! every signal of [`signals`]' table there first (each signal whose default action would end
//! foster: shutdown, reopen the logs, or ignore), so every thread created afterwards (the
//! launcher, the output's reader and relay, the runtime) has them blocked, and they are
//! consumed only through signalfds. The event loop is a single-threaded tokio runtime waiting
//! on those signalfds, the parents' epoll (`watch.rs`), the process-events connector's socket
//! (`births.rs`, subscribed before the tree is contained), the control socket, the output's
//! reports ([`crate::supervision::output`]), the notify sockets, the reports of the checks' tasks
//! (`checks.rs`) and the metrics responder's questions ([`crate::supervision::metrics`]): no timer is armed unless a restart delay, a grace period or a check is
//! pending, or a read found a process in the middle of an `execve` whose environment it needs,
//! so an idle supervisor does not wake up. The helpers' output is read, kept and relayed on
//! threads of its own, never on this loop.
//!
//! ## Exit statuses
//!
//! See [`EXIT_OK`] and the constants after it; `docs/run.md` has the table.

mod births;
mod checks;
mod control;
mod lifecycle;
mod reload;
pub mod signals;
mod watch;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use tokio::io::unix::AsyncFd;
use tracing::{debug, info, warn};

use crate::gate::adoption::{self, Registry};
use crate::gate::spawner::{CredentialError, LaunchSpec, SpawnError, Spawner, group_id, user_id};
use crate::process::identity::{Identity, ProcessRef};
use crate::process::reaper::{ExitStatus, Reaper, Routed};
use crate::process::signal::SignalFd;
use crate::process::signal::name as signal_name;
use crate::process::state::HelperState;
use crate::process::tree::{ScanOptions, Subtree};
use crate::supervision::config::{Config, GenerationPolicy, Helper};
use crate::supervision::contain::{Contain, Entered};
use crate::supervision::event::{Event, EventLog, Narration, Record, SignalReason};

/// Every helper ended successfully, or a requested shutdown ended everything within its grace.
pub const EXIT_OK: i32 = 0;
/// foster could not supervise (subreaper refused, launcher or runtime failure).
pub const EXIT_ERROR: i32 = 1;
/// The configuration is invalid (nothing was started).
pub const EXIT_CONFIG: i32 = 2;
/// No helper is left to supervise and at least one ended in failure or was given up on.
pub const EXIT_HELPER_FAILED: i32 = 3;
/// A requested shutdown completed, but something had to be SIGKILLed after its grace.
pub const EXIT_FORCED: i32 = 4;

/// The first delay before the tree is read again while a process of it is caught in the middle
/// of an `execve` (an exec lasts well under a millisecond, unless its program's pages are slow to
/// read); it doubles at each read that still finds one, up to [`EXEC_WAIT_MAX`].
const EXEC_WAIT_MIN: Duration = Duration::from_millis(5);
/// The longest delay between two reads while a process is caught in an `execve`.
const EXEC_WAIT_MAX: Duration = Duration::from_secs(1);

/// Options of `foster run` besides the configuration.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Whether to run the tree in a new PID namespace with foster as its init.
    pub contain: Contain,
    /// Append events as JSON lines here.
    pub events_log: Option<PathBuf>,
    /// When to rotate the events log.
    pub events_log_rotation: crate::supervision::event::Rotation,
    /// The control socket (see `docs/control.md`).
    pub socket: SocketOption,
    /// The configuration file, as given (shown by `status`, names the default socket).
    pub config_path: Option<PathBuf>,
    /// Run even when another `foster run` of the same configuration file runs
    /// ([`crate::supervision::instance`]).
    pub allow_second_instance: bool,
    /// What foster writes on its standard output for its helpers' captured lines.
    pub relay: crate::supervision::output::Format,
    /// The signal that reloads the configuration (`--reload-signal HUP`) instead of what the
    /// signal table says it does; none by default (SIGHUP shuts down, as a closed terminal).
    pub reload_signal: Option<crate::process::signal::Sig>,
    /// Serve the Prometheus text on `http://ADDR/metrics` (`docs/metrics.md`); none by default.
    pub metrics: Option<std::net::SocketAddr>,
}

/// Where the control socket goes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum SocketOption {
    /// `control::server::default_path` of the configuration's name; when a live supervisor
    /// holds it, the name gets foster's pid; any other failure is an error (`--no-socket`
    /// runs without one).
    #[default]
    Default,
    /// Exactly here; any failure is an error.
    Path(PathBuf),
    /// No control socket.
    None,
    /// A listening socket bound at `path` and inherited as descriptor `fd` (`foster demo`).
    Inherited { fd: i32, path: PathBuf },
}

/// Runs a supervision to its end and returns foster's exit status. Call it on the main thread
/// before any other thread exists (see the module docs).
pub fn run(config: Config, options: Options) -> io::Result<i32> {
    signals::block()?;
    // Before the tree is contained (the kernel ignores a request from another namespace), while
    // no other thread exists (its probe forks a child that exits at once).
    let announced = births::subscribe();
    let credentials = first_with_credentials(&config);
    // Judged as foster's user sees it, before a user namespace could make owners unknown.
    crate::base::ownership::judge_runtime_root(&crate::supervision::control::server::default_dir());
    if options.contain != Contain::Off {
        judge_dirs(&config, &options)?;
    }
    // Before the namespace: the lock's pid is the caller's, and the outer process holds it too.
    let mut claim = claim(&options)?;
    let contained = match crate::supervision::contain::enter(options.contain, credentials)? {
        Entered::Ended(code) => return Ok(code), // the outer process: the tree has ended
        Entered::Init => true,
        Entered::Uncontained => false,
    };
    become_subreaper()?;
    let events = options
        .events_log
        .as_ref()
        .map(|p| EventLog::open(p, options.events_log_rotation))
        .transpose()?;
    // Bound before any thread exists: binding sets the umask for an instant.
    let bound = bind_socket(&options)?;
    if let Some(c) = &mut claim {
        c.record(bound.as_ref().map(|b| b.path()))?;
    }
    // A port that cannot be had is said before anything starts.
    let metrics = options
        .metrics
        .map(crate::supervision::metrics::http::bind)
        .transpose()?;
    // The notify sockets the helpers need now (one a reload's helper needs is bound then).
    let checks_io = checks::bind_notify(&config)?;
    // From here on, foster's lines never wait on its standard error (dropped last: it writes
    // what is left once the supervision has ended).
    let _lines = crate::base::logging::background()?;
    // The output threads start here, after the signals are blocked: they inherit the mask.
    let output = crate::supervision::output::start(&helper_outputs(&config), options.relay)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .enable_io()
        .build()?;
    let mut sup = Supervisor::new(config, contained, events, output)?;
    sup.take_births(announced);
    sup.control = control::Control::new(options.config_path.clone(), bound);
    sup.control.metrics_listener = metrics;
    sup.config_path = options.config_path.clone();
    sup.reload_signal = options
        .reload_signal
        .map(crate::process::signal::Sig::number);
    sup.checks_io = checks_io;
    rt.block_on(sup.run())
}

/// The name of the first helper that runs as another user or group, if any.
fn first_with_credentials(config: &Config) -> Option<&str> {
    config
        .helpers
        .iter()
        .find(|h| h.user.is_some() || h.group.is_some())
        .map(|h| h.name())
}

/// Takes the lock of the configuration file's one instance, unless a second is allowed.
fn claim(options: &Options) -> io::Result<Option<crate::supervision::instance::Claim>> {
    match (&options.config_path, options.allow_second_instance) {
        (Some(path), false) => {
            crate::supervision::instance::Claim::take(path).map_err(io::Error::other)
        }
        _ => Ok(None),
    }
}

/// Judges the directories of the files foster opens at its start (the events log, the
/// helpers' log files, the control socket) where it was started, before a user namespace
/// would hide their owners ([`crate::base::ownership::judge_before_namespace`]).
fn judge_dirs(config: &Config, options: &Options) -> io::Result<()> {
    use crate::base::ownership::{DirRule, parent_dir};
    use crate::supervision::control::server::default_dir;
    // What each is for (named as its own errors name it), its directory, the rule.
    let file =
        |what: &str, p: &std::path::Path| (format!("{what} {}", p.display()), parent_dir(p).into());
    let mut dirs: Vec<(String, PathBuf, DirRule)> = Vec::new();
    if let Some(p) = &options.events_log {
        let (what, dir) = file("events log", p);
        dirs.push((what, dir, DirRule::Given("the events log")));
    }
    for h in &config.helpers {
        if let Some(log) = &h.log {
            let name = crate::base::sanitize::escape(h.name().as_bytes());
            let (what, dir) = file(&format!("helper {name}'s log"), &log.file);
            dirs.push((what, dir, DirRule::Given("the log file")));
        }
    }
    let private = |dir: &PathBuf| *dir == default_dir();
    match &options.socket {
        SocketOption::Path(p) => {
            let (what, dir) = file("control socket", p);
            let rule = if private(&dir) {
                DirRule::Private
            } else {
                DirRule::Given("the socket")
            };
            dirs.push((what, dir, rule));
        }
        SocketOption::Default => {
            dirs.push(("control socket".into(), default_dir(), DirRule::Private));
        }
        SocketOption::None | SocketOption::Inherited { .. } => {}
    }
    for (what, dir, rule) in dirs {
        crate::base::ownership::judge_before_namespace(&dir, rule)
            .map_err(|m| io::Error::other(format!("{what}: {m}")))?;
    }
    Ok(())
}

/// What the output capture needs of each helper.
fn helper_outputs(config: &Config) -> Vec<crate::supervision::output::HelperOutput> {
    config.helpers.iter().map(helper_output).collect()
}

/// What the output capture needs of one helper.
fn helper_output(h: &Helper) -> crate::supervision::output::HelperOutput {
    crate::supervision::output::HelperOutput {
        name: h.name().to_string(),
        mode: h.output,
        log: h.log.as_ref().map(|l| (l.file.clone(), l.rotation())),
        ring: h.ring.bounds(),
    }
}

/// Binds the control socket `options` ask for.
fn bind_socket(
    options: &Options,
) -> io::Result<Option<crate::supervision::control::server::Bound>> {
    use crate::supervision::control::server::{self, BindError};
    let name = options
        .config_path
        .as_ref()
        .and_then(|p| p.file_stem())
        .map(|s| s.to_string_lossy().into_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| format!("foster-{}", std::process::id()));
    match &options.socket {
        SocketOption::None => Ok(None),
        SocketOption::Path(p) => server::bind(p).map(Some).map_err(io::Error::other),
        SocketOption::Inherited { fd, path } => {
            server::adopt(*fd, path).map(Some).map_err(io::Error::other)
        }
        SocketOption::Default => {
            let path = server::default_path(&name);
            match server::bind(&path) {
                Ok(b) => Ok(Some(b)),
                Err(BindError::Live(_)) => {
                    let alt = server::default_path(&format!("{name}-{}", std::process::id()));
                    warn!(
                        "control socket {}: another supervisor listens there; using {}",
                        path.display(),
                        alt.display()
                    );
                    server::bind(&alt).map(Some).map_err(io::Error::other)
                }
                Err(e) => Err(io::Error::other(format!(
                    "{e}; foster run --no-socket runs without a control socket"
                ))),
            }
        }
    }
}

/// Sets `PR_SET_CHILD_SUBREAPER` and reads it back; either failing is an error.
pub fn become_subreaper() -> io::Result<()> {
    // SAFETY: plain prctl calls with valid arguments.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
        return Err(io::Error::other(format!(
            "cannot become a subreaper (PR_SET_CHILD_SUBREAPER): {}",
            io::Error::last_os_error()
        )));
    }
    let mut on: libc::c_int = 0;
    // SAFETY: the kernel writes one int.
    if unsafe {
        libc::prctl(
            libc::PR_GET_CHILD_SUBREAPER,
            &mut on as *mut libc::c_int,
            0,
            0,
            0,
        )
    } != 0
        || on == 0
    {
        return Err(io::Error::other(
            "PR_GET_CHILD_SUBREAPER does not confirm foster is a subreaper",
        ));
    }
    Ok(())
}

/// A raw fd for `AsyncFd` (owned elsewhere).
struct Fd(RawFd);
impl AsRawFd for Fd {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

/// The supervision's phase: where the one shutdown stands. Its transitions are its methods:
/// `Supervising` → `Stopping` ([`Stage::begin_stop`], once) → `Sweeping`
/// ([`Stage::begin_sweep`]); [`Stage::mark_forced`] records, during the shutdown, that a grace
/// ran out and something was SIGKILLed; [`Stage::exit_status`] reads the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Launching helpers and restarting them.
    Supervising,
    /// The orderly shutdown: stop signals sent, their graces running.
    Stopping(Shutdown),
    /// The final SIGKILL sweep of whatever is left, repeated on each SIGCHLD until foster has
    /// no child.
    Sweeping(Shutdown),
}

/// What a shutdown records for foster's exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Shutdown {
    /// A signal or a `stop` request asked for it (else: nothing was left to supervise).
    requested: bool,
    /// A grace ran out and something had to be SIGKILLed.
    forced: bool,
}

impl Stage {
    /// Whether the shutdown has begun (stopping or sweeping).
    fn shutting_down(self) -> bool {
        self != Stage::Supervising
    }

    fn sweeping(self) -> bool {
        matches!(self, Stage::Sweeping(_))
    }

    /// Supervising → Stopping. Returns false, and changes nothing, once the shutdown has begun.
    fn begin_stop(&mut self, requested: bool) -> bool {
        if self.shutting_down() {
            return false;
        }
        *self = Stage::Stopping(Shutdown {
            requested,
            forced: false,
        });
        true
    }

    /// Stopping → Sweeping (sweeping again is no change).
    fn begin_sweep(&mut self) {
        *self = match *self {
            Stage::Supervising => Stage::Sweeping(Shutdown {
                requested: false,
                forced: false,
            }),
            Stage::Stopping(s) | Stage::Sweeping(s) => Stage::Sweeping(s),
        };
    }

    /// A grace ran out and something was SIGKILLed: recorded during the shutdown only (an
    /// orphan's grace while supervising does not change foster's exit status).
    fn mark_forced(&mut self) {
        if let Stage::Stopping(s) | Stage::Sweeping(s) = self {
            s.forced = true;
        }
    }

    /// foster's exit status once nothing is left; `helpers_succeeded` says whether every
    /// helper ended in success (asked only when no shutdown was requested).
    fn exit_status(self, helpers_succeeded: impl FnOnce() -> bool) -> i32 {
        match self {
            Stage::Stopping(s) | Stage::Sweeping(s) if s.requested => {
                if s.forced {
                    EXIT_FORCED
                } else {
                    EXIT_OK
                }
            }
            _ if helpers_succeeded() => EXIT_OK,
            _ => EXIT_HELPER_FAILED,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
/// Whose status a reaped pid is.
enum Owner {
    /// Helper `i`'s process.
    Helper(usize),
    /// An exec probe of helper `i`'s launch (its checks' launch number).
    Probe(usize, u32),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Timer {
    Restart(usize),
    /// A helper's stop grace ran out (`usize::MAX`: the grace of adopted processes).
    StopGrace(usize),
    OrphanGrace(Identity),
    Scan,
    /// The periodic read of `supervisor.rescan`, where births are not announced.
    Rescan,
    /// A timer of helper `i`'s checks, for its launch `n`.
    Check(usize, u32, checks::CheckTimer),
}

/// What the loop waits on, registered with the runtime for the life of [`Supervisor::run`];
/// each descriptor is owned by the supervisor, which outlives them. (Fields in the order
/// they are dropped: the servers first, the registrations last.)
struct Waits {
    metrics_task: Option<tokio::task::JoinHandle<()>>,
    /// The questions of the metrics responder.
    asked: Option<control::Asked>,
    /// The control socket's server, while it serves.
    server: Option<crate::supervision::control::server::Server>,
    /// The loop's turn: which notify socket is looked at first.
    turn: usize,
    /// The notify sockets bound so far; one bound later (for a helper a reload added) is
    /// registered at the next turn of the loop.
    notify: Vec<AsyncFd<Fd>>,
    announced: Option<AsyncFd<Fd>>,
    parents: AsyncFd<Fd>,
    sigs: AsyncFd<Fd>,
    chld: AsyncFd<Fd>,
}

struct Supervisor {
    config: Config,
    contained: bool,
    me: Identity,
    reaper: Reaper<Owner>,
    registry: Registry,
    /// foster's subtree, read again (only what changed) when an event says it changed.
    tree: Subtree,
    /// A pidfd for each parent of the tree below foster's children: their ends move children
    /// without a SIGCHLD to foster.
    watch: watch::ParentWatch,
    /// The kernel's announcements of births and ends in the tree, where it grants them.
    births: Option<births::Births>,
    spawner: Spawner,
    helpers: Vec<lifecycle::Run>,
    /// The `depends_on` graph.
    graph: lifecycle::Graph,
    /// Adopted children under an orphan policy: pid → identity.
    adopted: HashMap<i32, Identity>,
    timers: BTreeMap<(Instant, u64), Timer>,
    timer_seq: u64,
    stage: Stage,
    /// What a grace already SIGKILLed: a helper's stop grace, then the final sweep, and the
    /// sweeps on the reaps that follow do not signal, or report, the same process again.
    killed: HashSet<Identity>,
    events: Option<EventLog>,
    /// The events' lines for people on standard error.
    narration: Narration,
    /// Contained: the tree's pids as the namespace foster was started in sees them, for the
    /// lines, the events log and the relay (the control socket speaks the namespace's own).
    outer: Option<crate::supervision::contain::OuterPids>,
    /// Events the events log could not take since the last one it did.
    events_lost: u64,
    /// Every signal of [`signals::handled`], read in the loop.
    signal_fd: SignalFd,
    /// When to read again while a process of the tree is caught in an `execve`.
    exec_wait: Duration,
    /// The ignored signals already logged.
    ignored_logged: signals::Logged,
    control: control::Control,
    /// The helpers' output: pipes, kept lines, relay (taken at the end, to be finished).
    output: Option<crate::supervision::output::Capture>,
    /// The configuration file, read again by a reload (none: it was standard input).
    config_path: Option<PathBuf>,
    /// The signal that reloads the configuration (`--reload-signal`), if any.
    reload_signal: Option<i32>,
    /// The notify sockets and the reports of the checks' tasks.
    checks_io: checks::ChecksIo,
}

impl Supervisor {
    fn new(
        config: Config,
        contained: bool,
        events: Option<EventLog>,
        output: crate::supervision::output::Capture,
    ) -> io::Result<Supervisor> {
        let me = Identity::current().map_err(io::Error::other)?;
        let reaper = Reaper::new()?;
        let signal_fd = SignalFd::new(signals::handled())?;
        let spawner = Spawner::start()?;
        let helpers = config
            .helpers
            .iter()
            .map(|_| lifecycle::Run::new())
            .collect();
        let graph = lifecycle::Graph::new(&config);
        let tree = Subtree::new(
            me.pid,
            adoption::ENV_PREFIX.as_bytes(),
            ScanOptions::default(),
        )
        .map_err(io::Error::other)?;
        Ok(Supervisor {
            registry: Registry::new(me),
            graph,
            tree,
            watch: watch::ParentWatch::new()?,
            births: None,
            config,
            contained,
            me,
            reaper,
            spawner,
            helpers,
            adopted: HashMap::new(),
            timers: BTreeMap::new(),
            timer_seq: 0,
            stage: Stage::Supervising,
            killed: HashSet::new(),
            events,
            narration: Narration::new(crate::base::logging::verbosity()),
            outer: if contained {
                let outer = crate::supervision::contain::OuterPids::take();
                if outer.is_none() {
                    warn!(
                        "the /proc of the namespace foster was started in could not be kept: \
                         the pids foster shows are those of its own PID namespace"
                    );
                }
                outer
            } else {
                None
            },
            events_lost: 0,
            signal_fd,
            exec_wait: EXEC_WAIT_MIN,
            ignored_logged: signals::Logged::default(),
            control: control::Control::new(None, None),
            output: Some(output),
            config_path: None,
            reload_signal: None,
            checks_io: checks::ChecksIo::new(),
        })
    }

    fn emit(&mut self, event: Event) {
        let record = Record::now(event);
        // Contained, what foster writes itself names the processes by their outer pids.
        let outer = self.outer.as_mut().map(|o| Record {
            event: o.event(&record.event),
            ..record.clone()
        });
        let shown = outer.as_ref().unwrap_or(&record);
        for line in self.narration.push(&shown.event) {
            crate::base::logging::write_stderr(&line);
        }
        if let Some(log) = &mut self.events {
            match log.write(shown) {
                // One warning per failing streak, not one per event.
                Err(e) => {
                    if self.events_lost == 0 {
                        warn!("cannot write the events log (later failures are counted): {e}");
                    }
                    self.events_lost += 1;
                }
                Ok(()) if self.events_lost > 0 => {
                    warn!(
                        "the events log is written again; {} event(s) could not be",
                        self.events_lost
                    );
                    self.events_lost = 0;
                }
                Ok(()) => {}
            }
        }
        self.control.on_event(&record);
    }

    /// Writes a helper's exit that the narration holds for the decision on it: called once
    /// what woke the loop has been handled, so no decision is still to come.
    fn flush_narration(&mut self) {
        if let Some(line) = self.narration.flush() {
            crate::base::logging::write_stderr(&line);
        }
    }

    fn at(&mut self, delay: Duration, timer: Timer) {
        self.timer_seq += 1;
        self.timers
            .insert((Instant::now() + delay, self.timer_seq), timer);
    }

    async fn run(&mut self) -> io::Result<i32> {
        let mut waits = self.register()?;
        self.start();
        loop {
            self.settle();
            if let Some(code) = self.finished() {
                self.end(code, &mut waits).await;
                return Ok(code);
            }
            self.flush_narration();
            // The notify sockets bound since the last turn (a launch binds the one it needs).
            for (_, s) in &self.checks_io.notify[waits.notify.len()..] {
                // SAFETY: the notify sockets, owned by `self` too, never closed before `self`
                // is dropped.
                waits
                    .notify
                    .push(unsafe { AsyncFd::register(Fd(s.raw_fd())) }?);
            }
            waits.turn = waits.turn.wrapping_add(1);
            self.wait_once(&mut waits).await?;
        }
    }

    /// Registers what the loop waits on and starts the control socket's and the metrics'
    /// servers (inside the runtime).
    fn register(&mut self) -> io::Result<Waits> {
        // SAFETY: both fds are owned by `self` (the reaper's signalfd and `signal_fd`), which
        // outlives these registrations: they are dropped at the end of `run`.
        let chld =
            unsafe { AsyncFd::register(Fd(self.reaper.raw_fd())) }.map_err(io::Error::from)?;
        // SAFETY: the signalfd is owned by `self`, which outlives this registration (dropped at the
        // end of `run`).
        let sigs = unsafe { AsyncFd::register(Fd(self.signal_fd.as_raw_fd())) }
            .map_err(io::Error::from)?;
        // SAFETY: the watch's epoll descriptor, owned by `self` too, for the life of `self`.
        let parents =
            unsafe { AsyncFd::register(Fd(self.watch.raw_fd())) }.map_err(io::Error::from)?;
        let announced = match &self.births {
            // SAFETY: the connector's socket is owned by `self.births`, which outlives this
            // registration (dropped at the end of `run`).
            Some(b) => Some(unsafe { AsyncFd::register(Fd(b.raw_fd())) }?),
            None => None,
        };
        let lines = self.output.as_ref().map(|c| c.output().clone());
        let server = self.control.serve(lines)?;
        let (asked, metrics_task) = self.control.serve_metrics()?;
        Ok(Waits {
            chld,
            sigs,
            parents,
            announced,
            notify: Vec::new(),
            turn: 0,
            server,
            asked,
            metrics_task,
        })
    }

    /// Says the start, launches what can be launched and learns the tree once.
    fn start(&mut self) {
        self.emit(Event::Start {
            supervisor: self.me,
            contained: self.contained,
            socket: self.control.socket_path(),
        });
        let quiet = crate::base::logging::verbosity() < 0;
        if let Some(addr) = self.control.metrics_addr().filter(|_| !quiet) {
            // Said as the start is (not with -q): for a port 0, the port it took.
            crate::base::logging::write_stderr(&format!(
                "foster: metrics on http://{addr}/metrics\n"
            ));
        }
        // Helpers without dependencies at once, the others as their dependencies allow.
        for k in 0..self.graph.order.len() {
            let i = self.graph.order[k];
            self.want_launch(i);
        }
        // Statuses of helpers that failed at once are already pending; take them in.
        self.on_sigchld();
        // Learn the machine once, so that later reads cost only what changed since.
        self.rescan();
        self.schedule_rescan();
    }

    /// Nothing of the tree is left: the last lines, then the last counts.
    async fn end(&mut self, code: i32, waits: &mut Waits) {
        if let Some(output) = self.output.take() {
            for r in output.finish() {
                self.on_output_report(r);
            }
        }
        self.emit(Event::Stopped { exit_status: code });
        self.flush_narration();
        if let Some(s) = waits.server.take() {
            s.finish(Duration::from_millis(300)).await;
        }
        if let Some(t) = &waits.metrics_task {
            t.abort();
        }
    }

    /// Waits for the next thing that happens and handles it.
    async fn wait_once(&mut self, waits: &mut Waits) -> io::Result<()> {
        let next = self.timers.first_key_value().map(|(k, _)| k.0);
        tokio::select! {
            g = waits.chld.readable() => {
                let mut g = g?;
                // What the ended processes said before they ended, first (`drain_notify`).
                self.drain_notify();
                self.on_sigchld();
                g.clear_ready();
            }
            g = waits.parents.readable() => {
                let mut g = g?;
                // A parent of the tree ended: its children have a new parent already.
                // What it said before it ended first, while its pidfd is still held
                // (`checks.rs`, `sender_helper`).
                self.drain_notify();
                if self.watch.take_ended() > 0 {
                    self.rescan();
                }
                g.clear_ready();
            }
            g = readable(&waits.announced) => {
                let mut g = g?;
                self.on_announced();
                g.clear_ready();
            }
            g = waits.sigs.readable() => {
                let mut g = g?;
                // In the order read: a USR1 sent before a TERM reopens the log first.
                while let Some(si) = self.signal_fd.read_signal() {
                    self.on_signal(si.ssi_signo as i32, si.ssi_pid, si.ssi_uid);
                }
                g.clear_ready();
            }
            _ = sleep_until(next), if next.is_some() => {
                // A ping or READY=1 sent before the deadline may still be queued.
                self.drain_notify();
                self.fire_timers();
            }
            r = output_report(&mut self.output) => self.on_output_report(r),
            g = any_readable(&waits.notify, waits.turn) => {
                let (k, mut g) = g?;
                if !self.on_notify_readable(k) {
                    g.clear_ready();
                }
            }
            Some(r) = self.checks_io.rx.recv() => self.on_check_report(r),
            cmd = control::recv(&mut waits.server) => self.on_command(cmd),
            reply = control::metrics_asked(&mut waits.asked) => {
                let _ = reply.send(self.metrics_text());
            }
        }
        Ok(())
    }

    /// A report of the output's reading thread.
    fn on_output_report(&mut self, r: crate::supervision::output::Report) {
        match r {
            crate::supervision::output::Report::Dropped { helper, lines } => {
                self.emit(Event::OutputDropped { helper, lines })
            }
        }
    }

    /// One signal of [`signals::handled`], as the table in `docs/run.md` says.
    fn on_signal(&mut self, sig: i32, from_pid: u32, from_uid: u32) {
        if !self.contained && signals::parent_died(sig) {
            info!("{}: foster's parent died; shutting down", signal_name(sig));
            self.begin_shutdown(Some(sig));
            return;
        }
        if self.reload_signal == Some(sig) {
            info!(
                "{} from pid {from_pid} (uid {from_uid}): reloading the configuration",
                signal_name(sig)
            );
            // The outcome is the reload's event, on standard error as every event.
            let _ = self.reload(&signal_name(sig));
            return;
        }
        match signals::action(sig) {
            signals::Action::Shutdown => self.begin_shutdown(Some(sig)),
            signals::Action::ReopenLogs => {
                self.reopen_logs(&signal_name(sig), None);
            }
            signals::Action::Ignore => {
                if self.ignored_logged.first(sig) {
                    warn!(
                        "ignored {} from pid {from_pid} (uid {from_uid}): foster run gives it no \
                         meaning (further ones are logged at debug level)",
                        signal_name(sig)
                    );
                } else {
                    debug!("ignored {} from pid {from_pid}", signal_name(sig));
                }
            }
        }
    }

    /// Closes and opens again every log file foster writes, at their paths, so that after an
    /// outside rotation (logrotate's `create` or `nocreate`) they go to the new files: the
    /// events log here, the helpers' log files on the output's thread, which logs each result
    /// and sends them on `files` when given (it never makes this loop wait for a disk). `by`
    /// says who asked (`SIGUSR1`). Returns the events log's result, when there is one.
    fn reopen_logs(
        &mut self,
        by: &str,
        files: Option<tokio::sync::oneshot::Sender<Vec<crate::supervision::output::Reopened>>>,
    ) -> Option<io::Result<PathBuf>> {
        if let Some(o) = &self.output {
            o.reopen(files);
        }
        let log = self.events.as_mut()?;
        Some(match log.reopen() {
            Ok(()) => {
                info!("{by}: reopened the events log {}", log.path().display());
                Ok(log.path().to_path_buf())
            }
            Err(e) => {
                warn!("{by}: cannot reopen the events log: {e}");
                Err(e)
            }
        })
    }

    /// The exit status once nothing is left to supervise: no helper has a process, is
    /// stopping or waits for its restart delay (nor, while supervising, was stopped by request:
    /// it may be started again), and no process of the tree is left. Helpers still waiting for a
    /// dependency then wait for one that cannot get there by itself: foster ends (status 3).
    fn finished(&mut self) -> Option<i32> {
        let supervising = !self.stage.shutting_down();
        let any_active = self.helpers.iter().any(|h| {
            h.pid.is_some()
                || h.state.is_up()
                || matches!(h.state, HelperState::Stopping | HelperState::Backoff)
                || (supervising && h.state == HelperState::Stopped && !h.retired)
        });
        if any_active {
            return None;
        }
        if has_children() {
            if supervising {
                // Every helper is done; what remains is adopted: end it the orderly way.
                self.begin_shutdown(None);
            }
            return None;
        }
        let helpers = &self.helpers;
        Some(self.stage.exit_status(|| {
            helpers
                .iter()
                .all(|h| h.retired || h.state == HelperState::Completed)
        }))
    }

    fn launch(&mut self, i: usize) {
        let helper = self.config.helpers[i].clone();
        let name = helper.name().to_string();
        let mut spec = match self.spec(&helper) {
            Ok(s) => s,
            Err(e) => return self.launch_error(i, SpawnError::Credentials(e)),
        };
        let pending = match self.prepare_checks(i, &mut spec) {
            Ok(p) => p,
            Err(e) => {
                let e = SpawnError::Io("cannot prepare its readiness check".into(), e);
                return self.launch_error(i, e);
            }
        };
        if let Some(output) = &self.output {
            match output.stdio(i) {
                Ok(stdio) => (spec.stdout, spec.stderr) = stdio,
                Err(e) => {
                    let e = SpawnError::Io("cannot copy its output pipes".into(), e);
                    return self.launch_error(i, e);
                }
            }
        }
        let spawner = &self.spawner;
        let mut failed: Option<String> = None;
        let mut pidfd = None;
        let result: Result<i32, SpawnError> =
            self.reaper
                .launch(Owner::Helper(i), || match spawner.launch(spec) {
                    Ok(l) => {
                        pidfd = Some(l.pidfd);
                        Ok(l.pid)
                    }
                    // A child was created and stopped by the gate or by exec: its status is the
                    // helper's exit (127, 126, the gate's), routed like any other.
                    Err(e) => match e.pid() {
                        Some(pid) => {
                            failed = Some(lifecycle::launch_failure(&e, &helper));
                            Ok(pid)
                        }
                        None => Err(e),
                    },
                });
        match result {
            Ok(pid) => {
                let launched = failed.is_none();
                // Read while the pid is foster's unreaped child: it names this helper.
                let identity = Identity::of(pid).unwrap_or(Identity { pid, start_time: 0 });
                let h = &mut self.helpers[i];
                h.pid = Some(pid);
                h.identity = Some(identity);
                h.process = pidfd.map(|fd| ProcessRef::pinned(identity, fd));
                h.started = Instant::now();
                h.attempt += 1;
                h.launched += u32::from(launched);
                h.status_text = None;
                let attempt = h.attempt;
                // A process that failed before its exec is reaped at once: its one event,
                // `launch_failed` with its status, is written then (`helper_exited`).
                h.failed_launch = failed;
                self.registry
                    .expect_launch(identity, &name, helper.subreaper);
                // Its lineage is known: its environment need not be read (it is, besides, in
                // the middle of its exec now).
                self.tree.known(identity);
                // Contained: its outer pid, read once, through the pidfd of its launch.
                let outer = match (&mut self.outer, &h.process) {
                    (Some(o), Some(p)) => o.learn(p),
                    (Some(o), None) => o.learn(&ProcessRef::unpinned(identity)),
                    (None, _) => None,
                };
                if !launched {
                    return;
                }
                if let Some(o) = &self.output {
                    o.output().launched(i, pid, outer);
                }
                self.emit(Event::Launch {
                    helper: name,
                    identity,
                    attempt,
                });
                let state = if helper.has_readiness() {
                    HelperState::Starting
                } else {
                    HelperState::Running
                };
                self.set_state(i, state, None);
                self.start_checks(i, pending);
            }
            Err(e) => self.launch_error(i, e),
        }
    }

    /// A launch of helper `i` that failed before any process of it was created. When the
    /// failure is the helper's (its program not found or not executable, its user unknown:
    /// [`SpawnError::status_without_child`]), it counts as an exit with the status its process
    /// would have had, 127 for a program not found as in a shell, and goes through the restart
    /// rules like any exit (ending in `give_up` when it keeps failing). When it is foster's
    /// own (the spawner thread gone, `clone` failing), the helper ends there, unrestarted.
    fn launch_error(&mut self, i: usize, e: SpawnError) {
        let helper = self.config.helpers[i].name().to_string();
        let Some(code) = e.status_without_child() else {
            let error = e.to_string();
            self.emit(Event::LaunchFailed {
                helper,
                identity: None,
                error: error.clone(),
                status: None,
            });
            self.set_state(
                i,
                HelperState::Failed,
                Some(format!("(foster could not launch it: {error})")),
            );
            return;
        };
        let error = lifecycle::launch_failure(&e, &self.config.helpers[i]);
        let status = ExitStatus::Exited { code };
        let h = &mut self.helpers[i];
        h.attempt += 1;
        h.started = Instant::now();
        h.failed_launch = Some(error.clone());
        self.emit(Event::LaunchFailed {
            helper,
            identity: None,
            error,
            status: Some(status),
        });
        self.helper_ended(i, status, Duration::ZERO);
    }

    fn spec(&self, h: &Helper) -> Result<LaunchSpec, CredentialError> {
        let mut env: Vec<(OsString, Option<OsString>)> = h
            .env
            .iter()
            .map(|(k, v)| (OsString::from(k), Some(OsString::from(v))))
            .collect();
        env.push((
            adoption::ENV_SUPERVISOR.into(),
            Some(self.me.to_string().into()),
        ));
        env.push((adoption::ENV_HELPER.into(), Some(h.name().into())));
        // The running foster binary, for helpers that call `foster exec` or a nested `foster run`.
        if let Ok(exe) = std::env::current_exe() {
            env.push(("FOSTER_EXE".into(), Some(exe.into_os_string())));
        }
        // Names through the user database, as `foster run --check` reads them; the spawner
        // thread resolves the ids into credentials (the user's groups) before its fork.
        let uid = h.user.as_deref().map(user_id).transpose()?;
        let gid = h.group.as_deref().map(group_id).transpose()?;
        let mut spec = LaunchSpec::new(h.command.program(), h.command.args(), h.policy_chain());
        spec.env = env;
        spec.cwd = h.cwd.clone();
        spec.uid = uid;
        spec.gid = gid;
        // What foster blocks and what Rust's runtime ignores (SIGPIPE) are foster's own: the
        // helper gets the mask and dispositions foster was started with (the spawner's
        // default, ExecSignals::inherited), as every other launch path does.
        Ok(spec)
    }

    fn on_sigchld(&mut self) {
        let mut helper_ended = false;
        let mut unknown_orphan = false;
        // An adopted orphan that had children leaves them to be adopted in turn (by foster,
        // the nearest living subreaper): read the subtree now, as for a helper's death.
        let mut parent_ended = false;
        for routed in self.reaper.reap() {
            match routed {
                Routed::Owned {
                    owner: Owner::Helper(i),
                    reaped,
                } => {
                    helper_ended = true;
                    self.helper_exited(i, reaped.status);
                }
                Routed::Owned {
                    owner: Owner::Probe(i, launch),
                    reaped,
                } => self.probe_exited(i, launch, reaped.pid, reaped.status),
                Routed::Orphan(r) => {
                    let rec = self.registry.reaped(r.pid);
                    let identity = self
                        .adopted
                        .remove(&r.pid)
                        .or(rec.as_ref().map(|x| x.identity));
                    unknown_orphan |= rec.is_none();
                    if let Some(id) = identity {
                        self.killed.remove(&id);
                    }
                    parent_ended |=
                        identity.is_some_and(|id| !self.tree.snapshot().children(&id).is_empty());
                    self.emit(Event::Exit {
                        pid: r.pid,
                        identity,
                        helper: rec.as_ref().and_then(|x| x.helper.clone()),
                        generation: rec.as_ref().map(|x| x.generation),
                        status: r.status,
                    });
                }
            }
        }
        if helper_ended || parent_ended {
            self.rescan();
        } else if unknown_orphan && !self.timers.values().any(|t| *t == Timer::Scan) {
            // A burst of exits foster never saw: one deferred scan for the whole burst.
            self.at(Duration::from_millis(50), Timer::Scan);
        }
        if self.stage.sweeping() && has_children() {
            self.sweep();
        }
    }

    fn helper_exited(&mut self, i: usize, status: ExitStatus) {
        let name = self.config.helpers[i].name().to_string();
        let h = &mut self.helpers[i];
        let pid = h.pid.take().unwrap_or(0);
        let identity = h.identity;
        h.process = None;
        // What its process said last is not said of a helper that has none.
        h.status_text = None;
        let ran_for = h.started.elapsed();
        self.registry.reaped(pid);
        if let Some(id) = identity {
            self.killed.remove(&id);
        }
        self.end_checks(i);
        let event = match self.helpers[i].failed_launch.clone() {
            // Its launch failed before its exec: the one event of it, with how it ended.
            Some(error) => Event::LaunchFailed {
                helper: name,
                identity,
                error,
                status: Some(status),
            },
            None => Event::Exit {
                pid,
                identity,
                helper: Some(name),
                generation: Some(1),
                status,
            },
        };
        self.emit(event);
        self.helper_ended(i, status, ran_for);
    }

    fn rescan(&mut self) {
        let changes = match self.tree.update() {
            Ok((changes, stats)) => {
                debug!(?stats, changes = changes.len(), "read foster's subtree");
                changes
            }
            Err(e) => {
                warn!("cannot read foster's subtree in /proc: {e}");
                return;
            }
        };
        if let Some(b) = &mut self.births {
            b.read(self.tree.snapshot(), &changes, self.outer.as_mut());
        }
        self.watch_parents();
        let adoptions = self.registry.observe(self.tree.snapshot(), &changes);
        self.adopted_now(adoptions);
    }

    /// Makes the parents' watch follow the tree (`watch.rs`), before anything else can end.
    fn watch_parents(&mut self) {
        let synced = self.watch.sync(self.tree.snapshot(), self.me);
        if synced != watch::Synced::default() {
            debug!(
                ?synced,
                watched = self.watch.len(),
                "parents of the tree watched"
            );
        }
        if synced.gone > 0 {
            // A parent ended after the read: read again, on the loop's next turn.
            self.at(Duration::ZERO, Timer::Scan);
        }
    }

    /// The adoptions a read found: each one's event, and its generation's policy for those
    /// that came to foster.
    fn adopted_now(&mut self, adoptions: Vec<adoption::Adoption>) {
        // A process caught in the middle of an execve has no environment to read yet, and its
        // adoption waits for it: read again shortly (then less and less often) until it is out.
        if self.tree.pending_environ() > 0 || self.registry.waiting() > 0 {
            if !self.timers.values().any(|t| *t == Timer::Scan) {
                self.at(self.exec_wait, Timer::Scan);
                self.exec_wait = (self.exec_wait * 2).min(EXEC_WAIT_MAX);
            }
        } else {
            self.exec_wait = EXEC_WAIT_MIN;
        }
        for a in adoptions {
            self.emit(Event::Reparented {
                identity: a.identity,
                helper: a.helper.clone(),
                generation: Some(a.generation),
                from: a.from,
                to: a.to,
                expected: Some(a.expected),
                classification: a.classification,
            });
            if a.to == self.me && !self.adopted.contains_key(&a.identity.pid) {
                let policy = self.policy_for(a.helper.as_deref(), a.generation);
                self.adopted.insert(a.identity.pid, a.identity);
                // An adopted process is our child until we reap it: its pid cannot be reused.
                self.signal(
                    a.identity,
                    a.helper.clone(),
                    policy.signal(),
                    SignalReason::OrphanPolicy,
                    Some(policy.grace.0),
                );
                self.at(policy.grace.0, Timer::OrphanGrace(a.identity));
            }
        }
    }

    fn policy_for(&self, helper: Option<&str>, generation: u32) -> GenerationPolicy {
        match helper.and_then(|h| self.config.helper(h)) {
            Some(h) => h.generation(generation),
            None => self.config.supervisor.orphan_policy.clone(),
        }
    }

    /// Sends `sig` to `target` and no other process: through the pidfd held for a running
    /// helper, else through one opened and checked now ([`crate::process::identity::signal`]), so that a
    /// reused pid is never signalled.
    fn send(&self, target: Identity, sig: i32) -> io::Result<()> {
        let held = self
            .helpers
            .iter()
            .filter_map(|h| h.process.as_ref())
            .find(|p| p.identity() == target);
        match held {
            Some(p) => p.signal(sig),
            None => crate::process::identity::signal(target, sig),
        }
    }

    /// [`Supervisor::send`], then the `signal` event when it was sent (with the grace before
    /// SIGKILL it starts, if any).
    fn signal(
        &mut self,
        target: Identity,
        helper: Option<String>,
        sig: i32,
        reason: SignalReason,
        grace: Option<Duration>,
    ) {
        if self.send(target, sig).is_ok() {
            // A stopped process (SIGSTOP, a terminal's SIGTSTP) acts on nothing but SIGKILL
            // until it is continued: a signal that starts a grace (a stop signal, an orphan
            // policy's) is followed by SIGCONT, as systemd does, so that the grace is the
            // process's own to end in and not a wait for SIGKILL.
            if grace.is_some() && sig != libc::SIGKILL {
                let _ = self.send(target, libc::SIGCONT);
            }
            self.emit(Event::Signal {
                target,
                helper,
                generation: self.registry.get(&target).map(|r| r.generation),
                signal: signal_name(sig),
                reason,
                grace_ms: grace.map(|g| g.as_millis() as u64),
            });
        }
    }

    fn fire_timers(&mut self) {
        let now = Instant::now();
        while let Some((&key, &timer)) = self.timers.first_key_value() {
            if key.0 > now {
                break;
            }
            self.timers.remove(&key);
            match timer {
                Timer::Restart(i) => {
                    if !self.stage.shutting_down() && self.helpers[i].state == HelperState::Backoff
                    {
                        self.want_launch(i);
                        self.on_sigchld();
                    }
                }
                Timer::OrphanGrace(id) => {
                    if self.adopted.get(&id.pid) == Some(&id) {
                        let helper = self.registry.get(&id).and_then(|r| r.helper.clone());
                        self.stage.mark_forced();
                        self.kill_after_grace(id, helper);
                    }
                }
                Timer::StopGrace(usize::MAX) => self.sweep(),
                Timer::StopGrace(i) => self.stop_grace_over(i),
                Timer::Scan => self.rescan(),
                Timer::Rescan => {
                    self.rescan();
                    self.schedule_rescan();
                }
                Timer::Check(i, launch, t) => self.on_check_timer(i, launch, t),
            }
        }
    }

    /// Starts the one orderly shutdown; later calls do nothing. Helpers waiting (for a
    /// dependency or a restart delay) are not launched any more; the helpers that run are
    /// stopped in reverse dependency order ([`Supervisor::settle`]).
    fn begin_shutdown(&mut self, signal: Option<i32>) {
        if !self.stage.begin_stop(signal.is_some()) {
            return;
        }
        self.emit(Event::Shutdown {
            signal: signal.map(signal_name),
        });
        self.timers
            .retain(|_, t| !matches!(t, Timer::Restart(_) | Timer::Check(..)));
        self.stop_all_checks();
        for i in 0..self.helpers.len() {
            if matches!(
                self.helpers[i].state,
                HelperState::Backoff | HelperState::Waiting
            ) {
                self.set_state(i, HelperState::Stopped, Some("for the shutdown".into()));
            }
        }
        self.rescan();
        self.settle();
    }

    fn adopted_grace(&self) -> Duration {
        if self.adopted.is_empty() {
            return Duration::ZERO;
        }
        self.config
            .helpers
            .iter()
            .flat_map(|h| h.generations.iter().map(|g| g.grace.0))
            .chain([
                self.config.supervisor.orphan_policy.grace.0,
                crate::supervision::config::GenerationPolicy::default()
                    .grace
                    .0,
            ])
            .max()
            .unwrap_or_default()
    }

    /// SIGKILLs `id` once its grace is over, at most once per process.
    fn kill_after_grace(&mut self, id: Identity, helper: Option<String>) {
        if self.killed.insert(id) {
            self.signal(id, helper, libc::SIGKILL, SignalReason::GraceExpired, None);
        }
    }

    /// SIGKILL to every live process of the tree, deepest first; repeated on each SIGCHLD
    /// until no child is left.
    fn sweep(&mut self) {
        self.stage.begin_sweep();
        self.timers.retain(|_, t| !matches!(t, Timer::StopGrace(_)));
        self.rescan();
        for id in self.registry.tree_deepest_first() {
            let helper = self.registry.get(&id).and_then(|r| r.helper.clone());
            self.stage.mark_forced();
            self.kill_after_grace(id, helper);
        }
    }
}

/// Whether foster has any child left (running or a zombie), without consuming a status.
pub fn has_children() -> bool {
    // SAFETY: a WNOWAIT peek fills `info` and consumes nothing.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: waitid with WNOWAIT fills `info`, a stack struct, and consumes nothing.
    let r = unsafe {
        libc::waitid(
            libc::P_ALL,
            0,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    r == 0
}

/// The first of `fds` that is readable, with its index, looked at from the `turn`th on (so
/// that a socket kept busy does not starve the others); pending forever when there are none.
async fn any_readable(
    fds: &[AsyncFd<Fd>],
    turn: usize,
) -> io::Result<(usize, tokio::io::unix::AsyncFdReadyGuard<'_, Fd>)> {
    std::future::poll_fn(|cx| {
        for j in 0..fds.len() {
            let k = (turn + j) % fds.len();
            if let std::task::Poll::Ready(r) = fds[k].poll_read_ready(cx) {
                return std::task::Poll::Ready(r.map(|g| (k, g)));
            }
        }
        std::task::Poll::Pending
    })
    .await
}

/// `fd` readable (pending forever without one).
async fn readable(
    fd: &Option<AsyncFd<Fd>>,
) -> io::Result<tokio::io::unix::AsyncFdReadyGuard<'_, Fd>> {
    match fd {
        Some(fd) => fd.readable().await,
        None => std::future::pending().await,
    }
}

/// The next report of the output's reading thread (pending forever without one).
async fn output_report(
    output: &mut Option<crate::supervision::output::Capture>,
) -> crate::supervision::output::Report {
    match output {
        Some(o) => o.report().await,
        None => std::future::pending().await,
    }
}

async fn sleep_until(when: Option<Instant>) {
    if let Some(w) = when {
        tokio::time::sleep_until(tokio::time::Instant::from_std(w)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stage_moves_forward_once_and_says_the_exit_status() {
        let mut st = Stage::Supervising;
        st.mark_forced(); // an orphan's grace while supervising: not a forced shutdown
        assert_eq!(st, Stage::Supervising);
        assert_eq!(st.exit_status(|| true), EXIT_OK);
        assert_eq!(st.exit_status(|| false), EXIT_HELPER_FAILED);
        assert!(st.begin_stop(true));
        assert!(st.shutting_down() && !st.sweeping());
        assert!(!st.begin_stop(false), "one shutdown only");
        assert_eq!(
            st.exit_status(|| false),
            EXIT_OK,
            "requested, nothing forced"
        );
        st.begin_sweep();
        assert!(st.shutting_down() && st.sweeping());
        st.mark_forced();
        assert_eq!(st.exit_status(|| true), EXIT_FORCED);
        // A shutdown nobody asked for (nothing left to supervise) reports the helpers.
        let mut st = Stage::Supervising;
        assert!(st.begin_stop(false));
        st.mark_forced();
        assert_eq!(st.exit_status(|| false), EXIT_HELPER_FAILED);
        assert_eq!(st.exit_status(|| true), EXIT_OK);
    }
}
