//! The socket file's life: its default path, the checks of its directory (a private one of
//! this user, or for a `--socket` path one no other user can write to, by
//! [`crate::base::ownership`]'s rules), the directory of the notify sockets of helpers of
//! other users ([`make_reachable_dir`]), binding with mode 0600 from the first instant,
//! replacing a stale socket, never stealing a live one, and removing it on exit.

use std::io::{self, ErrorKind as IoKind};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixListener as StdListener;
use std::path::{Path, PathBuf};

use tracing::info;

use crate::base::ownership::{CheckedDir, DirProblem, DirRule, open_dir};

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
    pub(super) listener: StdListener,
    pub(super) file: SocketFile,
}

/// The socket file, removed on drop if it is still the one foster bound; and its directory
/// when foster made it for a `--socket` path and it is empty.
#[derive(Debug)]
pub(super) struct SocketFile {
    pub(super) path: PathBuf,
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
    let checked = check_dir(&dir, rule)?;
    let created_dir = (checked.created && matches!(rule, DirRule::Given(_))).then(|| dir.clone());
    let listener = match bind_listener(path, &checked) {
        Ok(l) => l,
        Err(e) => {
            remove_created(&created_dir);
            return Err(e);
        }
    };
    let (dev, ino) = match verify_bound(path, name, &dir, &checked) {
        Ok(v) => v,
        Err(e) => {
            drop(listener);
            remove_created(&created_dir);
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

/// The socket's directory `dir`, opened and checked by `rule` (made when missing).
fn check_dir(dir: &Path, rule: DirRule) -> Result<CheckedDir, BindError> {
    match open_dir(dir, rule, true) {
        Ok(d) => Ok(d),
        Err(DirProblem::Missing) => unreachable!("open_dir creates a missing directory"),
        Err(DirProblem::Refused(m)) => Err(BindError::Dir(m)),
    }
}

/// Removes the directory foster made for the socket, if it did, when it is empty.
fn remove_created(created: &Option<PathBuf>) {
    if let Some(d) = created {
        let _ = std::fs::remove_dir(d);
    }
}

/// The device and inode of the socket just bound at `path`, once it is known to be the entry
/// `name` of the directory `dir` checked as `checked`: a directory replaced (renamed away, a
/// symbolic link put in its place) between the check and the bind is noticed here.
fn verify_bound(
    path: &Path,
    name: &std::ffi::OsStr,
    dir: &Path,
    checked: &CheckedDir,
) -> Result<(u64, u64), BindError> {
    let io_err = |what: &str, e: io::Error| BindError::Io(path.to_path_buf(), what.to_string(), e);
    let m = std::fs::symlink_metadata(path).map_err(|e| io_err("cannot stat after bind", e))?;
    let at = nix::sys::stat::fstatat(&checked.fd, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)
        .map_err(|e| io_err("cannot stat after bind", e.into()))?;
    let d = std::fs::metadata(dir).map_err(|e| io_err("cannot stat its directory", e))?;
    if (at.st_dev, at.st_ino) != (m.dev(), m.ino())
        || (d.dev(), d.ino()) != (checked.dev, checked.ino)
    {
        return Err(BindError::Dir(format!(
            "the directory {} was replaced while the socket was being bound in it; not using it",
            dir.display()
        )));
    }
    Ok((m.dev(), m.ino()))
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
}
