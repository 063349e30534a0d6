//! The harness a case runs in: the case root, observing ends, the checks every case shares.
//!
//! Owns what is the same for every case: the case root's state ([`Root`]: its pipes, the roles
//! of the pids it knows, its deadline), forking supervisors while single-threaded and the
//! descriptors they get ([`SupFds`]), observing how a process ended ([`wait_end`], [`End`]), the
//! checks every case makes ([`Outcome::ended`]: the end, the path it shows, the expected end;
//! what `prctl` read back, the parent seen at the check, whether the target started), the
//! teardown that kills and reaps by pid whatever the case left, and [`run_in_root`], which turns
//! a case's [`Outcome`] into its [`CaseRecord`]. The cases themselves are in [`super::cases`].

use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::barrier::{self, LineReader, TraceReader, pipe, write_all};
use super::{CaseRecord, Verdict};
use crate::gate::policy::Policy;
use crate::gate::spawner::{LaunchSpec, Spawner};
use crate::gate::{self, DeathPath, Step, Trace};
use crate::process::identity::pidfd_open;

/// One case: its name, what it is about, whether it needs root, and its scenario.
pub struct CaseDef {
    pub name: &'static str,
    /// The death the case causes, in words (the matrix's second column).
    pub death: &'static str,
    /// The expected outcome, in words.
    pub expect: &'static str,
    /// Why the case needs root, when it does.
    pub needs_root: Option<&'static str>,
    /// The scenario, run in the case root.
    pub(super) run: fn(&mut Root) -> Outcome,
}

/// How a process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    Exited(i32),
    Killed(i32),
}

impl End {
    /// The end in words (`exited 120 (parent gone)`, `killed by SIGTERM`).
    pub fn text(self) -> String {
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
            End::Killed(s) => format!("killed by {}", crate::process::signal::name(s)),
        }
    }

    /// Reads [`End::wire`]'s form back.
    pub(super) fn parse(s: &str) -> Option<End> {
        let (k, v) = s.split_once(' ')?;
        let v: i32 = v.trim().parse().ok()?;
        match k {
            "exited" => Some(End::Exited(v)),
            "killed" => Some(End::Killed(v)),
            _ => None,
        }
    }

    /// The end on a supervisor's pipe (`exited 120`, `killed 15`).
    pub(super) fn wire(self) -> String {
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

/// The end a wait status describes.
pub(super) fn end_of_status(status: i32) -> End {
    if libc::WIFSIGNALED(status) {
        End::Killed(libc::WTERMSIG(status))
    } else {
        End::Exited(libc::WEXITSTATUS(status))
    }
}

/// Waits for the end of `pid`, a child of the calling process (own or adopted), until the
/// deadline; reaps it. Returns the end and the monotonic time it was observed.
pub fn wait_end(pid: i32, deadline: Instant) -> Option<(End, Instant)> {
    let pidfd = pidfd_open(pid).ok();
    let mut retried = false;
    loop {
        // SAFETY: siginfo_t is plain integers: all zeros is a valid value.
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
        // SAFETY: `info` was zeroed, then filled by waitid: si_pid reads an initialised field.
        if r == 0 && unsafe { info.si_pid() } == pid {
            return Some((end_of(&info), now));
        }
        let echild = r != 0 && crate::base::sys::errno() == libc::ECHILD;
        if r != 0 && !echild && crate::base::sys::errno() != libc::EINTR {
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

/// An end as a case observed it: how the process ended and, when the case caused the death
/// and waited for the end itself, the milliseconds between the two.
#[derive(Clone, Copy, Debug)]
pub(super) struct Ended {
    pub(super) end: End,
    pub(super) time_ms: Option<f64>,
}

/// What a scenario found; turned into a [`CaseRecord`] by [`run_in_root`]. A field left empty
/// (or `None`) is shown empty (the path: `none`).
/// Why a case could not go on; its message becomes one of the case's problems.
#[derive(Debug, thiserror::Error)]
pub enum CaseError {
    /// The supervisor closed its output without a word.
    #[error("the supervisor said nothing")]
    Silent,
    /// The supervisor's line is not `launched PID`.
    #[error("bad line {0:?}")]
    BadLine(String),
    /// The supervisor reported its launch's failure.
    #[error("launch failed: {0}")]
    LaunchFailed(String),
    /// `foster run` wrote no launch event.
    #[error("foster run launched nothing")]
    NothingLaunched,
    /// A step of the case's own failed.
    #[error("{what}: {source}")]
    Io {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
}

#[derive(Default)]
pub(super) struct Outcome {
    pub(super) expected_parent: String,
    pub(super) observed_parent: String,
    pub(super) prctl: String,
    pub(super) path: Option<DeathPath>,
    pub(super) helper: String,
    pub(super) target: String,
    pub(super) time_ms: Option<f64>,
    /// Empty when every expectation held; otherwise what did not.
    pub(super) problems: Vec<String>,
    pub(super) checked: String,
}

impl Outcome {
    /// Records `what` as a problem unless `ok`.
    pub(super) fn check(&mut self, ok: bool, what: impl Into<String>) {
        if !ok {
            self.problems.push(what.into());
        }
    }

    /// The block a case ends with: how its process ended, the path that shows, and the check
    /// against the expected end. Records the end in words (`describe`, usually [`End::text`])
    /// and its time when it was timed; sets the path to `shows` when the end is `want` and to
    /// none when it is not (`shows` of `None`: the end does not tell the path, the case sets it
    /// itself); an end other than `want` is a problem naming both, no end at all the problem
    /// `missing`.
    pub(super) fn ended(
        &mut self,
        seen: Option<Ended>,
        want: End,
        shows: Option<DeathPath>,
        describe: impl FnOnce(End) -> String,
        missing: &str,
    ) {
        let Some(Ended { end, time_ms }) = seen else {
            self.problems.push(missing.into());
            return;
        };
        if time_ms.is_some() {
            self.time_ms = time_ms;
        }
        self.helper = describe(end);
        if let Some(path) = shows {
            self.path = Some(if end == want { path } else { DeathPath::None });
        }
        self.check(
            end == want,
            format!("expected {}, got {}", want.text(), end.text()),
        );
    }
}

/// How a target's start is shown.
pub(super) fn started_text(started: bool) -> String {
    if started {
        "started".into()
    } else {
        "never started".into()
    }
}

/// The descriptors a supervisor needs, as raw numbers valid in the forked process.
#[derive(Clone, Copy)]
pub(super) struct SupFds {
    /// The write end of the gate's trace pipe.
    pub(super) trace_w: RawFd,
    go_r: RawFd,
    pub(super) out_w: RawFd,
    pub(super) err_w: RawFd,
    sup_w: RawFd,
    /// Readable (end of file) once the case root tears the case down.
    pub(super) hold_r: RawFd,
}

impl SupFds {
    pub(super) fn say(&self, line: &str) {
        write_all(self.sup_w, format!("{line}\n").as_bytes());
    }

    /// Blocks until the case root closes the hold pipe (or kills this process).
    pub(super) fn hold(&self) {
        let mut b = [0u8; 1];
        loop {
            // SAFETY: reads one byte.
            let n = unsafe { libc::read(self.hold_r, b.as_mut_ptr().cast(), 1) };
            if n < 0 && crate::base::sys::errno() == libc::EINTR {
                continue;
            }
            return;
        }
    }

    pub(super) fn dup(fd: RawFd) -> Option<OwnedFd> {
        // SAFETY: duplicates a descriptor we hold, close-on-exec.
        let d = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
        // SAFETY: `d` was just returned by fcntl(F_DUPFD_CLOEXEC): open and owned by nobody else.
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
    pub(super) fn spec(
        &self,
        program: &str,
        args: &[&str],
        policy: Policy,
        barriers: u8,
    ) -> LaunchSpec {
        let mut s = LaunchSpec::new(program, args.iter().map(OsString::from), policy);
        s.stdout = SupFds::dup(self.out_w);
        s.stderr = SupFds::dup(self.err_w);
        s.trace = Some(self.trace(barriers));
        s
    }

    /// Launches, says `launched PID` or `error ...`; for a failed launch that created a child,
    /// reaps it (this supervisor is its parent) and says `status ...`. Returns the pid.
    pub(super) fn launch(&self, sp: &Spawner, spec: LaunchSpec) -> Option<i32> {
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

    pub(super) fn reap_and_report(&self, pid: i32) {
        if let Some((end, _)) = wait_end(pid, Instant::now() + Duration::from_secs(30)) {
            self.say(&format!("status {}", end.wire()));
        }
    }
}

/// The case root's state: its pipes, the roles of the pids it knows, its deadline.
pub struct Root {
    /// The case root's pid (the harness subreaper).
    pub(super) me: i32,
    /// The `foster` binary the case runs.
    pub(super) foster: PathBuf,
    pub(super) fds: SupFds,
    /// The gate's trace records.
    pub(super) trace: TraceReader,
    go_w: OwnedFd,
    /// The standard output of the case's programs.
    pub(super) out: LineReader,
    /// Their standard error.
    pub(super) err: LineReader,
    /// What supervisors say (`launched PID`, `status END`, `error ...`).
    pub(super) sup: LineReader,
    hold_w: Option<OwnedFd>,
    _keep: Vec<OwnedFd>,
    roles: Vec<(i32, String)>,
    /// Processes the harness itself runs and ends (not counted as left running).
    pub(super) harness: Vec<i32>,
    deadline: Instant,
}

/// Forks a process that runs `f` and exits with what it returns (101 when it panics).
pub(super) fn fork_run(f: impl FnOnce() -> i32) -> i32 {
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

/// SIGKILL to `pid`; returns when it was sent.
pub(super) fn sigkill(pid: i32) -> Instant {
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

    /// A deadline for one wait of the case: 15 s from now, within the case's own deadline.
    pub(super) fn soon(&self) -> Instant {
        self.deadline.min(Instant::now() + Duration::from_secs(15))
    }

    /// The role of `pid` in this case (`supervisor`, `helper`...), for the record.
    pub(super) fn role(&self, pid: i32) -> String {
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

    /// Names `pid`'s role; `harness`: a process the harness runs and ends itself.
    pub(super) fn name(&mut self, pid: i32, role: &str, harness: bool) {
        self.roles.push((pid, role.into()));
        if harness {
            self.harness.push(pid);
        }
    }

    /// Forks a supervisor that runs `f` with the pipes; registers it as `supervisor`.
    pub(super) fn supervisor(&mut self, f: impl FnOnce(SupFds) -> i32) -> i32 {
        let fds = self.fds;
        let pid = fork_run(move || f(fds));
        self.name(pid, "supervisor", true);
        pid
    }

    /// The supervisor most cases use: a Spawner launching `spec` built by `make`, then holding.
    pub(super) fn simple_supervisor(
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

    /// Reads the supervisor's `launched PID` and names that pid the helper.
    pub(super) fn launched(&mut self) -> Result<i32, CaseError> {
        let line = self.sup.next_line(self.soon()).ok_or(CaseError::Silent)?;
        match line.strip_prefix("launched ") {
            Some(p) => {
                let pid: i32 = p.parse().map_err(|_| CaseError::BadLine(line.clone()))?;
                self.name(pid, "helper", false);
                Ok(pid)
            }
            None => Err(CaseError::LaunchFailed(line)),
        }
    }

    pub(super) fn release(&self) {
        write_all(self.go_w.as_raw_fd(), b"g");
    }

    /// Kills a harness process of this tree and reaps it (it is the root's child).
    pub(super) fn kill_and_reap(&mut self, pid: i32) -> Instant {
        let t = sigkill(pid);
        let _ = wait_end(pid, self.soon());
        t
    }

    /// Whether the target printed `started` (reads only what is already in the pipe).
    pub(super) fn target_started(&mut self) -> bool {
        let mut started = false;
        while let Some(l) = self.out.next_line(Instant::now()) {
            started |= l.starts_with("started");
        }
        started
    }

    /// What `prctl` did in `pid`'s gate, checked against `sig`, from its trace.
    pub(super) fn armed_text(&self, pid: i32, sig: i32) -> String {
        match self.trace.last(pid, Step::Armed) {
            Some(r) if r.value == sig => format!(
                "PR_SET_PDEATHSIG {}, read back {}",
                crate::process::signal::name(sig),
                crate::process::signal::name(r.value)
            ),
            Some(r) => format!(
                "read back {} instead of {}",
                r.value,
                crate::process::signal::name(sig)
            ),
            None => "not reached".into(),
        }
    }

    /// The parent `pid`'s gate saw at its check, by role, from its trace.
    pub(super) fn observed_at_check(&self, pid: i32) -> String {
        match self.trace.last(pid, Step::Checked) {
            Some(r) => self.role(r.ppid),
            None => "not checked (ended before)".into(),
        }
    }

    /// Waits for the end of `pid` (reaping it), timed from the death the case caused at
    /// `death`.
    pub(super) fn end_after(&self, pid: i32, death: Instant) -> Option<Ended> {
        wait_end(pid, self.soon()).map(|(end, at)| Ended {
            end,
            time_ms: Some(ms(death, at)),
        })
    }

    /// The end the supervisor reported for its child (`status END`), untimed.
    pub(super) fn reported_end(&mut self) -> Option<Ended> {
        self.sup
            .expect("status", self.soon())
            .and_then(|s| End::parse(&s))
            .map(|end| Ended { end, time_ms: None })
    }

    /// A launch the supervisor reported failed: its error, and the end of the child it created
    /// and reaped when it says one. `None` (a problem recorded) when it reported no error.
    pub(super) fn failed_launch(&mut self, o: &mut Outcome) -> Option<(String, Option<Ended>)> {
        let line = self.sup.next_line(self.soon());
        let Some(err) = line
            .as_deref()
            .and_then(|l| l.strip_prefix("error "))
            .map(String::from)
        else {
            o.problems
                .push(format!("expected a launch error, got {line:?}"));
            return None;
        };
        Some((err, self.reported_end()))
    }

    /// Ends everything left in the tree, by pid: the root's children (own and adopted) are
    /// killed and reaped until none is left. Returns how many non-harness processes were still
    /// running.
    fn teardown(&mut self) -> usize {
        self.hold_w = None;
        let mut leftovers = 0;
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let kids = crate::process::tree::children_of(self.me).unwrap_or_default();
            for kid in kids.iter().filter(|k| !k.is_zombie()) {
                if !self.harness.contains(&kid.pid) {
                    leftovers += 1;
                }
                sigkill(kid.pid);
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

/// Whether the case root runs as root (some cases need it).
fn is_root() -> bool {
    // SAFETY: no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// How many threads the calling process has.
fn threads_of_self() -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|d| d.count())
        .unwrap_or(0)
}

/// The entry point of a case root (`foster __qualify-internal case NAME`): runs the case and
/// returns its record. Must be called in a fresh, single-threaded process.
// Long: the case root's life in order: set up, run, tear down, record.
pub fn run_in_root(def: &CaseDef) -> CaseRecord {
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

/// Milliseconds from `from` to `to`.
pub(super) fn ms(from: Instant, to: Instant) -> f64 {
    to.saturating_duration_since(from).as_secs_f64() * 1e3
}
