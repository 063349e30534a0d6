//! Changes between two snapshots.
//!
//! Owns [`Change`], the events the supervisor and the dashboard consume, and [`diff`], which
//! finds them. Processes are matched by [`Identity`], never by pid alone: a pid that another
//! process took between two snapshots is an `Exited` and a `Spawned`, never an exec.
//!
//! In JSON (serde), a change is an object tagged by `"change"`; identities are `{pid,
//! start_time}` objects, as in all foster's JSON (`docs/json.md`); names and arguments are
//! strings, exact when their bytes are UTF-8, otherwise with U+FFFD in place of the bad bytes
//! (the tree's JSON keeps the lossless form).

use serde::{Serialize, Serializer};

use crate::process::identity::Identity;
use crate::process::tree::graph::{ProcessNode, Snapshot};

fn lossy<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&String::from_utf8_lossy(bytes))
}

fn lossy_args<S: Serializer>(args: &[Vec<u8>], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(args.iter().map(|a| String::from_utf8_lossy(a)))
}

/// One change between two snapshots.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "change", rename_all = "snake_case")]
pub enum Change {
    /// A process that was not in the old snapshot.
    Spawned {
        identity: Identity,
        /// Its parent, when the parent is in the new snapshot.
        parent: Option<Identity>,
        #[serde(serialize_with = "lossy")]
        comm: Vec<u8>,
    },
    /// A process of the old snapshot that is not in the new one (reaped, or its pid reused).
    Exited {
        identity: Identity,
        #[serde(serialize_with = "lossy")]
        comm: Vec<u8>,
    },
    /// A process that is a zombie now and was not before (or is new and already a zombie): it
    /// exited and its parent has not reaped it yet.
    BecameZombie {
        identity: Identity,
        /// The parent that has yet to reap it.
        parent: Option<Identity>,
        #[serde(serialize_with = "lossy")]
        comm: Vec<u8>,
    },
    /// The name or the command line changed under the same identity (an `execve`, or a rename).
    Execd {
        identity: Identity,
        #[serde(serialize_with = "lossy")]
        old_comm: Vec<u8>,
        #[serde(serialize_with = "lossy")]
        new_comm: Vec<u8>,
        #[serde(serialize_with = "lossy_args")]
        old_cmdline: Vec<Vec<u8>>,
        #[serde(serialize_with = "lossy_args")]
        new_cmdline: Vec<Vec<u8>>,
    },
    /// The same process has a new parent: its parent died and it was adopted by the nearest
    /// subreaper or by init. `None` is a parent outside the snapshot.
    Reparented {
        identity: Identity,
        from: Option<Identity>,
        to: Option<Identity>,
    },
}

impl Change {
    /// The identity the change is about.
    pub fn identity(&self) -> Identity {
        match self {
            Change::Spawned { identity, .. }
            | Change::Exited { identity, .. }
            | Change::BecameZombie { identity, .. }
            | Change::Execd { identity, .. }
            | Change::Reparented { identity, .. } => *identity,
        }
    }
}

/// The changes from `old` to `new`, in this order: exits (by pid), spawns (by start time, so
/// parents come before their children), then for processes in both, by pid: became zombie,
/// exec'd, reparented. A process can have several changes.
// Long: one arm per kind of change, kept side by side.
pub fn diff(old: &Snapshot, new: &Snapshot) -> Vec<Change> {
    let mut changes = Vec::new();

    let mut exited: Vec<&ProcessNode> =
        old.nodes().filter(|n| !new.contains(&n.identity)).collect();
    exited.sort_unstable_by_key(|n| n.pid);
    changes.extend(exited.into_iter().map(|n| Change::Exited {
        identity: n.identity,
        comm: n.comm.clone(),
    }));

    let mut spawned: Vec<&ProcessNode> =
        new.nodes().filter(|n| !old.contains(&n.identity)).collect();
    spawned.sort_unstable_by_key(|n| (n.start_time, n.pid));
    for n in spawned {
        changes.push(Change::Spawned {
            identity: n.identity,
            parent: n.parent,
            comm: n.comm.clone(),
        });
        if n.is_zombie() {
            changes.push(Change::BecameZombie {
                identity: n.identity,
                parent: n.parent,
                comm: n.comm.clone(),
            });
        }
    }

    let mut both: Vec<(&ProcessNode, &ProcessNode)> = new
        .nodes()
        .filter_map(|n| old.get(&n.identity).map(|o| (o, n)))
        .collect();
    both.sort_unstable_by_key(|(_, n)| n.pid);
    for (o, n) in both {
        if n.is_zombie() && !o.is_zombie() {
            changes.push(Change::BecameZombie {
                identity: n.identity,
                parent: n.parent,
                comm: n.comm.clone(),
            });
        }
        // A zombie's command line is gone with its memory: that is not an exec.
        let args_changed = !o.is_zombie()
            && !n.is_zombie()
            && !o.cmdline.is_empty()
            && !n.cmdline.is_empty()
            && o.cmdline != n.cmdline;
        if o.comm != n.comm || args_changed {
            changes.push(Change::Execd {
                identity: n.identity,
                old_comm: o.comm.clone(),
                new_comm: n.comm.clone(),
                old_cmdline: o.cmdline.to_vec(),
                new_cmdline: n.cmdline.to_vec(),
            });
        }
        let moved = match (o.parent, n.parent) {
            (Some(a), Some(b)) => a != b,
            (None, None) => o.ppid != n.ppid,
            _ => true,
        };
        if moved {
            changes.push(Change::Reparented {
                identity: n.identity,
                from: o.parent,
                to: n.parent,
            });
        }
    }
    changes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(pid: i32, start_time: u64) -> Identity {
        Identity { pid, start_time }
    }

    fn base() -> Vec<ProcessNode> {
        vec![
            ProcessNode::new(1, 0, 1, b"init"),
            ProcessNode::new(10, 1, 5, b"sup"),
            ProcessNode::new(11, 10, 6, b"mid"),
            ProcessNode::new(12, 11, 7, b"leaf"),
            ProcessNode::new(13, 10, 8, b"worker").with_cmdline(&["worker", "--old"]),
            ProcessNode::new(14, 10, 9, b"reused"),
        ]
    }

    #[test]
    fn identical_snapshots_have_no_changes() {
        let a = Snapshot::from_nodes(base());
        assert_eq!(diff(&a, &a), vec![]);
    }

    #[test]
    fn every_kind_of_change() {
        let old = Snapshot::from_nodes(base());
        let mut nodes = base();
        // 11 exits; its child 12 is adopted by the subreaper 10.
        nodes.retain(|n| n.pid != 11);
        nodes.iter_mut().find(|n| n.pid == 12).unwrap().ppid = 10;
        // 13 exec's: same identity, new arguments, new name.
        let w = nodes.iter_mut().find(|n| n.pid == 13).unwrap();
        *w = ProcessNode::new(13, 10, 8, b"sleep").with_cmdline(&["sleep", "9"]);
        // Pid 14 is reused by another process (new start time), which is already a zombie.
        let r = nodes.iter_mut().find(|n| n.pid == 14).unwrap();
        *r = ProcessNode::new(14, 1, 50, b"reused").with_state(b'Z');
        // 20 is new; 10 becomes a zombie.
        nodes.push(ProcessNode::new(20, 10, 40, b"new\xff"));
        nodes.iter_mut().find(|n| n.pid == 10).unwrap().state = b'Z';
        let new = Snapshot::from_nodes(nodes);

        let changes = diff(&old, &new);
        assert_eq!(
            changes,
            vec![
                Change::Exited {
                    identity: id(11, 6),
                    comm: b"mid".to_vec()
                },
                Change::Exited {
                    identity: id(14, 9),
                    comm: b"reused".to_vec()
                },
                Change::Spawned {
                    identity: id(20, 40),
                    parent: Some(id(10, 5)),
                    comm: b"new\xff".to_vec()
                },
                Change::Spawned {
                    identity: id(14, 50),
                    parent: Some(id(1, 1)),
                    comm: b"reused".to_vec()
                },
                Change::BecameZombie {
                    identity: id(14, 50),
                    parent: Some(id(1, 1)),
                    comm: b"reused".to_vec()
                },
                Change::BecameZombie {
                    identity: id(10, 5),
                    parent: Some(id(1, 1)),
                    comm: b"sup".to_vec()
                },
                Change::Reparented {
                    identity: id(12, 7),
                    from: Some(id(11, 6)),
                    to: Some(id(10, 5))
                },
                Change::Execd {
                    identity: id(13, 8),
                    old_comm: b"worker".to_vec(),
                    new_comm: b"sleep".to_vec(),
                    old_cmdline: vec![b"worker".to_vec(), b"--old".to_vec()],
                    new_cmdline: vec![b"sleep".to_vec(), b"9".to_vec()],
                },
            ]
        );
    }

    #[test]
    fn zombie_losing_its_cmdline_is_not_an_exec() {
        let old = Snapshot::from_nodes(vec![
            ProcessNode::new(5, 0, 1, b"x").with_cmdline(&["x", "1"]),
        ]);
        let new = Snapshot::from_nodes(vec![ProcessNode::new(5, 0, 1, b"x").with_state(b'Z')]);
        assert_eq!(
            diff(&old, &new),
            vec![Change::BecameZombie {
                identity: id(5, 1),
                parent: None,
                comm: b"x".to_vec()
            }]
        );
    }

    #[test]
    fn serializes_tagged_with_lossy_names() {
        let c = Change::Execd {
            identity: id(13, 8),
            old_comm: b"a\xffb".to_vec(),
            new_comm: b"\x1b]0;x\x07".to_vec(),
            old_cmdline: vec![],
            new_cmdline: vec![b"sleep".to_vec()],
        };
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(v["change"], "execd");
        assert_eq!(v["identity"]["pid"], 13);
        assert_eq!(v["old_comm"], "a\u{fffd}b");
        assert_eq!(v["new_comm"], "\u{1b}]0;x\u{7}");
        assert_eq!(v["new_cmdline"][0], "sleep");
        let r = Change::Reparented {
            identity: id(1, 2),
            from: None,
            to: Some(id(3, 4)),
        };
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["change"], "reparented");
        assert!(v["from"].is_null());
        assert_eq!(v["to"]["start_time"], 4);
    }
}
