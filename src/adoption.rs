//! Expected identities and the classification of adoptions.
//!
//! Owns the [`Registry`] of every descendant foster has seen: its identity, the identity of the
//! parent it is expected to have, its generation (1 = a helper foster launched), the helper it
//! belongs to, and whether it is itself a subreaper (foster, a nested `foster run`, or a helper
//! declared `subreaper = true`). It is filled from launches ([`Registry::expect_launch`]) and
//! from the changes of foster's subtree ([`crate::tree::Subtree`]: [`Change::Spawned`],
//! [`Change::Exited`], [`Change::Reparented`]) that the supervisor reads when something of its
//! tree ended (a SIGCHLD, or a watched parent's pidfd), never on a timer.
//!
//! When a process turns up under a new parent, the registry computes the nearest living
//! ancestor subreaper it *should* have reached, walking the recorded expected parents (never
//! comparing with PID 1), and classifies the adoption ([`Classification`]).
//!
//! ## Nested supervisors
//!
//! A subreaper foster did not declare is recognised when an adoption reaches it, never by its
//! name or command line: the adopted process's `FOSTER_SUPERVISOR` names, by pid *and* start
//! time, the foster that launched its helper; when that identity is exactly the new parent, the
//! new parent is a foster supervising that process's lineage, hence a subreaper (a nested
//! `foster run` sets `PR_SET_CHILD_SUBREAPER` before it launches anything). A new parent that is
//! the init of a PID namespace (the last `NSpid` of its `/proc/<pid>/status` is 1) is a reaper
//! by the kernel's rules too, as a nested `foster run --contain` is.
//!
//! A process first seen already adopted (its parent died before any scan saw it) has no
//! recorded lineage. foster then reads its environment once: every helper foster launches
//! carries `FOSTER_SUPERVISOR=PID:STARTTIME` (the foster that launched it) and
//! `FOSTER_HELPER=NAME`, inherited by its descendants; the registry takes the helper as the
//! expected parent and generation 2 (a direct child of the helper), the common case.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::identity::Identity;
use crate::tree::{Change, ProcessNode, Snapshot};

/// Environment variable naming the foster that launched a helper (`PID:STARTTIME`).
pub const ENV_SUPERVISOR: &str = "FOSTER_SUPERVISOR";
/// Environment variable naming the helper a process descends from.
pub const ENV_HELPER: &str = "FOSTER_HELPER";

/// How an adoption compares with what the registry expected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Classification {
    /// The new parent is the nearest living ancestor subreaper, as expected.
    Expected,
    /// The new parent is inside the tree but is not the subreaper expected (an undeclared
    /// subreaper, or one foster did not know of).
    ForeignReaper,
    /// The new parent is outside foster's tree: the process escaped (e.g. to PID 1).
    Escaped,
    /// The new parent has the expected subreaper's pid but another start time: that pid now
    /// belongs to another process.
    PidReused,
}

impl Classification {
    /// Whether the adoption was the expected one.
    pub fn is_expected(self) -> bool {
        self == Classification::Expected
    }

    /// Its name for people (its JSON name with spaces): `expected`, `foreign reaper`, ...
    pub fn text(self) -> &'static str {
        match self {
            Classification::Expected => "expected",
            Classification::ForeignReaper => "foreign reaper",
            Classification::Escaped => "escaped",
            Classification::PidReused => "pid reused",
        }
    }
}

/// What the registry knows of one process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub identity: Identity,
    /// The parent it should have (None for foster itself).
    pub expected_parent: Option<Identity>,
    /// 0 for foster, 1 for a helper, 2 for a helper's child...
    pub generation: u32,
    /// The helper it belongs to (None for foster itself and untraceable processes).
    pub helper: Option<String>,
    /// Whether it is a subreaper (foster, a nested foster, a declared one).
    pub subreaper: bool,
    /// Whether its lineage was seen (false: inferred from its environment at adoption).
    pub lineage_seen: bool,
    /// Whether it is alive in foster's tree as far as the registry knows.
    pub alive: bool,
}

/// An adoption the registry noticed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Adoption {
    pub identity: Identity,
    pub helper: Option<String>,
    pub generation: u32,
    /// The parent it had when last seen (None when first seen already adopted).
    pub from: Option<Identity>,
    /// Its parent now.
    pub to: Identity,
    /// The nearest living ancestor subreaper it should have reached.
    pub expected: Identity,
    pub classification: Classification,
}

/// The registry of expected identities.
#[derive(Debug)]
pub struct Registry {
    me: Identity,
    records: HashMap<Identity, Record>,
    live_by_pid: HashMap<i32, Identity>,
    helpers: HashMap<String, Identity>,
}

impl Registry {
    /// A registry whose root is `me` (a subreaper: foster itself).
    pub fn new(me: Identity) -> Registry {
        let mut records = HashMap::new();
        records.insert(
            me,
            Record {
                identity: me,
                expected_parent: None,
                generation: 0,
                helper: None,
                subreaper: true,
                lineage_seen: true,
                alive: true,
            },
        );
        let mut live_by_pid = HashMap::new();
        live_by_pid.insert(me.pid, me);
        Registry {
            me,
            records,
            live_by_pid,
            helpers: HashMap::new(),
        }
    }

    /// foster's own identity.
    pub fn me(&self) -> Identity {
        self.me
    }

    /// Records a helper foster just launched.
    pub fn expect_launch(&mut self, identity: Identity, helper: &str, subreaper: bool) {
        self.helpers.insert(helper.to_string(), identity);
        self.live_by_pid.insert(identity.pid, identity);
        self.records.insert(
            identity,
            Record {
                identity,
                expected_parent: Some(self.me),
                generation: 1,
                helper: Some(helper.to_string()),
                subreaper,
                lineage_seen: true,
                alive: true,
            },
        );
    }

    /// The record of `identity`.
    pub fn get(&self, identity: &Identity) -> Option<&Record> {
        self.records.get(identity)
    }

    /// The live identity the last scan (or launch) saw at `pid`.
    pub fn identity_of_pid(&self, pid: i32) -> Option<Identity> {
        self.live_by_pid.get(&pid).copied()
    }

    /// Forgets a process foster has reaped; returns its record.
    pub fn reaped(&mut self, pid: i32) -> Option<Record> {
        let id = self.live_by_pid.remove(&pid)?;
        let rec = self.records.get_mut(&id)?;
        rec.alive = false;
        Some(rec.clone())
    }

    /// Whether `pid` is a live process below foster, as of the last read of the tree.
    pub fn in_tree(&self, pid: i32) -> bool {
        pid != self.me.pid && self.live_by_pid.contains_key(&pid)
    }

    /// Live identities below foster, deepest first (for a kill sweep).
    pub fn tree_deepest_first(&self) -> Vec<Identity> {
        let mut v: Vec<&Record> = self
            .records
            .values()
            .filter(|r| r.alive && r.identity != self.me)
            .collect();
        v.sort_by_key(|r| std::cmp::Reverse(r.generation));
        v.into_iter().map(|r| r.identity).collect()
    }

    /// Live processes of `helper`'s tree (the helper included) in the last scan.
    pub fn helper_tree(&self, helper: &str) -> Vec<Identity> {
        self.records
            .values()
            .filter(|r| r.alive && r.helper.as_deref() == Some(helper))
            .map(|r| r.identity)
            .collect()
    }

    /// Number of records held (live and the dead ones still needed as ancestors).
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether only foster itself is recorded.
    pub fn is_empty(&self) -> bool {
        self.records.len() <= 1
    }

    /// Takes in the changes of foster's subtree and the subtree they lead to: records new
    /// descendants, forgets ended ones, and classifies every process that changed parent.
    /// Returns the adoptions, parents before children.
    pub fn observe(&mut self, tree: &Snapshot, changes: &[Change]) -> Vec<Adoption> {
        for c in changes {
            if let Change::Exited { identity, .. } = c {
                self.gone(identity);
            }
        }
        let mut adoptions = Vec::new();
        for c in changes {
            match c {
                Change::Spawned {
                    identity, parent, ..
                } => {
                    if let Some(a) = self.spawned(tree, *identity, *parent) {
                        adoptions.push(a);
                    }
                }
                Change::Reparented { identity, from, to } => {
                    if let Some(a) = self.reparented(tree, *identity, *from, *to) {
                        adoptions.push(a);
                    }
                }
                _ => {}
            }
        }
        self.prune();
        adoptions
    }

    fn gone(&mut self, identity: &Identity) {
        if let Some(r) = self.records.get_mut(identity) {
            r.alive = false;
            if self.live_by_pid.get(&identity.pid) == Some(identity) {
                self.live_by_pid.remove(&identity.pid);
            }
        }
    }

    /// A process new to the subtree: recorded under its parent, or, when it is already
    /// foster's child without foster having launched it, adopted before any scan saw it.
    fn spawned(
        &mut self,
        tree: &Snapshot,
        identity: Identity,
        parent: Option<Identity>,
    ) -> Option<Adoption> {
        if let Some(r) = self.records.get_mut(&identity) {
            r.alive = true; // launched by foster, seen now
            return None;
        }
        let node = tree.get(&identity)?;
        if parent == Some(self.me) {
            let (expected_parent, generation, helper) = self.infer_lineage(node);
            self.insert(identity, expected_parent, generation, helper.clone(), false);
            let expected = self.nearest_live_subreaper(expected_parent);
            return Some(Adoption {
                identity,
                helper,
                generation,
                from: None,
                to: self.me,
                expected,
                classification: classify(expected, self.me, true),
            });
        }
        let (generation, helper) = match parent.and_then(|p| self.records.get(&p)) {
            Some(pr) => (pr.generation + 1, pr.helper.clone()),
            None => (2, None),
        };
        self.insert(identity, parent, generation, helper, true);
        None
    }

    /// A known process under a new parent (`to` outside the subtree, or None: it left it).
    fn reparented(
        &mut self,
        tree: &Snapshot,
        identity: Identity,
        from: Option<Identity>,
        to: Option<Identity>,
    ) -> Option<Adoption> {
        if identity == self.me {
            return None; // foster's own parent is not foster's business
        }
        let rec = self.records.get(&identity)?.clone();
        let node = tree.get(&identity);
        let in_tree = to.is_some_and(|t| tree.contains(&t));
        let to = to.unwrap_or(Identity {
            pid: node.map_or(0, |n| n.ppid),
            start_time: 0,
        });
        let mut expected = self.nearest_live_subreaper(rec.expected_parent);
        if expected != to && in_tree && self.learn_reaper(node, to) {
            expected = self.nearest_live_subreaper(rec.expected_parent);
        }
        let classification = classify(expected, to, in_tree);
        if classification == Classification::Escaped {
            self.gone(&identity); // no longer below foster: not foster's to end
        }
        Some(Adoption {
            identity,
            helper: rec.helper,
            generation: rec.generation,
            from: from.or(rec.expected_parent),
            to,
            expected,
            classification,
        })
    }

    /// Whether `to`, which adopted `node` and is not a subreaper the registry knew of, is one
    /// by the rules of the module docs; if so it is recorded as a subreaper.
    fn learn_reaper(&mut self, node: Option<&ProcessNode>, to: Identity) -> bool {
        let named = node
            .and_then(|n| n.env_var(ENV_SUPERVISOR.as_bytes()))
            .and_then(|v| std::str::from_utf8(v).ok())
            .and_then(|v| v.parse::<Identity>().ok());
        let reaper = named == Some(to)
            || (is_pid_namespace_init(to.pid) && Identity::of(to.pid).is_ok_and(|now| now == to));
        if !reaper {
            return false;
        }
        match self.records.get_mut(&to) {
            Some(r) => {
                r.subreaper = true;
                true
            }
            None => false,
        }
    }

    fn insert(
        &mut self,
        identity: Identity,
        expected_parent: Option<Identity>,
        generation: u32,
        helper: Option<String>,
        lineage_seen: bool,
    ) {
        self.live_by_pid.insert(identity.pid, identity);
        self.records.insert(
            identity,
            Record {
                identity,
                expected_parent,
                generation,
                helper,
                subreaper: false,
                lineage_seen,
                alive: true,
            },
        );
    }

    /// The nearest living subreaper on the recorded chain starting at `from` (foster itself
    /// when the chain leaves what the registry knows).
    pub fn nearest_live_subreaper(&self, from: Option<Identity>) -> Identity {
        let mut cur = from;
        let mut steps = 0;
        while let Some(id) = cur {
            let Some(r) = self.records.get(&id) else {
                break;
            };
            if r.alive && r.subreaper {
                return id;
            }
            cur = r.expected_parent;
            steps += 1;
            if steps > 4096 {
                break;
            }
        }
        self.me
    }

    /// Lineage of a process first seen already adopted, from `FOSTER_SUPERVISOR` and
    /// `FOSTER_HELPER` in its environment: (expected parent, generation, helper).
    fn infer_lineage(&self, node: &ProcessNode) -> (Option<Identity>, u32, Option<String>) {
        let supervisor: Option<Identity> = node
            .env_var(ENV_SUPERVISOR.as_bytes())
            .and_then(|v| std::str::from_utf8(v).ok())
            .and_then(|v| v.parse().ok());
        let helper = node
            .env_var(ENV_HELPER.as_bytes())
            .map(|v| String::from_utf8_lossy(v).into_owned());
        match (supervisor, helper) {
            (Some(s), Some(h)) if s == self.me => {
                let parent = self.helpers.get(&h).copied();
                (parent.or(Some(self.me)), 2, Some(h))
            }
            (Some(s), _) => match self.records.get(&s) {
                // A nested foster's helper's child: its helper is the nested foster's.
                Some(r) => (Some(s), r.generation + 2, r.helper.clone()),
                None => (Some(self.me), 2, None),
            },
            _ => (Some(self.me), 2, None),
        }
    }

    /// Drops records of dead processes that no live record needs as an ancestor.
    fn prune(&mut self) {
        let mut needed: HashSet<Identity> = HashSet::new();
        for r in self.records.values() {
            if !r.alive {
                continue;
            }
            let mut cur = r.expected_parent;
            while let Some(id) = cur {
                if !needed.insert(id) {
                    break;
                }
                cur = self.records.get(&id).and_then(|p| p.expected_parent);
            }
        }
        let helpers: HashSet<Identity> = self.helpers.values().copied().collect();
        self.records
            .retain(|id, r| r.alive || needed.contains(id) || helpers.contains(id));
    }
}

/// The prefix of the environment variables foster passes to its helpers (the ones a
/// [`crate::tree::Subtree`] of the supervisor keeps).
pub const ENV_PREFIX: &str = "FOSTER_";

/// Whether `pid` is the init of a PID namespace below the one `/proc` shows: the last pid of
/// its `NSpid` line is 1 and there is more than one.
pub fn is_pid_namespace_init(pid: i32) -> bool {
    crate::tree::nspid(pid).is_some_and(|p| p.len() > 1 && p.last() == Some(&1))
}

/// Classifies an adoption by `to` when `expected` was the subreaper it should have reached.
pub fn classify(expected: Identity, to: Identity, to_in_tree: bool) -> Classification {
    if expected == to {
        Classification::Expected
    } else if expected.pid == to.pid {
        Classification::PidReused
    } else if to_in_tree {
        Classification::ForeignReaper
    } else {
        Classification::Escaped
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::subtree::follow;

    fn id(pid: i32) -> Identity {
        Identity {
            pid,
            start_time: pid as u64 * 10,
        }
    }
    fn e(pid: i32, ppid: i32) -> ProcessNode {
        ProcessNode::new(pid, ppid, pid as u64 * 10, b"x")
    }

    /// foster (pid 100) and what its subtree looked like at the last step.
    struct World {
        r: Registry,
        tree: Snapshot,
    }
    impl World {
        fn new() -> World {
            World {
                r: Registry::new(id(100)),
                tree: Snapshot::default(),
            }
        }
        fn step(&mut self, nodes: Vec<ProcessNode>) -> Vec<Adoption> {
            let all = Snapshot::from_nodes(nodes);
            let (sub, changes) = follow(&self.tree, &all, 100).unwrap();
            self.tree = sub;
            self.r.observe(&self.tree, &changes)
        }
    }

    #[test]
    fn classifies_against_the_nearest_living_subreaper() {
        // 1 → 100 (foster) → 200 (helper, nested subreaper) → 300 → 400
        let mut w = World::new();
        w.r.expect_launch(id(200), "nested", true);
        let a = w.step(vec![
            e(1, 0),
            e(100, 1),
            e(200, 100),
            e(300, 200),
            e(400, 300),
        ]);
        assert!(a.is_empty());
        assert_eq!(w.r.get(&id(400)).unwrap().generation, 3);
        assert_eq!(w.r.get(&id(400)).unwrap().helper.as_deref(), Some("nested"));
        // 300 dies: 400 goes to the nested foster 200: expected.
        let a = w.step(vec![e(1, 0), e(100, 1), e(200, 100), e(400, 200)]);
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].identity, id(400));
        assert_eq!(a[0].from, Some(id(300)));
        assert_eq!(a[0].to, id(200));
        assert_eq!(a[0].expected, id(200));
        assert_eq!(a[0].classification, Classification::Expected);
        // 200 dies: 400 goes one level up, to foster: expected.
        let a = w.step(vec![e(1, 0), e(100, 1), e(400, 100)]);
        assert_eq!(a[0].to, id(100));
        assert_eq!(a[0].expected, id(100));
        assert_eq!(a[0].classification, Classification::Expected);
        // It escapes to PID 1 (not possible while foster lives, but classified if seen).
        let a = w.step(vec![e(1, 0), e(100, 1), e(400, 1)]);
        assert_eq!(a[0].classification, Classification::Escaped);
        assert!(
            w.r.get(&id(400)).is_none_or(|r| !r.alive),
            "no longer foster's"
        );
        assert!(w.r.tree_deepest_first().is_empty());
    }

    #[test]
    fn foreign_reaper_and_pid_reuse() {
        let mut w = World::new();
        w.r.expect_launch(id(200), "h", false);
        w.step(vec![
            e(100, 1),
            e(200, 100),
            e(300, 200),
            e(310, 300),
            e(400, 310),
        ]);
        // 310 dies and 400 lands on 300, which nobody declared a subreaper.
        let a = w.step(vec![e(100, 1), e(200, 100), e(300, 200), e(400, 300)]);
        assert_eq!(a[0].classification, Classification::ForeignReaper);
        assert_eq!(a[0].expected, id(100));
        assert_eq!(
            classify(
                id(100),
                Identity {
                    pid: 100,
                    start_time: 1
                },
                true
            ),
            Classification::PidReused
        );
    }

    #[test]
    fn a_nested_supervisor_is_learnt_from_the_marker_naming_it() {
        // foster 100 → helper 200 (`sh`, undeclared) → 250 (a foster run: named nothing
        // special) → 300 (its helper) → 400. 300 dies: 400 lands on 250.
        let marked = |n: ProcessNode, sup: Identity| {
            n.with_environ(&[format!("FOSTER_SUPERVISOR={sup}"), "FOSTER_HELPER=w".into()])
        };
        let mut w = World::new();
        w.r.expect_launch(id(200), "h", false);
        w.step(vec![
            e(100, 1),
            e(200, 100),
            e(250, 200),
            marked(e(300, 250), id(250)),
            marked(e(400, 300), id(250)),
        ]);
        let a = w.step(vec![
            e(100, 1),
            e(200, 100),
            e(250, 200),
            marked(e(400, 250), id(250)),
        ]);
        assert_eq!(a[0].to, id(250));
        assert_eq!(a[0].expected, id(250));
        assert_eq!(a[0].classification, Classification::Expected);
        assert!(w.r.get(&id(250)).unwrap().subreaper);
        // A marker naming the pid with another start time proves nothing.
        let mut w = World::new();
        w.r.expect_launch(id(200), "h", false);
        let other = Identity {
            pid: 250,
            start_time: 1,
        };
        w.step(vec![
            e(100, 1),
            e(200, 100),
            e(250, 200),
            e(300, 250),
            marked(e(400, 300), other),
        ]);
        let a = w.step(vec![
            e(100, 1),
            e(200, 100),
            e(250, 200),
            marked(e(400, 250), other),
        ]);
        assert_eq!(a[0].classification, Classification::ForeignReaper);
    }

    #[test]
    fn first_seen_adopted_takes_its_lineage_from_the_environment() {
        let mut w = World::new();
        w.r.expect_launch(id(200), "web", false);
        w.step(vec![e(100, 1), e(200, 100)]);
        let a = w.step(vec![
            e(100, 1),
            e(200, 100),
            e(500, 100).with_environ(&[
                format!("FOSTER_SUPERVISOR={}", id(100)),
                "FOSTER_HELPER=web".into(),
            ]),
        ]);
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].from, None);
        assert_eq!(a[0].helper.as_deref(), Some("web"));
        assert_eq!(a[0].generation, 2);
        assert_eq!(a[0].classification, Classification::Expected);
        assert!(!w.r.get(&id(500)).unwrap().lineage_seen);
    }

    #[test]
    fn prunes_dead_leaves_keeps_needed_ancestors() {
        let mut w = World::new();
        w.r.expect_launch(id(200), "h", false);
        w.step(vec![e(100, 1), e(200, 100), e(300, 200), e(400, 300)]);
        w.step(vec![e(100, 1), e(200, 100), e(400, 100)]);
        assert!(
            w.r.get(&id(300)).is_some(),
            "ancestor of a live process is kept"
        );
        w.step(vec![e(100, 1), e(200, 100)]);
        assert!(w.r.get(&id(300)).is_none());
        assert!(w.r.get(&id(400)).is_none());
        assert!(w.r.get(&id(200)).is_some());
    }
}
