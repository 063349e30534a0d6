//! pstree's options for `foster tree`'s text: the view they select and both text layouts.
//!
//! Owns [`View`] (what psmisc's `pstree` options ask: compaction, pids, pgids, uid changes,
//! threads, the parents of the root, highlighting, the line width, the order of siblings), the
//! [`VNode`] tree built from a snapshot for it, and the two text layouts: foster's own (one
//! process a line, `PID STATE NAME`, [`foster_layout`]) and pstree's (`--plain`,
//! [`plain_layout`]), which follows pstree's drawing, compaction (`3*[sleep]`), `(pid,pgid,user)`
//! notes and cutting of long lines to the byte. Names and arguments go through
//! [`crate::base::sanitize::escape`]: where pstree writes a byte outside printable ASCII as `\ooo`,
//! foster writes its own escapes (`\e`, `\xNN`, `\u{...}`) and keeps printable Unicode.
//! `docs/tree.md` lists where the layouts differ from pstree on purpose.

use std::collections::{HashMap, HashSet};

use crate::base::sanitize::{escape, escape_args};
use crate::process::tree::graph::{ProcessNode, Snapshot};
use crate::process::tree::render::{RoleMark, Roles};
use crate::process::tree::scan::Thread;

/// How threads are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Threads {
    /// Not shown.
    Hide,
    /// Shown as `{NAME}` with the process's name (pstree's default).
    #[default]
    ProcessName,
    /// Shown as `{NAME}` with each thread's own name (`-t`).
    OwnName,
}

/// The box-drawing characters of the plain layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Symbols {
    /// `|-`, `` `- ``, `-+-`: pstree's choice when standard output is not a UTF-8 terminal.
    #[default]
    Ascii,
    /// `├─`, `└─`, `─┬─`.
    Unicode,
}

/// What the text shows, from pstree's options.
#[derive(Debug, Clone, Default)]
pub struct View {
    /// Merge identical sibling subtrees into `N*[...]` (plain layout only; off with `-c`, `-p`
    /// or `-a`, which still merges threads, as pstree).
    pub compact: bool,
    /// Show pids in the plain layout (`-p`); foster's layout always shows them.
    pub pids: bool,
    /// Show process group ids (`-g`).
    pub pgids: bool,
    /// Show the user where a process's uid differs from its parent's (`-u`).
    pub uid_changes: bool,
    /// Show full command lines (`-a`).
    pub arguments: bool,
    /// How threads are shown.
    pub threads: Threads,
    /// Show the ancestors of the root, one chain above it (`-s`).
    pub parents: bool,
    /// Highlight these processes (the current one and its ancestors with `-h`, or those of
    /// `-H PID`): bold when `bold` is set.
    pub highlight: Option<i32>,
    /// The escape sequences that start and end bold text; `None` shows no highlight.
    pub bold: Option<(&'static str, &'static str)>,
    /// Cut lines to this many columns, marking a cut line with `+` (`None`: `-l`, never).
    pub width: Option<usize>,
    /// Siblings by pid (`-n`) rather than by name (pstree's default in the plain layout).
    pub by_pid: bool,
    /// pstree's layout (`--plain`) rather than foster's.
    pub plain: bool,
    /// Line-drawing characters of the plain layout.
    pub symbols: Symbols,
}

/// ANSI bold on and off (terminfo's `md` and `me` on every terminal foster knows).
pub const BOLD: (&str, &str) = ("\x1b[1m", "\x1b[0m");

/// One line of the view: a process or a thread, with its children in the order shown.
#[derive(Debug, Clone)]
pub struct VNode<'a> {
    /// The process (for a thread: its process).
    pub node: &'a ProcessNode,
    /// The thread when this is one.
    pub thread: Option<Thread>,
    /// Highlighted.
    pub highlight: bool,
    /// Its role's note in a supervised tree (foster's layout only).
    pub note: Option<String>,
    /// The children shown.
    pub children: Vec<VNode<'a>>,
}

impl VNode<'_> {
    /// The pid, or the thread's id.
    pub fn id(&self) -> i32 {
        self.thread.as_ref().map_or(self.node.pid, |t| t.tid)
    }

    /// The state letter.
    pub fn state(&self) -> u8 {
        self.thread.as_ref().map_or(self.node.state, |t| t.state)
    }

    /// The name as shown: the escaped `comm`, a thread's in braces.
    pub fn name(&self, view: &View) -> String {
        match &self.thread {
            None => escape(&self.node.comm),
            Some(t) if view.threads == Threads::OwnName => format!("{{{}}}", escape(&t.comm)),
            Some(_) => format!("{{{}}}", escape(&self.node.comm)),
        }
    }

    /// The raw name bytes pstree sorts by (a thread's with its braces).
    fn sort_name(&self, view: &View) -> Vec<u8> {
        match &self.thread {
            None => self.node.comm.clone(),
            Some(t) => {
                let c = if view.threads == Threads::OwnName {
                    &t.comm
                } else {
                    &self.node.comm
                };
                let mut v = Vec::with_capacity(c.len() + 2);
                v.push(b'{');
                v.extend_from_slice(c);
                v.push(b'}');
                v
            }
        }
    }
}

/// The threads of the processes a view shows, by pid.
pub type ThreadMap = HashMap<i32, Vec<Thread>>;

/// Builds the view of `snap` (every root, or the subtree the caller cut), with the chain of
/// `ancestors` (outermost first) above its only root when `view.parents`; the pids in `marked`
/// are highlighted.
pub fn build<'a>(
    snap: &'a Snapshot,
    ancestors: &'a [ProcessNode],
    threads: &ThreadMap,
    view: &View,
    marked: &HashSet<i32>,
    roles: &Roles,
) -> Vec<VNode<'a>> {
    let mut roots: Vec<VNode<'a>> = snap
        .roots()
        .map(|r| node(snap, r, threads, view, marked, roles))
        .collect();
    if view.parents && !ancestors.is_empty() && roots.len() == 1 {
        let mut below = roots.pop().expect("one root");
        for a in ancestors.iter().rev() {
            below = VNode {
                node: a,
                thread: None,
                highlight: marked.contains(&a.pid),
                note: roles.get(&a.identity).and_then(RoleMark::note),
                children: vec![below],
            };
        }
        roots.push(below);
    }
    roots
}

fn node<'a>(
    snap: &'a Snapshot,
    n: &'a ProcessNode,
    threads: &ThreadMap,
    view: &View,
    marked: &HashSet<i32>,
    roles: &Roles,
) -> VNode<'a> {
    let mut children: Vec<VNode<'a>> = snap
        .children(&n.identity)
        .into_iter()
        .map(|c| node(snap, c, threads, view, marked, roles))
        .collect();
    if view.threads != Threads::Hide
        && let Some(ts) = threads.get(&n.pid)
    {
        children.extend(ts.iter().map(|t| VNode {
            node: n,
            thread: Some(t.clone()),
            highlight: false,
            note: None,
            children: Vec::new(),
        }));
    }
    if view.plain && !view.by_pid {
        // pstree: by name, then by uid; equal ones in the order read (by pid).
        children.sort_by_cached_key(|c| (c.sort_name(view), c.node.uid, c.id()));
    } else {
        children.sort_by_key(VNode::id);
    }
    VNode {
        node: n,
        thread: None,
        highlight: marked.contains(&n.pid),
        note: roles.get(&n.identity).and_then(RoleMark::note),
        children,
    }
}

/// The name of `uid`, or the number when it has none.
fn user_name(uid: u32) -> String {
    match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
        Ok(Some(u)) => escape(u.name.as_bytes()),
        _ => uid.to_string(),
    }
}

/// The `(...)` notes after a name: pid (plain layout with `-p`), pgid (`-g`), user (`-u`, when
/// it differs from the parent's), comma-separated.
fn notes(v: &VNode, view: &View, parent_uid: u32, pid: bool) -> Vec<String> {
    let mut out = Vec::new();
    if pid {
        out.push(v.id().to_string());
    }
    if view.pgids {
        out.push(v.node.pgrp.to_string());
    }
    if view.uid_changes && v.node.uid != parent_uid {
        out.push(user_name(v.node.uid));
    }
    out
}

/// The escaped arguments after the name (`-a`) as pstree takes them: from the first
/// `width + 1` bytes of the command line (8193 with `-l`), the last one cut there; an empty
/// argument ends the list when the command line was read whole, so that each real argument has
/// a space before it and one read in part (the last) has none.
fn pstree_args(v: &VNode, width: Option<usize>) -> Vec<String> {
    if v.thread.is_some() || v.node.cmdline.is_empty() {
        return Vec::new();
    }
    let limit = width.map_or(8193, |w| w.saturating_add(1));
    let mut raw: Vec<u8> = Vec::new();
    for a in v.node.cmdline.iter() {
        raw.extend_from_slice(a);
        raw.push(0);
        if raw.len() >= limit {
            break;
        }
    }
    if raw.len() >= limit {
        raw.truncate(limit - 1);
    }
    raw.push(0);
    // After the name, each NUL-ended piece is an argument; a run of NULs counts once.
    let body = &raw[..raw.len() - 1];
    let mut argc = 0;
    let mut i = 0;
    while i < body.len() {
        if body[i] == 0 {
            argc += 1;
            while i < body.len() && body[i] == 0 {
                i += 1;
            }
        } else {
            i += 1;
        }
    }
    let Some(first) = raw.iter().position(|&b| b == 0) else {
        return Vec::new();
    };
    raw[first + 1..]
        .split(|&b| b == 0)
        .take(argc)
        .map(|a| escape_args(std::slice::from_ref(&a.to_vec())))
        .collect()
}

/// Whether `v` has no command line (a kernel thread or a zombie): `-a` shows it as `(name)` in
/// the plain layout, `[name]` in foster's.
fn no_cmdline(v: &VNode) -> bool {
    v.thread.is_none() && v.node.cmdline.is_empty()
}

/// A line cut to `width` columns the way pstree cuts: the first `width - 1` characters and `+`.
/// Bold sequences are not counted.
fn cut(line: &str, width: Option<usize>) -> String {
    let Some(w) = width else {
        return line.to_string();
    };
    let mut out = String::with_capacity(line.len().min(w * 4 + 8));
    let mut x = 1usize;
    let mut chars = line.chars().peekable();
    let mut bold_open = false;
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            // One SGR sequence, copied whole and not counted.
            let mut seq = String::from(c);
            for d in chars.by_ref() {
                seq.push(d);
                if d == 'm' {
                    break;
                }
            }
            if x <= w {
                bold_open = seq != BOLD.1;
                out.push_str(&seq);
            } else if seq == BOLD.1 && bold_open {
                out.push_str(&seq);
                bold_open = false;
            }
            continue;
        }
        x += 1;
        if x <= w {
            out.push(c);
        } else if x == w + 1 {
            out.push('+');
        }
    }
    out
}

/// foster's layout: one process (or thread) a line, `PID STATE NAME`, then the notes of `-g`
/// and `-u` in parentheses, children below by pid drawn with box-drawing characters.
pub fn foster_layout(roots: &[VNode], view: &View) -> String {
    let mut out = String::new();
    for r in roots {
        foster_line(&mut out, r, view, "", None, 0);
    }
    out
}

fn foster_line(
    out: &mut String,
    v: &VNode,
    view: &View,
    prefix: &str,
    last: Option<bool>,
    parent_uid: u32,
) {
    let mut line = String::from(prefix);
    match last {
        Some(true) => line.push_str("└─"),
        Some(false) => line.push_str("├─"),
        None => {}
    }
    let name = if view.arguments && !no_cmdline(v) && v.thread.is_none() {
        escape_args(&v.node.cmdline)
    } else if view.arguments && v.thread.is_none() {
        format!("[{}]", escape(&v.node.comm))
    } else {
        v.name(view)
    };
    let ns = notes(v, view, parent_uid, false);
    let mut body = if ns.is_empty() {
        format!("{} {} {}", v.id(), v.state() as char, name)
    } else {
        format!(
            "{} {} {}({})",
            v.id(),
            v.state() as char,
            name,
            ns.join(",")
        )
    };
    if let Some(note) = &v.note {
        body.push_str(&format!(" [{note}]"));
    }
    match (v.highlight, view.bold) {
        (true, Some((on, off))) => {
            line.push_str(on);
            line.push_str(&body);
            line.push_str(off);
        }
        _ => line.push_str(&body),
    }
    out.push_str(&cut(&line, view.width));
    out.push('\n');
    let child_prefix = match last {
        Some(true) => format!("{prefix}  "),
        Some(false) => format!("{prefix}│ "),
        None => String::new(),
    };
    let n = v.children.len();
    for (i, c) in v.children.iter().enumerate() {
        foster_line(out, c, view, &child_prefix, Some(i + 1 == n), v.node.uid);
    }
}

/// Whether two subtrees are the same for compaction: same name (and uid with `-u`), same
/// children, in order.
fn same(a: &VNode, b: &VNode, view: &View) -> bool {
    a.name(view) == b.name(view)
        && (!view.uid_changes || a.node.uid == b.node.uid)
        && a.children.len() == b.children.len()
        && a.children
            .iter()
            .zip(&b.children)
            .all(|(x, y)| same(x, y, view))
}

struct Sym {
    empty: &'static str,
    branch: &'static str,
    vert: &'static str,
    last: &'static str,
    single: &'static str,
    first: &'static str,
}

const ASCII: Sym = Sym {
    empty: "  ",
    branch: "|-",
    vert: "| ",
    last: "`-",
    single: "---",
    first: "-+-",
};

const UNICODE: Sym = Sym {
    empty: "  ",
    branch: "├─",
    vert: "│ ",
    last: "└─",
    single: "───",
    first: "─┬─",
};

/// The plain layout's writer: pstree's column count and cutting.
struct Plain<'v> {
    out: String,
    /// The column the next character goes to, from 1.
    x: usize,
    /// Per level, the width of the name drawn there (where its children's branches start).
    widths: Vec<isize>,
    /// Per level, whether siblings follow.
    more: Vec<bool>,
    view: &'v View,
    sym: &'static Sym,
}

impl Plain<'_> {
    fn put(&mut self, s: &str) {
        for c in s.chars() {
            self.x += 1;
            match self.view.width {
                Some(w) if self.x > w => {
                    if self.x == w + 1 {
                        self.out.push('+');
                    }
                }
                _ => self.out.push(c),
            }
        }
    }

    fn raw(&mut self, s: &str) {
        self.out.push_str(s);
    }

    fn newline(&mut self) {
        self.out.push('\n');
        self.x = 1;
    }

    fn cut(&self) -> bool {
        self.view.width.is_some()
    }

    fn set_level(&mut self, level: usize, width: isize, more: bool) {
        if self.widths.len() <= level {
            self.widths.resize(level + 1, 0);
            self.more.resize(level + 1, false);
        }
        self.widths[level] = width;
        self.more[level] = more;
    }

    /// One node and its children, as pstree's drawing does: `rep` copies of it (`N*[`), on the
    /// current line when `leaf` (the first child, drawn after its parent), `closing` brackets to
    /// close at the end of its line.
    #[allow(clippy::too_many_arguments)]
    fn draw(
        &mut self,
        v: &VNode,
        level: usize,
        rep: usize,
        leaf: bool,
        last: bool,
        parent_uid: u32,
        closing: usize,
    ) {
        let view = self.view;
        if !leaf {
            self.indent(level, last);
        }
        let add = if rep < 2 {
            0
        } else {
            let n = rep.to_string();
            self.put(&n);
            self.put("*[");
            n.len() + 2
        };
        let (name_len, after_name) = self.label(v, parent_uid);
        if view.arguments {
            self.arguments(v);
        }
        if view.arguments || v.children.is_empty() {
            self.put(&"]".repeat(closing));
            self.newline();
        }
        if view.arguments {
            self.set_level(level, 1 + if name_len > 1 { 0 } else { -1 }, !last);
            // With arguments, only threads are merged.
            let kids = group(&v.children, view, |c| view.compact && c.thread.is_some());
            let n = kids.len();
            for (i, (c, count)) in kids.into_iter().enumerate() {
                self.draw(
                    c,
                    level + 1,
                    count,
                    false,
                    i + 1 == n,
                    v.node.uid,
                    if count > 1 { closing + 1 } else { 0 },
                );
            }
            return;
        }
        let width = name_len + self.x as isize - after_name as isize + add as isize;
        self.set_level(level, width, !last);
        self.children(v, level, closing);
    }

    /// The branches before a node that does not go on its parent's line.
    fn indent(&mut self, level: usize, last: bool) {
        for lvl in 0..level {
            let pad = (self.widths[lvl] + 1).max(0) as usize;
            self.put(&" ".repeat(pad));
            let s = if lvl == level - 1 {
                if last { self.sym.last } else { self.sym.branch }
            } else if self.more[lvl + 1] {
                self.sym.vert
            } else {
                self.sym.empty
            };
            self.put(s);
        }
    }

    /// The node's name and notes (bold when highlighted); its name's width, and the column
    /// after the name.
    fn label(&mut self, v: &VNode, parent_uid: u32) -> (isize, usize) {
        let view = self.view;
        let bold = view.bold.filter(|_| v.highlight);
        if let Some((on, _)) = bold {
            self.raw(on);
        }
        let swapped = view.arguments && no_cmdline(v);
        if swapped {
            self.put("(");
        }
        let name = v.name(view);
        self.put(&name);
        let name_len = name.chars().count() as isize;
        let after_name = self.x;
        let ns = notes(v, view, parent_uid, view.pids);
        if !ns.is_empty() {
            self.put(if view.arguments { "," } else { "(" });
            self.put(&ns.join(","));
        }
        if swapped || (!view.arguments && !ns.is_empty()) {
            self.put(")");
        }
        if let Some((_, off)) = bold {
            self.raw(off);
        }
        (name_len, after_name)
    }

    /// The node's arguments (`-a`), cut with `...` at the width.
    fn arguments(&mut self, v: &VNode) {
        let view = self.view;
        let w = view.width.unwrap_or(usize::MAX);
        let args = pstree_args(v, view.width);
        let n = args.len();
        for (i, a) in args.into_iter().enumerate() {
            let last_arg = i + 1 == n;
            if !last_arg {
                self.put(" ");
            }
            let room = w.saturating_sub(if last_arg { 0 } else { 4 });
            if !self.cut() || self.x + a.chars().count() <= room {
                self.put(&a);
            } else {
                self.put("...");
                break;
            }
        }
    }

    /// The children of a node drawn without arguments, the first on the node's line (`+` when
    /// the width is reached).
    fn children(&mut self, v: &VNode, level: usize, closing: usize) {
        let view = self.view;
        if let Some(w) = view.width
            && self.x >= w
            && !v.children.is_empty()
        {
            self.put(self.sym.first);
            self.put("+");
            self.newline();
            return;
        }
        let kids = group(&v.children, view, |_| view.compact);
        let n = kids.len();
        for (i, (c, count)) in kids.into_iter().enumerate() {
            if i == 0 {
                self.put(if n > 1 {
                    self.sym.first
                } else {
                    self.sym.single
                });
            }
            self.draw(
                c,
                level + 1,
                count,
                i == 0,
                i + 1 == n,
                v.node.uid,
                closing + usize::from(count > 1),
            );
        }
    }
}

/// The children, each with how many identical later siblings were merged into it (those are
/// left out), when `merge` says so for it.
fn group<'b, 'a>(
    kids: &'b [VNode<'a>],
    view: &View,
    merge: impl Fn(&VNode) -> bool,
) -> Vec<(&'b VNode<'a>, usize)> {
    let mut taken = vec![false; kids.len()];
    let mut out = Vec::new();
    for i in 0..kids.len() {
        if taken[i] {
            continue;
        }
        let mut count = 1;
        if merge(&kids[i]) {
            for j in i + 1..kids.len() {
                if !taken[j] && same(&kids[i], &kids[j], view) {
                    taken[j] = true;
                    count += 1;
                }
            }
        }
        out.push((&kids[i], count));
    }
    out
}

/// pstree's layout (`--plain`): names, the first child on its parent's line, identical sibling
/// subtrees merged into `N*[...]`, notes in parentheses, lines cut at the width with `+`.
pub fn plain_layout(roots: &[VNode], view: &View) -> String {
    let mut p = Plain {
        out: String::new(),
        x: 1,
        widths: Vec::new(),
        more: Vec::new(),
        view,
        sym: match view.symbols {
            Symbols::Ascii => &ASCII,
            Symbols::Unicode => &UNICODE,
        },
    };
    for r in roots {
        p.draw(r, 0, 1, true, true, 0, 0);
    }
    p.out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap() -> Snapshot {
        Snapshot::from_nodes(vec![
            ProcessNode::new(10, 1, 1, b"sh").with_cmdline(&["sh", "-c", "x"]),
            ProcessNode::new(11, 10, 2, b"sleep").with_cmdline(&["sleep", "9"]),
            ProcessNode::new(12, 10, 3, b"sleep").with_cmdline(&["sleep", "9"]),
            ProcessNode::new(13, 10, 4, b"sleep").with_cmdline(&["sleep", "9"]),
            ProcessNode::new(14, 10, 5, b"cat").with_cmdline(&["cat"]),
            ProcessNode::new(15, 14, 6, b"z").with_state(b'Z'),
        ])
    }

    fn threads() -> ThreadMap {
        let t = |tid| Thread {
            tid,
            state: b'S',
            comm: b"worker".to_vec(),
        };
        HashMap::from([(14, vec![t(20), t(21)])])
    }

    fn plain(view: View) -> String {
        let s = snap();
        let v = View {
            plain: true,
            ..view
        };
        plain_layout(
            &build(&s, &[], &threads(), &v, &HashSet::new(), &Roles::new()),
            &v,
        )
    }

    #[test]
    fn compacts_identical_siblings_and_threads() {
        let v = View {
            compact: true,
            ..View::default()
        };
        assert_eq!(
            plain(v),
            "sh-+-cat-+-z\n   |     `-2*[{cat}]\n   `-3*[sleep]\n"
        );
    }

    #[test]
    fn pids_and_no_compaction() {
        let v = View {
            pids: true,
            threads: Threads::OwnName,
            ..View::default()
        };
        assert_eq!(
            plain(v),
            "sh(10)-+-cat(14)-+-z(15)\n\
             \x20      |         |-{worker}(20)\n\
             \x20      |         `-{worker}(21)\n\
             \x20      |-sleep(11)\n\
             \x20      |-sleep(12)\n\
             \x20      `-sleep(13)\n"
        );
    }

    #[test]
    fn arguments_on_their_own_lines_and_cut_lines() {
        let v = View {
            compact: true,
            arguments: true,
            threads: Threads::Hide,
            ..View::default()
        };
        assert_eq!(
            plain(v),
            "sh -c x\n  |-cat\n  |   `-(z)\n  |-sleep 9\n  |-sleep 9\n  `-sleep 9\n"
        );
        let v = View {
            compact: true,
            width: Some(8),
            threads: Threads::Hide,
            ..View::default()
        };
        assert_eq!(plain(v), "sh-+-ca+\n   `-3*+\n");
    }

    #[test]
    fn foster_layout_notes_and_cut() {
        let s = snap();
        let v = View {
            pgids: true,
            threads: Threads::OwnName,
            ..View::default()
        };
        let t = foster_layout(
            &build(&s, &[], &threads(), &v, &HashSet::new(), &Roles::new()),
            &v,
        );
        assert!(t.starts_with("10 S sh(10)\n├─11 S sleep(11)\n"), "{t}");
        assert!(t.contains("  ├─15 Z z(15)\n  ├─20 S {worker}(14)\n"), "{t}");
        assert_eq!(cut("abcdef", Some(4)), "abc+");
        assert_eq!(cut("ab\x1b[1mcdef\x1b[0m", Some(4)), "ab\x1b[1mc+\x1b[0m");
        assert_eq!(cut("abc", Some(4)), "abc");
    }
}
