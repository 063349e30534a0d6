//! The dashboard's state and key handling, independent of any terminal.
//!
//! Owns [`App`]: the current [`Model`], what is collapsed, the filter, the order ([`Sort`]: a
//! column and a direction, siblings sorted in the tree, every row in the flat list), the cursor (an
//! [`Identity`], so it stays on the same process while the tree churns), pause and follow, the
//! open dialog (help, signal picker, confirmation), the log pane ([`LogPane`]: the selected
//! helper's lines, scrolled or following the end), the meters and history
//! ([`crate::top::meters::Meters`], `m` shows or hides them), the events pane ([`EventsPane`]:
//! shown, sized, scrolled, filtered by helper), the columns chosen (`F2`), and the visible
//! [`Row`]s derived from all of that (a rebuild takes the texts of a process's row whose
//! inputs did not change from its row before, rather than making them again). Keys go in
//! through [`App::on_key`], clicks and wheel steps through [`App::on_mouse`] (against
//! [`Hits`], where the renderer put things); what the outside world must do comes back as
//! [`Effect`]s (send a signal, ask the supervisor to restart, stop or start a helper, refresh
//! now, quit), or is read from the state ([`App::log_source`]: whose lines the pane wants), so
//! every interaction is testable without a terminal or a live system. A key that acts on a
//! helper acts on the helper the cursor's row belongs to, and its confirmation
//! ([`Control::question`]) says exactly what will happen to which process.

use std::collections::VecDeque;
use std::sync::Arc;

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use nix::sys::signal::Signal;
use rustc_hash::{FxHashMap, FxHashSet};

use crate::base::sanitize::{escape, escape_args};
use crate::process::identity::Identity;
use crate::process::signal::Sig;
use crate::process::state::HelperState;
use crate::top::columns::Column;
use crate::top::model::{Anomaly, Model, Node, fmt_age, fmt_bytes, fmt_cpu};

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
    pub role: String,
    /// The helper it belongs to (attached mode).
    pub helper: String,
    /// On a helper's own process (attached mode): the helper's state (`ready`, `stopping`).
    pub helper_state: String,
    /// On a helper's own process, when its state has a detail or a `STATUS=` text: the
    /// helper's state in a sentence with them, escaped (the status line shows it).
    pub helper_detail: Option<String>,
    pub generation: String,
    pub state: String,
    pub policy: String,
    pub age: String,
    /// For a collapsed row, the sum over its subtree.
    pub cpu: String,
    /// For a collapsed row, the sum over its subtree.
    pub rss: String,
    /// Escaped command line (or name).
    pub command: String,
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
    /// The optional columns' texts (`-` where the source does not know), each made only while
    /// its column is shown (empty otherwise).
    pub user: String,
    pub ppid: String,
    pub pgid: String,
    pub sid: String,
    pub threads: String,
    pub start: String,
    pub io_read: String,
    pub io_write: String,
    pub cgroup: String,
    pub pidns: String,
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

    /// Compares two processes in this order; ties oldest first.
    pub fn compare(self, a: &Node, b: &Node) -> std::cmp::Ordering {
        let o = self.key.compare(a, b);
        let o = if self.descending { o.reverse() } else { o };
        o.then(a.info.id.start_time.cmp(&b.info.id.start_time))
            .then(a.info.id.pid.cmp(&b.info.id.pid))
    }

    /// In words, for the status line: `sorted by CPU%, largest first`.
    pub fn describe(self) -> String {
        let way = match (self.key, self.descending) {
            (Column::Age | Column::Start, false) => "oldest first",
            (Column::Age | Column::Start, true) => "youngest first",
            (_, true) => "largest first",
            (_, false) => "smallest first",
        };
        format!("sorted by {}, {way}", self.key.title())
    }
}

/// The rows of the last rebuild, and what their texts were made of: the next rebuild takes
/// the texts whose inputs did not change.
#[derive(Debug, Default)]
struct Reuse {
    rows: Vec<Row>,
    made_of: Vec<MadeOf>,
}

/// What the texts of one row that usually last from one refresh to the next were made of.
#[derive(Clone, Debug)]
struct MadeOf {
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

/// A row's text: taken from the same process's old row when `same` (its inputs did not
/// change), else made.
fn again(
    prev: &mut Option<&mut Row>,
    same: bool,
    field: fn(&mut Row) -> &mut String,
    make: impl FnOnce() -> String,
) -> String {
    match prev.as_deref_mut() {
        Some(r) if same => std::mem::take(field(r)),
        _ => make(),
    }
}

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
    SaveColumns(crate::top::columns::Layout),
}

/// What the dashboard asks of the supervisor it is attached to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Control {
    /// Restart this helper: stop its process, if it has one, and launch it again.
    Restart(HelperTarget),
    /// Start this helper, which has no process.
    Start(HelperTarget),
    /// Stop this helper: it stays stopped until started.
    StopHelper(HelperTarget),
    /// Stop the supervisor: the orderly shutdown of its whole tree.
    Stop { supervisor: Identity },
}

/// A helper a key acts on, with what its confirmation says: its process and the rest of its
/// tree as the dashboard sees them, what stopping it sends, and the row the key was pressed on
/// when that row is not the helper's own process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HelperTarget {
    pub helper: String,
    /// Its running process.
    pub process: Option<Identity>,
    /// Whether that process is a nested supervisor.
    pub nested_supervisor: bool,
    /// The other live processes of its tree.
    pub descendants: usize,
    /// `SIGTERM`.
    pub stop_signal: String,
    pub stop_grace_ms: u64,
    /// Its state in words (`backoff`, `stopped by request`).
    pub state: String,
    /// The row the key was pressed on, when it is another process of the helper's tree: its
    /// pid and escaped name.
    pub from: Option<(i32, String)>,
}

impl HelperTarget {
    /// `helper web` (escaped).
    fn name(&self) -> String {
        format!("helper {}", escape(self.helper.as_bytes()))
    }

    /// `sleep 77 belongs to helper nested. ` when the key was pressed on another row.
    fn prefix(&self) -> String {
        match &self.from {
            Some((pid, comm)) => format!("{comm} {pid} belongs to {}. ", self.name()),
            None => String::new(),
        }
    }

    /// What stopping it does: `SIGTERM to its process 4710 (a nested supervisor), SIGKILL after
    /// 10s to what is left of it and of its 2 descendants`. The stop signal goes to its process
    /// alone (its descendants get their generation's orphan policy when it ends, as in any
    /// stop of the supervisor's); the SIGKILL to whatever of its tree outlives the grace.
    fn stop_text(&self, p: Identity) -> String {
        let what = if self.nested_supervisor {
            " (a nested supervisor)"
        } else {
            ""
        };
        let rest = match self.descendants {
            0 => String::new(),
            1 => " and of its 1 descendant".to_string(),
            n => format!(" and of its {n} descendants"),
        };
        // A supervisor that does not say (an older one): in general words.
        let signal = match self.stop_signal.as_str() {
            "" => "its stop signal".to_string(),
            s => escape(s.as_bytes()),
        };
        let after = match self.stop_grace_ms {
            0 => "its stop grace".to_string(),
            ms => crate::base::duration::Text(std::time::Duration::from_millis(ms)).to_string(),
        };
        format!(
            "{signal} to its process {}{what}, SIGKILL after {after} to what is left of it{rest}",
            p.pid
        )
    }
}

impl Control {
    /// The question the confirmation asks: exactly what will happen, and to what.
    pub fn question(&self) -> String {
        match self {
            Control::Restart(t) => match t.process {
                Some(p) => format!(
                    "{}Restart {}: {}, then launch it again?",
                    t.prefix(),
                    t.name(),
                    t.stop_text(p)
                ),
                None => format!(
                    "{}Launch {} now (it is {}, with no process), its backoff count started \
                     over?",
                    t.prefix(),
                    t.name(),
                    escape(t.state.as_bytes())
                ),
            },
            Control::Start(t) => format!(
                "{}Start {} now (it is {}, with no process), its backoff count started over?",
                t.prefix(),
                t.name(),
                escape(t.state.as_bytes())
            ),
            Control::StopHelper(t) => match t.process {
                Some(p) => format!(
                    "{}Stop {}: {}? It stays stopped until started (o).",
                    t.prefix(),
                    t.name(),
                    t.stop_text(p)
                ),
                None => format!(
                    "{}Stop {} (it is {}, with no process): not launched again until started \
                     (o)?",
                    t.prefix(),
                    t.name(),
                    escape(t.state.as_bytes())
                ),
            },
            Control::Stop { supervisor } => format!(
                "Stop supervisor {} and its whole tree (as SIGTERM would)?",
                supervisor.pid
            ),
        }
    }

    /// What the status line says while it is being done.
    pub fn pending(&self) -> String {
        match self {
            Control::Restart(t) => format!("restarting {}…", escape(t.helper.as_bytes())),
            Control::Start(t) => format!("starting {}…", escape(t.helper.as_bytes())),
            Control::StopHelper(t) => format!("stopping {}…", escape(t.helper.as_bytes())),
            Control::Stop { supervisor } => format!("stopping supervisor {}…", supervisor.pid),
        }
    }
}

/// The dialog on top of the tree, if any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dialog {
    None,
    Help {
        scroll: u16,
    },
    /// Choosing a signal for the process at `target` (and its subtree when `subtree`).
    Signals {
        target: Identity,
        subtree: bool,
        selected: usize,
        /// The signal number typed so far (`1` then `5` picks 15), 0 when none.
        typed: i32,
    },
    /// Asking to confirm.
    Confirm {
        target: Identity,
        subtree: bool,
        signal: Signal,
        count: usize,
    },
    /// Asking to confirm an action of the supervisor's.
    ConfirmControl(Control),
    /// Choosing whose processes to show: `uids[0]` is `None`, every user's.
    Users {
        uids: Vec<Option<u32>>,
        selected: usize,
    },
    /// The column setup (`F2`): the cursor on entry `selected` of [`App::columns`]; `changed`
    /// once anything was changed (saved on closing).
    Columns {
        selected: usize,
        changed: bool,
    },
}

/// Signals offered by the picker: every signal with a standard name ([`Sig::standard`]), in
/// signal-number order.
pub static SIGNALS: std::sync::LazyLock<Vec<Signal>> =
    std::sync::LazyLock::new(|| Sig::standard().filter_map(Sig::nix).collect());

/// Where the picker's cursor starts.
pub const DEFAULT_SIGNAL: Signal = Signal::SIGTERM;

/// Every key, for the help screen: (keys, what they do).
pub const KEYS: &[(&str, &str)] = &[
    ("↑ ↓  k j", "move the cursor"),
    (
        "PgUp PgDn  Home End  g G",
        "move by a page, to the top, to the bottom",
    ),
    ("←  h", "collapse the process (again: go to its parent)"),
    ("→", "expand the process"),
    ("Enter", "collapse or expand the process"),
    (
        "Space",
        "tag or untag the process (then the next row); s K F9 signal every tagged process",
    ),
    ("U", "untag every process"),
    ("-  C", "collapse all"),
    ("+  E", "expand all"),
    (
        "/  \\  F4",
        "filter, showing matches with their ancestors and descendants",
    ),
    ("  Enter  Esc", "keep the filter, clear it"),
    (
        "s  K  F9",
        "signal the process: pick (↑ ↓ or its number), Enter, confirm with y",
    ),
    ("S", "signal the process and all its descendants"),
    (
        "p  Z",
        "pause: exited processes stay on screen until resumed",
    ),
    (
        "f  F",
        "follow the process: keep it in view wherever it moves",
    ),
    (
        "R",
        "attached: restart the helper the process belongs to (confirm with y)",
    ),
    (
        "x",
        "attached: stop the helper the process belongs to; it stays stopped until o",
    ),
    (
        "o",
        "attached: start the helper (stopped, ended or given up on)",
    ),
    (
        "X",
        "attached: stop the supervisor and its whole tree (confirm with y)",
    ),
    (
        "l",
        "attached: the log pane of the selected helper (on the supervisor's row: every helper); again: close",
    ),
    (
        "Tab",
        "log pane: focus it, then ↑ ↓ PgUp PgDn Home End scroll, End follows the end; Tab or Esc: the tree",
    ),
    (
        "<  >  F6",
        "sort by the previous or next column (marked ▲ ▼ in the header)",
    ),
    ("P  M  T", "sort by CPU%, by memory, by age"),
    ("I", "invert the order"),
    ("t  F5", "the flat list of every process, or the tree"),
    (
        "F3",
        "search: the cursor goes to the rows that match, none hidden; Enter keeps, Esc clears",
    ),
    ("n  N", "the next, the previous match of the search"),
    (
        "u",
        "only one user's processes (with their ancestors): pick from those present",
    ),
    ("r", "refresh now"),
    (
        "m",
        "hide or show the meters (CPU, memory, load, tasks) and the selected process's history",
    ),
    (
        "e",
        "attached: hide or show the events pane; Tab scrolls it (when no log pane)",
    ),
    ("[  ]", "attached: the events pane smaller, larger"),
    (
        "H",
        "attached: only the events of the selected row's helper; again: every helper's",
    ),
    (
        "mouse",
        "click a row to select it, its tree drawing to collapse it, a title to sort; wheel scrolls",
    ),
    (
        "F2",
        "columns: ↑ ↓ choose, Space or Enter show/hide, [ ] or - + move; Esc saves and closes",
    ),
    ("?  F1", "this help (Esc closes)"),
    ("q  F10  Ctrl-C", "quit"),
];

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
    filter_collapsed: FxHashSet<Identity>,
    pub paused: bool,
    pub following: Option<Identity>,
    pub dialog: Dialog,
    /// The last result or notice, shown in the status line.
    pub message: Option<String>,
    /// The refresh interval, for the title.
    pub interval_text: String,
    /// The last reading failed: why.
    pub source_error: Option<String>,
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
    pub meters: crate::top::meters::Meters,
    /// The optional columns, in order, shown or not (`F2`).
    pub columns: crate::top::columns::Layout,
    /// The width each column was last drawn at: a column keeps it while its content fits, so
    /// the columns right of it do not jump sideways (see `ui`).
    pub column_widths: std::cell::RefCell<FxHashMap<crate::top::columns::Column, u16>>,
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

/// The events pane (attached): shown or not, its height, how far it is scrolled back, whether
/// it has the keys, and the helper whose events it shows alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventsPane {
    pub shown: bool,
    /// Its height chosen with `[` `]`; `None`: sized to what the tree leaves.
    pub height: Option<u16>,
    /// Lines scrolled back from the newest (0: the newest at the bottom, following).
    pub back: usize,
    /// It takes the scrolling keys (`Tab`).
    pub focus: bool,
    /// Only this helper's events (`H`).
    pub helper: Option<String>,
    /// Lines of events it showed when last drawn, set by the renderer.
    pub drawn: u16,
}

impl Default for EventsPane {
    fn default() -> EventsPane {
        EventsPane {
            shown: true,
            height: None,
            back: 0,
            focus: false,
            helper: None,
            drawn: 0,
        }
    }
}

/// Where things are on screen, set by the renderer at each drawing, for the mouse.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hits {
    /// The table: its header's line, and the lines of its rows (`top`, `height`).
    pub header_y: Option<u16>,
    pub rows: (u16, u16),
    /// Each column shown: where it starts and how wide it is (the command: to the edge).
    pub columns: Vec<(crate::top::columns::Column, u16, u16)>,
    /// The events pane's and the log pane's lines (`top`, `height`).
    pub events: Option<(u16, u16)>,
    pub logs: Option<(u16, u16)>,
}

/// How many lines a wheel step scrolls.
pub const WHEEL_LINES: isize = 3;

/// Lines the log pane keeps (as many as a helper keeps: the pane asks for them all).
pub const KEEP_LOG_LINES: usize = crate::supervision::output::ring::DEFAULT_LINES;

/// Whose lines the log pane shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogSource {
    Helper(String),
    /// Every helper's (the supervisor's row).
    Every,
}

/// What the log pane's stream brings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogItem {
    /// The stream has started: the helpers whose lines come (for the names' padding).
    Start {
        helpers: Vec<String>,
    },
    Line(crate::supervision::output::Line),
    /// This many lines were lost (the dashboard did not read them in time).
    Missed(u64),
    /// The stream ended, and why.
    Ended(String),
}

/// How a line of the pane is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PaneKind {
    Stdout,
    Stderr,
    /// Said by the dashboard (lines missed, the stream's end).
    Notice,
}

/// One line of the log pane: when it was read (`HH:MM:SS`), and the line as `foster run`
/// relays it (`NAME | text`, `NAME ! text`), escaped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PaneLine {
    pub when: String,
    pub text: String,
    pub kind: PaneKind,
}

/// The log pane: the lines of the selected row's helper, at most [`KEEP_LOG_LINES`], shown
/// following the end until scrolled.
#[derive(Debug)]
pub struct LogPane {
    /// Whose lines it shows (`None`: the selected row belongs to no helper).
    pub source: Option<LogSource>,
    lines: VecDeque<PaneLine>,
    /// The number of `lines[0]` among every line the pane has had.
    first: u64,
    /// The number of the first line shown, when scrolled; `None`: following the end.
    top: Option<u64>,
    /// Lines that fit on screen, set by the renderer.
    pub height: usize,
    /// It takes the scrolling keys.
    pub focus: bool,
    /// Said instead of lines while it has none.
    pub note: Option<String>,
    renderer: crate::supervision::output::Renderer,
    /// Counts changes of what it shows, for [`Screen`].
    version: u64,
}

impl LogPane {
    fn new() -> LogPane {
        LogPane {
            source: None,
            lines: VecDeque::new(),
            first: 0,
            top: None,
            height: 5,
            focus: false,
            note: Some(NO_HELPER.to_string()),
            renderer: crate::supervision::output::Renderer::new(
                &[],
                crate::supervision::output::Format::Text,
                false,
            ),
            version: 0,
        }
    }

    /// Whether it follows the end (not scrolled up).
    pub fn following(&self) -> bool {
        self.top.is_none()
    }

    /// The lines on screen, oldest first.
    pub fn window(&self) -> impl Iterator<Item = &PaneLine> {
        let h = self.height.max(1);
        let bottom = self.lines.len().saturating_sub(h);
        let start = match self.top {
            None => bottom,
            Some(t) => (t.saturating_sub(self.first) as usize).min(bottom),
        };
        self.lines.iter().skip(start).take(h)
    }

    /// How many lines it holds.
    pub fn len(&self) -> usize {
        self.lines.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    fn push(&mut self, line: PaneLine) {
        if self.lines.len() == KEEP_LOG_LINES {
            self.lines.pop_front();
            self.first += 1;
            if let Some(t) = self.top.as_mut() {
                *t = (*t).max(self.first);
            }
        }
        self.lines.push_back(line);
    }

    /// Moves the view by `delta` lines (negative: up); at the end it follows again.
    fn scroll(&mut self, delta: i64) {
        let h = self.height.max(1) as u64;
        let end_top = self.first + (self.lines.len() as u64).saturating_sub(h);
        let cur = self.top.unwrap_or(end_top) as i64;
        let to = (cur + delta).clamp(self.first as i64, end_top as i64) as u64;
        self.top = (to < end_top).then_some(to);
    }
}

/// The pane's note on a row of no helper.
const NO_HELPER: &str = "this process belongs to no helper: select a helper's row (on the \
                         supervisor's row, every helper's lines)";

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
            logs: None,
            sort: Sort::DEFAULT,
            tree: true,
            search: String::new(),
            search_editing: false,
            tagged: Vec::new(),
            user: None,
            meters: crate::top::meters::Meters::default(),
            columns: crate::top::columns::Layout::default(),
            column_widths: Default::default(),
            events: EventsPane::default(),
            hits: Hits::default(),
            user_names: FxHashMap::default(),
            boot_secs: None,
        }
    }

    /// What a reading must read of each process for the columns shown.
    pub fn wants(&self) -> crate::top::model::Wants {
        self.columns.wants()
    }

    /// Says in the status line where the columns were saved, or why they were not.
    pub fn columns_saved(&mut self, result: Result<std::path::PathBuf, String>) {
        self.message = Some(match result {
            Ok(p) => format!(
                "columns saved in {}",
                escape(p.as_os_str().as_encoded_bytes())
            ),
            Err(e) => format!("columns not saved: {}", escape(e.as_bytes())),
        });
    }

    /// The columns shown, in order, for this source: those of a supervisor only attached.
    pub fn shown_columns(&self) -> Vec<crate::top::columns::Column> {
        self.columns
            .shown()
            .into_iter()
            .filter(|c| self.model.supervised || !c.supervised_only())
            .collect()
    }

    /// Takes a new model. While paused, processes that vanished stay, marked exited.
    pub fn set_model(&mut self, mut model: Model) {
        if self.paused {
            model.carry_exited(&self.model);
        }
        self.source_error = None;
        // Start collapsed below the collapse depth, once per identity.
        if let Some(limit) = self.collapse_depth {
            let mut stack: Vec<(Identity, usize)> = model.roots().map(|r| (r, 0)).collect();
            while let Some((id, depth)) = stack.pop() {
                if self.seen.insert(id) && depth >= limit {
                    self.collapsed.insert(id);
                }
                stack.extend(model.nodes[&id].children.iter().map(|c| (*c, depth + 1)));
            }
            self.seen.retain(|i| model.nodes.contains_key(i));
        }
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
        let (rows, made_of, mut old) = self.rows_reusing(old, spare);
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

    fn scroll_to(&mut self, i: usize) {
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

    /// True when the row's own fields match: pid, name, command line, role, helper (never a
    /// note about another process, such as a helper with no process named on its
    /// supervisor's row).
    fn matches(&self, n: &Node, needle: &str) -> bool {
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

    /// The visible rows, in tree order.
    pub fn compute_rows(&self) -> Vec<Row> {
        self.rows_reusing(Reuse::default(), Reuse::default()).0
    }

    /// The visible rows, in tree order, and what each one's texts were made of: a text whose
    /// inputs are those of the same process's row in `old` is taken from it rather than made
    /// again (at each refresh, most processes' command, age, CPU, memory and state are what they
    /// were). The rows go in `into`'s vectors (emptied), and `old` comes back, its rows
    /// emptied of the texts taken.
    fn rows_reusing(&self, mut old: Reuse, into: Reuse) -> (Vec<Row>, Vec<MadeOf>, Reuse) {
        // Each old row by its process (none when they do not go with what they were made of).
        let old_at: FxHashMap<Identity, usize> = if old.rows.len() == old.made_of.len() {
            old.rows
                .iter()
                .enumerate()
                .map(|(i, r)| (r.id, i))
                .collect()
        } else {
            FxHashMap::default()
        };
        let Reuse {
            rows: old_rows,
            made_of: old_made,
        } = &mut old;
        let m = &self.model;
        let needle = self.filter.trim().to_lowercase();
        let search = self.search.trim().to_lowercase();
        let user = self.user;
        let filtering = !needle.is_empty() || user.is_some();
        let mut matched: FxHashSet<Identity> = FxHashSet::default();
        let mut include: FxHashSet<Identity> = FxHashSet::default();
        let mut forced_open: FxHashSet<Identity> = FxHashSet::default();
        if filtering {
            for n in m.nodes.values() {
                if (needle.is_empty() || self.matches(n, &needle))
                    && user.is_none_or(|u| n.info.uid == Some(u))
                {
                    matched.insert(n.info.id);
                }
            }
            for id in &matched {
                include.extend(m.subtree(*id));
                let anc = m.ancestors(*id);
                forced_open.extend(anc.iter().copied());
                include.extend(anc);
            }
        }
        if let Some(f) = self.following
            && m.nodes.contains_key(&f)
        {
            let anc = m.ancestors(f);
            forced_open.extend(anc.iter().copied());
            if filtering {
                include.insert(f);
                include.extend(anc);
            }
        }
        // The flat list shows the matches alone; the tree, with their ancestors and descendants.
        let flat = !self.tree;
        let visible = |id: &Identity| {
            !filtering
                || if flat {
                    matched.contains(id) || self.following == Some(*id)
                } else {
                    include.contains(id)
                }
        };
        // The optional columns' texts are made for the columns shown only (the others'
        // stay empty: nothing reads them), so a hidden column costs nothing a refresh.
        let shown = self.shown_columns();
        let text = |c: Column, make: &dyn Fn() -> String| {
            if shown.contains(&c) {
                make()
            } else {
                String::new()
            }
        };
        let sort = self.sort;
        let order = |nodes: &mut Vec<&'_ Node>| nodes.sort_by(|a, b| sort.compare(a, b));

        let Reuse {
            mut rows,
            mut made_of,
        } = into;
        rows.clear();
        made_of.clear();
        if !filtering {
            rows.reserve(m.len());
            made_of.reserve(m.len());
        }
        let user_shown = shown.contains(&Column::User);
        let mut scratch = String::new();
        // Flat: every process a root, without children.
        let mut roots: Vec<&Node> = if flat {
            m.nodes.values().filter(|n| visible(&n.info.id)).collect()
        } else {
            m.nodes.roots().filter(|n| visible(&n.info.id)).collect()
        };
        order(&mut roots);
        // (node, depth, whether it is the last of its siblings), depth first; `lasts` holds
        // that flag for the popped node's ancestors and itself.
        let mut stack: Vec<(&Node, usize, bool)> = Vec::new();
        let mut lasts: Vec<bool> = Vec::new();
        for (i, r) in roots.iter().enumerate().rev() {
            stack.push((r, 0, i + 1 == roots.len()));
        }
        let mut kids: Vec<&Node> = Vec::new();
        while let Some((n, depth, last)) = stack.pop() {
            let id = n.info.id;
            lasts.truncate(depth);
            lasts.push(last);
            kids.clear();
            if !flat {
                kids.extend(
                    n.children
                        .iter()
                        .filter(|c| visible(c))
                        .filter_map(|c| m.nodes.get(c)),
                );
            }
            order(&mut kids);
            let collapsed = !kids.is_empty()
                && self.collapsed.contains(&id)
                && (!forced_open.contains(&id) || self.filter_collapsed.contains(&id));
            let prefix = &mut scratch;
            prefix.clear();
            for (level, last) in lasts.iter().enumerate().skip(1) {
                if level + 1 == lasts.len() {
                    prefix.push_str(if *last { "└─" } else { "├─" });
                } else {
                    prefix.push_str(if *last { "  " } else { "│ " });
                }
            }
            if collapsed {
                prefix.push('+');
            } else if depth > 0 {
                prefix.push(' ');
            }
            let (cpu, rss, hidden, hidden_anomalies) = if collapsed {
                let (mut cpu, mut rss, mut len, mut ha) = (None, 0u64, 0, 0);
                for d in m.nodes.descendants(&id) {
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
            } else {
                (n.cpu_pct, n.info.rss_bytes, 0, 0)
            };
            // What this row's lasting texts are made of, and the same process's old row.
            let made = MadeOf {
                cmdline: n.info.cmdline.clone(),
                state: (n.exited, n.info.state),
                age: crate::top::model::age_class(n.age_secs),
                cpu: (n.exited, cpu.map(f64::to_bits)),
                rss: (n.exited && !collapsed, rss),
                uid: n.info.uid,
            };
            let (mut prev, was) = match old_at.get(&id) {
                Some(&i) => (Some(&mut old_rows[i]), Some(&old_made[i])),
                None => (None, None),
            };
            let same = |f: fn(&MadeOf, &MadeOf) -> bool| was.is_some_and(|w| f(w, &made));
            let same_command = same(|w, m| {
                !m.cmdline.is_empty()
                    && (Arc::ptr_eq(&w.cmdline, &m.cmdline) || w.cmdline == m.cmdline)
            });
            let prefix = match prev.as_deref_mut() {
                Some(r) if r.prefix == *prefix => std::mem::take(&mut r.prefix),
                _ => prefix.clone(),
            };
            let command = again(
                &mut prev,
                same_command,
                |r| &mut r.command,
                || command_text(n),
            );
            let state = again(
                &mut prev,
                same(|w, m| w.state == m.state),
                |r| &mut r.state,
                || {
                    if n.exited {
                        "exit".to_string()
                    } else {
                        escape(&[n.info.state])
                    }
                },
            );
            let age = again(
                &mut prev,
                same(|w, m| w.age == m.age),
                |r| &mut r.age,
                || fmt_age(n.age_secs),
            );
            let cpu = again(
                &mut prev,
                same(|w, m| w.cpu == m.cpu),
                |r| &mut r.cpu,
                || {
                    if n.exited {
                        String::new()
                    } else {
                        fmt_cpu(cpu)
                    }
                },
            );
            let rss = again(
                &mut prev,
                same(|w, m| w.rss == m.rss),
                |r| &mut r.rss,
                || {
                    if n.exited && !collapsed {
                        String::new()
                    } else {
                        fmt_bytes(rss)
                    }
                },
            );
            // Shown before (a shown USER is never empty) and now, for the same owner.
            let same_user = user_shown
                && same(|w, m| w.uid == m.uid)
                && prev.as_ref().is_some_and(|r| !r.user.is_empty());
            let user = again(
                &mut prev,
                same_user,
                |r| &mut r.user,
                || {
                    text(Column::User, &|| {
                        n.info.uid.map_or_else(
                            || "-".to_string(),
                            |u| {
                                self.user_names
                                    .get(&u)
                                    .cloned()
                                    .unwrap_or_else(|| u.to_string())
                            },
                        )
                    })
                },
            );
            made_of.push(made);
            let sup = n.info.supervision.as_ref();
            rows.push(Row {
                id,
                depth,
                prefix,
                has_children: !kids.is_empty(),
                collapsed,
                hidden,
                hidden_anomalies,
                role: sup.map(|s| escape(s.role.as_bytes())).unwrap_or_default(),
                helper: sup
                    .and_then(|s| s.helper.as_ref())
                    .map(|h| escape(h.as_bytes()))
                    .unwrap_or_default(),
                helper_state: sup
                    .and_then(|s| s.helper_state.as_ref())
                    .map(|h| escape(h.state.as_bytes()))
                    .unwrap_or_default(),
                helper_detail: sup.and_then(|s| {
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
                }),
                generation: sup.map(|s| s.generation.to_string()).unwrap_or_default(),
                state,
                policy: sup.map(|s| escape(s.policy.as_bytes())).unwrap_or_default(),
                age,
                cpu,
                rss,
                command,
                anomalies: n.anomalies.iter().map(Anomaly::short).collect(),
                anomaly_details: n.anomalies.iter().map(Anomaly::describe).collect(),
                exited: n.exited,
                matched: matched.contains(&id),
                found: !search.is_empty() && self.matches(n, &search),
                tagged: self.tagged.contains(&id),
                user,
                ppid: text(Column::Ppid, &|| n.info.ppid.to_string()),
                pgid: text(Column::Pgid, &|| opt(n.info.ext.pgid)),
                sid: text(Column::Sid, &|| opt(n.info.ext.sid)),
                threads: text(Column::Threads, &|| opt(n.info.ext.threads)),
                start: text(Column::Start, &|| match self.boot_secs {
                    Some(b) => {
                        start_text(b + (n.info.id.start_time / m.hz.max(1)) as i64, n.age_secs)
                    }
                    None => "-".into(),
                }),
                io_read: text(Column::IoRead, &|| {
                    io_text(n.io_rate.map(|r| r.0), n.info.ext.io.is_some())
                }),
                io_write: text(Column::IoWrite, &|| {
                    io_text(n.io_rate.map(|r| r.1), n.info.ext.io.is_some())
                }),
                cgroup: text(Column::Cgroup, &|| {
                    n.info
                        .ext
                        .cgroup
                        .as_ref()
                        .map_or_else(|| "-".into(), |c| escape(c.as_bytes()))
                }),
                pidns: text(Column::PidNs, &|| opt(n.info.ext.pidns)),
            });
            if !collapsed {
                for (i, k) in kids.iter().enumerate().rev() {
                    stack.push((k, depth + 1, i + 1 == kids.len()));
                }
            }
        }
        (rows, made_of, old)
    }

    fn move_cursor(&mut self, delta: isize) {
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

    fn relayout(&mut self) {
        let idx = self.cursor_index();
        self.rebuild(idx);
    }

    /// Collapses or expands the cursor's process.
    fn set_collapsed(&mut self, collapse: bool) {
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

    /// Handles one key; returns what the caller must do.
    pub fn on_key(&mut self, key: KeyEvent) -> Vec<Effect> {
        if key.kind == KeyEventKind::Release {
            return Vec::new();
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if ctrl && key.code == KeyCode::Char('c') {
            return vec![Effect::Quit];
        }
        match self.dialog.clone() {
            Dialog::Help { scroll } => {
                match key.code {
                    KeyCode::Down | KeyCode::Char('j') => {
                        self.dialog = Dialog::Help {
                            scroll: scroll.saturating_add(1),
                        }
                    }
                    KeyCode::Up | KeyCode::Char('k') => {
                        self.dialog = Dialog::Help {
                            scroll: scroll.saturating_sub(1),
                        }
                    }
                    KeyCode::Char('q') | KeyCode::F(10) => return vec![Effect::Quit],
                    _ => self.dialog = Dialog::None,
                }
                return Vec::new();
            }
            Dialog::Signals {
                target,
                subtree,
                selected,
                typed,
            } => {
                match key.code {
                    KeyCode::Down | KeyCode::Char('j') => {
                        self.dialog = Dialog::Signals {
                            target,
                            subtree,
                            selected: (selected + 1).min(SIGNALS.len() - 1),
                            typed: 0,
                        }
                    }
                    KeyCode::Up | KeyCode::Char('k') => {
                        self.dialog = Dialog::Signals {
                            target,
                            subtree,
                            selected: selected.saturating_sub(1),
                            typed: 0,
                        }
                    }
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
                                self.dialog = Dialog::Signals {
                                    target,
                                    subtree,
                                    selected: i,
                                    typed,
                                };
                                self.message = None;
                            }
                            None => {
                                self.message = Some(format!("no signal number {typed} in the list"))
                            }
                        }
                    }
                    KeyCode::Enter => {
                        let count = if subtree {
                            self.model.subtree(target).len()
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
                return Vec::new();
            }
            Dialog::Confirm {
                target,
                subtree,
                signal,
                ..
            } => {
                self.dialog = Dialog::None;
                if matches!(key.code, KeyCode::Char('y') | KeyCode::Char('Y')) {
                    let ids = if subtree {
                        self.model.subtree(target)
                    } else if !self.tagged.is_empty() {
                        std::mem::take(&mut self.tagged)
                    } else {
                        vec![target]
                    };
                    let targets: Vec<(Identity, Vec<u8>)> = ids
                        .into_iter()
                        .filter(|i| self.model.nodes.get(i).is_some_and(|n| !n.exited))
                        .map(|i| (i, self.model.nodes[&i].info.comm.clone()))
                        .collect();
                    if targets.is_empty() {
                        self.message = Some(format!("process {} has exited", target.pid));
                        return Vec::new();
                    }
                    return vec![Effect::Signal { targets, signal }];
                }
                self.message = Some("cancelled".into());
                return Vec::new();
            }
            Dialog::Users { uids, selected } => {
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
                return Vec::new();
            }
            Dialog::Columns { selected, changed } => {
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
                return Vec::new();
            }
            Dialog::ConfirmControl(c) => {
                self.dialog = Dialog::None;
                if matches!(key.code, KeyCode::Char('y') | KeyCode::Char('Y')) {
                    self.message = Some(c.pending());
                    return vec![Effect::Control(c)];
                }
                self.message = Some("cancelled".into());
                return Vec::new();
            }
            Dialog::None => {}
        }
        if self.search_editing {
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
            return Vec::new();
        }
        if self.filter_editing {
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
            return Vec::new();
        }
        // A notice lasts until the next key.
        self.message = None;
        if let Some(p) = self.logs.as_mut().filter(|p| p.focus) {
            let page = p.height.max(1) as i64;
            match key.code {
                KeyCode::Up | KeyCode::Char('k') => p.scroll(-1),
                KeyCode::Down | KeyCode::Char('j') => p.scroll(1),
                KeyCode::PageUp => p.scroll(-page),
                KeyCode::PageDown => p.scroll(page),
                KeyCode::Home | KeyCode::Char('g') => p.scroll(i64::MIN / 2),
                KeyCode::End | KeyCode::Char('G') => p.top = None,
                KeyCode::Tab | KeyCode::Esc => p.focus = false,
                // Every other key does what it does in the tree.
                _ => return self.on_tree_key(key),
            }
            p.version += 1;
            return Vec::new();
        }
        if self.events.focus {
            let page = self.events.drawn.max(1) as isize;
            match key.code {
                KeyCode::Up | KeyCode::Char('k') => self.scroll_events(1),
                KeyCode::Down | KeyCode::Char('j') => self.scroll_events(-1),
                KeyCode::PageUp => self.scroll_events(page),
                KeyCode::PageDown => self.scroll_events(-page),
                KeyCode::Home | KeyCode::Char('g') => self.scroll_events(isize::MAX / 2),
                KeyCode::End | KeyCode::Char('G') => self.events.back = 0,
                KeyCode::Tab | KeyCode::Esc => self.events.focus = false,
                _ => return self.on_tree_key(key),
            }
            return Vec::new();
        }
        self.on_tree_key(key)
    }

    /// Scrolls the events pane `up` lines back (negative: towards the newest).
    fn scroll_events(&mut self, up: isize) {
        let total = self.event_lines().len();
        let h = self.events.drawn.max(1) as usize;
        let max = total.saturating_sub(h) as isize;
        self.events.back = (self.events.back as isize + up).clamp(0, max) as usize;
    }

    /// The events pane is drawn (attached, shown).
    fn events_drawn(&self) -> bool {
        self.model.supervised && self.events.shown
    }

    /// Handles one mouse event; true when it changed something (the screen is then redrawn).
    /// A click selects a row, on the tree drawing before a command (or its first letter)
    /// collapses or expands it, on a column's title sorts by it (again: the other way); the
    /// wheel moves the cursor, or scrolls the pane it is over.
    pub fn on_mouse(&mut self, m: crossterm::event::MouseEvent) -> bool {
        use crossterm::event::{MouseButton, MouseEventKind};
        if self.dialog != Dialog::None {
            return false;
        }
        let (x, y) = (m.column, m.row);
        let inside = |area: Option<(u16, u16)>| area.is_some_and(|(t, h)| y >= t && y < t + h);
        match m.kind {
            MouseEventKind::ScrollUp | MouseEventKind::ScrollDown => {
                let up = m.kind == MouseEventKind::ScrollUp;
                if inside(self.hits.events) {
                    self.scroll_events(if up { WHEEL_LINES } else { -WHEEL_LINES });
                } else if inside(self.hits.logs) {
                    if let Some(p) = self.logs.as_mut() {
                        p.scroll(if up { -WHEEL_LINES } else { WHEEL_LINES } as i64);
                        p.version += 1;
                    }
                } else {
                    self.message = None;
                    self.move_cursor(if up { -WHEEL_LINES } else { WHEEL_LINES });
                }
                true
            }
            MouseEventKind::Down(MouseButton::Left) => {
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
                self.cursor = Some(row.id);
                if self.following.is_some_and(|f| f != row.id) {
                    self.following = None;
                }
                // On the tree drawing before the command, or its first letter: the marker.
                if let Some((crate::top::columns::Column::Command, x0, _)) = column {
                    let marker = x0 + ratatui::text::Line::raw(row.prefix.as_str()).width() as u16;
                    if x <= marker && (row.has_children || row.collapsed) {
                        self.set_collapsed(!row.collapsed);
                    }
                }
                true
            }
            _ => false,
        }
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

    /// The pane now shows `source`'s lines (none yet: the stream is being opened), or says the
    /// row belongs to no helper.
    pub fn log_switch(&mut self, source: Option<LogSource>) {
        let Some(p) = self.logs.as_mut() else {
            return;
        };
        p.note = Some(match &source {
            None => NO_HELPER.to_string(),
            Some(_) => "asking the supervisor…".to_string(),
        });
        p.source = source;
        p.lines.clear();
        p.first = 0;
        p.top = None;
        p.version += 1;
    }

    /// Takes what the log stream brought.
    pub fn log_items(&mut self, items: Vec<LogItem>) {
        let Some(p) = self.logs.as_mut() else {
            return;
        };
        let mut buf = Vec::new();
        for item in items {
            let line = match item {
                LogItem::Start { helpers } => {
                    let names: Vec<&str> = helpers.iter().map(String::as_str).collect();
                    p.renderer = crate::supervision::output::Renderer::new(
                        &names,
                        crate::supervision::output::Format::Text,
                        false,
                    );
                    p.note = Some("no line kept yet".into());
                    continue;
                }
                LogItem::Line(l) => {
                    buf.clear();
                    p.renderer.render(&l, &mut buf);
                    if buf.last() == Some(&b'\n') {
                        buf.pop();
                    }
                    PaneLine {
                        when: crate::supervision::event::clock_text(l.ts_ms, false),
                        // The relay's text is escaped; lossy only in name.
                        text: String::from_utf8_lossy(&buf).into_owned(),
                        kind: match l.stream {
                            crate::supervision::output::Stream::Stdout => PaneKind::Stdout,
                            crate::supervision::output::Stream::Stderr => PaneKind::Stderr,
                        },
                    }
                }
                LogItem::Missed(n) => PaneLine {
                    when: String::new(),
                    text: format!(
                        "… {n} line{} missed (the dashboard did not read fast enough)",
                        if n == 1 { "" } else { "s" }
                    ),
                    kind: PaneKind::Notice,
                },
                LogItem::Ended(why) => PaneLine {
                    when: String::new(),
                    text: format!("the stream of lines ended: {}", escape(why.as_bytes())),
                    kind: PaneKind::Notice,
                },
            };
            p.push(line);
        }
        p.version += 1;
    }

    fn on_tree_key(&mut self, key: KeyEvent) -> Vec<Effect> {
        match key.code {
            KeyCode::Char('q') | KeyCode::F(10) => return vec![Effect::Quit],
            KeyCode::Up | KeyCode::Char('k') => self.move_cursor(-1),
            KeyCode::Down | KeyCode::Char('j') => self.move_cursor(1),
            KeyCode::PageUp => self.move_cursor(-(self.page as isize)),
            KeyCode::PageDown => self.move_cursor(self.page as isize),
            KeyCode::Home | KeyCode::Char('g') => self.move_cursor(isize::MIN / 2),
            KeyCode::End | KeyCode::Char('G') => self.move_cursor(isize::MAX / 2),
            KeyCode::Left | KeyCode::Char('h') => self.set_collapsed(true),
            KeyCode::Right => self.set_collapsed(false),
            KeyCode::Char(' ') => {
                // Tag or untag, then the next row (as in htop).
                if let Some(r) = self.cursor_row() {
                    let id = r.id;
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
            }
            KeyCode::Char('U') => {
                self.tagged.clear();
                self.message = Some("no process tagged".into());
                self.relayout();
            }
            KeyCode::Enter => {
                if let Some(r) = self.cursor_row() {
                    let collapse = !r.collapsed;
                    if r.has_children {
                        self.set_collapsed(collapse);
                    }
                }
            }
            KeyCode::Char('-') | KeyCode::Char('C') => {
                self.collapsed = self
                    .model
                    .nodes
                    .values()
                    .filter(|n| !n.children.is_empty())
                    .map(|n| n.info.id)
                    .collect();
                self.relayout();
            }
            KeyCode::Char('+') | KeyCode::Char('=') | KeyCode::Char('E') => {
                self.collapsed.clear();
                self.filter_collapsed.clear();
                self.relayout();
            }
            KeyCode::Char('/') | KeyCode::Char('\\') | KeyCode::F(4) => {
                // The current filter, to refine; Backspace or Esc clear it.
                self.filter_editing = true;
                self.relayout();
            }
            KeyCode::Esc if !self.filter.is_empty() => {
                self.filter.clear();
                self.filter_collapsed.clear();
                self.relayout();
            }
            KeyCode::Char('s') | KeyCode::Char('S') | KeyCode::Char('K') | KeyCode::F(9) => {
                let subtree = key.code == KeyCode::Char('S');
                if let Some(r) = self.cursor_row() {
                    if r.exited {
                        self.message = Some(format!("process {} has exited", r.id.pid));
                    } else {
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
                }
            }
            KeyCode::Char('p') | KeyCode::Char('Z') => {
                self.paused = !self.paused;
                self.message = Some(if self.paused { "paused" } else { "resumed" }.to_string());
                if !self.paused {
                    // Drop the exited rows now rather than at the next reading.
                    if self.model.drop_exited() {
                        self.relayout();
                    }
                    return vec![Effect::Refresh];
                }
            }
            KeyCode::Char('f') | KeyCode::Char('F') => {
                if self.following.is_some() {
                    self.following = None;
                    self.message = Some("follow off".into());
                } else if let Some(c) = self.cursor {
                    self.following = Some(c);
                    self.message = Some(format!("following {}", c.pid));
                }
                self.relayout();
            }
            KeyCode::Char('R') => self.ask_restart(),
            KeyCode::Char('x') => self.ask_stop_helper(),
            KeyCode::Char('o') => self.ask_start(),
            KeyCode::Char('X') => self.ask_stop(),
            KeyCode::Char('l') => self.toggle_logs(),
            KeyCode::Tab => match self.logs.as_mut() {
                Some(p) => {
                    p.focus = true;
                    p.version += 1;
                }
                None if self.model.supervised && self.events.shown => {
                    self.events.focus = true;
                    self.message = Some(
                        "events pane: ↑ ↓ PgUp PgDn Home scroll back · End the newest · Tab the tree"
                            .into(),
                    );
                }
                None => {
                    self.message = Some(
                        "Tab focuses the log pane (l opens it) or, attached, the events pane"
                            .into(),
                    );
                }
            },
            KeyCode::Char('e') => {
                if !self.model.supervised {
                    self.message =
                        Some("no supervisor attached: events need foster top --attach".into());
                } else {
                    self.events.shown = !self.events.shown;
                    self.events.focus = false;
                    self.message = Some(
                        if self.events.shown {
                            "events pane shown; e hides it"
                        } else {
                            "events pane hidden; e shows it"
                        }
                        .into(),
                    );
                }
            }
            KeyCode::Char('[') | KeyCode::Char(']') => {
                if !self.events_drawn() {
                    self.message = Some(
                        "[ ] resize the events pane: attach to a supervisor, e shows it".into(),
                    );
                } else {
                    let now = self.events.height.unwrap_or(self.events.drawn + 1);
                    let h = if key.code == KeyCode::Char('[') {
                        now.saturating_sub(2).max(2)
                    } else {
                        now.saturating_add(2).min(200)
                    };
                    self.events.height = Some(h);
                    self.message = Some(format!(
                        "events pane: {} line{}; [ ] resize",
                        h - 1,
                        if h == 2 { "" } else { "s" }
                    ));
                }
            }
            KeyCode::Char('H') => {
                if !self.model.supervised {
                    self.message =
                        Some("no supervisor attached: events need foster top --attach".into());
                } else if self.events.helper.take().is_some() {
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
                        None => "this process belongs to no helper: H filters the events on a \
                                 helper's row"
                            .into(),
                    });
                    self.events.helper = helper;
                }
                self.events.back = 0;
            }
            KeyCode::Char('<') | KeyCode::Char('>') | KeyCode::F(6) => {
                // The columns shown, in their order, then the command.
                let keys: Vec<Column> = self
                    .shown_columns()
                    .into_iter()
                    .chain([Column::Command])
                    .filter(|c| c.sorts())
                    .collect();
                let at = keys.iter().position(|k| *k == self.sort.key).unwrap_or(0);
                let next = if key.code == KeyCode::Char('<') {
                    (at + keys.len() - 1) % keys.len()
                } else {
                    (at + 1) % keys.len()
                };
                self.set_sort(keys[next], self.sort.descending);
            }
            KeyCode::Char('P') => self.set_sort(Column::Cpu, true),
            KeyCode::Char('M') => self.set_sort(Column::Rss, true),
            KeyCode::Char('T') => self.set_sort(Column::Age, false),
            KeyCode::Char('I') => self.set_sort(self.sort.key, !self.sort.descending),
            KeyCode::Char('t') | KeyCode::F(5) => {
                self.tree = !self.tree;
                self.message = Some(if self.tree {
                    "tree view: siblings in order; t flat list".to_string()
                } else {
                    "flat list of every process; t tree view".to_string()
                });
                self.relayout();
            }
            KeyCode::F(3) => {
                // The current search, to refine or to go on with (F3 again: the next match).
                self.search_editing = true;
                self.message = None;
            }
            KeyCode::Char('u') => {
                // The users present, as in htop; the current choice under the cursor.
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
                } else {
                    let uids: Vec<Option<u32>> = std::iter::once(None)
                        .chain(uids.into_iter().map(Some))
                        .collect();
                    let selected = uids.iter().position(|u| *u == self.user).unwrap_or(0);
                    self.dialog = Dialog::Users { uids, selected };
                }
            }
            KeyCode::Char('n') => self.find(1, false),
            KeyCode::Char('N') => self.find(-1, false),
            KeyCode::Char('r') => return vec![Effect::Refresh],
            KeyCode::Char('m') => self.meters.shown = !self.meters.shown,
            KeyCode::Char('?') | KeyCode::F(1) => self.dialog = Dialog::Help { scroll: 0 },
            KeyCode::F(2) => {
                self.dialog = Dialog::Columns {
                    selected: 0,
                    changed: false,
                }
            }
            KeyCode::Modifier(_) | KeyCode::Null => {}
            _ => self.message = Some(unknown_key(&key)),
        }
        Vec::new()
    }

    /// Moves the cursor to the next (`dir` 1) or previous (-1) row that matches the search,
    /// around the end; `here`: the cursor's own row counts. Says where it is.
    fn find(&mut self, dir: isize, here: bool) {
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
    fn say_found(&mut self) {
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

    /// Sorts by `key`, and says so in the status line.
    fn set_sort(&mut self, key: Column, descending: bool) {
        self.sort = Sort { key, descending };
        self.message = Some(format!(
            "{} · < > F6 another column · I invert",
            self.sort.describe()
        ));
        self.relayout();
    }

    /// The helper the cursor's row belongs to (its own process, or any process of its tree),
    /// described for a confirmation; on the supervisor's row, its first helper with no process
    /// that is failing. Otherwise the reason there is none, for the status line.
    fn helper_target(&self, key: char) -> Result<HelperTarget, String> {
        let Some(row) = self.cursor_row() else {
            return Err(String::new());
        };
        if !self.model.supervised {
            return Err(format!(
                "{key} acts on a helper: attach to its supervisor (foster top --attach SOCKET)"
            ));
        }
        let node = &self.model.nodes[&row.id];
        let sup = node.info.supervision.as_ref();
        // A supervisor's row stands for its helpers that have no process: the first failing
        // one its note names, else the first one stopped by request.
        let down = || {
            sup.and_then(|s| s.down_helpers.first())
                .map(|d| d.helper.clone())
                .or_else(|| {
                    self.model
                        .helpers
                        .iter()
                        .find(|h| h.identity.is_none() && h.state == HelperState::Stopped)
                        .map(|h| h.name.clone())
                })
        };
        let name = match sup.and_then(|s| s.helper.clone()) {
            Some(h) => h,
            None => match down().filter(|_| sup.is_some_and(|s| s.role == "supervisor")) {
                Some(h) => h,
                None => {
                    return Err(format!(
                        "{} belongs to no helper: {key} acts on a helper from its rows",
                        row.id.pid
                    ));
                }
            },
        };
        let summary = self.model.helper(&name);
        let process = summary.and_then(|h| h.identity);
        let descendants = self
            .model
            .nodes
            .values()
            .filter(|n| {
                !n.exited
                    && Some(n.info.id) != process
                    && n.info
                        .supervision
                        .as_ref()
                        .is_some_and(|s| s.helper.as_deref() == Some(name.as_str()))
            })
            .count();
        let nested_supervisor = process
            .and_then(|p| self.model.nodes.get(&p))
            .and_then(|n| n.info.supervision.as_ref())
            .is_some_and(|s| s.role == "supervisor");
        let own = process == Some(row.id) || sup.is_some_and(|s| s.helper.is_none());
        Ok(HelperTarget {
            helper: name,
            process,
            nested_supervisor,
            descendants,
            stop_signal: summary.map_or_else(|| "SIGTERM".into(), |h| h.stop_signal.clone()),
            stop_grace_ms: summary.map_or(0, |h| h.stop_grace_ms),
            state: summary.map_or_else(String::new, |h| h.state_text()),
            from: (!own).then(|| (row.id.pid, escape(&node.info.comm))),
        })
    }

    fn ask_restart(&mut self) {
        match self.helper_target('R') {
            Ok(t) => self.dialog = Dialog::ConfirmControl(Control::Restart(t)),
            Err(why) if !why.is_empty() => self.message = Some(why),
            Err(_) => {}
        }
    }

    fn ask_stop_helper(&mut self) {
        match self.helper_target('x') {
            Ok(t) if t.process.is_none() && t.state.starts_with("stopped") => {
                self.message = Some(format!(
                    "helper {} is already {}",
                    escape(t.helper.as_bytes()),
                    escape(t.state.as_bytes())
                ))
            }
            Ok(t) => self.dialog = Dialog::ConfirmControl(Control::StopHelper(t)),
            Err(why) if !why.is_empty() => self.message = Some(why),
            Err(_) => {}
        }
    }

    fn ask_start(&mut self) {
        match self.helper_target('o') {
            Ok(t) if t.process.is_some() => {
                self.message = Some(format!(
                    "helper {} is already {} ({}): nothing to start; R restarts it",
                    escape(t.helper.as_bytes()),
                    escape(t.state.as_bytes()),
                    t.process.map_or(0, |p| p.pid)
                ))
            }
            Ok(t) => self.dialog = Dialog::ConfirmControl(Control::Start(t)),
            Err(why) if !why.is_empty() => self.message = Some(why),
            Err(_) => {}
        }
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

    /// Records what the supervisor answered to an action: its message, or the error's.
    pub fn control_done(&mut self, result: Result<String, String>) {
        self.message = Some(match result {
            Ok(m) => escape(m.as_bytes()),
            Err(e) => format!("failed: {}", escape(e.as_bytes())),
        });
    }

    /// Records what sending a signal did: `results` holds one entry per target.
    pub fn signal_done(
        &mut self,
        signal: Signal,
        results: &[(Identity, Vec<u8>, Result<(), nix::errno::Errno>)],
    ) {
        let texts: Vec<(Identity, Vec<u8>, Result<(), String>)> = results
            .iter()
            .map(|(i, n, r)| (*i, n.clone(), r.map_err(errno_text)))
            .collect();
        self.signal_results(signal, &texts);
    }

    /// Records what sending a signal did, with each failure already in words (an errno named,
    /// or the supervisor's refusal).
    pub fn signal_results(
        &mut self,
        signal: Signal,
        results: &[(Identity, Vec<u8>, Result<(), String>)],
    ) {
        let failed: Vec<&(Identity, Vec<u8>, Result<(), String>)> =
            results.iter().filter(|r| r.2.is_err()).collect();
        self.message = Some(match (results, failed.as_slice()) {
            ([(id, name, Ok(()))], _) => {
                format!("sent {} to {} ({})", signal.as_str(), id.pid, escape(name))
            }
            ([(id, name, Err(e))], _) => format!(
                "{} to {} ({}) failed: {}",
                signal.as_str(),
                id.pid,
                escape(name),
                escape(e.as_bytes())
            ),
            (_, []) => format!("sent {} to {} processes", signal.as_str(), results.len()),
            (_, [(id, name, Err(e)), ..]) => format!(
                "sent {} to {} of {} processes; {} ({}) failed: {}{}",
                signal.as_str(),
                results.len() - failed.len(),
                results.len(),
                id.pid,
                escape(name),
                escape(e.as_bytes()),
                if failed.len() > 1 {
                    format!(" (and {} more)", failed.len() - 1)
                } else {
                    String::new()
                }
            ),
            _ => unreachable!("failed holds only errors"),
        });
    }

    /// The rows on screen now.
    pub fn window(&self) -> &[Row] {
        let end = (self.offset + self.page).min(self.rows.len());
        &self.rows[self.offset.min(end)..end]
    }

    /// The events pane's lines, newest last: (how long ago, escaped text).
    /// The wall-clock time (`14:03:27`, local) when the source knows it, else how long ago
    /// (`42s ago`): a time does not change every second, so a quiet pane is not redrawn.
    pub fn event_lines(&self) -> Vec<(String, String)> {
        let hz = self.model.hz.max(1);
        self.model
            .events
            .iter()
            .filter(|e| {
                self.events
                    .helper
                    .as_ref()
                    .is_none_or(|h| e.helper.as_ref() == Some(h))
            })
            .map(|e| {
                let when = if e.wall_ms > 0 {
                    crate::supervision::event::clock_text(e.wall_ms, false)
                } else {
                    format!(
                        "{} ago",
                        fmt_age(self.model.now_ticks.saturating_sub(e.at_ticks) / hz)
                    )
                };
                (when, escape(&e.text))
            })
            .collect()
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
            source_error: self.source_error.clone(),
            events: if self.model.supervised && self.events.shown {
                self.event_lines()
            } else {
                Vec::new()
            },
            events_pane: self.events.clone(),
            logs: self
                .logs
                .as_ref()
                .map(|p| (p.version, p.top, p.focus, p.height)),
            sort: self.sort,
            tree: self.tree,
            tagged: self.tagged.clone(),
            user: self.user,
            meters: self.meter_texts(),
        }
    }

    /// What the meters show; under a filter (`/`, `u`), Tasks counts the live rows it leaves.
    pub fn meter_texts(&self) -> crate::top::meters::Texts {
        let mut t = self.meters.texts(&self.model, self.cursor);
        if !self.filter.is_empty() || self.user.is_some() {
            t.tasks.shown = Some(self.rows.iter().filter(|r| !r.exited).count());
        }
        t
    }

    /// Counts for the title: processes, and anomalies anywhere in the model.
    pub fn totals(&self) -> (usize, usize) {
        let anomalies = self.model.nodes.values().map(|n| n.anomalies.len()).sum();
        (self.model.len(), anomalies)
    }
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
    meters: crate::top::meters::Texts,
}

/// The escaped command line of a node, or its name in brackets when it has none (zombies,
/// kernel threads, unreadable).
pub fn command_text(n: &Node) -> String {
    if n.info.cmdline.is_empty() {
        format!("[{}]", escape(&n.info.comm))
    } else {
        escape_args(&n.info.cmdline)
    }
}

/// A value, or `-` when unknown.
fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".into(), |v| v.to_string())
}

/// A user's name (escaped), or the uid's number when it has none.
pub fn user_name(uid: u32) -> String {
    match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
        Ok(Some(u)) => escape(u.name.as_bytes()),
        _ => uid.to_string(),
    }
}

/// An I/O column's text: the rate once two readings gave one, empty while the first reading
/// waits for its second, `-` where the counters were not read (not readable, or not in the
/// snapshot).
fn io_text(rate: Option<f64>, readable: bool) -> String {
    match rate {
        Some(r) => fmt_rate(r),
        None if readable => String::new(),
        None => "-".into(),
    }
}

/// Bytes per second, as RSS shows bytes: `0`, `812K`, `12.3M`.
pub fn fmt_rate(bps: f64) -> String {
    if bps < 1.0 {
        "0".into()
    } else {
        fmt_bytes(bps as u64)
    }
}

/// When a process started, in local time: `14:03` within the last day, else `Nov30`.
pub fn start_text(secs: i64, age_secs: u64) -> String {
    let Some(tm) = crate::supervision::event::local_time(secs.max(0) as u64) else {
        return "-".into();
    };
    if age_secs < 86400 {
        format!("{:02}:{:02}", tm.tm_hour, tm.tm_min)
    } else {
        const MONTHS: [&str; 12] = [
            "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
        ];
        let m = MONTHS.get(tm.tm_mon as usize).copied().unwrap_or("?");
        format!("{m}{:02}", tm.tm_mday)
    }
}

/// A key as the status line names it: `F6`, `t`, `Ctrl-x`, `Insert`; escaped.
pub fn key_name(key: &KeyEvent) -> String {
    let base = match key.code {
        KeyCode::F(n) => format!("F{n}"),
        KeyCode::Char(' ') => "Space".into(),
        KeyCode::Char(c) => escape(c.to_string().as_bytes()),
        other => escape(format!("{other:?}").as_bytes()),
    };
    let mut name = String::new();
    if key.modifiers.contains(KeyModifiers::CONTROL) {
        name.push_str("Ctrl-");
    }
    if key.modifiers.contains(KeyModifiers::ALT) {
        name.push_str("Alt-");
    }
    name + &base
}

/// What the status line says of a key the dashboard does not know: htop's keys that have no
/// counterpart yet are named as such, any other is called unknown; each points to `?`.
pub fn unknown_key(key: &KeyEvent) -> String {
    let k = key_name(key);
    let plain = key.modifiers.difference(KeyModifiers::SHIFT).is_empty();
    let why = match key.code {
        _ if !plain => "unknown key",
        KeyCode::F(7) | KeyCode::F(8) => "foster top does not change priorities",
        _ => "unknown key",
    };
    if why == "unknown key" {
        format!("unknown key {k}; ? lists the keys")
    } else {
        format!("{k}: {why}; ? lists the keys")
    }
}

/// An errno as users read it: `EPERM: operation not permitted`.
pub fn errno_text(e: nix::errno::Errno) -> String {
    let desc = e.desc();
    let mut chars = desc.chars();
    let desc = match chars.next() {
        Some(c) => c.to_lowercase().collect::<String>() + chars.as_str(),
        None => String::new(),
    };
    format!("{e:?}: {desc}")
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

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
