//! One client's task: bounded lines read, each request answered in order (`events` from the
//! hub, `logs` from the helpers' kept lines, the others by the supervisor), streams followed.
//! A client that does not read stalls only its own task, and one that does not follow is
//! closed after [`IDLE_TIMEOUT`] without a request or without reading a line of an answer.

use std::collections::VecDeque;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::sync::{broadcast, oneshot};
use tracing::debug;

use super::slots::{ClientCtx, ClientSlot};
use super::{Command, IDLE_TIMEOUT, MAX_CLIENTS, MAX_FOLLOWERS, Peer};
use crate::supervision::control::protocol::{
    BACKLOG, DEFAULT_LOG_LINES, ErrorKind, EventRecord, LogRecord, MAX_REQUEST, Reply, ReplyBody,
    Request, parse_request,
};
use crate::supervision::output::{Follower, Next, Output};

/// One line read from a client.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// A complete line, newline removed (or the last bytes before end of input).
    Text(Vec<u8>),
    /// A line longer than [`MAX_REQUEST`], skipped up to its newline; its length so far.
    Oversized(usize),
    /// End of input.
    Eof,
}

/// Splits a byte stream into lines of at most [`MAX_REQUEST`] bytes (plus a `\r`), never
/// holding more than that plus one read's worth of complete lines.
#[derive(Debug, Default)]
pub struct LineReader {
    buf: Vec<u8>,
    /// Bytes of an oversized line skipped so far (`Some` while skipping).
    skipping: Option<usize>,
    ready: VecDeque<Line>,
    eof: bool,
}

impl LineReader {
    pub fn new() -> LineReader {
        LineReader::default()
    }

    /// The next line from `r`. Cancel-safe: bytes read before a cancellation are kept.
    pub async fn next<R: AsyncRead + Unpin>(&mut self, r: &mut R) -> io::Result<Line> {
        loop {
            if let Some(line) = self.take() {
                return Ok(line);
            }
            if self.eof {
                return Ok(Line::Eof);
            }
            let mut chunk = [0u8; 4096];
            let n = r.read(&mut chunk).await?;
            if n == 0 {
                self.end();
            } else {
                self.feed(&chunk[..n]);
            }
        }
    }

    /// Adds bytes: complete lines become ready, an oversized one is counted, not kept.
    pub fn feed(&mut self, bytes: &[u8]) {
        let mut rest = bytes;
        while let Some(i) = rest.iter().position(|&b| b == b'\n') {
            self.push_part(&rest[..i]);
            let line = match self.skipping.take() {
                Some(n) => Line::Oversized(n),
                None => Line::Text(std::mem::take(&mut self.buf)),
            };
            self.ready.push_back(line);
            rest = &rest[i + 1..];
        }
        self.push_part(rest);
    }

    fn push_part(&mut self, part: &[u8]) {
        match &mut self.skipping {
            Some(n) => *n += part.len(),
            None if self.buf.len() + part.len() > MAX_REQUEST + 1 => {
                self.skipping = Some(self.buf.len() + part.len());
                self.buf = Vec::new();
            }
            None => self.buf.extend_from_slice(part),
        }
    }

    /// Marks the end of input, as [`LineReader::next`] does when the reader has no more: then
    /// [`LineReader::take`] gives what is left.
    pub fn end(&mut self) {
        self.eof = true;
    }

    /// The next complete line; at end of input, what is left.
    pub fn take(&mut self) -> Option<Line> {
        if let Some(l) = self.ready.pop_front() {
            return Some(l);
        }
        if !self.eof {
            return None;
        }
        if let Some(n) = self.skipping.take() {
            return Some(Line::Oversized(n));
        }
        (!self.buf.is_empty()).then(|| Line::Text(std::mem::take(&mut self.buf)))
    }
}

async fn write_line(stream: &mut UnixStream, reply: &Reply) -> io::Result<()> {
    stream.write_all(&reply.to_line()).await
}

/// Why a client's connection ended early.
#[derive(Debug)]
enum End {
    Io(io::Error),
    /// No complete request within [`IDLE_TIMEOUT`] (`reading`: while waiting for one, not
    /// while writing an answer it did not read).
    Idle {
        reading: bool,
    },
    /// Closed to make room for a new client, after being idle this long.
    Evicted {
        reading: bool,
        idle: Duration,
    },
}

pub(super) async fn client(mut stream: UnixStream, peer: Peer, ctx: ClientCtx, slot: ClientSlot) {
    match serve_client(&mut stream, peer, &ctx, &slot).await {
        Ok(()) => {}
        Err(End::Io(e)) => debug!("control socket: client {peer} gone: {e}"),
        Err(end) => {
            debug!("control socket: client {peer}: closed ({end:?})");
            let notice = match end {
                End::Idle { reading: true } => Some(format!(
                    "closing the connection: no complete request within {}s (the idle timeout)",
                    IDLE_TIMEOUT.as_secs()
                )),
                End::Evicted {
                    reading: true,
                    idle,
                } => Some(format!(
                    "closing the connection to make room: {MAX_CLIENTS} clients are connected \
                     and this one was idle the longest ({:.1}s without a request)",
                    idle.as_secs_f64()
                )),
                _ => None, // it was not reading: a partial answer may be in its buffer
            };
            if let Some(m) = notice {
                // Best effort, never waiting: the client may not read.
                let _ = stream.try_write(&Reply::error(ErrorKind::Idle, m).to_line());
            }
        }
    }
    let _ = stream.shutdown().await;
}

/// Writes one answer to a client that does not follow events, within its idle deadline (and
/// unless it is closed to make room meanwhile).
async fn write_bounded(
    stream: &mut UnixStream,
    reply: &Reply,
    slot: &ClientSlot,
    since: Instant,
) -> Result<(), End> {
    tokio::select! {
        r = write_line(stream, reply) => r.map_err(End::Io),
        _ = slot.evict.notified() => Err(End::Evicted { reading: false, idle: since.elapsed() }),
        _ = tokio::time::sleep_until((since + IDLE_TIMEOUT).into()) => {
            Err(End::Idle { reading: false })
        }
    }
}

/// What a client follows, once it asked to.
enum Following {
    Events(broadcast::Receiver<Arc<EventRecord>>),
    /// A follower of the lines of the helpers asked for (or of all).
    Logs(Box<Follower>, Arc<Output>),
}

/// An answer: its reply lines, then kept lines of helpers (each made a `log` reply only as it
/// is written: they are shared with the rings until then), and what the client now follows.
struct Answer {
    replies: Vec<Reply>,
    lines: Vec<Arc<crate::supervision::output::Line>>,
    follows: Option<Following>,
}

impl Answer {
    fn one(reply: Reply) -> Answer {
        Answer {
            replies: vec![reply],
            lines: Vec::new(),
            follows: None,
        }
    }
}

fn log_reply(line: &crate::supervision::output::Line) -> Reply {
    Reply::new(ReplyBody::Log(LogRecord::of(line)))
}

/// The refusal of a follower beyond [`MAX_FOLLOWERS`].
fn too_many_followers() -> Reply {
    Reply::error(
        ErrorKind::Refused,
        format!(
            "{MAX_FOLLOWERS} clients already follow the events or the helpers' lines of this \
             supervisor (the limit, which keeps slots for other requests); ask with \"follow\": \
             false, or try again later"
        ),
    )
}

/// "no helper named "x"; helpers: a, b" ([`protocol::helpers_named`]). The names as they are:
/// a client escapes the message before it shows it (escaping here would show `\` twice).
fn no_such_helper(name: &str, output: &Output) -> Reply {
    let names = output.helpers();
    let list = crate::supervision::control::protocol::helpers_named(names.iter().map(|n| &**n));
    Reply::error(
        ErrorKind::NoSuchHelper,
        format!("no helper named \"{name}\"; helpers: {list}"),
    )
}

/// Serves one client's requests until it leaves, is evicted or stays idle too long.
async fn serve_client(
    stream: &mut UnixStream,
    peer: Peer,
    ctx: &ClientCtx,
    slot: &ClientSlot,
) -> Result<(), End> {
    let mut lines = LineReader::new();
    let mut follower: Option<Following> = None;
    let mut eof = false;
    // Waiting for a complete request since then; a follower is never idle.
    let mut since = Instant::now();
    loop {
        if eof && follower.is_none() {
            return Ok(());
        }
        let following = follower.is_some();
        let line = tokio::select! {
            // A request already read is served before a notice that came after it.
            biased;
            l = lines.next(stream), if !eof => l.map_err(End::Io)?,
            next = next_streamed(&mut follower), if following => {
                let Some(reply) = next else {
                    // The supervisor is ending: nothing more will be answered.
                    return Ok(());
                };
                write_line(stream, &reply).await.map_err(End::Io)?;
                continue;
            }
            _ = slot.evict.notified(), if !following => {
                return Err(End::Evicted { reading: true, idle: since.elapsed() });
            }
            _ = tokio::time::sleep_until((since + IDLE_TIMEOUT).into()), if !following => {
                return Err(End::Idle { reading: true });
            }
        };
        let request = match line {
            Line::Eof => {
                eof = true;
                continue;
            }
            line => match request_of(line, peer) {
                Some(r) => r,
                None => continue,
            },
        };
        let answer = answer(request, peer, ctx, slot, since).await?;
        if let Some(f) = answer.follows {
            follower = Some(f);
        }
        let replies = answer.replies.into_iter();
        let replies = replies.chain(answer.lines.iter().map(|l| log_reply(l)));
        since = write_answer(stream, replies, follower.is_none(), slot, since).await?;
    }
}

/// The request a line (not the end) carries, or the reply refusing it; none for a blank line
/// (no answer, and the idle timeout goes on).
fn request_of(line: Line, peer: Peer) -> Option<Result<Request, Box<Reply>>> {
    let text = match line {
        Line::Eof => return None,
        Line::Oversized(n) => {
            return Some(Err(Box::new(Reply::error(
                ErrorKind::Oversized,
                format!(
                    "request line of more than {n} bytes is longer than the limit of \
                     {MAX_REQUEST} bytes; skipped up to its newline"
                ),
            ))));
        }
        Line::Text(t) => t,
    };
    if text.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    Some(parse_request(&text).map_err(|e| {
        debug!("control socket: client {peer}: {e}");
        Box::new(e.reply())
    }))
}

/// A client asking to follow takes a follower's slot, if one is left: the refusal otherwise.
fn may_follow(slot: &ClientSlot, follow: bool, since: Instant) -> Result<Option<Reply>, End> {
    match follow.then(|| slot.follow()) {
        Some(Err(false)) => Err(End::Evicted {
            reading: true,
            idle: since.elapsed(),
        }),
        Some(Err(true)) => Ok(Some(too_many_followers())),
        _ => Ok(None),
    }
}

/// The answer to one request (or its refusal): events and logs here, the others by the
/// supervisor's loop.
async fn answer(
    request: Result<Request, Box<Reply>>,
    peer: Peer,
    ctx: &ClientCtx,
    slot: &ClientSlot,
    since: Instant,
) -> Result<Answer, End> {
    Ok(match request {
        Err(reply) => Answer::one(*reply),
        Ok(Request::Events { backlog, follow }) => {
            events_answer(ctx, slot, backlog, follow, since)?
        }
        Ok(Request::Logs {
            helper,
            lines,
            follow,
            helpers,
            since_ms,
        }) => {
            let mut names: Vec<String> = Vec::new();
            for h in helper.into_iter().chain(helpers) {
                if !names.contains(&h) {
                    names.push(h);
                }
            }
            let asked = LogsAsked {
                names,
                lines,
                follow,
                since_ms,
            };
            logs_answer(ctx, slot, asked, since)?
        }
        Ok(request) => {
            if !slot.set_idle(None) {
                return Err(End::Evicted {
                    reading: true,
                    idle: since.elapsed(),
                });
            }
            let (tx, rx) = oneshot::channel();
            let cmd = Command {
                request,
                peer,
                reply: tx,
            };
            let reply = if ctx.commands.send(cmd).await.is_err() {
                None
            } else {
                rx.await.ok()
            };
            Answer::one(
                reply.unwrap_or_else(|| {
                    Reply::error(ErrorKind::Refused, "the supervisor is exiting")
                }),
            )
        }
    })
}

/// The answer to `events`: the backlog, then the events as they come when it follows.
fn events_answer(
    ctx: &ClientCtx,
    slot: &ClientSlot,
    backlog: Option<usize>,
    follow: bool,
    since: Instant,
) -> Result<Answer, End> {
    let n = backlog.unwrap_or(BACKLOG).min(BACKLOG);
    let (past, rx) = ctx.hub.subscribe(n);
    let follow = follow && rx.is_some();
    if let Some(refused) = may_follow(slot, follow, since)? {
        return Ok(Answer::one(refused));
    }
    let mut v = vec![Reply::new(ReplyBody::Events {
        backlog: past.len(),
        follow,
    })];
    v.extend(
        past.iter()
            .map(|rec| Reply::new(ReplyBody::Event((**rec).clone()))),
    );
    Ok(Answer {
        replies: v,
        lines: Vec::new(),
        follows: follow.then_some(rx).flatten().map(Following::Events),
    })
}

/// What a `logs` request asks for: the helpers (none: every one), how many kept lines, whether
/// it follows, and from when.
struct LogsAsked {
    names: Vec<String>,
    lines: Option<usize>,
    follow: bool,
    since_ms: Option<u64>,
}

/// The answer to `logs`: the kept lines, then the lines as they come when it follows.
fn logs_answer(
    ctx: &ClientCtx,
    slot: &ClientSlot,
    asked: LogsAsked,
    since: Instant,
) -> Result<Answer, End> {
    let Some(output) = &ctx.output else {
        return Ok(Answer::one(Reply::error(
            ErrorKind::Refused,
            "this supervisor keeps no helpers' output",
        )));
    };
    let LogsAsked {
        names,
        lines: n,
        follow,
        since_ms,
    } = asked;
    for h in &names {
        match output.captured(h) {
            Ok(false) => return Ok(Answer::one(not_captured(h))),
            Err(e) => return Ok(Answer::one(no_such_helper(&e.0, output))),
            Ok(true) => {}
        }
    }
    let n = n.unwrap_or(DEFAULT_LOG_LINES);
    let (past, f) = match kept(output, &names, (n, since_ms)) {
        Err(e) => return Ok(Answer::one(no_such_helper(&e.0, output))),
        Ok(found) => found,
    };
    if let Some(refused) = may_follow(slot, follow, since)? {
        return Ok(Answer::one(refused));
    }
    let helpers = match names.is_empty() {
        false => names,
        true => output
            .helpers()
            .iter()
            .filter(|h| !h.is_empty())
            .map(|h| h.to_string())
            .collect(),
    };
    Ok(Answer {
        replies: vec![Reply::new(ReplyBody::Logs {
            helpers,
            lines: past.len(),
            follow,
        })],
        lines: past,
        follows: follow.then(|| Following::Logs(Box::new(f), output.clone())),
    })
}

/// The last `n` kept lines of the helpers `names` (every helper's when none) read since
/// `since_ms`, and a follower of the later ones (the server keeps only their lines, and counts
/// only theirs when it lags).
fn kept(
    output: &Output,
    names: &[String],
    (n, since_ms): (usize, Option<u64>),
) -> Result<KeptLines, crate::supervision::output::UnknownHelper> {
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    // A time: every kept line, filtered, then the last n.
    let (mut past, f) = output.follower(&names, if since_ms.is_some() { usize::MAX } else { n })?;
    if let Some(s) = since_ms {
        past.retain(|l| l.ts_ms >= s);
        past.drain(..past.len().saturating_sub(n));
    }
    Ok((past, f))
}

/// Kept lines, and a follower of the later ones.
type KeptLines = (Vec<Arc<crate::supervision::output::Line>>, Follower);

/// The refusal of `logs` for a helper whose output is not kept.
fn not_captured(helper: &str) -> Reply {
    Reply::error(
        ErrorKind::Refused,
        format!(
            "helper {helper:?} has no lines to show: its output is not captured \
             (output = \"null\" or \"inherit\" in its configuration; \
             \"capture\", the default, keeps them)"
        ),
    )
}

/// Writes an answer's lines; a client that does not follow gets each within the idle timeout
/// of the one before, and is idle again after. Returns when it was last written to.
async fn write_answer(
    stream: &mut UnixStream,
    replies: impl Iterator<Item = Reply>,
    idle: bool,
    slot: &ClientSlot,
    since: Instant,
) -> Result<Instant, End> {
    let answered = Instant::now();
    if !idle {
        for r in replies {
            write_line(stream, &r).await.map_err(End::Io)?;
        }
        return Ok(answered);
    }
    if !slot.set_idle(Some(answered)) {
        // Closed to make room before its answer was written: say why instead.
        return Err(End::Evicted {
            reading: true,
            idle: since.elapsed(),
        });
    }
    let mut since = answered;
    // Each line of the answer within the idle timeout of the one before.
    for r in replies {
        write_bounded(stream, &r, slot, since).await?;
        since = Instant::now();
        if !slot.set_idle(Some(since)) {
            return Err(End::Evicted {
                reading: true,
                idle: Duration::ZERO,
            });
        }
    }
    Ok(since)
}

/// The next line a follower gets: an event, a helper's line, or how many it missed; `None`
/// once the stream has ended.
async fn next_streamed(f: &mut Option<Following>) -> Option<Reply> {
    match f {
        Some(Following::Events(rx)) => match rx.recv().await {
            Ok(rec) => Some(Reply::new(ReplyBody::Event((*rec).clone()))),
            Err(broadcast::error::RecvError::Lagged(n)) => {
                Some(Reply::new(ReplyBody::Lagged { dropped: n }))
            }
            Err(broadcast::error::RecvError::Closed) => None,
        },
        Some(Following::Logs(follower, output)) => match follower.next(output).await {
            Next::Line(l) => Some(log_reply(&l)),
            Next::Missed(n) => Some(Reply::new(ReplyBody::Lagged { dropped: n })),
            Next::Closed => None,
        },
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(chunks: &[&[u8]]) -> Vec<Line> {
        let mut r = LineReader::new();
        let mut out = Vec::new();
        for c in chunks {
            r.feed(c);
            while let Some(l) = r.take() {
                out.push(l);
            }
        }
        r.end();
        while let Some(l) = r.take() {
            out.push(l);
        }
        out
    }

    #[test]
    fn lines_split_and_join() {
        assert_eq!(
            lines(&[b"ab", b"c\nde\n", b"f"]),
            vec![
                Line::Text(b"abc".to_vec()),
                Line::Text(b"de".to_vec()),
                Line::Text(b"f".to_vec())
            ]
        );
    }

    #[test]
    fn oversized_lines_are_skipped_and_resynced() {
        let big = vec![b'x'; MAX_REQUEST + 10];
        let mut chunks: Vec<&[u8]> = big.chunks(4096).collect();
        chunks.push(b"\n{\"request\":\"status\"}\n");
        let out = lines(&chunks);
        assert_eq!(out.len(), 2, "{out:?}");
        assert!(matches!(out[0], Line::Oversized(n) if n > MAX_REQUEST));
        assert_eq!(out[1], Line::Text(b"{\"request\":\"status\"}".to_vec()));
        // One piece with the newline inside.
        let mut one = big.clone();
        one.extend_from_slice(b"\nok\n");
        let out = lines(&[&one]);
        assert!(matches!(out[0], Line::Oversized(_)), "{out:?}");
        assert_eq!(out[1], Line::Text(b"ok".to_vec()));
        // A line exactly at the limit is taken.
        let mut at = vec![b'y'; MAX_REQUEST];
        at.push(b'\n');
        let out = lines(&[&at]);
        assert!(matches!(&out[0], Line::Text(t) if t.len() == MAX_REQUEST));
    }
}
