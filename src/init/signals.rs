//! The signal side of `foster init`: what foster inherited, what it forwards, what it rewrites.
//!
//! Owns three things:
//!
//! - **The inherited signal state.** A constructor in `.init_array` records the signal mask and
//!   the set of ignored signals *before* Rust's runtime starts (the runtime sets SIGPIPE to
//!   "ignore" before `main`, so `main` is already too late to know what the caller gave us).
//!   PROGRAM gets exactly that state back before it is exec'd ([`Inherited::apply_in_child`]).
//! - **The forwarded set** ([`forwarded`]): every signal except SIGCHLD (the reaper's), SIGKILL
//!   and SIGSTOP (cannot be caught), and the two real-time signals the C library keeps for
//!   itself (32 and 33). The synchronous fault signals ([`FAULTS`]: SIGSEGV, SIGBUS, SIGFPE,
//!   SIGILL, SIGTRAP, SIGSYS) are in it too: blocked, one that another process sends with
//!   `kill` or `sigqueue` waits on the signalfd and is forwarded like any other, while a real
//!   fault of foster's own is still fatal, since the kernel forces a fault signal through the
//!   mask (it unblocks it and resets its action to the default). [`sent_by_a_process`] tells
//!   them apart on the signalfd by their `si_code`.
//!   SIGTTIN, SIGTTOU and SIGTSTP are forwarded and, being blocked, never stop foster.
//! - **Rewriting** ([`Rewrites`]): `TERM:QUIT` sends SIGQUIT where SIGTERM arrived; `TERM:0`
//!   drops it.
//!
//! All of them are bit sets over signal numbers 1..=64 (bit `n - 1` for signal `n`), the
//! layout of `SigBlk`/`SigIgn` in `/proc/<pid>/status`.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

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
}

/// The synchronous fault signals: forwarded when a process sent them ([`sent_by_a_process`]);
/// a real fault of foster's own is forced through the mask by the kernel and ends foster.
pub const FAULTS: [i32; 6] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGFPE,
    libc::SIGILL,
    libc::SIGTRAP,
    libc::SIGSYS,
];

/// The signals foster forwards to PROGRAM (see the module docs for what is left out and why).
pub fn forwarded() -> SigBits {
    let mut bits = SigBits(u64::MAX);
    for sig in [libc::SIGCHLD, libc::SIGKILL, libc::SIGSTOP, 32, 33] {
        bits = bits.without(sig);
    }
    bits
}

/// Whether a signal read from the signalfd was sent by a process (`kill`, `sigqueue`,
/// `tgkill`, `pidfd_send_signal`, the parent-death signal: `si_code` `SI_USER`, `SI_QUEUE`,
/// `SI_TKILL`, all zero or below) rather than raised by the kernel for a fault or an event
/// (`si_code` above zero: `SEGV_MAPERR`, `BUS_MCEERR_AO`, `SI_KERNEL`...).
pub fn sent_by_a_process(info: &libc::signalfd_siginfo) -> bool {
    info.ssi_code <= 0
}

/// Ends foster with `sig` as a fault would: its default action restored, unblocked, raised
/// (a core dump where the limits allow one). For a fault signal the kernel queued instead of
/// forcing (none of foster's own making reaches the signalfd): foster does not forward what it
/// did not receive from a process.
pub fn die_of(sig: i32) -> ! {
    // SAFETY: sigaction/sigprocmask/raise with stack values; nothing here returns normally.
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = libc::SIG_DFL;
        libc::sigemptyset(&mut act.sa_mask);
        libc::sigaction(sig, &act, std::ptr::null_mut());
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::raise(sig);
        libc::_exit(128 + sig)
    }
}

// ---------------------------------------------------------------------------------------------
// The inherited state, recorded before Rust's runtime runs.

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
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) == 0
                && old.sa_sigaction == libc::SIG_IGN
            {
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

    /// Between fork and exec: every disposition back to "ignore" or "default" as inherited,
    /// then the inherited mask. Async-signal-safe, allocation-free.
    ///
    /// # Safety
    /// Only for a freshly forked, single-threaded child about to exec.
    pub unsafe fn apply_in_child(&self) -> bool {
        // SAFETY: sigaction/sigprocmask with stack values.
        unsafe {
            for sig in 1..=MAX_SIGNAL {
                if sig == libc::SIGKILL || sig == libc::SIGSTOP || sig == 32 || sig == 33 {
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
// Names and rewriting.

const NAMES: [&str; 31] = [
    "HUP", "INT", "QUIT", "ILL", "TRAP", "ABRT", "BUS", "FPE", "KILL", "USR1", "SEGV", "USR2",
    "PIPE", "ALRM", "TERM", "STKFLT", "CHLD", "CONT", "STOP", "TSTP", "TTIN", "TTOU", "URG",
    "XCPU", "XFSZ", "VTALRM", "PROF", "WINCH", "IO", "PWR", "SYS",
];

/// Parses a signal: a name with or without `SIG` (`TERM`, `SIGterm`), `RTMIN+N`, `RTMAX-N`, or
/// a number in 1..=64. Case-insensitive.
pub fn parse_signal(text: &str) -> Result<i32, String> {
    let t = text.trim();
    if let Ok(n) = t.parse::<i32>() {
        return if (1..=MAX_SIGNAL).contains(&n) {
            Ok(n)
        } else {
            Err(format!("signal number {n} is out of range 1..=64"))
        };
    }
    let up = t.to_ascii_uppercase();
    let name = up.strip_prefix("SIG").unwrap_or(&up);
    if let Some(i) = NAMES.iter().position(|n| *n == name) {
        return Ok(i as i32 + 1);
    }
    let (min, max) = (libc::SIGRTMIN(), libc::SIGRTMAX());
    let rt = |base: i32, rest: &str, sign: i32| -> Option<i32> {
        let off: i32 = if rest.is_empty() {
            0
        } else {
            rest.parse().ok()?
        };
        let n = base + sign * off;
        (min..=max).contains(&n).then_some(n)
    };
    let parsed = match name {
        "IOT" => Some(libc::SIGABRT),
        "POLL" => Some(libc::SIGIO),
        _ if name.starts_with("RTMIN") => {
            let r = &name[5..];
            rt(min, r.strip_prefix('+').unwrap_or(r), 1)
        }
        _ if name.starts_with("RTMAX") => {
            let r = &name[5..];
            rt(max, r.strip_prefix('-').unwrap_or(r), -1)
        }
        _ => None,
    };
    parsed.ok_or_else(|| format!("unknown signal {text:?} (expected a name like TERM or a number)"))
}

/// The name of a signal number, `SIGTERM` style (`SIGRTMIN+2`, `signal 32`).
pub fn name(sig: i32) -> String {
    crate::signal::name(sig)
}

/// The rewriting table: for each received signal, the one to send (0: drop it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rewrites {
    to: [u8; MAX_SIGNAL as usize + 1],
}

impl Default for Rewrites {
    fn default() -> Self {
        let mut to = [0u8; MAX_SIGNAL as usize + 1];
        for (i, t) in to.iter_mut().enumerate() {
            *t = i as u8;
        }
        Rewrites { to }
    }
}

impl Rewrites {
    /// Parses `FROM:TO` rules (`TERM:QUIT`, `15:3`, `USR1:0` to drop SIGUSR1).
    pub fn parse<S: AsRef<str>>(rules: &[S]) -> Result<Rewrites, String> {
        let mut r = Rewrites::default();
        for rule in rules {
            let rule = rule.as_ref();
            let (from, to) = rule
                .split_once(':')
                .ok_or_else(|| format!("--rewrite {rule:?}: expected FROM:TO, e.g. TERM:QUIT"))?;
            let from = parse_signal(from).map_err(|e| format!("--rewrite {rule:?}: {e}"))?;
            let to = if to.trim() == "0" {
                0
            } else {
                parse_signal(to).map_err(|e| format!("--rewrite {rule:?}: {e}"))?
            };
            if !forwarded().contains(from) {
                return Err(format!(
                    "--rewrite {rule:?}: {} is never forwarded, so it cannot be rewritten",
                    name(from)
                ));
            }
            r.to[from as usize] = to as u8;
        }
        Ok(r)
    }

    /// The signal to send for `received` (0: none).
    pub fn map(&self, received: i32) -> i32 {
        if (1..=MAX_SIGNAL).contains(&received) {
            self.to[received as usize] as i32
        } else {
            received
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The signalfd of forwarded signals.

/// A non-blocking, close-on-exec signalfd for a set the caller has blocked.
#[derive(Debug)]
pub struct SignalFd {
    fd: OwnedFd,
}

impl SignalFd {
    /// Opens the signalfd for `set` (which must be blocked in every thread).
    pub fn new(set: SigBits) -> io::Result<SignalFd> {
        let s = set.to_sigset();
        // SAFETY: a valid set; a fresh descriptor on success.
        let fd = unsafe { libc::signalfd(-1, &s, libc::SFD_NONBLOCK | libc::SFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is fresh and ours.
        Ok(SignalFd {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// Reads pending signals into `out`; returns how many (0 when none is pending).
    pub fn read(&self, out: &mut [libc::signalfd_siginfo]) -> usize {
        let size = std::mem::size_of::<libc::signalfd_siginfo>();
        loop {
            // SAFETY: reads whole siginfo records into `out`.
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
            if n < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return 0;
        }
    }
}

impl AsRawFd for SignalFd {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forwarded_set_leaves_out_chld_and_uncatchables() {
        let f = forwarded();
        for sig in [libc::SIGCHLD, libc::SIGKILL, libc::SIGSTOP, 32, 33] {
            assert!(!f.contains(sig), "{sig} must not be forwarded");
        }
        for sig in FAULTS.into_iter().chain([
            libc::SIGHUP,
            libc::SIGINT,
            libc::SIGQUIT,
            libc::SIGABRT,
            libc::SIGTERM,
            libc::SIGUSR1,
            libc::SIGWINCH,
            libc::SIGTTIN,
            libc::SIGTTOU,
            libc::SIGTSTP,
            libc::SIGCONT,
            34,
            64,
        ]) {
            assert!(f.contains(sig), "{sig} must be forwarded");
        }
    }

    #[test]
    fn parses_signals_and_rewrites() {
        assert_eq!(parse_signal("TERM"), Ok(15));
        assert_eq!(parse_signal("sigquit"), Ok(3));
        assert_eq!(parse_signal("9"), Ok(9));
        assert_eq!(parse_signal("RTMIN+2"), Ok(libc::SIGRTMIN() + 2));
        assert_eq!(parse_signal("RTMAX"), Ok(libc::SIGRTMAX()));
        assert!(parse_signal("65").is_err());
        assert!(parse_signal("BOGUS").unwrap_err().contains("BOGUS"));
        let r = Rewrites::parse(&["TERM:QUIT", "USR1:0"]).unwrap();
        assert_eq!(r.map(15), 3);
        assert_eq!(r.map(10), 0);
        assert_eq!(r.map(2), 2);
        assert!(Rewrites::parse(&["TERM"]).unwrap_err().contains("FROM:TO"));
        assert!(
            Rewrites::parse(&["CHLD:TERM"])
                .unwrap_err()
                .contains("never forwarded")
        );
    }

    #[test]
    fn bits_round_trip_through_sigset_and_hex() {
        let b = SigBits::EMPTY.with(1).with(17).with(64);
        assert_eq!(SigBits::from_sigset(&b.to_sigset()), b);
        assert_eq!(
            SigBits::from_hex("0000000000010000"),
            Some(SigBits::EMPTY.with(17))
        );
    }

    #[test]
    fn inherited_state_was_captured_before_main() {
        // The test harness does not block or ignore anything itself; the constructor ran.
        let i = Inherited::get();
        assert!(CAPTURED.load(Ordering::Acquire));
        assert!(!i.mask.contains(libc::SIGKILL));
    }
}
