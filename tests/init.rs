//! `foster init` against real processes: the real binary, as PID 1 of a fresh PID namespace
//! (`unshare --pid --fork --mount-proc`, root only) and as a child subreaper (any user), like
//! tini runs its suite with the subreaper forced on and off.
//!
//! Covers: 100 orphaned sleeps reaped with no zombie left; exit codes 0..=255 with and without
//! `-e`; every forwarded signal reaching PROGRAM (128 + n), the default-terminating ones killing
//! it; `--rewrite`; the process group with `-g` (and without it); PROGRAM leading a group of its
//! own (and a signal to foster's group reaching it once); the fault signals sent by `kill`
//! forwarded (SIGSEGV twice) while a real fault under foster's mask stays fatal; signals 32 and
//! 33 (the C library's) neither ending foster nor forwarded; an interactive
//! bash's job control (Ctrl-Z, `jobs`, `fg`) around foster on a pseudo-terminal; `-p` with a grace:
//! SIGKILL to a PROGRAM that outlives it after the parent's death; PROGRAM's SigBlk/SigIgn equal to
//! what foster inherited (SIGPIPE included); exec failures 126/127 naming PROGRAM; a 5,000-orphan
//! storm with PROGRAM's own exit code intact; `--wait-all` killing a grandchild that ignores
//! SIGTERM after the grace, and not waiting the grace for one that obeys; the message when no
//! subreaper is possible (a seccomp filter makes the prctl fail); a terminal session through a
//! pseudo-terminal where Ctrl-C gives 130.
//!
//! Its own `main` on `libtest-mimic` (each case a trial, `NAME::pid1` and `NAME::subreaper`;
//! `--list`, name filters, `--exact` and `--ignored` as with libtest), because the same binary
//! doubles as PROGRAM (`--helper ...`); the trials run one at a time.
//! Synchronisation is by readiness lines on pipes; the only waits are bounded safety nets.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use foster::base::sys::{PollFd, poll};
use libtest_mimic::{Arguments, Completion, Trial};

#[path = "it/common/mod.rs"]
mod common;
use common::{children_of, process};

const FOSTER: &str = env!("CARGO_BIN_EXE_foster");
const FOSTER_INIT: &str = env!("CARGO_BIN_EXE_foster-init");

#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    Pid1,
    Subreaper,
}

fn main() {
    let raw: Vec<String> = std::env::args().collect();
    if raw.get(1).map(String::as_str) == Some("--helper") {
        helper(&raw[2..]);
        return;
    }
    let mut args = Arguments::from_args();
    // One at a time: the cases count the children, groups and signals of foster and of this
    // process, and one drives a terminal.
    args.test_threads = Some(1);
    // SAFETY: geteuid has no preconditions.
    let is_root = unsafe { libc::geteuid() } == 0;
    type Case = (&'static str, fn(Mode));
    let cases: &[Case] = &[
        ("reaps_100_orphaned_sleeps", reaps_100_orphaned_sleeps),
        ("exit_codes_0_to_255_with_and_without_e", exit_codes),
        ("forwards_every_signal", forwards_every_signal),
        ("rewrite", rewrite),
        ("process_group_with_g", process_group),
        ("signal_state_is_what_foster_inherited", signal_state),
        ("exec_failures_126_127", exec_failures),
        ("orphan_storm_keeps_program_code", orphan_storm),
        ("wait_all_kills_after_grace", wait_all),
        ("tty_ctrl_c_gives_130", tty_ctrl_c),
        ("policy_arms_program_through_the_gate", policy),
        ("pdeath_refuses_a_gone_parent", pdeath_gone),
        ("options_from_environment_variables", env_options),
        ("usage_errors_before_program", usage_errors),
        ("program_leads_its_own_group", own_group),
        (
            "fault_signals_sent_by_kill_are_forwarded",
            fault_signals_from_kill,
        ),
        ("pdeath_grace_then_sigkill", pdeath_grace),
        ("signals_32_and_33_spare_foster", reserved_signals),
        ("log_lines_are_written_whole", log_lines_whole),
    ];
    let mut trials = Vec::new();
    for &(name, f) in cases {
        // Each case once per mode: NAME::pid1 and NAME::subreaper.
        for mode in [Mode::Pid1, Mode::Subreaper] {
            let label = format!("{name}::{}", format!("{mode:?}").to_lowercase());
            trials.push(Trial::ignorable_test(label, move || {
                if mode == Mode::Pid1 && !is_root {
                    return Ok(Completion::ignored_with(
                        "not root: the PID-1 cases (unshare --pid) need root",
                    ));
                }
                f(mode);
                Ok(Completion::Completed)
            }));
        }
    }
    let single: [(&str, fn()); 5] = [
        ("foster_init_binary_has_every_option", foster_init_options),
        ("pdeath_signal_reaches_program", pdeath_fires),
        ("job_control_ctrl_z_and_fg", job_control),
        ("real_faults_stay_fatal", real_faults_stay_fatal),
        ("no_subreaper_message", no_subreaper_message),
    ];
    for (name, f) in single {
        trials.push(Trial::test(name, move || {
            f();
            Ok(())
        }));
    }
    trials.push(Trial::ignorable_test(
        "both_binaries_under_valgrind",
        || {
            if Command::new("valgrind").arg("--version").output().is_err() {
                return Ok(Completion::ignored_with("valgrind is not installed"));
            }
            under_valgrind();
            Ok(Completion::Completed)
        },
    ));
    libtest_mimic::run(&args, trials).exit();
}

// ---------------------------------------------------------------------------------------------
// The foster-init binary (FOSTER_TEST_INIT_BIN=1 runs every case above against it).

/// `foster-init --help` names every option and variable `foster init --help` does, and the two
/// agree on a run, a mapped code and a usage error.
fn foster_init_options() {
    let help = |cmd: &mut Command| {
        let out = cmd.arg("--help").output().unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap()
    };
    let small = help(&mut Command::new(FOSTER_INIT));
    let full = help(Command::new(FOSTER).arg("init"));
    let words = |text: &str| -> Vec<String> {
        let mut w: Vec<String> = text
            .split(|c: char| c.is_whitespace() || c == '[' || c == ',' || c == '=')
            .filter(|w| w.starts_with("--") && w.len() > 2 || w.starts_with("FOSTER_"))
            .map(|w| w.trim_end_matches('.').to_string())
            .collect();
        w.sort();
        w.dedup();
        w
    };
    let missing: Vec<String> = words(&full)
        .into_iter()
        .filter(|w| !words(&small).contains(w))
        .collect();
    assert!(
        missing.is_empty(),
        "missing from foster-init --help: {missing:?}\n{small}"
    );
    for args in [
        &["-e", "3", "sh", "-c", "exit 3"][..],
        &["sh", "-c", "exit 4"],
        &["-z", "x"],
    ] {
        let a = Command::new(FOSTER_INIT).args(args).output().unwrap();
        let b = Command::new(FOSTER)
            .arg("init")
            .args(args)
            .output()
            .unwrap();
        assert_eq!(a.status.code(), b.status.code(), "{args:?}");
    }
}

/// `foster init` and `foster-init` run under valgrind (as tini's suite runs tini) with no error
/// of valgrind's: PROGRAM's code comes back, and a PROGRAM not found still gives 127 with its
/// message (the launcher's report pipe, read to its end there).
fn under_valgrind() {
    for init in [&[FOSTER, "init"][..], &[FOSTER_INIT]] {
        for (program, want) in [
            (&["true"][..], 0),
            (&["sh", "-c", "exit 3"], 3),
            (&["nope-x"], 127),
        ] {
            let out = Command::new("valgrind")
                .args(["-q", "--error-exitcode=99"])
                .args(init)
                .arg("--")
                .args(program)
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(want), "{init:?} {program:?}: {err}");
            assert!(
                !err.contains("Unsupported") && !err.contains("Invalid"),
                "{err}"
            );
            if want == 127 {
                assert!(err.contains("nope-x"), "{err}");
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Running foster.

/// `foster init`, or the `foster-init` binary when FOSTER_TEST_INIT_BIN=1 (the whole suite
/// then runs against it).
fn init_command() -> Vec<&'static str> {
    match std::env::var("FOSTER_TEST_INIT_BIN").as_deref() {
        Ok("1") => vec![FOSTER_INIT],
        _ => vec![FOSTER, "init"],
    }
}

fn foster(mode: Mode, args: &[&str]) -> Command {
    let mut c = match mode {
        Mode::Pid1 => {
            let mut c = Command::new("unshare");
            c.args(["--pid", "--fork", "--mount-proc"])
                .args(init_command());
            c
        }
        Mode::Subreaper => {
            let init = init_command();
            let mut c = Command::new(init[0]);
            c.args(&init[1..]);
            c
        }
    };
    c.args(args);
    c.env_remove("FOSTER_SUBREAPER")
        .env_remove("FOSTER_VERBOSITY");
    c
}

fn me() -> String {
    std::env::current_exe()
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

/// A started foster with its stdout as lines.
struct Running {
    child: Child,
    lines: BufReader<ChildStdout>,
    mode: Mode,
}

impl Running {
    fn start(mode: Mode, mut cmd: Command) -> Running {
        let mut child = cmd.stdout(Stdio::piped()).spawn().expect("spawn foster");
        let lines = BufReader::new(child.stdout.take().unwrap());
        Running { child, lines, mode }
    }

    /// Reads lines until one starts with `prefix`; returns the rest of that line.
    fn until_prefix(&mut self, prefix: &str) -> String {
        loop {
            let mut l = String::new();
            let n = self.lines.read_line(&mut l).unwrap();
            assert!(n > 0, "stdout closed before {prefix:?}");
            if let Some(rest) = l.trim_end().strip_prefix(prefix) {
                return rest.to_string();
            }
        }
    }

    /// Reads lines until one equals `want`; returns those before it.
    fn until(&mut self, want: &str) -> Vec<String> {
        let mut seen = Vec::new();
        loop {
            let mut l = String::new();
            let n = self.lines.read_line(&mut l).unwrap();
            assert!(n > 0, "stdout closed before {want:?}; saw {seen:?}");
            let l = l.trim_end().to_string();
            if l == want {
                return seen;
            }
            seen.push(l);
        }
    }

    fn rest(&mut self) -> String {
        let mut s = String::new();
        self.lines.read_to_string(&mut s).unwrap();
        s
    }

    /// The pid of foster itself, seen from here.
    fn foster_pid(&self) -> i32 {
        let id = self.child.id() as i32;
        match self.mode {
            Mode::Subreaper => id,
            Mode::Pid1 => children_of(id)
                .first()
                .copied()
                .expect("unshare has forked foster"),
        }
    }

    fn signal_foster(&self, sig: i32) {
        // SAFETY: kill with integers.
        assert_eq!(unsafe { libc::kill(self.foster_pid(), sig) }, 0);
    }

    fn wait(mut self) -> i32 {
        let st = wait_bounded(&mut self.child, Duration::from_secs(60));
        st.code().unwrap_or_else(|| 128 + st.signal().unwrap())
    }
}

fn wait_bounded(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    common::child::wait_within(child, limit).unwrap_or_else(|| {
        let _ = child.kill();
        let _ = child.wait();
        panic!("foster did not end within {limit:?}")
    })
}

fn run_status(mode: Mode, args: &[&str]) -> (i32, String) {
    let out = foster(mode, args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let code = out
        .status
        .code()
        .unwrap_or_else(|| 128 + out.status.signal().unwrap());
    (code, String::from_utf8_lossy(&out.stderr).into_owned())
}

// ---------------------------------------------------------------------------------------------
// The cases.

/// 100 orphans (double-forked `sleep`s) are killed at once; foster must reap them all: PROGRAM
/// checks that no `sleep` is left, not even a zombie, and exits 0 only then.
fn reaps_100_orphaned_sleeps(mode: Mode) {
    // Only processes whose parent is foster ($PPID) are looked at: never anything else.
    let script = r#"
        count() { cat /proc/[0-9]*/stat 2>/dev/null | awk -v p=$PPID '$2=="(sleep)" && $4==p {n++} END {print n+0}'; }
        i=0; while [ $i -lt 100 ]; do (sleep 1000 &); i=$((i+1)); done
        t=0; while [ "$(count)" -lt 100 ]; do t=$((t+1)); [ $t -gt 5000 ] && { echo "only $(count) started"; exit 2; }; done
        pids=$(cat /proc/[0-9]*/stat 2>/dev/null | awk -v p=$PPID '$2=="(sleep)" && $4==p {print $1}')
        echo "started $(echo $pids | wc -w)"
        kill $pids
        t=0; while [ "$(count)" -gt 0 ]; do t=$((t+1)); [ $t -gt 5000 ] && { echo "left: $(count)"; exit 3; }; done
        zombies=$(cat /proc/[0-9]*/stat 2>/dev/null | awk -v p=$PPID '$3=="Z" && $4==p' | wc -l)
        echo "zombies $zombies"
        [ "$zombies" = 0 ] || exit 4
        echo done
    "#;
    let mut r = Running::start(mode, foster(mode, &["--", "sh", "-c", script]));
    let before = r.until("done");
    assert!(before.contains(&"started 100".to_string()), "{before:?}");
    assert!(before.contains(&"zombies 0".to_string()), "{before:?}");
    assert_eq!(r.wait(), 0);
}

fn exit_codes(mode: Mode) {
    // Two threads share the 512 runs (2 cores).
    let worker = move |start: usize| {
        let mut code = start;
        while code < 512 {
            let (n, expect) = (code % 256, code >= 256);
            let script = format!("exit {n}");
            let e = n.to_string();
            let mut args = vec![];
            if expect {
                args.extend(["-e", e.as_str()]);
            }
            args.extend(["--", "sh", "-c", script.as_str()]);
            let (got, err) = run_status(mode, &args);
            let want = if expect { 0 } else { n as i32 };
            assert_eq!(got, want, "exit {n} with -e: {expect}: {err}");
            code += 2;
        }
    };
    let t = std::thread::spawn(move || worker(1));
    worker(0);
    t.join().unwrap();
    // -e also maps a status from a signal (a JVM's 143), and only the codes listed.
    let (got, _) = run_status(mode, &["-e", "143", "--", "sh", "-c", "kill -TERM $$"]);
    assert_eq!(got, 0);
    let (got, _) = run_status(mode, &["-e", "1", "-e", "2", "--", "sh", "-c", "exit 3"]);
    assert_eq!(got, 3);
    let (got, _) = run_status(mode, &["-e", "1", "-e", "2", "--", "sh", "-c", "exit 2"]);
    assert_eq!(got, 0);
}

/// Every signal foster forwards.
fn forwarded_signals() -> Vec<i32> {
    let faults = [
        libc::SIGSEGV,
        libc::SIGBUS,
        libc::SIGFPE,
        libc::SIGILL,
        libc::SIGTRAP,
        libc::SIGSYS,
    ];
    (1..=libc::SIGRTMAX())
        .filter(|&s| {
            s != libc::SIGKILL
                && s != libc::SIGSTOP
                && s != libc::SIGCHLD
                && s != 32
                && s != 33
                && !faults.contains(&s)
        })
        .collect()
}

/// PROGRAM waits for any forwarded signal synchronously and exits 128 + n: every signal,
/// including those whose default is to be ignored, real-time ones, TSTP/TTIN/TTOU. Then a few
/// with their default action: PROGRAM is killed by them and foster reports 128 + n.
fn forwards_every_signal(mode: Mode) {
    let me = me();
    let sigs = forwarded_signals();
    assert!(sigs.len() >= 50, "{sigs:?}");
    // Several in parallel per round to keep it quick.
    for chunk in sigs.chunks(8) {
        let mut running: Vec<(i32, Running)> = chunk
            .iter()
            .map(|&sig| {
                let r = Running::start(mode, foster(mode, &["--", &me, "--helper", "catch"]));
                (sig, r)
            })
            .collect();
        for (sig, r) in &mut running {
            r.until("ready");
            r.signal_foster(*sig);
        }
        for (sig, mut r) in running {
            let out = r.rest();
            assert!(out.contains(&format!("got {sig}")), "signal {sig}: {out}");
            assert_eq!(r.wait(), 128 + sig, "signal {sig}");
        }
    }
    for sig in [
        libc::SIGHUP,
        libc::SIGINT,
        libc::SIGQUIT,
        libc::SIGTERM,
        libc::SIGUSR1,
        libc::SIGUSR2,
        libc::SIGALRM,
        libc::SIGRTMIN() + 3,
    ] {
        let mut r = Running::start(
            mode,
            foster(mode, &["--", "sh", "-c", "echo ready; exec sleep 1000"]),
        );
        r.until("ready");
        r.signal_foster(sig);
        assert_eq!(r.wait(), 128 + sig, "sleep killed by {sig}");
    }
}

fn rewrite(mode: Mode) {
    let me = me();
    let mut r = Running::start(
        mode,
        foster(
            mode,
            &[
                "-r",
                "TERM:QUIT",
                "--rewrite",
                "USR1:0",
                "--",
                &me,
                "--helper",
                "catch",
            ],
        ),
    );
    r.until("ready");
    r.signal_foster(libc::SIGUSR1); // dropped
    r.signal_foster(libc::SIGTERM); // arrives as SIGQUIT
    let out = r.rest();
    assert!(out.contains(&format!("got {}", libc::SIGQUIT)), "{out}");
    assert_eq!(r.wait(), 128 + libc::SIGQUIT);
}

/// With -g, a signal reaches PROGRAM's whole process group (a child of PROGRAM included);
/// without it, PROGRAM alone.
fn process_group(mode: Mode) {
    for group in [true, false] {
        // Without -g PROGRAM ends on SIGTERM at once (its child would keep it waiting);
        // --wait-all then ends the child, after "program-done".
        let on_term = if group {
            "echo program-got-TERM"
        } else {
            "echo program-got-TERM; echo program-done; exit 0"
        };
        // The grandchild says child-ready itself, after its exec: a shell's background job
        // forked but not yet exec'd still runs the forking shell's TERM trap handler, which
        // swallows a SIGTERM (foster's forwarded one and --wait-all's both), so a readiness
        // line printed by the forking shell let the test signal too early and the sleep lived
        // until the grace's SIGKILL.
        let script = format!(
            r#"
            trap '{on_term}' TERM
            sh -c 'trap "echo child-got-TERM; exit 0" TERM; sh -c "echo child-ready; exec sleep 1000" & wait' &
            echo program-ready
            wait; wait
            echo program-done
            "#
        );
        let mut args = vec!["--wait-all", "--grace", "10s"];
        if group {
            args.push("-g");
        }
        args.extend(["--", "sh", "-c", &script]);
        let mut r = Running::start(mode, foster(mode, &args));
        let mut seen = Vec::new();
        while !(seen.contains(&"program-ready".to_string())
            && seen.contains(&"child-ready".to_string()))
        {
            let mut l = String::new();
            assert!(r.lines.read_line(&mut l).unwrap() > 0, "{seen:?}");
            seen.push(l.trim_end().to_string());
        }
        r.signal_foster(libc::SIGTERM);
        let before_done = r.until("program-done").join(" ");
        let after = r.rest();
        assert!(before_done.contains("program-got-TERM"), "{before_done}");
        if group {
            assert!(
                before_done.contains("child-got-TERM") || after.contains("child-got-TERM"),
                "{before_done} | {after}"
            );
        } else {
            assert!(!before_done.contains("child-got-TERM"), "{before_done}");
        }
        assert_eq!(r.wait(), 0, "group {group}");
    }
}

/// PROGRAM leads a process group of its own, with -g or without, terminal or not (tini's
/// default): its pgid is its pid, not foster's group.
fn own_group(mode: Mode) {
    for g in [false, true] {
        let mut args = vec![];
        if g {
            args.push("-g");
        }
        let script = "echo $$ $(cut -d' ' -f5 /proc/$$/stat) $(cut -d' ' -f5 /proc/$PPID/stat)";
        args.extend(["--", "sh", "-c", script]);
        let out = foster(mode, &args).stdin(Stdio::null()).output().unwrap();
        assert!(out.status.success(), "{out:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        let f: Vec<&str> = text.split_whitespace().collect();
        assert_eq!(f.len(), 3, "{text}");
        assert_eq!(
            f[1], f[0],
            "-g {g}: PROGRAM leads its group: pid pgid foster-pgid {text}"
        );
        assert_ne!(f[2], f[1], "-g {g}: not foster's group: {text}");
    }
    if mode == Mode::Pid1 {
        return; // unshare shares foster's group there; the group signal below is for foster
    }
    // A signal to foster's whole group (a shell's foreground job whose standard input is not
    // the terminal gets Ctrl-C that way) reaches PROGRAM once, through foster: in foster's
    // group PROGRAM got it twice, directly and forwarded. Real-time signals, so that two
    // copies would not merge and the lower one (counted) is taken and forwarded before the
    // higher one (the end).
    let me = me();
    let (rt, end) = (libc::SIGRTMIN() + 6, libc::SIGRTMIN() + 7);
    let mut cmd = foster(
        mode,
        &[
            "--",
            &me,
            "--helper",
            "count",
            &rt.to_string(),
            &end.to_string(),
        ],
    );
    cmd.process_group(0);
    let mut r = Running::start(mode, cmd);
    r.until("ready");
    let pid = r.foster_pid();
    // SAFETY: kill with integers; foster leads the group made for it above.
    assert_eq!(unsafe { libc::kill(-pid, rt) }, 0);
    r.signal_foster(end);
    let out = r.rest();
    assert_eq!(out.trim(), "count 1", "{out}");
    assert_eq!(r.wait(), 0);
}

/// The fault signals, as `kill -SYS` and the like send them: foster forwards each (SIGSEGV
/// twice: the first one left foster's runtime handler reset, and the second one killed it),
/// stays up, and PROGRAM reports every one.
fn fault_signals_from_kill(mode: Mode) {
    let me = me();
    let faults = [
        libc::SIGSYS,
        libc::SIGILL,
        libc::SIGBUS,
        libc::SIGFPE,
        libc::SIGTRAP,
        libc::SIGSEGV,
        libc::SIGSEGV,
    ];
    let n = faults.len().to_string();
    let mut cmd = foster(mode, &["--", &me, "--helper", "each", &n]);
    no_core_files(&mut cmd);
    let mut r = Running::start(mode, cmd);
    let ready = r.until_prefix("ready ");
    let program: i32 = ready.parse().unwrap();
    // Opened while PROGRAM is foster's child (no reuse); to end it should foster die. As PID 1
    // foster's death ends the namespace, PROGRAM with it (and `program` is a pid in there).
    let program_fd = match mode {
        Mode::Subreaper => raw_pidfd(program),
        Mode::Pid1 => -1,
    };
    assert!(mode == Mode::Pid1 || program_fd >= 0);
    let fpid = r.foster_pid();
    let foster_fd = raw_pidfd(fpid);
    assert!(foster_fd >= 0);
    for sig in faults {
        r.signal_foster(sig);
        match line_unless_ended(&mut r, foster_fd) {
            Ok(line) => assert_eq!(line, format!("got {sig}")),
            Err(why) => {
                // Tear down what is left (foster ignoring the signal as PID 1, or PROGRAM
                // orphaned by foster's death) before failing.
                for fd in [foster_fd, program_fd] {
                    pidfd_kill(fd);
                }
                let status = wait_bounded(&mut r.child, Duration::from_secs(60));
                panic!(
                    "signal {sig}: {why}; foster's status {status} (child {} foster {fpid})",
                    r.child.id()
                );
            }
        }
    }
    assert_eq!(r.wait(), 0);
    // SAFETY: closing our descriptors.
    unsafe {
        libc::close(foster_fd);
        if program_fd >= 0 {
            libc::close(program_fd);
        }
    }
}

/// Signals 32 and 33, the C library's own, sent by `kill`: foster neither dies of them (their
/// default action would end it, PROGRAM running on) nor forwards them (PROGRAM, which cannot
/// block them, would die of them); the SIGTERM after them reaches PROGRAM, which reports it as
/// the first signal it took.
fn reserved_signals(mode: Mode) {
    let me = me();
    let mut cmd = foster(mode, &["--", &me, "--helper", "each", "1"]);
    common::libc_signals_at_default(&mut cmd);
    let mut r = Running::start(mode, cmd);
    let program: i32 = r.until_prefix("ready ").parse().unwrap();
    // As in fault_signals_from_kill: PROGRAM's pidfd to end it should foster die first.
    let program_fd = match mode {
        Mode::Subreaper => raw_pidfd(program),
        Mode::Pid1 => -1,
    };
    assert!(mode == Mode::Pid1 || program_fd >= 0);
    let fpid = r.foster_pid();
    let foster_fd = raw_pidfd(fpid);
    assert!(foster_fd >= 0);
    for sig in [32, 33, libc::SIGTERM] {
        r.signal_foster(sig);
    }
    match line_unless_ended(&mut r, foster_fd) {
        Ok(line) => assert_eq!(line, format!("got {}", libc::SIGTERM)),
        Err(why) => {
            for fd in [foster_fd, program_fd] {
                pidfd_kill(fd);
            }
            let status = wait_bounded(&mut r.child, Duration::from_secs(60));
            panic!("signals 32, 33, then TERM: {why}; foster's status {status}");
        }
    }
    assert_eq!(r.wait(), 0);
    // SAFETY: closing our descriptors.
    unsafe {
        libc::close(foster_fd);
        if program_fd >= 0 {
            libc::close(program_fd);
        }
    }
}

/// foster's own mask (every forwarded signal blocked, a signalfd open on them, as
/// `foster init` sets it) does not turn a real fault into a queued signal: the kernel forces
/// each fault through the mask, and the process dies of it instead of running on.
fn real_faults_stay_fatal() {
    let mut kinds = vec![
        ("SEGV", libc::SIGSEGV),
        ("BUS", libc::SIGBUS),
        ("SYS", libc::SIGSYS),
    ];
    if cfg!(target_arch = "x86_64") {
        kinds.extend([
            ("ILL", libc::SIGILL),
            ("TRAP", libc::SIGTRAP),
            ("FPE", libc::SIGFPE),
        ]);
    } else {
        common::skip::host("part: not x86_64: the ILL, TRAP and FPE faults are not run");
    }
    for (kind, sig) in kinds {
        let mut cmd = Command::new(me());
        cmd.args(["--helper", "fault", kind]);
        no_core_files(&mut cmd);
        let out = cmd.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("blocked"), "{kind}: {text}");
        assert!(!text.contains("survived"), "{kind}: {text}");
        assert_eq!(out.status.signal(), Some(sig), "{kind}: {:?}", out.status);
    }
}

/// No core file from a process that dies of a fault signal here.
fn no_core_files(cmd: &mut Command) {
    // SAFETY: setrlimit with a stack value.
    unsafe {
        cmd.pre_exec(|| {
            let none = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::setrlimit(libc::RLIMIT_CORE, &none);
            Ok(())
        });
    }
}

/// PROGRAM's next line, or why there is none: foster (its pidfd `foster_fd`) ended first, or
/// nothing came within the safety net's 60 s.
fn line_unless_ended(r: &mut Running, foster_fd: i32) -> Result<String, String> {
    if r.lines.buffer().is_empty() {
        let mut fds = [
            PollFd::input(r.lines.get_ref().as_raw_fd()),
            PollFd::input(foster_fd),
        ];
        if poll(&mut fds, Some(Duration::from_secs(60))).unwrap() == 0 {
            return Err("no line from PROGRAM within 60 s, foster still running".into());
        }
        if !fds[0].ready() {
            return Err("foster ended".into());
        }
    }
    let mut l = String::new();
    match r.lines.read_line(&mut l).unwrap() {
        0 => Err("PROGRAM's output closed".into()),
        _ => Ok(l.trim_end().to_string()),
    }
}

/// SIGKILL through a pidfd (none when `fd` is negative).
fn pidfd_kill(fd: i32) {
    if fd >= 0 {
        // SAFETY: `fd` is a pidfd this test holds open.
        let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
        let _ = foster::process::identity::pidfd_send_signal(fd, libc::SIGKILL);
    }
}

/// PROGRAM's blocked and ignored signals are those foster was given (read from PROGRAM's own
/// /proc/self/status), though foster blocks nearly everything itself and Rust ignores SIGPIPE.
fn signal_state(mode: Mode) {
    for (blocked, ignored) in [
        (vec![], vec![]),
        (
            vec![libc::SIGUSR1, libc::SIGTERM, libc::SIGRTMIN() + 1],
            vec![libc::SIGUSR2, libc::SIGPIPE, libc::SIGHUP],
        ),
    ] {
        let (b2, i2) = (blocked.clone(), ignored.clone());
        let mut cmd = foster(
            mode,
            &["--", "grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status"],
        );
        // SAFETY: sigprocmask/signal with precomputed values only.
        unsafe {
            cmd.pre_exec(move || {
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut set);
                for &s in &b2 {
                    libc::sigaddset(&mut set, s);
                }
                libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
                for s in 1..=31 {
                    if s != libc::SIGKILL && s != libc::SIGSTOP {
                        libc::signal(
                            s,
                            if i2.contains(&s) {
                                libc::SIG_IGN
                            } else {
                                libc::SIG_DFL
                            },
                        );
                    }
                }
                Ok(())
            });
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{out:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        let field = |name: &str| common::status_sigset(&text, name);
        let bits = |v: &[i32]| v.iter().fold(0u64, |a, &s| a | 1 << (s - 1));
        assert_eq!(field("SigBlk:"), bits(&blocked), "SigBlk: {text}");
        // Signals 32 and up keep the dispositions this test process was given (the C library
        // refuses to change 32 and 33 here); foster must pass them on unchanged too.
        let own = std::fs::read_to_string("/proc/self/status").unwrap();
        let own_ign = common::status_sigset(&own, "SigIgn:");
        let high = own_ign & !0x7fff_ffffu64;
        assert_eq!(field("SigIgn:"), bits(&ignored) | high, "SigIgn: {text}");
    }
}

fn exec_failures(mode: Mode) {
    let (code, err) = run_status(mode, &["--", "no-such-program-xyz"]);
    assert_eq!(code, 127, "{err}");
    assert!(
        err.contains("no-such-program-xyz") && err.contains("not found"),
        "{err}"
    );
    let (code, err) = run_status(mode, &["--", "/no/such/path"]);
    assert_eq!(code, 127, "{err}");
    assert!(err.contains("/no/such/path"), "{err}");
    let (code, err) = run_status(mode, &["--", "/etc/passwd"]);
    assert_eq!(code, 126, "{err}");
    assert!(err.contains("cannot execute /etc/passwd"), "{err}");
    let (code, err) = run_status(mode, &["--", "/"]);
    assert_eq!(code, 126, "{err}");
    assert!(err.contains("cannot execute /"), "{err}");
    // A script whose interpreter is missing: the exec itself fails in the child.
    let dir = std::env::temp_dir().join(format!("foster-init-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("bad-interpreter");
    std::fs::write(&script, "#!/no/such/interpreter\n").unwrap();
    std::os::unix::fs::PermissionsExt::set_mode(
        &mut std::fs::metadata(&script).unwrap().permissions(),
        0o755,
    );
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let (code, err) = run_status(mode, &["--", script.to_str().unwrap()]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(code, 127, "{err}");
    assert!(err.contains("bad-interpreter"), "{err}");
}

/// PROGRAM makes 5,000 orphans that end at once, checks every one was reaped, and exits 42:
/// foster must return 42, not a status of some orphan.
fn orphan_storm(mode: Mode) {
    let me = me();
    let mut r = Running::start(
        mode,
        foster(mode, &["--", &me, "--helper", "storm", "5000", "42"]),
    );
    let out = r.until("storm-done");
    assert!(out.iter().any(|l| l == "reaped 5000"), "{out:?}");
    assert_eq!(r.wait(), 42);
}

/// PROGRAM exits 3 leaving a grandchild that ignores SIGTERM: foster sends SIGTERM, then
/// SIGKILL after the grace, and exits 3 only once it is gone. One that obeys SIGTERM does not
/// make foster wait for the grace.
fn wait_all(mode: Mode) {
    for obeys in [false, true] {
        let inner = if obeys {
            "echo gc-ready >&3; exec sleep 1000 3>&-"
        } else {
            "trap '' TERM; echo gc-ready >&3; exec sleep 1000 3>&-"
        };
        // The grandchild says it is ready (its trap set) on fd 3; PROGRAM exits 3 once the
        // test says go.
        let script = format!("sh -c \"{inner}\" 3>&1 >/dev/null & echo $!; read go; exit 3");
        let mut cmd = foster(
            mode,
            &[
                "-vv",
                "--wait-all",
                "--grace",
                "300ms",
                "--",
                "sh",
                "-c",
                &script,
            ],
        );
        cmd.stderr(Stdio::piped()).stdin(Stdio::piped());
        let mut r = Running::start(mode, cmd);
        let mut before = r.until("gc-ready");
        if before.is_empty() {
            // The grandchild spoke before PROGRAM printed its pid.
            let mut l = String::new();
            r.lines.read_line(&mut l).unwrap();
            before.push(l.trim_end().to_string());
        }
        let gpid: i32 = before[0].parse().unwrap();
        r.child.stdin.take().unwrap().write_all(b"go\n").unwrap();
        let t = Instant::now();
        let mut err = String::new();
        r.child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        let code = r.wait();
        assert_eq!(code, 3, "{err}");
        assert_eq!(err.contains("grace of"), !obeys, "obeys {obeys}: {err}");
        assert!(err.contains("the whole tree has ended"), "{err}");
        if !obeys {
            assert!(t.elapsed() >= Duration::from_millis(300));
        }
        if mode == Mode::Subreaper {
            // Reaped by foster before it exited: no such process, not even a zombie.
            assert!(process(gpid).is_none(), "grandchild {gpid} still there");
        }
    }
}

/// With a terminal: PROGRAM's group is the foreground, Ctrl-C reaches PROGRAM (not twice
/// through foster), and foster exits 130.
fn tty_ctrl_c(mode: Mode) {
    let pty = nix::pty::openpty(None, None).unwrap();
    let (master, slave) = (pty.master, pty.slave);
    let script = r#"
        echo "pgid $(cut -d' ' -f5 /proc/$$/stat) fg $(cut -d' ' -f8 /proc/$$/stat) ppgid $(cut -d' ' -f5 /proc/$PPID/stat)" >&3
        echo ready >&3
        exec sleep 1000
    "#;
    let (rd, wr) = nix::unistd::pipe().unwrap();
    let mut cmd = foster(mode, &["-vv", "--", "sh", "-c", script]);
    let slave_fd = slave.as_raw_fd();
    let wr_fd = wr.as_raw_fd();
    // SAFETY: only async-signal-safe calls on precomputed descriptors.
    unsafe {
        cmd.pre_exec(move || {
            libc::setsid();
            libc::ioctl(slave_fd, libc::TIOCSCTTY, 0);
            common::fd::place(&[(slave_fd, 0), (wr_fd, 3)])
        });
    }
    cmd.stdout(Stdio::null()).stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    drop(wr);
    drop(slave);
    let mut lines = BufReader::new(std::fs::File::from(rd));
    let mut first = String::new();
    lines.read_line(&mut first).unwrap();
    let mut ready = String::new();
    lines.read_line(&mut ready).unwrap();
    assert_eq!(ready.trim(), "ready", "{first}");
    let f: Vec<&str> = first.split_whitespace().collect();
    assert_eq!(f[1], f[3], "PROGRAM's group is the foreground: {first}");
    assert_ne!(f[1], f[5], "PROGRAM's group is not foster's: {first}");
    let mut m = std::fs::File::from(master);
    m.write_all(b"\x03").unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let st = wait_bounded(&mut child, common::LIMIT);
    assert_eq!(st.code(), Some(130), "{err}");
    assert!(
        !err.contains("SIGINT from"),
        "foster itself got SIGINT: {err}"
    );
    let _ = mode;
}

/// An interactive shell's job control around `foster init` (not PID 1): Ctrl-Z stops PROGRAM
/// and then foster, so the shell sees its job stopped and takes its prompt back (it hung,
/// waiting for a foster that kept running); `fg` resumes both, and PROGRAM has the terminal
/// again: it reads the line typed next.
fn job_control() {
    let pty = nix::pty::openpty(None, None).unwrap();
    let (master, slave) = (pty.master, pty.slave);
    let (rd, wr) = nix::unistd::pipe().unwrap();
    let mut cmd = Command::new("bash");
    cmd.args(["--norc", "--noprofile", "--noediting", "-i"])
        .env("PS1", "$ ")
        .env("TERM", "dumb")
        .env("HISTFILE", "/dev/null")
        .env_remove("PROMPT_COMMAND")
        .env_remove("FOSTER_SUBREAPER")
        .env_remove("FOSTER_VERBOSITY");
    let (slave_fd, wr_fd) = (slave.as_raw_fd(), wr.as_raw_fd());
    // SAFETY: only async-signal-safe calls on descriptors opened before the fork.
    unsafe {
        cmd.pre_exec(move || {
            libc::setsid();
            libc::ioctl(slave_fd, libc::TIOCSCTTY, 0);
            common::fd::place(&[(slave_fd, 0), (slave_fd, 1), (slave_fd, 2), (wr_fd, 3)])
        });
    }
    let mut bash = cmd.spawn().unwrap();
    drop((slave, wr));
    let log = PtyLog::start(master.try_clone().unwrap());
    let mut tty = std::fs::File::from(master);
    let mut marks = BufReader::new(std::fs::File::from(rd));
    let mut procs: Vec<i32> = Vec::new(); // pidfds of foster and PROGRAM, for the teardown
    let result = (|| -> Result<(), String> {
        tty.write_all(b"echo up-$((6*7))\n").unwrap();
        log.wait_for("up-42")?;
        let line =
            format!("{FOSTER} init -v -- sh -c 'echo ready-$$ >&3; read x; echo got-$x >&3'\n");
        tty.write_all(line.as_bytes()).unwrap();
        let l = read_mark(&mut marks)?;
        let program: i32 = l
            .trim()
            .strip_prefix("ready-")
            .ok_or(format!("PROGRAM said {l:?}"))?
            .parse()
            .unwrap();
        let foster = process(program).unwrap().ppid;
        for pid in [foster, program] {
            // Both live in bash's tree now.
            procs.push(raw_pidfd(pid));
        }
        tty.write_all(b"\x1a").unwrap(); // Ctrl-Z
        log.wait_for("Stopped")?;
        tty.write_all(b"jobs -l; echo jobs-$((6*7))\n").unwrap();
        log.wait_for("jobs-42")?;
        for pid in [foster, program] {
            let state = process(pid).map(|p| p.state as char);
            if state != Some('T') {
                return Err(format!("pid {pid} is {state:?}, not stopped"));
            }
        }
        // fg, then a line for PROGRAM: it reads it only if it runs in the foreground again.
        tty.write_all(b"fg\nhello\n").unwrap();
        let l = read_mark(&mut marks)?;
        if l.trim() != "got-hello" {
            return Err(format!("PROGRAM said {l:?} after fg"));
        }
        tty.write_all(b"echo status-$?-$((6*7))\n").unwrap();
        log.wait_for("status-0-42")?;
        tty.write_all(b"exit\n").unwrap();
        Ok(())
    })();
    for &fd in &procs {
        if result.is_err() {
            pidfd_kill(fd);
        }
        // SAFETY: our descriptor.
        unsafe { libc::close(fd) };
    }
    if result.is_err() {
        let _ = bash.kill();
    }
    let st = wait_bounded(&mut bash, common::LIMIT);
    if let Err(e) = result {
        panic!("{e}; the terminal showed:\n{}", log.text());
    }
    assert!(
        st.success(),
        "bash: {st:?}; the terminal showed:\n{}",
        log.text()
    );
    let text = log.text();
    assert!(
        text.contains("PROGRAM stopped by SIGTSTP: foster stops too"),
        "{text}"
    );
}

/// The next line on `marks`, within a 30 s safety net.
fn read_mark(marks: &mut BufReader<std::fs::File>) -> Result<String, String> {
    if marks.buffer().is_empty() {
        let mut p = [PollFd::input(marks.get_ref().as_raw_fd())];
        if poll(&mut p, Some(common::LIMIT)).unwrap() != 1 {
            return Err("PROGRAM said nothing within 30 s".into());
        }
    }
    let mut l = String::new();
    marks.read_line(&mut l).unwrap();
    Ok(l)
}

/// What a pseudo-terminal's master side shows, read by a thread of its own.
struct PtyLog {
    text: std::sync::Arc<(std::sync::Mutex<(String, usize)>, std::sync::Condvar)>,
}

impl PtyLog {
    fn start(master: std::os::fd::OwnedFd) -> PtyLog {
        let text = std::sync::Arc::new((
            std::sync::Mutex::new((String::new(), 0)),
            std::sync::Condvar::new(),
        ));
        let t = text.clone();
        std::thread::spawn(move || {
            let mut f = std::fs::File::from(master);
            let mut buf = [0u8; 4096];
            // Ends with EIO once the last process holding the terminal is gone.
            while let Ok(n @ 1..) = f.read(&mut buf) {
                let (lock, cv) = &*t;
                lock.lock()
                    .unwrap()
                    .0
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
                cv.notify_all();
            }
        });
        PtyLog { text }
    }

    /// Waits (a 30 s safety net) until `needle` shows after what earlier waits matched.
    fn wait_for(&self, needle: &str) -> Result<(), String> {
        let (lock, cv) = &*self.text;
        let deadline = Instant::now() + common::LIMIT;
        let mut g = lock.lock().unwrap();
        loop {
            let (text, from) = &mut *g;
            if let Some(i) = text[*from..].find(needle) {
                *from += i + needle.len();
                return Ok(());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!("{needle:?} never showed on the terminal"));
            }
            g = cv.wait_timeout(g, left).unwrap().0;
        }
    }

    fn text(&self) -> String {
        self.text.0.lock().unwrap().0.clone()
    }
}

/// --policy: PROGRAM starts through the gate, armed, with FOSTER_PARENT naming itself (the
/// parent its children must have) and FOSTER_POLICY the next generation; without it, unarmed
/// and no FOSTER_* variable appears.
fn policy(mode: Mode) {
    let me = me();
    for with in [true, false] {
        let mut args = vec![];
        if with {
            args.extend(["--policy", "HUP:exit:2s;KILL"]);
        }
        args.extend(["--", &me, "--helper", "pdeath"]);
        let out = foster(mode, &args)
            .env_remove("FOSTER_PARENT")
            .env_remove("FOSTER_POLICY")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        let f: Vec<&str> = text.split_whitespace().collect();
        if with {
            assert_eq!(f[1], libc::SIGHUP.to_string(), "{text}");
            assert!(f[5].starts_with(&format!("{}:", f[3])), "{text}");
            assert!(f[7].starts_with("SIGKILL"), "{text}");
        } else {
            assert_eq!(f[1], "0", "unarmed: {text}");
            assert_eq!(f.len(), 6, "no FOSTER_* variables: {text}");
        }
    }
}

/// Every option as an environment variable, flags as 1/0 like container images set them.
fn env_options(mode: Mode) {
    let out = foster(mode, &["--", "sh", "-c", "exit 4"])
        .env("FOSTER_EXPECT", "3,4")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let out = foster(mode, &["--", "sh", "-c", "exit 4"])
        .env("FOSTER_WAIT_ALL", "1")
        .env("FOSTER_VERBOSITY", "1")
        .env("FOSTER_GRACE", "2s")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{err}");
    assert!(err.contains("--wait-all"), "{err}");
    let out = foster(mode, &["--", "sh", "-c", "exit 4"])
        .env("FOSTER_WAIT_ALL", "0")
        .env("FOSTER_VERBOSITY", "1")
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&out.stderr).contains("--wait-all"));
    let me = me();
    let mut cmd = foster(mode, &["--", &me, "--helper", "catch"]);
    cmd.env("FOSTER_REWRITE", "TERM:USR2,HUP:0")
        .env("FOSTER_KILL_PROCESS_GROUP", "1");
    let mut r = Running::start(mode, cmd);
    r.until("ready");
    r.signal_foster(libc::SIGHUP);
    r.signal_foster(libc::SIGTERM);
    let out = r.rest();
    assert!(out.contains(&format!("got {}", libc::SIGUSR2)), "{out}");
    assert_eq!(r.wait(), 128 + libc::SIGUSR2);
}

/// An option foster init does not know, before PROGRAM, is a usage error naming it (as tini's
/// and dumb-init's), never a PROGRAM to run; so is an empty PROGRAM. What follows PROGRAM is
/// PROGRAM's own.
fn usage_errors(mode: Mode) {
    for args in [
        &["-z", "--", "true"][..],
        &["--yolo", "true"],
        &["-z", "true"],
    ] {
        let (code, err) = run_status(mode, args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(&format!("'{}'", args[0])), "{args:?}: {err}");
        assert!(!err.contains("cannot run"), "{args:?}: {err}");
    }
    let (code, err) = run_status(mode, &["--", ""]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("empty program name"), "{err}");
    assert!(!err.contains("PATH"), "{err}");
    let (code, err) = run_status(mode, &["sh", "-c", "exit 7", "-z", "--yolo"]);
    assert_eq!(code, 7, "{err}");
    let (code, err) = run_status(mode, &["--", "sh", "-c", "exit 8"]);
    assert_eq!(code, 8, "{err}");
}

/// foster's log lines and PROGRAM's output share one pipe: PROGRAM writes its own lines in a
/// tight loop while foster logs 300 forwarded signals (real-time ones queue, so each is one
/// line); every line of foster's must come out whole, never with PROGRAM's text inside it.
fn log_lines_whole(mode: Mode) {
    const SIGNALS: usize = 300;
    let me = me();
    let rt = libc::SIGRTMIN() + 4;
    let mut cmd = foster(
        mode,
        &["-vv", "--", &me, "--helper", "chatter", &rt.to_string()],
    );
    cmd.stderr(Stdio::piped()).stdin(Stdio::piped());
    let mut r = Running::start(mode, cmd);
    let mut err = BufReader::new(r.child.stderr.take().unwrap());
    r.until("ready");
    let pid = r.foster_pid();
    for _ in 0..SIGNALS {
        // SAFETY: kill with integers.
        assert_eq!(unsafe { libc::kill(pid, rt) }, 0);
    }
    let mut text = String::new();
    let mut forwarded = 0;
    while forwarded < SIGNALS {
        let mut l = String::new();
        assert!(err.read_line(&mut l).unwrap() > 0, "stderr closed: {text}");
        forwarded += l.matches(" forwarded as ").count();
        text.push_str(&l);
    }
    drop(r.child.stdin.take()); // PROGRAM ends
    err.read_to_string(&mut text).unwrap();
    assert_eq!(r.wait(), 0, "{text}");
    let want_tail = format!(
        " forwarded as {} to pid ",
        foster::process::signal::name(rt)
    );
    let (mut program, mut ours) = (0, 0);
    for line in text.lines() {
        if line == "program-line" {
            program += 1;
            continue;
        }
        assert!(
            line.starts_with("foster init: ") && !line.contains("program-line"),
            "a torn line: {line:?}"
        );
        if line.contains(" forwarded as ") {
            assert!(line.contains(&want_tail), "{line:?}");
            ours += 1;
        }
    }
    assert_eq!(ours, SIGNALS);
    assert!(program > 0, "PROGRAM wrote nothing");
}

/// -p with a FOSTER_PARENT that is not foster's parent: the gate stops foster (120) before
/// PROGRAM starts.
fn pdeath_gone(mode: Mode) {
    if mode == Mode::Pid1 {
        // getppid() is 0 there: the parent cannot be checked (foster says so and arms anyway).
        let (code, err) = run_status(mode, &["-v", "-p", "TERM", "--", "true"]);
        assert_eq!(code, 0, "{err}");
        assert!(err.contains("cannot be re-checked"), "{err}");
        return;
    }
    let me_id = foster::process::identity::Identity::current().unwrap();
    let stale = format!("{}:{}", me_id.pid, me_id.start_time + 1);
    let out = foster(mode, &["-p", "TERM", "--", "sh", "-c", "echo started"])
        .env("FOSTER_PARENT", &stale)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(120), "{err}");
    assert!(out.stdout.is_empty(), "PROGRAM must not start");
    assert!(err.contains("-p SIGTERM") && err.contains(&stale), "{err}");
}

/// -p TERM:exit:300ms: foster's parent dies (SIGKILL), foster forwards SIGTERM to PROGRAM,
/// which ignores it; after the grace foster SIGKILLs PROGRAM and exits. As a subreaper the
/// parent is a shell; as PID 1 it is `unshare`, outside foster's namespace.
fn pdeath_grace(mode: Mode) {
    let prog = "trap '' TERM; echo ready; exec sleep 1000";
    let pdeath = "TERM:exit:300ms";
    let mut parent = match mode {
        Mode::Subreaper => {
            let mut c = Command::new("sh");
            c.args([
                "-c",
                r#""$FOSTER" init -v -p "$P" -- sh -c "$PROG" & read x"#,
            ])
            .env("FOSTER", FOSTER)
            .env("P", pdeath)
            .env("PROG", prog)
            .env_remove("FOSTER_PARENT")
            .env_remove("FOSTER_SUBREAPER")
            .env_remove("FOSTER_VERBOSITY");
            c
        }
        Mode::Pid1 => foster(mode, &["-v", "-p", pdeath, "--", "sh", "-c", prog]),
    };
    parent
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut r = Running::start(mode, parent);
    r.until("ready");
    let foster_pid = children_of(r.child.id() as i32)[0];
    let program = children_of(foster_pid)[0];
    // Both are alive, in the tree of our child.
    let fds: Vec<i32> = [foster_pid, program]
        .iter()
        .map(|&p| raw_pidfd(p))
        .collect();
    assert!(fds.iter().all(|&fd| fd >= 0));
    let mut err = r.child.stderr.take().unwrap();
    let t = Instant::now();
    r.child.kill().unwrap(); // foster's parent
    r.child.wait().unwrap();
    // A 30 s safety net: foster ends 300 ms after its parent.
    let ended = poll(&mut [PollFd::input(fds[0])], Some(common::LIMIT)).unwrap() == 1;
    if !ended {
        fds.iter().for_each(|&fd| pidfd_kill(fd));
    }
    let mut log = String::new();
    err.read_to_string(&mut log).unwrap();
    assert!(
        ended,
        "foster and PROGRAM still run 30 s after the parent died: {log}"
    );
    assert!(t.elapsed() >= Duration::from_millis(300), "{log}");
    assert!(log.contains("reports the parent's death"), "{log}");
    assert!(log.contains("outlived the grace of 300ms"), "{log}");
    assert!(log.contains("ended: killed by SIGKILL"), "{log}");
    // Readable once PROGRAM has ended.
    let p = poll(&mut [PollFd::input(fds[1])], Some(Duration::ZERO)).unwrap();
    assert_eq!(p, 1, "PROGRAM still runs");
    for fd in fds {
        // SAFETY: our descriptors.
        unsafe { libc::close(fd) };
    }
}

/// -p TERM: foster's parent dies (SIGKILL), the kernel sends foster SIGTERM, foster forwards it
/// to PROGRAM, which reports it; both end.
fn pdeath_fires() {
    let script = format!("{FOSTER} init -p TERM -- {} --helper catch & read x", me());
    let mut parent = Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(parent.stdout.take().unwrap());
    let mut l = String::new();
    lines.read_line(&mut l).unwrap();
    assert_eq!(l.trim(), "ready");
    parent.kill().unwrap();
    parent.wait().unwrap();
    let mut rest = String::new();
    lines.read_to_string(&mut rest).unwrap(); // EOF: foster and PROGRAM both ended
    assert_eq!(rest.trim(), format!("got {}", libc::SIGTERM));
}

/// Not PID 1, and a seccomp filter makes prctl(PR_SET_CHILD_SUBREAPER) fail: foster says so and
/// what to do, still runs PROGRAM; FOSTER_SUBREAPER=0 runs without the message.
fn no_subreaper_message() {
    for off in [false, true] {
        let mut cmd = foster(Mode::Subreaper, &["--", "sh", "-c", "exit 5"]);
        if off {
            cmd.env("FOSTER_SUBREAPER", "0");
        }
        // SAFETY: prctl/seccomp with a filter built before fork.
        let filter = seccomp_deny_subreaper();
        // SAFETY: installs a filter built before the fork, in the child, before its exec.
        unsafe {
            cmd.pre_exec(move || {
                let prog = libc::sock_fprog {
                    len: filter.len() as u16,
                    filter: filter.as_ptr() as *mut libc::sock_filter,
                };
                if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                    || libc::syscall(
                        libc::SYS_seccomp,
                        libc::SECCOMP_SET_MODE_FILTER,
                        0,
                        &prog as *const libc::sock_fprog,
                    ) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let out = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(5), "{err}");
        if off {
            assert!(err.is_empty(), "{err}");
        } else {
            assert!(err.contains("cannot become a child subreaper"), "{err}");
            assert!(err.contains("Operation not permitted"), "{err}");
            assert!(
                err.contains("ENTRYPOINT") && err.contains("FOSTER_SUBREAPER=0"),
                "{err}"
            );
        }
    }
}

/// A seccomp program: prctl(PR_SET_CHILD_SUBREAPER, ...) fails with EPERM, all else allowed.
fn seccomp_deny_subreaper() -> Vec<libc::sock_filter> {
    let stmt = |code: u32, k: u32| libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    };
    let jeq = |k: u32, jt: u8, jf: u8| libc::sock_filter {
        code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
        jt,
        jf,
        k,
    };
    let ld = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
    let ret = libc::BPF_RET | libc::BPF_K;
    vec![
        stmt(ld, 0),                       // seccomp_data.nr
        jeq(libc::SYS_prctl as u32, 0, 3), // not prctl: allow
        stmt(ld, 16),                      // args[0] (low half)
        jeq(libc::PR_SET_CHILD_SUBREAPER as u32, 0, 1),
        stmt(ret, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32),
        stmt(ret, libc::SECCOMP_RET_ALLOW),
    ]
}

// ---------------------------------------------------------------------------------------------
// PROGRAM helpers (this binary run with `--helper`).

fn helper(args: &[String]) {
    match args[0].as_str() {
        "catch" => helper_catch(),
        "pdeath" => helper_pdeath(),
        "storm" => helper_storm(args[1].parse().unwrap(), args[2].parse().unwrap()),
        "chatter" => helper_chatter(args[1].parse().unwrap()),
        "count" => helper_count(args[1].parse().unwrap(), args[2].parse().unwrap()),
        "each" => helper_each(args[1].parse().unwrap()),
        "fault" => helper_fault(&args[1]),
        other => panic!("unknown helper {other}"),
    }
}

/// Prints its parent-death signal, its own pid, FOSTER_PARENT and FOSTER_POLICY.
fn helper_pdeath() {
    let mut sig: libc::c_int = 0;
    // SAFETY: prctl writing one int.
    unsafe {
        libc::prctl(
            libc::PR_GET_PDEATHSIG,
            &mut sig as *mut libc::c_int,
            0,
            0,
            0,
        )
    };
    println!(
        "pdeath {sig} self {} parent {} policy {}",
        std::process::id(),
        std::env::var("FOSTER_PARENT").unwrap_or_default(),
        std::env::var("FOSTER_POLICY").unwrap_or_default(),
    );
}

/// Blocks every forwardable signal, says ready, takes one with sigwaitinfo, exits 128 + n.
fn helper_catch() {
    // SAFETY: sigset operations on stack values.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in forwarded_signals() {
            libc::sigaddset(&mut set, s);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        println!("ready");
        std::io::stdout().flush().unwrap();
        let sig = libc::sigwaitinfo(&set, std::ptr::null_mut());
        println!("got {sig}");
        std::io::stdout().flush().unwrap();
        libc::_exit(128 + sig);
    }
}

/// Blocks every signal foster forwards, says `ready PID`, prints `got N` for each of the next
/// `n` signals it takes, and exits 0.
fn helper_each(n: usize) {
    // SAFETY: sigset operations on stack values.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut set);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        println!("ready {}", std::process::id());
        std::io::stdout().flush().unwrap();
        for _ in 0..n {
            let sig = libc::sigwaitinfo(&set, std::ptr::null_mut());
            println!("got {sig}");
            std::io::stdout().flush().unwrap();
        }
    }
}

/// Sets up foster init's signal state (every forwarded signal blocked, their signalfd open),
/// says `blocked`, then makes a real fault of `kind`; says `survived` if it lives on.
fn helper_fault(kind: &str) {
    use foster::init::signals;
    signals::block(signals::forwarded()).unwrap();
    let _fd = signals::SignalFd::new(signals::forwarded()).unwrap();
    println!("blocked");
    std::io::stdout().flush().unwrap();
    // SAFETY: each arm makes the fault it names, on purpose; none returns normally.
    unsafe {
        match kind {
            "SEGV" => std::ptr::write_volatile(16 as *mut u8, 1),
            "BUS" => {
                // A shared mapping past the end of an empty file.
                let fd = libc::memfd_create(c"fault".as_ptr(), 0);
                let p = libc::mmap(
                    std::ptr::null_mut(),
                    4096,
                    libc::PROT_READ,
                    libc::MAP_SHARED,
                    fd,
                    0,
                );
                assert_ne!(p, libc::MAP_FAILED);
                std::ptr::read_volatile(p as *const u8);
            }
            "SYS" => {
                // seccomp: getppid traps (SIGSYS, forced by the kernel).
                let ld = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
                let filter = [
                    libc::sock_filter {
                        code: ld as u16,
                        jt: 0,
                        jf: 0,
                        k: 0,
                    },
                    libc::sock_filter {
                        code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
                        jt: 0,
                        jf: 1,
                        k: libc::SYS_getppid as u32,
                    },
                    libc::sock_filter {
                        code: (libc::BPF_RET | libc::BPF_K) as u16,
                        jt: 0,
                        jf: 0,
                        k: libc::SECCOMP_RET_TRAP,
                    },
                    libc::sock_filter {
                        code: (libc::BPF_RET | libc::BPF_K) as u16,
                        jt: 0,
                        jf: 0,
                        k: libc::SECCOMP_RET_ALLOW,
                    },
                ];
                let prog = libc::sock_fprog {
                    len: filter.len() as u16,
                    filter: filter.as_ptr() as *mut libc::sock_filter,
                };
                assert_eq!(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
                assert_eq!(
                    libc::syscall(
                        libc::SYS_seccomp,
                        libc::SECCOMP_SET_MODE_FILTER,
                        0,
                        &prog as *const libc::sock_fprog,
                    ),
                    0
                );
                libc::syscall(libc::SYS_getppid);
            }
            #[cfg(target_arch = "x86_64")]
            "ILL" => std::arch::asm!("ud2"),
            #[cfg(target_arch = "x86_64")]
            "TRAP" => std::arch::asm!("int3"),
            #[cfg(target_arch = "x86_64")]
            "FPE" => std::arch::asm!(
                "div {0:e}",
                in(reg) 0u32,
                inout("eax") 1u32 => _,
                inout("edx") 0u32 => _,
            ),
            other => panic!("unknown fault {other}"),
        }
    }
    println!("survived");
}

/// Blocks `sig` and `end`, says ready, counts the `sig`s it takes until `end` arrives (then
/// also those already pending), prints `count N` and exits 0.
fn helper_count(sig: i32, end: i32) {
    // SAFETY: sigset operations on stack values.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::sigaddset(&mut set, end);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        println!("ready");
        std::io::stdout().flush().unwrap();
        let mut n = 0;
        loop {
            let got = libc::sigwaitinfo(&set, std::ptr::null_mut());
            if got == sig {
                n += 1;
            } else if got == end {
                break;
            }
        }
        let zero = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        while libc::sigtimedwait(&set, std::ptr::null_mut(), &zero) == sig {
            n += 1;
        }
        println!("count {n}");
    }
}

/// Ignores signal `sig`, says ready, then writes `program-line` lines to standard error, one
/// `write` each, as fast as it can until its standard input closes; exits 0.
fn helper_chatter(sig: i32) {
    // SAFETY: signal() with SIG_IGN.
    unsafe { libc::signal(sig, libc::SIG_IGN) };
    std::thread::spawn(|| {
        let mut b = [0u8; 1];
        let _ = std::io::stdin().read(&mut b);
        // SAFETY: ends the process at once (the writer loops forever).
        unsafe { libc::_exit(0) };
    });
    println!("ready");
    std::io::stdout().flush().unwrap();
    let line = b"program-line\n";
    loop {
        // SAFETY: writes a static buffer.
        unsafe { libc::write(2, line.as_ptr().cast(), line.len()) };
    }
}

/// Makes `n` orphans (double fork) that end at once when a pipe closes, waits until each is
/// reaped by whoever adopted it (its identity, pid and start time, is gone from `/proc`: not
/// even a zombie; by pid alone, a pid reused by another process at once looked unreaped),
/// prints `reaped N`, and exits `code`.
fn helper_storm(n: usize, code: i32) {
    let (rel_r, rel_w) = nix::unistd::pipe().unwrap();
    let (pid_r, pid_w) = nix::unistd::pipe().unwrap();
    let (rel_r_fd, rel_w_fd, pid_w_fd) = (rel_r.as_raw_fd(), rel_w.as_raw_fd(), pid_w.as_raw_fd());
    for _ in 0..n {
        // SAFETY: the children only call async-signal-safe functions.
        let c = unsafe { libc::fork() };
        assert!(c >= 0, "fork");
        if c == 0 {
            // SAFETY: in the forked child: raw system calls, then _exit.
            unsafe {
                let g = libc::fork();
                if g == 0 {
                    libc::close(rel_w_fd);
                    libc::close(pid_w_fd);
                    let mut b = 0u8;
                    libc::read(rel_r_fd, (&mut b as *mut u8).cast(), 1);
                    libc::_exit(0);
                }
                let b = g.to_ne_bytes();
                libc::write(pid_w_fd, b.as_ptr().cast(), 4);
                libc::_exit(0);
            }
        }
        // Our own child: we reap it (we are not the init).
        let mut st = 0;
        // SAFETY: reaps this test's own child, by pid.
        unsafe { libc::waitpid(c, &mut st, 0) };
    }
    drop(pid_w);
    drop(rel_r);
    let mut pids = Vec::with_capacity(n);
    let mut f = std::fs::File::from(pid_r);
    let mut b = [0u8; 4];
    while f.read_exact(&mut b).is_ok() {
        pids.push(i32::from_ne_bytes(b));
    }
    assert_eq!(pids.len(), n);
    assert!(pids.iter().all(|&p| p > 0), "a fork of an orphan failed");
    // Read while they all wait for the pipe: their pids cannot have been reused yet.
    let ids: Vec<foster::process::identity::Identity> = pids
        .iter()
        .map(|&p| foster::process::identity::Identity::of(p).expect("a waiting orphan"))
        .collect();
    drop(rel_w); // every orphan ends now
    let deadline = Instant::now() + Duration::from_secs(60);
    for id in &ids {
        while foster::process::identity::Identity::of(id.pid).is_ok_and(|now| now == *id) {
            assert!(Instant::now() < deadline, "orphan {id} never reaped");
            std::thread::yield_now();
        }
    }
    println!("reaped {}", pids.len());
    println!("storm-done");
    std::io::stdout().flush().unwrap();
    std::process::exit(code);
}

/// A pidfd of `pid` as a raw descriptor the test closes or leaves to its end (-1 on failure).
fn raw_pidfd(pid: i32) -> i32 {
    use std::os::fd::IntoRawFd;
    foster::process::identity::pidfd_open(pid).map_or(-1, IntoRawFd::into_raw_fd)
}
