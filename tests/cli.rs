//! The command line's one error style, on the real binary: every subcommand's usage errors and
//! runtime errors are one `foster: error: MESSAGE` line (clap's usage line and hint may follow
//! a usage error), with status 2 for a usage error and 1 (or the subcommand's own status) for a
//! runtime error.

use std::process::Command;

const FOSTER: &str = env!("CARGO_BIN_EXE_foster");

fn foster(args: &[&str]) -> (Option<i32>, String) {
    let o = Command::new(FOSTER)
        .args(args)
        .env_remove("FOSTER_PARENT")
        .env_remove("FOSTER_POLICY")
        .env_remove("FOSTER_SOCKET")
        .env_remove("FOSTER_GRACE")
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn usage_errors_are_foster_error_lines_with_status_2() {
    for (args, what) in [
        (&["exec", "--grace", "1.5x", "--", "true"][..], "1.5x"),
        (&["exec", "--signal", "STOP", "--", "true"], "SIGSTOP"),
        (&["exec", "--bogus", "--", "true"], "--bogus"),
        (&["ctl", "bogus"], "bogus"),
        (&["ctl", "signal", "web", "NOPE"], "NOPE"),
        (&["run", "--bogus", "x.toml"], "--bogus"),
        (&["top", "--interval", "10ms"], "at least 100ms"),
        (&["tree", "--root", "x"], "'x'"),
        (&["identity", "x"], "'x'"),
        (&["qualify", "--case", "nope"], "unknown case \"nope\""),
        (&["demo", "--bogus"], "--bogus"),
        (&["init", "-z", "--", "true"], "-z"),
        (
            &["init", "--rewrite", "X", "--", "true"],
            "expected FROM:TO",
        ),
        (
            &["init", "--rewrite", "BOGUS:TERM", "--", "true"],
            "unknown signal \"BOGUS\"",
        ),
        (&["init", "--", ""], "empty program name"),
        (&["bogus"], "bogus"),
    ] {
        let (code, err) = foster(args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.starts_with("foster: error: "), "{args:?}: {err}");
        assert!(!err.contains("\nerror:"), "{args:?}: {err}");
        assert!(
            err.lines().next().unwrap().contains(what),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn runtime_errors_are_the_same_lines() {
    for (args, status, what) in [
        (
            &["identity", "2147483647"][..],
            1,
            "no process with pid 2147483647",
        ),
        (
            &["tree", "--root", "2147483647"],
            1,
            "no process with pid 2147483647",
        ),
        (
            &["ctl", "--socket", "/nonexistent/foster.sock", "status"],
            1,
            "no supervisor listening at /nonexistent/foster.sock",
        ),
        (&["exec", "--", "true"], 125, "FOSTER_PARENT is not set"),
        (
            &["init", "--", "/nonexistent/program"],
            127,
            "cannot run /nonexistent/program",
        ),
        (
            &["run", "/nonexistent/foster.toml"],
            2,
            "/nonexistent/foster.toml",
        ),
    ] {
        let (code, err) = foster(args);
        assert_eq!(code, Some(status), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("foster: error: "), "{args:?}: {err}");
        assert!(err.contains(what), "{args:?}: {err}");
    }
}

/// The library's errors keep their cause as a source (its text is in the message already).
#[test]
fn errors_keep_their_cause_as_source() {
    use std::error::Error;
    let e = foster::control::client::Connection::connect(std::path::Path::new(
        "/nonexistent/foster.sock",
    ))
    .unwrap_err();
    let cause = e.source().and_then(|s| s.downcast_ref::<std::io::Error>());
    assert_eq!(
        cause.map(std::io::Error::kind),
        Some(std::io::ErrorKind::NotFound),
        "{e:?}"
    );
    let e = foster::identity::IdentityError::BadStat(7, foster::procstat::StatError::BadPid);
    assert_eq!(
        e.source().map(ToString::to_string).as_deref(),
        Some("field 1 (pid) is not a number")
    );
    assert_eq!(
        e.to_string(),
        "cannot parse /proc/7/stat: field 1 (pid) is not a number"
    );
}
