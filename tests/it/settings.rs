//! The helper settings of `foster run`'s file, end to end on the real binary: `autostart`,
//! `env_file`, `shell`, `backoff.limit = "unlimited"`. What is observed is the supervisor's
//! own record (its events, `ctl status --json`) and what the helpers wrote; deadlines are only
//! safety nets.

use serde_json::Value;

use crate::common;
use common::Dir;
use common::foster_run::FosterRun;
use common::supervised::Run;

/// A helper's entry in `ctl status --json`.
fn helper(run: &Run, name: &str) -> Value {
    Value::Object(run.helpers())
        .get(name)
        .cloned()
        .unwrap_or(Value::Null)
}

/// `autostart = false`: declared and `stopped` with a detail saying why, never launched by
/// the start, its dependent waiting; `ctl start` launches it and then its dependent; a reload
/// that adds another such helper does not launch it either.
#[test]
fn a_helper_without_autostart_waits_for_ctl_start() {
    let d = Dir::new("settings", "autostart");
    let base = r#"
[[helper]]
name = "db"
command = ["sleep", "600"]
autostart = false

[[helper]]
name = "app"
command = ["sleep", "600"]
depends_on = ["db"]

[[helper]]
name = "other"
command = ["sleep", "600"]
"#;
    let mut run = Run::start(&d, base, &[]);
    run.state("other", "running");
    run.state("db", "stopped");
    let db = helper(&run, "db");
    assert_eq!(db["state"], "stopped", "{db:#}");
    assert!(db["identity"].is_null(), "{db:#}");
    assert_eq!(db["launches"], 0, "{db:#}");
    let detail = db["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("autostart = false"), "{db:#}");
    let app = helper(&run, "app");
    assert_eq!(app["state"], "waiting", "{app:#}");
    assert!(
        app["detail"].as_str().is_some_and(|t| t.contains("for db")),
        "{app:#}"
    );
    let text = String::from_utf8_lossy(&run.ctl(&["status"]).stdout).into_owned();
    assert!(text.contains("autostart = false"), "{text}");

    let out = run.ctl(&["start", "db"]);
    assert!(out.status.success(), "{out:?}");
    run.launch("db", 1);
    run.launch("app", 1);
    run.state("app", "running");

    // A reload adding a helper without autostart declares it and launches nothing.
    d.file(
        "run.toml",
        &format!(
            "{base}\n[[helper]]\nname = \"late\"\ncommand = [\"sleep\", \"600\"]\n\
             autostart = false\n"
        ),
    );
    let out = run.ctl(&["reload"]);
    assert!(out.status.success(), "{out:?}");
    run.state("late", "stopped");
    let late = helper(&run, "late");
    assert!(late["identity"].is_null(), "{late:#}");
    assert_eq!(late["launches"], 0, "{late:#}");
    let st = run.stop();
    assert!(st.success(), "{st}");
    run.drain();
    let launched: Vec<&Value> = run
        .seen
        .iter()
        .filter(|e| e["event"] == "launch" && e["helper"] == "late")
        .collect();
    assert!(launched.is_empty(), "{launched:?}");
}

/// `env_file`: its variables reach the helper, `env` overrides them, later files override
/// earlier ones; a bad line fails the launch (status 125) naming the file and the line, and
/// `--check` names it at the configuration's place; a file others may write is refused.
#[test]
fn env_files_reach_the_helper_and_bad_ones_are_named() {
    let d = Dir::new("settings", "envfile");
    let one = d.file(
        "one.env",
        "# settings\nA=from-one\nB='quoted value'\n\nC=one\n",
    );
    let two = d.file("two.env", "export C=\"two \\\"x\\\"\"\n");
    let fifo = d.fifo("out");
    let config = format!(
        r#"
[[helper]]
name = "show"
command = ["sh", "-c", "printf '%s|%s|%s|%s\n' \"$A\" \"$B\" \"$C\" \"$D\" > {}; exec sleep 600"]
env_file = [{one:?}, {two:?}]
env = {{ A = "from-env", D = "d" }}
"#,
        fifo.display()
    );
    let mut run = Run::start(&d, &config, &[]);
    let seen = common::fifo::to_end(&fifo);
    assert_eq!(seen, "from-env|quoted value|two \"x\"|d\n");
    run.state("show", "running");
    assert!(run.stop().success());

    // A bad line: the launch fails at its planning, named by file and line.
    let bad = d.file("bad.env", "A=1\nthis is not a variable\n");
    let config = format!("[[helper]]\nname = \"bad\"\ncommand = [\"true\"]\nenv_file = {bad:?}\n");
    let (code, err) = common::check::check(&d.file("bad.toml", &config));
    assert_eq!(code, Some(2), "{err}");
    let want = format!(
        "bad.toml:4:12: helper \"bad\": key `helper[1].env_file`: env_file {}:2: ",
        bad.display()
    );
    assert!(err.contains(&want), "{err}");
    // With a helper that stays, so that the supervisor is there to ask.
    let stays = "[[helper]]\nname = \"stays\"\ncommand = [\"sleep\", \"600\"]\n";
    let mut run = Run::start(&d, &format!("{config}{stays}"), &[]);
    let e = run.wait_for("launch_failed", |e| e["event"] == "launch_failed");
    assert_eq!(e["status"]["code"], 125, "{e:#}");
    let error = e["error"].as_str().unwrap_or_default();
    assert!(error.contains(&format!("{}:2: ", bad.display())), "{e:#}");
    assert!(run.stop().success());

    // Writable by others: refused, whatever it holds.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&one, std::fs::Permissions::from_mode(0o666)).unwrap();
    let config = format!("[[helper]]\nname = \"w\"\ncommand = [\"true\"]\nenv_file = {one:?}\n");
    let (code, err) = common::check::check(&d.file("w.toml", &config));
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("group or others may write to it (mode 0666)"),
        "{err}"
    );
}

/// `backoff.limit = "unlimited"`: restarted past the default limit of 5 without giving up; a
/// limit that is not a count is told in words.
#[test]
fn an_unlimited_backoff_never_gives_up() {
    let d = Dir::new("settings", "unlimited");
    let config = "[[helper]]\nname = \"flaky\"\ncommand = [\"false\"]\nrestart = \"always\"\n\
                  backoff = { initial = \"1ms\", max = \"1ms\", limit = \"unlimited\" }\n";
    let mut run = Run::start(&d, config, &[]);
    run.launch("flaky", 12);
    assert!(
        !run.so_far().iter().any(|e| e["event"] == "give_up"),
        "{:#?}",
        run.seen
    );
    assert!(run.stop().success());

    let bad = config.replace("\"unlimited\"", "-1");
    let (code, err) = common::check::check(&d.file("bad.toml", &bad));
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("bad.toml:5:")
            && err.contains("limit = -1: expected how many restarts in a row before giving up")
            && err.contains("or \"unlimited\""),
        "{err}"
    );
}

/// `command = { shell = "..." }` runs the line with `/bin/sh -c`; a command written as one
/// string with spaces is refused at once, saying to write a list or use the shell.
#[test]
fn a_shell_line_runs_in_sh_and_a_string_with_spaces_is_refused() {
    let d = Dir::new("settings", "shell");
    let fifo = d.fifo("out");
    let config = format!(
        "[[helper]]\nname = \"sh\"\ncommand = {{ shell = \"echo one two | tr o 0 > {}; exec \
         sleep 600\" }}\n",
        fifo.display()
    );
    let mut run = Run::start(&d, &config, &[]);
    assert_eq!(common::fifo::to_end(&fifo), "0ne tw0\n");
    run.state("sh", "running");
    assert!(run.stop().success());

    let bad = d.file(
        "bad.toml",
        "[[helper]]\nname = \"web\"\ncommand = \"python3 -m http.server\"\n",
    );
    for args in [&["--check"][..], &[][..]] {
        let out = FosterRun::new().args(args).output(&bad);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("bad.toml:3:11: helper \"web\": key `helper[1].command`")
                && err.contains("write a list, command = [\"python3\", \"-m\", \"http.server\"]")
                && err.contains(
                    "command = { shell = \"python3 -m http.server\" } (run by /bin/sh -c)"
                ),
            "{args:?}: {err}"
        );
    }
}

/// The keys a table of the file takes, as an unknown key's error lists them.
fn keys_of(d: &Dir, text: &str) -> Vec<String> {
    let (code, err) = common::check::check(&d.file("keys.toml", text));
    assert_eq!(code, Some(2), "{err}");
    let list = err
        .split("unknown field `bogus`, expected ")
        .nth(1)
        .unwrap_or_else(|| panic!("{err}"));
    let list = list.lines().next().unwrap();
    let list = list.strip_prefix("one of ").unwrap_or(list);
    list.split([',', ' '])
        .filter(|w| w.starts_with('`'))
        .map(|k| k.trim_matches('`').to_string())
        .collect()
}

/// foster.toml(5) names every key the file takes (as the unknown key's error lists them),
/// renders without a warning, and foster-run(1)'s synopsis has its values' placeholders.
#[test]
fn the_configuration_page_names_every_key() {
    let d = Dir::new("settings", "man");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_foster"))
        .args(["man", "foster.toml"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let page = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(page.starts_with(".TH foster.toml 5 "), "{page}");
    let helper = "[[helper]]\nname = \"a\"\ncommand = [\"true\"]\n";
    let tables = [
        format!("{helper}bogus = 1\n"),
        format!("[supervisor]\nbogus = 1\n{helper}"),
        format!("{helper}[[helper.generation]]\nbogus = 1\n"),
        format!("{helper}backoff = {{ bogus = 1 }}\n"),
        format!("{helper}log = {{ file = \"x\", bogus = 1 }}\n"),
        format!("{helper}ring = {{ bogus = 1 }}\n"),
    ];
    for table in &tables {
        let keys = keys_of(&d, table);
        assert!(keys.len() > 1, "{table}: {keys:?}");
        for key in keys {
            let key = key.replace('-', "\\-");
            assert!(
                page.contains(&format!("\\fB{key}\\fR"))
                    || page.contains(&format!("{key},"))
                    || page.contains(&format!("{key} }}")),
                "foster.toml(5) does not name {key} (of {table:?})"
            );
        }
    }
    if std::process::Command::new("man")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        let file = d.file("foster.toml.5", &page);
        let o = std::process::Command::new("man")
            .args(["--warnings", "-P", "cat", "-l"])
            .arg(&file)
            .env("LC_ALL", "C.UTF-8")
            .output()
            .unwrap();
        let warnings = String::from_utf8_lossy(&o.stderr);
        assert!(
            o.status.success() && warnings.trim().is_empty(),
            "{warnings}"
        );
        assert!(String::from_utf8_lossy(&o.stdout).contains("EXAMPLE"));
    } else {
        common::skip::setup("man -l not checked: man (man-db) is not installed");
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_foster"))
        .args(["man", "run"])
        .output()
        .unwrap();
    let run = String::from_utf8_lossy(&out.stdout);
    for placeholder in [
        "[\\-\\-socket PATH]",
        "[\\-\\-metrics ADDR]",
        "[\\-\\-events\\-log FILE]",
    ] {
        assert!(run.contains(placeholder), "{placeholder}: {run}");
    }
}
