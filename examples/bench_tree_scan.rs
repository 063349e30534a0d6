//! In-process cost of a tree scan, as the supervisor and the dashboard pay it: the first scan
//! (every `cmdline` read), then repeated scans (only `stat`, command lines from the cache), and
//! a scan without command lines; the first scan also on one thread only. Prints medians over
//! `RUNS` (default 50) scans. Then the parsing of `stat` alone, apart from the kernel's work:
//! every process's `stat` read once into memory, then parsed `RUNS` times by `procfs`'s
//! `Stat` (what the scanner uses) and by the allocation-free hand parser (what the gate uses);
//! and the dashboard's scan (one thread, cached command lines) with and without reading each
//! process's owner, alternated, in the thread's CPU time.
//!
//! `cargo run --release --example bench_tree_scan [RUNS]`; `benches/tree.sh` runs it with its
//! processes started.

use std::time::{Duration, Instant};

use foster::process::procstat::StatFields;
use foster::process::tree::{ScanOptions, Scanner};
use procfs::FromRead;
use procfs::process::Stat;

/// This thread's CPU time.
fn cpu_now() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes one timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

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
    // The dashboard's scan (one thread, command lines from the cache) with and without the
    // owner's `fstat`, alternated scan by scan; the thread's CPU time.
    let dashboard = |uid: bool| {
        let mut s = Scanner::new(ScanOptions {
            threads: 1,
            uid,
            ..ScanOptions::default()
        })
        .unwrap();
        s.scan().expect("scan");
        s
    };
    let (mut with_uid, mut without_uid) = (dashboard(true), dashboard(false));
    let (mut owner, mut no_owner) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        for (s, times) in [
            (&mut with_uid, &mut owner),
            (&mut without_uid, &mut no_owner),
        ] {
            let t = cpu_now();
            s.scan().expect("scan");
            times.push(cpu_now() - t);
        }
    }
    // Parsing alone, on the bytes of every process's stat file.
    let lines: Vec<Vec<u8>> = std::fs::read_dir("/proc")
        .expect("list /proc")
        .flatten()
        .filter(|e| {
            e.file_name()
                .as_encoded_bytes()
                .iter()
                .all(u8::is_ascii_digit)
        })
        .filter_map(|e| std::fs::read(e.path().join("stat")).ok())
        .collect();
    let pass = |f: &dyn Fn(&[u8]) -> bool| {
        let mut times = Vec::with_capacity(runs);
        for _ in 0..runs {
            let t = Instant::now();
            let ok = lines.iter().filter(|l| f(std::hint::black_box(l))).count();
            times.push(t.elapsed());
            assert_eq!(ok, lines.len(), "every stat line parses");
        }
        median(times)
    };
    let hand = pass(&|l| StatFields::parse(l).is_ok());
    let library = pass(&|l| Stat::from_read(l).is_ok());
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
    println!(
        "one thread, cached cmdline, with owner (fstat): {:.2} ms of CPU",
        ms(median(owner))
    );
    println!(
        "the same without the owner (the dashboard's):  {:.2} ms of CPU",
        ms(median(no_owner))
    );
    let per = |d: Duration| d.as_secs_f64() * 1e9 / lines.len().max(1) as f64;
    println!(
        "parsing alone, {} stat lines, procfs Stat:   {:.3} ms ({:.0} ns a line)",
        lines.len(),
        ms(library),
        per(library)
    );
    println!(
        "parsing alone, the hand parser (gate's):     {:.3} ms ({:.0} ns a line)",
        ms(hand),
        per(hand)
    );
}
