//! The connection every client makes to a supervisor's control socket.
//!
//! Owns [`ClientError`], [`Connection`] (a blocking connection that sends one request a line and
//! reads one reply a line) and the one connect every client makes ([`connect_checked`]: errors
//! that say what to do when nothing listens or the path is no socket, then [`check_server`]:
//! `SO_PEERCRED`, the server must run as this user or root). Server text in errors goes through
//! [`crate::base::sanitize::escape`]. Uses the protocol and [`super::super::nspid`].

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::fs::FileTypeExt as _;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::base::sanitize::escape;
use crate::supervision::control::nspid::PidMap;
use crate::supervision::control::protocol::{Reply, ReplyBody, Request, Status, request_line};

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
    /// The caller's limit on reads ([`Connection::set_read_timeout`]).
    limit: Option<Duration>,
}

/// The longest reply line a client reads (a status of a very large tree stays well below).
pub const MAX_REPLY: usize = 64 << 20;

/// How long a supervisor has to answer a request (its first reply line): one that has not
/// answered by then is stopped or stuck. Lines a client follows after it wait as long as the
/// caller says.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(10);

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
            limit: None,
        })
    }

    /// The supervisor's pids as seen from here, learnt from this connection's peer.
    pub fn pid_map(&self) -> PidMap {
        PidMap::for_stream(&self.writer)
    }

    /// Reads give up after `limit` (none: they wait as long as it takes), failing with an
    /// error that [`ClientError::timed_out`].
    pub fn set_read_timeout(&mut self, limit: Option<Duration>) -> Result<(), ClientError> {
        self.limit = limit.map(|d| d.max(Duration::from_millis(1)));
        self.apply_limit(self.limit)
    }

    fn apply_limit(&self, limit: Option<Duration>) -> Result<(), ClientError> {
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
        let limit = MAX_REPLY as u64 + 1;
        let n = (&mut self.reader)
            .take(limit)
            .read_line(&mut line)
            .map_err(|e| {
                let message = format!("{}: cannot read the reply: {e}", self.path.display());
                ClientError::caused(message, e)
            })?;
        if n == 0 {
            return Ok(None);
        }
        if n > MAX_REPLY {
            return Err(ClientError::new(format!(
                "{}: the supervisor's reply is longer than the limit of {} MiB: not read",
                self.path.display(),
                MAX_REPLY >> 20
            )));
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
    /// A supervisor that does not answer within [`ANSWER_WITHIN`] (or the caller's limit, when
    /// shorter) is an error that says so.
    pub fn exchange(&mut self, req: &Request) -> Result<Reply, ClientError> {
        let sent = self.send(req);
        let within = self.limit.map_or(ANSWER_WITHIN, |l| l.min(ANSWER_WITHIN));
        self.apply_limit(Some(within))?;
        let read = self.read();
        self.apply_limit(self.limit)?;
        match read {
            Err(e) if e.timed_out() && self.limit.is_none_or(|l| l > within) => {
                Err(self.no_answer(within, e))
            }
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

    /// The error of a supervisor that did not answer within `within`: its pid, and what state
    /// it is in.
    fn no_answer(&self, within: Duration, e: ClientError) -> ClientError {
        use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
        let pid = getsockopt(&self.writer, PeerCredentials).map_or(0, |c| c.pid());
        let state = std::fs::read(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|l| Some(crate::process::procstat::StatFields::parse(&l).ok()?.state))
            .map(|s| match s {
                b'T' | b't' => " (it is stopped: SIGCONT resumes it)".to_string(),
                b'D' => " (it waits in the kernel)".to_string(),
                _ => String::new(),
            })
            .unwrap_or_default();
        let message = format!(
            "{}: the supervisor (pid {pid}) did not answer within {}s{state}; the request may \
             still be carried out when it does",
            self.path.display(),
            within.as_secs_f64()
        );
        ClientError {
            message,
            source: e.source,
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

pub(in crate::supervision::control) fn unexpected(body: &ReplyBody) -> ClientError {
    ClientError::new(format!(
        "unexpected reply from the supervisor: {}",
        escape(serde_json::to_string(body).unwrap_or_default().as_bytes())
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    /// A reply line past [`MAX_REPLY`] is refused once the limit is read, not gathered until
    /// its end: the server here sends no newline and keeps the connection open until the
    /// client has given up (or, were it to wait for the end of the line, for 30 s).
    #[test]
    fn a_reply_past_the_limit_is_refused() {
        let dir = std::env::temp_dir().join(format!("foster-conn-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("big.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let (done, wait) = std::sync::mpsc::channel::<()>();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let chunk = vec![b'x'; 1 << 20];
            for _ in 0..(MAX_REPLY >> 20) + 1 {
                if s.write_all(&chunk).is_err() {
                    return;
                }
            }
            let _ = wait.recv_timeout(std::time::Duration::from_secs(30));
        });
        let mut conn = Connection::connect(&path).unwrap();
        let err = conn.read().unwrap_err().to_string();
        done.send(()).unwrap();
        drop(conn);
        server.join().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(err.contains("longer than the limit of 64 MiB"), "{err}");
    }
}
