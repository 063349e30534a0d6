//! Starting PROGRAM: the one function `foster init` calls to create it, through the spawner.
//!
//! Owns the translation of foster init's wishes into a [`LaunchSpec`] for the [`Spawner`] (the
//! same long-lived creator thread and `clone(CLONE_VM | CLONE_VFORK | CLONE_PIDFD)` launch as
//! `foster run`): PROGRAM's process group (always one of its own, led by PROGRAM, as tini
//! does), the terminal's foreground group, the signal state foster inherited (dispositions and
//! mask, restored after the gate), and with `--policy` the gate (PROGRAM's parent-death signal
//! armed, its parent checked, `FOSTER_PARENT`/`FOSTER_POLICY` for its children). Without
//! `--policy` PROGRAM runs unarmed with foster's environment untouched, as under tini.
//!
//! foster never waits here: PROGRAM, even one whose exec failed, is the reaper's to reap, and
//! its status (126 or 127 after a failed exec, the gate's 120–125) reaches the owner registered
//! for its pid.

use std::ffi::OsString;
use std::io;
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
    let program = name(&plan.program);
    let ended = |pid, why: String| {
        Ok(Launched {
            pid,
            pidfd: None,
            failed: Some(why),
        })
    };
    match spawner.launch(spec(plan)) {
        Ok(l) => Ok(Launched {
            pid: l.pid,
            pidfd: Some(l.pidfd),
            failed: None,
        }),
        Err(SpawnError::Target(e)) => Err(LaunchError {
            message: target_message(&plan.program, &e),
            status: e.exit_status(),
            cause: SpawnError::Target(e),
        }),
        Err(SpawnError::Exec { pid, errno, .. }) => ended(
            pid,
            format!(
                "cannot execute {program}: {}",
                io::Error::from_raw_os_error(errno)
            ),
        ),
        Err(SpawnError::Gate { pid, stop, .. }) => ended(
            pid,
            format!("{program} stopped by the gate before its exec: {stop}"),
        ),
        Err(SpawnError::Setup {
            pid, what, errno, ..
        }) => ended(
            pid,
            format!(
                "{program}: {what} failed: {}",
                io::Error::from_raw_os_error(errno)
            ),
        ),
        Err(e) => Err(LaunchError {
            message: format!("cannot launch {program}: {e}"),
            status: 1,
            cause: e,
        }),
    }
}

/// The spawner's launch for `plan`.
fn spec(plan: &LaunchPlan) -> LaunchSpec {
    let mut spec = LaunchSpec::new(
        PathBuf::from(&plan.program),
        &plan.args,
        plan.policy.clone().unwrap_or_else(Policy::term),
    );
    spec.gated = plan.policy.is_some();
    // PROGRAM always leads a process group of its own, as under tini (its isolate_child).
    spec.new_process_group = true;
    spec.foreground_tty = plan.terminal.map(|t| t.fd);
    spec.exec_signals = Some(ExecSignals {
        mask: plan.inherited.mask.0,
        ignored: plan.inherited.ignored.0,
    });
    spec
}

/// What to say when `program` could not be run at all (not found, not executable...).
fn target_message(program: &OsString, e: &TargetError) -> String {
    match e {
        TargetError::NotFound(_) if !program.as_bytes().contains(&b'/') => {
            format!("cannot run {}: not found in PATH", name(program))
        }
        TargetError::NotFound(_) => format!("cannot run {}: no such file", name(program)),
        e if e.is_privileged() => {
            format!("cannot run {} under --policy: {e}", name(program))
        }
        TargetError::NotExecutable(p) => format!(
            "cannot execute {}: not an executable regular file",
            crate::base::sanitize::escape(p.as_os_str().as_bytes())
        ),
        e => format!("cannot execute {}: {e}", name(program)),
    }
}
