//! Births and ends of processes as the kernel announces them: its process-events connector.
//!
//! Owns [`Connector`], the one subscription foster makes to the kernel's process events (netlink
//! `NETLINK_CONNECTOR`, group `CN_IDX_PROC`), for both its users: the supervisor learns every
//! birth and end in its tree as it happens ([`Wanted::ForksAndExits`], `supervisor/births.rs`),
//! and the dashboard's `/proc` source learns the pids born since its last reading instead of
//! listing `/proc` ([`Wanted::Forks`]).
//!
//! The kernel grants it with conditions (Linux 6.6+ for a filtered subscription, the initial
//! namespaces, `CAP_NET_ADMIN`): [`Connector`] lists them.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

const NETLINK_CONNECTOR: libc::c_int = 11;
const NLMSG_HDRLEN: usize = 16;
const CN_MSG_LEN: usize = 20;
/// Offset of `struct proc_event` in a datagram: netlink header, then connector header.
const EVENT: usize = NLMSG_HDRLEN + CN_MSG_LEN;
/// Offset of `event_data` in `struct proc_event` (what, cpu, timestamp_ns).
const DATA: usize = EVENT + 16;
const PROC_EVENT_NONE: u32 = 0;
const PROC_EVENT_FORK: u32 = 1;
const PROC_EVENT_EXIT: u32 = 0x8000_0000;
const PROC_CN_MCAST_LISTEN: u32 = 1;

/// The receive buffer asked for: room for tens of thousands of announcements.
pub const RCVBUF: libc::c_int = 8 << 20;

/// How long [`Connector::probe`] waits for its child's birth to be announced.
pub const PROBE_LIMIT: Duration = Duration::from_millis(250);

/// The inode numbers of the initial PID and user namespaces (`PROC_PID_INIT_INO`,
/// `PROC_USER_INIT_INO`), fixed by the kernel.
const INIT_PID_NS: u64 = 0xEFFF_FFFC;
const INIT_USER_NS: u64 = 0xEFFF_FFFD;

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    let s = b.get(off..off + 4)?;
    Some(u32::from_ne_bytes([s[0], s[1], s[2], s[3]]))
}

/// Which events a subscription wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wanted {
    /// Births only (the dashboard).
    Forks,
    /// Births and ends (the supervisor).
    ForksAndExits,
}

impl Wanted {
    fn mask(self) -> u32 {
        match self {
            Wanted::Forks => PROC_EVENT_FORK,
            Wanted::ForksAndExits => PROC_EVENT_FORK | PROC_EVENT_EXIT,
        }
    }
}

/// One announcement, pids as the initial PID namespace numbers them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcEvent {
    /// A new process (not a new thread): `child`, whose parent is `parent` (a thread-group id).
    Fork { parent: i32, child: i32 },
    /// A thread ended: `thread`, of the process `tgid` (`thread == tgid`: its first thread).
    Exit { tgid: i32, thread: i32 },
}

/// Announcements were lost (the socket's buffer overflowed): the caller must read the tree
/// another way, once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lost;

/// A subscription to the kernel's process events.
///
/// What the kernel grants:
///
/// - The subscription names the events wanted (`struct proc_input`, Linux 6.6+), and the kernel
///   drops every other kind before it reaches the socket; older kernels take the operation alone
///   and send every kind, which [`Connector::drain`] skips.
/// - It is made with respect to the initial PID and user namespaces: a request from another one
///   is ignored without an answer, and the pids announced are the initial namespace's. A foster
///   that contains its tree subscribes before it enters its namespace and keeps the socket
///   ([`Connector::subscribe`] then [`Connector::probe`]); [`outside_initial_namespaces`] says
///   when asking is pointless.
/// - Binding to the group takes `CAP_NET_ADMIN` on most kernels (`EPERM` otherwise; the 6.18
///   tried here refuses other users so), and a kernel refusing a subscription does not always
///   say so: [`Connector::probe`] forks a child that exits at once and waits (a quarter of a
///   second at most) for its birth to be announced.
/// - A datagram is taken only from the kernel (sender port 0): another user's process cannot
///   send one in its name.
///
/// The socket's buffer is raised (to [`RCVBUF`], past the system's maximum where foster may),
/// since a busy machine forks in bursts; when it overflows anyway the kernel says `ENOBUFS`, and
/// [`Connector::drain`] empties it and reports [`Lost`]: the caller reads the whole tree once.
#[derive(Debug)]
pub struct Connector {
    fd: OwnedFd,
    buf: Vec<u8>,
}

/// Why this process cannot subscribe, when it is outside the initial PID or user namespace
/// (the kernel ignores such a request); `None` when it is in both.
pub fn outside_initial_namespaces() -> Option<&'static str> {
    use std::os::unix::fs::MetadataExt;
    let ino = |p: &str| std::fs::metadata(p).map(|m| m.ino()).ok();
    if ino("/proc/self/ns/user").is_some_and(|i| i != INIT_USER_NS) {
        return Some("foster runs in a user namespace of its own");
    }
    if ino("/proc/self/ns/pid").is_some_and(|i| i != INIT_PID_NS) {
        return Some("foster runs in a PID namespace other than the initial one");
    }
    None
}

impl Connector {
    /// Subscribes to `wanted` and checks that announcements arrive ([`Connector::probe`], for
    /// a child of this process).
    pub fn open(wanted: Wanted) -> io::Result<Connector> {
        let mut c = Connector::subscribe(wanted)?;
        c.probe(std::process::id() as i32, PROBE_LIMIT)?;
        Ok(c)
    }

    /// Subscribes to `wanted`, without checking that the kernel listened.
    pub fn subscribe(wanted: Wanted) -> io::Result<Connector> {
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
        bind_to_group(&fd)?;
        raise_rcvbuf(&fd);
        send_listen(&fd, wanted)?;
        Ok(Connector {
            fd,
            buf: vec![0; 8192],
        })
    }

    /// The socket: readable when announcements wait.
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Checks that announcements arrive: forks a child that exits at once, reaps it, and waits
    /// at most `limit` for the announcement of its birth from `me` (this process's pid in the
    /// initial PID namespace). The kernel does not always say when it refuses (its answer is
    /// filtered out with the rest), so this is the only way to know. Announcements read
    /// meanwhile are dropped.
    pub fn probe(&mut self, me: i32, limit: Duration) -> io::Result<()> {
        // SAFETY: the child only calls _exit, which is async-signal-safe.
        let child = unsafe { libc::fork() };
        if child < 0 {
            return Err(io::Error::last_os_error());
        }
        if child == 0 {
            // SAFETY: leaves the child at once, running nothing of the parent's.
            unsafe { libc::_exit(0) };
        }
        // This child is the caller's own, reaped here by pid.
        let mut status = 0;
        // SAFETY: waits for our own child only.
        while unsafe { libc::waitpid(child, &mut status, 0) } < 0
            && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted
        {}
        let deadline = Instant::now() + limit;
        loop {
            if !crate::process::identity::poll_readable(
                self.raw_fd(),
                Some(deadline.saturating_duration_since(Instant::now())),
            ) {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    "no birth was announced for a child of this process (refused without \
                     CAP_NET_ADMIN, or from another namespace)",
                ));
            }
            while let Some(n) = self.recv()? {
                let b = &self.buf[..n];
                match u32_at(b, EVENT) {
                    // An answer to the subscription (unfiltered kernels): ack.err.
                    Some(PROC_EVENT_NONE) => match u32_at(b, DATA) {
                        Some(0) | None => {}
                        Some(err) => return Err(io::Error::from_raw_os_error(err as i32)),
                    },
                    Some(PROC_EVENT_FORK) if u32_at(b, DATA + 4) == Some(me as u32) => {
                        return Ok(());
                    }
                    _ => {}
                }
            }
        }
    }

    /// One datagram from the kernel, or `None` when none is waiting.
    fn recv(&mut self) -> io::Result<Option<usize>> {
        loop {
            // SAFETY: sockaddr_nl is plain data; all-zero is valid.
            let mut from: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
            let mut len = std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t;
            // SAFETY: receives into our buffer, at most its length, and the sender's address
            // into `from`, at most `len` bytes.
            let n = unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    self.buf.as_mut_ptr().cast(),
                    self.buf.len(),
                    libc::MSG_DONTWAIT,
                    (&mut from as *mut libc::sockaddr_nl).cast(),
                    &mut len,
                )
            };
            if n >= 0 {
                if from.nl_pid != 0 {
                    continue; // not the kernel's: dropped
                }
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

    /// Reads every waiting announcement and calls `on` with each, in the order the kernel
    /// queued them (a child's birth before anything the child does). Other kinds (an unfiltered
    /// kernel's) and new threads are left out. Returns how many datagrams were read.
    pub fn drain(&mut self, mut on: impl FnMut(ProcEvent)) -> Result<usize, Lost> {
        let mut read = 0;
        loop {
            let n = match self.recv() {
                Ok(Some(n)) => n,
                Ok(None) => return Ok(read),
                Err(_) => {
                    // ENOBUFS: the buffer overflowed. Empty it, then report the loss.
                    while matches!(self.recv(), Ok(Some(_))) {}
                    return Err(Lost);
                }
            };
            read += 1;
            if let Some(e) = parse(&self.buf[..n]) {
                on(e);
            }
        }
    }
}

/// The event of one datagram, if it is a process's birth or a thread's end.
fn parse(b: &[u8]) -> Option<ProcEvent> {
    match u32_at(b, EVENT)? {
        PROC_EVENT_FORK => {
            // event_data.fork: parent_pid, parent_tgid, child_pid, child_tgid.
            let ptgid = u32_at(b, DATA + 4)?;
            let (cpid, ctgid) = (u32_at(b, DATA + 8)?, u32_at(b, DATA + 12)?);
            (cpid == ctgid).then_some(ProcEvent::Fork {
                parent: ptgid as i32,
                child: ctgid as i32,
            })
        }
        PROC_EVENT_EXIT => {
            // event_data.exit: process_pid, process_tgid, exit_code, ...
            let (pid, tgid) = (u32_at(b, DATA)?, u32_at(b, DATA + 4)?);
            Some(ProcEvent::Exit {
                tgid: tgid as i32,
                thread: pid as i32,
            })
        }
        _ => None,
    }
}

/// Binds `fd` to the process events' multicast group.
fn bind_to_group(fd: &OwnedFd) -> io::Result<()> {
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
    Ok(())
}

/// Raises the receive buffer to [`RCVBUF`]: past `net.core.rmem_max` where foster may
/// (`SO_RCVBUFFORCE`, `CAP_NET_ADMIN`), else up to it. A failure leaves the default.
fn raise_rcvbuf(fd: &OwnedFd) {
    for opt in [libc::SO_RCVBUFFORCE, libc::SO_RCVBUF] {
        // SAFETY: one int option of the right size on our socket.
        let r = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                (&RCVBUF as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if r == 0 {
            return;
        }
    }
}

/// Sends the subscription: `struct proc_input { mcast_op, event_type }` (Linux 6.6+; older
/// kernels expect the operation alone and are sent that).
fn send_listen(fd: &OwnedFd, wanted: Wanted) -> io::Result<()> {
    let payload: Vec<u8> = if kernel_at_least(6, 6) {
        [PROC_CN_MCAST_LISTEN, wanted.mask()]
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
    // SAFETY: sends our buffer, at most its length.
    let n = unsafe { libc::send(fd.as_raw_fd(), msg.as_ptr().cast(), msg.len(), 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A datagram as the kernel lays one out: headers, then `what`, cpu, timestamp, data.
    fn datagram(what: u32, data: [u32; 4]) -> Vec<u8> {
        let mut b = vec![0u8; EVENT];
        b.extend_from_slice(&what.to_ne_bytes());
        b.extend_from_slice(&[0u8; 12]);
        for d in data {
            b.extend_from_slice(&d.to_ne_bytes());
        }
        b
    }

    #[test]
    fn parses_births_and_ends_and_leaves_out_threads() {
        assert_eq!(
            parse(&datagram(PROC_EVENT_FORK, [10, 10, 11, 11])),
            Some(ProcEvent::Fork {
                parent: 10,
                child: 11
            })
        );
        // A new thread of 10: not a birth.
        assert_eq!(parse(&datagram(PROC_EVENT_FORK, [10, 10, 12, 10])), None);
        assert_eq!(
            parse(&datagram(PROC_EVENT_EXIT, [13, 11, 0, 0])),
            Some(ProcEvent::Exit {
                tgid: 11,
                thread: 13
            })
        );
        // Another kind (exec, an unfiltered kernel's), and a truncated datagram.
        assert_eq!(parse(&datagram(2, [1, 1, 1, 1])), None);
        assert_eq!(parse(&datagram(PROC_EVENT_FORK, [1, 1, 1, 1])[..40]), None);
    }

    /// As root, the birth and end of a child are announced with its pid (skipped where the
    /// kernel refuses).
    #[test]
    fn announces_a_childs_birth_and_end() {
        let mut c = match Connector::open(Wanted::ForksAndExits) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("skipped: the process-events connector is not granted here: {e}");
                return;
            }
        };
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        child.wait().unwrap();
        let me = std::process::id() as i32;
        let (mut born, mut ended) = (false, false);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !(born && ended) && Instant::now() < deadline {
            crate::process::identity::poll_readable(c.raw_fd(), Some(Duration::from_millis(100)));
            c.drain(|e| match e {
                ProcEvent::Fork { parent, child } if parent == me && child == pid => born = true,
                ProcEvent::Exit { tgid, thread } if tgid == pid && thread == pid => ended = true,
                _ => {}
            })
            .unwrap();
        }
        assert!(born && ended, "born {born}, ended {ended}");
    }
}
