//! Readiness and liveness checks end to end: `foster run` with small configurations
//! ([`common::supervised`]), its event stream and `foster ctl status --json` as what is
//! observed; FIFOs hold the helpers where a test needs them held. Deadlines are only safety
//! nets; the polls of the status wait for a state, they do not time anything.
//!
//! The notify protocol's datagrams come from this test binary itself run as a sender
//! ([`notify_sender`], which waits for foster's barrier as `systemd-notify` does), and from the
//! real `systemd-notify` where it is installed.

use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

/// The variable that makes this binary a notify sender ([`notify_sender`]).
const SEND: &str = "FOSTER_TEST_NOTIFY";

use crate::common;
use common::Dir;
use common::LIMIT;
use common::supervised::Run;

fn kind(v: &Value) -> &str {
    v["event"].as_str().unwrap_or("")
}

/// Whether `v` is the `state` event of a helper becoming ready.
fn ready(v: &Value) -> bool {
    kind(v) == "state" && v["state"] == "ready"
}

fn helper<'a>(status: &'a Value, name: &str) -> &'a Value {
    status["helpers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["name"] == name)
        .unwrap_or_else(|| panic!("no helper {name} in {status:#}"))
}

/// The first line written into `fifo`, trimmed: waits (in `poll`, up to [`LIMIT`]) for a
/// writer to write it.
fn read_line(fifo: &Path) -> String {
    common::fifo::line(fifo).trim().to_string()
}

/// Writes a line into `fifo` once its reader has opened it (up to [`LIMIT`]).
fn release(fifo: &Path) {
    use std::os::unix::fs::OpenOptionsExt;
    let deadline = Instant::now() + LIMIT;
    loop {
        match std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(fifo)
        {
            Ok(mut f) => {
                std::io::Write::write_all(&mut f, b"go\n").unwrap();
                return;
            }
            // No reader yet.
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
                assert!(Instant::now() < deadline, "no reader of {}", fifo.display());
                // Safety net only: the helper opens it as soon as it gets there.
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("{}: {e}", fifo.display()),
        }
    }
}

/// Whether `pid` is gone: no `/proc` entry, so not even a zombie (it was reaped).
fn gone(pid: i32) -> bool {
    !Path::new(&format!("/proc/{pid}")).exists()
}

/// The shell words that send `assignments` (`READY=1`, ...; the shell expands them) to
/// `$NOTIFY_SOCKET` through this test binary ([`notify_sender`]).
fn send(assignments: &str) -> String {
    format!(
        "{SEND}=\"{assignments}\" '{}' readiness::notify_sender --exact --quiet >/dev/null",
        std::env::current_exe().unwrap().display()
    )
}

/// Set, the sender does not wait for foster's barrier: it ends as soon as its datagram is
/// queued ([`send_now`]).
const NO_BARRIER: &str = "FOSTER_TEST_NOTIFY_NO_BARRIER";
/// Set to a FIFO, the sender first makes a child of its own (`sleep`) and writes its pid into
/// it.
const PARENT: &str = "FOSTER_TEST_NOTIFY_PARENT";
/// Set to a FIFO, the sender sends only once a line comes in it.
const GO: &str = "FOSTER_TEST_NOTIFY_GO";
/// Set to a FIFO, this binary run as [`notify_sender`] is a helper that takes pids instead of
/// sending ([`pid_taker`]): it reads a pid from it, makes a child of its own that has that pid,
/// and says in the FIFO [`TAKEN`] names whether it could; then the next.
const TAKE: &str = "FOSTER_TEST_TAKE";
const TAKEN: &str = "FOSTER_TEST_TAKEN";

/// Set to a path (a FIFO), the sender writes `sent` into it once its datagram is queued,
/// before its barrier ([`send_telling`]).
const TELL: &str = "FOSTER_TEST_NOTIFY_TELL";

/// [`send`], which writes `sent` into `fifo` once the datagram is queued, then waits for
/// foster's barrier as [`send`] does: the sender is still running when foster reads it.
fn send_telling(assignments: &str, fifo: &Path) -> String {
    format!("{TELL}='{}' {}", fifo.display(), send(assignments))
}

/// [`send`] without the barrier: the sender ends once its datagram is queued, whether foster
/// has read it or not (as `systemd-notify --no-block`, or a program calling `sd_notify` that
/// exits at once).
fn send_now(assignments: &str) -> String {
    format!("{NO_BARRIER}=1 {}", send(assignments))
}

/// For [`notify_sender`] with [`TAKE`] set: writes `$NOTIFY_SOCKET` into the FIFO `sock`, then
/// for each pid read from the FIFO `take`, [`take_pid`] writes into `report` whether it made a
/// child that has it. Ends when foster stops it.
fn pid_taker(sock: &str, take: &str, report: &str) {
    let socket = std::env::var("NOTIFY_SOCKET").unwrap();
    std::fs::write(sock, format!("{socket}\n")).unwrap();
    loop {
        // A read may end at a writer's close without a line: then read again.
        let Ok(line) = std::fs::read_to_string(take) else {
            continue;
        };
        let Ok(pid) = line.trim().parse::<i32>() else {
            continue;
        };
        let taken = take_pid(pid);
        std::fs::write(report, if taken { "taken\n" } else { "missed\n" }).unwrap();
    }
}

/// A child that has the pid `pid` (free now: its holder was reaped), made by setting the pid
/// namespace's last pid to `pid - 1` (root) before each fork; another process of the machine
/// may fork in between, so it is tried again (a child with another pid is killed and reaped),
/// until `pid` is taken by some other process. The child pauses until it is killed.
fn take_pid(pid: i32) -> bool {
    let mut taken = false;
    for _ in 0..1000 {
        if Path::new(&format!("/proc/{pid}")).exists() {
            break;
        }
        std::fs::write("/proc/sys/kernel/ns_last_pid", format!("{}", pid - 1)).unwrap();
        // SAFETY: the child only pauses (async-signal-safe) until a signal ends it.
        let child = unsafe { libc::fork() };
        if child == 0 {
            loop {
                // SAFETY: pause(2) alone, in the forked child.
                unsafe { libc::pause() };
            }
        }
        assert!(child > 0, "fork: {}", std::io::Error::last_os_error());
        if child == pid {
            taken = true;
            break;
        }
        // SAFETY: our own child, by the pid fork returned, reaped at once.
        unsafe {
            libc::kill(child, libc::SIGKILL);
            libc::waitpid(child, std::ptr::null_mut(), 0);
        }
    }
    taken
}

/// Not a test: this binary run with `FOSTER_TEST_NOTIFY` set sends its value (assignments,
/// one per line or separated by spaces) to `$NOTIFY_SOCKET` as one datagram, then waits for
/// the receiver's barrier (`BARRIER=1` with a pipe's write end: it has handled what came
/// before once it closes the descriptor), as `sd_notify_barrier(3)` and `systemd-notify` do.
#[test]
fn notify_sender() {
    if let (Ok(take), Ok(report), Ok(sock)) = (
        std::env::var(TAKE),
        std::env::var(TAKEN),
        std::env::var(SEND),
    ) {
        return pid_taker(&sock, &take, &report);
    }
    let Ok(text) = std::env::var(SEND) else {
        return;
    };
    if let Some(parent) = std::env::var_os(PARENT) {
        // Left to be adopted by foster when this process ends (foster reaps it).
        #[allow(clippy::zombie_processes)]
        std::process::Command::new("sleep")
            .arg("1000")
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::fs::write(parent, format!("{}\n", std::process::id())).unwrap();
    }
    if let Some(go) = std::env::var_os(GO) {
        std::fs::read_to_string(go).unwrap();
    }
    let to = std::env::var_os("NOTIFY_SOCKET");
    let msg = text.split_whitespace().collect::<Vec<_>>().join("\n");
    foster::supervision::readiness::notify::send(to.as_deref(), &msg, None).unwrap();
    if let Some(fifo) = std::env::var_os(TELL) {
        std::fs::write(fifo, "sent\n").unwrap();
    }
    if std::env::var_os(NO_BARRIER).is_some() {
        return;
    }
    // foster has handled the datagram once it has closed the barrier's descriptor.
    foster::supervision::readiness::notify::barrier(to.as_deref(), LIMIT).unwrap();
}

/// A script file in `d` for a helper's command (`["sh", PATH]`): no quoting inside TOML.
fn script(d: &Dir, name: &str, body: &str) -> String {
    d.file(name, body).display().to_string()
}

/// A notify helper becomes ready at its `READY=1`, not before: held by a FIFO, it is still
/// starting while a datagram from a process outside its tree (this test) says `READY=1` to its
/// socket, which is ignored and counted. Then its own `READY=1` (with a `STATUS=`) makes it
/// ready, and the status text is in the status as sent. Its `RELOADING=1` makes it `starting`
/// again until its next `READY=1`.
#[test]
fn a_notify_helper_is_ready_at_its_ready_1_and_a_datagram_from_outside_is_ignored() {
    let d = Dir::new("ready", "notify");
    let (sock, hold, reload, again) = (
        d.fifo("sock"),
        d.fifo("hold"),
        d.fifo("reload"),
        d.fifo("again"),
    );
    let db = script(
        &d,
        "db.sh",
        &format!(
            "echo \"$NOTIFY_SOCKET\" > {}\nread x < {}\n{}\nread x < {}\n{}\nread x < {}\n{}\n\
             exec sleep 1000\n",
            sock.display(),
            hold.display(),
            send("READY=1 STATUS=accepting"),
            reload.display(),
            send("RELOADING=1 STATUS=reloading"),
            again.display(),
            send("READY=1 STATUS=accepting"),
        ),
    );
    let mut run = Run::start_uncontained(
        &d,
        &format!(
            "[[helper]]\nname = \"db\"\ncommand = [\"sh\", \"{db}\"]\n\
             ready = {{ notify = true, timeout = \"30s\" }}\n"
        ),
    );
    let path = read_line(&sock);
    assert!(
        std::fs::symlink_metadata(&path).is_ok(),
        "NOTIFY_SOCKET={path:?} is no socket"
    );
    // From outside the helper's tree: ignored.
    let out = std::os::unix::net::UnixDatagram::unbound().unwrap();
    out.send_to(b"READY=1\nSTATUS=spoofed", &path).unwrap();
    let s = run.wait_status("refusing the outsider", |s| {
        s["supervisor"]["notify_refused"] == 1
    });
    let h = helper(&s, "db");
    assert_eq!(h["state"], "starting", "{h:#}");
    assert!(h["status_text"].is_null(), "{h:#}");
    assert!(
        !run.so_far().iter().any(ready),
        "ready before its READY=1: {:#?}",
        run.seen
    );
    release(&hold);
    let became = run.wait_for("ready", ready);
    assert_eq!(became["helper"], "db");
    assert!(
        became["detail"].as_str().unwrap().ends_with("(notify)"),
        "{became:#}"
    );
    // The event says the status text the datagram that made it ready carried too.
    assert_eq!(became["status_text"], "accepting", "{became:#}");
    let s = run.status();
    let h = helper(&s, "db");
    assert_eq!(h["state"], "ready", "{h:#}");
    assert_eq!(h["status_text"], "accepting", "{h:#}");
    assert_eq!(s["supervisor"]["notify_refused"], 1);
    // RELOADING=1: starting again, until READY=1.
    release(&reload);
    let reloading = run.wait_for("starting again", |e| {
        kind(e) == "state"
            && e["state"] == "starting"
            && e["detail"]
                .as_str()
                .is_some_and(|d| d.contains("RELOADING=1"))
    });
    assert_eq!(reloading["status_text"], "reloading", "{reloading:#}");
    assert_eq!(helper(&run.status(), "db")["status_text"], "reloading");
    release(&again);
    let back = run.wait_for("ready again", |e| {
        ready(e) && e["detail"].as_str().is_some_and(|d| d.starts_with("again"))
    });
    assert_eq!(back["helper"], "db");
    assert_eq!(run.terminate(), 0);
    assert!(
        std::fs::symlink_metadata(&path).is_err(),
        "the notify socket is removed at the end"
    );
}

/// A datagram whose sender has ended, been reaped, and whose pid a process of the helper's tree
/// took since, is not that process's: foster tells the sender by the pidfd the kernel gave
/// with its datagram, not by its pid. While foster is stopped, a sender outside the tree (a
/// child of this test) says `READY=1` and ends, and is reaped; then the helper makes a child
/// of its own that takes its pid (root: the pid namespace's last pid set before a fork). When foster goes
/// on, the datagram's pid names a process of the helper's tree: it must be refused all the
/// same, and the helper still `starting`. A datagram of this test's, refused too, comes after
/// it: once it is counted, foster has read the first.
#[test]
fn a_datagram_of_an_ended_sender_is_not_taken_for_the_process_that_reused_its_pid() {
    if common::skip::unless_root("making a child take a given pid needs root (ns_last_pid)") {
        return;
    }
    let d = Dir::new("ready", "reused");
    let (sock, take, taken) = (d.fifo("sock"), d.fifo("take"), d.fifo("taken"));
    // The helper is this binary as a pid taker: the children it makes are its own.
    let mut run = Run::start_uncontained(
        &d,
        &format!(
            "[[helper]]\nname = \"db\"\n\
             command = [\"{exe}\", \"readiness::notify_sender\", \"--exact\", \"--quiet\"]\n\
             env = {{ {TAKE} = \"{take}\", {TAKEN} = \"{taken}\", {SEND} = \"{sock}\" }}\n\
             ready = {{ notify = true, timeout = \"60s\" }}\n",
            exe = std::env::current_exe().unwrap().display(),
            take = take.display(),
            taken = taken.display(),
            sock = sock.display(),
        ),
    );
    let path = read_line(&sock);
    let mut tries = 0;
    loop {
        tries += 1;
        let got = common::child::while_stopped(&run.child, || {
            let mut outsider = std::process::Command::new(std::env::current_exe().unwrap())
                .args(["readiness::notify_sender", "--exact", "--quiet"])
                .env(SEND, "READY=1 STATUS=spoofed")
                .env(NO_BARRIER, "1")
                .env("NOTIFY_SOCKET", &path)
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap();
            let pid = outsider.id() as i32;
            assert!(
                common::child::wait_exit(&mut outsider) == 0,
                "the outsider's send"
            );
            assert!(gone(pid), "the outsider is reaped");
            std::fs::write(&take, format!("{pid}\n")).unwrap();
            read_line(&taken)
        });
        if got == "taken" {
            break;
        }
        assert!(
            tries < 5,
            "no child of the helper could take a freed pid in {tries} tries"
        );
    }
    // After the datagrams above: once this one is counted, they were all read.
    let out = std::os::unix::net::UnixDatagram::unbound().unwrap();
    out.send_to(b"STATUS=after", &path).unwrap();
    let s = run.wait_status("every datagram read", |s| {
        s["supervisor"]["notify_refused"].as_u64() >= Some(tries + 1)
            || helper(s, "db")["state"] != "starting"
    });
    let h = helper(&s, "db");
    assert_eq!(
        h["state"], "starting",
        "taken for its pid's new holder: {s:#}"
    );
    assert!(h["status_text"].is_null(), "{h:#}");
    assert_eq!(s["supervisor"]["notify_refused"], tries + 1, "{s:#}");
    let code = run.terminate();
    assert!(code == 0 || code == 4, "{code}");
}

/// Whether process `holder` has a pidfd of process `pid` open (its `fdinfo` says `Pid: PID`).
fn holds_pidfd(holder: i32, pid: i32) -> bool {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{holder}/fdinfo")) else {
        return false;
    };
    dir.flatten().any(|e| {
        std::fs::read(e.path()).is_ok_and(|t| {
            foster::process::identity::PidfdInfo::parse(&t)
                .is_some_and(|i| i.pid == foster::process::identity::PidfdPid::Pid(pid))
        })
    })
}

/// A sender that has ended and been reaped before foster read its datagram is taken for what it
/// was when foster holds a pidfd of it: a process of the helper's tree that has a child (foster
/// watches such processes for their end, once a read of its tree found them: here the one a
/// status request makes) says `READY=1` and ends, and the helper reaps it, all while foster is
/// stopped. No process has its pid any more; when foster goes on, the pidfd that came with the
/// datagram is matched to the one it holds, and the helper is ready.
#[test]
fn a_datagram_of_an_ended_sender_foster_held_a_pidfd_of_counts() {
    let d = Dir::new("ready", "watched");
    let (mid, go, done) = (d.fifo("mid"), d.fifo("go"), d.fifo("done"));
    let app = script(
        &d,
        "app.sh",
        &format!(
            "{PARENT}='{}' {GO}='{}' {}\necho reaped > {}\nexec sleep 1000\n",
            mid.display(),
            go.display(),
            send_now("READY=1 STATUS=launched"),
            done.display(),
        ),
    );
    let mut run = Run::start_uncontained(
        &d,
        &format!(
            "[[helper]]\nname = \"app\"\ncommand = [\"sh\", \"{app}\"]\n\
             ready = {{ notify = true, timeout = \"60s\" }}\n"
        ),
    );
    let sender: i32 = read_line(&mid).parse().unwrap();
    // A read of the tree, which finds the sender with its child.
    let s = run.status();
    assert_eq!(helper(&s, "app")["state"], "starting");
    let foster = run.child.id() as i32;
    assert!(
        holds_pidfd(foster, sender),
        "foster watches {sender}, a parent in its tree"
    );
    common::child::while_stopped(&run.child, || {
        release(&go);
        assert_eq!(read_line(&done), "reaped");
        assert!(gone(sender), "the sender is reaped");
    });
    let s = run.wait_status("the datagram read", |s| {
        helper(s, "app")["state"] != "starting" || s["supervisor"]["notify_refused"] != 0
    });
    assert_eq!(helper(&s, "app")["state"], "ready", "{s:#}");
    assert_eq!(helper(&s, "app")["status_text"], "launched", "{s:#}");
    assert_eq!(s["supervisor"]["notify_refused"], 0, "{s:#}");
    let code = run.terminate();
    assert!(code == 0 || code == 4, "{code}");
}

/// What a helper's own process said before it ended is handled before its end: the helper (this
/// binary as a sender, not waiting for a barrier) says `READY=1` and exits at once, all while
/// foster is stopped, so that its datagram and its end wait together. foster must read the
/// datagram before it reaps the helper: the helper is ready, then it ends, and the helper that
/// waits for it to be ready is launched. The loop takes its ready sources in a random order (the
/// end came first in about a third of the rounds here), so eight rounds, each with a foster of
/// its own.
#[test]
fn a_helper_that_says_ready_1_and_exits_at_once_was_ready_before_it_ended() {
    for round in 1..=8 {
        let d = Dir::new("ready", &format!("oneshot{round}"));
        let go = d.fifo("go");
        let mut run = Run::start_uncontained(
            &d,
            &format!(
                "[[helper]]\nname = \"setup\"\n\
                 command = [\"{exe}\", \"readiness::notify_sender\", \"--exact\", \"--quiet\"]\n\
                 env = {{ {SEND} = \"READY=1\", {NO_BARRIER} = \"1\", {GO} = \"{go}\" }}\n\
                 ready = {{ notify = true, timeout = \"60s\" }}\n\
                 [[helper]]\nname = \"user\"\ncommand = [\"sleep\", \"1000\"]\n\
                 depends_on = {{ setup = \"ready\" }}\n",
                exe = std::env::current_exe().unwrap().display(),
                go = go.display(),
            ),
        );
        run.wait_for("setup's launch", |e| {
            kind(e) == "launch" && e["helper"] == "setup"
        });
        let pid = helper(&run.status(), "setup")["identity"]["pid"]
            .as_i64()
            .unwrap() as i32;
        let pidfd = foster::process::identity::pidfd_open(pid).unwrap();
        common::child::while_stopped(&run.child, || {
            release(&go);
            assert!(
                foster::process::identity::poll_readable(pidfd.as_raw_fd(), Some(LIMIT)),
                "the helper did not exit"
            );
        });
        let exit = run.until("setup's exit", |e| {
            kind(e) == "exit" && e["helper"] == "setup"
        });
        assert!(
            run.seen[..exit]
                .iter()
                .any(|e| ready(e) && e["helper"] == "setup"),
            "round {round}: its end was taken before its READY=1: {:#?}",
            run.seen
        );
        run.wait_for("user's launch", |e| {
            kind(e) == "launch" && e["helper"] == "user"
        });
        assert_eq!(run.terminate(), 0);
    }
}

/// A supervisor (uncontained) of one helper `web` with `ready = { notify = true }` that runs
/// the shell script `body`, once it has launched it.
fn notify_web(d: &Dir, body: &str) -> Run {
    notify_web_with(d, body, &["--no-contain"], None)
}

/// [`notify_web`] with `extra` arguments, its standard error written into `log` when given.
fn notify_web_with(d: &Dir, body: &str, extra: &[&str], log: Option<&Path>) -> Run {
    let web = script(d, "web.sh", body);
    let mut run = Run::start_logging(
        d,
        &format!(
            "[[helper]]\nname = \"web\"\ncommand = [\"sh\", \"{web}\"]\n\
             ready = {{ notify = true }}\n"
        ),
        extra,
        log,
    );
    run.wait_for("launch", |e| kind(e) == "launch");
    run
}

/// The real `systemd-notify --ready` (Debian's `systemd` package) makes a helper ready as under
/// systemd, its `--status` shown.
#[test]
fn systemd_notify_makes_a_helper_ready() {
    let Some(tool) = ["/usr/bin/systemd-notify", "/bin/systemd-notify"]
        .into_iter()
        .find(|p| Path::new(p).exists())
    else {
        common::skip::host("systemd-notify is not installed (Debian package systemd)");
        return;
    };
    let d = Dir::new("ready", "systemd");
    let hold = d.fifo("hold");
    let mut run = notify_web(
        &d,
        &format!(
            "read x < {}\n{tool} --ready --status='serving on port 8080'\nexec sleep 1000\n",
            hold.display()
        ),
    );
    let s = run.status();
    assert_eq!(helper(&s, "web")["state"], "starting");
    release(&hold);
    let became = run.wait_for("ready", ready);
    assert!(
        became["detail"].as_str().unwrap().ends_with("(notify)"),
        "{became:#}"
    );
    let s = run.status();
    assert_eq!(helper(&s, "web")["status_text"], "serving on port 8080");
    assert_eq!(s["supervisor"]["notify_refused"], 0, "{s:#}");
    assert_eq!(run.terminate(), 0);
}

/// `foster notify` (a `systemd-notify` of foster's own) in a helper's script makes it ready,
/// with its status text and main pid, and returns only once foster has handled what it sent
/// (its barrier): the status asked right after it returned says so, without a wait, and nothing
/// was refused though the sender was a short-lived child of the helper's shell. Outside a
/// helper (no `NOTIFY_SOCKET`) it says so and exits 1.
#[test]
fn foster_notify_makes_a_helper_ready_before_it_returns() {
    let d = Dir::new("ready", "fosternotify");
    let hold = d.fifo("hold");
    let done = d.fifo("done");
    let mut run = notify_web(
        &d,
        &format!(
            "read x < {}\n\"$FOSTER_EXE\" notify --ready --status 'serving on port 8080' \
             --pid $$\necho $? > {}\nexec sleep 1000\n",
            hold.display(),
            done.display()
        ),
    );
    let s = run.status();
    assert_eq!(helper(&s, "web")["state"], "starting", "{s:#}");
    let pid = helper(&s, "web")["identity"]["pid"].clone();
    release(&hold);
    assert_eq!(read_line(&done), "0", "foster notify failed");
    let s = run.status();
    let web = helper(&s, "web");
    assert_eq!(web["state"], "ready", "{s:#}");
    assert!(
        web["detail"].as_str().unwrap().ends_with("(notify)"),
        "{s:#}"
    );
    assert_eq!(web["status_text"], "serving on port 8080", "{s:#}");
    assert_eq!(web["main_pid"], pid, "{s:#}");
    assert_eq!(s["supervisor"]["notify_refused"], 0, "{s:#}");
    assert_eq!(run.terminate(), 0);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_foster"))
        .args(["notify", "--ready"])
        .env_remove("NOTIFY_SOCKET")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("NOTIFY_SOCKET is not set"), "{err}");
}

/// A `MAINPID=` naming no process of the helper's tree, sent in a loop (`foster notify --pid 1`,
/// each waiting for foster's barrier): one warning line, the others at debug level. The
/// helper's `READY=1` after them ends the run: by then foster has handled every one.
#[test]
fn a_main_pid_outside_the_tree_sent_in_a_loop_logs_one_warning() {
    const SENT: usize = 100;
    let d = Dir::new("ready", "mainpid-loop");
    let log = d.path("stderr.log");
    let body = format!(
        "i=0\nwhile [ $i -lt {SENT} ]; do\n  \"$FOSTER_EXE\" notify --pid 1 || exit 1\n  \
         i=$((i + 1))\ndone\n\"$FOSTER_EXE\" notify --ready\nexec sleep 1000\n"
    );
    let mut run = notify_web_with(&d, &body, &["--no-contain"], Some(&log));
    run.wait_for("ready", ready);
    assert_eq!(run.terminate(), 0);
    let text = std::fs::read_to_string(&log).unwrap();
    let warned = text
        .lines()
        .filter(|l| l.contains("MAINPID=1 is not a process of its tree"))
        .count();
    assert_eq!(warned, 1, "{SENT} sent: {text}");
}

/// Contained, foster runs in a PID namespace of its own, where a process outside it (this
/// test) has no pid: the kernel gives 0. The datagram such a sender sends to a notify socket
/// is refused, and the warning names the sender as a process outside foster's PID namespace,
/// never as a pid 0.
#[test]
fn a_sender_outside_fosters_pid_namespace_is_named_so() {
    let d = Dir::new("ready", "outside");
    let sock = d.fifo("sock");
    let log = d.path("stderr.log");
    let body = format!(
        "echo \"$NOTIFY_SOCKET\" > {}\nexec sleep 1000\n",
        sock.display()
    );
    let mut run = notify_web_with(&d, &body, &[], Some(&log));
    if run.status()["supervisor"]["contained"] != true {
        common::skip::refused("foster could not make a PID namespace here");
        return;
    }
    let path = read_line(&sock);
    let out = std::os::unix::net::UnixDatagram::unbound().unwrap();
    out.send_to(b"READY=1", &path).unwrap();
    run.wait_status("the outsider refused", |s| {
        s["supervisor"]["notify_refused"] == 1
    });
    assert_eq!(run.terminate(), 0);
    let text = std::fs::read_to_string(&log).unwrap();
    let me = nix::unistd::geteuid().as_raw();
    let named = format!(
        "ignored a datagram from a process outside foster's PID namespace (uid {me}): not a \
         process of a helper's tree"
    );
    assert!(text.contains(&named), "{text}");
    assert!(!text.contains("pid 0"), "{text}");
}

/// `MAINPID=` and `ERRNO=` are shown by `ctl status` as they are in its JSON: the main pid
/// when it is another process than the one foster launched (here the helper's child), the
/// errno even without a status text.
#[test]
fn ctl_status_shows_a_helpers_main_pid_and_errno() {
    let d = Dir::new("ready", "mainpid");
    let web = script(
        &d,
        "web.sh",
        "sleep 1000 &\n\"$FOSTER_EXE\" notify --ready --pid $! ERRNO=5\nwait\n",
    );
    let mut run = Run::start_uncontained(
        &d,
        &format!(
            "[[helper]]\nname = \"web\"\ncommand = [\"sh\", \"{web}\"]\n\
             ready = {{ notify = true }}\n"
        ),
    );
    run.wait_for("ready", ready);
    let s = run.status();
    let web = helper(&s, "web");
    let main = web["main_pid"].as_i64().expect("main_pid");
    assert_ne!(Some(main), web["identity"]["pid"].as_i64(), "{s:#}");
    assert_eq!(web["errno"], 5, "{s:#}");
    let text = String::from_utf8_lossy(&run.ctl(&["status"]).stdout).to_string();
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("web "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains(&format!("main pid {main}")), "{line}");
    assert!(line.contains("(errno 5)"), "{line}");
    assert_eq!(run.terminate(), 0);
}

/// The s6 protocol: ready at the newline the helper writes to its descriptor 3, not before;
/// a helper that depends on it being ready is launched only then.
#[test]
fn a_newline_on_the_notification_descriptor_makes_a_helper_ready() {
    let d = Dir::new("ready", "fd");
    let hold = d.fifo("hold");
    let app = script(
        &d,
        "app.sh",
        &format!(
            "read x < {}\nprintf 'almost' >&3\necho ' there' >&3\nexec sleep 1000 3>&-\n",
            hold.display()
        ),
    );
    let mut run = Run::start_uncontained(
        &d,
        &format!(
            "[[helper]]\nname = \"app\"\ncommand = [\"sh\", \"{app}\"]\n\
             ready = {{ fd = 3, timeout = \"30s\" }}\n\
             [[helper]]\nname = \"user\"\ncommand = [\"sleep\", \"1000\"]\n\
             depends_on = {{ app = \"ready\" }}\n"
        ),
    );
    run.wait_for("launch", |e| kind(e) == "launch");
    run.wait_for("user waiting", |e| {
        kind(e) == "state" && e["helper"] == "user" && e["state"] == "waiting"
    });
    let s = run.status();
    assert_eq!(helper(&s, "app")["state"], "starting");
    assert_eq!(helper(&s, "user")["state"], "waiting");
    release(&hold);
    let became = run.wait_for("ready", ready);
    assert!(
        became["detail"].as_str().unwrap().ends_with("(fd)"),
        "{became:#}"
    );
    run.wait_for("user launched", |e| {
        kind(e) == "launch" && e["helper"] == "user"
    });
    let at = |pred: &dyn Fn(&Value) -> bool| run.seen.iter().position(pred).unwrap();
    assert!(
        at(&|e| ready(e) && e["helper"] == "app")
            < at(&|e| kind(e) == "launch" && e["helper"] == "user"),
        "{:#?}",
        run.seen
    );
    assert_eq!(helper(&run.status(), "app")["state"], "ready");
    assert_eq!(run.terminate(), 0);
}

/// An exec probe that hangs is killed at the readiness timeout with its tree (its child in its
/// process group) and reaped: neither pid is left, not even as a zombie. The helper has failed:
/// it is stopped, and its restart rules (never) end it.
#[test]
fn a_hung_exec_probe_is_killed_with_its_tree_at_its_timeout_and_reaped() {
    let d = Dir::new("ready", "hung");
    let pids = d.fifo("pids");
    let probe = script(
        &d,
        "probe.sh",
        &format!("sleep 1000 &\necho $$ $! > {}\nwait\n", pids.display()),
    );
    let mut run = Run::start_uncontained(
        &d,
        &format!(
            "[[helper]]\nname = \"db\"\ncommand = [\"sleep\", \"1000\"]\n\
             ready = {{ exec = [\"sh\", \"{probe}\"], interval = \"10ms\", timeout = \"1s\" }}\n"
        ),
    );
    let line = read_line(&pids);
    let (probe_pid, child_pid): (i32, i32) = {
        let mut w = line.split_whitespace().map(|p| p.parse().unwrap());
        (w.next().unwrap(), w.next().unwrap())
    };
    assert!(!gone(probe_pid) && !gone(child_pid), "the probe runs");
    let failed = run.wait_for("check_failed", |e| kind(e) == "check_failed");
    assert_eq!(failed["check"], "ready", "{failed:#}");
    assert!(
        failed["reason"]
            .as_str()
            .unwrap()
            .contains("not ready within 1s"),
        "{failed:#}"
    );
    let stop = run.wait_for("its stop signal", |e| {
        kind(e) == "signal" && e["helper"] == "db"
    });
    assert_eq!(stop["reason"], "check_failed", "{stop:#}");
    run.wait_for("its exit", |e| kind(e) == "exit" && e["helper"] == "db");
    // Nothing left to supervise: foster ends, the helper having failed.
    assert_eq!(run.finish(), 3);
    for p in [probe_pid, child_pid] {
        assert!(gone(p), "probe process {p} left: {:?}", common::process(p));
    }
    assert!(!run.seen.iter().any(ready), "{:#?}", run.seen);
}

/// A TCP socket bound on the loopback, not listening yet: connections to it are refused.
fn bound_socket() -> (OwnedFd, std::net::SocketAddr) {
    // SAFETY: a fresh socket, owned from here on; bind and getsockname on stack structs.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0);
        let fd = OwnedFd::from_raw_fd(fd);
        let mut a: libc::sockaddr_in = std::mem::zeroed();
        a.sin_family = libc::AF_INET as libc::sa_family_t;
        a.sin_addr.s_addr = u32::from_ne_bytes([127, 0, 0, 1]);
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        assert_eq!(
            libc::bind(fd.as_raw_fd(), (&a as *const libc::sockaddr_in).cast(), len),
            0
        );
        let mut got: libc::sockaddr_in = std::mem::zeroed();
        let mut l = len;
        libc::getsockname(
            fd.as_raw_fd(),
            (&mut got as *mut libc::sockaddr_in).cast(),
            &mut l,
        );
        let port = u16::from_be(got.sin_port);
        (fd, format!("127.0.0.1:{port}").parse().unwrap())
    }
}

/// A connect probe: not ready while the port refuses connections (the attempts go on), ready
/// once the test's socket listens. Then its health check, on the same port, fails once the
/// socket is closed, `failures` times in a row, and the helper is restarted.
#[test]
fn a_connect_probe_waits_for_a_listener_and_its_health_check_for_it_to_go() {
    let d = Dir::new("ready", "tcp");
    let (sock, addr) = bound_socket();
    let mut run = Run::start_uncontained(
        &d,
        &format!(
            "[[helper]]\nname = \"db\"\ncommand = [\"sleep\", \"1000\"]\nrestart = \"always\"\n\
             ready = {{ tcp = \"{addr}\", interval = \"20ms\", timeout = \"30s\" }}\n\
             health = {{ tcp = \"{addr}\", interval = \"20ms\", timeout = \"5s\", failures = 2 }}\n"
        ),
    );
    run.wait_for("launch", |e| kind(e) == "launch");
    let s = run.status();
    assert_eq!(helper(&s, "db")["state"], "starting");
    // SAFETY: listen on our own bound socket.
    assert_eq!(unsafe { libc::listen(sock.as_raw_fd(), 16) }, 0);
    let became = run.wait_for("ready", ready);
    assert!(
        became["detail"].as_str().unwrap().ends_with("(tcp)"),
        "{became:#}"
    );
    assert!(
        !run.so_far().iter().any(|e| kind(e) == "check_failed"),
        "{:#?}",
        run.seen
    );
    drop(sock);
    let first = run.wait_for("a failed health check", |e| kind(e) == "check_failed");
    assert_eq!(
        (&first["check"], &first["failures"], &first["limit"]),
        (&"health".into(), &1.into(), &2.into())
    );
    assert!(
        first["reason"].as_str().unwrap().contains("refused"),
        "{first:#}"
    );
    run.wait_for("the second", |e| {
        kind(e) == "check_failed" && e["failures"] == 2
    });
    let stop = run.wait_for("its stop signal", |e| kind(e) == "signal");
    assert_eq!(stop["reason"], "check_failed");
    run.wait_for("its relaunch", |e| kind(e) == "launch" && e["attempt"] == 2);
    assert_eq!(run.terminate(), 0);
}

/// The watchdog: `WATCHDOG_USEC` and `WATCHDOG_PID` reach the helper; pings for longer than the
/// period keep it alive (each ping also sets its `STATUS=`, which the test waits for); once
/// they stop, the helper has failed: stopped, and restarted by its rules. The period is 2 s,
/// pings 50 ms apart plus what a ping costs (a process started, a barrier): a machine under
/// load can stall a ping for a good part of a second, and a period of 1 s was missed there.
#[test]
fn a_watchdog_that_stops_arriving_restarts_the_helper() {
    let d = Dir::new("ready", "watchdog");
    let (env, alive) = (d.fifo("env"), d.file("alive", ""));
    let pinger = script(
        &d,
        "pinger.sh",
        &format!(
            "echo $WATCHDOG_USEC $WATCHDOG_PID $$ > {env}\ni=0\n\
             while [ -e {alive} ]; do i=$((i+1)); {}; sleep 0.05; done\nexec sleep 1000\n",
            send("WATCHDOG=1 STATUS=ping-$i"),
            env = env.display(),
            alive = alive.display(),
        ),
    );
    let mut run = Run::start_uncontained(
        &d,
        &format!(
            "[[helper]]\nname = \"svc\"\ncommand = [\"sh\", \"{pinger}\"]\n\
             watchdog = \"2s\"\nrestart = \"on-failure\"\n"
        ),
    );
    let line = read_line(&env);
    let w: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(w.len(), 3, "{line}");
    assert_eq!(w[0], "2000000", "WATCHDOG_USEC");
    assert_eq!(w[1], w[2], "WATCHDOG_PID is the helper's own pid");
    // Pings for longer than the period, each one at most 50 ms plus a launch apart.
    let launched = Instant::now();
    let s = run.wait_status("pinged for longer than the period", |s| {
        let n: u32 = helper(s, "svc")["status_text"]
            .as_str()
            .and_then(|t| t.strip_prefix("ping-"))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        n >= 3 && launched.elapsed() > Duration::from_millis(2500)
    });
    assert_eq!(helper(&s, "svc")["state"], "running", "{s:#}");
    assert!(
        !run.so_far().iter().any(|e| kind(e) == "check_failed"),
        "the pings kept it alive: {:#?}",
        run.seen
    );
    std::fs::remove_file(&alive).unwrap();
    let failed = run.wait_for("its watchdog", |e| kind(e) == "check_failed");
    assert_eq!(failed["check"], "watchdog", "{failed:#}");
    assert!(
        failed["reason"]
            .as_str()
            .unwrap()
            .contains("no WATCHDOG=1 within 2s")
    );
    let stop = run.wait_for("its stop signal", |e| kind(e) == "signal");
    assert_eq!(stop["reason"], "check_failed");
    run.wait_for("the restart", |e| kind(e) == "restart");
    run.wait_for("its relaunch", |e| kind(e) == "launch" && e["attempt"] == 2);
    assert_eq!(run.terminate(), 0);
}

/// A `WATCHDOG=1` queued before the watchdog's deadline counts, however late foster reads it.
/// foster is stopped (SIGSTOP) while the helper pings (the sender says when its ping is queued;
/// it then waits for foster's barrier) and until the deadline has passed; once it goes on,
/// the overdue timer and the queued ping wake its loop together, and the ping must be read
/// before the timer is judged. The loop takes its ready sources in a random order (the timer
/// came first in most turns), so this is done three times; each time the ping's `STATUS=`
/// says foster has read it, and the helper must still be running, with no `check_failed`.
#[test]
fn a_watchdog_ping_queued_before_the_deadline_counts_however_late_it_is_read() {
    let d = Dir::new("ready", "queuedping");
    let (go, sent) = (d.fifo("go"), d.fifo("sent"));
    let pinger = script(
        &d,
        "pinger.sh",
        &format!(
            "i=0\nwhile read x < {go}; do i=$((i+1)); {}; done\n",
            send_telling("WATCHDOG=1 STATUS=ping-$i", &sent),
            go = go.display(),
        ),
    );
    // A period long enough that the test's steps between two stops (a status read, a FIFO)
    // never miss it on a loaded machine; each stop outlasts it.
    let period = Duration::from_secs(2);
    let mut run = Run::start_uncontained(
        &d,
        &format!(
            "[[helper]]\nname = \"svc\"\ncommand = [\"sh\", \"{pinger}\"]\n\
             watchdog = \"2s\"\nrestart = \"always\"\nstop_grace = \"100ms\"\n"
        ),
    );
    run.wait_for("launch", |e| kind(e) == "launch");
    for n in 1..=3 {
        common::child::while_stopped(&run.child, || {
            release(&go);
            assert_eq!(read_line(&sent), "sent");
            // The ping is queued; foster stays stopped past the deadline it was sent before
            // (the time is what is tested here, not a wait for something to happen).
            std::thread::sleep(period + Duration::from_millis(200));
        });
        let text = format!("ping-{n}");
        // Its ping read, or its failure (it is then stopped, and launched again).
        let s = run.wait_status("the ping read", |s| {
            let h = helper(s, "svc");
            h["status_text"] == text || h["state"] != "running" || h["launches"] != 1
        });
        let h = helper(&s, "svc");
        assert_eq!(
            (&h["state"], &h["launches"]),
            (&"running".into(), &1.into()),
            "round {n}: {s:#}"
        );
        assert!(
            !run.so_far().iter().any(|e| kind(e) == "check_failed"),
            "round {n}: the queued ping was not counted: {:#?}",
            run.seen
        );
    }
    assert_eq!(run.terminate(), 0);
}

/// A helper that said `STOPPING=1` is no longer held to its watchdog (as under systemd): `a`
/// pings once with `STOPPING=1` and then takes longer than its period to finish. `b`, whose
/// watchdog starts at its `READY=1`, sent only after `a`'s datagram was handled (its barrier),
/// never pings: its watchdog runs out after `a`'s would have, and fails it. `a` is still
/// running then, with no failed check, and its end (exit 0) is a completion, not a failure.
#[test]
fn a_helper_that_said_stopping_1_is_not_failed_by_its_watchdog() {
    let d = Dir::new("ready", "stopping");
    let (a_sent, a_go, b_go, b_hold) = (
        d.fifo("a_sent"),
        d.fifo("a_go"),
        d.fifo("b_go"),
        d.fifo("b_hold"),
    );
    let a = script(
        &d,
        "a.sh",
        &format!(
            "{}\necho sent > {}\nread x < {}\nexit 0\n",
            send("WATCHDOG=1 STOPPING=1"),
            a_sent.display(),
            a_go.display()
        ),
    );
    let b = script(
        &d,
        "b.sh",
        &format!(
            "read x < {}\n{}\nread x < {}\nexec sleep 1000\n",
            b_go.display(),
            send("READY=1"),
            b_hold.display()
        ),
    );
    let mut run = Run::start_uncontained(
        &d,
        &format!(
            "[[helper]]\nname = \"a\"\ncommand = [\"sh\", \"{a}\"]\nwatchdog = \"1s\"\n\
             restart = \"on-failure\"\n\n\
             [[helper]]\nname = \"b\"\ncommand = [\"sh\", \"{b}\"]\nwatchdog = \"1s\"\n\
             ready = {{ notify = true }}\n"
        ),
    );
    assert_eq!(read_line(&a_sent), "sent");
    release(&b_go);
    let failed = run.wait_for("b's watchdog", |e| {
        kind(e) == "check_failed" && e["helper"] == "b"
    });
    assert_eq!(failed["check"], "watchdog", "{failed:#}");
    assert!(
        !run.so_far()
            .iter()
            .any(|e| kind(e) == "check_failed" && e["helper"] == "a"),
        "a failed its watchdog after STOPPING=1: {:#?}",
        run.seen
    );
    let s = run.status();
    let h = helper(&s, "a");
    assert_eq!(h["state"], "running", "{s:#}");
    assert!(
        h["detail"]
            .as_str()
            .is_some_and(|d| d.contains("STOPPING=1")),
        "{s:#}"
    );
    release(&a_go);
    run.wait_for("a completed", |e| {
        kind(e) == "state" && e["helper"] == "a" && e["state"] == "completed"
    });
    // 3: b failed (its watchdog), and its restart rule (never) leaves it so.
    assert_eq!(run.terminate(), 3);
}

/// A health check failing `failures` times in a row fails the helper, not before: two failures
/// then a pass is no failure (`check_passed`); three in a row stop it. It ignores its stop
/// signal, so its tree (it and its child) gets SIGKILL after its stop grace, then its restart
/// rules relaunch it.
#[test]
fn a_failing_health_check_restarts_the_helper_after_its_failures_in_a_row() {
    let d = Dir::new("ready", "health");
    let (child, again, seq) = (d.fifo("child"), d.fifo("again"), d.path("seq"));
    // The probe's runs, in order: fail, fail, pass, then fail from then on.
    let plan = d.file("plan", "1\n1\n0\n");
    let probe = script(
        &d,
        "probe.sh",
        &format!(
            "n=$(cat {seq} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {seq}\n\
             exit $(sed -n \"${{n}}p\" {plan} | grep . || echo 1)\n",
            seq = seq.display(),
            plan = plan.display(),
        ),
    );
    let app = script(
        &d,
        "app.sh",
        &format!(
            "trap '' TERM\nsleep 1000 &\n\
             if [ -p {child} ]; then echo $! > {child}; else echo up > {again}; fi\nwait\nwait\n",
            child = child.display(),
            again = again.display()
        ),
    );
    let mut run = Run::start_uncontained(
        &d,
        &format!(
            "[[helper]]\nname = \"api\"\ncommand = [\"sh\", \"{app}\"]\nrestart = \"on-failure\"\n\
             stop_grace = \"200ms\"\n\
             health = {{ exec = [\"sh\", \"{probe}\"], interval = \"20ms\", failures = 3 }}\n"
        ),
    );
    let child_pid: i32 = read_line(&child).parse().unwrap();
    std::fs::remove_file(&child).unwrap(); // the relaunch says it is up in `again`
    let stop = run.wait_for("its stop signal", |e| kind(e) == "signal");
    assert_eq!(stop["reason"], "check_failed", "{stop:#}");
    assert_eq!(stop["signal"], "SIGTERM", "{stop:#}");
    let checks: Vec<String> = run
        .seen
        .iter()
        .filter(|e| kind(e).starts_with("check_"))
        .map(|e| format!("{} {}", kind(e), e["failures"]))
        .collect();
    assert_eq!(
        checks,
        [
            "check_failed 1",
            "check_failed 2",
            "check_passed 2",
            "check_failed 1",
            "check_failed 2",
            "check_failed 3"
        ],
        "{:#?}",
        run.seen
    );
    run.wait_for("stopping", |e| {
        kind(e) == "state" && e["state"] == "stopping"
    });
    let states: Vec<&str> = run
        .seen
        .iter()
        .filter(|e| kind(e) == "state" && e["helper"] == "api")
        .map(|e| e["state"].as_str().unwrap())
        .collect();
    assert_eq!(
        states,
        ["running", "unhealthy", "running", "unhealthy", "stopping"],
        "{:#?}",
        run.seen
    );
    // It ignores SIGTERM: after its grace, SIGKILL to it and its child.
    let killed = run.wait_for("SIGKILL of its tree", |e| {
        kind(e) == "signal" && e["signal"] == "SIGKILL" && e["target"]["pid"] == child_pid
    });
    assert_eq!(killed["reason"], "grace_expired");
    run.wait_for("its relaunch", |e| kind(e) == "launch" && e["attempt"] == 2);
    assert!(gone(child_pid) || common::process(child_pid).is_some_and(|p| p.is_zombie()));
    assert_eq!(read_line(&again), "up");
    // The relaunched one ignores SIGTERM too: the shutdown SIGKILLs it after its grace.
    assert_eq!(run.terminate(), 4);
}

/// A notify helper a reload adds, to a foster that had none (so no notify socket yet), gets a
/// socket at its launch and becomes ready by it.
#[test]
fn a_notify_helper_added_by_a_reload_becomes_ready() {
    let d = Dir::new("ready", "reload");
    let first = "[[helper]]\nname = \"plain\"\ncommand = [\"sleep\", \"1000\"]\n";
    let mut run = Run::start_uncontained(&d, first);
    run.wait_for("plain's launch", |e| kind(e) == "launch");
    let db = script(
        &d,
        "db.sh",
        &format!("{}\nexec sleep 1000\n", send("READY=1 STATUS=up")),
    );
    d.file(
        "run.toml",
        &format!(
            "{first}[[helper]]\nname = \"db\"\ncommand = [\"sh\", \"{db}\"]\n\
             ready = {{ notify = true, timeout = \"30s\" }}\n"
        ),
    );
    let out = run.ctl(&["reload"]);
    assert!(out.status.success(), "reload: {out:?}");
    let became = run.wait_for("db ready", |e| ready(e) && e["helper"] == "db");
    assert!(
        became["detail"].as_str().unwrap().ends_with("(notify)"),
        "{became:#}"
    );
    assert_eq!(helper(&run.status(), "db")["status_text"], "up");
    assert_eq!(run.terminate(), 0);
}

/// A probe's program missing is a failed attempt like any other (its launch counts as 127),
/// and `foster run --check` names it at its key.
#[test]
fn check_names_a_missing_probe_program_at_its_key() {
    let d = Dir::new("ready", "check");
    let cfg = d.file(
        "foster.toml",
        "[[helper]]\nname = \"db\"\ncommand = [\"sleep\", \"1\"]\n\
         health = { exec = [\"/nonexistent/probe\"] }\n",
    );
    let (code, err) = common::check::check(&cfg);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("helper \"db\": key `helper[1].health.exec`: the probe:"),
        "{err}"
    );
    assert!(err.contains("/nonexistent/probe"), "{err}");
}

/// `fifo` open for reading and writing (so that no writer's close ends it, and a writer never
/// waits for a reader): the probes' tally, read by [`lines_within`].
fn tally(fifo: &Path) -> std::fs::File {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(fifo)
        .unwrap()
}

/// The lines written into `tally` once there are `n` (waited for in `poll`), or those written
/// within [`LIMIT`].
fn lines_within(tally: &std::fs::File, n: usize) -> usize {
    let deadline = Instant::now() + LIMIT;
    let mut lines = 0;
    while lines < n {
        let left = deadline.saturating_duration_since(Instant::now());
        if !foster::process::identity::poll_readable(tally.as_raw_fd(), Some(left)) {
            break;
        }
        let mut buf = [0u8; 256];
        match (&*tally).read(&mut buf) {
            Ok(k) => lines += buf[..k].iter().filter(|&&b| b == b'\n').count(),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("tally: {e}"),
        }
    }
    lines
}

/// A helper whose health probe (`sleep 0.6`, then a line into a FIFO) outlasts its `interval`
/// (300ms) well within its `timeout` (2s), with `ready` given by `ready` (or none): `passes`
/// probes pass in a row (each a line in the FIFO), then foster is stopped. Not one
/// `check_failed` in its whole event stream, one launch, never `unhealthy`: no probe's time
/// limit killed another probe. Each probe's 2s end falls while a later one runs (they start
/// 0.9s apart), so a time limit that is not the probe's own kills one.
fn probes_outlasting_their_interval(tag: &str, ready: &str, passes: usize) {
    let d = Dir::new("ready", tag);
    let fifo = d.fifo("passes");
    let tally = tally(&fifo);
    let probe = script(
        &d,
        "probe.sh",
        &format!("sleep 0.6\necho pass > {}\n", fifo.display()),
    );
    let mut run = Run::start_uncontained(
        &d,
        &format!(
            "[[helper]]\nname = \"api\"\ncommand = [\"sleep\", \"1000\"]\nrestart = \"never\"\n\
             {ready}health = {{ exec = [\"sh\", \"{probe}\"], interval = \"300ms\", \
             timeout = \"2s\", failures = 10 }}\n"
        ),
    );
    let passed = lines_within(&tally, passes);
    assert_eq!(run.terminate(), 0, "{:#?}", run.seen);
    let failed: Vec<&Value> = run
        .seen
        .iter()
        .filter(|e| kind(e) == "check_failed")
        .collect();
    assert!(failed.is_empty(), "{failed:#?}");
    assert_eq!(passed, passes, "{:#?}", run.seen);
    let launches = run.seen.iter().filter(|e| kind(e) == "launch").count();
    assert_eq!(launches, 1, "{:#?}", run.seen);
    assert!(
        !run.seen
            .iter()
            .any(|e| kind(e) == "state" && e["state"] == "unhealthy"),
        "{:#?}",
        run.seen
    );
}

/// The reproduction of the attack: a health probe longer than its interval, shorter than its
/// timeout, is healthy across several intervals.
#[test]
fn a_health_probe_longer_than_its_interval_is_not_killed_by_an_earlier_probes_timeout() {
    probes_outlasting_their_interval("outlast", "", 6);
}

/// The readiness probe's time limit (the readiness deadline, 1.5s) runs out while a health
/// probe runs: it is the readiness probe's, which passed long before, and kills nothing.
#[test]
fn a_readiness_probes_time_limit_does_not_kill_a_health_probe() {
    probes_outlasting_their_interval(
        "ready-limit",
        "ready = { exec = [\"true\"], interval = \"10ms\", timeout = \"1500ms\" }\n",
        3,
    );
}

/// `foster run --check` warns of a health check whose `timeout` is not shorter than its
/// `interval`, at the key to change (the `timeout` given, or the `interval` against the default
/// timeout of 5s); the file stays valid. A timeout shorter than the interval is no warning.
#[test]
fn check_warns_of_a_health_timeout_not_shorter_than_its_interval() {
    let d = Dir::new("ready", "warn");
    let helper = |name: &str, health: &str| {
        format!("[[helper]]\nname = \"{name}\"\ncommand = [\"sleep\", \"1\"]\nhealth = {health}\n")
    };
    let cfg = d.file(
        "foster.toml",
        &[
            helper(
                "api",
                "{ exec = [\"sleep\", \"0.5\"], interval = \"1s\", timeout = \"5s\" }",
            ),
            helper("db", "{ tcp = \"127.0.0.1:5432\", interval = \"2s\" }"),
            helper(
                "ok",
                "{ tcp = \"127.0.0.1:5432\", interval = \"2s\", timeout = \"1s\" }",
            ),
        ]
        .concat(),
    );
    let (code, err) = common::check::check(&cfg);
    assert_eq!(code, Some(0), "{err}");
    let warnings: Vec<&str> = err.lines().filter(|l| l.contains("warning:")).collect();
    assert_eq!(warnings.len(), 2, "{err}");
    assert!(
        warnings[0].contains(
            "foster.toml:4:64: helper \"api\": key `helper[1].health.timeout`: timeout (5s) is \
             not shorter than interval (1s)"
        ),
        "{err}"
    );
    assert!(
        warnings[1].contains(
            "helper \"db\": key `helper[2].health.interval`: timeout (5s, the default) is not \
             shorter than interval (2s)"
        ),
        "{err}"
    );
}
