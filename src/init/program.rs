//! PROGRAM once created: launched under the reaper, and the one way foster signals it.
//!
//! Owns [`Program`]: the launch ([`launch::launch`]) as one step with its registration in the
//! reaper ([`Reaper::launch`]), so that a PROGRAM that ends at once is still PROGRAM; then
//! PROGRAM held by the pidfd `clone` returned with it ([`ProcessRef`]), through which every
//! signal foster sends it goes, to PROGRAM alone or with `-g` to the process group it leads.

use std::io;
use std::os::unix::ffi::OsStrExt;

use super::launch::{self, LaunchError, LaunchPlan, Launched};
use crate::gate::spawner::Spawner;
use crate::process::identity::{Identity, ProcessRef};
use crate::process::reaper::Reaper;

/// PROGRAM, and where foster's signals to it go: PROGRAM itself, or with `-g` the process
/// group it leads ([`ProcessRef::signal`], [`ProcessRef::signal_group`]): neither can reach a
/// process that reused its pid.
pub(super) struct Program {
    process: ProcessRef,
    group: bool,
}

impl Program {
    /// Creates PROGRAM on `spawner`, registered in `reaper`. A failed exec or a gate stop
    /// still yields PROGRAM (the child ended with its status and is the reaper's), after
    /// saying why; only a PROGRAM that could not even be created is an error.
    pub(super) fn launch(
        reaper: &mut Reaper<()>,
        spawner: &Spawner,
        plan: &LaunchPlan,
        group: bool,
    ) -> Result<Program, LaunchError> {
        let mut pidfd = None;
        let pid = reaper.launch((), || {
            let Launched {
                pid,
                pidfd: fd,
                failed,
            } = launch::launch(spawner, plan)?;
            if let Some(why) = failed {
                say_error!("{why}");
            }
            pidfd = fd;
            Ok(pid)
        })?;
        // Read while PROGRAM is an unreaped child, so the pid names it.
        let identity = Identity::of(pid).unwrap_or(Identity { pid, start_time: 0 });
        let process = match pidfd {
            Some(fd) => ProcessRef::pinned(identity, fd),
            None => ProcessRef::unpinned(identity),
        };
        say!(
            1,
            "PROGRAM {} started as pid {pid} in its own process group",
            crate::base::sanitize::escape(plan.program.as_bytes()),
        );
        Ok(Program { process, group })
    }

    /// PROGRAM's pid, which is also its process group's.
    pub(super) fn pid(&self) -> i32 {
        self.process.identity().pid
    }

    /// Sends `sig` to PROGRAM, or with `-g` to its process group.
    pub(super) fn send(&self, sig: i32) -> io::Result<()> {
        if self.group {
            self.process.signal_group(sig)
        } else {
            self.process.signal(sig)
        }
    }
}

impl std::fmt::Display for Program {
    /// `pid N`, or `process group N`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = if self.group { "process group" } else { "pid" };
        write!(f, "{what} {}", self.pid())
    }
}
