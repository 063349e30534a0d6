//! Processes as the kernel shows them; uses only [`crate::base`].
//!
//! - [`procstat`]: the `/proc/<pid>/stat` parser, allocation-free.
//! - [`state`]: a helper's state, the conditions of `depends_on`, a process's role.
//! - [`signal`]: signals: one parser, one spelling, signal sets, the one signalfd.
//! - [`identity`]: `(pid, starttime)` and [`identity::ProcessRef`], the one way to hold,
//!   check, signal and wait for a process through a pidfd.
//! - [`reaper`]: the one owner of all waiting: SIGCHLD through signalfd, routed statuses.
//! - [`tree`]: `/proc` read into a graph keyed by identity, diffs, renderings, births.

pub mod identity;
pub mod procstat;
pub mod reaper;
pub mod signal;
pub mod state;
pub mod tree;
