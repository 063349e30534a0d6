//! A child process the test started and lets run to its end: its output (standard output and
//! error as it piped them), or its exit code, once it ends within a bound, or it is SIGKILLed,
//! reaped, and the test fails naming it; a wait for its end bounded by the caller; something
//! done while it is stopped; a process group the test forked itself, ended on drop ([`Group`]).
//! Shared by the tests that run `foster` to its end and those that fork.

use std::os::unix::process::ExitStatusExt;
use std::process::{Child, ExitStatus, Output};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::LIMIT;

/// The output of `child` once it ends within [`LIMIT`]; past it, the child is SIGKILLed and
/// reaped and the test fails, saying `what` did not end.
pub fn output_within(child: Child, what: &str) -> Output {
    let pid = child.id() as i32;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(LIMIT) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            // SAFETY: kill(2) of our own child, by its pid: not reaped yet (the thread still
            // waits for it, and reaps it).
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("{what} did not end within {LIMIT:?}");
        }
    }
}

/// Waits for `child` to end (a poll on its pidfd, no sleeping), within `limit`: its status, or
/// `None` if it still runs.
pub fn wait_within(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return Some(st);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        if let Ok(fd) = foster::process::identity::pidfd_open(child.id() as i32) {
            // Returns as soon as it exits; bounded, so a slip in between costs no more.
            foster::process::identity::poll_readable(
                std::os::fd::AsRawFd::as_raw_fd(&fd),
                Some(left.min(Duration::from_millis(500))),
            );
        }
    }
}

/// The exit code of `child` (128 + the signal that ended it) once it ends; past [`LIMIT`] it
/// is SIGKILLed, reaped, and the test fails.
pub fn wait_exit(child: &mut Child) -> i32 {
    match wait_within(child, LIMIT) {
        Some(st) => st.code().unwrap_or_else(|| 128 + st.signal().unwrap()),
        None => {
            let _ = child.kill();
            let _ = child.wait();
            panic!("process {} did not exit within {LIMIT:?}", child.id());
        }
    }
}

/// Runs `during` while `f` (a `foster run` of this test's) is stopped: SIGSTOP, waited for as
/// its parent (every thread of it stopped), then SIGCONT. Nothing of foster's runs meanwhile:
/// a read of its tree it had due (after a launch it reads again while the helper may still be
/// in its exec, later and later under load) cannot see what `during` makes and ends.
pub fn while_stopped<T>(f: &Child, during: impl FnOnce() -> T) -> T {
    use nix::sys::signal::{SIGCONT, SIGSTOP, kill};
    use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
    let pid = nix::unistd::Pid::from_raw(f.id() as i32);
    kill(pid, SIGSTOP).unwrap();
    assert_eq!(
        waitpid(pid, Some(WaitPidFlag::WUNTRACED)),
        Ok(WaitStatus::Stopped(pid, SIGSTOP))
    );
    let out = during();
    kill(pid, SIGCONT).unwrap();
    out
}

/// A process the test forked itself (no [`Child`]), the leader of a process group of its own:
/// on drop, unless the test reaped it, its group is SIGKILLed and it is reaped, so that a test
/// that fails half-way leaves nothing behind.
pub struct Group {
    leader: i32,
    reaped: bool,
}

impl Group {
    pub fn new(leader: i32) -> Group {
        Group {
            leader,
            reaped: false,
        }
    }

    /// Waits for the leader's end (on its pidfd, within [`LIMIT`]) and reaps it: its wait
    /// status.
    pub fn reap(&mut self) -> i32 {
        let fd = foster::process::identity::pidfd_open(self.leader)
            .unwrap_or_else(|e| panic!("pidfd of {}: {e}", self.leader));
        assert!(
            foster::process::identity::poll_readable(
                std::os::fd::AsRawFd::as_raw_fd(&fd),
                Some(LIMIT)
            ),
            "process {} did not end within {LIMIT:?}",
            self.leader
        );
        let mut status = 0;
        // SAFETY: waitpid for our own child, which has ended.
        let r = unsafe { libc::waitpid(self.leader, &mut status, 0) };
        assert_eq!(r, self.leader, "waitpid({})", self.leader);
        self.reaped = true;
        status
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if !self.reaped {
            // SAFETY: signals our own forked process group, then reaps its leader.
            unsafe {
                libc::kill(-self.leader, libc::SIGKILL);
                libc::waitpid(self.leader, std::ptr::null_mut(), 0);
            }
        }
    }
}
