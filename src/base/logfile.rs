//! A log file that rotates by size: the one rotation of every log foster writes (the events
//! log, the helpers' log files).
//!
//! Owns [`RotatingFile`] and its [`Rotation`]: whole writes of whole lines appended to a file
//! that is renamed as logrotate does (`FILE.N-1` → `FILE.N` …, `FILE` → `FILE.1`, the oldest
//! beyond [`Rotation::keep`] overwritten, then a new `FILE`) before a write would take it past
//! [`Rotation::max_size`], and opened again at its path on request (after an outside rotation).
//! Every path is judged as [`crate::base::ownership`] judges the places foster puts a file: never
//! through a symbolic link, only what foster's user owns, in a directory no other user can
//! write to; [`Trust`] says what else than a regular file may be written (the events log: a
//! FIFO, a terminal).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// When a log is rotated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rotation {
    /// Rotate before a write would take the file past this many bytes; 0: never.
    pub max_size: u64,
    /// Rotated files kept: `FILE.1` (the newest) to `FILE.<keep>`; 0: the file starts anew.
    pub keep: u32,
}

impl Rotation {
    /// 10 MiB.
    pub const DEFAULT_MAX_SIZE: u64 = 10 << 20;
    /// Five rotated files.
    pub const DEFAULT_KEEP: u32 = 5;
    /// The most rotated files foster keeps (each rotation renames every one of them).
    pub const MAX_KEEP: u32 = 1000;
}

impl Default for Rotation {
    fn default() -> Rotation {
        Rotation {
            max_size: Rotation::DEFAULT_MAX_SIZE,
            keep: Rotation::DEFAULT_KEEP,
        }
    }
}

/// How far the path of a log is trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trust {
    /// As [`Trust::Owned`], and also a FIFO of foster's effective uid (its reader's: opening it
    /// waits for one) or a character device of that uid or root's (a terminal, `/dev/null`),
    /// written as is, never rotated. The events log: another user's file, or a symbolic link
    /// another user could have planted, is refused as for a helper's log.
    Stream,
    /// Only a regular file owned by foster's effective uid (its group and others may not write
    /// it: they could forge lines), never through a symbolic link, in
    /// a directory owned by foster's user or root and not writable by group or others unless
    /// sticky ([`crate::base::ownership::DirRule::Given`]); a file created with mode 0640. Anything
    /// else at the path (something another user could have planted) is refused with an error
    /// that names it. A helper's log: its lines are the helper's, not to be handed to another
    /// user's file.
    Owned,
}

/// A log file: appended to, rotated by size, reopened on request.
///
/// Each [`RotatingFile::write`] is whole lines, written with one `write` where the kernel takes
/// it whole (no buffering here, no fsync). A write that would take a rotatable file past
/// [`Rotation::max_size`] first rotates it; the new file gets the permission bits and owner of
/// the one it replaces and is created with `O_EXCL | O_NOFOLLOW`, so nothing planted at the path
/// in between is followed. Each file holds whole writes and at most `max_size` bytes, unless a
/// single write is longer. A rotation that fails leaves the writer on its current file
/// (reported once) until [`RotatingFile::reopen`].
///
/// A write is whole or not at all: what a failing write (a full disk) put in a regular file is
/// cut off again (`ftruncate`), and when that cannot be done (a FIFO, a terminal) the next
/// write starts on a new line. A file deleted under the writer (`st_nlink == 0`, seen when its
/// size is checked against `max_size`) is replaced by a new one at the path, judged again.
#[derive(Debug)]
pub struct RotatingFile {
    path: PathBuf,
    /// What it is, for errors: `events log`, `helper "web"'s log`.
    what: String,
    trust: Trust,
    /// `None` only after a rotation could not create the new file: each write tries again.
    file: Option<File>,
    rotation: Rotation,
    /// Whether this file is rotated (a regular file, named directly, no rotation failed yet).
    rotatable: bool,
    /// The file's size as this writer knows it (checked with `fstat` before a rotation).
    size: u64,
    /// A failed write left part of a line that could not be cut off: the next write starts
    /// with a newline.
    torn: bool,
    /// The first open is done: from then on a FIFO without a reader is not waited for (a
    /// reopen would hold foster's loop until a reader came).
    opened: bool,
}

/// The mode a new file is created with (less the umask), a helper's log and the events log
/// alike: under a umask of 000 a file of 0666 could be written by anyone, and
/// [`RotatingFile::judge`] would refuse it at the next start.
const NEW_MODE: u32 = 0o640;

impl RotatingFile {
    /// Opens (creating) `path` for appending; `what` names it in errors.
    pub fn open(
        path: &Path,
        rotation: Rotation,
        trust: Trust,
        what: impl Into<String>,
    ) -> io::Result<RotatingFile> {
        let mut f = RotatingFile {
            path: path.to_path_buf(),
            what: what.into(),
            trust,
            file: None,
            rotation,
            rotatable: false,
            size: 0,
            torn: false,
            opened: false,
        };
        f.reopen()?;
        Ok(f)
    }

    /// The path it was opened at.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether [`RotatingFile::open`] of `path` as a [`Trust::Owned`] log would go through,
    /// checked now without creating or writing anything (`foster run --check`): its directory
    /// passes [`crate::base::ownership::DirRule::Given`]; a file already there is one foster writes
    /// to (opened for appending, and closed at once); foster may create files in the directory
    /// when the file is missing, or when it is to be rotated. `what` names it in the error.
    pub fn check_owned(path: &Path, rotation: Rotation, what: impl Into<String>) -> io::Result<()> {
        let f = RotatingFile {
            path: path.to_path_buf(),
            what: what.into(),
            trust: Trust::Owned,
            file: None,
            rotation,
            rotatable: false,
            size: 0,
            torn: false,
            opened: false,
        };
        f.check_dir()?;
        let exists = std::fs::symlink_metadata(path).is_ok();
        if exists {
            f.open_owned(false)?;
        }
        if !exists || rotation.max_size > 0 {
            let dir = crate::base::ownership::parent_dir(path);
            use nix::unistd::{AccessFlags, faccessat};
            let flags = AccessFlags::W_OK | AccessFlags::X_OK;
            if let Err(e) = faccessat(
                nix::fcntl::AT_FDCWD,
                dir,
                flags,
                nix::fcntl::AtFlags::AT_EACCESS,
            ) {
                let doing = if exists {
                    "cannot rotate it"
                } else {
                    "cannot create it"
                };
                return Err(f.error(
                    doing,
                    io::Error::new(
                        io::Error::from(e).kind(),
                        format!(
                            "foster ({}) may not create files in {}: {e}",
                            crate::base::ownership::uid_text(nix::unistd::geteuid().as_raw()),
                            dir.display()
                        ),
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Closes the file and opens (creating) the path again: after the file was renamed away
    /// (an outside rotation), the next lines go to a new file at the path. A rotation that
    /// failed is tried again from here on. On failure the old file is kept.
    pub fn reopen(&mut self) -> io::Result<()> {
        let file = match self.inherited() {
            Some(fd) => self.dup_inherited(fd)?,
            None => {
                self.check_dir()?;
                self.open_owned(true)?
            }
        };
        let meta = file.metadata().map_err(|e| self.error("", e))?;
        // A descriptor handed in is never renamed: `/dev/stdout` is not its name.
        self.rotatable = meta.is_file() && self.inherited().is_none();
        self.size = meta.len();
        self.file = Some(file);
        self.opened = true;
        Ok(())
    }

    /// Whether `len` more bytes keep the current file within [`Rotation::max_size`] (always
    /// when it is not rotated). A writer that gathers lines writes what it has before adding
    /// lines that do not fit, so that a rotation falls between them.
    pub fn fits(&self, len: u64) -> bool {
        let max = self.rotation.max_size;
        !self.rotatable || max == 0 || self.size + len <= max
    }

    /// Writes `bytes` (whole lines), rotating first when it is time to. A rotation that fails
    /// is a warning and the lines go to the current file; an error is lines not written (none
    /// of them: what a failing write put in a regular file is cut off again).
    pub fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        let len = bytes.len() as u64;
        match self.due(len) {
            Due::No => {}
            Due::Rotate => {
                if let Err(e) = self.rotate() {
                    tracing::warn!(
                        "{e}; writing on to the current file (SIGUSR1 or foster ctl \
                         reopen-logs tries again)"
                    );
                }
            }
            Due::Deleted(meta) => {
                // Bounded: the deleted file grows no more, and its lines go to a new one.
                self.file = None;
                self.size = 0;
                self.file = Some(self.create(Some(&meta))?);
            }
        }
        // After a part of a line that could not be cut off, a new line first.
        let record: std::borrow::Cow<[u8]> = if self.torn {
            [b"\n", bytes].concat().into()
        } else {
            bytes.into()
        };
        let file = match &mut self.file {
            Some(f) => f,
            None => self.file.insert(self.create(None)?),
        };
        match append(file, &record) {
            Ok(()) => {
                self.torn = false;
                self.size += record.len() as u64;
                Ok(())
            }
            Err((e, cut)) => {
                self.torn |= !cut;
                let e = match e.kind() {
                    io::ErrorKind::WouldBlock => io::Error::new(
                        e.kind(),
                        "its reader does not keep up (the FIFO is full): the line is dropped",
                    ),
                    _ => e,
                };
                Err(self.error("", e))
            }
        }
    }

    /// Whether a write of `len` bytes must go to a new file: when it would take the file past
    /// the bound, or when the file was deleted (its metadata, for the new one).
    fn due(&mut self, len: u64) -> Due {
        let max = self.rotation.max_size;
        if !self.rotatable || max == 0 || self.size == 0 || self.size + len <= max {
            return Due::No;
        }
        // Believe the file, not the count, in case something truncated it.
        if let Some(m) = self.file.as_ref().and_then(|f| f.metadata().ok()) {
            if m.nlink() == 0 {
                return Due::Deleted(m);
            }
            self.size = m.len();
        }
        if self.size > 0 && self.size + len > max {
            Due::Rotate
        } else {
            Due::No
        }
    }

    fn rotate(&mut self) -> io::Result<()> {
        let meta = self.file.as_ref().and_then(|f| f.metadata().ok());
        let keep = self.rotation.keep;
        let moved = if keep == 0 {
            std::fs::remove_file(&self.path)
        } else {
            for n in (1..keep).rev() {
                match std::fs::rename(self.numbered(n), self.numbered(n + 1)) {
                    Err(e) if e.kind() != io::ErrorKind::NotFound => {
                        self.rotatable = false;
                        return Err(self.error("rotating", e));
                    }
                    _ => {}
                }
            }
            std::fs::rename(&self.path, self.numbered(1))
        };
        if let Err(e) = moved {
            // Stay on this file: a retry on every write would shift the older files again.
            self.rotatable = false;
            return Err(self.error("rotating", e));
        }
        self.file = None;
        self.size = 0;
        self.file = Some(self.create(meta.as_ref())?);
        Ok(())
    }

    /// The new file at the path, like the one it replaces (`like`): never through a symbolic
    /// link, and given its permission bits and owner only when this call created it.
    fn create(&self, like: Option<&std::fs::Metadata>) -> io::Result<File> {
        use std::os::unix::fs::PermissionsExt;
        // The directory is judged again: a path through a symbolic link may lead elsewhere now.
        self.check_dir()?;
        let created = OpenOptions::new()
            .create_new(true)
            .append(true)
            .mode(NEW_MODE)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&self.path);
        match created {
            Ok(f) => {
                if let Some(m) = like {
                    // Best effort: the file is usable whatever these say.
                    let _ = std::os::unix::fs::fchown(&f, Some(m.uid()), Some(m.gid()));
                    let _ = f.set_permissions(std::fs::Permissions::from_mode(m.mode() & 0o7777));
                }
                Ok(f)
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => self.open_owned(false),
            Err(e) => Err(self.error("", e)),
        }
    }

    /// [`Trust::Stream`] named as one of foster's own descriptors (`/dev/stdout`,
    /// `/dev/stderr`, `/dev/fd/N`, `/proc/self/fd/N`): that descriptor. It was handed to foster
    /// by whoever started it, so it is what the user asked for whatever it leads to (a pipe to
    /// `docker logs`, a terminal, a file): it is duplicated, not opened by a path another user
    /// could have changed, and never rotated.
    fn inherited(&self) -> Option<RawFd> {
        if self.trust != Trust::Stream {
            return None;
        }
        let p = self.path.to_str()?;
        match p {
            "/dev/stdout" => Some(1),
            "/dev/stderr" => Some(2),
            _ => p
                .strip_prefix("/dev/fd/")
                .or_else(|| p.strip_prefix("/proc/self/fd/"))
                .and_then(|n| n.parse::<RawFd>().ok())
                .filter(|n| *n >= 0),
        }
    }

    /// A descriptor of foster's own ([`RotatingFile::inherited`]), duplicated (close-on-exec).
    /// A pipe is opened again instead, through `/proc/self/fd/N` (the pipe itself, not a path
    /// anyone else could change): a description of foster's own, written without blocking as
    /// a FIFO is ([`RotatingFile::open_owned`]), so that a reader that stops reading (`| jq`
    /// suspended) does not stop foster; the one it shares with whoever started it (and with
    /// helpers whose output is inherited) keeps its flags.
    fn dup_inherited(&self, fd: RawFd) -> io::Result<File> {
        if let Some(f) = reopen_pipe(fd) {
            return Ok(f);
        }
        // SAFETY: F_DUPFD_CLOEXEC makes a new descriptor (or fails, EBADF when `fd` is not
        // open); the new one is owned by the File alone.
        let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
        if new < 0 {
            return Err(self.error(&format!("descriptor {fd}"), io::Error::last_os_error()));
        }
        // SAFETY: `new` was just made and is owned by nothing else.
        Ok(unsafe { File::from_raw_fd(new) })
    }

    /// The directory must be one no other user can write to ([`DirRule::Given`]).
    ///
    /// [`DirRule::Given`]: crate::base::ownership::DirRule::Given
    fn check_dir(&self) -> io::Result<()> {
        let dir = crate::base::ownership::parent_dir(&self.path);
        use crate::base::ownership::{DirProblem, DirRule, open_dir};
        let what = match self.trust {
            Trust::Owned => "the log file",
            Trust::Stream => "the events log",
        };
        match open_dir(dir, DirRule::Given(what), false) {
            Ok(_) => Ok(()),
            Err(DirProblem::Missing) => Err(self.error(
                "",
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("its directory {} does not exist", dir.display()),
                ),
            )),
            Err(DirProblem::Refused(m)) => {
                Err(self.error("", io::Error::new(io::ErrorKind::PermissionDenied, m)))
            }
        }
    }

    /// The file at the path (created when `create`, mode [`NEW_MODE`]), refused
    /// unless it is what [`RotatingFile::judge`] takes, reached without a symbolic link.
    fn open_owned(&self, create: bool) -> io::Result<File> {
        let open = |create: bool, nonblock: libc::c_int| {
            OpenOptions::new()
                .create(create)
                .append(true)
                .mode(NEW_MODE)
                .custom_flags(libc::O_NOFOLLOW | libc::O_NOCTTY | nonblock)
                .open(&self.path)
        };
        let opened = match open(create, libc::O_NONBLOCK) {
            // A FIFO of ours without a reader yet: at the start, the events log waits for its
            // reader; later (a reopen) the current file is kept instead.
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) && self.fifo_of_mine() => {
                if self.opened {
                    return Err(self.error(
                        "",
                        io::Error::new(e.kind(), "the FIFO has no reader: not reopened"),
                    ));
                }
                open(false, 0)
            }
            other => other,
        };
        let file = match opened {
            Ok(f) => f,
            // O_NOFOLLOW on a symbolic link (ELOOP; EACCES in a sticky directory, the kernel's
            // protected_regular), O_NONBLOCK on another's FIFO without a reader (ENXIO): say
            // what is there when it is not for foster to write.
            Err(e) => {
                let found = std::fs::symlink_metadata(&self.path).ok();
                return Err(match found.map(|m| self.judge(None, &m)) {
                    Some(Err(why)) => self.refused(why),
                    _ => self.error("", e),
                });
            }
        };
        let m = file.metadata().map_err(|e| self.error("", e))?;
        self.judge(Some(&file), &m)
            .map_err(|why| self.refused(why))?;
        if !m.is_file() {
            // A FIFO is written without blocking: a reader that stops reading (paused, or one
            // of another user's that opened it and never reads) must not stop foster's loop
            // once the pipe is full; a line it cannot take fails (`EAGAIN`) and is counted. A
            // terminal is written as a blocking descriptor, as it always was.
            use std::os::unix::fs::FileTypeExt;
            set_nonblocking(&file, m.file_type().is_fifo()).map_err(|e| self.error("", e))?;
        }
        Ok(file)
    }

    /// Whether the file at the path (`m`; open as `file` when it is) is one foster writes to: a
    /// regular file of foster's effective uid; with [`Trust::Stream`], also a FIFO of that uid
    /// or a character device of that uid or root's. Owners are judged by
    /// [`crate::base::ownership::owner_of`]. The reason when not.
    fn judge(&self, file: Option<&File>, m: &std::fs::Metadata) -> Result<(), NotForFoster> {
        use crate::base::ownership::{Owner, namespace_note, owner_of};
        use std::os::fd::AsFd;
        use std::os::unix::fs::FileTypeExt;
        let t = m.file_type();
        let stream = self.trust == Trust::Stream && (t.is_fifo() || t.is_char_device());
        let describe = || crate::base::ownership::describe_entry(&self.path);
        if !t.is_file() && !stream {
            return Err(NotForFoster::Kind {
                found: describe(),
                kinds: self.kinds(),
            });
        }
        let owner = owner_of(file.map(|f| f.as_fd()), m.uid(), m.dev(), m.ino());
        if owner != Owner::Me && !(t.is_char_device() && owner == Owner::Root) {
            let me = nix::unistd::geteuid().as_raw();
            return Err(NotForFoster::Owner {
                found: describe(),
                note: namespace_note(owner),
                me: crate::base::ownership::uid_text(me),
            });
        }
        // A terminal is the group's to write to (`tty`), `/dev/null` everyone's: only what
        // foster's lines are read from later must keep them as foster wrote them.
        if !t.is_char_device() && m.mode() & 0o022 != 0 {
            return Err(NotForFoster::Writable { found: describe() });
        }
        Ok(())
    }

    /// [`Trust::Stream`]: whether the path names a FIFO of foster's effective uid (not through
    /// a symbolic link), which foster may wait on for a reader.
    fn fifo_of_mine(&self) -> bool {
        use crate::base::ownership::{Owner, owner_of};
        use std::os::unix::fs::FileTypeExt;
        self.trust == Trust::Stream
            && std::fs::symlink_metadata(&self.path).is_ok_and(|m| {
                m.file_type().is_fifo() && owner_of(None, m.uid(), m.dev(), m.ino()) == Owner::Me
            })
    }

    /// What may be written, for errors: `a regular file`, `a regular file, FIFO or terminal`.
    fn kinds(&self) -> &'static str {
        match self.trust {
            Trust::Owned => "a regular file",
            Trust::Stream => "a regular file, FIFO or terminal",
        }
    }

    /// An error for something at the path that another user could have put there, or written
    /// into.
    fn refused(&self, why: NotForFoster) -> io::Error {
        let text = match why {
            NotForFoster::Writable { .. } => format!(
                "{why}: another user could have written lines into it that read as foster's; \
                 not writing to it (chmod go-w it, or give another path)"
            ),
            _ => format!(
                "{why}: another user could have put it there; not writing to it (remove it, \
                 or give another path)"
            ),
        };
        self.error("", io::Error::new(io::ErrorKind::PermissionDenied, text))
    }

    fn numbered(&self, n: u32) -> PathBuf {
        let mut p = self.path.clone().into_os_string();
        p.push(format!(".{n}"));
        PathBuf::from(p)
    }

    fn error(&self, doing: &str, e: io::Error) -> io::Error {
        let doing = if doing.is_empty() {
            String::new()
        } else {
            format!("{doing}: ")
        };
        io::Error::new(
            e.kind(),
            format!("{} {}: {doing}{e}", self.what, self.path.display()),
        )
    }
}

/// Why what is at a log file's path is not for foster to write ([`RotatingFile::judge`]).
#[derive(Debug, thiserror::Error)]
enum NotForFoster {
    /// Not a kind foster writes to (`found`: what is there, as a sentence's predicate).
    #[error("it {found}, not {kinds} of yours")]
    Kind { found: String, kinds: &'static str },
    /// Another user's (`note`: how a user namespace shows its owner; `me`: foster's user).
    #[error("it {found}{note}, not yours ({me})")]
    Owner {
        found: String,
        note: &'static str,
        me: String,
    },
    /// Foster's, but writable by its group or by others (`found`: what is there).
    #[error("it {found}: group or others may write to it")]
    Writable { found: String },
}

/// Descriptor `fd` of this process, when it is a pipe with a reader, opened again for writing
/// without blocking (a description of its own); `None` for anything else.
fn reopen_pipe(fd: RawFd) -> Option<File> {
    use std::os::unix::fs::FileTypeExt;
    // SAFETY: an all-zero stat is a valid buffer; fstat fills it, or fails (EBADF when `fd`
    // is not open), on an integer descriptor.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::fstat(fd, &mut st) } != 0 || st.st_mode & libc::S_IFMT != libc::S_IFIFO {
        return None;
    }
    OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(format!("/proc/self/fd/{fd}"))
        .ok()
        .filter(|f| f.metadata().is_ok_and(|m| m.file_type().is_fifo()))
}

/// Sets or clears `O_NONBLOCK` on `file`'s open file description (its own: opened by path).
fn set_nonblocking(file: &File, on: bool) -> io::Result<()> {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    let fl = OFlag::from_bits_truncate(fcntl(file, FcntlArg::F_GETFL)?);
    let fl = if on {
        fl | OFlag::O_NONBLOCK
    } else {
        fl - OFlag::O_NONBLOCK
    };
    fcntl(file, FcntlArg::F_SETFL(fl))?;
    Ok(())
}

/// What a write must do first ([`RotatingFile::due`]).
enum Due {
    No,
    Rotate,
    /// The file was deleted under the writer: its metadata.
    Deleted(std::fs::Metadata),
}

/// Appends `bytes` to `file` whole, or none of them: when a `write` fails (ENOSPC) after part
/// went in, a regular file is cut back to where the bytes began. On failure, the error and
/// whether the file holds no part of them (false: a part could not be cut off).
fn append(file: &mut File, bytes: &[u8]) -> Result<(), (io::Error, bool)> {
    let mut done = 0;
    while done < bytes.len() {
        match file.write(&bytes[done..]) {
            Ok(0) => return Err((io::ErrorKind::WriteZero.into(), cut_back(file, done))),
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err((e, cut_back(file, done))),
        }
    }
    Ok(())
}

/// Takes the last `written` bytes off `file` (appended to: they are its end); whether the file
/// is as before them.
fn cut_back(file: &File, written: usize) -> bool {
    if written == 0 {
        return true;
    }
    match file.metadata() {
        Ok(m) if m.is_file() && m.len() >= written as u64 => {
            file.set_len(m.len() - written as u64).is_ok()
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("foster-logfile-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn len(p: &Path) -> u64 {
        std::fs::metadata(p).map_or(0, |m| m.len())
    }

    fn open(p: &Path, max_size: u64, keep: u32, trust: Trust) -> RotatingFile {
        RotatingFile::open(p, Rotation { max_size, keep }, trust, "test log").unwrap()
    }

    #[test]
    fn an_owned_log_is_checked_without_being_created_or_written() {
        use std::os::unix::fs::PermissionsExt;
        let d = dir("check");
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        let p = d.join("w.log");
        let rot = Rotation::default();
        RotatingFile::check_owned(&p, rot, "w").unwrap();
        assert!(!p.exists(), "checked, not created");
        std::fs::write(&p, "kept\n").unwrap();
        RotatingFile::check_owned(&p, rot, "w").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "kept\n");
        let link = d.join("l.log");
        std::os::unix::fs::symlink(&p, &link).unwrap();
        let e = RotatingFile::check_owned(&link, rot, "w").unwrap_err();
        assert!(e.to_string().contains("is a symbolic link"), "{e}");
        let e = RotatingFile::check_owned(&d.join("no/x.log"), rot, "w").unwrap_err();
        assert!(e.to_string().contains("does not exist"), "{e}");
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = RotatingFile::check_owned(&p, rot, "w").unwrap_err();
        assert!(e.to_string().contains("without the sticky bit"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn keep_zero_starts_the_file_anew_and_a_long_write_stands_alone() {
        let d = dir("keep0");
        let p = d.join("e.log");
        let mut log = open(&p, 150, 0, Trust::Stream);
        log.write(&[b'a'; 60]).unwrap();
        log.write(&[b'b'; 60]).unwrap();
        assert_eq!(len(&p), 120, "two short writes fit");
        log.write(&[b'x'; 200]).unwrap();
        assert_eq!(len(&p), 200, "the long write alone");
        assert!(!d.join("e.log.1").exists(), "keep 0 keeps nothing");
        log.write(&[b'c'; 60]).unwrap();
        assert_eq!(len(&p), 60, "a new file after the long write");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn rotation_keeps_exactly_keep_files_named_as_logrotate_does() {
        let d = dir("keep");
        let p = d.join("h.log");
        let mut log = open(&p, 100, 3, Trust::Owned);
        for i in 0..10u8 {
            assert_eq!(log.fits(60), i == 0, "write {i}");
            log.write(&[b'0' + i; 60]).unwrap();
        }
        // Ten writes of 60 bytes, one file each (two do not fit in 100): the last four files.
        let first = |p: &Path| std::fs::read(p).unwrap()[0];
        assert_eq!(first(&p), b'9');
        assert_eq!(first(&d.join("h.log.1")), b'8');
        assert_eq!(first(&d.join("h.log.2")), b'7');
        assert_eq!(first(&d.join("h.log.3")), b'6');
        assert!(!d.join("h.log.4").exists());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_symlinked_path_is_refused_and_a_fifo_or_terminal_is_written_but_not_rotated() {
        let d = dir("link");
        let target = d.join("real.log");
        std::fs::write(&target, "").unwrap();
        let p = d.join("e.log");
        std::os::unix::fs::symlink(&target, &p).unwrap();
        for (trust, what) in [
            (Trust::Stream, "events log"),
            (Trust::Owned, "helper's log"),
        ] {
            let m = RotatingFile::open(&p, Rotation::default(), trust, what)
                .unwrap_err()
                .to_string();
            assert!(
                m.contains("symbolic link") && m.contains("not writing to it"),
                "{m}"
            );
        }
        assert_eq!(len(&target), 0, "nothing written through the link");
        // A FIFO with its reader, and /dev/null (root's): written, never rotated.
        let fifo = d.join("e.fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let reader = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo)
            .unwrap();
        for p in [fifo.as_path(), Path::new("/dev/null")] {
            let mut log = open(p, 10, 2, Trust::Stream);
            for _ in 0..3 {
                log.write(b"line\n").unwrap();
            }
            assert!(!log.rotatable, "{}", p.display());
        }
        let mut got = String::new();
        io::Read::read_to_string(&mut &reader, &mut got).ok();
        assert_eq!(got.lines().count(), 3, "{got:?}");
        assert!(!d.join("e.fifo.1").exists());
        let e = RotatingFile::open(&fifo, Rotation::default(), Trust::Owned, "log").unwrap_err();
        assert!(e.to_string().contains("not a regular file of yours"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_rotated_file_keeps_its_mode_and_a_planted_symlink_is_not_followed() {
        use std::os::unix::fs::PermissionsExt;
        for trust in [Trust::Stream, Trust::Owned] {
            let d = dir("mode");
            let p = d.join("e.log");
            let mut log = open(&p, 10, 1, trust);
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
            log.write(b"a-line\n").unwrap();
            log.write(b"b-line\n").unwrap();
            let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
            assert!(d.join("e.log.1").exists());
            // Something planted at the path between two rotations is refused, not followed.
            let victim = d.join("victim");
            std::fs::write(&victim, "").unwrap();
            std::fs::remove_file(&p).unwrap();
            std::os::unix::fs::symlink(&victim, &p).unwrap();
            (log.file, log.size) = (None, 0); // as after a rotation whose create failed
            assert!(log.write(b"c-line\n").is_err());
            assert_eq!(len(&victim), 0, "wrote through a planted symlink");
            let _ = std::fs::remove_dir_all(&d);
        }
    }

    #[test]
    fn an_owned_log_refuses_what_another_user_could_have_planted() {
        use std::os::unix::fs::PermissionsExt;
        let d = dir("owned");
        // A FIFO, a directory: not a regular file.
        let fifo = d.join("fifo.log");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let e = RotatingFile::open(&fifo, Rotation::default(), Trust::Owned, "log").unwrap_err();
        assert!(e.to_string().contains("not writing to it"), "{e}");
        // A directory any user can write to, without the sticky bit.
        let open_dir = d.join("open");
        std::fs::create_dir(&open_dir).unwrap();
        std::fs::set_permissions(&open_dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = RotatingFile::open(
            &open_dir.join("x.log"),
            Rotation::default(),
            Trust::Owned,
            "log",
        )
        .unwrap_err();
        assert!(e.to_string().contains("without the sticky bit"), "{e}");
        let e = RotatingFile::open(
            &d.join("missing/x.log"),
            Rotation::default(),
            Trust::Owned,
            "log",
        )
        .unwrap_err();
        assert!(e.to_string().contains("does not exist"), "{e}");
        // A file of another user (root only can make one).
        if nix::unistd::geteuid().is_root() {
            let theirs = d.join("theirs.log");
            std::fs::write(&theirs, "").unwrap();
            std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
            let e =
                RotatingFile::open(&theirs, Rotation::default(), Trust::Owned, "log").unwrap_err();
            assert!(
                e.to_string().contains("uid 65534") && e.to_string().contains("not writing"),
                "{e}"
            );
        }
        // A new one is created 0640 (the umask permitting).
        let p = d.join("new.log");
        open(&p, 0, 0, Trust::Owned);
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode & !0o640, 0, "{mode:o}");
        let _ = std::fs::remove_dir_all(&d);
    }
}
