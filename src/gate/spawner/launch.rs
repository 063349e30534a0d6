//! One launch on the spawner thread: the request turned into a [`Prepared`] child (argv,
//! envp, the gate's plan), the clone, and the child's report read back.
//!
//! Not `std::process::Command` with `pre_exec`: when exec or a hook fails, std waits for the
//! failed child itself and panics if that wait finds no child, which races foster's one reaper
//! of `waitpid(-1)`. The spawner never waits: it returns the pid and pidfd, and a failed
//! launch's zombie is the reaper's like any other.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use crate::base::sys::errno;
use crate::gate::policy::ENV_PARENT;
use crate::gate::{self, BirthClock, GatePlan, GateStop, IdentitySlot, SignalSetup, TargetError};
use crate::process::identity::Identity;

use super::child::{ChildArgs, Prepared, child_entry};
use super::credentials::Credentials;
use super::env::{LaunchEnv, ProcessEnv};
use super::report::{R_EXEC, R_GATE, SetupStep};
use super::slots::{ChildFds, LowSlots, above_stdio};
use super::spec::{ExecSignals, LaunchSpec, Launched, SpawnError, cstring};
use super::valgrind::under_valgrind;

/// Everything the child touches, built on the spawner thread before the clone.
// Long: one line per field of the prepared child.
fn prepare(
    spec: &LaunchSpec,
    me: Identity,
    fds: ChildFds,
    process_env: &ProcessEnv,
) -> Result<Prepared, SpawnError> {
    let path = target_path(spec)?;
    let (argv, argv_ptrs) = arguments(spec)?;
    let LaunchEnv {
        own: env,
        ptrs: mut envp,
    } = LaunchEnv::new(process_env, spec, me)?;
    let slot = IdentitySlot::new(ENV_PARENT);
    let slot_index = envp.len();
    if spec.gated {
        envp.push(slot.as_ptr());
    }
    let pid_slot = pid_slot(spec)?;
    if let Some(s) = &pid_slot {
        envp.push(s.as_ptr());
    }
    envp.push(std::ptr::null());

    let mut plan = GatePlan::new(me, &spec.policy, SignalSetup::ExecDefault);
    if let Some(fd) = fds.lifeline {
        // The spawner's pidfd of its own process (`Spawner::start`).
        plan = plan.with_own_pidfd(fd);
    }
    if let Some(t) = fds.trace {
        plan = plan.with_trace(t);
    }
    // The user database is read here, on the spawner thread: the child only sets the result.
    let credentials = if spec.uid.is_some() || spec.gid.is_some() {
        Credentials::resolve(spec.uid, spec.gid).map_err(SpawnError::Credentials)?
    } else {
        Credentials::default()
    };
    let cwd = match &spec.cwd {
        Some(c) => Some(cstring("working directory", c.as_os_str().as_bytes())?),
        None => None,
    };
    Ok(Prepared {
        path,
        argv,
        argv_ptrs,
        env,
        envp,
        slot,
        slot_index,
        birth: None,
        plan,
        stdio: fds.stdio,
        credentials,
        cwd,
        gated: spec.gated,
        new_process_group: spec.new_process_group || spec.foreground_tty.is_some(),
        foreground_tty: fds.foreground_tty,
        exec_signals: {
            let e = spec.exec_signals.unwrap_or_else(ExecSignals::inherited);
            if spec.gated {
                e.without(spec.policy.signal)
            } else {
                e
            }
        },
        extra: fds.extra,
        pid_slot,
        unshare_below: -1,
    })
}

/// The program resolved in `PATH` and checked (set-id, capabilities), as a C string.
fn target_path(spec: &LaunchSpec) -> Result<CString, SpawnError> {
    if spec.program.as_os_str().is_empty() {
        // Joined to a PATH directory, an empty name would name the directory itself.
        return Err(SpawnError::Target(TargetError::NotFound(PathBuf::new())));
    }
    let (resolved, checked) =
        gate::target::resolve_checked(&spec.program).map_err(SpawnError::Target)?;
    match checked {
        Ok(()) => {}
        Err(e) if e.is_privileged() && !spec.gated => {}
        Err(e) if e.is_privileged() && spec.allow_setid => {
            tracing::warn!("{e} (allowed: the helper runs unsupervised after exec)");
        }
        Err(e) => return Err(SpawnError::Target(e)),
    }
    cstring("program path", resolved.as_os_str().as_bytes())
}

/// `argv` and its null-terminated pointers.
type Argv = (Vec<CString>, Vec<*const libc::c_char>);

/// `argv[0]` (the program as given unless set) and the arguments.
fn arguments(spec: &LaunchSpec) -> Result<Argv, SpawnError> {
    let arg0 = spec
        .arg0
        .clone()
        .unwrap_or_else(|| spec.program.clone().into_os_string());
    let mut argv = vec![cstring("argv[0]", arg0.as_bytes())?];
    for a in &spec.args {
        argv.push(cstring("an argument", a.as_bytes())?);
    }
    let argv_ptrs: Vec<_> = argv
        .iter()
        .map(|c| c.as_ptr())
        .chain([std::ptr::null()])
        .collect();
    Ok((argv, argv_ptrs))
}

/// The slot of the variable the child sets to its own pid, when the spec names one.
fn pid_slot(spec: &LaunchSpec) -> Result<Option<IdentitySlot>, SpawnError> {
    let Some(name) = &spec.pid_env else {
        return Ok(None);
    };
    let name = name
        .to_str()
        .filter(|n| !n.is_empty() && !n.contains(['=', '\0']))
        .ok_or_else(|| {
            SpawnError::Io(
                "the pid variable's name".into(),
                io::Error::new(io::ErrorKind::InvalidInput, "not a usable name"),
            )
        })?;
    Ok(Some(IdentitySlot::new(name)))
}

/// What the spawner thread holds for every launch: its process's identity (the helpers'
/// expected parent), its pidfd of that process (the gates' lifeline), its reserved low
/// descriptor numbers, the children's stack, the process's environment.
pub(super) struct Creator<'a> {
    pub(super) me: Identity,
    pub(super) own_pidfd: Option<RawFd>,
    pub(super) low: Option<&'a LowSlots>,
    pub(super) stack_top: *mut libc::c_void,
    pub(super) process_env: &'a ProcessEnv,
}

/// The descriptors of one launch as the child will find them, and the parent's ends.
struct LaunchFds {
    /// One above the highest extra descriptor number ([`extra_floor`]).
    floor: RawFd,
    fds: ChildFds,
    report_fd: RawFd,
    /// The report pipe's read end, the parent's.
    rd: OwnedFd,
    /// Its write end: the child's, closed here after the clone.
    wr: OwnedFd,
    /// Copies moved above the extra descriptors' numbers, closed after the clone.
    moved: Vec<OwnedFd>,
}

impl Creator<'_> {
    /// One launch, on the spawner thread: descriptors placed, the child prepared, cloned, its
    /// report read.
    pub(super) fn launch(&self, spec: LaunchSpec) -> Result<Launched, SpawnError> {
        let LaunchFds {
            floor,
            mut fds,
            mut report_fd,
            rd,
            wr,
            moved,
        } = launch_fds(&spec, self.own_pidfd)?;
        // Every descriptor the child uses at a reserved number below the boundary, when they
        // fit: then the child shares this table and keeps only what lies below (`child`'s first
        // step). Otherwise the table is copied whole at clone, as fork does. `placed` puts the
        // placeholders back when it is dropped, after the clone (or on an error before it).
        // Under valgrind (no CLONE_FILES child, see `valgrind.rs`) the table is copied.
        let placed = (self.low)
            .filter(|_| !under_valgrind())
            .and_then(|l| l.place(floor, &mut fds, &mut report_fd));
        let mut p = prepare(&spec, self.me, fds, self.process_env)?;
        p.unshare_below = placed.as_ref().map_or(-1, |pl| pl.boundary());
        let _keep = (&p.argv, &p.env, &moved);
        p.birth = p.gated.then(BirthClock::before_clone).flatten();
        let mut args = ChildArgs {
            p: &mut p,
            report_fd,
        };
        let (ret, pidfd) = clone_child(&mut args, self.stack_top, placed.is_some())?;
        drop(placed); // the placeholders back on the reserved numbers
        drop((wr, spec, moved)); // the parent's copies of the child's descriptors
        let identity = (p.gated)
            .then(|| slot_identity(p.slot.value()))
            .flatten()
            .filter(|id| id.pid == ret);
        read_report(&rd, ret, pidfd, self.me).map(|l| Launched { identity, ..l })
    }
}

/// The descriptors of `spec`'s child: every one it uses itself (its extra descriptors'
/// sources, the lifeline `own_pidfd`, the report pipe) above the extra descriptors' numbers.
fn launch_fds(spec: &LaunchSpec, own_pidfd: Option<RawFd>) -> Result<LaunchFds, SpawnError> {
    let floor = extra_floor(spec)?;
    let has_extra = !spec.extra_fds.is_empty();
    let mut moved = Vec::new();
    let mut extra = Vec::new();
    for (fd, number) in &spec.extra_fds {
        let d = dup_above(fd.as_raw_fd(), floor)?;
        extra.push((d.as_raw_fd(), *number));
        moved.push(d);
    }
    let lifeline = match own_pidfd {
        Some(fd) if fd < floor && has_extra => {
            let d = dup_above(fd, floor)?;
            let raw = d.as_raw_fd();
            moved.push(d);
            Some(raw)
        }
        other => other,
    };
    let (rd, wr) = report_pipe(floor, has_extra)?;
    let raw = |o: &Option<OwnedFd>| o.as_ref().map_or(-1, |f| f.as_raw_fd());
    let fds = ChildFds {
        stdio: [raw(&spec.stdin), raw(&spec.stdout), raw(&spec.stderr)],
        extra,
        lifeline,
        foreground_tty: spec.foreground_tty.unwrap_or(-1),
        trace: spec.trace,
    };
    Ok(LaunchFds {
        floor,
        fds,
        report_fd: wr.as_raw_fd(),
        rd,
        wr,
        moved,
    })
}

/// The `PID:STARTTIME` a gated child wrote into its `FOSTER_PARENT` slot (it shares this
/// memory until its exec).
fn slot_identity(value: &[u8]) -> Option<Identity> {
    let text = std::str::from_utf8(value).ok()?;
    let (pid, start) = text.split_once(':')?;
    Some(Identity {
        pid: pid.parse().ok()?,
        start_time: start.parse().ok()?,
    })
}

/// One above the highest extra descriptor number (3 without any): every descriptor the child
/// uses itself (its extra ones' sources, the lifeline, the report pipe) must lie at or above
/// it, or placing one would overwrite it. Refuses a standard number or one given twice.
fn extra_floor(spec: &LaunchSpec) -> Result<RawFd, SpawnError> {
    let numbers: Vec<RawFd> = spec.extra_fds.iter().map(|(_, n)| *n).collect();
    if let Some(&n) = numbers.iter().find(|&&n| n < 3) {
        return Err(SpawnError::Io(
            format!("extra descriptor number {n}"),
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "0, 1 and 2 are the standard ones",
            ),
        ));
    }
    if (1..numbers.len()).any(|i| numbers[..i].contains(&numbers[i])) {
        return Err(SpawnError::Io(
            "extra descriptors".into(),
            io::Error::new(io::ErrorKind::InvalidInput, "a number is given twice"),
        ));
    }
    Ok(numbers.iter().max().map_or(3, |m| m + 1))
}

/// A close-on-exec copy of `fd` at `floor` or above, for this launch.
fn dup_above(fd: RawFd, floor: RawFd) -> Result<OwnedFd, SpawnError> {
    // SAFETY: duplicates a descriptor the caller holds; the duplicate is owned from here.
    let d = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, floor) };
    if d < 0 {
        return Err(SpawnError::Io(
            "extra descriptors".into(),
            io::Error::last_os_error(),
        ));
    }
    // SAFETY: `d` was just returned by fcntl(F_DUPFD_CLOEXEC): open and owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(d) })
}

/// The report pipe (non-blocking, close-on-exec), its write end above 2 and, when the launch
/// has extra descriptors, at `floor` or above.
fn report_pipe(floor: RawFd, has_extra: bool) -> Result<(OwnedFd, OwnedFd), SpawnError> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: pipe2 into a stack array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return Err(SpawnError::Io(
            "report pipe".into(),
            io::Error::last_os_error(),
        ));
    }
    // SAFETY: fresh descriptors we own.
    let (rd, wr) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let wr = above_stdio(wr).map_err(|e| SpawnError::Io("report pipe".into(), e))?;
    let wr = if wr.as_raw_fd() < floor && has_extra {
        let high = dup_above(wr.as_raw_fd(), floor)?;
        drop(wr);
        high
    } else {
        wr
    };
    Ok((rd, wr))
}

/// The clone, every signal blocked across it (so no handler of this process runs in the child
/// before it has reset them; the child's gate sets its own mask). The child runs on its own
/// stack and shares this process's memory (CLONE_VM) while this thread is suspended
/// (CLONE_VFORK) until it execs or exits, like posix_spawn: no page tables are copied, which
/// is what makes a fork from a large supervisor slow. Returns the pid and its pidfd.
fn clone_child(
    args: &mut ChildArgs,
    stack_top: *mut libc::c_void,
    share_files: bool,
) -> Result<(i32, OwnedFd), SpawnError> {
    // SAFETY: sigset_t is plain integers: all zeros is a valid value (sigfillset fills it below).
    let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: sigset_t is plain integers: all zeros is a valid value (sigprocmask fills it below).
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    let mut pidfd: libc::c_int = -1;
    let files = if share_files { libc::CLONE_FILES } else { 0 };
    // SAFETY: the child runs only `child_entry` on its own stack, touches nothing but `p`
    // (prepared above and kept alive until the clone returns) and ends in execve or _exit.
    let ret = unsafe {
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let r = libc::clone(
            child_entry,
            stack_top,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PIDFD | files | libc::SIGCHLD,
            (args as *mut ChildArgs).cast(),
            &mut pidfd as *mut libc::c_int,
        );
        let e = io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        if r < 0 {
            return Err(SpawnError::Io("clone".into(), e));
        }
        r
    };
    // SAFETY: clone filled a descriptor we own.
    Ok((ret, unsafe { OwnedFd::from_raw_fd(pidfd) }))
}

/// The launch's outcome from the report pipe. CLONE_VFORK resumed this thread only once the
/// child exec'd or exited, and a failing child writes its report before it exits: the report,
/// if any, is already in the (non-blocking) pipe. Nothing to wait for: an empty pipe means the
/// exec went through.
fn read_report(
    rd: &OwnedFd,
    pid: i32,
    pidfd: OwnedFd,
    me: Identity,
) -> Result<Launched, SpawnError> {
    // Valgrind runs the child as a fork, without waiting for its exec: wait for the pipe's end.
    if under_valgrind() {
        // SAFETY: fcntl on a descriptor we own.
        unsafe { libc::fcntl(rd.as_raw_fd(), libc::F_SETFL, 0) };
    }
    match read_record(rd) {
        None => Ok(Launched {
            pid,
            pidfd,
            expected_parent: me,
            identity: None,
        }),
        Some(record) => Err(decode_report(record, pid, pidfd)),
    }
}

/// The child's record of 12 bytes, `None` when the pipe held none.
fn read_record(rd: &OwnedFd) -> Option<[u8; 12]> {
    let mut buf = [0u8; 12];
    let mut got = 0;
    while got < buf.len() {
        // SAFETY: reads into the rest of a stack buffer.
        let n = unsafe {
            libc::read(
                rd.as_raw_fd(),
                buf[got..].as_mut_ptr().cast(),
                buf.len() - got,
            )
        };
        if n < 0 && errno() == libc::EINTR {
            continue;
        }
        if n <= 0 {
            break;
        }
        got += n as usize;
    }
    (got > 0).then_some(buf)
}

/// The error a child's record tells: its kind (`R_GATE`, `R_EXEC`, a setup step) and two words.
fn decode_report(buf: [u8; 12], pid: i32, pidfd: OwnedFd) -> SpawnError {
    let word = |i: usize| [buf[i], buf[i + 1], buf[i + 2], buf[i + 3]];
    let (kind, a, b) = (
        u32::from_ne_bytes(word(0)),
        u32::from_ne_bytes(word(4)),
        i32::from_ne_bytes(word(8)),
    );
    match kind {
        R_GATE => SpawnError::Gate {
            pid,
            pidfd,
            stop: GateStop::decode(a, b).unwrap_or(GateStop::CheckUnreadable { errno: 0 }),
        },
        R_EXEC => SpawnError::Exec {
            pid,
            pidfd,
            errno: b,
        },
        _ => SpawnError::Setup {
            pid,
            pidfd,
            what: SetupStep::from_wire(a).map_or("setup", SetupStep::text),
            errno: b,
        },
    }
}
