//! The attached source: readings from a running supervisor's control socket.
//!
//! Owns [`AttachedSource`]. Attached, rows also carry role, generation, policy, expected parent
//! and adoption classification, and the reading carries the supervisor's recent events for the
//! events pane. The control socket (`foster ctl`, JSON lines) is not part of foster yet: until it
//! is, connecting fails with an error that says so, and the rest of the dashboard (model, rows,
//! anomalies, events pane) is already built and tested for supervised samples.

use std::path::{Path, PathBuf};

use crate::top::model::{Sample, Source, SourceError};

/// A supervisor's control socket, as a source of readings.
#[derive(Debug)]
pub struct AttachedSource {
    socket: PathBuf,
}

impl AttachedSource {
    /// Connects to the control socket at `socket`.
    pub fn connect(socket: &Path) -> Result<AttachedSource, SourceError> {
        Err(SourceError(format!(
            "--attach {}: this build of foster has no control socket yet; \
             use `foster top` or `foster top --root PID` (standalone, from /proc)",
            socket.display()
        )))
    }
}

impl Source for AttachedSource {
    fn sample(&mut self) -> Result<Sample, SourceError> {
        Err(SourceError(format!(
            "{}: not connected",
            self.socket.display()
        )))
    }
}
