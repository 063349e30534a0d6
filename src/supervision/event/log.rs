//! [`Record`], an event with its time (the JSON form of events), and [`EventLog`], the
//! `--events-log FILE` writer: JSON lines, rotated by size and reopened through
//! [`crate::base::logfile`].

use std::io;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::Event;
use crate::base::logfile::{RotatingFile, Trust};

/// An event with its time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The JSON schema version ([`crate::base::json::VERSION`]), on every line of the events log.
    #[serde(default = "json_version")]
    pub version: u32,
    pub ts_ms: u64,
    #[serde(flatten)]
    pub event: Event,
}

impl Record {
    /// Stamps `event` with the current time.
    pub fn now(event: Event) -> Record {
        let ts_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        Record {
            version: crate::base::json::VERSION,
            ts_ms,
            event,
        }
    }
}

fn json_version() -> u32 {
    crate::base::json::VERSION
}

/// When the events log is rotated (`--events-log-max-size`, `--events-log-keep`): the one
/// rotation of foster's logs.
pub use crate::base::logfile::Rotation;

/// Appends records to a file as JSON lines, each line written whole with one `write` (no
/// buffering, no fsync: a reader sees each event at once, and the loop never waits on a disk),
/// through a [`RotatingFile`] judged as a helper's log is ([`Trust::Stream`]: never through a
/// symbolic link, a file of foster's user in a directory no other user can write to; a FIFO or
/// a terminal too), rotated by size when it is a regular file.
#[derive(Debug)]
pub struct EventLog {
    file: RotatingFile,
}

impl EventLog {
    /// Opens (creating) `path` for appending; what another user could have put at the path is
    /// refused with an error that names it (its type, owner and mode).
    pub fn open(path: &Path, rotation: Rotation) -> io::Result<EventLog> {
        Ok(EventLog {
            file: RotatingFile::open(path, rotation, Trust::Stream, "events log")?,
        })
    }

    /// The path it was opened at.
    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// Closes the file and opens (creating) the path again (see [`RotatingFile::reopen`]).
    pub fn reopen(&mut self) -> io::Result<()> {
        self.file.reopen()
    }

    /// Writes one record as one line, rotating first when it is time to. A rotation that fails
    /// is a warning and the line goes to the current file; an error is a line not written.
    /// Every control or format character of the record's text (a helper's `STATUS=`: C1's
    /// U+009B, a bidirectional override) is a `\uXXXX` escape ([`crate::base::sanitize::to_json`]),
    /// as in every JSON foster writes: the file is safe to print.
    pub fn write(&mut self, record: &Record) -> io::Result<()> {
        let mut line = crate::base::sanitize::to_json(record)
            .map_err(io::Error::other)?
            .into_bytes();
        line.push(b'\n');
        self.file.write(&line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("foster-event-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn record(helper: &str) -> Record {
        Record {
            version: crate::base::json::VERSION,
            ts_ms: 1,
            event: Event::LaunchFailed {
                helper: helper.to_string(),
                identity: None,
                error: String::new(),
                status: None,
            },
        }
    }

    fn len(p: &Path) -> u64 {
        std::fs::metadata(p).map_or(0, |m| m.len())
    }

    #[test]
    fn the_events_log_is_json_lines_rotated_by_the_shared_rotation() {
        let d = dir("log");
        let p = d.join("e.jsonl");
        let rotation = Rotation {
            max_size: 150,
            keep: 1,
        };
        let mut log = EventLog::open(&p, rotation).unwrap();
        log.write(&record("a")).unwrap();
        let one = len(&p);
        log.write(&record("b")).unwrap();
        assert_eq!(len(&p), 2 * one, "two lines fit");
        log.write(&record("c")).unwrap();
        assert_eq!(len(&p), one, "the third starts a new file");
        let old = std::fs::read_to_string(d.join("e.jsonl.1")).unwrap();
        for (l, h) in old.lines().zip(["a", "b"]) {
            let back: Record = serde_json::from_str(l).unwrap();
            assert_eq!(back, record(h));
        }
        let _ = std::fs::remove_dir_all(&d);
    }
}
