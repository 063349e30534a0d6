//! The one rendering of an [`Event`] for people, on one line without its time (`Display`):
//! `foster run`'s lines, `foster ctl events`, the dashboard's events pane, `foster demo`. The
//! alternate form `{:#}` leaves the strings an event carries as they are; `{}` escapes them.

use std::fmt;

use super::{Event, SignalReason, shown};
use crate::gate::adoption::Classification;
use crate::process::identity::Identity;
use crate::process::reaper::ExitStatus;

impl Event {
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
}

/// One event for people, on one line, without its time: the one rendering of an event, shared
/// by `foster run`'s lines on standard error ([`Narration`]), `foster ctl events`, the
/// dashboard's events pane and `foster demo`. A process reads as its helper's name and pid,
/// `crasher[4730]`, or as its kin, `orphaner's grandchild 4801`; a status in words, `exited with
/// code 3`, `was killed by SIGKILL`.
///
/// Every string an event carries (helper names from a configuration, error texts, signal names,
/// the socket's path: text a peer sent) goes through [`crate::base::sanitize::escape`], so that
/// `{}` is safe on a terminal. The alternate form `{:#}` leaves those strings as they are, for a
/// caller that escapes the whole line itself when it draws it (the dashboard's events pane), so
/// that they are not escaped twice. A pid of 0 (a process the reader's PID namespace could not
/// see) is shown as `?`.
impl fmt::Display for Event {
    // Long: one sentence for each event, one arm each.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let raw = f.alternate();
        let text = |s: &str| shown(s, raw);
        let who = |helper: &Option<String>, generation: Option<u32>, pid: i32| {
            Who::new(helper, generation, pid, raw)
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
    // Long: one sentence for each event, one arm each.
    fn fmt_rest(&self, f: &mut fmt::Formatter<'_>, raw: bool) -> fmt::Result {
        let text = |s: &str| shown(s, raw);
        let who = |helper: &Option<String>, generation: Option<u32>, pid: i32| {
            Who::new(helper, generation, pid, raw)
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

impl Who {
    /// Who an event names, its helper's name shown as [`Event`]'s `Display` shows text.
    fn new(helper: &Option<String>, generation: Option<u32>, pid: i32, raw: bool) -> Who {
        Who {
            helper: helper.as_deref().map(|s| shown(s, raw)),
            generation,
            pid,
        }
    }
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
pub(super) struct Decided<'a>(pub(super) &'a Event);

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::state::HelperState;

    use super::super::fixtures::{exit, id};

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
}
