//! The restart state machine of one helper: restart or not, after which delay, and when to give
//! up.
//!
//! Pure logic, no clock of its own: the supervisor passes how long the helper ran. A run of at
//! least `reset_after` forgets earlier failures; otherwise each restart doubles the delay (from
//! `initial`, capped at `max`), and after `limit` restarts in a row foster gives up (never
//! with `limit = "unlimited"`).

use std::time::Duration;

use crate::process::reaper::ExitStatus;
use crate::supervision::config::{Backoff, RestartMode};

/// What to do after a helper ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Start it again after this delay; `attempt` counts restarts in a row, from 1.
    Restart { delay: Duration, attempt: u32 },
    /// The restart mode says no (it succeeded under `on-failure`, or mode `never`).
    Done,
    /// It would be restarted, but `limit` restarts in a row have been made.
    GiveUp { restarts: u32 },
}

/// The count of restarts in a row.
#[derive(Debug, Clone, Default)]
pub struct RestartState {
    in_a_row: u32,
}

impl RestartState {
    /// Decides after an exit with `status` following a run of `ran_for`.
    pub fn on_exit(
        &mut self,
        mode: RestartMode,
        backoff: &Backoff,
        status: ExitStatus,
        ran_for: Duration,
    ) -> Decision {
        let wanted = match mode {
            RestartMode::Never => false,
            RestartMode::OnFailure => !status.success(),
            RestartMode::Always => true,
        };
        if !wanted {
            return Decision::Done;
        }
        if ran_for >= backoff.reset_after.0 {
            self.in_a_row = 0;
        }
        if backoff.limit != Backoff::UNLIMITED && self.in_a_row >= backoff.limit {
            return Decision::GiveUp {
                restarts: self.in_a_row,
            };
        }
        let delay = delay_for(backoff, self.in_a_row);
        self.in_a_row = self.in_a_row.saturating_add(1);
        Decision::Restart {
            delay,
            attempt: self.in_a_row,
        }
    }

    /// Restarts made in a row so far.
    pub fn in_a_row(&self) -> u32 {
        self.in_a_row
    }
}

/// The delay before restart number `n + 1` in a row: `initial * 2^n`, at most `max`.
pub fn delay_for(backoff: &Backoff, n: u32) -> Duration {
    let factor = 1u32.checked_shl(n.min(31)).unwrap_or(u32::MAX);
    backoff
        .initial
        .0
        .checked_mul(factor)
        .unwrap_or(backoff.max.0)
        .min(backoff.max.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::supervision::config::PositiveDuration;

    fn backoff(limit: u32) -> Backoff {
        Backoff {
            initial: PositiveDuration(Duration::from_millis(100)),
            max: PositiveDuration(Duration::from_millis(500)),
            limit,
            reset_after: PositiveDuration(Duration::from_secs(10)),
        }
    }

    const FAIL: ExitStatus = ExitStatus::Exited { code: 1 };
    const OK: ExitStatus = ExitStatus::Exited { code: 0 };

    #[test]
    fn doubles_caps_and_gives_up() {
        let b = backoff(5);
        let mut s = RestartState::default();
        let short = Duration::from_millis(1);
        let delays: Vec<_> = (0..5)
            .map(
                |_| match s.on_exit(RestartMode::OnFailure, &b, FAIL, short) {
                    Decision::Restart { delay, .. } => delay.as_millis(),
                    d => panic!("{d:?}"),
                },
            )
            .collect();
        assert_eq!(delays, [100, 200, 400, 500, 500]);
        assert_eq!(
            s.on_exit(RestartMode::OnFailure, &b, FAIL, short),
            Decision::GiveUp { restarts: 5 }
        );
    }

    #[test]
    fn unlimited_never_gives_up() {
        let b = backoff(Backoff::UNLIMITED);
        let mut s = RestartState {
            in_a_row: u32::MAX - 2,
        };
        let short = Duration::from_millis(1);
        for _ in 0..4 {
            let d = s.on_exit(RestartMode::Always, &b, FAIL, short);
            assert!(matches!(d, Decision::Restart { delay, .. } if delay.as_millis() == 500));
        }
        assert_eq!(s.in_a_row(), u32::MAX);
    }

    #[test]
    fn modes_and_reset() {
        let b = backoff(2);
        let mut s = RestartState::default();
        let short = Duration::from_millis(1);
        assert_eq!(
            s.on_exit(RestartMode::OnFailure, &b, OK, short),
            Decision::Done
        );
        assert_eq!(
            s.on_exit(RestartMode::Never, &b, FAIL, short),
            Decision::Done
        );
        assert!(matches!(
            s.on_exit(RestartMode::Always, &b, OK, short),
            Decision::Restart { attempt: 1, .. }
        ));
        assert!(matches!(
            s.on_exit(RestartMode::Always, &b, OK, short),
            Decision::Restart { attempt: 2, .. }
        ));
        assert!(matches!(
            s.on_exit(RestartMode::Always, &b, OK, short),
            Decision::GiveUp { .. }
        ));
        // A long run forgets the failures.
        let long = Duration::from_secs(11);
        assert_eq!(
            s.on_exit(RestartMode::Always, &b, OK, long),
            Decision::Restart {
                delay: Duration::from_millis(100),
                attempt: 1
            }
        );
        let none = backoff(0);
        let mut s = RestartState::default();
        assert_eq!(
            s.on_exit(RestartMode::Always, &none, OK, short),
            Decision::GiveUp { restarts: 0 }
        );
    }
}
