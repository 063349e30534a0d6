//! Whether another local user could have planted, or could replace, a file where foster puts
//! one: the checks of the directory (a private directory of foster's user, or one no other user
//! can write to) and the descriptions of what is found (type, owner, mode) for the errors.
//!
//! Owns [`open_dir`] and its [`DirRule`]s, used for the control socket's directory, the notify
//! sockets' directory for helpers of other users next to it, and the runtime root they are in
//! (`crate::supervision::control::server`), for the helpers' log files and the events log
//! (`crate::base::logfile`) and for the dashboard's settings (`crate::top::columns`). The check is
//! made on the directory once open (`fstat`), so that what is checked is what is used.
//!//! Also owns [`owner_of`], the one judgment of whose a file is (in a user namespace too), and
//! [`judge_before_namespace`].

use std::fmt;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Mutex;

/// What a directory foster puts a file in must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirRule {
    /// The control socket's default directory
    /// ([`crate::supervision::control::server::default_dir`]), or any
    /// socket inside it: a real directory (not
    /// a symbolic link), owned by foster's effective uid, no access for group or others. Made
    /// (mode 0700) when missing and its parent exists; kept on exit (other supervisors of the
    /// user share it, as tmux's `/tmp/tmux-UID`). Its parent, the runtime root, is checked
    /// too: foster's user's or root's, not writable by others unless sticky.
    Private,
    /// The directory of the notify sockets of helpers that run as other users
    /// ([`crate::supervision::control::server::make_reachable_dir`]), next to the private one: a
    /// real
    /// directory (not a symbolic link), owned by foster's effective uid, that group and others
    /// may enter but neither list nor write (mode 0711); made so when missing (and a mode
    /// 0700 of foster's opened to 0711). Its parent, the runtime root, is checked as
    /// [`DirRule::Private`]'s. Kept on exit, as the private one.
    Reachable,
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
        Ok(Some(u)) => format!(
            "uid {uid} ({})",
            crate::base::sanitize::escape(u.name.as_bytes())
        ),
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
                        crate::base::sanitize::escape(to.as_os_str().as_encoded_bytes())
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

/// The verdict on the runtime root judged before `foster run` entered a user namespace of its
/// own, where an owner its map leaves out (root among them) reads as the overflow uid: the
/// root's device and inode, and why it is refused, if it is.
static RUNTIME_ROOT: std::sync::OnceLock<(u64, u64, Option<String>)> = std::sync::OnceLock::new();

/// The runtime root foster's private directory `dir` is made in (its parent: `XDG_RUNTIME_DIR`,
/// `/run`, the temporary directory).
fn runtime_root(dir: &Path) -> Option<&Path> {
    dir.parent().filter(|p| !p.as_os_str().is_empty())
}

/// Judges the runtime root of the private directory `dir` now, and keeps the verdict for the
/// checks made later of that same directory (by [`open_dir`]): `foster run` calls it
/// before it enters its namespaces.
pub fn judge_runtime_root(dir: &Path) {
    let Some(root) = runtime_root(dir) else {
        return;
    };
    let verdict = match judge_runtime_root_now(root) {
        Ok(Some(d)) => Some((d.dev, d.ino, None)),
        Ok(None) => None,
        Err(why) => std::fs::metadata(root)
            .ok()
            .map(|m| (m.dev(), m.ino(), Some(why.to_string()))),
    };
    if let Some(v) = verdict {
        let _ = RUNTIME_ROOT.set(v);
    }
}

/// Checks the runtime root of foster's private directory `dir`. Whoever owns it, or may write
/// to it without the sticky bit, could rename foster's directory away and put one of their own
/// in its place, with sockets of theirs under foster's names: it must belong to foster's user
/// or root, and not be writable by group or others unless sticky ([`DirRule::Given`]'s rule).
/// One that does not exist is left to the making of `dir` to report. The verdict of
/// [`judge_runtime_root`] stands for the same directory (device and inode).
fn check_runtime_root(dir: &Path) -> Result<(), DirProblem> {
    let Some(root) = runtime_root(dir) else {
        return Ok(());
    };
    if let (Some((dev, ino, verdict)), Ok(m)) = (RUNTIME_ROOT.get(), std::fs::metadata(root))
        && (m.dev(), m.ino()) == (*dev, *ino)
    {
        return verdict
            .clone()
            .map_or(Ok(()), |m| Err(DirProblem::Refused(m)));
    }
    judge_runtime_root_now(root)
        .map(drop)
        .map_err(|e| DirProblem::Refused(e.to_string()))
}

/// The runtime root `root`, open and checked (`None`: it does not exist), or why it is refused.
fn judge_runtime_root_now(root: &Path) -> Result<Option<CheckedDir>, RuntimeRootRefused> {
    match open_dir(root, DirRule::Given("foster's runtime directory"), false) {
        Ok(d) => Ok(Some(d)),
        Err(DirProblem::Missing) => Ok(None),
        Err(DirProblem::Refused(m)) => Err(RuntimeRootRefused(m)),
    }
}

/// The runtime root is refused: why, and what to do.
#[derive(Debug, thiserror::Error)]
#[error("{0} (is XDG_RUNTIME_DIR another user's? unset it, or set it to a directory of yours)")]
struct RuntimeRootRefused(String);

/// Opens the directory `dir` and checks it against `rule`; makes it (only it, mode 0700) when
/// missing and `create`, provided its parent exists. The check is on the open directory
/// (`fstat`), which is then used to verify the bound socket, so a directory swapped after the
/// check is noticed.
// Long: the checks of the directory in order, each with its own message.
pub fn open_dir(dir: &Path, rule: DirRule, create: bool) -> Result<CheckedDir, DirProblem> {
    use nix::fcntl::{OFlag, open};
    use nix::sys::stat::{Mode, fstat};
    let me = nix::unistd::geteuid().as_raw();
    let shown = dir.display();
    if matches!(rule, DirRule::Private | DirRule::Reachable) {
        check_runtime_root(dir)?;
    }
    let mut flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    if matches!(
        rule,
        DirRule::Private | DirRule::Reachable | DirRule::Own(_)
    ) {
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
    let owner = owner_of(Some(fd.as_fd()), st.st_uid, st.st_dev, st.st_ino);
    judge_dir(
        &shown.to_string(),
        rule,
        owner,
        st.st_uid,
        st.st_mode & 0o7777,
    )?;
    if rule == DirRule::Reachable && st.st_mode & 0o7777 != 0o711 {
        // Foster's own, closed to others: opened to entering (only).
        nix::sys::stat::fchmod(&fd, Mode::from_bits_truncate(0o711))
            .map_err(|e| DirProblem::Refused(format!("cannot chmod 711 {shown}: {e}")))?;
    }
    Ok(CheckedDir {
        fd,
        dev: st.st_dev,
        ino: st.st_ino,
        created,
    })
}

/// The verdict of `rule` on the directory `shown`, owned by `owner` (`uid` as seen here),
/// with mode `mode`.
fn judge_dir(
    shown: &str,
    rule: DirRule,
    owner: Owner,
    uid: u32,
    mode: u32,
) -> Result<(), DirProblem> {
    let me = nix::unistd::geteuid().as_raw();
    let shown_owner = owner_text(owner, uid);
    match rule {
        DirRule::Private if owner != Owner::Me || mode & 0o077 != 0 => {
            return Err(DirProblem::Refused(format!(
                "{shown} is a directory owned by {shown_owner}, mode {mode:04o}: it must be \
                 yours ({}) with mode 0700, or another user could replace the socket in it; \
                 not using it ({}, or set XDG_RUNTIME_DIR, or give --socket PATH)",
                uid_text(me),
                if owner == Owner::Me {
                    "chmod 700 it"
                } else {
                    "remove it"
                }
            )));
        }
        DirRule::Reachable if owner != Owner::Me || mode & 0o066 != 0 => {
            return Err(DirProblem::Refused(format!(
                "{shown} is a directory owned by {shown_owner}, mode {mode:04o}: the directory \
                 of the notify sockets of helpers that run as other users must be yours ({}), \
                 and nobody else may list or write it (mode 0711), or another user could \
                 replace a socket in it; not using it (remove it)",
                uid_text(me)
            )));
        }
        DirRule::Own(what) if owner != Owner::Me || mode & 0o022 != 0 => {
            return Err(DirProblem::Refused(format!(
                "{shown} is a directory owned by {shown_owner}, mode {mode:04o}: the directory \
                 of {what} must be yours ({}) and not writable by group or others, or another \
                 user could put a file there; not using it",
                uid_text(me)
            )));
        }
        DirRule::Given(what) if !matches!(owner, Owner::Me | Owner::Root) => {
            return Err(DirProblem::Refused(format!(
                "{shown} is a directory owned by {shown_owner}, mode {mode:04o}: the directory \
                 of {what} must belong to you ({}) or root, or its owner could replace {what}; \
                 not using it",
                uid_text(me)
            )));
        }
        DirRule::Given(what) if mode & 0o022 != 0 && mode & 0o1000 == 0 => {
            return Err(DirProblem::Refused(format!(
                "{shown} is a directory owned by {shown_owner}, mode {mode:04o}: it is writable \
                 by group or others without the sticky bit, so another user could replace \
                 {what} in it; not using it (give a path in a private directory)"
            )));
        }
        _ => {}
    }
    Ok(())
}

/// Whose a file or directory is, as judged in the namespace foster was started in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// foster's effective uid.
    Me,
    /// Root.
    Root,
    /// Another user: the uid as foster sees it.
    Other(u32),
    /// A uid foster's user namespace does not map, shown there as the overflow uid: root or
    /// any other user, never to be taken for foster's user or root.
    Unmapped,
}

/// The owner of a file whose `fstat` (or `lstat`) says `uid`, `dev`, `ino`, open as `fd` when
/// it is (see below): outside a user namespace, `uid` itself; inside one, mapped back
/// through its `uid_map`, or the verdict [`judge_before_namespace`] gave the same directory.
///
/// In a user namespace (a contained `foster run` that is not root), the kernel shows every uid
/// the namespace does not map (root's, another user's) as the overflow uid (65534, `nobody`):
/// an owner read there is mapped back through `/proc/self/uid_map`, an unmapped one is never
/// taken for foster's user or root, and an owner shown as the overflow uid when foster's own
/// uid is that uid is foster's only when foster may change the file's mode. The directories
/// foster will use are judged in the namespace foster was started in, before it enters the new
/// one, and kept open: inside, such a directory (the same device and inode) keeps that verdict.
pub fn owner_of(fd: Option<BorrowedFd<'_>>, uid: u32, dev: u64, ino: u64) -> Owner {
    let me = nix::unistd::geteuid().as_raw();
    let Some(map) = UidMap::of_this_namespace() else {
        return plain_owner(uid, me);
    };
    if let Some(o) = judged_outside(dev, ino) {
        return o;
    }
    // The overflow uid is foster's own only when foster may change the file's mode (it owns
    // it); otherwise it stands for every uid the namespace does not map.
    let outer = map
        .outside(uid)
        .filter(|_| uid != overflow_uid() || fd.is_some_and(may_chmod));
    match outer {
        Some(o) => plain_owner(o, map.outside(me).unwrap_or(u32::MAX)),
        None => Owner::Unmapped,
    }
}

/// `uid` judged where no namespace translates it.
fn plain_owner(uid: u32, me: u32) -> Owner {
    match uid {
        u if u == me => Owner::Me,
        0 => Owner::Root,
        u => Owner::Other(u),
    }
}

/// "uid 1 (daemon)": the owner `owner` as foster's user sees it, or, when a user namespace
/// hides it, the uid shown there (`shown`) and what it stands for.
pub fn owner_text(owner: Owner, shown: u32) -> String {
    match owner {
        Owner::Me => uid_text(nix::unistd::geteuid().as_raw()),
        Owner::Root => uid_text(0),
        Owner::Other(u) => uid_text(u),
        Owner::Unmapped => format!("{}{}", uid_text(shown), namespace_note(owner)),
    }
}

/// What an owner hidden by foster's user namespace is, for an error that shows its uid there:
/// empty for any other owner.
pub fn namespace_note(owner: Owner) -> &'static str {
    match owner {
        Owner::Unmapped => {
            " (the uid foster's user namespace shows for every uid it does not map: root or \
             another user)"
        }
        _ => "",
    }
}

/// Whether this process may change the mode of the file open as `fd` (it sets the mode the
/// file has): only its owner may, or a process with `CAP_FOWNER` over it, which in a user
/// namespace covers only files whose owner the namespace maps.
fn may_chmod(fd: BorrowedFd<'_>) -> bool {
    use nix::sys::stat::{Mode, fchmod, fstat};
    fstat(fd).is_ok_and(|st| fchmod(fd, Mode::from_bits_truncate(st.st_mode & 0o7777)).is_ok())
}

/// The kernel's overflow uid (what a user namespace shows for a uid it does not map).
fn overflow_uid() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/overflowuid")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(65534)
}

/// The uid map of this process's user namespace: (first uid inside, first uid outside, count).
struct UidMap(Vec<(u32, u32, u32)>);

impl UidMap {
    /// This namespace's map, `None` in the initial namespace (every uid mapped to itself).
    fn of_this_namespace() -> Option<UidMap> {
        let text = std::fs::read_to_string("/proc/self/uid_map").ok()?;
        let map = UidMap::parse(&text);
        (map.0 != [(0, 0, u32::MAX)]).then_some(map)
    }

    fn parse(text: &str) -> UidMap {
        let ranges = text
            .lines()
            .filter_map(|l| {
                let mut n = l.split_whitespace().map(|w| w.parse::<u32>().ok());
                Some((n.next()??, n.next()??, n.next()??))
            })
            .collect();
        UidMap(ranges)
    }

    /// The uid outside that `uid` inside stands for, `None` when unmapped.
    fn outside(&self, uid: u32) -> Option<u32> {
        self.0.iter().find_map(|&(inside, outside, count)| {
            let off = uid.checked_sub(inside)?;
            (off < count).then(|| outside + off)
        })
    }
}

/// A directory judged before foster entered its user namespace: its device, inode, the
/// verdict on its owner, and the directory itself, kept open so that the inode stays the same.
type Judged = (u64, u64, Owner, OwnedFd);

/// The directories [`judge_before_namespace`] judged.
static JUDGED: Mutex<Vec<Judged>> = Mutex::new(Vec::new());

fn judged_outside(dev: u64, ino: u64) -> Option<Owner> {
    let judged = JUDGED.lock().unwrap_or_else(|p| p.into_inner());
    judged
        .iter()
        .find(|j| (j.0, j.1) == (dev, ino))
        .map(|j| j.2)
}

/// Judges the directory `dir` by `rule` (a missing one is left for later: foster makes it, or
/// says it is missing, when it needs it) and keeps the verdict on its owner, for after foster
/// enters a user namespace where that owner reads as the overflow uid. Call it before
/// [`crate::supervision::contain::enter`]. The error says why the directory is refused.
pub fn judge_before_namespace(dir: &Path, rule: DirRule) -> Result<(), JudgeError> {
    let d = match open_dir(dir, rule, false) {
        Ok(d) => d,
        Err(DirProblem::Missing) => return Ok(()),
        Err(DirProblem::Refused(m)) => return Err(JudgeError::Refused(m)),
    };
    let st = nix::sys::stat::fstat(&d.fd).map_err(|source| JudgeError::Stat {
        dir: dir.to_path_buf(),
        source,
    })?;
    let owner = owner_of(Some(d.fd.as_fd()), st.st_uid, d.dev, d.ino);
    JUDGED
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push((d.dev, d.ino, owner, d.fd));
    Ok(())
}

/// Why [`judge_before_namespace`] refuses a directory.
#[derive(Debug, thiserror::Error)]
pub enum JudgeError {
    /// Its rule refuses it: the message says which and why.
    #[error("{0}")]
    Refused(String),
    /// It could not be examined.
    #[error("cannot stat {}: {source}", dir.display())]
    Stat {
        dir: std::path::PathBuf,
        #[source]
        source: nix::Error,
    },
}

/// The directory of the file at `path` (`.` for a bare name).
pub fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uid_map_maps_back_only_what_it_maps() {
        let map = UidMap::parse("      1000       1000          1\n");
        assert_eq!(map.outside(1000), Some(1000));
        assert_eq!(map.outside(0), None);
        assert_eq!(map.outside(65534), None);
        let map = UidMap::parse("0 100000 65536\n");
        assert_eq!(map.outside(0), Some(100000));
        assert_eq!(map.outside(65535), Some(165535));
        assert_eq!(map.outside(65536), None);
        let whole = UidMap::parse("         0          0 4294967295\n");
        assert_eq!(whole.0, [(0, 0, u32::MAX)]);
    }
}
