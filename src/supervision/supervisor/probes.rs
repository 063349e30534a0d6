//! The exec and connect probes of helpers' checks: their launch (the helper's environment,
//! credentials and descriptors), their time limits, their ends, and what each attempt's
//! result does to the helper.

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use tracing::debug;

use super::checks::{ENV_NOTIFY_SOCKET, ENV_WATCHDOG_PID, ENV_WATCHDOG_USEC};
use super::timers::{CheckTimer, Timer};
use super::{Owner, Supervisor};
use crate::gate::policy::{Policy, Reaction};
use crate::gate::spawner::{LaunchSpec, group_id, user_id};
use crate::process::identity::{Identity, ProcessRef};
use crate::process::reaper::ExitStatus;
use crate::supervision::config::CommandLine;
use crate::supervision::event::{Check, Event};
use crate::supervision::readiness::{
    ExecProbe, Outcome, ProbeFailure, ProbeLaunchError, Readiness, Report, tcp,
};

impl Supervisor {
    /// The environment, credentials and descriptors of a probe of helper `i`: the helper's
    /// `env`, `user`, `group` and `cwd`; standard descriptors on `/dev/null`; a process group
    /// of its own (so that its tree can be killed); SIGKILL when foster ends.
    fn probe_spec(&self, i: usize, command: &CommandLine) -> Result<LaunchSpec, ProbeLaunchError> {
        let h = &self.config.helpers[i];
        let mut spec = LaunchSpec::new(
            command.program(),
            command.args(),
            Policy::new(libc::SIGKILL, Reaction::Kill),
        );
        spec.env = h
            .env
            .iter()
            .map(|(k, v)| (OsString::from(k), Some(OsString::from(v))))
            .collect();
        for k in [ENV_NOTIFY_SOCKET, ENV_WATCHDOG_USEC, ENV_WATCHDOG_PID] {
            if !h.env.contains_key(k) {
                spec.env.push((k.into(), None));
            }
        }
        spec.uid = h.user.as_deref().map(user_id).transpose()?;
        spec.gid = h.group.as_deref().map(group_id).transpose()?;
        spec.cwd = h.cwd.clone();
        let null = |write: bool| {
            std::fs::OpenOptions::new()
                .read(!write)
                .write(write)
                .open("/dev/null")
                .map(OwnedFd::from)
                .map_err(ProbeLaunchError::DevNull)
        };
        spec.stdin = Some(null(false)?);
        spec.stdout = Some(null(true)?);
        spec.stderr = Some(null(true)?);
        spec.new_process_group = true;
        Ok(spec)
    }

    /// Starts an exec probe of helper `i` for `check`, killed (with its tree) after `limit`.
    pub(super) fn start_exec_probe(
        &mut self,
        i: usize,
        check: Check,
        command: &CommandLine,
        limit: Duration,
    ) {
        let Some(c) = self.live_checks(i, None) else {
            return;
        };
        c.probes += 1;
        let (launch, attempt) = (c.launch, c.probes);
        let spec = match self.probe_spec(i, command) {
            Ok(s) => s,
            Err(e) => return self.probe_result(i, check, Err(ProbeFailure::Launch(e))),
        };
        let spawner = &self.procs.spawner;
        let (mut pidfd, mut identity, mut error) = (None, None, None);
        let r = self
            .procs
            .reaper
            .launch(Owner::Probe(i, launch), || match spawner.launch(spec) {
                Ok(l) => {
                    (pidfd, identity) = (Some(l.pidfd), l.identity);
                    Ok(l.pid)
                }
                // A child created and stopped by the gate or exec: its status ends the attempt.
                Err(e) => match e.pid() {
                    Some(pid) => {
                        error = Some(e.to_string());
                        Ok(pid)
                    }
                    None => Err(e),
                },
            });
        match r {
            Ok(pid) => {
                // The gate's reading, else /proc (a probe stopped before its gate).
                let identity = identity
                    .or_else(|| Identity::of(pid).ok())
                    .unwrap_or(Identity { pid, start_time: 0 });
                self.known.registry.expect_own(identity);
                let process = match pidfd {
                    Some(fd) => ProcessRef::pinned(identity, fd),
                    None => ProcessRef::unpinned(identity),
                };
                let probe = ExecProbe {
                    process,
                    check,
                    attempt,
                    started: Instant::now(),
                    limit,
                    timed_out: None,
                    error,
                };
                self.hold_probe(i, launch, probe);
            }
            Err(e) => self.probe_result(i, check, Err(ProbeFailure::Launch(e.into()))),
        }
    }

    /// Helper `i`'s exec probe started for launch `launch`: held until it ends, its time limit
    /// armed.
    fn hold_probe(&mut self, i: usize, launch: u32, probe: ExecProbe) {
        let timeout = CheckTimer::ProbeTimeout(probe.attempt);
        let limit = probe.limit;
        if let Some(c) = self.units.helpers[i].checks.as_mut() {
            c.probe = Some(probe);
        }
        self.timers.at(limit, Timer::Check(i, launch, timeout));
    }

    /// Starts a connect probe of helper `i` for `check`, given up after `limit`.
    pub(super) fn start_tcp_probe(
        &mut self,
        i: usize,
        check: Check,
        addr: std::net::SocketAddr,
        limit: Duration,
    ) {
        let tx = self.io.checks_io.tx.clone();
        let Some(c) = self.live_checks(i, None) else {
            return;
        };
        let launch = c.launch;
        c.tasks.retain(|t| !t.is_finished());
        let t = tokio::spawn(async move {
            let r = tcp::connect(addr, limit).await;
            let _ = tx.send(Report {
                helper: i,
                launch,
                outcome: Outcome::Tcp(check, r),
            });
        });
        c.tasks.push(t.abort_handle());
    }

    /// SIGKILL to an exec probe's process group, to what of its tree left the group, and to
    /// itself. Its status (and its tree's, adopted by foster) still comes through the reaper.
    pub(super) fn kill_probe(&mut self, p: &ExecProbe) {
        let id = p.process.identity();
        // Its tree read first, while its processes are still under it (once killed, what is
        // left of it would be adopted by foster).
        self.rescan();
        let _ = p.process.signal_group(libc::SIGKILL);
        let tree: Vec<Identity> = self
            .known
            .tree
            .snapshot()
            .descendants(&id)
            .map(|n| n.identity)
            .filter(|d| *d != id)
            .collect();
        for d in tree {
            let _ = crate::process::identity::signal(d, libc::SIGKILL);
        }
        let _ = p.process.signal(libc::SIGKILL);
    }

    /// The exec probe `pid` of helper `i`'s launch `launch` ended with `status` (routed by
    /// the reaper).
    pub(super) fn probe_exited(&mut self, i: usize, launch: u32, pid: i32, status: ExitStatus) {
        self.known.registry.reaped(pid);
        let Some(c) = self.live_checks(i, Some(launch)) else {
            return;
        };
        let Some(p) = c.probe.take_if(|p| p.process.identity().pid == pid) else {
            return;
        };
        // Its time limit, if it has not run out, is disarmed with it.
        let timeout = Timer::Check(i, launch, CheckTimer::ProbeTimeout(p.attempt));
        self.timers.cancel(|t| *t == timeout);
        let result = match (p.timed_out, p.error) {
            (Some(t), _) => Err(ProbeFailure::TimedOut(t)),
            (None, Some(error)) => Err(ProbeFailure::LaunchEnded { error, status }),
            (None, None) if status.success() => Ok(()),
            (None, None) => Err(ProbeFailure::Ended(status)),
        };
        self.probe_result(i, p.check, result);
    }

    /// One attempt of a probe of helper `i` for `check` ended with `result`.
    pub(super) fn probe_result(
        &mut self,
        i: usize,
        check: Check,
        result: Result<(), ProbeFailure>,
    ) {
        let Some(c) = self.live_checks(i, None) else {
            return;
        };
        let (launch, starting) = (c.launch, c.readiness == Readiness::Starting);
        match check {
            Check::Ready if starting => self.ready_probe_result(i, launch, result),
            Check::Ready => {}
            Check::Health | Check::Watchdog => self.health_probe_result(i, launch, result),
        }
    }

    /// A readiness probe's attempt ended: the helper is ready, or tries again after the
    /// check's interval.
    fn ready_probe_result(&mut self, i: usize, launch: u32, result: Result<(), ProbeFailure>) {
        let cfg = &self.config.helpers[i];
        let how = cfg
            .ready
            .as_ref()
            .and_then(|r| r.check().ok())
            .map_or("", |c| c.name());
        match result {
            Ok(()) => self.became_ready(i, how),
            Err(reason) => {
                debug!("{}: not ready yet: {reason}", cfg.name());
                let interval = cfg.ready.as_ref().and_then(|r| r.interval).map_or(
                    crate::supervision::config::checks::DEFAULT_READY_INTERVAL,
                    |d| d.0,
                );
                self.timers.at(
                    interval,
                    Timer::Check(i, launch, CheckTimer::Attempt(Check::Ready)),
                );
            }
        }
    }

    /// A health probe's attempt ended: its failures in a row counted (the helper fails at the
    /// check's limit) or cleared, then the next attempt after the interval.
    fn health_probe_result(&mut self, i: usize, launch: u32, result: Result<(), ProbeFailure>) {
        let cfg = self.config.helpers[i].clone();
        let Some(h) = &cfg.health else {
            return;
        };
        match result {
            Ok(()) => self.health_passed(i),
            Err(reason) => {
                if self.health_failed(i, reason.to_string(), h.failures()) {
                    return;
                }
            }
        }
        self.timers.at(
            h.interval(),
            Timer::Check(i, launch, CheckTimer::Attempt(Check::Health)),
        );
    }

    /// A health probe passed: failures before it are said to be over.
    fn health_passed(&mut self, i: usize) {
        let Some(c) = self.live_checks(i, None) else {
            return;
        };
        let failures = std::mem::take(&mut c.health_failures);
        if failures == 0 {
            return;
        }
        self.emit(Event::CheckPassed {
            helper: self.config.helpers[i].name().to_string(),
            check: Check::Health,
            failures,
        });
        if let Some(id) = self.units.helpers[i].identity {
            self.helper_health(i, id, true, None);
        }
    }

    /// A health probe failed, `limit` failures in a row fail the helper: true when it did.
    fn health_failed(&mut self, i: usize, reason: String, limit: u32) -> bool {
        let Some(c) = self.live_checks(i, None) else {
            return true;
        };
        c.health_failures += 1;
        let failures = c.health_failures;
        let identity = self.units.helpers[i].identity;
        self.emit(Event::CheckFailed {
            helper: self.config.helpers[i].name().to_string(),
            identity,
            check: Check::Health,
            reason: reason.clone(),
            failures,
            limit,
        });
        if failures >= limit {
            self.fail_helper(i, Check::Health, reason, false);
            return true;
        }
        if let Some(id) = identity {
            let why =
                format!("(its health check failed {failures} of {limit} times in a row: {reason})");
            self.helper_health(i, id, false, Some(why));
        }
        false
    }
}
