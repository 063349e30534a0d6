//! The skips of `common::skip`, run in a process of their own (this binary again, its probe
//! alone): a skip is listed when the binary ends; under CI (`CI=true`) a skip of what CI
//! provides fails its test, one the host decides does not.

use std::process::{Command, Output, Stdio};

use crate::common;

const PROBE: &str = "FOSTER_TEST_SKIP_PROBE";

/// Not a test of its own: with `FOSTER_TEST_SKIP_PROBE` set (`setup` or `host`), skips that
/// way. Without it, it does nothing.
#[test]
#[ignore = "the probe of the skip tests: they run it in a process of its own"]
fn probe() {
    match std::env::var(PROBE).as_deref() {
        Ok("setup") => common::skip::setup("the probe needs a setup"),
        Ok("host") => common::skip::host("the probe's host refuses"),
        _ => {}
    }
}

/// This binary running [`probe`] alone, `how` it skips, under CI or not.
fn probe_run(how: &str, ci: bool) -> (Output, String) {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["--ignored", "--exact", "skips::probe", "--test-threads=1"])
        .env(PROBE, how)
        .env_remove("CI")
        .stdin(Stdio::null());
    if ci {
        c.env("CI", "true");
    }
    let out = common::child::output_within(
        c.stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
        "the skip probe",
    );
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out, text)
}

#[test]
fn a_skip_is_listed_when_the_binary_ends() {
    let (out, text) = probe_run("setup", false);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("1 passed"), "{text}");
    let summary = text
        .rsplit_once("test result:")
        .map(|(_, s)| s)
        .unwrap_or("");
    assert!(
        summary.contains("1 skips (1 by what CI provides, 0 by the host)")
            && summary.contains("setup: skips::probe: the probe needs a setup"),
        "{text}"
    );
}

#[test]
fn under_ci_a_skip_of_what_ci_provides_fails_its_test() {
    let (out, text) = probe_run("setup", true);
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("1 failed"), "{text}");
    assert!(
        text.contains("skipped under CI, which provides what it needs: the probe needs a setup"),
        "{text}"
    );
}

#[test]
fn under_ci_a_skip_the_host_decides_stays_a_skip() {
    let (out, text) = probe_run("host", true);
    assert!(out.status.success(), "{text}");
    let summary = text
        .rsplit_once("test result:")
        .map(|(_, s)| s)
        .unwrap_or("");
    assert!(
        summary.contains("host: skips::probe: the probe's host refuses"),
        "{text}"
    );
}
