//! The code of the gate that runs between fork and exec, and nothing else: audit this file
//! alone.
//!
//! Owns [`GatePlan`] (built by the launcher before fork; [`GatePlan::run`] runs in the child, or
//! in-process), the child side of the qualification hooks ([`Trace`]), and the
//! [`IdentitySlot`] a freshly forked child fills with its own identity. Everything here that
//! runs in a child makes raw syscalls on data prepared before fork: no allocation, no lock,
//! async-signal-safe, and panic-free (no indexing but `get`, checked arithmetic: a panic in a
//! child sharing the launcher's memory would unwind on its heap). [`GatePlan::install`] hands
//! the same procedure to a `std::process::Command`.
//!
//! The procedure that closes the parent-death startup race is [`GatePlan`]'s.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use super::trace::{Barrier, Step, TraceRecord};
use super::{DeathPath, GateStop, Passage};
use crate::base::sys::{PollFd, errno, poll};
use crate::gate::policy::{Policy, Reaction};
use crate::process::identity::{Identity, StatPath, StatRead};
use crate::process::procstat::StatFields;
use crate::process::signal::Sig;

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
        let rec = TraceRecord {
            step: step as u32,
            // SAFETY: getpid has no preconditions and is async-signal-safe.
            pid: unsafe { libc::getpid() },
            ppid,
            value,
        };
        let b = rec.encode();
        // SAFETY: writes `b`, a live stack buffer, to the trace descriptor; async-signal-safe.
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
            if n < 0 && errno() == libc::EINTR {
                continue;
            }
            return;
        }
    }
}

/// How the gate sets up the signal path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SignalSetup {
    /// Before exec: the signal unblocked (the rest of the mask is the launcher's to set: the
    /// spawner sets the program's whole signal state after the gate) and its disposition reset
    /// to default, since exec keeps "ignore" but drops handlers. A process that is PID 1 of its
    /// PID namespace is refused (but for SIGKILL): the kernel would discard the signal.
    ExecDefault,
    /// In-process (the in-process gate, `foster exec --watch`): the caller's mask is left as it
    /// is, whatever the reaction. The caller has blocked the signal and consumes it
    /// synchronously (signalfd); the gate only makes sure its disposition is not "ignore" (an
    /// ignored signal is discarded even while blocked). SIGKILL (reaction `kill`) can be neither
    /// blocked nor ignored: nothing to set up.
    Consumed,
}

/// Everything the gate needs, computed before fork: running it allocates nothing.
///
///
/// The ordered procedure that closes the parent-death startup race:
///
/// 1. the launcher records the expected parent identity **before** fork ([`GatePlan::new`]);
/// 2. the child establishes its signal path: the chosen signal unblocked (or blocked and consumed
///    by a synchronous consumer, in-process), its disposition not "ignore";
/// 3. `prctl(PR_SET_PDEATHSIG, sig)`, checked, then read back with `PR_GET_PDEATHSIG`; before
///    an exec, refused when the signal could never arrive (the process is PID 1 of its PID
///    namespace, and the signal is not SIGKILL: [`GateStop::NamespaceInit`]);
/// 4. `getppid()` and the parent's start time compared with the expected identity;
/// 5. on a mismatch the parent-gone path at once: the target never starts;
/// 6. on a match, on under the armed policy. `getppid() == 0` (the parent lives in another PID
///    namespace) is "cannot tell": the lifeline decides, and without one the gate refuses.
#[derive(Debug)]
pub struct GatePlan {
    expected: Identity,
    parent_stat: StatPath,
    signal: i32,
    reaction: Reaction,
    setup: SignalSetup,
    lifeline_fd: RawFd,
    /// The lifeline is a pidfd of the expected process itself (see [`GatePlan::with_own_pidfd`]).
    lifeline_is_expected: bool,
    trace: Trace,
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
            lifeline_is_expected: false,
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

    /// A lifeline that is a pidfd the expected process opened of itself (`pidfd_open(getpid())`),
    /// so that it cannot name another process. While it is not readable that process has not
    /// ended, so its pid is nobody else's: a `getppid()` equal to it, read before the look at
    /// the pidfd, is the expected parent, and the gate skips reading the parent's start time.
    pub fn with_own_pidfd(mut self, fd: RawFd) -> GatePlan {
        self.lifeline_fd = fd;
        self.lifeline_is_expected = true;
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
        self.look_at_lifeline() == Some(true)
    }

    /// A look at the lifeline without waiting: `Some(true)` when its process ended,
    /// `Some(false)` when the look found nothing (it lives), `None` without a lifeline or when
    /// the look failed. No clock read, no allocation (this runs in the child).
    fn look_at_lifeline(&self) -> Option<bool> {
        if self.lifeline_fd < 0 {
            return None;
        }
        let mut p = [PollFd::input(self.lifeline_fd)];
        match poll(&mut p, Some(Duration::ZERO)) {
            Ok(0) => Some(false),
            Ok(_) if p[0].has_input() || p[0].hung_up() => Some(true),
            _ => None,
        }
    }

    /// Whether the parent, whose pid `getppid()` gave as the expected one, has the expected
    /// start time.
    #[inline]
    fn same_start_time(&self) -> Result<bool, GateStop> {
        match self.parent_stat.read_start_time() {
            StatRead::StartTime(s) => Ok(s == self.expected.start_time),
            StatRead::Gone => Ok(false),
            StatRead::Failed(e) => Err(GateStop::CheckUnreadable { errno: e }),
        }
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

    /// The gate's steps 2 to 4, each an `#[inline]` piece that keeps [`GatePlan::run`]'s
    /// rules (async-signal-safe, no allocation, no panic).
    fn run_steps(&self) -> Result<Passage, GateStop> {
        let t = &self.trace;
        self.signal_path()?;
        t.record(Step::SignalPath, 0, self.signal);
        t.barrier(Barrier::BeforeArm);
        self.arm()?;
        t.barrier(Barrier::BeforeCheck);
        let passage = self.check_parent()?;
        t.barrier(Barrier::AfterCheck);
        Ok(passage)
    }

    /// Step 2: the signal path: at a disposition that lets it end the process, then unblocked
    /// (in that order: a handler of the launcher's never runs in the child).
    #[inline]
    fn signal_path(&self) -> Result<(), GateStop> {
        let sig = self.signal;
        // SAFETY: sigemptyset/sigprocmask/sigaction on stack values: async-signal-safe.
        unsafe {
            if self.reaction != Reaction::Kill && (1..=Sig::max()).contains(&sig) {
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
            if self.setup == SignalSetup::ExecDefault && (1..=Sig::max()).contains(&sig) {
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut set);
                libc::sigaddset(&mut set, sig);
                if libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut()) != 0 {
                    return Err(GateStop::SignalPathFailed { errno: errno() });
                }
            }
        }
        Ok(())
    }

    /// Step 3: arm, check the result, read it back.
    #[inline]
    fn arm(&self) -> Result<(), GateStop> {
        let sig = self.signal;
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
            self.trace.record(Step::Armed, 0, got);
            if got != sig {
                return Err(GateStop::ArmNotKept { got });
            }
            // Armed, but could it arrive? The kernel discards a signal at its default
            // disposition sent to the init of a PID namespace (SIGKILL from an ancestor
            // namespace aside, and a parent always lives in one), and after exec the signal is
            // at its default: a program that is PID 1 would be armed in name only. (Consumed
            // in-process, the signal is blocked, and a blocked signal is queued.)
            if self.setup == SignalSetup::ExecDefault && sig != libc::SIGKILL && libc::getpid() == 1
            {
                return Err(GateStop::NamespaceInit { signal: sig });
            }
        }
        Ok(())
    }

    /// Step 4: compare the parent with the expected identity (the lifeline when `getppid`
    /// cannot tell).
    #[inline]
    fn check_parent(&self) -> Result<Passage, GateStop> {
        let t = &self.trace;
        // SAFETY: getppid is async-signal-safe.
        let ppid = unsafe { libc::getppid() };
        let gone = |path| {
            t.record(Step::Checked, ppid, 0);
            Err(GateStop::ParentGone { ppid, path })
        };
        let passage = if ppid == 0 {
            if self.lifeline_fd < 0 {
                t.record(Step::Checked, ppid, -1);
                return Err(GateStop::CannotTell);
            }
            if self.lifeline_lost() {
                return gone(DeathPath::Lifeline);
            }
            Passage::Lifeline
        } else if ppid != self.expected.pid {
            return gone(DeathPath::Check);
        } else {
            // The expected process's own pidfd, looked at once after getppid(): still not
            // readable, the pid is still its own, and nothing is left to check.
            let proven = self.lifeline_is_expected && self.look_at_lifeline() == Some(false);
            if !proven && !self.same_start_time()? {
                return gone(DeathPath::Check);
            }
            if !proven && self.lifeline_lost() {
                return gone(DeathPath::Lifeline);
            }
            Passage::Verified
        };
        t.record(Step::Checked, ppid, 1);
        Ok(passage)
    }

    /// Form (a) for `std::process::Command` users: runs the gate in `pre_exec`. A parent-gone
    /// stop ends the child at once with its exit status (nobody may be left to read an error);
    /// any other stop fails the spawn with the errno (`io::Error::from_raw_os_error`), so the
    /// launcher sees it and the target never starts.
    ///
    /// std waits for a child whose spawn failed; a process whose reaper calls `waitpid(-1)`
    /// should launch through [`crate::gate::spawner::Spawner`] instead, which never waits.
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

/// A new process's start time told without `/proc` when it can be. The kernel stamps it
/// during `clone` (`/proc/PID/stat`'s field 22: `CLOCK_BOOTTIME` in clock ticks); a reading of
/// that clock just before the clone ([`BirthClock::before_clone`]) and one the child takes
/// first ([`BirthClock::start_time`]) bracket the stamp: when both fall in the same tick, that
/// tick is the start time. Otherwise (about one launch in 200 with 10 ms ticks) the child
/// reads `/proc/self/stat`, which costs it more than the rest of its gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BirthClock {
    tick_ns: u64,
    before: u64,
}

impl BirthClock {
    /// The tick the clock is in now, before a clone; `None` when a tick is not a whole number
    /// of nanoseconds (the kernel then rounds otherwise) or the clock cannot be read.
    pub fn before_clone() -> Option<BirthClock> {
        // SAFETY: sysconf has no preconditions (glibc answers this one from the auxiliary vector).
        let hz = u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) }).ok()?;
        let tick_ns = 1_000_000_000u64.checked_div(hz)?;
        if tick_ns.checked_mul(hz)? != 1_000_000_000 {
            return None;
        }
        Some(BirthClock {
            tick_ns,
            before: boottime_ns()?.checked_div(tick_ns)?,
        })
    }

    /// In the child: its start time, when the clock is still in the tick it was in before the
    /// clone. Async-signal-safe and panic-free.
    pub fn start_time(&self) -> Option<u64> {
        self.same_tick(boottime_ns()?)
    }

    /// The tick of `now_ns` when it is the one before the clone.
    fn same_tick(&self, now_ns: u64) -> Option<u64> {
        let now = now_ns.checked_div(self.tick_ns)?;
        (now == self.before).then_some(now)
    }
}

/// `CLOCK_BOOTTIME` in nanoseconds (`clock_gettime` is async-signal-safe).
fn boottime_ns() -> Option<u64> {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the stack value it is given.
    if unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut t) } != 0 {
        return None;
    }
    let secs = u64::try_from(t.tv_sec).ok()?;
    secs.checked_mul(1_000_000_000)?
        .checked_add(u64::try_from(t.tv_nsec).ok()?)
}

/// Reads the start time of the calling process from `/proc/self/stat`, without allocating.
pub fn own_start_time() -> Option<u64> {
    let mut buf = [0u8; 1024];
    let len = crate::process::identity::read_into(c"/proc/self/stat", &mut buf).ok()?;
    StatFields::parse(buf.get(..len)?)
        .ok()
        .map(|f| f.start_time)
}

/// A preallocated `NAME=PID:STARTTIME` environment entry that a freshly forked child fills with
/// its own identity, without allocating (the launcher points `envp` at it before fork); or
/// `NAME=PID` alone ([`IdentitySlot::fill_with_pid`], systemd's `WATCHDOG_PID`).
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

    /// Writes the calling process's identity into the slot: its start time when the caller
    /// knows it ([`BirthClock`]), else read from `/proc/self/stat`. Async-signal-safe and
    /// panic-free; false when the start time cannot be read.
    pub fn fill_with_self(&mut self, known_start: Option<u64>) -> bool {
        let Some(start) = known_start.or_else(own_start_time) else {
            return false;
        };
        // SAFETY: getpid is async-signal-safe.
        let pid = unsafe { libc::getpid() }.unsigned_abs();
        self.fill(&[u64::from(pid), start])
    }

    /// Writes the calling process's pid alone into the slot. Async-signal-safe and panic-free.
    pub fn fill_with_pid(&mut self) -> bool {
        // SAFETY: getpid is async-signal-safe.
        let pid = unsafe { libc::getpid() }.unsigned_abs();
        self.fill(&[u64::from(pid)])
    }

    /// Writes `numbers` after `NAME=`, joined by `:`, then the NUL; false when they do not fit
    /// (47 bytes hold two numbers of 20 digits, their `:` and the NUL: they always do).
    fn fill(&mut self, numbers: &[u64]) -> bool {
        let mut at = Some(self.prefix);
        for (i, &n) in numbers.iter().enumerate() {
            if i > 0 {
                at = at.and_then(|a| put(&mut self.buf, a, b":"));
            }
            at = at.and_then(|a| write_decimal(&mut self.buf, a, n));
        }
        at.and_then(|a| put(&mut self.buf, a, &[0])).is_some()
    }

    /// The text after `NAME=` (up to the NUL), for tests and logs.
    pub fn value(&self) -> &[u8] {
        let v = &self.buf[self.prefix..];
        &v[..v.iter().position(|&b| b == 0).unwrap_or(v.len())]
    }
}

/// Copies `bytes` into `buf` at `at`; the index after them, `None` when they do not fit.
fn put(buf: &mut [u8], at: usize, bytes: &[u8]) -> Option<usize> {
    let end = at.checked_add(bytes.len())?;
    // The two lengths are equal: `copy_from_slice` cannot panic.
    buf.get_mut(at..end)?.copy_from_slice(bytes);
    Some(end)
}

/// Writes `v` in decimal into `buf` at `at`; the index after it, `None` when it does not fit.
/// Panic-free: a `u64` has at most 20 digits, each `b'0' + v % 10` is at most `b'9'`.
fn write_decimal(buf: &mut [u8], at: usize, mut v: u64) -> Option<usize> {
    let mut digits = [0u8; 20];
    let mut start = digits.len();
    loop {
        start = start.checked_sub(1)?;
        *digits.get_mut(start)? = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    put(buf, at, digits.get(start..)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::ffi::CStr;

    /// The child between fork and exec cannot panic: a number that does not fit is refused.
    #[test]
    fn numbers_that_do_not_fit_are_refused_not_a_panic() {
        let mut small = [0u8; 4];
        assert_eq!(write_decimal(&mut small, 0, 1234), Some(4));
        assert_eq!(&small, b"1234");
        assert_eq!(write_decimal(&mut small, 1, 1234), None);
        assert_eq!(write_decimal(&mut small, usize::MAX, 1), None);
        let mut s = IdentitySlot::new("X");
        assert!(s.fill(&[u64::MAX, u64::MAX]));
        assert_eq!(s.value(), format!("{}:{}", u64::MAX, u64::MAX).as_bytes());
        assert!(!s.fill(&[u64::MAX, u64::MAX, u64::MAX]));
    }

    /// The clock tells a start time only within the tick it was in before the clone.
    #[test]
    fn the_birth_clock_answers_within_its_tick_only() {
        let b = BirthClock::before_clone().expect("a clock in whole nanosecond ticks");
        let start = b.before * b.tick_ns;
        assert_eq!(b.same_tick(start), Some(b.before));
        assert_eq!(b.same_tick(start + b.tick_ns - 1), Some(b.before));
        assert_eq!(b.same_tick(start + b.tick_ns), None);
        assert_eq!(b.same_tick(start - 1), None);
        // This process was started in an earlier tick than now, in the same clock.
        assert!(own_start_time().unwrap() <= b.before);
    }

    #[test]
    fn identity_slot_fills_with_self() {
        let mut s = IdentitySlot::new("FOSTER_PARENT");
        assert!(s.fill_with_self(None));
        let me = Identity::current().unwrap();
        assert_eq!(s.value(), me.to_string().as_bytes());
        // SAFETY: the slot holds a NUL-terminated string (fill_with_self wrote it) that outlives
        // `c`.
        let c = unsafe { CStr::from_ptr(s.as_ptr()) };
        assert_eq!(c.to_bytes(), format!("FOSTER_PARENT={me}").as_bytes());
    }
}
