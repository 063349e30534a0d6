//! `foster demo`: a supervisor of a built-in example tree, every role at once.
//!
//! Owns the demo's two processes. This process (the demo) binds the control socket, then
//! launches `foster run` on the embedded [`CONFIG`] (`examples/demo.toml`, given on standard
//! input) through the parent-death gate, handing it the listening socket; so the demo can
//! connect at once, and the supervisor gets SIGTERM (its orderly shutdown) if the demo dies,
//! even by SIGKILL. The supervisor contains its tree in its own PID namespace wherever it can
//! (`foster run`'s default: as root, or through a user namespace), and the status says whether
//! it did.
//! The demo then follows the supervisor's events through the socket and prints them; SIGINT
//! and SIGTERM are forwarded to the supervisor as SIGTERM, and the demo exits with its status
//! once it has ended.
//!
//! [`start`] (the supervisor running, its socket known) is separate from [`run`] (printing),
//! so that a dashboard can show the same tree.

use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};

use crate::control::client::{self, Connection};
use crate::control::protocol::ReplyBody;
use crate::control::server;
use crate::identity::Identity;
use crate::policy::Policy;
use crate::reaper::{self, ExitStatus, Reaper, Routed};
use crate::spawner::{LaunchSpec, Spawner};

/// The demo tree, `examples/demo.toml`.
pub const CONFIG: &str = include_str!("../examples/demo.toml");

/// Every process of a demo carries this variable, set to the demo's pid.
pub const ENV_MARKER: &str = "FOSTER_DEMO";

/// Options of `foster demo`.
#[derive(Debug, Clone, Default)]
pub struct DemoOptions {
    /// Print the events as JSON lines.
    pub json: bool,
    /// The control socket (default: `demo.sock` in the default socket directory).
    pub socket: Option<PathBuf>,
    /// Send the supervisor's standard output and error to a file beside the socket (its path
    /// with `.log`) instead of the terminal, which the dashboard owns; the helpers' lines are
    /// then kept but not relayed (`foster run --output none`). Otherwise they are relayed among
    /// the events (as JSON with `json`).
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
    /// Where the supervisor's output goes, with [`DemoOptions::log_to_file`].
    pub log: Option<PathBuf>,
    reaper: Reaper<()>,
    signals: SignalFd,
    _spawner: Spawner,
}

/// Starts the demo's supervisor. Call it on the main thread before any other thread exists:
/// it blocks SIGCHLD, SIGINT and SIGTERM (consumed by [`Demo::wait`]).
pub fn start(opts: &DemoOptions) -> io::Result<Demo> {
    reaper::block_signals(&[Signal::SIGINT, Signal::SIGTERM])?;
    let reaper: Reaper<()> = Reaper::new()?;
    let mut set = SigSet::empty();
    set.add(Signal::SIGINT);
    set.add(Signal::SIGTERM);
    let signals = SignalFd::with_flags(&set, SfdFlags::SFD_CLOEXEC).map_err(io::Error::from)?;
    let path = match &opts.socket {
        Some(p) => p.clone(),
        None => {
            let p = server::default_path("demo");
            if std::os::unix::net::UnixStream::connect(&p).is_ok() {
                server::default_path(&format!("demo-{}", std::process::id()))
            } else {
                p
            }
        }
    };
    let bound = server::bind(&path).map_err(io::Error::other)?;
    let (listener, path) = server::into_listener(bound);
    // The supervisor inherits the listener under its own number.
    // SAFETY: clearing FD_CLOEXEC on a descriptor we own.
    unsafe { libc::fcntl(listener.as_raw_fd(), libc::F_SETFD, 0) };
    let (config_r, config_w) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(io::Error::from)?;
    {
        // The configuration is a few KiB: it fits in the pipe, so this write never blocks.
        let mut w = std::fs::File::from(config_w);
        w.write_all(CONFIG.as_bytes())?;
    }
    let exe = std::env::current_exe()?;
    let mut args: Vec<std::ffi::OsString> = vec![
        "run".into(),
        "--socket".into(),
        path.clone().into(),
        "--socket-fd".into(),
        listener.as_raw_fd().to_string().into(),
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
    let mut spec = LaunchSpec::new(&exe, args, Policy::term());
    spec.stdin = Some(config_r);
    spec.env.push((
        ENV_MARKER.into(),
        Some(std::process::id().to_string().into()),
    ));
    spec.env
        .push(("FOSTER_EXE".into(), Some(exe.into_os_string())));
    let log = if opts.log_to_file {
        let log = path.with_extension("log");
        let f = std::fs::File::create(&log)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", log.display())))?;
        spec.stdout = Some(f.try_clone()?.into());
        spec.stderr = Some(f.into());
        Some(log)
    } else {
        None
    };
    let spawner = Spawner::start()?;
    let mut reaper = reaper;
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

impl Demo {
    /// Waits for the supervisor to end, forwarding SIGINT and SIGTERM to it as SIGTERM;
    /// `on_stop` is called at the first one. Returns how the supervisor ended.
    pub fn wait(&mut self, mut on_stop: impl FnMut(i32)) -> io::Result<ExitStatus> {
        let mut stopping = false;
        loop {
            let mut fds = [
                libc::pollfd {
                    fd: self.reaper.raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: self.signals.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            // SAFETY: two valid pollfds.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if fds[1].revents != 0 {
                if let Ok(Some(si)) = self.signals.read_signal() {
                    if !stopping {
                        on_stop(si.ssi_signo as i32);
                    }
                    stopping = true;
                    let _ = crate::identity::signal(self.supervisor, libc::SIGTERM);
                }
            }
            if fds[0].revents != 0 {
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
Stop with Ctrl-C: everything started here ends with it (so it does on SIGTERM or SIGKILL).
",
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
                crate::signal::name(sig)
            );
        }
    })?;
    // The supervisor closed its socket when it exited: the printer has seen the last event.
    let _ = printer.join();
    if !json {
        eprintln!(
            "foster demo: the supervisor ended ({status}); nothing it started is left running."
        );
    }
    // Asked to stop, the supervisor ends with 0, or 4 when something had to be SIGKILLed
    // after its grace (the orphaner's grandchild ignores its signal on purpose): both are the
    // demo's normal end.
    let code = status.shell_code();
    Ok(
        if asked && (code == crate::supervisor::EXIT_OK || code == crate::supervisor::EXIT_FORCED) {
            0
        } else {
            code
        },
    )
}

fn print_events(socket: &Path, json: bool) {
    let mut conn = match Connection::connect(socket) {
        Ok(c) => c,
        Err(e) => {
            crate::logging::report(format_args!("demo events: {e}"));
            return;
        }
    };
    let mut out = io::stdout().lock();
    let r = client::follow(&mut conn, None, true, |r| {
        if json {
            out.write_all(&r.to_line())?;
        } else if let ReplyBody::Event(e) = &r.body {
            writeln!(out, "{}", client::render_event(e))?;
        }
        out.flush()?;
        Ok(true)
    });
    if let Err(e) = r {
        crate::logging::report(format_args!("demo events: {e}"));
    }
}
