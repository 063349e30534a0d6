//! A `foster run` under test, driven through its control socket: started on a configuration
//! written to the test's directory, its event stream followed from its start, `ctl` commands,
//! `ctl --json status` (its helpers by name, or polled until it says something), and an orderly
//! stop (`ctl shutdown`, or SIGTERM) with every event to the end; terminated and reaped on
//! drop. Shared by the tests of start order, states, reload, readiness and the control socket.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::Dir;

const FOSTER: &str = env!("CARGO_BIN_EXE_foster");
/// Safety net of every wait here.
pub const LIMIT: Duration = Duration::from_secs(30);

/// A `foster run` under test, with its events followed from its start; terminated and reaped
/// on drop if still running.
pub struct Run {
    pub child: Child,
    pub socket: PathBuf,
    events: mpsc::Receiver<Value>,
    /// Every event read so far, in order.
    pub seen: Vec<Value>,
}

impl Run {
    /// Starts `foster run` on `config` (with `extra` arguments) and follows its events: the
    /// stream's backlog holds those from before the connection (the socket is bound before
    /// the first launch).
    pub fn start(d: &Dir, config: &str, extra: &[&str]) -> Run {
        let socket = d.path("run.sock");
        let mut cmd = Command::new(FOSTER);
        cmd.arg("run")
            .arg(d.file("run.toml", config))
            .args(extra)
            .arg("--socket")
            .arg(&socket);
        Run::spawn(cmd, socket)
    }

    /// [`Run::start`] without `--socket`: the socket at its default path,
    /// `RUNTIME/foster/run.sock` for XDG_RUNTIME_DIR=RUNTIME (a private directory of the test's).
    pub fn start_in_runtime_dir(d: &Dir, config: &str, extra: &[&str]) -> (Run, PathBuf) {
        use std::os::unix::fs::DirBuilderExt;
        let runtime = d.path("runtime");
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&runtime)
            .unwrap();
        let mut cmd = Command::new(FOSTER);
        cmd.arg("run")
            .arg(d.file("run.toml", config))
            .args(extra)
            .env("XDG_RUNTIME_DIR", &runtime)
            .env_remove("FOSTER_SOCKET");
        (Run::spawn(cmd, runtime.join("foster/run.sock")), runtime)
    }

    fn spawn(mut cmd: Command, socket: PathBuf) -> Run {
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut child = child;
        let stream = wait_socket(&socket, &mut child);
        // Its standard error read (and let go) from here on: a full pipe would stall it.
        if let Some(mut err) = child.stderr.take() {
            std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
        }
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

    /// [`Run::start`] with `--no-contain`: the events' pids (the supervisor's) are this test's.
    pub fn start_uncontained(d: &Dir, config: &str) -> Run {
        Run::start(d, config, &["--no-contain"])
    }

    /// Reads events until one satisfies `f`; returns its index in [`Run::seen`].
    pub fn until(&mut self, what: &str, f: impl Fn(&Value) -> bool) -> usize {
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

    /// The first event (seen already, or to come) for which `f` holds.
    pub fn wait_for(&mut self, what: &str, f: impl Fn(&Value) -> bool) -> Value {
        let i = self.until(what, f);
        self.seen[i].clone()
    }

    /// The events received so far, without waiting.
    pub fn so_far(&mut self) -> &[Value] {
        while let Ok(v) = self.events.try_recv() {
            self.seen.push(v);
        }
        &self.seen
    }

    /// The index of the `state` event putting `helper` in `state`.
    pub fn state(&mut self, helper: &str, state: &str) -> usize {
        self.until(&format!("{helper} {state}"), |e| {
            e["event"] == "state" && e["helper"] == helper && e["state"] == state
        })
    }

    /// The index of `helper`'s launch number `attempt`.
    pub fn launch(&mut self, helper: &str, attempt: u64) -> usize {
        self.until(&format!("launch {attempt} of {helper}"), |e| {
            e["event"] == "launch" && e["helper"] == helper && e["attempt"] == attempt
        })
    }

    pub fn ctl(&self, args: &[&str]) -> Output {
        Command::new(FOSTER)
            .arg("ctl")
            .arg("--socket")
            .arg(&self.socket)
            .args(args)
            .output()
            .unwrap()
    }

    /// `ctl --json status`: the snapshot.
    pub fn status(&self) -> Value {
        let out = self.ctl(&["--json", "status"]);
        assert!(out.status.success(), "ctl status: {out:?}");
        let mut v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v["status"].take()
    }

    /// The status once `pred` holds for it (polled: each poll is an answer of the supervisor's
    /// loop, nothing is timed).
    pub fn wait_status(&self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let t = Instant::now();
        loop {
            let s = self.status();
            if pred(&s) {
                return s;
            }
            assert!(t.elapsed() < LIMIT, "status never {what}: {s:#}");
            // Safety net only: each poll is an answer of the supervisor's loop.
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `ctl --json status`, its helpers by name.
    pub fn helpers(&self) -> serde_json::Map<String, Value> {
        self.status()["helpers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| (h["name"].as_str().unwrap().to_string(), h.clone()))
            .collect()
    }

    /// Stops the supervisor (`ctl shutdown`) and waits for it; its exit status.
    pub fn stop(&mut self) -> std::process::ExitStatus {
        let out = self.ctl(&["shutdown"]);
        assert!(out.status.success(), "{out:?}");
        self.wait()
    }

    /// SIGTERM (the same orderly shutdown), every event to the end, the exit code (128 + the
    /// signal that ended it).
    pub fn terminate(&mut self) -> i32 {
        // SAFETY: kill of our own unreaped child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        self.finish()
    }

    /// Every event to the end (the stream closes when the supervisor exits), the exit code
    /// (128 + the signal that ended it).
    pub fn finish(&mut self) -> i32 {
        while let Ok(v) = self.events.recv_timeout(LIMIT) {
            self.seen.push(v);
        }
        use std::os::unix::process::ExitStatusExt;
        let st = self.wait();
        st.code().unwrap_or_else(|| 128 + st.signal().unwrap())
    }

    pub fn wait(&mut self) -> std::process::ExitStatus {
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
    pub fn drain(&mut self) {
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
pub fn wait_socket(socket: &Path, child: &mut Child) -> UnixStream {
    let mut s = connect(socket, child);
    s.write_all(b"{\"request\":\"events\"}\n").unwrap();
    s
}

/// A connection to the socket of `child`, a `foster run` starting, once it accepts one; a
/// failed test, with its standard error (piped), if it ends first.
pub fn connect(socket: &Path, child: &mut Child) -> UnixStream {
    let t = Instant::now();
    loop {
        if let Ok(s) = UnixStream::connect(socket) {
            return s;
        }
        if let Ok(Some(st)) = child.try_wait() {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                e.read_to_string(&mut err).unwrap();
            }
            panic!("foster run ended ({st}) before answering: {err}");
        }
        assert!(t.elapsed() < LIMIT, "socket never answered");
        // Safety net only: the socket is bound before any helper starts.
        std::thread::sleep(Duration::from_millis(10));
    }
}
