//! The integration tests, one module per subject, linked into one binary (one link of the
//! library instead of one per file). Tests run on parallel threads of this one process, so
//! none may change what the process shares: its signal mask or dispositions, the subreaper
//! flag, `waitpid(-1)`, environment variables, umask, cwd, rlimits, a global tracing
//! subscriber. A test needing a process of its own re-runs this binary (`--exact`).
//!
//! Apart, at the top of `tests/`: `reaper` and `init` (libtest-mimic, `harness = false`) block
//! SIGCHLD before any thread starts, make the process a subreaper and reap any child;
//! `notify_datagrams` lowers `RLIMIT_NOFILE` and counts the process's descriptors.
//!
//! `common` is shared by all four binaries; its skips are summed up when the binary ends.

mod common;

mod adoption_births;
mod cli;
mod config;
mod contained_pids;
mod container;
mod control;
mod control_protocol;
mod control_security;
mod ctl_complete;
mod ctl_logs;
mod ctl_verbs;
mod docs;
mod exec;
mod failure_paths;
mod gate;
mod json_schema;
mod launch_signals;
mod lifecycle_matrix;
mod log_security;
mod metrics;
mod order;
mod output;
mod pstree_parity;
mod readiness;
mod reload;
mod run;
mod run_lines;
mod scan_reuse;
mod settings;
mod skips;
mod spawner;
mod surfaces;
mod top_attached;
mod top_columns;
mod top_helpers;
mod top_keys;
mod top_logs;
mod top_meters;
mod top_mouse;
mod top_tmux;
mod top_view;
mod tree;
mod vocabulary;
