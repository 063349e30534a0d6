//! The signals of `foster run`: what each signal that would end foster does instead.
//!
//! Owns the table ([`action`]), the set foster blocks in every thread and reads from one
//! signalfd ([`handled`], [`block`]), and the parent-death check ([`parent_died`]).
//! `docs/run.md` ("Signals") is the same table for people.
//!
//! Every signal whose default action ends a process is blocked before any thread exists and
//! read from the supervisor's signalfd; what each one does is its [`Action`].

use std::io;
use std::sync::atomic::{AtomicI32, Ordering};

use crate::process::signal::{Inherited, SigBits};

/// What `foster run` does with a signal it handles.
///
/// - [`Action::Shutdown`]: TERM, INT, HUP, QUIT, ABRT (requests to end: the one orderly
///   shutdown, no core dump) and XCPU (the CPU-time soft limit: the kernel's SIGKILL follows at
///   the hard limit, so end in order now);
/// - [`Action::ReopenLogs`]: USR1 (the events log);
/// - [`Action::Ignore`]: every other one (USR2, ALRM, VTALRM, PROF, IO, PWR, STKFLT, XFSZ, the
///   real-time signals, and the fault signals SEGV, BUS, FPE, ILL, TRAP, SYS when *sent* by
///   a process): logged the first time, with its sender.
///
/// A real fault stays fatal: the kernel forces the default action of a synchronous SEGV, BUS,
/// FPE, ILL, TRAP or SYS whatever the mask, so blocking them catches only the ones `kill` sends.
///
/// Left out: SIGKILL and SIGSTOP (cannot be blocked), SIGCHLD (the reaper's), SIGPIPE (Rust's
/// runtime ignores it before `main`: a write to a closed pipe or socket fails with EPIPE), and
/// signals 32 and 33, which the C library keeps for its threads (cancellation, the set-id
/// broadcast): blocking them would hang a set-id call of a threaded process. A signal foster was
/// started with ignored (`nohup`, a shell's background job) is not blocked: it stays ignored,
/// as the caller asked.
///
/// Nothing of this reaches the helpers: the spawner execs them with the mask and dispositions
/// foster was started with ([`crate::gate::spawner::ExecSignals::inherited`]), not foster's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Start the one orderly shutdown.
    Shutdown,
    /// Reopen the log files (the events log).
    ReopenLogs,
    /// Nothing but a log line the first time.
    Ignore,
}

const SHUTDOWN: [i32; 6] = [
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGABRT,
    libc::SIGXCPU,
];

const IGNORED: [i32; 14] = [
    libc::SIGUSR2,
    libc::SIGALRM,
    libc::SIGVTALRM,
    libc::SIGPROF,
    libc::SIGIO,
    libc::SIGPWR,
    libc::SIGSTKFLT,
    libc::SIGXFSZ,
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGFPE,
    libc::SIGILL,
    libc::SIGTRAP,
    libc::SIGSYS,
];

/// What foster does with `sig` (a signal outside [`handled`] is never read).
pub fn action(sig: i32) -> Action {
    if SHUTDOWN.contains(&sig) {
        Action::Shutdown
    } else if sig == libc::SIGUSR1 {
        Action::ReopenLogs
    } else {
        Action::Ignore
    }
}

/// Every signal of the table, whatever foster was started with.
pub fn table() -> SigBits {
    let mut bits = SigBits::EMPTY.with(libc::SIGUSR1);
    for sig in SHUTDOWN.into_iter().chain(IGNORED) {
        bits = bits.with(sig);
    }
    for sig in libc::SIGRTMIN()..=libc::SIGRTMAX() {
        bits = bits.with(sig);
    }
    bits
}

/// The signals foster blocks and reads from its signalfd: the table less those it was started
/// with ignored.
pub fn handled() -> SigBits {
    SigBits(table().0 & !Inherited::get().ignored.0)
}

static PDEATH_SIGNAL: AtomicI32 = AtomicI32::new(0);
static PPID_AT_START: AtomicI32 = AtomicI32::new(0);

/// Records foster's own parent-death signal and parent, then blocks SIGCHLD and [`handled`] in
/// the calling thread (and so in every thread created later). Call it first thing, before any
/// other thread exists: a parent that dies before the block ends foster by the signal's
/// default action (nothing is started yet), one that dies after is seen by [`parent_died`].
pub fn block() -> io::Result<()> {
    let mut sig: libc::c_int = 0;
    // SAFETY: the kernel writes one int.
    if unsafe {
        libc::prctl(
            libc::PR_GET_PDEATHSIG,
            &mut sig as *mut libc::c_int,
            0,
            0,
            0,
        )
    } == 0
    {
        PDEATH_SIGNAL.store(sig, Ordering::Relaxed);
        // SAFETY: plain getppid.
        PPID_AT_START.store(unsafe { libc::getppid() }, Ordering::Relaxed);
    }
    crate::process::signal::block(handled().with(libc::SIGCHLD))
}

/// Whether `sig` is foster's parent-death signal (armed by the gate of the foster that launched
/// this one) and foster's parent has changed since [`block`]: then it means "your parent died",
/// whatever the table says (a nested foster whose generation signal is USR2 must still end).
pub fn parent_died(sig: i32) -> bool {
    let armed = PDEATH_SIGNAL.load(Ordering::Relaxed);
    // SAFETY: plain getppid.
    armed != 0
        && sig == armed
        && unsafe { libc::getppid() } != PPID_AT_START.load(Ordering::Relaxed)
}

/// The ignored signals already logged once.
#[derive(Debug, Default)]
pub struct Logged(SigBits);

impl Logged {
    /// True the first time `sig` is seen.
    pub fn first(&mut self, sig: i32) -> bool {
        let first = !self.0.contains(sig);
        self.0 = self.0.with(sig);
        first
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_signal_whose_default_ends_a_process_is_in_the_table() {
        // Default action "terminate" or "core" (signal(7)), less what cannot or must not be
        // blocked (see the module docs).
        let ends = [
            libc::SIGHUP,
            libc::SIGINT,
            libc::SIGQUIT,
            libc::SIGILL,
            libc::SIGTRAP,
            libc::SIGABRT,
            libc::SIGBUS,
            libc::SIGFPE,
            libc::SIGUSR1,
            libc::SIGSEGV,
            libc::SIGUSR2,
            libc::SIGALRM,
            libc::SIGTERM,
            libc::SIGSTKFLT,
            libc::SIGXCPU,
            libc::SIGXFSZ,
            libc::SIGVTALRM,
            libc::SIGPROF,
            libc::SIGIO,
            libc::SIGPWR,
            libc::SIGSYS,
        ];
        let t = table();
        for sig in ends.into_iter().chain(libc::SIGRTMIN()..=libc::SIGRTMAX()) {
            assert!(t.contains(sig), "signal {sig} is not in the table");
        }
        for sig in [
            libc::SIGKILL,
            libc::SIGSTOP,
            libc::SIGCHLD,
            libc::SIGPIPE,
            32,
            33,
            libc::SIGCONT,
            libc::SIGTSTP,
            libc::SIGTTIN,
            libc::SIGTTOU,
            libc::SIGWINCH,
            libc::SIGURG,
        ] {
            assert!(!t.contains(sig), "signal {sig} must not be blocked");
        }
    }

    #[test]
    fn actions() {
        assert_eq!(action(libc::SIGTERM), Action::Shutdown);
        assert_eq!(action(libc::SIGQUIT), Action::Shutdown);
        assert_eq!(action(libc::SIGUSR1), Action::ReopenLogs);
        assert_eq!(action(libc::SIGUSR2), Action::Ignore);
        assert_eq!(action(libc::SIGRTMIN() + 1), Action::Ignore);
        let mut l = Logged::default();
        assert!(l.first(libc::SIGUSR2));
        assert!(!l.first(libc::SIGUSR2));
        assert!(l.first(libc::SIGALRM));
    }
}
