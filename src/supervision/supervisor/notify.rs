//! The notify sockets (one for foster's user, one for each other user helpers run as, bound
//! when first needed) and their datagrams: each accepted only from a process of that
//! helper's tree, found by the registry or by its ancestry in `/proc`; the sender told by the
//! pidfd that comes with the datagram ([`Supervisor::sender_helper`]); everything queued read
//! before a deadline is judged ([`Supervisor::drain_notify`]); the warnings a sender can
//! cause at will counted ([`Noted`]).

use std::io;
use std::path::Path;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tracing::{debug, warn};

use super::Supervisor;
use super::timers::{CheckTimer, Timer};
use crate::gate::spawner::user_id;
use crate::process::identity::Identity;
use crate::process::state::HelperState;
use crate::supervision::config::{Config, Helper};
use crate::supervision::event::Check;
use crate::supervision::readiness::notify::{Datagram, Message, NotifySocket, Watchdog};
use crate::supervision::readiness::{Readiness, Report};

/// Datagrams read from one socket per turn of the loop (the rest on the next turns).
const DATAGRAMS_PER_TURN: usize = 64;

/// How far up its ancestry a notify sender is followed in `/proc` to a process foster knows
/// (or foster itself, which then reads its tree); a sender whose ancestry goes on further is
/// refused.
const ANCESTRY: usize = 64;

/// The notify sockets, the refusals counted, and the channel of the checks' tasks.
pub(super) struct ChecksIo {
    /// The notify sockets bound so far, in the order bound, each with the user whose helpers
    /// it is for: `None` for foster's own (a socket file in the private directory), a uid for
    /// helpers that run as another user (a socket file of that uid's, see
    /// `readiness/notify.rs`).
    pub(super) notify: Vec<(Option<u32>, NotifySocket)>,
    /// Datagrams refused (from outside the helpers' trees, too long, cut short, to a helper
    /// without the protocol).
    pub(super) refused: Noted,
    /// `MAINPID=` values that named no process of the sender's helper's tree.
    pub(super) bad_main_pid: Noted,
    /// `FDSTORE=1` requests, which foster does not grant.
    pub(super) fdstore: Noted,
    /// `WATCHDOG_USEC=` sent by a helper without a `watchdog`.
    pub(super) no_watchdog: Noted,
    /// `EXTEND_TIMEOUT_USEC=` sent by a helper no longer starting.
    pub(super) late_extend: Noted,
    pub(super) tx: mpsc::UnboundedSender<Report>,
    pub(super) rx: mpsc::UnboundedReceiver<Report>,
}

impl ChecksIo {
    pub(super) fn new() -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        ChecksIo {
            notify: Vec::new(),
            refused: Noted::default(),
            bad_main_pid: Noted::default(),
            fdstore: Noted::default(),
            no_watchdog: Noted::default(),
            late_extend: Noted::default(),
            tx,
            rx,
        }
    }
}

/// Warnings a process can cause at will through a notify socket, of one kind (a refused
/// datagram; a `MAINPID=` outside the helper's tree): counted, the first logged as a warning,
/// the others at debug level, so that a sender in a loop cannot fill foster's log.
#[derive(Debug, Default)]
pub(super) struct Noted(pub(super) u64);

impl Noted {
    /// One more of them: `message`, and for the first, `further` says what becomes of the
    /// others.
    fn note(&mut self, message: std::fmt::Arguments<'_>, further: &str) {
        self.0 += 1;
        if self.0 == 1 {
            warn!("{message} ({further})");
        } else {
            debug!("{message}");
        }
    }
}

/// The uid `h` runs as when it is not foster's (its `user` resolved as its launch does).
fn other_user(h: &Helper) -> Option<u32> {
    let me = nix::unistd::geteuid().as_raw();
    h.user
        .as_deref()
        .and_then(|u| user_id(u).ok())
        .filter(|&uid| uid != me)
}

/// Binds the notify sockets the helpers of `config` need (one for foster's user, one for each
/// other user); one a later launch needs (a helper a reload added) is bound then.
pub(super) fn bind_notify(config: &Config) -> io::Result<ChecksIo> {
    let mut io = ChecksIo::new();
    for h in config.helpers.iter().filter(|h| uses_notify(h)) {
        io.socket_for(h)?;
    }
    Ok(io)
}

/// Binds a notify socket for the helpers of user `uid` (`None`: foster's own), in the checked
/// runtime directories (`control::server`).
fn bind_endpoint(uid: Option<u32>) -> io::Result<NotifySocket> {
    use crate::supervision::control::server::{default_dir, make_private_dir, make_reachable_dir};
    use std::os::fd::AsFd;
    let dir = default_dir();
    let private = make_private_dir(&dir).map_err(|e| {
        io::Error::other(format!(
            "notify socket: {}: {e}; the notify socket is made there whatever --socket says: \
             set XDG_RUNTIME_DIR to move it",
            dir.display()
        ))
    })?;
    crate::supervision::readiness::notify::remove_stale(&dir, private.as_fd());
    let Some(uid) = uid else {
        return NotifySocket::bind_in(&dir);
    };
    let (shared, fd) =
        make_reachable_dir().map_err(|e| io::Error::other(format!("notify socket: {e}")))?;
    crate::supervision::readiness::notify::remove_stale(&shared, fd.as_fd());
    NotifySocket::bind_for_user((&dir, private.as_fd()), (&shared, fd.as_fd()), uid)
}

impl ChecksIo {
    /// The notify socket for helper `h` (its user's), bound now if it is not yet. For a
    /// helper of another user, that user must be able to enter every directory on the way to
    /// it, or the helper could not send a word: refused, saying which directory.
    pub(super) fn socket_for(&mut self, h: &Helper) -> io::Result<&NotifySocket> {
        let uid = other_user(h);
        let k = match self.notify.iter().position(|(u, _)| *u == uid) {
            Some(k) => k,
            None => {
                self.notify.push((uid, bind_endpoint(uid)?));
                self.notify.len() - 1
            }
        };
        let socket = &self.notify[k].1;
        if uid.is_some() {
            crate::supervision::config::helper_reaches(h, Path::new(socket.address())).map_err(
                |e| {
                    io::Error::other(format!(
                        "helper {:?}: its notify socket {}: {e} (set XDG_RUNTIME_DIR to a \
                     directory it may enter, or unset it)",
                        h.name(),
                        socket.address()
                    ))
                },
            )?;
        }
        Ok(socket)
    }
}

/// Why a datagram is refused when its sender is no process of a helper's tree.
const NOT_IN_TREE: &str = "not a process of a helper's tree";

/// `ppid` and start time of `pid`, from `/proc/<pid>/stat`.
fn parent_of(pid: i32) -> Option<(i32, u64)> {
    let stat = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    let f = crate::process::procstat::StatFields::parse(&stat).ok()?;
    Some((f.ppid, f.start_time))
}

/// Whether helper `h` speaks the notify protocol (`ready = { notify = true }`, or a watchdog).
pub(super) fn uses_notify(h: &Helper) -> bool {
    h.watchdog.is_some() || h.ready.as_ref().is_some_and(|r| r.notify.is_some())
}

impl Supervisor {
    /// The datagrams waiting on the `k`th notify socket, at most [`DATAGRAMS_PER_TURN`]; false
    /// when the socket has none left.
    pub(super) fn on_notify_readable(&mut self, k: usize) -> bool {
        let Some((_, socket)) = self.io.checks_io.notify.get(k) else {
            return false;
        };
        let mut got = Vec::new();
        let mut more = true;
        while got.len() < DATAGRAMS_PER_TURN {
            match socket.recv() {
                Ok(d) => got.push(d),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    more = false;
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    warn!("notify socket: {e}");
                    more = false;
                    break;
                }
            }
        }
        for d in got {
            self.on_datagram(d);
        }
        more
    }

    /// Every datagram queued on the notify sockets now, read and handled before something
    /// they could change is judged: a due watchdog or readiness deadline (a `WATCHDOG=1` or
    /// `READY=1` sent in time may still wait in the queue when the timer wakes the loop: the
    /// loop does not choose between ready sources in any order), a process's end (what a
    /// process said before it ended is handled before its end). At most what a socket's queue
    /// can hold is read ([`NotifySocket::queued_bound`]): everything that was queued when the
    /// drain began, never an endless read of a sender that keeps sending.
    pub(super) fn drain_notify(&mut self) {
        for k in 0..self.io.checks_io.notify.len() {
            let bound = self.io.checks_io.notify[k].1.queued_bound();
            let mut read = 0;
            while read < bound && self.on_notify_readable(k) {
                read += DATAGRAMS_PER_TURN;
            }
        }
    }

    /// A datagram refused: counted ([`Noted`]: another user could send many). Its sender is
    /// named as the kernel gave it (outside foster's PID namespace, with no pid).
    fn refuse(&mut self, d: &Datagram, why: &str) {
        let from = crate::supervision::control::server::Peer {
            pid: d.pid,
            uid: d.uid,
        };
        self.io.checks_io.refused.note(
            format_args!("notify socket: ignored a datagram from {from}: {why}"),
            "further ones are counted in the status",
        );
    }

    /// The helper whose tree process `pid` is in: the registry's record of it; for a process
    /// born since foster last read its tree, the first ancestor the registry knows (read up
    /// `/proc`); for one that reaches foster itself (adopted since), the tree read again.
    /// A process whose ancestry leaves foster's tree belongs to no helper, and so does one
    /// whose [`ANCESTRY`] nearest ancestors foster does not know, without a read of the tree.
    ///
    /// Each step up reads a parent by its pid, which its holder may have left (it ended and
    /// was reaped) for another process since the child's `stat` was read: a parent is born
    /// before its child, and a process is only ever moved to an ancestor, born before it too,
    /// so a "parent" younger than the child is not its parent and the walk stops there.
    fn helper_of_pid(&mut self, pid: i32) -> Option<usize> {
        if pid <= 0 || pid == self.setup.me.pid {
            return None;
        }
        let mut cur = pid;
        let mut younger_than = u64::MAX;
        for _ in 0..ANCESTRY {
            if cur == self.setup.me.pid {
                return self.unknown_below_foster(pid);
            }
            let (ppid, start_time) = parent_of(cur)?;
            if start_time > younger_than {
                return None;
            }
            younger_than = start_time;
            let id = Identity {
                pid: cur,
                start_time,
            };
            if let Some(r) = self.known.registry.get(&id).filter(|r| r.alive) {
                return r.helper.clone().and_then(|h| self.helper_index(&h));
            }
            if ppid <= 0 {
                return None;
            }
            cur = ppid;
        }
        // Deeper than that without one foster knows: not read further, and no read of the
        // tree (a chain of processes outside it would make each datagram one).
        None
    }

    /// The helper of process `pid`, below foster but not known yet: the tree read again.
    fn unknown_below_foster(&mut self, pid: i32) -> Option<usize> {
        self.rescan();
        let id = self.known.registry.identity_of_pid(pid)?;
        if Identity::of(pid).ok()? != id {
            return None;
        }
        let helper = self.known.registry.get(&id)?.helper.clone()?;
        self.helper_index(&helper)
    }

    /// The helper whose tree sent `d`, or why it cannot be told.
    ///
    /// The pid the kernel gives (`SCM_CREDENTIALS`) was the sender's when it sent; by the time
    /// foster reads the datagram the sender may have ended, been reaped by its parent, and its
    /// pid given to another process, which the pid alone cannot tell: a datagram from outside
    /// the tree could pass for one of a process of the tree that took the pid since. Where the
    /// kernel gives the sender's pidfd with the datagram (`SCM_PIDFD`, taken when it sent), the
    /// sender is told without that race:
    ///
    /// - **Not reaped** (running, or a zombie its parent has not waited for): the pidfd's
    ///   `fdinfo` gives its pid. foster reads that process's ancestry in `/proc`, then asks the
    ///   pidfd again (signal 0): still not reaped, and the sender held that pid all along (a
    ///   pid is given to another process only once its holder was reaped), so what `/proc` said
    ///   of the pid was said of the sender.
    /// - **Reaped** (`Pid: -1`; before Linux 6.16 the kernel gives no pidfd at all then, and
    ///   says why): its place in the tree can no longer be read, and its pid proves nothing.
    ///   It is accepted only as a process foster holds a pidfd for (a helper's own process, or
    ///   a process of the tree that has children, watched for its end), matched by the pidfd's
    ///   pidfs inode number, which no other process ever has: those are the only processes
    ///   foster knew that are sure to be the sender. Any other is refused: a short-lived sender
    ///   must still run when foster reads it (`systemd-notify` waits for foster's barrier
    ///   unless `--no-block`; `sd_notify_barrier(3)`).
    ///
    /// Where the kernel gives no pidfd (before Linux 6.5), the pid is all there is: read as it
    /// is now, with the race above.
    fn sender_helper(&mut self, d: &Datagram) -> Result<usize, &'static str> {
        use crate::process::identity::{PidfdPid, pidfd_pid, pidfd_unreaped};
        use std::os::fd::AsFd;
        let Some(fd) = &d.pidfd else {
            if d.sender_reaped {
                return Err("its sender had ended and been reaped before foster read it");
            }
            return self.helper_of_pid(d.pid).ok_or(NOT_IN_TREE);
        };
        match pidfd_pid(fd.as_fd()) {
            // Outside foster's PID namespace (foster contained), where every process of the
            // helpers' trees is: no process of theirs, and not one it could signal either.
            Ok(PidfdPid::Pid(0)) => Err(NOT_IN_TREE),
            Ok(PidfdPid::Pid(pid)) => {
                let found = self.helper_of_pid(pid);
                match pidfd_unreaped(fd.as_fd()) {
                    true => found.ok_or(NOT_IN_TREE),
                    // Reaped meanwhile: what was read of its pid may be another's.
                    false => self.ended_sender_helper(d),
                }
            }
            Ok(PidfdPid::Reaped) => self.ended_sender_helper(d),
            Err(e) => {
                debug!("notify socket: a sender's pidfd: {e}");
                Err("its sender's pidfd cannot be read")
            }
        }
    }

    /// The helper of the reaped sender of `d`, when foster holds a pidfd of that very process
    /// (see [`Supervisor::sender_helper`]).
    fn ended_sender_helper(&mut self, d: &Datagram) -> Result<usize, &'static str> {
        use std::os::fd::AsFd;
        const ENDED: &str = "its sender had ended and been reaped before foster read it, and \
                             was no process foster held";
        let inode = d
            .pidfd
            .as_ref()
            .and_then(|fd| crate::process::identity::pidfd_inode(fd.as_fd()))
            .ok_or(ENDED)?;
        let own = self.units.helpers.iter().position(|h| {
            h.process
                .as_ref()
                .and_then(|p| p.pidfd())
                .and_then(crate::process::identity::pidfd_inode)
                == Some(inode)
        });
        if let Some(i) = own {
            return Ok(i);
        }
        let id = self.known.watch.watched_inode(inode).ok_or(ENDED)?;
        let helper = self.known.registry.get(&id).and_then(|r| r.helper.clone());
        helper
            .and_then(|h| self.helper_index(&h))
            .ok_or(NOT_IN_TREE)
    }

    /// One datagram of a notify socket: accepted from a process of a helper's tree, for that
    /// helper, when it uses the protocol; its descriptors are closed once it was handled.
    fn on_datagram(&mut self, d: Datagram) {
        if d.too_long {
            return self.refuse(
                &d,
                &format!(
                    "longer than {} bytes",
                    crate::supervision::readiness::notify::MAX_DATAGRAM
                ),
            );
        }
        if d.control_cut {
            return self.refuse(
                &d,
                "its control messages were cut short (MSG_CTRUNC): more came with it than a \
                 notification carries",
            );
        }
        let i = match self.sender_helper(&d) {
            Ok(i) => i,
            Err(why) => return self.refuse(&d, why),
        };
        if !uses_notify(&self.config.helpers[i]) {
            let why = format!(
                "helper {:?} does not use the notify protocol",
                self.config.helpers[i].name()
            );
            return self.refuse(&d, &why);
        }
        let m = Message::parse(&d.bytes);
        self.note_unsupported(i, &m, d.fds.len());
        self.apply_notify(i, m);
        drop(d); // BARRIER=1's descriptor: closed after the message was handled
    }

    /// What of `m` (from helper `i`, which sent `fds` descriptors with it) foster does not
    /// grant, said ([`Noted`]: a helper may ask in a loop): `FDSTORE=1` (no store: the
    /// descriptors are closed, so a program counting on getting them back at its next launch
    /// learns why it does not), `WATCHDOG_USEC=` to a helper without a `watchdog`,
    /// `EXTEND_TIMEOUT_USEC=` from one no longer starting (under systemd it would also push
    /// back a stop's SIGKILL, which foster's `stop_grace` does not move).
    fn note_unsupported(&mut self, i: usize, m: &Message, fds: usize) {
        let further = "further ones are logged at debug level";
        let starting = self.units.helpers[i]
            .checks
            .as_ref()
            .is_some_and(|c| c.readiness == Readiness::Starting);
        if m.extend_timeout_usec.is_some() && !starting {
            self.io.checks_io.late_extend.note(
                format_args!(
                    "{}: EXTEND_TIMEOUT_USEC= ignored: it only pushes back the readiness \
                     deadline of a helper still starting (a stop's time is its `stop_grace`)",
                    self.config.helpers[i].name()
                ),
                further,
            );
        }
        let cfg = &self.config.helpers[i];
        if m.fdstore {
            self.io.checks_io.fdstore.note(
                format_args!(
                    "{}: FDSTORE=1 is not supported: foster keeps no descriptors; the {fds} \
                     sent with it were closed",
                    cfg.name()
                ),
                further,
            );
        }
        if m.watchdog_usec.is_some() && cfg.watchdog.is_none() {
            self.io.checks_io.no_watchdog.note(
                format_args!(
                    "{}: WATCHDOG_USEC= ignored: it has no `watchdog` (set one to arm it)",
                    cfg.name()
                ),
                further,
            );
        }
    }

    /// `WATCHDOG_USEC=usec` from helper `i` (its launch `launch`), when it has a watchdog: the
    /// new period replaces the armed one.
    fn new_watchdog_period(&mut self, i: usize, launch: u32, usec: u64, now: Instant) {
        let Some(c) = self.live_checks(i, None).filter(|c| c.watchdog.is_some()) else {
            return;
        };
        c.watchdog = Some(Duration::from_micros(usec).max(crate::base::duration::MIN));
        if let Some(due) = c.watchdog_due() {
            self.timers
                .cancel(|t| matches!(t, Timer::Check(j, _, CheckTimer::Watchdog) if *j == i));
            self.timers.at(
                due.saturating_duration_since(now),
                Timer::Check(i, launch, CheckTimer::Watchdog),
            );
        }
    }

    /// Whether `MAINPID=p` from helper `i` names a process of its tree; one that does not is
    /// said ([`Noted`]: a helper may send it in a loop).
    fn main_pid_of(&mut self, i: usize, p: i32) -> bool {
        if self.helper_of_pid(p) == Some(i) {
            return true;
        }
        let name = self.config.helpers[i].name();
        self.io.checks_io.bad_main_pid.note(
            format_args!("{name}: MAINPID={p} is not a process of its tree: ignored"),
            "further ones are logged at debug level",
        );
        false
    }

    /// Helper `i` said `STOPPING=1` (the first time): on its way out, its watchdog is no longer
    /// judged (as systemd stops a stopping service's), so a helper that takes longer than its
    /// period to finish is not killed for it and its end not taken as a failure.
    fn said_stopping(&mut self, i: usize) {
        self.timers
            .cancel(|t| matches!(t, Timer::Check(j, _, CheckTimer::Watchdog) if *j == i));
        let state = self.units.helpers[i].state;
        self.set_state(i, state, Some("(it said STOPPING=1)".to_string()));
    }

    /// What helper `i` said through the notify protocol.
    fn apply_notify(&mut self, i: usize, m: Message) {
        let now = Instant::now();
        let cfg = self.config.helpers[i].clone();
        let main_pid = m.main_pid.filter(|&p| self.main_pid_of(i, p));
        let Some(c) = self.live_checks(i, None) else {
            return;
        };
        let launch = c.launch;
        if m.errno.is_some() {
            c.errno = m.errno;
        }
        if main_pid.is_some() {
            c.main_pid = main_pid;
        }
        if let Some(usec) = m.extend_timeout_usec {
            c.extend(now, Duration::from_micros(usec));
        }
        if let Some(usec) = m.watchdog_usec {
            self.new_watchdog_period(i, launch, usec, now);
        }
        let Some(c) = self.live_checks(i, None) else {
            return;
        };
        if m.watchdog == Some(Watchdog::Ping) {
            c.last_ping = now;
        }
        let notify_ready = cfg.ready.as_ref().is_some_and(|r| r.notify.is_some());
        let stopping = m.stopping && !c.stopping;
        c.stopping |= m.stopping;
        let reloading = m.reloading && notify_ready && c.readiness == Readiness::Ready;
        if reloading {
            c.readiness = Readiness::Reloading;
        }
        let id = self.units.helpers[i].running();
        if let (Some(text), Some(id)) = (&m.status, id) {
            self.set_status_text(i, id, text);
        }
        if reloading {
            // Not ready until its next READY=1: `starting` again, which holds back the helpers
            // that wait for it to be ready.
            let detail = Some("(reloading: it said RELOADING=1)".to_string());
            self.set_state(i, HelperState::Starting, detail);
        }
        if stopping {
            self.said_stopping(i);
        }
        if m.ready && notify_ready {
            self.became_ready(i, "notify");
        }
        if m.watchdog == Some(Watchdog::Trigger) {
            self.fail_helper(
                i,
                Check::Watchdog,
                "it asked to be taken as failed (WATCHDOG=trigger)".to_string(),
                true,
            );
        }
    }
}
