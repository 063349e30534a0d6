//! The command line's one error style, on the real binary: every subcommand's usage errors and
//! runtime errors are one `foster: error: MESSAGE` line (clap's usage line and hint may follow
//! a usage error), with status 2 for a usage error and 1 (or the subcommand's own status) for a
//! runtime error.

use std::process::Command;

use crate::common;
use common::Dir;

const FOSTER: &str = env!("CARGO_BIN_EXE_foster");

fn foster(args: &[&str]) -> (Option<i32>, String) {
    let o = Command::new(FOSTER)
        .args(args)
        .env_remove("FOSTER_PARENT")
        .env_remove("FOSTER_POLICY")
        .env_remove("FOSTER_SOCKET")
        .env_remove("FOSTER_GRACE")
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn usage_errors_are_foster_error_lines_with_status_2() {
    for (args, what) in [
        (&["exec", "--grace", "1.5x", "--", "true"][..], "1.5x"),
        (&["exec", "--signal", "STOP", "--", "true"], "SIGSTOP"),
        (&["exec", "--bogus", "--", "true"], "--bogus"),
        (&["ctl", "bogus"], "bogus"),
        (&["ctl", "signal", "web", "NOPE"], "NOPE"),
        (&["run", "--bogus", "x.toml"], "--bogus"),
        (&["top", "--interval", "10ms"], "at least 100ms"),
        (&["tree", "--root", "x"], "'x'"),
        (&["identity", "x"], "'x'"),
        (&["qualify", "--case", "nope"], "unknown case \"nope\""),
        (&["demo", "--bogus"], "--bogus"),
        (&["init", "-z", "--", "true"], "-z"),
        (
            &["init", "--rewrite", "X", "--", "true"],
            "expected FROM:TO",
        ),
        (
            &["init", "--rewrite", "BOGUS:TERM", "--", "true"],
            "unknown signal \"BOGUS\"",
        ),
        (&["init", "--", ""], "empty program name"),
        (&["bogus"], "bogus"),
    ] {
        let (code, err) = foster(args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.starts_with("foster: error: "), "{args:?}: {err}");
        assert!(!err.contains("\nerror:"), "{args:?}: {err}");
        assert!(
            err.lines().next().unwrap().contains(what),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn runtime_errors_are_the_same_lines() {
    for (args, status, what) in [
        (
            &["identity", "2147483647"][..],
            1,
            "no process with pid 2147483647",
        ),
        (
            &["tree", "--root", "2147483647"],
            1,
            "no process with pid 2147483647",
        ),
        (
            &["ctl", "--socket", "/nonexistent/foster.sock", "status"],
            1,
            "no supervisor listening at /nonexistent/foster.sock",
        ),
        (&["exec", "--", "true"], 125, "FOSTER_PARENT is not set"),
        (
            &["init", "--", "/nonexistent/program"],
            127,
            "cannot run /nonexistent/program",
        ),
        (
            &["run", "/nonexistent/foster.toml"],
            2,
            "/nonexistent/foster.toml",
        ),
    ] {
        let (code, err) = foster(args);
        assert_eq!(code, Some(status), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("foster: error: "), "{args:?}: {err}");
        assert!(err.contains(what), "{args:?}: {err}");
    }
}

/// The library's errors keep their cause as a source (its text is in the message already).
#[test]
fn errors_keep_their_cause_as_source() {
    use std::error::Error;
    let e = foster::supervision::control::client::Connection::connect(std::path::Path::new(
        "/nonexistent/foster.sock",
    ))
    .unwrap_err();
    let cause = e.source().and_then(|s| s.downcast_ref::<std::io::Error>());
    assert_eq!(
        cause.map(std::io::Error::kind),
        Some(std::io::ErrorKind::NotFound),
        "{e:?}"
    );
    let e = foster::process::identity::IdentityError::BadStat(
        7,
        foster::process::procstat::StatError::BadPid,
    );
    assert_eq!(
        e.source().map(ToString::to_string).as_deref(),
        Some("field 1 (pid) is not a number")
    );
    assert_eq!(
        e.to_string(),
        "cannot parse /proc/7/stat: field 1 (pid) is not a number"
    );
    // foster init's PROGRAM that cannot be created: the spawner's refusal is the source.
    let plan = foster::init::launch::LaunchPlan {
        program: "/nonexistent/program".into(),
        args: Vec::new(),
        terminal: None,
        inherited: foster::process::signal::Inherited::get(),
        policy: None,
    };
    let e =
        foster::init::launch::launch(foster::gate::spawner::Spawner::global(), &plan).unwrap_err();
    assert_eq!(e.status, 127, "{e:?}");
    assert_eq!(
        e.to_string(),
        "cannot run /nonexistent/program: no such file"
    );
    let cause = e
        .source()
        .and_then(|s| s.downcast_ref::<foster::gate::spawner::SpawnError>());
    assert!(
        matches!(cause, Some(foster::gate::spawner::SpawnError::Target(_))),
        "{e:?}"
    );
}

/// `foster ARGS` with `env` added: its status, standard output and standard error.
fn foster_env(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String, String) {
    let o = Command::new(FOSTER)
        .args(args)
        .env_remove("FOSTER_SOCKET")
        .env_remove("FOSTER_SUBREAPER")
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// `foster --version` names the version and the commit it was built from (`-dirty` when the
/// checkout had changes), or says `unknown commit` when built outside a git checkout.
#[test]
fn version_names_the_commit() {
    let (code, out, _) = foster_env(&["--version"], &[]);
    assert_eq!(code, Some(0));
    let version = env!("CARGO_PKG_VERSION");
    let head = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    match head {
        Some(hash) => assert!(
            out == format!("foster {version} (commit {hash})\n")
                || out == format!("foster {version} (commit {hash}-dirty)\n"),
            "{out:?}, HEAD is {hash}"
        ),
        None => assert_eq!(out, format!("foster {version} (unknown commit)\n")),
    }
    // Every subcommand says the same.
    let (_, run, _) = foster_env(&["run", "--version"], &[]);
    assert!(
        run.ends_with(out.strip_prefix("foster").unwrap()),
        "{run:?}"
    );
}

/// The bash completion script, sourced in a real bash, completes `foster ct<TAB>` to `ctl`
/// and `foster ctl st<TAB>` to its subcommands; zsh's and fish's scripts are printed too.
#[test]
fn completions_complete_subcommands_in_bash() {
    let (code, script, err) = foster_env(&["completions", "bash"], &[]);
    assert_eq!(code, Some(0), "{err}");
    let d = Dir::new("completions", "bash");
    let file = d.file("foster.bash", &script);
    let complete = |words: &str| -> Vec<String> {
        let o = Command::new("bash")
            .args(["--norc", "--noprofile", "-c"])
            .arg(
                r#"source "$1" || exit 9
                f=$(complete -p foster | sed -E 's/.* -F ([^ ]+) .*/\1/')
                read -ra COMP_WORDS <<< "$2"
                [ "${2: -1}" = " " ] && COMP_WORDS+=("")
                COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
                COMP_LINE="$2"; COMP_POINT=${#COMP_LINE}
                "$f" foster "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
                printf '%s\n' "${COMPREPLY[@]}""#,
            )
            .arg("bash")
            .arg(&file)
            .arg(words)
            .output()
            .expect("bash runs");
        assert!(o.status.success(), "{o:?}");
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    };
    assert_eq!(complete("foster ct"), ["ctl"]);
    let mut st = complete("foster ctl st");
    st.sort();
    assert_eq!(st, ["start", "status", "stop"]);
    assert!(complete("foster top --").contains(&"--attach".to_string()));
    for (shell, marker) in [("zsh", "#compdef foster"), ("fish", "complete -c foster")] {
        let (code, script, err) = foster_env(&["completions", shell], &[]);
        assert_eq!(code, Some(0), "{shell}: {err}");
        assert!(
            script.contains(marker) && script.contains("ctl"),
            "{shell}: {script}"
        );
    }
}

/// The subcommands man pages are generated for (every visible one).
const PAGES: [&str; 12] = [
    "identity",
    "tree",
    "run",
    "ctl",
    "demo",
    "exec",
    "top",
    "qualify",
    "init",
    "notify",
    "completions",
    "man",
];

/// `foster man` and `foster man SUBCOMMAND` print roff that `man -l` renders without a
/// warning: NAME foster-SUBCOMMAND, the synopsis `foster SUBCOMMAND`, the options. Every page a
/// SUBCOMMANDS section refers to (foster-run(1) from foster(1), foster-ctl-status(1) from
/// foster-ctl(1)) is one `foster man` prints: the pages are followed from foster(1).
#[test]
fn man_pages_render() {
    let has_man = Command::new("man")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let d = Dir::new("man", "pages");
    let reference = regex::Regex::new(r"foster(?:\\-[a-z]+)+\(1\)").unwrap();
    // (page, its synopsis), from foster(1) down the pages each one refers to.
    let mut todo = vec![("foster".to_string(), "foster".to_string())];
    let mut seen = std::collections::BTreeSet::new();
    while let Some((name, synopsis)) = todo.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        let args = match name.strip_prefix("foster-") {
            None => vec!["man"],
            Some(s) => vec!["man", s],
        };
        let (code, roff, err) = foster_env(&args, &[]);
        assert_eq!(code, Some(0), "{name}, referred to by a page: {err}");
        assert!(
            roff.contains(&format!(".TH {name} 1")),
            "{name}: {}",
            &roff[..roff.len().min(300)]
        );
        for r in reference.find_iter(&roff) {
            let page = r.as_str().replace("\\-", "-");
            let page = page.strip_suffix("(1)").unwrap().to_string();
            let sub = page
                .strip_prefix(&format!("{name}-"))
                .unwrap_or_else(|| panic!("{name} refers to {page}, not one of its own"));
            todo.push((page.clone(), format!("{synopsis} {sub}")));
        }
        if !has_man {
            continue;
        }
        let file = d.file(&format!("{name}.1"), &roff);
        let o = Command::new("man")
            .args(["--warnings", "-P", "cat", "-l"])
            .arg(&file)
            .env("MANWIDTH", "200")
            .env("LC_ALL", "C.UTF-8")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout);
        let warnings = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{name}: {warnings}");
        assert!(warnings.trim().is_empty(), "{name}: {warnings}");
        // man justifies a line it fills (a long NAME, a synopsis): compare with single spaces.
        let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            text.contains("NAME") && words.contains(&format!("{name} - ")),
            "{name}:\n{text}"
        );
        assert!(
            words.contains(&synopsis),
            "{name}: no {synopsis:?}:\n{text}"
        );
        assert!(text.contains("--help"), "{name}:\n{text}");
    }
    if !has_man {
        eprintln!("man -l not checked: man (man-db) is not installed");
    }
    // Every subcommand has its page, and ctl's subcommands theirs.
    for sub in PAGES {
        assert!(seen.contains(&format!("foster-{sub}")), "{sub}: {seen:?}");
    }
    assert!(seen.contains("foster-ctl-status"), "{seen:?}");
    let (_, run, _) = foster_env(&["man", "foster-run"], &[]);
    assert!(
        run.contains(".TH foster-run 1"),
        "foster-run names the page too"
    );
    let (code, _, err) = foster_env(&["man", "bogus"], &[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.starts_with("foster: error: ") && err.contains("bogus") && err.contains("run, ctl"),
        "{err}"
    );
}

/// One help style: every subcommand's `-h` is its one-line description and a line an option,
/// `--help` the long description; no help text points at a file of the source tree. `tree -h` is
/// pstree's highlight: its short form is not asked for.
#[test]
fn help_texts_are_alike_and_name_no_source_file() {
    for sub in PAGES {
        if sub == "tree" {
            let (code, long, err) = foster_env(&[sub, "--help"], &[]);
            assert_eq!(code, Some(0), "{err}");
            assert!(
                long.contains("--highlight-all") && !long.contains("docs/"),
                "{long}"
            );
            continue;
        }
        let (code, short, _) = foster_env(&[sub, "-h"], &[]);
        assert_eq!(code, Some(0), "{sub}");
        let (_, long, _) = foster_env(&[sub, "--help"], &[]);
        assert!(
            short.contains("Print help (see more with '--help')"),
            "{sub} -h is not the short form:\n{short}"
        );
        assert!(
            long.len() > short.len(),
            "{sub} --help is not the long form"
        );
        let first = short.lines().next().unwrap();
        assert!(
            !first.ends_with('.') && long.starts_with(first),
            "{sub}: {first:?}"
        );
        for text in [&short, &long] {
            assert!(
                !text.contains("docs/"),
                "{sub} names a source file:\n{text}"
            );
            assert!(!text.contains(".md"), "{sub} names a source file:\n{text}");
        }
    }
    let (_, demo, _) = foster_env(&["demo", "--help"], &[]);
    assert!(demo.contains("--no-tui"), "{demo}");
    // The JSON a help text describes is the one printed: the top-level keys of each document,
    // in the order the help gives them, are the output's.
    for (args, keys) in [
        (&["tree", "--json"][..], &["version", "roots"][..]),
        (
            &["identity", "--json", "1"][..],
            &["version", "identity"][..],
        ),
        (
            &["qualify", "--json", "--case", "normal"][..],
            &["version", "cases", "passed", "failed", "skipped"][..],
        ),
    ] {
        let (code, out, err) = foster_env(args, &[]);
        assert_eq!(code, Some(0), "{args:?}: {err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        let got: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        let mut want = keys.to_vec();
        want.sort();
        assert_eq!(got, want, "{args:?}: {out}");
        let (_, help, _) = foster_env(&[args[0], "--help"], &[]);
        let described = keys
            .iter()
            .map(|k| format!("\"{k}\": "))
            .collect::<Vec<_>>();
        let at: Vec<Option<usize>> = described.iter().map(|k| help.find(k.as_str())).collect();
        assert!(
            at.iter().all(Option::is_some) && at.windows(2).all(|w| w[0] < w[1]),
            "{} --help does not describe {keys:?} ({described:?}):\n{help}",
            args[0]
        );
    }
    let (_, run, _) = foster_env(&["run", "--help"], &[]);
    assert!(
        run.contains("CAP_SYS_ADMIN") && run.contains("user namespaces"),
        "--contain does not say what it needs:\n{run}"
    );
}

/// `init --subreaper` takes the spellings its help gives (auto, 1, off, 0) and no others.
#[test]
fn init_subreaper_takes_the_documented_spellings() {
    let (_, help, _) = foster_env(&["init", "--help"], &[]);
    assert!(help.contains("--subreaper <auto|1|off|0>"), "{help}");
    for ok in ["auto", "1", "off", "0"] {
        let (code, _, err) = foster_env(&["init", "--subreaper", ok, "--", "true"], &[]);
        assert_eq!(code, Some(0), "--subreaper {ok}: {err}");
        let (code, _, err) = foster_env(&["init", "--", "true"], &[("FOSTER_SUBREAPER", ok)]);
        assert_eq!(code, Some(0), "FOSTER_SUBREAPER={ok}: {err}");
    }
    for bad in ["yes", "on", "true", "no", "OFF", ""] {
        let (code, _, err) = foster_env(&["init", "--subreaper", bad, "--", "true"], &[]);
        assert_eq!(code, Some(2), "--subreaper {bad:?}: {err}");
        assert!(err.contains("expected auto (or 1) or off (or 0)"), "{err}");
    }
}

/// A client given a file that is not a socket says so, whoever the client (`ctl`, `top
/// --attach`) and however it got the path (option or FOSTER_SOCKET); `top --attach` alone
/// looks where `ctl` does.
#[test]
fn a_file_that_is_not_a_socket_says_so() {
    let d = Dir::new("socket", "regular");
    let file = d.file("not.sock", "");
    let f = file.to_str().unwrap();
    for (args, env) in [
        (vec!["ctl", "--socket", f, "status"], vec![]),
        (vec!["ctl", "status"], vec![("FOSTER_SOCKET", f)]),
        (vec!["top", "--attach", f], vec![]),
        (vec!["top", "--attach"], vec![("FOSTER_SOCKET", f)]),
    ] {
        let (code, _, err) = foster_env(&args, &env);
        assert_eq!(code, Some(1), "{args:?} {env:?}: {err}");
        assert!(
            err.contains(&format!("{f} is not a socket but a regular file")),
            "{args:?} {env:?}: {err}"
        );
        assert!(!err.contains("ended"), "{args:?} {env:?}: {err}");
    }
    // Without FOSTER_SOCKET, the default directory, as for ctl.
    use std::os::unix::fs::DirBuilderExt;
    let runtime = d.path("runtime");
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&runtime)
        .unwrap();
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(runtime.join("foster"))
        .unwrap();
    let rt = runtime.to_str().unwrap();
    for args in [vec!["ctl", "status"], vec!["top", "--attach"]] {
        let (code, _, err) = foster_env(&args, &[("XDG_RUNTIME_DIR", rt)]);
        assert_eq!(code, Some(1), "{args:?}: {err}");
        assert!(
            err.contains(&format!("no supervisor socket in {rt}/foster")),
            "{args:?}: {err}"
        );
    }
}
