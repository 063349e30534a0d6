//! The standalone source: readings straight from `/proc`, for the whole system or one subtree.
//!
//! Owns [`ProcSource`], a [`Source`] over the tree's [`Scanner`] (which reads `cmdline` once per
//! new identity, and `stat` of a process only when it has been on a CPU since the last reading or
//! every [`IDLE_RECHECK`] readings: [`ScanOptions::reuse_idle`]). Whole system, every process is
//! read each time; kernel threads are left out, as htop does by default; with fork notifications,
//! the pids read are the last reading's and those born since, and `/proc` is listed only every
//! [`RELIST_EVERY`] readings. With `--root`, only the subtree's members and the processes born
//! since the last reading are read: a process outside the subtree cannot move into it except by
//! being born there. Births come from the kernel's fork notifications ([`Connector`]) when it
//! grants them (most kernels only to `CAP_NET_ADMIN`), so an idle subtree costs one `recv` and one
//! `stat` per member whatever the size of the rest of the system; otherwise (or after lost
//! notifications) from listing `/proc` and reading the pids not seen in the previous listing.

use std::collections::HashSet;

use crate::process::identity::Identity;
use crate::process::tree::connector::{Connector, ProcEvent, Wanted};
use crate::process::tree::{ScanOptions, Scanner, Snapshot};
use crate::top::model::{ProcExt, ProcInfo, Sample, SharedWants, Source, SourceError};

/// How many readings an owner already read is trusted for ([`ScanOptions::owner_recheck`]):
/// a process's owner changes only by an exec (seen at once) or a `setuid` (seen within this
/// many readings).
pub const OWNER_RECHECK: u64 = 10;

/// How many readings a process that has not run keeps its previous reading for
/// ([`ScanOptions::reuse_idle`]): what others do to a sleeping process without waking it (its
/// memory reclaimed, its process group set by its parent) shows within this many readings.
pub const IDLE_RECHECK: u64 = 10;

/// Whole system with fork notifications, how many readings go between two listings of `/proc`.
pub const RELIST_EVERY: u64 = 60;

/// Readings from `/proc`.
#[derive(Debug)]
pub struct ProcSource {
    scanner: Scanner,
    /// The subtree's root, when not the whole system.
    root: Option<Identity>,
    /// Pids of the subtree at the last reading.
    members: HashSet<i32>,
    /// Every pid of the last listing.
    known: HashSet<i32>,
    /// The pids to read this time (kept to reuse its allocation).
    wanted: Vec<i32>,
    /// Fork notifications, when the kernel grants them.
    forks: Option<Connector>,
    /// Whole system, with fork notifications: the pids of the last reading, with the ones born
    /// since, in pid order (what the next reading reads instead of listing `/proc`).
    alive: Vec<i32>,
    /// Readings since `/proc` was last listed (whole system, with fork notifications).
    since_listing: u64,
    /// The last reading listed `/proc` (so `known` is current).
    listed: bool,
    hz: u64,
    /// What the columns shown need besides `stat`.
    wants: SharedWants,
    /// The root has exited: nothing more to read.
    ended: bool,
}

impl ProcSource {
    /// A source for the whole system, or for `root` and its descendants.
    pub fn new(root: Option<i32>, wants: SharedWants) -> Result<ProcSource, SourceError> {
        let root = match root {
            Some(pid) => {
                Some(Identity::of(pid).map_err(|e| SourceError(format!("--root {pid}: {e}")))?)
            }
            None => None,
        };
        // One thread: a dashboard wants the least CPU per reading, not the shortest reading.
        // The owner (an `fstat` of the open `stat` file) for the USER column and the user
        // filter (`u`), read once per process and program, and again every 10 readings.
        let scanner = Scanner::new(ScanOptions {
            threads: 1,
            uid: true,
            owner_recheck: OWNER_RECHECK,
            reuse_idle: IDLE_RECHECK,
            ..ScanOptions::default()
        })
        .map_err(|e| SourceError(format!("cannot read /proc: {e}")))?;
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
        Ok(ProcSource {
            scanner,
            root,
            members: HashSet::new(),
            known: HashSet::new(),
            wanted: Vec::new(),
            // Subscribed before the first listing, so no birth falls between the two.
            forks: Connector::open(Wanted::Forks)
                .inspect_err(|e| {
                    tracing::debug!("no fork notifications ({e}); listing /proc instead")
                })
                .ok(),
            alive: Vec::new(),
            since_listing: 0,
            listed: false,
            hz,
            wants,
            ended: false,
        })
    }

    fn now_ticks(&self) -> Result<u64, SourceError> {
        crate::process::tree::uptime_ticks(self.hz).map_err(|e| SourceError(e.to_string()))
    }

    /// Every process. With fork notifications, the pids read are those of the last reading
    /// and the ones born since (a pid born again is read afresh: [`Scanner::forget`]), and a
    /// process that has ended is found by its reading failing: no listing of `/proc`, whose
    /// cost grows with every process, except after lost notifications and once every
    /// [`RELIST_EVERY`] readings (a safety net: a pid whose reading failed for another reason
    /// than its end is found again there).
    fn whole_snapshot(&mut self) -> Result<Snapshot, SourceError> {
        let mut lost = false;
        if let Some(w) = &mut self.forks {
            let (alive, scanner) = (&mut self.alive, &mut self.scanner);
            let before = alive.len();
            lost = w
                .drain(|e| {
                    if let ProcEvent::Fork { child, .. } = e {
                        scanner.forget(child);
                        alive.push(child);
                    }
                })
                .is_err();
            if alive.len() > before {
                alive.sort_unstable();
                alive.dedup();
            }
        }
        self.since_listing += 1;
        let snap =
            if self.forks.is_some() && self.listed && !lost && self.since_listing < RELIST_EVERY {
                self.scanner.scan_pids(&self.alive)
            } else {
                self.since_listing = 0;
                self.listed = true;
                self.scanner
                    .scan()
                    .map_err(|e| SourceError(format!("cannot scan /proc: {e}")))?
            };
        if self.forks.is_some() {
            self.alive.clear();
            self.alive.extend(snap.nodes().map(|n| n.pid));
            self.alive.sort_unstable();
        }
        Ok(snap)
    }

    fn subtree_snapshot(&mut self, root: Identity) -> Result<Snapshot, SourceError> {
        self.wanted.clear();
        let mut lost = false;
        if let Some(w) = &mut self.forks {
            let (members, wanted) = (&mut self.members, &mut self.wanted);
            lost = w
                .drain(|e| {
                    if let ProcEvent::Fork { parent, child } = e
                        && members.contains(&parent)
                    {
                        members.insert(child);
                        wanted.push(child);
                    }
                })
                .is_err();
        }
        if self.forks.is_some() && self.listed && !lost {
            // Notified of every birth: read the members (the newborns among them) only.
            self.wanted.clear();
            self.wanted.extend(self.members.iter().copied());
            self.wanted.sort_unstable();
        } else {
            let listed = self
                .scanner
                .list_pids()
                .map_err(|e| SourceError(format!("cannot list /proc: {e}")))?;
            self.wanted.clear();
            self.wanted.extend(
                listed
                    .iter()
                    .copied()
                    .filter(|p| self.members.contains(p) || !self.known.contains(p)),
            );
            self.known.clear();
            self.known.extend(listed.iter().copied());
            self.listed = true;
        }
        let snap = self.scanner.scan_pids(&self.wanted);
        match snap.get(&root) {
            Some(_) => {
                let sub = snap
                    .subtree(root.pid)
                    .map_err(|e| SourceError(format!("--root {}: {e}", root.pid)))?;
                self.members = sub.nodes().map(|n| n.pid).collect();
                Ok(sub)
            }
            None => {
                self.members.clear();
                self.ended = true;
                Err(SourceError(format!(
                    "the root process {} has exited; q quits",
                    root.pid
                )))
            }
        }
    }
}

impl Source for ProcSource {
    fn ended(&self) -> bool {
        self.ended
    }

    fn sample(&mut self) -> Result<Sample, SourceError> {
        let (snap, origin) = match self.root {
            Some(root) => (
                self.subtree_snapshot(root)?,
                format!("subtree of {}", root.pid),
            ),
            None => (self.whole_snapshot()?, "whole system".to_string()),
        };
        let now_ticks = self.now_ticks()?;
        let want = *self.wants.lock().unwrap_or_else(|e| e.into_inner());
        let scanner = &mut self.scanner;
        // The snapshot's nodes are taken, their names and command lines moved, not copied.
        let procs = snap
            .into_nodes()
            .filter(|n| !n.kernel_thread)
            .map(|n| {
                // Only what the columns shown need: each is one more read per process.
                let extra = scanner.read_extra(n.pid, want.extra);
                ProcInfo {
                    id: n.identity,
                    parent: n.parent,
                    ppid: n.ppid,
                    state: n.state,
                    cpu_ticks: n.cpu_ticks,
                    rss_bytes: n.rss_bytes,
                    comm: n.comm,
                    cmdline: n.cmdline,
                    supervision: None,
                    uid: Some(n.uid),
                    ext: ProcExt {
                        pgid: Some(n.pgrp),
                        sid: Some(n.session),
                        threads: Some(n.num_threads),
                        io: extra.io,
                        cgroup: extra.cgroup,
                        pidns: extra.pidns,
                    },
                }
            })
            .collect();
        Ok(Sample {
            origin,
            now_ticks,
            hz: self.hz,
            supervised: false,
            procs,
            events: Vec::new(),
            helpers: Vec::new(),
        })
    }
}
