//! The one owner of all waiting: SIGCHLD → reap loop → routed exit statuses.
//!
//! Nothing else in foster calls `wait*`. A catch-all reaper and a `std::process::Child` handle
//! would steal each other's statuses, so supervised processes are never waited for through
//! `Child` or `tokio::process`: their statuses come from here.
//!
//! SIGCHLD must be blocked in every thread ([`block_signals`] in the main thread, before any
//! other thread exists); [`Reaper`] says how its wake-ups and routing work.

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::time::Duration;

use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};

use crate::base::sys::{PollFd, poll};
use crate::process::signal::{SigBits, SignalFd};
use serde::{Deserialize, Serialize};

/// Blocks SIGCHLD and `extra` in the calling thread (and so in every thread it creates later).
/// Call it first thing in `main`, before any thread or runtime is created.
pub fn block_signals(extra: &[Signal]) -> io::Result<()> {
    let mut set = SigSet::empty();
    set.add(Signal::SIGCHLD);
    for s in extra {
        set.add(*s);
    }
    pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&set), None).map_err(io::Error::from)
}

/// Whether `sig` is blocked in the calling thread.
pub fn is_blocked(sig: Signal) -> bool {
    let mut old = SigSet::empty();
    pthread_sigmask(SigmaskHow::SIG_BLOCK, None, Some(&mut old)).is_ok() && old.contains(sig)
}

/// How a process ended, as `waitpid` reported it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "how", rename_all = "snake_case")]
pub enum ExitStatus {
    /// It called `exit(code)`.
    Exited { code: i32 },
    /// A signal ended it (`signal` is the number, written by its name in JSON, `"SIGTERM"`;
    /// `core_dumped` when it left a core).
    Signaled {
        #[serde(with = "crate::process::signal::number_as_name")]
        signal: i32,
        core_dumped: bool,
    },
}

impl ExitStatus {
    /// Decodes a raw `waitpid` status of a process that ended (not stopped or continued).
    pub fn from_raw(raw: i32) -> Option<ExitStatus> {
        if libc::WIFEXITED(raw) {
            Some(ExitStatus::Exited {
                code: libc::WEXITSTATUS(raw),
            })
        } else if libc::WIFSIGNALED(raw) {
            Some(ExitStatus::Signaled {
                signal: libc::WTERMSIG(raw),
                core_dumped: libc::WCOREDUMP(raw),
            })
        } else {
            None
        }
    }

    /// True for `exit(0)`.
    pub fn success(&self) -> bool {
        matches!(self, ExitStatus::Exited { code: 0 })
    }

    /// The shell's form: the exit code, or 128 + the signal number.
    pub fn shell_code(&self) -> i32 {
        match *self {
            ExitStatus::Exited { code } => code,
            ExitStatus::Signaled { signal, .. } => 128 + signal,
        }
    }
}

impl fmt::Display for ExitStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ExitStatus::Exited { code } => write!(f, "exit code {code}"),
            ExitStatus::Signaled {
                signal,
                core_dumped,
            } => {
                write!(f, "killed by {}", crate::process::signal::name(signal))?;
                if core_dumped {
                    write!(f, " (core dumped)")?;
                }
                Ok(())
            }
        }
    }
}

/// One reaped process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reaped {
    pub pid: i32,
    pub status: ExitStatus,
}

/// Where a reaped status went.
#[derive(Debug, PartialEq, Eq)]
pub enum Routed<T> {
    /// The pid was registered: its owner (removed from the table) and the status.
    Owned { owner: T, reaped: Reaped },
    /// Nobody registered the pid: an adopted orphan, or a child nobody claimed.
    Orphan(Reaped),
}

/// The reaper: a signalfd for SIGCHLD and the table of owners by pid. `T` is whatever the
/// caller needs to route a status (a helper's index, a channel, ...).
///
/// ## The signal contract
///
/// SIGCHLD must be **blocked in every thread** of the process, so that it stays pending and is
/// consumed only through the reaper's signalfd. Threads inherit the mask of the thread that
/// creates them, so the binary calls [`block_signals`] in its main thread **before any other
/// thread or async runtime exists** (the spawner thread, tokio's workers, ...). [`Reaper::new`]
/// refuses to start when SIGCHLD is not blocked in the calling thread. Children must not inherit
/// this mask: the launcher resets the mask of every process it starts before exec.
///
/// ## Wake-ups
///
/// The signalfd is readable only when a SIGCHLD is pending, so an idle supervisor never wakes.
/// It works without any async runtime ([`Reaper::wait_readable`] blocks in `poll`), and the
/// supervisor registers [`Reaper::raw_fd`] with tokio's `AsyncFd`. SIGCHLD coalesces (one
/// signal may stand for many exits), so every wake-up drains the signalfd and then reaps in a
/// loop, `waitpid(-1, WNOHANG)`, until nothing is left.
///
/// ## Routing and the register/reap race
///
/// A status goes to the owner registered for its pid ([`Routed::Owned`]), or else is an orphan
/// record ([`Routed::Orphan`]). Registration and reaping both take `&mut Reaper`, so they can
/// never interleave: whoever launches a process registers its pid before the next
/// [`Reaper::reap`] can run, and a process that exits at once is still routed to its owner.
/// Launch through [`Reaper::launch`] to make that one step.
pub struct Reaper<T> {
    fd: SignalFd,
    owners: HashMap<i32, T>,
    reaped_total: u64,
    children_left: bool,
}

impl<T> fmt::Debug for Reaper<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reaper")
            .field("fd", &self.fd.as_raw_fd())
            .field("owned", &self.owners.len())
            .field("reaped_total", &self.reaped_total)
            .finish()
    }
}

impl<T> Reaper<T> {
    /// Opens the signalfd. Fails when SIGCHLD is not blocked in the calling thread (see the
    /// module docs: [`block_signals`] must run before any thread is created).
    pub fn new() -> io::Result<Reaper<T>> {
        if !is_blocked(Signal::SIGCHLD) {
            return Err(io::Error::other(
                "SIGCHLD is not blocked in this thread: call reaper::block_signals in main \
                 before any thread or runtime is created",
            ));
        }
        let fd = SignalFd::new(SigBits::EMPTY.with(libc::SIGCHLD))
            .map_err(|e| io::Error::other(format!("signalfd for SIGCHLD: {e}")))?;
        Ok(Reaper {
            fd,
            owners: HashMap::new(),
            reaped_total: 0,
            children_left: true,
        })
    }

    /// The signalfd, readable when a SIGCHLD is pending (for `AsyncFd` or `poll`).
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Routes the status of `pid` to `owner` when it is reaped. Replaces an earlier owner.
    pub fn register(&mut self, pid: i32, owner: T) {
        self.owners.insert(pid, owner);
    }

    /// Forgets the owner of `pid`; its status will be an orphan record.
    pub fn unregister(&mut self, pid: i32) -> Option<T> {
        self.owners.remove(&pid)
    }

    /// Whether `pid` has an owner.
    pub fn is_registered(&self, pid: i32) -> bool {
        self.owners.contains_key(&pid)
    }

    /// Runs `start` (which forks, e.g. through the spawner) and registers the pid it returns,
    /// as one step: no reap can run in between, so the status of a process that exits at once
    /// still reaches `owner`.
    pub fn launch<E>(
        &mut self,
        owner: T,
        start: impl FnOnce() -> Result<i32, E>,
    ) -> Result<i32, E> {
        let pid = start()?;
        self.register(pid, owner);
        Ok(pid)
    }

    /// How many processes this reaper has reaped since it was created.
    pub fn reaped_total(&self) -> u64 {
        self.reaped_total
    }

    /// Whether the last reap found children still running (`waitpid` returned 0) rather than
    /// none at all (`ECHILD`). True before the first reap.
    pub fn children_left(&self) -> bool {
        self.children_left
    }

    /// Blocks (in `poll`, no timer) until a SIGCHLD is pending or `timeout_ms` passes
    /// (`-1`: no limit). For callers without an async runtime.
    pub fn wait_readable(&self, timeout_ms: i32) -> io::Result<bool> {
        let timeout = u64::try_from(timeout_ms).ok().map(Duration::from_millis);
        Ok(poll(&mut [PollFd::input(self.raw_fd())], timeout)? > 0)
    }

    /// Drains the pending SIGCHLD notifications, then reaps every child that has ended, until
    /// `waitpid` reports none left. Never blocks. Call it on every wake-up of the signalfd.
    pub fn reap(&mut self) -> Vec<Routed<T>> {
        let mut out = Vec::new();
        self.reap_into(&mut out);
        out
    }

    /// Like [`Reaper::reap`] (drains the signalfd, then reaps), appending to `out` (no
    /// allocation when `out` has room).
    pub fn reap_into(&mut self, out: &mut Vec<Routed<T>>) {
        self.drain_signals();
        loop {
            let mut raw = 0;
            // SAFETY: plain waitpid with a valid out pointer.
            let pid = unsafe { libc::waitpid(-1, &mut raw, libc::WNOHANG) };
            if pid > 0 {
                let Some(status) = ExitStatus::from_raw(raw) else {
                    continue; // stopped/continued are not requested; defensive
                };
                self.reaped_total += 1;
                let reaped = Reaped { pid, status };
                out.push(match self.owners.remove(&pid) {
                    Some(owner) => Routed::Owned { owner, reaped },
                    None => Routed::Orphan(reaped),
                });
                continue;
            }
            if pid == 0 {
                self.children_left = true;
                return; // children left, none ended
            }
            match crate::base::sys::errno() {
                libc::EINTR => continue,
                _ => {
                    self.children_left = false;
                    return; // ECHILD: no children at all
                }
            }
        }
    }

    /// Reads every pending SIGCHLD from the signalfd; returns how many there were.
    fn drain_signals(&self) -> usize {
        let mut n = 0;
        while self.fd.read_signal().is_some() {
            n += 1;
        }
        n
    }
}

impl<T> AsFd for Reaper<T> {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl<T> AsRawFd for Reaper<T> {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_raw_statuses() {
        assert_eq!(
            ExitStatus::from_raw(3 << 8),
            Some(ExitStatus::Exited { code: 3 })
        );
        assert_eq!(
            ExitStatus::from_raw(9),
            Some(ExitStatus::Signaled {
                signal: 9,
                core_dumped: false
            })
        );
        assert_eq!(
            ExitStatus::from_raw(6 | 0x80),
            Some(ExitStatus::Signaled {
                signal: 6,
                core_dumped: true
            })
        );
        assert_eq!(ExitStatus::from_raw(0x137f), None); // stopped by SIGSTOP
        assert_eq!(
            ExitStatus::Signaled {
                signal: 15,
                core_dumped: false
            }
            .shell_code(),
            143
        );
        assert_eq!(
            ExitStatus::Signaled {
                signal: 6,
                core_dumped: true
            }
            .to_string(),
            "killed by SIGABRT (core dumped)"
        );
        assert_eq!(ExitStatus::Exited { code: 7 }.to_string(), "exit code 7");
        let killed = ExitStatus::Signaled {
            signal: 15,
            core_dumped: false,
        };
        let json = serde_json::to_string(&killed).unwrap();
        assert_eq!(
            json,
            r#"{"how":"signaled","signal":"SIGTERM","core_dumped":false}"#
        );
        assert_eq!(serde_json::from_str::<ExitStatus>(&json).unwrap(), killed);
    }
}
