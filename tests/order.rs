//! Helpers' states, start order (`depends_on`), runtime control (`ctl start`, `ctl stop`) and
//! the shutdown's order, end to end on real processes. The observable is the supervisor's own
//! record: its event stream (followed through the control socket from before the first launch
//! matters) and `ctl status --json`; FIFOs hold helpers where a test needs them held. Deadlines
//! are only safety nets.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

const FOSTER: &str = env!("CARGO_BIN_EXE_foster");
const LIMIT: Duration = Duration::from_secs(30);

mod common;
use common::Dir;

/// A `foster run` under test, with its events followed from its start; terminated and reaped
/// on drop if still running.
struct Run {
    child: Child,
    socket: PathBuf,
    events: mpsc::Receiver<Value>,
    /// Every event read so far, in order.
    seen: Vec<Value>,
}

impl Run {
    /// Starts `foster run` on `config` and follows its events: the stream's backlog holds
    /// those from before the connection (the socket is bound before the first launch).
    fn start(d: &Dir, config: &str) -> Run {
        let cfg = d.file("run.toml", config);
        let socket = d.path("run.sock");
        let child = Command::new(FOSTER)
            .arg("run")
            .arg(&cfg)
            .arg("--socket")
            .arg(&socket)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut child = child;
        let stream = wait_socket(&socket, &mut child);
        let (tx, rx) = mpsc::channel();
        let r = stream.try_clone().unwrap();
        std::thread::spawn(move || {
            let _keep = stream;
            for line in BufReader::new(r).lines() {
                let Ok(line) = line else { break };
                let v: Value = serde_json::from_str(&line).expect("a JSON reply line");
                if v.get("event").is_some() && tx.send(v["event"].clone()).is_err() {
                    break;
                }
            }
        });
        Run {
            child,
            socket,
            events: rx,
            seen: Vec::new(),
        }
    }

    /// Reads events until one satisfies `f`; returns its index in [`Run::seen`].
    fn until(&mut self, what: &str, f: impl Fn(&Value) -> bool) -> usize {
        if let Some(i) = self.seen.iter().position(&f) {
            return i;
        }
        let t = Instant::now();
        loop {
            let left = LIMIT.saturating_sub(t.elapsed());
            match self.events.recv_timeout(left) {
                Ok(v) => {
                    self.seen.push(v);
                    if f(self.seen.last().unwrap()) {
                        return self.seen.len() - 1;
                    }
                }
                Err(_) => panic!("no {what} within {LIMIT:?}; events: {:#?}", self.seen),
            }
        }
    }

    /// The index of the `state` event putting `helper` in `state`.
    fn state(&mut self, helper: &str, state: &str) -> usize {
        self.until(&format!("{helper} {state}"), |e| {
            e["event"] == "state" && e["helper"] == helper && e["state"] == state
        })
    }

    /// The index of `helper`'s launch number `attempt`.
    fn launch(&mut self, helper: &str, attempt: u64) -> usize {
        self.until(&format!("launch {attempt} of {helper}"), |e| {
            e["event"] == "launch" && e["helper"] == helper && e["attempt"] == attempt
        })
    }

    fn ctl(&self, args: &[&str]) -> Output {
        Command::new(FOSTER)
            .arg("ctl")
            .arg("--socket")
            .arg(&self.socket)
            .args(args)
            .output()
            .unwrap()
    }

    /// `ctl --json status`, its helpers by name.
    fn helpers(&self) -> serde_json::Map<String, Value> {
        let out = self.ctl(&["--json", "status"]);
        assert!(out.status.success(), "{out:?}");
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v["status"]["helpers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| (h["name"].as_str().unwrap().to_string(), h.clone()))
            .collect()
    }

    /// Stops the supervisor (`ctl stop`) and waits for it; its exit status.
    fn stop(&mut self) -> std::process::ExitStatus {
        let out = self.ctl(&["stop"]);
        assert!(out.status.success(), "{out:?}");
        self.wait()
    }

    fn wait(&mut self) -> std::process::ExitStatus {
        let t = Instant::now();
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(t.elapsed() < LIMIT, "foster run did not end");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Every event up to the supervisor's `stopped` (after it was asked to end).
    fn drain(&mut self) {
        self.until("stopped", |e| e["event"] == "stopped");
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_some() {
            return;
        }
        // SAFETY: kill of our own unreaped child: the orderly shutdown ends its tree.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let t = Instant::now();
        while t.elapsed() < LIMIT {
            if self.child.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Connects to the socket once it answers, and asks for the event stream from its start.
fn wait_socket(socket: &Path, child: &mut Child) -> UnixStream {
    let t = Instant::now();
    loop {
        if let Ok(mut s) = UnixStream::connect(socket) {
            s.write_all(b"{\"request\":\"events\"}\n").unwrap();
            return s;
        }
        if let Ok(Some(st)) = child.try_wait() {
            let mut err = String::new();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            panic!("foster run ended ({st}) before answering: {err}");
        }
        assert!(t.elapsed() < LIMIT, "socket never answered");
        // Safety net only: the socket is bound before any helper starts.
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Every state of the set appears in `ctl status` (JSON and text) and as `state` events: a
/// one-shot that exits 0 is `completed`, one that exits 1 `failed` with its status, a sleeper
/// `running`.
#[test]
fn states_are_shown_in_status_and_events() {
    let d = Dir::new("order", "states");
    let mut run = Run::start(
        &d,
        r#"
[[helper]]
name = "ok"
command = ["true"]

[[helper]]
name = "bad"
command = ["sh", "-c", "exit 1"]

[[helper]]
name = "sleeper"
command = ["sleep", "600"]
"#,
    );
    run.state("ok", "completed");
    let failed = run.state("bad", "failed");
    assert_eq!(
        run.seen[failed]["detail"], "(exit code 1)",
        "{:#?}",
        run.seen
    );
    let launched = run.launch("sleeper", 1);
    assert!(run.state("sleeper", "running") > launched);
    let h = run.helpers();
    assert_eq!(h["ok"]["state"], "completed");
    assert_eq!(h["bad"]["state"], "failed");
    assert_eq!(h["bad"]["detail"], "(exit code 1)");
    assert_eq!(h["sleeper"]["state"], "running");
    let pid = h["sleeper"]["identity"]["pid"].as_i64().unwrap();
    let out = run.ctl(&["status"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .any(|l| l.contains("bad") && l.contains("failed") && l.contains("(exit code 1)")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.contains("ok") && l.contains("completed")),
        "{text}"
    );
    let st = run.stop();
    assert!(st.success(), "{st}");
    run.drain();
    run.state("sleeper", "stopping");
    run.state("sleeper", "stopped");
    assert!(
        common::process(pid as i32).is_none(),
        "sleeper {pid} outlived its supervisor"
    );
}
