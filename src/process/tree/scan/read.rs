//! One scanning thread's work: every pid of its share read into a node, with the caches it
//! shares read-only ([`Ctx`]) and what it found ([`Chunk`]).

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::Arc;

use crate::process::identity::Identity;
use crate::process::procstat::{self, PF_EXITING};
use crate::process::tree::graph::{ProcessNode, ScanStats};

use super::cache::{ArgArea, CacheEntry, Kept, OwnerEntry};
use super::files::{
    ReadError, open_read, owner, parse_schedstat, parse_stat, pid_path, read_at, split_cmdline,
};

/// What one scanning thread reads with: shared, read-only.
pub(super) struct Ctx<'a> {
    pub(super) dir: i32,
    pub(super) cmdline: bool,
    pub(super) uid: bool,
    pub(super) owner_recheck: u64,
    pub(super) owners: &'a HashMap<Identity, OwnerEntry>,
    /// This scan's number.
    pub(super) generation: u64,
    pub(super) cache: &'a HashMap<Identity, CacheEntry>,
    pub(super) empty: &'a Arc<[Vec<u8>]>,
    pub(super) page_size: u64,
    /// [`ScanOptions::reuse_idle`] where `schedstat` gives run times, else 0.
    pub(super) reuse: u64,
    /// The previous scan's readings, by pid.
    pub(super) kept: &'a HashMap<i32, Kept>,
    /// Read every `stat`, whatever `schedstat` says (the second pass of a reusing scan).
    pub(super) force: bool,
}

/// What one scanning thread found.
pub(super) struct Chunk {
    pub(super) nodes: Vec<ProcessNode>,
    pub(super) stats: ScanStats,
    /// Identities whose command line came from the cache.
    pub(super) hits: Vec<Identity>,
    /// Command lines read now, for the cache.
    pub(super) fresh: Vec<(Identity, CacheEntry)>,
    /// Identities whose owner came from the cache.
    pub(super) owner_hits: Vec<Identity>,
    /// Owners read now, for the cache.
    pub(super) owners_fresh: Vec<(Identity, OwnerEntry)>,
    /// Indices in `nodes` of the readings that stood.
    pub(super) reused: Vec<usize>,
    /// Readings made now, to be kept (only when reusing).
    pub(super) kept_fresh: Vec<(i32, Kept)>,
}

impl Ctx<'_> {
    /// Reads `pids` (with the inode number of each one's `/proc` entry in `inos`, or none)
    /// with `buf` as the one reusable read buffer.
    pub(super) fn read(&self, pids: &[i32], inos: &[u64], buf: &mut Vec<u8>) -> Chunk {
        let mut out = Chunk {
            nodes: Vec::with_capacity(pids.len()),
            stats: ScanStats::default(),
            hits: Vec::new(),
            fresh: Vec::new(),
            owner_hits: Vec::new(),
            owners_fresh: Vec::new(),
            reused: Vec::new(),
            kept_fresh: Vec::new(),
        };
        for (i, &pid) in pids.iter().enumerate() {
            let ino = inos.get(i).copied().unwrap_or(0);
            self.read_one(pid, ino, buf, &mut out);
        }
        out
    }

    /// One pid into `out`: the previous reading when it stands, else a fresh one; counted in
    /// the stats when it cannot be read.
    fn read_one(&self, pid: i32, ino: u64, buf: &mut Vec<u8>, out: &mut Chunk) {
        // `schedstat` first, then `stat`: a process that runs between the two reads reads
        // as having run at the next scan.
        let mut sched = [0; 3];
        if self.reuse > 0 {
            match self.reuse_idle(pid, ino, buf, out) {
                Some(s) => sched = s,
                None => return,
            }
        }
        let Some((mut node, args)) = self.read_stat(pid, buf, out) else {
            return;
        };
        let zombie = matches!(node.state, b'Z' | b'X');
        if !node.kernel_thread && !zombie {
            if let Some(bytes) = self.resident_bytes(pid, buf) {
                node.rss_bytes = bytes;
            }
        }
        if self.cmdline && !node.kernel_thread {
            node.cmdline = self.cmdline_of(&node, args, zombie, buf, out);
        }
        if self.reuse > 0 && sched[2] > 0 {
            out.kept_fresh.push((
                pid,
                Kept {
                    node: node.clone(),
                    sched,
                    ino,
                    seen: self.generation,
                },
            ));
        }
        out.nodes.push(node);
    }

    /// The previous reading of `pid` into `out` when the process has not run since
    /// ([`ScanOptions::reuse_idle`](super::ScanOptions::reuse_idle)): `None` then, or when it
    /// is gone; else its `schedstat` numbers, for a fresh reading.
    fn reuse_idle(
        &self,
        pid: i32,
        ino: u64,
        buf: &mut Vec<u8>,
        out: &mut Chunk,
    ) -> Option<[u64; 3]> {
        let mut path = [0u8; 40];
        let mut sched = [0; 3];
        let len = pid_path(&mut path, pid, b"schedstat");
        match open_read(self.dir, &path[..len], buf) {
            Ok(_) => sched = parse_schedstat(buf).unwrap_or([0; 3]),
            Err(ReadError::Gone) => {
                out.stats.vanished += 1;
                return None;
            }
            // `stat` says what it is.
            Err(_) => {}
        }
        let Some(node) = self.unchanged(pid, ino, sched) else {
            return Some(sched);
        };
        if self.cmdline {
            out.hits.push(node.identity);
        }
        if self.uid && self.owner_recheck > 0 {
            out.owner_hits.push(node.identity);
        }
        out.stats.reused += 1;
        out.reused.push(out.nodes.len());
        out.nodes.push(node);
        None
    }

    /// A node from `pid`'s `stat` (and its owner), without its command line, and its argument
    /// area; `None`, counted, when it cannot be read or does not parse.
    // Long: one line per field of the node.
    fn read_stat(
        &self,
        pid: i32,
        buf: &mut Vec<u8>,
        out: &mut Chunk,
    ) -> Option<(ProcessNode, ArgArea)> {
        let mut path = [0u8; 40];
        let len = pid_path(&mut path, pid, b"stat");
        let fd = match open_read(self.dir, &path[..len], buf) {
            Ok(fd) => fd,
            Err(e) => return count(&mut out.stats, e),
        };
        if buf.is_empty() {
            out.stats.vanished += 1;
            return None;
        }
        let Some(f) = parse_stat(buf) else {
            out.stats.failed += 1;
            return None;
        };
        let identity = Identity {
            pid: f.pid,
            start_time: f.start_time,
        };
        let kernel_thread = f.is_kernel_thread();
        // The state is one ASCII letter; anything else is shown as `?`.
        let state = Some(f.state).filter(u8::is_ascii_graphic).unwrap_or(b'?');
        let zombie = matches!(state, b'Z' | b'X');
        let args = ArgArea {
            start: f.arg_start.unwrap_or(0),
            end: f.arg_end.unwrap_or(0),
        };
        let uid = if self.uid {
            match self.owner_of(identity, f.comm, args, &fd, out) {
                Ok(uid) => uid,
                Err(e) => return count(&mut out.stats, e),
            }
        } else {
            0
        };
        // The new program's code address is set last in `execve`, after its arguments and
        // environment; 0 in a process with memory that is not exiting is the middle of an
        // exec (a process without the right to see it reads 1, a kernel thread or a
        // process past its exit 0).
        let in_exec = !kernel_thread && !zombie && f.flags & PF_EXITING == 0 && f.startcode == 0;
        let node = ProcessNode {
            identity,
            pid: f.pid,
            ppid: f.ppid,
            parent: None,
            pgrp: f.pgrp,
            session: f.session,
            state,
            uid,
            comm: f.comm.to_vec(),
            cmdline: self.empty.clone(),
            environ: self.empty.clone(),
            start_time: f.start_time,
            num_threads: f.num_threads,
            rss_bytes: u64::try_from(f.rss)
                .unwrap_or(0)
                .saturating_mul(self.page_size),
            cpu_ticks: f.utime.saturating_add(f.stime),
            kernel_thread,
            in_exec,
        };
        Some((node, args))
    }

    /// The resident memory of `pid` from its `statm`, as `ps` and htop read it (`stat`'s
    /// field 24 is the kernel's unsummed approximation). `None` when it cannot be read.
    pub(super) fn resident_bytes(&self, pid: i32, buf: &mut Vec<u8>) -> Option<u64> {
        let mut path = [0u8; 40];
        let len = pid_path(&mut path, pid, b"statm");
        open_read(self.dir, &path[..len], buf).ok()?;
        let pages = procstat::parse_statm_resident(buf)?;
        Some(pages.saturating_mul(self.page_size))
    }

    /// The previous reading of `pid`, when it stands: the process has not been on a CPU since
    /// (the same `schedstat`, switched in at least once: a process never switched in could be
    /// a newborn under a reused pid), has the same `/proc` entry, has one thread, was neither
    /// runnable (it may be running now, its time not yet accounted) nor in the middle of an
    /// exec, and is not due for its periodic reading (every `reuse` scans, staggered by pid).
    pub(super) fn unchanged(&self, pid: i32, ino: u64, sched: [u64; 3]) -> Option<ProcessNode> {
        if self.force || sched[2] == 0 {
            return None;
        }
        let k = self.kept.get(&pid)?;
        let due = (pid.unsigned_abs() as u64).wrapping_add(self.generation) % self.reuse == 0;
        if due
            || k.sched != sched
            || (ino != 0 && k.ino != 0 && k.ino != ino)
            || k.node.num_threads != 1
            || k.node.in_exec
            || k.node.state == b'R'
        {
            return None;
        }
        let mut node = k.node.clone();
        node.parent = None;
        node.environ = self.empty.clone();
        Some(node)
    }

    /// The owner of the process whose `stat` is open on `fd`: from the cache while the
    /// identity, name and argument area are those it was read with, for `owner_recheck` scans;
    /// else read now (`fstat`).
    pub(super) fn owner_of(
        &self,
        identity: Identity,
        comm: &[u8],
        args: ArgArea,
        fd: &OwnedFd,
        out: &mut Chunk,
    ) -> Result<u32, ReadError> {
        if self.owner_recheck == 0 {
            return owner(fd);
        }
        if let Some(e) = self.owners.get(&identity)
            && e.comm == comm
            && e.args == args
            && self.generation - e.read < self.owner_recheck
        {
            out.owner_hits.push(identity);
            return Ok(e.uid);
        }
        let uid = owner(fd)?;
        out.owners_fresh.push((
            identity,
            OwnerEntry {
                uid,
                comm: comm.to_vec(),
                args,
                read: self.generation,
                seen: self.generation,
            },
        ));
        Ok(uid)
    }

    /// The command line of `node`: from the cache while the identity, name and argument area
    /// are unchanged (a zombie's are not compared: its memory is gone), else read now, and kept
    /// for the next scans unless it is empty.
    pub(super) fn cmdline_of(
        &self,
        node: &ProcessNode,
        args: ArgArea,
        zombie: bool,
        buf: &mut Vec<u8>,
        out: &mut Chunk,
    ) -> Arc<[Vec<u8>]> {
        if let Some(e) = self.cache.get(&node.identity)
            && (zombie || (e.comm == node.comm && e.args == args))
        {
            out.hits.push(node.identity);
            return e.cmdline.clone();
        }
        let mut path = [0u8; 40];
        let len = pid_path(&mut path, node.pid, b"cmdline");
        out.stats.cmdline_reads += 1;
        let cmdline: Arc<[Vec<u8>]> = match read_at(self.dir, &path[..len], buf, false) {
            Ok(_) if !buf.is_empty() => split_cmdline(buf).into(),
            // Nothing to keep: the middle of an exec (read again next time), an exit, a zombie
            // first seen as one, or a process gone or unreadable since its stat was read.
            Ok(_) => return self.empty.clone(),
            Err(_) => {
                out.stats.cmdline_unreadable += 1;
                return self.empty.clone();
            }
        };
        let entry = CacheEntry {
            comm: node.comm.clone(),
            args,
            cmdline: cmdline.clone(),
            seen: 0,
        };
        out.fresh.push((node.identity, entry));
        cmdline
    }
}

/// Counts a file that could not be read in `stats`; `None`, for the caller to skip the pid.
fn count<T>(stats: &mut ScanStats, e: ReadError) -> Option<T> {
    match e {
        ReadError::Gone => stats.vanished += 1,
        ReadError::Denied => stats.denied += 1,
        ReadError::Other => stats.failed += 1,
    }
    None
}
