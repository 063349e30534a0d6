//! The output of helpers: captured, cut into lines, kept, written to files, relayed, streamed.
//!
//! Each helper whose `output` is `capture` (the default) writes its standard output and error
//! into two pipes foster makes once for it and keeps for its whole life, across restarts: every
//! launch gets a copy of the write ends, so the helper's whole tree, grandchildren and adopted
//! orphans of earlier launches included, writes into the same two pipes and stays attributed to
//! it, and what a helper printed just before it exited is still in the pipe when foster reads.

mod capture;
mod file;
mod follow;
pub mod line;
mod relay;
pub mod ring;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;

pub use capture::{Capture, HelperOutput, Reopened, Report, start};
pub use follow::{Follower, Next};
pub use relay::{Format, Renderer, colour_for};

/// Lines a live follower may be behind before it loses the oldest (and is told how many).
pub const FOLLOW_RING: usize = 1024;

/// Where a helper's standard output and error go (`output` in the configuration).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Into foster's pipes: kept, logged, relayed (the default).
    #[default]
    Capture,
    /// foster's own standard output and error, as they are (for interactive use).
    Inherit,
    /// `/dev/null`.
    Null,
}

/// Which of a helper's two streams a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    /// `stdout` or `stderr`.
    pub fn name(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

/// One line of a helper's output (or one piece of a line longer than [`line::MAX_LINE`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// Counts every line of this supervisor from 1, all helpers together: the order lines
    /// were read in, and a gap a follower can see.
    pub seq: u64,
    /// The helper whose pipe it came through.
    pub helper: Arc<str>,
    pub stream: Stream,
    /// The pid of the helper's latest launch when foster read the line (`None` before its
    /// first): the helper's main process, not necessarily the line's writer, which may be any
    /// process of its tree (they share the pipe, which does not say who wrote).
    pub helper_pid: Option<i32>,
    /// [`Line::helper_pid`] as the PID namespace `foster run` was started in sees it, when the
    /// tree is contained (`None` otherwise, and on a line that came through the control
    /// socket): the pid its JSON form gives.
    pub outer_pid: Option<i32>,
    /// When foster read it, milliseconds since the Unix epoch (the events log's clock).
    pub ts_ms: u64,
    /// The line goes on in the next piece of the same helper and stream (it was longer than
    /// [`line::MAX_LINE`]).
    pub continued: bool,
    /// The line's bytes, newline excluded, exactly as written.
    pub bytes: Vec<u8>,
}

/// The lines cut from one read of one pipe: their bytes one after the other in one buffer,
/// and where each ends, so that a read costs no allocation per line (both are reused).
#[derive(Debug, Default)]
pub struct Batch {
    bytes: Vec<u8>,
    /// Each piece's end in `bytes` (its start is the previous one's end), and whether the
    /// next piece continues its line.
    ends: Vec<(usize, bool)>,
}

impl Batch {
    /// Adds a piece.
    pub fn push(&mut self, piece: &[u8], continued: bool) {
        self.bytes.extend_from_slice(piece);
        self.ends.push((self.bytes.len(), continued));
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The pieces' bytes one after the other (no newline between them).
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// How many pieces it holds.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Each piece's length, the last piece first.
    fn lens_from_last(&self) -> impl Iterator<Item = usize> {
        (0..self.ends.len()).rev().map(|k| {
            let start = if k == 0 { 0 } else { self.ends[k - 1].0 };
            self.ends[k].0 - start
        })
    }

    /// The pieces, in order: (bytes, continued).
    pub fn pieces(&self) -> impl Iterator<Item = (&[u8], bool)> {
        let mut start = 0;
        self.ends.iter().map(move |&(end, cont)| {
            let p = &self.bytes[start..end];
            start = end;
            (p, cont)
        })
    }

    /// Empties it, keeping its buffers (within a bound, after an unusually large read).
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
        if self.bytes.capacity() > 1 << 20 {
            self.bytes.shrink_to(1 << 20);
        }
    }
}

impl ring::Weigh for Arc<Line> {
    fn weight(&self) -> usize {
        self.bytes.len() + self.helper.len()
    }
}

/// The JSON form of a line (`--output json`): `version` ([`crate::base::json::VERSION`]), `helper`,
/// `stream`, `helper_pid` (the helper's main pid, see [`Line::helper_pid`]; null before its first
/// launch), `ts_ms`,
/// `text` (the bytes as UTF-8, each invalid sequence as U+FFFD), `text_escaped` when the bytes
/// are not valid UTF-8 (the exact bytes in [`crate::base::sanitize::escape`]'s lossless form, as
/// `foster tree --json` gives names), and `continued: true` on a piece that the next one
/// continues.
impl Serialize for Line {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let utf8 = std::str::from_utf8(&self.bytes).ok();
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("version", &crate::base::json::VERSION)?;
        m.serialize_entry("helper", &*self.helper)?;
        m.serialize_entry("stream", &self.stream)?;
        m.serialize_entry("helper_pid", &self.outer_pid.or(self.helper_pid))?;
        m.serialize_entry("ts_ms", &self.ts_ms)?;
        match utf8 {
            Some(t) => m.serialize_entry("text", t)?,
            None => {
                m.serialize_entry("text", &String::from_utf8_lossy(&self.bytes))?;
                m.serialize_entry("text_escaped", &crate::base::sanitize::escape(&self.bytes))?;
            }
        }
        if self.continued {
            m.serialize_entry("continued", &true)?;
        }
        m.end()
    }
}

/// The kept lines asked for, and a receiver of every line after them ([`Output::follow`]).
pub type Following = (Vec<Arc<Line>>, broadcast::Receiver<Arc<Line>>);

/// No helper of that name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no helper named {:?}", crate::base::sanitize::escape(.0.as_bytes()))]
pub struct UnknownHelper(pub String);

/// The kept lines of every helper and the live followers: shared by the reading thread, which
/// adds lines, and whoever shows them (the control socket, the dashboard).
///
/// One thread of its own reads every pipe (`capture.rs`: epoll, no timeout, so an idle helper
/// costs no wake-up), cuts the bytes into lines (`line.rs`, at most [`line::MAX_LINE`] a piece),
/// and for each line: keeps it in the helper's [`ring::Ring`] and sends it to the live
/// followers ([`Output`]), appends it to the helper's log file when one is configured
/// (`file.rs`: rotated by size through [`crate::base::logfile`], reopened on `ctl reopen-logs` and
/// SIGUSR1), and offers it to the relay (`relay.rs`), which writes `NAME | line` (or JSON) to
/// foster's standard output from a thread of its own.
///
/// **What is never lost, and what may be.** The ring, the files and the followers' broadcast
/// get every line. A slow disk slows the reading thread, and through the pipe the helper: a log
/// file is a record, and it waits for the disk as the helper would have. foster's own standard
/// output is a terminal or a pipe someone else reads: it must never stall the helpers, so the
/// relay takes lines through a bounded queue, and when the queue is full the line is not
/// relayed (it is still kept and written): the count of lines not relayed is reported per
/// helper as the `output_dropped` event, at most once a second while it goes on and once when
/// it ends. A follower that lags behind the broadcast gets back what the rings still keep of
/// what it missed, and is told how many lines are lost for it ([`Follower`], `follow.rs`).
/// `docs/output.md` is the reference.
#[derive(Debug)]
pub struct Output {
    kept: Mutex<Kept>,
    max_lines: usize,
    max_bytes: usize,
}

#[derive(Debug)]
struct Kept {
    seq: u64,
    /// Each helper's name, by its index (a reload may give an index to another helper).
    names: Vec<Arc<str>>,
    rings: Vec<ring::Ring<Arc<Line>>>,
    /// Lines read per helper since the start (kept or not): where a follower of some helpers
    /// stands ([`Follower`]).
    counts: Vec<u64>,
    /// `None` once [`Output::close`] ended every follower.
    tx: Option<broadcast::Sender<Arc<Line>>>,
    /// The pid of each helper's latest launch, and the outer one when contained.
    pids: Vec<(Option<i32>, Option<i32>)>,
    /// A line a ring let go that nobody else held: its allocations serve the next line.
    spare: Option<Arc<Line>>,
    /// Each helper's output is captured (`output = "capture"`): false for `null` and
    /// `inherit`, whose lines foster never sees.
    captured: Vec<bool>,
}

impl Output {
    /// Kept lines for these helpers (in configuration order), each ring within `max_lines`
    /// and `max_bytes`.
    pub fn new(names: &[&str], max_lines: usize, max_bytes: usize) -> Output {
        let (tx, _) = broadcast::channel(FOLLOW_RING);
        Output {
            max_lines,
            max_bytes,
            kept: Mutex::new(Kept {
                seq: 0,
                names: names.iter().map(|n| Arc::from(*n)).collect(),
                rings: names
                    .iter()
                    .map(|_| ring::Ring::new(max_lines, max_bytes))
                    .collect(),
                counts: vec![0; names.len()],
                pids: vec![(None, None); names.len()],
                captured: vec![true; names.len()],
                tx: Some(tx),
                spare: None,
            }),
        }
    }

    /// The helpers, by index: configuration order, then those a reload added (an index a
    /// reload gave no helper yet has an empty name).
    pub fn helpers(&self) -> Vec<Arc<str>> {
        self.lock().names.clone()
    }

    /// The position of `helper` in [`Output::helpers`].
    pub fn index(&self, helper: &str) -> Result<usize, UnknownHelper> {
        index_of(&self.lock(), helper)
    }

    /// Index `i` is helper `name`'s from now on, with no kept line and a ring within
    /// `bounds`: a helper a reload added (`i` past the last), or one that takes the index of a
    /// removed helper (or a changed one), whose kept lines go (and whose followers get nothing
    /// more).
    pub fn set(&self, i: usize, name: &str, bounds: ring::Bounds) {
        let mut g = self.lock();
        while g.names.len() <= i {
            g.names.push(Arc::from(""));
            g.rings
                .push(ring::Ring::new(self.max_lines, self.max_bytes));
            g.counts.push(0);
            g.pids.push((None, None));
            g.captured.push(true);
        }
        g.names[i] = Arc::from(name);
        g.captured[i] = true;
        g.pids[i] = (None, None);
        g.rings[i] = ring::Ring::within(bounds);
        g.counts[i] = 0;
    }

    /// Helper `i`'s output is not captured (`output = "null"` or `"inherit"`): foster keeps
    /// no line of it, which [`Output::captured`] says.
    pub fn not_captured(&self, i: usize) {
        if let Some(c) = self.lock().captured.get_mut(i) {
            *c = false;
        }
    }

    /// Whether `helper`'s output is captured (an unknown helper: [`UnknownHelper`]).
    pub fn captured(&self, helper: &str) -> Result<bool, UnknownHelper> {
        let g = self.lock();
        let i = index_of(&g, helper)?;
        Ok(g.captured.get(i).copied().unwrap_or(true))
    }

    /// Helper `i` was launched as `pid` (`outer` in the namespace `foster run` was started
    /// in, when contained): the lines read from now on carry it ([`Line::helper_pid`],
    /// [`Line::outer_pid`]).
    pub fn launched(&self, i: usize, pid: i32, outer: Option<i32>) {
        if let Some(p) = self.lock().pids.get_mut(i) {
            *p = (Some(pid), outer);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.kept.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every line from now on, of every helper, in the order read. Never blocks the reading
    /// thread: a receiver more than [`FOLLOW_RING`] lines behind loses the oldest and gets
    /// `RecvError::Lagged(n)`, the number it missed, then goes on from the oldest still held.
    /// Once [`Output::close`] has run, the receiver is closed from the start.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Line>> {
        subscribe(&self.lock())
    }

    /// The last `n` kept lines of `helper` (of every helper, merged in the order read, when
    /// `None`), oldest first.
    pub fn tail(&self, helper: Option<&str>, n: usize) -> Result<Vec<Arc<Line>>, UnknownHelper> {
        let only = helper.map(|h| self.index(h)).transpose()?;
        Ok(tail_of(&self.lock(), only, n))
    }

    /// [`Output::tail`] and [`Output::subscribe`] at one instant: no line is in both, none is
    /// missed between them (`ctl logs -n N -f`).
    pub fn follow(&self, helper: Option<&str>, n: usize) -> Result<Following, UnknownHelper> {
        let only = helper.map(|h| self.index(h)).transpose()?;
        let g = self.lock();
        Ok((tail_of(&g, only, n), subscribe(&g)))
    }

    /// Ends every follower once it has the lines sent so far (the supervisor's end); lines
    /// read afterwards are still kept, and [`Output::tail`] still answers.
    pub fn close(&self) {
        self.lock().tx = None;
    }

    /// Numbers the lines of `batch`, read for helper `i`, keeps them and sends them to the
    /// followers, all under one lock; the numbered lines are appended to `out` when given (a
    /// caller that writes the batch's bytes itself needs none). In a steady flow the lines the
    /// ring lets go are reused: no allocation per line.
    fn publish(
        &self,
        i: usize,
        stream: Stream,
        ts_ms: u64,
        batch: &Batch,
        mut out: Option<&mut Vec<Arc<Line>>>,
    ) {
        if batch.is_empty() {
            return;
        }
        let mut g = self.lock();
        let g = &mut *g;
        // Asked once for the lot: a follower subscribes under this same lock.
        let followed = g.tx.as_ref().is_some_and(|tx| tx.receiver_count() > 0);
        let first = if !followed && out.is_none() {
            g.count_unkept(i, batch)
        } else {
            0
        };
        for (bytes, continued) in batch.pieces().skip(first) {
            let line = g.next_line(i, stream, ts_ms, bytes, continued);
            if let Some(out) = out.as_deref_mut() {
                out.push(line.clone());
            }
            g.keep(i, line, followed);
        }
        if first > 0
            && let Some(gone) = g.rings[i].keep_last(batch.len() - first)
        {
            g.recycle(gone);
        }
    }
}

impl Kept {
    /// When nobody else takes the lines, those the ring would let go before `batch` (read for
    /// helper `i`) ends are only counted (a flood read in large pieces): the ring then keeps
    /// the batch's last lines alone, as it would have. How many lines were only counted.
    fn count_unkept(&mut self, i: usize, batch: &Batch) -> usize {
        let name = self.names[i].len();
        let keeps = self.rings[i].keeps(batch.lens_from_last().map(|n| n + name));
        if keeps >= batch.len() {
            return 0;
        }
        let first = batch.len() - keeps;
        self.seq += first as u64;
        self.counts[i] += first as u64;
        first
    }

    /// The next line of helper `i`, numbered: the spare's allocations serve it when they fit.
    fn next_line(
        &mut self,
        i: usize,
        stream: Stream,
        ts_ms: u64,
        bytes: &[u8],
        continued: bool,
    ) -> Arc<Line> {
        self.seq += 1;
        match self
            .spare
            .take()
            .and_then(|mut l| reuse(&mut l, bytes).then_some(l))
        {
            Some(mut l) => {
                let m = Arc::get_mut(&mut l).expect("a spare is held by nobody else");
                m.seq = self.seq;
                if !Arc::ptr_eq(&m.helper, &self.names[i]) {
                    m.helper = self.names[i].clone();
                }
                m.stream = stream;
                (m.helper_pid, m.outer_pid) = self.pids[i];
                m.ts_ms = ts_ms;
                m.continued = continued;
                m.bytes.clear();
                m.bytes.extend_from_slice(bytes);
                l
            }
            None => Arc::new(Line {
                seq: self.seq,
                helper: self.names[i].clone(),
                stream,
                helper_pid: self.pids[i].0,
                outer_pid: self.pids[i].1,
                ts_ms,
                continued,
                bytes: bytes.to_vec(),
            }),
        }
    }

    /// Counts `line` of helper `i`, sends it to the followers when `followed`, and keeps it.
    fn keep(&mut self, i: usize, line: Arc<Line>, followed: bool) {
        self.counts[i] += 1;
        if followed && let Some(tx) = &self.tx {
            let _ = tx.send(line.clone());
        }
        if let Some(gone) = self.rings[i].push(line) {
            self.recycle(gone);
        }
    }

    /// Keeps `gone`, a line a ring let go, as the spare when nobody else holds it.
    fn recycle(&mut self, gone: Arc<Line>) {
        if Arc::strong_count(&gone) == 1 {
            self.spare = Some(gone);
        }
    }
}

/// Whether `spare` may take `bytes`: nobody else holds it, and its buffer is large enough
/// without being much larger (a spare of a 64 KiB line does not carry 100-byte ones).
fn reuse(spare: &mut Arc<Line>, bytes: &[u8]) -> bool {
    let Some(l) = Arc::get_mut(spare) else {
        return false;
    };
    let cap = l.bytes.capacity();
    cap >= bytes.len() && cap <= 2 * bytes.len() + 256
}

/// The position of `helper` among the names (an empty name is no helper's).
fn index_of(g: &Kept, helper: &str) -> Result<usize, UnknownHelper> {
    g.names
        .iter()
        .position(|n| !n.is_empty() && &**n == helper)
        .ok_or_else(|| UnknownHelper(helper.to_string()))
}

/// A receiver of the lines sent from now on (closed at once after [`Output::close`]).
fn subscribe(g: &Kept) -> broadcast::Receiver<Arc<Line>> {
    match &g.tx {
        Some(tx) => tx.subscribe(),
        None => broadcast::channel(1).1,
    }
}

fn tail_of(g: &Kept, only: Option<usize>, n: usize) -> Vec<Arc<Line>> {
    match only {
        Some(i) => g.rings[i].tail(n).cloned().collect(),
        None => {
            // The last n of all rings, by sequence number.
            let mut all: BTreeMap<u64, &Arc<Line>> = BTreeMap::new();
            for r in &g.rings {
                for l in r.tail(n) {
                    all.insert(l.seq, l);
                    if all.len() > n {
                        all.pop_first();
                    }
                }
            }
            all.into_values().cloned().collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(v: &[&[u8]]) -> Batch {
        let mut b = Batch::default();
        for p in v {
            b.push(p, false);
        }
        b
    }

    #[test]
    fn tail_and_follow_see_each_line_once_in_order() {
        let o = Output::new(&["a", "b"], 3, 1 << 20);
        let mut out = Vec::new();
        o.publish(
            0,
            Stream::Stdout,
            1,
            &pieces(&[b"a1", b"a2"]),
            Some(&mut out),
        );
        o.publish(1, Stream::Stderr, 2, &pieces(&[b"b1"]), Some(&mut out));
        o.publish(
            0,
            Stream::Stdout,
            3,
            &pieces(&[b"a3", b"a4"]),
            Some(&mut out),
        );
        assert_eq!(out.len(), 5);
        let text = |v: &[Arc<Line>]| {
            v.iter()
                .map(|l| String::from_utf8_lossy(&l.bytes).into_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(text(&o.tail(Some("a"), 10).unwrap()), ["a2", "a3", "a4"]);
        assert_eq!(text(&o.tail(Some("b"), 10).unwrap()), ["b1"]);
        assert_eq!(text(&o.tail(None, 3).unwrap()), ["b1", "a3", "a4"]);
        assert_eq!(text(&o.tail(None, 10).unwrap()), ["a2", "b1", "a3", "a4"]);
        assert!(o.tail(Some("c"), 1).is_err());
        let (past, mut rx) = o.follow(Some("b"), 5).unwrap();
        assert_eq!(text(&past), ["b1"]);
        o.publish(1, Stream::Stdout, 4, &pieces(&[b"b2"]), Some(&mut out));
        let next = rx.try_recv().unwrap();
        assert_eq!((&*next.bytes, next.seq), (&b"b2"[..], 6));
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn lines_the_ring_lets_go_are_reused_but_never_one_still_held() {
        let o = Output::new(&["a"], 2, 1 << 20);
        let text = |o: &Output| {
            o.tail(Some("a"), 10)
                .unwrap()
                .iter()
                .map(|l| (l.seq, String::from_utf8_lossy(&l.bytes).into_owned()))
                .collect::<Vec<_>>()
        };
        let mut held = Vec::new();
        for (k, t) in ["one", "two", "three", "four!", "5", "six"]
            .iter()
            .enumerate()
        {
            let mut out = Vec::new();
            o.publish(
                0,
                Stream::Stdout,
                k as u64,
                &pieces(&[t.as_bytes()]),
                Some(&mut out),
            );
            if k == 1 {
                held = out; // "two" stays held by someone else
            }
        }
        assert_eq!(text(&o), [(5, "5".to_string()), (6, "six".to_string())]);
        assert_eq!((held[0].seq, &held[0].bytes[..]), (2, &b"two"[..]));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]

        /// Publishing with nobody taking the lines (so that those the ring would let go within
        /// a batch are only counted) keeps the same lines, numbered the same, as publishing
        /// each line; and counts the same.
        #[test]
        fn lines_only_counted_leave_the_ring_as_if_each_was_kept(
            batches in proptest::collection::vec(
                proptest::collection::vec((0usize..300, proptest::prelude::any::<bool>()), 0..40),
                0..12,
            ),
            max_lines in 0usize..20,
            max_bytes in 0usize..4000,
        ) {
            let counted = Output::new(&["a", "b"], max_lines, max_bytes);
            let each = Output::new(&["a", "b"], max_lines, max_bytes);
            let mut out = Vec::new();
            for (k, pieces) in batches.iter().enumerate() {
                let mut b = Batch::default();
                for (j, &(n, cont)) in pieces.iter().enumerate() {
                    b.push(&vec![b'a' + (j % 26) as u8; n], cont);
                }
                let (i, stream) = (k % 2, if k % 3 == 0 { Stream::Stderr } else { Stream::Stdout });
                counted.publish(i, stream, k as u64, &b, None);
                each.publish(i, stream, k as u64, &b, Some(&mut out));
                out.clear();
            }
            let kept = |o: &Output, h| {
                o.tail(Some(h), usize::MAX)
                    .unwrap()
                    .iter()
                    .map(|l| (l.seq, l.stream, l.ts_ms, l.continued, l.bytes.clone()))
                    .collect::<Vec<_>>()
            };
            for h in ["a", "b"] {
                proptest::prop_assert_eq!(kept(&counted, h), kept(&each, h));
            }
            let (c, e) = (counted.lock(), each.lock());
            proptest::prop_assert_eq!(&c.counts, &e.counts);
            proptest::prop_assert_eq!(c.seq, e.seq);
            for (rc, re) in c.rings.iter().zip(&e.rings) {
                proptest::prop_assert_eq!(rc.bytes(), re.bytes());
            }
        }
    }

    #[test]
    fn an_index_set_again_is_a_new_helper_with_no_kept_line() {
        let o = Output::new(&["a"], 3, 1 << 20);
        let mut out = Vec::new();
        o.publish(0, Stream::Stdout, 1, &pieces(&[b"a1"]), Some(&mut out));
        o.set(2, "c", ring::Bounds::default()); // past the end: index 1 is held empty
        o.set(0, "b", ring::Bounds::default()); // a removed helper's index to a new one
        assert_eq!(&*o.helpers()[0], "b");
        assert_eq!(o.helpers().len(), 3);
        assert!(o.tail(Some("a"), 5).is_err(), "a's name went with it");
        assert!(o.tail(Some(""), 5).is_err(), "an empty index is no helper");
        assert!(o.tail(Some("b"), 5).unwrap().is_empty(), "a's lines went");
        o.publish(2, Stream::Stderr, 2, &pieces(&[b"c1"]), Some(&mut out));
        assert_eq!(&*o.tail(Some("c"), 5).unwrap()[0].helper, "c");
    }

    #[test]
    fn json_keeps_the_bytes() {
        let line = Line {
            seq: 1,
            helper: Arc::from("web"),
            stream: Stream::Stderr,
            helper_pid: Some(42),
            outer_pid: None,
            ts_ms: 7,
            continued: true,
            bytes: b"a\x1b[31m\xff".to_vec(),
        };
        let v: serde_json::Value =
            serde_json::from_str(&crate::base::sanitize::to_json(&line).unwrap()).unwrap();
        assert_eq!(v["helper"], "web");
        assert_eq!(v["stream"], "stderr");
        assert_eq!(v["helper_pid"], 42);
        assert_eq!(v["ts_ms"], 7);
        assert_eq!(v["text"], "a\x1b[31m\u{fffd}");
        assert_eq!(v["text_escaped"], "a\\e[31m\\xff");
        assert_eq!(v["continued"], true);
        let plain = Line {
            continued: false,
            bytes: b"ok".to_vec(),
            ..line
        };
        let v = serde_json::to_value(&plain).unwrap();
        assert!(v.get("text_escaped").is_none() && v.get("continued").is_none());
        // Contained, the JSON names the helper by its pid outside.
        let outer = Line {
            outer_pid: Some(4242),
            ..plain
        };
        assert_eq!(serde_json::to_value(&outer).unwrap()["helper_pid"], 4242);
    }
}
