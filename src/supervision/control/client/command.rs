//! `foster ctl`'s command line: [`CtlCommand`], the one enum of its subcommands, which clap
//! reads directly, and what goes with it ([`WaitFor`], [`View`], [`BARE_STOP`]).

use crate::supervision::control::protocol::MAX_LOG_LINES;

/// What `foster ctl` was asked to do: its subcommands, as the command line reads them.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum CtlCommand {
    /// The supervised tree: helpers, then every process with its role, generation, policy,
    /// expected and actual parent.
    Status {
        /// Never cut command lines (on a terminal they are cut to its width; into a pipe or
        /// a file they never are).
        #[arg(short = 'w', long)]
        wide: bool,
        /// Only these helpers and their processes (`all`: every helper).
        #[arg(value_name = "HELPER")]
        helpers: Vec<String>,
    },
    /// The supervisor's events: a recent backlog, then each new one as it happens.
    Events {
        /// How many past events to show first (at most 256; default all kept).
        #[arg(long, value_name = "N")]
        backlog: Option<usize>,
        /// Print the backlog and exit instead of following.
        #[arg(long)]
        no_follow: bool,
    },
    /// Send a signal to a helper (by name) or to a process of the tree (PID or PID:STARTTIME).
    Signal {
        /// A helper name, a pid, or PID:STARTTIME.
        target: String,
        /// TERM, SIGHUP, STOP, CONT, KILL, RTMIN+3, 15... (any signal).
        signal: crate::process::signal::Sig,
    },
    /// Stop a helper (its stop signal and grace) and launch it again; launch it now if it is
    /// waiting for its backoff, ended or given up on.
    Restart {
        /// The helpers' names, one request each in order (`all`: every helper).
        #[arg(value_name = "HELPER", required = true)]
        helpers: Vec<String>,
    },
    /// Start a helper that is not running: one stopped by `stop`, ended, given up on or
    /// waiting for its backoff is launched now (once its dependencies are met).
    Start {
        /// The helpers' names, one request each in order (`all`: every helper).
        #[arg(value_name = "HELPER", required = true)]
        helpers: Vec<String>,
    },
    /// Stop each HELPER, or `all` (its stop signal, its grace, then SIGKILL of what is left of
    /// its tree): it stays stopped, whatever its restart rule, until `start`. A HELPER is
    /// required: the supervisor itself is stopped by `shutdown`.
    #[command(override_usage = "foster ctl stop [OPTIONS] <HELPER>...")]
    Stop {
        /// The helpers to stop, one request each, dependents first for `all` (every helper;
        /// `foster ctl shutdown` stops the supervisor and its whole tree).
        // Optional for clap only: a bare `stop` gets a usage error naming `shutdown`.
        #[arg(value_name = "HELPER")]
        helpers: Vec<String>,
    },
    /// Stop the supervisor and its whole tree: the same orderly shutdown as SIGTERM.
    Shutdown,
    /// Reopen every log file the supervisor writes (the events log, the helpers' log files)
    /// at its path, after an outside rotation: the same as SIGUSR1, and says which.
    ReopenLogs,
    /// A helper's output (every helper's without HELPER): its last kept lines, then with -f
    /// each new one, shown as foster run shows them (NAME | line, NAME ! for standard error).
    Logs {
        /// The helpers (default: every helper), their lines merged in the order read.
        #[arg(value_name = "HELPER")]
        helpers: Vec<String>,
        /// How many kept lines to show first: 10 by default, as tail (with --since, every
        /// one since then); at most 10000 (each helper keeps its last 1000); 0 with -f shows
        /// only new lines.
        #[arg(short = 'n', long = "lines", value_name = "N",
              value_parser = clap::value_parser!(u64).range(0..=MAX_LOG_LINES as u64))]
        lines: Option<u64>,
        /// Only lines read in this last while: 30s, 5m, 1.5h (foster's durations).
        #[arg(long, value_name = "DURATION", value_parser = crate::base::duration::parse)]
        since: Option<std::time::Duration>,
        /// Each line with the time foster read it (as events show it).
        #[arg(short = 't', long)]
        timestamps: bool,
        /// Follow: print each new line as it is read, until interrupted or the supervisor
        /// ends.
        #[arg(short = 'f', long)]
        follow: bool,
    },
    /// Read the configuration file again and apply it: launch the helpers added, stop those
    /// removed, restart those whose definition changed, leave the others untouched. A file
    /// with mistakes is refused with every mistake listed, and nothing changes.
    Reload {
        /// Read and check the file, say what a reload would start, stop and restart, and
        /// change nothing (supervisorctl's reread).
        #[arg(long)]
        dry_run: bool,
    },
    /// Print the pid of a helper's process, as your PID namespace knows it; exit status 1 when
    /// it has none.
    Pid {
        /// The helper's name.
        helper: String,
    },
    /// Wait until every HELPER is started, ready or stopped (--for), following the events;
    /// exit status 1 on --timeout, or when one cannot get there by itself.
    Wait {
        /// The helpers' names (`all`: every helper).
        #[arg(value_name = "HELPER", required = true)]
        helpers: Vec<String>,
        /// What to wait for: started (a process launched), ready (its readiness check passed,
        /// or running without one), stopped (no process).
        #[arg(long = "for", value_enum, default_value_t = WaitFor::Ready)]
        until: WaitFor,
        /// Give up after this long (30s, 2m): exit status 1. Default: no limit.
        #[arg(long, value_name = "DURATION", value_parser = crate::base::duration::parse)]
        timeout: Option<std::time::Duration>,
    },
    /// A helper's last launches and ends (at most 32 events): pids, exit statuses, the
    /// signals that stopped it, restarts, give-ups.
    History {
        /// The helper's name.
        helper: String,
    },
    /// The supervisor's numbers (helpers' states, restarts, last exits, adoptions, memory and
    /// CPU) in the Prometheus text format, the text foster run --metrics serves.
    Metrics,
}

/// What `foster ctl wait` waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WaitFor {
    /// Launched: a process runs (starting, running, ready or unhealthy).
    Started,
    /// Ready: its readiness check passed, or it runs and has none.
    Ready,
    /// No process: not launched, ended, or stopped.
    Stopped,
}

/// `ctl stop` without HELPER: refused, so that a forgotten argument never stops everything.
pub const BARE_STOP: &str = "ctl stop needs the HELPER to stop; to stop the supervisor and its \
                             whole tree, use `foster ctl shutdown`";

/// How `foster ctl` shows what it prints for people.
#[derive(Debug, Clone, Copy, Default)]
pub struct View {
    /// The terminal's width: `status` cuts command lines to it (unless `--wide`); `None`: not
    /// a terminal, never cut.
    pub width: Option<usize>,
    /// Names coloured as the relay colours them on a terminal (`logs`).
    pub colour: bool,
}
