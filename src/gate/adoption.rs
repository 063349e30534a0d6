//! Expected identities and the classification of adoptions.
//!
//! Owns the [`Registry`] of every descendant foster has seen: its identity, the identity of the
//! parent it is expected to have, its generation (1 = a helper foster launched), the helper it
//! belongs to, and whether it is itself a subreaper (foster, a nested `foster run`, or a helper
//! declared `subreaper = true`). It is filled from launches ([`Registry::expect_launch`]) and
//! from the changes of foster's subtree ([`crate::process::tree::Subtree`]: [`Change::Spawned`],
//! [`Change::Exited`], [`Change::Reparented`]) that the supervisor reads when something of its
//! tree ended (a SIGCHLD, or a watched parent's pidfd), never on a timer.
//!
//! When a process turns up under a new parent, the registry computes the nearest living
//! ancestor subreaper it *should* have reached, walking the recorded expected parents (never
//! comparing with PID 1), and classifies the adoption ([`Classification`]).

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::gate::expect::ENV_GATED;
use crate::gate::policy::ENV_PARENT;
use crate::process::identity::Identity;
use crate::process::tree::{Change, ProcessNode, Snapshot};

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
///
/// ## Nested supervisors
///
/// A subreaper foster did not declare is recognised when an adoption reaches it, never by its
/// name or command line: the adopted process's `FOSTER_SUPERVISOR` names, by pid *and* start
/// time, the foster that launched its helper; when that identity is exactly the new parent, the
/// new parent is a foster supervising that process's lineage, hence a subreaper (a nested
/// `foster run` sets `PR_SET_CHILD_SUBREAPER` before it launches anything). A new parent that is
/// the init of a PID namespace (the last `NSpid` of its `/proc/<pid>/status` is 1) is a reaper
/// by the kernel's rules too, as a nested `foster run --contain` is.
///
/// A process first seen already adopted (its parent died before any scan saw it) has no
/// recorded lineage. Where the kernel announced its birth and its parent's (`supervisor/
/// births.rs`), the supervisor says how many generations below a known process it is
/// ([`Registry::announced`]), and that is its generation, exactly. Otherwise foster reads its
/// environment once: every helper foster launches
/// carries `FOSTER_SUPERVISOR=PID:STARTTIME` (the foster that launched it) and
/// `FOSTER_HELPER=NAME`, inherited by its descendants, and the gate's identities: a gated
/// process has `FOSTER_PARENT` naming itself (which its descendants inherit) and `FOSTER_GATED`
/// naming the parent it was checked against. Its generation is then taken from the nearest
/// ancestor the registry knows by one of those identities (the `anchor`), never from how many
/// of its ancestors a read happened to see, so that it does not depend on when foster read:
///
/// - the parent it was gated against (`FOSTER_GATED`): that one's generation plus one, exactly;
/// - an ancestor (`FOSTER_PARENT`, else its helper) that has ended: plus one (the ancestor may
///   have been its parent; a deeper one is not known);
/// - an ancestor that is still alive: plus two, since a living parent keeps its children, so
///   at least one process between them ended. A helper's grandchild orphaned by the helper's
///   child is generation 3 whether or not foster saw that child.
///
/// An adoption needs the adopted process's environment, which the kernel shows only once an
/// `execve` has laid it out: a process caught in the middle of one
/// ([`ProcessNode::in_exec`]) waits, recorded but not classified, until a later read finds it
/// out of it (the supervisor reads again soon while one waits).
#[derive(Debug)]
pub struct Registry {
    me: Identity,
    records: HashMap<Identity, Record>,
    live_by_pid: HashMap<i32, Identity>,
    helpers: HashMap<String, Identity>,
    /// Adoptions not classified yet: the process was caught in the middle of an `execve`, its
    /// environment not laid out yet.
    waiting: HashMap<Identity, Waiting>,
    /// Lineages announced for pids no read has seen yet ([`Registry::announced`]), for the
    /// next [`Registry::observe`].
    announced: HashMap<i32, Lineage>,
}

/// The lineage the kernel's announcements gave of a process before any read saw it: the
/// nearest ancestor the registry knows, and how many generations below it the process is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lineage {
    pub anchor: Identity,
    pub depth: u32,
}

/// How a process whose adoption waits came to foster's notice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Waiting {
    /// First seen already foster's child.
    FirstSeen,
    /// Seen under another parent before (`from`), now under a subreaper the registry did not
    /// know of: whether that one is a nested foster is read from the process's environment.
    Moved { from: Option<Identity> },
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
            waiting: HashMap::new(),
            announced: HashMap::new(),
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

    /// Records a process foster launched for itself, of no helper (a check's probe): the
    /// tree's next read finds it expected, not adopted, and its descendants belong to no
    /// helper.
    pub fn expect_own(&mut self, identity: Identity) {
        self.insert(identity, Some(self.me), 1, None, true);
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

    /// The helpers that have a live process in the tree (their own, or any of their tree's).
    pub fn live_helpers(&self) -> std::collections::HashSet<String> {
        self.records
            .values()
            .filter(|r| r.alive)
            .filter_map(|r| r.helper.clone())
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

    /// Says how the processes `lineages` name (by pid) descend from processes the registry
    /// knows, as the kernel announced their births: a process the next [`Registry::observe`]
    /// finds already adopted takes its generation and helper from there, exactly, rather than
    /// from its environment (its parent was born and ended between two reads).
    ///
    /// A lineage that leads up to foster itself (the helper was launched in the same batch of
    /// announcements as its descendants were born) says nothing of the helper: it is left to
    /// the environment, which names it.
    pub fn announced(&mut self, lineages: impl IntoIterator<Item = (i32, Lineage)>) {
        let me = self.me;
        self.announced
            .extend(lineages.into_iter().filter(|(_, l)| l.anchor != me));
    }

    /// The lineage announced for `pid` and not yet used.
    #[cfg(test)]
    pub(crate) fn announced_lineage(&self, pid: i32) -> Option<Lineage> {
        self.announced.get(&pid).copied()
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
        self.settle(tree, &mut adoptions);
        self.prune();
        // Kept for an adoption that waits for its process to be out of an `execve`: it is
        // classified by a later call, from the same lineage.
        let waiting: std::collections::HashSet<i32> = self.waiting.keys().map(|w| w.pid).collect();
        self.announced.retain(|pid, _| waiting.contains(pid));
        adoptions
    }

    /// How many adoptions wait for their process to be out of an `execve`.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// Classifies the waiting adoptions whose process is now out of its `execve` (and forgets
    /// those whose process is gone or left the tree: their change says so).
    fn settle(&mut self, tree: &Snapshot, adoptions: &mut Vec<Adoption>) {
        let ready: Vec<(Identity, Waiting)> = self
            .waiting
            .iter()
            .filter(|(id, _)| tree.get(id).is_none_or(|n| !n.in_exec))
            .map(|(id, w)| (*id, *w))
            .collect();
        for (identity, w) in ready {
            self.waiting.remove(&identity);
            let Some(node) = tree.get(&identity) else {
                continue;
            };
            let adoption = match w {
                Waiting::FirstSeen if node.parent == Some(self.me) => {
                    Some(self.first_seen_adopted(node))
                }
                Waiting::FirstSeen => None,
                Waiting::Moved { from } => self.reparented(tree, identity, from, node.parent),
            };
            adoptions.extend(adoption);
        }
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
            if node.in_exec {
                // Counted in the tree at once (signals, sweeps), classified once out of exec.
                self.insert(identity, Some(self.me), 2, None, false);
                self.waiting.insert(identity, Waiting::FirstSeen);
                return None;
            }
            return Some(self.first_seen_adopted(node));
        }
        let (generation, helper) = match parent.and_then(|p| self.records.get(&p)) {
            Some(pr) => (pr.generation + 1, pr.helper.clone()),
            None => (2, None),
        };
        self.insert(identity, parent, generation, helper, true);
        None
    }

    /// A process first seen as foster's child, which foster did not launch: its lineage from
    /// its environment, recorded, and its adoption.
    fn first_seen_adopted(&mut self, node: &ProcessNode) -> Adoption {
        let identity = node.identity;
        let announced = self
            .announced
            .get(&node.pid)
            .and_then(|l| Some((l, self.records.get(&l.anchor)?)));
        let (expected_parent, generation, helper) = match announced {
            Some((l, anchor)) => (
                Some(l.anchor),
                anchor.generation + l.depth,
                anchor.helper.clone(),
            ),
            None => self.infer_lineage(node),
        };
        self.insert(identity, expected_parent, generation, helper.clone(), false);
        let expected = self.nearest_live_subreaper(expected_parent);
        Adoption {
            identity,
            helper,
            generation,
            from: None,
            to: self.me,
            expected,
            classification: classify(expected, self.me, true),
        }
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
        if expected != to && in_tree {
            if node.is_some_and(|n| n.in_exec) {
                // Whether `to` is a nested foster is read from the environment, not there yet.
                self.waiting.insert(identity, Waiting::Moved { from });
                return None;
            }
            if self.learn_reaper(node, to) {
                expected = self.nearest_live_subreaper(rec.expected_parent);
            }
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

    /// Lineage of a process first seen already adopted, from its environment (see the module
    /// docs): (expected parent, generation, helper).
    fn infer_lineage(&self, node: &ProcessNode) -> (Option<Identity>, u32, Option<String>) {
        let identity_var = |name: &str| -> Option<Identity> {
            let v = node.env_var(name.as_bytes())?;
            let v = std::str::from_utf8(v).ok()?;
            v.split(';').next()?.parse().ok()
        };
        let supervisor = identity_var(ENV_SUPERVISOR);
        let helper = node
            .env_var(ENV_HELPER.as_bytes())
            .map(|v| String::from_utf8_lossy(v).into_owned());
        // The nearest ancestor known by identity, and whether it is exactly the parent.
        let named = identity_var(ENV_PARENT);
        let anchor = match named {
            Some(p) if p == node.identity => identity_var(ENV_GATED).map(|g| (g, true)),
            Some(p) => Some((p, false)),
            None => None,
        }
        .filter(|(a, _)| self.records.contains_key(a))
        .or_else(|| {
            // No identity it names is known: its helper, when it descends from this foster's
            // (and names no other ancestor, which could be deeper).
            let h = helper.as_ref()?;
            let id = *self.helpers.get(h)?;
            (supervisor == Some(self.me) && named.is_none_or(|n| n == id)).then_some((id, false))
        });
        if let Some((a, exact)) = anchor {
            let r = &self.records[&a];
            let between = u32::from(!exact && r.alive);
            return (
                Some(a),
                r.generation + 1 + between,
                r.helper.clone().or(helper),
            );
        }
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
/// [`crate::process::tree::Subtree`] of the supervisor keeps).
pub const ENV_PREFIX: &str = "FOSTER_";

/// Whether `pid` is the init of a PID namespace below the one `/proc` shows: the last pid of
/// its `NSpid` line is 1 and there is more than one.
pub fn is_pid_namespace_init(pid: i32) -> bool {
    crate::process::tree::nspid(pid).is_some_and(|p| p.len() > 1 && p.last() == Some(&1))
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
    use crate::process::tree::subtree::follow;

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
        let marked = |n: ProcessNode| {
            n.with_environ(&[
                format!("FOSTER_SUPERVISOR={}", id(100)),
                "FOSTER_HELPER=web".into(),
            ])
        };
        let a = w.step(vec![e(100, 1), e(200, 100), marked(e(500, 100))]);
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].from, None);
        assert_eq!(a[0].helper.as_deref(), Some("web"));
        // The helper lives, so it was not the parent: one process between them ended.
        assert_eq!(a[0].generation, 3);
        assert_eq!(a[0].classification, Classification::Expected);
        assert!(!w.r.get(&id(500)).unwrap().lineage_seen);
        assert_eq!(w.r.get(&id(500)).unwrap().expected_parent, Some(id(200)));
        // Once the helper has ended, its child may have been the one orphaned: generation 2.
        w.r.reaped(200);
        let a = w.step(vec![e(100, 1), marked(e(500, 100)), marked(e(600, 100))]);
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].identity, id(600));
        assert_eq!(a[0].generation, 2);
    }

    /// An announced lineage outlives a read that finds its process in the middle of an
    /// `execve` (classified a read later): helper 200
    /// (generation 1) → 300 (announced, ends) → 400, two births below it: generation 3, not the
    /// environment's guess.
    #[test]
    fn an_announced_lineage_waits_with_an_adoption_caught_in_exec() {
        let mut w = World::new();
        w.r.expect_launch(id(200), "h", false);
        w.step(vec![e(100, 1), e(200, 100)]);
        w.r.announced([(
            400,
            Lineage {
                anchor: id(200),
                depth: 2,
            },
        )]);
        let mut caught = e(400, 100);
        caught.in_exec = true;
        assert!(w.step(vec![e(100, 1), e(200, 100), caught]).is_empty());
        assert_eq!(w.r.waiting(), 1);
        let a = w.step(vec![e(100, 1), e(200, 100), e(400, 100)]);
        assert_eq!(a.len(), 1);
        assert_eq!((a[0].generation, a[0].helper.as_deref()), (3, Some("h")));
        assert_eq!(a[0].classification, Classification::Expected);
    }

    /// A lineage announced up to foster itself (the helper launched in the same batch) names
    /// no helper: the environment's lineage is taken, which does.
    #[test]
    fn a_lineage_up_to_foster_itself_is_left_to_the_environment() {
        let mut w = World::new();
        w.r.expect_launch(id(200), "web", false);
        w.step(vec![e(100, 1), e(200, 100)]);
        w.r.announced([(
            500,
            Lineage {
                anchor: id(100),
                depth: 3,
            },
        )]);
        let marked = e(500, 100).with_environ(&[
            format!("FOSTER_SUPERVISOR={}", id(100)),
            "FOSTER_HELPER=web".into(),
        ]);
        let a = w.step(vec![e(100, 1), e(200, 100), marked]);
        assert_eq!((a[0].generation, a[0].helper.as_deref()), (3, Some("web")));
    }

    /// The generation of an orphan does not depend on whether a read saw the process that
    /// orphaned it: helper 200 → 300 (ends) → 400, seen or not before 300 ends.
    #[test]
    fn an_orphans_generation_is_the_same_whether_its_parent_was_seen_or_not() {
        let env = |n: ProcessNode| {
            n.with_environ(&[
                format!("FOSTER_SUPERVISOR={}", id(100)),
                "FOSTER_HELPER=h".into(),
                format!("FOSTER_PARENT={}", id(200)),
            ])
        };
        let mut seen = World::new();
        seen.r.expect_launch(id(200), "h", false);
        seen.step(vec![
            e(100, 1),
            e(200, 100),
            env(e(300, 200)),
            env(e(400, 300)),
        ]);
        let a = seen.step(vec![e(100, 1), e(200, 100), env(e(400, 100))]);
        assert_eq!((a.len(), a[0].from), (1, Some(id(300))));
        let mut unseen = World::new();
        unseen.r.expect_launch(id(200), "h", false);
        unseen.step(vec![e(100, 1), e(200, 100)]);
        let b = unseen.step(vec![e(100, 1), e(200, 100), env(e(400, 100))]);
        assert_eq!((b.len(), b[0].from), (1, None));
        assert_eq!(a[0].generation, 3);
        assert_eq!(b[0].generation, a[0].generation);
        assert_eq!(b[0].helper, a[0].helper);
        assert_eq!(b[0].classification, Classification::Expected);
    }

    /// A gated orphan names the parent it was checked against (`FOSTER_GATED`): its generation
    /// is that one's plus one, however deep, and that parent is its expected one.
    #[test]
    fn a_gated_orphan_is_placed_under_the_parent_it_was_checked_against() {
        let mut w = World::new();
        w.r.expect_launch(id(200), "h", false);
        // 200 → 300 → 350, seen; 350 gates 450 (not seen), then ends.
        w.step(vec![e(100, 1), e(200, 100), e(300, 200), e(350, 300)]);
        let gated = e(450, 100).with_environ(&[
            format!("FOSTER_SUPERVISOR={}", id(100)),
            "FOSTER_HELPER=h".into(),
            format!("FOSTER_PARENT={}", id(450)),
            format!("FOSTER_GATED={};USR1:notify:15s", id(350)),
        ]);
        let a = w.step(vec![e(100, 1), e(200, 100), e(300, 200), gated]);
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].generation, 4);
        assert_eq!(a[0].helper.as_deref(), Some("h"));
        assert_eq!(w.r.get(&id(450)).unwrap().expected_parent, Some(id(350)));
    }

    /// A process first seen adopted in the middle of an execve has no environment yet: it is
    /// counted in the tree at once and classified, with its helper and generation, once out.
    #[test]
    fn an_adoption_caught_in_an_exec_waits_for_the_environment() {
        let mut w = World::new();
        w.r.expect_launch(id(200), "h", false);
        w.step(vec![e(100, 1), e(200, 100)]);
        let a = w.step(vec![e(100, 1), e(200, 100), e(500, 100).caught_in_exec()]);
        assert!(a.is_empty(), "{a:?}");
        assert_eq!(w.r.waiting(), 1);
        assert!(w.r.in_tree(500), "counted in the tree while it waits");
        let a = w.step(vec![e(100, 1), e(200, 100), e(500, 100).caught_in_exec()]);
        assert!(a.is_empty(), "{a:?}");
        let out = e(500, 100).with_environ(&[
            format!("FOSTER_SUPERVISOR={}", id(100)),
            "FOSTER_HELPER=h".into(),
            format!("FOSTER_PARENT={}", id(200)),
        ]);
        let a = w.step(vec![e(100, 1), e(200, 100), out]);
        assert_eq!(a.len(), 1, "{a:?}");
        assert_eq!(a[0].helper.as_deref(), Some("h"));
        assert_eq!(a[0].generation, 3);
        assert_eq!(a[0].from, None);
        assert_eq!(a[0].classification, Classification::Expected);
        assert_eq!(w.r.waiting(), 0);
        assert_eq!(w.r.get(&id(500)).unwrap().helper.as_deref(), Some("h"));
        // One that ends while it waits is forgotten.
        let a = w.step(vec![e(100, 1), e(200, 100), e(600, 100).caught_in_exec()]);
        assert!(a.is_empty());
        let a = w.step(vec![e(100, 1), e(200, 100)]);
        assert!(a.is_empty());
        assert_eq!(w.r.waiting(), 0);
    }

    /// Whether an unknown new parent is a nested foster is read from the adopted process's
    /// environment: caught in an exec, the classification waits for it.
    #[test]
    fn a_move_to_an_unknown_reaper_caught_in_an_exec_waits_for_the_environment() {
        let mut w = World::new();
        w.r.expect_launch(id(200), "h", false);
        w.step(vec![
            e(100, 1),
            e(200, 100),
            e(250, 200),
            e(300, 250),
            e(400, 300),
        ]);
        let a = w.step(vec![
            e(100, 1),
            e(200, 100),
            e(250, 200),
            e(400, 250).caught_in_exec(),
        ]);
        assert!(a.is_empty(), "{a:?}");
        let marked = e(400, 250).with_environ(&[
            format!("FOSTER_SUPERVISOR={}", id(250)),
            "FOSTER_HELPER=inner".into(),
        ]);
        let a = w.step(vec![e(100, 1), e(200, 100), e(250, 200), marked]);
        assert_eq!(a.len(), 1, "{a:?}");
        assert_eq!(a[0].from, Some(id(300)));
        assert_eq!(a[0].to, id(250));
        assert_eq!(a[0].classification, Classification::Expected);
        assert!(w.r.get(&id(250)).unwrap().subreaper);
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
