//! Exits that reparent without a SIGCHLD to foster: a pidfd for each parent of the tree.
//!
//! Owns [`ParentWatch`]. When a process of foster's tree ends, the kernel gives its children to
//! the nearest living subreaper (foster, or a subreaper inside the tree) and signals only the
//! dead process's own parent. foster hears of its helpers' and its adopted children's ends by
//! SIGCHLD, but the end of a deeper process (a helper's child that leaves a child of its own)
//! sends foster nothing. So foster holds a pidfd for each living process of its tree that has
//! children, apart from foster and its own children (their ends come as SIGCHLD): a pidfd polls
//! readable once its process has ended, after the kernel has moved its children. All of them
//! sit in one epoll descriptor, which the supervisor's loop waits on beside the SIGCHLD
//! signalfd: no timer, no wake-up while nothing ends.

use std::collections::{HashMap, HashSet};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};

use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use nix::sys::resource::{Resource, getrlimit, setrlimit};
use tracing::{debug, info, warn};

use crate::process::identity::{Identity, IdentityError, ProcessRef};
use crate::process::tree::Snapshot;

/// Descriptors left for everything else foster holds (control clients, logs, signalfds, the
/// runtime's, `/proc` directories) when the watch counts what it may use.
pub const RESERVE: u64 = 256;

/// A pidfd per parent of foster's tree, in one epoll descriptor.
///
/// The set follows the [`Subtree`](crate::process::tree::Subtree) after each of its updates
/// ([`ParentWatch::sync`]): a pidfd is opened when the tree is first seen with a process having
/// children (and checked to be that process: its start time is read again once the pidfd
/// holds it), closed when that process has ended or has no children left. One that fired is
/// closed at once ([`ParentWatch::take_ended`]). A parent that ended between the read of the
/// tree and the opening of its pidfd is reported by `sync`, so that the caller reads again.
///
/// # The pidfds and the process-events connector
///
/// A pidfd is held only for a process some read of the tree saw with children: a process born
/// after the last read that forks and ends before the next one (a daemon's double fork) was
/// never watched. Where the kernel grants it, the process-events connector tells of those
/// (`births.rs`: a birth in the tree is read into it at once, so the watch holds its pidfd once
/// it has children, and the end of a process of the tree with children is a read of the tree).
/// The watch stays in every case: the connector is granted to `CAP_NET_ADMIN` in the initial
/// namespaces only (on most kernels), wakes foster for every fork and end of the machine, and
/// drops announcements when its buffer fills; a pidfd works in any namespace and for any user,
/// wakes foster only for its own tree's parents, and loses nothing.
///
/// Each held pidfd's pidfs inode number is kept too: a notify datagram whose sender has ended
/// and been reaped before foster read it comes with a pidfd of that sender, which is matched to
/// a watched process by it (`supervisor/checks.rs`).
///
/// What neither this nor SIGCHLD covers, where births are not announced: a process born after
/// foster's last read of its tree that has a child and ends before the next read (the next
/// SIGCHLD, the end of a watched parent, a control request, or `supervisor.rescan`). Its
/// orphan is noticed at that next read.
///
/// # The bound
///
/// One descriptor per watched process. The first time the watch would need more descriptors
/// than the soft `RLIMIT_NOFILE` leaves (less [`RESERVE`] for everything else foster opens),
/// foster raises its soft limit to the hard one (processes launched afterwards inherit the
/// raised limit). Past that bound, further parents are not watched (one warning, then a count
/// at debug level): their orphans are noticed at the next read of the tree, as above.
#[derive(Debug)]
pub struct ParentWatch {
    epoll: Epoll,
    held: HashMap<Identity, OwnedFd>,
    by_fd: HashMap<RawFd, Identity>,
    /// The pidfs inode number of each held pidfd ([`crate::process::identity::pidfd_inode`]), where
    /// the kernel has one: a pidfd of a process that has ended is matched to the watched one.
    by_inode: HashMap<u64, Identity>,
    inode_of: HashMap<Identity, u64>,
    /// How many pidfds may be held now.
    limit: usize,
    /// Whether the soft descriptor limit was raised already (or cannot be).
    raised: bool,
    /// Parents not watched at the last sync because of the bound.
    over: usize,
    warned: bool,
}

/// What a [`ParentWatch::sync`] found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Synced {
    /// Pidfds opened.
    pub opened: usize,
    /// Pidfds closed (their process ended or has no children left).
    pub closed: usize,
    /// Parents that ended since the tree was read (their children may have moved since): the
    /// caller must read the tree again.
    pub gone: usize,
}

impl ParentWatch {
    /// An empty watch, its bound taken from the soft `RLIMIT_NOFILE`.
    pub fn new() -> io::Result<ParentWatch> {
        let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC).map_err(io::Error::from)?;
        let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).map_err(io::Error::from)?;
        Ok(ParentWatch {
            epoll,
            held: HashMap::new(),
            by_fd: HashMap::new(),
            by_inode: HashMap::new(),
            inode_of: HashMap::new(),
            limit: budget(soft),
            raised: soft >= hard,
            over: 0,
            warned: false,
        })
    }

    /// The epoll descriptor: readable when a watched process has ended.
    pub fn raw_fd(&self) -> RawFd {
        self.epoll.0.as_raw_fd()
    }

    /// How many processes are watched.
    pub fn len(&self) -> usize {
        self.held.len()
    }

    /// Whether no process is watched.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// Whether `id` is watched.
    #[cfg(test)]
    pub fn watches(&self, id: &Identity) -> bool {
        self.held.contains_key(id)
    }

    /// The watched process that `inode` (a pidfs inode number) is the pidfd inode of, if any.
    pub fn watched_inode(&self, inode: u64) -> Option<Identity> {
        self.by_inode.get(&inode).copied()
    }

    /// Closes the pidfds of the processes that ended and returns how many did. Never blocks.
    pub fn take_ended(&mut self) -> usize {
        let mut events = [EpollEvent::empty(); 64];
        let mut ended = 0;
        loop {
            let n = match self.epoll.wait(&mut events, EpollTimeout::ZERO) {
                Ok(n) => n,
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => {
                    warn!("epoll_wait on the parents' pidfds: {e}");
                    return ended;
                }
            };
            for e in &events[..n] {
                let fd = e.data() as RawFd;
                if let Some(id) = self.by_fd.remove(&fd) {
                    self.held.remove(&id); // closing it takes it out of the epoll set
                    if let Some(inode) = self.inode_of.remove(&id) {
                        self.by_inode.remove(&inode);
                    }
                    ended += 1;
                }
            }
            if n < events.len() {
                return ended;
            }
        }
    }

    /// Makes the watched set the living processes of `tree` that have children, apart from
    /// `root` and its own children. See [`Synced`].
    pub fn sync(&mut self, tree: &Snapshot, root: Identity) -> Synced {
        let wanted: HashSet<Identity> = tree
            .nodes()
            .filter_map(|n| n.parent)
            .filter(|p| *p != root)
            .filter(|p| {
                tree.get(p)
                    .is_some_and(|n| !n.is_zombie() && n.parent != Some(root))
            })
            .collect();
        let mut synced = Synced::default();
        let before = self.held.len();
        self.held.retain(|id, _| wanted.contains(id));
        synced.closed = before - self.held.len();
        if synced.closed > 0 {
            let held = &self.held;
            self.by_fd.retain(|_, id| held.contains_key(id));
            self.by_inode.retain(|_, id| held.contains_key(id));
            self.inode_of.retain(|id, _| held.contains_key(id));
        }
        let mut over = 0;
        for id in wanted {
            if self.held.contains_key(&id) {
                continue;
            }
            if self.held.len() >= self.limit && !self.raise() {
                over += 1;
                continue;
            }
            match self.open(id) {
                Ok(true) => synced.opened += 1,
                Ok(false) => synced.gone += 1,
                Err(e) => {
                    // EMFILE and the like: as at the bound.
                    debug!("cannot watch {id}: {e}");
                    over += 1;
                }
            }
        }
        self.at_bound(over);
        synced
    }

    /// Opens and registers the pidfd of `id`: false when `id` has ended already.
    fn open(&mut self, id: Identity) -> io::Result<bool> {
        // The pidfd holds whatever process had the pid: it must still be `id` (an ended one
        // that was reaped has no /proc entry, or another start time under a reused pid).
        let fd = match ProcessRef::open(id).map(ProcessRef::into_pidfd) {
            Ok(Some(fd)) => fd,
            Err(IdentityError::Pidfd(_, e)) => return Err(e),
            Ok(None) | Err(_) => return Ok(false),
        };
        let raw = fd.as_raw_fd();
        self.epoll
            .add(fd.as_fd(), EpollEvent::new(EpollFlags::EPOLLIN, raw as u64))
            .map_err(io::Error::from)?;
        self.by_fd.insert(raw, id);
        if let Some(inode) = crate::process::identity::pidfd_inode(fd.as_fd()) {
            self.by_inode.insert(inode, id);
            self.inode_of.insert(id, inode);
        }
        self.held.insert(id, fd);
        Ok(true)
    }

    /// Raises the soft descriptor limit to the hard one, once; true when that made room.
    fn raise(&mut self) -> bool {
        if self.raised {
            return false;
        }
        self.raised = true;
        let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
            return false;
        };
        if soft >= hard {
            return false;
        }
        if let Err(e) = setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
            warn!("cannot raise the open-file limit from {soft} to {hard}: {e}");
            return false;
        }
        info!(
            "raised the open-file limit from {soft} to {hard} to watch {} processes of the tree \
             that have children (helpers launched from now on inherit it)",
            self.held.len()
        );
        self.limit = budget(hard);
        self.held.len() < self.limit
    }

    fn at_bound(&mut self, over: usize) {
        if over > 0 && !self.warned {
            self.warned = true;
            warn!(
                "{over} processes of the tree that have children are not watched (the bound is \
                 {} pidfds, set by the open-file limit): an orphan they leave is noticed at the \
                 next read of the tree, not at once (later counts at debug level)",
                self.limit
            );
        } else if over != self.over {
            debug!(
                "{over} processes with children not watched (bound {})",
                self.limit
            );
        }
        self.over = over;
    }
}

/// The pidfds a soft limit of `soft` descriptors leaves for the watch.
fn budget(soft: u64) -> usize {
    usize::try_from(soft.saturating_sub(RESERVE)).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::tree::ProcessNode;

    #[test]
    fn the_budget_leaves_the_reserve() {
        assert_eq!(budget(1024), 1024 - RESERVE as usize);
        assert_eq!(budget(100), 0);
        assert!(budget(u64::MAX) > 1 << 30);
    }

    /// The parents of a tree of real processes: this test process (the root here) and its
    /// child are left out; a grandchild with a child is watched until it has none.
    #[test]
    fn watches_the_parents_below_the_roots_children_and_sees_them_end() {
        let me = Identity::current().unwrap();
        // Real processes for the pidfds: a child of ours stands for a deep parent.
        let mut child = std::process::Command::new("sleep")
            .arg("100")
            .spawn()
            .unwrap();
        let deep = Identity::of(child.id() as i32).unwrap();
        let tree = Snapshot::from_nodes(vec![
            ProcessNode::new(me.pid, 1, me.start_time, b"root"),
            ProcessNode::new(900_001, me.pid, me.start_time, b"x"),
            ProcessNode::new(deep.pid, 900_001, deep.start_time, b"sleep"),
            ProcessNode::new(900_002, deep.pid, deep.start_time, b"x"),
        ]);
        let mut w = ParentWatch::new().unwrap();
        let s = w.sync(&tree, me);
        // 900_001 is a child of the root: its end comes as SIGCHLD, not watched.
        assert_eq!(
            s,
            Synced {
                opened: 1,
                closed: 0,
                gone: 0
            }
        );
        assert!(w.watches(&deep));
        assert_eq!(w.take_ended(), 0);
        child.kill().unwrap();
        assert!(crate::process::identity::poll_readable(
            w.raw_fd(),
            Some(std::time::Duration::from_secs(10))
        ));
        assert_eq!(w.take_ended(), 1);
        assert!(w.is_empty());
        child.wait().unwrap();
        // Reaped: opening it again says it is gone.
        let s = w.sync(&tree, me);
        assert_eq!(s.gone, 1);
        // No children left: nothing wanted.
        let lone = Snapshot::from_nodes(vec![ProcessNode::new(
            deep.pid,
            900_001,
            deep.start_time,
            b"sleep",
        )]);
        assert_eq!(w.sync(&lone, me), Synced::default());
    }

    /// At the bound, and with no room to raise it, a parent is left unwatched and counted; it
    /// is watched as soon as there is room.
    #[test]
    fn past_the_bound_parents_are_counted_not_watched() {
        let me = Identity::current().unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("100")
            .spawn()
            .unwrap();
        let deep = Identity::of(child.id() as i32).unwrap();
        let tree = Snapshot::from_nodes(vec![
            ProcessNode::new(me.pid, 1, me.start_time, b"root"),
            ProcessNode::new(900_001, me.pid, me.start_time, b"x"),
            ProcessNode::new(deep.pid, 900_001, deep.start_time, b"sleep"),
            ProcessNode::new(900_002, deep.pid, deep.start_time, b"x"),
        ]);
        let mut w = ParentWatch::new().unwrap();
        (w.limit, w.raised) = (0, true);
        assert_eq!(w.sync(&tree, me), Synced::default());
        assert_eq!((w.over, w.warned), (1, true));
        w.limit = 1;
        assert_eq!(w.sync(&tree, me).opened, 1);
        assert_eq!(w.over, 0);
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
