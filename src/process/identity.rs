//! Process identity: a pid bound to its start time, and a reference that holds the process.
//!
//! Owns [`Identity`], the `(pid, starttime)` pair that names one process for its whole life, so
//! that a reused pid never passes for the process that held it before. Its text form
//! `PID:STARTTIME` is how identities travel through the environment (`FOSTER_PARENT`) and on
//! the command line (`foster identity PID`). [`StatPath`] is the allocation-free way to re-read a
//! known pid's start time between fork and exec.
//!
//! Also owns [`ProcessRef`], an identity with, where foster holds one, a pidfd of the process:
//! the one way foster opens a pidfd ([`pidfd_open`]), checks, signals and waits for a process,
//! and what a pidfd says of its process ([`read_pidfd_info`], [`pidfd_pid`], [`pidfd_inode`]).

use std::ffi::{CStr, CString};
use std::fmt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::process::procstat::{StatError, StatFields};

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
    /// `pidfd_open` failed for another reason than the process being gone.
    #[error("pidfd_open of pid {0}: {1}")]
    Pidfd(i32, #[source] io::Error),
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

    /// Re-reads the start time. Async-signal-safe and panic-free: no allocation, no locks;
    /// the buffer lives on the stack.
    pub fn read_start_time(&self) -> StatRead {
        let mut buf = [0u8; 1024];
        match read_into(&self.path, &mut buf) {
            Err(e) if e == libc::ENOENT || e == libc::ESRCH => StatRead::Gone,
            Err(e) => StatRead::Failed(e),
            Ok(len) => match StatFields::parse(buf.get(..len).unwrap_or_default()) {
                Ok(f) => StatRead::StartTime(f.start_time),
                Err(_) => StatRead::Failed(0),
            },
        }
    }

    /// Whether the process this path reads is still `expected`.
    pub fn matches(&self, expected: &Identity) -> bool {
        expected.pid == self.pid
            && self.read_start_time() == StatRead::StartTime(expected.start_time)
    }
}

/// Reads the file at `path` into `buf` (at most its length; a `/proc` file whole when it fits)
/// with only `open`, `read` and `close`: async-signal-safe, allocation-free and panic-free, for
/// the child between fork and exec. The number of bytes read, or the errno of the call that
/// failed.
pub fn read_into(path: &CStr, buf: &mut [u8]) -> Result<usize, i32> {
    // SAFETY: a NUL-terminated path; the descriptor is closed below on every path.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(crate::base::sys::errno());
    }
    let mut len = 0usize;
    let r = loop {
        // `len` never passes `buf.len()` (a read returns at most the room it is given), so
        // `get_mut` always finds the rest; an empty rest is a full buffer.
        let rest = buf.get_mut(len..).unwrap_or_default();
        if rest.is_empty() {
            break Ok(len);
        }
        // SAFETY: reads at most `rest.len()` bytes into `rest`, a live slice of `buf`.
        let n = unsafe { libc::read(fd, rest.as_mut_ptr().cast(), rest.len()) };
        match usize::try_from(n) {
            Ok(0) => break Ok(len),
            Ok(n) => len = len.saturating_add(n),
            Err(_) if crate::base::sys::errno() == libc::EINTR => continue,
            Err(_) => break Err(crate::base::sys::errno()),
        }
    };
    // SAFETY: `fd` was opened above and is closed once.
    unsafe { libc::close(fd) };
    r
}

/// Opens a pidfd for `pid` (close-on-exec): foster's one `pidfd_open`. It holds whatever
/// process has the pid now; [`ProcessRef::open`] checks that it is the one expected.
pub fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    pidfd_open_flags(pid, 0)
}

/// Opens a pidfd for the thread `tid` (`PIDFD_THREAD`, Linux 6.9): readable once that thread
/// has ended.
pub fn pidfd_open_thread(tid: i32) -> io::Result<OwnedFd> {
    const PIDFD_THREAD: libc::c_int = libc::O_EXCL;
    pidfd_open_flags(tid, PIDFD_THREAD)
}

fn pidfd_open_flags(pid: i32, flags: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: a plain syscall with integer arguments.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Whether the process a pidfd holds was reaped, by the `Pid:` line of its `fdinfo`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PidfdPid {
    /// Not reaped yet (running, or a zombie): its pid, as the `/proc` foster reads numbers it
    /// (0 when the process is in a PID namespace that one cannot see). While a pidfd says so,
    /// the pid is that process's: a pid passes to another process only once its holder was
    /// reaped.
    Pid(i32),
    /// Reaped (`Pid: -1`): its pid may be another process's already.
    Reaped,
}

/// What a pidfd's `fdinfo` says of the process it holds: the one reading of that file, for
/// its `Pid:` line (is the process reaped, what is its pid here) and its `NSpid:` line (its
/// pid in each PID namespace from the one the `/proc` read shows down to its own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PidfdInfo {
    /// The `Pid:` line.
    pub pid: PidfdPid,
    /// The `NSpid:` line, outermost first ([`crate::process::procstat::parse_nspid`]); `None` once
    /// the process was reaped (the kernel writes -1) or on a kernel without the line.
    pub nspid: Option<Vec<i32>>,
}

/// The most of a pidfd's `fdinfo` read (the kernel writes about 100 bytes).
const FDINFO_MAX: usize = 4096;

impl PidfdInfo {
    /// Parses the text of a pidfd's `fdinfo`; `None` without a `Pid:` line with a number (the
    /// descriptor is not a pidfd). Any bytes are safe to give it.
    pub fn parse(text: &[u8]) -> Option<PidfdInfo> {
        let text = &text[..text.len().min(FDINFO_MAX)];
        let pid: i32 = text
            .split(|&b| b == b'\n')
            .find_map(|l| l.strip_prefix(b"Pid:"))
            .and_then(|v| std::str::from_utf8(v).ok())
            .and_then(|v| v.trim().parse().ok())?;
        Some(PidfdInfo {
            pid: if pid < 0 {
                PidfdPid::Reaped
            } else {
                PidfdPid::Pid(pid)
            },
            nspid: crate::process::procstat::parse_nspid(text),
        })
    }
}

/// Reads what the pidfd `pidfd` (a descriptor of this process) says of its process: its
/// `fdinfo`, through `proc` (a `/proc` directory held open, as the scanner's, which may be a
/// `/proc` a path no longer reaches) or through `/proc` when `None`, into `buf` (reused; at
/// most 4 KiB read). An error when the file cannot be read or is not a pidfd's.
pub fn read_pidfd_info(
    proc: Option<BorrowedFd<'_>>,
    pidfd: BorrowedFd<'_>,
    buf: &mut Vec<u8>,
) -> io::Result<PidfdInfo> {
    use std::io::Read;
    let (dir, path) = match proc {
        Some(d) => (d.as_raw_fd(), format!("self/fdinfo/{}", pidfd.as_raw_fd())),
        None => (
            libc::AT_FDCWD,
            format!("/proc/self/fdinfo/{}", pidfd.as_raw_fd()),
        ),
    };
    let path = CString::new(path).expect("no NUL in a number");
    // SAFETY: a NUL-terminated path; the descriptor is owned below.
    let fd = unsafe { libc::openat(dir, path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: just opened, owned here alone.
    let file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    buf.clear();
    file.take(FDINFO_MAX as u64).read_to_end(buf)?;
    PidfdInfo::parse(buf).ok_or_else(|| io::Error::other("not a pidfd: no Pid: line in its fdinfo"))
}

/// The pid of the process `pidfd` holds, from `/proc/self/fdinfo/FD` (its `Pid:` line):
/// [`read_pidfd_info`]'s `pid`.
pub fn pidfd_pid(pidfd: BorrowedFd<'_>) -> io::Result<PidfdPid> {
    read_pidfd_info(None, pidfd, &mut Vec::new()).map(|i| i.pid)
}

/// Whether the process `pidfd` holds has not been reaped yet (it runs, or is a zombie): signal 0
/// through the pidfd, which fails with `ESRCH` only once it was reaped (`EPERM` says it exists).
/// One system call, where [`pidfd_pid`] reads a file.
pub fn pidfd_unreaped(pidfd: BorrowedFd<'_>) -> bool {
    match pidfd_send_signal(pidfd, 0) {
        Ok(()) => true,
        Err(e) => e.raw_os_error() == Some(libc::EPERM),
    }
}

/// The number that tells the process `pidfd` holds from every other process: the inode number
/// of a pidfd on pidfs (Linux 6.9+), the same for every pidfd of one process and never given to
/// another while the system runs. `None` where the kernel has no such number: before pidfs
/// (every pidfd then shares one anonymous inode), or where inode numbers are 32 bits wide (pidfs
/// then reuses them with a generation count foster does not read).
pub fn pidfd_inode(pidfd: BorrowedFd<'_>) -> Option<u64> {
    const PIDFS_MAGIC: i64 = 0x5049_4446;
    if cfg!(not(target_pointer_width = "64")) {
        return None;
    }
    let fs = nix::sys::statfs::fstatfs(pidfd).ok()?;
    if fs.filesystem_type().0 as i64 != PIDFS_MAGIC {
        return None;
    }
    let st = nix::sys::stat::fstat(pidfd).ok()?;
    Some(st.st_ino)
}

/// Sends `sig` to the process `pidfd` holds (no siginfo, no flags).
pub fn pidfd_send_signal(pidfd: BorrowedFd<'_>, sig: i32) -> io::Result<()> {
    pidfd_send_signal_flags(pidfd, sig, 0)
}

/// `pidfd_send_signal` with `PIDFD_SIGNAL_PROCESS_GROUP` (Linux 6.9): to the process group whose
/// id is the pid `pidfd` holds.
const PIDFD_SIGNAL_PROCESS_GROUP: libc::c_uint = 1 << 2;

fn pidfd_send_signal_flags(pidfd: BorrowedFd<'_>, sig: i32, flags: libc::c_uint) -> io::Result<()> {
    // SAFETY: a live descriptor and integer arguments; no siginfo.
    let r = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            sig,
            std::ptr::null::<libc::siginfo_t>(),
            flags,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Polls `fd` for readability with a timeout (`None`: forever); true when readable. A pidfd is
/// readable once its process has ended.
pub fn poll_readable(fd: RawFd, timeout: Option<Duration>) -> bool {
    let mut p = [crate::base::sys::PollFd::input(fd)];
    crate::base::sys::poll(&mut p, timeout).is_ok_and(|n| n > 0)
}

/// A process named by its identity and, when foster holds one, its pidfd ("pinned"): while the
/// pidfd is held, the pid cannot pass to another process unnoticed, a signal reaches this
/// process or none, and its end can be waited for.
///
/// The one way foster opens a pidfd ([`pidfd_open`]), checks that it holds the process named
/// (the pidfd is opened first and the start time read after, the order of systemd's
/// `pidref_verify`, so a pid reused in between is never taken for the process), signals it (or
/// the process group it leads) and waits for its end. Signalling a process by identity
/// ([`signal`]) is that reference opened, checked, signalled and closed. What a pidfd says of
/// its process, however foster got it (a notify datagram brings its sender's): its pid until
/// it is reaped and its pid in each PID namespace (its `fdinfo`, read once here for both:
/// [`read_pidfd_info`], [`pidfd_pid`]), and the number that tells it from any other
/// ([`pidfd_inode`]).
#[derive(Debug)]
pub struct ProcessRef {
    id: Identity,
    pidfd: Option<OwnedFd>,
}

impl ProcessRef {
    /// Opens a pidfd for `id.pid`, then checks that the process it holds is `id` (its start
    /// time read again now that the pidfd pins it). [`IdentityError::NoSuchProcess`] when the
    /// process has ended or the pid names another process.
    pub fn open(id: Identity) -> Result<ProcessRef, IdentityError> {
        let pidfd = match pidfd_open(id.pid) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {
                return Err(IdentityError::NoSuchProcess(id.pid));
            }
            Err(e) => return Err(IdentityError::Pidfd(id.pid, e)),
        };
        let r = ProcessRef::pinned(id, pidfd);
        if !r.verify() {
            return Err(IdentityError::NoSuchProcess(id.pid));
        }
        Ok(r)
    }

    /// A reference to `id` holding `pidfd`, a pidfd known to hold that very process (the one
    /// `clone(CLONE_PIDFD)` returned for it, or one already checked).
    pub fn pinned(id: Identity, pidfd: OwnedFd) -> ProcessRef {
        ProcessRef {
            id,
            pidfd: Some(pidfd),
        }
    }

    /// A reference to `id` without a pidfd: each operation opens one and checks it first.
    pub fn unpinned(id: Identity) -> ProcessRef {
        ProcessRef { id, pidfd: None }
    }

    /// The process's identity.
    pub fn identity(&self) -> Identity {
        self.id
    }

    /// The pidfd, when held.
    pub fn pidfd(&self) -> Option<BorrowedFd<'_>> {
        self.pidfd.as_ref().map(AsFd::as_fd)
    }

    /// The pidfd, when held, given up to the caller.
    pub fn into_pidfd(self) -> Option<OwnedFd> {
        self.pidfd
    }

    /// Whether the pid still names this process (a zombie counts): its start time is read
    /// again.
    pub fn verify(&self) -> bool {
        self.id.is_alive()
    }

    /// Whether the process has ended (a zombie has): the pidfd polled without waiting, or,
    /// without one, the identity checked.
    pub fn has_ended(&self) -> bool {
        match &self.pidfd {
            Some(fd) => poll_readable(fd.as_raw_fd(), Some(Duration::ZERO)),
            None => !self.verify(),
        }
    }

    /// Blocks until the process ends or `timeout` passes (`None`: no limit); true when it
    /// ended. Without a pidfd nothing can be waited on: it says whether the process has ended
    /// now.
    pub fn wait(&self, timeout: Option<Duration>) -> bool {
        match &self.pidfd {
            Some(fd) => poll_readable(fd.as_raw_fd(), timeout),
            None => self.has_ended(),
        }
    }

    /// Sends `sig` to this process and no other: through the held pidfd, or through one opened
    /// and checked now. `ESRCH` when the process is gone (or the pid names another one).
    pub fn signal(&self, sig: i32) -> io::Result<()> {
        match &self.pidfd {
            Some(fd) => pidfd_send_signal(fd.as_fd(), sig),
            None => {
                let r = ProcessRef::open(self.id).map_err(|e| match e {
                    IdentityError::Pidfd(_, e) => e,
                    _ => io::Error::from_raw_os_error(libc::ESRCH),
                })?;
                r.signal(sig)
            }
        }
    }

    /// Sends `sig` to the process group this process leads (the group whose id is its pid):
    /// through the held pidfd with `PIDFD_SIGNAL_PROCESS_GROUP` (Linux 6.9), which names that
    /// group and no other even once its leader has been reaped; without a pidfd, or on an older
    /// kernel (`EINVAL`), `kill(-pid)`, which names the right group while this process is an
    /// unreaped child of the caller. `ESRCH` when the group is empty.
    pub fn signal_group(&self, sig: i32) -> io::Result<()> {
        if let Some(fd) = &self.pidfd {
            match pidfd_send_signal_flags(fd.as_fd(), sig, PIDFD_SIGNAL_PROCESS_GROUP) {
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
                r => return r,
            }
        }
        // SAFETY: kill with integers.
        if unsafe { libc::kill(-self.id.pid, sig) } == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

/// Sends `sig` to the process `id` only if it still is that process: a pidfd opened, the
/// identity checked, the signal sent through the pidfd ([`ProcessRef::signal`]).
pub fn signal(id: Identity, sig: i32) -> io::Result<()> {
    ProcessRef::unpinned(id).signal(sig)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One reading of a pidfd's `fdinfo` gives both lines: the pid and the `NSpid` of a live
    /// child (the same as its `status` says), through `/proc` or a `/proc` directory held open;
    /// reaped, `Pid: -1` and no `NSpid`. A descriptor that is no pidfd is an error.
    #[test]
    fn a_pidfds_fdinfo_is_read_once_for_its_pid_and_nspid() {
        let mut child = std::process::Command::new("sleep")
            .arg("100")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let fd = pidfd_open(pid).unwrap();
        let proc = std::fs::File::open("/proc").unwrap();
        let mut buf = Vec::new();
        let status = std::fs::read(format!("/proc/{pid}/status")).unwrap();
        for dir in [None, Some(proc.as_fd())] {
            let info = read_pidfd_info(dir, fd.as_fd(), &mut buf).unwrap();
            assert_eq!(info.pid, PidfdPid::Pid(pid));
            assert_eq!(info.nspid, crate::process::procstat::parse_nspid(&status));
            assert_eq!(info.nspid.as_ref().and_then(|n| n.first()), Some(&pid));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        for dir in [None, Some(proc.as_fd())] {
            let info = read_pidfd_info(dir, fd.as_fd(), &mut buf).unwrap();
            assert_eq!((info.pid, info.nspid), (PidfdPid::Reaped, None));
        }
        assert!(
            read_pidfd_info(None, proc.as_fd(), &mut buf).is_err(),
            "not a pidfd"
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
        /// No text makes the parser panic, and what it gives holds a pid line's number.
        #[test]
        fn pidfd_info_parses_any_bytes(
            head in proptest::collection::vec(proptest::num::u8::ANY, 0..100),
            pid in -1i32..100_000,
            tail in proptest::collection::vec(proptest::num::u8::ANY, 0..100),
        ) {
            let _ = PidfdInfo::parse(&head);
            let mut text = head.clone();
            text.extend_from_slice(format!("\nPid:\t{pid}\nNSpid:\t{pid}\n").as_bytes());
            text.extend_from_slice(&tail);
            if let Some(i) = PidfdInfo::parse(&text) {
                proptest::prop_assert!(i.nspid.iter().flatten().all(|&p| p > 0));
            }
        }
    }

    /// A pidfd says its process's pid until the process is reaped, then that it was; its pidfs
    /// inode number (where the kernel has one) is its process's alone, and stays after the
    /// reaping.
    #[test]
    fn a_pidfd_tells_its_pid_until_reaped_and_its_process_by_inode() {
        let mut a = std::process::Command::new("sleep")
            .arg("100")
            .spawn()
            .unwrap();
        let b = std::process::Command::new("sleep")
            .arg("100")
            .spawn()
            .unwrap();
        let pid = a.id() as i32;
        let (fa, fa2) = (pidfd_open(pid).unwrap(), pidfd_open(pid).unwrap());
        let fb = pidfd_open(b.id() as i32).unwrap();
        assert_eq!(pidfd_pid(fa.as_fd()).unwrap(), PidfdPid::Pid(pid));
        assert!(pidfd_unreaped(fa.as_fd()));
        let inode = pidfd_inode(fa.as_fd());
        if inode.is_some() {
            assert_eq!(pidfd_inode(fa2.as_fd()), inode, "one process, one number");
            assert_ne!(pidfd_inode(fb.as_fd()), inode, "another process, another");
        }
        a.kill().unwrap();
        // Ended, not yet reaped: a zombie still has its pid.
        assert!(poll_readable(fa.as_raw_fd(), Some(Duration::from_secs(10))));
        assert_eq!(pidfd_pid(fa.as_fd()).unwrap(), PidfdPid::Pid(pid));
        assert!(pidfd_unreaped(fa.as_fd()));
        a.wait().unwrap();
        assert_eq!(pidfd_pid(fa.as_fd()).unwrap(), PidfdPid::Reaped);
        assert!(!pidfd_unreaped(fa.as_fd()));
        assert_eq!(
            pidfd_inode(fa.as_fd()),
            inode,
            "the number outlives the process"
        );
        let _ = pidfd_send_signal(fb.as_fd(), libc::SIGKILL);
        let mut b = b;
        b.wait().unwrap();
    }

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
    fn a_reference_signals_its_process_and_no_other() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let id = Identity::of(child.id() as i32).unwrap();
        let r = ProcessRef::open(id).unwrap();
        assert!(r.verify() && !r.has_ended());
        assert!(!r.wait(Some(Duration::from_millis(1))));
        // Another start time under the same pid is another process: never signalled.
        let other = Identity {
            pid: id.pid,
            start_time: id.start_time + 1,
        };
        assert!(matches!(
            ProcessRef::open(other),
            Err(IdentityError::NoSuchProcess(_))
        ));
        assert_eq!(
            signal(other, libc::SIGKILL).unwrap_err().raw_os_error(),
            Some(libc::ESRCH)
        );
        assert!(r.verify(), "the check let a signal through");
        signal(id, libc::SIGSTOP).unwrap();
        signal(id, libc::SIGCONT).unwrap();
        r.signal(libc::SIGKILL).unwrap();
        assert!(r.wait(Some(Duration::from_secs(10))), "never ended");
        assert!(r.has_ended());
        child.wait().unwrap();
        // Reaped: the held pidfd reports it gone, the identity names nothing.
        assert_eq!(
            r.signal(libc::SIGKILL).unwrap_err().raw_os_error(),
            Some(libc::ESRCH)
        );
        assert!(!ProcessRef::unpinned(id).verify());
        assert!(ProcessRef::open(id).is_err());
    }

    /// A group leader's reference signals its whole group, and still names that group once the
    /// leader is reaped.
    #[test]
    fn a_reference_signals_the_group_its_process_leads() {
        use std::io::BufRead;
        use std::os::unix::process::CommandExt;
        let mut leader = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & echo $!; wait"])
            .process_group(0)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(leader.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let member = ProcessRef::open(Identity::of(line.trim().parse().unwrap()).unwrap()).unwrap();
        let id = Identity::of(leader.id() as i32).unwrap();
        let r = ProcessRef::pinned(id, pidfd_open(id.pid).unwrap());
        // The leader alone first, reaped: its group lives on in the member.
        r.signal(libc::SIGKILL).unwrap();
        leader.wait().unwrap();
        assert!(!member.has_ended());
        r.signal_group(libc::SIGKILL).unwrap();
        assert!(
            member.wait(Some(Duration::from_secs(10))),
            "the member outlived its group's signal"
        );
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
