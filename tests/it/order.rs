//! Helpers' states, start order (`depends_on`), runtime control (`ctl start`, `ctl stop`) and
//! the shutdown's order, end to end on real processes. The observable is the supervisor's own
//! record: its event stream (followed through the control socket from before the first launch
//! matters) and `ctl status --json`; FIFOs hold helpers where a test needs them held. Deadlines
//! are only safety nets.

use serde_json::Value;

use crate::common;
use common::Dir;
use common::LIMIT;

use common::supervised::Run;

/// Every state of the set appears in `ctl status` (JSON and text) and as `state` events: a
/// one-shot that exits 0 is `completed`, one that exits 1 `failed` with its status, a sleeper
/// `running`.
#[test]
fn states_are_shown_in_status_and_events() {
    let d = Dir::new("order", "states");
    let mut run = Run::start_uncontained(
        &d,
        r#"
[[helper]]
name = "ok"
command = ["true"]

[[helper]]
name = "bad"
command = ["sh", "-c", "exit 1"]

[[helper]]
name = "sleeper"
command = ["sleep", "600"]
"#,
    );
    run.state("ok", "completed");
    let failed = run.state("bad", "failed");
    assert_eq!(
        run.seen[failed]["detail"], "(exit code 1)",
        "{:#?}",
        run.seen
    );
    let launched = run.launch("sleeper", 1);
    assert!(run.state("sleeper", "running") > launched);
    let h = run.helpers();
    assert_eq!(h["ok"]["state"], "completed");
    assert_eq!(h["bad"]["state"], "failed");
    assert_eq!(h["bad"]["detail"], "(exit code 1)");
    assert_eq!(h["sleeper"]["state"], "running");
    let pid = h["sleeper"]["identity"]["pid"].as_i64().unwrap();
    let out = run.ctl(&["status"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .any(|l| l.contains("bad") && l.contains("failed") && l.contains("(exit code 1)")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.contains("ok") && l.contains("completed")),
        "{text}"
    );
    let st = run.stop();
    assert!(st.success(), "{st}");
    run.drain();
    run.state("sleeper", "stopping");
    run.state("sleeper", "stopped");
    assert!(
        common::process(pid as i32).is_none(),
        "sleeper {pid} outlived its supervisor"
    );
}

/// Every event of `kind` about `helper`, as indices in the order seen.
fn all_of(run: &Run, kind: &str, helper: &str) -> Vec<usize> {
    run.seen
        .iter()
        .enumerate()
        .filter(|(_, e)| e["event"] == kind && e["helper"] == helper)
        .map(|(i, _)| i)
        .collect()
}

/// A diamond: `b` and `c` wait for the one-shot `a` to complete, `d` for both to be started.
/// Nothing but `a` is launched while it runs (the others are `waiting`, saying for what); once
/// it has completed (the test lets it, through a FIFO), `b` and `c` are launched, then `d`. The
/// file lists them in the reverse order, so launching in file order would fail.
#[test]
fn a_diamond_of_dependencies_starts_in_order() {
    let d = Dir::new("order", "diamond");
    let go = d.fifo("go");
    let mut run = Run::start_uncontained(
        &d,
        &format!(
            r#"
[[helper]]
name = "d"
command = ["sleep", "600"]
depends_on = {{ b = "started", c = "ready" }}

[[helper]]
name = "c"
command = ["sleep", "600"]
depends_on = {{ a = "completed" }}

[[helper]]
name = "b"
command = ["sleep", "600"]
depends_on = {{ a = "completed" }}

[[helper]]
name = "a"
command = ["sh", "-c", "read line < {}"]
"#,
            go.display()
        ),
    );
    run.launch("a", 1);
    for h in ["b", "c"] {
        let w = run.state(h, "waiting");
        assert_eq!(run.seen[w]["detail"], "for a to be completed");
    }
    let w = run.state("d", "waiting");
    assert_eq!(
        run.seen[w]["detail"],
        "for b to be started; for c to be ready"
    );
    let h = run.helpers();
    for name in ["b", "c", "d"] {
        assert_eq!(h[name]["state"], "waiting", "{name}: {h:?}");
        assert!(h[name]["identity"].is_null(), "{name} runs: {h:?}");
    }
    assert_eq!(h["d"]["depends_on"][0]["helper"], "b");
    assert_eq!(h["d"]["depends_on"][0]["met"], false);
    let text = String::from_utf8_lossy(&run.ctl(&["status"]).stdout).to_string();
    assert!(
        text.lines()
            .any(|l| l.contains(" d ") && l.contains("waiting for b to be started")),
        "{text}"
    );
    // Let a complete.
    std::fs::write(&go, "go\n").unwrap();
    let done = run.state("a", "completed");
    let (lb, lc) = (run.launch("b", 1), run.launch("c", 1));
    let ld = run.launch("d", 1);
    assert!(done < lb && done < lc, "{:#?}", run.seen);
    let started = |run: &mut Run, h: &str| run.state(h, "running");
    let (sb, sc) = (started(&mut run, "b"), started(&mut run, "c"));
    assert!(
        sb < ld && sc < ld,
        "d launched before b and c run: {:#?}",
        run.seen
    );
    for h in ["b", "c", "d"] {
        assert_eq!(all_of(&run, "launch", h).len(), 1, "{h}: {:#?}", run.seen);
    }
    let st = run.stop();
    assert!(st.success(), "{st}");
}

/// A one-shot that fails holds back what waits for it to complete, with the reason shown in
/// status and events; the dependent is never launched.
#[test]
fn a_failed_dependency_holds_its_dependents_back() {
    let d = Dir::new("order", "held");
    let mut run = Run::start_uncontained(
        &d,
        r#"
[[helper]]
name = "migrate"
command = ["sh", "-c", "exit 1"]

[[helper]]
name = "web"
command = ["sleep", "600"]
depends_on = { migrate = "completed" }

[[helper]]
name = "keep"
command = ["sleep", "600"]
"#,
    );
    run.state("migrate", "failed");
    run.until("web held back", |e| {
        e["event"] == "state"
            && e["helper"] == "web"
            && e["state"] == "waiting"
            && e["detail"] == "for migrate: failed (exit code 1)"
    });
    let h = run.helpers();
    assert_eq!(h["web"]["state"], "waiting");
    assert_eq!(h["web"]["detail"], "for migrate: failed (exit code 1)");
    assert_eq!(h["web"]["depends_on"][0]["held"], true);
    assert!(h["web"]["identity"].is_null());
    let text = String::from_utf8_lossy(&run.ctl(&["status"]).stdout).to_string();
    assert!(
        text.contains("waiting for migrate: failed (exit code 1)"),
        "{text}"
    );
    let st = run.stop();
    assert!(st.success(), "{st}");
    run.drain();
    assert!(all_of(&run, "launch", "web").is_empty(), "{:#?}", run.seen);
}

/// `run --check` refuses a cycle, naming it in order, and a dependency on no helper, both at
/// once, with the other mistakes of the file.
#[test]
fn check_names_a_cycle_and_an_unknown_dependency() {
    let d = Dir::new("order", "check");
    let cfg = d.file(
        "c.toml",
        r#"
[[helper]]
name = "a"
command = ["sleep", "1"]
depends_on = ["b"]

[[helper]]
name = "b"
command = ["sleep", "1"]
depends_on = { c = "ready" }

[[helper]]
name = "c"
command = ["sleep", "1"]
depends_on = ["a", "dbx"]
stop_grace = "0s"
"#,
    );
    let (code, err) = common::check::check(&cfg);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(
            "helper \"a\": key `helper[1].depends_on[1]`: dependency cycle: a -> b -> c -> a"
        ),
        "{err}"
    );
    assert!(
        err.contains("helper \"c\": key `helper[3].depends_on[2]`: no helper is named \"dbx\""),
        "{err}"
    );
    assert!(err.contains("key `helper[3].stop_grace`"), "{err}");
    assert_eq!(err.lines().count(), 3, "{err}");
}

/// The shutdown stops a chain in reverse order: `top` (which needs `mid`, which needs
/// `base`) first, and `mid` only once `top` has ended, `base` last; `free`, which needs
/// nothing and nobody needs, at once.
#[test]
fn the_shutdown_stops_dependents_first() {
    let d = Dir::new("order", "shutdown");
    let mut run = Run::start_uncontained(
        &d,
        r#"
[[helper]]
name = "base"
command = ["sleep", "600"]

[[helper]]
name = "mid"
command = ["sleep", "600"]
depends_on = ["base"]

[[helper]]
name = "top"
command = ["sleep", "600"]
depends_on = { mid = "ready" }

[[helper]]
name = "free"
command = ["sleep", "600"]
"#,
    );
    for h in ["base", "mid", "top", "free"] {
        run.state(h, "running");
    }
    let launches: Vec<usize> = ["base", "mid", "top"]
        .iter()
        .map(|h| run.launch(h, 1))
        .collect();
    assert!(launches.windows(2).all(|w| w[0] < w[1]), "{:#?}", run.seen);
    let st = run.stop();
    assert!(st.success(), "{st}");
    run.drain();
    let signal = |run: &Run, h: &str| {
        let s = all_of(run, "signal", h);
        assert_eq!(s.len(), 1, "{h}: {:#?}", run.seen);
        s[0]
    };
    let exit = |run: &Run, h: &str| {
        let s = all_of(run, "exit", h);
        assert_eq!(s.len(), 1, "{h}: {:#?}", run.seen);
        s[0]
    };
    let (st, et) = (signal(&run, "top"), exit(&run, "top"));
    let (sm, em) = (signal(&run, "mid"), exit(&run, "mid"));
    let sb = signal(&run, "base");
    let sf = signal(&run, "free");
    assert!(st < et && et < sm && sm < em && em < sb, "{:#?}", run.seen);
    // free is not held up by the chain: it gets its stop signal with the first.
    assert!(sf < et, "{:#?}", run.seen);
    // The stop order is the reverse of the start order.
    let stops: Vec<usize> = ["top", "mid", "base"]
        .iter()
        .map(|h| run.state(h, "stopped"))
        .collect();
    assert!(stops.windows(2).all(|w| w[0] < w[1]), "{:#?}", run.seen);
}

/// `ctl stop` stops a `restart = "always"` helper's whole tree (its stop signal, which the
/// helper and its child ignore here, then SIGKILL of both when its grace runs out) and keeps it
/// down, with no restart pending, until `ctl start` launches it again.
#[test]
fn ctl_stop_keeps_an_always_helper_down_until_start() {
    let d = Dir::new("order", "stop");
    let mut run = Run::start_uncontained(
        &d,
        r#"
[[helper]]
name = "web"
command = ["sh", "-c", "trap '' TERM; sleep 600 & echo started; wait"]
restart = "always"
backoff = { initial = "1ms", max = "1ms" }
stop_grace = "300ms"

[[helper]]
name = "keep"
command = ["sleep", "600"]
"#,
    );
    run.launch("web", 1);
    // Its child runs (the shell says so once it has started it).
    let of = |s: &Value, g: u64| {
        s["processes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| {
                p["helper"] == "web"
                    && p["generation"] == g
                    && p["comm"] == if g == 1 { "sh" } else { "sleep" }
            })
            .map(|p| p["pid"].as_i64().unwrap() as i32)
    };
    let s = run.wait_status("with web's child running", |s| {
        of(s, 1).is_some() && of(s, 2).is_some()
    });
    let (web, child) = (of(&s, 1).unwrap(), of(&s, 2).unwrap());
    let out = run.ctl(&["stop", "web"]);
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{out:?}");
    assert!(
        said.starts_with(&format!("stopping helper \"web\": sent SIGTERM to {web}:"))
            && said.contains("(its tree has 1 more process)")
            && said.contains("SIGKILL to what is left of its tree after 300ms")
            && said.contains("until `foster ctl start`"),
        "{said}"
    );
    let stopping = run.state("web", "stopping");
    let stopped = run.state("web", "stopped");
    assert_eq!(run.seen[stopped]["detail"], "by request");
    // Both got SIGKILL at the end of the grace, and both are gone.
    let killed: Vec<i64> = run.seen[stopping..stopped]
        .iter()
        .filter(|e| e["event"] == "signal" && e["signal"] == "SIGKILL")
        .map(|e| e["target"]["pid"].as_i64().unwrap())
        .collect();
    assert!(
        killed.contains(&(web as i64)) && killed.contains(&(child as i64)),
        "{:#?}",
        run.seen
    );
    for pid in [web, child] {
        assert!(common::process(pid).is_none(), "{pid} outlived the stop");
    }
    // Down, with no restart pending, whatever its restart rule.
    let h = run.helpers();
    assert_eq!(h["web"]["state"], "stopped");
    assert!(h["web"]["next_launch_in_ms"].is_null(), "{h:?}");
    assert!(h["web"]["identity"].is_null(), "{h:?}");
    assert_eq!(all_of(&run, "launch", "web").len(), 1, "{:#?}", run.seen);
    // Stopping it again says so; starting it launches it.
    let again = run.ctl(&["stop", "web"]);
    assert_eq!(
        String::from_utf8_lossy(&again.stdout).trim(),
        "helper \"web\" is already stopped"
    );
    let before = run.seen.len();
    let out = run.ctl(&["start", "web"]);
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{out:?}");
    assert!(
        said.starts_with("helper \"web\" launched (")
            && said.contains("(it was stopped by request)"),
        "{said}"
    );
    let relaunch = run.launch("web", 2);
    assert!(relaunch >= before, "{:#?}", run.seen);
    assert!(
        run.seen[stopped..relaunch]
            .iter()
            .all(|e| !(e["event"] == "launch" && e["helper"] == "web")),
        "{:#?}",
        run.seen
    );
    run.state("web", "running");
    assert_eq!(run.helpers()["web"]["state"], "running");
    // web ignores its stop signal: the shutdown SIGKILLs it after its grace (status 4).
    let st = run.stop();
    assert_eq!(st.code(), Some(4), "{st}");
}

/// A process of a stopped helper's tree that outlives its SIGKILL for a while (held inside an
/// `execve` by a file system of the test's own, `common::fuse`: a SIGKILL waits there for the
/// read) keeps the helper `stopping` until it has ended. `stopped` came as soon as the helper's
/// own process was reaped, that process still there (the grace's SIGKILL reaches a child an
/// instant later than its parent's reap under load, too).
#[test]
fn a_stop_is_over_once_every_process_it_sigkilled_has_ended() {
    let d = Dir::new("order", "heldstop");
    let Some(mut held) = common::fuse::held_shell(&d, "held-child") else {
        return;
    };
    let mut run = Run::start_uncontained(
        &d,
        &format!(
            r#"
[[helper]]
name = "web"
command = ["sh", "-c", '''trap '' TERM; {} -c "exit 0" & wait''']
stop_grace = "100ms"
"#,
            held.path().display()
        ),
    );
    // Dropped before the run: a held process can only end once released.
    let mut release = held.releaser();
    let launch = run.launch("web", 1);
    let web = run.seen[launch]["identity"]["pid"].as_i64().unwrap();
    let child = held.wait_held(LIMIT);
    let out = run.ctl(&["stop", "web"]);
    assert!(out.status.success(), "{out:?}");
    // Both get SIGKILL at the end of the grace; the helper's own process is reaped, the child
    // is still held.
    for pid in [web, i64::from(child)] {
        run.until(&format!("SIGKILL to {pid}"), |e| {
            e["event"] == "signal" && e["signal"] == "SIGKILL" && e["target"]["pid"] == pid
        });
    }
    run.until("web's exit", |e| e["event"] == "exit" && e["pid"] == web);
    assert!(common::process(child).is_some(), "{child} is held");
    let h = run.helpers();
    assert_eq!(h["web"]["state"], "stopping", "{h:?}");
    // Released, it ends, and only then is the helper stopped.
    release.release();
    run.state("web", "stopped");
    assert!(
        common::process(child).is_none(),
        "{child} outlived the stop"
    );
    let st = run.stop();
    assert!(st.code().is_some(), "{st}");
}
