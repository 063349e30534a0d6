//! The arm-then-check startup gate: one implementation, three forms.
//!
//! Owns the ordered procedure that closes the parent-death startup race:
//!
//! 1. the launcher records the expected parent identity **before** fork ([`GatePlan::new`]);
//! 2. the child establishes its signal path: the chosen signal unblocked (or blocked and consumed
//!    by a synchronous consumer, in-process), its disposition not "ignore";
//! 3. `prctl(PR_SET_PDEATHSIG, sig)`, checked, then read back with `PR_GET_PDEATHSIG`;
//! 4. `getppid()` and the parent's start time compared with the expected identity;
//! 5. on a mismatch the parent-gone path at once: the target never starts;
//! 6. on a match, on under the armed policy. `getppid() == 0` (the parent lives in another PID
//!    namespace) is "cannot tell": the lifeline decides, and without one the gate refuses.
//!
//! [`GatePlan::run`] is that procedure, allocation-free and async-signal-safe, so the same code
//! runs in the three forms: between fork and exec in the launcher ([`crate::spawner`], or
//! [`GatePlan::install`] on a `std::process::Command`); in-process at a Rust helper's start
//! ([`enter`]); and in `foster exec` before it execs its program ([`crate::chainload`]).
//!
//! The environment variables (see [`crate::policy`] for the policy text):
//! `FOSTER_PARENT` is the parent the reader must have; `FOSTER_POLICY` the reader's policy chain.
//! In a process foster gated, foster sets `FOSTER_PARENT` to that process's **own** identity and
//! `FOSTER_POLICY` to the **next** generation's chain, so its children find what they must expect;
//! `FOSTER_GATED=PID:STARTTIME;CHAIN` keeps what the process itself was checked against, for its
//! own in-process gate. A value inherited through a foster-unaware intermediate names an older
//! generation, fails the identity check and is refused.
//!
//! Exit statuses of a helper stopped by the gate (also those of `foster exec`):
//! [`EXIT_PARENT_GONE`] 120, [`EXIT_ARM_FAILED`] 121, [`EXIT_CANNOT_TELL`] 122,
//! [`EXIT_REFUSED_TARGET`] 123, [`EXIT_LIFELINE`] 124, [`EXIT_GATE_ERROR`] 125, and as shells do,
//! 126 (target not executable) and 127 (target not found).

use std::ffi::CString;
use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Instant;

use crate::admission::{Admission, ShutdownOwner, ShutdownReason};
use crate::identity::{Identity, StatPath, StatRead};
use crate::lifeline::Lifeline;
use crate::policy::{self, ENV_PARENT, ENV_POLICY, Policy, Reaction};
use crate::procstat::StatFields;

/// The expected parent is gone, or is not this process's parent (the check path).
pub const EXIT_PARENT_GONE: i32 = 120;
/// `prctl(PR_SET_PDEATHSIG)` failed, or `PR_GET_PDEATHSIG` read back another value.
pub const EXIT_ARM_FAILED: i32 = 121;
/// `getppid()` returned 0 (parent in another PID namespace) and no lifeline could decide.
pub const EXIT_CANNOT_TELL: i32 = 122;
/// The target is set-user-ID, set-group-ID or has file capabilities, and was refused.
pub const EXIT_REFUSED_TARGET: i32 = 123;
/// The lifeline reported the parent's loss (in-process `exit` reaction, `foster exec --watch`).
pub const EXIT_LIFELINE: i32 = 124;
/// The gate could not run: missing or malformed `FOSTER_PARENT`/`FOSTER_POLICY`, an unreadable
/// `/proc`, a failed credential change.
pub const EXIT_GATE_ERROR: i32 = 125;
/// The target exists but could not be executed.
pub const EXIT_NOT_EXECUTABLE: i32 = 126;
/// The target was not found.
pub const EXIT_NOT_FOUND: i32 = 127;

/// The environment variable that keeps, in a gated process, what it was checked against.
pub const ENV_GATED: &str = "FOSTER_GATED";

/// The steps of the gate, in order; also the tags of [`TraceRecord`]s.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[repr(u32)]
pub enum Step {
    /// The gate started (value: 0).
    Start = 1,
    /// The signal path is in place (value: the signal).
    SignalPath = 2,
    /// `PR_SET_PDEATHSIG` returned (value: what `PR_GET_PDEATHSIG` read back).
    Armed = 3,
    /// The parent was compared (value: 1 match, 0 mismatch, -1 cannot tell).
    Checked = 4,
    /// The gate passed; exec follows (value: 0).
    Passed = 5,
    /// The parent-gone path was taken (value: the [`Path`] as a number).
    ParentGone = 6,
    /// A step failed (value: the errno, or the read-back signal).
    Failed = 7,
}

impl Step {
    fn from_u32(v: u32) -> Option<Step> {
        Some(match v {
            1 => Step::Start,
            2 => Step::SignalPath,
            3 => Step::Armed,
            4 => Step::Checked,
            5 => Step::Passed,
            6 => Step::ParentGone,
            7 => Step::Failed,
            _ => return None,
        })
    }
}

/// Which path consumed a parent-death notification.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeathPath {
    /// The armed parent-death signal.
    Signal,
    /// The gate's comparison with the expected identity.
    Check,
    /// The lifeline (a pidfd of the expected parent).
    Lifeline,
    /// Nothing (no loss, or a loss nobody reported).
    None,
}

impl fmt::Display for DeathPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DeathPath::Signal => "signal",
            DeathPath::Check => "check",
            DeathPath::Lifeline => "lifeline",
            DeathPath::None => "none",
        })
    }
}

/// Where a qualification controller may hold the gate (see [`Trace`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Barrier {
    /// After the signal path is set, before `prctl`.
    BeforeArm = 1,
    /// After `prctl`, before the parent check.
    BeforeCheck = 2,
    /// After a passed check, before exec.
    AfterCheck = 4,
}

/// One fixed-size record the gate writes to a trace descriptor: allocation-free, atomic on a
/// pipe. Used by `foster qualify` to observe the gate from outside.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[repr(C)]
pub struct TraceRecord {
    pub step: u32,
    pub pid: i32,
    pub ppid: i32,
    pub value: i32,
}

impl TraceRecord {
    /// The size of one record on the wire.
    pub const SIZE: usize = 16;

    /// The record's step, if it is one of ours.
    pub fn step(&self) -> Option<Step> {
        Step::from_u32(self.step)
    }

    /// Decodes one record from its wire form (native endianness).
    pub fn decode(b: &[u8; 16]) -> TraceRecord {
        let w = |i: usize| [b[i], b[i + 1], b[i + 2], b[i + 3]];
        TraceRecord {
            step: u32::from_ne_bytes(w(0)),
            pid: i32::from_ne_bytes(w(4)),
            ppid: i32::from_ne_bytes(w(8)),
            value: i32::from_ne_bytes(w(12)),
        }
    }

    fn encode(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[0..4].copy_from_slice(&self.step.to_ne_bytes());
        b[4..8].copy_from_slice(&self.pid.to_ne_bytes());
        b[8..12].copy_from_slice(&self.ppid.to_ne_bytes());
        b[12..16].copy_from_slice(&self.value.to_ne_bytes());
        b
    }
}

/// Qualification hooks: a descriptor that receives a [`TraceRecord`] at every step, and barriers
/// at which the gate blocks reading one byte from `go_fd` (end of file also releases it). Both
/// descriptors should be close-on-exec; they are only used before exec.
#[derive(Clone, Copy, Debug)]
pub struct Trace {
    pub fd: RawFd,
    pub go_fd: RawFd,
    pub barriers: u8,
}

impl Trace {
    const NONE: Trace = Trace {
        fd: -1,
        go_fd: -1,
        barriers: 0,
    };

    fn record(&self, step: Step, ppid: i32, value: i32) {
        if self.fd < 0 {
            return;
        }
        // SAFETY: getpid and write are async-signal-safe; the buffer is on the stack.
        let rec = TraceRecord {
            step: step as u32,
            pid: unsafe { libc::getpid() },
            ppid,
            value,
        };
        let b = rec.encode();
        unsafe { libc::write(self.fd, b.as_ptr().cast(), b.len()) };
    }

    fn barrier(&self, at: Barrier) {
        if self.barriers & at as u8 == 0 || self.go_fd < 0 {
            return;
        }
        let mut byte = 0u8;
        loop {
            // SAFETY: reads one byte into the stack.
            let n = unsafe { libc::read(self.go_fd, (&mut byte as *mut u8).cast(), 1) };
            if n < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return;
        }
    }
}

/// How the gate sets up the signal path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SignalSetup {
    /// Before exec: the whole signal mask emptied (a launcher's mask is inherited otherwise) and
    /// the signal's disposition reset to default, since exec keeps "ignore" but drops handlers.
    ExecDefault,
    /// In-process: the caller has blocked the signal and consumes it synchronously (signalfd); the
    /// gate only makes sure its disposition is not "ignore" (an ignored signal is discarded even
    /// while blocked).
    Consumed,
}

/// Why the gate stopped the helper. Each maps to one exit status ([`GateStop::exit_status`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GateStop {
    /// The expected parent is gone or is not the parent (`ppid` is what `getppid()` said), found
    /// by `path` (the check, or the lifeline when `getppid()` could not tell).
    ParentGone { ppid: i32, path: DeathPath },
    /// `getppid()` returned 0 and no lifeline was given.
    CannotTell,
    /// `prctl(PR_SET_PDEATHSIG)` failed with this errno.
    ArmFailed { errno: i32 },
    /// `PR_GET_PDEATHSIG` read back `got` instead of the armed signal.
    ArmNotKept { got: i32 },
    /// A step before arming failed (`sigprocmask`/`sigaction`) with this errno.
    SignalPathFailed { errno: i32 },
    /// The parent's `stat` could not be read (errno, 0 for a parse failure).
    CheckUnreadable { errno: i32 },
}

impl GateStop {
    /// The documented exit status of a helper stopped this way.
    pub fn exit_status(&self) -> i32 {
        match self {
            GateStop::ParentGone {
                path: DeathPath::Lifeline,
                ..
            } => EXIT_LIFELINE,
            GateStop::ParentGone { .. } => EXIT_PARENT_GONE,
            GateStop::CannotTell => EXIT_CANNOT_TELL,
            GateStop::ArmFailed { .. } | GateStop::ArmNotKept { .. } => EXIT_ARM_FAILED,
            GateStop::SignalPathFailed { .. } | GateStop::CheckUnreadable { .. } => EXIT_GATE_ERROR,
        }
    }

    /// Wire form for a launcher's report pipe: (kind, value).
    pub fn encode(&self) -> (u32, i32) {
        match *self {
            GateStop::ParentGone { ppid, path } => {
                (if path == DeathPath::Lifeline { 2 } else { 1 }, ppid)
            }
            GateStop::CannotTell => (3, 0),
            GateStop::ArmFailed { errno } => (4, errno),
            GateStop::ArmNotKept { got } => (5, got),
            GateStop::SignalPathFailed { errno } => (6, errno),
            GateStop::CheckUnreadable { errno } => (7, errno),
        }
    }

    /// Inverse of [`GateStop::encode`].
    pub fn decode(kind: u32, value: i32) -> Option<GateStop> {
        Some(match kind {
            1 => GateStop::ParentGone {
                ppid: value,
                path: DeathPath::Check,
            },
            2 => GateStop::ParentGone {
                ppid: value,
                path: DeathPath::Lifeline,
            },
            3 => GateStop::CannotTell,
            4 => GateStop::ArmFailed { errno: value },
            5 => GateStop::ArmNotKept { got: value },
            6 => GateStop::SignalPathFailed { errno: value },
            7 => GateStop::CheckUnreadable { errno: value },
            _ => return None,
        })
    }
}

impl fmt::Display for GateStop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            GateStop::ParentGone {
                ppid,
                path: DeathPath::Lifeline,
            } => write!(
                f,
                "the expected parent is gone (the lifeline reported it; getppid() is {ppid})"
            ),
            GateStop::ParentGone { ppid, .. } => write!(
                f,
                "the expected parent is gone or is not this process's parent (getppid() is {ppid})"
            ),
            GateStop::CannotTell => write!(
                f,
                "cannot tell whether the parent lives: getppid() is 0 (parent in another PID \
                 namespace) and no lifeline was given"
            ),
            GateStop::ArmFailed { errno } => write!(
                f,
                "prctl(PR_SET_PDEATHSIG) failed: {}",
                io::Error::from_raw_os_error(errno)
            ),
            GateStop::ArmNotKept { got } => {
                write!(
                    f,
                    "PR_GET_PDEATHSIG read back {got} instead of the armed signal"
                )
            }
            GateStop::SignalPathFailed { errno } => write!(
                f,
                "cannot set up the signal path (mask or disposition): {}",
                io::Error::from_raw_os_error(errno)
            ),
            GateStop::CheckUnreadable { errno: 0 } => {
                write!(f, "cannot parse the expected parent's /proc stat file")
            }
            GateStop::CheckUnreadable { errno } => write!(
                f,
                "cannot read the expected parent's /proc stat file: {}",
                io::Error::from_raw_os_error(errno)
            ),
        }
    }
}

impl std::error::Error for GateStop {}

/// How a passed gate confirmed the parent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Passage {
    /// `getppid()` and the parent's start time matched the expected identity.
    Verified,
    /// `getppid()` could not tell; the lifeline said the expected parent still lives.
    Lifeline,
}

/// Everything the gate needs, computed before fork: running it allocates nothing.
#[derive(Debug)]
pub struct GatePlan {
    expected: Identity,
    parent_stat: StatPath,
    signal: i32,
    reaction: Reaction,
    setup: SignalSetup,
    lifeline_fd: RawFd,
    trace: Trace,
}

fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

impl GatePlan {
    /// A plan that checks against `expected` and arms `policy`'s signal.
    pub fn new(expected: Identity, policy: &Policy, setup: SignalSetup) -> GatePlan {
        GatePlan {
            expected,
            parent_stat: StatPath::new(expected.pid),
            signal: policy.signal,
            reaction: policy.reaction,
            setup,
            lifeline_fd: -1,
            trace: Trace::NONE,
        }
    }

    /// A pidfd (or any descriptor that becomes readable when the expected parent ends) consulted
    /// when `getppid()` cannot tell, and as a second opinion when it can. It must stay open
    /// until the gate has run; it may be close-on-exec.
    pub fn with_lifeline_fd(mut self, fd: RawFd) -> GatePlan {
        self.lifeline_fd = fd;
        self
    }

    /// Qualification hooks (see [`Trace`]).
    pub fn with_trace(mut self, trace: Trace) -> GatePlan {
        self.trace = trace;
        self
    }

    /// The identity the gate compares with.
    pub fn expected(&self) -> Identity {
        self.expected
    }

    /// The signal the gate arms.
    pub fn signal(&self) -> i32 {
        self.signal
    }

    fn lifeline_lost(&self) -> bool {
        if self.lifeline_fd < 0 {
            return false;
        }
        let mut p = libc::pollfd {
            fd: self.lifeline_fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd on the stack, zero timeout.
        let n = unsafe { libc::poll(&mut p, 1, 0) };
        n > 0 && p.revents & (libc::POLLIN | libc::POLLHUP) != 0
    }

    /// Runs the gate in the calling process. Async-signal-safe and allocation-free: callable
    /// between fork and exec. `Ok` means: armed, read back, and the parent is the expected one.
    pub fn run(&self) -> Result<Passage, GateStop> {
        let t = &self.trace;
        t.record(Step::Start, 0, 0);
        let r = self.run_steps();
        match r {
            Ok(_) => t.record(Step::Passed, 0, 0),
            Err(GateStop::ParentGone { ppid, path }) => {
                t.record(Step::ParentGone, ppid, path as i32)
            }
            Err(e) => t.record(Step::Failed, 0, e.encode().1),
        }
        r
    }

    fn run_steps(&self) -> Result<Passage, GateStop> {
        let t = &self.trace;
        let sig = self.signal;
        // Step 2: the signal path.
        // SAFETY: sigemptyset/sigprocmask/sigaction on stack values: async-signal-safe.
        unsafe {
            if self.setup == SignalSetup::ExecDefault {
                let mut empty: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut empty);
                if libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut()) != 0 {
                    return Err(GateStop::SignalPathFailed { errno: errno() });
                }
            }
            if self.reaction != Reaction::Kill && (1..=policy::max_signal()).contains(&sig) {
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, std::ptr::null(), &mut old) != 0 {
                    return Err(GateStop::SignalPathFailed { errno: errno() });
                }
                let reset = match self.setup {
                    SignalSetup::ExecDefault => old.sa_sigaction != libc::SIG_DFL,
                    SignalSetup::Consumed => old.sa_sigaction == libc::SIG_IGN,
                };
                if reset {
                    let mut act: libc::sigaction = std::mem::zeroed();
                    act.sa_sigaction = libc::SIG_DFL;
                    libc::sigemptyset(&mut act.sa_mask);
                    if libc::sigaction(sig, &act, std::ptr::null_mut()) != 0 {
                        return Err(GateStop::SignalPathFailed { errno: errno() });
                    }
                }
            }
        }
        t.record(Step::SignalPath, 0, sig);
        t.barrier(Barrier::BeforeArm);

        // Step 3: arm, check the result, read it back.
        // SAFETY: prctl with integer arguments and a pointer to a stack int.
        unsafe {
            if libc::prctl(libc::PR_SET_PDEATHSIG, sig as libc::c_ulong, 0, 0, 0) != 0 {
                return Err(GateStop::ArmFailed { errno: errno() });
            }
            let mut got: libc::c_int = 0;
            if libc::prctl(
                libc::PR_GET_PDEATHSIG,
                &mut got as *mut libc::c_int,
                0,
                0,
                0,
            ) != 0
            {
                return Err(GateStop::ArmFailed { errno: errno() });
            }
            t.record(Step::Armed, 0, got);
            if got != sig {
                return Err(GateStop::ArmNotKept { got });
            }
        }
        t.barrier(Barrier::BeforeCheck);

        // Step 4: compare the parent with the expected identity.
        // SAFETY: getppid is async-signal-safe.
        let ppid = unsafe { libc::getppid() };
        let passage = if ppid == 0 {
            if self.lifeline_fd < 0 {
                t.record(Step::Checked, ppid, -1);
                return Err(GateStop::CannotTell);
            }
            if self.lifeline_lost() {
                t.record(Step::Checked, ppid, 0);
                return Err(GateStop::ParentGone {
                    ppid,
                    path: DeathPath::Lifeline,
                });
            }
            Passage::Lifeline
        } else if ppid != self.expected.pid {
            t.record(Step::Checked, ppid, 0);
            return Err(GateStop::ParentGone {
                ppid,
                path: DeathPath::Check,
            });
        } else {
            match self.parent_stat.read_start_time() {
                StatRead::StartTime(s) if s == self.expected.start_time => {}
                StatRead::StartTime(_) | StatRead::Gone => {
                    t.record(Step::Checked, ppid, 0);
                    return Err(GateStop::ParentGone {
                        ppid,
                        path: DeathPath::Check,
                    });
                }
                StatRead::Failed(e) => return Err(GateStop::CheckUnreadable { errno: e }),
            }
            if self.lifeline_lost() {
                t.record(Step::Checked, ppid, 0);
                return Err(GateStop::ParentGone {
                    ppid,
                    path: DeathPath::Lifeline,
                });
            }
            Passage::Verified
        };
        t.record(Step::Checked, ppid, 1);
        t.barrier(Barrier::AfterCheck);
        Ok(passage)
    }

    /// Form (a) for `std::process::Command` users: runs the gate in `pre_exec`. A parent-gone
    /// stop ends the child at once with its exit status (nobody may be left to read an error);
    /// any other stop fails the spawn with the errno (`io::Error::from_raw_os_error`), so the
    /// launcher sees it and the target never starts.
    ///
    /// std waits for a child whose spawn failed; a process whose reaper calls `waitpid(-1)`
    /// should launch through [`crate::spawner::Spawner`] instead, which never waits.
    pub fn install(self, cmd: &mut std::process::Command) {
        use std::os::unix::process::CommandExt;
        let plan = self;
        // SAFETY: the closure only runs `GatePlan::run` (async-signal-safe, allocation-free)
        // and `_exit`.
        unsafe {
            cmd.pre_exec(move || match plan.run() {
                Ok(_) => Ok(()),
                Err(stop @ GateStop::ParentGone { .. }) => libc::_exit(stop.exit_status()),
                Err(GateStop::ArmFailed { errno }) | Err(GateStop::SignalPathFailed { errno }) => {
                    Err(io::Error::from_raw_os_error(errno))
                }
                Err(GateStop::CheckUnreadable { errno }) if errno != 0 => {
                    Err(io::Error::from_raw_os_error(errno))
                }
                Err(_) => Err(io::Error::from_raw_os_error(libc::EPROTO)),
            });
        }
    }
}

/// Reads the start time of the calling process from `/proc/self/stat`, without allocating.
pub fn own_start_time() -> Option<u64> {
    let mut buf = [0u8; 1024];
    let path = c"/proc/self/stat";
    // SAFETY: a static NUL-terminated path; the fd is closed below.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    let mut len = 0;
    while len < buf.len() {
        // SAFETY: reads into the remaining part of the stack buffer.
        let n = unsafe { libc::read(fd, buf[len..].as_mut_ptr().cast(), buf.len() - len) };
        if n < 0 && errno() == libc::EINTR {
            continue;
        }
        if n <= 0 {
            break;
        }
        len += n as usize;
    }
    // SAFETY: ours.
    unsafe { libc::close(fd) };
    StatFields::parse(&buf[..len]).ok().map(|f| f.start_time)
}

/// A preallocated `NAME=PID:STARTTIME` environment entry that a freshly forked child fills with
/// its own identity, without allocating (the launcher points `envp` at it before fork).
pub struct IdentitySlot {
    buf: Vec<u8>,
    prefix: usize,
}

impl IdentitySlot {
    /// An empty slot for the variable `name`.
    pub fn new(name: &str) -> IdentitySlot {
        let mut buf = Vec::with_capacity(name.len() + 48);
        buf.extend_from_slice(name.as_bytes());
        buf.push(b'=');
        let prefix = buf.len();
        buf.resize(prefix + 47, 0);
        IdentitySlot { buf, prefix }
    }

    /// The pointer to put into `envp`.
    pub fn as_ptr(&self) -> *const libc::c_char {
        self.buf.as_ptr().cast()
    }

    /// Writes the calling process's identity into the slot. Async-signal-safe.
    pub fn fill_with_self(&mut self) -> bool {
        let Some(start) = own_start_time() else {
            return false;
        };
        // SAFETY: getpid is async-signal-safe.
        let pid = unsafe { libc::getpid() } as u64;
        let mut at = self.prefix;
        at = write_decimal(&mut self.buf, at, pid);
        self.buf[at] = b':';
        at = write_decimal(&mut self.buf, at + 1, start);
        self.buf[at] = 0;
        true
    }

    /// The text after `NAME=` (up to the NUL), for tests and logs.
    pub fn value(&self) -> &[u8] {
        let v = &self.buf[self.prefix..];
        &v[..v.iter().position(|&b| b == 0).unwrap_or(v.len())]
    }
}

fn write_decimal(buf: &mut [u8], at: usize, mut v: u64) -> usize {
    let mut digits = [0u8; 20];
    let mut n = 0;
    loop {
        digits[n] = b'0' + (v % 10) as u8;
        n += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    for i in 0..n {
        buf[at + i] = digits[n - 1 - i];
    }
    at + n
}

/// Why a target program was refused or could not be resolved.
#[derive(Debug)]
pub enum TargetError {
    /// Not found in `PATH` (a name without `/`), or the path does not exist; an empty name
    /// (refused by the callers before any search) shows as "empty program name".
    NotFound(PathBuf),
    /// Exists but is not an executable regular file.
    NotExecutable(PathBuf),
    /// Set-user-ID: its exec would clear the parent-death signal.
    SetUid(PathBuf),
    /// Set-group-ID: its exec would clear the parent-death signal.
    SetGid(PathBuf),
    /// Has file capabilities (`security.capability`): its exec would clear the signal.
    FileCaps(PathBuf),
}

impl TargetError {
    /// The exit status `foster exec` ends with for this error.
    pub fn exit_status(&self) -> i32 {
        match self {
            TargetError::NotFound(_) => EXIT_NOT_FOUND,
            TargetError::NotExecutable(_) => EXIT_NOT_EXECUTABLE,
            _ => EXIT_REFUSED_TARGET,
        }
    }

    /// True for set-user-ID, set-group-ID and file-capability refusals.
    pub fn is_privileged(&self) -> bool {
        matches!(
            self,
            TargetError::SetUid(_) | TargetError::SetGid(_) | TargetError::FileCaps(_)
        )
    }
}

impl fmt::Display for TargetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tail = "its exec would clear the parent-death signal; pass --allow-setid to run it \
                    anyway, unsupervised after exec";
        // Names are escaped: a program name may come from a configuration file.
        let show = |p: &PathBuf| crate::sanitize::escape(p.as_os_str().as_bytes());
        match self {
            TargetError::NotFound(p) if p.as_os_str().is_empty() => {
                write!(f, "empty program name")
            }
            TargetError::NotFound(p) if !p.as_os_str().as_bytes().contains(&b'/') => {
                write!(f, "{}: not found in PATH", show(p))
            }
            TargetError::NotFound(p) => write!(f, "{}: no such file", show(p)),
            TargetError::NotExecutable(p) => {
                write!(f, "{}: not an executable regular file", show(p))
            }
            TargetError::SetUid(p) => write!(f, "{} is set-user-ID: {tail}", show(p)),
            TargetError::SetGid(p) => write!(f, "{} is set-group-ID: {tail}", show(p)),
            TargetError::FileCaps(p) => write!(f, "{} has file capabilities: {tail}", show(p)),
        }
    }
}

impl std::error::Error for TargetError {}

/// Resolves `program` like `execvp` does (a name without `/` is searched in `PATH`).
pub fn resolve_program(program: &Path) -> Result<PathBuf, TargetError> {
    if program.as_os_str().as_bytes().contains(&b'/') {
        return if program.exists() {
            Ok(program.to_path_buf())
        } else {
            Err(TargetError::NotFound(program.to_path_buf()))
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    let mut not_exec = None;
    for dir in std::env::split_paths(&path) {
        let cand = dir.join(program);
        if let Ok(m) = std::fs::metadata(&cand) {
            if m.is_file() && m.mode() & 0o111 != 0 {
                return Ok(cand);
            }
            not_exec.get_or_insert(cand);
        }
    }
    match not_exec {
        Some(p) => Err(TargetError::NotExecutable(p)),
        None => Err(TargetError::NotFound(program.to_path_buf())),
    }
}

/// Checks a resolved target: an executable regular file, neither set-user-ID, set-group-ID nor
/// carrying file capabilities (any of which makes exec clear `PR_SET_PDEATHSIG`).
pub fn check_target(path: &Path) -> Result<(), TargetError> {
    let m = std::fs::metadata(path).map_err(|_| TargetError::NotFound(path.to_path_buf()))?;
    if !m.is_file() || m.mode() & 0o111 == 0 {
        return Err(TargetError::NotExecutable(path.to_path_buf()));
    }
    if m.mode() & libc::S_ISUID != 0 {
        return Err(TargetError::SetUid(path.to_path_buf()));
    }
    if m.mode() & libc::S_ISGID != 0 && m.mode() & 0o010 != 0 {
        return Err(TargetError::SetGid(path.to_path_buf()));
    }
    if has_file_caps(path) {
        return Err(TargetError::FileCaps(path.to_path_buf()));
    }
    Ok(())
}

fn has_file_caps(path: &Path) -> bool {
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: a size query (null buffer) of one attribute of a NUL-terminated path.
    let n = unsafe {
        libc::getxattr(
            c.as_ptr(),
            c"security.capability".as_ptr(),
            std::ptr::null_mut(),
            0,
        )
    };
    n > 0
}

/// What a process expects of its parent: read from the environment by [`Expectation::from_env`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expectation {
    /// The identity the parent must have.
    pub parent: Identity,
    /// This process's policy chain (its own generation first).
    pub policy: Policy,
}

/// The environment did not say what to expect; the text names the variable and the problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvError(pub String);

impl fmt::Display for EnvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for EnvError {}

impl Expectation {
    /// Reads `FOSTER_PARENT` and `FOSTER_POLICY` (or, when `FOSTER_PARENT` names this very
    /// process, i.e. foster already gated it, `FOSTER_GATED`). `default_policy` is used when no
    /// policy variable is set.
    pub fn from_env(default_policy: Option<&Policy>) -> Result<Expectation, EnvError> {
        let var = |name: &str| -> Result<Option<String>, EnvError> {
            match std::env::var(name) {
                Ok(v) => Ok(Some(v)),
                Err(std::env::VarError::NotPresent) => Ok(None),
                Err(std::env::VarError::NotUnicode(_)) => {
                    Err(EnvError(format!("{name} is not valid text")))
                }
            }
        };
        let me = Identity::current().map_err(|e| EnvError(format!("own identity: {e}")))?;
        let parent_text = var(ENV_PARENT)?.ok_or_else(|| {
            EnvError(format!(
                "{ENV_PARENT} is not set: the launcher must say which parent to expect \
                 ({ENV_PARENT}=$(foster identity $$), or --parent PID:STARTTIME)"
            ))
        })?;
        let parent: Identity = parent_text
            .parse()
            .map_err(|e| EnvError(format!("{ENV_PARENT}: {e}")))?;
        if parent == me {
            let gated = var(ENV_GATED)?.ok_or_else(|| {
                EnvError(format!(
                    "{ENV_PARENT} ({parent}) names this process itself, and {ENV_GATED} is not \
                     set: the shell that took its own identity ran this command in its own \
                     place (the last command of `sh -c` or `bash -c`, or `exec`), so that shell \
                     is not its parent; run it as a child instead (`... foster exec -- PROGRAM \
                     & wait $!`)"
                ))
            })?;
            let (p, chain) = gated.split_once(';').ok_or_else(|| {
                EnvError(format!(
                    "{ENV_GATED} {gated:?}: expected PID:STARTTIME;POLICY"
                ))
            })?;
            let parent = p
                .parse()
                .map_err(|e| EnvError(format!("{ENV_GATED}: {e}")))?;
            let policy = chain
                .parse()
                .map_err(|e| EnvError(format!("{ENV_GATED}: {e}")))?;
            return Ok(Expectation { parent, policy });
        }
        let policy = match var(ENV_POLICY)? {
            Some(t) => t
                .parse()
                .map_err(|e| EnvError(format!("{ENV_POLICY}: {e}")))?,
            None => default_policy.cloned().ok_or_else(|| {
                EnvError(format!("{ENV_POLICY} is not set and no policy was given"))
            })?,
        };
        Ok(Expectation { parent, policy })
    }
}

/// The environment a gated process passes on: `FOSTER_PARENT` = itself, `FOSTER_POLICY` = the
/// next generation's chain (removed when there is none), `FOSTER_GATED` = what it was checked
/// against. Returned as (name, value-or-None-to-remove).
pub fn env_for_children(
    me: Identity,
    expected: Identity,
    policy: &Policy,
) -> Vec<(String, Option<String>)> {
    vec![
        (ENV_PARENT.into(), Some(me.to_string())),
        (
            ENV_POLICY.into(),
            policy.next.as_ref().map(|n| n.to_string()),
        ),
        (ENV_GATED.into(), Some(format!("{expected};{policy}"))),
    ]
}

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
#[derive(Debug)]
pub enum EnterError {
    /// The environment did not say what to expect.
    Env(EnvError),
    /// The gate stopped (parent gone, prctl failed...).
    Stop(GateStop),
    /// Setting up the consumer (signalfd, thread) or the lifeline failed.
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

impl fmt::Display for EnterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EnterError::Env(e) => write!(f, "{e}"),
            EnterError::Stop(s) => write!(f, "{s}"),
            EnterError::Setup(s) => write!(f, "{s}"),
        }
    }
}

impl std::error::Error for EnterError {}

/// Form (b): the in-process gate a Rust helper calls first thing in `main`, before it starts
/// any thread (the signal must be blocked in every thread, and threads inherit the mask of the
/// thread that creates them).
///
/// It reads the expectation from the environment, blocks the policy's signal and opens a
/// signalfd for it (the one synchronous consumer), runs [`GatePlan::run`], opens the lifeline
/// (a pidfd of the expected parent, identity re-checked) and starts one watcher thread that
/// polls both. A delivered signal is checked against the expected identity first: if the
/// parent process is still the expected one (a thread of it exited), it is counted as a false
/// alarm and ignored. On a real loss the watcher requests shutdown (closing admission); with
/// `exit` it then owns shutdown, waits for in-flight guards up to the grace and exits the
/// process (status 128+signal for the signal path, [`EXIT_LIFELINE`] for the lifeline); with
/// `notify` it sends a [`Loss`] to the program, which owns shutdown.
pub fn enter(default_policy: Option<&Policy>) -> Result<Gated, EnterError> {
    let expectation = Expectation::from_env(default_policy).map_err(EnterError::Env)?;
    enter_with(expectation)
}

/// [`enter`] with an explicit expectation instead of the environment.
pub fn enter_with(expectation: Expectation) -> Result<Gated, EnterError> {
    let policy = expectation.policy.clone();
    let sig = policy.signal;
    let consumed = policy.reaction != Reaction::Kill;
    let mut sfd: Option<OwnedFd> = None;
    if consumed {
        // SAFETY: a sigset on the stack; pthread_sigmask on the calling thread.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            if libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
                return Err(EnterError::Setup("cannot block the policy signal".into()));
            }
            let fd = libc::signalfd(-1, &set, libc::SFD_CLOEXEC);
            if fd < 0 {
                return Err(EnterError::Setup(format!(
                    "signalfd: {}",
                    io::Error::last_os_error()
                )));
            }
            sfd = Some(OwnedFd::from_raw_fd(fd));
        }
    }
    let setup = if consumed {
        SignalSetup::Consumed
    } else {
        SignalSetup::ExecDefault
    };
    let plan = GatePlan::new(expectation.parent, &policy, setup);
    plan.run().map_err(EnterError::Stop)?;
    let lifeline = Lifeline::open(expectation.parent).map_err(|e| match e {
        crate::lifeline::LifelineError::Gone(_) => EnterError::Stop(GateStop::ParentGone {
            ppid: nix::unistd::getppid().as_raw(),
            path: DeathPath::Lifeline,
        }),
        e => EnterError::Setup(e.to_string()),
    })?;
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
    sfd: Option<OwnedFd>,
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
                libc::pollfd {
                    fd: self.lifeline.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: self.sfd.as_ref().map_or(-1, |f| f.as_raw_fd()),
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            // SAFETY: two pollfds on the stack; an fd of -1 is ignored by poll.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
            if n < 0 {
                continue;
            }
            if fds[1].revents & libc::POLLIN != 0 {
                let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
                let fd = self.sfd.as_ref().expect("polled").as_raw_fd();
                // SAFETY: reads one siginfo into a stack struct of the right size.
                unsafe {
                    libc::read(
                        fd,
                        (&mut info as *mut libc::signalfd_siginfo).cast(),
                        size_of::<libc::signalfd_siginfo>(),
                    )
                };
                if self.parent_still_expected() && !self.lifeline.is_lost() {
                    self.false_alarms.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(
                        "parent-death signal from pid {} but the parent {} still lives: a thread of it \
                         exited; ignored",
                        info.ssi_pid,
                        self.expected
                    );
                    continue;
                }
                break DeathPath::Signal;
            }
            if fds[0].revents != 0 {
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

#[cfg(test)]
mod tests {
    use super::*;

    use std::ffi::CStr;

    #[test]
    fn identity_slot_fills_with_self() {
        let mut s = IdentitySlot::new("FOSTER_PARENT");
        assert!(s.fill_with_self());
        let me = Identity::current().unwrap();
        assert_eq!(s.value(), me.to_string().as_bytes());
        let c = unsafe { CStr::from_ptr(s.as_ptr()) };
        assert_eq!(c.to_bytes(), format!("FOSTER_PARENT={me}").as_bytes());
    }

    #[test]
    fn stop_round_trips_and_maps_to_statuses() {
        for s in [
            GateStop::ParentGone {
                ppid: 7,
                path: DeathPath::Check,
            },
            GateStop::ParentGone {
                ppid: 0,
                path: DeathPath::Lifeline,
            },
            GateStop::CannotTell,
            GateStop::ArmFailed {
                errno: libc::EINVAL,
            },
            GateStop::ArmNotKept { got: 0 },
            GateStop::SignalPathFailed { errno: 1 },
            GateStop::CheckUnreadable { errno: 13 },
        ] {
            let (k, v) = s.encode();
            assert_eq!(GateStop::decode(k, v), Some(s));
        }
        assert_eq!(GateStop::CannotTell.exit_status(), EXIT_CANNOT_TELL);
        assert_eq!(
            GateStop::ArmFailed { errno: 22 }.exit_status(),
            EXIT_ARM_FAILED
        );
        assert!(
            GateStop::ArmFailed { errno: 22 }
                .to_string()
                .contains("Invalid argument")
        );
    }

    #[test]
    fn trace_record_wire_form() {
        let r = TraceRecord {
            step: Step::Armed as u32,
            pid: 10,
            ppid: 9,
            value: 15,
        };
        assert_eq!(TraceRecord::decode(&r.encode()), r);
        assert_eq!(r.step(), Some(Step::Armed));
    }

    #[test]
    fn targets_are_checked() {
        assert!(
            check_target(Path::new("/bin/true")).is_ok()
                || check_target(Path::new("/usr/bin/true")).is_ok()
        );
        assert!(matches!(
            resolve_program(Path::new("no-such-program-xyz")),
            Err(TargetError::NotFound(_))
        ));
        assert!(matches!(
            check_target(Path::new("/proc/self/stat")),
            Err(TargetError::NotExecutable(_))
        ));
        let su = Path::new("/usr/bin/su");
        if su.exists() {
            let e = check_target(su).unwrap_err();
            assert!(e.is_privileged());
            assert!(e.to_string().contains("set-user-ID"), "{e}");
            assert_eq!(e.exit_status(), EXIT_REFUSED_TARGET);
        }
    }
}
