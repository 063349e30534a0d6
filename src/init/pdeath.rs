//! `-p SIGNAL[:exit[:GRACE]]`: foster's own parent-death signal.
//!
//! Owns reading `-p` ([`parse_pdeath`]), arming it through the gate before PROGRAM starts
//! ([`arm`]), and telling whether an arrival of the armed signal reports the parent's death
//! ([`OwnPdeath::reports_death`]). The signal is forwarded to PROGRAM like any other; the loop
//! gives PROGRAM (its group with `-g`) SIGKILL if it is still there after the grace.

use std::io;
use std::time::Duration;

use super::signals;
use crate::gate::policy::{Policy, Reaction};
use crate::gate::{GatePlan, GateStop, SignalSetup};
use crate::process::identity::Identity;

/// `-p SIGNAL[:exit[:GRACE]]` is not one foster can take or arm; the message names the value.
#[derive(Debug, thiserror::Error)]
pub enum PdeathError {
    /// Not a policy.
    #[error("{0}")]
    Policy(#[from] crate::gate::policy::PolicyError),
    /// A chain of generations.
    #[error(
        "{0:?}: one generation only (SIGNAL[:exit[:GRACE]]): -p is foster's own; give \
         PROGRAM's chain with --policy"
    )]
    Chain(String),
    /// Reaction `notify`.
    #[error(
        "{0:?}: reaction notify is for a program that handles the event itself; foster \
         forwards the signal to PROGRAM (exit) or dies at once (kill)"
    )]
    Notify(String),
    /// A signal foster does not forward.
    #[error("-p {0}: not a signal foster can receive and forward (use TERM, HUP, KILL...)")]
    NotForwarded(String),
    /// `FOSTER_PARENT` is not an identity.
    #[error("{var}: {0}", var = crate::gate::policy::ENV_PARENT)]
    ExpectedParent(#[from] crate::process::identity::IdentityError),
    /// `prctl(PR_SET_PDEATHSIG)` failed.
    #[error("-p {signal}: prctl(PR_SET_PDEATHSIG) failed: {source}")]
    Arm {
        signal: String,
        #[source]
        source: io::Error,
    },
    /// The parent is already gone: PROGRAM is not started, foster ends with the gate's status
    /// ([`GateStop::exit_status`]).
    #[error("-p {signal}: {stop}; expected {expected}: not starting PROGRAM")]
    ParentGone {
        signal: String,
        expected: Identity,
        #[source]
        stop: GateStop,
    },
    /// The gate stopped for another reason than a parent already gone.
    #[error("-p {signal}: {stop}")]
    Gate {
        signal: String,
        #[source]
        stop: GateStop,
    },
}

/// foster's own parent-death signal, armed by `-p`, and what its arrival means.
#[derive(Debug)]
pub(super) struct OwnPdeath {
    pub(super) signal: i32,
    /// How long PROGRAM has to end after the parent's death before SIGKILL.
    pub(super) grace: Duration,
    /// The parent's pid, when foster can see it; `None` as PID 1 of a namespace whose parent
    /// lives outside it.
    parent: Option<i32>,
}

impl OwnPdeath {
    /// Whether this arrival of the armed signal reports the parent's death. When foster can
    /// see its parent: the kernel reparents foster before it sends the signal, so `getppid()`
    /// no longer names that parent (a plain `kill` of the same signal leaves it). As a
    /// namespace's PID 1: the signal came from outside the namespace (`ssi_pid` 0), as the
    /// dying parent's does, and as the container runtime's own signals do; foster cannot tell
    /// those apart.
    pub(super) fn reports_death(&self, info: &libc::signalfd_siginfo) -> bool {
        match self.parent {
            Some(pid) => nix::unistd::getppid().as_raw() != pid,
            None => info.ssi_pid == 0,
        }
    }
}

/// Reads `-p`'s value: one policy generation, `SIGNAL[:exit[:GRACE]]` (the grace defaults to
/// the policy's 5 s), or `KILL` (reaction `kill`).
pub fn parse_pdeath(text: &str) -> Result<Policy, PdeathError> {
    let policy = text.parse::<Policy>()?;
    if policy.next.is_some() {
        return Err(PdeathError::Chain(text.to_string()));
    }
    if policy.reaction == Reaction::Notify {
        return Err(PdeathError::Notify(text.to_string()));
    }
    Ok(policy)
}

/// Arms foster's own parent-death signal through the gate, in-process: foster blocks the
/// signal and consumes it on its forwarding signalfd (so it reaches PROGRAM like any other
/// forwarded signal), the gate arms it, reads it back and checks that the parent is still the
/// expected one: `FOSTER_PARENT` when set, otherwise the parent foster started with
/// (`first_parent`). A parent already gone is [`PdeathError::ParentGone`] (status 120). When the
/// parent lives in another PID namespace (`getppid()` is 0: foster is a container's PID 1), the
/// signal is armed but cannot be re-checked, and foster says so.
pub(super) fn arm(
    policy: &Policy,
    first_parent: Option<Identity>,
) -> Result<OwnPdeath, PdeathError> {
    let sig = policy.signal;
    let sname = crate::process::signal::name(sig);
    if sig != libc::SIGKILL && !signals::forwarded().contains(sig) {
        return Err(PdeathError::NotForwarded(sname));
    }
    let expected = match std::env::var(crate::gate::policy::ENV_PARENT) {
        Ok(text) => Some(text.parse::<Identity>()?),
        Err(_) => first_parent,
    };
    let in_other_namespace = nix::unistd::getppid().as_raw() == 0;
    let armed = |parent: Option<i32>| OwnPdeath {
        signal: sig,
        grace: policy.grace,
        parent,
    };
    let Some(expected) = expected.filter(|_| !in_other_namespace) else {
        arm_unchecked(sig, sname)?;
        return Ok(armed(None));
    };
    match GatePlan::new(expected, policy, SignalSetup::Consumed).run() {
        Ok(_) => {
            say!(1, "-p {sname}: armed, read back, parent {expected} checked");
            Ok(armed(Some(expected.pid)))
        }
        Err(stop @ GateStop::ParentGone { .. }) => Err(PdeathError::ParentGone {
            signal: sname,
            expected,
            stop,
        }),
        Err(stop) => Err(PdeathError::Gate {
            signal: sname,
            stop,
        }),
    }
}

/// Arms `sig` (named `sname`) without the gate: there is no parent foster can check.
fn arm_unchecked(sig: i32, sname: String) -> Result<(), PdeathError> {
    // SAFETY: prctl with integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, sig as libc::c_ulong, 0, 0, 0) } != 0 {
        return Err(PdeathError::Arm {
            signal: sname,
            source: io::Error::last_os_error(),
        });
    }
    say!(
        1,
        "-p {sname}: armed; the parent lives in another PID namespace (getppid() is 0), so it \
         cannot be re-checked"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pdeath_takes_one_generation_with_its_grace() {
        let p = parse_pdeath("TERM").unwrap();
        assert_eq!(
            (p.signal, p.reaction, p.grace),
            (
                libc::SIGTERM,
                Reaction::Exit,
                crate::gate::policy::DEFAULT_GRACE
            )
        );
        let p = parse_pdeath("HUP:exit:300ms").unwrap();
        assert_eq!(p.grace, Duration::from_millis(300));
        assert_eq!(parse_pdeath("KILL").unwrap().reaction, Reaction::Kill);
        assert!(
            parse_pdeath("TERM;KILL")
                .unwrap_err()
                .to_string()
                .contains("one generation")
        );
        let e = parse_pdeath("USR1:notify").unwrap_err();
        assert!(e.to_string().contains("notify"));
        assert!(matches!(parse_pdeath("STOP"), Err(PdeathError::Policy(_))));
        assert!(parse_pdeath("STOP").is_err());
        assert!(parse_pdeath("TERM:kill").is_err());
    }
}
