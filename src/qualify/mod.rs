//! The lifecycle harness behind `foster qualify` and the gate's integration tests.
//!
//! Owns the qualification of the startup gate: each case runs in a disposable process tree owned
//! by a **case root**, a fresh `foster` process (`foster __qualify-internal case NAME`) that makes
//! itself a child subreaper, builds the case's supervisor, helpers and launchers, holds the helper
//! at the gate's steps through pipe barriers ([`crate::gate::Trace`]), ends only the launchers it
//! owns at the chosen moment, reaps everything in its tree, kills what is left (by pid, its own
//! descendants only) and prints one [`CaseRecord`] as JSON. The controller ([`run_case`]) runs
//! that process and reads the record; the integration tests call the same function.
//!
//! - [`barrier`]: pipes, trace readers, bounded waits on descriptors (never sleeps).
//! - [`harness`]: the case root's state, running a case in it, observing how a process ended,
//!   the checks every case shares, the teardown, the record.
//! - [`cases`]: the cases, what each expects, and the programs they run.
//! - [`render`]: the table for people, the Markdown lifecycle matrix, JSON.

pub mod barrier;
pub mod cases;
pub mod harness;
pub mod render;

use std::io::Read;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::gate::DeathPath;

/// A case's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    Fail,
    Skip,
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "FAIL",
            Verdict::Skip => "skip",
        })
    }
}

/// What one run of one case observed. Parents are named by role (`supervisor`, `harness
/// subreaper`, ...) so that records of two runs compare; `time_ms` is the only timing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CaseRecord {
    /// The case's name (`gone-before-arm`...).
    pub case: String,
    /// When the supervisor (or the launcher the case ends) dies, in words.
    pub death: String,
    /// The parent the helper was told to expect.
    pub expected_parent: String,
    /// The parent the helper saw at its check (or at the notification), by role.
    pub observed_parent: String,
    /// What `prctl` did: armed and read back, failed with an errno, not reached...
    pub prctl: String,
    /// Which path consumed the parent-death notification.
    pub path: DeathPath,
    /// How the helper ended (exited with what, killed by what).
    pub helper: String,
    /// Whether the target program started.
    pub target: String,
    /// Processes of the case's tree still running at the end (killed by the harness).
    pub leftovers: String,
    /// The verdict against the case's expected outcome.
    pub verdict: Verdict,
    /// Why, when it did not pass (or was skipped); what was checked when it passed.
    pub reason: String,
    /// Milliseconds from the death the case caused to the helper's end, monotonic clock, read
    /// at the events (absent when the case has no such pair).
    pub time_ms: Option<f64>,
}

impl CaseRecord {
    /// The record without its timing, for comparing runs.
    pub fn without_time(&self) -> CaseRecord {
        CaseRecord {
            time_ms: None,
            ..self.clone()
        }
    }
}

/// Where the `foster` binary the case roots run is.
#[derive(Clone, Debug)]
pub struct Harness {
    pub foster: PathBuf,
    /// The bound on one case root's whole run.
    pub deadline: Duration,
}

impl Harness {
    /// A harness running case roots from `foster`.
    pub fn new(foster: impl Into<PathBuf>) -> Harness {
        Harness {
            foster: foster.into(),
            deadline: Duration::from_secs(60),
        }
    }

    /// The harness of the running `foster` binary.
    pub fn current() -> std::io::Result<Harness> {
        Ok(Harness::new(std::env::current_exe()?))
    }
}

/// The names of every case, in matrix order.
pub fn case_names() -> Vec<&'static str> {
    cases::CASES.iter().map(|c| c.name).collect()
}

fn failed(case: &str, reason: String) -> CaseRecord {
    CaseRecord {
        case: case.into(),
        death: String::new(),
        expected_parent: String::new(),
        observed_parent: String::new(),
        prctl: String::new(),
        path: DeathPath::None,
        helper: String::new(),
        target: String::new(),
        leftovers: String::new(),
        verdict: Verdict::Fail,
        reason,
        time_ms: None,
    }
}

/// Runs one case in its own case root and returns its record. An unknown case, a case root
/// that crashes or overruns its deadline, gives a failing record saying so.
pub fn run_case(h: &Harness, name: &str) -> CaseRecord {
    if cases::find(name).is_none() {
        return failed(
            name,
            format!("unknown case {name:?} (known: {})", case_names().join(", ")),
        );
    }
    run_root(&h.foster, name, h.deadline)
}

fn run_root(foster: &Path, name: &str, deadline: Duration) -> CaseRecord {
    let mut cmd = Command::new(foster);
    crate::process::signal::reserved_as_inherited(&mut cmd);
    let mut child = match cmd
        .args(["__qualify-internal", "case", name])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => return failed(name, format!("cannot run {}: {e}", foster.display())),
    };
    let mut stderr = child.stderr.take().expect("piped");
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let mut stdout = child.stdout.take().expect("piped");
    let finished = barrier::readable(stdout.as_raw_fd(), Some(deadline));
    let mut out = String::new();
    if finished {
        let _ = stdout.read_to_string(&mut out);
    } else {
        let _ = child.kill();
    }
    // The case root is this controller's own plain child (not a supervised helper).
    let status = child.wait();
    let err = err_reader.join().unwrap_or_default();
    if !finished {
        return failed(
            name,
            format!("case root overran its {deadline:?} deadline; stderr: {err}"),
        );
    }
    match serde_json::from_str::<CaseRecord>(out.trim()) {
        Ok(r) => r,
        Err(e) => failed(
            name,
            format!(
                "case root gave no record ({e}; status {status:?}); stderr: {}",
                err.trim()
            ),
        ),
    }
}

/// Runs the named cases (all when empty) `repeat` times each.
pub fn run_cases(h: &Harness, names: &[String], repeat: u32) -> Vec<CaseRecord> {
    let names: Vec<String> = if names.is_empty() {
        case_names().into_iter().map(String::from).collect()
    } else {
        names.to_vec()
    };
    let mut out = Vec::new();
    for _ in 0..repeat.max(1) {
        for n in &names {
            out.push(run_case(h, n));
        }
    }
    out
}
