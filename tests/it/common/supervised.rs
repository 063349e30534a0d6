//! A `foster run` under test, driven through its control socket: started on a configuration
//! written to the test's directory, its event stream followed from its start (read as
//! [`Events`], which the run derefs to), its standard error's lines where a test reads them,
//! `ctl` commands, `ctl --json status` (its helpers by name, or polled until it says
//! something), and an orderly stop (`ctl shutdown`, or SIGTERM) with every event to the end;
//! terminated and reaped on drop. The same without its events ([`Plain`]), for the tests that
//! count the socket's connections; `foster ctl` on a socket (its `--json status` once, or
//! polled), a bounded wait for a child, an orderly end of one. Shared by the tests of start
//! order, states, reload, readiness and the control socket.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::Dir;
use super::LIMIT;
use super::events::Events;

const FOSTER: &str = env!("CARGO_BIN_EXE_foster");

/// A `foster run` under test, with its events followed from its start; terminated and reaped
/// on drop if still running.
pub struct Run {
    pub child: Child,
    pub socket: PathBuf,
    /// Its events (the run's own methods and fields through `Deref`: `run.until(..)`,
    /// `run.seen`).
    pub events: Events,
}

impl std::ops::Deref for Run {
    type Target = Events;
    fn deref(&self) -> &Events {
        &self.events
    }
}

impl std::ops::DerefMut for Run {
    fn deref_mut(&mut self) -> &mut Events {
        &mut self.events
    }
}

impl Run {
    /// Starts `foster run` on `config` (with `extra` arguments) and follows its events: the
    /// stream's backlog holds those from before the connection (the socket is bound before
    /// the first launch).
    pub fn start(d: &Dir, config: &str, extra: &[&str]) -> Run {
        let (cmd, socket) = Run::command(d, config, extra);
        Run::spawn(cmd, socket)
    }

    /// [`Run::start`], the lines of its standard error (from its first) handed to the test
    /// rather than let go: read on a thread ([`super::lines::lines`]), so that a full pipe
    /// never stalls it.
    pub fn start_with_stderr(
        d: &Dir,
        config: &str,
        extra: &[&str],
    ) -> (Run, std::sync::mpsc::Receiver<String>) {
        let (cmd, socket) = Run::command(d, config, extra);
        Run::spawn_with_lines(cmd, socket)
    }

    /// [`Run::start`] run through `wrap` (a program and its arguments, `foster` after them:
    /// `setpriv` as another user), with `env` set; the lines of its standard error as they
    /// come.
    pub fn start_wrapped(
        d: &Dir,
        config: &str,
        extra: &[&str],
        wrap: &[&str],
        env: &[(&str, &str)],
    ) -> (Run, std::sync::mpsc::Receiver<String>) {
        let socket = d.path("run.sock");
        let mut cmd = Command::new(wrap[0]);
        cmd.args(&wrap[1..])
            .arg(FOSTER)
            .arg("run")
            .arg(d.file("run.toml", config))
            .args(extra)
            .arg("--socket")
            .arg(&socket)
            .envs(env.iter().copied());
        Run::spawn_with_lines(cmd, socket)
    }

    /// Starts `cmd`, its standard error's lines handed to the test, read on a thread
    /// ([`super::lines::lines`]) so that a full pipe never stalls it.
    fn spawn_with_lines(cmd: Command, socket: PathBuf) -> (Run, std::sync::mpsc::Receiver<String>) {
        let mut run = Run::spawn_keeping(cmd, socket, true);
        let err = run.child.stderr.take().expect("its standard error, kept");
        (run, super::lines::lines(err))
    }

    /// [`Run::start`], its standard error written into the file `stderr` when given (read and
    /// let go otherwise).
    pub fn start_logging(d: &Dir, config: &str, extra: &[&str], stderr: Option<&Path>) -> Run {
        let (cmd, socket) = Run::command(d, config, extra);
        match stderr {
            Some(path) => {
                let file = std::fs::File::create(path).unwrap();
                Run::spawn_with(cmd, socket, file.into(), false)
            }
            None => Run::spawn(cmd, socket),
        }
    }

    /// `foster run CONFIG EXTRA --socket SOCKET`, the configuration written to the test's
    /// directory; the socket's path.
    fn command(d: &Dir, config: &str, extra: &[&str]) -> (Command, PathBuf) {
        let socket = d.path("run.sock");
        let mut cmd = Command::new(FOSTER);
        cmd.arg("run")
            .arg(d.file("run.toml", config))
            .args(extra)
            .arg("--socket")
            .arg(&socket);
        (cmd, socket)
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

    fn spawn(cmd: Command, socket: PathBuf) -> Run {
        Run::spawn_keeping(cmd, socket, false)
    }

    /// Starts `cmd` and follows its events once `socket` answers; its standard error is left
    /// in `child.stderr` when `keep_stderr`, else read and let go.
    fn spawn_keeping(cmd: Command, socket: PathBuf, keep_stderr: bool) -> Run {
        Run::spawn_with(cmd, socket, Stdio::piped(), keep_stderr)
    }

    /// Starts `cmd` with `stderr` as its standard error (see [`Run::spawn_keeping`]).
    fn spawn_with(mut cmd: Command, socket: PathBuf, stderr: Stdio, keep_stderr: bool) -> Run {
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .unwrap();
        let mut child = child;
        let stream = wait_socket(&socket, &mut child);
        // Its standard error read (and let go) from here on: a full pipe would stall it.
        if let Some(mut err) = child.stderr.take_if(|_| !keep_stderr) {
            std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
        }
        Run {
            child,
            socket,
            events: Events::follow(stream),
        }
    }

    /// [`Run::start`] with `--no-contain`: the events' pids (the supervisor's) are this test's.
    pub fn start_uncontained(d: &Dir, config: &str) -> Run {
        Run::start(d, config, &["--no-contain"])
    }

    pub fn ctl(&self, args: &[&str]) -> Output {
        ctl_command(&self.socket).args(args).output().unwrap()
    }

    /// `ctl --json status`: the snapshot.
    pub fn status(&self) -> Value {
        status_reply(&self.socket)["status"].take()
    }

    /// The status once `pred` holds for it (polled: each poll is an answer of the supervisor's
    /// loop, nothing is timed).
    pub fn wait_status(&self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        wait_status_reply(&self.socket, what, |v| pred(&v["status"]))["status"].take()
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
        self.events.rest();
        use std::os::unix::process::ExitStatusExt;
        let st = self.wait();
        st.code().unwrap_or_else(|| 128 + st.signal().unwrap())
    }

    pub fn wait(&mut self) -> std::process::ExitStatus {
        wait_child(&mut self.child)
    }

    /// Every event up to the supervisor's `stopped` (after it was asked to end).
    pub fn drain(&mut self) {
        self.until("stopped", |e| e["event"] == "stopped");
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        terminate(&mut self.child);
    }
}

/// A `foster run` under test that no connection of the test's follows (its events are not
/// read): for the tests that count the socket's connections. Terminated and reaped on drop.
pub struct Plain {
    pub child: Child,
    pub socket: PathBuf,
}

impl Plain {
    /// `foster run CONFIG --socket SOCKET`, once the socket answers a `status` (it is bound
    /// before any helper starts); its standard error read and let go from then on.
    pub fn start(config: &Path, socket: &Path) -> Plain {
        Plain::start_with(config, socket, &[])
    }

    /// [`Plain::start`] with more options of `foster run`.
    pub fn start_with(config: &Path, socket: &Path, options: &[&str]) -> Plain {
        let mut child = Command::new(FOSTER)
            .arg("run")
            .arg(config)
            .arg("--socket")
            .arg(socket)
            .args(options)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut s = connect(socket, &mut child);
        s.write_all(b"{\"request\":\"status\"}\n").unwrap();
        s.set_read_timeout(Some(LIMIT)).unwrap();
        let mut reply = String::new();
        BufReader::new(s).read_line(&mut reply).unwrap();
        let v: Value = serde_json::from_str(&reply).expect("a JSON reply line");
        assert!(v.get("status").is_some(), "{v}");
        if let Some(mut err) = child.stderr.take() {
            std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
        }
        Plain {
            child,
            socket: socket.to_path_buf(),
        }
    }

    /// [`Plain::start`] on `config` written to the test's directory (`a.toml`), its socket
    /// there (`a.sock`).
    pub fn start_in(d: &Dir, config: &str) -> Plain {
        Plain::start(&d.file("a.toml", config), &d.path("a.sock"))
    }

    pub fn ctl(&self, args: &[&str]) -> Output {
        ctl_command(&self.socket).args(args).output().unwrap()
    }

    /// `ctl --json status`: the whole reply (`version`, `status`).
    pub fn status_reply(&self) -> Value {
        status_reply(&self.socket)
    }

    /// Stops the supervisor (`ctl shutdown`) and waits for it; its exit status.
    pub fn stop(mut self) -> std::process::ExitStatus {
        let out = self.ctl(&["shutdown"]);
        assert!(out.status.success(), "{out:?}");
        wait_child(&mut self.child)
    }
}

impl Drop for Plain {
    fn drop(&mut self) {
        terminate(&mut self.child);
    }
}

/// `foster ctl --socket SOCKET`, for the arguments to follow.
pub fn ctl_command(socket: &Path) -> Command {
    let mut c = Command::new(FOSTER);
    c.arg("ctl").arg("--socket").arg(socket);
    c
}

/// `foster ctl --json status` on `socket`, which must succeed: the whole reply (`version`,
/// `status`).
pub fn status_reply(socket: &Path) -> Value {
    let out = ctl_command(socket)
        .args(["--json", "status"])
        .output()
        .unwrap();
    assert!(out.status.success(), "ctl status: {out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// One `status` request on `socket`'s own protocol, its one reply line within [`LIMIT`]: the
/// supervisor's pids (its namespace's, where `ctl` gives this one's).
pub fn raw_status(socket: &Path) -> Value {
    let mut s = UnixStream::connect(socket).unwrap();
    s.write_all(b"{\"request\":\"status\"}\n").unwrap();
    s.set_read_timeout(Some(LIMIT)).unwrap();
    let mut reply = String::new();
    BufReader::new(s).read_line(&mut reply).unwrap();
    serde_json::from_str(&reply).expect("a JSON reply line")
}

/// The [`status_reply`] once `pred` holds for it (polled: each poll is an answer of the
/// supervisor's loop); past [`LIMIT`] the test fails, saying the status was never `what`.
pub fn wait_status_reply(socket: &Path, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let t = Instant::now();
    loop {
        let v = status_reply(socket);
        if pred(&v) {
            return v;
        }
        assert!(t.elapsed() < LIMIT, "status never {what}: {v:#}");
        // Safety net only: each poll is an answer of the supervisor's loop.
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits for `child` to end (a failed test past [`LIMIT`]); its exit status.
pub fn wait_child(child: &mut Child) -> std::process::ExitStatus {
    let t = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        assert!(t.elapsed() < LIMIT, "process {} did not end", child.id());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A child of the test's (a `foster demo`, a `foster run`) ended by [`terminate`] when the
/// guard is dropped: a test that fails half-way leaves nothing running.
pub struct Guard(pub Child);

impl Drop for Guard {
    fn drop(&mut self) {
        terminate(&mut self.0);
    }
}

impl std::ops::Deref for Guard {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Guard {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

/// Ends `child` (a `foster run`, or another program of the test's that ends on SIGTERM) in
/// order: SIGTERM (the orderly shutdown ends its tree), a bounded wait, then SIGKILL as a last
/// resort; reaped in every case. Whether it ended before the SIGKILL.
pub fn terminate(child: &mut Child) -> bool {
    if child.try_wait().ok().flatten().is_some() {
        return true;
    }
    // SAFETY: kill of our own unreaped child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let t = Instant::now();
    while t.elapsed() < LIMIT {
        if child.try_wait().ok().flatten().is_some() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    false
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
