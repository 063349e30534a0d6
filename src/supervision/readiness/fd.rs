//! The s6 notification-fd protocol: the helper writes a newline to a descriptor of its own.
//!
//! Owns the pipe of one launch ([`pipe`]: its write end goes to the spawner, placed at the
//! helper's `ready = { fd = N }` number; its read end stays with foster) and the wait for the
//! newline on the read end ([`wait_newline`], a task of the supervisor's runtime: it reads only
//! when the helper wrote, and ends at the first newline or when every writer has closed the
//! pipe). Bytes before the newline are read and dropped, as s6-supervise does; after it, foster
//! closes its end, so a helper that writes again gets `EPIPE` (as under s6).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use tokio::io::unix::AsyncFd;

/// How the wait for the newline ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FdOutcome {
    /// A newline came: the helper is ready.
    Ready,
    /// Every writer closed the pipe without a newline (the helper will not notify).
    Closed,
    /// Reading failed.
    Failed(String),
}

/// A pipe for one launch: (read end, non-blocking; write end, for the helper), both
/// close-on-exec (the spawner places the write end at its number without the flag).
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 into an array of two ints; the descriptors are owned from here on.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just returned by pipe2: open and owned by nobody else.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // Only foster's end is non-blocking: the helper's stays as a program expects it.
    // SAFETY: fcntl on a descriptor we own.
    let flags = unsafe { libc::fcntl(r.as_raw_fd(), libc::F_GETFL) };
    if flags < 0
        // SAFETY: fcntl on a descriptor we own.
        || unsafe { libc::fcntl(r.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0
    {
        return Err(io::Error::last_os_error());
    }
    Ok((r, w))
}

/// Waits (on the runtime, no timer) for a newline on `read`, the read end of [`pipe`]; closes
/// it at the end.
pub async fn wait_newline(read: OwnedFd) -> FdOutcome {
    // SAFETY: the descriptor is owned by the AsyncFd itself, registered for its whole life.
    let fd = match unsafe { AsyncFd::register(read) } {
        Ok(fd) => fd,
        Err(e) => return FdOutcome::Failed(format!("cannot watch the notification pipe: {e}")),
    };
    let mut buf = [0u8; 512];
    loop {
        let mut guard = match fd.readable().await {
            Ok(g) => g,
            Err(e) => return FdOutcome::Failed(format!("notification pipe: {e}")),
        };
        let r = guard.try_io(|inner| {
            // SAFETY: reads into a stack buffer from a descriptor we own.
            let n = unsafe {
                libc::read(
                    inner.get_ref().as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                )
            };
            if n < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(n as usize)
            }
        });
        match r {
            Ok(Ok(0)) => return FdOutcome::Closed,
            Ok(Ok(n)) if buf[..n].contains(&b'\n') => return FdOutcome::Ready,
            Ok(Ok(_)) => {}
            Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
            Ok(Err(e)) => return FdOutcome::Failed(format!("notification pipe: {e}")),
            Err(_would_block) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .unwrap()
    }

    #[test]
    fn a_newline_is_readiness_and_a_close_without_one_is_not() {
        let rt = rt();
        let (r, w) = pipe().unwrap();
        let mut w = std::fs::File::from(w);
        w.write_all(b"starting up, no newline yet").unwrap();
        w.write_all(b" ... now\n").unwrap();
        assert_eq!(rt.block_on(wait_newline(r)), FdOutcome::Ready);
        // foster's end is closed: a second write meets a closed pipe.
        assert_eq!(
            w.write_all(b"\n").unwrap_err().raw_os_error(),
            Some(libc::EPIPE)
        );
        let (r, w) = pipe().unwrap();
        let mut w = std::fs::File::from(w);
        w.write_all(b"no newline").unwrap();
        drop(w);
        assert_eq!(rt.block_on(wait_newline(r)), FdOutcome::Closed);
    }
}
