//! A helper's state: the one documented set every part of foster speaks of.
//!
//! Owns [`HelperState`], where a helper of `foster run` is in its life (waiting for a
//! dependency, starting, running, ready, unhealthy, stopping, stopped, backoff, gave up,
//! completed, failed), its words for people ([`HelperState::text`]), and [`Condition`], what a
//! dependency must reach before its dependent is launched (`depends_on` in the configuration),
//! with the one rule saying which states meet which condition ([`Condition::met_by`]). The
//! supervisor keeps each helper in one of these states; `foster ctl status` (text and JSON),
//! the `state` event and the dashboard show them as they are. `docs/run.md` has the table.
//! And [`Role`], a process's place in the supervised tree, as a status reports it and the
//! tree's renderings and the dashboard mark it.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Where a helper is in its life. The JSON form is the snake_case name (`gave_up`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HelperState {
    /// Not launched: a dependency has not reached its condition yet (or never will: it gave
    /// up, failed, or was stopped; the helper's detail says which).
    Waiting,
    /// Launched; its readiness check has not passed yet.
    Starting,
    /// Running. A helper without a readiness check counts as ready once it runs (as systemd's
    /// `Type=simple`).
    Running,
    /// Running, and its readiness check passed.
    Ready,
    /// Running, and failing its health check (not yet as many times in a row as it may).
    Unhealthy,
    /// Asked to stop (the shutdown, `ctl stop`, `ctl restart`, a failed check): its stop
    /// signal was sent; what is left of its tree gets SIGKILL when its stop grace runs out.
    Stopping,
    /// Stopped by a request (`ctl stop`, or the supervisor's shutdown): not launched again,
    /// whatever its restart rule, until `ctl start` (or `ctl restart`).
    Stopped,
    /// Ended; launched again when its restart delay is over.
    Backoff,
    /// Ended after `backoff.limit` restarts in a row: not launched again (until `ctl start`
    /// or `ctl restart`).
    GaveUp,
    /// Ended with exit status 0 and not launched again.
    Completed,
    /// Ended in failure (a non-zero exit, a signal, a launch that failed) and not launched
    /// again.
    Failed,
}

impl HelperState {
    /// Every state, in the order of the documentation.
    pub const ALL: [HelperState; 11] = [
        HelperState::Waiting,
        HelperState::Starting,
        HelperState::Running,
        HelperState::Ready,
        HelperState::Unhealthy,
        HelperState::Stopping,
        HelperState::Stopped,
        HelperState::Backoff,
        HelperState::GaveUp,
        HelperState::Completed,
        HelperState::Failed,
    ];

    /// The state in a person's words, as status, events and the dashboard show it
    /// (`gave up`).
    pub fn text(self) -> &'static str {
        match self {
            HelperState::Waiting => "waiting",
            HelperState::Starting => "starting",
            HelperState::Running => "running",
            HelperState::Ready => "ready",
            HelperState::Unhealthy => "unhealthy",
            HelperState::Stopping => "stopping",
            HelperState::Stopped => "stopped",
            HelperState::Backoff => "backoff",
            HelperState::GaveUp => "gave up",
            HelperState::Completed => "completed",
            HelperState::Failed => "failed",
        }
    }

    /// Whether the helper has a process now (launched and not yet ended). A helper that is
    /// `Stopping` may have none left while what remains of its tree ends.
    pub fn is_up(self) -> bool {
        matches!(
            self,
            HelperState::Starting
                | HelperState::Running
                | HelperState::Ready
                | HelperState::Unhealthy
        )
    }

    /// Whether the state is a failure an operator should see (gave up, failed, unhealthy).
    pub fn is_trouble(self) -> bool {
        matches!(
            self,
            HelperState::GaveUp | HelperState::Failed | HelperState::Unhealthy
        )
    }
}

impl fmt::Display for HelperState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.text())
    }
}

/// What a dependency must reach before its dependent is launched: `depends_on = { db =
/// "ready", migrate = "completed", cache = "started" }`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Condition {
    /// It runs (launched, ready or not), or it ran and completed.
    Started,
    /// It passed its readiness check (a helper without one: it runs), or it ran and
    /// completed.
    Ready,
    /// It ended with exit status 0 and is not launched again.
    Completed,
}

impl Condition {
    /// The condition in a person's words, after "waiting for NAME to be ...": `started`,
    /// `ready`, `completed`.
    pub fn text(self) -> &'static str {
        match self {
            Condition::Started => "started",
            Condition::Ready => "ready",
            Condition::Completed => "completed",
        }
    }

    /// Whether a dependency in `state` meets this condition. A helper without a readiness
    /// check is `Running` once launched, which meets `ready`; one that is `Unhealthy` passed
    /// its readiness check before, and still meets it.
    pub fn met_by(self, state: HelperState) -> bool {
        use HelperState as S;
        match self {
            Condition::Started => matches!(
                state,
                S::Starting | S::Running | S::Ready | S::Unhealthy | S::Completed
            ),
            Condition::Ready => {
                matches!(state, S::Running | S::Ready | S::Unhealthy | S::Completed)
            }
            Condition::Completed => state == S::Completed,
        }
    }

    /// Whether a dependency in `state` can no longer meet this condition on its own: it gave
    /// up, failed, was stopped by request, or completed without meeting it. Its dependents
    /// are held back until an operator starts it again.
    pub fn held_by(self, state: HelperState) -> bool {
        !self.met_by(state)
            && matches!(
                state,
                HelperState::GaveUp
                    | HelperState::Failed
                    | HelperState::Stopped
                    | HelperState::Completed
            )
    }
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.text())
    }
}

/// A process's place in the supervised tree. The JSON form is the snake_case name
/// (`adopted_orphan`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The supervisor itself, or a nested `foster run` inside its tree.
    Supervisor,
    /// A process the supervisor launched from its configuration.
    Helper,
    /// Any other process below a helper, under the parent it was born to.
    Descendant,
    /// A process whose parent died and that a subreaper of the tree adopted.
    AdoptedOrphan,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_has_one_json_name_and_one_text() {
        let mut names = std::collections::HashSet::new();
        for s in HelperState::ALL {
            let json = serde_json::to_value(s).unwrap();
            let name = json.as_str().unwrap().to_string();
            assert_eq!(name.replace('_', " "), s.text(), "{s:?}");
            assert!(names.insert(name.clone()), "{name} twice");
            let back: HelperState = serde_json::from_value(json).unwrap();
            assert_eq!(back, s);
        }
        assert_eq!(names.len(), HelperState::ALL.len());
    }

    #[test]
    fn conditions_are_met_and_held_as_documented() {
        use HelperState as S;
        for s in HelperState::ALL {
            for c in [Condition::Started, Condition::Ready, Condition::Completed] {
                assert!(
                    !(c.met_by(s) && c.held_by(s)),
                    "{c} both met and held by {s}"
                );
            }
        }
        assert!(Condition::Started.met_by(S::Starting));
        assert!(!Condition::Ready.met_by(S::Starting));
        assert!(Condition::Ready.met_by(S::Running));
        assert!(Condition::Ready.met_by(S::Ready));
        assert!(!Condition::Completed.met_by(S::Running));
        assert!(Condition::Completed.met_by(S::Completed));
        for s in [S::Waiting, S::Stopping, S::Backoff] {
            for c in [Condition::Started, Condition::Ready, Condition::Completed] {
                assert!(!c.met_by(s) && !c.held_by(s), "{c} {s}: not yet");
            }
        }
        assert!(Condition::Completed.held_by(S::Failed));
        assert!(Condition::Started.held_by(S::GaveUp));
        assert!(Condition::Ready.held_by(S::Stopped));
    }
}
