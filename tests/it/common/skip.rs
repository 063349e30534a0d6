//! Skips, counted: a test that cannot run here (or part of it) says why through [`setup`] or
//! [`host`], which record the reason; the reasons are printed together when the binary ends.
//! Under CI (`CI=true`) a skip of what CI provides (root, a tool `.ci/run` installs, a debug
//! build) fails the test instead: CI cannot go green on a test that did not run. A skip the
//! host decides (its kernel or container refusing a namespace, no `/dev/fuse`, its user
//! database) stays a skip there, listed apart.

use std::fmt::Display;
use std::io::Write;
use std::sync::{Mutex, Once};

/// Why a test skips.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Why {
    /// Something CI provides is missing: root, a tool `.ci/run` installs, a debug build.
    Setup,
    /// The host decides, CI's too: a kernel feature, a container's permission, its users.
    Host,
}

/// (test, why, reason) of every skip of this process.
static SKIPS: Mutex<Vec<(String, Why, String)>> = Mutex::new(Vec::new());
static SUMMARY: Once = Once::new();

/// Whether this run is CI's: `CI=true` in the environment.
pub fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Records that the running test skips for `reason`, something CI provides; fails the test
/// under CI.
pub fn setup(reason: impl Display) {
    record(Why::Setup, reason.to_string());
}

/// Records that the running test skips for `reason`, something the host decides.
pub fn host(reason: impl Display) {
    record(Why::Host, reason.to_string());
}

/// True, the skip recorded ([`setup`]), when this process is not root.
pub fn unless_root(reason: impl Display) -> bool {
    let skips = !super::is_root();
    if skips {
        setup(reason);
    }
    skips
}

/// A skip when something root may have was refused: the host's when root, [`setup`] otherwise.
pub fn refused(reason: impl Display) {
    if super::is_root() {
        host(reason);
    } else {
        setup(reason);
    }
}

fn record(why: Why, reason: String) {
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("?").to_string();
    if why == Why::Setup && under_ci() {
        panic!("skipped under CI, which provides what it needs: {reason}");
    }
    eprintln!("skipped: {reason}");
    SKIPS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((test, why, reason));
    SUMMARY.call_once(|| {
        // SAFETY: registers a function without arguments, run once as the process exits.
        unsafe { libc::atexit(summary) };
    });
}

/// Prints every skip of this process, the host's apart, as it exits (whatever test ran last).
extern "C" fn summary() {
    let skips = SKIPS.lock().unwrap_or_else(|e| e.into_inner());
    let setup = skips.iter().filter(|s| s.1 == Why::Setup).count();
    let mut text = format!(
        "\n{} skips ({setup} by what CI provides, {} by the host):\n",
        skips.len(),
        skips.len() - setup
    );
    for (label, why) in [("setup", Why::Setup), ("host", Why::Host)] {
        for (test, _, reason) in skips.iter().filter(|s| s.1 == why) {
            text += &format!("  {label}: {test}: {reason}\n");
        }
    }
    let _ = std::io::stderr().write_all(text.as_bytes());
}
