//! `--wait-all`: the end of the rest of the tree once PROGRAM has ended.
//!
//! Owns the [`Phase`] of foster init's life (PROGRAM runs; the rest of the tree got SIGTERM
//! and has the grace; the rest got SIGKILL) and [`signal_rest`], the one way foster init
//! signals the rest of the tree.

use std::time::Instant;

use super::role::Role;

/// Where foster init is in its life.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Phase {
    /// PROGRAM runs.
    Running,
    /// PROGRAM ended; the rest got SIGTERM and has until the deadline.
    Draining(Instant),
    /// The rest got SIGKILL; waiting until nothing is left.
    Killing,
}

/// Sends `sig` to the rest of the tree: as PID 1 every other process of the namespace
/// (`kill(-1)`), otherwise every descendant of foster ([`crate::process::tree::descendant_ids`]:
/// one listing of `/proc` on this thread, no other thread started), each by a pidfd opened and
/// checked against the identity the listing saw.
pub(super) fn signal_rest(role: &Role, sig: i32) {
    if *role == Role::Pid1 {
        // SAFETY: kill with plain integers.
        let r = unsafe { libc::kill(-1, sig) };
        say!(
            2,
            "{} to every process of the namespace: {}",
            crate::process::signal::name(sig),
            if r == 0 { "sent" } else { "none left" }
        );
        return;
    }
    let me = std::process::id() as i32;
    let below = match crate::process::tree::descendant_ids(me) {
        Ok(below) => below,
        Err(e) => {
            say_error!("cannot list the rest of the tree: {e}");
            return;
        }
    };
    for id in below {
        let sent = crate::process::identity::signal(id, sig).is_ok();
        say!(
            2,
            "{} to descendant {id}: {}",
            crate::process::signal::name(sig),
            if sent { "sent" } else { "gone" }
        );
    }
}
