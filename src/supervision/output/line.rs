//! Lines of a helper's output: the bytes of one stream cut at each newline, with a bound.
//!
//! Owns [`Splitter`], which turns the chunks read from one pipe into lines (the newline left
//! out, the bytes kept as they are: not UTF-8, escapes, `\r`, all kept), and the bound
//! [`MAX_LINE`]: a longer line is cut into pieces of exactly `MAX_LINE` bytes, each piece but
//! the last marked `continued` (the line goes on in the next piece of the same stream), so a
//! writer that never writes a newline costs foster at most `MAX_LINE` bytes per stream. A last
//! line without a newline is held until its newline comes, or the stream ends
//! ([`Splitter::finish`]).

/// The longest piece of a line: 64 KiB.
pub const MAX_LINE: usize = 64 * 1024;

/// One stream's line being read: what came since its last newline (less than [`MAX_LINE`]
/// bytes, or exactly `MAX_LINE` while it is not known whether more of the line follows).
#[derive(Debug, Default)]
pub struct Splitter {
    partial: Vec<u8>,
    max: usize,
}

impl Splitter {
    /// A splitter with the bound [`MAX_LINE`].
    pub fn new() -> Splitter {
        Splitter::with_max(MAX_LINE)
    }

    /// A splitter with a bound of its own (at least 1 byte), for tests.
    pub fn with_max(max: usize) -> Splitter {
        Splitter {
            partial: Vec::new(),
            max: max.max(1),
        }
    }

    /// Whether part of a line is held.
    pub fn holds(&self) -> bool {
        !self.partial.is_empty()
    }

    /// Takes `data`, the next bytes of the stream, and calls `each(piece, continued)` for every
    /// line it ends and every full piece of a longer one, in order. Lines within `data` are
    /// handed over without a copy.
    pub fn feed(&mut self, mut data: &[u8], mut each: impl FnMut(&[u8], bool)) {
        let max = self.max;
        while !data.is_empty() {
            if self.partial.len() == max {
                // A full piece is held and more of the stream follows: it is the line's last
                // piece if a newline comes next, else the line goes on.
                if data[0] == b'\n' {
                    each(&self.partial, false);
                    self.partial.clear();
                    data = &data[1..];
                    continue;
                }
                each(&self.partial, true);
                self.partial.clear();
            }
            let room = max - self.partial.len();
            let window = &data[..room.min(data.len())];
            match memchr::memchr(b'\n', window) {
                Some(i) if self.partial.is_empty() => {
                    each(&data[..i], false);
                    data = &data[i + 1..];
                }
                Some(i) => {
                    self.partial.extend_from_slice(&data[..i]);
                    each(&self.partial, false);
                    self.partial.clear();
                    data = &data[i + 1..];
                }
                None => {
                    self.partial.extend_from_slice(window);
                    data = &data[window.len()..];
                }
            }
        }
    }

    /// The stream ended: the line held, if any, is handed over as a whole line.
    pub fn finish(&mut self, mut each: impl FnMut(&[u8], bool)) {
        if !self.partial.is_empty() {
            each(&self.partial, false);
            self.partial.clear();
        }
        self.partial.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Every piece of `chunks` fed in order, then finished: (bytes, continued).
    fn pieces(max: usize, chunks: &[&[u8]]) -> Vec<(Vec<u8>, bool)> {
        let mut s = Splitter::with_max(max);
        let mut out = Vec::new();
        for c in chunks {
            s.feed(c, |p, cont| out.push((p.to_vec(), cont)));
        }
        s.finish(|p, cont| out.push((p.to_vec(), cont)));
        out
    }

    /// The stream the pieces say: each piece, and a newline after each that is not continued.
    fn joined(pieces: &[(Vec<u8>, bool)]) -> Vec<u8> {
        let mut v = Vec::new();
        for (p, cont) in pieces {
            v.extend_from_slice(p);
            if !cont {
                v.push(b'\n');
            }
        }
        v
    }

    #[test]
    fn lines_are_cut_at_newlines_and_bytes_kept() {
        let got = pieces(64, &[b"a\nb\x1b[31m\xff", b"c\r\n\n", b"tail"]);
        let want: Vec<(Vec<u8>, bool)> = vec![
            (b"a".to_vec(), false),
            (b"b\x1b[31m\xffc\r".to_vec(), false),
            (b"".to_vec(), false),
            (b"tail".to_vec(), false),
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn a_long_line_is_cut_into_marked_pieces() {
        let got = pieces(4, &[b"abcdefghij\n"]);
        assert_eq!(
            got,
            vec![
                (b"abcd".to_vec(), true),
                (b"efgh".to_vec(), true),
                (b"ij".to_vec(), false)
            ]
        );
        // Exactly the bound, its newline in the next chunk: one whole line, not marked.
        assert_eq!(
            pieces(4, &[b"abcd", b"\nx\n"]),
            vec![(b"abcd".to_vec(), false), (b"x".to_vec(), false)]
        );
        // Twice the bound: the first piece continued, the second the line's end.
        assert_eq!(
            pieces(4, &[b"abcdefgh\n"]),
            vec![(b"abcd".to_vec(), true), (b"efgh".to_vec(), false)]
        );
        // A stream that ends on a full piece: its last piece is not continued.
        assert_eq!(pieces(4, &[b"abcd"]), vec![(b"abcd".to_vec(), false)]);
        // 1 MiB in one line, in odd chunks: 16 pieces of 64 KiB.
        let big = vec![b'x'; 1 << 20];
        let mut s = Splitter::new();
        let mut n = (0, 0);
        for c in big.chunks(7919) {
            s.feed(c, |p, cont| {
                assert_eq!(p.len(), MAX_LINE);
                n.0 += 1;
                n.1 += usize::from(cont);
            });
        }
        s.feed(b"\n", |p, cont| {
            assert_eq!((p.len(), cont), (MAX_LINE, false));
            n.0 += 1;
        });
        assert_eq!(n, (16, 15));
        assert!(!s.holds());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        /// No input panics; the pieces say exactly the stream (a newline added after a last
        /// line that had none); no piece is longer than the bound, and a continued piece is
        /// exactly the bound.
        #[test]
        fn the_pieces_are_the_stream(
            data in proptest::collection::vec(
                prop_oneof![Just(b'\n'), Just(b'a'), Just(0xffu8), Just(0x1b), any::<u8>()],
                0..300,
            ),
            cuts in proptest::collection::vec(0usize..300, 0..8),
            max in 1usize..20,
        ) {
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(data.len())).collect();
            cuts.sort_unstable();
            let mut chunks = Vec::new();
            let mut at = 0;
            for c in cuts.into_iter().chain([data.len()]) {
                chunks.push(&data[at..c]);
                at = c;
            }
            let got = pieces(max, &chunks);
            let mut want = data.clone();
            if !want.is_empty() && want.last() != Some(&b'\n') {
                want.push(b'\n');
            }
            prop_assert_eq!(joined(&got), want);
            for (p, cont) in &got {
                prop_assert!(p.len() <= max);
                if *cont {
                    prop_assert_eq!(p.len(), max);
                }
            }
            prop_assert!(!got.last().is_some_and(|(_, c)| *c), "the last piece ends its line");
        }
    }
}
