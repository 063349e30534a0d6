//! Why a gate stops a helper, and the exit status of each reason.
//!
//! The environment variables (see [`super::policy`] for the policy text):
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

use std::fmt;
use std::io;

/// The expected parent is gone, or is not this process's parent (the check path).
pub const EXIT_PARENT_GONE: i32 = 120;
/// `prctl(PR_SET_PDEATHSIG)` failed, or `PR_GET_PDEATHSIG` read back another value, or the
/// signal could never arrive (the program would be PID 1 of its PID namespace).
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

/// Why the gate stopped the helper. Each maps to one exit status ([`GateStop::exit_status`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GateStop {
    /// The expected parent is gone or is not the parent (`ppid` is what `getppid()` said), found
    /// by `path` (the check, or the lifeline when `getppid()` could not tell).
    #[error("{}", parent_gone(*ppid, *path))]
    ParentGone { ppid: i32, path: DeathPath },
    /// `getppid()` returned 0 and no lifeline was given.
    #[error(
        "cannot tell whether the parent lives: getppid() is 0 (parent in another PID namespace) \
         and no lifeline was given"
    )]
    CannotTell,
    /// `prctl(PR_SET_PDEATHSIG)` failed with this errno.
    #[error("prctl(PR_SET_PDEATHSIG) failed: {}", io::Error::from_raw_os_error(*errno))]
    ArmFailed { errno: i32 },
    /// `PR_GET_PDEATHSIG` read back `got` instead of the armed signal.
    #[error("PR_GET_PDEATHSIG read back {got} instead of the armed signal")]
    ArmNotKept { got: i32 },
    /// The process about to exec is PID 1 of its PID namespace and `signal` is not SIGKILL: the
    /// kernel discards a signal at its default disposition sent to a namespace's init, so the
    /// program would be armed in name only.
    #[error(
        "this process is PID 1 of its PID namespace, and the kernel discards {} (at its default \
         disposition after exec) sent to a namespace's init: the parent-death signal would never \
         arrive; give the namespace an init of its own (foster init, or foster exec, which stays \
         as the program's init when it is PID 1) and launch the program under it, or arm KILL",
        crate::process::signal::name(*signal)
    )]
    NamespaceInit { signal: i32 },
    /// A step before arming failed (`sigprocmask`/`sigaction`) with this errno.
    #[error(
        "cannot set up the signal path (mask or disposition): {}",
        io::Error::from_raw_os_error(*errno)
    )]
    SignalPathFailed { errno: i32 },
    /// The parent's `stat` could not be read (errno, 0 for a parse failure).
    #[error("{}", check_unreadable(*errno))]
    CheckUnreadable { errno: i32 },
}

fn parent_gone(ppid: i32, path: DeathPath) -> String {
    match path {
        DeathPath::Lifeline => {
            format!("the expected parent is gone (the lifeline reported it; getppid() is {ppid})")
        }
        _ => format!(
            "the expected parent is gone or is not this process's parent (getppid() is {ppid})"
        ),
    }
}

fn check_unreadable(errno: i32) -> String {
    match errno {
        0 => "cannot parse the expected parent's /proc stat file".into(),
        e => format!(
            "cannot read the expected parent's /proc stat file: {}",
            io::Error::from_raw_os_error(e)
        ),
    }
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
            GateStop::ArmFailed { .. }
            | GateStop::ArmNotKept { .. }
            | GateStop::NamespaceInit { .. } => EXIT_ARM_FAILED,
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
            GateStop::NamespaceInit { signal } => (8, signal),
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
            8 => GateStop::NamespaceInit { signal: value },
            _ => return None,
        })
    }
}

/// How a passed gate confirmed the parent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Passage {
    /// `getppid()` and the parent's start time matched the expected identity.
    Verified,
    /// `getppid()` could not tell; the lifeline said the expected parent still lives.
    Lifeline,
}

#[cfg(test)]
mod tests {
    use super::*;

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
            GateStop::NamespaceInit {
                signal: libc::SIGTERM,
            },
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
        let ns = GateStop::NamespaceInit {
            signal: libc::SIGTERM,
        };
        assert_eq!(ns.exit_status(), EXIT_ARM_FAILED);
        assert!(
            ns.to_string().starts_with(
                "this process is PID 1 of its PID namespace, and the kernel discards SIGTERM"
            ),
            "{ns}"
        );
    }
}
