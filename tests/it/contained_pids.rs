//! The pids a contained `foster run` shows its user (`--contain`: the tree in a PID namespace
//! of its own): its lines on standard error, its events log, `--output json`'s `helper_pid`,
//! and `foster ctl` run from outside, all name each process by the pid this (outer) namespace
//! gives it, the one `ps`, `kill` and `top` take. Root only (a PID namespace); skipped, saying
//! why, where none can be had.

use crate::common;
use common::{LIMIT, wait_gone};

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Instant;

use common::Dir;
use foster::process::identity::Identity;
use serde_json::Value;

const FOSTER: &str = env!("CARGO_BIN_EXE_foster");

/// The lines of a pipe, read by a thread of their own.
fn lines_of(pipe: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Reads `rx` until a line for which `f` gives something; every line read is kept in `seen`.
fn until<T>(
    rx: &mpsc::Receiver<String>,
    seen: &mut Vec<String>,
    what: &str,
    f: impl Fn(&str) -> Option<T>,
) -> T {
    let t = Instant::now();
    loop {
        match rx.recv_timeout(LIMIT.saturating_sub(t.elapsed())) {
            Ok(l) => {
                let got = f(&l);
                seen.push(l);
                if let Some(v) = got {
                    return v;
                }
            }
            Err(_) => panic!("no {what} within {LIMIT:?}; read so far: {seen:#?}"),
        }
    }
}

/// The pid of `foster: NAME[PID] launched...`.
fn launched(line: &str, name: &str) -> Option<i32> {
    let rest = line.strip_prefix(&format!("foster: {name}["))?;
    let (pid, after) = rest.split_once(']')?;
    after.starts_with(" launched").then(|| pid.parse().ok())?
}

/// The command line of `/proc/PID` of this namespace, its arguments joined by spaces.
fn cmdline(pid: i32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

/// The process that `pid` names here is the helper marked `marker`, inside a PID namespace
/// one level below this one.
fn assert_is_helper(pid: i32, marker: &str, what: &str) {
    assert!(
        cmdline(pid).contains(marker),
        "{what}: /proc/{pid} here is {:?}, not the helper (marked {marker})",
        cmdline(pid)
    );
    let here = foster::process::tree::nspid(std::process::id() as i32)
        .unwrap()
        .len();
    let its = foster::process::tree::nspid(pid).unwrap_or_default();
    assert_eq!(its.len(), here + 1, "{what}: contained, NSpid {its:?}");
    assert_eq!(its[0], pid);
}

struct Foster(Child);

impl Drop for Foster {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

#[test]
fn a_contained_run_names_its_processes_by_their_pids_outside() {
    if common::skip::unless_root("--contain needs root here (a PID namespace)") {
        return;
    }
    let d = Dir::new("cpids", "run");
    let marker = format!("marker-cpids-{}", std::process::id());
    // The helper says `up` once the test has seen its launch line and released it: its line
    // then carries the launch's pid, and it is past its exec.
    let go = d.fifo("go");
    let release = || {
        use std::io::Write;
        std::fs::OpenOptions::new()
            .write(true)
            .open(&go)
            .and_then(|mut f| f.write_all(b"go\n"))
            .unwrap();
    };
    let cfg = d.file(
        "run.toml",
        &format!(
            "[[helper]]\nname = \"pidsrv\"\n\
             command = [\"/bin/sh\", \"-c\", \"read x < {}; echo up; sleep 600; :\", \"{marker}\"]\n\
             restart = \"always\"\n\
             backoff = {{ initial = \"100ms\", max = \"1s\", limit = 5, reset_after = \"30s\" }}\n",
            go.display()
        ),
    );
    let events = d.path("events.log");
    let socket = d.path("run.sock");
    let mut child = Command::new(FOSTER)
        .arg("run")
        .arg("--contain")
        .args(["--output", "json", "--events-log"])
        .arg(&events)
        .arg("--socket")
        .arg(&socket)
        .arg(&cfg)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = lines_of(child.stdout.take().unwrap());
    let err = lines_of(child.stderr.take().unwrap());
    let mut foster = Foster(child);
    let (mut said, mut printed) = (Vec::new(), Vec::new());

    // The launch line, or the refusal of a PID namespace (a container may refuse it).
    let first = until(&err, &mut said, "launch line", |l| {
        if l.contains("cannot create a PID namespace") {
            return Some(None);
        }
        launched(l, "pidsrv").map(Some)
    });
    let Some(pid) = first else {
        common::skip::host(format!("no PID namespace can be had here: {said:?}"));
        return;
    };
    release();
    let helper_pid = until(&out, &mut printed, "the helper's line", |l| {
        let v: Value = serde_json::from_str(l).ok()?;
        (v["text"] == "up").then(|| v["helper_pid"].as_i64())?
    });
    assert_is_helper(pid, &marker, "the launch line's pid");
    assert_eq!(helper_pid, pid as i64, "--output json's helper_pid");
    let first_id = Identity::of(pid).unwrap();
    let start_time = first_id.start_time;

    // The events log: the launch's identity is the outer process, so is the supervisor's.
    let log = std::fs::read_to_string(&events).unwrap();
    let log: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let launch = log
        .iter()
        .find(|e| e["event"] == "launch")
        .expect("a launch");
    assert_eq!(launch["identity"]["pid"], pid, "{launch}");
    assert_eq!(launch["identity"]["start_time"], start_time, "{launch}");
    let sup = log.iter().find(|e| e["event"] == "start").expect("a start");
    let sup_pid = sup["supervisor"]["pid"].as_i64().unwrap() as i32;
    let ppid = |p: i32| {
        let s = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap();
        let after = s.rsplit_once(')').unwrap().1.to_string();
        after
            .split_whitespace()
            .nth(1)
            .unwrap()
            .parse::<i32>()
            .unwrap()
    };
    assert_eq!(
        ppid(sup_pid),
        foster.0.id() as i32,
        "the supervisor's pid in the events log is the init foster forked: {sup}"
    );
    assert_eq!(ppid(pid), sup_pid, "the helper is the supervisor's child");
    let sup_id = Identity::of(sup_pid).unwrap();

    // `foster ctl` from here says the same.
    let st = Command::new(FOSTER)
        .args(["ctl", "--json", "--socket"])
        .arg(&socket)
        .arg("status")
        .output()
        .unwrap();
    assert!(st.status.success(), "{st:?}");
    let st: Value = serde_json::from_slice(&st.stdout).unwrap();
    assert_eq!(st["status"]["helpers"][0]["identity"]["pid"], pid, "{st}");

    // The printed pid is the one to act on: SIGTERM by it ends the helper, and the line of
    // its end names it by the same pid; the next launch is named by its own outer pid.
    // SAFETY: a plain kill of the pid just checked to be the helper.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let ended = format!("foster: pidsrv[{pid}] was killed by SIGTERM");
    until(&err, &mut said, "the end line", |l| {
        l.starts_with(&ended).then_some(())
    });
    let again = until(&err, &mut said, "the second launch line", |l| {
        launched(l, "pidsrv")
    });
    assert_ne!(again, pid);
    release();
    until(&out, &mut printed, "the second launch's line", |l| {
        let v: Value = serde_json::from_str(l).ok()?;
        (v["text"] == "up" && v["helper_pid"] == again).then_some(())
    });
    assert_is_helper(again, &marker, "the second launch line's pid");
    let again_id = Identity::of(again).unwrap();
    // `foster ctl logs` from here: the kept lines name each launch by its pid here, the one
    // that ended too (the pid the supervisor sent with the line).
    let logs = Command::new(FOSTER)
        .args(["ctl", "--json", "--socket"])
        .arg(&socket)
        .args(["logs", "pidsrv", "-n", "10"])
        .output()
        .unwrap();
    assert!(logs.status.success(), "{logs:?}");
    let kept: Vec<Value> = String::from_utf8_lossy(&logs.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let pids: Vec<&Value> = kept.iter().map(|l| &l["helper_pid"]).collect();
    assert_eq!(pids, [&Value::from(pid), &Value::from(again)], "{kept:?}");

    // An orderly end; every process of the tree is gone.
    // SAFETY: kill of our own unreaped child.
    unsafe { libc::kill(foster.0.id() as i32, libc::SIGTERM) };
    let status = foster.0.wait().unwrap();
    assert!(status.success(), "{status:?}; {said:#?}");
    for p in [first_id, again_id, sup_id] {
        assert!(wait_gone(p, LIMIT), "process {p} outlived foster");
    }

    // The whole events log: the first launch's end names it by its pid here, and every line
    // (and every line relayed) keeps to its schema.
    let log = std::fs::read_to_string(&events).unwrap();
    let log: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let exit = log
        .iter()
        .find(|e| e["event"] == "exit" && e["identity"]["start_time"] == start_time)
        .expect("the first launch's exit");
    assert_eq!(
        (&exit["pid"], &exit["identity"]["pid"]),
        (&pid.into(), &pid.into())
    );
    let event = schema("event");
    for e in &log {
        valid(&event, e);
    }
    let line = schema("output-line");
    for l in &printed {
        valid(&line, &serde_json::from_str(l).unwrap());
    }
}

/// The validator of `docs/schema/NAME.schema.json`.
fn schema(name: &str) -> jsonschema::Validator {
    let path = format!(
        "{}/docs/schema/{name}.schema.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    jsonschema::validator_for(&v).unwrap()
}

fn valid(validator: &jsonschema::Validator, doc: &Value) {
    let errors: Vec<String> = validator.iter_errors(doc).map(|e| e.to_string()).collect();
    assert!(
        errors.is_empty(),
        "{doc} does not match its schema: {errors:?}"
    );
}

/// `foster ctl` of a contained supervisor, from where `foster run` was started, names a crash
/// loop's quick launches (ended before it could see them) by the pids its lines and events
/// log gave them: the supervisor sends them with each event (`outer_pids`). So does `history`.
#[test]
fn a_crash_loops_quick_launches_keep_their_outer_pids_in_ctl() {
    let d = Dir::new("cpids", "loop");
    let cfg = d.file(
        "run.toml",
        "[[helper]]\nname = \"crashy\"\ncommand = [\"/bin/sh\", \"-c\", \"exit 7\"]\n\
         restart = \"always\"\n\
         backoff = { initial = \"50ms\", max = \"50ms\", limit = 2, reset_after = \"30s\" }\n\
         [[helper]]\nname = \"keeper\"\ncommand = [\"sleep\", \"600\"]\n",
    );
    let (events, socket) = (d.path("events.log"), d.path("run.sock"));
    let mut child = Command::new(FOSTER)
        .arg("run")
        .arg("--contain")
        .arg("--events-log")
        .arg(&events)
        .arg("--socket")
        .arg(&socket)
        .arg(&cfg)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = lines_of(child.stderr.take().unwrap());
    let mut foster = Foster(child);
    let mut said = Vec::new();
    // Every launch line up to the give-up, or the refusal of a PID namespace.
    let refused = until(&err, &mut said, "the give-up line", |l| {
        if l.contains("cannot create a PID namespace") {
            return Some(true);
        }
        l.contains("giving up after 2 restarts").then_some(false)
    });
    if refused {
        common::skip::host(format!("no PID namespace can be had here: {said:?}"));
        return;
    }
    let lines: Vec<i32> = said.iter().filter_map(|l| launched(l, "crashy")).collect();
    assert_eq!(lines.len(), 3, "{said:#?}");
    let log: Vec<Value> = std::fs::read_to_string(&events)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(launches(log.iter()), lines, "the events log: {log:#?}");

    let ctl = |args: &[&str]| {
        let out = Command::new(FOSTER)
            .args(["ctl", "--socket"])
            .arg(&socket)
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let control = schema("control");
    let json = ctl(&["--json", "events", "--no-follow"]);
    let replies: Vec<Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    replies.iter().for_each(|r| valid(&control, r));
    let evs: Vec<&Value> = replies.iter().map(|r| &r["event"]).collect();
    assert_eq!(
        launches(evs.iter().copied()),
        lines,
        "ctl events --json: {json}"
    );
    for e in evs
        .iter()
        .filter(|e| e["event"] == "exit" && e["helper"] == "crashy")
    {
        assert!(lines.contains(&(e["pid"].as_i64().unwrap() as i32)), "{e}");
        assert!(
            e.get("foreign_pids").is_none() && e.get("outer_pids").is_none(),
            "{e}"
        );
    }
    for (what, text) in [
        ("events", ctl(&["events", "--no-follow"])),
        ("history", ctl(&["history", "crashy"])),
    ] {
        let named: Vec<i32> = text
            .lines()
            .filter_map(|l| {
                let rest = l.split_once("  crashy[")?.1;
                let (pid, after) = rest.split_once(']')?;
                after.starts_with(" launched").then(|| pid.parse().ok())?
            })
            .collect();
        assert_eq!(named, lines, "ctl {what}: {text}");
        assert!(!text.contains("seen here"), "ctl {what}: {text}");
    }
    let history = ctl(&["--json", "history", "crashy"]);
    valid(&control, &serde_json::from_str(&history).unwrap());

    // On the wire, the supervisor's own pids, each with its outer pid.
    let wire = raw_events(&socket);
    let sent: Vec<i32> = wire
        .iter()
        .filter(|e| e["event"] == "launch" && e["helper"] == "crashy")
        .map(|e| {
            let inner = &e["identity"]["pid"];
            let pairs = e["outer_pids"].as_array().expect("outer_pids");
            let pair = pairs.iter().find(|p| &p[0] == inner).expect("its pair");
            pair[1].as_i64().unwrap() as i32
        })
        .collect();
    assert_eq!(sent, lines, "{wire:#?}");
    wire.iter()
        .for_each(|e| valid(&control, &serde_json::json!({"version": 1, "event": e})));

    // SAFETY: kill of our own unreaped child.
    unsafe { libc::kill(foster.0.id() as i32, libc::SIGTERM) };
    let status = foster.0.wait().unwrap();
    assert!(status.success(), "{status:?}; {said:#?}");
}

/// The pids of the launches of `crashy` among `events`, in order.
fn launches<'a>(events: impl Iterator<Item = &'a Value>) -> Vec<i32> {
    events
        .filter(|e| e["event"] == "launch" && e["helper"] == "crashy")
        .map(|e| e["identity"]["pid"].as_i64().unwrap() as i32)
        .collect()
}

/// The backlog of events as the supervisor sends it, read from its socket directly.
fn raw_events(socket: &std::path::Path) -> Vec<Value> {
    use std::io::Write;
    let mut s = std::os::unix::net::UnixStream::connect(socket).unwrap();
    s.set_read_timeout(Some(LIMIT)).unwrap();
    s.write_all(b"{\"request\":\"events\",\"follow\":false}\n")
        .unwrap();
    let mut r = BufReader::new(s);
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let head: Value = serde_json::from_str(&line).unwrap();
    let n = head["events"]["backlog"].as_u64().expect("an events reply");
    (0..n)
        .map(|_| {
            line.clear();
            r.read_line(&mut line).unwrap();
            let v: Value = serde_json::from_str(&line).unwrap();
            v["event"].clone()
        })
        .collect()
}
