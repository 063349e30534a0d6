//! The panes below the tree: the events pane ([`EventsPane`], attached: shown, sized,
//! scrolled, one helper's alone) and the log pane ([`LogPane`]: the selected helper's lines,
//! at most [`KEEP_LOG_LINES`], following the end until scrolled, searched with `/`, its long
//! lines wrapped or cut).
//!
//! Uses [`crate::top::model`] (the events it shows) and [`crate::top::formatting`].

use std::collections::VecDeque;

use crate::base::sanitize::escape;
use crate::top::model::{Model, fmt_age};

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
    /// Long lines wrap (`w`) rather than end in `…`.
    pub wrap: bool,
    /// The search (`/`): matching lines are marked, `n` `N` go from one to the next.
    pub search: String,
    pub search_editing: bool,
    /// The number of the line of the current match.
    found: Option<u64>,
    /// The numbers of the first and past the last line drawn, set by the renderer.
    drawn: (u64, u64),
}

impl LogPane {
    pub fn new() -> LogPane {
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
            wrap: false,
            search: String::new(),
            search_editing: false,
            found: None,
            drawn: (0, 0),
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

    /// The lines on screen when long lines wrap, oldest first, each with its number: from the
    /// first shown when scrolled, else the newest that `fits` (a line's rows) lets fit.
    pub fn wrapped_window(&self, fits: impl Fn(&PaneLine) -> usize) -> Vec<(u64, &PaneLine)> {
        let h = self.height.max(1);
        let numbered = self
            .lines
            .iter()
            .enumerate()
            .map(|(i, l)| (self.first + i as u64, l));
        let mut out = Vec::new();
        let mut rows = 0;
        if let Some(t) = self.top {
            for (n, l) in numbered.skip(t.saturating_sub(self.first) as usize) {
                if rows >= h {
                    break;
                }
                rows += fits(l);
                out.push((n, l));
            }
        } else {
            for (n, l) in numbered.rev() {
                rows += fits(l);
                if rows > h && !out.is_empty() {
                    break;
                }
                out.push((n, l));
            }
            out.reverse();
        }
        out
    }

    /// The number of the first line [`LogPane::window`] shows.
    pub fn window_start(&self) -> u64 {
        let h = self.height.max(1);
        let bottom = self.lines.len().saturating_sub(h) as u64;
        match self.top {
            None => self.first + bottom,
            Some(t) => t.max(self.first).min(self.first + bottom),
        }
    }

    /// Notes which lines the renderer drew (numbers from `first`, past the last).
    pub fn set_drawn(&mut self, first: u64, end: u64) {
        self.drawn = (first, end);
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

    /// Counts a change of what it shows (for the screen's comparison).
    pub fn touch(&mut self) {
        self.version += 1;
    }

    /// What it shows, for the screen's comparison: its version, scroll, focus and height.
    pub fn drawn_state(&self) -> (u64, Option<u64>, bool, usize) {
        (self.version, self.top, self.focus, self.height)
    }

    /// Follows the end again.
    pub fn follow_end(&mut self) {
        self.top = None;
    }

    /// Moves the view by `delta` lines (negative: up); at the end it follows again.
    pub fn scroll(&mut self, delta: i64) {
        let h = self.height.max(1) as u64;
        let end_top = self.first + (self.lines.len() as u64).saturating_sub(h);
        let cur = self.top.unwrap_or(end_top) as i64;
        let to = (cur + delta).clamp(self.first as i64, end_top as i64) as u64;
        self.top = (to < end_top).then_some(to);
    }
}

/// The pane's note on a row of no helper.
impl Default for LogPane {
    fn default() -> LogPane {
        LogPane::new()
    }
}

const NO_HELPER: &str = "this process belongs to no helper: select a helper's row (on the \
                         supervisor's row, every helper's lines)";

impl LogPane {
    /// Now shows `source`'s lines (none yet: the stream is being opened), or says the row
    /// belongs to no helper.
    pub fn switch(&mut self, source: Option<LogSource>) {
        self.note = Some(match &source {
            None => NO_HELPER.to_string(),
            Some(_) => "asking the supervisor…".to_string(),
        });
        self.source = source;
        self.lines.clear();
        self.first = 0;
        self.top = None;
        // The search stays; its match was among the lines gone.
        self.found = None;
        self.version += 1;
    }

    /// Takes what the log stream brought.
    pub fn take(&mut self, items: Vec<LogItem>) {
        let mut buf = Vec::new();
        for item in items {
            let line = match item {
                LogItem::Start { helpers } => {
                    let names: Vec<&str> = helpers.iter().map(String::as_str).collect();
                    self.renderer = crate::supervision::output::Renderer::new(
                        &names,
                        crate::supervision::output::Format::Text,
                        false,
                    );
                    self.note = Some("no line kept yet".into());
                    continue;
                }
                LogItem::Line(l) => self.rendered(&l, &mut buf),
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
            self.push(line);
        }
        self.version += 1;
    }

    /// A line of a helper's as the relay renders it (`buf`: scratch).
    fn rendered(&mut self, l: &crate::supervision::output::Line, buf: &mut Vec<u8>) -> PaneLine {
        buf.clear();
        self.renderer.render(l, buf);
        if buf.last() == Some(&b'\n') {
            buf.pop();
        }
        PaneLine {
            when: crate::supervision::event::clock_text(l.ts_ms, false),
            // The relay's text is escaped; lossy only in name.
            text: String::from_utf8_lossy(buf).into_owned(),
            kind: match l.stream {
                crate::supervision::output::Stream::Stdout => PaneKind::Stdout,
                crate::supervision::output::Stream::Stderr => PaneKind::Stderr,
            },
        }
    }
}

impl EventsPane {
    /// Scrolls `up` lines back (negative: towards the newest), of `total` lines.
    pub fn scroll(&mut self, up: isize, total: usize) {
        let h = self.drawn.max(1) as usize;
        let max = total.saturating_sub(h) as isize;
        self.back = (self.back as isize + up).clamp(0, max) as usize;
    }
}

/// The events pane's lines, newest last: (when, escaped text). The wall-clock time
/// (`14:03:27`, local) when the source knows it, else how long ago (`42s ago`): a time does
/// not change every second, so a quiet pane is not redrawn.
pub fn event_lines(model: &Model, pane: &EventsPane) -> Vec<(String, String)> {
    let hz = model.hz.max(1);
    model
        .events
        .iter()
        .filter(|e| {
            pane.helper
                .as_ref()
                .is_none_or(|h| e.helper.as_ref() == Some(h))
        })
        .map(|e| {
            let when = if e.wall_ms > 0 {
                crate::supervision::event::clock_text(e.wall_ms, false)
            } else {
                format!(
                    "{} ago",
                    fmt_age(model.now_ticks.saturating_sub(e.at_ticks) / hz)
                )
            };
            (when, escape(&e.text))
        })
        .collect()
}

/// Where `needle` (lower case) is in `text`, case ignored (ASCII letters): byte ranges.
pub fn match_ranges(text: &str, needle: &str) -> Vec<std::ops::Range<usize>> {
    if needle.is_empty() {
        return Vec::new();
    }
    let hay = text.to_ascii_lowercase();
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(i) = hay[at..].find(needle) {
        out.push(at + i..at + i + needle.len());
        at += i + needle.len();
    }
    out
}

impl LogPane {
    /// The search as it is matched: trimmed, lower case (`None`: no search).
    pub fn needle(&self) -> Option<String> {
        let t = self.search.trim();
        (!t.is_empty()).then(|| t.to_ascii_lowercase())
    }

    /// The number of the current match's line, when it still holds it.
    pub fn found(&self) -> Option<u64> {
        self.found.filter(|f| *f >= self.first)
    }

    /// The numbers of the lines that match the search, oldest first.
    fn matching(&self) -> Vec<u64> {
        let Some(needle) = self.needle() else {
            return Vec::new();
        };
        let hay = |l: &PaneLine| l.text.to_ascii_lowercase().contains(&needle);
        (self.lines.iter().enumerate())
            .filter(|(_, l)| hay(l))
            .map(|(i, _)| self.first + i as u64)
            .collect()
    }

    /// Goes to the next match (`dir` 1, newer) or the previous (-1, older), around the ends;
    /// with no match yet, the newest.
    pub fn find(&mut self, dir: i64) {
        let all = self.matching();
        let next = match self.found() {
            _ if all.is_empty() => None,
            None => all.last().copied(),
            Some(f) if dir > 0 => all.iter().find(|n| **n > f).or(all.first()).copied(),
            Some(f) => all.iter().rev().find(|n| **n < f).or(all.last()).copied(),
        };
        self.found = next;
        if let Some(n) = next {
            self.show(n);
        }
        self.version += 1;
    }

    /// Goes to the newest match (as the search is typed).
    pub fn find_newest(&mut self) {
        self.found = None;
        self.find(-1);
    }

    /// Scrolls so that line `n` is on screen, in the middle when it was not.
    fn show(&mut self, n: u64) {
        if n >= self.drawn.0 && n < self.drawn.1 {
            return;
        }
        let h = self.height.max(1) as u64;
        let end_top = self.first + (self.lines.len() as u64).saturating_sub(h);
        if self.wrap {
            self.top = Some(n);
            // Drawn again before any other move: the next `show` sees where it is.
            self.drawn = (n, n + 1);
            return;
        }
        let to = n.saturating_sub(h / 2).clamp(self.first, end_top);
        self.top = (to < end_top).then_some(to);
    }

    /// The search's place for the status line: `match 3 of 12`, `no match`.
    pub fn search_count(&self) -> String {
        let all = self.matching();
        match self.found().and_then(|f| all.iter().position(|n| *n == f)) {
            _ if all.is_empty() => "no match".to_string(),
            Some(i) => format!("match {} of {}", i + 1, all.len()),
            None => format!("{} matches", all.len()),
        }
    }

    /// What the search found, for the status line.
    pub fn search_text(&self) -> String {
        match self.needle() {
            None => "no search: / searches the log pane (n next, N previous)".to_string(),
            Some(_) => format!(
                "log search {:?}: {} · n next · N previous",
                escape(self.search.trim().as_bytes()),
                self.search_count()
            ),
        }
    }

    /// Clears the search.
    pub fn clear_search(&mut self) {
        self.search.clear();
        self.found = None;
        self.version += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pane(texts: &[&str]) -> LogPane {
        let mut p = LogPane::new();
        for t in texts {
            p.push(PaneLine {
                when: String::new(),
                text: t.to_string(),
                kind: PaneKind::Stdout,
            });
        }
        p
    }

    #[test]
    fn the_search_starts_at_the_newest_and_goes_around_the_ends() {
        let mut p = pane(&["a Err", "b", "c err", "d ERR", "e"]);
        p.search = "err".into();
        p.find_newest();
        assert_eq!(
            (p.found(), p.search_count().as_str()),
            (Some(3), "match 3 of 3")
        );
        p.find(1);
        assert_eq!(p.found(), Some(0), "around the end");
        p.find(-1);
        p.find(-1);
        assert_eq!(p.found(), Some(2));
        assert_eq!(match_ranges("x ERR err", "err"), vec![2..5, 6..9]);
        p.search = "absent".into();
        p.find_newest();
        assert_eq!((p.found(), p.search_count().as_str()), (None, "no match"));
        p.clear_search();
        assert!(p.needle().is_none());
    }

    #[test]
    fn a_match_off_screen_is_scrolled_to() {
        let texts: Vec<String> = (0..50).map(|i| format!("line {i}")).collect();
        let mut p = pane(&texts.iter().map(String::as_str).collect::<Vec<_>>());
        p.height = 10;
        p.set_drawn(40, 50);
        p.search = "line 5".into();
        p.find_newest();
        assert_eq!(p.found(), Some(5));
        assert_eq!(p.window_start(), 0, "line 5 in the middle, at most");
        assert!(!p.following());
        // Wrapped: the scrolled window starts at its first line, as many as fit.
        p.wrap = true;
        let shown = p.wrapped_window(|_| 3);
        assert_eq!(
            shown.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
            vec![0, 1, 2, 3]
        );
        p.follow_end();
        let shown = p.wrapped_window(|_| 3);
        assert_eq!(
            shown.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
            vec![47, 48, 49]
        );
    }
}
