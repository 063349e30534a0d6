//! Readiness by the helper's output: a captured line matches a pattern (`ready = { log = ... }`).
//!
//! Owns [`wait_match`], a task of the supervisor's runtime that follows the output's broadcast of
//! lines ([`crate::supervision::output::Output`]), subscribed before the launch so that no line of
//! it is missed, and ends at the first line of its helper (either stream; a line longer than the
//! output's piece size is matched piece by piece) that matches. A follower that fell behind the
//! broadcast looks for the lines it missed among the helper's kept lines. It wakes only when a
//! line is read, and stops following once its helper is ready.

use std::sync::Arc;

use tokio::sync::broadcast::{Receiver, error::RecvError};

use crate::supervision::config::checks::LogPattern;
use crate::supervision::output::{FOLLOW_RING, Line, Output};

/// Waits for a line of `helper` matching `pattern` on `rx` (a subscription to `output` taken
/// before the helper's launch). True once one matched; false when the output ended first.
pub async fn wait_match(
    output: Arc<Output>,
    helper: Arc<str>,
    pattern: LogPattern,
    mut rx: Receiver<Arc<Line>>,
) -> bool {
    let mut last_seq = 0u64;
    loop {
        match rx.recv().await {
            Ok(line) => {
                last_seq = line.seq;
                if line.helper == helper && pattern.matches(&line.bytes) {
                    return true;
                }
            }
            Err(RecvError::Lagged(_)) => {
                // The missed lines of this helper are still among its kept ones (unless the
                // ring let them go too).
                let kept = output.tail(Some(&helper), FOLLOW_RING).unwrap_or_default();
                if kept
                    .iter()
                    .filter(|l| l.seq > last_seq)
                    .any(|l| pattern.matches(&l.bytes))
                {
                    return true;
                }
                if let Some(l) = kept.last() {
                    last_seq = last_seq.max(l.seq);
                }
            }
            Err(RecvError::Closed) => return false,
        }
    }
}
