//! A `foster run` as a test builds it when it reads the supervisor's events log rather than
//! its socket's stream ([`super::supervised::Run`]): `foster run`, the test's options, the
//! configuration last; standard input null, output and error piped; the events log a FIFO of
//! the test's, opened as foster starts ([`Events::open`]). The test gets the child and ends it.

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

use super::events::Events;

/// `foster run` and its options, to be started on a configuration.
pub struct FosterRun {
    cmd: Command,
}

impl Default for FosterRun {
    fn default() -> FosterRun {
        FosterRun::new()
    }
}

impl FosterRun {
    /// `foster run`, standard input null, output and error piped.
    pub fn new() -> FosterRun {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_foster"));
        cmd.arg("run")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        FosterRun { cmd }
    }

    /// One more option of `foster run`.
    pub fn arg(mut self, a: impl AsRef<OsStr>) -> FosterRun {
        self.cmd.arg(a);
        self
    }

    /// More options of `foster run`.
    pub fn args(mut self, a: impl IntoIterator<Item = impl AsRef<OsStr>>) -> FosterRun {
        self.cmd.args(a);
        self
    }

    /// `--socket PATH`.
    pub fn socket(self, path: &Path) -> FosterRun {
        self.arg("--socket").arg(path)
    }

    /// Its standard output.
    pub fn stdout(mut self, s: Stdio) -> FosterRun {
        self.cmd.stdout(s);
        self
    }

    /// Its standard error.
    pub fn stderr(mut self, s: Stdio) -> FosterRun {
        self.cmd.stderr(s);
        self
    }

    /// The command, for what the builder does not say (an environment, a `pre_exec`).
    pub fn command(&mut self) -> &mut Command {
        &mut self.cmd
    }

    /// Starts it on `config`.
    pub fn spawn(mut self, config: &Path) -> Child {
        self.cmd.arg(config).spawn().unwrap()
    }

    /// Runs it on `config` to its end, within [`super::LIMIT`] (past it, it is SIGKILLed and the
    /// test fails): its output.
    pub fn output(self, config: &Path) -> Output {
        let what = format!("foster run {}", config.display());
        super::child::output_within(self.spawn(config), &what)
    }

    /// Starts it on `config` with `--events-log FIFO`, and opens its events (the FIFO is made
    /// by the test).
    pub fn logged(self, fifo: &Path, config: &Path) -> (Child, Events) {
        let f = self.arg("--events-log").arg(fifo).spawn(config);
        (f, Events::open(fifo))
    }
}
