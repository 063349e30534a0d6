//! The command line: argument definitions and the dispatch to one entry point per subcommand.
//!
//! Owns nothing but parsing and routing; each subcommand's work lives in its domain module.
//! Exit statuses common to every subcommand: 0 success, 1 a runtime error (printed as
//! `foster: error: ...` on standard error), 2 a usage error (from clap).

use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use crate::identity::Identity;

/// foster: a process-tree manager for Linux.
#[derive(Debug, Parser)]
#[command(name = "foster", version, propagate_version = true)]
#[command(
    about = "A process-tree manager for Linux: subreaper, race-free parent-death gate, \
                   adoption checks, container init and a live dashboard"
)]
pub struct Cli {
    /// More log lines on standard error (-v info, -vv debug, -vvv trace). RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    /// Fewer log lines (-q errors only, -qq none).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub quiet: u8,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the identity (PID:STARTTIME) of a process, e.g. `foster identity $$`.
    Identity(IdentityArgs),
    /// Print the process tree like pstree: one process a line with pid, state and name.
    Tree(TreeArgs),
    /// Supervise the helpers a TOML file declares, as their subreaper (see docs/run.md).
    Run(RunArgs),
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The configuration file.
    pub config: std::path::PathBuf,
    /// Validate the configuration and exit: 0 when valid, 2 with the error when not.
    #[arg(long)]
    pub check: bool,
    /// Run the tree in a new PID namespace with foster as its init, so that even a SIGKILL of
    /// foster ends every descendant.
    #[arg(long)]
    pub contain: bool,
    /// Append every event (launch, exit, reparented, restart, signal) as a JSON line to FILE.
    #[arg(long, value_name = "FILE")]
    pub events_log: Option<std::path::PathBuf>,
}

#[derive(Debug, Args)]
pub struct IdentityArgs {
    /// The process whose identity to print.
    pub pid: i32,
}

#[derive(Debug, Args)]
pub struct TreeArgs {
    /// Show each process's full command line (escaped) instead of its name.
    #[arg(short = 'a', long = "arguments")]
    pub arguments: bool,
    /// Show only this process and its descendants.
    #[arg(long, value_name = "PID")]
    pub root: Option<i32>,
    /// Print JSON: a list of root nodes, each with pid, ppid, start_time, state, comm, cmdline
    /// and children (see docs/tree.md).
    #[arg(long, conflicts_with = "dot")]
    pub json: bool,
    /// Print a Graphviz digraph (render with `dot -Tsvg`).
    #[arg(long)]
    pub dot: bool,
}

/// The error type of a subcommand: printed as `foster: error: ...`, exit status 1.
pub type CliError = Box<dyn std::error::Error + Send + Sync>;

/// Parses the command line, sets up logging and runs the subcommand.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    crate::logging::init(cli.verbose as i8 - cli.quiet as i8);
    match dispatch(cli.command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("foster: error: {e}");
            ExitCode::from(1)
        }
    }
}

fn dispatch(command: Command) -> Result<ExitCode, CliError> {
    match command {
        Command::Identity(a) => {
            println!("{}", Identity::of(a.pid)?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Run(a) => run(a),
        Command::Tree(a) => {
            let format = match (a.json, a.dot) {
                (true, _) => crate::tree::Format::Json,
                (_, true) => crate::tree::Format::Dot,
                _ => crate::tree::Format::Text,
            };
            let req = crate::tree::TreeRequest {
                arguments: a.arguments,
                root: a.root,
                format,
            };
            crate::tree::run(&req, &mut std::io::stdout().lock())?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn run(a: RunArgs) -> Result<ExitCode, CliError> {
    let config = match crate::config::Config::load(&a.config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("foster: error: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    if a.check {
        println!(
            "{}: valid, {} helper{}",
            a.config.display(),
            config.helpers.len(),
            if config.helpers.len() == 1 { "" } else { "s" }
        );
        return Ok(ExitCode::SUCCESS);
    }
    Err("foster run: supervision is not available yet; use --check to validate".into())
}
