//! An adoption through a short-lived parent, born after foster read its tree.

use std::time::{Duration, Instant};

use crate::qualify::barrier::{self};
use crate::qualify::harness::{CaseError, End, Outcome, Root, SupFds, ms, wait_end};

/// The helper of [`adoption_through_short_lived_parent`]: waits on the gate, then a shell that
/// puts a sleep in the background and ends at once (the intermediate), then stays.
const SHORT_LIVED: &str = "[[helper]]\nname = \"deep\"\ncommand = [\"/bin/sh\", \"-c\", \
                           \"read x < GATE; /bin/sh -c 'sleep 300 & exit 0'; exec sleep 600\"]\n\
                           [[helper.generation]]\nsignal = \"TERM\"\n\
                           [[helper.generation]]\nsignal = \"TERM\"\ngrace = \"10s\"\n";

/// A directory of the case's own (mode 0700) and a FIFO in it.
pub(super) fn case_dir(me: i32) -> std::io::Result<std::path::PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let d = std::env::temp_dir().join(format!("foster-qualify-births-{me}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::DirBuilder::new().mode(0o700).create(&d)?;
    for fifo in ["gate", "events"] {
        nix::unistd::mkfifo(&d.join(fifo), nix::sys::stat::Mode::S_IRWXU)?;
    }
    Ok(d)
}

/// The next event of `events` (a `foster run` events log's JSON lines) that `f` holds for.
pub(super) fn next_event(
    events: &mut barrier::LineReader,
    deadline: Instant,
    f: impl Fn(&serde_json::Value) -> bool,
) -> Option<serde_json::Value> {
    while let Some(l) = events.next_line(deadline) {
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(&l)
            && f(&v)
        {
            return Some(v);
        }
    }
    None
}

/// A real `foster run --no-contain`, its helper's child born after foster's read of the tree
/// (a `foster ctl status`, answered after a read, before the gate FIFO lets the helper go) and
/// ended at once: only the kernel's announcements of that birth and end tell foster that the
/// sleep it leaves is its own now.
pub(super) fn adoption_through_short_lived_parent(r: &mut Root) -> Outcome {
    let mut o = Outcome::default();
    let d = match case_dir(r.me) {
        Ok(d) => d,
        Err(e) => {
            o.problems.push(format!("the case's directory: {e}"));
            return o;
        }
    };
    let ran = short_lived_parent_run(r, &d, &mut o);
    let _ = std::fs::remove_dir_all(&d);
    if let Err(e) = ran {
        o.problems.push(e.to_string());
    }
    o
}

// Long: one case's scenario, read top to bottom.
pub(super) fn short_lived_parent_run(
    r: &mut Root,
    d: &std::path::Path,
    o: &mut Outcome,
) -> Result<(), CaseError> {
    use std::os::unix::fs::OpenOptionsExt;
    let (gate, events, sock, cfg) = (d.join("gate"), d.join("events"), d.join("s"), d.join("c"));
    std::fs::write(&cfg, SHORT_LIVED.replace("GATE", &gate.to_string_lossy())).map_err(
        |source| CaseError::Io {
            what: "the configuration",
            source,
        },
    )?;
    // The events' read end, open before foster opens its end (not blocking: no writer yet).
    let ev = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&events)
        .map_err(|source| CaseError::Io {
            what: "the events FIFO",
            source,
        })?;
    let mut events_r = barrier::LineReader::new(ev.into());
    let foster = r.foster.clone();
    let args = [
        "run".as_ref(),
        "--no-contain".as_ref(),
        "--socket".as_ref(),
        sock.as_os_str(),
        "--events-log".as_ref(),
        events.as_os_str(),
        cfg.as_os_str(),
    ]
    .map(std::ffi::OsStr::to_os_string);
    let s = r.supervisor(move |fds| {
        use std::os::unix::process::CommandExt;
        let mut c = std::process::Command::new(&foster);
        crate::process::signal::reserved_as_inherited(&mut c);
        c.args(&args);
        if let (Some(out), Some(err)) = (SupFds::dup(fds.out_w), SupFds::dup(fds.err_w)) {
            c.stdout(out).stderr(err);
        }
        let e = c.exec();
        fds.say(&format!("error {e}"));
        127
    });
    let launch = next_event(&mut events_r, r.soon(), |v| v["event"] == "launch")
        .ok_or(CaseError::NothingLaunched)?;
    let helper = launch["identity"]["pid"].as_i64().unwrap_or(0) as i32;
    r.name(helper, "helper", false);
    // A status is answered on foster's loop after a read of its tree.
    let status = std::process::Command::new(&r.foster)
        .arg("ctl")
        .arg("--socket")
        .arg(&sock)
        .arg("status")
        .output()
        .map_err(|source| CaseError::Io {
            what: "foster ctl status",
            source,
        })?;
    o.check(status.status.success(), "foster ctl status failed");
    // Opened once the helper's shell opens its end: it waits there.
    std::fs::write(&gate, "go\n").map_err(|source| CaseError::Io {
        what: "the gate",
        source,
    })?;
    let t = Instant::now();
    adopted_and_policed(r, &mut events_r, t, o);
    // The orderly end: foster stops its helper and exits 0.
    // SAFETY: a signal to the case's own supervisor.
    unsafe { libc::kill(s, libc::SIGTERM) };
    let end = wait_end(s, r.soon()).map(|(e, _)| e);
    o.check(
        end == Some(End::Exited(0)),
        format!("foster run ended {end:?}, not with 0"),
    );
    Ok(())
}

/// Checks the orphan's `reparented` event, its policy's SIGTERM and its end, from `events`;
/// the time from the intermediate's release (`t`) to the orphan's end.
// Long: the checks of one event after another, in their order.
pub(super) fn adopted_and_policed(
    r: &mut Root,
    events: &mut barrier::LineReader,
    t: Instant,
    o: &mut Outcome,
) {
    let bound = Instant::now() + Duration::from_secs(5);
    let Some(v) = next_event(events, bound, |v| v["event"] == "reparented") else {
        o.problems
            .push("no reparented event within 5 s of the intermediate's start".into());
        return;
    };
    let orphan = v["identity"].clone();
    let pid = orphan["pid"].as_i64().unwrap_or(0) as i32;
    r.name(pid, "orphan", false);
    o.expected_parent = "foster (the helper's subreaper)".into();
    o.observed_parent = format!(
        "{}, {}, generation {}",
        r.role(v["to"]["pid"].as_i64().unwrap_or(0) as i32),
        v["classification"].as_str().unwrap_or("?"),
        v["generation"]
    );
    o.check(
        v["classification"] == "expected",
        format!("classified {}", v["classification"]),
    );
    o.check(
        v["generation"] == 3,
        format!("generation {}", v["generation"]),
    );
    let signal = next_event(events, r.soon(), |e| {
        e["event"] == "signal" && e["reason"] == "orphan_policy" && e["target"] == orphan
    });
    o.prctl = "none (no gate): foster's orphan policy".into();
    o.check(
        signal.as_ref().is_some_and(|s| s["signal"] == "SIGTERM"),
        format!("the orphan policy's signal: {signal:?}"),
    );
    let exit = next_event(events, r.soon(), |e| {
        e["event"] == "exit" && e["identity"] == orphan
    });
    let killed = exit
        .as_ref()
        .and_then(|e| e["status"]["signal"].as_str())
        .and_then(|s| s.parse::<crate::process::signal::Sig>().ok());
    o.time_ms = Some(ms(t, Instant::now()));
    o.helper = match killed {
        Some(sig) => format!(
            "orphan killed by {}",
            crate::process::signal::name(sig.number())
        ),
        None => "the orphan's end was not reported".into(),
    };
    o.check(
        killed.map(crate::process::signal::Sig::number) == Some(libc::SIGTERM),
        format!("the orphan's end: {exit:?}"),
    );
    o.target = "adopted when its parent ended".into();
    o.checked = "the kernel announced the intermediate's birth and end: no SIGCHLD, no pidfd \
                 read before, yet the orphan got its generation's policy at once"
        .into();
}
