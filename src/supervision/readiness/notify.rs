//! The systemd notification protocol (`sd_notify(3)`, `systemd-notify`): foster's socket and
//! what a datagram says.
//!
//! Owns [`NotifySocket`] and [`Message`], and the sender's side, [`send`] (`foster notify`,
//! a `systemd-notify` of foster's own, for helpers on systems without it). foster binds one
//! datagram socket of its own and sets `NOTIFY_SOCKET` to it in the environment of each helper that
//! asks for the protocol (`ready = { notify = true }`, or `watchdog`). The socket has `SO_PASSCRED`
//! on, so every datagram comes with its sender's pid as the kernel saw it; the supervisor accepts a
//! datagram only from a process of that helper's tree and ignores any other (the check is the
//! supervisor's: it knows each process's helper). Where the kernel offers it (`SO_PASSPIDFD`,
//! Linux 6.5+), each datagram also comes with a pidfd of its sender taken when it sent
//! (`SCM_PIDFD`): the sender itself, even once it has ended and its pid was given to another
//! process, which the pid alone cannot tell (`supervisor/checks.rs` says how it is used).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use nix::fcntl::AtFlags;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::sys::socket::{
    AddressFamily, MsgFlags, SockFlag, SockType, UnixAddr, bind, setsockopt, socket, sockopt,
};

/// `NOTIFY_SOCKET`, as systemd sets it.
pub const ENV_NOTIFY_SOCKET: &str = "NOTIFY_SOCKET";

/// The longest datagram foster takes, in bytes (as systemd: a notification is a few short
/// lines). A longer one is refused whole.
pub const MAX_DATAGRAM: usize = 4096;

/// Where the kernel's limit on a datagram socket's queue is read (`net.unix.max_dgram_qlen`).
const QLEN_SYSCTL: &str = "/proc/sys/net/unix/max_dgram_qlen";

/// The limit taken when the sysctl cannot be read (the kernel's default is 10, systemd's
/// sysctl settings make it 512; a larger bound only reads longer), and the ceiling of the
/// bound.
const QLEN_DEFAULT: usize = 512;
const QLEN_CEILING: usize = 1 << 16;

/// A bound notification socket.
///
/// **Where the socket is.** For helpers that run as foster's own user, a socket file in
/// foster's private runtime directory (the control socket's directory: owned by foster's
/// user, mode 0700, not a symbolic link; made when missing), mode 0600, named
/// `notify-PID-RANDOM.sock`, removed when foster ends, and by the next foster that binds one
/// there when a foster ended without removing it (SIGKILLed: [`remove_stale`]): no other user
/// can reach it. A helper
/// that runs as another user (`user` with foster as root) could not enter that directory; the
/// helpers of each such user get a socket file of their own in the directory next to it
/// (`crate::supervision::control::server::make_reachable_dir`: foster's, mode 0711, which anyone
/// may enter but nobody else lists or writes), owned by that user, mode 0600
/// ([`NotifySocket::bind_for_user`]). It is bound in the private directory, given its mode and
/// its owner there, then moved (`renameat`) into the shared one: there is no moment when
/// anyone but that user and root could send to it. Both directories are in the one checked
/// runtime root (`crate::base::ownership`). No abstract socket is bound: an abstract name has no
/// permissions, and any local user finds it in `/proc/net/unix`. Each socket is bound only when
/// a helper needs it: at the start, or at the first launch that needs it (a helper a reload
/// added). The sender check stands behind the permissions: the kernel lets an unprivileged
/// sender give only its own pid in its credentials, and a pid outside the helper's tree is
/// refused.
///
/// **What is read.** One datagram at most [`MAX_DATAGRAM`] bytes (a longer one is refused
/// whole, as systemd refuses it); descriptors it carries (`BARRIER=1`'s, `FDSTORE=1`'s) are
/// taken and closed once the datagram was handled, which is what `systemd-notify`'s barrier
/// waits for. Every descriptor the kernel installs with a datagram is closed, whatever is made
/// of it (refused, too long, from outside the tree): the control messages are read by a walker
/// of foster's own ([`NotifySocket::recv`]), which also reads a buffer the kernel cut short.
/// The buffer has room for the most a datagram brings (credentials, pidfd, [`SCM_MAX_FD`]
/// descriptors), so a cut-short one (`MSG_CTRUNC`: the kernel could not install them all) is
/// refused. The text is `KEY=VALUE` lines; [`Message::parse`] keeps the keys foster acts on
/// and counts the others, which are ignored.
#[derive(Debug)]
pub struct NotifySocket {
    fd: OwnedFd,
    /// What `NOTIFY_SOCKET` says: a path, or `@name` for an abstract socket.
    address: String,
    /// The socket file to remove at the end (with its device and inode: only that file).
    file: Option<(PathBuf, u64, u64)>,
    /// The most datagrams its queue can hold (see [`NotifySocket::queued_bound`]).
    queue: usize,
}

/// `SCM_PIDFD` (`include/linux/socket.h`; the same on every architecture).
const SCM_PIDFD: libc::c_int = 4;

/// One datagram as received.
#[derive(Debug)]
pub struct Datagram {
    /// The sender's pid as the kernel gave it (`SCM_CREDENTIALS`); 0 when it gave none. By the
    /// time foster reads it, it may name another process (the sender ended and was reaped).
    pub pid: i32,
    /// The sender's pidfd, taken by the kernel when it sent (`SCM_PIDFD`); `None` where the
    /// kernel gives none, or gave none for this datagram ([`Datagram::sender_reaped`]).
    pub pidfd: Option<OwnedFd>,
    /// The kernel could make no pidfd because the sender had been reaped already (before
    /// Linux 6.16, which gives a pidfd of the reaped process instead).
    pub sender_reaped: bool,
    /// The sender's uid.
    pub uid: u32,
    /// The text (at most [`MAX_DATAGRAM`] bytes).
    pub bytes: Vec<u8>,
    /// The datagram was longer than [`MAX_DATAGRAM`]: refused.
    pub too_long: bool,
    /// Its control messages did not fit the room foster gives them (`MSG_CTRUNC`): the kernel
    /// kept back some of what came with it. Refused (what did come is closed all the same).
    pub control_cut: bool,
    /// The descriptors it carried, closed when this is dropped.
    pub fds: Vec<OwnedFd>,
}

/// Random bytes as hex, for socket names no one can guess ahead.
fn random_hex() -> io::Result<String> {
    let mut b = [0u8; 8];
    // SAFETY: getrandom fills the buffer it is given.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n != b.len() as isize {
        return Err(io::Error::last_os_error());
    }
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// Removes the notify sockets in `dir` (open as `dir_fd`: foster's private directory, or the
/// one of other users' sockets) that a foster ended without removing (SIGKILLed): a
/// `notify-PID-RANDOM.sock` whose PID is no live process (or is this process's own: a
/// contained supervisor is pid 1 every time) and that nobody receives on (a datagram sent
/// there is refused, `ECONNREFUSED`: its socket was closed, and a closed socket's file is
/// never bound again). A socket a live supervisor holds is never touched.
pub fn remove_stale(dir: &Path, dir_fd: BorrowedFd<'_>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("notify-"))
            .and_then(|n| n.split_once('-'))
            .filter(|(_, rest)| rest.ends_with(".sock"))
            .and_then(|(pid, _)| pid.parse::<i32>().ok())
        else {
            continue;
        };
        let mine = pid == std::process::id() as i32;
        let gone = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None)
            == Err(nix::errno::Errno::ESRCH);
        if !(mine || gone) || pid <= 0 {
            continue;
        }
        let refused = std::os::unix::net::UnixDatagram::unbound()
            .and_then(|s| s.connect(dir.join(&name)))
            .is_err_and(|e| e.raw_os_error() == Some(libc::ECONNREFUSED));
        if refused
            && nix::unistd::unlinkat(
                dir_fd,
                name.as_os_str(),
                nix::unistd::UnlinkatFlags::NoRemoveDir,
            )
            .is_ok()
        {
            tracing::info!(
                "removed {}, a notify socket left by a foster that ended (pid {pid})",
                dir.join(&name).display()
            );
        }
    }
}

/// The most datagrams a socket made now can have queued: the kernel refuses a sender once the
/// queue holds more than `net.unix.max_dgram_qlen` (a socket keeps the value it was made with).
fn queue_limit() -> usize {
    std::fs::read_to_string(QLEN_SYSCTL)
        .ok()
        .and_then(|t| t.trim().parse::<usize>().ok())
        .unwrap_or(QLEN_DEFAULT)
        .min(QLEN_CEILING)
        + 1
}

fn datagram_socket() -> io::Result<OwnedFd> {
    let fd = socket(
        AddressFamily::Unix,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        None,
    )
    .map_err(io::Error::from)?;
    setsockopt(&fd, sockopt::PassCred, &true).map_err(io::Error::from)?;
    // The sender's pidfd with each datagram, where the kernel has it (Linux 6.5+; refused
    // before: the pid alone then).
    let on: libc::c_int = 1;
    // SAFETY: setsockopt with an int option value on a socket we own.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PASSPIDFD,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r != 0 {
        tracing::debug!(
            "notify socket: no SO_PASSPIDFD ({}): senders are told by their pid alone",
            io::Error::last_os_error()
        );
    }
    Ok(fd)
}

impl NotifySocket {
    /// Binds a socket file in `dir` (a private directory of foster's user, checked by the
    /// caller), mode 0600: set right after the bind (the umask is the process's, shared with
    /// its other threads, so it is not changed); meanwhile the directory keeps every other user
    /// out.
    pub fn bind_in(dir: &Path) -> io::Result<NotifySocket> {
        let name = format!("notify-{}-{}.sock", std::process::id(), random_hex()?);
        let path = dir.join(name);
        let addr = UnixAddr::new(&path).map_err(|e| {
            io::Error::other(format!(
                "notify socket {}: {e} (the path is too long for a socket; set \
                 XDG_RUNTIME_DIR to a shorter directory)",
                path.display()
            ))
        })?;
        let fd = datagram_socket()?;
        bind(fd.as_raw_fd(), &addr).map_err(|e| {
            io::Error::other(format!("notify socket {}: bind: {e}", path.display()))
        })?;
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let meta = std::fs::symlink_metadata(&path)?;
        let file = Some((path.clone(), meta.dev(), meta.ino()));
        // Removed on drop from here on, if anything below fails.
        let mut socket = NotifySocket {
            fd,
            address: String::new(),
            file,
            queue: queue_limit(),
        };
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
        socket.address = path
            .to_str()
            .ok_or_else(|| io::Error::other("the notify socket's path is not UTF-8"))?
            .to_string();
        Ok(socket)
    }

    /// Binds a socket file for the helpers that run as user `uid` (foster being root): bound in
    /// foster's private directory `private` (with its open descriptor), where nobody else can
    /// reach it yet, given mode 0600 and to `uid`, then moved into `shared` (foster's, mode
    /// 0711: see the module docs). Only `uid` and root may send to it, and there is no moment
    /// when anyone else could.
    pub fn bind_for_user(
        private: (&Path, BorrowedFd<'_>),
        shared: (&Path, BorrowedFd<'_>),
        uid: u32,
    ) -> io::Result<NotifySocket> {
        let mut socket = NotifySocket::bind_in(private.0)?;
        let Some((path, dev, ino)) = socket.file.clone() else {
            return Err(io::Error::other("the notify socket has no file"));
        };
        let name = path.file_name().unwrap_or_default();
        let fail = |what: &str, e: nix::errno::Errno| {
            io::Error::other(format!("notify socket {}: {what}: {e}", path.display()))
        };
        let owner = Some(nix::unistd::Uid::from_raw(uid));
        nix::unistd::fchownat(private.1, name, owner, None, AtFlags::AT_SYMLINK_NOFOLLOW)
            .map_err(|e| fail(&format!("chown to uid {uid}"), e))?;
        nix::fcntl::renameat(private.1, name, shared.1, name)
            .map_err(|e| fail(&format!("move into {}", shared.0.display()), e))?;
        let to = shared.0.join(name);
        socket.file = Some((to.clone(), dev, ino));
        socket.address = to
            .to_str()
            .ok_or_else(|| io::Error::other("the notify socket's path is not UTF-8"))?
            .to_string();
        Ok(socket)
    }

    /// The value of `NOTIFY_SOCKET` for a helper.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// The descriptor, for the event loop.
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// How many datagrams can be queued on the socket at once: reading that many (or until
    /// none is left) takes every datagram that was queued when the reading began, however
    /// fast senders queue more meanwhile (what they queue later is left for later).
    pub fn queued_bound(&self) -> usize {
        self.queue
    }

    /// The next datagram, or `WouldBlock` when none is waiting. Every descriptor the kernel
    /// installed for it is in [`Datagram::fds`] (or is its [`Datagram::pidfd`]), closed when
    /// the datagram is dropped, whatever is made of it.
    pub fn recv(&self) -> io::Result<Datagram> {
        let mut buf = vec![0u8; MAX_DATAGRAM];
        // u64 words: a control buffer aligned for `cmsghdr`.
        let mut control = vec![0u64; control_space().div_ceil(8)];
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: an all-zero msghdr is a valid one (no address, no buffers).
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = (control.len() * 8) as _; // socklen_t on musl
        let flags = libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC;
        // SAFETY: `msg` points to `iov` (to `buf`) and to `control`, all alive and of the
        // lengths given, for the length of the call.
        let n = unsafe { libc::recvmsg(self.fd.as_raw_fd(), &mut msg, flags) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut d = Datagram {
            pid: 0,
            pidfd: None,
            sender_reaped: false,
            uid: u32::MAX,
            bytes: Vec::new(),
            too_long: msg.msg_flags & libc::MSG_TRUNC != 0,
            control_cut: msg.msg_flags & libc::MSG_CTRUNC != 0,
            fds: Vec::new(),
        };
        // SAFETY: `msg` is as recvmsg left it: its control buffer (`control`, still alive)
        // holds `msg_controllen` bytes of control messages the kernel wrote.
        unsafe { take_control(&msg, &mut d) };
        buf.truncate(n as usize);
        d.bytes = buf;
        Ok(d)
    }
}

/// `SCM_MAX_FD` (`include/net/scm.h`): the most descriptors one message can pass; a sender
/// that tries more is refused by the kernel (`EINVAL`).
pub const SCM_MAX_FD: usize = 253;

/// Room for every control message a datagram can bring: its sender's credentials, its pidfd,
/// and [`SCM_MAX_FD`] descriptors (the kernel gives them all in one message), so that none is
/// cut short (`MSG_CTRUNC`) unless the kernel adds one foster did not ask for.
fn control_space() -> usize {
    let int = std::mem::size_of::<libc::c_int>();
    let space = |len: usize| {
        // SAFETY: CMSG_SPACE is arithmetic on its argument.
        unsafe { libc::CMSG_SPACE(len as libc::c_uint) as usize }
    };
    space(std::mem::size_of::<libc::ucred>()) + space(int) + space(SCM_MAX_FD * int)
}

/// Takes what the control messages of a received `msg` carry into `d`: the sender's
/// credentials (`SCM_CREDENTIALS`), its pidfd (`SCM_PIDFD`), and every descriptor
/// (`SCM_RIGHTS`), owned from here on so that each is closed, whatever becomes of the datagram.
///
/// A walker of its own rather than nix's, which refuses to read a buffer the kernel cut short
/// (`MSG_CTRUNC`): then the descriptors that did fit were installed all the same, and would
/// never be closed. What the kernel writes when it runs out of room is a message whose length
/// covers only what it wrote: for `SCM_RIGHTS`, the descriptors it installed (the others it
/// closed itself); an `SCM_PIDFD` is written whole or not at all. A message's data is read
/// only within both its length and the buffer.
///
/// # Safety
///
/// `msg` is as `recvmsg` left it: `msg_control` points to a live buffer, aligned for
/// `cmsghdr`, of which the first `msg_controllen` bytes are control messages the kernel wrote.
unsafe fn take_control(msg: &libc::msghdr, d: &mut Datagram) {
    let len: usize = msg.msg_controllen as _; // socklen_t on musl
    let end = msg.msg_control as usize + len;
    // SAFETY: as the caller promises; CMSG_FIRSTHDR and CMSG_NXTHDR stay within
    // `msg_controllen` and give null at its end.
    let mut c = unsafe { libc::CMSG_FIRSTHDR(msg) };
    while !c.is_null() {
        // SAFETY: a header CMSG_FIRSTHDR / CMSG_NXTHDR found within the buffer, aligned.
        let h = unsafe { std::ptr::read(c) };
        // SAFETY: CMSG_DATA is arithmetic on a valid header pointer.
        let data = unsafe { libc::CMSG_DATA(c) };
        let len = (h.cmsg_len as usize)
            .saturating_sub(data as usize - c as usize)
            .min(end.saturating_sub(data as usize));
        let int = std::mem::size_of::<libc::c_int>();
        // SAFETY: the `k`th int of the data, within `len`, read unaligned.
        let int_at =
            |k: usize| unsafe { std::ptr::read_unaligned::<libc::c_int>(data.add(k * int).cast()) };
        match (h.cmsg_level, h.cmsg_type) {
            (libc::SOL_SOCKET, libc::SCM_RIGHTS) => {
                for k in 0..len / int {
                    let fd = int_at(k);
                    // SAFETY: a descriptor the kernel installed for this process, owned by
                    // nothing else.
                    d.fds.push(unsafe { OwnedFd::from_raw_fd(fd) });
                }
            }
            (libc::SOL_SOCKET, libc::SCM_CREDENTIALS)
                if len >= std::mem::size_of::<libc::ucred>() =>
            {
                // SAFETY: a whole ucred within `len`, read unaligned.
                let cred: libc::ucred = unsafe { std::ptr::read_unaligned(data.cast()) };
                (d.pid, d.uid) = (cred.pid, cred.uid);
            }
            (libc::SOL_SOCKET, SCM_PIDFD) if len >= int => match int_at(0) {
                // SAFETY: a descriptor the kernel installed for this process (it installs
                // the pidfd only once its message is written whole).
                fd if fd >= 0 => d.pidfd = Some(unsafe { OwnedFd::from_raw_fd(fd) }),
                // No pidfd could be made: the kernel says why, as -errno.
                e => d.sender_reaped = e == -libc::ESRCH,
            },
            _ => {}
        }
        // SAFETY: as above.
        c = unsafe { libc::CMSG_NXTHDR(msg, c) };
    }
}

impl Drop for NotifySocket {
    fn drop(&mut self) {
        use std::os::unix::fs::MetadataExt;
        if let Some((path, dev, ino)) = &self.file
            && let Ok(m) = std::fs::symlink_metadata(path)
            && m.dev() == *dev
            && m.ino() == *ino
        {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// What the watchdog part of a message says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watchdog {
    /// `WATCHDOG=1`: alive.
    Ping,
    /// `WATCHDOG=trigger`: the program asks to be taken as failed.
    Trigger,
}

/// The keys of one datagram foster acts on (systemd's names, `sd_notify(3)`); the last of a
/// key repeated wins.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Message {
    /// `READY=1`.
    pub ready: bool,
    /// `RELOADING=1`: not ready again until `READY=1`.
    pub reloading: bool,
    /// `STOPPING=1`.
    pub stopping: bool,
    /// `STATUS=...`: free text (as received, invalid UTF-8 replaced; escaped when shown).
    pub status: Option<String>,
    /// `WATCHDOG=1` or `WATCHDOG=trigger`.
    pub watchdog: Option<Watchdog>,
    /// `WATCHDOG_USEC=N`: a new watchdog period (microseconds).
    pub watchdog_usec: Option<u64>,
    /// `EXTEND_TIMEOUT_USEC=N`: while starting, the readiness deadline is at least this far
    /// from now.
    pub extend_timeout_usec: Option<u64>,
    /// `MAINPID=N`.
    pub main_pid: Option<i32>,
    /// `ERRNO=N`: shown with the status.
    pub errno: Option<i32>,
    /// `FDSTORE=1`: the sender asks foster to keep the descriptors it sent, which foster does
    /// not do (it has no store to give them back from): they are closed, and it is said.
    pub fdstore: bool,
    /// Keys foster does not act on (`BARRIER=1` among them: its descriptor is closed anyway),
    /// and lines that are not `KEY=VALUE`, or whose value is not one of the key's.
    pub ignored: usize,
}

impl Message {
    /// Reads the `KEY=VALUE` lines of a datagram.
    pub fn parse(bytes: &[u8]) -> Message {
        let mut m = Message::default();
        for line in bytes.split(|&b| b == b'\n') {
            if line.is_empty() {
                continue;
            }
            let Some(eq) = line.iter().position(|&b| b == b'=') else {
                m.ignored += 1;
                continue;
            };
            if !m.take(&line[..eq], &line[eq + 1..]) {
                m.ignored += 1;
            }
        }
        m
    }

    /// Takes `key` with `value` into this message; false when foster does not act on it.
    fn take(&mut self, key: &[u8], value: &[u8]) -> bool {
        let number = || {
            std::str::from_utf8(value)
                .ok()
                .and_then(|v| v.parse::<u64>().ok())
        };
        match key {
            b"READY" if value == b"1" => {
                self.ready = true;
                true
            }
            b"RELOADING" if value == b"1" => {
                self.reloading = true;
                true
            }
            b"STOPPING" if value == b"1" => {
                self.stopping = true;
                true
            }
            b"STATUS" => {
                self.status = Some(String::from_utf8_lossy(value).into_owned());
                true
            }
            b"WATCHDOG" if value == b"1" => {
                self.watchdog = Some(Watchdog::Ping);
                true
            }
            b"WATCHDOG" if value == b"trigger" => {
                self.watchdog = Some(Watchdog::Trigger);
                true
            }
            b"WATCHDOG_USEC" => number()
                .filter(|&n| n > 0)
                .map(|n| self.watchdog_usec = Some(n))
                .is_some(),
            b"EXTEND_TIMEOUT_USEC" => number()
                .map(|n| self.extend_timeout_usec = Some(n))
                .is_some(),
            b"MAINPID" => number()
                .and_then(|n| i32::try_from(n).ok())
                .filter(|&n| n > 0)
                .map(|n| self.main_pid = Some(n))
                .is_some(),
            b"ERRNO" => number()
                .and_then(|n| i32::try_from(n).ok())
                .map(|n| self.errno = Some(n))
                .is_some(),
            b"FDSTORE" if value == b"1" => {
                self.fdstore = true;
                true
            }
            _ => false,
        }
    }
}

/// The `NOTIFY_SOCKET` value of `socket`'s address, as an `OsStr` for an environment.
pub fn env_value(socket: &NotifySocket) -> std::ffi::OsString {
    std::ffi::OsStr::from_bytes(socket.address().as_bytes()).to_owned()
}

/// How long [`send`] waits for the receiver's barrier by default: `sd_notify_barrier(3)`'s 5 s.
pub const BARRIER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Why a notification could not be sent (`foster notify`).
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    #[error(
        "NOTIFY_SOCKET is not set: no supervisor asked this process for notifications \
         (foster run sets it for a helper with `ready = {{ notify = true }}` or a `watchdog`)"
    )]
    NoSocket,
    #[error("NOTIFY_SOCKET is {0:?}: expected an absolute path or @name")]
    BadSocket(String),
    #[error("{0:?} is not an assignment: expected KEY=VALUE, KEY made of A-Z, 0-9 and _")]
    BadAssignment(String),
    #[error("the value of {0} holds a newline: it would be read as another assignment")]
    Newline(String),
    #[error("nothing to send: give --ready, --reloading, --stopping, --status, --pid or KEY=VALUE")]
    Nothing,
    #[error("the notification is {0} bytes: at most {MAX_DATAGRAM}")]
    TooLong(usize),
    #[error("sending to NOTIFY_SOCKET {0:?}: {1}")]
    Send(String, io::Error),
    #[error(
        "the supervisor did not confirm within {0} that it handled the notification \
         (BARRIER=1)"
    )]
    BarrierTimeout(crate::base::duration::Text),
}

/// The text of one notification: `KEY=VALUE` lines, each checked (a key of `A-Z`, `0-9` and
/// `_`; no newline in a value, which would smuggle in another key).
pub fn notification(assignments: &[String]) -> Result<String, SendError> {
    if assignments.is_empty() {
        return Err(SendError::Nothing);
    }
    let mut text = String::new();
    for a in assignments {
        let Some((key, value)) = a.split_once('=') else {
            return Err(SendError::BadAssignment(a.clone()));
        };
        if key.is_empty()
            || !key
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
        {
            return Err(SendError::BadAssignment(a.clone()));
        }
        if value.contains('\n') {
            return Err(SendError::Newline(key.to_string()));
        }
        text.push_str(a);
        text.push('\n');
    }
    if text.len() > MAX_DATAGRAM {
        return Err(SendError::TooLong(text.len()));
    }
    Ok(text)
}

/// Sends `text` (see [`notification`]) as one datagram to the socket `NOTIFY_SOCKET` names (a
/// path, or `@name` for an abstract socket), as `sd_notify(3)` does; then, with `barrier`,
/// waits at most that long for the receiver's [`barrier`]. A sender that ends at once could
/// otherwise be gone before the supervisor reads its datagram, and be refused as one it cannot
/// place in a helper's tree (`docs/run.md`).
pub fn send(
    to: Option<&std::ffi::OsStr>,
    text: &str,
    barrier: Option<std::time::Duration>,
) -> Result<(), SendError> {
    let t = Target::open(to)?;
    t.send(text.as_bytes(), &[])?;
    match barrier {
        Some(limit) => t.barrier(limit),
        None => Ok(()),
    }
}

/// `sd_notify_barrier(3)`: sends `BARRIER=1` with the write end of a pipe to the socket `to`
/// names and waits, at most `limit`, until the receiver has closed it: it has handled every
/// datagram this process sent before.
pub fn barrier(to: Option<&std::ffi::OsStr>, limit: std::time::Duration) -> Result<(), SendError> {
    Target::open(to)?.barrier(limit)
}

/// The socket `NOTIFY_SOCKET` names, and a datagram socket to send to it.
struct Target {
    socket: OwnedFd,
    addr: UnixAddr,
    shown: String,
}

impl Target {
    fn open(to: Option<&std::ffi::OsStr>) -> Result<Target, SendError> {
        let to = to.filter(|s| !s.is_empty()).ok_or(SendError::NoSocket)?;
        let shown = to.to_string_lossy().into_owned();
        let bytes = to.as_bytes();
        let addr = match bytes.strip_prefix(b"@") {
            Some(name) => UnixAddr::new_abstract(name),
            None if bytes.starts_with(b"/") => UnixAddr::new(Path::new(to)),
            None => return Err(SendError::BadSocket(shown)),
        }
        .map_err(|_| SendError::BadSocket(shown.clone()))?;
        let socket = socket(
            AddressFamily::Unix,
            SockType::Datagram,
            SockFlag::SOCK_CLOEXEC,
            None,
        )
        .map_err(|e| SendError::Send(shown.clone(), io::Error::from(e)))?;
        Ok(Target {
            socket,
            addr,
            shown,
        })
    }

    fn fail(&self, e: impl Into<io::Error>) -> SendError {
        SendError::Send(self.shown.clone(), e.into())
    }

    /// One datagram, with `fds` passed along when there are any.
    fn send(&self, bytes: &[u8], fds: &[RawFd]) -> Result<(), SendError> {
        use nix::sys::socket::{ControlMessage, sendmsg};
        let iov = [io::IoSlice::new(bytes)];
        let rights = [ControlMessage::ScmRights(fds)];
        let cmsgs = if fds.is_empty() { &[][..] } else { &rights[..] };
        sendmsg(
            self.socket.as_raw_fd(),
            &iov,
            cmsgs,
            MsgFlags::empty(),
            Some(&self.addr),
        )
        .map(drop)
        .map_err(|e| self.fail(e))
    }

    fn barrier(&self, limit: std::time::Duration) -> Result<(), SendError> {
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| self.fail(e))?;
        self.send(b"BARRIER=1", &[w.as_raw_fd()])?;
        drop(w);
        // The read end sees its end (POLLHUP) once every write end is closed: the receiver's,
        // once it has handled what came before.
        let deadline = std::time::Instant::now() + limit;
        loop {
            let mut p = [crate::base::sys::PollFd::input(r.as_raw_fd())];
            let n =
                crate::base::sys::poll_until(&mut p, Some(deadline)).map_err(|e| self.fail(e))?;
            if n > 0 && p[0].hung_up() {
                return Ok(());
            }
            if n == 0 || std::time::Instant::now() >= deadline {
                return Err(SendError::BarrierTimeout(crate::base::duration::Text(
                    limit,
                )));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_keeps_what_foster_acts_on() {
        let m = Message::parse(
            b"READY=1\nSTATUS=Processing \x1b[31mred\xff\nWATCHDOG=1\nMAINPID=42\n\
              BARRIER=1\nX\nEXTEND_TIMEOUT_USEC=2000000\nWATCHDOG_USEC=500000\nERRNO=2\n\
              FDSTORE=1\nFDNAME=db\n",
        );
        assert!(m.ready && !m.reloading && !m.stopping);
        assert_eq!(m.status.as_deref(), Some("Processing \x1b[31mred\u{fffd}"));
        assert_eq!(m.watchdog, Some(Watchdog::Ping));
        assert_eq!(m.main_pid, Some(42));
        assert_eq!(m.extend_timeout_usec, Some(2_000_000));
        assert_eq!(m.watchdog_usec, Some(500_000));
        assert_eq!(m.errno, Some(2));
        assert!(m.fdstore);
        assert_eq!(m.ignored, 3, "BARRIER=1, FDNAME= and a line without '='");
        let m =
            Message::parse(b"READY=0\nWATCHDOG=trigger\nMAINPID=-3\nWATCHDOG_USEC=0\nRELOADING=1");
        assert!(!m.ready && m.reloading);
        assert_eq!(m.watchdog, Some(Watchdog::Trigger));
        assert_eq!((m.main_pid, m.watchdog_usec), (None, None));
        assert_eq!(m.ignored, 3);
        assert_eq!(Message::parse(b""), Message::default());
    }

    #[test]
    fn datagrams_come_with_their_senders_pid_and_a_size_bound() {
        let dir = std::env::temp_dir().join(format!("foster-notify-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let s = NotifySocket::bind_in(&dir).unwrap();
        let path = PathBuf::from(s.address());
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(s.recv().unwrap_err().kind(), io::ErrorKind::WouldBlock);
        let out = std::os::unix::net::UnixDatagram::unbound().unwrap();
        out.send_to(b"READY=1\nSTATUS=up", &path).unwrap();
        let big = vec![b'x'; MAX_DATAGRAM + 1];
        out.send_to(&big, &path).unwrap();
        let exact = vec![b'y'; MAX_DATAGRAM];
        out.send_to(&exact, &path).unwrap();
        let d = s.recv().unwrap();
        assert_eq!(d.pid, std::process::id() as i32);
        if let Some(fd) = &d.pidfd {
            // Where the kernel gives the sender's pidfd, it is this process's.
            use std::os::fd::AsFd;
            assert_eq!(
                crate::process::identity::pidfd_pid(fd.as_fd()).unwrap(),
                crate::process::identity::PidfdPid::Pid(std::process::id() as i32)
            );
        }
        assert!(!d.sender_reaped);
        assert_eq!(d.uid, nix::unistd::geteuid().as_raw());
        assert_eq!(d.bytes, b"READY=1\nSTATUS=up");
        assert!(!d.too_long && d.fds.is_empty());
        assert!(s.recv().unwrap().too_long);
        let d = s.recv().unwrap();
        assert!(!d.too_long && d.bytes.len() == MAX_DATAGRAM);
        drop(s);
        assert!(!path.exists(), "the socket file is removed with the socket");
        // For another user: bound in the private directory, then moved into the shared one,
        // given to the user (here this process's own uid, which needs no privilege).
        let shared = dir.join("shared");
        std::fs::create_dir_all(&shared).unwrap();
        let open = |p: &Path| OwnedFd::from(std::fs::File::open(p).unwrap());
        let (private_fd, shared_fd) = (open(&dir), open(&shared));
        use std::os::fd::AsFd;
        let me = nix::unistd::geteuid().as_raw();
        let a = NotifySocket::bind_for_user(
            (&dir, private_fd.as_fd()),
            (&shared, shared_fd.as_fd()),
            me,
        )
        .unwrap();
        let path = PathBuf::from(a.address());
        assert_eq!(path.parent(), Some(shared.as_path()));
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::symlink_metadata(&path).unwrap();
        assert_eq!((m.uid(), m.mode() & 0o777), (me, 0o600));
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            1,
            "only `shared` is left"
        );
        out.send_to(b"WATCHDOG=1", &path).unwrap();
        assert_eq!(a.recv().unwrap().bytes, b"WATCHDOG=1");
        drop(a);
        assert!(
            !path.exists(),
            "the moved socket file is removed with the socket"
        );
        let _ = std::fs::remove_dir(&shared);
        let _ = std::fs::remove_dir(&dir);
    }

    #[test]
    fn a_notification_is_checked_before_it_is_sent() {
        let a = |v: &[&str]| notification(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(
            a(&["READY=1", "STATUS=up and running"]).unwrap(),
            "READY=1\nSTATUS=up and running\n"
        );
        assert!(matches!(a(&[]), Err(SendError::Nothing)));
        assert!(matches!(a(&["ready=1"]), Err(SendError::BadAssignment(_))));
        assert!(matches!(a(&["READY"]), Err(SendError::BadAssignment(_))));
        assert!(matches!(a(&["=1"]), Err(SendError::BadAssignment(_))));
        assert!(matches!(a(&["STATUS=a\nREADY=1"]), Err(SendError::Newline(k)) if k == "STATUS"));
        let long = format!("STATUS={}", "x".repeat(MAX_DATAGRAM));
        assert!(matches!(a(&[&long]), Err(SendError::TooLong(_))));
        assert!(matches!(
            send(None, "READY=1\n", None),
            Err(SendError::NoSocket)
        ));
        let rel = std::ffi::OsStr::new("relative.sock");
        assert!(matches!(
            send(Some(rel), "READY=1\n", None),
            Err(SendError::BadSocket(_))
        ));
    }
}
