//! `foster ctl`'s verbs: each subcommand as the requests it sends and what it prints.
//!
//! Owns [`ctl`], the one entry of `foster ctl`: the socket found ([`socket_path`]: `--socket`,
//! `--config`'s supervisor, else [`client::resolve_socket`]'s), then each verb: one request and
//! its answer, or several on one connection (`restart`, `start`, `stop` of several helpers or
//! `all`), a status narrowed to some helpers, `pid`, and `wait`, which follows the events and
//! asks for the status at each change of a helper it waits for. Uses [`super::client`] (the
//! connection, the renderings) and the protocol, never the server.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::client::{self, ClientError, Connection, CtlCommand, LogsAsked, View, WaitFor};
use super::nspid::PidMap;
use super::protocol::{HelperState, MAX_LOG_LINES, Reply, ReplyBody, Request, Status};
use crate::base::sanitize::escape;

/// The name that stands for every helper in `restart`, `start`, `stop`, `status` and `wait`.
pub const ALL: &str = "all";

/// Runs `foster ctl`: the request (or requests) of `cmd`, the replies printed for people or
/// (`json`) as their lines. An error reply, or a request not carried out, is an error.
pub fn ctl(
    (socket, config): (Option<&Path>, Option<&Path>),
    json: bool,
    cmd: &CtlCommand,
    view: View,
    out: &mut dyn Write,
) -> Result<(), ClientError> {
    let path = socket_path(socket, config)?;
    let mut conn = Connection::connect(&path)?;
    let mut pids = conn.pid_map();
    let request = match cmd {
        CtlCommand::Status { helpers, .. } if !helpers.is_empty() => {
            return status_of(&mut conn, &mut pids, (cmd, helpers), (view, json), out);
        }
        CtlCommand::Status { .. } => Request::Status,
        CtlCommand::Events { backlog, no_follow } => {
            return client::follow(&mut conn, *backlog, !*no_follow, |r| {
                client::print_streamed(r, json, out)
            });
        }
        CtlCommand::Signal { target, signal } => Request::Signal {
            target: client::signal_target(&mut pids, target, json, out)?,
            signal: *signal,
        },
        CtlCommand::Restart { helpers }
        | CtlCommand::Start { helpers }
        | CtlCommand::Stop { helpers } => {
            return each_helper(&mut conn, &mut pids, (cmd, helpers), (view, json), out);
        }
        CtlCommand::Shutdown => Request::Stop { helper: None },
        CtlCommand::ReopenLogs => Request::ReopenLogs,
        CtlCommand::Logs {
            helpers,
            lines,
            follow,
            since,
            timestamps,
        } => {
            let asked = logs_asked(helpers, *lines, *since, (*follow, *timestamps), view);
            return client::logs(&mut conn, json, &asked, out);
        }
        CtlCommand::Reload { dry_run } => Request::Reload { dry_run: *dry_run },
        CtlCommand::Metrics => Request::Metrics,
        CtlCommand::History { helper } => Request::History {
            helper: helper.clone(),
        },
        CtlCommand::Pid { helper } => return pid(&mut conn, &mut pids, (cmd, helper), json, out),
        CtlCommand::Wait {
            helpers,
            until,
            timeout,
        } => {
            let deadline = timeout.map(|t| Instant::now() + t);
            return wait(&path, conn, (helpers, *until, deadline), json, out);
        }
    };
    let reply = client::exchange(&mut conn, &mut pids, &request, cmd)?;
    client::print_reply(reply, cmd, view, json, out)
}

/// How `foster ctl`'s errors say to choose a supervisor.
const CHOOSE: &str = "--socket PATH or --config FILE";

/// The socket `foster ctl` talks to: `--socket`; else that of the supervisor of `--config`;
/// else [`client::resolve_socket`]'s (FOSTER_SOCKET, else the supervisor of the configuration
/// file of the current directory).
pub fn socket_path(socket: Option<&Path>, config: Option<&Path>) -> Result<PathBuf, ClientError> {
    if let Some(p) = socket {
        return Ok(p.to_path_buf());
    }
    let Some(c) = config else {
        return client::resolve_socket(None, CHOOSE);
    };
    // The lock is read only in a directory of this user's: another's could name any socket.
    client::default_dir_is_private()?;
    match crate::supervision::instance::recorded_socket(c) {
        Ok(Some(p)) => Ok(p),
        Ok(None) => Err(ClientError::new(format!(
            "no supervisor of {} has a control socket here (none was started on it, or it \
             runs with --no-socket); use --socket",
            c.display()
        ))),
        Err(e) => Err(ClientError::caused(
            format!("--config {}: {e}", c.display()),
            e,
        )),
    }
}

/// What `logs` asks for: with `--since`, every kept line since then unless `-n` says fewer.
fn logs_asked(
    helpers: &[String],
    lines: Option<u64>,
    since: Option<Duration>,
    (follow, timestamps): (bool, bool),
    view: View,
) -> LogsAsked {
    let now_ms =
        crate::supervision::event::Record::now(crate::supervision::event::Event::Shutdown {
            signal: None,
        })
        .ts_ms;
    let default = if since.is_some() { MAX_LOG_LINES } else { 10 };
    LogsAsked {
        helpers: helpers.to_vec(),
        // At most MAX_LOG_LINES: clap's range checked it.
        lines: lines.map_or(default, |n| usize::try_from(n).unwrap_or(MAX_LOG_LINES)),
        follow,
        since_ms: since.map(|d| now_ms.saturating_sub(d.as_millis() as u64)),
        timestamps,
        colour: view.colour,
    }
}

/// The helpers `names` stand for: every helper, in configuration order (the reverse for
/// `stop`: dependents before what they depend on), when one is [`ALL`].
fn expand(
    conn: &mut Connection,
    names: &[String],
    reverse: bool,
) -> Result<Vec<String>, ClientError> {
    if !names.iter().any(|n| n == ALL) {
        return Ok(names.to_vec());
    }
    let mut all: Vec<String> = conn.status()?.helpers.into_iter().map(|h| h.name).collect();
    if reverse {
        all.reverse();
    }
    Ok(all)
}

/// `restart`, `start` or `stop` of each helper named, one request each on one connection, each
/// answer printed; an error when any was not carried out (each said as it comes).
fn each_helper(
    conn: &mut Connection,
    pids: &mut PidMap,
    (cmd, helpers): (&CtlCommand, &[String]),
    (view, json): (View, bool),
    out: &mut dyn Write,
) -> Result<(), ClientError> {
    if helpers.is_empty() {
        return Err(ClientError::new(client::BARE_STOP));
    }
    let names = expand(conn, helpers, matches!(cmd, CtlCommand::Stop { .. }))?;
    let mut failed = Vec::new();
    for name in &names {
        let helper = name.clone();
        let request = match cmd {
            CtlCommand::Restart { .. } => Request::Restart { helper },
            CtlCommand::Start { .. } => Request::Start { helper },
            _ => Request::Stop {
                helper: Some(helper),
            },
        };
        let reply = client::exchange(conn, pids, &request, cmd)?;
        match client::print_reply(reply, cmd, view, json, out) {
            Ok(()) => {}
            Err(e) if names.len() == 1 => return Err(e),
            Err(e) => {
                crate::base::logging::report(&e);
                failed.push(escape(name.as_bytes()));
            }
        }
    }
    match failed.len() {
        0 => Ok(()),
        n => Err(ClientError::new(format!(
            "{n} of {} requests were not carried out: {}",
            names.len(),
            failed.join(", ")
        ))),
    }
}

/// The error for helpers of `names` that `s` does not have, naming those it has.
fn unknown(s: &Status, names: &[String]) -> Option<ClientError> {
    let missing: Vec<String> = names
        .iter()
        .filter(|n| *n != ALL && !s.helpers.iter().any(|h| h.name == **n))
        .map(|n| format!("{:?}", escape(n.as_bytes())))
        .collect();
    if missing.is_empty() {
        return None;
    }
    let have: Vec<String> = s
        .helpers
        .iter()
        .map(|h| escape(h.name.as_bytes()))
        .collect();
    Some(ClientError::new(format!(
        "no helper named {}; helpers: {} (no_such_helper)",
        missing.join(", "),
        crate::supervision::control::protocol::helpers_named(have.iter().map(|h| h.as_str()))
    )))
}

/// `status HELPER...`: the supervisor, those helpers, and their processes.
fn status_of(
    conn: &mut Connection,
    pids: &mut PidMap,
    (cmd, names): (&CtlCommand, &[String]),
    (view, json): (View, bool),
    out: &mut dyn Write,
) -> Result<(), ClientError> {
    let mut reply = client::exchange(conn, pids, &Request::Status, cmd)?;
    if let ReplyBody::Status(s) = &mut reply.body
        && !names.iter().any(|n| n == ALL)
    {
        if let Some(e) = unknown(s, names) {
            return Err(e);
        }
        let sup = s.supervisor.identity.pid;
        s.helpers.retain(|h| names.contains(&h.name));
        s.processes
            .retain(|p| p.pid == sup || p.helper.as_ref().is_some_and(|h| names.contains(h)));
    }
    client::print_reply(reply, cmd, view, json, out)
}

/// `pid HELPER`: its process's pid, as the caller's PID namespace knows it.
fn pid(
    conn: &mut Connection,
    pids: &mut PidMap,
    (cmd, name): (&CtlCommand, &str),
    json: bool,
    out: &mut dyn Write,
) -> Result<(), ClientError> {
    let reply = client::exchange(conn, pids, &Request::Status, cmd)?;
    let ReplyBody::Status(s) = client::into_result(reply)? else {
        return Err(ClientError::new("unexpected reply from the supervisor"));
    };
    if let Some(e) = unknown(&s, &[name.to_string()]) {
        return Err(e);
    }
    let h = s.helpers.iter().find(|h| h.name == name).expect("checked");
    let shown = escape(name.as_bytes());
    let Some(id) = h.identity.filter(|i| i.pid > 0) else {
        return Err(ClientError::new(format!(
            "helper \"{shown}\" has no process: it is {}{} (refused)",
            h.state.text(),
            h.detail
                .as_deref()
                .map(|d| format!(" {}", escape(d.as_bytes())))
                .unwrap_or_default()
        )));
    };
    let text = if json {
        let v = PidLine {
            version: super::protocol::VERSION,
            helper: name,
            pid: id.pid,
            start_time: id.start_time,
        };
        crate::base::sanitize::to_json(&v).unwrap_or_default()
    } else {
        id.pid.to_string()
    };
    writeln!(out, "{text}").map_err(write_error)
}

/// `pid --json`'s line.
#[derive(serde::Serialize)]
struct PidLine<'a> {
    version: u32,
    helper: &'a str,
    pid: i32,
    start_time: u64,
}

/// Each line of `wait --json`.
#[derive(serde::Serialize)]
struct StateLine<'a> {
    version: u32,
    helper: &'a str,
    state: HelperState,
}

fn write_error(e: std::io::Error) -> ClientError {
    ClientError::caused(format!("cannot write to standard output: {e}"), e)
}

/// Where a helper stands for `wait`.
enum Judged {
    Reached,
    Pending,
    /// It cannot get there by itself (it ended for good, or was stopped): why.
    Never(String),
}

/// Whether helper `h` has reached `until`.
fn judge(state: HelperState, until: WaitFor) -> Judged {
    use HelperState as S;
    let reached = match until {
        WaitFor::Started => state.is_up(),
        WaitFor::Ready => matches!(state, S::Running | S::Ready | S::Unhealthy),
        WaitFor::Stopped => !state.is_up() && state != S::Stopping,
    };
    let over = matches!(state, S::Stopped | S::GaveUp | S::Completed | S::Failed);
    match (reached, over) {
        (true, _) => Judged::Reached,
        (false, true) => Judged::Never(format!(
            "it is {}: it is not launched again unless started",
            state.text()
        )),
        (false, false) => Judged::Pending,
    }
}

/// `wait`: follows the events (from now), and asks for the status first and after each change
/// of state of a helper waited for, until every one has reached `until`, one never can, the
/// deadline passes or the supervisor ends.
fn wait(
    path: &Path,
    mut events: Connection,
    (helpers, until, deadline): (&[String], WaitFor, Option<Instant>),
    json: bool,
    out: &mut dyn Write,
) -> Result<(), ClientError> {
    // Following before the first look: no change between the two is missed.
    let first = events.ask(&Request::Events {
        backlog: Some(0),
        follow: true,
    })?;
    if !matches!(first, ReplyBody::Events { .. }) {
        return Err(ClientError::new("unexpected reply from the supervisor"));
    }
    let mut names: Option<Vec<String>> = None;
    loop {
        let s = Connection::connect(path)?.status()?;
        if let Some(e) = unknown(&s, helpers) {
            return Err(e);
        }
        let names = names.get_or_insert_with(|| match helpers.iter().any(|n| n == ALL) {
            true => s.helpers.iter().map(|h| h.name.clone()).collect(),
            false => helpers.to_vec(),
        });
        let mut pending = Vec::new();
        for h in s.helpers.iter().filter(|h| names.contains(&h.name)) {
            match judge(h.state, until) {
                Judged::Reached => {}
                Judged::Pending => pending.push(h),
                Judged::Never(why) => {
                    return Err(ClientError::new(format!(
                        "helper \"{}\" will not be {}: {why}",
                        escape(h.name.as_bytes()),
                        until_text(until)
                    )));
                }
            }
        }
        if pending.is_empty() {
            return print_reached(&s, names, json, out);
        }
        next_change(&mut events, names, deadline, || {
            let list: Vec<String> = pending
                .iter()
                .map(|h| format!("\"{}\" is {}", escape(h.name.as_bytes()), h.state.text()))
                .collect();
            format!(
                "timed out waiting for {} to be {}: {}",
                match pending.len() {
                    1 => "1 helper".to_string(),
                    n => format!("{n} helpers"),
                },
                until_text(until),
                list.join(", ")
            )
        })?;
    }
}

fn until_text(until: WaitFor) -> &'static str {
    match until {
        WaitFor::Started => "started",
        WaitFor::Ready => "ready",
        WaitFor::Stopped => "stopped",
    }
}

/// Reads the events until one changes the state of a helper of `names` (or some were missed):
/// an error, saying `late()`, once `deadline` passes; another when the supervisor ends.
fn next_change(
    events: &mut Connection,
    names: &[String],
    deadline: Option<Instant>,
    late: impl Fn() -> String,
) -> Result<(), ClientError> {
    use crate::supervision::event::Event;
    loop {
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        if left == Some(Duration::ZERO) {
            return Err(ClientError::new(late()));
        }
        events.set_read_timeout(left)?;
        let reply: Option<Reply> = match events.read() {
            Err(e) if e.timed_out() => return Err(ClientError::new(late())),
            other => other?,
        };
        match reply.map(|r| r.body) {
            None => {
                return Err(ClientError::new(
                    "the supervisor ended before the helpers got there",
                ));
            }
            Some(ReplyBody::Event(r)) => match &r.event {
                Event::State { helper, .. } if names.contains(helper) => return Ok(()),
                _ => {}
            },
            Some(ReplyBody::Lagged { .. }) => return Ok(()),
            Some(_) => {}
        }
    }
}

/// What `wait` prints once every helper got there: each one's state.
fn print_reached(
    s: &Status,
    names: &[String],
    json: bool,
    out: &mut dyn Write,
) -> Result<(), ClientError> {
    for h in s.helpers.iter().filter(|h| names.contains(&h.name)) {
        let line = if json {
            let v = StateLine {
                version: super::protocol::VERSION,
                helper: &h.name,
                state: h.state,
            };
            crate::base::sanitize::to_json(&v).unwrap_or_default()
        } else {
            format!(
                "helper \"{}\" is {}",
                escape(h.name.as_bytes()),
                h.state.text()
            )
        };
        writeln!(out, "{line}").map_err(write_error)?;
    }
    Ok(())
}
