//! `foster run`'s supervisor: it launches every helper through the [`Spawner`] thread (the
//! gate), routes the [`Reaper`]'s statuses to each helper's restart state machine, learns
//! what changed in its [`Subtree`] so that [`Registry`] can classify every adoption, applies
//! each adopted generation's orphan policy, and owns the one idempotent shutdown.
//!
//! - [`start`]: [`run`] and its options: what is done before any thread exists.
//! - [`event_loop`]: the loop and what it waits on; [`stage`]: the shutdown's phase.
//! - [`lifecycle`]: each helper's run, stops and dependencies; [`reload`]: a new config.
//! - [`checks`]: readiness and liveness; [`probes`]: their exec and connect probes.
//! - [`notify`]: the notify sockets and their datagrams; [`timers`]: what each timer is for.
//! - [`watch`]: the parents' pidfds; [`births`]: the kernel's announcements of the tree.
//! - [`control`]: the socket's requests; [`signals`]: each signal; [`reports`]: the lines.
//!
//! [`run`] is called on the main thread before any other thread exists, so every thread
//! inherits the blocked signals. Exit statuses: [`EXIT_OK`] and those after it.

mod births;
mod checks;
mod control;
mod event_loop;
mod lifecycle;
mod notify;
mod probes;
mod reload;
mod reports;
pub mod signals;
mod stage;
mod start;
mod timers;
mod watch;

pub use stage::{EXIT_CONFIG, EXIT_ERROR, EXIT_FORCED, EXIT_HELPER_FAILED, EXIT_OK};
pub use start::{Options, SocketOption, run};

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::io;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use tracing::{debug, info, warn};

use self::reports::Reports;
use self::stage::Stage;
use self::timers::{Timer, Timers};

use crate::gate::adoption::{self, Registry};
use crate::gate::spawner::{
    CredentialError, LaunchSpec, Launched, SpawnError, Spawner, group_id, user_id,
};
use crate::process::identity::{Identity, ProcessRef};
use crate::process::reaper::{ExitStatus, Reaper, Routed};
use crate::process::signal::SignalFd;
use crate::process::signal::name as signal_name;
use crate::process::state::HelperState;
use crate::process::tree::{ScanOptions, Subtree};
use crate::supervision::config::{Config, GenerationPolicy, Helper};
use crate::supervision::event::{Event, EventLog, Record, SignalReason};

/// The first delay before the tree is read again while a process of it is caught in the middle
/// of an `execve` (an exec lasts well under a millisecond, unless its program's pages are slow to
/// read); it doubles at each read that still finds one, up to [`EXEC_WAIT_MAX`].
const EXEC_WAIT_MIN: Duration = Duration::from_millis(5);
/// The longest delay between two reads while a process is caught in an `execve`.
const EXEC_WAIT_MAX: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
/// Whose status a reaped pid is.
enum Owner {
    /// Helper `i`'s process.
    Helper(usize),
    /// An exec probe of helper `i`'s launch (its checks' launch number).
    Probe(usize, u32),
}

/// Who this supervision is: foster's own process, whether it is contained, and where its
/// configuration came from.
struct Setup {
    me: Identity,
    contained: bool,
    /// The configuration file, read again by a reload (none: it was standard input).
    config_path: Option<PathBuf>,
    /// The running foster binary (`FOSTER_EXE`), looked up once.
    exe: Option<OsString>,
}

/// The processes' two ends: the launcher thread and the one reaper.
struct Procs {
    reaper: Reaper<Owner>,
    spawner: Spawner,
}

/// What foster knows of its tree, and how it learns what changed.
struct Known {
    registry: Registry,
    /// foster's subtree, read again (only what changed) when an event says it changed.
    tree: Subtree,
    /// A pidfd for each parent of the tree below foster's children: their ends move children
    /// without a SIGCHLD to foster.
    watch: watch::ParentWatch,
    /// The kernel's announcements of births and ends in the tree, where it grants them.
    births: Option<births::Births>,
    /// When to read again while a process of the tree is caught in an `execve`.
    exec_wait: Duration,
}

/// What a launch prepared before its fork ([`Supervisor::prepare_launch`]).
struct PreparedLaunch {
    helper: Helper,
    spec: LaunchSpec,
    pending: checks::Pending,
}

/// A helper's process as the spawner created it ([`Supervisor::launched`]).
struct Born {
    pid: i32,
    pidfd: Option<std::os::fd::OwnedFd>,
    /// Its identity as its gate read it (a launch that exec'd).
    read_by_gate: Option<Identity>,
    /// Why it stopped before its exec, if it did.
    failed: Option<String>,
}

/// The helpers' runs, in the configuration's order, and the `depends_on` graph.
struct Units {
    helpers: Vec<lifecycle::Run>,
    graph: lifecycle::Graph,
}

/// The processes under a grace: the adopted ones and what a grace already SIGKILLed.
#[derive(Default)]
struct Orphans {
    /// Adopted children under an orphan policy: pid → identity.
    adopted: HashMap<i32, Identity>,
    /// What a grace already SIGKILLed: a helper's stop grace, then the final sweep, and the
    /// sweeps on the reaps that follow do not signal, or report, the same process again.
    killed: HashSet<Identity>,
}

/// The signals foster takes in.
struct SignalIn {
    /// Every signal of [`signals::handled`], read in the loop.
    signal_fd: SignalFd,
    /// The ignored signals already logged.
    ignored_logged: signals::Logged,
    /// The signal that reloads the configuration (`--reload-signal`), if any.
    reload_signal: Option<i32>,
}

/// What comes from the helpers besides their ends: their output, their checks' reports.
struct HelperIo {
    /// The helpers' output: pipes, kept lines, relay (taken at the end, to be finished).
    output: Option<crate::supervision::output::Capture>,
    /// The notify sockets and the reports of the checks' tasks.
    checks_io: notify::ChecksIo,
}

struct Supervisor {
    config: Config,
    setup: Setup,
    procs: Procs,
    known: Known,
    units: Units,
    orphans: Orphans,
    timers: Timers,
    stage: Stage,
    /// Where events go: the lines for people, the events log.
    reports: Reports,
    signal_in: SignalIn,
    control: control::Control,
    io: HelperIo,
}

impl Supervisor {
    fn new(
        config: Config,
        contained: bool,
        events: Option<EventLog>,
        output: crate::supervision::output::Capture,
        spawner: Spawner,
    ) -> io::Result<Supervisor> {
        let me = Identity::current().map_err(io::Error::other)?;
        let reaper = Reaper::new()?;
        let signal_fd = SignalFd::new(signals::handled())?;
        let helpers = config
            .helpers
            .iter()
            .map(|_| lifecycle::Run::new())
            .collect();
        let graph = lifecycle::Graph::new(&config);
        let tree = Subtree::new(
            me.pid,
            adoption::ENV_PREFIX.as_bytes(),
            ScanOptions::default(),
        )
        .map_err(io::Error::other)?;
        let known = Known {
            registry: Registry::new(me),
            tree,
            watch: watch::ParentWatch::new()?,
            births: None,
            exec_wait: EXEC_WAIT_MIN,
        };
        Ok(Supervisor {
            config,
            setup: Setup {
                me,
                contained,
                config_path: None,
                exe: std::env::current_exe().ok().map(PathBuf::into_os_string),
            },
            procs: Procs { reaper, spawner },
            known,
            units: Units { helpers, graph },
            orphans: Orphans::default(),
            timers: Timers::default(),
            stage: Stage::Supervising,
            reports: Reports::new(events, contained),
            signal_in: SignalIn {
                signal_fd,
                ignored_logged: signals::Logged::default(),
                reload_signal: None,
            },
            control: control::Control::new(None, None),
            io: HelperIo {
                output: Some(output),
                checks_io: notify::ChecksIo::new(),
            },
        })
    }

    fn emit(&mut self, event: Event) {
        let record = Record::now(event);
        let outer_pids = self.reports.write(&record);
        (self.control).set_events_log_lost(self.reports.events_lost_total);
        let history = self.keeps_history(&record.event);
        self.control.on_event(&record, &outer_pids, history);
    }

    /// Writes a helper's exit that the narration holds for the decision on it: called once
    /// what woke the loop has been handled, so no decision is still to come.
    fn flush_narration(&mut self) {
        if let Some(line) = self.reports.narration.flush() {
            crate::base::logging::write_stderr(&line);
        }
    }

    /// A report of the output's reading thread.
    fn on_output_report(&mut self, r: crate::supervision::output::Report) {
        match r {
            crate::supervision::output::Report::Dropped { helper, lines } => {
                self.emit(Event::OutputDropped { helper, lines })
            }
        }
    }

    /// One signal of [`signals::handled`], as the table in `docs/run.md` says.
    fn on_signal(&mut self, sig: i32, from_pid: u32, from_uid: u32) {
        if !self.setup.contained && signals::parent_died(sig) {
            info!("{}: foster's parent died; shutting down", signal_name(sig));
            self.begin_shutdown(Some(sig));
            return;
        }
        if self.signal_in.reload_signal == Some(sig) {
            info!(
                "{} from pid {from_pid} (uid {from_uid}): reloading the configuration",
                signal_name(sig)
            );
            // The outcome is the reload's event, on standard error as every event.
            let _ = self.reload(&signal_name(sig));
            return;
        }
        match signals::action(sig) {
            signals::Action::Shutdown => self.begin_shutdown(Some(sig)),
            signals::Action::ReopenLogs => {
                self.reopen_logs(&signal_name(sig), None);
            }
            signals::Action::Ignore => {
                if self.signal_in.ignored_logged.first(sig) {
                    warn!(
                        "ignored {} from pid {from_pid} (uid {from_uid}): foster run gives it no \
                         meaning (further ones are logged at debug level)",
                        signal_name(sig)
                    );
                } else {
                    debug!("ignored {} from pid {from_pid}", signal_name(sig));
                }
            }
        }
    }

    /// Closes and opens again every log file foster writes, at their paths, so that after an
    /// outside rotation (logrotate's `create` or `nocreate`) they go to the new files: the
    /// events log here, the helpers' log files on the output's thread, which logs each result
    /// and sends them on `files` when given (it never makes this loop wait for a disk). `by`
    /// says who asked (`SIGUSR1`). Returns the events log's result, when there is one.
    fn reopen_logs(
        &mut self,
        by: &str,
        files: Option<tokio::sync::oneshot::Sender<Vec<crate::supervision::output::Reopened>>>,
    ) -> Option<io::Result<PathBuf>> {
        if let Some(o) = &self.io.output {
            o.reopen(files);
        }
        let log = self.reports.events.as_mut()?;
        Some(match log.reopen() {
            Ok(()) => {
                info!("{by}: reopened the events log {}", log.path().display());
                Ok(log.path().to_path_buf())
            }
            Err(e) => {
                warn!("{by}: cannot reopen the events log: {e}");
                Err(e)
            }
        })
    }

    /// The exit status once nothing is left to supervise: no helper has a process, is
    /// stopping or waits for its restart delay (nor, while supervising, was stopped by request:
    /// it may be started again), and no process of the tree is left. Helpers still waiting for a
    /// dependency then wait for one that cannot get there by itself: foster ends (status 3).
    fn finished(&mut self) -> Option<i32> {
        let supervising = !self.stage.shutting_down();
        let any_active = self.units.helpers.iter().any(|h| {
            h.pid.is_some()
                || h.state.is_up()
                || matches!(h.state, HelperState::Stopping | HelperState::Backoff)
                || (supervising && h.state == HelperState::Stopped && !h.retired)
        });
        if any_active {
            return None;
        }
        if has_children() {
            if supervising {
                // Every helper is done; what remains is adopted: end it the orderly way.
                self.begin_shutdown(None);
            }
            return None;
        }
        let helpers = &self.units.helpers;
        Some(self.stage.exit_status(|| {
            helpers
                .iter()
                .all(|h| h.retired || h.state == HelperState::Completed)
        }))
    }

    fn launch(&mut self, i: usize) {
        match self.prepare_launch(i) {
            Ok(p) => {
                let outcome = self.procs.spawner.launch(p.spec);
                self.launched(i, p.helper, p.pending, outcome);
            }
            Err(e) => self.launch_error(i, e),
        }
    }

    /// Launches the helpers `order` lists, in one request to the spawner: each is prepared
    /// first, then their outcomes are taken in order as the spawner thread sends them, so
    /// that it forks the next one while this thread registers the last. Stops at the first
    /// that cannot be prepared (it fails as [`Supervisor::launch`] would, after the others):
    /// returns how many of `order` it handled.
    pub(super) fn launch_batch(&mut self, order: &[usize]) -> usize {
        let mut batch = Vec::with_capacity(order.len());
        let mut failed = None;
        for &i in order {
            match self.prepare_launch(i) {
                Ok(p) => batch.push((i, p)),
                Err(e) => {
                    failed = Some((i, e));
                    break;
                }
            }
        }
        let handled = batch.len() + usize::from(failed.is_some());
        let (meta, specs): (Vec<_>, Vec<_>) = batch
            .into_iter()
            .map(|(i, p)| ((i, p.helper, p.pending), p.spec))
            .unzip();
        let outcomes = self.procs.spawner.launch_all(specs);
        for ((i, helper, pending), outcome) in meta.into_iter().zip(outcomes) {
            self.launched(i, helper, pending, outcome);
        }
        if let Some((i, e)) = failed {
            self.launch_error(i, e);
        }
        handled
    }

    /// What helper `i`'s launch needs before the fork: its spec, its checks' setup, its
    /// output's pipes.
    fn prepare_launch(&mut self, i: usize) -> Result<PreparedLaunch, SpawnError> {
        let helper = self.config.helpers[i].clone();
        let mut spec = self.spec(&helper).map_err(SpawnError::Credentials)?;
        let pending = self
            .prepare_checks(i, &mut spec)
            .map_err(|e| SpawnError::Io("cannot prepare its readiness check".into(), e))?;
        if let Some(output) = &self.io.output {
            (spec.stdout, spec.stderr) = output
                .stdio(i)
                .map_err(|e| SpawnError::Io("cannot copy its output pipes".into(), e))?;
        }
        Ok(PreparedLaunch {
            helper,
            spec,
            pending,
        })
    }

    /// Helper `i`'s launch's outcome: its process registered with the reaper (a child the
    /// gate or exec stopped too: its status is the helper's exit, 127, 126 or the gate's,
    /// routed like any other), then what follows, or the failure.
    fn launched(
        &mut self,
        i: usize,
        helper: Helper,
        pending: checks::Pending,
        outcome: Result<Launched, SpawnError>,
    ) {
        let mut failed: Option<String> = None;
        let mut pidfd = None;
        let mut read_by_gate = None;
        let registered = self
            .procs
            .reaper
            .launch(Owner::Helper(i), || match outcome {
                Ok(l) => {
                    pidfd = Some(l.pidfd);
                    read_by_gate = l.identity;
                    Ok(l.pid)
                }
                Err(e) => match e.pid() {
                    Some(pid) => {
                        failed = Some(lifecycle::launch_failure(&e, &helper));
                        Ok(pid)
                    }
                    None => Err(e),
                },
            });
        match registered {
            Ok(pid) => {
                let born = Born {
                    pid,
                    pidfd,
                    read_by_gate,
                    failed,
                };
                let name = helper.name().to_string();
                self.born(i, &helper, name, born, pending);
            }
            Err(e) => self.launch_error(i, e),
        }
    }

    /// What follows the creation of helper `i`'s process: its run, its registrations, and
    /// (when it exec'd) its `launch` event, its state and its checks.
    fn born(&mut self, i: usize, helper: &Helper, name: String, b: Born, pending: checks::Pending) {
        let (pid, failed) = (b.pid, b.failed);
        let launched = failed.is_none();
        // As its gate read it, else read while the pid is foster's unreaped child.
        let identity = b
            .read_by_gate
            .unwrap_or_else(|| Identity::of(pid).unwrap_or(Identity { pid, start_time: 0 }));
        let h = &mut self.units.helpers[i];
        h.pid = Some(pid);
        h.identity = Some(identity);
        h.process = b.pidfd.map(|fd| ProcessRef::pinned(identity, fd));
        h.started = Instant::now();
        h.attempt += 1;
        h.launched += u32::from(launched);
        h.status_text = None;
        let attempt = h.attempt;
        // A process that failed before its exec is reaped at once: its one event,
        // `launch_failed` with its status, is written then (`helper_exited`).
        h.failed_launch = failed;
        self.known
            .registry
            .expect_launch(identity, &name, helper.subreaper);
        // Its lineage is known: its environment need not be read (it is, besides, in
        // the middle of its exec now).
        self.known.tree.known(identity);
        // Contained: its outer pid, read once, through the pidfd of its launch.
        let outer = match (&mut self.reports.outer, &h.process) {
            (Some(o), Some(p)) => o.learn(p),
            (Some(o), None) => o.learn(&ProcessRef::unpinned(identity)),
            (None, _) => None,
        };
        if !launched {
            return;
        }
        if let Some(o) = &self.io.output {
            o.output().launched(i, pid, outer);
        }
        self.emit(Event::Launch {
            helper: name,
            identity,
            attempt,
        });
        let state = if helper.has_readiness() {
            HelperState::Starting
        } else {
            HelperState::Running
        };
        self.set_state(i, state, None);
        self.start_checks(i, pending);
    }

    /// A launch of helper `i` that failed before any process of it was created. When the
    /// failure is the helper's (its program not found or not executable, its user unknown:
    /// [`SpawnError::status_without_child`]), it counts as an exit with the status its process
    /// would have had, 127 for a program not found as in a shell, and goes through the restart
    /// rules like any exit (ending in `give_up` when it keeps failing). When it is foster's
    /// own (the spawner thread gone, `clone` failing), the helper ends there, unrestarted.
    fn launch_error(&mut self, i: usize, e: SpawnError) {
        let helper = self.config.helpers[i].name().to_string();
        let Some(code) = e.status_without_child() else {
            let error = e.to_string();
            self.emit(Event::LaunchFailed {
                helper,
                identity: None,
                error: error.clone(),
                status: None,
            });
            self.set_state(
                i,
                HelperState::Failed,
                Some(format!("(foster could not launch it: {error})")),
            );
            return;
        };
        let error = lifecycle::launch_failure(&e, &self.config.helpers[i]);
        let status = ExitStatus::Exited { code };
        let h = &mut self.units.helpers[i];
        h.attempt += 1;
        h.started = Instant::now();
        h.failed_launch = Some(error.clone());
        self.emit(Event::LaunchFailed {
            helper,
            identity: None,
            error,
            status: Some(status),
        });
        self.helper_ended(i, status, Duration::ZERO);
    }

    fn spec(&self, h: &Helper) -> Result<LaunchSpec, CredentialError> {
        // Its env files, read now (never between fork and exec), then `env` over them. A file
        // that cannot be taken fails the launch as a credential does (status 125).
        let mut env: Vec<(OsString, Option<OsString>)> = Vec::new();
        for path in &h.env_file {
            let vars = crate::supervision::config::envfile::read(path)
                .map_err(|e| CredentialError::Refused(e.to_string()))?;
            env.extend(vars.into_iter().map(|(k, v)| (k.into(), Some(v.into()))));
        }
        env.extend(
            h.env
                .iter()
                .map(|(k, v)| (OsString::from(k), Some(OsString::from(v)))),
        );
        env.push((
            adoption::ENV_SUPERVISOR.into(),
            Some(self.setup.me.to_string().into()),
        ));
        env.push((adoption::ENV_HELPER.into(), Some(h.name().into())));
        // The running foster binary, for helpers that call `foster exec` or a nested `foster run`.
        if let Some(exe) = &self.setup.exe {
            env.push(("FOSTER_EXE".into(), Some(exe.clone())));
        }
        // Names through the user database, as `foster run --check` reads them; the spawner
        // thread resolves the ids into credentials (the user's groups) before its fork.
        let uid = h.user.as_deref().map(user_id).transpose()?;
        let gid = h.group.as_deref().map(group_id).transpose()?;
        let mut spec = LaunchSpec::new(h.command.program(), h.command.args(), h.policy_chain());
        spec.env = env;
        spec.cwd = h.cwd.clone();
        spec.uid = uid;
        spec.gid = gid;
        // What foster blocks and what Rust's runtime ignores (SIGPIPE) are foster's own: the
        // helper gets the mask and dispositions foster was started with (the spawner's
        // default, ExecSignals::inherited), as every other launch path does.
        Ok(spec)
    }

    fn on_sigchld(&mut self) {
        let mut helper_ended = false;
        // A probe's end, as a helper's, is a read of the tree: what it left behind (a daemon,
        // a child in its group) is foster's now, and foster may not have heard of its birth
        // before the probe was reaped (its announcement still queued, or none).
        let mut probe_ended = false;
        let mut unknown_orphan = false;
        // An adopted orphan that had children leaves them to be adopted in turn (by foster,
        // the nearest living subreaper): read the subtree now, as for a helper's death.
        let mut parent_ended = false;
        for routed in self.procs.reaper.reap() {
            match routed {
                Routed::Owned {
                    owner: Owner::Helper(i),
                    reaped,
                } => {
                    helper_ended = true;
                    self.helper_exited(i, reaped.status);
                }
                Routed::Owned {
                    owner: Owner::Probe(i, launch),
                    reaped,
                } => {
                    probe_ended = true;
                    self.probe_exited(i, launch, reaped.pid, reaped.status);
                }
                Routed::Orphan(r) => {
                    let rec = self.known.registry.reaped(r.pid);
                    let identity = self
                        .orphans
                        .adopted
                        .remove(&r.pid)
                        .or(rec.as_ref().map(|x| x.identity));
                    unknown_orphan |= rec.is_none();
                    if let Some(id) = identity {
                        self.orphans.killed.remove(&id);
                    }
                    parent_ended |= identity
                        .is_some_and(|id| !self.known.tree.snapshot().children(&id).is_empty());
                    self.emit(Event::Exit {
                        pid: r.pid,
                        identity,
                        helper: rec.as_ref().and_then(|x| x.helper.clone()),
                        generation: rec.as_ref().map(|x| x.generation),
                        status: r.status,
                    });
                }
            }
        }
        if helper_ended || probe_ended || parent_ended {
            self.rescan();
        } else if unknown_orphan && !self.timers.is_armed(Timer::Scan) {
            // A burst of exits foster never saw: one deferred scan for the whole burst.
            self.timers.at(Duration::from_millis(50), Timer::Scan);
        }
        if self.stage.sweeping() && has_children() {
            self.sweep();
        }
    }

    fn helper_exited(&mut self, i: usize, status: ExitStatus) {
        let name = self.config.helpers[i].name().to_string();
        let h = &mut self.units.helpers[i];
        let pid = h.pid.take().unwrap_or(0);
        let identity = h.identity;
        h.process = None;
        // What its process said last is not said of a helper that has none.
        h.status_text = None;
        let ran_for = h.started.elapsed();
        self.known.registry.reaped(pid);
        if let Some(id) = identity {
            self.orphans.killed.remove(&id);
        }
        self.end_checks(i);
        let event = match self.units.helpers[i].failed_launch.clone() {
            // Its launch failed before its exec: the one event of it, with how it ended.
            Some(error) => Event::LaunchFailed {
                helper: name,
                identity,
                error,
                status: Some(status),
            },
            None => Event::Exit {
                pid,
                identity,
                helper: Some(name),
                generation: Some(1),
                status,
            },
        };
        self.emit(event);
        self.helper_ended(i, status, ran_for);
    }

    fn rescan(&mut self) {
        let changes = match self.known.tree.update() {
            Ok((changes, stats)) => {
                debug!(?stats, changes = changes.len(), "read foster's subtree");
                changes
            }
            Err(e) => {
                warn!("cannot read foster's subtree in /proc: {e}");
                return;
            }
        };
        if let Some(b) = &mut self.known.births {
            b.read(
                self.known.tree.snapshot(),
                &changes,
                self.reports.outer.as_mut(),
            );
        }
        self.watch_parents();
        let adoptions = self
            .known
            .registry
            .observe(self.known.tree.snapshot(), &changes);
        self.adopted_now(adoptions);
    }

    /// Makes the parents' watch follow the tree (`watch.rs`), before anything else can end.
    fn watch_parents(&mut self) {
        let synced = self
            .known
            .watch
            .sync(self.known.tree.snapshot(), self.setup.me);
        if synced != watch::Synced::default() {
            debug!(
                ?synced,
                watched = self.known.watch.len(),
                "parents of the tree watched"
            );
        }
        if synced.gone > 0 {
            // A parent ended after the read: read again, on the loop's next turn.
            self.timers.at(Duration::ZERO, Timer::Scan);
        }
    }

    /// The adoptions a read found: each one's event, and its generation's policy for those
    /// that came to foster.
    fn adopted_now(&mut self, adoptions: Vec<adoption::Adoption>) {
        // A process caught in the middle of an execve has no environment to read yet, and its
        // adoption waits for it: read again shortly (then less and less often) until it is out.
        if self.known.tree.pending_environ() > 0 || self.known.registry.waiting() > 0 {
            if !self.timers.is_armed(Timer::Scan) {
                self.timers.at(self.known.exec_wait, Timer::Scan);
                self.known.exec_wait = (self.known.exec_wait * 2).min(EXEC_WAIT_MAX);
            }
        } else {
            self.known.exec_wait = EXEC_WAIT_MIN;
        }
        for a in adoptions {
            self.emit(Event::Reparented {
                identity: a.identity,
                helper: a.helper.clone(),
                generation: Some(a.generation),
                from: a.from,
                to: a.to,
                expected: Some(a.expected),
                classification: a.classification,
            });
            if a.to == self.setup.me && !self.orphans.adopted.contains_key(&a.identity.pid) {
                let policy = self.policy_for(a.helper.as_deref(), a.generation);
                self.orphans.adopted.insert(a.identity.pid, a.identity);
                // An adopted process is our child until we reap it: its pid cannot be reused.
                self.signal(
                    a.identity,
                    a.helper.clone(),
                    policy.signal(),
                    SignalReason::OrphanPolicy,
                    Some(policy.grace.0),
                );
                self.timers
                    .at(policy.grace.0, Timer::OrphanGrace(a.identity));
            }
        }
    }

    fn policy_for(&self, helper: Option<&str>, generation: u32) -> GenerationPolicy {
        match helper.and_then(|h| self.config.helper(h)) {
            Some(h) => h.generation(generation),
            None => self.config.supervisor.orphan_policy.clone(),
        }
    }

    /// Sends `sig` to `target` and no other process: through the pidfd held for a running
    /// helper, else through one opened and checked now ([`crate::process::identity::signal`]), so
    /// that a reused pid is never signalled.
    fn send(&self, target: Identity, sig: i32) -> io::Result<()> {
        let held = self
            .units
            .helpers
            .iter()
            .filter_map(|h| h.process.as_ref())
            .find(|p| p.identity() == target);
        match held {
            Some(p) => p.signal(sig),
            None => crate::process::identity::signal(target, sig),
        }
    }

    /// [`Supervisor::send`], then the `signal` event when it was sent (with the grace before
    /// SIGKILL it starts, if any).
    fn signal(
        &mut self,
        target: Identity,
        helper: Option<String>,
        sig: i32,
        reason: SignalReason,
        grace: Option<Duration>,
    ) {
        if self.send(target, sig).is_ok() {
            // A stopped process (SIGSTOP, a terminal's SIGTSTP) acts on nothing but SIGKILL
            // until it is continued: a signal that starts a grace (a stop signal, an orphan
            // policy's) is followed by SIGCONT, as systemd does, so that the grace is the
            // process's own to end in and not a wait for SIGKILL.
            if grace.is_some() && sig != libc::SIGKILL {
                let _ = self.send(target, libc::SIGCONT);
            }
            self.emit(Event::Signal {
                target,
                helper,
                generation: self.known.registry.get(&target).map(|r| r.generation),
                signal: signal_name(sig),
                reason,
                grace_ms: grace.map(|g| g.as_millis() as u64),
            });
        }
    }

    fn fire_timers(&mut self) {
        let now = Instant::now();
        while let Some(timer) = self.timers.pop_due(now) {
            match timer {
                Timer::Restart(i) => {
                    if !self.stage.shutting_down()
                        && self.units.helpers[i].state == HelperState::Backoff
                    {
                        self.want_launch(i);
                        self.on_sigchld();
                    }
                }
                Timer::OrphanGrace(id) => {
                    if self.orphans.adopted.get(&id.pid) == Some(&id) {
                        let helper = self.known.registry.get(&id).and_then(|r| r.helper.clone());
                        self.stage.mark_forced();
                        self.kill_after_grace(id, helper);
                    }
                }
                Timer::StopGrace(usize::MAX) => self.sweep(),
                Timer::StopGrace(i) => self.stop_grace_over(i),
                Timer::Scan => self.rescan(),
                Timer::Rescan => {
                    self.rescan();
                    self.schedule_rescan();
                }
                Timer::Check(i, launch, t) => self.on_check_timer(i, launch, t),
            }
        }
    }

    /// Starts the one orderly shutdown; later calls do nothing. Helpers waiting (for a
    /// dependency or a restart delay) are not launched any more; the helpers that run are
    /// stopped in reverse dependency order ([`Supervisor::settle`]).
    fn begin_shutdown(&mut self, signal: Option<i32>) {
        if !self.stage.begin_stop(signal.is_some()) {
            return;
        }
        self.emit(Event::Shutdown {
            signal: signal.map(signal_name),
        });
        self.timers
            .cancel(|t| matches!(t, Timer::Restart(_) | Timer::Check(..)));
        self.stop_all_checks();
        for i in 0..self.units.helpers.len() {
            if matches!(
                self.units.helpers[i].state,
                HelperState::Backoff | HelperState::Waiting
            ) {
                self.set_state(i, HelperState::Stopped, Some("for the shutdown".into()));
            }
        }
        self.rescan();
        self.settle();
    }

    fn adopted_grace(&self) -> Duration {
        if self.orphans.adopted.is_empty() {
            return Duration::ZERO;
        }
        self.config
            .helpers
            .iter()
            .flat_map(|h| h.generations.iter().map(|g| g.grace.0))
            .chain([
                self.config.supervisor.orphan_policy.grace.0,
                crate::supervision::config::GenerationPolicy::default()
                    .grace
                    .0,
            ])
            .max()
            .unwrap_or_default()
    }

    /// SIGKILLs `id` once its grace is over, at most once per process.
    fn kill_after_grace(&mut self, id: Identity, helper: Option<String>) {
        if self.orphans.killed.insert(id) {
            self.signal(id, helper, libc::SIGKILL, SignalReason::GraceExpired, None);
        }
    }

    /// SIGKILL to every live process of the tree, deepest first; repeated on each SIGCHLD
    /// until no child is left.
    fn sweep(&mut self) {
        self.stage.begin_sweep();
        self.timers.cancel(|t| matches!(t, Timer::StopGrace(_)));
        self.rescan();
        for id in self.known.registry.tree_deepest_first() {
            let helper = self.known.registry.get(&id).and_then(|r| r.helper.clone());
            self.stage.mark_forced();
            self.kill_after_grace(id, helper);
        }
    }
}

/// Whether foster has any child left (running or a zombie), without consuming a status.
pub fn has_children() -> bool {
    // SAFETY: a WNOWAIT peek fills `info` and consumes nothing.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: waitid with WNOWAIT fills `info`, a stack struct, and consumes nothing.
    let r = unsafe {
        libc::waitid(
            libc::P_ALL,
            0,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    r == 0
}
