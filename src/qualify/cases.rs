//! The qualification cases and the case root that runs one.
//!
//! Owns each case's scenario, expected outcome and verdict. A case root (see the module above)
//! is single-threaded when it forks, so the processes it forks (supervisors, raw subreapers) may
//! run ordinary Rust code; helpers are launched by those supervisors through the real
//! [`Spawner`] and gate, and targets are real programs (`/bin/sh`, `sleep`, `foster exec`).

use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::barrier::{self, LineReader, TraceReader, pipe, write_all};
use super::{CaseRecord, Verdict};
use crate::gate::{self, Barrier, DeathPath, GatePlan, SignalSetup, Step, Trace, TraceRecord};
use crate::identity::Identity;
use crate::identity::pidfd_open;
use crate::policy::{Policy, Reaction};
use crate::spawner::{LaunchSpec, Spawner};

/// One case: its name, what it is about, whether it needs root, and its scenario.
pub struct CaseDef {
    pub name: &'static str,
    /// The death the case causes, in words (the matrix's second column).
    pub death: &'static str,
    /// The expected outcome, in words.
    pub expect: &'static str,
    /// Why the case needs root, when it does.
    pub needs_root: Option<&'static str>,
    run: fn(&mut Root) -> Outcome,
}

/// Every case, in matrix order.
pub static CASES: &[CaseDef] = &[
    CaseDef {
        name: "gone-before-arm",
        death: "supervisor killed while the helper waits before prctl",
        expect: "check path: exit 120, target never starts",
        needs_root: None,
        run: gone_before_arm,
    },
    CaseDef {
        name: "gone-between-arm-and-check",
        death: "supervisor killed after prctl, before the parent check",
        expect: "signal (or check) path, target never starts",
        needs_root: None,
        run: gone_between_arm_and_check,
    },
    CaseDef {
        name: "gone-after-check",
        death: "supervisor killed after a passed check, before exec",
        expect: "signal path, target never starts",
        needs_root: None,
        run: gone_after_check,
    },
    CaseDef {
        name: "normal",
        death: "none: the target runs and exits 0",
        expect: "no notification, exit 0, supervisor reaps",
        needs_root: None,
        run: normal,
    },
    CaseDef {
        name: "later-loss",
        death: "supervisor killed while the target serves",
        expect: "signal path: target killed by SIGTERM",
        needs_root: None,
        run: later_loss,
    },
    CaseDef {
        name: "signal-blocked",
        death: "supervisor (SIGTERM blocked in its launcher) killed while serving",
        expect: "gate unblocks it: killed by SIGTERM",
        needs_root: None,
        run: signal_blocked,
    },
    CaseDef {
        name: "signal-ignored",
        death: "supervisor (SIGTERM ignored in its launcher) killed while serving",
        expect: "gate resets it: killed by SIGTERM",
        needs_root: None,
        run: signal_ignored,
    },
    CaseDef {
        name: "exec-failure",
        death: "none: the target's interpreter does not exist",
        expect: "launcher gets ENOENT, helper exits 127",
        needs_root: None,
        run: exec_failure,
    },
    CaseDef {
        name: "prctl-failure",
        death: "none: the policy names signal 65",
        expect: "launcher gets EINVAL, helper exits 121, target never starts",
        needs_root: None,
        run: prctl_failure,
    },
    CaseDef {
        name: "thread-exit-raw",
        death: "a worker thread that forked a raw armed child exits",
        expect: "child signalled while the supervisor lives (the kernel fact)",
        needs_root: None,
        run: thread_exit_raw,
    },
    CaseDef {
        name: "thread-exit-spawner",
        death: "a worker thread that asked the Spawner for the helper exits; later the supervisor",
        expect: "helper unharmed by the thread, killed by SIGTERM with the supervisor",
        needs_root: None,
        run: thread_exit_spawner,
    },
    CaseDef {
        name: "cred-drop-before-arm",
        death: "supervisor killed; helper launched with uid/gid 65534",
        expect: "armed after the change, kept: killed by SIGTERM",
        needs_root: Some("setresuid needs root"),
        run: cred_drop_before_arm,
    },
    CaseDef {
        name: "cred-drop-after-arm",
        death: "supervisor killed; foster exec --uid 65534 drops after arming",
        expect: "cleared by the change, foster exec re-arms: killed by SIGTERM",
        needs_root: Some("setresuid needs root"),
        run: cred_drop_after_arm,
    },
    CaseDef {
        name: "setuid-target",
        death: "none: the target is set-user-ID",
        expect: "refused by the Spawner and by foster exec (123); allowed with --allow-setid",
        needs_root: None,
        run: setuid_target,
    },
    CaseDef {
        name: "grandchild-next-generation",
        death: "the helper (a shell) is killed; its child ran foster exec",
        expect: "grandchild armed with the next policy: killed by SIGHUP",
        needs_root: None,
        run: grandchild_next_generation,
    },
    CaseDef {
        name: "nested-subreaper",
        death: "the helper's parent, then the nearer subreaper, are killed",
        expect: "adopted by subreaper B, then A (never PID 1), notified each time",
        needs_root: None,
        run: nested_subreaper,
    },
    CaseDef {
        name: "stale-parent",
        death: "none: FOSTER_PARENT inherited through a foster-unaware shell, or reused pid",
        expect: "foster exec refuses both (120), target never starts",
        needs_root: None,
        run: stale_parent,
    },
    CaseDef {
        name: "lifeline-only",
        death: "supervisor killed after the helper's signal was cleared",
        expect: "lifeline path: the helper exits 124",
        needs_root: None,
        run: lifeline_only,
    },
    CaseDef {
        name: "notify",
        death: "supervisor killed while an in-process helper with reaction notify serves",
        expect: "the loss reaches the program's event loop; it drains and exits 0 itself",
        needs_root: None,
        run: notify,
    },
    CaseDef {
        name: "other-pidns-exec",
        death: "supervisor killed; its child, in another PID namespace, ran foster exec",
        expect: "122 without FOSTER_PARENT_PIDFD; with it the pidfd decides: killed by SIGTERM",
        needs_root: Some("a PID namespace needs root"),
        run: other_pidns_exec,
    },
    CaseDef {
        name: "other-pidns-in-process",
        death: "supervisor killed; its child, in another PID namespace, used the in-process gate",
        expect: "122 without FOSTER_PARENT_PIDFD; with it the pidfd decides: exits 143",
        needs_root: Some("a PID namespace needs root"),
        run: other_pidns_in_process,
    },
];

/// The case named `name`.
pub fn find(name: &str) -> Option<&'static CaseDef> {
    CASES.iter().find(|c| c.name == name)
}

/// How a process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    Exited(i32),
    Killed(i32),
}

impl End {
    fn text(self) -> String {
        match self {
            End::Exited(c) => {
                let what = match c {
                    gate::EXIT_PARENT_GONE => " (parent gone)",
                    gate::EXIT_ARM_FAILED => " (prctl failed)",
                    gate::EXIT_CANNOT_TELL => " (cannot tell)",
                    gate::EXIT_REFUSED_TARGET => " (target refused)",
                    gate::EXIT_LIFELINE => " (lifeline lost)",
                    gate::EXIT_NOT_FOUND => " (exec: not found)",
                    gate::EXIT_NOT_EXECUTABLE => " (exec: not executable)",
                    _ => "",
                };
                format!("exited {c}{what}")
            }
            End::Killed(s) => format!("killed by {}", crate::signal::name(s)),
        }
    }

    fn parse(s: &str) -> Option<End> {
        let (k, v) = s.split_once(' ')?;
        let v: i32 = v.trim().parse().ok()?;
        match k {
            "exited" => Some(End::Exited(v)),
            "killed" => Some(End::Killed(v)),
            _ => None,
        }
    }

    fn wire(self) -> String {
        match self {
            End::Exited(c) => format!("exited {c}"),
            End::Killed(s) => format!("killed {s}"),
        }
    }
}

fn end_of(info: &libc::siginfo_t) -> End {
    // SAFETY: filled by waitid for an ended child.
    let st = unsafe { info.si_status() };
    if info.si_code == libc::CLD_EXITED {
        End::Exited(st)
    } else {
        End::Killed(st)
    }
}

/// Waits for the end of `pid`, a child of the calling process (own or adopted), until the
/// deadline; reaps it. Returns the end and the monotonic time it was observed.
pub fn wait_end(pid: i32, deadline: Instant) -> Option<(End, Instant)> {
    let pidfd = pidfd_open(pid).ok();
    let mut retried = false;
    loop {
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waits for one pid, without blocking.
        let r = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOHANG,
            )
        };
        let now = Instant::now();
        if r == 0 && unsafe { info.si_pid() } == pid {
            return Some((end_of(&info), now));
        }
        let echild = r != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD);
        if r != 0 && !echild && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR)
        {
            return None;
        }
        let left = deadline.saturating_duration_since(now);
        if left.is_zero() {
            return None;
        }
        // Not (yet) this process's child: it is adopted when its parent exits, which happens
        // before it can end from that death. Once its pidfd says it ended, one more try.
        match &pidfd {
            Some(fd) => {
                let ended = barrier::readable(fd.as_raw_fd(), Some(left));
                if echild && ended && retried {
                    return None;
                }
                retried |= echild && ended;
            }
            None => return None,
        }
    }
}

/// What a scenario found; turned into a [`CaseRecord`] by the runner.
#[derive(Default)]
struct Outcome {
    expected_parent: String,
    observed_parent: String,
    prctl: String,
    path: Option<DeathPath>,
    helper: String,
    target: String,
    time_ms: Option<f64>,
    /// Empty when every expectation held; otherwise what did not.
    problems: Vec<String>,
    checked: String,
}

impl Outcome {
    fn check(&mut self, ok: bool, what: impl Into<String>) {
        if !ok {
            self.problems.push(what.into());
        }
    }
}

/// The descriptors a supervisor needs, as raw numbers valid in the forked process.
#[derive(Clone, Copy)]
struct SupFds {
    trace_w: RawFd,
    go_r: RawFd,
    out_w: RawFd,
    err_w: RawFd,
    sup_w: RawFd,
    hold_r: RawFd,
}

impl SupFds {
    fn say(&self, line: &str) {
        write_all(self.sup_w, format!("{line}\n").as_bytes());
    }

    /// Blocks until the case root closes the hold pipe (or kills this process).
    fn hold(&self) {
        let mut b = [0u8; 1];
        loop {
            // SAFETY: reads one byte.
            let n = unsafe { libc::read(self.hold_r, b.as_mut_ptr().cast(), 1) };
            if n < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return;
        }
    }

    fn dup(fd: RawFd) -> Option<OwnedFd> {
        // SAFETY: duplicates a descriptor we hold, close-on-exec.
        let d = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
        (d >= 0).then(|| unsafe { std::os::fd::FromRawFd::from_raw_fd(d) })
    }

    fn trace(&self, barriers: u8) -> Trace {
        Trace {
            fd: self.trace_w,
            go_fd: self.go_r,
            barriers,
        }
    }

    /// A spec whose stdout/stderr go to the case root and whose gate reports to it.
    fn spec(&self, program: &str, args: &[&str], policy: Policy, barriers: u8) -> LaunchSpec {
        let mut s = LaunchSpec::new(program, args.iter().map(OsString::from), policy);
        s.stdout = SupFds::dup(self.out_w);
        s.stderr = SupFds::dup(self.err_w);
        s.trace = Some(self.trace(barriers));
        s
    }

    /// Launches, says `launched PID` or `error ...`; for a failed launch that created a child,
    /// reaps it (this supervisor is its parent) and says `status ...`. Returns the pid.
    fn launch(&self, sp: &Spawner, spec: LaunchSpec) -> Option<i32> {
        match sp.launch(spec) {
            Ok(l) => {
                self.say(&format!("launched {}", l.pid));
                Some(l.pid)
            }
            Err(e) => {
                self.say(&format!("error {e}"));
                if let Some(pid) = e.pid()
                    && let Some((end, _)) = wait_end(pid, Instant::now() + Duration::from_secs(20))
                {
                    self.say(&format!("status {}", end.wire()));
                }
                None
            }
        }
    }

    fn reap_and_report(&self, pid: i32) {
        if let Some((end, _)) = wait_end(pid, Instant::now() + Duration::from_secs(30)) {
            self.say(&format!("status {}", end.wire()));
        }
    }
}

/// The case root's state: its pipes, the roles of the pids it knows, its deadline.
pub struct Root {
    me: i32,
    foster: PathBuf,
    fds: SupFds,
    trace: TraceReader,
    go_w: OwnedFd,
    out: LineReader,
    err: LineReader,
    sup: LineReader,
    hold_w: Option<OwnedFd>,
    _keep: Vec<OwnedFd>,
    roles: Vec<(i32, String)>,
    harness: Vec<i32>,
    deadline: Instant,
}

fn fork_run(f: impl FnOnce() -> i32) -> i32 {
    // SAFETY: the case root is single-threaded when it forks (checked in `run_in_root`); the
    // child runs `f` and exits without returning.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(101);
        // SAFETY: ends the forked process without running the parent's exit handlers.
        unsafe { libc::_exit(code) };
    }
    pid
}

fn sigkill(pid: i32) -> Instant {
    // SAFETY: a signal to a process of this case's own tree.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    Instant::now()
}

impl Root {
    fn new(foster: PathBuf) -> std::io::Result<Root> {
        let (trace_r, trace_w) = pipe()?;
        let (go_r, go_w) = pipe()?;
        let (out_r, out_w) = pipe()?;
        let (err_r, err_w) = pipe()?;
        let (sup_r, sup_w) = pipe()?;
        let (hold_r, hold_w) = pipe()?;
        let fds = SupFds {
            trace_w: trace_w.as_raw_fd(),
            go_r: go_r.as_raw_fd(),
            out_w: out_w.as_raw_fd(),
            err_w: err_w.as_raw_fd(),
            sup_w: sup_w.as_raw_fd(),
            hold_r: hold_r.as_raw_fd(),
        };
        let me = std::process::id() as i32;
        Ok(Root {
            me,
            foster,
            fds,
            trace: TraceReader::new(trace_r),
            go_w,
            out: LineReader::new(out_r),
            err: LineReader::new(err_r),
            sup: LineReader::new(sup_r),
            hold_w: Some(hold_w),
            _keep: vec![trace_w, go_r, out_w, err_w, sup_w, hold_r],
            roles: vec![(me, "harness subreaper".into()), (1, "PID 1".into())],
            harness: Vec::new(),
            deadline: Instant::now() + Duration::from_secs(40),
        })
    }

    fn soon(&self) -> Instant {
        self.deadline.min(Instant::now() + Duration::from_secs(15))
    }

    fn role(&self, pid: i32) -> String {
        self.roles
            .iter()
            .find(|(p, _)| *p == pid)
            .map(|(_, r)| r.clone())
            .unwrap_or_else(|| {
                if pid == 0 {
                    "none visible (0)".into()
                } else {
                    "another process".into()
                }
            })
    }

    fn name(&mut self, pid: i32, role: &str, harness: bool) {
        self.roles.push((pid, role.into()));
        if harness {
            self.harness.push(pid);
        }
    }

    /// Forks a supervisor that runs `f` with the pipes; registers it as `supervisor`.
    fn supervisor(&mut self, f: impl FnOnce(SupFds) -> i32) -> i32 {
        let fds = self.fds;
        let pid = fork_run(move || f(fds));
        self.name(pid, "supervisor", true);
        pid
    }

    /// The supervisor most cases use: a Spawner launching `spec` built by `make`, then holding.
    fn simple_supervisor(
        &mut self,
        make: impl FnOnce(&SupFds) -> LaunchSpec,
        then_reap: bool,
    ) -> i32 {
        self.supervisor(move |fds| {
            let Ok(sp) = Spawner::start() else { return 70 };
            let spec = make(&fds);
            if let Some(pid) = fds.launch(&sp, spec)
                && then_reap
            {
                fds.reap_and_report(pid);
            }
            fds.hold();
            0
        })
    }

    fn launched(&mut self) -> Result<i32, String> {
        let line = self
            .sup
            .next_line(self.soon())
            .ok_or("the supervisor said nothing")?;
        match line.strip_prefix("launched ") {
            Some(p) => {
                let pid: i32 = p.parse().map_err(|_| format!("bad line {line:?}"))?;
                self.name(pid, "helper", false);
                Ok(pid)
            }
            None => Err(format!("launch failed: {line}")),
        }
    }

    fn release(&self) {
        write_all(self.go_w.as_raw_fd(), b"g");
    }

    /// Kills a harness process of this tree and reaps it (it is the root's child).
    fn kill_and_reap(&mut self, pid: i32) -> Instant {
        let t = sigkill(pid);
        let _ = wait_end(pid, self.soon());
        t
    }

    /// Whether the target printed `started` (reads only what is already in the pipe).
    fn target_started(&mut self) -> bool {
        let mut started = false;
        while let Some(l) = self.out.next_line(Instant::now()) {
            started |= l.starts_with("started");
        }
        started
    }

    fn armed_text(&self, pid: i32, sig: i32) -> String {
        match self.trace.last(pid, Step::Armed) {
            Some(r) if r.value == sig => format!(
                "PR_SET_PDEATHSIG {}, read back {}",
                crate::signal::name(sig),
                crate::signal::name(r.value)
            ),
            Some(r) => format!(
                "read back {} instead of {}",
                r.value,
                crate::signal::name(sig)
            ),
            None => "not reached".into(),
        }
    }

    fn observed_at_check(&self, pid: i32) -> String {
        match self.trace.last(pid, Step::Checked) {
            Some(r) => self.role(r.ppid),
            None => "not checked (ended before)".into(),
        }
    }

    /// Ends everything left in the tree, by pid: the root's children (own and adopted) are
    /// killed and reaped until none is left. Returns how many non-harness processes were still
    /// running.
    fn teardown(&mut self) -> usize {
        self.hold_w = None;
        let mut leftovers = 0;
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let kids = children_of(self.me);
            for (pid, state) in &kids {
                if *state != b'Z' {
                    if !self.harness.contains(pid) {
                        leftovers += 1;
                    }
                    sigkill(*pid);
                }
            }
            let mut status = 0;
            // SAFETY: the case root owns every process of its tree; waiting for any is its job.
            let r = unsafe {
                libc::waitpid(
                    -1,
                    &mut status,
                    if kids.is_empty() { libc::WNOHANG } else { 0 },
                )
            };
            if (r < 0 && kids.is_empty()) || Instant::now() > deadline {
                break;
            }
            if r == 0 && kids.is_empty() {
                break;
            }
        }
        leftovers
    }
}

/// The children of `ppid` (pid, state), from `/proc`.
fn children_of(ppid: i32) -> Vec<(i32, u8)> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(b) = std::fs::read(format!("/proc/{pid}/stat")) else {
            continue;
        };
        if let Ok(f) = crate::procstat::StatFields::parse(&b)
            && f.ppid == ppid
        {
            out.push((pid, f.state));
        }
    }
    out
}

fn is_root() -> bool {
    // SAFETY: no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn threads_of_self() -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|d| d.count())
        .unwrap_or(0)
}

/// The entry point of a case root (`foster __qualify-internal case NAME`): runs the case and
/// returns its record. Must be called in a fresh, single-threaded process.
pub fn run_in_root(name: &str) -> CaseRecord {
    let def = find(name).expect("caller checked the name");
    let mut rec = CaseRecord {
        case: def.name.into(),
        death: def.death.into(),
        expected_parent: "supervisor".into(),
        observed_parent: String::new(),
        prctl: String::new(),
        path: DeathPath::None,
        helper: String::new(),
        target: String::new(),
        leftovers: "none".into(),
        verdict: Verdict::Pass,
        reason: String::new(),
        time_ms: None,
    };
    if let Some(why) = def.needs_root
        && !is_root()
    {
        rec.verdict = Verdict::Skip;
        rec.reason = format!("not root: {why}");
        return rec;
    }
    if threads_of_self() != 1 {
        rec.verdict = Verdict::Fail;
        rec.reason = "the case root is not single-threaded; it cannot fork safely".into();
        return rec;
    }
    // SAFETY: prctl with integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
        rec.verdict = Verdict::Fail;
        rec.reason = format!(
            "PR_SET_CHILD_SUBREAPER: {}",
            std::io::Error::last_os_error()
        );
        return rec;
    }
    let foster = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("foster"));
    let mut root = match Root::new(foster) {
        Ok(r) => r,
        Err(e) => {
            rec.verdict = Verdict::Fail;
            rec.reason = format!("pipes: {e}");
            return rec;
        }
    };
    let out = (def.run)(&mut root);
    let leftovers = root.teardown();
    if !out.expected_parent.is_empty() {
        rec.expected_parent = out.expected_parent;
    }
    rec.observed_parent = out.observed_parent;
    rec.prctl = out.prctl;
    rec.path = out.path.unwrap_or(DeathPath::None);
    rec.helper = out.helper;
    rec.target = out.target;
    rec.time_ms = out.time_ms;
    if leftovers > 0 {
        rec.leftovers = format!("{leftovers} still running, killed by the harness");
    }
    let mut problems = out.problems;
    if leftovers > 0 {
        problems.push(format!(
            "{leftovers} process(es) of the case were still running"
        ));
    }
    if problems.is_empty() {
        rec.reason = out.checked;
    } else {
        rec.verdict = Verdict::Fail;
        rec.reason = problems.join("; ");
    }
    rec
}

fn ms(from: Instant, to: Instant) -> f64 {
    to.saturating_duration_since(from).as_secs_f64() * 1e3
}

const SERVE: &[&str] = &["-c", "echo started; exec sleep 30"];

// ---------------------------------------------------------------------------------------------
// The startup orderings.

fn ordering(r: &mut Root, barrier: Barrier, wait: Step, armed: bool) -> (Outcome, i32) {
    let mut o = Outcome::default();
    let s = r.simple_supervisor(
        |f| f.spec("/bin/sh", SERVE, Policy::term(), barrier as u8),
        false,
    );
    let Some(rec) = r.trace.wait_step(0, wait, r.soon()) else {
        o.problems
            .push(format!("the helper never reached {wait:?}"));
        return (o, 0);
    };
    let h = rec.pid;
    r.name(h, "helper", false);
    let t = r.kill_and_reap(s);
    // The helper is now the harness subreaper's child; release the barrier if it still lives.
    // Armed: the signal is due, give it a bounded moment. Not armed: nothing can come; release.
    let first = if armed {
        wait_end(h, Instant::now() + Duration::from_secs(5))
    } else {
        None
    };
    let (end, at) = match first {
        Some(e) => e,
        None => {
            r.release();
            match wait_end(h, r.soon()) {
                Some(e) => e,
                None => {
                    o.problems.push("the helper did not end".into());
                    return (o, h);
                }
            }
        }
    };
    r.trace.drain();
    o.time_ms = Some(ms(t, at));
    o.helper = end.text();
    o.prctl = r.armed_text(h, libc::SIGTERM);
    o.observed_parent = r.observed_at_check(h);
    let started = r.target_started();
    o.target = if started {
        "started".into()
    } else {
        "never started".into()
    };
    o.path = Some(match end {
        End::Killed(libc::SIGTERM) => DeathPath::Signal,
        End::Exited(gate::EXIT_PARENT_GONE) => DeathPath::Check,
        End::Exited(gate::EXIT_LIFELINE) => DeathPath::Lifeline,
        _ => DeathPath::None,
    });
    o.check(!started, "the target started");
    (o, h)
}

fn gone_before_arm(r: &mut Root) -> Outcome {
    let (mut o, h) = ordering(r, Barrier::BeforeArm, Step::SignalPath, false);
    if h == 0 {
        return o;
    }
    o.check(
        o.path == Some(DeathPath::Check),
        format!("expected the check path, got {}", o.helper),
    );
    o.check(
        r.trace
            .last(h, Step::Checked)
            .is_some_and(|c| c.ppid == r.me && c.value == 0),
        "the check did not see the harness subreaper as parent",
    );
    o.checked = "the gate saw the subreaper, not the supervisor, and stopped with 120".into();
    o
}

fn gone_between_arm_and_check(r: &mut Root) -> Outcome {
    let (mut o, h) = ordering(r, Barrier::BeforeCheck, Step::Armed, true);
    if h == 0 {
        return o;
    }
    o.check(
        matches!(o.path, Some(DeathPath::Signal | DeathPath::Check)),
        format!("expected the signal or check path, got {}", o.helper),
    );
    o.checked = "armed before the death: the signal ended the helper before exec".into();
    o
}

fn gone_after_check(r: &mut Root) -> Outcome {
    let (mut o, h) = ordering(r, Barrier::AfterCheck, Step::Checked, true);
    if h == 0 {
        return o;
    }
    o.check(
        o.path == Some(DeathPath::Signal),
        format!("expected the signal path, got {}", o.helper),
    );
    o.checked =
        "check passed with the supervisor, then the signal ended the helper before exec".into();
    o
}

// ---------------------------------------------------------------------------------------------
// Serving and its notification.

fn serving(r: &mut Root, s: i32, sig: i32) -> Outcome {
    let mut o = Outcome::default();
    let h = match r.launched() {
        Ok(h) => h,
        Err(e) => {
            o.problems.push(e);
            return o;
        }
    };
    if r.out.expect("started", r.soon()).is_none() {
        o.problems.push("the target never said started".into());
        return o;
    }
    o.target = "started".into();
    let status = std::fs::read_to_string(format!("/proc/{h}/status")).unwrap_or_default();
    let mask = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .unwrap_or(u64::MAX)
    };
    let bit = 1u64 << (sig - 1);
    o.check(
        mask("SigBlk:") & bit == 0,
        "the signal is blocked in the target",
    );
    o.check(
        mask("SigIgn:") & bit == 0,
        "the signal is ignored in the target",
    );
    r.trace.drain();
    o.prctl = r.armed_text(h, sig);
    o.observed_parent = r.observed_at_check(h);
    let t = r.kill_and_reap(s);
    match wait_end(h, r.soon()) {
        Some((end, at)) => {
            o.time_ms = Some(ms(t, at));
            o.helper = end.text();
            o.path = Some(if end == End::Killed(sig) {
                DeathPath::Signal
            } else {
                DeathPath::None
            });
            o.check(
                end == End::Killed(sig),
                format!(
                    "expected killed by {}, got {}",
                    crate::signal::name(sig),
                    end.text()
                ),
            );
        }
        None => o.problems.push("the target outlived its supervisor".into()),
    }
    o
}

fn later_loss(r: &mut Root) -> Outcome {
    let s = r.simple_supervisor(|f| f.spec("/bin/sh", SERVE, Policy::term(), 0), false);
    let mut o = serving(r, s, libc::SIGTERM);
    o.checked = "the armed signal reached the serving target".into();
    o
}

fn signal_blocked(r: &mut Root) -> Outcome {
    let s = r.supervisor(|fds| {
        // SAFETY: blocks SIGTERM in this (main) thread; the spawner thread inherits the mask.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGTERM);
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        }
        let Ok(sp) = Spawner::start() else { return 70 };
        fds.launch(&sp, fds.spec("/bin/sh", SERVE, Policy::term(), 0));
        fds.hold();
        0
    });
    let mut o = serving(r, s, libc::SIGTERM);
    o.checked = "SIGTERM blocked in the launcher, unblocked by the gate, delivered".into();
    o
}

fn signal_ignored(r: &mut Root) -> Outcome {
    let s = r.supervisor(|fds| {
        // SAFETY: sets SIGTERM to ignored in this process; the helper inherits it.
        unsafe { libc::signal(libc::SIGTERM, libc::SIG_IGN) };
        let Ok(sp) = Spawner::start() else { return 70 };
        fds.launch(&sp, fds.spec("/bin/sh", SERVE, Policy::term(), 0));
        fds.hold();
        0
    });
    let mut o = serving(r, s, libc::SIGTERM);
    o.checked = "SIGTERM ignored in the launcher, reset to default by the gate, delivered".into();
    o
}

fn normal(r: &mut Root) -> Outcome {
    let mut o = Outcome::default();
    r.simple_supervisor(
        |f| {
            f.spec(
                "/bin/sh",
                &["-c", "echo started; exit 0"],
                Policy::term(),
                0,
            )
        },
        true,
    );
    let h = match r.launched() {
        Ok(h) => h,
        Err(e) => {
            o.problems.push(e);
            return o;
        }
    };
    let end = r
        .sup
        .expect("status", r.soon())
        .and_then(|s| End::parse(&s));
    r.trace.drain();
    o.prctl = r.armed_text(h, libc::SIGTERM);
    o.observed_parent = r.observed_at_check(h);
    o.path = Some(DeathPath::None);
    o.target = if r.target_started() {
        "started".into()
    } else {
        "never started".into()
    };
    match end {
        Some(e) => {
            o.helper = format!("{}, reaped by the supervisor", e.text());
            o.check(
                e == End::Exited(0),
                format!("expected exit 0, got {}", e.text()),
            );
        }
        None => o.problems.push("the supervisor reported no status".into()),
    }
    o.check(o.target == "started", "the target did not start");
    o.check(
        o.observed_parent == "supervisor",
        "the check did not see the supervisor",
    );
    o.checked = "armed, checked against the supervisor, ran to completion".into();
    o
}

fn failed_launch(r: &mut Root, o: &mut Outcome) -> Option<(String, End)> {
    let line = r.sup.next_line(r.soon());
    let Some(err) = line
        .as_deref()
        .and_then(|l| l.strip_prefix("error "))
        .map(String::from)
    else {
        o.problems
            .push(format!("expected a launch error, got {line:?}"));
        return None;
    };
    let end = r
        .sup
        .expect("status", r.soon())
        .and_then(|s| End::parse(&s));
    let Some(end) = end else {
        o.problems.push("no status for the failed helper".into());
        return None;
    };
    Some((err, end))
}

fn exec_failure(r: &mut Root) -> Outcome {
    let mut o = Outcome::default();
    let script = std::env::temp_dir().join(format!("foster-qualify-noint-{}", r.me));
    let _ = std::fs::write(&script, "#!/nonexistent/interpreter\n");
    let _ = std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755));
    let path = script.to_string_lossy().into_owned();
    r.simple_supervisor(move |f| f.spec(&path, &[], Policy::term(), 0), false);
    if let Some((err, end)) = failed_launch(r, &mut o) {
        o.helper = format!("{}, reaped by the supervisor", end.text());
        o.check(
            err.contains("No such file"),
            format!("launcher error does not name ENOENT: {err}"),
        );
        o.check(
            end == End::Exited(gate::EXIT_NOT_FOUND),
            format!("expected exit 127, got {}", end.text()),
        );
        r.trace.drain();
        o.check(
            r.trace
                .records
                .iter()
                .any(|t| t.step() == Some(Step::Passed)),
            "the gate did not pass before exec",
        );
        o.observed_parent = r
            .trace
            .records
            .iter()
            .find(|t| t.step() == Some(Step::Checked))
            .map(|t| r.role(t.ppid))
            .unwrap_or_default();
        o.prctl = r
            .trace
            .records
            .iter()
            .find(|t| t.step() == Some(Step::Armed))
            .map(|t| {
                format!(
                    "PR_SET_PDEATHSIG SIGTERM, read back {}",
                    crate::signal::name(t.value)
                )
            })
            .unwrap_or_else(|| "not reached".into());
    }
    let _ = std::fs::remove_file(&script);
    o.path = Some(DeathPath::None);
    o.target = if r.target_started() {
        "started".into()
    } else {
        "never started".into()
    };
    o.checked = "exec failed after the gate; ENOENT reached the launcher, status 127, no wait by the launcher".into();
    o
}

fn prctl_failure(r: &mut Root) -> Outcome {
    let mut o = Outcome::default();
    let bad = Policy {
        signal: 65,
        reaction: Reaction::Exit,
        grace: Duration::from_secs(1),
        next: None,
    };
    r.simple_supervisor(move |f| f.spec("/bin/sh", SERVE, bad, 0), false);
    if let Some((err, end)) = failed_launch(r, &mut o) {
        o.helper = format!("{}, reaped by the supervisor", end.text());
        o.check(
            err.contains("prctl(PR_SET_PDEATHSIG) failed") && err.contains("Invalid argument"),
            format!("launcher error: {err}"),
        );
        o.check(
            end == End::Exited(gate::EXIT_ARM_FAILED),
            format!("expected exit 121, got {}", end.text()),
        );
        o.prctl = "EINVAL for signal 65".into();
    }
    r.trace.drain();
    o.observed_parent = "not checked (stopped before)".into();
    o.check(
        !r.trace
            .records
            .iter()
            .any(|t| t.step() == Some(Step::Checked)),
        "the gate checked after a failed prctl",
    );
    o.path = Some(DeathPath::None);
    o.target = if r.target_started() {
        "started".into()
    } else {
        "never started".into()
    };
    o.check(
        o.target == "never started",
        "the target started unsupervised",
    );
    o.checked = "prctl failure stopped the helper (121) and reached the launcher".into();
    o
}

// ---------------------------------------------------------------------------------------------
// The creating thread.

/// Waits until thread `tid` of this process is gone (a thread pidfd, else /proc), bounded.
fn wait_thread_gone(tid: i32) {
    let deadline = Instant::now() + Duration::from_secs(10);
    if let Ok(fd) = crate::identity::pidfd_open_thread(tid) {
        barrier::readable(fd.as_raw_fd(), Some(Duration::from_secs(10)));
    }
    // The task directory goes once the thread is released: after the kernel reparented and
    // signalled its children. Bounded wait on that condition.
    let path = format!("/proc/self/task/{tid}");
    while std::path::Path::new(&path).exists() && Instant::now() < deadline {
        std::thread::yield_now();
    }
}

fn thread_exit_raw(r: &mut Root) -> Outcome {
    let mut o = Outcome::default();
    r.supervisor(|fds| {
        let me = Identity::current().expect("own identity");
        let worker = std::thread::spawn(move || {
            // SAFETY: gettid, then a raw fork whose child only arms, checks, reports and pauses.
            let tid = unsafe { libc::gettid() };
            let plan =
                GatePlan::new(me, &Policy::term(), SignalSetup::ExecDefault).with_trace(Trace {
                    fd: fds.trace_w,
                    go_fd: -1,
                    barriers: 0,
                });
            let (ready_r, ready_w) = pipe().expect("pipe");
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                let code = match plan.run() {
                    Ok(_) => {
                        write_all(ready_w.as_raw_fd(), b"r");
                        loop {
                            unsafe { libc::pause() };
                        }
                    }
                    Err(s) => s.exit_status(),
                };
                unsafe { libc::_exit(code) };
            }
            drop(ready_w);
            // Wait until the child passed its gate, then let this thread end.
            let mut b = [0u8; 1];
            barrier::read_full(
                ready_r.as_raw_fd(),
                &mut b,
                Instant::now() + Duration::from_secs(10),
            );
            (tid, pid)
        });
        let Ok((_tid, child)) = worker.join() else {
            return 71;
        };
        fds.say(&format!("launched {child}"));
        fds.reap_and_report(child);
        fds.hold();
        0
    });
    let h = match r.launched() {
        Ok(h) => h,
        Err(e) => {
            o.problems.push(e);
            return o;
        }
    };
    r.name(h, "raw child", false);
    let end = r
        .sup
        .expect("status", r.soon())
        .and_then(|s| End::parse(&s));
    r.trace.drain();
    o.prctl = r.armed_text(h, libc::SIGTERM);
    o.observed_parent = r.observed_at_check(h);
    o.target = "none (raw child)".into();
    o.check(
        o.observed_parent == "supervisor",
        "the raw child did not see the supervisor at its check",
    );
    match end {
        Some(e) => {
            o.helper = format!("{} while the supervisor lived", e.text());
            o.path = Some(if e == End::Killed(libc::SIGTERM) {
                DeathPath::Signal
            } else {
                DeathPath::None
            });
            o.check(
                e == End::Killed(libc::SIGTERM),
                format!("expected killed by SIGTERM, got {}", e.text()),
            );
        }
        None => o
            .problems
            .push("the raw child was not signalled when its creating thread exited".into()),
    }
    o.checked = "the kernel signals on the creating thread's exit: the fact the Spawner's long-lived thread avoids".into();
    o
}

fn thread_exit_spawner(r: &mut Root) -> Outcome {
    let mut o = Outcome::default();
    let s = r.supervisor(|fds| {
        let Ok(sp) = Spawner::start() else { return 70 };
        let sp2 = sp.clone();
        let worker = std::thread::spawn(move || {
            // SAFETY: no preconditions.
            let tid = unsafe { libc::gettid() };
            let pid = fds.launch(&sp2, fds.spec("/bin/sh", SERVE, Policy::term(), 0));
            (tid, pid)
        });
        let Ok((tid, _pid)) = worker.join() else {
            return 71;
        };
        wait_thread_gone(tid);
        fds.say("worker-gone");
        fds.hold();
        drop(sp);
        0
    });
    let h = match r.launched() {
        Ok(h) => h,
        Err(e) => {
            o.problems.push(e);
            return o;
        }
    };
    if r.sup.expect("worker-gone", r.soon()).is_none() {
        o.problems.push("the worker thread did not end".into());
    }
    if r.out.expect("started", r.soon()).is_none() {
        o.problems.push("the target never said started".into());
    }
    o.target = "started".into();
    // The worker thread is gone and the kernel has done whatever it does on its exit.
    let alive = std::fs::read(format!("/proc/{h}/stat"))
        .ok()
        .and_then(|b| {
            crate::procstat::StatFields::parse(&b)
                .ok()
                .map(|f| f.state != b'Z')
        })
        .unwrap_or(false);
    o.check(
        alive,
        "the helper died when the worker thread that requested it exited",
    );
    r.trace.drain();
    o.prctl = r.armed_text(h, libc::SIGTERM);
    o.observed_parent = r.observed_at_check(h);
    let t = r.kill_and_reap(s);
    match wait_end(h, r.soon()) {
        Some((end, at)) => {
            o.time_ms = Some(ms(t, at));
            o.helper = format!(
                "alive after the worker's exit; {} with the supervisor",
                end.text()
            );
            o.path = Some(if end == End::Killed(libc::SIGTERM) {
                DeathPath::Signal
            } else {
                DeathPath::None
            });
            o.check(
                end == End::Killed(libc::SIGTERM),
                format!("expected killed by SIGTERM, got {}", end.text()),
            );
        }
        None => o.problems.push("the helper outlived its supervisor".into()),
    }
    o.checked =
        "the requesting thread's exit did not signal the helper; the supervisor's death did".into();
    o
}

// ---------------------------------------------------------------------------------------------
// Credentials and privileged targets.

fn cred_drop_before_arm(r: &mut Root) -> Outcome {
    let s = r.simple_supervisor(
        |f| {
            let mut spec = f.spec("/bin/sh", SERVE, Policy::term(), 0);
            spec.uid = Some(65534);
            spec.gid = Some(65534);
            spec
        },
        false,
    );
    let mut o = serving(r, s, libc::SIGTERM);
    o.prctl = format!("after setresuid(65534): {}", o.prctl);
    o.checked = "the spawner changed uid/gid first and armed after: the setting was kept".into();
    o
}

/// Arms in a forked child, changes its uid, reads the setting back: the kernel fact.
fn raw_cleared_by_setuid() -> i32 {
    let (rd, wr) = pipe().expect("pipe");
    let w = wr.as_raw_fd();
    let pid = fork_run(move || {
        // SAFETY: prctl and setresuid in a forked single-threaded child.
        unsafe {
            libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGTERM as libc::c_ulong,
                0,
                0,
                0,
            );
            libc::setresgid(65534, 65534, 65534);
            libc::setresuid(65534, 65534, 65534);
            let mut got: libc::c_int = -1;
            libc::prctl(
                libc::PR_GET_PDEATHSIG,
                &mut got as *mut libc::c_int,
                0,
                0,
                0,
            );
            write_all(w, &got.to_ne_bytes());
        }
        0
    });
    drop(wr);
    let mut b = [0u8; 4];
    let n = barrier::read_full(
        rd.as_raw_fd(),
        &mut b,
        Instant::now() + Duration::from_secs(10),
    );
    let _ = wait_end(pid, Instant::now() + Duration::from_secs(10));
    if n == 4 { i32::from_ne_bytes(b) } else { -1 }
}

fn cred_drop_after_arm(r: &mut Root) -> Outcome {
    let raw = raw_cleared_by_setuid();
    let foster = r.foster.to_string_lossy().into_owned();
    let s = r.simple_supervisor(
        move |f| {
            let args = [
                "-v",
                "exec",
                "--uid",
                "65534",
                "--gid",
                "65534",
                "--",
                "/bin/sh",
                "-c",
                "echo started; exec sleep 30",
            ];
            let mut spec = f.spec(&foster, &args, Policy::term(), 0);
            spec.env
                .push(("RUST_LOG".into(), Some("foster=info".into())));
            spec
        },
        false,
    );
    let mut o = serving(r, s, libc::SIGTERM);
    let mut saw = false;
    let mut line = r.err.next_line(Instant::now());
    while let Some(l) = line {
        saw |= l.contains("PR_GET_PDEATHSIG is 0 after the credential change: re-arming");
        line = r.err.next_line(Instant::now());
    }
    o.check(
        raw == 0,
        format!("raw: PR_GET_PDEATHSIG after setresuid read {raw}, expected 0 (cleared)"),
    );
    o.check(
        saw,
        "foster exec did not report the cleared setting and its re-arming",
    );
    o.prctl = format!(
        "raw: armed SIGTERM, read {raw} after setresuid (cleared); foster exec re-read 0 and re-armed SIGTERM"
    );
    o.checked =
        "the kernel clears the setting on a uid change; foster exec re-read it and re-armed".into();
    o
}

fn setuid_target(r: &mut Root) -> Outcome {
    let mut o = Outcome::default();
    let target = std::env::temp_dir().join(format!("foster-qualify-setuid-{}", r.me));
    let src = if std::path::Path::new("/bin/true").exists() {
        "/bin/true"
    } else {
        "/usr/bin/true"
    };
    if std::fs::copy(src, &target).is_err()
        || std::fs::set_permissions(
            &target,
            std::os::unix::fs::PermissionsExt::from_mode(0o4755),
        )
        .is_err()
    {
        o.problems
            .push("cannot make a set-user-ID file in the temporary directory".into());
        return o;
    }
    let path = target.to_string_lossy().into_owned();
    let p2 = path.clone();
    r.simple_supervisor(move |f| f.spec(&p2, &[], Policy::term(), 0), false);
    let line = r.sup.next_line(r.soon()).unwrap_or_default();
    o.check(
        line.starts_with("error ") && line.contains("set-user-ID"),
        format!("the Spawner did not refuse: {line}"),
    );
    let run = |extra: &[&str]| {
        let mut c = std::process::Command::new(&r.foster);
        crate::signal::reserved_as_inherited(&mut c);
        c.args([
            "exec",
            "--parent",
            &Identity::current()
                .map(|i| i.to_string())
                .unwrap_or_default(),
        ])
        .args(extra)
        .arg("--")
        .arg(&path)
        .output()
    };
    let refused = run(&[]);
    let allowed = run(&["--allow-setid"]);
    let _ = std::fs::remove_file(&target);
    match (refused, allowed) {
        (Ok(a), Ok(b)) => {
            let msg = String::from_utf8_lossy(&a.stderr);
            o.check(
                a.status.code() == Some(gate::EXIT_REFUSED_TARGET),
                format!("foster exec status {:?}, expected 123", a.status.code()),
            );
            o.check(
                msg.contains("set-user-ID"),
                format!("foster exec message: {msg}"),
            );
            o.check(
                b.status.code() == Some(0),
                format!("--allow-setid status {:?}", b.status.code()),
            );
            o.check(
                String::from_utf8_lossy(&b.stderr).contains("warning"),
                "--allow-setid gave no warning",
            );
            o.helper = format!(
                "not created by the Spawner; foster exec {}",
                End::Exited(a.status.code().unwrap_or(-1)).text()
            );
        }
        _ => o.problems.push("cannot run foster exec".into()),
    }
    o.observed_parent = "not checked (refused before fork)".into();
    o.prctl = "not reached".into();
    o.path = Some(DeathPath::None);
    o.target = "never started (started only with --allow-setid)".into();
    o.checked =
        "refused with a message naming set-user-ID; --allow-setid ran it with a warning".into();
    o
}

// ---------------------------------------------------------------------------------------------
// Generations, adoption, stale identities, the lifeline.

fn grandchild_next_generation(r: &mut Root) -> Outcome {
    let mut o = Outcome::default();
    let foster = r.foster.to_string_lossy().into_owned();
    r.simple_supervisor(
        move |f| {
            let chain: Policy = "TERM:exit:5s;HUP:exit:5s".parse().expect("valid");
            let script =
                r#""$FOSTER_BIN" exec -- /bin/sh -c 'echo started $$ "$FOSTER_GATED"; exec sleep 30' & wait"#;
            let mut spec = f.spec("/bin/sh", &["-c", script], chain, 0);
            spec.env.push(("FOSTER_BIN".into(), Some(foster.into())));
            spec
        },
        false,
    );
    let h = match r.launched() {
        Ok(h) => h,
        Err(e) => {
            o.problems.push(e);
            return o;
        }
    };
    let line = r.out.expect("started", r.soon()).unwrap_or_default();
    let (g, gated) = line.split_once(' ').unwrap_or((&line, ""));
    let Ok(g) = g.parse::<i32>() else {
        o.problems.push("the grandchild never started".into());
        return o;
    };
    let gated = gated.trim().to_string();
    r.name(g, "grandchild", false);
    o.target = "started (grandchild)".into();
    let hid = Identity::of(h).map(|i| i.to_string()).unwrap_or_default();
    o.check(
        gated == format!("{hid};SIGHUP:exit:5s"),
        format!("grandchild FOSTER_GATED is {gated:?}"),
    );
    o.observed_parent = "helper (its own launcher), checked by foster exec".into();
    o.prctl = format!(
        "helper SIGTERM; grandchild {}",
        if gated.ends_with("SIGHUP:exit:5s") {
            "SIGHUP (next generation)"
        } else {
            "?"
        }
    );
    let t = sigkill(h);
    match wait_end(g, r.soon()) {
        Some((end, at)) => {
            o.time_ms = Some(ms(t, at));
            o.helper = format!("grandchild {}", end.text());
            o.path = Some(if end == End::Killed(libc::SIGHUP) {
                DeathPath::Signal
            } else {
                DeathPath::None
            });
            o.check(
                end == End::Killed(libc::SIGHUP),
                format!(
                    "expected the grandchild killed by SIGHUP, got {}",
                    end.text()
                ),
            );
        }
        None => o.problems.push("the grandchild outlived its parent".into()),
    }
    o.checked = "foster exec in the helper's child armed the next generation's signal (HUP)".into();
    o
}

static NOTE_FD: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);
const NOTE_STEP: u32 = 100;
const ROLE_STEP: u32 = 200;

extern "C" fn on_notify(sig: libc::c_int) {
    // SAFETY: getpid, getppid and write are async-signal-safe.
    let rec = unsafe {
        TraceRecord {
            step: NOTE_STEP,
            pid: libc::getpid(),
            ppid: libc::getppid(),
            value: sig,
        }
    };
    let mut b = [0u8; 16];
    b[0..4].copy_from_slice(&rec.step.to_ne_bytes());
    b[4..8].copy_from_slice(&rec.pid.to_ne_bytes());
    b[8..12].copy_from_slice(&rec.ppid.to_ne_bytes());
    b[12..16].copy_from_slice(&rec.value.to_ne_bytes());
    unsafe {
        libc::write(
            NOTE_FD.load(std::sync::atomic::Ordering::Relaxed),
            b.as_ptr().cast(),
            16,
        )
    };
}

fn announce(fd: RawFd, role: i32) {
    // SAFETY: no preconditions.
    let rec = unsafe {
        TraceRecord {
            step: ROLE_STEP + role as u32,
            pid: libc::getpid(),
            ppid: libc::getppid(),
            value: 0,
        }
    };
    let mut b = [0u8; 16];
    b[0..4].copy_from_slice(&rec.step.to_ne_bytes());
    b[4..8].copy_from_slice(&rec.pid.to_ne_bytes());
    b[8..12].copy_from_slice(&rec.ppid.to_ne_bytes());
    write_all(fd, &b);
}

fn reap_forever() -> ! {
    loop {
        let mut st = 0;
        // SAFETY: a subreaper reaping its own (adopted) children.
        if unsafe { libc::waitpid(-1, &mut st, 0) } < 0 {
            unsafe { libc::pause() };
        }
    }
}

fn nested_subreaper(r: &mut Root) -> Outcome {
    let mut o = Outcome::default();
    let fd = r.fds.trace_w;
    let a = fork_run(move || {
        // SAFETY: prctl with integers, in a forked single-threaded child; likewise below.
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
        announce(fd, 1);
        fork_run(move || {
            unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
            announce(fd, 2);
            fork_run(move || {
                announce(fd, 3);
                let me = Identity::current().expect("identity");
                fork_run(move || {
                    NOTE_FD.store(fd, std::sync::atomic::Ordering::Relaxed);
                    let notify: Policy = "USR1:notify:1s".parse().expect("valid");
                    // SAFETY: installs an async-signal-safe handler.
                    unsafe {
                        let mut act: libc::sigaction = std::mem::zeroed();
                        act.sa_sigaction = on_notify as *const () as usize;
                        libc::sigaction(libc::SIGUSR1, &act, std::ptr::null_mut());
                    }
                    let plan =
                        GatePlan::new(me, &notify, SignalSetup::Consumed).with_trace(Trace {
                            fd,
                            go_fd: -1,
                            barriers: 0,
                        });
                    if let Err(s) = plan.run() {
                        return s.exit_status();
                    }
                    loop {
                        unsafe { libc::pause() };
                    }
                });
                loop {
                    unsafe { libc::pause() };
                }
            });
            reap_forever()
        });
        reap_forever()
    });
    let mut pids = [0i32; 4];
    pids[0] = a;
    for role in 1..=3 {
        match r.trace.wait_for(r.soon(), |t| t.step == ROLE_STEP + role) {
            Some(t) => pids[role as usize] = t.pid,
            None => {
                o.problems
                    .push(format!("process {role} never announced itself"));
                return o;
            }
        }
    }
    let (b, c) = (pids[2], pids[3]);
    r.name(a, "subreaper A", true);
    r.name(b, "subreaper B", true);
    r.name(c, "launcher C", true);
    let Some(passed) = r.trace.wait_step(0, Step::Passed, r.soon()) else {
        o.problems.push("the helper never passed its gate".into());
        return o;
    };
    let d = passed.pid;
    r.name(d, "helper", false);
    o.prctl = r.armed_text(d, libc::SIGUSR1);
    o.observed_parent = r.observed_at_check(d);
    o.expected_parent = "launcher C".into();
    let t = sigkill(c);
    let first = r.trace.wait_for(r.soon(), |t| t.step == NOTE_STEP);
    sigkill(b);
    let second = r.trace.wait_for(r.soon(), |t| {
        t.step == NOTE_STEP
            && Some(t.pid) == first.map(|f| f.pid)
            && t != &first.unwrap_or_default()
    });
    let adopted: Vec<String> = [first, second]
        .iter()
        .map(|n| {
            n.map(|n| r.role(n.ppid))
                .unwrap_or_else(|| "no notification".into())
        })
        .collect();
    o.observed_parent = format!(
        "{} at its check; after C died: {}; after B died: {}",
        o.observed_parent, adopted[0], adopted[1]
    );
    o.time_ms = first.map(|_| ms(t, Instant::now()));
    o.check(
        first.is_some_and(|n| n.ppid == b),
        format!(
            "after C died the helper's parent was {}, expected subreaper B",
            adopted[0]
        ),
    );
    o.check(
        second.is_some_and(|n| n.ppid == a),
        format!(
            "after B died the helper's parent was {}, expected subreaper A",
            adopted[1]
        ),
    );
    o.path = Some(if first.is_some() && second.is_some() {
        DeathPath::Signal
    } else {
        DeathPath::None
    });
    let end = {
        sigkill(d);
        "notified twice (idempotent), then ended by the harness (SIGKILL)".to_string()
    };
    o.helper = end;
    o.target = "none (raw helper)".into();
    o.checked = "orphan adopted by the nearest living subreaper each time, never by PID 1; one notification per adoption".into();
    // D is a harness-ended process; register it so teardown does not count it.
    r.harness.push(d);
    o
}

fn stale_parent(r: &mut Root) -> Outcome {
    let mut o = Outcome::default();
    let foster = r.foster.to_string_lossy().into_owned();
    r.simple_supervisor(
        move |f| {
            let script = r#"/bin/sh -c '"$FOSTER_BIN" exec -- /bin/echo started; echo "stale $?"'
FOSTER_PARENT="$$:1" "$FOSTER_BIN" exec -- /bin/echo started; echo "reused $?""#;
            let mut spec = f.spec("/bin/sh", &["-c", script], Policy::term(), 0);
            spec.env.push(("FOSTER_BIN".into(), Some(foster.into())));
            spec
        },
        true,
    );
    if let Err(e) = r.launched() {
        o.problems.push(e);
        return o;
    }
    let stale = r.out.expect("stale", r.soon());
    let reused = r.out.expect("reused", r.soon());
    let _ = r.sup.expect("status", r.soon());
    o.check(
        stale.as_deref() == Some("120"),
        format!("inherited FOSTER_PARENT: foster exec gave {stale:?}, expected 120"),
    );
    o.check(
        reused.as_deref() == Some("120"),
        format!("reused pid with another start time: foster exec gave {reused:?}, expected 120"),
    );
    let mut started = false;
    let mut msgs = 0;
    while let Some(l) = r.err.next_line(Instant::now()) {
        msgs += usize::from(l.contains("refused") || l.contains("is gone"));
    }
    while let Some(l) = r.out.next_line(Instant::now()) {
        started |= l.starts_with("started");
    }
    o.check(msgs == 2, format!("{msgs} refusal messages, expected 2"));
    o.check(!started, "a target started under a stale identity");
    o.observed_parent = "not the expected process (checked by pid and start time)".into();
    o.expected_parent = "an older generation / a reused pid".into();
    o.prctl = "armed, then the check failed".into();
    o.path = Some(DeathPath::Check);
    o.helper = format!(
        "foster exec exited {} and {}",
        stale.unwrap_or_default(),
        reused.unwrap_or_default()
    );
    o.target = if started {
        "started".into()
    } else {
        "never started".into()
    };
    o.checked = "identity compared with pid and start time; stale and reused values refused".into();
    o
}

fn lifeline_only(r: &mut Root) -> Outcome {
    let foster = r.foster.to_string_lossy().into_owned();
    let mut o = Outcome::default();
    let s = r.simple_supervisor(
        move |f| {
            let policy = Policy::term().with_grace(Duration::from_secs(2));
            f.spec(
                &foster,
                &["__qualify-internal", "lifeline-helper"],
                policy,
                0,
            )
        },
        false,
    );
    let h = match r.launched() {
        Ok(h) => h,
        Err(e) => {
            o.problems.push(e);
            return o;
        }
    };
    if r.out.expect("started", r.soon()).is_none() {
        o.problems.push("the helper never started".into());
        return o;
    }
    o.target = "started".into();
    let cleared = r.out.expect("pdeathsig", r.soon());
    o.check(
        cleared.as_deref() == Some("0"),
        format!("the helper did not clear its signal: {cleared:?}"),
    );
    r.trace.drain();
    o.prctl = format!(
        "{}; in-process gate re-armed, then cleared to 0",
        r.armed_text(h, libc::SIGTERM)
    );
    o.observed_parent = r.observed_at_check(h);
    let t = r.kill_and_reap(s);
    match wait_end(h, r.soon()) {
        Some((end, at)) => {
            o.time_ms = Some(ms(t, at));
            o.helper = end.text();
            o.path = Some(if end == End::Exited(gate::EXIT_LIFELINE) {
                DeathPath::Lifeline
            } else {
                DeathPath::None
            });
            o.check(
                end == End::Exited(gate::EXIT_LIFELINE),
                format!("expected exit 124, got {}", end.text()),
            );
        }
        None => o
            .problems
            .push("the helper outlived its supervisor: the lifeline did not report".into()),
    }
    o.checked = "no signal was armed any more; the pidfd lifeline reported the loss".into();
    o
}

/// The helper of the `lifeline-only` case (`foster __qualify-internal lifeline-helper`): the
/// in-process gate, then its signal cleared (as a later credential change would), then serving
/// until the lifeline ends it.
pub fn lifeline_helper() -> i32 {
    let gated = match gate::enter(None) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("lifeline-helper: {e}");
            return e.exit_status();
        }
    };
    // SAFETY: prctl with integers.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, 0, 0, 0, 0) };
    let mut got: libc::c_int = -1;
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
    println!("started");
    println!("pdeathsig {got}");
    // Serve: each operation under a guard, until admission closes.
    while let Ok(_guard) = gated.admission.admit() {
        if gated
            .admission
            .wait_requested(Duration::from_secs(60))
            .is_some()
        {
            break;
        }
    }
    // The watcher owns shutdown and exits the process; wait for it.
    loop {
        std::thread::park();
    }
}

/// A Rust program behind the in-process gate (`foster __qualify-internal enter-helper`):
/// [`gate::enter`] with what the environment says, then `entered PPID` on standard output
/// (`getppid()` as the gate saw it). It serves
/// until its standard input ends (then exits 0) or, with the `notify` reaction, until the loss
/// reaches its event loop: it prints `loss PATH`, drains admission within the grace and exits
/// 0, owning its shutdown. (With `exit` the gate's watcher ends it, with `kill` the kernel.)
pub fn enter_helper() -> i32 {
    use std::io::{Read, Write};
    let gated = match gate::enter(None) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("enter-helper: {e}");
            return e.exit_status();
        }
    };
    let say = |line: &str| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    };
    // SAFETY: plain getppid.
    let ppid = unsafe { libc::getppid() };
    let _ = std::thread::Builder::new().name("stdin".into()).spawn(|| {
        let mut buf = [0u8; 64];
        let mut input = std::io::stdin().lock();
        while matches!(input.read(&mut buf), Ok(n) if n > 0) {}
        std::process::exit(0)
    });
    // Said once every thread exists: creating a thread blocks every signal in the creating
    // thread for a moment, which a reader of /proc/PID/status could see.
    say(&format!("entered {ppid}"));
    match gated.shutdown_owner {
        Some(owner) => {
            if let Ok(loss) = gated.losses.recv() {
                say(&format!("loss {}", loss.path));
                let _ = owner.drain(gated.expectation.policy.grace);
            }
            0
        }
        None => loop {
            std::thread::park();
        },
    }
}

/// The end a wait status describes.
fn end_of_status(status: i32) -> End {
    if libc::WIFSIGNALED(status) {
        End::Killed(libc::WTERMSIG(status))
    } else {
        End::Exited(libc::WEXITSTATUS(status))
    }
}

// ---------------------------------------------------------------------------------------------
// The notify reaction.

fn notify(r: &mut Root) -> Outcome {
    let foster = r.foster.to_string_lossy().into_owned();
    let mut o = Outcome::default();
    let s = r.simple_supervisor(
        move |f| {
            let policy =
                Policy::new(libc::SIGTERM, Reaction::Notify).with_grace(Duration::from_secs(2));
            let mut spec = f.spec(&foster, &["__qualify-internal", "enter-helper"], policy, 0);
            // Served until the loss (its standard input ends only at the case's teardown).
            spec.stdin = SupFds::dup(f.hold_r);
            spec
        },
        false,
    );
    let h = match r.launched() {
        Ok(h) => h,
        Err(e) => {
            o.problems.push(e);
            return o;
        }
    };
    if r.out.expect("entered", r.soon()).is_none() {
        o.problems
            .push("the helper never passed its in-process gate".into());
        return o;
    }
    o.target = "started".into();
    r.trace.drain();
    o.prctl = r.armed_text(h, libc::SIGTERM);
    o.observed_parent = r.observed_at_check(h);
    let t = r.kill_and_reap(s);
    let loss = r.out.expect("loss", r.soon());
    o.path = match loss.as_deref() {
        Some("signal") => Some(DeathPath::Signal),
        Some("lifeline") => Some(DeathPath::Lifeline),
        _ => None,
    };
    o.check(
        o.path == Some(DeathPath::Signal),
        format!("expected the loss by the signal in the program's event loop, got {loss:?}"),
    );
    match wait_end(h, r.soon()) {
        Some((end, at)) => {
            o.time_ms = Some(ms(t, at));
            o.helper = format!(
                "told of the loss ({}), exited {}",
                loss.unwrap_or_default(),
                {
                    match end {
                        End::Exited(c) => c.to_string(),
                        e => e.text(),
                    }
                }
            );
            o.check(
                end == End::Exited(0),
                format!(
                    "expected the program to end itself with 0, got {}",
                    end.text()
                ),
            );
        }
        None => o.problems.push("the helper outlived the loss".into()),
    }
    o.checked = "the signal closed admission and reached the program's event loop, which owned \
                 its shutdown: drained within the grace, exited 0"
        .into();
    o
}

// ---------------------------------------------------------------------------------------------
// A parent in another PID namespace.

/// The supervisor of the PID-namespace cases: it makes its children's PID namespace a new one,
/// forks that namespace's init (a harness process that only waits for the case's teardown; it
/// says `init PID`), then runs `args` twice with itself as the expected parent: once without
/// `FOSTER_PARENT_PIDFD` (it says `status END`), once with a pidfd of itself under that name (it
/// says `launched PID`), then holds. Each child's parent (this supervisor) lives outside the
/// child's namespace: `getppid()` is 0 there. At this supervisor's death its children go to the
/// nearest subreaper of its own namespace, the case root.
fn pidns_supervisor(fds: SupFds, foster: &str, args: &[&str]) -> i32 {
    use std::process::{Command, Stdio};
    let Ok(me) = Identity::current() else {
        return 70;
    };
    // SAFETY: unshare in a single-threaded process (forked by the case root).
    if unsafe { libc::unshare(libc::CLONE_NEWPID) } != 0 {
        fds.say(&format!(
            "error unshare: {}",
            std::io::Error::last_os_error()
        ));
        return 71;
    }
    // The namespace's init (PID 1 there), so that the programs are not: the kernel discards a
    // signal at its default disposition sent to a namespace's init.
    let init = fork_run(move || {
        fds.hold();
        0
    });
    if init < 0 {
        return 72;
    }
    fds.say(&format!("init {init}"));
    let command = |pidfd: Option<RawFd>| {
        let mut c = Command::new(foster);
        crate::signal::reserved_as_inherited(&mut c);
        c.args(args)
            .env(crate::policy::ENV_PARENT, me.to_string())
            .env(crate::policy::ENV_POLICY, "TERM:exit:2s")
            .env("RUST_LOG", "foster=info")
            .env_remove(gate::ENV_GATED)
            .env_remove(gate::ENV_PARENT_PIDFD);
        if let Some(fd) = pidfd {
            c.env(gate::ENV_PARENT_PIDFD, fd.to_string());
        }
        if let (Some(i), Some(o), Some(e)) = (
            SupFds::dup(fds.hold_r),
            SupFds::dup(fds.out_w),
            SupFds::dup(fds.err_w),
        ) {
            c.stdin(Stdio::from(i))
                .stdout(Stdio::from(o))
                .stderr(Stdio::from(e));
        }
        c
    };
    // Without the pidfd: the gate cannot tell.
    match command(None).status() {
        Ok(st) => {
            use std::os::unix::process::ExitStatusExt;
            fds.say(&format!("status {}", end_of_status(st.into_raw()).wire()));
        }
        Err(e) => fds.say(&format!("error {e}")),
    }
    // With a pidfd of this supervisor, inherited (not close-on-exec).
    let Ok(own) = pidfd_open(me.pid) else {
        return 73;
    };
    // SAFETY: a duplicate without close-on-exec, above the standard descriptors.
    let fd = unsafe { libc::fcntl(own.as_raw_fd(), libc::F_DUPFD, 10) };
    match command(Some(fd)).spawn() {
        Ok(child) => fds.say(&format!("launched {}", child.id())),
        Err(e) => fds.say(&format!("error {e}")),
    }
    fds.hold();
    0
}

fn other_pidns(r: &mut Root, in_process: bool) -> Outcome {
    let mut o = Outcome::default();
    let foster = r.foster.to_string_lossy().into_owned();
    let (args, ready): (&[&str], &str) = if in_process {
        (&["__qualify-internal", "enter-helper"], "entered")
    } else {
        (
            &[
                "-v",
                "exec",
                "--",
                "/bin/sh",
                "-c",
                r#"echo "started $PPID"; exec sleep 30"#,
            ],
            "started",
        )
    };
    let s = r.supervisor(move |fds| pidns_supervisor(fds, &foster, args));
    match r.sup.expect("init", r.soon()).and_then(|p| p.parse().ok()) {
        Some(init) => r.name(init, "namespace init", true),
        None => {
            o.problems.push("no PID namespace".into());
            return o;
        }
    }
    // Without the pidfd.
    let without = r.sup.next_line(r.soon()).unwrap_or_default();
    let without = without.strip_prefix("status ").and_then(End::parse);
    o.check(
        without == Some(End::Exited(gate::EXIT_CANNOT_TELL)),
        format!("without FOSTER_PARENT_PIDFD: expected exit 122, got {without:?}"),
    );
    // With it.
    let h = match r.launched() {
        Ok(h) => h,
        Err(e) => {
            o.problems.push(e);
            return o;
        }
    };
    let seen = r.out.expect(ready, r.soon());
    o.check(
        seen.as_deref() == Some("0"),
        format!("the program did not say getppid() was 0: {seen:?}"),
    );
    o.target = if seen.is_some() {
        "started".into()
    } else {
        "never started".into()
    };
    let mut vouched = false;
    while let Some(l) = r.err.next_line(Instant::now()) {
        vouched |= l.contains("getppid() is 0") && l.contains("pidfd says it lives");
    }
    if !in_process {
        o.check(vouched, "foster exec did not say the pidfd decided");
    }
    o.observed_parent = "none visible (0); the inherited pidfd said the supervisor lives".into();
    o.prctl = format!(
        "{} armed SIGTERM",
        if in_process {
            "the in-process gate"
        } else {
            "foster exec"
        }
    );
    let t = r.kill_and_reap(s);
    let want = if in_process {
        End::Exited(128 + libc::SIGTERM)
    } else {
        End::Killed(libc::SIGTERM)
    };
    match wait_end(h, r.soon()) {
        Some((end, at)) => {
            o.time_ms = Some(ms(t, at));
            o.path = Some(if end == want {
                DeathPath::Signal
            } else {
                DeathPath::None
            });
            o.helper = format!(
                "without the pidfd: {}; with it: {}",
                without.map_or_else(|| "no status".into(), |e| e.text()),
                end.text()
            );
            o.check(
                end == want,
                format!("expected {}, got {}", want.text(), end.text()),
            );
        }
        None => o
            .problems
            .push("the program outlived its supervisor in the other namespace".into()),
    }
    o.checked = "getppid() is 0 across PID namespaces: without the pidfd the gate refuses (122); \
                 with it the gate passes on the pidfd's word, and the armed signal reports the \
                 supervisor's death"
        .into();
    o
}

fn other_pidns_exec(r: &mut Root) -> Outcome {
    other_pidns(r, false)
}

fn other_pidns_in_process(r: &mut Root) -> Outcome {
    other_pidns(r, true)
}
