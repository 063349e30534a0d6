//! The last lines of one helper, kept in memory: a ring bounded in lines and in bytes.
//!
//! Owns [`Ring`]: lines go in at the back; the oldest go out whenever the ring would hold more
//! than its line bound or its byte bound (each line counted as its bytes plus
//! [`LINE_OVERHEAD`], so that a flood of empty lines is bounded too). A single line heavier
//! than the byte bound is still kept, alone. [`Ring::keeps`] says how many of the lines about
//! to come it would keep, so that lines it would let go at once need not be made. What `foster ctl
//! logs` and the dashboard show of a helper's past comes from here.

use std::collections::VecDeque;

/// Lines kept per helper by default.
pub const DEFAULT_LINES: usize = 1000;

/// Bytes kept per helper by default: 1 MiB (of text and overhead).
pub const DEFAULT_BYTES: usize = 1 << 20;

/// The most lines a helper's ring may be given (`ring.lines`).
pub const MAX_LINES: usize = 1_000_000;

/// The most bytes a helper's ring may be given (`ring.bytes`): 256 MiB.
pub const MAX_BYTES: usize = 256 << 20;

/// A ring's bounds: at most `lines` lines and `bytes` bytes (overhead included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    pub lines: usize,
    pub bytes: usize,
}

impl Default for Bounds {
    fn default() -> Bounds {
        Bounds {
            lines: DEFAULT_LINES,
            bytes: DEFAULT_BYTES,
        }
    }
}

/// What a line costs besides its bytes, for the byte bound: its record and its place.
pub const LINE_OVERHEAD: usize = 64;

/// Something a ring can weigh.
pub trait Weigh {
    /// Its bytes (the ring adds [`LINE_OVERHEAD`]).
    fn weight(&self) -> usize;
}

/// The last lines, within `max_lines` and `max_bytes`.
#[derive(Debug)]
pub struct Ring<T> {
    lines: VecDeque<T>,
    bytes: usize,
    max_lines: usize,
    max_bytes: usize,
}

impl<T: Weigh> Ring<T> {
    /// An empty ring within `bounds`.
    pub fn within(bounds: Bounds) -> Ring<T> {
        Ring::new(bounds.lines, bounds.bytes)
    }

    /// An empty ring with these bounds (a line bound of 0 keeps nothing).
    pub fn new(max_lines: usize, max_bytes: usize) -> Ring<T> {
        Ring {
            lines: VecDeque::new(),
            bytes: 0,
            max_lines,
            max_bytes,
        }
    }

    /// Keeps `line`, letting the oldest go as the bounds require; returns the last line that
    /// went (or `line` itself when the ring keeps nothing), for its allocation to be reused.
    pub fn push(&mut self, line: T) -> Option<T> {
        if self.max_lines == 0 {
            return Some(line);
        }
        let w = line.weight() + LINE_OVERHEAD;
        let mut gone = None;
        while !self.lines.is_empty()
            && (self.lines.len() >= self.max_lines || self.bytes + w > self.max_bytes)
        {
            if let Some(old) = self.lines.pop_front() {
                self.bytes -= old.weight() + LINE_OVERHEAD;
                gone = Some(old);
            }
        }
        self.bytes += w;
        self.lines.push_back(line);
        gone
    }

    /// How many of `weights` (the [`Weigh::weight`]s of lines about to be pushed, the newest
    /// first) the ring would keep once they all were. When that is fewer than all of them, it
    /// would keep none of its own lines either: a caller may push only those, then
    /// [`Ring::keep_last`] as many, with the same result.
    pub fn keeps(&self, weights: impl Iterator<Item = usize>) -> usize {
        if self.max_lines == 0 {
            return 0;
        }
        let mut bytes = 0;
        let mut n = 0;
        for w in weights {
            let w = w + LINE_OVERHEAD;
            if n > 0 && (n >= self.max_lines || bytes + w > self.max_bytes) {
                break;
            }
            bytes += w;
            n += 1;
        }
        n
    }

    /// Lets the oldest lines go until at most `n` are kept; returns the last that went, for
    /// its allocation to be reused.
    pub fn keep_last(&mut self, n: usize) -> Option<T> {
        let mut gone = None;
        while self.lines.len() > n {
            if let Some(old) = self.lines.pop_front() {
                self.bytes -= old.weight() + LINE_OVERHEAD;
                gone = Some(old);
            }
        }
        gone
    }

    /// The last `n` lines (fewer when fewer are kept), oldest first.
    pub fn tail(&self, n: usize) -> impl DoubleEndedIterator<Item = &T> + ExactSizeIterator {
        self.lines.iter().skip(self.lines.len().saturating_sub(n))
    }

    /// How many lines are kept.
    pub fn len(&self) -> usize {
        self.lines.len()
    }

    /// Whether no line is kept.
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// The bytes kept, overhead included.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    impl Weigh for Vec<u8> {
        fn weight(&self) -> usize {
            self.len()
        }
    }

    #[test]
    fn the_oldest_go_first() {
        let mut r = Ring::new(3, 1 << 20);
        for i in 0..5u8 {
            r.push(vec![i]);
        }
        assert_eq!(r.tail(10).cloned().collect::<Vec<_>>(), [[2], [3], [4]]);
        assert_eq!(r.tail(1).cloned().collect::<Vec<_>>(), [[4]]);
        assert_eq!(r.tail(0).count(), 0);
        // The byte bound: two lines of 100 bytes fit in 400, a third makes the first go.
        let mut r = Ring::new(100, 2 * (100 + LINE_OVERHEAD) + 10);
        for b in [b'a', b'b', b'c'] {
            r.push(vec![b; 100]);
        }
        assert_eq!(r.len(), 2);
        assert_eq!(r.tail(2).next().unwrap()[0], b'b');
        // A line heavier than the whole bound stays, alone.
        r.push(vec![b'x'; 1000]);
        assert_eq!(r.len(), 1);
        let mut r: Ring<Vec<u8>> = Ring::new(0, 100);
        r.push(vec![1]);
        assert!(r.is_empty());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        /// Whatever is pushed: the ring holds the newest lines in order, within both bounds
        /// (a lone line may exceed the byte bound), and as many as the bounds allow.
        #[test]
        fn the_ring_keeps_the_newest_within_its_bounds(
            sizes in proptest::collection::vec(0usize..400, 0..200),
            max_lines in 0usize..20,
            max_bytes in 0usize..3000,
        ) {
            let mut r = Ring::new(max_lines, max_bytes);
            let lines: Vec<Vec<u8>> = sizes
                .iter()
                .enumerate()
                .map(|(i, &n)| {
                    let mut v = vec![0u8; n];
                    if let Some(b) = v.first_mut() {
                        *b = i as u8;
                    }
                    v
                })
                .collect();
            for l in &lines {
                r.push(l.clone());
            }
            let kept: Vec<Vec<u8>> = r.tail(usize::MAX).cloned().collect();
            prop_assert!(kept.len() <= max_lines);
            let weight: usize = kept.iter().map(|l| l.len() + LINE_OVERHEAD).sum();
            prop_assert_eq!(weight, r.bytes());
            prop_assert!(weight <= max_bytes || kept.len() == 1);
            prop_assert_eq!(&kept[..], &lines[lines.len() - kept.len()..]);
            if max_lines > 0 && !lines.is_empty() {
                prop_assert!(!kept.is_empty(), "the newest line is always kept");
            }
            // One more of the older lines would break a bound (or there is none).
            if kept.len() < lines.len() && !kept.is_empty() {
                let next = &lines[lines.len() - kept.len() - 1];
                prop_assert!(
                    kept.len() + 1 > max_lines || weight + next.len() + LINE_OVERHEAD > max_bytes
                );
            }
        }
    }
}
