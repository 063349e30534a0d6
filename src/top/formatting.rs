//! The dashboard's texts: a process's command, a user's name, rates, start times, a key's and
//! an errno's names, and the one cut of every line drawn to a width ([`fit_line`]).
//!
//! Uses only [`crate::top::model`] (its number formats) and the crate's escaping: every file
//! of the dashboard may use it.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::base::sanitize::{escape, escape_args, fit};
use crate::top::model::{Node, fmt_bytes};

/// The escaped command line of a node, or its name in brackets when it has none (zombies,
/// kernel threads, unreadable).
pub fn command_text(n: &Node) -> String {
    if let Some(h) = n.info.supervision.as_ref().filter(|s| s.vacant) {
        let state = h
            .helper_state
            .as_ref()
            .map_or(String::new(), |h| match &h.detail {
                Some(d) => format!(": {} {d}", h.state),
                None => format!(": {}", h.state),
            });
        return format!("(no process{})", escape(state.as_bytes()));
    }
    if n.info.cmdline.is_empty() {
        format!("[{}]", escape(&n.info.comm))
    } else {
        escape_args(&n.info.cmdline)
    }
}

/// A value, or `-` when unknown.
pub fn opt<T: ToString>(v: Option<T>) -> String {
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
pub fn io_text(rate: Option<f64>, readable: bool) -> String {
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

/// Cuts `line` to `width` columns, ending in `…` (in the style of the span cut) when it is
/// wider: the one cut of every line the dashboard draws, by [`crate::base::sanitize::fit`].
pub fn fit_line(line: Line<'static>, width: usize) -> Line<'static> {
    if line.width() <= width {
        return line;
    }
    let Line {
        spans,
        style,
        alignment,
    } = line;
    let mut used = 0;
    let mut kept = Vec::with_capacity(spans.len());
    for span in spans {
        let w = span.width();
        if used + w < width {
            used += w;
            kept.push(span);
            continue;
        }
        // The span at the edge (more follows, or it is itself too wide): one more column of
        // text than there is room for makes `fit` cut it and end it in `…`.
        let cut = fit(&format!("{}…", span.content), width - used);
        kept.push(Span::styled(cut, span.style));
        break;
    }
    Line {
        spans: kept,
        style,
        alignment,
    }
}

/// Draws `line` on the first row of `area`, cut to its width ([`fit_line`]).
pub fn put_line(frame: &mut Frame, area: Rect, line: Line<'static>) {
    frame.render_widget(Paragraph::new(fit_line(line, area.width as usize)), area);
}
