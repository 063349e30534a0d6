//! The control socket's server side, run inside `foster run`.
//!
//! Owns the socket file's life (its default path; the checks of its directory, which must be a
//! private directory of this user, or for a `--socket` path one no other user can write to,
//! by [`crate::base::ownership`]'s rules; the directory next to the private one where the notify
//! sockets of helpers of other users go, [`make_reachable_dir`];
//! binding with mode 0600 from the first instant, replacing a stale socket, never stealing a
//! live one, removing it on exit), the check of every peer's credentials (`SO_PEERCRED`: same
//! uid or root), one task per client (reading bounded lines, answering in order, streaming
//! events and helpers' lines), and the [`Hub`] of events (sequence numbers, the backlog for
//! late clients, the broadcast to followers). The helpers' lines come from the
//! [`crate::supervision::output::Output`] the supervisor shares: a `logs` request is answered by the
//! client's task from it, as `events` is from the hub, without the supervisor's loop.
//!
//! The supervisor never writes to a client. It takes [`Command`]s from [`Server::recv`] and
//! answers each through a oneshot channel; client tasks do all socket I/O. A client that does
//! not read stalls only its own task: events (or lines) for it wait in a bounded broadcast ring
//! (1024), and when it falls further behind its oldest ones are dropped and it gets one
//! `lagged` line saying how many (of lines: those the helpers' rings no longer keep either,
//! see [`crate::supervision::output::Follower`]).
//! Each client has at most one request in flight, and there are at most [`MAX_CLIENTS`], so
//! what the supervisor holds for clients is bounded. A client that does not follow events or
//! lines is closed after [`IDLE_TIMEOUT`] without a request, or without reading a line of an
//! answer; when every slot is taken, the client idle
//! the longest is closed to make room ([`MAX_FOLLOWERS`] keeps such slots), so `stop` and
//! `status` always get through. Warnings a client can cause are rate-limited ([`WARN_EVERY`]).

use std::collections::VecDeque;
use std::io::{self, ErrorKind as IoKind};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixListener as StdListener;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{Notify, broadcast, mpsc, oneshot, watch};
use tracing::{debug, info, warn};

pub use crate::base::ownership::DirProblem;
use crate::base::ownership::{CheckedDir, DirRule, open_dir};
use crate::supervision::control::protocol::{
    BACKLOG, DEFAULT_LOG_LINES, ErrorKind, EventRecord, LogRecord, MAX_REQUEST, Reply, ReplyBody,
    Request, parse_request,
};
use crate::supervision::event::Record;
use crate::supervision::output::{Follower, Next, Output};

/// At most this many clients at once. When all are taken, the one idle the longest (waiting
/// for its next request, or not reading its answer) is closed to make room for a new one; only
/// when none is idle is the new one refused.
pub const MAX_CLIENTS: usize = 64;

/// At most this many clients follow the event stream or helpers' lines (they are never idle),
/// so that at least
/// `MAX_CLIENTS - MAX_FOLLOWERS` slots always hold clients that answer promptly or can be
/// closed to make room: `stop` and `status` always get through.
pub const MAX_FOLLOWERS: usize = 48;

/// A client that does not follow events or lines is closed when it goes this long without a
/// complete request (counted from its connection or its last answer), or without reading a
/// line of an answer.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(5);

/// Warnings a client can cause (refused peers, clients closed to make room, failed accepts)
/// are logged at most once each this long; the others are counted.
pub const WARN_EVERY: Duration = Duration::from_secs(1);

/// Events a following client may be behind before it loses the oldest.
const RING: usize = 1024;

/// The default socket path for a supervisor named `name`: `$XDG_RUNTIME_DIR/foster/NAME.sock`,
/// else `/run/foster/NAME.sock` for root, else `/tmp/foster-UID/NAME.sock` (`$TMPDIR` when set).
pub fn default_path(name: &str) -> PathBuf {
    default_dir().join(format!("{name}.sock"))
}

/// The directory of default socket paths (see [`default_path`]). It must be private (see
/// [`open_private_dir`]): a directory of another user there is refused, never used.
pub fn default_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d).join("foster");
    }
    let uid = nix::unistd::geteuid();
    if uid.is_root() {
        PathBuf::from("/run/foster")
    } else {
        std::env::temp_dir().join(format!("foster-{}", uid.as_raw()))
    }
}

/// Why the socket could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    /// A supervisor answers on this path: it is not taken over.
    #[error(
        "control socket {}: another supervisor is listening there; stop it or give another \
         path with --socket",
        .0.display()
    )]
    Live(PathBuf),
    /// The socket's directory is not safe to use (or cannot be made); the message names it,
    /// its owner and its mode, and what to do.
    #[error("control socket: {0}")]
    Dir(String),
    /// Anything else, with what was being done.
    #[error("control socket {path}: {1}: {2}", path = .0.display())]
    Io(PathBuf, String, #[source] io::Error),
}

/// Opens and checks the default socket directory `dir` without creating it, for clients
/// looking for a supervisor: [`DirProblem::Missing`] when it does not exist, and the same
/// refusal as `foster run` gives when it is not a private directory of this user.
pub fn open_private_dir(dir: &Path) -> Result<std::os::fd::OwnedFd, DirProblem> {
    open_dir(dir, DirRule::Private, false).map(|d| d.fd)
}

/// Opens and checks the default socket directory `dir`, making it (mode 0700) when missing and
/// its parent exists, as `foster run` does for its control socket: foster's other sockets (the
/// notify socket) go there too.
pub fn make_private_dir(dir: &Path) -> Result<std::os::fd::OwnedFd, DirProblem> {
    open_dir(dir, DirRule::Private, true).map(|d| d.fd)
}

/// The directory of the notify sockets of helpers that run as other users than foster's
/// ([`reachable_dir`]), opened and checked ([`DirRule::Reachable`]: foster's, mode 0711, so
/// that such a helper may enter it but nobody lists or writes it), made when missing.
pub fn make_reachable_dir() -> Result<(PathBuf, std::os::fd::OwnedFd), DirProblem> {
    let dir = reachable_dir();
    let fd = open_dir(&dir, DirRule::Reachable, true)?.fd;
    Ok((dir, fd))
}

/// Where [`make_reachable_dir`] is: [`default_dir`] with `-notify` appended, in the same
/// runtime root, when others may enter that root; else (root's `XDG_RUNTIME_DIR`,
/// `/run/user/0`, is mode 0700: no other user reaches anything in it) the system's,
/// `/run/foster-notify`, or `TMPDIR/foster-notify-UID` where there is no `/run`.
pub fn reachable_dir() -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let private = default_dir();
    let mut name = private.file_name().unwrap_or_default().to_owned();
    name.push("-notify");
    let beside = private.with_file_name(name);
    let enterable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_dir() && m.permissions().mode() & 0o001 != 0)
    };
    match beside.parent() {
        Some(root) if enterable(root) => beside,
        _ if enterable(Path::new("/run")) => PathBuf::from("/run/foster-notify"),
        _ => {
            std::env::temp_dir().join(format!("foster-notify-{}", nix::unistd::geteuid().as_raw()))
        }
    }
}

/// A bound, not yet serving, socket. Bind it before any other thread exists: binding sets the
/// process umask for an instant.
#[derive(Debug)]
pub struct Bound {
    listener: StdListener,
    file: SocketFile,
}

/// The socket file, removed on drop if it is still the one foster bound; and its directory
/// when foster made it for a `--socket` path and it is empty.
#[derive(Debug)]
struct SocketFile {
    path: PathBuf,
    dev: u64,
    ino: u64,
    created_dir: Option<PathBuf>,
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        if let Ok(m) = std::fs::symlink_metadata(&self.path) {
            if m.dev() == self.dev && m.ino() == self.ino {
                let _ = std::fs::remove_file(&self.path);
            }
        }
        if let Some(d) = &self.created_dir {
            // Only when empty: removing it must never take anything else with it.
            let _ = std::fs::remove_dir(d);
        }
    }
}

/// Binds the control socket at `path` with mode 0600, in a directory checked first (see
/// [`DirRule`]: the default directory, or any path inside it, must be a private directory of
/// this user; another directory must be one no other user can write to). A missing directory
/// is made (mode 0700) when its parent exists; never a chain of them. A socket file nobody
/// accepts on (`ECONNREFUSED`) is replaced; a live one is [`BindError::Live`].
pub fn bind(path: &Path) -> Result<Bound, BindError> {
    let io_err = |what: &str, e: io::Error| BindError::Io(path.to_path_buf(), what.to_string(), e);
    let Some(name) = path.file_name() else {
        return Err(io_err(
            "not a path to a file",
            io::Error::from(IoKind::InvalidInput),
        ));
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let rule = if dir == default_dir() {
        DirRule::Private
    } else {
        DirRule::Given("the socket")
    };
    let checked = match open_dir(&dir, rule, true) {
        Ok(d) => d,
        Err(DirProblem::Missing) => unreachable!("open_dir creates a missing directory"),
        Err(DirProblem::Refused(m)) => return Err(BindError::Dir(m)),
    };
    let created_dir = (checked.created && matches!(rule, DirRule::Given(_))).then(|| dir.clone());
    let cleanup = |created: &Option<PathBuf>| {
        if let Some(d) = created {
            let _ = std::fs::remove_dir(d);
        }
    };
    let listener = match bind_listener(path, &checked) {
        Ok(l) => l,
        Err(e) => {
            cleanup(&created_dir);
            return Err(e);
        }
    };
    // The socket must be the entry `name` of the directory checked above: a directory
    // replaced (renamed away, a symbolic link put in its place) between the check and the bind
    // is noticed here.
    let verify = || -> Result<(u64, u64), BindError> {
        let m = std::fs::symlink_metadata(path).map_err(|e| io_err("cannot stat after bind", e))?;
        let at =
            nix::sys::stat::fstatat(&checked.fd, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)
                .map_err(|e| io_err("cannot stat after bind", e.into()))?;
        let d = std::fs::metadata(&dir).map_err(|e| io_err("cannot stat its directory", e))?;
        if (at.st_dev, at.st_ino) != (m.dev(), m.ino())
            || (d.dev(), d.ino()) != (checked.dev, checked.ino)
        {
            return Err(BindError::Dir(format!(
                "the directory {} was replaced while the socket was being bound in it; not \
                 using it",
                dir.display()
            )));
        }
        Ok((m.dev(), m.ino()))
    };
    let (dev, ino) = match verify() {
        Ok(v) => v,
        Err(e) => {
            drop(listener);
            cleanup(&created_dir);
            return Err(e);
        }
    };
    listener
        .set_nonblocking(true)
        .map_err(|e| io_err("cannot make it non-blocking", e))?;
    Ok(Bound {
        listener,
        file: SocketFile {
            path: path.to_path_buf(),
            dev,
            ino,
            created_dir,
        },
    })
}

/// Binds at `path` (in the checked directory `dir`), replacing a stale socket file.
fn bind_listener(path: &Path, dir: &CheckedDir) -> Result<StdListener, BindError> {
    let io_err = |what: &str, e: io::Error| BindError::Io(path.to_path_buf(), what.to_string(), e);
    match bind_0600(path) {
        Ok(l) => Ok(l),
        Err(e) if e.kind() == IoKind::AddrInUse => {
            match std::os::unix::net::UnixStream::connect(path) {
                Ok(_) => Err(BindError::Live(path.to_path_buf())),
                Err(c) if c.raw_os_error() == Some(libc::ECONNREFUSED) => {
                    let m = std::fs::symlink_metadata(path)
                        .map_err(|e| io_err("cannot inspect the existing file", e))?;
                    if !m.file_type().is_socket_like() {
                        return Err(io_err(
                            "exists and is not a socket; not replacing it",
                            io::Error::from(IoKind::AlreadyExists),
                        ));
                    }
                    info!(
                        "control socket {}: replacing a stale socket (nothing listens on it)",
                        path.display()
                    );
                    let name = path.file_name().unwrap_or_default();
                    nix::unistd::unlinkat(&dir.fd, name, nix::unistd::UnlinkatFlags::NoRemoveDir)
                        .map_err(|e| io_err("cannot remove the stale socket", e.into()))?;
                    bind_0600(path).map_err(|e| io_err("cannot bind", e))
                }
                Err(c) => Err(io_err(
                    "exists, and connecting to it to see whether it is stale failed",
                    c,
                )),
            }
        }
        Err(e) => Err(io_err("cannot bind", e)),
    }
}

/// Takes over a listening socket bound at `path` by another process (`foster demo` binds it
/// before starting its supervisor, so that it can connect at once): `fd` is the inherited
/// descriptor. It is made close-on-exec, so helpers do not inherit it.
pub fn adopt(fd: std::os::fd::RawFd, path: &Path) -> Result<Bound, BindError> {
    use std::os::fd::FromRawFd;
    let io_err = |what: &str, e: io::Error| BindError::Io(path.to_path_buf(), what.to_string(), e);
    // SAFETY: stat is plain integers: all zeros is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat of a descriptor number; fails cleanly when it is not open.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(io_err(
            &format!("inherited descriptor {fd}"),
            io::Error::last_os_error(),
        ));
    }
    if st.st_mode & libc::S_IFMT != libc::S_IFSOCK {
        return Err(io_err(
            &format!("inherited descriptor {fd} is not a socket"),
            io::Error::from(IoKind::InvalidInput),
        ));
    }
    // SAFETY: the descriptor is open and handed to foster alone.
    unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    // Clients learn the supervisor's pid from the peer credentials that listen() records, the
    // binder's until now: listening again makes them this process's (contained, the init of
    // its own PID namespace, whose pids clients translate from there).
    // SAFETY: listen on a socket descriptor we own; -1 is the system's largest backlog.
    if unsafe { libc::listen(fd, -1) } != 0 {
        return Err(io_err(
            &format!("cannot listen on inherited descriptor {fd}"),
            io::Error::last_os_error(),
        ));
    }
    // SAFETY: as above; the listener owns it from here.
    let listener = unsafe { StdListener::from_raw_fd(fd) };
    listener
        .set_nonblocking(true)
        .map_err(|e| io_err("cannot make it non-blocking", e))?;
    let m = std::fs::symlink_metadata(path).map_err(|e| io_err("cannot stat", e))?;
    Ok(Bound {
        listener,
        file: SocketFile {
            path: path.to_path_buf(),
            dev: m.dev(),
            ino: m.ino(),
            created_dir: None,
        },
    })
}

/// Gives up the socket file without removing it (for a process that binds for another one,
/// such as `foster demo`, whose supervisor removes it).
pub fn into_listener(b: Bound) -> (StdListener, PathBuf) {
    let path = b.file.path.clone();
    std::mem::forget(b.file);
    (b.listener, path)
}

trait SocketLike {
    fn is_socket_like(&self) -> bool;
}
impl SocketLike for std::fs::FileType {
    fn is_socket_like(&self) -> bool {
        use std::os::unix::fs::FileTypeExt;
        self.is_socket()
    }
}

/// Binds with umask 0177 so the socket is 0600 from its creation (no chmod window).
fn bind_0600(path: &Path) -> io::Result<StdListener> {
    // SAFETY: umask only changes the process's file mode mask; restored right after.
    let old = unsafe { libc::umask(0o177) };
    let r = StdListener::bind(path);
    // SAFETY: as above.
    unsafe { libc::umask(old) };
    r
}

impl Bound {
    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.file.path
    }

    /// Starts accepting on the current tokio runtime (call inside it). `output`: the helpers'
    /// kept lines, for `logs` (without it, `logs` is refused).
    pub fn serve(self, hub: Arc<Hub>, output: Option<Arc<Output>>) -> io::Result<Server> {
        let listener = UnixListener::from_std(self.listener)?;
        let (tx, rx) = mpsc::channel(MAX_CLIENTS);
        let clients = Arc::new(watch::Sender::new(0usize));
        let ctx = ClientCtx {
            hub: hub.clone(),
            output: output.clone(),
            commands: tx,
            clients: clients.clone(),
            slots: Arc::new(Mutex::new(Slots::default())),
            uid: nix::unistd::geteuid().as_raw(),
        };
        let accept = tokio::spawn(accept_loop(listener, ctx));
        Ok(Server {
            file: self.file,
            rx,
            hub,
            output,
            clients,
            accept,
        })
    }
}

/// Who sent a request (or a notify datagram): shown as `pid N (uid U)`, or, for a process
/// outside foster's PID namespace, as that (see [`process_text`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    /// 0 when the peer is outside foster's PID namespace (foster contained).
    pub pid: i32,
    pub uid: u32,
}

impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (uid {})", process_text(self.pid), self.uid)
    }
}

/// A process as the kernel named it to foster (`SO_PEERCRED`, `SCM_CREDENTIALS`): `pid N`; the
/// kernel's 0 for a process outside foster's PID namespace (foster contained, the process in
/// the namespace it was started in, or another) is said in words, never as a pid 0.
pub fn process_text(pid: i32) -> String {
    match pid {
        0 => "a process outside foster's PID namespace".to_string(),
        p => format!("pid {p}"),
    }
}

/// One request for the supervisor, and where its one reply goes.
#[derive(Debug)]
pub struct Command {
    pub request: Request,
    pub peer: Peer,
    pub reply: oneshot::Sender<Reply>,
}

/// The serving socket, held by the supervisor.
#[derive(Debug)]
pub struct Server {
    file: SocketFile,
    rx: mpsc::Receiver<Command>,
    hub: Arc<Hub>,
    output: Option<Arc<Output>>,
    clients: Arc<watch::Sender<usize>>,
    accept: tokio::task::JoinHandle<()>,
}

impl Server {
    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.file.path
    }

    /// The next request for the supervisor (pending forever once no client can send any).
    pub async fn recv(&mut self) -> Command {
        match self.rx.recv().await {
            Some(c) => c,
            None => std::future::pending().await,
        }
    }

    /// Stops accepting, ends every event and line stream (followers get what was published
    /// so far), and waits up to `grace` for clients to be written to. The socket file is
    /// removed when the server is dropped.
    pub async fn finish(self, grace: Duration) {
        self.accept.abort();
        self.hub.close();
        if let Some(o) = &self.output {
            o.close();
        }
        // Client tasks end on their own once their stream is closed and written; this wait is
        // bounded by `grace` for clients that do not read.
        let mut rx = self.clients.subscribe();
        let _ = tokio::time::timeout(grace, rx.wait_for(|n| *n == 0)).await;
    }
}

/// The events of one supervisor: sequence numbers, the backlog and the broadcast.
#[derive(Debug)]
pub struct Hub {
    inner: Mutex<HubInner>,
}

#[derive(Debug)]
struct HubInner {
    seq: u64,
    backlog: VecDeque<Arc<EventRecord>>,
    tx: Option<broadcast::Sender<Arc<EventRecord>>>,
}

impl Default for Hub {
    fn default() -> Self {
        Hub::new()
    }
}

impl Hub {
    pub fn new() -> Hub {
        let (tx, _) = broadcast::channel(RING);
        Hub {
            inner: Mutex::new(HubInner {
                seq: 0,
                backlog: VecDeque::with_capacity(BACKLOG),
                tx: Some(tx),
            }),
        }
    }

    /// Numbers `record`, keeps it in the backlog and sends it to every follower. Never blocks.
    pub fn publish(&self, record: &Record) {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        g.seq += 1;
        let rec = Arc::new(EventRecord {
            seq: g.seq,
            ts_ms: record.ts_ms,
            event: record.event.clone(),
            foreign_pids: Vec::new(),
        });
        if g.backlog.len() == BACKLOG {
            g.backlog.pop_front();
        }
        g.backlog.push_back(rec.clone());
        if let Some(tx) = &g.tx {
            let _ = tx.send(rec);
        }
    }

    /// The last `n` events and a receiver of every later one, taken together so that none is
    /// missed or repeated. `None` once the hub is closed.
    pub fn subscribe(
        &self,
        n: usize,
    ) -> (
        Vec<Arc<EventRecord>>,
        Option<broadcast::Receiver<Arc<EventRecord>>>,
    ) {
        let g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let skip = g.backlog.len().saturating_sub(n);
        let backlog = g.backlog.iter().skip(skip).cloned().collect();
        (backlog, g.tx.as_ref().map(|t| t.subscribe()))
    }

    /// Ends every stream after the events already sent.
    pub fn close(&self) {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).tx = None;
    }

    /// Events published so far.
    pub fn published(&self) -> u64 {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).seq
    }
}

#[derive(Clone)]
struct ClientCtx {
    hub: Arc<Hub>,
    output: Option<Arc<Output>>,
    commands: mpsc::Sender<Command>,
    /// Client tasks alive (an evicted one counts until its task ends).
    clients: Arc<watch::Sender<usize>>,
    slots: Arc<Mutex<Slots>>,
    uid: u32,
}

/// The clients holding a slot, and which of them may be closed to make room.
#[derive(Debug, Default)]
struct Slots {
    next_id: u64,
    entries: std::collections::HashMap<u64, SlotEntry>,
}

#[derive(Debug)]
struct SlotEntry {
    pid: i32,
    /// Since when it has been waiting for its next request or writing an answer; `None` while
    /// a request of its is with the supervisor.
    idle_since: Option<Instant>,
    /// It follows the event stream or helpers' lines: never idle, never closed to make room.
    follows: bool,
    /// Tells its task it was closed to make room.
    evict: Arc<Notify>,
}

/// Whether a new client got a slot.
enum Admission {
    /// Its slot's id and eviction notice, and the client closed to make room for it (pid, how
    /// long it had been idle), if one was.
    In(u64, Arc<Notify>, Option<(i32, Duration)>),
    /// Every slot is taken and none is idle.
    Full,
}

impl Slots {
    /// A slot for a new client; when all [`MAX_CLIENTS`] are taken, the one idle the longest
    /// is freed for it.
    fn admit(&mut self, pid: i32, now: Instant) -> Admission {
        let mut evicted = None;
        if self.entries.len() >= MAX_CLIENTS {
            let oldest = self
                .entries
                .iter()
                .filter(|(_, e)| !e.follows)
                .filter_map(|(id, e)| e.idle_since.map(|t| (t, *id)))
                .min();
            let Some((since, id)) = oldest else {
                return Admission::Full;
            };
            if let Some(e) = self.entries.remove(&id) {
                e.evict.notify_one();
                evicted = Some((e.pid, now.saturating_duration_since(since)));
            }
        }
        self.next_id += 1;
        let evict = Arc::new(Notify::new());
        self.entries.insert(
            self.next_id,
            SlotEntry {
                pid,
                idle_since: Some(now),
                follows: false,
                evict: evict.clone(),
            },
        );
        Admission::In(self.next_id, evict, evicted)
    }

    fn followers(&self) -> usize {
        self.entries.values().filter(|e| e.follows).count()
    }
}

/// A client task's slot: freed when the task ends, however it ends.
struct ClientSlot {
    id: u64,
    evict: Arc<Notify>,
    slots: Arc<Mutex<Slots>>,
    clients: Arc<watch::Sender<usize>>,
}

impl ClientSlot {
    /// Marks the client idle since `since`, or (`None`) busy with a request at the
    /// supervisor. False when it was closed to make room meanwhile.
    fn set_idle(&self, since: Option<Instant>) -> bool {
        let mut g = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        match g.entries.get_mut(&self.id) {
            Some(e) => {
                e.idle_since = since;
                true
            }
            None => false,
        }
    }

    /// Makes the client a follower (of events or lines), if fewer than [`MAX_FOLLOWERS`] are.
    /// `Err(true)` when the limit is reached, `Err(false)` when it was closed to make room.
    fn follow(&self) -> Result<(), bool> {
        let mut g = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        let followers = g.followers();
        match g.entries.get_mut(&self.id) {
            Some(e) if e.follows => Ok(()),
            Some(_) if followers >= MAX_FOLLOWERS => Err(true),
            Some(e) => {
                e.follows = true;
                Ok(())
            }
            None => Err(false),
        }
    }
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        let mut g = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        g.entries.remove(&self.id);
        drop(g);
        self.clients.send_modify(|n| *n -= 1);
    }
}

/// Warnings about clients, which any local process can cause at will: at most one each
/// [`WARN_EVERY`]; those in between are counted, and the count is logged with the next one
/// shown, or on its own once the interval is over.
#[derive(Debug, Default)]
struct Throttle {
    last: Option<Instant>,
    suppressed: u64,
}

impl Throttle {
    fn warn(&mut self, now: Instant, message: impl FnOnce() -> String) {
        if self.last.is_some_and(|l| now < l + WARN_EVERY) {
            self.suppressed += 1;
            return;
        }
        self.last = Some(now);
        match std::mem::take(&mut self.suppressed) {
            0 => warn!("{}", message()),
            n => warn!(
                "{} ({n} more suppressed since the last one shown; at most one a second is \
                 logged)",
                message()
            ),
        }
    }

    /// When the count of suppressed warnings is due, if there is one.
    fn due(&self) -> Option<Instant> {
        match (self.suppressed, self.last) {
            (0, _) | (_, None) => None,
            (_, Some(l)) => Some(l + WARN_EVERY),
        }
    }

    fn flush(&mut self, now: Instant) {
        let n = std::mem::take(&mut self.suppressed);
        if n > 0 {
            self.last = Some(now);
            warn!(
                "control socket: {n} more suppressed since the last one shown (at most one a \
                 second is logged)"
            );
        }
    }
}

/// Accepts clients: each of foster's uid (or root) that a slot admits gets a task of its own.
async fn accept_loop(listener: UnixListener, ctx: ClientCtx) {
    let mut throttle = Throttle::default();
    loop {
        let due = throttle.due();
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = sleep_until_opt(due) => {
                throttle.flush(Instant::now());
                continue;
            }
        };
        let now = Instant::now();
        let stream = match accepted {
            Ok((s, _)) => s,
            Err(e) => {
                // EMFILE and the like: wait for a client to go rather than spin.
                throttle.warn(now, || format!("control socket: accept failed: {e}"));
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Some(peer) = peer_of(&stream, &ctx, &mut throttle, now) else {
            continue;
        };
        let Some((id, evict)) = admit(&stream, peer, &ctx, &mut throttle, now) else {
            continue;
        };
        debug!("control socket: client {peer}");
        ctx.clients.send_modify(|n| *n += 1);
        let slot = ClientSlot {
            id,
            evict,
            slots: ctx.slots.clone(),
            clients: ctx.clients.clone(),
        };
        tokio::spawn(client(stream, peer, ctx.clone(), slot));
    }
}

/// The client's process and uid, when it may use this supervisor (foster's uid or root); a
/// refused one is told why.
fn peer_of(
    stream: &UnixStream,
    ctx: &ClientCtx,
    throttle: &mut Throttle,
    now: Instant,
) -> Option<Peer> {
    let cred = match stream.peer_cred() {
        Ok(c) => c,
        Err(e) => {
            throttle.warn(now, || {
                format!("control socket: cannot read the peer's credentials, closing: {e}")
            });
            return None;
        }
    };
    let peer = Peer {
        pid: cred.pid().unwrap_or(0),
        uid: cred.uid(),
    };
    if peer.uid == ctx.uid || peer.uid == 0 {
        return Some(peer);
    }
    throttle.warn(now, || {
        format!(
            "control socket: refused a client of uid {} ({}): only uid {} and root \
             may use this supervisor",
            peer.uid,
            process_text(peer.pid),
            ctx.uid
        )
    });
    let line = Reply::error(
        ErrorKind::PermissionDenied,
        format!(
            "permission denied: this supervisor runs as uid {} and answers only that \
             uid and root; you are uid {}",
            ctx.uid, peer.uid
        ),
    )
    .to_line();
    let _ = stream.try_write(&line);
    None
}

/// A client's slot (its number and its eviction notice), when one is free or idle; a refused
/// client is told why.
fn admit(
    stream: &UnixStream,
    peer: Peer,
    ctx: &ClientCtx,
    throttle: &mut Throttle,
    now: Instant,
) -> Option<(u64, Arc<Notify>)> {
    let admission = ctx
        .slots
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .admit(peer.pid, now);
    match admission {
        Admission::Full => {
            throttle.warn(now, || {
                format!(
                    "control socket: {MAX_CLIENTS} clients connected, none idle (following \
                     events or waiting for an answer); refused {peer}"
                )
            });
            let line = Reply::error(
                ErrorKind::Refused,
                format!(
                    "too many clients ({MAX_CLIENTS}) connected to this supervisor, none \
                     of them idle; try again"
                ),
            )
            .to_line();
            let _ = stream.try_write(&line);
            None
        }
        Admission::In(id, evict, evicted) => {
            if let Some((pid, idle)) = evicted {
                throttle.warn(now, || {
                    format!(
                        "control socket: {MAX_CLIENTS} clients connected: closed the one \
                         idle the longest ({}, idle {:.1}s) to make room for {peer}",
                        process_text(pid),
                        idle.as_secs_f64(),
                    )
                });
            }
            Some((id, evict))
        }
    }
}

/// Sleeps until `t`, or forever when there is none.
async fn sleep_until_opt(t: Option<Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t.into()).await,
        None => std::future::pending().await,
    }
}

/// One line read from a client.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// A complete line, newline removed (or the last bytes before end of input).
    Text(Vec<u8>),
    /// A line longer than [`MAX_REQUEST`], skipped up to its newline; its length so far.
    Oversized(usize),
    /// End of input.
    Eof,
}

/// Splits a byte stream into lines of at most [`MAX_REQUEST`] bytes (plus a `\r`), never
/// holding more than that plus one read's worth of complete lines.
#[derive(Debug, Default)]
pub struct LineReader {
    buf: Vec<u8>,
    /// Bytes of an oversized line skipped so far (`Some` while skipping).
    skipping: Option<usize>,
    ready: VecDeque<Line>,
    eof: bool,
}

impl LineReader {
    pub fn new() -> LineReader {
        LineReader::default()
    }

    /// The next line from `r`. Cancel-safe: bytes read before a cancellation are kept.
    pub async fn next<R: AsyncRead + Unpin>(&mut self, r: &mut R) -> io::Result<Line> {
        loop {
            if let Some(line) = self.take() {
                return Ok(line);
            }
            if self.eof {
                return Ok(Line::Eof);
            }
            let mut chunk = [0u8; 4096];
            let n = r.read(&mut chunk).await?;
            if n == 0 {
                self.end();
            } else {
                self.feed(&chunk[..n]);
            }
        }
    }

    /// Adds bytes: complete lines become ready, an oversized one is counted, not kept.
    pub fn feed(&mut self, bytes: &[u8]) {
        let mut rest = bytes;
        while let Some(i) = rest.iter().position(|&b| b == b'\n') {
            self.push_part(&rest[..i]);
            let line = match self.skipping.take() {
                Some(n) => Line::Oversized(n),
                None => Line::Text(std::mem::take(&mut self.buf)),
            };
            self.ready.push_back(line);
            rest = &rest[i + 1..];
        }
        self.push_part(rest);
    }

    fn push_part(&mut self, part: &[u8]) {
        match &mut self.skipping {
            Some(n) => *n += part.len(),
            None if self.buf.len() + part.len() > MAX_REQUEST + 1 => {
                self.skipping = Some(self.buf.len() + part.len());
                self.buf = Vec::new();
            }
            None => self.buf.extend_from_slice(part),
        }
    }

    /// Marks the end of input, as [`LineReader::next`] does when the reader has no more: then
    /// [`LineReader::take`] gives what is left.
    pub fn end(&mut self) {
        self.eof = true;
    }

    /// The next complete line; at end of input, what is left.
    pub fn take(&mut self) -> Option<Line> {
        if let Some(l) = self.ready.pop_front() {
            return Some(l);
        }
        if !self.eof {
            return None;
        }
        if let Some(n) = self.skipping.take() {
            return Some(Line::Oversized(n));
        }
        (!self.buf.is_empty()).then(|| Line::Text(std::mem::take(&mut self.buf)))
    }
}

async fn write_line(stream: &mut UnixStream, reply: &Reply) -> io::Result<()> {
    stream.write_all(&reply.to_line()).await
}

/// Why a client's connection ended early.
#[derive(Debug)]
enum End {
    Io(io::Error),
    /// No complete request within [`IDLE_TIMEOUT`] (`reading`: while waiting for one, not
    /// while writing an answer it did not read).
    Idle {
        reading: bool,
    },
    /// Closed to make room for a new client, after being idle this long.
    Evicted {
        reading: bool,
        idle: Duration,
    },
}

async fn client(mut stream: UnixStream, peer: Peer, ctx: ClientCtx, slot: ClientSlot) {
    match serve_client(&mut stream, peer, &ctx, &slot).await {
        Ok(()) => {}
        Err(End::Io(e)) => debug!("control socket: client {peer} gone: {e}"),
        Err(end) => {
            debug!("control socket: client {peer}: closed ({end:?})");
            let notice = match end {
                End::Idle { reading: true } => Some(format!(
                    "closing the connection: no complete request within {}s (the idle timeout)",
                    IDLE_TIMEOUT.as_secs()
                )),
                End::Evicted {
                    reading: true,
                    idle,
                } => Some(format!(
                    "closing the connection to make room: {MAX_CLIENTS} clients are connected \
                     and this one was idle the longest ({:.1}s without a request)",
                    idle.as_secs_f64()
                )),
                _ => None, // it was not reading: a partial answer may be in its buffer
            };
            if let Some(m) = notice {
                // Best effort, never waiting: the client may not read.
                let _ = stream.try_write(&Reply::error(ErrorKind::Idle, m).to_line());
            }
        }
    }
    let _ = stream.shutdown().await;
}

/// Writes one answer to a client that does not follow events, within its idle deadline (and
/// unless it is closed to make room meanwhile).
async fn write_bounded(
    stream: &mut UnixStream,
    reply: &Reply,
    slot: &ClientSlot,
    since: Instant,
) -> Result<(), End> {
    tokio::select! {
        r = write_line(stream, reply) => r.map_err(End::Io),
        _ = slot.evict.notified() => Err(End::Evicted { reading: false, idle: since.elapsed() }),
        _ = tokio::time::sleep_until((since + IDLE_TIMEOUT).into()) => {
            Err(End::Idle { reading: false })
        }
    }
}

/// What a client follows, once it asked to.
enum Following {
    Events(broadcast::Receiver<Arc<EventRecord>>),
    Logs(Box<Follower>, Arc<Output>),
}

/// An answer: its reply lines, then kept lines of helpers (each made a `log` reply only as it
/// is written: they are shared with the rings until then), and what the client now follows.
struct Answer {
    replies: Vec<Reply>,
    lines: Vec<Arc<crate::supervision::output::Line>>,
    follows: Option<Following>,
}

impl Answer {
    fn one(reply: Reply) -> Answer {
        Answer {
            replies: vec![reply],
            lines: Vec::new(),
            follows: None,
        }
    }
}

fn log_reply(line: &crate::supervision::output::Line) -> Reply {
    Reply::new(ReplyBody::Log(LogRecord::of(line)))
}

/// The refusal of a follower beyond [`MAX_FOLLOWERS`].
fn too_many_followers() -> Reply {
    Reply::error(
        ErrorKind::Refused,
        format!(
            "{MAX_FOLLOWERS} clients already follow the events or the helpers' lines of this \
             supervisor (the limit, which keeps slots for other requests); ask with \"follow\": \
             false, or try again later"
        ),
    )
}

/// "no helper named "x"; helpers: a, b" (the first 50 named). The names as they are: a client
/// escapes the message before it shows it (escaping here would show `\` twice).
fn no_such_helper(name: &str, output: &Output) -> Reply {
    const SHOWN: usize = 50;
    let mut names = output.helpers();
    names.retain(|n| !n.is_empty());
    let mut list: Vec<String> = names.iter().take(SHOWN).map(|n| n.to_string()).collect();
    if names.len() > SHOWN {
        list.push(format!("and {} more", names.len() - SHOWN));
    }
    Reply::error(
        ErrorKind::NoSuchHelper,
        format!(
            "no helper named \"{name}\"; helpers: {}",
            if list.is_empty() {
                "none".to_string()
            } else {
                list.join(", ")
            }
        ),
    )
}

/// Serves one client's requests until it leaves, is evicted or stays idle too long.
async fn serve_client(
    stream: &mut UnixStream,
    peer: Peer,
    ctx: &ClientCtx,
    slot: &ClientSlot,
) -> Result<(), End> {
    let mut lines = LineReader::new();
    let mut follower: Option<Following> = None;
    let mut eof = false;
    // Waiting for a complete request since then; a follower is never idle.
    let mut since = Instant::now();
    loop {
        if eof && follower.is_none() {
            return Ok(());
        }
        let following = follower.is_some();
        let line = tokio::select! {
            // A request already read is served before a notice that came after it.
            biased;
            l = lines.next(stream), if !eof => l.map_err(End::Io)?,
            next = next_streamed(&mut follower), if following => {
                let Some(reply) = next else {
                    // The supervisor is ending: nothing more will be answered.
                    return Ok(());
                };
                write_line(stream, &reply).await.map_err(End::Io)?;
                continue;
            }
            _ = slot.evict.notified(), if !following => {
                return Err(End::Evicted { reading: true, idle: since.elapsed() });
            }
            _ = tokio::time::sleep_until((since + IDLE_TIMEOUT).into()), if !following => {
                return Err(End::Idle { reading: true });
            }
        };
        let request = match line {
            Line::Eof => {
                eof = true;
                continue;
            }
            line => match request_of(line, peer) {
                Some(r) => r,
                None => continue,
            },
        };
        let answer = answer(request, peer, ctx, slot, since).await?;
        if let Some(f) = answer.follows {
            follower = Some(f);
        }
        let replies = answer.replies.into_iter();
        let replies = replies.chain(answer.lines.iter().map(|l| log_reply(l)));
        since = write_answer(stream, replies, follower.is_none(), slot, since).await?;
    }
}

/// The request a line (not the end) carries, or the reply refusing it; none for a blank line
/// (no answer, and the idle timeout goes on).
fn request_of(line: Line, peer: Peer) -> Option<Result<Request, Box<Reply>>> {
    let text = match line {
        Line::Eof => return None,
        Line::Oversized(n) => {
            return Some(Err(Box::new(Reply::error(
                ErrorKind::Oversized,
                format!(
                    "request line of more than {n} bytes is longer than the limit of \
                     {MAX_REQUEST} bytes; skipped up to its newline"
                ),
            ))));
        }
        Line::Text(t) => t,
    };
    if text.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    Some(parse_request(&text).map_err(|e| {
        debug!("control socket: client {peer}: {e}");
        Box::new(e.reply())
    }))
}

/// A client asking to follow takes a follower's slot, if one is left: the refusal otherwise.
fn may_follow(slot: &ClientSlot, follow: bool, since: Instant) -> Result<Option<Reply>, End> {
    match follow.then(|| slot.follow()) {
        Some(Err(false)) => Err(End::Evicted {
            reading: true,
            idle: since.elapsed(),
        }),
        Some(Err(true)) => Ok(Some(too_many_followers())),
        _ => Ok(None),
    }
}

/// The answer to one request (or its refusal): events and logs here, the others by the
/// supervisor's loop.
async fn answer(
    request: Result<Request, Box<Reply>>,
    peer: Peer,
    ctx: &ClientCtx,
    slot: &ClientSlot,
    since: Instant,
) -> Result<Answer, End> {
    Ok(match request {
        Err(reply) => Answer::one(*reply),
        Ok(Request::Events { backlog, follow }) => {
            events_answer(ctx, slot, backlog, follow, since)?
        }
        Ok(Request::Logs {
            helper,
            lines,
            follow,
        }) => logs_answer(ctx, slot, helper, lines, follow, since)?,
        Ok(request) => {
            if !slot.set_idle(None) {
                return Err(End::Evicted {
                    reading: true,
                    idle: since.elapsed(),
                });
            }
            let (tx, rx) = oneshot::channel();
            let cmd = Command {
                request,
                peer,
                reply: tx,
            };
            let reply = if ctx.commands.send(cmd).await.is_err() {
                None
            } else {
                rx.await.ok()
            };
            Answer::one(
                reply.unwrap_or_else(|| {
                    Reply::error(ErrorKind::Refused, "the supervisor is exiting")
                }),
            )
        }
    })
}

/// The answer to `events`: the backlog, then the events as they come when it follows.
fn events_answer(
    ctx: &ClientCtx,
    slot: &ClientSlot,
    backlog: Option<usize>,
    follow: bool,
    since: Instant,
) -> Result<Answer, End> {
    let n = backlog.unwrap_or(BACKLOG).min(BACKLOG);
    let (past, rx) = ctx.hub.subscribe(n);
    let follow = follow && rx.is_some();
    if let Some(refused) = may_follow(slot, follow, since)? {
        return Ok(Answer::one(refused));
    }
    let mut v = vec![Reply::new(ReplyBody::Events {
        backlog: past.len(),
        follow,
    })];
    v.extend(
        past.iter()
            .map(|rec| Reply::new(ReplyBody::Event((**rec).clone()))),
    );
    Ok(Answer {
        replies: v,
        lines: Vec::new(),
        follows: follow.then_some(rx).flatten().map(Following::Events),
    })
}

/// The answer to `logs`: the kept lines, then the lines as they come when it follows.
fn logs_answer(
    ctx: &ClientCtx,
    slot: &ClientSlot,
    helper: Option<String>,
    n: Option<usize>,
    follow: bool,
    since: Instant,
) -> Result<Answer, End> {
    let Some(output) = &ctx.output else {
        return Ok(Answer::one(Reply::error(
            ErrorKind::Refused,
            "this supervisor keeps no helpers' output",
        )));
    };
    if helper
        .as_deref()
        .is_some_and(|h| output.captured(h) == Ok(false))
    {
        return Ok(Answer::one(Reply::error(
            ErrorKind::Refused,
            format!(
                "helper {:?} has no lines to show: its output is not captured \
                 (output = \"null\" or \"inherit\" in its configuration; \
                 \"capture\", the default, keeps them)",
                helper.as_deref().unwrap_or_default()
            ),
        )));
    }
    let n = n.unwrap_or(DEFAULT_LOG_LINES);
    let (past, f) = match output.follower(helper.as_deref(), n) {
        Err(e) => return Ok(Answer::one(no_such_helper(&e.0, output))),
        Ok(found) => found,
    };
    if let Some(refused) = may_follow(slot, follow, since)? {
        return Ok(Answer::one(refused));
    }
    let helpers = match helper {
        Some(h) => vec![h],
        None => output
            .helpers()
            .iter()
            .filter(|h| !h.is_empty())
            .map(|h| h.to_string())
            .collect(),
    };
    Ok(Answer {
        replies: vec![Reply::new(ReplyBody::Logs {
            helpers,
            lines: past.len(),
            follow,
        })],
        lines: past,
        follows: follow.then(|| Following::Logs(Box::new(f), output.clone())),
    })
}

/// Writes an answer's lines; a client that does not follow gets each within the idle timeout
/// of the one before, and is idle again after. Returns when it was last written to.
async fn write_answer(
    stream: &mut UnixStream,
    replies: impl Iterator<Item = Reply>,
    idle: bool,
    slot: &ClientSlot,
    since: Instant,
) -> Result<Instant, End> {
    let answered = Instant::now();
    if !idle {
        for r in replies {
            write_line(stream, &r).await.map_err(End::Io)?;
        }
        return Ok(answered);
    }
    if !slot.set_idle(Some(answered)) {
        // Closed to make room before its answer was written: say why instead.
        return Err(End::Evicted {
            reading: true,
            idle: since.elapsed(),
        });
    }
    let mut since = answered;
    // Each line of the answer within the idle timeout of the one before.
    for r in replies {
        write_bounded(stream, &r, slot, since).await?;
        since = Instant::now();
        if !slot.set_idle(Some(since)) {
            return Err(End::Evicted {
                reading: true,
                idle: Duration::ZERO,
            });
        }
    }
    Ok(since)
}

/// The next line a follower gets: an event, a helper's line, or how many it missed; `None`
/// once the stream has ended.
async fn next_streamed(f: &mut Option<Following>) -> Option<Reply> {
    match f {
        Some(Following::Events(rx)) => match rx.recv().await {
            Ok(rec) => Some(Reply::new(ReplyBody::Event((*rec).clone()))),
            Err(broadcast::error::RecvError::Lagged(n)) => {
                Some(Reply::new(ReplyBody::Lagged { dropped: n }))
            }
            Err(broadcast::error::RecvError::Closed) => None,
        },
        Some(Following::Logs(follower, output)) => match follower.next(output).await {
            Next::Line(l) => Some(log_reply(&l)),
            Next::Missed(n) => Some(Reply::new(ReplyBody::Lagged { dropped: n })),
            Next::Closed => None,
        },
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(chunks: &[&[u8]]) -> Vec<Line> {
        let mut r = LineReader::new();
        let mut out = Vec::new();
        for c in chunks {
            r.feed(c);
            while let Some(l) = r.take() {
                out.push(l);
            }
        }
        r.end();
        while let Some(l) = r.take() {
            out.push(l);
        }
        out
    }

    #[test]
    fn lines_split_and_join() {
        assert_eq!(
            lines(&[b"ab", b"c\nde\n", b"f"]),
            vec![
                Line::Text(b"abc".to_vec()),
                Line::Text(b"de".to_vec()),
                Line::Text(b"f".to_vec())
            ]
        );
    }

    #[test]
    fn oversized_lines_are_skipped_and_resynced() {
        let big = vec![b'x'; MAX_REQUEST + 10];
        let mut chunks: Vec<&[u8]> = big.chunks(4096).collect();
        chunks.push(b"\n{\"request\":\"status\"}\n");
        let out = lines(&chunks);
        assert_eq!(out.len(), 2, "{out:?}");
        assert!(matches!(out[0], Line::Oversized(n) if n > MAX_REQUEST));
        assert_eq!(out[1], Line::Text(b"{\"request\":\"status\"}".to_vec()));
        // One piece with the newline inside.
        let mut one = big.clone();
        one.extend_from_slice(b"\nok\n");
        let out = lines(&[&one]);
        assert!(matches!(out[0], Line::Oversized(_)), "{out:?}");
        assert_eq!(out[1], Line::Text(b"ok".to_vec()));
        // A line exactly at the limit is taken.
        let mut at = vec![b'y'; MAX_REQUEST];
        at.push(b'\n');
        let out = lines(&[&at]);
        assert!(matches!(&out[0], Line::Text(t) if t.len() == MAX_REQUEST));
    }

    #[test]
    fn hub_backlog_and_sequence() {
        let hub = Hub::new();
        for i in 0..(BACKLOG + 5) {
            hub.publish(&Record::now(crate::supervision::event::Event::Shutdown {
                signal: Some(format!("{i}")),
            }));
        }
        let (past, rx) = hub.subscribe(3);
        assert_eq!(past.len(), 3);
        assert_eq!(past[2].seq, (BACKLOG + 5) as u64);
        assert!(rx.is_some());
        let (past, _) = hub.subscribe(usize::MAX);
        assert_eq!(past.len(), BACKLOG);
        hub.close();
        assert!(hub.subscribe(1).1.is_none());
    }
}
