//! The recent CPU and memory of every process shown, for the selected process's sparklines.
//!
//! Owns [`History`]: one bounded ring of points per identity (pid and start time), fed from the
//! models the dashboard builds anyway (no reading of its own), one point per refresh; a ring is
//! dropped when its process leaves the model, and the total number of points is bounded
//! ([`BUDGET`]: the rings shorten when there are many processes). A helper's own process
//! (attached) records its whole tree: the sum over its subtree. [`History::levels`] gives what
//! a sparkline draws, quantized as drawn, so an unchanged picture compares equal. [`Machine`]:
//! the whole machine's CPU and memory use, one point per reading of the meters.

use std::collections::VecDeque;

use rustc_hash::{FxHashMap, FxHashSet};

use crate::process::identity::Identity;
use crate::top::model::Model;

/// Points kept per process at most: 3 minutes at the default 1 s interval.
pub const HISTORY_LEN: usize = 180;

/// Points kept across all processes at most (8 bytes each).
pub const BUDGET: usize = 1_000_000;

/// One refresh of one process: CPU in tenths of a percent of one core, resident memory in KiB.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Point {
    pub cpu_tenths: u16,
    pub rss_kib: u32,
}

#[derive(Debug)]
struct Ring {
    points: VecDeque<Point>,
    /// The recording that last saw its process.
    seen: u64,
}

/// What a sparkline pair draws for one process, newest first, each value 0 to 8 (eighths of
/// the height), with the oldest zeros left out (they draw nothing); and the latest values.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Levels {
    pub cpu: Vec<u8>,
    pub mem: Vec<u8>,
    /// Points recorded, and the seconds they span.
    pub points: usize,
    pub span_secs: u64,
    /// The latest CPU in tenths of a percent, and memory in KiB.
    pub last: Point,
    /// The whole tree of a helper.
    pub tree: bool,
}

/// Per-process rings of recent CPU and memory.
#[derive(Debug, Default)]
pub struct History {
    rings: FxHashMap<Identity, Ring>,
    /// The clock ticks of each recording, newest last (as many as the longest ring).
    times: VecDeque<u64>,
    recordings: u64,
    hz: u64,
    /// Identities whose ring holds their tree's sum (helpers' own processes).
    trees: FxHashSet<Identity>,
}

impl History {
    pub fn new() -> History {
        History::default()
    }

    /// The points each ring keeps with `n` processes.
    pub fn capacity(n: usize) -> usize {
        (BUDGET / n.max(1)).clamp(2, HISTORY_LEN)
    }

    /// The number of processes with a ring.
    pub fn len(&self) -> usize {
        self.rings.len()
    }

    /// Whether no process has a ring.
    pub fn is_empty(&self) -> bool {
        self.rings.is_empty()
    }

    /// Records one point per live process of `model`; nothing when the model is less than a
    /// quarter of a second newer than the last recording (a reading pushed by an event), so a
    /// point stands for one refresh.
    pub fn record(&mut self, model: &Model) {
        let hz = model.hz.max(1);
        if let Some(&last) = self.times.back()
            && model.now_ticks < last + (hz / 4).max(1)
            && model.now_ticks >= last
        {
            return;
        }
        self.hz = hz;
        self.recordings += 1;
        let cap = History::capacity(model.len());
        let now = self.recordings;
        self.trees.clear();
        for n in model.nodes.values().filter(|n| !n.exited && !n.vacant()) {
            let id = n.info.id;
            let helper_tree = n
                .info
                .supervision
                .as_ref()
                .is_some_and(|s| s.helper_state.is_some());
            let (cpu, rss) = if helper_tree {
                self.trees.insert(id);
                model
                    .subtree(id)
                    .iter()
                    .filter_map(|i| model.nodes.get(i))
                    .filter(|n| !n.exited)
                    .fold((0.0, 0u64), |(c, r), n| {
                        (c + n.cpu_pct.unwrap_or(0.0), r + n.info.rss_bytes)
                    })
            } else {
                (n.cpu_pct.unwrap_or(0.0), n.info.rss_bytes)
            };
            let p = Point {
                cpu_tenths: (cpu * 10.0).round().clamp(0.0, u16::MAX as f64) as u16,
                rss_kib: (rss / 1024).min(u32::MAX as u64) as u32,
            };
            let ring = self.rings.entry(id).or_insert_with(|| Ring {
                points: VecDeque::new(),
                seen: now,
            });
            ring.seen = now;
            ring.points.push_back(p);
            while ring.points.len() > cap {
                ring.points.pop_front();
            }
        }
        self.rings.retain(|_, r| r.seen == now);
        self.times.push_back(model.now_ticks);
        while self.times.len() > cap {
            self.times.pop_front();
        }
    }

    /// The points of `id`, oldest first.
    pub fn points(&self, id: Identity) -> Option<&VecDeque<Point>> {
        self.rings.get(&id).map(|r| &r.points)
    }

    /// What the sparklines of `id` draw: CPU against 100% of a core (or the highest point when
    /// higher), memory above its lowest point in the window, against the range or a sixteenth
    /// of its highest point, whichever is larger (so a few pages more or less draw nothing).
    pub fn levels(&self, id: Identity) -> Option<Levels> {
        let pts = self.points(id)?;
        let last = *pts.back()?;
        let cpu_max = pts
            .iter()
            .map(|p| p.cpu_tenths)
            .max()
            .unwrap_or(0)
            .max(1000) as u64;
        let lo = pts.iter().map(|p| p.rss_kib).min().unwrap_or(0) as u64;
        let hi = pts.iter().map(|p| p.rss_kib).max().unwrap_or(0) as u64;
        let mem_scale = (hi - lo).max(hi / 16).max(1);
        let level = |v: u64, max: u64| ((v * 8 + max / 2) / max).min(8) as u8;
        let trim = |mut v: Vec<u8>| {
            while v.last() == Some(&0) {
                v.pop();
            }
            v
        };
        let cpu = trim(
            pts.iter()
                .rev()
                .map(|p| level(p.cpu_tenths as u64, cpu_max))
                .collect(),
        );
        let mem = trim(
            pts.iter()
                .rev()
                .map(|p| level(p.rss_kib as u64 - lo, mem_scale))
                .collect(),
        );
        let first = self.times.len().saturating_sub(pts.len());
        let span_ticks = match (self.times.get(first), self.times.back()) {
            (Some(a), Some(b)) => b.saturating_sub(*a),
            _ => 0,
        };
        Some(Levels {
            cpu,
            mem,
            points: pts.len(),
            span_secs: span_ticks / self.hz.max(1),
            last,
            tree: self.trees.contains(&id),
        })
    }
}

/// Points the machine's history keeps: more than the widest graph draws.
pub const MACHINE_LEN: usize = 400;

/// The whole machine's CPU and memory use, in whole percent, one point per reading of the
/// meters (no reading of its own), newest last.
#[derive(Clone, Debug, Default)]
pub struct Machine {
    points: VecDeque<(u8, u8)>,
}

/// A percent as a sparkline's level (0 to 8): anything above 0 shows.
fn level(pct: u8) -> u8 {
    match pct {
        0 => 0,
        p => ((p.min(100) as u16 * 8).div_ceil(100)) as u8,
    }
}

impl Machine {
    /// Adds a reading's busy CPU and memory used, in percent.
    pub fn record(&mut self, cpu: u8, mem: u8) {
        if self.points.len() == MACHINE_LEN {
            self.points.pop_front();
        }
        self.points.push_back((cpu, mem));
    }

    /// How many points it holds.
    pub fn len(&self) -> usize {
        self.points.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// The CPU's and the memory's levels (0 to 8), newest first, at most `n` of each.
    pub fn levels(&self, n: usize) -> (Vec<u8>, Vec<u8>) {
        let newest = self.points.iter().rev().take(n);
        newest.map(|(c, m)| (level(*c), level(*m))).unzip()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::top::model::{ProcInfo, Sample, Tracker};

    fn proc(pid: i32, parent: Option<i32>, ticks: u64, rss: u64) -> ProcInfo {
        ProcInfo {
            cpu_ticks: ticks,
            rss_bytes: rss,
            ..ProcInfo::fixture(pid, parent)
        }
    }

    fn model(t: &mut Tracker, now: u64, procs: Vec<ProcInfo>) -> Model {
        t.update(Sample {
            now_ticks: now,
            hz: 100,
            procs,
            ..Sample::default()
        })
    }

    #[test]
    fn one_point_per_refresh_dropped_with_the_process() {
        let mut t = Tracker::new();
        let mut h = History::new();
        let one = Identity {
            pid: 1,
            start_time: 1001,
        };
        // 1: 50% of a core each second; 2: idle, then gone.
        for (i, now) in [1000u64, 1100, 1200].into_iter().enumerate() {
            let m = model(
                &mut t,
                now,
                vec![
                    proc(1, None, 50 * i as u64, 8 << 20),
                    proc(2, Some(1), 0, 1 << 20),
                ],
            );
            h.record(&m);
            // A reading pushed 20 ms later records nothing.
            h.record(&model(
                &mut t,
                now + 2,
                vec![
                    proc(1, None, 50 * i as u64, 8 << 20),
                    proc(2, Some(1), 0, 1 << 20),
                ],
            ));
        }
        let p = h.points(one).unwrap();
        assert_eq!(p.len(), 3);
        assert_eq!(p.back().unwrap().cpu_tenths, 500);
        assert_eq!(p.back().unwrap().rss_kib, 8192);
        let l = h.levels(one).unwrap();
        assert_eq!(
            l.cpu,
            vec![4, 4],
            "newest first, the first reading's unknown 0 left out"
        );
        assert!(l.mem.is_empty(), "flat memory draws nothing");
        assert_eq!(l.span_secs, 2);
        h.record(&model(&mut t, 1300, vec![proc(1, None, 200, 8 << 20)]));
        assert_eq!(h.len(), 1, "the ring of a process gone is dropped");
    }

    #[test]
    fn rings_are_bounded_and_shorten_with_many_processes() {
        assert_eq!(History::capacity(10), HISTORY_LEN);
        assert_eq!(History::capacity(100_000), BUDGET / 100_000);
        assert_eq!(History::capacity(10_000_000), 2);
        let mut t = Tracker::new();
        let mut h = History::new();
        for i in 0..(HISTORY_LEN as u64 + 20) {
            h.record(&model(&mut t, 1000 + i * 100, vec![proc(1, None, i, 4096)]));
        }
        let one = Identity {
            pid: 1,
            start_time: 1001,
        };
        assert_eq!(h.points(one).unwrap().len(), HISTORY_LEN);
        assert_eq!(h.times.len(), HISTORY_LEN);
    }

    #[test]
    fn the_machines_ring_is_bounded_newest_first_and_shows_any_use() {
        let mut m = Machine::default();
        for i in 0..MACHINE_LEN + 10 {
            m.record((i % 101) as u8, 50);
        }
        assert_eq!(m.len(), MACHINE_LEN);
        m.record(0, 100);
        m.record(1, 0);
        let (cpu, mem) = m.levels(3);
        assert_eq!(cpu, vec![1, 0, level(((MACHINE_LEN + 9) % 101) as u8)]);
        assert_eq!(mem, vec![0, 8, 4]);
        assert_eq!(level(100), 8);
        assert_eq!(level(13), 2);
    }
}
