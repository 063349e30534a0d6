//! The process tree as a graph: the one tree structure of foster.
//!
//! Owns [`Forest`], a petgraph [`StableGraph`] of processes keyed by [`Identity`], edges running
//! from parent to child, children kept in an order chosen when it is built; its queries are
//! petgraph's own traversals (`neighbors_directed`, [`Dfs`] for a subtree, a [`Dfs`] over the
//! [`Reversed`] graph for the ancestors). [`Snapshot`] is one reading of `/proc`: a forest of
//! [`ProcessNode`]s, children by pid, with a map from pid to identity; a root is a process whose
//! parent is pid 0 or not in the snapshot. [`Snapshot::subtree`] takes the part below any pid as
//! a snapshot of its own. The dashboard's model is a forest of its own nodes
//! (`crate::top::model`), built by the same code, and refreshed in place at each reading
//! ([`Forest::refresh`]: a node of both keeps its slot; the edges are laid again only when a
//! node came, went or changed parents).

use std::io;
use std::ops::Index;
use std::path::PathBuf;
use std::sync::Arc;

use petgraph::Direction;
use petgraph::stable_graph::{NodeIndex, StableGraph};
use petgraph::visit::{Dfs, Reversed, Walker};
use rustc_hash::FxHashMap;

use crate::process::identity::Identity;

/// One process as one scan saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessNode {
    /// Pid and start time: the key of the node.
    pub identity: Identity,
    pub pid: i32,
    /// The parent pid as the kernel reported it (0 for PID 1 and kernel thread roots).
    pub ppid: i32,
    /// The parent's identity when the parent was in the scan, else `None`.
    pub parent: Option<Identity>,
    /// Process group.
    pub pgrp: i32,
    pub session: i32,
    /// `R`, `S`, `D`, `Z`, `T`, `t`, `X`, `I`, ...
    pub state: u8,
    /// Owner of `/proc/<pid>` (the effective uid, or root for a non-dumpable process).
    pub uid: u32,
    /// Raw name (field 2 of `stat`), at most 15 bytes, not necessarily UTF-8.
    pub comm: Vec<u8>,
    /// Raw arguments (`/proc/<pid>/cmdline` split at NUL); empty for kernel threads, zombies,
    /// unreadable files, and scans that did not ask for it. Shared between scans.
    pub cmdline: Arc<[Vec<u8>]>,
    /// Some `NAME=VALUE` entries of `/proc/<pid>/environ`: empty unless the scan's user asked
    /// for them ([`crate::process::tree::Scanner::read_environ`]).
    pub environ: Arc<[Vec<u8>]>,
    /// Clock ticks after boot (field 22 of `stat`).
    pub start_time: u64,
    pub num_threads: i64,
    /// Resident memory in bytes.
    pub rss_bytes: u64,
    /// CPU time in clock ticks, user plus system.
    pub cpu_ticks: u64,
    /// A kernel thread (`PF_KTHREAD`): no command line, no memory of its own.
    pub kernel_thread: bool,
    /// Caught in the middle of an `execve`: the new program's memory is in place (and, from a
    /// point on, its name) but not yet its argument and environment areas, so its command line
    /// and environment read empty for now, and whatever was read of them must be read again.
    /// Seen from `stat`: the code address (field 26) is still 0 in a process that has memory
    /// and is not exiting. Only known where `stat` shows the addresses (this user's processes,
    /// or any as root); false otherwise.
    pub in_exec: bool,
}

impl ProcessNode {
    /// A node with the given pid, parent pid, start time and name, every other field neutral
    /// (state `S`). For building fixtures by hand.
    pub fn new(pid: i32, ppid: i32, start_time: u64, comm: &[u8]) -> ProcessNode {
        ProcessNode {
            identity: Identity { pid, start_time },
            pid,
            ppid,
            parent: None,
            pgrp: pid,
            session: pid,
            state: b'S',
            uid: 0,
            comm: comm.to_vec(),
            cmdline: Arc::from(Vec::new()),
            environ: Arc::from(Vec::new()),
            start_time,
            num_threads: 1,
            rss_bytes: 0,
            cpu_ticks: 0,
            kernel_thread: false,
            in_exec: false,
        }
    }

    /// The same node with these arguments.
    pub fn with_cmdline<A: AsRef<[u8]>>(mut self, args: &[A]) -> ProcessNode {
        self.cmdline = byte_strings(args);
        self
    }

    /// The same node in this state.
    pub fn with_state(mut self, state: u8) -> ProcessNode {
        self.state = state;
        self
    }

    /// The same node caught in the middle of an `execve` ([`ProcessNode::in_exec`]).
    pub fn caught_in_exec(mut self) -> ProcessNode {
        self.in_exec = true;
        self
    }

    /// The value of the environment variable `name` among [`ProcessNode::environ`].
    pub fn env_var(&self, name: &[u8]) -> Option<&[u8]> {
        self.environ.iter().find_map(|v| {
            v.strip_prefix(name)
                .and_then(|rest| rest.strip_prefix(b"="))
        })
    }

    /// The same node with these environment entries (`NAME=VALUE`).
    pub fn with_environ<A: AsRef<[u8]>>(mut self, vars: &[A]) -> ProcessNode {
        self.environ = byte_strings(vars);
        self
    }

    /// True for a zombie (`Z`) or a dead (`X`) process.
    pub fn is_zombie(&self) -> bool {
        matches!(self.state, b'Z' | b'X')
    }
}

fn byte_strings<A: AsRef<[u8]>>(items: &[A]) -> Arc<[Vec<u8>]> {
    items
        .iter()
        .map(|a| a.as_ref().to_vec())
        .collect::<Vec<_>>()
        .into()
}

/// Why a tree could not be read or a subtree taken.
#[derive(Debug, thiserror::Error)]
pub enum TreeError {
    /// No process with this pid is in the snapshot.
    #[error("no process with pid {0}")]
    NoSuchProcess(i32),
    /// The `/proc` directory itself could not be opened or listed.
    #[error("cannot list {}: {source}", path.display())]
    Proc { path: PathBuf, source: io::Error },
}

/// What a node of a [`Forest`] says about its place: its own key and its parent's.
pub trait Member {
    /// The node's key.
    fn identity(&self) -> Identity;
    /// Its parent's key, when it has one (the parent need not be in the forest).
    fn parent(&self) -> Option<Identity>;
}

impl Member for ProcessNode {
    fn identity(&self) -> Identity {
        self.identity
    }
    fn parent(&self) -> Option<Identity> {
        self.parent
    }
}

/// Processes as a forest: a petgraph graph keyed by [`Identity`], edges from parent to child.
/// A node whose parent is in the forest (and is not itself) is that parent's child; any other
/// node is a root. Roots and each node's children are listed in the order chosen when the
/// forest was built.
#[derive(Debug, Clone)]
pub struct Forest<N> {
    graph: StableGraph<N, ()>,
    /// By identity, hashed with rustc-hash's Fx hasher: pids and start times are numbers the kernel
    /// assigns, and SipHash's resistance to chosen keys cost a tenth of a dashboard's refresh.
    index: FxHashMap<Identity, NodeIndex>,
    roots: Vec<NodeIndex>,
    /// By node index: the [`Forest::refresh`] that last had the node (stale entries for nodes
    /// removed since).
    stamps: Vec<u64>,
    refreshes: u64,
}

impl<N> Default for Forest<N> {
    fn default() -> Self {
        Forest {
            graph: StableGraph::default(),
            index: FxHashMap::default(),
            roots: Vec::new(),
            stamps: Vec::new(),
            refreshes: 0,
        }
    }
}

impl<N: Member> Forest<N> {
    /// The forest of `nodes`, roots and children listed by `key`, ascending. Of two nodes with
    /// the same identity, the last is kept.
    pub fn new<K: Ord>(nodes: Vec<N>, key: impl Fn(&N) -> K) -> Forest<N> {
        let mut graph = StableGraph::with_capacity(nodes.len(), nodes.len());
        let mut index = FxHashMap::with_capacity_and_hasher(nodes.len(), Default::default());
        for n in nodes {
            let id = n.identity();
            let ix = graph.add_node(n);
            if let Some(old) = index.insert(id, ix) {
                graph.remove_node(old);
            }
        }
        let mut forest = Forest {
            graph,
            index,
            roots: Vec::new(),
            stamps: Vec::new(),
            refreshes: 0,
        };
        forest.link(key);
        forest
    }

    /// Makes this the forest of `nodes`, as [`Forest::new`] would, in place: a node whose
    /// identity is here already takes its place (`carry` moves what the caller keeps of the
    /// node it replaces into it), a node missing from `nodes` goes, a new one comes. The edges
    /// and roots are laid again only when a node came, went or changed parents; the return
    /// says whether they were. `key` must depend on the identity alone (as it does for the
    /// forests of foster: pid, or start time and pid), so that a node kept keeps its place.
    pub fn refresh<K: Ord>(
        &mut self,
        nodes: impl IntoIterator<Item = N>,
        key: impl Fn(&N) -> K,
        mut carry: impl FnMut(&mut N, N),
    ) -> bool {
        self.refreshes += 1;
        let now = self.refreshes;
        let mut relink = false;
        // Nodes of this refresh found here or added.
        let mut had = 0;
        for n in nodes {
            let id = n.identity();
            match self.index.get(&id) {
                Some(&ix) => {
                    // A second node of one identity (the last is kept) relinks too.
                    let first = self.stamp(ix, now);
                    relink |= !first || self.graph[ix].parent() != n.parent();
                    let old = std::mem::replace(&mut self.graph[ix], n);
                    carry(&mut self.graph[ix], old);
                }
                None => {
                    let ix = self.graph.add_node(n);
                    self.index.insert(id, ix);
                    self.stamp(ix, now);
                    relink = true;
                }
            }
            had += 1;
        }
        if self.index.len() != had {
            let stamps = &self.stamps;
            let gone: Vec<NodeIndex> = self
                .graph
                .node_indices()
                .filter(|ix| stamps.get(ix.index()) != Some(&now))
                .collect();
            for ix in gone {
                if let Some(n) = self.graph.remove_node(ix) {
                    self.index.remove(&n.identity());
                }
            }
            relink = true;
        }
        if relink {
            self.graph.clear_edges();
            self.link(key);
        }
        relink
    }

    /// Marks the node `ix` as had by the refresh `now`; false when it was already.
    fn stamp(&mut self, ix: NodeIndex, now: u64) -> bool {
        let i = ix.index();
        if self.stamps.len() <= i {
            self.stamps.resize(i + 1, 0);
        }
        std::mem::replace(&mut self.stamps[i], now) != now
    }

    /// Lays the edges (the forest has none) and lists the roots, by `key`.
    fn link<K: Ord>(&mut self, key: impl Fn(&N) -> K) {
        let graph = &mut self.graph;
        let mut order: Vec<(K, NodeIndex)> = graph
            .node_indices()
            .map(|ix| (key(&graph[ix]), ix))
            .collect();
        order.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        // Edges go in in order; petgraph lists a node's edges newest first, so `children`
        // reverses them and a depth-first walk (which takes the last pushed first) goes in order.
        self.roots.clear();
        for (_, ix) in order {
            let own = graph[ix].identity();
            match graph[ix]
                .parent()
                .filter(|p| *p != own)
                .and_then(|p| self.index.get(&p).copied())
            {
                Some(parent) => {
                    graph.add_edge(parent, ix, ());
                }
                None => self.roots.push(ix),
            }
        }
    }
}

impl<N> Forest<N> {
    /// The underlying graph: edges run from parent to child.
    pub fn graph(&self) -> &StableGraph<N, ()> {
        &self.graph
    }

    /// How many nodes the forest holds.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// True when the forest holds no node.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// The node with this identity.
    pub fn get(&self, id: &Identity) -> Option<&N> {
        self.index.get(id).map(|&ix| &self.graph[ix])
    }

    /// The node with this identity, mutably. Its identity and parent are the forest's keys:
    /// changing them does not move it.
    pub fn get_mut(&mut self, id: &Identity) -> Option<&mut N> {
        self.index.get(id).map(|&ix| &mut self.graph[ix])
    }

    /// True when the node with this identity is in the forest.
    pub fn contains_key(&self, id: &Identity) -> bool {
        self.index.contains_key(id)
    }

    /// Every identity, in no particular order.
    pub fn keys(&self) -> impl Iterator<Item = &Identity> {
        self.index.keys()
    }

    /// Every node, in no particular order.
    pub fn values(&self) -> impl Iterator<Item = &N> {
        self.graph.node_weights()
    }

    /// Every node, mutably, in no particular order (see [`Forest::get_mut`]).
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut N> {
        self.graph.node_weights_mut()
    }

    /// Takes the nodes out, in no particular order.
    pub fn into_values(self) -> impl Iterator<Item = N> {
        self.graph.into_nodes_edges_iters().0.map(|n| n.weight)
    }

    /// Hands each node the identities of its children, in order: for a node type that keeps
    /// them (the dashboard's rows are drawn from such a list).
    pub fn fill_children(&mut self, mut set: impl FnMut(&mut N, Vec<Identity>))
    where
        N: Member,
    {
        let indices: Vec<NodeIndex> = self.graph.node_indices().collect();
        for ix in indices {
            let mut kids: Vec<Identity> = self
                .graph
                .neighbors_directed(ix, Direction::Outgoing)
                .map(|c| self.graph[c].identity())
                .collect();
            kids.reverse();
            set(&mut self.graph[ix], kids);
        }
    }

    /// The roots, in order.
    pub fn roots(&self) -> impl Iterator<Item = &N> {
        self.roots.iter().map(|&ix| &self.graph[ix])
    }

    /// The children of `id`, in order (empty when `id` is not in the forest).
    pub fn children(&self, id: &Identity) -> Vec<&N> {
        let Some(&ix) = self.index.get(id) else {
            return Vec::new();
        };
        let mut v: Vec<&N> = self
            .graph
            .neighbors_directed(ix, Direction::Outgoing)
            .map(|c| &self.graph[c])
            .collect();
        v.reverse();
        v
    }

    /// The parent of `id`, when both are in the forest.
    pub fn parent(&self, id: &Identity) -> Option<&N> {
        let &ix = self.index.get(id)?;
        self.graph
            .neighbors_directed(ix, Direction::Incoming)
            .next()
            .map(|p| &self.graph[p])
    }

    /// The ancestors of `id` in the forest, nearest first (empty when `id` is not in it).
    pub fn ancestors(&self, id: &Identity) -> impl Iterator<Item = &N> {
        let start = self.index.get(id).copied();
        let up = Reversed(&self.graph);
        start
            .map(|ix| Dfs::new(up, ix).iter(up).skip(1))
            .into_iter()
            .flatten()
            .map(|ix| &self.graph[ix])
    }

    /// `id` and all its descendants, depth first, parents before their children, children in
    /// order (empty when `id` is not in the forest).
    pub fn descendants(&self, id: &Identity) -> impl Iterator<Item = &N> {
        let start = self.index.get(id).copied();
        start
            .map(|ix| Dfs::new(&self.graph, ix).iter(&self.graph))
            .into_iter()
            .flatten()
            .map(|ix| &self.graph[ix])
    }
}

impl<N> Index<&Identity> for Forest<N> {
    type Output = N;

    /// The node with this identity; panics when it is not in the forest, as a map's index does.
    fn index(&self, id: &Identity) -> &N {
        &self.graph[self.index[id]]
    }
}

/// Whether `parent`, the process holding `child`'s parent pid, is its parent: it did not start
/// after it (a later one holds a reused pid).
pub fn may_be_parent(parent: &Identity, child: &Identity) -> bool {
    parent.start_time <= child.start_time
}

/// One reading of the process tree.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    forest: Forest<ProcessNode>,
    by_pid: FxHashMap<i32, Identity>,
    /// What the scan that made this snapshot skipped (zero for hand-built ones).
    pub stats: ScanStats,
}

impl Snapshot {
    /// Builds a snapshot from nodes. A node's `parent` is resolved from its `ppid` when that pid
    /// is among the nodes and did not start after it (a reused pid is not a parent); otherwise
    /// the `parent` it came with is kept, so a subtree's root remembers its real parent.
    pub fn from_nodes(mut nodes: Vec<ProcessNode>) -> Snapshot {
        nodes.sort_unstable_by_key(|n| n.pid);
        nodes.dedup_by_key(|n| n.pid);
        let by_pid: FxHashMap<i32, Identity> = nodes.iter().map(|n| (n.pid, n.identity)).collect();
        for n in &mut nodes {
            if n.ppid > 0
                && let Some(p) = by_pid.get(&n.ppid)
                && may_be_parent(p, &n.identity)
            {
                n.parent = Some(*p);
            }
        }
        Snapshot {
            forest: Forest::new(nodes, |n| n.pid),
            by_pid,
            stats: ScanStats::default(),
        }
    }

    /// The processes as a forest, children by pid.
    pub fn forest(&self) -> &Forest<ProcessNode> {
        &self.forest
    }

    /// The underlying graph: edges run from parent to child.
    pub fn graph(&self) -> &StableGraph<ProcessNode, ()> {
        self.forest.graph()
    }

    /// How many processes the snapshot holds.
    pub fn len(&self) -> usize {
        self.forest.len()
    }

    /// True when the snapshot holds no process.
    pub fn is_empty(&self) -> bool {
        self.forest.is_empty()
    }

    /// The process with this identity.
    pub fn get(&self, id: &Identity) -> Option<&ProcessNode> {
        self.forest.get(id)
    }

    /// True when the process with this identity is in the snapshot.
    pub fn contains(&self, id: &Identity) -> bool {
        self.forest.contains_key(id)
    }

    /// The identity that held `pid` in this snapshot.
    pub fn identity_of(&self, pid: i32) -> Option<Identity> {
        self.by_pid.get(&pid).copied()
    }

    /// The process that held `pid` in this snapshot.
    pub fn by_pid(&self, pid: i32) -> Option<&ProcessNode> {
        self.identity_of(pid).and_then(|id| self.get(&id))
    }

    /// Every process, in no particular order.
    pub fn nodes(&self) -> impl Iterator<Item = &ProcessNode> {
        self.forest.values()
    }

    /// Takes the processes out, in no particular order.
    pub fn into_nodes(self) -> impl Iterator<Item = ProcessNode> {
        self.forest.into_values()
    }

    /// Every process, mutably, for filling in what a scan left out. The identity, pid and
    /// parent fields are the snapshot's keys: changing them breaks its maps.
    pub(crate) fn nodes_mut(&mut self) -> impl Iterator<Item = &mut ProcessNode> {
        self.forest.values_mut()
    }

    /// The roots (parent pid 0 or parent not in the snapshot), by pid.
    pub fn roots(&self) -> impl Iterator<Item = &ProcessNode> {
        self.forest.roots()
    }

    /// The children of `id`, by pid (empty when `id` is not in the snapshot).
    pub fn children(&self, id: &Identity) -> Vec<&ProcessNode> {
        self.forest.children(id)
    }

    /// The parent of `id`, when it is in the snapshot.
    pub fn parent(&self, id: &Identity) -> Option<&ProcessNode> {
        self.forest.parent(id)
    }

    /// The ancestors of `id` in the snapshot, nearest first.
    pub fn ancestors(&self, id: &Identity) -> impl Iterator<Item = &ProcessNode> {
        self.forest.ancestors(id)
    }

    /// `id` and its descendants, parents first, children by pid.
    pub fn descendants(&self, id: &Identity) -> impl Iterator<Item = &ProcessNode> {
        self.forest.descendants(id)
    }

    /// The process at `root_pid` and all its descendants, as a snapshot whose only root is it.
    /// The root keeps its real `ppid` and `parent`.
    pub fn subtree(&self, root_pid: i32) -> Result<Snapshot, TreeError> {
        let root = self
            .identity_of(root_pid)
            .ok_or(TreeError::NoSuchProcess(root_pid))?;
        let nodes = self.descendants(&root).cloned().collect();
        let mut sub = Snapshot::from_nodes(nodes);
        sub.stats = self.stats;
        Ok(sub)
    }
}

/// What one scan listed and what it skipped, and why.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ScanStats {
    /// Pid entries listed in `/proc`.
    pub listed: usize,
    /// Processes in the snapshot.
    pub read: usize,
    /// Listed but gone before their `stat` could be read (`ENOENT`, `ESRCH`, empty read).
    pub vanished: usize,
    /// `stat` not readable (`EACCES`, `EPERM`: another user's process under `hidepid`).
    pub denied: usize,
    /// `stat` read but not parseable, or another read error.
    pub failed: usize,
    /// In the snapshot, but its `cmdline` could not be read (shown empty).
    pub cmdline_unreadable: usize,
    /// Command lines read by this scan (the others came from the cache).
    pub cmdline_reads: usize,
    /// Processes whose previous reading stood, found not to have run
    /// ([`super::ScanOptions::reuse_idle`]).
    pub reused: usize,
}

impl ScanStats {
    /// Adds the counts of `other` (a part of the same scan).
    pub(super) fn add(&mut self, other: &ScanStats) {
        self.listed += other.listed;
        self.read += other.read;
        self.vanished += other.vanished;
        self.denied += other.denied;
        self.failed += other.failed;
        self.cmdline_unreadable += other.cmdline_unreadable;
        self.cmdline_reads += other.cmdline_reads;
        self.reused += other.reused;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture() -> Snapshot {
        Snapshot::from_nodes(vec![
            ProcessNode::new(1, 0, 10, b"init"),
            ProcessNode::new(2, 0, 11, b"kthreadd"),
            ProcessNode::new(30, 1, 20, b"b"),
            ProcessNode::new(20, 1, 21, b"a"),
            ProcessNode::new(40, 20, 30, b"c"),
            // Parent pid 50 is not in the snapshot.
            ProcessNode::new(60, 50, 40, b"orphan-view"),
            // Parent pid 70 started after it: a reused pid, not its parent.
            ProcessNode::new(70, 1, 99, b"young"),
            ProcessNode::new(80, 70, 50, b"old"),
        ])
    }

    #[test]
    fn roots_and_children_by_pid() {
        let s = fixture();
        let roots: Vec<i32> = s.roots().map(|n| n.pid).collect();
        assert_eq!(roots, vec![1, 2, 60, 80]);
        let init = s.identity_of(1).unwrap();
        let kids: Vec<i32> = s.children(&init).iter().map(|n| n.pid).collect();
        assert_eq!(kids, vec![20, 30, 70]);
        assert_eq!(s.parent(&s.identity_of(40).unwrap()).unwrap().pid, 20);
        assert_eq!(s.by_pid(80).unwrap().parent, None);
        assert_eq!(s.len(), 8);
    }

    #[test]
    fn subtree_keeps_descendants_and_real_parent() {
        let s = fixture();
        let sub = s.subtree(20).unwrap();
        let mut pids: Vec<i32> = sub.nodes().map(|n| n.pid).collect();
        pids.sort();
        assert_eq!(pids, vec![20, 40]);
        let roots: Vec<i32> = sub.roots().map(|n| n.pid).collect();
        assert_eq!(roots, vec![20]);
        assert_eq!(
            sub.by_pid(20).unwrap().parent,
            Some(Identity {
                pid: 1,
                start_time: 10
            })
        );
        assert_eq!(s.subtree(1).unwrap().len(), 5);
    }

    #[test]
    fn missing_root_is_named() {
        let e = fixture().subtree(12345).unwrap_err();
        assert!(matches!(e, TreeError::NoSuchProcess(12345)));
        assert_eq!(e.to_string(), "no process with pid 12345");
    }

    fn pids<'a>(it: impl Iterator<Item = &'a ProcessNode>) -> Vec<i32> {
        it.map(|n| n.pid).collect()
    }

    #[test]
    fn ancestors_and_descendants_walk_the_graph_in_order() {
        let s = fixture();
        let id = |pid| s.identity_of(pid).unwrap();
        assert_eq!(pids(s.ancestors(&id(40))), vec![20, 1]);
        assert_eq!(pids(s.ancestors(&id(1))), Vec::<i32>::new());
        // 80's parent pid 70 started after it: no parent, no ancestors.
        assert_eq!(pids(s.ancestors(&id(80))), Vec::<i32>::new());
        // Parents first, children by pid.
        assert_eq!(pids(s.descendants(&id(1))), vec![1, 20, 40, 30, 70]);
        assert_eq!(pids(s.descendants(&id(40))), vec![40]);
        let gone = Identity {
            pid: 999,
            start_time: 1,
        };
        assert_eq!(pids(s.descendants(&gone)), Vec::<i32>::new());
        assert_eq!(pids(s.ancestors(&gone)), Vec::<i32>::new());
        assert!(s.children(&gone).is_empty());
    }

    #[test]
    fn a_forest_lists_roots_and_children_by_its_key() {
        // Ordered by start time, not by pid: the dashboard's order.
        let nodes = vec![
            ProcessNode::new(1, 0, 10, b"init"),
            ProcessNode::new(9, 1, 20, b"old"),
            ProcessNode::new(3, 1, 30, b"young"),
            ProcessNode::new(5, 1, 25, b"middle"),
            ProcessNode::new(7, 0, 5, b"first-root"),
        ];
        let linked: Vec<ProcessNode> = nodes
            .into_iter()
            .map(|mut n| {
                n.parent = (n.ppid > 0).then_some(Identity {
                    pid: n.ppid,
                    start_time: 10,
                });
                n
            })
            .collect();
        let f = Forest::new(linked, |n| (n.start_time, n.pid));
        assert_eq!(pids(f.roots()), vec![7, 1]);
        let init = Identity {
            pid: 1,
            start_time: 10,
        };
        assert_eq!(pids(f.children(&init).into_iter()), vec![9, 5, 3]);
        assert_eq!(pids(f.descendants(&init)), vec![1, 9, 5, 3]);
        assert_eq!(f[&init].comm, b"init");
        assert_eq!(f.len(), 5);
        assert_eq!(f.parent(&f.children(&init)[0].identity).unwrap().pid, 1);
    }

    #[test]
    fn a_node_that_names_itself_as_parent_is_a_root() {
        let mut n = ProcessNode::new(4, 4, 10, b"self");
        n.parent = Some(n.identity);
        let f = Forest::new(vec![n.clone()], |n| n.pid);
        assert_eq!(pids(f.roots()), vec![4]);
        assert_eq!(pids(f.ancestors(&n.identity)), Vec::<i32>::new());
        assert_eq!(pids(f.descendants(&n.identity)), vec![4]);
    }
}
