//! Fork notifications from the kernel's process-events connector, for the standalone source.
//!
//! Owns [`ForkWatch`]: a `NETLINK_CONNECTOR` socket subscribed to `PROC_EVENT_FORK` (filtered in
//! the kernel since Linux 6.6, so other events never reach it). The standalone source drains it
//! without blocking once per reading and learns every process born (under a subtree member,
//! with `--root`), instead of listing `/proc` to find new pids: an idle subtree then costs one
//! `recv` and one `stat` per member, however many processes the rest of the system has, and
//! the whole system is read without a listing whose cost grows with every process. Older kernels
//! grant the subscription only with `CAP_NET_ADMIN`; recent ones (6.18 was tried) grant a
//! filtered one to any user. Either way the kernel says nothing when it refuses, and inside a
//! PID namespace of its own the notices number processes as the initial namespace does: so
//! [`ForkWatch::open`] checks that a child it forks is announced with its own pid, and when it is
//! not, says so and the source lists `/proc` instead. A lost notification (`ENOBUFS`, the socket buffer overflowed)
//! is reported so the caller falls back to one listing.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

const NETLINK_CONNECTOR: libc::c_int = 11;
const NLMSG_HDRLEN: usize = 16;
const CN_MSG_LEN: usize = 20;
/// Offset of `struct proc_event` in a datagram: netlink header, then connector header.
const EVENT: usize = NLMSG_HDRLEN + CN_MSG_LEN;
const PROC_EVENT_NONE: u32 = 0;
const PROC_EVENT_FORK: u32 = 1;
const PROC_CN_MCAST_LISTEN: u32 = 1;

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    b.get(off..off + 4)
        .map(|s| u32::from_ne_bytes(s.try_into().unwrap()))
}

/// A subscription to fork events.
#[derive(Debug)]
pub struct ForkWatch {
    fd: OwnedFd,
    buf: Vec<u8>,
}

/// Notifications were lost: the caller must find new processes another way, once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lost;

impl ForkWatch {
    /// Subscribes, and checks (within a quarter of a second) that notifications arrive.
    pub fn open() -> io::Result<ForkWatch> {
        // SAFETY: plain socket creation; the descriptor is owned below.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_DGRAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                NETLINK_CONNECTOR,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: just created, owned here alone.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: sockaddr_nl is plain data; all-zero is valid.
        let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        addr.nl_groups = libc::CN_IDX_PROC;
        // SAFETY: a valid address of the right length.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        // Listen, fork events only: struct proc_input { mcast_op, event_type } (Linux 6.6+;
        // older kernels expect the operation alone and are sent that).
        let filtered = kernel_at_least(6, 6);
        let payload: Vec<u8> = if filtered {
            [PROC_CN_MCAST_LISTEN, PROC_EVENT_FORK]
                .iter()
                .flat_map(|v| v.to_ne_bytes())
                .collect()
        } else {
            PROC_CN_MCAST_LISTEN.to_ne_bytes().to_vec()
        };
        let total = EVENT + payload.len();
        let mut msg = Vec::with_capacity(total);
        msg.extend_from_slice(&(total as u32).to_ne_bytes()); // nlmsg_len
        msg.extend_from_slice(&(libc::NLMSG_DONE as u16).to_ne_bytes()); // nlmsg_type
        msg.extend_from_slice(&0u16.to_ne_bytes()); // nlmsg_flags
        msg.extend_from_slice(&0u32.to_ne_bytes()); // nlmsg_seq
        msg.extend_from_slice(&std::process::id().to_ne_bytes()); // nlmsg_pid
        msg.extend_from_slice(&libc::CN_IDX_PROC.to_ne_bytes()); // id.idx
        msg.extend_from_slice(&libc::CN_VAL_PROC.to_ne_bytes()); // id.val
        msg.extend_from_slice(&0u32.to_ne_bytes()); // seq
        msg.extend_from_slice(&0u32.to_ne_bytes()); // ack
        msg.extend_from_slice(&(payload.len() as u16).to_ne_bytes()); // len
        msg.extend_from_slice(&0u16.to_ne_bytes()); // flags
        msg.extend_from_slice(&payload);
        // SAFETY: sends our buffer.
        let n = unsafe { libc::send(fd.as_raw_fd(), msg.as_ptr().cast(), msg.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut w = ForkWatch {
            fd,
            buf: vec![0; 8192],
        };
        w.probe(Duration::from_millis(250))?;
        Ok(w)
    }

    /// Checks that notifications arrive: forks a child that exits at once, reaps it, and waits
    /// for its birth notice. The kernel does not say when it refuses a filtered subscription
    /// (its answer is filtered out with the rest), so this is the only way to know.
    fn probe(&mut self, limit: Duration) -> io::Result<()> {
        // SAFETY: the child only calls _exit, which is async-signal-safe.
        let child = unsafe { libc::fork() };
        if child < 0 {
            return Err(io::Error::last_os_error());
        }
        if child == 0 {
            // SAFETY: leaves the child at once, running nothing of the parent's.
            unsafe { libc::_exit(0) };
        }
        // The dashboard is not a supervisor: this child is its own, reaped here by pid.
        let mut status = 0;
        // SAFETY: waits for our own child only.
        while unsafe { libc::waitpid(child, &mut status, 0) } < 0
            && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted
        {}
        let me = std::process::id();
        let deadline = std::time::Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    "no fork notification arrived for a child of this pid (refused without CAP_NET_ADMIN, or another PID namespace)",
                ));
            }
            let mut pfd = libc::pollfd {
                fd: self.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            let r = unsafe { libc::poll(&mut pfd, 1, left.as_millis().max(1) as libc::c_int) };
            if r < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            while let Some(n) = self.recv()? {
                let b = &self.buf[..n];
                match u32_at(b, EVENT) {
                    // An answer to the subscription (unfiltered kernels): ack.err.
                    Some(PROC_EVENT_NONE) => match u32_at(b, EVENT + 16) {
                        Some(0) | None => {}
                        Some(err) => return Err(io::Error::from_raw_os_error(err as i32)),
                    },
                    // Our child's birth: parent_tgid is us.
                    Some(PROC_EVENT_FORK) if u32_at(b, EVENT + 20) == Some(me) => return Ok(()),
                    _ => {}
                }
            }
        }
    }

    /// One datagram, or `None` when none is waiting.
    fn recv(&mut self) -> io::Result<Option<usize>> {
        loop {
            // SAFETY: receives into our buffer, at most its length.
            let n = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    self.buf.as_mut_ptr().cast(),
                    self.buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n >= 0 {
                return Ok(Some(n as usize));
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EAGAIN) => return Ok(None),
                _ => return Err(e),
            }
        }
    }

    /// Reads every waiting notification and calls `on_fork(parent, child)` with the process ids
    /// (thread-group ids) of each new process, in the order they were born. New threads are
    /// left out.
    pub fn drain(&mut self, mut on_fork: impl FnMut(i32, i32)) -> Result<(), Lost> {
        loop {
            let n = match self.recv() {
                Ok(Some(n)) => n,
                Ok(None) => return Ok(()),
                Err(_) => {
                    // ENOBUFS: the buffer overflowed. Empty it, then report the loss.
                    while matches!(self.recv(), Ok(Some(_))) {}
                    return Err(Lost);
                }
            };
            let b = &self.buf[..n];
            if u32_at(b, EVENT) != Some(PROC_EVENT_FORK) {
                continue;
            }
            // event_data.fork: parent_pid, parent_tgid, child_pid, child_tgid.
            let d = EVENT + 16;
            if let (Some(ptgid), Some(cpid), Some(ctgid)) =
                (u32_at(b, d + 4), u32_at(b, d + 8), u32_at(b, d + 12))
                && cpid == ctgid
            {
                on_fork(ptgid as i32, ctgid as i32);
            }
        }
    }
}

/// Whether the running kernel is at least `major.minor`.
fn kernel_at_least(major: u32, minor: u32) -> bool {
    // SAFETY: utsname is plain data; uname fills it.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: a valid utsname to fill.
    if unsafe { libc::uname(&mut u) } != 0 {
        return false;
    }
    // SAFETY: uname NUL-terminates its fields.
    let release = unsafe { std::ffi::CStr::from_ptr(u.release.as_ptr()) }.to_string_lossy();
    let mut parts = release
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|p| p.parse::<u32>().ok());
    let (Some(ma), Some(mi)) = (parts.next(), parts.next()) else {
        return false;
    };
    (ma, mi) >= (major, minor)
}
