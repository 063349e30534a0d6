//! The lifeline: a second liveness channel to the expected parent.
//!
//! Owns [`Lifeline`], a pidfd of a **verified** expected parent, opened as every reference to a
//! process is ([`crate::process::identity::ProcessRef::open`]): the pidfd is opened by pid, then
//! the
//! identity `(pid, starttime)` is re-checked, so a pid reused between the lookup and the open is
//! never taken for the parent (the order systemd's `pidref_verify` uses). The pidfd becomes
//! readable when that process ends, whichever thread created the helper and whatever happened to
//! the parent-death signal (cleared by a credential change, the kernel race noted in the 6.18
//! cycle, a parent in another PID namespace: there the launcher hands the pidfd down, since it
//! cannot be opened by pid, see [`Lifeline::adopt`]). It is an ordinary descriptor: poll it in an
//! event
//! loop ([`AsRawFd`]), or use [`Lifeline::is_lost`] / [`Lifeline::wait`].

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::time::Duration;

use crate::process::identity::{Identity, IdentityError, ProcessRef};

/// Why a lifeline could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum LifelineError {
    /// The expected process is gone (or its pid now belongs to another process).
    #[error("the expected parent {0} is gone")]
    Gone(Identity),
    /// `pidfd_open` failed for another reason.
    #[error("pidfd_open of {0}: {1}")]
    Open(Identity, #[source] std::io::Error),
}

/// A pidfd of the verified expected parent: a [`ProcessRef`] that must hold its pidfd.
#[derive(Debug)]
pub struct Lifeline {
    expected: Identity,
    pidfd: OwnedFd,
}

impl Lifeline {
    /// Opens the pidfd of `expected.pid`, then re-checks the identity ([`ProcessRef::open`]);
    /// a parent that has already ended is gone too.
    pub fn open(expected: Identity) -> Result<Lifeline, LifelineError> {
        let pidfd = match ProcessRef::open(expected).map(ProcessRef::into_pidfd) {
            Ok(Some(fd)) => fd,
            Err(IdentityError::Pidfd(_, e)) => return Err(LifelineError::Open(expected, e)),
            Ok(None) | Err(_) => return Err(LifelineError::Gone(expected)),
        };
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
        self.wait(Some(Duration::ZERO))
    }

    /// Blocks until the expected parent ends or `timeout` passes; true when it ended.
    pub fn wait(&self, timeout: Option<Duration>) -> bool {
        crate::process::identity::poll_readable(self.pidfd.as_raw_fd(), timeout)
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
