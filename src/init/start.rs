//! The start of `foster init`, in the order it must happen: SIGCHLD and the forwarded signals
//! blocked before any thread exists, the role ([`super::role`]), `-p` armed, the reaper and
//! the signalfd, `/proc` checked, the spawner thread, then PROGRAM launched with the signal
//! state foster inherited and, on a terminal, its foreground ([`super::tty`]); last, before the
//! loop's first wait, the start's pages are dropped ([`super::resident`]).

use super::launch::LaunchPlan;
use super::program::Program;
use super::role::{self, Role, SubreaperWish};
use super::signals::{self, Inherited, SignalFd};
use super::teardown::Phase;
use super::tty::Terminal;
use super::{Init, InitError, Options, pdeath, resident};
use crate::gate::spawner::Spawner;
use crate::process::identity::Identity;
use crate::process::reaper::Reaper;

impl<'a> Init<'a> {
    /// Everything before the loop; PROGRAM runs when it returns. Must be called before any
    /// thread exists.
    pub(super) fn start(opts: &'a Options) -> Result<Init<'a>, InitError> {
        let inherited = Inherited::get();
        // The parent foster started with, read as early as possible (-p without FOSTER_PARENT).
        let first_parent = Identity::parent().ok().flatten();
        let forwarded = signals::forwarded();
        // First: SIGCHLD and every forwarded signal blocked, before any thread exists.
        crate::process::reaper::block_signals(&[])
            .map_err(InitError::io("cannot block SIGCHLD"))?;
        signals::block(forwarded).map_err(InitError::io("cannot block the forwarded signals"))?;
        let role = settle_role(opts.subreaper);
        let own_pdeath = match &opts.pdeath {
            Some(policy) => Some(pdeath::arm(policy, first_parent)?),
            None => None,
        };
        let mut reaper = Reaper::new().map_err(InitError::io("cannot start the reaper"))?;
        let signals = SignalFd::new(forwarded)
            .map_err(InitError::io("signalfd for the forwarded signals"))?;
        if std::fs::metadata("/proc/self/stat").is_err() {
            return Err(InitError::NoProc);
        }
        // The creator thread of every launch (the kernel's "parent" of PROGRAM for its
        // parent-death signal); it inherits the mask blocked above and sleeps in a channel
        // receive. It lives as long as the init.
        let spawner = Spawner::start().map_err(InitError::io("cannot start the spawner thread"))?;
        let terminal = foreground_terminal();
        let plan = LaunchPlan {
            program: opts.program.clone(),
            args: opts.args.clone(),
            terminal,
            inherited,
            policy: opts.policy.clone(),
        };
        let program = Program::launch(&mut reaper, &spawner, &plan, opts.group)?;
        Ok(Init {
            opts,
            // Job control through foster: not as PID 1, which no signal stops and whose
            // parent (a container runtime) runs no job control.
            job_control: terminal.filter(|_| role != Role::Pid1),
            role,
            reaper,
            signals,
            _spawner: spawner,
            program,
            status: None,
            terminal,
            own_pdeath,
            kill_program_at: None,
            phase: Phase::Running,
            reaped: Vec::with_capacity(64),
        })
    }
}

/// Makes foster PID 1's stand-in when it is not PID 1 (a child subreaper, unless turned off),
/// and says what it became.
fn settle_role(wish: SubreaperWish) -> Role {
    let me = std::process::id() as i32;
    let role = role::decide(me == 1, wish, role::become_subreaper);
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
    role
}

/// Standard input, when it is foster's controlling terminal with foster's group in the
/// foreground: PROGRAM's group gets it.
fn foreground_terminal() -> Option<Terminal> {
    let terminal = Terminal::foreground_on(libc::STDIN_FILENO);
    if let Some(t) = terminal {
        say!(
            1,
            "standard input is the controlling terminal (foster's group {} in the foreground): \
             PROGRAM's process group gets it",
            t.foster_group
        );
    }
    terminal
}

/// Once PROGRAM runs: the startup's pages out of the page tables ([`resident`]). The loop calls
/// it last before its first wait, so that only the pages of the wait come back.
pub(super) fn drop_startup_pages() {
    let advised = resident::drop_startup_pages();
    say!(
        2,
        "startup pages dropped from the page tables: {} KiB of read-only file mappings",
        advised / 1024
    );
}
