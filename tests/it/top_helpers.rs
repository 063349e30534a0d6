//! `foster top --attach` in a real terminal (tmux) on a real supervisor: every declared helper
//! has a row whatever its state (stopped, completed, with no process), with its restarts and
//! last exit; the helper keys act on the helper under the cursor and are checked again when
//! confirmed; the end of what the dashboard shows (the supervisor stopped, the `--root`
//! process exited) is said as what happened, its rows marked ended.

use foster::process::identity::Identity;

use crate::common;
use common::tmux::{DEADLINE, SleepTree, Tmux, dashboard_pid, tmux_missing, top_over};
use common::{Dir, wait_gone};

/// Two sleeping helpers and one that completes at once.
const CONFIG: &str = "[[helper]]\nname = \"web\"\ncommand = [\"/bin/sleep\", \"1000\"]\n\
                      [[helper]]\nname = \"worker\"\ncommand = [\"/bin/sleep\", \"1001\"]\n\
                      [[helper]]\nname = \"once\"\ncommand = [\"/bin/true\"]\n\
                      restart = \"never\"\n";

/// The supervisor of [`CONFIG`] with its helpers launched and `once` ended, and the dashboard
/// attached to it in a wide terminal.
/// The directory comes first, so it is dropped last.
fn attached(tag: &str) -> (Dir, common::supervised::Run, Tmux, Identity) {
    attached_sized(tag, 200, 40)
}

/// [`attached`] in a `w` x `h` terminal.
fn attached_sized(tag: &str, w: u16, h: u16) -> (Dir, common::supervised::Run, Tmux, Identity) {
    let d = Dir::new("top-helpers", tag);
    let mut run = common::supervised::Run::start(&d, CONFIG, &["--no-contain"]);
    run.launch("web", 1);
    run.launch("worker", 1);
    run.wait_status("once ended", |v| {
        v["helpers"]
            .as_array()
            .and_then(|h| h.iter().find(|h| h["name"] == "once"))
            .is_some_and(|h| h["identity"].is_null() && !h["last_exit"].is_null())
    });
    let t = Tmux::start_sized(
        &format!(
            "{} top --attach {} --interval 300ms",
            env!("CARGO_BIN_EXE_foster"),
            run.socket.display()
        ),
        w,
        h,
    );
    let top = dashboard_pid(&t);
    t.wait_for("the helpers' rows", |s| {
        s.contains("sleep 1000") && s.contains("sleep 1001")
    });
    (d, run, t, top)
}

/// The line of the row of helper `name` that has no process (no pid, no role), if shown.
fn vacant_row<'a>(screen: &'a str, name: &str) -> Option<&'a str> {
    screen
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name) && l.contains("(no process"))
}

/// Types `text` after `/` and keeps it (Enter).
fn filter(t: &Tmux, text: &str) {
    t.keys(&["/"]);
    t.text(text);
    t.keys(&["Enter"]);
}

#[test]
fn every_helper_has_a_row_whatever_its_state() {
    if tmux_missing() {
        return;
    }
    let (_d, mut run, t, top) = attached("rows");
    // Completed: a row of its own, its exit code in LAST EXIT.
    let s = t.wait_for("the completed helper's row", |s| {
        vacant_row(s, "once").is_some()
    });
    let header = s.lines().find(|l| l.contains("COMMAND")).unwrap();
    assert!(
        header.contains("RESTARTS") && header.contains("LAST EXIT"),
        "{s}"
    );
    let once = vacant_row(&s, "once").unwrap();
    assert!(once.contains("completed") && once.contains(" 0 "), "{once}");
    // Stopped: its row stays, stopped by request.
    assert!(run.ctl(&["stop", "web"]).status.success());
    let s = t.wait_for("web's row, stopped", |s| {
        vacant_row(s, "web").is_some_and(|l| l.contains("stopped by request"))
    });
    assert!(!s.contains("sleep 1000"), "{s}");
    // A filter for it finds it; the cursor lands on it, and o starts web.
    filter(&t, "web");
    let s = t.wait_for("the filter on web", |s| s.contains("filter: web"));
    assert!(vacant_row(&s, "web").is_some(), "{s}");
    t.keys(&["o"]);
    t.wait_for("the start's confirmation", |s| {
        s.contains("Start helper web now (it is stopped by request, with no process)")
    });
    t.keys(&["y"]);
    run.launch("web", 2);
    t.wait_for("web running again, one restart", |s| {
        s.contains("sleep 1000") && vacant_row(s, "web").is_none()
    });
    t.keys(&["q"]);
    assert!(wait_gone(top, DEADLINE), "the dashboard did not exit");
    assert!(run.stop().success());
}

#[test]
fn helper_keys_act_on_the_row_and_are_checked_when_confirmed() {
    if tmux_missing() {
        return;
    }
    let (_d, mut run, t, top) = attached("keys");
    assert!(run.ctl(&["stop", "web"]).status.success());
    t.wait_for("web's row, stopped", |s| vacant_row(s, "web").is_some());
    filter(&t, "web");
    t.wait_for("the filter on web", |s| s.contains("filter: web"));
    t.keys(&["o"]);
    t.wait_for("the start's confirmation", |s| {
        s.contains("Start helper web now")
    });
    // Started meanwhile by someone else: confirming does nothing, and says why.
    assert!(run.ctl(&["start", "web"]).status.success());
    run.launch("web", 2);
    t.wait_for("the dashboard reading web's launch", |s| {
        s.contains(" 3 processes")
    });
    t.keys(&["y"]);
    let s = t.wait_for("the confirmation checked again", |s| {
        s.contains("helper web changed while you confirmed: it is now running")
    });
    assert!(s.contains("nothing done"), "{s}");
    // The supervisor's row stands for no helper.
    t.keys(&["Escape", "g", "o"]);
    t.wait_for("o on the supervisor's row", |s| {
        s.contains("is the supervisor: o acts on the helper of the row under the cursor")
    });
    t.keys(&["q"]);
    assert!(wait_gone(top, DEADLINE), "the dashboard did not exit");
    let launches = run.helpers()["web"]["launches"].as_u64();
    assert_eq!(launches, Some(2), "web was started once more, by ctl only");
    assert!(run.stop().success());
}

#[test]
fn a_supervisor_stopped_in_order_is_said_so_its_rows_ended() {
    if tmux_missing() {
        return;
    }
    let (_d, mut run, t, top) = attached("end");
    t.keys(&["X"]);
    t.wait_for("the stop's confirmation", |s| s.contains("Stop supervisor"));
    t.keys(&["y"]);
    assert!(run.wait().success());
    let s = t.wait_for("the end said", |s| {
        s.contains("supervisor stopped with exit status 0")
    });
    assert!(!s.contains("reading failed"), "{s}");
    assert!(s.contains("ENDED") && !s.contains("SHUTTING DOWN"), "{s}");
    let web = s.lines().find(|l| l.contains("sleep 1000")).unwrap();
    assert!(web.contains(" exit "), "{web}");
    t.keys(&["q"]);
    assert!(wait_gone(top, DEADLINE), "the dashboard did not exit");
}

#[test]
fn a_root_that_exited_is_said_so_its_rows_ended() {
    if tmux_missing() {
        return;
    }
    let tree = SleepTree::start();
    let root = tree.all[0].pid;
    let (t, top) = top_over(&tree, "", 120, 30);
    t.wait_for("the sleeps", SleepTree::shown);
    drop(tree);
    let s = t.wait_for("the root's end said", |s| {
        s.contains(&format!("the root process {root} has exited"))
    });
    assert!(!s.contains("reading failed"), "{s}");
    let sleep = s.lines().find(|l| l.contains("sleep 4101")).unwrap();
    assert!(sleep.contains(" exit "), "{sleep}");
    t.keys(&["q"]);
    assert!(wait_gone(top, DEADLINE), "the dashboard did not exit");
}

/// A pane's title too long for the terminal is cut with `…`, as every text cut is.
#[test]
fn a_cut_pane_title_ends_in_an_ellipsis() {
    if tmux_missing() {
        return;
    }
    let (_d, mut run, t, top) = attached_sized("pane-title", 50, 30);
    t.keys(&["g", "l"]);
    let s = t.wait_for("the log pane", |s| s.contains("logs of every helper"));
    let title = s
        .lines()
        .find(|l| l.contains("logs of every helper"))
        .unwrap();
    assert!(title.trim_end().ends_with('…'), "{title:?}");
    t.keys(&["q"]);
    assert!(wait_gone(top, DEADLINE), "the dashboard did not exit");
    assert!(run.stop().success());
}
