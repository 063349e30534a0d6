//! The scanner's reuse of what it read of a process that has not run since its previous scan
//! ([`ScanOptions::reuse_idle`]), on real processes: a sleeping process keeps its reading and a
//! busy one is read again; an orphan shows its new parent in the very scan that sees its
//! parent leave; what another process changes in a sleeping one (its process group, set by its
//! parent) shows within `reuse_idle` scans. Every process started here is killed and reaped by
//! pid; a process is known to sleep from its state in `/proc`, never from a delay.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use foster::process::tree::{ScanOptions, Scanner};

use crate::common;

/// A scanner that reuses readings; `None` (said) where the kernel's `schedstat` gives no run
/// times.
fn reusing_scanner(reuse_idle: u64) -> Option<Scanner> {
    let s = Scanner::new(ScanOptions {
        threads: 1,
        reuse_idle,
        ..ScanOptions::default()
    })
    .unwrap();
    if !s.reusing() {
        common::skip::host("this kernel's schedstat gives no run times");
        return None;
    }
    Some(s)
}

/// Never due for its periodic reading.
const NEVER: u64 = u64::MAX / 2;

/// Waits, within 10 s, until `pid` sleeps (state `S`): from then on it runs only when woken.
fn wait_asleep(pid: i32) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let stat = std::fs::read(format!("/proc/{pid}/stat")).unwrap();
        let after = stat.iter().rposition(|&b| b == b')').unwrap();
        if stat[after + 2] == b'S' {
            return;
        }
        assert!(Instant::now() < deadline, "pid {pid} never slept");
        std::thread::yield_now();
    }
}

/// Kills and reaps a child on drop.
struct Guard(std::process::Child);
impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// SIGKILLs a pid that is not this process's child on drop, and checks it is gone.
struct Orphan(i32);
impl Drop for Orphan {
    fn drop(&mut self) {
        // SAFETY: a plain kill of a pid this test started.
        unsafe { libc::kill(self.0, libc::SIGKILL) };
    }
}

#[test]
fn a_sleeping_process_keeps_its_reading_and_a_busy_one_is_read_again() {
    let Some(mut scanner) = reusing_scanner(NEVER) else {
        return;
    };
    let idle = Guard(
        Command::new("cat")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let busy = Guard(
        Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .unwrap(),
    );
    let (idle_pid, busy_pid) = (idle.0.id() as i32, busy.0.id() as i32);
    wait_asleep(idle_pid);
    let pids = [idle_pid, busy_pid];
    let first = scanner.scan_pids(&pids);
    assert_eq!(first.stats.reused, 0, "{:?}", first.stats);
    let second = scanner.scan_pids(&pids);
    assert_eq!(
        second.stats.reused, 1,
        "the sleeping cat's reading stands, the busy shell is read: {:?}",
        second.stats
    );
    let id = |s: &foster::process::tree::Snapshot, pid| {
        s.nodes()
            .find(|n| n.pid == pid)
            .cloned()
            .unwrap_or_else(|| panic!("pid {pid} not in the scan"))
    };
    let (a, b) = (id(&first, idle_pid), id(&second, idle_pid));
    assert_eq!(
        (
            a.identity,
            a.ppid,
            a.state,
            a.comm,
            a.cmdline.to_vec(),
            a.cpu_ticks,
            a.rss_bytes
        ),
        (
            b.identity,
            b.ppid,
            b.state,
            b.comm,
            b.cmdline.to_vec(),
            b.cpu_ticks,
            b.rss_bytes
        )
    );
    // The busy shell's time moves: the next scan reads it again.
    let third = scanner.scan_pids(&pids);
    assert_eq!(third.stats.reused, 1, "{:?}", third.stats);
    assert_eq!(id(&third, busy_pid).state, b'R');
}

#[test]
fn an_orphan_shows_its_new_parent_in_the_scan_that_sees_its_parent_leave() {
    let Some(mut scanner) = reusing_scanner(NEVER) else {
        return;
    };
    // P starts C (a sleep), names it, and waits on its standard input.
    let mut p = Guard(
        Command::new("sh")
            .args(["-c", "sleep 1000 & echo $!; read x"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut line = String::new();
    BufReader::new(p.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let c: i32 = line.trim().parse().unwrap();
    let _c = Orphan(c);
    let p_pid = p.0.id() as i32;
    wait_asleep(p_pid);
    wait_asleep(c);
    let pids = [p_pid, c];
    scanner.scan_pids(&pids);
    let second = scanner.scan_pids(&pids);
    assert_eq!(second.stats.reused, 2, "both sleep: {:?}", second.stats);
    // P leaves: its input closes, it exits and is reaped here; C, asleep, is handed to a
    // reaper without running.
    drop(p.0.stdin.take());
    p.0.wait().unwrap();
    let third = scanner.scan_pids(&pids);
    let seen = third.nodes().find(|n| n.pid == c).expect("C in the scan");
    let truth = common::process(c).expect("C alive");
    assert_ne!(truth.ppid, p_pid);
    assert_eq!(
        seen.ppid, truth.ppid,
        "the orphan's parent as the kernel says it, in the scan that saw P leave"
    );
    assert!(third.nodes().all(|n| n.pid != p_pid));
}

#[test]
fn what_its_parent_changes_in_a_sleeping_process_shows_within_reuse_idle_scans() {
    const EVERY: u64 = 3;
    let Some(mut scanner) = reusing_scanner(EVERY) else {
        return;
    };
    let mut fds = [0; 2];
    // SAFETY: valid array of two ints.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    let (r, w) = (fds[0], fds[1]);
    // SAFETY: the child makes raw system calls only (read, _exit) and never returns.
    let child = unsafe { libc::fork() };
    assert!(child >= 0, "fork");
    if child == 0 {
        let mut b = 0u8;
        // SAFETY: raw syscalls in the forked child.
        unsafe {
            libc::close(w);
            libc::read(r, (&mut b as *mut u8).cast(), 1);
            libc::_exit(0);
        }
    }
    // SAFETY: this process's own descriptor.
    unsafe { libc::close(r) };
    struct Forked(i32, i32);
    impl Drop for Forked {
        fn drop(&mut self) {
            // SAFETY: closing the barrier ends the child, reaped here by pid.
            unsafe {
                libc::close(self.1);
                libc::kill(self.0, libc::SIGKILL);
                libc::waitpid(self.0, std::ptr::null_mut(), 0);
            }
        }
    }
    let _forked = Forked(child, w);
    wait_asleep(child);
    let before = scanner.scan_pids(&[child]);
    let own_group = before.nodes().next().unwrap().pgrp;
    assert_ne!(own_group, child);
    // The parent moves its sleeping child (which has not exec'd) into a group of its own.
    // SAFETY: a plain system call on this process's child.
    assert_eq!(unsafe { libc::setpgid(child, child) }, 0);
    let mut shown = false;
    for _ in 0..EVERY {
        let snap = scanner.scan_pids(&[child]);
        if snap.nodes().next().unwrap().pgrp == child {
            shown = true;
            break;
        }
    }
    assert!(shown, "the new process group shows within {EVERY} scans");
}
