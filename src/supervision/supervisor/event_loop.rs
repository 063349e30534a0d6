//! The supervisor's loop ([`Supervisor::run`]): a single-threaded runtime waiting on the
//! signalfds, the parents' epoll (`watch.rs`), the connector's socket (`births.rs`), the
//! control socket, the output's reports, the notify sockets, the checks' reports and the
//! metrics' questions. No timer is armed unless one is pending, so an idle supervisor sleeps.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

use tokio::io::unix::AsyncFd;

use super::{Supervisor, control};
use crate::supervision::event::Event;

/// A raw fd for `AsyncFd` (owned elsewhere).
struct Fd(RawFd);
impl AsRawFd for Fd {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

/// What the loop waits on, registered with the runtime for the life of [`Supervisor::run`];
/// each descriptor is owned by the supervisor, which outlives them. (Fields in the order
/// they are dropped: the servers first, the registrations last.)
struct Waits {
    metrics_task: Option<tokio::task::JoinHandle<()>>,
    /// The questions of the metrics responder.
    asked: Option<control::Asked>,
    /// The control socket's server, while it serves.
    server: Option<crate::supervision::control::server::Server>,
    /// The loop's turn: which notify socket is looked at first.
    turn: usize,
    /// The notify sockets bound so far; one bound later (for a helper a reload added) is
    /// registered at the next turn of the loop.
    notify: Vec<AsyncFd<Fd>>,
    announced: Option<AsyncFd<Fd>>,
    parents: AsyncFd<Fd>,
    sigs: AsyncFd<Fd>,
    chld: AsyncFd<Fd>,
}

impl Supervisor {
    pub(super) async fn run(&mut self) -> io::Result<i32> {
        let mut waits = self.register()?;
        self.start();
        loop {
            self.settle();
            if let Some(code) = self.finished() {
                self.end(code, &mut waits).await;
                return Ok(code);
            }
            self.flush_narration();
            // The notify sockets bound since the last turn (a launch binds the one it needs).
            for (_, s) in &self.io.checks_io.notify[waits.notify.len()..] {
                // SAFETY: the notify sockets, owned by `self` too, never closed before `self`
                // is dropped.
                waits
                    .notify
                    .push(unsafe { AsyncFd::register(Fd(s.raw_fd())) }?);
            }
            waits.turn = waits.turn.wrapping_add(1);
            self.wait_once(&mut waits).await?;
        }
    }

    /// Registers what the loop waits on and starts the control socket's and the metrics'
    /// servers (inside the runtime).
    fn register(&mut self) -> io::Result<Waits> {
        // SAFETY: both fds are owned by `self` (the reaper's signalfd and `signal_fd`), which
        // outlives these registrations: they are dropped at the end of `run`.
        let chld = unsafe { AsyncFd::register(Fd(self.procs.reaper.raw_fd())) }
            .map_err(io::Error::from)?;
        // SAFETY: the signalfd is owned by `self`, which outlives this registration (dropped at the
        // end of `run`).
        let sigs = unsafe { AsyncFd::register(Fd(self.signal_in.signal_fd.as_raw_fd())) }
            .map_err(io::Error::from)?;
        // SAFETY: the watch's epoll descriptor, owned by `self` too, for the life of `self`.
        let parents =
            unsafe { AsyncFd::register(Fd(self.known.watch.raw_fd())) }.map_err(io::Error::from)?;
        let announced = match &self.known.births {
            // SAFETY: the connector's socket is owned by `self.known.births`, which outlives this
            // registration (dropped at the end of `run`).
            Some(b) => Some(unsafe { AsyncFd::register(Fd(b.raw_fd())) }?),
            None => None,
        };
        let lines = self.io.output.as_ref().map(|c| c.output().clone());
        let server = self.control.serve(lines)?;
        let (asked, metrics_task) = self.control.serve_metrics()?;
        Ok(Waits {
            chld,
            sigs,
            parents,
            announced,
            notify: Vec::new(),
            turn: 0,
            server,
            asked,
            metrics_task,
        })
    }

    /// Says the start, launches what can be launched and learns the tree once.
    fn start(&mut self) {
        self.emit(Event::Start {
            supervisor: self.setup.me,
            contained: self.setup.contained,
            socket: self.control.socket_path(),
        });
        let quiet = crate::base::logging::verbosity() < 0;
        if let Some(addr) = self.control.metrics_addr().filter(|_| !quiet) {
            // Said as the start is (not with -q): for a port 0, the port it took.
            crate::base::logging::write_stderr(&format!(
                "foster: metrics on http://{addr}/metrics\n"
            ));
        }
        // Helpers without dependencies at once, the others as their dependencies allow: the
        // first ones of the order that have none (and start with foster) in one request to the
        // spawner.
        let order = self.units.graph.order.clone();
        let free = order
            .iter()
            .take_while(|&&i| {
                self.units.graph.deps[i].is_empty() && self.config.helpers[i].autostart
            })
            .count();
        let mut k = 0;
        while k < free {
            k += self.launch_batch(&order[k..free]);
        }
        for &i in &order[free..] {
            self.autostart(i);
        }
        // Statuses of helpers that failed at once are already pending; take them in.
        self.on_sigchld();
        // Learn the machine once, so that later reads cost only what changed since.
        self.rescan();
        self.schedule_rescan();
    }

    /// Nothing of the tree is left: the last lines, then the last counts.
    async fn end(&mut self, code: i32, waits: &mut Waits) {
        if let Some(output) = self.io.output.take() {
            for r in output.finish() {
                self.on_output_report(r);
            }
        }
        self.emit(Event::Stopped { exit_status: code });
        self.flush_narration();
        self.reports.say_lost();
        if let Some(s) = waits.server.take() {
            s.finish(Duration::from_millis(300)).await;
        }
        if let Some(t) = &waits.metrics_task {
            t.abort();
        }
    }

    /// Waits for the next thing that happens and handles it.
    async fn wait_once(&mut self, waits: &mut Waits) -> io::Result<()> {
        let next = self.timers.next();
        tokio::select! {
            g = waits.chld.readable() => {
                let mut g = g?;
                // What the ended processes said before they ended, first (`drain_notify`).
                self.drain_notify();
                self.on_sigchld();
                g.clear_ready();
            }
            g = waits.parents.readable() => {
                let mut g = g?;
                // A parent of the tree ended: its children have a new parent already.
                // What it said before it ended first, while its pidfd is still held
                // (`checks.rs`, `sender_helper`).
                self.drain_notify();
                if self.known.watch.take_ended() > 0 {
                    self.rescan();
                }
                g.clear_ready();
            }
            g = readable(&waits.announced) => {
                let mut g = g?;
                self.on_announced();
                g.clear_ready();
            }
            g = waits.sigs.readable() => {
                let mut g = g?;
                // In the order read: a USR1 sent before a TERM reopens the log first.
                while let Some(si) = self.signal_in.signal_fd.read_signal() {
                    self.on_signal(si.ssi_signo as i32, si.ssi_pid, si.ssi_uid);
                }
                g.clear_ready();
            }
            _ = sleep_until(next), if next.is_some() => {
                // A ping or READY=1 sent before the deadline may still be queued.
                self.drain_notify();
                self.fire_timers();
            }
            r = output_report(&mut self.io.output) => self.on_output_report(r),
            g = any_readable(&waits.notify, waits.turn) => {
                let (k, mut g) = g?;
                if !self.on_notify_readable(k) {
                    g.clear_ready();
                }
            }
            Some(r) = self.io.checks_io.rx.recv() => self.on_check_report(r),
            cmd = control::recv(&mut waits.server) => self.on_command(cmd),
            reply = control::metrics_asked(&mut waits.asked) => {
                let _ = reply.send(self.metrics_text());
            }
        }
        Ok(())
    }
}

/// The first of `fds` that is readable, with its index, looked at from the `turn`th on (so
/// that a socket kept busy does not starve the others); pending forever when there are none.
async fn any_readable(
    fds: &[AsyncFd<Fd>],
    turn: usize,
) -> io::Result<(usize, tokio::io::unix::AsyncFdReadyGuard<'_, Fd>)> {
    std::future::poll_fn(|cx| {
        for j in 0..fds.len() {
            let k = (turn + j) % fds.len();
            if let std::task::Poll::Ready(r) = fds[k].poll_read_ready(cx) {
                return std::task::Poll::Ready(r.map(|g| (k, g)));
            }
        }
        std::task::Poll::Pending
    })
    .await
}

/// `fd` readable (pending forever without one).
async fn readable(
    fd: &Option<AsyncFd<Fd>>,
) -> io::Result<tokio::io::unix::AsyncFdReadyGuard<'_, Fd>> {
    match fd {
        Some(fd) => fd.readable().await,
        None => std::future::pending().await,
    }
}

/// The next report of the output's reading thread (pending forever without one).
async fn output_report(
    output: &mut Option<crate::supervision::output::Capture>,
) -> crate::supervision::output::Report {
    match output {
        Some(o) => o.report().await,
        None => std::future::pending().await,
    }
}

async fn sleep_until(when: Option<Instant>) {
    if let Some(w) = when {
        tokio::time::sleep_until(tokio::time::Instant::from_std(w)).await;
    }
}
