//! The supervisor's side of readiness and liveness: each helper's checks, driven on its loop.
//!
//! What a launch gets for its checks (`NOTIFY_SOCKET`, `WATCHDOG_USEC` and `WATCHDOG_PID`,
//! the notification descriptor, the output subscription; [`Supervisor::prepare_checks`]),
//! their start once the helper runs, their timers ([`CheckTimer`]), the reports of their
//! tasks, and their results as `check_failed` and `check_passed` events. A result moves the
//! helper through its states (`lifecycle.rs`): `starting` → `ready`, `unhealthy` and back; a
//! failed check stops it, then its restart rules take its end as a failure. The probes are
//! in `probes.rs`, the notify sockets in `notify.rs`; `crate::supervision::readiness` has the
//! protocols and the per-launch state, `docs/run.md` the reference.

use std::ffi::OsString;
use std::io;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::broadcast;
use tracing::{debug, info, warn};

use super::Supervisor;
use super::notify::uses_notify;
use super::timers::{CheckTimer, Timer};
use crate::base::duration::Text;
use crate::gate::spawner::LaunchSpec;
use crate::supervision::config::checks::{Probe, ReadyCheck};
use crate::supervision::event::{Check, Event};
use crate::supervision::output::Line;
use crate::supervision::readiness::fd::FdOutcome;
use crate::supervision::readiness::{ExecProbe, LaunchChecks, Outcome, Readiness, Report, fd, log};

pub use crate::supervision::readiness::notify::ENV_NOTIFY_SOCKET;
/// `WATCHDOG_USEC`: the watchdog's period in microseconds.
pub const ENV_WATCHDOG_USEC: &str = "WATCHDOG_USEC";
/// `WATCHDOG_PID`: the pid the watchdog is meant for (the helper's own).
pub const ENV_WATCHDOG_PID: &str = "WATCHDOG_PID";

/// What a launch prepares for its checks before the fork, started after it.
#[derive(Default)]
pub(super) struct Pending {
    fd_read: Option<OwnedFd>,
    log_rx: Option<broadcast::Receiver<Arc<Line>>>,
}

impl Supervisor {
    /// The checks of helper `i`'s running launch, unless it failed a check, is being stopped,
    /// or foster is shutting down (then its checks are over).
    pub(super) fn live_checks(
        &mut self,
        i: usize,
        launch: Option<u32>,
    ) -> Option<&mut LaunchChecks> {
        let h = &self.units.helpers[i];
        if self.stage.shutting_down() || h.running().is_none() || !h.state.is_up() {
            return None;
        }
        self.units.helpers[i]
            .checks
            .as_mut()
            .filter(|c| c.failed.is_none() && launch.is_none_or(|l| l == c.launch))
    }

    /// Sets up what helper `i`'s launch needs for its checks: the notify protocol's variables,
    /// the notification descriptor, the output subscription (taken before the fork, so that
    /// no line is missed). Inherited `NOTIFY_SOCKET`, `WATCHDOG_USEC` and `WATCHDOG_PID` (foster's
    /// own, from its manager) are taken out for a helper without the protocol, unless its
    /// `env` sets them.
    pub(super) fn prepare_checks(
        &mut self,
        i: usize,
        spec: &mut LaunchSpec,
    ) -> io::Result<Pending> {
        let h = &self.config.helpers[i];
        let mut pending = Pending::default();
        let socket = match uses_notify(h) {
            true => Some(self.io.checks_io.socket_for(h)?.address().to_string()),
            false => None,
        };
        let set = |spec: &mut LaunchSpec, k: &str, v: Option<OsString>| {
            if v.is_some() || !h.env.contains_key(k) {
                spec.env.push((k.into(), v));
            }
        };
        match socket {
            Some(s) => set(spec, ENV_NOTIFY_SOCKET, Some(s.into())),
            None => set(spec, ENV_NOTIFY_SOCKET, None),
        }
        match h.watchdog {
            Some(w) => {
                set(
                    spec,
                    ENV_WATCHDOG_USEC,
                    Some(w.0.as_micros().to_string().into()),
                );
                spec.pid_env = Some(ENV_WATCHDOG_PID.into());
            }
            None => {
                set(spec, ENV_WATCHDOG_USEC, None);
                set(spec, ENV_WATCHDOG_PID, None);
            }
        }
        match h.ready.as_ref().and_then(|r| r.check().ok()) {
            Some(ReadyCheck::Fd(n)) => {
                let (r, w) = fd::pipe()?;
                spec.extra_fds.push((w, n));
                pending.fd_read = Some(r);
            }
            Some(ReadyCheck::Log(_)) => {
                pending.log_rx = self.io.output.as_ref().map(|o| o.output().subscribe());
            }
            _ => {}
        }
        Ok(pending)
    }

    /// Helper `i` was launched (its launch count is now its checks' launch): its checks start.
    pub(super) fn start_checks(&mut self, i: usize, pending: Pending) {
        let launch = self.units.helpers[i].attempt;
        let now = Instant::now();
        let cfg = self.config.helpers[i].clone();
        let timeout = cfg.ready.as_ref().map_or(
            crate::supervision::config::checks::DEFAULT_READY_TIMEOUT,
            |r| r.timeout(),
        );
        let mut c = LaunchChecks::new(launch, now, timeout, cfg.watchdog.map(|w| w.0));
        let check = cfg.ready.as_ref().and_then(|r| r.check().ok());
        let tx = self.io.checks_io.tx.clone();
        let report = move |outcome| {
            let _ = tx.send(Report {
                helper: i,
                launch,
                outcome,
            });
        };
        match check {
            None => {}
            Some(ReadyCheck::Notify) => {}
            Some(ReadyCheck::Fd(_)) => {
                if let Some(r) = pending.fd_read {
                    let t = tokio::spawn(async move {
                        report(Outcome::Fd(fd::wait_newline(r).await));
                    });
                    c.tasks.push(t.abort_handle());
                }
            }
            Some(ReadyCheck::Log(pattern)) => {
                if let (Some(rx), Some(o)) = (pending.log_rx, &self.io.output) {
                    let output = o.output().clone();
                    let name: Arc<str> = Arc::from(cfg.name());
                    let pattern = pattern.clone();
                    let t = tokio::spawn(async move {
                        report(Outcome::Log(
                            log::wait_match(output, name, pattern, rx).await,
                        ));
                    });
                    c.tasks.push(t.abort_handle());
                }
            }
            Some(ReadyCheck::Exec { interval, .. } | ReadyCheck::Tcp { interval, .. }) => {
                self.timers.at(
                    interval,
                    Timer::Check(i, launch, CheckTimer::Attempt(Check::Ready)),
                );
            }
        }
        self.units.helpers[i].checks = Some(c);
        if check.is_some() {
            self.timers
                .at(timeout, Timer::Check(i, launch, CheckTimer::ReadyDeadline));
        } else {
            // No readiness check: ready once launched, without an event of its own.
            self.ready_from_now(i, launch);
        }
    }

    /// Arms what runs from readiness on: the health checks and the watchdog.
    fn ready_from_now(&mut self, i: usize, launch: u32) {
        let now = Instant::now();
        let health = self.config.helpers[i].health.as_ref().map(|h| h.interval());
        let Some(c) = self.live_checks(i, Some(launch)) else {
            return;
        };
        c.readiness = Readiness::Ready;
        let watchdog = c.watchdog.filter(|_| !c.watchdog_armed);
        if watchdog.is_some() {
            c.watchdog_armed = true;
            c.last_ping = now;
        }
        if let Some(interval) = health {
            self.timers.at(
                interval,
                Timer::Check(i, launch, CheckTimer::Attempt(Check::Health)),
            );
        }
        if let Some(period) = watchdog {
            self.timers
                .at(period, Timer::Check(i, launch, CheckTimer::Watchdog));
        }
    }

    /// Helper `i` passed its readiness check (`how`: notify, fd, exec, tcp, log): `ready`
    /// (with the time it took and how, as the state's detail); after `RELOADING=1`, ready again.
    pub(super) fn became_ready(&mut self, i: usize, how: &str) {
        let Some(id) = self.units.helpers[i].running() else {
            return;
        };
        let Some(c) = self.live_checks(i, None) else {
            return;
        };
        let first = c.readiness == Readiness::Starting;
        if c.readiness == Readiness::Ready {
            return;
        }
        c.readiness = Readiness::Ready;
        let (launch, after) = (c.launch, c.launched.elapsed());
        if let Some(p) = c.probe.take() {
            // A readiness probe still running is no longer needed.
            self.kill_probe(&p);
        }
        let detail = if first {
            format!("after {} ({how})", Text(round_ms(after)))
        } else {
            format!("again ({how})")
        };
        self.helper_ready(i, id, Some(detail));
        if first {
            self.ready_from_now(i, launch);
        }
    }

    /// A timer of helper `i`'s checks of launch `launch` fired.
    pub(super) fn on_check_timer(&mut self, i: usize, launch: u32, t: CheckTimer) {
        let now = Instant::now();
        match t {
            CheckTimer::ReadyDeadline => self.ready_deadline_came(i, launch, now),
            CheckTimer::Attempt(Check::Ready) => self.ready_attempt(i, launch, now),
            CheckTimer::Attempt(_) => self.health_attempt(i, launch),
            CheckTimer::ProbeTimeout(attempt) => {
                if self.live_checks(i, Some(launch)).is_some() {
                    self.probe_ran_out(i, attempt);
                }
            }
            CheckTimer::Watchdog => self.watchdog_due(i, launch, now),
        }
    }

    /// The readiness deadline of launch `launch`: a helper still starting fails, unless
    /// `EXTEND_TIMEOUT_USEC=` pushed the deadline later (the timer is set again for it).
    fn ready_deadline_came(&mut self, i: usize, launch: u32, now: Instant) {
        let Some(c) = self.live_checks(i, Some(launch)) else {
            return;
        };
        if c.readiness != Readiness::Starting {
            return;
        }
        if c.ready_deadline > now {
            // Pushed later by EXTEND_TIMEOUT_USEC=.
            let left = c.ready_deadline - now;
            self.timers
                .at(left, Timer::Check(i, launch, CheckTimer::ReadyDeadline));
            return;
        }
        // The timeout, or what EXTEND_TIMEOUT_USEC= made of it.
        let waited = c.ready_deadline - c.launched;
        let reason = format!(
            "not ready within {} ({})",
            Text(round_ms(waited)),
            self.readiness_missing(i)
        );
        self.fail_helper(i, Check::Ready, reason, true);
    }

    /// What helper `i` did not do to become ready, in the words of its readiness check.
    fn readiness_missing(&self, i: usize) -> String {
        let how = self.config.helpers[i]
            .ready
            .as_ref()
            .and_then(|r| r.check().ok())
            .map_or("", |c| c.name());
        match how {
            "notify" => "no READY=1".to_string(),
            "fd" => "no newline on its notification descriptor".to_string(),
            "log" => "no line of its output matched".to_string(),
            other => format!("its {other} probe did not pass"),
        }
    }

    /// An attempt of helper `i`'s readiness probe, while it is starting and no probe runs.
    fn ready_attempt(&mut self, i: usize, launch: u32, now: Instant) {
        let cfg = self.config.helpers[i].clone();
        let Some(c) = self.live_checks(i, Some(launch)) else {
            return;
        };
        if c.readiness != Readiness::Starting {
            return;
        }
        if let Some(p) = &c.probe {
            return skip_attempt(cfg.name(), Check::Ready, p);
        }
        let left = c.ready_deadline.saturating_duration_since(now);
        match cfg.ready.as_ref().and_then(|r| r.check().ok()) {
            Some(ReadyCheck::Exec { command, .. }) => {
                let command = command.clone();
                self.start_exec_probe(i, Check::Ready, &command, left);
            }
            Some(ReadyCheck::Tcp { addr, .. }) => {
                self.start_tcp_probe(i, Check::Ready, addr, left);
            }
            _ => {}
        }
    }

    /// An attempt of helper `i`'s health probe, when no probe runs.
    fn health_attempt(&mut self, i: usize, launch: u32) {
        let cfg = self.config.helpers[i].clone();
        let Some(c) = self.live_checks(i, Some(launch)) else {
            return;
        };
        if let Some(p) = &c.probe {
            return skip_attempt(cfg.name(), Check::Health, p);
        }
        let Some(h) = &cfg.health else {
            return;
        };
        match h.probe() {
            Ok(Probe::Exec(command)) => {
                self.start_exec_probe(i, Check::Health, command, h.timeout());
            }
            Ok(Probe::Tcp(addr)) => {
                self.start_tcp_probe(i, Check::Health, addr, h.timeout());
            }
            Err(_) => {}
        }
    }

    /// Helper `i`'s watchdog timer: without a `WATCHDOG=1` since the period began, it fails
    /// (unless it said `STOPPING=1`); with one, the timer is set again for the next period.
    fn watchdog_due(&mut self, i: usize, launch: u32, now: Instant) {
        let Some(c) = self.live_checks(i, Some(launch)) else {
            return;
        };
        // It said STOPPING=1: on its way out, no longer held to its watchdog.
        if c.stopping {
            return;
        }
        let Some(due) = c.watchdog_due() else {
            return;
        };
        if due > now {
            self.timers
                .at(due - now, Timer::Check(i, launch, CheckTimer::Watchdog));
            return;
        }
        let period = c.watchdog.unwrap_or_default();
        let reason = format!("no WATCHDOG=1 within {}", Text(period));
        self.fail_helper(i, Check::Watchdog, reason, true);
    }

    /// The time limit of helper `i`'s exec probe `attempt` ran out: that probe, if it still
    /// runs, is killed with its tree; its status comes back through the reaper and counts as
    /// the failure. Only the probe the limit was armed for: an earlier probe's limit, still
    /// armed when a later probe runs, is not the later one's.
    fn probe_ran_out(&mut self, i: usize, attempt: u32) {
        let name = self.config.helpers[i].name().to_string();
        let Some(c) = self.live_checks(i, None) else {
            return;
        };
        let Some(p) = c
            .probe
            .as_mut()
            .filter(|p| p.attempt == attempt && p.timed_out.is_none())
        else {
            return;
        };
        p.timed_out = Some(p.limit);
        let id = p.process.identity();
        info!(
            "{name}: its {} probe ({id}) ran out of time: killed with its tree",
            p.check.text()
        );
        if let Some(p) = c.probe.take() {
            self.kill_probe(&p);
            if let Some(c) = self.units.helpers[i].checks.as_mut() {
                c.probe = Some(p);
            }
        }
    }
    /// Helper `i` failed `check` for `reason`: its checks end, the event (when `emit`; a health
    /// check's was emitted with its count), and the helper is stopped for it (its stop signal,
    /// SIGKILL of its tree after its stop grace; `lifecycle.rs`), its end then a failure for its
    /// restart rules.
    pub(super) fn fail_helper(&mut self, i: usize, check: Check, reason: String, emit: bool) {
        let identity = self.units.helpers[i].running();
        let Some(c) = self.live_checks(i, None) else {
            return;
        };
        c.failed = Some(reason.clone());
        c.stop_tasks();
        let probe = c.probe.take();
        if emit {
            self.emit(Event::CheckFailed {
                helper: self.config.helpers[i].name().to_string(),
                identity,
                check,
                reason: reason.clone(),
                failures: 1,
                limit: 1,
            });
        }
        if let Some(p) = probe {
            self.kill_probe(&p);
        }
        if let Some(id) = identity {
            self.helper_check_failed(i, id, format!("its {} failed: {reason}", check.text()));
        }
    }

    /// Helper `i`'s process ended: its checks end with it.
    pub(super) fn end_checks(&mut self, i: usize) {
        let Some(mut c) = self.units.helpers[i].checks.take() else {
            return;
        };
        c.stop_tasks();
        if let Some(p) = c.probe.take() {
            self.kill_probe(&p);
        }
    }

    /// The shutdown began: every check ends (probes killed, tasks aborted); what the helpers
    /// said (`STATUS=`, `ERRNO=`, `MAINPID=`) stays for the status.
    pub(super) fn stop_all_checks(&mut self) {
        for i in 0..self.units.helpers.len() {
            let probe = self.units.helpers[i].checks.as_mut().and_then(|c| {
                c.stop_tasks();
                c.probe.take()
            });
            if let Some(p) = probe {
                self.kill_probe(&p);
            }
        }
    }

    /// A report of a check's task.
    pub(super) fn on_check_report(&mut self, r: Report) {
        let i = r.helper;
        let name = self.config.helpers[i].name().to_string();
        let Some(c) = self.live_checks(i, Some(r.launch)) else {
            return;
        };
        match r.outcome {
            Outcome::Fd(FdOutcome::Ready) => {
                if c.readiness == Readiness::Starting {
                    self.became_ready(i, "fd");
                }
            }
            Outcome::Fd(FdOutcome::Closed) => info!(
                "{name}: its notification descriptor was closed without a newline: it will not \
                 become ready by it"
            ),
            Outcome::Fd(FdOutcome::Failed(e)) => warn!("{name}: {e}"),
            Outcome::Log(true) => {
                if c.readiness == Readiness::Starting {
                    self.became_ready(i, "log");
                }
            }
            Outcome::Log(false) => {}
            Outcome::Tcp(check, result) => self.probe_result(i, check, result.map_err(Into::into)),
        }
    }
}

/// An attempt of `check` of helper `name` came due while its last probe `running` still runs:
/// skipped, as systemd and Kubernetes skip a probe's tick while the last one runs (its end
/// arms the next attempt). Said at debug level.
fn skip_attempt(name: &str, check: Check, running: &ExecProbe) {
    debug!(
        "{name}: the {} attempt due now is skipped: probe {} (attempt {}, of its {}) still runs",
        check.text(),
        running.process.identity(),
        running.attempt,
        running.check.text()
    );
}

/// `d` to the millisecond (for messages).
fn round_ms(d: Duration) -> Duration {
    Duration::from_millis(d.as_millis().max(1) as u64)
}
