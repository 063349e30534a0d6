//! Process identity: a pid bound to its start time.
//!
//! Owns [`Identity`], the `(pid, starttime)` pair that names one process for its whole life, so
//! that a reused pid never passes for the process that held it before. Its text form
//! `PID:STARTTIME` is how identities travel through the environment (`FOSTER_PARENT`) and on
//! the command line (`foster identity PID`). [`StatPath`] is the allocation-free way to re-read a
//! known pid's start time between fork and exec.

use std::ffi::CString;
use std::fmt;
use std::io;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::procstat::{StatError, StatFields};

/// One process for its whole life: its pid and its start time (field 22 of
/// `/proc/<pid>/stat`, clock ticks after boot). Two identities are equal only when both match.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Identity {
    pub pid: i32,
    pub start_time: u64,
}

/// Why an identity could not be captured or parsed.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// No process has this pid (or it is not visible from here).
    #[error("no process with pid {0}")]
    NoSuchProcess(i32),
    /// `/proc/<pid>/stat` exists but could not be read.
    #[error("cannot read /proc/{0}/stat: {1}")]
    Unreadable(i32, #[source] io::Error),
    /// `/proc/<pid>/stat` did not parse.
    #[error("cannot parse /proc/{0}/stat: {1}")]
    BadStat(i32, #[source] StatError),
    /// A text identity that is not `PID:STARTTIME`; the string says what is wrong.
    #[error("{0}")]
    BadText(String),
}

impl Identity {
    /// Captures the identity of the process `pid` now.
    pub fn of(pid: i32) -> Result<Identity, IdentityError> {
        if pid <= 0 {
            return Err(IdentityError::NoSuchProcess(pid));
        }
        let bytes = match std::fs::read(format!("/proc/{pid}/stat")) {
            Ok(b) => b,
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ESRCH)) => {
                return Err(IdentityError::NoSuchProcess(pid));
            }
            Err(e) => return Err(IdentityError::Unreadable(pid, e)),
        };
        let f = StatFields::parse(&bytes).map_err(|e| IdentityError::BadStat(pid, e))?;
        Ok(Identity {
            pid,
            start_time: f.start_time,
        })
    }

    /// The identity of the calling process.
    pub fn current() -> Result<Identity, IdentityError> {
        Identity::of(std::process::id() as i32)
    }

    /// The identity of the calling process's parent, or `None` when `getppid()` returns 0 (the
    /// parent lives in another PID namespace): "cannot tell", neither alive nor gone.
    pub fn parent() -> Result<Option<Identity>, IdentityError> {
        let ppid = nix::unistd::getppid().as_raw();
        if ppid == 0 {
            return Ok(None);
        }
        Identity::of(ppid).map(Some)
    }

    /// True while the process this identity names still exists (a zombie counts as existing).
    pub fn is_alive(&self) -> bool {
        matches!(Identity::of(self.pid), Ok(now) if now == *self)
    }
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.pid, self.start_time)
    }
}

impl FromStr for Identity {
    type Err = IdentityError;

    /// Parses `PID:STARTTIME`, both decimal, the pid positive.
    fn from_str(s: &str) -> Result<Identity, IdentityError> {
        let bad = |why: &str| IdentityError::BadText(format!("identity {s:?}: {why}"));
        let (pid, start) = s
            .split_once(':')
            .ok_or_else(|| bad("expected PID:STARTTIME"))?;
        let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
        if !digits(pid) {
            return Err(bad("the pid is not a decimal number"));
        }
        if !digits(start) {
            return Err(bad("the start time is not a decimal number"));
        }
        let pid: i32 = pid.parse().map_err(|_| bad("the pid is out of range"))?;
        if pid == 0 {
            return Err(bad("the pid must be positive"));
        }
        let start_time: u64 = start
            .parse()
            .map_err(|_| bad("the start time is out of range"))?;
        Ok(Identity { pid, start_time })
    }
}

/// A precomputed `/proc/<pid>/stat` path whose start time can be re-read without allocating:
/// only `open`, `read` and `close`, all async-signal-safe. Built before fork, used after.
#[derive(Debug, Clone)]
pub struct StatPath {
    pid: i32,
    path: CString,
}

/// What an allocation-free re-read of a start time found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatRead {
    /// The process exists with this start time.
    StartTime(u64),
    /// No such process.
    Gone,
    /// The file could not be read or parsed (the errno, or 0 for a parse failure).
    Failed(i32),
}

impl StatPath {
    /// Precomputes the path for `pid`.
    pub fn new(pid: i32) -> StatPath {
        let path = CString::new(format!("/proc/{pid}/stat")).expect("no NUL in a number");
        StatPath { pid, path }
    }

    /// The pid this path reads.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Re-reads the start time. Async-signal-safe: no allocation, no locks; the buffer lives on
    /// the stack.
    pub fn read_start_time(&self) -> StatRead {
        let mut buf = [0u8; 1024];
        // SAFETY: a valid NUL-terminated path; the fd is closed on every path below.
        let fd = unsafe { libc::open(self.path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        if fd < 0 {
            let err = io::Error::last_os_error().raw_os_error().unwrap_or(0);
            return if err == libc::ENOENT || err == libc::ESRCH {
                StatRead::Gone
            } else {
                StatRead::Failed(err)
            };
        }
        let mut len = 0usize;
        loop {
            // SAFETY: writes at most the remaining space of `buf`.
            let n = unsafe { libc::read(fd, buf[len..].as_mut_ptr().cast(), buf.len() - len) };
            if n < 0 {
                let err = io::Error::last_os_error().raw_os_error().unwrap_or(0);
                if err == libc::EINTR {
                    continue;
                }
                // SAFETY: fd is ours.
                unsafe { libc::close(fd) };
                return if err == libc::ESRCH {
                    StatRead::Gone
                } else {
                    StatRead::Failed(err)
                };
            }
            if n == 0 || len + n as usize == buf.len() {
                len += n as usize;
                break;
            }
            len += n as usize;
        }
        // SAFETY: fd is ours.
        unsafe { libc::close(fd) };
        match StatFields::parse(&buf[..len]) {
            Ok(f) => StatRead::StartTime(f.start_time),
            Err(_) => StatRead::Failed(0),
        }
    }

    /// Whether the process this path reads is still `expected`.
    pub fn matches(&self, expected: &Identity) -> bool {
        expected.pid == self.pid
            && self.read_start_time() == StatRead::StartTime(expected.start_time)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_round_trip() {
        let id = Identity {
            pid: 4242,
            start_time: 123456,
        };
        assert_eq!(id.to_string(), "4242:123456");
        assert_eq!("4242:123456".parse::<Identity>().unwrap(), id);
    }

    #[test]
    fn bad_text_is_named() {
        for (s, why) in [
            ("", "expected PID:STARTTIME"),
            ("4242", "expected PID:STARTTIME"),
            ("x:1", "pid is not a decimal"),
            ("-1:1", "pid is not a decimal"),
            ("1:", "start time is not a decimal"),
            ("1:2:3", "start time is not a decimal"),
            ("0:5", "must be positive"),
            ("99999999999:5", "pid is out of range"),
            (" 1:2", "pid is not a decimal"),
        ] {
            let e = s.parse::<Identity>().unwrap_err().to_string();
            assert!(e.contains(why), "{s:?} gave {e:?}, wanted {why:?}");
        }
    }

    #[test]
    fn equal_only_when_both_match() {
        let a = Identity {
            pid: 10,
            start_time: 5,
        };
        assert_ne!(
            a,
            Identity {
                pid: 10,
                start_time: 6
            }
        );
        assert_ne!(
            a,
            Identity {
                pid: 11,
                start_time: 5
            }
        );
        assert_eq!(
            a,
            Identity {
                pid: 10,
                start_time: 5
            }
        );
    }

    #[test]
    fn current_and_parent_are_live() {
        let me = Identity::current().unwrap();
        assert_eq!(me.pid, std::process::id() as i32);
        assert!(me.is_alive());
        let parent = Identity::parent()
            .unwrap()
            .expect("test runner has a visible parent");
        assert!(parent.is_alive());
        assert!(
            !Identity {
                pid: me.pid,
                start_time: me.start_time + 1
            }
            .is_alive()
        );
    }

    #[test]
    fn missing_pid_is_a_clear_error() {
        // Pid max is at most 2^22; this pid cannot exist.
        let e = Identity::of(i32::MAX).unwrap_err();
        assert!(matches!(e, IdentityError::NoSuchProcess(p) if p == i32::MAX));
        assert_eq!(e.to_string(), format!("no process with pid {}", i32::MAX));
        assert!(matches!(
            Identity::of(0),
            Err(IdentityError::NoSuchProcess(0))
        ));
    }

    #[test]
    fn stat_path_rereads_without_allocating() {
        let me = Identity::current().unwrap();
        let p = StatPath::new(me.pid);
        assert_eq!(p.read_start_time(), StatRead::StartTime(me.start_time));
        assert!(p.matches(&me));
        assert_eq!(StatPath::new(i32::MAX).read_start_time(), StatRead::Gone);
    }
}
