//! The system calls foster wraps once: `poll` and `errno`.
//!
//! Owns [`poll`] and [`poll_until`] over [`PollFd`]: the one way foster waits on descriptors
//! outside the tokio runtime and the epoll loops. An interrupted call (`EINTR`) is retried
//! with the time that is left, so a stray signal neither ends a wait early nor makes it
//! longer. Both are allocation-free and async-signal-safe with a zero timeout (no clock is
//! read), so the child between fork and exec may call them.
//!
//! Also owns [`errno`], the calling thread's last error number, read the same way everywhere.

use std::io;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

/// The calling thread's `errno`: the error number of the last failed system call. Reads a
/// thread-local integer: async-signal-safe, allocation-free.
pub fn errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// One descriptor watched for input, and what `poll` found on it. The kernel always reports
/// a hang-up (`POLLHUP`) and an error (`POLLERR`) besides what was asked for. A negative
/// descriptor is skipped: its entry never becomes ready.
#[repr(transparent)]
#[derive(Clone, Copy, Debug)]
pub struct PollFd(libc::pollfd);

impl PollFd {
    /// `fd` watched for input (`POLLIN`); a negative `fd` is skipped.
    pub const fn input(fd: RawFd) -> PollFd {
        PollFd(libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
    }

    /// The descriptor watched (negative: skipped).
    pub fn fd(&self) -> RawFd {
        self.0.fd
    }

    /// Whether the last poll reported anything at all on this descriptor: input, its end or
    /// an error.
    pub fn ready(&self) -> bool {
        self.0.revents != 0
    }

    /// Whether the last poll found input waiting.
    pub fn has_input(&self) -> bool {
        self.0.revents & libc::POLLIN != 0
    }

    /// Whether the last poll found the other end gone, or an error (`POLLHUP`, `POLLERR`).
    pub fn hung_up(&self) -> bool {
        self.0.revents & (libc::POLLHUP | libc::POLLERR) != 0
    }
}

/// Waits until one of `fds` is ready or `timeout` passes (`None`: no limit,
/// `Some(Duration::ZERO)`: a look without waiting). Returns how many are ready (0: the time
/// passed). `EINTR` is retried with the time left.
pub fn poll(fds: &mut [PollFd], timeout: Option<Duration>) -> io::Result<usize> {
    match timeout {
        Some(t) if t.is_zero() => look(fds),
        // A timeout too long for the clock is no limit.
        Some(t) => poll_until(fds, Instant::now().checked_add(t)),
        None => poll_until(fds, None),
    }
}

/// Waits until one of `fds` is ready or `deadline` is reached (`None`: no limit). Returns how
/// many are ready; 0 only once `Instant::now() >= deadline` (the wait is rounded up to the
/// next millisecond, never down). `EINTR` is retried with the time left.
pub fn poll_until(fds: &mut [PollFd], deadline: Option<Instant>) -> io::Result<usize> {
    loop {
        let ms = match deadline {
            None => -1,
            Some(d) => {
                // Rounded up: a wait that returns 0 has reached the deadline.
                let left = d.saturating_duration_since(Instant::now());
                i32::try_from(left.as_nanos().div_ceil(1_000_000)).unwrap_or(i32::MAX)
            }
        };
        match poll_once(fds, ms) {
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
            r => return r,
        }
    }
}

/// One look without waiting, `EINTR` retried; reads no clock.
fn look(fds: &mut [PollFd]) -> io::Result<usize> {
    loop {
        match poll_once(fds, 0) {
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
            r => return r,
        }
    }
}

/// One `poll(2)` call: the number ready, or the error.
fn poll_once(fds: &mut [PollFd], ms: i32) -> io::Result<usize> {
    for p in fds.iter_mut() {
        p.0.revents = 0;
    }
    // SAFETY: `PollFd` is `repr(transparent)` over `libc::pollfd`, so the slice is an array of
    // `fds.len()` valid pollfds that lives across the call; poll writes only their `revents`.
    let n = unsafe { libc::poll(fds.as_mut_ptr().cast(), fds.len() as libc::nfds_t, ms) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn input_and_end_are_seen_and_a_skipped_fd_never_is() {
        let (r, w) = nix::unistd::pipe().unwrap();
        let mut fds = [PollFd::input(r.as_raw_fd()), PollFd::input(-1)];
        assert_eq!(poll(&mut fds, Some(Duration::ZERO)).unwrap(), 0);
        assert!(!fds[0].ready());
        nix::unistd::write(&w, b"x").unwrap();
        assert_eq!(poll(&mut fds, None).unwrap(), 1);
        assert!(fds[0].has_input() && !fds[0].hung_up() && !fds[1].ready());
        drop(w);
        assert_eq!(poll(&mut fds, Some(Duration::ZERO)).unwrap(), 1);
        assert!(fds[0].hung_up());
    }

    #[test]
    fn a_wait_that_times_out_has_reached_its_deadline() {
        let (r, _w) = nix::unistd::pipe().unwrap();
        let mut fds = [PollFd::input(r.as_raw_fd())];
        let deadline = Instant::now() + Duration::from_micros(1500);
        assert_eq!(poll_until(&mut fds, Some(deadline)).unwrap(), 0);
        assert!(Instant::now() >= deadline);
    }

    #[test]
    fn a_bad_descriptor_is_reported_not_waited_on() {
        let mut fds = [PollFd::input(i32::MAX)];
        // poll reports an fd that is not open as POLLNVAL on its entry.
        assert_eq!(poll(&mut fds, Some(Duration::from_secs(30))).unwrap(), 1);
        assert!(fds[0].ready() && !fds[0].has_input());
    }
}
