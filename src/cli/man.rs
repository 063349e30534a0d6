//! The man pages that clap does not make: foster.toml(5), the configuration of `foster run`
//! (every key, its default, an example), and the synopsis of a subcommand's page with the
//! placeholders of its values (`[--socket PATH]`). Uses clap's definitions only.

/// The names `foster man` takes for foster.toml(5).
pub const CONFIG_PAGE_NAMES: [&str; 3] = ["foster.toml", "toml", "config"];

/// `cmd`'s synopsis as `foster run [--check] [--socket PATH] ... CONFIG`: each visible option
/// with the placeholder of its value, then the positionals.
pub fn synopsis(cmd: &clap::Command) -> String {
    let name = cmd.get_bin_name().unwrap_or_else(|| cmd.get_name());
    let mut words = vec![name.to_string()];
    for a in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
        if a.is_positional() {
            continue;
        }
        let flag = match (a.get_short(), a.get_long()) {
            (Some(s), Some(l)) => format!("-{s}|--{l}"),
            (None, Some(l)) => format!("--{l}"),
            (Some(s), None) => format!("-{s}"),
            (None, None) => continue,
        };
        let value = a
            .get_value_names()
            .filter(|_| a.get_action().takes_values())
            .map(|v| {
                format!(
                    " {}",
                    v.iter().map(|n| n.as_str()).collect::<Vec<_>>().join(" ")
                )
            })
            .unwrap_or_default();
        let more = if matches!(a.get_action(), clap::ArgAction::Count) {
            "..."
        } else {
            ""
        };
        words.push(format!("[{flag}{value}]{more}"));
    }
    for a in cmd.get_positionals().filter(|a| !a.is_hide_set()) {
        let names = a
            .get_value_names()
            .map(|v| {
                v.iter()
                    .map(|n| n.to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_else(|| a.get_id().as_str().to_uppercase());
        let many = if a.get_num_args().is_some_and(|n| n.max_values() > 1) {
            "..."
        } else {
            ""
        };
        words.push(if a.is_required_set() {
            format!("{names}{many}")
        } else {
            format!("[{names}]{many}")
        });
    }
    words.join(" ")
}

/// foster.toml(5), in roff.
pub fn config_page() -> String {
    let version = env!("CARGO_PKG_VERSION");
    format!(
        ".TH foster.toml 5 \"foster {version}\" \"\" \"File Formats\"\n{}",
        CONFIG_PAGE
    )
}

/// The body of foster.toml(5) (after its title line).
const CONFIG_PAGE: &str = r#".SH NAME
foster.toml \- the configuration of foster run: the helpers it supervises
.SH SYNOPSIS
.B foster run
[\fIOPTION\fR]... \fICONFIG.toml\fR
.SH DESCRIPTION
A TOML file of at most 16 MiB, UTF\-8. It has an optional \fB[supervisor]\fR table and one
\fB[[helper]]\fR table per helper, launched in their dependency order (the file's order among
equals). An unknown key is an error, so a misspelt key never falls back to a default.
\fBfoster run \-\-check\fR \fIFILE\fR reads the file as \fBfoster run\fR does and reports every
mistake, each as \fIFILE\fR:\fILINE\fR:\fICOLUMN\fR with the helper, the key and what was
expected (exit status 2); nothing is started.
.PP
Durations are strings with a unit: "250ms", "5s", "1.5s", "2m", "1h" (a number alone in a
string is seconds; a bare TOML number is refused); the shortest is "1ms". Signals are names
with or without SIG (TERM, SIGHUP, RTMIN+3) or numbers. Sizes are "10MB", "512KiB" or bytes
as an integer.
.SH [supervisor]
.TP
\fBorphan_policy\fR = { signal, reaction, grace }
What adopted processes foster cannot trace to a helper get: the fields of a generation
(below). Default: signal TERM, reaction exit, grace "5s".
.TP
\fBrescan\fR = \fIDURATION\fR
Where the kernel does not announce births in the tree, read the tree this often as well.
Default: none (foster wakes up only when something happens).
.SH [[helper]]
.TP
\fBname\fR = \fISTRING\fR
Unique, non\-empty, printable. Required.
.TP
\fBcommand\fR = [\fIPROGRAM\fR, \fIARG\fR...] | \fIPROGRAM\fR | { shell = \fILINE\fR }
The program and its arguments as execve gets them; a bare string is a program alone (one
with white space is refused: write a list); { shell = "LINE" } runs /bin/sh \-c LINE. A
program without / is looked up in foster's PATH at each launch. Required.
.TP
\fBenv\fR = { \fINAME\fR = \fIVALUE\fR, ... }
Variables added to foster's environment; they override env_file's. Default: none.
.TP
\fBenv_file\fR = \fIPATH\fR | [\fIPATH\fR, ...]
Files of KEY=VALUE lines, read at each launch in order (as systemd's EnvironmentFile= and
docker's \-\-env\-file): blank lines and lines starting with # or ; are skipped, "export " is
allowed, a value may be in single quotes (as it is) or double quotes (\e" \e\e \e$ \en
unescaped). At most 1 MiB; the file must be foster's user's or root's, writable by no one
else, in a directory others may not write to unless sticky. A bad line fails the launch
(exit status 125) naming FILE:LINE. Default: none.
.TP
\fBcwd\fR = \fIPATH\fR
Working directory. Default: foster's.
.TP
\fBuser\fR = \fINAME\fR | \fIUID\fR, \fBgroup\fR = \fINAME\fR | \fIGID\fR
Credentials (0 to 4294967294). A user alone gets its primary group and group list.
Default: foster's.
.TP
\fBautostart\fR = \fIBOOL\fR
false: declared, shown stopped, launched only by \fBfoster ctl start\fR \fINAME\fR (nor by
a reload that adds it); the helpers that depend on it wait. Default: true.
.TP
\fBrestart\fR = "never" | "on\-failure" | "always"
When it is launched again after it ends (on\-failure: a non\-zero exit or a signal).
Default: "never".
.TP
\fBbackoff\fR = { initial, max, limit, reset_after }
The delay before a restart starts at \fBinitial\fR and doubles per restart in a row up to
\fBmax\fR; after \fBlimit\fR restarts in a row foster gives up (0: never restart;
"unlimited": never give up); a run of at least \fBreset_after\fR forgets earlier failures.
Default: "1s", "30s", 5, "60s".
.TP
\fBstop_signal\fR = \fISIGNAL\fR
Sent to stop it (not STOP, TSTP, TTIN, TTOU). Default: TERM.
.TP
\fBstop_grace\fR = \fIDURATION\fR
Time to stop before SIGKILL of its whole tree. Default: "10s".
.TP
\fBsubreaper\fR = \fIBOOL\fR
It is itself a subreaper (a nested foster run is recognised without it). Default: false.
.TP
\fBoutput\fR = "capture" | "inherit" | "null"
Where its standard output and error go: kept and relayed with its name, foster's own, or
nowhere. Default: "capture".
.TP
\fBlog\fR = { file, max_size, keep }
Its captured lines in a file of its own, rotated by size (FILE.1 ... FILE.N); needs output =
"capture". Default: none (max_size "10MiB", keep 5).
.TP
\fBring\fR = { lines, bytes }
How many of its last lines are kept in memory for foster ctl logs and the dashboard.
Default: 1000 lines, "1MiB".
.TP
\fBdepends_on\fR = { \fINAME\fR = "started" | "ready" | "completed", ... } | [\fINAME\fR, ...]
The helpers it waits for before each launch (a list: each "started"). Default: none.
.TP
\fBready\fR = { notify | fd | exec | tcp | log, timeout, interval }
When it counts as ready: { notify = true }, { fd = \fIN\fR }, { exec = [...] },
{ tcp = "IP:PORT" } or { log = "REGEX" }. Default: ready once launched (timeout "90s",
interval "1s").
.TP
\fBhealth\fR = { exec = [...] | tcp = "IP:PORT", interval, timeout, failures }
A liveness check from readiness on. Default: none (interval "10s", timeout "5s", failures 3).
.TP
\fBwatchdog\fR = \fIDURATION\fR
Without WATCHDOG=1 on the notify socket for this long, the helper has failed. Default: none.
.SH [[helper.generation]]
One table per generation, at most 32: the first is the helper, the second its children, and
so on; the last applies to all deeper ones. Default: one generation TERM, exit, "5s".
.TP
\fBsignal\fR = \fISIGNAL\fR
Its parent\-death signal: one whose default action ends a process. Default: TERM, or KILL
for reaction kill.
.TP
\fBreaction\fR = "exit" | "notify" | "kill"
What the process does with it. Default: exit, or kill for signal KILL.
.TP
\fBgrace\fR = \fIDURATION\fR
How long it may take before SIGKILL. Default: "5s".
.SH EXAMPLE
.nf
[supervisor]
orphan_policy = { signal = "TERM", grace = "2s" }

[[helper]]
name = "db"
command = ["/usr/bin/redis\-server", "\-\-port", "6380"]
ready = { tcp = "127.0.0.1:6380", timeout = "10s" }
restart = "always"
backoff = { initial = "500ms", max = "10s", limit = "unlimited" }

[[helper]]
name = "web"
command = { shell = "exec python3 \-m http.server 8000" }
env_file = "/etc/web/web.env"
env = { PYTHONUNBUFFERED = "1" }
depends_on = { db = "ready" }
restart = "on\-failure"
stop_grace = "5s"

[[helper]]
name = "report"
command = ["/usr/local/bin/report"]
autostart = false

[[helper.generation]]
signal = "TERM"
grace = "2s"
.fi
.SH SEE ALSO
\fBfoster\-run\fR(1), \fBfoster\-ctl\fR(1), \fBsystemd.service\fR(5)
"#;
