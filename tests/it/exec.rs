//! `foster exec` as a user meets it: its errors and exit statuses, the gate's refusal telling a
//! parent that died from a stale `FOSTER_PARENT`, and `--watch` delivering the policy's signal
//! to its program when the parent dies; as PID 1 of a PID namespace, foster exec staying as its
//! program's init (the signal delivered, the namespace's orphans reaped). Real processes, pipe
//! and FIFO synchronisation.

use crate::common;

use std::ffi::CString;
use std::io::{BufRead, BufReader, Read};
use std::os::fd::{AsFd, AsRawFd};
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Command, Stdio};
use std::time::Duration;

use foster::process::identity::{pidfd_open, poll_readable};

const FOSTER: &str = env!("CARGO_BIN_EXE_foster");

/// `program`, with none of the variables a gate reads (a test run under foster has them).
fn ungated(program: &str) -> Command {
    let mut c = Command::new(program);
    for v in [
        "FOSTER_PARENT",
        "FOSTER_POLICY",
        "FOSTER_GATED",
        "FOSTER_GRACE",
    ] {
        c.env_remove(v);
    }
    c
}

/// `/bin/sh -c SCRIPT` with `F` the foster binary, [`ungated`].
fn sh_command(script: &str) -> Command {
    let mut c = ungated("/bin/sh");
    c.args(["-c", script]).env("F", FOSTER);
    c
}

/// A script's `echo "status $?"` said `status CODE`.
fn assert_said_status(o: &std::process::Output, code: i32) {
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(said.contains(&format!("status {code}")), "{o:?}");
}

fn sh(script: &str) -> std::process::Output {
    sh_command(script).output().unwrap()
}

/// `foster exec ...` expecting this test process as its parent, [`ungated`] but for that.
fn exec_here() -> Command {
    let me = foster::process::identity::Identity::current().unwrap();
    let mut c = ungated(FOSTER);
    c.arg("exec").env("FOSTER_PARENT", me.to_string());
    c
}

/// The `watcher PID` and `program PID` lines a script writes (in either order) on `out`.
fn watcher_and_program(out: std::process::ChildStdout) -> (i32, i32) {
    let mut out = BufReader::new(out);
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
    pids
}

/// A shell that runs `foster exec --watch --grace GRACE` in the background (its program a
/// shell that runs `prelude`, says its pid and sleeps) and then waits on its standard input:
/// the shell, the watcher's pid and the program's.
fn watched_under_a_shell(grace: &str, prelude: &str) -> (std::process::Child, i32, i32) {
    let script = format!(
        r#"FOSTER_PARENT=$("$F" identity $$) "$F" exec --watch --grace {grace} -- /bin/sh -c '{prelude}echo "program $$"; exec sleep 30' &
               echo "watcher $!"; read x"#
    );
    let mut parent = sh_command(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (watcher, program) = watcher_and_program(parent.stdout.take().unwrap());
    (parent, watcher, program)
}

#[test]
fn without_an_expected_parent_it_refuses_with_125() {
    let o = sh(r#""$F" exec -- /bin/true; echo "status $?""#);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_said_status(&o, 125);
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
    assert_eq!(parts[2], "SIGUSR1:notify:5s");
    assert!(
        parts[3].ends_with(";SIGHUP:exit:5s;SIGUSR1:notify:5s"),
        "{line}"
    );
    let pid: i32 = parts[1].split(':').next().unwrap().parse().unwrap();
    assert!(pid > 0);
}

#[test]
fn missing_program_is_127_and_set_uid_needs_allow() {
    let o = sh(
        r#"FOSTER_PARENT=$("$F" identity $$) "$F" exec -- no-such-program-here; echo "status $?""#,
    );
    assert_said_status(&o, 127);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("no-such-program-here: not found in PATH"),
        "{err}"
    );
    let o = sh(
        r#"FOSTER_PARENT=$("$F" identity $$) "$F" exec -- ./no-such-program-here; echo "status $?""#,
    );
    assert_said_status(&o, 127);
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
    assert_eq!(err, "foster: error: empty program name\n");
}

#[test]
fn bad_policy_is_a_usage_error_naming_the_generation() {
    let o = ungated(FOSTER)
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

/// One duration grammar: what a configuration accepts, `foster exec --grace`, a policy's grace and
/// `foster init --grace` accept too, and what one refuses (under 1 ms, no number, an unknown
/// unit) they all refuse as usage errors.
#[test]
fn exec_takes_the_grace_forms_a_configuration_takes() {
    for (grace, written) in [
        ("1.5s", "1.5s"),
        ("250ms", "250ms"),
        ("2m", "120s"),
        ("1h", "3600s"),
        ("3", "3s"),
    ] {
        let o = sh(&format!(
            r#"FOSTER_PARENT=$("$F" identity $$) "$F" exec --grace {grace} --policy 'TERM;HUP:exit:{grace}' -- /bin/sh -c 'echo "env $FOSTER_POLICY $FOSTER_GATED"'; echo "status $?""#
        ));
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(out.contains("status 0"), "{grace}: {o:?}");
        let line = out.lines().find(|l| l.starts_with("env ")).unwrap();
        let parts: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(parts[1], format!("SIGHUP:exit:{written}"), "{line}");
        assert!(
            parts[2].ends_with(&format!(";SIGTERM:exit:{written};SIGHUP:exit:{written}")),
            "{line}"
        );
        let d = common::Dir::new("exec", "grace");
        let cfg = d.file(
            "a.toml",
            &format!("[[helper]]\nname = \"a\"\ncommand = [\"true\"]\nstop_grace = \"{grace}\"\n"),
        );
        let (code, err) = common::check::check(&cfg);
        assert_eq!(code, Some(0), "config {grace}: {err}");
    }
    for (grace, why) in [
        ("0.5ms", "shorter than 1ms"),
        ("0s", "zero duration"),
        ("5d", "unknown unit \"d\""),
        ("s", "has no number"),
    ] {
        for args in [
            vec!["exec", "--grace", grace, "--", "true"],
            vec![
                "exec",
                "--policy",
                &format!("TERM:exit:{grace}"),
                "--",
                "true",
            ],
            vec!["init", "--wait-all", "--grace", grace, "--", "true"],
        ] {
            let o = ungated(FOSTER).args(&args).output().unwrap();
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
            assert!(err.contains(why), "{args:?}: {err}");
        }
        let d = common::Dir::new("exec", "badgrace");
        let cfg = d.file(
            "a.toml",
            &format!("[[helper]]\nname = \"a\"\ncommand = [\"true\"]\nstop_grace = \"{grace}\"\n"),
        );
        let (code, err) = common::check::check(&cfg);
        assert_eq!(code, Some(2), "config {grace}: {err}");
        assert!(err.contains(why), "config {grace}: {err}");
    }
}

#[test]
fn a_parent_death_signal_that_does_not_end_a_process_is_a_usage_error() {
    // CHLD, WINCH, CONT and URG are ignored by default and STOP/TSTP stop: as a parent-death
    // signal each would leave the program running (or stopped) without its parent.
    for sig in ["CHLD", "WINCH", "CONT", "URG", "STOP", "TSTP"] {
        for args in [
            vec!["exec", "--signal", sig, "--", "true"],
            vec![
                "exec",
                "--policy",
                &format!("TERM;{sig}:exit"),
                "--",
                "true",
            ],
        ] {
            let o = ungated(FOSTER).args(&args).output().unwrap();
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
            assert!(
                err.contains(&format!(
                    "SIG{sig} cannot be a parent-death or orphan signal"
                )),
                "{args:?}: {err}"
            );
        }
    }
}

#[test]
fn watch_delivers_the_signal_to_its_program_when_the_parent_dies() {
    // A shell is the parent; it runs foster exec --watch in the background and waits on stdin.
    let (mut parent, watcher, program) = watched_under_a_shell("5s", "");
    let wfd = pidfd_open(watcher).unwrap();
    let pfd = pidfd_open(program).unwrap();
    // The program's parent is the watcher.
    let ppid = common::process(program).expect("the program runs").ppid;
    assert_eq!(ppid, watcher);
    parent.kill().unwrap();
    parent.wait().unwrap();
    ended(&pfd, "the program (after its parent's death)");
    ended(&wfd, "the watcher (after its parent's death)");
    let mut err = String::new();
    std::io::Read::read_to_string(&mut parent.stderr.take().unwrap(), &mut err).unwrap();
    // Either channel may report first; both are the watcher's.
    assert!(
        err.contains("lost (signal): sending SIGTERM to")
            || err.contains("lost (lifeline): sending SIGTERM to"),
        "{err}"
    );
}

/// A close-on-exec pipe: (read end, write end).
fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: valid array of two ints; the descriptors are owned from here on.
    unsafe {
        assert_eq!(libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC), 0, "pipe2");
        (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1]))
    }
}

/// Waits (bounded) until the process behind `pidfd` has ended.
fn ended(pidfd: &OwnedFd, what: &str) {
    assert!(
        poll_readable(pidfd.as_raw_fd(), Some(Duration::from_secs(20))),
        "{what} did not end within 20 s"
    );
}

/// Reads `fd` to its end, failing the test after 20 s instead of hanging.
fn read_to_end_within(fd: OwnedFd, what: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut f = std::fs::File::from(fd);
    loop {
        assert!(
            poll_readable(f.as_raw_fd(), Some(Duration::from_secs(20))),
            "{what}: no end of file within 20 s"
        );
        let mut buf = [0u8; 4096];
        match f.read(&mut buf).unwrap() {
            0 => return out,
            n => out.extend_from_slice(&buf[..n]),
        }
    }
}

fn state_of(pid: i32) -> u8 {
    common::process(pid).expect("the process is there").state
}

/// The expected parent P died (a zombie its own parent has not reaped yet) and this process
/// was reparented to a subreaper S before its gate ran: the refusal says that P died and names
/// S, instead of calling P's identity a stale `FOSTER_PARENT` (a zombie still has its /proc
/// entry and start time).
#[test]
fn a_parent_that_died_is_told_apart_from_a_stale_foster_parent() {
    let dir = common::Dir::new("exec", "died");
    let go = dir.fifo("go");
    // P takes its identity, starts C in the background (C waits on the FIFO, then execs foster
    // exec, expecting P), prints both pids and exits.
    let script = r#"FOSTER_PARENT=$("$F" identity $$); export FOSTER_PARENT
( read x < "$GO"; exec "$F" exec -- /bin/true ) &
echo "$$ $!""#;
    // Everything the forked children need, computed before fork.
    let sh_path = CString::new("/bin/sh").unwrap();
    let argv_c: Vec<CString> = ["sh", "-c", script]
        .iter()
        .map(|a| CString::new(*a).unwrap())
        .collect();
    let mut argv: Vec<*const libc::c_char> = argv_c.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let env_c: Vec<CString> = [
        format!("F={FOSTER}"),
        format!("GO={}", go.display()),
        "PATH=/usr/bin:/bin".to_string(),
    ]
    .into_iter()
    .map(|e| CString::new(e).unwrap())
    .collect();
    let mut envp: Vec<*const libc::c_char> = env_c.iter().map(|e| e.as_ptr()).collect();
    envp.push(std::ptr::null());
    let (out_r, out_w) = pipe();
    let (err_r, err_w) = pipe();
    let (release_r, release_w) = pipe();
    let (report_r, report_w) = pipe();
    let (out_wfd, err_wfd, release_rfd, report_wfd) = (
        out_w.as_raw_fd(),
        err_w.as_raw_fd(),
        release_r.as_raw_fd(),
        report_w.as_raw_fd(),
    );
    // The test's own ends, which S closes in its copy.
    let test_ends = [
        out_r.as_raw_fd(),
        err_r.as_raw_fd(),
        release_w.as_raw_fd(),
        report_r.as_raw_fd(),
    ];

    // SAFETY: S and P make raw syscalls on the data prepared above, then exec or _exit.
    let s = unsafe { libc::fork() };
    assert!(s >= 0, "fork");
    if s == 0 {
        // S: a child subreaper in a group of its own that reaps nothing until released.
        // SAFETY: in the forked child: raw system calls on data prepared before the fork, then
        // _exit.
        unsafe {
            for fd in test_ends {
                libc::close(fd);
            }
            libc::setpgid(0, 0);
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
            let p = libc::fork();
            if p == 0 {
                let _ = common::fd::place(&[(out_wfd, 1), (err_wfd, 2)]);
                libc::execve(sh_path.as_ptr(), argv.as_ptr(), envp.as_ptr());
                libc::_exit(127);
            }
            libc::close(out_wfd);
            libc::close(err_wfd);
            let mut b = 0u8;
            while libc::read(release_rfd, (&raw mut b).cast(), 1) < 0
                && foster::base::sys::errno() == libc::EINTR
            {}
            // Released: reap every child, each reported as (pid, wait status).
            loop {
                let mut status = 0;
                let r = libc::waitpid(-1, &mut status, 0);
                if r < 0 {
                    if foster::base::sys::errno() == libc::EINTR {
                        continue;
                    }
                    break;
                }
                let rec = [r, status];
                libc::write(report_wfd, rec.as_ptr().cast(), 8);
            }
            libc::_exit(0);
        }
    }
    // A forked subreaper S and its process group, killed and reaped if the test fails midway.
    let mut guard = common::child::Group::new(s);
    drop((out_w, err_w, release_r, report_w));

    // C keeps a copy of this pipe: read P's one line, not to the end.
    let line = line_within(&mut std::fs::File::from(out_r), "P's line");
    let pids: Vec<i32> = line
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    let (p, c) = (pids[0], pids[1]);
    // C is blocked on the FIFO; P ends and stays a zombie: S does not reap it yet.
    let cfd = pidfd_open(c).unwrap();
    let pfd = pidfd_open(p).unwrap();
    ended(&pfd, "P");
    assert_eq!(state_of(p), b'Z', "P is a zombie, not reaped");
    // C has been reparented to S, the nearest subreaper: release it into foster exec.
    std::fs::write(&go, "go\n").unwrap();
    ended(&cfd, "C (foster exec)");
    assert_eq!(state_of(p), b'Z', "P was still a zombie while C's gate ran");

    drop(release_w);
    let records = read_to_end_within(report_r, "S's report");
    guard.reap();
    let reaped: Vec<(i32, i32)> = records
        .chunks_exact(8)
        .map(|r| {
            let w = |i: usize| i32::from_ne_bytes([r[i], r[i + 1], r[i + 2], r[i + 3]]);
            (w(0), w(4))
        })
        .collect();
    let c_status = reaped.iter().find(|r| r.0 == c).expect("S reaped C").1;
    assert!(reaped.iter().any(|r| r.0 == p), "S reaped P: {reaped:?}");
    assert!(
        libc::WIFEXITED(c_status) && libc::WEXITSTATUS(c_status) == 120,
        "foster exec ended with {c_status:#x}"
    );
    let err = String::from_utf8(read_to_end_within(err_r, "stderr")).unwrap();
    assert!(
        err.contains(&format!(
            "has died (this process was reparented to PID {s})"
        )),
        "{err}"
    );
    assert!(!err.contains("stale"), "{err}");
    for pid in [s, p, c] {
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "{pid} left behind"
        );
    }
}

#[test]
fn a_stale_or_wrong_foster_parent_is_named_as_such() {
    // The shell's identity inherited through a foster-unaware `sh -c`: alive, not the parent.
    let o =
        sh(r#"FOSTER_PARENT=$("$F" identity $$) sh -c '"$F" exec -- /bin/true; echo "status $?"'"#);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_said_status(&o, 120);
    assert!(
        err.contains("is alive but is not this process's parent") && err.contains("stale"),
        "{err}"
    );
    assert!(!err.contains("has died"), "{err}");
    // The right pid with a wrong start time.
    let o = sh(r#"FOSTER_PARENT=$$:1 "$F" exec -- /bin/true; echo "status $?""#);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_said_status(&o, 120);
    assert!(
        err.contains("this process's parent") && err.contains("start time"),
        "{err}"
    );
}

/// `foster exec --uid/--gid ... -- cat /proc/self/status`, run from a shell it is the child of.
fn status_as(ids: &str) -> (std::process::Output, String) {
    let o = sh(&format!(
        r#"FOSTER_PARENT=$("$F" identity $$) "$F" exec {ids} -- /bin/cat /proc/self/status"#
    ));
    let status = String::from_utf8_lossy(&o.stdout).into_owned();
    (o, status)
}

#[test]
fn uid_minus_one_and_gid_minus_one_are_usage_errors() {
    // (uid_t)-1 is "no change" to setresuid: the program would run as the caller.
    for (opt, kind) in [("--uid", "uid"), ("--gid", "gid")] {
        let (o, status) = status_as(&format!("{opt} 4294967295"));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{opt}: {o:?}");
        assert!(status.is_empty(), "{opt}: the program ran: {status}");
        assert!(
            err.contains(&format!(
                "4294967295 is ({kind}_t)-1, which the kernel takes as \"no change\""
            )),
            "{err}"
        );
    }
}

#[test]
fn uid_alone_takes_the_users_group_and_groups_from_the_user_database() {
    if common::skip::unless_root("not root, so no other uid to change to") {
        return;
    }
    let ids = |s: &str| {
        (
            common::status_ids(s, "Uid:"),
            common::status_ids(s, "Gid:"),
            common::status_ids(s, "Groups:"),
        )
    };
    // --uid alone: nobody's primary group and group list, as `id` reads them.
    let (gid, groups) = common::groups_of("65534");
    let (o, status) = status_as("--uid 65534");
    assert!(o.status.success(), "{o:?}");
    assert_eq!(ids(&status), (vec![65534; 4], vec![gid; 4], groups.clone()));

    // --gid that is the user's own primary group: the same.
    let (_, status) = status_as(&format!("--uid 65534 --gid {gid}"));
    assert_eq!(ids(&status), (vec![65534; 4], vec![gid; 4], groups));

    // Another group: it replaces the user's groups, the list is cleared.
    let (_, status) = status_as("--uid 65534 --gid 4242");
    assert_eq!(ids(&status), (vec![65534; 4], vec![4242; 4], vec![]));

    // A group alone: the uid stays, root's group list does not.
    let (_, status) = status_as("--gid 4242");
    assert_eq!(ids(&status), (vec![0; 4], vec![4242; 4], vec![]));

    // A uid the user database does not know has no group to take: --gid is required.
    let stranger = common::uid_without_entry();
    let (o, status) = status_as(&format!("--uid {stranger}"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(status.is_empty(), "the program ran: {status}");
    assert!(
        err.contains(&format!("uid {stranger} has no entry in the user database"))
            && err.contains("--gid"),
        "{err}"
    );
    let (o, status) = status_as(&format!("--uid {stranger} --gid {stranger}"));
    assert!(o.status.success(), "{o:?}");
    assert_eq!(ids(&status), (vec![stranger; 4], vec![stranger; 4], vec![]));

    // A user with supplementary groups gets all of them.
    match common::user_with_supplementary_groups() {
        Some((name, uid)) => {
            let (gid, groups) = common::groups_of(&name);
            let (o, status) = status_as(&format!("--uid {uid}"));
            assert!(o.status.success(), "{o:?}");
            assert_eq!(ids(&status), (vec![uid; 4], vec![gid; 4], groups), "{name}");
        }
        None => common::skip::host("part: no user with a supplementary group in /etc/group"),
    }
}

/// `foster exec --watch ARGS -- PROGRAM...` expecting this test process as its parent, started
/// with SIGALRM blocked (a signal the watcher does not forward); the watcher, with its program's
/// standard output piped.
fn watcher(args: &[&str], program: &[&str]) -> std::process::Child {
    use std::os::unix::process::CommandExt;
    let mut cmd = exec_here();
    cmd.arg("--watch")
        .args(args)
        .arg("--")
        .args(program)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: sigprocmask on a stack set, between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGALRM);
            libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            Ok(())
        });
    }
    cmd.spawn().unwrap()
}

/// One line (without its newline) read from the pipe `r`, byte by byte (the rest is left in
/// the pipe), each byte awaited 20 s at most.
fn line_within(r: &mut (impl Read + AsRawFd), what: &str) -> String {
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    loop {
        assert!(
            poll_readable(r.as_raw_fd(), Some(Duration::from_secs(20))),
            "{what}: no line within 20 s"
        );
        match r.read(&mut b).unwrap() {
            0 => panic!("{what}: the pipe ended before a whole line: {line:?}"),
            _ if b[0] == b'\n' => return String::from_utf8(line).unwrap(),
            _ => line.push(b[0]),
        }
    }
}

/// With `--signal KILL` the watcher chose the exec-time signal setup and emptied its whole
/// mask: a SIGTERM sent to it ended it (143) instead of reaching its program. Whatever the
/// reaction, the watcher keeps its caller's mask and forwards.
#[test]
fn watch_with_kill_keeps_its_mask_and_forwards_term() {
    for signal in ["KILL", "TERM"] {
        let mut w = watcher(
            &["--signal", signal],
            &[
                "/bin/sh",
                "-c",
                r#"trap 'kill $s; exit 7' TERM; sleep 30 & s=$!; echo "ready $$ $s"; wait $s"#,
            ],
        );
        let wpid = w.id() as i32;
        let ready = line_within(w.stdout.as_mut().unwrap(), "the program's ready line");
        let pids: Vec<i32> = ready
            .strip_prefix("ready ")
            .unwrap()
            .split(' ')
            .map(|p| p.parse().unwrap())
            .collect();
        let (program, sleeper) = (pids[0], pids[1]);
        let sleeper_fd = pidfd_open(sleeper).unwrap();
        let blocked = common::sigset_of(wpid, "SigBlk:");
        common::send(wpid, libc::SIGTERM);
        let status = w.wait().unwrap();
        let mut err = String::new();
        w.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        assert_ne!(
            blocked & common::sigbit(libc::SIGALRM),
            0,
            "--signal {signal}: the watcher lost its caller's mask: SigBlk {blocked:#x}"
        );
        assert_eq!(
            status.code(),
            Some(7),
            "--signal {signal}: SIGTERM was not forwarded to the program: {status:?} {err}"
        );
        assert!(
            !std::path::Path::new(&format!("/proc/{program}")).exists(),
            "program {program} left behind"
        );
        if !poll_readable(sleeper_fd.as_raw_fd(), Some(Duration::from_secs(10))) {
            // SAFETY: the program's child, which the test started through it.
            unsafe { libc::kill(sleeper, libc::SIGKILL) };
            panic!("--signal {signal}: the program's child {sleeper} outlived it");
        }
    }
}

/// Once the grace has run out and SIGKILL is sent, the watcher waits for its program's end
/// with no timeout: it polled with a zero timeout instead, re-sending SIGKILL and logging
/// "outlived the grace" in a busy loop until the program was gone (22,406 times while a 1 GiB
/// process exited).
#[test]
fn watch_sends_sigkill_once_after_the_grace_and_waits() {
    let (mut parent, watcher, program) = watched_under_a_shell("200ms", r#"trap "" TERM; "#);
    let wfd = pidfd_open(watcher).unwrap();
    let pfd = pidfd_open(program).unwrap();
    parent.kill().unwrap();
    parent.wait().unwrap();
    ended(&pfd, "the program (TERM ignored, then SIGKILL)");
    ended(&wfd, "the watcher");
    let err = String::from_utf8(read_to_end_within(
        parent.stderr.take().unwrap().into(),
        "stderr",
    ))
    .unwrap();
    assert!(err.contains("sending SIGTERM to"), "{err}");
    assert_eq!(
        err.matches("outlived the grace").count(),
        1,
        "SIGKILL sent (and logged) {} times:\n{}",
        err.matches("outlived the grace").count(),
        err.lines().take(5).collect::<Vec<_>>().join("\n")
    );
}

/// `foster exec` expecting this test process, with `FOSTER_PARENT_PIDFD=value` and, on
/// descriptor 10 of the child, a pidfd of `pidfd_of` (a pid; 0 for none, -1 for this test
/// process): (status, stdout, stderr).
fn exec_with_parent_pidfd(value: &str, pidfd_of: i32, program: &str) -> (i32, String, String) {
    use std::os::unix::process::CommandExt;
    let mut cmd = exec_here();
    cmd.args(["--", "/bin/sh", "-c", program])
        .env("FOSTER_PARENT_PIDFD", value)
        .stdin(Stdio::null());
    // SAFETY: pidfd_open and dup2 or fcntl between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if pidfd_of != 0 {
                let pid = if pidfd_of < 0 {
                    libc::getppid()
                } else {
                    pidfd_of
                };
                common::fd::pidfd_at(pid, 10)?;
            }
            Ok(())
        });
    }
    let o = cmd.output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A pidfd of the expected parent handed down in `FOSTER_PARENT_PIDFD` is checked: an open
/// descriptor, a pidfd, of the expected process where `/proc` can tell. Anything else is a
/// gate error naming the variable.
#[test]
fn foster_parent_pidfd_must_be_a_pidfd_of_the_expected_parent() {
    for (value, of, want) in [
        ("ten", 0, "expected a descriptor number"),
        ("-3", 0, "expected a descriptor number"),
        ("900", 0, "not an open descriptor"),
        ("0", 0, "not a pidfd"),
        ("10", 1, "a pidfd of process 1, not of the expected parent"),
    ] {
        let (status, out, err) = exec_with_parent_pidfd(value, of, "echo ran");
        assert_eq!(status, 125, "FOSTER_PARENT_PIDFD={value}: {out} {err}");
        assert!(
            err.contains(&format!("FOSTER_PARENT_PIDFD={value}: {want}")),
            "FOSTER_PARENT_PIDFD={value}: {err}"
        );
        assert!(out.is_empty(), "the program ran: {out}");
    }
}

/// The right pidfd passes, and is not passed on: neither the variable nor the descriptor
/// reaches the program.
#[test]
fn foster_parent_pidfd_of_the_parent_passes_and_is_not_passed_on() {
    let (status, out, err) = exec_with_parent_pidfd(
        "10",
        -1,
        r#"echo "var ${FOSTER_PARENT_PIDFD-unset}"; if [ -e /proc/$$/fd/10 ]; then echo "fd open"; else echo "fd closed"; fi"#,
    );
    assert_eq!(status, 0, "{err}");
    assert_eq!(out, "var unset\nfd closed\n", "{err}");
}

/// `foster ARGS -- /bin/sh -c PROGRAM` as PID 1 of a new PID namespace (`unshare --pid --fork
/// --mount-proc`, root only), expecting `unshare` as its parent: a shell takes its own identity
/// and execs `unshare` in its place (the same process), with a pidfd of itself handed down on
/// descriptor 10 (`FOSTER_PARENT_PIDFD`: that parent lives outside the namespace). `env` is
/// added to the environment. The child is that shell, then `unshare`.
fn exec_as_namespace_init(
    args: &[&str],
    program: &str,
    env: &[(&str, &str)],
) -> std::process::Child {
    use std::os::unix::process::CommandExt;
    let mut cmd = sh_command(
        r#"export FOSTER_PARENT="$("$F" identity $$)"; exec unshare --pid --fork --mount-proc "$F" "$@""#,
    );
    cmd.arg("sh")
        .args(args)
        .args(["--", "/bin/sh", "-c", program])
        .env("FOSTER_PARENT_PIDFD", "10")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: pidfd_open and dup2 or fcntl between fork and exec.
    unsafe {
        cmd.pre_exec(|| common::fd::pidfd_at(libc::getpid(), 10));
    }
    cmd.spawn().unwrap()
}

/// Why a new PID namespace with its own /proc cannot be had here, if it cannot: not root, or
/// `unshare --pid --fork --mount-proc` itself refused (a container may withhold the mount),
/// with what it said. The namespace tests skip, saying so, rather than blame foster.
fn namespace_unavailable() -> Option<String> {
    if !common::is_root() {
        return Some("a new PID namespace needs root".into());
    }
    let out = match Command::new("unshare")
        .args([
            "--pid",
            "--fork",
            "--mount-proc",
            "/bin/sh",
            "-c",
            "echo $$",
        ])
        .stdin(Stdio::null())
        .output()
    {
        Ok(out) => out,
        Err(e) => return Some(format!("unshare could not be run: {e}")),
    };
    if out.status.success() && out.stdout == b"1\n" {
        return None;
    }
    Some(format!(
        "unshare --pid --fork --mount-proc does not work here ({}; it said {:?})",
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    ))
}

/// What a namespace test started: `unshare` (this test's child), killed and reaped on drop, and
/// pidfds of what ran in the namespace, SIGKILLed on drop should the test fail midway.
struct Namespace {
    unshare: std::process::Child,
    inside: Vec<OwnedFd>,
}

impl Drop for Namespace {
    fn drop(&mut self) {
        for fd in &self.inside {
            let _ = foster::process::identity::pidfd_send_signal(fd.as_fd(), libc::SIGKILL);
        }
        let _ = self.unshare.kill();
        let _ = self.unshare.wait();
        for fd in &self.inside {
            ended(fd, "a process of the namespace, at the teardown");
        }
    }
}

/// The namespace's init (`unshare`'s child) and the program: the init itself when the program
/// was exec'd in its place, else the init's one child.
fn init_and_program(unshare: i32) -> (i32, i32) {
    let init = common::children_of(unshare)[0];
    let program = common::children_of(init).first().copied().unwrap_or(init);
    (init, program)
}

/// As PID 1 of a PID namespace, `foster exec` used to exec its program in its place: the
/// program, the namespace's init, never got its parent-death signal (the kernel discards a
/// signal at its default disposition sent to a namespace's init) and ran on, reparented, after
/// its parent's death. foster now stays as the namespace's init and watches: the program gets
/// the signal when the parent dies.
#[test]
fn as_a_namespaces_init_it_stays_and_the_program_gets_the_signal() {
    if let Some(why) = namespace_unavailable() {
        common::skip::refused(why);
        return;
    }
    let child = exec_as_namespace_init(&["-v", "exec"], "echo ready; exec sleep 1000", &[]);
    let mut ns = Namespace {
        unshare: child,
        inside: Vec::new(),
    };
    let mut out = BufReader::new(ns.unshare.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    if line != "ready\n" {
        let _ = ns.unshare.kill();
        let err = read_to_end_within(
            ns.unshare.stderr.take().unwrap().into(),
            "foster exec's standard error",
        );
        panic!(
            "the program never said ready ({line:?}); foster exec said: {}",
            String::from_utf8_lossy(&err)
        );
    }
    let (init, program) = init_and_program(ns.unshare.id() as i32);
    let ifd = pidfd_open(init).unwrap();
    let pfd = pidfd_open(program).unwrap();
    ns.inside = vec![pfd.try_clone().unwrap(), ifd.try_clone().unwrap()];
    // The parent dies.
    ns.unshare.kill().unwrap();
    ns.unshare.wait().unwrap();
    let what = format!("the program {program} (the namespace's init is {init}), its parent dead");
    ended(&pfd, &what);
    ended(&ifd, "the namespace's init, its parent dead");
    assert_ne!(program, init, "the program was the namespace's init");
    let err = String::from_utf8_lossy(&read_to_end_within(
        ns.unshare.stderr.take().unwrap().into(),
        "foster exec's standard error",
    ))
    .into_owned();
    assert!(
        err.contains("PID 1 of its PID namespace") && err.contains("stays as its init"),
        "{err}"
    );
    assert!(
        err.contains("lost (signal): sending SIGTERM to")
            || err.contains("lost (lifeline): sending SIGTERM to"),
        "{err}"
    );
}

/// As the namespace's init, foster exec reaps the orphans the namespace leaves to it: a
/// grandchild of the program whose parent has gone ends, and foster reaps it (said at debug
/// level); exec'd in foster's place, a program that never waits left it a zombie.
#[test]
fn as_a_namespaces_init_it_reaps_the_orphans() {
    if let Some(why) = namespace_unavailable() {
        common::skip::refused(why);
        return;
    }
    let dir = common::Dir::new("exec", "nsorphan");
    let gate = dir.fifo("go");
    // The orphan says its pid (the namespace's) and waits on the FIFO; its parent, a
    // subshell, has gone by then; the program never waits for anything.
    let program = r#"p=$( (sh -c 'echo $$; exec cat "$G" >/dev/null' &) ); echo "orphan $p"; exec sleep 1000"#;
    let gate_text = gate.to_string_lossy().into_owned();
    let child = exec_as_namespace_init(&["-vv", "exec"], program, &[("G", &gate_text)]);
    let mut ns = Namespace {
        unshare: child,
        inside: Vec::new(),
    };
    // Standard error line by line on a thread.
    let rx = common::lines::lines(ns.unshare.stderr.take().unwrap());
    let mut out = BufReader::new(ns.unshare.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let orphan = line
        .trim()
        .strip_prefix("orphan ")
        .unwrap_or_else(|| {
            let _ = ns.unshare.kill();
            let said: Vec<String> =
                std::iter::from_fn(|| rx.recv_timeout(Duration::from_secs(5)).ok())
                    .take(50)
                    .collect();
            panic!("the program never named its orphan ({line:?}); foster exec said: {said:#?}")
        })
        .to_string();
    let (init, program) = init_and_program(ns.unshare.id() as i32);
    ns.inside = vec![pidfd_open(program).unwrap(), pidfd_open(init).unwrap()];
    // Opening the FIFO waits for the orphan's cat; closing it ends the orphan.
    drop(std::fs::OpenOptions::new().write(true).open(&gate).unwrap());
    let want = format!("reaped pid {orphan}, an orphan of the namespace (status 0)");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) if l.contains(&want) => break,
            Ok(l) => seen.push(l),
            Err(_) => panic!("nobody reaped the orphan {orphan}; standard error: {seen:#?}"),
        }
    }
}
