//! The supervisor's side of readiness and liveness: each helper's checks, driven on its loop.
//!
//! Owns, as the supervisor's methods: what a launch gets for its checks (`NOTIFY_SOCKET`,
//! `WATCHDOG_USEC` and `WATCHDOG_PID`, the notification descriptor, the output subscription;
//! [`Supervisor::prepare_checks`]), their start once the helper runs, their timers
//! ([`CheckTimer`]: the readiness deadline, a probe's next attempt (skipped while the last
//! probe runs) and each exec probe's own time limit, keyed by the probe's attempt, the
//! watchdog, the grace of a helper stopped for a failed check), the notify sockets (one for
//! foster's user, one for each other user helpers run as, bound when first needed) and their
//! datagrams (each accepted only from a process of that helper's tree, found by the registry,
//! or by its ancestry in `/proc` for a process born since foster last read its tree; the sender
//! told by the pidfd that comes with the datagram, [`Supervisor::sender_helper`]; everything
//! queued read before a deadline is judged, [`Supervisor::drain_notify`]; the warnings a
//! sender can cause at will counted, [`Noted`]), the exec probes'
//! statuses (routed by the reaper as [`Owner::Probe`](super::Owner)), the reports of the tasks
//! (notification descriptor, log, connect probe), and the check results as `check_failed` and
//! `check_passed` events. What a result does to the helper goes through the entry points of
//! its states (`lifecycle.rs`): `starting` → `ready`, `unhealthy` and back, and a failed check
//! stops it (stop signal, SIGKILL of its tree after its stop grace), then its restart rules
//! take its end as a failure. `crate::supervision::readiness` has the protocols and the per-launch state;
//! `docs/run.md` the reference.

use std::ffi::OsString;
use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{broadcast, mpsc};
use tracing::{debug, info, warn};

use super::{Owner, Supervisor, Timer};
use crate::base::duration::Text;
use crate::gate::policy::{Policy, Reaction};
use crate::gate::spawner::{LaunchSpec, group_id, user_id};
use crate::process::identity::{Identity, ProcessRef};
use crate::process::reaper::ExitStatus;
use crate::process::state::HelperState;
use crate::supervision::config::checks::{Probe, ReadyCheck};
use crate::supervision::config::{CommandLine, Config, Helper};
use crate::supervision::event::{Check, Event};
use crate::supervision::output::Line;
use crate::supervision::readiness::fd::FdOutcome;
use crate::supervision::readiness::notify::{Datagram, Message, NotifySocket, Watchdog};
use crate::supervision::readiness::{
    ExecProbe, LaunchChecks, Outcome, ProbeFailure, ProbeLaunchError, Readiness, Report, fd, log,
    tcp,
};

pub use crate::supervision::readiness::notify::ENV_NOTIFY_SOCKET;
/// `WATCHDOG_USEC`: the watchdog's period in microseconds.
pub const ENV_WATCHDOG_USEC: &str = "WATCHDOG_USEC";
/// `WATCHDOG_PID`: the pid the watchdog is meant for (the helper's own).
pub const ENV_WATCHDOG_PID: &str = "WATCHDOG_PID";

/// Datagrams read from one socket per turn of the loop (the rest on the next turns).
const DATAGRAMS_PER_TURN: usize = 64;

/// How far up its ancestry a notify sender is followed in `/proc` before foster reads its tree.
const ANCESTRY: usize = 64;

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

/// What a launch prepares for its checks before the fork, started after it.
#[derive(Default)]
pub(super) struct Pending {
    fd_read: Option<OwnedFd>,
    log_rx: Option<broadcast::Receiver<Arc<Line>>>,
}

/// The notify sockets, the refusals counted, and the channel of the checks' tasks.
pub(super) struct ChecksIo {
    /// The notify sockets bound so far, in the order bound, each with the user whose helpers
    /// it is for: `None` for foster's own (a socket file in the private directory), a uid for
    /// helpers that run as another user (a socket file of that uid's, see
    /// `readiness/notify.rs`).
    pub(super) notify: Vec<(Option<u32>, NotifySocket)>,
    /// Datagrams refused (from outside the helpers' trees, too long, cut short, to a helper
    /// without the protocol).
    pub(super) refused: Noted,
    /// `MAINPID=` values that named no process of the sender's helper's tree.
    bad_main_pid: Noted,
    tx: mpsc::UnboundedSender<Report>,
    pub(super) rx: mpsc::UnboundedReceiver<Report>,
}

impl ChecksIo {
    pub(super) fn new() -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        ChecksIo {
            notify: Vec::new(),
            refused: Noted::default(),
            bad_main_pid: Noted::default(),
            tx,
            rx,
        }
    }
}

/// Warnings a process can cause at will through a notify socket, of one kind (a refused
/// datagram; a `MAINPID=` outside the helper's tree): counted, the first logged as a warning,
/// the others at debug level, so that a sender in a loop cannot fill foster's log.
#[derive(Debug, Default)]
pub(super) struct Noted(pub(super) u64);

impl Noted {
    /// One more of them: `message`, and for the first, `further` says what becomes of the
    /// others.
    fn note(&mut self, message: std::fmt::Arguments<'_>, further: &str) {
        self.0 += 1;
        if self.0 == 1 {
            warn!("{message} ({further})");
        } else {
            debug!("{message}");
        }
    }
}

/// Whether helper `h` speaks the notify protocol (`ready = { notify = true }`, or a watchdog).
pub(super) fn uses_notify(h: &Helper) -> bool {
    h.watchdog.is_some() || h.ready.as_ref().is_some_and(|r| r.notify.is_some())
}

/// The uid `h` runs as when it is not foster's (its `user` resolved as its launch does).
fn other_user(h: &Helper) -> Option<u32> {
    let me = nix::unistd::geteuid().as_raw();
    h.user
        .as_deref()
        .and_then(|u| user_id(u).ok())
        .filter(|&uid| uid != me)
}

/// Binds the notify sockets the helpers of `config` need (one for foster's user, one for each
/// other user); one a later launch needs (a helper a reload added) is bound then.
pub(super) fn bind_notify(config: &Config) -> io::Result<ChecksIo> {
    let mut io = ChecksIo::new();
    for h in config.helpers.iter().filter(|h| uses_notify(h)) {
        io.socket_for(h)?;
    }
    Ok(io)
}

/// Binds a notify socket for the helpers of user `uid` (`None`: foster's own), in the checked
/// runtime directories (`control::server`).
fn bind_endpoint(uid: Option<u32>) -> io::Result<NotifySocket> {
    use crate::supervision::control::server::{default_dir, make_private_dir, make_reachable_dir};
    use std::os::fd::AsFd;
    let dir = default_dir();
    let private = make_private_dir(&dir)
        .map_err(|e| io::Error::other(format!("notify socket: {}: {e}", dir.display())))?;
    crate::supervision::readiness::notify::remove_stale(&dir, private.as_fd());
    let Some(uid) = uid else {
        return NotifySocket::bind_in(&dir);
    };
    let (shared, fd) =
        make_reachable_dir().map_err(|e| io::Error::other(format!("notify socket: {e}")))?;
    crate::supervision::readiness::notify::remove_stale(&shared, fd.as_fd());
    NotifySocket::bind_for_user((&dir, private.as_fd()), (&shared, fd.as_fd()), uid)
}

impl ChecksIo {
    /// The notify socket for helper `h` (its user's), bound now if it is not yet. For a
    /// helper of another user, that user must be able to enter every directory on the way to
    /// it, or the helper could not send a word: refused, saying which directory.
    fn socket_for(&mut self, h: &Helper) -> io::Result<&NotifySocket> {
        let uid = other_user(h);
        let k = match self.notify.iter().position(|(u, _)| *u == uid) {
            Some(k) => k,
            None => {
                self.notify.push((uid, bind_endpoint(uid)?));
                self.notify.len() - 1
            }
        };
        let socket = &self.notify[k].1;
        if uid.is_some() {
            crate::supervision::config::helper_reaches(h, Path::new(socket.address())).map_err(
                |e| {
                    io::Error::other(format!(
                        "helper {:?}: its notify socket {}: {e} (set XDG_RUNTIME_DIR to a \
                     directory it may enter, or unset it)",
                        h.name(),
                        socket.address()
                    ))
                },
            )?;
        }
        Ok(socket)
    }
}

/// Why a datagram is refused when its sender is no process of a helper's tree.
const NOT_IN_TREE: &str = "not a process of a helper's tree";

/// `ppid` and start time of `pid`, from `/proc/<pid>/stat`.
fn parent_of(pid: i32) -> Option<(i32, u64)> {
    let stat = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    let f = crate::process::procstat::StatFields::parse(&stat).ok()?;
    Some((f.ppid, f.start_time))
}

impl Supervisor {
    /// The checks of helper `i`'s running launch, unless it failed a check, is being stopped,
    /// or foster is shutting down (then its checks are over).
    fn live_checks(&mut self, i: usize, launch: Option<u32>) -> Option<&mut LaunchChecks> {
        let h = &self.helpers[i];
        if self.stage.shutting_down() || h.running().is_none() || !h.state.is_up() {
            return None;
        }
        self.helpers[i]
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
            true => Some(self.checks_io.socket_for(h)?.address().to_string()),
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
                pending.log_rx = self.output.as_ref().map(|o| o.output().subscribe());
            }
            _ => {}
        }
        Ok(pending)
    }

    /// Helper `i` was launched (its launch count is now its checks' launch): its checks start.
    pub(super) fn start_checks(&mut self, i: usize, pending: Pending) {
        let launch = self.helpers[i].attempt;
        let now = Instant::now();
        let cfg = self.config.helpers[i].clone();
        let timeout = cfg.ready.as_ref().map_or(
            crate::supervision::config::checks::DEFAULT_READY_TIMEOUT,
            |r| r.timeout(),
        );
        let mut c = LaunchChecks::new(launch, now, timeout, cfg.watchdog.map(|w| w.0));
        let check = cfg.ready.as_ref().and_then(|r| r.check().ok());
        let tx = self.checks_io.tx.clone();
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
                if let (Some(rx), Some(o)) = (pending.log_rx, &self.output) {
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
                self.at(
                    interval,
                    Timer::Check(i, launch, CheckTimer::Attempt(Check::Ready)),
                );
            }
        }
        self.helpers[i].checks = Some(c);
        if check.is_some() {
            self.at(timeout, Timer::Check(i, launch, CheckTimer::ReadyDeadline));
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
            self.at(
                interval,
                Timer::Check(i, launch, CheckTimer::Attempt(Check::Health)),
            );
        }
        if let Some(period) = watchdog {
            self.at(period, Timer::Check(i, launch, CheckTimer::Watchdog));
        }
    }

    /// Helper `i` passed its readiness check (`how`: notify, fd, exec, tcp, log): `ready`
    /// (with the time it took and how, as the state's detail); after `RELOADING=1`, ready again.
    fn became_ready(&mut self, i: usize, how: &str) {
        let Some(id) = self.helpers[i].running() else {
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
        let cfg = self.config.helpers[i].clone();
        let Some(c) = self.live_checks(i, Some(launch)) else {
            return;
        };
        match t {
            CheckTimer::ReadyDeadline => {
                if c.readiness != Readiness::Starting {
                    return;
                }
                if c.ready_deadline > now {
                    // Pushed later by EXTEND_TIMEOUT_USEC=.
                    let left = c.ready_deadline - now;
                    self.at(left, Timer::Check(i, launch, CheckTimer::ReadyDeadline));
                    return;
                }
                // The timeout, or what EXTEND_TIMEOUT_USEC= made of it.
                let waited = c.ready_deadline - c.launched;
                let how = cfg
                    .ready
                    .as_ref()
                    .and_then(|r| r.check().ok())
                    .map_or("", |c| c.name());
                let reason = format!(
                    "not ready within {} ({})",
                    Text(round_ms(waited)),
                    match how {
                        "notify" => "no READY=1".to_string(),
                        "fd" => "no newline on its notification descriptor".to_string(),
                        "log" => "no line of its output matched".to_string(),
                        other => format!("its {other} probe did not pass"),
                    }
                );
                self.fail_helper(i, Check::Ready, reason, true);
            }
            CheckTimer::Attempt(Check::Ready) => {
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
            CheckTimer::Attempt(_) => {
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
            CheckTimer::ProbeTimeout(attempt) => self.probe_ran_out(i, attempt),
            CheckTimer::Watchdog => {
                // It said STOPPING=1: on its way out, no longer held to its watchdog.
                if c.stopping {
                    return;
                }
                let Some(due) = c.watchdog_due() else {
                    return;
                };
                if due > now {
                    self.at(due - now, Timer::Check(i, launch, CheckTimer::Watchdog));
                    return;
                }
                let period = c.watchdog.unwrap_or_default();
                let reason = format!("no WATCHDOG=1 within {}", Text(period));
                self.fail_helper(i, Check::Watchdog, reason, true);
            }
        }
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
            if let Some(c) = self.helpers[i].checks.as_mut() {
                c.probe = Some(p);
            }
        }
    }

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
    fn start_exec_probe(&mut self, i: usize, check: Check, command: &CommandLine, limit: Duration) {
        let Some(c) = self.live_checks(i, None) else {
            return;
        };
        c.probes += 1;
        let (launch, attempt) = (c.launch, c.probes);
        let spec = match self.probe_spec(i, command) {
            Ok(s) => s,
            Err(e) => return self.probe_result(i, check, Err(ProbeFailure::Launch(e))),
        };
        let spawner = &self.spawner;
        let mut pidfd = None;
        let mut error = None;
        let r = self
            .reaper
            .launch(Owner::Probe(i, launch), || match spawner.launch(spec) {
                Ok(l) => {
                    pidfd = Some(l.pidfd);
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
                let identity = Identity::of(pid).unwrap_or(Identity { pid, start_time: 0 });
                self.registry.expect_own(identity);
                let process = match pidfd {
                    Some(fd) => ProcessRef::pinned(identity, fd),
                    None => ProcessRef::unpinned(identity),
                };
                if let Some(c) = self.helpers[i].checks.as_mut() {
                    c.probe = Some(ExecProbe {
                        process,
                        check,
                        attempt,
                        started: Instant::now(),
                        limit,
                        timed_out: None,
                        error,
                    });
                }
                let timeout = CheckTimer::ProbeTimeout(attempt);
                self.at(limit, Timer::Check(i, launch, timeout));
            }
            Err(e) => self.probe_result(i, check, Err(ProbeFailure::Launch(e.into()))),
        }
    }

    /// Starts a connect probe of helper `i` for `check`, given up after `limit`.
    fn start_tcp_probe(
        &mut self,
        i: usize,
        check: Check,
        addr: std::net::SocketAddr,
        limit: Duration,
    ) {
        let tx = self.checks_io.tx.clone();
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
    fn kill_probe(&mut self, p: &ExecProbe) {
        let id = p.process.identity();
        // Its tree read first, while its processes are still under it (once killed, what is
        // left of it would be adopted by foster).
        self.rescan();
        let _ = p.process.signal_group(libc::SIGKILL);
        let tree: Vec<Identity> = self
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
        self.registry.reaped(pid);
        let Some(c) = self.live_checks(i, Some(launch)) else {
            return;
        };
        let Some(p) = c.probe.take_if(|p| p.process.identity().pid == pid) else {
            return;
        };
        // Its time limit, if it has not run out, is disarmed with it.
        let timeout = Timer::Check(i, launch, CheckTimer::ProbeTimeout(p.attempt));
        self.timers.retain(|_, t| *t != timeout);
        let result = match (p.timed_out, p.error) {
            (Some(t), _) => Err(ProbeFailure::TimedOut(t)),
            (None, Some(error)) => Err(ProbeFailure::LaunchEnded { error, status }),
            (None, None) if status.success() => Ok(()),
            (None, None) => Err(ProbeFailure::Ended(status)),
        };
        self.probe_result(i, p.check, result);
    }

    /// One attempt of a probe of helper `i` for `check` ended with `result`.
    fn probe_result(&mut self, i: usize, check: Check, result: Result<(), ProbeFailure>) {
        let cfg = self.config.helpers[i].clone();
        let identity = self.helpers[i].identity;
        let Some(c) = self.live_checks(i, None) else {
            return;
        };
        let launch = c.launch;
        match check {
            Check::Ready => {
                if c.readiness != Readiness::Starting {
                    return;
                }
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
                        self.at(
                            interval,
                            Timer::Check(i, launch, CheckTimer::Attempt(Check::Ready)),
                        );
                    }
                }
            }
            Check::Health | Check::Watchdog => {
                let Some(h) = &cfg.health else {
                    return;
                };
                let limit = h.failures();
                match result {
                    Ok(()) => {
                        let failures = std::mem::take(&mut c.health_failures);
                        if failures > 0 {
                            self.emit(Event::CheckPassed {
                                helper: cfg.name().to_string(),
                                check: Check::Health,
                                failures,
                            });
                            if let Some(id) = identity {
                                self.helper_health(i, id, true, None);
                            }
                        }
                    }
                    Err(reason) => {
                        let reason = reason.to_string();
                        c.health_failures += 1;
                        let failures = c.health_failures;
                        self.emit(Event::CheckFailed {
                            helper: cfg.name().to_string(),
                            identity,
                            check: Check::Health,
                            reason: reason.clone(),
                            failures,
                            limit,
                        });
                        if failures >= limit {
                            return self.fail_helper(i, Check::Health, reason, false);
                        }
                        if let Some(id) = identity {
                            let why = format!(
                                "(its health check failed {failures} of {limit} times in a row: \
                                 {reason})"
                            );
                            self.helper_health(i, id, false, Some(why));
                        }
                    }
                }
                self.at(
                    h.interval(),
                    Timer::Check(i, launch, CheckTimer::Attempt(Check::Health)),
                );
            }
        }
    }

    /// Helper `i` failed `check` for `reason`: its checks end, the event (when `emit`; a health
    /// check's was emitted with its count), and the helper is stopped for it (its stop signal,
    /// SIGKILL of its tree after its stop grace; `lifecycle.rs`), its end then a failure for its
    /// restart rules.
    fn fail_helper(&mut self, i: usize, check: Check, reason: String, emit: bool) {
        let identity = self.helpers[i].running();
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
        let Some(mut c) = self.helpers[i].checks.take() else {
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
        for i in 0..self.helpers.len() {
            let probe = self.helpers[i].checks.as_mut().and_then(|c| {
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

    /// The datagrams waiting on the `k`th notify socket, at most [`DATAGRAMS_PER_TURN`]; false
    /// when the socket has none left.
    pub(super) fn on_notify_readable(&mut self, k: usize) -> bool {
        let Some((_, socket)) = self.checks_io.notify.get(k) else {
            return false;
        };
        let mut got = Vec::new();
        let mut more = true;
        while got.len() < DATAGRAMS_PER_TURN {
            match socket.recv() {
                Ok(d) => got.push(d),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    more = false;
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    warn!("notify socket: {e}");
                    more = false;
                    break;
                }
            }
        }
        for d in got {
            self.on_datagram(d);
        }
        more
    }

    /// Every datagram queued on the notify sockets now, read and handled before something
    /// they could change is judged: a due watchdog or readiness deadline (a `WATCHDOG=1` or
    /// `READY=1` sent in time may still wait in the queue when the timer wakes the loop: the
    /// loop does not choose between ready sources in any order), a process's end (what a
    /// process said before it ended is handled before its end). At most what a socket's queue
    /// can hold is read ([`NotifySocket::queued_bound`]): everything that was queued when the
    /// drain began, never an endless read of a sender that keeps sending.
    pub(super) fn drain_notify(&mut self) {
        for k in 0..self.checks_io.notify.len() {
            let bound = self.checks_io.notify[k].1.queued_bound();
            let mut read = 0;
            while read < bound && self.on_notify_readable(k) {
                read += DATAGRAMS_PER_TURN;
            }
        }
    }

    /// A datagram refused: counted ([`Noted`]: another user could send many). Its sender is
    /// named as the kernel gave it (outside foster's PID namespace, with no pid).
    fn refuse(&mut self, d: &Datagram, why: &str) {
        let from = crate::supervision::control::server::Peer {
            pid: d.pid,
            uid: d.uid,
        };
        self.checks_io.refused.note(
            format_args!("notify socket: ignored a datagram from {from}: {why}"),
            "further ones are counted in the status",
        );
    }

    /// The helper whose tree process `pid` is in: the registry's record of it; for a process
    /// born since foster last read its tree, the first ancestor the registry knows (read up
    /// `/proc`); for one that reaches foster itself (adopted since), the tree read again.
    /// A process whose ancestry leaves foster's tree belongs to no helper.
    ///
    /// Each step up reads a parent by its pid, which its holder may have left (it ended and
    /// was reaped) for another process since the child's `stat` was read: a parent is born
    /// before its child, and a process is only ever moved to an ancestor, born before it too,
    /// so a "parent" younger than the child is not its parent and the walk stops there.
    fn helper_of_pid(&mut self, pid: i32) -> Option<usize> {
        if pid <= 0 || pid == self.me.pid {
            return None;
        }
        let mut cur = pid;
        let mut younger_than = u64::MAX;
        for _ in 0..ANCESTRY {
            if cur == self.me.pid {
                break;
            }
            let (ppid, start_time) = parent_of(cur)?;
            if start_time > younger_than {
                return None;
            }
            younger_than = start_time;
            let id = Identity {
                pid: cur,
                start_time,
            };
            if let Some(r) = self.registry.get(&id).filter(|r| r.alive) {
                return r.helper.clone().and_then(|h| self.helper_index(&h));
            }
            if ppid <= 0 {
                return None;
            }
            cur = ppid;
        }
        // Below foster but not known yet: read the tree.
        self.rescan();
        let id = self.registry.identity_of_pid(pid)?;
        if Identity::of(pid).ok()? != id {
            return None;
        }
        let helper = self.registry.get(&id)?.helper.clone()?;
        self.helper_index(&helper)
    }

    /// The helper whose tree sent `d`, or why it cannot be told.
    ///
    /// The pid the kernel gives (`SCM_CREDENTIALS`) was the sender's when it sent; by the time
    /// foster reads the datagram the sender may have ended, been reaped by its parent, and its
    /// pid given to another process, which the pid alone cannot tell: a datagram from outside
    /// the tree could pass for one of a process of the tree that took the pid since. Where the
    /// kernel gives the sender's pidfd with the datagram (`SCM_PIDFD`, taken when it sent), the
    /// sender is told without that race:
    ///
    /// - **Not reaped** (running, or a zombie its parent has not waited for): the pidfd's
    ///   `fdinfo` gives its pid. foster reads that process's ancestry in `/proc`, then asks the
    ///   pidfd again (signal 0): still not reaped, and the sender held that pid all along (a
    ///   pid is given to another process only once its holder was reaped), so what `/proc` said
    ///   of the pid was said of the sender.
    /// - **Reaped** (`Pid: -1`; before Linux 6.16 the kernel gives no pidfd at all then, and
    ///   says why): its place in the tree can no longer be read, and its pid proves nothing.
    ///   It is accepted only as a process foster holds a pidfd for (a helper's own process, or
    ///   a process of the tree that has children, watched for its end), matched by the pidfd's
    ///   pidfs inode number, which no other process ever has: those are the only processes
    ///   foster knew that are sure to be the sender. Any other is refused: a short-lived sender
    ///   must still run when foster reads it (`systemd-notify` waits for foster's barrier
    ///   unless `--no-block`; `sd_notify_barrier(3)`).
    ///
    /// Where the kernel gives no pidfd (before Linux 6.5), the pid is all there is: read as it
    /// is now, with the race above.
    fn sender_helper(&mut self, d: &Datagram) -> Result<usize, &'static str> {
        use crate::process::identity::{PidfdPid, pidfd_pid, pidfd_unreaped};
        use std::os::fd::AsFd;
        let Some(fd) = &d.pidfd else {
            if d.sender_reaped {
                return Err("its sender had ended and been reaped before foster read it");
            }
            return self.helper_of_pid(d.pid).ok_or(NOT_IN_TREE);
        };
        match pidfd_pid(fd.as_fd()) {
            // Outside foster's PID namespace (foster contained), where every process of the
            // helpers' trees is: no process of theirs, and not one it could signal either.
            Ok(PidfdPid::Pid(0)) => Err(NOT_IN_TREE),
            Ok(PidfdPid::Pid(pid)) => {
                let found = self.helper_of_pid(pid);
                match pidfd_unreaped(fd.as_fd()) {
                    true => found.ok_or(NOT_IN_TREE),
                    // Reaped meanwhile: what was read of its pid may be another's.
                    false => self.ended_sender_helper(d),
                }
            }
            Ok(PidfdPid::Reaped) => self.ended_sender_helper(d),
            Err(e) => {
                debug!("notify socket: a sender's pidfd: {e}");
                Err("its sender's pidfd cannot be read")
            }
        }
    }

    /// The helper of the reaped sender of `d`, when foster holds a pidfd of that very process
    /// (see [`Supervisor::sender_helper`]).
    fn ended_sender_helper(&mut self, d: &Datagram) -> Result<usize, &'static str> {
        use std::os::fd::AsFd;
        const ENDED: &str = "its sender had ended and been reaped before foster read it, and \
                             was no process foster held";
        let inode = d
            .pidfd
            .as_ref()
            .and_then(|fd| crate::process::identity::pidfd_inode(fd.as_fd()))
            .ok_or(ENDED)?;
        let own = self.helpers.iter().position(|h| {
            h.process
                .as_ref()
                .and_then(|p| p.pidfd())
                .and_then(crate::process::identity::pidfd_inode)
                == Some(inode)
        });
        if let Some(i) = own {
            return Ok(i);
        }
        let id = self.watch.watched_inode(inode).ok_or(ENDED)?;
        let helper = self.registry.get(&id).and_then(|r| r.helper.clone());
        helper
            .and_then(|h| self.helper_index(&h))
            .ok_or(NOT_IN_TREE)
    }

    /// One datagram of a notify socket: accepted from a process of a helper's tree, for that
    /// helper, when it uses the protocol; its descriptors are closed once it was handled.
    fn on_datagram(&mut self, d: Datagram) {
        if d.too_long {
            return self.refuse(
                &d,
                &format!(
                    "longer than {} bytes",
                    crate::supervision::readiness::notify::MAX_DATAGRAM
                ),
            );
        }
        if d.control_cut {
            return self.refuse(
                &d,
                "its control messages were cut short (MSG_CTRUNC): more came with it than a \
                 notification carries",
            );
        }
        let i = match self.sender_helper(&d) {
            Ok(i) => i,
            Err(why) => return self.refuse(&d, why),
        };
        if !uses_notify(&self.config.helpers[i]) {
            let why = format!(
                "helper {:?} does not use the notify protocol",
                self.config.helpers[i].name()
            );
            return self.refuse(&d, &why);
        }
        let m = Message::parse(&d.bytes);
        self.apply_notify(i, m);
        drop(d); // BARRIER=1's descriptor: closed after the message was handled
    }

    /// What helper `i` said through the notify protocol.
    fn apply_notify(&mut self, i: usize, m: Message) {
        let now = Instant::now();
        let cfg = self.config.helpers[i].clone();
        let name = cfg.name().to_string();
        let main_pid = m.main_pid.filter(|&p| {
            self.helper_of_pid(p) == Some(i) || {
                self.checks_io.bad_main_pid.note(
                    format_args!("{name}: MAINPID={p} is not a process of its tree: ignored"),
                    "further ones are logged at debug level",
                );
                false
            }
        });
        let Some(c) = self.live_checks(i, None) else {
            return;
        };
        let launch = c.launch;
        if m.errno.is_some() {
            c.errno = m.errno;
        }
        if main_pid.is_some() {
            c.main_pid = main_pid;
        }
        if let Some(usec) = m.extend_timeout_usec {
            c.extend(now, Duration::from_micros(usec));
        }
        if let Some(usec) = m.watchdog_usec.filter(|_| c.watchdog.is_some()) {
            c.watchdog = Some(Duration::from_micros(usec).max(crate::base::duration::MIN));
            if let Some(due) = c.watchdog_due() {
                // The new period replaces the armed one.
                self.timers.retain(
                    |_, t| !matches!(t, Timer::Check(j, _, CheckTimer::Watchdog) if *j == i),
                );
                self.at(
                    due.saturating_duration_since(now),
                    Timer::Check(i, launch, CheckTimer::Watchdog),
                );
            }
        }
        let Some(c) = self.live_checks(i, None) else {
            return;
        };
        if m.watchdog == Some(Watchdog::Ping) {
            c.last_ping = now;
        }
        let notify_ready = cfg.ready.as_ref().is_some_and(|r| r.notify.is_some());
        let stopping = m.stopping && !c.stopping;
        c.stopping |= m.stopping;
        let reloading = m.reloading && notify_ready && c.readiness == Readiness::Ready;
        if reloading {
            c.readiness = Readiness::Reloading;
        }
        let id = self.helpers[i].running();
        if let (Some(text), Some(id)) = (&m.status, id) {
            self.set_status_text(i, id, text);
        }
        if reloading {
            // Not ready until its next READY=1: `starting` again, which holds back the helpers
            // that wait for it to be ready.
            let detail = Some("(reloading: it said RELOADING=1)".to_string());
            self.set_state(i, HelperState::Starting, detail);
        }
        if stopping {
            // On its way out: its watchdog is no longer judged (as systemd stops a stopping
            // service's), so a helper that takes longer than its period to finish is not
            // killed for it and its end not taken as a failure.
            self.timers
                .retain(|_, t| !matches!(t, Timer::Check(j, _, CheckTimer::Watchdog) if *j == i));
            let state = self.helpers[i].state;
            self.set_state(i, state, Some("(it said STOPPING=1)".to_string()));
        }
        if m.ready && notify_ready {
            self.became_ready(i, "notify");
        }
        if m.watchdog == Some(Watchdog::Trigger) {
            self.fail_helper(
                i,
                Check::Watchdog,
                "it asked to be taken as failed (WATCHDOG=trigger)".to_string(),
                true,
            );
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
