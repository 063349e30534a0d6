//! A tmux server of a test's own, to drive `foster top` in a real terminal of a chosen size:
//! keys in (a `foster` command typed at its shell), the screen out, waits on what it shows; the
//! terminal's modes kept and compared; the dashboard's pid found below the pane, the dashboard
//! started over a small tree of sleeps ([`SleepTree`], [`top_over`]) or attached to a socket
//! ([`top_attach`]) and quit; the skip where tmux is missing. Every server has its socket in a
//! directory of the test's own and is checked gone, socket file included, on drop.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use foster::process::identity::Identity;

use super::{Dir, descendants_of};

pub const DEADLINE: Duration = Duration::from_secs(15);

/// A tmux server of this test's own: its socket in a directory of the test's own (`-S`), not
/// in the user's tmux directory; on drop the server is killed, checked gone by identity, and its
/// socket file and directory removed and checked gone.
pub struct Tmux {
    _dir: Dir,
    socket: std::path::PathBuf,
    server: Identity,
}

impl Tmux {
    /// A server with one 120x40 session running `cmd`.
    pub fn start(cmd: &str) -> Tmux {
        Tmux::start_sized(cmd, 120, 40)
    }

    /// A server with one `width` x `height` session running `cmd`.
    pub fn start_sized(cmd: &str, width: u16, height: u16) -> Tmux {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let dir = Dir::new("tmux", &n.to_string());
        let socket = dir.path("sock");
        let mut t = Tmux {
            _dir: dir,
            socket,
            server: Identity {
                pid: 0,
                start_time: 0,
            },
        };
        let (w, h) = (width.to_string(), height.to_string());
        let out = t.run(&["new-session", "-d", "-s", "t", "-x", &w, "-y", &h, cmd]);
        assert!(
            out.status.success(),
            "tmux new-session: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let pid = t.display("#{pid}").parse().expect("the tmux server's pid");
        t.server = Identity::of(pid).expect("the tmux server is running");
        t
    }

    pub fn run(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("run tmux")
    }

    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "t"];
        args.extend_from_slice(keys);
        assert!(self.run(&args).status.success());
    }

    pub fn text(&self, text: &str) {
        assert!(
            self.run(&["send-keys", "-t", "t", "-l", text])
                .status
                .success()
        );
    }

    /// Types `foster ARGS` (the binary under test) and Enter at the pane's shell.
    pub fn foster(&self, args: &str) {
        self.text(&format!("{} {args}\n", env!("CARGO_BIN_EXE_foster")));
    }

    pub fn screen(&self) -> String {
        String::from_utf8_lossy(&self.run(&["capture-pane", "-p", "-t", "t"]).stdout).into_owned()
    }

    /// The screen with its colours and attributes as escape sequences (`capture-pane -e`).
    pub fn screen_styled(&self) -> String {
        String::from_utf8_lossy(&self.run(&["capture-pane", "-p", "-e", "-t", "t"]).stdout)
            .into_owned()
    }

    pub fn display(&self, format: &str) -> String {
        let out = self.run(&["display-message", "-p", "-t", "t", format]);
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Keeps the terminal's modes (`stty -g`) in the pane's shell, for
    /// [`Tmux::assert_modes_restored`] to compare with after.
    pub fn save_modes(&self) {
        self.text("S=$(stty -g)\n");
    }

    /// The pane's shell finds the terminal's modes as [`Tmux::save_modes`] kept them: raw mode
    /// undone (`after` says after what).
    pub fn assert_modes_restored(&self, after: &str) {
        self.text("[ \"$(stty -g)\" = \"$S\" ] && echo modes-same || echo modes-differ\n");
        let s = self.wait_for("the terminal modes compared", |s| {
            s.lines()
                .any(|l| l.trim() == "modes-same" || l.trim() == "modes-differ")
        });
        assert!(
            s.lines().any(|l| l.trim() == "modes-same"),
            "raw mode was not undone{after}:\n{s}"
        );
    }

    /// Quits the dashboard `top` (Escape, for a box or prompt left open, then `q`) and checks
    /// it gone.
    pub fn quit(&self, top: Identity) {
        self.keys(&["Escape", "q"]);
        assert!(
            super::wait_gone(top, DEADLINE),
            "the dashboard did not quit"
        );
    }

    /// Waits until the screen satisfies `ok`, or fails with the last screen.
    pub fn wait_for(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        self.wait_within(DEADLINE, what, ok)
    }

    /// [`Tmux::wait_for`] with a limit of its own, for what must show within a few refreshes.
    pub fn wait_within(&self, limit: Duration, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let s = self.screen();
            if ok(&s) {
                return s;
            }
            if start.elapsed() > limit {
                panic!("timed out waiting for {what}; screen:\n{s}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
        let gone = super::wait_gone(self.server, DEADLINE);
        // The server leaves its socket file behind: remove it (the directory goes with `dir`).
        let _ = std::fs::remove_file(&self.socket);
        if !std::thread::panicking() {
            assert!(gone, "the tmux server {} outlived the test", self.server);
            assert!(
                !self.socket.exists(),
                "the tmux socket {} was left behind",
                self.socket.display()
            );
        }
    }
}

/// True when a row of the table shows exactly `command` (the shells' command lines contain the
/// sleeps' arguments too).
pub fn has_row(screen: &str, command: &str) -> bool {
    screen.lines().any(|l| {
        let l = l.trim_end();
        l.ends_with(&format!("─ {command}")) || l.ends_with(&format!("─+{command}"))
    })
}

/// True, the reason printed, when tmux is not installed: the test skips.
pub fn tmux_missing() -> bool {
    let there = Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if !there {
        super::skip::setup("tmux is not installed");
    }
    !there
}

/// The pid of the dashboard: the process running the foster binary below the pane's process.
/// Not simply the pane's grandchild or child: tmux starts the pane through the user's shell
/// (`$SHELL -c sh`), which bash replaces by `sh` but dash keeps as a parent.
pub fn dashboard_pid(t: &Tmux) -> Identity {
    let pane: i32 = t.display("#{pane_pid}").parse().unwrap();
    let exe = std::fs::canonicalize(env!("CARGO_BIN_EXE_foster")).unwrap();
    let start = Instant::now();
    loop {
        let pids = std::iter::once(pane).chain(descendants_of(pane).into_iter().map(|id| id.pid));
        if let Some(p) = pids
            .into_iter()
            .find(|p| std::fs::read_link(format!("/proc/{p}/exe")).is_ok_and(|e| e == exe))
        {
            return Identity::of(p).unwrap();
        }
        assert!(start.elapsed() < DEADLINE, "the dashboard did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `foster top` over `tree` (its shell as the root, refreshed every 300 ms) started from the
/// shell of a new `w` x `h` terminal, after `env` (assignments for its environment, or ""):
/// the terminal and the dashboard, once it runs.
pub fn top_over(tree: &SleepTree, env: &str, w: u16, h: u16) -> (Tmux, Identity) {
    let t = Tmux::start_sized("sh", w, h);
    t.text(&format!(
        "{env}{} top --root {} --interval 300ms\n",
        env!("CARGO_BIN_EXE_foster"),
        tree.all[0].pid
    ));
    let top = dashboard_pid(&t);
    (t, top)
}

/// `foster top --attach SOCKET --interval 300ms`, as a command line for a pane.
pub fn top_attach(socket: &std::path::Path) -> String {
    format!(
        "{} top --attach {} --interval 300ms",
        env!("CARGO_BIN_EXE_foster"),
        socket.display()
    )
}

/// A shell and two sleeps, `sh -c 'sleep 4101 & sleep 4102 & wait'`, for the dashboard to show;
/// killed and checked gone by identity on drop.
pub struct SleepTree {
    pub root: std::process::Child,
    /// The shell, then the sleeps.
    pub all: Vec<Identity>,
}

impl SleepTree {
    /// Whether `screen` shows both sleeps.
    pub fn shown(screen: &str) -> bool {
        screen.contains("sleep 4101") && screen.contains("sleep 4102")
    }

    pub fn start() -> SleepTree {
        let root = std::process::Command::new("sh")
            .args(["-c", "sleep 4101 & sleep 4102 & wait"])
            .stdin(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let pid = root.id() as i32;
        let mut root = root;
        let start = Instant::now();
        loop {
            let below = descendants_of(pid);
            let execed = |arg: &str| {
                below.iter().any(|id| {
                    std::fs::read(format!("/proc/{}/cmdline", id.pid))
                        .is_ok_and(|c| c.split(|b| *b == 0).any(|a| a == arg.as_bytes()))
                })
            };
            if below.len() == 2 && execed("4101") && execed("4102") {
                let mut all = vec![Identity::of(pid).unwrap()];
                all.extend(below);
                return SleepTree { root, all };
            }
            if start.elapsed() > DEADLINE {
                let _ = root.kill();
                let _ = root.wait();
                panic!("the sleeps never started");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for SleepTree {
    fn drop(&mut self) {
        for id in self.all.iter().rev() {
            let _ = foster::top::send_signal(*id, nix::sys::signal::Signal::SIGKILL);
        }
        let _ = self.root.wait();
        for id in &self.all {
            assert!(super::wait_gone(*id, DEADLINE), "{id} outlived the test");
        }
    }
}
