//! The startup orderings (the supervisor gone before the arm, between arm and check, after
//! the check), serving, its notification and the notify reaction, failed launches.

use std::time::{Duration, Instant};

use crate::gate::policy::{Policy, Reaction};
use crate::gate::spawner::Spawner;
use crate::gate::{self, Barrier, DeathPath, Step};
use crate::qualify::harness::{End, Outcome, Root, SupFds, ms, started_text, wait_end};

pub(super) const SERVE: &[&str] = &["-c", "echo started; exec sleep 30"];

pub(super) fn ordering(r: &mut Root, barrier: Barrier, wait: Step, armed: bool) -> (Outcome, i32) {
    let mut o = Outcome::default();
    let s = r.simple_supervisor(
        |f| f.spec("/bin/sh", SERVE, Policy::term(), barrier as u8),
        false,
    );
    let Some(rec) = r.trace.wait_step(0, wait, r.soon()) else {
        o.problems
            .push(format!("the helper never reached {wait:?}"));
        return (o, 0);
    };
    let h = rec.pid;
    r.name(h, "helper", false);
    let t = r.kill_and_reap(s);
    // The helper is now the harness subreaper's child; release the barrier if it still lives.
    // Armed: the signal is due, give it a bounded moment. Not armed: nothing can come; release.
    let first = if armed {
        wait_end(h, Instant::now() + Duration::from_secs(5))
    } else {
        None
    };
    let (end, at) = match first {
        Some(e) => e,
        None => {
            r.release();
            match wait_end(h, r.soon()) {
                Some(e) => e,
                None => {
                    o.problems.push("the helper did not end".into());
                    return (o, h);
                }
            }
        }
    };
    r.trace.drain();
    o.time_ms = Some(ms(t, at));
    o.helper = end.text();
    o.prctl = r.armed_text(h, libc::SIGTERM);
    o.observed_parent = r.observed_at_check(h);
    let started = r.target_started();
    o.target = started_text(started);
    o.path = Some(match end {
        End::Killed(libc::SIGTERM) => DeathPath::Signal,
        End::Exited(gate::EXIT_PARENT_GONE) => DeathPath::Check,
        End::Exited(gate::EXIT_LIFELINE) => DeathPath::Lifeline,
        _ => DeathPath::None,
    });
    o.check(!started, "the target started");
    (o, h)
}

pub(super) fn gone_before_arm(r: &mut Root) -> Outcome {
    let (mut o, h) = ordering(r, Barrier::BeforeArm, Step::SignalPath, false);
    if h == 0 {
        return o;
    }
    o.check(
        o.path == Some(DeathPath::Check),
        format!("expected the check path, got {}", o.helper),
    );
    o.check(
        r.trace
            .last(h, Step::Checked)
            .is_some_and(|c| c.ppid == r.me && c.value == 0),
        "the check did not see the harness subreaper as parent",
    );
    o.checked = "the gate saw the subreaper, not the supervisor, and stopped with 120".into();
    o
}

pub(super) fn gone_between_arm_and_check(r: &mut Root) -> Outcome {
    let (mut o, h) = ordering(r, Barrier::BeforeCheck, Step::Armed, true);
    if h == 0 {
        return o;
    }
    o.check(
        matches!(o.path, Some(DeathPath::Signal | DeathPath::Check)),
        format!("expected the signal or check path, got {}", o.helper),
    );
    o.checked = "armed before the death: the signal ended the helper before exec".into();
    o
}

pub(super) fn gone_after_check(r: &mut Root) -> Outcome {
    let (mut o, h) = ordering(r, Barrier::AfterCheck, Step::Checked, true);
    if h == 0 {
        return o;
    }
    o.check(
        o.path == Some(DeathPath::Signal),
        format!("expected the signal path, got {}", o.helper),
    );
    o.checked =
        "check passed with the supervisor, then the signal ended the helper before exec".into();
    o
}

// ---------------------------------------------------------------------------------------------
// Serving and its notification.

pub(super) fn serving(r: &mut Root, s: i32, sig: i32) -> Outcome {
    let mut o = Outcome::default();
    let h = match r.launched() {
        Ok(h) => h,
        Err(e) => {
            o.problems.push(e.to_string());
            return o;
        }
    };
    if r.out.expect("started", r.soon()).is_none() {
        o.problems.push("the target never said started".into());
        return o;
    }
    o.target = "started".into();
    let status = std::fs::read_to_string(format!("/proc/{h}/status")).unwrap_or_default();
    let mask = |key: &str| {
        crate::process::signal::SigBits::from_status(&status, key).map_or(u64::MAX, |b| b.0)
    };
    let bit = 1u64 << (sig - 1);
    o.check(
        mask("SigBlk:") & bit == 0,
        "the signal is blocked in the target",
    );
    o.check(
        mask("SigIgn:") & bit == 0,
        "the signal is ignored in the target",
    );
    r.trace.drain();
    o.prctl = r.armed_text(h, sig);
    o.observed_parent = r.observed_at_check(h);
    let t = r.kill_and_reap(s);
    o.ended(
        r.end_after(h, t),
        End::Killed(sig),
        Some(DeathPath::Signal),
        End::text,
        "the target outlived its supervisor",
    );
    o
}

pub(super) fn later_loss(r: &mut Root) -> Outcome {
    let s = r.simple_supervisor(|f| f.spec("/bin/sh", SERVE, Policy::term(), 0), false);
    let mut o = serving(r, s, libc::SIGTERM);
    o.checked = "the armed signal reached the serving target".into();
    o
}

pub(super) fn signal_blocked(r: &mut Root) -> Outcome {
    let s = r.supervisor(|fds| {
        // SAFETY: blocks SIGTERM in this (main) thread; the spawner thread inherits the mask.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGTERM);
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        }
        let Ok(sp) = Spawner::start() else { return 70 };
        fds.launch(&sp, fds.spec("/bin/sh", SERVE, Policy::term(), 0));
        fds.hold();
        0
    });
    let mut o = serving(r, s, libc::SIGTERM);
    o.checked = "SIGTERM blocked in the launcher, unblocked by the gate, delivered".into();
    o
}

pub(super) fn signal_ignored(r: &mut Root) -> Outcome {
    let s = r.supervisor(|fds| {
        // SAFETY: sets SIGTERM to ignored in this process; the helper inherits it.
        unsafe { libc::signal(libc::SIGTERM, libc::SIG_IGN) };
        let Ok(sp) = Spawner::start() else { return 70 };
        fds.launch(&sp, fds.spec("/bin/sh", SERVE, Policy::term(), 0));
        fds.hold();
        0
    });
    let mut o = serving(r, s, libc::SIGTERM);
    o.checked = "SIGTERM ignored in the launcher, reset to default by the gate, delivered".into();
    o
}

pub(super) fn normal(r: &mut Root) -> Outcome {
    let mut o = Outcome::default();
    r.simple_supervisor(
        |f| {
            f.spec(
                "/bin/sh",
                &["-c", "echo started; exit 0"],
                Policy::term(),
                0,
            )
        },
        true,
    );
    let h = match r.launched() {
        Ok(h) => h,
        Err(e) => {
            o.problems.push(e.to_string());
            return o;
        }
    };
    let end = r.reported_end();
    r.trace.drain();
    o.prctl = r.armed_text(h, libc::SIGTERM);
    o.observed_parent = r.observed_at_check(h);
    o.target = started_text(r.target_started());
    o.ended(
        end,
        End::Exited(0),
        Some(DeathPath::None),
        reaped_by_the_supervisor,
        "the supervisor reported no status",
    );
    o.check(o.target == "started", "the target did not start");
    o.check(
        o.observed_parent == "supervisor",
        "the check did not see the supervisor",
    );
    o.checked = "armed, checked against the supervisor, ran to completion".into();
    o
}

/// The end of a helper its supervisor reaped, in words.
pub(super) fn reaped_by_the_supervisor(end: End) -> String {
    format!("{}, reaped by the supervisor", end.text())
}

pub(super) fn exec_failure(r: &mut Root) -> Outcome {
    let mut o = Outcome::default();
    let script = std::env::temp_dir().join(format!("foster-qualify-noint-{}", r.me));
    let _ = std::fs::write(&script, "#!/nonexistent/interpreter\n");
    let _ = std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755));
    let path = script.to_string_lossy().into_owned();
    r.simple_supervisor(move |f| f.spec(&path, &[], Policy::term(), 0), false);
    if let Some((err, end)) = r.failed_launch(&mut o) {
        o.check(
            err.contains("No such file"),
            format!("launcher error does not name ENOENT: {err}"),
        );
        o.ended(
            end,
            End::Exited(gate::EXIT_NOT_FOUND),
            Some(DeathPath::None),
            reaped_by_the_supervisor,
            "no status for the failed helper",
        );
        r.trace.drain();
        o.check(
            r.trace
                .records
                .iter()
                .any(|t| t.step() == Some(Step::Passed)),
            "the gate did not pass before exec",
        );
        o.observed_parent = r
            .trace
            .records
            .iter()
            .find(|t| t.step() == Some(Step::Checked))
            .map(|t| r.role(t.ppid))
            .unwrap_or_default();
        o.prctl = r
            .trace
            .records
            .iter()
            .find(|t| t.step() == Some(Step::Armed))
            .map(|t| {
                format!(
                    "PR_SET_PDEATHSIG SIGTERM, read back {}",
                    crate::process::signal::name(t.value)
                )
            })
            .unwrap_or_else(|| "not reached".into());
    }
    let _ = std::fs::remove_file(&script);
    o.target = started_text(r.target_started());
    o.checked = "exec failed after the gate; ENOENT reached the launcher, status 127, no wait by \
                 the launcher"
        .into();
    o
}

pub(super) fn prctl_failure(r: &mut Root) -> Outcome {
    let mut o = Outcome::default();
    let bad = Policy {
        signal: 65,
        reaction: Reaction::Exit,
        grace: Duration::from_secs(1),
        next: None,
    };
    r.simple_supervisor(move |f| f.spec("/bin/sh", SERVE, bad, 0), false);
    if let Some((err, end)) = r.failed_launch(&mut o) {
        o.check(
            err.contains("prctl(PR_SET_PDEATHSIG) failed") && err.contains("Invalid argument"),
            format!("launcher error: {err}"),
        );
        o.ended(
            end,
            End::Exited(gate::EXIT_ARM_FAILED),
            Some(DeathPath::None),
            reaped_by_the_supervisor,
            "no status for the failed helper",
        );
        o.prctl = "EINVAL for signal 65".into();
    }
    r.trace.drain();
    o.observed_parent = "not checked (stopped before)".into();
    o.check(
        !r.trace
            .records
            .iter()
            .any(|t| t.step() == Some(Step::Checked)),
        "the gate checked after a failed prctl",
    );
    o.target = started_text(r.target_started());
    o.check(
        o.target == "never started",
        "the target started unsupervised",
    );
    o.checked = "prctl failure stopped the helper (121) and reached the launcher".into();
    o
}

// Long: one case's scenario, read top to bottom.
pub(super) fn notify(r: &mut Root) -> Outcome {
    let foster = r.foster.to_string_lossy().into_owned();
    let mut o = Outcome::default();
    let s = r.simple_supervisor(
        move |f| {
            let policy =
                Policy::new(libc::SIGTERM, Reaction::Notify).with_grace(Duration::from_secs(2));
            let mut spec = f.spec(&foster, &["__qualify-internal", "enter-helper"], policy, 0);
            // Served until the loss (its standard input ends only at the case's teardown).
            spec.stdin = SupFds::dup(f.hold_r);
            spec
        },
        false,
    );
    let h = match r.launched() {
        Ok(h) => h,
        Err(e) => {
            o.problems.push(e.to_string());
            return o;
        }
    };
    if r.out.expect("entered", r.soon()).is_none() {
        o.problems
            .push("the helper never passed its in-process gate".into());
        return o;
    }
    o.target = "started".into();
    r.trace.drain();
    o.prctl = r.armed_text(h, libc::SIGTERM);
    o.observed_parent = r.observed_at_check(h);
    let t = r.kill_and_reap(s);
    let loss = r.out.expect("loss", r.soon());
    o.path = match loss.as_deref() {
        Some("signal") => Some(DeathPath::Signal),
        Some("lifeline") => Some(DeathPath::Lifeline),
        _ => None,
    };
    o.check(
        o.path == Some(DeathPath::Signal),
        format!("expected the loss by the signal in the program's event loop, got {loss:?}"),
    );
    // The path is the one the program was told of, not one its end shows.
    o.ended(
        r.end_after(h, t),
        End::Exited(0),
        None,
        |e| {
            let code = match e {
                End::Exited(c) => c.to_string(),
                e => e.text(),
            };
            format!(
                "told of the loss ({}), exited {code}",
                loss.unwrap_or_default()
            )
        },
        "the helper outlived the loss",
    );
    o.checked = "the signal closed admission and reached the program's event loop, which owned \
                 its shutdown: drained within the grace, exited 0"
        .into();
    o
}
