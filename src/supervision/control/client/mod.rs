//! The control socket's client side: `foster ctl`, and the connection other clients reuse.
//!
//! - [`connection`]: [`ClientError`], [`Connection`], the checked connect of every client.
//! - [`socket`]: the socket found when none is given; the listening sockets.
//! - [`command`]: [`CtlCommand`], `foster ctl`'s subcommands as clap reads them.
//! - [`reply`]: one request's reply, its pids the caller's, printed for people or as JSON.
//! - [`status`]: the status for people, as a tree.
//! - [`events`]: events followed and shown one a line.
//! - [`logs`]: `foster ctl logs`, helpers' lines in the relay's forms.
//!
//! Whatever the server sent goes through [`crate::base::sanitize::escape`] before it reaches a
//! terminal, error messages included. Uses the protocol, `nspid` and the server's directory
//! checks (`server::open_private_dir`), never its tasks.

pub mod command;
pub mod connection;
pub mod events;
pub mod logs;
pub mod reply;
pub mod socket;
pub mod status;

pub use self::command::{BARE_STOP, CtlCommand, View, WaitFor};
pub use self::connection::{ClientError, Connection, check_server, connect_checked, into_result};
pub use self::events::{follow, render_event};
pub use self::reply::{render_history, render_reload, render_reload_plan};
pub use self::socket::{default_dir_is_private, resolve_socket};
pub use self::status::{render_status, uptime_text};

pub(super) use self::events::print_streamed;
pub(super) use self::logs::{LogsAsked, logs};
pub(super) use self::reply::{exchange, print_reply, signal_target};
