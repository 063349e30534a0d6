//! `foster tree` side by side with psmisc's `pstree`, on one real tree.
//!
//! The tree: a shell with three identical `sleep` children, a fourth `sleep` that `setpriv`
//! moved to uid 65534, and `python3` with two threads that named themselves `worker` (left out,
//! with the reason printed, when python3 or its ctypes is missing). Both tools are run from this
//! test, outside the tree, with the same options, the same `COLUMNS` and `TERM`, on the same root
//! pid, once the tree has settled (every child past its `exec`, the threads named: python says
//! so on a pipe, the rest is read from `/proc`).
//!
//! Normalisation: none for `foster tree --plain`, pstree's own layout: its output must be
//! pstree's byte for byte, for every option the issue names (compaction and `-c`, `-p`, `-g`,
//! `-u`, `-t`, `-T`, `-n`, `-a`, `-s`, `-h`, `-l`, cutting at `COLUMNS` and at 132 columns).
//! foster's own layout (`PID STATE NAME(notes)`, one process a line, by pid) is compared
//! structurally: the set of (pid, name, pgid, user) it shows with `-g -u -t` is the one
//! `pstree -p -g -u -t -c` shows.
//! Skipped, with the reason printed, when `pstree` or `setpriv` is missing or not root.

use crate::common;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::os::fd::OwnedFd;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use foster::process::identity::Identity;

/// Environment variables for one run.
type Env<'a> = &'a [(&'a str, &'a str)];

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// The shell at the root of the tree and what it started, torn down by pid on drop.
struct Tree {
    sh: std::process::Child,
    /// The write end of the pipe python waits on: closing it ends python.
    hold: Option<OwnedFd>,
    threads: bool,
}

impl Tree {
    fn start(threads: bool) -> Tree {
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        // python names its two threads, waits until both have, says so, then waits for fd 3 to
        // reach its end.
        let py = "import threading,ctypes,os;b=threading.Barrier(3);e=threading.Event();\
                  f=lambda:(ctypes.CDLL(None).prctl(15,b'worker',0,0,0),b.wait(),e.wait());\
                  [threading.Thread(target=f,daemon=True).start() for _ in range(2)];\
                  b.wait();print('ready',flush=True);os.read(3,1)";
        let mut script = String::from(
            "exec 3<&0; sleep 1000 & sleep 1000 & sleep 1000 & \
             setpriv --reuid=65534 --regid=65534 --clear-groups sleep 1000 & ",
        );
        if threads {
            script.push_str(&format!("python3 -c \"{py}\" & "));
        } else {
            script.push_str("echo ready; ");
        }
        script.push_str("wait");
        let sh = Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::from(r))
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut t = Tree {
            sh,
            hold: Some(w),
            threads,
        };
        let mut line = String::new();
        BufReader::new(t.sh.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line, "ready\n", "the tree did not start");
        t.settle();
        t
    }

    fn pid(&self) -> i32 {
        self.sh.id() as i32
    }

    /// Waits until every child has exec'd its program (and the setpriv one changed uid).
    fn settle(&self) {
        let want = if self.threads { 5 } else { 4 };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let snap = common::processes();
            let root = snap.identity_of(self.pid()).expect("the shell is there");
            let kids = snap.children(&root);
            let sleeps = kids.iter().filter(|k| k.comm == b"sleep").count();
            let nobody = kids
                .iter()
                .filter(|k| k.comm == b"sleep" && k.uid == 65534)
                .count();
            let py = kids.iter().filter(|k| k.comm == b"python3").count();
            if kids.len() == want && sleeps == 4 && nobody == 1 && py == want - 4 {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the tree did not settle: {:?}",
                kids.iter()
                    .map(|k| (k.pid, String::from_utf8_lossy(&k.comm).into_owned(), k.uid))
                    .collect::<Vec<_>>()
            );
            std::thread::yield_now();
        }
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let below = common::descendants_of(self.pid());
        self.hold.take();
        for id in &below {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(id.pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        // The shell reaps its children in `wait`, then ends.
        let _ = self.sh.wait();
        if !std::thread::panicking() {
            let gone: Vec<&Identity> = below.iter().filter(|id| id.is_alive()).collect();
            assert!(gone.is_empty(), "left behind: {gone:?}");
        }
    }
}

/// Runs `tool ARGS... PID` with `env` set (and COLUMNS unset unless given); its stdout.
fn run(tool: &str, args: &[&str], pid: i32, env: &[(&str, &str)]) -> String {
    let mut c = Command::new(tool);
    c.args(args)
        .arg(pid.to_string())
        .env_remove("COLUMNS")
        .env("TERM", "dumb")
        .env("LANG", "C");
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{tool} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Runs pstree and `foster tree --plain` with the same options; both outputs.
fn both(args: &[&str], pid: i32, env: &[(&str, &str)]) -> (String, String) {
    let theirs = run("pstree", args, pid, env);
    let mut fa = vec!["tree", "--plain"];
    fa.extend_from_slice(args);
    let ours = run(env!("CARGO_BIN_EXE_foster"), &fa, pid, env);
    (theirs, ours)
}

/// (pid, name, pgid, user) of each line of `pstree -p -g -u -t -c`: `name(pid,pgid[,user])`.
fn pstree_facts(out: &str) -> BTreeSet<(i32, String, i32, String)> {
    let re = regex::Regex::new(r"([^-|`+ ]+)\((\d+),(\d+)(?:,([^)]+))?\)").unwrap();
    re.captures_iter(out)
        .map(|c| {
            (
                c[2].parse().unwrap(),
                c[1].to_string(),
                c[3].parse().unwrap(),
                c.get(4).map_or(String::new(), |m| m.as_str().to_string()),
            )
        })
        .collect()
}

/// The same facts from foster's layout with `-g -u -t`: `PID STATE name(pgid[,user])`.
fn foster_facts(out: &str) -> BTreeSet<(i32, String, i32, String)> {
    let re = regex::Regex::new(r"(\d+) [A-Za-z] (\S+)\((\d+)(?:,([^)]+))?\)$").unwrap();
    out.lines()
        .map(|l| {
            let c = re
                .captures(l)
                .unwrap_or_else(|| panic!("not a line of foster's layout: {l:?}"));
            (
                c[1].parse().unwrap(),
                c[2].to_string(),
                c[3].parse().unwrap(),
                c.get(4).map_or(String::new(), |m| m.as_str().to_string()),
            )
        })
        .collect()
}

#[test]
fn foster_tree_matches_pstree_option_by_option() {
    if common::skip::unless_root("needs root (setpriv to another uid)") {
        return;
    }
    for tool in ["pstree", "setpriv"] {
        if !have(tool) {
            common::skip::setup(format!("{tool} is not installed"));
            return;
        }
    }
    let threads = Command::new("python3")
        .args(["-c", "import ctypes, threading; ctypes.CDLL(None).prctl"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !threads {
        eprintln!("threads left out: python3 with ctypes is not installed");
    }
    let tree = Tree::start(threads);
    let pid = tree.pid();
    let wide = [("COLUMNS", "200")];
    let narrow = [("COLUMNS", "24")];
    let cases: Vec<(Vec<&str>, Env)> = vec![
        (vec![], &wide),
        (vec!["-c"], &wide),
        (vec!["-p"], &wide),
        (vec!["-g"], &wide),
        (vec!["-u"], &wide),
        (vec!["-u", "-c"], &wide),
        (vec!["-t"], &wide),
        (vec!["-T"], &wide),
        (vec!["-n"], &wide),
        (vec!["-p", "-g", "-u", "-t"], &wide),
        (vec!["-a"], &wide),
        (vec!["-a", "-p"], &wide),
        (vec!["-a", "-c", "-t"], &wide),
        (vec!["-s"], &wide),
        (vec!["-s", "-p"], &wide),
        (vec!["-U"], &wide),
        // Cut at COLUMNS, marked with `+`; not with -l.
        (vec![], &narrow),
        (vec!["-a"], &narrow),
        (vec!["-p"], &narrow),
        (vec!["-l", "-a"], &narrow),
        // Neither COLUMNS nor a terminal: 132 columns.
        (vec!["-a", "-s"], &[]),
        // Highlight of the current process and its ancestors: none in the tree, but the
        // caller's ancestors shown by -s are foster's and pstree's.
        (vec!["-h"], &[("COLUMNS", "200"), ("TERM", "xterm")]),
        (vec!["-s", "-h"], &[("COLUMNS", "200"), ("TERM", "xterm")]),
    ];
    let mut compared = 0;
    for (args, env) in &cases {
        let (theirs, ours) = both(args, pid, env);
        assert_eq!(
            ours, theirs,
            "foster tree --plain {args:?} (env {env:?}) differs from pstree:\n\
             pstree:\n{theirs}\nfoster:\n{ours}"
        );
        compared += 1;
    }
    // What the outputs must show, so that a broken tree cannot make both agree on nothing.
    let (plain, _) = both(&["-u"], pid, &wide);
    assert!(plain.contains("3*[sleep]"), "{plain}");
    assert!(
        plain.contains("sleep(nobody)") || plain.contains("sleep(65534)"),
        "{plain}"
    );
    if threads {
        assert!(plain.contains("python3---2*[{python3}]"), "{plain}");
        let (named, _) = both(&["-t"], pid, &wide);
        assert!(named.contains("2*[{worker}]"), "{named}");
    }
    let (bold, _) = both(&["-s", "-h"], pid, &[("TERM", "xterm")]);
    assert!(bold.contains("\x1b[1m"), "{bold:?}");
    let (cut, _) = both(&[], pid, &narrow);
    assert!(cut.lines().any(|l| l.ends_with('+')), "{cut}");
    assert!(cut.lines().all(|l| l.chars().count() <= 24), "{cut}");

    // foster's own layout, structurally: the same processes, threads, groups and users.
    let theirs = pstree_facts(&run("pstree", &["-p", "-g", "-u", "-t", "-c"], pid, &wide));
    let ours = foster_facts(&run(
        env!("CARGO_BIN_EXE_foster"),
        &["tree", "-g", "-u", "-t", "--root"],
        pid,
        &wide,
    ));
    assert_eq!(ours, theirs);
    assert_eq!(ours.len(), if threads { 8 } else { 5 }, "{ours:?}");
    // -s and -h in foster's layout: the caller's line (this test) is bold, above the root.
    let ours = run(
        env!("CARGO_BIN_EXE_foster"),
        &["tree", "-s", "-h", "--root"],
        pid,
        &[("TERM", "xterm")],
    );
    let me = format!("\x1b[1m{} ", std::process::id());
    assert!(ours.contains(&me), "{ours:?}");
    assert!(!ours.contains(&format!("\x1b[1m{pid} ")), "{ours:?}");
    eprintln!("{compared} option sets compared, threads {threads}");
}
