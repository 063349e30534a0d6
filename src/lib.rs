//! foster: a process-tree manager for Linux.
//!
//! The layers, each using only those listed above it here (see `docs/architecture.md`, which
//! also shows how a launch and a death flow through them):
//!
//! - [`sys`]: the system calls wrapped once: `poll` (`EINTR` retried with the time left),
//!   `errno`.
//! - [`procstat`]: the `/proc/<pid>/stat` parser, allocation-free.
//! - [`sanitize`]: escaping process names before they reach a terminal.
//! - [`json`]: the one schema version of every JSON foster writes (`docs/json.md`).
//! - [`signal`]: signals: one parser, one spelling (`SIGTERM`), default actions, signal sets,
//!   the one signalfd, the signal state foster was started with, the C library's 32 and 33
//!   ignored at start.
//! - [`duration`]: durations as people write them (`250ms`, `1.5s`, `2m`): one parser, one
//!   writer.
//! - [`logging`]: the tracing subscriber behind `-v` / `-q` / `RUST_LOG`, the one error line.
//! - [`size`]: sizes in bytes as people write them (`10MiB`, `1G`).
//! - [`ownership`]: whether another user could plant or replace a file where foster puts one.
//! - [`logfile`]: a log file rotated by size, the one rotation of the events and helpers' logs.
//! - [`state`]: a helper's state, the one documented set, and the conditions of `depends_on`;
//!   a process's role in the supervised tree.
//! - [`identity`]: `(pid, starttime)`, its `PID:STARTTIME` text form; [`identity::ProcessRef`],
//!   the one way to hold, check, signal and wait for a process through a pidfd.
//! - [`tree`]: `/proc` scanned into a graph keyed by identity, snapshot diffs, renderings.
//! - [`policy`]: parent-death policies per generation and their environment encoding.
//! - [`lifeline`]: a pidfd of the verified expected parent, the second liveness channel.
//! - [`admission`]: guards for operations, the idempotent shutdown latch with one owner.
//! - [`gate`]: the arm-then-check startup gate, in three forms.
//! - [`spawner`]: the one long-lived thread on which every fork happens.
//! - [`chainload`]: `foster exec`, the gate as a chain-loading command.
//! - [`qualify`]: the lifecycle harness behind `foster qualify` and the gate's tests.
//! - [`reaper`]: the one owner of all waiting: SIGCHLD through signalfd, routed statuses.
//! - [`adoption`]: expected identities; classification of reparented processes.
//! - [`output`]: helpers' output: captured through pipes, cut into lines, kept, relayed named.
//! - [`event`]: supervision events and the JSON-lines events log.
//! - [`config`]: the TOML configuration of `foster run`.
//! - [`restart`]: a helper's restart/backoff state machine.
//! - [`readiness`]: a helper's readiness and liveness checks: the notify and notification-fd
//!   protocols, the exec, connect and log probes, the state of each launch's checks.
//! - [`init`]: `foster init`, a container's PID 1 on the reaper: reaping, forwarding, TTY.
//! - [`control`]: the control socket: protocol, server, `foster ctl` client.
//! - [`instance`]: one `foster run` per configuration file, a lock in the runtime directory.
//! - [`metrics`]: the Prometheus text of a supervisor's numbers, and its HTTP responder.
//! - [`supervisor`], [`contain`]: `foster run` and its containment (one layer: each uses the
//!   other).
//! - [`demo`]: `foster demo`, a supervised example tree with every role.
//! - [`top`]: the live dashboard, `foster top`.
//! - [`cli`]: the command line and its dispatch.
//!
//! # Errors
//!
//! Each module's error is a `thiserror` type. Its message is whole (it already says its cause,
//! `cannot read /proc/7/stat: Permission denied`), so it is shown alone; the cause is also kept
//! as its `source()`, for code that needs the cause's kind (an errno, an `io::ErrorKind`). The
//! command line shows every error one way, `foster: error: MESSAGE` ([`logging::report`]).
//!
//! # The creating-thread contract
//!
//! The kernel's "parent" for `PR_SET_PDEATHSIG` is the **thread** that created a process: when
//! that thread exits, the child gets its parent-death signal even though the rest of the
//! supervisor lives. foster therefore forks only on one dedicated, long-lived thread, owned by
//! a [`spawner::Spawner`]; other threads (tokio workers, blocking-pool threads that retire after
//! idling) send it launch requests over a channel. That thread lives until the last `Spawner`
//! handle is dropped ([`spawner::Spawner::global`] never is). A helper that nevertheless
//! receives its signal while its parent process still lives (another launcher's thread exited)
//! checks the expected identity before taking the parent-gone path
//! ([`gate::enter`] counts it as a false alarm), and the [`lifeline`] follows the process,
//! not a thread.

pub mod admission;
pub mod adoption;
pub mod chainload;
pub mod cli;
pub mod config;
pub mod contain;
pub mod control;
pub mod demo;
pub mod duration;
pub mod event;
pub mod gate;
pub mod identity;
pub mod init;
pub mod instance;
pub mod json;
pub mod lifeline;
pub mod logfile;
pub mod logging;
pub mod metrics;
pub mod output;
pub mod ownership;
pub mod policy;
pub mod procstat;
pub mod qualify;
pub mod readiness;
pub mod reaper;
pub mod restart;
pub mod sanitize;
pub mod signal;
pub mod size;
pub mod spawner;
pub mod state;
pub mod supervisor;
pub mod sys;
pub mod top;
pub mod tree;
