//! Where the supervisor's events go besides the control socket: the lines for people on
//! standard error and the events log, both naming processes by their outer pids when foster
//! is contained.

use tracing::warn;

use crate::supervision::contain::OuterPids;
use crate::supervision::event::{EventLog, Narration, Record};

/// The lines for people, the events log, and the outer pids they name.
pub(super) struct Reports {
    pub(super) events: Option<EventLog>,
    /// The events' lines for people on standard error.
    pub(super) narration: Narration,
    /// Contained: the tree's pids as the namespace foster was started in sees them, for the
    /// lines, the events log and the relay (the control socket speaks the namespace's own).
    pub(super) outer: Option<OuterPids>,
    /// Events the events log could not take since the last one it did.
    pub(super) events_lost: u64,
    /// Events the events log could not take since foster started.
    pub(super) events_lost_total: u64,
}

impl Reports {
    /// The reports of a supervision; `contained`, it keeps the outer pids if it can.
    pub(super) fn new(events: Option<EventLog>, contained: bool) -> Reports {
        Reports {
            events,
            narration: Narration::new(crate::base::logging::verbosity()),
            outer: if contained {
                let outer = OuterPids::take();
                if outer.is_none() {
                    warn!(
                        "the /proc of the namespace foster was started in could not be kept: \
                         the pids foster shows are those of its own PID namespace"
                    );
                }
                outer
            } else {
                None
            },
            events_lost: 0,
            events_lost_total: 0,
        }
    }

    /// Writes `record`'s line, if it has one, and appends it to the events log. Returns the
    /// outer pids of its processes, `[pid, outer pid]` (none when not contained), for the
    /// control socket.
    pub(super) fn write(&mut self, record: &Record) -> Vec<[i32; 2]> {
        // Contained, what foster writes itself names the processes by their outer pids.
        let mut pairs = Vec::new();
        let outer = self.outer.as_mut().map(|o| {
            let (event, p) = record.event.mapped_pairs(o);
            pairs = p;
            Record {
                event,
                ..record.clone()
            }
        });
        let shown = outer.as_ref().unwrap_or(record);
        for line in self.narration.push(&shown.event) {
            crate::base::logging::write_stderr(&line);
        }
        if let Some(log) = &mut self.events {
            match log.write(shown) {
                // One warning per failing streak, not one per event.
                Err(e) => {
                    if self.events_lost == 0 {
                        warn!("cannot write the events log (later failures are counted): {e}");
                    }
                    self.events_lost += 1;
                    self.events_lost_total += 1;
                }
                Ok(()) if self.events_lost > 0 => {
                    warn!(
                        "the events log is written again; {} event(s) could not be",
                        self.events_lost
                    );
                    self.events_lost = 0;
                }
                Ok(()) => {}
            }
        }
        pairs
    }

    /// At foster's end: the events the events log could not take since it last could, said
    /// (otherwise only the first failure of a streak that never ended would have been).
    pub(super) fn say_lost(&self) {
        if self.events_lost > 0 {
            warn!(
                "the events log could not take the last {} event(s), up to foster's end",
                self.events_lost
            );
        }
    }
}
