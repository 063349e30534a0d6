//! foster's newer surfaces against a hostile helper or another local user, end to end on real
//! processes: the events log's file (its mode whatever the umask; a file others may write
//! refused), the notify protocol's keys foster does not support (said once, their descriptors
//! closed), and the events the log could not take (said when foster ends).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::common;
use common::Dir;

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
