//! The dashboard's view model: what one reading of a source says, and the tree built from it.
//!
//! Owns [`Sample`] (one reading, from whichever source: `/proc` standalone or a supervisor's
//! control socket), the [`Source`] trait both sources implement ("two sources, one view"), and
//! [`Model`]: the processes of a sample arranged as a tree keyed by [`Identity`], with CPU%
//! computed from clock-tick deltas between two readings and the anomalies foster flags (a parent
//! other than the expected one, an unexpected adoption, a zombie its live parent does not reap, a
//! helper restarting in a loop). The tree is the tree layer's graph ([`Forest`], the structure
//! of a `/proc` snapshot), its subtree and ancestor queries petgraph's traversals. The
//! [`Tracker`] keeps what rates and anomalies need per identity in one map updated in place,
//! and builds each model in the last one's storage ([`Tracker::update_into`]: a process of both
//! readings keeps its node). Nothing here reads `/proc` or touches a terminal.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::process::identity::Identity;
use crate::process::tree::{Forest, Member};

/// A zombie counts as "not reaped" once it has been seen for this long under a live parent.
/// Shorter would flag every process between its exit and its parent's `wait`; PID 1 of some
/// distributions reaps adopted orphans only every second or so.
pub const ZOMBIE_GRACE_SECS: u64 = 3;

/// A helper restarted at least this many times in the supervisor's window is in a loop.
pub const RESTART_LOOP: u32 = 3;

/// One reading of a source: every process it shows, at one instant.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Sample {
    /// What this view shows, for the title: `whole system`, `subtree of 1234`, a socket path.
    pub origin: String,
    /// Clock ticks since boot when the reading was taken (the clock of `start_time`).
    pub now_ticks: u64,
    /// Clock ticks per second (`sysconf(_SC_CLK_TCK)`).
    pub hz: u64,
    /// True when the source knows roles, generations and policies (attached to a supervisor).
    pub supervised: bool,
    /// The processes, in any order.
    pub procs: Vec<ProcInfo>,
    /// What happened lately, oldest first (attached mode; empty standalone).
    pub events: Vec<EventLine>,
    /// The supervisor's helpers, in configuration order (attached mode; empty standalone).
    pub helpers: Vec<HelperSummary>,
}

/// One helper of the supervisor, whether it has a process or not: what the dashboard's keys
/// for it (restart, stop, start) need to say exactly what they will do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HelperSummary {
    pub name: String,
    pub state: crate::process::state::HelperState,
    /// The words after the state, if any.
    pub detail: Option<String>,
    /// Its running process.
    pub identity: Option<Identity>,
    /// `SIGTERM`: what stopping it sends.
    pub stop_signal: String,
    /// The grace before SIGKILL of what is left of its tree, in milliseconds.
    pub stop_grace_ms: u64,
    /// Restarts since the supervisor started (its launches after the first).
    pub restarts: u32,
    /// How its last process ended: `0`, `3`, `SIGKILL`; `None` before any ended.
    pub last_exit: Option<String>,
    /// Its first generation's policy, as the POLICY column shows it.
    pub policy: String,
}

impl HelperSummary {
    /// Its state in words, with the detail: `stopped by request`, `backoff`.
    pub fn state_text(&self) -> String {
        match &self.detail {
            Some(d) => format!("{} {d}", self.state),
            None => self.state.to_string(),
        }
    }
}

/// One process as a source sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct ProcInfo {
    pub id: Identity,
    /// The identity of its parent, when the parent is part of the reading.
    pub parent: Option<Identity>,
    /// Its parent's pid as the kernel reports it (`0` when outside the PID namespace).
    pub ppid: i32,
    /// The state letter of `/proc/<pid>/stat` (`R`, `S`, `D`, `Z`, `T`...).
    pub state: u8,
    /// User plus system CPU time, in clock ticks.
    pub cpu_ticks: u64,
    /// Resident memory, in bytes.
    pub rss_bytes: u64,
    /// The kernel's name for it (`comm`), raw bytes.
    pub comm: Vec<u8>,
    /// Its arguments, raw bytes; empty for zombies and when unreadable.
    pub cmdline: Arc<[Vec<u8>]>,
    /// What the supervisor knows of it (attached mode only).
    pub supervision: Option<Supervision>,
    /// Its owner (the real uid), when the source says.
    pub uid: Option<u32>,
    /// What the optional columns show, as far as the source knows it.
    pub ext: ProcExt,
}

/// What the optional columns show of a process beyond the tree's own fields: each `None` when
/// the source did not read it (its column is hidden), could not (attached, the snapshot carries
/// threads; the rest is read from this process's `/proc`, and not for a process it cannot see
/// under the snapshot's pid and start time), or was not allowed to.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ProcExt {
    pub pgid: Option<i32>,
    pub sid: Option<i32>,
    pub threads: Option<i64>,
    /// Bytes read from and written to storage since it started (`/proc/<pid>/io`).
    pub io: Option<(u64, u64)>,
    pub cgroup: Option<String>,
    /// The inode number of its PID namespace.
    pub pidns: Option<u64>,
}

/// What a supervisor knows of one of its processes.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Supervision {
    /// Its place in the tree, as the ROLE column shows it: `supervisor`, `helper`,
    /// `descendant`, `adopted`.
    pub role: String,
    /// The configured helper it belongs to (`web`, `db`...), if any.
    pub helper: Option<String>,
    /// Generation: 0 the supervisor, 1 a helper it launched, 2 a helper's child, and so on.
    pub generation: u32,
    /// The policy in force, short: the parent-death signal, the reaction and the grace
    /// (`TERM→exit 5s`).
    pub policy: String,
    /// The parent this process should have, when the supervisor expects one.
    pub expected_parent: Option<Identity>,
    /// How its last reparenting was classified, if it was reparented.
    pub adoption: Adoption,
    /// Restarts of this helper within the supervisor's restart window.
    pub recent_restarts: u32,
    /// On the supervisor's row: its helpers that have no process now and are failing (waiting
    /// for a restart after failures, given up on, failed, held back by a dependency).
    pub down_helpers: Vec<HelperDown>,
    /// On a helper's own process: the helper's state as its supervisor reports it.
    pub helper_state: Option<HelperStatus>,
    /// The row stands for a helper that has no process now ([`vacant_nodes`]):
    /// it has no pid, state, age or usage of its own.
    pub vacant: bool,
    /// On a helper's own row: its restarts and how its last process ended
    /// ([`HelperSummary::restarts`], [`HelperSummary::last_exit`]).
    pub restarts: Option<u32>,
    pub last_exit: Option<String>,
}

/// A helper's state on the row of its process: the state's words, what follows them, and its
/// `STATUS=` text.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct HelperStatus {
    /// `running`, `ready`, `stopping`... ([`crate::process::state::HelperState::text`]).
    pub state: String,
    /// The words after the state (`to restart`), if any.
    pub detail: Option<String>,
    /// The helper's last `STATUS=` text, if any.
    pub status_text: Option<String>,
}

/// A helper with no process, as the supervisor reports it.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct HelperDown {
    pub helper: String,
    /// `restarting` (waiting to be restarted after failures in a row), `gave up`, `failed`,
    /// or `waiting` (for a dependency that cannot get there by itself).
    pub state: String,
    /// The words after the state (`for db: gave up after 5 restarts`), if any.
    pub detail: Option<String>,
    /// Restarts in a row so far.
    pub restarts: u32,
}

/// The classification of a reparenting, as the supervisor made it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Adoption {
    /// Never reparented.
    #[default]
    None,
    /// Reparented to the subreaper it was expected to reach.
    Expected { by: Identity },
    /// Reparented to something else than the expected subreaper.
    Unexpected {
        by: Identity,
        expected: Option<Identity>,
    },
}

/// One line of the events pane.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct EventLine {
    /// Clock ticks since boot when it happened.
    pub at_ticks: u64,
    /// Wall-clock time when it happened, milliseconds since the Unix epoch (0: unknown, the
    /// pane then shows how long ago).
    pub wall_ms: u64,
    /// What happened, raw (it may quote process names); escaped when shown.
    pub text: Vec<u8>,
    /// The helper it is about, if any (the pane's filter by helper).
    pub helper: Option<String>,
}

/// What the title's origin ends with while the supervisor shuts down.
pub const SHUTTING_DOWN: &str = ", SHUTTING DOWN";

/// Why a source could not produce a reading.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SourceError(pub String);

/// What the optional columns shown need read of each process: the process group and session
/// (fields of `stat`, which a standalone reading has anyway) and the files beyond `stat`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wants {
    /// The PGID or SID column is shown.
    pub groups: bool,
    /// The files the other columns shown need.
    pub extra: crate::process::tree::ExtraWants,
}

impl Wants {
    /// Whether any column shown needs something read.
    pub fn any(self) -> bool {
        self.groups || self.extra.any()
    }
}

/// What the columns shown need read, shared by the dashboard (which sets it when the columns
/// change) and the source (which reads it at each reading).
pub type SharedWants = Arc<std::sync::Mutex<Wants>>;

/// Asks the data thread for a reading at once.
pub type Waker = Box<dyn Fn() + Send + Sync>;

/// Where readings come from: `/proc` (standalone) or a supervisor's control socket (attached).
/// Called on the data thread; `sample` may block for as long as one reading takes.
pub trait Source: Send {
    /// Takes one reading.
    fn sample(&mut self) -> Result<Sample, SourceError>;

    /// True once the source has nothing more to read, after a reading failed for that reason
    /// (the supervisor stopped, the `--root` process exited): the failure's words say what
    /// happened, and no more readings are taken.
    fn ended(&self) -> bool {
        false
    }

    /// Hands the source a way to ask for a reading at once; called once, before the first
    /// reading. A source that is told of changes (the attached source, by the supervisor's
    /// event stream) calls it when something happened; the default ignores it.
    fn set_waker(&mut self, _wake: Waker) {}
}

/// Something unusual about one process, shown prominently.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Anomaly {
    /// Its parent is not the one the supervisor expected (and no adoption explains it).
    WrongParent {
        expected: Identity,
        actual: Option<Identity>,
    },
    /// It was adopted by something other than the expected subreaper.
    UnexpectedAdoption {
        by: Identity,
        expected: Option<Identity>,
    },
    /// A zombie whose parent is alive and has not reaped it: seen a zombie for at least
    /// `for_secs` seconds (since this dashboard first saw it so: the kernel does not say when a
    /// process exited), its process started `age_secs` ago.
    UnreapedZombie {
        parent: Identity,
        parent_name: Vec<u8>,
        for_secs: u64,
        age_secs: u64,
    },
    /// A helper restarted `restarts` times within the supervisor's window.
    RestartLoop { restarts: u32 },
    /// A helper with no process: failing and waiting for its next restart, or given up on
    /// (shown on the supervisor's row, since the helper has none).
    HelperDown(HelperDown),
}

impl Anomaly {
    /// A few words for a row, escaped.
    pub fn short(&self) -> String {
        use crate::base::sanitize::escape;
        match self {
            Anomaly::WrongParent { expected, actual } => match actual {
                Some(a) => format!("parent {}, expected {}", a.pid, expected.pid),
                None => format!("parent gone, expected {}", expected.pid),
            },
            Anomaly::UnexpectedAdoption { by, expected } => match expected {
                Some(e) => format!("adopted by {}, expected {}", by.pid, e.pid),
                None => format!("adopted by {}", by.pid),
            },
            Anomaly::UnreapedZombie {
                parent,
                parent_name,
                for_secs,
                ..
            } => {
                format!(
                    "not reaped by {} ({}) for ≥{for_secs}s",
                    parent.pid,
                    escape(parent_name)
                )
            }
            Anomaly::RestartLoop { restarts } => format!("restart loop ({restarts})"),
            Anomaly::HelperDown(h) => match &h.detail {
                Some(d) => format!(
                    "{} {} {}",
                    escape(h.helper.as_bytes()),
                    h.state,
                    escape(d.as_bytes())
                ),
                None => format!(
                    "{} {} ({} restarts)",
                    escape(h.helper.as_bytes()),
                    h.state,
                    h.restarts
                ),
            },
        }
    }

    /// A full sentence for the status line, escaped, with identities.
    pub fn describe(&self) -> String {
        use crate::base::sanitize::escape;
        match self {
            Anomaly::WrongParent { expected, actual } => match actual {
                Some(a) => format!("parent is {a}, expected {expected}"),
                None => format!("parent gone, expected {expected}"),
            },
            Anomaly::UnexpectedAdoption { by, expected } => match expected {
                Some(e) => format!("unexpected adoption by {by}, expected {e}"),
                None => format!("unexpected adoption by {by}"),
            },
            Anomaly::UnreapedZombie {
                parent,
                parent_name,
                for_secs,
                age_secs,
            } => format!(
                "a zombie for at least {for_secs}s (seen since; started {} ago): parent {} ({}) \
                 does not reap it",
                fmt_age(*age_secs),
                parent.pid,
                escape(parent_name)
            ),
            Anomaly::RestartLoop { restarts } => {
                format!("restart loop: {restarts} restarts")
            }
            Anomaly::HelperDown(h) => match &h.detail {
                Some(d) => format!(
                    "helper {} has no process: {} {}",
                    escape(h.helper.as_bytes()),
                    h.state,
                    escape(d.as_bytes())
                ),
                None => format!(
                    "helper {} has no process: {} after {} restarts in a row",
                    escape(h.helper.as_bytes()),
                    h.state,
                    h.restarts
                ),
            },
        }
    }
}

/// One process in the model.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub info: ProcInfo,
    /// Children present in the model, oldest first: the model's graph's edges, filled in when
    /// the model is built.
    pub children: Vec<Identity>,
    /// CPU use since the previous reading, in percent of one core; `None` on its first reading.
    pub cpu_pct: Option<f64>,
    /// Seconds since it started.
    pub age_secs: u64,
    pub anomalies: Vec<Anomaly>,
    /// Bytes read and written per second since the previous reading; `None` on its first
    /// reading or where `io` is not read.
    pub io_rate: Option<(f64, f64)>,
    /// No longer in the source's reading, kept on screen because the view is paused.
    pub exited: bool,
}

impl Node {
    /// The row stands for a helper with no process: nothing to signal, tag or count.
    pub fn vacant(&self) -> bool {
        self.info.supervision.as_ref().is_some_and(|s| s.vacant)
    }
}

impl Member for Node {
    fn identity(&self) -> Identity {
        self.info.id
    }
    fn parent(&self) -> Option<Identity> {
        self.info.parent
    }
}

/// A reading arranged as a tree, with rates and anomalies computed.
#[derive(Clone, Debug, Default)]
pub struct Model {
    pub origin: String,
    pub supervised: bool,
    pub hz: u64,
    pub now_ticks: u64,
    /// The processes as a forest: a process whose parent is in the model is its child, any
    /// other (PID 1, the `--root` process...) a root; roots and children oldest first.
    pub nodes: Forest<Node>,
    pub events: Vec<EventLine>,
    /// The supervisor's helpers (attached mode).
    pub helpers: Vec<HelperSummary>,
}

impl Model {
    /// The helper named `name`, as the last reading had it.
    pub fn helper(&self, name: &str) -> Option<&HelperSummary> {
        self.helpers.iter().find(|h| h.name == name)
    }

    /// The processes of the model, the rows of helpers with no process left out.
    pub fn processes(&self) -> impl Iterator<Item = &Node> + '_ {
        self.nodes.values().filter(|n| !n.vacant())
    }

    /// `nodes` as the model's forest, each node's `children` filled in from it.
    fn forest(nodes: Vec<Node>) -> Forest<Node> {
        let mut forest = Forest::new(nodes, Model::order);
        forest.fill_children(|n, kids| n.children = kids);
        forest
    }

    /// The order of roots and of siblings: oldest first.
    fn order(n: &Node) -> (u64, i32) {
        (n.info.id.start_time, n.info.id.pid)
    }

    /// The roots (processes without a parent in the model), oldest first.
    pub fn roots(&self) -> impl Iterator<Item = Identity> + '_ {
        self.nodes.roots().map(|n| n.info.id)
    }

    /// The identities of `id`'s ancestors in the model, nearest first.
    pub fn ancestors(&self, id: Identity) -> Vec<Identity> {
        self.nodes.ancestors(&id).map(|n| n.info.id).collect()
    }

    /// `id` and all its descendants, parents before children.
    pub fn subtree(&self, id: Identity) -> Vec<Identity> {
        self.nodes.descendants(&id).map(|n| n.info.id).collect()
    }

    /// The number of processes in the model.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True when the model holds no process.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Keeps the processes of `old` that are missing here, marked exited, under their parent when
    /// it is still here (pause mode).
    pub fn carry_exited(&mut self, old: &Model) {
        let carried: Vec<Node> = old
            .nodes
            .values()
            .filter(|n| !self.nodes.contains_key(&n.info.id) && !n.vacant())
            .map(|n| Node {
                exited: true,
                cpu_pct: None,
                io_rate: None,
                ..n.clone()
            })
            .collect();
        if carried.is_empty() {
            return;
        }
        let mut all: Vec<Node> = std::mem::take(&mut self.nodes).into_values().collect();
        all.extend(carried);
        self.nodes = Model::forest(all);
    }

    /// Marks every row ended: the source has nothing more to read (its supervisor stopped,
    /// its root exited). The title no longer says the supervisor is shutting down.
    pub fn end(&mut self) {
        for n in self.nodes.values_mut() {
            n.exited = true;
            n.cpu_pct = None;
            n.io_rate = None;
        }
        if let Some(o) = self.origin.strip_suffix(SHUTTING_DOWN) {
            self.origin = o.to_string();
        }
    }

    /// Drops the processes marked exited (the view is resumed); false when there were none.
    pub fn drop_exited(&mut self) -> bool {
        if !self.nodes.values().any(|n| n.exited) {
            return false;
        }
        let live = std::mem::take(&mut self.nodes)
            .into_values()
            .filter(|n| !n.exited)
            .collect();
        self.nodes = Model::forest(live);
        true
    }
}

/// A row for each helper of an attached reading's supervisor that has no process now
/// (stopped, in backoff, waiting, completed, given up on), under the supervisor's row after its
/// processes, in configuration order: every declared helper has a row, whatever its state.
/// The row's identity is made of the helper's place (a negative pid, a start time no process
/// has), so the cursor stays on it from one reading to the next.
fn vacant_nodes(sample: &Sample) -> Vec<Node> {
    if !sample.supervised {
        return Vec::new();
    }
    let Some(sup) = sample.procs.iter().find(|p| {
        p.supervision
            .as_ref()
            .is_some_and(|s| s.generation == 0 && s.role == "supervisor")
    }) else {
        return Vec::new();
    };
    sample
        .helpers
        .iter()
        .enumerate()
        .filter(|(_, h)| h.identity.is_none())
        .map(|(i, h)| vacant_node(i, h, (sup.id, sup.uid)))
        .collect()
}

/// The start time of the first helper row with no process: later than any process's.
const VACANT_START: u64 = 1 << 62;

/// The row of helper `h`, `i`th of the configuration, which has no process: under the
/// supervisor `sup` (its identity and owner).
fn vacant_node(i: usize, h: &HelperSummary, sup: (Identity, Option<u32>)) -> Node {
    let id = Identity {
        pid: -(i as i32) - 1,
        start_time: VACANT_START + i as u64,
    };
    // No role: the role is a process's place in the tree.
    let supervision = Supervision {
        role: String::new(),
        helper: Some(h.name.clone()),
        generation: 1,
        policy: h.policy.clone(),
        helper_state: Some(HelperStatus {
            state: h.state.text().to_string(),
            detail: h.detail.clone(),
            status_text: None,
        }),
        vacant: true,
        restarts: Some(h.restarts),
        last_exit: h.last_exit.clone(),
        ..Supervision::default()
    };
    Node {
        info: ProcInfo {
            id,
            parent: Some(sup.0),
            ppid: sup.0.pid,
            state: b' ',
            cpu_ticks: 0,
            rss_bytes: 0,
            comm: h.name.clone().into_bytes(),
            cmdline: Arc::from(Vec::new()),
            supervision: Some(supervision),
            uid: sup.1,
            ext: ProcExt::default(),
        },
        children: Vec::new(),
        cpu_pct: None,
        age_secs: 0,
        anomalies: Vec::new(),
        io_rate: None,
        exited: false,
    }
}

/// Storage bytes (read, written) at a reading, and the rates computed then.
type IoSeen = ((u64, u64), Option<(f64, f64)>);

/// What the tracker remembers of one process from the readings that showed it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Track {
    /// The last reading that showed it.
    seen: u64,
    /// CPU ticks at the baseline its next rate is computed from.
    ticks: u64,
    /// The CPU rate of the last reading, kept for a reading that comes too soon after it.
    pct: Option<f64>,
    /// Storage bytes read and written at the baseline, and the rates computed then (when read).
    io: Option<IoSeen>,
    /// Since when it has been seen a zombie (while it is one).
    zombie_since: Option<u64>,
}

/// Turns successive samples into models, remembering what rates and anomalies need from the
/// previous reading: per identity, CPU ticks and storage bytes at the baseline, the last rates,
/// and since when a zombie has been seen. One map, updated in place at each reading (an entry
/// for each process of the reading, dropped when it leaves), rather than rebuilt.
#[derive(Debug, Default)]
pub struct Tracker {
    prev_now: u64,
    tracks: FxHashMap<Identity, Track>,
    /// Readings taken so far: the `seen` of the entries of the last one.
    readings: u64,
}

impl Tracker {
    pub fn new() -> Tracker {
        Tracker::default()
    }

    /// Builds the model of `sample`, anew.
    pub fn update(&mut self, sample: Sample) -> Model {
        self.update_into(sample, Model::default())
    }

    /// Builds the model of `sample` in the storage of `previous` (the last model this tracker
    /// built, or an empty one): a process of both keeps its node, refreshed in place, and the
    /// tree's edges are laid again only when a process came, went or changed parents. The
    /// model is the one [`Tracker::update`] builds.
    pub fn update_into(&mut self, sample: Sample, previous: Model) -> Model {
        let hz = sample.hz.max(1);
        let now = sample.now_ticks;
        let elapsed = now.saturating_sub(self.prev_now);
        // The last reading showed a process (so there are rates to compute).
        let had = !self.tracks.is_empty();
        self.readings += 1;
        let clock = Clock {
            hz,
            now,
            elapsed,
            have_prev: had && elapsed > 0,
            // A reading pushed by an event can come a few milliseconds after the last one: too
            // soon for a rate (a tick is 10 ms). Then the last rates stay, and so does the
            // baseline.
            too_soon: had && elapsed < (hz / 4).max(1),
            reading: self.readings,
        };
        let tracks = &mut self.tracks;
        // Part of the reading, so that the tree is refreshed in place with them, not built
        // again for them at each reading.
        let vacant = vacant_nodes(&sample);
        let nodes = sample
            .procs
            .into_iter()
            .map(|info| tracks.entry(info.id).or_default().node(info, &clock))
            .chain(vacant);
        // The tree: a parent missing from the reading makes a root; a node kept keeps its
        // children while the edges stay.
        let mut nodes = if previous.nodes.is_empty() {
            Model::forest(nodes.collect())
        } else {
            let mut forest = previous.nodes;
            if forest.refresh(nodes, Model::order, |new, old| new.children = old.children) {
                forest.fill_children(|n, kids| n.children = kids);
            }
            forest
        };
        // A process the reading did not show is forgotten.
        self.tracks.retain(|_, t| t.seen == clock.reading);
        if !clock.too_soon {
            self.prev_now = now;
        }
        for (id, a) in self.anomalies(&nodes, &clock) {
            nodes.get_mut(&id).unwrap().anomalies.push(a);
        }
        Model {
            origin: sample.origin,
            supervised: sample.supervised,
            hz,
            now_ticks: now,
            nodes,
            events: sample.events,
            helpers: sample.helpers,
        }
    }

    /// The anomalies of the processes of `nodes`.
    fn anomalies(&mut self, nodes: &Forest<Node>, clock: &Clock) -> Vec<(Identity, Anomaly)> {
        let mut found: Vec<(Identity, Anomaly)> = Vec::new();
        for n in nodes.values() {
            let id = n.info.id;
            if n.info.state == b'Z' {
                let since = match self.tracks.get_mut(&id) {
                    Some(t) => *t.zombie_since.get_or_insert(clock.now),
                    None => clock.now,
                };
                let for_secs = (clock.now - since) / clock.hz;
                let parent = n.info.parent.and_then(|p| nodes.get(&p));
                if let Some(p) = parent
                    && p.info.state != b'Z'
                    && for_secs >= ZOMBIE_GRACE_SECS
                {
                    let a = Anomaly::UnreapedZombie {
                        parent: p.info.id,
                        parent_name: p.info.comm.clone(),
                        for_secs,
                        age_secs: n.age_secs,
                    };
                    found.push((id, a));
                }
            }
            if let Some(s) = &n.info.supervision {
                found.extend(supervision_anomalies(n, s).into_iter().map(|a| (id, a)));
            }
        }
        found
    }
}

/// The anomalies the supervisor's view of a process shows: an adoption it did not expect, a
/// parent other than the expected one, a restart loop, helpers down.
fn supervision_anomalies(n: &Node, s: &Supervision) -> Vec<Anomaly> {
    let mut found = Vec::new();
    match s.adoption {
        Adoption::Unexpected { by, expected } => {
            found.push(Anomaly::UnexpectedAdoption { by, expected })
        }
        Adoption::Expected { .. } => {}
        Adoption::None => {
            if let Some(expected) = s.expected_parent
                && n.info.parent != Some(expected)
            {
                found.push(Anomaly::WrongParent {
                    expected,
                    actual: n.info.parent,
                });
            }
        }
    }
    if s.recent_restarts >= RESTART_LOOP {
        found.push(Anomaly::RestartLoop {
            restarts: s.recent_restarts,
        });
    }
    for h in &s.down_helpers {
        found.push(Anomaly::HelperDown(h.clone()));
    }
    found
}

/// When a reading is, against the last one.
struct Clock {
    hz: u64,
    now: u64,
    /// Ticks since the baseline.
    elapsed: u64,
    /// There is a baseline to compute rates from.
    have_prev: bool,
    /// Too soon after the last reading for a rate: the last rates stay.
    too_soon: bool,
    /// The reading's number.
    reading: u64,
}

impl Track {
    /// The node of `info`, its rates from this track's baseline, which moves to it.
    fn node(&mut self, info: ProcInfo, c: &Clock) -> Node {
        // What the previous reading left (nothing for a process it did not show).
        let prev = (self.seen + 1 == c.reading).then_some(*self);
        let io_rate = self.io_rate(info.ext.io, prev, c);
        let prev_ticks = prev.map(|p| p.ticks);
        let cpu_pct = if c.too_soon {
            prev.and_then(|p| p.pct)
        } else if c.have_prev {
            prev_ticks.map(|before| {
                info.cpu_ticks.saturating_sub(before) as f64 * 100.0 / c.elapsed as f64
            })
        } else {
            None
        };
        self.pct = cpu_pct;
        self.ticks = match (c.too_soon, prev_ticks) {
            (true, Some(before)) => before,
            _ => info.cpu_ticks,
        };
        // Since when a zombie: kept while it stays one (the anomalies set it).
        if info.state != b'Z' {
            self.zombie_since = None;
        }
        self.seen = c.reading;
        let age_secs = c.now.saturating_sub(info.id.start_time) / c.hz;
        Node {
            info,
            children: Vec::new(),
            cpu_pct,
            age_secs,
            anomalies: Vec::new(),
            io_rate,
            exited: false,
        }
    }

    /// The storage rates (read, written per second) from the baseline to `now_io`.
    fn io_rate(
        &mut self,
        now_io: Option<(u64, u64)>,
        prev: Option<Track>,
        c: &Clock,
    ) -> Option<(f64, f64)> {
        let Some(now_io) = now_io else {
            self.io = None;
            return None;
        };
        let (base, rate) = match prev.and_then(|p| p.io) {
            Some((base, r)) if c.too_soon => (base, r),
            Some(((r0, w0), _)) if c.have_prev => {
                let per = |d: u64| d as f64 * c.hz as f64 / c.elapsed as f64;
                let r = (
                    per(now_io.0.saturating_sub(r0)),
                    per(now_io.1.saturating_sub(w0)),
                );
                (now_io, Some(r))
            }
            _ => (now_io, None),
        };
        self.io = Some((base, rate));
        rate
    }
}

/// Age, coarse enough that a quiet view does not change every second: `42s`, `12m`, `3h07m`,
/// `12d04h`.
pub fn fmt_age(secs: u64) -> String {
    match secs {
        0..100 => format!("{secs}s"),
        100..3600 => format!("{}m", secs / 60),
        3600..86400 => format!("{}h{:02}m", secs / 3600, secs % 3600 / 60),
        _ => format!("{}d{:02}h", secs / 86400, secs % 86400 / 3600),
    }
}

/// What [`fmt_age`] shows of `secs`: two ages of the same class have the same text.
pub fn age_class(secs: u64) -> (u8, u64) {
    match secs {
        0..100 => (0, secs),
        100..3600 => (1, secs / 60),
        3600..86400 => (2, secs / 60),
        _ => (3, secs / 3600),
    }
}

/// Resident memory: `812K`, `12.3M`, `1.2G`.
pub fn fmt_bytes(b: u64) -> String {
    const K: u64 = 1024;
    match b {
        0..K => format!("{b}B"),
        K..1048576 => format!("{}K", b / K),
        1048576..10485760 => format!("{:.1}M", b as f64 / 1048576.0),
        10485760..1073741824 => format!("{}M", b / 1048576),
        _ => format!("{:.1}G", b as f64 / 1073741824.0),
    }
}

/// CPU percent with one decimal below 100, none above (a busy multi-threaded process passes
/// 100); blank when unknown.
pub fn fmt_cpu(pct: Option<f64>) -> String {
    match pct {
        // Most processes, most of the time: without the formatting of a float.
        Some(p) if p.to_bits() == 0 => "0.0".to_string(),
        Some(p) if p < 99.95 => format!("{p:.1}"),
        Some(p) => format!("{p:.0}"),
        None => String::new(),
    }
}

/// A process for the unit tests of the dashboard's modules: pid `pid` started at tick
/// `1000 + pid`, its parent likewise, sleeping, named `pPID`, nothing else known.
#[cfg(test)]
impl ProcInfo {
    pub(crate) fn fixture(pid: i32, parent: Option<i32>) -> ProcInfo {
        let id = |pid: i32| Identity {
            pid,
            start_time: 1000 + pid as u64,
        };
        ProcInfo {
            id: id(pid),
            parent: parent.map(id),
            ppid: parent.unwrap_or(0),
            state: b'S',
            cpu_ticks: 0,
            rss_bytes: 0,
            comm: format!("p{pid}").into_bytes(),
            cmdline: Arc::from(Vec::new()),
            supervision: None,
            uid: None,
            ext: ProcExt::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn proc(pid: i32, parent: Option<i32>, state: u8) -> ProcInfo {
        ProcInfo {
            state,
            ..ProcInfo::fixture(pid, parent)
        }
    }

    fn sample(procs: Vec<ProcInfo>) -> Sample {
        Sample {
            origin: "test".into(),
            now_ticks: 100_000,
            hz: 100,
            procs,
            ..Sample::default()
        }
    }

    impl Sample {
        fn with_now(self, now_ticks: u64) -> Sample {
            Sample { now_ticks, ..self }
        }
    }

    fn pids(ids: &[Identity]) -> Vec<i32> {
        ids.iter().map(|i| i.pid).collect()
    }

    /// The tree comes from the graph: roots and children oldest first, subtrees parents first,
    /// ancestors nearest first.
    #[test]
    fn the_tree_is_the_graph_oldest_first() {
        // Start times follow pids: 30 is younger than 20.
        let m = Tracker::new().update(sample(vec![
            proc(30, Some(1), b'S'),
            proc(1, None, b'S'),
            proc(40, Some(20), b'S'),
            proc(20, Some(1), b'S'),
            proc(50, Some(999), b'S'), // parent not in the reading: a root
        ]));
        let roots: Vec<i32> = m.roots().map(|i| i.pid).collect();
        assert_eq!(roots, vec![1, 50]);
        let init = m.roots().next().unwrap();
        assert_eq!(pids(&m.nodes[&init].children), vec![20, 30]);
        assert_eq!(pids(&m.subtree(init)), vec![1, 20, 40, 30]);
        let forty = m.nodes.keys().find(|i| i.pid == 40).copied().unwrap();
        assert_eq!(pids(&m.ancestors(forty)), vec![20, 1]);
        assert_eq!(m.len(), 5);
    }

    /// Ages of one class have one text (so a row may keep its age's text while the class
    /// holds): classes are runs of consecutive ages, so checking neighbours checks all.
    #[test]
    fn an_age_class_has_one_text() {
        for secs in (0..200_000u64).chain(40 * 86400..40 * 86400 + 7300) {
            if age_class(secs) == age_class(secs + 1) {
                assert_eq!(fmt_age(secs), fmt_age(secs + 1), "{secs}");
            }
        }
    }

    /// Parent links that form a cycle (no kernel makes one; a peer's reading could) end the
    /// walks instead of looping for ever.
    #[test]
    fn a_cycle_of_parents_ends_the_walks() {
        let m = Tracker::new().update(sample(vec![
            proc(1, None, b'S'),
            proc(10, Some(11), b'S'),
            proc(11, Some(10), b'S'),
        ]));
        let ten = m.nodes.keys().find(|i| i.pid == 10).copied().unwrap();
        let mut sub = pids(&m.subtree(ten));
        sub.sort();
        assert_eq!(sub, vec![10, 11]);
        assert_eq!(pids(&m.ancestors(ten)), vec![11]);
    }

    /// A helper of the supervisor's.
    fn helper(name: &str, identity: Option<Identity>) -> HelperSummary {
        HelperSummary {
            name: name.into(),
            state: crate::process::state::HelperState::Stopped,
            detail: None,
            identity,
            stop_signal: "SIGTERM".into(),
            stop_grace_ms: 1000,
            restarts: 0,
            last_exit: None,
            policy: String::new(),
        }
    }

    /// Attached, each helper with no process is a row of the reading itself, under the
    /// supervisor's after its processes: the next reading refreshes the tree in place with
    /// it (as it does any process it had), and equals the tree built anew.
    #[test]
    fn a_helper_without_a_process_is_a_row_of_the_reading() {
        let sup = ProcInfo {
            supervision: Some(Supervision {
                role: "supervisor".into(),
                ..Supervision::default()
            }),
            ..proc(1, None, b'S')
        };
        let web = proc(20, Some(1), b'S');
        let reading = Sample {
            supervised: true,
            helpers: vec![helper("web", Some(web.id)), helper("idle", None)],
            ..sample(vec![sup, web])
        };
        let mut t = Tracker::new();
        let first = t.update(reading.clone());
        let sup = first.roots().next().unwrap();
        let kids = &first.nodes[&sup].children;
        assert_eq!(pids(kids), vec![20, -2]);
        assert!(first.nodes[&kids[1]].vacant());
        assert_eq!(first.nodes[&kids[1]].info.comm, b"idle");
        let again = t.update_into(reading.clone().with_now(100_100), first);
        let anew = Tracker::new().update(reading.with_now(100_100));
        assert_eq!(pids(&again.subtree(sup)), vec![1, 20, -2]);
        assert_eq!(pids(&again.subtree(sup)), pids(&anew.subtree(sup)));
    }

    /// Paused, an exited process stays under its parent; resumed, it goes.
    #[test]
    fn exited_processes_are_carried_then_dropped() {
        let mut t = Tracker::new();
        let before = t.update(sample(vec![
            proc(1, None, b'S'),
            proc(20, Some(1), b'S'),
            proc(21, Some(20), b'S'),
        ]));
        let mut now = t.update(sample(vec![proc(1, None, b'S'), proc(20, Some(1), b'S')]));
        now.carry_exited(&before);
        let twenty = now.nodes.keys().find(|i| i.pid == 20).copied().unwrap();
        assert_eq!(pids(&now.nodes[&twenty].children), vec![21]);
        let gone = now.nodes[&twenty].children[0];
        assert!(now.nodes[&gone].exited);
        assert!(now.drop_exited());
        assert!(now.nodes[&twenty].children.is_empty());
        assert!(!now.nodes.contains_key(&gone));
        assert!(!now.drop_exited());
    }

    /// What the reference says of one process: CPU%, storage rates, age, zombie since.
    type Expected = (Option<f64>, Option<(f64, f64)>, u64, Option<u64>);

    /// The tracker as it was before it kept its state in place: every map rebuilt from the
    /// sample at each reading. The reference the tracker is checked against.
    #[derive(Default)]
    struct Rebuilt {
        prev_now: u64,
        prev_ticks: HashMap<Identity, u64>,
        prev_pct: HashMap<Identity, f64>,
        zombie_since: HashMap<Identity, u64>,
        prev_io: HashMap<Identity, IoSeen>,
    }

    impl Rebuilt {
        /// Each node's rates, age and zombie-since, by identity.
        fn update(&mut self, sample: &Sample) -> HashMap<Identity, Expected> {
            let hz = sample.hz.max(1);
            let now = sample.now_ticks;
            let elapsed = now.saturating_sub(self.prev_now);
            let have_prev = !self.prev_ticks.is_empty() && elapsed > 0;
            let too_soon = !self.prev_ticks.is_empty() && elapsed < (hz / 4).max(1);
            let (mut ticks, mut pcts, mut ios, mut zombies) = (
                HashMap::new(),
                HashMap::new(),
                HashMap::new(),
                HashMap::new(),
            );
            let mut out = HashMap::new();
            for info in &sample.procs {
                let io_rate = info.ext.io.and_then(|now_io| {
                    let prev = self.prev_io.get(&info.id);
                    let (base, rate) = match prev {
                        Some(&(_, r)) if too_soon => (prev.map(|p| p.0).unwrap_or(now_io), r),
                        Some(&((r0, w0), _)) if have_prev => {
                            let per = |d: u64| d as f64 * hz as f64 / elapsed as f64;
                            let r = (
                                per(now_io.0.saturating_sub(r0)),
                                per(now_io.1.saturating_sub(w0)),
                            );
                            (now_io, Some(r))
                        }
                        _ => (now_io, None),
                    };
                    ios.insert(info.id, (base, rate));
                    rate
                });
                let cpu_pct = if too_soon {
                    self.prev_pct.get(&info.id).copied()
                } else if have_prev {
                    self.prev_ticks.get(&info.id).map(|&before| {
                        info.cpu_ticks.saturating_sub(before) as f64 * 100.0 / elapsed as f64
                    })
                } else {
                    None
                };
                if let Some(p) = cpu_pct {
                    pcts.insert(info.id, p);
                }
                let baseline = match (too_soon, self.prev_ticks.get(&info.id)) {
                    (true, Some(&before)) => before,
                    _ => info.cpu_ticks,
                };
                ticks.insert(info.id, baseline);
                let zombie = (info.state == b'Z').then(|| {
                    let since = *self.zombie_since.get(&info.id).unwrap_or(&now);
                    zombies.insert(info.id, since);
                    since
                });
                let age = now.saturating_sub(info.id.start_time) / hz;
                out.insert(info.id, (cpu_pct, io_rate, age, zombie));
            }
            (
                self.prev_ticks,
                self.prev_pct,
                self.prev_io,
                self.zombie_since,
            ) = (ticks, pcts, ios, zombies);
            if !too_soon {
                self.prev_now = now;
            }
            out
        }
    }

    /// One reading of up to 12 pids, each possibly reused (another start time), a zombie,
    /// with storage counters or without; then how long after the last reading it comes (0,
    /// too soon for a rate, or a refresh).
    fn reading() -> impl proptest::strategy::Strategy<Value = (u64, Vec<ProcInfo>)> {
        use proptest::prelude::*;
        let one = (
            1..13i32,
            0..2u64,
            proptest::option::of(1..13i32),
            prop_oneof![Just(b'S'), Just(b'Z'), Just(b'R')],
            0..500u64,
            proptest::option::of((0..5000u64, 0..5000u64)),
        )
            .prop_map(|(pid, reuse, parent, state, ticks, io)| {
                let mut p = ProcInfo::fixture(pid, parent);
                p.id.start_time += reuse * 7;
                p.state = state;
                p.cpu_ticks = ticks;
                p.ext.io = io;
                p
            });
        (
            prop_oneof![Just(0u64), 1..25u64, Just(100u64), 26..400u64],
            proptest::collection::vec(one, 0..12),
        )
            .prop_map(|(gap, mut procs)| {
                // One process per pid in a reading, as a kernel shows them.
                procs.sort_by_key(|p| p.id.pid);
                procs.dedup_by_key(|p| p.id.pid);
                (gap, procs)
            })
    }

    /// Readings of one population of 12 processes, each reading showing most of them, some
    /// gone (or not yet born), some under another parent than in the reading before; or the
    /// same as the reading before.
    fn drifting_readings() -> impl proptest::strategy::Strategy<Value = Vec<(u64, Vec<ProcInfo>)>> {
        use proptest::prelude::*;
        // Per reading, per pid: shown (with its own parent, or another), or not.
        let change = prop_oneof![
            6 => Just(None),
            1 => Just(Some(None)),
            1 => (1..13i32).prop_map(|p| Some(Some(p))),
        ];
        // None: the same processes as the reading before, each under the same parent.
        let reading = (
            prop_oneof![Just(0u64), Just(100u64)],
            proptest::option::of(proptest::collection::vec(
                (proptest::bool::weighted(0.85), change),
                12,
            )),
        );
        (
            proptest::collection::vec(proptest::option::of(1..13i32), 12),
            proptest::collection::vec(reading, 1..10),
        )
            .prop_map(|(parents, readings)| {
                let mut last = Vec::new();
                readings
                    .into_iter()
                    .map(|(gap, shown)| {
                        let shown = shown.unwrap_or_else(|| last.clone());
                        last = shown.clone();
                        let procs = shown
                            .into_iter()
                            .enumerate()
                            .filter(|(_, (here, _))| *here)
                            .map(|(i, (_, moved))| {
                                let pid = i as i32 + 1;
                                ProcInfo::fixture(pid, moved.unwrap_or(parents[i]))
                            })
                            .collect();
                        (gap, procs)
                    })
                    .collect()
            })
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// A model refreshed in the storage of the last one is the model built anew, whatever
        /// came, went or moved between the readings: the same nodes, roots, children, subtrees
        /// and ancestors, in the same order.
        #[test]
        fn a_model_refreshed_in_place_equals_one_built_anew(
            readings in proptest::prop_oneof![
                proptest::collection::vec(reading(), 1..10),
                drifting_readings(),
            ],
        ) {
            let (mut anew, mut in_place) = (Tracker::new(), Tracker::new());
            let mut last = Model::default();
            let mut now = 100_000;
            for (gap, procs) in readings {
                now += gap;
                let s = sample(procs).with_now(now);
                let want = anew.update(s.clone());
                let got = in_place.update_into(s, last);
                proptest::prop_assert_eq!(got.len(), want.len());
                let roots = |m: &Model| m.roots().collect::<Vec<_>>();
                proptest::prop_assert_eq!(roots(&got), roots(&want));
                for id in want.nodes.keys() {
                    proptest::prop_assert_eq!(got.nodes.get(id), Some(&want.nodes[id]));
                    proptest::prop_assert_eq!(got.subtree(*id), want.subtree(*id));
                    proptest::prop_assert_eq!(got.ancestors(*id), want.ancestors(*id));
                }
                last = got;
            }
        }

        /// The tracker, keeping its state in place, gives every reading of any sequence the
        /// rates, ages and zombie anomalies the maps rebuilt at each reading gave.
        #[test]
        fn the_tracker_in_place_equals_the_maps_rebuilt(
            readings in proptest::collection::vec(reading(), 1..10),
        ) {
            let (mut t, mut r) = (Tracker::new(), Rebuilt::default());
            let mut now = 100_000;
            for (gap, procs) in readings {
                now += gap;
                let s = sample(procs).with_now(now);
                let want = r.update(&s);
                let m = t.update(s);
                proptest::prop_assert_eq!(m.len(), want.len());
                for (id, (cpu, io, age, zombie)) in want {
                    let n = &m.nodes[&id];
                    proptest::prop_assert_eq!(n.cpu_pct, cpu);
                    proptest::prop_assert_eq!(n.io_rate, io);
                    proptest::prop_assert_eq!(n.age_secs, age);
                    // A zombie's anomaly says since when it is seen (under a live parent, past
                    // the grace).
                    let seen_for = n.anomalies.iter().find_map(|a| match a {
                        Anomaly::UnreapedZombie { for_secs, .. } => Some(*for_secs),
                        _ => None,
                    });
                    if let Some(f) = seen_for {
                        proptest::prop_assert_eq!(Some(f), zombie.map(|z| (now - z) / 100));
                    } else if let Some(z) = zombie {
                        let parent_live = n.info.parent
                            .and_then(|p| m.nodes.get(&p))
                            .is_some_and(|p| p.info.state != b'Z');
                        proptest::prop_assert!(!parent_live || (now - z) / 100 < ZOMBIE_GRACE_SECS);
                    }
                }
            }
        }
    }
}
