//! `foster top --attach`'s log pane in a real terminal (tmux) on a real supervisor: `/`
//! searches the pane's lines (marked on a background, `n` `N`, counted in the status line) and
//! `w` wraps long lines, which are otherwise cut with `…`.

use crate::common;
use common::tmux::{DEADLINE, Tmux, dashboard_pid, tmux_missing};
use common::{Dir, wait_gone};

/// One helper that writes a long line, five lines with `needle`, one without, then sleeps.
const CONFIG: &str = "[[helper]]\nname = \"chatty\"\ncommand = [\"/bin/sh\", \"-c\", \
    \"printf 'long %0300d TAILMARK\\\\n' 0; for i in 1 2 3 4 5; do echo \\\"entry $i needle\\\"; \
    done; echo other; exec sleep 1000\"]\n";

/// The status line: the one above the key hint.
fn status(screen: &str) -> &str {
    let lines: Vec<&str> = screen.lines().collect();
    lines
        .get(lines.len().saturating_sub(2))
        .copied()
        .unwrap_or("")
}

#[test]
fn the_log_pane_searches_and_wraps() {
    if tmux_missing() {
        return;
    }
    let d = Dir::new("top-logs", "search");
    let mut run = common::supervised::Run::start(&d, CONFIG, &["--no-contain"]);
    let t = Tmux::start_sized(&common::tmux::top_attach(&run.socket), 120, 50);
    let top = dashboard_pid(&t);
    t.wait_for("the helper's row", |s| s.contains("sleep 1000"));
    t.keys(&["g", "l", "Tab"]);
    let s = t.wait_for("the helper's lines", |s| {
        s.contains("logs of every helper") && s.contains("chatty | other")
    });
    let long = s.lines().find(|l| l.contains("chatty | long 000")).unwrap();
    assert!(long.trim_end().ends_with('…'), "{long:?}");
    assert!(!s.contains("TAILMARK"), "{s}");

    // The search: the newest match first, then older and newer ones, around the ends.
    t.keys(&["/"]);
    t.text("NEEDLE");
    t.wait_for("the count as typed", |s| status(s).contains("match 5 of 5"));
    t.keys(&["Enter", "N", "N"]);
    t.wait_for("two matches back", |s| {
        status(s).contains("log search \"NEEDLE\": match 3 of 5")
    });
    t.keys(&["n", "n", "n"]);
    t.wait_for("around the end", |s| status(s).contains("match 1 of 5"));
    let styled = t.screen_styled();
    assert!(
        styled.contains("\x1b[48;5;3m") || styled.contains("\x1b[43m"),
        "the match is marked by a background: {styled:?}"
    );
    let yellow = styled.contains("\x1b[33m") || styled.contains("38;5;3m");
    assert!(!yellow, "yellow text: {styled:?}");
    t.keys(&[
        "/", "BSpace", "BSpace", "BSpace", "BSpace", "BSpace", "BSpace",
    ]);
    t.text("absent");
    t.wait_for("no match", |s| status(s).contains("no match"));
    t.keys(&["Escape"]);
    t.wait_for("the search cleared", |s| !status(s).contains("search"));

    // Wrapped: the long line's end shows; again, cut.
    t.keys(&["w"]);
    t.wait_for("the long line wrapped", |s| {
        s.contains("0000 TAILMARK") && s.contains("wrapped")
    });
    t.keys(&["w"]);
    t.wait_for("cut again", |s| !s.contains("TAILMARK"));

    t.keys(&["q"]);
    assert!(wait_gone(top, DEADLINE), "the dashboard did not exit");
    assert!(run.stop().success());
}

/// A left click (press and release) at the cell `x`, `y` (from 0).
fn click(t: &Tmux, x: usize, y: usize) {
    t.text(&format!(
        "\x1b[<0;{};{}M\x1b[<0;{};{}m",
        x + 1,
        y + 1,
        x + 1,
        y + 1
    ));
}

/// The line the log pane's title is on.
fn logs_title(screen: &str) -> usize {
    let at = screen
        .lines()
        .position(|l| l.contains("logs of every helper"));
    at.unwrap_or_else(|| panic!("no log pane:\n{screen}"))
}

/// With the log pane open and the tree unfiltered, `/` searches the pane's lines, no `Tab`
/// first, and gives the pane the keys (`n` `N` then go through its matches); a click on the
/// pane gives it the keys, a click on a row gives them back; with a filter on the tree, `/`
/// refines that filter, as without the pane.
#[test]
fn slash_searches_the_open_log_pane() {
    if tmux_missing() {
        return;
    }
    let d = Dir::new("top-logs", "slash");
    let mut run = common::supervised::Run::start(&d, CONFIG, &["--no-contain"]);
    let t = Tmux::start_sized(&common::tmux::top_attach(&run.socket), 120, 50);
    let top = dashboard_pid(&t);
    t.wait_for("the helper's row", |s| s.contains("sleep 1000"));
    t.keys(&["g", "l"]);
    t.wait_for("the helper's lines and the key hint", |s| {
        s.contains("chatty | other") && s.contains("/ search logs")
    });
    t.keys(&["/"]);
    t.text("NEEDLE");
    t.wait_for("the log's count as typed", |s| {
        status(s).contains("log search: NEEDLE") && status(s).contains("match 5 of 5")
    });
    t.keys(&["Enter", "N"]);
    t.wait_for("the pane's previous match", |s| {
        status(s).contains("log search \"NEEDLE\": match 4 of 5")
    });
    t.keys(&["Escape"]);
    let s = t.wait_for("the keys back to the tree", |s| {
        !s.contains("log pane: ↑ ↓")
    });

    // A click on the pane gives it the keys; one on a row, back to the tree.
    click(&t, 10, logs_title(&s) + 2);
    t.wait_for("the pane's keys", |s| s.contains("log pane: ↑ ↓"));
    let row = s.lines().position(|l| l.contains("sleep 1000")).unwrap();
    click(&t, 10, row);
    t.wait_for("the tree's keys", |s| !s.contains("log pane: ↑ ↓"));

    // A filter on the tree: `/` refines it.
    t.keys(&["\\"]);
    t.text("sleep");
    t.keys(&["Enter"]);
    t.wait_for("the filter kept, / for it", |s| {
        !status(s).contains("filter: sleep▏") && s.contains("/ filter")
    });
    t.keys(&["/"]);
    t.wait_for("the tree's filter", |s| {
        status(s).contains("filter: sleep▏")
    });
    // Waited for before `q`: an `Esc` just before it could read as Alt-q.
    t.keys(&["Escape"]);
    t.wait_for("the filter cleared", |s| {
        !status(s).contains("filter: sleep")
    });
    t.keys(&["q"]);
    assert!(wait_gone(top, DEADLINE), "the dashboard did not exit");
    assert!(run.stop().success());
}
