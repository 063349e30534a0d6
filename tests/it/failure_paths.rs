//! Failure paths of `foster run` that must tell the truth, on real processes: a stopped helper
//! still stops in its grace (SIGCONT after its stop signal), a launch that fails before its
//! exec is one `launch_failed` event naming the step, the path and the errno, a failed launch
//! is the helper's last exit and no launch, a `start` or `restart` that did not launch exits
//! non-zero, an operator's restart is not counted as one of the restart rules', the notify
//! socket of a SIGKILLed supervisor is removed by the next, and the same configuration file
//! started twice is refused naming the running supervisor.
//! Synchronisation is foster's events (socket or events log) and the kernel's process states;
//! deadlines are only safety nets.

use crate::common;

use std::time::Duration;

use serde_json::Value;

use common::events::kind;
use common::foster_run::FosterRun;
use common::supervised::{Guard, Run};
use common::{Dir, send};

const FOSTER: &str = env!("CARGO_BIN_EXE_foster");

fn pid_of(v: &Value) -> i32 {
    v["identity"]["pid"].as_i64().unwrap() as i32
}

/// Stops `pid` (SIGSTOP) and waits until the kernel says it is stopped (`T` in its stat).
fn stop_and_wait(pid: i32) {
    send(pid, libc::SIGSTOP);
    // Polled: no event says that another process's stop has taken effect.
    common::wait_state(pid, 'T');
}

/// The exit event of `pid` within `limit`, well under the helper's 60 s grace; `None` (the
/// process SIGKILLed, so that nothing is left) when it did not end in time.
fn ended_within(run: &mut Run, pid: i32, limit: Duration) -> Option<Value> {
    let got = run.try_until(limit, |e| {
        kind(e) == "exit" && e["identity"]["pid"].as_i64() == Some(pid.into())
    });
    match got {
        Some(i) => Some(run.seen[i].clone()),
        None => {
            // SAFETY: kill(2) with plain integers; the pid is a process this test started
            // (through foster) and has not seen reaped.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            None
        }
    }
}

/// A helper stopped with SIGSTOP still ends on its stop signal within its grace, for `ctl
/// stop`, `ctl restart` and the shutdown: foster follows the stop signal with SIGCONT, so the
/// helper is not left to wait out a 60 s grace and its SIGKILL.
#[test]
fn a_stopped_helper_is_continued_after_its_stop_signal() {
    let d = Dir::new("truth", "sigcont");
    let cfg = "[[helper]]\nname = \"s\"\ncommand = [\"sleep\", \"1000\"]\nstop_grace = \"60s\"\n";
    let mut run = Run::start_uncontained(&d, cfg);
    let soon = Duration::from_secs(10);
    for (attempt, how) in [(1, "stop"), (2, "restart"), (3, "shutdown")] {
        let i = run.launch("s", attempt);
        let pid = pid_of(&run.seen[i].clone());
        stop_and_wait(pid);
        if how == "shutdown" {
            send(run.child.id() as i32, libc::SIGTERM);
        } else {
            let out = run.ctl(&[how, "s"]);
            assert!(out.status.success(), "{out:?}");
        }
        let exit = ended_within(&mut run, pid, soon)
            .unwrap_or_else(|| panic!("{how}: a stopped helper waited out its grace"));
        assert_eq!(exit["status"]["how"], "signaled", "{how}: {exit}");
        assert_eq!(exit["status"]["signal"], "SIGTERM", "{how}: {exit}");
        if how == "stop" {
            let out = run.ctl(&["start", "s"]);
            assert!(out.status.success(), "{out:?}");
        }
    }
    assert_eq!(run.finish(), 0, "an orderly shutdown");
    assert!(
        !run.seen.iter().any(|e| e["signal"] == "SIGKILL"),
        "no grace ran out: {:#?}",
        run.seen
    );
}

/// `foster run --no-socket --events-log FIFO CONFIG`, its standard error kept: its events and
/// its stderr text once it has ended (the exit status too).
fn run_to_end(d: &Dir, cfg: &str) -> (Vec<Value>, String, i32) {
    let (child, mut ev) = FosterRun::new()
        .arg("--no-socket")
        .stdout(std::process::Stdio::null())
        .logged(&d.fifo("events"), &d.file("run.toml", cfg));
    let mut child = Guard(child);
    let all = ev.rest().to_vec();
    let status = common::supervised::wait_child(&mut child.0);
    let mut err = String::new();
    std::io::Read::read_to_string(child.0.stderr.as_mut().unwrap(), &mut err).unwrap();
    (all, err, status.code().unwrap_or(-1))
}

/// A launch that fails before its exec is one `launch_failed` event, after nothing that says
/// it launched: with the process's identity (in the caller's namespace), the step, the path
/// and the errno, and the status its process ended with; the line on standard error says the
/// same, with the same pid.
fn assert_one_launch_failed(tag: &str, cfg: &str, words: &[&str]) {
    let d = Dir::new("truth", tag);
    let (all, err, code) = run_to_end(&d, cfg);
    assert_eq!(code, 3, "a helper failed: {err}");
    let of_y: Vec<&Value> = all
        .iter()
        .filter(|e| e["helper"] == "y" && kind(e) != "state")
        .collect();
    let kinds: Vec<&str> = of_y.iter().map(|e| kind(e)).collect();
    assert_eq!(kinds, ["launch_failed"], "{all:#?}");
    let f = of_y[0];
    let error = f["error"].as_str().unwrap();
    for w in words {
        assert!(error.contains(w), "{w:?} in {error:?}");
    }
    assert!(
        !error.contains("helper "),
        "no pid of another namespace: {error:?}"
    );
    assert_eq!(f["status"]["code"], 125, "{f}");
    let start = all.iter().find(|e| kind(e) == "start").unwrap();
    assert!(
        f["identity"]["start_time"].as_u64() >= start["supervisor"]["start_time"].as_u64(),
        "{f}"
    );
    let line = format!("y[{}] could not be launched: {error}", pid_of(f));
    assert!(err.contains(&line), "{line:?} in {err}");
    assert!(
        !err.contains("launched\n"),
        "nothing says it launched: {err}"
    );
}

#[test]
fn a_launch_failing_in_its_chdir_is_one_event_naming_the_path() {
    assert_one_launch_failed(
        "chdir",
        "[[helper]]\nname = \"y\"\ncommand = [\"true\"]\ncwd = \"/nonexistent\"\n",
        &["chdir to /nonexistent failed", "ENOENT"],
    );
}

#[test]
fn a_launch_as_a_user_who_cannot_enter_its_cwd_names_it() {
    if common::skip::unless_root("needs root, to launch a helper as nobody") {
        return;
    }
    assert_one_launch_failed(
        "chdir-user",
        "[[helper]]\nname = \"y\"\ncommand = [\"true\"]\nuser = \"nobody\"\ncwd = \"/root\"\n",
        &["chdir to /root failed", "EACCES"],
    );
}

/// A sample of `foster ctl metrics`: the value of the line `NAME{helper="HELPER"}`.
fn sample(run: &Run, name: &str, helper: &str) -> Option<f64> {
    let out = run.ctl(&["metrics"]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let prefix = format!("{name}{{helper=\"{helper}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map(|v| v.parse().unwrap())
}

/// A helper whose program ran once (exit 0) and is then deleted: every launch after fails
/// (127) until it is given up on. Its last exit is the failed launch's, not the run's before,
/// and only the one process that ran counts as a launch.
fn gone_after_one_run(d: &Dir) -> Run {
    use std::os::unix::fs::PermissionsExt;
    let go = d.fifo("go");
    let prog = d.file(
        "prog",
        &format!("#!/bin/sh\nread x < {}\nexit 0\n", go.display()),
    );
    std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
    let cfg = format!(
        "[[helper]]\nname = \"w\"\ncommand = [\"{}\"]\nrestart = \"always\"\n\
         backoff = {{ initial = \"10ms\", max = \"20ms\", limit = 2 }}\n\
         [[helper]]\nname = \"keep\"\ncommand = [\"sleep\", \"1000\"]\n",
        prog.display()
    );
    let mut run = Run::start_uncontained(d, &cfg);
    run.launch("w", 1);
    std::fs::remove_file(&prog).unwrap();
    std::fs::write(&go, "go\n").unwrap();
    run.state("w", "gave_up");
    run
}

#[test]
fn a_failed_launch_is_the_last_exit_and_no_launch() {
    let d = Dir::new("truth", "stale");
    let mut run = gone_after_one_run(&d);
    let w = &run.helpers()["w"];
    assert_eq!(w["last_exit"]["code"], 127, "{w:#}");
    assert_eq!(w["launches"], 1, "only the process that ran: {w:#}");
    assert_eq!(
        sample(&run, "foster_helper_last_exit_code", "w"),
        Some(127.0)
    );
    assert_eq!(sample(&run, "foster_helper_launches_total", "w"), Some(1.0));
    let out = run.ctl(&["status"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("launched 1x"), "{text}");
    run.stop();
}

#[test]
fn start_and_restart_that_cannot_launch_exit_non_zero_with_a_sentence() {
    let d = Dir::new("truth", "startfail");
    let mut run = gone_after_one_run(&d);
    for (n, request) in [(2, "start"), (3, "restart")] {
        let out = run.ctl(&[request, "w"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{request}: {out:?}");
        assert!(
            err.contains("helper \"w\" could not be launched: exec failed: ENOENT"),
            "{request}: {err}"
        );
        assert!(!err.contains("it is backoff"), "{request}: {err}");
        assert!(!err.contains("was gave up"), "{request}: {err}");
        // It is given up on again, once more for each request.
        let gave_up = |e: &Value| kind(e) == "give_up" && e["helper"] == "w";
        while run.seen.iter().filter(|e| gave_up(e)).count() < n {
            run.next("another give_up of w");
        }
    }
    run.stop();
}

/// `ctl restart` is counted by `foster_helper_requested_restarts_total`, not by
/// `foster_helper_restarts_total` (the restart rules', what a crash-loop alert watches).
#[test]
fn an_operator_restart_is_not_a_restart_of_the_rules() {
    let d = Dir::new("truth", "requested");
    let cfg = "[[helper]]\nname = \"s\"\ncommand = [\"sleep\", \"1000\"]\n";
    let mut run = Run::start_uncontained(&d, cfg);
    run.launch("s", 1);
    let out = run.ctl(&["restart", "s"]);
    assert!(out.status.success(), "{out:?}");
    run.launch("s", 2);
    assert_eq!(sample(&run, "foster_helper_restarts_total", "s"), Some(0.0));
    assert_eq!(
        sample(&run, "foster_helper_requested_restarts_total", "s"),
        Some(1.0)
    );
    run.stop();
}

/// `foster run --no-contain CONFIG` with XDG_RUNTIME_DIR=`runtime` (its default socket there),
/// once its loop answers a `status` (its notify sockets are bound by then).
fn run_in(runtime: &std::path::Path, cfg: &std::path::Path) -> Guard {
    let mut run = FosterRun::new()
        .arg("--no-contain")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    run.command()
        .env("XDG_RUNTIME_DIR", runtime)
        .env_remove("FOSTER_SOCKET");
    let mut child = run.spawn(cfg);
    let stem = cfg.file_stem().unwrap().to_str().unwrap();
    let sock = runtime.join(format!("foster/{stem}.sock"));
    drop(common::supervised::connect(&sock, &mut child));
    let out = common::supervised::ctl_command(&sock)
        .arg("status")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    Guard(child)
}

/// A private runtime directory (mode 0700) in `d`, for XDG_RUNTIME_DIR.
fn runtime_dir(d: &Dir) -> std::path::PathBuf {
    use std::os::unix::fs::DirBuilderExt;
    let runtime = d.path("runtime");
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&runtime)
        .unwrap();
    runtime
}

/// The notify sockets in `dir`, by name.
fn notify_sockets(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("notify-"))
        .collect();
    v.sort();
    v
}

/// A SIGKILLed `foster run` leaves its notify socket; the next one started there removes it
/// (its pid is gone and nothing receives on it), and keeps its own.
#[test]
fn a_killed_supervisors_notify_socket_is_removed_by_the_next() {
    let d = Dir::new("truth", "notify");
    let runtime = runtime_dir(&d);
    let cfg = d.file(
        "n.toml",
        "[[helper]]\nname = \"n\"\ncommand = [\"sleep\", \"1000\"]\nready = { notify = true }\n",
    );
    let mut first = run_in(&runtime, &cfg);
    let dir = runtime.join("foster");
    let left = notify_sockets(&dir);
    assert_eq!(left.len(), 1, "{left:?}");
    first.0.kill().unwrap();
    first.0.wait().unwrap();
    assert_eq!(notify_sockets(&dir), left, "SIGKILL left it");
    let second = run_in(&runtime, &cfg);
    let now = notify_sockets(&dir);
    assert_eq!(now.len(), 1, "only the new supervisor's: {now:?}");
    assert_ne!(now, left, "the old one was removed: {now:?}");
    drop(second);
    assert_eq!(notify_sockets(&dir), Vec::<String>::new());
}

/// A second `foster run` of the same configuration file (reached by another path) is refused,
/// naming the running one's pid and socket; `--allow-second-instance` runs it all the same.
/// The same file name in another directory is another configuration.
#[test]
fn the_same_config_started_twice_is_refused_naming_the_first() {
    let d = Dir::new("truth", "twice");
    let runtime = runtime_dir(&d);
    let cfg = d.file(
        "web.toml",
        "[[helper]]\nname = \"s\"\ncommand = [\"sleep\", \"1000\"]\n",
    );
    let first = run_in(&runtime, &cfg);
    let again = d.0.join(".").join("web.toml");
    let in_runtime = || {
        let mut run = FosterRun::new().args(["--no-contain", "--no-socket"]);
        run.command().env("XDG_RUNTIME_DIR", &runtime);
        run
    };
    let second = in_runtime()
        .stdout(std::process::Stdio::null())
        .spawn(&again);
    // Refused at once; a second copy that ran would be ended here, and fail the test.
    let mut second = Guard(second);
    let st = common::child::wait_within(&mut second.0, common::LIMIT);
    let mut err = String::new();
    if st.is_some() {
        std::io::Read::read_to_string(second.0.stderr.as_mut().unwrap(), &mut err).unwrap();
    }
    assert_eq!(st.and_then(|s| s.code()), Some(1), "{err}");
    let sock = runtime.join("foster/web.sock");
    assert!(
        err.contains(&format!("pid {}", first.0.id()))
            && err.contains(&sock.display().to_string())
            && err.contains("--allow-second-instance"),
        "{err}"
    );
    // The same name elsewhere runs.
    let other = Dir::new("truth", "twice-other");
    let cfg2 = other.file(
        "web.toml",
        "[[helper]]\nname = \"s\"\ncommand = [\"true\"]\n",
    );
    let out = in_runtime().output(&cfg2);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    // Allowed: it runs (its helper completes, and it ends with status 0).
    std::fs::write(&cfg, "[[helper]]\nname = \"s\"\ncommand = [\"true\"]\n").unwrap();
    let out = in_runtime().arg("--allow-second-instance").output(&again);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    drop(first);
}

/// `foster exec` whose `FOSTER_PARENT` names a live process (the outer shell) with another start
/// time, run in a subshell: the gate says what it saw (that pid is another process; this
/// process's parent is the subshell), not that the expected parent died and this process was
/// reparented, which did not happen.
#[test]
fn the_gate_says_what_it_observed_of_a_live_pid_with_another_start_time() {
    let o = std::process::Command::new("sh")
        .arg("-c")
        .arg(r#"FOSTER_PARENT=$$:1 sh -c '"$F" exec -- /bin/true; echo "status $?"'"#)
        .env("F", FOSTER)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("status 120"),
        "{o:?}"
    );
    assert!(
        err.contains("is another process now") && err.contains("is not this process's parent"),
        "{err}"
    );
    assert!(
        !err.contains("has died") && !err.contains("reparented"),
        "{err}"
    );
}

/// `foster run --check` says what a bad `backoff.limit`, an out-of-range port and a command
/// written as one string are in words, not Rust types or false reasons.
#[test]
fn config_mistakes_are_said_in_words() {
    let d = Dir::new("truth", "words");
    let cfg = d.file(
        "w.toml",
        "[[helper]]\nname = \"a\"\ncommand = [\"true\"]\nbackoff = { limit = -1 }\n\
         [[helper]]\nname = \"b\"\ncommand = \"no-such-program-x -m http.server\"\n\
         ready = { tcp = \"localhost:99999\" }\n",
    );
    let (code, err) = common::check::check(&cfg);
    assert_eq!(code, Some(2), "{err}");
    assert!(!err.contains("expected u32"), "{err}");
    assert!(
        err.contains("limit = -1: expected how many restarts"),
        "{err}"
    );
    assert!(err.contains("port 99999 is out of range"), "{err}");
    assert!(!err.contains("has no port number"), "{err}");
    assert!(
        err.contains(r#"command = ["no-such-program-x", "-m", "http.server"]"#),
        "{err}"
    );
}

/// The words of a running supervisor: `ctl signal` of the supervisor names `foster ctl
/// shutdown`; a helper SIGSTOPped is said to be stopped beside its state; a probe that ran out
/// of time is said with its configured timeout; a helper whose process ended shows no status
/// text of that process.
#[test]
fn a_running_supervisors_words_are_true() {
    let d = Dir::new("truth", "runwords");
    let go = d.fifo("go");
    let cfg = format!(
        "[[helper]]\nname = \"db\"\ncommand = [\"sh\", \"-c\", \
         \"\\\"$FOSTER_EXE\\\" notify --ready --status up; read x < {}\"]\n\
         restart = \"never\"\nready = {{ notify = true }}\n\
         [[helper]]\nname = \"web\"\ncommand = [\"sleep\", \"1000\"]\n\
         health = {{ exec = [\"sleep\", \"1000\"], interval = \"20ms\", timeout = \"200ms\" }}\n",
        go.display()
    );
    let mut run = Run::start_uncontained(&d, &cfg);
    run.state("db", "ready");
    assert_eq!(run.helpers()["db"]["status_text"], "up");
    let sup = run.child.id().to_string();
    let out = run.ctl(&["signal", &sup, "TERM"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("use `foster ctl shutdown`"), "{err}");
    // The probe's time runs out: its configured 200ms, not the instant the timer fired.
    let failed = run.wait_for("web's health check failing", |e| {
        kind(e) == "check_failed" && e["helper"] == "web"
    });
    assert_eq!(
        failed["reason"], "the probe took longer than 200ms and was killed",
        "{failed}"
    );
    let web = run.launch("web", 1);
    let web = pid_of(&run.seen[web].clone());
    stop_and_wait(web);
    let out = run.ctl(&["status"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("web"))
        .unwrap();
    assert!(line.contains("its process is stopped"), "{text}");
    send(web, libc::SIGCONT);
    std::fs::write(&go, "go\n").unwrap();
    run.state("db", "completed");
    assert!(
        run.helpers()["db"]["status_text"].is_null(),
        "{:#}",
        run.helpers()["db"]
    );
    run.stop();
}

/// `ctl logs` of a helper whose output is not captured (`output = "null"`) says so and exits 1,
/// rather than printing nothing with exit status 0.
#[test]
fn logs_of_a_helper_whose_output_is_not_captured_say_so() {
    let d = Dir::new("truth", "nulllogs");
    let cfg = "[[helper]]\nname = \"q\"\ncommand = [\"sh\", \"-c\", \"echo hidden; exec sleep 1000\"]\n\
               output = \"null\"\n";
    let mut run = Run::start_uncontained(&d, cfg);
    run.launch("q", 1);
    let out = run.ctl(&["logs", "q"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(err.contains("its output is not captured"), "{err}");
    run.stop();
}
