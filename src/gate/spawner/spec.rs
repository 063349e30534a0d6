//! What a launch asks for ([`LaunchSpec`], [`ExecSignals`]) and what it gives back
//! ([`Launched`], [`SpawnError`]). Uses the gate's types and [`super::credentials`].

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{OwnedFd, RawFd};
use std::path::PathBuf;

use crate::gate::policy::Policy;
use crate::gate::{EXIT_GATE_ERROR, GateStop, TargetError, Trace};
use crate::process::identity::Identity;
use crate::process::signal::{Inherited, SigBits};

use super::credentials::CredentialError;

/// What to launch and under which policy.
#[derive(Debug)]
pub struct LaunchSpec {
    /// The program: a path, or a name searched in `PATH` (resolved before fork).
    pub program: PathBuf,
    /// Arguments after `argv[0]`.
    pub args: Vec<OsString>,
    /// `argv[0]`; the program as given when `None`.
    pub arg0: Option<OsString>,
    /// Environment changes over the spawner's process environment (`None` removes).
    pub env: Vec<(OsString, Option<OsString>)>,
    /// The helper's policy chain: its signal is armed, the rest travels in `FOSTER_POLICY`.
    pub policy: Policy,
    /// Switch to this gid before arming; the group list as
    /// [`Credentials::resolve`](super::Credentials::resolve) says.
    pub gid: Option<u32>,
    /// Switch to this uid before arming, with the user's groups from the user database
    /// ([`Credentials::resolve`](super::Credentials::resolve)).
    pub uid: Option<u32>,
    /// Working directory.
    pub cwd: Option<PathBuf>,
    /// Standard input, output, error (inherited when `None`). Any descriptor will do, 0 to 2
    /// included (stdin from this process's 1 and stdout from its 0 swap them).
    pub stdin: Option<OwnedFd>,
    pub stdout: Option<OwnedFd>,
    pub stderr: Option<OwnedFd>,
    /// Let a set-user-ID, set-group-ID or file-capability target through (with a warning).
    pub allow_setid: bool,
    /// Qualification hooks for the gate.
    pub trace: Option<Trace>,
    /// Run the gate: arm `policy`, check the parent, set `FOSTER_*` (the default). `false`:
    /// the child runs unarmed and its environment is left as the spawner's (a container
    /// init's PROGRAM without `--policy`; set-id targets are then not refused).
    pub gated: bool,
    /// Put the child in a process group of its own (`setpgid(0, 0)`) before the gate.
    pub new_process_group: bool,
    /// Then make that group the foreground group of this terminal (`tcsetpgrp`).
    pub foreground_tty: Option<RawFd>,
    /// More descriptors for the child: each `(fd, number)` is placed at `number` (3 or more,
    /// each number once), close-on-exec cleared, after the standard ones (the notification
    /// descriptor of s6's readiness protocol).
    pub extra_fds: Vec<(OwnedFd, RawFd)>,
    /// A variable the child sets to its own pid before its exec (systemd's `WATCHDOG_PID`);
    /// it replaces any of that name.
    pub pid_env: Option<OsString>,
    /// The signal state the child execs with, applied after the gate, just before `execve`;
    /// `None`: [`ExecSignals::inherited`], the state this process was started with (so what
    /// foster itself changed, SIGPIPE that Rust's runtime ignores, its blocked signals, its
    /// handlers, is not passed on, and what its caller set is).
    pub exec_signals: Option<ExecSignals>,
}

/// A signal state to exec with (bit `n - 1` for signal `n`, signals 1..=64, the layout of
/// `SigBlk`/`SigIgn` in `/proc/<pid>/status`): every disposition "ignore" or "default" (no
/// handler of the launcher survives), and the mask. The policy's signal of a gated launch is
/// taken out of both sets, or it would be armed in name only.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExecSignals {
    /// Blocked signals.
    pub mask: u64,
    /// Signals whose disposition is "ignore"; every other one gets the default.
    pub ignored: u64,
}

impl ExecSignals {
    /// The signal state this process was started with, recorded before `main` (before Rust's
    /// runtime ignores SIGPIPE; see [`crate::process::signal::Inherited`]): what a program
    /// launched by foster gets unless its launcher says otherwise (tini's rule: what the user
    /// set is kept, what foster changed is not).
    pub fn inherited() -> ExecSignals {
        let i = Inherited::get();
        ExecSignals {
            mask: i.mask.0,
            ignored: i.ignored.0,
        }
    }

    /// The state with `sig` neither blocked nor ignored (a policy's signal).
    pub fn without(self, sig: i32) -> ExecSignals {
        if !(1..=64).contains(&sig) {
            return self;
        }
        let bit = 1u64 << (sig - 1);
        ExecSignals {
            mask: self.mask & !bit,
            ignored: self.ignored & !bit,
        }
    }

    /// Sets every disposition to "ignore" or "default", then the mask. Async-signal-safe and
    /// allocation-free. Returns false when the mask could not be set.
    ///
    /// # Safety
    /// Only in a process about to exec with a single thread (a fresh child, `foster exec`):
    /// dispositions are process-wide, the mask is the calling thread's.
    pub unsafe fn apply(&self) -> bool {
        let state = Inherited {
            mask: SigBits(self.mask),
            ignored: SigBits(self.ignored),
        };
        // SAFETY: the caller's contract is apply_in_child's.
        unsafe { state.apply_in_child() }
    }
}

impl LaunchSpec {
    /// A spec for `program args...` under `policy`, everything else inherited.
    pub fn new<I, S>(program: impl Into<PathBuf>, args: I, policy: Policy) -> LaunchSpec
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        LaunchSpec {
            program: program.into(),
            args: args.into_iter().map(|a| a.as_ref().to_owned()).collect(),
            arg0: None,
            env: Vec::new(),
            policy,
            gid: None,
            uid: None,
            cwd: None,
            stdin: None,
            stdout: None,
            stderr: None,
            allow_setid: false,
            trace: None,
            gated: true,
            new_process_group: false,
            foreground_tty: None,
            extra_fds: Vec::new(),
            pid_env: None,
            exec_signals: None,
        }
    }
}

/// A launched helper: its pid, a pidfd obtained with it, and what it was gated against.
#[derive(Debug)]
pub struct Launched {
    pub pid: i32,
    pub pidfd: OwnedFd,
    /// The spawner's identity: the helper's expected parent.
    pub expected_parent: Identity,
    /// The helper's own identity as its gate read it for its `FOSTER_PARENT` (a gated launch),
    /// so the launcher need not read `/proc` again; `None` ungated.
    pub identity: Option<Identity>,
}

/// Why a launch failed. When a child was created (`pid` set), it has exited with the gate's
/// documented status and is a zombie for the reaper to reap; the spawner never waits.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// The target was refused before fork (not found, set-id, file capabilities...).
    #[error(transparent)]
    Target(TargetError),
    /// The gate stopped the child.
    #[error("helper {pid} stopped by the gate: {stop}")]
    Gate {
        pid: i32,
        pidfd: OwnedFd,
        #[source]
        stop: GateStop,
    },
    /// `execve` failed with this errno (status 126, or 127 for ENOENT).
    #[error("helper {pid}: exec failed: {}", io::Error::from_raw_os_error(*errno))]
    Exec {
        pid: i32,
        pidfd: OwnedFd,
        errno: i32,
    },
    /// A step before the gate (stdio, credentials, directory) failed with this errno.
    #[error("helper {pid}: {what} failed: {}", io::Error::from_raw_os_error(*errno))]
    Setup {
        pid: i32,
        pidfd: OwnedFd,
        what: &'static str,
        errno: i32,
    },
    /// The requested uid/gid cannot be resolved into credentials (before fork).
    #[error(transparent)]
    Credentials(CredentialError),
    /// Preparing or forking failed in the launcher.
    #[error("{0}: {1}")]
    Io(String, #[source] io::Error),
    /// The spawner thread is gone.
    #[error("the spawner thread is gone")]
    SpawnerGone,
}

impl SpawnError {
    /// The pid of the child that was created and exited, if any.
    pub fn pid(&self) -> Option<i32> {
        match self {
            SpawnError::Gate { pid, .. }
            | SpawnError::Exec { pid, .. }
            | SpawnError::Setup { pid, .. } => Some(*pid),
            _ => None,
        }
    }

    /// The exit status a launch that failed before any child was created counts as, when what
    /// failed is the launched program's (its file, its credentials) and not the launcher's:
    /// what its child would have ended with, as a shell's would. 127 not found and 126 not
    /// executable ([`TargetError::exit_status`], 123 for a refused set-id target), 125 for
    /// credentials the user database cannot give (the gate's status for a failed credential
    /// change). `None` when a child was created (its own status reaches the reaper) and for
    /// the launcher's own failures: its thread gone, `clone` or a pipe failing.
    pub fn status_without_child(&self) -> Option<i32> {
        match self {
            SpawnError::Target(e) => Some(e.exit_status()),
            SpawnError::Credentials(_) => Some(EXIT_GATE_ERROR),
            _ => None,
        }
    }
}

/// `b` as a C string; a NUL byte inside is an error naming `what` held it.
pub(super) fn cstring(what: &str, b: impl Into<Vec<u8>>) -> Result<CString, SpawnError> {
    CString::new(b).map_err(|_| {
        SpawnError::Io(
            what.into(),
            io::Error::new(io::ErrorKind::InvalidInput, "contains a NUL byte"),
        )
    })
}
