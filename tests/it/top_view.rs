//! The dashboard without a terminal: rendering on ratatui's `TestBackend` at two sizes from
//! fixed samples (hostile names, every anomaly, a supervised tree with events), and key handling
//! through the app state (collapse, filter, stable cursor, pause, follow, the signal picker).
//! Signals go to a real process the test starts.

use std::sync::Arc;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use foster::process::identity::Identity;
use foster::supervision::output::{Line, Stream};
use foster::top::app::{App, Dialog, Effect, LogItem, LogSource, SIGNALS, errno_text};
use foster::top::model::{
    Adoption, EventLine, ProcInfo, RESTART_LOOP, Sample, Supervision, Tracker, ZOMBIE_GRACE_SECS,
};
use foster::top::ui;
use nix::errno::Errno;
use nix::sys::signal::Signal;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

const HZ: u64 = 100;

fn id(pid: i32) -> Identity {
    Identity {
        pid,
        start_time: pid as u64 * 10,
    }
}

fn proc(pid: i32, ppid: i32, comm: &[u8], args: &[&[u8]]) -> ProcInfo {
    ProcInfo {
        id: id(pid),
        parent: (ppid > 0).then(|| id(ppid)),
        ppid,
        state: b'S',
        cpu_ticks: 0,
        rss_bytes: 4096 * pid as u64,
        comm: comm.to_vec(),
        cmdline: Arc::from(args.iter().map(|a| a.to_vec()).collect::<Vec<_>>()),
        supervision: None,
        uid: None,
        ext: Default::default(),
    }
}

fn sup(role: &str, generation: u32, policy: &str) -> Supervision {
    Supervision {
        role: role.into(),
        generation,
        policy: policy.into(),
        expected_parent: None,
        adoption: Adoption::None,
        recent_restarts: 0,
        ..Supervision::default()
    }
}

/// init 1 → foster 100 → db 200 (→ writer 201, zombie 202), worker 300 (restart loop), hostile
/// 400; and under init: 500 (expected parent 100: wrong parent), 600 (adopted by 1, expected
/// 100). `tick` moves the clock and the CPU counters.
fn supervised(tick: u64) -> Sample {
    let mut procs = vec![
        proc(1, 0, b"init", &[b"/sbin/init"]),
        proc(100, 1, b"foster", &[b"foster", b"run", b"app.toml"]),
        proc(200, 100, b"postgres", &[b"postgres", b"-D", b"/var/lib/db"]),
        proc(201, 200, b"postgres", &[b"postgres: writer"]),
        proc(202, 200, b"sh", &[]),
        proc(300, 100, b"worker", &[b"worker", b"--queue", b"jobs"]),
        proc(
            400,
            100,
            b"\x1b]0;owned\x07",
            &[b"evil\nline", b"\xff\xfe", b"\x1b[2J\x1b[H"],
        ),
        proc(500, 1, b"stray", &[b"stray"]),
        proc(600, 1, b"orphan", &[b"orphan"]),
    ];
    procs[4].state = b'Z';
    procs[2].cpu_ticks = 1000 + tick / 4; // 25% of a core
    procs[3].cpu_ticks = 500 + tick / 10; // 10%
    let mut s = sup("db", 0, "TERM→exit");
    procs[2].supervision = Some(s.clone());
    s.generation = 1;
    s.expected_parent = Some(id(200));
    procs[3].supervision = Some(s.clone());
    procs[4].supervision = Some(Supervision {
        expected_parent: Some(id(200)),
        ..s.clone()
    });
    procs[5].supervision = Some(Supervision {
        recent_restarts: RESTART_LOOP + 2,
        ..sup("worker", 0, "KILL→exit")
    });
    procs[6].supervision = Some(sup("\x1b[31mred", 0, "TERM→exit"));
    procs[7].supervision = Some(Supervision {
        expected_parent: Some(id(100)),
        ..sup("stray", 1, "TERM→exit")
    });
    procs[8].supervision = Some(Supervision {
        adoption: Adoption::Unexpected {
            by: id(1),
            expected: Some(id(100)),
        },
        ..sup("orphan", 1, "HUP→notify")
    });
    Sample {
        origin: "attached to /run/app.sock".into(),
        now_ticks: 100_000 + tick,
        hz: HZ,
        supervised: true,
        procs,
        events: vec![
            EventLine {
                at_ticks: 99_000,
                wall_ms: 0,
                text: b"spawned db 200".to_vec(),
                helper: None,
            },
            EventLine {
                at_ticks: 99_500,
                wall_ms: 0,
                text: b"exited \x1b]0;x\x07 400 status 1\nforged line".to_vec(),
                helper: None,
            },
            EventLine {
                at_ticks: 99_900,
                wall_ms: 0,
                text: b"restarted worker 300 (5 in 60s)".to_vec(),
                helper: None,
            },
        ],
        helpers: Vec::new(),
    }
}

/// The same tree as `/proc` would show it: no supervision, no events.
fn standalone(tick: u64) -> Sample {
    let mut s = supervised(tick);
    s.supervised = false;
    s.origin = "whole system".into();
    s.events.clear();
    for p in &mut s.procs {
        p.supervision = None;
    }
    s
}

/// An app fed two readings `ZOMBIE_GRACE_SECS` apart, so rates and the zombie are known.
fn app_with(make: fn(u64) -> Sample) -> App {
    let mut app = App::new(None, "1s".into());
    let mut t = Tracker::new();
    app.set_model(t.update(make(0)));
    app.set_model(t.update(make(ZOMBIE_GRACE_SECS * HZ)));
    app
}

fn render(app: &mut App, w: u16, h: u16) -> Vec<String> {
    let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
    term.draw(|f| ui::draw(f, app)).unwrap();
    let buf = term.backend().buffer().clone();
    let lines: Vec<String> = (0..h)
        .map(|y| {
            (0..w)
                .map(|x| buf[(x, y)].symbol().to_string())
                .collect::<String>()
        })
        .collect();
    for l in &lines {
        assert!(
            !l.chars().any(|c| c.is_control()),
            "a control character reached the screen: {l:?}"
        );
    }
    eprintln!("--- {w}x{h}\n{}", lines.join("\n"));
    lines
}

fn screen(lines: &[String]) -> String {
    lines.join("\n")
}

fn row_of(lines: &[String], pid: i32) -> &str {
    let pat = format!(" {pid} ");
    lines
        .iter()
        .find(|l| l.get(..10).is_some_and(|head| head.contains(&pat)))
        .unwrap_or_else(|| panic!("no row for pid {pid} in\n{}", screen(lines)))
}

fn key(c: KeyCode) -> KeyEvent {
    KeyEvent::new(c, KeyModifiers::NONE)
}

fn press(app: &mut App, keys: &str) -> Vec<Effect> {
    let mut out = Vec::new();
    for ch in keys.chars() {
        out.extend(app.on_key(key(KeyCode::Char(ch))));
    }
    out
}

fn go_to(app: &mut App, pid: i32) {
    press(app, "g");
    for _ in 0..app.rows.len() {
        if app.cursor.map(|c| c.pid) == Some(pid) {
            return;
        }
        press(app, "j");
    }
    panic!("pid {pid} is not visible");
}

fn pids(app: &App) -> Vec<i32> {
    app.rows.iter().map(|r| r.id.pid).collect()
}

#[test]
fn wide_supervised_screen_shows_every_column_anomaly_and_event() {
    let mut app = app_with(supervised);
    let lines = render(&mut app, 120, 30);
    let all = screen(&lines);
    for title in [
        "PID", "ROLE", "GEN", "POLICY", "AGE", "CPU%", "RSS", "COMMAND",
    ] {
        assert!(
            lines[1].contains(title),
            "header lacks {title}: {}",
            lines[1]
        );
    }
    // Every anomaly, with the zombie's parent named.
    assert!(row_of(&lines, 202).contains("not reaped by 200 (postgres) for ≥3s"));
    assert!(row_of(&lines, 300).contains("restart loop (5)"));
    assert!(row_of(&lines, 500).contains("parent 1, expected 100"));
    assert!(row_of(&lines, 600).contains("adopted by 1, expected 100"));
    for pid in [202, 300, 500, 600] {
        assert!(row_of(&lines, pid).starts_with('!'), "{pid} not flagged");
    }
    assert!(
        row_of(&lines, 201).starts_with(' '),
        "a normal row is flagged"
    );
    assert!(lines[0].contains("4 anomalies"), "title: {}", lines[0]);
    // Roles, generations, policies and rates.
    let db = row_of(&lines, 200);
    assert!(
        db.contains("db") && db.contains("TERM→exit") && db.contains("25.0"),
        "{db}"
    );
    assert!(row_of(&lines, 201).contains("10.0"));
    // Hostile names: escaped, never raw.
    let evil = row_of(&lines, 400);
    assert!(evil.contains(r"evil\nline \xff\xfe \e[2J\e[H"), "{evil}");
    assert!(evil.contains(r"\e[31mred"), "role not escaped: {evil}");
    // Events pane, escaped, newest last.
    assert!(all.contains("events"));
    assert!(
        all.contains(r"exited \e]0;x\x07 400 status 1\nforged line"),
        "{all}"
    );
    assert!(!all.contains("forged line\n"));
    // Tree drawing.
    assert!(
        row_of(&lines, 201).contains("│ ├─ postgres: writer"),
        "{}",
        row_of(&lines, 201)
    );
}

#[test]
fn narrow_screen_drops_columns_and_never_wraps() {
    let mut app = app_with(supervised);
    // Columns as wide as their content: at 60 the role still fits, the policy does not; at 40
    // the role goes too.
    let lines = render(&mut app, 40, 15);
    assert!(!lines[1].contains("ROLE"), "{}", lines[1]);
    let lines = render(&mut app, 60, 15);
    assert!(!lines[1].contains("POLICY"), "{}", lines[1]);
    assert!(
        lines[1].contains("PID") && lines[1].contains("COMMAND"),
        "{}",
        lines[1]
    );
    // One line per process: each visible row starts with its flag and pid.
    let table: Vec<&String> = lines[2..]
        .iter()
        .take_while(|l| {
            l.trim_start()
                .starts_with(|c: char| c == '!' || c.is_ascii_digit())
        })
        .collect();
    assert!(table.len() >= 5, "{}", screen(&lines));
    // The anomaly of the cursor's row is spelled out in the status line even when the row is cut.
    go_to(&mut app, 202);
    let lines = render(&mut app, 60, 15);
    assert!(row_of(&lines, 202).starts_with('!'));
    // The status line, above the key hint.
    let status = &lines[lines.len() - 2];
    assert!(lines.last().unwrap().starts_with("q quit"));
    assert!(
        status.contains("202: a zombie for at least 3s (seen since; started "),
        "{status}"
    );
}

#[test]
fn standalone_screens_at_both_sizes() {
    for (w, h) in [(120, 30), (60, 15)] {
        let mut app = app_with(standalone);
        let lines = render(&mut app, w, h);
        assert!(
            !lines[1].contains("ROLE") && !lines[1].contains("POLICY"),
            "{}",
            lines[1]
        );
        assert!(
            !screen(&lines).contains(" events "),
            "no events pane standalone"
        );
        assert!(lines[0].contains("whole system") && lines[0].contains("9 processes"));
        // Standalone knows zombies only: one anomaly.
        assert!(lines[0].contains("1 anomaly"), "{}", lines[0]);
        assert!(row_of(&lines, 202).starts_with('!'));
        assert!(row_of(&lines, 400).contains(r"evil\nline"));
    }
}

#[test]
fn dialogs_render_at_both_sizes() {
    for (w, h) in [(120, 30), (60, 15)] {
        let mut app = app_with(supervised);
        press(&mut app, "?");
        let all = screen(&render(&mut app, w, h));
        assert!(all.contains("keys") && all.contains("collapse"), "{all}");
        app.on_key(key(KeyCode::Esc));
        go_to(&mut app, 400);
        press(&mut app, "s");
        let all = screen(&render(&mut app, w, h));
        assert!(all.contains(r"signal 400 (\e]0;owned\x07)"), "{all}");
        assert!(all.contains("SIGTERM"), "{all}");
        app.on_key(key(KeyCode::Enter));
        let all = screen(&render(&mut app, w, h));
        assert!(
            all.contains(r"Send SIGTERM to 400 (\e]0;owned\x07)?"),
            "{all}"
        );
    }
}

#[test]
fn collapse_sums_the_subtree_and_expands_again() {
    let mut app = app_with(supervised);
    go_to(&mut app, 200);
    app.on_key(key(KeyCode::Left));
    assert!(!pids(&app).contains(&201) && !pids(&app).contains(&202));
    let row = app.cursor_row().unwrap().clone();
    assert!(row.collapsed && row.hidden == 2);
    assert_eq!(row[ui::Column::Cpu], "35.0", "25% + 10% summed");
    assert_eq!(row.hidden_anomalies, 1, "the hidden zombie still counts");
    let lines = render(&mut app, 120, 30);
    assert!(row_of(&lines, 200).contains("(+2)") && row_of(&lines, 200).contains("1 inside"));
    // Left again goes to the parent; Right expands; - and + collapse and expand the subtree.
    app.on_key(key(KeyCode::Left));
    assert_eq!(app.cursor.unwrap().pid, 100);
    go_to(&mut app, 200);
    app.on_key(key(KeyCode::Right));
    assert!(pids(&app).contains(&201));
    press(&mut app, "-");
    assert!(!pids(&app).contains(&201));
    press(&mut app, "+");
    assert!(pids(&app).contains(&201));
    // Collapse all, expand all.
    press(&mut app, "C");
    assert_eq!(pids(&app), vec![1], "only the root remains");
    press(&mut app, "E");
    assert_eq!(app.rows.len(), 9);
}

#[test]
fn collapse_depth_starts_collapsed_and_keeps_user_choices() {
    let mut app = App::new(Some(2), "1s".into());
    let mut t = Tracker::new();
    app.set_model(t.update(supervised(0)));
    assert_eq!(pids(&app), vec![1, 100, 200, 300, 400, 500, 600]);
    go_to(&mut app, 200);
    app.on_key(key(KeyCode::Right));
    app.set_model(t.update(supervised(100)));
    assert!(
        pids(&app).contains(&201),
        "a user's expansion survives the next reading"
    );
}

#[test]
fn filter_keeps_ancestors_and_descendants() {
    let mut app = app_with(supervised);
    press(&mut app, "/");
    press(&mut app, "postgres -d");
    app.on_key(key(KeyCode::Enter));
    // 200 matches; its ancestors 1 and 100 and descendants 201, 202 stay; others go.
    assert_eq!(pids(&app), vec![1, 100, 200, 201, 202]);
    assert!(app.rows.iter().find(|r| r.id.pid == 200).unwrap().matched);
    assert!(!app.rows.iter().find(|r| r.id.pid == 201).unwrap().matched);
    assert_eq!(
        app.cursor.unwrap().pid,
        200,
        "the cursor lands on the match"
    );
    // Collapse all cannot hide the match.
    press(&mut app, "-");
    assert!(pids(&app).contains(&200));
    press(&mut app, "+");
    // But collapsing one row on purpose does, though its descendants match too.
    app.on_key(key(KeyCode::Left));
    assert_eq!(pids(&app), vec![1, 100, 200]);
    assert!(app.rows[2].collapsed && app.rows[2].hidden == 2);
    app.on_key(key(KeyCode::Right));
    assert_eq!(pids(&app), vec![1, 100, 200, 201, 202]);
    // By pid, by role (Esc first: `/` reopens with the current filter).
    app.on_key(key(KeyCode::Esc));
    press(&mut app, "/600");
    app.on_key(key(KeyCode::Enter));
    assert_eq!(pids(&app), vec![1, 600]);
    app.on_key(key(KeyCode::Esc));
    press(&mut app, "/worker");
    assert_eq!(pids(&app), vec![1, 100, 300]);
    app.on_key(key(KeyCode::Esc));
    assert_eq!(app.rows.len(), 9, "Esc clears the filter");
    press(&mut app, "/no such thing");
    app.on_key(key(KeyCode::Enter));
    assert!(app.rows.is_empty());
    assert!(screen(&render(&mut app, 60, 15)).contains("no process matches the filter"));
}

#[test]
fn cursor_stays_on_its_process_when_rows_appear_above() {
    let mut app = app_with(standalone);
    go_to(&mut app, 300);
    let before = app.cursor_index().unwrap();
    let mut t = Tracker::new();
    let mut s = standalone(0);
    // Three new processes under 100, older than 300 in tree order (lower start time).
    for pid in [150, 151, 152] {
        s.procs.push(proc(pid, 100, b"new", &[b"new"]));
    }
    app.set_model(t.update(s.clone()));
    assert_eq!(app.cursor.unwrap().pid, 300);
    assert_eq!(app.cursor_index().unwrap(), before + 3);
    // Reparented elsewhere: the cursor follows the identity.
    s.procs.iter_mut().find(|p| p.id.pid == 300).unwrap().parent = Some(id(1));
    app.set_model(t.update(s.clone()));
    assert_eq!(app.cursor.unwrap().pid, 300);
    // Gone: the cursor stays at the same place in the list.
    let at = app.cursor_index().unwrap();
    s.procs.retain(|p| p.id.pid != 300);
    app.set_model(t.update(s));
    assert_eq!(app.cursor_index().unwrap(), at.min(app.rows.len() - 1));
}

#[test]
fn pause_keeps_exited_processes_until_resumed() {
    let mut app = app_with(standalone);
    let mut t = Tracker::new();
    press(&mut app, "p");
    assert!(app.paused);
    let mut s = standalone(0);
    s.procs.retain(|p| p.id.pid != 201 && p.id.pid != 300);
    app.set_model(t.update(s.clone()));
    app.set_model(t.update(s.clone()));
    for pid in [201, 300] {
        let r = app
            .rows
            .iter()
            .find(|r| r.id.pid == pid)
            .expect("kept while paused");
        assert!(r.exited && r[ui::Column::State] == "exit");
    }
    assert_eq!(
        app.rows.iter().find(|r| r.id.pid == 201).unwrap().depth,
        3,
        "under its parent"
    );
    let lines = render(&mut app, 120, 30);
    assert!(lines[0].contains("PAUSED"));
    assert!(row_of(&lines, 300).contains("exit"));
    // Exited processes cannot be signalled.
    go_to(&mut app, 300);
    press(&mut app, "s");
    assert_eq!(app.dialog, Dialog::None);
    assert!(app.message.as_ref().unwrap().contains("has exited"));
    let effects = press(&mut app, "p");
    assert_eq!(effects, vec![Effect::Refresh]);
    assert!(!pids(&app).contains(&201) && !pids(&app).contains(&300));
}

#[test]
fn follow_keeps_the_process_in_view() {
    let mut app = app_with(standalone);
    go_to(&mut app, 201);
    press(&mut app, "f");
    assert_eq!(app.following.unwrap().pid, 201);
    // Collapse all: the followed process's ancestors stay open.
    press(&mut app, "-");
    assert!(pids(&app).contains(&201));
    assert_eq!(app.cursor.unwrap().pid, 201);
    // A small page: the view scrolls to keep it.
    app.set_page(2);
    assert!(app.window().iter().any(|r| r.id.pid == 201));
    // Moving away turns follow off.
    press(&mut app, "k");
    assert!(app.following.is_none());
}

#[test]
fn signal_picker_flow_and_subtree() {
    let mut app = app_with(standalone);
    go_to(&mut app, 200);
    press(&mut app, "s");
    let Dialog::Signals { selected, .. } = app.dialog.clone() else {
        panic!("{:?}", app.dialog)
    };
    assert_eq!(
        SIGNALS[selected],
        Signal::SIGTERM,
        "the picker starts on TERM"
    );
    app.on_key(key(KeyCode::Up)); // SIGALRM
    app.on_key(key(KeyCode::Down)); // back to SIGTERM
    app.on_key(key(KeyCode::Down)); // SIGSTKFLT
    app.on_key(key(KeyCode::Down)); // SIGCHLD
    app.on_key(key(KeyCode::Enter));
    assert!(matches!(
        app.dialog,
        Dialog::Confirm {
            signal: Signal::SIGCHLD,
            count: 1,
            ..
        }
    ));
    // Anything but y cancels.
    assert!(press(&mut app, "n").is_empty());
    assert_eq!(app.message.as_deref(), Some("cancelled"));
    press(&mut app, "s");
    app.on_key(key(KeyCode::Enter));
    let effects = press(&mut app, "y");
    assert_eq!(
        effects,
        vec![Effect::Signal {
            targets: vec![(id(200), b"postgres".to_vec())],
            signal: Signal::SIGTERM
        }]
    );
    // A whole subtree, parents first.
    go_to(&mut app, 100);
    press(&mut app, "S");
    app.on_key(key(KeyCode::Enter));
    assert!(matches!(app.dialog, Dialog::Confirm { count: 6, .. }));
    let effects = press(&mut app, "y");
    let Effect::Signal { targets, .. } = &effects[0] else {
        panic!("{effects:?}")
    };
    let order: Vec<i32> = targets.iter().map(|t| t.0.pid).collect();
    assert_eq!(order, vec![100, 200, 201, 202, 300, 400]);
    // Results and errors, errno named.
    app.signal_done(
        Signal::SIGTERM,
        &[(id(200), b"postgres".to_vec(), Err(Errno::EPERM))],
    );
    assert_eq!(
        app.message.as_deref(),
        Some("SIGTERM to 200 (postgres) failed: EPERM: operation not permitted")
    );
    app.signal_done(
        Signal::SIGKILL,
        &[
            (id(1), b"a".to_vec(), Ok(())),
            (id(2), b"\x1bb".to_vec(), Err(Errno::ESRCH)),
        ],
    );
    assert_eq!(
        app.message.as_deref(),
        Some(r"sent SIGKILL to 1 of 2 processes; 2 (\eb) failed: ESRCH: no such process")
    );
    assert!(screen(&render(&mut app, 120, 30)).contains("ESRCH: no such process"));
    assert_eq!(errno_text(Errno::EACCES), "EACCES: permission denied");
}

#[test]
fn signals_reach_the_process_by_identity_only() {
    let mut child = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    let me = Identity::of(pid).unwrap();
    // The right pid with another start time is another process: refused, nothing sent.
    let imposter = Identity {
        pid,
        start_time: me.start_time + 1,
    };
    assert_eq!(
        foster::top::send_signal(imposter, Signal::SIGKILL),
        Err(Errno::ESRCH)
    );
    assert!(me.is_alive());
    foster::top::send_signal(me, Signal::SIGTERM).unwrap();
    let status = child.wait().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGTERM));
    assert_eq!(
        foster::top::send_signal(me, Signal::SIGTERM),
        Err(Errno::ESRCH),
        "reaped: gone"
    );
}

#[test]
fn quit_keys() {
    let mut app = app_with(standalone);
    assert_eq!(press(&mut app, "q"), vec![Effect::Quit]);
    assert_eq!(
        app.on_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)),
        vec![Effect::Quit]
    );
    assert_eq!(app.on_key(key(KeyCode::F(10))), vec![Effect::Quit]);
}

#[test]
fn an_unchanged_reading_leaves_the_screen_unchanged() {
    let mut app = app_with(standalone);
    let mut t = Tracker::new();
    app.set_model(t.update(standalone(0)));
    app.set_model(t.update(standalone(0)));
    let before = app.screen();
    app.set_model(t.update(standalone(0)));
    assert_eq!(app.screen(), before, "same reading: nothing to redraw");
    let mut s = standalone(0);
    s.procs[1].rss_bytes += 1 << 20;
    app.set_model(t.update(s));
    assert_ne!(app.screen(), before, "a visible change: redraw");
}

/// A shell that, once told (`start_its_sleep`), starts `sleep SECS`, says its pid, and waits
/// for it.
fn shell_that_starts_a_sleep(secs: u32) -> std::process::Child {
    use std::process::{Command, Stdio};
    Command::new("sh")
        .args(["-c", &format!("read x; sleep {secs} & echo $!; wait")])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Tells the shell to start its sleep and returns the sleep's pid (the shell says it once the
/// sleep is started: the barrier).
fn start_its_sleep(sh: &mut std::process::Child) -> i32 {
    use std::io::Write;
    sh.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(sh.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    line.trim().parse().unwrap()
}

/// Kills the sleep; the shell reaps it and exits, reaped here.
fn end_its_sleep(sh: &mut std::process::Child, child: i32) {
    crate::common::send(child, libc::SIGKILL);
    let status = sh.wait().unwrap();
    assert!(
        status.success(),
        "the shell reaped its sleep and exited: {status:?}"
    );
}

/// The standalone `--root` source sees a process born in the subtree after the first reading
/// (through fork notifications as root, else by listing `/proc`), and loses it when it exits.
#[test]
fn root_source_follows_births_and_deaths() {
    use foster::top::model::Source;
    let mut sh = shell_that_starts_a_sleep(1004);
    let mut src =
        foster::top::standalone::ProcSource::new(Some(sh.id() as i32), Default::default()).unwrap();
    let first = src.sample().unwrap();
    assert_eq!(first.procs.len(), 1, "only the shell: {:?}", first.procs);
    let child = start_its_sleep(&mut sh);
    let second = src.sample().unwrap();
    let kid = second
        .procs
        .iter()
        .find(|p| p.id.pid == child)
        .expect("the newborn is seen");
    assert_eq!(kid.parent.map(|p| p.pid), Some(sh.id() as i32));
    end_its_sleep(&mut sh, child);
    let e = src.sample().unwrap_err().to_string();
    assert!(e.contains("has exited"), "{e}");
}

/// The whole-system standalone source sees a process born after its first reading (through
/// fork notifications as root, without listing `/proc`; else by listing it), sees it asleep
/// under its parent in the readings after (its reading kept while it does not run), and loses
/// it once it has exited and been reaped.
#[test]
fn whole_system_source_follows_births_and_deaths() {
    use foster::top::model::Source;
    let mut sh = shell_that_starts_a_sleep(1005);
    let shell = sh.id() as i32;
    let mut src = foster::top::standalone::ProcSource::new(None, Default::default()).unwrap();
    let first = src.sample().unwrap();
    assert!(first.procs.iter().any(|p| p.id.pid == shell));
    let child = start_its_sleep(&mut sh);
    for _ in 0..3 {
        let s = src.sample().unwrap();
        let kid = s
            .procs
            .iter()
            .find(|p| p.id.pid == child)
            .expect("the newborn is seen");
        assert_eq!(kid.parent.map(|p| p.pid), Some(shell));
    }
    end_its_sleep(&mut sh, child);
    let last = src.sample().unwrap();
    assert!(
        last.procs
            .iter()
            .all(|p| p.id.pid != child && p.id.pid != shell),
        "both gone"
    );
}

/// A reading pushed by an event a few milliseconds after the last one keeps the last CPU rates
/// (too soon for a rate of its own), and the next reading measures from the older baseline.
#[test]
fn a_reading_too_soon_after_the_last_keeps_the_rates() {
    let mut t = Tracker::new();
    t.update(supervised(0));
    let m = t.update(supervised(HZ));
    let db = |m: &foster::top::model::Model| {
        m.nodes
            .values()
            .find(|n| n.info.id.pid == 200)
            .unwrap()
            .cpu_pct
    };
    assert_eq!(db(&m), Some(25.0));
    let soon = t.update(supervised(HZ + 1));
    assert_eq!(db(&soon), Some(25.0), "kept, not blank");
    let later = t.update(supervised(2 * HZ));
    assert_eq!(db(&later), Some(25.0), "measured over the whole second");
}

/// A child of the test's own, killed and reaped on drop (a failing test leaves nothing).
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A dashboard over a real `sleep` of the test's own (standalone `--root` source).
fn app_on_real_sleep() -> (Reaped, App) {
    use foster::top::model::Source;
    let child = Reaped(
        std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap(),
    );
    let mut src =
        foster::top::standalone::ProcSource::new(Some(child.0.id() as i32), Default::default())
            .unwrap();
    let mut app = App::new(None, "1s".into());
    app.set_model(Tracker::new().update(src.sample().unwrap()));
    assert_eq!(pids(&app), vec![child.0.id() as i32]);
    (child, app)
}

/// A key the dashboard does not know says so in the status line (htop's keys that have no
/// counterpart say so); `\` and `F4` filter as in htop, `K` opens the signal
/// menu, where a number picks the signal (`9` SIGKILL, `1` `5` SIGTERM), and the signal picked
/// by number reaches the real process.
#[test]
fn unknown_keys_say_so_and_the_signal_menu_takes_numbers() {
    let (mut child, mut app) = app_on_real_sleep();
    let pid = child.0.id() as i32;
    for (code, says) in [
        (KeyCode::F(8), "F8: foster top does not change priorities"),
        (KeyCode::F(7), "F7: foster top does not change priorities"),
        (KeyCode::Char('z'), "unknown key z"),
        (KeyCode::Insert, "unknown key Insert"),
    ] {
        assert!(app.on_key(key(code)).is_empty());
        let m = app.message.clone().unwrap_or_default();
        assert!(
            m.starts_with(says) && m.ends_with("? lists the keys"),
            "{code:?}: {m}"
        );
        let s = screen(&render(&mut app, 80, 24));
        assert!(s.contains(says), "{code:?} not on screen:\n{s}");
    }
    app.on_key(key(KeyCode::Char('\\')));
    assert!(app.filter_editing, "\\ filters");
    app.on_key(key(KeyCode::Esc));
    app.on_key(key(KeyCode::F(4)));
    assert!(app.filter_editing, "F4 filters");
    app.on_key(key(KeyCode::Esc));

    press(&mut app, "K");
    assert!(
        matches!(app.dialog, Dialog::Signals { .. }),
        "K opens the signal menu"
    );
    let picked = |app: &App| match app.dialog {
        Dialog::Signals { selected, .. } => SIGNALS[selected],
        ref d => panic!("the menu closed: {d:?}"),
    };
    press(&mut app, "15");
    assert_eq!(picked(&app), Signal::SIGTERM);
    press(&mut app, "x");
    assert_eq!(
        picked(&app),
        Signal::SIGTERM,
        "an unknown key leaves the menu open"
    );
    assert!(app.message.as_deref().unwrap().contains("unknown key x"));
    press(&mut app, "9");
    assert_eq!(picked(&app), Signal::SIGKILL, "9 is SIGKILL");
    let s = screen(&render(&mut app, 80, 24));
    assert!(s.contains("number or ↑↓ · Enter pick · Esc cancel"), "{s}");
    app.on_key(key(KeyCode::Enter));
    let effects = press(&mut app, "y");
    let me = Identity::of(pid).unwrap();
    assert_eq!(
        effects,
        vec![Effect::Signal {
            targets: vec![(me, b"sleep".to_vec())],
            signal: Signal::SIGKILL
        }]
    );
    foster::top::send_signal(me, Signal::SIGKILL).unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(child.0.wait().unwrap().signal(), Some(libc::SIGKILL));
}

/// The supervised sample with its processes given to helpers (`db` 200 and its children,
/// `worker` 300) and foster 100 as the supervisor.
fn with_helpers(tick: u64) -> Sample {
    let mut s = supervised(tick);
    for p in &mut s.procs {
        let helper = match p.id.pid {
            200..=202 => Some("db"),
            300 => Some("worker"),
            _ => None,
        };
        if let Some(sv) = p.supervision.as_mut() {
            sv.helper = helper.map(str::to_string);
        }
        if p.id.pid == 100 {
            p.supervision = Some(sup("supervisor", 0, ""));
        }
    }
    s
}

fn log_line(helper: &str, stream: Stream, text: &[u8], seq: u64) -> LogItem {
    LogItem::Line(Line {
        seq,
        helper: helper.into(),
        stream,
        helper_pid: None,
        outer_pid: None,
        ts_ms: 1_767_000_000_000 + seq * 1000,
        continued: false,
        bytes: text.to_vec(),
    })
}

/// The log pane: `l` opens it on the selected row's helper (every helper on the supervisor's
/// row, none on a row of no helper), lines shown as the relay shows them and escaped, stderr
/// marked; it follows the end until scrolled up, and End follows again; standalone, `l` says
/// logs need a supervisor.
#[test]
fn the_log_pane_follows_the_selected_helper_and_scrolls() {
    let mut app = app_with(standalone);
    press(&mut app, "l");
    assert!(app.logs.is_none());
    assert_eq!(
        app.message.as_deref(),
        Some("no supervisor attached: logs need foster top --attach")
    );
    let lines = render(&mut app, 100, 30);
    assert!(screen(&lines).contains("no supervisor attached: logs need foster top --attach"));

    let mut app = app_with(with_helpers);
    go_to(&mut app, 200);
    assert_eq!(app.log_source(), None, "closed: no stream");
    press(&mut app, "l");
    assert_eq!(app.log_source(), Some(LogSource::Helper("db".into())));
    // What the dashboard's loop does when the source changes, then what the stream brings.
    app.log_switch(app.log_source());
    let mut items = vec![LogItem::Start {
        helpers: vec!["db".into()],
    }];
    items
        .extend((1..=40).map(|i| log_line("db", Stream::Stdout, format!("row {i}").as_bytes(), i)));
    items.push(log_line(
        "db",
        Stream::Stderr,
        b"\x1b[31mboom\x1b]0;owned\x07\xff",
        41,
    ));
    items.push(LogItem::Missed(7));
    app.log_items(items);
    let lines = render(&mut app, 100, 30);
    let s = screen(&lines);
    assert!(s.contains("logs of db"), "{s}");
    assert!(s.contains("following"), "{s}");
    assert!(s.contains(r"db ! \e[31mboom\e]0;owned\x07\xff"), "{s}");
    assert!(s.contains("… 7 lines missed"), "{s}");
    assert!(
        s.contains("db | row 40") && !s.contains("db | row 1 "),
        "{s}"
    );
    assert!(
        s.contains("l close") && s.contains("/ search logs"),
        "the footer names the keys:\n{s}"
    );

    // Scrolled up, new lines do not move the view; End follows again.
    app.on_key(key(KeyCode::Tab));
    assert!(app.logs.as_ref().unwrap().focus);
    for _ in 0..5 {
        app.on_key(key(KeyCode::Up));
    }
    let before: Vec<String> = app
        .logs
        .as_ref()
        .unwrap()
        .window()
        .map(|l| l.text.clone())
        .collect();
    assert!(!app.logs.as_ref().unwrap().following());
    app.log_items(vec![log_line("db", Stream::Stdout, b"row 42", 42)]);
    let after: Vec<String> = app
        .logs
        .as_ref()
        .unwrap()
        .window()
        .map(|l| l.text.clone())
        .collect();
    assert_eq!(before, after);
    let s = screen(&render(&mut app, 100, 30));
    assert!(
        s.contains("scrolled: End follows") && !s.contains("row 42"),
        "{s}"
    );
    app.on_key(key(KeyCode::Home));
    assert_eq!(
        app.logs.as_ref().unwrap().window().next().unwrap().text,
        "db | row 1"
    );
    app.on_key(key(KeyCode::End));
    assert!(app.logs.as_ref().unwrap().following());
    assert_eq!(
        app.logs.as_ref().unwrap().window().last().unwrap().text,
        "db | row 42"
    );
    // Esc gives the keys back to the tree; the selection decides the source.
    app.on_key(key(KeyCode::Esc));
    assert!(!app.logs.as_ref().unwrap().focus);
    go_to(&mut app, 300);
    assert_eq!(app.log_source(), Some(LogSource::Helper("worker".into())));
    go_to(&mut app, 100);
    assert_eq!(app.log_source(), Some(LogSource::Every));
    go_to(&mut app, 500);
    assert_eq!(app.log_source(), None);
    app.log_switch(None);
    let s = screen(&render(&mut app, 100, 30));
    assert!(s.contains("belongs to no helper"), "{s}");
    // `l` again closes it.
    press(&mut app, "l");
    assert!(app.logs.is_none());
    assert_eq!(app.log_source(), None);
}

/// A real zombie (a `sleep` that never waits for the child its shell left) seen by a dashboard
/// started 30 s after it began: the note says what is known, a zombie for at least the time it
/// has been seen, and the age of its process from its start time, not a duration that counts
/// from the dashboard's first reading as if it were the whole of it.
#[test]
fn a_zombie_says_at_least_how_long_and_its_age() {
    use foster::top::model::{Anomaly, Source};
    let parent = Reaped(
        std::process::Command::new("sh")
            .args(["-c", "true & exec sleep 60"])
            .spawn()
            .unwrap(),
    );
    let ppid = parent.0.id() as i32;
    let mut src = foster::top::standalone::ProcSource::new(Some(ppid), Default::default()).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    let first = loop {
        let s = src.sample().unwrap();
        if s.procs.iter().any(|p| p.state == b'Z') && s.procs[0].comm == b"sleep" {
            break s;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no zombie: {:?}",
            s.procs
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    let zombie = first.procs.iter().find(|p| p.state == b'Z').unwrap().id;
    let hz = first.hz;
    // The readings' clock as a dashboard started 30 s later would have it, then 7 s later.
    let mut t = Tracker::new();
    let mut late = first.clone();
    late.now_ticks = zombie.start_time + 30 * hz;
    t.update(late.clone());
    late.now_ticks += 7 * hz;
    let mut app = App::new(None, "1s".into());
    app.set_model(t.update(late));
    let node = &app.model.nodes[&zombie];
    assert!(
        matches!(
            node.anomalies[..],
            [Anomaly::UnreapedZombie {
                for_secs: 7,
                age_secs: 37,
                ..
            }]
        ),
        "{:?}",
        node.anomalies
    );
    go_to(&mut app, zombie.pid);
    let lines = render(&mut app, 200, 60);
    assert!(
        row_of(&lines, zombie.pid).contains(&format!("not reaped by {ppid} (sleep) for ≥7s")),
        "{}",
        row_of(&lines, zombie.pid)
    );
    let status = &lines[lines.len() - 2];
    assert!(
        status.contains(&format!(
            "{}: a zombie for at least 7s (seen since; started 37s ago): parent {ppid} (sleep) \
             does not reap it",
            zombie.pid
        )),
        "{status}"
    );
    // Teardown: the parent killed, the zombie is reaped by whoever adopts it.
    drop(parent);
    crate::common::wait_reaped(zombie, "the zombie");
}

/// A column shown from the setup screen (`F2`) has its values at once, before the next
/// reading: the rows' texts are made for the columns shown only, and showing one remakes them.
#[test]
fn a_column_shown_from_setup_has_its_values_at_once() {
    let mut app = app_with(standalone);
    assert!(!app.rows.is_empty());
    assert!(
        app.rows.iter().all(|r| r[ui::Column::Ppid].is_empty()),
        "PPID is hidden: its texts are not made"
    );
    app.on_key(key(KeyCode::F(2)));
    let at = app
        .columns
        .entries
        .iter()
        .position(|(c, shown)| *c == foster::top::columns::Column::Ppid && !shown)
        .expect("PPID is listed, hidden");
    press(&mut app, &"j".repeat(at));
    press(&mut app, " ");
    app.on_key(key(KeyCode::Esc));
    for r in &app.rows {
        assert_eq!(
            r[ui::Column::Ppid],
            app.model.nodes[&r.id].info.ppid.to_string()
        );
    }
    let lines = render(&mut app, 200, 40);
    assert!(screen(&lines).contains("PPID"), "{}", screen(&lines));
}
