//! Expected identities and the classification of adoptions.
//!
//! Owns the [`Registry`] of every descendant foster has seen: its identity, the identity of the
//! parent it is expected to have, its generation (1 = a helper foster launched), the helper it
//! belongs to, and whether it is itself a subreaper (foster, a nested `foster run`, or a helper
//! declared `subreaper = true`). It is filled from launches ([`Registry::expect_launch`]) and
//! from `/proc` scans that the supervisor runs when an event (SIGCHLD) says the tree changed,
//! never on a timer.
//!
//! When a process turns up under a new parent, the registry computes the nearest living
//! ancestor subreaper it *should* have reached, walking the recorded expected parents (never
//! comparing with PID 1), and classifies the adoption ([`Classification`]).
//!
//! A process first seen already adopted (its parent died before any scan saw it) has no
//! recorded lineage. foster then reads its environment once: every helper foster launches
//! carries `FOSTER_SUPERVISOR=PID:STARTTIME` (the foster that launched it) and
//! `FOSTER_HELPER=NAME`, inherited by its descendants; the registry takes the helper as the
//! expected parent and generation 2 (a direct child of the helper), the common case.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::identity::Identity;
use crate::procstat::StatFields;

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
}

/// One process as a scan saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcEntry {
    pub identity: Identity,
    pub ppid: i32,
    pub state: u8,
    pub comm: Vec<u8>,
}

/// Reads `/proc/*/stat` once: every process, its parent, state and name. A process that
/// vanishes mid-scan, or whose file cannot be read, is skipped.
pub fn scan() -> Vec<ProcEntry> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    let mut path = String::with_capacity(32);
    let mut buf = Vec::with_capacity(1024);
    for e in dir.flatten() {
        let name = e.file_name();
        let Some(pid) = name.to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        path.clear();
        path.push_str("/proc/");
        path.push_str(name.to_str().unwrap_or_default());
        path.push_str("/stat");
        buf.clear();
        let Ok(mut f) = std::fs::File::open(&path) else {
            continue;
        };
        if std::io::Read::read_to_end(&mut f, &mut buf).is_err() {
            continue;
        }
        let Ok(s) = StatFields::parse(&buf) else {
            continue;
        };
        if s.is_kernel_thread() {
            continue;
        }
        out.push(ProcEntry {
            identity: Identity {
                pid,
                start_time: s.start_time,
            },
            ppid: s.ppid,
            state: s.state,
            comm: s.comm.to_vec(),
        });
    }
    out
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
    /// The parent pid of the last scan.
    pub last_ppid: i32,
    /// Whether the last scan found it.
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
    my_exe: Option<PathBuf>,
    records: HashMap<Identity, Record>,
    live_by_pid: HashMap<i32, Identity>,
    helpers: HashMap<String, Identity>,
    in_tree: HashSet<i32>,
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
                last_ppid: 0,
                alive: true,
            },
        );
        let mut live_by_pid = HashMap::new();
        live_by_pid.insert(me.pid, me);
        Registry {
            me,
            my_exe: std::fs::read_link("/proc/self/exe").ok(),
            records,
            live_by_pid,
            helpers: HashMap::new(),
            in_tree: HashSet::new(),
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
                last_ppid: self.me.pid,
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

    /// Whether the last scan found `pid` below foster.
    pub fn in_tree(&self, pid: i32) -> bool {
        self.in_tree.contains(&pid)
    }

    /// Live identities below foster in the last scan, deepest first (for a kill sweep).
    pub fn tree_deepest_first(&self) -> Vec<Identity> {
        let mut v: Vec<&Record> = self
            .records
            .values()
            .filter(|r| r.alive && r.identity != self.me && self.in_tree.contains(&r.identity.pid))
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

    /// Takes in a scan: records new descendants, notices every reparented process and
    /// classifies it. Returns the adoptions, parents before children.
    pub fn observe(&mut self, scan: &[ProcEntry]) -> Vec<Adoption> {
        let by_pid: HashMap<i32, &ProcEntry> = scan.iter().map(|e| (e.identity.pid, e)).collect();
        let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
        for e in scan {
            children.entry(e.ppid).or_default().push(e.identity.pid);
        }
        // Who is alive.
        self.live_by_pid.clear();
        for r in self.records.values_mut() {
            r.alive = r.identity == self.me
                || by_pid
                    .get(&r.identity.pid)
                    .is_some_and(|e| e.identity == r.identity);
        }
        for r in self.records.values() {
            if r.alive {
                self.live_by_pid.insert(r.identity.pid, r.identity);
            }
        }
        // The tree below foster, parents before children.
        let mut order = Vec::new();
        let mut queue = VecDeque::from([self.me.pid]);
        self.in_tree.clear();
        while let Some(p) = queue.pop_front() {
            for &c in children.get(&p).map(Vec::as_slice).unwrap_or(&[]) {
                if self.in_tree.insert(c) {
                    order.push(c);
                    queue.push_back(c);
                }
            }
        }
        let mut adoptions = Vec::new();
        // New processes in the tree.
        for &pid in &order {
            let e = by_pid[&pid];
            if self.records.contains_key(&e.identity) {
                continue;
            }
            let parent = by_pid.get(&e.ppid).map(|p| p.identity);
            let subreaper = self.is_foster(e);
            if e.ppid == self.me.pid {
                // Not launched by foster, yet its child: adopted before any scan saw it.
                let (expected_parent, generation, helper) = self.infer_lineage(pid);
                self.insert(e, expected_parent, generation, helper, subreaper, false);
                let expected = self.nearest_live_subreaper(expected_parent);
                adoptions.push(Adoption {
                    identity: e.identity,
                    helper: self.records[&e.identity].helper.clone(),
                    generation,
                    from: None,
                    to: self.me,
                    expected,
                    classification: classify(expected, self.me, true),
                });
                continue;
            }
            let (generation, helper) = match parent.and_then(|p| self.records.get(&p)) {
                Some(pr) => (pr.generation + 1, pr.helper.clone()),
                None => (2, None),
            };
            self.insert(e, parent, generation, helper, subreaper, true);
        }
        // Known processes under a new parent.
        let mut moved: Vec<(Identity, i32)> = Vec::new();
        for r in self.records.values() {
            if r.identity == self.me || !r.alive {
                continue;
            }
            let e = by_pid[&r.identity.pid];
            if e.ppid != r.last_ppid {
                moved.push((r.identity, e.ppid));
            }
        }
        for (id, ppid) in moved {
            let to = by_pid.get(&ppid).map(|p| p.identity).unwrap_or(Identity {
                pid: ppid,
                start_time: 0,
            });
            let rec = &self.records[&id];
            let from = self
                .records
                .values()
                .find(|p| {
                    p.identity.pid == rec.last_ppid && Some(p.identity) == rec.expected_parent
                })
                .map(|p| p.identity)
                .or(rec.expected_parent);
            let expected = self.nearest_live_subreaper(rec.expected_parent);
            let classification = classify(
                expected,
                to,
                self.in_tree.contains(&ppid) || ppid == self.me.pid,
            );
            adoptions.push(Adoption {
                identity: id,
                helper: rec.helper.clone(),
                generation: rec.generation,
                from,
                to,
                expected,
                classification,
            });
            self.records.get_mut(&id).expect("present").last_ppid = ppid;
        }
        self.prune();
        adoptions
    }

    fn insert(
        &mut self,
        e: &ProcEntry,
        expected_parent: Option<Identity>,
        generation: u32,
        helper: Option<String>,
        subreaper: bool,
        lineage_seen: bool,
    ) {
        self.live_by_pid.insert(e.identity.pid, e.identity);
        self.records.insert(
            e.identity,
            Record {
                identity: e.identity,
                expected_parent,
                generation,
                helper,
                subreaper,
                lineage_seen,
                last_ppid: e.ppid,
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

    /// Whether the process is a foster running `run` (a nested supervisor, so a subreaper).
    fn is_foster(&self, e: &ProcEntry) -> bool {
        if e.comm != b"foster" {
            return false;
        }
        let pid = e.identity.pid;
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
        if exe.is_none() || exe != self.my_exe {
            return false;
        }
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            return false;
        };
        cmdline.split(|&b| b == 0).skip(1).any(|a| a == b"run")
            && !cmdline.split(|&b| b == 0).any(|a| a == b"--check")
    }

    /// Lineage of a process first seen already adopted, from `FOSTER_SUPERVISOR` and
    /// `FOSTER_HELPER` in its environment: (expected parent, generation, helper).
    fn infer_lineage(&self, pid: i32) -> (Option<Identity>, u32, Option<String>) {
        let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let mut supervisor: Option<Identity> = None;
        let mut helper: Option<String> = None;
        for var in env.split(|&b| b == 0) {
            if let Some(v) = var
                .strip_prefix(ENV_SUPERVISOR.as_bytes())
                .and_then(|v| v.strip_prefix(b"="))
            {
                supervisor = std::str::from_utf8(v).ok().and_then(|s| s.parse().ok());
            } else if let Some(v) = var
                .strip_prefix(ENV_HELPER.as_bytes())
                .and_then(|v| v.strip_prefix(b"="))
            {
                helper = Some(String::from_utf8_lossy(v).into_owned());
            }
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

    fn id(pid: i32) -> Identity {
        Identity {
            pid,
            start_time: pid as u64 * 10,
        }
    }
    fn e(pid: i32, ppid: i32) -> ProcEntry {
        ProcEntry {
            identity: id(pid),
            ppid,
            state: b'S',
            comm: b"x".to_vec(),
        }
    }

    #[test]
    fn classifies_against_the_nearest_living_subreaper() {
        // 1 → 100 (foster) → 200 (helper, nested subreaper) → 300 → 400
        let mut r = Registry::new(id(100));
        r.expect_launch(id(200), "nested", true);
        let a = r.observe(&[e(1, 0), e(100, 1), e(200, 100), e(300, 200), e(400, 300)]);
        assert!(a.is_empty());
        assert_eq!(r.get(&id(400)).unwrap().generation, 3);
        assert_eq!(r.get(&id(400)).unwrap().helper.as_deref(), Some("nested"));
        // 300 dies: 400 goes to the nested foster 200: expected.
        let a = r.observe(&[e(1, 0), e(100, 1), e(200, 100), e(400, 200)]);
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].identity, id(400));
        assert_eq!(a[0].to, id(200));
        assert_eq!(a[0].expected, id(200));
        assert_eq!(a[0].classification, Classification::Expected);
        // 200 dies: 400 goes one level up, to foster: expected.
        let a = r.observe(&[e(1, 0), e(100, 1), e(400, 100)]);
        assert_eq!(a[0].to, id(100));
        assert_eq!(a[0].expected, id(100));
        assert_eq!(a[0].classification, Classification::Expected);
        // It escapes to PID 1.
        let a = r.observe(&[e(1, 0), e(100, 1), e(400, 1)]);
        assert_eq!(a[0].classification, Classification::Escaped);
    }

    #[test]
    fn foreign_reaper_and_pid_reuse() {
        let mut r = Registry::new(id(100));
        r.expect_launch(id(200), "h", false);
        r.observe(&[
            e(100, 1),
            e(200, 100),
            e(300, 200),
            e(310, 300),
            e(400, 310),
        ]);
        // 310 dies and 400 lands on 300, which nobody declared a subreaper.
        let a = r.observe(&[e(100, 1), e(200, 100), e(300, 200), e(400, 300)]);
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
    fn prunes_dead_leaves_keeps_needed_ancestors() {
        let mut r = Registry::new(id(100));
        r.expect_launch(id(200), "h", false);
        r.observe(&[e(100, 1), e(200, 100), e(300, 200), e(400, 300)]);
        r.observe(&[e(100, 1), e(200, 100), e(400, 100)]);
        assert!(
            r.get(&id(300)).is_some(),
            "ancestor of a live process is kept"
        );
        r.observe(&[e(100, 1), e(200, 100)]);
        assert!(r.get(&id(300)).is_none());
        assert!(r.get(&id(400)).is_none());
        assert!(r.get(&id(200)).is_some());
    }
}
