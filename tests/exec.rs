//! `foster exec` as a user meets it: its errors and exit statuses, and `--watch` delivering the
//! policy's signal to its program when the parent dies. Real processes, pipe synchronisation.

use std::io::{BufRead, BufReader};
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};
use std::time::Duration;

use foster::lifeline::{pidfd_open, poll_readable};

const FOSTER: &str = env!("CARGO_BIN_EXE_foster");

fn sh(script: &str) -> std::process::Output {
    Command::new("/bin/sh")
        .args(["-c", script])
        .env("F", FOSTER)
        .env_remove("FOSTER_PARENT")
        .env_remove("FOSTER_POLICY")
        .env_remove("FOSTER_GATED")
        .output()
        .unwrap()
}

#[test]
fn without_an_expected_parent_it_refuses_with_125() {
    let o = sh(r#""$F" exec -- /bin/true; echo "status $?""#);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("status 125"),
        "{o:?}"
    );
    assert!(err.contains("FOSTER_PARENT is not set"), "{err}");
}

#[test]
fn a_passed_gate_execs_the_program_with_the_next_generation_environment() {
    let o = sh(
        r#"FOSTER_PARENT=$("$F" identity $$) "$F" exec --signal HUP --next USR1:notify -- /bin/sh -c 'echo "env $FOSTER_PARENT $FOSTER_POLICY $FOSTER_GATED"'; echo "status $?""#,
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("status 0"), "{o:?}");
    let line = out
        .lines()
        .find(|l| l.starts_with("env "))
        .expect("program ran");
    let parts: Vec<&str> = line.split_whitespace().collect();
    // FOSTER_PARENT is the program's own identity, FOSTER_POLICY the next chain, FOSTER_GATED
    // what it was checked against and its own chain.
    assert_eq!(parts[2], "USR1:notify:5s");
    assert!(parts[3].ends_with(";HUP:exit:5s;USR1:notify:5s"), "{line}");
    let pid: i32 = parts[1].split(':').next().unwrap().parse().unwrap();
    assert!(pid > 0);
}

#[test]
fn missing_program_is_127_and_set_uid_needs_allow() {
    let o = sh(
        r#"FOSTER_PARENT=$("$F" identity $$) "$F" exec -- no-such-program-here; echo "status $?""#,
    );
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("status 127"),
        "{o:?}"
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("no-such-program-here: not found in PATH"),
        "{err}"
    );
    let o = sh(
        r#"FOSTER_PARENT=$("$F" identity $$) "$F" exec -- ./no-such-program-here; echo "status $?""#,
    );
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("status 127"),
        "{o:?}"
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("./no-such-program-here: no such file"),
        "{err}"
    );
}

#[test]
fn an_empty_program_name_is_a_usage_error() {
    // PATH starts with a directory: an empty name joined to it names the directory itself.
    let o = sh(
        r#"PATH="/usr/bin:/bin" FOSTER_PARENT=$("$F" identity $$) "$F" exec -- ''; echo "status $?""#,
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("status 2\n"),
        "{o:?}"
    );
    assert_eq!(err, "foster: exec: empty program name\n");
}

#[test]
fn bad_policy_is_a_usage_error_naming_the_generation() {
    let o = Command::new(FOSTER)
        .args(["exec", "--policy", "TERM;HUP:sometimes", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("generation 2 (\"HUP:sometimes\"): unknown reaction \"sometimes\""),
        "{err}"
    );
}

#[test]
fn watch_delivers_the_signal_to_its_program_when_the_parent_dies() {
    // A shell is the parent; it runs foster exec --watch in the background and waits on stdin.
    let mut parent = Command::new("/bin/sh")
        .args([
            "-c",
            r#"FOSTER_PARENT=$("$F" identity $$) "$F" exec --watch --grace 5s -- /bin/sh -c 'echo "program $$"; exec sleep 30' &
               echo "watcher $!"; read x"#,
        ])
        .env("F", FOSTER)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(parent.stdout.take().unwrap());
    let mut pids = (0, 0);
    for _ in 0..2 {
        let mut l = String::new();
        out.read_line(&mut l).unwrap();
        let mut it = l.split_whitespace();
        match (it.next(), it.next().and_then(|p| p.parse::<i32>().ok())) {
            (Some("watcher"), Some(p)) => pids.0 = p,
            (Some("program"), Some(p)) => pids.1 = p,
            _ => panic!("unexpected line {l:?}"),
        }
    }
    let (watcher, program) = pids;
    let wfd = pidfd_open(watcher).unwrap();
    let pfd = pidfd_open(program).unwrap();
    // The program's parent is the watcher.
    let stat = std::fs::read_to_string(format!("/proc/{program}/stat")).unwrap();
    let ppid: i32 = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(ppid, watcher);
    parent.kill().unwrap();
    parent.wait().unwrap();
    assert!(
        poll_readable(pfd.as_raw_fd(), Some(Duration::from_secs(10))),
        "program outlived the parent"
    );
    assert!(
        poll_readable(wfd.as_raw_fd(), Some(Duration::from_secs(10))),
        "watcher outlived the parent"
    );
    let mut err = String::new();
    std::io::Read::read_to_string(&mut parent.stderr.take().unwrap(), &mut err).unwrap();
    // Either channel may report first; both are the watcher's.
    assert!(
        err.contains("lost (signal): sending SIGTERM to")
            || err.contains("lost (lifeline): sending SIGTERM to"),
        "{err}"
    );
}
