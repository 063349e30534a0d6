//! A FIFO barrier of the test's as it reads it: what a helper writes into it (`echo ready >
//! FIFO`), waited for on the kernel's word (poll) within [`LIMIT`]; past it the test fails,
//! naming the FIFO. Opened without blocking, so that a writer that never comes is a failure,
//! not a hang. Shared by every test that orders itself on a helper's FIFO.

use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::Instant;

use super::LIMIT;

/// The first line written into `fifo` (without its newline), or what was written before every
/// writer closed it.
pub fn line(fifo: &Path) -> String {
    read(fifo, true)
}

/// Everything written into `fifo` until every writer has closed it.
pub fn to_end(fifo: &Path) -> String {
    read(fifo, false)
}

/// Waits for a helper's `ready` line in `fifo`.
pub fn ready(fifo: &Path) {
    let l = line(fifo);
    assert_eq!(l.trim(), "ready", "the line in the FIFO {}", fifo.display());
}

/// A number written into `fifo` (a pid, most often), to the writer's end.
pub fn number(fifo: &Path) -> i32 {
    let text = to_end(fifo);
    text.trim()
        .parse()
        .unwrap_or_else(|e| panic!("not a number in the FIFO {}: {text:?}: {e}", fifo.display()))
}

/// `fifo` opened for reading without blocking: the open does not wait for a writer, and a
/// read of an empty FIFO is `WouldBlock`.
pub fn open_reader(fifo: &Path) -> std::fs::File {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(fifo)
        .unwrap_or_else(|e| panic!("open the FIFO {}: {e}", fifo.display()))
}

/// Reads `fifo` up to its first newline (`at_newline`) or to its end. Opened for reading
/// without blocking (a writer's open waits for it as before); poll says nothing, not even a
/// hang-up, until a writer has come.
fn read(fifo: &Path, at_newline: bool) -> String {
    let mut f = open_reader(fifo);
    let deadline = Instant::now() + LIMIT;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if !foster::process::identity::poll_readable(f.as_raw_fd(), Some(left)) {
            assert!(
                !left.is_zero(),
                "nothing more in the FIFO {} within {LIMIT:?}; read so far: {:?}",
                fifo.display(),
                String::from_utf8_lossy(&got)
            );
            continue;
        }
        match f.read(&mut buf) {
            Ok(0) => break, // every writer closed it
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => panic!("read the FIFO {}: {e}", fifo.display()),
        }
        if let Some(at) = got.iter().position(|&b| b == b'\n').filter(|_| at_newline) {
            got.truncate(at);
            break;
        }
    }
    String::from_utf8(got).unwrap_or_else(|e| panic!("the FIFO {}: {e}", fifo.display()))
}
