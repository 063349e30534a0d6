//! Pipe barriers and bounded waits for the qualification harness.
//!
//! Owns the plumbing between a case root and the processes of its tree: close-on-exec pipes,
//! the reader of the gate's [`TraceRecord`]s, line reading from a launcher, and waits on
//! descriptors with a deadline (poll; the deadline is a safety net, never the synchronisation).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use crate::gate::{Step, TraceRecord};

/// A close-on-exec pipe: (read end, write end).
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 into a stack array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fresh descriptors we own.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// True when `fd` became readable (or hung up) within `timeout` (`None`: no bound).
pub fn readable(fd: RawFd, timeout: Option<Duration>) -> bool {
    crate::process::identity::poll_readable(fd, timeout)
}

/// Reads exactly `buf.len()` bytes unless end of file or the deadline comes first.
pub fn read_full(fd: RawFd, buf: &mut [u8], deadline: Instant) -> usize {
    let mut got = 0;
    while got < buf.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if !readable(fd, Some(left)) {
            break;
        }
        // SAFETY: reads into the rest of `buf`.
        let n = unsafe { libc::read(fd, buf[got..].as_mut_ptr().cast(), buf.len() - got) };
        if n < 0 && crate::base::sys::errno() == libc::EINTR {
            continue;
        }
        if n <= 0 {
            break;
        }
        got += n as usize;
    }
    got
}

/// Writes all of `b` (errors such as EPIPE ignored: the reader may be gone, which is the point).
pub fn write_all(fd: RawFd, b: &[u8]) {
    let mut at = 0;
    while at < b.len() {
        // SAFETY: writes from a slice.
        let n = unsafe { libc::write(fd, b[at..].as_ptr().cast(), b.len() - at) };
        if n < 0 && crate::base::sys::errno() == libc::EINTR {
            continue;
        }
        if n <= 0 {
            return;
        }
        at += n as usize;
    }
}

/// Collects the gate's trace records from a pipe.
pub struct TraceReader {
    fd: OwnedFd,
    /// Every record read so far, in order.
    pub records: Vec<TraceRecord>,
}

impl TraceReader {
    pub fn new(fd: OwnedFd) -> TraceReader {
        TraceReader {
            fd,
            records: Vec::new(),
        }
    }

    /// Reads records until one matches `want` or the deadline passes.
    pub fn wait_for(
        &mut self,
        deadline: Instant,
        want: impl Fn(&TraceRecord) -> bool,
    ) -> Option<TraceRecord> {
        if let Some(r) = self.records.iter().find(|r| want(r)) {
            return Some(*r);
        }
        loop {
            let mut b = [0u8; TraceRecord::SIZE];
            if read_full(self.fd.as_raw_fd(), &mut b, deadline) < b.len() {
                return None;
            }
            let r = TraceRecord::decode(&b);
            self.records.push(r);
            if want(&r) {
                return Some(r);
            }
        }
    }

    /// Waits for the gate step `step` of process `pid` (any process when `pid` is 0).
    pub fn wait_step(&mut self, pid: i32, step: Step, deadline: Instant) -> Option<TraceRecord> {
        self.wait_for(deadline, |r| {
            r.step() == Some(step) && (pid == 0 || r.pid == pid)
        })
    }

    /// Reads whatever is already there without blocking.
    pub fn drain(&mut self) {
        let _ = self.wait_for(Instant::now(), |_| false);
    }

    /// The last record of `step` for `pid`, if read.
    pub fn last(&self, pid: i32, step: Step) -> Option<TraceRecord> {
        self.records
            .iter()
            .rev()
            .find(|r| r.pid == pid && r.step() == Some(step))
            .copied()
    }
}

/// Reads text lines from a pipe.
pub struct LineReader {
    fd: OwnedFd,
    buf: Vec<u8>,
}

impl LineReader {
    pub fn new(fd: OwnedFd) -> LineReader {
        LineReader {
            fd,
            buf: Vec::new(),
        }
    }

    /// The next line (without its newline), or `None` at end of file or the deadline.
    pub fn next_line(&mut self, deadline: Instant) -> Option<String> {
        loop {
            if let Some(i) = self.buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=i).collect();
                return Some(String::from_utf8_lossy(&line[..i]).into_owned());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if !readable(self.fd.as_raw_fd(), Some(left)) {
                return None;
            }
            let mut b = [0u8; 512];
            // SAFETY: reads into a stack buffer.
            let n = unsafe { libc::read(self.fd.as_raw_fd(), b.as_mut_ptr().cast(), b.len()) };
            if n < 0 && crate::base::sys::errno() == libc::EINTR {
                continue;
            }
            if n <= 0 {
                return None;
            }
            self.buf.extend_from_slice(&b[..n as usize]);
        }
    }

    /// The next line starting with `prefix`, skipping others; the rest of it.
    pub fn expect(&mut self, prefix: &str, deadline: Instant) -> Option<String> {
        while let Some(l) = self.next_line(deadline) {
            if let Some(rest) = l.strip_prefix(prefix) {
                return Some(rest.trim().to_string());
            }
        }
        None
    }
}
