//! Supervision events: what `foster run` reports, in one type.
//!
//! Owns [`Event`] (launch, exit, reparented, restart, give-up, a helper's state changing,
//! signal, output dropped, a check failed or passed again, shutdown), its JSON form
//! (one object per line, `"event"` naming the kind, `"ts_ms"` the wall-clock time in
//! milliseconds since the Unix epoch), its one rendering for people (`Display`: `foster run`'s
//! lines on standard error, which [`Narration`] picks by verbosity, `foster ctl events`, the
//! dashboard's events pane, `foster demo`), [`clock_text`] (a time as those show it) and
//! [`EventLog`], the `--events-log FILE` writer
//! (rotated by size and reopened through [`crate::base::logfile`]). The control socket and the
//! dashboard stream this same type. [`Event::map_pids`] is the one walk over the pids an event
//! names, for whoever shows them in another PID namespace ([`PidView`]: `foster ctl`, a
//! contained `foster run`'s own lines).

use std::fmt;
use std::io;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::base::logfile::{RotatingFile, Trust};
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

    /// The process this event is about as its line names it, escaped: `crasher[4730]`,
    /// `orphaner's grandchild 4801` (the target of a signal); None for an event about no one
    /// process.
    pub fn process(&self) -> Option<String> {
        let text = |h: &Option<String>| {
            h.as_deref()
                .map(|h| crate::base::sanitize::escape(h.as_bytes()))
        };
        let who = match self {
            Event::Launch {
                helper, identity, ..
            } => Who {
                helper: Some(crate::base::sanitize::escape(helper.as_bytes())),
                generation: Some(1),
                pid: identity.pid,
            },
            Event::Exit {
                pid,
                helper,
                generation,
                ..
            } => Who {
                helper: text(helper),
                generation: *generation,
                pid: *pid,
            },
            Event::Reparented {
                identity,
                helper,
                generation,
                ..
            } => Who {
                helper: text(helper),
                generation: *generation,
                pid: identity.pid,
            },
            Event::Signal {
                target,
                helper,
                generation,
                reason,
                ..
            } => Who {
                helper: text(helper),
                generation: generation.or((*reason == SignalReason::Stop).then_some(1)),
                pid: target.pid,
            },
            Event::CheckFailed {
                helper,
                identity: Some(identity),
                ..
            } => Who {
                helper: Some(crate::base::sanitize::escape(helper.as_bytes())),
                generation: Some(1),
                pid: identity.pid,
            },
            _ => return None,
        };
        Some(who.to_string())
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

/// One event for people, on one line, without its time: the one rendering of an event, shared
/// by `foster run`'s lines on standard error ([`Narration`]), `foster ctl events`, the
/// dashboard's events pane and `foster demo`. A process reads as its helper's name and pid,
/// `crasher[4730]`, or as its kin, `orphaner's grandchild 4801`; a status in words, `exited with
/// code 3`, `was killed by SIGKILL`.
///
/// Every string an event carries (helper names from a configuration, error texts, signal names,
/// the socket's path: text a peer sent) goes through [`crate::base::sanitize::escape`], so that `{}`
/// is safe on a terminal. The alternate form `{:#}` leaves those strings as they are, for a
/// caller that escapes the whole line itself when it draws it (the dashboard's events pane), so
/// that they are not escaped twice. A pid of 0 (a process the reader's PID namespace could not
/// see) is shown as `?`.
impl fmt::Display for Event {
    // Long as its match is: one sentence for each event.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let raw = f.alternate();
        let text = |s: &str| shown(s, raw);
        let who = |helper: &Option<String>, generation: Option<u32>, pid: i32| Who {
            helper: helper.as_deref().map(text),
            generation,
            pid,
        };
        match self {
            Event::Start {
                supervisor,
                contained,
                socket,
            } => {
                write!(f, "supervisor {} started", Pid(supervisor.pid))?;
                if *contained {
                    f.write_str(", in a PID namespace of its own")?;
                }
                match socket {
                    Some(s) => write!(f, "; control socket {}", text(s)),
                    None => Ok(()),
                }
            }
            Event::Launch {
                helper,
                identity,
                attempt,
            } => {
                write!(
                    f,
                    "{} launched",
                    who(&Some(helper.clone()), Some(1), identity.pid)
                )?;
                if *attempt > 1 {
                    write!(f, " (attempt {attempt})")?;
                }
                Ok(())
            }
            Event::LaunchFailed {
                helper,
                identity,
                error,
                status,
            } => {
                match identity {
                    Some(id) => write!(f, "{}", who(&Some(helper.clone()), Some(1), id.pid))?,
                    None => write!(f, "{}", text(helper))?,
                }
                write!(f, " could not be launched: {}", text(error))?;
                launch_status(f, *status, identity.is_some())
            }
            Event::Exit {
                pid,
                helper,
                generation,
                status,
                ..
            } => write!(f, "{} {}", who(helper, *generation, *pid), Ended(*status)),
            Event::Reparented {
                identity,
                helper,
                generation,
                from,
                to,
                expected,
                classification,
            } => {
                write!(f, "{}", who(helper, *generation, identity.pid))?;
                adopted(f, *from, *to, *expected, classification)
            }
            Event::Restart { helper, .. } | Event::GiveUp { helper, .. } => {
                write!(f, "{}: {}", text(helper), Decided(self))
            }
            Event::Signal {
                target,
                helper,
                generation,
                signal,
                reason,
                grace_ms,
            } => {
                // A stop signal goes to a helper itself (an older supervisor did not say so).
                let generation = generation.or((*reason == SignalReason::Stop).then_some(1));
                write!(
                    f,
                    "sent {} to {}",
                    text(signal),
                    who(helper, generation, target.pid)
                )?;
                signal_reason(f, signal, *reason, *grace_ms)
            }
            _ => self.fmt_rest(f, raw),
        }
    }
}

impl Event {
    /// [`Event`]'s `Display` of states, checks, the shutdown, reloads and the end.
    // Long as its match is: one sentence for each event.
    fn fmt_rest(&self, f: &mut fmt::Formatter<'_>, raw: bool) -> fmt::Result {
        let text = |s: &str| shown(s, raw);
        let who = |helper: &Option<String>, generation: Option<u32>, pid: i32| Who {
            helper: helper.as_deref().map(text),
            generation,
            pid,
        };
        match self {
            Event::State {
                helper,
                state,
                detail,
                status_text,
            } => {
                write!(f, "{}: {state}", text(helper))?;
                if let Some(d) = detail {
                    write!(f, " {}", text(d))?;
                }
                match status_text {
                    Some(t) => write!(f, " · status: {}", text(t)),
                    None => Ok(()),
                }
            }
            Event::OutputDropped { helper, lines } => write!(
                f,
                "{lines} line{} of {}'s output not shown: foster's standard output is too slow \
                 (they are kept and logged)",
                if *lines == 1 { "" } else { "s" },
                text(helper)
            ),
            Event::CheckFailed {
                helper,
                identity,
                check,
                reason,
                failures,
                limit,
            } => {
                match identity {
                    Some(id) => write!(f, "{}", who(&Some(helper.clone()), Some(1), id.pid))?,
                    None => f.write_str(&text(helper))?,
                }
                write!(f, " failed its {}: {}", check.text(), text(reason))?;
                if *limit > 1 {
                    write!(f, " ({failures} of {limit} in a row)")?;
                }
                Ok(())
            }
            Event::CheckPassed {
                helper,
                check,
                failures,
            } => write!(
                f,
                "{} passed its {} again (after {failures} failure{})",
                text(helper),
                check.text(),
                if *failures == 1 { "" } else { "s" }
            ),
            Event::Shutdown { signal } => match signal {
                Some(s) => write!(f, "shutting down on {}: stopping every helper", text(s)),
                None => f.write_str("shutting down: no helper is left running"),
            },
            Event::Reload { by, changes } => {
                write!(f, "configuration reloaded ({}): ", text(by))?;
                if raw {
                    write!(f, "{changes:#}")
                } else {
                    write!(f, "{changes}")
                }
            }
            Event::ReloadRefused { by, reason } => write!(
                f,
                "configuration not reloaded ({}), nothing changed: {}",
                text(by),
                text(&reason.replace('\n', "; "))
            ),
            Event::Stopped { exit_status } => {
                write!(f, "supervisor stopped with exit status {exit_status}")?;
                match status_words(*exit_status) {
                    Some(w) => write!(f, " ({w})"),
                    None => Ok(()),
                }
            }
            // Written by `fmt` itself.
            Event::Start { .. }
            | Event::Launch { .. }
            | Event::LaunchFailed { .. }
            | Event::Exit { .. }
            | Event::Reparented { .. }
            | Event::Restart { .. }
            | Event::GiveUp { .. }
            | Event::Signal { .. } => Ok(()),
        }
    }
}

/// How a helper whose launch failed ended (`forked`: its process ended before its exec).
fn launch_status(
    f: &mut fmt::Formatter<'_>,
    status: Option<ExitStatus>,
    forked: bool,
) -> fmt::Result {
    match (status, forked) {
        // Its process ended before its exec, with this status.
        (Some(s), true) => write!(f, " ({})", Ended(s)),
        (Some(s), false) => write!(f, " (counts as {s})"),
        (None, _) => Ok(()),
    }
}

/// The rest of a `reparented` event: the former parent, the new one, and whether it was
/// expected.
fn adopted(
    f: &mut fmt::Formatter<'_>,
    from: Option<Identity>,
    to: Identity,
    expected: Option<Identity>,
    classification: &Classification,
) -> fmt::Result {
    // Its former parent, unless it ended before the reader's namespace saw it.
    match from.filter(|from| from.pid != 0) {
        Some(from) => write!(
            f,
            " lost its parent {} and was adopted by {}",
            Pid(from.pid),
            Pid(to.pid)
        )?,
        None => write!(f, " was orphaned and adopted by {}", Pid(to.pid))?,
    }
    if classification.is_expected() {
        return f.write_str(", as expected");
    }
    write!(f, ": UNEXPECTED ({}", classification.text())?;
    if let Some(x) = expected {
        write!(f, "; expected {}", Pid(x.pid))?;
    }
    f.write_str(")")
}

/// Why a signal was sent, and the SIGKILL that follows it after a grace, if one does.
fn signal_reason(
    f: &mut fmt::Formatter<'_>,
    signal: &str,
    reason: SignalReason,
    grace_ms: Option<u64>,
) -> fmt::Result {
    // After SIGKILL itself there is nothing to follow up with.
    let then = grace_ms
        .filter(|_| signal != "SIGKILL")
        .map(|g| format!("SIGKILL after {}", Millis(g)))
        .unwrap_or_default();
    match reason {
        SignalReason::Stop if then.is_empty() => f.write_str(" to stop it"),
        SignalReason::Stop => write!(f, " to stop it ({then})"),
        SignalReason::OrphanPolicy if then.is_empty() => f.write_str(" (orphan policy)"),
        SignalReason::OrphanPolicy => write!(f, " (orphan policy; {then})"),
        SignalReason::GraceExpired => f.write_str(" (still running at the end of its grace)"),
        SignalReason::Control if then.is_empty() => {
            f.write_str(" (asked through the control socket)")
        }
        SignalReason::Control => write!(f, " (asked through the control socket; {then})"),
        SignalReason::CheckFailed if then.is_empty() => f.write_str(" (it failed a check)"),
        SignalReason::CheckFailed => write!(f, " (it failed a check; {then})"),
    }
}

/// What `foster run`'s exit statuses mean, in words (the table of `docs/run.md`; the numbers
/// are `supervisor::EXIT_*`).
pub fn status_words(code: i32) -> Option<&'static str> {
    Some(match code {
        0 => "everything ended in order",
        1 => "foster could not supervise",
        2 => "the configuration is invalid",
        3 => "a helper failed or was given up on",
        4 => "something had to be SIGKILLed after its grace",
        _ => return None,
    })
}

/// A process for people: `crasher[4730]` for a helper itself, `orphaner's grandchild 4801` for
/// a descendant of a helper, `process 4801` for one of no known helper. `helper` is already
/// escaped (or deliberately raw).
struct Who {
    helper: Option<String>,
    generation: Option<u32>,
    pid: i32,
}

impl fmt::Display for Who {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pid = Pid(self.pid);
        let Some(h) = &self.helper else {
            return write!(f, "process {pid}");
        };
        match self.generation {
            Some(1) => write!(f, "{h}[{pid}]"),
            Some(2) => write!(f, "{h}'s child {pid}"),
            Some(3) => write!(f, "{h}'s grandchild {pid}"),
            Some(g) if g > 3 => write!(f, "{h}'s descendant {pid} (generation {g})"),
            _ => write!(f, "{h}'s process {pid}"),
        }
    }
}

/// How a process ended, in words: `exited with code 3`, `was killed by SIGKILL`.
struct Ended(ExitStatus);

impl fmt::Display for Ended {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            ExitStatus::Exited { code } => write!(f, "exited with code {code}"),
            ExitStatus::Signaled {
                signal,
                core_dumped,
            } => {
                write!(f, "was killed by {}", crate::process::signal::name(signal))?;
                if core_dumped {
                    f.write_str(" (core dumped)")?;
                }
                Ok(())
            }
        }
    }
}

/// What foster decided after a helper's exit, without the helper's name: `restarting in 2s (3rd
/// in a row)`, `giving up after 5 restarts in a row`; empty for any other event.
struct Decided<'a>(&'a Event);

impl fmt::Display for Decided<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self.0 {
            // Only a `restart` request restarts at once (a backoff is at least 1ms).
            Event::Restart { delay_ms: 0, .. } => f.write_str("restarting now"),
            Event::Restart {
                attempt, delay_ms, ..
            } => write!(
                f,
                "restarting in {} ({} in a row)",
                Millis(delay_ms),
                Ordinal(attempt)
            ),
            Event::GiveUp { restarts: 0, .. } => f.write_str("not restarted (backoff limit 0)"),
            Event::GiveUp { restarts, .. } => write!(
                f,
                "giving up after {restarts} restart{} in a row",
                if restarts == 1 { "" } else { "s" }
            ),
            _ => Ok(()),
        }
    }
}

/// `1st`, `2nd`, `3rd`, `4th`, `11th`, `21st`...
struct Ordinal(u32);

impl fmt::Display for Ordinal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        let suffix = match (n % 10, n % 100) {
            (_, 11..=13) => "th",
            (1, _) => "st",
            (2, _) => "nd",
            (3, _) => "rd",
            _ => "th",
        };
        write!(f, "{n}{suffix}")
    }
}

/// A pid for people: `?` for 0.
struct Pid(i32);
impl fmt::Display for Pid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            0 => f.write_str("?"),
            p => write!(f, "{p}"),
        }
    }
}

/// A delay in milliseconds for people: `250ms`, `30s`, `1.5s`.
struct Millis(u64);
impl fmt::Display for Millis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0;
        if ms < 1000 {
            write!(f, "{ms}ms")
        } else if ms % 1000 == 0 {
            write!(f, "{}s", ms / 1000)
        } else {
            write!(f, "{:.1}s", ms as f64 / 1000.0)
        }
    }
}

/// `foster run`'s lines on standard error, `foster: ` and an event's [`Display`](fmt::Display)
/// each: at verbosity 0 the events that matter (launches, helpers' exits, restarts, give-ups,
/// orphan policies applied and SIGKILLs, unexpected adoptions, the shutdown and its end, the
/// control socket at start); from 1 (`-v`) also the detail ([`Event::is_detail`]); below 0
/// (`-q`) none. A helper's exit (or a launch refused before any process was created, which
/// counts as one) and the restart or give-up decided on it make one line, `foster:
/// crasher[4730] exited with code 3; restarting in 2s (3rd in a row)`: the exit is held until
/// the next event, or until [`Narration::flush`] (the supervisor flushes once it has handled
/// what woke it).
#[derive(Debug, Default)]
pub struct Narration {
    verbosity: i8,
    held: Option<Event>,
}

impl Narration {
    pub fn new(verbosity: i8) -> Narration {
        Narration {
            verbosity,
            held: None,
        }
    }

    /// The lines (each ending in a newline) that `event` completes: none, one, or two (a held
    /// exit that this event does not follow up, then this one's).
    pub fn push(&mut self, event: &Event) -> Vec<String> {
        let mut out = Vec::new();
        if self.verbosity < 0 {
            return out;
        }
        if let Some(held) = self.held.take() {
            if follows_up(&held, event) {
                out.push(format!("foster: {held}; {}\n", Decided(event)));
                return out;
            }
            out.push(format!("foster: {held}\n"));
        }
        if awaits_decision(event) {
            self.held = Some(event.clone());
        } else if !event.is_detail() || self.verbosity > 0 {
            out.push(format!("foster: {event}\n"));
        }
        out
    }

    /// The line of a held exit that nothing followed up (the helper is not restarted).
    pub fn flush(&mut self) -> Option<String> {
        self.held.take().map(|e| format!("foster: {e}\n"))
    }
}

/// Whether foster decides on `event` (restart or give up) right after it: the end of a helper
/// itself, or a launch refused before any process was created, which counts as an exit.
fn awaits_decision(event: &Event) -> bool {
    event.is_helper_exit()
        || matches!(
            event,
            Event::LaunchFailed {
                status: Some(_),
                ..
            }
        )
}

/// Whether `next` is the decision on `ended` (the same helper's restart or give-up).
fn follows_up(ended: &Event, next: &Event) -> bool {
    let (Event::Exit {
        helper: Some(name), ..
    }
    | Event::LaunchFailed { helper: name, .. }) = ended
    else {
        return false;
    };
    matches!(next, Event::Restart { helper, .. } | Event::GiveUp { helper, .. } if helper == name)
}

/// An event with its time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The JSON schema version ([`crate::base::json::VERSION`]), on every line of the events log.
    #[serde(default = "json_version")]
    pub version: u32,
    pub ts_ms: u64,
    #[serde(flatten)]
    pub event: Event,
}

impl Record {
    /// Stamps `event` with the current time.
    pub fn now(event: Event) -> Record {
        let ts_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        Record {
            version: crate::base::json::VERSION,
            ts_ms,
            event,
        }
    }
}

fn json_version() -> u32 {
    crate::base::json::VERSION
}

/// When the events log is rotated (`--events-log-max-size`, `--events-log-keep`): the one
/// rotation of foster's logs.
pub use crate::base::logfile::Rotation;

/// Appends records to a file as JSON lines, each line written whole with one `write` (no
/// buffering, no fsync: a reader sees each event at once, and the loop never waits on a disk),
/// through a [`RotatingFile`] judged as a helper's log is ([`Trust::Stream`]: never through a
/// symbolic link, a file of foster's user in a directory no other user can write to; a FIFO or
/// a terminal too), rotated by size when it is a regular file.
#[derive(Debug)]
pub struct EventLog {
    file: RotatingFile,
}

impl EventLog {
    /// Opens (creating) `path` for appending; what another user could have put at the path is
    /// refused with an error that names it (its type, owner and mode).
    pub fn open(path: &Path, rotation: Rotation) -> io::Result<EventLog> {
        Ok(EventLog {
            file: RotatingFile::open(path, rotation, Trust::Stream, "events log")?,
        })
    }

    /// The path it was opened at.
    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// Closes the file and opens (creating) the path again (see [`RotatingFile::reopen`]).
    pub fn reopen(&mut self) -> io::Result<()> {
        self.file.reopen()
    }

    /// Writes one record as one line, rotating first when it is time to. A rotation that fails
    /// is a warning and the line goes to the current file; an error is a line not written.
    /// Every control or format character of the record's text (a helper's `STATUS=`: C1's
    /// U+009B, a bidirectional override) is a `\uXXXX` escape ([`crate::base::sanitize::to_json`]),
    /// as in every JSON foster writes: the file is safe to print.
    pub fn write(&mut self, record: &Record) -> io::Result<()> {
        let mut line = crate::base::sanitize::to_json(record)
            .map_err(io::Error::other)?
            .into_bytes();
        line.push(b'\n');
        self.file.write(&line)
    }
}

/// The local time of `secs` since the Unix epoch, broken down (`localtime_r`); `None` when
/// the C library cannot convert it.
pub fn local_time(secs: u64) -> Option<libc::tm> {
    // `time_t`'s width is the C library's (it is not named here: libc deprecates it on musl).
    let t = secs.try_into().ok()?;
    // SAFETY: localtime_r reads `t` and fills `tm`, both ours; it returns null on failure.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: localtime_r reads `t` and fills `tm`, both ours; it returns null on failure.
    if unsafe { libc::localtime_r(&t, &mut tm) }.is_null() {
        return None;
    }
    Some(tm)
}

/// `HH:MM:SS` in local time (`HH:MM:SS.mmm` with `millis`) of a time in milliseconds since
/// the Unix epoch, as `foster ctl events` and the dashboard show events and lines; the seconds
/// since the epoch when the C library cannot convert it.
pub fn clock_text(ts_ms: u64, millis: bool) -> String {
    let secs = ts_ms / 1000;
    let Some(tm) = local_time(secs) else {
        return secs.to_string();
    };
    let mut text = format!("{:02}:{:02}:{:02}", tm.tm_hour, tm.tm_min, tm.tm_sec);
    if millis {
        text += &format!(".{:03}", ts_ms % 1000);
    }
    text
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
    use super::*;

    fn dir(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("foster-event-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn record(helper: &str) -> Record {
        Record {
            version: crate::base::json::VERSION,
            ts_ms: 1,
            event: Event::LaunchFailed {
                helper: helper.to_string(),
                identity: None,
                error: String::new(),
                status: None,
            },
        }
    }

    fn len(p: &Path) -> u64 {
        std::fs::metadata(p).map_or(0, |m| m.len())
    }

    fn id(pid: i32) -> Identity {
        Identity { pid, start_time: 1 }
    }

    fn exit(helper: Option<&str>, generation: u32, pid: i32, status: ExitStatus) -> Event {
        Event::Exit {
            pid,
            identity: None,
            helper: helper.map(str::to_string),
            generation: Some(generation),
            status,
        }
    }

    fn signal(helper: &str, generation: u32, signal: &str, reason: SignalReason) -> Event {
        Event::Signal {
            target: id(4801),
            helper: Some(helper.into()),
            generation: Some(generation),
            signal: signal.into(),
            reason,
            grace_ms: (reason != SignalReason::GraceExpired).then_some(15_000),
        }
    }

    #[test]
    fn events_read_as_one_line_each_with_peer_text_escaped() {
        let reparented = Event::Reparented {
            identity: id(10),
            helper: Some("orphaner".into()),
            generation: Some(3),
            from: Some(id(9)),
            to: id(1),
            expected: Some(id(5)),
            classification: Classification::Escaped,
        };
        assert_eq!(
            reparented.to_string(),
            "orphaner's grandchild 10 lost its parent 9 and was adopted by 1: UNEXPECTED (escaped; \
             expected 5)"
        );
        let killed = ExitStatus::Signaled {
            signal: 9,
            core_dumped: false,
        };
        let cases = [
            (
                Event::Start {
                    supervisor: id(1),
                    contained: true,
                    socket: Some("/run/foster/x.sock".into()),
                },
                "supervisor 1 started, in a PID namespace of its own; control socket \
                 /run/foster/x.sock",
            ),
            (
                Event::Launch {
                    helper: "web".into(),
                    identity: id(101),
                    attempt: 1,
                },
                "web[101] launched",
            ),
            (
                Event::Launch {
                    helper: "web".into(),
                    identity: id(0),
                    attempt: 2,
                },
                "web[?] launched (attempt 2)",
            ),
            (
                exit(Some("crasher"), 1, 4730, ExitStatus::Exited { code: 3 }),
                "crasher[4730] exited with code 3",
            ),
            (
                exit(Some("w"), 2, 12, killed),
                "w's child 12 was killed by SIGKILL",
            ),
            (
                exit(Some("w"), 5, 12, killed),
                "w's descendant 12 (generation 5) was killed by SIGKILL",
            ),
            (
                exit(
                    None,
                    3,
                    12,
                    ExitStatus::Signaled {
                        signal: 11,
                        core_dumped: true,
                    },
                ),
                "process 12 was killed by SIGSEGV (core dumped)",
            ),
            (
                Event::LaunchFailed {
                    helper: "web".into(),
                    identity: None,
                    error: "exec failed: ENOENT: nginx: not found in PATH".into(),
                    status: Some(ExitStatus::Exited { code: 127 }),
                },
                "web could not be launched: exec failed: ENOENT: nginx: not found in PATH \
                 (counts as exit code 127)",
            ),
            (
                Event::Restart {
                    helper: "crasher".into(),
                    attempt: 2,
                    delay_ms: 1500,
                },
                "crasher: restarting in 1.5s (2nd in a row)",
            ),
            (
                Event::GiveUp {
                    helper: "crasher".into(),
                    restarts: 1,
                },
                "crasher: giving up after 1 restart in a row",
            ),
            (
                signal("orphaner", 3, "SIGUSR1", SignalReason::OrphanPolicy),
                "sent SIGUSR1 to orphaner's grandchild 4801 (orphan policy; SIGKILL after 15s)",
            ),
            (
                signal("orphaner", 3, "SIGKILL", SignalReason::OrphanPolicy),
                "sent SIGKILL to orphaner's grandchild 4801 (orphan policy)",
            ),
            (
                signal("orphaner", 3, "SIGKILL", SignalReason::GraceExpired),
                "sent SIGKILL to orphaner's grandchild 4801 (still running at the end of its \
                 grace)",
            ),
            (
                signal("web", 1, "SIGTERM", SignalReason::Stop),
                "sent SIGTERM to web[4801] to stop it (SIGKILL after 15s)",
            ),
            (
                Event::Signal {
                    target: id(7),
                    helper: None,
                    generation: None,
                    signal: "SIGHUP".into(),
                    reason: SignalReason::Control,
                    grace_ms: None,
                },
                "sent SIGHUP to process 7 (asked through the control socket)",
            ),
            (
                Event::Shutdown {
                    signal: Some("SIGTERM".into()),
                },
                "shutting down on SIGTERM: stopping every helper",
            ),
            (
                Event::OutputDropped {
                    helper: "web".into(),
                    lines: 120,
                },
                "120 lines of web's output not shown: foster's standard output is too slow \
                 (they are kept and logged)",
            ),
            (
                Event::Shutdown { signal: None },
                "shutting down: no helper is left running",
            ),
            (
                Event::Stopped { exit_status: 4 },
                "supervisor stopped with exit status 4 (something had to be SIGKILLed after its \
                 grace)",
            ),
            (
                Event::State {
                    helper: "worker".into(),
                    state: HelperState::Waiting,
                    detail: Some("for db: gave up after 5 restarts".into()),
                    status_text: None,
                },
                "worker: waiting for db: gave up after 5 restarts",
            ),
            (
                Event::State {
                    helper: "db".into(),
                    state: HelperState::GaveUp,
                    detail: None,
                    status_text: None,
                },
                "db: gave up",
            ),
            (
                Event::State {
                    helper: "db".into(),
                    state: HelperState::Ready,
                    detail: Some("after 1.2s (notify)".into()),
                    status_text: Some("accepting\nconnections".into()),
                },
                "db: ready after 1.2s (notify) · status: accepting\\nconnections",
            ),
        ];
        for (e, want) in cases {
            assert_eq!(e.to_string(), want);
        }
        // A helper name and an error with a terminal escape and a newline: escaped by `{}`,
        // raw by `{:#}` (for a caller that escapes the whole line).
        let hostile = Event::LaunchFailed {
            helper: "a\x1b]0;owned\x07".into(),
            identity: None,
            error: "line\nnext".into(),
            status: None,
        };
        let shown = hostile.to_string();
        assert!(!shown.chars().any(|c| c.is_control()), "{shown:?}");
        assert_eq!(shown, r"a\e]0;owned\x07 could not be launched: line\nnext");
        assert_eq!(
            format!("{hostile:#}"),
            "a\x1b]0;owned\x07 could not be launched: line\nnext"
        );
        let exit = exit(Some("a\x1b[2J"), 1, 3, ExitStatus::Exited { code: 1 });
        assert_eq!(exit.to_string(), r"a\e[2J[3] exited with code 1");
    }

    #[test]
    fn ordinals_read_as_people_say_them() {
        let said: Vec<String> = [1, 2, 3, 4, 11, 12, 13, 21, 22, 23, 101, 111, 112]
            .into_iter()
            .map(|n| Ordinal(n).to_string())
            .collect();
        assert_eq!(
            said,
            [
                "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "23rd",
                "101st", "111th", "112th"
            ]
        );
    }

    /// The narration joins a helper's exit with the decision on it, holds an exit until the
    /// next event or a flush, and picks the lines by verbosity.
    #[test]
    fn the_narration_joins_an_exit_with_its_decision_and_follows_the_verbosity() {
        let code3 = ExitStatus::Exited { code: 3 };
        let events = [
            exit(Some("crasher"), 1, 10, code3),
            Event::Restart {
                helper: "crasher".into(),
                attempt: 3,
                delay_ms: 2000,
            },
            exit(Some("orphaner"), 3, 11, code3),
            exit(Some("once"), 1, 12, ExitStatus::Exited { code: 0 }),
            Event::Launch {
                helper: "crasher".into(),
                identity: id(13),
                attempt: 4,
            },
            exit(Some("crasher"), 1, 13, code3),
            Event::GiveUp {
                helper: "crasher".into(),
                restarts: 3,
            },
            exit(Some("last"), 1, 14, code3),
            Event::LaunchFailed {
                helper: "web".into(),
                identity: None,
                error: "exec failed: ENOENT: nginx: not found in PATH".into(),
                status: Some(ExitStatus::Exited { code: 127 }),
            },
            Event::GiveUp {
                helper: "web".into(),
                restarts: 5,
            },
        ];
        let lines = |verbosity| {
            let mut n = Narration::new(verbosity);
            let mut out: Vec<String> = events.iter().flat_map(|e| n.push(e)).collect();
            out.extend(n.flush());
            out
        };
        assert_eq!(
            lines(0),
            [
                "foster: crasher[10] exited with code 3; restarting in 2s (3rd in a row)\n",
                "foster: once[12] exited with code 0\n",
                "foster: crasher[13] launched (attempt 4)\n",
                "foster: crasher[13] exited with code 3; giving up after 3 restarts in a row\n",
                "foster: last[14] exited with code 3\n",
                "foster: web could not be launched: exec failed: ENOENT: nginx: not found in \
                 PATH (counts as exit code 127); giving up after 5 restarts in a row\n",
            ]
        );
        let verbose = lines(1);
        assert_eq!(verbose.len(), 7, "{verbose:?}");
        assert_eq!(
            verbose[1],
            "foster: orphaner's grandchild 11 exited with code 3\n"
        );
        assert!(lines(-1).is_empty());
    }

    #[test]
    fn the_events_log_is_json_lines_rotated_by_the_shared_rotation() {
        let d = dir("log");
        let p = d.join("e.jsonl");
        let rotation = Rotation {
            max_size: 150,
            keep: 1,
        };
        let mut log = EventLog::open(&p, rotation).unwrap();
        log.write(&record("a")).unwrap();
        let one = len(&p);
        log.write(&record("b")).unwrap();
        assert_eq!(len(&p), 2 * one, "two lines fit");
        log.write(&record("c")).unwrap();
        assert_eq!(len(&p), one, "the third starts a new file");
        let old = std::fs::read_to_string(d.join("e.jsonl.1")).unwrap();
        for (l, h) in old.lines().zip(["a", "b"]) {
            let back: Record = serde_json::from_str(l).unwrap();
            assert_eq!(back, record(h));
        }
        let _ = std::fs::remove_dir_all(&d);
    }
}
