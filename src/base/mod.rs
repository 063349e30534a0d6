//! The small shared pieces every subsystem may use; they use nothing of foster's above them.
//!
//! - [`sys`]: the system calls wrapped once: `poll` (`EINTR` retried), `errno`.
//! - [`sanitize`]: escaping process names and peers' text before they reach a terminal.
//! - [`json`]: the one schema version of every JSON foster writes (`docs/json.md`).
//! - [`duration`]: durations as people write them (`250ms`, `1.5s`, `2m`): one grammar.
//! - [`size`]: sizes in bytes as people write them (`10MiB`, `1G`).
//! - [`logging`]: the tracing subscriber behind `-v` / `-q` / `RUST_LOG`, the one error line.
//! - [`ownership`]: whether another user could plant or replace a file where foster puts one.
//! - [`logfile`]: a log file rotated by size, for the events log and the helpers' logs.

pub mod duration;
pub mod json;
pub mod logfile;
pub mod logging;
pub mod ownership;
pub mod sanitize;
pub mod size;
pub mod sys;
