//! Supervision events: what `foster run` reports, in one type, [`Event`].
//!
//! - [`render`]: its one rendering for people (`Display`), and [`clock_text`].
//! - [`narration`]: `foster run`'s lines on standard error, picked by verbosity.
//! - [`log`]: [`Record`] (an event with its time, the JSON form) and [`EventLog`], the
//!   `--events-log FILE` writer, rotated by size through [`crate::base::logfile`].
//!
//! The JSON form is one object per line, `"event"` naming the kind, `"ts_ms"` the wall-clock
//! time in milliseconds since the Unix epoch. The control socket and the dashboard stream
//! this same type. [`Event::map_pids`] is the one walk over the pids an event names, for
//! whoever shows them in another PID namespace ([`PidView`]).

mod log;
mod narration;
mod render;

/// The events the unit tests of this folder's files build.
#[cfg(test)]
mod fixtures {
    use super::Event;
    use crate::process::identity::Identity;
    use crate::process::reaper::ExitStatus;

    pub(super) fn id(pid: i32) -> Identity {
        Identity { pid, start_time: 1 }
    }

    pub(super) fn exit(
        helper: Option<&str>,
        generation: u32,
        pid: i32,
        status: ExitStatus,
    ) -> Event {
        Event::Exit {
            pid,
            identity: None,
            helper: helper.map(str::to_string),
            generation: Some(generation),
            status,
        }
    }
}

pub use log::{EventLog, Record, Rotation};
pub use narration::Narration;
pub use render::{clock_text, local_time, status_words};

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::gate::adoption::Classification;
use crate::process::identity::Identity;
use crate::process::reaper::ExitStatus;
use crate::process::state::HelperState;

/// One event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// foster started supervising (its own identity, and whether it is contained).
    Start {
        supervisor: Identity,
        contained: bool,
        /// The control socket's path, when it has one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        socket: Option<String>,
    },
    /// A helper was started.
    Launch {
        helper: String,
        identity: Identity,
        attempt: u32,
    },
    /// A helper could not be started: why (the step, what it applied to, the errno), and the
    /// exit status that counts as its end. When a process was created and ended before its
    /// exec (a `cwd` it cannot enter, a user it cannot become, an exec that failed), the event
    /// is written once it is reaped, with its `identity` and its own status, and no `launch`
    /// or `exit` event of it is; when none was, `status` is the one its process would have had
    /// (a program not found: 127). The restart rules take either as any exit. Without
    /// `status`, the failure was foster's own and the helper is not started again.
    LaunchFailed {
        helper: String,
        /// The process that was created and ended before its exec (a directory, a user or
        /// the program refused it), when there was one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        identity: Option<Identity>,
        error: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<ExitStatus>,
    },
    /// A process foster reaped ended: a helper (with its name) or an adopted process.
    Exit {
        pid: i32,
        identity: Option<Identity>,
        helper: Option<String>,
        generation: Option<u32>,
        status: ExitStatus,
    },
    /// A process got a new parent: who it was, from and to whom, and whether that was expected.
    Reparented {
        identity: Identity,
        helper: Option<String>,
        generation: Option<u32>,
        from: Option<Identity>,
        to: Identity,
        expected: Option<Identity>,
        classification: Classification,
    },
    /// A helper will be started again after `delay_ms`.
    Restart {
        helper: String,
        attempt: u32,
        delay_ms: u64,
    },
    /// A helper failed `restarts` times in a row and will not be started again.
    GiveUp { helper: String, restarts: u32 },
    /// A helper's state changed ([`HelperState`], `docs/run.md`): every change is one event.
    /// `detail`, when there is more to say, continues the state's words: `waiting` `for db:
    /// gave up after 5 restarts`, `stopped` `by request`. `status_text` is the `STATUS=` text
    /// its current launch sent last, as sent (a change of the text alone is no event: a helper
    /// may send one a second; `ctl status` has the latest).
    State {
        helper: String,
        state: HelperState,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status_text: Option<String>,
    },
    /// foster sent a signal, and why.
    Signal {
        target: Identity,
        helper: Option<String>,
        /// The target's generation (1: the helper itself), when foster knows it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        generation: Option<u32>,
        signal: String,
        reason: SignalReason,
        /// The grace before SIGKILL that this signal starts (a stop signal, an orphan policy).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        grace_ms: Option<u64>,
    },
    /// `lines` lines of a helper's output were not relayed to foster's standard output, which
    /// did not take them fast enough, since the last such event (they are still kept and
    /// logged; see `docs/output.md`).
    OutputDropped { helper: String, lines: u64 },
    /// A check of a helper failed: its readiness within its timeout, a health check (the
    /// `failures`-th in a row; `limit` fail the helper), its watchdog. At `failures == limit`
    /// the helper has failed: it is stopped (a `signal` event with reason `check_failed`) and
    /// its restart rules apply to its end.
    CheckFailed {
        helper: String,
        identity: Option<Identity>,
        check: Check,
        reason: String,
        failures: u32,
        limit: u32,
    },
    /// A helper's health check passed again after `failures` failures in a row.
    CheckPassed {
        helper: String,
        check: Check,
        failures: u32,
    },
    /// Orderly shutdown began (the signal that asked for it, if any).
    Shutdown { signal: Option<String> },
    /// foster is exiting with this status.
    Stopped { exit_status: i32 },
    /// The configuration file was read again and applied (`by`: `the control socket`,
    /// `SIGHUP`): what became of each helper.
    Reload {
        by: String,
        #[serde(flatten)]
        changes: Reloaded,
    },
    /// The configuration file was read again and refused: nothing changed (`reason` lists
    /// every mistake, one a line).
    ReloadRefused { by: String, reason: String },
}

/// What a reload did: the helpers by what became of them (each list in the file's order),
/// and the changes to the `[supervisor]` section.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reloaded {
    /// Helpers new in the file: launched (or waiting for their dependencies).
    pub started: Vec<String>,
    /// Helpers no longer in the file: stopped (stop signal, grace, SIGKILL of what is left of
    /// their tree) and gone.
    pub stopped: Vec<String>,
    /// Helpers whose definition changed: stopped as for a restart, then launched with the
    /// new definition (at once when they had no process).
    pub restarted: Vec<String>,
    /// Helpers whose definition did not change: not touched.
    pub unchanged: Vec<String>,
    /// Settings of `[supervisor]` that changed and took effect (`supervisor.orphan_policy`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub applied: Vec<String>,
    /// Settings that changed but take effect only when foster is started again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub needs_restart: Vec<String>,
    /// What the file read holds that is legal but likely not meant: the warnings `foster run
    /// --check` prints, each with its place in the file.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl fmt::Display for Reloaded {
    /// `started d; stopped a; restarted b; unchanged c` (the empty lists left out; names
    /// escaped, unless in the alternate form, as [`Event`]'s).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let raw = f.alternate();
        let text = |s: &str| shown(s, raw);
        let mut first = true;
        for (what, names) in [
            ("started", &self.started),
            ("stopped", &self.stopped),
            ("restarted", &self.restarted),
            ("unchanged", &self.unchanged),
            ("applied", &self.applied),
            ("needs a restart of foster", &self.needs_restart),
        ] {
            if names.is_empty() {
                continue;
            }
            if !first {
                f.write_str("; ")?;
            }
            first = false;
            let names: Vec<String> = names.iter().map(|n| text(n)).collect();
            write!(f, "{what} {}", names.join(", "))?;
        }
        if first {
            f.write_str("no helper")?;
        }
        Ok(())
    }
}

/// A helper's check, in events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Check {
    /// `ready = { ... }`.
    Ready,
    /// `health = { ... }`.
    Health,
    /// `watchdog`.
    Watchdog,
}

impl Check {
    /// Its name for people: `readiness check`, `health check`, `watchdog`.
    pub fn text(self) -> &'static str {
        match self {
            Check::Ready => "readiness check",
            Check::Health => "health check",
            Check::Watchdog => "watchdog",
        }
    }
}

/// Why foster sent a signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SignalReason {
    /// The helper's stop signal, during shutdown.
    Stop,
    /// The orphan policy of the process's generation.
    OrphanPolicy,
    /// A grace period ran out.
    GraceExpired,
    /// The operator asked for it through the control socket.
    Control,
    /// The helper failed a check (readiness, health, watchdog): it is stopped, then its
    /// restart rules apply.
    CheckFailed,
}

/// The pids of a PID namespace as another one sees them: what [`Event::map_pids`] asks for
/// each process an event names. A process not seen there is pid 0, the kernel's own word for
/// it (shown as `?`).
pub trait PidView {
    /// `id` as seen there (the start time does not depend on the namespace).
    fn identity(&mut self, id: Identity) -> Identity;
    /// A pid named without its start time.
    fn pid(&mut self, pid: i32) -> i32;
}

/// A [`PidView`] that notes what it gives ([`Event::mapped_pairs`]).
struct Noting<'a, V> {
    view: &'a mut V,
    pairs: Vec<[i32; 2]>,
}

impl<V> Noting<'_, V> {
    fn note(&mut self, pid: i32, there: i32) -> i32 {
        if there > 0 && !self.pairs.iter().any(|p| p[0] == pid) {
            self.pairs.push([pid, there]);
        }
        there
    }
}

impl<V: PidView> PidView for Noting<'_, V> {
    fn identity(&mut self, id: Identity) -> Identity {
        let there = self.view.identity(id);
        self.note(id.pid, there.pid);
        there
    }

    fn pid(&mut self, pid: i32) -> i32 {
        let there = self.view.pid(pid);
        self.note(pid, there)
    }
}

impl Event {
    /// Every pid this event names, as `view` shows it: `foster ctl` shows a contained
    /// supervisor's events with the caller's pids, and a contained `foster run` writes its
    /// lines and events log with the pids of the namespace it was started in.
    pub fn map_pids(&mut self, view: &mut impl PidView) {
        match self {
            Event::Start { supervisor, .. } => *supervisor = view.identity(*supervisor),
            Event::Launch { identity, .. } => *identity = view.identity(*identity),
            Event::Exit { pid, identity, .. } => match identity {
                Some(i) => {
                    *i = view.identity(*i);
                    *pid = i.pid;
                }
                None => *pid = view.pid(*pid),
            },
            Event::Reparented {
                identity,
                from,
                to,
                expected,
                ..
            } => {
                *identity = view.identity(*identity);
                *from = from.map(|i| view.identity(i));
                *to = view.identity(*to);
                *expected = expected.map(|i| view.identity(i));
            }
            Event::Signal { target, .. } => *target = view.identity(*target),
            Event::CheckFailed {
                identity: Some(id), ..
            }
            | Event::LaunchFailed {
                identity: Some(id), ..
            } => *id = view.identity(*id),
            Event::LaunchFailed { identity: None, .. }
            | Event::Restart { .. }
            | Event::GiveUp { .. }
            | Event::State { .. }
            | Event::OutputDropped { .. }
            | Event::CheckFailed { identity: None, .. }
            | Event::CheckPassed { .. }
            | Event::Shutdown { .. }
            | Event::Reload { .. }
            | Event::ReloadRefused { .. }
            | Event::Stopped { .. } => {}
        }
    }

    /// This event with `view`'s pids, and each pid that `view` sees, as `[pid here, pid
    /// there]` (once each, in the order the event names them): what a contained supervisor
    /// sends with an event, for a reader where it was started ([`PidView`]'s 0 left out).
    pub fn mapped_pairs(&self, view: &mut impl PidView) -> (Event, Vec<[i32; 2]>) {
        let mut noting = Noting {
            view,
            pairs: Vec::new(),
        };
        let mut e = self.clone();
        e.map_pids(&mut noting);
        (e, noting.pairs)
    }

    /// Whether this event deserves a warning (unexpected adoptions, give-ups, failed launches).
    pub fn is_warning(&self) -> bool {
        match self {
            Event::Reparented { classification, .. } => !classification.is_expected(),
            Event::GiveUp { .. }
            | Event::LaunchFailed { .. }
            | Event::OutputDropped { .. }
            | Event::ReloadRefused { .. }
            | Event::CheckFailed { .. } => true,
            Event::Reload { changes, .. } => !changes.needs_restart.is_empty(),
            Event::State { state, .. } => state.is_trouble(),
            _ => false,
        }
    }

    /// The helper this event is about (its own process or one of its tree's), if any.
    pub fn helper(&self) -> Option<&str> {
        match self {
            Event::Launch { helper, .. }
            | Event::LaunchFailed { helper, .. }
            | Event::Restart { helper, .. }
            | Event::GiveUp { helper, .. }
            | Event::State { helper, .. }
            | Event::OutputDropped { helper, .. }
            | Event::CheckFailed { helper, .. }
            | Event::CheckPassed { helper, .. } => Some(helper),
            Event::Exit { helper, .. }
            | Event::Reparented { helper, .. }
            | Event::Signal { helper, .. } => helper.as_deref(),
            _ => None,
        }
    }

    /// Whether this is the end of a helper itself (not of one of its descendants).
    pub fn is_helper_exit(&self) -> bool {
        matches!(
            self,
            Event::Exit {
                helper: Some(_),
                generation: Some(1),
                ..
            }
        )
    }

    /// Whether this event is detail, on standard error with `-v` only: an expected adoption,
    /// the end of a process that is not a helper itself, a stop signal (the helper's end says
    /// how it stopped).
    pub fn is_detail(&self) -> bool {
        match self {
            Event::Reparented { classification, .. } => classification.is_expected(),
            Event::Exit { .. } => !self.is_helper_exit(),
            Event::Signal { reason, .. } => *reason == SignalReason::Stop,
            // The launch, the exit, the restart and the stop signal tell of the others.
            Event::State { state, .. } => !matches!(
                state,
                HelperState::Waiting | HelperState::Ready | HelperState::Unhealthy
            ),
            _ => false,
        }
    }
}

/// A string an event or a reload reply carries, as `{}` shows it (escaped for a terminal) or,
/// with `raw` (the alternate form `{:#}`), as it is.
fn shown(s: &str, raw: bool) -> String {
    if raw {
        s.to_string()
    } else {
        crate::base::sanitize::escape(s.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::id;
    use super::*;

    /// Pids there are pids here plus 100; pid 9 is not seen there.
    struct Plus100;

    impl PidView for Plus100 {
        fn identity(&mut self, id: Identity) -> Identity {
            Identity {
                pid: self.pid(id.pid),
                ..id
            }
        }

        fn pid(&mut self, pid: i32) -> i32 {
            if pid == 9 { 0 } else { pid + 100 }
        }
    }

    #[test]
    fn mapped_pairs_names_each_pid_seen_there_once() {
        let e = Event::Reparented {
            identity: id(3),
            helper: None,
            generation: Some(2),
            from: Some(id(9)),
            to: id(1),
            expected: Some(id(1)),
            classification: Classification::Expected,
        };
        let (there, pairs) = e.mapped_pairs(&mut Plus100);
        assert_eq!(pairs, [[3, 103], [1, 101]]);
        let Event::Reparented { identity, from, .. } = there else {
            unreachable!()
        };
        assert_eq!((identity.pid, from.map(|f| f.pid)), (103, Some(0)));
    }
}
