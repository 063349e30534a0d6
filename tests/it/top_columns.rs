//! `foster top`'s columns in a real terminal (tmux) at 80x24 and 200x60, standalone over a
//! subtree this test starts: `F2` shows, hides and moves columns and saves the choice in
//! `$XDG_CONFIG_HOME/foster/top.toml`, which the next dashboard reads; the optional columns
//! show what `/proc` says (process group, session, threads, cgroup, PID namespace), attached
//! to a supervisor too; a bad file, or one another user could have planted, is named in the
//! footer and the defaults are used.
//! Every process started is torn down and checked gone by pid.

use std::os::unix::fs::{MetadataExt, PermissionsExt};

use foster::process::identity::Identity;

use crate::common;
use common::Dir;
use common::tmux::{SleepTree as Subtree, Tmux, tmux_missing, top_over};

/// The dashboard on `tree` in a `w` x `h` terminal, its settings under `config`.
fn top(tree: &Subtree, config: &std::path::Path, w: u16, h: u16) -> (Tmux, Identity) {
    let (t, top) = top_over(
        tree,
        &format!("XDG_CONFIG_HOME={} ", config.display()),
        w,
        h,
    );
    t.wait_for("the sleeps", Subtree::shown);
    (t, top)
}

/// The table's header line.
fn header(screen: &str) -> &str {
    screen
        .lines()
        .find(|l| l.contains(" PID") && l.contains("COMMAND"))
        .unwrap_or_else(|| panic!("no header:\n{screen}"))
}

/// F2 lists the columns; Space shows USER, `[` moves it first, Esc saves; the file says so,
/// private; a new dashboard reads it and shows USER first again.
#[test]
fn f2_chooses_and_orders_columns_and_the_choice_is_saved() {
    if tmux_missing() {
        return;
    }
    let tree = Subtree::start();
    for (w, h) in [(80u16, 24u16), (200, 60)] {
        let dir = Dir::new("topcols", &format!("f2-{w}"));
        let (t, top) = top(&tree, &dir.0, w, h);
        assert!(!header(&t.screen()).contains("USER"));
        t.keys(&["F2"]);
        t.wait_for("the column setup", |s| {
            s.contains("[x] PID") && s.contains("[ ] USER") && s.contains("[ ] PIDNS")
        });
        // USER is the first hidden column, after the twelve shown at first.
        for _ in 0..12 {
            t.keys(&["Down"]);
        }
        t.keys(&["Space"]);
        t.wait_for("USER shown", |s| s.contains("[x] USER"));
        for _ in 0..12 {
            t.keys(&["["]);
        }
        t.wait_for("USER moved first", |s| {
            let user = s.find("[x] USER");
            let pid = s.find("[x] PID");
            user.is_some() && pid.is_some() && user < pid
        });
        t.keys(&["Escape"]);
        let s = t.wait_for("the columns saved", |s| s.contains("columns saved in"));
        let head = header(&s);
        let (u, p) = (head.find("USER").unwrap(), head.find("PID").unwrap());
        assert!(u < p, "USER is not before PID: {head}");
        assert!(
            s.lines()
                .any(|l| l.contains("root") && l.contains("sleep 4101")),
            "no row names its user:\n{s}"
        );
        let file = dir.0.join("foster/top.toml");
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.contains("columns = [\"user\", \"pid\""), "{text}");
        assert_eq!(std::fs::metadata(&file).unwrap().mode() & 0o777, 0o600);
        assert_eq!(
            std::fs::metadata(dir.0.join("foster")).unwrap().mode() & 0o777,
            0o700
        );
        t.quit(top);
        drop(t);
        // Read again by the next dashboard.
        let (t, top) = self::top(&tree, &dir.0, w, h);
        let s = t.wait_for("USER from the file", |s| header(s).contains("USER"));
        let head = header(&s);
        assert!(head.find("USER") < head.find("PID"), "{head}");
        t.quit(top);
    }
}

/// Every optional column shown (from the file): at 200 columns the rows show the process
/// group, session, threads, cgroup and PID namespace `/proc` gives; at 80 the command keeps
/// its room and the optional columns go first.
#[test]
fn the_optional_columns_show_what_proc_says() {
    if tmux_missing() {
        return;
    }
    let tree = Subtree::start();
    let sleep = tree.all[1];
    let node = common::process(sleep.pid).unwrap();
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", sleep.pid)).unwrap();
    let arg = String::from_utf8_lossy(cmdline.split(|b| *b == 0).nth(1).unwrap()).into_owned();
    let ns = std::fs::metadata(format!("/proc/{}/ns/pid", sleep.pid))
        .unwrap()
        .ino();
    let cgroup = std::fs::read_to_string(format!("/proc/{}/cgroup", sleep.pid)).unwrap();
    let cgroup = cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .unwrap_or("/")
        .to_string();
    let dir = Dir::new("topcols", "all");
    std::fs::create_dir(dir.path("foster")).unwrap();
    std::fs::set_permissions(dir.path("foster"), PermissionsExt::from_mode(0o700)).unwrap();
    dir.file(
        "foster/top.toml",
        r#"columns = ["pid", "pgid", "sid", "threads", "ppid", "pidns", "cgroup", "io_read", "io_write", "start", "user"]"#,
    );
    let (t, top) = top(&tree, &dir.0, 200, 60);
    // The rates need two readings.
    let s = t.wait_for("the storage rates", |s| {
        s.lines()
            .filter(|l| l.contains("sleep 41"))
            .all(|l| l.split_whitespace().count() >= 13)
    });
    let head = header(&s);
    for title in [
        "PGID", "SID", "THR", "PPID", "PIDNS", "CGROUP", "READ/s", "WRITE/s", "START", "USER",
    ] {
        assert!(head.contains(title), "no {title}: {head}");
    }
    let row = s
        .lines()
        .find(|l| l.ends_with(&format!("sleep {}", arg)))
        .unwrap_or_else(|| panic!("no row of {sleep}:\n{s}"));
    let words: Vec<&str> = row.split_whitespace().collect();
    let want = [
        sleep.pid.to_string(),
        node.pgrp.to_string(),
        node.session.to_string(),
        "1".to_string(),
        tree.all[0].pid.to_string(),
        ns.to_string(),
        cgroup.clone(),
    ];
    assert_eq!(words[..7], want, "{row}");
    t.quit(top);
    drop(t);
    let (t, top) = self::top(&tree, &dir.0, 80, 24);
    let s = t.screen();
    let head = header(&s);
    assert!(
        !head.contains("CGROUP") && !head.contains("PIDNS"),
        "{head}"
    );
    assert!(head.contains("PGID"), "{head}");
    t.quit(top);
}

/// A file that is not right: what is wrong in the footer, the default columns, no crash.
#[test]
fn a_bad_settings_file_is_named_and_the_defaults_are_used() {
    if tmux_missing() {
        return;
    }
    let tree = Subtree::start();
    type Setup = fn(&Dir);
    let cases: [(&str, Setup, &str); 5] = [
        (
            "unknown",
            |d| {
                d.file("foster/top.toml", "columns = [\"pid\", \"nope\"]\n");
            },
            "unknown column \"nope\"",
        ),
        (
            "big",
            |d| {
                d.file("foster/top.toml", &"#".repeat(70 * 1024));
            },
            "larger than 64 KiB",
        ),
        (
            "groupw",
            |d| {
                let f = d.file("foster/top.toml", "columns = [\"user\"]\n");
                std::fs::set_permissions(f, PermissionsExt::from_mode(0o664)).unwrap();
            },
            "writable by group or others",
        ),
        (
            "symlink",
            |d| {
                let f = d.file("real.toml", "columns = [\"user\"]\n");
                std::os::unix::fs::symlink(f, d.path("foster/top.toml")).unwrap();
            },
            "a symbolic link, not read",
        ),
        (
            "dirw",
            |d| {
                d.file("foster/top.toml", "columns = [\"user\"]\n");
                std::fs::set_permissions(d.path("foster"), PermissionsExt::from_mode(0o777))
                    .unwrap();
            },
            "not writable by group or others",
        ),
    ];
    for (i, (tag, setup, says)) in cases.into_iter().enumerate() {
        let dir = Dir::new("topcols", tag);
        std::fs::create_dir(dir.path("foster")).unwrap();
        std::fs::set_permissions(dir.path("foster"), PermissionsExt::from_mode(0o700)).unwrap();
        setup(&dir);
        let (w, h) = if i % 2 == 0 { (200, 60) } else { (80, 24) };
        // What is wrong comes first in the message (the footer cuts it at 80 columns), except
        // for a directory refused, which is tried at 200.
        let (t, top) = top_over(
            &tree,
            &format!("XDG_CONFIG_HOME={} ", dir.0.display()),
            w,
            h,
        );
        let s = t.wait_for(says, |s| s.contains(says) && s.contains("sleep 4101"));
        let head = header(&s);
        assert!(
            head.contains("PID S") && !head.contains("USER"),
            "not the defaults: {head}"
        );
        t.quit(top);
    }
}

/// Attached to a supervisor (contained where this runs as root, so its pids are translated),
/// the PGID and SID columns chosen in the file show what this process's `/proc` says of the
/// helper's child, as standalone, not `-`: the snapshot does not carry them, the dashboard
/// reads them for the processes it sees under the snapshot's pid and start time.
#[test]
fn attached_the_process_group_and_session_are_read_from_proc() {
    if tmux_missing() {
        return;
    }
    use common::supervised::Run;
    let dir = Dir::new("topcols", "attached");
    std::fs::create_dir(dir.path("foster")).unwrap();
    std::fs::set_permissions(dir.path("foster"), PermissionsExt::from_mode(0o700)).unwrap();
    dir.file("foster/top.toml", r#"columns = ["pid", "pgid", "sid"]"#);
    let mut run = Run::start(
        &dir,
        "[[helper]]\nname = \"pair\"\ncommand = [\"sh\", \"-c\", \"sleep 4301 & wait\"]\n",
        &[],
    );
    // The sleep, as this namespace sees it (the shell starts it just after its launch).
    let start = std::time::Instant::now();
    let sleep = loop {
        let found = common::descendants_of(run.child.id() as i32)
            .into_iter()
            .find(|id| {
                std::fs::read(format!("/proc/{}/cmdline", id.pid))
                    .is_ok_and(|c| c == b"sleep\x004301\x00")
            });
        if let Some(id) = found {
            break id;
        }
        assert!(start.elapsed() < common::tmux::DEADLINE, "no sleep 4301");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let node = common::process(sleep.pid).unwrap();
    assert_eq!(node.identity, sleep);
    // Its group and session are the shell's, not its own pid: a column showing the pid would
    // not pass.
    assert_ne!(node.pgrp, sleep.pid);
    let t = Tmux::start_sized("sh", 200, 50);
    t.text(&format!(
        "XDG_CONFIG_HOME={} {}\n",
        dir.0.display(),
        common::tmux::top_attach(&run.socket)
    ));
    let top = common::tmux::dashboard_pid(&t);
    let row_of = |s: &str| -> Option<String> {
        s.lines()
            .find(|l| l.trim_end().ends_with("sleep 4301"))
            .map(str::to_string)
    };
    let want = [
        sleep.pid.to_string(),
        node.pgrp.to_string(),
        node.session.to_string(),
    ];
    let shows = |row: &str| {
        let words: Vec<&str> = row.split_whitespace().collect();
        words.windows(3).any(|w| w == want)
    };
    // Within a few readings (the first may come before the columns' data).
    let s = t.wait_for("the sleep's group and session", |s| {
        row_of(s).is_some_and(|r| shows(&r))
    });
    let head = header(&s);
    assert!(head.contains("PGID") && head.contains("SID"), "{head}");
    t.quit(top);
    drop(t);
    assert!(run.stop().success());
    assert!(
        common::wait_gone(sleep, common::tmux::DEADLINE),
        "{sleep} outlived its supervisor"
    );
}

/// RSS is the resident memory `ps` (and htop) show, read from `statm`: `stat`'s field 24 is the
/// kernel's unsummed approximation, short by some hundred KiB on a small process.
#[test]
fn rss_is_what_ps_shows() {
    let tree = Subtree::start();
    let pids: Vec<i32> = tree.all.iter().map(|id| id.pid).collect();
    let mut scanner = foster::process::tree::scan::Scanner::new(
        foster::process::tree::scan::ScanOptions::default(),
    )
    .unwrap();
    let ps = |pid: i32| -> u64 {
        let out = std::process::Command::new("ps")
            .args(["-o", "rss=", "-p", &pid.to_string()])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    };
    for pid in pids {
        // A process still settling (its exec's pages faulting in) reads differently from one
        // moment to the next: compare a reading taken between two of ps's that agree.
        let t = std::time::Instant::now();
        loop {
            let before = ps(pid);
            let snap = scanner.scan_pids(&[pid]);
            let after = ps(pid);
            let node = snap
                .by_pid(pid)
                .unwrap_or_else(|| panic!("{pid} not scanned"));
            if before == after {
                assert_eq!(
                    node.rss_bytes / 1024,
                    ps(pid),
                    "RSS of {pid} in KiB, against ps"
                );
                break;
            }
            assert!(
                t.elapsed() < common::LIMIT,
                "the RSS of {pid} never settled"
            );
        }
    }
}
