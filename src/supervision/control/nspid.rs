//! Pids across PID namespaces, for the clients of a control socket.
//!
//! Owns [`PidMap`]. A supervisor reports the pids of its own PID namespace (a contained one is
//! PID 1 of a namespace of its own); a client shows them as seen from the caller's namespace.
//! The client learns the supervisor's pid in its own namespace from `SO_PEERCRED` of its
//! connection (the kernel translates it; the supervisor is the process that listens on the
//! socket), reads that process's `NSpid` to learn how many namespaces lie between them (the
//! depth), and maps an inner pid to its own by reading the `NSpid` of the supervisor's
//! descendants: a [`Subtree`] rooted at the supervisor, which reads only what changed since the
//! last time. Start times do not depend on the namespace, so an inner identity `(pid, start)`
//! maps to `(outer pid, start)`. A process of an event that ended before it was read here
//! takes the outer pid a contained supervisor sent with the event, when those are this
//! namespace's (its namespace is the one just below).

use std::collections::{HashMap, VecDeque};
use std::os::unix::net::UnixStream;

use crate::process::identity::Identity;
use crate::process::tree::{ScanOptions, Subtree};
use crate::supervision::control::protocol::{
    AdoptionInfo, EventRecord, LogRecord, ReplyBody, Status, Target,
};
use crate::supervision::event::Event;

/// Why a pid the caller names is not a target in the supervisor's terms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotInTree {
    /// No process has that pid.
    #[error("pid {0} is not inside the supervised tree: no such process")]
    NoSuchProcess(i32),
    /// The process is not seen from the supervisor's PID namespace.
    #[error(
        "pid {0} is not inside the supervised tree: it is outside the supervisor's PID namespace"
    )]
    OutsideNamespace(i32),
}

const NOT_THE_LISTENER: &str = "the process listening on the socket is not the supervisor it names";

/// How many mappings of ended processes a [`PidMap`] keeps.
pub const REMEMBERED: usize = 4096;

/// A supervisor's pids as seen from the caller's PID namespace.
///
/// The mappings of processes that ended are remembered (at most [`REMEMBERED`]), so that the
/// exit of a process seen alive before is shown with its pid. A pid of a status never seen
/// alive from here maps to 0, the kernel's own word for a process not visible in a namespace.
/// In an event (a process that ended before the reader saw it: a crash loop's quick exits, an
/// event of the backlog about a process long gone) it takes the outer pid the supervisor sent
/// ([`PidMap::record`]) when the supervisor's namespace is the one just below; else it stays
/// the supervisor's pid, and [`PidMap::event`] names it, for the reader to say so
/// ([`foreign_note`]): never `?` or 0.
///
/// The other way, a pid the user names (`foster ctl signal PID`) is in the caller's namespace:
/// its `NSpid` entry at the supervisor's depth is the pid the supervisor knows. In the
/// supervisor's own namespace (a helper calling `foster ctl`), both ways are the identity.
#[derive(Debug)]
pub struct PidMap {
    /// The pid here of the process that listens on the socket (0: not visible).
    listener: i32,
    view: View,
}

#[derive(Debug)]
enum View {
    /// The supervisor (this pid) is in the caller's namespace: pids are the caller's.
    Same(i32),
    /// The supervisor's namespace is below the caller's.
    Below(Box<Below>),
    /// The supervisor's pids cannot be translated (why): they are shown as they are.
    Unseen(String),
}

#[derive(Debug)]
struct Below {
    /// Index of the supervisor's namespace in an `NSpid` line read here.
    depth: usize,
    /// The supervisor's pid in the caller's namespace.
    server: i32,
    /// The supervisor's subtree, read here (created at the first refresh).
    tree: Option<Subtree>,
    /// Outer identity → inner pid, for the processes of the last refresh (`NSpid` never
    /// changes for a process: read once per identity).
    inner_of: HashMap<Identity, i32>,
    /// Inner pid → outer identity, for the processes alive at the last refresh.
    live: HashMap<i32, Identity>,
    /// Inner identity → outer pid: the live ones and up to [`REMEMBERED`] ended ones.
    known: HashMap<Identity, i32>,
    /// The order in which `known` learnt its entries, for forgetting the oldest.
    order: VecDeque<Identity>,
    /// The outer pids a contained supervisor sends are not this namespace's: its own (in its
    /// start event) is another than its pid here.
    outer_elsewhere: bool,
    /// A refresh was done for the current reply: a miss now means the process is gone.
    fresh: bool,
    /// The last helper pid of a log line and its translation (none: it ended unseen): lines
    /// come in runs of one launch's, translated once.
    last_line: Option<(i32, Option<i32>)>,
}

/// The pids of one event through a [`Below`]: a process never seen from here takes its outer
/// pid the supervisor sent (`outer`, when they are this namespace's), else keeps the
/// supervisor's pid, listed in `foreign`.
struct EventView<'a> {
    below: &'a mut Below,
    outer: &'a [[i32; 2]],
    foreign: Vec<i32>,
}

impl EventView<'_> {
    /// The pid here of an inner pid never seen from here.
    fn unseen(&mut self, pid: i32) -> i32 {
        let sent = self.outer.iter().find(|p| p[0] == pid).map(|p| p[1]);
        match sent {
            Some(outer) if self.below.outer_here() => outer,
            _ => {
                self.foreign.push(pid);
                pid
            }
        }
    }
}

impl crate::supervision::event::PidView for EventView<'_> {
    fn identity(&mut self, id: Identity) -> Identity {
        let pid = match self.below.lookup(id) {
            Some(pid) => pid,
            None => self.unseen(id.pid),
        };
        Identity { pid, ..id }
    }

    fn pid(&mut self, pid: i32) -> i32 {
        match self.below.live_pid(pid) {
            Some(p) => p,
            None => self.unseen(pid),
        }
    }
}

/// What a reader adds to an event's line whose `foreign` pids are the supervisor's
/// ([`PidMap::event`]): `""` when there are none.
pub fn foreign_note(foreign: &[i32]) -> String {
    let list: Vec<String> = foreign.iter().map(i32::to_string).collect();
    match list.as_slice() {
        [] => String::new(),
        [one] => format!(" (pid {one} is the supervisor's: it ended before it was seen here)"),
        many => format!(
            " (pids {} are the supervisor's: they ended before they were seen here)",
            many.join(", ")
        ),
    }
}

impl PidMap {
    /// The map for a connected control socket: the supervisor is its peer.
    pub fn for_stream(stream: &UnixStream) -> PidMap {
        use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
        match getsockopt(stream, PeerCredentials) {
            Ok(c) => PidMap::for_pid(c.pid()),
            Err(e) => PidMap {
                listener: 0,
                view: View::Unseen(format!("the supervisor's credentials are unreadable ({e})")),
            },
        }
    }

    /// The map for a supervisor whose pid in the caller's namespace is `server` (0: not
    /// visible from here).
    pub fn for_pid(server: i32) -> PidMap {
        let view = if server <= 0 {
            View::Unseen("the supervisor runs in a PID namespace this one does not contain".into())
        } else if !proc_is_ours() {
            View::Unseen("/proc here is not this PID namespace's".into())
        } else {
            match crate::process::tree::nspid(server) {
                Some(p) => View::at(server, p.len() - 1),
                None => View::Unseen(format!(
                    "cannot read NSpid in /proc/{server}/status of the supervisor"
                )),
            }
        };
        PidMap {
            listener: server,
            view,
        }
    }

    /// Checks that the view maps the supervisor `sup` (as it names itself) to a process here.
    /// The listener can be another process than the supervisor, an ancestor of it: `foster
    /// demo` binds the socket and hands it to its supervisor, which listens again (the peer
    /// credentials are then its own) once it runs, so that a connection made before that has
    /// the demo for peer. The supervisor is then looked for below the listener: the process
    /// with its start time whose `NSpid` ends in its pid. False when it is not found: nothing
    /// is translated.
    fn anchor(&mut self, sup: Identity) -> bool {
        match &mut self.view {
            View::Unseen(_) => return false,
            View::Same(server) if Identity::of(*server).ok() == Some(sup) => return true,
            View::Below(b) => {
                b.refresh();
                let here = b.live.get(&sup.pid);
                if here.is_some_and(|l| l.pid == b.server && l.start_time == sup.start_time) {
                    return true;
                }
            }
            View::Same(_) => {}
        }
        let found = Subtree::new(self.listener, b"", ScanOptions::default())
            .ok()
            .and_then(|mut t| {
                t.update().ok()?;
                let candidates: Vec<i32> = t
                    .snapshot()
                    .nodes()
                    .filter(|n| n.start_time == sup.start_time)
                    .map(|n| n.pid)
                    .collect();
                candidates.into_iter().find_map(|pid| {
                    let n = t.read_nspid(pid)?;
                    (n.last() == Some(&sup.pid)).then(|| (pid, n.len() - 1))
                })
            });
        match found {
            Some((server, depth)) => {
                self.view = View::at(server, depth);
                true
            }
            None => {
                self.view = View::Unseen(NOT_THE_LISTENER.into());
                false
            }
        }
    }

    /// Whether the supervisor's namespace is another than the caller's (pids are translated).
    pub fn translates(&self) -> bool {
        matches!(self.view, View::Below(_))
    }

    /// Why pids cannot be shown in the caller's namespace, when they cannot.
    pub fn untranslated(&self) -> Option<&str> {
        match &self.view {
            View::Unseen(why) => Some(why),
            _ => None,
        }
    }

    /// Reads the supervisor's tree now, so that the processes a request is about are known
    /// even if the request ends them before its reply is translated (`signal`, `restart`).
    pub fn learn(&mut self) {
        if let View::Below(b) = &mut self.view {
            b.refresh();
            b.fresh = false;
        }
    }

    /// Translates the pids of a reply (a status or an event: its `foreign_pids` then lists
    /// those left the supervisor's).
    pub fn reply(&mut self, body: &mut ReplyBody) {
        match body {
            ReplyBody::Status(s) => self.status(s),
            ReplyBody::Event(r) => self.record(r),
            ReplyBody::History { events, .. } => events.iter_mut().for_each(|r| self.record(r)),
            _ => {}
        }
    }

    /// Translates every pid of a status snapshot; a process that ended since it was taken is
    /// left out. A snapshot whose supervisor is not the process listening on the socket (as
    /// seen from here) cannot be translated: it is left as it is, and so is the rest.
    pub fn status(&mut self, s: &mut Status) {
        let sup = s.supervisor.identity;
        if !self.anchor(sup) {
            return;
        }
        let View::Below(b) = &mut self.view else {
            return;
        };
        s.supervisor.identity = b.id(sup);
        for h in &mut s.helpers {
            h.identity = h.identity.map(|i| b.id(i));
            h.main_pid = h.main_pid.map(|p| b.pid(p));
        }
        s.processes.retain_mut(|p| {
            let Some(outer) = b.live.get(&p.pid).copied() else {
                return false;
            };
            if outer.start_time != p.start_time {
                return false; // the pid is held by another process now
            }
            p.ppid = b
                .tree
                .as_ref()
                .and_then(|t| t.snapshot().get(&outer))
                .map_or(0, |n| n.ppid);
            p.pid = outer.pid;
            p.parent = p.parent.map(|i| b.id(i));
            p.expected_parent = p.expected_parent.map(|i| b.id(i));
            if let Some(a) = &mut p.adoption {
                b.adoption(a);
            }
            true
        });
    }

    /// Translates every pid of an event record: a process never seen from here takes the
    /// outer pid the supervisor sent with it when those are this namespace's pids, else stays
    /// the supervisor's, named in `foreign_pids`. Once translated, `outer_pids` is dropped.
    pub fn record(&mut self, r: &mut EventRecord) {
        r.foreign_pids = self.event_with(&mut r.event, &r.outer_pids);
        if self.translates() {
            r.outer_pids.clear();
        }
    }

    /// Translates every pid of an event; returns those of processes never seen from here,
    /// left the supervisor's (each once, in the order the event names them).
    pub fn event(&mut self, e: &mut Event) -> Vec<i32> {
        self.event_with(e, &[])
    }

    /// [`PidMap::event`], with the outer pids the supervisor sent.
    fn event_with(&mut self, e: &mut Event, outer: &[[i32; 2]]) -> Vec<i32> {
        if let Event::Start { supervisor, .. } = e {
            if !self.anchor(*supervisor) {
                return Vec::new();
            }
        }
        let View::Below(b) = &mut self.view else {
            return Vec::new();
        };
        if let Event::Start { supervisor, .. } = e {
            b.check_outer(supervisor.pid, outer);
        }
        b.fresh = false;
        let mut view = EventView {
            below: b,
            outer,
            foreign: Vec::new(),
        };
        e.map_pids(&mut view);
        let mut foreign = view.foreign;
        let mut seen = std::collections::HashSet::new();
        foreign.retain(|p| seen.insert(*p));
        foreign
    }

    /// Translates the helper's pid of a log line (`foster ctl logs`): the process that holds
    /// that pid now, read again only when the pid changes; once that launch has ended, the
    /// outer pid a contained supervisor sent with the line when those are this namespace's,
    /// else none (never 0). The outer pid sent is dropped once used.
    pub fn log(&mut self, rec: &mut LogRecord) {
        let sent = rec.helper_outer_pid.take();
        let View::Below(b) = &mut self.view else {
            return;
        };
        let Some(inner) = rec.helper_pid else {
            return;
        };
        rec.helper_pid = match b.last_line {
            Some((was, outer)) if was == inner => outer,
            _ => {
                b.fresh = false;
                let outer = b.live_pid(inner).or(sent.filter(|_| b.outer_here()));
                b.last_line = Some((inner, outer));
                outer
            }
        };
    }

    /// A target the caller names, in the supervisor's terms: a pid of the caller's namespace
    /// becomes the identity (pid and start time) of that process in the supervisor's, so that
    /// a pid reused meanwhile is refused rather than signalled. The error says why a process
    /// cannot be one of the supervisor's.
    pub fn target(&mut self, t: &Target) -> Result<Target, NotInTree> {
        let View::Below(b) = &mut self.view else {
            return Ok(t.clone());
        };
        let (pid, start) = match t {
            Target::Helper(_) => return Ok(t.clone()),
            Target::Pid(p) => match Identity::of(*p) {
                Ok(id) => (*p, id.start_time),
                Err(_) => return Err(NotInTree::NoSuchProcess(*p)),
            },
            Target::Identity(id) => (id.pid, id.start_time),
        };
        let inner = b
            .tree
            .as_mut()
            .and_then(|t| t.read_nspid(pid))
            .or_else(|| crate::process::tree::nspid(pid))
            .and_then(|n| n.get(b.depth).copied());
        match inner {
            Some(inner) => Ok(Target::Identity(Identity {
                pid: inner,
                start_time: start,
            })),
            None => Err(NotInTree::OutsideNamespace(pid)),
        }
    }

    /// A message of the supervisor in the caller's terms: every identity (`PID:START`) of a
    /// process seen from here, and the `pid N` of the request's target (`asked`: the target
    /// as sent, then as the caller gave it).
    pub fn message(&mut self, text: &str, asked: Option<(&Target, &Target)>) -> String {
        let View::Below(b) = &mut self.view else {
            return text.to_string();
        };
        let mut out = String::with_capacity(text.len());
        let bytes = text.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let starts_word = i == 0 || !bytes[i - 1].is_ascii_alphanumeric();
            let n = if starts_word { digits(bytes, i) } else { 0 };
            if n == 0 {
                let ch = text[i..].chars().next().unwrap_or(' ');
                out.push(ch);
                i += ch.len_utf8();
                continue;
            }
            i += b.message_number(&text[i..], n, asked, &mut out);
        }
        out
    }
}

/// How many ASCII digits `bytes` has from `from` on.
fn digits(bytes: &[u8], from: usize) -> usize {
    bytes[from..]
        .iter()
        .take_while(|c| c.is_ascii_digit())
        .count()
}

/// The pid the caller gave for the request's target (`asked`) when that target's inner pid is
/// `pid`.
fn asked_pid(asked: Option<(&Target, &Target)>, pid: i32) -> Option<i32> {
    match asked {
        Some((Target::Identity(inner), Target::Pid(given))) if inner.pid == pid => Some(*given),
        Some((Target::Identity(inner), Target::Identity(given))) if inner.pid == pid => {
            Some(given.pid)
        }
        _ => None,
    }
}

impl View {
    /// The view of a supervisor whose pid here is `server`, `depth` namespaces below.
    fn at(server: i32, depth: usize) -> View {
        if depth == 0 {
            return View::Same(server);
        }
        View::Below(Box::new(Below {
            depth,
            server,
            tree: None,
            inner_of: HashMap::new(),
            live: HashMap::new(),
            known: HashMap::new(),
            order: VecDeque::new(),
            outer_elsewhere: false,
            fresh: false,
            last_line: None,
        }))
    }
}

/// Whether `/proc` shows this process's PID namespace: a process that entered a new one without
/// mounting its own `/proc` sees another namespace's pids there.
fn proc_is_ours() -> bool {
    std::fs::read_link("/proc/self")
        .ok()
        .and_then(|p| p.to_str().and_then(|s| s.parse::<i32>().ok()))
        == Some(std::process::id() as i32)
}

impl Below {
    /// Reads what changed in the supervisor's subtree and learns the new processes' pids.
    fn refresh(&mut self) {
        self.fresh = true;
        if self.tree.is_none() {
            self.tree = Subtree::new(
                self.server,
                crate::gate::adoption::ENV_PREFIX.as_bytes(),
                ScanOptions {
                    threads: 1,
                    ..ScanOptions::default()
                },
            )
            .ok();
        }
        let Some(tree) = &mut self.tree else {
            return;
        };
        if tree.update().is_err() {
            return; // the supervisor is gone: keep what was known
        }
        let outer: Vec<Identity> = tree.snapshot().nodes().map(|n| n.identity).collect();
        let mut inner_of = HashMap::with_capacity(outer.len());
        self.live.clear();
        for id in outer {
            let inner = match self.inner_of.get(&id) {
                Some(&p) => Some(p),
                None => tree
                    .read_nspid(id.pid)
                    .and_then(|n| n.get(self.depth).copied()),
            };
            let Some(inner) = inner else { continue };
            inner_of.insert(id, inner);
            self.live.insert(inner, id);
            let key = Identity {
                pid: inner,
                start_time: id.start_time,
            };
            if self.known.insert(key, id.pid).is_none() {
                self.order.push_back(key);
            }
        }
        self.inner_of = inner_of;
        while self.known.len() > self.live.len() + REMEMBERED {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            let alive = self
                .live
                .get(&old.pid)
                .is_some_and(|o| o.start_time == old.start_time);
            if alive {
                self.order.push_back(old);
            } else {
                self.known.remove(&old);
            }
        }
    }

    /// Whether the outer pids a contained supervisor sends are this namespace's: its
    /// namespace is the child of this one, the one it was started in (not found otherwise).
    fn outer_here(&self) -> bool {
        self.depth == 1 && !self.outer_elsewhere
    }

    /// Checks the supervisor's own outer pid, `sup`'s in `outer`, when it sent one.
    fn check_outer(&mut self, sup: i32, outer: &[[i32; 2]]) {
        if let Some(p) = outer.iter().find(|p| p[0] == sup) {
            self.outer_elsewhere = p[1] != self.server;
        }
    }

    /// The caller's pid of an inner identity, when it was seen from here (read again once
    /// per reply when it is not known).
    fn lookup(&mut self, inner: Identity) -> Option<i32> {
        if !self.known.contains_key(&inner) && !self.fresh {
            self.refresh();
        }
        self.known.get(&inner).copied()
    }

    /// The caller's identity of an inner one: (0, start) when it was never seen from here.
    fn id(&mut self, inner: Identity) -> Identity {
        Identity {
            pid: self.lookup(inner).unwrap_or(0),
            start_time: inner.start_time,
        }
    }

    /// The caller's pid of the process that holds a bare inner pid now, if any.
    fn live_pid(&mut self, inner: i32) -> Option<i32> {
        if !self.live.contains_key(&inner) && !self.fresh {
            self.refresh();
        }
        self.live.get(&inner).map(|i| i.pid)
    }

    /// [`Below::live_pid`], else 0.
    fn pid(&mut self, inner: i32) -> i32 {
        self.live_pid(inner).unwrap_or(0)
    }

    fn adoption(&mut self, a: &mut AdoptionInfo) {
        a.from = a.from.map(|i| self.id(i));
        a.to = self.id(a.to);
        a.expected = a.expected.map(|i| self.id(i));
    }

    /// Writes to `out` the number that starts `text` (`n` digits, a word of its own) in the
    /// caller's terms: an identity `PID:START` translated, the bare pid after `pid ` of the
    /// request's target given back as the caller gave it, anything else as it is. Returns
    /// the bytes of `text` it took.
    fn message_number(
        &mut self,
        text: &str,
        n: usize,
        asked: Option<(&Target, &Target)>,
        out: &mut String,
    ) -> usize {
        let bytes = text.as_bytes();
        let pid: Option<i32> = text[..n].parse().ok();
        let m = if bytes.get(n) == Some(&b':') {
            digits(bytes, n + 1)
        } else {
            0
        };
        let start: Option<u64> = (m > 0)
            .then(|| text[n + 1..n + 1 + m].parse().ok())
            .flatten();
        match (pid, start) {
            (Some(pid), Some(start_time)) => {
                let id = self.caller_identity(Identity { pid, start_time }, asked);
                if id.pid > 0 {
                    out.push_str(&id.to_string());
                } else {
                    out.push_str(&text[..n + 1 + m]);
                }
                n + 1 + m
            }
            (Some(pid), None) if out.ends_with("pid ") => {
                match asked_pid(asked, pid) {
                    Some(p) => out.push_str(&p.to_string()),
                    None => out.push_str(&text[..n]),
                }
                n
            }
            _ => {
                out.push_str(&text[..n]);
                n
            }
        }
    }

    /// The caller's identity of `token`, an inner one of a message: the request's target as
    /// the caller gave it (`asked`), else as seen from here ([`Below::id`]).
    fn caller_identity(&mut self, token: Identity, asked: Option<(&Target, &Target)>) -> Identity {
        match asked {
            Some((Target::Identity(inner), Target::Pid(given))) if *inner == token => Identity {
                pid: *given,
                start_time: token.start_time,
            },
            Some((Target::Identity(inner), Target::Identity(given))) if *inner == token => *given,
            _ => self.id(token),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A map whose supervisor's namespace is one level down and whose subtree is never read
    /// (its root pid does not exist): only what `known` says is translated.
    fn below(known: &[((i32, u64), i32)]) -> PidMap {
        let mut b = Below {
            depth: 1,
            server: i32::MAX,
            tree: None,
            inner_of: HashMap::new(),
            live: HashMap::new(),
            known: HashMap::new(),
            order: VecDeque::new(),
            outer_elsewhere: false,
            fresh: false,
            last_line: None,
        };
        for &((pid, start_time), outer) in known {
            let inner = Identity { pid, start_time };
            b.known.insert(inner, outer);
            b.live.insert(
                pid,
                Identity {
                    pid: outer,
                    start_time,
                },
            );
        }
        PidMap {
            listener: i32::MAX,
            view: View::Below(Box::new(b)),
        }
    }

    fn id(pid: i32, start_time: u64) -> Identity {
        Identity { pid, start_time }
    }

    fn record(event: Event, outer_pids: Vec<[i32; 2]>) -> EventRecord {
        EventRecord {
            seq: 1,
            ts_ms: 1,
            event,
            foreign_pids: Vec::new(),
            outer_pids,
        }
    }

    fn launch(pid: i32) -> Event {
        Event::Launch {
            helper: "web".into(),
            identity: id(pid, 11),
            attempt: 1,
        }
    }

    fn depth(m: &mut PidMap, depth: usize) {
        let View::Below(b) = &mut m.view else {
            unreachable!()
        };
        b.depth = depth;
    }

    #[test]
    fn the_outer_pids_sent_name_the_unseen_one_level_down_only() {
        let mut m = below(&[((1, 10), 500)]);
        let mut r = record(launch(5), vec![[5, 4711]]);
        m.record(&mut r);
        assert_eq!(r.event, launch(4711), "the outer pid sent");
        assert!(
            r.foreign_pids.is_empty() && r.outer_pids.is_empty(),
            "{r:?}"
        );
        // Seen from here: what was seen wins over what was sent.
        let mut m = below(&[((5, 11), 600)]);
        let mut r = record(launch(5), vec![[5, 4711]]);
        m.record(&mut r);
        assert_eq!(r.event, launch(600));
        // Two levels down: the outer pids are not this namespace's.
        let mut m = below(&[]);
        depth(&mut m, 2);
        let mut r = record(launch(5), vec![[5, 4711]]);
        m.record(&mut r);
        assert_eq!((r.event, r.foreign_pids), (launch(5), vec![5]));
    }

    #[test]
    fn outer_pids_are_not_used_when_the_supervisors_own_is_another() {
        let mut m = below(&[]);
        let View::Below(b) = &mut m.view else {
            unreachable!()
        };
        b.check_outer(1, &[[1, 42]]);
        let mut r = record(launch(5), vec![[5, 4711]]);
        m.record(&mut r);
        assert_eq!((r.event, r.foreign_pids), (launch(5), vec![5]));
        let View::Below(b) = &mut m.view else {
            unreachable!()
        };
        b.check_outer(1, &[[1, i32::MAX]]);
        let mut r = record(launch(5), vec![[5, 4711]]);
        m.record(&mut r);
        assert_eq!(
            r.event,
            launch(4711),
            "the supervisor's own outer pid is its pid here"
        );
    }

    #[test]
    fn events_get_the_callers_pids_and_the_supervisors_for_the_unseen() {
        let mut m = below(&[((1, 10), 500), ((3, 12), 502)]);
        assert!(m.translates());
        let mut e = Event::Reparented {
            identity: id(3, 12),
            helper: None,
            generation: Some(2),
            from: Some(id(2, 11)),
            to: id(1, 10),
            expected: Some(id(1, 10)),
            classification: crate::gate::adoption::Classification::Expected,
        };
        assert_eq!(m.event(&mut e), [2], "the one never seen from here, named");
        let Event::Reparented {
            identity,
            from,
            to,
            expected,
            ..
        } = e
        else {
            unreachable!()
        };
        assert_eq!(identity, id(502, 12));
        assert_eq!(
            from,
            Some(id(2, 11)),
            "never seen from here: the supervisor's pid, never 0"
        );
        assert_eq!((to, expected), (id(500, 10), Some(id(500, 10))));
        let mut exit = Event::Exit {
            pid: 3,
            identity: None,
            helper: None,
            generation: None,
            status: crate::process::reaper::ExitStatus::Exited { code: 0 },
        };
        assert!(m.event(&mut exit).is_empty());
        assert!(matches!(exit, Event::Exit { pid: 502, .. }), "{exit:?}");
        let mut gone = Event::Exit {
            pid: 9,
            identity: Some(id(9, 40)),
            helper: Some("crashy".into()),
            generation: Some(1),
            status: crate::process::reaper::ExitStatus::Exited { code: 7 },
        };
        assert_eq!(m.event(&mut gone), [9]);
        assert_eq!(
            format!("{gone}{}", foreign_note(&[9])),
            "crashy[9] exited with code 7 (pid 9 is the supervisor's: it ended before it was \
             seen here)"
        );
        assert_eq!(
            foreign_note(&[9, 11]),
            " (pids 9, 11 are the supervisor's: they ended before they were seen here)"
        );
        assert_eq!(foreign_note(&[]), "");
    }

    #[test]
    fn messages_name_the_callers_pids() {
        let mut m = below(&[((1, 10), 500), ((3, 12), 502)]);
        let sent = Target::Identity(id(4, 13));
        let given = Target::Pid(777);
        let asked = Some((&sent, &given));
        assert_eq!(
            m.message("sent SIGRTMIN+3 to a process of helper \"w\" (4:13)", asked),
            "sent SIGRTMIN+3 to a process of helper \"w\" (777:13)"
        );
        assert_eq!(
            m.message("pid 4 is not inside the supervised tree", asked),
            "pid 777 is not inside the supervised tree"
        );
        assert_eq!(
            m.message("process 3:12 is gone: pid 4 now belongs to 9:99", None),
            "process 502:12 is gone: pid 4 now belongs to 9:99",
            "a known identity translated, an unknown one and a bare pid left as they are"
        );
        assert_eq!(m.message("é 1:10 ü", None), "é 500:10 ü");
    }

    #[test]
    fn targets_outside_the_namespace_are_refused() {
        let mut m = below(&[]);
        let me = std::process::id() as i32;
        let err = m.target(&Target::Pid(me)).unwrap_err().to_string();
        assert!(
            err.contains("outside the supervisor's PID namespace"),
            "{err}"
        );
        let err = m.target(&Target::Pid(i32::MAX)).unwrap_err().to_string();
        assert!(err.contains("no such process"), "{err}");
        let h = Target::Helper("web".into());
        assert_eq!(m.target(&h), Ok(h));
    }

    #[test]
    fn a_supervisor_in_this_namespace_is_taken_as_it_is() {
        let me = std::process::id() as i32;
        let mut m = PidMap::for_pid(me);
        assert!(!m.translates() && m.untranslated().is_none());
        let t = Target::Pid(me);
        assert_eq!(m.target(&t), Ok(t));
        assert!(PidMap::for_pid(0).untranslated().is_some());
    }
}
