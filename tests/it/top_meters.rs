//! `foster top`'s meters and history in a real terminal (tmux): the meters at 80x24 (compact)
//! and at 200x60 (a bar per online core), `m` hiding and showing them, the history sparkline
//! of the selected process, and `NO_COLOR` taking every colour off the screen. Each test runs
//! the dashboard on a subtree of its own and tears down every process it started, by pid.

use std::process::{Child, Command, Stdio};

use foster::process::identity::Identity;

use crate::common;
use common::tmux::{Tmux, tmux_missing};

/// A process this test started, killed by pid and checked gone on drop.
struct Started(Child, Identity);

impl Started {
    fn sh(script: &str) -> Started {
        let c = Command::new("sh")
            .args(["-c", script])
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let id = Identity::of(c.id() as i32).unwrap();
        Started(c, id)
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        let _ = foster::top::send_signal(self.1, nix::sys::signal::Signal::SIGKILL);
        let _ = self.0.wait();
        common::wait_reaped(self.1, "a process this test started");
    }
}

fn online_cores() -> usize {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) as usize }
}

fn top(pid: i32) -> String {
    format!(
        "{} top --root {pid} --interval 200ms",
        env!("CARGO_BIN_EXE_foster")
    )
}

/// The number of per-core bars (`cpu0[`, `cpu1[`... each once) on the screen.
fn core_bars(screen: &str) -> usize {
    (0..1024)
        .take_while(|i| {
            let w = online_cores().saturating_sub(1).to_string().len();
            screen.contains(&format!("cpu{i:<w$}["))
        })
        .count()
}

#[test]
fn meters_fit_80x24_and_show_every_core_at_200x60_and_m_toggles_them() {
    if tmux_missing() {
        return;
    }
    let p = Started::sh("exec sleep 1000");
    // 80x24: one compact line of bars, one of counts, one of history; no per-core bars.
    let t = Tmux::start_sized(&top(p.1.pid), 80, 24);
    let s = t.wait_for("the compact meters", |s| {
        s.contains("Mem[") && s.contains("Swp[") && s.contains("Load ") && s.contains("up ")
    });
    assert!(s.contains("CPU"), "{s}");
    assert_eq!(core_bars(&s), 0, "no bar per core at 80x24:\n{s}");
    assert!(
        s.contains("1 task,"),
        "the task count of the subtree shown:\n{s}"
    );
    let lines: Vec<&str> = s.lines().collect();
    assert!(
        lines[1].contains("Mem["),
        "the meters are below the title:\n{s}"
    );
    assert!(
        lines.iter().any(|l| l.contains("sleep 1000")),
        "the tree is still there:\n{s}"
    );
    t.keys(&["m"]);
    let s = t.wait_for("the meters hidden", |s| {
        !s.contains("Mem[") && !s.contains("Load ")
    });
    assert!(s.lines().nth(1).is_some_and(|l| l.contains("PID")), "{s}");
    t.keys(&["m"]);
    t.wait_for("the meters back", |s| {
        s.contains("Mem[") && s.contains("Load ")
    });
    drop(t);

    // 200x60: a bar per online core, memory, swap, load, tasks, uptime.
    let t = Tmux::start_sized(&top(p.1.pid), 200, 60);
    let n = online_cores();
    let s = t.wait_for("a bar per core", |s| {
        core_bars(s) == n && s.contains("Uptime")
    });
    assert!(
        s.contains("Mem[") && s.contains("Swp[") && s.contains("Load "),
        "{s}"
    );
    assert!(s.contains("Tasks 1 shown"), "{s}");
    assert!(
        !s.contains(&format!("cpu{n}[")),
        "one bar per core, no more:\n{s}"
    );
    t.keys(&["m"]);
    t.wait_for("the meters hidden", |s| {
        core_bars(s) == 0 && !s.contains("Mem[")
    });
}

#[test]
fn the_selected_process_has_a_history_sparkline() {
    if tmux_missing() {
        return;
    }
    // A process that keeps a core busy: its CPU sparkline has bars.
    let busy = Started::sh("while :; do :; done");
    let t = Tmux::start_sized(&top(busy.1.pid), 80, 24);
    let label = format!("history of {} (sh)", busy.1.pid);
    let bars = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let s = t.wait_for("the busy process's CPU sparkline", |s| {
        s.lines()
            .find(|l| l.contains(&label))
            .is_some_and(|l| l.contains("CPU") && l.chars().any(|c| bars.contains(&c)))
    });
    let line = s.lines().find(|l| l.contains(&label)).unwrap();
    assert!(line.contains("Mem"), "{s}");
    // Hidden with the meters.
    t.keys(&["m"]);
    t.wait_for("the history hidden", |s| !s.contains(&label));
}

#[test]
fn no_color_takes_every_colour_off() {
    if tmux_missing() {
        return;
    }
    let p = Started::sh("exec sleep 1000");
    // tmux's escape sequences for colours: 3x/4x/9x/10x foreground and background, 38;/48;.
    let coloured = |s: &str| {
        s.split("\x1b[").skip(1).any(|seq| {
            let params = seq.split('m').next().unwrap_or("");
            params.split(';').any(|p| {
                p.len() == 2
                    && (p.starts_with('3') || p.starts_with('4') || p.starts_with('9'))
                    && p != "39"
                    && p != "49"
                    || p.len() == 3 && p.starts_with("10")
            })
        })
    };
    let t = Tmux::start_sized(&top(p.1.pid), 120, 40);
    t.wait_for("the dashboard", |s| {
        s.contains("Mem[") && s.contains("sleep 1000")
    });
    assert!(coloured(&t.screen_styled()), "colours without NO_COLOR");
    drop(t);
    let t = Tmux::start_sized(&format!("env NO_COLOR=1 {}", top(p.1.pid)), 120, 40);
    t.wait_for("the dashboard", |s| {
        s.contains("Mem[") && s.contains("sleep 1000")
    });
    let styled = t.screen_styled();
    assert!(!coloured(&styled), "a colour under NO_COLOR:\n{styled:?}");
    assert!(
        styled.contains("\x1b[7m") || styled.contains(";7m"),
        "the header in reverse video"
    );
}

/// The bars (`▁` to `█`) of the machine's CPU graph: its line's part before `Mem`.
fn machine_cpu_bars(screen: &str) -> Option<usize> {
    let line = screen.lines().find(|l| l.starts_with("machine CPU"))?;
    let cpu = line.split(" Mem ").next().unwrap_or("");
    Some(cpu.chars().filter(|c| ('▁'..='█').contains(c)).count())
}

/// The machine's CPU and memory history: under the meters at first on a tall terminal, one
/// point more per reading; `v` hides it and shows it again; a short terminal shows it on `v`.
#[test]
fn the_machines_history_grows_per_reading_and_v_toggles_it() {
    if tmux_missing() {
        return;
    }
    // A core kept busy: the machine's CPU is above 0 at each reading, so every point has a bar.
    let busy = Started::sh("while :; do :; done");
    let t = Tmux::start_sized(&top(busy.1.pid), 120, 50);
    let s = t.wait_for("the machine's graph", |s| {
        machine_cpu_bars(s).is_some_and(|n| n >= 2)
    });
    let first = machine_cpu_bars(&s).unwrap();
    assert!(s.contains("Mem "), "{s}");
    t.wait_for("more points", |s| {
        machine_cpu_bars(s).is_some_and(|n| n >= first + 2)
    });
    t.keys(&["v"]);
    let s = t.wait_for("the graph hidden", |s| machine_cpu_bars(s).is_none());
    assert!(s.contains("Mem[") && s.contains("history of"), "{s}");
    t.keys(&["v"]);
    t.wait_for("the graph back", |s| machine_cpu_bars(s).is_some());
    drop(t);

    let t = Tmux::start_sized(&top(busy.1.pid), 80, 24);
    let s = t.wait_for("the compact meters", |s| {
        s.contains("Mem[") && s.contains("history of")
    });
    assert!(
        machine_cpu_bars(&s).is_none(),
        "not at first at 80x24:\n{s}"
    );
    t.keys(&["v"]);
    let s = t.wait_for("the graph shown", |s| machine_cpu_bars(s).is_some());
    let lines: Vec<&str> = s.lines().collect();
    assert!(
        lines[4].starts_with("machine CPU"),
        "below the meters:\n{s}"
    );
}
