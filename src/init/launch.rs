//! Starting PROGRAM: the one function `foster init` calls to create it, through the spawner.
//!
//! Owns the translation of foster init's wishes into a [`LaunchSpec`] for the
//! [`Spawner`](crate::gate::spawner::Spawner) (the same long-lived creator thread and
//! `clone(CLONE_VM | CLONE_VFORK | CLONE_PIDFD)` launch as `foster run`): PROGRAM's process
//! group (always one of its own, led by PROGRAM, as tini does), the terminal's foreground group, the signal state foster inherited (dispositions and
//! mask, restored after the gate), and with `--policy` the gate (PROGRAM's parent-death signal
//! armed, its parent checked, `FOSTER_PARENT`/`FOSTER_POLICY` for its children). Without
//! `--policy` PROGRAM runs unarmed with foster's environment untouched, as under tini.
//!
//! foster never waits here: PROGRAM, even one whose exec failed, is the reaper's to reap, and
//! its status (126 or 127 after a failed exec, the gate's 120–125) reaches the owner registered
//! for its pid.

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use super::tty::Terminal;
use crate::gate::TargetError;
use crate::gate::policy::Policy;
use crate::gate::spawner::{ExecSignals, LaunchSpec, SpawnError, Spawner};
use crate::process::signal::Inherited;

/// Everything the launch needs.
#[derive(Debug)]
pub struct LaunchPlan {
    /// PROGRAM as the user gave it (for messages and `argv[0]`).
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Hand this terminal's foreground to PROGRAM's group.
    pub terminal: Option<Terminal>,
    /// The signal state PROGRAM gets back.
    pub inherited: Inherited,
    /// PROGRAM's parent-death policy chain (`--policy`); `None`: unarmed.
    pub policy: Option<Policy>,
}

/// A created PROGRAM. When `failed` is set, the child ended before or instead of its exec
/// (exec failure, gate stop) with the status it will be reaped with; the text says why.
/// Otherwise `pidfd` is the pidfd `clone` returned with it.
#[derive(Debug)]
pub struct Launched {
    pub pid: i32,
    pub pidfd: Option<OwnedFd>,
    pub failed: Option<String>,
}

/// PROGRAM could not even be created: the message, the exit status foster ends with, and the
/// spawner's error as the source.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct LaunchError {
    pub message: String,
    pub status: i32,
    #[source]
    pub cause: SpawnError,
}

fn name(program: &OsString) -> String {
    crate::base::sanitize::escape(program.as_bytes())
}

/// Creates PROGRAM on `spawner`. Returns once it has exec'd or failed to.
pub fn launch(spawner: &Spawner, plan: &LaunchPlan) -> Result<Launched, LaunchError> {
    let gated = plan.policy.is_some();
    let mut spec = LaunchSpec::new(
        PathBuf::from(&plan.program),
        &plan.args,
        plan.policy.clone().unwrap_or_else(Policy::term),
    );
    spec.gated = gated;
    // PROGRAM always leads a process group of its own, as under tini (its isolate_child).
    spec.new_process_group = true;
    spec.foreground_tty = plan.terminal.map(|t| t.fd);
    spec.exec_signals = Some(ExecSignals {
        mask: plan.inherited.mask.0,
        ignored: plan.inherited.ignored.0,
    });
    match spawner.launch(spec) {
        Ok(l) => Ok(Launched {
            pid: l.pid,
            pidfd: Some(l.pidfd),
            failed: None,
        }),
        Err(SpawnError::Target(e)) => {
            let message = match &e {
                TargetError::NotFound(_) if !plan.program.as_bytes().contains(&b'/') => {
                    format!("cannot run {}: not found in PATH", name(&plan.program))
                }
                TargetError::NotFound(_) => {
                    format!("cannot run {}: no such file", name(&plan.program))
                }
                e if e.is_privileged() => {
                    format!("cannot run {} under --policy: {e}", name(&plan.program))
                }
                TargetError::NotExecutable(p) => format!(
                    "cannot execute {}: not an executable regular file",
                    crate::base::sanitize::escape(p.as_os_str().as_bytes())
                ),
                e => format!("cannot execute {}: {e}", name(&plan.program)),
            };
            Err(LaunchError {
                message,
                status: e.exit_status(),
                cause: SpawnError::Target(e),
            })
        }
        Err(SpawnError::Exec { pid, errno, .. }) => Ok(Launched {
            pid,
            pidfd: None,
            failed: Some(format!(
                "cannot execute {}: {}",
                name(&plan.program),
                std::io::Error::from_raw_os_error(errno)
            )),
        }),
        Err(SpawnError::Gate { pid, stop, .. }) => Ok(Launched {
            pid,
            pidfd: None,
            failed: Some(format!(
                "{} stopped by the gate before its exec: {stop}",
                name(&plan.program)
            )),
        }),
        Err(SpawnError::Setup {
            pid, what, errno, ..
        }) => Ok(Launched {
            pid,
            pidfd: None,
            failed: Some(format!(
                "{}: {what} failed: {}",
                name(&plan.program),
                std::io::Error::from_raw_os_error(errno)
            )),
        }),
        Err(e) => Err(LaunchError {
            message: format!("cannot launch {}: {e}", name(&plan.program)),
            status: 1,
            cause: e,
        }),
    }
}
