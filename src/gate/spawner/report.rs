//! The child's report to its launcher: one 12-byte record `(kind, a, b)` on a close-on-exec
//! pipe, written only when a step fails, and the setup steps it names.

use std::os::fd::RawFd;

// Report records from the child: (kind, a, b), 12 bytes.
pub(super) const R_GATE: u32 = 1;
pub(super) const R_EXEC: u32 = 2;
pub(super) const R_SETUP: u32 = 3;

/// A step of the child before the gate, as a failed one is reported (its number on the wire,
/// its text in [`SpawnError::Setup`]).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetupStep {
    Stdio = 0,
    Groups = 1,
    Gid = 2,
    Uid = 3,
    Chdir = 4,
    OwnIdentity = 5,
    ExtraFd = 6,
    CloseRange = 7,
}

impl SetupStep {
    pub(super) const ALL: [SetupStep; 8] = [
        SetupStep::Stdio,
        SetupStep::Groups,
        SetupStep::Gid,
        SetupStep::Uid,
        SetupStep::Chdir,
        SetupStep::OwnIdentity,
        SetupStep::ExtraFd,
        SetupStep::CloseRange,
    ];

    /// What failed, as an error says it.
    pub fn text(self) -> &'static str {
        match self {
            SetupStep::Stdio => "dup2 of stdio",
            SetupStep::Groups => "setgroups",
            SetupStep::Gid => "setgid",
            SetupStep::Uid => "setuid",
            SetupStep::Chdir => "chdir",
            SetupStep::OwnIdentity => "own identity",
            SetupStep::ExtraFd => "dup2 of an extra descriptor",
            SetupStep::CloseRange => "close_range (the child's own descriptor table)",
        }
    }

    /// The step numbered `n` on the wire.
    pub(super) fn from_wire(n: u32) -> Option<SetupStep> {
        SetupStep::ALL.into_iter().find(|s| *s as u32 == n)
    }
}

/// Writes the child's report. Panic-free (it runs in the child): constant indexes into arrays
/// of four, which the compiler checks.
pub(super) fn report(fd: RawFd, kind: u32, a: u32, b: i32) {
    let (k, a, b) = (kind.to_ne_bytes(), a.to_ne_bytes(), b.to_ne_bytes());
    let buf = [
        k[0], k[1], k[2], k[3], a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3],
    ];
    // SAFETY: a stack buffer to a descriptor we own.
    unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
}
