//! Reload (`foster ctl reload`, `foster run --reload-signal HUP`), end to end on real
//! processes: the configuration file is rewritten under a running supervisor and read again;
//! what was added starts, what was removed stops (its whole tree), what changed is restarted
//! with its new definition, and what did not change keeps its very process (pid and start
//! time compared). A file with mistakes is refused with every mistake listed, and nothing
//! changes. The observable is the supervisor's own record (its event stream, `ctl status
//! --json`) and /proc; deadlines are only safety nets.

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use serde_json::Value;

use crate::common;
use common::supervised::{Run, ctl_command};
use common::{Dir, LIMIT, send};

/// A process: (pid, start time).
type Proc = (i32, u64);

/// A helper's running process, from `ctl status --json`: (pid, start time).
fn running(h: &serde_json::Map<String, Value>, name: &str) -> (i32, u64) {
    let id = &h[name]["identity"];
    assert!(id.is_object(), "helper {name} has no process: {h:#?}");
    (
        id["pid"].as_i64().unwrap() as i32,
        id["start_time"].as_u64().unwrap(),
    )
}

/// Whether the process `(pid, start time)` still exists (a pid reused since is not it).
fn alive((pid, start): (i32, u64)) -> bool {
    common::process(pid).is_some_and(|p| p.identity.start_time == start)
}

/// A process's command line, as /proc has it.
fn cmdline(pid: i32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .unwrap_or_default()
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// Waits until the process `(pid, start time)` has ended (it is reaped by the supervisor).
fn gone((pid, start_time): (i32, u64), what: &str) {
    let id = foster::process::identity::Identity { pid, start_time };
    assert!(
        common::wait_gone(id, LIMIT),
        "{what} ({pid}) is still there"
    );
}

/// a (a tree: a shell and its sleeping child, whose pid it writes to the FIFO `child`), b, c.
fn abc(d: &Dir) -> String {
    let fifo = d.fifo("child");
    format!(
        r#"
[[helper]]
name = "a"
command = ["sh", "-c", "sleep 600 & echo $! > {}; wait"]
stop_grace = "2s"
"#,
        fifo.display()
    ) + ABC
}

const ABC: &str = r#"
[[helper]]
name = "b"
command = ["sleep", "600"]

[[helper]]
name = "c"
command = ["sleep", "600"]
"#;

/// `a` removed, `b`'s command changed, `d` added, `c` kept.
const BCD: &str = r#"
[[helper]]
name = "b"
command = ["sleep", "601"]

[[helper]]
name = "c"
command = ["sleep", "600"]

[[helper]]
name = "d"
command = ["sh", "-c", "echo hello from d; exec sleep 602"]
"#;

/// Two mistakes, in two helpers.
const BROKEN: &str = r#"
[[helper]]
name = "c"
command = ["sleep", "600"]
stop_grace = "fast"

[[helper]]
name = "d"
command = ["sleep", "602"]
restart = "sometimes"
"#;

/// The processes of a, b and c once all three run, and a's child.
fn start_abc(d: &Dir, run: &mut Run) -> (Proc, Proc, Proc, Proc) {
    // a's shell has forked its sleep once it writes its pid (the read waits for the writer).
    let line = common::fifo::line(&d.path("child"));
    assert!(line.trim().parse::<i32>().is_ok(), "{line:?}");
    for h in ["a", "b", "c"] {
        run.state(h, "running");
    }
    let h = run.helpers();
    let (a, b, c) = (running(&h, "a"), running(&h, "b"), running(&h, "c"));
    // The pid it wrote is its PID namespace's; /proc here names it by the test's.
    let kids = common::children_of(a.0);
    assert_eq!(kids.len(), 1, "a's children: {kids:?}");
    let child = (
        kids[0],
        common::process(kids[0]).unwrap().identity.start_time,
    );
    assert_eq!(cmdline(child.0), ["sleep", "600"]);
    (a, b, c, child)
}

/// The reload's changes, from a `reload` event or a `reloaded` reply: each list as names.
fn lists(v: &Value) -> [Vec<String>; 4] {
    ["started", "stopped", "restarted", "unchanged"].map(|k| {
        v[k].as_array()
            .unwrap_or_else(|| panic!("no {k} in {v:#}"))
            .iter()
            .map(|n| n.as_str().unwrap().to_string())
            .collect()
    })
}

/// Adds, removes, restarts only what changed (pids compared), and refuses a broken file
/// without touching anything.
#[test]
fn ctl_reload_applies_only_what_changed_and_refuses_a_broken_file() {
    let d = Dir::new("reload", "ctl");
    let mut run = Run::start(&d, &abc(&d), &[]);
    let (a, b, c, a_child) = start_abc(&d, &mut run);

    d.file("run.toml", BCD);
    let out = run.ctl(&["--json", "reload"]);
    assert!(out.status.success(), "{out:?}");
    let reply: Value = serde_json::from_slice(&out.stdout).unwrap();
    let [started, stopped, restarted, unchanged] = lists(&reply["reloaded"]);
    assert_eq!(started, ["d"], "{reply:#}");
    assert_eq!(stopped, ["a"], "{reply:#}");
    assert_eq!(restarted, ["b"], "{reply:#}");
    assert_eq!(unchanged, ["c"], "{reply:#}");

    // a: stopped (its stop signal; its child by the orphan policy or the grace), whole tree.
    let stopping = run.until("a stopping", |e| {
        e["event"] == "state" && e["helper"] == "a" && e["state"] == "stopping"
    });
    assert_eq!(
        run.seen[stopping]["detail"],
        "removed from the configuration"
    );
    run.state("a", "stopped");
    gone(a, "a's shell");
    gone(a_child, "a's child");
    // b: a new process with the new command; d: launched.
    run.launch("b", 2);
    run.launch("d", 1);
    let ev = run.until("reload event", |e| e["event"] == "reload");
    assert_eq!(run.seen[ev]["by"], "control socket");
    assert_eq!(
        lists(&run.seen[ev]),
        [started, stopped, restarted, unchanged]
    );
    run.state("d", "running");
    let h = run.helpers();
    assert!(!h.contains_key("a"), "a is still listed: {h:#?}");
    let b2 = running(&h, "b");
    assert_ne!(b2, b, "b was not restarted");
    gone(b, "b's first process");
    assert_eq!(cmdline(b2.0), ["sleep", "601"]);
    let d1 = running(&h, "d");
    // d's output is captured as any helper's: `ctl logs` shows it.
    let mut logs = ctl_command(&run.socket)
        .args(["logs", "-f", "d"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(logs.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    logs.kill().unwrap();
    logs.wait().unwrap();
    assert!(
        line.contains("d") && line.contains("hello from d"),
        "{line:?}"
    );
    assert_eq!(running(&h, "c"), c, "c was touched");
    assert!(alive(c));

    // A broken file: refused, both mistakes listed, nothing touched.
    d.file("run.toml", BROKEN);
    let out = run.ctl(&["reload"]);
    assert!(!out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("2 mistakes"), "{err}");
    assert!(
        err.contains("stop_grace") && err.contains("\"fast\""),
        "{err}"
    );
    assert!(
        err.contains("restart") && err.contains("sometimes"),
        "{err}"
    );
    assert!(err.contains("invalid_config"), "{err}");
    let refused = run.until("reload_refused", |e| e["event"] == "reload_refused");
    assert!(
        run.seen[refused]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("fast") && r.contains("sometimes")),
        "{:#}",
        run.seen[refused]
    );
    let h = run.helpers();
    assert_eq!(
        h.keys().collect::<Vec<_>>(),
        ["b", "c", "d"],
        "the helpers changed"
    );
    assert_eq!(running(&h, "b"), b2);
    assert_eq!(running(&h, "c"), c);
    assert_eq!(running(&h, "d"), d1);
    assert!(alive(b2) && alive(c) && alive(d1));

    // The same file again, as text: nothing to do, every helper unchanged.
    d.file("run.toml", BCD);
    let out = run.ctl(&["reload"]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("unchanged: b, c, d"), "{text}");
    assert_eq!(running(&run.helpers(), "b"), b2);

    let st = run.stop();
    assert!(st.success(), "{st}");
    run.drain();
    for p in [b2, c, d1] {
        assert!(!alive(p), "{} outlived its supervisor", p.0);
    }
}

/// `--reload-signal HUP`: SIGHUP reloads as `ctl reload` does, and the supervisor goes on;
/// without it, SIGHUP is still a closed terminal: the orderly shutdown.
#[test]
fn sighup_reloads_only_with_reload_signal() {
    let d = Dir::new("reload", "hup");
    let mut run = Run::start(&d, &abc(&d), &["--reload-signal", "HUP"]);
    let (a, b, c, a_child) = start_abc(&d, &mut run);
    d.file("run.toml", BCD);
    send(run.child.id() as i32, libc::SIGHUP);
    let ev = run.until("reload event", |e| e["event"] == "reload");
    assert_eq!(run.seen[ev]["by"], "SIGHUP");
    let [started, stopped, restarted, unchanged] = lists(&run.seen[ev]);
    assert_eq!(
        (started, stopped, restarted, unchanged),
        (
            vec!["d".to_string()],
            vec!["a".to_string()],
            vec!["b".to_string()],
            vec!["c".to_string()]
        )
    );
    run.state("a", "stopped");
    gone(a, "a's shell");
    gone(a_child, "a's child");
    run.launch("b", 2);
    run.state("d", "running");
    let h = run.helpers();
    assert_ne!(running(&h, "b"), b);
    assert_eq!(running(&h, "c"), c, "c was touched");
    assert!(
        !run.seen.iter().any(|e| e["event"] == "shutdown"),
        "SIGHUP shut the supervisor down: {:#?}",
        run.seen
    );
    assert!(run.child.try_wait().unwrap().is_none(), "foster run ended");
    // A broken file on SIGHUP: refused, nothing touched, the supervisor goes on.
    d.file("run.toml", BROKEN);
    send(run.child.id() as i32, libc::SIGHUP);
    run.until("reload_refused", |e| e["event"] == "reload_refused");
    assert_eq!(running(&run.helpers(), "c"), c);
    let st = run.stop();
    assert!(st.success(), "{st}");
    drop(run);

    // Without the option, the same signal shuts down (nothing is read again).
    let d = Dir::new("reload", "nohup");
    let mut run = Run::start(&d, &abc(&d), &[]);
    let (a, b, c, _) = start_abc(&d, &mut run);
    d.file("run.toml", BCD);
    send(run.child.id() as i32, libc::SIGHUP);
    let st = run.wait();
    assert!(st.success(), "{st}");
    run.drain();
    let sd = run.until("shutdown", |e| e["event"] == "shutdown");
    assert_eq!(run.seen[sd]["signal"], "SIGHUP");
    assert!(!run.seen.iter().any(|e| e["event"] == "reload"));
    for p in [a, b, c] {
        assert!(!alive(p), "{} outlived its supervisor", p.0);
    }
}

/// A reload during the shutdown is refused, and says why.
#[test]
fn reload_during_shutdown_is_refused() {
    let d = Dir::new("reload", "shutdown");
    // The helper ignores its stop signal: the shutdown lasts its grace.
    let armed = d.fifo("armed");
    let mut run = Run::start(
        &d,
        &format!(
            r#"
[[helper]]
name = "stubborn"
command = ["sh", "-c", "trap '' TERM; echo armed > {}; exec sleep 600"]
stop_grace = "2s"
"#,
            armed.display()
        ),
        &[],
    );
    // Its stop signal is ignored from here on (the read waits for the writer).
    assert_eq!(common::fifo::line(&armed), "armed");
    run.state("stubborn", "running");
    let out = run.ctl(&["shutdown"]);
    assert!(out.status.success(), "{out:?}");
    run.state("stubborn", "stopping");
    let out = run.ctl(&["reload"]);
    assert!(!out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("shutting down"), "{err}");
    assert!(err.contains("refused"), "{err}");
    run.wait();
}

/// A reload says the new file's warnings, as `foster run` does at its start: in the answer of
/// `ctl reload` (and of `--dry-run`), and in the reload's event.
#[test]
fn a_reload_says_the_files_warnings() {
    let d = Dir::new("reload", "warnings");
    let helper = "[[helper]]\nname = \"api\"\ncommand = [\"sleep\", \"600\"]\n";
    let mut run = Run::start(&d, helper, &[]);
    run.state("api", "running");
    // Legal, likely not meant: a health check whose timeout is not shorter than its interval.
    let warned =
        format!("{helper}health = {{ exec = [\"true\"], interval = \"1s\", timeout = \"5s\" }}\n");
    d.file("run.toml", &warned);
    let out = run.ctl(&["reload", "--dry-run"]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("restart: api"), "{text}");
    assert!(
        text.contains("warning: ") && text.contains("not shorter than interval"),
        "{text}"
    );
    let out = run.ctl(&["--json", "reload"]);
    assert!(out.status.success(), "{out:?}");
    let reply: Value = serde_json::from_slice(&out.stdout).unwrap();
    let warnings = reply["reloaded"]["warnings"].as_array().cloned();
    let warnings = warnings.unwrap_or_else(|| panic!("no warnings: {reply:#}"));
    assert_eq!(warnings.len(), 1, "{reply:#}");
    assert!(
        warnings[0].as_str().unwrap().contains("run.toml:4:"),
        "the warning names its place: {reply:#}"
    );
    let i = run.until("the reload's event", |e| e["event"] == "reload");
    assert_eq!(run.seen[i]["warnings"], reply["reloaded"]["warnings"]);
    assert_eq!(run.stop().code(), Some(0));
}
