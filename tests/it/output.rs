//! Helpers' output under `foster run`, end to end, on real processes: captured through foster's
//! pipes (the helper's whole tree, orphans included), relayed named, kept, bounded under a
//! flood. Ordering comes from the events log (a FIFO read as foster writes it) and from FIFOs
//! the helpers wait on; deadlines are only safety nets.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::Child;
use std::sync::mpsc;
use std::time::Instant;

use serde_json::Value;

use crate::common;
use common::LIMIT;
use common::child::wait_exit;
use common::events::{Events, kind};
use common::foster_run::FosterRun;
use common::supervised::Guard;
use common::{Dir, send};

/// `foster run --no-socket --no-contain`: uncontained, so that the child's pid is the
/// supervisor itself (its memory is read) and the events' pids are this namespace's.
fn foster() -> FosterRun {
    FosterRun::new().args(["--no-socket", "--no-contain"])
}

/// [`foster`] on `cfg` with the options `args`, its events log the FIFO `events` in `d`; ended
/// (SIGTERM, its orderly shutdown) when the test ends, passed or failed.
fn logged(d: &Dir, args: &[&str], cfg: &Path) -> (Guard, Events) {
    let (f, ev) = foster().args(args).logged(&d.fifo("events"), cfg);
    (Guard(f), ev)
}

/// Lines of a stream, read on a thread.
struct Lines {
    rx: mpsc::Receiver<Vec<u8>>,
    seen: Vec<Vec<u8>>,
}

impl Lines {
    fn read(r: impl Read + Send + 'static) -> Lines {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(r);
            loop {
                let mut l = Vec::new();
                match r.read_until(b'\n', &mut l) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        if l.last() == Some(&b'\n') {
                            l.pop();
                        }
                        if tx.send(l).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        Lines {
            rx,
            seen: Vec::new(),
        }
    }

    /// Waits for a line `pred` holds for.
    fn wait_for(&mut self, what: &str, pred: impl Fn(&[u8]) -> bool) -> Vec<u8> {
        if let Some(l) = self.seen.iter().find(|l| pred(l)) {
            return l.clone();
        }
        let deadline = Instant::now() + LIMIT;
        loop {
            match self
                .rx
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                Ok(l) => {
                    self.seen.push(l.clone());
                    if pred(&l) {
                        return l;
                    }
                }
                Err(_) => panic!("no line {what}; seen: {:#?}", self.text()),
            }
        }
    }

    /// Waits until `n` lines `pred` holds for have been seen.
    fn wait_count(&mut self, what: &str, n: usize, pred: impl Fn(&[u8]) -> bool) {
        let deadline = Instant::now() + LIMIT;
        while self.seen.iter().filter(|l| pred(l)).count() < n {
            match self
                .rx
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                Ok(l) => self.seen.push(l),
                Err(_) => panic!("not {n} lines {what}; seen: {:#?}", self.text()),
            }
        }
    }

    /// Every line until the stream ends.
    fn rest(&mut self) -> &[Vec<u8>] {
        while let Ok(l) = self.rx.recv_timeout(LIMIT) {
            self.seen.push(l);
        }
        &self.seen
    }

    fn text(&self) -> Vec<String> {
        self.seen
            .iter()
            .map(|l| String::from_utf8_lossy(l).into_owned())
            .collect()
    }
}

fn term(f: &Child) {
    send(f.id() as i32, libc::SIGTERM);
}

/// A TOML string literal of `s` (a literal string: no escapes are read in it).
fn lit(s: &str) -> String {
    assert!(!s.contains("'''"));
    format!("'''{s}'''")
}

#[test]
fn lines_of_a_helper_its_grandchild_and_an_adopted_orphan_arrive_named() {
    let d = Dir::new("output", "tree");
    let (go, ready, stop) = (d.fifo("go"), d.fifo("ready"), d.fifo("stop"));
    let (trapped, armed) = (d.fifo("trapped"), d.fifo("armed"));
    // helper → child → grandchild; the child exits once the grandchild ignores USR1, its
    // generation's orphan policy (foster learns of the adoption at once where the kernel
    // announces births, and sends it: before the trap, the grandchild would die of it), so the
    // grandchild is adopted by foster; it writes its last line only once the test has seen
    // that adoption.
    let script = format!(
        "echo from the helper; \
         sh -c 'sh -c \"trap \\\"\\\" USR1; echo > {armed}; echo > {trapped}; echo from the grandchild; read x < {go}; echo from the orphan\" & read x < {armed}; exit 0'; \
         echo > {ready}; exec sleep 1000",
        go = go.display(),
        ready = ready.display(),
        trapped = trapped.display(),
        armed = armed.display()
    );
    let cfg = d.file(
        "c.toml",
        &format!(
            "[[helper]]\nname = \"tree\"\ncommand = [\"/bin/sh\", \"-c\", {}]\n\
             [[helper.generation]]\n[[helper.generation]]\nsignal = \"USR1\"\n\
             reaction = \"notify\"\ngrace = \"60s\"\n\
             [[helper]]\nname = \"other-helper\"\ncommand = [\"/bin/sh\", \"-c\", {}]\n",
            lit(&script),
            lit(&format!("echo other; read x < {}", stop.display()))
        ),
    );
    let (mut f, mut ev) = logged(&d, &[], &cfg);
    let mut out = Lines::read(f.stdout.take().unwrap());
    let _err = Lines::read(f.stderr.take().unwrap());
    // The grandchild ignores USR1; the helper's child has ended; the other helper's end makes
    // foster read its tree.
    common::fifo::line(&trapped);
    common::fifo::line(&ready);
    std::fs::write(&stop, "\n").unwrap();
    let adopted = ev.wait_for("the grandchild adopted by foster", |v| {
        kind(v) == "reparented" && v["helper"] == "tree" && v["classification"] == "expected"
    });
    assert_eq!(adopted["to"]["pid"], f.id(), "adopted by foster: {adopted}");
    std::fs::write(&go, "go\n").unwrap();
    out.wait_for("from the orphan", |l| l.ends_with(b"from the orphan"));
    out.wait_for("from other", |l| l.ends_with(b"other"));
    term(&f);
    out.rest();
    assert_eq!(wait_exit(&mut f), 0);
    let text = out.text();
    for want in [
        "tree         | from the helper",
        "tree         | from the grandchild",
        "tree         | from the orphan",
        "other-helper | other",
    ] {
        assert!(text.iter().any(|l| l == want), "{want:?} in {text:#?}");
    }
    assert!(
        text.iter()
            .all(|l| l.starts_with("tree         | ") || l.starts_with("other-helper | ")),
        "every line named, names padded: {text:#?}"
    );
}

#[test]
fn a_helper_that_prints_and_exits_at_once_loses_no_line() {
    let d = Dir::new("output", "quick");
    let cfg = d.file(
        "c.toml",
        &format!(
            "[[helper]]\nname = \"quick\"\ncommand = [\"/bin/sh\", \"-c\", {}]\n",
            lit("i=0; while [ $i -lt 300 ]; do echo line $i; echo err $i >&2; i=$((i+1)); done")
        ),
    );
    for run in 0..15 {
        let o = foster().output(&cfg);
        assert_eq!(o.status.code(), Some(0), "run {run}: {o:?}");
        let text = String::from_utf8(o.stdout).unwrap();
        let outs: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("quick | "))
            .collect();
        let errs: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("quick ! "))
            .collect();
        let want = |p: &str| (0..300).map(|i| format!("{p} {i}")).collect::<Vec<_>>();
        assert_eq!(outs, want("line"), "run {run}: standard output, in order");
        assert_eq!(errs, want("err"), "run {run}: standard error, in order");
        assert_eq!(text.lines().count(), 600, "run {run}: nothing else");
    }
}

#[test]
fn a_line_of_one_mebibyte_arrives_split_and_marked() {
    let d = Dir::new("output", "long");
    let cfg = d.file(
        "c.toml",
        &format!(
            "[[helper]]\nname = \"long\"\ncommand = [\"/bin/sh\", \"-c\", {}]\n",
            lit("head -c 1048576 /dev/zero | tr '\\0' x; echo; echo after")
        ),
    );
    let o = foster().args(["--output", "json"]).output(&cfg);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let lines: Vec<Value> = o
        .stdout
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 17, "16 pieces of 64 KiB and one more line");
    let mut joined = String::new();
    for (i, l) in lines[..16].iter().enumerate() {
        assert_eq!(l["helper"], "long");
        assert_eq!(l["stream"], "stdout");
        assert!(l.get("pid").is_none() && l.get("helper_pid").is_some());
        let t = l["text"].as_str().unwrap();
        assert_eq!(t.len(), 64 * 1024, "piece {i}");
        assert_eq!(
            l.get("continued").is_some(),
            i < 15,
            "piece {i}: {:?}",
            l.get("continued")
        );
        joined.push_str(t);
    }
    assert_eq!(joined, "x".repeat(1 << 20));
    assert_eq!(lines[16]["text"], "after");
}

#[test]
fn invalid_utf8_and_terminal_escapes_are_kept_in_the_file_and_json_and_escaped_on_the_relay() {
    let d = Dir::new("output", "bytes");
    let log = d.path("bytes.log");
    let cfg = d.file(
        "c.toml",
        &format!(
            "[[helper]]\nname = \"bytes\"\ncommand = [\"/bin/sh\", \"-c\", {}]\n\
             log = {{ file = {:?} }}\n",
            lit("printf 'a\\033]0;owned\\007\\377z\\n' >&2"),
            log.to_str().unwrap()
        ),
    );
    let o = foster().output(&cfg);
    assert_eq!(o.stdout, b"bytes ! a\\e]0;owned\\x07\\xffz\n");
    // The file: `TIME err BYTES`, the bytes as written.
    let file = std::fs::read(&log).unwrap();
    let (stamp, rest) = file.split_at(24);
    assert_eq!(rest, b" err a\x1b]0;owned\x07\xffz\n");
    let stamp = std::str::from_utf8(stamp).unwrap();
    assert!(
        stamp.len() == 24 && stamp.ends_with('Z') && stamp.as_bytes()[10] == b'T',
        "RFC 3339 UTC with milliseconds: {stamp}"
    );
    let o = foster().args(["--output", "json"]).output(&cfg);
    assert!(
        !o.stdout.iter().any(|&b| b == 0x1b || b == 0x07),
        "the JSON is safe on a terminal: {:?}",
        String::from_utf8_lossy(&o.stdout)
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["stream"], "stderr");
    assert_eq!(v["text"], "a\x1b]0;owned\x07\u{fffd}z");
    assert_eq!(v["text_escaped"], "a\\e]0;owned\\x07\\xffz");
}

#[test]
fn inherit_and_null_leave_the_output_as_configured() {
    let d = Dir::new("output", "modes");
    let cfg = d.file(
        "c.toml",
        "[[helper]]\nname = \"raw\"\noutput = \"inherit\"\n\
         command = [\"/bin/sh\", \"-c\", \"echo raw line\"]\n\
         [[helper]]\nname = \"gone\"\noutput = \"null\"\n\
         command = [\"/bin/sh\", \"-c\", \"echo lost; echo lost too >&2\"]\n",
    );
    let o = foster().output(&cfg);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert_eq!(o.stdout, b"raw line\n");
    assert!(
        !String::from_utf8_lossy(&o.stderr).contains("lost"),
        "{o:?}"
    );
}

/// VmRSS of `pid`, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let l = s.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    l.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn a_flood_keeps_foster_bounded_and_another_helper_restarting() {
    let d = Dir::new("output", "flood");
    let line = "f".repeat(100);
    let cfg = d.file(
        "c.toml",
        &format!(
            "[[helper]]\nname = \"flood\"\ncommand = [\"yes\", \"{line}\"]\n\
             [[helper]]\nname = \"crasher\"\ncommand = [\"/bin/sh\", \"-c\", \"exit 3\"]\n\
             restart = \"always\"\nbackoff = {{ initial = \"50ms\", max = \"50ms\", limit = 100000 }}\n"
        ),
    );
    // Its standard output is a pipe nobody reads: the relay stalls at once.
    let (mut f, mut ev) = logged(&d, &[], &cfg);
    let pid = f.id();
    let _err = Lines::read(f.stderr.take().unwrap());
    let start = ev.started();
    let restarts = |ev: &Events| {
        ev.seen
            .iter()
            .filter(|v| kind(v) == "restart" && v["helper"] == "crasher")
            .count()
    };
    ev.wait_for("lines of the flood not relayed", |v| {
        kind(v) == "output_dropped" && v["helper"] == "flood"
    });
    let before = rss_kib(pid);
    let seen = restarts(&ev);
    // Restarts go on while the flood does, and memory stays flat.
    while restarts(&ev) < seen + 20 {
        ev.next("the crasher's next restart");
    }
    let drops: Vec<&Value> = ev
        .seen
        .iter()
        .filter(|v| kind(v) == "output_dropped")
        .collect();
    let after = rss_kib(pid);
    assert!(
        after < before + 32 * 1024 && after < 96 * 1024,
        "VmRSS {before} KiB then {after} KiB"
    );
    assert!(drops.iter().all(|v| v["lines"].as_u64() > Some(0)));
    // At most one report a second. The events' times are when the supervisor's loop took
    // them, some time after they were sent (under load, reports sent a second apart can be
    // taken together): counted from the supervisor's start, before the first could be sent,
    // to the last one's time, after it was sent (one more is allowed for the clocks).
    let ts = |v: &Value| v["ts_ms"].as_u64().unwrap();
    let span = ts(drops[drops.len() - 1]) - ts(&start);
    assert!(
        drops.len() as u64 <= span / 1000 + 2,
        "at most one report a second since the start ({span} ms): {drops:#?}"
    );
    term(&f);
    assert_eq!(wait_exit(&mut f), 0);
}

#[test]
fn rotation_at_the_size_bound_keeps_exactly_keep_files_of_whole_lines() {
    let d = Dir::new("output", "rotate");
    let log = d.path("r.log");
    let cfg = d.file(
        "c.toml",
        &format!(
            "[[helper]]\nname = \"r\"\ncommand = [\"/bin/sh\", \"-c\", {}]\n\
             log = {{ file = {:?}, max_size = \"4KiB\", keep = 3 }}\n",
            lit("i=0; while [ $i -lt 3000 ]; do echo \"line $i of the rotating helper\"; i=$((i+1)); done"),
            log.to_str().unwrap()
        ),
    );
    let o = foster().args(["--output", "none"]).output(&cfg);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert!(o.stdout.is_empty(), "--output none relays nothing");
    let name = |n: u32| {
        if n == 0 {
            log.clone()
        } else {
            d.path(&format!("r.log.{n}"))
        }
    };
    assert!(!name(4).exists(), "no more than keep = 3 rotated files");
    let mut kept = Vec::new();
    for n in (0..=3).rev() {
        let text = std::fs::read_to_string(name(n)).unwrap();
        assert!(text.len() <= 4096, "file {n}: {} bytes", text.len());
        if n > 0 {
            // Rotated at the bound: the next line (62 bytes) would not have fitted.
            assert!(text.len() + 62 > 4096, "file {n}: {} bytes", text.len());
        }
        assert!(text.ends_with('\n'), "file {n} ends with a whole line");
        for l in text.lines() {
            let (_, rest) = l.split_at(24);
            let n: u32 = rest
                .strip_prefix(" out line ")
                .and_then(|r| r.strip_suffix(" of the rotating helper"))
                .unwrap_or_else(|| panic!("a whole line: {l:?}"))
                .parse()
                .unwrap();
            kept.push(n);
        }
    }
    // The newest lines, none missing between the files, up to the last one.
    assert_eq!(kept.last(), Some(&2999));
    assert!(kept.windows(2).all(|w| w[1] == w[0] + 1), "{kept:?}");
    assert!(
        kept.len() > 3 * 60,
        "three full files and the current one: {}",
        kept.len()
    );
}

#[test]
fn reopen_logs_and_sigusr1_after_an_outside_rename_write_to_a_new_file() {
    let d = Dir::new("output", "reopen");
    let log = d.path("w.log");
    let (go1, go2) = (d.fifo("go1"), d.fifo("go2"));
    let cfg = d.file(
        "c.toml",
        &format!(
            "[[helper]]\nname = \"w\"\ncommand = [\"/bin/sh\", \"-c\", {}]\n\
             log = {{ file = {:?} }}\n",
            lit(&format!(
                "echo first; read x < {}; echo second; read x < {}; echo third; exec sleep 1000",
                go1.display(),
                go2.display()
            )),
            log.to_str().unwrap()
        ),
    );
    let sock = d.path("s.sock");
    let mut f = Guard(
        FosterRun::new()
            .arg("--no-contain")
            .socket(&sock)
            .arg("-v")
            .spawn(&cfg),
    );
    let mut out = Lines::read(f.stdout.take().unwrap());
    let mut err = Lines::read(f.stderr.take().unwrap());
    let go = |fifo: &Path| std::fs::write(fifo, "\n").unwrap();
    out.wait_for("first", |l| l == b"w | first");
    // Renamed away, as logrotate does; `ctl reopen-logs` answers once it is reopened.
    std::fs::rename(&log, d.path("w.log.a")).unwrap();
    let ctl = common::supervised::ctl_command(&sock)
        .arg("reopen-logs")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&ctl.stdout);
    assert!(ctl.status.success(), "{ctl:?}");
    assert!(
        said.contains("reopened helper \"w\"'s log") && said.contains("w.log"),
        "{said}"
    );
    go(&go1);
    out.wait_for("second", |l| l == b"w | second");
    // Again, by SIGUSR1: foster says (-v) when it has reopened the file.
    std::fs::rename(&log, d.path("w.log.b")).unwrap();
    send(f.id() as i32, libc::SIGUSR1);
    let reopened = format!("reopened {}", log.display());
    err.wait_count("the file reopened twice", 2, |l| {
        String::from_utf8_lossy(l).contains(&reopened)
    });
    go(&go2);
    out.wait_for("third", |l| l == b"w | third");
    term(&f);
    assert_eq!(wait_exit(&mut f), 0);
    let text = |p: &Path| -> Vec<String> {
        std::fs::read_to_string(p)
            .unwrap()
            .lines()
            .map(|l| l[24..].to_string())
            .collect()
    };
    assert_eq!(text(&d.path("w.log.a")), [" out first"]);
    assert_eq!(text(&d.path("w.log.b")), [" out second"]);
    assert_eq!(text(&log), [" out third"]);
}

#[test]
fn a_log_file_another_user_could_have_planted_is_refused() {
    let d = Dir::new("output", "planted");
    let victim = d.file("victim", "");
    let log = d.path("h.log");
    std::os::unix::fs::symlink(&victim, &log).unwrap();
    let marker = d.path("started");
    let cfg = d.file(
        "c.toml",
        &format!(
            "[[helper]]\nname = \"h\"\ncommand = [\"/bin/touch\", {:?}]\nlog = {{ file = {:?} }}\n",
            marker.to_str().unwrap(),
            log.to_str().unwrap()
        ),
    );
    let o = foster().output(&cfg);
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(
        e.contains("helper h's log") && e.contains("symbolic link") && e.contains("not writing"),
        "{e}"
    );
    assert!(!marker.exists(), "nothing started");
    assert_eq!(
        std::fs::read(&victim).unwrap(),
        b"",
        "nothing written through the link"
    );
    if common::is_root() {
        std::fs::remove_file(&log).unwrap();
        std::fs::write(&log, "").unwrap();
        std::os::unix::fs::chown(&log, Some(65534), Some(65534)).unwrap();
        let o = foster().output(&cfg);
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{e}");
        assert!(e.contains("uid 65534") && e.contains("not writing"), "{e}");
        assert!(!marker.exists(), "nothing started");
    } else {
        common::skip::setup("part: not root, so no file of another user to plant");
    }
}

#[test]
fn a_regular_file_on_standard_output_gets_every_line_of_a_flood() {
    let d = Dir::new("output", "tofile");
    let cfg = d.file(
        "c.toml",
        &format!(
            "[[helper]]\nname = \"gen\"\ncommand = [\"/bin/sh\", \"-c\", {}]\n",
            lit(&format!("yes {} | head -n 200000", "y".repeat(99)))
        ),
    );
    let out = std::fs::File::create(d.path("out")).unwrap();
    let (f, mut ev) = foster().stdout(out.into()).logged(&d.fifo("events"), &cfg);
    let mut f = Guard(f);
    let _err = Lines::read(f.stderr.take().unwrap());
    ev.wait_for("the end", |v| kind(v) == "stopped");
    assert_eq!(wait_exit(&mut f), 0);
    let text = std::fs::read_to_string(d.path("out")).unwrap();
    let want = format!("gen | {}", "y".repeat(99));
    assert_eq!(text.lines().count(), 200_000);
    assert!(text.lines().all(|l| l == want));
    assert!(
        !ev.seen.iter().any(|v| kind(v) == "output_dropped"),
        "nothing dropped on the way to a file"
    );
}

/// `--output json`: each line carries `helper_pid`, the pid of the helper's launch, whichever
/// process of its tree wrote it (the pipe does not say); the line of a child says so too.
#[test]
fn json_lines_carry_the_helpers_pid() {
    let d = Dir::new("output", "pid");
    let go = d.fifo("go");
    let cfg = d.file(
        "c.toml",
        &format!(
            "[[helper]]\nname = \"p\"\ncommand = [\"/bin/sh\", \"-c\", {}]\n",
            lit(&format!(
                "read x < {}; echo \"me $$\"; sh -c 'echo \"child $$\"'; exec sleep 1000",
                go.display()
            ))
        ),
    );
    let (mut f, mut ev) = logged(&d, &["--output", "json"], &cfg);
    let mut out = Lines::read(f.stdout.take().unwrap());
    let _err = Lines::read(f.stderr.take().unwrap());
    let launch = ev.wait_for("the helper's launch", |v| kind(v) == "launch");
    let pid = launch["identity"]["pid"].as_i64().unwrap();
    std::fs::write(&go, "\n").unwrap();
    let me: Value =
        serde_json::from_slice(&out.wait_for("me", |l| l.windows(3).any(|w| w == b"me "))).unwrap();
    let child: Value =
        serde_json::from_slice(&out.wait_for("child", |l| l.windows(6).any(|w| w == b"child ")))
            .unwrap();
    assert_eq!(me["text"], format!("me {pid}"), "{me}");
    assert_eq!(me["helper_pid"], pid, "{me}");
    assert_ne!(child["text"], format!("child {pid}"), "{child}");
    assert_eq!(
        child["helper_pid"], pid,
        "the helper's pid, not the child's: {child}"
    );
    term(&f);
    out.rest();
    assert_eq!(wait_exit(&mut f), 0);
}
