//! A helper's life in the supervisor: its state, its launch in dependency order, its stop, and
//! the shutdown in reverse dependency order.
//!
//! Owns [`Run`] (what the supervisor keeps of one helper: its process, its restart count, its
//! [`HelperState`] and the detail shown with it), [`Graph`] (the `depends_on` graph: each
//! helper's dependencies with their conditions, its dependents, a topological order), and the
//! transitions: a launch waits until every dependency meets its condition (`waiting` until
//! then, with the reason, `for db: gave up after 5 restarts` when a dependency cannot get there
//! by itself); the end of a process goes through the restart rules
//! ([`crate::supervision::restart`]); a stop (`ctl stop`, `ctl restart`, a failed check, the
//! shutdown) sends the helper's stop signal and SIGKILLs what is left of its tree when its grace
//! runs out, and the helper is down once its process has ended and no process of its tree is left
//! (or its grace ran out). The shutdown stops a helper only once every helper that depends on it is
//! down; independent helpers stop at once, in parallel.

use std::time::{Duration, Instant};

use petgraph::graph::{DiGraph, NodeIndex};

use super::Supervisor;
use super::stage::Stage;
use super::timers::Timer;
use crate::process::identity::{Identity, ProcessRef};
use crate::process::reaper::ExitStatus;
use crate::process::state::{Condition, HelperState};
use crate::supervision::config::Config;
use crate::supervision::event::{Event, SignalReason};
use crate::supervision::restart::{Decision, RestartState};

/// The detail of a helper a reload removed (`stopping` or `stopped` …).
pub(super) const REMOVED: &str = "removed from the configuration";

/// The detail of a helper with `autostart = false` that nothing started yet.
pub(super) const NOT_AUTOSTARTED: &str =
    "(autostart = false: not started until `foster ctl start`)";

/// The longest `STATUS=` text kept for a helper, in bytes (longer text is cut at a character
/// boundary).
pub const MAX_STATUS_TEXT: usize = 512;

/// What the supervisor keeps of one helper.
pub(super) struct Run {
    pub(super) pid: Option<i32>,
    pub(super) identity: Option<Identity>,
    /// The running helper, held by the pidfd `clone` returned with it: its signals go through
    /// that pidfd, which cannot name another process.
    pub(super) process: Option<ProcessRef>,
    pub(super) started: Instant,
    /// Launches so far, failed ones included (the number of the next `launch` event).
    pub(super) attempt: u32,
    /// Processes that got as far as running its program (what `launches` counts).
    pub(super) launched: u32,
    /// Why its latest launch failed before its program ran (a step, a path, an errno), if it
    /// did: a process that ended so gets the one `launch_failed` event, with its status, once
    /// it is reaped; a `start` or `restart` request's reply says it.
    pub(super) failed_launch: Option<String>,
    pub(super) restart: RestartState,
    pub(super) state: HelperState,
    /// The words after the state, when there is more to say (`for db to be ready`).
    pub(super) detail: Option<String>,
    /// Why it is `Stopping`.
    pub(super) stop: Option<StopFor>,
    /// How its process ended while it was stopping.
    pub(super) stopped_with: Option<ExitStatus>,
    /// Its stop grace ran out: the processes left of its tree, which got SIGKILL.
    pub(super) killed: Option<Vec<Identity>>,
    /// The last `STATUS=` text of its current launch.
    pub(super) status_text: Option<String>,
    /// A reload removed it from the configuration: it is stopped and never launched again;
    /// its index may go to a helper a later reload adds, once it is down (`reload.rs`).
    pub(super) retired: bool,
    /// Its new definition, given by a reload while it was stopping: taken once it is down.
    pub(super) next: Option<Box<crate::supervision::config::Helper>>,
    /// The checks of its current launch (readiness, health, watchdog; `supervisor/checks.rs`).
    pub(super) checks: Option<crate::supervision::readiness::LaunchChecks>,
}

impl Run {
    pub(super) fn new() -> Run {
        Run {
            pid: None,
            identity: None,
            process: None,
            started: Instant::now(),
            attempt: 0,
            launched: 0,
            failed_launch: None,
            restart: RestartState::default(),
            state: HelperState::Waiting,
            detail: None,
            stop: None,
            stopped_with: None,
            killed: None,
            status_text: None,
            retired: false,
            next: None,
            checks: None,
        }
    }

    /// Its process, while it has one.
    pub(super) fn running(&self) -> Option<Identity> {
        self.identity.filter(|_| self.pid.is_some())
    }
}

/// Why a helper is being stopped, which says what follows once it is down.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum StopFor {
    /// The supervisor's shutdown: `stopped`.
    Shutdown,
    /// `ctl stop`: `stopped`, until `ctl start`.
    Request,
    /// `ctl restart`: launched again (when its dependencies allow).
    Restart,
    /// A failed check (the words after "because"): the restart rules, as for a failure.
    Failed(String),
    /// A reload removed it from the configuration: `stopped`, for good.
    Removed,
}

impl StopFor {
    /// The words after `stopping`.
    fn detail(&self) -> String {
        match self {
            StopFor::Shutdown => "for the shutdown".to_string(),
            StopFor::Request => "by request".to_string(),
            StopFor::Restart => "to restart".to_string(),
            StopFor::Failed(why) => format!("because {why}"),
            StopFor::Removed => REMOVED.to_string(),
        }
    }
}

/// The `depends_on` graph of a configuration, by helper index.
#[derive(Debug, Clone, Default)]
pub(super) struct Graph {
    /// Each helper's dependencies and their conditions.
    pub(super) deps: Vec<Vec<(usize, Condition)>>,
    /// Each helper's dependents.
    pub(super) dependents: Vec<Vec<usize>>,
    /// Every helper, each after its dependencies (configuration order among equals).
    pub(super) order: Vec<usize>,
}

impl Graph {
    /// The graph of `config`, which [`Config::parse`] checked (names known, no cycle); a name
    /// it does not know is left out, and a cycle falls back to the configuration's order.
    pub(super) fn new(config: &Config) -> Graph {
        Graph::of(config, |_| true)
    }

    /// [`Graph::new`] of the helpers `live` keeps (a reload's retired indices are in no
    /// dependency and not in `order`).
    pub(super) fn of(config: &Config, live: impl Fn(usize) -> bool) -> Graph {
        let n = config.helpers.len();
        let mut g: DiGraph<usize, Condition> = DiGraph::with_capacity(n, 0);
        let nodes: Vec<NodeIndex> = (0..n).map(|i| g.add_node(i)).collect();
        let mut deps = vec![Vec::new(); n];
        let mut dependents = vec![Vec::new(); n];
        for (i, h) in config.helpers.iter().enumerate() {
            if !live(i) {
                continue;
            }
            for (name, c) in &h.depends_on.items {
                let found = (0..n).find(|&d| live(d) && config.helpers[d].name() == name);
                if let Some(d) = found {
                    if !deps[i].iter().any(|(x, _)| *x == d) {
                        deps[i].push((d, *c));
                        dependents[d].push(i);
                        g.add_edge(nodes[d], nodes[i], *c);
                    }
                }
            }
        }
        // petgraph's order puts each node after its dependencies; among helpers free to go,
        // keep the configuration's order (a stable sort by depth).
        let order = match petgraph::algo::toposort(&g, None) {
            Ok(topo) => {
                let mut depth = vec![0usize; n];
                for v in &topo {
                    let i = g[*v];
                    depth[i] = deps[i]
                        .iter()
                        .map(|(d, _)| depth[*d] + 1)
                        .max()
                        .unwrap_or(0);
                }
                let mut order: Vec<usize> = (0..n).filter(|&i| live(i)).collect();
                order.sort_by_key(|i| depth[*i]);
                order
            }
            Err(_) => (0..n).filter(|&i| live(i)).collect(),
        };
        Graph {
            deps,
            dependents,
            order,
        }
    }
}

impl Supervisor {
    /// Puts helper `i` in `state` with `detail`; a change is a `state` event.
    pub(super) fn set_state(&mut self, i: usize, state: HelperState, detail: Option<String>) {
        let r = &mut self.units.helpers[i];
        if r.state == state && r.detail == detail {
            return;
        }
        r.state = state;
        r.detail = detail.clone();
        if state != HelperState::Stopping {
            r.stop = None;
        }
        let helper = self.config.helpers[i].name().to_string();
        let status_text = self.units.helpers[i].status_text.clone();
        self.emit(Event::State {
            helper,
            state,
            detail,
            status_text,
        });
    }

    /// Launches helper `i` if its dependencies allow it now; else it waits (`waiting`, with
    /// what it waits for), and [`Supervisor::settle`] launches it when they do.
    pub(super) fn want_launch(&mut self, i: usize) {
        // One with a process is not launched again: a launch that failed before its exec keeps
        // the state it had until that process is reaped (its end decides what follows).
        if self.units.helpers[i].pid.is_some() {
            return;
        }
        match self.waiting_for(i) {
            None => self.launch(i),
            Some(why) => self.set_state(i, HelperState::Waiting, Some(why)),
        }
    }

    /// Launches helper `i` as [`Supervisor::want_launch`] does, unless its `autostart` is
    /// false: it is then `stopped`, until `foster ctl start` (its dependents wait).
    pub(super) fn autostart(&mut self, i: usize) {
        if self.config.helpers[i].autostart {
            self.want_launch(i);
        } else if self.units.helpers[i].pid.is_none() {
            self.set_state(i, HelperState::Stopped, Some(NOT_AUTOSTARTED.to_string()));
        }
    }

    /// What helper `i` waits for, in the words after `waiting` (`for db to be ready; for
    /// migrate: failed (exit code 1)`), or `None` when every dependency meets its condition.
    pub(super) fn waiting_for(&self, i: usize) -> Option<String> {
        let mut parts = Vec::new();
        for &(d, c) in &self.units.graph.deps[i] {
            let dep = &self.units.helpers[d];
            if c.met_by(dep.state) {
                continue;
            }
            let name = self.config.helpers[d].name();
            parts.push(if c.held_by(dep.state) {
                format!("for {name}: {}", self.held_text(d))
            } else {
                format!("for {name} to be {c}")
            });
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }

    /// Why helper `d`, a dependency, cannot get there by itself: `gave up after 5 restarts`,
    /// `failed (exit code 1)`, `stopped by request`, `completed`.
    fn held_text(&self, d: usize) -> String {
        let r = &self.units.helpers[d];
        let last = self.control.last_exit(self.config.helpers[d].name());
        match r.state {
            HelperState::GaveUp => {
                format!("gave up after {}", restarts_text(r.restart.in_a_row()))
            }
            HelperState::Failed => match last {
                Some(s) => format!("failed ({s})"),
                None => "failed".to_string(),
            },
            s => match &r.detail {
                Some(d) => format!("{s} {d}"),
                None => s.to_string(),
            },
        }
    }

    /// Moves what waits on something on: finishes the stops whose helpers are down, launches
    /// the waiting helpers whose dependencies are met (in dependency order, so a chain of
    /// helpers without readiness checks starts in one turn), and advances the shutdown. Runs
    /// on every turn of the supervisor's loop.
    ///
    /// The entry points of readiness and health checks are [`Supervisor::helper_ready`],
    /// [`Supervisor::helper_health`], [`Supervisor::helper_check_failed`] and
    /// [`Supervisor::set_status_text`]: they change a state, and `settle` does what follows.
    pub(super) fn settle(&mut self) {
        self.finish_stops();
        if self.stage.shutting_down() {
            self.advance_shutdown();
            return;
        }
        for k in 0..self.units.graph.order.len() {
            let i = self.units.graph.order[k];
            if self.units.helpers[i].state == HelperState::Waiting {
                self.want_launch(i);
            }
        }
    }

    /// Helpers whose stop is over (their process ended and their tree is gone; after their
    /// grace, every process SIGKILLed has ended): what their stop was for follows.
    fn finish_stops(&mut self) {
        let pending: Vec<usize> = (0..self.units.helpers.len())
            .filter(|&i| {
                let r = &self.units.helpers[i];
                r.state == HelperState::Stopping && r.pid.is_none()
            })
            .collect();
        if pending.is_empty() {
            return;
        }
        let live = self.known.registry.live_helpers();
        for i in pending {
            let down = match &self.units.helpers[i].killed {
                // A process SIGKILLed may end after its helper (a child still in the kernel,
                // its reap to come): down once the last of them has ended. Those cannot
                // outlive it; anything of the tree they did not include is the orphan policy's.
                Some(ids) => ids.iter().all(|id| self.ended(id)),
                None => !live.contains(self.config.helpers[i].name()),
            };
            if down {
                self.stop_done(i);
            }
        }
    }

    /// Whether `id` has ended: the registry saw it end, or `/proc` no longer shows it (a zombie
    /// has not: it ends when it is reaped).
    fn ended(&self, id: &Identity) -> bool {
        !self.known.registry.get(id).is_some_and(|r| r.alive)
            || Identity::of(id.pid).map_or(true, |now| now != *id)
    }

    /// Helper `i` is down after a stop.
    fn stop_done(&mut self, i: usize) {
        self.timers.cancel(|t| *t == Timer::StopGrace(i));
        // A definition a reload gave while it was stopping applies to what follows.
        self.take_next_definition(i);
        let r = &mut self.units.helpers[i];
        r.killed = None;
        let status = r.stopped_with.take();
        let stop = r.stop.take().unwrap_or(StopFor::Shutdown);
        let ran_for = r.started.elapsed();
        match stop {
            StopFor::Shutdown => {
                self.set_state(i, HelperState::Stopped, Some("for the shutdown".into()))
            }
            StopFor::Request => self.set_state(i, HelperState::Stopped, Some("by request".into())),
            StopFor::Removed => self.set_state(i, HelperState::Stopped, Some(REMOVED.into())),
            _ if self.stage.shutting_down() => {
                self.set_state(i, HelperState::Stopped, Some("for the shutdown".into()))
            }
            StopFor::Restart => {
                self.units.helpers[i].restart = RestartState::default();
                let attempt = self.units.helpers[i].attempt + 1;
                self.emit(Event::Restart {
                    helper: self.config.helpers[i].name().to_string(),
                    attempt,
                    delay_ms: 0,
                });
                self.want_launch(i);
            }
            StopFor::Failed(_) => {
                // A check failed: a failure whatever the status the stop signal left.
                let status = status
                    .filter(|s| !s.success())
                    .unwrap_or(ExitStatus::Exited { code: 1 });
                self.restart_rules(i, status, ran_for);
            }
        }
    }

    /// Stops helper `i` (its stop signal now; SIGKILL to what is left of its tree when its
    /// stop grace runs out), for `why`. Returns false, doing nothing, when it has no process.
    pub(super) fn stop_helper(&mut self, i: usize, why: StopFor) -> bool {
        let Some(id) = self.units.helpers[i].running() else {
            return false;
        };
        let cfg = &self.config.helpers[i];
        let (sig, grace, name) = (
            cfg.stop_signal.number(),
            cfg.stop_grace.0,
            cfg.name().to_string(),
        );
        let reason = match why {
            StopFor::Shutdown | StopFor::Removed => SignalReason::Stop,
            StopFor::Failed(_) => SignalReason::CheckFailed,
            StopFor::Request | StopFor::Restart => SignalReason::Control,
        };
        self.signal(id, Some(name), sig, reason, Some(grace));
        self.timers.cancel(|t| *t == Timer::StopGrace(i));
        self.timers.at(grace, Timer::StopGrace(i));
        let detail = why.detail();
        self.units.helpers[i].killed = None;
        self.set_state(i, HelperState::Stopping, Some(detail));
        self.units.helpers[i].stop = Some(why);
        true
    }

    /// Helper `i`'s stop grace ran out: SIGKILL to its process, if it still runs, and to every
    /// process left of its tree.
    pub(super) fn stop_grace_over(&mut self, i: usize) {
        if self.units.helpers[i].state != HelperState::Stopping {
            return;
        }
        let name = self.config.helpers[i].name().to_string();
        self.rescan();
        let mut tree = self.known.registry.helper_tree(&name);
        if let Some(id) = self.units.helpers[i].running()
            && !tree.contains(&id)
        {
            tree.push(id);
        }
        for &id in &tree {
            self.stage.mark_forced();
            self.kill_after_grace(id, Some(name.clone()));
        }
        self.units.helpers[i].killed = Some(tree);
    }

    /// The process of helper `i` ended with `status` after a run of `ran_for` (or its launch
    /// failed before any process existed).
    pub(super) fn helper_ended(&mut self, i: usize, status: ExitStatus, ran_for: Duration) {
        if self.units.helpers[i].state == HelperState::Stopping {
            // The rest follows once its tree is down (settle).
            self.units.helpers[i].stopped_with = Some(status);
            return;
        }
        if self.stage.shutting_down() {
            let state = if status.success() {
                HelperState::Completed
            } else {
                HelperState::Failed
            };
            self.set_state(i, state, None);
            return;
        }
        self.restart_rules(i, status, ran_for);
    }

    /// What helper `i`'s restart rules say after it ended with `status`: launched again after
    /// its backoff, completed or failed, or given up on.
    fn restart_rules(&mut self, i: usize, status: ExitStatus, ran_for: Duration) {
        let name = self.config.helpers[i].name().to_string();
        let cfg = &self.config.helpers[i];
        let decision =
            self.units.helpers[i]
                .restart
                .on_exit(cfg.restart, &cfg.backoff, status, ran_for);
        match decision {
            // The decision first: the exit's line on standard error takes it in.
            Decision::Restart { delay, attempt } => {
                self.timers.at(delay, Timer::Restart(i));
                self.emit(Event::Restart {
                    helper: name,
                    attempt,
                    delay_ms: delay.as_millis() as u64,
                });
                self.set_state(i, HelperState::Backoff, None);
            }
            Decision::Done if status.success() => self.set_state(i, HelperState::Completed, None),
            Decision::Done => self.set_state(i, HelperState::Failed, Some(format!("({status})"))),
            Decision::GiveUp { restarts } => {
                self.emit(Event::GiveUp {
                    helper: name,
                    restarts,
                });
                self.set_state(
                    i,
                    HelperState::GaveUp,
                    Some(format!("after {}", restarts_text(restarts))),
                );
            }
        }
    }

    /// The shutdown's next steps: each helper still up whose dependents are all down gets its
    /// stop signal (independent helpers at once); once every helper is down, what is left of
    /// the tree (adopted processes) gets the longest grace of any generation, then the final
    /// sweep (at once when a grace already ran out).
    fn advance_shutdown(&mut self) {
        let Stage::Stopping(shutdown) = self.stage else {
            return;
        };
        for k in (0..self.units.graph.order.len()).rev() {
            let i = self.units.graph.order[k];
            if self.units.helpers[i].state.is_up()
                && self.units.graph.dependents[i]
                    .iter()
                    .all(|&d| self.is_down(d))
            {
                self.stop_helper(i, StopFor::Shutdown);
            }
        }
        if !(0..self.units.helpers.len()).all(|i| self.is_down(i)) || !super::has_children() {
            return;
        }
        if shutdown.forced {
            self.sweep();
        } else if !self.timers.is_armed(Timer::StopGrace(usize::MAX)) {
            let grace = self.adopted_grace();
            if grace.is_zero() {
                self.sweep();
            } else {
                self.timers.at(grace, Timer::StopGrace(usize::MAX));
            }
        }
    }

    /// Whether helper `i` is down: no process, and not stopping.
    fn is_down(&self, i: usize) -> bool {
        let s = self.units.helpers[i].state;
        !s.is_up() && s != HelperState::Stopping
    }

    /// Helper `i`'s readiness check passed for its process `id`: `starting` → `ready`, with
    /// `detail` (`after 1.2s (notify)`). The helpers waiting for it to be ready are launched on
    /// the loop's next turn.
    pub(super) fn helper_ready(&mut self, i: usize, id: Identity, detail: Option<String>) {
        if self.units.helpers[i].running() == Some(id)
            && self.units.helpers[i].state == HelperState::Starting
        {
            self.set_state(i, HelperState::Ready, detail);
        }
    }

    /// Helper `i`'s process `id` passed (`healthy`) or failed a health check that does not end
    /// it yet: `unhealthy`, or back to `ready` (`running` without a readiness check).
    pub(super) fn helper_health(
        &mut self,
        i: usize,
        id: Identity,
        healthy: bool,
        why: Option<String>,
    ) {
        let r = &self.units.helpers[i];
        if r.running() != Some(id) {
            return;
        }
        match (r.state, healthy) {
            (HelperState::Running | HelperState::Ready, false) => {
                self.set_state(i, HelperState::Unhealthy, why)
            }
            (HelperState::Unhealthy, true) => {
                let back = if self.config.helpers[i].has_readiness() {
                    HelperState::Ready
                } else {
                    HelperState::Running
                };
                self.set_state(i, back, None)
            }
            _ => {}
        }
    }

    /// Helper `i`'s process `id` failed a check for good (`why`, the words after "because":
    /// `its readiness check timed out after 5s`): it is stopped (stop signal, grace, SIGKILL of
    /// its tree), then its restart rules decide, as for a failure.
    pub(super) fn helper_check_failed(&mut self, i: usize, id: Identity, why: String) {
        if self.stage.shutting_down()
            || self.units.helpers[i].running() != Some(id)
            || self.units.helpers[i].state == HelperState::Stopping
        {
            return;
        }
        self.stop_helper(i, StopFor::Failed(why));
    }

    /// The `STATUS=` text helper `i`'s process `id` sent (cut to [`MAX_STATUS_TEXT`] bytes);
    /// shown with its state until its next launch.
    pub(super) fn set_status_text(&mut self, i: usize, id: Identity, text: &str) {
        if self.units.helpers[i].running() != Some(id) {
            return;
        }
        let mut end = text.len().min(MAX_STATUS_TEXT);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        self.units.helpers[i].status_text = Some(text[..end].to_string());
    }
}

/// `1 restart`, `5 restarts`.
fn restarts_text(n: u32) -> String {
    format!("{n} restart{}", if n == 1 { "" } else { "s" })
}

/// What failed in a launch of `helper` that never ran its program, as the `launch_failed` event
/// says it: the step, what it was applied to (the directory of `chdir`, the user of `setuid`,
/// the program of `exec`), and the errno by its name and its words (`chdir to /srv/app
/// failed: ENOENT: No such file or directory`). No pid: the event has the process's own, in
/// the reader's namespace.
pub(super) fn launch_failure(
    e: &crate::gate::spawner::SpawnError,
    helper: &crate::supervision::config::Helper,
) -> String {
    use crate::gate::spawner::SpawnError;
    let errno = |n: i32| {
        let e = nix::errno::Errno::from_raw(n);
        format!("{e:?}: {}", e.desc())
    };
    match e {
        SpawnError::Setup { what, errno: n, .. } => {
            let on = match *what {
                "chdir" => helper.cwd.as_ref().map(|p| p.display().to_string()),
                "setuid" => helper.user.clone(),
                "setgid" => helper.group.clone().or_else(|| helper.user.clone()),
                _ => None,
            };
            match on {
                Some(on) => format!("{what} to {on} failed: {}", errno(*n)),
                None => format!("{what} failed: {}", errno(*n)),
            }
        }
        SpawnError::Exec { errno: n, .. } => {
            let e = nix::errno::Errno::from_raw(*n);
            format!(
                "exec failed: {e:?}: {}: {}",
                helper.command.program(),
                e.desc()
            )
        }
        SpawnError::Gate { stop, .. } => format!("stopped by the gate before its exec: {stop}"),
        SpawnError::Target(t) => match t.exec_errno() {
            Some(n) => format!("exec failed: {:?}: {t}", nix::errno::Errno::from_raw(n)),
            None => t.to_string(),
        },
        e => e.to_string(),
    }
}

/// A helper's state as the words after "it is" or "it was", with its detail: `in backoff`,
/// `given up on after 2 restarts`, `failed (exit code 127)`.
pub(super) fn state_phrase(state: HelperState, detail: Option<&str>) -> String {
    let words = match state {
        HelperState::Backoff => "in backoff, to be launched again after its restart delay",
        HelperState::GaveUp => "given up on",
        s => s.text(),
    };
    match detail {
        Some(d) => format!("{words} {d}"),
        None => words.to_string(),
    }
}
