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
