//! The standalone source: readings straight from `/proc`, for the whole system or one subtree.
//!
//! Owns [`ProcSource`], a [`Source`] over the tree's [`Scanner`] (which reads `stat` every scan
//! and `cmdline` once per new identity). Whole system, every process is read each time; kernel
//! threads are left out, as htop does by default. With `--root`, only the subtree's members and
//! pids new since the last listing are read: a process outside the subtree cannot move into it
//! except by being born there, so an idle subtree costs one listing of `/proc` and one `stat`
//! per member, whatever the size of the rest of the system.

use std::collections::HashSet;
use std::io;

use crate::identity::Identity;
use crate::top::model::{ProcInfo, Sample, Source, SourceError};
use crate::tree::{ScanOptions, Scanner, Snapshot};

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
    hz: u64,
}

impl ProcSource {
    /// A source for the whole system, or for `root` and its descendants.
    pub fn new(root: Option<i32>) -> Result<ProcSource, SourceError> {
        let root = match root {
            Some(pid) => {
                Some(Identity::of(pid).map_err(|e| SourceError(format!("--root {pid}: {e}")))?)
            }
            None => None,
        };
        let scanner = Scanner::new(ScanOptions::default())
            .map_err(|e| SourceError(format!("cannot read /proc: {e}")))?;
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
        Ok(ProcSource {
            scanner,
            root,
            members: HashSet::new(),
            known: HashSet::new(),
            hz,
        })
    }

    fn now_ticks(&self) -> Result<u64, SourceError> {
        let text = std::fs::read_to_string("/proc/uptime")
            .map_err(|e| SourceError(format!("cannot read /proc/uptime: {e}")))?;
        let secs: f64 = text
            .split_whitespace()
            .next()
            .and_then(|t| t.parse().ok())
            .ok_or_else(|| SourceError(format!("cannot parse /proc/uptime: {text:?}")))?;
        Ok((secs * self.hz as f64) as u64)
    }

    fn subtree_snapshot(&mut self, root: Identity) -> Result<Snapshot, SourceError> {
        let listed = list_pids().map_err(|e| SourceError(format!("cannot list /proc: {e}")))?;
        let wanted: Vec<i32> = listed
            .iter()
            .copied()
            .filter(|p| self.members.contains(p) || !self.known.contains(p))
            .collect();
        let snap = self.scanner.scan_pids(&wanted);
        self.known = listed.into_iter().collect();
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
                Err(SourceError(format!(
                    "the root process {} has exited",
                    root.pid
                )))
            }
        }
    }
}

/// The numeric entries of `/proc`.
fn list_pids() -> io::Result<Vec<i32>> {
    let mut out = Vec::with_capacity(1024);
    for e in std::fs::read_dir("/proc")? {
        if let Some(pid) = e?.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) {
            out.push(pid);
        }
    }
    Ok(out)
}

impl Source for ProcSource {
    fn sample(&mut self) -> Result<Sample, SourceError> {
        let (snap, origin) = match self.root {
            Some(root) => (
                self.subtree_snapshot(root)?,
                format!("subtree of {}", root.pid),
            ),
            None => (
                self.scanner
                    .scan()
                    .map_err(|e| SourceError(format!("cannot scan /proc: {e}")))?,
                "whole system".to_string(),
            ),
        };
        let now_ticks = self.now_ticks()?;
        let procs = snap
            .nodes()
            .filter(|n| !n.kernel_thread)
            .map(|n| ProcInfo {
                id: n.identity,
                parent: n.parent,
                ppid: n.ppid,
                state: n.state,
                cpu_ticks: n.cpu_ticks,
                rss_bytes: n.rss_bytes,
                comm: n.comm.clone(),
                cmdline: n.cmdline.clone(),
                supervision: None,
            })
            .collect();
        Ok(Sample {
            origin,
            now_ticks,
            hz: self.hz,
            supervised: false,
            procs,
            events: Vec::new(),
        })
    }
}
