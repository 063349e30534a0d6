//! The reaper against real processes. Its own test binary on `libtest-mimic` rather than the
//! libtest harness, because SIGCHLD must be blocked in the main thread before any other thread
//! exists (the harness would start threads first), and the trials run one at a time on the main
//! thread: each reaps every child of this process (a subreaper), so two at once would take each
//! other's statuses. `--list`, name filters, `--exact` and `--ignored` work as with libtest.
//!
//! Covers: statuses routed to their registered owners (exit codes and signals), a process that
//! ends before its owner registers still reaching the owner, and an orphan storm (thousands of
//! double-forked exits adopted by this process as subreaper) reaped completely, no zombie left.

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use foster::process::reaper::{self, ExitStatus, Reaper, Routed};
use libtest_mimic::{Arguments, Trial};

#[path = "it/common/mod.rs"]
mod common;
use common::{process, processes};

fn main() {
    let mut args = Arguments::from_args();
    // One at a time, on the main thread (see the header).
    args.test_threads = Some(1);
    if !args.list {
        reaper::block_signals(&[]).unwrap();
        // SAFETY: plain prctl.
        let r = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
        assert_eq!(r, 0, "PR_SET_CHILD_SUBREAPER");
    }
    let trials = [
        (
            "refuses_without_blocked_sigchld",
            refuses_without_blocked_sigchld as fn(),
        ),
        (
            "exit_before_register_reaches_owner",
            exit_before_register_reaches_owner,
        ),
        ("storm_with_known_codes", storm_with_known_codes),
    ]
    .into_iter()
    .map(|(name, f)| {
        Trial::test(name, move || {
            f();
            Ok(())
        })
    })
    .collect();
    libtest_mimic::run(&args, trials).exit();
}

#[allow(clippy::zombie_processes)] // the reaper, not the Child handle, waits for it
fn spawn(script: &str) -> i32 {
    // The child inherits the blocked mask; sh does not care. The Child handle is dropped
    // without waiting: the reaper owns every status.
    let child = Command::new("/bin/sh")
        .arg("-c")
        .arg(script)
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    child.id() as i32
}

fn refuses_without_blocked_sigchld() {
    let t = std::thread::spawn(|| {
        let mut set = nix::sys::signal::SigSet::empty();
        set.add(nix::sys::signal::Signal::SIGCHLD);
        set.thread_unblock().unwrap();
        Reaper::<()>::new().unwrap_err().to_string()
    });
    let e = t.join().unwrap();
    assert!(e.contains("SIGCHLD is not blocked"), "{e}");
}

fn exit_before_register_reaches_owner() {
    let mut r: Reaper<&'static str> = Reaper::new().unwrap();
    let pid = r
        .launch("quick", || -> Result<i32, ()> {
            let pid = spawn("exit 42");
            // A pidfd becomes readable once the process has ended (is a zombie).
            let pidfd = foster::process::identity::pidfd_open(pid)
                .map_or(-1, std::os::fd::IntoRawFd::into_raw_fd);
            assert!(pidfd >= 0, "pidfd_open");
            // Bounded by 10 s as a safety net.
            let mut p = [foster::base::sys::PollFd::input(pidfd)];
            let ready = foster::base::sys::poll(&mut p, Some(std::time::Duration::from_secs(10)));
            assert_eq!(ready.unwrap(), 1);
            // SAFETY: our fd.
            unsafe { libc::close(pidfd) };
            // Now the child is a zombie, before registration; a reap here would be a bug.
            let state = process(pid).expect("the child is there").state;
            assert_eq!(state, b'Z', "child should be a zombie before registration");
            Ok(pid)
        })
        .unwrap();
    let got = reap_until(&mut r, Duration::from_secs(10), |rs| !rs.is_empty());
    assert_eq!(got.len(), 1);
    match &got[0] {
        Routed::Owned { owner, reaped } => {
            assert_eq!(*owner, "quick");
            assert_eq!(reaped.pid, pid);
            assert_eq!(reaped.status, ExitStatus::Exited { code: 42 });
        }
        other => panic!("expected an owned status, got {other:?}"),
    }
}

fn storm_with_known_codes() {
    let mut r: Reaper<usize> = Reaper::new().unwrap();
    let mut expected = HashMap::new();
    // Two storm makers: each double-forks 1,500 short-lived processes that this process adopts.
    let mut makers = Vec::new();
    for i in 0..2 {
        let pid = r
            .launch(1000 + i, || -> Result<i32, ()> {
                Ok(spawn(
                    "i=0; while [ $i -lt 1500 ]; do ( /bin/true & ); i=$((i+1)); done",
                ))
            })
            .unwrap();
        makers.push(pid);
        expected.insert(1000 + i, ExitStatus::Exited { code: 0 });
    }
    // Helpers with known codes and signals, interleaved with the storm.
    for k in 0..60usize {
        let script = if k % 10 == 9 {
            "kill -KILL $$".to_string()
        } else {
            format!("exit {k}")
        };
        let status = if k % 10 == 9 {
            ExitStatus::Signaled {
                signal: 9,
                core_dumped: false,
            }
        } else {
            ExitStatus::Exited { code: k as i32 }
        };
        r.launch(k, || -> Result<i32, ()> { Ok(spawn(&script)) })
            .unwrap();
        expected.insert(k, status);
    }
    let mut owned = HashMap::new();
    let mut orphans = 0usize;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        // No children left at all: every status has been collected.
        if owned.len() == expected.len() && no_children() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "storm not reaped in time: {} owned",
            owned.len()
        );
        r.wait_readable(1000).unwrap();
        for routed in r.reap() {
            match routed {
                Routed::Owned { owner, reaped } => {
                    assert!(owned.insert(owner, reaped.status).is_none());
                }
                Routed::Orphan(_) => orphans += 1,
            }
        }
    }
    for (k, st) in &expected {
        assert_eq!(owned.get(k), Some(st), "helper {k}");
    }
    // Each iteration's subshell is reaped by its maker; its /bin/true is adopted here.
    assert!(orphans == 3000, "only {orphans} orphans reaped");
    assert_eq!(zombies_of_self(), 0);
}

fn reap_until<T>(
    r: &mut Reaper<T>,
    limit: Duration,
    done: impl Fn(&[Routed<T>]) -> bool,
) -> Vec<Routed<T>> {
    let deadline = Instant::now() + limit;
    let mut all = Vec::new();
    while !done(&all) {
        assert!(Instant::now() < deadline, "timed out waiting for statuses");
        r.wait_readable(1000).unwrap();
        all.extend(r.reap());
    }
    all
}

fn no_children() -> bool {
    // SAFETY: a WNOWAIT peek: consumes no status; ECHILD when no child exists at all.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: waitid with WNOWAIT fills `info`, a stack struct, and consumes nothing.
    let r = unsafe {
        libc::waitid(
            libc::P_ALL,
            0,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    r < 0
}

fn zombies_of_self() -> usize {
    let me = std::process::id() as i32;
    processes()
        .nodes()
        .filter(|n| n.ppid == me && n.is_zombie())
        .count()
}
