//! foster's newer surfaces against a hostile helper or another local user, end to end on real
//! processes: the events log's file (its mode under any umask, a file others may write refused,
//! a full disk, a FIFO or pipe whose reader stalls, control characters), the notify protocol
//! (requests foster does not grant said once, a `STATUS=` bounded and escaped, a deep sender
//! outside the tree, a squatted socket directory), a long line's pattern across the cut, the
//! probes (a mute listener, what a probe leaves behind, a probe dying with foster) and the s6
//! descriptor. Senders re-run this binary ([`fdstore_sender`], [`raw_sender`]).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::common;
use common::Dir;
use common::supervised::Run;

const FOSTER: &str = env!("CARGO_BIN_EXE_foster");

/// `foster run --no-socket --no-contain --events-log LOG CONFIG` under `umask`, to its end.
fn run_under_umask(umask: &str, log: &Path, cfg: &Path) -> Output {
    let child = Command::new("sh")
        .arg("-c")
        .arg(format!("umask {umask} && exec \"$@\""))
        .arg("sh")
        .arg(FOSTER)
        .args(["run", "--no-socket", "--no-contain", "--events-log"])
        .arg(log)
        .arg(cfg)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    common::child::output_within(child, "foster run")
}

/// A configuration whose one helper says hello and ends.
fn hello(d: &Dir) -> std::path::PathBuf {
    d.file(
        "hello.toml",
        "[[helper]]\nname = \"h\"\ncommand = [\"/bin/echo\", \"hello\"]\n",
    )
}

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

/// The events log foster creates is 0640 whatever the umask it was started with (a umask of
/// 000, as some service managers give, would have made it writable by everyone), and so is
/// each file a rotation creates.
#[test]
fn the_events_log_is_created_0640_under_any_umask() {
    let d = Dir::new("surf", "mode");
    let log = d.path("events.jsonl");
    let out = run_under_umask("000", &log, &hello(&d));
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(mode(&log), 0o640, "{out:?}");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("\"launch\""), "{text}");
}

/// An events log others than foster's user may write to (mode 0666, or 0620) is refused before
/// anything starts, the error naming its mode and what to do: another user could have written
/// lines that read as foster's events. The file is left as it was.
#[test]
fn an_events_log_others_may_write_is_refused() {
    let d = Dir::new("surf", "writable");
    let cfg = d.file(
        "c.toml",
        &format!(
            "[[helper]]\nname = \"t\"\ncommand = [\"/bin/touch\", {:?}]\n",
            d.path("started").to_str().unwrap()
        ),
    );
    for bits in [0o666, 0o620] {
        let log = d.file("events.jsonl", "{\"forged\":true}\n");
        std::fs::set_permissions(&log, std::fs::Permissions::from_mode(bits)).unwrap();
        let out = run_under_umask("022", &log, &cfg);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(
            err.contains("events log")
                && err.contains(&format!("mode {bits:04o}"))
                && err.contains("group or others may write to it")
                && err.contains("chmod go-w"),
            "{err}"
        );
        assert_eq!(mode(&log), bits, "left as it was");
        assert!(!d.path("started").exists(), "nothing started");
    }
}

// ---- The notify protocol's requests foster does not grant ----

/// The variable that makes this binary the sender of [`fdstore_sender`].
const FDSTORE: &str = "FOSTER_TEST_FDSTORE";

/// Not a test: this binary run as a helper with [`FDSTORE`] set sends, twice, `FDSTORE=1` and
/// `WATCHDOG_USEC=` (it has no watchdog) with the write end of a pipe, closes its own, waits for
/// foster's barrier (foster has handled both), then says `READY=1` with `STATUS=closed` when
/// the pipe's read end sees its end (foster closed the descriptors it was sent), `kept` when
/// not; then, ready, twice `EXTEND_TIMEOUT_USEC=`.
#[test]
fn fdstore_sender() {
    use nix::sys::socket::{ControlMessage, MsgFlags, UnixAddr, sendmsg};
    use std::os::fd::AsRawFd;
    if std::env::var_os(FDSTORE).is_none() {
        return;
    }
    let notify = foster::supervision::readiness::notify::send;
    let to = std::env::var_os("NOTIFY_SOCKET").unwrap();
    let addr = UnixAddr::new(Path::new(&to)).unwrap();
    let flags = nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK;
    let (r, w) = nix::unistd::pipe2(flags).unwrap();
    let out = std::os::unix::net::UnixDatagram::unbound().unwrap();
    for _ in 0..2 {
        let text = b"FDSTORE=1\nFDNAME=kept\nWATCHDOG_USEC=1000000\n";
        let iov = [std::io::IoSlice::new(text)];
        let fds = [w.as_raw_fd()];
        let cmsg = [ControlMessage::ScmRights(&fds)];
        sendmsg(out.as_raw_fd(), &iov, &cmsg, MsgFlags::empty(), Some(&addr)).unwrap();
    }
    drop(w);
    foster::supervision::readiness::notify::barrier(Some(&to), common::LIMIT).unwrap();
    let said = match nix::unistd::read(&r, &mut [0u8; 1]) {
        Ok(0) => "closed",
        _ => "kept",
    };
    let text = format!("READY=1\nSTATUS={said}\n");
    notify(Some(&to), &text, Some(common::LIMIT)).unwrap();
    for _ in 0..2 {
        let extend = "EXTEND_TIMEOUT_USEC=1000000\n";
        notify(Some(&to), extend, Some(common::LIMIT)).unwrap();
    }
}

/// A helper that asks foster to keep descriptors (`FDSTORE=1`), to change a watchdog it
/// does not have (`WATCHDOG_USEC=`), and, once ready, for more time (`EXTEND_TIMEOUT_USEC=`),
/// each twice: foster says once of each that it does not (a warning line each, the second at
/// debug level), and closes the descriptors it was sent (the helper sees its pipe's end).
#[test]
fn fdstore_and_a_watchdog_period_without_a_watchdog_are_said_once() {
    let d = Dir::new("surf", "fdstore");
    let log = d.path("stderr.log");
    let body = format!(
        "{FDSTORE}=1 exec '{}' surfaces::fdstore_sender --exact --quiet >/dev/null\n",
        std::env::current_exe().unwrap().display()
    );
    let web = d.file("web.sh", &body);
    let config = format!(
        "[[helper]]\nname = \"web\"\ncommand = [\"sh\", {:?}]\nready = {{ notify = true }}\n",
        web.to_str().unwrap()
    );
    let mut run = Run::start_logging(&d, &config, &["--no-contain"], Some(&log));
    let ready = run.wait_for("ready", |e| e["event"] == "state" && e["state"] == "ready");
    assert_eq!(ready["status_text"], "closed", "{ready:#}");
    assert_eq!(
        run.finish(),
        0,
        "the helper ends with 0, and so does foster"
    );
    let text = std::fs::read_to_string(&log).unwrap();
    let count = |what: &str| text.lines().filter(|l| l.contains(what)).count();
    assert_eq!(
        count("web: FDSTORE=1 is not supported: foster keeps no descriptors; the 1 sent"),
        1,
        "{text}"
    );
    assert_eq!(
        count("web: WATCHDOG_USEC= ignored: it has no `watchdog`"),
        1,
        "{text}"
    );
    assert_eq!(
        count("web: EXTEND_TIMEOUT_USEC= ignored: it only pushes back the readiness"),
        1,
        "{text}"
    );
}

// ---- The events log that cannot be written ----

/// An events log every write to fails (`/dev/full`: `ENOSPC`, as a full disk) is not fatal: the
/// helper runs and foster ends as it would have; the first failure is one warning line, and
/// foster's end says how many events were lost (all of them: none of the streak was written).
#[test]
fn an_events_log_that_fails_to_the_end_says_how_many_events_it_lost() {
    let d = Dir::new("surf", "full");
    let out = run_under_umask("022", Path::new("/dev/full"), &hello(&d));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "h | hello\n", "{err}");
    let lines: Vec<&str> = err.lines().collect();
    let first = lines
        .iter()
        .filter(|l| l.contains("cannot write the events log"))
        .count();
    assert_eq!(first, 1, "{err}");
    let last = lines.last().copied().unwrap_or_default();
    let lost: u64 = last
        .strip_prefix("foster: warning: the events log could not take the last ")
        .and_then(|r| r.strip_suffix(" event(s), up to foster's end"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("the last line says what was lost: {err}"));
    // At least the start, the launch, the exit and the stop.
    assert!(lost >= 4, "{err}");
}

// ---- Readiness by a line of output ----

/// A line longer than a piece of output (64 KiB) whose pattern's match straddles the cut
/// between two pieces (`rea` ends the first, `dy` begins the second) still makes the helper
/// ready: the pieces of a line are matched with the one before.
#[test]
fn a_log_pattern_across_the_cut_of_a_long_line_makes_a_helper_ready() {
    let d = Dir::new("surf", "logcut");
    // 65533 bytes of `x`, then `ready`: the first piece (65536 bytes) ends with `rea`.
    let body = "head -c 65533 /dev/zero | tr '\\0' x\necho ready\nexec sleep 1000\n";
    let app = d.file("app.sh", body);
    let config = format!(
        "[[helper]]\nname = \"app\"\ncommand = [\"sh\", {:?}]\n\
         ready = {{ log = \"ready\", timeout = \"10s\" }}\n",
        app.to_str().unwrap()
    );
    let mut run = Run::start(&d, &config, &["--no-contain"]);
    let end = run.wait_for("ready, or its failure", |e| {
        (e["event"] == "state" && e["state"] == "ready") || e["event"] == "check_failed"
    });
    assert_eq!(end["event"], "state", "{end:#}");
    assert!(
        end["detail"].as_str().unwrap().ends_with("(log)"),
        "{end:#}"
    );
    assert_eq!(run.terminate(), 0);
}

// ---- Probes ----

/// A listener on the loopback whose queue is full (backlog 0, one connection taken and never
/// accepted): a further connection is neither accepted nor refused, its SYN is dropped. The
/// listener and the connection that fills it.
fn unanswering_listener() -> (std::net::TcpListener, std::net::TcpStream) {
    use std::os::fd::AsRawFd;
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    // SAFETY: listen(2) again on our own socket, only its backlog changed.
    assert_eq!(unsafe { libc::listen(l.as_raw_fd(), 0) }, 0);
    let filler = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    (l, filler)
}

/// A health check's connect to a listener that never answers is given up at the check's
/// `timeout`, a failure that names it; the helper is then stopped for it (its one failure
/// allowed), and foster, with nothing left, ends in failure.
#[test]
fn a_connect_probe_to_a_listener_that_never_answers_fails_at_its_timeout() {
    let d = Dir::new("surf", "tcphang");
    let (listener, _filler) = unanswering_listener();
    let addr = listener.local_addr().unwrap();
    let config = format!(
        "[[helper]]\nname = \"db\"\ncommand = [\"sleep\", \"1000\"]\n\
         health = {{ tcp = \"{addr}\", interval = \"10ms\", timeout = \"300ms\", failures = 1 }}\n"
    );
    let mut run = Run::start(&d, &config, &["--no-contain"]);
    let failed = run.wait_for("check_failed", |e| e["event"] == "check_failed");
    assert_eq!(failed["check"], "health", "{failed:#}");
    let reason = failed["reason"].as_str().unwrap();
    assert!(
        reason.contains(&format!("connect to {addr}: no answer within 300ms")),
        "{failed:#}"
    );
    assert_eq!(run.finish(), 3);
}

/// What one writer writes into `fifo` up to its close, within [`common::LIMIT`].
fn read_fifo(fifo: &Path) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    let path = fifo.to_path_buf();
    std::thread::spawn(move || {
        let _ = tx.send(std::fs::read_to_string(path));
    });
    match rx.recv_timeout(common::LIMIT) {
        Ok(text) => text.unwrap(),
        Err(_) => panic!("nothing written into {} within the limit", fifo.display()),
    }
}

/// An exec probe that passes but leaves processes behind (a daemon of its own session that
/// ignores SIGTERM, and a child in its process group) leaves none for long: its end is a read
/// of the tree, where foster finds them adopted and ends them by its orphan policy (SIGTERM,
/// then SIGKILL after the grace), each reaped: neither pid is left, not even as a zombie.
/// foster goes on. (Before, nothing read the tree at a probe's end: where births are not
/// announced, they ran until something else of the tree ended.)
#[test]
fn what_a_passing_probe_leaves_behind_is_ended_by_the_orphan_policy() {
    let d = Dir::new("surf", "probeleft");
    let pids = d.fifo("pids");
    // The daemon says when it ignores SIGTERM; the probe ends only then.
    let armed = d.fifo("armed");
    let probe = d.file(
        "probe.sh",
        &format!(
            "setsid sh -c 'trap \"\" TERM; echo > {armed}; exec sleep 1000' \
             </dev/null >/dev/null 2>&1 &\n\
             daemon=$!\nread x < {armed}\nsleep 1000 &\necho $daemon $! > {}\nexit 0\n",
            pids.display(),
            armed = armed.display()
        ),
    );
    let config = format!(
        "[supervisor]\norphan_policy = {{ signal = \"TERM\", grace = \"100ms\" }}\n\
         [[helper]]\nname = \"db\"\ncommand = [\"sleep\", \"1000\"]\n\
         ready = {{ exec = [\"sh\", {:?}], interval = \"10ms\", timeout = \"30s\" }}\n",
        probe.to_str().unwrap()
    );
    // Births not announced, so that nothing but the probe's end tells foster of them (with
    // the announcements, whether they came before the probe's end was a race).
    let env = [("FOSTER_CONNECTOR", "off")];
    let (mut run, _err) = Run::start_wrapped(&d, &config, &["--no-contain"], &["env"], &env);
    let line = read_fifo(&pids);
    let left: Vec<i32> = line
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    assert_eq!(left.len(), 2, "{line}");
    run.wait_for("ready", |e| e["event"] == "state" && e["state"] == "ready");
    for &p in &left {
        assert!(
            common::wait_pid_gone(p, common::LIMIT),
            "left by the probe: {p} {:?}",
            common::process(p)
        );
        // Reaped: foster says its end once it has its status.
        run.wait_for("its end", |e| e["event"] == "exit" && e["pid"] == p);
        assert!(!Path::new(&format!("/proc/{p}")).exists(), "{p} reaped");
    }
    assert_eq!(run.terminate(), 0);
    let killed = run.seen.iter().filter(|e| {
        e["event"] == "signal" && e["signal"] == "SIGKILL" && e["reason"] == "grace_expired"
    });
    let signals: Vec<_> = run.seen.iter().filter(|e| e["event"] == "signal").collect();
    assert_eq!(
        killed.count(),
        1,
        "the daemon, which ignores SIGTERM: {signals:#?}"
    );
}

// ---- The s6 notification descriptor ----

/// The inode of the pipe `pid`'s descriptor `fd` is, if it is one.
fn pipe_inode(pid: i32, fd: i32) -> Option<u64> {
    let link = std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).ok()?;
    let text = link.to_str()?;
    text.strip_prefix("pipe:[")?.strip_suffix(']')?.parse().ok()
}

/// The access modes (`O_ACCMODE` of `flags:` in `fdinfo`) of `pid`'s descriptors on pipe
/// `inode`.
fn modes_on_pipe(pid: i32, inode: u64) -> Vec<i32> {
    let mut modes = Vec::new();
    for e in std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
    {
        let fd: i32 = e.file_name().to_str().unwrap().parse().unwrap();
        if pipe_inode(pid, fd) != Some(inode) {
            continue;
        }
        let info = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}")).unwrap_or_default();
        let flags = info
            .lines()
            .find_map(|l| l.strip_prefix("flags:"))
            .map(|f| i32::from_str_radix(f.trim(), 8).unwrap())
            .unwrap();
        modes.push(flags & libc::O_ACCMODE);
    }
    modes
}

/// `pid`'s resident memory, in KiB.
fn rss_kib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// The s6 descriptor is the helper's alone: placed at its number in the helper (a pipe), not
/// in a helper launched beside it; foster holds only the read end (so a helper that closes it
/// is seen). 8 MiB written without a newline are read and dropped, foster's memory does not
/// grow by them, and the helper stays `starting`; its newline makes it ready, and then foster
/// holds nothing of the pipe.
#[test]
fn the_notification_descriptor_is_the_helpers_alone_and_a_flood_is_dropped() {
    let d = Dir::new("surf", "s6");
    let (go, flooded, hold) = (d.fifo("go"), d.fifo("flooded"), d.fifo("hold"));
    let app = d.file(
        "app.sh",
        &format!(
            "read x < {go}\nhead -c 8388608 /dev/zero >&3\necho $$ > {flooded}\n\
             read x < {hold}\necho >&3\nexec sleep 1000 3>&-\n",
            go = go.display(),
            flooded = flooded.display(),
            hold = hold.display()
        ),
    );
    let config = format!(
        "[[helper]]\nname = \"app\"\ncommand = [\"sh\", {:?}]\n\
         ready = {{ fd = 3, timeout = \"60s\" }}\n\
         [[helper]]\nname = \"other\"\ncommand = [\"sleep\", \"1000\"]\n",
        app.to_str().unwrap()
    );
    let mut run = Run::start(&d, &config, &["--no-contain"]);
    let foster = run.child.id() as i32;
    let other = run.wait_for("other", |e| {
        e["event"] == "launch" && e["helper"] == "other"
    });
    let other = other["identity"]["pid"].as_i64().unwrap() as i32;
    // Measured once foster has launched both and answered a request: what the flood adds
    // (all 8 MiB of it, if foster kept what it read).
    run.status();
    let before = rss_kib(foster);
    std::fs::write(&go, "go\n").unwrap();
    let pid: i32 = read_fifo(&flooded).trim().parse().unwrap();
    let grew = rss_kib(foster).saturating_sub(before);
    assert!(grew < 4096, "foster grew by {grew} KiB reading 8 MiB");
    let inode = pipe_inode(pid, 3).expect("descriptor 3 of the helper is a pipe");
    assert_eq!(
        modes_on_pipe(foster, inode),
        vec![libc::O_RDONLY],
        "the read end only"
    );
    assert!(
        modes_on_pipe(other, inode).is_empty(),
        "not in the other helper"
    );
    let status = run.status();
    let app = status["helpers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["name"] == "app");
    assert_eq!(
        app.unwrap()["state"],
        "starting",
        "no newline yet: {status:#}"
    );
    std::fs::write(&hold, "go\n").unwrap();
    let ready = run.wait_for("ready", |e| e["state"] == "ready" && e["helper"] == "app");
    assert!(
        ready["detail"].as_str().unwrap().ends_with("(fd)"),
        "{ready:#}"
    );
    assert!(
        modes_on_pipe(foster, inode).is_empty(),
        "foster's end closed"
    );
    assert_eq!(run.terminate(), 0);
}

/// Waits for a line of `lines` holding `what`; the line.
fn line_with(lines: &std::sync::mpsc::Receiver<String>, what: &str) -> String {
    let deadline = std::time::Instant::now() + common::LIMIT;
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match lines.recv_timeout(left) {
            Ok(l) if l.contains(what) => return l,
            Ok(l) => seen.push(l),
            Err(_) => panic!("no line with {what:?}; seen: {seen:#?}"),
        }
    }
}

/// An events log that is a FIFO whose reader stops reading (it holds the FIFO open, reads
/// nothing) does not stop foster once the pipe is full: the lines that do not fit are dropped
/// and counted (one warning that says why), the helper goes on being restarted, `ctl` is
/// answered; every line the reader then finds is whole JSON, and once it reads again the next
/// events reach it. (Before, foster's loop blocked in the write for good.)
#[test]
fn an_events_log_fifo_whose_reader_stalls_does_not_stop_foster() {
    use std::io::Read;
    let d = Dir::new("surf", "fifo");
    let fifo = d.fifo("events");
    let mut reader = common::fifo::open_reader(&fifo);
    let config = "[[helper]]\nname = \"crasher\"\ncommand = [\"/bin/sh\", \"-c\", \"exit 3\"]\n\
                  restart = \"always\"\n\
                  backoff = { initial = \"5ms\", max = \"5ms\", limit = 100000 }\n";
    let log = fifo.to_str().unwrap();
    let (mut run, err) = Run::start_with_stderr(&d, config, &["--no-contain", "--events-log", log]);
    let first = line_with(&err, "cannot write the events log");
    assert!(first.contains("its reader does not keep up"), "{first}");
    let status = run.status();
    let launches = status["helpers"][0]["launches"].as_u64().unwrap();
    run.wait_for("a later launch", |e| {
        e["event"] == "launch" && e["attempt"].as_u64().is_some_and(|a| a > launches + 2)
    });
    let mut text = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match reader.read(&mut buf) {
            Ok(n) if n > 0 => text.extend_from_slice(&buf[..n]),
            _ => break,
        }
    }
    assert!(
        text.len() >= 4096 && text.ends_with(b"\n"),
        "{} bytes",
        text.len()
    );
    for l in text.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        if let Err(e) = serde_json::from_slice::<serde_json::Value>(l) {
            panic!("{e}: {:?}", String::from_utf8_lossy(l));
        }
    }
    line_with(&err, "the events log is written again");
    assert_eq!(run.terminate(), 0);
}

/// An events log FIFO whose reader went away is not waited on when foster is asked to reopen
/// its logs (SIGUSR1): that would hold its loop until a reader came. The reopen fails, saying
/// why, the current descriptor is kept, and foster answers at once.
#[test]
fn a_reopen_of_an_events_log_fifo_without_a_reader_does_not_wait() {
    use std::io::Read;
    let d = Dir::new("surf", "fiforeopen");
    let fifo = d.fifo("events");
    let mut reader = common::fifo::open_reader(&fifo);
    let config = "[[helper]]\nname = \"s\"\ncommand = [\"sleep\", \"1000\"]\n";
    let log = fifo.to_str().unwrap();
    let (mut run, err) = Run::start_with_stderr(&d, config, &["--no-contain", "--events-log", log]);
    run.wait_for("launch", |e| e["event"] == "launch");
    let mut got = [0u8; 4096];
    assert!(
        reader.read(&mut got).unwrap() > 0,
        "the reader had the first events"
    );
    drop(reader);
    // SAFETY: kill(2) of our own child, not reaped yet.
    unsafe { libc::kill(run.child.id() as i32, libc::SIGUSR1) };
    let said = line_with(&err, "cannot reopen the events log");
    assert!(
        said.contains("the FIFO has no reader: not reopened"),
        "{said}"
    );
    assert_eq!(run.status()["helpers"][0]["state"], "running");
    assert_eq!(run.terminate(), 0);
}

/// An exec probe is launched through the gate as a helper is, its parent-death signal SIGKILL:
/// a probe still running when foster is SIGKILLed ends with it (and so does the helper).
#[test]
fn a_probe_running_when_foster_is_killed_ends_with_it() {
    let d = Dir::new("surf", "probedeath");
    let pids = d.fifo("pids");
    let probe = d.file(
        "probe.sh",
        &format!("echo $$ > {}\nexec sleep 1000\n", pids.display()),
    );
    let config = format!(
        "[[helper]]\nname = \"db\"\ncommand = [\"sleep\", \"1000\"]\n\
         ready = {{ exec = [\"sh\", {:?}], interval = \"10ms\", timeout = \"60s\" }}\n",
        probe.to_str().unwrap()
    );
    let mut run = Run::start(&d, &config, &["--no-contain"]);
    let launch = run.wait_for("launch", |e| e["event"] == "launch");
    let helper = launch["identity"]["pid"].as_i64().unwrap() as i32;
    let probe: i32 = read_fifo(&pids).trim().parse().unwrap();
    // SAFETY: kill(2) of our own child, not reaped yet.
    unsafe { libc::kill(run.child.id() as i32, libc::SIGKILL) };
    run.child.wait().unwrap();
    for (what, pid) in [("probe", probe), ("helper", helper)] {
        assert!(
            common::wait_pid_gone(pid, common::LIMIT),
            "the {what} {pid} outlived foster: {:?}",
            common::process(pid)
        );
    }
}

/// A helper's program named with control, C1 and bidirectional characters and a newline (its
/// launch fails: no such program) is written to the events log on one line of valid JSON with
/// none of them raw: the file is safe to print. So is what standard error says of it.
#[test]
fn an_events_log_line_holds_no_raw_control_character() {
    let d = Dir::new("surf", "ctrl");
    let cfg = d.file(
        "c.toml",
        "[[helper]]\nname = \"w\"\n\
         command = [\"/nonexistent/a\\u001b]0;pwn\\u0007b\\nc\\u202ed\\u009b31m\"]\n",
    );
    let log = d.path("events.jsonl");
    let out = run_under_umask("022", &log, &cfg);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let text = std::fs::read_to_string(&log).unwrap();
    let raw = |s: &str| {
        s.chars()
            .any(|c| (c.is_control() && c != '\n') || c == '\u{202e}' || c == '\u{9b}')
    };
    assert!(!raw(&text), "{text:?}");
    let failed = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|e| e["event"] == "launch_failed")
        .unwrap_or_else(|| panic!("{text}"));
    let error = failed["error"].as_str().unwrap();
    assert!(error.contains("/nonexistent/a") && !raw(error), "{error:?}");
    assert!(!raw(&String::from_utf8_lossy(&out.stderr)), "{out:?}");
}

// ---- The notify socket's directory ----

/// The notify socket's directory (`$XDG_RUNTIME_DIR/foster`) made beforehand by another user
/// (or a symbolic link of theirs there) is refused even when the control socket is elsewhere
/// (`--socket`): foster does not start, the error names the directory and its owner, and
/// nothing is bound in it.
#[test]
fn a_notify_directory_another_user_made_is_refused() {
    if common::skip::unless_root("not root, so no directory of another user to plant") {
        return;
    }
    let d = Dir::new("surf", "notifydir");
    let runtime = d.path("runtime");
    std::fs::create_dir(&runtime).unwrap();
    let planted = runtime.join("foster");
    let theirs = d.path("theirs");
    let marker = d.path("started");
    let cfg = d.file(
        "c.toml",
        &format!(
            "[[helper]]\nname = \"web\"\ncommand = [\"/bin/touch\", {:?}]\n\
             ready = {{ notify = true }}\n",
            marker.to_str().unwrap()
        ),
    );
    for link in [false, true] {
        let _ = std::fs::remove_file(&planted);
        let _ = std::fs::remove_dir(&planted);
        let _ = std::fs::remove_dir(&theirs);
        let made = if link { &theirs } else { &planted };
        std::fs::create_dir(made).unwrap();
        std::fs::set_permissions(made, std::fs::Permissions::from_mode(0o777)).unwrap();
        std::os::unix::fs::chown(made, Some(65534), Some(65534)).unwrap();
        if link {
            std::os::unix::fs::symlink(&theirs, &planted).unwrap();
        }
        let child = Command::new(FOSTER)
            .args(["run", "--no-contain", "--socket"])
            .arg(d.path("run.sock"))
            .arg(&cfg)
            .env("XDG_RUNTIME_DIR", &runtime)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = common::child::output_within(child, "foster run");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(
            err.contains("notify socket") && err.contains(planted.to_str().unwrap()),
            "{err}"
        );
        assert!(
            err.contains("65534") || err.contains("symbolic link"),
            "{err}"
        );
        assert!(err.contains("whatever --socket says"), "{err}");
        assert_eq!(
            std::fs::read_dir(made).unwrap().count(),
            0,
            "nothing bound in it"
        );
        assert!(!marker.exists(), "nothing started");
    }
}

/// The variable that makes this binary the sender of [`raw_sender`]: the datagram's bytes, in
/// hex.
const RAW: &str = "FOSTER_TEST_RAW";

/// Not a test: this binary run as a helper with [`RAW`] set sends those bytes as one datagram
/// to `$NOTIFY_SOCKET`, then waits for foster's barrier.
#[test]
fn raw_sender() {
    let Ok(hex) = std::env::var(RAW) else {
        return;
    };
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|k| u8::from_str_radix(&hex[k..k + 2], 16).unwrap())
        .collect();
    let to = std::env::var_os("NOTIFY_SOCKET").unwrap();
    let out = std::os::unix::net::UnixDatagram::unbound().unwrap();
    out.send_to(&bytes, Path::new(&to)).unwrap();
    foster::supervision::readiness::notify::barrier(Some(&to), common::LIMIT).unwrap();
}

/// A `STATUS=` of terminal escapes, invalid UTF-8 and 2,000 bytes of two-byte characters is
/// kept as its first 512 bytes at most, cut between characters, the invalid bytes replaced;
/// `ctl status` shows it escaped (no raw control character), its JSON as kept.
#[test]
fn a_status_text_is_bounded_valid_and_escaped() {
    let d = Dir::new("surf", "status");
    let mut datagram = b"READY=1\nSTATUS=\x1b[2J\x07\xff\xfe\x9b".to_vec();
    datagram.extend("é".repeat(1000).as_bytes());
    let hex: String = datagram.iter().map(|b| format!("{b:02x}")).collect();
    let body = format!(
        "{RAW}={hex} '{}' surfaces::raw_sender --exact --quiet >/dev/null\nexec sleep 1000\n",
        std::env::current_exe().unwrap().display()
    );
    let web = d.file("web.sh", &body);
    let config = format!(
        "[[helper]]\nname = \"web\"\ncommand = [\"sh\", {:?}]\nready = {{ notify = true }}\n",
        web.to_str().unwrap()
    );
    let mut run = Run::start(&d, &config, &["--no-contain"]);
    run.wait_for("ready", |e| e["event"] == "state" && e["state"] == "ready");
    let status = run.status();
    let text = status["helpers"][0]["status_text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        text.len() <= 512 && text.len() > 500,
        "{} bytes",
        text.len()
    );
    assert!(
        text.starts_with("\x1b[2J\x07\u{fffd}\u{fffd}\u{fffd}é"),
        "{text:?}"
    );
    assert!(text.ends_with('é'), "cut between characters: {text:?}");
    let out = run.ctl(&["status"]);
    let shown = String::from_utf8(out.stdout).unwrap();
    let line = shown.lines().find(|l| l.contains("status: ")).unwrap();
    assert!(!line.chars().any(char::is_control), "{line:?}");
    assert!(line.contains(r"\e[2J\x07"), "{line:?}");
    assert_eq!(run.terminate(), 0);
}

/// A sender outside the helpers' trees at the end of a chain of 70 processes (deeper than
/// foster follows an unknown sender's ancestry) is refused without a read of foster's tree for
/// each datagram: before, a chain deeper than 64 made every datagram a listing of `/proc`.
#[test]
fn a_deep_sender_outside_the_tree_costs_no_read_of_the_tree() {
    const SENT: usize = 10;
    let d = Dir::new("surf", "deep");
    let sock = d.fifo("sock");
    let config = format!(
        "[[helper]]\nname = \"web\"\n\
         command = [\"sh\", \"-c\", \"echo $NOTIFY_SOCKET > {}; exec sleep 1000\"]\n\
         ready = {{ notify = true }}\n",
        sock.display()
    );
    let (mut run, err) = Run::start_with_stderr(&d, &config, &["--no-contain", "-vv"]);
    let socket = read_fifo(&sock).trim().to_string();
    let deep = d.file(
        "deep.sh",
        &format!(
            "n=$1\nif [ \"$n\" -gt 0 ]; then sh \"$0\" $((n - 1)); exit $?; fi\n\
             i=0\nwhile [ $i -lt {SENT} ]; do\n  '{FOSTER}' notify STATUS=x || exit 1\n  \
             i=$((i + 1))\ndone\n"
        ),
    );
    let sent = Command::new("sh")
        .arg(&deep)
        .arg("70")
        .env("NOTIFY_SOCKET", &socket)
        .status()
        .unwrap();
    assert!(sent.success());
    // Each notification and its barrier refused: the reads of the tree between the first
    // refusal and the last.
    let (mut refused, mut reads) = (0, 0);
    while refused < 2 * SENT {
        let l = line_with(&err, "foster: ");
        if l.contains("ignored a datagram from") {
            refused += 1;
        } else if refused > 0 && l.contains("read foster's subtree") {
            reads += 1;
        }
    }
    assert_eq!(
        reads, 0,
        "reads of the tree for {refused} refused datagrams"
    );
    assert_eq!(run.terminate(), 0);
}

/// `--events-log /dev/stdout` with foster's standard output a pipe whose reader never reads:
/// once the pipe is full, the events are dropped and counted (one warning that says why),
/// foster goes on (it answers `ctl status`), and every line the reader then finds is whole
/// JSON. Before, foster's loop blocked in the write for good.
#[test]
fn an_events_log_on_a_stalled_standard_output_does_not_stop_foster() {
    use std::io::Read;
    let d = Dir::new("surf", "stdout");
    let cfg = d.file(
        "c.toml",
        "[[helper]]\nname = \"crasher\"\ncommand = [\"/bin/sh\", \"-c\", \"exit 3\"]\n\
         restart = \"always\"\n\
         backoff = { initial = \"5ms\", max = \"5ms\", limit = 100000 }\n",
    );
    let socket = d.path("run.sock");
    let mut child = Command::new(FOSTER)
        .args([
            "run",
            "--no-contain",
            "--events-log",
            "/dev/stdout",
            "--socket",
        ])
        .arg(&socket)
        .arg(&cfg)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = common::lines::lines(child.stderr.take().unwrap());
    let mut stdout = child.stdout.take().unwrap();
    let mut guard = common::supervised::Guard(child);
    let first = line_with(&err, "cannot write the events log");
    assert!(first.contains("its reader does not keep up"), "{first}");
    let status = common::supervised::ctl_command(&socket)
        .arg("status")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = common::child::output_within(status, "ctl status");
    assert!(status.status.success(), "{status:?}");
    assert!(
        common::supervised::terminate(&mut guard.0),
        "ended on SIGTERM"
    );
    let mut text = Vec::new();
    stdout.read_to_end(&mut text).unwrap();
    assert!(
        text.len() >= 4096 && text.ends_with(b"\n"),
        "{} bytes",
        text.len()
    );
    for l in text.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        if let Err(e) = serde_json::from_slice::<serde_json::Value>(l) {
            panic!("{e}: {:?}", String::from_utf8_lossy(l));
        }
    }
}
