//! Signals: the one vocabulary of signal names, numbers and default actions.
//!
//! Owns [`Sig`], any signal Linux can deliver (1 to `SIGRTMAX`): every command reads a signal
//! with [`Sig::parse`] and writes it with [`Sig`]'s `Display`, in text and in JSON alike; what
//! a signal does by default ([`Sig::default_action`], [`Sig::ending`]).
//!
//! Also sets of signals ([`SigBits`], [`block`]), [`SignalFd`], the one signalfd, the signal
//! state foster was started with ([`Inherited`]), and signals 32 and 33 ([`LIBC_RESERVED`],
//! [`ignore_reserved`]).

use std::fmt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use nix::sys::signal::Signal;
use serde::{Deserialize, Deserializer, Serialize, Serializer, de};

/// A signal Linux can deliver: a number from 1 to [`Sig::max`].
///
/// Owns [`Sig`], any signal Linux can deliver (1 to `SIGRTMAX`): the standard ones of
/// [`nix::sys::signal::Signal`] (whose table of names is the only one foster uses) and the
/// real-time range. Every command reads a signal with [`Sig::parse`] and writes it with
/// [`Sig`]'s `Display`, in text and in JSON alike:
///
/// - read: a name with or without `SIG`, in any case (`TERM`, `SIGterm`, `IOT`, `POLL`),
///   `RTMIN`, `RTMIN+N`, `RTMAX`, `RTMAX-N`, or a decimal number;
/// - written: `SIGTERM`, `SIGRTMIN`, `SIGRTMIN+N`; a number without a name (32 and 33, which
///   the C library keeps for itself) as its decimal number, which reads back as the same signal.
///
/// Also owns what a signal does by default ([`Sig::default_action`]), and from it the rule for
/// parent-death and orphan signals ([`Sig::ending`]: the signal must end a process that does not
/// handle it). Sending is not restricted: `foster ctl signal` and the dashboard send any signal,
/// `STOP` and `CONT` included.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sig(i32);

/// What the kernel does with a signal nobody handles (`man 7 signal`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DefaultAction {
    /// The process ends.
    Terminate,
    /// The process ends with a core dump.
    Core,
    /// The process stops.
    Stop,
    /// A stopped process goes on (and a running one ignores it).
    Continue,
    /// Nothing happens.
    Ignore,
}

/// A signal could not be read, or cannot serve where it was given; the text says why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignalError {
    /// The text names no signal.
    #[error(
        "unknown signal {0:?}: expected a name such as TERM, SIGTERM, HUP, KILL, USR1, RTMIN+3, \
         or a number from 1 to {max}",
        max = Sig::max()
    )]
    Unknown(String),
    /// A number outside 1 to `SIGRTMAX`.
    #[error("signal {0:?}: not a signal number (1 to {max})", max = Sig::max())]
    OutOfRange(String),
    /// `RTMIN+N` or `RTMAX-N` with `N` past the real-time range.
    #[error(
        "signal {0:?}: expected RTMIN+N or RTMAX-N with N from 0 to {width}",
        width = Sig::max() - libc::SIGRTMIN()
    )]
    RealTime(String),
    /// The signal does not end a process, so it cannot be a parent-death or orphan signal.
    #[error(
        "{0} cannot be a parent-death or orphan signal: {why}; choose one whose default \
         action ends a process, such as TERM, HUP, INT, USR1 or KILL",
        why = not_ending_why(*.0)
    )]
    NotEnding(Sig),
}

/// `text` as an error quotes it: at most 32 characters (an error names what was wrong, it does
/// not echo a whole input back).
fn shown(text: &str) -> String {
    match text.char_indices().nth(32) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

fn not_ending_why(sig: Sig) -> &'static str {
    match sig.default_action() {
        DefaultAction::Stop => {
            "it stops the process instead of ending it: the process would stay in the tree, \
             stopped, until something sent it SIGKILL"
        }
        _ => "it is ignored by default: a process that does not handle it would go on running",
    }
}

impl Sig {
    pub const HUP: Sig = Sig::of(Signal::SIGHUP);
    pub const INT: Sig = Sig::of(Signal::SIGINT);
    pub const QUIT: Sig = Sig::of(Signal::SIGQUIT);
    pub const KILL: Sig = Sig::of(Signal::SIGKILL);
    pub const USR1: Sig = Sig::of(Signal::SIGUSR1);
    pub const USR2: Sig = Sig::of(Signal::SIGUSR2);
    pub const TERM: Sig = Sig::of(Signal::SIGTERM);
    pub const CHLD: Sig = Sig::of(Signal::SIGCHLD);
    pub const CONT: Sig = Sig::of(Signal::SIGCONT);
    pub const STOP: Sig = Sig::of(Signal::SIGSTOP);

    /// A standard signal.
    pub const fn of(s: Signal) -> Sig {
        Sig(s as i32)
    }

    /// The signal numbered `n`, when Linux can deliver one with that number.
    pub fn new(n: i32) -> Option<Sig> {
        (1..=Sig::max()).contains(&n).then_some(Sig(n))
    }

    /// The highest signal number (`SIGRTMAX`).
    pub fn max() -> i32 {
        libc::SIGRTMAX()
    }

    /// The signal's number.
    pub const fn number(self) -> i32 {
        self.0
    }

    /// The standard signal, or `None` for a real-time one (and 32, 33).
    pub fn nix(self) -> Option<Signal> {
        Signal::try_from(self.0).ok()
    }

    /// Every signal with a standard name, in number order.
    pub fn standard() -> impl Iterator<Item = Sig> {
        (1..libc::SIGRTMIN()).filter_map(|n| Signal::try_from(n).ok().map(Sig::of))
    }

    /// Reads the forms of the module docs: a name with or without `SIG` in any case, `RTMIN+N`,
    /// `RTMAX-N`, or a number. Any signal Linux can deliver is accepted; callers that need one
    /// that ends a process add [`Sig::ending`].
    pub fn parse(text: &str) -> Result<Sig, SignalError> {
        let t = text.trim();
        if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
            return t
                .parse::<i32>()
                .ok()
                .and_then(Sig::new)
                .ok_or_else(|| SignalError::OutOfRange(shown(text)));
        }
        if t.len() > 16 {
            return Err(SignalError::Unknown(shown(text)));
        }
        let up = t.to_ascii_uppercase();
        let name = up.strip_prefix("SIG").unwrap_or(&up);
        let (min, max) = (libc::SIGRTMIN(), Sig::max());
        let rt = |rest: &str, sign: char| -> Result<i32, SignalError> {
            if rest.is_empty() {
                return Ok(0);
            }
            rest.strip_prefix(sign)
                .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|d| d.parse::<i32>().ok())
                .filter(|n| (0..=max - min).contains(n))
                .ok_or_else(|| SignalError::RealTime(shown(text)))
        };
        match name {
            "IOT" => Ok(Sig::of(Signal::SIGABRT)),
            "POLL" => Ok(Sig::of(Signal::SIGIO)),
            _ if name.starts_with("RTMIN") => Ok(Sig(min + rt(&name[5..], '+')?)),
            _ if name.starts_with("RTMAX") => Ok(Sig(max - rt(&name[5..], '-')?)),
            _ => Signal::from_str(&format!("SIG{name}"))
                .map(Sig::of)
                .map_err(|_| SignalError::Unknown(shown(text))),
        }
    }

    /// What the kernel does with this signal when the process does not handle it.
    pub fn default_action(self) -> DefaultAction {
        use Signal::*;
        match self.nix() {
            Some(
                SIGQUIT | SIGILL | SIGTRAP | SIGABRT | SIGBUS | SIGFPE | SIGSEGV | SIGXCPU
                | SIGXFSZ | SIGSYS,
            ) => DefaultAction::Core,
            Some(SIGSTOP | SIGTSTP | SIGTTIN | SIGTTOU) => DefaultAction::Stop,
            Some(SIGCONT) => DefaultAction::Continue,
            Some(SIGCHLD | SIGURG | SIGWINCH) => DefaultAction::Ignore,
            _ => DefaultAction::Terminate,
        }
    }

    /// Whether the signal stops a process that does not handle it (`STOP`, `TSTP`, `TTIN`,
    /// `TTOU`).
    pub fn stops(self) -> bool {
        self.default_action() == DefaultAction::Stop
    }

    /// `Ok` when the signal can be a parent-death or orphan signal: its default action ends a
    /// process (`STOP`, `TSTP`, `TTIN`, `TTOU` would leave it stopped in the tree; `CHLD`,
    /// `CONT`, `URG` and `WINCH` are ignored by default, so it would go on running).
    pub fn ending(self) -> Result<Sig, SignalError> {
        match self.default_action() {
            DefaultAction::Terminate | DefaultAction::Core => Ok(self),
            _ => Err(SignalError::NotEnding(self)),
        }
    }

    /// [`Sig::parse`], then [`Sig::ending`]: a parent-death or orphan signal.
    pub fn parse_ending(text: &str) -> Result<Sig, SignalError> {
        Sig::parse(text)?.ending()
    }
}

impl From<Signal> for Sig {
    fn from(s: Signal) -> Sig {
        Sig::of(s)
    }
}

impl fmt::Display for Sig {
    /// `SIGTERM`, `SIGRTMIN`, `SIGRTMIN+3`; `32` for a number without a name.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(s) = self.nix() {
            return f.write_str(s.as_str());
        }
        let min = libc::SIGRTMIN();
        match self.0 - min {
            0 => f.write_str("SIGRTMIN"),
            n if n > 0 => write!(f, "SIGRTMIN+{n}"),
            _ => write!(f, "{}", self.0),
        }
    }
}

impl FromStr for Sig {
    type Err = SignalError;
    fn from_str(s: &str) -> Result<Sig, SignalError> {
        Sig::parse(s)
    }
}

impl Serialize for Sig {
    /// The `Display` form, a string.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Sig {
    /// A name or a number, as a string or a JSON/TOML integer.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Sig, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Form {
            Num(i64),
            Text(String),
        }
        match Form::deserialize(d)
            .map_err(|_| de::Error::custom("expected a signal name such as \"TERM\" or a number"))?
        {
            Form::Num(n) => Sig::parse(&n.to_string()).map_err(de::Error::custom),
            Form::Text(s) => Sig::parse(&s).map_err(de::Error::custom),
        }
    }
}

/// serde for a signal kept as its raw number (`#[serde(with =
/// "crate::process::signal::number_as_name")]`):
/// written as [`Sig`]'s name, read from a name or a number. A number that names no signal is
/// written as the number.
pub mod number_as_name {
    use super::Sig;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(n: &i32, s: S) -> Result<S::Ok, S::Error> {
        match Sig::new(*n) {
            Some(sig) => s.collect_str(&sig),
            None => s.serialize_i32(*n),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<i32, D::Error> {
        Sig::deserialize(d).map(Sig::number)
    }
}

/// The name of signal number `n` ([`Sig`]'s `Display`), or `signal N` when no signal has that
/// number.
pub fn name(n: i32) -> String {
    match Sig::new(n) {
        Some(s) => s.to_string(),
        None => format!("signal {n}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Sets of signals.

/// The highest signal number a set holds.
pub const MAX_SIGNAL: i32 = 64;

/// A set of signals 1..=64, bit `n - 1` for signal `n`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SigBits(pub u64);

impl SigBits {
    /// The empty set.
    pub const EMPTY: SigBits = SigBits(0);

    /// Whether `sig` is in the set.
    pub fn contains(self, sig: i32) -> bool {
        (1..=MAX_SIGNAL).contains(&sig) && self.0 & (1u64 << (sig - 1)) != 0
    }

    /// The set with `sig` added.
    pub fn with(self, sig: i32) -> SigBits {
        if (1..=MAX_SIGNAL).contains(&sig) {
            SigBits(self.0 | (1u64 << (sig - 1)))
        } else {
            self
        }
    }

    /// The set with `sig` removed.
    pub fn without(self, sig: i32) -> SigBits {
        if (1..=MAX_SIGNAL).contains(&sig) {
            SigBits(self.0 & !(1u64 << (sig - 1)))
        } else {
            self
        }
    }

    /// The C form.
    pub fn to_sigset(self) -> libc::sigset_t {
        // SAFETY: sigemptyset/sigaddset on a stack value.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for sig in 1..=MAX_SIGNAL {
                if self.contains(sig) {
                    libc::sigaddset(&mut set, sig);
                }
            }
            set
        }
    }

    /// From the C form.
    pub fn from_sigset(set: &libc::sigset_t) -> SigBits {
        let mut bits = SigBits::EMPTY;
        for sig in 1..=MAX_SIGNAL {
            // SAFETY: sigismember reads a valid set.
            if unsafe { libc::sigismember(set, sig) } == 1 {
                bits = bits.with(sig);
            }
        }
        bits
    }

    /// Parses the hexadecimal form of `/proc/<pid>/status` (`SigBlk:\t0000000000010000`).
    pub fn from_hex(s: &str) -> Option<SigBits> {
        u64::from_str_radix(s.trim(), 16).ok().map(SigBits)
    }

    /// The set on the `field` line (`SigBlk`, `SigIgn`, `SigCgt`, `SigPnd`, `ShdPnd`; a
    /// trailing `:` is allowed) of a `/proc/<pid>/status` text; `None` when the line is missing
    /// or its value is not hexadecimal.
    pub fn from_status(status: &str, field: &str) -> Option<SigBits> {
        let name = field.strip_suffix(':').unwrap_or(field);
        status
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .and_then(SigBits::from_hex)
    }
}

// ---------------------------------------------------------------------------------------------
// The inherited state, recorded before Rust's runtime runs.

/// Signals 32 and 33: the C library's own (glibc's SIGCANCEL and SIGSETXID), below
/// `SIGRTMIN`. Its `sigaction` refuses them; [`raw_disposition`] and [`set_raw_disposition`]
/// reach them.
pub const LIBC_RESERVED: [i32; 2] = [32, 33];

/// A signal's disposition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Disposition {
    /// `SIG_DFL`.
    Default,
    /// `SIG_IGN`.
    Ignore,
    /// A handler.
    Caught,
}

/// The kernel's `struct sigaction` of `rt_sigaction` (not the C library's, whose mask is 1024
/// bits): handler, flags, restorer where the architecture has `SA_RESTORER`, a 64-bit mask.
#[repr(C)]
struct KernelSigaction {
    handler: usize,
    flags: libc::c_ulong,
    #[cfg(not(any(target_arch = "riscv64", target_arch = "loongarch64")))]
    restorer: usize,
    mask: u64,
}

// MIPS puts the flags first and has a 128-bit mask: not supported.
#[cfg(any(target_arch = "mips", target_arch = "mips64"))]
compile_error!("signal::KernelSigaction: the MIPS layout of struct sigaction is not written");

/// `sig`'s disposition, read with the raw `rt_sigaction` system call (for 32 and 33 too).
/// Async-signal-safe. `None` for a number the kernel refuses.
pub fn raw_disposition(sig: i32) -> Option<Disposition> {
    let mut old = KernelSigaction {
        handler: 0,
        flags: 0,
        #[cfg(not(any(target_arch = "riscv64", target_arch = "loongarch64")))]
        restorer: 0,
        mask: 0,
    };
    // SAFETY: rt_sigaction reading into a stack value of the kernel's layout; sigsetsize 8.
    let r = unsafe {
        libc::syscall(
            libc::SYS_rt_sigaction,
            sig,
            std::ptr::null::<KernelSigaction>(),
            &mut old as *mut KernelSigaction,
            8usize,
        )
    };
    (r == 0).then_some(match old.handler {
        h if h == libc::SIG_DFL => Disposition::Default,
        h if h == libc::SIG_IGN => Disposition::Ignore,
        _ => Disposition::Caught,
    })
}

/// Sets `sig`'s disposition to "ignore" (`ignore`) or "default" with the raw `rt_sigaction`
/// system call (for 32 and 33 too); false when the kernel refused. Async-signal-safe.
///
/// # Safety
/// Dispositions are process-wide: the caller must not take a disposition from code that
/// relies on it (the C library's handlers of 32 and 33 in a process with threads).
pub unsafe fn set_raw_disposition(sig: i32, ignore: bool) -> bool {
    let act = KernelSigaction {
        handler: if ignore { libc::SIG_IGN } else { libc::SIG_DFL },
        flags: 0,
        #[cfg(not(any(target_arch = "riscv64", target_arch = "loongarch64")))]
        restorer: 0,
        mask: 0,
    };
    // SAFETY: rt_sigaction with a stack value of the kernel's layout; sigsetsize 8.
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigaction,
            sig,
            &act as *const KernelSigaction,
            std::ptr::null_mut::<KernelSigaction>(),
            8usize,
        ) == 0
    }
}

/// Ignores each of 32 and 33 whose disposition is still the default, so that a `kill -32` or
/// `kill -33` from outside does not end foster: every command calls it first thing, before any
/// thread exists. A handler already installed (by the C library) is left alone, and one
/// installed later replaces the "ignore" (glibc installs SIGSETXID's at the first thread,
/// SIGCANCEL's at the first `pthread_cancel`; both ignore a signal they did not send).
/// Programs foster launches get these two back as foster was started with them
/// ([`Inherited::apply_in_child`]). Returns the signals it set to "ignore".
///
/// And signals 32 and 33 ([`LIBC_RESERVED`]), which the C library keeps for its threads
/// (SIGCANCEL, SIGSETXID) and whose `sigaction` it refuses: their default action ends a process,
/// and the C library installs its handlers only when it needs them (at the first
/// `pthread_cancel`, at the first thread), so a `kill -32` from outside would end foster.
/// [`ignore_reserved`], called first thing by every command, sets "ignore" on those still at
/// their default; the C library's own handler, when it comes, replaces it (and ignores a signal
/// it did not send). They are read and set with the raw `rt_sigaction` system call, recorded
/// in [`Inherited`] like the others, and given back to launched programs as foster was started
/// with them.
pub fn ignore_reserved() -> SigBits {
    let mut set = SigBits::EMPTY;
    for sig in LIBC_RESERVED {
        if raw_disposition(sig) == Some(Disposition::Default)
            // SAFETY: only a default disposition is replaced; no code relies on one.
            && unsafe { set_raw_disposition(sig, true) }
        {
            set = set.with(sig);
        }
    }
    set
}

/// For a `std::process::Command` that foster starts: 32 and 33 back, in the child, to what
/// foster was started with (a `Command` passes foster's own "ignore" of them on; the spawner and
/// `foster exec` give a program the whole inherited state instead).
pub fn reserved_as_inherited(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    let ignored = Inherited::get().ignored;
    // SAFETY: rt_sigaction with stack values, between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            for sig in LIBC_RESERVED {
                set_raw_disposition(sig, ignored.contains(sig));
            }
            Ok(())
        });
    }
}

static CAPTURED: AtomicBool = AtomicBool::new(false);
static INHERITED_MASK: AtomicU64 = AtomicU64::new(0);
static INHERITED_IGNORED: AtomicU64 = AtomicU64::new(0);

extern "C" fn capture_inherited() {
    // SAFETY: sigprocmask and sigaction reading into stack values; nothing else runs yet.
    unsafe {
        let mut mask: libc::sigset_t = std::mem::zeroed();
        if libc::sigprocmask(libc::SIG_BLOCK, std::ptr::null(), &mut mask) != 0 {
            return;
        }
        let mut ignored = 0u64;
        for sig in 1..=MAX_SIGNAL {
            // The C library refuses to read 32 and 33: the raw system call reads them.
            let ign = if LIBC_RESERVED.contains(&sig) {
                raw_disposition(sig) == Some(Disposition::Ignore)
            } else {
                let mut old: libc::sigaction = std::mem::zeroed();
                libc::sigaction(sig, std::ptr::null(), &mut old) == 0
                    && old.sa_sigaction == libc::SIG_IGN
            };
            if ign {
                ignored |= 1u64 << (sig - 1);
            }
        }
        INHERITED_MASK.store(SigBits::from_sigset(&mask).0, Ordering::Relaxed);
        INHERITED_IGNORED.store(ignored, Ordering::Relaxed);
        CAPTURED.store(true, Ordering::Release);
    }
}

/// Runs [`capture_inherited`] before `main` (and before the runtime ignores SIGPIPE).
#[used]
#[unsafe(link_section = ".init_array")]
static CAPTURE_INHERITED: extern "C" fn() = capture_inherited;

/// The signal state foster was started with: what PROGRAM gets back.
///
/// And sets of signals: [`SigBits`], signals 1..=64 as bit `n - 1` for signal `n` (the layout of
/// `SigBlk`/`SigIgn` in `/proc/<pid>/status`, read by [`SigBits::from_hex`]), [`block`],
/// [`SignalFd`], the one signalfd (over a `SigBits`, so real-time signals too, which nix's
/// `SigSet` cannot hold), and [`Inherited`], the signal state
/// foster was started with. A constructor in `.init_array` records the mask and the ignored
/// signals *before* Rust's runtime starts (the runtime sets SIGPIPE to "ignore" before `main`,
/// so `main` is already too late to know what the caller gave us); every program foster
/// launches gets exactly that state back before its exec ([`Inherited::apply_in_child`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Inherited {
    /// Blocked signals.
    pub mask: SigBits,
    /// Signals whose disposition was "ignore" (every other one was "default": exec resets
    /// caught handlers).
    pub ignored: SigBits,
}

impl Inherited {
    /// What was recorded before `main`. When the constructor did not run (foster embedded in
    /// another binary), the current mask and the current ignored set, less the SIGPIPE that
    /// Rust's runtime ignores.
    pub fn get() -> Inherited {
        // Referencing the constructor keeps its object file in the link.
        std::hint::black_box(&CAPTURE_INHERITED);
        if CAPTURED.load(Ordering::Acquire) {
            return Inherited {
                mask: SigBits(INHERITED_MASK.load(Ordering::Relaxed)),
                ignored: SigBits(INHERITED_IGNORED.load(Ordering::Relaxed)),
            };
        }
        capture_inherited();
        Inherited {
            mask: SigBits(INHERITED_MASK.load(Ordering::Relaxed)),
            ignored: SigBits(INHERITED_IGNORED.load(Ordering::Relaxed)).without(libc::SIGPIPE),
        }
    }

    /// Between fork and exec: every disposition back to "ignore" or "default" as inherited
    /// (32 and 33 too, through the raw system call: foster's "ignore" of them is its own, see
    /// [`ignore_reserved`]), then the inherited mask. Async-signal-safe, allocation-free.
    ///
    /// # Safety
    /// Only for a freshly forked, single-threaded child about to exec (with a signal handler
    /// table of its own: not `CLONE_SIGHAND`).
    pub unsafe fn apply_in_child(&self) -> bool {
        // SAFETY: sigaction/sigprocmask/rt_sigaction with stack values.
        unsafe {
            for sig in 1..=MAX_SIGNAL {
                if sig == libc::SIGKILL || sig == libc::SIGSTOP {
                    continue;
                }
                if LIBC_RESERVED.contains(&sig) {
                    set_raw_disposition(sig, self.ignored.contains(sig));
                    continue;
                }
                let mut act: libc::sigaction = std::mem::zeroed();
                act.sa_sigaction = if self.ignored.contains(sig) {
                    libc::SIG_IGN
                } else {
                    libc::SIG_DFL
                };
                libc::sigemptyset(&mut act.sa_mask);
                libc::sigaction(sig, &act, std::ptr::null_mut());
            }
            let mask = self.mask.to_sigset();
            libc::sigprocmask(libc::SIG_SETMASK, &mask, std::ptr::null_mut()) == 0
        }
    }
}

/// Blocks `set` in the calling thread (and every thread it creates later).
pub fn block(set: SigBits) -> io::Result<()> {
    let s = set.to_sigset();
    // SAFETY: a valid set on the stack.
    let r = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &s, std::ptr::null_mut()) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(r))
    }
}

// ---------------------------------------------------------------------------------------------
// The one signalfd.

/// A non-blocking, close-on-exec signalfd for a set of signals the caller has blocked (in
/// every thread that could otherwise take them). Readable (for [`crate::base::sys::poll`] or
/// tokio's `AsyncFd`) while one of them is pending.
#[derive(Debug)]
pub struct SignalFd {
    fd: OwnedFd,
}

impl SignalFd {
    /// Opens the signalfd for `set`.
    pub fn new(set: SigBits) -> io::Result<SignalFd> {
        let s = set.to_sigset();
        // SAFETY: a valid set on the stack; the call returns a fresh descriptor or -1.
        let fd = unsafe { libc::signalfd(-1, &s, libc::SFD_NONBLOCK | libc::SFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by signalfd: open, and owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(SignalFd { fd })
    }

    /// Reads pending signals into `out`; returns how many (0 when none is pending).
    pub fn read(&self, out: &mut [libc::signalfd_siginfo]) -> usize {
        let size = std::mem::size_of::<libc::signalfd_siginfo>();
        loop {
            // SAFETY: `out` is a live, writable slice of plain-data records; the kernel writes
            // whole records, at most `size_of_val(out)` bytes.
            let n = unsafe {
                libc::read(
                    self.fd.as_raw_fd(),
                    out.as_mut_ptr().cast(),
                    std::mem::size_of_val(out),
                )
            };
            if n > 0 {
                return n as usize / size;
            }
            if n < 0 && crate::base::sys::errno() == libc::EINTR {
                continue;
            }
            return 0;
        }
    }

    /// One pending signal, `None` when none is.
    pub fn read_signal(&self) -> Option<libc::signalfd_siginfo> {
        // SAFETY: an all-zero signalfd_siginfo (integers only) is a valid value.
        let mut one: [libc::signalfd_siginfo; 1] = unsafe { std::mem::zeroed() };
        (self.read(&mut one) == 1).then_some(one[0])
    }
}

impl AsRawFd for SignalFd {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsFd for SignalFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_reads() {
        for (text, want) in [
            ("TERM", libc::SIGTERM),
            ("SIGTERM", libc::SIGTERM),
            ("sigterm", libc::SIGTERM),
            ("SigHup", libc::SIGHUP),
            (" 15 ", libc::SIGTERM),
            ("STOP", libc::SIGSTOP),
            ("iot", libc::SIGABRT),
            ("SIGPOLL", libc::SIGIO),
            ("RTMIN", libc::SIGRTMIN()),
            ("RTMIN+2", libc::SIGRTMIN() + 2),
            ("sigrtmax-1", libc::SIGRTMAX() - 1),
            ("RTMAX", libc::SIGRTMAX()),
            ("32", 32),
        ] {
            assert_eq!(Sig::parse(text).map(Sig::number), Ok(want), "{text:?}");
        }
        assert_eq!(
            Sig::parse(&format!("RTMIN+{}", libc::SIGRTMAX() - libc::SIGRTMIN())),
            Ok(Sig(libc::SIGRTMAX()))
        );
    }

    #[test]
    fn errors_say_what_is_wrong() {
        for (text, why) in [
            ("", "unknown signal \"\""),
            (
                "BOGUS",
                "unknown signal \"BOGUS\": expected a name such as TERM",
            ),
            ("SIG", "unknown signal"),
            ("0", "not a signal number"),
            ("65", "not a signal number"),
            ("99999999999", "not a signal number"),
            ("-1", "unknown signal"),
            ("RTMIN+2147483647", "expected RTMIN+N or RTMAX-N"),
            ("RTMIN+-5", "expected RTMIN+N"),
            ("RTMIN+", "expected RTMIN+N"),
            ("RTMIN++5", "expected RTMIN+N"),
            ("RTMAX-", "expected RTMIN+N or RTMAX-N"),
            ("RTMAX-99", "expected RTMIN+N or RTMAX-N"),
            ("RTMAX+1", "expected RTMIN+N or RTMAX-N"),
        ] {
            let e = Sig::parse(text).unwrap_err().to_string();
            assert!(e.contains(why), "{text:?} gave {e:?}, wanted {why:?}");
        }
    }

    #[test]
    fn one_spelling_that_reads_back() {
        for n in 1..=Sig::max() {
            let s = Sig::new(n).unwrap();
            let text = s.to_string();
            assert_eq!(Sig::parse(&text), Ok(s), "{text}");
            assert_eq!(
                serde_json::from_str::<Sig>(&serde_json::to_string(&s).unwrap()).unwrap(),
                s
            );
            if n < libc::SIGRTMIN() && !matches!(n, 32 | 33) {
                assert!(text.starts_with("SIG"), "{text}");
            }
        }
        assert_eq!(Sig::TERM.to_string(), "SIGTERM");
        assert_eq!(Sig(libc::SIGRTMIN()).to_string(), "SIGRTMIN");
        assert_eq!(Sig(libc::SIGRTMIN() + 2).to_string(), "SIGRTMIN+2");
        assert_eq!(serde_json::to_string(&Sig::KILL).unwrap(), "\"SIGKILL\"");
        assert_eq!(serde_json::from_str::<Sig>("9").unwrap(), Sig::KILL);
        assert!(serde_json::from_str::<Sig>("0").is_err());
        assert_eq!(name(99), "signal 99");
        assert_eq!(Sig::standard().count(), 31);
    }

    #[test]
    fn only_signals_that_end_a_process_can_be_parent_death_signals() {
        for s in [
            Signal::SIGSTOP,
            Signal::SIGTSTP,
            Signal::SIGTTIN,
            Signal::SIGTTOU,
        ] {
            let e = Sig::of(s).ending().unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("{s} cannot be a parent-death")),
                "{e}"
            );
            assert!(e.contains("stops"), "{e}");
            assert!(Sig::of(s).stops());
        }
        for s in [
            Signal::SIGCHLD,
            Signal::SIGCONT,
            Signal::SIGURG,
            Signal::SIGWINCH,
        ] {
            let e = Sig::of(s).ending().unwrap_err().to_string();
            assert!(e.contains("ignored by default"), "{e}");
            assert!(!Sig::of(s).stops());
        }
        for n in [
            libc::SIGKILL,
            libc::SIGTERM,
            libc::SIGHUP,
            libc::SIGINT,
            libc::SIGUSR1,
            libc::SIGQUIT,
            libc::SIGRTMIN(),
            libc::SIGRTMAX(),
        ] {
            assert!(Sig(n).ending().is_ok(), "{}", Sig(n));
        }
        assert!(Sig::parse_ending("STOP").is_err());
        assert_eq!(Sig::parse_ending("hup"), Ok(Sig::HUP));
    }

    #[test]
    fn bits_round_trip_through_sigset_and_hex() {
        let b = SigBits::EMPTY.with(1).with(17).with(64);
        assert_eq!(SigBits::from_sigset(&b.to_sigset()), b);
        assert_eq!(
            SigBits::from_hex("0000000000010000"),
            Some(SigBits::EMPTY.with(17))
        );
        let status = "SigPnd:\t0000000000000000\nSigBlk:\t0000000000010002\nSigIgn:\tzz\n";
        let blk = SigBits::EMPTY.with(2).with(17);
        assert_eq!(SigBits::from_status(status, "SigBlk"), Some(blk));
        assert_eq!(SigBits::from_status(status, "SigBlk:"), Some(blk));
        assert_eq!(SigBits::from_status(status, "SigIgn"), None);
        assert_eq!(SigBits::from_status(status, "SigCgt"), None);
    }

    /// The kernel's `struct sigaction` as written here reads what `/proc/self/status` says of
    /// every signal, 32 and 33 included.
    #[test]
    fn raw_dispositions_agree_with_proc() {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let field = |name: &str| SigBits::from_status(&status, name).unwrap();
        let (ign, cgt) = (field("SigIgn:"), field("SigCgt:"));
        for sig in 1..=MAX_SIGNAL {
            let want = if ign.contains(sig) {
                Disposition::Ignore
            } else if cgt.contains(sig) {
                Disposition::Caught
            } else {
                Disposition::Default
            };
            assert_eq!(raw_disposition(sig), Some(want), "signal {sig}");
        }
        assert_eq!(raw_disposition(0), None);
        assert_eq!(raw_disposition(65), None);
    }

    #[test]
    fn inherited_state_was_captured_before_main() {
        // The test harness does not block or ignore anything itself; the constructor ran.
        let i = Inherited::get();
        assert!(CAPTURED.load(Ordering::Acquire));
        assert!(!i.mask.contains(libc::SIGKILL));
    }
}
