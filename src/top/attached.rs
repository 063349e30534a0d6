//! The attached source: readings from a running supervisor's control socket.
//!
//! Owns [`AttachedSource`], the dashboard's client of the control protocol
//! ([`crate::supervision::control::protocol`], `docs/control.md`). It holds two connections: one asks for a
//! `status` snapshot at each reading, the other follows the `events` stream (its backlog first,
//! so the events pane shows what just happened) on a thread of its own that asks the data thread
//! for a reading as soon as an event arrives: the tree on screen follows launches, exits and
//! adoptions at once. Between events the dashboard refreshes the last snapshot's CPU% and memory
//! from `/proc` itself, and asks for a snapshot only when the tree changed under it: a process
//! gone, reparented or exec'd, or one born under a process of the snapshot (the kernel's fork
//! notifications, [`Connector`], or else a listing of `/proc`); it redraws only when what it
//! shows changed. The optional columns the snapshot does not carry (process group, session,
//! storage, cgroup, PID namespace) are read from `/proc` for the processes seen here under
//! their snapshot identity, only while such a column is shown. The supervisor's own state
//! letter is the one read here at the last of those refreshes, not the snapshot's: it reads
//! itself while answering, always `R`.
//!
//! Also owns [`Controller`], which carries out the dashboard's actions through the socket
//! (`signal`, `restart`, `start`, `stop`), [`LogStream`], the log pane's one `logs` request
//! following the selected helper on a connection of its own (dropped when the selection moves to
//! another helper, so there is at most one), and the conversion of the protocol's snapshot and
//! events
//! into the dashboard's [`Sample`] ([`sample_of`]; events as their `Display` says them).

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::process::identity::Identity;
use crate::process::tree::connector::{Connector, ProcEvent, Wanted};
use crate::process::tree::{ScanOptions, Scanner};
use crate::supervision::control::nspid::PidMap;
use crate::supervision::control::protocol::{
    EventRecord, HelperInfo, HelperState, ProcessInfo, Reply, ReplyBody, Request, Role, Status,
    request_line,
};
use crate::supervision::event::Event;
use crate::top::dialogs::ControlError;
use crate::top::model::{
    Adoption, EventLine, HelperDown, HelperStatus, HelperSummary, ProcInfo, RESTART_LOOP, Sample,
    SharedWants, Source, SourceError, Supervision, Waker,
};
use crate::top::panes::{KEEP_LOG_LINES, LogItem, LogSource};

/// How many events the pane keeps (the supervisor's own backlog holds as many).
pub const KEEP_EVENTS: usize = crate::supervision::control::protocol::BACKLOG;

/// The longest reply line the dashboard accepts (a snapshot of a very large tree fits).
const MAX_REPLY: usize = 64 << 20;

/// One connection to a control socket: request lines out, reply lines in.
#[derive(Debug)]
pub struct Connection {
    socket: PathBuf,
    writer: UnixStream,
    reader: BufReader<UnixStream>,
    line: Vec<u8>,
}

impl Connection {
    /// Connects to the control socket at `socket` and checks that the server is this user's
    /// or root's ([`crate::supervision::control::client::check_server`]) before anything is sent; the error
    /// says why in a person's words.
    pub fn open(socket: &Path) -> Result<Connection, SourceError> {
        let stream =
            crate::supervision::control::client::connect_checked(socket, "--attach SOCKET")
                .map_err(|e| SourceError(format!("cannot attach: {e}")))?;
        let reader = BufReader::new(
            stream
                .try_clone()
                .map_err(|e| SourceError(format!("{}: {e}", socket.display())))?,
        );
        Ok(Connection {
            socket: socket.to_path_buf(),
            writer: stream,
            reader,
            line: Vec::new(),
        })
    }

    /// The supervisor's pids as seen from here, learnt from this connection's peer.
    pub fn pid_map(&self) -> PidMap {
        PidMap::for_stream(&self.writer)
    }

    /// Another handle on the connection's socket (to shut it down from another thread).
    pub fn socket_handle(&self) -> io::Result<UnixStream> {
        self.writer.try_clone()
    }

    /// Sends one request.
    pub fn send(&mut self, req: &Request) -> Result<(), SourceError> {
        self.writer.write_all(&request_line(req)).map_err(|e| {
            SourceError(format!(
                "{}: the supervisor closed the connection ({e})",
                self.socket.display()
            ))
        })
    }

    /// Reads one reply line. The end of the stream is an error naming the socket.
    pub fn read_reply(&mut self) -> Result<Reply, SourceError> {
        self.line.clear();
        let n = io::Read::take(&mut self.reader, MAX_REPLY as u64 + 1)
            .read_until(b'\n', &mut self.line)
            .map_err(|e| SourceError(format!("{}: reading failed: {e}", self.socket.display())))?;
        if n == 0 {
            return Err(SourceError(format!(
                "{}: the supervisor closed the connection (has it stopped?)",
                self.socket.display()
            )));
        }
        if self.line.last() != Some(&b'\n') {
            return Err(SourceError(format!(
                "{}: the connection ended in the middle of a reply ({} bytes, no newline)",
                self.socket.display(),
                self.line.len()
            )));
        }
        serde_json::from_slice(&self.line).map_err(|e| {
            SourceError(format!(
                "{}: a reply is not protocol version {}: {}",
                self.socket.display(),
                crate::supervision::control::protocol::VERSION,
                crate::base::sanitize::escape(e.to_string().as_bytes())
            ))
        })
    }

    /// Sends `req` and reads its reply; an error reply becomes an error naming its kind. When
    /// the supervisor refused the connection (it writes why, then closes), sending can fail
    /// with a broken pipe while the reason is still there to read: the reply is read anyway.
    pub fn call(&mut self, req: &Request) -> Result<ReplyBody, SourceError> {
        let sent = self.send(req);
        let reply = match self.read_reply() {
            Ok(r) => r,
            Err(e) => return Err(sent.err().unwrap_or(e)),
        };
        match reply.body {
            ReplyBody::Error(e) => Err(SourceError(format!(
                "{}: {}: {}",
                self.socket.display(),
                serde_json::to_value(e.kind)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
                crate::base::sanitize::escape(e.message.as_bytes())
            ))),
            body => Ok(body),
        }
    }
}

/// What the event thread has received, shared with the source.
#[derive(Debug, Default)]
struct Feed {
    /// The newest events, oldest first; at most [`KEEP_EVENTS`].
    records: VecDeque<Item>,
    /// The highest sequence number received (a replayed backlog skips what it already has).
    last_seq: u64,
    /// Why the stream ended, when it did.
    closed: Option<String>,
}

// Nearly every item is an event: boxing it would only add an allocation per event.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
enum Item {
    Event(EventRecord),
    /// The supervisor skipped this many events for us.
    Lagged {
        dropped: u64,
        at_ms: u64,
    },
}

impl Feed {
    fn push(&mut self, item: Item) {
        if let Item::Event(r) = &item {
            if r.seq <= self.last_seq {
                return;
            }
            self.last_seq = r.seq;
        }
        if self.records.len() == KEEP_EVENTS {
            self.records.pop_front();
        }
        self.records.push_back(item);
    }
}

/// The longest the dashboard goes without asking the supervisor for a snapshot: between
/// events, readings refresh the last snapshot's CPU and memory from `/proc`. A process that
/// appears without an event (a helper's child forking) does not wait for it: the dashboard
/// learns of its birth itself ([`Connector`], or a listing of `/proc`) and asks at once.
pub const FULL_EVERY: Duration = Duration::from_secs(10);

/// A supervisor's control socket, as a source of readings.
pub struct AttachedSource {
    socket: PathBuf,
    status: Option<Connection>,
    feed: Arc<Mutex<Feed>>,
    wake: Option<Arc<dyn Fn() + Send + Sync>>,
    /// The event thread is running.
    following: bool,
    /// Something happened since the last snapshot (an event, a key asking to refresh): the
    /// next reading asks the supervisor.
    dirty: Arc<AtomicBool>,
    /// The last snapshot, refreshed locally between events.
    last: Option<Status>,
    /// When the last snapshot was taken.
    last_full: Instant,
    /// The snapshot's pids are this process's view of them (same PID namespace, identity
    /// checked): its CPU and memory may be read from `/proc` here.
    local: bool,
    /// Reads `stat` of the snapshot's processes, between snapshots.
    scanner: Option<Scanner>,
    /// The `stat` reading of this refresh's processes, when [`Self::refresh_locally`] made one:
    /// the optional columns take theirs from it rather than reading every `stat` again.
    scanned: Option<crate::process::tree::Snapshot>,
    /// The supervisor's pids as seen from here (learnt from the status connection).
    pids: PidMap,
    /// The supervisor's state letter as last read here at a time of the dashboard's own (a
    /// local refresh at the interval), with its identity. A
    /// snapshot reads it while the supervisor answers it, always `R`, and one taken on an
    /// event finds it at work on that event: neither says what it does most of the time.
    supervisor: Option<(Identity, String)>,
    /// Fork notifications, when the kernel grants them: a birth under a process of the last
    /// snapshot makes the next reading a snapshot.
    forks: Option<Connector>,
    /// Without them: every pid of the last listing of `/proc`, to find the new ones.
    known: HashSet<i32>,
    /// What the optional columns shown need read from `/proc` (nothing unless told).
    wants: SharedWants,
    /// The supervisor stopped (its last event said so, and it answers no more).
    ended: bool,
}

impl std::fmt::Debug for AttachedSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AttachedSource")
            .field("socket", &self.socket)
            .field("following", &self.following)
            .finish_non_exhaustive()
    }
}

impl AttachedSource {
    /// Connects to the control socket at `socket` and takes a first snapshot, so that a wrong
    /// path or a refusal is reported before the dashboard takes the terminal.
    pub fn connect(socket: &Path) -> Result<AttachedSource, SourceError> {
        // Subscribed before the first snapshot, so no birth falls between the two.
        let forks = Connector::open(Wanted::Forks)
            .inspect_err(|e| {
                tracing::debug!("no fork notifications ({e}); listing /proc between snapshots")
            })
            .ok();
        let mut conn = Connection::open(socket)?;
        match conn.call(&Request::Status)? {
            ReplyBody::Status(_) => {}
            other => {
                return Err(SourceError(format!(
                    "{}: unexpected reply to status: {other:?}",
                    socket.display()
                )));
            }
        }
        Ok(AttachedSource {
            socket: socket.to_path_buf(),
            pids: conn.pid_map(),
            supervisor: None,
            status: Some(conn),
            feed: Arc::new(Mutex::new(Feed::default())),
            wake: None,
            following: false,
            dirty: Arc::new(AtomicBool::new(true)),
            last: None,
            last_full: Instant::now(),
            local: false,
            scanner: Scanner::new(ScanOptions {
                cmdline: false,
                threads: 1,
                ..ScanOptions::default()
            })
            .ok(),
            forks,
            known: HashSet::new(),
            scanned: None,
            wants: SharedWants::default(),
            ended: false,
        })
    }

    /// Reads what the optional columns shown (as `wants` says at each reading) need of the
    /// snapshot's processes from this process's `/proc`.
    pub fn with_wants(mut self, wants: SharedWants) -> AttachedSource {
        self.wants = wants;
        self
    }

    /// Fills what the optional columns shown need of `sample`'s processes (process group,
    /// session, storage, cgroup, PID namespace: the snapshot does not carry them) from
    /// `/proc`, through the scanner's `stat` reading and [`Scanner::read_extra`]. Only a
    /// process seen here under its snapshot pid with the same start time is read (the pids are
    /// this namespace's, translated where the supervisor is contained); any other keeps `-`.
    /// Nothing is read when no such column is shown.
    fn read_ext(&mut self, sample: &mut Sample) {
        let scanned = self.scanned.take();
        let want = *self.wants.lock().unwrap_or_else(|e| e.into_inner());
        let Some(scanner) = self.scanner.as_mut().filter(|_| want.any()) else {
            return;
        };
        let snap = scanned.unwrap_or_else(|| {
            let pids: Vec<i32> = sample.procs.iter().map(|p| p.id.pid).collect();
            scanner.scan_pids(&pids)
        });
        for p in &mut sample.procs {
            let Some(n) = snap.get(&p.id) else {
                continue;
            };
            if want.groups {
                p.ext.pgid = Some(n.pgrp);
                p.ext.sid = Some(n.session);
            }
            let extra = scanner.read_extra(n.pid, want.extra);
            p.ext.io = extra.io;
            p.ext.cgroup = extra.cgroup;
            p.ext.pidns = extra.pidns;
        }
    }

    /// A flag that makes the next reading ask the supervisor for a snapshot (set it before
    /// asking the data thread for a reading after a key or an action).
    pub fn dirty_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.dirty)
    }

    /// Whether a process was born under one of `members` since the last reading (or the
    /// kernel's notifications were lost, or `/proc` could not be listed).
    fn born_under(&mut self, members: &HashSet<i32>) -> bool {
        if let Some(w) = &mut self.forks {
            let mut born = false;
            let lost = w
                .drain(|e| {
                    born |= matches!(e, ProcEvent::Fork { parent, .. } if members.contains(&parent))
                })
                .is_err();
            return born || lost;
        }
        let Some(scanner) = &mut self.scanner else {
            return true;
        };
        match scanner.list_pids() {
            Ok(listed) => {
                let new: Vec<i32> = listed
                    .iter()
                    .copied()
                    .filter(|p| !self.known.contains(p))
                    .collect();
                self.known.clear();
                self.known.extend(listed.iter().copied());
                let snap = scanner.scan_pids(&new);
                snap.nodes().any(|n| members.contains(&n.ppid))
            }
            Err(_) => true,
        }
    }

    /// Refreshes CPU, memory and state of `last`'s processes from `/proc`. False when a process
    /// is gone or has another parent: the tree changed, and only the supervisor can say how.
    fn refresh_locally(&mut self, last: &mut Status) -> bool {
        if self.scanner.is_none() {
            return false;
        }
        let pids: Vec<i32> = last.processes.iter().map(|p| p.pid).collect();
        let members: HashSet<i32> = pids.iter().copied().collect();
        // A process born under one of them: the supervisor knows it, the snapshot does not.
        if self.born_under(&members) {
            return false;
        }
        let Some(scanner) = &mut self.scanner else {
            return false;
        };
        let snap = scanner.scan_pids(&pids);
        let sup = last.supervisor.identity;
        if let Some(n) = snap.get(&sup) {
            self.supervisor = Some((sup, (n.state as char).to_string()));
        }
        for p in &mut last.processes {
            match snap.get(&p.identity()) {
                // Same parent, same name (an exec changes it, and the command line with it).
                Some(n) if n.ppid == p.ppid && n.comm == p.comm.0 => {
                    p.cpu_ticks = n.cpu_ticks;
                    p.rss_bytes = n.rss_bytes;
                    if p.state.as_bytes() != [n.state] {
                        p.state = (n.state as char).to_string();
                    }
                }
                _ => return false,
            }
        }
        match crate::process::tree::uptime_ticks(last.hz) {
            Ok(t) => {
                last.now_ticks = t;
                self.scanned = Some(snap);
                true
            }
            Err(_) => false,
        }
    }

    /// The handle that carries out the dashboard's actions through the same socket.
    pub fn controller(&self) -> Controller {
        Controller {
            socket: self.socket.clone(),
        }
    }

    /// Starts (or restarts, after the stream ended) the thread that follows the events.
    fn follow_events(&mut self) -> Result<(), SourceError> {
        let mut conn = Connection::open(&self.socket)?;
        conn.send(&Request::Events {
            backlog: Some(KEEP_EVENTS),
            follow: true,
        })?;
        let mut pids = conn.pid_map();
        let feed = Arc::clone(&self.feed);
        feed.lock().unwrap().closed = None;
        let wake = self.wake.clone();
        std::thread::Builder::new()
            .name("top-events".into())
            .spawn(move || {
                let why = loop {
                    let item = match conn.read_reply() {
                        Ok(r) => match r.body {
                            ReplyBody::Event(mut e) => {
                                pids.record(&mut e);
                                Item::Event(e)
                            }
                            ReplyBody::Lagged { dropped } => Item::Lagged {
                                dropped,
                                at_ms: now_ms(),
                            },
                            ReplyBody::Events { .. } => continue,
                            ReplyBody::Error(e) => {
                                break format!(
                                    "event stream: {}",
                                    crate::base::sanitize::escape(e.message.as_bytes())
                                );
                            }
                            other => break format!("event stream: unexpected reply {other:?}"),
                        },
                        Err(e) => break e.0,
                    };
                    feed.lock().unwrap().push(item);
                    if let Some(w) = &wake {
                        w();
                    }
                };
                feed.lock().unwrap().closed = Some(why);
                if let Some(w) = &wake {
                    w();
                }
            })
            .map_err(|e| SourceError(format!("cannot start the event thread: {e}")))?;
        self.following = true;
        Ok(())
    }

    fn snapshot(&mut self) -> Result<Status, SourceError> {
        // One retry on a fresh connection: the old one may have been closed under us.
        for attempt in 0..2 {
            let conn = match &mut self.status {
                Some(c) => c,
                None => {
                    let c = Connection::open(&self.socket)?;
                    self.pids = c.pid_map();
                    self.status.insert(c)
                }
            };
            match conn.call(&Request::Status) {
                Ok(ReplyBody::Status(s)) => return Ok(*s),
                Ok(other) => {
                    return Err(SourceError(format!(
                        "{}: unexpected reply to status: {other:?}",
                        self.socket.display()
                    )));
                }
                Err(e) => {
                    self.status = None;
                    if attempt == 1 {
                        return Err(e);
                    }
                }
            }
        }
        unreachable!("the loop returns")
    }
}

impl Source for AttachedSource {
    fn sample(&mut self) -> Result<Sample, SourceError> {
        let dirty = self.dirty.swap(false, Ordering::SeqCst);
        let refreshed = match self.last.take() {
            Some(mut last) if !dirty && self.local && self.last_full.elapsed() < FULL_EVERY => {
                self.refresh_locally(&mut last).then_some(last)
            }
            _ => None,
        };
        let status = match refreshed {
            Some(s) => s,
            None => self.full_snapshot()?,
        };
        let closed = self.feed.lock().unwrap().closed.is_some();
        if !self.following || closed {
            // Events missed while the stream was down come back with the backlog; those
            // already shown are skipped by sequence number.
            self.follow_events()?;
        }
        let feed = self.feed.lock().unwrap();
        let records: Vec<Item> = feed.records.iter().cloned().collect();
        drop(feed);
        let mut sample = sample_with_items(&status, &records, now_ms());
        self.read_ext(&mut sample);
        self.last = Some(status);
        Ok(sample)
    }

    fn ended(&self) -> bool {
        self.ended
    }

    fn set_waker(&mut self, wake: Waker) {
        let dirty = Arc::clone(&self.dirty);
        self.wake = Some(Arc::new(move || {
            dirty.store(true, Ordering::SeqCst);
            wake();
        }));
    }
}

impl AttachedSource {
    /// Asks the supervisor for a snapshot; the supervisor's own state in it is the one read
    /// here at the last local refresh ([`Self::supervisor`]; until the first, the snapshot's).
    fn full_snapshot(&mut self) -> Result<Status, SourceError> {
        // What was born before this snapshot is in it: only later births count.
        match (&mut self.forks, &mut self.scanner) {
            (Some(w), _) => {
                let _ = w.drain(|_| {});
            }
            (None, Some(scanner)) => {
                if let Ok(listed) = scanner.list_pids() {
                    self.known.clear();
                    self.known.extend(listed.iter().copied());
                }
            }
            (None, None) => {}
        }
        let mut status = self.snapshot().map_err(|e| {
            self.ended = false;
            // Said plainly when the stream announced it: the usual end of an attached view.
            let feed = self.feed.lock().unwrap();
            let stopped = feed.records.iter().rev().find_map(|i| match i {
                Item::Event(EventRecord {
                    event: stopped @ Event::Stopped { .. },
                    ..
                }) => Some(stopped.clone()),
                _ => None,
            });
            match stopped {
                // The event's own words: `supervisor stopped with exit status 0 (...)`.
                Some(stopped) => {
                    self.ended = true;
                    SourceError(format!("{stopped}; q quits"))
                }
                None => e,
            }
        })?;
        self.last_full = Instant::now();
        // Shown with this namespace's pids; they are ours to read when the supervisor is the
        // process we see under its pid (they could not be translated otherwise).
        self.pids.status(&mut status);
        let sup = status.supervisor.identity;
        self.local = Identity::of(sup.pid).is_ok_and(|i| i == sup);
        match &self.supervisor {
            Some((id, state)) if *id == sup => {
                if let Some(p) = status.processes.iter_mut().find(|p| p.identity() == sup) {
                    p.state = state.clone();
                }
            }
            _ => self.supervisor = None,
        }
        Ok(status)
    }
}

/// Milliseconds since the Unix epoch, now.
fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The dashboard's reading of a status snapshot and the events received so far; `now_ms` is
/// the wall-clock time of the snapshot (to place the events on the snapshot's tick clock).
pub fn sample_of(status: &Status, events: &[EventRecord], now_ms: u64) -> Sample {
    let items: Vec<Item> = events.iter().cloned().map(Item::Event).collect();
    sample_with_items(status, &items, now_ms)
}

fn sample_with_items(status: &Status, items: &[Item], now_ms: u64) -> Sample {
    let helpers: HashMap<&str, &HelperInfo> = status
        .helpers
        .iter()
        .map(|h| (h.name.as_str(), h))
        .collect();
    let down = helpers_down(status);
    let procs = status
        .processes
        .iter()
        .map(|p| proc_info(status, p, &helpers, &down))
        .collect();
    Sample {
        origin: origin_text(status),
        now_ticks: status.now_ticks,
        hz: status.hz.max(1),
        supervised: true,
        procs,
        events: event_lines(status, items, now_ms),
        helpers: status
            .helpers
            .iter()
            .map(|h| HelperSummary {
                name: h.name.clone(),
                state: h.state,
                detail: h.detail.clone(),
                identity: h.identity,
                stop_signal: h.stop_signal.clone(),
                stop_grace_ms: h.stop_grace_ms,
                restarts: h.launches.saturating_sub(1),
                last_exit: h.last_exit.map(exit_text),
                policy: h
                    .policy
                    .split(';')
                    .next()
                    .map(policy_text)
                    .unwrap_or_default(),
            })
            .collect(),
    }
}

/// The helpers that are down (gave up, failed, held back, in a restart loop): the
/// supervisor's row notes them.
fn helpers_down(status: &Status) -> Vec<HelperDown> {
    status
        .helpers
        .iter()
        .filter_map(|h| {
            let state = match h.state {
                HelperState::GaveUp | HelperState::Failed => h.state.text(),
                // Held back by a dependency that cannot get there by itself.
                HelperState::Waiting if h.depends_on.iter().any(|d| d.held) => h.state.text(),
                HelperState::Backoff if h.restarts_in_a_row >= RESTART_LOOP => "restarting",
                _ => return None,
            };
            Some(HelperDown {
                helper: h.name.clone(),
                state: state.to_string(),
                detail: h.detail.clone(),
                restarts: h.restarts_in_a_row,
            })
        })
        .collect()
}

/// A process of the snapshot as the model takes it; `down` goes on the supervisor's own.
fn proc_info(
    status: &Status,
    p: &ProcessInfo,
    helpers: &HashMap<&str, &HelperInfo>,
    down: &[HelperDown],
) -> ProcInfo {
    let is_supervisor = p.identity() == status.supervisor.identity;
    ProcInfo {
        id: p.identity(),
        parent: p.parent,
        ppid: p.ppid,
        state: p.state.bytes().next().unwrap_or(b'?'),
        cpu_ticks: p.cpu_ticks,
        rss_bytes: p.rss_bytes,
        comm: p.comm.0.clone(),
        cmdline: p.cmdline.iter().map(|a| a.0.clone()).collect(),
        uid: Some(p.uid),
        // The snapshot carries threads; the process group, session, storage, cgroup and
        // namespace are not in it: the source reads those it shows from `/proc`
        // ([`AttachedSource`]'s `read_ext`), else `-`.
        ext: crate::top::model::ProcExt {
            threads: Some(p.threads),
            ..Default::default()
        },
        supervision: Some(supervision(
            p,
            helpers,
            if is_supervisor { down } else { &[] },
        )),
    }
}

/// What the supervisor says of a process: its role, helper, generation, policy, adoption,
/// and on a helper's own process, its helper's state and restarts.
fn supervision(
    p: &ProcessInfo,
    helpers: &HashMap<&str, &HelperInfo>,
    down: &[HelperDown],
) -> Supervision {
    // The helper whose own process this is (a nested supervisor's row, too).
    let own = p
        .helper
        .as_deref()
        .and_then(|name| helpers.get(name))
        .filter(|h| h.identity == Some(p.identity()));
    let helper_state = own.map(|h| HelperStatus {
        state: h.state.text().to_string(),
        detail: h.detail.clone(),
        status_text: h.status_text.clone(),
    });
    let recent_restarts = match p.role {
        Role::Helper => own.map_or(0, |h| h.restarts_in_a_row),
        _ => 0,
    };
    let adoption = match &p.adoption {
        None => Adoption::None,
        Some(a) if a.classification.is_expected() => Adoption::Expected { by: a.to },
        Some(a) => Adoption::Unexpected {
            by: a.to,
            expected: a.expected,
        },
    };
    Supervision {
        restarts: own.map(|h| h.launches.saturating_sub(1)),
        last_exit: own.and_then(|h| h.last_exit.map(exit_text)),
        role: role_text(p.role).to_string(),
        helper: p.helper.clone(),
        generation: p.generation,
        policy: p.policy.as_deref().map(policy_text).unwrap_or_default(),
        expected_parent: p.expected_parent,
        adoption,
        recent_restarts,
        down_helpers: down.to_vec(),
        helper_state,
        vacant: false,
    }
}

/// The events pane's lines: the events (a helper's state its other lines say already left
/// out) and the notes of events skipped, each placed on the snapshot's tick clock.
fn event_lines(status: &Status, items: &[Item], now_ms: u64) -> Vec<EventLine> {
    let hz = status.hz.max(1);
    items
        .iter()
        // A helper's state that its launch, exit or restart line says already (`running`,
        // `backoff`...) is left out of the pane; `waiting`, `ready`, `unhealthy` are shown.
        .filter(|item| match item {
            Item::Event(r) => !(matches!(r.event, Event::State { .. }) && r.event.is_detail()),
            Item::Lagged { .. } => true,
        })
        .map(|item| {
            let (ts_ms, text, helper) = match item {
                // Escaped when the pane draws it: raw here, not escaped twice.
                Item::Event(r) => (
                    r.ts_ms,
                    format!(
                        "{:#}{}",
                        r.event,
                        crate::supervision::control::nspid::foreign_note(&r.foreign_pids)
                    ),
                    r.event.helper().map(str::to_string),
                ),
                Item::Lagged { dropped, at_ms } => (
                    *at_ms,
                    format!("{dropped} events skipped: the dashboard did not read fast enough"),
                    None,
                ),
            };
            let ago_ticks = now_ms.saturating_sub(ts_ms) * hz / 1000;
            EventLine {
                at_ticks: status.now_ticks.saturating_sub(ago_ticks),
                wall_ms: ts_ms,
                text: text.into_bytes(),
                helper,
            }
        })
        .collect()
}

/// The title's words for the supervisor: `supervisor 4700 of demo.toml (own PID
/// namespace), SHUTTING DOWN`.
fn origin_text(status: &Status) -> String {
    let config = match status.supervisor.config.as_str() {
        "" | "-" => String::new(),
        c => Path::new(c)
            .file_name()
            .map_or_else(|| c.to_string(), |n| format!(" of {}", n.to_string_lossy())),
    };
    let mut origin = format!("supervisor {}{config}", status.supervisor.identity.pid);
    if status.supervisor.contained {
        origin.push_str(" (own PID namespace)");
    }
    if status.supervisor.shutting_down {
        origin.push_str(crate::top::model::SHUTTING_DOWN);
    }
    origin
}

/// How a process ended, as the LAST EXIT column shows it: its code (`0`, `3`), or the
/// signal that ended it (`SIGKILL`, `SIGSEGV core`).
pub fn exit_text(e: crate::process::reaper::ExitStatus) -> String {
    use crate::process::reaper::ExitStatus;
    match e {
        ExitStatus::Exited { code } => code.to_string(),
        ExitStatus::Signaled {
            signal,
            core_dumped,
        } => {
            let name = crate::process::signal::name(signal);
            if core_dumped {
                format!("{name} core")
            } else {
                name
            }
        }
    }
}

/// The ROLE column's word for a role.
pub fn role_text(role: Role) -> &'static str {
    match role {
        Role::Supervisor => "supervisor",
        Role::Helper => "helper",
        Role::Descendant => "descendant",
        Role::AdoptedOrphan => "adopted",
    }
}

/// A generation's policy as the POLICY column shows it: `SIGTERM:exit:5s` → `TERM→exit 5s`.
pub fn policy_text(policy: &str) -> String {
    let mut parts = policy.split(':');
    let signal = parts.next().unwrap_or_default();
    let signal = signal.strip_prefix("SIG").unwrap_or(signal);
    match (parts.next(), parts.next()) {
        (Some(reaction), Some(grace)) => format!("{signal}→{reaction} {grace}"),
        (Some(reaction), None) => format!("{signal}→{reaction}"),
        _ => signal.to_string(),
    }
}

/// Carries out the dashboard's actions through the control socket, one short connection each.
#[derive(Debug, Clone)]
pub struct Controller {
    socket: PathBuf,
}

impl Controller {
    /// A controller for the socket at `socket`.
    pub fn new(socket: &Path) -> Controller {
        Controller {
            socket: socket.to_path_buf(),
        }
    }

    /// The control socket's path.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Sends `req` and returns the supervisor's `done` message, or the error's.
    pub fn request(&self, req: &Request) -> Result<String, ControlError> {
        let mut conn = Connection::open(&self.socket).map_err(|e| e.0)?;
        // The dashboard's pids are this namespace's: the supervisor's own are sent.
        let mut pids = conn.pid_map();
        let (req, asked) = match req {
            Request::Signal { target, signal } => {
                let sent = pids.target(target).map_err(|e| e.to_string())?;
                let r = Request::Signal {
                    target: sent.clone(),
                    signal: *signal,
                };
                (r, Some((sent, target.clone())))
            }
            other => (other.clone(), None),
        };
        let asked = asked.as_ref().map(|(s, g)| (s, g));
        pids.learn(); // the reply may name a process the request ends
        match conn
            .call(&req)
            .map_err(|e| SourceError(pids.message(&e.0, asked)))
        {
            Ok(ReplyBody::Done { message, .. }) => Ok(pids.message(&message, asked)),
            Ok(other) => Err(format!("unexpected reply: {other:?}").into()),
            Err(e) => {
                // The socket's path is in the title already; keep the status line short.
                let prefix = format!("{}: ", self.socket.display());
                Err(e.0.strip_prefix(&prefix).unwrap_or(&e.0).into())
            }
        }
    }
}

/// Queues `item` for the dashboard, the oldest let go (counted) past what the pane keeps, and
/// calls `wake` once per batch; false once the dashboard dropped the stream.
fn push_item(shared: &Mutex<LogShared>, item: LogItem, wake: impl Fn()) -> bool {
    let mut g = shared.lock().unwrap_or_else(|p| p.into_inner());
    if g.closed {
        return false;
    }
    if g.items.len() >= 2 * KEEP_LOG_LINES {
        // The pane keeps no more than this: the oldest go, counted.
        let n = g.items.len() - KEEP_LOG_LINES;
        let gone = g
            .items
            .drain(..n)
            .filter(|i| matches!(i, LogItem::Line(_)))
            .count();
        g.dropped += gone as u64;
    }
    g.items.push_back(item);
    if !std::mem::replace(&mut g.woken, true) {
        drop(g);
        wake();
    }
    true
}

/// The stream's thread: asks for `source`'s lines on `socket` and `push`es what comes until
/// the stream ends or the dashboard drops it.
fn follow_logs(
    socket: &Path,
    source: &LogSource,
    shared: &Mutex<LogShared>,
    push: impl Fn(LogItem) -> bool,
) {
    let mut conn = match Connection::open(socket) {
        Ok(c) => c,
        Err(e) => {
            push(LogItem::Ended(e.0));
            return;
        }
    };
    {
        let mut g = shared.lock().unwrap_or_else(|p| p.into_inner());
        if g.closed {
            return;
        }
        g.socket = conn.socket_handle().ok();
    }
    let req = Request::Logs {
        helper: match source {
            LogSource::Helper(h) => Some(h.clone()),
            LogSource::Every => None,
        },
        lines: Some(KEEP_LOG_LINES),
        follow: true,
        helpers: Vec::new(),
        since_ms: None,
    };
    if let Err(e) = conn.send(&req) {
        push(LogItem::Ended(e.0));
        return;
    }
    loop {
        let item = match conn.read_reply() {
            Ok(r) => match r.body {
                ReplyBody::Logs { helpers, .. } => LogItem::Start { helpers },
                ReplyBody::Log(rec) => LogItem::Line(rec.into_line()),
                ReplyBody::Lagged { dropped } => LogItem::Missed(dropped),
                ReplyBody::Error(e) => LogItem::Ended(e.message),
                other => LogItem::Ended(format!("unexpected reply {other:?}")),
            },
            Err(e) => LogItem::Ended(e.0),
        };
        let end = matches!(item, LogItem::Ended(_));
        if !push(item) || end {
            return;
        }
    }
}

/// The log pane's stream: a `logs` request (the last [`KEEP_LOG_LINES`] lines, then each new
/// one) for one helper or all, on a connection of its own read by a thread. What it reads
/// waits in a bounded queue until the dashboard takes it ([`LogStream::take`]), woken once
/// per batch; dropped, the connection is shut down and the thread ends.
pub struct LogStream {
    source: LogSource,
    id: u64,
    shared: Arc<Mutex<LogShared>>,
}

#[derive(Default)]
struct LogShared {
    items: VecDeque<LogItem>,
    /// Lines let go because the dashboard did not take them in time.
    dropped: u64,
    /// A wake-up was sent and the items not taken since.
    woken: bool,
    /// The dashboard dropped the stream.
    closed: bool,
    socket: Option<UnixStream>,
}

impl LogStream {
    /// Starts following `source`'s lines on `socket`; `wake` is called (with `id`) when there
    /// is something to take.
    pub fn start(
        socket: &Path,
        source: LogSource,
        id: u64,
        wake: impl Fn(u64) + Send + 'static,
    ) -> LogStream {
        let shared = Arc::new(Mutex::new(LogShared::default()));
        let s = LogStream {
            source: source.clone(),
            id,
            shared: Arc::clone(&shared),
        };
        let socket = socket.to_path_buf();
        let push = move |item: LogItem| push_item(&shared, item, || wake(id));
        let shared = Arc::clone(&s.shared);
        let spawned = std::thread::Builder::new()
            .name("top-logs".into())
            .spawn(move || follow_logs(&socket, &source, &shared, push));
        if let Err(e) = spawned {
            s.shared
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .items
                .push_back(LogItem::Ended(format!("cannot start its thread: {e}")));
        }
        s
    }

    /// Whose lines it follows.
    pub fn source(&self) -> &LogSource {
        &self.source
    }

    /// The number it was started with (a wake-up of an older stream is not for it).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// What came since the last call, a count of lines let go first.
    pub fn take(&self) -> Vec<LogItem> {
        let mut g = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        g.woken = false;
        let mut v = Vec::with_capacity(g.items.len() + 1);
        if g.dropped > 0 {
            v.push(LogItem::Missed(std::mem::take(&mut g.dropped)));
        }
        v.extend(g.items.drain(..));
        v
    }
}

impl Drop for LogStream {
    fn drop(&mut self) {
        let mut g = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        g.closed = true;
        if let Some(s) = g.socket.take() {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}
