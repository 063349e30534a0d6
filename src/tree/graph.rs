//! The snapshot: one reading of the process tree as a graph.
//!
//! Owns [`Snapshot`], a petgraph [`StableGraph`] whose nodes are [`ProcessNode`]s keyed by
//! [`Identity`] and whose edges run from parent to child, with maps from identity and from pid
//! to node. A root is a process whose parent is pid 0 or not in the snapshot. Children are always
//! listed by pid. [`Snapshot::subtree`] takes the part below any pid as a snapshot of its own.

use std::collections::HashMap;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use petgraph::Direction;
use petgraph::stable_graph::{NodeIndex, StableGraph};

use crate::identity::Identity;
use crate::tree::scan::ScanStats;

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
    /// for them ([`crate::tree::Scanner::read_environ`]).
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

/// One reading of the process tree.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    graph: StableGraph<ProcessNode, ()>,
    by_identity: HashMap<Identity, NodeIndex>,
    by_pid: HashMap<i32, Identity>,
    roots: Vec<NodeIndex>,
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
        let mut graph = StableGraph::with_capacity(nodes.len(), nodes.len());
        let mut by_identity = HashMap::with_capacity(nodes.len());
        let mut by_pid = HashMap::with_capacity(nodes.len());
        let mut pid_start = HashMap::with_capacity(nodes.len());
        for n in &nodes {
            pid_start.insert(n.pid, n.start_time);
        }
        for mut n in nodes {
            if n.ppid > 0 {
                if let Some(&start) = pid_start.get(&n.ppid) {
                    if start <= n.start_time {
                        n.parent = Some(Identity {
                            pid: n.ppid,
                            start_time: start,
                        });
                    }
                }
            }
            let id = n.identity;
            let ix = graph.add_node(n);
            by_identity.insert(id, ix);
            by_pid.insert(id.pid, id);
        }
        let mut roots = Vec::new();
        let indices: Vec<NodeIndex> = graph.node_indices().collect();
        for ix in indices {
            match graph[ix].parent.and_then(|p| by_identity.get(&p).copied()) {
                Some(parent_ix) => {
                    graph.add_edge(parent_ix, ix, ());
                }
                None => roots.push(ix),
            }
        }
        roots.sort_unstable_by_key(|&ix| graph[ix].pid);
        Snapshot {
            graph,
            by_identity,
            by_pid,
            roots,
            stats: ScanStats::default(),
        }
    }

    /// The underlying graph: edges run from parent to child.
    pub fn graph(&self) -> &StableGraph<ProcessNode, ()> {
        &self.graph
    }

    /// How many processes the snapshot holds.
    pub fn len(&self) -> usize {
        self.by_identity.len()
    }

    /// True when the snapshot holds no process.
    pub fn is_empty(&self) -> bool {
        self.by_identity.is_empty()
    }

    /// The process with this identity.
    pub fn get(&self, id: &Identity) -> Option<&ProcessNode> {
        self.by_identity.get(id).map(|&ix| &self.graph[ix])
    }

    /// True when the process with this identity is in the snapshot.
    pub fn contains(&self, id: &Identity) -> bool {
        self.by_identity.contains_key(id)
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
        self.graph.node_weights()
    }

    /// Every process, mutably, for filling in what a scan left out. The identity, pid and
    /// parent fields are the snapshot's keys: changing them breaks its maps.
    pub(crate) fn nodes_mut(&mut self) -> impl Iterator<Item = &mut ProcessNode> {
        self.graph.node_weights_mut()
    }

    /// The roots (parent pid 0 or parent not in the snapshot), by pid.
    pub fn roots(&self) -> impl Iterator<Item = &ProcessNode> {
        self.roots.iter().map(|&ix| &self.graph[ix])
    }

    /// The children of `id`, by pid (empty when `id` is not in the snapshot).
    pub fn children(&self, id: &Identity) -> Vec<&ProcessNode> {
        let Some(&ix) = self.by_identity.get(id) else {
            return Vec::new();
        };
        let mut v: Vec<&ProcessNode> = self
            .graph
            .neighbors_directed(ix, Direction::Outgoing)
            .map(|c| &self.graph[c])
            .collect();
        v.sort_unstable_by_key(|n| n.pid);
        v
    }

    /// The parent of `id`, when it is in the snapshot.
    pub fn parent(&self, id: &Identity) -> Option<&ProcessNode> {
        self.get(id)?.parent.and_then(|p| self.get(&p))
    }

    /// The process at `root_pid` and all its descendants, as a snapshot whose only root is it.
    /// The root keeps its real `ppid` and `parent`.
    pub fn subtree(&self, root_pid: i32) -> Result<Snapshot, TreeError> {
        let root = self
            .identity_of(root_pid)
            .ok_or(TreeError::NoSuchProcess(root_pid))?;
        let mut nodes = Vec::new();
        let mut stack = vec![self.by_identity[&root]];
        while let Some(ix) = stack.pop() {
            nodes.push(self.graph[ix].clone());
            stack.extend(self.graph.neighbors_directed(ix, Direction::Outgoing));
        }
        let mut sub = Snapshot::from_nodes(nodes);
        sub.stats = self.stats;
        Ok(sub)
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
}
