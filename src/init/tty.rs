//! The terminal side of `foster init`: who owns the foreground process group.
//!
//! Owns the decision to hand the controlling terminal to PROGRAM's process group and to take it
//! back. When standard input is foster's controlling terminal with foster's group in the
//! foreground (an interactive `docker run -it`, a shell's foreground job), PROGRAM's own group
//! is made the terminal's foreground group before its exec, by the spawner
//! ([`LaunchSpec::foreground_tty`](crate::gate::spawner::LaunchSpec::foreground_tty)): Ctrl-C then
//! sends SIGINT to PROGRAM's group only (not twice, once from the terminal and once forwarded),
//! and PROGRAM may read the terminal without SIGTTIN. foster never stops on SIGTTIN or SIGTTOU:
//! both are blocked (and forwarded), and a blocked SIGTTOU lets `tcsetpgrp` through.
//!
//! Also owns job control through foster, when it is not PID 1 and started in the foreground (a
//! shell's job, for which the shell waits): PROGRAM stopped by Ctrl-Z stops foster too, and
//! foster resumes PROGRAM when continued ([`stopped_by_terminal_signal`], [`Terminal`]).

use std::os::fd::RawFd;

/// The terminal foster hands to PROGRAM, when there is one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Terminal {
    /// The descriptor (standard input).
    pub fd: RawFd,
    /// foster's own process group, the foreground group when foster started.
    pub foster_group: i32,
}

impl Terminal {
    /// The terminal on `fd` if it is foster's controlling terminal with foster's group in the
    /// foreground; `None` otherwise (not a terminal, not ours, or foster runs in the background).
    pub fn foreground_on(fd: RawFd) -> Option<Terminal> {
        // SAFETY: isatty/tcgetpgrp/getpgrp on a descriptor number.
        unsafe {
            if libc::isatty(fd) != 1 {
                return None;
            }
            let fg = libc::tcgetpgrp(fd);
            let mine = libc::getpgrp();
            // Both read 0 when the groups live in an ancestor PID namespace (foster is PID 1 of
            // a namespace its creator's foreground job made, `unshare --pid --fork`): the
            // terminal was handed down with it, so foster counts as the foreground.
            let foreground = (fg > 0 && fg == mine) || (fg == 0 && mine == 0);
            foreground.then_some(Terminal {
                fd,
                foster_group: mine,
            })
        }
    }

    /// Stops foster (SIGSTOP: the terminal stop signals are blocked in foster, they would not
    /// stop it) and, once continued, hands the foreground to PROGRAM's group (`program`, its
    /// leader) when foster's group holds it (after `fg`; after `bg` the shell keeps it), and
    /// sends SIGCONT to that group. Returns whether the foreground was handed over.
    pub fn suspend_then_resume(&self, program: i32) -> bool {
        // SAFETY: kill/tcgetpgrp/getpgrp/tcsetpgrp with integers; SIGTTOU is blocked in foster.
        unsafe {
            // A signal foster sends itself, unblocked, is acted on before kill returns: foster
            // is stopped there, and goes on from here when continued.
            libc::kill(libc::getpid(), libc::SIGSTOP);
            let foreground = libc::tcgetpgrp(self.fd) == libc::getpgrp();
            let handed = foreground && libc::tcsetpgrp(self.fd, program) == 0;
            libc::kill(-program, libc::SIGCONT);
            handed
        }
    }

    /// In foster after PROGRAM ended: the foreground back to foster's group (so the shell that
    /// started foster finds its terminal as it left it). Errors are ignored: the terminal may be
    /// gone.
    pub fn take_back(&self) {
        // SAFETY: tcsetpgrp on our descriptor; SIGTTOU is blocked in foster.
        unsafe {
            if libc::tcgetpgrp(self.fd) != self.foster_group {
                libc::tcsetpgrp(self.fd, self.foster_group);
            }
        }
    }
}

/// The terminal stop signal (SIGTSTP, SIGTTIN, SIGTTOU) that has stopped PROGRAM (`program`,
/// foster's child) since the last call, if any: `waitid(P_PID, program, WSTOPPED | WNOHANG)`,
/// which takes the stop report and leaves every exit to the reaper. A stop by another signal
/// (SIGSTOP from a debugger or `kill`) is taken and ignored: foster stops only for the ones the
/// terminal and the shell's job control use.
pub fn stopped_by_terminal_signal(program: i32) -> Option<i32> {
    // SAFETY: an all-zero siginfo_t is valid; waitid fills it.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: waitid on our own child, writing into `info`.
    let r = unsafe {
        libc::waitid(
            libc::P_PID,
            program as libc::id_t,
            &mut info,
            libc::WSTOPPED | libc::WNOHANG,
        )
    };
    // SAFETY: si_pid and si_status are set by waitid for a reported child (si_pid 0: none).
    let (pid, status) = unsafe { (info.si_pid(), info.si_status()) };
    let stopped = r == 0 && pid == program && info.si_code == libc::CLD_STOPPED;
    (stopped && matches!(status, libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU)).then_some(status)
}
