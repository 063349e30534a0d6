//! The HTTP/1.1 responder of `foster run --metrics ADDR`: `GET /metrics` and nothing else.
//!
//! Owns [`serve`]: a tokio accept loop on a TCP listener bound before the supervision starts
//! ([`bind`]), one task per connection, each request answered with the text the supervisor's
//! loop renders when asked ([`Ask`]), and the bounds that keep a peer from holding foster: at
//! most [`MAX_CONNECTIONS`] at once (more are closed at once), a request head of at most
//! [`MAX_HEAD`] bytes, [`TIMEOUT`] for a whole exchange, one request a connection
//! (`Connection: close`). A server crate (hyper, axum) would bring a stack of dependencies for
//! this one read-only path.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc, oneshot};
use tracing::debug;

/// Connections served at once; one more is closed without an answer.
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

async fn accept_loop(listener: TcpListener, ask: Ask) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
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
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            debug!("metrics: {peer}: closed, {MAX_CONNECTIONS} connections already");
            continue;
        };
        let ask = ask.clone();
        tokio::spawn(async move {
            let _slot = slot;
            if tokio::time::timeout(TIMEOUT, exchange(stream, &ask))
                .await
                .is_err()
            {
                debug!("metrics: {peer}: no whole exchange within {TIMEOUT:?}");
            }
        });
    }
}

/// One request, one answer.
async fn exchange(mut stream: TcpStream, ask: &Ask) {
    let answer = match read_head(&mut stream).await {
        Ok(head) => answer(&head, ask).await,
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
