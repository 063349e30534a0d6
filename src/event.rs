//! Supervision events: what `foster run` reports, in one type.
//!
//! Owns [`Event`] (launch, exit, reparented, restart, give-up, signal, output dropped,
//! shutdown), its JSON form
//! (one object per line, `"event"` naming the kind, `"ts_ms"` the wall-clock time in
//! milliseconds since the Unix epoch), its one rendering for people (`Display`: `foster ctl
//! events`, the dashboard's events pane, `foster demo`) and [`EventLog`], the `--events-log
//! FILE` writer (its rotation by size, its reopening on SIGUSR1). The control socket and the
//! dashboard stream this same type.

use std::fmt;
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
    /// A helper could not be started: why, and the exit status that counts as its end when
    /// no process of it was created (a program not found: 127; the restart rules take it as
    /// any exit). Without `status`, the process that was created (stopped by the gate or a
    /// failed exec) ends with its own status, an `exit` event that follows; or the failure was
    /// foster's own and the helper is not started again.
    LaunchFailed {
        helper: String,
        error: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<ExitStatus>,
    },
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
    /// `lines` lines of a helper's output were not relayed to foster's standard output, which
    /// did not take them fast enough, since the last such event (they are still kept and
    /// logged; see `docs/output.md`).
    OutputDropped { helper: String, lines: u64 },
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
            Event::GiveUp { .. } | Event::LaunchFailed { .. } | Event::OutputDropped { .. } => true,
            _ => false,
        }
    }
}

/// One event for people, on one line, without its time: the one rendering of an event, shared
/// by `foster ctl events`, the dashboard's events pane and `foster demo`.
///
/// Every string an event carries (helper names from a configuration, error texts, signal names:
/// text a peer sent) goes through [`crate::sanitize::escape`], so that `{}` is safe on a
/// terminal. The alternate form `{:#}` leaves those strings as they are, for a caller that
/// escapes the whole line itself when it draws it (the dashboard's events pane), so that they
/// are not escaped twice. A pid of 0 (a process the reader's PID namespace could not see) is
/// shown as `?`.
impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let raw = f.alternate();
        let text = |s: &str| -> String {
            if raw {
                s.to_string()
            } else {
                crate::sanitize::escape(s.as_bytes())
            }
        };
        // "NAME " before a pid, when the process belongs to a helper.
        let of = |h: &Option<String>| h.as_deref().map(|h| text(h) + " ").unwrap_or_default();
        match self {
            Event::Start {
                supervisor,
                contained,
                ..
            } => {
                write!(f, "supervisor {} started", Pid(supervisor.pid))?;
                if *contained {
                    f.write_str(" (contained: own PID namespace)")?;
                }
                Ok(())
            }
            Event::Launch {
                helper,
                identity,
                attempt,
            } => {
                write!(f, "launched {} as {}", text(helper), Pid(identity.pid))?;
                if *attempt > 1 {
                    write!(f, " (attempt {attempt})")?;
                }
                Ok(())
            }
            Event::LaunchFailed {
                helper,
                error,
                status,
            } => {
                write!(f, "{} failed to launch: {}", text(helper), text(error))?;
                match status {
                    Some(s) => write!(f, " (counts as {s})"),
                    None => Ok(()),
                }
            }
            Event::Exit {
                pid,
                helper,
                generation,
                status,
                ..
            } => match generation {
                Some(g) if *g != 1 => write!(
                    f,
                    "{}{} (generation {g}) ended: {status}",
                    of(helper),
                    Pid(*pid)
                ),
                _ => write!(f, "{}{} ended: {status}", of(helper), Pid(*pid)),
            },
            Event::Reparented {
                identity,
                helper,
                generation,
                from,
                to,
                expected,
                classification,
            } => {
                write!(f, "{}{}", of(helper), Pid(identity.pid))?;
                if let Some(g) = generation {
                    write!(f, " (generation {g})")?;
                }
                write!(f, " orphaned: adopted by {}", Pid(to.pid))?;
                // Its former parent, unless it ended before the reader's namespace saw it.
                if let Some(from) = from.filter(|from| from.pid != 0) {
                    write!(f, " (was under {})", Pid(from.pid))?;
                }
                if classification.is_expected() {
                    return f.write_str(" as expected");
                }
                write!(f, " UNEXPECTED ({}", classification.text())?;
                if let Some(x) = expected {
                    write!(f, ", expected {}", Pid(x.pid))?;
                }
                f.write_str(")")
            }
            Event::Restart {
                helper,
                attempt,
                delay_ms,
            } => write!(
                f,
                "restarting {} in {} (restart {attempt} in a row)",
                text(helper),
                Millis(*delay_ms)
            ),
            Event::GiveUp { helper, restarts } => write!(
                f,
                "gave up on {} after {restarts} restarts in a row",
                text(helper)
            ),
            Event::Signal {
                target,
                helper,
                signal,
                reason,
            } => write!(
                f,
                "sent {} to {}{} ({})",
                text(signal),
                of(helper),
                Pid(target.pid),
                match reason {
                    SignalReason::Stop => "stopping it",
                    SignalReason::OrphanPolicy => "orphan policy",
                    SignalReason::GraceExpired => "grace expired",
                    SignalReason::Control => "asked through the control socket",
                }
            ),
            Event::OutputDropped { helper, lines } => write!(
                f,
                "{lines} line{} of {}'s output not shown: foster's standard output is too slow \
                 (they are kept and logged)",
                if *lines == 1 { "" } else { "s" },
                text(helper)
            ),
            Event::Shutdown { signal } => match signal {
                Some(s) => write!(f, "shutting down ({})", text(s)),
                None => f.write_str("shutting down (nothing left to supervise)"),
            },
            Event::Stopped { exit_status } => {
                write!(f, "supervisor stopped, exit status {exit_status}")
            }
        }
    }
}

/// A pid for people: `?` for 0.
struct Pid(i32);
impl fmt::Display for Pid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            0 => f.write_str("?"),
            p => write!(f, "{p}"),
        }
    }
}

/// A delay in milliseconds for people: `250ms`, `30s`, `1.5s`.
struct Millis(u64);
impl fmt::Display for Millis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0;
        if ms < 1000 {
            write!(f, "{ms}ms")
        } else if ms % 1000 == 0 {
            write!(f, "{}s", ms / 1000)
        } else {
            write!(f, "{:.1}s", ms as f64 / 1000.0)
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

/// When the events log is rotated (`--events-log-max-size`, `--events-log-keep`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rotation {
    /// Rotate before a write would take the file past this many bytes; 0: never.
    pub max_size: u64,
    /// Rotated files kept: `FILE.1` (the newest) to `FILE.<keep>`; 0: the file starts anew.
    pub keep: u32,
}

impl Rotation {
    /// 10 MiB.
    pub const DEFAULT_MAX_SIZE: u64 = 10 << 20;
    /// Five rotated files.
    pub const DEFAULT_KEEP: u32 = 5;
    /// The most rotated files foster keeps (each rotation renames every one of them).
    pub const MAX_KEEP: u32 = 1000;
}

impl Default for Rotation {
    fn default() -> Rotation {
        Rotation {
            max_size: Rotation::DEFAULT_MAX_SIZE,
            keep: Rotation::DEFAULT_KEEP,
        }
    }
}

/// Appends records to a file as JSON lines, each line written whole with one `write` (no
/// buffering, no fsync: a reader sees each event at once, and the loop never waits on a disk).
///
/// When the path names a regular file (not a FIFO, a device or a symbolic link), a write that
/// would take it past [`Rotation::max_size`] first rotates it as logrotate does: `FILE.N-1` →
/// `FILE.N` …, `FILE` → `FILE.1`, the oldest beyond [`Rotation::keep`] overwritten, then a new
/// `FILE` (same permission bits and owner, created with `O_EXCL | O_NOFOLLOW`: nothing planted at
/// the path in between is followed). Each file holds whole lines and at most `max_size` bytes,
/// unless a single line is longer. A rotation that fails leaves the writer on its current file
/// (reported once) until [`EventLog::reopen`].
#[derive(Debug)]
pub struct EventLog {
    path: PathBuf,
    /// `None` only after a rotation could not create the new file: each write tries again.
    file: Option<File>,
    rotation: Rotation,
    /// Whether this file is rotated (a regular file, named directly, no rotation failed yet).
    rotatable: bool,
    /// The file's size as this writer knows it (checked with `fstat` before a rotation).
    size: u64,
}

impl EventLog {
    /// Opens (creating) `path` for appending.
    pub fn open(path: &Path, rotation: Rotation) -> io::Result<EventLog> {
        let mut log = EventLog {
            path: path.to_path_buf(),
            file: None,
            rotation,
            rotatable: false,
            size: 0,
        };
        log.reopen()?;
        Ok(log)
    }

    /// The path it was opened at.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Closes the file and opens (creating) the path again: after the file was renamed away
    /// (an outside rotation), the next records go to a new file at the path. A rotation that
    /// failed is tried again from here on. On failure the old file is kept.
    pub fn reopen(&mut self) -> io::Result<()> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .map_err(|e| self.error("", e))?;
        let meta = file.metadata().map_err(|e| self.error("", e))?;
        let named_directly =
            std::fs::symlink_metadata(&self.path).is_ok_and(|m| !m.file_type().is_symlink());
        self.rotatable = meta.is_file() && named_directly;
        self.size = meta.len();
        self.file = Some(file);
        Ok(())
    }

    /// Writes one record as one line, rotating first when it is time to. A rotation that fails
    /// is a warning and the line goes to the current file; an error is a line not written.
    pub fn write(&mut self, record: &Record) -> io::Result<()> {
        let mut line = serde_json::to_vec(record).map_err(io::Error::other)?;
        line.push(b'\n');
        let len = line.len() as u64;
        if self.due(len) {
            if let Err(e) = self.rotate() {
                tracing::warn!("{e}; writing on to the current file (SIGUSR1 tries again)");
            }
        }
        let file = match &mut self.file {
            Some(f) => f,
            None => self.file.insert(self.create(None)?),
        };
        file.write_all(&line).map_err(|e| {
            io::Error::new(e.kind(), format!("events log {}: {e}", self.path.display()))
        })?;
        self.size += len;
        Ok(())
    }

    /// Whether a line of `len` bytes must go to a new file.
    fn due(&mut self, len: u64) -> bool {
        let max = self.rotation.max_size;
        if !self.rotatable || max == 0 || self.size == 0 || self.size + len <= max {
            return false;
        }
        // Believe the file, not the count, in case something truncated it.
        if let Some(m) = self.file.as_ref().and_then(|f| f.metadata().ok()) {
            self.size = m.len();
        }
        self.size > 0 && self.size + len > max
    }

    fn rotate(&mut self) -> io::Result<()> {
        let meta = self.file.as_ref().and_then(|f| f.metadata().ok());
        let keep = self.rotation.keep;
        let moved = if keep == 0 {
            std::fs::remove_file(&self.path)
        } else {
            for n in (1..keep).rev() {
                match std::fs::rename(self.numbered(n), self.numbered(n + 1)) {
                    Err(e) if e.kind() != io::ErrorKind::NotFound => {
                        self.rotatable = false;
                        return Err(self.error("rotating", e));
                    }
                    _ => {}
                }
            }
            std::fs::rename(&self.path, self.numbered(1))
        };
        if let Err(e) = moved {
            // Stay on this file: a retry on every write would shift the older files again.
            self.rotatable = false;
            return Err(self.error("rotating", e));
        }
        self.file = None;
        self.size = 0;
        self.file = Some(self.create(meta.as_ref())?);
        Ok(())
    }

    /// The new file at the path, like the one it replaces (`like`): never through a symbolic
    /// link, and given its permission bits and owner only when this call created it.
    fn create(&self, like: Option<&std::fs::Metadata>) -> io::Result<File> {
        use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
        let created = OpenOptions::new()
            .create_new(true)
            .append(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&self.path);
        match created {
            Ok(f) => {
                if let Some(m) = like {
                    // Best effort: the file is usable whatever these say.
                    let _ = std::os::unix::fs::fchown(&f, Some(m.uid()), Some(m.gid()));
                    let _ = f.set_permissions(std::fs::Permissions::from_mode(m.mode() & 0o7777));
                }
                Ok(f)
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => OpenOptions::new()
                .append(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&self.path)
                .map_err(|e| self.error("", e)),
            Err(e) => Err(self.error("", e)),
        }
    }

    fn numbered(&self, n: u32) -> PathBuf {
        let mut p = self.path.clone().into_os_string();
        p.push(format!(".{n}"));
        PathBuf::from(p)
    }

    fn error(&self, doing: &str, e: io::Error) -> io::Error {
        let doing = if doing.is_empty() {
            String::new()
        } else {
            format!("{doing}: ")
        };
        io::Error::new(
            e.kind(),
            format!("events log {}: {doing}{e}", self.path.display()),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("foster-event-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn record(helper: &str) -> Record {
        Record {
            ts_ms: 1,
            event: Event::LaunchFailed {
                helper: helper.to_string(),
                error: String::new(),
                status: None,
            },
        }
    }

    fn len(p: &Path) -> u64 {
        std::fs::metadata(p).map_or(0, |m| m.len())
    }

    fn id(pid: i32) -> Identity {
        Identity { pid, start_time: 1 }
    }

    #[test]
    fn events_read_as_one_line_each_with_peer_text_escaped() {
        let reparented = Event::Reparented {
            identity: id(10),
            helper: Some("orphaner".into()),
            generation: Some(2),
            from: Some(id(9)),
            to: id(1),
            expected: Some(id(5)),
            classification: Classification::Escaped,
        };
        assert_eq!(
            reparented.to_string(),
            "orphaner 10 (generation 2) orphaned: adopted by 1 (was under 9) UNEXPECTED (escaped, \
             expected 5)"
        );
        let cases = [
            (
                Event::Launch {
                    helper: "web".into(),
                    identity: id(101),
                    attempt: 1,
                },
                "launched web as 101",
            ),
            (
                Event::Launch {
                    helper: "web".into(),
                    identity: id(0),
                    attempt: 2,
                },
                "launched web as ? (attempt 2)",
            ),
            (
                Event::Exit {
                    pid: 4730,
                    identity: None,
                    helper: Some("crasher".into()),
                    generation: Some(1),
                    status: ExitStatus::Exited { code: 3 },
                },
                "crasher 4730 ended: exit code 3",
            ),
            (
                Event::Exit {
                    pid: 12,
                    identity: None,
                    helper: None,
                    generation: Some(3),
                    status: ExitStatus::Signaled {
                        signal: 15,
                        core_dumped: false,
                    },
                },
                "12 (generation 3) ended: killed by SIGTERM",
            ),
            (
                Event::LaunchFailed {
                    helper: "web".into(),
                    error: "exec failed: ENOENT: nginx: not found in PATH".into(),
                    status: Some(ExitStatus::Exited { code: 127 }),
                },
                "web failed to launch: exec failed: ENOENT: nginx: not found in PATH (counts \
                 as exit code 127)",
            ),
            (
                Event::Restart {
                    helper: "crasher".into(),
                    attempt: 2,
                    delay_ms: 1500,
                },
                "restarting crasher in 1.5s (restart 2 in a row)",
            ),
            (
                Event::Signal {
                    target: id(7),
                    helper: None,
                    signal: "SIGTERM".into(),
                    reason: SignalReason::OrphanPolicy,
                },
                "sent SIGTERM to 7 (orphan policy)",
            ),
            (
                Event::OutputDropped {
                    helper: "web".into(),
                    lines: 120,
                },
                "120 lines of web's output not shown: foster's standard output is too slow \
                 (they are kept and logged)",
            ),
            (
                Event::Shutdown { signal: None },
                "shutting down (nothing left to supervise)",
            ),
        ];
        for (e, want) in cases {
            assert_eq!(e.to_string(), want);
        }
        // A helper name and an error with a terminal escape and a newline: escaped by `{}`,
        // raw by `{:#}` (for a caller that escapes the whole line).
        let hostile = Event::LaunchFailed {
            helper: "a\x1b]0;owned\x07".into(),
            error: "line\nnext".into(),
            status: None,
        };
        let shown = hostile.to_string();
        assert!(!shown.chars().any(|c| c.is_control()), "{shown:?}");
        assert_eq!(shown, r"a\e]0;owned\x07 failed to launch: line\nnext");
        assert_eq!(
            format!("{hostile:#}"),
            "a\x1b]0;owned\x07 failed to launch: line\nnext"
        );
    }

    #[test]
    fn keep_zero_starts_the_file_anew_and_a_long_line_stands_alone() {
        let d = dir("keep0");
        let p = d.join("e.jsonl");
        let rotation = Rotation {
            max_size: 150,
            keep: 0,
        };
        let mut log = EventLog::open(&p, rotation).unwrap();
        log.write(&record("a")).unwrap();
        let one = len(&p);
        log.write(&record("b")).unwrap();
        assert_eq!(len(&p), 2 * one, "two short lines fit");
        log.write(&record(&"x".repeat(200))).unwrap();
        assert!(len(&p) > 200, "the long line alone");
        assert!(!d.join("e.jsonl.1").exists(), "keep 0 keeps nothing");
        log.write(&record("c")).unwrap();
        assert_eq!(len(&p), one, "a new file after the long line");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_symlinked_path_is_not_rotated() {
        let d = dir("link");
        let target = d.join("real.jsonl");
        let p = d.join("e.jsonl");
        std::os::unix::fs::symlink(&target, &p).unwrap();
        let mut log = EventLog::open(
            &p,
            Rotation {
                max_size: 10,
                keep: 2,
            },
        )
        .unwrap();
        for h in ["a", "b", "c"] {
            log.write(&record(h)).unwrap();
        }
        assert!(
            std::fs::symlink_metadata(&p)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert!(!d.join("e.jsonl.1").exists());
        assert_eq!(std::fs::read_to_string(&target).unwrap().lines().count(), 3);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_rotated_file_keeps_its_mode_and_a_planted_symlink_is_not_followed() {
        use std::os::unix::fs::PermissionsExt;
        let d = dir("mode");
        let p = d.join("e.jsonl");
        let mut log = EventLog::open(
            &p,
            Rotation {
                max_size: 10,
                keep: 1,
            },
        )
        .unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        log.write(&record("a")).unwrap();
        log.write(&record("b")).unwrap();
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert!(d.join("e.jsonl.1").exists());
        // Something planted at the path between two rotations is refused, not followed.
        let victim = d.join("victim");
        std::fs::write(&victim, "").unwrap();
        std::fs::remove_file(&p).unwrap();
        std::os::unix::fs::symlink(&victim, &p).unwrap();
        (log.file, log.size) = (None, 0); // as after a rotation whose create failed
        assert!(log.write(&record("c")).is_err());
        assert_eq!(len(&victim), 0, "wrote through a planted symlink");
        let _ = std::fs::remove_dir_all(&d);
    }
}
