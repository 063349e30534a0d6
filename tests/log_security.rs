//! The log files foster writes (the events log, the helpers' logs) against local attackers and
//! a full disk, end to end on real processes and real uids: a symbolic link planted by another
//! user, a directory of another user. The other users are made with `setpriv` (as root; the
//! tests that need it skip with a reason otherwise).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

mod common;
use common::{Dir, is_root};

const FOSTER: &str = env!("CARGO_BIN_EXE_foster");

/// The attacker: an ordinary uid.
const ATTACKER: u32 = 65534;

/// `setpriv` as `uid` (and its group), no supplementary groups, running `program`.
fn as_user(uid: u32, program: &str) -> Command {
    let mut c = Command::new("setpriv");
    c.arg(format!("--reuid={uid}"))
        .arg(format!("--regid={uid}"))
        .arg("--clear-groups")
        .arg("--")
        .arg(program);
    c
}

fn ok(c: &mut Command) {
    let out = c.output().unwrap();
    assert!(out.status.success(), "{c:?}: {out:?}");
}

/// `c` run to its end (SIGKILLed and the test failed past the bound), its output piped.
fn output_within(mut c: Command) -> Output {
    let child = c
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    common::child::output_within(child, &format!("{c:?}"))
}

/// A configuration whose one helper touches `marker` (so that a start is seen).
fn touching(d: &Dir, marker: &Path) -> std::path::PathBuf {
    d.file(
        "c.toml",
        &format!(
            "[[helper]]\nname = \"t\"\ncommand = [\"/bin/touch\", {:?}]\n",
            marker.to_str().unwrap()
        ),
    )
}

/// `foster run --events-log LOG CONFIG` (no socket, uncontained), to its end: its status and
/// standard error.
fn run_with_events_log(log: &Path, cfg: &Path) -> (Option<i32>, String) {
    let mut c = Command::new(FOSTER);
    c.args(["run", "--no-socket", "--no-contain", "--events-log"])
        .arg(log)
        .arg(cfg);
    let o = output_within(c);
    (o.status.code(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// Root's events log at a path another user could plant a symbolic link at (in a sticky 1777
/// directory, as `/tmp`) or in a directory of theirs: refused before anything starts, the
/// error naming what is there (its owner and mode); the root-only file the link leads to is
/// not written.
#[test]
fn an_events_log_another_user_could_have_planted_is_refused() {
    if !is_root() {
        println!("skipped: not root, so no second user to plant the link");
        return;
    }
    let d = Dir::new("logsec", "events");
    let victim = d.file("victim", "root's secret\n");
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).unwrap();
    let marker = d.path("started");
    let cfg = touching(&d, &marker);
    let shared = d.path("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let planted = shared.join("events.jsonl");
    ok(as_user(ATTACKER, "ln").arg("-s").arg(&victim).arg(&planted));
    let (code, err) = run_with_events_log(&planted, &cfg);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("events log")
            && err.contains("is a symbolic link to")
            && err.contains("owned by uid 65534")
            && err.contains("mode 0777")
            && err.contains("not writing to it"),
        "{err}"
    );
    // A directory of the attacker's (mode 0755): its owner could swap anything in it.
    let theirs = d.path("theirs");
    std::fs::create_dir(&theirs).unwrap();
    std::os::unix::fs::chown(&theirs, Some(ATTACKER), Some(ATTACKER)).unwrap();
    let planted = theirs.join("events.jsonl");
    ok(as_user(ATTACKER, "ln").arg("-s").arg(&victim).arg(&planted));
    let (code, err) = run_with_events_log(&planted, &cfg);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("events log")
            && err.contains("is a directory owned by uid 65534")
            && err.contains("mode 0755")
            && err.contains("must belong to you"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "root's secret\n");
    assert!(!marker.exists(), "nothing started");
}
