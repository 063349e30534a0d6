//! The duties the loop dispatches to, one per thing that can wake it: a forwarded signal
//! ([`Init::on_signal`]), children reaped ([`Init::on_reaped`]), a deadline reached
//! ([`Init::on_deadline`]).
//!
//! A signal goes to PROGRAM or its process group, rewritten when asked (`--rewrite`); once
//! PROGRAM has ended, SIGTERM, SIGINT or SIGQUIT cut a `--wait-all` grace short. When PROGRAM
//! stops on Ctrl-Z in a shell's job, foster stops too and resumes PROGRAM when continued.

use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use super::signals;
use super::teardown::{Phase, signal_rest};
use super::tty;
use super::{Init, level};
use crate::process::reaper::{ExitStatus, Routed};
use crate::process::signal::name;

impl Init<'_> {
    /// A signal read from the forwarding signalfd.
    pub(super) fn on_signal(&mut self, info: &libc::signalfd_siginfo) {
        let sig = info.ssi_signo as i32;
        if signals::FAULTS.contains(&sig) && !signals::sent_by_a_process(info) {
            say_error!(
                "{} raised by the kernel (si_code {}), not sent by a process: foster ends with it",
                name(sig),
                info.ssi_code
            );
            signals::die_of(sig);
        }
        if self.phase != Phase::Running {
            return self.on_signal_after_program(sig);
        }
        self.watch_parent_death(sig, info);
        self.forward(sig, info.ssi_pid);
    }

    /// `-p`: when `sig` is the armed signal and reports the parent's death, PROGRAM's grace
    /// starts (it gets the signal like any other).
    fn watch_parent_death(&mut self, sig: i32, info: &libc::signalfd_siginfo) {
        if let Some(p) = &self.own_pdeath
            && sig == p.signal
            && self.kill_program_at.is_none()
            && p.reports_death(info)
        {
            self.kill_program_at = Some(Instant::now() + p.grace);
            say!(
                1,
                "-p: {} reports the parent's death; PROGRAM gets it and has {} to end before \
                 SIGKILL",
                name(sig),
                crate::base::duration::Text(p.grace)
            );
        }
    }

    /// Sends PROGRAM `sig` (from pid `from`), rewritten or dropped as `--rewrite` says.
    fn forward(&self, sig: i32, from: u32) {
        let to = self.opts.rewrites.map(sig);
        if to == 0 {
            say!(2, "{} from pid {from} dropped (--rewrite)", name(sig));
            return;
        }
        let r = self.program.send(to);
        if level() >= 2 {
            let err = match r {
                Ok(()) => String::new(),
                Err(e) => format!(" failed: {e}"),
            };
            say!(
                2,
                "{} from pid {from} forwarded as {} to {}{err}",
                name(sig),
                name(to),
                self.program,
            );
        }
    }

    /// A signal once PROGRAM has ended: SIGTERM, SIGINT or SIGQUIT while the tree drains end
    /// the grace; anything else is ignored.
    fn on_signal_after_program(&mut self, sig: i32) {
        if self.phase != Phase::Killing
            && matches!(sig, libc::SIGTERM | libc::SIGINT | libc::SIGQUIT)
        {
            say!(
                1,
                "{} while the tree drains: SIGKILL to what is left now",
                name(sig)
            );
            signal_rest(&self.role, libc::SIGKILL);
            self.phase = Phase::Killing;
        } else {
            say!(2, "{} received after PROGRAM ended: ignored", name(sig));
        }
    }

    /// Reaps every child that has ended. Breaks when foster init is done: PROGRAM has ended
    /// and, with `--wait-all`, so has the rest of the tree.
    pub(super) fn on_reaped(&mut self) -> ControlFlow<()> {
        self.reaped.clear();
        self.reaper.reap_into(&mut self.reaped);
        for r in &self.reaped {
            match r {
                Routed::Owned { reaped, .. } => {
                    self.status = Some(reaped.status);
                    say!(1, "PROGRAM (pid {}) ended: {}", reaped.pid, reaped.status);
                }
                Routed::Orphan(o) => say!(2, "reaped pid {}: {}", o.pid, o.status),
            }
        }
        self.follow_job_control();
        match (self.phase, self.status) {
            (Phase::Running, None) => ControlFlow::Continue(()),
            (Phase::Running, Some(status)) => self.on_program_ended(status),
            (Phase::Draining(_) | Phase::Killing, _) => self.on_rest_reaped(),
        }
    }

    /// When PROGRAM, still running, has stopped on a terminal stop signal in a shell's job:
    /// foster stops too, so that the shell sees its job stopped, and resumes PROGRAM when
    /// continued.
    fn follow_job_control(&self) {
        let Some(t) = self.job_control else { return };
        if self.status.is_some() {
            return;
        }
        let Some(sig) = tty::stopped_by_terminal_signal(self.program.pid()) else {
            return;
        };
        say!(
            1,
            "PROGRAM stopped by {}: foster stops too, so that the shell sees its job stopped",
            name(sig)
        );
        let foreground = t.suspend_then_resume(self.program.pid());
        say!(
            1,
            "continued: SIGCONT to PROGRAM's process group{}",
            if foreground {
                ", the terminal's foreground handed back to it"
            } else {
                " (in the background: the terminal stays where it is)"
            }
        );
    }

    /// PROGRAM has ended with `status`: the terminal back to foster's group, then done, or
    /// with `--wait-all` SIGTERM to the rest of the tree and its grace starts.
    fn on_program_ended(&mut self, status: ExitStatus) -> ControlFlow<()> {
        if let Some(t) = self.terminal {
            t.take_back();
        }
        if !self.opts.wait_all {
            return ControlFlow::Break(());
        }
        if !self.reaper.children_left() {
            say!(1, "--wait-all: nothing else left");
            return ControlFlow::Break(());
        }
        say!(
            1,
            "--wait-all: PROGRAM ended ({status}); SIGTERM to the rest of the tree, SIGKILL \
             after {:?}",
            self.opts.grace
        );
        signal_rest(&self.role, libc::SIGTERM);
        signal_rest(&self.role, libc::SIGCONT);
        self.phase = Phase::Draining(Instant::now() + self.opts.grace);
        ControlFlow::Continue(())
    }

    /// Children reaped while the rest of the tree ends: done when none is left; after SIGKILL,
    /// SIGKILL again for descendants reparented to foster since the last round.
    fn on_rest_reaped(&self) -> ControlFlow<()> {
        if !self.reaper.children_left() {
            say!(1, "--wait-all: the whole tree has ended");
            return ControlFlow::Break(());
        }
        if self.phase == Phase::Killing {
            signal_rest(&self.role, libc::SIGKILL);
        }
        ControlFlow::Continue(())
    }

    /// The deadline the loop waits for, if any: PROGRAM's SIGKILL after `-p`'s grace, or the
    /// end of `--wait-all`'s grace. None: the loop sleeps until something comes.
    pub(super) fn deadline(&self) -> Option<Instant> {
        match self.phase {
            Phase::Running => self.kill_program_at,
            Phase::Draining(deadline) => Some(deadline),
            Phase::Killing => None,
        }
    }

    /// Acts on a deadline that has passed, if one has.
    pub(super) fn on_deadline(&mut self) {
        let now = Instant::now();
        match self.phase {
            Phase::Running if self.kill_program_at.is_some_and(|at| now >= at) => {
                self.kill_program_at = None;
                self.kill_program();
            }
            Phase::Draining(deadline) if now >= deadline => {
                say!(
                    1,
                    "grace of {:?} over: SIGKILL to what is left of the tree",
                    self.opts.grace
                );
                signal_rest(&self.role, libc::SIGKILL);
                self.phase = Phase::Killing;
            }
            _ => {}
        }
    }

    /// `-p`: PROGRAM outlived its grace after the parent's death.
    fn kill_program(&self) {
        let grace = self.own_pdeath.as_ref().map_or(Duration::ZERO, |p| p.grace);
        let r = self.program.send(libc::SIGKILL);
        say!(
            1,
            "-p: PROGRAM outlived the grace of {} after the parent's death: SIGKILL to {}{}",
            crate::base::duration::Text(grace),
            self.program,
            match r {
                Ok(()) => String::new(),
                Err(e) => format!(" failed: {e}"),
            }
        );
    }
}
