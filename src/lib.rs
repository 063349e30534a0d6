//! foster: a process-tree manager for Linux.
//!
//! The subsystems, each using only those listed above it (`tests/vocabulary.rs` checks it;
//! `docs/architecture.md` shows the threads and how a launch and a death flow through them):
//!
//! - [`base`]: the small shared pieces: system calls, escaping, JSON, durations, sizes,
//!   logging, file ownership, rotated log files.
//! - [`process`]: processes as the kernel shows them: `/proc`, identities, signals, the one
//!   reaper, the tree, roles and states.
//! - [`gate`]: launching under a parent-death policy: policies, the gate, the launcher thread,
//!   `foster exec`, the adoption checks.
//! - [`qualify`]: the lifecycle harness behind `foster qualify` and the gate's tests.
//! - [`init`]: `foster init`, a container's PID 1.
//! - [`supervision`]: `foster run`: configuration, the supervisor, output, readiness, events,
//!   containment, the control socket, metrics.
//! - [`top`]: the live dashboard, `foster top`.
//! - [`cli`]: the command line and its dispatch.
//!
//! # Errors
//!
//! Each module's error is a `thiserror` type. Its message is whole (it already says its cause,
//! `cannot read /proc/7/stat: Permission denied`), so it is shown alone; the cause is also kept
//! as its `source()`, for code that needs the cause's kind (an errno, an `io::ErrorKind`). The
//! command line shows every error one way, `foster: error: MESSAGE` ([`base::logging::report`]).
//!
//! # The creating-thread contract
//!
//! `PR_SET_PDEATHSIG` follows the **thread** that created a process, so foster forks only on
//! one long-lived thread, owned by a [`gate::spawner::Spawner`]; the others send it requests.
//! A false alarm (another launcher's thread ended) is caught by the expected-identity check.

pub mod base;
pub mod cli;
pub mod gate;
pub mod init;
pub mod process;
pub mod qualify;
pub mod supervision;
pub mod top;
