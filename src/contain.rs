//! `foster run --contain`: the supervised tree in a new PID namespace, foster as its init.
//!
//! Owns the split into two processes. The outer foster unshares a PID and a mount namespace
//! and forks once (on the main thread, before any other thread exists: the only fork of
//! `foster run` outside the launcher thread). The child is PID 1 of the new namespace: it arms
//! `PR_SET_PDEATHSIG(SIGKILL)`, then checks through a pidfd of the outer foster (opened before
//! the fork) that the outer one is still alive, mounts a fresh `/proc`, and goes on to
//! supervise. When that init ends, for any reason, the kernel kills every process of the
//! namespace, armed or not; a SIGKILL of the outer foster reaches the init by its
//! parent-death signal. The outer foster forwards every signal of the supervisor's table
//! ([`crate::supervisor::signals::handled`]) to the init, which acts on it (its own parent's death
//! as SIGTERM), reaps it, and exits with its status.

use std::io;

use nix::sched::{CloneFlags, unshare};
use nix::sys::signal::SigSet;
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::unistd::{ForkResult, fork};

use crate::reaper::{Reaper, Routed};

/// Enters the namespace. Returns `Some(status)` in the outer process once the contained tree
/// has ended, `None` in the init inside, which goes on to supervise.
pub fn enter() -> io::Result<Option<i32>> {
    unshare(CloneFlags::CLONE_NEWPID | CloneFlags::CLONE_NEWNS).map_err(|e| {
        io::Error::other(format!(
            "--contain needs a new PID and mount namespace (unshare: {e}); run as root or with \
             CAP_SYS_ADMIN"
        ))
    })?;
    // SAFETY: pidfd_open of ourselves.
    let outer = unsafe { libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) } as i32;
    if outer < 0 {
        return Err(io::Error::other(format!(
            "pidfd_open: {}",
            io::Error::last_os_error()
        )));
    }
    let mut reaper: Reaper<()> = Reaper::new()?;
    // SAFETY: single-threaded here (run() is called before any thread exists).
    match unsafe { fork() }.map_err(io::Error::from)? {
        ForkResult::Child => {
            drop(reaper);
            // SAFETY: plain prctl; the pidfd poll is the check after arming.
            unsafe {
                if libc::prctl(
                    libc::PR_SET_PDEATHSIG,
                    libc::SIGKILL as libc::c_ulong,
                    0,
                    0,
                    0,
                ) != 0
                {
                    libc::_exit(1);
                }
                let mut p = libc::pollfd {
                    fd: outer,
                    events: libc::POLLIN,
                    revents: 0,
                };
                if libc::poll(&mut p, 1, 0) != 0 {
                    libc::_exit(1); // the outer foster already ended
                }
                libc::close(outer);
            }
            use nix::mount::{MsFlags, mount};
            mount(
                None::<&str>,
                "/",
                None::<&str>,
                MsFlags::MS_REC | MsFlags::MS_PRIVATE,
                None::<&str>,
            )
            .map_err(|e| io::Error::other(format!("making / private: {e}")))?;
            mount(
                Some("proc"),
                "/proc",
                Some("proc"),
                MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
                None::<&str>,
            )
            .map_err(|e| io::Error::other(format!("mounting /proc: {e}")))?;
            Ok(None)
        }
        ForkResult::Parent { child } => {
            // SAFETY: our fd.
            unsafe { libc::close(outer) };
            let init = child.as_raw();
            reaper.register(init, ());
            use crate::supervisor::signals;
            // SAFETY: a set built by sigemptyset/sigaddset.
            let set = unsafe { SigSet::from_sigset_t_unchecked(signals::handled().to_sigset()) };
            let term = SignalFd::with_flags(&set, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
                .map_err(io::Error::from)?;
            use std::os::fd::AsRawFd;
            loop {
                let mut fds = [
                    libc::pollfd {
                        fd: reaper.as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    },
                    libc::pollfd {
                        fd: term.as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    },
                ];
                // SAFETY: two valid pollfds; no timeout: the outer foster sleeps until a signal.
                unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
                while let Ok(Some(si)) = term.read_signal() {
                    let sig = match si.ssi_signo as i32 {
                        s if signals::parent_died(s) => libc::SIGTERM,
                        s => s,
                    };
                    // SAFETY: plain kill of our own child, not yet reaped.
                    unsafe { libc::kill(init, sig) };
                }
                for r in reaper.reap() {
                    if let Routed::Owned { reaped, .. } = r {
                        return Ok(Some(reaped.status.shell_code()));
                    }
                }
            }
        }
    }
}
