//! Readiness by the helper's output: a captured line matches a pattern (`ready = { log = ... }`).
//!
//! Owns [`wait_match`], a task of the supervisor's runtime that follows the output's broadcast of
//! lines ([`crate::supervision::output::Output`]), subscribed before the launch so that no line of
//! it is missed, and ends at the first line of its helper (either stream) that matches. A line
//! longer than the output's piece size comes in pieces: each is matched together with the piece
//! before it ([`Matcher`]), so a match across the cut between two pieces is found, and what is
//! held stays one piece per stream. A follower that fell behind the broadcast looks for the
//! lines it missed among the helper's kept lines. It wakes only when a line is read, and stops
//! following once its helper is ready.

use std::sync::Arc;

use tokio::sync::broadcast::{Receiver, error::RecvError};

use crate::supervision::config::checks::LogPattern;
use crate::supervision::output::{FOLLOW_RING, Line, Output, Stream};

/// The pattern of one helper, and per stream the piece its next piece continues.
struct Matcher {
    helper: Arc<str>,
    pattern: LogPattern,
    /// The last piece of each stream (stdout, stderr), while the line goes on.
    open: [Option<Arc<Line>>; 2],
}

impl Matcher {
    /// Whether `line` (a piece of any helper's output, in order) ends the wait: a piece of this
    /// helper that matches, alone or joined to the piece it continues.
    fn feed(&mut self, line: &Arc<Line>) -> bool {
        if line.helper != self.helper {
            return false;
        }
        let k = match line.stream {
            Stream::Stdout => 0,
            Stream::Stderr => 1,
        };
        let before = self.open[k].take();
        let found = match &before {
            Some(prev) => self
                .pattern
                .matches(&[&prev.bytes[..], &line.bytes[..]].concat()),
            None => self.pattern.matches(&line.bytes),
        };
        if line.continued {
            self.open[k] = Some(line.clone());
        }
        found
    }
}

/// Waits for a line of `helper` matching `pattern` on `rx` (a subscription to `output` taken
/// before the helper's launch). True once one matched; false when the output ended first.
pub async fn wait_match(
    output: Arc<Output>,
    helper: Arc<str>,
    pattern: LogPattern,
    mut rx: Receiver<Arc<Line>>,
) -> bool {
    let mut m = Matcher {
        helper,
        pattern,
        open: [None, None],
    };
    let mut last_seq = 0u64;
    loop {
        match rx.recv().await {
            Ok(line) => {
                last_seq = line.seq;
                if m.feed(&line) {
                    return true;
                }
            }
            Err(RecvError::Lagged(_)) => {
                // The missed lines of this helper are still among its kept ones (unless the
                // ring let them go too).
                let kept = output
                    .tail(Some(&m.helper), FOLLOW_RING)
                    .unwrap_or_default();
                for l in kept.iter().filter(|l| l.seq > last_seq) {
                    if m.feed(l) {
                        return true;
                    }
                }
                if let Some(l) = kept.last() {
                    last_seq = last_seq.max(l.seq);
                }
            }
            Err(RecvError::Closed) => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn piece(helper: &str, stream: Stream, continued: bool, bytes: &[u8]) -> Arc<Line> {
        Arc::new(Line {
            seq: 0,
            helper: helper.into(),
            stream,
            helper_pid: None,
            outer_pid: None,
            ts_ms: 0,
            continued,
            bytes: bytes.to_vec(),
        })
    }

    #[test]
    fn a_match_across_two_pieces_of_a_line_is_found_and_only_there() {
        let mut m = Matcher {
            helper: "app".into(),
            pattern: LogPattern::parse("ready").unwrap(),
            open: [None, None],
        };
        assert!(!m.feed(&piece("app", Stream::Stdout, true, b"xxrea")));
        // Another helper's line, and the other stream's, come in between.
        assert!(!m.feed(&piece("db", Stream::Stdout, false, b"dy")));
        assert!(!m.feed(&piece("app", Stream::Stderr, false, b"dy")));
        assert!(m.feed(&piece("app", Stream::Stdout, false, b"dy now")));
        // A line that ended is not joined to the next.
        assert!(!m.feed(&piece("app", Stream::Stdout, false, b"rea")));
        assert!(!m.feed(&piece("app", Stream::Stdout, false, b"dy")));
    }
}
