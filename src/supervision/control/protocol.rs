//! The control protocol: the JSON-lines requests and replies of a supervisor's control socket.
//!
//! Owns the wire types and nothing else: [`Request`] (what a client asks, one JSON object a
//! line), [`Reply`] (what the supervisor answers, one JSON object a line, always with the
//! protocol [`VERSION`]), the [`Status`] snapshot of the supervised tree, the streamed
//! [`EventRecord`]s and helpers' output lines ([`LogRecord`]), and [`ErrorKind`]. Parsing a
//! request line ([`parse_request`]) turns every problem into a [`ProtocolError`] that names
//! it, so the server can answer it and go on. The request names and each request's fields are
//! read from [`Request`] itself ([`request_names`], [`request_fields`]), never listed again.
//! `docs/control.md` is the reference, with examples.
//!
//! Process names and arguments are bytes: they travel as [`Bytes`], a JSON string when they are
//! valid UTF-8 (JSON escapes control characters, so the wire stays printable) and an array of
//! byte values when they are not. A client escapes them ([`crate::base::sanitize::escape`]) before
//! showing them to a person.

use std::fmt;

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize, Serializer};

use crate::gate::adoption::Classification;
use crate::process::identity::Identity;
use crate::process::reaper::ExitStatus;
use crate::process::signal::Sig;
use crate::supervision::event::Event;
pub use crate::supervision::event::Reloaded;
use crate::supervision::output::{Line, Stream};

/// The protocol version every reply carries, the one version of foster's JSON
/// ([`crate::base::json::VERSION`]). A request may carry `"version"`; any other value than this one
/// is refused with [`ErrorKind::Version`].
pub const VERSION: u32 = crate::base::json::VERSION;

/// The longest request line the server reads, newline excluded. A longer line is discarded up
/// to its newline and answered with [`ErrorKind::Oversized`].
pub const MAX_REQUEST: usize = 64 * 1024;

/// How many events the supervisor keeps for clients that connect late.
pub const BACKLOG: usize = 256;

/// How many events of each helper the supervisor keeps for `history`.
pub const HISTORY: usize = 32;

/// How many kept lines a `logs` request gives first when it does not say (as `tail`).
pub const DEFAULT_LOG_LINES: usize = 10;

/// The most kept lines a `logs` request may ask for (each helper keeps 1,000 by default).
pub const MAX_LOG_LINES: usize = 10_000;

/// One request: `{"request": "status"}`, `{"request": "signal", "target": "web", "signal":
/// "TERM"}`...
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "request", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// A [`Status`] snapshot of the supervised tree.
    Status,
    /// The event stream: first `backlog` recent events (default and at most [`BACKLOG`]),
    /// then, when `follow` (the default), every new event as it happens.
    Events {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        backlog: Option<usize>,
        #[serde(default = "yes", skip_serializing_if = "is_true")]
        follow: bool,
    },
    /// Send `signal` to `target`, a helper or a process inside the supervised tree.
    Signal { target: Target, signal: Sig },
    /// Restart a helper now: a running one is stopped (its stop signal, its grace, then
    /// SIGKILL) and launched again; one waiting for its backoff, ended or given up on is
    /// launched at once. Its backoff count starts over.
    Restart { helper: String },
    /// Start a helper that is not running: one stopped (by `stop`), ended, given up on or
    /// waiting for its backoff is launched now (once its dependencies are met). Its backoff
    /// count starts over.
    Start { helper: String },
    /// With `helper`: stop that helper (its stop signal, its grace, then SIGKILL of what is
    /// left of its tree); it stays stopped, whatever its restart rule, until `start`. Without:
    /// stop the supervisor, the same idempotent shutdown as SIGTERM.
    Stop {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        helper: Option<String>,
    },
    /// Close and open again every log file the supervisor writes (the events log, the
    /// helpers' log files), at their paths: after an outside rotation. The same as SIGUSR1,
    /// with an answer that says which were reopened.
    ReopenLogs,
    /// A helper's output (every helper's when `helper` is absent or null): first its last
    /// `lines` kept lines (default [`DEFAULT_LOG_LINES`], at most [`MAX_LOG_LINES`]), then,
    /// when `follow` (default false), every new line as it is read.
    Logs {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        helper: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        lines: Option<usize>,
        #[serde(default, skip_serializing_if = "is_false")]
        follow: bool,
        /// More helpers whose lines come, besides `helper` (their lines merged in the order
        /// read).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        helpers: Vec<String>,
        /// Only lines read at or after this time (milliseconds since the Unix epoch).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        since_ms: Option<u64>,
    },
    /// Read the configuration file again and apply it: helpers added are launched, helpers
    /// removed are stopped, helpers whose definition changed are restarted with the new one,
    /// the others are not touched. A file with mistakes is refused
    /// ([`ErrorKind::InvalidConfig`], every mistake listed) and nothing changes. The answer
    /// is [`ReplyBody::Reloaded`]; with `dry_run`, nothing is applied and the answer is
    /// [`ReplyBody::ReloadPlan`], what a reload would do now.
    Reload {
        #[serde(default, skip_serializing_if = "is_false")]
        dry_run: bool,
    },
    /// The supervisor's numbers in the Prometheus text format, gathered now: the answer is
    /// [`ReplyBody::Metrics`] (the text `--metrics` serves; `docs/metrics.md`).
    Metrics,
    /// A helper's last launches and ends, oldest first: the answer is [`ReplyBody::History`].
    History { helper: String },
}

fn yes() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// What `signal` is sent to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A helper, by name: its current process.
    Helper(String),
    /// A pid: the process that has it now, which must be inside the supervised tree.
    Pid(i32),
    /// An exact process, `PID:STARTTIME`: refused if that pid now belongs to another process.
    Identity(Identity),
}

impl Target {
    /// Reads a target given as text: `PID:STARTTIME`, a pid (digits), or a helper name.
    /// (A helper whose name is all digits is named with `{"helper": "123"}` on the wire.)
    pub fn parse(text: &str) -> Target {
        if let Ok(id) = text.parse::<Identity>() {
            Target::Identity(id)
        } else if let Some(pid) = text.parse::<i32>().ok().filter(|&p| p > 0) {
            Target::Pid(pid)
        } else {
            Target::Helper(text.to_string())
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Helper(h) => write!(f, "helper {h:?}"),
            Target::Pid(p) => write!(f, "pid {p}"),
            Target::Identity(id) => write!(f, "process {id}"),
        }
    }
}

impl Serialize for Target {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Target::Pid(p) => s.serialize_i32(*p),
            Target::Identity(id) => id.serialize(s),
            Target::Helper(h) if matches!(Target::parse(h), Target::Helper(_)) => {
                s.serialize_str(h)
            }
            Target::Helper(h) => {
                use serde::ser::SerializeMap;
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry("helper", h)?;
                m.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for Target {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Form {
            Pid(i64),
            Text(String),
            Identity { pid: i32, start_time: u64 },
            Helper { helper: String },
        }
        let bad = "expected a pid (number), an identity ({\"pid\": PID, \"start_time\": TICKS} \
                   or \"PID:STARTTIME\"), a helper name, or {\"helper\": NAME}";
        match Form::deserialize(d).map_err(|_| de::Error::custom(bad))? {
            Form::Pid(p) => i32::try_from(p)
                .ok()
                .filter(|&p| p > 0)
                .map(Target::Pid)
                .ok_or_else(|| de::Error::custom(format!("pid {p} out of range: {bad}"))),
            Form::Text(t) if t.is_empty() => Err(de::Error::custom(format!("empty target: {bad}"))),
            Form::Text(t) => Ok(Target::parse(&t)),
            Form::Identity { pid, start_time } if pid > 0 => {
                Ok(Target::Identity(Identity { pid, start_time }))
            }
            Form::Identity { pid, .. } => {
                Err(de::Error::custom(format!("pid {pid} out of range: {bad}")))
            }
            Form::Helper { helper } => Ok(Target::Helper(helper)),
        }
    }
}

/// One reply line: the protocol version and one body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    pub version: u32,
    #[serde(flatten)]
    pub body: ReplyBody,
}

impl Reply {
    /// A reply of this protocol version.
    pub fn new(body: ReplyBody) -> Reply {
        Reply {
            version: VERSION,
            body,
        }
    }

    /// An error reply.
    pub fn error(kind: ErrorKind, message: impl Into<String>) -> Reply {
        Reply::new(ReplyBody::Error(ErrorBody {
            kind,
            message: message.into(),
        }))
    }

    /// The reply as one line, newline included. Only printable text: besides what JSON
    /// escapes, DEL, C1 controls and format characters are written as `\uXXXX`
    /// ([`crate::base::sanitize::to_json`]), so the line can be shown as it is.
    pub fn to_line(&self) -> Vec<u8> {
        let mut v = crate::base::sanitize::to_json(self)
            .or_else(|e| {
                crate::base::sanitize::to_json(&Reply::error(
                    ErrorKind::Internal,
                    format!("cannot encode the reply: {e}"),
                ))
            })
            .unwrap_or_default()
            .into_bytes();
        v.push(b'\n');
        v
    }
}

/// What a reply says; the JSON key names the kind (`{"version": 1, "status": {...}}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplyBody {
    /// The answer to `status`.
    Status(Box<Status>),
    /// The answer to `events`: `backlog` event lines follow at once, then (when `follow`)
    /// new ones as they happen.
    Events { backlog: usize, follow: bool },
    /// One event of the stream.
    Event(EventRecord),
    /// The answer to `logs`: the helpers whose lines come (the one asked for, or every helper
    /// in configuration order), then `lines` log lines at once, then (when `follow`) new ones
    /// as they are read.
    Logs {
        helpers: Vec<String>,
        lines: usize,
        follow: bool,
    },
    /// One line of a helper's output.
    Log(LogRecord),
    /// The stream skipped `dropped` events (or, following `logs`, lines of the helpers
    /// followed) because this client did not read fast enough; the next event or line
    /// continues from there.
    Lagged { dropped: u64 },
    /// A `signal`, `restart`, `stop` or `reopen_logs` was carried out; the message says what
    /// was done.
    Done { request: String, message: String },
    /// The answer to `reload`: what became of each helper.
    Reloaded(Reloaded),
    /// The answer to `reload` with `dry_run`: what a reload would do now; nothing changed.
    ReloadPlan(Reloaded),
    /// The answer to `history`: the helper's last launches and ends (at most [`HISTORY`]
    /// events: launches, failed launches, exits, the signals that stopped it, restarts,
    /// give-ups, failed checks), oldest first.
    History {
        helper: String,
        events: Vec<EventRecord>,
    },
    /// The answer to `metrics`: `{"text": "..."}`, the Prometheus text format (version 0.0.4).
    Metrics { text: String },
    /// The request failed; the connection stays usable.
    Error(ErrorBody),
}

/// `{"error": {"kind": "...", "message": "..."}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub kind: ErrorKind,
    pub message: String,
}

/// The kinds of error replies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The line is not a JSON object (or not UTF-8).
    Malformed,
    /// The line is longer than [`MAX_REQUEST`] bytes.
    Oversized,
    /// The `"request"` field is missing or names no known request.
    UnknownRequest,
    /// A known request with a missing, unknown or invalid field.
    BadArgument,
    /// The request carries another protocol version.
    Version,
    /// The peer's uid is neither the supervisor's nor root.
    PermissionDenied,
    /// No helper of that name.
    NoSuchHelper,
    /// No such process in the supervised tree (gone, or outside it).
    NotInTree,
    /// The request is valid but cannot be carried out now (e.g. restart during shutdown).
    Refused,
    /// A `reload` found mistakes in the configuration file (the message lists every one, one
    /// a line): nothing was changed.
    InvalidConfig,
    /// The connection is closed: no complete request within the idle timeout, or it was the
    /// one idle the longest when a new client needed its slot.
    Idle,
    /// The supervisor failed to carry it out (the message says why: an OS error, a helper's
    /// launch that failed for `start` and `restart`).
    Failed,
    /// The server could not encode its reply.
    Internal,
}

/// One event with its sequence number and time, as streamed and kept in the backlog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventRecord {
    /// Counts every event of this supervisor from 1; a gap means events were dropped.
    pub seq: u64,
    /// Wall-clock time, milliseconds since the Unix epoch.
    pub ts_ms: u64,
    #[serde(flatten)]
    pub event: Event,
    /// The pids of `event` a reader in another PID namespace than the supervisor's
    /// (`foster ctl`, the dashboard) could not translate: processes that ended before it saw
    /// them. They stay the supervisor's own pids, named here; never sent by the supervisor
    /// (see [`crate::supervision::control::nspid`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub foreign_pids: Vec<i32>,
    /// Sent by a contained supervisor: the pids of `event` as the namespace it was started in
    /// sees them, `[pid, outer pid]`, learnt as it writes its own lines. A reader there
    /// shows a process it never saw alive with its outer pid.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outer_pids: Vec<[i32; 2]>,
}

/// One line of a helper's output, as streamed by `logs`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogRecord {
    /// Counts every line of every helper of this supervisor from 1, in the order read.
    pub seq: u64,
    pub helper: String,
    pub stream: Stream,
    /// The pid of the helper's latest launch when the line was read (in the supervisor's PID
    /// namespace), see [`Line::helper_pid`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub helper_pid: Option<i32>,
    /// `helper_pid` as the PID namespace `foster run` was started in sees it, sent by a
    /// contained supervisor (absent otherwise): a client there shows an ended launch with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub helper_outer_pid: Option<i32>,
    /// When foster read it, milliseconds since the Unix epoch.
    pub ts_ms: u64,
    /// The line goes on in the next one of the same helper and stream (it was longer than
    /// 64 KiB).
    #[serde(default, skip_serializing_if = "is_false")]
    pub continued: bool,
    /// The line's bytes, newline excluded, exactly as written.
    pub text: Bytes,
}

impl LogRecord {
    /// The wire form of a kept line.
    pub fn of(line: &Line) -> LogRecord {
        LogRecord {
            seq: line.seq,
            helper: line.helper.to_string(),
            stream: line.stream,
            helper_pid: line.helper_pid,
            helper_outer_pid: line.outer_pid,
            ts_ms: line.ts_ms,
            continued: line.continued,
            text: Bytes(line.bytes.to_vec()),
        }
    }

    /// The line again, to be shown as foster shows lines
    /// ([`crate::supervision::output::Renderer`]).
    pub fn into_line(self) -> Line {
        Line {
            seq: self.seq,
            helper: self.helper.into(),
            stream: self.stream,
            helper_pid: self.helper_pid,
            outer_pid: None,
            ts_ms: self.ts_ms,
            continued: self.continued,
            bytes: self.text.0,
        }
    }
}

/// The answer to `status`: the supervisor, its helpers and every process of its tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Status {
    pub supervisor: SupervisorInfo,
    /// Every configured helper, in configuration order.
    pub helpers: Vec<HelperInfo>,
    /// Every live process of the tree, the supervisor first, then parents before children.
    pub processes: Vec<ProcessInfo>,
    /// Clock ticks since boot when the snapshot was taken (the clock of `start_time`).
    pub now_ticks: u64,
    /// Clock ticks per second.
    pub hz: u64,
}

/// The supervisor itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SupervisorInfo {
    pub identity: Identity,
    /// The configuration file, as given to `foster run`.
    pub config: String,
    /// The control socket's path.
    pub socket: String,
    /// Whether the tree runs in its own PID namespace (contained: `foster run`'s default where
    /// it can be had).
    pub contained: bool,
    /// Whether the orderly shutdown has begun.
    pub shutting_down: bool,
    /// When it started, milliseconds since the Unix epoch.
    pub started_ms: u64,
    /// Datagrams its notify sockets ignored (from a process outside the helpers' trees, too
    /// long, cut short, or for a helper without the protocol).
    #[serde(default)]
    pub notify_refused: u64,
    /// The address `--metrics` serves on, when it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<String>,
    /// The supervisor's version (`0.1.0`), with its commit when known (`0.1.0 (abc1234)`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// One configured helper.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HelperInfo {
    pub name: String,
    pub state: HelperState,
    /// More about the state, continuing its words (`waiting` `for db: gave up after 5
    /// restarts`, `stopped` `by request`), when there is more to say.
    #[serde(default)]
    pub detail: Option<String>,
    /// The last `STATUS=` text the helper sent (the notify protocol), if any since its launch.
    #[serde(default)]
    pub status_text: Option<String>,
    /// What it waits for before each launch (`depends_on`), and whether each is met now.
    #[serde(default)]
    pub depends_on: Vec<Dependency>,
    /// The signal that asks it to stop (`SIGTERM`), and the grace after which what is left of
    /// its tree gets SIGKILL, in milliseconds: what `stop` and `restart` do to it.
    #[serde(default)]
    pub stop_signal: String,
    #[serde(default)]
    pub stop_grace_ms: u64,
    /// Its current process, when running.
    pub identity: Option<Identity>,
    /// How many times it was launched.
    pub launches: u32,
    /// Restarts in a row (the backoff count).
    pub restarts_in_a_row: u32,
    /// `never`, `on-failure` or `always`.
    pub restart: String,
    /// How its last process ended.
    pub last_exit: Option<ExitStatus>,
    /// Milliseconds until its next launch, while waiting for its backoff.
    pub next_launch_in_ms: Option<u64>,
    /// Its whole policy chain, `GEN[;GEN]...` (`TERM:exit:5s;KILL:kill:1s`).
    pub policy: String,
    /// Health checks failed in a row (`health`), while running.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub health_failures: u32,
    /// Its last `ERRNO=`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errno: Option<i32>,
    /// Its `MAINPID=`, a process of its tree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub main_pid: Option<i32>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// One dependency of a helper: the helper it waits for, the condition, whether it is met now,
/// and whether it is held (its helper cannot get there by itself: it gave up, failed, or was
/// stopped).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dependency {
    pub helper: String,
    pub condition: crate::process::state::Condition,
    pub met: bool,
    #[serde(default)]
    pub held: bool,
}

/// Where a helper is in its life: the one set of states ([`crate::process::state`]).
pub use crate::process::state::{HelperState, Role};

/// One process of the supervised tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessInfo {
    pub pid: i32,
    pub start_time: u64,
    pub role: Role,
    /// The helper it belongs to (none for the supervisor and untraceable orphans).
    pub helper: Option<String>,
    /// 0 the supervisor, 1 a helper, 2 a helper's child, and so on.
    pub generation: u32,
    /// The policy of its generation, `SIGNAL:REACTION:GRACE` (none for the supervisor).
    pub policy: Option<String>,
    /// The parent it should have.
    pub expected_parent: Option<Identity>,
    /// The parent it has (its parent pid as the kernel reports it is `ppid`).
    pub parent: Option<Identity>,
    pub ppid: i32,
    /// Its last adoption, if it was ever reparented.
    pub adoption: Option<AdoptionInfo>,
    /// The state letter of `/proc/<pid>/stat` (`R`, `S`, `D`, `Z`, `T`...).
    pub state: String,
    pub comm: Bytes,
    pub cmdline: Vec<Bytes>,
    pub uid: u32,
    pub threads: i64,
    pub rss_bytes: u64,
    /// User plus system CPU time, clock ticks.
    pub cpu_ticks: u64,
}

/// How a reparenting was classified.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdoptionInfo {
    /// Its parent before (none when first seen already adopted).
    pub from: Option<Identity>,
    /// The parent that adopted it.
    pub to: Identity,
    /// The subreaper it should have reached.
    pub expected: Option<Identity>,
    pub classification: Classification,
    /// When it was noticed, milliseconds since the Unix epoch.
    pub ts_ms: u64,
}

impl ProcessInfo {
    /// Its identity.
    pub fn identity(&self) -> Identity {
        Identity {
            pid: self.pid,
            start_time: self.start_time,
        }
    }
}

/// Bytes on the wire: a string when valid UTF-8, else an array of byte values.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Bytes(pub Vec<u8>);

impl Serialize for Bytes {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match std::str::from_utf8(&self.0) {
            Ok(t) => s.serialize_str(t),
            Err(_) => self.0.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Form {
            Text(String),
            Raw(Vec<u8>),
        }
        Ok(Bytes(match Form::deserialize(d)? {
            Form::Text(t) => t.into_bytes(),
            Form::Raw(v) => v,
        }))
    }
}

/// A request line that could not be taken: what kind of problem, and a message naming it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ProtocolError {
    pub kind: ErrorKind,
    pub message: String,
}

impl ProtocolError {
    fn new(kind: ErrorKind, message: impl Into<String>) -> ProtocolError {
        ProtocolError {
            kind,
            message: message.into(),
        }
    }

    /// The error reply for it.
    pub fn reply(&self) -> Reply {
        Reply::error(self.kind, self.message.clone())
    }
}

/// What serde's derived code of [`Request`] says it expected when it meets a name it does not
/// know: the request names (`unknown_variant`), or a request's fields (`unknown_field`, which
/// `deny_unknown_fields` makes it call). Asking it is how [`request_names`] and
/// [`request_fields`] read the enum itself, so that no list of requests is written by hand.
#[derive(Debug)]
enum Expected {
    Names(&'static [&'static str]),
    Other,
}

impl fmt::Display for Expected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?}")
    }
}

impl std::error::Error for Expected {}

impl de::Error for Expected {
    fn custom<T: fmt::Display>(_: T) -> Self {
        Expected::Other
    }
    fn unknown_variant(_: &str, expected: &'static [&'static str]) -> Self {
        Expected::Names(expected)
    }
    fn unknown_field(_: &str, expected: &'static [&'static str]) -> Self {
        Expected::Names(expected)
    }
}

/// The names serde's derived code expects after meeting `pairs` (the first a `request`): none
/// when it met nothing unknown.
fn expected_after(pairs: &[(&str, &str)]) -> &'static [&'static str] {
    let map = de::value::MapDeserializer::<_, Expected>::new(pairs.iter().copied());
    match Request::deserialize(map) {
        Err(Expected::Names(names)) => names,
        _ => &[],
    }
}

/// The request names the server knows (`status`, `events`, ...), in the order of [`Request`]:
/// read from the enum, for error messages and the docs.
pub fn request_names() -> &'static [&'static str] {
    expected_after(&[("request", "\0")])
}

/// The fields request `name` takes besides `request` (none for a request without fields, or
/// for a name that is not a request).
pub fn request_fields(name: &str) -> &'static [&'static str] {
    if !request_names().contains(&name) {
        return &[];
    }
    expected_after(&[("request", name), ("\0", "")])
}

/// Parses one request line (without its newline; a trailing `\r` is allowed).
pub fn parse_request(line: &[u8]) -> Result<Request, ProtocolError> {
    let mut map = json_object(line)?;
    check_version(map.remove("version"))?;
    let name = request_name(&map)?;
    check_fields(&name, &map)?;
    let request = serde_json::from_value(serde_json::Value::Object(map)).map_err(|e| {
        ProtocolError::new(ErrorKind::BadArgument, format!("request {name:?}: {e}"))
    })?;
    if let Request::Logs { lines: Some(n), .. } = request
        && n > MAX_LOG_LINES
    {
        return Err(ProtocolError::new(
            ErrorKind::BadArgument,
            format!(
                "request \"logs\": \"lines\" is {n}: at most {MAX_LOG_LINES} kept lines may be \
                 asked for"
            ),
        ));
    }
    Ok(request)
}

/// The JSON object a request line holds: within the size limit, UTF-8, no key given twice.
fn json_object(line: &[u8]) -> Result<serde_json::Map<String, serde_json::Value>, ProtocolError> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.len() > MAX_REQUEST {
        return Err(ProtocolError::new(
            ErrorKind::Oversized,
            format!(
                "request line of {} bytes is longer than the limit of {MAX_REQUEST} bytes",
                line.len()
            ),
        ));
    }
    let text = std::str::from_utf8(line).map_err(|e| {
        ProtocolError::new(
            ErrorKind::Malformed,
            format!("request line is not UTF-8 (byte {})", e.valid_up_to()),
        )
    })?;
    let value = serde_json::from_str::<Unique>(text)
        .map_err(|e| {
            ProtocolError::new(
                ErrorKind::Malformed,
                if e.classify() == serde_json::error::Category::Data {
                    // Only `Unique` fails this way: a key given twice.
                    format!(
                        "request line is ambiguous: {}; each key may appear once",
                        crate::base::sanitize::escape(e.to_string().as_bytes())
                    )
                } else {
                    format!(
                        "request line is not JSON: {}; expected an object such as \
                         {{\"request\": \"status\"}}",
                        crate::base::sanitize::escape(e.to_string().as_bytes())
                    )
                },
            )
        })?
        .0;
    match value {
        serde_json::Value::Object(map) => Ok(map),
        _ => Err(ProtocolError::new(
            ErrorKind::Malformed,
            "request is not a JSON object: expected an object such as {\"request\": \"status\"}",
        )),
    }
}

/// A `version` field, when given, is this protocol's.
fn check_version(version: Option<serde_json::Value>) -> Result<(), ProtocolError> {
    match version {
        None => Ok(()),
        Some(serde_json::Value::Number(n)) if n.as_u64() == Some(u64::from(VERSION)) => Ok(()),
        Some(v) => Err(ProtocolError::new(
            ErrorKind::Version,
            format!(
                "protocol version {v} is not supported: this supervisor speaks version {VERSION}"
            ),
        )),
    }
}

/// The `request` field: one of [`request_names`].
fn request_name(map: &serde_json::Map<String, serde_json::Value>) -> Result<String, ProtocolError> {
    let unknown = |message: String| ProtocolError::new(ErrorKind::UnknownRequest, message);
    let names = || request_names().join(", ");
    let name = match map.get("request") {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(other) => {
            return Err(unknown(format!(
                "\"request\" is {other}, not a string: expected one of {}",
                names()
            )));
        }
        None => {
            return Err(unknown(format!(
                "the object has no \"request\" field: expected one of {}",
                names()
            )));
        }
    };
    if !request_names().contains(&name.as_str()) {
        return Err(unknown(format!(
            "unknown request {:?}: expected one of {}",
            crate::base::sanitize::escape(name.as_bytes()),
            names()
        )));
    }
    Ok(name)
}

/// Every field besides `request` is one request `name` takes ([`request_fields`]).
fn check_fields(
    name: &str,
    map: &serde_json::Map<String, serde_json::Value>,
) -> Result<(), ProtocolError> {
    let allowed = request_fields(name);
    let Some(k) = map
        .keys()
        .find(|k| *k != "request" && !allowed.contains(&k.as_str()))
    else {
        return Ok(());
    };
    Err(ProtocolError::new(
        ErrorKind::BadArgument,
        format!(
            "request {name:?}: unknown field {:?}; expected {}",
            crate::base::sanitize::escape(k.as_bytes()),
            if allowed.is_empty() {
                "no other field".to_string()
            } else {
                allowed.join(", ")
            }
        ),
    ))
}

/// A JSON value in which no object, at any depth, names a key twice (`serde_json` keeps the
/// last one, so `{"request":"status","request":"stop"}` would be a `stop`).
struct Unique(serde_json::Value);

impl<'de> Deserialize<'de> for Unique {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(UniqueVisitor).map(Unique)
    }
}

struct UniqueVisitor;

impl<'de> de::Visitor<'de> for UniqueVisitor {
    type Value = serde_json::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(serde_json::Value::Null, Into::into))
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(serde_json::Value::Null)
    }
    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(serde_json::Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut v = Vec::new();
        while let Some(Unique(x)) = seq.next_element()? {
            v.push(x);
        }
        Ok(serde_json::Value::Array(v))
    }
    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut m = serde_json::Map::new();
        while let Some(k) = map.next_key::<String>()? {
            if m.contains_key(&k) {
                return Err(de::Error::custom(format!("key {k:?} is given twice")));
            }
            let Unique(v) = map.next_value()?;
            m.insert(k, v);
        }
        Ok(serde_json::Value::Object(m))
    }
}

/// How many helpers a "no helper named" answer lists before "and N more".
pub const HELPERS_NAMED: usize = 50;

/// The helpers a "no helper named ..." answer lists: the first [`HELPERS_NAMED`] of `names`,
/// then "and N more"; "none" when there are none. The one wording of every such answer.
pub fn helpers_named<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    let names: Vec<&str> = names.into_iter().filter(|n| !n.is_empty()).collect();
    if names.is_empty() {
        return "none".to_string();
    }
    let mut list = names[..names.len().min(HELPERS_NAMED)].join(", ");
    if names.len() > HELPERS_NAMED {
        list.push_str(&format!(" and {} more", names.len() - HELPERS_NAMED));
    }
    list
}

/// The request as one line, newline included.
pub fn request_line(req: &Request) -> Vec<u8> {
    let mut v = serde_json::to_vec(req).expect("requests always encode");
    v.push(b'\n');
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A supervisor of a thousand helpers names fifty, then how many more.
    #[test]
    fn a_no_such_helper_answer_names_a_bounded_list() {
        let names: Vec<String> = (0..1000).map(|i| format!("h{i}")).collect();
        let list = helpers_named(names.iter().map(|n| n.as_str()));
        assert!(list.starts_with("h0, h1, "), "{list}");
        assert!(list.ends_with("h49 and 950 more"), "{list}");
        assert_eq!(helpers_named(["a", "", "b"]), "a, b");
        assert_eq!(helpers_named([]), "none");
    }

    /// The names and fields read from the enum are those the wire takes, each accepted.
    #[test]
    fn request_names_and_fields_come_from_the_enum() {
        assert_eq!(
            request_names(),
            [
                "status",
                "events",
                "signal",
                "restart",
                "start",
                "stop",
                "reopen_logs",
                "logs",
                "reload",
                "metrics",
                "history"
            ]
        );
        assert_eq!(request_fields("events"), ["backlog", "follow"]);
        assert_eq!(request_fields("signal"), ["target", "signal"]);
        assert_eq!(request_fields("stop"), ["helper"]);
        assert_eq!(
            request_fields("logs"),
            ["helper", "lines", "follow", "helpers", "since_ms"]
        );
        assert_eq!(request_fields("reload"), ["dry_run"]);
        assert_eq!(request_fields("history"), ["helper"]);
        assert!(request_fields("status").is_empty());
        assert!(request_fields("nope").is_empty());
        for name in request_names() {
            let e = parse(&format!(r#"{{"request":"{name}","zz":1}}"#)).unwrap_err();
            assert_eq!(e.kind, ErrorKind::BadArgument, "{name}: {e:?}");
        }
    }

    fn parse(s: &str) -> Result<Request, ProtocolError> {
        parse_request(s.as_bytes())
    }

    #[test]
    fn requests_round_trip() {
        let reqs = [
            Request::Status,
            Request::Events {
                backlog: Some(10),
                follow: false,
            },
            Request::Events {
                backlog: None,
                follow: true,
            },
            Request::Signal {
                target: Target::Helper("web".into()),
                signal: Sig::HUP,
            },
            Request::Signal {
                target: Target::Helper("42".into()),
                signal: Sig::USR1,
            },
            Request::Signal {
                target: Target::Pid(42),
                signal: Sig::KILL,
            },
            Request::Signal {
                target: Target::Identity(Identity {
                    pid: 42,
                    start_time: 7,
                }),
                signal: Sig::TERM,
            },
            Request::Restart {
                helper: "db".into(),
            },
            Request::Start {
                helper: "db".into(),
            },
            Request::Stop {
                helper: Some("db".into()),
            },
            Request::Stop { helper: None },
            Request::ReopenLogs,
            Request::Logs {
                helper: None,
                lines: None,
                follow: false,
                helpers: Vec::new(),
                since_ms: None,
            },
            Request::Logs {
                helper: Some("web".into()),
                lines: Some(MAX_LOG_LINES),
                follow: true,
                helpers: vec!["db".into()],
                since_ms: Some(1_767_000_000_000),
            },
            Request::Reload { dry_run: false },
            Request::Reload { dry_run: true },
            Request::History {
                helper: "web".into(),
            },
        ];
        for r in reqs {
            let line = request_line(&r);
            assert_eq!(line.last(), Some(&b'\n'));
            let back = parse_request(&line[..line.len() - 1]).unwrap();
            assert_eq!(back, r, "{}", String::from_utf8_lossy(&line));
        }
    }

    #[test]
    fn documented_forms_parse() {
        assert_eq!(parse(r#"{"request":"status"}"#).unwrap(), Request::Status);
        // Requests of before the fields were added read as they did.
        assert_eq!(
            parse(r#"{"request":"reload"}"#).unwrap(),
            Request::Reload { dry_run: false }
        );
        assert_eq!(
            request_line(&Request::Reload { dry_run: false }),
            b"{\"request\":\"reload\"}\n"
        );
        assert_eq!(
            parse(r#"{"version":1,"request":"stop"}"#).unwrap(),
            Request::Stop { helper: None }
        );
        assert_eq!(
            parse(r#"{"request":"stop","helper":"web"}"#).unwrap(),
            Request::Stop {
                helper: Some("web".into())
            }
        );
        assert_eq!(
            parse(r#"{"request":"start","helper":"web"}"#).unwrap(),
            Request::Start {
                helper: "web".into()
            }
        );
        assert_eq!(
            parse(r#"{"request":"reopen_logs"}"#).unwrap(),
            Request::ReopenLogs
        );
        assert_eq!(
            parse(r#"{"request":"signal","target":"web","signal":"SIGHUP"}"#).unwrap(),
            Request::Signal {
                target: Target::Helper("web".into()),
                signal: Sig::HUP
            }
        );
        assert_eq!(
            parse(r#"{"request":"signal","target":"1234","signal":15}"#).unwrap(),
            Request::Signal {
                target: Target::Pid(1234),
                signal: Sig::TERM
            }
        );
        assert_eq!(
            parse(r#"{"request":"events"}"#).unwrap(),
            Request::Events {
                backlog: None,
                follow: true
            }
        );
    }

    #[test]
    fn every_problem_has_its_kind() {
        let kind = |s: &str| parse(s).unwrap_err().kind;
        assert_eq!(kind("garbage"), ErrorKind::Malformed);
        assert_eq!(kind("[1,2]"), ErrorKind::Malformed);
        assert_eq!(kind(r#"{"request":"dance"}"#), ErrorKind::UnknownRequest);
        assert_eq!(kind(r#"{"verb":"status"}"#), ErrorKind::UnknownRequest);
        assert_eq!(kind(r#"{"request":7}"#), ErrorKind::UnknownRequest);
        assert_eq!(
            kind(r#"{"request":"status","version":2}"#),
            ErrorKind::Version
        );
        assert_eq!(kind(r#"{"request":"restart"}"#), ErrorKind::BadArgument);
        assert_eq!(
            kind(r#"{"request":"status","extra":1}"#),
            ErrorKind::BadArgument
        );
        assert_eq!(
            kind(r#"{"request":"signal","target":"web","signal":"NOPE"}"#),
            ErrorKind::BadArgument
        );
        assert_eq!(
            kind(r#"{"request":"signal","target":-3,"signal":"TERM"}"#),
            ErrorKind::BadArgument
        );
        assert_eq!(
            kind(r#"{"request":"logs","lines":-1}"#),
            ErrorKind::BadArgument
        );
        assert_eq!(
            kind(r#"{"request":"logs","lines":10001}"#),
            ErrorKind::BadArgument
        );
        assert_eq!(
            kind(r#"{"request":"logs","helper":7}"#),
            ErrorKind::BadArgument
        );
        assert_eq!(
            kind(r#"{"request":"logs","follow":"yes"}"#),
            ErrorKind::BadArgument
        );
        assert_eq!(
            parse(r#"{"request":"logs","helper":null,"lines":0,"follow":true}"#).unwrap(),
            Request::Logs {
                helper: None,
                lines: Some(0),
                follow: true,
                helpers: Vec::new(),
                since_ms: None,
            }
        );
        let m = parse(r#"{"request":"logs","lines":20000}"#)
            .unwrap_err()
            .message;
        assert!(m.contains("20000") && m.contains("10000"), "{m}");
        let long = format!(r#"{{"request":"{}"}}"#, "x".repeat(MAX_REQUEST));
        assert_eq!(kind(&long), ErrorKind::Oversized);
        assert_eq!(
            parse_request(b"{\"request\":\"st\xffatus\"}")
                .unwrap_err()
                .kind,
            ErrorKind::Malformed
        );
        let m = parse(r#"{"request":"dance"}"#).unwrap_err().message;
        assert!(m.contains("dance") && m.contains("status"), "{m}");
    }

    #[test]
    fn a_key_given_twice_is_refused_at_any_depth() {
        for line in [
            r#"{"request":"status","request":"stop"}"#,
            r#"{"request":"stop","version":1,"version":1}"#,
            r#"{"request":"signal","target":{"helper":"a","helper":"b"},"signal":"TERM"}"#,
            r#"{"request":"status","x":[{"k":1,"k":2}]}"#,
        ] {
            let e = parse(line).unwrap_err();
            assert_eq!(e.kind, ErrorKind::Malformed, "{line}: {e}");
            assert!(e.message.contains("given twice"), "{line}: {e}");
        }
        // The same key in sibling objects is fine.
        assert_eq!(
            parse(r#"{"request":"signal","target":{"helper":"a"},"signal":"TERM"}"#).unwrap(),
            Request::Signal {
                target: Target::Helper("a".into()),
                signal: Sig::TERM
            }
        );
    }

    #[test]
    fn replies_have_the_documented_shape() {
        let e = Reply::error(ErrorKind::NotInTree, "pid 1 is not inside the tree");
        let v: serde_json::Value = serde_json::from_slice(&e.to_line()).unwrap();
        assert_eq!(v["version"], 1);
        assert_eq!(v["error"]["kind"], "not_in_tree");
        assert_eq!(v["error"]["message"], "pid 1 is not inside the tree");
        let d = Reply::new(ReplyBody::Done {
            request: "stop".into(),
            message: "shutting down".into(),
        });
        let line = d.to_line();
        let back: Reply = serde_json::from_slice(&line).unwrap();
        assert_eq!(back, d);
        let ev = Reply::new(ReplyBody::Event(EventRecord {
            seq: 3,
            ts_ms: 9,
            event: Event::GiveUp {
                helper: "x".into(),
                restarts: 5,
            },
            foreign_pids: Vec::new(),
            outer_pids: Vec::new(),
        }));
        let v: serde_json::Value = serde_json::from_slice(&ev.to_line()).unwrap();
        assert_eq!(v["event"]["event"], "give_up");
        assert_eq!(v["event"]["seq"], 3);
        let back: Reply = serde_json::from_value(v).unwrap();
        assert_eq!(back, ev);
        // A line of a helper: its bytes exact, a string when UTF-8 (no raw ESC on the wire).
        let line = Line {
            seq: 7,
            helper: "web".into(),
            stream: Stream::Stderr,
            helper_pid: Some(7),
            outer_pid: None,
            ts_ms: 11,
            continued: true,
            bytes: b"a\x1b[31m\xff".to_vec(),
        };
        let log = Reply::new(ReplyBody::Log(LogRecord::of(&line)));
        let text = log.to_line();
        assert!(!text.contains(&0x1b));
        let v: serde_json::Value = serde_json::from_slice(&text).unwrap();
        assert_eq!(v["log"]["helper"], "web");
        assert_eq!(v["log"]["stream"], "stderr");
        assert_eq!(v["log"]["seq"], 7);
        assert_eq!(v["log"]["continued"], true);
        assert_eq!(
            v["log"]["text"],
            serde_json::json!([97, 27, 91, 51, 49, 109, 255])
        );
        let back: Reply = serde_json::from_value(v).unwrap();
        let ReplyBody::Log(rec) = back.body else {
            panic!("not a log line: {back:?}");
        };
        assert_eq!(rec.into_line(), line);
    }

    #[test]
    fn bytes_are_strings_when_utf8() {
        let j = serde_json::to_string(&Bytes(b"a\x1bb".to_vec())).unwrap();
        assert_eq!(j, "\"a\\u001bb\"");
        let j = serde_json::to_string(&Bytes(vec![0x66, 0xff])).unwrap();
        assert_eq!(j, "[102,255]");
        let b: Bytes = serde_json::from_str("[102,255]").unwrap();
        assert_eq!(b.0, vec![0x66, 0xff]);
        let b: Bytes = serde_json::from_str("\"hi\"").unwrap();
        assert_eq!(b.0, b"hi");
    }
}
