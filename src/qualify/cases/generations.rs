//! Generations, adoption, stale identities, the lifeline, and the helper programs those cases
//! run.

use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use crate::gate::policy::Policy;
use crate::gate::{self, DeathPath, GatePlan, SignalSetup, Step, Trace, TraceRecord};
use crate::process::identity::Identity;
use crate::qualify::barrier::write_all;
use crate::qualify::harness::{End, Outcome, Root, fork_run, ms, sigkill, started_text};

pub(super) fn grandchild_next_generation(r: &mut Root) -> Outcome {
    let mut o = Outcome::default();
    let foster = r.foster.to_string_lossy().into_owned();
    r.simple_supervisor(
        move |f| {
            let chain: Policy = "TERM:exit:5s;HUP:exit:5s".parse().expect("valid");
            let script = concat!(
                r#""$FOSTER_BIN" exec -- /bin/sh -c "#,
                r#"'echo started $$ "$FOSTER_GATED"; exec sleep 30' & wait"#
            );
            let mut spec = f.spec("/bin/sh", &["-c", script], chain, 0);
            spec.env.push(("FOSTER_BIN".into(), Some(foster.into())));
            spec
        },
        false,
    );
    let h = match r.launched() {
        Ok(h) => h,
        Err(e) => {
            o.problems.push(e.to_string());
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
    o.ended(
        r.end_after(g, t),
        End::Killed(libc::SIGHUP),
        Some(DeathPath::Signal),
        |e| format!("grandchild {}", e.text()),
        "the grandchild outlived its parent",
    );
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
    // SAFETY: writes `b`, a live stack buffer, to a descriptor the caller holds; async-signal-safe.
    unsafe {
        libc::write(
            NOTE_FD.load(std::sync::atomic::Ordering::Relaxed),
            b.as_ptr().cast(),
            16,
        )
    };
}

pub(super) fn announce(fd: RawFd, role: i32) {
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

pub(super) fn reap_forever() -> ! {
    loop {
        let mut st = 0;
        // SAFETY: a subreaper reaping its own (adopted) children.
        if unsafe { libc::waitpid(-1, &mut st, 0) } < 0 {
            // SAFETY: pause has no preconditions.
            unsafe { libc::pause() };
        }
    }
}

/// The helper's notes after C's death (at `t`) and then B's: each adopter checked against
/// `a` and `b` (the subreapers A and B), written into `o`.
fn two_adoptions(
    r: &mut Root,
    o: &mut Outcome,
    (a, b): (i32, i32),
    t: Instant,
) -> (Option<TraceRecord>, Option<TraceRecord>) {
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
    (first, second)
}

/// Subreaper A, subreaper B under it, launcher C under B and the helper D under C, each
/// announcing itself on the trace `fd`; A's pid.
fn subreaper_chain(fd: RawFd) -> i32 {
    fork_run(move || {
        // SAFETY: prctl with integers, in a forked single-threaded child; likewise below.
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
        announce(fd, 1);
        fork_run(move || {
            // SAFETY: prctl with integer arguments on the calling process.
            unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
            announce(fd, 2);
            fork_run(move || {
                announce(fd, 3);
                let me = Identity::current().expect("identity");
                fork_run(move || notified_helper(me, fd));
                loop {
                    // SAFETY: pause has no preconditions.
                    unsafe { libc::pause() };
                }
            });
            reap_forever()
        });
        reap_forever()
    })
}

/// Helper D: a notify policy on USR1 (its handler writes a note on the trace `fd`), the gate
/// against `me`, then waits.
fn notified_helper(me: Identity, fd: RawFd) -> i32 {
    NOTE_FD.store(fd, std::sync::atomic::Ordering::Relaxed);
    let notify: Policy = "USR1:notify:1s".parse().expect("valid");
    // SAFETY: installs an async-signal-safe handler.
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = on_notify as *const () as usize;
        libc::sigaction(libc::SIGUSR1, &act, std::ptr::null_mut());
    }
    let plan = GatePlan::new(me, &notify, SignalSetup::Consumed).with_trace(Trace {
        fd,
        go_fd: -1,
        barriers: 0,
    });
    if let Err(s) = plan.run() {
        return s.exit_status();
    }
    loop {
        // SAFETY: pause has no preconditions.
        unsafe { libc::pause() };
    }
}

pub(super) fn nested_subreaper(r: &mut Root) -> Outcome {
    let mut o = Outcome::default();
    let a = subreaper_chain(r.fds.trace_w);
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
    let (first, second) = two_adoptions(r, &mut o, (a, b), t);
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
    o.checked = "orphan adopted by the nearest living subreaper each time, never by PID 1; one \
                 notification per adoption"
        .into();
    // D is a harness-ended process; register it so teardown does not count it.
    r.harness.push(d);
    o
}

pub(super) fn stale_parent(r: &mut Root) -> Outcome {
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
        o.problems.push(e.to_string());
        return o;
    }
    let stale = r.out.expect("stale", r.soon());
    let reused = r.out.expect("reused", r.soon());
    let _ = r.reported_end();
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
    o.target = started_text(started);
    o.checked = "identity compared with pid and start time; stale and reused values refused".into();
    o
}

pub(super) fn lifeline_only(r: &mut Root) -> Outcome {
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
            o.problems.push(e.to_string());
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
    o.ended(
        r.end_after(h, t),
        End::Exited(gate::EXIT_LIFELINE),
        Some(DeathPath::Lifeline),
        End::text,
        "the helper outlived its supervisor: the lifeline did not report",
    );
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
