//! The clap definitions: the command line, its subcommands and their options, and the parsers
//! clap hands option values to.

use clap::{Args, Parser, Subcommand};

use crate::process::identity::Identity;

use super::error::ArgError;

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
    /// The supervisor is the one of --socket, else of --config FILE, else FOSTER_SOCKET, else
    /// the supervisor of the configuration file (*.toml) of the current directory. Nothing else
    /// is guessed, not even the only socket listening: that may be another configuration's.
    /// Exit status 1 for an error reply or when no supervisor answers.
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
    /// completions bash)` in the current shell. For `foster ctl`'s helper names and signals
    /// from the running supervisor, load `source <(COMPLETE=bash foster)` instead.
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
    #[arg(
        long,
        value_name = "SIZE",
        default_value = "10MiB",
        value_parser = crate::base::size::parse_size,
        requires = "events_log"
    )]
    pub events_log_max_size: u64,
    /// How many rotated events logs to keep (FILE.1 the newest … FILE.N); 0: none, the file
    /// starts anew.
    #[arg(
        long,
        value_name = "N",
        default_value_t = crate::supervision::event::Rotation::DEFAULT_KEEP,
        value_parser = clap::value_parser!(u32)
            .range(0..=i64::from(crate::supervision::event::Rotation::MAX_KEEP)),
        requires = "events_log"
    )]
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
    /// The supervisor's control socket (default: that of --config, else FOSTER_SOCKET, else
    /// that of the supervisor of the configuration file (*.toml) of the current directory;
    /// never a guess among the sockets of $XDG_RUNTIME_DIR/foster, /run/foster for root, or
    /// /tmp/foster-UID, which the error lists).
    #[arg(long, value_name = "PATH", global = true)]
    pub socket: Option<std::path::PathBuf>,
    /// Talk to the supervisor that foster run started on this configuration file, found
    /// through the lock it holds of the file (without --config or --socket: FOSTER_SOCKET,
    /// else the supervisor of the one such file in the current directory).
    #[arg(long, value_name = "FILE", global = true, conflicts_with = "socket")]
    pub config: Option<std::path::PathBuf>,
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
    after_help = "Keys: arrows or j/k move, - + collapse, / filters, s signals, \
                        ? shows them all, q quits."
)]
pub struct TopArgs {
    /// Show only this process and its descendants.
    #[arg(long, value_name = "PID", conflicts_with = "attach")]
    pub root: Option<i32>,
    /// Attach to a running supervisor's control socket (roles, generations, policies, events);
    /// without SOCKET, the one foster ctl would use without --socket or --config:
    /// FOSTER_SOCKET, else the supervisor of the configuration file of the current directory.
    #[arg(long, value_name = "SOCKET", num_args = 0..=1)]
    pub attach: Option<Option<std::path::PathBuf>>,
    /// Time between readings: 1s, 500ms, 2.5s, 1m (at least 100ms).
    #[arg(long, value_name = "DURATION", default_value = "1s",
          value_parser = crate::top::parse_interval)]
    pub interval: std::time::Duration,
    /// Start with processes at depth N and below collapsed (0 collapses the roots).
    #[arg(long, value_name = "N")]
    pub collapse_depth: Option<usize>,
    /// The keys: foster's, or htop's where they differ (k signals, / searches, \ filters,
    /// e shows the details).
    #[arg(long, value_name = "KEYMAP", value_enum, default_value = "foster")]
    pub keys: crate::top::app::Keymap,
}
