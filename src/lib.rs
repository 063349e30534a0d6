//! foster: a process-tree manager for Linux.
//!
//! The layers, each using only those listed above it here (see `docs/architecture.md`):
//!
//! - [`procstat`]: the `/proc/<pid>/stat` parser, allocation-free.
//! - [`identity`]: `(pid, starttime)`, its `PID:STARTTIME` text form.
//! - [`sanitize`]: escaping process names before they reach a terminal.
//! - [`tree`]: `/proc` scanned into a graph keyed by identity, snapshot diffs, renderings.
//! - [`logging`]: the tracing subscriber behind `-v` / `-q` / `RUST_LOG`.
//! - [`reaper`]: the one owner of all waiting: SIGCHLD through signalfd, routed statuses.
//! - [`config`]: the TOML configuration of `foster run`.
//! - [`cli`]: the command line and its dispatch.

pub mod cli;
pub mod config;
pub mod identity;
pub mod logging;
pub mod procstat;
pub mod reaper;
pub mod sanitize;
pub mod tree;
