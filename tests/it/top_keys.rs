//! `foster top --attach` in a real terminal (tmux) at 80x24 and 200x60, over a `foster run`
//! this test starts: what the screen shows of the columns (sized to their content, every cut
//! marked `…`), the confirmation box (its question whole) and the events pane, and what each
//! of the dashboard's keys puts on screen. Everything started is torn down and checked gone
//! by pid.

use foster::process::identity::Identity;

use crate::common;
use std::time::Duration;

use common::Dir;
use common::descendants_of;
use common::supervised::Run;
use common::tmux::{DEADLINE, Tmux, dashboard_pid, tmux_missing, top_attach};
use common::wait_gone;

/// A helper whose name is longer than the HELPER column ever grows (24 columns).
const LONG: &str = "helper-name-longer-than-the-column";

/// Three helpers: `worker-pool` (a shell and two sleeps), the long-named one, and one whose
/// command does not exist, with a path long enough that its event line is wider than 200
/// columns.
fn config() -> String {
    let missing = format!("/nonexistent/{}", "x".repeat(220));
    format!(
        r#"
[[helper]]
name = "worker-pool"
command = ["/bin/sh", "-c", "sleep 86400 & sleep 86400 & wait"]

[[helper]]
name = "{LONG}"
command = ["sleep", "86401"]

[[helper]]
name = "missing"
command = ["{missing}"]
restart = "never"
"#
    )
}

/// A supervisor and the dashboard attached to it in a `w` x `h` terminal.
struct Attached {
    run: Run,
    t: Tmux,
    top: Identity,
    _dir: Dir,
}

impl Attached {
    fn start(tag: &str, w: u16, h: u16) -> Attached {
        Attached::start_with(Dir::new("topkeys", tag), &config(), w, h)
    }

    fn start_with(dir: Dir, config: &str, w: u16, h: u16) -> Attached {
        Attached::start_args(dir, config, (w, h), "")
    }

    /// [`Attached::start_with`], the dashboard given `args` too.
    fn start_args(dir: Dir, config: &str, (w, h): (u16, u16), args: &str) -> Attached {
        let mut run = Run::start_uncontained(&dir, config);
        run.until("the first launch", |e| e["event"] == "launch");
        let t = Tmux::start_sized("sh", w, h);
        t.text(&format!("{} {args}\n", top_attach(&run.socket)));
        let top = dashboard_pid(&t);
        Attached {
            run,
            t,
            top,
            _dir: dir,
        }
    }

    /// Quits the dashboard, stops the supervisor, and checks that nothing is left.
    fn finish(mut self) {
        let all = descendants_of(self.run.child.id() as i32);
        self.t.quit(self.top);
        self.run.stop();
        for id in all {
            assert!(wait_gone(id, DEADLINE), "{id} outlived its supervisor");
        }
    }
}

/// The table row of the helper's own process (ROLE `helper`, HELPER `name`).
fn helper_row<'a>(screen: &'a str, name: &str) -> Option<&'a str> {
    screen.lines().find(|l| {
        let mut w = l.trim_start_matches('!').split_whitespace().skip(1);
        w.next() == Some("helper") && w.next() == Some(name)
    })
}

/// The pid on a table row.
fn row_pid(row: &str) -> i32 {
    row.trim_start_matches('!')
        .split_whitespace()
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no pid on {row:?}"))
}

/// Columns sized to their content: at 80 and 200 columns, `worker-pool` and its role whole;
/// the long name cut and marked; the confirmation's question whole (wrapped, not cut); an
/// event line wider than the pane cut and marked.
#[test]
fn columns_confirmation_and_events_are_never_cut_silently() {
    if tmux_missing() {
        return;
    }
    for (w, h) in [(80u16, 24u16), (200, 60)] {
        let a = Attached::start(&format!("cols{w}"), w, h);
        let s =
            a.t.wait_for("worker-pool's row and the failed launch", |s| {
                helper_row(s, "worker-pool").is_some() && s.contains("could not be launched")
            });
        if w >= 200 {
            let cut = format!("{}…", &LONG[..23]);
            assert!(
                s.lines().any(|l| l.contains(&cut)),
                "{w}x{h}: the long helper name is not cut with …:\n{s}"
            );
        }
        // The event line is wider than the pane: cut, and marked.
        let ev = s
            .lines()
            .find(|l| l.contains("could not be launched"))
            .unwrap();
        assert!(
            ev.trim_end().ends_with('…'),
            "{w}x{h}: the event line is cut without …:\n{s}"
        );
        // The question whole: R on worker-pool's row.
        let pid = row_pid(helper_row(&s, "worker-pool").unwrap());
        a.t.keys(&["/"]);
        a.t.text("worker-pool");
        a.t.keys(&["Enter", "R"]);
        // The stop signal goes to the helper's process alone; the SIGKILL after the grace to
        // what is left of its tree.
        let question = [
            &format!("Restart helper worker-pool: SIGTERM to its process {pid}, SIGKILL after"),
            "to what is left of it and of its 2 descendants, then launch it again?",
            "any other key cancels",
        ];
        wait_confirmation(&a.t, &format!("{w}x{h}: the question whole"), &question);
        a.t.keys(&["n"]);
        a.t.wait_for("cancelled", |s| s.contains("cancelled"));
        a.finish();
    }
}

/// A process born without an event (a helper's shell forking a child once the test opens its
/// FIFO, after the dashboard is up) shows within a few refreshes (300 ms each), not at the
/// next periodic snapshot (10 s).
#[test]
fn a_child_born_without_an_event_shows_within_a_few_refreshes() {
    if tmux_missing() {
        return;
    }
    let dir = Dir::new("topkeys", "fork");
    let fifo = dir.fifo("go");
    let config = format!(
        r#"
[[helper]]
name = "forker"
command = ["/bin/sh", "-c", "read x < {}; sleep 86402 & wait"]
"#,
        fifo.display()
    );
    let a = Attached::start_with(dir, &config, 120, 30);
    a.t.wait_for("the forker's row", |s| helper_row(s, "forker").is_some());
    assert!(!a.t.screen().contains("sleep 86402"));
    std::fs::write(&fifo, "go\n").unwrap();
    a.t.wait_within(Duration::from_secs(3), "the child on screen", |s| {
        s.lines()
            .any(|l| l.contains("descendant") && l.trim_end().ends_with("sleep 86402"))
    });
    a.finish();
}

/// Whether a line is the table's header (below the title and the meters, when shown).
fn is_header(l: &str) -> bool {
    l.trim_start_matches('!').trim_start().starts_with("PID ")
}

/// The pids of the table's rows, top to bottom.
fn row_pids(screen: &str) -> Vec<i32> {
    screen
        .lines()
        .skip_while(|l| !is_header(l))
        .skip(1)
        .map_while(|l| {
            l.trim_start_matches('!')
                .split_whitespace()
                .next()
                .and_then(|p| p.parse().ok())
        })
        .collect()
}

/// The table's header line.
fn header(screen: &str) -> &str {
    screen.lines().find(|l| is_header(l)).unwrap_or_default()
}

/// Sorting and the flat list, at 80x24 and 200x60: the sorted column marked in the header
/// (`AGE▲` at first), the order in words in the footer; `t` the flat list, `I` inverts (the
/// youngest first), `>` `<` the next and previous column (each in the order it starts in),
/// `F6` a menu of them, `P` `M` `T` CPU, memory, age; in the tree, siblings sorted.
#[test]
fn sort_keys_and_the_flat_list() {
    if tmux_missing() {
        return;
    }
    for (w, h) in [(80u16, 24u16), (200, 60)] {
        let a = Attached::start(&format!("sort{w}"), w, h);
        let s = a.t.wait_for("both helpers' rows", |s| {
            helper_row(s, "worker-pool").is_some() && s.contains("86401")
        });
        // AGE is dropped at 80 columns: the footer says the order then.
        assert!(w < 200 || header(&s).contains("AGE▲"), "{w}x{h}: {s}");
        let pool = row_pid(helper_row(&s, "worker-pool").unwrap());
        let long = row_pid(s.lines().find(|l| l.ends_with("sleep 86401")).unwrap());
        let at = |s: &str, pid: i32| row_pids(s).iter().position(|p| *p == pid);
        assert!(at(&s, pool) < at(&s, long), "{w}x{h}: oldest first:\n{s}");

        // In the tree, inverted: siblings youngest first.
        a.t.keys(&["I"]);
        let s =
            a.t.wait_for("AGE inverted", |s| s.contains("sorted by AGE"));
        assert!(w < 200 || header(&s).contains("AGE▼"), "{w}x{h}: {s}");
        assert!(s.contains("sorted by AGE, youngest first"), "{w}x{h}: {s}");
        assert!(at(&s, long) < at(&s, pool), "{w}x{h}: youngest first:\n{s}");
        assert!(
            s.contains("├─") || s.contains("└─"),
            "{w}x{h}: a tree:\n{s}"
        );

        // The flat list: every process, no tree drawing, youngest first.
        a.t.keys(&["t"]);
        // The whole frame: tmux may show its title line before its last rows.
        let s = a.t.wait_for("the flat list", |s| {
            s.contains(" · flat") && !s.contains("├─") && !s.contains("└─")
        });
        assert!(!s.contains("├─") && !s.contains("└─"), "{w}x{h}:\n{s}");
        let pids = row_pids(&s);
        assert_eq!(pids.len(), 5, "{w}x{h}: every process:\n{s}");
        let starts: Vec<u64> = pids
            .iter()
            .map(|p| Identity::of(*p).unwrap().start_time)
            .collect();
        assert!(
            starts.windows(2).all(|w| w[0] >= w[1]),
            "{w}x{h}: not youngest first: {starts:?}\n{s}"
        );

        for (keys, says) in [
            (&[">"][..], "sorted by CPU%, largest first"),
            (&["<"][..], "sorted by AGE, oldest first"),
            (
                &["F6", "Down", "Enter"][..],
                "sorted by CPU%, largest first",
            ),
            (&["M"][..], "sorted by RSS, largest first"),
            (&["T"][..], "sorted by AGE, oldest first"),
            (&["P"][..], "sorted by CPU%, largest first"),
            (&["I"][..], "sorted by CPU%, smallest first"),
        ] {
            a.t.keys(keys);
            let s = a.t.wait_for(says, |s| s.contains(says));
            let title = says.split(' ').nth(2).unwrap().trim_end_matches(',');
            let arrow = if says.contains("largest") || says.contains("youngest") {
                "▼"
            } else {
                "▲"
            };
            assert!(
                (w < 200 && title == "AGE") || header(&s).contains(&format!("{title}{arrow}")),
                "{w}x{h} {keys:?}: the header does not mark {title}{arrow}:\n{s}"
            );
        }
        // Back to the tree.
        a.t.keys(&["F5"]);
        a.t.wait_for("the tree again", |s| {
            !s.contains(" · flat") && (s.contains("├─") || s.contains("└─"))
        });
        a.finish();
    }
}

/// The confirmation box's text, its lines joined (a question wraps inside the box).
fn boxed(screen: &str) -> String {
    screen
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            Some(l.strip_prefix('│')?.strip_suffix('│')?.trim().to_string())
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Waits for the confirmation box to hold every one of `parts` (a screen caught while the
/// dashboard draws the box may have its title and not yet its lines); fails, with the screen,
/// if it never does.
fn wait_confirmation(t: &Tmux, what: &str, parts: &[&str]) -> String {
    t.wait_for(what, |s| {
        s.contains(" confirm ") && parts.iter().all(|p| boxed(s).contains(p))
    })
}

/// The sleeps' pids on screen, top to bottom (rows ending in `sleep 86400`).
fn sleep_pids(screen: &str) -> Vec<i32> {
    screen
        .lines()
        .filter(|l| l.trim_end().ends_with("sleep 86400"))
        .map(row_pid)
        .collect()
}

/// The search, at 80x24 and 200x60: `F3` opens its prompt in the footer, the cursor goes to
/// the first match and no row is hidden; `n` and `N` go to the next and previous match, the
/// footer counting them; the signal menu opened there names the match.
#[test]
fn search_moves_the_cursor_and_hides_nothing() {
    if tmux_missing() {
        return;
    }
    for (w, h) in [(80u16, 24u16), (200, 60)] {
        let a = Attached::start(&format!("search{w}"), w, h);
        let s = a.t.wait_for("both sleeps", |s| sleep_pids(s).len() == 2);
        let sleeps = sleep_pids(&s);
        a.t.keys(&["F3"]);
        a.t.text("86400");
        a.t.wait_for("the search prompt", |s| s.contains("search: 86400▏"));
        // The shell's command line holds both sleeps' arguments: three matches.
        a.t.keys(&["Enter"]);
        let s = a.t.wait_for("the first match", |s| {
            s.contains("search \"86400\": match 1 of 3 · n next · N previous")
        });
        assert_eq!(row_pids(&s).len(), 5, "{w}x{h}: rows hidden:\n{s}");
        a.t.keys(&["n"]);
        a.t.wait_for("the second match", |s| s.contains("match 2 of 3"));
        a.t.keys(&["n"]);
        a.t.wait_for("the third match", |s| s.contains("match 3 of 3"));
        a.t.keys(&["s"]);
        a.t.wait_for("the menu on the second sleep", |s| {
            s.contains(&format!("signal {} (sleep)", sleeps[1]))
        });
        // Escape alone (followed at once by a key, a terminal reads Alt-key).
        a.t.keys(&["Escape"]);
        a.t.wait_for("the menu closed", |s| s.contains("cancelled"));
        a.t.keys(&["N"]);
        a.t.wait_for("back to the second match", |s| s.contains("match 2 of 3"));
        a.t.keys(&["n", "n"]);
        a.t.wait_for("around the end", |s| s.contains("match 1 of 3"));
        a.finish();
    }
}

/// htop's keys, at 80x24 and 200x60: `Space` tags rows (marked `*`, counted in the title) and
/// `F9` signals every tagged one, the confirmation naming each, `9` picking SIGKILL; `15` picks
/// SIGTERM; `?` and `F1` list every key; `F10` quits.
#[test]
fn tags_signal_numbers_help_and_f10() {
    if tmux_missing() {
        return;
    }
    for (w, h) in [(80u16, 24u16), (200, 60)] {
        let a = Attached::start(&format!("tags{w}"), w, h);
        // Whole rows: a screen caught while the dashboard draws may show a row half drawn.
        let lone_row = |s: &str| s.lines().find(|l| l.ends_with("sleep 86401")).map(row_pid);
        let s = a.t.wait_for("both sleeps", |s| {
            sleep_pids(s).len() == 2 && lone_row(s).is_some()
        });
        let sleeps = sleep_pids(&s);
        let ids: Vec<Identity> = sleeps.iter().map(|p| Identity::of(*p).unwrap()).collect();
        let lone = lone_row(&s).unwrap();
        // To the first sleep, then tag both.
        a.t.keys(&["F3"]);
        a.t.text("86400");
        // The shell matches first; n: the first sleep.
        a.t.keys(&["Enter", "n"]);
        a.t.wait_for("the first sleep", |s| s.contains("match 2 of 3"));
        a.t.keys(&["Space"]);
        a.t.wait_for("one tagged", |s| s.contains(" · 1 tagged"));
        a.t.keys(&["Space"]);
        // The title says it before the rows are marked: a screen caught while the dashboard
        // draws may have one and not the other.
        let marked = |s: &str, p: i32| {
            s.lines().any(|l| {
                l.starts_with('*') && l[1..].split_whitespace().next() == Some(&p.to_string())
            })
        };
        a.t.wait_for(&format!("{w}x{h}: two tagged, both marked"), |s| {
            s.contains(" · 2 tagged") && sleeps.iter().all(|p| marked(s, *p))
        });
        a.t.keys(&["F9"]);
        a.t.wait_for("the menu for the tagged", |s| {
            s.contains("signal the 2 tagged processes")
        });
        a.t.keys(&["9", "Enter"]);
        let question = format!(
            "Send SIGKILL to the 2 tagged processes: {} (sleep), {} (sleep)?",
            sleeps[0], sleeps[1]
        );
        wait_confirmation(&a.t, &format!("{w}x{h}: the confirmation"), &[&question]);
        a.t.keys(&["y"]);
        a.t.wait_for("the result", |s| s.contains("sent SIGKILL to 2 processes"));
        for id in ids {
            assert!(wait_gone(id, DEADLINE), "{id} not killed");
        }
        // 15 picks SIGTERM (and n cancels).
        a.t.keys(&["F3"]);
        a.t.text("86401");
        a.t.keys(&["Enter", "F9", "1", "5", "Enter"]);
        a.t.wait_for("SIGTERM by number", |s| {
            s.contains(&format!("Send SIGTERM to {lone} (sleep)?"))
        });
        a.t.keys(&["n"]);
        a.t.wait_for("cancelled", |s| s.contains("cancelled"));
        // The help lists the keys, by ? and by F1.
        for k in ["?", "F1"] {
            a.t.keys(&[k]);
            // All of it at 60 lines; its first lines at 24.
            a.t.wait_for("the help", |s| {
                s.contains(" keys · ")
                    && s.contains("move the cursor")
                    && (h < 60
                        || [
                            "tag or untag",
                            "search:",
                            "only one user's",
                            "flat list",
                            "quit",
                        ]
                        .iter()
                        .all(|t| s.contains(t)))
            });
            a.t.keys(&["Escape"]);
            a.t.wait_for("the help closed", |s| !s.contains(" keys · "));
        }
        // F10 quits.
        a.t.keys(&["F10"]);
        assert!(wait_gone(a.top, DEADLINE), "{w}x{h}: F10 did not quit");
        a.finish();
    }
}

/// `u`, at 80x24 and 200x60: a menu of the users present (every user first); picking one shows
/// only their processes, with their ancestors, named in the title; every user again shows all.
#[test]
fn the_user_filter_picks_from_the_users_present() {
    if tmux_missing() {
        return;
    }
    if common::skip::unless_root("a helper run as nobody needs root") {
        return;
    }
    let config = r#"
[[helper]]
name = "mine"
command = ["sleep", "86404"]

[[helper]]
name = "theirs"
user = "nobody"
command = ["sleep", "86405"]
"#;
    for (w, h) in [(80u16, 24u16), (200, 60)] {
        let a = Attached::start_with(Dir::new("topkeys", &format!("user{w}")), config, w, h);
        a.t.wait_for("both sleeps", |s| {
            s.contains("sleep 86404") && s.contains("sleep 86405")
        });
        a.t.keys(&["u"]);
        let s =
            a.t.wait_for("the user menu", |s| s.contains("show the processes of"));
        assert!(
            s.contains("every user") && s.contains("(root)") && s.contains("(nobody)"),
            "{w}x{h}:\n{s}"
        );
        // Every user, root (0), nobody.
        a.t.keys(&["j", "j", "Enter"]);
        let s = a.t.wait_for("nobody's processes", |s| {
            s.contains("user uid 65534 (nobody)")
        });
        assert!(
            s.contains("sleep 86405") && !s.contains("sleep 86404"),
            "{w}x{h}:\n{s}"
        );
        a.t.keys(&["u"]);
        a.t.wait_for("the user menu", |s| s.contains("show the processes of"));
        a.t.keys(&["k", "k", "Enter"]);
        a.t.wait_for("every user's again", |s| {
            s.contains("sleep 86404") && s.contains("sleep 86405") && !s.contains("user uid")
        });
        a.finish();
    }
}

/// The line the events pane's title is on, if shown (` events ` or ` events of NAME `).
fn events_title(screen: &str) -> Option<usize> {
    screen.lines().position(|l| l.starts_with(" events "))
}

/// `--keys htop`, attached: `e` is htop's details there, so `b` (free in both keymaps) hides
/// and shows the events pane; the status line says so at first, and so does the pane's title.
#[test]
fn htop_keys_hide_and_show_the_events_pane_with_b() {
    if tmux_missing() {
        return;
    }
    let dir = Dir::new("topkeys", "htop-events");
    let a = Attached::start_args(dir, &config(), (120, 40), "--keys htop");
    let s =
        a.t.wait_for("the events pane", |s| events_title(s).is_some());
    assert!(s.contains("b events"), "the status line names b:\n{s}");
    assert!(s.contains(" b hides "), "the pane's title names b:\n{s}");
    a.t.keys(&["b"]);
    let s = a.t.wait_for("the pane hidden", |s| {
        s.contains("events pane hidden; b shows it")
    });
    assert!(events_title(&s).is_none(), "still shown:\n{s}");
    a.t.keys(&["b"]);
    a.t.wait_for("the pane shown", |s| {
        s.contains("events pane shown; b hides it") && events_title(s).is_some()
    });
    // `e` stays htop's: the details, the pane as it is.
    a.t.keys(&["e"]);
    let s = a.t.wait_for("the details", |s| s.contains("open files"));
    assert!(!s.contains("events pane hidden"), "{s}");
    a.t.keys(&["Escape"]);
    a.t.wait_for("the details closed", |s| {
        !s.contains("open files") && events_title(s).is_some()
    });
    a.finish();
}

/// The events pane, at 80x24 and 200x60: `e` hides and shows it; `]` and `[` make it larger
/// and smaller; `H` on a helper's row shows its events alone, again every helper's; `Tab` then
/// `↑` scrolls it back and `End` to the newest; the wheel over it scrolls it too; the log pane
/// (`l`) opens beside it.
#[test]
fn the_events_pane_hides_resizes_scrolls_and_filters() {
    if tmux_missing() {
        return;
    }
    for (w, h) in [(80u16, 24u16), (200, 60)] {
        let a = Attached::start(&format!("events{w}"), w, h);
        let s = a.t.wait_for("the failed launch's event", |s| {
            helper_row(s, "worker-pool").is_some() && s.contains("could not be launched")
        });
        let top0 = events_title(&s).unwrap_or_else(|| panic!("{w}x{h}: no events pane:\n{s}"));

        a.t.keys(&["e"]);
        let s =
            a.t.wait_for("the pane hidden", |s| s.contains("events pane hidden"));
        assert!(events_title(&s).is_none(), "{w}x{h}: still shown:\n{s}");
        a.t.keys(&["e"]);
        a.t.wait_for("the pane shown", |s| {
            s.contains("events pane shown") && events_title(s) == Some(top0)
        });

        // Larger, then smaller: its title moves up, then down.
        a.t.keys(&["]"]);
        a.t.wait_for("the pane larger", |s| {
            events_title(s).is_some_and(|y| y < top0)
        });
        for _ in 0..6 {
            a.t.keys(&["["]);
        }
        let s = a.t.wait_for("the pane smaller", |s| {
            s.contains("events pane: 1 line;") && events_title(s).is_some_and(|y| y > top0)
        });
        let small = events_title(&s).unwrap();

        // One line shown: the newest; scrolled back, an older one.
        a.t.keys(&["Tab"]);
        a.t.wait_for("the pane focused", |s| s.contains("events pane: ↑ ↓"));
        a.t.keys(&["Up"]);
        let s =
            a.t.wait_for("scrolled back", |s| s.contains("scrolled back 1"));
        assert!(
            !s.lines()
                .nth(small + 1)
                .unwrap()
                .contains("could not be launched"),
            "{w}x{h}: the newest still shown:\n{s}"
        );
        a.t.keys(&["End"]);
        a.t.wait_for("the newest again", |s| {
            !s.contains("scrolled back")
                && s.lines()
                    .nth(small + 1)
                    .unwrap()
                    .contains("could not be launched")
        });
        // The wheel over the pane scrolls it.
        a.t.text(&format!("\x1b[<64;5;{}M", small + 2));
        a.t.wait_for("scrolled back by the wheel", |s| {
            s.contains("scrolled back 3")
        });
        a.t.keys(&["End", "Tab"]);

        // Only worker-pool's events: the line of the missing helper goes.
        a.t.keys(&["g", "j"]);
        a.t.keys(&["]", "]", "]", "]"]);
        a.t.keys(&["H"]);
        let s = a.t.wait_for("worker-pool's events", |s| {
            s.contains("events of worker-pool")
                && s.contains("only the events of helper worker-pool")
        });
        let from = events_title(&s).unwrap();
        let pane: Vec<&str> = s.lines().skip(from + 1).collect();
        assert!(
            pane.iter().any(|l| l.contains("worker-pool[")),
            "{w}x{h}: no worker-pool line:\n{s}"
        );
        assert!(
            !pane
                .iter()
                .any(|l| l.contains("missing could not") || l.contains("helper-name-longer")),
            "{w}x{h}: another helper's line:\n{s}"
        );
        a.t.keys(&["H"]);
        a.t.wait_for("every helper's events", |s| {
            s.contains("every helper's events") && !s.contains("events of worker-pool")
        });

        // The log pane beside it.
        a.t.keys(&["l"]);
        a.t.wait_for("both panes", |s| {
            s.contains("logs of worker-pool") && events_title(s).is_some()
        });
        a.t.keys(&["l"]);
        a.finish();
    }
}

/// A column sorts in the order it starts in, whatever the order before: `>` from `AGE▲` gives
/// CPU% largest first, as htop; `F6` is a menu of the columns, each with the order it starts
/// in; a text column's order is said in its own words (A to Z).
#[test]
fn each_column_starts_in_its_own_order_and_f6_is_a_menu() {
    if tmux_missing() {
        return;
    }
    let a = Attached::start("sort-menu", 200, 60);
    a.t.wait_for("both helpers' rows", |s| {
        helper_row(s, "worker-pool").is_some() && s.contains("86401")
    });
    a.t.keys(&[">"]);
    let s =
        a.t.wait_for("CPU% sorted", |s| s.contains("sorted by CPU%"));
    assert!(s.contains("sorted by CPU%, largest first"), "{s}");
    assert!(header(&s).contains("CPU%▼"), "{s}");
    a.t.keys(&["F6"]);
    let s = a.t.wait_for("the sort menu", |s| s.contains(" sort by "));
    assert!(
        s.lines()
            .any(|l| l.contains("▼ CPU%") && l.contains("largest first")),
        "{s}"
    );
    assert!(
        s.lines()
            .any(|l| l.contains("AGE") && l.contains("oldest first")),
        "{s}"
    );
    a.t.keys(&["End", "Enter"]);
    let s =
        a.t.wait_for("COMMAND sorted", |s| s.contains("sorted by COMMAND"));
    assert!(s.contains("sorted by COMMAND, A to Z"), "{s}");
    assert!(!s.contains(" sort by "), "the menu closed:\n{s}");
    a.t.keys(&["I"]);
    a.t.wait_for("COMMAND inverted", |s| {
        s.contains("sorted by COMMAND, Z to A")
    });
    a.finish();
}
