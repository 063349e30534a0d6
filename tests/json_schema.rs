//! Every kind of JSON foster writes, from real commands and a real supervisor, validated
//! against its JSON Schema in `docs/schema/` (`docs/json.md` describes them): `tree --json`,
//! `identity --json`, `qualify --json`, the control socket's replies (`ctl --json`), the
//! events log, and output lines (`ctl --json logs`, the form of `run --output json`).

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use common::Dir;
use common::supervised::Run;

const FOSTER: &str = env!("CARGO_BIN_EXE_foster");

/// The validator of `docs/schema/NAME.schema.json`.
fn schema(name: &str) -> jsonschema::Validator {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs/schema")
        .join(format!("{name}.schema.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    assert_eq!(v["$id"], format!("urn:foster:schema:{name}"), "{path:?}");
    jsonschema::validator_for(&v).unwrap_or_else(|e| panic!("{path:?} is not a schema: {e}"))
}

/// Asserts that `doc` validates against `validator`, listing every error when not.
fn valid(validator: &jsonschema::Validator, what: &str, doc: &Value) {
    let errors: Vec<String> = validator
        .iter_errors(doc)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    if !errors.is_empty() {
        let text = doc.to_string();
        let cut = text.char_indices().nth(2000).map_or(text.len(), |(i, _)| i);
        let errors: Vec<String> = errors
            .iter()
            .map(|e| e.chars().take(400).collect())
            .collect();
        panic!(
            "{what} does not match its schema:\n{}\n{}",
            errors.join("\n"),
            &text[..cut]
        );
    }
    assert_eq!(doc["version"], 1, "{what}: {doc}");
}

fn json_lines(what: &str, bytes: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(bytes)
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{what}: {e}: {l}")))
        .collect()
}

#[test]
fn every_schema_is_a_schema() {
    for name in [
        "tree",
        "identity",
        "qualify",
        "control",
        "event",
        "output-line",
    ] {
        schema(name);
    }
}

#[test]
fn tree_json_matches_its_schema() {
    let out = Command::new(FOSTER)
        .args(["tree", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    valid(&schema("tree"), "tree --json", &v);
    // The identity is the object form, the same as the control socket's.
    let me = std::process::id();
    let mut stack: Vec<&Value> = v["roots"].as_array().unwrap().iter().collect();
    let mut found = false;
    while let Some(n) = stack.pop() {
        assert_eq!(n["identity"]["pid"], n["pid"], "{n}");
        assert_eq!(n["identity"]["start_time"], n["start_time"], "{n}");
        found |= n["pid"] == me;
        stack.extend(n["children"].as_array().unwrap());
    }
    assert!(found, "this test's process {me} is not in the tree");
}

#[test]
fn identity_json_matches_its_schema() {
    let me = std::process::id().to_string();
    let out = Command::new(FOSTER)
        .args(["identity", "--json", &me])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    valid(&schema("identity"), "identity --json", &v);
    let text = Command::new(FOSTER)
        .args(["identity", &me])
        .output()
        .unwrap();
    let id = foster::identity::Identity::of(std::process::id() as i32).unwrap();
    assert_eq!(String::from_utf8_lossy(&text.stdout).trim(), id.to_string());
    assert_eq!(v["identity"]["pid"], id.pid);
    assert_eq!(v["identity"]["start_time"], id.start_time);
}

#[test]
fn qualify_json_matches_its_schema() {
    let out = Command::new(FOSTER)
        .args(["qualify", "--json", "--case", "normal"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    valid(&schema("qualify"), "qualify --json", &v);
    assert_eq!(v["cases"][0]["case"], "normal", "{v}");
}

/// A supervisor with a helper that writes on both streams, and one that leaves an orphan and
/// fails (its end makes foster read its tree, where it finds the orphan adopted): `ctl --json` replies of every kind, the events log and output lines, each validated.
#[test]
fn a_supervisors_json_matches_the_schemas() {
    let d = Dir::new("json", "supervisor");
    let log = d.path("events.jsonl");
    let config = r#"
[[helper]]
name = "talker"
command = ["sh", "-c", "echo out; echo err >&2; exec sleep 600"]
restart = "always"

[[helper]]
name = "quitter"
command = ["sh", "-c", "(sleep 600 &); exit 3"]
restart = "never"
"#;
    let mut run = Run::start(
        &d,
        config,
        &["--no-contain", "--events-log", log.to_str().unwrap()],
    );
    run.until("the orphan's adoption", |e| e["event"] == "reparented");
    run.until("quitter's exit", |e| {
        e["event"] == "exit" && e["helper"] == "quitter"
    });
    let control = schema("control");
    let mut kinds = BTreeSet::new();
    let mut replies = |what: &str, args: &[&str], ok: bool| {
        let out = run.ctl(args);
        assert_eq!(out.status.success(), ok, "{what}: {out:?}");
        for r in json_lines(what, &out.stdout) {
            valid(&control, what, &r);
            kinds.extend(r.as_object().unwrap().keys().cloned());
        }
    };
    replies("status", &["--json", "status"], true);
    replies("events", &["--json", "events", "--no-follow"], true);
    replies("signal", &["--json", "signal", "talker", "TERM"], true);
    replies("no such helper", &["--json", "restart", "nobody"], false);
    replies("reload", &["--json", "reload"], true);
    replies("metrics", &["--json", "metrics"], true);
    for k in ["status", "event", "done", "error", "reloaded", "metrics"] {
        assert!(kinds.contains(k), "no {k} reply among {kinds:?}");
    }
    run.launch("talker", 2);

    // Output lines: the relay's JSON form, as `run --output json` writes them.
    let out = run.ctl(&["--json", "logs", "talker"]);
    assert!(out.status.success(), "{out:?}");
    let lines = json_lines("logs", &out.stdout);
    let line = schema("output-line");
    for l in &lines {
        valid(&line, "an output line", l);
    }
    let streams: BTreeSet<&str> = lines.iter().filter_map(|l| l["stream"].as_str()).collect();
    assert_eq!(streams, BTreeSet::from(["stderr", "stdout"]), "{lines:?}");

    // The status reply spells identities and signals the one way.
    let out = run.ctl(&["--json", "status"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let talker = &v["status"]["helpers"][0];
    assert_eq!(talker["stop_signal"], "SIGTERM", "{talker}");
    assert!(talker["identity"]["pid"].is_number(), "{talker}");
    let tree: Vec<foster::identity::Identity> = v["status"]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| serde_json::from_value(p.clone()).unwrap())
        .collect();
    assert!(tree.len() >= 2, "the supervisor and talker: {v}");

    run.stop();
    for id in &tree {
        let now = foster::identity::Identity::of(id.pid).ok();
        assert_ne!(now.as_ref(), Some(id), "{id} outlived its supervisor");
    }
    run.drain();
    let text = std::fs::read(&log).unwrap();
    let records = json_lines("events log", &text);
    let event = schema("event");
    let mut seen = BTreeSet::new();
    for r in &records {
        valid(&event, "an events log line", r);
        seen.insert(r["event"].as_str().unwrap().to_string());
    }
    for k in [
        "start",
        "launch",
        "state",
        "reparented",
        "signal",
        "exit",
        "restart",
        "reload",
        "shutdown",
        "stopped",
    ] {
        assert!(seen.contains(k), "no {k} event in the log: {seen:?}");
    }
    let signal = records.iter().find(|r| r["event"] == "signal").unwrap();
    assert_eq!(signal["signal"], "SIGTERM", "{signal}");
}
