//! The lifeline: a second liveness channel to the expected parent.
//!
//! Owns [`Lifeline`], a pidfd of a **verified** expected parent: the pidfd is opened by pid, then
//! the identity `(pid, starttime)` is re-checked, so a pid reused between the lookup and the open
//! is never taken for the parent (the order systemd's `pidref_verify` uses). The pidfd becomes
//! readable when that process ends, whichever thread created the helper and whatever happened to
//! the parent-death signal (cleared by a credential change, the kernel race noted in the 6.18
//! cycle, a parent in another PID namespace: there the launcher hands the pidfd down, since it
//! cannot be opened by pid, see [`Lifeline::adopt`]). It is an ordinary descriptor: poll it in an event
//! loop ([`AsRawFd`]), or use [`Lifeline::is_lost`] / [`Lifeline::wait`].

use std::fmt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

use crate::identity::Identity;

/// Why a lifeline could not be opened.
#[derive(Debug)]
pub enum LifelineError {
    /// The expected process is gone (or its pid now belongs to another process).
    Gone(Identity),
    /// `pidfd_open` failed for another reason.
    Open(Identity, io::Error),
}

impl fmt::Display for LifelineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LifelineError::Gone(id) => write!(f, "the expected parent {id} is gone"),
            LifelineError::Open(id, e) => write!(f, "pidfd_open of {id}: {e}"),
        }
    }
}

impl std::error::Error for LifelineError {}

/// Opens a pidfd for `pid` (close-on-exec).
pub fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    // SAFETY: a plain syscall with integer arguments.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Polls `fd` for readability with a timeout (`None`: forever). True when readable.
pub fn poll_readable(fd: RawFd, timeout: Option<Duration>) -> bool {
    let ms = timeout.map_or(-1, |t| t.as_millis().min(i32::MAX as u128) as i32);
    loop {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd on the stack.
        let n = unsafe { libc::poll(&mut p, 1, ms) };
        if n < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
            continue;
        }
        return n > 0 && p.revents != 0;
    }
}

/// A pidfd of the verified expected parent.
#[derive(Debug)]
pub struct Lifeline {
    expected: Identity,
    pidfd: OwnedFd,
}

impl Lifeline {
    /// Opens the pidfd of `expected.pid`, then re-checks the identity.
    pub fn open(expected: Identity) -> Result<Lifeline, LifelineError> {
        let pidfd = match pidfd_open(expected.pid) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {
                return Err(LifelineError::Gone(expected));
            }
            Err(e) => return Err(LifelineError::Open(expected, e)),
        };
        // The pid could have been reused between the caller's lookup and the open: only now,
        // with the pidfd pinning the process, does the identity check mean something.
        if !expected.is_alive() {
            return Err(LifelineError::Gone(expected));
        }
        let l = Lifeline { expected, pidfd };
        if l.is_lost() {
            return Err(LifelineError::Gone(expected));
        }
        Ok(l)
    }

    /// A lifeline on a pidfd of `expected` that the launcher handed down (`FOSTER_PARENT_PIDFD`,
    /// checked by [`crate::gate::parent_pidfd_from_env`]): for a parent this process cannot
    /// open by pid (another PID namespace). Not checked for an exit here: the gate polls it
    /// after arming.
    pub fn adopt(expected: Identity, pidfd: OwnedFd) -> Lifeline {
        Lifeline { expected, pidfd }
    }

    /// The pidfd, for a caller that only needs the descriptor.
    pub fn into_pidfd(self) -> OwnedFd {
        self.pidfd
    }

    /// The identity this lifeline follows.
    pub fn expected(&self) -> Identity {
        self.expected
    }

    /// True once the expected parent has ended. Does not block.
    pub fn is_lost(&self) -> bool {
        poll_readable(self.pidfd.as_raw_fd(), Some(Duration::ZERO))
    }

    /// Blocks until the expected parent ends or `timeout` passes; true when it ended.
    pub fn wait(&self, timeout: Option<Duration>) -> bool {
        poll_readable(self.pidfd.as_raw_fd(), timeout)
    }
}

impl AsRawFd for Lifeline {
    fn as_raw_fd(&self) -> RawFd {
        self.pidfd.as_raw_fd()
    }
}

impl AsFd for Lifeline {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.pidfd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_a_child_until_it_exits() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let id = Identity::of(child.id() as i32).unwrap();
        let l = Lifeline::open(id).unwrap();
        assert!(!l.is_lost());
        assert!(!l.wait(Some(Duration::from_millis(10))));
        child.kill().unwrap();
        assert!(
            l.wait(Some(Duration::from_secs(10))),
            "pidfd never became readable"
        );
        child.wait().unwrap();
        assert!(matches!(Lifeline::open(id), Err(LifelineError::Gone(_))));
    }

    #[test]
    fn refuses_a_wrong_start_time() {
        let me = Identity::current().unwrap();
        let wrong = Identity {
            pid: me.pid,
            start_time: me.start_time + 1,
        };
        assert!(matches!(Lifeline::open(wrong), Err(LifelineError::Gone(_))));
        assert!(Lifeline::open(me).is_ok());
    }
}
