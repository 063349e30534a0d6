//! The signal state a program launched by foster starts with, on every launch path: `foster
//! exec`, `foster exec --watch`, `foster run`, `foster init` and `foster demo`. What foster
//! changed for itself is not passed on (the SIGPIPE that Rust's runtime ignores, the signals
//! foster blocks to read them from a signalfd, its handlers); what foster's caller set is kept
//! (tini's rule), except that a gated program's parent-death signal is neither blocked nor
//! ignored. Read from the launched
//! program's own `/proc/PID/status` (`SigBlk`, `SigIgn`); `docs/signals.md` is the same table.

use crate::common;
use common::LIMIT;

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Dir, processes_with_env, sigbit, status_sigset};
use foster::process::identity::Identity;

const FOSTER: &str = env!("CARGO_BIN_EXE_foster");

/// The launched program: it prints its own mask and ignored set.
const PROBE: [&str; 4] = ["/bin/grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status"];

/// What the test's caller state is: SIGWINCH blocked (a signal no path forwards or handles)
/// and SIGUSR2 ignored; with `pipe`, SIGPIPE ignored too (as a user may, and foster's runtime
/// does for itself). And the C library's two: 32 at its default (foster ignores it for itself)
/// and 33 ignored (the C library installs its handler over that in a foster with threads); a
/// program gets both as foster was started with them. (This test's own 32 and 33 are whatever
/// its launcher gave it: the C library's `posix_spawn` gives a child both ignored.)
#[derive(Clone, Copy)]
struct Caller {
    pipe: bool,
}

impl Caller {
    fn mask(self) -> u64 {
        sigbit(libc::SIGWINCH)
    }

    /// The ignored set foster starts with: this test's own (a Command child inherits it) less
    /// the SIGPIPE its runtime ignores (a Command resets it) and 32 (set to its default), plus
    /// what the caller ignores.
    fn ignored(self) -> u64 {
        let mine = std::fs::read_to_string("/proc/self/status").unwrap();
        let pipe = if self.pipe { sigbit(libc::SIGPIPE) } else { 0 };
        (status_sigset(&mine, "SigIgn:") & !sigbit(libc::SIGPIPE) & !sigbit(32))
            | sigbit(libc::SIGUSR2)
            | sigbit(33)
            | pipe
    }

    /// `cmd` started in this state.
    fn apply(self, cmd: &mut Command) {
        let pipe = self.pipe;
        // SAFETY: sigprocmask and signal with stack values, between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut set);
                libc::sigaddset(&mut set, libc::SIGWINCH);
                libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
                libc::signal(libc::SIGUSR2, libc::SIG_IGN);
                // The C library refuses 32 and 33: the raw system call.
                foster::process::signal::set_raw_disposition(32, false);
                foster::process::signal::set_raw_disposition(33, true);
                if pipe {
                    libc::signal(libc::SIGPIPE, libc::SIG_IGN);
                }
                Ok(())
            });
        }
    }
}

/// (SigBlk, SigIgn) of the probe's output.
fn probe_state(out: &str) -> (u64, u64) {
    (status_sigset(out, "SigBlk:"), status_sigset(out, "SigIgn:"))
}

/// foster with `args` then the probe, in the caller's state, expecting this test process as
/// the parent; the probe's state.
fn probe_through(args: &[&str], caller: Caller) -> (u64, u64) {
    let mut cmd = Command::new(FOSTER);
    cmd.args(args)
        .arg("--")
        .args(PROBE)
        .env("FOSTER_PARENT", Identity::current().unwrap().to_string())
        .env_remove("FOSTER_POLICY")
        .env_remove("FOSTER_GATED")
        .stdin(Stdio::null());
    caller.apply(&mut cmd);
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{args:?}: {out:?}");
    probe_state(&String::from_utf8_lossy(&out.stdout))
}

fn check(path: &str, caller: Caller, got: (u64, u64), mask: u64) {
    let want = (mask, caller.ignored());
    assert_eq!(
        got, want,
        "{path} (caller's SIGPIPE ignored: {}): program's SigBlk {:#x}, SigIgn {:#x}; expected \
         {:#x}, {:#x}",
        caller.pipe, got.0, got.1, want.0, want.1
    );
}

/// `foster exec`: in the caller's place, so the program gets the caller's state; foster exec
/// used to empty the mask and set SIGPIPE to default even when the caller ignored it.
#[test]
fn exec_passes_on_the_callers_state() {
    for pipe in [false, true] {
        let caller = Caller { pipe };
        check(
            "exec",
            caller,
            probe_through(&["exec"], caller),
            caller.mask(),
        );
    }
}

/// `foster exec --watch`: the program's parent is the watcher, whose own blocked signals and
/// the SIGPIPE its runtime ignores were passed on (`SigIgn: 0x1000`).
#[test]
fn exec_watch_passes_on_the_callers_state_not_the_watchers() {
    for pipe in [false, true] {
        let caller = Caller { pipe };
        let got = probe_through(&["exec", "--watch"], caller);
        check("exec --watch", caller, got, caller.mask());
    }
}

/// `foster init` (a verification: init restores what it inherited).
#[test]
fn init_passes_on_the_callers_state() {
    for pipe in [false, true] {
        let caller = Caller { pipe };
        check(
            "init",
            caller,
            probe_through(&["init"], caller),
            caller.mask(),
        );
    }
}

/// `foster run`: helpers get the mask and the dispositions foster was started with (they
/// started with an empty mask, whatever the caller had blocked); contained (the default
/// where a PID namespace can be had) and not.
#[test]
fn run_helpers_get_the_callers_state() {
    let d = Dir::new("launchsig", "run");
    let cfg = d.file(
        "c.toml",
        &format!(
            "[[helper]]\nname = \"probe\"\noutput = \"inherit\"\ncommand = {:?}\n",
            PROBE.to_vec()
        ),
    );
    for (pipe, contain) in [(false, None), (true, None), (false, Some("--no-contain"))] {
        let caller = Caller { pipe };
        let mut cmd = Command::new(FOSTER);
        cmd.args(["run", "--no-socket"])
            .args(contain)
            .arg(&cfg)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        caller.apply(&mut cmd);
        let mut f = cmd.spawn().unwrap();
        // The probe's two lines, then an orderly shutdown.
        let mut out = BufReader::new(f.stdout.take().unwrap());
        let mut text = String::new();
        for _ in 0..2 {
            out.read_line(&mut text).unwrap();
        }
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(f.id() as i32, libc::SIGTERM) };
        assert_eq!(f.wait().unwrap().code(), Some(0));
        let path = format!("run {}", contain.unwrap_or(""));
        check(&path, caller, probe_state(&text), caller.mask());
    }
}

/// Live (non-zombie) processes whose environment carries `FOSTER_DEMO=<demo>`, with their
/// name.
fn demo_processes(demo: u32) -> Vec<(i32, String)> {
    processes_with_env(&format!("FOSTER_DEMO={demo}"))
        .into_iter()
        .map(|p| (p.pid, String::from_utf8_lossy(&p.comm).into_owned()))
        .collect()
}

/// `foster demo`: it launches `foster run` through the spawner, which passed on the SIGPIPE
/// the demo's runtime ignores; `foster run` took it for its caller's and gave it to every
/// helper. The demo's helper shells must have the caller's dispositions, and its programs the
/// caller's mask (they had an empty one, as every helper of `foster run`).
#[test]
fn demo_helpers_get_the_callers_state() {
    let d = Dir::new("launchsig", "demo");
    let caller = Caller { pipe: false };
    let mut cmd = Command::new(FOSTER);
    cmd.args(["demo", "--json", "--socket"])
        .arg(d.path("demo.sock"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    caller.apply(&mut cmd);
    struct Demo(Child);
    impl Drop for Demo {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut demo = Demo(cmd.spawn().unwrap());
    let pid = demo.0.id();
    let rx = common::lines::json_lines(demo.0.stdout.take().unwrap());
    // The helpers that run shells launched (each has exec'd when its launch is reported; the
    // worker waits for the demo's migration).
    let mut launched = std::collections::HashSet::new();
    let t = Instant::now();
    while !["nested", "worker", "crasher", "orphaner"]
        .iter()
        .all(|h| launched.contains(*h))
    {
        let v = rx
            .recv_timeout(LIMIT.saturating_sub(t.elapsed()))
            .expect("the demo's events");
        if v["event"]["event"] == "launch" {
            launched.insert(v["event"]["helper"].as_str().unwrap().to_string());
        }
    }
    let shells: Vec<(i32, u64)> = demo_processes(pid)
        .into_iter()
        .filter(|(_, comm)| comm == "sh")
        .filter_map(|(p, _)| {
            let status = std::fs::read_to_string(format!("/proc/{p}/status")).ok()?;
            // Still a shell in this same read: a shell's child listed as `sh` may have exec'd
            // since (the worker's `$("$FOSTER_EXE" identity $$)`: a Rust program, which
            // ignores SIGPIPE).
            (status.lines().next() == Some("Name:\tsh"))
                .then(|| (p, status_sigset(&status, "SigIgn:")))
        })
        .collect();
    // The masks of its `sleep 86400`s (inner's and the worker's when they have exec'd): a
    // shell's own mask cannot be read reliably (one waiting for its foreground child shows
    // sigsuspend's empty set), a sleep's can. Not db's: its shell waits for `sleep 1` and
    // `foster notify` before it execs its sleep, and dash clears its mask after waiting for a
    // foreground child (sigclearmask), whatever mask foster gave it.
    let sleeps: Vec<(i32, u64)> = demo_processes(pid)
        .into_iter()
        .filter(|(p, comm)| {
            comm == "sleep"
                && std::fs::read(format!("/proc/{p}/cmdline")).ok().as_deref()
                    == Some(&b"sleep\x0086400\x00"[..])
                && !std::fs::read(format!("/proc/{p}/environ"))
                    .is_ok_and(|e| e.split(|&b| b == 0).any(|v| v == b"FOSTER_HELPER=db"))
        })
        .filter_map(|(p, _)| {
            let status = std::fs::read_to_string(format!("/proc/{p}/status")).ok()?;
            Some((p, status_sigset(&status, "SigBlk:")))
        })
        .collect();
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let status = demo.0.wait().unwrap();
    let t = Instant::now();
    loop {
        let left = demo_processes(pid);
        if left.is_empty() {
            break;
        }
        assert!(t.elapsed() < LIMIT, "demo processes left: {left:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(status.code(), Some(0), "{status:?}");
    assert!(shells.len() >= 3, "the demo's helper shells: {shells:?}");
    assert!(!sleeps.is_empty(), "the demo's sleep 86400s");
    for (p, blocked) in sleeps {
        assert_eq!(
            blocked,
            caller.mask(),
            "demo sleep {p}: SigBlk {blocked:#x}: the caller's mask (SIGWINCH blocked)"
        );
    }
    for (p, ignored) in shells {
        assert_eq!(
            ignored & (sigbit(libc::SIGPIPE) | sigbit(libc::SIGUSR2) | sigbit(32) | sigbit(33)),
            sigbit(libc::SIGUSR2) | sigbit(33),
            "demo shell {p}: SigIgn {ignored:#x}: SIGPIPE and 32 must be at their default, \
             SIGUSR2 and 33 ignored as the caller had them"
        );
    }
}
