//! A helper's log file: its lines, each with its time and stream, rotated by size.
//!
//! Owns [`LogFile`]: each line is written as `TIME STREAM BYTES\n`, TIME in RFC 3339 UTC with
//! milliseconds (`2026-06-01T12:00:00.123Z`, when foster read the line), STREAM `out` or `err`,
//! with a `+` (`out+`) on a piece of a long line that the next piece continues, and BYTES the
//! line exactly as the helper wrote it. Lines are gathered in a buffer (at most [`BUFFER`]
//! bytes) and written whole, never split across two files, through the one rotating file of
//! [`crate::base::logfile`] ([`Trust::Owned`]: only a regular file of foster's user, in a directory
//! no other user can write to). The reading thread flushes the buffer whenever epoll has
//! nothing more ready, so a line reaches the file as soon as the helper stops writing for an
//! instant, with no timer. A write that fails is one warning per failing streak, and the count
//! of lines lost when writing works again.

use std::io;
use std::path::Path;

use tracing::warn;

use super::{Batch, Stream};
use crate::base::logfile::{RotatingFile, Rotation, Trust};

/// Bytes gathered before they are written.
pub const BUFFER: usize = 64 * 1024;

/// `2026-06-01T12:00:00.123Z`.
const STAMP_LEN: usize = 24;

/// One helper's log file.
#[derive(Debug)]
pub struct LogFile {
    file: RotatingFile,
    pending: Vec<u8>,
    /// Lines in `pending`.
    pending_lines: u64,
    /// Lines lost since writing last worked.
    lost: u64,
    stamp: Stamp,
}

impl LogFile {
    /// Opens (creating) the log of `helper` at `path` (see [`Trust::Owned`] for what is
    /// refused).
    pub fn open(helper: &str, path: &Path, rotation: Rotation) -> io::Result<LogFile> {
        let what = format!(
            "helper {}'s log",
            crate::base::sanitize::escape(helper.as_bytes())
        );
        Ok(LogFile {
            file: RotatingFile::open(path, rotation, Trust::Owned, what)?,
            pending: Vec::with_capacity(BUFFER),
            pending_lines: 0,
            lost: 0,
            stamp: Stamp::default(),
        })
    }

    /// The path it writes to.
    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// Takes the pieces of `batch`, read from `stream` at `ts_ms` (the time formatted once for
    /// all of them); they are written by a later [`LogFile::flush`] (or at once when the buffer
    /// is full, or when a line must go to another file than the lines before it).
    pub fn append(&mut self, stream: Stream, ts_ms: u64, batch: &Batch) {
        let stamp = *self.stamp.text(ts_ms);
        for (piece, continued) in batch.pieces() {
            self.push(&stamp, stream, continued, piece);
        }
    }

    fn push(&mut self, stamp: &[u8; STAMP_LEN], stream: Stream, continued: bool, bytes: &[u8]) {
        let tag: &[u8] = match (stream, continued) {
            (Stream::Stdout, false) => b" out ",
            (Stream::Stdout, true) => b" out+ ",
            (Stream::Stderr, false) => b" err ",
            (Stream::Stderr, true) => b" err+ ",
        };
        let len = STAMP_LEN + tag.len() + bytes.len() + 1;
        if !self.pending.is_empty()
            && (self.pending.len() + len > BUFFER
                || !self.file.fits((self.pending.len() + len) as u64))
        {
            self.flush();
        }
        self.pending.extend_from_slice(stamp);
        self.pending.extend_from_slice(tag);
        self.pending.extend_from_slice(bytes);
        self.pending.push(b'\n');
        self.pending_lines += 1;
    }

    /// Writes what is gathered.
    pub fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        match self.file.write(&self.pending) {
            Err(e) => {
                if self.lost == 0 {
                    warn!("{e}; the lines are lost (later failures are counted)");
                }
                self.lost += self.pending_lines;
            }
            Ok(()) if self.lost > 0 => {
                warn!(
                    "{} is written again; {} line(s) could not be",
                    self.file.path().display(),
                    self.lost
                );
                self.lost = 0;
            }
            Ok(()) => {}
        }
        self.pending.clear();
        self.pending_lines = 0;
        if self.pending.capacity() > 4 * BUFFER {
            self.pending.shrink_to(BUFFER);
        }
    }

    /// Writes what is gathered, then opens the path again (after an outside rotation).
    pub fn reopen(&mut self) -> io::Result<()> {
        self.flush();
        self.file.reopen()
    }
}

/// `YYYY-MM-DDTHH:MM:SS` of the last second formatted, reused while the second lasts.
#[derive(Debug, Default)]
struct Stamp {
    second: Option<i64>,
    text: [u8; STAMP_LEN],
}

impl Stamp {
    /// RFC 3339 UTC with milliseconds of `ts_ms` (milliseconds since the Unix epoch).
    fn text(&mut self, ts_ms: u64) -> &[u8; STAMP_LEN] {
        let second = (ts_ms / 1000) as i64;
        if self.second != Some(second) {
            // SAFETY: gmtime_r fills `tm` from `t`, both ours.
            let mut tm: libc::tm = unsafe { std::mem::zeroed() };
            // `time_t`'s width is the C library's (it is not named here: libc deprecates it on
            // musl); 64 bits on every target foster builds for.
            let t = (ts_ms / 1000).try_into().unwrap_or_default();
            // SAFETY: gmtime_r reads `t` and fills `tm`, both ours.
            unsafe { libc::gmtime_r(&t, &mut tm) };
            let text = format!(
                "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.000Z",
                tm.tm_year + 1900,
                tm.tm_mon + 1,
                tm.tm_mday,
                tm.tm_hour,
                tm.tm_min,
                tm.tm_sec
            );
            // Always 24 bytes until the year 10000 (past it, the year's first digits are cut).
            let b = text.as_bytes();
            let n = b.len().min(STAMP_LEN);
            self.text[STAMP_LEN - n..].copy_from_slice(&b[b.len() - n..]);
            self.second = Some(second);
        }
        // The milliseconds, in place: ".mmmZ" is the last five bytes.
        let ms = (ts_ms % 1000) as u32;
        self.text[STAMP_LEN - 4] = b'0' + (ms / 100) as u8;
        self.text[STAMP_LEN - 3] = b'0' + (ms / 10 % 10) as u8;
        self.text[STAMP_LEN - 2] = b'0' + (ms % 10) as u8;
        &self.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_are_rfc3339_utc_with_milliseconds() {
        let mut s = Stamp::default();
        assert_eq!(s.text(0), b"1970-01-01T00:00:00.000Z");
        assert_eq!(s.text(1_796_134_506_252), b"2026-12-01T14:15:06.252Z");
        assert_eq!(s.text(1_796_134_506_007), b"2026-12-01T14:15:06.007Z");
        assert_eq!(s.text(951_782_400_999), b"2000-02-29T00:00:00.999Z");
    }

    #[test]
    fn lines_keep_their_bytes_with_time_and_stream() {
        let d = std::env::temp_dir().join(format!("foster-outfile-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let p = d.join("h.log");
        let mut f = LogFile::open("h", &p, Rotation::default()).unwrap();
        let ts = 1_796_134_506_252;
        let mut b = Batch::default();
        b.push(b"plain", false);
        f.append(Stream::Stdout, ts, &b);
        let mut b = Batch::default();
        b.push(b"\x1b[31m\xff", true);
        b.push(b"end", false);
        f.append(Stream::Stderr, ts, &b);
        assert_eq!(std::fs::read(&p).unwrap(), b"", "nothing before a flush");
        f.flush();
        assert_eq!(
            std::fs::read(&p).unwrap(),
            b"2026-12-01T14:15:06.252Z out plain\n\
              2026-12-01T14:15:06.252Z err+ \x1b[31m\xff\n\
              2026-12-01T14:15:06.252Z err end\n"
        );
        let _ = std::fs::remove_dir_all(&d);
    }
}
