//! Following the lines as they come: one helper's, or every helper's.
//!
//! Owns [`Follower`]: the kept lines asked for and every later line of the helper followed (or
//! of all), none missed or given twice between the two ([`Output::follower`] takes both under
//! the one lock), with an exact count of what a slow follower lost. A follower takes the lines
//! of every helper from the one broadcast and keeps those of its helper. One that falls more
//! than [`FOLLOW_RING`] lines behind the broadcast loses its place there; it then takes up
//! again from the rings: the lines they still keep after the last one it had (at most
//! [`FOLLOW_RING`] of them) come next, and the number of lines of its helper (or of all) it
//! will never see comes first, as [`Next::Missed`]. Each line carries its number among every
//! helper's lines (`seq`), and foster counts each helper's lines, so that number is exact
//! whether the follower follows one helper or all. A follower of one helper knows it by its
//! name: when a reload removes that helper and gives its place to another, the other's lines
//! are not taken for its.

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::sync::broadcast::{self, error::RecvError};

use super::{FOLLOW_RING, Kept, Line, Output, UnknownHelper, index_of, subscribe, tail_of};

/// What a follower gets next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    Line(Arc<Line>),
    /// This many lines (of the helper followed, or of all) are lost for this follower: it did
    /// not take them in time and the rings no longer keep them. The lines after them follow.
    Missed(u64),
    /// No more lines will come: the supervisor is ending.
    Closed,
}

/// A follower of one helper's lines, or of every helper's.
#[derive(Debug)]
pub struct Follower {
    /// The helper followed (its index and name), or every helper.
    only: Option<usize>,
    name: Option<Arc<str>>,
    /// The last line it has: the helper's count of lines then, or (every helper) the line's
    /// `seq`.
    seen: u64,
    rx: broadcast::Receiver<Arc<Line>>,
    /// Lines taken back from the rings after a lag, given before the broadcast's.
    pending: VecDeque<Arc<Line>>,
}

impl Output {
    /// The last `n` kept lines of `helper` (of every helper when `None`), oldest first, and a
    /// [`Follower`] of every later one.
    pub fn follower(
        &self,
        helper: Option<&str>,
        n: usize,
    ) -> Result<(Vec<Arc<Line>>, Follower), UnknownHelper> {
        let g = self.lock();
        let only = helper.map(|h| index_of(&g, h)).transpose()?;
        let follower = Follower {
            only,
            name: only.map(|i| g.names[i].clone()),
            seen: place(&g, only),
            rx: subscribe(&g),
            pending: VecDeque::new(),
        };
        Ok((tail_of(&g, only, n), follower))
    }
}

/// Where a follower that has every line read so far stands.
fn place(g: &Kept, only: Option<usize>) -> u64 {
    match only {
        Some(i) => g.counts[i],
        None => g.seq,
    }
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
        match self.only {
            None => {
                // Lines taken back from the rings may be in the broadcast too.
                if line.seq <= self.seen {
                    return None;
                }
                self.seen = line.seq;
                Some(line)
            }
            Some(_) => {
                let name = self.name.as_ref()?;
                if !(Arc::ptr_eq(&line.helper, name) || *line.helper == **name) {
                    return None;
                }
                self.seen += 1;
                Some(line)
            }
        }
    }

    /// After a lag: takes up again from the rings, with a new place in the broadcast, and
    /// returns how many lines are lost.
    fn catch_up(&mut self, output: &Output) -> u64 {
        let g = output.lock();
        if let (Some(i), Some(name)) = (self.only, &self.name) {
            if *g.names[i] != **name {
                // A reload removed the helper: nothing of its is kept any more.
                self.rx = subscribe(&g);
                return 0;
            }
            if g.counts[i] < self.seen {
                // Removed and added again: its count started over.
                self.seen = 0;
            }
        }
        let now = place(&g, self.only);
        let behind = now.saturating_sub(self.seen);
        let back: Vec<Arc<Line>> = match self.only {
            Some(i) => {
                let n = (behind as usize).min(FOLLOW_RING);
                g.rings[i].tail(n).cloned().collect()
            }
            None => {
                let n = (behind as usize).min(FOLLOW_RING);
                let seen = self.seen;
                tail_of(&g, None, n)
                    .into_iter()
                    .filter(|l| l.seq > seen)
                    .collect()
            }
        };
        self.rx = subscribe(&g);
        drop(g);
        let missed = behind - back.len() as u64;
        self.seen = now;
        self.pending = back.into();
        missed
    }
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
        let (past, mut f) = o.follower(Some("a"), 2).unwrap();
        let past: Vec<_> = past.iter().map(|l| l.bytes.to_vec()).collect();
        assert_eq!(past, [b"a1".to_vec(), b"a2".to_vec()]);
        publish(&o, 1, &lines("b", 2..4));
        publish(&o, 0, &lines("a", 3..5));
        assert_eq!(drain(&o, &mut f), ["a:a3", "a:a4"]);
        assert!(matches!(o.follower(Some("c"), 1), Err(UnknownHelper(h)) if h == "c"));
        o.close();
        assert_eq!(drain(&o, &mut f), ["closed"]);
    }

    /// A follower that lags gets what the rings still keep, after the exact count of what
    /// it lost, for one helper among others and for all.
    #[test]
    fn a_lagging_follower_is_told_exactly_what_it_missed() {
        // Rings of 100 lines: of 3,000 lines of `a` missed, the last 100 come back.
        let o = Output::new(&["a", "b"], 100, 1 << 20);
        let (_, mut one) = o.follower(Some("a"), 0).unwrap();
        let (_, mut all) = o.follower(None, 0).unwrap();
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

    /// A follower of a quiet helper that lags behind another's flood loses none of its own
    /// lines: they come back from its ring, with no count.
    #[test]
    fn a_lag_the_ring_covers_loses_nothing() {
        let o = Output::new(&["a", "b"], 1000, 64 << 20);
        let (_, mut f) = o.follower(Some("a"), 0).unwrap();
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
        let (_, mut one) = o.follower(Some("a"), 0).unwrap();
        let (_, mut all) = o.follower(None, 0).unwrap();
        publish(&o, 0, &lines("a", 0..1));
        o.set(0, "c", crate::supervision::output::ring::Bounds::default());
        publish(&o, 0, &lines("c", 0..2));
        assert_eq!(drain(&o, &mut one), ["a:a0"]);
        assert_eq!(drain(&o, &mut all), ["a:a0", "c:c0", "c:c1"]);
        assert!(o.follower(Some("a"), 1).is_err());
        let (past, _) = o.follower(Some("c"), 5).unwrap();
        assert_eq!(past.len(), 2);
    }
}
