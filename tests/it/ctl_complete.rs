//! Completion that asks the running supervisor, through the real binary's completion protocol
//! (`COMPLETE=SHELL foster -- foster ctl ...`, as the scripts of `COMPLETE=SHELL foster` call
//! it): the helpers of a real `foster run` found as `foster ctl` finds it, signal names, and
//! nothing (quickly, silently) when no supervisor answers.

use std::os::unix::fs::DirBuilderExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::child::output_within;
use crate::common::supervised::{Guard, Run, connect};
use crate::common::{Dir, LIMIT};

const FOSTER: &str = env!("CARGO_BIN_EXE_foster");

const HELPERS: &str = r#"
[[helper]]
name = "web"
command = ["sleep", "7001"]

[[helper]]
name = "worker"
command = ["sleep", "7002"]
"#;

/// `COMPLETE=shell foster -- foster WORDS...` in `cwd`, completing the last word, with
/// `runtime` as XDG_RUNTIME_DIR (a private directory of the test's, so that no other
/// supervisor's socket is found) and no FOSTER_SOCKET unless `env` sets it.
fn complete(
    shell: &str,
    (cwd, runtime): (&Path, &Path),
    words: &[&str],
    env: &[(&str, &Path)],
) -> Output {
    let mut c = Command::new(FOSTER);
    c.env("COMPLETE", shell)
        .env("_CLAP_COMPLETE_INDEX", words.len().to_string())
        .env("XDG_RUNTIME_DIR", runtime)
        .env_remove("FOSTER_SOCKET")
        .current_dir(cwd)
        .arg("--")
        .arg("foster")
        .args(words)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    output_within(c.spawn().unwrap(), "foster's completion")
}

/// A private runtime directory in `d`.
fn runtime(d: &Dir) -> PathBuf {
    let runtime = d.path("runtime");
    let _ = std::fs::DirBuilder::new().mode(0o700).create(&runtime);
    runtime
}

/// A second `foster run`, of `config`, its socket in `runtime`'s default directory, once it
/// answers.
fn second_run(runtime: &Path, config: &Path) -> Guard {
    let mut child = Command::new(FOSTER)
        .arg("run")
        .arg(config)
        .env("XDG_RUNTIME_DIR", runtime)
        .env_remove("FOSTER_SOCKET")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The socket answers once foster run has bound it; a failed test if it ends first.
    drop(connect(&runtime.join("foster/other.sock"), &mut child));
    Guard(child)
}

/// The candidates offered (each line's value, its help cut off), options aside.
fn offered(out: &Output) -> Vec<String> {
    assert!(out.status.success(), "{out:?}");
    assert!(out.stderr.is_empty(), "completion wrote to stderr: {out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.split(['\t', ':']).next().unwrap_or("").to_string())
        .filter(|v| !v.is_empty() && !v.starts_with('-'))
        .collect()
}

#[test]
fn helper_names_come_from_the_running_supervisor() {
    let d = Dir::new("ctlcomplete", "helpers");
    let (mut run, runtime) = Run::start_in_runtime_dir(&d, HELPERS, &[]);
    run.state("web", "running");
    run.state("worker", "running");
    let at = (d.0.as_path(), runtime.as_path());
    let sock = run.socket.to_str().unwrap().to_string();
    let by_socket = ["ctl", "--socket", &sock, "restart", ""];
    assert_eq!(
        offered(&complete("bash", at, &by_socket, &[])),
        ["web", "worker", "all"]
    );
    // Fish hands over what is typed; its lines carry the helper's state as their help.
    let out = complete("fish", at, &["ctl", "--socket", &sock, "pid", "wo"], &[]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.contains("worker\trunning"), "{text}");
    assert_eq!(offered(&out), ["worker"]);
    // FOSTER_SOCKET, as foster ctl reads it; `all` only where it stands for every helper.
    let env = [("FOSTER_SOCKET", run.socket.as_path())];
    let out = complete("zsh", at, &["ctl", "history", ""], &env);
    assert_eq!(offered(&out), ["web", "worker"]);
    // With two supervisors in the default directory, none is "the only one": without an
    // option, each directory's configuration names its own.
    std::fs::create_dir(d.path("other")).unwrap();
    let other = d.file(
        "other/other.toml",
        "[[helper]]\nname = \"db\"\ncommand = [\"sleep\", \"7003\"]\n",
    );
    let _other = second_run(&runtime, &other);
    let out = complete("bash", at, &["ctl", "signal", ""], &[]);
    assert_eq!(offered(&out), ["web", "worker"]);
    let out = complete(
        "bash",
        (&d.path("other"), &runtime),
        &["ctl", "stop", ""],
        &[],
    );
    assert_eq!(offered(&out), ["db", "all"]);
    // Elsewhere: no configuration there, two sockets, no names; --config names one.
    let elsewhere = Dir::new("ctlcomplete", "elsewhere");
    let there = (elsewhere.0.as_path(), runtime.as_path());
    assert!(offered(&complete("bash", there, &["ctl", "stop", ""], &[])).is_empty());
    let config = other.to_str().unwrap();
    let out = complete(
        "bash",
        there,
        &["ctl", "--config", config, "restart", "d"],
        &[],
    );
    assert_eq!(offered(&out), ["db"]);
    run.stop();
}

#[test]
fn signal_names_complete_from_the_signal_module() {
    let d = Dir::new("ctlcomplete", "signals");
    let runtime = runtime(&d);
    let at = (d.0.as_path(), runtime.as_path());
    let names = offered(&complete("bash", at, &["ctl", "signal", "web", "te"], &[]));
    assert_eq!(names, ["TERM"]);
    let names = offered(&complete(
        "bash",
        at,
        &["ctl", "signal", "web", "SIGUS"],
        &[],
    ));
    assert_eq!(names, ["SIGUSR1", "SIGUSR2"]);
    let out = complete("fish", at, &["ctl", "signal", "web", "RTM"], &[]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.contains("RTMIN\t") && text.contains("RTMAX\t"),
        "{text}"
    );
}

#[test]
fn no_supervisor_no_names_quickly_and_silently() {
    let d = Dir::new("ctlcomplete", "none");
    let runtime = runtime(&d);
    let gone = d.path("gone.sock");
    let gone = gone.to_str().unwrap();
    let t = Instant::now();
    for words in [
        &["ctl", "restart", ""][..],
        &["ctl", "--socket", gone, "restart", ""],
        &["ctl", "--config", "missing.toml", "pid", ""],
    ] {
        for shell in ["bash", "zsh", "fish"] {
            let out = complete(shell, (&d.0, &runtime), words, &[]);
            assert!(offered(&out).is_empty(), "{shell} {words:?}: {out:?}");
        }
    }
    // Nine completions, none of which waits for anything: well under a second each.
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
}

#[test]
fn a_supervisor_that_never_answers_does_not_hang_completion() {
    let d = Dir::new("ctlcomplete", "mute");
    let runtime = runtime(&d);
    let path = d.path("mute.sock");
    // Listening, never accepting: the connection is made, no answer ever comes.
    let _mute = UnixListener::bind(&path).unwrap();
    let sock = path.to_str().unwrap();
    let t = Instant::now();
    let out = complete(
        "bash",
        (&d.0, &runtime),
        &["ctl", "--socket", sock, "restart", ""],
        &[],
    );
    assert!(offered(&out).is_empty(), "{out:?}");
    // foster::cli::complete::ASK_LIMIT, not the tests' LIMIT, bounds it.
    let limit = foster::cli::complete::ASK_LIMIT;
    assert!(t.elapsed() < limit + LIMIT / 3, "{:?}", t.elapsed());
    assert!(
        t.elapsed() >= limit,
        "it gave up before waiting: {:?}",
        t.elapsed()
    );
}
