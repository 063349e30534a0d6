//! Births and ends in foster's tree as the kernel announces them: every adoption seen when it
//! happens, the daemon's double fork included.
//!
//! Owns [`Births`]: the supervisor's subscription to the kernel's process events
//! ([`crate::process::tree::connector`], births and ends, filtered in the kernel) and what it makes
//! of them. The kernel announces every fork and every thread's end of the whole machine; each is
//! kept or dropped by one hash lookup of its process in the tree, and every announcement waiting
//! is read at once, on one turn of the supervisor's loop ([`Births::drain`]; [`Births`] says
//! what it makes of each).

use std::collections::HashMap;

use tracing::debug;

use super::timers::Timer;
use crate::gate::adoption::{Adoption, Lineage, Registry};
use crate::process::identity::Identity;
use crate::process::tree::connector::{Connector, Lost, ProcEvent, Wanted};
use crate::process::tree::{Newborns, Snapshot, Subtree};
use crate::supervision::contain::OuterPids;

/// The environment variable that turns the subscription off (`FOSTER_CONNECTOR=off`): foster
/// then behaves as where the kernel refuses it (for comparisons and tests).
pub const ENV_CONNECTOR: &str = "FOSTER_CONNECTOR";

/// Why births in the tree are not announced.
#[derive(Debug, thiserror::Error)]
pub enum Unannounced {
    /// `FOSTER_CONNECTOR=off`.
    #[error("turned off by {ENV_CONNECTOR}=off")]
    TurnedOff,
    /// A namespace whose subscriptions the kernel ignores (why, in words).
    #[error("{0}, whose subscriptions the kernel ignores")]
    Namespace(&'static str),
    /// The kernel grants the connector only with `CAP_NET_ADMIN`.
    #[error("the kernel grants the process-events connector only to CAP_NET_ADMIN here")]
    NotPermitted(#[source] std::io::Error),
    /// The connector failed otherwise.
    #[error("the process-events connector: {0}")]
    Connector(#[source] std::io::Error),
    /// foster's pid outside its namespace could not be read.
    #[error("foster's pid outside its namespace could not be read")]
    OuterPid,
}

/// Subscribes to births and ends, and checks that they are announced (a child of this
/// process's is forked and waited for: call it while single-threaded, before the tree is
/// contained). Why not, when not.
pub fn subscribe() -> Result<Connector, Unannounced> {
    if std::env::var_os(ENV_CONNECTOR).is_some_and(|v| v == "off") {
        return Err(Unannounced::TurnedOff);
    }
    if let Some(why) = crate::process::tree::connector::outside_initial_namespaces() {
        return Err(Unannounced::Namespace(why));
    }
    Connector::open(Wanted::ForksAndExits).map_err(|e| match e.raw_os_error() {
        Some(libc::EPERM) => Unannounced::NotPermitted(e),
        _ => Unannounced::Connector(e),
    })
}

/// What one [`Births::drain`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Drained {
    /// The processes born in the tree and not ended, by their pid in foster's namespace, in
    /// birth order.
    pub born: Vec<i32>,
    /// Their outer pids, in the same order.
    pub born_outer: Vec<i32>,
    /// How each of them (by its pid in foster's namespace) descends from a process of the tree
    /// as read: what a read that finds it already adopted takes its generation from.
    pub lineages: Vec<(i32, Lineage)>,
    /// The tree must be read again (a parent of the tree ended, a birth could not be placed, or
    /// announcements were lost).
    pub rescan: bool,
    /// Announcements were lost.
    pub lost: bool,
    /// Datagrams read.
    pub read: usize,
}

/// A birth of the current batch, by its outer pid.
#[derive(Debug, Clone, Copy)]
struct Newborn {
    parent: i32,
    /// Births under it in the batch.
    kids: u32,
    /// Its first thread ended within the batch.
    ended: bool,
}

/// The announcements of one drain, as they bear on the tree.
#[derive(Debug, Default)]
struct Batch {
    newborn: HashMap<i32, Newborn>,
    order: Vec<i32>,
    /// Births under processes of the tree as read, by parent.
    kids: HashMap<i32, u32>,
    rescan: bool,
}

impl Batch {
    /// A birth: kept when its parent is in the tree (`in_tree`) or born in the batch.
    fn fork(&mut self, parent: i32, child: i32, in_tree: impl FnOnce() -> bool) {
        if let Some(b) = self.newborn.get_mut(&parent) {
            b.kids += 1;
        } else if in_tree() {
            *self.kids.entry(parent).or_default() += 1;
        } else {
            return;
        }
        let b = Newborn {
            parent,
            kids: 0,
            ended: false,
        };
        self.newborn.insert(child, b);
        self.order.push(child);
    }

    /// A thread's end: a read of the tree when its process had children and is not a child of
    /// foster's (`root`), whose end comes as SIGCHLD. `read`: whether the tree as read holds
    /// the process, and if so whether it is foster's child and has children.
    fn exit(
        &mut self,
        tgid: i32,
        thread: i32,
        root: i32,
        read: impl FnOnce() -> Option<(bool, bool)>,
    ) {
        if tgid == root {
            return;
        }
        if let Some(b) = self.newborn.get_mut(&tgid) {
            b.ended |= thread == tgid;
            self.rescan |= b.kids > 0 && b.parent != root;
        } else if let Some((roots_child, has_children)) = read() {
            let born_under = self.kids.get(&tgid).is_some_and(|k| *k > 0);
            self.rescan |= !roots_child && (has_children || born_under);
        }
    }

    /// The nearest process of the tree as read (`in_tree`) that `pid` descends from, and how
    /// many births below it `pid` is. A birth of the batch may be in the tree already (a helper
    /// foster launched, and read, before its birth's announcement was drained): the walk stops
    /// there rather than climbing to foster, whose lineage names no helper.
    fn anchor(&self, pid: i32, in_tree: impl Fn(i32) -> bool) -> (i32, u32) {
        let (mut p, mut depth) = (pid, 0);
        while let Some(b) = self.newborn.get(&p).filter(|_| depth == 0 || !in_tree(p)) {
            (p, depth) = (b.parent, depth + 1);
        }
        (p, depth)
    }

    /// The births still alive at the end of the batch, in birth order.
    fn alive(&self) -> Vec<i32> {
        let ended = |p: &i32| self.newborn.get(p).is_some_and(|b| b.ended);
        self.order.iter().copied().filter(|p| !ended(p)).collect()
    }
}

/// The supervisor's subscription and the outer pids of its tree (contained). Of each
/// announcement:
///
/// - a birth whose parent is in the tree (or was born in it earlier in the same batch) is
///   added to the tree: that one process is read ([`crate::process::tree::Subtree::born`]), no
///   listing, and the parents' watch (`watch.rs`) holds its pidfd once it has children. So a
///   process that
///   forks and ends at once is in the tree from its birth, whatever its life's length;
/// - the end of a process of the tree that has children (in the tree as read, or born in the
///   batch), apart from foster's own children (their ends come as SIGCHLD), means that those
///   children have a new parent already (the kernel announces an end after it has moved them):
///   the tree is read again, once for the whole batch. A birth that has ended before it was read
///   is such an end too, since only a read of the tree can say where its children went;
/// - lost announcements (the socket's buffer overflowed: `ENOBUFS`) are one read of the whole
///   tree, counted (`foster_tree_events_lost_total`), never silence.
///
/// # Contained
///
/// The kernel numbers processes as the initial PID namespace does, and ignores a request from
/// any other: a contained foster subscribes before it enters its namespace ([`subscribe`], in
/// `foster run` before the split) and its init keeps the socket. The init then translates: it
/// keeps the outer pid of each process of its tree ([`Births::index`]), learnt at its birth (the
/// announcement gives the outer pid; its `NSpid`, read through the outer `/proc` that
/// [`OuterPids`] holds, gives the inner one) or, for a process a read found first, through its
/// pidfd (once per process, as the lines' pids already are). An announcement of a process
/// outside the tree costs the same hash lookup as uncontained.
///
/// # Where the kernel refuses
///
/// Without the subscription (not root on most kernels, a PID or user namespace other than the
/// initial one, `FOSTER_CONNECTOR=off`), [`subscribe`] says why, `foster run` says so in one
/// line at its start, and the pidfd watch alone tells of the ends of the parents it read; a
/// process born and ended between two reads leaves its orphan to the next read, or to the
/// periodic one `supervisor.rescan` asks for.
#[derive(Debug)]
pub struct Births {
    conn: Connector,
    /// foster's own pid as the kernel announces it.
    root: i32,
    /// Contained: each process of the tree by its outer pid; `None` uncontained (the pids are
    /// the tree's own).
    index: Option<HashMap<i32, Identity>>,
}

/// The process of `tree` announced as `pid`, through `index` when contained.
fn member(index: &Option<HashMap<i32, Identity>>, pid: i32, tree: &Snapshot) -> Option<Identity> {
    match index {
        None => tree.identity_of(pid),
        Some(index) => index.get(&pid).copied().filter(|id| tree.contains(id)),
    }
}

impl Births {
    /// The births of the tree of `me`, from `conn`; `outer` when contained (foster's own outer
    /// pid is learnt through it). `None` when contained and foster's outer pid cannot be read.
    pub fn new(conn: Connector, me: Identity, outer: Option<&mut OuterPids>) -> Option<Births> {
        let (root, index) = match outer {
            None => (me.pid, None),
            Some(o) => {
                let root = crate::supervision::event::PidView::identity(o, me).pid;
                if root <= 0 {
                    return None;
                }
                (root, Some(HashMap::from([(root, me)])))
            }
        };
        Some(Births { conn, root, index })
    }

    /// The socket: readable when announcements wait.
    pub fn raw_fd(&self) -> std::os::fd::RawFd {
        self.conn.raw_fd()
    }

    /// Reads every waiting announcement against `tree` (see the module docs); `outer` when
    /// contained, to find the births' pids in foster's namespace.
    pub fn drain(&mut self, tree: &Snapshot, outer: Option<&mut OuterPids>) -> Drained {
        let mut batch = Batch::default();
        let Births { conn, root, index } = self;
        let root = *root;
        let me = member(index, root, tree);
        let read = conn.drain(|e| match e {
            ProcEvent::Fork { parent, child } => {
                batch.fork(parent, child, || member(index, parent, tree).is_some())
            }
            ProcEvent::Exit { tgid, thread } => batch.exit(tgid, thread, root, || {
                let id = member(index, tgid, tree)?;
                let roots_child = tree.get(&id).is_some_and(|n| n.parent == me);
                Some((roots_child, !tree.children(&id).is_empty()))
            }),
        });
        let mut out = Drained {
            rescan: batch.rescan,
            ..Drained::default()
        };
        match read {
            Ok(n) => out.read = n,
            Err(Lost) => (out.lost, out.rescan) = (true, true),
        }
        if out.lost {
            return out;
        }
        let mut outer = outer;
        for g in batch.alive() {
            let inner = match outer.as_deref_mut() {
                None => Some(g),
                Some(o) => o.inner_pid(g),
            };
            // Ended since: only a read can say where its children went.
            let Some(p) = inner else {
                out.rescan = true;
                continue;
            };
            out.born.push(p);
            out.born_outer.push(g);
            let (a, depth) = batch.anchor(g, |p| member(index, p, tree).is_some());
            if let Some(anchor) = member(index, a, tree) {
                out.lineages.push((p, Lineage { anchor, depth }));
            }
        }
        out
    }

    /// Takes in what [`crate::process::tree::Subtree::born`] found of the births `outer_pids`
    /// ([`Drained::born_outer`]): contained, each one's outer pid is kept.
    pub fn learnt(
        &mut self,
        outer_pids: &[i32],
        identities: &[Option<Identity>],
        outer: Option<&mut OuterPids>,
    ) {
        let (Some(index), Some(o)) = (&mut self.index, outer) else {
            return;
        };
        for (&g, id) in outer_pids.iter().zip(identities) {
            if let Some(id) = id {
                index.insert(g, *id);
                o.remember(*id, g);
            }
        }
    }

    /// After a read of the tree: contained, the outer pids of the processes it found first
    /// (through their pidfds, once each) and none of those that left it.
    pub fn read(
        &mut self,
        tree: &Snapshot,
        changes: &[crate::process::tree::Change],
        outer: Option<&mut OuterPids>,
    ) {
        let (Some(index), Some(o)) = (&mut self.index, outer) else {
            return;
        };
        for c in changes {
            if let crate::process::tree::Change::Spawned { identity, .. } = c {
                let g = crate::supervision::event::PidView::identity(o, *identity).pid;
                if g > 0 {
                    index.insert(g, *identity);
                }
            }
        }
        let before = index.len();
        index.retain(|_, id| tree.contains(id));
        if index.len() != before {
            debug!(kept = index.len(), "outer pids of the tree");
        }
    }
}

/// Reads the births `pids` into `tree` and records at once in `registry` each one added, also
/// when the read missed others: a process the tree holds is one the registry knows (its
/// generation, helper and expected parent come from there, and no later read of the tree
/// reports it as new again). When the read missed some, the batch's `lineages` are announced
/// again for the read of the whole tree that follows (recording forgets those of processes it
/// did not see): an orphan that read finds already adopted takes its generation from them.
fn take_in(
    tree: &mut Subtree,
    registry: &mut Registry,
    pids: &[i32],
    lineages: &[(i32, Lineage)],
) -> (Newborns, Vec<Adoption>) {
    let found = tree.born(pids);
    let adoptions = registry.observe(tree.snapshot(), &found.changes);
    if found.missed {
        registry.announced(lineages.iter().copied());
    }
    (found, adoptions)
}

impl super::Supervisor {
    /// Keeps the subscription `run` made ([`subscribe`]), or says once why births are not
    /// announced and what that leaves.
    pub(super) fn take_births(&mut self, announced: Result<Connector, Unannounced>) {
        let why = match announced {
            Ok(conn) => match Births::new(conn, self.setup.me, self.reports.outer.as_mut()) {
                Some(b) => {
                    self.known.births = Some(b);
                    return;
                }
                None => Unannounced::OuterPid,
            },
            Err(why) => why,
        };
        let then = match self.config.supervisor.rescan {
            Some(p) => format!(
                "the tree is read every {} (supervisor.rescan)",
                crate::base::duration::Text(p.0)
            ),
            None => "supervisor.rescan = \"1s\" reads it every second".to_string(),
        };
        tracing::warn!(
            "births in the tree are not announced ({why}): an orphan left by a process born and \
             ended between two reads of the tree (a daemon's double fork) is seen at the next \
             read; {then}"
        );
    }

    /// The announcements waiting: births added to the tree, or one read of it (see the module
    /// docs).
    pub(super) fn on_announced(&mut self) {
        let Some(b) = &mut self.known.births else {
            return;
        };
        let d = b.drain(self.known.tree.snapshot(), self.reports.outer.as_mut());
        self.known.registry.announced(d.lineages.iter().copied());
        if d.lost {
            debug!("announcements of births and ends lost: reading the whole tree");
            self.count_lost_tree_events();
        }
        if !d.rescan && !d.born.is_empty() {
            let (found, adoptions) = take_in(
                &mut self.known.tree,
                &mut self.known.registry,
                &d.born,
                &d.lineages,
            );
            if let Some(b) = &mut self.known.births {
                b.learnt(
                    &d.born_outer,
                    &found.identities,
                    self.reports.outer.as_mut(),
                );
            }
            if !found.missed {
                self.watch_parents();
            }
            self.adopted_now(adoptions);
            if !found.missed {
                return;
            }
        } else if !d.rescan {
            return;
        }
        // What the ended processes said before they ended, first (`checks.rs`), while the
        // parents' pidfds that fired with them are still held.
        self.drain_notify();
        self.known.watch.take_ended();
        self.rescan();
    }

    /// Arms the next periodic read of `supervisor.rescan`, where births are not announced (and
    /// disarms it when the setting is gone).
    pub(super) fn schedule_rescan(&mut self) {
        self.timers.cancel(|t| *t == Timer::Rescan);
        if self.known.births.is_some() || self.stage.shutting_down() {
            return;
        }
        if let Some(p) = self.config.supervisor.rescan {
            self.timers.at(p.0, Timer::Rescan);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A double fork in one batch: the middle process's end is a read of the tree, and its
    /// orphan is two births below the member it came from.
    #[test]
    fn a_double_fork_in_one_batch_asks_for_a_read_and_keeps_the_lineage() {
        let (root, member) = (100, 200);
        let in_tree = |p: i32| p == root || p == member;
        let mut b = Batch::default();
        b.fork(member, 300, || in_tree(member));
        b.fork(300, 400, || in_tree(300));
        // Machine-wide noise: neither parent is in the tree.
        b.fork(7, 8, || in_tree(7));
        b.exit(8, 8, root, || None);
        assert!(!b.rescan);
        b.exit(300, 300, root, || None);
        assert!(b.rescan, "the middle one had a child");
        assert_eq!(b.alive(), vec![400]);
        assert_eq!(b.anchor(400, in_tree), (member, 2));
        // A birth of the batch already in the tree (a helper launched and read before its
        // birth was drained) is the anchor, not the root above it.
        b.fork(root, 250, || true);
        b.fork(250, 260, || true);
        assert_eq!(b.anchor(260, |p| p == 250 || in_tree(p)), (250, 1));
    }

    /// A batch whose read missed one birth (it ended first) still records the others it added
    /// to the tree: the read that follows sees them as known, and would not report them again;
    /// and it keeps the batch's lineages for that read.
    #[test]
    fn births_added_when_another_was_missed_are_recorded() {
        use std::io::{BufRead, BufReader, Write};
        use std::process::{Command, Stdio};
        let me = Identity::current().unwrap();
        // The helper forks its child only when told to, after the tree was first read.
        let mut helper = Command::new("sh")
            .args(["-c", "read x; sleep 300 & echo $!; read y"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let h = Identity::of(helper.id() as i32).unwrap();
        let opts = crate::process::tree::ScanOptions::default();
        let mut tree = Subtree::new(me.pid, b"FOSTER_", opts).unwrap();
        let mut registry = Registry::new(me);
        registry.expect_launch(h, "h", false);
        tree.known(h);
        let (first, _) = tree.update().unwrap();
        registry.observe(tree.snapshot(), &first);
        let mut stdin = helper.stdin.take().unwrap();
        stdin.write_all(b"go\n").unwrap();
        let mut line = String::new();
        let mut out = BufReader::new(helper.stdout.take().unwrap());
        out.read_line(&mut line).unwrap();
        let child: i32 = line.trim().parse().unwrap();
        // A birth that has ended before it is read.
        let mut gone = Command::new("true").spawn().unwrap();
        let gone_pid = gone.id() as i32;
        gone.wait().unwrap();

        // The batch's lineages, as the drain announces them before the read.
        let lineages = [(
            gone_pid,
            Lineage {
                anchor: h,
                depth: 2,
            },
        )];
        registry.announced(lineages);
        let (found, _) = take_in(&mut tree, &mut registry, &[child, gone_pid], &lineages);
        let c = Identity::of(child).unwrap();
        let rec = registry.get(&c).map(|r| (r.generation, r.helper.clone()));
        // Still there for the read of the whole tree that follows a missed birth.
        let kept = registry
            .announced_lineage(gone_pid)
            .map(|l| (l.anchor, l.depth));
        // Ended before asserting, so that a failure leaves nothing behind.
        let pid = nix::unistd::Pid::from_raw(child);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::SIGKILL);
        drop(stdin);
        helper.wait().unwrap();
        assert!(found.missed, "{found:?}");
        assert_eq!(rec, Some((2, Some("h".to_string()))));
        assert_eq!(kept, Some((h, 2)));
    }

    /// Ends that move no child: a birth without children, a child of foster's (its end comes
    /// as SIGCHLD), a member without children, a process outside the tree.
    #[test]
    fn ends_that_move_no_child_ask_for_nothing() {
        let (root, member) = (100, 200);
        let mut b = Batch::default();
        b.fork(member, 300, || true);
        b.exit(300, 300, root, || None);
        b.fork(root, 500, || true);
        b.fork(500, 501, || true);
        b.exit(500, 500, root, || None);
        b.exit(member, member, root, || Some((true, true)));
        b.exit(600, 600, root, || Some((false, false)));
        b.exit(700, 700, root, || None);
        assert!(!b.rescan);
        assert_eq!(b.alive(), vec![501]);
        // A member below foster's children, with a child: its end moved it.
        b.exit(800, 800, root, || Some((false, true)));
        assert!(b.rescan);
    }
}
