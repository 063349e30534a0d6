//! The control socket of a running supervisor: its protocol, its server and its client.
//!
//! - [`protocol`]: the JSON-lines requests and replies (`docs/control.md`).
//! - [`server`]: the socket inside `foster run`: binding, peer checks, client tasks, events.
//! - [`client`]: the connection of every client, and the answers shown to people.
//! - [`verbs`]: `foster ctl`'s verbs: the socket found, each verb's requests and output.
//! - [`nspid`]: the supervisor's pids as seen from the client's PID namespace.
//!
//! A supervisor (`foster run`) listens on a Unix socket, mode 0600, in a directory only its user
//! can write to, and answers only peers of its own uid or root. `foster ctl` and `foster top
//! --attach` are its clients; they talk only to a server of their own uid or root. The
//! "Security" section of `docs/control.md` says what is trusted and what is checked.

pub mod client;
pub mod nspid;
pub mod protocol;
pub mod server;
pub mod verbs;
