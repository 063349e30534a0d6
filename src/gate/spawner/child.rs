//! The child between clone and exec: everything it touches, prepared before the clone
//! ([`Prepared`]), and the steps it runs on that data. Async-signal-safe: raw system calls
//! only, no allocation, no lock, no panic.

use std::ffi::CString;
use std::os::fd::RawFd;

use crate::base::sys::errno;
use crate::gate::{
    BirthClock, EXIT_GATE_ERROR, EXIT_NOT_EXECUTABLE, EXIT_NOT_FOUND, GatePlan, IdentitySlot,
};

use super::credentials::Credentials;
use super::report::{R_EXEC, R_GATE, R_SETUP, SetupStep, report};
use super::spec::ExecSignals;

pub(super) struct ChildArgs {
    pub(super) p: *mut Prepared,
    pub(super) report_fd: RawFd,
}

pub(super) extern "C" fn child_entry(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the launcher's `ChildArgs`, alive while it is suspended in clone.
    unsafe {
        let a = &mut *(arg as *mut ChildArgs);
        child(&mut *a.p, a.report_fd)
    }
}

/// Everything the child touches, prepared before fork.
pub(super) struct Prepared {
    pub(super) path: CString,
    pub(super) argv: Vec<CString>,
    pub(super) argv_ptrs: Vec<*const libc::c_char>,
    pub(super) env: Vec<CString>,
    pub(super) envp: Vec<*const libc::c_char>,
    pub(super) slot: IdentitySlot,
    pub(super) slot_index: usize,
    /// The clock's tick just before the clone, which may tell the child its start time.
    pub(super) birth: Option<BirthClock>,
    pub(super) plan: GatePlan,
    pub(super) stdio: [RawFd; 3],
    pub(super) credentials: Credentials,
    pub(super) cwd: Option<CString>,
    pub(super) gated: bool,
    pub(super) new_process_group: bool,
    pub(super) foreground_tty: RawFd,
    pub(super) exec_signals: ExecSignals,
    /// `(source, number)`: each source already above every number (see `launch_fds`).
    pub(super) extra: Vec<(RawFd, RawFd)>,
    /// `NAME=PID`, filled by the child.
    pub(super) pid_slot: Option<IdentitySlot>,
    /// The boundary of a launch that shares the launcher's descriptor table (`CLONE_FILES`):
    /// the child's first step keeps only the descriptors below it, in a table of its own
    /// ([`LowSlots`]); -1 for a launch whose table is copied at clone.
    pub(super) unshare_below: RawFd,
}

/// A step that failed, and its errno.
type StepFailed = (SetupStep, i32);

/// The child between clone and exec: the steps in their order (descriptor table, process
/// group, stdio, extra descriptors, pid variable, credentials, directory), then the
/// gate (**after** the credential change, which would clear the parent-death setting), then
/// the signal state to exec with ([`ExecSignals`]), then `execve`. No handler of the launcher
/// can run here: every signal is blocked from the clone on (but libc's two internal ones,
/// which libc's `sigaction` does not let a handler take), the gate resets its signal's
/// disposition before it unblocks it, and [`ExecSignals::apply`] sets every disposition
/// before the mask (a fault's signal is forced to its default action while blocked). Only raw
/// syscalls and the allocation-free gate; it shares the launcher's memory (CLONE_VM), so it
/// writes nothing but its identity slots. A failure is reported ([`report`]) and the child
/// exits with the gate's documented status.
///
/// Nothing here may panic: unwinding in a child that shares the launcher's memory would run the
/// panic machinery (allocation, locks) on the launcher's heap. So no indexing (`get_mut`, a
/// failure reported as a setup step), no arithmetic that can overflow (`i as RawFd` for
/// `i < 3`), and what it calls is panic-free too: [`GatePlan::run`] (the identity slots and
/// `/proc/self/stat` read through `get`, `checked_*`, and `procstat`'s parser, which slices
/// only at positions it found in the same line), [`crate::base::sys::poll`] without a timeout's
/// clock, `SigBits` operations guarded by their range, and `report`'s constant indexes. The
/// pieces it calls are `#[inline]` and keep the same rules.
unsafe fn child(p: &mut Prepared, report_fd: RawFd) -> ! {
    // SAFETY: this function's contract: called once, in the child of the clone, with `p` prepared
    // before it; the body makes only raw system calls on that data and writes nothing of the
    // parent's but its identity slots.
    unsafe {
        let fail = |kind: u32, a: u32, b: i32, status: i32| -> ! {
            report(report_fd, kind, a, b);
            libc::_exit(status)
        };
        // First, so that the clock is read as close to the clone as it can be.
        let born = p.birth.and_then(|b| b.start_time());
        if let Err((step, errno)) = setup(p).and_then(|()| fill_identity(p, born)) {
            fail(R_SETUP, step as u32, errno, EXIT_GATE_ERROR);
        }
        if p.gated
            && let Err(stop) = p.plan.run()
        {
            let (k, v) = stop.encode();
            fail(R_GATE, k, v, stop.exit_status());
        }
        // The signal state to exec with, last: until here every signal but the armed one is
        // blocked (since the clone), so one that arrives meanwhile stays pending for the program.
        p.exec_signals.apply();
        libc::execve(p.path.as_ptr(), p.argv_ptrs.as_ptr(), p.envp.as_ptr());
        let e = errno();
        let status = if e == libc::ENOENT {
            EXIT_NOT_FOUND
        } else {
            EXIT_NOT_EXECUTABLE
        };
        fail(R_EXEC, 0, e, status)
    }
}

/// The steps before the gate, in their order.
///
/// # Safety
/// As [`child`]'s: in the child of the clone only.
#[inline]
unsafe fn setup(p: &mut Prepared) -> Result<(), StepFailed> {
    // SAFETY: as `child`'s: raw system calls on data prepared before the clone.
    unsafe {
        unshare_table(p)?;
        enter_process_group(p);
        apply_stdio(p)?;
        // The extra descriptors: every source is above every number (moved there before the
        // clone), so no placement overwrites a source still to be placed.
        for &(src, number) in &p.extra {
            if libc::dup2(src, number) < 0 {
                return Err((SetupStep::ExtraFd, errno()));
            }
        }
        if let Some(slot) = &mut p.pid_slot
            && !slot.fill_with_pid()
        {
            return Err((SetupStep::OwnIdentity, libc::EOVERFLOW));
        }
        // Credentials first (group list, gid, uid, resolved before fork; raw syscalls: this
        // thread is the child's only one), so that the gate arms afterwards: an effective
        // uid/gid change clears the parent-death setting.
        p.credentials.apply_raw()?;
        if let Some(c) = &p.cwd
            && libc::chdir(c.as_ptr()) != 0
        {
            return Err((SetupStep::Chdir, errno()));
        }
    }
    Ok(())
}

/// A launch sharing the launcher's descriptor table (CLONE_FILES) takes a table of its own
/// first, with only the descriptors below the boundary copied into it: everything it uses
/// lies there (`LowSlots`), and the thousands above, close-on-exec, are neither copied nor
/// closed at exec. Nothing touches a descriptor before this.
///
/// # Safety
/// As [`child`]'s: in the child of the clone only.
#[inline]
unsafe fn unshare_table(p: &Prepared) -> Result<(), StepFailed> {
    // SAFETY: a raw system call on a number.
    let failed = p.unshare_below >= 0
        && unsafe {
            libc::syscall(
                libc::SYS_close_range,
                p.unshare_below as libc::c_uint,
                libc::c_uint::MAX,
                libc::CLOSE_RANGE_UNSHARE,
            )
        } != 0;
    if failed {
        return Err((SetupStep::CloseRange, errno()));
    }
    Ok(())
}

/// A process group of its own, and the terminal's foreground when asked.
///
/// # Safety
/// As [`child`]'s: in the child of the clone only.
#[inline]
unsafe fn enter_process_group(p: &Prepared) {
    if p.new_process_group {
        // Every signal is blocked here (SIGTTOU included), so tcsetpgrp from what is now
        // a background group goes through.
        // SAFETY: raw system calls on numbers.
        unsafe {
            libc::setpgid(0, 0);
            if p.foreground_tty >= 0 {
                libc::tcsetpgrp(p.foreground_tty, libc::getpid());
            }
        }
    }
}

/// Standard descriptors. A source that is another slot's number (stdin from 1, stdout from 0)
/// would be overwritten by that slot's dup2 before its own: every source among 0..=2 that is
/// not its own slot moves above 2 first (close-on-exec), as posix_spawn implementations do. A
/// source on its own number is not duplicated (dup2(fd, fd) does nothing and would leave
/// close-on-exec set): its flag is cleared instead.
///
/// # Safety
/// As [`child`]'s: in the child of the clone only.
#[inline]
unsafe fn apply_stdio(p: &Prepared) -> Result<(), StepFailed> {
    let mut stdio = p.stdio;
    for (i, fd) in stdio.iter_mut().enumerate() {
        if (0..3).contains(fd) && *fd != i as RawFd {
            // SAFETY: duplicates a descriptor number.
            *fd = unsafe { libc::fcntl(*fd, libc::F_DUPFD_CLOEXEC, 3) };
            if *fd < 0 {
                return Err((SetupStep::Stdio, errno()));
            }
        }
    }
    for (i, &fd) in stdio.iter().enumerate() {
        // SAFETY: raw system calls on descriptor numbers.
        let ok = unsafe {
            if fd < 0 {
                true
            } else if fd == i as RawFd {
                libc::fcntl(fd, libc::F_SETFD, 0) == 0
            } else {
                libc::dup2(fd, i as RawFd) >= 0
            }
        };
        if !ok {
            return Err((SetupStep::Stdio, errno()));
        }
    }
    Ok(())
}

/// A gated child's own identity into its `FOSTER_PARENT` slot, and the slot into `envp`;
/// `born`, its start time when the clock told it.
#[inline]
fn fill_identity(p: &mut Prepared, born: Option<u64>) -> Result<(), StepFailed> {
    if !p.gated {
        return Ok(());
    }
    if !p.slot.fill_with_self(born) {
        return Err((SetupStep::OwnIdentity, errno()));
    }
    // The slot's index was reserved in `envp` before the clone: `get_mut` finds it.
    match p.envp.get_mut(p.slot_index) {
        Some(entry) => *entry = p.slot.as_ptr(),
        None => return Err((SetupStep::OwnIdentity, libc::EINVAL)),
    }
    Ok(())
}
