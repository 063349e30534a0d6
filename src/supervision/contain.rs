//! Containment of `foster run`: the supervised tree in a new PID namespace, foster as its init.
//!
//! Owns the choice ([`Contain`]: by default the tree is contained whenever foster can create a
//! PID namespace; `--contain` requires it, `--no-contain` opts out), made first thing, before
//! any thread exists ([`enter`]: a probe of each way decides); the split into the outer foster
//! and the init of the new namespace (`split`); and [`OuterPids`], the tree's pids as the
//! namespace foster was started in sees them. Uses the process layer (reaper, pidfds,
//! signalfd, the `/proc` scanner) and the supervisor's table of signals.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Mutex;

use nix::errno::Errno;
use nix::sched::{CloneFlags, unshare};
use nix::unistd::{ForkResult, fork};
use tracing::{info, warn};

use crate::base::sys::{PollFd, poll};
use crate::process::identity::{Identity, ProcessRef};
use crate::process::reaper::{Reaper, Routed};
use crate::process::signal::SignalFd;
use crate::process::tree::{ScanOptions, Scanner};
use crate::supervision::event::{Event, PidView};

/// A way of containing the tree failed. The message names the step and what its errno means
/// here; the errno is kept as the source.
#[derive(Debug, thiserror::Error)]
pub enum ContainError {
    /// A system call of a step failed.
    #[error("{message}")]
    Step {
        message: String,
        #[source]
        errno: Errno,
    },
    /// What the probe's child reported on its pipe: a step's message, which crossed a process.
    #[error("{0}")]
    Reported(String),
    /// The probe was killed.
    #[error("the probe of a new PID namespace was killed by {0} (a seccomp filter?)")]
    ProbeKilled(nix::sys::signal::Signal),
    /// The probe ended otherwise, or could not be waited for.
    #[error("the probe of a new PID namespace ended: {0}")]
    ProbeEnded(String),
}

impl ContainError {
    fn step(message: impl Into<String>, errno: Errno) -> ContainError {
        ContainError::Step {
            message: message.into(),
            errno,
        }
    }
}

/// The `/proc` of the namespace foster was started in, kept open by the init of the new one
/// before it mounts its own over it; taken by [`OuterPids::take`].
static OUTER_PROC: Mutex<Option<OwnedFd>> = Mutex::new(None);

/// How many processes an [`OuterPids`] remembers, ended ones included (a line may name a
/// process after its end: the former parent of an orphan); the oldest learnt go first.
pub const OUTER_REMEMBERED: usize = 4096;

/// The pids of the contained tree as the namespace foster was started in sees them, the ones
/// its user can give to `ps`, `kill` or `top`: the init's, one per contained `foster run`.
///
/// Before it mounts its fresh `/proc`, the init keeps the one it had open (a directory
/// descriptor that the mount does not change); through it, the `fdinfo` of a pidfd of a
/// process of the tree gives that process's `NSpid` from the outer namespace down
/// ([`crate::process::tree::Scanner::read_pidfd_nspid`]). The supervisor reads it once per
/// process (a helper's at its launch, through the pidfd the launch returned), and writes its
/// lines, its events log and `--output json` with the outer pids; the control socket speaks
/// the namespace's own pids, which `foster ctl` translates. The other way round, a process the
/// kernel announces by its outer pid (its process events, `supervisor/births.rs`) is found in
/// foster's namespace by its `NSpid` through the same `/proc` ([`OuterPids::inner_pid`]).
#[derive(Debug)]
pub struct OuterPids {
    /// Over the outer `/proc`.
    proc: Scanner,
    /// Inner identity → outer pid.
    known: HashMap<Identity, i32>,
    /// The order `known` learnt its entries in, for forgetting the oldest.
    order: VecDeque<Identity>,
}

impl OuterPids {
    /// The init's view of the outer namespace, once: `None` when this process is not the init
    /// of a contained tree (or could not keep the outer `/proc`), or when it was taken already.
    pub fn take() -> Option<OuterPids> {
        let dir = OUTER_PROC
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()?;
        Some(OuterPids::over(dir))
    }

    /// A view through `dir`, an open `/proc` directory (the outer one; in tests, any).
    pub fn over(dir: OwnedFd) -> OuterPids {
        OuterPids {
            proc: Scanner::over(dir, ScanOptions::default()),
            known: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    /// The outer pid of `process` (its pidfd's `NSpid`, read once and remembered; without a
    /// pidfd, one is opened and checked first), `None` when the process has ended already.
    pub fn learn(&mut self, process: &ProcessRef) -> Option<i32> {
        let id = process.identity();
        if let Some(&p) = self.known.get(&id) {
            return Some(p);
        }
        let opened;
        let pidfd = match process.pidfd() {
            Some(fd) => fd,
            None => {
                opened = ProcessRef::open(id).ok()?;
                opened.pidfd()?
            }
        };
        let nspid = self.proc.read_pidfd_nspid(pidfd.as_fd())?;
        // The last entry is the pid in the process's own namespace: this one's.
        if nspid.last() != Some(&id.pid) {
            return None;
        }
        let outer = *nspid.first()?;
        self.remember(id, outer);
        Some(outer)
    }

    /// The pid in foster's namespace of the process whose outer pid is `outer` (the last entry
    /// of its `NSpid` through the outer `/proc`): how a process announced by the kernel, which
    /// numbers processes as the initial namespace does, is found in the tree. `None` when it has
    /// ended, or is not in foster's namespace.
    pub fn inner_pid(&mut self, outer: i32) -> Option<i32> {
        let nspid = self.proc.read_nspid(outer)?;
        (nspid.len() >= 2 && nspid.first() == Some(&outer))
            .then(|| nspid.last().copied())
            .flatten()
    }

    /// Remembers that `id` is `outer` in the outer namespace (found the other way round, by
    /// [`OuterPids::inner_pid`]), so that it is not read again.
    pub fn remember(&mut self, id: Identity, outer: i32) {
        if self.known.insert(id, outer).is_none() {
            if self.order.len() >= OUTER_REMEMBERED
                && let Some(old) = self.order.pop_front()
            {
                self.known.remove(&old);
            }
            self.order.push_back(id);
        }
    }

    /// `event` with the outer pids (0 for a process that ended before it was learnt).
    pub fn event(&mut self, event: &Event) -> Event {
        let mut e = event.clone();
        e.map_pids(self);
        e
    }
}

impl PidView for OuterPids {
    fn identity(&mut self, id: Identity) -> Identity {
        let pid = match self.known.get(&id) {
            Some(&p) => p,
            None if id.pid > 0 => self.learn(&ProcessRef::unpinned(id)).unwrap_or(0),
            None => 0,
        };
        Identity {
            pid,
            start_time: id.start_time,
        }
    }

    /// The latest process learnt with this pid.
    fn pid(&mut self, pid: i32) -> i32 {
        let found = self.order.iter().rev().find(|id| id.pid == pid);
        found
            .and_then(|id| self.known.get(id))
            .copied()
            .unwrap_or(0)
    }
}

/// Whether `foster run` contains its tree.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Contain {
    /// Contained when foster can create a PID namespace; else one warning, and uncontained.
    #[default]
    Auto,
    /// `--contain`: contained, or an error.
    Required,
    /// `--no-contain`: in foster's own PID namespace.
    Off,
}

/// Where [`enter`] left this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entered {
    /// The outer foster, once the contained tree has ended: exit with this status.
    Ended(i32),
    /// The init of the new namespace: supervise, contained.
    Init,
    /// Nothing changed: supervise, uncontained.
    Uncontained,
}

/// The ways to a new PID namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Way {
    /// `CLONE_NEWPID | CLONE_NEWNS`: needs `CAP_SYS_ADMIN`.
    Privileged,
    /// With `CLONE_NEWUSER`, this uid and gid mapped to themselves.
    UserNamespace { uid: u32, gid: u32 },
}

/// Contains the tree as `mode` asks. `credentials` names a helper that sets `user` or `group`,
/// if any: a user namespace maps only foster's own uid and denies `setgroups`, so for root such
/// a helper rules that way out. Call it before any thread exists.
///
/// As root, foster unshares a PID and a mount namespace (`CLONE_NEWPID | CLONE_NEWNS`);
/// otherwise (or as root without `CAP_SYS_ADMIN`) it goes through an unprivileged user
/// namespace where the kernel allows one (`CLONE_NEWUSER` too, its uid and gid mapped to
/// themselves, `setgroups` denied). A probe decides first: a throwaway child does every step
/// (unshare, the maps, a fork, a private `/` and a fresh `/proc` mounted by the new
/// namespace's first process) and reports the first that failed, so that a refusal (sysctls,
/// AppArmor, a seccomp filter, a `/proc` not fully visible in a container) is known before
/// foster commits to anything. When no way works, foster says why in one warning line and runs
/// uncontained (an error with `--contain`). A foster launched by a contained foster (its
/// `FOSTER_SUPERVISOR` is PID 1 of its namespace) is contained already, and does not nest
/// another namespace unless `--contain` asks. In a user namespace every uid but foster's reads
/// as the overflow uid: the directories foster writes to are judged before this
/// ([`crate::base::ownership::judge_before_namespace`], called by the supervisor), and owners
/// inside are mapped back by [`crate::base::ownership::owner_of`].
pub fn enter(mode: Contain, credentials: Option<&str>) -> io::Result<Entered> {
    if mode == Contain::Off {
        return Ok(Entered::Uncontained);
    }
    if mode == Contain::Auto && launched_by_namespace_init() {
        // A namespace of our own would add nothing: when that init ends, the kernel ends
        // this whole namespace, ours included; and while it lives, it adopts what we leave.
        info!("not contained again: the foster that launched this one is its namespace's init");
        return Ok(Entered::Uncontained);
    }
    let mut why = Vec::new();
    let mut chosen = None;
    for way in ways() {
        let ruled_out = match (way, credentials) {
            // Root's helper may run as another user, which a user namespace cannot give. (Not
            // root, such a helper fails at launch in any case: setgroups needs CAP_SETGID.)
            (Way::UserNamespace { uid: 0, .. }, Some(h)) => Some(format!(
                "helper \"{}\" sets user or group, which a user namespace cannot give",
                crate::base::sanitize::escape(h.as_bytes())
            )),
            (Way::UserNamespace { .. }, _) => userns_disabled(),
            (Way::Privileged, _) => None,
        };
        match ruled_out.map_or_else(|| probe(way).map_err(|e| e.to_string()), Err) {
            Ok(()) => {
                chosen = Some(way);
                break;
            }
            Err(e) => why.push(e),
        }
    }
    let Some(way) = chosen else {
        let why = why.join("; ");
        if mode == Contain::Required {
            return Err(io::Error::other(format!(
                "--contain: cannot create a PID namespace: {why}"
            )));
        }
        warn!(
            "not contained: cannot create a PID namespace ({why}); if foster is SIGKILLed, the \
             descendants that armed no parent-death signal keep running; --no-contain runs \
             uncontained without this warning"
        );
        return Ok(Entered::Uncontained);
    };
    unshare_into(way).map_err(|e| io::Error::other(format!("containing the tree: {e}")))?;
    if let Way::UserNamespace { uid, .. } = way {
        info!("contained through a user namespace (uid {uid} mapped to itself)");
    }
    split(way).map(|r| r.map_or(Entered::Init, Entered::Ended))
}

/// Whether this foster is a helper (or a descendant of one) of a foster that is PID 1 of this
/// PID namespace: `FOSTER_SUPERVISOR` names that process, pid and start time.
fn launched_by_namespace_init() -> bool {
    std::env::var(crate::gate::adoption::ENV_SUPERVISOR)
        .ok()
        .and_then(|v| v.parse::<crate::process::identity::Identity>().ok())
        .is_some_and(|sup| {
            sup.pid == 1 && crate::process::identity::Identity::of(1).is_ok_and(|i| i == sup)
        })
}

/// The ways worth trying here, in order.
fn ways() -> Vec<Way> {
    // SAFETY: plain getters.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let userns = Way::UserNamespace { uid, gid };
    if uid == 0 {
        vec![Way::Privileged, userns]
    } else {
        vec![userns]
    }
}

/// A sysctl's value, trimmed.
fn sysctl(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// Why user namespaces are off here, when a sysctl says so (no probe needed).
fn userns_disabled() -> Option<String> {
    if sysctl("/proc/sys/user/max_user_namespaces").as_deref() == Some("0") {
        return Some("user namespaces are disabled (sysctl user.max_user_namespaces=0)".into());
    }
    // SAFETY: plain getter.
    let root = unsafe { libc::geteuid() } == 0;
    if !root && sysctl("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") {
        return Some(
            "unprivileged user namespaces are disabled (sysctl \
             kernel.unprivileged_userns_clone=0)"
                .into(),
        );
    }
    None
}

/// What a refusal of a user namespace means here.
fn userns_refused(step: &str, e: Errno) -> String {
    if e == Errno::ENOSPC {
        let max = sysctl("/proc/sys/user/max_user_namespaces").unwrap_or_default();
        return format!(
            "{step}: the limit of user namespaces is reached (user.max_user_namespaces={max})"
        );
    }
    if sysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").as_deref() == Some("1") {
        return format!(
            "{step}: {e}: AppArmor restricts unprivileged user namespaces (sysctl \
             kernel.apparmor_restrict_unprivileged_userns=1)"
        );
    }
    format!("{step}: {e}")
}

/// Moves this process into the new namespaces (its children will be in the new PID one).
fn unshare_into(way: Way) -> Result<(), ContainError> {
    match way {
        Way::Privileged => {
            unshare(CloneFlags::CLONE_NEWPID | CloneFlags::CLONE_NEWNS).map_err(|e| {
                let step = "unshare(CLONE_NEWPID|CLONE_NEWNS)";
                if e == Errno::EPERM {
                    ContainError::step(format!("{step}: EPERM (no CAP_SYS_ADMIN)"), e)
                } else {
                    ContainError::step(format!("{step}: {e}"), e)
                }
            })
        }
        Way::UserNamespace { uid, gid } => {
            let step = "unshare(CLONE_NEWUSER|CLONE_NEWPID|CLONE_NEWNS)";
            unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWPID | CloneFlags::CLONE_NEWNS)
                .map_err(|e| ContainError::step(userns_refused(step, e), e))?;
            for (file, text) in [
                ("/proc/self/setgroups", "deny".to_string()),
                ("/proc/self/uid_map", format!("{uid} {uid} 1")),
                ("/proc/self/gid_map", format!("{gid} {gid} 1")),
            ] {
                std::fs::write(file, text).map_err(|e| {
                    let errno = Errno::from_raw(e.raw_os_error().unwrap_or(0));
                    ContainError::step(userns_refused(&format!("writing {file}"), errno), errno)
                })?;
            }
            Ok(())
        }
    }
}

/// In the first process of the new PID namespace: `/` private (nothing mounted here reaches
/// the rest of the system) and a fresh `/proc` of the new namespace.
fn mount_proc(way: Way) -> Result<(), ContainError> {
    use nix::mount::{MsFlags, mount};
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|e| ContainError::step(format!("making / private: {e}"), e))?;
    mount(
        Some("proc"),
        "/proc",
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None::<&str>,
    )
    .map_err(|e| match (way, e) {
        (Way::UserNamespace { .. }, Errno::EPERM) => ContainError::step(
            "mounting a fresh /proc: EPERM (/proc is not fully visible here: parts of it are \
             covered, as in many containers)",
            e,
        ),
        _ => ContainError::step(format!("mounting a fresh /proc: {e}"), e),
    })
}

/// Tries `way` in a throwaway child: every step of it, up to the fresh `/proc` mounted by the
/// first process of the new PID namespace. The error names the first step that failed.
fn probe(way: Way) -> Result<(), ContainError> {
    use std::io::Read;
    let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
        .map_err(|e| ContainError::step(format!("probe: pipe: {e}"), e))?;
    // In the children: say what failed on the pipe, exit.
    let fail = |w: &std::os::fd::OwnedFd, what: String| -> ! {
        let _ = nix::unistd::write(w, what.as_bytes());
        // SAFETY: ends a forked child without running the parent's exit handlers.
        unsafe { libc::_exit(1) }
    };
    // SAFETY: single-threaded here (see `enter`); the child only makes system calls and
    // small allocations, then exits.
    match unsafe { fork() }.map_err(|e| ContainError::step(format!("probe: fork: {e}"), e))? {
        ForkResult::Child => {
            drop(r);
            if let Err(e) = unshare_into(way) {
                fail(&w, e.to_string());
            }
            // SAFETY: as above, still single-threaded.
            match unsafe { fork() } {
                Err(e) => fail(&w, format!("fork into the new PID namespace: {e}")),
                Ok(ForkResult::Child) => {
                    if let Err(e) = mount_proc(way) {
                        fail(&w, e.to_string());
                    }
                    // SAFETY: as above.
                    unsafe { libc::_exit(0) }
                }
                Ok(ForkResult::Parent { child }) => {
                    let code = match nix::sys::wait::waitpid(child, None) {
                        Ok(nix::sys::wait::WaitStatus::Exited(_, 0)) => 0,
                        _ => 1,
                    };
                    // SAFETY: as above.
                    unsafe { libc::_exit(code) }
                }
            }
        }
        ForkResult::Parent { child } => {
            drop(w);
            let mut said = String::new();
            let _ = std::fs::File::from(r).take(4096).read_to_string(&mut said);
            let status = nix::sys::wait::waitpid(child, None);
            match status {
                Ok(nix::sys::wait::WaitStatus::Exited(_, 0)) if said.is_empty() => Ok(()),
                _ if !said.is_empty() => Err(ContainError::Reported(said)),
                Ok(nix::sys::wait::WaitStatus::Signaled(_, sig, _)) => {
                    Err(ContainError::ProbeKilled(sig))
                }
                other => Err(ContainError::ProbeEnded(format!("{other:?}"))),
            }
        }
    }
}

/// Forks the init of the new PID namespace. Returns `Some(status)` in the outer process once
/// the contained tree has ended, `None` in the init inside, which goes on to supervise.
///
/// This is the only fork of `foster run` on the main thread, outside the launcher thread (the
/// probes' aside: this module's and the process-events connector's, `supervisor/births.rs`,
/// made before containment). When the init ends, for any reason, the kernel kills every
/// process of the namespace, armed or not; a SIGKILL of the outer foster reaches the init by
/// its parent-death signal.
fn split(way: Way) -> io::Result<Option<i32>> {
    let outer_fd = crate::process::identity::pidfd_open(std::process::id() as i32)
        .map_err(|e| io::Error::other(format!("pidfd_open: {e}")))?;
    let mut reaper: Reaper<()> = Reaper::new()?;
    // SAFETY: single-threaded here (run() is called before any thread exists).
    match unsafe { fork() }.map_err(io::Error::from)? {
        ForkResult::Child => {
            drop(reaper);
            become_init(way, outer_fd)?;
            Ok(None)
        }
        ForkResult::Parent { child } => {
            drop(outer_fd);
            let init = child.as_raw();
            reaper.register(init, ());
            forward_until_end(init, &mut reaper).map(Some)
        }
    }
}

/// In the init, just forked: arms `PR_SET_PDEATHSIG(SIGKILL)`, then checks through `outer_fd`
/// (a pidfd of the outer foster, opened before the fork) that the outer one is still alive,
/// keeps the outer `/proc` and mounts a fresh one. Exits at once when the outer foster ended.
fn become_init(way: Way, outer_fd: OwnedFd) -> io::Result<()> {
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
    }
    if !matches!(
        poll(
            &mut [PollFd::input(outer_fd.as_raw_fd())],
            Some(std::time::Duration::ZERO)
        ),
        Ok(0)
    ) {
        // SAFETY: leaves the child at once: the outer foster already ended.
        unsafe { libc::_exit(1) };
    }
    drop(outer_fd);
    // The outer /proc, kept before the fresh one covers it ([`OuterPids`]); without
    // it, the pids foster shows are the namespace's (said once by the supervisor).
    if let Ok(dir) = std::fs::File::open("/proc") {
        *OUTER_PROC.lock().unwrap_or_else(|p| p.into_inner()) = Some(dir.into());
    }
    // The way was probed: a failure now is an error (the init exits, so does the tree).
    mount_proc(way).map_err(io::Error::other)
}

/// In the outer foster: forwards every signal of the supervisor's table
/// ([`crate::supervision::supervisor::signals::handled`]) to the init (its own parent's death
/// as SIGTERM) until the init ends; its status, as a shell gives it.
fn forward_until_end(init: i32, reaper: &mut Reaper<()>) -> io::Result<i32> {
    use crate::supervision::supervisor::signals;
    let term = SignalFd::new(signals::handled())?;
    loop {
        // No timeout: the outer foster sleeps until a signal or its init's end.
        let mut fds = [
            PollFd::input(reaper.raw_fd()),
            PollFd::input(term.as_raw_fd()),
        ];
        poll(&mut fds, None)?;
        while let Some(si) = term.read_signal() {
            let sig = match si.ssi_signo as i32 {
                s if signals::parent_died(s) => libc::SIGTERM,
                s => s,
            };
            // SAFETY: plain kill of our own child, not yet reaped.
            unsafe { libc::kill(init, sig) };
        }
        for r in reaper.reap() {
            if let Routed::Owned { reaped, .. } = r {
                return Ok(reaped.status.shell_code());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Over this namespace's own `/proc`, the outer pid is the pid: learnt through the pidfd,
    /// remembered after the process's end, and 0 for a process that ended unlearnt.
    #[test]
    fn outer_pids_are_learnt_once_and_remembered() {
        let mut o = OuterPids::over(std::fs::File::open("/proc").unwrap().into());
        let mut child = std::process::Command::new("/bin/sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let id = Identity::of(pid).unwrap();
        let held = ProcessRef::open(id).unwrap();
        assert_eq!(o.learn(&held), Some(pid));
        assert_eq!(o.known.len(), 1);
        child.kill().unwrap();
        child.wait().unwrap();
        // Reaped: the pidfd shows no pid any more, but what was learnt is remembered.
        assert_eq!(o.proc.read_pidfd_nspid(held.pidfd().unwrap()), None);
        let exit = Event::Exit {
            pid,
            identity: Some(id),
            helper: Some("h".into()),
            generation: Some(1),
            status: crate::process::reaper::ExitStatus::Signaled {
                signal: libc::SIGKILL,
                core_dumped: false,
            },
        };
        assert_eq!(o.event(&exit), exit);
        let mut bare = exit.clone();
        if let Event::Exit { identity, .. } = &mut bare {
            *identity = None;
        }
        assert_eq!(o.event(&bare), bare, "a bare pid: the latest learnt");
        let mut unlearnt = OuterPids::over(std::fs::File::open("/proc").unwrap().into());
        let Event::Exit {
            pid: p, identity, ..
        } = unlearnt.event(&exit)
        else {
            unreachable!()
        };
        assert_eq!((p, identity.map(|i| i.pid)), (0, Some(0)), "ended unlearnt");
    }
}
