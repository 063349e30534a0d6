//! What a process must expect of its parent, and what it passes on.
//!
//! Owns [`Expectation`], read from `FOSTER_PARENT` and `FOSTER_POLICY` (or `FOSTER_GATED` in a
//! process foster already gated) by [`Expectation::from_env`]; the expected parent's pidfd a
//! launcher hands down across PID namespaces ([`parent_pidfd_from_env`],
//! `FOSTER_PARENT_PIDFD`); and [`env_for_children`], the variables a gated process hands its
//! children.

use std::os::fd::{BorrowedFd, FromRawFd, OwnedFd, RawFd};

use crate::gate::policy::{ENV_PARENT, ENV_POLICY, Policy};
use crate::process::identity::Identity;
use crate::process::identity::{PidfdPid, poll_readable, read_pidfd_info};

/// The environment variable that keeps, in a gated process, what it was checked against.
pub const ENV_GATED: &str = "FOSTER_GATED";

/// The environment variable naming an inherited descriptor (`FOSTER_PARENT_PIDFD=N`) that is a
/// pidfd of the expected parent: how a launcher lets the gate check a parent it cannot see
/// (`getppid()` is 0 when the parent lives in another PID namespace).
pub const ENV_PARENT_PIDFD: &str = "FOSTER_PARENT_PIDFD";

/// What a process expects of its parent: read from the environment by [`Expectation::from_env`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expectation {
    /// The identity the parent must have.
    pub parent: Identity,
    /// This process's policy chain (its own generation first).
    pub policy: Policy,
}

/// The environment did not say what to expect; the text names the variable and the problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct EnvError(pub String);

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

/// The expected parent's pidfd named by `FOSTER_PARENT_PIDFD`, when the variable is set: an
/// open descriptor, a pidfd (its fdinfo has a `Pid:` line), and of the expected process where
/// this `/proc` can tell (a visible pid must be `expected`'s, with its start time; a process
/// this `/proc` cannot see, `Pid: 0`, is taken on the launcher's word, and one that has exited
/// is left for the gate to report). The descriptor is then made close-on-exec and owned by the
/// caller; the caller removes the variable from what it passes on ([`env_for_children`] does).
pub fn parent_pidfd_from_env(expected: Identity) -> Result<Option<OwnedFd>, EnvError> {
    let text = match std::env::var(ENV_PARENT_PIDFD) {
        Ok(t) => t,
        Err(std::env::VarError::NotPresent) => return Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => {
            return Err(EnvError(format!("{ENV_PARENT_PIDFD} is not valid text")));
        }
    };
    let bad = |what: &str| {
        EnvError(format!(
            "{ENV_PARENT_PIDFD}={}: {what}",
            crate::base::sanitize::escape(text.as_bytes())
        ))
    };
    let fd: RawFd = match text.parse() {
        Ok(fd) if fd >= 0 && text.len() <= 10 => fd,
        _ => return Err(bad("expected a descriptor number")),
    };
    // SAFETY: F_GETFD only reads the flags of a descriptor number.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return Err(bad("not an open descriptor"));
    }
    // SAFETY: `fd` was just checked open, and stays open while borrowed here.
    let Ok(info) = read_pidfd_info(None, unsafe { BorrowedFd::borrow_raw(fd) }, &mut Vec::new())
    else {
        return Err(bad("not a pidfd (no Pid: line in /proc/self/fdinfo)"));
    };
    let exited = || poll_readable(fd, Some(std::time::Duration::ZERO));
    // 0: a process this /proc cannot see; reaped: left for the gate to report.
    if let PidfdPid::Pid(pid @ 1..) = info.pid {
        if pid != expected.pid {
            return Err(bad(&format!(
                "a pidfd of process {pid}, not of the expected parent {expected}"
            )));
        }
        // Read while the pidfd pins the process: alive after the read, the pid was still its.
        let now = Identity::of(expected.pid).ok();
        if now != Some(expected) && !exited() {
            return Err(bad(&format!(
                "a pidfd of {}, not of the expected parent {expected}",
                now.map_or_else(|| pid.to_string(), |i| i.to_string())
            )));
        }
    }
    // SAFETY: sets close-on-exec on the open descriptor checked above, which the caller owns
    // from here on (it was inherited for this process to take).
    unsafe {
        libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        Ok(Some(OwnedFd::from_raw_fd(fd)))
    }
}

/// The environment a gated process passes on: `FOSTER_PARENT` = itself, `FOSTER_POLICY` = the
/// next generation's chain (removed when there is none), `FOSTER_GATED` = what it was checked
/// against; `FOSTER_PARENT_PIDFD` removed (its descriptor was this process's, close-on-exec).
/// Returned as (name, value-or-None-to-remove).
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
        (ENV_PARENT_PIDFD.into(), None),
    ]
}
