//! A parent in another PID namespace: the gate decides by the pidfd it was given.

use std::os::fd::{AsRawFd, RawFd};
use std::time::Instant;

use crate::gate::{self, DeathPath};
use crate::process::identity::Identity;
use crate::process::identity::pidfd_open;
use crate::qualify::harness::{End, Outcome, Root, SupFds, end_of_status, fork_run, started_text};

/// The supervisor of the PID-namespace cases: it makes its children's PID namespace a new one,
/// forks that namespace's init (a harness process that only waits for the case's teardown; it
/// says `init PID`), then runs `args` twice with itself as the expected parent: once without
/// `FOSTER_PARENT_PIDFD` (it says `status END`), once with a pidfd of itself under that name (it
/// says `launched PID`), then holds. Each child's parent (this supervisor) lives outside the
/// child's namespace: `getppid()` is 0 there. At this supervisor's death its children go to the
/// nearest subreaper of its own namespace, the case root.
// Long: one case's scenario, read top to bottom.
pub(super) fn pidns_supervisor(fds: SupFds, foster: &str, args: &[&str]) -> i32 {
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

// Long: one case's scenario, read top to bottom.
pub(super) fn other_pidns(r: &mut Root, in_process: bool) -> Outcome {
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
            o.problems.push(e.to_string());
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

pub(super) fn other_pidns_exec(r: &mut Root) -> Outcome {
    other_pidns(r, false)
}

pub(super) fn other_pidns_in_process(r: &mut Root) -> Outcome {
    other_pidns(r, true)
}
