//! The command line: argument definitions and the dispatch to one entry point per subcommand.
//!
//! Owns nothing but parsing and routing; each subcommand's work lives in its domain module,
//! and the one form of an error on standard error: `foster: error: MESSAGE` (written by
//! [`crate::base::logging::report`]), for
//! usage errors (clap's, followed by its usage line and hint) and runtime errors alike.
//! Exit statuses common to every subcommand: 0 success, 1 a runtime error, 2 a usage error
//! (clap's, or a [`UsageError`] found after parsing); `exec` and `init` add their own.

use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use crate::base::logging::report;
use crate::process::identity::Identity;

/// foster: a process-tree manager for Linux.
#[derive(Debug, Parser)]
// The version names the commit it was built from (build.rs): `foster 0.1.0 (commit 1a2b3c4)`.
#[command(
    name = "foster",
    version = concat!(env!("CARGO_PKG_VERSION"), " (", env!("FOSTER_COMMIT"), ")"),
    propagate_version = true
)]
#[command(
    about = "A process-tree manager for Linux: subreaper, race-free parent-death gate, \
                   adoption checks, container init and a live dashboard"
)]
pub struct Cli {
    /// More lines on standard error: -v the detail of what foster run does (expected adoptions,
    /// every process's end, stop signals) and info lines, -vv debug, -vvv trace. RUST_LOG
    /// overrides the log lines' level.
    // display_order: listed after a subcommand's own options, not among them.
    #[arg(short, long, action = clap::ArgAction::Count, global = true, display_order = 900)]
    pub verbose: u8,
    /// Fewer lines on standard error: -q errors only (foster run says nothing else).
    #[arg(short, long, action = clap::ArgAction::Count, global = true, display_order = 901)]
    pub quiet: u8,
    #[command(subcommand)]
    pub command: Command,
}

// One help style for every subcommand: the doc comment's first line is the short description
// (`foster --help`, `-h`, the man page's NAME), the paragraphs after it the long one (`--help`,
// the man page's DESCRIPTION). Help texts name man pages, never files of the source tree.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the identity (PID:STARTTIME) of a process.
    ///
    /// The identity names one process for its whole life: its pid and its start time (in clock
    /// ticks since boot), so a reused pid is not mistaken for it. For example
    /// `FOSTER_PARENT=$(foster identity $$) foster exec -- worker &`.
    Identity(IdentityArgs),
    /// Print the process tree like pstree.
    ///
    /// One process a line with its pid, state and name (with -a its command line), as text,
    /// JSON or a Graphviz digraph; with --plain, pstree's own layout. pstree's options -c -p -g
    /// -u -s -t -T -h -H -l -n -A -U mean what they mean there.
    Tree(TreeArgs),
    /// Supervise the helpers a TOML file declares, as their subreaper.
    ///
    /// foster run launches every helper of the configuration file in its start order, restarts
    /// them by their restart rules, adopts and polices the orphans of their trees, serves a
    /// control socket (foster ctl, foster top --attach) and stops the whole tree in order on
    /// SIGTERM, SIGINT or SIGHUP. A helper is a [[helper]] table of the TOML file, for
    /// example `[[helper]] name = "ticker" command = ["/bin/sh", "-c", "date; sleep 5"]
    /// restart = "always"`; `foster run --check FILE` says what is wrong with a file.
    Run(RunArgs),
    /// Talk to a running supervisor through its control socket.
    ///
    /// Without --socket, the socket is FOSTER_SOCKET, else the only listening socket in the
    /// default directory. Exit status 1 for an error reply or when no supervisor answers.
    Ctl(CtlArgs),
    /// Watch foster supervise a built-in example tree, every role at once.
    ///
    /// In the dashboard when standard input and output are a terminal; as printed events with
    /// --events (or --no-tui), as JSON lines with --json, or when not in a terminal.
    Demo(DemoArgs),
    /// Run PROGRAM behind the parent-death gate: arm, check the parent, then exec it.
    ///
    /// The expected parent comes from --parent or FOSTER_PARENT (e.g.
    /// `FOSTER_PARENT=$(foster identity $$) foster exec -- worker &`), the policy from the
    /// options or FOSTER_POLICY (default TERM:exit:5s). Exit statuses when PROGRAM does not
    /// start: 120 parent gone, 121 prctl failed, 122 cannot tell, 123 set-id target refused,
    /// 124 lifeline lost, 125 gate error, 126 not executable, 127 not found. A parent in
    /// another PID namespace is checked through the pidfd its launcher hands down in
    /// FOSTER_PARENT_PIDFD.
    Exec(ExecArgs),
    /// The live dashboard of a process tree: the whole system, a subtree, or a supervisor.
    ///
    /// Standalone it reads /proc; with --attach it shows a running supervisor's roles,
    /// generations, policies and events, and can signal, restart, stop and start its helpers.
    Top(TopArgs),
    /// Qualify the parent-death gate on this kernel: run the lifecycle cases.
    ///
    /// Each case runs in a disposable process tree; the result is the lifecycle matrix. Exit
    /// status 1 when any case fails, 2 for an unknown case name.
    Qualify(QualifyArgs),
    #[command(name = "__qualify-internal", hide = true)]
    QualifyInternal(QualifyInternalArgs),
    /// Be a container's init: run PROGRAM, reap every zombie, forward signals.
    ///
    /// As PID 1 (or, elsewhere, as a child subreaper) foster init starts PROGRAM in a process
    /// group of its own, reaps every orphan, forwards the signals it gets, and exits with
    /// PROGRAM's status.
    Init(InitArgs),
    /// Tell the supervisor this helper is ready, reloading or stopping, or its status text.
    ///
    /// systemd's notification protocol, as systemd-notify speaks it: one datagram to the
    /// socket NOTIFY_SOCKET names (foster run sets it for a helper with `ready = { notify =
    /// true }` or a `watchdog`), then a wait until the supervisor has handled it (BARRIER=1;
    /// --no-block skips it). For example `foster notify --ready --status "accepting
    /// connections"` in a helper's script, once it serves. Exit status 1 when it could not be
    /// sent or confirmed.
    Notify(NotifyArgs),
    /// Print the shell completion script for bash, zsh or fish.
    ///
    /// Elvish and PowerShell scripts too (`elvish`, `powershell`). For example `foster
    /// completions bash > /usr/share/bash-completion/completions/foster`, or `source <(foster
    /// completions bash)` in the current shell.
    Completions(CompletionsArgs),
    /// Print a man page (roff): foster's, or one subcommand's (foster-run, foster-ctl-status...).
    ///
    /// For example `foster man run > /usr/share/man/man1/foster-run.1`, or
    /// `foster man run | man -l -` to read it now.
    Man(ManArgs),
}

#[derive(Debug, Args)]
pub struct NotifyArgs {
    /// READY=1: the helper is ready (ready = { notify = true }).
    #[arg(long)]
    pub ready: bool,
    /// RELOADING=1: not ready again until the next READY=1.
    #[arg(long)]
    pub reloading: bool,
    /// STOPPING=1: the helper is shutting down.
    #[arg(long)]
    pub stopping: bool,
    /// STATUS=TEXT: the text foster ctl status and the dashboard show with the helper's state.
    #[arg(long, value_name = "TEXT")]
    pub status: Option<String>,
    /// MAINPID=PID: the helper's main process (a process of its tree).
    #[arg(long, value_name = "PID", value_parser = clap::value_parser!(i32).range(1..))]
    pub pid: Option<i32>,
    /// Do not wait for the supervisor to confirm it handled the notification. A sender that
    /// has ended, and been reaped by its parent, before the supervisor read its datagram
    /// cannot be told from a process outside the helper's tree, and is refused.
    #[arg(long)]
    pub no_block: bool,
    /// More KEY=VALUE assignments, sent as given (WATCHDOG=1, EXTEND_TIMEOUT_USEC=N, ...).
    #[arg(value_name = "KEY=VALUE")]
    pub assignments: Vec<String>,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell.
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// The subcommand whose page to print (`run` or `foster-run`; `ctl-status` for `foster ctl
    /// status`); without it, foster(1).
    pub subcommand: Option<String>,
}

#[derive(Debug, Args)]
pub struct QualifyArgs {
    /// Run only this case (repeatable); see --list.
    #[arg(long = "case", value_name = "NAME")]
    pub cases: Vec<String>,
    /// Run every case N times, to expose rare orderings; the summary shows counts.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub repeat: u32,
    /// Print JSON, one document: `{"version": 1, "cases": [...], "passed": N, "failed": N,
    /// "skipped": N}`, a record per case run.
    #[arg(long, conflicts_with = "markdown")]
    pub json: bool,
    /// Print the lifecycle matrix as a Markdown document.
    #[arg(long)]
    pub markdown: bool,
    /// List the cases and what each expects, then exit.
    #[arg(long)]
    pub list: bool,
}

#[derive(Debug, Args)]
pub struct QualifyInternalArgs {
    /// `case NAME` (run one case as its case root), `lifeline-helper` or `enter-helper`.
    pub role: String,
    pub name: Option<String>,
}

#[derive(Debug, Args)]
pub struct ExecArgs {
    /// The expected parent, PID:STARTTIME (default: FOSTER_PARENT).
    #[arg(long, value_name = "PID:STARTTIME")]
    pub parent: Option<Identity>,
    /// The whole policy chain, GEN[;GEN]... with GEN = SIGNAL[:REACTION[:GRACE]]
    /// (default: FOSTER_POLICY, else TERM:exit:5s).
    #[arg(long, value_name = "CHAIN")]
    pub policy: Option<crate::gate::policy::Policy>,
    /// This generation's parent-death signal (name or number; one whose default action ends
    /// a process).
    #[arg(long, value_parser = crate::process::signal::Sig::parse_ending)]
    pub signal: Option<crate::process::signal::Sig>,
    /// This generation's reaction: exit, notify or kill.
    #[arg(long)]
    pub reaction: Option<crate::gate::policy::Reaction>,
    /// This generation's grace period (500ms, 1.5s, 2m, or seconds alone; at least 1ms).
    #[arg(long, value_name = "DURATION", value_parser = crate::base::duration::parse)]
    pub grace: Option<std::time::Duration>,
    /// The policy chain PROGRAM's children get (exported as FOSTER_POLICY).
    #[arg(long, value_name = "CHAIN")]
    pub next: Option<crate::gate::policy::Policy>,
    /// Run a set-user-ID, set-group-ID or file-capability PROGRAM anyway (its exec clears the
    /// parent-death signal: it runs unsupervised).
    #[arg(long)]
    pub allow_setid: bool,
    /// Change to this uid after the gate (then re-read PR_GET_PDEATHSIG and re-arm). Alone,
    /// it also takes the user's primary group and group list from the user database; a uid
    /// without an entry there needs --gid.
    #[arg(long, value_parser = parse_uid)]
    pub uid: Option<u32>,
    /// Change to this gid after the gate; unless it is the --uid user's primary group, the
    /// supplementary group list is cleared.
    #[arg(long, value_parser = parse_gid)]
    pub gid: Option<u32>,
    /// Stay as a small parent: hold the lifeline, forward signals, deliver the policy's signal
    /// to PROGRAM on a parent loss, SIGKILL it after the grace.
    #[arg(long)]
    pub watch: bool,
    /// The program to run, and its arguments.
    #[arg(required = true, trailing_var_arg = true, value_name = "PROGRAM")]
    pub command: Vec<std::ffi::OsString>,
}

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

/// A `--uid`: a number from 0 to 4294967294 (4294967295 is `(uid_t)-1`, "no change").
fn parse_uid(s: &str) -> Result<u32, ArgError> {
    parse_id(s, "uid")
}

/// A `--gid`: a number from 0 to 4294967294 (4294967295 is `(gid_t)-1`, "no change").
fn parse_gid(s: &str) -> Result<u32, ArgError> {
    parse_id(s, "gid")
}

fn parse_id(s: &str, kind: &'static str) -> Result<u32, ArgError> {
    let n: u32 = s.parse().map_err(|_| ArgError::NotAnId {
        text: s.to_string(),
        kind,
    })?;
    if n == crate::gate::spawner::NO_CHANGE_ID {
        return Err(ArgError::NoChangeId { n, kind });
    }
    Ok(n)
}

/// `foster init [OPTIONS] -- PROGRAM [ARGS]...`
#[derive(Debug, Args)]
#[command(after_help = "\
Every option can also be given as an environment variable (shown in brackets).

Exit status: PROGRAM's exit code, or 128 + the number of the signal that ended it; 0 for a code \
listed with -e; 126 when PROGRAM cannot be executed, 127 when it is not found; 120 when -p finds \
foster's parent already gone; 1 when foster itself fails; 2 for a usage error (an unknown option \
before PROGRAM, an empty PROGRAM).

Signals forwarded: all but SIGCHLD, SIGKILL and SIGSTOP; the fault signals (SIGSEGV, SIGBUS, \
SIGFPE, SIGILL, SIGTRAP, SIGSYS) when a process sent them.")]
pub struct InitArgs {
    /// Forward signals to PROGRAM's whole process group instead of to PROGRAM alone (PROGRAM
    /// leads a process group of its own either way, as under tini).
    #[arg(short = 'g', long = "group", env = "FOSTER_KILL_PROCESS_GROUP",
          value_parser = clap::builder::BoolishValueParser::new())]
    pub group: bool,
    /// Send signal TO where FROM arrived (`TERM:QUIT`; `USR1:0` drops USR1). Repeatable;
    /// comma-separated in the environment variable.
    #[arg(
        short = 'r',
        long = "rewrite",
        value_name = "FROM:TO",
        env = "FOSTER_REWRITE",
        value_delimiter = ','
    )]
    pub rewrite: Vec<String>,
    /// Exit with 0 when PROGRAM's status is CODE (e.g. 143 for a JVM stopped by SIGTERM).
    /// Repeatable; comma-separated in the environment variable.
    #[arg(short = 'e', long = "expect", value_name = "CODE", env = "FOSTER_EXPECT",
          value_delimiter = ',', value_parser = clap::value_parser!(u8))]
    pub expect: Vec<u8>,
    /// When not PID 1, become a child subreaper (`auto` or `1`, the default) or not (`off` or
    /// `0`, which also silences the warning when it cannot).
    #[arg(long, value_name = "auto|1|off|0", env = "FOSTER_SUBREAPER", default_value = "auto",
          value_parser = parse_subreaper)]
    pub subreaper: crate::init::role::SubreaperWish,
    /// When PROGRAM ends, send SIGTERM to the rest of the tree, SIGKILL after the grace, and
    /// exit only when nothing is left.
    #[arg(short = 'w', long = "wait-all", env = "FOSTER_WAIT_ALL",
          value_parser = clap::builder::BoolishValueParser::new())]
    pub wait_all: bool,
    /// The grace of --wait-all between SIGTERM and SIGKILL (`500ms`, `5s`, `2m`, seconds).
    #[arg(long, value_name = "DURATION", env = "FOSTER_GRACE", default_value = "5s",
          value_parser = crate::base::duration::parse)]
    pub grace: std::time::Duration,
    /// Arm foster's own parent-death signal (checked against FOSTER_PARENT, or the parent
    /// foster started with): SIGNAL[:exit[:GRACE]]. When the parent dies PROGRAM gets the
    /// signal, and SIGKILL (its group with -g) if it is still there after GRACE (default 5s).
    #[arg(short = 'p', long = "pdeath-signal", value_name = "SIGNAL[:exit[:GRACE]]",
          env = "FOSTER_PDEATH_SIGNAL", value_parser = crate::init::parse_pdeath)]
    pub pdeath: Option<crate::gate::policy::Policy>,
    /// Give PROGRAM a parent-death policy chain (`TERM:exit:5s;KILL`, see man foster-exec):
    /// PROGRAM starts through the gate, armed and checked against foster. Default: unarmed.
    #[arg(long, value_name = "CHAIN", env = "FOSTER_INIT_POLICY")]
    pub policy: Option<crate::gate::policy::Policy>,
    /// Log level added to -v/-q: 1 decisions, 2 every reap and signal, -1 errors only.
    #[arg(
        long,
        value_name = "N",
        env = "FOSTER_VERBOSITY",
        default_value_t = 0,
        allow_negative_numbers = true
    )]
    pub verbosity: i8,
    /// PROGRAM and its arguments. An option of foster init's own comes before PROGRAM: an
    /// unknown one there is a usage error, never taken as PROGRAM (`--` ends the options; what
    /// follows PROGRAM is PROGRAM's).
    #[arg(required = true, trailing_var_arg = true, value_name = "PROGRAM")]
    pub command: Vec<std::ffi::OsString>,
}

fn parse_reload_signal(s: &str) -> Result<crate::process::signal::Sig, ArgError> {
    let sig = crate::process::signal::Sig::parse(s)?;
    if !crate::supervision::supervisor::signals::table().contains(sig.number()) {
        return Err(ArgError::CannotReload(sig));
    }
    Ok(sig)
}

fn parse_subreaper(s: &str) -> Result<crate::init::role::SubreaperWish, ArgError> {
    use crate::init::role::SubreaperWish;
    match s {
        "auto" | "1" => Ok(SubreaperWish::Auto),
        "off" | "0" => Ok(SubreaperWish::Off),
        _ => Err(ArgError::Subreaper(s.to_string())),
    }
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The configuration file (`-`: read it from standard input).
    pub config: std::path::PathBuf,
    /// Validate the configuration and exit: 0 when valid, 2 with every mistake when not. Besides
    /// the file itself, checks each helper's program (found, executable by its user), working
    /// directory, user and group on this system.
    #[arg(long)]
    pub check: bool,
    /// Require what is the default when it can be had: the tree in a new PID namespace with
    /// foster as its init, so that even a SIGKILL of foster ends every descendant; fail when no
    /// PID namespace can be created. Needs CAP_SYS_ADMIN (root), or else unprivileged user
    /// namespaces (sysctls user.max_user_namespaces > 0 and, where it exists,
    /// kernel.unprivileged_userns_clone=1; no AppArmor or seccomp rule against them; helpers
    /// then cannot set user or group), and a /proc that can be mounted (in a container: not
    /// partly masked).
    #[arg(long, conflicts_with = "no_contain")]
    pub contain: bool,
    /// Keep the tree in foster's own PID namespace (helpers see the host's pids; a SIGKILL of
    /// foster leaves running the descendants that armed no parent-death signal).
    #[arg(long)]
    pub no_contain: bool,
    /// Append every event (launch, exit, reparented, restart, signal) as a JSON line to FILE.
    /// SIGUSR1 reopens it (after an outside rotation).
    #[arg(long, value_name = "FILE")]
    pub events_log: Option<std::path::PathBuf>,
    /// Rotate the events log (FILE → FILE.1 …) before a write would take it past SIZE: 10MiB,
    /// 512KiB, 1G (powers of 1024), 10MB (powers of 1000); 0: never. Regular files only.
    #[arg(long, value_name = "SIZE", default_value = "10MiB", value_parser = crate::base::size::parse_size, requires = "events_log")]
    pub events_log_max_size: u64,
    /// How many rotated events logs to keep (FILE.1 the newest … FILE.N); 0: none, the file
    /// starts anew.
    #[arg(long, value_name = "N", default_value_t = crate::supervision::event::Rotation::DEFAULT_KEEP, value_parser = clap::value_parser!(u32).range(0..=i64::from(crate::supervision::event::Rotation::MAX_KEEP)), requires = "events_log")]
    pub events_log_keep: u32,
    /// The control socket (default $XDG_RUNTIME_DIR/foster/NAME.sock, /run/foster/NAME.sock
    /// for root, /tmp/foster-UID/NAME.sock otherwise; NAME from the configuration file).
    #[arg(long, value_name = "PATH", conflicts_with = "no_socket")]
    pub socket: Option<std::path::PathBuf>,
    /// Do not open a control socket.
    #[arg(long)]
    pub no_socket: bool,
    /// Run even when another `foster run` of the same configuration file (by its canonical
    /// path) is running: by default that is refused, naming the running one.
    #[arg(long)]
    pub allow_second_instance: bool,
    /// What goes on standard output for the helpers' captured lines: `text` (NAME | line,
    /// NAME ! line for standard error), `json` (one object per line), or `none` (only kept
    /// and logged).
    #[arg(long, value_name = "FORMAT", default_value = "text")]
    pub output: crate::supervision::output::Format,
    /// Reload the configuration file on this signal (`HUP`, as daemons do), the same as
    /// `foster ctl reload`, instead of what the signal does by default (SIGHUP: the orderly
    /// shutdown, as for a closed terminal). Any signal foster run handles (see man foster-run).
    #[arg(long, value_name = "SIGNAL", value_parser = parse_reload_signal)]
    pub reload_signal: Option<crate::process::signal::Sig>,
    /// Serve the supervisor's numbers in the Prometheus text format on http://ADDR/metrics
    /// (127.0.0.1:9464, [::]:9464; port 0: any free one). Off by default.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<std::net::SocketAddr>,
    /// Serve the control socket bound at --socket and inherited as this descriptor.
    #[arg(long, hide = true, requires = "socket", value_name = "FD")]
    pub socket_fd: Option<i32>,
}

#[derive(Debug, Args)]
pub struct CtlArgs {
    /// The supervisor's control socket (default: FOSTER_SOCKET, else the only listening socket
    /// in $XDG_RUNTIME_DIR/foster, /run/foster for root, or /tmp/foster-UID).
    #[arg(long, value_name = "PATH", global = true)]
    pub socket: Option<std::path::PathBuf>,
    /// Print the supervisor's JSON reply lines as they are; for logs, one
    /// JSON object per line, as foster run --output json writes them.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: crate::supervision::control::client::CtlCommand,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Print the events as sentences instead of opening the dashboard (the default when
    /// standard input or output is not a terminal).
    #[arg(long, visible_alias = "no-tui")]
    pub events: bool,
    /// Print the events as JSON lines instead of opening the dashboard.
    #[arg(long)]
    pub json: bool,
    /// Where the demo's control socket goes (default: demo.sock in the default socket
    /// directory, as for foster run; demo-PID.sock when another demo holds that name).
    #[arg(long, value_name = "PATH")]
    pub socket: Option<std::path::PathBuf>,
}

#[derive(Debug, Args)]
pub struct IdentityArgs {
    /// The process whose identity to print.
    pub pid: i32,
    /// Print `{"version": 1, "identity": {"pid": PID, "start_time": TICKS}}` instead of
    /// PID:STARTTIME.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
#[command(disable_help_flag = true)]
pub struct TreeArgs {
    /// Show each process's full command line (escaped) instead of its name.
    #[arg(short = 'a', long = "arguments")]
    pub arguments: bool,
    /// Show only this process and its descendants.
    #[arg(long, value_name = "PID", conflicts_with = "pid")]
    pub root: Option<i32>,
    /// The same as --root PID, as pstree takes it.
    #[arg(value_name = "PID")]
    pub pid: Option<i32>,
    /// Print JSON, one document: `{"version": 1, "roots": [...]}`, the root nodes, each with
    /// pid, ppid, identity (`{"pid": PID, "start_time": TICKS}`), state, comm, cmdline and
    /// children.
    #[arg(long, conflicts_with = "dot")]
    pub json: bool,
    /// Print a Graphviz digraph (render with `dot -Tsvg`), boxes styled by state (with
    /// --attach, by role too).
    #[arg(long)]
    pub dot: bool,
    /// pstree's own layout: names, the first child on its parent's line, identical siblings
    /// merged (3*[sleep]), no state letters; pids with -p.
    #[arg(long, conflicts_with_all = ["json", "dot"])]
    pub plain: bool,
    /// Do not merge identical sibling subtrees (--plain; -p and -a imply it, as in pstree).
    #[arg(short = 'c', long = "compact-not")]
    pub compact_not: bool,
    /// Show pids in --plain, in parentheses (foster's layout always shows them); implies -c.
    #[arg(short = 'p', long = "show-pids")]
    pub show_pids: bool,
    /// Show process group ids in parentheses after each name.
    #[arg(short = 'g', long = "show-pgids")]
    pub show_pgids: bool,
    /// Show the user in parentheses where a process's uid differs from its parent's.
    #[arg(short = 'u', long = "uid-changes")]
    pub uid_changes: bool,
    /// Show the ancestors of the --root process above it.
    #[arg(short = 's', long = "show-parents")]
    pub show_parents: bool,
    /// Show threads with their own names, {NAME} (foster's layout shows threads only then).
    #[arg(short = 't', long = "thread-names", conflicts_with = "hide_threads")]
    pub thread_names: bool,
    /// Hide threads (--plain shows them by default as {PROCESS-NAME}, merged as pstree).
    #[arg(short = 'T', long = "hide-threads")]
    pub hide_threads: bool,
    /// Highlight this foster process and its ancestors in bold (when TERM is set and not dumb).
    #[arg(short = 'h', long = "highlight-all", conflicts_with = "highlight_pid")]
    pub highlight_all: bool,
    /// Highlight this process and its ancestors in bold (when TERM is set and not dumb).
    #[arg(short = 'H', long = "highlight-pid", value_name = "PID")]
    pub highlight_pid: Option<i32>,
    /// Do not cut long lines (otherwise cut to COLUMNS or the terminal's width, marked with +;
    /// --plain also cuts at 132 columns when neither is known, as pstree).
    #[arg(short = 'l', long = "long")]
    pub long: bool,
    /// Siblings by pid in --plain (by name otherwise, as pstree; foster's layout is by pid).
    #[arg(short = 'n', long = "numeric-sort")]
    pub numeric_sort: bool,
    /// Draw --plain with ASCII characters (the default when standard output is not a UTF-8
    /// terminal).
    #[arg(short = 'A', long = "ascii", conflicts_with = "unicode")]
    pub ascii: bool,
    /// Draw --plain with Unicode box-drawing characters.
    #[arg(short = 'U', long = "unicode")]
    pub unicode: bool,
    /// Ask a running supervisor for the roles of its processes: foster's layout notes them
    /// ([supervisor], [helper NAME], [orphan of NAME]) and --dot styles them; without SOCKET,
    /// the one foster ctl would use.
    #[arg(long, value_name = "SOCKET", num_args = 0..=1)]
    pub attach: Option<Option<std::path::PathBuf>>,
    /// Print help.
    #[arg(long, action = clap::ArgAction::Help)]
    pub help: Option<bool>,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Keys: arrows or j/k move, Space collapses, / filters, s signals, \
                        ? shows them all, q quits."
)]
pub struct TopArgs {
    /// Show only this process and its descendants.
    #[arg(long, value_name = "PID", conflicts_with = "attach")]
    pub root: Option<i32>,
    /// Attach to a running supervisor's control socket (roles, generations, policies, events);
    /// without SOCKET, the one foster ctl would use: FOSTER_SOCKET, else the only listening
    /// socket in $XDG_RUNTIME_DIR/foster, /run/foster for root, or /tmp/foster-UID.
    #[arg(long, value_name = "SOCKET", num_args = 0..=1)]
    pub attach: Option<Option<std::path::PathBuf>>,
    /// Time between readings: 1s, 500ms, 2.5s, 1m (at least 100ms).
    #[arg(long, value_name = "DURATION", default_value = "1s",
          value_parser = crate::top::parse_interval)]
    pub interval: std::time::Duration,
    /// Start with processes at depth N and below collapsed (0 collapses the roots).
    #[arg(long, value_name = "N")]
    pub collapse_depth: Option<usize>,
}

/// What `foster tree`'s pstree options ask, with pstree's rules: `-p` and `-a` turn
/// compaction of processes off; the width is `COLUMNS`, else the terminal's, else (`--plain`
/// only, as pstree) 132 columns; `-l` never cuts.
fn tree_view(a: &TreeArgs) -> crate::process::tree::View {
    use std::io::IsTerminal;
    let tty = std::io::stdout().is_terminal();
    let width = if a.long {
        None
    } else {
        let columns = std::env::var("COLUMNS")
            .ok()
            .and_then(|c| c.parse::<usize>().ok())
            .filter(|&c| c > 0 && c < i32::MAX as usize);
        columns.or_else(terminal_width).or(a.plain.then_some(132))
    };
    let term = std::env::var("TERM").unwrap_or_default();
    let utf8 = ["LC_ALL", "LC_CTYPE", "LANG"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
        .is_some_and(|v| {
            let v = v.to_ascii_lowercase();
            v.contains("utf-8") || v.contains("utf8")
        });
    crate::process::tree::View {
        compact: !(a.compact_not || a.show_pids),
        pids: a.show_pids,
        pgids: a.show_pgids,
        uid_changes: a.uid_changes,
        arguments: a.arguments,
        threads: if a.hide_threads {
            crate::process::tree::Threads::Hide
        } else if a.thread_names {
            crate::process::tree::Threads::OwnName
        } else if a.plain {
            crate::process::tree::Threads::ProcessName
        } else {
            crate::process::tree::Threads::Hide
        },
        parents: a.show_parents,
        highlight: if a.highlight_all {
            Some(std::process::id() as i32)
        } else {
            a.highlight_pid
        },
        bold: (!term.is_empty() && term != "dumb").then_some(crate::process::tree::pstree::BOLD),
        width,
        by_pid: a.numeric_sort,
        plain: a.plain,
        symbols: if a.unicode || (!a.ascii && tty && utf8) {
            crate::process::tree::Symbols::Unicode
        } else {
            crate::process::tree::Symbols::Ascii
        },
    }
}

/// The roles of a running supervisor's processes, by identity as seen from here.
fn tree_roles(given: Option<&std::path::Path>) -> Result<crate::process::tree::Roles, CliError> {
    use crate::supervision::control::client::{Connection, resolve_socket};
    let path = resolve_socket(given, "--attach SOCKET")?;
    let mut conn = Connection::connect(&path)?;
    let mut map = conn.pid_map();
    let mut status = conn.status()?;
    map.status(&mut status);
    Ok(status
        .processes
        .into_iter()
        .filter(|p| p.pid > 0)
        .map(|p| {
            let id = crate::process::identity::Identity {
                pid: p.pid,
                start_time: p.start_time,
            };
            let mark = crate::process::tree::RoleMark {
                role: p.role,
                helper: p.helper,
            };
            (id, mark)
        })
        .collect())
}

/// The error type of a subcommand: printed as `foster: error: ...`, exit status 1 (2 for a
/// [`UsageError`]).
pub type CliError = Box<dyn std::error::Error + Send + Sync>;

/// A usage error found after parsing (a value no parser could check alone): exit status 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

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

fn dispatch(command: Command) -> Result<ExitCode, CliError> {
    match command {
        Command::Identity(a) => {
            let id = Identity::of(a.pid)?;
            if a.json {
                // A struct, not json!'s map, for the order docs/json.md shows: version first.
                #[derive(serde::Serialize)]
                struct Doc {
                    version: u32,
                    identity: Identity,
                }
                let doc = Doc {
                    version: crate::base::json::VERSION,
                    identity: id,
                };
                let text = serde_json::to_string(&doc)?;
                print_out(&format!("{text}\n"));
            } else {
                print_out(&format!("{id}\n"));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Run(a) => run(a),
        Command::Ctl(a) => ctl(a),
        Command::Demo(a) => {
            use std::io::IsTerminal;
            let terminal = std::io::stdout().is_terminal() && std::io::stdin().is_terminal();
            if terminal && !a.events && !a.json {
                return crate::top::demo::run(a.socket);
            }
            let code = crate::supervision::demo::run(&crate::supervision::demo::DemoOptions {
                json: a.json,
                socket: a.socket,
                log_to_file: false,
            })?;
            Ok(ExitCode::from(code.clamp(0, 255) as u8))
        }
        Command::Exec(a) => Ok(exec(a)),
        Command::Qualify(a) => qualify(a),
        Command::QualifyInternal(a) => Ok(qualify_internal(a)),
        Command::Init(a) => Ok(init(a, 0)),
        Command::Notify(a) => {
            use crate::supervision::readiness::notify;
            let mut what = Vec::new();
            for (on, line) in [
                (a.ready, "READY=1"),
                (a.reloading, "RELOADING=1"),
                (a.stopping, "STOPPING=1"),
            ] {
                if on {
                    what.push(line.to_string());
                }
            }
            what.extend(a.status.map(|t| format!("STATUS={t}")));
            what.extend(a.pid.map(|p| format!("MAINPID={p}")));
            what.extend(a.assignments);
            let text = notify::notification(&what)?;
            let to = std::env::var_os(notify::ENV_NOTIFY_SOCKET);
            let barrier = (!a.no_block).then_some(notify::BARRIER_TIMEOUT);
            notify::send(to.as_deref(), &text, barrier)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Completions(a) => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            let mut out = Vec::new();
            clap_complete::generate(a.shell, &mut cmd, "foster", &mut out);
            print_out(&String::from_utf8_lossy(&out));
            Ok(ExitCode::SUCCESS)
        }
        Command::Man(a) => {
            let page = man_page(a.subcommand.as_deref())?;
            print_out(&page);
            Ok(ExitCode::SUCCESS)
        }
        Command::Tree(a) => {
            let format = match (a.json, a.dot) {
                (true, _) => crate::process::tree::Format::Json,
                (_, true) => crate::process::tree::Format::Dot,
                _ => crate::process::tree::Format::Text,
            };
            let req = crate::process::tree::TreeRequest {
                arguments: a.arguments,
                root: a.root.or(a.pid),
                format,
                view: tree_view(&a),
                roles: match &a.attach {
                    Some(given) => tree_roles(given.as_deref())?,
                    None => Default::default(),
                },
            };
            crate::process::tree::run(&req, &mut std::io::stdout().lock())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Top(a) => crate::top::run(crate::top::TopOptions {
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

fn run(a: RunArgs) -> Result<ExitCode, CliError> {
    use crate::supervision::config::{Config, Scope};
    let stdin = a.config.as_os_str() == "-";
    // --check also checks the file against this system (programs, directories, users).
    let scope = if a.check { Scope::System } else { Scope::File };
    let loaded = if stdin {
        let name = std::path::Path::new("<stdin>");
        Config::read_with(name, std::io::stdin().lock(), scope)
    } else {
        Config::load_with(&a.config, scope)
    };
    let config = match loaded {
        Ok(c) => c,
        Err(e) => {
            // Every mistake of the file, one `foster: error:` line each.
            for line in e.lines() {
                report(line);
            }
            return Ok(ExitCode::from(2));
        }
    };
    for w in &config.warnings {
        tracing::warn!("{w}");
    }
    if a.check {
        print_out(&format!(
            "{}: valid, {} helper{}\n",
            a.config.display(),
            config.helpers.len(),
            if config.helpers.len() == 1 { "" } else { "s" }
        ));
        return Ok(ExitCode::SUCCESS);
    }
    let options = crate::supervision::supervisor::Options {
        contain: match (a.contain, a.no_contain) {
            (true, _) => crate::supervision::contain::Contain::Required,
            (_, true) => crate::supervision::contain::Contain::Off,
            _ => crate::supervision::contain::Contain::Auto,
        },
        events_log: a.events_log,
        events_log_rotation: crate::supervision::event::Rotation {
            max_size: a.events_log_max_size,
            keep: a.events_log_keep,
        },
        socket: match (a.socket, a.no_socket) {
            (Some(path), _) if a.socket_fd.is_some() => {
                crate::supervision::supervisor::SocketOption::Inherited {
                    fd: a.socket_fd.unwrap_or_default(),
                    path,
                }
            }
            (Some(p), _) => crate::supervision::supervisor::SocketOption::Path(p),
            (None, true) => crate::supervision::supervisor::SocketOption::None,
            (None, false) => crate::supervision::supervisor::SocketOption::Default,
        },
        config_path: (!stdin).then(|| a.config.clone()),
        allow_second_instance: a.allow_second_instance,
        relay: a.output,
        reload_signal: a.reload_signal,
        metrics: a.metrics,
    };
    let code = crate::supervision::supervisor::run(config, options)?;
    Ok(ExitCode::from(code.clamp(0, 255) as u8))
}

fn ctl(a: CtlArgs) -> Result<ExitCode, CliError> {
    use crate::supervision::control::client::{self, BARE_STOP, CtlCommand, View};
    if let CtlCommand::Stop { helper: None } = a.command {
        return Err(UsageError(BARE_STOP.into()).into());
    }
    let view = View {
        width: terminal_width(),
        colour: crate::supervision::output::colour_for(&std::io::stdout()),
    };
    client::ctl(
        a.socket.as_deref(),
        a.json,
        &a.command,
        view,
        &mut std::io::stdout().lock(),
    )?;
    Ok(ExitCode::SUCCESS)
}

fn exec(a: ExecArgs) -> ExitCode {
    let mut command = a.command.into_iter();
    let program = command.next().expect("clap requires PROGRAM").into();
    let o = crate::gate::chainload::ExecOptions {
        parent: a.parent,
        policy: a.policy,
        signal: a.signal.map(crate::process::signal::Sig::number),
        reaction: a.reaction,
        grace: a.grace,
        next: a.next,
        allow_setid: a.allow_setid,
        gid: a.gid,
        uid: a.uid,
        watch: a.watch,
        program,
        args: command.collect(),
    };
    match crate::gate::chainload::run(&o) {
        Ok(status) => ExitCode::from(status.clamp(0, 255) as u8),
        Err(e) => {
            report(&e);
            ExitCode::from(e.status.clamp(0, 255) as u8)
        }
    }
}

/// The names of the pages `foster man NAME` prints besides foster(1), without `foster-`: each
/// visible subcommand (`run`) and each subcommand of one (`ctl-status`), the pages the
/// SUBCOMMANDS sections of foster(1) and foster-ctl(1) refer to.
fn man_pages(cmd: &clap::Command) -> Vec<(String, clap::Command)> {
    let visible = |c: &&clap::Command| !c.is_hide_set() && c.get_name() != "help";
    let mut pages = Vec::new();
    for sub in cmd.get_subcommands().filter(visible) {
        pages.push((sub.get_name().to_string(), sub.clone()));
        for nested in sub.get_subcommands().filter(visible) {
            let name = format!("{}-{}", sub.get_name(), nested.get_name());
            pages.push((name, nested.clone()));
        }
    }
    pages
}

/// The roff man page of foster (`None`) or of one of its subcommands (`run` or `foster-run`:
/// the page foster-run(1), its synopsis `foster run ...`; `ctl-status`: foster-ctl-status(1)),
/// generated from these definitions.
fn man_page(subcommand: Option<&str>) -> Result<String, CliError> {
    // No `help` subcommand in the pages: it has no page of its own to refer to.
    let mut cmd = <Cli as clap::CommandFactory>::command()
        .disable_help_subcommand(true)
        .mut_subcommands(|c| c.disable_help_subcommand(true));
    // Built, each subcommand has the global options and its `foster SUB` binary name.
    cmd.build();
    let page = match subcommand {
        None => cmd,
        Some(name) => {
            let name = name.strip_prefix("foster-").unwrap_or(name);
            let pages = man_pages(&cmd);
            let Some((_, sub)) = pages.iter().find(|(n, _)| n == name) else {
                let known: Vec<&str> = pages.iter().map(|(n, _)| n.as_str()).collect();
                return Err(UsageError(format!(
                    "no man page for {:?}; the pages are: {}",
                    crate::base::sanitize::escape(name.as_bytes()),
                    known.join(", ")
                ))
                .into());
            };
            sub.clone().name(format!("foster-{name}"))
        }
    };
    let mut out = Vec::new();
    clap_mangen::Man::new(page).render(&mut out)?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// The width of the terminal standard output is, or None when it is not a terminal (output
/// into a pipe or a file is never cut).
fn terminal_width() -> Option<usize> {
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() {
        return None;
    }
    // SAFETY: winsize is four integers: all zeros is a valid value.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ fills `ws`, a winsize, for a terminal descriptor.
    let r = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) };
    Some(if r == 0 && ws.ws_col > 0 {
        usize::from(ws.ws_col)
    } else {
        80
    })
}

/// Writes `text` to standard output; a reader that went away (`foster qualify --list | head`)
/// ends the output quietly instead of the panic of `print!`.
fn print_out(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}

fn qualify(a: QualifyArgs) -> Result<ExitCode, CliError> {
    use crate::qualify::{self, cases, render};
    if a.list {
        let mut text = String::new();
        for c in cases::CASES {
            let root = c
                .needs_root
                .map(|r| format!(" [root: {r}]"))
                .unwrap_or_default();
            text.push_str(&format!(
                "{:28} {}\n{:28} expect: {}{root}\n",
                c.name, c.death, "", c.expect
            ));
        }
        print_out(&text);
        return Ok(ExitCode::SUCCESS);
    }
    for n in &a.cases {
        if cases::find(n).is_none() {
            return Err(UsageError(format!(
                "unknown case {n:?}; known cases: {}",
                qualify::case_names().join(", ")
            ))
            .into());
        }
    }
    let h = qualify::Harness::current()?;
    let records = qualify::run_cases(&h, &a.cases, a.repeat);
    let text = if a.json {
        render::json(&records)
    } else if a.markdown {
        render::markdown(&records)
    } else {
        render::table(&records)
    };
    print_out(&text);
    if !text.ends_with('\n') {
        print_out("\n");
    }
    let (_, failed, _) = render::totals(&records);
    Ok(if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn qualify_internal(a: QualifyInternalArgs) -> ExitCode {
    use crate::qualify::{cases, harness};
    let case = a.name.as_deref().and_then(cases::find);
    match (a.role.as_str(), a.name, case) {
        ("case", Some(_), Some(def)) => {
            let rec = harness::run_in_root(def);
            println!("{}", serde_json::to_string(&rec).unwrap_or_default());
            ExitCode::SUCCESS
        }
        ("lifeline-helper", None, _) => {
            ExitCode::from(cases::lifeline_helper().clamp(0, 255) as u8)
        }
        ("enter-helper", None, _) => ExitCode::from(cases::enter_helper().clamp(0, 255) as u8),
        _ => {
            report("__qualify-internal: unknown role");
            ExitCode::from(2)
        }
    }
}

fn init(a: InitArgs, verbosity: i8) -> ExitCode {
    let rewrites = match crate::init::signals::Rewrites::parse(&a.rewrite) {
        Ok(r) => r,
        Err(e) => {
            report(e);
            return ExitCode::from(2);
        }
    };
    let mut command = a.command.into_iter();
    let program = command.next().expect("clap requires PROGRAM");
    if program.is_empty() {
        // Joined to a PATH directory, an empty name would name the directory itself.
        report("empty program name");
        return ExitCode::from(2);
    }
    let mut opts = crate::init::Options::new(program, command.collect());
    opts.group = a.group;
    opts.rewrites = rewrites;
    opts.expect = a.expect.into_iter().map(i32::from).collect();
    opts.subreaper = a.subreaper;
    opts.wait_all = a.wait_all;
    opts.grace = a.grace;
    opts.pdeath = a.pdeath;
    opts.policy = a.policy;
    opts.verbosity = verbosity.saturating_add(a.verbosity);
    ExitCode::from(crate::init::run(&opts) as u8)
}
