//! The log files foster writes (the events log, the helpers' logs) against local attackers, a
//! full disk and a deletion, end to end on real processes and real uids: a symbolic link
//! planted by another user, a directory of another user, a tmpfs filled to its last page, a
//! file deleted while a helper writes. The other users are made with `setpriv` and the tmpfs
//! is mounted (as root; the tests that need it skip with a reason otherwise).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::common;
use common::{Dir, as_user, is_root, ok};

const FOSTER: &str = env!("CARGO_BIN_EXE_foster");

/// The attacker: an ordinary uid.
const ATTACKER: u32 = 65534;

/// `c` run to its end (SIGKILLed and the test failed past the bound), its output piped.
fn output_within(mut c: Command) -> Output {
    let child = c
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    common::child::output_within(child, &format!("{c:?}"))
}

/// `NAME.toml` in `d`: one helper, `h`, that says hello (to `log` when given), and ends.
fn hello(d: &Dir, name: &str, log: Option<&Path>) -> std::path::PathBuf {
    let log = log.map_or(String::new(), |l| {
        format!("log = {{ file = {:?} }}\n", l.to_str().unwrap())
    });
    d.file(
        &format!("{name}.toml"),
        &format!("[[helper]]\nname = \"h\"\ncommand = [\"/bin/echo\", \"hello\"]\n{log}"),
    )
}

/// A configuration whose one helper touches `marker` (so that a start is seen).
fn touching(d: &Dir, marker: &Path) -> std::path::PathBuf {
    d.file(
        "c.toml",
        &format!(
            "[[helper]]\nname = \"t\"\ncommand = [\"/bin/touch\", {:?}]\n",
            marker.to_str().unwrap()
        ),
    )
}

/// `foster run --events-log LOG CONFIG` (no socket, uncontained), to its end: its status and
/// standard error.
fn run_with_events_log(log: &Path, cfg: &Path) -> (Option<i32>, String) {
    let mut c = Command::new(FOSTER);
    c.args(["run", "--no-socket", "--no-contain", "--events-log"])
        .arg(log)
        .arg(cfg);
    let o = output_within(c);
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Root's events log at a path another user could plant a symbolic link at (in a sticky 1777
/// directory, as `/tmp`) or in a directory of theirs: refused before anything starts, the
/// error naming what is there (its owner and mode); the root-only file the link leads to is
/// not written.
#[test]
fn an_events_log_another_user_could_have_planted_is_refused() {
    if common::skip::unless_root("not root, so no second user to plant the link") {
        return;
    }
    let d = Dir::new("logsec", "events");
    let victim = d.file("victim", "root's secret\n");
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).unwrap();
    let marker = d.path("started");
    let cfg = touching(&d, &marker);
    let shared = d.path("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let planted = shared.join("events.jsonl");
    ok(as_user(ATTACKER, "ln").arg("-s").arg(&victim).arg(&planted));
    let (code, err) = run_with_events_log(&planted, &cfg);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("events log")
            && err.contains("is a symbolic link to")
            && err.contains("owned by uid 65534")
            && err.contains("mode 0777")
            && err.contains("not writing to it"),
        "{err}"
    );
    // A directory of the attacker's (mode 0755): its owner could swap anything in it.
    let theirs = d.path("theirs");
    std::fs::create_dir(&theirs).unwrap();
    std::os::unix::fs::chown(&theirs, Some(ATTACKER), Some(ATTACKER)).unwrap();
    let planted = theirs.join("events.jsonl");
    ok(as_user(ATTACKER, "ln").arg("-s").arg(&victim).arg(&planted));
    let (code, err) = run_with_events_log(&planted, &cfg);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("events log")
            && err.contains("is a directory owned by uid 65534")
            && err.contains("mode 0755")
            && err.contains("must belong to you"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "root's secret\n");
    assert!(!marker.exists(), "nothing started");
}

// ---- A full disk ----

/// A tmpfs of 64 KiB mounted on `dir`, all but two pages of it taken by `filler`: unmounted
/// (lazily, so that a file still open does not keep it) when dropped, the test passed or not.
struct FullSoon {
    dir: std::path::PathBuf,
    filler: std::path::PathBuf,
}

impl FullSoon {
    fn mount(dir: std::path::PathBuf) -> FullSoon {
        std::fs::create_dir(&dir).unwrap();
        ok(Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=64k,mode=0755", "tmpfs"])
            .arg(&dir));
        let filler = dir.join("filler");
        let f = FullSoon { dir, filler };
        std::fs::write(&f.filler, vec![0u8; 56 << 10]).unwrap();
        f
    }

    /// Frees the space the filler took.
    fn free(&self) {
        std::fs::remove_file(&self.filler).unwrap();
    }
}

impl Drop for FullSoon {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(&self.dir, nix::mount::MntFlags::MNT_DETACH);
    }
}

/// Waits for a line of `lines` that holds `what`: the lines seen up to it.
fn wait_line(lines: &std::sync::mpsc::Receiver<String>, what: &str, seen: &mut Vec<String>) {
    if seen.iter().any(|l| l.contains(what)) {
        return;
    }
    let deadline = std::time::Instant::now() + common::LIMIT;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match lines.recv_timeout(left) {
            Ok(l) => {
                let found = l.contains(what);
                seen.push(l);
                if found {
                    return;
                }
            }
            Err(_) => panic!("no line with {what:?}; seen: {seen:#?}"),
        }
    }
}

/// `foster run --no-socket --no-contain ARGS` in the background, ended by the guard; its
/// standard error's lines.
fn start(
    args: &[&std::ffi::OsStr],
) -> (common::supervised::Guard, std::sync::mpsc::Receiver<String>) {
    let mut f = Command::new(FOSTER)
        .args(["run", "--no-socket", "--no-contain"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = common::lines::lines(f.stderr.take().unwrap());
    (common::supervised::Guard(f), err)
}

/// A disk that fills while a crash-looping helper's events are written: the events that did
/// not fit are lost whole (counted), none is left half-written, and once there is room again
/// the next events follow on lines of their own: every line of the file is JSON.
#[test]
fn a_full_disk_leaves_no_torn_record_in_the_events_log() {
    if common::skip::unless_root("not root, so no tmpfs to fill") {
        return;
    }
    let d = Dir::new("logsec", "fullev");
    let disk = FullSoon::mount(d.path("mnt"));
    let log = disk.dir.join("events.jsonl");
    let cfg = d.file(
        "c.toml",
        "[[helper]]\nname = \"crasher\"\ncommand = [\"/bin/sh\", \"-c\", \"exit 3\"]\n\
         restart = \"always\"\n\
         backoff = { initial = \"5ms\", max = \"5ms\", limit = 100000 }\n",
    );
    let (mut f, err) = start(&["--events-log".as_ref(), log.as_os_str(), cfg.as_os_str()]);
    let mut seen = Vec::new();
    wait_line(&err, "cannot write the events log", &mut seen);
    disk.free();
    wait_line(&err, "the events log is written again", &mut seen);
    assert!(
        common::supervised::terminate(&mut f.0),
        "foster ended on SIGTERM"
    );
    let text = std::fs::read(&log).unwrap();
    assert!(text.ends_with(b"\n"), "ends with a whole line");
    let lines: Vec<&[u8]> = text
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    for l in &lines {
        if let Err(e) = serde_json::from_slice::<serde_json::Value>(l) {
            panic!("{e}: {:?}", String::from_utf8_lossy(l));
        }
    }
    // More than the two pages that were free: events were written after the disk was full.
    assert!(text.len() > 8192, "{} bytes", text.len());
}

/// A disk that fills while a helper writes its log: the lines that did not fit are lost
/// whole, and after room is made the next lines follow (the last one, written once the helper
/// is released, before foster ends), every line of the file whole. The helper writes 300 lines
/// (about 18 KB: more than the two free pages, less than what the freed filler leaves), so
/// that the lines foster still relays once the disk is freed fit, however far behind it is.
#[test]
fn a_full_disk_leaves_no_torn_line_in_a_helpers_log() {
    if common::skip::unless_root("not root, so no tmpfs to fill") {
        return;
    }
    let d = Dir::new("logsec", "fullhelper");
    let disk = FullSoon::mount(d.path("mnt"));
    let log = disk.dir.join("w.log");
    let go = d.fifo("go");
    let body = format!(
        "i=0; while [ $i -lt 300 ]; do echo \"line $i of the filling helper\"; i=$((i+1)); \
         done; read x < {}; echo 'after the disk was freed'",
        go.display()
    );
    let cfg = d.file(
        "c.toml",
        &format!(
            "[[helper]]\nname = \"w\"\ncommand = [\"/bin/sh\", \"-c\", '''{body}''']\n\
             log = {{ file = {:?} }}\n",
            log.to_str().unwrap()
        ),
    );
    let (mut f, err) = start(&["--output".as_ref(), "none".as_ref(), cfg.as_os_str()]);
    let mut seen = Vec::new();
    wait_line(&err, "the lines are lost", &mut seen);
    disk.free();
    std::fs::write(&go, "\n").unwrap();
    // The helper ends after its last line: foster writes it, and ends.
    assert_eq!(common::child::wait_exit(&mut f.0), 0);
    wait_line(&err, "is written again", &mut seen);
    let text = String::from_utf8(std::fs::read(&log).unwrap()).unwrap();
    assert!(text.ends_with('\n'), "ends with a whole line");
    for l in text.lines() {
        let rest = l.get(24..).unwrap_or_default();
        let whole = rest == " out after the disk was freed"
            || rest
                .strip_prefix(" out line ")
                .and_then(|r| r.strip_suffix(" of the filling helper"))
                .is_some_and(|n| n.parse::<u32>().is_ok());
        assert!(whole, "a torn line: {l:?}");
    }
    assert!(text.ends_with(" out after the disk was freed\n"), "{text}");
}

/// A helper's log deleted while the helper writes: the deleted file grows no more than
/// `max_size` (the bound is checked, the deletion seen) and the next lines go to a new file at
/// the path. The deleted file is held open by the test, its size read once foster has ended.
#[test]
fn a_deleted_log_file_is_replaced_at_its_bound() {
    let d = Dir::new("logsec", "deleted");
    let log = d.path("w.log");
    let go = d.fifo("go");
    let body = format!(
        "i=0; while [ $i -lt 100 ]; do echo \"early line $i\"; i=$((i+1)); done; \
         read x < {}; \
         i=0; while [ $i -lt 3000 ]; do echo \"line $i of the helper whose log was deleted\"; \
         i=$((i+1)); done",
        go.display()
    );
    let cfg = d.file(
        "c.toml",
        &format!(
            "[[helper]]\nname = \"w\"\ncommand = [\"/bin/sh\", \"-c\", '''{body}''']\n\
             log = {{ file = {:?}, max_size = \"20KB\", keep = 1 }}\n",
            log.to_str().unwrap()
        ),
    );
    let (mut f, _err) = start(&["--output".as_ref(), "none".as_ref(), cfg.as_os_str()]);
    // Opened for writing once the helper reads it: the log was opened before its launch.
    let mut release = std::fs::OpenOptions::new().write(true).open(&go).unwrap();
    let deleted = std::fs::File::open(&log).unwrap();
    std::fs::remove_file(&log).unwrap();
    std::io::Write::write_all(&mut release, b"\n").unwrap();
    drop(release);
    assert_eq!(common::child::wait_exit(&mut f.0), 0);
    let size = deleted.metadata().unwrap().len();
    assert!(
        size > 0 && size <= 20_000,
        "the deleted file grew to {size} bytes"
    );
    let text = std::fs::read_to_string(&log).expect("a new file at the path");
    assert!(
        text.ends_with(" out line 2999 of the helper whose log was deleted\n"),
        "{text}"
    );
}

/// A `STATUS=` text with a one-character CSI (U+009B) and a right-to-left override (U+202E):
/// the events log carries both as `\uXXXX` escapes, never raw, and a JSON reader gets the text
/// back as sent.
#[test]
fn control_and_bidi_characters_of_a_status_are_escaped_in_the_events_log() {
    let d = Dir::new("logsec", "status");
    let fifo = d.fifo("events");
    let cfg = d.file(
        "c.toml",
        "[[helper]]\nname = \"s\"\ncommand = [\"/bin/sh\", \"-c\", '''\
         \"$FOSTER_EXE\" notify --ready --status \"$(printf 'a\\302\\233[2Jb\\342\\200\\256c')\"; \
         exec sleep 1000''']\nready = { notify = true }\n",
    );
    let (mut f, _err) = start(&["--events-log".as_ref(), fifo.as_os_str(), cfg.as_os_str()]);
    let events = common::lines::lines(std::fs::File::open(&fifo).unwrap());
    let mut seen = Vec::new();
    wait_line(&events, "\"state\":\"ready\"", &mut seen);
    assert!(
        common::supervised::terminate(&mut f.0),
        "foster ended on SIGTERM"
    );
    let line = seen.last().unwrap();
    let raw: Vec<char> = line
        .chars()
        .filter(|c| c.is_control() || matches!(c, '\u{202a}'..='\u{202e}'))
        .collect();
    assert!(raw.is_empty(), "raw {raw:?} in {line}");
    assert!(line.contains(r"a\u009b[2Jb\u202ec"), "{line}");
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    assert_eq!(v["status_text"], "a\u{9b}[2Jb\u{202e}c", "{v}");
}

// ---- Contained as another user: a user namespace ----

/// The non-root users of the tests of a user namespace: the one foster runs as, the other.
const DAEMON: u32 = 1;

/// Why `uid` cannot make a user namespace here, if it cannot (the tests that need one skip).
fn no_user_namespace(uid: u32) -> Option<String> {
    if !is_root() {
        return Some("not root, so no second user".into());
    }
    let out = as_user(uid, "unshare").args(["-Ur", "true"]).output();
    match out {
        Ok(o) if o.status.success() => None,
        Ok(o) => Some(format!(
            "uid {uid} cannot make a user namespace here: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Some(format!("unshare cannot be run: {e}")),
    }
}

/// `foster run --contain ARGS` as `uid`, to its end: its status and standard error.
fn run_contained_as(uid: u32, args: &[&std::ffi::OsStr]) -> (Option<i32>, String) {
    let mut c = as_user(uid, FOSTER);
    c.args(["run", "--contain"]).args(args);
    let o = output_within(c);
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A directory shared by the users of a test, as `/tmp` is: root's, mode 1777.
fn shared(d: &Dir) -> std::path::PathBuf {
    let p = d.path("shared");
    std::fs::create_dir(&p).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o1777)).unwrap();
    p
}

/// Contained as uid 1 (through a user namespace, where root's `/tmp` reads as owned by the
/// overflow uid), a log file and the control socket in a sticky directory of root's are taken,
/// as uncontained: the owners were judged before entering the namespace.
#[test]
fn contained_as_a_user_a_sticky_directory_of_roots_is_taken() {
    if let Some(why) = no_user_namespace(DAEMON) {
        common::skip::refused(why);
        return;
    }
    let d = Dir::new("logsec", "userns");
    let tmp = shared(&d);
    let log = tmp.join("h.log");
    let cfg = hello(&d, "c", Some(&log));
    let sock = tmp.join("s.sock");
    let (code, err) = run_contained_as(
        DAEMON,
        &["--socket".as_ref(), sock.as_os_str(), cfg.as_os_str()],
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("in a PID namespace of its own"),
        "contained: {err}"
    );
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.ends_with(" out hello\n"), "{text:?}");
    use std::os::unix::fs::MetadataExt;
    assert_eq!(std::fs::metadata(&log).unwrap().uid(), DAEMON);
}

/// Contained as nobody (65534, the overflow uid itself: every owner the namespace does not map
/// reads as nobody's there), a file of uid 1 with mode 0666 is not taken for a helper's log,
/// nor a directory of uid 1 for the control socket's; nothing is written into the file.
#[test]
fn contained_as_nobody_a_file_or_directory_of_another_user_is_refused() {
    if let Some(why) = no_user_namespace(ATTACKER) {
        common::skip::refused(why);
        return;
    }
    let d = Dir::new("logsec", "nobody");
    let tmp = shared(&d);
    let planted = tmp.join("h.log");
    ok(as_user(DAEMON, "sh")
        .args(["-c", "umask 0; : > \"$0\""])
        .arg(&planted));
    let cfg = hello(&d, "c", Some(&planted));
    let (code, err) = run_contained_as(ATTACKER, &["--no-socket".as_ref(), cfg.as_os_str()]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("helper h's log") && err.contains("not yours") && err.contains("mode 0666"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(&planted).unwrap(),
        b"",
        "written into uid 1's file"
    );
    // The control socket in a directory of uid 1's.
    let theirs = d.path("theirs");
    std::fs::create_dir(&theirs).unwrap();
    std::os::unix::fs::chown(&theirs, Some(DAEMON), Some(DAEMON)).unwrap();
    let own = hello(&d, "own", None);
    let sock = theirs.join("s.sock");
    let (code, err) = run_contained_as(
        ATTACKER,
        &["--socket".as_ref(), sock.as_os_str(), own.as_os_str()],
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("control socket") && err.contains("owned by uid 1"),
        "{err}"
    );
    assert!(!sock.exists(), "bound in uid 1's directory");
}

/// `--events-log /dev/stdout` (or `/proc/self/fd/1`) is foster's own standard output, handed in
/// by its caller: written to as it is (here a pipe), not refused as a symbolic link, contained
/// or not.
#[test]
fn the_events_log_may_be_fosters_own_standard_output() {
    let d = Dir::new("foster-evstdout", "e");
    let cfg = hello(&d, "c", None);
    for (path, contain) in [
        ("/dev/stdout", "--no-contain"),
        ("/proc/self/fd/1", "--no-contain"),
        ("/dev/stdout", "--contain"),
    ] {
        let mut c = Command::new(FOSTER);
        c.args(["run", "--no-socket", contain, "--events-log", path])
            .arg(&cfg);
        let o = output_within(c);
        let err = String::from_utf8_lossy(&o.stderr);
        if contain == "--contain" && err.contains("cannot create a PID namespace") {
            common::skip::host(format!("part: the contained case: {err}"));
            continue;
        }
        assert_eq!(o.status.code(), Some(0), "{path} {contain}: {err}");
        let out = String::from_utf8_lossy(&o.stdout);
        let events: Vec<serde_json::Value> = out
            .lines()
            .filter(|l| l.starts_with('{'))
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
            .collect();
        assert!(
            events.iter().any(|e| e["event"] == "exit"),
            "{path} {contain}: no exit event on standard output: {out:?}\n{err}"
        );
    }
}
