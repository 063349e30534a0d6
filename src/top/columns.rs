//! The dashboard's columns: which exist, which are shown and in what order, and the file that
//! keeps that choice.
//!
//! Owns [`Column`] (its title, widths, name in the file, and whether and how the rows sort by
//! it: the dashboard's sort is keyed by the column itself), [`Layout`] (every
//! optional column in the chosen order, each shown or not, as the `F2` setup screen edits it)
//! and the file `$XDG_CONFIG_HOME/foster/top.toml` (else `~/.config/foster/top.toml`):
//! [`load`] reads it with a size bound, after checking its directory and itself as foster
//! checks what another local user could plant (owned by the user, not writable by group or
//! others, no symbolic link: [`crate::base::ownership::open_dir`]); [`save`] writes it atomically (a
//! temporary file in the same directory, renamed over it). A file that is missing gives the
//! defaults; one that is bad gives the defaults and a message that says what is wrong.

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use std::cmp::Ordering;

use crate::process::tree::ExtraWants;
use crate::top::formatting::command_text;
use crate::top::model::{Node, Supervision, Wants};

/// What a column's values are: the words of its order depend on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A time (AGE, START): oldest or youngest first.
    Time,
    /// A number: smallest or largest first.
    Number,
    /// Words: A to Z, or Z to A.
    Text,
}

/// A column of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Column {
    Flag,
    Pid,
    Role,
    Helper,
    /// The helper's state, on its own process's row.
    HelperState,
    /// The helper's restarts, on its own row.
    Restarts,
    /// How the helper's last process ended, on its own row.
    LastExit,
    Generation,
    State,
    Policy,
    Age,
    Cpu,
    Rss,
    /// The owner's name.
    User,
    Ppid,
    Pgid,
    Sid,
    Threads,
    /// The clock time it started.
    Start,
    /// Bytes read from storage per second.
    IoRead,
    /// Bytes written to storage per second.
    IoWrite,
    Cgroup,
    /// The inode number of its PID namespace.
    PidNs,
    Command,
}

impl Column {
    /// How many columns there are.
    pub const COUNT: usize = 24;

    /// Every column, in the order of their declaration (`Column::ALL[c as usize] == c`).
    pub const ALL: [Column; Column::COUNT] = [
        Column::Flag,
        Column::Pid,
        Column::Role,
        Column::Helper,
        Column::HelperState,
        Column::Restarts,
        Column::LastExit,
        Column::Generation,
        Column::State,
        Column::Policy,
        Column::Age,
        Column::Cpu,
        Column::Rss,
        Column::User,
        Column::Ppid,
        Column::Pgid,
        Column::Sid,
        Column::Threads,
        Column::Start,
        Column::IoRead,
        Column::IoWrite,
        Column::Cgroup,
        Column::PidNs,
        Column::Command,
    ];

    /// Every column the setup screen lists, in their default order (the flag comes first and
    /// the command last, always).
    pub const OPTIONAL: [Column; 22] = [
        Column::Pid,
        Column::User,
        Column::Ppid,
        Column::Pgid,
        Column::Sid,
        Column::Role,
        Column::Helper,
        Column::HelperState,
        Column::Restarts,
        Column::LastExit,
        Column::Generation,
        Column::State,
        Column::Policy,
        Column::Threads,
        Column::Start,
        Column::Age,
        Column::Cpu,
        Column::Rss,
        Column::IoRead,
        Column::IoWrite,
        Column::Cgroup,
        Column::PidNs,
    ];

    /// Those shown at first.
    pub const DEFAULT: [Column; 12] = [
        Column::Pid,
        Column::Role,
        Column::Helper,
        Column::HelperState,
        Column::Restarts,
        Column::LastExit,
        Column::Generation,
        Column::State,
        Column::Policy,
        Column::Age,
        Column::Cpu,
        Column::Rss,
    ];

    pub fn title(self) -> &'static str {
        match self {
            Column::Flag => "!",
            Column::Pid => "PID",
            Column::Role => "ROLE",
            Column::Helper => "HELPER",
            Column::HelperState => "STATE",
            Column::Restarts => "RESTARTS",
            Column::LastExit => "LAST EXIT",
            Column::Generation => "GEN",
            Column::State => "S",
            Column::Policy => "POLICY",
            Column::Age => "AGE",
            Column::Cpu => "CPU%",
            Column::Rss => "RSS",
            Column::User => "USER",
            Column::Ppid => "PPID",
            Column::Pgid => "PGID",
            Column::Sid => "SID",
            Column::Threads => "THR",
            Column::Start => "START",
            Column::IoRead => "READ/s",
            Column::IoWrite => "WRITE/s",
            Column::Cgroup => "CGROUP",
            Column::PidNs => "PIDNS",
            Column::Command => "COMMAND",
        }
    }

    /// Its name in the file (`columns = ["pid", "user", ...]`).
    pub fn key(self) -> &'static str {
        match self {
            Column::Flag => "flag",
            Column::Pid => "pid",
            Column::Role => "role",
            Column::Helper => "helper",
            Column::HelperState => "helper_state",
            Column::Restarts => "restarts",
            Column::LastExit => "last_exit",
            Column::Generation => "generation",
            Column::State => "state",
            Column::Policy => "policy",
            Column::Age => "age",
            Column::Cpu => "cpu",
            Column::Rss => "rss",
            Column::User => "user",
            Column::Ppid => "ppid",
            Column::Pgid => "pgid",
            Column::Sid => "sid",
            Column::Threads => "threads",
            Column::Start => "start",
            Column::IoRead => "io_read",
            Column::IoWrite => "io_write",
            Column::Cgroup => "cgroup",
            Column::PidNs => "pidns",
            Column::Command => "command",
        }
    }

    /// What it shows, for the setup screen.
    pub fn describe(self) -> &'static str {
        match self {
            Column::Flag => "anomaly or tag",
            Column::Pid => "process id",
            Column::Role => "attached: supervisor, helper, descendant, adopted",
            Column::Helper => "attached: the helper it belongs to",
            Column::HelperState => "attached: the helper's state",
            Column::Restarts => "attached: the helper's restarts",
            Column::LastExit => "attached: how the helper's last process ended",
            Column::Generation => "attached: generation",
            Column::State => "state letter (R S D Z T)",
            Column::Policy => "attached: parent-death policy",
            Column::Age => "time since it started",
            Column::Cpu => "CPU since the last reading",
            Column::Rss => "resident memory",
            Column::User => "owner",
            Column::Ppid => "parent's pid",
            Column::Pgid => "process group (standalone)",
            Column::Sid => "session (standalone)",
            Column::Threads => "threads",
            Column::Start => "clock time it started",
            Column::IoRead => "storage read per second (standalone, where readable)",
            Column::IoWrite => "storage written per second (standalone, where readable)",
            Column::Cgroup => "control group (standalone)",
            Column::PidNs => "PID namespace inode (standalone)",
            Column::Command => "the tree and the command line",
        }
    }

    /// A typical width: the width the column takes when its content is not known.
    pub fn width(self) -> u16 {
        match self {
            Column::Flag => 1,
            Column::Pid | Column::Ppid | Column::Pgid | Column::Sid => 7,
            Column::Role => 10,
            Column::Helper | Column::User => 8,
            Column::HelperState => 9,
            Column::Restarts => 8,
            Column::LastExit => 9,
            Column::Generation | Column::Threads => 3,
            Column::State => 4,
            Column::Policy => 15,
            Column::Age | Column::Start => 6,
            Column::Cpu => 5,
            Column::Rss => 6,
            Column::IoRead | Column::IoWrite => 7,
            Column::Cgroup => 16,
            Column::PidNs => 10,
            Column::Command => 0,
        }
    }

    /// The widest it grows to fit its content; longer content is cut, marked `…`.
    pub fn max_width(self) -> u16 {
        match self {
            Column::Helper | Column::Policy | Column::Cgroup => 24,
            Column::Role | Column::HelperState | Column::User => 16,
            _ => 12,
        }
    }

    /// Whether the rows can be sorted by it (every column but the flag).
    pub fn sorts(self) -> bool {
        self != Column::Flag
    }

    /// Whether sorting by it starts largest first (the numbers that grow, as htop has them).
    pub fn largest_first(self) -> bool {
        matches!(
            self,
            Column::Cpu
                | Column::Rss
                | Column::IoRead
                | Column::IoWrite
                | Column::Threads
                | Column::Restarts
        )
    }

    /// What its values are, for the words of its order.
    pub fn kind(self) -> Kind {
        match self {
            Column::Age | Column::Start => Kind::Time,
            Column::Pid
            | Column::Ppid
            | Column::Pgid
            | Column::Sid
            | Column::Threads
            | Column::Generation
            | Column::Cpu
            | Column::Rss
            | Column::IoRead
            | Column::IoWrite
            | Column::Restarts
            | Column::PidNs
            | Column::Flag => Kind::Number,
            _ => Kind::Text,
        }
    }

    /// Compares two processes by this column, ascending (AGE and START: oldest first). A
    /// column that does not sort finds every process equal.
    // Long: one arm per column.
    pub fn compare(self, a: &Node, b: &Node) -> Ordering {
        fn sup(n: &Node) -> Option<&Supervision> {
            n.info.supervision.as_ref()
        }
        fn text(n: &Node, f: fn(&Supervision) -> &str) -> &str {
            sup(n).map_or("", f)
        }
        match self {
            Column::Flag => Ordering::Equal,
            Column::Pid => a.info.id.pid.cmp(&b.info.id.pid),
            Column::Role => text(a, |s| &s.role).cmp(text(b, |s| &s.role)),
            Column::Helper => {
                fn h(n: &Node) -> Option<&str> {
                    sup(n).and_then(|s| s.helper.as_deref())
                }
                h(a).cmp(&h(b))
            }
            Column::Restarts => {
                let r = |n: &Node| sup(n).and_then(|s| s.restarts);
                r(a).cmp(&r(b))
            }
            Column::LastExit => {
                fn e(n: &Node) -> Option<&str> {
                    sup(n).and_then(|s| s.last_exit.as_deref())
                }
                e(a).cmp(&e(b))
            }
            Column::HelperState => {
                fn h(n: &Node) -> Option<&str> {
                    sup(n)
                        .and_then(|s| s.helper_state.as_ref())
                        .map(|h| h.state.as_str())
                }
                h(a).cmp(&h(b))
            }
            Column::Generation => {
                let g = |n: &Node| sup(n).map_or(0, |s| s.generation);
                g(a).cmp(&g(b))
            }
            Column::State => a.info.state.cmp(&b.info.state),
            Column::Policy => text(a, |s| &s.policy).cmp(text(b, |s| &s.policy)),
            Column::Age | Column::Start => {
                (a.info.id.start_time, a.info.id.pid).cmp(&(b.info.id.start_time, b.info.id.pid))
            }
            Column::Cpu => a
                .cpu_pct
                .unwrap_or(-1.0)
                .total_cmp(&b.cpu_pct.unwrap_or(-1.0)),
            Column::Rss => a.info.rss_bytes.cmp(&b.info.rss_bytes),
            Column::Command => command_text(a).cmp(&command_text(b)),
            Column::User => a.info.uid.cmp(&b.info.uid),
            Column::Ppid => a.info.ppid.cmp(&b.info.ppid),
            Column::Pgid => a.info.ext.pgid.cmp(&b.info.ext.pgid),
            Column::Sid => a.info.ext.sid.cmp(&b.info.ext.sid),
            Column::Threads => a.info.ext.threads.cmp(&b.info.ext.threads),
            Column::IoRead => {
                let r = |n: &Node| n.io_rate.map_or(-1.0, |r| r.0);
                r(a).total_cmp(&r(b))
            }
            Column::IoWrite => {
                let w = |n: &Node| n.io_rate.map_or(-1.0, |r| r.1);
                w(a).total_cmp(&w(b))
            }
            Column::Cgroup => a.info.ext.cgroup.cmp(&b.info.ext.cgroup),
            Column::PidNs => a.info.ext.pidns.cmp(&b.info.ext.pidns),
        }
    }

    pub fn right_aligned(self) -> bool {
        matches!(
            self,
            Column::Pid
                | Column::Restarts
                | Column::LastExit
                | Column::Generation
                | Column::Age
                | Column::Cpu
                | Column::Rss
                | Column::Ppid
                | Column::Pgid
                | Column::Sid
                | Column::Threads
                | Column::IoRead
                | Column::IoWrite
        )
    }

    /// Only attached to a supervisor (the source knows roles and helpers).
    pub fn supervised_only(self) -> bool {
        matches!(
            self,
            Column::Role
                | Column::Helper
                | Column::HelperState
                | Column::Restarts
                | Column::LastExit
                | Column::Generation
                | Column::Policy
        )
    }
}

/// Every optional column in the chosen order, each shown or not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    pub entries: Vec<(Column, bool)>,
}

impl Default for Layout {
    fn default() -> Layout {
        Layout::showing(&Column::DEFAULT)
    }
}

impl Layout {
    /// `shown` first, in this order, then every other optional column, hidden.
    pub fn showing(shown: &[Column]) -> Layout {
        let mut entries: Vec<(Column, bool)> = shown.iter().map(|c| (*c, true)).collect();
        for c in Column::OPTIONAL {
            if !shown.contains(&c) {
                entries.push((c, false));
            }
        }
        Layout { entries }
    }

    /// The columns shown, in order.
    pub fn shown(&self) -> Vec<Column> {
        self.entries
            .iter()
            .filter(|(_, s)| *s)
            .map(|(c, _)| *c)
            .collect()
    }

    pub fn is_shown(&self, c: Column) -> bool {
        self.entries.iter().any(|(e, s)| *e == c && *s)
    }

    /// What a reading must read of each process for the columns shown.
    pub fn wants(&self) -> Wants {
        Wants {
            groups: self.is_shown(Column::Pgid) || self.is_shown(Column::Sid),
            extra: ExtraWants {
                io: self.is_shown(Column::IoRead) || self.is_shown(Column::IoWrite),
                cgroup: self.is_shown(Column::Cgroup),
                pidns: self.is_shown(Column::PidNs),
            },
        }
    }

    /// Shows or hides entry `i`.
    pub fn toggle(&mut self, i: usize) {
        if let Some(e) = self.entries.get_mut(i) {
            e.1 = !e.1;
        }
    }

    /// Moves entry `i` by `delta` places; returns where it is now.
    pub fn shift(&mut self, i: usize, delta: isize) -> usize {
        if i >= self.entries.len() {
            return i;
        }
        let to = (i as isize + delta).clamp(0, self.entries.len() as isize - 1) as usize;
        let e = self.entries.remove(i);
        self.entries.insert(to, e);
        to
    }

    /// The file's text: the columns shown, in order.
    pub fn to_toml(&self) -> String {
        let names: Vec<String> = self
            .shown()
            .iter()
            .map(|c| format!("\"{}\"", c.key()))
            .collect();
        format!(
            "# foster top: the columns shown, in order (F2 in foster top changes them).\n\
             # Every name: {}.\n\
             columns = [{}]\n",
            Column::OPTIONAL.map(Column::key).join(", "),
            names.join(", ")
        )
    }

    /// Reads the file's text; the error says what is wrong.
    pub fn from_toml(text: &str) -> Result<Layout, ColumnsError> {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct File {
            columns: Vec<String>,
        }
        let f: File = toml::from_str(text).map_err(|e| e.message().to_string())?;
        let mut shown = Vec::new();
        for name in &f.columns {
            let c = Column::OPTIONAL
                .into_iter()
                .find(|c| c.key() == name)
                .ok_or_else(|| {
                    format!(
                        "unknown column {:?} (F2 lists them)",
                        crate::base::sanitize::escape(name.as_bytes())
                    )
                })?;
            if shown.contains(&c) {
                return Err(format!("column {:?} listed twice", c.key()).into());
            }
            shown.push(c);
        }
        Ok(Layout::showing(&shown))
    }
}

/// What is wrong with the file, or why it could not be written, in words (the path named).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ColumnsError(pub String);

impl From<String> for ColumnsError {
    fn from(s: String) -> ColumnsError {
        ColumnsError(s)
    }
}

impl From<&str> for ColumnsError {
    fn from(s: &str) -> ColumnsError {
        ColumnsError(s.to_string())
    }
}

/// The largest file read.
pub const MAX_FILE: u64 = 64 * 1024;

/// The file's name in its directory.
const FILE: &str = "top.toml";

/// The directory of the file: `$XDG_CONFIG_HOME/foster`, else `~/.config/foster`; `None` when
/// neither variable says (or says a relative path).
pub fn dir() -> Option<PathBuf> {
    let abs = |v: std::ffi::OsString| Some(PathBuf::from(v)).filter(|p| p.is_absolute());
    if let Some(x) = std::env::var_os("XDG_CONFIG_HOME").and_then(abs) {
        return Some(x.join("foster"));
    }
    std::env::var_os("HOME")
        .and_then(abs)
        .map(|h| h.join(".config").join("foster"))
}

/// The file's path, for messages and docs.
pub fn path() -> Option<PathBuf> {
    dir().map(|d| d.join(FILE))
}

/// Opens the directory, checked: a real directory of the user's, not writable by others.
fn open_checked_dir(
    dir: &Path,
    create: bool,
) -> Result<Option<std::os::fd::OwnedFd>, ColumnsError> {
    use crate::base::ownership::{DirProblem, DirRule, open_dir};
    match open_dir(dir, DirRule::Own("the dashboard's settings"), create) {
        Ok(d) => Ok(Some(d.fd)),
        Err(DirProblem::Missing) => Ok(None),
        Err(DirProblem::Refused(m)) => Err(m.into()),
    }
}

/// The layout in the file; `Ok(None)` when there is none. The error says what is wrong, the
/// path first.
pub fn load() -> Result<Option<Layout>, ColumnsError> {
    let Some(dir) = dir() else {
        return Ok(None);
    };
    let shown = dir.join(FILE);
    let bad =
        |why: String| ColumnsError(format!("{why}: {}; the default columns", shown.display()));
    let Some(dfd) =
        open_checked_dir(&dir, false).map_err(|m| format!("{m}; the default columns"))?
    else {
        return Ok(None);
    };
    use nix::fcntl::{OFlag, openat};
    use nix::sys::stat::{Mode, fstat};
    let fd = match openat(
        dfd.as_fd(),
        FILE,
        OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(nix::errno::Errno::ENOENT) => return Ok(None),
        Err(nix::errno::Errno::ELOOP) => {
            return Err(bad("a symbolic link, not read".into()));
        }
        Err(e) => return Err(bad(format!("cannot open it: {e}"))),
    };
    let st = fstat(&fd).map_err(|e| bad(format!("cannot stat it: {e}")))?;
    let me = nix::unistd::geteuid().as_raw();
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(bad("not a regular file".into()));
    }
    if st.st_uid != me {
        return Err(bad(format!(
            "owned by {}, not by you ({}): not read",
            crate::base::ownership::uid_text(st.st_uid),
            crate::base::ownership::uid_text(me)
        )));
    }
    if st.st_mode & 0o022 != 0 {
        return Err(bad(format!(
            "mode {:04o}: writable by group or others, not read (chmod go-w it)",
            st.st_mode & 0o7777
        )));
    }
    let mut text = Vec::new();
    std::fs::File::from(fd)
        .take(MAX_FILE + 1)
        .read_to_end(&mut text)
        .map_err(|e| bad(format!("cannot read it: {e}")))?;
    if text.len() as u64 > MAX_FILE {
        return Err(bad(format!("larger than {} KiB", MAX_FILE / 1024)));
    }
    let text = String::from_utf8(text).map_err(|_| bad("not UTF-8".into()))?;
    Layout::from_toml(&text).map(Some).map_err(|e| bad(e.0))
}

/// Writes the layout to the file, atomically: a new file beside it (mode 0600), synced, then
/// renamed over it. Makes the directory (mode 0700) when missing. Returns the path written.
pub fn save(layout: &Layout) -> Result<PathBuf, ColumnsError> {
    let dir = dir().ok_or("neither XDG_CONFIG_HOME nor HOME is set to an absolute path")?;
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    let dfd =
        open_checked_dir(&dir, true)?.ok_or_else(|| format!("{} is missing", dir.display()))?;
    use nix::fcntl::{OFlag, openat, renameat};
    use nix::sys::stat::Mode;
    let tmp = format!(".{FILE}.{}.tmp", std::process::id());
    let _ = nix::unistd::unlinkat(&dfd, tmp.as_str(), nix::unistd::UnlinkatFlags::NoRemoveDir);
    let fd = openat(
        dfd.as_fd(),
        tmp.as_str(),
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o600),
    )
    .map_err(|e| format!("cannot create {}: {e}", dir.join(&tmp).display()))?;
    let mut f = std::fs::File::from(fd);
    let written = f
        .write_all(layout.to_toml().as_bytes())
        .and_then(|()| f.sync_all());
    let renamed = written
        .map_err(|e| e.to_string())
        .and_then(|()| renameat(&dfd, tmp.as_str(), &dfd, FILE).map_err(|e| e.to_string()));
    if let Err(e) = renamed {
        let _ = nix::unistd::unlinkat(&dfd, tmp.as_str(), nix::unistd::UnlinkatFlags::NoRemoveDir);
        return Err(format!("cannot write {}: {e}", dir.join(FILE).display()).into());
    }
    Ok(dir.join(FILE))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Column::ALL` lists every column once, at its own index: a row's cells are indexed by
    /// it.
    #[test]
    fn every_column_is_at_its_index() {
        for (i, c) in Column::ALL.into_iter().enumerate() {
            assert_eq!(c as usize, i, "{c:?}");
        }
        for c in Column::OPTIONAL {
            assert!(Column::ALL.contains(&c), "{c:?}");
        }
    }

    #[test]
    fn the_file_keeps_the_order_and_names_what_is_wrong() {
        let mut l = Layout::default();
        let user = l
            .entries
            .iter()
            .position(|(c, _)| *c == Column::User)
            .unwrap();
        l.toggle(user);
        let at = l.shift(user, -(user as isize));
        assert_eq!(at, 0);
        let back = Layout::from_toml(&l.to_toml()).unwrap();
        assert_eq!(back.shown()[..2], [Column::User, Column::Pid]);
        assert_eq!(back, l);
        let e = Layout::from_toml("columns = [\"pid\", \"nope\"]").unwrap_err();
        assert!(e.0.contains("unknown column \"nope\""), "{e}");
        assert!(Layout::from_toml("columns = 3").is_err());
        assert!(Layout::from_toml("colums = []").is_err());
        let e = Layout::from_toml("columns = [\"pid\", \"pid\"]").unwrap_err();
        assert!(e.0.contains("twice"), "{e}");
    }
}
