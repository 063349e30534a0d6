//! The [`Hub`] of events: sequence numbers, the backlog for late clients, the broadcast to
//! followers (a bounded ring: one that falls further behind loses its oldest).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::sync::broadcast;

use crate::supervision::control::protocol::{BACKLOG, EventRecord};
use crate::supervision::event::Record;

/// Events a following client may be behind before it loses the oldest.
const RING: usize = 1024;

/// The events of one supervisor: sequence numbers, the backlog and the broadcast.
#[derive(Debug)]
pub struct Hub {
    inner: Mutex<HubInner>,
}

#[derive(Debug)]
struct HubInner {
    seq: u64,
    backlog: VecDeque<Arc<EventRecord>>,
    tx: Option<broadcast::Sender<Arc<EventRecord>>>,
}

impl Default for Hub {
    fn default() -> Self {
        Hub::new()
    }
}

impl Hub {
    pub fn new() -> Hub {
        let (tx, _) = broadcast::channel(RING);
        Hub {
            inner: Mutex::new(HubInner {
                seq: 0,
                backlog: VecDeque::with_capacity(BACKLOG),
                tx: Some(tx),
            }),
        }
    }

    /// Numbers `record`, keeps it in the backlog and sends it to every follower. Never blocks.
    /// `outer_pids`: its pids as the namespace a contained supervisor was started in sees
    /// them ([`EventRecord::outer_pids`]; empty when not contained).
    pub fn publish(&self, record: &Record, outer_pids: &[[i32; 2]]) {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        g.seq += 1;
        let rec = Arc::new(EventRecord {
            seq: g.seq,
            ts_ms: record.ts_ms,
            event: record.event.clone(),
            foreign_pids: Vec::new(),
            outer_pids: outer_pids.to_vec(),
        });
        if g.backlog.len() == BACKLOG {
            g.backlog.pop_front();
        }
        g.backlog.push_back(rec.clone());
        if let Some(tx) = &g.tx {
            let _ = tx.send(rec);
        }
    }

    /// The last `n` events and a receiver of every later one, taken together so that none is
    /// missed or repeated. `None` once the hub is closed.
    pub fn subscribe(
        &self,
        n: usize,
    ) -> (
        Vec<Arc<EventRecord>>,
        Option<broadcast::Receiver<Arc<EventRecord>>>,
    ) {
        let g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let skip = g.backlog.len().saturating_sub(n);
        let backlog = g.backlog.iter().skip(skip).cloned().collect();
        (backlog, g.tx.as_ref().map(|t| t.subscribe()))
    }

    /// Ends every stream after the events already sent.
    pub fn close(&self) {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).tx = None;
    }

    /// Events published so far.
    pub fn published(&self) -> u64 {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).seq
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::supervision::control::protocol::BACKLOG;

    #[test]
    fn hub_backlog_and_sequence() {
        let hub = Hub::new();
        for i in 0..(BACKLOG + 5) {
            hub.publish(
                &Record::now(crate::supervision::event::Event::Shutdown {
                    signal: Some(format!("{i}")),
                }),
                &[],
            );
        }
        let (past, rx) = hub.subscribe(3);
        assert_eq!(past.len(), 3);
        assert_eq!(past[2].seq, (BACKLOG + 5) as u64);
        assert!(rx.is_some());
        let (past, _) = hub.subscribe(usize::MAX);
        assert_eq!(past.len(), BACKLOG);
        hub.close();
        assert!(hub.subscribe(1).1.is_none());
    }
}
