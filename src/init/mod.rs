//! `foster init`: the duties of a container's PID 1, on foster's reaper.
//!
//! Owns the init's life: block the forwarded signals and SIGCHLD before anything else, settle
//! the role (PID 1, child subreaper, or neither, said plainly: [`role`]), arm foster's own
//! parent-death signal when asked, launch PROGRAM ([`launch`]) with the signal state foster
//! inherited ([`signals`]) and, on a terminal, the foreground and job control ([`tty`]: when
//! PROGRAM stops on Ctrl-Z, foster stops too, and resumes PROGRAM when continued); then one
//! `poll` over two
//! signalfds (the reaper's SIGCHLD and the forwarded signals), with no timeout: idle, foster
//! never wakes. Every zombie is reaped by [`crate::process::reaper`], every forwarded signal goes to
//! PROGRAM or its process group (rewritten when asked), through the pidfd `clone` returned with
//! PROGRAM (held in an [`identity::ProcessRef`](crate::process::identity::ProcessRef)). When PROGRAM ends foster exits with its
//! status (code, or 128 + signal; `-e` maps codes to 0), or with `--wait-all` first ends the
//! rest of the tree: SIGTERM, then SIGKILL after the grace, and exits when nothing is left.
//!
//! No async runtime and no `tracing` subscriber run on this path: foster init's log lines are
//! written directly ([`level`], [`write_line`]: one `write` per line, so that PROGRAM's output
//! on the same pipe never tears them), so that the pages an idle init keeps resident are few
//! ([`resident`]).

pub mod launch;
pub mod resident;
pub mod role;
pub mod signals;
pub mod tty;

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicI8, Ordering};
use std::time::{Duration, Instant};

use crate::process::identity::{Identity, ProcessRef};
use crate::process::reaper::{ExitStatus, Reaper, Routed};

use self::launch::{LaunchPlan, Launched};
use self::role::{Role, SubreaperWish};
use self::signals::{Inherited, Rewrites, SignalFd};
use self::tty::Terminal;
use crate::base::sys::{PollFd, poll_until};
use crate::gate::policy::{Policy, Reaction};
use crate::gate::spawner::Spawner;
use crate::gate::{GatePlan, GateStop, SignalSetup};

/// The default `--grace` of `--wait-all`.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(5);

/// Why `foster init` could not supervise PROGRAM (its status is then 1).
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
}

impl InitError {
    /// An `Io` error saying `what` failed.
    fn io(what: &'static str) -> impl FnOnce(io::Error) -> InitError {
        move |source| InitError::Io { what, source }
    }
}

/// `-p SIGNAL[:exit[:GRACE]]` is not one foster can take or arm; the message names the value.
#[derive(Debug, thiserror::Error)]
pub enum PdeathError {
    /// Not a policy.
    #[error("{0}")]
    Policy(#[from] crate::gate::policy::PolicyError),
    /// A chain of generations.
    #[error(
        "{0:?}: one generation only (SIGNAL[:exit[:GRACE]]): -p is foster's own; give \
         PROGRAM's chain with --policy"
    )]
    Chain(String),
    /// Reaction `notify`.
    #[error(
        "{0:?}: reaction notify is for a program that handles the event itself; foster \
         forwards the signal to PROGRAM (exit) or dies at once (kill)"
    )]
    Notify(String),
    /// A signal foster does not forward.
    #[error("-p {0}: not a signal foster can receive and forward (use TERM, HUP, KILL...)")]
    NotForwarded(String),
    /// `FOSTER_PARENT` is not an identity.
    #[error("{var}: {0}", var = crate::gate::policy::ENV_PARENT)]
    ExpectedParent(#[from] crate::process::identity::IdentityError),
    /// `prctl(PR_SET_PDEATHSIG)` failed.
    #[error("-p {signal}: prctl(PR_SET_PDEATHSIG) failed: {source}")]
    Arm {
        signal: String,
        #[source]
        source: io::Error,
    },
    /// The gate stopped for another reason than a parent already gone.
    #[error("-p {signal}: {stop}")]
    Gate {
        signal: String,
        #[source]
        stop: GateStop,
    },
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
    match run_inner(opts) {
        Ok(code) => code,
        Err(e) => {
            say_error!("{e}");
            1
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    /// PROGRAM runs.
    Running,
    /// PROGRAM ended; the rest got SIGTERM and has until the deadline.
    Draining(Instant),
    /// The rest got SIGKILL; waiting until nothing is left.
    Killing,
}

fn run_inner(opts: &Options) -> Result<i32, InitError> {
    let inherited = Inherited::get();
    // The parent foster started with, read as early as possible (for -p without FOSTER_PARENT).
    let first_parent = Identity::parent().ok().flatten();
    let forwarded = signals::forwarded();
    // First: SIGCHLD and every forwarded signal blocked, before any thread exists.
    crate::process::reaper::block_signals(&[]).map_err(InitError::io("cannot block SIGCHLD"))?;
    signals::block(forwarded).map_err(InitError::io("cannot block the forwarded signals"))?;

    let me = std::process::id() as i32;
    let role = role::decide(me == 1, opts.subreaper, role::become_subreaper);
    if let Some(w) = role::warning(&role, me) {
        say!(0, "warning: {w}");
    }
    say!(1, "pid {me}: {role}");
    if role == Role::Subreaper {
        say!(
            1,
            "PR_GET_CHILD_SUBREAPER reads 1: orphans of PROGRAM's tree come to foster"
        );
    }

    let own_pdeath = match &opts.pdeath {
        Some(policy) => Some(arm_own_pdeath(policy, first_parent)?),
        None => None,
    };

    let mut reaper: Reaper<()> = Reaper::new().map_err(InitError::io("cannot start the reaper"))?;
    let sfd =
        SignalFd::new(forwarded).map_err(InitError::io("signalfd for the forwarded signals"))?;

    if std::fs::metadata("/proc/self/stat").is_err() {
        return Err(InitError::NoProc);
    }
    // The creator thread of every launch (the kernel's "parent" of PROGRAM for its
    // parent-death signal); it inherits the mask blocked above and sleeps in a channel receive.
    let spawner = Spawner::start().map_err(InitError::io("cannot start the spawner thread"))?;

    let terminal = Terminal::foreground_on(libc::STDIN_FILENO);
    if let Some(t) = terminal {
        say!(
            1,
            "standard input is the controlling terminal (foster's group {} in the foreground): \
             PROGRAM's process group gets it",
            t.foster_group
        );
    }
    // Job control through foster: not as PID 1, which no signal stops and whose parent (a
    // container runtime) runs no job control.
    let job_control = terminal.filter(|_| role != Role::Pid1);
    let plan = LaunchPlan {
        program: opts.program.clone(),
        args: opts.args.clone(),
        terminal,
        inherited,
        policy: opts.policy.clone(),
    };
    let mut pidfd = None;
    let launched = match reaper.launch((), || launch_program(&spawner, &plan, &mut pidfd)) {
        Ok(l) => l,
        Err(e) => {
            say_error!("{e}");
            return Ok(e.status);
        }
    };
    let program_pid = launched;
    // PROGRAM held by the pidfd clone returned with it (read while it is an unreaped child, so
    // the pid names it): every signal foster sends it goes through that pidfd.
    let identity = Identity::of(program_pid).unwrap_or(Identity {
        pid: program_pid,
        start_time: 0,
    });
    let program = Program {
        process: match pidfd {
            Some(fd) => ProcessRef::pinned(identity, fd),
            None => ProcessRef::unpinned(identity),
        },
        group: opts.group,
    };
    say!(
        1,
        "PROGRAM {} started as pid {program_pid} in its own process group",
        crate::base::sanitize::escape(std::os::unix::ffi::OsStrExt::as_bytes(
            opts.program.as_os_str()
        )),
    );

    let advised = resident::drop_startup_pages();
    say!(
        2,
        "startup pages dropped from the page tables: {} KiB of read-only file mappings",
        advised / 1024
    );

    let mut program_status: Option<ExitStatus> = None;
    let mut phase = Phase::Running;
    // -p: once the parent has died, when PROGRAM gets SIGKILL if it has not ended.
    let mut kill_program_at: Option<Instant> = None;
    let mut reaped = Vec::with_capacity(64);
    // SAFETY: an all-zero signalfd_siginfo is a valid value.
    let mut infos: [libc::signalfd_siginfo; 16] = unsafe { std::mem::zeroed() };
    let mut fds = [
        PollFd::input(reaper.raw_fd()),
        PollFd::input(sfd.as_raw_fd()),
    ];
    loop {
        let deadline = match phase {
            Phase::Draining(deadline) => Some(deadline),
            Phase::Running => kill_program_at,
            Phase::Killing => None,
        };
        poll_until(&mut fds, deadline).map_err(InitError::io("poll"))?;
        if phase == Phase::Running
            && let Some(at) = kill_program_at
            && Instant::now() >= at
        {
            kill_program_at = None;
            let grace = own_pdeath.as_ref().map_or(Duration::ZERO, |p| p.grace);
            let r = program.send(libc::SIGKILL);
            say!(
                1,
                "-p: PROGRAM outlived the grace of {} after the parent's death: SIGKILL to {}{}",
                crate::base::duration::Text(grace),
                program,
                match r {
                    Ok(()) => String::new(),
                    Err(e) => format!(" failed: {e}"),
                }
            );
        }
        if let Phase::Draining(deadline) = phase
            && Instant::now() >= deadline
        {
            say!(
                1,
                "grace of {:?} over: SIGKILL to what is left of the tree",
                opts.grace
            );
            signal_rest(&role, libc::SIGKILL);
            phase = Phase::Killing;
        }
        if fds[1].has_input() {
            let got = sfd.read(&mut infos);
            for info in &infos[..got] {
                let sig = info.ssi_signo as i32;
                if signals::FAULTS.contains(&sig) && !signals::sent_by_a_process(info) {
                    say_error!(
                        "{} raised by the kernel (si_code {}), not sent by a process: foster \
                         ends with it",
                        crate::process::signal::name(sig),
                        info.ssi_code
                    );
                    signals::die_of(sig);
                }
                if phase != Phase::Running {
                    if phase != Phase::Killing
                        && matches!(sig, libc::SIGTERM | libc::SIGINT | libc::SIGQUIT)
                    {
                        say!(
                            1,
                            "{} while the tree drains: SIGKILL to what is left now",
                            crate::process::signal::name(sig)
                        );
                        signal_rest(&role, libc::SIGKILL);
                        phase = Phase::Killing;
                    } else {
                        say!(
                            2,
                            "{} received after PROGRAM ended: ignored",
                            crate::process::signal::name(sig)
                        );
                    }
                    continue;
                }
                if let Some(p) = &own_pdeath
                    && sig == p.signal
                    && kill_program_at.is_none()
                    && p.reports_death(info)
                {
                    kill_program_at = Some(Instant::now() + p.grace);
                    say!(
                        1,
                        "-p: {} reports the parent's death; PROGRAM gets it and has {} to end \
                         before SIGKILL",
                        crate::process::signal::name(sig),
                        crate::base::duration::Text(p.grace)
                    );
                }
                let to = opts.rewrites.map(sig);
                if to == 0 {
                    say!(
                        2,
                        "{} from pid {} dropped (--rewrite)",
                        crate::process::signal::name(sig),
                        info.ssi_pid
                    );
                    continue;
                }
                let r = program.send(to);
                if level() >= 2 {
                    let err = match r {
                        Ok(()) => String::new(),
                        Err(e) => format!(" failed: {e}"),
                    };
                    say!(
                        2,
                        "{} from pid {} forwarded as {} to {program}{err}",
                        crate::process::signal::name(sig),
                        info.ssi_pid,
                        crate::process::signal::name(to),
                    );
                }
            }
        }
        if fds[0].has_input() {
            reaped.clear();
            reaper.reap_into(&mut reaped);
            for r in &reaped {
                match r {
                    Routed::Owned { reaped, .. } => {
                        program_status = Some(reaped.status);
                        say!(1, "PROGRAM (pid {}) ended: {}", reaped.pid, reaped.status);
                    }
                    Routed::Orphan(o) => say!(2, "reaped pid {}: {}", o.pid, o.status),
                }
            }
            if let Some(t) = job_control
                && program_status.is_none()
                && let Some(sig) = tty::stopped_by_terminal_signal(program_pid)
            {
                say!(
                    1,
                    "PROGRAM stopped by {}: foster stops too, so that the shell sees its job \
                     stopped",
                    crate::process::signal::name(sig)
                );
                let foreground = t.suspend_then_resume(program_pid);
                say!(
                    1,
                    "continued: SIGCONT to PROGRAM's process group{}",
                    if foreground {
                        ", the terminal's foreground handed back to it"
                    } else {
                        " (in the background: the terminal stays where it is)"
                    }
                );
            }
            if phase == Phase::Running
                && let Some(status) = program_status
            {
                if let Some(t) = terminal {
                    t.take_back();
                }
                if !opts.wait_all {
                    break;
                }
                if !reaper.children_left() {
                    say!(1, "--wait-all: nothing else left");
                    break;
                }
                say!(
                    1,
                    "--wait-all: PROGRAM ended ({status}); SIGTERM to the rest of the tree, \
                     SIGKILL after {:?}",
                    opts.grace
                );
                signal_rest(&role, libc::SIGTERM);
                signal_rest(&role, libc::SIGCONT);
                phase = Phase::Draining(Instant::now() + opts.grace);
            } else if phase != Phase::Running {
                if !reaper.children_left() {
                    say!(1, "--wait-all: the whole tree has ended");
                    break;
                }
                if phase == Phase::Killing {
                    // Descendants reparented to foster since the last round.
                    signal_rest(&role, libc::SIGKILL);
                }
            }
        }
    }
    let status = program_status.expect("the loop ends only after PROGRAM ended");
    let code = opts.exit_code(status);
    if code != status.shell_code() {
        say!(1, "exit status {} mapped to 0 (-e)", status.shell_code());
    }
    Ok(code)
}

/// Creates PROGRAM: the one place foster init launches. A failed exec or a gate stop still
/// yields the pid (the child ended with its status and is the reaper's), after saying why;
/// the pidfd `clone` returned with a PROGRAM that runs goes to `pidfd`.
fn launch_program(
    spawner: &Spawner,
    plan: &LaunchPlan,
    pidfd: &mut Option<OwnedFd>,
) -> Result<i32, launch::LaunchError> {
    let Launched {
        pid,
        pidfd: fd,
        failed,
    } = launch::launch(spawner, plan)?;
    if let Some(why) = failed {
        say_error!("{why}");
    }
    *pidfd = fd;
    Ok(pid)
}

/// Where foster's signals to PROGRAM go: PROGRAM itself, or with `-g` the process group it
/// leads, through the pidfd held for it ([`ProcessRef::signal`],
/// [`ProcessRef::signal_group`]): neither can reach a process that reused its pid.
struct Program {
    process: ProcessRef,
    group: bool,
}

impl Program {
    fn send(&self, sig: i32) -> io::Result<()> {
        if self.group {
            self.process.signal_group(sig)
        } else {
            self.process.signal(sig)
        }
    }
}

impl std::fmt::Display for Program {
    /// `pid N`, or `process group N`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = if self.group { "process group" } else { "pid" };
        write!(f, "{what} {}", self.process.identity().pid)
    }
}

/// foster's own parent-death signal, armed by `-p`, and what its arrival means.
#[derive(Debug)]
struct OwnPdeath {
    signal: i32,
    grace: Duration,
    /// The parent's pid, when foster can see it; `None` as PID 1 of a namespace whose parent
    /// lives outside it.
    parent: Option<i32>,
}

impl OwnPdeath {
    /// Whether this arrival of the armed signal reports the parent's death. When foster can
    /// see its parent: the kernel reparents foster before it sends the signal, so `getppid()`
    /// no longer names that parent (a plain `kill` of the same signal leaves it). As a
    /// namespace's PID 1: the signal came from outside the namespace (`ssi_pid` 0), as the
    /// dying parent's does, and as the container runtime's own signals do; foster cannot tell
    /// those apart.
    fn reports_death(&self, info: &libc::signalfd_siginfo) -> bool {
        match self.parent {
            Some(pid) => nix::unistd::getppid().as_raw() != pid,
            None => info.ssi_pid == 0,
        }
    }
}

/// Reads `-p`'s value: one policy generation, `SIGNAL[:exit[:GRACE]]` (the grace defaults to
/// the policy's 5 s), or `KILL` (reaction `kill`).
pub fn parse_pdeath(text: &str) -> Result<Policy, PdeathError> {
    let policy = text.parse::<Policy>()?;
    if policy.next.is_some() {
        return Err(PdeathError::Chain(text.to_string()));
    }
    if policy.reaction == Reaction::Notify {
        return Err(PdeathError::Notify(text.to_string()));
    }
    Ok(policy)
}

/// Arms foster's own parent-death signal through the gate, in-process: foster blocks the
/// signal and consumes it on its forwarding signalfd (so it reaches PROGRAM like any other
/// forwarded signal), the gate arms it, reads it back and checks that the parent is still the
/// expected one: `FOSTER_PARENT` when set, otherwise the parent foster started with. A parent
/// already gone stops foster before PROGRAM starts (status 120). When the parent lives in
/// another PID namespace (`getppid()` is 0: foster is a container's PID 1), the signal is armed
/// but cannot be re-checked, and foster says so.
fn arm_own_pdeath(
    policy: &Policy,
    first_parent: Option<Identity>,
) -> Result<OwnPdeath, PdeathError> {
    let sig = policy.signal;
    let sname = crate::process::signal::name(sig);
    if sig != libc::SIGKILL && !signals::forwarded().contains(sig) {
        return Err(PdeathError::NotForwarded(sname));
    }
    let expected = match std::env::var(crate::gate::policy::ENV_PARENT) {
        Ok(text) => Some(text.parse::<Identity>()?),
        Err(_) => first_parent,
    };
    let in_other_namespace = nix::unistd::getppid().as_raw() == 0;
    let expected = if in_other_namespace { None } else { expected };
    let armed = |parent: Option<i32>| OwnPdeath {
        signal: sig,
        grace: policy.grace,
        parent,
    };
    let Some(expected) = expected else {
        // SAFETY: prctl with integer arguments.
        if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, sig as libc::c_ulong, 0, 0, 0) } != 0 {
            return Err(PdeathError::Arm {
                signal: sname,
                source: io::Error::last_os_error(),
            });
        }
        say!(
            1,
            "-p {sname}: armed; the parent lives in another PID namespace (getppid() is 0), so \
             it cannot be re-checked"
        );
        return Ok(armed(None));
    };
    match GatePlan::new(expected, policy, SignalSetup::Consumed).run() {
        Ok(_) => {
            say!(1, "-p {sname}: armed, read back, parent {expected} checked");
            Ok(armed(Some(expected.pid)))
        }
        Err(stop @ GateStop::ParentGone { .. }) => {
            say_error!("-p {sname}: {stop}; expected {expected}: not starting PROGRAM");
            std::process::exit(stop.exit_status());
        }
        Err(stop) => Err(PdeathError::Gate {
            signal: sname,
            stop,
        }),
    }
}

/// Sends `sig` to the rest of the tree: as PID 1 every other process of the namespace
/// (`kill(-1)`), otherwise every descendant of foster ([`crate::process::tree::descendants_of`]: one
/// scan of `/proc` on this thread, no other thread started), each by a pidfd opened and checked
/// against the identity the scan saw.
fn signal_rest(role: &Role, sig: i32) {
    if *role == Role::Pid1 {
        // SAFETY: kill with plain integers.
        let r = unsafe { libc::kill(-1, sig) };
        say!(
            2,
            "{} to every process of the namespace: {}",
            crate::process::signal::name(sig),
            if r == 0 { "sent" } else { "none left" }
        );
        return;
    }
    let me = std::process::id() as i32;
    let below = match crate::process::tree::descendants_of(me) {
        Ok(below) => below,
        Err(e) => {
            say_error!("cannot list the rest of the tree: {e}");
            return;
        }
    };
    for id in below.iter().map(|n| n.identity) {
        let sent = crate::process::identity::signal(id, sig).is_ok();
        say!(
            2,
            "{} to descendant {id}: {}",
            crate::process::signal::name(sig),
            if sent { "sent" } else { "gone" }
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pdeath_takes_one_generation_with_its_grace() {
        let p = parse_pdeath("TERM").unwrap();
        assert_eq!(
            (p.signal, p.reaction, p.grace),
            (
                libc::SIGTERM,
                Reaction::Exit,
                crate::gate::policy::DEFAULT_GRACE
            )
        );
        let p = parse_pdeath("HUP:exit:300ms").unwrap();
        assert_eq!(p.grace, Duration::from_millis(300));
        assert_eq!(parse_pdeath("KILL").unwrap().reaction, Reaction::Kill);
        assert!(
            parse_pdeath("TERM;KILL")
                .unwrap_err()
                .to_string()
                .contains("one generation")
        );
        let e = parse_pdeath("USR1:notify").unwrap_err();
        assert!(e.to_string().contains("notify"));
        assert!(matches!(parse_pdeath("STOP"), Err(PdeathError::Policy(_))));
        assert!(parse_pdeath("STOP").is_err());
        assert!(parse_pdeath("TERM:kill").is_err());
    }
}
