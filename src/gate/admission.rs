//! Admission and the idempotent shutdown latch.
//!
//! Owns [`Admission`]: a helper takes a [`Guard`] before each operation that must not *start*
//! after its supervisor lost authority. A guard is granted only while the lifeline holds and
//! shutdown has not begun. Parent-death notification cannot cancel work already under way (the
//! helper can run some instructions after the death); admission bounds what can still begin.
//!
//! Shutdown has exactly one owner, the [`ShutdownOwner`] returned with the admission (not
//! cloneable). Any number of requests may come from any path (the parent-death signal, the
//! gate's check, the lifeline, the program itself): the first closes admission and records its
//! reason, later ones are counted and change nothing. The owner then waits for in-flight guards
//! within a bound, runs the release step, and the latch ends in a defined final state
//! ([`ShutdownReport`]) that every waiter sees.

use std::fmt;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::gate::lifeline::Lifeline;

/// Why shutdown began.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ShutdownReason {
    /// The program asked for it.
    Requested,
    /// The parent-death signal arrived (and was not a false alarm).
    ParentDeathSignal,
    /// The gate's parent check failed.
    ParentCheck,
    /// The lifeline reported the parent's end.
    LifelineLost,
}

impl fmt::Display for ShutdownReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ShutdownReason::Requested => "requested",
            ShutdownReason::ParentDeathSignal => "parent-death signal",
            ShutdownReason::ParentCheck => "parent check",
            ShutdownReason::LifelineLost => "lifeline lost",
        })
    }
}

/// Where the latch is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Guards are granted.
    Open,
    /// Shutdown was requested: no new guard; in-flight ones may finish.
    Draining,
    /// The owner finished: the final state is in [`Admission::report`].
    Closed,
}

/// The final state of a shutdown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShutdownReport {
    /// The first request's reason.
    pub reason: ShutdownReason,
    /// How many requests arrived in all (the first included).
    pub requests: u64,
    /// True when every in-flight guard ended within the bound.
    pub drained: bool,
    /// Guards still held when the bound ran out.
    pub abandoned: usize,
}

/// Why no guard was granted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// Shutdown has begun, for this reason.
    #[error("admission closed: shutting down ({0})")]
    ShuttingDown(ShutdownReason),
}

#[derive(Debug)]
struct State {
    phase: Phase,
    in_flight: usize,
    reason: Option<ShutdownReason>,
    requests: u64,
    report: Option<ShutdownReport>,
}

#[derive(Debug)]
struct Inner {
    state: Mutex<State>,
    changed: Condvar,
    lifeline: Option<Arc<Lifeline>>,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The admission gate; cheap to clone and share between threads.
#[derive(Clone, Debug)]
pub struct Admission {
    inner: Arc<Inner>,
}

/// Proof that an operation was admitted; dropping it ends the operation.
#[derive(Debug)]
pub struct Guard {
    inner: Arc<Inner>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        let mut s = self.inner.lock();
        s.in_flight -= 1;
        drop(s);
        self.inner.changed.notify_all();
    }
}

/// The one owner of shutdown. Not cloneable: whoever holds it drains and releases.
#[derive(Debug)]
pub struct ShutdownOwner {
    inner: Arc<Inner>,
}

fn request(s: &mut State, reason: ShutdownReason) -> bool {
    s.requests += 1;
    if s.reason.is_some() {
        return false;
    }
    s.reason = Some(reason);
    if s.phase == Phase::Open {
        s.phase = Phase::Draining;
    }
    true
}

impl Admission {
    /// A new open admission, optionally tied to a lifeline, and its shutdown owner.
    pub fn new(lifeline: Option<Arc<Lifeline>>) -> (Admission, ShutdownOwner) {
        let inner = Arc::new(Inner {
            state: Mutex::new(State {
                phase: Phase::Open,
                in_flight: 0,
                reason: None,
                requests: 0,
                report: None,
            }),
            changed: Condvar::new(),
            lifeline,
        });
        (
            Admission {
                inner: inner.clone(),
            },
            ShutdownOwner { inner },
        )
    }

    /// A guard, if the lifeline holds and shutdown has not begun. A lost lifeline found here
    /// requests shutdown itself.
    pub fn admit(&self) -> Result<Guard, Refused> {
        let lost = self.inner.lifeline.as_ref().is_some_and(|l| l.is_lost());
        let mut s = self.inner.lock();
        if lost {
            request(&mut s, ShutdownReason::LifelineLost);
            drop(s);
            self.inner.changed.notify_all();
            s = self.inner.lock();
        }
        if let Some(r) = s.reason {
            return Err(Refused::ShuttingDown(r));
        }
        s.in_flight += 1;
        Ok(Guard {
            inner: self.inner.clone(),
        })
    }

    /// Requests shutdown from any path; true for the first request. Idempotent.
    pub fn request_shutdown(&self, reason: ShutdownReason) -> bool {
        let first = request(&mut self.inner.lock(), reason);
        self.inner.changed.notify_all();
        first
    }

    /// The current phase.
    pub fn phase(&self) -> Phase {
        self.inner.lock().phase
    }

    /// Guards currently held.
    pub fn in_flight(&self) -> usize {
        self.inner.lock().in_flight
    }

    /// The first request's reason, once shutdown has begun.
    pub fn reason(&self) -> Option<ShutdownReason> {
        self.inner.lock().reason
    }

    /// The final state, once the owner finished.
    pub fn report(&self) -> Option<ShutdownReport> {
        self.inner.lock().report
    }

    /// Blocks until shutdown is requested or `timeout` passes; the reason, if requested.
    pub fn wait_requested(&self, timeout: Duration) -> Option<ShutdownReason> {
        self.wait_for(timeout, |s| s.reason)
    }

    /// Blocks until the owner finished or `timeout` passes.
    pub fn wait_closed(&self, timeout: Duration) -> Option<ShutdownReport> {
        self.wait_for(timeout, |s| s.report)
    }

    /// Blocks until `get` finds a value in the state, or `timeout` passes.
    fn wait_for<T>(&self, timeout: Duration, get: impl Fn(&State) -> Option<T>) -> Option<T> {
        let deadline = Instant::now() + timeout;
        let mut s = self.inner.lock();
        loop {
            if let Some(v) = get(&s) {
                return Some(v);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            s = self
                .inner
                .changed
                .wait_timeout(s, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

impl ShutdownOwner {
    /// An admission handle of the same latch.
    pub fn admission(&self) -> Admission {
        Admission {
            inner: self.inner.clone(),
        }
    }

    /// Closes admission (requesting shutdown with [`ShutdownReason::Requested`] if nobody did),
    /// waits for in-flight guards up to `bound`, and ends the latch in its final state.
    pub fn drain(self, bound: Duration) -> ShutdownReport {
        self.finish(bound, || {})
    }

    /// [`ShutdownOwner::drain`], then runs `release` (freeing resources) before the latch closes.
    pub fn finish(self, bound: Duration, release: impl FnOnce()) -> ShutdownReport {
        let deadline = Instant::now() + bound;
        let mut s = self.inner.lock();
        if s.reason.is_none() {
            request(&mut s, ShutdownReason::Requested);
        }
        while s.in_flight > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            s = self
                .inner
                .changed
                .wait_timeout(s, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        let report = ShutdownReport {
            reason: s.reason.expect("requested above"),
            requests: s.requests,
            drained: s.in_flight == 0,
            abandoned: s.in_flight,
        };
        drop(s);
        release();
        let mut s = self.inner.lock();
        s.phase = Phase::Closed;
        s.report = Some(report);
        drop(s);
        self.inner.changed.notify_all();
        report
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guards_only_while_open() {
        let (a, owner) = Admission::new(None);
        let g = a.admit().unwrap();
        assert_eq!(a.in_flight(), 1);
        assert!(a.request_shutdown(ShutdownReason::ParentDeathSignal));
        assert!(!a.request_shutdown(ShutdownReason::LifelineLost));
        assert!(!a.request_shutdown(ShutdownReason::ParentCheck));
        assert_eq!(
            a.admit().unwrap_err(),
            Refused::ShuttingDown(ShutdownReason::ParentDeathSignal)
        );
        assert_eq!(a.phase(), Phase::Draining);
        let a2 = a.clone();
        let t = std::thread::spawn(move || a2.wait_closed(Duration::from_secs(10)));
        drop(g);
        let mut released = false;
        let r = owner.finish(Duration::from_secs(10), || released = true);
        assert!(released);
        assert_eq!(r.reason, ShutdownReason::ParentDeathSignal);
        assert_eq!(r.requests, 3);
        assert!(r.drained);
        assert_eq!(a.phase(), Phase::Closed);
        assert_eq!(t.join().unwrap(), Some(r));
    }

    #[test]
    fn bound_is_kept_when_a_guard_never_ends() {
        let (a, owner) = Admission::new(None);
        let _stuck = a.admit().unwrap();
        let r = owner.drain(Duration::from_millis(50));
        assert_eq!(r.reason, ShutdownReason::Requested);
        assert!(!r.drained);
        assert_eq!(r.abandoned, 1);
        assert_eq!(a.report(), Some(r));
    }

    #[test]
    fn many_requesters_one_outcome() {
        let (a, owner) = Admission::new(None);
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let a = a.clone();
                std::thread::spawn(move || a.request_shutdown(ShutdownReason::LifelineLost))
            })
            .collect();
        let firsts = threads
            .into_iter()
            .map(|t| t.join().unwrap())
            .filter(|f| *f)
            .count();
        assert_eq!(firsts, 1);
        let r = owner.drain(Duration::from_secs(1));
        assert_eq!(r.requests, 8);
        assert_eq!(r.reason, ShutdownReason::LifelineLost);
    }
}
