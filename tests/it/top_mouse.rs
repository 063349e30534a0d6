//! `foster top` and the mouse, in a real terminal (tmux) at 80x24 and 200x60, standalone over a
//! shell and two sleeps this test starts: SGR mouse reports typed into the pane as the terminal
//! sends them (`ESC [ < button ; x ; y M`, then `m` on release). A click selects a row (the
//! history line names it), the wheel moves the cursor, a click on a column's title sorts by it
//! (again: the other way), a click on the tree drawing collapses and expands; mouse reporting is
//! turned off again when the dashboard quits. Every process started is checked gone by pid.

use foster::process::identity::Identity;

use crate::common;
use common::tmux::{DEADLINE, SleepTree, Tmux, tmux_missing, top_over};
use common::wait_gone;

/// The dashboard on `tree`'s shell in a `w` x `h` terminal.
fn top(tree: &SleepTree, w: u16, h: u16) -> (Tmux, Identity) {
    let (t, top) = top_over(tree, "", w, h);
    t.wait_for("the sleeps", SleepTree::shown);
    // Mouse reporting on (the pane's flag), so tmux passes the reports on.
    t.wait_for("mouse reporting", |_| t.display("#{mouse_any_flag}") == "1");
    (t, top)
}

/// A press and a release of `button` (0 the left one, 64 wheel up, 65 wheel down) at the cell
/// `x`, `y` (from 0).
fn click(t: &Tmux, button: u8, x: usize, y: usize) {
    t.text(&format!("\x1b[<{button};{};{}M", x + 1, y + 1));
    if button < 64 {
        t.text(&format!("\x1b[<{button};{};{}m", x + 1, y + 1));
    }
}

/// The line and column where `what` first shows on `screen` (columns in characters).
fn find(screen: &str, what: &str) -> (usize, usize) {
    screen
        .lines()
        .enumerate()
        .find_map(|(y, l)| l.find(what).map(|b| (l[..b].chars().count(), y)))
        .unwrap_or_else(|| panic!("{what:?} is not on screen:\n{screen}"))
}

/// The history line names the process under the cursor.
fn selected(pid: i32, name: &str) -> impl Fn(&str) -> bool {
    let label = format!("history of {pid} ({name})");
    move |s: &str| s.contains(&label)
}

/// The pid at the start of the screen's line `y`.
fn row_pid(screen: &str, y: usize) -> i32 {
    let line = screen.lines().nth(y).unwrap_or_default();
    line.split_whitespace()
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no pid at the start of line {y}: {line:?}"))
}

#[test]
fn click_wheel_header_and_collapse_marker() {
    if tmux_missing() {
        return;
    }
    let tree = SleepTree::start();
    let root = tree.all[0].pid;
    for (w, h) in [(80u16, 24u16), (200, 60)] {
        let (t, top) = top(&tree, w, h);
        let s = t.wait_for("the root selected", selected(root, "sh"));

        // A click on a sleep's row selects it.
        let (_, y) = find(&s, "─ sleep 4102");
        let pid = row_pid(&s, y);
        click(&t, 0, 3, y);
        t.wait_for("the clicked row selected", selected(pid, "sleep"));

        // The wheel: up, three rows at most (the root); down, three (the last row).
        click(&t, 64, 3, y);
        t.wait_for("the wheel up", selected(root, "sh"));
        click(&t, 65, 3, y);
        let s = t.wait_for("the wheel down", |s| !selected(root, "sh")(s));
        let (_, last_y) = find(&s, "└─ sleep");
        let last = row_pid(&s, last_y);
        t.wait_for("the last row selected", selected(last, "sleep"));

        // A click on a title sorts by it; again, the other way.
        let (x, hy) = find(&s, " PID");
        click(&t, 0, x + 2, hy);
        t.wait_for("sorted by PID", |s| {
            s.contains("PID▲") && s.contains("sorted by PID, smallest first")
        });
        click(&t, 0, x + 2, hy);
        t.wait_for("PID inverted", |s| {
            s.contains("PID▼") && s.contains("sorted by PID, largest first")
        });
        let (x, hy) = find(&t.screen(), "CPU%");
        click(&t, 0, x + 1, hy);
        t.wait_for("sorted by CPU%", |s| s.contains("CPU%▼"));

        // A click on the root's tree marker (its command's first letter) collapses it.
        let s = t.screen();
        let (x, y) = find(&s, "sh -c sleep");
        click(&t, 0, x, y);
        t.wait_for("the root collapsed", |s| {
            s.contains("(+2)") && !s.contains("sleep 4101\n")
        });
        click(&t, 0, x, y);
        t.wait_for("the root expanded", |s| {
            s.contains("└─ sleep") && !s.contains("(+2)")
        });

        t.keys(&["q"]);
        assert!(wait_gone(top, DEADLINE), "the dashboard did not quit");
        // The terminal stops reporting the mouse once the dashboard is gone.
        t.wait_for("mouse reporting off", |_| {
            t.display("#{mouse_any_flag}") == "0"
        });
    }
}
