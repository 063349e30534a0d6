//! The signal side of `foster init`: what it forwards, what it rewrites.
//!
//! Owns two things (the signal state foster inherited, which PROGRAM gets back before its exec,
//! is [`crate::process::signal::Inherited`]; signals are read and named by [`crate::process::signal`], through
//! its one [`SignalFd`]):
//!
//! - **The forwarded set** ([`forwarded`]): every signal except SIGCHLD (the reaper's), SIGKILL
//!   and SIGSTOP (cannot be caught), and the two real-time signals the C library keeps for
//!   itself (32 and 33); the fault signals ([`FAULTS`]) too. SIGTTIN, SIGTTOU and SIGTSTP are
//!   forwarded and, being blocked, never stop foster.
//! - **Rewriting** ([`Rewrites`]): `TERM:QUIT` sends SIGQUIT where SIGTERM arrived; `TERM:0`
//!   drops it.
//!
//! Both are [`SigBits`], bit sets over signal numbers 1..=64.

use crate::process::signal::Sig;
pub use crate::process::signal::{Inherited, MAX_SIGNAL, SigBits, SignalFd, block};

/// The synchronous fault signals. Blocked, one that another process sends with `kill` or
/// `sigqueue` waits on the signalfd and is forwarded like any other ([`sent_by_a_process`]
/// tells them apart by their `si_code`), while a real fault of foster's own is still fatal:
/// the kernel forces a fault signal through the mask (it unblocks it and resets its action).
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
// Names and rewriting.

/// A `--rewrite FROM:TO` rule foster cannot take; the message quotes the rule.
#[derive(Debug, thiserror::Error)]
#[error("--rewrite {rule:?}: {why}")]
pub struct RewriteError {
    rule: String,
    #[source]
    why: RewriteWhy,
}

/// What is wrong with a `--rewrite` rule.
#[derive(Debug, thiserror::Error)]
pub enum RewriteWhy {
    /// No `:` in it.
    #[error("expected FROM:TO, e.g. TERM:QUIT")]
    NotFromTo,
    /// A side names no signal.
    #[error(transparent)]
    Signal(crate::process::signal::SignalError),
    /// FROM is never forwarded.
    #[error("{0} is never forwarded, so it cannot be rewritten")]
    NeverForwarded(String),
    /// TO is 32 or 33, which the C library keeps for itself (thread cancellation, set-id
    /// calls across threads): sent to PROGRAM it would reach that machinery, not PROGRAM.
    #[error("{0} is the C library's own signal, so foster never sends it")]
    Reserved(String),
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
    pub fn parse<S: AsRef<str>>(rules: &[S]) -> Result<Rewrites, RewriteError> {
        let mut r = Rewrites::default();
        for rule in rules {
            let rule = rule.as_ref();
            let wrong = |why| RewriteError {
                rule: rule.to_string(),
                why,
            };
            let (from, to) = rule.split_once(':').ok_or(wrong(RewriteWhy::NotFromTo))?;
            let sig = |t: &str| {
                Sig::parse(t)
                    .map(Sig::number)
                    .map_err(|e| wrong(RewriteWhy::Signal(e)))
            };
            let from = sig(from)?;
            let to = if to.trim() == "0" { 0 } else { sig(to)? };
            if !forwarded().contains(from) {
                return Err(wrong(RewriteWhy::NeverForwarded(
                    crate::process::signal::name(from),
                )));
            }
            if to == 32 || to == 33 {
                return Err(wrong(RewriteWhy::Reserved(crate::process::signal::name(
                    to,
                ))));
            }
            // Both are signal numbers of 1..=64 (forwarded() holds no other; `to` was parsed
            // as a signal the set can hold, or is 0).
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
        let r = Rewrites::parse(&["TERM:QUIT", "sigusr1:0", "RTMIN+2:RTMAX"]).unwrap();
        assert_eq!(r.map(libc::SIGRTMIN() + 2), libc::SIGRTMAX());
        assert_eq!(r.map(15), 3);
        assert_eq!(r.map(10), 0);
        assert_eq!(r.map(2), 2);
        let e = |rules: &[&str]| Rewrites::parse(rules).unwrap_err().to_string();
        assert_eq!(
            e(&["TERM"]),
            "--rewrite \"TERM\": expected FROM:TO, e.g. TERM:QUIT"
        );
        assert!(e(&["BOGUS:TERM"]).contains("unknown signal \"BOGUS\""));
        assert!(e(&["CHLD:TERM"]).contains("never forwarded"));
        // 32 and 33 are refused as a target, as they are as a source.
        assert!(
            e(&["HUP:32"]).contains("the C library's own signal"),
            "{}",
            e(&["HUP:32"])
        );
        assert!(e(&["HUP:33"]).contains("the C library's own signal"));
        // The cause is kept, for code that needs its kind.
        let bad = Rewrites::parse(&["BOGUS:TERM"]).unwrap_err();
        let cause = std::error::Error::source(&bad).unwrap().to_string();
        assert!(cause.starts_with("unknown signal"), "{cause}");
    }
}
