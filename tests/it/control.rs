//! The control socket, `foster ctl` and `foster demo`, end to end on real processes.
//! Synchronisation is the socket itself (replies, the event stream) and FIFOs; deadlines are
//! only safety nets.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use foster::process::identity::{PidfdInfo, PidfdPid};
use serde_json::Value;

const FOSTER: &str = env!("CARGO_BIN_EXE_foster");

use crate::common;
use common::LIMIT;
use common::foster_run::FosterRun;
use common::supervised::{Guard, Plain as Run, wait_child};
use common::supervised::{ctl_command, status_reply, wait_status_reply};
use common::{Dir, processes_with_env};

/// A raw client connection reading replies on a thread (so a test never blocks on it).
struct Conn {
    w: UnixStream,
    rx: mpsc::Receiver<Value>,
}
impl Conn {
    fn open(path: &Path) -> std::io::Result<Conn> {
        Conn::on(UnixStream::connect(path)?)
    }
    fn on(s: UnixStream) -> std::io::Result<Conn> {
        let rx = common::lines::json_lines(s.try_clone()?);
        Ok(Conn { w: s, rx })
    }
    fn send(&mut self, bytes: &[u8]) {
        self.w.write_all(bytes).unwrap();
    }
    fn next(&self) -> Value {
        self.rx
            .recv_timeout(LIMIT)
            .expect("a reply within the deadline")
    }
    /// A connection following the event stream from now (no backlog), and the stream's head
    /// reply.
    fn follow(path: &Path) -> (Conn, Value) {
        let mut c = Conn::open(path).unwrap();
        c.send(b"{\"request\":\"events\",\"backlog\":0}\n");
        let head = c.next();
        (c, head)
    }
    fn ask(&mut self, line: &str) -> Value {
        self.send(format!("{line}\n").as_bytes());
        self.next()
    }
    /// Reads replies until one satisfies `f`.
    fn until(&self, what: &str, f: impl Fn(&Value) -> bool) -> Value {
        let t = Instant::now();
        loop {
            let left = LIMIT.saturating_sub(t.elapsed());
            match self.rx.recv_timeout(left) {
                Ok(v) if f(&v) => return v,
                Ok(_) => {}
                Err(_) => panic!("no {what} within {LIMIT:?}"),
            }
        }
    }
}

/// One helper, `s`, that sleeps.
const SLEEPER: &str = "[[helper]]\nname = \"s\"\ncommand = [\"sleep\", \"300\"]\n";
/// `s`, and `keep` that keeps the supervisor running once `s` has ended.
const TWO_SLEEPERS: &str = "[[helper]]\nname = \"s\"\ncommand = [\"sleep\", \"300\"]\n\
     [[helper]]\nname = \"keep\"\ncommand = [\"sleep\", \"300\"]\n";

fn event_is(v: &Value, kind: &str) -> bool {
    v["event"]["event"] == kind
}

fn error_kind(v: &Value) -> String {
    v["error"]["kind"].as_str().unwrap_or_default().to_string()
}

#[test]
fn socket_is_0600_and_removed_on_exit() {
    let d = Dir::new("ctl", "mode");
    let sock = d.path("sub/a.sock");
    let run = Run::start(&d.file("a.toml", SLEEPER), &sock);
    let mode = std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "socket mode {mode:o}");
    let dmode = std::fs::metadata(d.path("sub"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(dmode, 0o700, "directory mode {dmode:o}");
    let st = run.stop();
    assert!(st.success(), "{st}");
    assert!(!sock.exists(), "socket file left behind");
    assert!(
        !d.path("sub").exists(),
        "the directory foster made is left behind"
    );
}

/// `ctl stop` without a helper is a usage error naming `shutdown`, and stops nothing: a
/// forgotten argument must not end the whole tree. `ctl shutdown` does.
#[test]
fn ctl_stop_without_a_helper_is_refused_and_shutdown_stops_the_supervisor() {
    let d = Dir::new("ctl", "bare-stop");
    let mut run = Run::start_in(&d, SLEEPER);
    let sock = run.socket.clone();
    let out = run.ctl(&["stop"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(err.contains("foster ctl shutdown"), "{err}");
    // Still supervising: it answers, and has not begun to end.
    let mut c = Conn::open(&sock).unwrap();
    let v = c.ask(r#"{"request":"status"}"#);
    assert_eq!(v["status"]["helpers"][0]["state"], "running", "{v}");
    assert!(run.child.try_wait().unwrap().is_none(), "it ended");
    let st = run.stop(); // `ctl shutdown`
    assert!(st.success(), "{st}");
}

#[test]
fn socket_parents_are_not_created() {
    let d = Dir::new("ctl", "chain");
    let cfg = d.file("a.toml", "[[helper]]\nname = \"t\"\ncommand = [\"true\"]\n");
    let sock = d.path("x/y/a.sock");
    let out = FosterRun::new().socket(&sock).output(&cfg);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&d.path("x/y").display().to_string())
            && err.contains(&format!("parent {} does not exist", d.path("x").display())),
        "{err}"
    );
    assert!(!d.path("x").exists(), "a chain of directories was made");
}

#[test]
fn refuses_a_peer_of_another_uid() {
    if common::skip::unless_root("needs root to run a client as uid 65534") {
        return;
    }
    let d = Dir::new("ctl", "uid");
    let run = Run::start_in(&d, SLEEPER);
    let sock = run.socket.clone();
    // Make the file reachable, as a careless operator might: the credential check must hold.
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o666)).unwrap();
    // The client runs as uid 65534: std forks, calls setuid(65534) in the child, then execs.
    let out = ctl_command(&sock)
        .args(["--json", "status"])
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        !out.status.success(),
        "uid 65534 got an answer: {stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(stdout.lines().next().unwrap_or("{}")).unwrap();
    assert_eq!(
        error_kind(&v),
        "permission_denied",
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("uid 65534"),
        "{v}"
    );
    // Root (the owner) is still answered.
    let out = run.ctl(&["--json", "status"]);
    assert!(out.status.success(), "{out:?}");
    run.stop();
}

use std::os::unix::process::CommandExt;

#[test]
fn survives_garbage_partial_oversized_and_a_client_that_never_reads() {
    let d = Dir::new("ctl", "garbage");
    let run = Run::start_in(
        &d,
        "[[helper]]\nname = \"flaky\"\ncommand = [\"sh\", \"-c\", \"exit 3\"]\n\
         restart = \"always\"\nbackoff = { initial = \"100ms\", max = \"200ms\", limit = 100000 }\n",
    );
    let sock = run.socket.clone();

    // A client that asks and asks and never reads: its replies fill its socket buffer.
    let mut stuck = UnixStream::connect(&sock).unwrap();
    stuck.write_all(b"{\"request\":\"events\"}\n").unwrap();
    stuck.set_nonblocking(true).unwrap();
    let req = b"{\"request\":\"status\"}\n".repeat(64);
    let mut sent = 0usize;
    for _ in 0..4000 {
        match stuck.write(&req) {
            Ok(n) => sent += n,
            Err(_) => break, // its receive buffer is full too: it is stuck
        }
    }
    assert!(sent > 0);

    let mut c = Conn::open(&sock).unwrap();
    let v = c.ask("this is not json");
    assert_eq!(error_kind(&v), "malformed", "{v}");
    let v = c.ask(r#"{"request":"dance"}"#);
    assert_eq!(error_kind(&v), "unknown_request", "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("dance"));
    let v = c.ask(r#"{"request":"restart"}"#);
    assert_eq!(error_kind(&v), "bad_argument", "{v}");
    c.send(&[0xff, 0xfe, b'\n']);
    assert_eq!(error_kind(&c.next()), "malformed");
    // A partial line, completed later.
    c.send(br#"{"request":"st"#);
    c.send(b"atus\"}\n");
    let v = c.next();
    assert!(v["status"]["supervisor"]["identity"]["pid"].is_i64(), "{v}");
    // An oversized line, then the connection goes on at the next line.
    let mut big = vec![b'x'; 200 * 1024];
    big.push(b'\n');
    c.send(&big);
    let v = c.next();
    assert_eq!(error_kind(&v), "oversized", "{v}");
    let v = c.ask(r#"{"request":"status"}"#);
    assert!(v.get("status").is_some(), "{v}");

    // Supervision goes on: the flaky helper keeps being launched, seen through a fresh stream.
    let (ev, head) = Conn::follow(&sock);
    assert_eq!(head["events"]["backlog"], 0, "{head}");
    for _ in 0..3 {
        ev.until("a launch", |v| event_is(v, "launch"));
    }
    drop(stuck);
    let st = run.stop();
    assert!(st.code().is_some(), "{st}");
}

/// More idle connections than the supervisor has slots (64): `status` and `stop` still get
/// through, the longest idle connections being closed to make room.
#[test]
fn idle_clients_cannot_lock_out_stop_and_status() {
    let d = Dir::new("ctl", "lockout");
    let run = Run::start_in(&d, SLEEPER);
    let sock = run.socket.clone();
    let idle: Vec<UnixStream> = (0..70)
        .map(|_| UnixStream::connect(&sock).unwrap())
        .collect();
    let out = run.ctl(&["--json", "status"]);
    assert!(out.status.success(), "status locked out: {out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["status"]["supervisor"]["identity"]["pid"].is_i64(), "{v}");
    // The oldest idle connection was closed, and told why.
    let mut first = BufReader::new(idle[0].try_clone().unwrap());
    let mut line = String::new();
    first.get_ref().set_read_timeout(Some(LIMIT)).unwrap();
    first.read_line(&mut line).unwrap();
    let v: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(error_kind(&v), "idle", "{v}");
    let st = run.stop();
    assert!(st.code().is_some(), "{st}");
    drop(idle);
}

/// A client that holds a slot without a complete request is closed within the idle timeout;
/// blank lines are no request (no answer, the timeout goes on); a follower of the event stream
/// connected as long is still served.
#[test]
fn a_client_without_a_complete_request_is_closed_and_followers_stay() {
    let d = Dir::new("ctl", "idle");
    let run = Run::start_in(&d, SLEEPER);
    let sock = run.socket.clone();
    let (mut follower, head) = Conn::follow(&sock);
    assert_eq!(head["events"]["follow"], true);
    let mut partial = UnixStream::connect(&sock).unwrap();
    partial.write_all(b"\n \r\n\n{\"request\":").unwrap();
    partial.set_read_timeout(Some(LIMIT)).unwrap();
    let mut got = String::new();
    // Safety net: a stuck read fails at LIMIT; the connection ends within the idle timeout.
    partial.read_to_string(&mut got).unwrap();
    let lines: Vec<&str> = got.lines().collect();
    assert_eq!(lines.len(), 1, "{got}");
    let v: Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(error_kind(&v), "idle", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("idle timeout"),
        "{v}"
    );
    // The follower, connected before it, is still served, requests included.
    let v = follower.ask(r#"{"request":"status"}"#);
    assert!(v.get("status").is_some(), "{v}");
    // Blank lines before a request: only the request is answered.
    let mut c = Conn::open(&sock).unwrap();
    let v = c.ask("\n\r\n   \n{\"request\":\"status\"}");
    assert!(v.get("status").is_some(), "{v}");
    run.stop();
}

#[test]
fn a_request_with_a_key_twice_is_refused_not_run() {
    let d = Dir::new("ctl", "dupkey");
    let run = Run::start_in(&d, SLEEPER);
    let sock = run.socket.clone();
    let mut c = Conn::open(&sock).unwrap();
    let v = c.ask(r#"{"request":"status","request":"stop"}"#);
    assert_eq!(error_kind(&v), "malformed", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("\"request\" is given twice"),
        "{v}"
    );
    let v = c.ask(r#"{"request":"status"}"#);
    assert_eq!(v["status"]["supervisor"]["shutting_down"], false, "{v}");
    run.stop();
}

/// At most 48 clients follow the events, so slots for other requests remain.
#[test]
fn followers_are_limited_and_stop_still_gets_through() {
    let d = Dir::new("ctl", "followers");
    let run = Run::start_in(&d, SLEEPER);
    let sock = run.socket.clone();
    let mut followers = Vec::new();
    for _ in 0..48 {
        let (f, head) = Conn::follow(&sock);
        assert_eq!(head["events"]["follow"], true);
        followers.push(f);
    }
    let mut extra = Conn::open(&sock).unwrap();
    let v = extra.ask(r#"{"request":"events","backlog":0}"#);
    assert_eq!(error_kind(&v), "refused", "{v}");
    // Its connection stays usable for other requests.
    let v = extra.ask(r#"{"request":"events","backlog":0,"follow":false}"#);
    assert_eq!(v["events"]["follow"], false, "{v}");
    let idle: Vec<UnixStream> = (0..20)
        .map(|_| UnixStream::connect(&sock).unwrap())
        .collect();
    let out = run.ctl(&["--json", "status"]);
    assert!(out.status.success(), "status locked out: {out:?}");
    let st = run.stop();
    assert!(st.code().is_some(), "{st}");
    // Every follower saw the end of the stream.
    for f in &followers {
        f.until("the stopped event", |v| event_is(v, "stopped"));
    }
    drop(idle);
}

fn three_generation_config(d: &Dir) -> (PathBuf, PathBuf, PathBuf) {
    let ready = d.fifo("ready");
    let oready = d.fifo("oready");
    let cfg = d.file(
        "tree.toml",
        &format!(
            r#"
[[helper]]
name = "tree"
command = ["sh", "-c", "sh -c 'sh -c \"echo ready > {r}; exec sleep 300\" & wait' & wait"]

[[helper]]
name = "orphaner"
command = ["sh", "-c", "sh -c 'trap \"\" USR1; sleep 300 & exit 0'; echo ready > {o}; exec sleep 300"]
[[helper.generation]]
signal = "TERM"
[[helper.generation]]
signal = "USR1"
reaction = "notify"
grace = "60s"
"#,
            r = ready.display(),
            o = oready.display()
        ),
    );
    (cfg, ready, oready)
}

fn read_fifo(p: &Path) {
    assert_eq!(common::fifo::to_end(p).trim(), "ready");
}

#[test]
fn status_json_reports_roles_and_expected_parents() {
    let d = Dir::new("ctl", "status");
    let (cfg, ready, oready) = three_generation_config(&d);
    let sock = d.path("a.sock");
    let run = Run::start(&cfg, &sock);
    read_fifo(&ready);
    read_fifo(&oready);
    // The grandchild says ready just before it execs its sleep: wait for the exec too.
    let v = wait_status_reply(&run.socket, "with the grandchild become sleep", |v| {
        // Every generation-3 process (the grandchild, and the orphan, generation 3 too) must
        // be out of its exec: the orphan alone being `sleep` does not say the grandchild is.
        let third: Vec<&Value> = v["status"]["processes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["generation"] == 3)
            .collect();
        !third.is_empty() && third.iter().all(|p| p["comm"] == "sleep")
    });
    assert_eq!(v["version"], 1);
    let s = &v["status"];
    let procs = s["processes"].as_array().unwrap();
    let id = |p: &Value| {
        (
            p["pid"].as_i64().unwrap(),
            p["start_time"].as_u64().unwrap(),
        )
    };
    let pid_of = |p: &Value| p["pid"].as_i64().unwrap();
    let sup = &procs[0];
    assert_eq!(sup["role"], "supervisor");
    assert_eq!(sup["generation"], 0);
    let sup_id = id(sup);
    let ident = |v: &Value| {
        (
            v["pid"].as_i64().unwrap(),
            v["start_time"].as_u64().unwrap(),
        )
    };
    // The tree helper, its child, its grandchild.
    let helper = procs
        .iter()
        .find(|p| p["role"] == "helper" && p["helper"] == "tree")
        .unwrap_or_else(|| panic!("no helper row: {s}"));
    assert_eq!(helper["generation"], 1);
    assert_eq!(ident(&helper["expected_parent"]), sup_id);
    assert_eq!(ident(&helper["parent"]), sup_id);
    let child = procs
        .iter()
        .find(|p| p["ppid"] == helper["pid"])
        .unwrap_or_else(|| panic!("no child of the helper: {s}"));
    assert_eq!(child["role"], "descendant");
    assert_eq!(child["generation"], 2);
    assert_eq!(child["helper"], "tree");
    assert_eq!(ident(&child["expected_parent"]), id(helper));
    let grandchild = procs
        .iter()
        .find(|p| p["ppid"] == child["pid"])
        .unwrap_or_else(|| panic!("no grandchild: {s}"));
    assert_eq!(grandchild["role"], "descendant");
    assert_eq!(grandchild["generation"], 3);
    assert_eq!(ident(&grandchild["expected_parent"]), id(child));
    assert_eq!(grandchild["comm"], "sleep");
    for p in [helper, child, grandchild] {
        assert!(p["rss_bytes"].as_u64().unwrap() > 0, "{p}");
        assert!(p["threads"].as_i64().unwrap() >= 1, "{p}");
        assert!(p["policy"].as_str().unwrap().contains(':'), "{p}");
    }
    // The orphan: adopted by the supervisor, expected there, its old parent recorded.
    let orphan = procs
        .iter()
        .find(|p| p["role"] == "adopted_orphan")
        .unwrap_or_else(|| panic!("no adopted orphan: {s}"));
    assert_eq!(orphan["helper"], "orphaner");
    assert_eq!(ident(&orphan["parent"]), sup_id);
    assert_eq!(orphan["adoption"]["classification"], "expected");
    assert_eq!(ident(&orphan["adoption"]["to"]), sup_id);
    assert_eq!(orphan["policy"], "SIGUSR1:notify:60s");
    assert_ne!(pid_of(orphan), pid_of(sup));
    // The human form names the same roles.
    let out = run.ctl(&["status"]);
    let text = String::from_utf8(out.stdout).unwrap();
    for w in [
        "supervisor",
        "helper",
        "descendant",
        "adopted orphan",
        "gen 3",
    ] {
        assert!(text.contains(w), "{w} missing from:\n{text}");
    }
    run.stop();
}

#[test]
fn events_show_a_crash_and_its_restart() {
    let d = Dir::new("ctl", "events");
    let gate = d.fifo("gate");
    let run = Run::start_in(
        &d,
        &format!(
            "[[helper]]\nname = \"crashy\"\ncommand = [\"sh\", \"-c\", \"cat {} >/dev/null; exit 7\"]\n\
             restart = \"on-failure\"\nbackoff = {{ initial = \"100ms\", max = \"1s\", limit = 10 }}\n",
            gate.display()
        ),
    );
    let mut ev = ctl_command(&run.socket)
        .args(["--json", "events"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = common::lines::json_lines(ev.stdout.take().unwrap());
    let until = |what: &str, f: &dyn Fn(&Value) -> bool| loop {
        let v = rx
            .recv_timeout(LIMIT)
            .unwrap_or_else(|_| panic!("no {what}"));
        if f(&v) {
            return v;
        }
    };
    // The backlog has the first launch; then the crash (the helper exits once the gate opens).
    until("first launch", &|v| event_is(v, "launch"));
    drop(std::fs::OpenOptions::new().write(true).open(&gate).unwrap());
    let exit = until("the crash", &|v| {
        event_is(v, "exit") && v["event"]["helper"] == "crashy"
    });
    assert_eq!(exit["event"]["status"]["code"], 7, "{exit}");
    let restart = until("the restart", &|v| event_is(v, "restart"));
    assert_eq!(restart["event"]["attempt"], 1);
    assert_eq!(restart["event"]["delay_ms"], 100);
    let relaunch = until("the relaunch", &|v| event_is(v, "launch"));
    assert_eq!(relaunch["event"]["attempt"], 2);
    assert!(relaunch["event"]["seq"].as_u64() > exit["event"]["seq"].as_u64());
    // Stopping the supervisor ends the stream with its last events.
    let mut st = run.stop();
    assert!(st.code().is_some());
    until("the stopped event", &|v| event_is(v, "stopped"));
    st = wait_child(&mut ev);
    assert!(st.success(), "ctl events: {st}");
}

#[test]
fn signal_reaches_the_tree_and_nothing_else() {
    let d = Dir::new("ctl", "signal");
    let run = Run::start_in(&d, TWO_SLEEPERS);
    let sock = run.socket.clone();
    // A process outside the tree: this test's own child.
    let mut outside = Command::new("sleep").arg("300").spawn().unwrap();
    let pid = outside.id().to_string();
    let out = run.ctl(&["signal", &pid, "TERM"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not inside the supervised tree"), "{err}");
    assert!(
        outside.try_wait().unwrap().is_none(),
        "outside process was signalled"
    );
    let _ = outside.kill();
    let _ = outside.wait();
    // The supervisor itself is not a target either.
    let v: Value = {
        let mut c = Conn::open(&sock).unwrap();
        c.ask(r#"{"request":"status"}"#)
    };
    let me = v["status"]["supervisor"]["identity"]["pid"].to_string();
    let out = run.ctl(&["--json", "signal", &me, "KILL"]);
    assert!(!out.status.success());
    // A helper by name, and the exact identity form with a wrong start time.
    let hpid = v["status"]["helpers"][0]["identity"]["pid"]
        .as_i64()
        .unwrap();
    let out = run.ctl(&["signal", &format!("{hpid}:1"), "TERM"]);
    assert!(!out.status.success(), "a wrong start time was accepted");
    let (c, _) = Conn::follow(&sock);
    let out = run.ctl(&["signal", "s", "USR1"]);
    assert!(out.status.success(), "{out:?}");
    let ev = c.until("the exit", |v| event_is(v, "exit"));
    assert_eq!(ev["event"]["status"]["signal"], "SIGUSR1", "{ev}");
    run.stop();
}

#[test]
fn signal_stop_and_cont_pause_and_resume_and_every_json_spells_signals_alike() {
    let d = Dir::new("ctl", "stopcont");
    // "keep" keeps the supervisor running once "s" has ended.
    let run = Run::start_in(&d, TWO_SLEEPERS);
    let sock = run.socket.clone();
    // The helper's pid here, through foster ctl: the supervisor may be contained, and the raw
    // protocol carries its namespace's pids.
    let v = run.status_reply();
    let hpid = v["status"]["helpers"][0]["identity"]["pid"]
        .as_i64()
        .unwrap();
    let (c, _) = Conn::follow(&sock);
    // STOP and CONT are signals like any other for ctl (a parent-death rule does not apply).
    for (sig, state) in [("STOP", 'T'), ("sigcont", 'S')] {
        let out = run.ctl(&["signal", "s", sig]);
        assert!(out.status.success(), "{sig}: {out:?}");
        common::wait_state(hpid as i32, state);
        let ev = c.until("the signal event", |v| event_is(v, "signal"));
        let want = format!("SIG{}", sig.to_uppercase().trim_start_matches("SIG"));
        assert_eq!(ev["event"]["signal"], want.as_str(), "{ev}");
    }
    // One spelling: the signal event, the exit event and the status's last exit say SIGTERM.
    let out = run.ctl(&["--json", "signal", "s", "15"]);
    assert!(out.status.success(), "{out:?}");
    let ev = c.until("the signal event", |v| event_is(v, "signal"));
    assert_eq!(ev["event"]["signal"], "SIGTERM", "{ev}");
    let ev = c.until("the exit", |v| event_is(v, "exit"));
    assert_eq!(ev["event"]["status"]["signal"], "SIGTERM", "{ev}");
    let v = run.status_reply();
    let last = &v["status"]["helpers"][0]["last_exit"];
    assert_eq!(last["how"], "signaled", "{v}");
    assert_eq!(last["signal"], "SIGTERM", "{v}");
    let text = String::from_utf8(run.ctl(&["status"]).stdout).unwrap();
    assert!(text.contains("SIGTERM"), "{text}");
    run.stop();
    let left = common::state_of(hpid as i32);
    assert_eq!(left, None, "the helper {hpid} is still there");
}

/// The pids whose pidfds `pid` holds (`Pid:` of each `anon_inode:[pidfd]` descriptor's fdinfo).
fn pidfds_held_by(pid: u32) -> Vec<i64> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
    {
        let link = std::fs::read_link(e.path()).unwrap_or_default();
        if link.to_string_lossy() != "anon_inode:[pidfd]" {
            continue;
        }
        let info = std::fs::read(format!(
            "/proc/{pid}/fdinfo/{}",
            e.file_name().to_string_lossy()
        ))
        .unwrap_or_default();
        match PidfdInfo::parse(&info).map(|i| i.pid) {
            Some(PidfdPid::Pid(p)) => out.push(i64::from(p)),
            Some(PidfdPid::Reaped) => out.push(-1),
            None => {}
        }
    }
    out
}

/// A helper is held by the pidfd `clone` returned with it for as long as it runs, and signalled
/// through it; the pidfd goes with the helper.
#[test]
fn a_running_helper_is_held_by_its_pidfd() {
    let d = Dir::new("ctl", "pidfd");
    let run = Run::start_in(&d, TWO_SLEEPERS);
    let sock = run.socket.clone();
    // Pids as this test's namespace sees them (the supervisor may be contained).
    let v = run.status_reply();
    let sup = v["status"]["supervisor"]["identity"]["pid"]
        .as_u64()
        .unwrap() as u32;
    let hpid = |i: usize| {
        v["status"]["helpers"][i]["identity"]["pid"]
            .as_i64()
            .unwrap()
    };
    let held = pidfds_held_by(sup);
    assert!(
        held.contains(&hpid(0)) && held.contains(&hpid(1)),
        "{held:?}"
    );
    let (c, _) = Conn::follow(&sock);
    let out = run.ctl(&["signal", "s", "KILL"]);
    assert!(out.status.success(), "{out:?}");
    c.until("the exit", |v| {
        event_is(v, "exit") && v["event"]["helper"] == "s"
    });
    let held = pidfds_held_by(sup);
    assert!(!held.contains(&hpid(0)), "{held:?}");
    assert!(held.contains(&hpid(1)), "{held:?}");
    run.stop();
}

#[test]
fn stale_socket_replaced_live_one_not_stolen() {
    let d = Dir::new("ctl", "stale");
    let cfg = d.file("a.toml", SLEEPER);
    let sock = d.path("a.sock");
    // A stale socket: bound, then its listener gone.
    drop(std::os::unix::net::UnixListener::bind(&sock).unwrap());
    assert!(sock.exists());
    let run = Run::start(&cfg, &sock);
    // A second supervisor on the same path refuses to start and names the path.
    let out = FosterRun::new().socket(&sock).output(&cfg);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&sock.display().to_string()) && err.contains("another supervisor"),
        "{err}"
    );
    // The first one still answers.
    let out = run.ctl(&["--json", "status"]);
    assert!(out.status.success(), "{out:?}");
    run.stop();
}

#[test]
fn ctl_without_a_supervisor_says_so() {
    let d = Dir::new("ctl", "absent");
    let out = ctl_command(&d.path("none.sock"))
        .arg("status")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no supervisor listening at") && err.contains("--socket"),
        "{err}"
    );
}

/// A supervisor that does not answer (stopped by SIGSTOP) is an error after a bound: one line
/// naming its pid and its state, for every verb; resumed, it answers again.
#[test]
fn a_supervisor_that_does_not_answer_is_an_error_in_time() {
    let d = Dir::new("ctl", "hung");
    let config = "[[helper]]\nname = \"s\"\ncommand = [\"sleep\", \"300\"]\n";
    let mut run = common::supervised::Run::start_uncontained(&d, config);
    run.launch("s", 1);
    let pid = run.child.id() as i32;
    let (out, took) = common::child::while_stopped(&run.child, || {
        let t = Instant::now();
        let ctl = common::supervised::ctl_command(&run.socket)
            .arg("status")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        (common::child::output_within(ctl, "ctl status"), t.elapsed())
    });
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!(
            "the supervisor (pid {pid}) did not answer within 10s"
        )) && err.contains("(it is stopped: SIGCONT resumes it)"),
        "{err}"
    );
    assert!(
        took >= Duration::from_secs(10) && took < LIMIT * 2,
        "{took:?}"
    );
    assert!(run.ctl(&["status"]).status.success());
    assert!(run.stop().success());
}

// ---- foster demo ----

/// Pids of live (non-zombie) processes whose environment carries FOSTER_DEMO=<demo>.
fn demo_processes(demo: u32) -> Vec<i32> {
    processes_with_env(&format!("FOSTER_DEMO={demo}"))
        .iter()
        .map(|p| p.pid)
        .collect()
}

/// `foster demo FLAG --socket SOCK` (terminated on drop), its standard error to `stderr`, the
/// lines of its standard output read on a thread.
fn start_demo(flag: &str, sock: &Path, stderr: Stdio) -> (Guard, mpsc::Receiver<String>) {
    let mut guard = Guard(
        Command::new(FOSTER)
            .args(["demo", flag, "--socket"])
            .arg(sock)
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap(),
    );
    let rx = common::lines::lines(guard.0.stdout.take().unwrap());
    (guard, rx)
}

/// Waits until no process of the demo `demo_pid` is left (`after`: after what).
fn wait_demo_gone(demo_pid: u32, after: &str) {
    let t = Instant::now();
    loop {
        let left = demo_processes(demo_pid);
        if left.is_empty() {
            return;
        }
        let limit = LIMIT.saturating_sub(t.elapsed());
        let ended = left.iter().all(|&p| common::wait_pid_gone(p, limit));
        assert!(ended, "demo processes left{after}: {left:?}");
    }
}

fn demo(stop: libc::c_int) {
    let d = Dir::new("ctl", &format!("demo{stop}"));
    let sock = d.path("demo.sock");
    let (mut guard, rx) = start_demo("--json", &sock, Stdio::null());
    let child = &mut guard.0;
    let demo_pid = child.id();
    let mut launched = std::collections::HashSet::new();
    let t = Instant::now();
    // Every helper launched (the migration once the db said it is ready, the worker once the
    // migration has completed), and an orphan adopted (noticed at the crasher's first exit).
    let mut adopted = false;
    let mut db_ready = false;
    let every = ["db", "migrate", "nested", "worker", "crasher", "orphaner"];
    let mut seen = Vec::new();
    while !every.iter().all(|h| launched.contains(*h)) || !adopted {
        let v: Value = rx
            .recv_timeout(LIMIT.saturating_sub(t.elapsed()))
            .map(|l| serde_json::from_str(&l).unwrap())
            .unwrap_or_else(|_| {
                panic!("launched {launched:?}, adopted {adopted}; the demo's events: {seen:#?}")
            });
        seen.push(v.clone());
        if event_is(&v, "launch") {
            let h = v["event"]["helper"].as_str().unwrap().to_string();
            // The db is ready (through `foster notify`) before what waits for it is launched.
            if h == "migrate" || h == "worker" {
                assert!(db_ready, "{h} launched before the db was ready: {seen:#?}");
            }
            launched.insert(h);
        }
        if event_is(&v, "state") && v["event"]["helper"] == "db" && v["event"]["state"] == "ready" {
            assert!(
                v["event"]["detail"]
                    .as_str()
                    .is_some_and(|d| d.ends_with("(notify)")),
                "{v}"
            );
            db_ready = true;
        }
        if event_is(&v, "reparented") && v["event"]["helper"] == "orphaner" {
            assert_eq!(v["event"]["classification"], "expected", "{v}");
            adopted = true;
        }
    }
    // Every role at once. The nested supervisor becomes one by its exec (`sh -c 'exec foster
    // run ...'`), which no event of this supervisor announces and which may not have happened
    // yet under load: until it has, it is a helper running `sh`. So the status is asked again
    // (as new events arrive, or every 100 ms) until it is there; a role that stayed wrong (a
    // command line read in the middle of that exec was kept for good) fails here.
    let count = |v: &Value, role: &str| {
        v["status"]["processes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["role"] == role)
            .count()
    };
    let v = loop {
        let v = status_reply(&sock);
        // worker and orphaner (crasher may be waiting for its backoff; nested is a supervisor).
        if count(&v, "supervisor") == 2
            && count(&v, "helper") >= 2
            && count(&v, "descendant") >= 3
            && count(&v, "adopted_orphan") >= 1
        {
            break v;
        }
        assert!(
            t.elapsed() < LIMIT,
            "not every role of the demo, the supervisor and the nested one: {v}"
        );
        let _ = rx.recv_timeout(Duration::from_millis(100));
    };
    let procs = v["status"]["processes"].as_array().unwrap();
    let db = v["status"]["helpers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["name"] == "db")
        .unwrap();
    assert_eq!(db["state"], "ready", "{v}");
    assert_eq!(db["status_text"], "accepting connections", "{v}");
    assert_eq!(v["status"]["supervisor"]["notify_refused"], 0, "{v}");
    let before = demo_processes(demo_pid);
    assert!(
        before.len() >= 8,
        "marker not found on the tree: {before:?}"
    );
    // Its pids are this namespace's, though the supervisor may run in a namespace of its own:
    // both supervisors are the processes of the demo under those pids.
    for p in procs.iter().filter(|p| p["role"] == "supervisor") {
        let pid = p["pid"].as_i64().unwrap() as i32;
        let here = foster::process::identity::Identity::of(pid)
            .map(|i| i.start_time)
            .ok();
        assert_eq!(
            here.map(Value::from).as_ref(),
            Some(&p["start_time"]),
            "{p}"
        );
        assert!(before.contains(&pid), "{pid} is not the demo's: {before:?}");
    }
    // Stop it.
    // SAFETY: kill of our own child.
    assert_eq!(unsafe { libc::kill(demo_pid as i32, stop) }, 0);
    let st = wait_child(child);
    if stop == libc::SIGKILL {
        assert_eq!(st.signal(), Some(libc::SIGKILL));
    } else {
        assert_eq!(st.code(), Some(0), "demo after signal {stop}: {st}");
    }
    // Nothing of it remains.
    wait_demo_gone(demo_pid, &format!(" after signal {stop}"));
    if stop != libc::SIGKILL {
        assert!(!sock.exists(), "socket file left behind");
    }
}

use std::os::unix::process::ExitStatusExt;

#[test]
fn demo_stops_cleanly_on_sigint() {
    demo(libc::SIGINT);
}

#[test]
fn demo_stops_cleanly_on_sigterm() {
    demo(libc::SIGTERM);
}

#[test]
fn demo_leaves_nothing_on_sigkill() {
    demo(libc::SIGKILL);
}

/// `foster demo --events`: the supervisor's lines for people go to the log beside the socket
/// (they did not exist before, and the log was empty), and a stop says how the tree ended,
/// naming what had to be SIGKILLed and why, instead of reading like a failure.
#[test]
fn the_demo_keeps_its_supervisors_lines_and_says_how_its_tree_ended() {
    let d = Dir::new("ctl", "demolog");
    let sock = d.path("demo.sock");
    let log = d.path("demo.log");
    let (mut guard, rx) = start_demo("--events", &sock, Stdio::piped());
    let child = &mut guard.0;
    let demo_pid = child.id();
    let mut err = child.stderr.take().unwrap();
    let stderr = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    // The orphaner's first orphan given its policy (the orphan ignores it for 15s), and the
    // worker launched (it waits for the demo's migration to complete).
    let t = Instant::now();
    let mut events: Vec<String> = Vec::new();
    while !(events
        .iter()
        .any(|l| l.contains("orphaner's") && l.contains("(orphan policy;"))
        && events
            .iter()
            .any(|l| l.contains("worker[") && l.ends_with("] launched")))
    {
        let l = rx
            .recv_timeout(LIMIT.saturating_sub(t.elapsed()))
            .expect("the demo's events");
        events.push(l);
    }
    // SAFETY: kill of our own child.
    assert_eq!(unsafe { libc::kill(demo_pid as i32, libc::SIGINT) }, 0);
    assert_eq!(wait_child(child).code(), Some(0), "the demo's normal end");
    events.extend(rx.iter());
    // The events' lines (each after its time), not the helpers' relayed ones (`nested ! ...`).
    events.retain(|l| {
        l.split_once("  ")
            .is_some_and(|(t, _)| t.len() == 12 && t.as_bytes()[2] == b':')
    });
    let stderr = stderr.join().unwrap();
    let log_text = std::fs::read_to_string(&log).unwrap();

    // What the shutdown SIGKILLed (the orphan, unless its 15s grace ran out before the stop).
    let stop = events
        .iter()
        .position(|l| l.contains("shutting down on SIGTERM"))
        .unwrap_or_else(|| panic!("no shutdown event: {events:#?}"));
    let killed: Vec<&str> = events[stop..]
        .iter()
        .filter_map(|l| {
            let (_, rest) = l.split_once("sent SIGKILL to ")?;
            rest.strip_suffix(" (still running at the end of its grace)")
        })
        .collect();
    let said = "foster demo: the supervisor stopped its tree; nothing it started is left running";
    let line = stderr
        .lines()
        .find(|l| l.starts_with(said))
        .unwrap_or_else(|| panic!("how the tree ended:\n{stderr}"));
    match killed.as_slice() {
        [] => assert_eq!(line, format!("{said}."), "{stderr}"),
        [one] => assert_eq!(
            line,
            format!(
                "{said} ({one} was SIGKILLed after its grace: the orphaner's orphans ignore their \
                 signal on purpose)."
            ),
            "{events:#?}"
        ),
        more => panic!("more SIGKILLs than the orphan: {more:?}\n{events:#?}"),
    }
    assert!(!stderr.contains("exit code 4"), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "foster demo: the supervisor's own lines are in {}",
            log.display()
        )),
        "{stderr}"
    );

    // The log holds the supervisors' lines (the nested one's too), in words, the outer one's
    // end last.
    let lines: Vec<&str> = log_text.lines().collect();
    assert!(
        lines.iter().all(|l| l.starts_with("foster: ")),
        "{log_text}"
    );
    assert!(
        lines[0].starts_with("foster: supervisor ")
            && lines[0].ends_with(&format!("; control socket {}", sock.display())),
        "{log_text}"
    );
    for h in ["nested", "worker", "crasher", "orphaner"] {
        let launched = format!("foster: {h}[");
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with(&launched) && l.ends_with("] launched")),
            "{h}: {log_text}"
        );
    }
    assert!(
        lines.contains(&"foster: shutting down on SIGTERM: stopping every helper"),
        "{log_text}"
    );
    let end = if killed.is_empty() {
        "foster: supervisor stopped with exit status 0 (everything ended in order)"
    } else {
        "foster: supervisor stopped with exit status 4 (something had to be SIGKILLed after its \
         grace)"
    };
    assert_eq!(lines.last(), Some(&end), "{log_text}");

    wait_demo_gone(demo_pid, "");
}

/// `foster ctl status` into a pipe cuts nothing: a command line longer than any terminal is
/// printed whole (it was cut at 48 characters).
#[test]
fn ctl_status_into_a_pipe_cuts_no_command_line() {
    let d = Dir::new("ctl-status", "pipe");
    let (mut run, full) = common::long_command::start(&d);
    let out = run.ctl(&["status"]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.contains("/bin/sleep 1000"))
        .unwrap_or_else(|| panic!("no line of the helper:\n{text}"));
    assert!(line.contains(&full), "cut in a pipe: {line:?}");
    assert!(!line.contains('…'), "cut in a pipe: {line:?}");
    assert!(run.stop().success());
}
