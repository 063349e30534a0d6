//! The spawner: the one long-lived thread on which every fork happens.
//!
//! Owns [`Spawner`]. The kernel sends the parent-death signal when the **thread** that created
//! a process exits, not when its process does. A supervisor with many threads (tokio's blocking
//! pool retires idle threads after 10 s, `block_in_place` retires workers) would otherwise see
//! its helpers killed for no reason. So every launch is a request over a channel to one
//! dedicated thread that lives as long as the spawner: this is foster's **creating-thread
//! contract**. A helper is signalled when that thread ends, which happens only when the process
//! ends or the last [`Spawner`] handle is dropped ([`Spawner::global`] is never dropped).
//!
//! The spawner thread records the expected parent identity before fork, builds the launch
//! (argv, envp, the gate's [`GatePlan`]) entirely in advance, then forks with
//! `clone(CLONE_VM | CLONE_VFORK | CLONE_PIDFD)`: like `posix_spawn`, the child borrows the
//! launcher's memory on a stack of its own (a mapping with a `PROT_NONE` guard page below it)
//! while the spawner thread waits for its exec (no page tables copied), and the pidfd is obtained atomically with the child, so it is never a pid
//! some other process reused, even if the reaper reaps the child at once. A launch whose
//! descriptors fit is cloned with `CLONE_FILES` too, and the child's first step takes a
//! descriptor table of its own holding only the numbers below the spawner's boundary, where
//! the spawner placed what the launch needs on numbers it reserved at start ([`LowSlots`]): a
//! launch costs the descriptors it uses, not the thousands foster holds (no table copied at
//! clone, nothing of foster's closed at exec). The child resets
//! caught signal handlers to default, applies stdio (sources that are themselves standard
//! numbers moved out of the way first; the spawner's own descriptors kept above 2), then the
//! extra descriptors at their numbers (every source, and the spawner's own descriptors, moved
//! above the highest number first), credentials (group list, gid, uid, in that
//! order, resolved from the user database before fork: [`Credentials`]) and the working
//! directory, then runs the gate (**after** the credential change, since
//! that change would clear the parent-death setting), then sets the signal state it execs with
//! ([`ExecSignals`]: by default the one this process was started with, so nothing foster
//! changed for itself, such as the SIGPIPE Rust's runtime ignores, reaches the program), then
//! `execve`. Only raw syscalls run in the child: nothing allocates, nothing locks, nothing can
//! panic. A step that fails is reported as a [`SetupStep`].
//!
//! Why not `std::process::Command` with `pre_exec`: when exec or a `pre_exec` hook fails, std
//! waits for the failed child itself and panics if that wait finds no child. With a reaper that
//! owns `waitpid(-1)` (foster's rule: one owner of all waiting) that wait races the reaper. The
//! spawner never waits: it returns the pid and pidfd, and a failed launch's zombie is the
//! reaper's like any other. Failures reach the launcher through a close-on-exec report pipe,
//! and the child ends with the gate's documented exit status.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;
use std::sync::OnceLock;
use std::sync::mpsc;

use crate::base::sys::errno;
use crate::gate::policy::{ENV_PARENT, Policy};
use crate::gate::{
    self, ENV_GATED, EXIT_GATE_ERROR, EXIT_NOT_EXECUTABLE, EXIT_NOT_FOUND, GatePlan, GateStop,
    IdentitySlot, SignalSetup, TargetError, Trace,
};
use crate::process::identity::Identity;
use crate::process::identity::pidfd_open;
use crate::process::signal::{Inherited, SigBits};

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
    /// Switch to this gid before arming; the group list as [`Credentials::resolve`] says.
    pub gid: Option<u32>,
    /// Switch to this uid before arming, with the user's groups from the user database
    /// ([`Credentials::resolve`]).
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

/// Why a requested uid/gid could not be resolved into [`Credentials`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CredentialError {
    /// The request itself is refused (`(uid_t)-1`, a uid without a group to take).
    #[error("{0}")]
    Refused(String),
    /// The user database could not be read.
    #[error("{0}")]
    Lookup(String),
}

/// A `user` as a configuration writes it (a name, or a uid as digits:
/// [`crate::supervision::config::parse_id`]'s forms) → the uid to [`Credentials::resolve`]: a name through
/// the user database, digits as they are (whether that uid needs an entry is `resolve`'s rule).
/// The one lookup of a helper's user, for its launch and for `foster run --check`.
pub fn user_id(user: &str) -> Result<u32, CredentialError> {
    if let Ok(uid) = user.parse::<u32>() {
        return Ok(uid);
    }
    match nix::unistd::User::from_name(user) {
        Ok(Some(pw)) => Ok(pw.uid.as_raw()),
        Ok(None) => Err(CredentialError::Refused(format!(
            "no user {user:?} in the user database: expected the name of an existing user, or \
             a uid"
        ))),
        Err(e) => Err(CredentialError::Lookup(format!(
            "user {user:?}: cannot read the user database: {e}"
        ))),
    }
}

/// A `group` as a configuration writes it → the gid, as [`user_id`] does for a user: a name
/// through the group database, digits as they are.
pub fn group_id(group: &str) -> Result<u32, CredentialError> {
    if let Ok(gid) = group.parse::<u32>() {
        return Ok(gid);
    }
    match nix::unistd::Group::from_name(group) {
        Ok(Some(gr)) => Ok(gr.gid.as_raw()),
        Ok(None) => Err(CredentialError::Refused(format!(
            "no group {group:?} in the group database: expected the name of an existing \
             group, or a gid"
        ))),
        Err(e) => Err(CredentialError::Lookup(format!(
            "group {group:?}: cannot read the group database: {e}"
        ))),
    }
}

/// `(uid_t)-1` and `(gid_t)-1`: "no change" to `setresuid`/`setresgid`, never an id to run as.
pub const NO_CHANGE_ID: u32 = u32::MAX;

/// Who a launched process becomes: the group list, gid and uid to set, in that order, resolved
/// from a requested uid and/or gid before fork (the user database is read here, never in the
/// child, which only makes the three syscalls on this data).
///
/// The rules (the same for `foster exec --uid/--gid` and a helper's `user`/`group`):
/// - a uid with an entry in the user database takes that user's primary group when no gid is
///   given, and then the user's group list (`getgrouplist`, the primary group included), as
///   `runuser -u` and `setpriv --init-groups` do; a given gid that is the user's primary group
///   is the same request;
/// - a given gid that is not the user's primary group replaces the user's groups: the list is
///   cleared (as `runuser -g` does), and so is it for a gid given alone;
/// - a uid without an entry has no group to take: a gid must be given (the caller's group
///   is never kept silently), and the list is cleared;
/// - `4294967295`, `(uid_t)-1`, is refused for either.
///
/// A group list already equal to the caller's is left alone (`groups: None`), so a process
/// without the privilege to set groups can still "change" to its own ids.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Credentials {
    /// The supplementary group list to set (`setgroups`); `None` leaves the caller's.
    pub groups: Option<Vec<u32>>,
    /// The real, effective and saved gid to set; `None` leaves the caller's.
    pub gid: Option<u32>,
    /// The real, effective and saved uid to set; `None` leaves the caller's.
    pub uid: Option<u32>,
}

impl Credentials {
    /// Resolves a requested `uid` / `gid` (see the rules above). The error names the id and
    /// what to do.
    pub fn resolve(uid: Option<u32>, gid: Option<u32>) -> Result<Credentials, CredentialError> {
        use CredentialError::{Lookup, Refused};
        for (id, kind) in [(uid, "uid"), (gid, "gid")] {
            if id == Some(NO_CHANGE_ID) {
                return Err(Refused(format!(
                    "{kind} {NO_CHANGE_ID} is ({kind}_t)-1, which the kernel takes as \"no \
                     change\": expected a {kind} from 0 to 4294967294"
                )));
            }
        }
        let (groups, gid) = match uid {
            None => (gid.map(|_| Vec::new()), gid),
            Some(u) => {
                let user = nix::unistd::User::from_uid(u.into())
                    .map_err(|e| Lookup(format!("uid {u}: cannot read the user database: {e}")))?;
                // The user's own groups: its list from the database, its primary group.
                let own = |pw: nix::unistd::User| {
                    let name = CString::new(pw.name.as_bytes())
                        .map_err(|_| Lookup(format!("uid {u}: the user name holds a NUL byte")))?;
                    let list = nix::unistd::getgrouplist(&name, pw.gid).map_err(|e| {
                        Lookup(format!(
                            "uid {u} ({}): cannot read its groups: {e}",
                            pw.name
                        ))
                    })?;
                    Ok::<_, CredentialError>((
                        Some(list.into_iter().map(|g| g.as_raw()).collect::<Vec<u32>>()),
                        Some(pw.gid.as_raw()),
                    ))
                };
                match (user, gid) {
                    (Some(pw), None) => own(pw)?,
                    (Some(pw), Some(g)) if g == pw.gid.as_raw() => own(pw)?,
                    (_, Some(g)) => (Some(Vec::new()), Some(g)),
                    (None, None) => {
                        return Err(Refused(format!(
                            "uid {u} has no entry in the user database, so it has no group to \
                             take: give a gid too (--gid, or the helper's group)"
                        )));
                    }
                }
            }
        };
        let groups = groups.map(|mut g| {
            g.sort_unstable();
            g.dedup();
            g
        });
        let current = nix::unistd::getgroups().ok().map(|g| {
            let mut v: Vec<u32> = g.into_iter().map(|g| g.as_raw()).collect();
            v.sort_unstable();
            v.dedup();
            v
        });
        Ok(Credentials {
            groups: groups.filter(|g| Some(g) != current.as_ref()),
            gid,
            uid,
        })
    }

    /// Whether anything changes.
    pub fn changes(&self) -> bool {
        self.groups.is_some() || self.gid.is_some() || self.uid.is_some()
    }

    /// Sets the group list, the gid, the uid, in that order, with raw syscalls on this data:
    /// async-signal-safe and allocation-free, for a child between clone and exec. Raw syscalls
    /// change the calling thread only: call it where that is the whole process (a fresh child,
    /// a single-threaded process). The error is the step that failed and its errno.
    fn apply_raw(&self) -> Result<(), (SetupStep, i32)> {
        // SAFETY: credential syscalls on data that outlives them.
        unsafe {
            if let Some(g) = &self.groups
                && libc::syscall(libc::SYS_setgroups, g.len(), g.as_ptr()) != 0
            {
                return Err((SetupStep::Groups, errno()));
            }
            if let Some(g) = self.gid
                && libc::syscall(libc::SYS_setresgid, g, g, g) != 0
            {
                return Err((SetupStep::Gid, errno()));
            }
            if let Some(u) = self.uid
                && libc::syscall(libc::SYS_setresuid, u, u, u) != 0
            {
                return Err((SetupStep::Uid, errno()));
            }
        }
        Ok(())
    }

    /// [`Credentials::apply_raw`] for a single-threaded process (`foster exec` before its
    /// exec), with the error as text.
    pub fn apply_single_threaded(&self) -> io::Result<()> {
        // Another thread would keep the old credentials: refuse rather than leave one behind.
        let stat = std::fs::read("/proc/self/stat")?;
        let threads = crate::process::procstat::StatFields::parse(&stat)
            .map_err(|e| io::Error::other(format!("/proc/self/stat: {e}")))?
            .num_threads;
        if threads != 1 {
            return Err(io::Error::other(format!(
                "cannot change credentials: this process has {threads} threads, not one"
            )));
        }
        self.apply_raw().map_err(|(step, errno)| {
            let what = match step {
                SetupStep::Groups => {
                    format!("setgroups({:?})", self.groups.as_deref().unwrap_or(&[]))
                }
                SetupStep::Gid => format!("setresgid({})", self.gid.unwrap_or_default()),
                _ => format!("setresuid({})", self.uid.unwrap_or_default()),
            };
            let e = io::Error::from_raw_os_error(errno);
            io::Error::new(e.kind(), format!("{what}: {e}"))
        })
    }
}

type Reply = mpsc::Sender<Result<Launched, SpawnError>>;

/// A handle to the spawner thread. Cloning shares the same thread.
#[derive(Clone, Debug)]
pub struct Spawner {
    tx: mpsc::Sender<(LaunchSpec, Reply)>,
    identity: Identity,
    thread_tid: i32,
    child_stack: std::ops::Range<usize>,
}

impl Spawner {
    /// Starts a dedicated spawner thread. It ends when the last handle is dropped, and every
    /// helper it launched then gets its parent-death signal: keep a handle for as long as the
    /// helpers must live, or use [`Spawner::global`].
    pub fn start() -> io::Result<Spawner> {
        let identity = Identity::current().map_err(io::Error::other)?;
        let (tx, rx) = mpsc::channel::<(LaunchSpec, Reply)>();
        let (tid_tx, tid_rx) = mpsc::channel();
        // The children's stack, mapped once: every launch reuses it.
        let mut stack = ChildStack::map(CHILD_STACK)?;
        let child_stack = stack.usable();
        std::thread::Builder::new()
            .name("foster-spawner".into())
            .spawn(move || {
                // SAFETY: gettid has no preconditions.
                let _ = tid_tx.send(unsafe { libc::gettid() });
                // A pidfd of this process, inherited by each child until its exec (close-on-exec):
                // the gate's lifeline when getppid() cannot tell.
                let own_pidfd = pidfd_open(identity.pid).and_then(above_stdio).ok();
                // Reserved after the pidfd, so that it lies below the boundary too.
                let low = LowSlots::reserve();
                for (spec, reply) in rx {
                    let r = launch_here(
                        spec,
                        identity,
                        own_pidfd.as_ref().map(|f| f.as_raw_fd()),
                        low.as_ref(),
                        stack.top(),
                    );
                    let _ = reply.send(r);
                }
            })?;
        let thread_tid = tid_rx
            .recv()
            .map_err(|_| io::Error::other("spawner thread died"))?;
        Ok(Spawner {
            tx,
            identity,
            thread_tid,
            child_stack,
        })
    }

    /// The process-wide spawner, started on first use and never dropped.
    pub fn global() -> &'static Spawner {
        static GLOBAL: OnceLock<Spawner> = OnceLock::new();
        GLOBAL.get_or_init(|| Spawner::start().expect("cannot start the foster spawner thread"))
    }

    /// The identity every helper of this spawner expects as its parent.
    pub fn identity(&self) -> Identity {
        self.identity
    }

    /// The thread id of the spawner thread (the kernel's "parent" of every helper).
    pub fn thread_id(&self) -> i32 {
        self.thread_tid
    }

    /// The addresses of the stack the children run on between clone and exec (the page below
    /// is the guard), for inspection (`/proc/self/maps`).
    pub fn child_stack(&self) -> std::ops::Range<usize> {
        self.child_stack.clone()
    }

    /// Launches a helper on the spawner thread; returns once it has exec'd or failed.
    pub fn launch(&self, spec: LaunchSpec) -> Result<Launched, SpawnError> {
        let (rtx, rrx) = mpsc::channel();
        self.tx
            .send((spec, rtx))
            .map_err(|_| SpawnError::SpawnerGone)?;
        rrx.recv().map_err(|_| SpawnError::SpawnerGone)?
    }
}

fn cstring(what: &str, b: &[u8]) -> Result<CString, SpawnError> {
    CString::new(b).map_err(|_| {
        SpawnError::Io(
            what.into(),
            io::Error::new(io::ErrorKind::InvalidInput, "contains a NUL byte"),
        )
    })
}

// Report records from the child: (kind, a, b), 12 bytes.
const R_GATE: u32 = 1;
const R_EXEC: u32 = 2;
const R_SETUP: u32 = 3;

/// A step of the child before the gate, as a failed one is reported (its number on the wire,
/// its text in [`SpawnError::Setup`]).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetupStep {
    Stdio = 0,
    Groups = 1,
    Gid = 2,
    Uid = 3,
    Chdir = 4,
    OwnIdentity = 5,
    ExtraFd = 6,
    CloseRange = 7,
}

impl SetupStep {
    const ALL: [SetupStep; 8] = [
        SetupStep::Stdio,
        SetupStep::Groups,
        SetupStep::Gid,
        SetupStep::Uid,
        SetupStep::Chdir,
        SetupStep::OwnIdentity,
        SetupStep::ExtraFd,
        SetupStep::CloseRange,
    ];

    /// What failed, as an error says it.
    pub fn text(self) -> &'static str {
        match self {
            SetupStep::Stdio => "dup2 of stdio",
            SetupStep::Groups => "setgroups",
            SetupStep::Gid => "setgid",
            SetupStep::Uid => "setuid",
            SetupStep::Chdir => "chdir",
            SetupStep::OwnIdentity => "own identity",
            SetupStep::ExtraFd => "dup2 of an extra descriptor",
            SetupStep::CloseRange => "close_range (the child's own descriptor table)",
        }
    }

    /// The step numbered `n` on the wire.
    fn from_wire(n: u32) -> Option<SetupStep> {
        SetupStep::ALL.into_iter().find(|s| *s as u32 == n)
    }
}

const CHILD_STACK: usize = 256 * 1024;

/// The stack of the `CLONE_VM` child: a mapping of its own with a `PROT_NONE` guard page below
/// it, so that an overflow faults in the child instead of writing into the launcher's memory
/// (a heap buffer had nothing below it but other allocations).
struct ChildStack {
    base: *mut libc::c_void,
    len: usize,
    guard: usize,
}

// SAFETY: a private mapping owned by one value; moved once, to the spawner thread.
unsafe impl Send for ChildStack {}

impl ChildStack {
    fn map(size: usize) -> io::Result<ChildStack> {
        let guard = procfs::page_size() as usize;
        let len = size.next_multiple_of(guard) + guard;
        // SAFETY: a fresh anonymous mapping, then protection of its lowest page.
        unsafe {
            let base = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            );
            if base == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            let stack = ChildStack { base, len, guard };
            if libc::mprotect(base, guard, libc::PROT_NONE) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(stack)
        }
    }

    /// The usable addresses, above the guard page.
    fn usable(&self) -> std::ops::Range<usize> {
        self.base as usize + self.guard..self.base as usize + self.len
    }

    /// The initial stack pointer (the stack grows down), 16-byte aligned.
    fn top(&mut self) -> *mut libc::c_void {
        (self.usable().end & !15) as *mut libc::c_void
    }
}

impl Drop for ChildStack {
    fn drop(&mut self) {
        // SAFETY: our own mapping; no child runs on it once the spawner thread ends.
        unsafe { libc::munmap(self.base, self.len) };
    }
}

/// The lowest number of a reserved slot: the numbers below are left to a launch's extra
/// descriptors (the notification descriptor of s6's protocol is 3 to 9 in practice), which
/// the child places over whatever lies there.
const SLOT_BASE: RawFd = 10;
/// Reserved slots per spawner: stdio, the report pipe, an extra descriptor, the lifeline, the
/// terminal and the trace hooks' two, the most one launch needs but for many extra descriptors.
const SLOTS: usize = 8;

/// A spawner thread's reserved low descriptor numbers, which make a launch cost the
/// descriptors it uses and not the thousands the launcher holds (two pipe ends per captured
/// stream, a pidfd per helper and per watched parent, all close-on-exec).
///
/// A fork copies the whole descriptor table and the exec then closes every close-on-exec
/// descriptor in it, one by one: with 1,000 helpers, 5,000 each, and 2.5 million to start
/// them. Instead, a launch whose descriptors fit is cloned with `CLONE_FILES` (the table
/// shared, nothing copied) and the child's first step is `close_range(boundary, ~0,
/// CLOSE_RANGE_UNSHARE)`, which gives it a table of its own holding copies of the
/// descriptors below `boundary` only: the numbers this process had open when the spawner
/// started (its standard ones, those its caller passed, its first own ones) and the reserved
/// slots. Before the clone, the spawner thread `dup3`s each descriptor the child needs that
/// lies at `boundary` or above onto a slot (close-on-exec); after it, each used slot gets its
/// placeholder back.
///
/// The invariants:
/// - a slot always holds a descriptor (a placeholder on `/dev/null` between launches), so no
///   other thread's open ever lands on it, and only this spawner thread writes it;
/// - every slot is at [`SLOT_BASE`] or above and below `boundary`, which also lies above
///   every descriptor open when the spawner started: so what foster's caller passed without
///   close-on-exec still reaches every helper, as with a copied table. A descriptor opened
///   later without close-on-exec at `boundary` or above reaches none (foster opens everything
///   close-on-exec; a launch passes a descriptor explicitly, as stdio or an extra one);
/// - a launch falls back to the copied table when its descriptors do not fit: an extra
///   descriptor at the first slot's number or above, more than [`SLOTS`] to place.
struct LowSlots {
    null: OwnedFd,
    /// Ascending.
    slots: Vec<OwnedFd>,
    boundary: RawFd,
}

impl LowSlots {
    /// Reserves the slots and reads the boundary; `None` (every launch copies the table) when
    /// `close_range` is missing (before Linux 5.9, or filtered), or `/dev/null` or
    /// `/proc/self/fd` cannot be read.
    fn reserve() -> Option<LowSlots> {
        // Flags 0 and a range where nothing is open: closes nothing, fails only when the call
        // is not there. (With CLOSE_RANGE_UNSHARE it would unshare this thread's table.)
        // SAFETY: see above.
        if unsafe { libc::syscall(libc::SYS_close_range, u32::MAX, u32::MAX, 0) } != 0 {
            return None;
        }
        let null: OwnedFd = std::fs::File::open("/dev/null").ok()?.into();
        let mut slots = Vec::with_capacity(SLOTS);
        for _ in 0..SLOTS {
            // SAFETY: duplicates a descriptor we own; the duplicate is owned from here on.
            let d = unsafe { libc::fcntl(null.as_raw_fd(), libc::F_DUPFD_CLOEXEC, SLOT_BASE) };
            if d < 0 {
                return None;
            }
            // SAFETY: `d` was just returned by fcntl(F_DUPFD_CLOEXEC): open and owned by nobody
            // else.
            slots.push(unsafe { OwnedFd::from_raw_fd(d) });
        }
        // Read once the slots are held: every number open now, slots included, lies below.
        let highest = std::fs::read_dir("/proc/self/fd")
            .ok()?
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<RawFd>().ok())
            .max()?;
        Some(LowSlots {
            null,
            slots,
            boundary: highest + 1,
        })
    }

    /// Moves the descriptors of one launch below the boundary (`fds` and `report` rewritten
    /// to the numbers the child finds them at), or `None`, with nothing changed, when they do
    /// not fit. `floor`: one above the highest extra descriptor number, which no descriptor
    /// the child still needs once its stdio is placed may lie under.
    fn place(&self, floor: RawFd, fds: &mut ChildFds, report: &mut RawFd) -> Option<Placed<'_>> {
        if floor > self.slots[0].as_raw_fd() {
            return None;
        }
        let mut pl = Placed {
            low: self,
            used: Vec::with_capacity(SLOTS),
        };
        let mut f = fds.clone();
        for fd in f.stdio.iter_mut() {
            *fd = pl.low(*fd)?;
        }
        for (src, _) in f.extra.iter_mut() {
            *src = pl.low(*src)?;
        }
        if let Some(fd) = &mut f.lifeline {
            *fd = pl.low(*fd)?;
        }
        f.foreground_tty = pl.low(f.foreground_tty)?;
        if let Some(t) = &mut f.trace {
            t.fd = pl.low(t.fd)?;
            t.go_fd = pl.low(t.go_fd)?;
        }
        let r = pl.low(*report)?;
        *fds = f;
        *report = r;
        Some(pl)
    }
}

/// The slots one launch uses; dropped, each gets its placeholder back (a pipe's end left on a
/// slot would keep that pipe open).
struct Placed<'a> {
    low: &'a LowSlots,
    /// `(source, slot)`.
    used: Vec<(RawFd, RawFd)>,
}

impl Placed<'_> {
    fn boundary(&self) -> RawFd {
        self.low.boundary
    }

    /// The number the child finds `fd` at: itself below the boundary (and -1, none), else
    /// the slot it is copied onto; `None` when no slot is left.
    fn low(&mut self, fd: RawFd) -> Option<RawFd> {
        if fd < self.low.boundary {
            return Some(fd);
        }
        if let Some(&(_, slot)) = self.used.iter().find(|(src, _)| *src == fd) {
            return Some(slot);
        }
        let slot = self.low.slots.get(self.used.len())?.as_raw_fd();
        // SAFETY: replaces the content of a slot this thread owns with a descriptor the launch
        // holds; atomic, so the number is never free for another thread's open.
        if unsafe { libc::dup3(fd, slot, libc::O_CLOEXEC) } != slot {
            return None;
        }
        self.used.push((fd, slot));
        Some(slot)
    }
}

impl Drop for Placed<'_> {
    fn drop(&mut self) {
        for &(_, slot) in &self.used {
            // SAFETY: as in `low`, the placeholder back on the slot.
            unsafe { libc::dup3(self.low.null.as_raw_fd(), slot, libc::O_CLOEXEC) };
        }
    }
}

struct ChildArgs {
    p: *mut Prepared,
    report_fd: RawFd,
}

extern "C" fn child_entry(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the launcher's `ChildArgs`, alive while it is suspended in clone.
    unsafe {
        let a = &mut *(arg as *mut ChildArgs);
        child(&mut *a.p, a.report_fd)
    }
}

/// `fd`, or a close-on-exec duplicate above 2 when it is 0, 1 or 2 (a launcher started with
/// its standard descriptors closed): a descriptor the child uses itself must not be one of the
/// numbers its stdio overwrites.
fn above_stdio(fd: OwnedFd) -> io::Result<OwnedFd> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    // SAFETY: duplicates a descriptor we own; the duplicate is owned from here on.
    let d = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
    if d < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(d) })
}

/// Writes the child's report. Panic-free (it runs in the child): constant indexes into arrays
/// of four, which the compiler checks.
fn report(fd: RawFd, kind: u32, a: u32, b: i32) {
    let (k, a, b) = (kind.to_ne_bytes(), a.to_ne_bytes(), b.to_ne_bytes());
    let buf = [
        k[0], k[1], k[2], k[3], a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3],
    ];
    // SAFETY: a stack buffer to a descriptor we own.
    unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
}

/// Everything the child touches, prepared before fork.
struct Prepared {
    path: CString,
    argv: Vec<CString>,
    argv_ptrs: Vec<*const libc::c_char>,
    env: Vec<CString>,
    envp: Vec<*const libc::c_char>,
    slot: IdentitySlot,
    slot_index: usize,
    plan: GatePlan,
    stdio: [RawFd; 3],
    credentials: Credentials,
    cwd: Option<CString>,
    caught: Vec<i32>,
    gated: bool,
    new_process_group: bool,
    foreground_tty: RawFd,
    exec_signals: ExecSignals,
    /// `(source, number)`: each source already above every number (see `launch_here`).
    extra: Vec<(RawFd, RawFd)>,
    /// `NAME=PID`, filled by the child.
    pid_slot: Option<IdentitySlot>,
    /// The boundary of a launch that shares the launcher's descriptor table (`CLONE_FILES`):
    /// the child's first step keeps only the descriptors below it, in a table of its own
    /// ([`LowSlots`]); -1 for a launch whose table is copied at clone.
    unshare_below: RawFd,
}

/// The descriptors the child uses, by number in the launcher's table: its stdio sources, its
/// extra descriptors' sources, the gate's lifeline, the terminal, the trace hooks'.
#[derive(Clone)]
struct ChildFds {
    stdio: [RawFd; 3],
    extra: Vec<(RawFd, RawFd)>,
    lifeline: Option<RawFd>,
    foreground_tty: RawFd,
    trace: Option<Trace>,
}

fn prepare(spec: &LaunchSpec, me: Identity, fds: ChildFds) -> Result<Prepared, SpawnError> {
    if spec.program.as_os_str().is_empty() {
        // Joined to a PATH directory, an empty name would name the directory itself.
        return Err(SpawnError::Target(TargetError::NotFound(PathBuf::new())));
    }
    let resolved = gate::resolve_program(&spec.program).map_err(SpawnError::Target)?;
    match gate::check_target(&resolved) {
        Ok(()) => {}
        Err(e) if e.is_privileged() && !spec.gated => {}
        Err(e) if e.is_privileged() && spec.allow_setid => {
            tracing::warn!("{e} (allowed: the helper runs unsupervised after exec)");
        }
        Err(e) => return Err(SpawnError::Target(e)),
    }
    let path = cstring("program path", resolved.as_os_str().as_bytes())?;
    let arg0 = spec
        .arg0
        .clone()
        .unwrap_or_else(|| spec.program.clone().into_os_string());
    let mut argv = vec![cstring("argv[0]", arg0.as_bytes())?];
    for a in &spec.args {
        argv.push(cstring("an argument", a.as_bytes())?);
    }
    let argv_ptrs: Vec<_> = argv
        .iter()
        .map(|c| c.as_ptr())
        .chain([std::ptr::null()])
        .collect();

    // The environment: the process's, the spec's changes, then foster's three variables.
    let mut vars: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    let mut set = |k: &OsStr, v: Option<&OsStr>| {
        vars.retain(|(n, _)| n != k);
        if let Some(v) = v {
            vars.push((k.to_owned(), v.to_owned()));
        }
    };
    for (k, v) in &spec.env {
        set(k, v.as_deref());
    }
    let foster_env = if spec.gated {
        gate::env_for_children(me, me, &spec.policy)
    } else {
        Vec::new()
    };
    for (k, v) in foster_env {
        if k == ENV_PARENT {
            continue; // filled by the child with its own identity
        }
        let v = if k == ENV_GATED {
            Some(format!("{me};{}", spec.policy))
        } else {
            v
        };
        set(OsStr::new(&k), v.as_deref().map(OsStr::new));
    }
    if spec.gated {
        vars.retain(|(k, _)| k != ENV_PARENT);
    }
    if let Some(name) = &spec.pid_env {
        vars.retain(|(k, _)| k != name);
    }
    let mut env = Vec::with_capacity(vars.len());
    for (k, v) in vars {
        let mut kv = k.into_vec();
        kv.push(b'=');
        kv.extend_from_slice(v.as_bytes());
        env.push(cstring("an environment variable", &kv)?);
    }
    let slot = IdentitySlot::new(ENV_PARENT);
    let mut envp: Vec<_> = env.iter().map(|c| c.as_ptr()).collect();
    let slot_index = envp.len();
    if spec.gated {
        envp.push(slot.as_ptr());
    }
    let pid_slot = match &spec.pid_env {
        Some(name) => {
            let name = name
                .to_str()
                .filter(|n| !n.is_empty() && !n.contains(['=', '\0']))
                .ok_or_else(|| {
                    SpawnError::Io(
                        "the pid variable's name".into(),
                        io::Error::new(io::ErrorKind::InvalidInput, "not a usable name"),
                    )
                })?;
            let s = IdentitySlot::new(name);
            envp.push(s.as_ptr());
            Some(s)
        }
        None => None,
    };
    envp.push(std::ptr::null());

    let mut plan = GatePlan::new(me, &spec.policy, SignalSetup::ExecDefault);
    if let Some(fd) = fds.lifeline {
        plan = plan.with_lifeline_fd(fd);
    }
    if let Some(t) = fds.trace {
        plan = plan.with_trace(t);
    }
    // The user database is read here, on the spawner thread: the child only sets the result.
    let credentials = if spec.uid.is_some() || spec.gid.is_some() {
        Credentials::resolve(spec.uid, spec.gid).map_err(SpawnError::Credentials)?
    } else {
        Credentials::default()
    };
    let cwd = match &spec.cwd {
        Some(c) => Some(cstring("working directory", c.as_os_str().as_bytes())?),
        None => None,
    };
    Ok(Prepared {
        path,
        argv,
        argv_ptrs,
        env,
        envp,
        slot,
        slot_index,
        plan,
        stdio: fds.stdio,
        credentials,
        cwd,
        caught: caught_signals(),
        gated: spec.gated,
        new_process_group: spec.new_process_group || spec.foreground_tty.is_some(),
        foreground_tty: fds.foreground_tty,
        exec_signals: {
            let e = spec.exec_signals.unwrap_or_else(ExecSignals::inherited);
            if spec.gated {
                e.without(spec.policy.signal)
            } else {
                e
            }
        },
        extra: fds.extra,
        pid_slot,
        unshare_below: -1,
    })
}

/// The signals this process catches with a handler (dispositions are process-wide).
fn caught_signals() -> Vec<i32> {
    (1..=crate::process::signal::Sig::max())
        .filter(|&sig| sig != libc::SIGKILL && sig != libc::SIGSTOP)
        .filter(|&sig| {
            // SAFETY: queries a disposition into a stack struct.
            let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
            // SAFETY: queries a disposition into `old`, a stack struct; sets nothing.
            let ok = unsafe { libc::sigaction(sig, std::ptr::null(), &mut old) } == 0;
            ok && old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN
        })
        .collect()
}

/// The child between clone and exec. Only raw syscalls and the allocation-free gate; it shares
/// the launcher's memory (CLONE_VM), so it writes nothing but its identity slots.
///
/// Nothing here may panic: unwinding in a child that shares the launcher's memory would run the
/// panic machinery (allocation, locks) on the launcher's heap. So no indexing (`get_mut`, a
/// failure reported as a setup step), no arithmetic that can overflow (`i as RawFd` for
/// `i < 3`), and what it calls is panic-free too: [`GatePlan::run`] (the identity slots and
/// `/proc/self/stat` read through `get`, `checked_*`, and `procstat`'s parser, which slices
/// only at positions it found in the same line), [`crate::base::sys::poll`] without a timeout's
/// clock, [`SigBits`] operations guarded by their range, and `report`'s constant indexes.
unsafe fn child(p: &mut Prepared, report_fd: RawFd) -> ! {
    // SAFETY: this function's contract: called once, in the child of the clone, with `p` prepared
    // before it; the body makes only raw system calls on that data and writes nothing of the
    // parent's but its identity slots.
    unsafe {
        let fail = |kind: u32, a: u32, b: i32, status: i32| -> ! {
            report(report_fd, kind, a, b);
            libc::_exit(status)
        };
        let setup_failed = |step: SetupStep, errno: i32| -> ! {
            fail(R_SETUP, step as u32, errno, EXIT_GATE_ERROR)
        };
        // A launch sharing the launcher's descriptor table (CLONE_FILES) takes a table of its
        // own first, with only the descriptors below the boundary copied into it: everything
        // it uses lies there (LowSlots), and the thousands above, close-on-exec, are neither
        // copied nor closed at exec. Nothing below touches a descriptor before this.
        if p.unshare_below >= 0
            && libc::syscall(
                libc::SYS_close_range,
                p.unshare_below as libc::c_uint,
                libc::c_uint::MAX,
                libc::CLOSE_RANGE_UNSHARE,
            ) != 0
        {
            setup_failed(SetupStep::CloseRange, errno());
        }
        // Caught handlers inherited from the launcher must not run here: back to default
        // (the list of caught signals was read before fork).
        for &sig in &p.caught {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(sig, &act, std::ptr::null_mut());
        }
        if p.new_process_group {
            // Every signal is blocked here (SIGTTOU included), so tcsetpgrp from what is now
            // a background group goes through.
            libc::setpgid(0, 0);
            if p.foreground_tty >= 0 {
                libc::tcsetpgrp(p.foreground_tty, libc::getpid());
            }
        }
        // Standard descriptors. A source that is another slot's number (stdin from 1, stdout
        // from 0) would be overwritten by that slot's dup2 before its own: every source among
        // 0..=2 that is not its own slot moves above 2 first (close-on-exec), as posix_spawn
        // implementations do. A source on its own number is not duplicated (dup2(fd, fd) does
        // nothing and would leave close-on-exec set): its flag is cleared instead.
        let mut stdio = p.stdio;
        for (i, fd) in stdio.iter_mut().enumerate() {
            if (0..3).contains(fd) && *fd != i as RawFd {
                *fd = libc::fcntl(*fd, libc::F_DUPFD_CLOEXEC, 3);
                if *fd < 0 {
                    setup_failed(SetupStep::Stdio, errno());
                }
            }
        }
        for (i, &fd) in stdio.iter().enumerate() {
            let ok = if fd < 0 {
                true
            } else if fd == i as RawFd {
                libc::fcntl(fd, libc::F_SETFD, 0) == 0
            } else {
                libc::dup2(fd, i as RawFd) >= 0
            };
            if !ok {
                setup_failed(SetupStep::Stdio, errno());
            }
        }
        // The extra descriptors: every source is above every number (moved there before the
        // clone), so no placement overwrites a source still to be placed.
        for &(src, number) in &p.extra {
            if libc::dup2(src, number) < 0 {
                setup_failed(SetupStep::ExtraFd, errno());
            }
        }
        if let Some(slot) = &mut p.pid_slot
            && !slot.fill_with_pid()
        {
            setup_failed(SetupStep::OwnIdentity, libc::EOVERFLOW);
        }
        // Credentials first (group list, gid, uid, resolved before fork; raw syscalls: this
        // thread is the child's only one), so that the gate arms afterwards: an effective
        // uid/gid change clears the parent-death setting.
        if let Err((step, errno)) = p.credentials.apply_raw() {
            setup_failed(step, errno);
        }
        if let Some(c) = &p.cwd
            && libc::chdir(c.as_ptr()) != 0
        {
            setup_failed(SetupStep::Chdir, errno());
        }
        if p.gated {
            if !p.slot.fill_with_self() {
                setup_failed(SetupStep::OwnIdentity, errno());
            }
            // The slot's index was reserved in `envp` before the clone: `get_mut` finds it.
            match p.envp.get_mut(p.slot_index) {
                Some(entry) => *entry = p.slot.as_ptr(),
                None => setup_failed(SetupStep::OwnIdentity, libc::EINVAL),
            }
            if let Err(stop) = p.plan.run() {
                let (k, v) = stop.encode();
                fail(R_GATE, k, v, stop.exit_status());
            }
        }
        // The signal state to exec with, last: until here every signal but the armed one is
        // blocked (since the clone), so one that arrives meanwhile stays pending for the program.
        p.exec_signals.apply();
        libc::execve(p.path.as_ptr(), p.argv_ptrs.as_ptr(), p.envp.as_ptr());
        let e = errno();
        let status = if e == libc::ENOENT {
            EXIT_NOT_FOUND
        } else {
            EXIT_NOT_EXECUTABLE
        };
        fail(R_EXEC, 0, e, status)
    }
}

fn launch_here(
    spec: LaunchSpec,
    me: Identity,
    own_pidfd: Option<RawFd>,
    low: Option<&LowSlots>,
    stack_top: *mut libc::c_void,
) -> Result<Launched, SpawnError> {
    // Every descriptor the child uses itself (its extra ones' sources, the lifeline, the report
    // pipe) must lie above the numbers its extra descriptors take, or placing one would
    // overwrite it: those below are copied above (close-on-exec) for this launch.
    let numbers: Vec<RawFd> = spec.extra_fds.iter().map(|(_, n)| *n).collect();
    if let Some(&n) = numbers.iter().find(|&&n| n < 3) {
        return Err(SpawnError::Io(
            format!("extra descriptor number {n}"),
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "0, 1 and 2 are the standard ones",
            ),
        ));
    }
    if (1..numbers.len()).any(|i| numbers[..i].contains(&numbers[i])) {
        return Err(SpawnError::Io(
            "extra descriptors".into(),
            io::Error::new(io::ErrorKind::InvalidInput, "a number is given twice"),
        ));
    }
    let floor = numbers.iter().max().map_or(3, |m| m + 1);
    let above = |fd: RawFd| -> Result<OwnedFd, SpawnError> {
        // SAFETY: duplicates a descriptor the caller holds; the duplicate is owned from here.
        let d = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, floor) };
        if d < 0 {
            return Err(SpawnError::Io(
                "extra descriptors".into(),
                io::Error::last_os_error(),
            ));
        }
        // SAFETY: `d` was just returned by fcntl(F_DUPFD_CLOEXEC): open and owned by nobody else.
        Ok(unsafe { OwnedFd::from_raw_fd(d) })
    };
    let mut moved = Vec::new();
    let mut extra = Vec::new();
    for (fd, number) in &spec.extra_fds {
        let d = above(fd.as_raw_fd())?;
        extra.push((d.as_raw_fd(), *number));
        moved.push(d);
    }
    let own_pidfd = match own_pidfd {
        Some(fd) if fd < floor && !numbers.is_empty() => {
            let d = above(fd)?;
            let raw = d.as_raw_fd();
            moved.push(d);
            Some(raw)
        }
        other => other,
    };
    let mut fds = [0 as RawFd; 2];
    // SAFETY: pipe2 into a stack array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return Err(SpawnError::Io(
            "report pipe".into(),
            io::Error::last_os_error(),
        ));
    }
    // SAFETY: fresh descriptors we own.
    let (rd, wr) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let wr = above_stdio(wr).map_err(|e| SpawnError::Io("report pipe".into(), e))?;
    let wr = if wr.as_raw_fd() < floor && !numbers.is_empty() {
        let high = above(wr.as_raw_fd())?;
        drop(wr);
        high
    } else {
        wr
    };
    let raw = |o: &Option<OwnedFd>| o.as_ref().map_or(-1, |f| f.as_raw_fd());
    let mut fds = ChildFds {
        stdio: [raw(&spec.stdin), raw(&spec.stdout), raw(&spec.stderr)],
        extra,
        lifeline: own_pidfd,
        foreground_tty: spec.foreground_tty.unwrap_or(-1),
        trace: spec.trace,
    };
    let mut report_fd = wr.as_raw_fd();
    // Every descriptor the child uses at a reserved number below the boundary, when they fit:
    // then the child shares this table and keeps only what lies below (`child`'s first step).
    // Otherwise the table is copied whole at clone, as fork does. `placed` puts the
    // placeholders back when it is dropped, after the clone (or on an error before it).
    let placed = low.and_then(|l| l.place(floor, &mut fds, &mut report_fd));
    let mut p = prepare(&spec, me, fds)?;
    p.unshare_below = placed.as_ref().map_or(-1, |pl| pl.boundary());
    let _keep = (&p.argv, &p.env, &moved);

    // Block every signal across the clone, so no handler of this process runs in the child
    // before it has reset them; the child's gate sets its own mask.
    // SAFETY: sigset_t is plain integers: all zeros is a valid value (sigfillset fills it below).
    let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: sigset_t is plain integers: all zeros is a valid value (sigprocmask fills it below).
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    let mut pidfd: libc::c_int = -1;
    // The child's own stack: it shares this process's memory (CLONE_VM) while this thread is
    // suspended (CLONE_VFORK) until it execs or exits, like posix_spawn. No page tables are
    // copied, which is what makes a fork from a large supervisor slow.
    let mut args = ChildArgs {
        p: &mut p,
        report_fd,
    };
    let files = if placed.is_some() {
        libc::CLONE_FILES
    } else {
        0
    };
    // SAFETY: the child runs only `child_entry` on its own stack, touches nothing but `p`
    // (prepared above and kept alive until the clone returns) and ends in execve or _exit.
    let ret = unsafe {
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let r = libc::clone(
            child_entry,
            stack_top,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PIDFD | files | libc::SIGCHLD,
            (&mut args as *mut ChildArgs).cast(),
            &mut pidfd as *mut libc::c_int,
        );
        let e = io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        if r < 0 {
            return Err(SpawnError::Io("clone".into(), e));
        }
        r
    };
    drop(placed); // the placeholders back on the reserved numbers
    drop(wr);
    drop(spec); // the parent's copies of the stdio descriptors
    drop(moved);
    // SAFETY: clone filled a descriptor we own.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    // CLONE_VFORK resumed this thread only once the child exec'd or exited, and a failing child
    // writes its report before it exits: the report, if any, is already in the (non-blocking)
    // pipe. Nothing to wait for: an empty pipe means the exec went through.
    let mut buf = [0u8; 12];
    let mut got = 0;
    while got < buf.len() {
        // SAFETY: reads into the rest of a stack buffer.
        let n = unsafe {
            libc::read(
                rd.as_raw_fd(),
                buf[got..].as_mut_ptr().cast(),
                buf.len() - got,
            )
        };
        if n < 0 && errno() == libc::EINTR {
            continue;
        }
        if n <= 0 {
            break;
        }
        got += n as usize;
    }
    if got == 0 {
        return Ok(Launched {
            pid: ret,
            pidfd,
            expected_parent: me,
        });
    }
    let word = |i: usize| [buf[i], buf[i + 1], buf[i + 2], buf[i + 3]];
    let (kind, a, b) = (
        u32::from_ne_bytes(word(0)),
        u32::from_ne_bytes(word(4)),
        i32::from_ne_bytes(word(8)),
    );
    Err(match kind {
        R_GATE => SpawnError::Gate {
            pid: ret,
            pidfd,
            stop: GateStop::decode(a, b).unwrap_or(GateStop::CheckUnreadable { errno: 0 }),
        },
        R_EXEC => SpawnError::Exec {
            pid: ret,
            pidfd,
            errno: b,
        },
        _ => SpawnError::Setup {
            pid: ret,
            pidfd,
            what: SetupStep::from_wire(a).map_or("setup", SetupStep::text),
            errno: b,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each setup step reads back from its number on the wire; an unknown number is none.
    #[test]
    fn setup_steps_read_back_from_the_wire() {
        for step in SetupStep::ALL {
            assert_eq!(SetupStep::from_wire(step as u32), Some(step));
        }
        assert_eq!(SetupStep::from_wire(8), None);
        assert_eq!(SetupStep::Chdir.text(), "chdir");
    }

    /// The group list a resolution leads to: the one it sets, or the caller's it leaves.
    fn groups_after(c: &Credentials) -> Vec<u32> {
        c.groups.clone().unwrap_or_else(|| {
            let mut v: Vec<u32> = nix::unistd::getgroups()
                .unwrap()
                .into_iter()
                .map(|g| g.as_raw())
                .collect();
            v.sort_unstable();
            v.dedup();
            v
        })
    }

    #[test]
    fn credentials_follow_the_user_database() {
        assert_eq!(
            Credentials::resolve(None, None).unwrap(),
            Credentials::default()
        );
        assert!(!Credentials::default().changes());
        for (uid, gid, kind) in [
            (Some(NO_CHANGE_ID), None, "uid"),
            (None, Some(NO_CHANGE_ID), "gid"),
        ] {
            let e = Credentials::resolve(uid, gid).unwrap_err();
            assert!(matches!(e, CredentialError::Refused(_)), "{e:?}");
            assert!(e.to_string().contains(&format!("({kind}_t)-1")), "{e}");
        }
        // A gid alone: the list is cleared.
        let c = Credentials::resolve(None, Some(4242)).unwrap();
        assert_eq!((c.uid, c.gid, groups_after(&c)), (None, Some(4242), vec![]));
        // root, with its entry: its primary group and its list from the database.
        let root = nix::unistd::User::from_uid(0.into()).unwrap().unwrap();
        let mut want: Vec<u32> = nix::unistd::getgrouplist(c"root", root.gid)
            .unwrap()
            .into_iter()
            .map(|g| g.as_raw())
            .collect();
        want.sort_unstable();
        want.dedup();
        let c = Credentials::resolve(Some(0), None).unwrap();
        assert_eq!((c.uid, c.gid), (Some(0), Some(root.gid.as_raw())));
        assert_eq!(groups_after(&c), want);
        // Another group than the user's primary one replaces the user's groups.
        let c = Credentials::resolve(Some(0), Some(4242)).unwrap();
        assert_eq!((c.gid, groups_after(&c)), (Some(4242), vec![]));
        // A uid without an entry: a gid is required, and then the list is cleared.
        let stranger = (54321..)
            .find(|&u| matches!(nix::unistd::User::from_uid(u.into()), Ok(None)))
            .unwrap();
        let e = Credentials::resolve(Some(stranger), None).unwrap_err();
        assert!(matches!(e, CredentialError::Refused(_)), "{e:?}");
        assert!(
            e.to_string().contains("no entry in the user database"),
            "{e}"
        );
        let c = Credentials::resolve(Some(stranger), Some(stranger)).unwrap();
        assert_eq!(
            (c.uid, c.gid, groups_after(&c)),
            (Some(stranger), Some(stranger), vec![])
        );
    }

    #[test]
    fn an_empty_program_name_is_refused_before_fork() {
        // Joined to the first PATH directory, "" would name that directory.
        let s = Spawner::start().unwrap();
        let e = s
            .launch(LaunchSpec::new("", [""; 0], Policy::term()))
            .unwrap_err();
        assert!(
            matches!(&e, SpawnError::Target(TargetError::NotFound(p)) if p.as_os_str().is_empty()),
            "{e:?}"
        );
        assert_eq!(e.to_string(), "empty program name");
        assert!(e.pid().is_none(), "no child was created");
    }
}
