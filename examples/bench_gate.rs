//! Benchmark of the startup gate (issue 3), printed side by side:
//!
//! 1. spawn-and-exec of `/bin/true`: a gated launch through `foster::gate::spawner::Spawner` against a
//!    plain `std::process::Command::spawn` (goal: gated median at most 1.3x the plain one). Only
//!    the launch is timed (until exec succeeded); reaping is outside the timed region.
//! 2. time from SIGKILL of a supervisor to its helper's exit: a helper launched through the gate
//!    against a bare helper whose `pre_exec` only calls `prctl(PR_SET_PDEATHSIG)` (goal: gated
//!    p99 at most 1.2x the bare p99). The benchmark is the helpers' subreaper; the supervisor is
//!    this binary re-executed; the exit is observed on a pidfd of the helper.
//!
//! Run: `cargo run --release --example bench_gate [-- ITERATIONS]` (default 400).

use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use foster::gate::policy::Policy;
use foster::gate::spawner::{LaunchSpec, Spawner};
use foster::process::identity::{pidfd_open, poll_readable};

fn reap(pid: i32) {
    let mut st = 0;
    // SAFETY: waits for one pid of our own.
    unsafe { libc::waitpid(pid, &mut st, 0) };
}

/// Median, p99 and minimum (the least disturbed launch, on a loaded machine).
fn stats(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let q = |p: f64| v[((v.len() as f64 - 1.0) * p).round() as usize];
    (q(0.5), q(0.99), v[0])
}

/// Role `supervisor gated|bare`: launches `sleep 60` as its helper, prints its pid, then waits
/// on standard input until it is killed.
fn supervisor(kind: &str) {
    let pid = if kind == "gated" {
        let sp = Spawner::start().expect("spawner");
        let l = sp
            .launch(LaunchSpec::new("/bin/sleep", ["60"], Policy::term()))
            .expect("launch");
        std::mem::forget(l.pidfd);
        std::mem::forget(sp);
        l.pid
    } else {
        let mut c = Command::new("/bin/sleep");
        c.arg("60");
        // SAFETY: prctl only: async-signal-safe.
        unsafe {
            c.pre_exec(|| {
                if libc::prctl(
                    libc::PR_SET_PDEATHSIG,
                    libc::SIGTERM as libc::c_ulong,
                    0,
                    0,
                    0,
                ) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = c.spawn().expect("spawn");
        let pid = child.id() as i32;
        std::mem::forget(child);
        pid
    };
    println!("{pid}");
    std::io::stdout().flush().unwrap();
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    std::thread::sleep(Duration::from_secs(3600));
}

/// One supervisor death: returns microseconds from SIGKILL to the helper's exit.
fn death_once(kind: &str) -> f64 {
    let exe = std::env::current_exe().unwrap();
    let mut sup = Command::new(exe)
        .args(["supervisor", kind])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("supervisor");
    let mut out = BufReader::new(sup.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let helper: i32 = line.trim().parse().expect("helper pid");
    let pidfd = pidfd_open(helper).expect("pidfd of the helper");
    let t0 = Instant::now();
    sup.kill().unwrap();
    assert!(
        poll_readable(pidfd.as_raw_fd(), Some(Duration::from_secs(10))),
        "helper survived"
    );
    let us = t0.elapsed().as_secs_f64() * 1e6;
    sup.wait().unwrap();
    reap(helper); // adopted by this subreaper
    us
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("supervisor") {
        supervisor(&args[2]);
        return;
    }
    let n: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(400);
    // SAFETY: prctl with integers: this benchmark adopts the orphaned helpers.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };

    // Part 2 first, while this process has a single thread.
    let (mut bare, mut gated) = (Vec::new(), Vec::new());
    let deaths = (n / 2).max(20);
    for _ in 0..deaths {
        bare.push(death_once("bare"));
        gated.push(death_once("gated"));
    }

    // Part 1.
    let sp = Spawner::start().expect("spawner");
    let (mut plain, mut gate) = (Vec::new(), Vec::new());
    let (mut plain_e2e, mut gate_e2e) = (Vec::new(), Vec::new());
    let spec = || LaunchSpec::new("/bin/true", Vec::<String>::new(), Policy::term());
    for i in 0..n + 20 {
        let t = Instant::now();
        let c = Command::new("/bin/true").spawn().expect("spawn");
        let a = t.elapsed().as_secs_f64() * 1e6;
        let pid = c.id() as i32;
        drop(c);
        reap(pid);
        let a2 = t.elapsed().as_secs_f64() * 1e6;
        let t = Instant::now();
        let l = sp.launch(spec()).expect("launch");
        let b = t.elapsed().as_secs_f64() * 1e6;
        reap(l.pid);
        let b2 = t.elapsed().as_secs_f64() * 1e6;
        if i >= 20 {
            plain.push(a);
            gate.push(b);
            plain_e2e.push(a2);
            gate_e2e.push(b2);
        }
    }

    let row = |name: &str, (m, p, lo): (f64, f64, f64)| {
        println!("  {name:32} {m:>10.1} {p:>10.1} {lo:>10.1}")
    };
    let head = || println!("  {:32} {:>10} {:>10} {:>10}", "", "median", "p99", "min");
    // Each gated launch against the plain one just before it: a load that comes and goes
    // moves both, and the median of these ratios stays where the medians above swing.
    let paired: Vec<f64> = gate.iter().zip(&plain).map(|(g, p)| g / p).collect();
    let (pair_median, _, _) = stats(paired);
    let (plain, gate) = (stats(plain), stats(gate));
    println!("launch of /bin/true until the launcher returns, {n} launches each (µs)");
    head();
    row("std::process::Command::spawn", plain);
    row("Spawner::launch (gated)", gate);
    println!(
        "  ratio gated/plain (median): {:.2}x   goal <= 1.3x   (min: {:.2}x)",
        gate.0 / plain.0,
        gate.2 / plain.2
    );
    println!(
        "  median of the paired ratios (each launch against the plain one before it): {pair_median:.2}x"
    );
    let (plain_e2e, gate_e2e) = (stats(plain_e2e), stats(gate_e2e));
    println!();
    println!("spawn, run and reap of /bin/true (µs)");
    head();
    row("std::process::Command::spawn", plain_e2e);
    row("Spawner::launch (gated)", gate_e2e);
    println!(
        "  ratio gated/plain (median): {:.2}x   goal <= 1.3x",
        gate_e2e.0 / plain_e2e.0
    );
    let (bm, b99, _) = stats(bare);
    let (dm, d99, _) = stats(gated);
    println!();
    println!("SIGKILL of the supervisor -> helper exit, {deaths} deaths each (µs)");
    println!("  {:32} {:>10} {:>10}", "", "median", "p99");
    println!(
        "  {:32} {:>10.1} {:>10.1}",
        "bare prctl-only helper", bm, b99
    );
    println!(
        "  {:32} {:>10.1} {:>10.1}",
        "gated helper (Spawner)", dm, d99
    );
    println!("  ratio gated/bare (p99): {:.2}x   goal <= 1.2x", d99 / b99);
}
