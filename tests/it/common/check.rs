//! `foster run --check` on a configuration file, as a user runs it: its exit code and what it
//! said on standard error (within a bound: [`output_within`]). Shared by the tests of what a
//! configuration may say.

use std::path::Path;
use std::process::{Command, Stdio};

use super::child::output_within;

/// `foster run --check CONFIG`: (exit code, standard error).
pub fn check(config: &Path) -> (Option<i32>, String) {
    let child = Command::new(env!("CARGO_BIN_EXE_foster"))
        .args(["run", "--check"])
        .arg(config)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = output_within(child, &format!("foster run --check {}", config.display()));
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
