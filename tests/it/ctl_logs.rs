//! `foster ctl logs` end to end on real processes: a supervisor whose helpers print known
//! lines and then wait on FIFOs, and `foster ctl logs` run against it as a user runs it. The
//! kept lines, the follow, every helper named, an unknown helper, hostile bytes, and a follower
//! that lags. Ordering comes from FIFOs the helpers wait on and from followers' own output (a
//! follower that has printed a line has it); deadlines are only safety nets.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Output, Stdio};
use std::sync::mpsc;
use std::time::Instant;

use serde_json::Value;

use crate::common;
use common::Dir;
use common::LIMIT;
use common::supervised::{Plain, ctl_command, terminate};

/// A `foster run` under test: stopped (SIGTERM, its orderly shutdown ends its tree) and reaped
/// when the test ends, passed or failed; a failed test if it does not end on the SIGTERM.
struct Run(Plain);

impl Run {
    fn start(d: &Dir, config: &str) -> Run {
        Run(Plain::start(
            &d.file("run.toml", config),
            &d.path("run.sock"),
        ))
    }

    fn ctl(&self, args: &[&str]) -> Output {
        ctl_command(&self.0.socket)
            .args(args)
            .env_remove("NO_COLOR")
            .output()
            .unwrap()
    }

    /// `foster ctl logs ARGS...` running, its standard output read line by line.
    fn follow(&self, args: &[&str]) -> Follow {
        self.follow_gated(args, None)
    }

    /// [`Run::follow`], its lines after the first read only as `gate` lets them.
    fn follow_gated(&self, args: &[&str], gate: Option<mpsc::Receiver<()>>) -> Follow {
        let mut child = ctl_command(&self.0.socket)
            .arg("logs")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        Follow {
            child,
            lines: Lines::read(out, gate),
        }
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        let id = self.0.child.id();
        if !terminate(&mut self.0.child) && !std::thread::panicking() {
            panic!("foster run {id} did not end on SIGTERM");
        }
    }
}

/// Lines of a stream, read on a thread; with a gate, only the first line is read until the
/// gate opens.
struct Lines {
    rx: mpsc::Receiver<String>,
}

impl Lines {
    fn read(out: ChildStdout, gate: Option<mpsc::Receiver<()>>) -> Lines {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(out);
            let mut first = true;
            loop {
                if !first
                    && let Some(g) = &gate
                    && g.recv().is_err()
                {
                    return;
                }
                first = false;
                let mut l = Vec::new();
                match r.read_until(b'\n', &mut l) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {
                        assert!(!l.contains(&0x1b), "a raw ESC reached the output: {l:?}");
                        let l = String::from_utf8(l).expect("the output is UTF-8");
                        if tx.send(l.trim_end_matches('\n').to_string()).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        Lines { rx }
    }

    fn next(&self, what: &str) -> String {
        self.rx
            .recv_timeout(LIMIT)
            .unwrap_or_else(|_| panic!("no line {what} within {LIMIT:?}"))
    }

    /// Lines until one is `last` (included).
    fn until(&self, last: &str) -> Vec<String> {
        let mut v = Vec::new();
        loop {
            let l = self.next(&format!("up to {last:?} (after {v:?})"));
            let done = l == last;
            v.push(l);
            if done {
                return v;
            }
        }
    }
}

/// A running `foster ctl logs -f`: killed and reaped when dropped.
struct Follow {
    child: Child,
    lines: Lines,
}

impl Drop for Follow {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Opens `fifo` for writing (it blocks until the helper reads it) and writes a line.
fn release(fifo: &Path) {
    let mut f = std::fs::OpenOptions::new().write(true).open(fifo).unwrap();
    f.write_all(b"go\n").unwrap();
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A helper `H` printing `n1` ... `n30`, then waiting on the FIFO `go`, printing `after`, and
/// waiting on `end`.
fn numbered(d: &Dir) -> (String, PathBuf) {
    let go = d.fifo("go");
    let end = d.fifo("end");
    let config = format!(
        r#"
[[helper]]
name = "H"
command = ["sh", "-c", 'i=1; while [ $i -le 30 ]; do echo n$i; i=$((i+1)); done; read x < "$1"; echo after; read y < "$2"', "sh", "{}", "{}"]
"#,
        go.display(),
        end.display()
    );
    (config, go)
}

/// `-n N` gives exactly the last N kept lines, 10 without `-n`; `-f` shows the last lines
/// asked for, then a line printed after it started.
#[test]
fn logs_gives_the_last_lines_and_follows_new_ones() {
    let d = Dir::new("logs", "tail");
    let (config, go) = numbered(&d);
    let run = Run::start(&d, &config);
    // Barrier: a follower has printed n30, so foster has read and kept every line.
    let all = run.follow(&["H", "-f", "-n", "100"]);
    let seen = all.lines.until("H | n30");
    assert_eq!(seen.len(), 30, "{seen:?}");

    let out = run.ctl(&["logs", "H", "-n", "5"]);
    let (o, e) = text(&out);
    assert!(out.status.success(), "{e}");
    let want: Vec<String> = (26..=30).map(|i| format!("H | n{i}")).collect();
    assert_eq!(o.lines().collect::<Vec<_>>(), want);
    // Ten by default, as tail.
    let (o, _) = text(&run.ctl(&["logs", "H"]));
    let want: Vec<String> = (21..=30).map(|i| format!("H | n{i}")).collect();
    assert_eq!(o.lines().collect::<Vec<_>>(), want);
    let (o, _) = text(&run.ctl(&["logs", "H", "-n", "0"]));
    assert_eq!(o, "");

    // A follower started now: the three last lines, then one printed after them.
    let f = run.follow(&["H", "-f", "-n", "3"]);
    for i in 28..=30 {
        assert_eq!(f.lines.next("of the backlog"), format!("H | n{i}"));
    }
    release(&go);
    assert_eq!(
        f.lines.next("printed after the follow started"),
        "H | after"
    );
    assert_eq!(all.lines.next("for the first follower too"), "H | after");
}

/// `ring = { lines = 7 }`: the helper's kept lines are its last 7, whatever `-n` asks.
#[test]
fn logs_gives_at_most_the_lines_the_ring_keeps() {
    let d = Dir::new("logs", "ring");
    let (config, go) = numbered(&d);
    let run = Run::start(&d, &format!("{config}ring = {{ lines = 7 }}\n"));
    // Barrier: a follower has printed n30, so foster has read and kept every line.
    let all = run.follow(&["H", "-f", "-n", "100"]);
    let seen = all.lines.until("H | n30");
    assert!(seen.len() <= 30, "{seen:?}");
    let out = run.ctl(&["logs", "H", "-n", "100"]);
    let (o, e) = text(&out);
    assert!(out.status.success(), "{e}");
    let want: Vec<String> = (24..=30).map(|i| format!("H | n{i}")).collect();
    assert_eq!(o.lines().collect::<Vec<_>>(), want);
    release(&go);
    assert_eq!(all.lines.next("printed after"), "H | after");
    let (o, _) = text(&run.ctl(&["logs", "H", "-n", "100"]));
    let want: Vec<String> = (25..=30)
        .map(|i| format!("H | n{i}"))
        .chain(["H | after".to_string()])
        .collect();
    assert_eq!(o.lines().collect::<Vec<_>>(), want);
}

/// Without a helper, every helper's lines, each named as `foster run` names them (padded,
/// `!` for standard error), in the order read; `--json` gives the relay's JSON objects.
#[test]
fn logs_without_a_helper_names_every_line() {
    let d = Dir::new("logs", "all");
    let end = d.fifo("end");
    let config = format!(
        r#"
[[helper]]
name = "a"
command = ["sh", "-c", 'echo a-out; echo a-err >&2; read x < "$1"', "sh", "{0}"]
[[helper]]
name = "bbb"
command = ["sh", "-c", 'echo bbb-out; echo bbb-err >&2; read x < "$1"', "sh", "{0}"]
"#,
        end.display()
    );
    let run = Run::start(&d, &config);
    let f = run.follow(&["-f", "-n", "100"]);
    let mut seen: Vec<String> = (0..4).map(|_| f.lines.next("of the four")).collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            "a   ! a-err",
            "a   | a-out",
            "bbb ! bbb-err",
            "bbb | bbb-out"
        ]
    );

    let out = run.ctl(&["logs"]);
    let (o, e) = text(&out);
    assert!(out.status.success(), "{e}");
    let mut got: Vec<&str> = o.lines().collect();
    got.sort();
    assert_eq!(got, seen);
    // Each helper's standard output in its own order; the standard error of a helper is
    // another pipe, read in its own turn.
    let out = run.ctl(&["--json", "logs"]);
    let (o, e) = text(&out);
    assert!(out.status.success(), "{e}");
    let mut objs: Vec<(String, String, String)> = o
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            assert!(v["ts_ms"].as_u64().is_some_and(|t| t > 0), "{v}");
            assert!(
                v.get("pid").is_none() && v.get("helper_pid").is_some(),
                "{v}"
            );
            (
                v["helper"].as_str().unwrap().to_string(),
                v["stream"].as_str().unwrap().to_string(),
                v["text"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    objs.sort();
    let want: Vec<(String, String, String)> = [
        ("a", "stderr", "a-err"),
        ("a", "stdout", "a-out"),
        ("bbb", "stderr", "bbb-err"),
        ("bbb", "stdout", "bbb-out"),
    ]
    .iter()
    .map(|(h, s, t)| (h.to_string(), s.to_string(), t.to_string()))
    .collect();
    assert_eq!(objs, want);
}

/// An unknown helper is an error naming it and listing the helpers; nothing on standard
/// output, exit status 1.
#[test]
fn logs_of_an_unknown_helper_is_a_clear_error() {
    let d = Dir::new("logs", "unknown");
    let (config, _go) = numbered(&d);
    let run = Run::start(&d, &config);
    let out = run.ctl(&["logs", "nope\x1b[31m"]);
    let (o, e) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{e}");
    assert_eq!(o, "");
    assert!(
        e.contains(r#"no helper named "nope\e[31m"; helpers: H (no_such_helper)"#),
        "{e}"
    );
    assert!(!e.contains('\x1b'), "{e:?}");
}

/// A line with terminal escapes and bytes that are not UTF-8 reaches the terminal escaped, and
/// the JSON keeps its exact bytes.
#[test]
fn hostile_bytes_arrive_escaped() {
    let d = Dir::new("logs", "hostile");
    let end = d.fifo("end");
    let config = format!(
        r#"
[[helper]]
name = "evil"
command = ["sh", "-c", 'printf "x\033]0;owned\007y\033[31mred\377\n"; printf "\033[2J\n" >&2; echo done; read x < "$1"', "sh", "{}"]
"#,
        end.display()
    );
    let run = Run::start(&d, &config);
    // Barrier: a follower saw the last line of standard output; the standard error line is
    // read before it or after: wait for both.
    let f = run.follow(&["evil", "-f", "-n", "100"]);
    let mut seen: Vec<String> = (0..3).map(|_| f.lines.next("of the three")).collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            r"evil ! \e[2J",
            "evil | done",
            r"evil | x\e]0;owned\x07y\e[31mred\xff"
        ]
    );
    let out = run.ctl(&["logs", "evil"]);
    assert!(!out.stdout.contains(&0x1b), "{:?}", out.stdout);
    let out = run.ctl(&["--json", "logs", "evil"]);
    assert!(!out.stdout.contains(&0x1b), "{:?}", out.stdout);
    let (o, _) = text(&out);
    let v: Value = o
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|v| v["text_escaped"].is_string())
        .expect("the line that is not UTF-8");
    assert_eq!(v["text"], "x\x1b]0;owned\x07y\x1b[31mred\u{fffd}");
    assert_eq!(v["text_escaped"], r"x\e]0;owned\x07y\e[31mred\xff");
}

/// A follower that does not read while a helper floods is told how many lines it missed: the
/// lines it got and the counts of those missed add up to exactly what the helper printed.
#[test]
fn a_lagging_follower_is_told_how_many_lines_it_missed() {
    const N: usize = 30_000;
    let d = Dir::new("logs", "lag");
    let go = d.fifo("go");
    let end = d.fifo("end");
    let config = format!(
        r#"
[[helper]]
name = "L"
command = ["sh", "-c", 'echo ready; read x < "$1"; i=0; while [ $i -lt {N} ]; do echo "flood $i ........................................................"; i=$((i+1)); done; echo end; read y < "$2"', "sh", "{}", "{}"]
"#,
        go.display(),
        end.display()
    );
    let run = Run::start(&d, &config);
    // The slow follower: its first line read (so it follows from there), then nothing until
    // the flood is over.
    let (gate, gated) = mpsc::channel();
    let slow = run.follow_gated(&["L", "-f", "-n", "1"], Some(gated));
    assert_eq!(slow.lines.next("of the backlog"), "L | ready");
    // A follower that reads at once, to know when the flood is over.
    let quick = run.follow(&["L", "-f", "-n", "0"]);
    release(&go);
    let t = Instant::now();
    while quick.lines.next("of the flood") != "L | end" {
        assert!(t.elapsed() < LIMIT * 4, "the flood never ended");
    }
    // Now the slow one reads: what it had in its buffers, the count of what it missed, the
    // lines the helper's ring still kept, up to the end.
    let mut got = 0usize;
    let mut missed = 0usize;
    let mut last = None;
    loop {
        gate.send(()).unwrap();
        let l = slow.lines.next("of the slow follower");
        if l == "L | end" {
            break;
        }
        if let Some(rest) = l.strip_prefix("… ") {
            let n: usize = rest.split(' ').next().unwrap().parse().unwrap();
            assert!(
                rest.ends_with("missed (this client did not read fast enough)"),
                "{l}"
            );
            missed += n;
            continue;
        }
        let k: usize = l
            .strip_prefix("L | flood ")
            .and_then(|r| r.split(' ').next())
            .and_then(|k| k.parse().ok())
            .unwrap_or_else(|| panic!("not a line of the flood: {l}"));
        assert!(
            last.is_none_or(|p| k > p),
            "{k} after {last:?}: out of order"
        );
        last = Some(k);
        got += 1;
    }
    assert!(missed > 0, "the follower never lagged (got {got})");
    assert_eq!(got + missed, N, "got {got}, told of {missed} missed");
}

/// A follower of two helpers that does not read while one of them and a third helper flood is
/// told only of its helpers' lines it missed (the supervisor filters them and counts them): the
/// lines it got and the counts add up to exactly what its flooding helper printed.
#[test]
fn a_lagging_follower_of_some_helpers_is_told_only_of_theirs() {
    const N: usize = 20_000;
    let d = Dir::new("logs", "lagsome");
    let (go_l, go_f, end) = (d.fifo("go-l"), d.fifo("go-f"), d.fifo("end"));
    let script = format!(
        "echo ready; read x < \"$1\"; i=0; while [ $i -lt {N} ]; do \
         echo \"flood $i ..................................................\"; \
         i=$((i+1)); done; echo end; read y < \"$2\""
    );
    let flood = |name: &str, go: &Path| {
        format!(
            "[[helper]]\nname = \"{name}\"\ncommand = [\"sh\", \"-c\", '{script}', \"sh\", \"{}\", \
             \"{}\"]\n",
            go.display(),
            end.display()
        )
    };
    let quiet = format!(
        "[[helper]]\nname = \"Q\"\ncommand = [\"sh\", \"-c\", 'read x < \"$1\"', \"sh\", \"{}\"]\n",
        end.display()
    );
    let run = Run::start(&d, &(flood("L", &go_l) + &flood("F", &go_f) + &quiet));
    let (gate, gated) = mpsc::channel();
    let slow = run.follow_gated(&["L", "Q", "-f", "-n", "1"], Some(gated));
    assert_eq!(slow.lines.next("of the backlog"), "L | ready");
    let quick = run.follow(&["-f", "-n", "0"]);
    release(&go_f);
    release(&go_l);
    let mut ended = 0;
    let t = Instant::now();
    while ended < 2 {
        let l = quick.lines.next("of the floods");
        ended += usize::from(l == "L | end" || l == "F | end");
        assert!(t.elapsed() < LIMIT * 4, "the floods never ended");
    }
    let (mut got, mut missed) = (0usize, 0usize);
    loop {
        gate.send(()).unwrap();
        let l = slow.lines.next("of the slow follower");
        if l == "L | end" {
            break;
        }
        if let Some(rest) = l.strip_prefix("… ") {
            missed += rest.split(' ').next().unwrap().parse::<usize>().unwrap();
            continue;
        }
        assert!(l.starts_with("L | flood "), "not a line of L's flood: {l}");
        got += 1;
    }
    assert!(missed > 0, "the follower never lagged (got {got})");
    assert_eq!(got + missed, N, "got {got}, told of {missed} missed");
}

/// A launch that has ended keeps its pid in `logs --json`: that of its `launch` event as
/// `history` gives it, the caller's, even though the supervisor is in a PID namespace of its
/// own and the process is gone; never 0.
#[test]
fn an_ended_launch_keeps_its_pid_in_logs() {
    if common::skip::unless_root("a contained supervisor needs root") {
        return;
    }
    let d = Dir::new("logs", "endedpid");
    let go = d.fifo("go");
    // It prints once its launch is recorded (a line read before carries no pid yet).
    let config = format!(
        "[[helper]]\nname = \"once\"\n\
         command = [\"sh\", \"-c\", 'read x < \"$1\"; echo hello', \"sh\", \"{}\"]\n\
         restart = \"never\"\n\
         [[helper]]\nname = \"keeper\"\ncommand = [\"sleep\", \"6100\"]\n",
        go.display()
    );
    let mut run = common::supervised::Run::start(&d, &config, &[]);
    run.launch("once", 1);
    release(&go);
    run.until("the exit of once", |e| {
        e["event"] == "exit" && e["helper"] == "once"
    });
    let history = run.ctl(&["--json", "history", "once"]);
    let v: Value = serde_json::from_slice(&history.stdout).unwrap();
    let launch = v["history"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["event"] == "launch")
        .cloned()
        .unwrap_or_else(|| panic!("no launch: {v}"));
    let pid = launch["identity"]["pid"].as_i64().unwrap();
    assert!(pid > 1, "{launch}");
    let out = run.ctl(&["--json", "logs", "once"]);
    let (o, _) = text(&out);
    let line: Value = serde_json::from_str(o.trim()).unwrap();
    assert_eq!(line["text"], "hello", "{o}");
    assert_eq!(line["helper_pid"].as_i64(), Some(pid), "{o}");
    assert!(run.stop().success());
}
