//! `foster run`'s lines on standard error: each event's line by verbosity, a helper's exit
//! held until the decision on it, so that the two read as one line.

use super::Event;
use super::render::Decided;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::reaper::ExitStatus;

    use super::super::fixtures::{exit, id};

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
}
