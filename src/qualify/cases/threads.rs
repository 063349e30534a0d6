//! The creating thread: a helper's parent-death signal when the thread that forked it ends.

use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use super::startup::SERVE;
use crate::gate::policy::Policy;
use crate::gate::spawner::Spawner;
use crate::gate::{DeathPath, GatePlan, SignalSetup, Trace};
use crate::process::identity::Identity;
use crate::qualify::barrier::{self, pipe, write_all};
use crate::qualify::harness::{End, Outcome, Root};

pub(super) fn wait_thread_gone(tid: i32) {
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

// Long: one case's scenario, read top to bottom.
pub(super) fn thread_exit_raw(r: &mut Root) -> Outcome {
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
            o.problems.push(e.to_string());
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
    o.checked = "the kernel signals on the creating thread's exit: the fact the Spawner's \
                 long-lived thread avoids"
        .into();
    o
}

// Long: one case's scenario, read top to bottom.
pub(super) fn thread_exit_spawner(r: &mut Root) -> Outcome {
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
            o.problems.push(e.to_string());
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
