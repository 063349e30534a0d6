//! Showing a snapshot: pstree-like text, JSON and Graphviz.
//!
//! Owns the three output forms of `foster tree` (the text's pstree options and layouts are in
//! [`crate::process::tree::pstree`]), and the [`RoleMark`]s of a supervised tree that style the
//! Graphviz
//! boxes along with each process's state. Text and Graphviz labels go through
//! [`crate::base::sanitize::escape`]: no raw control byte or escape sequence from a process name
//! reaches a terminal or a dot file. JSON strings are exact when the bytes are UTF-8 (written by
//! [`crate::base::sanitize::to_json`], which escapes C0/C1 controls, DEL and bidi or zero-width
//! formatting as `\uXXXX`, so the document is safe on a terminal too); when they are not, the
//! string holds U+FFFD in place of the bad bytes and a sibling field (`comm_escaped`,
//! `cmdline_escaped`) holds the lossless escaped form. See `docs/tree.md`.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt::Write;

use serde::Serialize;

use crate::base::sanitize::{escape, escape_args, to_json};
use crate::process::identity::Identity;
use crate::process::state::Role;
use crate::process::tree::graph::{ProcessNode, Snapshot};

/// An output form of `foster tree`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// One process a line, drawn as a tree.
    #[default]
    Text,
    /// A list of root nodes, each with its `children`.
    Json,
    /// A Graphviz `digraph`.
    Dot,
}

/// Renders `snap` in `format`; `arguments` shows full command lines in text and dot; dot boxes
/// are styled by `roles`.
pub fn render(snap: &Snapshot, format: Format, arguments: bool, roles: &Roles) -> String {
    match format {
        Format::Text => text(snap, arguments),
        Format::Json => json(snap),
        Format::Dot => dot_with_roles(snap, arguments, roles),
    }
}

/// What a line shows for a process: its escaped name, or with `arguments` its escaped command
/// line (a process without one, such as a kernel thread or a zombie, shows `[name]`).
fn label(n: &ProcessNode, arguments: bool) -> String {
    if arguments && !n.cmdline.is_empty() {
        escape_args(&n.cmdline)
    } else if arguments {
        format!("[{}]", escape(&n.comm))
    } else {
        escape(&n.comm)
    }
}

/// pstree-like text: `PID STATE NAME`, children below their parent by pid, drawn with
/// box-drawing characters.
pub fn text(snap: &Snapshot, arguments: bool) -> String {
    let mut out = String::with_capacity(snap.len() * 48);
    // Depth-first without recursion: each frame is a list of siblings and the next to print.
    let mut prefix = String::new();
    let mut stack: Vec<(Vec<&ProcessNode>, usize, usize)> = Vec::new();
    for root in snap.roots() {
        let _ = writeln!(
            out,
            "{} {} {}",
            root.pid,
            root.state as char,
            label(root, arguments)
        );
        stack.push((snap.children(&root.identity), 0, 0));
        while let Some((siblings, next, prefix_len)) = stack.last_mut() {
            if *next == siblings.len() {
                stack.pop();
                continue;
            }
            let n = siblings[*next];
            *next += 1;
            let last = *next == siblings.len();
            prefix.truncate(*prefix_len);
            let _ = writeln!(
                out,
                "{prefix}{}{} {} {}",
                if last { "└─" } else { "├─" },
                n.pid,
                n.state as char,
                label(n, arguments)
            );
            prefix.push_str(if last { "  " } else { "│ " });
            let len = prefix.len();
            let kids = snap.children(&n.identity);
            if !kids.is_empty() {
                stack.push((kids, 0, len));
            }
        }
        prefix.clear();
    }
    out
}

/// Whether a byte string is shown exactly in JSON.
fn is_utf8(b: &[u8]) -> bool {
    std::str::from_utf8(b).is_ok()
}

/// One node of the JSON document (see `docs/tree.md`).
#[derive(Serialize)]
struct JsonNode<'a> {
    pid: i32,
    ppid: i32,
    identity: Identity,
    start_time: u64,
    state: String,
    uid: u32,
    pgrp: i32,
    session: i32,
    comm: Cow<'a, str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    comm_escaped: Option<String>,
    cmdline: Vec<Cow<'a, str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cmdline_escaped: Option<Vec<String>>,
    num_threads: i64,
    rss_bytes: u64,
    cpu_ticks: u64,
    kernel_thread: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    parent: Option<Identity>,
    children: Vec<JsonNode<'a>>,
}

/// The JSON document: the schema version and the root nodes.
#[derive(Serialize)]
struct JsonDoc<'a> {
    version: u32,
    roots: Vec<JsonNode<'a>>,
}

fn json_node<'a>(snap: &'a Snapshot, n: &'a ProcessNode) -> JsonNode<'a> {
    let args_exact = n.cmdline.iter().all(|a| is_utf8(a));
    JsonNode {
        pid: n.pid,
        ppid: n.ppid,
        identity: n.identity,
        start_time: n.start_time,
        state: (n.state as char).to_string(),
        uid: n.uid,
        pgrp: n.pgrp,
        session: n.session,
        comm: String::from_utf8_lossy(&n.comm),
        comm_escaped: (!is_utf8(&n.comm)).then(|| escape(&n.comm)),
        cmdline: n
            .cmdline
            .iter()
            .map(|a| String::from_utf8_lossy(a))
            .collect(),
        cmdline_escaped: (!args_exact).then(|| n.cmdline.iter().map(|a| escape(a)).collect()),
        num_threads: n.num_threads,
        rss_bytes: n.rss_bytes,
        cpu_ticks: n.cpu_ticks,
        kernel_thread: n.kernel_thread,
        parent: n.parent,
        children: snap
            .children(&n.identity)
            .into_iter()
            .map(|c| json_node(snap, c))
            .collect(),
    }
}

/// The JSON document, `{"version": 1, "roots": [...]}`: the root nodes, each with its
/// `children`, followed by a newline. Identities are `{pid, start_time}` objects. Characters a
/// terminal must not receive raw are `\uXXXX` escapes ([`to_json`]).
pub fn json(snap: &Snapshot) -> String {
    let doc = JsonDoc {
        version: crate::base::json::VERSION,
        roots: snap.roots().map(|r| json_node(snap, r)).collect(),
    };
    let mut s = to_json(&doc).expect("a tree of plain values serializes");
    s.push('\n');
    s
}

/// Escapes text for a double-quoted dot string: names are first escaped for terminals (no
/// control characters remain), then `\` and `"` are escaped for dot.
fn dot_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            c => out.push(c),
        }
    }
    out
}

/// A Graphviz `digraph`: one box per process labelled `PID STATE NAME`, edges parent → child.
pub fn dot(snap: &Snapshot, arguments: bool) -> String {
    dot_with_roles(snap, arguments, &Roles::new())
}

/// A process's place in a supervised tree, as its supervisor reports it (`--attach`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleMark {
    /// Its role.
    pub role: Role,
    /// The helper it belongs to.
    pub helper: Option<String>,
}

impl RoleMark {
    /// The annotation foster's text layout and the dot labels show: `supervisor`, `helper
    /// NAME`, `orphan of NAME` (escaped); none for a helper's descendant under its own parent.
    pub fn note(&self) -> Option<String> {
        let helper = self.helper.as_deref().map(|h| escape(h.as_bytes()));
        match (self.role, helper) {
            (Role::Supervisor, _) => Some("supervisor".into()),
            (Role::Helper, Some(h)) => Some(format!("helper {h}")),
            (Role::Helper, None) => Some("helper".into()),
            (Role::AdoptedOrphan, Some(h)) => Some(format!("orphan of {h}")),
            (Role::AdoptedOrphan, None) => Some("orphan".into()),
            (Role::Descendant, _) => None,
        }
    }
}

/// Roles by identity.
pub type Roles = HashMap<Identity, RoleMark>;

/// The dot attributes of a process's box: its state (a zombie dashed and grey, a stopped one
/// gold, one in disk sleep pink, a running one green, a kernel thread grey) and its role (the
/// supervisor a double octagon, a helper bold, an adopted orphan blue).
fn dot_style(n: &ProcessNode, role: Option<&RoleMark>) -> String {
    let mut attrs: Vec<&str> = Vec::new();
    match n.state {
        b'Z' | b'X' => attrs.extend([
            "style=\"dashed,filled\"",
            "fillcolor=gray90",
            "fontcolor=gray40",
        ]),
        b'T' | b't' => attrs.extend(["style=filled", "fillcolor=gold"]),
        b'D' => attrs.extend(["style=filled", "fillcolor=pink"]),
        b'R' => attrs.extend(["style=filled", "fillcolor=palegreen"]),
        _ if n.kernel_thread => attrs.push("color=gray60"),
        _ => {}
    }
    match role.map(|r| r.role) {
        Some(Role::Supervisor) => attrs.extend(["shape=doubleoctagon", "penwidth=2"]),
        Some(Role::Helper) => attrs.push("penwidth=3"),
        Some(Role::AdoptedOrphan) => attrs.extend(["color=blue", "penwidth=2"]),
        _ => {}
    }
    attrs.iter().map(|a| format!(", {a}")).collect()
}

/// [`dot`] with each box styled by its state and, from `roles`, by its role in a supervised
/// tree, whose label gains the role's note on a second line.
pub fn dot_with_roles(snap: &Snapshot, arguments: bool, roles: &Roles) -> String {
    let mut out = String::from(
        "digraph processes {\n  rankdir=LR;\n  node [shape=box, fontname=\"monospace\"];\n",
    );
    let mut nodes: Vec<&ProcessNode> = snap.nodes().collect();
    nodes.sort_unstable_by_key(|n| n.pid);
    for n in &nodes {
        let role = roles.get(&n.identity);
        let mut text = dot_string(&format!(
            "{} {} {}",
            n.pid,
            n.state as char,
            label(n, arguments)
        ));
        if let Some(note) = role.and_then(RoleMark::note) {
            text.push_str("\\n");
            text.push_str(&dot_string(&note));
        }
        let _ = writeln!(
            out,
            "  p{} [label=\"{}\"{}];",
            n.pid,
            text,
            dot_style(n, role)
        );
    }
    for n in &nodes {
        for c in snap.children(&n.identity) {
            let _ = writeln!(out, "  p{} -> p{};", n.pid, c.pid);
        }
    }
    out.push_str("}\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture() -> Snapshot {
        Snapshot::from_nodes(vec![
            ProcessNode::new(1, 0, 1, b"init").with_cmdline(&["/sbin/init"]),
            ProcessNode::new(2, 0, 1, b"kthreadd"),
            ProcessNode::new(5, 2, 2, b"kworker/0:1"),
            ProcessNode::new(10, 1, 3, b"\x1b]0;owned\x07")
                .with_cmdline(&[&b"evil\x1b[2J"[..], b"a\"b\\c"]),
            ProcessNode::new(11, 10, 4, b"a) b (c").with_state(b'Z'),
            ProcessNode::new(12, 10, 5, b"\xff\xfe-x").with_cmdline(&[&b"\xffarg"[..], b"ok"]),
            ProcessNode::new(13, 12, 6, b"new\nline"),
            ProcessNode::new(20, 1, 7, b"last"),
        ])
    }

    fn no_control(s: &str) {
        for (i, c) in s.chars().enumerate() {
            assert!(
                c == '\n' || !c.is_control(),
                "control char {c:?} at {i} in {s:?}"
            );
        }
    }

    #[test]
    fn text_draws_the_tree_escaped() {
        let t = text(&fixture(), false);
        assert_eq!(
            t,
            "1 S init\n\
             ├─10 S \\e]0;owned\\x07\n\
             │ ├─11 Z a) b (c\n\
             │ └─12 S \\xff\\xfe-x\n\
             │   └─13 S new\\nline\n\
             └─20 S last\n\
             2 S kthreadd\n\
             └─5 S kworker/0:1\n"
        );
        no_control(&t);
    }

    #[test]
    fn text_with_arguments() {
        let t = text(&fixture(), true);
        assert!(
            t.starts_with("1 S /sbin/init\n├─10 S evil\\e[2J a\"b\\\\c\n"),
            "{t}"
        );
        assert!(t.contains("│ ├─11 Z [a) b (c]\n"), "{t}");
        assert!(t.contains("└─12 S \\xffarg ok\n"), "{t}");
        assert!(t.contains("\n2 S [kthreadd]\n"), "{t}");
        no_control(&t);
    }

    #[test]
    fn json_is_a_versioned_list_of_roots_with_children() {
        let v: serde_json::Value = serde_json::from_str(&json(&fixture())).unwrap();
        assert_eq!(v["version"], crate::base::json::VERSION);
        let roots = v["roots"].as_array().unwrap();
        assert_eq!(roots.len(), 2);
        let init = &roots[0];
        assert_eq!(init["pid"], 1);
        assert_eq!(init["ppid"], 0);
        assert_eq!(init["start_time"], 1);
        assert_eq!(
            init["identity"],
            serde_json::json!({"pid": 1, "start_time": 1})
        );
        assert_eq!(init["state"], "S");
        assert_eq!(init["comm"], "init");
        assert_eq!(init["cmdline"][0], "/sbin/init");
        assert!(init.get("comm_escaped").is_none());
        let kids = init["children"].as_array().unwrap();
        assert_eq!(kids.len(), 2);
        let evil = &kids[0];
        // Valid UTF-8 control characters are exact in JSON (escaped by JSON itself).
        assert_eq!(evil["comm"], "\u{1b}]0;owned\u{7}");
        assert!(evil.get("comm_escaped").is_none());
        assert_eq!(
            evil["parent"],
            serde_json::json!({"pid": 1, "start_time": 1})
        );
        let bad = &evil["children"][1];
        assert_eq!(bad["pid"], 12);
        assert_eq!(bad["comm"], "\u{fffd}\u{fffd}-x");
        assert_eq!(bad["comm_escaped"], "\\xff\\xfe-x");
        assert_eq!(bad["cmdline_escaped"][0], "\\xffarg");
        assert_eq!(bad["cmdline_escaped"][1], "ok");
        assert_eq!(bad["children"][0]["comm"], "new\nline");
        assert_eq!(roots[1]["children"][0]["comm"], "kworker/0:1");
    }

    #[test]
    fn json_escapes_c1_and_bidi_but_keeps_the_name() {
        let name = "x\u{9b}2J\u{202e}\u{7f}";
        let snap = Snapshot::from_nodes(vec![ProcessNode::new(1, 0, 1, name.as_bytes())]);
        let j = json(&snap);
        assert!(j.contains(r#""comm":"x\u009b2J\u202e\u007f""#), "{j}");
        assert!(
            !j.trim_end().chars().any(crate::base::sanitize::is_unsafe),
            "{j:?}"
        );
        let v: serde_json::Value = serde_json::from_str(&j).unwrap();
        assert_eq!(v["roots"][0]["comm"], name);
        assert!(v["roots"][0].get("comm_escaped").is_none());
    }

    #[test]
    fn dot_labels_are_escaped_twice() {
        let d = dot(&fixture(), true);
        assert!(d.starts_with("digraph processes {\n"));
        assert!(d.ends_with("}\n"));
        assert!(
            d.contains("  p10 [label=\"10 S evil\\\\e[2J a\\\"b\\\\\\\\c\"];\n"),
            "{d}"
        );
        assert!(d.contains("  p1 -> p10;\n  p1 -> p20;\n"), "{d}");
        assert!(d.contains("  p12 -> p13;\n"));
        no_control(&d);
        // Every label is one balanced quoted string, followed only by style attributes.
        for line in d.lines().filter(|l| l.contains("[label=")) {
            let inner = line.split_once("[label=\"").unwrap().1;
            let mut chars = inner.char_indices();
            let mut end = None;
            while let Some((i, c)) = chars.next() {
                if c == '"' {
                    end = Some(i);
                    break;
                }
                if c == '\\' {
                    chars.next();
                }
            }
            let rest = &inner[end.expect("a closing quote") + 1..];
            assert!(
                rest == "];" || (rest.starts_with(", ") && rest.ends_with("];")),
                "{line}"
            );
            assert!(!rest.contains("label"), "{line}");
        }
    }

    #[test]
    fn dot_boxes_are_styled_by_state_and_role() {
        let snap = Snapshot::from_nodes(vec![
            ProcessNode::new(1, 0, 1, b"foster"),
            ProcessNode::new(2, 1, 2, b"helper"),
            ProcessNode::new(3, 2, 3, b"z").with_state(b'Z'),
            ProcessNode::new(4, 2, 4, b"stopped").with_state(b'T'),
            ProcessNode::new(5, 1, 5, b"orphan"),
            ProcessNode::new(6, 1, 6, b"plain"),
        ]);
        let id = |pid| snap.identity_of(pid).unwrap();
        let mark = |role, helper: Option<&str>| RoleMark {
            role,
            helper: helper.map(str::to_string),
        };
        let roles = Roles::from([
            (id(1), mark(Role::Supervisor, None)),
            (id(2), mark(Role::Helper, Some("web\x1b"))),
            (id(5), mark(Role::AdoptedOrphan, Some("web"))),
        ]);
        let d = dot_with_roles(&snap, false, &roles);
        assert!(
            d.contains("p1 [label=\"1 S foster\\nsupervisor\", shape=doubleoctagon, penwidth=2];"),
            "{d}"
        );
        assert!(
            d.contains("p2 [label=\"2 S helper\\nhelper web\\\\e\", penwidth=3];"),
            "{d}"
        );
        assert!(
            d.contains("p3 [label=\"3 Z z\", style=\"dashed,filled\", fillcolor=gray90"),
            "{d}"
        );
        assert!(
            d.contains("p4 [label=\"4 T stopped\", style=filled, fillcolor=gold];"),
            "{d}"
        );
        assert!(
            d.contains("p5 [label=\"5 S orphan\\norphan of web\", color=blue, penwidth=2];"),
            "{d}"
        );
        assert!(d.contains("p6 [label=\"6 S plain\"];"), "{d}");
        no_control(&d);
        // Without roles, only the states style the boxes.
        assert!(dot(&snap, false).contains("p1 [label=\"1 S foster\"];"));
    }
}
