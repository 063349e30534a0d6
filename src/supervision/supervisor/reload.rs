//! Reload: the configuration file read again and applied to the running tree.
//!
//! Owns [`Supervisor::reload`] (`foster ctl reload`, and the `--reload-signal`): the file
//! foster was started with is read again with every check of `foster run --check`
//! ([`Config::load_with`] and [`Scope::System`]); a file with mistakes is refused with every
//! mistake listed, and nothing changes. Otherwise the helpers are compared by name, their
//! definitions by [`crate::supervision::config::Helper`]'s `PartialEq` (every field counts;
//! [`Supervisor::try_reload`] says what follows). [`Supervisor::reload_plan`] says what a
//! reload would do, and does nothing (`foster ctl reload --dry-run`).

use tracing::warn;

use super::Supervisor;
use super::lifecycle::{Graph, REMOVED, Run, StopFor};
use super::start::helper_output;
use super::timers::Timer;
use crate::process::state::HelperState;
use crate::supervision::config::{Config, Helper, Scope, SupervisorSection};
use crate::supervision::control::protocol::{ErrorKind, Reply};
use crate::supervision::event::{Event, Reloaded};
use crate::supervision::restart::RestartState;

/// Why a reload was refused: nothing changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Refused {
    kind: ErrorKind,
    /// What was wrong; one mistake a line for a configuration with mistakes.
    message: String,
}

impl Refused {
    fn new(kind: ErrorKind, message: impl Into<String>) -> Refused {
        Refused {
            kind,
            message: message.into(),
        }
    }

    /// The error reply for it.
    pub(super) fn reply(&self) -> Reply {
        Reply::error(self.kind, self.message.clone())
    }
}

/// What a reload does to one helper already there whose definition changed.
enum Change {
    /// It is stopping, or stopped now: launched with the new definition once it is down.
    Stopping,
    /// It had no process: the new definition is its own now; launch it (`true`) or leave it
    /// as it is (`false`: waiting for its dependencies, stopped by request).
    Set(bool),
}

/// The warnings of a configuration read again, as `foster run` prints them at its start.
fn warning_lines(config: &Config) -> Vec<String> {
    config.warnings.iter().map(|w| w.to_string()).collect()
}

impl Supervisor {
    /// Reads the configuration file again and applies it (see the module docs); `by` says who
    /// asked (`control socket`, `SIGHUP`). Either way an event records it.
    pub(super) fn reload(&mut self, by: &str) -> Result<Reloaded, Refused> {
        match self.try_reload() {
            Ok(changes) => {
                for w in &changes.warnings {
                    warn!("reload ({by}): {w}");
                }
                self.emit(Event::Reload {
                    by: by.to_string(),
                    changes: changes.clone(),
                });
                Ok(changes)
            }
            Err(refused) => {
                self.emit(Event::ReloadRefused {
                    by: by.to_string(),
                    reason: refused.message.clone(),
                });
                Err(refused)
            }
        }
    }

    /// The index of the helper named `name` in the configuration now (a retired one is not).
    pub(super) fn helper_index(&self, name: &str) -> Option<usize> {
        (0..self.units.helpers.len())
            .find(|&i| !self.units.helpers[i].retired && self.config.helpers[i].name() == name)
    }

    /// Reads the file again and applies it, each helper by what became of it:
    ///
    /// - a helper new in the file is launched (as its dependencies allow);
    /// - a helper no longer in the file is stopped as the shutdown stops one (its stop signal, its
    ///   grace, SIGKILL to what is left of its tree) and retired: its index stays (timers, the
    ///   reaper and the output name helpers by index) and may go to a helper a later reload adds,
    ///   once it is down;
    /// - a helper whose definition changed is stopped as `ctl restart` stops one, and launched
    ///   with the new definition once it is down (at once when it had no process; one stopped by
    ///   request stays stopped, with the new definition for its next start);
    /// - a helper whose definition did not change is not touched.
    ///
    /// `[supervisor]` is compared field by field: what can take effect at once does
    /// (`orphan_policy`: for processes adopted from then on; `rescan`: from the next read); what
    /// could not would be reported as needing a restart of foster. A reload is refused during the
    /// shutdown, and while a helper of the same name as one the file adds, removed by an earlier
    /// reload, is still stopping. Every reload is an event (`reload`, or `reload_refused` with the
    /// reason).
    fn try_reload(&mut self) -> Result<Reloaded, Refused> {
        let new = self.read_again()?;
        let warnings = warning_lines(&new);
        let mut out = self.apply(new)?;
        out.warnings = warnings;
        Ok(out)
    }

    /// What a reload would do now (`reload` with `dry_run`): the file read again and checked as
    /// for a reload, compared, and nothing applied. No event: nothing changed.
    pub(super) fn reload_plan(&self) -> Result<Reloaded, Refused> {
        let new = self.read_again()?;
        let mut out = Reloaded {
            warnings: warning_lines(&new),
            ..Reloaded::default()
        };
        for i in 0..self.units.helpers.len() {
            let name = self.config.helpers[i].name();
            if !self.units.helpers[i].retired && new.helper(name).is_none() {
                out.stopped.push(name.to_string());
            }
        }
        let (now, then) = (&self.config.supervisor, &new.supervisor);
        if now.orphan_policy != then.orphan_policy {
            out.applied.push("supervisor.orphan_policy".to_string());
        }
        if now.rescan != then.rescan {
            out.applied.push("supervisor.rescan".to_string());
        }
        for h in &new.helpers {
            let name = h.name().to_string();
            match self.helper_index(&name) {
                Some(i) if self.config.helpers[i] == *h => out.unchanged.push(name),
                Some(_) => out.restarted.push(name),
                None => out.started.push(name),
            }
        }
        Ok(out)
    }

    /// The configuration file read again, with every check of `foster run --check`: refused
    /// during the shutdown, without a file, with mistakes, or while a helper it adds is one an
    /// earlier reload removed that is still stopping.
    fn read_again(&self) -> Result<Config, Refused> {
        if self.stage.shutting_down() {
            return Err(Refused::new(
                ErrorKind::Refused,
                "the supervisor is shutting down: the configuration is not read again",
            ));
        }
        let Some(path) = self.setup.config_path.clone() else {
            return Err(Refused::new(
                ErrorKind::Refused,
                "foster run read its configuration from standard input: there is no file to \
                 read again",
            ));
        };
        let new = Config::load_with(&path, Scope::System).map_err(|e| {
            let n = e.len();
            Refused::new(
                ErrorKind::InvalidConfig,
                format!(
                    "the configuration has {n}{} mistake{}; nothing was changed:\n{}",
                    if e.more() { " or more" } else { "" },
                    if n == 1 && !e.more() { "" } else { "s" },
                    e.lines().join("\n")
                ),
            )
        })?;
        for h in &new.helpers {
            let stopping = (0..self.units.helpers.len()).any(|j| {
                self.units.helpers[j].retired
                    && !self.slot_down(j)
                    && self.config.helpers[j].name() == h.name()
            });
            if stopping && self.helper_index(h.name()).is_none() {
                return Err(Refused::new(
                    ErrorKind::Refused,
                    format!(
                        "helper {:?}, removed by an earlier reload, is still stopping: reload \
                         again once it has ended; nothing was changed",
                        crate::base::sanitize::escape(h.name().as_bytes())
                    ),
                ));
            }
        }
        Ok(new)
    }

    /// Applies `new`, read again (see [`Supervisor::try_reload`]).
    fn apply(&mut self, new: Config) -> Result<Reloaded, Refused> {
        let mut out = Reloaded::default();
        // Removed first: their names are free for nothing else, and they stop at once.
        for i in 0..self.units.helpers.len() {
            if self.units.helpers[i].retired {
                continue;
            }
            let name = self.config.helpers[i].name().to_string();
            if new.helper(&name).is_none() {
                self.remove_helper(i);
                out.stopped.push(name);
            }
        }
        self.reload_supervisor_section(&new.supervisor, &mut out);
        let mut launch = Vec::new();
        for h in new.helpers {
            let name = h.name().to_string();
            match self.helper_index(&name) {
                Some(i) if self.config.helpers[i] == h => out.unchanged.push(name),
                Some(i) => {
                    if let Change::Set(true) = self.change_helper(i, h) {
                        launch.push(i);
                    }
                    out.restarted.push(name);
                }
                None => {
                    launch.push(self.add_helper(h));
                    out.started.push(name);
                }
            }
        }
        self.rebuild_graph();
        for i in launch {
            self.autostart(i);
        }
        // Launches that failed at once have their statuses pending.
        self.on_sigchld();
        Ok(out)
    }

    /// `[supervisor]` compared field by field (a field added there must say here whether it
    /// takes effect at once).
    fn reload_supervisor_section(&mut self, new: &SupervisorSection, out: &mut Reloaded) {
        let SupervisorSection {
            orphan_policy,
            rescan,
        } = new;
        if *orphan_policy != self.config.supervisor.orphan_policy {
            // Read at each adoption: it applies to processes adopted from now on.
            self.config.supervisor.orphan_policy = orphan_policy.clone();
            out.applied.push("supervisor.orphan_policy".to_string());
        }
        if *rescan != self.config.supervisor.rescan {
            // The next periodic read is timed with the new period (none when it is removed).
            self.config.supervisor.rescan = *rescan;
            self.schedule_rescan();
            out.applied.push("supervisor.rescan".to_string());
        }
    }

    /// Whether index `j` has nothing left running: no process, not stopping.
    fn slot_down(&self, j: usize) -> bool {
        let r = &self.units.helpers[j];
        r.pid.is_none() && !r.state.is_up() && r.state != HelperState::Stopping
    }

    /// Helper `i` is no longer in the file: retired, and stopped (its stop signal, its grace,
    /// SIGKILL to what is left of its tree) when it has a process.
    fn remove_helper(&mut self, i: usize) {
        self.timers.cancel(|t| *t == Timer::Restart(i));
        self.control.forget_history(self.config.helpers[i].name());
        if let Some(o) = &mut self.io.output {
            o.retire(i);
        }
        let r = &mut self.units.helpers[i];
        r.retired = true;
        r.next = None;
        if r.state == HelperState::Stopping {
            // Whatever it was stopping for, it stays stopped now.
            r.stop = Some(StopFor::Removed);
            r.detail = Some(REMOVED.to_string());
            return;
        }
        if !self.stop_helper(i, StopFor::Removed) {
            self.set_state(i, HelperState::Stopped, Some(REMOVED.to_string()));
        }
    }

    /// Helper `i`'s definition changed to `h`.
    fn change_helper(&mut self, i: usize, h: Helper) -> Change {
        let state = self.units.helpers[i].state;
        if state == HelperState::Stopping {
            // Its stop goes on; what follows it takes the new definition.
            self.units.helpers[i].next = Some(Box::new(h));
            return Change::Stopping;
        }
        if self.units.helpers[i].running().is_some() {
            self.units.helpers[i].next = Some(Box::new(h));
            self.stop_helper(i, StopFor::Restart);
            return Change::Stopping;
        }
        self.timers.cancel(|t| *t == Timer::Restart(i));
        self.set_definition(i, h);
        Change::Set(!matches!(
            state,
            HelperState::Waiting | HelperState::Stopped
        ))
    }

    /// The definition a reload gave helper `i` while it was stopping, now that it is down.
    pub(super) fn take_next_definition(&mut self, i: usize) {
        if let Some(h) = self.units.helpers[i].next.take() {
            self.set_definition(i, *h);
            self.rebuild_graph();
        }
    }

    /// Helper `i` (with no process) has definition `h` from now on: its restart count starts
    /// over, and its output is made anew when where it goes changed.
    fn set_definition(&mut self, i: usize, h: Helper) {
        let old = &self.config.helpers[i];
        if (old.output != h.output || old.log != h.log || old.ring != h.ring)
            && let Some(o) = &mut self.io.output
            && let Err(e) = o.set(i, &helper_output(&h))
        {
            warn!(
                "helper {}: its new output cannot be set up ({e}); it goes where it went",
                crate::base::sanitize::escape(h.name().as_bytes())
            );
        }
        self.config.helpers[i] = h;
        self.units.helpers[i].restart = RestartState::default();
    }

    /// Helper `h` is new: it takes the index of a removed helper that is down (one of the same
    /// name first), else one past the last. Returns its index.
    fn add_helper(&mut self, h: Helper) -> usize {
        let n = self.units.helpers.len();
        let free = |j: usize| self.units.helpers[j].retired && self.slot_down(j);
        let reuse = (0..n)
            .find(|&j| free(j) && self.config.helpers[j].name() == h.name())
            .or_else(|| (0..n).find(|&j| free(j)));
        let out = helper_output(&h);
        let i = match reuse {
            Some(j) => {
                self.units.helpers[j] = Run::new();
                self.config.helpers[j] = h;
                j
            }
            None => {
                self.units.helpers.push(Run::new());
                self.config.helpers.push(h);
                n
            }
        };
        if let Some(o) = &mut self.io.output
            && let Err(e) = o.set(i, &out)
        {
            warn!(
                "helper {}: its output cannot be set up ({e}); it gets foster's own",
                crate::base::sanitize::escape(out.name.as_bytes())
            );
        }
        i
    }

    /// The `depends_on` graph of the helpers in the configuration now.
    fn rebuild_graph(&mut self) {
        let retired: Vec<bool> = self.units.helpers.iter().map(|r| r.retired).collect();
        self.units.graph = Graph::of(&self.config, |i| !retired[i]);
    }
}
