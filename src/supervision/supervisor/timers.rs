//! The supervisor's timers: what each is for ([`Timer`], [`CheckTimer`]), and those armed
//! ([`Timers`]).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::process::identity::Identity;
use crate::supervision::event::Check;

/// A timer of a helper's checks (with the helper and its launch in [`Timer::Check`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CheckTimer {
    /// The readiness deadline.
    ReadyDeadline,
    /// The next attempt of a probe, for this check.
    Attempt(Check),
    /// The exec probe of this attempt ([`ExecProbe::attempt`]) may have run out of time.
    ProbeTimeout(u32),
    /// The watchdog's period may have run out.
    Watchdog,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Timer {
    Restart(usize),
    /// A helper's stop grace ran out (`usize::MAX`: the grace of adopted processes).
    StopGrace(usize),
    OrphanGrace(Identity),
    Scan,
    /// The periodic read of `supervisor.rescan`, where births are not announced.
    Rescan,
    /// A timer of helper `i`'s checks, for its launch `n`.
    Check(usize, u32, CheckTimer),
}

/// The armed timers, soonest first (those due at the same instant in the order armed).
#[derive(Debug, Default)]
pub(super) struct Timers {
    armed: BTreeMap<(Instant, u64), Timer>,
    /// How many were armed so far: the order of those due at the same instant.
    seq: u64,
}

impl Timers {
    /// Arms `timer` to fire `delay` from now.
    pub(super) fn at(&mut self, delay: Duration, timer: Timer) {
        self.seq += 1;
        self.armed.insert((Instant::now() + delay, self.seq), timer);
    }

    /// The soonest deadline, if a timer is armed.
    pub(super) fn next(&self) -> Option<Instant> {
        self.armed.first_key_value().map(|(k, _)| k.0)
    }

    /// The soonest timer due at `now`, disarmed; none when the soonest is later.
    pub(super) fn pop_due(&mut self, now: Instant) -> Option<Timer> {
        let (&key, _) = self.armed.first_key_value()?;
        if key.0 > now {
            return None;
        }
        self.armed.remove(&key)
    }

    /// Whether `timer` is armed.
    pub(super) fn is_armed(&self, timer: Timer) -> bool {
        self.armed.values().any(|t| *t == timer)
    }

    /// When `timer` fires, if it is armed.
    pub(super) fn deadline(&self, timer: Timer) -> Option<Instant> {
        self.armed
            .iter()
            .find(|(_, t)| **t == timer)
            .map(|(k, _)| k.0)
    }

    /// Disarms every timer `which` picks.
    pub(super) fn cancel(&mut self, mut which: impl FnMut(&Timer) -> bool) {
        self.armed.retain(|_, t| !which(t));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Timers fire soonest first, those due together in the order armed; a later one waits.
    #[test]
    fn timers_fire_soonest_first_and_in_the_order_armed() {
        let mut t = Timers::default();
        t.at(Duration::from_secs(3600), Timer::Rescan);
        t.at(Duration::ZERO, Timer::Restart(2));
        t.at(Duration::ZERO, Timer::Restart(1));
        t.at(Duration::ZERO, Timer::Scan);
        // Taken after they were armed: those without a delay are due.
        let now = Instant::now();
        assert!(t.is_armed(Timer::Rescan) && t.deadline(Timer::Rescan) > Some(now));
        t.cancel(|x| *x == Timer::Restart(1));
        assert!(!t.is_armed(Timer::Restart(1)));
        assert_eq!(t.pop_due(now), Some(Timer::Restart(2)));
        assert_eq!(t.pop_due(now), Some(Timer::Scan));
        assert_eq!(t.pop_due(now), None, "the last one is not due");
        assert_eq!(t.next(), t.deadline(Timer::Rescan));
    }
}
