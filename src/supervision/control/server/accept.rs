//! The [`Server`] the supervisor holds, and the accept loop: each peer's credentials
//! checked (`SO_PEERCRED`: same uid or root), each admitted one given a slot and a task.
//! Warnings a client can cause are rate-limited ([`WARN_EVERY`]).

use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{Notify, mpsc, watch};
use tracing::{debug, warn};

use super::hub::Hub;
use super::session::client;
use super::slots::{Admission, ClientCtx, ClientSlot, Slots};
use super::socket::{Bound, SocketFile};
use super::{Command, MAX_CLIENTS, Peer, WARN_EVERY, process_text};
use crate::supervision::control::protocol::{ErrorKind, Reply};
use crate::supervision::output::Output;

impl Bound {
    /// Starts accepting on the current tokio runtime (call inside it). `output`: the helpers'
    /// kept lines, for `logs` (without it, `logs` is refused).
    pub fn serve(self, hub: Arc<Hub>, output: Option<Arc<Output>>) -> io::Result<Server> {
        let listener = UnixListener::from_std(self.listener)?;
        let (tx, rx) = mpsc::channel(MAX_CLIENTS);
        let clients = Arc::new(watch::Sender::new(0usize));
        let ctx = ClientCtx {
            hub: hub.clone(),
            output: output.clone(),
            commands: tx,
            clients: clients.clone(),
            slots: Arc::new(Mutex::new(Slots::default())),
            uid: nix::unistd::geteuid().as_raw(),
        };
        let accept = tokio::spawn(accept_loop(listener, ctx));
        Ok(Server {
            file: self.file,
            rx,
            hub,
            output,
            clients,
            accept,
        })
    }
}

/// The serving socket, held by the supervisor.
#[derive(Debug)]
pub struct Server {
    file: SocketFile,
    rx: mpsc::Receiver<Command>,
    hub: Arc<Hub>,
    output: Option<Arc<Output>>,
    clients: Arc<watch::Sender<usize>>,
    accept: tokio::task::JoinHandle<()>,
}

impl Server {
    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.file.path
    }

    /// The next request for the supervisor (pending forever once no client can send any).
    pub async fn recv(&mut self) -> Command {
        match self.rx.recv().await {
            Some(c) => c,
            None => std::future::pending().await,
        }
    }

    /// Stops accepting, ends every event and line stream (followers get what was published
    /// so far), and waits up to `grace` for clients to be written to. The socket file is
    /// removed when the server is dropped.
    pub async fn finish(self, grace: Duration) {
        self.accept.abort();
        self.hub.close();
        if let Some(o) = &self.output {
            o.close();
        }
        // Client tasks end on their own once their stream is closed and written; this wait is
        // bounded by `grace` for clients that do not read.
        let mut rx = self.clients.subscribe();
        let _ = tokio::time::timeout(grace, rx.wait_for(|n| *n == 0)).await;
    }
}

/// Warnings about clients, which any local process can cause at will: at most one each
/// [`WARN_EVERY`]; those in between are counted, and the count is logged with the next one
/// shown, or on its own once the interval is over.
#[derive(Debug, Default)]
struct Throttle {
    last: Option<Instant>,
    suppressed: u64,
}

impl Throttle {
    fn warn(&mut self, now: Instant, message: impl FnOnce() -> String) {
        if self.last.is_some_and(|l| now < l + WARN_EVERY) {
            self.suppressed += 1;
            return;
        }
        self.last = Some(now);
        match std::mem::take(&mut self.suppressed) {
            0 => warn!("{}", message()),
            n => warn!(
                "{} ({n} more suppressed since the last one shown; at most one a second is \
                 logged)",
                message()
            ),
        }
    }

    /// When the count of suppressed warnings is due, if there is one.
    fn due(&self) -> Option<Instant> {
        match (self.suppressed, self.last) {
            (0, _) | (_, None) => None,
            (_, Some(l)) => Some(l + WARN_EVERY),
        }
    }

    fn flush(&mut self, now: Instant) {
        let n = std::mem::take(&mut self.suppressed);
        if n > 0 {
            self.last = Some(now);
            warn!(
                "control socket: {n} more suppressed since the last one shown (at most one a \
                 second is logged)"
            );
        }
    }
}

/// Accepts clients: each of foster's uid (or root) that a slot admits gets a task of its own.
async fn accept_loop(listener: UnixListener, ctx: ClientCtx) {
    let mut throttle = Throttle::default();
    loop {
        let due = throttle.due();
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = sleep_until_opt(due) => {
                throttle.flush(Instant::now());
                continue;
            }
        };
        let now = Instant::now();
        let stream = match accepted {
            Ok((s, _)) => s,
            Err(e) => {
                // EMFILE and the like: wait for a client to go rather than spin.
                throttle.warn(now, || format!("control socket: accept failed: {e}"));
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Some(peer) = peer_of(&stream, &ctx, &mut throttle, now) else {
            continue;
        };
        let Some((id, evict)) = admit(&stream, peer, &ctx, &mut throttle, now) else {
            continue;
        };
        debug!("control socket: client {peer}");
        ctx.clients.send_modify(|n| *n += 1);
        let slot = ClientSlot {
            id,
            evict,
            slots: ctx.slots.clone(),
            clients: ctx.clients.clone(),
        };
        tokio::spawn(client(stream, peer, ctx.clone(), slot));
    }
}

/// The client's process and uid, when it may use this supervisor (foster's uid or root); a
/// refused one is told why.
fn peer_of(
    stream: &UnixStream,
    ctx: &ClientCtx,
    throttle: &mut Throttle,
    now: Instant,
) -> Option<Peer> {
    let cred = match stream.peer_cred() {
        Ok(c) => c,
        Err(e) => {
            throttle.warn(now, || {
                format!("control socket: cannot read the peer's credentials, closing: {e}")
            });
            return None;
        }
    };
    let peer = Peer {
        pid: cred.pid().unwrap_or(0),
        uid: cred.uid(),
    };
    if peer.uid == ctx.uid || peer.uid == 0 {
        return Some(peer);
    }
    throttle.warn(now, || {
        format!(
            "control socket: refused a client of uid {} ({}): only uid {} and root \
             may use this supervisor",
            peer.uid,
            process_text(peer.pid),
            ctx.uid
        )
    });
    let line = Reply::error(
        ErrorKind::PermissionDenied,
        format!(
            "permission denied: this supervisor runs as uid {} and answers only that \
             uid and root; you are uid {}",
            ctx.uid, peer.uid
        ),
    )
    .to_line();
    let _ = stream.try_write(&line);
    None
}

/// A client's slot (its number and its eviction notice), when one is free or idle; a refused
/// client is told why.
fn admit(
    stream: &UnixStream,
    peer: Peer,
    ctx: &ClientCtx,
    throttle: &mut Throttle,
    now: Instant,
) -> Option<(u64, Arc<Notify>)> {
    let admission = ctx
        .slots
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .admit(peer.pid, now);
    match admission {
        Admission::Full => {
            throttle.warn(now, || {
                format!(
                    "control socket: {MAX_CLIENTS} clients connected, none idle (following \
                     events or waiting for an answer); refused {peer}"
                )
            });
            let line = Reply::error(
                ErrorKind::Refused,
                format!(
                    "too many clients ({MAX_CLIENTS}) connected to this supervisor, none \
                     of them idle; try again"
                ),
            )
            .to_line();
            let _ = stream.try_write(&line);
            None
        }
        Admission::In(id, evict, evicted) => {
            if let Some((pid, idle)) = evicted {
                throttle.warn(now, || {
                    format!(
                        "control socket: {MAX_CLIENTS} clients connected: closed the one \
                         idle the longest ({}, idle {:.1}s) to make room for {peer}",
                        process_text(pid),
                        idle.as_secs_f64(),
                    )
                });
            }
            Some((id, evict))
        }
    }
}

/// Sleeps until `t`, or forever when there is none.
async fn sleep_until_opt(t: Option<Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t.into()).await,
        None => std::future::pending().await,
    }
}
