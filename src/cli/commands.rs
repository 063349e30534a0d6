//! One entry point per subcommand, from its parsed arguments to its exit status; each
//! subcommand's work lives in its domain module.

use std::process::ExitCode;

use crate::base::logging::report;
use crate::process::identity::Identity;

use super::args::*;
use super::error::{CliError, UsageError};

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

// Long: the options of foster run, mapped one by one.
pub fn run(a: RunArgs) -> Result<ExitCode, CliError> {
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

pub fn ctl(a: CtlArgs) -> Result<ExitCode, CliError> {
    use crate::supervision::control::client::{BARE_STOP, CtlCommand, View};
    if let CtlCommand::Stop { helpers } = &a.command
        && helpers.is_empty()
    {
        return Err(UsageError(BARE_STOP.into()).into());
    }
    let view = View {
        width: terminal_width(),
        colour: crate::supervision::output::colour_for(&std::io::stdout()),
    };
    crate::supervision::control::verbs::ctl(
        (a.socket.as_deref(), a.config.as_deref()),
        a.json,
        &a.command,
        view,
        &mut std::io::stdout().lock(),
    )?;
    Ok(ExitCode::SUCCESS)
}

pub fn exec(a: ExecArgs) -> ExitCode {
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
    if subcommand.is_some_and(|n| super::man::CONFIG_PAGE_NAMES.contains(&n)) {
        return Ok(super::man::config_page());
    }
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
                    "no man page for {:?}; the pages are: {}, and foster.toml (section 5)",
                    crate::base::sanitize::escape(name.as_bytes()),
                    known.join(", ")
                ))
                .into());
            };
            // Its synopsis with the placeholders of values, which clap_mangen leaves out.
            let page = sub.clone().name(format!("foster-{name}"));
            if sub.has_subcommands() {
                page
            } else {
                page.override_usage(super::man::synopsis(sub))
            }
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

pub fn qualify(a: QualifyArgs) -> Result<ExitCode, CliError> {
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

pub fn qualify_internal(a: QualifyInternalArgs) -> ExitCode {
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

pub fn init(a: InitArgs, verbosity: i8) -> ExitCode {
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

/// `foster identity PID`: the identity as text, or JSON.
pub fn identity(a: IdentityArgs) -> Result<ExitCode, CliError> {
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

/// `foster demo`: the dashboard's demo on a terminal, else the supervisor's.
pub fn demo(a: DemoArgs) -> Result<ExitCode, CliError> {
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

/// `foster notify`: one notification to `NOTIFY_SOCKET`.
pub fn notify(a: NotifyArgs) -> Result<ExitCode, CliError> {
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

/// `foster completions SHELL`.
pub fn completions(a: CompletionsArgs) -> Result<ExitCode, CliError> {
    let mut cmd = <Cli as clap::CommandFactory>::command();
    let mut out = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, "foster", &mut out);
    print_out(&String::from_utf8_lossy(&out));
    Ok(ExitCode::SUCCESS)
}

/// `foster man [SUBCOMMAND]`.
pub fn man(a: ManArgs) -> Result<ExitCode, CliError> {
    let page = man_page(a.subcommand.as_deref())?;
    print_out(&page);
    Ok(ExitCode::SUCCESS)
}

/// `foster tree`.
pub fn tree(a: TreeArgs) -> Result<ExitCode, CliError> {
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
