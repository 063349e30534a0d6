//! `foster ctl logs`: helpers' lines in the relay's own forms.
//!
//! Owns `LogsAsked` and `logs`: the kept lines, then (with `-f`) each new one, shown by
//! [`crate::supervision::output::Renderer`] (`NAME | line`, or its JSON), pids as the
//! caller's. Uses [`super::connection`].

use std::io::{self, Write};

use super::connection::{ClientError, Connection, unexpected};
use crate::base::sanitize::escape;
use crate::supervision::control::protocol::{ReplyBody, Request};

/// What `foster ctl logs` asks for and how it shows it.
pub(in crate::supervision::control) struct LogsAsked {
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
pub(in crate::supervision::control) fn logs(
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
        into_buf(
            r.body,
            &mut pids,
            (json, asked.timestamps),
            &renderer,
            &mut buf,
        )?;
        if !write_out(out, &buf)? {
            return Ok(());
        }
    }
}

/// Writes `buf` to `out` and flushes it: false when nobody reads it any more (a broken pipe).
fn write_out(out: &mut dyn Write, buf: &[u8]) -> Result<bool, ClientError> {
    match out.write_all(buf).and_then(|()| out.flush()) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(ClientError::caused(
            format!("cannot write to standard output: {e}"),
            e,
        )),
    }
}

/// One reply of the stream into `buf`: a line as the relay shows it (after its time when
/// `timestamps` and not `json`), a lag as a line saying how many were missed.
fn into_buf(
    body: ReplyBody,
    pids: &mut crate::supervision::control::nspid::PidMap,
    (json, timestamps): (bool, bool),
    renderer: &crate::supervision::output::Renderer,
    buf: &mut Vec<u8>,
) -> Result<(), ClientError> {
    match body {
        ReplyBody::Log(mut rec) => {
            pids.log(&mut rec);
            log_line(rec, timestamps && !json, renderer, buf);
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
    Ok(())
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
