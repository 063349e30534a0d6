//! `foster run` end to end, on real processes. Synchronisation is the events log, read from a
//! FIFO as foster writes it; deadlines are only safety nets.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::common;
use common::child::wait_exit;
use common::events::{Events, kind};
use common::fifo::ready as wait_ready;
use common::foster_run::FosterRun;
use common::supervised::raw_status;
use common::{Dir, is_root, libc_signals_at_default, process, processes, processes_with_env};
use common::{LIMIT, send, wait_pid_gone};

fn launch_of<'a>(helper: &'a str) -> impl Fn(&Value) -> bool + 'a {
    move |v| kind(v) == "launch" && v["helper"] == helper
}
fn pid(v: &Value) -> i32 {
    v["identity"]["pid"].as_i64().unwrap() as i32
}

/// `foster run --no-socket`: these tests do not use the socket, and its default path (named
/// after the configuration file) would be shared by the tests running at once and by other
/// runs of this suite on the machine.
fn foster() -> FosterRun {
    FosterRun::new().arg("--no-socket")
}

/// A helper `name` whose shell starts two sleeps, then writes `ready` into `ready` and waits.
fn two_sleeps(name: &str, ready: &Path) -> String {
    format!(
        "[[helper]]\nname = \"{name}\"\n\
         command = [\"/bin/sh\", \"-c\", \"sleep 1000 & sleep 1000 & echo ready > {}; wait\"]\n",
        ready.display()
    )
}

/// Starts `foster run --events-log FIFO CONFIG`, the FIFO made in `d` under `name`, and opens
/// its events.
fn run_logged(d: &Dir, name: &str, cfg: &Path) -> (Child, Events) {
    run_logged_with(d, name, cfg, &[])
}

/// [`run_logged`] with more options of `foster run` (`--no-contain` for a test that compares
/// the events' pids with foster's own and its tree's: contained, the supervisor is the init
/// that foster forks, and its adoptions and policies are its namespace's).
fn run_logged_with(d: &Dir, name: &str, cfg: &Path, flags: &[&str]) -> (Child, Events) {
    foster().args(flags).logged(&d.fifo(name), cfg)
}

/// Live processes whose environment says they descend from the helper `name`, and the
/// descendants of those. The descendants are taken by parent pid too: a process in the middle of
/// its exec shows an empty environment for an instant (the new image's is not set up yet), and
/// a helper's "ready" barrier, written after its forks, does not wait for its children's execs.
fn processes_of_helper(name: &str) -> Vec<i32> {
    let mut out: Vec<i32> = processes_with_env(&format!("FOSTER_HELPER={name}"))
        .iter()
        .map(|p| p.pid)
        .collect();
    let snap = processes();
    let mut i = 0;
    while i < out.len() {
        if let Some(id) = snap.identity_of(out[i]) {
            for c in snap.children(&id) {
                if !c.is_zombie() && !out.contains(&c.pid) {
                    out.push(c.pid);
                }
            }
        }
        i += 1;
    }
    out
}

fn ppid_of(p: i32) -> i32 {
    process(p).map_or(0, |n| n.ppid)
}

fn kill_all(pids: &[i32]) {
    for &p in pids {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(p), nix::sys::signal::SIGKILL);
    }
}

/// The processes of `helper` still there, each SIGKILLed: the test fails on them after.
fn leftovers(helper: &str) -> Vec<i32> {
    let left = processes_of_helper(helper);
    kill_all(&left);
    left
}

/// SIGTERM to foster, its events to the end, its exit; then no process of `helper` is left
/// (any that is, is killed before the assertion fails).
fn stop_leaving_nothing(f: &mut Child, ev: &mut Events, helper: &str) {
    send(f.id() as i32, libc::SIGTERM);
    ev.rest();
    wait_exit(f);
    let left = leftovers(helper);
    assert!(left.is_empty(), "{helper}: {left:?}");
}

#[test]
fn bad_configs_each_have_their_own_message_and_start_nothing() {
    let d = Dir::new("run", "bad");
    let marker = d.0.join("started");
    let cmd = format!("command = [\"/bin/touch\", \"{}\"]\n", marker.display());
    let cases: Vec<(String, &str)> = vec![
        (
            format!("[[helper]]\nname = \"a\"\n{cmd}colour = \"red\"\n"),
            "unknown field `colour`",
        ),
        (
            format!("[[helper]]\nname = \"a\"\n{cmd}[[helper]]\nname = \"a\"\n{cmd}"),
            "duplicate helper name \"a\"",
        ),
        (
            "[[helper]]\nname = \"a\"\ncommand = []\n".into(),
            "the command is empty",
        ),
        (
            format!("[[helper]]\nname = \"a\"\n{cmd}stop_signal = \"SIGFOO\"\n"),
            "unknown signal \"SIGFOO\"",
        ),
        (
            format!("[[helper]]\nname = \"a\"\n{cmd}stop_grace = \"0s\"\n"),
            "zero duration",
        ),
        (
            format!("[[helper]]\nname = \"a\"\n{cmd}stop_grace = \"-1s\"\n"),
            "negative duration",
        ),
        (
            format!("[[helper]]\nname = \"a\"\n{cmd}restart = \"often\"\n"),
            "unknown variant `often`",
        ),
    ];
    for (i, (text, want)) in cases.iter().enumerate() {
        let f = d.file(&format!("bad{i}.toml"), text);
        for check in [true, false] {
            let run = if check {
                FosterRun::new().arg("--check")
            } else {
                foster()
            };
            let out = run.output(&f);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{text}: {err}");
            assert!(err.contains(want), "{text}: wanted {want:?} in {err}");
            assert!(
                err.contains(&format!("bad{i}.toml:")),
                "names the file: {err}"
            );
            assert!(!marker.exists(), "a helper was started for {text}");
        }
    }
    let ok = d.file("ok.toml", &format!("[[helper]]\nname = \"a\"\n{cmd}"));
    let out = FosterRun::new().arg("--check").output(&ok);
    assert!(out.status.success());
    assert!(!marker.exists(), "--check started a helper");
}

#[test]
fn restart_backoff_and_limit() {
    let d = Dir::new("run", "restart");
    let cfg = d.file(
        "c.toml",
        "[[helper]]\nname = \"flaky\"\ncommand = [\"/bin/sh\", \"-c\", \"exit 7\"]\n\
         restart = \"on-failure\"\nbackoff = { initial = \"20ms\", max = \"50ms\", limit = 4 }\n",
    );
    let (mut f, mut ev) = run_logged(&d, "events", &cfg);
    let all = ev.rest().to_vec();
    assert_eq!(wait_exit(&mut f), 3, "a helper given up on: exit status 3");
    let delays: Vec<u64> = all
        .iter()
        .filter(|v| kind(v) == "restart")
        .map(|v| v["delay_ms"].as_u64().unwrap())
        .collect();
    assert_eq!(delays, [20, 40, 50, 50]);
    let launches = all.iter().filter(|v| kind(v) == "launch").count();
    assert_eq!(launches, 5);
    let codes: Vec<_> = all
        .iter()
        .filter(|v| kind(v) == "exit")
        .map(|v| v["status"]["code"].as_i64().unwrap())
        .collect();
    assert_eq!(codes, [7; 5]);
    let give_up = all
        .iter()
        .find(|v| kind(v) == "give_up")
        .expect("a give_up event");
    assert_eq!(give_up["restarts"], 4);
}

/// A program that cannot be found at launch (there when `--check` ran, removed since) is an
/// exit with 127, as in a shell: restarted by the helper's rules, then given up on; one that
/// is not executable is a 126. foster then ends with status 3, as for any helper given up on.
#[test]
fn a_program_missing_at_launch_exits_127_through_the_restart_rules() {
    use std::os::unix::fs::PermissionsExt;
    let d = Dir::new("run", "missing");
    let program = d.file("server", "#!/bin/sh\nexit 0\n");
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    let plain = d.file("plain", "not a program\n");
    let cfg = d.file(
        "c.toml",
        &format!(
            "[[helper]]\nname = \"gone\"\ncommand = [\"{}\"]\nrestart = \"on-failure\"\n\
             backoff = {{ initial = \"10ms\", max = \"20ms\", limit = 2 }}\n\
             [[helper]]\nname = \"plain\"\ncommand = \"{}\"\n",
            program.display(),
            plain.display()
        ),
    );
    let out = FosterRun::new().arg("--check").output(&cfg);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(2),
        "the plain file is refused: {err}"
    );
    assert!(err.contains("key `helper[2].command`"), "{err}");
    assert!(!err.contains("helper[1]"), "the program is there: {err}");
    std::fs::remove_file(&program).unwrap();

    let (mut f, mut ev) = run_logged(&d, "events", &cfg);
    let all = ev.rest().to_vec();
    assert_eq!(wait_exit(&mut f), 3, "a helper given up on: exit status 3");
    let of = |helper: &str| -> Vec<Value> {
        all.iter()
            .filter(|v| v["helper"] == helper)
            .cloned()
            .collect()
    };
    // Its states apart: a launch refused before any process existed leaves it in backoff (no
    // change, no event) until it is given up on.
    let states: Vec<Value> = of("gone")
        .into_iter()
        .filter(|v| kind(v) == "state")
        .map(|v| v["state"].clone())
        .collect();
    assert_eq!(states, ["backoff", "gave_up"]);
    let gone: Vec<Value> = of("gone")
        .into_iter()
        .filter(|v| kind(v) != "state")
        .collect();
    let kinds: Vec<&str> = gone.iter().map(kind).collect();
    assert_eq!(
        kinds,
        [
            "launch_failed",
            "restart",
            "launch_failed",
            "restart",
            "launch_failed",
            "give_up"
        ],
        "{gone:#?}"
    );
    for v in gone.iter().filter(|v| kind(v) == "launch_failed") {
        assert_eq!(v["status"]["how"], "exited", "{v}");
        assert_eq!(v["status"]["code"], 127, "{v}");
        let error = v["error"].as_str().unwrap();
        assert!(error.starts_with("exec failed: ENOENT: "), "{error}");
        assert!(error.contains("server: no such file"), "{error}");
    }
    assert_eq!(gone[5]["restarts"], 2);
    let delays: Vec<u64> = gone
        .iter()
        .filter(|v| kind(v) == "restart")
        .map(|v| v["delay_ms"].as_u64().unwrap())
        .collect();
    assert_eq!(delays, [10, 20]);
    // restart = "never": one 126, and that is all: the helper failed.
    let plain = of("plain");
    assert_eq!(plain.len(), 2, "{plain:#?}");
    assert_eq!(kind(&plain[1]), "state");
    assert_eq!(plain[1]["state"], "failed");
    assert_eq!(plain[1]["detail"], "(exit code 126)");
    assert_eq!(kind(&plain[0]), "launch_failed");
    assert_eq!(plain[0]["status"]["code"], 126);
    assert!(
        plain[0]["error"]
            .as_str()
            .unwrap()
            .starts_with("exec failed: EACCES: "),
        "{}",
        plain[0]
    );
    let last = all.last().unwrap();
    assert_eq!(kind(last), "stopped");
    assert_eq!(last["exit_status"], 3);
}

#[test]
fn sigterm_ends_the_whole_tree_with_documented_status() {
    let d = Dir::new("run", "term");
    let tag = format!("term{}", std::process::id());
    let ready = d.fifo("ready");
    let cfg = d.file(
        "c.toml",
        &format!(
            "[[helper]]\nname = \"{tag}-polite\"\ncommand = [\"/bin/sh\", \"-c\", \"sleep 1000 & sleep 1000 & wait\"]\n\
             stop_grace = \"5s\"\n\
             [[helper]]\nname = \"{tag}-stubborn\"\n\
             command = [\"/bin/sh\", \"-c\", \"trap '' TERM; sleep 1000 & echo ready > {}; wait; wait\"]\n\
             stop_grace = \"300ms\"\n",
            ready.display()
        ),
    );
    let (mut f, mut ev) = run_logged(&d, "events", &cfg);
    ev.wait_for("launch polite", launch_of(&format!("{tag}-polite")));
    ev.wait_for("launch stubborn", launch_of(&format!("{tag}-stubborn")));
    wait_ready(&ready); // the stubborn helper ignores TERM from here on
    send(f.id() as i32, libc::SIGTERM);
    // A second request changes nothing (idempotent shutdown).
    send(f.id() as i32, libc::SIGINT);
    let all = ev.rest().to_vec();
    let code = wait_exit(&mut f);
    assert_eq!(code, 4, "the stubborn helper needed SIGKILL: status 4");
    assert_eq!(all.iter().filter(|v| kind(v) == "shutdown").count(), 1);
    let killed: Vec<&Value> = all
        .iter()
        .filter(|v| kind(v) == "signal" && v["reason"] == "grace_expired")
        .map(|v| &v["target"])
        .collect();
    assert!(!killed.is_empty());
    let once: std::collections::HashSet<String> = killed.iter().map(|t| t.to_string()).collect();
    assert_eq!(
        once.len(),
        killed.len(),
        "a process SIGKILLed twice: {killed:?}"
    );
    let left: Vec<i32> = [format!("{tag}-polite"), format!("{tag}-stubborn")]
        .iter()
        .flat_map(|h| processes_of_helper(h))
        .collect();
    kill_all(&left);
    assert!(left.is_empty(), "processes survived the shutdown: {left:?}");
    assert_eq!(
        all.last().map(|v| v["exit_status"].clone()),
        Some(Value::from(4))
    );
}

/// A closed terminal: SIGHUP starts the same orderly shutdown as SIGTERM, so nothing of the
/// tree is left and the control socket's file is removed.
#[test]
fn sighup_shuts_down_in_order_and_removes_the_socket() {
    let d = Dir::new("run", "hup");
    let tag = format!("hup{}", std::process::id());
    let ready = d.fifo("ready");
    let cfg = d.file(
        "c.toml",
        &format!("{}stop_grace = \"5s\"\n", two_sleeps(&tag, &ready)),
    );
    let sock = d.0.join("hup.sock");
    let (mut f, mut ev) = FosterRun::new()
        .socket(&sock)
        .logged(&d.fifo("events"), &cfg);
    let start = ev.started();
    ev.wait_for("launch", launch_of(&tag));
    wait_ready(&ready);
    assert!(
        sock.exists(),
        "no socket at {} (start: {start})",
        sock.display()
    );
    assert!(!processes_of_helper(&tag).is_empty(), "the tree is there");
    send(f.id() as i32, libc::SIGHUP);
    let all = ev.rest().to_vec();
    let code = wait_exit(&mut f);
    let left = leftovers(&tag);
    assert!(left.is_empty(), "processes survived SIGHUP: {left:?}");
    assert_eq!(code, 0, "an orderly shutdown within its grace");
    let shutdown: Vec<&Value> = all.iter().filter(|v| kind(v) == "shutdown").collect();
    assert_eq!(shutdown.len(), 1, "{all:?}");
    assert_eq!(shutdown[0]["signal"], "SIGHUP");
    assert!(!sock.exists(), "socket file left at {}", sock.display());
}

#[test]
fn nested_supervisors_adopt_at_the_nearest_living_subreaper() {
    let d = Dir::new("run", "nested");
    let tag = format!("nest{}", std::process::id());
    let inner_fifo = d.fifo("inner-events");
    let ready = d.fifo("ready");
    let ready2 = d.fifo("ready2");
    let inner = d.file(
        "inner.toml",
        &format!(
            "{}[[helper]]\nname = \"{tag}-survivor\"\n\
             command = [\"/bin/sh\", \"-c\", \"trap '' HUP; sleep 1000 & echo ready > {}; wait; wait\"]\n\
             [[helper.generation]]\nsignal = \"HUP\"\n",
            two_sleeps(&format!("{tag}-mid"), &ready),
            ready2.display()
        ),
    );
    let exe = env!("CARGO_BIN_EXE_foster");
    let top = d.file(
        "top.toml",
        &format!(
            "[[helper]]\nname = \"{tag}-nested\"\n\
             command = [\"{exe}\", \"run\", \"--no-socket\", \"--no-contain\", \"--events-log\", \"{}\", \"{}\"]\n\
             [[helper.generation]]\nsignal = \"TERM\"\n\
             [[helper.generation]]\nsignal = \"KILL\"\nreaction = \"kill\"\ngrace = \"1s\"\n",
            inner_fifo.display(),
            inner.display()
        ),
    );
    // Uncontained, both: the test compares the events' pids with foster's own.
    let (mut f, mut top_ev) = run_logged_with(&d, "top-events", &top, &["--no-contain"]);
    let mut in_ev = Events::open(&inner_fifo);
    let nested = top_ev.wait_for("launch nested", launch_of(&format!("{tag}-nested")));
    let start = in_ev.started();
    let inner_id = start["supervisor"].clone();
    assert_eq!(inner_id["pid"], nested["identity"]["pid"]);
    let mid = in_ev.wait_for("launch mid", launch_of(&format!("{tag}-mid")));
    in_ev.wait_for("launch survivor", launch_of(&format!("{tag}-survivor")));

    wait_ready(&ready);
    // Generation 2 (mid) dies: its children go to the nested foster, as expected.
    let mid_pid = pid(&mid);
    let sleeps: Vec<i32> = processes_of_helper(&format!("{tag}-mid"))
        .into_iter()
        .filter(|&p| p != mid_pid)
        .collect();
    assert_eq!(sleeps.len(), 2, "mid's two children");
    kill_all(&[mid_pid]);
    for &s in &sleeps {
        let v = in_ev.wait_for("mid's child reparented", |v| {
            kind(v) == "reparented" && v["identity"]["pid"] == s
        });
        assert_eq!(v["to"], inner_id, "adopted by the nested foster");
        assert_eq!(v["expected"], inner_id);
        assert_eq!(v["classification"], "expected");
        assert_eq!(v["helper"], format!("{tag}-mid"));
    }
    // ...and its orphan policy (TERM) ends them.
    for &s in &sleeps {
        in_ev.wait_for("orphan exit", |v| kind(v) == "exit" && v["pid"] == s);
    }

    // The nested foster dies: its surviving helper goes one level up, to the top foster.
    let survivor = in_ev.wait_for("survivor", launch_of(&format!("{tag}-survivor")));
    wait_ready(&ready2); // the survivor ignores HUP from here on
    kill_all(&[pid(&nested)]);
    let v = top_ev.wait_for("survivor reparented to top", |v| {
        kind(v) == "reparented" && v["identity"] == survivor["identity"]
    });
    let me = top_ev.started()["supervisor"].clone();
    assert_eq!(v["to"], me);
    assert_eq!(v["classification"], "expected");
    assert_eq!(
        v["helper"],
        format!("{tag}-nested"),
        "attributed to the top helper"
    );
    // Top's generation-2 policy is KILL.
    top_ev.wait_for("survivor killed", |v| {
        kind(v) == "exit"
            && v["identity"] == survivor["identity"]
            && v["status"]["signal"] == "SIGKILL"
    });
    stop_leaving_nothing(&mut f, &mut top_ev, &format!("{tag}-survivor"));
}

/// SIGKILL of foster (the OOM killer's way). By default, as root, the tree is contained: the
/// helper runs in a new PID namespace (its `NSpid` seen from here has two entries, the first the
/// pid its launch event names) and the kernel ends every process of it, the unarmed
/// grandchildren too; `--contain` is the same, required. With `--no-contain` (the only case run
/// when not root) the helper is in this namespace, the gated helper ends by its own parent-death
/// policy, and its unarmed children survive, reparented past foster.
#[test]
fn sigkill_of_foster_ends_the_contained_tree_and_only_armed_processes_uncontained() {
    let d = Dir::new("run", "kill");
    let tag = format!("kill{}", std::process::id());
    let cases: &[&[&str]] = if is_root() {
        &[&[], &["--contain"], &["--no-contain"]]
    } else {
        common::skip::setup(
            "part: the contained cases: they need root here (see tests of user namespaces)",
        );
        &[&["--no-contain"]]
    };
    for (n, &flags) in cases.iter().enumerate() {
        let contained = !flags.contains(&"--no-contain");
        let name = format!("{tag}-{n}");
        let ready = d.fifo(&format!("ready{n}"));
        let cfg = d.file(
            &format!("c{n}.toml"),
            &format!(
                "{}[[helper.generation]]\nsignal = \"TERM\"\ngrace = \"2s\"\n",
                two_sleeps(&name, &ready)
            ),
        );
        let (mut f, mut ev) = run_logged_with(&d, &format!("events{n}"), &cfg, flags);
        let _stop = StopOnPanic(f.id() as i32);
        let launched = ev.wait_for("launch", launch_of(&name));
        // Both sleeps exist before the kill.
        wait_ready(&ready);
        let procs = processes_of_helper(&name);
        assert_eq!(procs.len(), 3, "{flags:?}: the helper and its two children");
        let sh = *procs
            .iter()
            .find(|&&p| !procs.contains(&ppid_of(p)))
            .expect("the helper among the processes");
        let ns = nspid(sh);
        assert_eq!(
            ns.len(),
            if contained { 2 } else { 1 },
            "{flags:?}: NSpid {ns:?}"
        );
        // The events log names the helper by its pid here, contained or not.
        assert_eq!(
            ns.first().copied(),
            Some(pid(&launched)),
            "{flags:?}: NSpid {ns:?}"
        );
        f.kill().unwrap(); // SIGKILL
        let _ = f.wait();
        // The gated helper ends within its 2 s grace, contained or not.
        assert!(
            wait_pid_gone(sh, Duration::from_millis(2500)),
            "{flags:?}: the gated helper outlived foster's SIGKILL"
        );
        let sleeps: Vec<i32> = procs.iter().copied().filter(|&p| p != sh).collect();
        let survived: Vec<i32> = sleeps
            .iter()
            .copied()
            .filter(|&p| !wait_pid_gone(p, if contained { LIMIT } else { Duration::ZERO }))
            .collect();
        kill_all(&survived);
        for p in &survived {
            assert!(wait_pid_gone(*p, LIMIT));
        }
        if contained {
            assert!(
                survived.is_empty(),
                "{flags:?}: unarmed descendants survived: {survived:?}"
            );
        } else {
            // Unarmed children are not protected uncontained (documented): they were
            // reparented past foster, alive.
            assert_eq!(
                survived, sleeps,
                "--no-contain: the unarmed children live on"
            );
        }
    }
}

#[test]
fn orphan_storm_while_helpers_exit_with_known_codes() {
    let d = Dir::new("run", "storm");
    let mut text = String::from(
        "[[helper]]\nname = \"storm\"\n\
         command = [\"/bin/sh\", \"-c\", \"i=0; while [ $i -lt 1500 ]; do ( /bin/true & ); i=$((i+1)); done\"]\n",
    );
    for k in 0..20 {
        text.push_str(&format!(
            "[[helper]]\nname = \"code{k}\"\ncommand = [\"/bin/sh\", \"-c\", \"exit {k}\"]\n"
        ));
    }
    let cfg = d.file("c.toml", &text);
    let (mut f, mut ev) = run_logged(&d, "events", &cfg);
    let all = ev.rest().to_vec();
    // foster ends only when it has no child left at all: nothing unreaped remains.
    assert_eq!(wait_exit(&mut f), 3, "codes 1..19 are failures: status 3");
    for k in 0..20 {
        let e = all
            .iter()
            .find(|v| {
                kind(v) == "exit" && v["helper"] == format!("code{k}") && v["generation"] == 1
            })
            .unwrap_or_else(|| panic!("no exit of code{k}"));
        assert_eq!(e["status"]["code"], k, "code{k}");
    }
    let orphans = all
        .iter()
        .filter(|v| kind(v) == "exit" && v["generation"] != 1)
        .count();
    assert_eq!(orphans, 1500, "orphan exits reported");
    assert_eq!(all.last().unwrap()["event"], "stopped");
}

/// Not a test of its own: when `FOSTER_TEST_SUBREAPER_SCRIPT` is set (by a helper's `env`),
/// this process makes itself a child subreaper, a foster does not know of, and execs
/// `/bin/sh -c SCRIPT` (the attribute survives exec). Without the variable it does nothing.
#[test]
fn role_undeclared_subreaper() {
    let Ok(script) = std::env::var("FOSTER_TEST_SUBREAPER_SCRIPT") else {
        return;
    };
    use std::os::unix::process::CommandExt;
    assert_eq!(
        // SAFETY: prctl with integer arguments on this process.
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) },
        0
    );
    let err = Command::new("/bin/sh").arg("-c").arg(script).exec();
    panic!("exec /bin/sh: {err}");
}

/// A helper that made itself a subreaper without saying so adopts its grandchild: foster
/// expected the grandchild to reach foster itself, and reports a foreign reaper.
#[test]
fn an_undeclared_subreaper_is_a_foreign_reaper() {
    let d = Dir::new("run", "foreign");
    let tag = format!("foreign{}", std::process::id());
    let (ready, gate, tick1, tick2) = (d.fifo("ready"), d.fifo("gate"), d.fifo("t1"), d.fifo("t2"));
    // The helper (a subreaper) → a middle shell → a sleep; the middle one exits on `gate`.
    let script = format!(
        "/bin/sh -c 'sleep 1000 & echo $$ $! > {}; read x < {}' & wait; exec sleep 1000",
        ready.display(),
        gate.display()
    );
    let exe = std::env::current_exe().unwrap();
    // Two helpers whose death (on their FIFO) makes foster read its tree: each starts a sleep
    // only then and leaves it behind; its adoption event says that foster listed /proc after
    // the sleep existed, hence after everything the test had set up before.
    let tick = |name: &str, fifo: &Path| {
        format!(
            "[[helper]]\nname = \"{tag}-{name}\"\n\
             command = [\"/bin/sh\", \"-c\", \"read x < {}; sleep 1000 & exit 0\"]\n",
            fifo.display()
        )
    };
    let cfg = d.file(
        "c.toml",
        &format!(
            "[[helper]]\nname = \"{tag}-reaper\"\n\
             command = [\"{}\", \"--exact\", \"run::role_undeclared_subreaper\", \
             \"--nocapture\", \"--test-threads=1\"]\n\
             env = {{ FOSTER_TEST_SUBREAPER_SCRIPT = \"{}\" }}\n{}{}",
            exe.display(),
            script.replace('\\', "\\\\").replace('"', "\\\""),
            tick("tick1", &tick1),
            tick("tick2", &tick2),
        ),
    );
    // Uncontained: the helper's pids are compared with the events'.
    let (mut f, mut ev) = run_logged_with(&d, "events", &cfg, &["--no-contain"]);
    let me = ev.started()["supervisor"].clone();
    let reaper = ev.wait_for("launch reaper", launch_of(&format!("{tag}-reaper")));
    let line = common::fifo::line(&ready);
    let mut it = line.split_whitespace().map(|p| p.parse::<i32>().unwrap());
    let (middle, sleep) = (it.next().unwrap(), it.next().unwrap());
    assert_eq!(ppid_of(sleep), middle);
    // First read of the tree while the sleep is the middle shell's child.
    std::fs::write(&tick1, "go\n").unwrap();
    ev.wait_for("tick1's sleep adopted", |v| {
        kind(v) == "reparented" && v["helper"] == format!("{tag}-tick1")
    });
    // The middle shell ends: the kernel gives the sleep to the undeclared subreaper.
    std::fs::write(&gate, "go\n").unwrap();
    assert!(wait_pid_gone(middle, LIMIT), "the middle shell did not end");
    assert_eq!(ppid_of(sleep), pid(&reaper), "adopted by the helper");
    std::fs::write(&tick2, "go\n").unwrap();
    let v = ev.wait_for("the sleep's adoption", |v| {
        kind(v) == "reparented" && v["identity"]["pid"] == sleep
    });
    assert_eq!(v["classification"], "foreign_reaper", "{v}");
    assert_eq!(v["to"], reaper["identity"]);
    assert_eq!(v["expected"], me, "foster expected it");
    assert_eq!(v["from"]["pid"], middle);
    assert_eq!(v["helper"], format!("{tag}-reaper"));
    assert_eq!(v["generation"], 3);
    stop_leaving_nothing(&mut f, &mut ev, &format!("{tag}-reaper"));
}

/// An adopted orphan that dies leaves its own children orphaned: foster reads its subtree at
/// that reap (not at some later event) and applies their generation's policy at once.
#[test]
fn the_children_of_an_adopted_orphan_are_adopted_when_it_dies() {
    let d = Dir::new("run", "chain");
    let tag = format!("chain{}", std::process::id());
    let ready = d.fifo("ready");
    let cfg = d.file(
        "c.toml",
        &format!(
            "[[helper]]\nname = \"{tag}\"\n\
             command = [\"/bin/sh\", \"-c\", \"/bin/sh -c 'sleep 1000 & echo ready > {}; wait' & wait\"]\n",
            ready.display()
        ),
    );
    // Uncontained: the helper is killed by the pid its launch event names.
    let (mut f, mut ev) = run_logged_with(&d, "events", &cfg, &["--no-contain"]);
    let helper = pid(&ev.wait_for("launch", launch_of(&tag)));
    wait_ready(&ready); // the grandchild sleep exists
    send(helper, libc::SIGKILL);
    // Generation 2 (the middle shell) is adopted and ended by its policy; its reap alone must
    // make foster see generation 3 (the sleep) adopted in turn and signal it.
    let first = pid(&ev.wait_for("generation 2 adopted", |v| {
        kind(v) == "reparented" && v["helper"] == tag.as_str()
    }));
    let gen3 = ev.wait_for("generation 3 adopted", |v| {
        kind(v) == "reparented" && v["helper"] == tag.as_str() && pid(v) != first
    });
    assert_eq!(gen3["classification"], "expected");
    let sleeper = pid(&gen3);
    ev.wait_for("orphan policy on generation 3", |v| {
        kind(v) == "signal" && v["reason"] == "orphan_policy" && pid_of_target(v) == sleeper
    });
    ev.wait_for("generation 3 reaped", |v| {
        kind(v) == "exit" && v["pid"].as_i64() == Some(i64::from(sleeper))
    });
    // The only helper failed (SIGKILL) and does not restart: foster ends on its own, status 3.
    assert_eq!(wait_exit(&mut f), 3);
    let left = leftovers(&tag);
    assert!(left.is_empty(), "processes survived: {left:?}");
}

/// A helper's grandchild that ends leaves its own child to foster (the nearest subreaper), and
/// the kernel sends foster no SIGCHLD for that: nothing but the grandchild's end says it
/// happened. foster holds a pidfd for each process of its tree that has children, so the
/// adoption is classified and its generation's policy applied at once. After the `status`
/// request that makes foster read its tree (while the grandchild has its child), nothing in the
/// scenario can wake foster but the grandchild's end: the helper execs instead of ending, and
/// nothing else runs. Without the pidfd the events never come.
#[test]
fn an_adoption_that_brings_no_sigchld_is_noticed_at_once() {
    let d = Dir::new("run", "nosigchld");
    let tag = format!("nosigchld{}", std::process::id());
    let (ready, gate) = (d.fifo("ready"), d.fifo("gate"));
    // The helper → a middle shell (generation 2) → a sleep (generation 3); the middle shell
    // ends on `gate`, and the helper then execs (no end, no SIGCHLD to foster).
    let main = format!(
        "/bin/sh -c 'sleep 1000 & echo $$ $! > {}; read x < {}' & wait; exec sleep 1000",
        ready.display(),
        gate.display()
    );
    let cfg = d.file(
        "c.toml",
        &format!(
            "[[helper]]\nname = \"{tag}\"\ncommand = [\"/bin/sh\", \"-c\", \"{}\"]\n\
             [[helper.generation]]\nsignal = \"TERM\"\n\
             [[helper.generation]]\nsignal = \"TERM\"\n",
            main.replace('\\', "\\\\").replace('"', "\\\""),
        ),
    );
    // Uncontained: the pids the helper writes are compared with the events' and this /proc.
    let (mut f, mut ev, sock) = run_with_socket(&d, &cfg);
    let me = ev.started()["supervisor"].clone();
    ev.wait_for("launch", launch_of(&tag));
    let line = common::fifo::line(&ready);
    let mut it = line.split_whitespace().map(|p| p.parse::<i32>().unwrap());
    let (middle, sleep) = (it.next().unwrap(), it.next().unwrap());
    assert_eq!(ppid_of(sleep), middle);
    // foster reads its tree now, the middle shell with its child in it (a status is answered
    // on the supervisor's loop after a read of what changed).
    let status = raw_status(&sock);
    let procs = status["status"]["processes"].as_array().unwrap();
    assert!(procs.iter().any(|p| p["pid"] == sleep), "{status}");
    // The middle shell ends: its sleep goes to foster, and foster gets no SIGCHLD for it.
    std::fs::write(&gate, "go\n").unwrap();
    let limit = Duration::from_secs(10);
    let v = ev.wait_within(limit, "the sleep's adoption", |v| {
        kind(v) == "reparented" && pid(v) == sleep
    });
    assert_eq!(v["classification"], "expected", "{v}");
    assert_eq!(v["to"], me, "{v}");
    assert_eq!(v["from"]["pid"], middle, "{v}");
    assert_eq!(v["helper"], tag.as_str(), "{v}");
    assert_eq!(v["generation"], 3, "{v}");
    let s = ev.wait_within(limit, "the orphan policy's signal", |v| {
        kind(v) == "signal" && v["reason"] == "orphan_policy" && pid_of_target(v) == sleep
    });
    assert!(s["signal"].as_str().unwrap().contains("TERM"), "{s}");
    ev.wait_within(limit, "the sleep reaped", |v| {
        kind(v) == "exit" && v["pid"].as_i64() == Some(i64::from(sleep))
    });
    stop_leaving_nothing(&mut f, &mut ev, &tag);
}

/// A TOML basic string holding `text` (JSON's escapes are TOML's).
fn toml_str(text: &str) -> String {
    serde_json::to_string(text).unwrap()
}

/// Starts `foster run --no-contain --socket S --events-log FIFO CONFIG` in `d` (pids compared
/// with this namespace's), its events opened; returns foster, its events and the socket.
fn run_with_socket(d: &Dir, cfg: &Path) -> (Child, Events, std::path::PathBuf) {
    let sock = d.path("s.sock");
    let (f, ev) = FosterRun::new()
        .arg("--no-contain")
        .socket(&sock)
        .logged(&d.fifo("events"), cfg);
    (f, ev, sock)
}

/// One process of a `status` reply, by pid.
fn status_of(status: &Value, pid: i32) -> Value {
    status["status"]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == pid)
        .unwrap_or_else(|| panic!("pid {pid} not in {status}"))
        .clone()
}

/// A helper with three generations of policy, each its own signal (TERM, HUP, INT), and an
/// orphan policy of the supervisor's own (QUIT), so that the signal an orphan gets names the
/// generation foster gave it.
fn three_generations(tag: &str, command: &[&str]) -> String {
    let command: Vec<String> = command.iter().map(|a| toml_str(a)).collect();
    format!(
        "[supervisor]\norphan_policy = {{ signal = \"QUIT\" }}\n\
         [[helper]]\nname = \"{tag}\"\nstop_grace = \"2s\"\ncommand = [{}]\n\
         [[helper.generation]]\nsignal = \"TERM\"\n\
         [[helper.generation]]\nsignal = \"HUP\"\n\
         [[helper.generation]]\nsignal = \"INT\"\n",
        command.join(", ")
    )
}

/// `orphan`, first seen adopted by foster (from no parent foster knew), classified with the
/// helper `tag` in generation 3 of [`three_generations`], gets that generation's signal (INT)
/// and is reaped; its `reparented` event.
fn adopted_first_seen_in_generation_3(ev: &mut Events, orphan: i32, tag: &str) -> Value {
    let v = ev.wait_for("the orphan's adoption", |v| {
        kind(v) == "reparented" && pid(v) == orphan
    });
    assert_eq!(v["from"], Value::Null, "first seen adopted: {v}");
    assert_eq!(v["generation"], 3, "{v}");
    assert_eq!(v["helper"], tag, "{v}");
    assert_eq!(v["classification"], "expected", "{v}");
    let s = ev.wait_for("the orphan policy's signal", |v| {
        kind(v) == "signal" && v["reason"] == "orphan_policy" && pid_of_target(v) == orphan
    });
    assert_eq!(s["signal"], "SIGINT", "generation 3's: {s}");
    ev.wait_for("the orphan reaped", |v| {
        kind(v) == "exit" && v["pid"].as_i64() == Some(i64::from(orphan))
    });
    v
}

/// The helper's grandchild, orphaned by a middle shell that no read of foster's saw (nothing
/// wakes foster between its start and its end), is generation 3 as it would be had foster seen
/// the middle shell (`an_adoption_that_brings_no_sigchld_is_noticed_at_once`): the helper is
/// alive, so it was not the orphan's parent. It was counted generation 2 ("a direct child of the
/// helper, the common case"), so the demo's orphan showed GEN 2 in some runs and 3 in others,
/// and got the policy of the generation above its own.
#[test]
fn an_orphan_whose_parent_foster_never_saw_has_the_generation_it_has_when_seen() {
    let d = Dir::new("run", "unseenparent");
    let tag = format!("unseen{}", std::process::id());
    let (go, ready, orphan) = (d.fifo("go"), d.fifo("ready"), d.path("orphan"));
    let script = format!(
        "read x < {}; /bin/sh -c 'sleep 1000 & echo $! > {}'; echo ready > {}; exec sleep 1000",
        go.display(),
        orphan.display(),
        ready.display()
    );
    let cfg = d.file(
        "c.toml",
        &three_generations(&tag, &["/bin/sh", "-c", &script]),
    );
    let (mut f, mut ev, sock) = run_with_socket(&d, &cfg);
    let me = ev.started()["supervisor"].clone();
    ev.wait_for("launch", launch_of(&tag));
    // Nothing of foster's runs while the middle shell lives.
    let sleep: i32 = common::child::while_stopped(&f, || {
        std::fs::write(&go, "go\n").unwrap();
        wait_ready(&ready);
        std::fs::read_to_string(&orphan)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    });
    assert_eq!(ppid_of(sleep), f.id() as i32, "adopted by foster");
    // foster reads its tree now: the sleep is first seen as its child.
    let status = raw_status(&sock);
    let p = status_of(&status, sleep);
    assert_eq!(p["generation"], 3, "{p}");
    assert_eq!(p["helper"], tag.as_str(), "{p}");
    let v = adopted_first_seen_in_generation_3(&mut ev, sleep, &tag);
    assert_eq!(v["to"], me, "{v}");
    stop_leaving_nothing(&mut f, &mut ev, &tag);
}

/// An orphan first seen in the middle of its `execve` (held there by a file system of the
/// test's own, `common::fuse`) has no environment yet: its adoption waits until it is out, and
/// is then classified with its helper and generation. It was classified at once from the empty
/// environment: no helper, generation 2, and the supervisor's orphan policy (here QUIT) instead
/// of its generation's (INT); nothing read it again.
#[test]
fn an_orphan_caught_in_the_middle_of_its_exec_is_classified_once_out_of_it() {
    let d = Dir::new("run", "heldorphan");
    let Some(mut held) = common::fuse::held_shell(&d, "held-orphan") else {
        return;
    };
    let tag = format!("heldorphan{}", std::process::id());
    let (go, ready) = (d.fifo("go"), d.fifo("ready"));
    let script = format!(
        "read x < {}; /bin/sh -c '{} -c \"exec sleep 1000\" & exit 0'; echo ready > {}; \
         exec sleep 1000",
        go.display(),
        held.path().display(),
        ready.display()
    );
    let cfg = d.file(
        "c.toml",
        &three_generations(&tag, &["/bin/sh", "-c", &script]),
    );
    let (mut f, mut ev, sock) = run_with_socket(&d, &cfg);
    ev.wait_for("launch", launch_of(&tag));
    // Nothing of foster's runs while the middle shell lives.
    let orphan = common::child::while_stopped(&f, || {
        std::fs::write(&go, "go\n").unwrap();
        let orphan = held.wait_held(LIMIT);
        wait_ready(&ready);
        orphan
    });
    assert_eq!(ppid_of(orphan), f.id() as i32, "adopted by foster");
    let caught = process(orphan).unwrap();
    assert!(caught.in_exec, "{caught:?}");
    // foster reads its tree with the orphan in the middle of its exec; it is in the tree.
    let status = raw_status(&sock);
    status_of(&status, orphan);
    held.release();
    adopted_first_seen_in_generation_3(&mut ev, orphan, &tag);
    stop_leaving_nothing(&mut f, &mut ev, &tag);
}

/// A helper that becomes a supervisor by its exec (as the demo's `nested`, `sh -c 'exec foster
/// run ...'`), read by `status` in the middle of that exec (held there, `common::fuse`; the
/// program is a shell named `foster`, run with `run` among its arguments) shows as a supervisor
/// with its command line once out of it. It stayed `helper` with the command `[foster]` for
/// good: the empty command line read in the middle was kept.
#[test]
fn a_helper_read_in_the_middle_of_its_exec_shows_its_role_and_command_after_it() {
    let d = Dir::new("run", "heldrole");
    let Some(mut held) = common::fuse::held_shell(&d, "foster") else {
        return;
    };
    let tag = format!("heldrole{}", std::process::id());
    let (ready, hold) = (d.fifo("ready"), d.fifo("hold"));
    let script = format!(
        "echo ready > {}; read x < {}",
        ready.display(),
        hold.display()
    );
    let program = held.path().display().to_string();
    let cfg = d.file(
        "c.toml",
        &format!(
            "[[helper]]\nname = \"{tag}\"\nstop_grace = \"2s\"\ncommand = [{}, \"-c\", {}, \"run\"]\n",
            toml_str(&program),
            toml_str(&script)
        ),
    );
    let (mut f, mut ev, sock) = run_with_socket(&d, &cfg);
    let pid_held = held.wait_held(LIMIT);
    let launched = pid(&ev.wait_for("launch", launch_of(&tag)));
    assert_eq!(launched, pid_held);
    let middle = status_of(&raw_status(&sock), launched);
    assert_eq!(middle["comm"], "foster", "{middle}");
    assert_eq!(
        middle["cmdline"],
        serde_json::json!([]),
        "read in the middle: {middle}"
    );
    assert_eq!(middle["role"], "helper", "{middle}");
    held.release();
    wait_ready(&ready);
    let after = status_of(&raw_status(&sock), launched);
    assert_eq!(
        after["cmdline"],
        serde_json::json!([program, "-c", script, "run"]),
        "{after}"
    );
    assert_eq!(after["role"], "supervisor", "{after}");
    stop_leaving_nothing(&mut f, &mut ev, &tag);
}

fn pid_of_target(v: &Value) -> i32 {
    v["target"]["pid"].as_i64().unwrap_or(0) as i32
}

fn signal_text(sig: i32) -> String {
    foster::process::signal::name(sig)
}

/// One signal sent for real to a `foster run` (with a helper, a control socket and its events
/// log), then SIGTERM unless the signal itself ends foster: foster must still be alive to shut
/// down in order (status 0, one `shutdown` naming the right signal, `stopped` last), remove its
/// socket and leave no process of the helper. Returns foster's standard error.
fn signal_case(d: &Dir, sig: i32, contain: bool) -> String {
    use std::io::Read;
    let tag = format!("sig{}-{sig}-{contain}", std::process::id());
    let cfg = d.file(
        &format!("{tag}.toml"),
        &format!("[[helper]]\nname = \"{tag}\"\ncommand = [\"/bin/sleep\", \"1000\"]\n"),
    );
    let sock = d.path(&format!("{tag}.sock"));
    let mut run = FosterRun::new()
        .socket(&sock)
        .arg(if contain { "--contain" } else { "--no-contain" })
        .stdout(Stdio::null());
    libc_signals_at_default(run.command());
    let (mut f, mut ev) = run.logged(&d.fifo(&format!("{tag}.events")), &cfg);
    ev.wait_for("launch", launch_of(&tag));
    assert!(sock.exists(), "{}: no socket", signal_text(sig));
    let shutdown = matches!(
        sig,
        libc::SIGTERM | libc::SIGINT | libc::SIGHUP | libc::SIGQUIT | libc::SIGABRT | libc::SIGXCPU
    );
    send(f.id() as i32, sig);
    if !shutdown {
        send(f.id() as i32, libc::SIGTERM);
    }
    let all = ev.rest().to_vec();
    let code = wait_exit(&mut f);
    let mut err = String::new();
    f.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    let left = leftovers(&tag);
    let name = signal_text(sig);
    assert_eq!(code, 0, "{name} (contain={contain}): exit status; {err}");
    let downs: Vec<&Value> = all.iter().filter(|v| kind(v) == "shutdown").collect();
    assert_eq!(downs.len(), 1, "{name}: {all:?}");
    let by = if shutdown { sig } else { libc::SIGTERM };
    assert_eq!(downs[0]["signal"], signal_text(by), "{name}: {all:?}");
    assert_eq!(all.last().map(kind), Some("stopped"), "{name}: {all:?}");
    assert!(left.is_empty(), "{name}: the helper survived: {left:?}");
    assert!(
        !sock.exists(),
        "{name}: socket file left at {}",
        sock.display()
    );
    err
}

/// Every signal whose default action would end foster (terminate or dump core), sent by
/// `kill`: foster either shuts down in order or goes on (and then shuts down in order on
/// SIGTERM), never dies of it. The ignored ones are logged with their name (but 32 and 33, which
/// foster leaves at "ignore" or to the C library's handler: nothing to log).
#[test]
fn every_signal_that_would_end_foster_is_handled() {
    let d = Dir::new("run", "signals");
    let ignored = [
        libc::SIGUSR2,
        libc::SIGALRM,
        libc::SIGVTALRM,
        libc::SIGPROF,
        libc::SIGIO,
        libc::SIGPWR,
        libc::SIGSTKFLT,
        libc::SIGXFSZ,
        libc::SIGSEGV,
        libc::SIGBUS,
        libc::SIGFPE,
        libc::SIGILL,
        libc::SIGTRAP,
        libc::SIGSYS,
    ];
    let rt: Vec<i32> = (libc::SIGRTMIN()..=libc::SIGRTMAX()).collect();
    for &sig in ignored.iter().chain(&rt) {
        let err = signal_case(&d, sig, false);
        let want = format!("ignored {}", signal_text(sig));
        assert!(err.contains(&want), "wanted {want:?} in: {err}");
    }
    // SIGPIPE: ignored (Rust's runtime); SIGUSR1 reopens the events log (a FIFO here); 32 and
    // 33, the C library's own, ignored until it installs a handler of its own (which ignores
    // what it did not send).
    for sig in [libc::SIGPIPE, libc::SIGUSR1, 32, 33] {
        signal_case(&d, sig, false);
    }
    for sig in [
        libc::SIGTERM,
        libc::SIGINT,
        libc::SIGHUP,
        libc::SIGQUIT,
        libc::SIGABRT,
        libc::SIGXCPU,
    ] {
        signal_case(&d, sig, false);
    }
    if !is_root() {
        common::skip::setup("part: --contain: needs root for a PID and mount namespace");
        return;
    }
    // Under --contain the outer foster forwards them to the contained one; 32 and 33 it
    // ignores itself (it has no thread, so no handler of the C library's).
    for sig in [
        libc::SIGUSR1,
        libc::SIGUSR2,
        libc::SIGALRM,
        libc::SIGRTMIN(),
        libc::SIGQUIT,
        libc::SIGXCPU,
        32,
        33,
    ] {
        signal_case(&d, sig, true);
    }
}

/// What foster blocks and what Rust's runtime makes it ignore (SIGPIPE) stay foster's: a helper
/// execs with the mask (empty here) and the dispositions foster was started with. A signal foster was
/// started with ignored (`nohup`) stays ignored by foster too.
#[test]
fn helpers_get_a_clean_signal_state_and_inherited_ignores_stay() {
    use std::os::unix::process::CommandExt;
    let d = Dir::new("run", "sigstate");
    let tag = format!("sigstate{}", std::process::id());
    let cfg = d.file(
        "c.toml",
        &format!(
            "[[helper]]\nname = \"{tag}-probe\"\noutput = \"inherit\"\n\
             command = [\"/bin/grep\", \"-E\", \"^Sig(Blk|Ign)\", \"/proc/self/status\"]\n\
             [[helper]]\nname = \"{tag}\"\ncommand = [\"/bin/sleep\", \"1000\"]\n"
        ),
    );
    let mut run = FosterRun::new().arg("--no-socket");
    // SAFETY: only signal(2) between fork and exec.
    unsafe {
        run.command().pre_exec(|| {
            libc::signal(libc::SIGHUP, libc::SIG_IGN);
            libc::signal(libc::SIGUSR2, libc::SIG_IGN);
            Ok(())
        });
    }
    let (mut f, mut ev) = run.logged(&d.fifo("events"), &cfg);
    let probe = ev.wait_for("the probe's exit", |v| {
        kind(v) == "exit" && v["helper"] == format!("{tag}-probe")
    });
    assert_eq!(probe["status"]["code"], 0, "{probe}");
    ev.wait_for("launch", launch_of(&tag));
    // Ignored since foster's start: the kernel drops them, foster does not shut down on HUP.
    send(f.id() as i32, libc::SIGHUP);
    send(f.id() as i32, libc::SIGUSR2);
    send(f.id() as i32, libc::SIGTERM);
    let all = ev.rest().to_vec();
    let code = wait_exit(&mut f);
    let out = f.wait_with_output().unwrap();
    let status = String::from_utf8_lossy(&out.stdout).into_owned();
    let left = leftovers(&tag);
    assert_eq!(code, 0);
    let downs: Vec<&Value> = all.iter().filter(|v| kind(v) == "shutdown").collect();
    assert_eq!(downs.len(), 1, "{all:?}");
    assert_eq!(downs[0]["signal"], "SIGTERM", "SIGHUP was ignored at start");
    assert!(left.is_empty(), "{left:?}");
    assert_eq!(
        common::status_sigset(&status, "SigBlk:"),
        0,
        "the helper's mask: {status}"
    );
    // The caller's ignored set: this test's own, less the SIGPIPE its runtime ignores (a
    // Command gives its child SIGPIPE at default), plus what pre_exec ignored.
    let mine = std::fs::read_to_string("/proc/self/status").unwrap();
    let want = (common::status_sigset(&mine, "SigIgn:") & !common::sigbit(libc::SIGPIPE))
        | common::sigbit(libc::SIGHUP)
        | common::sigbit(libc::SIGUSR2);
    assert_eq!(
        common::status_sigset(&status, "SigIgn:"),
        want,
        "the helper's ignored signals: {status}"
    );
}

/// SIGUSR1 reopens the events log: after it was renamed away (logrotate without
/// `copytruncate`), the next events go to a new file at the path.
#[test]
fn sigusr1_reopens_the_events_log() {
    let d = Dir::new("run", "usr1");
    let tag = format!("usr1{}", std::process::id());
    let ready = d.fifo("ready");
    let cfg = d.file(
        "c.toml",
        &format!(
            "[[helper]]\nname = \"{tag}\"\n\
             command = [\"/bin/sh\", \"-c\", \"echo ready > {}; exec sleep 1000\"]\n",
            ready.display()
        ),
    );
    let log = d.path("events.jsonl");
    let mut f = foster().arg("--events-log").arg(&log).spawn(&cfg);
    wait_ready(&ready); // foster opened the log before it launched the helper
    let old = d.path("events.jsonl.1");
    std::fs::rename(&log, &old).unwrap();
    send(f.id() as i32, libc::SIGUSR1);
    send(f.id() as i32, libc::SIGTERM);
    let code = wait_exit(&mut f);
    let left = leftovers(&tag);
    assert_eq!(code, 0, "SIGUSR1 must not end foster");
    assert!(left.is_empty(), "{left:?}");
    let lines = |p: &Path| -> Vec<Value> {
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let (before, after) = (lines(&old), lines(&log));
    assert_eq!(before.first().map(kind), Some("start"), "{before:?}");
    assert!(
        !before
            .iter()
            .any(|v| kind(v) == "shutdown" || kind(v) == "stopped"),
        "written to the renamed file after SIGUSR1: {before:?}"
    );
    assert!(
        after.iter().any(|v| kind(v) == "shutdown"),
        "nothing in the new file: {after:?}"
    );
    assert_eq!(after.last().map(kind), Some("stopped"), "{after:?}");
}

/// A nested foster whose generation signal would otherwise be ignored (USR2) still ends in
/// order when its parent dies: the signal is its parent-death signal and its parent changed.
#[test]
fn a_nested_foster_ends_in_order_on_any_parent_death_signal() {
    let d = Dir::new("run", "pdeath");
    let tag = format!("pdeath{}", std::process::id());
    let inner_fifo = d.fifo("inner-events");
    let inner = d.file(
        "inner.toml",
        &format!("[[helper]]\nname = \"{tag}-leaf\"\ncommand = [\"/bin/sleep\", \"1000\"]\n"),
    );
    let exe = env!("CARGO_BIN_EXE_foster");
    let top = d.file(
        "top.toml",
        &format!(
            "[[helper]]\nname = \"{tag}\"\n\
             command = [\"{exe}\", \"run\", \"--no-socket\", \"--no-contain\", \"--events-log\", \"{}\", \"{}\"]\n\
             [[helper.generation]]\nsignal = \"USR2\"\n",
            inner_fifo.display(),
            inner.display()
        ),
    );
    // Uncontained, both: contained, the kernel would end the nested foster with its namespace.
    let (mut f, mut top_ev) = run_logged_with(&d, "top-events", &top, &["--no-contain"]);
    let mut in_ev = Events::open(&inner_fifo);
    let nested = pid(&top_ev.wait_for("launch nested", launch_of(&tag)));
    in_ev.wait_for("launch leaf", launch_of(&format!("{tag}-leaf")));
    f.kill().unwrap(); // SIGKILL: the nested foster gets SIGUSR2 from the kernel
    let _ = f.wait();
    let all = in_ev.rest().to_vec();
    let ended = wait_pid_gone(nested, LIMIT);
    let left = leftovers(&tag);
    assert!(ended, "the nested foster outlived its parent");
    let downs: Vec<&Value> = all.iter().filter(|v| kind(v) == "shutdown").collect();
    assert_eq!(downs.len(), 1, "{all:?}");
    assert_eq!(downs[0]["signal"], "SIGUSR2");
    assert_eq!(all.last().map(kind), Some("stopped"), "{all:?}");
    assert!(left.is_empty(), "{left:?}");
}

/// A crash-looping helper with a tiny `--events-log-max-size`: the log is rotated to `FILE.1` …
/// `FILE.N` as logrotate names them, never more than N kept, each file whole lines within the
/// size, and nothing lost between a file and the next.
#[test]
fn the_events_log_is_rotated_by_size() {
    let d = Dir::new("run", "rotate");
    let cfg = d.file(
        "c.toml",
        "[[helper]]\nname = \"crash\"\ncommand = [\"/bin/sh\", \"-c\", \"exit 1\"]\n\
         restart = \"always\"\nbackoff = { initial = \"1ms\", max = \"1ms\", limit = 60 }\n",
    );
    let log = d.path("events.jsonl");
    let mut f = foster()
        .arg("--events-log")
        .arg(&log)
        .args(["--events-log-max-size", "2KiB", "--events-log-keep", "3"])
        .spawn(&cfg);
    // The helper is given up on after 60 restarts in a row: foster ends by itself.
    assert_eq!(wait_exit(&mut f), 3);
    let numbered = |n: u32| d.path(&format!("events.jsonl.{n}"));
    assert!(!numbered(4).exists(), "more than 3 rotated files kept");
    let mut all = Vec::new();
    for p in [numbered(3), numbered(2), numbered(1), log.clone()] {
        let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        assert!(!text.is_empty(), "{} is empty", p.display());
        assert!(text.len() <= 2048, "{}: {} bytes", p.display(), text.len());
        assert!(text.ends_with('\n'), "{}: a cut line", p.display());
        for line in text.lines() {
            all.push(serde_json::from_str::<Value>(line).expect("a whole JSON line"));
        }
    }
    assert_ne!(
        all.first().map(kind),
        Some("start"),
        "the oldest files were dropped"
    );
    assert_eq!(all.last().map(kind), Some("stopped"));
    // Across the four files the attempts follow each other: no event lost at a rotation.
    let attempts: Vec<u64> = all
        .iter()
        .filter(|v| kind(v) == "launch")
        .map(|v| v["attempt"].as_u64().unwrap())
        .collect();
    assert!(attempts.len() > 3, "{attempts:?}");
    assert!(
        attempts.windows(2).all(|w| w[1] == w[0] + 1),
        "attempts: {attempts:?}"
    );
    assert_eq!(attempts.last(), Some(&61));
}

/// A helper with `user` alone runs with the user's primary group and group list from the user
/// database (as `runuser` or `setpriv --init-groups` give them), not with foster's groups.
#[test]
fn a_helper_with_user_alone_gets_the_users_groups() {
    if common::skip::unless_root("not root, so no other user to run a helper as") {
        return;
    }
    let d = Dir::new("run", "user");
    let tag = format!("user{}", std::process::id());
    // Each probe prints one line: its tag, then its Uid, Gid and Groups lines.
    let probe = |name: &str, user: &str| {
        format!(
            "[[helper]]\nname = \"{tag}-{name}\"\nuser = \"{user}\"\noutput = \"inherit\"\n\
             command = [\"/usr/bin/awk\", \"-v\", \"t={name}\", \
             \"/^(Uid|Gid|Groups):/ {{ printf \\\"%s\\\\n\\\", $0 }} END {{ print t }}\", \
             \"/proc/self/status\"]\n"
        )
    };
    let mut probes = vec![("nobody".to_string(), "nobody".to_string())];
    match common::user_with_supplementary_groups() {
        Some((name, _)) => probes.push(("member".into(), name)),
        None => common::skip::host("part: no user with a supplementary group in /etc/group"),
    }
    let mut cfg: String = probes.iter().map(|(n, u)| probe(n, u)).collect();
    cfg.push_str(&format!(
        "[[helper]]\nname = \"{tag}\"\ncommand = [\"/bin/sleep\", \"1000\"]\n"
    ));
    let cfg = d.file("c.toml", &cfg);
    let (mut f, mut ev) = run_logged(&d, "events", &cfg);
    for (name, _) in &probes {
        let exit = ev.wait_for("a probe's exit", |v| {
            kind(v) == "exit" && v["helper"] == format!("{tag}-{name}")
        });
        assert_eq!(exit["status"]["code"], 0, "{exit}");
    }
    ev.wait_for("launch", launch_of(&tag));
    stop_leaving_nothing(&mut f, &mut ev, &tag);
    let out = f.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    for (name, user) in &probes {
        let (gid, groups) = common::groups_of(user);
        let uid = nix::unistd::User::from_name(user)
            .unwrap()
            .unwrap()
            .uid
            .as_raw();
        // The probe's three lines are the ones before its tag line (one write, at awk's end).
        let lines: Vec<&str> = text.lines().collect();
        let at = lines
            .iter()
            .position(|l| *l == name.as_str())
            .unwrap_or_else(|| panic!("no output of {name}: {text}"));
        let status = lines[at - 3..at].join("\n");
        assert_eq!(common::status_ids(&status, "Uid:"), vec![uid; 4], "{user}");
        assert_eq!(common::status_ids(&status, "Gid:"), vec![gid; 4], "{user}");
        assert_eq!(common::status_ids(&status, "Groups:"), groups, "{user}");
    }
}

// ---- pids across PID namespaces ----

/// Ends a foster with SIGTERM (its orderly shutdown, which ends its tree) when a test fails
/// half-way; a test that passes has ended it already.
struct StopOnPanic(i32);
impl Drop for StopOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // SAFETY: plain kill of a child of this test.
            unsafe { libc::kill(self.0, libc::SIGTERM) };
        }
    }
}

/// The `NSpid` line of a process seen from here, outermost first.
fn nspid(pid: i32) -> Vec<i32> {
    foster::process::tree::nspid(pid).unwrap_or_default()
}

fn ctl(sock: &Path, args: &[&str]) -> std::process::Output {
    common::supervised::ctl_command(sock)
        .args(args)
        .output()
        .unwrap()
}

/// A contained supervisor (the default, as root) knows the pids of its own namespace; `foster
/// ctl` run from here shows this namespace's: each process's pid here has an `NSpid` whose last
/// entry is the pid the supervisor knows, with the same start time; the events say the same
/// pids; and a pid named from here reaches that process, while one outside the tree is refused.
#[test]
fn ctl_from_the_host_shows_and_takes_host_pids_of_a_contained_tree() {
    if common::skip::unless_root("a contained tree needs root here (a PID and mount namespace)") {
        return;
    }
    let d = Dir::new("run", "nspid");
    let tag = format!("nspid{}", std::process::id());
    let ready = d.fifo("ready");
    let cfg = d.file("c.toml", &two_sleeps(&tag, &ready));
    let sock = d.path("s.sock");
    let (mut f, mut ev) = FosterRun::new()
        .socket(&sock) // contained: the default, as root
        .stdout(Stdio::null())
        .logged(&d.fifo("events"), &cfg);
    let _stop = StopOnPanic(f.id() as i32);
    let launched = ev.wait_for("launch", launch_of(&tag));
    wait_ready(&ready);
    let inner = raw_status(&sock);
    let out = ctl(&sock, &["--json", "status"]);
    assert!(out.status.success(), "{out:?}");
    let outer: Value = serde_json::from_slice(&out.stdout).unwrap();
    let (inner, outer) = (&inner["status"], &outer["status"]);
    let (ip, op) = (
        inner["processes"].as_array().unwrap(),
        outer["processes"].as_array().unwrap(),
    );
    assert_eq!(ip.len(), 4, "foster, the shell, two sleeps: {inner}");
    assert_eq!(op.len(), ip.len(), "{outer}");
    for (i, o) in ip.iter().zip(op) {
        let host = o["pid"].as_i64().unwrap() as i32;
        assert_eq!(o["start_time"], i["start_time"], "{o} / {i}");
        let id = foster::process::identity::Identity::of(host).expect("a pid of this namespace");
        assert_eq!(Value::from(id.start_time), o["start_time"], "{o}");
        assert_eq!(
            nspid(host).last().map(|&p| i64::from(p)),
            i["pid"].as_i64(),
            "pid {host} here is {} there",
            i["pid"]
        );
        assert_eq!(o["role"], i["role"]);
    }
    // The supervisor is the init of the namespace, a child of the outer foster.
    let sup = outer["supervisor"]["identity"]["pid"].as_i64().unwrap() as i32;
    assert_eq!(inner["supervisor"]["identity"]["pid"], 1);
    assert_eq!(ppid_of(sup), f.id() as i32);
    let helper = outer["helpers"][0]["identity"]["pid"].as_i64().unwrap() as i32;
    assert_eq!(
        nspid(helper).last().map(|&p| i64::from(p)),
        inner["helpers"][0]["identity"]["pid"].as_i64(),
        "the helper's pid here is the supervisor's there"
    );
    // The events log, written by the supervisor for its user, has the pid here.
    assert_eq!(
        launched["identity"]["pid"].as_i64(),
        Some(i64::from(helper)),
        "{launched}"
    );
    // The text says the same pids, and so do the events.
    let text = String::from_utf8(ctl(&sock, &["status"]).stdout).unwrap();
    assert!(text.contains(&format!("supervisor {sup} ")), "{text}");
    assert!(text.contains(&format!("pid {helper:>7}")), "{text}");
    let events = String::from_utf8(ctl(&sock, &["events", "--no-follow"]).stdout).unwrap();
    assert!(
        events.contains(&format!("{tag}[{helper}] launched\n")),
        "{events}"
    );
    // A pid named from here is this namespace's.
    let sleeps: Vec<i32> = op
        .iter()
        .filter(|p| p["ppid"] == helper)
        .map(|p| p["pid"].as_i64().unwrap() as i32)
        .collect();
    assert_eq!(sleeps.len(), 2, "{outer}");
    let out = ctl(&sock, &["signal", &sleeps[0].to_string(), "KILL"]);
    assert!(out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains(&format!("({}:", sleeps[0])), "{said}");
    assert!(
        wait_pid_gone(sleeps[0], LIMIT),
        "the sleep named from here got the signal"
    );
    assert!(
        foster::process::identity::Identity::of(sleeps[1]).is_ok(),
        "and not the other one"
    );
    // A process of this namespace outside the tree is refused, and untouched.
    let out = ctl(&sock, &["signal", &std::process::id().to_string(), "TERM"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("not inside the supervised tree"));
    stop_leaving_nothing(&mut f, &mut ev, &tag);
}

// ---- containment of an unprivileged foster ----

const NOBODY: u32 = 65534;

/// A command run as uid and gid 65534 with no supplementary group, its home, runtime and
/// temporary directories in `home`.
fn as_nobody(home: &Path, program: &str, args: &[&str]) -> Command {
    let mut c = Command::new("setpriv");
    c.arg(format!("--reuid={NOBODY}"))
        .arg(format!("--regid={NOBODY}"))
        .arg("--clear-groups")
        .arg("env")
        .arg(format!("HOME={}", home.display()))
        .arg(format!("XDG_RUNTIME_DIR={}", home.display()))
        .arg(format!("TMPDIR={}", home.display()))
        .arg(program)
        .args(args)
        .stdin(Stdio::null());
    c
}

/// Makes `p` belong to uid and gid 65534.
fn give_to_nobody(p: &Path) -> &Path {
    let id = Some(NOBODY);
    nix::unistd::chown(
        p,
        id.map(nix::unistd::Uid::from_raw),
        id.map(nix::unistd::Gid::from_raw),
    )
    .unwrap();
    p
}

fn setpriv_missing() -> bool {
    Command::new("setpriv").arg("--version").output().is_err()
}

/// Not root, foster contains its tree through a user namespace where the kernel allows one
/// (as `unshare --user --pid --fork --mount-proc` does for that user): the helper is in a new
/// PID namespace and runs as the user, `foster ctl` from here shows this namespace's pids, and
/// SIGKILL of foster ends the unarmed grandchildren too. Where the kernel does not allow it,
/// foster says so in one warning line and runs uncontained.
#[test]
fn an_unprivileged_foster_contains_through_a_user_namespace_where_the_kernel_allows_it() {
    if !is_root() || setpriv_missing() {
        common::skip::setup(format!(
            "runs foster as uid {NOBODY} through setpriv, which needs root"
        ));
        return;
    }
    let d = Dir::new("run", "userns");
    let home = give_to_nobody(&d.0);
    let tag = format!("userns{}", std::process::id());
    let ready = d.fifo("ready");
    give_to_nobody(&ready);
    let fifo = d.fifo("events");
    give_to_nobody(&fifo);
    let sock = d.path("s.sock");
    let cfg = d.file("c.toml", &two_sleeps(&tag, &ready));
    let foster_exe = env!("CARGO_BIN_EXE_foster");
    let allowed = as_nobody(
        home,
        "unshare",
        &["--user", "--pid", "--fork", "--mount-proc", "true"],
    )
    .stderr(Stdio::null())
    .status()
    .unwrap()
    .success();
    let sock_arg = sock.to_str().unwrap();
    let mut f = as_nobody(
        home,
        foster_exe,
        &[
            "run",
            "--socket",
            sock_arg,
            "--events-log",
            fifo.to_str().unwrap(),
            cfg.to_str().unwrap(),
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let _stop = StopOnPanic(f.id() as i32);
    let mut ev = Events::open(&fifo);
    let launched = ev.wait_for("launch", launch_of(&tag));
    wait_ready(&ready);
    let procs = processes_of_helper(&tag);
    assert_eq!(procs.len(), 3, "the helper and its two children");
    let sh = *procs
        .iter()
        .find(|&&p| !procs.contains(&ppid_of(p)))
        .expect("the helper among the processes");
    let ns = nspid(sh);
    let uid = foster::process::tree::Scanner::new(foster::process::tree::ScanOptions::default())
        .unwrap()
        .scan_pids(&[sh])
        .by_pid(sh)
        .map(|n| n.uid);
    assert_eq!(uid, Some(NOBODY), "the helper runs as the user");
    if !allowed {
        eprintln!("user namespaces are not allowed here for uid {NOBODY}: checking the warning");
        stop_leaving_nothing(&mut f, &mut ev, &tag);
        let err = String::from_utf8(f.wait_with_output().unwrap().stderr).unwrap();
        let warned: Vec<&str> = err
            .lines()
            .filter(|l| l.contains("not contained:"))
            .collect();
        assert_eq!(warned.len(), 1, "one warning line: {err}");
        assert_eq!(ns.len(), 1, "uncontained: {ns:?}");
        return;
    }
    assert_eq!(ns.len(), 2, "a new PID namespace: NSpid {ns:?}");
    // The events log names the helper by its pid here (read through a user namespace too).
    assert_eq!(ns.first().copied(), Some(pid(&launched)), "NSpid {ns:?}");
    // The user's foster ctl, from here: this namespace's pids.
    let out = as_nobody(
        home,
        foster_exe,
        &["ctl", "--socket", sock_arg, "--json", "status"],
    )
    .output()
    .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let helper = &v["status"]["helpers"][0]["identity"];
    assert_eq!(helper["pid"], sh, "{v}");
    for p in v["status"]["processes"].as_array().unwrap() {
        let here = p["pid"].as_i64().unwrap() as i32;
        let id = foster::process::identity::Identity::of(here).expect("a pid of this namespace");
        assert_eq!(Value::from(id.start_time), p["start_time"], "{p}");
    }
    f.kill().unwrap(); // SIGKILL
    let out = f.wait_with_output().unwrap();
    let survived: Vec<i32> = procs
        .iter()
        .copied()
        .filter(|&p| !wait_pid_gone(p, LIMIT))
        .collect();
    kill_all(&survived);
    assert!(
        survived.is_empty(),
        "unarmed descendants survived: {survived:?}"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("not contained"), "{err}");
}

/// Where no PID namespace can be had (here: a `/proc` partly covered, as in many containers,
/// which a user namespace may not mount afresh), foster says why in one warning line and runs
/// uncontained; `--no-contain` runs the same without the warning; `--contain` fails, starting
/// nothing.
#[test]
fn without_a_pid_namespace_foster_says_why_in_one_line_and_runs_uncontained() {
    if !is_root() || setpriv_missing() {
        common::skip::setup("covers /proc in a mount namespace of its own, which needs root");
        return;
    }
    let d = Dir::new("run", "nons");
    let home = give_to_nobody(&d.0).to_path_buf();
    let tag = format!("nons{}", std::process::id());
    let ready = d.fifo("ready");
    give_to_nobody(&ready);
    let cfg = d.file(
        "c.toml",
        &format!(
            "[[helper]]\nname = \"{tag}\"\n\
             command = [\"/bin/sh\", \"-c\", \"echo ready > {}; exec sleep 1000\"]\n",
            ready.display()
        ),
    );
    for mode in ["", "--no-contain", "--contain"] {
        let fifo = d.fifo(&format!("events{mode}"));
        give_to_nobody(&fifo);
        let run = as_nobody(
            &home,
            env!("CARGO_BIN_EXE_foster"),
            &[
                "run",
                "--no-socket",
                "--events-log",
                fifo.to_str().unwrap(),
                cfg.to_str().unwrap(),
            ],
        );
        let mut words: Vec<String> = std::iter::once(run.get_program())
            .chain(run.get_args())
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        if !mode.is_empty() {
            words.insert(
                words.iter().position(|w| w == "run").unwrap() + 1,
                mode.into(),
            );
        }
        // A mount namespace of its own where /proc/sys is covered: /proc is not fully visible.
        let script = "mount -t tmpfs none /proc/sys && exec \"$@\"";
        let mut f = Command::new("unshare")
            .args([
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                script,
                "sh",
            ])
            .args(&words)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let _stop = StopOnPanic(f.id() as i32);
        if mode == "--contain" {
            let out = f.wait_with_output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{err}");
            assert!(
                err.contains("--contain: cannot create a PID namespace"),
                "{err}"
            );
            assert!(processes_of_helper(&tag).is_empty(), "nothing started");
            continue;
        }
        let mut ev = Events::open(&fifo);
        let launched = ev.wait_for("launch", launch_of(&tag));
        let start = ev.started();
        assert_eq!(start["contained"], false, "{start}");
        wait_ready(&ready);
        assert_eq!(nspid(pid(&launched)), vec![pid(&launched)], "uncontained");
        stop_leaving_nothing(&mut f, &mut ev, &tag);
        let err = String::from_utf8(f.wait_with_output().unwrap().stderr).unwrap();
        let warned: Vec<&str> = err
            .lines()
            .filter(|l| l.contains("not contained"))
            .collect();
        if mode.is_empty() {
            assert_eq!(warned.len(), 1, "one warning line: {err}");
            assert!(
                warned[0].starts_with("foster: warning: not contained"),
                "{err}"
            );
            assert!(
                warned[0].contains("cannot create a PID namespace ("),
                "it says why: {err}"
            );
        } else {
            assert!(warned.is_empty(), "--no-contain: no warning: {err}");
        }
    }
}

/// Root without `CAP_SYS_ADMIN` (a container's root, often) cannot create a PID namespace
/// directly, but can through a user namespace mapping uid 0 to itself: the tree is contained.
/// Not when a helper sets `user` or `group`: a user namespace has no other uid to give, so
/// foster says so and runs uncontained, the helper as the user it asked for.
#[test]
fn root_without_cap_sys_admin_contains_through_a_user_namespace_unless_a_helper_sets_a_user() {
    if !is_root() || setpriv_missing() {
        common::skip::setup("drops CAP_SYS_ADMIN from root through setpriv");
        return;
    }
    let d = Dir::new("run", "capless");
    let allowed = Command::new("setpriv")
        .args(["--bounding-set=-sys_admin", "--inh-caps=-sys_admin"])
        .args([
            "unshare",
            "--user",
            "--map-root-user",
            "--pid",
            "--fork",
            "--mount-proc",
            "true",
        ])
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .success();
    for user in [None, Some("nobody")] {
        let cfg = d.file(
            "c.toml",
            &format!(
                "[[helper]]\nname = \"capless\"\ncommand = [\"/bin/true\"]\n{}",
                user.map(|u| format!("user = \"{u}\"\n"))
                    .unwrap_or_default()
            ),
        );
        let log = d.path(&format!("events-{}", user.unwrap_or("root")));
        let out = Command::new("setpriv")
            .args(["--bounding-set=-sys_admin", "--inh-caps=-sys_admin"])
            .arg(env!("CARGO_BIN_EXE_foster"))
            .args(["run", "--no-socket", "--events-log"])
            .arg(&log)
            .arg(&cfg)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{user:?}: {err}");
        let events: Vec<Value> = std::fs::read_to_string(&log)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let start = events.iter().find(|v| kind(v) == "start").expect("a start");
        let warned: Vec<&str> = err
            .lines()
            .filter(|l| l.contains("not contained:"))
            .collect();
        match user {
            None if !allowed => {
                eprintln!("user namespaces are not allowed here: the warning only");
                assert_eq!(warned.len(), 1, "{err}");
            }
            None => {
                assert_eq!(start["contained"], true, "{start}");
                assert!(warned.is_empty(), "{err}");
            }
            Some(_) => {
                assert_eq!(start["contained"], false, "{start}");
                assert_eq!(warned.len(), 1, "{err}");
                assert!(
                    warned[0].contains("helper \"capless\" sets user or group"),
                    "{err}"
                );
            }
        }
    }
}

/// An orphan that is stopped (SIGSTOP) when its parent dies ends by its generation's orphan
/// policy (`TERM`, reaction `exit`) well within a grace of 600 s: SIGCONT follows the signal,
/// so the stopped process acts on it instead of sitting out its grace until SIGKILL.
#[test]
fn a_stopped_orphan_ends_by_its_policy_without_waiting_out_its_grace() {
    let d = Dir::new("run", "stopped-orphan");
    let fifo = d.fifo("child");
    let cfg = d.file(
        "run.toml",
        &format!(
            r#"
[[helper]]
name = "parent"
command = ["sh", "-c", "sleep 600 & echo $! > {}; exec sleep 600"]

[[helper.generation]]
signal = "TERM"

[[helper.generation]]
signal = "TERM"
reaction = "exit"
grace = "600s"

[[helper]]
name = "stays"
command = ["sleep", "600"]
"#,
            fifo.display()
        ),
    );
    let (mut f, mut ev) = run_logged_with(&d, "stopped-orphan", &cfg, &["--no-contain"]);
    let child = common::fifo::number(&fifo);
    let parent = pid(&ev.wait_for("launch of parent", launch_of("parent")));
    // The helper's child, whose pid it wrote; it is alive (its parent waits).
    send(child, libc::SIGSTOP);
    common::wait_state(child, 'T');
    send(parent, libc::SIGKILL);
    let signalled = ev.wait_for("the orphan policy's signal", |e| {
        kind(e) == "signal" && e["reason"] == "orphan_policy"
    });
    assert_eq!(signalled["target"]["pid"], child, "{signalled:#}");
    assert!(
        wait_pid_gone(child, LIMIT),
        "the stopped orphan {child} is still there: it sits out its 600 s grace"
    );
    send(f.id() as i32, libc::SIGTERM);
    assert_eq!(wait_exit(&mut f), 0);
}

/// `run-HASH.lock`: there while a supervisor runs, removed by its orderly exit; the one a
/// SIGKILLed supervisor leaves is taken again by the next start (not a refusal), which
/// removes it when it ends.
#[test]
fn the_instance_lock_file_is_removed_on_exit_and_a_stale_one_reused() {
    let d = Dir::new("run", "lockfile");
    let runtime = d.path("runtime");
    std::fs::create_dir(&runtime).unwrap();
    std::fs::set_permissions(
        &runtime,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let cfg = d.file(
        "run.toml",
        "[[helper]]\nname = \"s\"\ncommand = [\"sleep\", \"600\"]\n",
    );
    let locks = || -> Vec<String> {
        std::fs::read_dir(runtime.join("foster"))
            .map(|r| {
                r.filter_map(|e| e.ok()?.file_name().into_string().ok())
                    .filter(|n| n.starts_with("run-") && n.ends_with(".lock"))
                    .collect()
            })
            .unwrap_or_default()
    };
    let start = |tag: &str| {
        let mut run = FosterRun::new()
            .arg("--no-contain")
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        run.command()
            .env("XDG_RUNTIME_DIR", &runtime)
            .env_remove("FOSTER_SOCKET");
        let (f, mut ev) = run.logged(&d.fifo(&format!("{tag}.events")), &cfg);
        ev.wait_for("launch of s", launch_of("s"));
        (f, ev)
    };
    let (mut f, mut ev) = start("first");
    assert_eq!(locks().len(), 1, "{:?}", locks());
    send(f.id() as i32, libc::SIGKILL);
    wait_exit(&mut f);
    let sleeper = pid(&ev.wait_for("launch of s", launch_of("s")));
    assert!(wait_pid_gone(sleeper, LIMIT), "its helper outlived it");
    let stale = locks();
    assert_eq!(
        stale.len(),
        1,
        "a SIGKILLed supervisor leaves its lock file"
    );

    let (mut f, _ev) = start("second");
    assert_eq!(locks(), stale, "the stale file is taken again");
    send(f.id() as i32, libc::SIGTERM);
    assert_eq!(wait_exit(&mut f), 0);
    assert!(
        locks().is_empty(),
        "left after an orderly exit: {:?}",
        locks()
    );
}
