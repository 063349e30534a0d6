//! One `foster run` per configuration file.
//!
//! Owns [`Claim`], the lock that a `foster run` of a configuration file holds while it runs:
//! a file `run-HASH.lock` in foster's private runtime directory
//! ([`crate::supervision::control::server::default_dir`], checked and made as for the control
//! socket), HASH naming the file's canonical path (the same file reached by another path, a
//! symbolic link or `./`, is the same configuration; files of the same name in other directories
//! are not). The lock is `flock(2)`'s: the kernel drops it when the last descriptor of it closes,
//! so the file a SIGKILLed supervisor leaves is taken again by the next one; an orderly exit
//! removes it. A lock is only taken on the file the path names once it is held (one removed
//! meanwhile is opened anew). The descriptor is close-on-exec: no helper holds it. The file
//! says who holds it (the supervisor's pid, as its caller sees
//! it, and its control socket) so that a second `foster run` of the same file is refused
//! naming the running one; `foster run --allow-second-instance` takes no lock.

use std::fs::File;
use std::io::{self, Read, Seek, Write};
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg, OFlag};
use nix::sys::stat::Mode;

/// Why a `foster run` of a configuration file may not run.
#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    /// The file's canonical path cannot be had.
    #[error("{}: cannot resolve its path: {source}", config.display())]
    Resolve { config: PathBuf, source: io::Error },
    /// The lock file cannot be opened.
    #[error("{}: cannot open: {source}", path.display())]
    Open {
        path: PathBuf,
        source: nix::errno::Errno,
    },
    /// The lock cannot be taken for another reason than another holder.
    #[error("{}: cannot lock: {source}", path.display())]
    Lock {
        path: PathBuf,
        source: nix::errno::Errno,
    },
    /// Another supervisor holds it (the refusal naming it).
    #[error("{0}")]
    Held(String),
}

/// The lock of one configuration file, held until dropped (or until foster ends).
pub struct Claim {
    lock: Flock<File>,
    pid: u32,
    config: PathBuf,
    /// The runtime directory and the file's name in it, to remove it on exit.
    dir: std::os::fd::OwnedFd,
    name: String,
}

/// How many times a lock is taken again when the file was removed under it.
const TAKE_TRIES: usize = 8;

/// FNV-1a, 64 bits: a name for a path that stays the same from one build of foster to the next.
fn fnv64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The name of the lock file of the configuration file whose canonical path is `canonical`.
fn lock_name(canonical: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    format!("run-{:016x}.lock", fnv64(canonical.as_os_str().as_bytes()))
}

/// The control socket the lock of configuration file `config` names: that of the last
/// supervisor of the file here (`foster ctl --config`). `None` when no lock file is there or
/// it names no socket. The file outlives its supervisor: whether one listens on the socket is
/// for the caller to see.
pub fn recorded_socket(config: &Path) -> io::Result<Option<PathBuf>> {
    let canonical = std::fs::canonicalize(config)?;
    let path = crate::supervision::control::server::default_dir().join(lock_name(&canonical));
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    Ok(text
        .lines()
        .find_map(|l| l.strip_prefix("socket "))
        .filter(|s| *s != "none")
        .map(PathBuf::from))
}

impl Claim {
    /// Takes the lock of configuration file `config`, or says which supervisor holds it.
    /// `None`, with a warning, when the runtime directory cannot hold the lock (another
    /// user's, say: `--no-socket` runs without it, and so does this check).
    pub fn take(config: &Path) -> Result<Option<Claim>, ClaimError> {
        let canonical = std::fs::canonicalize(config).map_err(|source| ClaimError::Resolve {
            config: config.to_path_buf(),
            source,
        })?;
        let dir = crate::supervision::control::server::default_dir();
        let dir_fd = match crate::supervision::control::server::make_private_dir(&dir) {
            Ok(fd) => fd,
            Err(e) => {
                tracing::warn!(
                    "not checking for another supervisor of {}: {e}",
                    canonical.display()
                );
                return Ok(None);
            }
        };
        let name = lock_name(&canonical);
        let path = dir.join(&name);
        for _ in 0..TAKE_TRIES {
            let fd = nix::fcntl::openat(
                &dir_fd,
                name.as_str(),
                OFlag::O_RDWR | OFlag::O_CREAT | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW,
                Mode::from_bits_truncate(0o600),
            )
            .map_err(|source| ClaimError::Open {
                path: path.clone(),
                source,
            })?;
            match Flock::lock(File::from(fd), FlockArg::LockExclusiveNonblock) {
                // Removed by the supervisor that held it, between this open and this lock:
                // that file no longer counts; open the path again.
                Ok(lock) if !names(&dir_fd, &name, &lock) => continue,
                Ok(lock) => {
                    return Ok(Some(Claim {
                        lock,
                        pid: std::process::id(),
                        config: canonical,
                        dir: dir_fd,
                        name,
                    }));
                }
                Err((mut file, nix::errno::Errno::EWOULDBLOCK)) => {
                    let mut held = String::new();
                    let _ = file.read_to_string(&mut held);
                    return Err(ClaimError::Held(refusal(&canonical, &held)));
                }
                Err((_, source)) => return Err(ClaimError::Lock { path, source }),
            }
        }
        Err(ClaimError::Lock {
            path,
            source: nix::errno::Errno::EAGAIN,
        })
    }

    /// Writes who holds the lock: this supervisor's pid (taken when the lock was, before any
    /// PID namespace) and its control socket, if it has one.
    pub fn record(&mut self, socket: Option<&Path>) -> io::Result<()> {
        let text = format!(
            "pid {}\nsocket {}\nconfig {}\n",
            self.pid,
            socket.map_or("none".into(), |s| s.display().to_string()),
            self.config.display()
        );
        self.lock.set_len(0)?;
        self.lock.rewind()?;
        self.lock.write_all(text.as_bytes())
    }
}

/// Whether `name` in `dir` is the file open as `file` (the same device and inode).
fn names(dir: &std::os::fd::OwnedFd, name: &str, file: &File) -> bool {
    use nix::fcntl::AtFlags;
    use nix::sys::stat::{fstat, fstatat};
    match (
        fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW),
        fstat(file),
    ) {
        (Ok(a), Ok(b)) => (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino),
        _ => false,
    }
}

impl Drop for Claim {
    /// An orderly exit removes the file, while the lock is still held, and only by the process
    /// that took it (not a contained init that inherited it) and only if the path names it.
    fn drop(&mut self) {
        if std::process::id() == self.pid && names(&self.dir, &self.name, &self.lock) {
            let _ = nix::unistd::unlinkat(
                &self.dir,
                self.name.as_str(),
                nix::unistd::UnlinkatFlags::NoRemoveDir,
            );
        }
    }
}

/// The refusal of a second `foster run` of `config`, naming the holder that `held` (the lock
/// file's text) says.
fn refusal(config: &Path, held: &str) -> String {
    let field = |key: &str| {
        held.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(' '))
            .map(|v| crate::base::sanitize::escape(v.as_bytes()).to_string())
    };
    let pid = field("pid").unwrap_or_else(|| "?".into());
    let how = match field("socket").filter(|s| s != "none") {
        Some(s) => format!("control socket {s}; `foster ctl --socket {s} shutdown` stops it"),
        None => "no control socket".into(),
    };
    format!(
        "another supervisor already runs {} (pid {pid}, {how}); not starting a second copy of \
         its helpers: foster run --allow-second-instance runs one all the same",
        config.display()
    )
}
