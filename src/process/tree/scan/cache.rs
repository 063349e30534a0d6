//! What a scanner keeps between scans: command lines and owners by identity, and the previous
//! scan's readings of processes that did not run.

use std::sync::Arc;

use crate::process::tree::graph::ProcessNode;

/// A cached command line (never an empty one), valid while the process keeps its name and the
/// bounds of its argument area.
///
/// A cached command line is kept while the name and the bounds of the argument area (fields 48
/// and 49 of `stat`, `arg_start` and `arg_end`) stay the same: `execve` changes them, so an exec
/// under the same identity is seen even when it keeps its name. An empty command line is never
/// kept: a process that has memory always has at least one byte of arguments, except in the
/// middle of an `execve`, whose new program has its name and then `arg_start` before its
/// arguments are laid out (`arg_end`), and at its exit. Such a process is marked
/// [`ProcessNode::in_exec`] when `stat` shows it (see there).
#[derive(Debug)]
pub(super) struct CacheEntry {
    pub(super) comm: Vec<u8>,
    pub(super) args: ArgArea,
    pub(super) cmdline: Arc<[Vec<u8>]>,
    pub(super) seen: u64,
}

/// A cached owner ([`ScanOptions::owner_recheck`]): valid while the process keeps its name and
/// argument area, for `owner_recheck` scans after it was read.
#[derive(Debug)]
pub(super) struct OwnerEntry {
    pub(super) uid: u32,
    pub(super) comm: Vec<u8>,
    pub(super) args: ArgArea,
    /// The scan that read it.
    pub(super) read: u64,
    pub(super) seen: u64,
}

/// `arg_start` and `arg_end` (fields 48 and 49 of `stat`): where the argument area lies. Both 0
/// where `stat` does not show them (another user's process, for a user other than root).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ArgArea {
    pub(super) start: u64,
    pub(super) end: u64,
}

/// What the previous scan read of a process, for the next scan to reuse while the process does
/// not run ([`ScanOptions::reuse_idle`]). Of `stat`'s fields, only what another process does to
/// this one changes without it running: its parent pid when its parent exits (the orphan is
/// handed to a reaper), which the scan sees at once (the parent's departure makes its children
/// read again, see [`Scanner::scan_pids`]); its process group when its parent sets it before
/// the child's first exec; its memory when the kernel reclaims pages; the owner of its `/proc`
/// entry when it changes credentials (it runs to do it). Those others show within
/// `reuse_idle` scans.
#[derive(Debug)]
pub(super) struct Kept {
    pub(super) node: ProcessNode,
    /// `schedstat`'s numbers ([`parse_schedstat`]), read before the node's `stat`.
    pub(super) sched: [u64; 3],
    /// The inode number of the process's `/proc` entry in the listing it was read from (0
    /// when the pids did not come from a listing; then only a listing's is compared).
    pub(super) ino: u64,
    pub(super) seen: u64,
}
