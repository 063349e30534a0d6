//! The HTTP/1.1 responder of `foster run --metrics ADDR`: `GET /metrics` and nothing else.
//!
//! Owns [`serve`]: a tokio accept loop on a TCP listener bound before the supervision starts
//! ([`bind`]), one task per connection, each request answered with the text the supervisor's
//! loop renders when asked ([`Ask`]), and the bounds that keep a peer from holding foster: at
//! most [`MAX_CONNECTIONS`] at once (one more closes the oldest still waiting for its request,
//! so slow or idle clients never hold off a scraper; when all are being answered, it is closed
//! at once), a request head of at most [`MAX_HEAD`] bytes, [`TIMEOUT`] for a whole exchange,
//! one request a connection (`Connection: close`). A server crate (hyper, axum) would bring a stack
//! of dependencies for this one read-only path.

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;
use tracing::debug;

/// Connections served at once; one more closes the oldest still waiting for its request (or is
/// closed without an answer when every one is being answered).
pub const MAX_CONNECTIONS: usize = 8;

/// The longest request head read (request line and headers); a longer one is answered 431.
pub const MAX_HEAD: usize = 8 * 1024;

/// The time a connection has to send its request and take the answer.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// How the responder asks the supervisor's loop for the text: a sender the loop answers on.
pub type Ask = mpsc::Sender<oneshot::Sender<String>>;

/// Binds `addr` (before any thread exists, so that a mistake is said before the first launch).
pub fn bind(addr: SocketAddr) -> io::Result<std::net::TcpListener> {
    let l = std::net::TcpListener::bind(addr)
        .map_err(|e| io::Error::new(e.kind(), format!("--metrics {addr}: cannot listen: {e}")))?;
    l.set_nonblocking(true)?;
    Ok(l)
}

/// Serves `listener` on the current tokio runtime (call inside it) until the task is aborted.
pub fn serve(listener: std::net::TcpListener, ask: Ask) -> io::Result<tokio::task::JoinHandle<()>> {
    let listener = TcpListener::from_std(listener)?;
    Ok(tokio::spawn(accept_loop(listener, ask)))
}

/// One connection being served: its task, and whether it still waits for its request head
/// (and may be closed for a newer connection).
struct Conn {
    task: Option<AbortHandle>,
    waiting: bool,
}

/// The connections being served, by their number: the oldest first.
#[derive(Default)]
struct Open {
    last: u64,
    conns: BTreeMap<u64, Conn>,
}

type Table = Arc<Mutex<Open>>;

fn lock(table: &Table) -> MutexGuard<'_, Open> {
    table.lock().unwrap_or_else(|e| e.into_inner())
}

/// A connection's place in the table, given up when its task ends or is aborted.
struct Slot {
    id: u64,
    table: Table,
}

impl Slot {
    /// Its request head has come: it is being answered, and is no longer closed for another.
    fn answering(&self) {
        if let Some(c) = lock(&self.table).conns.get_mut(&self.id) {
            c.waiting = false;
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        lock(&self.table).conns.remove(&self.id);
    }
}

/// A place for a new connection from `peer`: at the limit, the oldest connection still waiting
/// for its request is closed for it (its task aborted); none when every one is being answered.
fn admit(table: &Table, peer: SocketAddr) -> Option<Slot> {
    let mut open = lock(table);
    if open.conns.len() >= MAX_CONNECTIONS {
        let Some(oldest) = open
            .conns
            .iter()
            .find(|(_, c)| c.waiting)
            .map(|(&id, _)| id)
        else {
            debug!("metrics: {peer}: closed, {MAX_CONNECTIONS} connections being answered");
            return None;
        };
        if let Some(task) = open.conns.remove(&oldest).and_then(|c| c.task) {
            task.abort();
        }
        debug!("metrics: {peer}: the oldest connection still without a request was closed for it");
    }
    open.last += 1;
    let id = open.last;
    open.conns.insert(
        id,
        Conn {
            task: None,
            waiting: true,
        },
    );
    Some(Slot {
        id,
        table: table.clone(),
    })
}

async fn accept_loop(listener: TcpListener, ask: Ask) {
    let table = Table::default();
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                // Out of descriptors, or the peer gave up before the accept: go on after a
                // breath rather than spin.
                debug!("metrics: accept: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Some(slot) = admit(&table, peer) else {
            continue;
        };
        let id = slot.id;
        let ask = ask.clone();
        let task = tokio::spawn(async move {
            if tokio::time::timeout(TIMEOUT, exchange(stream, &ask, &slot))
                .await
                .is_err()
            {
                debug!("metrics: {peer}: no whole exchange within {TIMEOUT:?}");
            }
        });
        // Ended already, its place is gone: nothing to keep.
        if let Some(c) = lock(&table).conns.get_mut(&id) {
            c.task = Some(task.abort_handle());
        }
    }
}

/// One request, one answer.
async fn exchange(mut stream: TcpStream, ask: &Ask, slot: &Slot) {
    let answer = match read_head(&mut stream).await {
        Ok(head) => {
            slot.answering();
            answer(&head, ask).await
        }
        Err(Head::TooLong) => status(431, "the request head is longer than 8 KiB\n"),
        Err(Head::Closed) => return,
    };
    let _ = stream.write_all(&answer).await;
    let _ = stream.shutdown().await;
}

enum Head {
    TooLong,
    Closed,
}

/// The request head, up to its blank line.
async fn read_head(stream: &mut TcpStream) -> Result<Vec<u8>, Head> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    loop {
        let n = stream.read(&mut buf).await.map_err(|_| Head::Closed)?;
        if n == 0 {
            return Err(Head::Closed);
        }
        head.extend_from_slice(&buf[..n]);
        match memchr::memmem::find(&head, b"\r\n\r\n") {
            Some(end) if end <= MAX_HEAD => {
                head.truncate(end);
                return Ok(head);
            }
            Some(_) => return Err(Head::TooLong),
            None => {}
        }
        if head.len() > MAX_HEAD + 3 {
            return Err(Head::TooLong);
        }
    }
}

/// The answer to a request head.
async fn answer(head: &[u8], ask: &Ask) -> Vec<u8> {
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let mut parts = line.split(|&b| b == b' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return status(400, "not an HTTP request line\n");
    };
    if !version.starts_with(b"HTTP/1.") {
        return status(505, "HTTP/1.0 and HTTP/1.1 only\n");
    }
    let path = target.split(|&b| b == b'?').next().unwrap_or_default();
    if path != b"/metrics" {
        return status(404, "foster serves /metrics only\n");
    }
    if method != b"GET" && method != b"HEAD" {
        return status(405, "GET /metrics\n");
    }
    let (tx, rx) = oneshot::channel();
    let text = match ask.send(tx).await {
        Ok(()) => rx.await.ok(),
        Err(_) => None,
    };
    let Some(text) = text else {
        return status(503, "the supervisor is exiting\n");
    };
    let mut out = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        super::CONTENT_TYPE,
        text.len()
    )
    .into_bytes();
    if method == b"GET" {
        out.extend_from_slice(text.as_bytes());
    }
    out
}

/// A short answer other than 200.
fn status(code: u16, body: &str) -> Vec<u8> {
    let reason = match code {
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "HTTP Version Not Supported",
    };
    let allow = if code == 405 {
        "Allow: GET, HEAD\r\n"
    } else {
        ""
    };
    format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n{allow}\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}
