//! Launching under a parent-death policy: the arm-then-check gate and everything around it.
//! Uses [`crate::base`] and [`crate::process`].
//!
//! - [`policy`]: parent-death policies per generation and their environment encoding.
//! - [`lifeline`]: a pidfd of the verified expected parent, the second liveness channel.
//! - [`admission`]: guards for operations, the idempotent shutdown latch with one owner.
//! - [`trace`], [`plan`], [`target`], [`expect`], [`stop`], [`inprocess`]: the gate itself;
//!   [`plan`] is all that runs between fork and exec, and can be audited alone.
//! - [`spawner`]: the one long-lived thread on which every fork happens.
//! - [`chainload`]: `foster exec`, the gate as a chain-loading command.
//! - [`adoption`]: expected identities; classification of reparented processes.
//!
//! The gate runs in three forms: between fork and exec ([`spawner`], or
//! [`GatePlan::install`] on a `Command`), in-process at a Rust helper's start ([`enter`]), and
//! in `foster exec` before it execs its program ([`chainload`]).

pub mod admission;
pub mod adoption;
pub mod chainload;
pub mod lifeline;
pub mod policy;
pub mod spawner;

pub mod expect;
pub mod inprocess;
pub mod plan;
pub mod stop;
pub mod target;
pub mod trace;

pub use self::expect::{
    ENV_GATED, ENV_PARENT_PIDFD, EnvError, Expectation, env_for_children, parent_pidfd_from_env,
};
pub use self::inprocess::{EnterError, Gated, Loss, enter, enter_with, enter_with_pidfd};
pub use self::plan::{BirthClock, GatePlan, IdentitySlot, SignalSetup, Trace, own_start_time};
pub use self::stop::*;
pub use self::target::{TargetError, check_target, resolve_program};
pub use self::trace::{Barrier, Step, TraceRecord};
