//! Every adoption seen when it happens: a process of the tree that forks and ends at once (a
//! daemon's double fork, `setsid -f`, a shell's `cmd &` in a subshell) leaves its child to
//! foster, whose kernel sends it no SIGCHLD for it. The intermediate is held by a FIFO until
//! foster has read its tree (a `ctl status`, answered after a read), so it is born after that
//! read and ends before any other: only the kernel's announcement of its birth and end tells
//! foster. Each form, contained and not, as root; and as uid 65534 where the kernel grants that
//! user the announcements (skipped, with the reason, where it does not). Each checks the
//! `reparented` event (classification, generation, the intermediate it came from) within
//! [`BOUND`], and the orphan policy's SIGTERM ending the orphan.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;

use crate::common;
use common::Dir;
use common::events::kind;
use common::supervised::Run;

/// How long after the intermediate is let go its orphan's adoption may take: the case
/// went unseen for as long as nothing else of the tree ended.
const BOUND: Duration = Duration::from_secs(3);

/// The helper's command: waits on `gate`, runs `form` (whose intermediate leaves a `sleep 300`
/// to foster), then stays; after a `[supervisor]` section of `supervisor` (empty: none).
fn config_with(gate: &Path, form: &str, supervisor: &str) -> String {
    let script = format!("read x < {}; {form}; exec sleep 600", gate.display());
    format!(
        "{supervisor}[[helper]]\nname = \"deep\"\ncommand = [\"sh\", \"-c\", {}]\n\
         [[helper.generation]]\nsignal = \"TERM\"\n\
         [[helper.generation]]\nsignal = \"TERM\"\n\
         [[helper.generation]]\nsignal = \"TERM\"\ngrace = \"10s\"\n",
        serde_json::to_string(&script).unwrap()
    )
}

/// The shell one-liner: a shell that puts a sleep in the background and exits.
const SHELL: &str = "sh -c 'sleep 300 & exit 0'";
/// `daemon(3)`'s way: fork, setsid, fork, the middle one ends at once (python's, below the
/// helper's shell: the orphan is generation 4).
const DAEMON: &str = "python3 -c 'import os\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() \
                      == 0:\n        os.execvp(\"sleep\", [\"sleep\", \"300\"])\n    os._exit(0)\n\
                      os.wait()'";
/// util-linux's `setsid -f`: forks, the parent exits at once.
const SETSID: &str = "setsid -f sleep 300";

/// Starts foster on the form (`flags`: `--no-contain` or none) through `wrap` (empty: as this
/// test's user), lets the intermediate go once foster has read its tree, and waits at most
/// [`BOUND`] for the orphan's `reparented` event. The run, the event's index if it came, and
/// foster's standard error.
fn let_go(
    d: &Dir,
    form: &str,
    flags: &[&str],
    wrap: &[&str],
) -> (Run, Option<usize>, mpsc::Receiver<String>) {
    let_go_with(d, form, flags, wrap, "", &[])
}

/// [`let_go`] with a `[supervisor]` section and more environment for foster.
fn let_go_with(
    d: &Dir,
    form: &str,
    flags: &[&str],
    wrap: &[&str],
    supervisor: &str,
    more_env: &[(&str, &str)],
) -> (Run, Option<usize>, mpsc::Receiver<String>) {
    let gate = d.fifo("gate");
    // The helper may run as another user: it opens the gate.
    std::fs::set_permissions(&gate, std::fs::Permissions::from_mode(0o666)).unwrap();
    let mut wrapped = vec!["env"];
    wrapped.extend_from_slice(wrap);
    let mut env = more_env.to_vec();
    if !wrap.is_empty() {
        env.push(("PATH", "/usr/local/bin:/usr/bin:/bin"));
    }
    let cfg = config_with(&gate, form, supervisor);
    let (mut run, err) = Run::start_wrapped(d, &cfg, flags, &wrapped, &env);
    run.launch("deep", 1);
    // Answered by the supervisor's loop after a read of its tree: the intermediate is born
    // after it. Asked as foster's user (ctl talks to no other user's supervisor).
    let out = Command::new(wrapped[0])
        .args(&wrapped[1..])
        .envs(env.iter().copied())
        .arg(env!("CARGO_BIN_EXE_foster"))
        .args(["ctl", "--json", "--socket"])
        .arg(&run.socket)
        .arg("status")
        .output()
        .unwrap();
    assert!(out.status.success(), "ctl status: {out:?}");
    std::fs::write(&gate, "go\n").unwrap();
    let at = run.try_until(BOUND, |v| kind(v) == "reparented" && v["helper"] == "deep");
    (run, at, err)
}

/// Checks the orphan's adoption (its event at `at`: of `generation`, expected), its policy's
/// SIGTERM and its end, then stops foster.
fn check_adoption(mut run: Run, at: usize, generation: u32) {
    let v = run.seen[at].clone();
    assert_eq!(v["classification"], "expected", "{v}");
    // Exactly: the helper's shell is 1, each process forked below it one more (an
    // inference from its environment would say 3 whatever the depth).
    assert_eq!(v["generation"], generation, "{v}");
    let orphan = v["identity"].clone();
    let s = run.wait_for("the orphan policy's signal", |e| {
        kind(e) == "signal" && e["reason"] == "orphan_policy" && e["target"] == orphan
    });
    assert_eq!(s["signal"], "SIGTERM", "{s}");
    let e = run.wait_for("the orphan's end", |e| {
        kind(e) == "exit" && e["identity"] == orphan
    });
    assert_eq!(e["status"]["signal"], "SIGTERM", "{e}");
    assert_eq!(run.terminate(), 0);
}

/// The form as root: its orphan adopted within [`BOUND`], as [`check_adoption`] says.
fn adoption(tag: &str, form: &str, generation: u32, flags: &[&str]) {
    let d = Dir::new("births", tag);
    let (run, at, _) = let_go(&d, form, flags, &[]);
    let Some(at) = at else {
        panic!(
            "no reparented event within {BOUND:?} of the intermediate's start; seen: {:#?}",
            run.seen
        )
    };
    check_adoption(run, at, generation);
}

/// The form under a foster run as uid 65534: as [`adoption`] where the kernel announces
/// births to that user; skipped, with foster's own line saying why, where it does not.
fn adoption_as_nobody(tag: &str, form: &str, generation: u32, flags: &[&str]) {
    let d = Dir::new("births", tag);
    // foster binds its socket there as that user.
    std::fs::set_permissions(&d.0, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let nobody = [
        "setpriv",
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "--",
    ];
    let (mut run, at, err) = let_go(&d, form, flags, &nobody);
    if let Some(at) = at {
        return check_adoption(run, at, generation);
    }
    run.terminate();
    // Its standard error, to its end: the line of its start says whether births are announced.
    let refused = err
        .iter()
        .find(|l| l.contains("births in the tree are not announced"));
    match refused {
        Some(line) => common::skip::host(format!(
            "{tag}: the kernel does not announce births to uid 65534: {line}"
        )),
        None => panic!(
            "no reparented event within {BOUND:?}, and foster did not say births are not \
             announced; seen: {:#?}",
            run.seen
        ),
    }
}

fn root_only(what: &str) -> bool {
    !common::skip::unless_root(format!(
        "{what} needs root (the kernel grants its process events to root)"
    ))
}

#[test]
fn the_shell_one_liner_contained() {
    if root_only("the shell one-liner") {
        adoption("sh-c", SHELL, 3, &[]);
    }
}

#[test]
fn the_shell_one_liner_uncontained() {
    if root_only("the shell one-liner") {
        adoption("sh-u", SHELL, 3, &["--no-contain"]);
    }
}

#[test]
fn a_daemon_double_fork_contained() {
    if root_only("the double fork") {
        adoption("daemon-c", DAEMON, 4, &[]);
    }
}

#[test]
fn a_daemon_double_fork_uncontained() {
    if root_only("the double fork") {
        adoption("daemon-u", DAEMON, 4, &["--no-contain"]);
    }
}

#[test]
fn setsid_fork_contained() {
    if root_only("setsid -f") {
        adoption("setsid-c", SETSID, 3, &[]);
    }
}

#[test]
fn setsid_fork_uncontained() {
    if root_only("setsid -f") {
        adoption("setsid-u", SETSID, 3, &["--no-contain"]);
    }
}

#[test]
fn every_form_as_another_user_uncontained() {
    if root_only("running foster as uid 65534") {
        adoption_as_nobody("nobody-sh-u", SHELL, 3, &["--no-contain"]);
        adoption_as_nobody("nobody-daemon-u", DAEMON, 4, &["--no-contain"]);
        adoption_as_nobody("nobody-setsid-u", SETSID, 3, &["--no-contain"]);
    }
}

#[test]
fn every_form_as_another_user_contained() {
    if root_only("running foster as uid 65534") {
        adoption_as_nobody("nobody-sh-c", SHELL, 3, &[]);
        adoption_as_nobody("nobody-daemon-c", DAEMON, 4, &[]);
        adoption_as_nobody("nobody-setsid-c", SETSID, 3, &[]);
    }
}

/// Where births are not announced (turned off here, as a kernel that refuses them would),
/// `supervisor.rescan` reads the tree on a timer: the orphan is adopted within a period and a
/// read (its generation then inferred from its environment: 3), and foster said at its start
/// that births are not announced and that it reads every period.
#[test]
fn without_announcements_supervisor_rescan_finds_the_orphan() {
    let d = Dir::new("births", "rescan");
    let off = [("FOSTER_CONNECTOR", "off")];
    let sup = "[supervisor]\nrescan = \"300ms\"\n";
    let (mut run, at, err) = let_go_with(&d, SHELL, &["--no-contain"], &[], sup, &off);
    let Some(at) = at else {
        panic!(
            "no reparented event within {BOUND:?}; seen: {:#?}",
            run.seen
        )
    };
    let v = run.seen[at].clone();
    assert_eq!(v["classification"], "expected", "{v}");
    assert_eq!(v["generation"], 3, "{v}");
    run.terminate();
    let said: Vec<String> = err
        .iter()
        .filter(|l| l.contains("births in the tree are not announced"))
        .collect();
    assert_eq!(said.len(), 1, "one line at the start: {said:?}");
    assert!(
        said[0].contains("FOSTER_CONNECTOR=off") && said[0].contains("every 300ms"),
        "{said:?}"
    );
}
