//! The tree's keys: `App::on_tree_key` maps each key to one small action (move, collapse,
//! tag, filter, signal, follow, sort, search, the panes, the supervisor's actions) and says
//! in the status line what it did. A key that acts on a helper acts on the helper the cursor's
//! row belongs to, and its confirmation ([`crate::top::dialogs::Control::question`]) says
//! exactly what will happen to which process.
//!
//! Uses [`crate::top::app`] and the files below it.

use crossterm::event::{KeyCode, KeyEvent};

use crate::base::sanitize::escape;
use crate::top::app::{App, Effect, Keymap};
use crate::top::columns::Column;
use crate::top::dialogs::{Control, DEFAULT_SIGNAL, Dialog, HelperTarget, SIGNALS, helper_target};
use crate::top::formatting::unknown_key;
use crate::top::panes::LogPane;
use crate::top::rows::Sort;

/// Why a helper's row with no process cannot be signalled or tagged.
fn no_process(helper: &str) -> String {
    format!("helper {helper} has no process to signal; o starts it")
}

impl App {
    /// A key for the tree (no dialog open, nothing typed, no pane focused): one arm per key,
    /// the keys' table.
    // Long: one arm per key, the table docs/top.md lists.
    pub(crate) fn on_tree_key(&mut self, key: KeyEvent) -> Vec<Effect> {
        if key.code == KeyCode::Char('/') && self.slash_searches_logs() {
            self.search_logs();
            return Vec::new();
        }
        let key = self.keymap.translate(key);
        match key.code {
            KeyCode::Char('q') | KeyCode::F(10) => return vec![Effect::Quit],
            KeyCode::Char('r') => return vec![Effect::Refresh],
            KeyCode::Char('p') | KeyCode::Char('Z') => return self.toggle_pause(),
            KeyCode::Up | KeyCode::Char('k') => self.move_cursor(-1),
            KeyCode::Down | KeyCode::Char('j') => self.move_cursor(1),
            KeyCode::PageUp => self.move_cursor(-(self.page as isize)),
            KeyCode::PageDown => self.move_cursor(self.page as isize),
            KeyCode::Home | KeyCode::Char('g') => self.move_cursor(isize::MIN / 2),
            KeyCode::End | KeyCode::Char('G') => self.move_cursor(isize::MAX / 2),
            KeyCode::Left | KeyCode::Char('h') => self.set_collapsed(true),
            KeyCode::Right => self.set_collapsed(false),
            KeyCode::Enter | KeyCode::Char('d') => self.open_detail(),
            KeyCode::Char('C') => self.collapse_all(),
            KeyCode::Char('E') => self.expand_all(),
            KeyCode::Char('-') => self.set_subtree_collapsed(true),
            KeyCode::Char('+') | KeyCode::Char('=') => self.set_subtree_collapsed(false),
            KeyCode::Char('*') => self.toggle_all(),
            KeyCode::Char(' ') => self.toggle_tag(),
            KeyCode::Char('c') => self.tag_subtree(),
            KeyCode::Char('U') => self.untag_all(),
            KeyCode::Char('/') | KeyCode::Char('\\') | KeyCode::F(4) => self.edit_filter(),
            KeyCode::Esc if !self.filter.is_empty() => self.clear_filter(),
            KeyCode::Char('s') | KeyCode::Char('S') | KeyCode::Char('K') | KeyCode::F(9) => {
                self.open_signals(key.code == KeyCode::Char('S'))
            }
            KeyCode::Char('f') | KeyCode::Char('F') => self.toggle_follow(),
            KeyCode::Char('R') => self.ask_restart(),
            KeyCode::Char('x') => self.ask_stop_helper(),
            KeyCode::Char('o') => self.ask_start(),
            KeyCode::Char('X') => self.ask_stop(),
            KeyCode::Char('l') => self.toggle_logs(),
            KeyCode::Tab => self.focus_pane(),
            KeyCode::Char('e') | KeyCode::Char('b') => self.toggle_events(),
            KeyCode::Char('[') => self.resize_events(false),
            KeyCode::Char(']') => self.resize_events(true),
            KeyCode::Char('H') => self.events_of_helper(),
            KeyCode::Char('<') => self.sort_step(false),
            KeyCode::Char('>') => self.sort_step(true),
            KeyCode::F(6) => self.open_sort_by(),
            KeyCode::Char('P') => self.set_sort(Column::Cpu, true),
            KeyCode::Char('M') => self.set_sort(Column::Rss, true),
            KeyCode::Char('T') => self.set_sort(Column::Age, false),
            KeyCode::Char('I') => self.set_sort(self.sort.key, !self.sort.descending),
            KeyCode::Char('t') | KeyCode::F(5) => self.toggle_tree(),
            KeyCode::F(3) => self.edit_search(),
            KeyCode::Char('u') => self.open_users(),
            KeyCode::Char('n') => self.find(1, false),
            KeyCode::Char('N') => self.find(-1, false),
            KeyCode::Char('m') => self.meters.shown = !self.meters.shown,
            KeyCode::Char('?') | KeyCode::F(1) => self.dialog = Dialog::Help { scroll: 0 },
            KeyCode::F(2) => self.open_columns(),
            KeyCode::Modifier(_) | KeyCode::Null => {}
            _ => self.message = Some(unknown_key(&key)),
        }
        Vec::new()
    }

    /// Opens the choice of the sort key, on the current one.
    fn open_sort_by(&mut self) {
        let keys = self.sort_keys();
        let selected = keys.iter().position(|k| *k == self.sort.key).unwrap_or(0);
        self.dialog = Dialog::SortBy { selected };
    }

    /// Edits the current search, to refine or to go on with (F3 again: the next match).
    fn edit_search(&mut self) {
        self.search_editing = true;
        self.message = None;
    }

    /// Opens the choice of the columns, on the first.
    fn open_columns(&mut self) {
        self.dialog = Dialog::Columns {
            selected: 0,
            changed: false,
        };
    }

    /// Opens the details of the cursor's process, read now.
    fn open_detail(&mut self) {
        let Some(n) = self.cursor.and_then(|c| self.model.nodes.get(&c)) else {
            return;
        };
        if n.exited {
            self.message = Some(format!("process {} has exited", n.info.id.pid));
            return;
        }
        self.dialog = Dialog::Detail(Box::new(crate::top::detail::read(n)));
    }

    fn collapse_all(&mut self) {
        self.collapsed = self
            .model
            .nodes
            .values()
            .filter(|n| !n.children.is_empty())
            .map(|n| n.info.id)
            .collect();
        self.relayout();
    }

    /// Collapses (or expands) the cursor's process and every process below it, as htop's
    /// `-` and `+`: the rest of the tree stays as it is.
    fn set_subtree_collapsed(&mut self, collapse: bool) {
        let Some(id) = self.cursor else {
            return;
        };
        if !self.model.nodes.contains_key(&id) {
            return;
        }
        let sub = self.model.subtree(id);
        for i in &sub {
            let leaf = self.model.nodes[i].children.is_empty();
            if collapse && !leaf {
                self.collapsed.insert(*i);
            } else {
                self.collapsed.remove(i);
                self.filter_collapsed.remove(i);
            }
        }
        let what = if collapse { "collapsed" } else { "expanded" };
        self.message = Some(format!(
            "{what} {} and all below it · * all · C E collapse, expand all",
            id.pid
        ));
        self.relayout();
    }

    /// Expands every process when some are collapsed, else collapses every one (htop's `*`).
    fn toggle_all(&mut self) {
        if self.collapsed.is_empty() {
            self.collapse_all();
            self.message = Some("collapsed all · * expands all".into());
        } else {
            self.expand_all();
            self.message = Some("expanded all · * collapses all".into());
        }
    }

    /// Tags the cursor's process and every live process below it (htop's `c`).
    fn tag_subtree(&mut self) {
        let Some(id) = self.cursor else {
            return;
        };
        if !self.model.nodes.contains_key(&id) {
            return;
        }
        let mut added = 0;
        for i in self.model.subtree(id) {
            let n = &self.model.nodes[&i];
            if !n.exited && !n.vacant() && !self.tagged.contains(&i) {
                self.tagged.push(i);
                added += 1;
            }
        }
        self.relayout();
        self.message = Some(format!(
            "tagged {added} more ({} and below it): {} tagged · s signals them all · U untags all",
            id.pid,
            self.tagged.len()
        ));
    }

    fn expand_all(&mut self) {
        self.collapsed.clear();
        self.filter_collapsed.clear();
        self.relayout();
    }

    /// Tags or untags the cursor's process, then goes to the next row (as in htop).
    fn toggle_tag(&mut self) {
        let Some(r) = self.cursor_row() else {
            return;
        };
        let id = r.id;
        if r.vacant {
            self.message = Some(no_process(&r[Column::Helper]));
            return;
        }
        if let Some(i) = self.tagged.iter().position(|t| *t == id) {
            self.tagged.remove(i);
        } else if !r.exited {
            self.tagged.push(id);
        }
        self.relayout();
        self.move_cursor(1);
        self.message = Some(match self.tagged.len() {
            0 => "no process tagged".to_string(),
            n => format!("{n} tagged: s signals them all · U untags all"),
        });
    }

    fn untag_all(&mut self) {
        self.tagged.clear();
        self.message = Some("no process tagged".into());
        self.relayout();
    }

    /// Types the filter: the current one, to refine; Backspace or Esc clear it.
    fn edit_filter(&mut self) {
        self.filter_editing = true;
        self.relayout();
    }

    fn clear_filter(&mut self) {
        self.filter.clear();
        self.filter_collapsed.clear();
        self.relayout();
    }

    /// Opens the signal picker for the cursor's process (and its subtree when `subtree`).
    fn open_signals(&mut self, subtree: bool) {
        let Some(r) = self.cursor_row() else {
            return;
        };
        if r.exited {
            self.message = Some(format!("process {} has exited", r.id.pid));
            return;
        }
        if r.vacant && !subtree {
            self.message = Some(no_process(&r[Column::Helper]));
            return;
        }
        let selected = SIGNALS
            .iter()
            .position(|s| *s == DEFAULT_SIGNAL)
            .unwrap_or(0);
        self.dialog = Dialog::Signals {
            target: r.id,
            subtree,
            selected,
            typed: 0,
        };
    }

    fn toggle_pause(&mut self) -> Vec<Effect> {
        self.paused = !self.paused;
        self.message = Some(if self.paused { "paused" } else { "resumed" }.to_string());
        if self.paused {
            return Vec::new();
        }
        // Drop the exited rows now rather than at the next reading.
        if self.model.drop_exited() {
            self.relayout();
        }
        vec![Effect::Refresh]
    }

    fn toggle_follow(&mut self) {
        if self.following.is_some() {
            self.following = None;
            self.message = Some("follow off".into());
        } else if let Some(c) = self.cursor {
            self.following = Some(c);
            self.message = Some(format!("following {}", c.pid));
        }
        self.relayout();
    }

    fn toggle_tree(&mut self) {
        self.tree = !self.tree;
        self.message = Some(if self.tree {
            "tree view: siblings in order; t flat list".to_string()
        } else {
            "flat list of every process; t tree view".to_string()
        });
        self.relayout();
    }

    /// Opens the user picker: the users present, as in htop; the current choice under the
    /// cursor.
    fn open_users(&mut self) {
        let mut uids: Vec<u32> = self
            .model
            .nodes
            .values()
            .filter_map(|n| n.info.uid)
            .collect();
        uids.sort_unstable();
        uids.dedup();
        if uids.is_empty() {
            self.message = Some("u: this reading does not say whose processes are".into());
            return;
        }
        let uids: Vec<Option<u32>> = std::iter::once(None)
            .chain(uids.into_iter().map(Some))
            .collect();
        let selected = uids.iter().position(|u| *u == self.user).unwrap_or(0);
        self.dialog = Dialog::Users { uids, selected };
    }

    /// Opens the log pane, or closes it.
    fn toggle_logs(&mut self) {
        if self.logs.take().is_some() {
            return;
        }
        if !self.model.supervised {
            self.message = Some("no supervisor attached: logs need foster top --attach".into());
            return;
        }
        self.logs = Some(LogPane::new());
        self.message =
            Some("log pane: / searches its lines · Tab gives it the keys · l closes".into());
    }

    /// Whether `/` searches the log pane rather than the tree: the pane is open and what `/`
    /// edits in the tree (the filter; with htop's keys, the search) is empty, as `less`
    /// searches what you read. With a filter on, `/` refines it; `\` always filters the tree.
    pub(crate) fn slash_searches_logs(&self) -> bool {
        let tree = match self.keymap {
            Keymap::Foster => &self.filter,
            Keymap::Htop => &self.search,
        };
        self.logs.is_some() && tree.is_empty()
    }

    /// `/` on the log pane: it takes the keys (`n` `N` then go through its matches), and its
    /// search is typed.
    fn search_logs(&mut self) {
        if let Some(p) = self.logs.as_mut() {
            p.focus = true;
            p.search_editing = true;
            p.touch();
        }
        self.events.focus = false;
    }

    /// `Tab`: the log pane takes the keys, else (attached) the events pane.
    fn focus_pane(&mut self) {
        if let Some(p) = self.logs.as_mut() {
            p.focus = true;
            p.touch();
        } else if self.model.supervised && self.events.shown {
            self.events.focus = true;
            self.message = Some(
                "events pane: ↑ ↓ PgUp PgDn Home scroll back · End the newest · Tab the tree"
                    .into(),
            );
        } else {
            self.message =
                Some("Tab focuses the log pane (l opens it) or, attached, the events pane".into());
        }
    }

    fn toggle_events(&mut self) {
        if !self.model.supervised {
            self.message = Some("no supervisor attached: events need foster top --attach".into());
            return;
        }
        self.events.shown = !self.events.shown;
        self.events.focus = false;
        let key = self.keymap.events_key();
        self.message = Some(if self.events.shown {
            format!("events pane shown; {key} hides it")
        } else {
            format!("events pane hidden; {key} shows it")
        });
    }

    /// `[` `]`: the events pane smaller or larger.
    fn resize_events(&mut self, larger: bool) {
        if !self.events_drawn() {
            self.message = Some(format!(
                "[ ] resize the events pane: attach to a supervisor, {} shows it",
                self.keymap.events_key()
            ));
            return;
        }
        let now = self.events.height.unwrap_or(self.events.drawn + 1);
        let h = if larger {
            now.saturating_add(2).min(200)
        } else {
            now.saturating_sub(2).max(2)
        };
        self.events.height = Some(h);
        self.message = Some(format!(
            "events pane: {} line{}; [ ] resize",
            h - 1,
            if h == 2 { "" } else { "s" }
        ));
    }

    /// `H`: only the events of the cursor's helper; again: every helper's.
    fn events_of_helper(&mut self) {
        if !self.model.supervised {
            self.message = Some("no supervisor attached: events need foster top --attach".into());
            return;
        }
        if self.events.helper.take().is_some() {
            self.message = Some("every helper's events".into());
        } else {
            let helper = self
                .cursor_row()
                .and_then(|r| self.model.nodes.get(&r.id))
                .and_then(|n| n.info.supervision.as_ref())
                .and_then(|s| s.helper.clone());
            self.message = Some(match &helper {
                Some(h) => format!(
                    "only the events of helper {}; H shows every helper's",
                    escape(h.as_bytes())
                ),
                None => "this process belongs to no helper: H filters the events on a helper's \
                         row"
                .into(),
            });
            self.events.helper = helper;
        }
        self.events.back = 0;
    }

    /// The columns the rows sort by: those shown, in their order, then the command.
    pub(crate) fn sort_keys(&self) -> Vec<Column> {
        self.shown_columns()
            .into_iter()
            .chain([Column::Command])
            .filter(|c| c.sorts())
            .collect()
    }

    /// Sorts by the next (or previous) column of [`App::sort_keys`], in the order that column
    /// starts in (largest first for the numbers that grow, oldest first, A to Z).
    fn sort_step(&mut self, next: bool) {
        let keys = self.sort_keys();
        let at = keys.iter().position(|k| *k == self.sort.key).unwrap_or(0);
        let to = if next {
            (at + 1) % keys.len()
        } else {
            (at + keys.len() - 1) % keys.len()
        };
        self.set_sort(keys[to], keys[to].largest_first());
    }

    /// Sorts by `key`, and says so in the status line.
    pub(crate) fn set_sort(&mut self, key: Column, descending: bool) {
        self.sort = Sort { key, descending };
        self.message = Some(format!(
            "{} · < > another column · F6 choose · I invert",
            self.sort.describe()
        ));
        self.relayout();
    }

    /// Moves the cursor to the next (`dir` 1) or previous (-1) row that matches the search,
    /// around the end; `here`: the cursor's own row counts. Says where it is.
    pub(crate) fn find(&mut self, dir: isize, here: bool) {
        if self.search.trim().is_empty() {
            if !self.search_editing {
                self.message = Some("no search: F3 searches (n next, N previous)".into());
            }
            return;
        }
        let len = self.rows.len() as isize;
        if len == 0 {
            return;
        }
        let cur = self.cursor_index().unwrap_or(0) as isize;
        let start = if here { 0 } else { 1 };
        let hit = (start..=len)
            .map(|k| (cur + dir * k).rem_euclid(len) as usize)
            .find(|i| self.rows[*i].found);
        if let Some(i) = hit {
            self.cursor = Some(self.rows[i].id);
            if self.following.is_some_and(|f| f != self.rows[i].id) {
                self.following = None;
            }
            self.scroll_to(i);
        }
        if !self.search_editing {
            self.say_found();
        }
    }

    /// The status line: which match the cursor is on, of how many.
    pub(crate) fn say_found(&mut self) {
        let text = escape(self.search.trim().as_bytes());
        if text.is_empty() {
            return;
        }
        let found: Vec<usize> = (0..self.rows.len())
            .filter(|i| self.rows[*i].found)
            .collect();
        let at = self
            .cursor_index()
            .and_then(|c| found.iter().position(|i| *i == c));
        self.message = Some(match (found.len(), at) {
            (0, _) => format!("search: no row matches {text:?} (F3 changes it)"),
            (n, Some(k)) => format!(
                "search {text:?}: match {} of {n} · n next · N previous",
                k + 1
            ),
            (n, None) => format!("search {text:?}: {n} matches · n next · N previous"),
        });
    }

    /// The confirmation of `make`'s action on the cursor's helper, or why there is none or
    /// nothing to do.
    fn ask_helper(&mut self, key: char, make: fn(HelperTarget) -> Control) {
        let Some(row) = self.cursor_row().map(|r| r.id) else {
            return;
        };
        match helper_target(&self.model, row, key).map(make) {
            Ok(c) => match c.needless() {
                Some(why) => self.message = Some(why),
                None => self.dialog = Dialog::ConfirmControl(c),
            },
            Err(why) => self.message = Some(why.to_string()),
        }
    }

    fn ask_restart(&mut self) {
        self.ask_helper('R', Control::Restart);
    }

    fn ask_stop_helper(&mut self) {
        self.ask_helper('x', Control::StopHelper);
    }

    fn ask_start(&mut self) {
        self.ask_helper('o', Control::Start);
    }

    fn ask_stop(&mut self) {
        if !self.model.supervised {
            self.message =
                Some("X stops a supervisor: attach to it (foster top --attach SOCKET)".into());
            return;
        }
        let sup = self.model.nodes.values().find(|n| {
            n.info
                .supervision
                .as_ref()
                .is_some_and(|s| s.generation == 0 && s.role == "supervisor")
        });
        match sup {
            Some(n) => {
                self.dialog = Dialog::ConfirmControl(Control::Stop {
                    supervisor: n.info.id,
                })
            }
            None => self.message = Some("no supervisor in the reading".into()),
        }
    }
}
