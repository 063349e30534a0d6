//! The control socket's server side, run inside `foster run`.
//!
//! - [`socket`]: the socket file's life: its directory's checks, binding 0600, removal.
//! - [`accept`]: the [`Server`] the supervisor holds, the accept loop, each peer's check.
//! - [`slots`]: what the client tasks share: the bounded slots, who may be closed for room.
//! - [`session`]: one client's task: bounded lines in, answers and streams out, in order.
//! - [`hub`]: the [`Hub`] of events: sequence numbers, the backlog, the broadcast.
//!
//! The supervisor never writes to a client: it takes [`Command`]s from [`Server::recv`] and
//! answers each through a oneshot channel. At most [`MAX_CLIENTS`], one request in flight
//! each, so what it holds for clients is bounded; `stop` and `status` always get through.

mod accept;
mod hub;
mod session;
mod slots;
mod socket;

pub use accept::Server;
pub use hub::Hub;
pub use session::{Line, LineReader};
pub use socket::{
    BindError, Bound, adopt, bind, default_dir, default_path, into_listener, make_private_dir,
    make_reachable_dir, open_private_dir, reachable_dir,
};

use std::time::Duration;

use tokio::sync::oneshot;

pub use crate::base::ownership::DirProblem;
use crate::supervision::control::protocol::{Reply, Request};

/// At most this many clients at once. When all are taken, the one idle the longest (waiting
/// for its next request, or not reading its answer) is closed to make room for a new one; only
/// when none is idle is the new one refused.
pub const MAX_CLIENTS: usize = 64;

/// At most this many clients follow the event stream or helpers' lines (they are never idle),
/// so that at least
/// `MAX_CLIENTS - MAX_FOLLOWERS` slots always hold clients that answer promptly or can be
/// closed to make room: `stop` and `status` always get through.
pub const MAX_FOLLOWERS: usize = 48;

/// A client that does not follow events or lines is closed when it goes this long without a
/// complete request (counted from its connection or its last answer), or without reading a
/// line of an answer.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(5);

/// Warnings a client can cause (refused peers, clients closed to make room, failed accepts)
/// are logged at most once each this long; the others are counted.
pub const WARN_EVERY: Duration = Duration::from_secs(1);

/// Who sent a request (or a notify datagram): shown as `pid N (uid U)`, or, for a process
/// outside foster's PID namespace, as that (see [`process_text`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    /// 0 when the peer is outside foster's PID namespace (foster contained).
    pub pid: i32,
    pub uid: u32,
}

impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (uid {})", process_text(self.pid), self.uid)
    }
}

/// A process as the kernel named it to foster (`SO_PEERCRED`, `SCM_CREDENTIALS`): `pid N`; the
/// kernel's 0 for a process outside foster's PID namespace (foster contained, the process in
/// the namespace it was started in, or another) is said in words, never as a pid 0.
pub fn process_text(pid: i32) -> String {
    match pid {
        0 => "a process outside foster's PID namespace".to_string(),
        p => format!("pid {p}"),
    }
}

/// One request for the supervisor, and where its one reply goes.
#[derive(Debug)]
pub struct Command {
    pub request: Request,
    pub peer: Peer,
    pub reply: oneshot::Sender<Reply>,
}
