//! One request's reply for `foster ctl`: sent, its pids made the caller's, and printed.
//!
//! Owns `exchange`, `signal_target`, `print_reply` and the renderings of reloads, reload
//! plans and histories. Whatever the server sent goes through
//! [`crate::base::sanitize::escape`]; `--json` output is [`Reply::to_line`]. Uses the other
//! files of [`super`].

use std::io::{self, Write};

use super::command::{CtlCommand, View};
use super::connection::{ClientError, Connection, into_result, unexpected};
use super::events::render_event;
use super::status::render_status;
use crate::base::sanitize::escape;
use crate::supervision::control::nspid::PidMap;
use crate::supervision::control::protocol::{EventRecord, Reply, ReplyBody, Request};

/// Sends `request` and returns its reply, the processes it names by the caller's pids.
pub(in crate::supervision::control) fn exchange(
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

/// The target of `foster ctl signal` in the supervisor's terms: a pid the caller names is one
/// of the caller's namespace. Refused (and, for `json`, said as an error reply) otherwise.
pub(in crate::supervision::control) fn signal_target(
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

/// Prints `reply` for people or (`json`) as its line; an error reply is the error returned.
pub(in crate::supervision::control) fn print_reply(
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

/// A reload's answer for people: one line per kind of change, the helpers named (escaped).
pub fn render_reload(r: &crate::supervision::control::protocol::Reloaded) -> String {
    let words = [
        "started",
        "stopped",
        "restarted",
        "unchanged",
        "applied",
        "needs a restart of foster",
    ];
    format!(
        "configuration reloaded\n{}{}",
        change_lines(r, words),
        warning_lines(r)
    )
}

/// A reload's plan (`reload --dry-run`) for people: what a reload would do now.
pub fn render_reload_plan(r: &crate::supervision::control::protocol::Reloaded) -> String {
    let words = [
        "start",
        "stop",
        "restart",
        "leave as they are",
        "apply",
        "need a restart of foster for",
    ];
    let lines = change_lines(r, words);
    let warnings = warning_lines(r);
    if lines.is_empty() {
        return format!("the configuration is valid; a reload would change nothing\n{warnings}");
    }
    format!("the configuration is valid; nothing was changed; a reload would:\n{lines}{warnings}")
}

/// One `  WORD: a, b` line per kind of change that names a helper or setting (escaped), in
/// the order started, stopped, restarted, unchanged, applied, needing a restart.
fn change_lines(r: &crate::supervision::control::protocol::Reloaded, words: [&str; 6]) -> String {
    let lists = [
        &r.started,
        &r.stopped,
        &r.restarted,
        &r.unchanged,
        &r.applied,
        &r.needs_restart,
    ];
    let mut out = String::new();
    for (what, names) in words.into_iter().zip(lists) {
        if names.is_empty() {
            continue;
        }
        let names: Vec<String> = names.iter().map(|n| escape(n.as_bytes())).collect();
        out.push_str(&format!("  {what}: {}\n", names.join(", ")));
    }
    out
}

/// A reload's warnings, one `  warning: ...` line each (escaped).
fn warning_lines(r: &crate::supervision::control::protocol::Reloaded) -> String {
    r.warnings
        .iter()
        .map(|w| format!("  warning: {}\n", escape(w.as_bytes())))
        .collect()
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
