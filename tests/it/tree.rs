//! `foster tree` and the tree layer against real processes.
//!
//! Covers: a tree of processes with hostile names (set with `prctl(PR_SET_NAME)` and by exec
//! through a symlink with such a name) read back by the real binary as JSON with the parent links
//! the test created; text and dot output free of raw control bytes; JSON with C1 controls and
//! bidi overrides escaped yet the exact name; a missing `--root` as a clear
//! error; the diff of two scans across a spawn, an exit, a zombie, an exec and a reparent to a
//! subreaper; pids vanishing between listing and reading; a procfs-like directory with unreadable,
//! empty and unparsable entries. Forked children do only async-signal-safe work (raw syscalls on
//! precomputed data), wait on pipe barriers, and every test tears down what it started by pid and
//! checks that nothing is left. `--dot` boxes of a real zombie, stopped process, supervisor and
//! helper styled by state and role.

use std::ffi::{CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use foster::base::sanitize::escape;
use foster::base::sys::{PollFd, errno, poll_until};
use foster::process::identity::Identity;
use foster::process::tree::{Change, ScanOptions, Scanner, Snapshot, diff};
use serde_json::Value;

use crate::common;
use common::child::Group;
use common::fuse::HeldExec;

/// Tests that fork without exec run one at a time, so that no other test's child holds a copy of
/// their pipes.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn foster() -> Command {
    Command::new(env!("CARGO_BIN_EXE_foster"))
}

/// A close-on-exec pipe: (read end, write end).
fn pipe() -> (i32, i32) {
    let mut fds = [0; 2];
    assert_eq!(
        // SAFETY: pipe2 fills a stack array of two ints.
        unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) },
        0,
        "pipe2"
    );
    (fds[0], fds[1])
}

fn close(fd: i32) {
    // SAFETY: closing a descriptor this process owns.
    unsafe { libc::close(fd) };
}

// ---- async-signal-safe helpers for forked children: raw syscalls only, no allocation ----

fn child_set_name(name: &CString) {
    // SAFETY: a NUL-terminated name prepared before fork.
    unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr() as libc::c_ulong, 0, 0, 0) };
}

/// Blocks until `fd` reaches end of file or yields a byte.
fn child_wait(fd: i32) {
    let mut b = 0u8;
    loop {
        // SAFETY: reads one byte into a stack variable.
        let n = unsafe { libc::read(fd, (&raw mut b).cast(), 1) };
        if n < 0 && errno() == libc::EINTR {
            continue;
        }
        return;
    }
}

fn child_write(fd: i32) {
    let b = 1u8;
    // SAFETY: writes one byte from a stack variable.
    unsafe { libc::write(fd, (&raw const b).cast(), 1) };
}

fn child_reap(pid: i32) {
    // SAFETY: waits for an own child.
    while unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) } < 0 && errno() == libc::EINTR {}
}

fn child_exit(code: i32) -> ! {
    // SAFETY: ends the forked child without running the parent's atexit handlers.
    unsafe { libc::_exit(code) }
}

/// Says it is ready (one byte on `ready`), closes that end, and exits 0 once `hold` yields a
/// byte or ends.
fn child_ready_then_hold(ready: i32, hold: i32) -> ! {
    child_write(ready);
    close(ready);
    child_wait(hold);
    child_exit(0)
}

/// Closes its copy of `ready` (its readiness is that close) and exits 0 once `release` yields a
/// byte or ends.
fn child_hold(ready: i32, release: i32) -> ! {
    close(ready);
    child_wait(release);
    child_exit(0)
}

fn fork() -> i32 {
    // SAFETY: the children below only make raw syscalls on precomputed data.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork");
    pid
}

// ---- test-side helpers ----

/// Reads one byte from `fd`, or end of file; fails the test after `secs` seconds.
fn read_deadline(fd: i32, secs: u64) -> Option<u8> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "barrier not reached within {secs} s");
        if !matches!(
            poll_until(&mut [PollFd::input(fd)], Some(deadline)),
            Ok(1..)
        ) {
            continue;
        }
        let mut b = 0u8;
        // SAFETY: one byte into a stack variable.
        let n = unsafe { libc::read(fd, (&raw mut b).cast(), 1) };
        match n {
            1 => return Some(b),
            0 => return None,
            _ => continue,
        }
    }
}

/// Asserts that none of these processes exists any more.
fn assert_all_gone(ids: &[Identity]) {
    for id in ids {
        assert!(!id.is_alive(), "process {id} was left behind");
    }
}

fn no_raw_control(what: &str, out: &[u8]) {
    for (i, &b) in out.iter().enumerate() {
        assert!(
            b == b'\n' || !(b < 0x20 || b == 0x7f),
            "{what}: raw control byte {b:#04x} at offset {i}"
        );
    }
    let text = String::from_utf8(out.to_vec()).unwrap_or_else(|_| panic!("{what}: not UTF-8"));
    assert!(
        !text.chars().any(|c| c != '\n' && c.is_control()),
        "{what}: control character"
    );
}

/// `cat`, the exec target: it reads a barrier pipe as its standard input and ends on its own
/// when the pipe closes (no reliance on signals another process might also send to `sleep`).
fn cat_path() -> CString {
    for p in ["/usr/bin/cat", "/bin/cat"] {
        if std::path::Path::new(p).exists() {
            return CString::new(p).unwrap();
        }
    }
    panic!("no cat binary");
}

const NAME_A: &[u8] = b") (x) y";
const NAME_B: &[u8] = b"\x1b]0;owned\x07";
const NAME_D: &[u8] = b"new\nline\xff\xfe";
const NAME_E: &[u8] = b"exactly15bytes!";
const LINK: &[u8] = b"sym) (\xff\x1b[1mlink-long";
const ARGV0: &[u8] = b"argv0 \x1b]0;owned\x07 \xff(";

fn by_comm<'a>(nodes: &'a [Value], comm: &[u8]) -> &'a Value {
    let want = String::from_utf8_lossy(comm);
    nodes
        .iter()
        .find(|n| n["comm"] == *want)
        .unwrap_or_else(|| panic!("no child named {want:?} among {nodes:?}"))
}

/// An identity as foster's JSON spells it, `{"pid": N, "start_time": T}`.
fn json(id: Identity) -> Value {
    serde_json::json!({"pid": id.pid, "start_time": id.start_time})
}

#[test]
fn json_of_a_hostile_tree_matches_what_was_built() {
    let _serial = serial();
    assert_eq!(NAME_E.len(), 15);
    let dir = common::Dir::new("tree", "hostile");
    let link = dir.0.join(OsStr::from_bytes(LINK));
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(OsStr::from_bytes(cat_path().as_bytes()), &link).unwrap();

    // Everything the children need, computed before fork.
    let name_a = CString::new(NAME_A).unwrap();
    let name_b = CString::new(NAME_B).unwrap();
    let name_d = CString::new(NAME_D).unwrap();
    let name_e = CString::new(NAME_E).unwrap();
    let link_c = CString::new(link.as_os_str().as_bytes()).unwrap();
    let argv0 = CString::new(ARGV0).unwrap();
    let argv = [argv0.as_ptr(), std::ptr::null()];
    let (ready_r, ready_w) = pipe();
    let (release_r, release_w) = pipe();

    let a = fork();
    if a == 0 {
        // A: leads its own group, names itself, starts B (with D below it), C and E.
        // SAFETY: raw syscalls only.
        unsafe { libc::setpgid(0, 0) };
        close(release_w);
        close(ready_r);
        child_set_name(&name_a);
        let b = fork();
        if b == 0 {
            child_set_name(&name_b);
            let d = fork();
            if d == 0 {
                child_set_name(&name_d);
                child_hold(ready_w, release_r);
            }
            close(ready_w);
            child_wait(release_r);
            child_reap(d);
            child_exit(0);
        }
        let c = fork();
        if c == 0 {
            // The exec closes C's copy of `ready_w` (close-on-exec): the barrier covers the exec.
            // `cat` reads the release pipe and ends when it closes.
            // SAFETY: precomputed path and argv; dup2, fcntl and execv are async-signal-safe.
            unsafe {
                let _ = common::fd::place(&[(release_r, 0)]);
                libc::execv(link_c.as_ptr(), argv.as_ptr());
            }
            child_exit(127);
        }
        let e = fork();
        if e == 0 {
            child_set_name(&name_e);
            child_hold(ready_w, release_r);
        }
        close(ready_w);
        child_wait(release_r);
        // SAFETY: signals an own child.
        unsafe { libc::kill(c, libc::SIGKILL) };
        child_reap(b);
        child_reap(c);
        child_reap(e);
        child_exit(0);
    }
    let mut group = Group::new(a);
    close(ready_w);
    close(release_r);
    // End of file on `ready` once all five have named themselves (or exec'd).
    assert_eq!(read_deadline(ready_r, 20), None);
    close(ready_r);

    let out = foster()
        .args(["tree", "--json", "--root", &a.to_string()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["version"], 1);
    let roots = doc["roots"].as_array().unwrap();
    assert_eq!(roots.len(), 1);
    let ra = &roots[0];
    let me = std::process::id() as i32;
    assert_eq!(ra["pid"], a);
    assert_eq!(ra["ppid"], me);
    assert_eq!(ra["parent"], json(Identity::current().unwrap()));
    assert_eq!(ra["comm"], ") (x) y");
    assert_eq!(ra["state"], "S");
    assert_eq!(ra["identity"], json(Identity::of(a).unwrap()));
    assert!(ra["start_time"].as_u64().unwrap() > 0);

    let kids = ra["children"].as_array().unwrap();
    assert_eq!(kids.len(), 3, "{kids:?}");
    let pids: Vec<i64> = kids.iter().map(|k| k["pid"].as_i64().unwrap()).collect();
    assert!(
        pids.windows(2).all(|w| w[0] < w[1]),
        "children by pid: {pids:?}"
    );
    for k in kids {
        assert_eq!(k["ppid"], a);
        assert_eq!(k["parent"], ra["identity"]);
    }
    let rb = by_comm(kids, NAME_B);
    assert_eq!(rb["comm"], "\u{1b}]0;owned\u{7}");
    assert!(rb.get("comm_escaped").is_none());
    let rd = &rb["children"].as_array().unwrap()[0];
    assert_eq!(rb["children"].as_array().unwrap().len(), 1);
    assert_eq!(rd["ppid"], rb["pid"]);
    assert_eq!(rd["comm"], String::from_utf8_lossy(NAME_D).as_ref());
    assert_eq!(rd["comm_escaped"], escape(NAME_D));
    let re = by_comm(kids, NAME_E);
    assert_eq!(re["comm"], "exactly15bytes!");
    // The exec'd one is named after the link's first 15 bytes, with the arguments it was given.
    let comm_c = &LINK[..15];
    let rc = by_comm(kids, comm_c);
    assert_eq!(rc["comm_escaped"], escape(comm_c));
    assert_eq!(rc["cmdline"][0], String::from_utf8_lossy(ARGV0).as_ref());
    assert_eq!(rc["cmdline"].as_array().unwrap().len(), 1);
    assert_eq!(rc["cmdline_escaped"][0], escape(ARGV0));
    for n in [ra, rb, rd, re, rc] {
        assert!(n["children"].is_array());
        let pid = n["pid"].as_i64().unwrap() as i32;
        assert_eq!(n["identity"], json(Identity::of(pid).unwrap()));
    }
    let ids: Vec<Identity> = [ra, rb, rd, re, rc]
        .iter()
        .map(|n| serde_json::from_value(n["identity"].clone()).unwrap())
        .collect();

    // Text and dot: escaped, never raw.
    for args in [
        vec!["tree".to_string(), "--root".into(), a.to_string()],
        vec!["tree".into(), "-a".into(), "--root".into(), a.to_string()],
        vec![
            "tree".into(),
            "--dot".into(),
            "-a".into(),
            "--root".into(),
            a.to_string(),
        ],
        vec!["tree".into()],
        vec!["tree".into(), "-a".into()],
    ] {
        let out = foster().args(&args).output().unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        no_raw_control(&format!("{args:?}"), &out.stdout);
        let text = String::from_utf8(out.stdout).unwrap();
        if args.len() > 1 {
            assert!(
                text.contains(&escape(NAME_B)) || text.contains("\\\\e]0;owned"),
                "{text}"
            );
            assert!(text.contains(&a.to_string()));
        }
    }
    let text = String::from_utf8(
        foster()
            .args(["tree", "--root", &a.to_string()])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let first = text.lines().next().unwrap();
    assert_eq!(first, format!("{a} S ) (x) y"));
    assert!(
        text.contains(&format!("{} S new\\nline\\xff\\xfe", rd["pid"])),
        "{text}"
    );

    // Tear down: release the barrier; C (cat) and E end on it, A reaps B (which reaps D), C and E.
    close(release_w);
    let status = group.reap();
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "A ended with {status:#x}"
    );
    assert_all_gone(&ids);
}

/// A name with a one-character CSI (U+009B, bytes C2 9B), a C1 NEL, DEL, a bidi override: valid
/// UTF-8, so JSON carries it exactly, and none of it may reach a terminal raw.
const NAME_C1: &str = "c1\u{9b}2J\u{85}\u{7f}\u{202e}x";

#[test]
fn json_escapes_c1_controls_and_bidi_overrides_and_keeps_the_exact_name() {
    let _serial = serial();
    assert!(NAME_C1.len() <= 15);
    let name = CString::new(NAME_C1).unwrap();
    let (ready_r, ready_w) = pipe();
    let (release_r, release_w) = pipe();
    let a = fork();
    if a == 0 {
        // SAFETY: raw syscalls only.
        unsafe { libc::setpgid(0, 0) };
        close(release_w);
        close(ready_r);
        child_set_name(&name);
        child_hold(ready_w, release_r);
    }
    let mut group = Group::new(a);
    close(ready_w);
    close(release_r);
    assert_eq!(read_deadline(ready_r, 20), None);
    close(ready_r);
    let id = Identity::of(a).unwrap();
    assert_eq!(
        std::fs::read(format!("/proc/{a}/comm")).unwrap(),
        format!("{NAME_C1}\n").as_bytes(),
        "the kernel kept the name"
    );

    for args in [
        vec![
            "tree".to_string(),
            "--json".into(),
            "--root".into(),
            a.to_string(),
        ],
        vec!["tree".into(), "--json".into()],
    ] {
        let out = foster().args(&args).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            !out.stdout.windows(2).any(|w| w == [0xc2, 0x9b]),
            "{args:?}: a raw U+009B (C2 9B) in the output"
        );
        no_raw_control(&format!("{args:?}"), &out.stdout);
        let text = String::from_utf8(out.stdout.clone()).unwrap();
        assert!(
            !text.contains('\u{202e}') && !text.contains('\u{85}'),
            "{args:?}: a raw bidi override or C1 control"
        );
        assert!(text.contains(r"c1\u009b2J\u0085\u007f\u202ex"), "{text}");
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        let mut stack: Vec<&Value> = doc["roots"].as_array().unwrap().iter().collect();
        let mut found = None;
        while let Some(n) = stack.pop() {
            if n["pid"] == a {
                found = Some(n);
            }
            stack.extend(n["children"].as_array().unwrap());
        }
        let n = found.expect("the named process is in the tree");
        assert_eq!(n["comm"], NAME_C1, "JSON carries the exact name");
        assert!(n.get("comm_escaped").is_none(), "the name is UTF-8");
    }

    close(release_w);
    let status = group.reap();
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
    assert_all_gone(&[id]);
}

#[test]
fn missing_root_is_a_clear_error() {
    let pid = i32::MAX.to_string();
    let out = foster().args(["tree", "--root", &pid]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(
        err,
        format!("foster: error: no process with pid {pid} (given as --root)\n")
    );
    let out = foster().args(["tree", "--json", "--dot"]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "--json and --dot together are a usage error"
    );
    let out = foster().args(["tree", "--help"]).output().unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    for opt in ["--root", "--json", "--dot", "--arguments", "--version"] {
        assert!(help.contains(opt), "help lacks {opt}: {help}");
    }
}

/// JSON shows each process's owner (the one form that does: text and dot skip reading it).
#[test]
fn json_shows_the_owner() {
    if common::skip::unless_root("needs root to start a process of another user") {
        return;
    }
    let _serial = serial();
    const OWNER: u32 = 4321;
    let (ready_r, ready_w) = pipe();
    let (release_r, release_w) = pipe();
    let child = fork();
    if child == 0 {
        close(ready_r);
        close(release_w);
        // SAFETY: raw syscalls only. Dumpable again after the uid change, so that its /proc
        // entries belong to its new owner rather than to root.
        unsafe {
            if libc::setresgid(OWNER, OWNER, OWNER) != 0
                || libc::setresuid(OWNER, OWNER, OWNER) != 0
            {
                child_exit(1);
            }
            libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0);
        }
        child_write(ready_w);
        child_wait(release_r);
        child_exit(0);
    }
    let mut group = Group::new(child);
    close(ready_w);
    close(release_r);
    assert_eq!(
        read_deadline(ready_r, 20),
        Some(1),
        "the child changed its uid"
    );
    close(ready_r);
    let out = foster()
        .args(["tree", "--json", "--root", &child.to_string()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["roots"][0]["pid"], child);
    assert_eq!(doc["roots"][0]["uid"], OWNER);
    let text = foster()
        .args(["tree", "--root", &child.to_string()])
        .output()
        .unwrap();
    assert!(text.status.success());
    assert!(String::from_utf8_lossy(&text.stdout).starts_with(&format!("{child} S ")));
    close(release_w);
    let status = group.reap();
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{status}"
    );
}

#[test]
fn whole_system_json_is_consistent() {
    let out = foster().args(["tree", "--json"]).output().unwrap();
    assert!(out.status.success());
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let me = std::process::id() as i64;
    let mut seen = 0;
    let mut found_me = false;
    let mut stack: Vec<(&Value, Option<i64>)> = doc["roots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r, None))
        .collect();
    while let Some((n, parent)) = stack.pop() {
        seen += 1;
        if let Some(p) = parent {
            assert_eq!(n["ppid"], p, "{n}");
        }
        found_me |= n["pid"] == me;
        for k in [
            "pid",
            "ppid",
            "start_time",
            "state",
            "comm",
            "cmdline",
            "children",
        ] {
            assert!(n.get(k).is_some(), "node lacks {k}: {n}");
        }
        let pid = n["pid"].as_i64().unwrap();
        stack.extend(
            n["children"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| (c, Some(pid))),
        );
    }
    assert!(found_me, "the test process is in the tree");
    assert!(seen > 3);
}

#[test]
fn diff_of_real_processes_sees_every_change() {
    let _serial = serial();
    let names: Vec<CString> = [
        "fx-sup",
        "fx-mid",
        "fx-leaf",
        "fx-zombie",
        "fx-exec",
        "fx-new",
    ]
    .iter()
    .map(|n| CString::new(*n).unwrap())
    .collect();
    let cat = cat_path();
    let cat_arg0 = CString::new("cat").unwrap();
    let cat_argv = [cat_arg0.as_ptr(), std::ptr::null()];
    let (ready_r, ready_w) = pipe();
    let (go_r, go_w) = pipe();
    let (done_r, done_w) = pipe();
    let (hold_r, hold_w) = pipe();
    let (xgo_r, xgo_w) = pipe();
    let (xdone_r, xdone_w) = pipe();
    // What every process below S closes first (X keeps `xdone_w` until its exec closes it).
    let below = [go_r, go_w, done_r, done_w, hold_w, xgo_w, ready_r, xdone_r];

    let s = fork();
    if s == 0 {
        // S: a subreaper leading its own group; runs the scenario step by step.
        // SAFETY: raw syscalls only, on precomputed data.
        unsafe {
            libc::setpgid(0, 0);
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        }
        child_set_name(&names[0]);
        close(go_w);
        close(done_r);
        let idle = |name: &CString, keep_xdone: bool| {
            below.iter().for_each(|&fd| close(fd));
            if !keep_xdone {
                close(xdone_w);
                close(xgo_r);
            }
            child_set_name(name);
        };
        let m = fork();
        if m == 0 {
            idle(&names[1], false);
            let l = fork();
            if l == 0 {
                child_set_name(&names[2]);
                child_ready_then_hold(ready_w, hold_r);
            }
            child_ready_then_hold(ready_w, hold_r);
        }
        let z = fork();
        if z == 0 {
            idle(&names[3], false);
            child_ready_then_hold(ready_w, hold_r);
        }
        let x = fork();
        if x == 0 {
            idle(&names[4], true);
            child_write(ready_w);
            close(ready_w);
            child_wait(xgo_r);
            // `cat` reads the hold pipe and ends when it closes.
            // SAFETY: precomputed path and argv; dup2, fcntl and execv are async-signal-safe.
            unsafe {
                let _ = common::fd::place(&[(hold_r, 0)]);
                libc::execv(cat.as_ptr(), cat_argv.as_ptr());
            }
            child_exit(127);
        }
        close(xdone_w);
        close(xgo_r);
        for _ in 0..4 {
            child_wait(ready_r);
        }
        child_write(done_w);
        child_wait(go_r);
        // M exits and is reaped: L is adopted by S.
        // SAFETY: raw syscalls on own children.
        unsafe { libc::kill(m, libc::SIGKILL) };
        child_reap(m);
        // Z exits and is left unreaped.
        // SAFETY: a signal to a child of this test's own tree, not yet reaped.
        unsafe { libc::kill(z, libc::SIGKILL) };
        // SAFETY: a zeroed siginfo is a valid output buffer.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid with WNOWAIT fills `info`, a stack struct, and consumes nothing.
        unsafe {
            libc::waitid(
                libc::P_PID,
                z as u32,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        // X exec's; end of file on `xdone` once it has.
        close(xgo_w);
        child_wait(xdone_r);
        // N is born.
        let n = fork();
        if n == 0 {
            idle(&names[5], false);
            child_ready_then_hold(ready_w, hold_r);
        }
        child_wait(ready_r);
        child_write(done_w);
        // Teardown when the test closes `go`.
        child_wait(go_r);
        close(hold_w);
        // SAFETY: a signal to a child of this test's own tree, not yet reaped.
        unsafe { libc::kill(x, libc::SIGKILL) };
        // SAFETY: reaps every child, adopted ones included, until there is none.
        while unsafe { libc::waitpid(-1, std::ptr::null_mut(), 0) } > 0 || errno() == libc::EINTR {}
        child_exit(0);
    }
    let mut group = Group::new(s);
    for fd in [
        ready_r, ready_w, go_r, done_w, hold_r, hold_w, xgo_r, xgo_w, xdone_r, xdone_w,
    ] {
        close(fd);
    }
    assert_eq!(read_deadline(done_r, 20), Some(1), "phase one ready");

    let mut scanner = Scanner::new(ScanOptions::default()).unwrap();
    let before: Snapshot = scanner.scan().unwrap().subtree(s).unwrap();
    let find = |snap: &Snapshot, name: &str| {
        snap.nodes()
            .find(|n| n.comm == name.as_bytes())
            .unwrap_or_else(|| panic!("no {name} in the tree"))
            .identity
    };
    let sup = find(&before, "fx-sup");
    let mid = find(&before, "fx-mid");
    let leaf = find(&before, "fx-leaf");
    let zombie = find(&before, "fx-zombie");
    let exec = find(&before, "fx-exec");
    assert_eq!(before.len(), 5);
    assert_eq!(before.get(&leaf).unwrap().parent, Some(mid));

    child_write(go_w);
    assert_eq!(read_deadline(done_r, 20), Some(1), "phase two done");
    let after = scanner.scan().unwrap().subtree(s).unwrap();
    let newborn = find(&after, "fx-new");
    let changes = diff(&before, &after);

    let expected = [
        Change::Exited {
            identity: mid,
            comm: b"fx-mid".to_vec(),
        },
        Change::Spawned {
            identity: newborn,
            parent: Some(sup),
            comm: b"fx-new".to_vec(),
        },
        Change::BecameZombie {
            identity: zombie,
            parent: Some(sup),
            comm: b"fx-zombie".to_vec(),
        },
        Change::Reparented {
            identity: leaf,
            from: Some(mid),
            to: Some(sup),
        },
    ];
    for e in &expected {
        assert!(changes.contains(e), "missing {e:?} in {changes:#?}");
    }
    let execd: Vec<&Change> = changes
        .iter()
        .filter(|c| matches!(c, Change::Execd { .. }))
        .collect();
    assert_eq!(execd.len(), 1, "{changes:#?}");
    match execd[0] {
        Change::Execd {
            identity,
            old_comm,
            new_comm,
            new_cmdline,
            ..
        } => {
            assert_eq!(*identity, exec);
            assert_eq!(old_comm, b"fx-exec");
            assert_eq!(new_comm, b"cat");
            assert_eq!(new_cmdline, &vec![b"cat".to_vec()]);
        }
        _ => unreachable!(),
    }
    assert_eq!(changes.len(), 5, "{changes:#?}");
    assert_eq!(after.get(&leaf).unwrap().parent, Some(sup));
    // The events serialize for the supervisor and the dashboard.
    let line = serde_json::to_string(&changes).unwrap();
    assert!(line.contains("\"change\":\"reparented\""), "{line}");

    close(go_w);
    let status = group.reap();
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "S ended with {status:#x}"
    );
    close(done_r);
    assert_all_gone(&[sup, mid, leaf, zombie, exec, newborn]);
}

#[test]
fn pids_vanishing_mid_scan_are_counted_not_fatal() {
    let _serial = serial();
    // A pid that existed and is gone: forked, exited, reaped.
    let dead = fork();
    if dead == 0 {
        child_exit(0);
    }
    let mut g = Group::new(dead);
    g.reap();
    let me = std::process::id() as i32;
    let mut scanner = Scanner::new(ScanOptions::default()).unwrap();
    let snap = scanner.scan_pids(&[1, me, dead]);
    assert_eq!(snap.stats.listed, 3);
    assert_eq!(snap.stats.vanished, 1);
    assert_eq!(snap.stats.read, 2);
    assert!(snap.by_pid(me).is_some());
    assert!(snap.by_pid(dead).is_none());
    // A full scan after it is whole.
    assert!(scanner.scan().unwrap().by_pid(me).is_some());
}

#[test]
fn unreadable_empty_and_garbage_entries_are_skipped() {
    let dir = common::Dir::new("tree", "fakeproc");
    let root = &dir.0;
    let stat = |pid: i32, name: &str, ppid: i32, flags: u64| {
        format!(
            "{pid} ({name}) S {ppid} {pid} {pid} 0 -1 {flags} 0 0 0 0 3 4 0 0 20 0 1 0 {} 1000 2 \
             0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
            100 + pid
        )
    };
    let put = |rel: &str, content: &[u8]| {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    };
    put("1/stat", stat(1, "init", 0, 0).as_bytes());
    put("1/cmdline", b"/sbin/init\0splash\0");
    put("2/stat", stat(2, "kthreadd", 0, 0x0020_0000).as_bytes());
    put("2/cmdline", b"must-not-be-read\0");
    put("10/stat", stat(10, "a) b", 1, 0).as_bytes());
    std::fs::create_dir_all(root.join("11")).unwrap(); // vanished: no stat
    put("12/stat", b""); // vanished between open and read
    put("13/stat", b"13 garbage"); // unparsable
    put("14/stat", stat(14, "locked", 1, 0).as_bytes());
    put("self/stat", stat(99, "self", 1, 0).as_bytes()); // not a pid: not listed
    // SAFETY: geteuid has no preconditions.
    let root_user = unsafe { libc::geteuid() } == 0;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(root.join("14/stat"), std::fs::Permissions::from_mode(0o000)).unwrap();

    let mut scanner = Scanner::new(ScanOptions {
        cmdline: true,
        proc_root: root.clone(),
        ..ScanOptions::default()
    })
    .unwrap();
    let snap = scanner.scan().unwrap();
    let s = snap.stats;
    assert_eq!(s.listed, 7, "{s:?}");
    assert_eq!(s.vanished, 2, "{s:?}");
    assert_eq!(s.failed, 1, "{s:?}");
    if root_user {
        // Root reads a file of mode 000: only the denial count differs.
        assert_eq!((s.read, s.denied), (4, 0), "{s:?}");
    } else {
        assert_eq!((s.read, s.denied), (3, 1), "{s:?}");
    }
    let init = snap.by_pid(1).unwrap();
    assert_eq!(
        &init.cmdline[..],
        &[b"/sbin/init".to_vec(), b"splash".to_vec()]
    );
    assert_eq!(init.cpu_ticks, 7);
    assert_eq!(init.rss_bytes, 2 * procfs::page_size());
    let kt = snap.by_pid(2).unwrap();
    assert!(kt.kernel_thread);
    assert!(
        kt.cmdline.is_empty(),
        "a kernel thread's cmdline is not read"
    );
    let a = snap.by_pid(10).unwrap();
    assert_eq!(a.comm, b"a) b");
    assert_eq!(snap.parent(&a.identity).unwrap().pid, 1);
    // 10 has no cmdline file: shown empty, counted.
    assert!(a.cmdline.is_empty());
    assert!(s.cmdline_unreadable >= 1, "{s:?}");
}

/// A process caught in the middle of `execve` has its new name but not yet its argument area
/// (`arg_start` reads 0 and `cmdline` is empty): that empty command line is not kept once the
/// argument area appears (it was, and the dashboard showed `[sleep]` for good).
#[test]
fn a_command_line_read_mid_exec_is_read_again_once_the_arguments_exist() {
    let dir = common::Dir::new("tree", "fakeproc-exec");
    let root = &dir.0;
    // Fields 1..=52 of a stat line, with arg_start (field 48) as given.
    let stat = |pid: i32, name: &str, arg_start: u64| {
        let mut f: Vec<String> = (1..=52).map(|_| "0".to_string()).collect();
        f[0] = pid.to_string();
        f[1] = format!("({name})");
        f[2] = "S".into();
        f[3] = "1".into();
        f[21] = "4242".into(); // start time
        f[47] = arg_start.to_string();
        f.join(" ") + "\n"
    };
    let put = |rel: &str, content: &[u8]| {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    };
    put("1/stat", stat(1, "init", 4096).as_bytes());
    put("1/cmdline", b"/sbin/init\0");
    // Mid-exec: the new name, no argument area yet, an empty command line.
    put("20/stat", stat(20, "sleep", 0).as_bytes());
    put("20/cmdline", b"");
    let mut scanner = Scanner::new(ScanOptions {
        cmdline: true,
        proc_root: root.clone(),
        ..ScanOptions::default()
    })
    .unwrap();
    assert!(
        scanner
            .scan()
            .unwrap()
            .by_pid(20)
            .unwrap()
            .cmdline
            .is_empty()
    );
    // The exec completes: same identity and name, the argument area set.
    put("20/stat", stat(20, "sleep", 0x7ffd_0000).as_bytes());
    put("20/cmdline", b"sleep\x0086400\0");
    let snap = scanner.scan().unwrap();
    assert_eq!(
        &snap.by_pid(20).unwrap().cmdline[..],
        &[b"sleep".to_vec(), b"86400".to_vec()],
        "the empty command line read mid-exec was kept"
    );
    // Unchanged after that: served from the cache, not read again.
    let reads = scanner.scan().unwrap().stats.cmdline_reads;
    assert_eq!(
        reads, 0,
        "an unchanged process's command line was read again"
    );
}

/// A forked copy of this test that, once told to go, execs `sh -c SCRIPT` from a file system of
/// the test's own (`common::fuse`) with one entry as its whole environment, and is held in the
/// middle of that exec until released; the script then says so on a pipe, and ends when its
/// hold pipe closes.
struct HeldChild {
    pid: i32,
    /// The command line it execs.
    argv: Vec<Vec<u8>>,
    go_w: i32,
    up_r: i32,
    hold_w: i32,
    /// Dropped before the guard: a held process can only end once released.
    release: common::fuse::Release,
    guard: Group,
    held: HeldExec,
    _dir: common::Dir,
}

impl HeldChild {
    /// None (the test skips, the reason printed) when the file system cannot be had.
    fn start(name: &str, env: &std::ffi::CStr) -> Option<HeldChild> {
        let d = common::Dir::new("tree", name);
        let mut held = common::fuse::held_shell(&d, "held-program")?;
        let prog = CString::new(held.path().as_os_str().as_bytes()).unwrap();
        let script = c"echo up >&5; exec 5>&-; read x <&6";
        let argv = [
            prog.as_ptr(),
            c"-c".as_ptr(),
            script.as_ptr(),
            std::ptr::null(),
        ];
        let envp = [env.as_ptr(), std::ptr::null()];
        let (go_r, go_w) = pipe();
        let (up_r, up_w) = pipe();
        let (hold_r, hold_w) = pipe();
        let pid = fork();
        if pid == 0 {
            // SAFETY: a raw syscall: a group of its own, for the guard below to kill.
            unsafe { libc::setpgid(0, 0) };
            child_wait(go_r);
            // SAFETY: raw syscalls on data prepared before fork; dup2 clears close-on-exec.
            unsafe {
                let _ = common::fd::place(&[(up_w, 5), (hold_r, 6)]);
                libc::execve(prog.as_ptr(), argv.as_ptr(), envp.as_ptr());
            }
            child_exit(127);
        }
        let guard = Group::new(pid);
        let release = held.releaser();
        for fd in [go_r, up_w, hold_r] {
            close(fd);
        }
        Some(HeldChild {
            pid,
            argv: vec![
                prog.as_bytes().to_vec(),
                b"-c".to_vec(),
                script.to_bytes().to_vec(),
            ],
            go_w,
            up_r,
            hold_w,
            release,
            guard,
            held,
            _dir: d,
        })
    }

    /// Lets it exec, and waits until it is held in the middle.
    fn go(&mut self) {
        child_write(self.go_w);
        assert_eq!(self.held.wait_held(Duration::from_secs(20)), self.pid);
    }

    /// Lets the exec go on, and waits until the program runs.
    fn release(&mut self) {
        self.release.release();
        assert_eq!(read_deadline(self.up_r, 20), Some(b'u'));
    }

    /// Ends the program (its hold pipe closed) and reaps it.
    fn end(mut self) {
        close(self.hold_w);
        close(self.go_w);
        self.guard.reap();
        close(self.up_r);
    }
}

/// A scanner reading on the calling thread alone (the held-exec tests read one process).
fn one_thread_scanner() -> Scanner {
    Scanner::new(ScanOptions {
        threads: 1,
        ..ScanOptions::default()
    })
    .unwrap()
}

/// A real process scanned before its exec (a forked copy of this test), in the middle of it
/// (held inside `execve` by a file system of the test's own, `common::fuse`: the new name, the
/// argument area placed but not yet filled, an empty command line) and after it: the command
/// line shown after the exec is the new program's. The one read in the middle was kept for good
/// (same identity, same name, same `arg_start`), and the dashboard showed `[sleep]`, `foster
/// ctl status` a bare `sh`.
#[test]
fn a_command_line_read_in_the_middle_of_a_real_exec_is_read_again_after_it() {
    let _g = serial();
    let Some(mut h) = HeldChild::start("heldexec", c"PATH=/usr/bin:/bin") else {
        return;
    };
    let pid = h.pid;
    let mut scanner = one_thread_scanner();
    let mine = std::env::args_os().next().unwrap();
    // Before the exec: a copy of this process, its command line this test's.
    let before = scanner.scan_pids(&[pid]).by_pid(pid).unwrap().clone();
    assert_eq!(before.cmdline[0], mine.as_bytes(), "{before:?}");
    assert!(!before.in_exec, "{before:?}");
    // In the middle of the exec.
    h.go();
    let middle = scanner.scan_pids(&[pid]).by_pid(pid).unwrap().clone();
    assert_eq!(middle.identity, before.identity, "exec keeps the identity");
    assert_eq!(middle.comm, b"held-program", "{middle:?}");
    assert!(middle.cmdline.is_empty(), "{middle:?}");
    assert!(middle.in_exec, "{middle:?}");
    // After it: the program runs and says so.
    h.release();
    let after = scanner.scan_pids(&[pid]).by_pid(pid).unwrap().clone();
    let want = h.argv.clone();
    assert_eq!(after.identity, before.identity);
    assert!(!after.in_exec, "{after:?}");
    assert_eq!(
        after.cmdline.to_vec(),
        want,
        "the command line read in the middle of the exec was kept"
    );
    // Read once more from the cache, unchanged.
    let again = scanner.scan_pids(&[pid]);
    assert_eq!(again.stats.cmdline_reads, 0, "{:?}", again.stats);
    assert_eq!(again.by_pid(pid).unwrap().cmdline.to_vec(), want);
    h.end();
    assert_all_gone(&[before.identity]);
}

/// An environment read of a process that was scanned before its exec and is in the middle of
/// it when its environment is read (held inside `execve`, `common::fuse`) is not taken for its
/// environment: the node is marked in the middle of an exec, to be read again after it. It was
/// kept, empty, for good: the demo's orphan, caught entering `exec sleep` between the
/// supervisor's two reads, was adopted with no helper.
#[test]
fn an_environment_read_that_meets_an_exec_is_read_again_after_it() {
    let _g = serial();
    let Some(mut h) = HeldChild::start("heldenv", c"FOSTER_HELPER=held") else {
        return;
    };
    let pid = h.pid;
    let mut scanner = one_thread_scanner();
    // Scanned before the exec: not in one.
    let before = scanner.scan_pids(&[pid]).by_pid(pid).unwrap().clone();
    assert!(!before.in_exec, "{before:?}");
    // Its environment read once it is in the middle of the exec.
    h.go();
    let mut met = before.clone();
    scanner.read_environ(&mut [&mut met], b"FOSTER_");
    assert!(met.environ.is_empty(), "{met:?}");
    assert!(
        met.in_exec,
        "an empty environment read in the middle of an exec was taken for the process's: {met:?}"
    );
    // After it: the new program's.
    h.release();
    let mut after = scanner.scan_pids(&[pid]).by_pid(pid).unwrap().clone();
    assert!(!after.in_exec, "{after:?}");
    scanner.read_environ(&mut [&mut after], b"FOSTER_");
    assert!(!after.in_exec, "{after:?}");
    assert_eq!(after.environ.to_vec(), vec![b"FOSTER_HELPER=held".to_vec()]);
    h.end();
    assert_all_gone(&[before.identity]);
}

/// A Subtree of this test process follows a parent that exits without being reaped (a
/// zombie): its child moves out of the subtree at once, and the next update says so while
/// reading only what changed.
#[test]
fn subtree_follows_a_zombie_parents_child_out() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;
    let _serial = serial();
    let dir = common::Dir::new("tree", "subtree");
    let hold = dir.fifo("hold");
    // P: starts G (`cat` holding the FIFO), prints G's pid, exits when told.
    let mut p = Command::new("/bin/sh")
        .arg("-c")
        .arg(format!("cat < {} & echo $!; read x", hold.display()))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let holder = std::fs::OpenOptions::new().write(true).open(&hold).unwrap(); // G runs
    let mut line = String::new();
    BufReader::new(p.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let g: i32 = line.trim().parse().unwrap();
    let p_pid = p.id() as i32;
    let me = std::process::id() as i32;
    let mut tree =
        foster::process::tree::Subtree::new(me, b"FOSTER_", ScanOptions::default()).unwrap();
    let (_, first) = tree.update().unwrap();
    let g_id = tree
        .snapshot()
        .identity_of(g)
        .expect("G below this process");
    assert_eq!(tree.snapshot().get(&g_id).unwrap().ppid, p_pid);
    assert_eq!(
        first.stat_reads, first.listed,
        "the first update reads everything"
    );
    // Nothing changed: only the parents of the subtree are read again.
    let (changes, quiet) = tree.update().unwrap();
    assert!(!changes.iter().any(|c| c.identity() == g_id), "{changes:?}");
    assert!(quiet.stat_reads < quiet.listed, "{quiet:?}");
    assert!(
        !changes.iter().any(|c| c.identity().pid == me),
        "the root did not move: {changes:?}"
    );
    // P exits; this test does not reap it yet.
    writeln!(p.stdin.take().unwrap(), "go").unwrap();
    // A pidfd of our own child: poll for its exit (not its reaping) with a deadline.
    let fd = foster::process::identity::pidfd_open(p_pid).unwrap();
    assert!(
        foster::process::identity::poll_readable(
            std::os::fd::AsRawFd::as_raw_fd(&fd),
            Some(std::time::Duration::from_secs(10))
        ),
        "P did not exit"
    );
    let (changes, _) = tree.update().unwrap();
    let moved = changes
        .iter()
        .find(|c| matches!(c, Change::Reparented { identity, .. } if *identity == g_id))
        .unwrap_or_else(|| panic!("G's move not seen: {changes:?}"));
    let Change::Reparented { from, .. } = moved else {
        unreachable!()
    };
    assert_eq!(from.map(|f| f.pid), Some(p_pid));
    assert!(!tree.snapshot().contains(&g_id), "G left the subtree");
    assert!(
        tree.snapshot().by_pid(p_pid).is_some_and(|n| n.is_zombie()),
        "P is still there, a zombie"
    );
    drop(holder); // G (cat) reads end of file and ends
    p.wait().unwrap();
    common::wait_reaped(g_id, "G");
}

/// `tree::children_of` and `tree::descendants_of`, the one-off questions the library and the
/// tests ask, on a tree built for them: A with children B (with D below it) and C, a zombie A has
/// not reaped yet.
#[test]
fn children_and_descendants_of_one_process() {
    let _serial = serial();
    let (ready_r, ready_w) = pipe();
    let (release_r, release_w) = pipe();
    let a = fork();
    if a == 0 {
        // A: its own group; starts B (and through it D), then C, which ends at once.
        // SAFETY: raw syscalls only.
        unsafe { libc::setpgid(0, 0) };
        close(release_w);
        close(ready_r);
        let b = fork();
        if b == 0 {
            let d = fork();
            if d == 0 {
                child_hold(ready_w, release_r);
            }
            close(ready_w);
            child_wait(release_r);
            child_reap(d);
            child_exit(0);
        }
        let c = fork();
        if c == 0 {
            child_exit(0);
        }
        // C is a zombie once it has ended and until A reaps it.
        // SAFETY: a zeroed siginfo is a valid output buffer; waits for an own child.
        unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            libc::waitid(
                libc::P_PID,
                c as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            );
        }
        close(ready_w);
        child_wait(release_r);
        child_reap(b);
        child_reap(c);
        child_exit(0);
    }
    let mut group = Group::new(a);
    close(ready_w);
    close(release_r);
    // End of file once A, B and D have started and C has ended.
    assert_eq!(read_deadline(ready_r, 20), None);
    close(ready_r);

    let kids = foster::process::tree::children_of(a).unwrap();
    assert_eq!(kids.len(), 2, "A's children: {kids:?}");
    assert!(kids[0].pid < kids[1].pid, "children by pid: {kids:?}");
    assert!(kids.iter().all(|k| k.ppid == a));
    let zombies: Vec<i32> = kids
        .iter()
        .filter(|k| k.is_zombie())
        .map(|k| k.pid)
        .collect();
    assert_eq!(zombies.len(), 1, "C is among them, a zombie: {kids:?}");
    let c = zombies[0];
    let b = kids.iter().find(|k| k.pid != c).unwrap().pid;

    let below = foster::process::tree::descendants_of(a).unwrap();
    let pids: Vec<i32> = below.iter().map(|n| n.pid).collect();
    assert_eq!(below.len(), 3, "A's descendants: {pids:?}");
    assert!(!pids.contains(&a), "A itself is not among its descendants");
    let d = below
        .iter()
        .find(|n| n.ppid == b)
        .expect("D, B's child")
        .pid;
    let at = |pid| pids.iter().position(|&p| p == pid).unwrap();
    assert!(at(b) < at(d), "parents before their children: {pids:?}");
    assert!(pids.contains(&c));
    assert_eq!(
        foster::process::tree::children_of(b)
            .unwrap()
            .iter()
            .map(|n| n.pid)
            .collect::<Vec<_>>(),
        vec![d]
    );
    assert!(foster::process::tree::children_of(d).unwrap().is_empty());
    assert!(foster::process::tree::descendants_of(d).unwrap().is_empty());

    // From this process: A, then everything below it.
    let me = std::process::id() as i32;
    let mine: Vec<i32> = foster::process::tree::descendants_of(me)
        .unwrap()
        .iter()
        .map(|n| n.pid)
        .collect();
    let pos = |pid| mine.iter().position(|&p| p == pid);
    assert!(
        pos(a) < pos(b) && pos(b) < pos(d) && pos(a) < pos(c),
        "{mine:?}"
    );
    assert!(pos(a).is_some());
    // No process has pid i32::MAX (pid_max is at most 2^22).
    assert!(
        foster::process::tree::children_of(i32::MAX)
            .unwrap()
            .is_empty()
    );
    assert!(
        foster::process::tree::descendants_of(i32::MAX)
            .unwrap()
            .is_empty()
    );

    let ids: Vec<Identity> = below.iter().map(|n| n.identity).collect();
    close(release_w);
    let status = group.reap();
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
    assert_all_gone(&ids);
    assert!(foster::process::tree::children_of(a).unwrap().is_empty());
}

/// `--dot` styles the boxes of real processes by state: a zombie dashed and grey, a stopped
/// process gold; with `--attach`, a supervisor's and its helper's boxes by role.
#[test]
fn dot_styles_real_processes_by_state_and_role() {
    // A parent that never reaps: its first child ends (a zombie), the second is stopped.
    let mut parent = Command::new("sh")
        .args(["-c", "(exit 0) & sleep 600 & exec sleep 600"])
        .spawn()
        .unwrap();
    let pid = parent.id() as i32;
    let t = Instant::now();
    let (zombie, sleeper) = loop {
        let snap = common::processes();
        if let Some(root) = snap.identity_of(pid) {
            let kids = snap.children(&root);
            let z = kids.iter().find(|k| k.state == b'Z');
            let s = kids.iter().find(|k| k.comm == b"sleep" && k.state != b'Z');
            if let (Some(z), Some(s), true) = (z, s, snap.get(&root).unwrap().comm == b"sleep") {
                break (z.identity, s.identity);
            }
        }
        assert!(t.elapsed() < common::LIMIT, "the tree never settled");
        std::thread::sleep(Duration::from_millis(10));
    };
    // A child of our child, alive (just read).
    common::send(sleeper.pid, libc::SIGSTOP);
    common::wait_state(sleeper.pid, 'T');
    let out = foster()
        .args(["tree", "--dot", "--root", &pid.to_string()])
        .output()
        .unwrap();
    let dot = String::from_utf8(out.stdout).unwrap();
    // SAFETY: kills of our child and its child, by pid; the child is then reaped.
    unsafe {
        libc::kill(sleeper.pid, libc::SIGKILL);
        libc::kill(pid, libc::SIGKILL);
    }
    parent.wait().unwrap();
    assert!(out.status.success(), "{dot}");
    assert!(
        line_of(&dot, zombie.pid).contains("style=\"dashed,filled\", fillcolor=gray90"),
        "{dot}"
    );
    assert!(
        line_of(&dot, sleeper.pid).contains(&format!(
            "label=\"{} T sleep\", style=filled, fillcolor=gold",
            sleeper.pid
        )),
        "{dot}"
    );
    assert!(!line_of(&dot, pid).contains("fillcolor"), "{dot}");
    // Orphaned by the kill, both are reaped by whoever adopted them.
    common::wait_reaped(zombie, "the zombie");
    common::wait_reaped(sleeper, "the stopped sleep");

    // Roles: the supervisor a double octagon, its helper bold-edged.
    let d = common::Dir::new("tree", "dot-roles");
    let mut run = common::supervised::Run::start(
        &d,
        "[[helper]]\nname = \"web\"\ncommand = [\"sleep\", \"600\"]\n",
        &["--no-contain"],
    );
    run.launch("web", 1);
    let status = run.status();
    let sup: Identity = serde_json::from_value(status["supervisor"]["identity"].clone()).unwrap();
    let web: Identity = serde_json::from_value(status["helpers"][0]["identity"].clone()).unwrap();
    let out = foster()
        .args(["tree", "--dot", "--root", &sup.pid.to_string(), "--attach"])
        .arg(&run.socket)
        .output()
        .unwrap();
    let dot = String::from_utf8(out.stdout).unwrap();
    run.stop();
    assert!(out.status.success(), "{dot}");
    assert!(
        line_of(&dot, sup.pid).contains("shape=doubleoctagon"),
        "{dot}"
    );
    assert!(line_of(&dot, web.pid).contains("penwidth=3"), "{dot}");
    assert!(line_of(&dot, web.pid).contains("\\nhelper web"), "{dot}");
    assert_all_gone(&[sup, web]);
}

/// The box of `pid` in a dot text.
fn line_of(dot: &str, pid: i32) -> String {
    dot.lines()
        .find(|l| l.trim_start().starts_with(&format!("p{pid} [")))
        .unwrap_or_else(|| panic!("no box for {pid}:\n{dot}"))
        .to_string()
}
