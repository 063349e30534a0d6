//! Supervision events: what `foster run` reports, in one type.
//!
//! Owns [`Event`] (launch, exit, reparented, restart, give-up, signal, shutdown), its JSON form
//! (one object per line, `"event"` naming the kind, `"ts_ms"` the wall-clock time in
//! milliseconds since the Unix epoch) and [`EventLog`], the `--events-log FILE` writer. The
//! control socket and the dashboard stream this same type.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::adoption::Classification;
use crate::identity::Identity;
use crate::reaper::ExitStatus;

/// One event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// foster started supervising (its own identity, and whether it is contained).
    Start {
        supervisor: Identity,
        contained: bool,
        /// The control socket's path, when it has one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        socket: Option<String>,
    },
    /// A helper was started.
    Launch {
        helper: String,
        identity: Identity,
        attempt: u32,
    },
    /// A helper could not be started.
    LaunchFailed { helper: String, error: String },
    /// A process foster reaped ended: a helper (with its name) or an adopted process.
    Exit {
        pid: i32,
        identity: Option<Identity>,
        helper: Option<String>,
        generation: Option<u32>,
        status: ExitStatus,
    },
    /// A process got a new parent: who it was, from and to whom, and whether that was expected.
    Reparented {
        identity: Identity,
        helper: Option<String>,
        generation: Option<u32>,
        from: Option<Identity>,
        to: Identity,
        expected: Option<Identity>,
        classification: Classification,
    },
    /// A helper will be started again after `delay_ms`.
    Restart {
        helper: String,
        attempt: u32,
        delay_ms: u64,
    },
    /// A helper failed `restarts` times in a row and will not be started again.
    GiveUp { helper: String, restarts: u32 },
    /// foster sent a signal, and why.
    Signal {
        target: Identity,
        helper: Option<String>,
        signal: String,
        reason: SignalReason,
    },
    /// Orderly shutdown began (the signal that asked for it, if any).
    Shutdown { signal: Option<String> },
    /// foster is exiting with this status.
    Stopped { exit_status: i32 },
}

/// Why foster sent a signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SignalReason {
    /// The helper's stop signal, during shutdown.
    Stop,
    /// The orphan policy of the process's generation.
    OrphanPolicy,
    /// A grace period ran out.
    GraceExpired,
    /// The operator asked for it through the control socket.
    Control,
}

impl Event {
    /// Whether this event deserves a warning (unexpected adoptions, give-ups, failed launches).
    pub fn is_warning(&self) -> bool {
        match self {
            Event::Reparented { classification, .. } => !classification.is_expected(),
            Event::GiveUp { .. } | Event::LaunchFailed { .. } => true,
            _ => false,
        }
    }
}

/// An event with its time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
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
        Record { ts_ms, event }
    }
}

/// Appends records to a file as JSON lines, each line written whole with one `write` (no
/// buffering, no fsync: a reader sees each event at once, and the loop never waits on a disk).
#[derive(Debug)]
pub struct EventLog {
    path: PathBuf,
    file: File,
}

impl EventLog {
    /// Opens (creating) `path` for appending.
    pub fn open(path: &Path) -> io::Result<EventLog> {
        Ok(EventLog {
            path: path.to_path_buf(),
            file: open_append(path)?,
        })
    }

    /// The path it was opened at.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Closes the file and opens (creating) the path again: after the file was renamed away,
    /// the next records go to a new file at the path. On failure the old file is kept.
    pub fn reopen(&mut self) -> io::Result<()> {
        self.file = open_append(&self.path)?;
        Ok(())
    }

    /// Writes one record as one line.
    pub fn write(&mut self, record: &Record) -> io::Result<()> {
        let mut line = serde_json::to_vec(record).map_err(io::Error::other)?;
        line.push(b'\n');
        self.file.write_all(&line)
    }
}

fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| io::Error::new(e.kind(), format!("events log {}: {e}", path.display())))
}
