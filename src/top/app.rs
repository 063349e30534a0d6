//! The dashboard's state, independent of any terminal: [`App`] owns the current [`Model`],
//! what is collapsed, the filter, the search, the order ([`Sort`]), the cursor (an
//! [`Identity`], so it stays on the same process while the tree churns), pause and follow,
//! the open [`Dialog`], the panes ([`EventsPane`], [`LogPane`]), the meters and history, the
//! columns chosen (`F2`), and the visible [`Row`]s derived from all of that
//! ([`crate::top::rows`]). What the outside world must do comes back as [`Effect`]s, or is
//! read from the state ([`App::log_source`]), so every interaction is testable without a
//! terminal or a live system. Keys and the mouse go in through [`crate::top::keys`].
//!
//! Uses the files below it: model, formatting, columns, rows, panes, dialogs, meters.

use nix::sys::signal::Signal;
use rustc_hash::{FxHashMap, FxHashSet};

use crate::base::sanitize::escape;
use crate::process::identity::Identity;
use crate::top::columns::{Column, ColumnsError, Layout};
use crate::top::dialogs::{ControlError, SignalResult, errno_results, signal_results_text};
use crate::top::formatting::user_name;
use crate::top::meters::{Meters, Texts};
use crate::top::model::{Model, Wants};
use crate::top::panes::event_lines;
use crate::top::rows::{MadeOf, Reuse, Rows};

pub use crate::top::dialogs::{Control, DEFAULT_SIGNAL, Dialog, HelperTarget, KEYS, SIGNALS};
pub use crate::top::formatting::{
    command_text, errno_text, fmt_rate, key_name, start_text, unknown_key,
};
pub use crate::top::panes::{
    EventsPane, KEEP_LOG_LINES, LogItem, LogPane, LogSource, PaneKind, PaneLine,
};
pub use crate::top::rows::{Row, Sort};

/// What the caller must do after a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    Quit,
    /// Take a reading now instead of at the next tick.
    Refresh,
    /// Send `signal` to each of `targets` (a process, or a subtree parents first).
    Signal {
        targets: Vec<(Identity, Vec<u8>)>,
        signal: Signal,
    },
    /// Ask the supervisor (attached mode) to do this.
    Control(Control),
    /// Save the columns chosen (`F2`), and say where in the status line
    /// ([`App::columns_saved`]).
    SaveColumns(Layout),
}

/// Which keys the tree takes: foster's, or htop's where the two differ.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Keymap {
    #[default]
    Foster,
    /// htop's: `k` signals (not up), `/` searches (not filters; `\` filters), `e` shows the
    /// process's details (htop's environment screen); `b`, free in both, toggles the events
    /// pane.
    Htop,
}

/// What the status line says at first with htop's keys.
pub const HTOP_KEYS: &str =
    "htop keys: k signals · / searches · \\ filters · e details · b events · ↑ ↓ move · ? all keys";

impl Keymap {
    /// `key` as foster's keys name it.
    pub fn translate(self, key: crossterm::event::KeyEvent) -> crossterm::event::KeyEvent {
        use crossterm::event::KeyCode::{Char, F};
        let code = match (self, key.code) {
            (Keymap::Htop, Char('k')) => F(9),
            (Keymap::Htop, Char('/')) => F(3),
            (Keymap::Htop, Char('e')) => Char('d'),
            (_, code) => code,
        };
        crossterm::event::KeyEvent { code, ..key }
    }

    /// The key that hides and shows the events pane, as the status line names it: `e`, or `b`
    /// with htop's keys (where `e` is the details; `b` works with both).
    pub fn events_key(self) -> char {
        match self {
            Keymap::Foster => 'e',
            Keymap::Htop => 'b',
        }
    }
}

/// The longest filter or search that can be typed.
pub const MAX_TYPED: usize = 256;

/// The dashboard's whole state.
#[derive(Debug)]
pub struct App {
    pub model: Model,
    pub rows: Vec<Row>,
    /// The process under the cursor.
    pub cursor: Option<Identity>,
    /// The first row shown (scrolling).
    pub offset: usize,
    /// Table rows that fit on screen, set by the renderer.
    pub page: usize,
    pub collapsed: FxHashSet<Identity>,
    /// Processes collapse-depth has already been applied to (so a user's expansion holds).
    seen: FxHashSet<Identity>,
    /// Processes at this depth and below start collapsed.
    pub collapse_depth: Option<usize>,
    pub filter: String,
    pub filter_editing: bool,
    /// Rows the user collapsed one by one while the filter is on: they stay collapsed even
    /// though a match below them would open them (collapse all does not hide matches).
    /// Forgotten when the filter changes.
    pub(crate) filter_collapsed: FxHashSet<Identity>,
    pub paused: bool,
    pub following: Option<Identity>,
    pub dialog: Dialog,
    /// The last result or notice, shown in the status line.
    pub message: Option<String>,
    /// The refresh interval, for the title.
    pub interval_text: String,
    /// The last reading failed: why.
    pub source_error: Option<String>,
    /// The source has nothing more to read: what happened.
    pub ended: Option<String>,
    /// The log pane, when open.
    pub logs: Option<LogPane>,
    /// The order of the rows.
    pub sort: Sort,
    /// The search (`F3`): it moves the cursor to the rows that match, hiding none.
    pub search: String,
    pub search_editing: bool,
    /// The tagged processes (`Space`), in the order they were tagged.
    pub tagged: Vec<Identity>,
    /// Only this user's processes (`u`), with their ancestors in the tree.
    pub user: Option<u32>,
    /// The tree (siblings sorted), or a flat list of every process (`t`).
    pub tree: bool,
    /// The machine's meters and the processes' history.
    pub meters: Meters,
    /// The optional columns, in order, shown or not (`F2`).
    pub columns: Layout,
    /// foster's keys, or htop's.
    pub keymap: Keymap,
    /// The width each column was last drawn at: a column keeps it while its content fits, so
    /// the columns right of it do not jump sideways (see `ui`).
    pub column_widths: std::cell::RefCell<FxHashMap<Column, u16>>,
    /// The events pane (attached).
    pub events: EventsPane,
    /// Where things are on screen, for the mouse.
    pub hits: Hits,
    /// What the texts of each of `rows` were made of, for the next rebuild to reuse them.
    rows_made_of: Vec<MadeOf>,
    /// The storage of the rows before, emptied, for the next rebuild.
    spare_rows: Reuse,
    /// User names by uid, for the USER column (looked up once per uid).
    user_names: FxHashMap<u32, String>,
    /// The wall-clock second the machine booted, for START (fixed at the first reading).
    boot_secs: Option<i64>,
}

/// Where things are on screen, set by the renderer at each drawing, for the mouse.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hits {
    /// The table: its header's line, and the lines of its rows (`top`, `height`).
    pub header_y: Option<u16>,
    pub rows: (u16, u16),
    /// Each column shown: where it starts and how wide it is (the command: to the edge).
    pub columns: Vec<(Column, u16, u16)>,
    /// The events pane's and the log pane's lines (`top`, `height`).
    pub events: Option<(u16, u16)>,
    pub logs: Option<(u16, u16)>,
}

impl App {
    pub fn new(collapse_depth: Option<usize>, interval_text: String) -> App {
        App {
            model: Model::default(),
            rows: Vec::new(),
            rows_made_of: Vec::new(),
            spare_rows: Reuse::default(),
            cursor: None,
            offset: 0,
            page: 20,
            collapsed: FxHashSet::default(),
            seen: FxHashSet::default(),
            collapse_depth,
            filter: String::new(),
            filter_editing: false,
            filter_collapsed: FxHashSet::default(),
            paused: false,
            following: None,
            dialog: Dialog::None,
            message: None,
            interval_text,
            source_error: None,
            ended: None,
            logs: None,
            sort: Sort::DEFAULT,
            tree: true,
            search: String::new(),
            search_editing: false,
            tagged: Vec::new(),
            user: None,
            meters: Meters::default(),
            columns: Layout::default(),
            keymap: Keymap::Foster,
            column_widths: Default::default(),
            events: EventsPane::default(),
            hits: Hits::default(),
            user_names: FxHashMap::default(),
            boot_secs: None,
        }
    }

    /// What a reading must read of each process for the columns shown.
    pub fn wants(&self) -> Wants {
        self.columns.wants()
    }

    /// Says in the status line where the columns were saved, or why they were not.
    pub fn columns_saved(&mut self, result: Result<std::path::PathBuf, ColumnsError>) {
        self.message = Some(match result {
            Ok(p) => format!(
                "columns saved in {}",
                escape(p.as_os_str().as_encoded_bytes())
            ),
            Err(e) => format!("columns not saved: {}", escape(e.to_string().as_bytes())),
        });
    }

    /// The columns shown, in order, for this source: those of a supervisor only attached.
    pub fn shown_columns(&self) -> Vec<Column> {
        self.columns
            .shown()
            .into_iter()
            .filter(|c| self.model.supervised || !c.supervised_only())
            .collect()
    }

    /// Takes a new model. While paused, processes that vanished stay, marked exited.
    pub fn set_model(&mut self, mut model: Model) {
        self.cursor = self.cursor.map(|c| helper_moved(&self.model, &model, c));
        if self.paused {
            model.carry_exited(&self.model);
        }
        self.source_error = None;
        self.start_collapsed(&model);
        self.collapsed.retain(|i| model.nodes.contains_key(i));
        self.tagged
            .retain(|i| model.nodes.get(i).is_some_and(|n| !n.exited));
        if let Some(f) = self.following
            && !model.nodes.contains_key(&f)
        {
            self.message = Some(format!("followed process {} exited", f.pid));
            self.following = None;
        }
        for n in model.nodes.values() {
            if let Some(u) = n.info.uid
                && !self.user_names.contains_key(&u)
            {
                self.user_names.insert(u, user_name(u));
            }
        }
        if self.boot_secs.is_none() && model.hz > 0 {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64);
            self.boot_secs = Some(now - (model.now_ticks / model.hz) as i64);
        }
        let old_index = self.cursor_index();
        self.model = model;
        self.meters.history.record(&self.model);
        self.rebuild(old_index);
    }

    /// Collapses the processes of `model` below the collapse depth, once per identity.
    fn start_collapsed(&mut self, model: &Model) {
        let Some(limit) = self.collapse_depth else {
            return;
        };
        let mut stack: Vec<(Identity, usize)> = model.roots().map(|r| (r, 0)).collect();
        while let Some((id, depth)) = stack.pop() {
            if self.seen.insert(id) && depth >= limit {
                self.collapsed.insert(id);
            }
            stack.extend(model.nodes[&id].children.iter().map(|c| (*c, depth + 1)));
        }
        self.seen.retain(|i| model.nodes.contains_key(i));
    }

    /// The source has nothing more to read: every row is marked ended, and the status line
    /// says what happened (`why`, not a failure).
    pub fn set_ended(&mut self, why: String) {
        self.source_error = None;
        // Newer than any result shown: the end is what the status line says.
        self.message = None;
        self.ended = Some(why);
        self.following = None;
        self.tagged.clear();
        self.model.end();
        self.relayout();
    }

    /// A reading failed; the view keeps the last model.
    pub fn set_source_error(&mut self, why: String) {
        self.source_error = Some(why);
    }

    /// Index of the cursor's row.
    pub fn cursor_index(&self) -> Option<usize> {
        let c = self.cursor?;
        self.rows.iter().position(|r| r.id == c)
    }

    /// The row under the cursor.
    pub fn cursor_row(&self) -> Option<&Row> {
        self.cursor_index().map(|i| &self.rows[i])
    }

    /// Recomputes the rows and keeps the cursor on its identity: if that process is hidden
    /// under a collapsed ancestor, on the ancestor; if it is gone, on the row at `old_index`.
    fn rebuild(&mut self, old_index: Option<usize>) {
        let old = Reuse {
            rows: std::mem::take(&mut self.rows),
            made_of: std::mem::take(&mut self.rows_made_of),
        };
        let spare = std::mem::take(&mut self.spare_rows);
        let (rows, made_of, mut old) = self.rows_of().build(old, spare);
        (self.rows, self.rows_made_of) = (rows, made_of);
        // The old rows' storage, for the next rebuild to fill.
        old.rows.clear();
        old.made_of.clear();
        self.spare_rows = old;
        if self.rows.is_empty() {
            self.cursor = None;
            self.offset = 0;
            return;
        }
        let want = self.following.or(self.cursor);
        let found = want.and_then(|c| {
            if let Some(i) = self.rows.iter().position(|r| r.id == c) {
                return Some(i);
            }
            if self.model.nodes.contains_key(&c) {
                let anc = self.model.ancestors(c);
                return anc
                    .iter()
                    .find_map(|a| self.rows.iter().position(|r| r.id == *a));
            }
            None
        });
        let i = found.unwrap_or_else(|| old_index.unwrap_or(0).min(self.rows.len() - 1));
        self.cursor = Some(self.rows[i].id);
        self.scroll_to(i);
    }

    pub(crate) fn scroll_to(&mut self, i: usize) {
        let page = self.page.max(1);
        if i < self.offset {
            self.offset = i;
        } else if i >= self.offset + page {
            self.offset = i + 1 - page;
        }
        let max_offset = self.rows.len().saturating_sub(page);
        self.offset = self.offset.min(max_offset);
    }

    /// Sets the page height (from the renderer) and keeps the cursor visible.
    pub fn set_page(&mut self, page: usize) {
        self.page = page.max(1);
        if let Some(i) = self.cursor_index() {
            self.scroll_to(i);
        }
    }

    /// The visible rows, in tree order.
    pub fn compute_rows(&self) -> Vec<Row> {
        self.rows_of().build(Reuse::default(), Reuse::default()).0
    }

    /// What the rows are made from ([`Rows::build`]).
    fn rows_of(&self) -> Rows<'_> {
        Rows {
            model: &self.model,
            filter: &self.filter,
            search: &self.search,
            user: self.user,
            following: self.following,
            tree: self.tree,
            sort: self.sort,
            shown: self.shown_columns(),
            collapsed: &self.collapsed,
            filter_collapsed: &self.filter_collapsed,
            tagged: &self.tagged,
            user_names: &self.user_names,
            boot_secs: self.boot_secs,
        }
    }

    pub(crate) fn move_cursor(&mut self, delta: isize) {
        if self.rows.is_empty() {
            return;
        }
        let cur = self.cursor_index().unwrap_or(0) as isize;
        let i = (cur + delta).clamp(0, self.rows.len() as isize - 1) as usize;
        self.cursor = Some(self.rows[i].id);
        if self.following.is_some_and(|f| f != self.rows[i].id) {
            self.following = None;
            self.message = Some("follow off".into());
        }
        self.scroll_to(i);
    }

    pub(crate) fn relayout(&mut self) {
        let idx = self.cursor_index();
        self.rebuild(idx);
    }

    /// Collapses or expands the cursor's process.
    pub(crate) fn set_collapsed(&mut self, collapse: bool) {
        let Some(row) = self.cursor_row().cloned() else {
            return;
        };
        if collapse {
            if row.has_children && !row.collapsed {
                self.collapsed.insert(row.id);
                if !self.filter.is_empty() {
                    self.filter_collapsed.insert(row.id);
                }
            } else if let Some(p) = self.model.nodes.get(&row.id).and_then(|n| n.info.parent)
                && self.rows.iter().any(|r| r.id == p)
            {
                // Already collapsed or a leaf: go to the parent, as in a file tree.
                self.cursor = Some(p);
            }
        } else {
            self.collapsed.remove(&row.id);
            self.filter_collapsed.remove(&row.id);
        }
        self.relayout();
    }

    /// Whose lines the log pane wants now: the helper of the selected row, every helper on
    /// the supervisor's row; `None` when the pane is closed or the row belongs to no helper.
    pub fn log_source(&self) -> Option<LogSource> {
        self.logs.as_ref()?;
        if !self.model.supervised {
            return None;
        }
        let row = self.cursor_row()?;
        let sup = self.model.nodes.get(&row.id)?.info.supervision.as_ref()?;
        match &sup.helper {
            Some(h) => Some(LogSource::Helper(h.clone())),
            None if sup.role == "supervisor" && sup.generation == 0 => Some(LogSource::Every),
            None => None,
        }
    }

    /// The log pane now shows `source`'s lines (none yet: the stream is being opened), or
    /// says the row belongs to no helper.
    pub fn log_switch(&mut self, source: Option<LogSource>) {
        if let Some(p) = self.logs.as_mut() {
            p.switch(source);
        }
    }

    /// Takes what the log stream brought.
    pub fn log_items(&mut self, items: Vec<LogItem>) {
        if let Some(p) = self.logs.as_mut() {
            p.take(items);
        }
    }

    /// The events pane is drawn (attached, shown).
    pub(crate) fn events_drawn(&self) -> bool {
        self.model.supervised && self.events.shown
    }

    /// Scrolls the events pane `up` lines back (negative: towards the newest).
    pub(crate) fn scroll_events(&mut self, up: isize) {
        let total = self.event_lines().len();
        self.events.scroll(up, total);
    }

    /// Records what the supervisor answered to an action: its message, or the error's.
    pub fn control_done(&mut self, result: Result<String, ControlError>) {
        self.message = Some(match result {
            Ok(m) => escape(m.as_bytes()),
            Err(e) => format!("failed: {}", escape(e.0.as_bytes())),
        });
    }

    /// Records what sending a signal did: `results` holds one entry per target.
    pub fn signal_done(
        &mut self,
        signal: Signal,
        results: &[(Identity, Vec<u8>, Result<(), nix::errno::Errno>)],
    ) {
        self.signal_results(signal, &errno_results(results));
    }

    /// Records what sending a signal did, with each failure already in words (an errno named,
    /// or the supervisor's refusal).
    pub fn signal_results(&mut self, signal: Signal, results: &[SignalResult]) {
        self.message = Some(signal_results_text(signal, results));
    }

    /// The rows on screen now.
    pub fn window(&self) -> &[Row] {
        let end = (self.offset + self.page).min(self.rows.len());
        &self.rows[self.offset.min(end)..end]
    }

    /// The events pane's lines, newest last ([`event_lines`]).
    pub fn event_lines(&self) -> Vec<(String, String)> {
        event_lines(&self.model, &self.events)
    }

    /// Everything the screen shows, to compare with what it showed last: equal means there is
    /// nothing to redraw.
    pub fn screen(&self) -> Screen {
        Screen {
            rows: self.window().to_vec(),
            cursor: self.cursor,
            offset: self.offset,
            totals: self.totals(),
            origin: self.model.origin.clone(),
            paused: self.paused,
            following: self.following,
            filter: self.filter.clone(),
            filter_editing: self.filter_editing,
            search: (self.search.clone(), self.search_editing),
            dialog: self.dialog.clone(),
            message: self.message.clone(),
            source_error: self.source_error.clone().or_else(|| self.ended.clone()),
            events: if self.model.supervised && self.events.shown {
                self.event_lines()
            } else {
                Vec::new()
            },
            events_pane: self.events.clone(),
            logs: self.logs.as_ref().map(LogPane::drawn_state),
            sort: self.sort,
            tree: self.tree,
            tagged: self.tagged.clone(),
            user: self.user,
            meters: self.meter_texts(),
        }
    }

    /// What the meters show; under a filter (`/`, `u`), Tasks counts the live rows it leaves.
    pub fn meter_texts(&self) -> Texts {
        let mut t = self.meters.texts(&self.model, self.cursor);
        if !self.filter.is_empty() || self.user.is_some() {
            t.tasks.shown = Some(self.rows.iter().filter(|r| !r.exited).count());
        }
        t
    }

    /// Counts for the title: processes, and anomalies anywhere in the model.
    pub fn totals(&self) -> (usize, usize) {
        let anomalies = self.model.nodes.values().map(|n| n.anomalies.len()).sum();
        (self.model.processes().count(), anomalies)
    }
}

/// Where the cursor `c` goes in `new` when it was on a helper's row in `old` and the helper
/// got a process or lost it: to the helper's row in `new` (its process, or its row without
/// one), so the cursor stays on the helper. Else `c`.
fn helper_moved(old: &Model, new: &Model, c: Identity) -> Identity {
    if new.nodes.contains_key(&c) {
        return c;
    }
    let Some(name) = old
        .nodes
        .get(&c)
        .and_then(|n| n.info.supervision.as_ref())
        .filter(|s| s.vacant || s.helper_state.is_some())
        .and_then(|s| s.helper.as_deref())
    else {
        return c;
    };
    let own = |n: &&crate::top::model::Node| {
        n.info.supervision.as_ref().is_some_and(|s| {
            s.helper.as_deref() == Some(name) && (s.vacant || s.helper_state.is_some())
        })
    };
    new.nodes.values().find(own).map_or(c, |n| n.info.id)
}

/// What one drawing of the screen depends on; see [`App::screen`].
#[derive(Clone, Debug, PartialEq)]
pub struct Screen {
    rows: Vec<Row>,
    cursor: Option<Identity>,
    offset: usize,
    totals: (usize, usize),
    origin: String,
    paused: bool,
    following: Option<Identity>,
    filter: String,
    filter_editing: bool,
    search: (String, bool),
    dialog: Dialog,
    message: Option<String>,
    source_error: Option<String>,
    events: Vec<(String, String)>,
    events_pane: EventsPane,
    /// The log pane: its version, scroll, focus and height.
    logs: Option<(u64, Option<u64>, bool, usize)>,
    sort: Sort,
    tree: bool,
    tagged: Vec<Identity>,
    user: Option<u32>,
    /// The meters and the cursor's history, as drawn.
    meters: Texts,
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use std::sync::Arc;

    use super::*;
    use crate::top::model::{ProcInfo, Sample, Tracker};

    /// A process of a reading: pid, parent, zombie, CPU ticks, memory, command line (of a
    /// pool, shared or the same words in another allocation), uid.
    type Proc = (i32, Option<i32>, bool, u64, u64, Option<(usize, bool)>, u32);

    /// What happens between two rebuilds of the rows.
    #[derive(Clone, Debug)]
    enum Step {
        /// A reading `gap` ticks after the last.
        Reading {
            gap: u64,
            procs: Vec<Proc>,
        },
        Pause(bool),
        Collapse(i32),
        Expand(i32),
        Filter(&'static str),
        UserColumn(bool),
        Flat(bool),
        SortByCpu(bool),
    }

    fn step() -> impl Strategy<Value = Step> {
        let proc = (
            1..10i32,
            proptest::option::of(1..10i32),
            proptest::bool::weighted(0.1),
            prop_oneof![Just(0u64), 0..300u64],
            prop_oneof![Just(1u64 << 20), 0..(64u64 << 20)],
            proptest::option::of((0..3usize, any::<bool>())),
            0..3u32,
        );
        prop_oneof![
            4 => (
                prop_oneof![Just(0u64), Just(100u64), 1..400_000u64],
                proptest::collection::vec(proc, 0..10),
            )
                .prop_map(|(gap, procs)| Step::Reading { gap, procs }),
            1 => any::<bool>().prop_map(Step::Pause),
            1 => (1..10i32).prop_map(Step::Collapse),
            1 => (1..10i32).prop_map(Step::Expand),
            1 => prop_oneof![Just(""), Just("p3"), Just("sleep")].prop_map(Step::Filter),
            1 => any::<bool>().prop_map(Step::UserColumn),
            1 => any::<bool>().prop_map(Step::Flat),
            1 => any::<bool>().prop_map(Step::SortByCpu),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// The rows a rebuild makes reusing the last rebuild's texts are the rows made from
        /// nothing, whatever the readings and the keys between them.
        #[test]
        fn rows_reusing_texts_equal_rows_made_anew(
            steps in proptest::collection::vec(step(), 1..16),
        ) {
            let pool: Vec<Vec<Vec<u8>>> = vec![
                vec![b"sleep".to_vec(), b"3600".to_vec()],
                vec![b"sh".to_vec(), b"-c".to_vec(), b"x\x1by".to_vec()],
                vec![b"top".to_vec()],
            ];
            let shared: Vec<Arc<[Vec<u8>]>> = pool.iter().map(|c| Arc::from(c.clone())).collect();
            let mut app = App::new(None, "1s".into());
            let mut tracker = Tracker::new();
            let mut now = 100_000;
            for s in steps {
                match s {
                    Step::Reading { gap, procs } => {
                        now += gap;
                        let mut procs: Vec<ProcInfo> = procs
                            .into_iter()
                            .map(|(pid, parent, zombie, ticks, rss, cmd, uid)| {
                                let mut p = ProcInfo::fixture(pid, parent);
                                p.state = if zombie { b'Z' } else { b'S' };
                                p.cpu_ticks = ticks;
                                p.rss_bytes = rss;
                                p.uid = Some(uid);
                                p.cmdline = match cmd {
                                    None => Arc::from(Vec::new()),
                                    Some((i, true)) => shared[i].clone(),
                                    Some((i, false)) => Arc::from(pool[i].clone()),
                                };
                                p
                            })
                            .collect();
                        procs.sort_by_key(|p| p.id.pid);
                        procs.dedup_by_key(|p| p.id.pid);
                        app.set_model(tracker.update(Sample {
                            now_ticks: now,
                            hz: 100,
                            procs,
                            ..Sample::default()
                        }));
                    }
                    Step::Pause(p) => {
                        app.paused = p;
                        if !p && app.model.drop_exited() {
                            app.relayout();
                        }
                    }
                    Step::Collapse(pid) | Step::Expand(pid) => {
                        let id = app.model.nodes.keys().find(|i| i.pid == pid).copied();
                        if let Some(id) = id {
                            if matches!(s, Step::Collapse(_)) {
                                app.collapsed.insert(id);
                            } else {
                                app.collapsed.remove(&id);
                            }
                        }
                        app.relayout();
                    }
                    Step::Filter(f) => {
                        app.filter = f.to_string();
                        app.relayout();
                    }
                    Step::UserColumn(on) => {
                        let mut shown = Column::DEFAULT.to_vec();
                        if on {
                            shown.push(Column::User);
                        }
                        app.columns = crate::top::columns::Layout::showing(&shown);
                        app.relayout();
                    }
                    Step::Flat(flat) => {
                        app.tree = !flat;
                        app.relayout();
                    }
                    Step::SortByCpu(on) => {
                        app.sort = if on {
                            Sort { key: Column::Cpu, descending: true }
                        } else {
                            Sort::DEFAULT
                        };
                        app.relayout();
                    }
                }
                prop_assert_eq!(&app.rows, &app.compute_rows());
                prop_assert_eq!(app.rows.len(), app.rows_made_of.len());
            }
        }
    }
}
