//! Every kind of JSON foster writes, from real commands and a real supervisor, validated
//! against its JSON Schema in `docs/schema/` (`docs/json.md` describes them): `tree --json`,
//! `identity --json`, `qualify --json`, the control socket's replies (`ctl --json`, for every
//! request), the events log, output lines (`run --output json`, `ctl --json logs`), and
//! `demo --json` (events with the helpers' output lines among them).

use crate::common;

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

/// Asserts that the JSON text `doc` (a document, or one line of a stream) has `version` as its
/// first key, as docs/json.md shows every kind: a reader that looks at a line's start (a log
/// shipper's filter, `head -c`) finds it there.
fn version_first(what: &str, doc: &str) {
    let start: String = doc
        .chars()
        .filter(|c| !c.is_whitespace())
        .take(11)
        .collect();
    assert_eq!(
        start,
        "{\"version\":",
        "{what}: version is not the first key: {}",
        doc.chars().take(300).collect::<String>()
    );
}

/// The lines of a JSON stream, each with `version` first.
fn json_lines(what: &str, bytes: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(bytes)
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            version_first(what, l);
            serde_json::from_str(l).unwrap_or_else(|e| panic!("{what}: {e}: {l}"))
        })
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
    version_first("tree --json", &String::from_utf8_lossy(&out.stdout));
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
    version_first("identity --json", &String::from_utf8_lossy(&out.stdout));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    valid(&schema("identity"), "identity --json", &v);
    let text = Command::new(FOSTER)
        .args(["identity", &me])
        .output()
        .unwrap();
    let id = foster::process::identity::Identity::of(std::process::id() as i32).unwrap();
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
    version_first("qualify --json", &String::from_utf8_lossy(&out.stdout));
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
    let replies = |run: &Run, kinds: &mut BTreeSet<String>, what: &str, args: &[&str], ok: bool| {
        let out = run.ctl(args);
        assert_eq!(out.status.success(), ok, "{what}: {out:?}");
        for r in json_lines(what, &out.stdout) {
            valid(&control, what, &r);
            kinds.extend(r.as_object().unwrap().keys().cloned());
        }
    };
    replies(&run, &mut kinds, "status", &["--json", "status"], true);
    replies(
        &run,
        &mut kinds,
        "events",
        &["--json", "events", "--no-follow"],
        true,
    );
    replies(
        &run,
        &mut kinds,
        "signal",
        &["--json", "signal", "talker", "TERM"],
        true,
    );
    replies(
        &run,
        &mut kinds,
        "no such helper",
        &["--json", "restart", "nobody"],
        false,
    );
    replies(&run, &mut kinds, "reload", &["--json", "reload"], true);
    replies(&run, &mut kinds, "metrics", &["--json", "metrics"], true);
    run.launch("talker", 2);
    // Every request of a helper's life, and the log files reopened.
    replies(
        &run,
        &mut kinds,
        "restart",
        &["--json", "restart", "talker"],
        true,
    );
    run.launch("talker", 3);
    replies(
        &run,
        &mut kinds,
        "stop",
        &["--json", "stop", "talker"],
        true,
    );
    replies(
        &run,
        &mut kinds,
        "start",
        &["--json", "start", "talker"],
        true,
    );
    run.launch("talker", 4);
    replies(
        &run,
        &mut kinds,
        "reopen-logs",
        &["--json", "reopen-logs"],
        true,
    );
    for k in ["status", "event", "done", "error", "reloaded", "metrics"] {
        assert!(kinds.contains(k), "no {k} reply among {kinds:?}");
    }

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
    let tree: Vec<foster::process::identity::Identity> = v["status"]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| serde_json::from_value(p.clone()).unwrap())
        .collect();
    assert!(tree.len() >= 2, "the supervisor and talker: {v}");

    // The shutdown's reply too.
    replies(&run, &mut kinds, "shutdown", &["--json", "shutdown"], true);
    run.wait();
    for id in &tree {
        let now = foster::process::identity::Identity::of(id.pid).ok();
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

/// `foster run --output json`'s own standard output (not the control socket's copy): a
/// helper's line of each stream, each an output line of the schema.
#[test]
fn run_output_json_lines_match_their_schema() {
    let d = Dir::new("json", "output");
    let config = d.file(
        "run.toml",
        "[[helper]]\nname = \"talker\"\ncommand = [\"sh\", \"-c\", \"echo out; echo err >&2\"]\n\
         restart = \"never\"\n",
    );
    let child = Command::new(FOSTER)
        .args(["run", "--no-contain", "--no-socket", "--output", "json"])
        .arg(&config)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The helper's end leaves nothing running: foster ends on its own.
    let out = common::child::output_within(child, "foster run --output json");
    assert!(out.status.success(), "{out:?}");
    let lines = json_lines("run --output json", &out.stdout);
    let line = schema("output-line");
    for l in &lines {
        valid(&line, "a line of run --output json", l);
    }
    let got: BTreeSet<(&str, &str)> = lines
        .iter()
        .map(|l| (l["stream"].as_str().unwrap(), l["text"].as_str().unwrap()))
        .collect();
    assert_eq!(
        got,
        BTreeSet::from([("stdout", "out"), ("stderr", "err")]),
        "{lines:?}"
    );
}

/// `foster demo --json`: its lines are control replies (events) and, among them, the helpers'
/// output lines, each of its schema, up to the adoption of its orphan; then it is stopped and
/// nothing of it is left.
#[test]
fn demo_json_matches_the_control_schema() {
    let d = Dir::new("json", "demo");
    let sock = d.path("demo.sock");
    // Ended and reaped on drop too: an assertion that fails in the loop below leaves no demo.
    let mut guard = common::supervised::Guard(
        Command::new(FOSTER)
            .args(["demo", "--json", "--socket"])
            .arg(&sock)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let child = &mut guard.0;
    let rx = common::lines::lines(child.stdout.take().unwrap());
    let control = schema("control");
    let line = schema("output-line");
    let t = std::time::Instant::now();
    let mut seen = BTreeSet::new();
    let mut helper_lines = 0;
    // Up to the orphan's adoption and a line of a helper's (the crasher's first one comes
    // before its exit, which makes foster find the orphan).
    let mut adopted = false;
    while !adopted || helper_lines == 0 {
        let Ok(l) = rx.recv_timeout(common::LIMIT.saturating_sub(t.elapsed())) else {
            break;
        };
        version_first("a line of demo --json", &l);
        let v: Value = serde_json::from_str(&l).unwrap_or_else(|e| panic!("{e}: {l}"));
        // The helpers' own lines among the events, as docs/json.md says: told by `stream`.
        if v.get("stream").is_some() {
            valid(&line, "a helper's line of demo --json", &v);
            helper_lines += 1;
            continue;
        }
        valid(&control, "an event of demo --json", &v);
        seen.insert(v["event"]["event"].as_str().unwrap_or("").to_string());
        adopted |= v["event"]["event"] == "reparented";
    }
    // Every process of the demo, to check that none outlives it.
    let status = Command::new(FOSTER)
        .args(["ctl", "--json", "--socket"])
        .arg(&sock)
        .arg("status")
        .output()
        .unwrap();
    // SAFETY: kill of our own child, not reaped yet.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let st = common::child::wait_within(child, common::LIMIT);
    if st.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    assert!(adopted, "no adoption among the demo's events: {seen:?}");
    assert!(helper_lines > 0, "no helper's line among the demo's events");
    assert_eq!(st.and_then(|s| s.code()), Some(0), "the demo after SIGTERM");
    assert!(status.status.success(), "{status:?}");
    let v: Value = serde_json::from_slice(&status.stdout).unwrap();
    valid(&control, "the demo's status", &v);
    let tree: Vec<foster::process::identity::Identity> = v["status"]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| serde_json::from_value(p.clone()).unwrap())
        .collect();
    assert!(tree.len() >= 4, "{v}");
    let t = std::time::Instant::now();
    loop {
        let left: Vec<_> = tree.iter().filter(|id| id.is_alive()).collect();
        if left.is_empty() {
            break;
        }
        assert!(t.elapsed() < common::LIMIT, "left after the demo: {left:?}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
