//! The supervisor's timers: what each is for ([`Timer`], [`CheckTimer`]).

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
