//! The qualification cases: what each does, what it expects, and the programs it runs.
//!
//! Owns each case's scenario, expected outcome and checks: the table of cases ([`CASES`]), the
//! scenarios their case roots run (on the harness of [`super::harness`]: its [`Root`], its
//! observed ends and shared checks), and the programs some cases run as helpers
//! ([`lifeline_helper`], [`enter_helper`]). A case root is single-threaded when it forks, so the
//! processes it forks (supervisors, raw subreapers) may run ordinary Rust code; helpers are
//! launched by those supervisors through the real [`Spawner`] and gate, and targets are real
//! programs (`/bin/sh`, `sleep`, `foster exec`).

use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

use super::barrier::{self, pipe, write_all};
use super::harness::{
    CaseDef, End, Outcome, Root, SupFds, end_of_status, fork_run, ms, sigkill, started_text,
    wait_end,
};
use crate::gate::policy::{Policy, Reaction};
use crate::gate::spawner::Spawner;
use crate::gate::{self, Barrier, DeathPath, GatePlan, SignalSetup, Step, Trace, TraceRecord};
use crate::process::identity::Identity;
use crate::process::identity::pidfd_open;

/// Every case, in matrix order.
pub static CASES: &[CaseDef] = &[
    CaseDef {
        name: "gone-before-arm",
        death: "supervisor killed while the helper waits before prctl",
        expect: "check path: exit 120, target never starts",
        needs_root: None,
        run: gone_before_arm,
    },
    CaseDef {
        name: "gone-between-arm-and-check",
        death: "supervisor killed after prctl, before the parent check",
        expect: "signal (or check) path, target never starts",
        needs_root: None,
        run: gone_between_arm_and_check,
    },
    CaseDef {
        name: "gone-after-check",
        death: "supervisor killed after a passed check, before exec",
        expect: "signal path, target never starts",
        needs_root: None,
        run: gone_after_check,
    },
    CaseDef {
        name: "normal",
        death: "none: the target runs and exits 0",
        expect: "no notification, exit 0, supervisor reaps",
        needs_root: None,
        run: normal,
    },
    CaseDef {
        name: "later-loss",
        death: "supervisor killed while the target serves",
        expect: "signal path: target killed by SIGTERM",
        needs_root: None,
        run: later_loss,
    },
    CaseDef {
        name: "signal-blocked",
        death: "supervisor (SIGTERM blocked in its launcher) killed while serving",
        expect: "gate unblocks it: killed by SIGTERM",
        needs_root: None,
        run: signal_blocked,
    },
    CaseDef {
        name: "signal-ignored",
        death: "supervisor (SIGTERM ignored in its launcher) killed while serving",
        expect: "gate resets it: killed by SIGTERM",
        needs_root: None,
        run: signal_ignored,
    },
    CaseDef {
        name: "exec-failure",
        death: "none: the target's interpreter does not exist",
        expect: "launcher gets ENOENT, helper exits 127",
        needs_root: None,
        run: exec_failure,
    },
    CaseDef {
        name: "prctl-failure",
        death: "none: the policy names signal 65",
        expect: "launcher gets EINVAL, helper exits 121, target never starts",
        needs_root: None,
        run: prctl_failure,
    },
    CaseDef {
        name: "thread-exit-raw",
        death: "a worker thread that forked a raw armed child exits",
        expect: "child signalled while the supervisor lives (the kernel fact)",
        needs_root: None,
        run: thread_exit_raw,
    },
    CaseDef {
        name: "thread-exit-spawner",
        death: "a worker thread that asked the Spawner for the helper exits; later the supervisor",
        expect: "helper unharmed by the thread, killed by SIGTERM with the supervisor",
        needs_root: None,
        run: thread_exit_spawner,
    },
    CaseDef {
        name: "cred-drop-before-arm",
        death: "supervisor killed; helper launched with uid/gid 65534",
        expect: "armed after the change, kept: killed by SIGTERM",
        needs_root: Some("setresuid needs root"),
        run: cred_drop_before_arm,
    },
    CaseDef {
        name: "cred-drop-after-arm",
        death: "supervisor killed; foster exec --uid 65534 drops after arming",
        expect: "cleared by the change, foster exec re-arms: killed by SIGTERM",
        needs_root: Some("setresuid needs root"),
        run: cred_drop_after_arm,
    },
    CaseDef {
        name: "setuid-target",
        death: "none: the target is set-user-ID",
        expect: "refused by the Spawner and by foster exec (123); allowed with --allow-setid",
        needs_root: None,
        run: setuid_target,
    },
    CaseDef {
        name: "grandchild-next-generation",
        death: "the helper (a shell) is killed; its child ran foster exec",
        expect: "grandchild armed with the next policy: killed by SIGHUP",
        needs_root: None,
        run: grandchild_next_generation,
    },
    CaseDef {
        name: "nested-subreaper",
        death: "the helper's parent, then the nearer subreaper, are killed",
        expect: "adopted by subreaper B, then A (never PID 1), notified each time",
        needs_root: None,
        run: nested_subreaper,
    },
    CaseDef {
        name: "stale-parent",
        death: "none: FOSTER_PARENT inherited through a foster-unaware shell, or reused pid",
        expect: "foster exec refuses both (120), target never starts",
        needs_root: None,
        run: stale_parent,
    },
    CaseDef {
        name: "lifeline-only",
        death: "supervisor killed after the helper's signal was cleared",
        expect: "lifeline path: the helper exits 124",
        needs_root: None,
        run: lifeline_only,
    },
    CaseDef {
        name: "notify",
        death: "supervisor killed while an in-process helper with reaction notify serves",
        expect: "the loss reaches the program's event loop; it drains and exits 0 itself",
        needs_root: None,
        run: notify,
    },
    CaseDef {
        name: "other-pidns-exec",
        death: "supervisor killed; its child, in another PID namespace, ran foster exec",
        expect: "122 without FOSTER_PARENT_PIDFD; with it the pidfd decides: killed by SIGTERM",
        needs_root: Some("a PID namespace needs root"),
        run: other_pidns_exec,
    },
    CaseDef {
        name: "other-pidns-in-process",
        death: "supervisor killed; its child, in another PID namespace, used the in-process gate",
        expect: "122 without FOSTER_PARENT_PIDFD; with it the pidfd decides: exits 143",
        needs_root: Some("a PID namespace needs root"),
        run: other_pidns_in_process,
    },
    CaseDef {
        name: "adoption-through-short-lived-parent",
        death: "a helper's child forks and ends at once, born after foster read its tree",
        expect: "its orphan adopted as expected, generation 3, and ended by its SIGTERM policy",
        needs_root: Some("the kernel announces births in the tree only to CAP_NET_ADMIN here"),
        run: adoption_through_short_lived_parent,
    },
];

/// The case named `name`.
pub fn find(name: &str) -> Option<&'static CaseDef> {
    CASES.iter().find(|c| c.name == name)
}
const SERVE: &[&str] = &["-c", "echo started; exec sleep 30"];

// ---------------------------------------------------------------------------------------------
// The startup orderings.

fn ordering(r: &mut Root, barrier: Barrier, wait: Step, armed: bool) -> (Outcome, i32) {
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

fn gone_before_arm(r: &mut Root) -> Outcome {
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

fn gone_between_arm_and_check(r: &mut Root) -> Outcome {
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

fn gone_after_check(r: &mut Root) -> Outcome {
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

fn serving(r: &mut Root, s: i32, sig: i32) -> Outcome {
    let mut o = Outcome::default();
    let h = match r.launched() {
        Ok(h) => h,
        Err(e) => {
            o.problems.push(e);
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

fn later_loss(r: &mut Root) -> Outcome {
    let s = r.simple_supervisor(|f| f.spec("/bin/sh", SERVE, Policy::term(), 0), false);
    let mut o = serving(r, s, libc::SIGTERM);
    o.checked = "the armed signal reached the serving target".into();
    o
}

fn signal_blocked(r: &mut Root) -> Outcome {
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

fn signal_ignored(r: &mut Root) -> Outcome {
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

fn normal(r: &mut Root) -> Outcome {
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
            o.problems.push(e);
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
fn reaped_by_the_supervisor(end: End) -> String {
    format!("{}, reaped by the supervisor", end.text())
}

fn exec_failure(r: &mut Root) -> Outcome {
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
    o.checked = "exec failed after the gate; ENOENT reached the launcher, status 127, no wait by the launcher".into();
    o
}

fn prctl_failure(r: &mut Root) -> Outcome {
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

// ---------------------------------------------------------------------------------------------
// The creating thread.

/// Waits until thread `tid` of this process is gone (a thread pidfd, else /proc), bounded.
fn wait_thread_gone(tid: i32) {
    let deadline = Instant::now() + Duration::from_secs(10);
    if let Ok(fd) = crate::process::identity::pidfd_open_thread(tid) {
        barrier::readable(fd.as_raw_fd(), Some(Duration::from_secs(10)));
    }
    // The task directory goes once the thread is released: after the kernel reparented and
    // signalled its children. Bounded wait on that condition.
    let path = format!("/proc/self/task/{tid}");
    while std::path::Path::new(&path).exists() && Instant::now() < deadline {
        std::thread::yield_now();
    }
}

fn thread_exit_raw(r: &mut Root) -> Outcome {
    let mut o = Outcome::default();
    r.supervisor(|fds| {
        let me = Identity::current().expect("own identity");
        let worker = std::thread::spawn(move || {
            // SAFETY: gettid, then a raw fork whose child only arms, checks, reports and pauses.
            let tid = unsafe { libc::gettid() };
            let plan =
                GatePlan::new(me, &Policy::term(), SignalSetup::ExecDefault).with_trace(Trace {
                    fd: fds.trace_w,
                    go_fd: -1,
                    barriers: 0,
                });
            let (ready_r, ready_w) = pipe().expect("pipe");
            // SAFETY: the child runs only the allocation-free gate, raw writes, pause and _exit.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                let code = match plan.run() {
                    Ok(_) => {
                        write_all(ready_w.as_raw_fd(), b"r");
                        loop {
                            // SAFETY: pause has no preconditions.
                            unsafe { libc::pause() };
                        }
                    }
                    Err(s) => s.exit_status(),
                };
                // SAFETY: _exit ends the forked child without running the parent's atexit handlers.
                unsafe { libc::_exit(code) };
            }
            drop(ready_w);
            // Wait until the child passed its gate, then let this thread end.
            let mut b = [0u8; 1];
            barrier::read_full(
                ready_r.as_raw_fd(),
                &mut b,
                Instant::now() + Duration::from_secs(10),
            );
            (tid, pid)
        });
        let Ok((_tid, child)) = worker.join() else {
            return 71;
        };
        fds.say(&format!("launched {child}"));
        fds.reap_and_report(child);
        fds.hold();
        0
    });
    let h = match r.launched() {
        Ok(h) => h,
        Err(e) => {
            o.problems.push(e);
            return o;
        }
    };
    r.name(h, "raw child", false);
    let end = r.reported_end();
    r.trace.drain();
    o.prctl = r.armed_text(h, libc::SIGTERM);
    o.observed_parent = r.observed_at_check(h);
    o.target = "none (raw child)".into();
    o.check(
        o.observed_parent == "supervisor",
        "the raw child did not see the supervisor at its check",
    );
    o.ended(
        end,
        End::Killed(libc::SIGTERM),
        Some(DeathPath::Signal),
        |e| format!("{} while the supervisor lived", e.text()),
        "the raw child was not signalled when its creating thread exited",
    );
    o.checked = "the kernel signals on the creating thread's exit: the fact the Spawner's long-lived thread avoids".into();
    o
}

fn thread_exit_spawner(r: &mut Root) -> Outcome {
    let mut o = Outcome::default();
    let s = r.supervisor(|fds| {
        let Ok(sp) = Spawner::start() else { return 70 };
        let sp2 = sp.clone();
        let worker = std::thread::spawn(move || {
            // SAFETY: no preconditions.
            let tid = unsafe { libc::gettid() };
            let pid = fds.launch(&sp2, fds.spec("/bin/sh", SERVE, Policy::term(), 0));
            (tid, pid)
        });
        let Ok((tid, _pid)) = worker.join() else {
            return 71;
        };
        wait_thread_gone(tid);
        fds.say("worker-gone");
        fds.hold();
        drop(sp);
        0
    });
    let h = match r.launched() {
        Ok(h) => h,
        Err(e) => {
            o.problems.push(e);
            return o;
        }
    };
    if r.sup.expect("worker-gone", r.soon()).is_none() {
        o.problems.push("the worker thread did not end".into());
    }
    if r.out.expect("started", r.soon()).is_none() {
        o.problems.push("the target never said started".into());
    }
    o.target = "started".into();
    // The worker thread is gone and the kernel has done whatever it does on its exit.
    let alive = std::fs::read(format!("/proc/{h}/stat"))
        .ok()
        .and_then(|b| {
            crate::process::procstat::StatFields::parse(&b)
                .ok()
                .map(|f| f.state != b'Z')
        })
        .unwrap_or(false);
    o.check(
        alive,
        "the helper died when the worker thread that requested it exited",
    );
    r.trace.drain();
    o.prctl = r.armed_text(h, libc::SIGTERM);
    o.observed_parent = r.observed_at_check(h);
    let t = r.kill_and_reap(s);
    o.ended(
        r.end_after(h, t),
        End::Killed(libc::SIGTERM),
        Some(DeathPath::Signal),
        |e| {
            format!(
                "alive after the worker's exit; {} with the supervisor",
                e.text()
            )
        },
        "the helper outlived its supervisor",
    );
    o.checked =
        "the requesting thread's exit did not signal the helper; the supervisor's death did".into();
    o
}

// ---------------------------------------------------------------------------------------------
// Credentials and privileged targets.

fn cred_drop_before_arm(r: &mut Root) -> Outcome {
    let s = r.simple_supervisor(
        |f| {
            let mut spec = f.spec("/bin/sh", SERVE, Policy::term(), 0);
            spec.uid = Some(65534);
            spec.gid = Some(65534);
            spec
        },
        false,
    );
    let mut o = serving(r, s, libc::SIGTERM);
    o.prctl = format!("after setresuid(65534): {}", o.prctl);
    o.checked = "the spawner changed uid/gid first and armed after: the setting was kept".into();
    o
}

/// Arms in a forked child, changes its uid, reads the setting back: the kernel fact.
fn raw_cleared_by_setuid() -> i32 {
    let (rd, wr) = pipe().expect("pipe");
    let w = wr.as_raw_fd();
    let pid = fork_run(move || {
        // SAFETY: prctl and setresuid in a forked single-threaded child.
        unsafe {
            libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGTERM as libc::c_ulong,
                0,
                0,
                0,
            );
            libc::setresgid(65534, 65534, 65534);
            libc::setresuid(65534, 65534, 65534);
            let mut got: libc::c_int = -1;
            libc::prctl(
                libc::PR_GET_PDEATHSIG,
                &mut got as *mut libc::c_int,
                0,
                0,
                0,
            );
            write_all(w, &got.to_ne_bytes());
        }
        0
    });
    drop(wr);
    let mut b = [0u8; 4];
    let n = barrier::read_full(
        rd.as_raw_fd(),
        &mut b,
        Instant::now() + Duration::from_secs(10),
    );
    let _ = wait_end(pid, Instant::now() + Duration::from_secs(10));
    if n == 4 { i32::from_ne_bytes(b) } else { -1 }
}

fn cred_drop_after_arm(r: &mut Root) -> Outcome {
    let raw = raw_cleared_by_setuid();
    let foster = r.foster.to_string_lossy().into_owned();
    let s = r.simple_supervisor(
        move |f| {
            let args = [
                "-v",
                "exec",
                "--uid",
                "65534",
                "--gid",
                "65534",
                "--",
                "/bin/sh",
                "-c",
                "echo started; exec sleep 30",
            ];
            let mut spec = f.spec(&foster, &args, Policy::term(), 0);
            spec.env
                .push(("RUST_LOG".into(), Some("foster=info".into())));
            spec
        },
        false,
    );
    let mut o = serving(r, s, libc::SIGTERM);
    let mut saw = false;
    let mut line = r.err.next_line(Instant::now());
    while let Some(l) = line {
        saw |= l.contains("PR_GET_PDEATHSIG is 0 after the credential change: re-arming");
        line = r.err.next_line(Instant::now());
    }
    o.check(
        raw == 0,
        format!("raw: PR_GET_PDEATHSIG after setresuid read {raw}, expected 0 (cleared)"),
    );
    o.check(
        saw,
        "foster exec did not report the cleared setting and its re-arming",
    );
    o.prctl = format!(
        "raw: armed SIGTERM, read {raw} after setresuid (cleared); foster exec re-read 0 and re-armed SIGTERM"
    );
    o.checked =
        "the kernel clears the setting on a uid change; foster exec re-read it and re-armed".into();
    o
}

fn setuid_target(r: &mut Root) -> Outcome {
    let mut o = Outcome::default();
    let target = std::env::temp_dir().join(format!("foster-qualify-setuid-{}", r.me));
    let src = if std::path::Path::new("/bin/true").exists() {
        "/bin/true"
    } else {
        "/usr/bin/true"
    };
    if std::fs::copy(src, &target).is_err()
        || std::fs::set_permissions(
            &target,
            std::os::unix::fs::PermissionsExt::from_mode(0o4755),
        )
        .is_err()
    {
        o.problems
            .push("cannot make a set-user-ID file in the temporary directory".into());
        return o;
    }
    let path = target.to_string_lossy().into_owned();
    let p2 = path.clone();
    r.simple_supervisor(move |f| f.spec(&p2, &[], Policy::term(), 0), false);
    let line = r.sup.next_line(r.soon()).unwrap_or_default();
    o.check(
        line.starts_with("error ") && line.contains("set-user-ID"),
        format!("the Spawner did not refuse: {line}"),
    );
    let run = |extra: &[&str]| {
        let mut c = std::process::Command::new(&r.foster);
        crate::process::signal::reserved_as_inherited(&mut c);
        c.args([
            "exec",
            "--parent",
            &Identity::current()
                .map(|i| i.to_string())
                .unwrap_or_default(),
        ])
        .args(extra)
        .arg("--")
        .arg(&path)
        .output()
    };
    let refused = run(&[]);
    let allowed = run(&["--allow-setid"]);
    let _ = std::fs::remove_file(&target);
    match (refused, allowed) {
        (Ok(a), Ok(b)) => {
            let msg = String::from_utf8_lossy(&a.stderr);
            o.check(
                a.status.code() == Some(gate::EXIT_REFUSED_TARGET),
                format!("foster exec status {:?}, expected 123", a.status.code()),
            );
            o.check(
                msg.contains("set-user-ID"),
                format!("foster exec message: {msg}"),
            );
            o.check(
                b.status.code() == Some(0),
                format!("--allow-setid status {:?}", b.status.code()),
            );
            o.check(
                String::from_utf8_lossy(&b.stderr).contains("warning"),
                "--allow-setid gave no warning",
            );
            o.helper = format!(
                "not created by the Spawner; foster exec {}",
                End::Exited(a.status.code().unwrap_or(-1)).text()
            );
        }
        _ => o.problems.push("cannot run foster exec".into()),
    }
    o.observed_parent = "not checked (refused before fork)".into();
    o.prctl = "not reached".into();
    o.path = Some(DeathPath::None);
    o.target = "never started (started only with --allow-setid)".into();
    o.checked =
        "refused with a message naming set-user-ID; --allow-setid ran it with a warning".into();
    o
}

// ---------------------------------------------------------------------------------------------
// Generations, adoption, stale identities, the lifeline.

fn grandchild_next_generation(r: &mut Root) -> Outcome {
    let mut o = Outcome::default();
    let foster = r.foster.to_string_lossy().into_owned();
    r.simple_supervisor(
        move |f| {
            let chain: Policy = "TERM:exit:5s;HUP:exit:5s".parse().expect("valid");
            let script =
                r#""$FOSTER_BIN" exec -- /bin/sh -c 'echo started $$ "$FOSTER_GATED"; exec sleep 30' & wait"#;
            let mut spec = f.spec("/bin/sh", &["-c", script], chain, 0);
            spec.env.push(("FOSTER_BIN".into(), Some(foster.into())));
            spec
        },
        false,
    );
    let h = match r.launched() {
        Ok(h) => h,
        Err(e) => {
            o.problems.push(e);
            return o;
        }
    };
    let line = r.out.expect("started", r.soon()).unwrap_or_default();
    let (g, gated) = line.split_once(' ').unwrap_or((&line, ""));
    let Ok(g) = g.parse::<i32>() else {
        o.problems.push("the grandchild never started".into());
        return o;
    };
    let gated = gated.trim().to_string();
    r.name(g, "grandchild", false);
    o.target = "started (grandchild)".into();
    let hid = Identity::of(h).map(|i| i.to_string()).unwrap_or_default();
    o.check(
        gated == format!("{hid};SIGHUP:exit:5s"),
        format!("grandchild FOSTER_GATED is {gated:?}"),
    );
    o.observed_parent = "helper (its own launcher), checked by foster exec".into();
    o.prctl = format!(
        "helper SIGTERM; grandchild {}",
        if gated.ends_with("SIGHUP:exit:5s") {
            "SIGHUP (next generation)"
        } else {
            "?"
        }
    );
    let t = sigkill(h);
    o.ended(
        r.end_after(g, t),
        End::Killed(libc::SIGHUP),
        Some(DeathPath::Signal),
        |e| format!("grandchild {}", e.text()),
        "the grandchild outlived its parent",
    );
    o.checked = "foster exec in the helper's child armed the next generation's signal (HUP)".into();
    o
}

static NOTE_FD: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);
const NOTE_STEP: u32 = 100;
const ROLE_STEP: u32 = 200;

extern "C" fn on_notify(sig: libc::c_int) {
    // SAFETY: getpid, getppid and write are async-signal-safe.
    let rec = unsafe {
        TraceRecord {
            step: NOTE_STEP,
            pid: libc::getpid(),
            ppid: libc::getppid(),
            value: sig,
        }
    };
    let mut b = [0u8; 16];
    b[0..4].copy_from_slice(&rec.step.to_ne_bytes());
    b[4..8].copy_from_slice(&rec.pid.to_ne_bytes());
    b[8..12].copy_from_slice(&rec.ppid.to_ne_bytes());
    b[12..16].copy_from_slice(&rec.value.to_ne_bytes());
    // SAFETY: writes `b`, a live stack buffer, to a descriptor the caller holds; async-signal-safe.
    unsafe {
        libc::write(
            NOTE_FD.load(std::sync::atomic::Ordering::Relaxed),
            b.as_ptr().cast(),
            16,
        )
    };
}

fn announce(fd: RawFd, role: i32) {
    // SAFETY: no preconditions.
    let rec = unsafe {
        TraceRecord {
            step: ROLE_STEP + role as u32,
            pid: libc::getpid(),
            ppid: libc::getppid(),
            value: 0,
        }
    };
    let mut b = [0u8; 16];
    b[0..4].copy_from_slice(&rec.step.to_ne_bytes());
    b[4..8].copy_from_slice(&rec.pid.to_ne_bytes());
    b[8..12].copy_from_slice(&rec.ppid.to_ne_bytes());
    write_all(fd, &b);
}

fn reap_forever() -> ! {
    loop {
        let mut st = 0;
        // SAFETY: a subreaper reaping its own (adopted) children.
        if unsafe { libc::waitpid(-1, &mut st, 0) } < 0 {
            // SAFETY: pause has no preconditions.
            unsafe { libc::pause() };
        }
    }
}

fn nested_subreaper(r: &mut Root) -> Outcome {
    let mut o = Outcome::default();
    let fd = r.fds.trace_w;
    let a = fork_run(move || {
        // SAFETY: prctl with integers, in a forked single-threaded child; likewise below.
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
        announce(fd, 1);
        fork_run(move || {
            // SAFETY: prctl with integer arguments on the calling process.
            unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
            announce(fd, 2);
            fork_run(move || {
                announce(fd, 3);
                let me = Identity::current().expect("identity");
                fork_run(move || {
                    NOTE_FD.store(fd, std::sync::atomic::Ordering::Relaxed);
                    let notify: Policy = "USR1:notify:1s".parse().expect("valid");
                    // SAFETY: installs an async-signal-safe handler.
                    unsafe {
                        let mut act: libc::sigaction = std::mem::zeroed();
                        act.sa_sigaction = on_notify as *const () as usize;
                        libc::sigaction(libc::SIGUSR1, &act, std::ptr::null_mut());
                    }
                    let plan =
                        GatePlan::new(me, &notify, SignalSetup::Consumed).with_trace(Trace {
                            fd,
                            go_fd: -1,
                            barriers: 0,
                        });
                    if let Err(s) = plan.run() {
                        return s.exit_status();
                    }
                    loop {
                        // SAFETY: pause has no preconditions.
                        unsafe { libc::pause() };
                    }
                });
                loop {
                    // SAFETY: pause has no preconditions.
                    unsafe { libc::pause() };
                }
            });
            reap_forever()
        });
        reap_forever()
    });
    let mut pids = [0i32; 4];
    pids[0] = a;
    for role in 1..=3 {
        match r.trace.wait_for(r.soon(), |t| t.step == ROLE_STEP + role) {
            Some(t) => pids[role as usize] = t.pid,
            None => {
                o.problems
                    .push(format!("process {role} never announced itself"));
                return o;
            }
        }
    }
    let (b, c) = (pids[2], pids[3]);
    r.name(a, "subreaper A", true);
    r.name(b, "subreaper B", true);
    r.name(c, "launcher C", true);
    let Some(passed) = r.trace.wait_step(0, Step::Passed, r.soon()) else {
        o.problems.push("the helper never passed its gate".into());
        return o;
    };
    let d = passed.pid;
    r.name(d, "helper", false);
    o.prctl = r.armed_text(d, libc::SIGUSR1);
    o.observed_parent = r.observed_at_check(d);
    o.expected_parent = "launcher C".into();
    let t = sigkill(c);
    let first = r.trace.wait_for(r.soon(), |t| t.step == NOTE_STEP);
    sigkill(b);
    let second = r.trace.wait_for(r.soon(), |t| {
        t.step == NOTE_STEP
            && Some(t.pid) == first.map(|f| f.pid)
            && t != &first.unwrap_or_default()
    });
    let adopted: Vec<String> = [first, second]
        .iter()
        .map(|n| {
            n.map(|n| r.role(n.ppid))
                .unwrap_or_else(|| "no notification".into())
        })
        .collect();
    o.observed_parent = format!(
        "{} at its check; after C died: {}; after B died: {}",
        o.observed_parent, adopted[0], adopted[1]
    );
    o.time_ms = first.map(|_| ms(t, Instant::now()));
    o.check(
        first.is_some_and(|n| n.ppid == b),
        format!(
            "after C died the helper's parent was {}, expected subreaper B",
            adopted[0]
        ),
    );
    o.check(
        second.is_some_and(|n| n.ppid == a),
        format!(
            "after B died the helper's parent was {}, expected subreaper A",
            adopted[1]
        ),
    );
    o.path = Some(if first.is_some() && second.is_some() {
        DeathPath::Signal
    } else {
        DeathPath::None
    });
    let end = {
        sigkill(d);
        "notified twice (idempotent), then ended by the harness (SIGKILL)".to_string()
    };
    o.helper = end;
    o.target = "none (raw helper)".into();
    o.checked = "orphan adopted by the nearest living subreaper each time, never by PID 1; one notification per adoption".into();
    // D is a harness-ended process; register it so teardown does not count it.
    r.harness.push(d);
    o
}

fn stale_parent(r: &mut Root) -> Outcome {
    let mut o = Outcome::default();
    let foster = r.foster.to_string_lossy().into_owned();
    r.simple_supervisor(
        move |f| {
            let script = r#"/bin/sh -c '"$FOSTER_BIN" exec -- /bin/echo started; echo "stale $?"'
FOSTER_PARENT="$$:1" "$FOSTER_BIN" exec -- /bin/echo started; echo "reused $?""#;
            let mut spec = f.spec("/bin/sh", &["-c", script], Policy::term(), 0);
            spec.env.push(("FOSTER_BIN".into(), Some(foster.into())));
            spec
        },
        true,
    );
    if let Err(e) = r.launched() {
        o.problems.push(e);
        return o;
    }
    let stale = r.out.expect("stale", r.soon());
    let reused = r.out.expect("reused", r.soon());
    let _ = r.reported_end();
    o.check(
        stale.as_deref() == Some("120"),
        format!("inherited FOSTER_PARENT: foster exec gave {stale:?}, expected 120"),
    );
    o.check(
        reused.as_deref() == Some("120"),
        format!("reused pid with another start time: foster exec gave {reused:?}, expected 120"),
    );
    let mut started = false;
    let mut msgs = 0;
    while let Some(l) = r.err.next_line(Instant::now()) {
        msgs += usize::from(l.contains("refused") || l.contains("is gone"));
    }
    while let Some(l) = r.out.next_line(Instant::now()) {
        started |= l.starts_with("started");
    }
    o.check(msgs == 2, format!("{msgs} refusal messages, expected 2"));
    o.check(!started, "a target started under a stale identity");
    o.observed_parent = "not the expected process (checked by pid and start time)".into();
    o.expected_parent = "an older generation / a reused pid".into();
    o.prctl = "armed, then the check failed".into();
    o.path = Some(DeathPath::Check);
    o.helper = format!(
        "foster exec exited {} and {}",
        stale.unwrap_or_default(),
        reused.unwrap_or_default()
    );
    o.target = started_text(started);
    o.checked = "identity compared with pid and start time; stale and reused values refused".into();
    o
}

fn lifeline_only(r: &mut Root) -> Outcome {
    let foster = r.foster.to_string_lossy().into_owned();
    let mut o = Outcome::default();
    let s = r.simple_supervisor(
        move |f| {
            let policy = Policy::term().with_grace(Duration::from_secs(2));
            f.spec(
                &foster,
                &["__qualify-internal", "lifeline-helper"],
                policy,
                0,
            )
        },
        false,
    );
    let h = match r.launched() {
        Ok(h) => h,
        Err(e) => {
            o.problems.push(e);
            return o;
        }
    };
    if r.out.expect("started", r.soon()).is_none() {
        o.problems.push("the helper never started".into());
        return o;
    }
    o.target = "started".into();
    let cleared = r.out.expect("pdeathsig", r.soon());
    o.check(
        cleared.as_deref() == Some("0"),
        format!("the helper did not clear its signal: {cleared:?}"),
    );
    r.trace.drain();
    o.prctl = format!(
        "{}; in-process gate re-armed, then cleared to 0",
        r.armed_text(h, libc::SIGTERM)
    );
    o.observed_parent = r.observed_at_check(h);
    let t = r.kill_and_reap(s);
    o.ended(
        r.end_after(h, t),
        End::Exited(gate::EXIT_LIFELINE),
        Some(DeathPath::Lifeline),
        End::text,
        "the helper outlived its supervisor: the lifeline did not report",
    );
    o.checked = "no signal was armed any more; the pidfd lifeline reported the loss".into();
    o
}

/// The helper of the `lifeline-only` case (`foster __qualify-internal lifeline-helper`): the
/// in-process gate, then its signal cleared (as a later credential change would), then serving
/// until the lifeline ends it.
pub fn lifeline_helper() -> i32 {
    let gated = match gate::enter(None) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("lifeline-helper: {e}");
            return e.exit_status();
        }
    };
    // SAFETY: prctl with integers.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, 0, 0, 0, 0) };
    let mut got: libc::c_int = -1;
    // SAFETY: a pointer to a stack int.
    unsafe {
        libc::prctl(
            libc::PR_GET_PDEATHSIG,
            &mut got as *mut libc::c_int,
            0,
            0,
            0,
        )
    };
    println!("started");
    println!("pdeathsig {got}");
    // Serve: each operation under a guard, until admission closes.
    while let Ok(_guard) = gated.admission.admit() {
        if gated
            .admission
            .wait_requested(Duration::from_secs(60))
            .is_some()
        {
            break;
        }
    }
    // The watcher owns shutdown and exits the process; wait for it.
    loop {
        std::thread::park();
    }
}

/// A Rust program behind the in-process gate (`foster __qualify-internal enter-helper`):
/// [`gate::enter`] with what the environment says, then `entered PPID` on standard output
/// (`getppid()` as the gate saw it). It serves
/// until its standard input ends (then exits 0) or, with the `notify` reaction, until the loss
/// reaches its event loop: it prints `loss PATH`, drains admission within the grace and exits
/// 0, owning its shutdown. (With `exit` the gate's watcher ends it, with `kill` the kernel.)
pub fn enter_helper() -> i32 {
    use std::io::{Read, Write};
    let gated = match gate::enter(None) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("enter-helper: {e}");
            return e.exit_status();
        }
    };
    let say = |line: &str| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    };
    // SAFETY: plain getppid.
    let ppid = unsafe { libc::getppid() };
    let _ = std::thread::Builder::new().name("stdin".into()).spawn(|| {
        let mut buf = [0u8; 64];
        let mut input = std::io::stdin().lock();
        while matches!(input.read(&mut buf), Ok(n) if n > 0) {}
        std::process::exit(0)
    });
    // Said once every thread exists: creating a thread blocks every signal in the creating
    // thread for a moment, which a reader of /proc/PID/status could see.
    say(&format!("entered {ppid}"));
    match gated.shutdown_owner {
        Some(owner) => {
            if let Ok(loss) = gated.losses.recv() {
                say(&format!("loss {}", loss.path));
                let _ = owner.drain(gated.expectation.policy.grace);
            }
            0
        }
        None => loop {
            std::thread::park();
        },
    }
}

// ---------------------------------------------------------------------------------------------
// The notify reaction.

fn notify(r: &mut Root) -> Outcome {
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
            o.problems.push(e);
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

// ---------------------------------------------------------------------------------------------
// A parent in another PID namespace.

/// The supervisor of the PID-namespace cases: it makes its children's PID namespace a new one,
/// forks that namespace's init (a harness process that only waits for the case's teardown; it
/// says `init PID`), then runs `args` twice with itself as the expected parent: once without
/// `FOSTER_PARENT_PIDFD` (it says `status END`), once with a pidfd of itself under that name (it
/// says `launched PID`), then holds. Each child's parent (this supervisor) lives outside the
/// child's namespace: `getppid()` is 0 there. At this supervisor's death its children go to the
/// nearest subreaper of its own namespace, the case root.
fn pidns_supervisor(fds: SupFds, foster: &str, args: &[&str]) -> i32 {
    use std::process::{Command, Stdio};
    let Ok(me) = Identity::current() else {
        return 70;
    };
    // SAFETY: unshare in a single-threaded process (forked by the case root).
    if unsafe { libc::unshare(libc::CLONE_NEWPID) } != 0 {
        fds.say(&format!(
            "error unshare: {}",
            std::io::Error::last_os_error()
        ));
        return 71;
    }
    // The namespace's init (PID 1 there), so that the programs are not: the kernel discards a
    // signal at its default disposition sent to a namespace's init.
    let init = fork_run(move || {
        fds.hold();
        0
    });
    if init < 0 {
        return 72;
    }
    fds.say(&format!("init {init}"));
    let command = |pidfd: Option<RawFd>| {
        let mut c = Command::new(foster);
        crate::process::signal::reserved_as_inherited(&mut c);
        c.args(args)
            .env(crate::gate::policy::ENV_PARENT, me.to_string())
            .env(crate::gate::policy::ENV_POLICY, "TERM:exit:2s")
            .env("RUST_LOG", "foster=info")
            .env_remove(gate::ENV_GATED)
            .env_remove(gate::ENV_PARENT_PIDFD);
        if let Some(fd) = pidfd {
            c.env(gate::ENV_PARENT_PIDFD, fd.to_string());
        }
        if let (Some(i), Some(o), Some(e)) = (
            SupFds::dup(fds.hold_r),
            SupFds::dup(fds.out_w),
            SupFds::dup(fds.err_w),
        ) {
            c.stdin(Stdio::from(i))
                .stdout(Stdio::from(o))
                .stderr(Stdio::from(e));
        }
        c
    };
    // Without the pidfd: the gate cannot tell.
    match command(None).status() {
        Ok(st) => {
            use std::os::unix::process::ExitStatusExt;
            fds.say(&format!("status {}", end_of_status(st.into_raw()).wire()));
        }
        Err(e) => fds.say(&format!("error {e}")),
    }
    // With a pidfd of this supervisor, inherited (not close-on-exec).
    let Ok(own) = pidfd_open(me.pid) else {
        return 73;
    };
    // SAFETY: a duplicate without close-on-exec, above the standard descriptors.
    let fd = unsafe { libc::fcntl(own.as_raw_fd(), libc::F_DUPFD, 10) };
    match command(Some(fd)).spawn() {
        Ok(child) => fds.say(&format!("launched {}", child.id())),
        Err(e) => fds.say(&format!("error {e}")),
    }
    fds.hold();
    0
}

fn other_pidns(r: &mut Root, in_process: bool) -> Outcome {
    let mut o = Outcome::default();
    let foster = r.foster.to_string_lossy().into_owned();
    let (args, ready): (&[&str], &str) = if in_process {
        (&["__qualify-internal", "enter-helper"], "entered")
    } else {
        (
            &[
                "-v",
                "exec",
                "--",
                "/bin/sh",
                "-c",
                r#"echo "started $PPID"; exec sleep 30"#,
            ],
            "started",
        )
    };
    let s = r.supervisor(move |fds| pidns_supervisor(fds, &foster, args));
    match r.sup.expect("init", r.soon()).and_then(|p| p.parse().ok()) {
        Some(init) => r.name(init, "namespace init", true),
        None => {
            o.problems.push("no PID namespace".into());
            return o;
        }
    }
    // Without the pidfd.
    let without = r.sup.next_line(r.soon()).unwrap_or_default();
    let without = without.strip_prefix("status ").and_then(End::parse);
    o.check(
        without == Some(End::Exited(gate::EXIT_CANNOT_TELL)),
        format!("without FOSTER_PARENT_PIDFD: expected exit 122, got {without:?}"),
    );
    // With it.
    let h = match r.launched() {
        Ok(h) => h,
        Err(e) => {
            o.problems.push(e);
            return o;
        }
    };
    let seen = r.out.expect(ready, r.soon());
    o.check(
        seen.as_deref() == Some("0"),
        format!("the program did not say getppid() was 0: {seen:?}"),
    );
    o.target = started_text(seen.is_some());
    let mut vouched = false;
    while let Some(l) = r.err.next_line(Instant::now()) {
        vouched |= l.contains("getppid() is 0") && l.contains("pidfd says it lives");
    }
    if !in_process {
        o.check(vouched, "foster exec did not say the pidfd decided");
    }
    o.observed_parent = "none visible (0); the inherited pidfd said the supervisor lives".into();
    o.prctl = format!(
        "{} armed SIGTERM",
        if in_process {
            "the in-process gate"
        } else {
            "foster exec"
        }
    );
    let t = r.kill_and_reap(s);
    let want = if in_process {
        End::Exited(128 + libc::SIGTERM)
    } else {
        End::Killed(libc::SIGTERM)
    };
    o.ended(
        r.end_after(h, t),
        want,
        Some(DeathPath::Signal),
        |e| {
            format!(
                "without the pidfd: {}; with it: {}",
                without.map_or_else(|| "no status".into(), End::text),
                e.text()
            )
        },
        "the program outlived its supervisor in the other namespace",
    );
    o.checked = "getppid() is 0 across PID namespaces: without the pidfd the gate refuses (122); \
                 with it the gate passes on the pidfd's word, and the armed signal reports the \
                 supervisor's death"
        .into();
    o
}

fn other_pidns_exec(r: &mut Root) -> Outcome {
    other_pidns(r, false)
}

fn other_pidns_in_process(r: &mut Root) -> Outcome {
    other_pidns(r, true)
}

// ---------------------------------------------------------------------------------------------
// An adoption through a short-lived parent.

/// The helper of [`adoption_through_short_lived_parent`]: waits on the gate, then a shell that
/// puts a sleep in the background and ends at once (the intermediate), then stays.
const SHORT_LIVED: &str = "[[helper]]\nname = \"deep\"\ncommand = [\"/bin/sh\", \"-c\", \
                           \"read x < GATE; /bin/sh -c 'sleep 300 & exit 0'; exec sleep 600\"]\n\
                           [[helper.generation]]\nsignal = \"TERM\"\n\
                           [[helper.generation]]\nsignal = \"TERM\"\ngrace = \"10s\"\n";

/// A directory of the case's own (mode 0700) and a FIFO in it.
fn case_dir(me: i32) -> std::io::Result<std::path::PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let d = std::env::temp_dir().join(format!("foster-qualify-births-{me}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::DirBuilder::new().mode(0o700).create(&d)?;
    for fifo in ["gate", "events"] {
        nix::unistd::mkfifo(&d.join(fifo), nix::sys::stat::Mode::S_IRWXU)?;
    }
    Ok(d)
}

/// The next event of `events` (a `foster run` events log's JSON lines) that `f` holds for.
fn next_event(
    events: &mut barrier::LineReader,
    deadline: Instant,
    f: impl Fn(&serde_json::Value) -> bool,
) -> Option<serde_json::Value> {
    while let Some(l) = events.next_line(deadline) {
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(&l)
            && f(&v)
        {
            return Some(v);
        }
    }
    None
}

/// A real `foster run --no-contain`, its helper's child born after foster's read of the tree
/// (a `foster ctl status`, answered after a read, before the gate FIFO lets the helper go) and
/// ended at once: only the kernel's announcements of that birth and end tell foster that the
/// sleep it leaves is its own now.
fn adoption_through_short_lived_parent(r: &mut Root) -> Outcome {
    let mut o = Outcome::default();
    let d = match case_dir(r.me) {
        Ok(d) => d,
        Err(e) => {
            o.problems.push(format!("the case's directory: {e}"));
            return o;
        }
    };
    let ran = short_lived_parent_run(r, &d, &mut o);
    let _ = std::fs::remove_dir_all(&d);
    if let Err(e) = ran {
        o.problems.push(e);
    }
    o
}

fn short_lived_parent_run(
    r: &mut Root,
    d: &std::path::Path,
    o: &mut Outcome,
) -> Result<(), String> {
    use std::os::unix::fs::OpenOptionsExt;
    let (gate, events, sock, cfg) = (d.join("gate"), d.join("events"), d.join("s"), d.join("c"));
    std::fs::write(&cfg, SHORT_LIVED.replace("GATE", &gate.to_string_lossy()))
        .map_err(|e| format!("the configuration: {e}"))?;
    // The events' read end, open before foster opens its end (not blocking: no writer yet).
    let ev = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&events)
        .map_err(|e| format!("the events FIFO: {e}"))?;
    let mut events_r = barrier::LineReader::new(ev.into());
    let foster = r.foster.clone();
    let args = [
        "run".as_ref(),
        "--no-contain".as_ref(),
        "--socket".as_ref(),
        sock.as_os_str(),
        "--events-log".as_ref(),
        events.as_os_str(),
        cfg.as_os_str(),
    ]
    .map(std::ffi::OsStr::to_os_string);
    let s = r.supervisor(move |fds| {
        use std::os::unix::process::CommandExt;
        let mut c = std::process::Command::new(&foster);
        crate::process::signal::reserved_as_inherited(&mut c);
        c.args(&args);
        if let (Some(out), Some(err)) = (SupFds::dup(fds.out_w), SupFds::dup(fds.err_w)) {
            c.stdout(out).stderr(err);
        }
        let e = c.exec();
        fds.say(&format!("error {e}"));
        127
    });
    let launch = next_event(&mut events_r, r.soon(), |v| v["event"] == "launch")
        .ok_or("foster run launched nothing")?;
    let helper = launch["identity"]["pid"].as_i64().unwrap_or(0) as i32;
    r.name(helper, "helper", false);
    // A status is answered on foster's loop after a read of its tree.
    let status = std::process::Command::new(&r.foster)
        .arg("ctl")
        .arg("--socket")
        .arg(&sock)
        .arg("status")
        .output()
        .map_err(|e| format!("foster ctl status: {e}"))?;
    o.check(status.status.success(), "foster ctl status failed");
    // Opened once the helper's shell opens its end: it waits there.
    std::fs::write(&gate, "go\n").map_err(|e| format!("the gate: {e}"))?;
    let t = Instant::now();
    adopted_and_policed(r, &mut events_r, t, o);
    // The orderly end: foster stops its helper and exits 0.
    // SAFETY: a signal to the case's own supervisor.
    unsafe { libc::kill(s, libc::SIGTERM) };
    let end = wait_end(s, r.soon()).map(|(e, _)| e);
    o.check(
        end == Some(End::Exited(0)),
        format!("foster run ended {end:?}, not with 0"),
    );
    Ok(())
}

/// Checks the orphan's `reparented` event, its policy's SIGTERM and its end, from `events`;
/// the time from the intermediate's release (`t`) to the orphan's end.
fn adopted_and_policed(
    r: &mut Root,
    events: &mut barrier::LineReader,
    t: Instant,
    o: &mut Outcome,
) {
    let bound = Instant::now() + Duration::from_secs(5);
    let Some(v) = next_event(events, bound, |v| v["event"] == "reparented") else {
        o.problems
            .push("no reparented event within 5 s of the intermediate's start".into());
        return;
    };
    let orphan = v["identity"].clone();
    let pid = orphan["pid"].as_i64().unwrap_or(0) as i32;
    r.name(pid, "orphan", false);
    o.expected_parent = "foster (the helper's subreaper)".into();
    o.observed_parent = format!(
        "{}, {}, generation {}",
        r.role(v["to"]["pid"].as_i64().unwrap_or(0) as i32),
        v["classification"].as_str().unwrap_or("?"),
        v["generation"]
    );
    o.check(
        v["classification"] == "expected",
        format!("classified {}", v["classification"]),
    );
    o.check(
        v["generation"] == 3,
        format!("generation {}", v["generation"]),
    );
    let signal = next_event(events, r.soon(), |e| {
        e["event"] == "signal" && e["reason"] == "orphan_policy" && e["target"] == orphan
    });
    o.prctl = "none (no gate): foster's orphan policy".into();
    o.check(
        signal.as_ref().is_some_and(|s| s["signal"] == "SIGTERM"),
        format!("the orphan policy's signal: {signal:?}"),
    );
    let exit = next_event(events, r.soon(), |e| {
        e["event"] == "exit" && e["identity"] == orphan
    });
    let killed = exit
        .as_ref()
        .and_then(|e| e["status"]["signal"].as_str())
        .and_then(|s| s.parse::<crate::process::signal::Sig>().ok());
    o.time_ms = Some(ms(t, Instant::now()));
    o.helper = match killed {
        Some(sig) => format!(
            "orphan killed by {}",
            crate::process::signal::name(sig.number())
        ),
        None => "the orphan's end was not reported".into(),
    };
    o.check(
        killed.map(crate::process::signal::Sig::number) == Some(libc::SIGTERM),
        format!("the orphan's end: {exit:?}"),
    );
    o.target = "adopted when its parent ended".into();
    o.checked = "the kernel announced the intermediate's birth and end: no SIGCHLD, no pidfd \
                 read before, yet the orphan got its generation's policy at once"
        .into();
}
