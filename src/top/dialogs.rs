//! The dialogs on top of the tree and what they say: [`Dialog`] (help, the signal picker and
//! its confirmation, the user picker, the column setup, a confirmation of the supervisor's
//! actions), [`Control`] (what the dashboard asks of the supervisor) and its question, the
//! helper a key acts on ([`helper_target`]), the signals offered ([`SIGNALS`]), the help's
//! keys ([`KEYS`]), and what a signal sent or an action asked did, in words.
//!
//! Uses [`crate::top::model`] and [`crate::top::formatting`].

use nix::sys::signal::Signal;

use crate::base::sanitize::escape;
use crate::process::identity::Identity;
use crate::process::signal::Sig;
use crate::top::formatting::errno_text;
use crate::top::model::Model;

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

    /// Why there is nothing to do, when there is not: a helper already stopped is not
    /// stopped again, one with a process is not started.
    pub fn needless(&self) -> Option<String> {
        match self {
            Control::StopHelper(t) if t.process.is_none() && t.state.starts_with("stopped") => {
                Some(format!(
                    "helper {} is already {}",
                    escape(t.helper.as_bytes()),
                    escape(t.state.as_bytes())
                ))
            }
            Control::Start(t) => t.process.map(|p| {
                format!(
                    "helper {} is already {} ({}): nothing to start; R restarts it",
                    escape(t.helper.as_bytes()),
                    escape(t.state.as_bytes()),
                    p.pid
                )
            }),
            _ => None,
        }
    }

    /// The helper it acts on (none for the supervisor's stop).
    pub fn target(&self) -> Option<&HelperTarget> {
        match self {
            Control::Restart(t) | Control::Start(t) | Control::StopHelper(t) => Some(t),
            Control::Stop { .. } => None,
        }
    }

    /// The action as `model` has its helper now, when confirmed: the same action on the
    /// same process, or why it is not done (the helper got a process or lost it, or changed
    /// state, since the question was asked: the question would not be the same).
    pub fn recheck(&self, model: &Model) -> Result<Control, String> {
        let Some(t) = self.target() else {
            return Ok(self.clone());
        };
        let name = escape(t.helper.as_bytes());
        if model.helper(&t.helper).is_none() {
            return Err(format!(
                "helper {name} is gone from the supervisor: nothing done"
            ));
        }
        let mut now = helper_named(model, &t.helper);
        now.from = t.from.clone();
        if now.process != t.process || now.state != t.state {
            let process = now
                .process
                .map_or(String::new(), |p| format!(" ({})", p.pid));
            return Err(format!(
                "helper {name} changed while you confirmed: it is now {}{process}; nothing done",
                escape(now.state.as_bytes())
            ));
        }
        let c = match self {
            Control::Restart(_) => Control::Restart(now),
            Control::Start(_) => Control::Start(now),
            _ => Control::StopHelper(now),
        };
        match c.needless() {
            Some(why) => Err(why),
            None => Ok(c),
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
    /// A process's details (`Enter`, `d`), read when opened.
    Detail(Box<crate::top::detail::Detail>),
    /// The sort menu (`F6`): the cursor on entry `selected` of the columns the rows sort by
    /// (`App::sort_keys`).
    SortBy {
        selected: usize,
    },
    /// The column setup (`F2`): the cursor on entry `selected` of the app's columns;
    /// `changed` once anything was changed (saved on closing).
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
    (
        "Enter  d",
        "the process's details: command, cwd, environment, open files, limits, cgroup",
    ),
    (
        "Space",
        "tag or untag the process (then the next row); s K F9 signal every tagged process",
    ),
    ("c", "tag the process and every process below it"),
    ("U", "untag every process"),
    (
        "-  +",
        "collapse, expand the process and every process below it",
    ),
    ("*", "expand all (collapse all when nothing is collapsed)"),
    ("C  E", "collapse all, expand all"),
    (
        "/  \\  F4",
        "filter, showing matches with their ancestors and descendants; with the log pane \
         open and no filter, / searches the log pane",
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
        "attached: start the row's helper (stopped, ended or given up on)",
    ),
    (
        "X",
        "attached: stop the supervisor and its whole tree (confirm with y)",
    ),
    (
        "l",
        "attached: the log pane of the selected helper (on the supervisor's row: every \
         helper); again: close",
    ),
    (
        "Tab",
        "log pane: focus it (or click it), then ↑ ↓ PgUp PgDn Home End scroll, End follows \
         the end, / search (n N), w wrap long lines; Tab, Esc or a click on a row: the tree",
    ),
    (
        "<  >",
        "sort by the previous or next column (marked ▲ ▼ in the header)",
    ),
    (
        "F6",
        "sort: a menu of the columns, Enter sorts by the one chosen",
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
        "v",
        "hide or show the machine's CPU and memory history below the meters",
    ),
    (
        "e  b",
        "attached: hide or show the events pane (b with --keys htop); Tab scrolls it",
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

/// A failure of something asked of the supervisor (or of a signal sent), in words: the
/// supervisor's refusal, or why it could not be asked.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ControlError(pub String);

impl From<String> for ControlError {
    fn from(s: String) -> ControlError {
        ControlError(s)
    }
}

impl From<&str> for ControlError {
    fn from(s: &str) -> ControlError {
        ControlError(s.to_string())
    }
}

/// Why a key that acts on a helper has none to act on (said in the status line).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NoHelper {
    #[error("{key} acts on a helper: attach to its supervisor (foster top --attach SOCKET)")]
    NotAttached { key: char },
    #[error("{pid} belongs to no helper: {key} acts on a helper from its rows")]
    NotOfAHelper { pid: i32, key: char },
    #[error(
        "{pid} is the supervisor: {key} acts on the helper of the row under the cursor (every \
         helper has a row, with a process or not); X stops the supervisor"
    )]
    Supervisor { pid: i32, key: char },
}

/// The helper the row `row` belongs to (its own process, any process of its tree, or its row
/// without a process), described for a confirmation. The supervisor's row stands for no
/// helper.
pub fn helper_target(model: &Model, row: Identity, key: char) -> Result<HelperTarget, NoHelper> {
    if !model.supervised {
        return Err(NoHelper::NotAttached { key });
    }
    let node = &model.nodes[&row];
    let sup = node.info.supervision.as_ref();
    let name = match sup.and_then(|s| s.helper.clone()) {
        Some(h) => h,
        None if sup.is_some_and(|s| s.role == "supervisor") => {
            return Err(NoHelper::Supervisor { pid: row.pid, key });
        }
        None => return Err(NoHelper::NotOfAHelper { pid: row.pid, key }),
    };
    let mut t = helper_named(model, &name);
    let own = t.process == Some(row) || node.vacant();
    t.from = (!own).then(|| (row.pid, escape(&node.info.comm)));
    Ok(t)
}

/// Helper `name` as `model` has it, described for a confirmation (asked from its own row).
pub fn helper_named(model: &Model, name: &str) -> HelperTarget {
    let summary = model.helper(name);
    let process = summary.and_then(|h| h.identity);
    let nested_supervisor = process
        .and_then(|p| model.nodes.get(&p))
        .and_then(|n| n.info.supervision.as_ref())
        .is_some_and(|s| s.role == "supervisor");
    HelperTarget {
        descendants: live_descendants(model, name, process),
        helper: name.to_string(),
        process,
        nested_supervisor,
        stop_signal: summary.map_or_else(|| "SIGTERM".into(), |h| h.stop_signal.clone()),
        stop_grace_ms: summary.map_or(0, |h| h.stop_grace_ms),
        state: summary.map_or_else(String::new, |h| h.state_text()),
        from: None,
    }
}

/// The live processes of helper `name`'s tree but its own `process`.
fn live_descendants(model: &Model, name: &str, process: Option<Identity>) -> usize {
    model
        .nodes
        .values()
        .filter(|n| {
            !n.exited
                && !n.vacant()
                && Some(n.info.id) != process
                && n.info
                    .supervision
                    .as_ref()
                    .is_some_and(|s| s.helper.as_deref() == Some(name))
        })
        .count()
}

/// One target of a signal: its identity, its name, and what sending failed of, if it did.
pub type SignalResult = (Identity, Vec<u8>, Result<(), ControlError>);

/// What sending `signal` did, with each failure in words, for the status line.
pub fn signal_results_text(signal: Signal, results: &[SignalResult]) -> String {
    let failed: Vec<&SignalResult> = results.iter().filter(|r| r.2.is_err()).collect();
    match (results, failed.as_slice()) {
        ([(id, name, Ok(()))], _) => {
            format!("sent {} to {} ({})", signal.as_str(), id.pid, escape(name))
        }
        ([(id, name, Err(e))], _) => format!(
            "{} to {} ({}) failed: {}",
            signal.as_str(),
            id.pid,
            escape(name),
            escape(e.0.as_bytes())
        ),
        (_, []) => format!("sent {} to {} processes", signal.as_str(), results.len()),
        (_, [(id, name, Err(e)), ..]) => format!(
            "sent {} to {} of {} processes; {} ({}) failed: {}{}",
            signal.as_str(),
            results.len() - failed.len(),
            results.len(),
            id.pid,
            escape(name),
            escape(e.0.as_bytes()),
            if failed.len() > 1 {
                format!(" (and {} more)", failed.len() - 1)
            } else {
                String::new()
            }
        ),
        _ => unreachable!("failed holds only errors"),
    }
}

/// The results of signals sent here, each failure's errno in words.
pub fn errno_results(
    results: &[(Identity, Vec<u8>, Result<(), nix::errno::Errno>)],
) -> Vec<SignalResult> {
    results
        .iter()
        .map(|(i, n, r)| (*i, n.clone(), r.map_err(|e| ControlError(errno_text(e)))))
        .collect()
}
