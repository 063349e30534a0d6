//! The table's rows: [`Row`] (one visible line of the tree, its texts in [`Cells`], one per
//! [`Column`]), the order ([`Sort`]), and [`Rows::build`], which makes the visible rows from
//! the model and the view's choices (filter, search, user, collapsed, followed, tree or flat),
//! taking the texts of a process's row whose inputs did not change from its row before
//! ([`Reuse`]) rather than making them again.
//!
//! Uses [`crate::top::model`], [`crate::top::columns`] and [`crate::top::formatting`].

use std::ops::{Index, IndexMut};
use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHashSet};

use crate::base::sanitize::escape;
use crate::process::identity::Identity;
use crate::top::columns::Column;
use crate::top::formatting::{command_text, io_text, opt, start_text};
use crate::top::model::{Anomaly, Model, Node, Supervision, fmt_age, fmt_bytes, fmt_cpu};

/// A row's texts, one per column, indexed by the column. A column with no text of its own
/// (the flag, the pid: drawn from the row) keeps an empty one.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Cells([String; Column::COUNT]);

impl Index<Column> for Cells {
    type Output = String;
    fn index(&self, c: Column) -> &String {
        &self.0[c as usize]
    }
}

impl IndexMut<Column> for Cells {
    fn index_mut(&mut self, c: Column) -> &mut String {
        &mut self.0[c as usize]
    }
}

/// One visible line of the tree, with everything the renderer shows.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub id: Identity,
    pub depth: usize,
    /// Tree drawing before the command (`│  ├─ `).
    pub prefix: String,
    pub has_children: bool,
    pub collapsed: bool,
    /// Descendants hidden under this row because it is collapsed.
    pub hidden: usize,
    /// Anomalies among the hidden descendants.
    pub hidden_anomalies: usize,
    /// The columns' texts (`row[Column::Cpu]`). The optional columns' (`-` where the source
    /// does not know) are made only while their column is shown (empty otherwise); CPU% and
    /// RSS of a collapsed row are the sums over its subtree; the command is escaped.
    pub cells: Cells,
    /// On a helper's own process, when its state has a detail or a `STATUS=` text: the
    /// helper's state in a sentence with them, escaped (the status line shows it).
    pub helper_detail: Option<String>,
    /// Each anomaly in a few words.
    pub anomalies: Vec<String>,
    /// Each anomaly as a sentence (status line).
    pub anomaly_details: Vec<String>,
    pub exited: bool,
    /// Matches the filter (as opposed to being shown as its ancestor or descendant).
    pub matched: bool,
    /// Matches the search (`F3`).
    pub found: bool,
    /// Tagged (`Space`): the signal menu acts on every tagged process.
    pub tagged: bool,
    /// The row of a helper with no process: no pid, state, age or usage.
    pub vacant: bool,
}

impl Index<Column> for Row {
    type Output = String;
    fn index(&self, c: Column) -> &String {
        &self.cells[c]
    }
}

/// The order of the rows: a column, and which way. In the tree, siblings are sorted; in the
/// flat list, every row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sort {
    /// The column sorted by (one that sorts: [`Column::sorts`]).
    pub key: Column,
    /// Largest first (for AGE: youngest first).
    pub descending: bool,
}

impl Sort {
    /// The default: oldest first, as processes started.
    pub const DEFAULT: Sort = Sort {
        key: Column::Age,
        descending: false,
    };

    /// The mark beside the sorted column's title: `▲` ascending, `▼` descending (for AGE,
    /// ascending is oldest first, the order processes started in).
    pub fn arrow(self) -> &'static str {
        if self.descending { "▼" } else { "▲" }
    }

    /// Compares two processes in this order; ties oldest first. The rows of helpers with no
    /// process come after the processes whatever the order, in configuration order.
    pub fn compare(self, a: &Node, b: &Node) -> std::cmp::Ordering {
        if a.vacant() || b.vacant() {
            return (a.vacant(), a.info.id.start_time).cmp(&(b.vacant(), b.info.id.start_time));
        }
        let o = self.key.compare(a, b);
        let o = if self.descending { o.reverse() } else { o };
        o.then(a.info.id.start_time.cmp(&b.info.id.start_time))
            .then(a.info.id.pid.cmp(&b.info.id.pid))
    }

    /// In words, for the status line: `sorted by CPU%, largest first`.
    pub fn describe(self) -> String {
        use crate::top::columns::Kind;
        let way = match (self.key.kind(), self.descending) {
            (Kind::Time, false) => "oldest first",
            (Kind::Time, true) => "youngest first",
            (Kind::Number, true) => "largest first",
            (Kind::Number, false) => "smallest first",
            (Kind::Text, false) => "A to Z",
            (Kind::Text, true) => "Z to A",
        };
        format!("sorted by {}, {way}", self.key.title())
    }
}

/// The rows of a rebuild, and what their texts were made of: the next rebuild takes the texts
/// whose inputs did not change.
#[derive(Debug, Default)]
pub struct Reuse {
    pub rows: Vec<Row>,
    pub made_of: Vec<MadeOf>,
}

/// What the texts of one row that usually last from one refresh to the next were made of.
#[derive(Clone, Debug)]
pub struct MadeOf {
    /// The command line (the command's text when not empty).
    cmdline: Arc<[Vec<u8>]>,
    /// Exited, and the state letter.
    state: (bool, u8),
    /// What the age's text shows ([`crate::top::model::age_class`]).
    age: (u8, u64),
    /// Exited, and the CPU% (its bits).
    cpu: (bool, Option<u64>),
    /// Whether the memory is blank (exited and not collapsed), and the memory.
    rss: (bool, u64),
    uid: Option<u32>,
}

impl MadeOf {
    /// Whether column `c`'s text made of `self` is the one made of `now` (false for a column
    /// whose text is always made again).
    fn same(&self, now: &MadeOf, c: Column) -> bool {
        match c {
            Column::Command => {
                !now.cmdline.is_empty()
                    && (Arc::ptr_eq(&self.cmdline, &now.cmdline) || self.cmdline == now.cmdline)
            }
            Column::State => self.state == now.state,
            Column::Age => self.age == now.age,
            Column::Cpu => self.cpu == now.cpu,
            Column::Rss => self.rss == now.rss,
            Column::User => self.uid == now.uid,
            _ => false,
        }
    }
}

/// Whether a column's text is made on every row, shown or not (the others only while their
/// column is shown: a hidden column costs nothing a refresh).
fn always_made(c: Column) -> bool {
    matches!(
        c,
        Column::Role
            | Column::Helper
            | Column::HelperState
            | Column::Generation
            | Column::State
            | Column::Policy
            | Column::Age
            | Column::Cpu
            | Column::Rss
            | Column::Command
    )
}

/// What one row's cells are made of besides its process.
struct CellInput<'a> {
    node: &'a Node,
    /// CPU% and memory: the subtree's sums on a collapsed row.
    cpu: Option<f64>,
    rss: u64,
    collapsed: bool,
    user_names: &'a FxHashMap<u32, String>,
    boot_secs: Option<i64>,
    hz: u64,
}

/// Column `c`'s text for a row (empty for the flag and the pid, drawn from the row).
// Long: one arm per column.
fn cell_text(c: Column, i: &CellInput) -> String {
    let n = i.node;
    let sup = n.info.supervision.as_ref();
    let of_sup = |f: fn(&Supervision) -> Option<&str>| {
        sup.and_then(f)
            .map(|t| escape(t.as_bytes()))
            .unwrap_or_default()
    };
    let vacant = sup.is_some_and(|s| s.vacant);
    match c {
        Column::Flag | Column::Pid => String::new(),
        Column::State | Column::Age | Column::Cpu | Column::Rss | Column::Start if vacant => {
            String::new()
        }
        Column::User | Column::Ppid | Column::Threads if vacant => String::new(),
        Column::Restarts => sup
            .and_then(|s| s.restarts)
            .map(|r| r.to_string())
            .unwrap_or_default(),
        Column::LastExit => of_sup(|s| s.last_exit.as_deref()),
        Column::Role => of_sup(|s| Some(&s.role)),
        Column::Helper => of_sup(|s| s.helper.as_deref()),
        Column::HelperState => of_sup(|s| s.helper_state.as_ref().map(|h| h.state.as_str())),
        Column::Generation => sup.map(|s| s.generation.to_string()).unwrap_or_default(),
        Column::Policy => of_sup(|s| Some(&s.policy)),
        Column::State if n.exited => "exit".to_string(),
        Column::State => escape(&[n.info.state]),
        Column::Age => fmt_age(n.age_secs),
        Column::Cpu if n.exited => String::new(),
        Column::Cpu => fmt_cpu(i.cpu),
        Column::Rss if n.exited && !i.collapsed => String::new(),
        Column::Rss => fmt_bytes(i.rss),
        Column::Command => command_text(n),
        Column::User => n.info.uid.map_or_else(
            || "-".to_string(),
            |u| {
                i.user_names
                    .get(&u)
                    .cloned()
                    .unwrap_or_else(|| u.to_string())
            },
        ),
        Column::Ppid => n.info.ppid.to_string(),
        Column::Pgid => opt(n.info.ext.pgid),
        Column::Sid => opt(n.info.ext.sid),
        Column::Threads => opt(n.info.ext.threads),
        Column::Start => match i.boot_secs {
            Some(b) => start_text(b + (n.info.id.start_time / i.hz.max(1)) as i64, n.age_secs),
            None => "-".into(),
        },
        Column::IoRead => io_text(n.io_rate.map(|r| r.0), n.info.ext.io.is_some()),
        Column::IoWrite => io_text(n.io_rate.map(|r| r.1), n.info.ext.io.is_some()),
        Column::Cgroup => n
            .info
            .ext
            .cgroup
            .as_ref()
            .map_or_else(|| "-".into(), |c| escape(c.as_bytes())),
        Column::PidNs => opt(n.info.ext.pidns),
    }
}

/// The helper's state in a sentence with its detail and `STATUS=` text, on a helper's own
/// process when it has either.
fn helper_detail(s: &Supervision) -> Option<String> {
    let h = s
        .helper_state
        .as_ref()
        .filter(|h| h.detail.is_some() || h.status_text.is_some())?;
    let mut t = format!(
        "helper {} {}",
        escape(s.helper.as_deref().unwrap_or_default().as_bytes()),
        escape(h.state.as_bytes())
    );
    if let Some(d) = &h.detail {
        t.push(' ');
        t.push_str(&escape(d.as_bytes()));
    }
    if let Some(st) = &h.status_text {
        t.push_str(&format!(" · status: {}", escape(st.as_bytes())));
    }
    Some(t)
}

/// True when the process's own fields match `needle` (lowercase): pid, name, command line,
/// role, helper (never a note about another process, such as a helper with no process named
/// on its supervisor's row).
pub fn matches(n: &Node, needle: &str) -> bool {
    if n.info.id.pid.to_string() == needle {
        return true;
    }
    let hay = command_text(n).to_lowercase();
    if hay.contains(needle) || escape(&n.info.comm).to_lowercase().contains(needle) {
        return true;
    }
    n.info.supervision.as_ref().is_some_and(|s| {
        s.role.to_lowercase().contains(needle)
            || s.helper
                .as_ref()
                .is_some_and(|h| h.to_lowercase().contains(needle))
    })
}

/// What the rows are made from: the model and the view's choices, borrowed from the app.
pub struct Rows<'a> {
    pub model: &'a Model,
    pub filter: &'a str,
    pub search: &'a str,
    /// Only this user's processes.
    pub user: Option<u32>,
    pub following: Option<Identity>,
    /// The tree, or the flat list.
    pub tree: bool,
    pub sort: Sort,
    /// The columns shown.
    pub shown: Vec<Column>,
    pub collapsed: &'a FxHashSet<Identity>,
    /// Collapsed by hand under the filter: they stay collapsed over a match.
    pub filter_collapsed: &'a FxHashSet<Identity>,
    pub tagged: &'a [Identity],
    pub user_names: &'a FxHashMap<u32, String>,
    pub boot_secs: Option<i64>,
}

/// Which processes the filter and the user choice leave, and which rows they force open.
#[derive(Default)]
struct Selection {
    /// A filter or a user is chosen.
    filtering: bool,
    /// The processes that match.
    matched: FxHashSet<Identity>,
    /// The matches with their ancestors and descendants (the tree shows them).
    include: FxHashSet<Identity>,
    /// Ancestors of a match or of the followed process: open even when collapsed.
    forced_open: FxHashSet<Identity>,
    /// The search, lowercase.
    search: String,
}

/// One row to make: its process, its depth, and whether it is the last of its siblings.
type Place<'a> = (&'a Node, usize, bool);

/// The old rows a rebuild takes texts from, each by its process.
struct Old<'a> {
    at: FxHashMap<Identity, usize>,
    reuse: &'a mut Reuse,
}

impl Rows<'_> {
    /// The visible rows, in tree order, and what each one's texts were made of: a text whose
    /// inputs are those of the same process's row in `old` is taken from it rather than made
    /// again (at each refresh, most processes' command, age, CPU, memory and state are what
    /// they were). The rows go in `into`'s vectors (emptied), and `old` comes back, its rows
    /// emptied of the texts taken.
    pub fn build(&self, mut old: Reuse, into: Reuse) -> (Vec<Row>, Vec<MadeOf>, Reuse) {
        // Each old row by its process (none when they do not go with what they were made of).
        let at = if old.rows.len() == old.made_of.len() {
            old.rows
                .iter()
                .enumerate()
                .map(|(i, r)| (r.id, i))
                .collect()
        } else {
            FxHashMap::default()
        };
        let mut old_rows = Old {
            at,
            reuse: &mut old,
        };
        let sel = self.select();
        let Reuse {
            mut rows,
            mut made_of,
        } = into;
        rows.clear();
        made_of.clear();
        if !sel.filtering {
            rows.reserve(self.model.len());
            made_of.reserve(self.model.len());
        }
        let mut roots = self.roots(&sel);
        self.order(&mut roots);
        // Depth first; `lasts` holds the last-sibling flag of the popped node's ancestors
        // and itself.
        let mut stack: Vec<Place> = Vec::new();
        for (i, r) in roots.iter().enumerate().rev() {
            stack.push((r, 0, i + 1 == roots.len()));
        }
        let (mut lasts, mut kids, mut scratch) = (Vec::new(), Vec::new(), String::new());
        while let Some((n, depth, last)) = stack.pop() {
            lasts.truncate(depth);
            lasts.push(last);
            self.children(n, &sel, &mut kids);
            let (row, made) = self.row(n, &sel, &kids, (&lasts, &mut scratch), &mut old_rows);
            let open = !row.collapsed;
            rows.push(row);
            made_of.push(made);
            if open {
                for (i, k) in kids.iter().enumerate().rev() {
                    stack.push((k, depth + 1, i + 1 == kids.len()));
                }
            }
        }
        (rows, made_of, old)
    }

    fn order(&self, nodes: &mut [&Node]) {
        nodes.sort_by(|a, b| self.sort.compare(a, b));
    }

    /// What the filter, the user choice and following select.
    fn select(&self) -> Selection {
        let m = self.model;
        let needle = self.filter.trim().to_lowercase();
        let filtering = !needle.is_empty() || self.user.is_some();
        let mut sel = Selection {
            filtering,
            search: self.search.trim().to_lowercase(),
            ..Selection::default()
        };
        if filtering {
            for n in m.nodes.values() {
                if (needle.is_empty() || matches(n, &needle))
                    && self.user.is_none_or(|u| n.info.uid == Some(u))
                {
                    sel.matched.insert(n.info.id);
                }
            }
            for id in &sel.matched {
                sel.include.extend(m.subtree(*id));
                let anc = m.ancestors(*id);
                sel.forced_open.extend(anc.iter().copied());
                sel.include.extend(anc);
            }
        }
        if let Some(f) = self.following
            && m.nodes.contains_key(&f)
        {
            let anc = m.ancestors(f);
            sel.forced_open.extend(anc.iter().copied());
            if filtering {
                sel.include.insert(f);
                sel.include.extend(anc);
            }
        }
        sel
    }

    /// Whether the process is shown: the flat list shows the matches alone; the tree, with
    /// their ancestors and descendants.
    fn visible(&self, sel: &Selection, id: &Identity) -> bool {
        !sel.filtering
            || if self.tree {
                sel.include.contains(id)
            } else {
                sel.matched.contains(id) || self.following == Some(*id)
            }
    }

    /// The first rows: the roots, or (flat) every process, without children.
    fn roots(&self, sel: &Selection) -> Vec<&Node> {
        let m = self.model;
        if self.tree {
            m.nodes
                .roots()
                .filter(|n| self.visible(sel, &n.info.id))
                .collect()
        } else {
            m.nodes
                .values()
                .filter(|n| self.visible(sel, &n.info.id))
                .collect()
        }
    }

    /// `n`'s visible children, in order, in `kids` (none in the flat list).
    fn children<'m>(&'m self, n: &Node, sel: &Selection, kids: &mut Vec<&'m Node>) {
        kids.clear();
        if self.tree {
            kids.extend(
                n.children
                    .iter()
                    .filter(|c| self.visible(sel, c))
                    .filter_map(|c| self.model.nodes.get(c)),
            );
        }
        self.order(kids);
    }

    /// The row of `n` (with visible children `kids`, and `lasts` its and its ancestors'
    /// last-sibling flags), taking texts from its old row where their inputs did not change.
    fn row(
        &self,
        n: &Node,
        sel: &Selection,
        kids: &[&Node],
        (lasts, scratch): (&[bool], &mut String),
        old: &mut Old,
    ) -> (Row, MadeOf) {
        let id = n.info.id;
        let collapsed = !kids.is_empty()
            && self.collapsed.contains(&id)
            && (!sel.forced_open.contains(&id) || self.filter_collapsed.contains(&id));
        let (cpu, rss, hidden, hidden_anomalies) = self.sums(n, collapsed);
        let made = MadeOf {
            cmdline: n.info.cmdline.clone(),
            state: (n.exited, n.info.state),
            age: crate::top::model::age_class(n.age_secs),
            cpu: (n.exited, cpu.map(f64::to_bits)),
            rss: (n.exited && !collapsed, rss),
            uid: n.info.uid,
        };
        let (mut prev, was) = match old.at.get(&id) {
            Some(&i) => (Some(&mut old.reuse.rows[i]), Some(&old.reuse.made_of[i])),
            None => (None, None),
        };
        tree_prefix(lasts, collapsed, scratch);
        let prefix = match prev.as_deref_mut() {
            Some(r) if r.prefix == *scratch => std::mem::take(&mut r.prefix),
            _ => scratch.clone(),
        };
        let input = CellInput {
            node: n,
            cpu,
            rss,
            collapsed,
            user_names: self.user_names,
            boot_secs: self.boot_secs,
            hz: self.model.hz,
        };
        let cells = self.cells(&input, prev, was, &made);
        let row = Row {
            id,
            depth: lasts.len() - 1,
            prefix,
            has_children: !kids.is_empty(),
            collapsed,
            hidden,
            hidden_anomalies,
            cells,
            helper_detail: n.info.supervision.as_ref().and_then(helper_detail),
            anomalies: n.anomalies.iter().map(Anomaly::short).collect(),
            anomaly_details: n.anomalies.iter().map(Anomaly::describe).collect(),
            exited: n.exited,
            matched: sel.matched.contains(&id),
            found: !sel.search.is_empty() && matches(n, &sel.search),
            tagged: self.tagged.contains(&id),
            vacant: n.vacant(),
        };
        (row, made)
    }

    /// A row's cells: each taken from the process's old row `prev` when what it was made of
    /// (`was`) is what it is made of now, else made.
    fn cells(
        &self,
        input: &CellInput,
        mut prev: Option<&mut Row>,
        was: Option<&MadeOf>,
        made: &MadeOf,
    ) -> Cells {
        let mut cells = Cells::default();
        for c in Column::ALL {
            if !always_made(c) && !self.shown.contains(&c) {
                continue;
            }
            // A column made only while shown had an empty text when hidden: made again.
            let kept = prev
                .as_deref_mut()
                .filter(|r| always_made(c) || !r[c].is_empty());
            cells[c] = match kept {
                Some(r) if was.is_some_and(|w| w.same(made, c)) => std::mem::take(&mut r.cells[c]),
                _ => cell_text(c, input),
            };
        }
        cells
    }

    /// CPU%, memory, hidden descendants and their anomalies: over the subtree when collapsed.
    fn sums(&self, n: &Node, collapsed: bool) -> (Option<f64>, u64, usize, usize) {
        if !collapsed {
            return (n.cpu_pct, n.info.rss_bytes, 0, 0);
        }
        let (mut cpu, mut rss, mut len, mut ha) = (None, 0u64, 0, 0);
        for d in self.model.nodes.descendants(&n.info.id) {
            if let Some(c) = d.cpu_pct {
                cpu = Some(cpu.unwrap_or(0.0) + c);
            }
            rss += d.info.rss_bytes;
            if len > 0 {
                ha += d.anomalies.len();
            }
            len += 1;
        }
        (cpu, rss, len - 1, ha)
    }
}

/// The tree drawing before a command (`│ ├─ `, `+` when collapsed), in `out`.
fn tree_prefix(lasts: &[bool], collapsed: bool, out: &mut String) {
    out.clear();
    for (level, last) in lasts.iter().enumerate().skip(1) {
        if level + 1 == lasts.len() {
            out.push_str(if *last { "└─" } else { "├─" });
        } else {
            out.push_str(if *last { "  " } else { "│ " });
        }
    }
    if collapsed {
        out.push('+');
    } else if lasts.len() > 1 {
        out.push(' ');
    }
}
