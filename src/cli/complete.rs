//! Completion that asks the running supervisor: `COMPLETE=bash foster` prints a script that
//! calls foster back at each TAB (clap_complete's dynamic completion), and that call answers.
//!
//! Owns [`answer_if_asked`], run first by [`super::main`], and [`command`]: foster's command
//! line with completers on `foster ctl`'s HELPER arguments (the helpers of the supervisor that
//! `foster ctl` would talk to, found as it finds it) and on `ctl signal`'s SIGNAL (the names of
//! [`crate::process::signal::Sig`]). Asking is bounded by [`ASK_LIMIT`]; a supervisor that
//! cannot be reached gives no names, and nothing is printed to standard error.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::time::Duration;

use clap::CommandFactory as _;
use clap_complete::engine::{ArgValueCandidates, ArgValueCompleter, CompletionCandidate};

use crate::process::signal::Sig;
use crate::supervision::control::client::{ClientError, Connection};
use crate::supervision::control::verbs::{ALL, socket_path};

/// The environment variable that asks foster for completions, as clap_complete names it.
pub const VAR: &str = "COMPLETE";

/// The longest completion waits for a supervisor's helpers (a hung one gives none).
pub const ASK_LIMIT: Duration = Duration::from_millis(1000);

/// `foster ctl`'s verbs whose argument `arg` takes helper names, and whether `all` is one.
const HELPER_ARGS: &[(&str, &str, bool)] = &[
    ("status", "helpers", true),
    ("restart", "helpers", true),
    ("start", "helpers", true),
    ("stop", "helpers", true),
    ("wait", "helpers", true),
    ("logs", "helpers", false),
    ("pid", "helper", false),
    ("history", "helper", false),
    ("signal", "target", false),
];

/// When [`VAR`] names a shell clap_complete knows (`bash`, `zsh`, `fish`, `elvish`,
/// `powershell`, or a path to one), answers the completion request or prints the shell's
/// registration script, and exits. Any other value (unset, empty, `0`, `1`) is left alone and
/// foster runs as usual.
pub fn answer_if_asked() {
    let Some(value) = std::env::var_os(VAR) else {
        return;
    };
    let shell = PathBuf::from(value);
    let known = shell.file_stem().and_then(OsStr::to_str).is_some_and(|s| {
        clap_complete::env::Shells::builtins()
            .completer(s)
            .is_some()
    });
    if known {
        clap_complete::CompleteEnv::with_factory(command)
            .var(VAR)
            .complete();
    }
}

/// foster's command line with the completers of `foster ctl`'s helpers and signals.
pub fn command() -> clap::Command {
    super::Cli::command().mut_subcommand("ctl", |mut ctl| {
        for &(verb, arg, all) in HELPER_ARGS {
            ctl = ctl.mut_subcommand(verb, |v| {
                v.mut_arg(arg, |a| {
                    a.add(ArgValueCandidates::new(move || helpers(all)))
                })
            });
        }
        ctl.mut_subcommand("signal", |v| {
            v.mut_arg("signal", |a| a.add(ArgValueCompleter::new(signals)))
        })
    })
}

/// The helpers of the supervisor `foster ctl` would talk to, each with its state; `all` too
/// when `all` stands for every helper. None when no supervisor answers within [`ASK_LIMIT`].
fn helpers(all: bool) -> Vec<CompletionCandidate> {
    let (socket, config) = locations(std::env::args_os());
    let (tx, rx) = std::sync::mpsc::channel();
    // On a thread of its own, so that a supervisor that never answers costs ASK_LIMIT only.
    std::thread::spawn(move || {
        let _ = tx.send(ask(socket, config).unwrap_or_default());
    });
    let mut found: Vec<CompletionCandidate> = rx
        .recv_timeout(ASK_LIMIT)
        .unwrap_or_default()
        .into_iter()
        .map(|(name, state)| CompletionCandidate::new(name).help(Some(state.into())))
        .collect();
    if all && !found.is_empty() {
        found.push(CompletionCandidate::new(ALL).help(Some("every helper".into())));
    }
    found
}

/// The helpers' names and states, from the status of the supervisor `foster ctl` finds.
fn ask(
    socket: Option<PathBuf>,
    config: Option<PathBuf>,
) -> Result<Vec<(String, String)>, ClientError> {
    let path = socket_path(socket.as_deref(), config.as_deref())?;
    let mut conn = Connection::connect(&path)?;
    conn.set_read_timeout(Some(ASK_LIMIT))?;
    let status = conn.status()?;
    Ok(status
        .helpers
        .into_iter()
        .map(|h| (h.name, h.state.text().to_string()))
        .collect())
}

/// The `--socket` and `--config` of the command line being completed: the words after the
/// first `--` of `args` (`foster -- foster ctl --socket S restart ''`), in the forms
/// `--socket S` and `--socket=S` (which bash hands over as three words, `=` alone).
fn locations(args: impl Iterator<Item = OsString>) -> (Option<PathBuf>, Option<PathBuf>) {
    let words: Vec<OsString> = args.skip_while(|a| a != "--").skip(1).collect();
    let (mut socket, mut config) = (None, None);
    let mut i = 0;
    while i < words.len() {
        let word = words[i].to_str().unwrap_or("");
        let (option, joined) = match word.split_once('=') {
            Some((o, v)) if o.starts_with("--") => (o, Some(v)),
            _ => (word, None),
        };
        let slot = match option {
            "--socket" => &mut socket,
            "--config" => &mut config,
            _ => {
                i += 1;
                continue;
            }
        };
        let value = match joined {
            Some(v) if !v.is_empty() => Some(OsString::from(v)),
            _ => {
                // The value is the next word, or the one after a lone `=`.
                i += 1;
                if words.get(i).is_some_and(|w| w == "=") {
                    i += 1;
                }
                words.get(i).cloned()
            }
        };
        *slot = value.filter(|v| !v.is_empty()).map(PathBuf::from);
        i += 1;
    }
    (socket, config)
}

/// The signal names that begin with `current` (in any case), each with its number: with `SIG`
/// when `current` starts with it (`SIGTERM`), else without (`TERM`).
fn signals(current: &OsStr) -> Vec<CompletionCandidate> {
    let typed = current.to_str().unwrap_or("").to_ascii_uppercase();
    let with_sig = typed.starts_with("SIG");
    Sig::standard()
        .map(|s| s.to_string())
        .chain(["SIGRTMIN".to_string(), "SIGRTMAX".to_string()])
        .filter_map(|name| {
            let number = Sig::parse(&name).ok()?.number();
            let shown = match with_sig {
                true => name,
                false => name.strip_prefix("SIG").unwrap_or(&name).to_string(),
            };
            shown
                .starts_with(&typed)
                .then(|| CompletionCandidate::new(shown).help(Some(number.to_string().into())))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{command, locations, signals};
    use std::ffi::{OsStr, OsString};
    use std::path::PathBuf;

    fn words(line: &str) -> impl Iterator<Item = OsString> {
        line.split(' ')
            .map(OsString::from)
            .collect::<Vec<_>>()
            .into_iter()
    }

    #[test]
    fn the_completed_command_line_is_a_valid_one() {
        // mut_arg of an argument that does not exist would panic here.
        command().debug_assert();
    }

    #[test]
    fn socket_and_config_are_read_in_each_form() {
        let p = |s: &str| Some(PathBuf::from(s));
        let l = locations(words("foster -- foster ctl --socket /s.sock restart x"));
        assert_eq!(l, (p("/s.sock"), None));
        let l = locations(words("foster -- foster ctl --config=a.toml restart x"));
        assert_eq!(l, (None, p("a.toml")));
        let l = locations(words("foster -- foster ctl --socket = /t.sock pid"));
        assert_eq!(l, (p("/t.sock"), None));
        // Words before the `--` are the completer's own, not the command line's.
        let l = locations(words("foster --socket /no -- foster ctl restart"));
        assert_eq!(l, (None, None));
    }

    #[test]
    fn signals_complete_with_or_without_sig() {
        let names = |t: &str| -> Vec<String> {
            signals(OsStr::new(t))
                .iter()
                .map(|c| c.get_value().to_string_lossy().into_owned())
                .collect()
        };
        assert!(
            names("te").contains(&"TERM".to_string()),
            "{:?}",
            names("te")
        );
        assert!(names("SIGH").contains(&"SIGHUP".to_string()));
        assert!(names("").contains(&"RTMIN".to_string()));
        assert!(names("ku").is_empty());
    }
}
