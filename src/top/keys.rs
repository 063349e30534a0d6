//! The keys and the mouse: [`App::on_key`] hands a key to the open dialog, to the search or
//! filter being typed, to the focused pane, or to the tree ([`crate::top::tree_keys`]), each
//! a small function per mode; what the caller must do comes back as [`Effect`]s.
//! [`App::on_mouse`] takes clicks and wheel steps against [`crate::top::app::Hits`], where
//! the renderer put things.
//!
//! Uses [`crate::top::app`] and the files below it, and the tree's keys.

use crossterm::event::{
    KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseButton, MouseEvent, MouseEventKind,
};

use crate::process::identity::Identity;
use crate::top::app::{App, Effect, MAX_TYPED};
use crate::top::columns::Column;
use crate::top::dialogs::{Dialog, SIGNALS};
use crate::top::formatting::key_name;

/// How many lines a wheel step scrolls.
pub const WHEEL_LINES: isize = 3;

/// Whether the key is `y` (yes, in a confirmation).
fn yes(key: &KeyEvent) -> bool {
    matches!(key.code, KeyCode::Char('y') | KeyCode::Char('Y'))
}

impl App {
    /// Handles one key; returns what the caller must do.
    pub fn on_key(&mut self, key: KeyEvent) -> Vec<Effect> {
        if key.kind == KeyEventKind::Release {
            return Vec::new();
        }
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            return vec![Effect::Quit];
        }
        if self.dialog != Dialog::None {
            return self.on_dialog_key(key);
        }
        if self.search_editing {
            return self.on_search_key(key);
        }
        if self.filter_editing {
            return self.on_filter_key(key);
        }
        if self.logs.as_ref().is_some_and(|p| p.search_editing) {
            return self.on_log_search_key(key);
        }
        // A notice lasts until the next key.
        self.message = None;
        if self.logs.as_ref().is_some_and(|p| p.focus) {
            return self.on_log_pane_key(key);
        }
        if self.events.focus {
            return self.on_events_pane_key(key);
        }
        self.on_view_key(key)
    }

    /// A key while a dialog is open: the dialog takes it.
    fn on_dialog_key(&mut self, key: KeyEvent) -> Vec<Effect> {
        match self.dialog.clone() {
            Dialog::Help { scroll } => return self.on_help_key(key, scroll),
            Dialog::Signals {
                target,
                subtree,
                selected,
                typed,
            } => self.on_signals_key(key, (target, subtree), selected, typed),
            Dialog::Confirm {
                target,
                subtree,
                signal,
                ..
            } => {
                self.dialog = Dialog::None;
                if yes(&key) {
                    return self.signal_effect(target, subtree, signal);
                }
                self.message = Some("cancelled".into());
            }
            Dialog::Users { uids, selected } => self.on_users_key(key, uids, selected),
            Dialog::SortBy { selected } => self.on_sort_key(key, selected),
            Dialog::Detail(_) => {
                if matches!(
                    key.code,
                    KeyCode::Esc
                        | KeyCode::Enter
                        | KeyCode::Char('d')
                        | KeyCode::Char('q')
                        | KeyCode::F(10)
                ) {
                    self.dialog = Dialog::None;
                }
            }
            Dialog::Columns { selected, changed } => {
                return self.on_columns_key(key, selected, changed);
            }
            Dialog::ConfirmControl(c) => {
                self.dialog = Dialog::None;
                if yes(&key) {
                    // Checked again: the helper may have moved on while the question was open.
                    match c.recheck(&self.model) {
                        Ok(c) => {
                            self.message = Some(c.pending());
                            return vec![Effect::Control(c)];
                        }
                        Err(why) => self.message = Some(why),
                    }
                    return Vec::new();
                }
                self.message = Some("cancelled".into());
            }
            Dialog::None => {}
        }
        Vec::new()
    }

    fn on_help_key(&mut self, key: KeyEvent, scroll: u16) -> Vec<Effect> {
        self.dialog = match key.code {
            KeyCode::Down | KeyCode::Char('j') => Dialog::Help {
                scroll: scroll.saturating_add(1),
            },
            KeyCode::Up | KeyCode::Char('k') => Dialog::Help {
                scroll: scroll.saturating_sub(1),
            },
            KeyCode::Char('q') | KeyCode::F(10) => return vec![Effect::Quit],
            _ => Dialog::None,
        };
        Vec::new()
    }

    /// A key in the signal picker for `target` (and its subtree when `subtree`).
    // Long: one arm per key of the picker.
    fn on_signals_key(
        &mut self,
        key: KeyEvent,
        (target, subtree): (Identity, bool),
        selected: usize,
        typed: i32,
    ) {
        let picker = |selected, typed| Dialog::Signals {
            target,
            subtree,
            selected,
            typed,
        };
        match key.code {
            KeyCode::Down | KeyCode::Char('j') => {
                self.dialog = picker((selected + 1).min(SIGNALS.len() - 1), 0)
            }
            KeyCode::Up | KeyCode::Char('k') => self.dialog = picker(selected.saturating_sub(1), 0),
            // A signal by its number, as in htop (`9` SIGKILL, `1` `5` SIGTERM).
            KeyCode::Char(c @ '0'..='9') => {
                let d = c as i32 - '0' as i32;
                let at = |n: i32| SIGNALS.iter().position(|s| *s as i32 == n);
                let (typed, found) = match at(typed * 10 + d) {
                    Some(i) if typed > 0 => (typed * 10 + d, Some(i)),
                    _ => (d, at(d)),
                };
                match found {
                    Some(i) => {
                        self.dialog = picker(i, typed);
                        self.message = None;
                    }
                    None => self.message = Some(format!("no signal number {typed} in the list")),
                }
            }
            KeyCode::Enter => {
                let count = if subtree {
                    let sub = self.model.subtree(target);
                    sub.iter()
                        .filter(|i| !self.model.nodes[*i].vacant())
                        .count()
                } else {
                    1
                };
                self.dialog = Dialog::Confirm {
                    target,
                    subtree,
                    signal: SIGNALS[selected],
                    count,
                };
            }
            KeyCode::Esc | KeyCode::Char('q') | KeyCode::F(10) | KeyCode::Left => {
                self.dialog = Dialog::None;
                self.message = Some("cancelled".into());
            }
            _ => {
                self.message = Some(format!(
                    "unknown key {} here: ↑ ↓ or a signal's number, Enter picks, Esc cancels",
                    key_name(&key)
                ))
            }
        }
    }

    /// The signal confirmed: to the subtree, to the tagged processes, or to `target`, those
    /// still alive.
    fn signal_effect(
        &mut self,
        target: Identity,
        subtree: bool,
        signal: nix::sys::signal::Signal,
    ) -> Vec<Effect> {
        let ids = if subtree {
            self.model.subtree(target)
        } else if !self.tagged.is_empty() {
            std::mem::take(&mut self.tagged)
        } else {
            vec![target]
        };
        let targets: Vec<(Identity, Vec<u8>)> = ids
            .into_iter()
            .filter(|i| {
                self.model
                    .nodes
                    .get(i)
                    .is_some_and(|n| !n.exited && !n.vacant())
            })
            .map(|i| (i, self.model.nodes[&i].info.comm.clone()))
            .collect();
        if targets.is_empty() {
            self.message = Some(format!("process {} has exited", target.pid));
            return Vec::new();
        }
        vec![Effect::Signal { targets, signal }]
    }

    /// A key in the sort menu.
    fn on_sort_key(&mut self, key: KeyEvent, selected: usize) {
        let keys = self.sort_keys();
        let last = keys.len().saturating_sub(1);
        match key.code {
            KeyCode::Down | KeyCode::Char('j') => {
                self.dialog = Dialog::SortBy {
                    selected: (selected + 1).min(last),
                }
            }
            KeyCode::Up | KeyCode::Char('k') => {
                self.dialog = Dialog::SortBy {
                    selected: selected.saturating_sub(1),
                }
            }
            KeyCode::Home | KeyCode::Char('g') => self.dialog = Dialog::SortBy { selected: 0 },
            KeyCode::End | KeyCode::Char('G') => self.dialog = Dialog::SortBy { selected: last },
            KeyCode::Enter => {
                self.dialog = Dialog::None;
                if let Some(k) = keys.get(selected) {
                    self.set_sort(*k, k.largest_first());
                }
            }
            KeyCode::Esc | KeyCode::Char('q') | KeyCode::F(6) | KeyCode::F(10) => {
                self.dialog = Dialog::None;
                self.message = Some("cancelled".into());
            }
            _ => {}
        }
    }

    /// A key in the user picker.
    fn on_users_key(&mut self, key: KeyEvent, uids: Vec<Option<u32>>, selected: usize) {
        match key.code {
            KeyCode::Down | KeyCode::Char('j') => {
                self.dialog = Dialog::Users {
                    selected: (selected + 1).min(uids.len() - 1),
                    uids,
                }
            }
            KeyCode::Up | KeyCode::Char('k') => {
                self.dialog = Dialog::Users {
                    selected: selected.saturating_sub(1),
                    uids,
                }
            }
            KeyCode::Enter => {
                self.dialog = Dialog::None;
                self.user = uids[selected];
                self.message = Some(match self.user {
                    Some(u) => format!(
                        "only the processes of {} (and their ancestors); u changes it",
                        crate::base::ownership::uid_text(u)
                    ),
                    None => "every user's processes".to_string(),
                });
                self.relayout();
            }
            _ => {
                self.dialog = Dialog::None;
                self.message = Some("cancelled".into());
            }
        }
    }

    /// A key in the column setup (`F2`): closing it saves the columns when they changed.
    fn on_columns_key(&mut self, key: KeyEvent, selected: usize, changed: bool) -> Vec<Effect> {
        let last = self.columns.entries.len().saturating_sub(1);
        let (mut selected, mut changed) = (selected, changed);
        match key.code {
            KeyCode::Down | KeyCode::Char('j') => selected = (selected + 1).min(last),
            KeyCode::Up | KeyCode::Char('k') => selected = selected.saturating_sub(1),
            KeyCode::Home | KeyCode::Char('g') => selected = 0,
            KeyCode::End | KeyCode::Char('G') => selected = last,
            KeyCode::Char(' ') | KeyCode::Enter => {
                self.columns.toggle(selected);
                changed = true;
                // A column shown now needs its texts, made for shown columns only.
                self.relayout();
            }
            KeyCode::Char('[') | KeyCode::Char('-') => {
                selected = self.columns.shift(selected, -1);
                changed = true;
            }
            KeyCode::Char(']') | KeyCode::Char('+') | KeyCode::Char('=') => {
                selected = self.columns.shift(selected, 1);
                changed = true;
            }
            KeyCode::Esc | KeyCode::F(2) | KeyCode::F(10) | KeyCode::Char('q') => {
                self.dialog = Dialog::None;
                if changed {
                    return vec![Effect::SaveColumns(self.columns.clone())];
                }
                return Vec::new();
            }
            _ => {
                self.message = Some(format!(
                    "unknown key {} here: ↑ ↓ choose · Space show/hide · [ ] move · Esc done",
                    key_name(&key)
                ));
                return Vec::new();
            }
        }
        self.message = None;
        self.dialog = Dialog::Columns { selected, changed };
        Vec::new()
    }

    /// A key while the search (`F3`) is typed: the cursor goes to the first match as it is.
    fn on_search_key(&mut self, key: KeyEvent) -> Vec<Effect> {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Enter => {
                self.search_editing = false;
                self.say_found();
                return Vec::new();
            }
            KeyCode::Esc => {
                self.search_editing = false;
                self.search.clear();
            }
            KeyCode::Backspace => {
                self.search.pop();
            }
            KeyCode::F(3) => {
                self.relayout();
                self.find(1, false);
                return Vec::new();
            }
            KeyCode::Char(c) if !ctrl && self.search.len() < MAX_TYPED => self.search.push(c),
            _ => {}
        }
        self.relayout();
        // As you type: the first match from the cursor on.
        self.find(1, true);
        Vec::new()
    }

    /// A key while the filter is typed: the cursor lands on a match.
    fn on_filter_key(&mut self, key: KeyEvent) -> Vec<Effect> {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        self.filter_collapsed.clear();
        match key.code {
            KeyCode::Enter => self.filter_editing = false,
            KeyCode::Esc => {
                self.filter_editing = false;
                self.filter.clear();
            }
            KeyCode::Backspace => {
                self.filter.pop();
            }
            KeyCode::Char(c) if !ctrl && self.filter.len() < MAX_TYPED => self.filter.push(c),
            KeyCode::Up | KeyCode::Down => {
                self.filter_editing = false;
                return self.on_key(key);
            }
            _ => {}
        }
        self.relayout();
        // Land on the first match unless the cursor already is on one.
        if !self.cursor_row().is_some_and(|r| r.matched)
            && let Some(i) = self.rows.iter().position(|r| r.matched)
        {
            self.cursor = Some(self.rows[i].id);
            self.scroll_to(i);
        }
        Vec::new()
    }

    /// A key while the log pane has the focus: it scrolls; every other key does what it does
    /// in the tree.
    fn on_log_pane_key(&mut self, key: KeyEvent) -> Vec<Effect> {
        let Some(p) = self.logs.as_mut() else {
            return Vec::new();
        };
        let page = p.height.max(1) as i64;
        match key.code {
            KeyCode::Up | KeyCode::Char('k') => p.scroll(-1),
            KeyCode::Down | KeyCode::Char('j') => p.scroll(1),
            KeyCode::PageUp => p.scroll(-page),
            KeyCode::PageDown => p.scroll(page),
            KeyCode::Home | KeyCode::Char('g') => p.scroll(i64::MIN / 2),
            KeyCode::End | KeyCode::Char('G') => p.follow_end(),
            KeyCode::Tab | KeyCode::Esc => p.focus = false,
            KeyCode::Char('/') => p.search_editing = true,
            KeyCode::Char('n') => p.find(1),
            KeyCode::Char('N') => p.find(-1),
            KeyCode::Char('w') => p.wrap = !p.wrap,
            _ => return self.on_view_key(key),
        }
        if matches!(key.code, KeyCode::Char('n' | 'N')) && p.needle().is_none() {
            self.message = Some(p.search_text());
        }
        p.touch();
        Vec::new()
    }

    /// A key while the log pane's search is typed: the newest match as it is.
    fn on_log_search_key(&mut self, key: KeyEvent) -> Vec<Effect> {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let Some(p) = self.logs.as_mut() else {
            return Vec::new();
        };
        match key.code {
            KeyCode::Enter => {
                p.search_editing = false;
                p.touch();
                return Vec::new();
            }
            KeyCode::Esc => {
                p.search_editing = false;
                p.clear_search();
                return Vec::new();
            }
            KeyCode::Backspace => {
                p.search.pop();
            }
            KeyCode::Char(c) if !ctrl && p.search.len() < MAX_TYPED => p.search.push(c),
            _ => {}
        }
        p.find_newest();
        Vec::new()
    }

    /// A key for the view: `v` shows or hides the machine's history, others go to the tree.
    fn on_view_key(&mut self, key: KeyEvent) -> Vec<Effect> {
        let plain = key.modifiers.difference(KeyModifiers::SHIFT).is_empty();
        if !plain || key.code != KeyCode::Char('v') {
            return self.on_tree_key(key);
        }
        let m = &mut self.meters;
        let on = !m.graphs_on(m.screen_height);
        m.graphs = Some(on);
        self.message = Some(match (on, m.shown) {
            (true, false) => "the machine's history is on, with the meters: m shows them".into(),
            (true, true) => "the machine's CPU and memory history shown (v hides it)".into(),
            (false, _) => "the machine's history hidden (v shows it)".into(),
        });
        Vec::new()
    }

    /// A key while the events pane has the focus: it scrolls; every other key does what it
    /// does in the tree.
    fn on_events_pane_key(&mut self, key: KeyEvent) -> Vec<Effect> {
        let page = self.events.drawn.max(1) as isize;
        match key.code {
            KeyCode::Up | KeyCode::Char('k') => self.scroll_events(1),
            KeyCode::Down | KeyCode::Char('j') => self.scroll_events(-1),
            KeyCode::PageUp => self.scroll_events(page),
            KeyCode::PageDown => self.scroll_events(-page),
            KeyCode::Home | KeyCode::Char('g') => self.scroll_events(isize::MAX / 2),
            KeyCode::End | KeyCode::Char('G') => self.events.back = 0,
            KeyCode::Tab | KeyCode::Esc => self.events.focus = false,
            _ => return self.on_view_key(key),
        }
        Vec::new()
    }
}

impl App {
    /// Handles one mouse event; true when it changed something (the screen is then redrawn).
    /// A click selects a row, on the tree drawing before a command (or its first letter)
    /// collapses or expands it, on a column's title sorts by it (again: the other way); the
    /// wheel moves the cursor, or scrolls the pane it is over.
    pub fn on_mouse(&mut self, m: MouseEvent) -> bool {
        if self.dialog != Dialog::None {
            return false;
        }
        match m.kind {
            MouseEventKind::ScrollUp => self.on_wheel(m.row, true),
            MouseEventKind::ScrollDown => self.on_wheel(m.row, false),
            MouseEventKind::Down(MouseButton::Left) => self.on_click(m.column, m.row),
            _ => false,
        }
    }

    /// A wheel step at line `y`: the pane under it scrolls, else the cursor moves.
    fn on_wheel(&mut self, y: u16, up: bool) -> bool {
        let inside = |area: Option<(u16, u16)>| area.is_some_and(|(t, h)| y >= t && y < t + h);
        if inside(self.hits.events) {
            self.scroll_events(if up { WHEEL_LINES } else { -WHEEL_LINES });
        } else if inside(self.hits.logs) {
            if let Some(p) = self.logs.as_mut() {
                p.scroll(if up { -WHEEL_LINES } else { WHEEL_LINES } as i64);
                p.touch();
            }
        } else {
            self.message = None;
            self.move_cursor(if up { -WHEEL_LINES } else { WHEEL_LINES });
        }
        true
    }

    /// A click at (`x`, `y`): on a title, sorts; on a row, selects it (and on its tree
    /// drawing, collapses or expands it).
    fn on_click(&mut self, x: u16, y: u16) -> bool {
        if let (Some((top, h)), Some(p)) = (self.hits.logs, self.logs.as_mut())
            && y >= top
            && y < top + h
        {
            // A click on the log pane gives it the keys, as `Tab` does.
            p.focus = true;
            p.touch();
            self.events.focus = false;
            self.message = None;
            return true;
        }
        let column = self
            .hits
            .columns
            .iter()
            .find(|(_, x0, w)| x >= *x0 && x <= x0.saturating_add(*w))
            .copied();
        if Some(y) == self.hits.header_y {
            let Some(key) = column.map(|(c, _, _)| c).filter(|c| c.sorts()) else {
                return false;
            };
            self.message = None;
            if self.sort.key == key {
                self.set_sort(key, !self.sort.descending);
            } else {
                self.set_sort(key, key.largest_first());
            }
            return true;
        }
        let (top, h) = self.hits.rows;
        if y < top || y >= top + h {
            return false;
        }
        let i = self.offset + (y - top) as usize;
        let Some(row) = self.rows.get(i).cloned() else {
            return false;
        };
        self.message = None;
        // A click on a row gives the keys back to the tree.
        if let Some(p) = self.logs.as_mut() {
            p.focus = false;
        }
        self.events.focus = false;
        self.cursor = Some(row.id);
        if self.following.is_some_and(|f| f != row.id) {
            self.following = None;
        }
        // On the tree drawing before the command, or its first letter: the marker.
        if let Some((Column::Command, x0, _)) = column {
            let marker = x0 + ratatui::text::Line::raw(row.prefix.as_str()).width() as u16;
            if x <= marker && (row.has_children || row.collapsed) {
                self.set_collapsed(!row.collapsed);
            }
        }
        true
    }
}
