//! The command line's errors: a refused option value ([`ArgError`]), a subcommand's error
//! ([`CliError`]) and a usage error found after parsing ([`UsageError`]).

/// A value of an option that clap hands to foster's own parser, refused; the message names it.
#[derive(Debug, thiserror::Error)]
pub enum ArgError {
    /// Not a uid or gid.
    #[error("{text:?}: expected a {kind} from 0 to 4294967294")]
    NotAnId { text: String, kind: &'static str },
    /// `(uid_t)-1` or `(gid_t)-1`.
    #[error(
        "{n} is ({kind}_t)-1, which the kernel takes as \"no change\": the program would keep \
         foster's own {kind}; expected a {kind} from 0 to 4294967294"
    )]
    NoChangeId { n: u32, kind: &'static str },
    /// Not a signal.
    #[error(transparent)]
    Signal(#[from] crate::process::signal::SignalError),
    /// A signal `foster run` does not read.
    #[error(
        "{0} cannot reload: foster run reads only the signals of its table (HUP, USR2, \
         TERM..., see man foster-run)"
    )]
    CannotReload(crate::process::signal::Sig),
    /// Not a `--subreaper` value.
    #[error("{0:?}: expected auto (or 1) or off (or 0)")]
    Subreaper(String),
}

/// The error type of a subcommand: printed as `foster: error: ...`, exit status 1 (2 for a
/// [`UsageError`]).
pub type CliError = Box<dyn std::error::Error + Send + Sync>;

/// A usage error found after parsing (a value no parser could check alone): exit status 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);
