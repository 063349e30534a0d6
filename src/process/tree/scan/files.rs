//! The scanner's reading of one `/proc` file: paths built without allocating, a read into a
//! reused buffer through the `/proc` descriptor, its owner, and the small parsers of what it
//! read (`stat` by [`procstat`], `schedstat`, `cmdline`, a pid's name).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::base::sys::errno;
use crate::process::procstat;

/// How reading one file went.
pub(super) enum ReadError {
    /// The process is gone.
    Gone,
    /// Not allowed.
    Denied,
    /// Anything else (errno).
    Other,
}

pub(super) fn classify(errno: i32) -> ReadError {
    match errno {
        libc::ENOENT | libc::ESRCH => ReadError::Gone,
        libc::EACCES | libc::EPERM => ReadError::Denied,
        _ => ReadError::Other,
    }
}

/// Writes `<pid>/<file>\0` into `out` without allocating; returns the used length.
pub(super) fn pid_path(out: &mut [u8; 40], pid: i32, file: &[u8]) -> usize {
    let mut digits = [0u8; 12];
    let mut n = pid.unsigned_abs();
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let d = &digits[i..];
    out[..d.len()].copy_from_slice(d);
    let mut len = d.len();
    out[len] = b'/';
    len += 1;
    out[len..len + file.len()].copy_from_slice(file);
    len += file.len();
    out[len] = 0;
    len + 1
}

/// Reads the file at `path` (NUL-terminated, relative to `dir`) into `buf`. With `want_uid`,
/// also returns the owner of the open file. A short read is the end of the file: `stat` and
/// `cmdline` hand out all they have in one read when the buffer is large enough.
pub(super) fn read_at(
    dir: i32,
    path: &[u8],
    buf: &mut Vec<u8>,
    want_uid: bool,
) -> Result<u32, ReadError> {
    let fd = open_read(dir, path, buf)?;
    if want_uid { owner(&fd) } else { Ok(0) }
}

/// The owner of an open file (`fstat`): of `stat`, the process's uid. The kernel gives every
/// inode under `/proc/<pid>` the same owner as the directory, and `status` would triple the
/// cost.
pub(super) fn owner(fd: &OwnedFd) -> Result<u32, ReadError> {
    // SAFETY: a zeroed `stat` is a valid output buffer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid descriptor and buffer.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(classify(errno()));
    }
    Ok(st.st_uid)
}

/// Opens the file at `path` (NUL-terminated, relative to `dir`) and reads it into `buf`;
/// returns the descriptor, still open (for [`owner`]).
pub(super) fn open_read(dir: i32, path: &[u8], buf: &mut Vec<u8>) -> Result<OwnedFd, ReadError> {
    buf.clear();
    // SAFETY: `path` is NUL-terminated; the descriptor is owned below and closed on drop.
    let fd = unsafe {
        libc::openat(
            dir,
            path.as_ptr().cast(),
            libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOCTTY,
        )
    };
    if fd < 0 {
        return Err(classify(errno()));
    }
    // SAFETY: `fd` was just opened and is owned here alone.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    loop {
        if buf.capacity() - buf.len() < 1024 {
            buf.reserve(buf.capacity().max(4096));
        }
        let spare = buf.capacity() - buf.len();
        // SAFETY: reads at most `spare` bytes into the reserved tail of `buf`.
        let n = unsafe {
            libc::read(
                fd.as_raw_fd(),
                buf.as_mut_ptr().add(buf.len()).cast(),
                spare,
            )
        };
        if n < 0 {
            let e = errno();
            if e == libc::EINTR {
                continue;
            }
            return Err(classify(e));
        }
        let n = n as usize;
        // SAFETY: the kernel initialised `n` more bytes.
        unsafe { buf.set_len(buf.len() + n) };
        if n < spare {
            return Ok(fd);
        }
    }
}

/// One `stat` line's fields, by [`procstat::StatFields`] (allocation-free; the name's exact
/// bytes borrowed from the line). `None` when the line does not parse: [`procstat::split`]
/// checks the line's shape around the name first (a line from a hand-made proc root could be
/// anything).
pub(crate) fn parse_stat(line: &[u8]) -> Option<procstat::StatFields<'_>> {
    procstat::StatFields::parse(line).ok()
}

/// The three numbers of a `/proc/<pid>/schedstat` line: time on a CPU (nanoseconds), time
/// waiting for one, and how many times the process was put on one. The first moves only when
/// the kernel accounts a run (at a tick or a switch); the last moves as soon as the process is
/// switched in: together they say whether it has been on a CPU.
pub(super) fn parse_schedstat(line: &[u8]) -> Option<[u64; 3]> {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let mut out = [0u64; 3];
    let mut fields = line.split(|&b| b == b' ');
    for slot in &mut out {
        let field = fields.next()?;
        if field.is_empty() || field.len() > 20 || !field.iter().all(u8::is_ascii_digit) {
            return None;
        }
        *slot = std::str::from_utf8(field).ok()?.parse().ok()?;
    }
    fields.next().is_none().then_some(out)
}

/// Splits a `cmdline` buffer at NUL into arguments (the final NUL ends the last one).
pub(super) fn split_cmdline(buf: &[u8]) -> Vec<Vec<u8>> {
    if buf.is_empty() {
        return Vec::new();
    }
    let body = buf.strip_suffix(b"\0").unwrap_or(buf);
    body.split(|&b| b == 0).map(<[u8]>::to_vec).collect()
}

/// A `/proc` entry name that is a pid: decimal digits only, positive.
pub(super) fn parse_pid(name: &[u8]) -> Option<i32> {
    if name.is_empty() || name.len() > 10 || !name.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(name)
        .ok()?
        .parse()
        .ok()
        .filter(|&p: &i32| p > 0)
}
