//! The process tree: `/proc` read into a graph, the changes between two readings, and the ways
//! the tree is shown.
//!
//! - [`scan`]: the [`Scanner`] that reads `/proc` into a [`Snapshot`], caching per identity.
//! - [`graph`]: the [`Forest`], a petgraph graph of processes keyed by identity with its
//!   traversals, and the [`Snapshot`], a forest of [`ProcessNode`]s.
//! - [`connector`]: the kernel's announcements of births and ends ([`connector::Connector`]), for
//!   the supervisor and the dashboard.
//! - [`diff`]: the [`Change`] events between two snapshots.
//! - [`subtree`]: one process's [`Subtree`], kept current by reading only what changed.
//! - [`render`]: pstree-like text, JSON and Graphviz output.
//! - [`pstree`]: pstree's options for the text ([`View`]) and its two layouts, foster's and
//!   pstree's own (`--plain`).
//!
//! [`run`] is `foster tree`; [`children_of`] and [`descendants_of`] answer one-off questions;
//! [`descendant_ids`] the init's, by the listing and each `stat` alone.

pub mod connector;
pub mod diff;
pub mod graph;
pub mod pstree;
pub mod render;
pub mod scan;
pub mod subtree;

use std::io::{self, Write};

use crate::process::identity::Identity;

pub use crate::process::procstat::parse_nspid;
pub use diff::{Change, diff};
pub use graph::{Forest, Member, ProcessNode, ScanStats, Snapshot, TreeError};
pub use pstree::{Symbols, Threads, View};
pub use render::{Format, RoleMark, Roles};
pub use scan::{Extra, ExtraWants, Relisting, ScanOptions, Scanner, Thread, nspid};
pub use subtree::{Newborns, Subtree, UpdateStats};

/// What `foster tree` was asked for.
#[derive(Debug, Clone)]
pub struct TreeRequest {
    /// Show full command lines (`-a`).
    pub arguments: bool,
    /// Show only the subtree of this pid (`--root`).
    pub root: Option<i32>,
    /// The output form.
    pub format: Format,
    /// What the text shows (pstree's options); `view.arguments` follows `arguments`.
    pub view: View,
    /// The roles of a supervised tree's processes (`--attach`): noted in foster's layout,
    /// styling the dot boxes.
    pub roles: Roles,
}

/// Why `foster tree` failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The scan failed.
    #[error(transparent)]
    Tree(TreeError),
    /// The `--root` pid is not a process.
    #[error("no process with pid {0} (given as --root)")]
    NoSuchRoot(i32),
    /// The thread that draws the text could not be started, or failed.
    #[error("cannot draw the tree: {0}")]
    Draw(#[source] io::Error),
    /// Standard output could not be written.
    #[error("cannot write the tree to standard output: {0}")]
    Output(#[source] io::Error),
}

impl From<TreeError> for RunError {
    fn from(e: TreeError) -> Self {
        RunError::Tree(e)
    }
}

/// A scanner for one question: on the calling thread (its caller may have blocked signals in
/// it, or may fork later and want no other thread to have existed), without command lines or
/// owners (the nodes it gives have none: `cmdline` empty, `uid` 0).
fn one_off() -> Result<Scanner, TreeError> {
    Scanner::new(ScanOptions {
        cmdline: false,
        threads: 1,
        uid: false,
        ..ScanOptions::default()
    })
}

/// The time since boot in clock ticks of `hz` a second (the unit of a process's start time),
/// from `/proc/uptime` through procfs's `Uptime`.
pub fn uptime_ticks(hz: u64) -> io::Result<u64> {
    use procfs::Current;
    let up = procfs::Uptime::current()
        .map_err(|e| io::Error::other(format!("cannot read /proc/uptime: {e}")))?;
    Ok((up.uptime * hz as f64) as u64)
}

/// The children of `pid` now, by pid (none when `pid` is not a process), read without command
/// lines or owners. A child is a process whose parent is `pid` and that did not start before it
/// (so not a child of an earlier holder of a reused pid); zombies are among them.
///
/// [`run`] is the `foster tree` command on top of them; [`children_of`] and [`descendants_of`]
/// answer the one-off questions about one process that the other modules and the tests ask, by
/// the same scan.
pub fn children_of(pid: i32) -> Result<Vec<ProcessNode>, TreeError> {
    let snap = one_off()?.scan()?;
    Ok(match snap.identity_of(pid) {
        Some(id) => snap.children(&id).into_iter().cloned().collect(),
        None => Vec::new(),
    })
}

/// Every process below `pid` now, `pid` itself excluded, parents before their children (none
/// when `pid` is not a process): its children as [`children_of`] says, theirs, and so on, from
/// one scan.
pub fn descendants_of(pid: i32) -> Result<Vec<ProcessNode>, TreeError> {
    let snap = one_off()?.scan()?;
    Ok(match snap.identity_of(pid) {
        Some(id) => snap.descendants(&id).skip(1).cloned().collect(),
        None => Vec::new(),
    })
}

/// The identities of every process below `pid` now, parents before their children, as
/// [`descendants_of`] finds them but light: the scanner's listing, then each process's `stat`
/// alone (no snapshot, no graph, no cache), for `foster init`'s small binary.
pub fn descendant_ids(pid: i32) -> Result<Vec<Identity>, TreeError> {
    // (identity, parent pid) of every process listed.
    let mut all: Vec<(Identity, i32)> = Vec::new();
    let mut buf = [0u8; 1024];
    for &p in one_off()?.list_pids()? {
        let path = std::ffi::CString::new(format!("/proc/{p}/stat")).expect("no NUL in a number");
        let Ok(len) = crate::process::identity::read_into(&path, &mut buf) else {
            continue; // gone since the listing
        };
        if let Ok(f) = crate::process::procstat::StatFields::parse(&buf[..len]) {
            let id = Identity {
                pid: f.pid,
                start_time: f.start_time,
            };
            all.push((id, f.ppid));
        }
    }
    let Some(&(root, _)) = all.iter().find(|(id, _)| id.pid == pid) else {
        return Ok(Vec::new());
    };
    let mut below = Vec::new();
    let mut stack = vec![root];
    while let Some(parent) = stack.pop() {
        let children = all
            .iter()
            .filter(|(id, ppid)| *ppid == parent.pid && graph::may_be_parent(&parent, id))
            .map(|(id, _)| *id);
        let first = below.len();
        below.extend(children);
        stack.extend(below[first..].iter().rev());
    }
    Ok(below)
}

/// The stack of the thread that draws the text (virtual memory, touched only as deep as the tree
/// goes).
const DRAW_STACK: usize = 256 << 20;

/// Runs `foster tree`: one scan, the subtree if asked, rendered to `out`. Command lines are read
/// only when they are shown (`-a`, `--json`), and with `--root` only for the subtree (and its
/// ancestors with `-s`); owners only when shown (JSON, `-u`); threads only for the text that
/// shows them, and only of the processes shown. A reader that closes the pipe early (`| head`)
/// is not an error.
pub fn run(req: &TreeRequest, out: &mut dyn Write) -> Result<(), RunError> {
    let json = req.format == Format::Json;
    let text = req.format == Format::Text;
    let view = View {
        arguments: req.arguments,
        ..req.view.clone()
    };
    let want_cmdline = req.arguments || json;
    // With --root, command lines are read after the subtree is known, only for it.
    // The owner is shown only in JSON and by -u: otherwise no `fstat`, one a process.
    let opts = ScanOptions {
        cmdline: want_cmdline && (req.root.is_none() || (text && view.parents)),
        uid: json || (text && view.uid_changes),
        ..ScanOptions::default()
    };
    let mut scanner = Scanner::new(opts)?;
    let snapshot = scanner.scan()?;
    tracing::debug!(stats = ?snapshot.stats, "scanned /proc");
    // The highlighted process and its ancestors, in the whole system.
    let marked = match view.highlight {
        Some(pid) if text => highlighted(&snapshot, pid),
        _ => Default::default(),
    };
    let mut ancestors: Vec<ProcessNode> = Vec::new();
    let shown = match req.root {
        Some(pid) => {
            let mut sub = snapshot
                .subtree(pid)
                .map_err(|_| RunError::NoSuchRoot(pid))?;
            if view.parents
                && text
                && let Some(id) = snapshot.identity_of(pid)
            {
                ancestors = snapshot.ancestors(&id).cloned().collect();
                ancestors.reverse();
            }
            if want_cmdline && !(text && view.parents) {
                scanner.read_cmdlines(&mut sub);
            }
            sub
        }
        None => snapshot,
    };
    let rendered = if text {
        draw_text(&shown, &ancestors, &mut scanner, &view, &marked, req)?
    } else {
        render::render(&shown, req.format, req.arguments, &req.roles)
    };
    match out
        .write_all(rendered.as_bytes())
        .and_then(|()| out.flush())
    {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(RunError::Output(e)),
    }
}

/// `pid` and its ancestors, in the whole system (none when it is not there).
fn highlighted(snapshot: &Snapshot, pid: i32) -> std::collections::HashSet<i32> {
    match snapshot.identity_of(pid) {
        Some(id) => std::iter::once(pid)
            .chain(snapshot.ancestors(&id).map(|n| n.pid))
            .collect(),
        None => Default::default(),
    }
}

/// The text of `foster tree`: the threads of the processes shown read, the view built and
/// drawn in a layout.
fn draw_text(
    shown: &Snapshot,
    ancestors: &[ProcessNode],
    scanner: &mut Scanner,
    view: &View,
    marked: &std::collections::HashSet<i32>,
    req: &TreeRequest,
) -> Result<String, RunError> {
    let mut threads = pstree::ThreadMap::new();
    if view.threads != Threads::Hide {
        for n in shown.nodes() {
            if n.num_threads > 1 && !n.kernel_thread {
                threads.insert(n.pid, scanner.read_threads(n.pid));
            }
        }
    }
    // The view is built and drawn recursively, a frame a level: on a thread whose stack
    // holds a chain of processes hundreds of thousands deep.
    let draw = || {
        let roots = pstree::build(shown, ancestors, &threads, view, marked, &req.roles);
        if view.plain {
            pstree::plain_layout(&roots, view)
        } else {
            pstree::foster_layout(&roots, view)
        }
    };
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("tree-draw".into())
            .stack_size(DRAW_STACK)
            .spawn_scoped(s, draw)
            .map_err(RunError::Draw)?
            .join()
            .map_err(|_| RunError::Draw(io::Error::other("the drawing thread panicked")))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufRead;

    /// A shell whose child shell runs a sleep: the light walk finds both, the child first, as
    /// the snapshot's walk does.
    #[test]
    fn descendant_ids_match_the_snapshots_walk() {
        let mut sh = std::process::Command::new("sh")
            .args(["-c", "sh -c 'sleep 1000 & echo $!; wait' & wait"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        let mut out = io::BufReader::new(sh.stdout.take().unwrap());
        out.read_line(&mut line).unwrap();
        let sleep: i32 = line.trim().parse().unwrap();
        let top = sh.id() as i32;
        let light = descendant_ids(top).unwrap();
        let full: Vec<Identity> = descendants_of(top)
            .unwrap()
            .iter()
            .map(|n| n.identity)
            .collect();
        let pids: Vec<i32> = light.iter().map(|id| id.pid).collect();
        assert_eq!(pids.len(), 2, "{pids:?}");
        assert_eq!(pids[1], sleep, "{pids:?}");
        let mut sorted = light.clone();
        sorted.sort_by_key(|id| id.pid);
        let mut full_sorted = full;
        full_sorted.sort_by_key(|id| id.pid);
        assert_eq!(sorted, full_sorted);
        assert!(descendant_ids(sleep).unwrap().is_empty());
        for id in &light {
            let _ = crate::process::identity::signal(*id, libc::SIGKILL);
        }
        let _ = sh.wait();
    }
}
