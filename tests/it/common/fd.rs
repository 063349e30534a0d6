//! Descriptors put on fixed numbers in a child between fork and exec, async-signal-safe: a
//! source already on its number keeps it with close-on-exec cleared (`dup2(fd, fd)` would do
//! nothing, and dropping the source would close the very number), and a source that is another
//! pair's number is moved out of the way first (as the spawner does for standard descriptors).

use std::os::fd::RawFd;

/// Puts each `(source, number)` on its number, no longer close-on-exec; the sources stay open
/// (close-on-exec ones close at the exec). At most 8 pairs. Async-signal-safe: no allocation.
pub fn place(pairs: &[(RawFd, RawFd)]) -> std::io::Result<()> {
    let mut src = [-1 as RawFd; 8];
    assert!(pairs.len() <= src.len());
    let top = pairs.iter().map(|&(_, n)| n).max().unwrap_or(0);
    for (i, &(s, n)) in pairs.iter().enumerate() {
        src[i] = s;
        if s != n && pairs.iter().any(|&(_, other)| other == s) {
            // SAFETY: fcntl on a descriptor of this process.
            src[i] = unsafe { libc::fcntl(s, libc::F_DUPFD_CLOEXEC, top + 1) };
            if src[i] < 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
    }
    for (i, &(_, n)) in pairs.iter().enumerate() {
        // SAFETY: fcntl and dup2 on descriptors of this process.
        let ok = unsafe {
            if src[i] == n {
                libc::fcntl(n, libc::F_SETFD, 0) == 0
            } else {
                libc::dup2(src[i], n) == n
            }
        };
        if !ok {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// A pidfd of `pid` on `number`, not close-on-exec, async-signal-safe: the pidfd may itself be
/// opened on `number` (the lowest free descriptor), in which case it stays there.
pub fn pidfd_at(pid: libc::pid_t, number: RawFd) -> std::io::Result<()> {
    // identity's one opener: a raw system call, no allocation. The descriptor is left open
    // (close-on-exec, as every pidfd): on `number` already, dropping it would close it.
    let fd = std::os::fd::IntoRawFd::into_raw_fd(foster::process::identity::pidfd_open(pid)?);
    place(&[(fd, number)])
}
