//! The terminal side of `foster init`: who owns the foreground process group.
//!
//! Owns the decision to hand the controlling terminal to PROGRAM's process group and to take it
//! back. When standard input is foster's controlling terminal and foster's group is in the
//! foreground (an interactive `docker run -it`, or a shell's foreground job), PROGRAM is put in a
//! process group of its own and that group is made the terminal's foreground group: Ctrl-C then
//! sends SIGINT to PROGRAM's group only (PROGRAM does not get it twice, once from the terminal
//! and once forwarded), and PROGRAM may read the terminal without being stopped by SIGTTIN.
//!
//! foster never stops on SIGTTIN or SIGTTOU: both are blocked (and forwarded when someone sends
//! them), and a blocked SIGTTOU lets `tcsetpgrp` from a background group through.

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

    /// Between fork and exec in PROGRAM: the caller has made PROGRAM its own group leader; make
    /// that group the foreground one. Async-signal-safe. Needs SIGTTOU blocked (it is: the child
    /// still has foster's mask at this point).
    pub fn give_to_self_in_child(&self) -> bool {
        // SAFETY: tcsetpgrp/getpid are async-signal-safe.
        unsafe { libc::tcsetpgrp(self.fd, libc::getpid()) == 0 }
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
