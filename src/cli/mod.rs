//! The command line: argument definitions and the dispatch to one entry point per subcommand.
//!
//! Owns nothing but parsing and routing, and the one form of an error on standard error:
//! `foster: error: MESSAGE` ([`crate::base::logging::report`]), for usage errors (clap's,
//! followed by its usage line and hint) and runtime errors alike. Exit statuses common to every
//! subcommand: 0 success, 1 a runtime error, 2 a usage error (clap's, or a [`UsageError`] found
//! after parsing); `exec` and `init` add their own.
//!
//! - [`error`]: the command line's errors.
//! - [`args`]: the clap definitions.
//! - [`commands`]: one entry point per subcommand.
//! - [`man`]: foster.toml(5), and the synopses of the subcommands' pages.
//! - [`complete`]: completion that asks the running supervisor (`COMPLETE=bash foster`).

pub mod args;
pub mod commands;
pub mod complete;
pub mod error;
pub mod man;

pub use self::args::*;
pub use self::error::{ArgError, CliError, UsageError};

use std::process::ExitCode;

use clap::Parser;

use crate::base::logging::report;

use self::commands::{
    completions, ctl, demo, exec, identity, init, man, notify, qualify, qualify_internal, run, tree,
};

/// A command line clap refused: its message in foster's form, then clap's usage line and hint,
/// exit status 2. Help and version requests print as clap prints them (a missing subcommand's
/// help with status 2).
fn usage_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        // `foster ctl` alone: the help of what was left out, a usage error.
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            return ExitCode::from(2);
        }
        _ => {}
    }
    let text = e.render().to_string();
    let text = text.strip_prefix("error: ").unwrap_or(&text);
    report(text.trim_end());
    ExitCode::from(2)
}

/// Parses the command line, sets up logging and runs the subcommand.
pub fn main() -> ExitCode {
    // Before anything else, while there is one thread: a `kill -32` or `-33` from outside must
    // not end foster (see signal::ignore_reserved).
    crate::process::signal::ignore_reserved();
    // A shell asking for completions (COMPLETE=SHELL): answered, then foster exits.
    complete::answer_if_asked();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    let verbosity = cli.verbose as i8 - cli.quiet as i8;
    if let Command::Init(a) = cli.command {
        // No tracing subscriber and no runtime on the init path: see src/init/mod.rs.
        return init(a, verbosity);
    }
    crate::base::logging::init(verbosity);
    match dispatch(cli.command) {
        Ok(code) => code,
        Err(e) => {
            report(&e);
            ExitCode::from(if e.is::<UsageError>() { 2 } else { 1 })
        }
    }
}

/// Routes a parsed subcommand to its entry point.
fn dispatch(command: Command) -> Result<ExitCode, CliError> {
    match command {
        Command::Identity(a) => identity(a),
        Command::Run(a) => run(a),
        Command::Ctl(a) => ctl(a),
        Command::Demo(a) => demo(a),
        Command::Exec(a) => Ok(exec(a)),
        Command::Qualify(a) => qualify(a),
        Command::QualifyInternal(a) => Ok(qualify_internal(a)),
        Command::Init(a) => Ok(init(a, 0)),
        Command::Notify(a) => notify(a),
        Command::Completions(a) => completions(a),
        Command::Man(a) => man(a),
        Command::Tree(a) => tree(a),
        Command::Top(a) => crate::top::run(crate::top::TopOptions {
            keys: a.keys,
            root: a.root,
            attach: match a.attach {
                Some(given) => Some(crate::supervision::control::client::resolve_socket(
                    given.as_deref(),
                    "--attach SOCKET",
                )?),
                None => None,
            },
            interval: a.interval,
            collapse_depth: a.collapse_depth,
        }),
    }
}
