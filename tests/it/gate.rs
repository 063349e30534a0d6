//! The startup gate on real processes: every ordering and transition of issue 3, each its own
//! test, each run through the qualification harness (`foster::qualify`) that `foster qualify`
//! uses, so the guarantees the lifecycle matrix states are proven on every CI run.
//!
//! Each case runs in its own case root (a `foster` process that is a child subreaper), with pipe
//! barriers holding the helper at the gate's steps; no test sleeps to synchronise. Every test
//! asserts the observed parent, the prctl result, the path that consumed the notification, and
//! how the helper and its target ended; and that nothing of the case was left running.

use crate::common;

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use foster::gate::DeathPath;
use foster::process::identity::Identity;
use foster::qualify::{CaseRecord, Harness, Verdict, run_case};

fn run(name: &str) -> Option<CaseRecord> {
    let r = run_case(&Harness::new(env!("CARGO_BIN_EXE_foster")), name);
    if r.verdict == Verdict::Skip {
        common::skip::setup(format!("{name}: {}", r.reason));
        return None;
    }
    assert_eq!(r.verdict, Verdict::Pass, "{name}: {}\n{r:#?}", r.reason);
    assert_eq!(r.leftovers, "none", "{name} left processes running");
    Some(r)
}

#[test]
fn supervisor_gone_before_arming_is_caught_by_the_check() {
    let Some(r) = run("gone-before-arm") else {
        return;
    };
    assert_eq!(r.observed_parent, "harness subreaper");
    assert_eq!(r.prctl, "PR_SET_PDEATHSIG SIGTERM, read back SIGTERM");
    assert_eq!(r.path, DeathPath::Check);
    assert_eq!(r.helper, "exited 120 (parent gone)");
    assert_eq!(r.target, "never started");
}

#[test]
fn supervisor_gone_between_arm_and_check_is_caught() {
    let Some(r) = run("gone-between-arm-and-check") else {
        return;
    };
    assert_eq!(r.prctl, "PR_SET_PDEATHSIG SIGTERM, read back SIGTERM");
    assert!(
        matches!(r.path, DeathPath::Signal | DeathPath::Check),
        "{r:?}"
    );
    assert!(
        r.helper == "killed by SIGTERM" || r.helper == "exited 120 (parent gone)",
        "{r:?}"
    );
    assert_eq!(r.target, "never started");
}

#[test]
fn supervisor_gone_after_the_check_is_caught_by_the_signal() {
    let Some(r) = run("gone-after-check") else {
        return;
    };
    assert_eq!(r.observed_parent, "supervisor");
    assert_eq!(r.path, DeathPath::Signal);
    assert_eq!(r.helper, "killed by SIGTERM");
    assert_eq!(r.target, "never started");
}

#[test]
fn no_death_serves_normally() {
    let Some(r) = run("normal") else { return };
    assert_eq!(r.observed_parent, "supervisor");
    assert_eq!(r.prctl, "PR_SET_PDEATHSIG SIGTERM, read back SIGTERM");
    assert_eq!(r.path, DeathPath::None);
    assert_eq!(r.helper, "exited 0, reaped by the supervisor");
    assert_eq!(r.target, "started");
}

#[test]
fn later_loss_while_serving_reaches_the_target() {
    let Some(r) = run("later-loss") else { return };
    assert_eq!(r.observed_parent, "supervisor");
    assert_eq!(r.path, DeathPath::Signal);
    assert_eq!(r.helper, "killed by SIGTERM");
    assert_eq!(r.target, "started");
}

#[test]
fn signal_blocked_in_the_launcher_is_unblocked() {
    let Some(r) = run("signal-blocked") else {
        return;
    };
    assert_eq!(r.prctl, "PR_SET_PDEATHSIG SIGTERM, read back SIGTERM");
    assert_eq!(r.path, DeathPath::Signal);
    assert_eq!(r.helper, "killed by SIGTERM");
}

#[test]
fn signal_ignored_in_the_launcher_is_reset() {
    let Some(r) = run("signal-ignored") else {
        return;
    };
    assert_eq!(r.path, DeathPath::Signal);
    assert_eq!(r.helper, "killed by SIGTERM");
    assert_eq!(r.target, "started");
}

#[test]
fn exec_of_a_missing_program_fails_visibly() {
    let Some(r) = run("exec-failure") else { return };
    assert_eq!(r.observed_parent, "supervisor");
    assert_eq!(r.path, DeathPath::None);
    assert_eq!(
        r.helper,
        "exited 127 (exec: not found), reaped by the supervisor"
    );
    assert_eq!(r.target, "never started");
}

#[test]
fn prctl_failure_never_leaves_an_unsupervised_helper() {
    let Some(r) = run("prctl-failure") else {
        return;
    };
    assert_eq!(r.prctl, "EINVAL for signal 65");
    assert_eq!(r.observed_parent, "not checked (stopped before)");
    assert_eq!(
        r.helper,
        "exited 121 (prctl failed), reaped by the supervisor"
    );
    assert_eq!(r.target, "never started");
}

#[test]
fn raw_child_of_an_exiting_worker_thread_is_signalled() {
    let Some(r) = run("thread-exit-raw") else {
        return;
    };
    assert_eq!(r.observed_parent, "supervisor");
    assert_eq!(r.path, DeathPath::Signal);
    assert_eq!(r.helper, "killed by SIGTERM while the supervisor lived");
}

#[test]
fn spawner_helper_survives_the_requesting_threads_exit() {
    let Some(r) = run("thread-exit-spawner") else {
        return;
    };
    assert_eq!(r.observed_parent, "supervisor");
    assert_eq!(r.path, DeathPath::Signal);
    assert_eq!(
        r.helper,
        "alive after the worker's exit; killed by SIGTERM with the supervisor"
    );
    assert_eq!(r.target, "started");
}

#[test]
fn credential_drop_before_arming_keeps_the_setting() {
    let Some(r) = run("cred-drop-before-arm") else {
        return;
    };
    assert_eq!(
        r.prctl,
        "after setresuid(65534): PR_SET_PDEATHSIG SIGTERM, read back SIGTERM"
    );
    assert_eq!(r.path, DeathPath::Signal);
    assert_eq!(r.helper, "killed by SIGTERM");
}

#[test]
fn credential_drop_after_arming_clears_it_and_foster_exec_rearms() {
    let Some(r) = run("cred-drop-after-arm") else {
        return;
    };
    assert!(
        r.prctl
            .starts_with("raw: armed SIGTERM, read 0 after setresuid (cleared)"),
        "{r:?}"
    );
    assert_eq!(r.path, DeathPath::Signal);
    assert_eq!(r.helper, "killed by SIGTERM");
}

#[test]
fn set_user_id_target_is_refused() {
    let Some(r) = run("setuid-target") else {
        return;
    };
    assert_eq!(r.prctl, "not reached");
    assert_eq!(
        r.helper,
        "not created by the Spawner; foster exec exited 123 (target refused)"
    );
    assert!(r.target.starts_with("never started"));
}

#[test]
fn grandchild_through_foster_exec_gets_the_next_generation_policy() {
    let Some(r) = run("grandchild-next-generation") else {
        return;
    };
    assert_eq!(
        r.prctl,
        "helper SIGTERM; grandchild SIGHUP (next generation)"
    );
    assert_eq!(r.path, DeathPath::Signal);
    assert_eq!(r.helper, "grandchild killed by SIGHUP");
}

#[test]
fn orphan_is_adopted_by_the_nearest_living_subreaper() {
    let Some(r) = run("nested-subreaper") else {
        return;
    };
    assert_eq!(r.expected_parent, "launcher C");
    assert_eq!(
        r.observed_parent,
        "launcher C at its check; after C died: subreaper B; after B died: subreaper A"
    );
    assert_eq!(r.path, DeathPath::Signal);
}

#[test]
fn stale_or_reused_foster_parent_is_refused() {
    let Some(r) = run("stale-parent") else { return };
    assert_eq!(r.path, DeathPath::Check);
    assert_eq!(r.helper, "foster exec exited 120 and 120");
    assert_eq!(r.target, "never started");
}

#[test]
fn lifeline_catches_a_loss_the_signal_did_not_report() {
    let Some(r) = run("lifeline-only") else {
        return;
    };
    assert_eq!(r.observed_parent, "supervisor");
    assert_eq!(r.path, DeathPath::Lifeline);
    assert_eq!(r.helper, "exited 124 (lifeline lost)");
}

#[test]
fn notify_hands_the_loss_to_the_programs_event_loop() {
    let Some(r) = run("notify") else { return };
    assert_eq!(r.observed_parent, "supervisor");
    assert_eq!(r.path, DeathPath::Signal);
    assert_eq!(r.helper, "told of the loss (signal), exited 0");
    assert_eq!(r.target, "started");
}

/// A parent in another PID namespace: `getppid()` is 0. Without `FOSTER_PARENT_PIDFD` the gate
/// cannot tell (122); with the launcher's pidfd handed down it passes, and the armed signal
/// ends the program when that parent dies.
#[test]
fn a_parent_in_another_pid_namespace_is_checked_through_its_pidfd_by_foster_exec() {
    let Some(r) = run("other-pidns-exec") else {
        return;
    };
    assert_eq!(
        r.observed_parent,
        "none visible (0); the inherited pidfd said the supervisor lives"
    );
    assert_eq!(r.path, DeathPath::Signal);
    assert_eq!(
        r.helper,
        "without the pidfd: exited 122 (cannot tell); with it: killed by SIGTERM"
    );
    assert_eq!(r.target, "started");
}

#[test]
fn a_parent_in_another_pid_namespace_is_checked_through_its_pidfd_in_process() {
    let Some(r) = run("other-pidns-in-process") else {
        return;
    };
    assert_eq!(r.path, DeathPath::Signal);
    assert_eq!(
        r.helper,
        "without the pidfd: exited 122 (cannot tell); with it: exited 143"
    );
}

#[test]
fn unknown_case_is_a_clear_failure() {
    let r = run_case(&Harness::new(env!("CARGO_BIN_EXE_foster")), "no-such-case");
    assert_eq!(r.verdict, Verdict::Fail);
    assert!(
        r.reason.contains("unknown case \"no-such-case\""),
        "{}",
        r.reason
    );
}

/// `foster __qualify-internal enter-helper` (the in-process gate, `gate::enter`) under `policy`,
/// expecting this test process as its parent, started with SIGUSR1 and SIGALRM blocked; its pid
/// once it has passed the gate. Its standard input is the returned child's: closing it ends it.
fn in_process_gated(policy: &str) -> (std::process::Child, i32) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_foster"));
    cmd.args(["__qualify-internal", "enter-helper"])
        .env("FOSTER_PARENT", Identity::current().unwrap().to_string())
        .env("FOSTER_POLICY", policy)
        .env_remove("FOSTER_GATED")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    // SAFETY: sigprocmask on a stack set, between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGUSR1);
            libc::sigaddset(&mut set, libc::SIGALRM);
            libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(
        line.starts_with("entered "),
        "{policy}: the helper did not pass its gate: {line:?}"
    );
    let pid = child.id() as i32;
    (child, pid)
}

/// The in-process gate leaves the caller's signal mask alone whatever the reaction: with
/// `kill` it chose the exec-time setup and emptied the whole mask.
#[test]
fn the_in_process_gate_keeps_the_callers_mask_whatever_the_reaction() {
    let theirs = common::sigbit(libc::SIGUSR1) | common::sigbit(libc::SIGALRM);
    for (policy, own) in [
        ("KILL", 0),
        ("TERM:exit:1s", common::sigbit(libc::SIGTERM)),
        ("HUP:notify:1s", common::sigbit(libc::SIGHUP)),
    ] {
        let (mut child, pid) = in_process_gated(policy);
        let blocked = common::sigset_of(pid, "SigBlk:");
        drop(child.stdin.take());
        let status = child.wait().unwrap();
        assert_eq!(
            blocked,
            theirs | own,
            "{policy}: SigBlk {blocked:#x}, expected the caller's {theirs:#x} and the consumed \
             signal {own:#x}"
        );
        assert_eq!(status.code(), Some(0), "{policy}: {status:?}");
    }
}

/// `/bin/echo ran` launched through the gate (`GatePlan::install`, the exec-time setup) with
/// `policy`, expecting this test process, from a thread that first made its children's PID
/// namespace a new one: the program is PID 1 there. A pidfd of this process is the lifeline
/// (`getppid()` is 0 there). What `output()` gave; `Err` with why when no new PID namespace
/// can be had here (a container may withhold it).
fn gated_as_namespace_init(policy: &str) -> Result<std::io::Result<std::process::Output>, String> {
    use std::os::fd::AsRawFd;
    let me = Identity::current().unwrap();
    let policy: foster::gate::policy::Policy = policy.parse().unwrap();
    std::thread::spawn(move || {
        let lifeline = foster::process::identity::pidfd_open(me.pid).unwrap();
        // SAFETY: unshare changes this thread's namespace for children only; the thread
        // forks once (a namespace ends with its first process) and then ends.
        if unsafe { libc::unshare(libc::CLONE_NEWPID) } != 0 {
            return Err(format!(
                "unshare(CLONE_NEWPID) is refused here: {}",
                std::io::Error::last_os_error()
            ));
        }
        let mut cmd = Command::new("/bin/echo");
        cmd.arg("ran").stdin(Stdio::null());
        foster::gate::GatePlan::new(me, &policy, foster::gate::SignalSetup::ExecDefault)
            .with_lifeline_fd(lifeline.as_raw_fd())
            .install(&mut cmd);
        Ok(cmd.output())
    })
    .join()
    .unwrap()
}

/// A program that would be PID 1 of its PID namespace is refused by the gate: the kernel
/// discards a signal at its default disposition sent to a namespace's init, so its
/// parent-death signal could never arrive. With SIGKILL (which the kernel delivers from an
/// ancestor namespace) it runs.
#[test]
fn the_gate_refuses_a_program_that_would_be_its_namespaces_init() {
    if common::skip::unless_root("a new PID namespace needs root") {
        return;
    }
    let refused = match gated_as_namespace_init("TERM") {
        Ok(r) => r,
        Err(why) => {
            common::skip::host(why);
            return;
        }
    };
    match refused {
        Ok(out) => panic!(
            "the program ran as PID 1, armed in name only: {:?} {}",
            out.status,
            String::from_utf8_lossy(&out.stdout)
        ),
        Err(e) => assert_eq!(e.raw_os_error(), Some(libc::EPROTO), "{e}"),
    }
    let out = gated_as_namespace_init("KILL")
        .unwrap()
        .expect("the gate refused SIGKILL");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ran\n");
}
