//! One process's subtree, kept current by reading only what changed.
//!
//! Owns [`Subtree`]: the snapshot of a root process and its descendants, updated on demand
//! (the supervisor asks when something of its tree ended; never on a timer unless its
//! configuration asks). An update reads only the pids that appeared, the parents of the
//! subtree and the children of a parent that left: its cost is that of the changes, not of the
//! machine ([`Subtree`] says why that is enough). The changes come as [`Change`]s.

use std::collections::HashSet;

use crate::process::identity::Identity;
use crate::process::tree::diff::{Change, diff};
use crate::process::tree::graph::{ProcessNode, Snapshot, TreeError};
use crate::process::tree::scan::{ScanOptions, Scanner};

/// What one [`Subtree::update`] did, for logs and benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UpdateStats {
    /// Pids in the listing.
    pub listed: usize,
    /// `stat` files read.
    pub stat_reads: usize,
    /// `environ` files read.
    pub environ_reads: usize,
}

/// What [`Subtree::born`] found of the processes announced as born.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Newborns {
    /// Each one added: a [`Change::Spawned`], parents before their children.
    pub changes: Vec<Change>,
    /// The identity of each pid asked for, in its order, where it is in the subtree now (added,
    /// or there already).
    pub identities: Vec<Option<Identity>>,
    /// Some could not be added (ended already, or under a parent the subtree does not hold):
    /// only an update can say where their children went.
    pub missed: bool,
}

/// A root process and its descendants, kept current from listing changes.
///
/// its configuration asks). A process announced as born under a member is added alone
/// ([`Subtree::born`]: one `stat` read, no listing). An update lists
/// `/proc` once ([`Scanner::relist`]) and reads `stat` only for
///
/// - the pids that appeared since the last update (new processes, or pids now held by another),
/// - the parents of the subtree (the processes with a child in it),
/// - the children of a parent that vanished or is now a zombie: the only processes the kernel
///   can have reparented, since a parent changes only when the parent exits (at its exit, not
///   at its reaping, hence the zombie check).
///
/// Every other process of the subtree is as it was; a process outside it that did not appear
/// anew is not read at all, since a process outside can never enter it (it can only be
/// reparented to one of its own ancestors, or to init). The cost of an update is therefore that
/// of the changes, not of the machine. The first update reads everything.
///
/// The changes between two updates come as [`Change`]s (the tree's own diff). A process that
/// leaves the subtree while alive is reported as [`Change::Reparented`] to its parent outside.
///
/// Environment entries (those starting with the prefix the subtree was made with) are read once
/// per identity, and only for the processes whose lineage may have to be learnt from them: new
/// children of the root, and processes that changed parent. One caught in the middle of an
/// `execve` ([`ProcessNode::in_exec`]), or whose read met one, has no environment to read yet: its
/// `stat` is read again at each update ([`Subtree::pending_environ`] counts them) and its
/// environment once it is out.
#[derive(Debug)]
pub struct Subtree {
    scanner: Scanner,
    root: i32,
    env_prefix: Vec<u8>,
    snapshot: Snapshot,
    env_read: HashSet<Identity>,
    /// Processes whose environment is wanted but was not readable yet (caught in an `execve`).
    env_pending: HashSet<Identity>,
}

impl Subtree {
    /// The subtree of `root`, empty until the first [`Subtree::update`]. Command lines are not
    /// read; environment entries starting with `env_prefix` are (see the module docs).
    pub fn new(root: i32, env_prefix: &[u8], opts: ScanOptions) -> Result<Subtree, TreeError> {
        let scanner = Scanner::new(ScanOptions {
            cmdline: false,
            ..opts
        })?;
        Ok(Subtree {
            scanner,
            root,
            env_prefix: env_prefix.to_vec(),
            snapshot: Snapshot::default(),
            env_read: HashSet::new(),
            env_pending: HashSet::new(),
        })
    }

    /// The `NSpid` of `pid` ([`Scanner::read_nspid`]), read through this subtree's `/proc`.
    pub fn read_nspid(&mut self, pid: i32) -> Option<Vec<i32>> {
        self.scanner.read_nspid(pid)
    }

    /// The subtree as of the last update (the root included).
    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    /// Says that the lineage of `identity` is known (a process the caller launched): its
    /// environment is not read, even as a new child of the root.
    pub fn known(&mut self, identity: Identity) {
        self.env_read.insert(identity);
    }

    /// How many processes' environments are wanted but could not be read yet: they were in the
    /// middle of an `execve` at the last update. The next update reads them again.
    pub fn pending_environ(&self) -> usize {
        self.env_pending.len()
    }

    /// Adds the processes `pids` (in birth order), just born under a member of the subtree or
    /// under one of them, each read alone: no listing. One that has ended already, is a zombie,
    /// or whose parent is not in the subtree (nor among those before it) is not added, and
    /// [`Newborns::missed`] says so. A new child of the root is added only when its lineage is
    /// known ([`Subtree::known`]: a launch of the caller's); another one needs its environment,
    /// which only an update reads.
    pub fn born(&mut self, pids: &[i32]) -> Newborns {
        let fresh = self.scanner.scan_pids(pids);
        let root = self.snapshot.identity_of(self.root);
        let mut out = Newborns::default();
        let mut added: Vec<ProcessNode> = Vec::new();
        for &pid in pids {
            let Some(n) = fresh.by_pid(pid).filter(|n| !n.is_zombie()) else {
                out.missed = true;
                out.identities.push(None);
                continue;
            };
            if self.snapshot.contains(&n.identity) || added.iter().any(|a| a.identity == n.identity)
            {
                out.identities.push(Some(n.identity));
                continue;
            }
            let parent = self
                .snapshot
                .by_pid(n.ppid)
                .or_else(|| added.iter().find(|a| a.pid == n.ppid))
                .filter(|p| !p.is_zombie() && p.start_time <= n.start_time)
                .map(|p| p.identity);
            let unknown_lineage = parent == root && !self.env_read.contains(&n.identity);
            if parent.is_none() || unknown_lineage {
                out.missed = true;
                out.identities.push(None);
                continue;
            }
            let mut node = n.clone();
            node.parent = parent;
            out.changes.push(Change::Spawned {
                identity: node.identity,
                parent,
                comm: node.comm.clone(),
            });
            out.identities.push(Some(node.identity));
            added.push(node);
        }
        if !added.is_empty() {
            let stats = self.snapshot.stats;
            let mut nodes: Vec<ProcessNode> = self.snapshot.nodes().cloned().collect();
            nodes.extend(added);
            self.snapshot = Snapshot::from_nodes(nodes);
            self.snapshot.stats = stats;
        }
        out
    }

    /// Reads what changed and returns the changes since the last update, in the order of
    /// [`diff`]. Fails when `/proc` cannot be listed, or when the root is not a process.
    // Long: one pass of the update, its steps sharing the listing and the diff.
    pub fn update(&mut self) -> Result<(Vec<Change>, UpdateStats), TreeError> {
        let relisting = self.scanner.relist()?;
        let vanished: HashSet<i32> = relisting.vanished.iter().copied().collect();
        // Read the new pids and every parent of the subtree (a parent that exited reparented
        // its children at once, even while it waits, a zombie, to be reaped), and whatever was
        // caught in an exec with its environment wanted.
        let mut first: Vec<i32> = relisting.appeared;
        first.extend(
            self.snapshot
                .nodes()
                .filter(|n| !vanished.contains(&n.pid))
                .filter(|n| {
                    !self.snapshot.children(&n.identity).is_empty()
                        || self.env_pending.contains(&n.identity)
                })
                .map(|n| n.pid),
        );
        first.sort_unstable();
        first.dedup();
        let fresh = self.scanner.scan_pids(&first);
        let dead: HashSet<i32> = vanished
            .iter()
            .copied()
            .chain(
                first
                    .iter()
                    .copied()
                    .filter(|&p| fresh.by_pid(p).is_none_or(ProcessNode::is_zombie)),
            )
            .collect();
        // The children of a dead parent are the only other processes that can have moved.
        let mut second = Vec::new();
        let mut nodes = Vec::with_capacity(self.snapshot.len() + first.len());
        for n in self.snapshot.nodes() {
            if vanished.contains(&n.pid) || fresh.contains(&n.identity) {
                continue;
            }
            if dead.contains(&n.ppid) {
                second.push(n.pid);
            } else {
                nodes.push(n.clone());
            }
        }
        let again = self.scanner.scan_pids(&second);
        let mut stats = UpdateStats {
            listed: self.scanner.listed(),
            stat_reads: first.len() + second.len(),
            environ_reads: 0,
        };
        for mut n in fresh.nodes().chain(again.nodes()).cloned() {
            if let Some(old) = self.snapshot.get(&n.identity) {
                n.environ = old.environ.clone();
                if n.ppid == old.ppid {
                    // Same parent: keep its identity even when the parent was not read again
                    // (the root's parent, outside the subtree).
                    n.parent = old.parent;
                }
            }
            nodes.push(n);
        }
        let all = Snapshot::from_nodes(nodes);
        let (mut sub, changes) = follow(&self.snapshot, &all, self.root)?;
        // Environment, once per identity: new children of the root, and moved processes; once
        // out of its exec for one caught in it.
        let root_id = sub.identity_of(self.root);
        let old = &self.snapshot;
        let env_read = &self.env_read;
        let pending = std::mem::take(&mut self.env_pending);
        let (caught, mut want): (Vec<&mut ProcessNode>, Vec<&mut ProcessNode>) = sub
            .nodes_mut()
            .filter(|n| !env_read.contains(&n.identity))
            .filter(|n| {
                pending.contains(&n.identity)
                    || match old.get(&n.identity) {
                        None => n.parent == root_id,
                        Some(o) => o.parent != n.parent,
                    }
            })
            .partition(|n| n.in_exec);
        self.env_pending = caught.iter().map(|n| n.identity).collect();
        if !want.is_empty() {
            stats.environ_reads = want.len();
            self.scanner.read_environ(&mut want, &self.env_prefix);
            for n in &want {
                if n.in_exec {
                    // Its read met an exec: read again once it is out.
                    self.env_pending.insert(n.identity);
                } else {
                    self.env_read.insert(n.identity);
                }
            }
        }
        self.env_read.retain(|id| sub.contains(id));
        sub.stats = fresh.stats;
        self.snapshot = sub;
        Ok((changes, stats))
    }
}

/// The subtree of `root` in `all`, and the changes from `old` (the previous subtree) to it. A
/// process of `old` that is still in `all` but no longer below `root` is reported as
/// [`Change::Reparented`] to its parent outside (None when that parent is not in `all`).
pub fn follow(
    old: &Snapshot,
    all: &Snapshot,
    root: i32,
) -> Result<(Snapshot, Vec<Change>), TreeError> {
    let sub = all.subtree(root)?;
    let left: Vec<ProcessNode> = old
        .nodes()
        .filter(|n| !sub.contains(&n.identity))
        .filter_map(|n| all.get(&n.identity).cloned())
        .collect();
    let changes = if left.is_empty() {
        diff(old, &sub)
    } else {
        let mut view: Vec<ProcessNode> = sub.nodes().cloned().collect();
        view.extend(left);
        diff(old, &Snapshot::from_nodes(view))
    };
    Ok((sub, changes))
}
