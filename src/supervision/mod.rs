//! `foster run`: supervising declared helpers; uses base, process and gate.
//!
//! - [`config`]: the TOML configuration: schema, validation, where it is found.
//! - [`restart`]: a helper's restart and backoff state machine.
//! - [`output`]: helpers' output: captured through pipes, cut into lines, kept, relayed.
//! - [`event`]: supervision events and the JSON-lines events log.
//! - [`readiness`]: readiness and liveness: notify, notification fd, exec/connect/log probes.
//! - [`control`]: the control socket: protocol, server, the `foster ctl` client.
//! - [`metrics`]: the Prometheus text of a supervisor's numbers, and its HTTP responder.
//! - [`instance`]: one `foster run` per configuration file.
//! - [`supervisor`]: the supervisor's loop: launches, restarts, orphans, shutdown.
//! - [`contain`]: the supervisor in a PID namespace of its own.
//! - [`demo`]: `foster demo`, a supervised example tree with every role.

pub mod config;
pub mod contain;
pub mod control;
pub mod demo;
pub mod event;
pub mod instance;
pub mod metrics;
pub mod output;
pub mod readiness;
pub mod restart;
pub mod supervisor;
