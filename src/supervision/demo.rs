//! `foster demo`: a supervisor of a built-in example tree, every role at once.
//!
//! Owns the demo's two processes. This process (the demo) binds the control socket, then
//! launches `foster run` on the embedded [`CONFIG`] (`examples/demo.toml`, given on standard
//! input) through the parent-death gate, handing it the listening socket; so the demo can
//! connect at once, and the supervisor gets SIGTERM (its orderly shutdown) if the demo dies,
//! even by SIGKILL. The supervisor contains its tree in its own PID namespace wherever it can
//! (`foster run`'s default: as root, or through a user namespace), and the status says whether
//! it did.
//! The supervisor's standard error (its lines for people, `foster: crasher[7] exited with code
//! 3; restarting in 1s (1st in a row)`) goes to a log file beside the socket, so that it never
//! mixes with what the demo shows; its standard output (the helpers' lines) too under the
//! dashboard, else it is printed among the events. The demo then follows the supervisor's
//! events through the socket and prints them; SIGINT and SIGTERM are forwarded to the
//! supervisor as SIGTERM, and the demo exits with its status once it has ended, saying how the
//! tree ended ([`ended_text`]: what had to be SIGKILLed, by name).
//!
//! [`start`] (the supervisor running, its socket known) is separate from [`run`] (printing),
//! so that a dashboard can show the same tree; [`Demo::stop`] is the dashboard's teardown.

use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use nix::sys::signal::Signal;

use crate::base::sys::{PollFd, poll};
use crate::gate::policy::Policy;
use crate::gate::spawner::{LaunchSpec, Spawner};
use crate::process::identity::Identity;
use crate::process::reaper::{self, ExitStatus, Reaper, Routed};
use crate::process::signal::{SigBits, SignalFd};
use crate::supervision::control::client::{self, Connection};
use crate::supervision::control::protocol::{ReplyBody, Request};
use crate::supervision::control::server;
use crate::supervision::event::{Event, SignalReason};

/// The demo tree, `examples/demo.toml`.
pub const CONFIG: &str = include_str!("../../examples/demo.toml");

/// Every process of a demo carries this variable, set to the demo's pid.
pub const ENV_MARKER: &str = "FOSTER_DEMO";

/// Options of `foster demo`.
#[derive(Debug, Clone, Default)]
pub struct DemoOptions {
    /// Print the events as JSON lines.
    pub json: bool,
    /// The control socket (default: `demo.sock` in the default socket directory). The
    /// supervisor's standard error, its lines for people, goes to a file beside it (its path
    /// with `.log`).
    pub socket: Option<PathBuf>,
    /// Send the supervisor's standard output to its log file too, not only its standard error
    /// (the terminal is the dashboard's): the helpers' lines are then kept but not relayed
    /// (`foster run --output none`). Otherwise they are relayed among the events (as JSON with
    /// `json`).
    pub log_to_file: bool,
}

/// A running demo supervisor.
pub struct Demo {
    /// The supervisor process (`foster run`, the outer one when contained).
    pub supervisor: Identity,
    /// Its control socket.
    pub socket: PathBuf,
    /// Whether the tree runs in its own PID namespace.
    pub contained: bool,
    /// Where the supervisor's standard error goes (and its standard output, with
    /// [`DemoOptions::log_to_file`]).
    pub log: PathBuf,
    reaper: Reaper<()>,
    signals: SignalFd,
    _spawner: Spawner,
}

/// Starts the demo's supervisor. Call it on the main thread before any other thread exists:
/// it blocks SIGCHLD, SIGINT and SIGTERM (consumed by [`Demo::wait`]).
pub fn start(opts: &DemoOptions) -> io::Result<Demo> {
    reaper::block_signals(&[Signal::SIGINT, Signal::SIGTERM])?;
    let mut reaper: Reaper<()> = Reaper::new()?;
    let signals = SignalFd::new(SigBits::EMPTY.with(libc::SIGINT).with(libc::SIGTERM))?;
    let (listener, path) = listen(&socket_path(opts))?;
    let config_r = config_pipe()?;
    let exe = std::env::current_exe()?;
    let args = run_args(&path, listener.as_raw_fd(), opts);
    let mut spec = supervisor_spec(exe, args, config_r);
    let log = log_to_file(&mut spec, &path, opts)?;
    let spawner = Spawner::start()?;
    let launched = reaper.launch((), || spawner.launch(spec).map(|l| l.pid));
    // Only the supervisor holds the listener from here: if it dies, connecting fails.
    drop(listener);
    let pid = launched.map_err(|e| io::Error::other(format!("cannot start foster run: {e}")))?;
    let supervisor = Identity::of(pid).unwrap_or(Identity { pid, start_time: 0 });
    // Whether it could contain its tree: its status says (it answers once it runs).
    let contained = Connection::connect(&path)
        .and_then(|mut c| c.status())
        .is_ok_and(|s| s.supervisor.contained);
    Ok(Demo {
        supervisor,
        socket: path,
        contained,
        log,
        reaper,
        signals,
        _spawner: spawner,
    })
}

/// The demo's control socket: the one asked for, else `demo.sock` in the default directory,
/// or one named after this process when another demo answers there.
fn socket_path(opts: &DemoOptions) -> PathBuf {
    match &opts.socket {
        Some(p) => p.clone(),
        None => {
            let p = server::default_path("demo");
            if std::os::unix::net::UnixStream::connect(&p).is_ok() {
                server::default_path(&format!("demo-{}", std::process::id()))
            } else {
                p
            }
        }
    }
}

/// The control socket bound at `path`, its listener left open across exec for the supervisor;
/// with the path it was bound at.
fn listen(path: &Path) -> io::Result<(std::os::unix::net::UnixListener, PathBuf)> {
    let bound = server::bind(path).map_err(io::Error::other)?;
    let (listener, path) = server::into_listener(bound);
    // The supervisor inherits the listener under its own number.
    // SAFETY: clearing FD_CLOEXEC on a descriptor we own.
    unsafe { libc::fcntl(listener.as_raw_fd(), libc::F_SETFD, 0) };
    Ok((listener, path))
}

/// A pipe holding the demo's configuration, written whole: its read end.
fn config_pipe() -> io::Result<std::os::fd::OwnedFd> {
    let (config_r, config_w) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(io::Error::from)?;
    // The configuration is a few KiB: it fits in the pipe, so this write never blocks.
    let mut w = std::fs::File::from(config_w);
    w.write_all(CONFIG.as_bytes())?;
    Ok(config_r)
}

/// The arguments of `foster run` for the demo: its socket at `path`, inherited as `fd`, and
/// the configuration on standard input.
fn run_args(path: &Path, fd: i32, opts: &DemoOptions) -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = vec![
        "run".into(),
        "--socket".into(),
        path.into(),
        "--socket-fd".into(),
        fd.to_string().into(),
    ];
    // The helpers' output: not on the terminal while the dashboard owns it (kept, for its
    // log pane), as JSON among JSON events, else named lines among the events.
    args.push("--output".into());
    args.push(
        if opts.log_to_file {
            "none"
        } else if opts.json {
            "json"
        } else {
            "text"
        }
        .into(),
    );
    args.push("-".into());
    args
}

/// The launch of the supervisor, `exe` with `args`, reading its configuration from `config`.
fn supervisor_spec(
    exe: PathBuf,
    args: Vec<std::ffi::OsString>,
    config: std::os::fd::OwnedFd,
) -> LaunchSpec {
    let mut spec = LaunchSpec::new(&exe, args, Policy::term());
    spec.stdin = Some(config);
    spec.env.push((
        ENV_MARKER.into(),
        Some(std::process::id().to_string().into()),
    ));
    spec.env
        .push(("FOSTER_EXE".into(), Some(exe.into_os_string())));
    spec
}

/// Sends the supervisor's standard error (and its standard output with
/// [`DemoOptions::log_to_file`]) to a new log file beside the socket at `socket`: its path.
fn log_to_file(spec: &mut LaunchSpec, socket: &Path, opts: &DemoOptions) -> io::Result<PathBuf> {
    let log = socket.with_extension("log");
    let f = std::fs::File::create(&log)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", log.display())))?;
    if opts.log_to_file {
        spec.stdout = Some(f.try_clone()?.into());
    }
    spec.stderr = Some(f.into());
    Ok(log)
}

impl Demo {
    /// Stops the supervisor (SIGTERM: its orderly shutdown, which ends the whole tree) and
    /// waits until it has ended; returns how it ended and what it had to SIGKILL after a grace
    /// (their `signal` events, with pids as this process sees them), followed through the
    /// control socket from before the SIGTERM until the supervisor closed it.
    pub fn stop(&mut self) -> io::Result<(ExitStatus, Vec<Event>)> {
        let follower = Connection::connect(&self.socket).and_then(|mut c| {
            c.ask(&Request::Events {
                backlog: Some(0),
                follow: true,
            })?;
            Ok(c)
        });
        let _ = crate::process::identity::signal(self.supervisor, libc::SIGTERM);
        let mut killed = Kills::default();
        if let Ok(mut conn) = follower {
            let mut pids = conn.pid_map();
            // Until the supervisor exits and its socket closes.
            while let Ok(Some(mut r)) = conn.read() {
                pids.reply(&mut r.body);
                if let ReplyBody::Event(e) = &r.body {
                    killed.see(&e.event);
                }
            }
        }
        let status = self.wait(|_| {})?;
        Ok((status, killed.0))
    }

    /// Waits for the supervisor to end, forwarding SIGINT and SIGTERM to it as SIGTERM;
    /// `on_stop` is called at the first one. Returns how the supervisor ended.
    pub fn wait(&mut self, mut on_stop: impl FnMut(i32)) -> io::Result<ExitStatus> {
        let mut stopping = false;
        loop {
            let mut fds = [
                PollFd::input(self.reaper.raw_fd()),
                PollFd::input(self.signals.as_raw_fd()),
            ];
            poll(&mut fds, None)?;
            if fds[1].ready() {
                if let Some(si) = self.signals.read_signal() {
                    if !stopping {
                        on_stop(si.ssi_signo as i32);
                    }
                    stopping = true;
                    let _ = crate::process::identity::signal(self.supervisor, libc::SIGTERM);
                }
            }
            if fds[0].ready() {
                for r in self.reaper.reap() {
                    if let Routed::Owned { reaped, .. } = r {
                        if reaped.pid == self.supervisor.pid {
                            return Ok(reaped.status);
                        }
                    }
                }
            }
        }
    }
}

/// What the demo prints first.
pub fn banner(d: &Demo) -> String {
    let sock = d.socket.display();
    format!(
        "foster demo: a supervisor (pid {pid}{contained}) and the tree it keeps, live.

  nested    a second `foster run` inside this one: a subreaper with a helper of its own
  worker    a shell whose two children were armed through `foster exec` (the parent-death gate)
  crasher   exits with status 3 three seconds after each start; restarted after 1s, 2s, 4s, 8s
  orphaner  orphans a grandchild every 20s: foster adopts it, classifies the adoption, and
            applies that generation's orphan policy (USR1, ignored; SIGKILL 15s later)

In another terminal:  foster ctl --socket {sock} status
The supervisor's own lines go to {log}
Stop with Ctrl-C: everything started here ends with it (so it does on SIGTERM or SIGKILL).
",
        log = d.log.display(),
        pid = d.supervisor.pid,
        contained = if d.contained {
            ", in its own PID namespace"
        } else {
            ""
        },
    )
}

/// Runs `foster demo`: starts the supervisor, prints the banner and the events as they happen,
/// and returns the supervisor's exit status once it has stopped.
pub fn run(opts: &DemoOptions) -> io::Result<i32> {
    let mut demo = start(opts)?;
    let json = opts.json;
    if !json {
        let mut err = io::stderr().lock();
        let _ = err.write_all(banner(&demo).as_bytes());
        let _ = writeln!(err);
    }
    let socket = demo.socket.clone();
    let printer = std::thread::spawn(move || print_events(&socket, json));
    let mut asked = false;
    let status = demo.wait(|sig| {
        asked = true;
        if !json {
            eprintln!(
                "\n{}: stopping the supervisor (SIGTERM); it ends the whole tree...",
                crate::process::signal::name(sig)
            );
        }
    })?;
    // The supervisor closed its socket when it exited: the printer has seen the last event.
    let killed = printer.join().unwrap_or_default();
    if !json {
        let _ = writeln!(io::stderr(), "{}", ended_text(status, asked, &killed));
        let _ = writeln!(
            io::stderr(),
            "foster demo: the supervisor's own lines are in {}",
            demo.log.display()
        );
    }
    Ok(exit_code(status, asked))
}

/// The demo's exit status once its supervisor has ended: 0 after a stop it asked for that
/// ended the tree (the supervisor's 0, or 4 when something had to be SIGKILLed after its
/// grace, as the orphaner's orphans are: the demo's normal end), else the supervisor's own.
pub fn exit_code(status: ExitStatus, asked: bool) -> i32 {
    let code = status.shell_code();
    if asked && ended_in_order(code) {
        0
    } else {
        code
    }
}

fn ended_in_order(code: i32) -> bool {
    code == crate::supervision::supervisor::EXIT_OK
        || code == crate::supervision::supervisor::EXIT_FORCED
}

/// The SIGKILLs sent during the shutdown when a grace ran out (not those of an orphan's grace
/// while supervising), from a stream of events.
#[derive(Default)]
struct Kills(Vec<Event>, bool);

impl Kills {
    fn see(&mut self, e: &Event) {
        match e {
            Event::Shutdown { .. } => self.1 = true,
            Event::Signal {
                signal,
                reason: SignalReason::GraceExpired,
                ..
            } if self.1 && signal == "SIGKILL" => self.0.push(e.clone()),
            _ => {}
        }
    }
}

/// What the demo says once its supervisor has ended: after a stop it asked for (`asked`), that
/// the tree ended, and who had to be SIGKILLed after a grace (`killed`, their `signal` events:
/// the orphaner's orphans, which ignore their signal on purpose, usually are); otherwise how
/// the supervisor ended, in words.
pub fn ended_text(status: ExitStatus, asked: bool, killed: &[Event]) -> String {
    let code = status.shell_code();
    if !asked || !ended_in_order(code) {
        let words = match status {
            ExitStatus::Exited { code } => crate::supervision::event::status_words(code),
            ExitStatus::Signaled { .. } => None,
        };
        return format!(
            "foster demo: the supervisor ended ({status}{})",
            words.map(|w| format!(": {w}")).unwrap_or_default()
        );
    }
    let mut text = String::from(
        "foster demo: the supervisor stopped its tree; nothing it started is left running",
    );
    if code == crate::supervision::supervisor::EXIT_FORCED {
        let names: Vec<String> = killed.iter().filter_map(Event::process).collect();
        let orphans = !killed.is_empty()
            && killed
                .iter()
                .all(|e| matches!(e, Event::Signal { helper: Some(h), .. } if h == "orphaner"));
        let (who, verb) = match names.len() {
            0 => ("what outlived its grace".to_string(), "was"),
            1 => (names[0].clone(), "was"),
            _ => (names.join(", "), "were"),
        };
        text.push_str(&format!(
            " ({who} {verb} SIGKILLed after its grace{})",
            if orphans {
                ": the orphaner's orphans ignore their signal on purpose"
            } else {
                ""
            }
        ));
    }
    text.push('.');
    text
}

/// Prints the events (as sentences, or JSON lines with `json`) until the supervisor closes its
/// socket; returns what it SIGKILLed after a grace.
fn print_events(socket: &Path, json: bool) -> Vec<Event> {
    let mut conn = match Connection::connect(socket) {
        Ok(c) => c,
        Err(e) => {
            crate::base::logging::report(format_args!("demo events: {e}"));
            return Vec::new();
        }
    };
    let mut killed = Kills::default();
    let mut out = io::stdout().lock();
    let r = client::follow(&mut conn, None, true, |r| {
        if json {
            out.write_all(&r.to_line())?;
        } else if let ReplyBody::Event(e) = &r.body {
            writeln!(out, "{}", client::render_event(e))?;
        }
        if let ReplyBody::Event(e) = &r.body {
            killed.see(&e.event);
        }
        out.flush()?;
        Ok(true)
    });
    if let Err(e) = r {
        crate::base::logging::report(format_args!("demo events: {e}"));
    }
    killed.0
}
