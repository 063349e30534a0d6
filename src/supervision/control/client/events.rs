//! The supervisor's events on the client side: `foster ctl events`, the demo, `wait`.
//!
//! Owns [`render_event`] (one event a line for people), [`follow`] (the backlog, then each new
//! event, pids shown as the caller's) and `print_streamed`. Uses [`super::connection`].

use std::io::{self, Write};

use super::connection::{ClientError, Connection, unexpected};
use crate::base::sanitize::escape;
use crate::supervision::control::protocol::{EventRecord, Reply, ReplyBody, Request};

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

/// Prints one line of a followed stream of events, for people or (`json`) as it came.
pub(in crate::supervision::control) fn print_streamed(
    r: &Reply,
    json: bool,
    out: &mut dyn Write,
) -> io::Result<bool> {
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
