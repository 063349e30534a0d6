//! A helper's readiness and liveness: what each launch's checks hold, and the protocols and
//! probes they use.
//!
//! Owns [`LaunchChecks`], the state of the checks of one launch of a helper (where its
//! readiness stands, its health failures in a row, its watchdog, the probe or tasks in flight,
//! its `ERRNO=` and `MAINPID=`; its `STATUS=` goes with its state), and [`Report`], what a
//! check's task tells the supervisor's loop. The helper's state itself (`starting`, `ready`,
//! `unhealthy`...) is [`crate::process::state`]'s, kept by the supervisor. The protocols and
//! probes, one file each:
//!
//! - `notify.rs`: the systemd protocol: foster's datagram socket (`SO_PASSCRED`), the size
//!   bound, the keys of a datagram (`READY=1`, `STATUS=`, `WATCHDOG=1`, ...);
//! - `fd.rs`: the s6 protocol: a pipe per launch, its write end placed at the helper's number,
//!   a newline on it;
//! - `tcp.rs`: the connect probe, on the runtime, within a timeout;
//! - `log.rs`: a line of the helper's captured output matches a pattern.

pub mod fd;
pub mod log;
pub mod notify;
pub mod tcp;

use std::time::{Duration, Instant};

use crate::process::identity::ProcessRef;
use crate::supervision::event::Check;

/// Where a running helper stands with its readiness check (its state, `starting` or `ready`,
/// follows it; `crate::process::state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readiness {
    /// Launched; its readiness check has not passed yet.
    Starting,
    /// Passed its readiness check (or has none).
    Ready,
    /// Said `RELOADING=1`: not ready until its next `READY=1`.
    Reloading,
}

/// What a check's task (on the supervisor's runtime) reports.
#[derive(Debug)]
pub struct Report {
    /// The helper's index.
    pub helper: usize,
    /// The launch the check belongs to (a report of an earlier launch is dropped).
    pub launch: u32,
    pub outcome: Outcome,
}

/// What a task found.
#[derive(Debug)]
pub enum Outcome {
    /// The notification descriptor's wait ended.
    Fd(fd::FdOutcome),
    /// A line matched (`false`: the output ended first).
    Log(bool),
    /// A connect probe ended, for this check.
    Tcp(Check, Result<(), tcp::ConnectError>),
}

/// Why one attempt of a probe failed: the reason its events give.
#[derive(Debug, thiserror::Error)]
pub enum ProbeFailure {
    /// The connect probe was not answered.
    #[error(transparent)]
    Connect(#[from] tcp::ConnectError),
    /// The exec probe could not be launched.
    #[error("cannot launch it: {0}")]
    Launch(#[source] ProbeLaunchError),
    /// The exec probe ran out of its time (as configured) and was killed.
    #[error("the probe took longer than {} and was killed", crate::base::duration::Text(*.0))]
    TimedOut(Duration),
    /// The exec probe's launch failed after the fork (the gate, the exec); how it ended.
    #[error("{error} ({status})")]
    LaunchEnded {
        error: String,
        status: crate::process::reaper::ExitStatus,
    },
    /// The exec probe ended in failure.
    #[error("the probe ended with {0}")]
    Ended(crate::process::reaper::ExitStatus),
}

/// Why an exec probe could not be launched.
#[derive(Debug, thiserror::Error)]
pub enum ProbeLaunchError {
    /// Its helper's user or group cannot be resolved.
    #[error(transparent)]
    Credentials(#[from] crate::gate::spawner::CredentialError),
    /// `/dev/null` cannot be opened for its standard descriptors.
    #[error("/dev/null: {0}")]
    DevNull(#[source] std::io::Error),
    /// The spawner refused or failed it.
    #[error(transparent)]
    Spawn(#[from] crate::gate::spawner::SpawnError),
}

/// An exec probe in flight.
///
/// The exec probe is a process of foster's like a helper: launched through the spawner (in a
/// process group of its own, so that its tree can be killed), its status through the one reaper
/// (`crate::process::reaper`; never a `Child::wait`), killed with its tree when it runs out of
/// time. The supervisor drives it all on its loop (`supervisor/checks.rs`): no task or timer exists
/// for a helper without checks, a probe's timer is armed only for its next attempt, and a
/// watchdog wakes foster at most once a period.
#[derive(Debug)]
pub struct ExecProbe {
    /// The probe's process, held by the pidfd its launch returned.
    pub process: ProcessRef,
    /// The check it runs for.
    pub check: Check,
    /// Its number among the probes of its helper's launch ([`LaunchChecks::probes`]): what its
    /// time limit is armed for, so that no other probe's limit ends it.
    pub attempt: u32,
    /// When it was launched.
    pub started: Instant,
    /// Its time limit (the check's `timeout`).
    pub limit: Duration,
    /// It ran out of time (its limit, as configured, not the instant its timer fired) and was
    /// killed with its tree.
    pub timed_out: Option<Duration>,
    /// Its launch failed after the fork (the gate, the exec): why.
    pub error: Option<String>,
}

/// The checks of one launch of a helper.
#[derive(Debug)]
pub struct LaunchChecks {
    /// The launch (the helper's launch count), which timers and reports carry.
    pub launch: u32,
    /// When it was launched.
    pub launched: Instant,
    pub readiness: Readiness,
    /// While starting: when the helper has failed if it is not ready
    /// (`EXTEND_TIMEOUT_USEC=` may push it later).
    pub ready_deadline: Instant,
    /// Health checks failed in a row.
    pub health_failures: u32,
    /// The helper failed a check and is being stopped for it (why).
    pub failed: Option<String>,
    /// `ERRNO=`.
    pub errno: Option<i32>,
    /// `MAINPID=`, checked to be a process of the helper's tree.
    pub main_pid: Option<i32>,
    /// `STOPPING=1` was received.
    pub stopping: bool,
    /// The watchdog's period (`watchdog`, or `WATCHDOG_USEC=`), armed from readiness on.
    pub watchdog: Option<Duration>,
    /// The watchdog is armed (the helper is ready).
    pub watchdog_armed: bool,
    /// The last `WATCHDOG=1` (or when the watchdog was armed).
    pub last_ping: Instant,
    /// The exec probe in flight, if any (never more than one: an attempt due while it runs
    /// is skipped).
    pub probe: Option<ExecProbe>,
    /// Exec probes launched so far: the last one's [`ExecProbe::attempt`].
    pub probes: u32,
    /// Tasks on the runtime (the notification descriptor, the log, a connect probe): aborted
    /// when the checks end.
    pub tasks: Vec<tokio::task::AbortHandle>,
}

impl LaunchChecks {
    /// The checks of launch `launch` made `now`, which has `timeout` to become ready.
    pub fn new(launch: u32, now: Instant, timeout: Duration, watchdog: Option<Duration>) -> Self {
        LaunchChecks {
            launch,
            launched: now,
            readiness: Readiness::Starting,
            ready_deadline: now + timeout,
            health_failures: 0,
            failed: None,
            errno: None,
            main_pid: None,
            stopping: false,
            watchdog,
            watchdog_armed: false,
            last_ping: now,
            probe: None,
            probes: 0,
            tasks: Vec::new(),
        }
    }

    /// When the watchdog runs out, if it is armed.
    pub fn watchdog_due(&self) -> Option<Instant> {
        self.watchdog
            .filter(|_| self.watchdog_armed)
            .map(|p| self.last_ping + p)
    }

    /// `EXTEND_TIMEOUT_USEC=`: while starting, the deadline is at least `by` from `now`.
    pub fn extend(&mut self, now: Instant, by: Duration) {
        if self.readiness == Readiness::Starting {
            self.ready_deadline = self.ready_deadline.max(now + by);
        }
    }

    /// Aborts the tasks (the probe in flight is the caller's to kill).
    pub fn stop_tasks(&mut self) {
        for t in self.tasks.drain(..) {
            t.abort();
        }
    }
}

impl Drop for LaunchChecks {
    fn drop(&mut self) {
        self.stop_tasks();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watchdog_runs_from_its_last_ping_once_armed_and_extensions_only_push_forward() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let mut c = LaunchChecks::new(1, t0, 5 * s, Some(2 * s));
        assert_eq!(c.watchdog_due(), None, "not armed before readiness");
        c.watchdog_armed = true;
        c.last_ping = t0 + s;
        assert_eq!(c.watchdog_due(), Some(t0 + 3 * s));
        c.extend(t0, s);
        assert_eq!(
            c.ready_deadline,
            t0 + 5 * s,
            "an earlier deadline changes nothing"
        );
        c.extend(t0 + 2 * s, 10 * s);
        assert_eq!(c.ready_deadline, t0 + 12 * s);
        c.readiness = Readiness::Ready;
        c.extend(t0 + 2 * s, 100 * s);
        assert_eq!(
            c.ready_deadline,
            t0 + 12 * s,
            "once ready, no deadline moves"
        );
    }
}
