//! The configuration of `foster run`, from outside: `foster run --check` (the real binary) on
//! the inputs that used to panic it, read it without bound or pass what cannot work, and
//! property tests of the reader it uses ([`Config::read`]) on arbitrary text, arbitrary bytes
//! and generated configurations. No input may panic; every one is valid or an error that says
//! what is wrong.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use foster::gate::policy::Policy;
use foster::process::signal::Sig;
use foster::supervision::config::{Config, MIN_DURATION};
use proptest::prelude::*;

use crate::common;
use common::Dir;

const HELPER: &str = "[[helper]]\nname = \"a\"\ncommand = [\"/bin/true\"]\n";

/// Runs `foster ARGS` with `stdin` written to its standard input (written from a thread, and
/// left unwritten once foster stops reading), and returns its output; SIGKILLs it (by its pid)
/// and fails if it runs past `common::LIMIT` (a safety net only: every run below ends
/// on its own in milliseconds).
fn foster(args: &[&str], stdin: Option<Vec<u8>>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_foster"))
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let writer = child.stdin.take().zip(stdin).map(|(mut pipe, bytes)| {
        std::thread::spawn(move || {
            // foster may stop reading before the end (that is the point of the bound).
            let _ = pipe.write_all(&bytes);
        })
    });
    let out = common::child::output_within(child, &format!("foster {args:?}"));
    if let Some(w) = writer {
        w.join().unwrap();
    }
    out
}

/// `foster run --check FILE` on `text`: (exit status, standard error).
fn check(d: &Dir, name: &str, text: &str) -> (Option<i32>, String) {
    common::check::check(&d.file(name, text))
}

/// Asserts that `foster run --check` refuses `text` with status 2 and every one of `want` in
/// its message, without a panic.
fn refused(d: &Dir, name: &str, text: &str, want: &[&str]) {
    let (code, err) = check(d, name, text);
    assert_eq!(code, Some(2), "{text}\nstderr: {err}");
    assert!(!err.contains("panicked"), "{text}\nstderr: {err}");
    assert!(err.starts_with("foster: error: "), "{err}");
    for w in want {
        assert!(err.contains(w), "{text}\nwanted {w:?} in: {err}");
    }
}

fn accepted(d: &Dir, name: &str, text: &str) {
    let (code, err) = check(d, name, text);
    assert_eq!(code, Some(0), "{text}\nstderr: {err}");
}

#[test]
fn kill_with_a_reaction_that_cannot_run_is_an_error_naming_helper_generation_and_field() {
    let d = Dir::new("config", "kill");
    for reaction in ["exit", "notify"] {
        refused(
            &d,
            &format!("{reaction}.toml"),
            &format!(
                "{HELPER}[[helper.generation]]\nsignal = \"TERM\"\n\
                 [[helper.generation]]\nsignal = \"KILL\"\nreaction = \"{reaction}\"\n"
            ),
            &[
                &format!(
                    "{reaction}.toml:8:12: helper \"a\": key `helper[1].generation[2].reaction`"
                ),
                "SIGKILL cannot be handled",
            ],
        );
    }
    refused(
        &d,
        "term-kill.toml",
        &format!("{HELPER}[[helper.generation]]\nsignal = \"TERM\"\nreaction = \"kill\"\n"),
        &[
            "key `helper[1].generation[1].signal`",
            "reaction kill is delivered as SIGKILL",
        ],
    );
    refused(
        &d,
        "orphan.toml",
        &format!(
            "[supervisor]\norphan_policy = {{ signal = \"KILL\", reaction = \"exit\" }}\n{HELPER}"
        ),
        &["key `supervisor.orphan_policy.reaction`"],
    );
    // KILL alone means reaction kill, as in FOSTER_POLICY and `foster exec --signal KILL`.
    accepted(
        &d,
        "kill.toml",
        &format!("{HELPER}[[helper.generation]]\nsignal = \"KILL\"\n"),
    );
}

#[test]
fn check_reads_only_regular_files_and_at_most_16_mib() {
    let d = Dir::new("config", "files");
    let fifo = d.fifo("fifo.toml");
    // No writer: a reader that opened it and waited would never end.
    for (path, what) in [
        ("/dev/zero", "a character device"),
        (d.0.to_str().unwrap(), "a directory"),
        (fifo.to_str().unwrap(), "a FIFO"),
    ] {
        let out = foster(&["run", "--check", path], None);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{path}: {err}");
        assert!(
            err.contains(&format!("the configuration is {what}, not a regular file")),
            "{path}: {err}"
        );
    }
    // One byte over the bound, as a file and on standard input (`-`).
    let big = format!("{HELPER}{}\n", "#".repeat(16 << 20));
    let file = d.file("big.toml", &big);
    for (args, input) in [
        (vec!["run", "--check", file.to_str().unwrap()], None),
        (vec!["run", "--check", "-"], Some(big.into_bytes())),
    ] {
        let out = foster(&args, input);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("larger than 16 MiB (16777216 bytes)"),
            "{args:?}: {err}"
        );
    }
    // Standard input that never ends: read up to the bound, then refused.
    let out = Command::new(env!("CARGO_BIN_EXE_foster"))
        .args(["run", "--check", "-"])
        .stdin(std::fs::File::open("/dev/zero").unwrap())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("larger than 16 MiB"));
    let fits = format!("{HELPER}{}\n", "#".repeat((16 << 20) - HELPER.len() - 1));
    assert_eq!(fits.len(), 16 << 20);
    accepted(&d, "fits.toml", &fits);
}

#[test]
fn signals_that_do_not_end_a_process_are_refused_as_parent_death_or_orphan_signals() {
    let d = Dir::new("config", "signals");
    for sig in [
        "STOP", "CHLD", "CONT", "TSTP", "TTIN", "TTOU", "URG", "WINCH",
    ] {
        refused(
            &d,
            "gen.toml",
            &format!("{HELPER}[[helper.generation]]\nsignal = \"{sig}\"\n"),
            &[
                "key `helper[1].generation[1].signal`",
                &format!("SIG{sig} cannot be a parent-death or orphan signal"),
            ],
        );
        refused(
            &d,
            "orphan.toml",
            &format!("[supervisor]\norphan_policy = {{ signal = \"{sig}\" }}\n{HELPER}"),
            &["key `supervisor.orphan_policy.signal`"],
        );
    }
    refused(
        &d,
        "stop.toml",
        &format!("{HELPER}stop_signal = \"STOP\"\n"),
        &["key `helper[1].stop_signal`", "stops the helper"],
    );
    refused(
        &d,
        "rt.toml",
        &format!("{HELPER}stop_signal = \"RTMIN+2147483647\"\n"),
        &["signal \"RTMIN+2147483647\": expected RTMIN+N or RTMAX-N"],
    );
}

#[test]
fn durations_environment_and_ids_are_checked_where_they_are_written() {
    let d = Dir::new("config", "fields");
    refused(
        &d,
        "tiny.toml",
        &format!("{HELPER}stop_grace = \"0.0000000001s\"\n"),
        &["key `helper[1].stop_grace`", "shorter than 1ms"],
    );
    refused(
        &d,
        "env.toml",
        &format!("{HELPER}env = {{ \"A=B\" = \"x\", \"\" = \"y\" }}\n"),
        &["key `helper[1].env`", "environment variable name"],
    );
    refused(
        &d,
        "uid.toml",
        &format!("{HELPER}user = 4294967295\n"),
        &["key `helper[1].user`", "(uid_t)-1"],
    );
    refused(
        &d,
        "gid.toml",
        &format!("{HELPER}group = -1\n"),
        &["key `helper[1].group`", "negative"],
    );
    accepted(
        &d,
        "root.toml",
        &format!("{HELPER}user = 0\ngroup = \"0\"\n"),
    );
}

/// `foster run --check` checks the file against this system too: a program not found, one
/// that is not executable, a missing working directory, an unknown user and group, a log file
/// foster would refuse to write; and it reports them all in one run, with the file's own
/// mistakes, each at its place.
#[test]
fn check_reports_every_mistake_of_a_file_and_of_the_system_at_once() {
    use std::os::unix::fs::PermissionsExt;
    let d = Dir::new("config", "system");
    let plain = d.file("plain", "data\n");
    let sub = d.path("sub");
    std::fs::create_dir(&sub).unwrap();
    let gone = d.path("gone");
    let missing = format!("foster-no-such-program-{}", std::process::id());
    let link = d.path("link.log");
    std::os::unix::fs::symlink(&plain, &link).unwrap();
    let fine = d.path("fine.log");
    let text = format!(
        "[[helper]]\nname = \"missing\"\ncommand = [\"{missing}\", \"--flag\"]\n\
         [[helper]]\nname = \"plain\"\ncommand = [\"{plain}\"]\n\
         [[helper]]\nname = \"dir\"\ncommand = \"{sub}\"\n\
         [[helper]]\nname = \"cwd\"\ncommand = [\"/bin/true\"]\ncwd = \"{gone}\"\n\
         [[helper]]\nname = \"cwd-file\"\ncommand = [\"/bin/true\"]\ncwd = \"{plain}\"\n\
         [[helper]]\nname = \"who\"\ncommand = [\"/bin/true\"]\n\
         user = \"foster-no-such-user\"\ngroup = \"foster-no-such-group\"\n\
         [[helper]]\nname = \"grace\"\ncommand = [\"/bin/true\"]\nstop_grace = \"0s\"\n\
         colour = \"red\"\n\
         [[helper]]\nname = \"log\"\ncommand = [\"/bin/true\"]\nlog = {{ file = \"{gone}/a.log\" }}\n\
         [[helper]]\nname = \"log-link\"\ncommand = [\"/bin/true\"]\n\
         log = {{ file = \"{link}\" }}\n\
         [[helper]]\nname = \"log-ok\"\ncommand = [\"/bin/true\"]\nlog = {{ file = \"{fine}\" }}\n",
        plain = plain.display(),
        sub = sub.display(),
        gone = gone.display(),
        link = link.display(),
        fine = fine.display(),
    );
    let (code, err) = check(&d, "all.toml", &text);
    assert_eq!(code, Some(2), "{err}");
    let lines: Vec<&str> = err.lines().collect();
    let want = [
        format!(
            "all.toml:3:12: helper \"missing\": key `helper[1].command`: program \"{missing}\" \
             is not found in PATH ("
        ),
        format!(
            "all.toml:6:12: helper \"plain\": key `helper[2].command`: program \"{}\": {} is a \
             regular file without an execute bit: expected an executable file (at launch: exit \
             status 126)",
            plain.display(),
            plain.display()
        ),
        format!(
            "all.toml:9:11: helper \"dir\": key `helper[3].command`: program \"{}\": {} is a \
             directory: expected an executable file (at launch: exit status 126)",
            sub.display(),
            sub.display()
        ),
        format!(
            "all.toml:13:7: helper \"cwd\": key `helper[4].cwd`: working directory {}: no such \
             directory: expected an existing directory (at launch: exit status 125)",
            gone.display()
        ),
        format!(
            "all.toml:17:7: helper \"cwd-file\": key `helper[5].cwd`: working directory {} is a \
             regular file: expected a directory (at launch: exit status 125)",
            plain.display()
        ),
        "all.toml:21:8: helper \"who\": key `helper[6].user`: no user \"foster-no-such-user\" \
         in the user database: expected the name of an existing user, or a uid (at launch: \
         exit status 125)"
            .to_string(),
        "all.toml:22:9: helper \"who\": key `helper[6].group`: no group \
         \"foster-no-such-group\" in the group database: expected the name of an existing \
         group, or a gid (at launch: exit status 125)"
            .to_string(),
        "all.toml:26:14: helper \"grace\": key `helper[7].stop_grace`: zero duration \"0s\""
            .to_string(),
        "all.toml:27:1: helper \"grace\": key `helper[7].colour`: unknown field `colour`"
            .to_string(),
        format!(
            "all.toml:31:16: helper \"log\": key `helper[8].log.file`: log file {}/a.log: its \
             directory {} does not exist (foster run would not start: exit status 1)",
            gone.display(),
            gone.display()
        ),
        format!(
            "all.toml:35:16: helper \"log-link\": key `helper[9].log.file`: log file {}: it is \
             a symbolic link to {}",
            link.display(),
            plain.display()
        ),
    ];
    assert_eq!(lines.len(), want.len(), "{err}");
    for (line, want) in lines.iter().zip(&want) {
        assert!(
            line.starts_with(&format!("foster: error: {}/{want}", d.0.display())),
            "wanted {want:?}\n got {line:?}"
        );
    }
    assert!(
        lines[0].ends_with("(at launch: exit status 127)"),
        "{}",
        lines[0]
    );
    assert!(!fine.exists(), "--check created a log file");

    // The user a helper runs as: a program and a directory that user cannot reach.
    let Ok(Some(nobody)) = nix::unistd::User::from_name("nobody") else {
        common::skip::setup("part: no user nobody");
        return;
    };
    if nix::unistd::geteuid() == nobody.uid {
        common::skip::setup("part: running as nobody");
        return;
    }
    let private = d.path("private");
    std::fs::create_dir(&private).unwrap();
    let program = private.join("server");
    std::fs::write(&program, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
    let text = format!(
        "[[helper]]\nname = \"mine\"\ncommand = [\"{p}\"]\ncwd = \"{dir}\"\n\
         [[helper]]\nname = \"theirs\"\ncommand = [\"{p}\"]\ncwd = \"{dir}\"\n\
         user = \"nobody\"\n",
        p = program.display(),
        dir = private.display(),
    );
    let (code, err) = check(&d, "nobody.toml", &text);
    assert_eq!(code, Some(2), "{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "only the helper run as nobody: {err}");
    let uid = nobody.uid.as_raw();
    assert!(
        lines[0].contains(&format!(
            "nobody.toml:7:12: helper \"theirs\": key `helper[2].command`: program \"{}\": user \
             \"nobody\" (uid {uid}) may not enter {} (mode 0700",
            program.display(),
            private.display()
        )),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].contains(&format!(
            "nobody.toml:8:7: helper \"theirs\": key `helper[2].cwd`: working directory {}: \
             user \"nobody\" (uid {uid}) may not enter it (mode 0700",
            private.display()
        )),
        "{}",
        lines[1]
    );
}

/// A numeric `user` and `group` reach the helper: it runs as uid and gid 65534.
#[test]
fn a_helper_runs_as_the_numeric_user_and_group_given() {
    if common::skip::unless_root("setting a helper's user needs root") {
        return;
    }
    let d = Dir::new("config", "ids");
    let cfg = d.file(
        "ids.toml",
        "[[helper]]\nname = \"ids\"\ncwd = \"/\"\nuser = 65534\ngroup = 65534\n\
         command = [\"/bin/sh\", \"-c\", \"test \\\"$(id -u):$(id -g)\\\" = 65534:65534\"]\n",
    );
    let out = foster(&["run", "--no-socket", cfg.to_str().unwrap()], None);
    assert_eq!(
        out.status.code(),
        Some(0),
        "the helper did not run as 65534:65534: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

// ---------------------------------------------------------------------------------------------
// Property tests: no input panics the reader; what it accepts is usable.

/// The reader `foster run --check` uses, on `bytes`: either a config that holds its promises or
/// an error with a message that names the file.
fn read_holds(bytes: &[u8]) -> Result<(), TestCaseError> {
    match Config::read(Path::new("gen.toml"), bytes) {
        Ok(c) => valid_holds(&c),
        Err(all) => {
            prop_assert!(!all.is_empty());
            for e in all.iter() {
                prop_assert!(!e.message.is_empty(), "an error without a message");
                let shown = e.to_string();
                prop_assert!(shown.starts_with("gen.toml"), "{}", shown);
                prop_assert!(
                    !shown.chars().any(|c| c.is_control()),
                    "unescaped: {:?}",
                    shown
                );
            }
            // In the order of the file.
            let places: Vec<_> = all
                .iter()
                .map(|e| (e.line.unwrap_or(usize::MAX), e.column.unwrap_or(0)))
                .collect();
            prop_assert!(places.windows(2).all(|w| w[0] <= w[1]), "{:?}", places);
            Ok(())
        }
    }
}

/// What every valid configuration promises the supervisor.
fn valid_holds(c: &Config) -> Result<(), TestCaseError> {
    prop_assert!(!c.helpers.is_empty());
    Sig::new(c.supervisor.orphan_policy.signal())
        .ok_or_else(|| TestCaseError::fail("not a signal"))?
        .ending()
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    c.supervisor
        .orphan_policy
        .check()
        .map_err(|e| TestCaseError::fail(e.message))?;
    for h in &c.helpers {
        prop_assert!(!h.command.program().is_empty());
        prop_assert!(h.stop_grace.0 >= MIN_DURATION);
        prop_assert!(h.backoff.initial.0 >= MIN_DURATION && h.backoff.max >= h.backoff.initial);
        for (k, v) in &h.env {
            prop_assert!(
                !k.is_empty() && !k.contains('=') && !k.contains('\0'),
                "{:?}",
                k
            );
            prop_assert!(!v.contains('\0'));
        }
        for id in [&h.user, &h.group].into_iter().flatten() {
            prop_assert!(!id.is_empty() && id != "4294967295" && !id.starts_with('-'));
        }
        // The chain travels as FOSTER_POLICY: the text form reads it back.
        let chain = h.policy_chain();
        let text = chain.to_string();
        let back: Policy = text
            .parse()
            .map_err(|e: foster::gate::policy::PolicyError| {
                TestCaseError::fail(format!("{text}: {e}"))
            })?;
        prop_assert_eq!(back.depth(), chain.depth());
        let mut g = Some(&chain);
        let mut b = Some(&back);
        while let (Some(p), Some(q)) = (g, b) {
            prop_assert_eq!((p.signal, p.reaction), (q.signal, q.reaction));
            p.validate().map_err(|e| TestCaseError::fail(e.0))?;
            Sig::new(p.signal)
                .ok_or_else(|| TestCaseError::fail("not a signal"))?
                .ending()
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert!(p.grace >= MIN_DURATION);
            g = p.next.as_deref();
            b = q.next.as_deref();
        }
    }
    Ok(())
}

/// A value written as TOML: most often one of `good` (which the field accepts), sometimes one
/// of `bad` (which it may refuse), so that whole configurations are valid often enough for
/// their promises to be checked too.
fn pick(good: &'static [&'static str], bad: &'static [&'static str]) -> BoxedStrategy<String> {
    prop_oneof![
        12 => prop::sample::select(good).prop_map(str::to_string),
        1 => prop::sample::select(bad).prop_map(str::to_string),
    ]
    .boxed()
}

/// `key = VALUE` (a value as [`pick`] chooses it), or nothing.
fn maybe(
    key: &'static str,
    good: &'static [&'static str],
    bad: &'static [&'static str],
) -> impl Strategy<Value = String> {
    prop::option::of(pick(good, bad))
        .prop_map(move |v| v.map_or(String::new(), |v| format!("{key} = {v}\n")))
}

const SIGNALS: &[&str] = &[
    "\"TERM\"",
    "\"KILL\"",
    "\"HUP\"",
    "\"SIGUSR1\"",
    "\"int\"",
    "\"RTMIN+3\"",
    "\"RTMAX-1\"",
    "\"rtmin\"",
    "9",
    "15",
    "1",
];
const BAD_SIGNALS: &[&str] = &[
    "\"STOP\"",
    "\"CHLD\"",
    "\"CONT\"",
    "\"WINCH\"",
    "\"URG\"",
    "\"TSTP\"",
    "\"TTIN\"",
    "\"RTMIN+2147483647\"",
    "\"RTMIN+-5\"",
    "\"RTMAX-99\"",
    "\"0\"",
    "\"65\"",
    "\"\"",
    "\"SIG\"",
    "\"\\u001b\"",
    "19",
    "0",
    "-1",
    "9223372036854775807",
    "1.5",
    "true",
    "[]",
];
const REACTIONS: &[&str] = &["\"exit\"", "\"notify\"", "\"kill\""];
const BAD_REACTIONS: &[&str] = &["\"KILL\"", "\"\"", "3", "\"explode\""];
const DURATIONS: &[&str] = &[
    "\"5s\"",
    "\"1ms\"",
    "\"0.001s\"",
    "\"250ms\"",
    "\"1.5s\"",
    "\"2m\"",
    "\"1h\"",
    "\"1e0s\"",
    "\"1000000000s\"",
    "\"1.0005ms\"",
];
const BAD_DURATIONS: &[&str] = &[
    "\"0s\"",
    "\"-1s\"",
    "\"0.0000000001s\"",
    "\"0.5ms\"",
    "\"999999999999h\"",
    "\"5\"",
    "\"ms\"",
    "\".s\"",
    "\"1..2s\"",
    "\"5 weeks\"",
    "\"\"",
    "5",
    "0",
    "-2",
    "1.5",
    "nan",
    "inf",
    "-inf",
];
const IDS: &[&str] = &[
    "0",
    "65534",
    "4294967294",
    "\"0\"",
    "\"007\"",
    "\"nobody\"",
    "\"root\"",
];
const BAD_IDS: &[&str] = &[
    "-1",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "\"-1\"",
    "\"+0\"",
    "\"4294967295\"",
    "\"99999999999999999999999\"",
    "\"\"",
    "\" 0\"",
    "\"a:b\"",
    "\"a\\u0000\"",
    "1.5",
    "false",
];
const ENVS: &[&str] = &[
    "{}",
    "{ A = \"1\" }",
    "{ PATH = \"/bin\", B = \"=\", \"x.y\" = \"\" }",
];
const BAD_ENVS: &[&str] = &[
    "{ \"A=B\" = \"x\", \"\" = \"y\" }",
    "{ \"=\" = \"\" }",
    "{ \"A\\u0000\" = \"x\" }",
    "{ A = \"x\\u0000\" }",
    "{ A = 1 }",
    "\"A=1\"",
];

/// A `[[helper.generation]]` table, and the same as an inline table for `generation = [...]`.
fn generation() -> impl Strategy<Value = (String, String)> {
    (
        prop::option::of(pick(SIGNALS, BAD_SIGNALS)),
        prop::option::of(pick(REACTIONS, BAD_REACTIONS)),
        prop::option::of(pick(DURATIONS, BAD_DURATIONS)),
        prop::bool::weighted(0.05),
    )
        .prop_map(|(s, r, g, unknown)| {
            let fields: Vec<String> = [("signal", s), ("reaction", r), ("grace", g)]
                .into_iter()
                .filter_map(|(k, v)| v.map(|v| format!("{k} = {v}")))
                .chain(unknown.then(|| "colour = \"red\"".to_string()))
                .collect();
            let table = format!("[[helper.generation]]\n{}\n", fields.join("\n"));
            let inline = format!("{{ {} }}", fields.join(", "));
            (table, inline)
        })
}

fn helper(n: usize) -> impl Strategy<Value = String> {
    (
        (
            pick(
                &["\"a\"", "\"b\"", "\"web server\"", "\"ü\""],
                &["\"\"", "\"x\\u0001\"", "7"],
            ),
            pick(
                &[
                    "[\"/bin/true\"]",
                    "\"/bin/true\"",
                    "[\"/bin/sh\", \"-c\", \"exit 0\"]",
                ],
                &["[]", "[\"\"]", "[\"a\\u0000\"]", "42", "[1]"],
            ),
            maybe("env", ENVS, BAD_ENVS),
            maybe(
                "cwd",
                &["\"/\"", "\"relative\""],
                &["\"\"", "\"/a\\u0000b\"", "1"],
            ),
            maybe("user", IDS, BAD_IDS),
            maybe("group", IDS, BAD_IDS),
        ),
        (
            maybe(
                "restart",
                &["\"never\"", "\"on-failure\"", "\"always\""],
                &["\"sometimes\"", "1"],
            ),
            maybe(
                "backoff",
                &[
                    "{ initial = \"1s\", max = \"30s\", limit = 5, reset_after = \"60s\" }",
                    "{ initial = \"1ms\", max = \"1ms\", limit = 0 }",
                    "{}",
                ],
                &[
                    "{ initial = \"2s\", max = \"1s\" }",
                    "{ limit = -1 }",
                    "{ limit = 4294967296 }",
                    "{ initial = \"0.1ms\" }",
                    "{ max = \"0s\" }",
                    "{ typo = 1 }",
                ],
            ),
            maybe("stop_signal", SIGNALS, BAD_SIGNALS),
            maybe("stop_grace", DURATIONS, BAD_DURATIONS),
            maybe("subreaper", &["true", "false"], &["\"yes\""]),
            prop::collection::vec(generation(), 0..4),
            prop::bool::ANY,
        ),
    )
        .prop_map(move |((name, command, env, cwd, user, group), rest)| {
            let (restart, backoff, stop_signal, stop_grace, subreaper, gens, inline) = rest;
            // The good names differ from one helper to the next, so that duplicates stay rare.
            let name = name.replacen("\"a\"", &format!("\"a{n}\""), 1);
            let mut t = format!(
                "[[helper]]\nname = {name}\ncommand = {command}\n{env}{cwd}{user}{group}\
                 {restart}{backoff}{stop_signal}{stop_grace}{subreaper}"
            );
            if inline && !gens.is_empty() {
                let list: Vec<&str> = gens.iter().map(|(_, i)| i.as_str()).collect();
                t.push_str(&format!("generation = [{}]\n", list.join(", ")));
            } else {
                for (table, _) in &gens {
                    t.push_str(table);
                }
            }
            t
        })
}

fn config() -> impl Strategy<Value = String> {
    (
        prop::option::of(generation()),
        prop::collection::vec(0..3usize, 0..4),
    )
        .prop_flat_map(|(orphan, helpers)| {
            let helpers: Vec<_> = helpers.iter().enumerate().map(|(i, _)| helper(i)).collect();
            (Just(orphan), helpers)
        })
        .prop_map(|(orphan, helpers)| {
            let mut t = String::new();
            if let Some((_, inline)) = orphan {
                t.push_str(&format!("[supervisor]\norphan_policy = {inline}\n"));
            }
            for h in helpers {
                t.push_str(&h);
            }
            t
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    /// Generated configurations: helpers, generations, signals, reactions, durations, env,
    /// user and restart fields, valid and not.
    #[test]
    fn generated_configs_are_valid_or_an_error(text in config()) {
        read_holds(text.as_bytes())?;
    }

    /// Text made of TOML's punctuation and a few keys: reaches deeper into the parser than
    /// arbitrary text does.
    #[test]
    fn toml_like_text_is_valid_or_an_error(
        text in "(\\[\\[helper\\]\\]\n|\\[\\[helper.generation\\]\\]\n|\\[supervisor\\]\n|name = \"a\"\n|command = \\[\"x\"\\]\n|signal = \"KILL\"\n|reaction = \"exit\"\n|grace = \"1ms\"\n|[\\[\\]{}=,.\"'# \na-z0-9:+\\-é\u{1b}\\\\]){0,40}"
    ) {
        read_holds(text.as_bytes())?;
    }

    #[test]
    fn arbitrary_text_is_valid_or_an_error(text in any::<String>()) {
        read_holds(text.as_bytes())?;
    }

    #[test]
    fn arbitrary_bytes_are_valid_or_an_error(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        read_holds(&bytes)?;
    }
}

/// `ring = { lines, bytes }` bounds a helper's kept lines: absurd values are refused by
/// `--check`, naming the helper's key and the bound.
#[test]
fn check_refuses_a_ring_out_of_bounds() {
    let d = Dir::new("config", "ring");
    let helper = "[[helper]]\nname = \"web\"\ncommand = [\"sh\"]\n";
    refused(
        &d,
        "lines.toml",
        &format!("{helper}ring = {{ lines = 1000000000 }}\n"),
        &["helper[1].ring.lines", "from 0 to 1000000"],
    );
    refused(
        &d,
        "bytes.toml",
        &format!("{helper}ring = {{ lines = 10, bytes = \"1TB\" }}\n"),
        &["helper[1].ring.bytes", "at most 268435456 bytes"],
    );
    accepted(
        &d,
        "ok.toml",
        &format!("{helper}ring = {{ lines = 10, bytes = \"64KiB\" }}\n"),
    );
}
