//! Rendering the dashboard: title, tree table, events pane or log pane, status line and
//! dialogs.
//!
//! Owns the layout and the look, nothing else: it reads an [`App`] and draws it on a ratatui frame,
//! and tells the app where it put the table, its columns and the panes ([`crate::top::app::Hits`],
//! for the mouse). Width-aware: columns are as wide as their content, narrowed or dropped in a
//! fixed order when the terminal is narrow; no row ever wraps and every cut is marked `…` (every
//! line drawn goes through [`fit_line`]); confirmations wrap their question, never cut it. Every
//! process name has already passed through `sanitize::escape` in the app's rows, and every line of
//! the log pane in the relay's rendering; event texts are escaped here.

use std::borrow::Cow;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style, Stylize};
use ratatui::text::{Line, Span};
use ratatui::widgets::{
    Block, Borders, Cell, Clear, List, ListItem, ListState, Paragraph, Row as TRow, Table,
};

use crate::base::sanitize::{escape, fit};
use crate::top::app::{App, Dialog, KEYS, Keymap, LogSource, PaneKind, Row, SIGNALS};
use crate::top::formatting::{fit_line, put_line};
use crate::top::theme;

pub use crate::top::columns::Column;

/// The narrowest the command column may become before other columns are dropped.
const MIN_COMMAND: u16 = 24;

/// The default columns that fit in `width` at their typical widths; see [`layout_columns`].
pub fn columns_for(width: u16, supervised: bool, helpers: bool) -> Vec<Column> {
    let shown: Vec<Column> = Column::DEFAULT
        .into_iter()
        .filter(|c| supervised || !c.supervised_only())
        .collect();
    layout_columns(width, &shown, helpers, Column::width)
        .into_iter()
        .map(|(c, _)| c)
        .collect()
}

/// The columns that fit in `width`, each with its width (`want` gives the width its content
/// asks for): the flag, the columns `shown` in their order (the helper columns only when
/// some process belongs to a helper: `helpers`), the command; then dropped in the order the
/// optional ones (cgroup, namespace, storage rates, start, group, session, parent, threads,
/// user), helper state, policy, generation, age, helper, role, state, RSS, CPU%, PID until the
/// command keeps [`MIN_COMMAND`] columns. The command's own width is 0 (it takes what is left).
pub fn layout_columns(
    width: u16,
    shown: &[Column],
    helpers: bool,
    want: impl Fn(Column) -> u16,
) -> Vec<(Column, u16)> {
    let mut cols = vec![Column::Flag];
    cols.extend(shown.iter().copied().filter(|c| {
        helpers
            || !matches!(
                c,
                Column::Helper | Column::HelperState | Column::Restarts | Column::LastExit
            )
    }));
    cols.push(Column::Command);
    let mut cols: Vec<(Column, u16)> = cols
        .into_iter()
        .map(|c| match c {
            Column::Command => (c, 0),
            c => (c, want(c)),
        })
        .collect();
    let used = |cols: &[(Column, u16)]| -> u16 { cols.iter().map(|(_, w)| w + 1).sum::<u16>() };
    for d in DROP_ORDER {
        let need = (used(&cols) + MIN_COMMAND).saturating_sub(width);
        if need == 0 {
            break;
        }
        // Who is who stays longest: the helper and the role are narrowed (cut, marked) before
        // they are dropped.
        if let Some((_, w)) = cols.iter_mut().find(|(c, _)| *c == d)
            && matches!(d, Column::Helper | Column::Role)
            && *w >= need + MIN_WHO
        {
            *w -= need;
            break;
        }
        cols.retain(|(c, _)| *c != d);
    }
    cols
}

/// The order columns are dropped in when the terminal is narrow: the least telling first.
const DROP_ORDER: [Column; 22] = [
    Column::Cgroup,
    Column::PidNs,
    Column::IoWrite,
    Column::IoRead,
    Column::Start,
    Column::Pgid,
    Column::Sid,
    Column::Ppid,
    Column::Threads,
    Column::User,
    Column::LastExit,
    Column::Restarts,
    Column::HelperState,
    Column::Policy,
    Column::Generation,
    Column::Age,
    Column::Helper,
    Column::Role,
    Column::State,
    Column::Rss,
    Column::Cpu,
    Column::Pid,
];

/// The narrowest the role and helper columns become before they are dropped.
const MIN_WHO: u16 = 8;

/// [`content_width`], but never narrower than the column was drawn before: a column keeps its
/// width while its content fits (a state `starting` then `ready`, a pause's `exit` gone, a
/// shorter pid), so the columns to its right stay put; it widens when the content needs it.
fn steady_width(c: Column, app: &App) -> u16 {
    let w = content_width(c, app);
    let mut kept = app.column_widths.borrow_mut();
    let e = kept.entry(c).or_insert(w);
    *e = (*e).max(w);
    *e
}

/// The width a column's content asks for over every row (not only those on screen, so that
/// scrolling does not move the columns): its title's at least, [`Column::max_width`] at most.
fn content_width(c: Column, app: &App) -> u16 {
    let rows = &app.rows;
    let title = Line::raw(header_title(c, app).as_str()).width();
    let widest = rows.iter().map(|r| cell_width(c, r)).max().unwrap_or(0);
    (title.max(widest) as u16).min(c.max_width().max(title as u16))
}

/// The width of a cell other than the command's, without making its text where it can: a pid
/// is counted in digits, and printable ASCII (most texts) is one column a byte.
fn cell_width(c: Column, r: &Row) -> usize {
    match c {
        Column::Pid if r.vacant => 0,
        Column::Pid => decimal_width(r.id.pid),
        _ => text_width(&cell_text(c, r)),
    }
}

/// The width of a number's decimal text.
fn decimal_width(n: i32) -> usize {
    (n < 0) as usize + n.unsigned_abs().checked_ilog10().unwrap_or(0) as usize + 1
}

/// The width of a text on a terminal.
fn text_width(text: &str) -> usize {
    if text.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        text.len()
    } else {
        Span::raw(text).width()
    }
}

/// A column's title in the header, the sorted one marked with its direction (`CPU%▼`).
fn header_title(c: Column, app: &App) -> String {
    if c == app.sort.key {
        format!("{}{}", c.title(), app.sort.arrow())
    } else {
        c.title().to_string()
    }
}

/// The text of a cell other than the command's.
fn cell_text(c: Column, r: &Row) -> Cow<'_, str> {
    let text: &str = match c {
        Column::Flag => {
            if r.tagged {
                "*"
            } else if !r.anomalies.is_empty() || r.hidden_anomalies > 0 {
                "!"
            } else {
                " "
            }
        }
        Column::Pid if r.vacant => "",
        Column::Pid => return Cow::Owned(r.id.pid.to_string()),
        _ => &r[c],
    };
    Cow::Borrowed(text)
}

/// The screen's areas.
struct Areas {
    title: Rect,
    /// The machine's meters and the selected process's history, below the title.
    meters: Option<Rect>,
    table: Rect,
    events: Option<Rect>,
    logs: Option<Rect>,
    status: Rect,
}

/// The footer's height: the key hint on the last line, and above it a line of its own for
/// notices (results, the filter being typed, the cursor row's anomaly) when the screen has room.
fn footer_height(area: Rect) -> u16 {
    if area.height >= 8 { 2 } else { 1 }
}

fn areas(screen: Rect, app: &App) -> Areas {
    // The meters take rows below the title; the rest is laid out in what remains.
    let mh = crate::top::meters::height(screen, &app.meters);
    let mut a = areas_below_meters(
        Rect {
            y: screen.y + mh,
            height: screen.height - mh,
            ..screen
        },
        app,
    );
    if mh > 0 {
        a.meters = Some(Rect {
            y: screen.y + 1,
            height: mh,
            ..screen
        });
        a.title.y = screen.y;
    }
    a
}

fn areas_below_meters(area: Rect, app: &App) -> Areas {
    let footer = footer_height(area);
    let events_on = app.model.supervised && app.events.shown;
    if app.logs.is_some() && area.height >= 10 {
        return areas_with_logs(area, app, events_on);
    }
    let events_h = if events_on && area.height >= 14 {
        let body = area.height - 1 - footer;
        match app.events.height {
            // As chosen with [ ], the table keeping 3 lines.
            Some(h) => h.clamp(2, body - 3),
            // A quarter of the screen, or all the table does not need (one blank line
            // between), so a small tree leaves room for more events.
            None => {
                let table_needs = app.rows.len() as u16 + 2;
                let events_have = app.model.events.len() as u16 + 1;
                (area.height / 4)
                    .clamp(4, 8)
                    .max(body.saturating_sub(table_needs).min(events_have))
                    .min(body - 3)
            }
        }
    } else {
        0
    };
    let [title, table, events, status] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(events_h),
        Constraint::Length(footer),
    ])
    .areas(area);
    Areas {
        title,
        meters: None,
        table,
        events: (events_h > 0).then_some(events),
        logs: None,
        status,
    }
}

/// The areas with the log pane open: two fifths of the screen; the table keeps 4 rows. The
/// events pane beside it, smaller, when there is room.
fn areas_with_logs(area: Rect, app: &App, events_on: bool) -> Areas {
    let footer = footer_height(area);
    let logs_h = (area.height * 2 / 5).max(5).min(area.height - 5 - footer);
    let events_h = if events_on && area.height >= 20 {
        let room = area.height - 1 - footer - logs_h - 5;
        app.events
            .height
            .unwrap_or((area.height / 6).max(3))
            .clamp(2, room.max(2))
    } else {
        0
    };
    let [title, table, events, logs, status] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(events_h),
        Constraint::Length(logs_h),
        Constraint::Length(footer),
    ])
    .areas(area);
    Areas {
        title,
        meters: None,
        table,
        events: (events_h > 0).then_some(events),
        logs: Some(logs),
        status,
    }
}

/// How many process rows fit in a terminal of this size (the table minus its header).
pub fn page_height(area: Rect, app: &App) -> usize {
    areas(area, app).table.height.saturating_sub(1) as usize
}

/// Draws the whole screen.
pub fn draw(frame: &mut Frame, app: &mut App) {
    let area = frame.area();
    app.meters.screen_height = area.height;
    app.meters.screen_width = area.width;
    let a = areas(area, app);
    app.set_page(a.table.height.saturating_sub(1) as usize);
    draw_title(frame, a.title, app);
    if let Some(m) = a.meters {
        let view = crate::top::meters::View {
            texts: app.meter_texts(),
            reading: app.meters.reading.as_ref(),
            model: &app.model,
            cursor: app.cursor,
        };
        crate::top::meters::draw(frame, m, &view, area);
    }
    app.hits = crate::top::app::Hits {
        header_y: (a.table.height > 0).then_some(a.table.y),
        rows: (a.table.y + 1, a.table.height.saturating_sub(1)),
        columns: Vec::new(),
        events: a.events.map(|e| (e.y, e.height)),
        logs: a.logs.map(|l| (l.y, l.height)),
    };
    app.hits.columns = draw_table(frame, a.table, app);
    match a.events {
        Some(e) => {
            app.events.drawn = e.height.saturating_sub(1);
            draw_events(frame, e, app);
        }
        None => app.events.drawn = 0,
    }
    if let Some(l) = a.logs {
        draw_logs(frame, l, app);
    }
    draw_status(frame, a.status, app);
    draw_dialog(frame, area, app);
    theme::finish(frame.buffer_mut());
}

/// The open dialog, on top of the rest.
fn draw_dialog(frame: &mut Frame, area: Rect, app: &App) {
    match app.dialog.clone() {
        Dialog::None => {}
        Dialog::Help { scroll } => draw_help(frame, area, scroll),
        Dialog::Signals {
            target,
            subtree,
            selected,
            ..
        } => {
            let name = process_name(app, target);
            let title = if subtree {
                format!(" signal {} ({name}) and descendants ", target.pid)
            } else if !app.tagged.is_empty() {
                format!(" signal the {} tagged processes ", app.tagged.len())
            } else {
                format!(" signal {} ({name}) ", target.pid)
            };
            draw_signals(frame, area, &title, selected)
        }
        Dialog::Confirm {
            target,
            subtree,
            signal,
            count,
        } => {
            let what = signal_targets(app, target, subtree, count);
            let text = format!("Send {} to {what}?", signal.as_str());
            draw_confirm(frame, area, &text, "y send");
        }
        Dialog::ConfirmControl(c) => draw_confirm(frame, area, &c.question(), "y yes"),
        Dialog::Users { uids, selected } => draw_users(frame, area, &uids, selected),
        Dialog::SortBy { selected } => draw_sort_by(frame, area, app, selected),
        Dialog::Detail(d) => draw_detail(frame, area, &d),
        Dialog::Columns { selected, .. } => draw_columns(frame, area, app, selected),
    }
}

/// A process's escaped name, empty when it is not in the model.
fn process_name(app: &App, id: crate::process::identity::Identity) -> String {
    app.model
        .nodes
        .get(&id)
        .map(|n| escape(&n.info.comm))
        .unwrap_or_default()
}

/// What a signal confirmed goes to, in words: a subtree, the tagged processes each named, or
/// one process.
fn signal_targets(
    app: &App,
    target: crate::process::identity::Identity,
    subtree: bool,
    count: usize,
) -> String {
    let name = process_name(app, target);
    if subtree && count > 1 {
        format!("{} ({name}) and {} descendants", target.pid, count - 1)
    } else if !subtree && !app.tagged.is_empty() {
        // Each target named.
        let each: Vec<String> = app
            .tagged
            .iter()
            .map(|t| format!("{} ({})", t.pid, process_name(app, *t)))
            .collect();
        format!(
            "the {} tagged process{}: {}",
            each.len(),
            if each.len() == 1 { "" } else { "es" },
            each.join(", ")
        )
    } else {
        format!("{} ({name})", target.pid)
    }
}

fn draw_title(frame: &mut Frame, area: Rect, app: &App) {
    let (procs, anomalies) = app.totals();
    let mut spans = vec![
        Span::styled(" foster top ", Style::new().bold().reversed()),
        Span::raw(format!(
            " {procs} process{}",
            if procs == 1 { "" } else { "es" }
        )),
    ];
    if anomalies > 0 {
        spans.push(Span::raw(" · "));
        spans.push(Span::styled(
            format!(
                "{anomalies} anomal{}",
                if anomalies == 1 { "y" } else { "ies" }
            ),
            Style::new().fg(Color::Red).bold(),
        ));
    }
    if app.paused {
        spans.push(Span::raw(" "));
        spans.push(Span::styled(
            " PAUSED ",
            Style::new().black().on_yellow().bold(),
        ));
    }
    if app.ended.is_some() {
        spans.push(Span::raw(" "));
        spans.push(Span::styled(" ENDED ", Style::new().reversed().bold()));
    }
    if !app.tree {
        spans.push(Span::raw(" · flat"));
    }
    if !app.tagged.is_empty() {
        spans.push(Span::raw(format!(" · {} tagged", app.tagged.len())));
    }
    if let Some(u) = app.user {
        spans.push(Span::raw(format!(
            " · user {}",
            crate::base::ownership::uid_text(u)
        )));
    }
    if let Some(f) = app.following {
        spans.push(Span::raw(format!(" · following {}", f.pid)));
    }
    if !app.filter.is_empty() && !app.filter_editing {
        spans.push(Span::raw(format!(
            " · filter: {}",
            escape(app.filter.as_bytes())
        )));
    }
    spans.push(Span::raw(format!(
        " · {} · every {}",
        escape(app.model.origin.as_bytes()),
        app.interval_text
    )));
    put_line(frame, area, Line::from(spans));
}

fn command_line(row: &Row, width: usize) -> Line<'static> {
    let mut spans = vec![Span::styled(
        row.prefix.clone(),
        Style::new().fg(Color::DarkGray),
    )];
    let mut note = String::new();
    if row.hidden > 0 {
        note.push_str(&format!(" (+{})", row.hidden));
    }
    let mut alert = String::new();
    if !row.anomalies.is_empty() {
        alert = format!(" ⚠ {}", row.anomalies.join("; "));
    } else if row.hidden_anomalies > 0 {
        alert = format!(" ⚠ {} inside", row.hidden_anomalies);
    }
    let fixed = Line::raw(row.prefix.as_str()).width() + Line::raw(note.as_str()).width();
    let alert_w = Line::raw(alert.as_str()).width();
    // The command gets what is left once the anomaly is placed, but never less than 12 columns.
    let room = width
        .saturating_sub(fixed + alert_w)
        .max(12.min(width.saturating_sub(fixed)));
    let cmd = fit(&row[Column::Command], room);
    let cmd_style = if row.found {
        theme::MATCH.underlined()
    } else if row.matched {
        theme::MATCH
    } else {
        Style::new()
    };
    spans.push(Span::styled(cmd, cmd_style));
    if !note.is_empty() {
        spans.push(Span::styled(note, Style::new().fg(Color::Cyan)));
    }
    if !alert.is_empty() {
        spans.push(Span::styled(alert, Style::new().fg(Color::Red).bold()));
    }
    fit_line(Line::from(spans), width)
}

/// Draws the table; returns where each column is (start, width; the command to the edge).
fn draw_table(frame: &mut Frame, area: Rect, app: &App) -> Vec<(Column, u16, u16)> {
    let helpers = app.model.supervised
        && app.model.nodes.values().any(|n| {
            n.info
                .supervision
                .as_ref()
                .is_some_and(|s| s.helper.is_some())
        });
    let sized = layout_columns(area.width, &app.shown_columns(), helpers, |c| {
        steady_width(c, app)
    });
    let fixed: u16 = sized.iter().map(|(_, w)| w + 1).sum();
    let cmd_w = area.width.saturating_sub(fixed) as usize;
    let widths: Vec<Constraint> = sized
        .iter()
        .map(|(c, w)| match c {
            Column::Command => Constraint::Min(0),
            _ => Constraint::Length(*w),
        })
        .collect();
    let header = TRow::new(sized.iter().map(|(c, _)| {
        let t = header_title(*c, app);
        if c.right_aligned() {
            Cell::from(Line::from(t).right_aligned())
        } else {
            Cell::from(t)
        }
    }))
    .style(Style::new().black().on_green().bold());
    let rows = app
        .window()
        .iter()
        .map(|r| table_row(r, &sized, cmd_w, app));
    let table = Table::new(rows, widths).header(header).column_spacing(1);
    frame.render_widget(table, area);
    if app.rows.is_empty() {
        draw_no_rows(frame, area, app);
    }
    placed_columns(area, &sized)
}

/// Where each column is: its start and width (the command's: to the edge).
fn placed_columns(area: Rect, sized: &[(Column, u16)]) -> Vec<(Column, u16, u16)> {
    let mut x = area.x;
    sized
        .iter()
        .map(|(c, w)| {
            let w = if *c == Column::Command {
                (area.x + area.width).saturating_sub(x)
            } else {
                *w
            };
            let at = (*c, x, w);
            x = x.saturating_add(w + 1);
            at
        })
        .collect()
}

/// One row of the table, its cells cut to the columns' widths (`cmd_w` the command's).
fn table_row(r: &Row, sized: &[(Column, u16)], cmd_w: usize, app: &App) -> TRow<'static> {
    let anomalous = !r.anomalies.is_empty();
    let cells = sized.iter().map(|(c, w)| {
        if *c == Column::Command {
            return Cell::from(command_line(r, cmd_w));
        }
        // Cut to the column, marked: never a silent cut.
        let text = fit(&cell_text(*c, r), *w as usize);
        let mut line = Line::from(text);
        if c.right_aligned() {
            line = line.right_aligned();
        }
        let mut cell = Cell::from(line);
        if (anomalous || r.hidden_anomalies > 0) && matches!(c, Column::Flag | Column::Pid) {
            cell = cell.style(Style::new().fg(Color::Red).bold());
        }
        if let Some(st) = value_style(*c, r, app) {
            cell = cell.style(st);
        }
        cell
    });
    let mut style = Style::new();
    if r.exited {
        style = style
            .fg(Color::DarkGray)
            .add_modifier(Modifier::CROSSED_OUT);
    }
    if r.tagged {
        style = style.fg(Color::Cyan).add_modifier(Modifier::BOLD);
    }
    if Some(r.id) == app.cursor {
        style = style.add_modifier(Modifier::REVERSED);
    }
    TRow::new(cells.collect::<Vec<_>>()).style(style)
}

/// What the empty table says: no match, no reading, or waiting for the first.
fn draw_no_rows(frame: &mut Frame, area: Rect, app: &App) {
    let msg = if !app.filter.is_empty() {
        "no process matches the filter"
    } else if app.source_error.is_some() {
        "no reading"
    } else {
        "waiting for the first reading…"
    };
    let y = area.y + 1.min(area.height.saturating_sub(1));
    frame.render_widget(
        Paragraph::new(msg).style(Style::new().fg(Color::DarkGray)),
        Rect {
            y,
            height: 1,
            ..area
        },
    );
}

/// The colour of a state, a CPU% or an RSS by its value ([`theme`]).
fn value_style(c: Column, r: &Row, app: &App) -> Option<Style> {
    if r.exited {
        return None;
    }
    match c {
        Column::State => Some(theme::state(&r[Column::State])),
        Column::Cpu => r[Column::Cpu].parse::<f64>().ok().map(theme::cpu),
        Column::Rss => {
            let total = app.meters.reading.as_ref().map_or(0, |m| m.mem_total);
            let m = &app.model;
            let rss = if r.collapsed {
                m.subtree(r.id)
                    .iter()
                    .filter_map(|i| m.nodes.get(i))
                    .map(|n| n.info.rss_bytes)
                    .sum()
            } else {
                m.nodes.get(&r.id).map_or(0, |n| n.info.rss_bytes)
            };
            Some(theme::mem(rss, total))
        }
        _ => None,
    }
}

fn draw_events(frame: &mut Frame, area: Rect, app: &App) {
    let inner_h = area.height.saturating_sub(1) as usize;
    let all = app.event_lines();
    let end = all.len().saturating_sub(app.events.back.min(all.len()));
    let skip = end.saturating_sub(inner_h);
    let lines: Vec<Line> = all[skip..end]
        .iter()
        .map(|(when, text)| {
            let line = Line::from(vec![
                Span::styled(format!("{when:>8}  "), Style::new().fg(Color::DarkGray)),
                Span::raw(text.clone()),
            ]);
            fit_line(line, area.width as usize)
        })
        .collect();
    let whose = match &app.events.helper {
        Some(h) => format!(" events of {} ", escape(h.as_bytes())),
        None => " events ".to_string(),
    };
    let mut hint = String::new();
    if app.events.back > 0 {
        hint.push_str(&format!(
            " scrolled back {}: End the newest ·",
            app.events.back
        ));
    }
    let key = app.keymap.events_key();
    hint.push_str(&if app.events.focus {
        format!(" Tab: the tree · {key} hides ")
    } else {
        format!(" {key} hides · [ ] size · H helper ")
    });
    let title_style = if app.events.focus {
        Style::new().black().on_yellow().bold()
    } else {
        Style::new()
    };
    let block = pane_block(whose, title_style, hint, area.width);
    frame.render_widget(Paragraph::new(lines).block(block), area);
}

/// A pane's block: a line on top with its title (whose lines, in `style`) and its keys,
/// cut to `width` with `…` when they do not fit.
fn pane_block(whose: String, style: Style, hint: String, width: u16) -> Block<'static> {
    let title = Line::from(vec![
        Span::styled(whose, style),
        Span::styled(hint, Style::new().fg(Color::DarkGray)),
    ]);
    Block::new()
        .borders(Borders::TOP)
        .title(fit_line(title, width as usize))
}

/// A dialog's bordered box of `width` columns: its title on top and its keys at the bottom,
/// each cut with `…` when the box is narrower than they are.
fn dialog_block(title: &str, bottom: &str, width: u16) -> Block<'static> {
    let inner = width.saturating_sub(2) as usize;
    let fitted = |t: &str| fit_line(Line::raw(t.to_string()), inner);
    let block = Block::bordered().title(fitted(title));
    match bottom {
        "" => block,
        b => block.title_bottom(fitted(b)),
    }
}

fn draw_logs(frame: &mut Frame, area: Rect, app: &mut App) {
    let Some(p) = app.logs.as_mut() else {
        return;
    };
    p.height = area.height.saturating_sub(1).max(1) as usize;
    let whose = match &p.source {
        Some(LogSource::Helper(h)) => format!(" logs of {} ", escape(h.as_bytes())),
        Some(LogSource::Every) => " logs of every helper ".to_string(),
        None => " logs ".to_string(),
    };
    let state = match (p.following(), p.wrap) {
        (true, false) => "following · ",
        (true, true) => "following · wrapped · ",
        (false, false) => "scrolled: End follows · ",
        (false, true) => "scrolled: End follows · wrapped · ",
    };
    let hint = if p.focus {
        format!(" {state}Tab: the tree · l closes ")
    } else {
        format!(" {state}Tab: scroll · l closes ")
    };
    let title_style = if p.focus {
        Style::new().black().on_yellow().bold()
    } else {
        Style::new().bold()
    };
    let block = pane_block(whose, title_style, hint, area.width);
    let lines: Vec<Line> = if p.is_empty() {
        let note = p.note.clone().unwrap_or_default();
        vec![Line::from(Span::styled(
            note,
            Style::new().fg(Color::DarkGray),
        ))]
    } else {
        log_rows(p, area.width as usize)
    };
    frame.render_widget(Paragraph::new(lines).block(block), area);
}

/// The log pane's rows: its lines with the search's matches marked, each cut with `…` or,
/// wrapped, broken into rows of `width` columns; notes which lines they are.
fn log_rows(p: &mut crate::top::panes::LogPane, width: usize) -> Vec<Line<'static>> {
    let needle = p.needle();
    let found = p.found();
    let line =
        |n: u64, l: &crate::top::panes::PaneLine| log_line(l, needle.as_deref(), found == Some(n));
    if !p.wrap {
        let start = p.window_start();
        let rows: Vec<Line> = (p.window().enumerate())
            .map(|(i, l)| fit_line(line(start + i as u64, l), width))
            .collect();
        p.set_drawn(start, start + rows.len() as u64);
        return rows;
    }
    let h = p.height.max(1);
    let shown = p.wrapped_window(|l| line(0, l).width().div_ceil(width.max(1)).max(1));
    let range = match (shown.first(), shown.last()) {
        (Some(a), Some(b)) => (a.0, b.0 + 1),
        _ => (0, 0),
    };
    let mut rows: Vec<Line> = (shown.iter())
        .flat_map(|(n, l)| wrap_line(line(*n, l), width))
        .collect();
    let following = p.following();
    p.set_drawn(range.0, range.1);
    if following && rows.len() > h {
        rows.drain(..rows.len() - h);
    }
    rows.truncate(h);
    rows
}

/// One line of the log pane: its time, then its text (standard error red), the search's
/// matches marked (the current one underlined).
fn log_line(l: &crate::top::panes::PaneLine, needle: Option<&str>, current: bool) -> Line<'static> {
    let base = match l.kind {
        PaneKind::Stdout => Style::new(),
        PaneKind::Stderr => Style::new().fg(Color::Red),
        PaneKind::Notice => theme::KEY,
    };
    let mark = if current {
        theme::MATCH.underlined()
    } else {
        theme::MATCH
    };
    let mut spans = vec![Span::styled(
        format!("{:>8}  ", l.when),
        Style::new().fg(Color::DarkGray),
    )];
    let mut at = 0;
    for r in crate::top::panes::match_ranges(&l.text, needle.unwrap_or("")) {
        if r.start > at {
            spans.push(Span::styled(l.text[at..r.start].to_string(), base));
        }
        spans.push(Span::styled(l.text[r.clone()].to_string(), mark));
        at = r.end;
    }
    if at < l.text.len() || at == 0 {
        spans.push(Span::styled(l.text[at..].to_string(), base));
    }
    Line::from(spans)
}

/// Breaks `line` into rows of at most `width` columns, keeping each span's style.
fn wrap_line(line: Line<'static>, width: usize) -> Vec<Line<'static>> {
    let width = width.max(1);
    let mut rows = vec![Line::default()];
    let mut used = 0;
    for span in line.spans {
        let mut cur = String::new();
        for c in span.content.chars() {
            let w = unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
            if used + w > width {
                let row = rows.last_mut().expect("one row at least");
                row.spans
                    .push(Span::styled(std::mem::take(&mut cur), span.style));
                rows.push(Line::default());
                used = 0;
            }
            cur.push(c);
            used += w;
        }
        if !cur.is_empty() {
            let row = rows.last_mut().expect("one row at least");
            row.spans.push(Span::styled(cur, span.style));
        }
    }
    rows
}

/// The footer: a notice (if any) above the key hint, which always stays; on a screen too short
/// for both, the notice alone when there is one.
fn draw_status(frame: &mut Frame, area: Rect, app: &App) {
    let notice = notice_line(app);
    let hint = Line::from(Span::styled(
        hint_text(app).to_string(),
        Style::new().fg(Color::DarkGray),
    ));
    if area.height >= 2 {
        let [top, bottom] =
            Layout::vertical([Constraint::Length(1), Constraint::Length(1)]).areas(area);
        if let Some(n) = notice {
            put_line(frame, top, n);
        }
        put_line(frame, bottom, hint);
    } else {
        put_line(frame, area, notice.unwrap_or(hint));
    }
}

/// The keys the footer recalls, for what has the keys now.
fn hint_text(app: &App) -> &'static str {
    if app.logs.as_ref().is_some_and(|p| p.focus) {
        "log pane: ↑ ↓ PgUp PgDn Home scroll · End follow · / search · w wrap · Tab/Esc tree · \
         l close · q quit"
    } else if app.events.focus {
        "events pane: ↑ ↓ PgUp PgDn Home scroll back · End newest · Tab/Esc tree · q quit"
    } else if app.model.supervised && app.slash_searches_logs() {
        "q quit · ? help · / search logs · \\ filter · Tab logs' keys · l close · s signal"
    } else if app.keymap == Keymap::Htop {
        htop_hint_text(app.model.supervised)
    } else if app.model.supervised {
        "q quit · ? help · / filter · s signal · l logs · R restart · x stop · o start · X stop all"
    } else {
        concat!(
            "q quit · ? help · / filter · F3 search · Enter details · - + collapse · ",
            "Space tag · s signal"
        )
    }
}

/// The tree's keys with `--keys htop`: `/` searches, `\\` filters, `k` signals, `e` details.
fn htop_hint_text(supervised: bool) -> &'static str {
    if supervised {
        "q quit · ? help · / search · \\ filter · k signal · l logs · R restart · x stop · o start"
    } else {
        "q quit · ? help · / search · \\ filter · e details · - + collapse · Space tag · k signal"
    }
}

/// The footer's notice: the filter being typed, a failed reading, the last result, the cursor
/// row's anomaly or helper state; `None` when there is nothing to say.
fn notice_line(app: &App) -> Option<Line<'static>> {
    let line = if let Some(p) = app.logs.as_ref().filter(|p| p.search_editing) {
        Line::from(vec![
            Span::styled("log search: ", Style::new().bold()),
            Span::raw(escape(p.search.as_bytes())),
            Span::styled("▏", theme::KEY),
            Span::styled(
                format!("  {} · Enter keep · Esc clear", p.search_count()),
                Style::new().fg(Color::DarkGray),
            ),
        ])
    } else if app.search_editing {
        Line::from(vec![
            Span::styled("search: ", Style::new().bold()),
            Span::raw(escape(app.search.as_bytes())),
            Span::styled("▏", theme::KEY),
            Span::styled(
                "  F3 next · Enter keep · Esc clear",
                Style::new().fg(Color::DarkGray),
            ),
        ])
    } else if app.filter_editing {
        Line::from(vec![
            Span::styled("filter: ", Style::new().bold()),
            Span::raw(escape(app.filter.as_bytes())),
            Span::styled("▏", theme::KEY),
            Span::styled("  Enter keep · Esc clear", Style::new().fg(Color::DarkGray)),
        ])
    } else if let Some(e) = &app.source_error {
        Line::from(Span::styled(
            format!("reading failed: {e}"),
            Style::new().fg(Color::Red).bold(),
        ))
    } else if let Some(m) = &app.message {
        Line::from(Span::styled(m.clone(), Style::new().bold()))
    } else if let Some(why) = &app.ended {
        Line::from(Span::styled(why.clone(), Style::new().bold()))
    } else if let Some(p) = app.logs.as_ref().filter(|p| p.focus) {
        p.needle()?;
        Line::from(Span::styled(p.search_text(), Style::new().bold()))
    } else if let Some(r) = app.cursor_row().filter(|r| !r.anomalies.is_empty()) {
        Line::from(Span::styled(
            format!("{}: {}", r.id.pid, r.anomaly_details.join("; ")),
            Style::new().fg(Color::Red).bold(),
        ))
    } else if let Some(d) = app.cursor_row().and_then(|r| r.helper_detail.as_ref()) {
        Line::from(Span::styled(d.clone(), Style::new().bold()))
    } else {
        return None;
    };
    Some(line)
}

/// A rectangle of at most `w` x `h` centred in `area`.
fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width);
    let h = h.min(area.height);
    Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    }
}

fn draw_help(frame: &mut Frame, area: Rect, scroll: u16) {
    let key_w = KEYS
        .iter()
        .map(|(k, _)| Line::raw(*k).width())
        .max()
        .unwrap_or(0);
    let text_w = KEYS
        .iter()
        .map(|(_, w)| Line::raw(*w).width())
        .max()
        .unwrap_or(0);
    let key_style = theme::KEY;
    // Side by side when it fits, else each key above its meaning.
    let side_by_side = key_w + 2 + text_w + 2 <= area.width as usize;
    let inner_w = area.width.saturating_sub(2) as usize;
    let lines: Vec<Line> = if side_by_side {
        KEYS.iter()
            .map(|(k, what)| {
                Line::from(vec![
                    Span::styled(format!("{k:<key_w$}  "), key_style),
                    Span::raw(*what),
                ])
            })
            .collect()
    } else {
        KEYS.iter()
            .flat_map(|(k, what)| {
                [
                    Line::from(Span::styled(k.to_string(), key_style)),
                    Line::from(format!("  {}", fit(what, inner_w.saturating_sub(2)))),
                ]
            })
            .collect()
    };
    let w = if side_by_side {
        key_w + 2 + text_w + 2
    } else {
        area.width as usize
    };
    let r = centered(area, w as u16, lines.len() as u16 + 2);
    let max_scroll = (lines.len() as u16 + 2).saturating_sub(r.height);
    frame.render_widget(Clear, r);
    frame.render_widget(
        Paragraph::new(lines)
            .scroll((scroll.min(max_scroll), 0))
            .block(dialog_block(" keys · j/k scroll · Esc close ", "", r.width)),
        r,
    );
}

fn draw_signals(frame: &mut Frame, area: Rect, title: &str, selected: usize) {
    let items = SIGNALS
        .iter()
        .map(|s| format!("{:>2} {}", *s as i32, s.as_str()))
        .collect();
    let bottom = " number or ↑↓ · Enter pick · Esc cancel ";
    draw_menu(frame, area, (title, bottom, 34), items, selected);
}

/// A menu of `items` with `selected` highlighted, titled `title` above and `bottom` below, at
/// least `min_w` wide: every menu of the dashboard (signals, columns, sort, users). An item too
/// wide for the screen is cut with `…`.
fn draw_menu(
    frame: &mut Frame,
    area: Rect,
    (title, bottom, min_w): (&str, &str, u16),
    items: Vec<String>,
    selected: usize,
) {
    let widest = items
        .iter()
        .map(|i| Line::raw(i.as_str()).width())
        .chain([Line::raw(title).width(), Line::raw(bottom).width()])
        .max()
        .unwrap_or(0) as u16;
    let r = centered(area, (widest + 2).max(min_w), items.len() as u16 + 2);
    let inner = r.width.saturating_sub(2) as usize;
    let mut state = ListState::default().with_selected(Some(selected));
    frame.render_widget(Clear, r);
    frame.render_stateful_widget(
        List::new(items.into_iter().map(|i| ListItem::new(fit(&i, inner))))
            .block(dialog_block(title, bottom, r.width))
            .highlight_style(Style::new().reversed().bold()),
        r,
        &mut state,
    );
}

/// The column setup (`F2`): every optional column in order, `[x]` shown, with what it shows.
fn draw_columns(frame: &mut Frame, area: Rect, app: &App, selected: usize) {
    let items: Vec<String> = app
        .columns
        .entries
        .iter()
        .map(|(c, shown)| {
            format!(
                "[{}] {:<8} {}",
                if *shown { 'x' } else { ' ' },
                c.title(),
                c.describe()
            )
        })
        .collect();
    let title = " columns · Space show/hide · [ ] move ";
    let bottom = " ↑↓ · Esc saves and closes ";
    draw_menu(frame, area, (title, bottom, 0), items, selected);
}

/// The sort menu: the columns the rows sort by, each with the order it starts in, the one
/// sorted by now marked with its direction.
fn draw_sort_by(frame: &mut Frame, area: Rect, app: &App, selected: usize) {
    let items: Vec<String> = app
        .sort_keys()
        .into_iter()
        .map(|c| {
            let start = crate::top::rows::Sort {
                key: c,
                descending: c.largest_first(),
            };
            let way = start.describe();
            let way = way.split(", ").nth(1).unwrap_or_default().to_string();
            let now = if c == app.sort.key {
                app.sort.arrow()
            } else {
                " "
            };
            format!("{now} {:<10} {way}", c.title())
        })
        .collect();
    let bottom = " ↑↓ · Enter sort · Esc cancel ";
    draw_menu(frame, area, (" sort by ", bottom, 0), items, selected);
}

/// A process's details: each label, then its value wrapped beside it.
fn draw_detail(frame: &mut Frame, area: Rect, d: &crate::top::detail::Detail) {
    let label_w = d.lines.iter().map(|(l, _)| l.len()).max().unwrap_or(0);
    let w = area.width.min(100);
    let room = (w as usize).saturating_sub(label_w + 4).max(8);
    let mut lines = Vec::new();
    for (label, value) in &d.lines {
        for (i, part) in wrap(value, room).into_iter().enumerate() {
            let label = if i == 0 { *label } else { "" };
            lines.push(Line::from(vec![
                Span::styled(format!("{label:<label_w$}  "), Style::new().bold()),
                Span::raw(part),
            ]));
        }
    }
    let r = centered(area, w, lines.len() as u16 + 2);
    let title = format!(" {} ", d.title);
    frame.render_widget(Clear, r);
    frame.render_widget(
        Paragraph::new(lines).block(dialog_block(&title, " Esc closes ", r.width)),
        r,
    );
}

/// The user filter's menu: every user, then each user present.
fn draw_users(frame: &mut Frame, area: Rect, uids: &[Option<u32>], selected: usize) {
    let items: Vec<String> = uids
        .iter()
        .map(|u| match u {
            None => "every user".to_string(),
            Some(u) => crate::base::ownership::uid_text(*u),
        })
        .collect();
    let bottom = " ↑↓ · Enter pick · Esc cancel ";
    draw_menu(
        frame,
        area,
        (" show the processes of ", bottom, 0),
        items,
        selected,
    );
}

/// Breaks `s` into lines of at most `width` columns, at spaces; a word longer than a line is
/// broken where the line ends. Nothing is left out.
fn wrap(s: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let w = |t: &str| Line::raw(t).width();
    let mut lines = Vec::new();
    let mut cur = String::new();
    for word in s.split(' ') {
        let sep = usize::from(!cur.is_empty());
        if w(&cur) + sep + w(word) <= width {
            if sep == 1 {
                cur.push(' ');
            }
            cur.push_str(word);
            continue;
        }
        if !cur.is_empty() {
            lines.push(std::mem::take(&mut cur));
        }
        for c in word.chars() {
            if w(&cur) + w(c.encode_utf8(&mut [0; 4])) > width {
                lines.push(std::mem::take(&mut cur));
            }
            cur.push(c);
        }
    }
    if !cur.is_empty() || lines.is_empty() {
        lines.push(cur);
    }
    lines
}

/// A confirmation: its question whole, wrapped to the screen (never cut), then the keys.
fn draw_confirm(frame: &mut Frame, area: Rect, text: &str, yes: &str) {
    let keys = format!("{yes} · any other key cancels");
    // At most 72 columns of text, fewer on a narrow screen; the box sized to what it holds.
    let room = (area.width.saturating_sub(4) as usize).clamp(1, 72);
    let mut lines: Vec<Line> = wrap(text, room)
        .into_iter()
        .map(|l| Line::from(l).bold())
        .collect();
    lines.extend(
        wrap(&keys, room)
            .into_iter()
            .map(|l| Line::from(l).fg(Color::DarkGray)),
    );
    let inner = lines.iter().map(Line::width).max().unwrap_or(0) as u16;
    let w = (inner + 4).max(24);
    let r = centered(area, w, lines.len() as u16 + 2);
    frame.render_widget(Clear, r);
    frame.render_widget(
        Paragraph::new(lines).block(
            Block::bordered()
                .title(" confirm ")
                .padding(ratatui::widgets::Padding::horizontal(1)),
        ),
        r,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(l: &Line) -> String {
        l.spans.iter().map(|s| s.content.as_ref()).collect()
    }

    /// With `--keys htop` the footer names htop's keys: `/` searches there, `\\` filters.
    #[test]
    fn the_footer_names_the_keymaps_keys() {
        let mut app = App::new(None, "1s".into());
        assert!(hint_text(&app).contains("/ filter"), "{}", hint_text(&app));
        app.keymap = Keymap::Htop;
        for supervised in [false, true] {
            app.model.supervised = supervised;
            let h = hint_text(&app);
            assert!(h.contains("/ search · \\ filter"), "{h}");
            assert!(h.contains("k signal") && !h.contains("s signal"), "{h}");
        }
    }

    /// A line too wide ends in `…` at its last column, whichever span the edge falls in; a line
    /// that fits is left whole.
    #[test]
    fn lines_are_cut_with_an_ellipsis() {
        let line = || Line::from(vec![Span::raw("⚠ crashy"), Span::raw(" restarting")]);
        assert_eq!(text(&fit_line(line(), 19)), "⚠ crashy restarting");
        assert_eq!(text(&fit_line(line(), 14)), "⚠ crashy rest…");
        // The edge right after the first span: the first is cut to make room for the mark.
        assert_eq!(text(&fit_line(line(), 8)), "⚠ crash…");
        assert_eq!(text(&fit_line(line(), 1)), "…");
        assert_eq!(text(&fit_line(line(), 0)), "");
        let wide = fit_line(Line::from("日本語です"), 5);
        assert_eq!(text(&wide), "日本…");
        assert!(wide.width() <= 5);
    }

    proptest::proptest! {
        /// The widths counted without making or measuring the text are the text's.
        #[test]
        fn widths_counted_are_the_texts(n in proptest::prelude::any::<i32>(), t in "\\PC{0,12}") {
            proptest::prop_assert_eq!(decimal_width(n), n.to_string().len());
            for e in [i32::MIN, i32::MAX, 0, -1, 9, 10, 99, 100] {
                proptest::prop_assert_eq!(decimal_width(e), e.to_string().len());
            }
            proptest::prop_assert_eq!(text_width(&t), Span::raw(t.as_str()).width());
            proptest::prop_assert_eq!(text_width("sleep 3600"), 10);
        }
    }
}
