//! In-process cost of a tree scan, as the supervisor and the dashboard pay it: the first scan
//! (every `cmdline` read), then repeated scans (only `stat`, command lines from the cache), and
//! a scan without command lines; the first scan also on one thread only. Prints medians over
//! `RUNS` (default 50) scans.
//!
//! `cargo run --release --example bench_tree_scan [RUNS]`; `benches/tree.sh` runs it with its
//! processes started.

use std::time::{Duration, Instant};

use foster::tree::{ScanOptions, Scanner};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let runs: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(50);

    let mut single = Vec::new();
    for _ in 0..runs {
        let opts = ScanOptions {
            threads: 1,
            ..ScanOptions::default()
        };
        let mut s = Scanner::new(opts).expect("open /proc");
        let t = Instant::now();
        s.scan().expect("scan");
        single.push(t.elapsed());
    }
    let mut cold = Vec::new();
    let mut warm = Vec::new();
    let mut procs = 0;
    for _ in 0..runs {
        let mut s = Scanner::new(ScanOptions::default()).expect("open /proc");
        let t = Instant::now();
        let snap = s.scan().expect("scan");
        cold.push(t.elapsed());
        procs = snap.len();
        let t = Instant::now();
        let again = s.scan().expect("scan");
        warm.push(t.elapsed());
        assert!(again.stats.cmdline_reads <= snap.stats.cmdline_reads);
    }
    let mut bare = Vec::new();
    let mut s = Scanner::new(ScanOptions {
        cmdline: false,
        ..ScanOptions::default()
    })
    .unwrap();
    for _ in 0..runs {
        let t = Instant::now();
        s.scan().expect("scan");
        bare.push(t.elapsed());
    }
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!("processes: {procs}, runs: {runs} (medians)");
    println!(
        "first scan, stat + cmdline of every process: {:.2} ms",
        ms(median(cold))
    );
    println!(
        "the same on one thread:                      {:.2} ms",
        ms(median(single))
    );
    println!(
        "repeated scan, stat + cached cmdline:        {:.2} ms",
        ms(median(warm))
    );
    println!(
        "scan without cmdline (stat only):            {:.2} ms",
        ms(median(bare))
    );
}
