//! Reading `/proc` into a snapshot ([`Scanner`]).
//!
//! A scan lists `/proc` once (raw `getdents64` into a reused buffer), reads every pid's `stat`
//! (and `statm`), and `cmdline` only once per new identity, cached by [`Identity`] while the
//! name and the argument area stay the same. The uid is the owner of the opened `stat` file.
//! A pid that vanishes, a file that cannot be read or does not parse is counted in
//! [`ScanStats`] and skipped; none aborts the scan. With [`ScanOptions::reuse_idle`] a process
//! that has not run since the previous scan keeps that scan's reading.
//!
//! - [`files`]: one file read through the `/proc` descriptor, and its small parsers.
//! - [`cache`]: what a scanner keeps between scans.
//! - [`read`]: one scanning thread's work.
//! - [`extra`]: the dashboard's optional columns.

mod cache;
mod extra;
mod files;
mod read;

pub use self::extra::{Extra, ExtraWants};
pub(crate) use self::files::parse_stat;

use std::collections::HashMap;
use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::Arc;

use crate::process::identity::Identity;
use crate::process::procstat::{PF_EXITING, parse_nspid};
use crate::process::tree::graph::{ProcessNode, ScanStats, Snapshot, TreeError};

use self::cache::{CacheEntry, Kept, OwnerEntry};
use self::files::{open_read, parse_pid, parse_schedstat, pid_path, read_at, split_cmdline};
use self::read::{Chunk, Ctx};

/// The most threads of one process [`Scanner::read_threads`] reads (the kernel has no limit of
/// its own but memory).
pub const MAX_THREADS_SHOWN: usize = 65_536;

/// One thread of a process, other than its main thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Thread {
    /// Its thread id.
    pub tid: i32,
    /// Its state letter, as a process's.
    pub state: u8,
    /// Its raw name (`comm`, set by `prctl(PR_SET_NAME)` or inherited from the process).
    pub comm: Vec<u8>,
}

/// What a scan reads.
#[derive(Debug, Clone)]
pub struct ScanOptions {
    /// Read `/proc/<pid>/cmdline` (once per identity). Off, every node's `cmdline` is empty.
    pub cmdline: bool,
    /// Where procfs is mounted (`/proc`); a test may point it at a directory of its own.
    pub proc_root: PathBuf,
    /// Threads a large scan is split over (1: the calling thread only). Default: the number of
    /// CPUs this process may run on, at most 4.
    pub threads: usize,
    /// Read each process's owner (`fstat` of its open `stat` file, one system call a process).
    /// Off, every node's `uid` is 0: for a reader that never shows it.
    pub uid: bool,
    /// With `uid`, how often an owner already read is read again. 0: every scan. N: once per
    /// identity, and again when its program changes (its name or argument area: an `execve`,
    /// as of a set-user-ID program) or after N scans (a `setuid` without an exec shows within
    /// N scans). For a reader that scans often and shows owners (the dashboard).
    pub owner_recheck: u64,
    /// Reuse what the previous scan read of a process that has not run since: 0, never (every
    /// process's `stat` is read every scan). N: each process's `schedstat` is read first (a
    /// line of three numbers the kernel writes at a fraction of `stat`'s cost), and when they
    /// are those of the previous scan (the process has not been on a CPU since), for a process
    /// of one thread that was not runnable and whose `/proc` entry is the same, the previous
    /// node stands (nothing in `stat`
    /// changes while a process does not run, but what others do to it, see [`Kept`]); `stat`
    /// is read anyway at least every N scans of a process. For a reader that scans often, most
    /// of whose processes sleep (the dashboard).
    pub reuse_idle: u64,
}

impl Default for ScanOptions {
    fn default() -> Self {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        ScanOptions {
            cmdline: true,
            proc_root: PathBuf::from("/proc"),
            threads: cpus.min(4),
            uid: true,
            owner_recheck: 0,
            reuse_idle: 0,
        }
    }
}

/// Reads `/proc` into [`Snapshot`]s, reusing one buffer and a per-identity cache across scans.
#[derive(Debug)]
pub struct Scanner {
    opts: ScanOptions,
    proc_fd: OwnedFd,
    bufs: Vec<Vec<u8>>,
    dents: Vec<u8>,
    pids: Vec<i32>,
    /// The previous listing: pid → inode number of its `/proc` entry (see [`Scanner::relist`]).
    inos: HashMap<i32, u64>,
    /// This listing's inode numbers, in `pids` order.
    listed_inos: Vec<u64>,
    cache: HashMap<Identity, CacheEntry>,
    /// Owners already read, by identity (only with [`ScanOptions::owner_recheck`]).
    owners: HashMap<Identity, OwnerEntry>,
    generation: u64,
    page_size: u64,
    empty: Arc<[Vec<u8>]>,
    /// The previous scan's nodes by pid ([`ScanOptions::reuse_idle`]; empty when off, or when
    /// this kernel's `schedstat` gives no run times).
    kept: HashMap<i32, Kept>,
    /// `schedstat` gives run times here (checked once on this process's own).
    schedstat: bool,
}

impl Scanner {
    /// A scanner over `opts.proc_root`; fails only when that directory cannot be opened.
    pub fn new(opts: ScanOptions) -> Result<Scanner, TreeError> {
        let proc_err = |source| TreeError::Proc {
            path: opts.proc_root.clone(),
            source,
        };
        let c = CString::new(opts.proc_root.as_os_str().as_bytes())
            .map_err(|_| proc_err(std::io::Error::from(std::io::ErrorKind::InvalidInput)))?;
        // SAFETY: valid NUL-terminated path.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(proc_err(std::io::Error::last_os_error()));
        }
        // SAFETY: just opened, owned here alone.
        Ok(Scanner::over(unsafe { OwnedFd::from_raw_fd(fd) }, opts))
    }

    /// A scanner over a `/proc` directory already open (`dir`, opened `O_DIRECTORY`): one
    /// that a path no longer reaches, as the `/proc` of the PID namespace a contained foster
    /// left, under the fresh one mounted over it ([`crate::supervision::contain`]).
    pub fn over(dir: OwnedFd, opts: ScanOptions) -> Scanner {
        Scanner {
            proc_fd: dir,
            opts,
            bufs: Vec::new(),
            dents: vec![0; 32 * 1024],
            pids: Vec::new(),
            inos: HashMap::new(),
            listed_inos: Vec::new(),
            cache: HashMap::new(),
            owners: HashMap::new(),
            generation: 0,
            page_size: procfs::page_size(),
            empty: Arc::from(Vec::new()),
            kept: HashMap::new(),
            schedstat: false,
        }
        .checked_schedstat()
    }

    /// With [`ScanOptions::reuse_idle`], whether `schedstat` gives run times: without
    /// `CONFIG_SCHED_INFO` the file reads `0 0 0` (or is missing), and nothing could be reused.
    fn checked_schedstat(mut self) -> Scanner {
        if self.opts.reuse_idle > 0 {
            let mut buf = Vec::with_capacity(128);
            self.schedstat = open_read(self.proc_fd.as_raw_fd(), b"self/schedstat\0", &mut buf)
                .ok()
                .and_then(|_| parse_schedstat(&buf))
                .is_some_and(|[ns, _, runs]| ns > 0 && runs > 0);
            if !self.schedstat {
                tracing::debug!("schedstat gives no run times here: every stat read every scan");
            }
        }
        self
    }

    /// The options this scanner reads with.
    pub fn options(&self) -> &ScanOptions {
        &self.opts
    }

    /// How many pids the last listing found.
    pub fn listed(&self) -> usize {
        self.pids.len()
    }

    /// How many command lines the cache holds.
    pub fn cached(&self) -> usize {
        self.cache.len()
    }

    /// Lists the pids in the proc root (numeric entries), once, in pid order, with the inode
    /// number of each entry.
    fn list(&mut self) -> Result<(), TreeError> {
        self.pids.clear();
        self.listed_inos.clear();
        // SAFETY: opens "." relative to our directory descriptor: a fresh listing each scan.
        let fd = unsafe {
            libc::openat(
                self.proc_fd.as_raw_fd(),
                c".".as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(TreeError::Proc {
                path: self.opts.proc_root.clone(),
                source: std::io::Error::last_os_error(),
            });
        }
        // SAFETY: just opened, owned here alone.
        let dir = unsafe { OwnedFd::from_raw_fd(fd) };
        loop {
            // SAFETY: the kernel writes at most `dents.len()` bytes of records.
            let n = unsafe {
                libc::syscall(
                    libc::SYS_getdents64,
                    dir.as_raw_fd(),
                    self.dents.as_mut_ptr(),
                    self.dents.len(),
                )
            };
            if n < 0 {
                return Err(TreeError::Proc {
                    path: self.opts.proc_root.clone(),
                    source: std::io::Error::last_os_error(),
                });
            }
            if n == 0 {
                break;
            }
            let mut off = 0usize;
            while off < n as usize {
                // linux_dirent64: d_ino u64, d_off i64, d_reclen u16, d_type u8, d_name[].
                let rec = &self.dents[off..];
                let ino = u64::from_ne_bytes(rec[..8].try_into().expect("8 bytes"));
                let reclen = u16::from_ne_bytes([rec[16], rec[17]]) as usize;
                let name = &rec[19..reclen];
                let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
                if let Some(pid) = parse_pid(name) {
                    self.pids.push(pid);
                    self.listed_inos.push(ino);
                }
                off += reclen;
            }
        }
        Ok(())
    }

    /// Lists the pids in the proc root, in pid order, without reading any of them (the listing
    /// [`Scanner::scan`] starts with; for callers that choose which pids to read).
    pub fn list_pids(&mut self) -> Result<&[i32], TreeError> {
        self.list()?;
        self.pids.sort_unstable();
        Ok(&self.pids)
    }

    /// Lists the proc root and says what changed since the previous `relist` of this scanner,
    /// without reading any process. An entry's inode number is that of its `/proc/<pid>`
    /// directory, which the kernel keeps while the process lives and drops when it is reaped;
    /// so an entry with the same pid and inode as before is the same process, and a pid whose
    /// inode changed is held by another process now (it is then both vanished and appeared).
    /// An inode can also change when the kernel dropped the directory of a live process from
    /// its cache: the process then reads as appeared again, which costs a read, never a miss.
    /// The first listing reports every pid as appeared.
    pub fn relist(&mut self) -> Result<Relisting, TreeError> {
        self.list()?;
        let mut out = Relisting::default();
        let mut now = HashMap::with_capacity(self.pids.len());
        for (&pid, &ino) in self.pids.iter().zip(&self.listed_inos) {
            match self.inos.remove(&pid) {
                Some(old) if old == ino => {}
                Some(_) => {
                    out.vanished.push(pid);
                    out.appeared.push(pid);
                }
                None => out.appeared.push(pid),
            }
            now.insert(pid, ino);
        }
        out.vanished.extend(self.inos.keys().copied());
        out.vanished.sort_unstable();
        out.appeared.sort_unstable();
        self.inos = now;
        Ok(out)
    }

    /// Scans every pid listed in the proc root.
    pub fn scan(&mut self) -> Result<Snapshot, TreeError> {
        self.list()?;
        let mut pids = std::mem::take(&mut self.pids);
        let mut inos = std::mem::take(&mut self.listed_inos);
        if self.reusing() {
            // Each pid with its entry's inode (a pid held by another process has another).
            let mut pairs: Vec<(i32, u64)> =
                pids.iter().copied().zip(inos.iter().copied()).collect();
            pairs.sort_unstable();
            pids.clear();
            inos.clear();
            for (pid, ino) in pairs {
                pids.push(pid);
                inos.push(ino);
            }
        } else {
            pids.sort_unstable();
            inos.clear();
        }
        let snap = self.scan_listed(&pids, &inos);
        self.pids = pids;
        self.listed_inos = inos;
        Ok(snap)
    }

    /// Drops what was kept of `pid` ([`ScanOptions::reuse_idle`]): the next scan reads it in
    /// full. For a reader that learns of a birth under a pid (a pid used again).
    pub fn forget(&mut self, pid: i32) {
        self.kept.remove(&pid);
    }

    /// Whether this scanner reuses the readings of processes that have not run: asked to
    /// ([`ScanOptions::reuse_idle`]) on a kernel whose `schedstat` gives run times.
    pub fn reusing(&self) -> bool {
        self.opts.reuse_idle > 0 && self.schedstat
    }

    /// Scans exactly these pids, as if the listing had given them: a pid that does not exist is
    /// counted as vanished. Above [`PARALLEL_MIN`] pids the work is split over
    /// `opts.threads` scoped threads; the cache is only read while they run and updated after.
    pub fn scan_pids(&mut self, pids: &[i32]) -> Snapshot {
        self.scan_listed(pids, &[])
    }

    /// [`Scanner::scan_pids`], with the inode number of each pid's `/proc` entry where a listing
    /// gave them (`inos` in `pids` order, or empty).
    ///
    /// Reusing ([`ScanOptions::reuse_idle`]), a node whose process has not run stands; then
    /// the processes whose reading stood and whose parent has left since the previous scan
    /// (gone, another process under its pid, or exiting) are read again at once: the kernel
    /// hands such an orphan to a reaper without it running, and its parent pid must show it.
    fn scan_listed(&mut self, pids: &[i32], inos: &[u64]) -> Snapshot {
        self.generation += 1;
        let generation = self.generation;
        let threads = if pids.len() >= PARALLEL_MIN {
            self.opts.threads.max(1)
        } else {
            1
        };
        while self.bufs.len() < threads {
            self.bufs.push(Vec::with_capacity(4096));
        }
        let reuse = if self.reusing() {
            self.opts.reuse_idle
        } else {
            0
        };
        // The buffers are taken out while the scan's contexts borrow the rest of the scanner.
        let mut bufs = std::mem::take(&mut self.bufs);
        let ctx = self.ctx(generation, reuse, false);
        let mut outs = read_split(&ctx, pids, inos, &mut bufs, threads);
        let mut stats = ScanStats {
            listed: pids.len(),
            ..ScanStats::default()
        };
        let mut nodes = Vec::with_capacity(pids.len());
        let mut reused = Vec::new();
        for out in &mut outs {
            stats.add(&out.stats);
            reused.extend(out.reused.drain(..).map(|i| i + nodes.len()));
            nodes.append(&mut out.nodes);
        }
        if reuse > 0 {
            let departed = self.keep(&reused, &nodes, &mut outs, generation);
            let again = self.read_orphans(&reused, &departed, &mut nodes, &mut stats, &mut bufs[0]);
            outs.extend(again);
        }
        self.bufs = bufs;
        stats.read = nodes.len();
        self.update_caches(&mut outs, generation);
        let mut snap = Snapshot::from_nodes(nodes);
        snap.stats = stats;
        snap
    }

    /// In a reusing scan, reads again the processes whose reading stood but whose parent
    /// departed since the previous scan (their parent pid changed without their running):
    /// their nodes replaced (or dropped, gone now), the stats and the kept readings updated.
    fn read_orphans(
        &mut self,
        reused: &[usize],
        departed: &[i32],
        nodes: &mut Vec<ProcessNode>,
        stats: &mut ScanStats,
        buf: &mut Vec<u8>,
    ) -> Option<Chunk> {
        let mut again: Vec<i32> = reused
            .iter()
            .map(|&i| &nodes[i])
            .filter(|n| departed.binary_search(&n.ppid).is_ok())
            .map(|n| n.pid)
            .collect();
        again.sort_unstable();
        if again.is_empty() {
            return None;
        }
        let inos: Vec<u64> = again
            .iter()
            .map(|pid| self.kept.get(pid).map_or(0, |k| k.ino))
            .collect();
        let (generation, reuse) = (self.generation, self.opts.reuse_idle);
        let mut out = self.ctx(generation, reuse, true).read(&again, &inos, buf);
        let mut fresh: HashMap<i32, ProcessNode> =
            out.nodes.drain(..).map(|n| (n.pid, n)).collect();
        nodes.retain_mut(|n| {
            if again.binary_search(&n.pid).is_err() {
                return true;
            }
            match fresh.remove(&n.pid) {
                Some(f) => {
                    *n = f;
                    true
                }
                None => false,
            }
        });
        stats.add(&out.stats);
        stats.reused -= again.len();
        for (pid, k) in out.kept_fresh.drain(..) {
            self.kept.insert(pid, k);
        }
        Some(out)
    }

    /// The command line and owner caches brought up to scan `generation`: what the chunks
    /// used kept, what they read added, the rest forgotten.
    fn update_caches(&mut self, outs: &mut [Chunk], generation: u64) {
        if self.opts.cmdline {
            for out in outs.iter_mut() {
                for id in out.hits.drain(..) {
                    if let Some(e) = self.cache.get_mut(&id) {
                        e.seen = generation;
                    }
                }
                for (id, mut e) in out.fresh.drain(..) {
                    e.seen = generation;
                    self.cache.insert(id, e);
                }
            }
            self.cache.retain(|_, e| e.seen == generation);
        }
        if self.opts.uid && self.opts.owner_recheck > 0 {
            for out in outs.iter_mut() {
                for id in out.owner_hits.drain(..) {
                    if let Some(e) = self.owners.get_mut(&id) {
                        e.seen = generation;
                    }
                }
                for (id, e) in out.owners_fresh.drain(..) {
                    self.owners.insert(id, e);
                }
            }
            self.owners.retain(|_, e| e.seen == generation);
        }
    }
}

impl Scanner {
    /// What the threads of scan number `generation` read with (`force`: every `stat`, whatever
    /// `schedstat` says, as the second pass of a reusing scan does).
    fn ctx(&self, generation: u64, reuse: u64, force: bool) -> Ctx<'_> {
        Ctx {
            dir: self.proc_fd.as_raw_fd(),
            cmdline: self.opts.cmdline,
            uid: self.opts.uid,
            owner_recheck: self.opts.owner_recheck,
            owners: &self.owners,
            generation,
            cache: &self.cache,
            empty: &self.empty,
            page_size: self.page_size,
            reuse,
            kept: &self.kept,
            force,
        }
    }

    /// Brings [`Scanner::kept`] up to this scan (`reused`: the indices in `nodes` of the
    /// readings that stood; the chunks' fresh readings) and returns the pids whose process has
    /// left since the previous scan: gone or not scanned now, held by another process, or
    /// found exiting now. Their children, if their readings stood, are to be read again.
    fn keep(
        &mut self,
        reused: &[usize],
        nodes: &[ProcessNode],
        outs: &mut [Chunk],
        generation: u64,
    ) -> Vec<i32> {
        let mut departed = Vec::new();
        for &i in reused {
            if let Some(k) = self.kept.get_mut(&nodes[i].pid) {
                k.seen = generation;
            }
        }
        let leaving = |n: &ProcessNode| matches!(n.state, b'Z' | b'X');
        for out in outs.iter_mut() {
            for (pid, k) in out.kept_fresh.drain(..) {
                if let Some(old) = self.kept.get(&pid)
                    && (old.node.identity != k.node.identity
                        || (leaving(&k.node) && !leaving(&old.node)))
                {
                    departed.push(pid);
                }
                self.kept.insert(pid, k);
            }
        }
        self.kept.retain(|&pid, k| {
            if k.seen != generation {
                departed.push(pid);
            }
            k.seen == generation
        });
        departed.sort_unstable();
        departed.dedup();
        departed
    }

    /// Reads the command line of every process of `snap` that has none yet (kernel threads
    /// excepted), without the cache: for one-shot use after a scan without command lines, such
    /// as `foster tree -a --root PID`, which needs them only for the subtree it shows.
    pub fn read_cmdlines(&mut self, snap: &mut Snapshot) {
        let mut nodes: Vec<&mut ProcessNode> = snap
            .nodes_mut()
            .filter(|n| !n.kernel_thread && n.cmdline.is_empty())
            .collect();
        let (reads, unreadable) = self.read_each(&mut nodes, b"cmdline", |n, buf| {
            n.cmdline = split_cmdline(buf).into();
        });
        snap.stats.cmdline_reads += reads;
        snap.stats.cmdline_unreadable += unreadable;
    }

    /// The threads of `pid` other than its main one, by thread id: each one's id, state and name
    /// (`/proc/<pid>/task/<tid>/stat`, the name parsed as a process's is). Empty when the
    /// process is gone or its threads cannot be listed; a thread that ends meanwhile is left
    /// out. At most [`MAX_THREADS_SHOWN`] are read.
    pub fn read_threads(&mut self, pid: i32) -> Vec<Thread> {
        let dir = self.opts.proc_root.join(pid.to_string()).join("task");
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return Vec::new();
        };
        let mut tids: Vec<i32> = entries
            .filter_map(|e| parse_pid(e.ok()?.file_name().as_bytes()))
            .filter(|&tid| tid != pid)
            .take(MAX_THREADS_SHOWN)
            .collect();
        tids.sort_unstable();
        if self.bufs.is_empty() {
            self.bufs.push(Vec::with_capacity(4096));
        }
        let mut out = Vec::with_capacity(tids.len());
        for tid in tids {
            let path = format!("{pid}/task/{tid}/stat\0");
            let buf = &mut self.bufs[0];
            if read_at(self.proc_fd.as_raw_fd(), path.as_bytes(), buf, false).is_err() {
                continue;
            }
            if let Some(stat) = parse_stat(buf) {
                out.push(Thread {
                    tid,
                    state: stat.state,
                    comm: stat.comm.to_vec(),
                });
            }
        }
        out
    }

    /// The `NSpid` line of `/proc/<pid>/status`: the pid of `pid` in every PID namespace from
    /// the one this proc root shows down to the process's own (one entry when they are the
    /// same). `None` when the process is gone or the line cannot be read.
    pub fn read_nspid(&mut self, pid: i32) -> Option<Vec<i32>> {
        if self.bufs.is_empty() {
            self.bufs.push(Vec::with_capacity(4096));
        }
        let mut path = [0u8; 40];
        let len = pid_path(&mut path, pid, b"status");
        let buf = &mut self.bufs[0];
        read_at(self.proc_fd.as_raw_fd(), &path[..len], buf, false).ok()?;
        parse_nspid(buf)
    }

    /// The `NSpid` line of the process a pidfd of this process holds (its
    /// `/proc/self/fdinfo/<fd>`): the process's pid in every PID namespace from the one this
    /// proc root shows down to its own, as [`Scanner::read_nspid`] gives, but found by the
    /// pidfd, whatever the process's pid here. `None` once the process has been reaped (the
    /// kernel writes -1) or when the line cannot be read.
    pub fn read_pidfd_nspid(&mut self, pidfd: std::os::fd::BorrowedFd<'_>) -> Option<Vec<i32>> {
        if self.bufs.is_empty() {
            self.bufs.push(Vec::with_capacity(4096));
        }
        let proc = self.proc_fd.as_fd();
        crate::process::identity::read_pidfd_info(Some(proc), pidfd, &mut self.bufs[0])
            .ok()?
            .nspid
    }

    /// Reads `/proc/<pid>/environ` of each of `nodes` (a zombie's or an unreadable one stays
    /// empty) and keeps, in [`ProcessNode::environ`], only the `NAME=VALUE` entries whose name
    /// starts with `prefix`. Returns how many could not be read. The caller decides which
    /// nodes need it: the supervisor reads it once per identity, for the few processes whose
    /// lineage it must learn from the environment.
    ///
    /// A read that may have met an `execve` keeps nothing and marks the node
    /// [`ProcessNode::in_exec`], to be read again once it is out: the process's `stat`, read
    /// just before and just after, shows it in the middle of one, or another program's memory
    /// after than before (its code and stack addresses). The scan's own `stat` read cannot
    /// tell: a process can enter an `execve` between that read and this one, and its
    /// environment reads empty there.
    pub fn read_environ(&mut self, nodes: &mut [&mut ProcessNode], prefix: &[u8]) -> usize {
        let dir = self.proc_fd.as_raw_fd();
        if self.bufs.is_empty() {
            self.bufs.push(Vec::with_capacity(4096));
        }
        let buf = &mut self.bufs[0];
        let mut path = [0u8; 40];
        // The memory a `stat` line shows (0, 0 once exiting): None in the middle of an exec,
        // or unreadable.
        let memory = |buf: &mut Vec<u8>, path: &mut [u8; 40], pid: i32| {
            let len = pid_path(path, pid, b"stat");
            read_at(dir, &path[..len], buf, false).ok()?;
            let f = parse_stat(buf)?;
            if f.flags & PF_EXITING != 0 {
                Some((0, 0))
            } else {
                (f.startcode != 0).then_some((f.startcode, f.startstack))
            }
        };
        let mut unreadable = 0;
        for n in nodes.iter_mut() {
            let before = memory(buf, &mut path, n.pid);
            let len = pid_path(&mut path, n.pid, b"environ");
            let read = read_at(dir, &path[..len], buf, false);
            let environ: Vec<Vec<u8>> = buf
                .split(|&b| b == 0)
                .filter(|v| !v.is_empty() && v.starts_with(prefix))
                .map(<[u8]>::to_vec)
                .collect();
            let after = memory(buf, &mut path, n.pid);
            // Exiting since (its memory is gone: 0, 0) does not change what was read.
            let same = before.is_some() && (after == before || after == Some((0, 0)));
            match read {
                Err(_) => unreadable += 1,
                Ok(_) if same => n.environ = environ.into(),
                Ok(_) => n.in_exec = true,
            }
        }
        unreadable
    }

    /// Reads `/proc/<pid>/<file>` of every node and hands the contents to `take`, split over
    /// threads when there are many. Returns (reads, unreadable).
    fn read_each(
        &mut self,
        nodes: &mut [&mut ProcessNode],
        file: &[u8],
        take: impl Fn(&mut ProcessNode, &[u8]) + Sync,
    ) -> (usize, usize) {
        let dir = self.proc_fd.as_raw_fd();
        let threads = if nodes.len() >= PARALLEL_MIN {
            self.opts.threads.max(1)
        } else {
            1
        };
        while self.bufs.len() < threads {
            self.bufs.push(Vec::with_capacity(4096));
        }
        let per = nodes.len().div_ceil(threads).max(1);
        let read_chunk = |chunk: &mut [&mut ProcessNode], buf: &mut Vec<u8>| {
            let mut path = [0u8; 40];
            let mut unreadable = 0;
            for n in chunk.iter_mut() {
                let len = pid_path(&mut path, n.pid, file);
                match read_at(dir, &path[..len], buf, false) {
                    Ok(_) => take(n, buf),
                    Err(_) => unreadable += 1,
                }
            }
            unreadable
        };
        let reads = nodes.len();
        let unreadable: usize = if threads == 1 {
            read_chunk(nodes, &mut self.bufs[0])
        } else {
            std::thread::scope(|scope| {
                let handles: Vec<_> = nodes
                    .chunks_mut(per)
                    .zip(self.bufs.iter_mut())
                    .map(|(chunk, buf)| scope.spawn(move || read_chunk(chunk, buf)))
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().expect("proc read thread"))
                    .sum()
            })
        };
        (reads, unreadable)
    }
}

/// What changed in the proc root between two listings ([`Scanner::relist`]), by pid.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Relisting {
    /// Pids listed now that were not, or that another process holds now.
    pub appeared: Vec<i32>,
    /// Pids listed before that are gone, or that another process holds now.
    pub vanished: Vec<i32>,
}

/// `pids` read with `ctx`, on `threads` threads (one buffer each) or on this one.
fn read_split(
    ctx: &Ctx<'_>,
    pids: &[i32],
    inos: &[u64],
    bufs: &mut [Vec<u8>],
    threads: usize,
) -> Vec<Chunk> {
    if threads == 1 {
        return vec![ctx.read(pids, inos, &mut bufs[0])];
    }
    let per = pids.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let handles: Vec<_> = pids
            .chunks(per)
            .enumerate()
            .zip(bufs.iter_mut())
            .map(|((i, chunk), buf)| {
                let inos = inos.get(i * per..(i * per + chunk.len()).min(inos.len()));
                scope.spawn(move || ctx.read(chunk, inos.unwrap_or(&[]), buf))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("scan thread"))
            .collect()
    })
}

/// Below this many pids a scan stays on the calling thread: starting threads would cost more.
pub const PARALLEL_MIN: usize = 256;

/// [`parse_nspid`] of `/proc/<pid>/status`, for a one-off read without a [`Scanner`].
pub fn nspid(pid: i32) -> Option<Vec<i32>> {
    parse_nspid(&std::fs::read(format!("/proc/{pid}/status")).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::procstat;
    use procfs::FromRead;
    use procfs::process::Stat;

    #[test]
    fn nspid_lines_are_read_outermost_first() {
        let status = b"Name:\tsh\nTgid:\t42\nNgid:\t0\nPid:\t42\nNSpid:\t42\t7\t1\nNSpgid:\t42\n";
        assert_eq!(parse_nspid(status), Some(vec![42, 7, 1]));
        assert_eq!(parse_nspid(b"NSpid:\t5\n"), Some(vec![5]));
        assert_eq!(parse_nspid(b"Pid:\t5\n"), None, "no NSpid line");
        assert_eq!(
            parse_nspid(b"NSpid:\t5\tx\n"),
            None,
            "a field that is not a pid"
        );
        assert_eq!(parse_nspid(b"NSpid:\n"), None, "no pid at all");
        let me = std::process::id() as i32;
        let mut s = Scanner::new(ScanOptions::default()).unwrap();
        let mine = s.read_nspid(me).expect("our own status");
        assert_eq!(
            mine.first(),
            Some(&me),
            "/proc shows this process's namespace"
        );
        assert_eq!(nspid(me), Some(mine));
    }

    /// A pidfd's `fdinfo` has the same `NSpid` line as `status` (and -1 once the process is
    /// reaped, which is no pid).
    #[test]
    fn nspid_lines_of_a_pidfd_s_fdinfo() {
        let live =
            b"pos:\t0\nflags:\t02000002\nmnt_id:\t15\nino:\t1057\nPid:\t28824\nNSpid:\t28824\t5\n";
        assert_eq!(parse_nspid(live), Some(vec![28824, 5]));
        let reaped = b"pos:\t0\nflags:\t02000002\nmnt_id:\t15\nino:\t1057\nPid:\t-1\nNSpid:\t-1\n";
        assert_eq!(parse_nspid(reaped), None);
        // Read for real: a child's pidfd, here and once it is reaped.
        let mut child = std::process::Command::new("/bin/sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let fd = crate::process::identity::pidfd_open(pid).unwrap();
        let mut s = Scanner::new(ScanOptions::default()).unwrap();
        let got = s.read_pidfd_nspid(std::os::fd::AsFd::as_fd(&fd));
        assert_eq!(got.as_ref().and_then(|n| n.first()), Some(&pid), "{got:?}");
        assert_eq!(got, s.read_nspid(pid));
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(s.read_pidfd_nspid(std::os::fd::AsFd::as_fd(&fd)), None);
    }

    /// Why `NSpid` is not read through procfs's `Status`: the kernel writes a name's bytes
    /// into `Name:` as they are (only `\\` and newlines are escaped), and procfs refuses the
    /// whole file when they are not UTF-8, so a process could hide its `NSpid` by its name.
    #[test]
    fn nspid_survives_a_name_that_is_not_utf8() {
        use procfs::FromBufRead;
        let mine = std::fs::read("/proc/self/status").unwrap();
        assert!(procfs::process::Status::from_buf_read(&mine[..]).is_ok());
        let mut hostile = b"Name:\t\xff\xfe)\n".to_vec();
        let after_name = mine.iter().position(|&b| b == b'\n').unwrap() + 1;
        hostile.extend_from_slice(&mine[after_name..]);
        assert!(procfs::process::Status::from_buf_read(&hostile[..]).is_err());
        assert_eq!(parse_nspid(&hostile), parse_nspid(&mine));
        assert!(parse_nspid(&hostile).is_some());
    }

    #[test]
    fn paths_are_built_without_allocating() {
        let mut p = [0u8; 40];
        let n = pid_path(&mut p, 4194304, b"stat");
        assert_eq!(&p[..n], b"4194304/stat\0");
        let n = pid_path(&mut p, 1, b"cmdline");
        assert_eq!(&p[..n], b"1/cmdline\0");
    }

    #[test]
    fn cmdline_splits_at_nul() {
        assert_eq!(split_cmdline(b""), Vec::<Vec<u8>>::new());
        assert_eq!(
            split_cmdline(b"sleep\x0010\x00"),
            vec![b"sleep".to_vec(), b"10".to_vec()]
        );
        assert_eq!(
            split_cmdline(b"a\x00\x00b\x00"),
            vec![b"a".to_vec(), b"".to_vec(), b"b".to_vec()]
        );
        // A process that rewrote its arguments without NULs.
        assert_eq!(
            split_cmdline(b"nginx: worker"),
            vec![b"nginx: worker".to_vec()]
        );
    }

    #[test]
    fn schedstat_lines_give_their_three_numbers() {
        assert_eq!(
            parse_schedstat(b"1016326 52013 7\n"),
            Some([1_016_326, 52_013, 7])
        );
        assert_eq!(parse_schedstat(b"0 0 0\n"), Some([0, 0, 0]));
        for bad in [
            &b""[..],
            b"\n",
            b"1 2\n",
            b"1 2 3 4\n",
            b"1  2 3\n",
            b"-1 2 3\n",
            b"1 2 x\n",
            b"99999999999999999999999 1 1\n",
        ] {
            assert_eq!(
                parse_schedstat(bad),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn pid_names_only() {
        assert_eq!(parse_pid(b"123"), Some(123));
        assert_eq!(parse_pid(b"self"), None);
        assert_eq!(parse_pid(b"0"), None);
        assert_eq!(parse_pid(b""), None);
        assert_eq!(parse_pid(b"99999999999"), None);
    }

    /// A `stat` line as the kernel writes it (52 fields), with this name and a few fields set.
    fn stat_line(name: &[u8], pid: i32, ppid: i32, start: u64, arg_start: u64) -> Vec<u8> {
        let mut v = format!("{pid} (").into_bytes();
        v.extend_from_slice(name);
        v.extend_from_slice(
            format!(
                ") S {ppid} {pid} {pid} 34816 -1 4194560 12 0 3 0 17 9 0 0 20 0 3 0 {start} \
                 11534336 812 18446744073709551615 1 1 0 0 0 0 0 0 65536 0 0 0 17 1 0 0 0 0 0 \
                 4096 4200 4250 {arg_start} 4300 4400 4500 0\n"
            )
            .as_bytes(),
        );
        v
    }

    /// Hostile names: the fields come right after the last `)`, the name keeps its exact bytes
    /// (procfs would have replaced those that are not UTF-8), and procfs agrees on the fields.
    #[test]
    fn stat_lines_with_hostile_names_keep_the_exact_name() {
        let long_kthread = [b'k'; 64]; // a kernel thread's name in `stat` can reach 64 bytes
        let very_long = [b')'; 4096];
        let names: &[&[u8]] = &[
            b"sleep",
            b"a) 1 2 3) S 9",
            b")",
            b") (x) y",
            b"(",
            b"a b  c",
            b" ",
            b"new\nline\xff\xfe",
            b"\n",
            b"\xff\xfe\x80",
            b"\xe2\x82)",
            b"\x1b]0;owned\x07",
            b"\0",
            b"",
            b"exactly15bytes!",
            &long_kthread,
            &very_long,
        ];
        for name in names {
            let line = stat_line(name, 4242, 17, 123456, 0x7ffd_0000);
            let f = parse_stat(&line).unwrap_or_else(|| panic!("{name:?}"));
            assert_eq!(f.comm, *name);
            assert_eq!((f.pid, f.ppid, f.pgrp, f.session), (4242, 17, 4242, 4242));
            assert_eq!(f.state, b'S');
            assert_eq!(f.start_time, 123456);
            assert_eq!(f.arg_start, Some(0x7ffd_0000));
            assert_eq!(f.arg_end, Some(4300));
            assert_eq!((f.startcode, f.startstack), (1, 0));
            assert_eq!((f.utime, f.stime, f.num_threads, f.rss), (17, 9, 3, 812));
            assert_eq!(f.flags & procstat::PF_KTHREAD, 0);
            agrees_with_procfs(&line);
        }
    }

    /// The hand parser reads every field foster keeps as procfs's `Stat` (which parses all
    /// of them, by the kernel's format) does; only the name differs, procfs's being lossy.
    fn agrees_with_procfs(line: &[u8]) {
        let h = parse_stat(line).expect("the hand parser reads it");
        let p = Stat::from_read(line).expect("procfs reads it");
        assert_eq!(
            (h.pid, h.ppid, h.pgrp, h.session, h.tty_nr, h.tpgid),
            (p.pid, p.ppid, p.pgrp, p.session, p.tty_nr, p.tpgid)
        );
        assert_eq!(h.state as char, p.state);
        assert_eq!(h.flags, u64::from(p.flags));
        assert_eq!((h.utime, h.stime), (p.utime, p.stime));
        assert_eq!((h.num_threads, h.start_time), (p.num_threads, p.starttime));
        assert_eq!((h.vsize, h.rss as u64), (p.vsize, p.rss));
        assert_eq!((h.startcode, h.startstack), (p.startcode, p.startstack));
        assert_eq!((h.arg_start, h.arg_end), (p.arg_start, p.arg_end));
        if std::str::from_utf8(h.comm).is_ok() {
            assert_eq!(h.comm, p.comm.as_bytes());
        } else {
            assert_ne!(p.comm.as_bytes(), h.comm, "procfs's name is lossy");
        }
    }

    /// Every process of this machine: the hand parser and procfs agree on the real lines.
    #[test]
    fn real_stat_lines_agree_with_procfs() {
        let mut n = 0;
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            if parse_pid(e.file_name().as_bytes()).is_none() {
                continue;
            }
            if let Ok(line) = std::fs::read(e.path().join("stat")) {
                agrees_with_procfs(&line);
                n += 1;
            }
        }
        assert!(n > 0);
    }

    /// Lines without the kernel's shape around the name are refused, never a panic (procfs
    /// alone panics on several of these).
    #[test]
    fn malformed_stat_lines_are_refused() {
        for line in [
            &b""[..],
            b"(x) S 1 2 3",
            b" (x) S 1 2 3",
            b"1(x) S 1 2 3",
            b"1 (x)",
            b"1 (x) ",
            b"1 (x)\n",
            b"1 (x)S 1",
            b"1 (x)\xff\xff 1",
            b"1 (x) \xe2\x82 1",
            b"1 ) (x S 1",
            b"\xe2\x82\xac (x) S 1",
            b"1 (x) S 1 2",
            b"1 (x) S x 2 3 4",
        ] {
            assert!(parse_stat(line).is_none(), "{line:?}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// Any three numbers round-trip; no text makes the `schedstat` parser panic.
        #[test]
        fn schedstat_round_trips_and_never_panics(
            a: u64, b: u64, c: u64,
            junk in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
        ) {
            let line = format!("{a} {b} {c}\n");
            proptest::prop_assert_eq!(parse_schedstat(line.as_bytes()), Some([a, b, c]));
            let _ = parse_schedstat(&junk);
        }

        /// No text makes the `NSpid` parser panic, and what it gives is positive pids only.
        #[test]
        fn any_status_text_parses_without_panic(
            head in proptest::collection::vec(proptest::num::u8::ANY, 0..200),
            fields in proptest::collection::vec("-?[0-9]{0,12}|[ \t]{1,3}|x", 0..8),
            tail in proptest::collection::vec(proptest::num::u8::ANY, 0..50),
        ) {
            let mut text = head;
            text.extend_from_slice(b"\nNSpid:");
            for f in &fields {
                text.extend_from_slice(f.as_bytes());
                text.push(b'\t');
            }
            text.extend_from_slice(&tail);
            if let Some(p) = parse_nspid(&text) {
                proptest::prop_assert!(!p.is_empty() && p.iter().all(|&x| x > 0), "{:?}", p);
            }
        }

        /// Any name the kernel could show, and longer: the exact bytes back, and the same
        /// fields as the hand parser.
        #[test]
        fn any_name_round_trips(
            name in proptest::collection::vec(proptest::num::u8::ANY, 0..300),
            pid in 1..i32::MAX,
            ppid in 0..i32::MAX,
            start: u64,
            arg_start: u64,
        ) {
            let line = stat_line(&name, pid, ppid, start, arg_start);
            let f = parse_stat(&line).expect("a kernel-shaped line parses");
            proptest::prop_assert_eq!(f.comm, &name[..]);
            proptest::prop_assert_eq!((f.pid, f.ppid, f.start_time), (pid, ppid, start));
            proptest::prop_assert_eq!(f.arg_start, Some(arg_start));
            agrees_with_procfs(&line);
        }

        /// No line panics: any bytes, and lines built from the characters the cutting looks at.
        #[test]
        fn no_line_panics(
            raw in proptest::collection::vec(proptest::num::u8::ANY, 0..200),
            parts in proptest::collection::vec(
                proptest::sample::select(vec![
                    &b"1"[..], b" ", b"(", b")", b"S", b"\n", b"\xff", b"\xe2\x82", b"-", b"0",
                ]),
                0..40,
            ),
        ) {
            let _ = parse_stat(&raw);
            let _ = parse_stat(&parts.concat());
        }
    }

    #[test]
    fn own_process_is_scanned_with_cmdline_and_uid() {
        let mut s = Scanner::new(ScanOptions::default()).unwrap();
        let snap = s.scan().unwrap();
        let me = snap
            .by_pid(std::process::id() as i32)
            .expect("own pid in the scan");
        // SAFETY: geteuid has no preconditions.
        assert_eq!(me.uid, unsafe { libc::geteuid() });
        let argv0 = std::env::args_os().next().unwrap();
        assert_eq!(me.cmdline[0], argv0.as_bytes());
        assert!(me.rss_bytes > 0);
        assert!(snap.stats.read > 0 && snap.stats.read <= snap.stats.listed);
        let first = snap.stats.cmdline_reads;
        assert!(first > 0);
        // A second scan takes command lines from the cache.
        let again = s.scan().unwrap();
        assert!(
            again.stats.cmdline_reads < first,
            "{} then {}",
            first,
            again.stats.cmdline_reads
        );
        assert_eq!(again.by_pid(me.pid).unwrap().cmdline, me.cmdline);
        // Kernel threads, where visible, have no command line.
        for n in again.nodes().filter(|n| n.kernel_thread) {
            assert!(
                n.cmdline.is_empty(),
                "kernel thread {} has a cmdline",
                n.pid
            );
        }
    }

    #[test]
    fn parallel_scan_matches_sequential() {
        let me = std::process::id() as i32;
        // Enough pids to split over threads: two real ones and many that cannot exist.
        let mut pids = vec![1, me];
        pids.extend((0..PARALLEL_MIN as i32 + 10).map(|k| i32::MAX - k));
        let mut results = Vec::new();
        for threads in [1, 2, 3] {
            let opts = ScanOptions {
                threads,
                ..ScanOptions::default()
            };
            let mut s = Scanner::new(opts).unwrap();
            let snap = s.scan_pids(&pids);
            assert_eq!(snap.stats.listed, pids.len());
            assert_eq!(snap.stats.read, 2, "{:?}", snap.stats);
            assert_eq!(snap.stats.vanished, pids.len() - 2);
            assert_eq!(s.cached(), 2);
            // The second scan takes both command lines from the cache, which keeps them.
            let again = s.scan_pids(&pids);
            assert_eq!(again.stats.cmdline_reads, 0, "{:?}", again.stats);
            assert_eq!(s.cached(), 2);
            let mut ids: Vec<_> = again
                .nodes()
                .map(|n| (n.identity, n.cmdline.to_vec()))
                .collect();
            ids.sort();
            results.push(ids);
        }
        assert_eq!(results[0], results[1]);
        assert_eq!(results[0], results[2]);
    }

    #[test]
    fn command_lines_read_after_the_scan() {
        let me = std::process::id() as i32;
        let argv0 = std::env::args_os().next().unwrap();
        for threads in [1, 2] {
            let opts = ScanOptions {
                cmdline: false,
                threads,
                ..ScanOptions::default()
            };
            let mut s = Scanner::new(opts).unwrap();
            let mine = s.scan_pids(&[me]).by_pid(me).unwrap().clone();
            assert!(mine.cmdline.is_empty());
            // Enough nodes for the parallel path: this process and many that cannot exist.
            let mut nodes = vec![mine];
            nodes.extend(
                (0..PARALLEL_MIN as i32).map(|k| ProcessNode::new(i32::MAX - k, 0, 1, b"x")),
            );
            let mut snap = Snapshot::from_nodes(nodes);
            s.read_cmdlines(&mut snap);
            assert_eq!(snap.by_pid(me).unwrap().cmdline[0], argv0.as_bytes());
            assert_eq!(snap.stats.cmdline_reads, PARALLEL_MIN + 1);
            assert_eq!(snap.stats.cmdline_unreadable, PARALLEL_MIN);
        }
    }

    /// A hand-made proc root holding one process, pid 7: its `stat` (with this start time and
    /// argument area), owned by `uid`, and its `cmdline`.
    fn fake_process(root: &std::path::Path, start: u64, arg_start: u64, uid: u32, cmd: &[u8]) {
        std::fs::create_dir_all(root.join("7")).unwrap();
        let stat = root.join("7/stat");
        std::fs::write(&stat, stat_line(b"x", 7, 1, start, arg_start)).unwrap();
        std::fs::write(root.join("7/cmdline"), cmd).unwrap();
        std::os::unix::fs::chown(&stat, Some(uid), None).unwrap();
    }

    /// With `owner_recheck`, an owner is read once per identity and program: a pid held by
    /// another process (another start time) or an exec (another argument area) is read at
    /// once, with its command line; the same process's owner is read again after that many
    /// scans (a `setuid` without an exec), and not before.
    #[test]
    fn cached_owners_are_keyed_by_identity_and_program() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: giving a file away to another owner needs root");
            return;
        }
        let root = std::env::temp_dir().join(format!("foster-owners-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        fake_process(&root, 42, 100, 4321, b"first\0");
        let mut s = Scanner::new(ScanOptions {
            proc_root: root.clone(),
            owner_recheck: 3,
            ..ScanOptions::default()
        })
        .unwrap();
        let seen = |s: &mut Scanner| {
            let snap = s.scan().unwrap();
            let n = snap.by_pid(7).unwrap();
            (n.uid, n.cmdline.to_vec())
        };
        assert_eq!(seen(&mut s), (4321, vec![b"first".to_vec()]));
        // The pid is another process's now: its owner and command at once.
        fake_process(&root, 43, 100, 1234, b"second\0");
        assert_eq!(seen(&mut s), (1234, vec![b"second".to_vec()]));
        // It runs another program: read at once.
        fake_process(&root, 43, 200, 2345, b"third\0");
        assert_eq!(seen(&mut s), (2345, vec![b"third".to_vec()]));
        // The same program's owner changes: the cache answers until it is 3 scans old.
        fake_process(&root, 43, 200, 3456, b"third\0");
        assert_eq!(seen(&mut s).0, 2345, "read from the cache");
        assert_eq!(seen(&mut s).0, 2345, "read from the cache");
        assert_eq!(seen(&mut s).0, 3456, "read again after 3 scans");
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// A real process that changes its owner and then runs another program shows the new
    /// owner and command at the next scan, however long the owner is otherwise cached.
    #[test]
    fn an_exec_shows_the_new_owner_and_command_at_once() {
        use std::ffi::CString;
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: changing a process's owner needs root");
            return;
        }
        // Everything the child needs, made before the fork: it only calls the system after.
        let sleep = CString::new("/bin/sleep").unwrap();
        let arg = CString::new("3600").unwrap();
        let argv = [sleep.as_ptr(), arg.as_ptr(), std::ptr::null()];
        let mut go = [0i32; 2];
        let mut execd = [0i32; 2];
        // SAFETY: pipe2 fills two integers of a stack array.
        unsafe {
            assert_eq!(libc::pipe2(go.as_mut_ptr(), libc::O_CLOEXEC), 0);
            assert_eq!(libc::pipe2(execd.as_mut_ptr(), libc::O_CLOEXEC), 0);
        }
        // SAFETY: the child makes only raw system calls on data prepared before the fork.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            // The child: waits for the go, becomes uid 4321, runs sleep (the exec closes
            // `execd`, which the parent sees as the end of the pipe).
            // SAFETY: in the child: raw system calls on data prepared before the fork, then exec or
            // _exit.
            unsafe {
                let mut b = 0u8;
                libc::read(go[0], (&raw mut b).cast(), 1);
                if libc::setresuid(4321, 4321, 4321) == 0 {
                    libc::execv(sleep.as_ptr(), argv.as_ptr());
                }
                libc::_exit(127);
            }
        }
        // SAFETY: closes descriptors this test opened.
        unsafe {
            libc::close(go[0]);
            libc::close(execd[1]);
        }
        let mut s = Scanner::new(ScanOptions {
            owner_recheck: 1_000_000,
            ..ScanOptions::default()
        })
        .unwrap();
        let before = s.scan_pids(&[pid]);
        let n = before.by_pid(pid).expect("the child is scanned");
        assert_eq!(n.uid, 0);
        // Go, and wait for the exec: the end of `execd`.
        // SAFETY: a write from a stack buffer and a read into one, on this test's pipes.
        unsafe {
            assert_eq!(libc::write(go[1], [1u8].as_ptr().cast(), 1), 1);
            let mut b = 0u8;
            assert_eq!(libc::read(execd[0], (&raw mut b).cast(), 1), 0);
            libc::close(go[1]);
            libc::close(execd[0]);
        }
        let after = s.scan_pids(&[pid]);
        let n = after.by_pid(pid).expect("the child is scanned");
        let (uid, cmdline) = (n.uid, n.cmdline.to_vec());
        // SAFETY: ends and reaps this test's own child, by pid.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            let mut status = 0;
            assert_eq!(libc::waitpid(pid, &mut status, 0), pid);
        }
        assert_eq!(uid, 4321);
        assert_eq!(cmdline, vec![b"/bin/sleep".to_vec(), b"3600".to_vec()]);
    }

    /// The owner is the owner of the `stat` file, read only when asked for.
    #[test]
    fn the_owner_is_read_only_when_asked_for() {
        let root = std::env::temp_dir().join(format!("foster-owner-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("7")).unwrap();
        let stat = root.join("7/stat");
        std::fs::write(&stat, stat_line(b"x", 7, 1, 42, 0)).unwrap();
        // SAFETY: geteuid has no preconditions.
        let mine = unsafe { libc::geteuid() };
        let owner = if mine == 0 {
            // Root gives the file away, so that the owner read cannot be root's by chance.
            std::os::unix::fs::chown(&stat, Some(4321), None).unwrap();
            4321
        } else {
            mine
        };
        for (uid, want) in [(true, owner), (false, 0)] {
            let mut s = Scanner::new(ScanOptions {
                proc_root: root.clone(),
                uid,
                ..ScanOptions::default()
            })
            .unwrap();
            let snap = s.scan().unwrap();
            assert_eq!(snap.by_pid(7).unwrap().uid, want, "uid: {uid}");
        }
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn without_cmdline_nothing_is_cached() {
        let mut s = Scanner::new(ScanOptions {
            cmdline: false,
            ..ScanOptions::default()
        })
        .unwrap();
        let snap = s.scan().unwrap();
        assert!(snap.nodes().all(|n| n.cmdline.is_empty()));
        assert_eq!(snap.stats.cmdline_reads, 0);
        assert_eq!(s.cached(), 0);
    }
}
