//! The supervisor's side of the control socket: answering requests from its own state.
//!
//! Owns [`Control`], what the supervisor keeps for its operator (the serving socket, the events
//! hub, a scanner of the subtree's readings and command lines, the last adoption of each
//! process, the last exit of each helper, helpers asked to restart, what the metrics count and
//! the `--metrics` listener), and the handling of each
//! request: the `status` snapshot built from the adoption registry and foster's own subtree
//! (one update of what changed, then a read of the subtree's processes alone, never the whole
//! of `/proc`), `signal` only to identities inside the tree, `restart`, and `stop` as the same
//! shutdown as SIGTERM, `metrics` (and the responder's questions) as the Prometheus text of a
//! status snapshot. Everything here runs on the supervisor's loop and never touches a
//! client's socket (see [`crate::supervision::control::server`]).

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tracing::info;

use super::Supervisor;
use super::lifecycle::StopFor;
use super::timers::Timer;
use crate::process::identity::Identity;
use crate::process::reaper::ExitStatus;
use crate::process::signal::name as signal_name;
use crate::process::tree::{ProcessNode, ScanOptions, Scanner, Snapshot};
use crate::supervision::control::protocol::{
    AdoptionInfo, Bytes, Dependency, ErrorKind, EventRecord, HISTORY, HelperInfo, HelperState,
    ProcessInfo, Reply, ReplyBody, Request, Role, Status, SupervisorInfo, Target,
};
use crate::supervision::control::server::{Bound, Command, Hub, Server};
use crate::supervision::event::{Event, Record, SignalReason};
use crate::supervision::restart::RestartState;

/// The questions of the metrics responder: where each answer goes.
pub(super) type Asked = mpsc::Receiver<oneshot::Sender<String>>;

/// What the supervisor keeps for its control socket.
pub(super) struct Control {
    bound: Option<Bound>,
    socket: Option<PathBuf>,
    hub: Arc<Hub>,
    scanner: Option<Scanner>,
    adoptions: HashMap<Identity, AdoptionInfo>,
    last_exit: HashMap<String, ExitStatus>,
    /// Each helper's last launches and ends, for `history` (at most [`HISTORY`] each).
    history: HashMap<String, VecDeque<EventRecord>>,
    config_path: String,
    started_ms: u64,
    /// What the metrics count as the supervisor goes (`docs/metrics.md`).
    counts: crate::supervision::metrics::Counts,
    /// The `--metrics` listener, until it is served; then its address.
    pub(super) metrics_listener: Option<std::net::TcpListener>,
    metrics_addr: Option<String>,
}

impl Control {
    pub(super) fn new(config_path: Option<PathBuf>, bound: Option<Bound>) -> Control {
        Control {
            socket: bound.as_ref().map(|b| b.path().to_path_buf()),
            bound,
            hub: Arc::new(Hub::new()),
            scanner: None,
            adoptions: HashMap::new(),
            last_exit: HashMap::new(),
            history: HashMap::new(),
            config_path: config_path
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            started_ms: Record::now(Event::Shutdown { signal: None }).ts_ms,
            counts: crate::supervision::metrics::Counts::default(),
            metrics_listener: None,
            metrics_addr: None,
        }
    }

    /// Starts the `--metrics` responder, when asked for (inside the runtime): the receiver of
    /// its questions, and its task.
    pub(super) fn serve_metrics(
        &mut self,
    ) -> std::io::Result<(Option<Asked>, Option<JoinHandle<()>>)> {
        let Some(l) = self.metrics_listener.take() else {
            return Ok((None, None));
        };
        self.metrics_addr = Some(l.local_addr()?.to_string());
        let (tx, rx) = mpsc::channel(crate::supervision::metrics::http::MAX_CONNECTIONS);
        let task = crate::supervision::metrics::http::serve(l, tx)?;
        Ok((Some(rx), Some(task)))
    }

    /// The address the `--metrics` responder serves on, once it does (a port 0 given, the
    /// port it took).
    pub(super) fn metrics_addr(&self) -> Option<&str> {
        self.metrics_addr.as_deref()
    }

    /// Starts serving the bound socket (inside the runtime), with the helpers' kept lines for
    /// `logs`.
    pub(super) fn serve(
        &mut self,
        output: Option<Arc<crate::supervision::output::Output>>,
    ) -> std::io::Result<Option<Server>> {
        let Some(b) = self.bound.take() else {
            return Ok(None);
        };
        // Its path is said by the `start` event (on standard error too).
        let server = b.serve(self.hub.clone(), output)?;
        Ok(Some(server))
    }

    /// How helper `name`'s last process ended.
    pub(super) fn last_exit(&self, name: &str) -> Option<ExitStatus> {
        self.last_exit.get(name).copied()
    }

    /// The socket's path, for the start event.
    pub(super) fn socket_path(&self) -> Option<String> {
        self.socket.as_ref().map(|p| p.display().to_string())
    }

    /// Takes note of an event (adoptions, helper exits, what the metrics count) and streams it
    /// with its outer pids ([`Hub::publish`]); keeps it in its helper's history when `history`
    /// (the helper is in the configuration now: see [`Supervisor::keeps_history`]).
    pub(super) fn on_event(&mut self, record: &Record, outer_pids: &[[i32; 2]], history: bool) {
        self.count(&record.event);
        self.note_adoption_or_exit(record);
        self.hub.publish(record, outer_pids);
        if history {
            self.keep_history(record, outer_pids);
        }
    }

    /// The events the events log could not take since foster started, for the metrics.
    pub(super) fn set_events_log_lost(&mut self, lost: u64) {
        self.counts.events_log_lost = lost;
    }

    /// Counts `event` for the metrics: every event, adoptions by class, restarts by the
    /// restart rules, orphans policed.
    fn count(&mut self, event: &Event) {
        let counts = &mut self.counts;
        counts.events += 1;
        match event {
            Event::Reparented { classification, .. } => {
                let class = serde_json::to_value(classification)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default();
                *counts.adoptions.entry(class).or_default() += 1;
            }
            // A restart at once is a request's (`ctl restart`), counted apart when asked for.
            Event::Restart { delay_ms: 0, .. } => {}
            Event::Restart { helper, .. } => {
                *counts.restarts.entry(helper.clone()).or_default() += 1;
            }
            Event::Signal {
                reason: SignalReason::OrphanPolicy,
                ..
            } => counts.orphans_policed += 1,
            _ => {}
        }
    }

    /// Keeps the last adoption of each live process and the last end of each helper (its own
    /// process's exit, or its failed launch); an ended process's adoption is dropped.
    fn note_adoption_or_exit(&mut self, record: &Record) {
        match &record.event {
            Event::Reparented {
                identity,
                from,
                to,
                expected,
                classification,
                ..
            } => {
                self.adoptions.insert(
                    *identity,
                    AdoptionInfo {
                        from: *from,
                        to: *to,
                        expected: *expected,
                        classification: *classification,
                        ts_ms: record.ts_ms,
                    },
                );
            }
            Event::Exit {
                identity,
                helper: Some(h),
                generation: Some(1),
                status,
                ..
            } => {
                self.last_exit.insert(h.clone(), *status);
                if let Some(id) = identity {
                    self.adoptions.remove(id);
                }
            }
            Event::Exit {
                identity: Some(id), ..
            } => {
                self.adoptions.remove(id);
            }
            // A launch that failed is the helper's last end (127, 126, 125...).
            Event::LaunchFailed {
                helper,
                status: Some(status),
                ..
            } => {
                self.last_exit.insert(helper.clone(), *status);
            }
            _ => {}
        }
    }

    /// Drops the history of helper `name`, which a reload removed: a helper of that name a
    /// later reload adds starts a history of its own.
    pub(super) fn forget_history(&mut self, name: &str) {
        self.history.remove(name);
    }

    /// Keeps `record` in its helper's history when it is a launch or an end of it.
    fn keep_history(&mut self, record: &Record, outer_pids: &[[i32; 2]]) {
        if let Some(helper) = history_helper(&record.event) {
            let ring = self.history.entry(helper.to_string()).or_default();
            if ring.len() == HISTORY {
                ring.pop_front();
            }
            ring.push_back(EventRecord {
                seq: self.hub.published(),
                ts_ms: record.ts_ms,
                event: record.event.clone(),
                foreign_pids: Vec::new(),
                outer_pids: outer_pids.to_vec(),
            });
        }
    }
}

impl Supervisor {
    /// Whether `event` goes to a helper's history: it is one of its launches or ends, and the
    /// helper is in the configuration now (the stop of a helper a reload removed is not kept).
    pub(super) fn keeps_history(&self, event: &Event) -> bool {
        history_helper(event).is_some_and(|h| self.helper_index(h).is_some())
    }
}

/// The helper whose `history` keeps `event`: its launches, failed launches, ends (of the
/// helper's own process), the signals sent to that process, restarts, give-ups and failed
/// checks.
fn history_helper(event: &Event) -> Option<&str> {
    match event {
        Event::Launch { helper, .. }
        | Event::LaunchFailed { helper, .. }
        | Event::Restart { helper, .. }
        | Event::GiveUp { helper, .. }
        | Event::CheckFailed { helper, .. } => Some(helper),
        Event::Exit {
            helper: Some(h),
            generation: Some(1),
            ..
        }
        | Event::Signal {
            helper: Some(h),
            generation: Some(1),
            ..
        } => Some(h),
        _ => None,
    }
}

/// The next command of `server`, if there is one (pending forever otherwise).
pub(super) async fn recv(server: &mut Option<Server>) -> Command {
    match server {
        Some(s) => s.recv().await,
        None => std::future::pending().await,
    }
}

/// The next question of the metrics responder, if it runs (pending forever otherwise).
pub(super) async fn metrics_asked(asked: &mut Option<Asked>) -> oneshot::Sender<String> {
    match asked {
        Some(rx) => match rx.recv().await {
            Some(tx) => tx,
            None => std::future::pending().await,
        },
        None => std::future::pending().await,
    }
}

/// The answer to `reopen_logs`: what was reopened, or what could not be.
fn reopen_reply(
    events: Option<std::io::Result<PathBuf>>,
    files: &[crate::supervision::output::Reopened],
) -> Reply {
    let mut ok = Vec::new();
    let mut failed = Vec::new();
    match events {
        Some(Ok(p)) => ok.push(format!("the events log {}", p.display())),
        Some(Err(e)) => failed.push(e.to_string()),
        None => {}
    }
    for f in files {
        match &f.error {
            None => ok.push(format!("helper {:?}'s log {}", f.helper, f.path.display())),
            Some(e) => failed.push(e.clone()),
        }
    }
    if failed.is_empty() {
        return done(
            "reopen_logs",
            if ok.is_empty() {
                "no log file to reopen".to_string()
            } else {
                format!("reopened {}", ok.join(", "))
            },
        );
    }
    let mut message = format!("cannot reopen: {}", failed.join("; "));
    if !ok.is_empty() {
        message.push_str(&format!(" (reopened {})", ok.join(", ")));
    }
    Reply::error(ErrorKind::Failed, message)
}

/// What a helper stopped by request becomes (the end of the `stop` answers).
const UNTIL_START: &str = "it stays stopped, whatever its restart rule, until `foster ctl start`";

fn done(request: &str, message: String) -> Reply {
    Reply::new(ReplyBody::Done {
        request: request.to_string(),
        message,
    })
}

impl Supervisor {
    /// Answers one request from the control socket.
    pub(super) fn on_command(&mut self, cmd: Command) {
        let reply = match cmd.request {
            Request::Status => Reply::new(ReplyBody::Status(Box::new(self.status()))),
            Request::Metrics => Reply::new(ReplyBody::Metrics {
                text: self.metrics_text(),
            }),
            Request::Signal { target, signal } => self.ctl_signal(&target, signal.number()),
            Request::Restart { helper } => self.ctl_restart(&helper),
            Request::Start { helper } => self.ctl_start(&helper),
            Request::Stop {
                helper: Some(helper),
            } => self.ctl_stop_helper(&helper),
            Request::Stop { helper: None } => {
                info!("control socket: stop requested by {}", cmd.peer);
                let already = self.stage.shutting_down();
                self.begin_shutdown(Some(libc::SIGTERM));
                done(
                    "stop",
                    if already {
                        "already shutting down".to_string()
                    } else {
                        "shutting down (as on SIGTERM)".to_string()
                    },
                )
            }
            Request::ReopenLogs => {
                info!("control socket: reopen-logs requested by {}", cmd.peer);
                // The helpers' files are reopened on the output's thread: the answer waits for
                // it on a task of its own, never on this loop.
                let (tx, rx) = tokio::sync::oneshot::channel();
                let events = self.reopen_logs("control socket", Some(tx));
                let reply = cmd.reply;
                tokio::spawn(async move {
                    let files = rx.await.unwrap_or_default();
                    let _ = reply.send(reopen_reply(events, &files));
                });
                return;
            }
            Request::Reload { dry_run: true } => match self.reload_plan() {
                Ok(plan) => Reply::new(ReplyBody::ReloadPlan(plan)),
                Err(refused) => refused.reply(),
            },
            Request::History { helper } => self.ctl_history(&helper),
            Request::Reload { dry_run: false } => {
                info!("control socket: reload requested by {}", cmd.peer);
                match self.reload("control socket") {
                    Ok(changes) => Reply::new(ReplyBody::Reloaded(changes)),
                    Err(refused) => refused.reply(),
                }
            }
            // Answered by the client task itself.
            Request::Events { .. } | Request::Logs { .. } => Reply::error(
                ErrorKind::Internal,
                "streams are not routed to the supervisor",
            ),
        };
        let _ = cmd.reply.send(reply);
    }

    /// The Prometheus text of the supervisor's numbers now: a status snapshot (one read of
    /// the tree's processes) and what was counted ([`crate::supervision::metrics::render`]).
    /// The kernel's announcements of births and ends were lost once more (`births.rs`).
    pub(super) fn count_lost_tree_events(&mut self) {
        self.control.counts.tree_events_lost += 1;
    }

    pub(super) fn metrics_text(&mut self) -> String {
        let status = self.status();
        let now_ms = Record::now(Event::Shutdown { signal: None }).ts_ms;
        crate::supervision::metrics::render(&status, &self.control.counts, now_ms)
    }

    /// `start`: a helper that is not running is launched now (once its dependencies are met),
    /// its backoff count started over.
    fn ctl_start(&mut self, name: &str) -> Reply {
        let Some(i) = self.helper_index(name) else {
            return self.no_such_helper(name);
        };
        if self.stage.shutting_down() {
            return Reply::error(
                ErrorKind::Refused,
                format!("helper {name:?} is not started: the supervisor is shutting down"),
            );
        }
        let h = &self.units.helpers[i];
        if let Some(id) = h.running().filter(|_| h.state.is_up()) {
            return done(
                "start",
                format!(
                    "helper {name:?} is already {} ({id}): nothing to do",
                    h.state
                ),
            );
        }
        match h.state {
            HelperState::Stopping => {
                let was = h.stop.clone();
                self.units.helpers[i].stop = Some(StopFor::Restart);
                return done(
                    "start",
                    match was {
                        Some(StopFor::Restart) => {
                            format!("helper {name:?} is already being restarted")
                        }
                        _ => format!(
                            "helper {name:?} is stopping; it is launched again once it and its \
                             tree have ended"
                        ),
                    },
                );
            }
            HelperState::Waiting => {
                return done(
                    "start",
                    format!(
                        "helper {name:?} is already waiting {}; it is launched once they are met",
                        h.detail.as_deref().unwrap_or("for its dependencies")
                    ),
                );
            }
            _ => {}
        }
        let was = super::lifecycle::state_phrase(h.state, h.detail.as_deref());
        self.timers.cancel(|t| *t == Timer::Restart(i));
        self.units.helpers[i].restart = RestartState::default();
        self.want_launch(i);
        self.on_sigchld();
        self.launch_outcome(i, "start", Some(was))
    }

    /// `stop` of a helper: a running one gets its stop signal, and SIGKILL goes to what is left
    /// of its tree when its grace runs out; one waiting (for a dependency or its backoff) is
    /// not launched. Either stays stopped, whatever its restart rule, until `start`.
    fn ctl_stop_helper(&mut self, name: &str) -> Reply {
        let Some(i) = self.helper_index(name) else {
            return self.no_such_helper(name);
        };
        if self.stage.shutting_down() {
            return Reply::error(
                ErrorKind::Refused,
                format!(
                    "helper {name:?}: the supervisor is shutting down, and stops every helper \
                     already"
                ),
            );
        }
        let h = &self.units.helpers[i];
        match h.running().filter(|_| h.state.is_up()) {
            Some(id) => self.stop_running_helper(i, name, id),
            None => self.stop_idle_helper(i, name),
        }
    }

    /// `stop` of helper `i` (`name`), up with process `id`: its stop signal now, SIGKILL to
    /// what is left of its tree after its grace.
    fn stop_running_helper(&mut self, i: usize, name: &str, id: Identity) -> Reply {
        self.rescan();
        let others = self
            .known
            .registry
            .helper_tree(name)
            .into_iter()
            .filter(|p| *p != id)
            .count();
        let cfg = &self.config.helpers[i];
        let (sig, grace) = (cfg.stop_signal.number(), cfg.stop_grace.0);
        self.stop_helper(i, StopFor::Request);
        done(
            "stop",
            format!(
                "stopping helper {name:?}: sent {} to {id}{}; SIGKILL to what is left of its \
                 tree after {}; {UNTIL_START}",
                signal_name(sig),
                match others {
                    0 => String::new(),
                    1 => " (its tree has 1 more process)".to_string(),
                    n => format!(" (its tree has {n} more processes)"),
                },
                crate::base::duration::Text(grace)
            ),
        )
    }

    /// `stop` of helper `i` (`name`), with no process up: one stopping is not launched again,
    /// one waiting or in its backoff is stopped now, any other is left as it is.
    fn stop_idle_helper(&mut self, i: usize, name: &str) -> Reply {
        let h = &self.units.helpers[i];
        match h.state {
            HelperState::Stopping => {
                let was = h.stop.clone();
                self.units.helpers[i].stop = Some(StopFor::Request);
                self.units.helpers[i].detail = Some("by request".into());
                done(
                    "stop",
                    match was {
                        Some(StopFor::Request) => {
                            format!("helper {name:?} is already stopping by request")
                        }
                        _ => format!(
                            "helper {name:?} is already stopping; it is not launched again: \
                             {UNTIL_START}"
                        ),
                    },
                )
            }
            HelperState::Stopped => done("stop", format!("helper {name:?} is already stopped")),
            HelperState::Waiting | HelperState::Backoff => {
                let was = match &h.detail {
                    Some(d) => format!("{} {d}", h.state),
                    None => h.state.to_string(),
                };
                self.timers.cancel(|t| *t == Timer::Restart(i));
                self.set_state(i, HelperState::Stopped, Some("by request".into()));
                done(
                    "stop",
                    format!("helper {name:?} was {was}, with no process: now {UNTIL_START}"),
                )
            }
            s => done(
                "stop",
                format!(
                    "helper {name:?} has no process to stop: it {}; it is not launched again \
                     unless started",
                    match &h.detail {
                        Some(d) => format!("{s} {d}"),
                        None => s.to_string(),
                    }
                ),
            ),
        }
    }

    fn ctl_restart(&mut self, name: &str) -> Reply {
        let Some(i) = self.helper_index(name) else {
            return self.no_such_helper(name);
        };
        if self.stage.shutting_down() {
            return Reply::error(
                ErrorKind::Refused,
                format!("helper {name:?} is not restarted: the supervisor is shutting down"),
            );
        }
        let h = &self.units.helpers[i];
        if h.state == HelperState::Stopping {
            let was = h.stop.clone();
            self.units.helpers[i].stop = Some(StopFor::Restart);
            return done(
                "restart",
                match was {
                    Some(StopFor::Restart) => format!("helper {name:?} is already being restarted"),
                    _ => format!(
                        "helper {name:?} is already stopping; it is launched again once it has \
                         ended"
                    ),
                },
            );
        }
        if let Some(id) = h.running() {
            let cfg = &self.config.helpers[i];
            let (sig, grace) = (cfg.stop_signal.number(), cfg.stop_grace.0);
            self.control.counts.requested_restart(name);
            self.stop_helper(i, StopFor::Restart);
            return done(
                "restart",
                format!(
                    "sent {} to helper {name:?} ({id}); it is launched again when it and its \
                     tree have ended (SIGKILL to what is left of its tree after {})",
                    signal_name(sig),
                    crate::base::duration::Text(grace)
                ),
            );
        }
        self.timers.cancel(|t| *t == Timer::Restart(i));
        self.units.helpers[i].restart = RestartState::default();
        self.control.counts.requested_restart(name);
        self.want_launch(i);
        self.on_sigchld();
        self.launch_outcome(i, "restart", None)
    }

    /// What became of helper `i` just asked to launch (`request`: `start`, `restart`), its
    /// state before when `was` says it: done when it was launched or waits for its
    /// dependencies, an error reply ([`ErrorKind::Failed`], so `foster ctl` exits 1) naming
    /// why when its launch failed.
    pub(super) fn launch_outcome(&self, i: usize, request: &str, was: Option<String>) -> Reply {
        let name = self.config.helpers[i].name();
        let h = &self.units.helpers[i];
        let was = was.map(|w| format!(" (it was {w})")).unwrap_or_default();
        match (h.state, h.running(), &h.failed_launch) {
            (_, Some(id), None) => done(request, format!("helper {name:?} launched ({id}){was}")),
            (HelperState::Waiting, None, _) => done(
                request,
                format!(
                    "helper {name:?} is waiting {}; it is launched once they are met{was}",
                    h.detail.as_deref().unwrap_or("for its dependencies")
                ),
            ),
            (s, _, why) => Reply::error(
                ErrorKind::Failed,
                format!(
                    "helper {name:?} could not be launched{}; it is now {}{was}",
                    why.as_deref().map(|w| format!(": {w}")).unwrap_or_default(),
                    super::lifecycle::state_phrase(s, h.detail.as_deref())
                ),
            ),
        }
    }

    /// `history`: the helper's last launches and ends, oldest first.
    fn ctl_history(&self, name: &str) -> Reply {
        if self.helper_index(name).is_none() {
            return self.no_such_helper(name);
        }
        let events = self
            .control
            .history
            .get(name)
            .map(|r| r.iter().cloned().collect())
            .unwrap_or_default();
        Reply::new(ReplyBody::History {
            helper: name.to_string(),
            events,
        })
    }

    fn no_such_helper(&self, name: &str) -> Reply {
        let names: Vec<&str> = (0..self.units.helpers.len())
            .filter(|&i| !self.units.helpers[i].retired)
            .map(|i| self.config.helpers[i].name())
            .collect();
        Reply::error(
            ErrorKind::NoSuchHelper,
            format!(
                "no helper named {:?}; helpers: {}",
                crate::base::sanitize::escape(name.as_bytes()),
                crate::supervision::control::protocol::helpers_named(names)
            ),
        )
    }

    /// `signal`: `sig` to the target, a helper's process or a process inside the tree.
    fn ctl_signal(&mut self, target: &Target, sig: i32) -> Reply {
        let found = match target {
            Target::Helper(name) => self.helper_to_signal(name),
            Target::Pid(pid) => self.tree_process_to_signal(*pid, None),
            Target::Identity(want) => self.tree_process_to_signal(want.pid, Some(*want)),
        };
        match found {
            Ok((id, helper)) => self.send_by_request(target, id, helper, sig),
            Err(refused) => *refused,
        }
    }

    /// The process of helper `name` to signal, and its name; refused when there is no such
    /// helper or it has no process now.
    fn helper_to_signal(&self, name: &String) -> Result<(Identity, Option<String>), Box<Reply>> {
        let Some(i) = self.helper_index(name) else {
            return Err(Box::new(self.no_such_helper(name)));
        };
        match (self.units.helpers[i].pid, self.units.helpers[i].identity) {
            (Some(_), Some(id)) => Ok((id, Some(name.clone()))),
            _ => Err(Box::new(Reply::error(
                ErrorKind::Refused,
                format!("helper {name:?} has no running process now"),
            ))),
        }
    }

    /// The process of `pid` to signal (the process `want` when given), and its helper; refused
    /// when it is the supervisor, outside the tree now, or no longer `want`.
    fn tree_process_to_signal(
        &mut self,
        pid: i32,
        want: Option<Identity>,
    ) -> Result<(Identity, Option<String>), Box<Reply>> {
        if pid == self.setup.me.pid {
            return Err(Box::new(Reply::error(
                ErrorKind::NotInTree,
                format!(
                    "pid {pid} is the supervisor itself, not a process of its tree; \
                     to stop it and its helpers, use `foster ctl shutdown`"
                ),
            )));
        }
        // Look at the tree as it is now, not as the last event left it.
        self.rescan();
        let live = self
            .known
            .registry
            .identity_of_pid(pid)
            .filter(|_| self.known.registry.in_tree(pid));
        let Some(id) = live else {
            return Err(Box::new(Reply::error(
                ErrorKind::NotInTree,
                format!("pid {pid} is not inside the supervised tree"),
            )));
        };
        if let Some(want) = want
            && want != id
        {
            return Err(Box::new(Reply::error(
                ErrorKind::NotInTree,
                format!("process {want} is gone: pid {pid} now belongs to another process ({id})"),
            )));
        }
        let helper = self.known.registry.get(&id).and_then(|r| r.helper.clone());
        Ok((id, helper))
    }

    /// Sends `sig` to `id` (of `helper`, found from `target`) and says so with a `signal`
    /// event; the answer names what was signalled, or that it could not be.
    fn send_by_request(
        &mut self,
        target: &Target,
        id: Identity,
        helper: Option<String>,
        sig: i32,
    ) -> Reply {
        if self.send(id, sig).is_err() {
            return Reply::error(
                ErrorKind::Failed,
                format!(
                    "cannot send {} to {id}: it has just ended or cannot be signalled",
                    signal_name(sig)
                ),
            );
        }
        self.emit(Event::Signal {
            target: id,
            helper: helper.clone(),
            generation: self.known.registry.get(&id).map(|r| r.generation),
            signal: signal_name(sig),
            reason: SignalReason::Control,
            grace_ms: None,
        });
        let what = match helper {
            Some(h) if matches!(target, Target::Helper(_)) => format!("helper {h:?}"),
            Some(h) => format!("a process of helper {h:?}"),
            None => "a process of the tree".to_string(),
        };
        done(
            "signal",
            format!("sent {} to {what} ({id})", signal_name(sig)),
        )
    }

    /// The snapshot of the supervised tree: foster's own subtree, brought up to date by reading
    /// only what changed (as on SIGCHLD), then the readings (state, memory, CPU time, command
    /// line) of its processes alone, never the rest of `/proc`.
    pub(super) fn status(&mut self) -> Status {
        let (now_ticks, hz) = clock();
        let procs = self
            .tree_readings()
            .iter()
            .map(|n| self.process_info(n))
            .collect();
        let helpers = (0..self.units.helpers.len())
            .filter(|&i| !self.units.helpers[i].retired)
            .map(|i| self.helper_info(i))
            .collect();
        Status {
            supervisor: SupervisorInfo {
                identity: self.setup.me,
                config: self.control.config_path.clone(),
                socket: self.control.socket_path().unwrap_or_default(),
                contained: self.setup.contained,
                shutting_down: self.stage.shutting_down(),
                started_ms: self.control.started_ms,
                notify_refused: self.io.checks_io.refused.0,
                metrics: self.control.metrics_addr.clone(),
                version: Some(version_text()),
            },
            helpers,
            processes: procs,
            now_ticks,
            hz,
        }
    }

    /// The processes of the supervised tree as they are now, parents before children
    /// (breadth-first from the supervisor, children in pid order). The structure is that of
    /// the subtree after one update; each of its processes is read again for its readings. A
    /// process that ended or moved between the two reads makes the update run again (at most
    /// three times; then the processes that are gone are left out).
    fn tree_readings(&mut self) -> Vec<ProcessNode> {
        if self.control.scanner.is_none() {
            self.control.scanner = Scanner::new(ScanOptions {
                cmdline: true,
                ..ScanOptions::default()
            })
            .ok();
        }
        let mut fresh = Snapshot::default();
        for _ in 0..3 {
            self.rescan();
            let Some(scanner) = self.control.scanner.as_mut() else {
                break;
            };
            let pids: Vec<i32> = self.known.tree.snapshot().nodes().map(|n| n.pid).collect();
            fresh = scanner.scan_pids(&pids);
            let tree = self.known.tree.snapshot();
            if tree
                .nodes()
                .all(|n| fresh.get(&n.identity).is_some_and(|f| f.ppid == n.ppid))
            {
                break;
            }
        }
        let tree = self.known.tree.snapshot();
        let mut out = Vec::with_capacity(tree.len());
        let mut queue = std::collections::VecDeque::new();
        if let Some(root) = tree.get(&self.setup.me) {
            queue.push_back(root);
        }
        while let Some(n) = queue.pop_front() {
            let Some(f) = fresh.get(&n.identity) else {
                continue;
            };
            let mut f = f.clone();
            // The root's parent is outside the subtree: the subtree knows it.
            f.parent = n.parent;
            out.push(f);
            let mut kids = tree.children(&n.identity);
            kids.sort_by_key(|k| k.pid);
            queue.extend(kids);
        }
        out
    }

    fn process_info(&self, n: &ProcessNode) -> ProcessInfo {
        let id = n.identity;
        let rec = self.known.registry.get(&id);
        let generation = rec.map_or(if id == self.setup.me { 0 } else { 2 }, |r| r.generation);
        let helper = rec.and_then(|r| r.helper.clone());
        let expected_parent = rec.and_then(|r| r.expected_parent);
        let adoption = self.control.adoptions.get(&id).copied();
        let is_helper = self
            .units
            .helpers
            .iter()
            .any(|h| h.identity == Some(id) && h.pid.is_some());
        let nested = n.comm == b"foster"
            && n.cmdline.iter().skip(1).any(|a| a == b"run")
            && !n.cmdline.iter().any(|a| a == b"--check");
        let role = if id == self.setup.me || nested {
            Role::Supervisor
        } else if is_helper {
            Role::Helper
        } else if adoption.is_some()
            || expected_parent.is_some_and(|e| n.parent != Some(e) && n.ppid != 0)
        {
            Role::AdoptedOrphan
        } else {
            Role::Descendant
        };
        let policy = (id != self.setup.me).then(|| {
            self.policy_for(helper.as_deref(), generation)
                .to_policy()
                .generation_text()
        });
        ProcessInfo {
            pid: id.pid,
            start_time: id.start_time,
            role,
            helper,
            generation,
            policy,
            expected_parent,
            parent: n.parent,
            ppid: n.ppid,
            adoption,
            state: (n.state as char).to_string(),
            comm: Bytes(n.comm.clone()),
            cmdline: n.cmdline.iter().map(|a| Bytes(a.clone())).collect(),
            uid: n.uid,
            threads: n.num_threads,
            rss_bytes: n.rss_bytes,
            cpu_ticks: n.cpu_ticks,
        }
    }

    fn helper_info(&self, i: usize) -> HelperInfo {
        let h = &self.units.helpers[i];
        let cfg = &self.config.helpers[i];
        let state = h.state;
        let checks = h.checks.as_ref().filter(|_| h.running().is_some());
        let now = Instant::now();
        let next_launch_in_ms = self
            .timers
            .deadline(Timer::Restart(i))
            .map(|at| at.saturating_duration_since(now).as_millis() as u64);
        HelperInfo {
            name: cfg.name().to_string(),
            state,
            detail: h.detail.clone(),
            status_text: h.status_text.clone(),
            stop_signal: signal_name(cfg.stop_signal.number()),
            stop_grace_ms: cfg.stop_grace.0.as_millis() as u64,
            depends_on: self.units.graph.deps[i]
                .iter()
                .map(|&(d, condition)| Dependency {
                    helper: self.config.helpers[d].name().to_string(),
                    condition,
                    met: condition.met_by(self.units.helpers[d].state),
                    held: condition.held_by(self.units.helpers[d].state),
                })
                .collect(),
            identity: h.running(),
            launches: h.launched,
            restarts_in_a_row: h.restart.in_a_row(),
            restart: serde_json::to_value(cfg.restart)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            last_exit: self.control.last_exit.get(cfg.name()).copied(),
            next_launch_in_ms,
            policy: cfg.policy_chain().to_string(),
            health_failures: checks.map_or(0, |c| c.health_failures),
            errno: checks.and_then(|c| c.errno),
            main_pid: checks.and_then(|c| c.main_pid),
        }
    }
}

/// foster's version, with the commit it was built from when known: `0.1.0 (abc1234)`.
fn version_text() -> String {
    let version = env!("CARGO_PKG_VERSION");
    match env!("FOSTER_COMMIT").strip_prefix("commit ") {
        Some(c) if !c.is_empty() && c != "unknown" => format!("{version} ({c})"),
        _ => version.to_string(),
    }
}

/// Clock ticks since boot now, and ticks per second.
fn clock() -> (u64, u64) {
    // SAFETY: sysconf with a valid name.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec. CLOCK_BOOTTIME is the clock of start_time.
    unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    let ticks = ts.tv_sec as u64 * hz + ts.tv_nsec as u64 * hz / 1_000_000_000;
    (ticks, hz)
}
