//! The helper settings of `foster run`'s file, end to end on the real binary: `autostart`,
//! `env_file`, `shell`, `backoff.limit = "unlimited"`. What is observed is the supervisor's
//! own record (its events, `ctl status --json`) and what the helpers wrote; deadlines are only
//! safety nets.

use serde_json::Value;

use crate::common;
use common::Dir;
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
        &format!("{base}\n[[helper]]\nname = \"late\"\ncommand = [\"sleep\", \"600\"]\nautostart = false\n"),
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
