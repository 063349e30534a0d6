//! Helpers and the latency driver of the container-init benchmark (`benches/init.sh`).
//!
//! - `bench_init storm N CODE`: PROGRAM of the orphan storm. Makes N orphans (double fork) that
//!   all end at once when a pipe closes, waits until each one has been reaped by whoever
//!   adopted it (`kill(pid, 0)` fails with ESRCH: not even a zombie is left), exits CODE.
//! - `bench_init receiver`: PROGRAM of the latency run. Blocks SIGUSR1, says `ready`, and for
//!   every SIGUSR1 writes the CLOCK_MONOTONIC time it took it, in nanoseconds, one per line.
//! - `bench_init latency ROUNDS INIT [ARGS...]`: starts `unshare --pid --fork --mount-proc INIT
//!   ARGS... -- bench_init receiver`, then ROUNDS times sends SIGUSR1 to the init (PID 1 of the
//!   namespace) and reads when PROGRAM took it; prints the median and the 99th percentile of
//!   the forwarding latency in microseconds.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes a timespec on the stack.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("storm") => storm(args[2].parse().unwrap(), args[3].parse().unwrap()),
        Some("receiver") => receiver(),
        Some("latency") => latency(args[2].parse().unwrap(), &args[3..]),
        _ => {
            eprintln!("usage: bench_init storm N CODE | receiver | latency ROUNDS INIT [ARGS...]");
            std::process::exit(2);
        }
    }
}

fn storm(n: usize, code: i32) {
    let (rel_r, rel_w) = nix::unistd::pipe().unwrap();
    let (pid_r, pid_w) = nix::unistd::pipe().unwrap();
    let (rr, rw, pw) = (rel_r.as_raw_fd(), rel_w.as_raw_fd(), pid_w.as_raw_fd());
    for _ in 0..n {
        // SAFETY: the children call only async-signal-safe functions.
        unsafe {
            let c = libc::fork();
            assert!(c >= 0, "fork");
            if c == 0 {
                let g = libc::fork();
                if g == 0 {
                    libc::close(rw);
                    libc::close(pw);
                    let mut b = 0u8;
                    libc::read(rr, (&mut b as *mut u8).cast(), 1);
                    libc::_exit(0);
                }
                let b = g.to_ne_bytes();
                libc::write(pw, b.as_ptr().cast(), 4);
                libc::_exit(0);
            }
            let mut st = 0;
            libc::waitpid(c, &mut st, 0); // our own child: not an orphan
        }
    }
    drop(pid_w);
    drop(rel_r);
    let mut pids = Vec::with_capacity(n);
    let mut f = std::fs::File::from(pid_r);
    let mut b = [0u8; 4];
    while f.read_exact(&mut b).is_ok() {
        pids.push(i32::from_ne_bytes(b));
    }
    drop(rel_w); // every orphan ends now
    let deadline = Instant::now() + Duration::from_secs(120);
    for &p in &pids {
        // SAFETY: signal 0 only tests existence.
        while unsafe { libc::kill(p, 0) } == 0 {
            if Instant::now() > deadline {
                eprintln!("orphan {p} never reaped");
                std::process::exit(1);
            }
            std::thread::yield_now();
        }
    }
    std::process::exit(code);
}

fn receiver() {
    // SAFETY: sigset operations on the stack.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGUSR1);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        let mut out = std::io::stdout().lock();
        writeln!(out, "ready").unwrap();
        out.flush().unwrap();
        loop {
            if libc::sigwaitinfo(&set, std::ptr::null_mut()) == libc::SIGUSR1 {
                writeln!(out, "{}", now_ns()).unwrap();
                out.flush().unwrap();
            }
        }
    }
}

fn latency(rounds: usize, init: &[String]) {
    let me = std::env::current_exe().unwrap();
    let mut child = Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc"])
        .args(init)
        .arg("--")
        .arg(&me)
        .arg("receiver")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap());
    let mut l = String::new();
    lines.read_line(&mut l).unwrap();
    assert_eq!(l.trim(), "ready");
    // The init is unshare's only child.
    let unshare = child.id() as i32;
    let init_pid = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .find(|&p| {
            std::fs::read(format!("/proc/{p}/stat"))
                .ok()
                .and_then(|s| {
                    foster::process::procstat::StatFields::parse(&s)
                        .ok()
                        .map(|f| f.ppid == unshare)
                })
                .unwrap_or(false)
        })
        .expect("the init under unshare");
    let mut us = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t0 = now_ns();
        // SAFETY: kill with integers.
        unsafe { libc::kill(init_pid, libc::SIGUSR1) };
        l.clear();
        lines.read_line(&mut l).unwrap();
        let t1: u64 = l.trim().parse().unwrap();
        us.push((t1.saturating_sub(t0)) as f64 / 1000.0);
    }
    // SAFETY: kill with integers; the namespace ends with its init.
    unsafe { libc::kill(init_pid, libc::SIGKILL) };
    let _ = child.wait();
    us.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let median = us[us.len() / 2];
    let p99 = us[(us.len() * 99 / 100).min(us.len() - 1)];
    println!(
        "{}: signal forwarding latency over {rounds} rounds: median {median:.1} us, p99 {p99:.1} us",
        init[0]
    );
}
