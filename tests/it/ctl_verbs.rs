//! `foster ctl`'s operator verbs end to end, the real binary against a real `foster run`:
//! several helpers and `all`, `status HELPER`, `pid`, `wait`, `history`, `reload --dry-run`,
//! `logs` of several helpers with `--since` and `-t`, the socket found from `--config` or
//! the current directory, and a helper a reload removed out of `start`'s and `stop`'s reach. Ordering comes from the supervisor's events and from FIFOs the
//! helpers wait on; deadlines are only safety nets.

use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::supervised::{Guard, Run, ctl_command, wait_child};
use crate::common::{Dir, LIMIT};

const FOSTER: &str = env!("CARGO_BIN_EXE_foster");

const ABC: &str = r#"
[[helper]]
name = "a"
command = ["sleep", "6001"]

[[helper]]
name = "b"
command = ["sleep", "6002"]

[[helper]]
name = "c"
command = ["sleep", "6003"]
"#;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn ok(out: &Output) -> String {
    assert!(out.status.success(), "{out:?}");
    text(&out.stdout)
}

fn failed(out: &Output) -> String {
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    text(&out.stderr)
}

fn started(d: &Dir, config: &str) -> Run {
    let mut run = Run::start(d, config, &[]);
    for h in ["a", "b", "c"] {
        if config.contains(&format!("name = \"{h}\"")) {
            run.state(h, "running");
        }
    }
    run
}

#[test]
fn several_helpers_and_all() {
    let d = Dir::new("ctlverbs", "several");
    let mut run = started(&d, ABC);
    let out = ok(&run.ctl(&["restart", "a", "b"]));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(lines[0].contains("helper \"a\"") && lines[1].contains("helper \"b\""));
    run.launch("a", 2);
    run.launch("b", 2);
    // `all`, dependents first: the reverse of the configuration's order.
    let out = ok(&run.ctl(&["stop", "all"]));
    let order: Vec<&str> = out
        .lines()
        .map(|l| l.split('"').nth(1).unwrap_or(""))
        .collect();
    assert_eq!(order, ["c", "b", "a"], "{out}");
    for h in ["a", "b", "c"] {
        run.state(h, "stopped");
    }
    // One helper that is not there: the others are done, the exit status says it.
    let err = failed(&run.ctl(&["start", "a", "nope"]));
    assert!(err.contains("\"nope\"") && err.contains("1 of 2"), "{err}");
    run.state("a", "running");
    let helpers = run.helpers();
    assert_eq!(helpers["a"]["state"], "running");
    assert_eq!(helpers["b"]["state"], "stopped");
    // The status of some helpers: theirs alone.
    let out = ok(&run.ctl(&["status", "a", "b"]));
    assert!(out.contains("\n  a ") && out.contains("\n  b "), "{out}");
    assert!(
        !out.contains("\n  c ") && !out.contains("sleep 6003"),
        "{out}"
    );
    assert!(out.contains("sleep 6001"), "{out}");
    let v: Value = serde_json::from_str(&ok(&run.ctl(&["--json", "status", "b"]))).unwrap();
    assert_eq!(v["status"]["helpers"].as_array().unwrap().len(), 1);
    let err = failed(&run.ctl(&["status", "zz"]));
    assert!(
        err.contains("no helper named \"zz\"") && err.contains("a, b, c"),
        "{err}"
    );
}

#[test]
fn pid_version_and_uptime() {
    let d = Dir::new("ctlverbs", "pid");
    let mut run = started(&d, ABC);
    let out = ok(&run.ctl(&["pid", "b"]));
    let pid: i32 = out
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("not a pid: {out}"));
    // A pid of this namespace, whether the supervisor is contained or not.
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    assert_eq!(cmdline, b"sleep\x006002\x00");
    let v: Value = serde_json::from_str(&ok(&run.ctl(&["--json", "pid", "b"]))).unwrap();
    assert_eq!(v["pid"], pid);
    let status = ok(&run.ctl(&["status"]));
    assert!(
        status.contains(&format!("version foster {}", env!("CARGO_PKG_VERSION"))),
        "{status}"
    );
    let line = status.lines().find(|l| l.starts_with("  b ")).unwrap();
    assert!(line.contains("  up ") && line.ends_with('s'), "{line}");
    ok(&run.ctl(&["stop", "b"]));
    run.state("b", "stopped");
    let err = failed(&run.ctl(&["pid", "b"]));
    assert!(
        err.contains("helper \"b\" has no process: it is stopped"),
        "{err}"
    );
    failed(&run.ctl(&["pid", "nope"]));
}

fn spawn_ctl(socket: &Path, args: &[&str]) -> std::process::Child {
    ctl_command(socket)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn finished(mut child: std::process::Child) -> Output {
    wait_child(&mut child);
    child.wait_with_output().unwrap()
}

#[test]
fn wait_for_ready_stopped_and_a_timeout() {
    let d = Dir::new("ctlverbs", "wait");
    let fifo = d.fifo("go");
    let config = format!(
        r#"
[[helper]]
name = "w"
command = ["sh", "-c", "read x < {}; echo up; exec sleep 6004"]
ready = {{ log = "up", timeout = "60s" }}
"#,
        fifo.display()
    );
    let mut run = Run::start(&d, &config, &[]);
    run.state("w", "starting");
    // Not ready until the FIFO says so: a timeout, exit status 1.
    let t = Instant::now();
    let err = failed(&run.ctl(&["wait", "w", "--timeout", "300ms"]));
    assert!(
        t.elapsed() >= Duration::from_millis(300),
        "{:?}",
        t.elapsed()
    );
    assert!(
        err.contains("timed out waiting for 1 helper to be ready: \"w\" is starting"),
        "{err}"
    );
    let waiter = spawn_ctl(&run.socket, &["wait", "w", "--for", "ready"]);
    let started = ok(&run.ctl(&["wait", "w", "--for", "started", "--timeout", "30s"]));
    assert_eq!(started, "helper \"w\" is starting\n");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&fifo)
        .unwrap()
        .write_all(b"go\n")
        .unwrap();
    let out = finished(waiter);
    assert_eq!(ok(&out), "helper \"w\" is ready\n");
    let waiter = spawn_ctl(&run.socket, &["--json", "wait", "all", "--for", "stopped"]);
    ok(&run.ctl(&["stop", "w"]));
    let v: Value = serde_json::from_str(&ok(&finished(waiter))).unwrap();
    assert_eq!(v["helper"], "w");
    assert_eq!(v["state"], "stopped");
    // Stopped by request, it cannot get ready by itself: said at once.
    let err = failed(&run.ctl(&["wait", "w"]));
    assert!(err.contains("will not be ready: it is stopped"), "{err}");
}

#[test]
fn history_lists_launches_and_ends() {
    let d = Dir::new("ctlverbs", "history");
    let mut run = started(&d, ABC);
    ok(&run.ctl(&["restart", "a"]));
    run.launch("a", 2);
    let out = ok(&run.ctl(&["history", "a"]));
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].contains("launched"), "{out}");
    assert!(out.contains("sent SIGTERM to a["), "{out}");
    assert!(out.contains("killed by SIGTERM"), "{out}");
    assert!(
        lines.last().unwrap().contains("launched (attempt 2)"),
        "{out}"
    );
    assert!(!out.contains("b["), "only a's: {out}");
    let v: Value = serde_json::from_str(&ok(&run.ctl(&["--json", "history", "a"]))).unwrap();
    let events = v["history"]["events"].as_array().unwrap();
    let launches: Vec<&Value> = events.iter().filter(|e| e["event"] == "launch").collect();
    assert_eq!(launches.len(), 2, "{v}");
    // The pid of the latest launch is this namespace's, as `pid` says it.
    let pid = ok(&run.ctl(&["pid", "a"]));
    assert_eq!(launches[1]["identity"]["pid"].to_string(), pid.trim());
    let err = failed(&run.ctl(&["history", "nope"]));
    assert!(err.contains("(no_such_helper)"), "{err}");
}

/// A reload that removes a helper drops its history, the stop that follows included: the
/// helper a later reload adds under the same name starts a history of its own.
#[test]
fn a_helper_added_again_starts_a_new_history() {
    let d = Dir::new("ctlverbs", "history-reload");
    let mut run = started(&d, ABC);
    ok(&run.ctl(&["restart", "a"]));
    run.launch("a", 2);
    let without_a = ABC.replace(
        "[[helper]]\nname = \"a\"\ncommand = [\"sleep\", \"6001\"]\n",
        "",
    );
    std::fs::write(d.path("run.toml"), &without_a).unwrap();
    assert!(ok(&run.ctl(&["reload"])).contains("stopped: a"));
    run.state("a", "stopped");
    std::fs::write(d.path("run.toml"), ABC).unwrap();
    assert!(ok(&run.ctl(&["reload"])).contains("started: a"));
    run.state("a", "running");
    let v: Value = serde_json::from_str(&ok(&run.ctl(&["--json", "history", "a"]))).unwrap();
    let kinds: Vec<&str> = v["history"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(kinds, ["launch"], "{v}");
}

#[test]
fn reload_dry_run_changes_nothing() {
    let d = Dir::new("ctlverbs", "dryrun");
    let mut run = started(&d, ABC);
    let before = run.helpers();
    let changed = ABC.replace("6002", "6012").replace(
        "[[helper]]\nname = \"a\"\ncommand = [\"sleep\", \"6001\"]\n",
        "[[helper]]\nname = \"d\"\ncommand = [\"sleep\", \"6005\"]\n",
    );
    std::fs::write(d.path("run.toml"), changed).unwrap();
    let out = ok(&run.ctl(&["reload", "--dry-run"]));
    assert_eq!(
        out,
        "the configuration is valid; nothing was changed; a reload would:\n  start: d\n  \
         stop: a\n  restart: b\n  leave as they are: c\n"
    );
    let v: Value = serde_json::from_str(&ok(&run.ctl(&["--json", "reload", "--dry-run"]))).unwrap();
    assert_eq!(v["reload_plan"]["started"], serde_json::json!(["d"]));
    let after = run.helpers();
    assert!(!after.contains_key("d"), "{after:?}");
    for h in ["a", "b", "c"] {
        assert_eq!(
            before[h]["identity"], after[h]["identity"],
            "{h} was touched"
        );
    }
    std::fs::write(d.path("run.toml"), "[[helper]]\nname = 7\n").unwrap();
    let err = failed(&run.ctl(&["reload", "--dry-run"]));
    assert!(err.contains("(invalid_config)"), "{err}");
    // The reload itself still applies.
    std::fs::write(d.path("run.toml"), ABC.replace("6002", "6012")).unwrap();
    assert!(ok(&run.ctl(&["reload"])).contains("restarted: b"));
    run.launch("b", 2);
}

#[test]
fn logs_of_several_helpers_since_a_time_with_timestamps() {
    let d = Dir::new("ctlverbs", "logs");
    let config = r#"
[[helper]]
name = "a"
command = ["sh", "-c", "for i in 1 2 3 4 5 6 7 8 9 10 11 12; do echo a$i; done; exec sleep 6001"]

[[helper]]
name = "bb"
command = ["sh", "-c", "echo b1; exec sleep 6002"]

[[helper]]
name = "c"
command = ["sh", "-c", "echo c1; exec sleep 6003"]
"#;
    let run = Run::start(&d, config, &[]);
    // Each helper's lines kept (each poll is an answer of the supervisor's).
    let t = Instant::now();
    while !["a12", "b1", "c1"]
        .iter()
        .all(|l| text(&run.ctl(&["logs", "-n", "100"]).stdout).contains(l))
    {
        assert!(t.elapsed() < LIMIT, "the lines were never kept");
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = ok(&run.ctl(&["logs", "c", "a", "-n", "100"]));
    assert!(out.contains("c | c1") && out.contains("a | a12"), "{out}");
    assert!(!out.contains("b1"), "{out}");
    let out = ok(&run.ctl(&["logs", "bb", "c", "-t"]));
    let times = regex::Regex::new(r"^\d\d:\d\d:\d\d\.\d{3}  (bb \| b1|c  \| c1)$").unwrap();
    assert_eq!(out.lines().count(), 2, "{out}");
    assert!(out.lines().all(|l| times.is_match(l)), "{out}");
    // --since: every line since then, not the last 10.
    assert_eq!(ok(&run.ctl(&["logs", "a"])).lines().count(), 10);
    assert_eq!(
        ok(&run.ctl(&["logs", "a", "--since", "1h"]))
            .lines()
            .count(),
        12
    );
    assert_eq!(
        ok(&run.ctl(&["logs", "a", "--since", "1h", "-n", "3"]))
            .lines()
            .count(),
        3
    );
    // Read before the `ctl` that saw them ran: older than a millisecond now.
    assert_eq!(ok(&run.ctl(&["logs", "--since", "1ms"])), "");
    let out = run.ctl(&["logs", "--since", "soon"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    // The last line kept of the two, whichever helper's was read last.
    let json = ok(&run.ctl(&["--json", "logs", "bb", "c", "-n", "1"]));
    assert_eq!(json.lines().count(), 1, "{json}");
    let v: Value = serde_json::from_str(json.trim()).unwrap();
    assert!(v["helper"] == "c" || v["helper"] == "bb", "{v}");
}

/// A `foster run` of `config` whose socket is at its default path under `runtime`.
fn run_in(runtime: &Path, config: &Path) -> Guard {
    let child = Command::new(FOSTER)
        .arg("run")
        .arg(config)
        .env("XDG_RUNTIME_DIR", runtime)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let socket = runtime
        .join("foster")
        .join(config.file_stem().unwrap())
        .with_extension("sock");
    let t = Instant::now();
    while !ctl_command(&socket)
        .arg("status")
        .output()
        .unwrap()
        .status
        .success()
    {
        assert!(t.elapsed() < LIMIT, "{} never answered", socket.display());
        std::thread::sleep(Duration::from_millis(20));
    }
    Guard(child)
}

fn ctl_in(runtime: &Path, cwd: &Path, args: &[&str]) -> Output {
    Command::new(FOSTER)
        .arg("ctl")
        .args(args)
        .current_dir(cwd)
        .env("XDG_RUNTIME_DIR", runtime)
        .env_remove("FOSTER_SOCKET")
        .output()
        .unwrap()
}

#[test]
fn the_socket_of_the_configuration_here() {
    let d = Dir::new("ctlverbs", "config");
    let runtime = d.path("runtime");
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&runtime)
        .unwrap();
    for dir in ["one", "two", "none"] {
        std::fs::create_dir(d.path(dir)).unwrap();
    }
    let one = d.file("one/one.toml", &ABC.replace("600", "700"));
    let two = d.file("two/two.toml", &ABC.replace("600", "800"));
    let _one = run_in(&runtime, &one);
    let _two = run_in(&runtime, &two);
    let pid_of = |cwd: &str, args: &[&str]| {
        let out = ctl_in(&runtime, &d.path(cwd), args);
        let pid = ok(&out).trim().to_string();
        std::fs::read(format!("/proc/{pid}/cmdline")).unwrap()
    };
    assert_eq!(pid_of("one", &["pid", "b"]), b"sleep\x007002\x00");
    assert_eq!(pid_of("two", &["pid", "b"]), b"sleep\x008002\x00");
    let two_arg = two.to_str().unwrap();
    assert_eq!(
        pid_of("one", &["--config", two_arg, "pid", "b"]),
        b"sleep\x008002\x00"
    );
    // Elsewhere, two sockets: named, and one asked for.
    let err = failed(&ctl_in(&runtime, &d.path("none"), &["status"]));
    assert!(err.contains("does not guess among the 2 sockets"), "{err}");
    assert!(
        err.contains("one.sock") && err.contains("two.sock"),
        "{err}"
    );
    let err = failed(&ctl_in(
        &runtime,
        &d.path("none"),
        &["--config", "nowhere.toml", "status"],
    ));
    assert!(err.contains("--config nowhere.toml: No such file"), "{err}");
}

/// The only supervisor listening is not taken for the one meant: from a directory without its
/// configuration file, `foster ctl` (and `top --attach`) refuses, names the socket and says how
/// to choose; from the configuration's directory it talks to it. Only `*.toml` files are
/// looked up: a configuration of another name is found with `--config`.
#[test]
fn the_only_socket_is_not_a_guess() {
    let d = Dir::new("ctlverbs", "onlyone");
    let runtime = d.path("runtime");
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&runtime)
        .unwrap();
    for dir in ["one", "none", "other"] {
        std::fs::create_dir(d.path(dir)).unwrap();
    }
    let one = d.file("one/one.toml", ABC);
    let _one = run_in(&runtime, &one);
    let pid = ok(&ctl_in(&runtime, &d.path("one"), &["pid", "a"]));
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", pid.trim())).unwrap();
    assert_eq!(cmdline, b"sleep\x006001\x00");
    let err = failed(&ctl_in(&runtime, &d.path("none"), &["status"]));
    let sock = runtime.join("foster/one.sock");
    assert!(err.contains("among the 1 socket in"), "{err}");
    assert!(err.contains(sock.to_str().unwrap()), "{err}");
    assert!(err.contains("--socket PATH or --config FILE"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    let top = Command::new(FOSTER)
        .args(["top", "--attach"])
        .current_dir(d.path("none"))
        .env("XDG_RUNTIME_DIR", &runtime)
        .env_remove("FOSTER_SOCKET")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = failed(&top);
    assert!(
        err.contains("--attach SOCKET") && err.contains("one.sock"),
        "{err}"
    );
    // A configuration not named *.toml is not looked up; --config finds it.
    let conf = d.file("other/svc.conf", &ABC.replace("600", "900"));
    let _other = run_in(&runtime, &conf);
    let err = failed(&ctl_in(&runtime, &d.path("other"), &["status"]));
    assert!(err.contains("among the 2 sockets"), "{err}");
    let pid = ok(&ctl_in(
        &runtime,
        &d.path("other"),
        &["--config", "svc.conf", "pid", "b"],
    ));
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", pid.trim())).unwrap();
    assert_eq!(cmdline, b"sleep\x009002\x00");
}

/// A helper a reload removed is no helper of `start` or `stop` any more, even while its index
/// is kept: both answer that there is no such helper, and `start` does not launch it again.
#[test]
fn start_and_stop_do_not_reach_a_helper_a_reload_removed() {
    let d = Dir::new("ctl_verbs", "removed");
    let api = "[[helper]]\nname = \"api\"\ncommand = [\"sleep\", \"6201\"]\n";
    let old = "[[helper]]\nname = \"old\"\ncommand = [\"sleep\", \"6202\"]\n";
    let mut run = Run::start(&d, &format!("{api}\n{old}"), &[]);
    run.state("old", "running");
    d.file("run.toml", api);
    ok(&run.ctl(&["reload"]));
    run.state("old", "stopped");
    for verb in ["stop", "start"] {
        let out = run.ctl(&[verb, "old"]);
        let err = text(&out.stderr);
        assert!(!out.status.success(), "{verb} old: {out:?}");
        assert!(err.contains("no helper named \"old\""), "{verb} old: {err}");
    }
    let st = run.stop();
    assert!(st.success(), "{st}");
    run.drain();
    let launches = run
        .seen
        .iter()
        .filter(|e| e["event"] == "launch" && e["helper"] == "old")
        .count();
    assert_eq!(launches, 1, "old was launched again after its removal");
}
