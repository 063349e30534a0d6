//! The command line of the `foster-init` binary: `foster init`'s options, parsed by hand.
//!
//! Owns [`parse`]: the same options, environment variables, defaults and usage errors (status
//! 2) as `foster init` (clap's, in `cli`), without clap, so that the small binary stays small.
//! Values go through the init's own parsers (`Rewrites`, `parse_pdeath`, `Policy`, durations).
//! The help text is [`HELP`].

use std::ffi::OsString;

use super::Options;
use super::role::SubreaperWish;
use super::signals::Rewrites;

/// `foster-init --help`.
pub const HELP: &str = "\
Be a container's init: run PROGRAM, reap every zombie, forward signals.

As PID 1 (or, elsewhere, as a child subreaper) foster-init starts PROGRAM in a process group of
its own, reaps every orphan, forwards the signals it gets, and exits with PROGRAM's status. It
is `foster init` alone, as a small static binary.

Usage: foster-init [OPTIONS] [--] PROGRAM [ARGS]...

An option of foster-init's own comes before PROGRAM: an unknown one there is a usage error,
never taken as PROGRAM (`--` ends the options; what follows PROGRAM is PROGRAM's).

Options:
  -g, --group            Forward signals to PROGRAM's whole process group instead of to
                         PROGRAM alone (PROGRAM leads a process group of its own either way,
                         as under tini) [env: FOSTER_KILL_PROCESS_GROUP=]
  -r, --rewrite FROM:TO  Send signal TO where FROM arrived (`TERM:QUIT`; `USR1:0` drops USR1).
                         Repeatable; comma-separated in the environment variable
                         [env: FOSTER_REWRITE=]
  -e, --expect CODE      Exit with 0 when PROGRAM's status is CODE (e.g. 143 for a JVM stopped
                         by SIGTERM). Repeatable; comma-separated in the environment variable
                         [env: FOSTER_EXPECT=]
      --subreaper auto|1|off|0
                         When not PID 1, become a child subreaper (`auto` or `1`, the default)
                         or not (`off` or `0`, which also silences the warning when it cannot)
                         [env: FOSTER_SUBREAPER=] [default: auto]
  -w, --wait-all         When PROGRAM ends, send SIGTERM to the rest of the tree, SIGKILL after
                         the grace, and exit only when nothing is left [env: FOSTER_WAIT_ALL=]
      --grace DURATION   The grace of --wait-all between SIGTERM and SIGKILL (`500ms`, `5s`,
                         `2m`, seconds) [env: FOSTER_GRACE=] [default: 5s]
  -p, --pdeath-signal SIGNAL[:exit[:GRACE]]
                         Arm foster's own parent-death signal (checked against FOSTER_PARENT,
                         or the parent foster started with). When the parent dies PROGRAM gets
                         the signal, and SIGKILL (its group with -g) if it is still there after
                         GRACE (default 5s) [env: FOSTER_PDEATH_SIGNAL=]
      --policy CHAIN     Give PROGRAM a parent-death policy chain (`TERM:exit:5s;KILL`, see
                         man foster-exec): PROGRAM starts through the gate, armed and checked
                         against foster. Default: unarmed [env: FOSTER_INIT_POLICY=]
      --verbosity N      Log level added to -v/-q: 1 decisions, 2 every reap and signal, -1
                         errors only [env: FOSTER_VERBOSITY=] [default: 0]
  -v, --verbose          More lines on standard error (repeatable)
  -q, --quiet            Fewer lines on standard error: -q errors only (repeatable)
  -h, --help             Print this help
  -V, --version          Print the version

Every option can also be given as an environment variable (shown in brackets); the command
line wins.

Exit status: PROGRAM's exit code, or 128 + the number of the signal that ended it; 0 for a code
listed with -e; 126 when PROGRAM cannot be executed, 127 when it is not found; 120 when -p finds
foster's parent already gone; 1 when foster itself fails; 2 for a usage error (an unknown option
before PROGRAM, an empty PROGRAM).

Signals forwarded: all but SIGCHLD, SIGKILL and SIGSTOP; the fault signals (SIGSEGV, SIGBUS,
SIGFPE, SIGILL, SIGTRAP, SIGSYS) when a process sent them.
";

/// What the command line asks for.
#[derive(Debug)]
pub enum Parsed {
    Help,
    Version,
    Run(Box<Options>),
}

/// A usage error (status 2), worded as clap words its own.
#[derive(Debug, thiserror::Error)]
pub enum ArgsError {
    #[error("unexpected argument '{0}' found")]
    Unknown(String),
    #[error("a value is required for '{0}' but none was supplied")]
    NoValue(&'static str),
    #[error("invalid value '{value}' for '{option}': {why}")]
    Invalid {
        value: String,
        option: &'static str,
        why: String,
    },
    #[error("the following required arguments were not provided: PROGRAM")]
    NoProgram,
    #[error("empty program name")]
    EmptyProgram,
    #[error("argument '{0}' is not valid UTF-8")]
    NotUtf8(String),
    /// A `--rewrite` rule, said as `foster init` says it.
    #[error(transparent)]
    Rewrite(#[from] super::signals::RewriteError),
}

/// One option: its letters, its environment variable, whether it takes a value.
struct Spec {
    short: Option<char>,
    long: &'static str,
    env: Option<&'static str>,
    value: bool,
}

const fn spec(short: Option<char>, long: &'static str, env: &'static str, value: bool) -> Spec {
    let env = if env.is_empty() { None } else { Some(env) };
    Spec {
        short,
        long,
        env,
        value,
    }
}

const SPECS: [Spec; 13] = [
    spec(Some('g'), "group", "FOSTER_KILL_PROCESS_GROUP", false),
    spec(Some('r'), "rewrite", "FOSTER_REWRITE", true),
    spec(Some('e'), "expect", "FOSTER_EXPECT", true),
    spec(None, "subreaper", "FOSTER_SUBREAPER", true),
    spec(Some('w'), "wait-all", "FOSTER_WAIT_ALL", false),
    spec(None, "grace", "FOSTER_GRACE", true),
    spec(Some('p'), "pdeath-signal", "FOSTER_PDEATH_SIGNAL", true),
    spec(None, "policy", "FOSTER_INIT_POLICY", true),
    spec(None, "verbosity", "FOSTER_VERBOSITY", true),
    spec(Some('v'), "verbose", "", false),
    spec(Some('q'), "quiet", "", false),
    spec(Some('h'), "help", "", false),
    spec(Some('V'), "version", "", false),
];

/// What the command line gave, by option (index in [`SPECS`]), before the environment.
#[derive(Default)]
struct Given {
    values: [Vec<String>; SPECS.len()],
    counts: [u8; SPECS.len()],
}

impl Given {
    fn take(&mut self, i: usize, value: Option<String>) {
        self.counts[i] = self.counts[i].saturating_add(1);
        self.values[i].extend(value);
    }

    /// An option's values: the command line's, else its environment variable's (split at
    /// commas for a repeatable one), else none.
    fn values(&self, i: usize, env: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
        if self.counts[i] > 0 {
            return self.values[i].clone();
        }
        let Some(text) = SPECS[i].env.and_then(env).filter(|t| !t.is_empty()) else {
            return Vec::new();
        };
        match SPECS[i].long {
            "rewrite" | "expect" => text.split(',').map(str::to_string).collect(),
            _ => vec![text],
        }
    }

    /// A flag: given on the command line, or its variable a true word (`1`, `yes`, `on`...).
    fn flag(&self, i: usize, env: &dyn Fn(&str) -> Option<String>) -> Result<bool, ArgsError> {
        if self.counts[i] > 0 {
            return Ok(true);
        }
        match self.values(i, env).first().map(|t| t.to_ascii_lowercase()) {
            None => Ok(false),
            Some(t) => match t.as_str() {
                "y" | "yes" | "t" | "true" | "on" | "1" => Ok(true),
                "n" | "no" | "f" | "false" | "off" | "0" => Ok(false),
                _ => Err(invalid(&t, i, "not a boolean (true or false)")),
            },
        }
    }
}

/// The option's name as usage errors show it (`--grace`).
fn shown(i: usize) -> &'static str {
    const SHOWN: [&str; SPECS.len()] = [
        "--group",
        "--rewrite <FROM:TO>",
        "--expect <CODE>",
        "--subreaper <auto|1|off|0>",
        "--wait-all",
        "--grace <DURATION>",
        "--pdeath-signal <SIGNAL[:exit[:GRACE]]>",
        "--policy <CHAIN>",
        "--verbosity <N>",
        "--verbose",
        "--quiet",
        "--help",
        "--version",
    ];
    SHOWN[i]
}

fn invalid(value: &str, i: usize, why: impl std::fmt::Display) -> ArgsError {
    ArgsError::Invalid {
        value: value.to_string(),
        option: shown(i),
        why: why.to_string(),
    }
}

fn utf8(arg: OsString) -> Result<String, ArgsError> {
    arg.into_string()
        .map_err(|a| ArgsError::NotUtf8(a.to_string_lossy().into_owned()))
}

/// Reads `args` (without the program's own name): options until PROGRAM (or `--`), then
/// PROGRAM and its arguments as they are. `env` reads an environment variable.
pub fn parse(
    args: impl IntoIterator<Item = OsString>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Parsed, ArgsError> {
    let mut args = args.into_iter();
    let mut given = Given::default();
    let mut command = Vec::new();
    while let Some(arg) = args.next() {
        let bytes = arg.as_encoded_bytes();
        if bytes == b"--" {
            command.extend(args.by_ref());
        } else if bytes.starts_with(b"--") {
            long_option(utf8(arg)?, &mut args, &mut given)?;
        } else if bytes.len() > 1 && bytes[0] == b'-' {
            short_options(utf8(arg)?, &mut args, &mut given)?;
        } else {
            command.push(arg);
            command.extend(args.by_ref());
        }
    }
    if given.counts[11] > 0 {
        return Ok(Parsed::Help);
    }
    if given.counts[12] > 0 {
        return Ok(Parsed::Version);
    }
    options(&given, command, env).map(|o| Parsed::Run(Box::new(o)))
}

/// `--name` or `--name=value` (or `--name value`).
fn long_option(
    arg: String,
    rest: &mut impl Iterator<Item = OsString>,
    given: &mut Given,
) -> Result<(), ArgsError> {
    let (name, inline) = match arg[2..].split_once('=') {
        Some((n, v)) => (n, Some(v.to_string())),
        None => (&arg[2..], None),
    };
    let i = SPECS
        .iter()
        .position(|s| s.long == name)
        .ok_or_else(|| ArgsError::Unknown(arg.clone()))?;
    let value = match (SPECS[i].value, inline) {
        (true, Some(v)) => Some(v),
        (true, None) => Some(utf8(rest.next().ok_or(ArgsError::NoValue(shown(i)))?)?),
        (false, Some(_)) => return Err(ArgsError::Unknown(arg)),
        (false, None) => None,
    };
    given.take(i, value);
    Ok(())
}

/// `-gw`, `-vv`, `-r TERM:QUIT`, `-rTERM:QUIT`.
fn short_options(
    arg: String,
    rest: &mut impl Iterator<Item = OsString>,
    given: &mut Given,
) -> Result<(), ArgsError> {
    for (at, c) in arg.char_indices().skip(1) {
        let i = SPECS
            .iter()
            .position(|s| s.short == Some(c))
            .ok_or_else(|| ArgsError::Unknown(format!("-{c}")))?;
        if !SPECS[i].value {
            given.take(i, None);
            continue;
        }
        let inline = &arg[at + c.len_utf8()..];
        let value = if inline.is_empty() {
            utf8(rest.next().ok_or(ArgsError::NoValue(shown(i)))?)?
        } else {
            inline.to_string()
        };
        given.take(i, Some(value));
        return Ok(());
    }
    Ok(())
}

/// The [`Options`] for what was given, the environment filling in the rest.
fn options(
    given: &Given,
    command: Vec<OsString>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Options, ArgsError> {
    let one = |i: usize| given.values(i, env).pop();
    let mut command = command.into_iter();
    let program = command.next().ok_or(ArgsError::NoProgram)?;
    let rewrites = Rewrites::parse(&given.values(1, env));
    let mut opts = Options::new(program, command.collect());
    opts.group = given.flag(0, env)?;
    opts.rewrites = rewrites?;
    for code in given.values(2, env) {
        let n = code.trim().parse::<u8>();
        opts.expect
            .push(n.map_err(|_| invalid(&code, 2, "not in 0..=255"))?.into());
    }
    opts.subreaper = match one(3).as_deref() {
        None | Some("auto" | "1") => SubreaperWish::Auto,
        Some("off" | "0") => SubreaperWish::Off,
        Some(v) => return Err(invalid(v, 3, "expected auto, 1, off or 0")),
    };
    opts.wait_all = given.flag(4, env)?;
    if let Some(g) = one(5) {
        opts.grace = crate::base::duration::parse(&g).map_err(|e| invalid(&g, 5, e))?;
    }
    if let Some(p) = one(6) {
        opts.pdeath = Some(super::parse_pdeath(&p).map_err(|e| invalid(&p, 6, e))?);
    }
    if let Some(p) = one(7) {
        opts.policy = Some(p.parse().map_err(|e| invalid(&p, 7, e))?);
    }
    let extra = match one(8) {
        None => 0,
        Some(n) => n.trim().parse::<i8>().map_err(|e| invalid(&n, 8, e))?,
    };
    let counted = given.counts[9] as i8 - given.counts[10] as i8;
    opts.verbosity = counted.saturating_add(extra);
    if opts.program.is_empty() {
        // Joined to a PATH directory, an empty name would name the directory itself.
        return Err(ArgsError::EmptyProgram);
    }
    Ok(opts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str], env: &[(&str, &str)]) -> Result<Options, ArgsError> {
        let lookup = |k: &str| {
            env.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        };
        match parse(args.iter().map(OsString::from), &lookup)? {
            Parsed::Run(o) => Ok(*o),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn options_then_program_and_its_own() {
        let o = run(
            &["-gw", "-rTERM:QUIT", "-e", "143", "--grace=2s", "sh", "-z"],
            &[],
        )
        .unwrap();
        assert!(o.group && o.wait_all);
        assert_eq!(o.expect, [143]);
        assert_eq!(o.grace, std::time::Duration::from_secs(2));
        assert_eq!(o.program, "sh");
        assert_eq!(o.args, ["-z"]);
        let o = run(&["-vv", "-q", "--verbosity", "-1", "--", "-x"], &[]).unwrap();
        assert_eq!((o.verbosity, o.program.to_str()), (0, Some("-x")));
    }

    #[test]
    fn environment_fills_in_and_the_command_line_wins() {
        let env = [("FOSTER_EXPECT", "1,2"), ("FOSTER_WAIT_ALL", "yes")];
        let o = run(&["true"], &env).unwrap();
        assert_eq!(o.expect, [1, 2]);
        assert!(o.wait_all && !o.group);
        let o = run(&["-e", "3", "true"], &env).unwrap();
        assert_eq!(o.expect, [3]);
        assert!(
            run(&["true"], &[("FOSTER_SUBREAPER", "0")])
                .unwrap()
                .subreaper
                == SubreaperWish::Off
        );
    }

    #[test]
    fn usage_errors() {
        let err = |a: &[&str]| run(a, &[]).unwrap_err().to_string();
        assert_eq!(err(&["-z", "true"]), "unexpected argument '-z' found");
        assert_eq!(
            err(&["--yolo", "true"]),
            "unexpected argument '--yolo' found"
        );
        assert!(err(&["-e", "300", "true"]).contains("'300'"));
        assert!(err(&["-r"]).contains("--rewrite"));
        assert!(err(&["--grace", "soon", "x"]).contains("'soon'"));
        assert!(matches!(run(&[], &[]), Err(ArgsError::NoProgram)));
        assert!(matches!(run(&["", "x"], &[]), Err(ArgsError::EmptyProgram)));
        let help = parse(["-h", "x"].map(OsString::from), &|_| None).unwrap();
        assert!(matches!(help, Parsed::Help));
    }
}
