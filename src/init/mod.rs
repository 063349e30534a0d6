//! `foster init`: the duties of a container's PID 1, on foster's reaper, built as tini's.
//!
//! Owns the init's life, held in one `Init`: its start (`start.rs`: signals blocked, the role
//! ([`role`]), `-p` (`pdeath.rs`), PROGRAM launched ([`launch`], `program.rs`, [`tty`])), then
//! its loop (`Init::run`): one `poll` over the reaper's signalfd and the forwarded signals'
//! ([`signals`]), each wake dispatched to a duty (`duties.rs`), until PROGRAM ends; with
//! `--wait-all` the rest of the tree is ended first (`teardown.rs`). foster then exits with
//! PROGRAM's status (code, or 128 + signal; `-e` maps codes to 0).
//!
//! No async runtime and no `tracing` subscriber run on this path: log lines are written
//! directly ([`level`], [`write_line`]: one `write` per line, so that PROGRAM's output on the
//! same pipe never tears them), and an idle init keeps few pages resident ([`resident`]). It
//! uses no `supervisor`, `control`, `top` or tokio. [`args`] parses the command line of the
//! `foster-init` binary, the same code without the rest of foster.

/// Writes an error, `foster: error: MESSAGE` as every command writes one
/// ([`crate::base::logging::report`]), unless `-qq` silenced errors.
macro_rules! say_error {
    ($($t:tt)*) => {
        if $crate::init::level() >= -1 {
            $crate::base::logging::report(format_args!($($t)*));
        }
    };
}

/// Writes one log line at `lvl` (0 warning, 1 decision, 2 reap/signal; errors: [`say_error`]).
macro_rules! say {
    ($lvl:expr, $($t:tt)*) => {
        if $crate::init::level() >= $lvl {
            $crate::init::write_line(format_args!($($t)*));
        }
    };
}

pub mod args;
mod duties;
pub mod launch;
mod pdeath;
mod program;
pub mod resident;
pub mod role;
pub mod signals;
mod start;
mod teardown;
pub mod tty;

use std::ffi::OsString;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicI8, Ordering};
use std::time::{Duration, Instant};

use crate::base::sys::{PollFd, poll_until};
use crate::gate::policy::Policy;
use crate::process::reaper::{ExitStatus, Reaper, Routed};

use self::launch::LaunchError;
use self::pdeath::OwnPdeath;
pub use self::pdeath::{PdeathError, parse_pdeath};
use self::program::Program;
use self::role::{Role, SubreaperWish};
use self::signals::{Rewrites, SignalFd};
use self::teardown::Phase;
use self::tty::Terminal;

/// The default `--grace` of `--wait-all`.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(5);

/// Why `foster init` could not supervise PROGRAM (its status: [`InitError::exit_status`]).
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    /// A step of the start (blocking signals, the reaper, the signalfd, the spawner thread) or
    /// the wait failed; `what` says which.
    #[error("{what}: {source}")]
    Io {
        what: &'static str,
        #[source]
        source: io::Error,
    },
    /// `/proc` is not mounted.
    #[error(
        "/proc is not mounted: foster init reads process identities there (a container runtime \
         mounts it; under chroot or unshare, mount proc first)"
    )]
    NoProc,
    /// foster's own parent-death signal (`-p`) could not be armed.
    #[error(transparent)]
    Pdeath(#[from] PdeathError),
    /// PROGRAM could not even be created.
    #[error(transparent)]
    Launch(#[from] LaunchError),
}

impl InitError {
    /// An `Io` error saying `what` failed.
    fn io(what: &'static str) -> impl FnOnce(io::Error) -> InitError {
        move |source| InitError::Io { what, source }
    }

    /// foster's exit status after this error: the launch's (127 for a PROGRAM not found...),
    /// the gate's for a parent already gone (`-p`), otherwise 1.
    pub fn exit_status(&self) -> i32 {
        match self {
            InitError::Launch(e) => e.status,
            InitError::Pdeath(PdeathError::ParentGone { stop, .. }) => stop.exit_status(),
            _ => 1,
        }
    }
}

/// Everything `foster init` was asked to do.
#[derive(Debug, Clone)]
pub struct Options {
    /// PROGRAM and its arguments.
    pub program: OsString,
    pub args: Vec<OsString>,
    /// Forward signals to PROGRAM's process group instead of PROGRAM alone (`-g`). PROGRAM
    /// leads a process group of its own either way.
    pub group: bool,
    /// Signal rewriting (`--rewrite FROM:TO`).
    pub rewrites: Rewrites,
    /// Exit codes mapped to 0 (`-e CODE`).
    pub expect: Vec<i32>,
    /// Whether to become a subreaper when not PID 1.
    pub subreaper: SubreaperWish,
    /// End the rest of the tree and wait for it when PROGRAM ends.
    pub wait_all: bool,
    /// How long the rest of the tree has between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// foster's own parent-death policy (`-p SIGNAL[:exit[:GRACE]]`, one generation): the
    /// signal is forwarded to PROGRAM when the parent dies, and PROGRAM (its group with `-g`)
    /// gets SIGKILL if it is still there after the grace.
    pub pdeath: Option<Policy>,
    /// PROGRAM's parent-death policy chain (`--policy`); `None`: PROGRAM runs unarmed.
    pub policy: Option<Policy>,
    /// Log verbosity: -2 nothing, -1 errors, 0 warnings, 1 decisions, 2 every reap and signal.
    pub verbosity: i8,
}

impl Options {
    /// Options for `program args...` with every default.
    pub fn new(program: impl Into<OsString>, args: Vec<OsString>) -> Options {
        Options {
            program: program.into(),
            args,
            group: false,
            rewrites: Rewrites::default(),
            expect: Vec::new(),
            subreaper: SubreaperWish::Auto,
            wait_all: false,
            grace: DEFAULT_GRACE,
            pdeath: None,
            policy: None,
            verbosity: 0,
        }
    }

    /// The exit status for PROGRAM's `status`: its shell code, or 0 when `-e` lists it.
    pub fn exit_code(&self, status: ExitStatus) -> i32 {
        let code = status.shell_code();
        if self.expect.contains(&code) { 0 } else { code }
    }
}

static LEVEL: AtomicI8 = AtomicI8::new(0);

/// The current log verbosity of foster init.
pub fn level() -> i8 {
    LEVEL.load(Ordering::Relaxed)
}

/// Writes `foster init: MESSAGE` and a newline to standard error in one `write`
/// ([`crate::base::logging::write_stderr`]): PROGRAM usually writes to the same pipe.
pub fn write_line(message: std::fmt::Arguments<'_>) {
    use std::fmt::Write as _;
    let mut line = String::with_capacity(160);
    let _ = writeln!(line, "foster init: {message}");
    crate::base::logging::write_stderr(&line);
}

/// Runs `foster init` and returns its exit status. Must be called before any thread exists.
pub fn run(opts: &Options) -> i32 {
    LEVEL.store(opts.verbosity, Ordering::Relaxed);
    match Init::start(opts).and_then(Init::run) {
        Ok(code) => code,
        Err(e) => {
            say_error!("{e}");
            e.exit_status()
        }
    }
}

/// A running `foster init`: what it owns while PROGRAM runs and the tree ends.
struct Init<'a> {
    opts: &'a Options,
    role: Role,
    /// Reaps every child; its signalfd wakes the loop on SIGCHLD.
    reaper: Reaper<()>,
    /// The forwarded signals, blocked, read here.
    signals: SignalFd,
    /// The creator thread of PROGRAM, kept for the init's life: PROGRAM's parent-death signal
    /// (`--policy`) follows that thread.
    _spawner: crate::gate::spawner::Spawner,
    program: Program,
    /// PROGRAM's status, once reaped.
    status: Option<ExitStatus>,
    /// The terminal whose foreground PROGRAM's group got.
    terminal: Option<Terminal>,
    /// `terminal`, when foster runs PROGRAM's job control (not as PID 1).
    job_control: Option<Terminal>,
    /// `-p`, when armed.
    own_pdeath: Option<OwnPdeath>,
    /// `-p`: once the parent has died, when PROGRAM gets SIGKILL if it has not ended.
    kill_program_at: Option<Instant>,
    phase: Phase,
    /// The reaper's output, kept between rounds.
    reaped: Vec<Routed<()>>,
}

impl Init<'_> {
    /// The loop: wait (no timeout unless a deadline is pending: idle, foster never wakes),
    /// then the duty for what came, until foster init is done. Returns its exit status.
    fn run(mut self) -> Result<i32, InitError> {
        let mut fds = [
            PollFd::input(self.reaper.raw_fd()),
            PollFd::input(self.signals.as_raw_fd()),
        ];
        // SAFETY: an all-zero signalfd_siginfo is a valid value.
        let mut infos: [libc::signalfd_siginfo; 16] = unsafe { std::mem::zeroed() };
        start::drop_startup_pages();
        loop {
            poll_until(&mut fds, self.deadline()).map_err(InitError::io("poll"))?;
            self.on_deadline();
            if fds[1].has_input() {
                let got = self.signals.read(&mut infos);
                for info in &infos[..got] {
                    self.on_signal(info);
                }
            }
            if fds[0].has_input() && self.on_reaped().is_break() {
                return Ok(self.exit_code());
            }
        }
    }

    /// foster's exit status for PROGRAM's: its shell code, or 0 when `-e` lists it.
    fn exit_code(&self) -> i32 {
        let status = self.status.expect("the loop ends only after PROGRAM ended");
        let code = self.opts.exit_code(status);
        if code != status.shell_code() {
            say!(1, "exit status {} mapped to 0 (-e)", status.shell_code());
        }
        code
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::{DeathPath, EXIT_PARENT_GONE, GateStop};
    use crate::process::identity::Identity;

    #[test]
    fn an_error_ends_foster_with_its_own_status() {
        let gone = InitError::from(PdeathError::ParentGone {
            signal: "SIGTERM".into(),
            expected: Identity {
                pid: 7,
                start_time: 9,
            },
            stop: GateStop::ParentGone {
                ppid: 1,
                path: DeathPath::Check,
            },
        });
        assert_eq!(gone.exit_status(), EXIT_PARENT_GONE);
        let text = gone.to_string();
        assert!(text.starts_with("-p SIGTERM: ") && text.ends_with("not starting PROGRAM"));
        assert!(text.contains("expected 7:9"), "{text}");
        let launch = InitError::from(LaunchError {
            message: "cannot run x: no such file".into(),
            status: 127,
            cause: crate::gate::spawner::SpawnError::Target(crate::gate::TargetError::NotFound(
                "x".into(),
            )),
        });
        assert_eq!(launch.exit_status(), 127);
        assert_eq!(launch.to_string(), "cannot run x: no such file");
        let no_proc = InitError::NoProc;
        assert_eq!(no_proc.exit_status(), 1);
        let chain = InitError::from(PdeathError::Chain("TERM;KILL".into()));
        assert_eq!(chain.exit_status(), 1);
    }
}
