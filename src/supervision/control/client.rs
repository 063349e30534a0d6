//! The control socket's client side: `foster ctl`, and the connection other clients reuse.
//!
//! Owns [`CtlCommand`], the one enum of `foster ctl`'s subcommands (clap reads it directly),
//! [`Connection`] (a blocking connection that sends one request a line and reads one reply
//! a line), the one connect every client makes ([`connect_checked`]: errors that say what to
//! do when nothing listens or the path is no socket, then the check of the server's
//! credentials, [`check_server`]: `SO_PEERCRED`, the server must run as this user or root),
//! the one socket lookup of `foster ctl` and `foster top --attach` ([`resolve_socket`]: the
//! path given, FOSTER_SOCKET, else the only listening socket of the default directory, checked
//! as `foster run` checks it), and the human renderings: the status as a tree with roles,
//! generations, policies, expected and actual parents (command lines cut to a terminal's
//! width); events as one line each; helpers' lines (`foster ctl logs`) in the relay's own
//! forms ([`crate::supervision::output::Renderer`]: `NAME | line`, or its JSON). Whatever the
//! server sent goes through [`crate::base::sanitize::escape`] before it reaches a terminal, error
//! messages included; `--json` output is [`Reply::to_line`] (for lines, the relay's JSON, written
//! by [`crate::base::sanitize::to_json`]), whose JSON escapes every control character.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::fs::FileTypeExt as _;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use crate::base::sanitize::escape;
use crate::process::identity::Identity;
use crate::supervision::control::nspid::PidMap;
use crate::supervision::control::protocol::{
    EventRecord, HelperInfo, MAX_LOG_LINES, ProcessInfo, Reply, ReplyBody, Request, Role, Status,
    SupervisorInfo, request_line,
};

/// Why a client failed: the message says it all (the cause's text included); the cause, when
/// there is one, is also kept as the error's source.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ClientError {
    message: String,
    #[source]
    source: Option<io::Error>,
}

impl ClientError {
    /// An error with no underlying cause.
    pub fn new(message: impl Into<String>) -> ClientError {
        ClientError {
            message: message.into(),
            source: None,
        }
    }

    /// Whether it is a read that timed out ([`Connection::set_read_timeout`]).
    pub fn timed_out(&self) -> bool {
        self.source.as_ref().is_some_and(|e| {
            matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            )
        })
    }

    /// An error caused by `source` (`message` already names it).
    pub fn caused(message: impl Into<String>, source: io::Error) -> ClientError {
        ClientError {
            message: message.into(),
            source: Some(source),
        }
    }
}

/// A connection to a supervisor's control socket.
#[derive(Debug)]
pub struct Connection {
    path: PathBuf,
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

/// Checks who serves `stream` before anything is sent to it: the server's uid (`SO_PEERCRED`,
/// as the kernel recorded it when the server started listening) must be this process's
/// effective uid or root. A socket of another user (a squatted directory, a socket replaced by
/// someone else's listener) is refused, and nothing is sent to it.
pub fn check_server(stream: &UnixStream, path: &Path) -> Result<(), ClientError> {
    let cred = nix::sys::socket::getsockopt(stream, nix::sys::socket::sockopt::PeerCredentials)
        .map_err(|e| {
            ClientError::new(format!(
                "{}: cannot read the server's credentials (SO_PEERCRED): {e}; not talking to it",
                path.display()
            ))
        })?;
    let me = nix::unistd::geteuid().as_raw();
    let uid = cred.uid();
    if uid != me && uid != 0 {
        return Err(ClientError::new(format!(
            "{}: the process listening there runs as uid {uid} (pid {}), not as you (uid {me}) \
             nor root: it is not your supervisor (was the socket or its directory taken over \
             by another user?); nothing was sent to it",
            path.display(),
            cred.pid()
        )));
    }
    Ok(())
}

/// Connects to the control socket at `path` and checks the server's credentials
/// ([`check_server`]), for every client (`foster ctl`, `foster top --attach`, the demo). The
/// error says whether nothing is there, the file is not a socket (a regular file, a directory),
/// the socket is stale, access is denied, or the server is not this user's; `option` is the
/// option that names another socket (`--socket`, `--attach`), for the hint.
pub fn connect_checked(path: &Path, option: &str) -> Result<UnixStream, ClientError> {
    let stream = UnixStream::connect(path).map_err(|e| {
        let p = path.display();
        // connect(2) on a file that is not a socket fails with ECONNREFUSED, as on a stale
        // socket: the file's type tells them apart.
        let kind = std::fs::metadata(path).ok().map(|m| m.file_type());
        let not_socket = kind.filter(|k| !k.is_socket()).map(|k| {
            if k.is_file() {
                "a regular file"
            } else if k.is_dir() {
                "a directory"
            } else if k.is_fifo() {
                "a named pipe"
            } else {
                "a device or other special file"
            }
        });
        let message = match (e.raw_os_error(), not_socket) {
            (Some(libc::ENOENT), _) => {
                format!("no supervisor listening at {p}: is foster run running? use {option}")
            }
            (Some(libc::EACCES) | Some(libc::EPERM), _) => format!(
                "permission denied on {p}: the socket belongs to another user (it is mode \
                 0600; only its owner and root may connect)"
            ),
            (_, Some(what)) => format!(
                "{p} is not a socket but {what}: give a supervisor's control socket with \
                 {option}"
            ),
            (Some(libc::ECONNREFUSED), None) => format!(
                "no supervisor listening at {p}: nothing listens on the socket file, left from \
                 a foster that has ended; is foster run running? use {option}"
            ),
            (Some(libc::ENOTSOCK), None) => format!("{p} is not a socket"),
            _ => format!("cannot connect to {p}: {e}"),
        };
        ClientError::caused(message, e)
    })?;
    check_server(&stream, path)?;
    Ok(stream)
}

/// The socket a client talks to: `given` (`--socket PATH`, `--attach PATH`), else
/// FOSTER_SOCKET when set and not empty, else [`find_default_socket`]. `option` names the
/// option in the hints of the errors.
pub fn resolve_socket(given: Option<&Path>, option: &str) -> Result<PathBuf, ClientError> {
    if let Some(p) = given {
        return Ok(p.to_path_buf());
    }
    match std::env::var_os("FOSTER_SOCKET") {
        Some(p) if !p.is_empty() => Ok(PathBuf::from(p)),
        _ => find_default_socket(option),
    }
}

impl Connection {
    /// Connects to `path` and checks the server's credentials ([`check_server`]); the error
    /// says whether nothing listens, the file is stale, access is denied, or the server is not
    /// this user's.
    pub fn connect(path: &Path) -> Result<Connection, ClientError> {
        let stream = connect_checked(path, "--socket")?;
        let writer = stream
            .try_clone()
            .map_err(|e| ClientError::caused(format!("{}: {e}", path.display()), e))?;
        Ok(Connection {
            path: path.to_path_buf(),
            reader: BufReader::new(stream),
            writer,
        })
    }

    /// The supervisor's pids as seen from here, learnt from this connection's peer.
    pub fn pid_map(&self) -> PidMap {
        PidMap::for_stream(&self.writer)
    }

    /// Reads give up after `limit` (none: they wait as long as it takes), failing with an
    /// error that [`ClientError::timed_out`].
    pub fn set_read_timeout(&self, limit: Option<std::time::Duration>) -> Result<(), ClientError> {
        let limit = limit.map(|d| d.max(std::time::Duration::from_millis(1)));
        self.reader
            .get_ref()
            .set_read_timeout(limit)
            .map_err(|e| ClientError::caused(format!("{}: {e}", self.path.display()), e))
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Sends one request.
    pub fn send(&mut self, req: &Request) -> Result<(), ClientError> {
        self.writer.write_all(&request_line(req)).map_err(|e| {
            let message = format!("{}: cannot send the request: {e}", self.path.display());
            ClientError::caused(message, e)
        })
    }

    /// Reads one reply line; `None` when the supervisor closed the connection.
    pub fn read(&mut self) -> Result<Option<Reply>, ClientError> {
        let mut line = String::new();
        let n = self.reader.read_line(&mut line).map_err(|e| {
            let message = format!("{}: cannot read the reply: {e}", self.path.display());
            ClientError::caused(message, e)
        })?;
        if n == 0 {
            return Ok(None);
        }
        serde_json::from_str(&line).map(Some).map_err(|e| {
            ClientError::new(format!(
                "{}: the supervisor's reply is not understood ({}): {}",
                self.path.display(),
                escape(e.to_string().as_bytes()),
                escape(line.trim_end().as_bytes())
            ))
        })
    }

    /// Sends `req` and reads its one reply. When the supervisor refused the connection (it
    /// writes why, then closes), sending fails but the reason is still there to read.
    pub fn exchange(&mut self, req: &Request) -> Result<Reply, ClientError> {
        let sent = self.send(req);
        match self.read() {
            Ok(Some(r)) => Ok(r),
            Ok(None) => Err(sent.err().unwrap_or_else(|| {
                ClientError::new(format!(
                    "{}: the supervisor closed the connection without answering",
                    self.path.display()
                ))
            })),
            Err(e) => Err(sent.err().unwrap_or(e)),
        }
    }

    /// Sends `req` and returns its one reply; an error reply becomes a [`ClientError`].
    pub fn ask(&mut self, req: &Request) -> Result<ReplyBody, ClientError> {
        let r = self.exchange(req)?;
        into_result(r)
    }

    /// The status snapshot.
    pub fn status(&mut self) -> Result<Status, ClientError> {
        match self.ask(&Request::Status)? {
            ReplyBody::Status(s) => Ok(*s),
            other => Err(unexpected(&other)),
        }
    }
}

/// A reload's answer for people: one line per kind of change, the helpers named (escaped).
pub fn render_reload(r: &crate::supervision::control::protocol::Reloaded) -> String {
    let mut out = String::from("configuration reloaded\n");
    for (what, names) in [
        ("started", &r.started),
        ("stopped", &r.stopped),
        ("restarted", &r.restarted),
        ("unchanged", &r.unchanged),
        ("applied", &r.applied),
        ("needs a restart of foster", &r.needs_restart),
    ] {
        if names.is_empty() {
            continue;
        }
        let names: Vec<String> = names.iter().map(|n| escape(n.as_bytes())).collect();
        out.push_str(&format!("  {what}: {}\n", names.join(", ")));
    }
    out
}

/// A reload's plan (`reload --dry-run`) for people: what a reload would do now.
pub fn render_reload_plan(r: &crate::supervision::control::protocol::Reloaded) -> String {
    let mut lines = String::new();
    for (what, names) in [
        ("start", &r.started),
        ("stop", &r.stopped),
        ("restart", &r.restarted),
        ("leave as they are", &r.unchanged),
        ("apply", &r.applied),
        ("need a restart of foster for", &r.needs_restart),
    ] {
        if names.is_empty() {
            continue;
        }
        let names: Vec<String> = names.iter().map(|n| escape(n.as_bytes())).collect();
        lines.push_str(&format!("  {what}: {}\n", names.join(", ")));
    }
    if lines.is_empty() {
        return "the configuration is valid; a reload would change nothing\n".to_string();
    }
    format!("the configuration is valid; nothing was changed; a reload would:\n{lines}")
}

/// A helper's history (`ctl history`) for people: one event a line, oldest first.
pub fn render_history(helper: &str, events: &[EventRecord]) -> String {
    if events.is_empty() {
        return format!(
            "helper \"{}\" has no launch or end yet\n",
            escape(helper.as_bytes())
        );
    }
    events.iter().map(|e| render_event(e) + "\n").collect()
}

/// An error reply as a [`ClientError`] naming its kind (its message escaped).
pub fn into_result(r: Reply) -> Result<ReplyBody, ClientError> {
    match r.body {
        ReplyBody::Error(e) => Err(ClientError::new(format!(
            "{} ({})",
            escape(e.message.as_bytes()),
            serde_json::to_value(e.kind)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default()
        ))),
        body => Ok(body),
    }
}

fn unexpected(body: &ReplyBody) -> ClientError {
    ClientError::new(format!(
        "unexpected reply from the supervisor: {}",
        escape(serde_json::to_string(body).unwrap_or_default().as_bytes())
    ))
}

/// The socket `foster ctl` uses without `--socket`: the only `*.sock` in the default
/// directory, which must be a private directory of this user, as `foster run` requires (a
/// directory squatted by another user is refused, not searched). The error lists the sockets
/// when there are several.
pub fn find_default_socket(option: &str) -> Result<PathBuf, ClientError> {
    use crate::supervision::control::server::{DirProblem, open_private_dir};
    let dir = crate::supervision::control::server::default_dir();
    match open_private_dir(&dir) {
        Ok(_) => {}
        Err(DirProblem::Missing) => {
            return Err(ClientError::new(format!(
                "no supervisor socket in {} (no such directory): is foster run running? use \
                 {option}",
                dir.display()
            )));
        }
        Err(DirProblem::Refused(m)) => return Err(ClientError::new(m)),
    }
    let listening = listening_socket_paths();
    let mut found: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "sock"))
                // A file left by a foster that was SIGKILLed has no listener: skip it.
                .filter(|p| listening.as_ref().is_none_or(|l| l.contains(p)))
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(ClientError::new(format!(
            "no supervisor socket in {}: is foster run running? use {option}",
            dir.display()
        ))),
        _ => Err(ClientError::new(format!(
            "several supervisor sockets in {}: choose one with {option}: {}",
            dir.display(),
            found
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// The paths of the Unix sockets listening in this network namespace, from `/proc/net/unix`
/// (flag `__SO_ACCEPTCON`, 0x10000), so stale socket files are told apart without connecting
/// to anyone. `None` when the file cannot be read: then every socket file counts.
pub(super) fn listening_socket_paths() -> Option<std::collections::HashSet<PathBuf>> {
    let text = std::fs::read_to_string("/proc/net/unix").ok()?;
    Some(
        text.lines()
            .skip(1)
            .filter_map(|line| {
                let mut cols = line.split_whitespace();
                let flags = u32::from_str_radix(cols.nth(3)?, 16).ok()?;
                let path = cols.nth(3)?;
                (flags & 0x10000 != 0 && path.starts_with('/')).then(|| PathBuf::from(path))
            })
            .collect(),
    )
}

fn id_text(id: Option<Identity>) -> String {
    id.map_or_else(|| "-".to_string(), |i| i.pid.to_string())
}

fn role_text(r: Role) -> &'static str {
    match r {
        Role::Supervisor => "supervisor",
        Role::Helper => "helper",
        Role::Descendant => "descendant",
        Role::AdoptedOrphan => "adopted orphan",
    }
}

fn ms_text(ms: u64) -> String {
    if ms >= 1000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else {
        format!("{ms}ms")
    }
}

/// The status for people: the supervisor, its helpers, then the tree. With `width` (a
/// terminal's), each process's command line is cut so that its line fits, when it can (the
/// command keeps at least [`MIN_COMMAND`] columns); without it nothing is cut.
pub fn render_status(s: &Status, width: Option<usize>) -> String {
    let mut out = String::new();
    supervisor_lines(&mut out, &s.supervisor);
    let _ = writeln!(out, "\nhelpers:");
    let w = s
        .helpers
        .iter()
        .map(|h| h.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    for h in &s.helpers {
        let mut line = helper_line(h, w, &s.processes);
        // Its process's age: start times are ticks since boot, as `now_ticks` is.
        if let Some(id) = h.identity
            && s.hz > 0
        {
            let secs = s.now_ticks.saturating_sub(id.start_time) / s.hz;
            let _ = write!(line, "  up {}", uptime_text(secs));
        }
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(out, "\ntree:");
    let sup = &s.supervisor;
    let by_pid: HashMap<i32, &ProcessInfo> = s.processes.iter().map(|p| (p.pid, p)).collect();
    let mut kids: HashMap<i32, Vec<&ProcessInfo>> = HashMap::new();
    let mut roots = Vec::new();
    for p in &s.processes {
        match p.parent.filter(|q| by_pid.contains_key(&q.pid)) {
            Some(q) if p.pid != sup.identity.pid => kids.entry(q.pid).or_default().push(p),
            _ => roots.push(p),
        }
    }
    let live: HashSet<Identity> = s
        .processes
        .iter()
        .map(ProcessInfo::identity)
        .chain([sup.identity])
        .collect();
    for r in roots {
        tree_lines(&mut out, r, (&kids, &live), "", "", width);
    }
    out
}

/// How long a process has run, in its two largest units: `42s`, `3m05s`, `2h07m`, `4d03h`.
pub fn uptime_text(secs: u64) -> String {
    let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, m) => format!("{m}m{s:02}s"),
        (0, h, m) => format!("{h}h{m:02}m"),
        (d, h, _) => format!("{d}d{h:02}h"),
    }
}

/// The first lines of `ctl status`: the supervisor, its socket, its metrics' address.
fn supervisor_lines(out: &mut String, sup: &SupervisorInfo) {
    let _ = writeln!(
        out,
        "supervisor {} ({}){}{}",
        sup.identity.pid,
        if sup.config.is_empty() {
            "configuration from standard input".to_string()
        } else {
            escape(sup.config.as_bytes())
        },
        if sup.contained { ", contained" } else { "" },
        if sup.shutting_down {
            ", shutting down"
        } else {
            ""
        }
    );
    let _ = writeln!(out, "socket {}", escape(sup.socket.as_bytes()));
    if let Some(v) = &sup.version {
        let _ = writeln!(out, "version foster {}", escape(v.as_bytes()));
    }
    if let Some(addr) = &sup.metrics {
        let _ = writeln!(out, "metrics http://{}/metrics", escape(addr.as_bytes()));
    }
}

/// One helper's line of `ctl status`, its name padded to `w` columns.
fn helper_line(h: &HelperInfo, w: usize, processes: &[ProcessInfo]) -> String {
    let mut line = format!(
        "  {:w$}  {:9} pid {:>7}  launched {}x  restart {}",
        escape(h.name.as_bytes()),
        h.state.text(),
        id_text(h.identity),
        h.launches,
        escape(h.restart.as_bytes())
    );
    if h.restarts_in_a_row > 0 {
        let _ = write!(line, " ({} in a row)", h.restarts_in_a_row);
    }
    if let Some(e) = &h.last_exit {
        let _ = write!(line, "  last: {e}");
    }
    if let Some(ms) = h.next_launch_in_ms {
        let _ = write!(line, "  next launch in {}", ms_text(ms));
    }
    if let Some(d) = &h.detail {
        let _ = write!(line, "  {} {}", h.state.text(), escape(d.as_bytes()));
    }
    if h.health_failures > 0 {
        let _ = write!(line, "  health: {} failed in a row", h.health_failures);
    }
    if let Some(t) = &h.status_text {
        let _ = write!(line, "  status: {}", escape(t.as_bytes()));
    }
    // Its state is foster's; that the kernel holds its process stopped is said beside it.
    if let Some(id) = h.identity
        && processes
            .iter()
            .any(|p| p.pid == id.pid && p.start_time == id.start_time && p.state == "T")
    {
        let _ = write!(
            line,
            "  its process is stopped (SIGSTOP or SIGTSTP): it does nothing until SIGCONT"
        );
    }
    if let Some(e) = h.errno {
        let _ = write!(line, " (errno {e})");
    }
    // MAINPID=, when it names another process than the one foster launched.
    if let Some(p) = h
        .main_pid
        .filter(|&p| h.identity.is_none_or(|i| i.pid != p))
    {
        let _ = write!(line, "  main pid {p}");
    }
    line
}

/// The parent a process should have, as `ctl status` names it: its pid while it lives; once it
/// has ended, its identity marked gone (`?` for a pid never seen from the caller's PID
/// namespace, which the translation reports as 0).
fn expected_text(e: Identity, live: &HashSet<Identity>) -> String {
    if live.contains(&e) {
        e.pid.to_string()
    } else if e.pid > 0 {
        format!("{e}, gone")
    } else {
        format!("?:{}, gone", e.start_time)
    }
}

/// The fewest columns a command line is cut to in `ctl status`, however narrow the terminal.
const MIN_COMMAND: usize = 12;

/// The tree's lines from `p` down; `kids` by parent pid, `live`: the identities of the
/// snapshot's processes and of the supervisor.
fn tree_lines(
    out: &mut String,
    p: &ProcessInfo,
    (kids, live): (&HashMap<i32, Vec<&ProcessInfo>>, &HashSet<Identity>),
    lead: &str,
    rest: &str,
    width: Option<usize>,
) {
    let name = if p.cmdline.is_empty() {
        escape(&p.comm.0)
    } else {
        let args: Vec<&[u8]> = p.cmdline.iter().map(|a| a.0.as_slice()).collect();
        crate::base::sanitize::escape_args(&args)
    };
    let mut tags = vec![role_text(p.role).to_string()];
    if let Some(h) = &p.helper {
        tags.push(format!("of {}", escape(h.as_bytes())));
    }
    tags.push(format!("gen {}", p.generation));
    if let Some(pol) = &p.policy {
        tags.push(escape(pol.as_bytes()));
    }
    let head = format!("{lead}{} {} ", p.pid, escape(p.state.as_bytes()));
    let mut line = format!(" [{}]", tags.join(" · "));
    match (p.expected_parent, p.parent) {
        (Some(e), Some(a)) if e != a => {
            let _ = write!(
                line,
                "  parent {} (expected {})",
                a.pid,
                expected_text(e, live)
            );
        }
        (Some(e), None) => {
            let _ = write!(
                line,
                "  parent {} (expected {})",
                p.ppid,
                expected_text(e, live)
            );
        }
        _ => {}
    }
    if let Some(a) = &p.adoption {
        let class = serde_json::to_value(a.classification)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        let _ = write!(
            line,
            "  adopted by {}: {}",
            a.to.pid,
            class.replace('_', " ")
        );
    }
    let name = match width {
        Some(w) => {
            let room = w.saturating_sub(text_width(&head) + text_width(&line));
            crate::base::sanitize::fit(&name, room.max(MIN_COMMAND))
        }
        None => name,
    };
    let _ = writeln!(out, "{head}{name}{line}");
    let children = kids.get(&p.pid).map(Vec::as_slice).unwrap_or(&[]);
    for (i, c) in children.iter().enumerate() {
        let last = i + 1 == children.len();
        let (l, r) = if last {
            ("└─ ", "   ")
        } else {
            ("├─ ", "│  ")
        };
        tree_lines(
            out,
            c,
            (kids, live),
            &format!("{rest}{l}"),
            &format!("{rest}{r}"),
            width,
        );
    }
}

fn text_width(s: &str) -> usize {
    unicode_width::UnicodeWidthStr::width(s)
}

/// One streamed event as a line for people.
pub fn render_event(r: &EventRecord) -> String {
    format!(
        "{}  {}{}",
        crate::supervision::event::clock_text(r.ts_ms, true),
        r.event,
        crate::supervision::control::nspid::foreign_note(&r.foreign_pids)
    )
}

/// Follows the events of `conn` (after sending `events`), handing each reply to `each` until
/// it returns false or the supervisor closes the connection.
pub fn follow(
    conn: &mut Connection,
    backlog: Option<usize>,
    follow: bool,
    mut each: impl FnMut(&Reply) -> io::Result<bool>,
) -> Result<(), ClientError> {
    let first = conn.ask(&Request::Events { backlog, follow })?;
    let ReplyBody::Events { backlog: n, follow } = first else {
        return Err(unexpected(&first));
    };
    // Events carry the supervisor's pids: shown as the caller's.
    let mut pids = conn.pid_map();
    let mut left = n;
    loop {
        if !follow && left == 0 {
            return Ok(());
        }
        let Some(mut r) = conn.read()? else {
            return Ok(());
        };
        pids.reply(&mut r.body);
        left = left.saturating_sub(1);
        match each(&r) {
            Ok(true) => {}
            Ok(false) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return Ok(()),
            Err(e) => return Err(ClientError::caused(format!("cannot write: {e}"), e)),
        }
    }
}

/// What `foster ctl` was asked to do: its subcommands, as the command line reads them.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum CtlCommand {
    /// The supervised tree: helpers, then every process with its role, generation, policy,
    /// expected and actual parent.
    Status {
        /// Never cut command lines (on a terminal they are cut to its width; into a pipe or
        /// a file they never are).
        #[arg(short = 'w', long)]
        wide: bool,
        /// Only these helpers and their processes (`all`: every helper).
        #[arg(value_name = "HELPER")]
        helpers: Vec<String>,
    },
    /// The supervisor's events: a recent backlog, then each new one as it happens.
    Events {
        /// How many past events to show first (at most 256; default all kept).
        #[arg(long, value_name = "N")]
        backlog: Option<usize>,
        /// Print the backlog and exit instead of following.
        #[arg(long)]
        no_follow: bool,
    },
    /// Send a signal to a helper (by name) or to a process of the tree (PID or PID:STARTTIME).
    Signal {
        /// A helper name, a pid, or PID:STARTTIME.
        target: String,
        /// TERM, SIGHUP, STOP, CONT, KILL, RTMIN+3, 15... (any signal).
        signal: crate::process::signal::Sig,
    },
    /// Stop a helper (its stop signal and grace) and launch it again; launch it now if it is
    /// waiting for its backoff, ended or given up on.
    Restart {
        /// The helpers' names, one request each in order (`all`: every helper).
        #[arg(value_name = "HELPER", required = true)]
        helpers: Vec<String>,
    },
    /// Start a helper that is not running: one stopped by `stop`, ended, given up on or
    /// waiting for its backoff is launched now (once its dependencies are met).
    Start {
        /// The helpers' names, one request each in order (`all`: every helper).
        #[arg(value_name = "HELPER", required = true)]
        helpers: Vec<String>,
    },
    /// Stop HELPER (its stop signal, its grace, then SIGKILL of what is left of its tree): it
    /// stays stopped, whatever its restart rule, until `start`. HELPER is required: the
    /// supervisor itself is stopped by `shutdown`.
    #[command(override_usage = "foster ctl stop [OPTIONS] <HELPER>...")]
    Stop {
        /// The helpers to stop, one request each, dependents first for `all` (every helper;
        /// `foster ctl shutdown` stops the supervisor and its whole tree).
        // Optional for clap only: a bare `stop` gets a usage error naming `shutdown`.
        #[arg(value_name = "HELPER")]
        helpers: Vec<String>,
    },
    /// Stop the supervisor and its whole tree: the same orderly shutdown as SIGTERM.
    Shutdown,
    /// Reopen every log file the supervisor writes (the events log, the helpers' log files)
    /// at its path, after an outside rotation: the same as SIGUSR1, and says which.
    ReopenLogs,
    /// A helper's output (every helper's without HELPER): its last kept lines, then with -f
    /// each new one, shown as foster run shows them (NAME | line, NAME ! for standard error).
    Logs {
        /// The helpers (default: every helper), their lines merged in the order read.
        #[arg(value_name = "HELPER")]
        helpers: Vec<String>,
        /// How many kept lines to show first: 10 by default, as tail (with --since, every
        /// one since then); at most 10000 (each helper keeps its last 1000); 0 with -f shows
        /// only new lines.
        #[arg(short = 'n', long = "lines", value_name = "N",
              value_parser = clap::value_parser!(u64).range(0..=MAX_LOG_LINES as u64))]
        lines: Option<u64>,
        /// Only lines read in this last while: 30s, 5m, 1.5h (foster's durations).
        #[arg(long, value_name = "DURATION", value_parser = crate::base::duration::parse)]
        since: Option<std::time::Duration>,
        /// Each line with the time foster read it (as events show it).
        #[arg(short = 't', long)]
        timestamps: bool,
        /// Follow: print each new line as it is read, until interrupted or the supervisor
        /// ends.
        #[arg(short = 'f', long)]
        follow: bool,
    },
    /// Read the configuration file again and apply it: launch the helpers added, stop those
    /// removed, restart those whose definition changed, leave the others untouched. A file
    /// with mistakes is refused with every mistake listed, and nothing changes.
    Reload {
        /// Read and check the file, say what a reload would start, stop and restart, and
        /// change nothing (supervisorctl's reread).
        #[arg(long)]
        dry_run: bool,
    },
    /// Print the pid of a helper's process, as your PID namespace knows it; exit status 1 when
    /// it has none.
    Pid {
        /// The helper's name.
        helper: String,
    },
    /// Wait until every HELPER is started, ready or stopped (--for), following the events;
    /// exit status 1 on --timeout, or when one cannot get there by itself.
    Wait {
        /// The helpers' names (`all`: every helper).
        #[arg(value_name = "HELPER", required = true)]
        helpers: Vec<String>,
        /// What to wait for: started (a process launched), ready (its readiness check passed,
        /// or running without one), stopped (no process).
        #[arg(long = "for", value_enum, default_value_t = WaitFor::Ready)]
        until: WaitFor,
        /// Give up after this long (30s, 2m): exit status 1. Default: no limit.
        #[arg(long, value_name = "DURATION", value_parser = crate::base::duration::parse)]
        timeout: Option<std::time::Duration>,
    },
    /// A helper's last launches and ends (at most 32 events): pids, exit statuses, the
    /// signals that stopped it, restarts, give-ups.
    History {
        /// The helper's name.
        helper: String,
    },
    /// The supervisor's numbers (helpers' states, restarts, last exits, adoptions, memory and
    /// CPU) in the Prometheus text format, the text foster run --metrics serves.
    Metrics,
}

/// What `foster ctl wait` waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WaitFor {
    /// Launched: a process runs (starting, running, ready or unhealthy).
    Started,
    /// Ready: its readiness check passed, or it runs and has none.
    Ready,
    /// No process: not launched, ended, or stopped.
    Stopped,
}

/// `ctl stop` without HELPER: refused, so that a forgotten argument never stops everything.
pub const BARE_STOP: &str = "ctl stop needs the HELPER to stop; to stop the supervisor and its \
                             whole tree, use `foster ctl shutdown`";

/// How `foster ctl` shows what it prints for people.
#[derive(Debug, Clone, Copy, Default)]
pub struct View {
    /// The terminal's width: `status` cuts command lines to it (unless `--wide`); `None`: not
    /// a terminal, never cut.
    pub width: Option<usize>,
    /// Names coloured as the relay colours them on a terminal (`logs`).
    pub colour: bool,
}

/// What `foster ctl logs` asks for and how it shows it.
pub(super) struct LogsAsked {
    /// The helpers (none: every helper).
    pub helpers: Vec<String>,
    pub lines: usize,
    pub follow: bool,
    /// Only lines read since then, milliseconds since the Unix epoch.
    pub since_ms: Option<u64>,
    /// Each line with the time it was read.
    pub timestamps: bool,
    pub colour: bool,
}

/// Runs `logs` on `conn`: the kept lines, then (when following) each new line until the
/// supervisor ends the stream; each shown as `foster run` relays it (text or `json`), a lag as
/// a line saying how many lines were missed.
pub(super) fn logs(
    conn: &mut Connection,
    json: bool,
    asked: &LogsAsked,
    out: &mut dyn Write,
) -> Result<(), ClientError> {
    let (helper, more) = match asked.helpers.split_first() {
        Some((h, more)) => (Some(h.clone()), more.to_vec()),
        None => (None, Vec::new()),
    };
    let first = conn.ask(&Request::Logs {
        helper,
        lines: Some(asked.lines),
        follow: asked.follow,
        helpers: more,
        since_ms: asked.since_ms,
    })?;
    let ReplyBody::Logs {
        helpers,
        lines: n,
        follow,
    } = first
    else {
        return Err(unexpected(&first));
    };
    let names: Vec<&str> = helpers.iter().map(String::as_str).collect();
    let format = if json {
        crate::supervision::output::Format::Json
    } else {
        crate::supervision::output::Format::Text
    };
    let colour = asked.colour && !json;
    let renderer = crate::supervision::output::Renderer::new(&names, format, colour);
    // Lines carry the supervisor's pid of their helper: shown as the caller's.
    let mut pids = conn.pid_map();
    let mut left = n;
    let mut buf = Vec::with_capacity(256);
    loop {
        if !follow && left == 0 {
            return Ok(());
        }
        let Some(r) = conn.read()? else {
            return Ok(());
        };
        left = left.saturating_sub(1);
        buf.clear();
        match r.body {
            ReplyBody::Log(mut rec) => {
                pids.log(&mut rec);
                log_line(rec, asked.timestamps && !json, &renderer, &mut buf);
            }
            ReplyBody::Lagged { dropped } if json => {
                let _ = writeln!(
                    buf,
                    "{{\"version\":{},\"missed\":{dropped}}}",
                    crate::base::json::VERSION
                );
            }
            ReplyBody::Lagged { dropped } => {
                let _ = writeln!(
                    buf,
                    "… {dropped} line{} missed (this client did not read fast enough)",
                    if dropped == 1 { "" } else { "s" }
                );
            }
            ReplyBody::Error(e) => {
                return Err(ClientError::new(escape(e.message.as_bytes())));
            }
            other => return Err(unexpected(&other)),
        }
        match out.write_all(&buf).and_then(|()| out.flush()) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return Ok(()),
            Err(e) => {
                return Err(ClientError::caused(
                    format!("cannot write to standard output: {e}"),
                    e,
                ));
            }
        }
    }
}

/// One helper's line into `buf` as the relay shows it, after its time when `timestamps`.
fn log_line(
    rec: crate::supervision::control::protocol::LogRecord,
    timestamps: bool,
    renderer: &crate::supervision::output::Renderer,
    buf: &mut Vec<u8>,
) {
    if timestamps {
        let t = crate::supervision::event::clock_text(rec.ts_ms, true);
        let _ = write!(buf, "{t}  ");
    }
    renderer.render(&rec.into_line(), buf)
}

/// Prints one line of a followed stream of events, for people or (`json`) as it came.
pub(super) fn print_streamed(r: &Reply, json: bool, out: &mut dyn Write) -> io::Result<bool> {
    if json {
        out.write_all(&r.to_line())?;
    } else {
        match &r.body {
            ReplyBody::Event(e) => writeln!(out, "{}", render_event(e))?,
            ReplyBody::Lagged { dropped } => {
                writeln!(out, "… {dropped} events dropped (this client was slow)")?
            }
            ReplyBody::Error(e) => writeln!(out, "error: {}", escape(e.message.as_bytes()))?,
            _ => {}
        }
    }
    out.flush()?;
    Ok(true)
}

/// The target of `foster ctl signal` in the supervisor's terms: a pid the caller names is one
/// of the caller's namespace. Refused (and, for `json`, said as an error reply) otherwise.
pub(super) fn signal_target(
    pids: &mut PidMap,
    target: &str,
    json: bool,
    out: &mut dyn Write,
) -> Result<crate::supervision::control::protocol::Target, ClientError> {
    use crate::supervision::control::protocol::{ErrorKind, Target};
    let w = |e: io::Error| ClientError::caused(format!("cannot write to standard output: {e}"), e);
    match pids.target(&Target::parse(target)) {
        Ok(t) => Ok(t),
        Err(e) if json => {
            let e = e.to_string();
            let r = Reply::error(ErrorKind::NotInTree, &e);
            out.write_all(&r.to_line()).map_err(w)?;
            Err(ClientError::new(e))
        }
        Err(e) => Err(ClientError::new(format!("{e} (not_in_tree)"))),
    }
}

/// Sends `request` and returns its reply, the processes it names by the caller's pids.
pub(super) fn exchange(
    conn: &mut Connection,
    pids: &mut PidMap,
    request: &Request,
    cmd: &CtlCommand,
) -> Result<Reply, ClientError> {
    if matches!(
        request,
        Request::Signal { .. }
            | Request::Restart { .. }
            | Request::Start { .. }
            | Request::Stop { .. }
    ) {
        pids.learn(); // the reply may name a process the request ends
    }
    let mut reply = conn.exchange(request)?;
    pids.reply(&mut reply.body);
    if let Some(why) = pids.untranslated() {
        eprintln!("foster ctl: pids are shown as the supervisor sees them: {why}");
    }
    // Messages name processes by the supervisor's pids too.
    let asked = match (request, cmd) {
        (Request::Signal { target, .. }, CtlCommand::Signal { target: given, .. }) => Some((
            target,
            crate::supervision::control::protocol::Target::parse(given),
        )),
        _ => None,
    };
    let asked = asked.as_ref().map(|(sent, given)| (*sent, given));
    match &mut reply.body {
        ReplyBody::Done { message, .. } => *message = pids.message(message, asked),
        ReplyBody::Error(e) => e.message = pids.message(&e.message, asked),
        _ => {}
    }
    if let Some(why) = pids.untranslated() {
        eprintln!("foster ctl: pids are shown as the supervisor sees them: {why}");
    }
    if let (Request::Signal { target: sent, .. }, CtlCommand::Signal { target: given, .. }) =
        (request, cmd)
    {
        let given = crate::supervision::control::protocol::Target::parse(given);
        match &mut reply.body {
            ReplyBody::Done { message, .. } => {
                *message = pids.message(message, Some((sent, &given)))
            }
            ReplyBody::Error(e) => e.message = pids.message(&e.message, Some((sent, &given))),
            _ => {}
        }
    }
    Ok(reply)
}

/// Prints `reply` for people or (`json`) as its line; an error reply is the error returned.
pub(super) fn print_reply(
    reply: Reply,
    cmd: &CtlCommand,
    view: View,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), ClientError> {
    let w = |e: io::Error| ClientError::caused(format!("cannot write to standard output: {e}"), e);
    if json {
        out.write_all(&reply.to_line()).map_err(w)?;
        return match reply.body {
            ReplyBody::Error(e) => Err(ClientError::new(escape(e.message.as_bytes()))),
            _ => Ok(()),
        };
    }
    if let ReplyBody::Error(e) = &reply.body
        && e.kind == crate::supervision::control::protocol::ErrorKind::InvalidConfig
    {
        // One mistake a line, each escaped.
        let lines: Vec<String> = e
            .message
            .lines()
            .map(|l| escape(l.as_bytes()).to_string())
            .collect();
        return Err(ClientError::new(format!(
            "{} (invalid_config)",
            lines.join("\n  ")
        )));
    }
    match into_result(reply)? {
        ReplyBody::Status(s) => {
            let width = match cmd {
                CtlCommand::Status { wide: false, .. } => view.width,
                _ => None,
            };
            out.write_all(render_status(&s, width).as_bytes())
                .map_err(w)?
        }
        ReplyBody::Reloaded(r) => out.write_all(render_reload(&r).as_bytes()).map_err(w)?,
        ReplyBody::ReloadPlan(r) => out
            .write_all(render_reload_plan(&r).as_bytes())
            .map_err(w)?,
        ReplyBody::History { helper, events } => out
            .write_all(render_history(&helper, &events).as_bytes())
            .map_err(w)?,
        ReplyBody::Metrics { text } => out.write_all(terminal_safe(&text).as_bytes()).map_err(w)?,
        ReplyBody::Done { message, .. } => {
            writeln!(out, "{}", escape(message.as_bytes())).map_err(w)?
        }
        other => return Err(unexpected(&other)),
    }
    Ok(())
}

/// `text` with every character a terminal must not receive raw escaped
/// ([`crate::base::sanitize::escape`]), its newlines kept: the Prometheus text as it came, unless
/// the supervisor put something a terminal would act on in it.
fn terminal_safe(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut buf = [0u8; 4];
    for c in text.chars() {
        if c != '\n' && crate::base::sanitize::is_unsafe(c) {
            out.push_str(&escape(c.encode_utf8(&mut buf).as_bytes()));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{listening_socket_paths, render_status};
    use std::os::unix::net::UnixListener;

    /// A snapshot of a supervisor (4700) and an orphan (4755) whose expected parent is
    /// `expected`.
    fn orphan_status(expected: &str) -> super::Status {
        let doc = format!(
            r#"{{"supervisor":{{"identity":{{"pid":4700,"start_time":912345}},"config":"a.toml",
              "socket":"a.sock","contained":false,"shutting_down":false,"started_ms":0}},
            "helpers":[],"now_ticks":913000,"hz":100,"processes":[
            {{"pid":4700,"start_time":912345,"role":"supervisor","helper":null,"generation":0,
              "policy":null,"expected_parent":null,"parent":{{"pid":4650,"start_time":912000}},
              "ppid":4650,"adoption":null,"state":"S","comm":"foster","cmdline":["foster"],
              "uid":0,"threads":1,"rss_bytes":0,"cpu_ticks":0}},
            {{"pid":4712,"start_time":912360,"role":"helper","helper":"h","generation":1,
              "policy":null,"expected_parent":{{"pid":4700,"start_time":912345}},
              "parent":{{"pid":4700,"start_time":912345}},"ppid":4700,"adoption":null,
              "state":"S","comm":"sh","cmdline":["sh"],"uid":0,"threads":1,"rss_bytes":0,
              "cpu_ticks":0}},
            {{"pid":4755,"start_time":912410,"role":"adopted_orphan","helper":"h",
              "generation":2,"policy":null,"expected_parent":{expected},
              "parent":{{"pid":4700,"start_time":912345}},"ppid":4700,"adoption":null,
              "state":"S","comm":"sleep","cmdline":["sleep","300"],"uid":0,"threads":1,
              "rss_bytes":0,"cpu_ticks":0}}]}}"#
        );
        serde_json::from_str(&doc).unwrap()
    }

    fn orphan_line(expected: &str) -> String {
        let text = render_status(&orphan_status(expected), None);
        text.lines()
            .find(|l| l.contains("sleep 300"))
            .unwrap_or_else(|| panic!("no orphan in {text}"))
            .to_string()
    }

    #[test]
    fn an_expected_parent_that_ended_is_named_gone_never_0() {
        // Alive: its pid.
        let l = orphan_line(r#"{"pid":4712,"start_time":912360}"#);
        assert!(l.contains("parent 4700 (expected 4712)"), "{l}");
        // Ended (its pid was taken by another process since, or nobody): its identity, gone.
        let l = orphan_line(r#"{"pid":4712,"start_time":912355}"#);
        assert!(l.contains("(expected 4712:912355, gone)"), "{l}");
        // Ended before the caller could see it across PID namespaces: the translation's 0
        // is not shown as a pid.
        let l = orphan_line(r#"{"pid":0,"start_time":912350}"#);
        assert!(l.contains("(expected ?:912350, gone)"), "{l}");
        assert!(!l.contains("expected 0"), "{l}");
    }

    #[test]
    fn stale_socket_files_are_not_listening() {
        let dir = std::env::temp_dir().join(format!("foster-client-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let live = dir.join("live.sock");
        let stale = dir.join("stale.sock");
        let _listener = UnixListener::bind(&live).unwrap();
        drop(UnixListener::bind(&stale).unwrap()); // the file stays, nobody listens
        let listening = listening_socket_paths().expect("/proc/net/unix is readable");
        let (has_live, has_stale) = (listening.contains(&live), listening.contains(&stale));
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(has_live, "a bound, listening socket is listed");
        assert!(!has_stale, "a socket file without a listener is not");
    }
}
