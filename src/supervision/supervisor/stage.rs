//! The supervision's phase ([`Stage`]): where the one shutdown stands, and foster's exit
//! status at the end (`docs/run.md` has the table).

/// Every helper ended successfully, or a requested shutdown ended everything within its grace.
pub const EXIT_OK: i32 = 0;
/// foster could not supervise (subreaper refused, launcher or runtime failure).
pub const EXIT_ERROR: i32 = 1;
/// The configuration is invalid (nothing was started).
pub const EXIT_CONFIG: i32 = 2;
/// No helper is left to supervise and at least one ended in failure or was given up on.
pub const EXIT_HELPER_FAILED: i32 = 3;
/// A requested shutdown completed, but something had to be SIGKILLed after its grace.
pub const EXIT_FORCED: i32 = 4;

/// The supervision's phase: where the one shutdown stands. Its transitions are its methods:
/// `Supervising` → `Stopping` ([`Stage::begin_stop`], once) → `Sweeping`
/// ([`Stage::begin_sweep`]); [`Stage::mark_forced`] records, during the shutdown, that a grace
/// ran out and something was SIGKILLed; [`Stage::exit_status`] reads the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stage {
    /// Launching helpers and restarting them.
    Supervising,
    /// The orderly shutdown: stop signals sent, their graces running.
    Stopping(Shutdown),
    /// The final SIGKILL sweep of whatever is left, repeated on each SIGCHLD until foster has
    /// no child.
    Sweeping(Shutdown),
}

/// What a shutdown records for foster's exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Shutdown {
    /// A signal or a `stop` request asked for it (else: nothing was left to supervise).
    pub(super) requested: bool,
    /// A grace ran out and something had to be SIGKILLed.
    pub(super) forced: bool,
}

impl Stage {
    /// Whether the shutdown has begun (stopping or sweeping).
    pub(super) fn shutting_down(self) -> bool {
        self != Stage::Supervising
    }

    pub(super) fn sweeping(self) -> bool {
        matches!(self, Stage::Sweeping(_))
    }

    /// Supervising → Stopping. Returns false, and changes nothing, once the shutdown has begun.
    pub(super) fn begin_stop(&mut self, requested: bool) -> bool {
        if self.shutting_down() {
            return false;
        }
        *self = Stage::Stopping(Shutdown {
            requested,
            forced: false,
        });
        true
    }

    /// Stopping → Sweeping (sweeping again is no change).
    pub(super) fn begin_sweep(&mut self) {
        *self = match *self {
            Stage::Supervising => Stage::Sweeping(Shutdown {
                requested: false,
                forced: false,
            }),
            Stage::Stopping(s) | Stage::Sweeping(s) => Stage::Sweeping(s),
        };
    }

    /// A grace ran out and something was SIGKILLed: recorded during the shutdown only (an
    /// orphan's grace while supervising does not change foster's exit status).
    pub(super) fn mark_forced(&mut self) {
        if let Stage::Stopping(s) | Stage::Sweeping(s) = self {
            s.forced = true;
        }
    }

    /// foster's exit status once nothing is left; `helpers_succeeded` says whether every
    /// helper ended in success (asked only when no shutdown was requested).
    pub(super) fn exit_status(self, helpers_succeeded: impl FnOnce() -> bool) -> i32 {
        match self {
            Stage::Stopping(s) | Stage::Sweeping(s) if s.requested => {
                if s.forced {
                    EXIT_FORCED
                } else {
                    EXIT_OK
                }
            }
            _ if helpers_succeeded() => EXIT_OK,
            _ => EXIT_HELPER_FAILED,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    pub(super) fn the_stage_moves_forward_once_and_says_the_exit_status() {
        let mut st = Stage::Supervising;
        st.mark_forced(); // an orphan's grace while supervising: not a forced shutdown
        assert_eq!(st, Stage::Supervising);
        assert_eq!(st.exit_status(|| true), EXIT_OK);
        assert_eq!(st.exit_status(|| false), EXIT_HELPER_FAILED);
        assert!(st.begin_stop(true));
        assert!(st.shutting_down() && !st.sweeping());
        assert!(!st.begin_stop(false), "one shutdown only");
        assert_eq!(
            st.exit_status(|| false),
            EXIT_OK,
            "requested, nothing forced"
        );
        st.begin_sweep();
        assert!(st.shutting_down() && st.sweeping());
        st.mark_forced();
        assert_eq!(st.exit_status(|| true), EXIT_FORCED);
        // A shutdown nobody asked for (nothing left to supervise) reports the helpers.
        let mut st = Stage::Supervising;
        assert!(st.begin_stop(false));
        st.mark_forced();
        assert_eq!(st.exit_status(|| false), EXIT_HELPER_FAILED);
        assert_eq!(st.exit_status(|| true), EXIT_OK);
    }
}
