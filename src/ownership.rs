//! Whether another local user could have planted, or could replace, a file where foster puts
//! one: the checks of the directory (a private directory of foster's user, or one no other user
//! can write to) and the descriptions of what is found (type, owner, mode) for the errors.
//!
//! Owns [`open_dir`] and its [`DirRule`]s, used for the control socket's directory
//! (`crate::control::server`), for the helpers' log files (`crate::logfile`) and for the
//! dashboard's settings (`crate::top::columns`). The check is
//! made on the directory once open (`fstat`), so that what is checked is what is used.

use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// What a directory foster puts a file in must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirRule {
    /// The control socket's default directory ([`crate::control::server::default_dir`]), or any
    /// socket inside it: a real directory (not
    /// a symbolic link), owned by foster's effective uid, no access for group or others. Made
    /// (mode 0700) when missing and its parent exists; kept on exit (other supervisors of the
    /// user share it, as tmux's `/tmp/tmux-UID`).
    Private,
    /// A directory given by the user (a `--socket PATH` elsewhere, a helper's log file):
    /// owned by foster's effective uid or root, and not writable by group or others unless
    /// sticky (as `/tmp`), so that no other user can replace the file (named, `the socket`,
    /// `the log file`). A missing socket directory is made (mode 0700) when its parent exists,
    /// and then removed on exit when empty.
    Given(&'static str),
    /// A directory of the user's own settings (the dashboard's columns): a real directory (not
    /// a symbolic link), owned by foster's effective uid, not writable by group or others, so
    /// that nobody else can put a file there for foster to read (named, `the dashboard's
    /// settings`). Made (mode 0700) when missing and its parent exists.
    Own(&'static str),
}

/// A directory, open, checked, and how it came to be.
#[derive(Debug)]
pub struct CheckedDir {
    pub fd: std::os::fd::OwnedFd,
    pub dev: u64,
    pub ino: u64,
    /// foster made it (and so removes it on exit when it is empty, for [`DirRule::Given`]).
    pub created: bool,
}

/// Why a directory was not taken.
#[derive(Debug)]
pub enum DirProblem {
    /// It does not exist (and was not to be made).
    Missing,
    /// It is not safe, or cannot be made or opened: the message says which and why.
    Refused(String),
}

impl fmt::Display for DirProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DirProblem::Missing => f.write_str("does not exist"),
            DirProblem::Refused(m) => f.write_str(m),
        }
    }
}

/// "uid 65534 (nobody)".
pub fn uid_text(uid: u32) -> String {
    match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
        Ok(Some(u)) => format!("uid {uid} ({})", crate::sanitize::escape(u.name.as_bytes())),
        _ => format!("uid {uid}"),
    }
}

/// What is at `path`, for an error: its type, owner and mode, not following a symbolic link.
pub fn describe_entry(path: &Path) -> String {
    use std::os::unix::fs::FileTypeExt;
    match std::fs::symlink_metadata(path) {
        Err(e) => format!("cannot be inspected ({e})"),
        Ok(m) => {
            let t = m.file_type();
            let kind = if t.is_symlink() {
                match std::fs::read_link(path) {
                    Ok(to) => format!(
                        "a symbolic link to {}",
                        crate::sanitize::escape(to.as_os_str().as_encoded_bytes())
                    ),
                    Err(_) => "a symbolic link".to_string(),
                }
            } else if t.is_dir() {
                "a directory".to_string()
            } else if t.is_socket() {
                "a socket".to_string()
            } else if t.is_file() {
                "a regular file".to_string()
            } else {
                "a special file".to_string()
            };
            format!(
                "is {kind}, owned by {}, mode {:04o}",
                uid_text(m.uid()),
                m.mode() & 0o7777
            )
        }
    }
}

/// Opens the directory `dir` and checks it against `rule`; makes it (only it, mode 0700) when
/// missing and `create`, provided its parent exists. The check is on the open directory
/// (`fstat`), which is then used to verify the bound socket, so a directory swapped after the
/// check is noticed.
pub fn open_dir(dir: &Path, rule: DirRule, create: bool) -> Result<CheckedDir, DirProblem> {
    use nix::fcntl::{OFlag, open};
    use nix::sys::stat::{Mode, fstat};
    let me = nix::unistd::geteuid().as_raw();
    let shown = dir.display();
    let mut flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    if matches!(rule, DirRule::Private | DirRule::Own(_)) {
        flags |= OFlag::O_NOFOLLOW;
    }
    let mut created = false;
    let fd = loop {
        match open(dir, flags, Mode::empty()) {
            Ok(fd) => break fd,
            Err(nix::errno::Errno::ENOENT) if create && !created => {
                match nix::unistd::mkdir(dir, Mode::from_bits_truncate(0o700)) {
                    Ok(()) => created = true,
                    Err(nix::errno::Errno::EEXIST) => {} // made meanwhile: checked below
                    Err(nix::errno::Errno::ENOENT) => {
                        let parent = dir.parent().unwrap_or(Path::new("/"));
                        return Err(DirProblem::Refused(format!(
                            "cannot create the directory {shown}: its parent {} does not exist \
                             (foster creates only the socket's own directory; create the \
                             others first)",
                            parent.display()
                        )));
                    }
                    Err(e) => {
                        return Err(DirProblem::Refused(format!(
                            "cannot create the directory {shown}: {e}"
                        )));
                    }
                }
            }
            Err(nix::errno::Errno::ENOENT) => return Err(DirProblem::Missing),
            Err(
                nix::errno::Errno::ELOOP | nix::errno::Errno::ENOTDIR | nix::errno::Errno::EACCES,
            ) if rule == DirRule::Private => {
                return Err(DirProblem::Refused(format!(
                    "{shown} {}: it must be a real directory of yours ({}) with mode 0700; not \
                     using it (remove it, or set XDG_RUNTIME_DIR, or give --socket PATH)",
                    describe_entry(dir),
                    uid_text(me)
                )));
            }
            Err(e) => {
                return Err(DirProblem::Refused(format!(
                    "cannot open the directory {shown} ({}): {e}",
                    describe_entry(dir)
                )));
            }
        }
    };
    let st = fstat(&fd).map_err(|e| DirProblem::Refused(format!("cannot stat {shown}: {e}")))?;
    let mode = st.st_mode & 0o7777;
    let owner = st.st_uid;
    match rule {
        DirRule::Private if owner != me || mode & 0o077 != 0 => {
            return Err(DirProblem::Refused(format!(
                "{shown} is a directory owned by {}, mode {mode:04o}: it must be yours ({}) \
                 with mode 0700, or another user could replace the socket in it; not using it \
                 ({}, or set XDG_RUNTIME_DIR, or give --socket PATH)",
                uid_text(owner),
                uid_text(me),
                if owner == me {
                    "chmod 700 it"
                } else {
                    "remove it"
                }
            )));
        }
        DirRule::Own(what) if owner != me || mode & 0o022 != 0 => {
            return Err(DirProblem::Refused(format!(
                "{shown} is a directory owned by {}, mode {mode:04o}: the directory of {what} \
                 must be yours ({}) and not writable by group or others, or another user could \
                 put a file there; not using it",
                uid_text(owner),
                uid_text(me)
            )));
        }
        DirRule::Given(what) if owner != me && owner != 0 => {
            return Err(DirProblem::Refused(format!(
                "{shown} is a directory owned by {}, mode {mode:04o}: the directory of {what} \
                 must belong to you ({}) or root, or its owner could replace {what}; not \
                 using it",
                uid_text(owner),
                uid_text(me)
            )));
        }
        DirRule::Given(what) if mode & 0o022 != 0 && mode & 0o1000 == 0 => {
            return Err(DirProblem::Refused(format!(
                "{shown} is a directory owned by {}, mode {mode:04o}: it is writable by group \
                 or others without the sticky bit, so another user could replace {what} in \
                 it; not using it (give a path in a private directory)",
                uid_text(owner)
            )));
        }
        _ => {}
    }
    Ok(CheckedDir {
        fd,
        dev: st.st_dev,
        ino: st.st_ino,
        created,
    })
}
