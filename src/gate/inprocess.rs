//! The in-process form of the gate: [`enter`], called first thing in a Rust helper's `main`.
//!
//! Owns the setup (the policy's signal blocked and read from a signalfd, [`GatePlan::run`] in
//! the calling process, the lifeline opened) and the watcher thread that polls both channels
//! and, on a real loss, closes admission and runs the policy's reaction.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Instant;

use super::expect::{ENV_PARENT_PIDFD, EnvError, Expectation, parent_pidfd_from_env};
use super::plan::{GatePlan, SignalSetup};
use super::{DeathPath, EXIT_GATE_ERROR, EXIT_LIFELINE, GateStop};
use crate::base::sys::{PollFd, poll};
use crate::gate::admission::{Admission, ShutdownOwner, ShutdownReason};
use crate::gate::lifeline::Lifeline;
use crate::gate::policy::{Policy, Reaction};
use crate::process::identity::{Identity, StatPath};
use crate::process::signal::{SigBits, SignalFd, block};

/// A parent loss, as the in-process gate reports it to the program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Loss {
    /// Which path saw it.
    pub path: DeathPath,
    /// When, on the monotonic clock.
    pub at: Instant,
}

/// A process that passed the in-process gate ([`enter`]).
pub struct Gated {
    /// What it was checked against.
    pub expectation: Expectation,
    /// The admission gate: take a guard before each operation that must not start after the
    /// supervisor lost authority.
    pub admission: Admission,
    /// For the `notify` reaction: the losses, to be read by the program's event loop. (For
    /// `exit`, the gate's own watcher owns shutdown and exits; for `kill`, the kernel does.)
    pub losses: mpsc::Receiver<Loss>,
    /// For the `notify` reaction, the shutdown owner handed to the program.
    pub shutdown_owner: Option<ShutdownOwner>,
    /// How many delivered signals were false alarms (the parent process still the expected
    /// one: a thread of it exited).
    pub false_alarms: Arc<AtomicU64>,
}

/// Why the in-process gate could not let the process go on.
#[derive(Debug, thiserror::Error)]
pub enum EnterError {
    /// The environment did not say what to expect.
    #[error(transparent)]
    Env(EnvError),
    /// The gate stopped (parent gone, prctl failed...).
    #[error(transparent)]
    Stop(GateStop),
    /// Setting up the consumer (signalfd, thread) or the lifeline failed.
    #[error("{0}")]
    Setup(String),
}

impl EnterError {
    /// The documented exit status for this failure.
    pub fn exit_status(&self) -> i32 {
        match self {
            EnterError::Env(_) | EnterError::Setup(_) => EXIT_GATE_ERROR,
            EnterError::Stop(s) => s.exit_status(),
        }
    }
}

/// Form (b): the in-process gate a Rust helper calls first thing in `main`, before it starts
/// any thread (the signal must be blocked in every thread, and threads inherit the mask of the
/// thread that creates them).
///
/// It reads the expectation from the environment, blocks the policy's signal and opens a
/// signalfd for it (the one synchronous consumer), runs [`GatePlan::run`], opens the lifeline
/// (a pidfd of the expected parent, identity re-checked; or the one the launcher handed down in
/// `FOSTER_PARENT_PIDFD`, which it takes and removes from the environment, for a parent in
/// another PID namespace: [`parent_pidfd_from_env`](super::parent_pidfd_from_env)) and starts
/// one watcher thread that polls both. A delivered signal is checked against the expected
/// identity first: if the parent process is still the expected one (a thread of it exited), it
/// is counted as a false alarm and ignored; a parent this process cannot see (`getppid()` is 0)
/// cannot be checked, so there the signal is the loss. On a real loss the watcher requests shutdown
/// (closing admission); with
/// `exit` it then owns shutdown, waits for in-flight guards up to the grace and exits the
/// process (status 128+signal for the signal path, [`EXIT_LIFELINE`] for the lifeline); with
/// `notify` it sends a [`Loss`] to the program, which owns shutdown.
pub fn enter(default_policy: Option<&Policy>) -> Result<Gated, EnterError> {
    let expectation = Expectation::from_env(default_policy).map_err(EnterError::Env)?;
    let pidfd = parent_pidfd_from_env(expectation.parent).map_err(EnterError::Env)?;
    if pidfd.is_some() {
        // SAFETY: called first thing in main, before any thread (see above).
        unsafe { std::env::remove_var(ENV_PARENT_PIDFD) };
    }
    enter_with_pidfd(expectation, pidfd)
}

/// [`enter`] with an explicit expectation instead of the environment.
pub fn enter_with(expectation: Expectation) -> Result<Gated, EnterError> {
    enter_with_pidfd(expectation, None)
}

/// [`enter_with`], with a pidfd of the expected parent to use as the lifeline (the gate's only
/// way to check a parent in another PID namespace) instead of one opened by pid.
// Long: the in-process gate's steps in their order.
pub fn enter_with_pidfd(
    expectation: Expectation,
    parent_pidfd: Option<OwnedFd>,
) -> Result<Gated, EnterError> {
    let policy = expectation.policy.clone();
    let sig = policy.signal;
    let consumed = policy.reaction != Reaction::Kill;
    let mut sfd: Option<SignalFd> = None;
    if consumed {
        let set = SigBits::EMPTY.with(sig);
        block(set).map_err(|_| EnterError::Setup("cannot block the policy signal".into()))?;
        sfd = Some(SignalFd::new(set).map_err(|e| EnterError::Setup(format!("signalfd: {e}")))?);
    }
    // The caller's mask stays as it is, whatever the reaction (SIGKILL needs no signal path).
    let mut plan = GatePlan::new(expectation.parent, &policy, SignalSetup::Consumed);
    if let Some(fd) = &parent_pidfd {
        plan = plan.with_lifeline_fd(fd.as_raw_fd());
    }
    plan.run().map_err(EnterError::Stop)?;
    let lifeline = match parent_pidfd {
        Some(fd) => Lifeline::adopt(expectation.parent, fd),
        None => Lifeline::open(expectation.parent).map_err(|e| match e {
            crate::gate::lifeline::LifelineError::Gone(_) => {
                EnterError::Stop(GateStop::ParentGone {
                    ppid: nix::unistd::getppid().as_raw(),
                    path: DeathPath::Lifeline,
                })
            }
            e => EnterError::Setup(e.to_string()),
        })?,
    };
    let lifeline = Arc::new(lifeline);
    let (admission, owner) = Admission::new(Some(lifeline.clone()));
    let (tx, rx) = mpsc::channel();
    let false_alarms = Arc::new(AtomicU64::new(0));
    let (watch_owner, program_owner) = match policy.reaction {
        Reaction::Notify => (None, Some(owner)),
        _ => (Some(owner), None),
    };
    let watcher = Watcher {
        expected: expectation.parent,
        parent_stat: StatPath::new(expectation.parent.pid),
        policy: policy.clone(),
        sfd,
        lifeline,
        admission: admission.clone(),
        owner: watch_owner,
        tx,
        false_alarms: false_alarms.clone(),
    };
    std::thread::Builder::new()
        .name("foster-gate-watch".into())
        .spawn(move || watcher.run())
        .map_err(|e| EnterError::Setup(format!("cannot start the watcher thread: {e}")))?;
    Ok(Gated {
        expectation,
        admission,
        losses: rx,
        shutdown_owner: program_owner,
        false_alarms,
    })
}

struct Watcher {
    expected: Identity,
    parent_stat: StatPath,
    policy: Policy,
    sfd: Option<SignalFd>,
    lifeline: Arc<Lifeline>,
    admission: Admission,
    owner: Option<ShutdownOwner>,
    tx: mpsc::Sender<Loss>,
    false_alarms: Arc<AtomicU64>,
}

impl Watcher {
    fn parent_still_expected(&self) -> bool {
        nix::unistd::getppid().as_raw() == self.expected.pid
            && self.parent_stat.matches(&self.expected)
    }

    fn run(mut self) {
        let path = loop {
            let mut fds = [
                PollFd::input(self.lifeline.as_raw_fd()),
                PollFd::input(self.sfd.as_ref().map_or(-1, |f| f.as_raw_fd())),
            ];
            if poll(&mut fds, None).is_err() {
                continue;
            }
            let signal = match &self.sfd {
                Some(sfd) if fds[1].has_input() => sfd.read_signal(),
                _ => None,
            };
            if let Some(info) = signal {
                if self.parent_still_expected() && !self.lifeline.is_lost() {
                    self.false_alarms.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(
                        "parent-death signal from pid {} but the parent {} still lives: a thread \
                         of it exited; ignored",
                        info.ssi_pid,
                        self.expected
                    );
                    continue;
                }
                break DeathPath::Signal;
            }
            if fds[0].ready() {
                break DeathPath::Lifeline;
            }
        };
        let reason = match path {
            DeathPath::Signal => ShutdownReason::ParentDeathSignal,
            _ => ShutdownReason::LifelineLost,
        };
        self.admission.request_shutdown(reason);
        let _ = self.tx.send(Loss {
            path,
            at: Instant::now(),
        });
        if let Some(owner) = self.owner.take() {
            let _report = owner.drain(self.policy.grace);
            let status = match path {
                DeathPath::Signal => 128 + self.policy.signal,
                _ => EXIT_LIFELINE,
            };
            // Bounded cleanup done (or the grace ran out): end the process.
            std::process::exit(status);
        }
    }
}
