//! What the client tasks share: their context, and the [`MAX_CLIENTS`] slots; when all are
//! taken, the client idle the longest is closed to make room ([`MAX_FOLLOWERS`] keeps such
//! slots), so `stop` and `status` always get through.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, mpsc, watch};

use super::hub::Hub;
use super::{Command, MAX_CLIENTS, MAX_FOLLOWERS};
use crate::supervision::output::Output;

#[derive(Clone)]
pub(super) struct ClientCtx {
    pub(super) hub: Arc<Hub>,
    pub(super) output: Option<Arc<Output>>,
    pub(super) commands: mpsc::Sender<Command>,
    /// Client tasks alive (an evicted one counts until its task ends).
    pub(super) clients: Arc<watch::Sender<usize>>,
    pub(super) slots: Arc<Mutex<Slots>>,
    pub(super) uid: u32,
}

/// The clients holding a slot, and which of them may be closed to make room.
#[derive(Debug, Default)]
pub(super) struct Slots {
    pub(super) next_id: u64,
    pub(super) entries: std::collections::HashMap<u64, SlotEntry>,
}

#[derive(Debug)]
pub(super) struct SlotEntry {
    pub(super) pid: i32,
    /// Since when it has been waiting for its next request or writing an answer; `None` while
    /// a request of its is with the supervisor.
    pub(super) idle_since: Option<Instant>,
    /// It follows the event stream or helpers' lines: never idle, never closed to make room.
    pub(super) follows: bool,
    /// Tells its task it was closed to make room.
    pub(super) evict: Arc<Notify>,
}

/// Whether a new client got a slot.
pub(super) enum Admission {
    /// Its slot's id and eviction notice, and the client closed to make room for it (pid, how
    /// long it had been idle), if one was.
    In(u64, Arc<Notify>, Option<(i32, Duration)>),
    /// Every slot is taken and none is idle.
    Full,
}

impl Slots {
    /// A slot for a new client; when all [`MAX_CLIENTS`] are taken, the one idle the longest
    /// is freed for it.
    pub(super) fn admit(&mut self, pid: i32, now: Instant) -> Admission {
        let mut evicted = None;
        if self.entries.len() >= MAX_CLIENTS {
            let oldest = self
                .entries
                .iter()
                .filter(|(_, e)| !e.follows)
                .filter_map(|(id, e)| e.idle_since.map(|t| (t, *id)))
                .min();
            let Some((since, id)) = oldest else {
                return Admission::Full;
            };
            if let Some(e) = self.entries.remove(&id) {
                e.evict.notify_one();
                evicted = Some((e.pid, now.saturating_duration_since(since)));
            }
        }
        self.next_id += 1;
        let evict = Arc::new(Notify::new());
        self.entries.insert(
            self.next_id,
            SlotEntry {
                pid,
                idle_since: Some(now),
                follows: false,
                evict: evict.clone(),
            },
        );
        Admission::In(self.next_id, evict, evicted)
    }

    pub(super) fn followers(&self) -> usize {
        self.entries.values().filter(|e| e.follows).count()
    }
}

/// A client task's slot: freed when the task ends, however it ends.
pub(super) struct ClientSlot {
    pub(super) id: u64,
    pub(super) evict: Arc<Notify>,
    pub(super) slots: Arc<Mutex<Slots>>,
    pub(super) clients: Arc<watch::Sender<usize>>,
}

impl ClientSlot {
    /// Marks the client idle since `since`, or (`None`) busy with a request at the
    /// supervisor. False when it was closed to make room meanwhile.
    pub(super) fn set_idle(&self, since: Option<Instant>) -> bool {
        let mut g = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        match g.entries.get_mut(&self.id) {
            Some(e) => {
                e.idle_since = since;
                true
            }
            None => false,
        }
    }

    /// Makes the client a follower (of events or lines), if fewer than [`MAX_FOLLOWERS`] are.
    /// `Err(true)` when the limit is reached, `Err(false)` when it was closed to make room.
    pub(super) fn follow(&self) -> Result<(), bool> {
        let mut g = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        let followers = g.followers();
        match g.entries.get_mut(&self.id) {
            Some(e) if e.follows => Ok(()),
            Some(_) if followers >= MAX_FOLLOWERS => Err(true),
            Some(e) => {
                e.follows = true;
                Ok(())
            }
            None => Err(false),
        }
    }
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        let mut g = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        g.entries.remove(&self.id);
        drop(g);
        self.clients.send_modify(|n| *n -= 1);
    }
}
