//! A child process the test started and lets run to its end: its output (standard output and
//! error as it piped them) once it ends within a bound, or it is SIGKILLed, reaped, and the
//! test fails naming it. Shared by the tests that run `foster` to its end.

use std::process::{Child, Output};
use std::sync::mpsc;

use super::events::LIMIT;

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
