//! `foster top` end to end: the real binary in a real terminal (tmux), standalone over a subtree
//! of processes this test starts. It sees them, collapses, filters, signals one with
//! confirmation and sees it die, quits, and checks that the terminal was restored and that
//! nothing is left running; then the same for a SIGTERM sent to the dashboard.
//! Every tmux server it starts has its socket in a directory of the test's own and is checked gone,
//! socket file included, at the end.

use std::process::Command;
use std::time::{Duration, Instant};

use foster::process::identity::Identity;

use crate::common;
use common::tmux::{DEADLINE, Tmux, dashboard_pid, has_row, tmux_missing};
use common::wait_gone;
use common::{Dir, descendants_of};

/// A subtree: sh (root) → sh (inner) → sleep 1001, sleep 1002; and root → sleep 1003.
struct Subtree {
    root: std::process::Child,
    all: Vec<Identity>,
}

impl Subtree {
    fn start() -> Subtree {
        // Close-on-exec: other tests of this process fork too, and must not hold its write end.
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        // The durations come from the environment so that only the sleeps' command lines hold
        // them (a filter for one must not match the shells).
        let script = r#"sh -c 'sleep $A & sleep $B & echo >&3; wait' & sleep $C & wait"#;
        let root = Command::new("sh")
            .args(["-c", script])
            .stdin(std::process::Stdio::null())
            .envs([("A", "1001"), ("B", "1002"), ("C", "1003")])
            .spawn_with_fd3(w);
        // Barrier: the inner shell has started both sleeps.
        let mut b = [0u8; 1];
        nix::unistd::read(&r, &mut b).unwrap();
        let root_pid = root.id() as i32;
        let mut all = vec![Identity::of(root_pid).unwrap()];
        let start = Instant::now();
        // The outer sleep may still be forking: wait until all five are there.
        loop {
            let below = descendants_of(root_pid);
            // Forked is not enough: each sleep must have exec'd (its command line shows its
            // argument), or a lookup by argument races the exec.
            let execed = |arg: &str| {
                below.iter().any(|id| {
                    std::fs::read(format!("/proc/{}/cmdline", id.pid))
                        .is_ok_and(|c| c.split(|b| *b == 0).any(|a| a == arg.as_bytes()))
                })
            };
            if below.len() == 4 && ["1001", "1002", "1003"].into_iter().all(execed) {
                all.extend(below);
                break;
            }
            assert!(
                start.elapsed() < DEADLINE,
                "subtree never had five processes with the sleeps exec'd: {root_pid} and {below:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        Subtree { root, all }
    }

    fn pid_of(&self, arg: &str) -> Identity {
        *self
            .all
            .iter()
            .find(|id| {
                std::fs::read(format!("/proc/{}/cmdline", id.pid))
                    .is_ok_and(|c| c.split(|b| *b == 0).any(|a| a == arg.as_bytes()))
            })
            .unwrap_or_else(|| panic!("no process with argument {arg}"))
    }
}

impl Drop for Subtree {
    fn drop(&mut self) {
        for id in self.all.iter().rev() {
            let _ = foster::top::send_signal(*id, nix::sys::signal::Signal::SIGKILL);
        }
        let _ = self.root.wait();
        for id in &self.all {
            assert!(
                wait_gone(*id, DEADLINE),
                "process {id} of the test's subtree outlived the test"
            );
        }
    }
}

/// `Command::spawn` with `fd` as the child's descriptor 3.
trait SpawnWithFd3 {
    fn spawn_with_fd3(&mut self, fd: std::os::fd::OwnedFd) -> std::process::Child;
}

impl SpawnWithFd3 for Command {
    fn spawn_with_fd3(&mut self, fd: std::os::fd::OwnedFd) -> std::process::Child {
        use std::os::fd::AsRawFd;
        use std::os::unix::process::CommandExt;
        let raw = fd.as_raw_fd();
        // SAFETY: dup2 is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            self.pre_exec(move || common::fd::place(&[(raw, 3)]));
        }
        let child = self.spawn().unwrap();
        drop(fd);
        child
    }
}

#[test]
fn see_collapse_filter_signal_quit() {
    if tmux_missing() {
        return;
    }
    let tree = Subtree::start();
    let root = tree.all[0];
    let victim = tree.pid_of("1002");
    let t = Tmux::start("sh");
    // The terminal's modes before, to compare with after.
    t.save_modes();
    t.foster(&format!("top --root {} --interval 200ms", root.pid));
    let s = t.wait_for("every process of the subtree", |s| {
        ["sleep 1001", "sleep 1002", "sleep 1003"]
            .iter()
            .all(|n| has_row(s, n))
    });
    assert!(s.contains(&format!("subtree of {}", root.pid)), "{s}");
    assert!(s.contains("5 processes"), "{s}");
    let top = dashboard_pid(&t);
    assert_eq!(
        t.display("#{alternate_on}"),
        "1",
        "the dashboard uses the alternate screen"
    );

    // Collapse the inner shell (the root's first child): its two sleeps disappear, summed.
    t.keys(&["j", "Left"]);
    let s = t.wait_for("the inner shell collapsed", |s| {
        s.contains("(+2)") && !has_row(s, "sleep 1001")
    });
    assert!(
        has_row(&s, "sleep 1003") && !has_row(&s, "sleep 1002"),
        "{s}"
    );
    t.keys(&["Right"]);
    t.wait_for("expanded again", |s| has_row(s, "sleep 1001"));

    // Filter: the match, its ancestors, not its siblings.
    t.keys(&["/"]);
    t.text("1002");
    t.keys(&["Enter"]);
    let s = t.wait_for("the filtered view", |s| {
        !has_row(s, "sleep 1001") && !has_row(s, "sleep 1003")
    });
    assert!(
        has_row(&s, "sleep 1002") && s.contains("filter: 1002"),
        "{s}"
    );
    assert!(s.contains(&root.pid.to_string()), "the ancestors stay: {s}");

    // Signal it: the picker starts on SIGTERM; confirm; see the result and the process die.
    t.keys(&["s"]);
    t.wait_for("the signal picker", |s| {
        s.contains("15 SIGTERM") && s.contains("(sleep)")
    });
    t.keys(&["Enter"]);
    t.wait_for("the confirmation", |s| {
        s.contains(&format!("Send SIGTERM to {} (sleep)?", victim.pid))
    });
    t.keys(&["y"]);
    t.wait_for("the result", |s| {
        s.contains(&format!("sent SIGTERM to {} (sleep)", victim.pid))
    });
    assert!(
        wait_gone(victim, DEADLINE),
        "the signalled process did not die"
    );
    t.wait_for("the row gone", |s| {
        s.contains("no process matches the filter")
    });
    for id in &tree.all {
        if *id != victim {
            assert!(id.is_alive(), "{id} was not the target but died");
        }
    }

    // Quit: the terminal is back to the shell, out of the alternate screen, the cursor shown.
    t.keys(&["q"]);
    assert!(wait_gone(top, DEADLINE), "the dashboard did not exit");
    let start = Instant::now();
    while t.display("#{alternate_on}") != "0" {
        assert!(start.elapsed() < DEADLINE, "still on the alternate screen");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        t.display("#{cursor_flag}"),
        "1",
        "the cursor is visible again"
    );
    let s = t.screen();
    assert!(
        !s.contains("COMMAND"),
        "the dashboard is still on screen:\n{s}"
    );
    t.assert_modes_restored("");
}

/// The dashboard over a [`common::tmux::SleepTree`] in a `w` x `h` terminal, once both sleeps
/// show; `None` (the reason printed) without tmux.
fn over_sleeps(w: u16, h: u16) -> Option<(common::tmux::SleepTree, Tmux, Identity)> {
    if tmux_missing() {
        return None;
    }
    let tree = common::tmux::SleepTree::start();
    let (t, top) = common::tmux::top_over(&tree, "", w, h);
    t.wait_for("the sleeps", common::tmux::SleepTree::shown);
    Some((tree, t, top))
}

/// The table's header line of `screen`.
fn header(screen: &str) -> Option<&str> {
    screen
        .lines()
        .find(|l| l.contains(" PID") && l.contains("COMMAND"))
}

/// Types `text` as the filter and keeps it (`/`, the text, Enter).
fn filter(t: &Tmux, text: &str) {
    t.keys(&["/"]);
    t.text(text);
    t.keys(&["Enter"]);
}

/// The counts say what is on screen: Tasks under a filter counts the rows it leaves, of the
/// processes read; the title says "1 process" of a one-process view.
#[test]
fn counts_follow_the_filter_and_the_number() {
    if tmux_missing() {
        return;
    }
    let tree = Subtree::start();
    let t = Tmux::start_sized("sh", 200, 60);
    t.foster(&format!("top --root {} --interval 200ms", tree.all[0].pid));
    t.wait_for("the subtree", |s| has_row(s, "sleep 1003"));
    let top = dashboard_pid(&t);
    filter(&t, "1002");
    let s = t.wait_for("the filtered view", |s| {
        !has_row(s, "sleep 1003") && s.contains("Tasks ")
    });
    assert!(s.contains("Tasks 3 of 5 shown"), "{s}");
    assert!(s.contains("5 processes"), "{s}");
    t.quit(top);

    t.foster(&format!(
        "top --root {} --interval 200ms",
        tree.pid_of("1003").pid
    ));
    let s = t.wait_for("the one sleep", |s| s.contains(" sleep 1003\n"));
    let top = dashboard_pid(&t);
    assert!(
        s.contains(" 1 process ") && !s.contains("1 processes"),
        "{s}"
    );
    t.quit(top);
}

/// At 80x24 a title too long for the terminal is cut with `…` at its last column, not in the
/// middle of a word with nothing to say so.
#[test]
fn a_cut_title_ends_in_an_ellipsis() {
    let Some((_tree, t, top)) = over_sleeps(80, 24) else {
        return;
    };
    filter(&t, "nothing-has-a-name-as-long-as-this-one-is");
    let s = t.wait_for("the filter in the title", |s| {
        s.lines()
            .next()
            .is_some_and(|l| l.contains("filter: nothing"))
    });
    let title = s.lines().next().unwrap_or_default().trim_end();
    assert!(title.contains("filter: nothing-has"), "{s}");
    assert_eq!(
        title.chars().count(),
        80,
        "the title fills the line: {title:?}"
    );
    assert!(title.ends_with('…'), "the cut is marked: {title:?}");
    t.quit(top);
}

/// Each frame is drawn inside the terminal's synchronized update (DEC mode 2026): what the
/// dashboard writes to the terminal (tmux's `pipe-pane`) opens the mode before a frame's text
/// and closes it after, as many times each.
#[test]
fn frames_are_drawn_as_synchronized_updates() {
    if tmux_missing() {
        return;
    }
    let tree = common::tmux::SleepTree::start();
    let dir = Dir::new("top-sync", "out");
    let out = dir.path("pane");
    let t = Tmux::start_sized("sh", 80, 24);
    let pipe = format!("cat >> '{}'", out.display());
    assert!(
        t.run(&["pipe-pane", "-O", "-t", "t", &pipe])
            .status
            .success()
    );
    t.foster(&format!("top --root {} --interval 300ms", tree.all[0].pid));
    let top = dashboard_pid(&t);
    t.wait_for("the sleeps", common::tmux::SleepTree::shown);
    t.quit(top);
    const BEGIN: &str = "\x1b[?2026h";
    const END: &str = "\x1b[?2026l";
    let start = Instant::now();
    let written = loop {
        let w = String::from_utf8_lossy(&std::fs::read(&out).unwrap_or_default()).into_owned();
        let (b, e) = (w.matches(BEGIN).count(), w.matches(END).count());
        if w.contains("4101") && b > 0 && b == e {
            break w;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "{b} begins and {e} ends of a synchronized update in what the dashboard wrote"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let title = written
        .find("subtree")
        .expect("the title in what was written");
    let opened = written[..title]
        .rfind(BEGIN)
        .expect("a begin before the first frame");
    let closed = written[..title].rfind(END);
    assert!(
        closed.is_none_or(|c| c < opened),
        "the first frame is inside an update"
    );
    assert!(
        written[title..].contains(END),
        "and the update is closed after it"
    );
}

/// The palette indexes of the SGR foreground colours of a styled screen (`capture-pane -e`):
/// 30-37 and 90-97 (0-15), and 38;5;N as tmux writes them; 24-bit colours skipped.
fn foregrounds(styled: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for seq in styled.split("\x1b[").skip(1) {
        let Some(end) = seq.find('m') else { continue };
        let params: Vec<u32> = seq[..end]
            .split(';')
            .filter_map(|p| p.parse().ok())
            .collect();
        let mut i = 0;
        while i < params.len() {
            match (params[i], params.get(i + 1), params.get(i + 2)) {
                (38, Some(5), Some(&n)) => {
                    out.push(n);
                    i += 3;
                }
                (48, Some(5), _) => i += 3,
                (38 | 48, Some(2), _) => i += 5,
                (p @ 30..=37, _, _) => {
                    out.push(p - 30);
                    i += 1;
                }
                (p @ 90..=97, _, _) => {
                    out.push(p - 82);
                    i += 1;
                }
                _ => i += 1,
            }
        }
    }
    out
}

/// The rows a filter matches are marked readably on any theme: not yellow text on the
/// terminal's background (colour 3, unreadable on a light one), as the colour rule says.
#[test]
fn filter_matches_are_not_yellow_text() {
    let Some((_tree, t, top)) = over_sleeps(120, 40) else {
        return;
    };
    filter(&t, "4102");
    t.wait_for("the filter kept", |s| {
        s.lines().next().is_some_and(|l| l.contains("filter: 4102"))
    });
    let styled = t.screen_styled();
    let fg = foregrounds(&styled);
    assert!(
        !fg.contains(&3) && !fg.contains(&11),
        "yellow text: {styled:?}"
    );
    assert!(
        styled.contains("\x1b[48;5;3m") || styled.contains("\x1b[43m"),
        "the match is marked by a background: {styled:?}"
    );
    t.quit(top);
}

/// Columns keep their width while their content fits: a pause widens S to `exit` for a process
/// that ended; once resumed and the row gone, COMMAND stays where it was.
#[test]
fn columns_stay_put_while_their_content_fits() {
    let Some((tree, t, top)) = over_sleeps(120, 40) else {
        return;
    };
    let command_at = |s: &str| header(s)?.find("COMMAND");
    t.keys(&["p"]);
    t.wait_for("paused", |s| s.contains("PAUSED"));
    let victim = tree
        .all
        .iter()
        .copied()
        .find(|id| {
            std::fs::read(format!("/proc/{}/cmdline", id.pid)).is_ok_and(|c| c.ends_with(b"4102\0"))
        })
        .expect("sleep 4102");
    foster::top::send_signal(victim, nix::sys::signal::Signal::SIGKILL).unwrap();
    assert!(wait_gone(victim, DEADLINE), "the sleep did not die");
    let paused = t.wait_for("the ended row kept", |s| s.contains(" exit "));
    let wide = command_at(&paused);
    t.keys(&["p"]);
    let resumed = t.wait_for("the row gone", |s| {
        !s.contains("PAUSED") && !has_row(s, "sleep 4102")
    });
    assert_eq!(
        command_at(&resumed),
        wide,
        "COMMAND moved:\n{paused}\n{resumed}"
    );
    t.quit(top);
}

/// `foster top` over `tree` typed after `env` (assignments, or ""), its exit status echoed
/// after it: once it shows the tree on the alternate screen with mouse reporting on, its pid.
fn top_in_full_screen(t: &Tmux, env: &str, tree: &Subtree) -> Identity {
    t.text(&format!(
        "{env}{} top --root {}; echo status=$?\n",
        env!("CARGO_BIN_EXE_foster"),
        tree.all[0].pid
    ));
    t.wait_for("the dashboard", |s| has_row(s, "sleep 1003"));
    let top = dashboard_pid(t);
    assert_eq!(t.display("#{alternate_on}"), "1");
    t.wait_for("mouse reporting on", |_| {
        t.display("#{mouse_any_flag}") == "1"
    });
    top
}

/// The dashboard `top` has ended and left the terminal as it found it (`after`: after what).
fn assert_terminal_restored(t: &Tmux, top: Identity, after: &str) {
    assert!(wait_gone(top, DEADLINE));
    assert_eq!(t.display("#{alternate_on}"), "0");
    assert_eq!(t.display("#{cursor_flag}"), "1");
    assert_eq!(
        t.display("#{mouse_any_flag}"),
        "0",
        "mouse reporting left on{after}"
    );
}

#[test]
fn sigterm_restores_the_terminal() {
    if tmux_missing() {
        return;
    }
    let tree = Subtree::start();
    let t = Tmux::start("sh");
    let top = top_in_full_screen(&t, "", &tree);
    common::send(top.pid, libc::SIGTERM);
    t.wait_for("the exit status", |s| s.contains("status=143"));
    assert_terminal_restored(&t, top, "");
}

/// A panic inside the dashboard (a debug build's test key) still restores the terminal: raw
/// mode undone, alternate screen left, mouse reporting off, cursor shown, and the panic
/// message readable.
#[test]
fn a_panic_restores_the_terminal() {
    if tmux_missing() {
        return;
    }
    if !cfg!(debug_assertions) {
        common::skip::setup("the panic key exists in debug builds only");
        return;
    }
    let tree = Subtree::start();
    let t = Tmux::start("sh");
    t.save_modes();
    let top = top_in_full_screen(&t, "FOSTER_TOP_TEST_PANIC_KEY=P ", &tree);
    t.keys(&["P"]);
    let s = t.wait_for("the exit status", |s| s.contains("status=101"));
    assert!(
        s.contains("test panic key"),
        "the panic message is readable after the terminal is restored:\n{s}"
    );
    assert_terminal_restored(&t, top, " after the panic");
    t.assert_modes_restored(" after the panic");
}

/// The table row of `pid` on the screen, if shown.
fn row_with_pid(screen: &str, pid: i32) -> Option<&str> {
    let pat = format!(" {pid} ");
    screen
        .lines()
        .find(|l| l.get(..10).is_some_and(|h| h.contains(&pat)))
}

/// The pid of the first row whose ROLE is `role` and HELPER is `helper`.
fn pid_of_role(screen: &str, role: &str, helper: &str) -> Option<i32> {
    screen.lines().find_map(|l| {
        let mut w = l.trim_start_matches('!').split_whitespace();
        let pid = w.next()?.parse().ok()?;
        (w.next()? == role && w.next()? == helper).then_some(pid)
    })
}

/// `foster demo` in a terminal opens the dashboard on the demo's supervisor: every role is on
/// screen; collapse, filter, a signal to a helper (confirmed) that the supervisor restarts; `q`
/// quits and tears the whole demo down, which the test checks by pid.
#[test]
fn demo_opens_the_dashboard_and_leaves_nothing_behind() {
    if tmux_missing() {
        return;
    }
    // The demo's socket (and the log beside it) in a directory of this test's own, not the
    // user's default socket directory, where a demo may already be running.
    let dir = Dir::new("top", "demo");
    let t = Tmux::start("sh");
    t.save_modes();
    t.foster(&format!(
        "demo --socket {}; echo status=$?",
        dir.path("demo.sock").display()
    ));
    // Every role, with the adopted orphan (the orphaner orphans one at once).
    // The worker comes once the demo's migration has completed (it depends on it).
    let s = t.wait_for("every role of the demo", |s| {
        ["supervisor", "helper", "descendant", "adopted"]
            .iter()
            .all(|r| s.lines().any(|l| l.split_whitespace().any(|w| w == *r)))
            && s.contains("events")
            && s.lines()
                .any(|l| l.split_whitespace().any(|w| w == "worker") && l.contains("helper"))
    });
    for h in ["nested", "worker", "crasher", "orphaner"] {
        assert!(s.contains(h), "helper {h} not on screen:\n{s}");
    }
    assert!(
        s.contains("· supervisor "),
        "the title names the supervisor:\n{s}"
    );
    let demo = dashboard_pid(&t);
    // Everything the demo started, to check after quitting.
    let all = descendants_of(demo.pid);
    assert!(all.len() >= 8, "the demo's tree is too small: {all:?}");

    // Filter on the worker: it, its descendants and its ancestors stay.
    let worker = pid_of_role(&s, "helper", "worker").expect("the worker's row");
    t.keys(&["/"]);
    t.text("worker");
    t.keys(&["Enter"]);
    let s = t.wait_for("the filter on the worker", |s| {
        s.contains("filter: worker")
            && pid_of_role(s, "helper", "crasher").is_none()
            && pid_of_role(s, "helper", "orphaner").is_none()
            // The worker's two gated sleeps (they start just after it) stay with it, each with
            // its command line: one read while a sleep was in the middle of its exec showed it
            // as `[sleep]` for good.
            && s.lines().filter(|l| l.contains("descendant worker")).count() == 2
            && s.lines().filter(|l| l.contains("sleep 86400")).count() == 2
    });
    assert!(row_with_pid(&s, worker).is_some(), "{s}");
    // The cursor landed on the first match, the worker itself: collapse it.
    t.keys(&["Left"]);
    let s = t.wait_for("the worker collapsed", |s| {
        row_with_pid(s, worker).is_some_and(|r| r.contains("(+"))
    });
    assert!(
        !s.lines()
            .any(|l| l.contains("descendant") && l.contains("worker")),
        "descendants hidden:\n{s}"
    );

    // Signal the worker (SIGTERM, the picker's default) and confirm: the supervisor restarts it.
    t.keys(&["s"]);
    t.wait_for("the signal picker", |s| s.contains("15 SIGTERM"));
    t.keys(&["Enter"]);
    t.wait_for("the confirmation", |s| {
        s.contains(&format!("Send SIGTERM to {worker} (sh)?"))
    });
    t.keys(&["y"]);
    t.wait_for("the result", |s| {
        s.contains(&format!("sent SIGTERM to {worker} (sh)"))
    });
    // A new process for the worker, and the event saying so.
    let s = t.wait_for("the worker restarted", |s| {
        pid_of_role(s, "helper", "worker")
            .is_some_and(|p| p != worker && s.contains(&format!("worker[{p}] launched")))
    });
    assert!(
        row_with_pid(&s, worker).is_none(),
        "the old worker is gone:\n{s}"
    );
    // Everything alive now too (the restarted worker and its children, new orphans...).
    let all: Vec<Identity> = all
        .into_iter()
        .chain(descendants_of(demo.pid))
        .collect::<std::collections::HashSet<_>>()
        .into_iter()
        .collect();

    // Quit: the demo stops its supervisor, which ends the whole tree; nothing is left.
    t.keys(&["Escape", "q"]);
    let s = t.wait_for("the demo's exit status", |s| {
        s.lines().any(|l| l.starts_with("status="))
    });
    assert!(s.lines().any(|l| l == "status=0"), "{s}");
    assert!(
        s.contains("nothing it started"),
        "the demo says how its tree ended:\n{s}"
    );
    assert!(wait_gone(demo, DEADLINE), "the demo did not exit");
    for id in &all {
        assert!(
            wait_gone(*id, DEADLINE),
            "process {id} of the demo outlived it:\n{s}"
        );
    }
    assert_eq!(t.display("#{alternate_on}"), "0");
    t.assert_modes_restored("");
}

/// The dashboard's log pane in `foster demo`: `l` on the worker's row shows the worker's own
/// line, got over the control socket; on the supervisor's row, every helper's lines, named
/// (the crasher's standard error marked); `l` again closes it; `q` still tears the demo down.
#[test]
fn demo_log_pane_shows_the_selected_helpers_lines() {
    if tmux_missing() {
        return;
    }
    let dir = Dir::new("top", "demologs");
    let t = Tmux::start("sh");
    t.foster(&format!(
        "demo --socket {}; echo status=$?",
        dir.path("demo.sock").display()
    ));
    let s = t.wait_for("the worker's row", |s| {
        pid_of_role(s, "helper", "worker").is_some()
    });
    let worker = pid_of_role(&s, "helper", "worker").unwrap();
    let demo = dashboard_pid(&t);
    let all = descendants_of(demo.pid);
    // The cursor on the worker (the filter lands on its first match), then the pane.
    t.keys(&["/"]);
    t.text("worker");
    t.keys(&["Enter"]);
    t.wait_for("the filter on the worker", |s| {
        s.contains("filter: worker") && pid_of_role(s, "helper", "crasher").is_none()
    });
    t.keys(&["l"]);
    let s = t.wait_for("the worker's line in the log pane", |s| {
        s.contains("logs of worker")
            && s.contains("worker | worker: starting two sleeps through the gate")
    });
    assert!(row_with_pid(&s, worker).is_some(), "{s}");
    // The supervisor's row (the first): every helper, each line named, stderr marked.
    t.keys(&["Escape"]);
    t.wait_for("the filter cleared", |s| {
        !s.contains("filter: worker") && pid_of_role(s, "helper", "orphaner").is_some()
    });
    t.keys(&["g"]);
    t.wait_for("every helper's lines", |s| {
        s.contains("logs of every helper")
            && s.contains("worker   | worker: starting two sleeps")
            && s.contains("crasher  ! crasher: exiting with code 3")
    });
    t.keys(&["l"]);
    t.wait_for("the pane closed and the events back", |s| {
        !s.contains("logs of") && s.contains(" events ")
    });

    t.keys(&["q"]);
    let s = t.wait_for("the demo's exit status", |s| {
        s.lines().any(|l| l.starts_with("status="))
    });
    assert!(s.lines().any(|l| l == "status=0"), "{s}");
    assert!(wait_gone(demo, DEADLINE), "the demo did not exit");
    for id in all.iter().chain(descendants_of(demo.pid).iter()) {
        assert!(
            wait_gone(*id, DEADLINE),
            "process {id} of the demo outlived it:\n{s}"
        );
    }
}

/// `foster top --attach` without a path finds the supervisor as `foster ctl` does: that of the
/// configuration file of the current directory (its lock in XDG_RUNTIME_DIR/foster), or
/// FOSTER_SOCKET.
#[test]
fn attach_without_a_path_finds_the_socket_as_ctl_does() {
    if tmux_missing() {
        return;
    }
    let d = Dir::new("top-attach", "default");
    let config = "[[helper]]\nname = \"findme\"\ncommand = [\"/bin/sleep\", \"1000\"]\n";
    let (mut run, runtime) =
        common::supervised::Run::start_in_runtime_dir(&d, config, &["--no-contain"]);
    run.launch("findme", 1);
    let foster = env!("CARGO_BIN_EXE_foster");
    for (how, cmd) in [
        (
            "the configuration of the current directory",
            format!(
                "cd {} && env -u FOSTER_SOCKET XDG_RUNTIME_DIR={} {foster} top --attach",
                d.path("").display(),
                runtime.display()
            ),
        ),
        (
            "FOSTER_SOCKET",
            format!(
                "env FOSTER_SOCKET={} XDG_RUNTIME_DIR=/nonexistent {foster} top --attach",
                run.socket.display()
            ),
        ),
    ] {
        let t = Tmux::start(&cmd);
        t.wait_for(&format!("the helper's row, through {how}"), |s| {
            s.contains("findme") && s.contains("supervisor")
        });
        let top = dashboard_pid(&t);
        t.keys(&["q"]);
        assert!(
            wait_gone(top, DEADLINE),
            "the dashboard did not exit ({how})"
        );
    }
    assert!(run.stop().success());
}

/// The supervisor's state is the one it has between requests, not `R` from reading itself
/// while it answers the dashboard's snapshot: after each event (a helper restarted) the new
/// snapshot shows it sleeping, as `ps` does.
#[test]
fn the_supervisor_is_not_shown_running_after_each_event() {
    if tmux_missing() {
        return;
    }
    let d = Dir::new("top-attach", "state");
    let config = "[[helper]]\nname = \"keeper\"\ncommand = [\"/bin/sleep\", \"1000\"]\n";
    let mut run = common::supervised::Run::start(&d, config, &["--no-contain"]);
    run.launch("keeper", 1);
    let sup = run.child.id() as i32;
    let t = Tmux::start_sized(&common::tmux::top_attach(&run.socket), 200, 50);
    let state_of = |s: &str| {
        let col = header(s)?.find(" S ")? + 1;
        row_with_pid(s, sup)?.chars().nth(col)
    };
    // Read here once at a refresh of the dashboard's own: sleeping, as `ps` says.
    t.wait_for("the supervisor sleeping", |s| state_of(s) == Some('S'));
    let top = dashboard_pid(&t);
    for attempt in 2..=4 {
        assert!(run.ctl(&["restart", "keeper"]).status.success());
        let i = run.launch("keeper", attempt);
        let pid = run.seen[i]["identity"]["pid"].as_i64().unwrap() as i32;
        let s = t.wait_for("the new launch", |s| row_with_pid(s, pid).is_some());
        assert_eq!(state_of(&s), Some('S'), "after launch {attempt}:\n{s}");
    }
    t.keys(&["q"]);
    assert!(wait_gone(top, DEADLINE), "the dashboard did not exit");
    assert!(run.stop().success());
}

/// `foster ctl status` on a terminal cuts a long command line so that its line fits the
/// terminal's width (not at a fixed length); with --wide it cuts nothing.
#[test]
fn ctl_status_cuts_command_lines_to_the_terminal() {
    if tmux_missing() {
        return;
    }
    let d = Dir::new("ctl-status", "width");
    // A command line longer than any terminal line here.
    let (mut run, full) = common::long_command::start(&d);
    let foster = env!("CARGO_BIN_EXE_foster");
    let socket = run.socket.display().to_string();
    let t = Tmux::start(&format!(
        "sh -c '{foster} ctl --socket {socket} status; echo =wide=; \
         {foster} ctl --socket {socket} status --wide; echo =end=; exec sleep 1000'"
    ));
    t.wait_for("both statuses", |s| s.contains("=end="));
    // Joined, as printed: lines longer than the terminal wrapped on screen.
    let out = t.run(&["capture-pane", "-p", "-J", "-S", "-", "-t", "t"]);
    let s = String::from_utf8_lossy(&out.stdout).into_owned();
    let (cut, wide) = s.split_once("=wide=").expect("both statuses");
    let line = cut
        .lines()
        .find(|l| l.contains("/bin/sleep 1000"))
        .unwrap_or_else(|| panic!("no line of the helper:\n{s}"));
    assert!(line.contains('…'), "not cut on a terminal: {line:?}");
    assert!(
        line.contains("[helper · of long"),
        "the line keeps its tags: {line:?}"
    );
    assert_eq!(
        line.chars().count(),
        120,
        "the line fills the terminal's 120 columns: {line:?}"
    );
    assert!(wide.contains(&full), "--wide cut the command line:\n{s}");
    assert!(run.stop().success());
}

/// `-` and `+` collapse and expand the subtree under the cursor alone, `*` all of it, as htop;
/// `c` tags the process under the cursor with every process below it.
#[test]
fn subtree_keys_collapse_expand_and_tag_below_the_cursor() {
    if tmux_missing() {
        return;
    }
    let tree = Subtree::start();
    let root = tree.all[0];
    let t = Tmux::start("sh");
    t.foster(&format!("top --root {} --interval 200ms", root.pid));
    t.wait_for("every process of the subtree", |s| {
        ["sleep 1001", "sleep 1002", "sleep 1003"]
            .iter()
            .all(|n| has_row(s, n))
    });
    let top = dashboard_pid(&t);
    // The inner shell's subtree alone: the root's other sleep stays.
    t.keys(&["j", "-"]);
    let s = t.wait_for("the inner shell collapsed", |s| {
        s.contains("(+2)") && !has_row(s, "sleep 1001")
    });
    assert!(has_row(&s, "sleep 1003") && !s.contains("(+4)"), "{s}");
    // `*` expands all while something is collapsed, then collapses all.
    t.keys(&["*"]);
    t.wait_for("all expanded", |s| has_row(s, "sleep 1001"));
    t.keys(&["*"]);
    t.wait_for("all collapsed", |s| s.contains("(+4)"));
    // `+` on the root opens it and everything below it.
    t.keys(&["g", "+"]);
    t.wait_for("the root's subtree expanded", |s| {
        ["sleep 1001", "sleep 1002", "sleep 1003"]
            .iter()
            .all(|n| has_row(s, n))
    });
    // `c` on the inner shell tags it and its two sleeps.
    t.keys(&["j", "c"]);
    let s = t.wait_for("three tagged", |s| s.contains("· 3 tagged"));
    let starred = s.lines().filter(|l| l.starts_with('*')).count();
    assert_eq!(starred, 3, "{s}");
    t.keys(&["q"]);
    assert!(wait_gone(top, DEADLINE), "the dashboard did not exit");
}

/// `d` (or `Enter`) shows the details of the process under the cursor, read from `/proc`: its
/// working directory, its environment's size, its open files and its limits; `Esc` closes.
#[test]
fn the_detail_view_reads_the_process() {
    if tmux_missing() {
        return;
    }
    let tree = common::tmux::SleepTree::start();
    let (t, top) = common::tmux::top_over(&tree, "", 140, 40);
    t.wait_for("the sleeps", common::tmux::SleepTree::shown);
    // The root shell: started by this test, so it has this process's directory and
    // environment.
    t.keys(&["g", "d"]);
    let s = t.wait_for("the details", |s| s.contains("open files"));
    let cwd = std::env::current_dir().unwrap();
    let line = |label: &str| {
        s.lines()
            .find(|l| l.contains(&format!("│{label} ")))
            .unwrap_or_else(|| panic!("no {label} line:\n{s}"))
            .to_string()
    };
    assert!(line("cwd").contains(&cwd.display().to_string()), "{s}");
    let vars = std::env::vars_os().count();
    assert!(
        line("environment").contains(&format!(" {vars} variables")),
        "{s}"
    );
    assert!(line("threads").contains(" 1 "), "{s}");
    assert!(line("max open files").contains(" / "), "{s}");
    let fds = line("open files");
    assert!(
        fds.split_whitespace()
            .nth(2)
            .is_some_and(|n| n.parse::<u32>().is_ok()),
        "{s}"
    );
    assert!(s.contains(&format!(" {} (sh) ", tree.all[0].pid)), "{s}");
    t.keys(&["Escape"]);
    t.wait_for("the details closed", |s| !s.contains("open files"));
    t.keys(&["Enter"]);
    t.wait_for("the details again", |s| s.contains("open files"));
    t.keys(&["d"]);
    t.wait_for("the details closed by d", |s| !s.contains("open files"));
    t.quit(top);
}

/// `--keys htop`: htop's keys where they differ from foster's: `k` opens the signal menu, `/`
/// searches (the rows stay), `e` shows the details; the status line says so at first.
#[test]
fn htop_keys_signal_search_and_show_details() {
    if tmux_missing() {
        return;
    }
    let tree = common::tmux::SleepTree::start();
    let t = Tmux::start_sized("sh", 120, 40);
    t.foster(&format!(
        "top --root {} --interval 300ms --keys htop",
        tree.all[0].pid
    ));
    let top = dashboard_pid(&t);
    let s = t.wait_for("the sleeps", common::tmux::SleepTree::shown);
    assert!(s.contains("htop keys: k signals"), "{s}");
    t.keys(&["k"]);
    t.wait_for("the signal menu", |s| s.contains("15 SIGTERM"));
    t.keys(&["Escape"]);
    t.wait_for("the menu closed", |s| !s.contains("15 SIGTERM"));
    t.keys(&["/"]);
    t.text("4102");
    let s = t.wait_for("the search", |s| s.contains("search: 4102"));
    assert!(has_row(&s, "sleep 4101"), "a search hides no row:\n{s}");
    t.keys(&["Enter", "e"]);
    t.wait_for("the details", |s| s.contains("open files"));
    t.keys(&["Escape"]);
    t.wait_for("the details closed", |s| !s.contains("open files"));
    t.keys(&["q"]);
    assert!(wait_gone(top, DEADLINE), "the dashboard did not exit");
}
