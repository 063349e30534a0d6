//! `foster exec`: the gate as a chain-loading command, for programs in any language.
//!
//! Owns the command's procedure: work out the expectation (`--parent` or `FOSTER_PARENT`, the
//! policy from the options or `FOSTER_POLICY`), refuse a set-user-ID / set-group-ID /
//! file-capability target unless `--allow-setid`, run the gate ([`crate::gate::GatePlan`]) in
//! its own process, apply a requested credential change and then re-read `PR_GET_PDEATHSIG`
//! (re-arming and re-checking when the change cleared it), pass the next generation its
//! environment, and `execve` the program: the program keeps the armed signal, unblocked and not
//! ignored. A refusal by the check says whether the expected parent died (this process was
//! reparented), is alive elsewhere (a stale `FOSTER_PARENT`), or is another process on its pid.
//!
//! `--watch`, and PID 1 of a namespace, keep a watcher in place of the exec ([`watch`]).

use std::ffi::{CString, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::base::sys::{PollFd, poll_until};
use crate::gate::lifeline::Lifeline;
use crate::gate::policy::{self, Policy, Reaction};
use crate::gate::spawner::{
    CredentialError, Credentials, ExecSignals, LaunchSpec, Launched, SpawnError, Spawner,
};
use crate::gate::{
    self, EXIT_GATE_ERROR, EXIT_NOT_EXECUTABLE, EXIT_NOT_FOUND, Expectation, GatePlan, SignalSetup,
};
use crate::process::identity::{Identity, pidfd_send_signal};
use crate::process::procstat::{PF_EXITING, StatFields};
use crate::process::signal::{SigBits, SignalFd, block};

/// The options of `foster exec`, already parsed.
#[derive(Debug, Clone, Default)]
pub struct ExecOptions {
    /// The expected parent; `FOSTER_PARENT` when `None`.
    pub parent: Option<Identity>,
    /// The whole policy chain; `FOSTER_POLICY` (else `TERM:exit:5s`) when `None`.
    pub policy: Option<Policy>,
    /// Overrides of this generation's signal, reaction, grace.
    pub signal: Option<i32>,
    pub reaction: Option<Reaction>,
    pub grace: Option<Duration>,
    /// The next generation's chain (replaces the one the policy carries).
    pub next: Option<Policy>,
    /// Let a set-id / file-capability target through, with a warning.
    pub allow_setid: bool,
    /// Change to this gid / uid after the gate, then re-read and re-arm. A uid alone takes
    /// the user's primary group and group list from the user database; see
    /// [`Credentials::resolve`] for the rules.
    pub gid: Option<u32>,
    pub uid: Option<u32>,
    /// Stay as a small parent holding the lifeline.
    pub watch: bool,
    /// The program and its arguments.
    pub program: PathBuf,
    pub args: Vec<OsString>,
}

/// An error that ends `foster exec` with a documented status.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ExecError {
    pub status: i32,
    pub message: String,
}

/// The status of a usage error (as clap's own): a bad argument, found before anything runs.
pub const EXIT_USAGE: i32 = 2;

fn err(status: i32, message: impl Into<String>) -> ExecError {
    ExecError {
        status,
        message: message.into(),
    }
}

/// Works out what to expect and which policy to arm, from the options and the environment.
pub fn expectation(o: &ExecOptions) -> Result<Expectation, ExecError> {
    let default = Policy::term();
    let mut exp = match o.parent {
        Some(parent) => {
            let policy = match (&o.policy, std::env::var(policy::ENV_POLICY)) {
                (Some(p), _) => p.clone(),
                (None, Ok(t)) => t
                    .parse()
                    .map_err(|e| err(EXIT_GATE_ERROR, format!("{}: {e}", policy::ENV_POLICY)))?,
                (None, Err(_)) => default,
            };
            Expectation { parent, policy }
        }
        None => Expectation::from_env(Some(o.policy.as_ref().unwrap_or(&default)))
            .map_err(|e| err(EXIT_GATE_ERROR, e.to_string()))?,
    };
    if let Some(p) = &o.policy {
        exp.policy = p.clone();
    }
    let p = &mut exp.policy;
    if let Some(r) = o.reaction {
        p.reaction = r;
        if r == Reaction::Kill && o.signal.is_none() {
            p.signal = libc::SIGKILL;
        }
    }
    if let Some(s) = o.signal {
        p.signal = s;
        if s == libc::SIGKILL && o.reaction.is_none() {
            p.reaction = Reaction::Kill;
        } else if s != libc::SIGKILL && o.reaction.is_none() && p.reaction == Reaction::Kill {
            p.reaction = Reaction::Exit;
        }
    }
    if let Some(g) = o.grace {
        p.grace = g;
    }
    if let Some(n) = &o.next {
        p.next = Some(Box::new(n.clone()));
    }
    p.validate()
        .map_err(|e| err(EXIT_GATE_ERROR, e.to_string()))?;
    Ok(exp)
}

fn pdeathsig_now() -> i32 {
    let mut got: libc::c_int = 0;
    // SAFETY: a pointer to a stack int.
    unsafe {
        libc::prctl(
            libc::PR_GET_PDEATHSIG,
            &mut got as *mut libc::c_int,
            0,
            0,
            0,
        )
    };
    got
}

fn change_credentials(c: &Credentials) -> Result<(), ExecError> {
    // foster exec is single-threaded here: the raw syscalls change the whole process.
    c.apply_single_threaded()
        .map_err(|e| err(EXIT_GATE_ERROR, e.to_string()))
}

/// What the expected parent is now, read after the gate refused it.
#[derive(Debug, PartialEq, Eq)]
enum ExpectedNow {
    /// Alive and not exiting: it was alive at the check, so it never was this process's parent.
    Alive,
    /// Exiting or a zombie (`zombie`), or gone: no process has its pid.
    Died { zombie: bool },
    /// Its pid is a live process with another start time: that process never was the
    /// expected one (it ended before, or `FOSTER_PARENT` is wrong); nothing says this process
    /// was reparented.
    Other { start_time: u64 },
}

fn expected_now(expected: Identity) -> ExpectedNow {
    let Ok(bytes) = std::fs::read(format!("/proc/{}/stat", expected.pid)) else {
        return ExpectedNow::Died { zombie: false };
    };
    match StatFields::parse(&bytes) {
        Ok(f) if f.start_time != expected.start_time => ExpectedNow::Other {
            start_time: f.start_time,
        },
        Ok(f) if matches!(f.state, b'Z' | b'X') || f.flags & PF_EXITING != 0 => {
            ExpectedNow::Died { zombie: true }
        }
        _ => ExpectedNow::Alive,
    }
}

/// The message of a stopped gate. A refusal by the check says what was observed: the expected
/// parent died and this process was reparented (the parent is a zombie or exiting), or no
/// process has its pid; it is alive elsewhere, so `FOSTER_PARENT` is stale or wrong; its pid is
/// another process now (another start time), nothing said of a reparenting; or this process's
/// parent has the expected pid with another start time (a wrong identity).
fn gate_error(stop: gate::GateStop, expected: Identity) -> ExecError {
    let gate::GateStop::ParentGone {
        ppid,
        path: gate::DeathPath::Check,
    } = stop
    else {
        return err(
            stop.exit_status(),
            format!("gate: {stop} (expected parent {expected})"),
        );
    };
    let msg = if ppid == expected.pid {
        let actual = Identity::of(ppid)
            .map(|i| format!("{i}"))
            .unwrap_or_else(|_| format!("{ppid}"));
        format!(
            "gate: this process's parent {actual} has the expected pid but another start time \
             than the expected {expected}: a wrong {}; refused",
            policy::ENV_PARENT
        )
    } else {
        match expected_now(expected) {
            ExpectedNow::Alive => format!(
                "gate: the expected parent {expected} is alive but is not this process's parent \
                 ({ppid}): a stale {} inherited from an older generation, or a wrong one; refused",
                policy::ENV_PARENT
            ),
            ExpectedNow::Died { zombie: true } => format!(
                "gate: the expected parent {expected} has died (this process was reparented to \
                 PID {ppid}); refused"
            ),
            ExpectedNow::Died { zombie: false } => format!(
                "gate: the expected parent {expected} is gone (no process has pid {}) and this \
                 process's parent is PID {ppid}: it died and this process was reparented, or {} \
                 named a process that had already ended; refused",
                expected.pid,
                policy::ENV_PARENT
            ),
            ExpectedNow::Other { start_time } => format!(
                "gate: the expected parent {expected} is not this process's parent (PID \
                 {ppid}), and pid {} is another process now (start time {start_time}): {} \
                 names a process that had ended, or a wrong one; refused",
                expected.pid,
                policy::ENV_PARENT
            ),
        }
    };
    err(stop.exit_status(), msg)
}

/// The expected parent's pidfd for the gate: the one the launcher handed down
/// (`FOSTER_PARENT_PIDFD`, for a parent in another PID namespace), or one opened here by pid
/// with the identity re-checked, or none (the parent is already gone, or cannot be seen).
fn parent_pidfd(exp: &Expectation) -> Result<Option<OwnedFd>, ExecError> {
    let inherited =
        gate::parent_pidfd_from_env(exp.parent).map_err(|e| err(EXIT_GATE_ERROR, e.to_string()))?;
    Ok(inherited.or_else(|| Lifeline::open(exp.parent).ok().map(Lifeline::into_pidfd)))
}

fn log_passage(passage: gate::Passage, exp: &Expectation) {
    let sig = crate::process::signal::name(exp.policy.signal);
    match passage {
        gate::Passage::Verified => {
            tracing::info!("armed {sig} and checked parent {}", exp.parent)
        }
        gate::Passage::Lifeline => tracing::info!(
            "armed {sig}; getppid() is 0 (the parent lives in another PID namespace): the \
             expected parent {}'s pidfd says it lives",
            exp.parent
        ),
    }
}

/// Runs `foster exec`. Returns only on failure (without `--watch`), or with the status to exit
/// with (with `--watch`).
pub fn run(o: &ExecOptions) -> Result<i32, ExecError> {
    if o.program.as_os_str().is_empty() {
        // Joined to a PATH directory, an empty name would name the directory itself.
        return Err(err(EXIT_USAGE, "empty program name"));
    }
    let exp = expectation(o)?;
    // The user database is read before the gate; the change itself comes after it.
    let credentials = Credentials::resolve(o.uid, o.gid).map_err(|e| match e {
        CredentialError::Refused(m) => err(EXIT_USAGE, m),
        CredentialError::Lookup(m) => err(EXIT_GATE_ERROR, m),
    })?;
    let resolved = checked_target(o)?;
    if o.watch {
        return watch(o, &exp, resolved, &credentials);
    }
    if namespace_init() && exp.policy.signal != libc::SIGKILL {
        // Exec'd in this place, the program would be PID 1 of the namespace, where the kernel
        // discards its parent-death signal (at its default disposition): the gate refuses that
        // (GateStop::NamespaceInit). foster stays instead, as the program's init and watcher.
        tracing::info!(
            "PID 1 of its PID namespace: the kernel would discard {} sent to the program as the \
             namespace's init, so foster stays as its init and watcher (as with --watch)",
            crate::process::signal::name(exp.policy.signal)
        );
        return watch(o, &exp, resolved, &credentials);
    }
    // Kept open until the exec, as the gate had it.
    let _lifeline = gate_in_place(&exp, &credentials)?;
    Err(exec_program(o, &exp, &resolved))
}

/// The program resolved in `PATH`, and refused when set-id or with file capabilities unless
/// `--allow-setid`.
fn checked_target(o: &ExecOptions) -> Result<PathBuf, ExecError> {
    let resolved =
        gate::resolve_program(&o.program).map_err(|e| err(e.exit_status(), e.to_string()))?;
    match gate::check_target(&resolved) {
        Ok(()) => {}
        Err(e) if e.is_privileged() && o.allow_setid => {
            eprintln!("foster: warning: {e} (allowed by --allow-setid)");
        }
        Err(e) => return Err(err(e.exit_status(), e.to_string())),
    }
    Ok(resolved)
}

/// The gate in this process, then the credential change (and the gate again when the change
/// cleared the setting). Returns the lifeline the gate used, if any.
fn gate_in_place(
    exp: &Expectation,
    credentials: &Credentials,
) -> Result<Option<OwnedFd>, ExecError> {
    // A pidfd of the expected parent, when it can be had: a second opinion in the check, and
    // the only one when getppid() cannot tell (the one the launcher handed down, or one opened
    // here by pid with the identity re-checked).
    let lifeline = parent_pidfd(exp)?;
    let mut plan = GatePlan::new(exp.parent, &exp.policy, SignalSetup::ExecDefault);
    if let Some(fd) = &lifeline {
        plan = plan.with_lifeline_fd(fd.as_raw_fd());
    }
    let passage = plan.run().map_err(|s| gate_error(s, exp.parent))?;
    log_passage(passage, exp);
    if credentials.changes() {
        change_credentials(credentials)?;
        let now = pdeathsig_now();
        if now != exp.policy.signal {
            // An effective uid/gid change clears the setting: arm and check again.
            tracing::info!("PR_GET_PDEATHSIG is {now} after the credential change: re-arming");
            plan.run().map_err(|s| {
                err(
                    s.exit_status(),
                    format!("gate after the credential change: {s}"),
                )
            })?;
        }
    }
    Ok(lifeline)
}

/// The next generation's environment, the signal state, then `execv`: returns only its
/// failure.
fn exec_program(o: &ExecOptions, exp: &Expectation, resolved: &std::path::Path) -> ExecError {
    let me = match Identity::current() {
        Ok(me) => me,
        Err(e) => return err(EXIT_GATE_ERROR, e.to_string()),
    };
    // SAFETY: single-threaded; set_var/remove_var before exec.
    unsafe {
        for (k, v) in gate::env_for_children(me, exp.parent, &exp.policy) {
            match v {
                Some(v) => std::env::set_var(k, v),
                None => std::env::remove_var(k),
            }
        }
    }
    let Ok(path) = CString::new(resolved.as_os_str().as_bytes()) else {
        return err(EXIT_NOT_FOUND, "program path contains a NUL byte");
    };
    let mut argv = vec![CString::new(o.program.as_os_str().as_bytes()).unwrap_or_default()];
    for a in &o.args {
        match CString::new(a.as_bytes()) {
            Ok(a) => argv.push(a),
            Err(_) => return err(EXIT_GATE_ERROR, "an argument contains a NUL byte"),
        }
    }
    let mut ptrs: Vec<_> = argv.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    // The program gets the signal state foster exec was started with (Rust's runtime ignores
    // SIGPIPE, and exec keeps "ignore"), the armed signal neither blocked nor ignored.
    let signals = ExecSignals::inherited().without(exp.policy.signal);
    // SAFETY: single-threaded, just before exec; NUL-terminated argv, environ is the process's.
    unsafe {
        signals.apply();
        libc::execv(path.as_ptr(), ptrs.as_ptr())
    };
    let e = io::Error::last_os_error();
    let status = if e.raw_os_error() == Some(libc::ENOENT) {
        EXIT_NOT_FOUND
    } else {
        EXIT_NOT_EXECUTABLE
    };
    err(status, format!("{}: exec failed: {e}", resolved.display()))
}

/// Whether this process is PID 1 of its PID namespace: a namespace's init, to which the kernel
/// delivers no signal at its default disposition, and which adopts the namespace's orphans.
fn namespace_init() -> bool {
    std::process::id() == 1
}

const FORWARDED: [i32; 6] = [
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

fn status_of(info: &libc::siginfo_t) -> i32 {
    // SAFETY: filled by waitid for a child that exited.
    let st = unsafe { info.si_status() };
    if info.si_code == libc::CLD_EXITED {
        st
    } else {
        128 + st
    }
}

/// The watcher: the gate, then the program launched as its child and watched until it ends.
///
/// With `--watch` it does not exec but stays as a small parent: it consumes the policy's signal
/// itself (signalfd), holds the lifeline (a pidfd of the expected parent), launches the program
/// through a [`Spawner`], forwards TERM, INT, HUP, QUIT, USR1 and USR2 to it, and
/// on a parent loss delivers the policy's signal to the program, waits up to the grace, then
/// SIGKILLs it. Without `--watch` nothing of foster remains after exec, so no lifeline can be
/// held for a program that does not hold one itself (a Rust program can, with
/// [`crate::gate::enter`]).
///
/// As PID 1 of its PID namespace (a container's entrypoint, `unshare --pid --fork`), `foster
/// exec` does not exec the program in its place unless the signal is SIGKILL: the kernel
/// discards a signal at its default disposition sent to a namespace's init, so the program
/// would be armed in name only. It stays as the program's init and watcher, as `--watch` does,
/// and also reaps the orphans the namespace leaves to its init.
fn watch(
    o: &ExecOptions,
    exp: &Expectation,
    resolved: PathBuf,
    credentials: &Credentials,
) -> Result<i32, ExecError> {
    // As PID 1 of its namespace the watcher adopts the namespace's orphans: it reaps them.
    let init = namespace_init();
    let sfd = consume_signals(exp.policy.signal, init)?;
    let lifeline = pass_gate(exp, credentials)?;
    // Kept until the program ends: the spawner thread is the program's creating thread.
    let spawner = Spawner::start().map_err(|e| err(EXIT_GATE_ERROR, format!("spawner: {e}")))?;
    let child = launch_program(&spawner, o, exp, resolved)?;
    Ok(follow(&child, &sfd, &lifeline, exp))
}

/// The signal path first: blocks the policy signal and the forwarded ones (and SIGCHLD as a
/// namespace's init), consumed here through a signalfd.
fn consume_signals(sig: i32, init: bool) -> Result<SignalFd, ExecError> {
    let mut set = FORWARDED.into_iter().fold(SigBits::EMPTY, SigBits::with);
    if sig != libc::SIGKILL {
        set = set.with(sig);
    }
    if init {
        set = set.with(libc::SIGCHLD);
    }
    block(set).map_err(|e| err(EXIT_GATE_ERROR, format!("cannot block signals: {e}")))?;
    SignalFd::new(set).map_err(|e| err(EXIT_GATE_ERROR, format!("signalfd: {e}")))
}

/// The gate in the watcher, again after a credential change that cleared the setting; the
/// lifeline to the verified parent.
fn pass_gate(exp: &Expectation, credentials: &Credentials) -> Result<Lifeline, ExecError> {
    let sig = exp.policy.signal;
    // The watcher's mask stays as it is, whatever the reaction: the signals it forwards are
    // blocked and read from the signalfd, and SIGKILL needs no signal path.
    let early = parent_pidfd(exp)?;
    let mut plan = GatePlan::new(exp.parent, &exp.policy, SignalSetup::Consumed);
    if let Some(fd) = &early {
        plan = plan.with_lifeline_fd(fd.as_raw_fd());
    }
    let passage = plan.run().map_err(|s| gate_error(s, exp.parent))?;
    log_passage(passage, exp);
    let lifeline = match early {
        Some(fd) => Lifeline::adopt(exp.parent, fd),
        None => Lifeline::open(exp.parent)
            .map_err(|e| err(gate::EXIT_PARENT_GONE, format!("lifeline: {e}")))?,
    };
    if credentials.changes() {
        change_credentials(credentials)?;
        if pdeathsig_now() != sig {
            plan.run().map_err(|s| {
                err(
                    s.exit_status(),
                    format!("gate after the credential change: {s}"),
                )
            })?;
        }
    }
    Ok(lifeline)
}

/// The program, launched as the watcher's child (its own children still get the next chain);
/// a failed launch's child reaped, its status the gate's.
fn launch_program(
    spawner: &Spawner,
    o: &ExecOptions,
    exp: &Expectation,
    resolved: PathBuf,
) -> Result<Launched, ExecError> {
    let mut spec = LaunchSpec::new(resolved, o.args.clone(), exp.policy.clone());
    spec.arg0 = Some(o.program.clone().into_os_string());
    spec.allow_setid = o.allow_setid;
    match spawner.launch(spec) {
        Ok(c) => Ok(c),
        Err(e @ SpawnError::Target(_)) => Err(err(EXIT_NOT_FOUND, e.to_string())),
        Err(e) => {
            let status = match &e {
                SpawnError::Exec { errno, .. } if *errno == libc::ENOENT => EXIT_NOT_FOUND,
                SpawnError::Exec { .. } => EXIT_NOT_EXECUTABLE,
                SpawnError::Gate { stop, .. } => stop.exit_status(),
                _ => EXIT_GATE_ERROR,
            };
            if let Some(pid) = e.pid() {
                reap(pid);
            }
            Err(err(status, e.to_string()))
        }
    }
}

/// Watches the program until it ends: forwards signals, sends the policy's signal when the
/// parent is lost (by its signal or the lifeline), SIGKILL after the grace. Its status.
fn follow(child: &Launched, sfd: &SignalFd, lifeline: &Lifeline, exp: &Expectation) -> i32 {
    let sig = exp.policy.signal;
    let mut lost_at: Option<Instant> = None;
    loop {
        let mut fds = [
            PollFd::input(child.pidfd.as_raw_fd()),
            PollFd::input(sfd.as_raw_fd()),
            PollFd::input(if lost_at.is_none() {
                lifeline.as_raw_fd()
            } else {
                -1
            }),
        ];
        let deadline = lost_at.and_then(|t| t.checked_add(exp.policy.grace));
        let Ok(n) = poll_until(&mut fds, deadline) else {
            continue;
        };
        if fds[0].ready() {
            return reap(child.pid);
        }
        if n == 0 && lost_at.is_some() {
            tracing::warn!("program {} outlived the grace: SIGKILL", child.pid);
            // The pidfd pins our own child.
            let _ = pidfd_send_signal(child.pidfd.as_fd(), libc::SIGKILL);
            // Nothing is left to decide: wait for its end alone, with no timeout (a large
            // process takes a while to exit; the signals that arrive meanwhile stay pending).
            return reap(child.pid);
        }
        let mut loss = None;
        if fds[1].ready()
            && let Some(info) = sfd.read_signal()
        {
            match forward(info.ssi_signo as i32, child, exp, lost_at.is_some()) {
                Forwarded::Ended(status) => return status,
                Forwarded::Lost => loss = Some("signal"),
                Forwarded::Done => {}
                Forwarded::Again => continue,
            }
        }
        if fds[2].ready() && lost_at.is_none() && loss.is_none() {
            loss = Some("lifeline");
        }
        if let Some(path) = loss {
            eprintln!(
                "foster: parent {} lost ({path}): sending {} to {}",
                exp.parent,
                crate::process::signal::name(sig),
                child.pid
            );
            // The pidfd pins our own child.
            let _ = pidfd_send_signal(child.pidfd.as_fd(), sig);
            lost_at = Some(Instant::now());
        }
    }
}

/// What one signal the watcher read came to.
enum Forwarded {
    /// The program ended (reaped as a namespace's init): its status.
    Ended(i32),
    /// The policy's signal, and the parent is gone.
    Lost,
    /// Sent on to the program.
    Done,
    /// SIGCHLD that reaped orphans only: poll again.
    Again,
}

/// One signal read by the watcher: SIGCHLD reaps (as a namespace's init), the policy's signal
/// without the parent is a loss, any other is sent on to the program.
fn forward(s: i32, child: &Launched, exp: &Expectation, lost: bool) -> Forwarded {
    if s == libc::SIGCHLD {
        // Only as a namespace's init: its orphans (and perhaps the program) ended.
        return match reap_adopted(child.pid) {
            Some(status) => Forwarded::Ended(status),
            None => Forwarded::Again,
        };
    }
    let parent_ok = nix::unistd::getppid().as_raw() == exp.parent.pid && exp.parent.is_alive();
    if s == exp.policy.signal && !parent_ok && !lost {
        Forwarded::Lost
    } else {
        // The pidfd pins our own child.
        let _ = pidfd_send_signal(child.pidfd.as_fd(), s);
        Forwarded::Done
    }
}

/// As PID 1 of its namespace: reaps every child that has ended, the orphans the namespace left
/// to its init (each said at debug level) and the program; the program's status as a shell
/// would give it, when it was among them.
fn reap_adopted(program: i32) -> Option<i32> {
    loop {
        // SAFETY: siginfo_t is plain integers: all zeros is a valid value.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waits for any child of ours, without blocking, into a stack struct.
        let r = unsafe { libc::waitid(libc::P_ALL, 0, &mut info, libc::WEXITED | libc::WNOHANG) };
        if r != 0 {
            if crate::base::sys::errno() == libc::EINTR {
                continue;
            }
            return None; // ECHILD: no child left
        }
        // SAFETY: filled by waitid (si_pid 0: none has ended).
        let pid = unsafe { info.si_pid() };
        if pid == 0 {
            return None;
        }
        if pid == program {
            return Some(status_of(&info));
        }
        tracing::debug!(
            "reaped pid {pid}, an orphan of the namespace (status {})",
            status_of(&info)
        );
    }
}

/// Reaps this watcher's own child and returns its status as a shell would (code or 128+signal).
fn reap(pid: i32) -> i32 {
    loop {
        // SAFETY: siginfo_t is plain integers: all zeros is a valid value.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waits for our own child only.
        let r = unsafe { libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, libc::WEXITED) };
        if r == 0 {
            return status_of(&info);
        }
        if crate::base::sys::errno() != libc::EINTR {
            return EXIT_GATE_ERROR;
        }
    }
}
