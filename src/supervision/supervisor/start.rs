//! The start of `foster run` ([`run`]): its options, the checks and bindings made before
//! any thread exists (signals blocked, the instance's lock, the PID namespace, the
//! subreaper, the control socket, the metrics port, the notify sockets), then the runtime.

use std::io;
use std::path::PathBuf;

use tracing::warn;

use super::{Supervisor, births, control, notify, signals};
use crate::supervision::config::{Config, Helper};
use crate::supervision::contain::{Contain, Entered};
use crate::supervision::event::EventLog;

/// Options of `foster run` besides the configuration.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Whether to run the tree in a new PID namespace with foster as its init.
    pub contain: Contain,
    /// Append events as JSON lines here.
    pub events_log: Option<PathBuf>,
    /// When to rotate the events log.
    pub events_log_rotation: crate::supervision::event::Rotation,
    /// The control socket (see `docs/control.md`).
    pub socket: SocketOption,
    /// The configuration file, as given (shown by `status`, names the default socket).
    pub config_path: Option<PathBuf>,
    /// Run even when another `foster run` of the same configuration file runs
    /// ([`crate::supervision::instance`]).
    pub allow_second_instance: bool,
    /// What foster writes on its standard output for its helpers' captured lines.
    pub relay: crate::supervision::output::Format,
    /// The signal that reloads the configuration (`--reload-signal HUP`) instead of what the
    /// signal table says it does; none by default (SIGHUP shuts down, as a closed terminal).
    pub reload_signal: Option<crate::process::signal::Sig>,
    /// Serve the Prometheus text on `http://ADDR/metrics` (`docs/metrics.md`); none by default.
    pub metrics: Option<std::net::SocketAddr>,
}

/// Where the control socket goes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum SocketOption {
    /// `control::server::default_path` of the configuration's name; when a live supervisor
    /// holds it, the name gets foster's pid; any other failure is an error (`--no-socket`
    /// runs without one).
    #[default]
    Default,
    /// Exactly here; any failure is an error.
    Path(PathBuf),
    /// No control socket.
    None,
    /// A listening socket bound at `path` and inherited as descriptor `fd` (`foster demo`).
    Inherited { fd: i32, path: PathBuf },
}

/// Runs a supervision to its end and returns foster's exit status. Call it on the main thread
/// before any other thread exists (see the module docs).
pub fn run(config: Config, options: Options) -> io::Result<i32> {
    signals::block()?;
    // Before the tree is contained (the kernel ignores a request from another namespace), while
    // no other thread exists (its probe forks a child that exits at once).
    let announced = births::subscribe();
    let credentials = first_with_credentials(&config);
    // Judged as foster's user sees it, before a user namespace could make owners unknown.
    crate::base::ownership::judge_runtime_root(&crate::supervision::control::server::default_dir());
    if options.contain != Contain::Off {
        judge_dirs(&config, &options)?;
    }
    // Before the namespace: the lock's pid is the caller's, and the outer process holds it too.
    let mut claim = claim(&options)?;
    let contained = match crate::supervision::contain::enter(options.contain, credentials)? {
        Entered::Ended(code) => return Ok(code), // the outer process: the tree has ended
        Entered::Init => true,
        Entered::Uncontained => false,
    };
    become_subreaper()?;
    let events = options
        .events_log
        .as_ref()
        .map(|p| EventLog::open(p, options.events_log_rotation))
        .transpose()?;
    // Bound before any thread exists: binding sets the umask for an instant.
    let bound = bind_socket(&options)?;
    if let Some(c) = &mut claim {
        c.record(bound.as_ref().map(|b| b.path()))?;
    }
    // A port that cannot be had is said before anything starts.
    let metrics = options
        .metrics
        .map(crate::supervision::metrics::http::bind)
        .transpose()?;
    // The notify sockets the helpers need now (one a reload's helper needs is bound then).
    let checks_io = notify::bind_notify(&config)?;
    // The spawner before the output's pipes (two per helper): it reserves its low descriptor
    // slots below everything open now, so a launch copies a few descriptors, not thousands.
    let spawner = crate::gate::spawner::Spawner::start()?;
    // From here on, foster's lines never wait on its standard error (dropped last: it writes
    // what is left once the supervision has ended).
    let _lines = crate::base::logging::background()?;
    // The output threads start here, after the signals are blocked: they inherit the mask.
    let output = crate::supervision::output::start(&helper_outputs(&config), options.relay)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .enable_io()
        .build()?;
    let mut sup = Supervisor::new(config, contained, events, output, spawner)?;
    sup.take_births(announced);
    sup.control = control::Control::new(options.config_path.clone(), bound);
    sup.control.metrics_listener = metrics;
    sup.setup.config_path = options.config_path.clone();
    sup.signal_in.reload_signal = options
        .reload_signal
        .map(crate::process::signal::Sig::number);
    sup.io.checks_io = checks_io;
    rt.block_on(sup.run())
}

/// The name of the first helper that runs as another user or group, if any.
fn first_with_credentials(config: &Config) -> Option<&str> {
    config
        .helpers
        .iter()
        .find(|h| h.user.is_some() || h.group.is_some())
        .map(|h| h.name())
}

/// Takes the lock of the configuration file's one instance, unless a second is allowed.
fn claim(options: &Options) -> io::Result<Option<crate::supervision::instance::Claim>> {
    match (&options.config_path, options.allow_second_instance) {
        (Some(path), false) => {
            crate::supervision::instance::Claim::take(path).map_err(io::Error::other)
        }
        _ => Ok(None),
    }
}

/// Judges the directories of the files foster opens at its start (the events log, the
/// helpers' log files, the control socket) where it was started, before a user namespace
/// would hide their owners ([`crate::base::ownership::judge_before_namespace`]).
fn judge_dirs(config: &Config, options: &Options) -> io::Result<()> {
    use crate::base::ownership::{DirRule, parent_dir};
    use crate::supervision::control::server::default_dir;
    // What each is for (named as its own errors name it), its directory, the rule.
    let file =
        |what: &str, p: &std::path::Path| (format!("{what} {}", p.display()), parent_dir(p).into());
    let mut dirs: Vec<(String, PathBuf, DirRule)> = Vec::new();
    if let Some(p) = &options.events_log {
        let (what, dir) = file("events log", p);
        dirs.push((what, dir, DirRule::Given("the events log")));
    }
    for h in &config.helpers {
        if let Some(log) = &h.log {
            let name = crate::base::sanitize::escape(h.name().as_bytes());
            let (what, dir) = file(&format!("helper {name}'s log"), &log.file);
            dirs.push((what, dir, DirRule::Given("the log file")));
        }
    }
    let private = |dir: &PathBuf| *dir == default_dir();
    match &options.socket {
        SocketOption::Path(p) => {
            let (what, dir) = file("control socket", p);
            let rule = if private(&dir) {
                DirRule::Private
            } else {
                DirRule::Given("the socket")
            };
            dirs.push((what, dir, rule));
        }
        SocketOption::Default => {
            dirs.push(("control socket".into(), default_dir(), DirRule::Private));
        }
        SocketOption::None | SocketOption::Inherited { .. } => {}
    }
    for (what, dir, rule) in dirs {
        crate::base::ownership::judge_before_namespace(&dir, rule)
            .map_err(|m| io::Error::other(format!("{what}: {m}")))?;
    }
    Ok(())
}

/// What the output capture needs of each helper.
fn helper_outputs(config: &Config) -> Vec<crate::supervision::output::HelperOutput> {
    config.helpers.iter().map(helper_output).collect()
}

/// What the output capture needs of one helper.
pub(super) fn helper_output(h: &Helper) -> crate::supervision::output::HelperOutput {
    crate::supervision::output::HelperOutput {
        name: h.name().to_string(),
        mode: h.output,
        log: h.log.as_ref().map(|l| (l.file.clone(), l.rotation())),
        ring: h.ring.bounds(),
    }
}

/// Binds the control socket `options` ask for.
fn bind_socket(
    options: &Options,
) -> io::Result<Option<crate::supervision::control::server::Bound>> {
    use crate::supervision::control::server::{self, BindError};
    let name = options
        .config_path
        .as_ref()
        .and_then(|p| p.file_stem())
        .map(|s| s.to_string_lossy().into_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| format!("foster-{}", std::process::id()));
    match &options.socket {
        SocketOption::None => Ok(None),
        SocketOption::Path(p) => server::bind(p).map(Some).map_err(io::Error::other),
        SocketOption::Inherited { fd, path } => {
            server::adopt(*fd, path).map(Some).map_err(io::Error::other)
        }
        SocketOption::Default => {
            let path = server::default_path(&name);
            match server::bind(&path) {
                Ok(b) => Ok(Some(b)),
                Err(BindError::Live(_)) => {
                    let alt = server::default_path(&format!("{name}-{}", std::process::id()));
                    warn!(
                        "control socket {}: another supervisor listens there; using {}",
                        path.display(),
                        alt.display()
                    );
                    server::bind(&alt).map(Some).map_err(io::Error::other)
                }
                Err(e) => Err(io::Error::other(format!(
                    "{e}; foster run --no-socket runs without a control socket"
                ))),
            }
        }
    }
}

/// Sets `PR_SET_CHILD_SUBREAPER` and reads it back; either failing is an error.
pub fn become_subreaper() -> io::Result<()> {
    // SAFETY: plain prctl calls with valid arguments.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
        return Err(io::Error::other(format!(
            "cannot become a subreaper (PR_SET_CHILD_SUBREAPER): {}",
            io::Error::last_os_error()
        )));
    }
    let mut on: libc::c_int = 0;
    // SAFETY: the kernel writes one int.
    if unsafe {
        libc::prctl(
            libc::PR_GET_CHILD_SUBREAPER,
            &mut on as *mut libc::c_int,
            0,
            0,
            0,
        )
    } != 0
        || on == 0
    {
        return Err(io::Error::other(
            "PR_GET_CHILD_SUBREAPER does not confirm foster is a subreaper",
        ));
    }
    Ok(())
}
