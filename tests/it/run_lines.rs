//! `foster run`'s lines for people on standard error, end to end on real processes: at the
//! default verbosity one line per event that matters, exactly as documented (pids taken from the
//! events log of the same run, the JSON kept there); none with `-q`; the detail with `-v`, in
//! the same words and never as JSON.

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::common;
use common::Dir;
use common::LIMIT;
use common::events::kind;
use common::foster_run::FosterRun;

/// A helper that exits with 3 twice and is given up on, and one whose child (foster's
/// grandchild) it leaves behind: the orphan ignores SIGTERM, its orphan policy, so it is
/// SIGKILLed when its grace runs out.
const CONFIG: &str = r#"
[[helper]]
name = "crasher"
command = ["/bin/sh", "-c", "exit 3"]
restart = "on-failure"
backoff = { initial = "50ms", limit = 1 }

[[helper]]
name = "orphaner"
command = ["/bin/sh", "-c", "trap '' TERM; sleep 30 & exit 0"]

[[helper.generation]]

[[helper.generation]]
signal = "TERM"
grace = "300ms"
"#;

/// What one `foster run` left: its exit status, its standard error, its events.
struct Run {
    status: i32,
    stderr: String,
    events: Vec<Value>,
}

/// Runs `foster [flags] run --no-socket --no-contain --events-log FILE CONFIG` to its end.
fn run(d: &Dir, tag: &str, flags: &[&str]) -> Run {
    let cfg = d.file(&format!("{tag}.toml"), CONFIG);
    let log = d.path(&format!("{tag}.jsonl"));
    let child = Command::new(env!("CARGO_BIN_EXE_foster"))
        .args(flags)
        .args(["run", "--no-socket", "--no-contain", "--events-log"])
        .arg(&log)
        .arg(&cfg)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = common::child::output_within(child, "foster run");
    Run {
        status: out.status.code().unwrap_or(-1),
        stderr: String::from_utf8(out.stderr).unwrap(),
        events: read_events(&log),
    }
}

fn read_events(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The events of `kind` (and of `helper`, when given), in order.
fn of<'a>(r: &'a Run, what: &str, helper: Option<&str>) -> Vec<&'a Value> {
    r.events
        .iter()
        .filter(|v| kind(v) == what && helper.is_none_or(|h| v["helper"] == h))
        .collect()
}

fn pid_in(v: &Value, field: &str) -> i64 {
    v[field]["pid"].as_i64().unwrap()
}

/// The line the documentation gives for one event of this run's log (`next`: the event after
/// it), at the default verbosity or with the detail of `-v`; None when it has none at that
/// verbosity, or when the line before it already said it (a restart or give-up joined to the
/// helper's exit).
fn line_for(v: &Value, next: Option<&Value>, verbose: bool) -> Option<String> {
    let helper = v["helper"].as_str().unwrap_or("");
    let who = |field: &str| {
        let pid = pid_in(v, field);
        let kin = match v["generation"].as_u64() {
            Some(1) => return format!("{helper}[{pid}]"),
            Some(2) => "child",
            Some(3) => "grandchild",
            other => panic!("unexpected generation {other:?}: {v}"),
        };
        format!("{helper}'s {kin} {pid}")
    };
    let line = match kind(v) {
        "start" => format!("supervisor {} started", pid_in(v, "supervisor")),
        "launch" => match v["attempt"].as_u64().unwrap() {
            1 => format!("{helper}[{}] launched", pid_in(v, "identity")),
            n => format!("{helper}[{}] launched (attempt {n})", pid_in(v, "identity")),
        },
        "exit" => {
            let how = if v["status"]["how"] == "exited" {
                format!("exited with code {}", v["status"]["code"])
            } else {
                format!("was killed by {}", v["status"]["signal"].as_str().unwrap())
            };
            if v["generation"] != 1 {
                return verbose.then(|| format!("foster: {} {how}", who("identity")));
            }
            let then = match next {
                Some(n) if kind(n) == "restart" && n["helper"] == helper => {
                    assert_eq!(n["attempt"], 1, "{n}");
                    format!("; restarting in {}ms (1st in a row)", n["delay_ms"])
                }
                Some(n) if kind(n) == "give_up" && n["helper"] == helper => {
                    assert_eq!(n["restarts"], 1, "{n}");
                    "; giving up after 1 restart in a row".to_string()
                }
                _ => String::new(),
            };
            format!("{} {how}{then}", who("identity"))
        }
        // Said with the exit before it.
        "restart" | "give_up" => return None,
        // A helper's state: its launch, exit and restart tell of the others (detail).
        "state" => {
            let state = v["state"].as_str().unwrap().replace('_', " ");
            let shown = matches!(state.as_str(), "waiting" | "ready" | "unhealthy");
            if !shown && !verbose {
                return None;
            }
            match v["detail"].as_str() {
                Some(d) => format!("{helper}: {state} {d}"),
                None => format!("{helper}: {state}"),
            }
        }
        "reparented" => {
            assert_eq!(v["classification"], "expected", "{v}");
            if !verbose {
                return None;
            }
            // Its former parent, when foster saw it before it ended.
            let from = match v["from"]["pid"].as_i64() {
                Some(p) => format!("lost its parent {p} and was adopted by"),
                None => "was orphaned and adopted by".to_string(),
            };
            format!(
                "{} {from} {}, as expected",
                who("identity"),
                pid_in(v, "to")
            )
        }
        "signal" => match v["reason"].as_str().unwrap() {
            "orphan_policy" => format!(
                "sent {} to {} (orphan policy; SIGKILL after {}ms)",
                v["signal"].as_str().unwrap(),
                who("target"),
                v["grace_ms"]
            ),
            "grace_expired" => format!(
                "sent SIGKILL to {} (still running at the end of its grace)",
                who("target")
            ),
            other => panic!("unexpected signal reason {other}: {v}"),
        },
        "shutdown" => {
            assert!(v["signal"].is_null(), "{v}");
            "shutting down: no helper is left running".to_string()
        }
        "stopped" => {
            assert_eq!(v["exit_status"], 3, "{v}");
            "supervisor stopped with exit status 3 (a helper failed or was given up on)".to_string()
        }
        other => panic!("unexpected event {other}: {v}"),
    };
    Some(format!("foster: {line}"))
}

/// The lines standard error must hold for this run, in the order of its events log.
fn expected(r: &Run, verbose: bool) -> Vec<String> {
    let ev = &r.events;
    (0..ev.len())
        .filter_map(|i| line_for(&ev[i], ev.get(i + 1), verbose))
        .collect()
}

/// The run did what the configuration says: two launches and a give-up of the crasher, one
/// orphan given its policy, then SIGKILLed.
fn check_run(r: &Run) {
    assert_eq!(r.status, 3, "{}", r.stderr);
    let n = |what, helper| of(r, what, Some(helper)).len();
    assert_eq!(n("launch", "crasher"), 2, "{:#?}", r.events);
    assert_eq!(n("give_up", "crasher"), 1, "{:#?}", r.events);
    assert_eq!(n("reparented", "orphaner"), 1, "{:#?}", r.events);
    let reasons: Vec<&str> = of(r, "signal", Some("orphaner"))
        .iter()
        .map(|v| v["reason"].as_str().unwrap())
        .collect();
    assert_eq!(
        reasons,
        ["orphan_policy", "grace_expired"],
        "{:#?}",
        r.events
    );
    assert_eq!(kind(r.events.last().unwrap()), "stopped");
}

#[test]
fn the_default_lines_say_each_event_that_matters_in_order_and_quiet_silences_them() {
    let d = Dir::new("lines", "default");
    let r = run(&d, "default", &[]);
    check_run(&r);
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(lines, expected(&r, false), "standard error:\n{}", r.stderr);
    // The exit of the crasher and the decision on it make one line.
    let crasher = of(&r, "launch", Some("crasher"))[0];
    let joined = format!(
        "foster: crasher[{}] exited with code 3; restarting in 50ms (1st in a row)",
        pid_in(crasher, "identity")
    );
    assert!(lines.contains(&joined.as_str()), "{}", r.stderr);
    // The JSON is in the events log, never on standard error.
    assert!(!r.stderr.contains('{'), "{}", r.stderr);

    // -q: the same run, the same events log, not one line.
    let q = run(&d, "quiet", &["-q"]);
    check_run(&q);
    assert_eq!(q.stderr, "", "-q: no line");
    // An error still goes out.
    let out = Command::new(env!("CARGO_BIN_EXE_foster"))
        .args(["-q", "run", "--no-socket"])
        .arg(d.path("missing.toml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.starts_with("foster: error: "), "{err}");
}

#[test]
fn verbose_adds_the_detail_in_the_same_words() {
    let d = Dir::new("lines", "verbose");
    let r = run(&d, "verbose", &["-v"]);
    check_run(&r);
    let lines: Vec<&str> = r.stderr.lines().collect();
    // Every line is foster's, in words: no JSON blob.
    for l in &lines {
        assert!(l.starts_with("foster: "), "{l:?}:\n{}", r.stderr);
        assert!(!l.contains('{') && !l.contains("\"event\""), "{l:?}");
    }
    // The events' lines, the detail among them (the orphan's adoption and end), in order;
    // tracing's own lines at info may come between them.
    let want = expected(&r, true);
    // The detail: the orphan's adoption and end, and the helpers' states (their launches,
    // exits and restarts say them at the default verbosity).
    let states = of(&r, "state", None).len();
    assert_eq!(
        want.len(),
        expected(&r, false).len() + 2 + states,
        "{want:#?}"
    );
    let got: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| want.iter().any(|w| w == l))
        .collect();
    assert_eq!(got, want, "standard error:\n{}", r.stderr);
}

/// A standard error nobody reads (a pipe already full) does not stall the supervision: the
/// lines wait for a writer thread of their own while foster goes on supervising, and they all
/// come out, in order, once the pipe is read (foster waits a little for that before it exits).
#[test]
fn a_standard_error_nobody_reads_does_not_stall_the_supervision() {
    use std::io::Read;
    let d = Dir::new("lines", "full");
    let cfg = d.file(
        "c.toml",
        "[[helper]]\nname = \"crasher\"\ncommand = [\"/bin/sh\", \"-c\", \"exit 3\"]\n\
         restart = \"on-failure\"\nbackoff = { initial = \"50ms\", limit = 1 }\n",
    );
    // A pipe filled to the brim before foster gets its write end as standard error.
    // Close-on-exec: other tests of this process fork too, and must not hold its write end.
    let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
    let flags = nix::fcntl::fcntl(&w, nix::fcntl::FcntlArg::F_GETFL).unwrap();
    let nonblock = nix::fcntl::OFlag::from_bits_truncate(flags) | nix::fcntl::OFlag::O_NONBLOCK;
    nix::fcntl::fcntl(&w, nix::fcntl::FcntlArg::F_SETFL(nonblock)).unwrap();
    let filler = [b'.'; 4096];
    let mut filled = 0;
    while let Ok(n) = nix::unistd::write(&w, &filler) {
        filled += n;
    }
    assert!(filled > 0);
    // Blocking again (the flag is the open file's, which foster shares).
    let blocking = nix::fcntl::OFlag::from_bits_truncate(flags);
    nix::fcntl::fcntl(&w, nix::fcntl::FcntlArg::F_SETFL(blocking)).unwrap();
    // The whole supervision happens while standard error stays full.
    let (mut child, mut ev) = FosterRun::new()
        .args(["--no-socket", "--no-contain"])
        .stdout(Stdio::null())
        .stderr(Stdio::from(w))
        .logged(&d.fifo("events"), &cfg);
    let pid = child.id() as i32;
    if ev.try_until(LIMIT, |e| kind(e) == "stopped").is_none() {
        // SAFETY: kill of our own child, not yet reaped.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        let _ = child.wait();
        panic!(
            "the supervision stalled on a full standard error: {:#?}",
            ev.seen
        );
    }
    // Now read it: the filler, then every line foster had queued.
    let mut out = Vec::new();
    std::fs::File::from(r).read_to_end(&mut out).unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(3));
    assert!(out[..filled].iter().all(|&b| b == b'.'));
    let text = String::from_utf8(out[filled..].to_vec()).unwrap();
    let r = Run {
        status: 3,
        stderr: text,
        events: ev.seen,
    };
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(lines, expected(&r, false), "standard error:\n{}", r.stderr);
}
