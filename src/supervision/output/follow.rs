//! Following the lines as they come: some helpers', or every helper's.
//!
//! Owns [`Follower`]: the kept lines asked for and every later line of the helpers followed
//! (or of all), none missed or given twice between the two ([`Output::follower`] takes both
//! under the one lock), with an exact count of what a slow follower lost. A follower takes the
//! lines of every helper from the one broadcast and keeps those of its helpers. One that falls
//! more than [`FOLLOW_RING`] lines behind the broadcast loses its place there; it then takes up
//! again from the rings: the lines they still keep after the last one it had (at most
//! [`FOLLOW_RING`] of them) come next, and the number of lines of its helpers (or of all) it
//! will never see comes first, as [`Next::Missed`]: another helper's flood is not counted.
//! Each line carries its number among every helper's lines (`seq`), and foster counts each
//! helper's lines, so that number is exact whichever helpers are followed. A follower knows its
//! helpers by name: when a reload removes one and gives its place to another, the other's
//! lines are not taken for its.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use tokio::sync::broadcast::{self, error::RecvError};

use super::{FOLLOW_RING, Kept, Line, Output, UnknownHelper, index_of, subscribe, tail_of};

/// What a follower gets next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    Line(Arc<Line>),
    /// This many lines (of the helpers followed, or of all) are lost for this follower: it did
    /// not take them in time and the rings no longer keep them. The lines after them follow.
    Missed(u64),
    /// No more lines will come: the supervisor is ending.
    Closed,
}

/// A follower of some helpers' lines, or of every helper's.
#[derive(Debug)]
pub struct Follower {
    scope: Scope,
    rx: broadcast::Receiver<Arc<Line>>,
    /// Lines taken back from the rings after a lag, given before the broadcast's.
    pending: VecDeque<Arc<Line>>,
}

/// Whose lines a follower takes, and the last it has.
#[derive(Debug)]
enum Scope {
    /// Every helper's: the `seq` of the last line it has.
    All { seen: u64 },
    /// These helpers' (those a reload removed are dropped).
    Some(Vec<Followed>),
}

/// One helper followed: its index and name, and its count of lines when it had the last.
#[derive(Debug)]
struct Followed {
    index: usize,
    name: Arc<str>,
    seen: u64,
}

impl Output {
    /// The last `n` kept lines of `helpers` (of every helper when none), merged in the order
    /// read, oldest first, and a [`Follower`] of every later one.
    pub fn follower(
        &self,
        helpers: &[&str],
        n: usize,
    ) -> Result<(Vec<Arc<Line>>, Follower), UnknownHelper> {
        let g = self.lock();
        let mut set: Vec<Followed> = Vec::with_capacity(helpers.len());
        for h in helpers {
            let index = index_of(&g, h)?;
            if !set.iter().any(|f| f.index == index) {
                let (name, seen) = (g.names[index].clone(), g.counts[index]);
                set.push(Followed { index, name, seen });
            }
        }
        let (past, scope) = match set.as_slice() {
            [] => (tail_of(&g, None, n), Scope::All { seen: g.seq }),
            [one] => (tail_of(&g, Some(one.index), n), Scope::Some(set)),
            _ => (tail_of_set(&g, &set, n), Scope::Some(set)),
        };
        let follower = Follower {
            scope,
            rx: subscribe(&g),
            pending: VecDeque::new(),
        };
        Ok((past, follower))
    }
}

/// The last `n` kept lines of the helpers of `set`, merged by sequence number.
fn tail_of_set(g: &Kept, set: &[Followed], n: usize) -> Vec<Arc<Line>> {
    let mut all: BTreeMap<u64, &Arc<Line>> = BTreeMap::new();
    for f in set {
        for l in g.rings[f.index].tail(n) {
            all.insert(l.seq, l);
            if all.len() > n {
                all.pop_first();
            }
        }
    }
    all.into_values().cloned().collect()
}

impl Follower {
    /// The next line, or what happened instead. Cancel-safe: a line received is never lost
    /// to a cancellation (the broadcast's `recv` is cancel-safe, the rest does not wait).
    pub async fn next(&mut self, output: &Output) -> Next {
        loop {
            if let Some(l) = self.pending.pop_front() {
                return Next::Line(l);
            }
            match self.rx.recv().await {
                Ok(line) => {
                    if let Some(l) = self.take(line) {
                        return Next::Line(l);
                    }
                }
                Err(RecvError::Lagged(_)) => {
                    let missed = self.catch_up(output);
                    if missed > 0 {
                        return Next::Missed(missed);
                    }
                }
                Err(RecvError::Closed) => return Next::Closed,
            }
        }
    }

    /// The line, if it is one this follower wants (and notes that it has it).
    fn take(&mut self, line: Arc<Line>) -> Option<Arc<Line>> {
        match &mut self.scope {
            Scope::All { seen } => {
                // Lines taken back from the rings may be in the broadcast too.
                if line.seq <= *seen {
                    return None;
                }
                *seen = line.seq;
                Some(line)
            }
            Scope::Some(set) => {
                let f = set
                    .iter_mut()
                    .find(|f| Arc::ptr_eq(&line.helper, &f.name) || *line.helper == *f.name)?;
                f.seen += 1;
                Some(line)
            }
        }
    }

    /// After a lag: takes up again from the rings, with a new place in the broadcast, and
    /// returns how many lines are lost.
    fn catch_up(&mut self, output: &Output) -> u64 {
        let g = output.lock();
        let (behind, back) = match &mut self.scope {
            Scope::All { seen } => {
                let behind = g.seq.saturating_sub(*seen);
                let n = (behind as usize).min(FOLLOW_RING);
                let after = *seen;
                *seen = g.seq;
                let back: Vec<Arc<Line>> = tail_of(&g, None, n)
                    .into_iter()
                    .filter(|l| l.seq > after)
                    .collect();
                (behind, back)
            }
            Scope::Some(set) => catch_up_set(&g, set),
        };
        self.rx = subscribe(&g);
        drop(g);
        let missed = behind - back.len() as u64;
        self.pending = back.into();
        missed
    }
}

/// [`Follower::catch_up`] of some helpers: how many of their lines it is behind, and the last
/// [`FOLLOW_RING`] of those their rings still keep; each helper's place moved to now.
fn catch_up_set(g: &Kept, set: &mut Vec<Followed>) -> (u64, Vec<Arc<Line>>) {
    // A reload removed a helper: nothing of its is kept any more.
    set.retain(|f| *g.names[f.index] == *f.name);
    let mut behind = 0u64;
    let mut back: BTreeMap<u64, Arc<Line>> = BTreeMap::new();
    for f in set.iter_mut() {
        let count = g.counts[f.index];
        if count < f.seen {
            // Removed and added again: its count started over.
            f.seen = 0;
        }
        let late = count - f.seen;
        behind += late;
        let n = (late as usize).min(FOLLOW_RING);
        back.extend(g.rings[f.index].tail(n).map(|l| (l.seq, l.clone())));
        f.seen = count;
    }
    while back.len() > FOLLOW_RING {
        back.pop_first();
    }
    (behind, back.into_values().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::supervision::output::Stream;

    fn publish(o: &Output, i: usize, texts: &[String]) {
        let mut batch = crate::supervision::output::Batch::default();
        for t in texts {
            batch.push(t.as_bytes(), false);
        }
        o.publish(i, Stream::Stdout, 1, &batch, None);
    }

    fn text(n: &Next) -> String {
        match n {
            Next::Line(l) => format!("{}:{}", l.helper, String::from_utf8_lossy(&l.bytes)),
            Next::Missed(k) => format!("missed {k}"),
            Next::Closed => "closed".into(),
        }
    }

    fn lines(prefix: &str, range: std::ops::Range<usize>) -> Vec<String> {
        range.map(|k| format!("{prefix}{k}")).collect()
    }

    /// Takes everything available now, without waiting.
    fn drain(o: &Output, f: &mut Follower) -> Vec<String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let mut out = Vec::new();
        rt.block_on(async {
            loop {
                let next = tokio::time::timeout(std::time::Duration::from_millis(20), f.next(o));
                match next.await {
                    Ok(n) => {
                        let closed = n == Next::Closed;
                        out.push(text(&n));
                        if closed {
                            break;
                        }
                    }
                    Err(_) => break,
                }
            }
        });
        out
    }

    #[test]
    fn one_helper_is_followed_from_its_tail() {
        let o = Output::new(&["a", "b"], 100, 1 << 20);
        publish(&o, 0, &lines("a", 0..3));
        publish(&o, 1, &lines("b", 0..2));
        let (past, mut f) = o.follower(&["a"], 2).unwrap();
        let past: Vec<_> = past.iter().map(|l| l.bytes.to_vec()).collect();
        assert_eq!(past, [b"a1".to_vec(), b"a2".to_vec()]);
        publish(&o, 1, &lines("b", 2..4));
        publish(&o, 0, &lines("a", 3..5));
        assert_eq!(drain(&o, &mut f), ["a:a3", "a:a4"]);
        assert!(matches!(o.follower(&["c"], 1), Err(UnknownHelper(h)) if h == "c"));
        o.close();
        assert_eq!(drain(&o, &mut f), ["closed"]);
    }

    /// A follower that lags gets what the rings still keep, after the exact count of what
    /// it lost, for one helper among others and for all.
    #[test]
    fn a_lagging_follower_is_told_exactly_what_it_missed() {
        // Rings of 100 lines: of 3,000 lines of `a` missed, the last 100 come back.
        let o = Output::new(&["a", "b"], 100, 1 << 20);
        let (_, mut one) = o.follower(&["a"], 0).unwrap();
        let (_, mut all) = o.follower(&[], 0).unwrap();
        publish(&o, 0, &lines("a", 0..1));
        for k in 0..30 {
            publish(&o, 0, &lines("a", 1 + k * 100..1 + (k + 1) * 100));
            publish(&o, 1, &lines("b", k * 10..(k + 1) * 10));
        }
        // Lines of a: 3,001; of b: 300; `a` keeps its last 100 (a2901..a3000), `b` its last
        // 100 (b200..b299).
        let got = drain(&o, &mut one);
        assert_eq!(got[0], "missed 2901", "{:?}", &got[..3]);
        assert_eq!(got[1..], lines("a:a", 2901..3001)[..]);
        // All helpers: 3,301 lines; the last FOLLOW_RING (1024) of those kept are a's last
        // 100 and b's last 100, 200 in all, interleaved in the order read.
        let got = drain(&o, &mut all);
        assert_eq!(got[0], "missed 3101");
        assert_eq!(got.len(), 201);
        assert_eq!(got[got.len() - 1], "b:b299");
        assert!(got.contains(&"a:a2901".to_string()));
        // Then the follower goes on as before.
        publish(&o, 0, &lines("a", 3001..3002));
        assert_eq!(drain(&o, &mut one), ["a:a3001"]);
        assert_eq!(drain(&o, &mut all), ["a:a3001"]);
    }

    /// A follower of two helpers that lags behind a third's flood is told only of its own
    /// helpers' lost lines, and gets what their rings keep, in the order read.
    #[test]
    fn a_lagging_follower_of_some_helpers_counts_only_theirs() {
        let o = Output::new(&["a", "b", "c"], 100, 1 << 20);
        let (_, mut some) = o.follower(&["a", "c"], 0).unwrap();
        for k in 0..30 {
            publish(&o, 0, &lines("a", k * 10..(k + 1) * 10));
            publish(&o, 1, &lines("b", k * 100..(k + 1) * 100));
            publish(&o, 2, &lines("c", k..k + 1));
        }
        // a: 300 lines, its last 100 kept; c: 30, all kept; b's 3,000 are not counted.
        let got = drain(&o, &mut some);
        assert_eq!(got[0], "missed 200", "{:?}", &got[..3]);
        assert_eq!(got.len(), 1 + 100 + 30);
        assert!(got[1..].iter().all(|l| !l.starts_with("b:")));
        assert_eq!(got[got.len() - 1], "c:c29");
        let (past, _) = o.follower(&["c", "a"], 3).unwrap();
        let past: Vec<_> = past.iter().map(|l| l.bytes.to_vec()).collect();
        assert_eq!(past, [b"a298".to_vec(), b"a299".to_vec(), b"c29".to_vec()]);
    }

    /// A follower of a quiet helper that lags behind another's flood loses none of its own
    /// lines: they come back from its ring, with no count.
    #[test]
    fn a_lag_the_ring_covers_loses_nothing() {
        let o = Output::new(&["a", "b"], 1000, 64 << 20);
        let (_, mut f) = o.follower(&["a"], 0).unwrap();
        publish(&o, 0, &lines("a", 0..5));
        publish(&o, 1, &lines("b", 0..2000));
        publish(&o, 0, &lines("a", 5..7));
        assert_eq!(drain(&o, &mut f), lines("a:a", 0..7));
    }

    /// A reload that removes the helper followed and gives its place to another: the other's
    /// lines are not the follower's; every helper's follower gets them.
    #[test]
    fn a_helper_in_the_place_of_a_removed_one_is_not_followed_for_it() {
        let o = Output::new(&["a", "b"], 100, 1 << 20);
        let (_, mut one) = o.follower(&["a"], 0).unwrap();
        let (_, mut all) = o.follower(&[], 0).unwrap();
        publish(&o, 0, &lines("a", 0..1));
        o.set(0, "c", crate::supervision::output::ring::Bounds::default());
        publish(&o, 0, &lines("c", 0..2));
        assert_eq!(drain(&o, &mut one), ["a:a0"]);
        assert_eq!(drain(&o, &mut all), ["a:a0", "c:c0", "c:c1"]);
        assert!(o.follower(&["a"], 1).is_err());
        let (past, _) = o.follower(&["c"], 5).unwrap();
        assert_eq!(past.len(), 2);
    }
}
