//! The dashboard's meters: what the machine is doing, above the tree, as htop and btop show it.
//!
//! Owns [`Sampler`], which reads the machine's counters through procfs (`/proc/stat` as
//! [`procfs::KernelStats`], `/proc/meminfo`, `/proc/loadavg`, `/proc/uptime`) and turns two
//! readings of `/proc/stat` into each core's use ([`cpu_use`]); [`Reading`], one such reading;
//! [`Meters`], the app's part (shown or hidden, the last reading, the per-process
//! [`History`]); and [`Meters::texts`], the rounded values the screen shows, which the main loop
//! compares to decide whether to redraw (a value that moves below what is shown redraws
//! nothing). Process, zombie and running counts come from the model the dashboard already has
//! (its own reading of the processes it shows); the machine's thread count from `/proc/loadavg`.
//! Attached or standalone, the meters describe the machine the dashboard runs on. [`height`]
//! and [`draw`] lay them out in the rows [`crate::top::ui`] gives them: one bar per core beside
//! the counts and the history on a large terminal, three compact lines on a small one; below
//! them, on a tall terminal or when asked (`v`), the machine's CPU and memory history
//! ([`crate::top::history::Machine`], from the same readings).

use std::time::{Duration, Instant};

use procfs::CpuTime;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, RenderDirection, Sparkline};

use crate::base::sanitize::escape;
use crate::process::identity::Identity;
use crate::top::formatting::put_line;
pub use crate::top::history::{History, Levels, Machine};
use crate::top::model::{Model, fmt_age, fmt_bytes, fmt_cpu};
use crate::top::theme;

/// A reading this soon after the last baseline keeps the last CPU shares (a tick is 10 ms: a
/// few milliseconds give no rate), as the tree's CPU% does.
const TOO_SOON: Duration = Duration::from_millis(250);

/// How one core (or all of them) spent the time between two readings, each a fraction of it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CpuShare {
    /// Low-priority (niced) user time.
    pub nice: f64,
    /// User time.
    pub user: f64,
    /// Kernel time: system, interrupts, soft interrupts, and time stolen by the hypervisor.
    pub system: f64,
}

impl CpuShare {
    /// The busy fraction, 0 to 1.
    pub fn busy(&self) -> f64 {
        (self.nice + self.user + self.system).clamp(0.0, 1.0)
    }
}

/// The share of each kind of time between two readings of one CPU line of `/proc/stat`.
/// Counters that went backwards (iowait may, a CPU brought back online resets) count as 0; a
/// line with no time between the readings is idle.
pub fn cpu_use(before: &CpuTime, after: &CpuTime) -> CpuShare {
    let d = |a: u64, b: u64| b.saturating_sub(a) as f64;
    let o = |a: Option<u64>, b: Option<u64>| d(a.unwrap_or(0), b.unwrap_or(0));
    // Guest time is counted in user time already (and guest_nice in nice).
    let user = d(before.user, after.user);
    let nice = d(before.nice, after.nice);
    let system = d(before.system, after.system)
        + o(before.irq, after.irq)
        + o(before.softirq, after.softirq)
        + o(before.steal, after.steal);
    let idle = d(before.idle, after.idle) + o(before.iowait, after.iowait);
    let total = user + nice + system + idle;
    if total <= 0.0 {
        return CpuShare::default();
    }
    CpuShare {
        nice: nice / total,
        user: user / total,
        system: system / total,
    }
}

/// One reading of the machine.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reading {
    /// Each online core's use since the previous reading, in `/proc/stat` order; empty on the
    /// first reading.
    pub cores: Vec<CpuShare>,
    /// All cores together; `None` on the first reading.
    pub total: Option<CpuShare>,
    pub mem_total: u64,
    /// In use: total minus what the kernel estimates available (`MemAvailable`).
    pub mem_used: u64,
    pub swap_total: u64,
    pub swap_used: u64,
    /// Load averages over 1, 5 and 15 minutes.
    pub load: [f32; 3],
    /// Threads on the machine (kernel threads included), from `/proc/loadavg`.
    pub threads: u32,
    /// Seconds since boot.
    pub uptime_secs: u64,
}

/// Reads the machine's counters; keeps the last `/proc/stat` as the baseline of the next rates.
/// A counter of the machine that could not be read: the file named, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct MetersError(pub String);

impl From<String> for MetersError {
    fn from(s: String) -> MetersError {
        MetersError(s)
    }
}

impl From<&str> for MetersError {
    fn from(s: &str) -> MetersError {
        MetersError(s.to_string())
    }
}

#[derive(Debug, Default)]
pub struct Sampler {
    baseline: Option<(Instant, procfs::KernelStats)>,
    last: Option<(Vec<CpuShare>, Option<CpuShare>)>,
}

impl Sampler {
    pub fn new() -> Sampler {
        Sampler::default()
    }

    /// Takes one reading; the error names the file that could not be read.
    pub fn read(&mut self) -> Result<Reading, MetersError> {
        use procfs::{Current, CurrentSI};
        let stat =
            procfs::KernelStats::current().map_err(|e| format!("cannot read /proc/stat: {e}"))?;
        let mem =
            procfs::Meminfo::current().map_err(|e| format!("cannot read /proc/meminfo: {e}"))?;
        let load = procfs::LoadAverage::current()
            .map_err(|e| format!("cannot read /proc/loadavg: {e}"))?;
        let up = procfs::Uptime::current().map_err(|e| format!("cannot read /proc/uptime: {e}"))?;
        let (cores, total) = self.shares(Instant::now(), stat);
        let available = mem
            .mem_available
            .unwrap_or(mem.mem_free + mem.buffers + mem.cached);
        Ok(Reading {
            cores,
            total,
            mem_total: mem.mem_total,
            mem_used: mem.mem_total.saturating_sub(available),
            swap_total: mem.swap_total,
            swap_used: mem.swap_total.saturating_sub(mem.swap_free),
            load: [load.one, load.five, load.fifteen],
            threads: load.max,
            uptime_secs: up.uptime as u64,
        })
    }

    /// The CPU shares since the baseline, which `stat` becomes; too soon after it, the last
    /// shares again and the baseline kept.
    fn shares(
        &mut self,
        now: Instant,
        stat: procfs::KernelStats,
    ) -> (Vec<CpuShare>, Option<CpuShare>) {
        if let (Some((at, _)), Some(last)) = (&self.baseline, &self.last)
            && now.duration_since(*at) < TOO_SOON
        {
            return last.clone();
        }
        let out = match &self.baseline {
            // A core that went offline or came back: the lines no longer pair up.
            Some((_, before)) if before.cpu_time.len() == stat.cpu_time.len() => (
                before
                    .cpu_time
                    .iter()
                    .zip(&stat.cpu_time)
                    .map(|(b, a)| cpu_use(b, a))
                    .collect(),
                Some(cpu_use(&before.total, &stat.total)),
            ),
            _ => (Vec::new(), None),
        };
        self.baseline = Some((now, stat));
        self.last = Some(out.clone());
        out
    }
}

/// The meters' part of the dashboard's state.
#[derive(Debug)]
pub struct Meters {
    /// Drawn above the tree (`m` toggles).
    pub shown: bool,
    /// The last reading.
    pub reading: Option<Reading>,
    /// Why the last reading failed.
    pub error: Option<String>,
    /// CPU and memory of each process over the last minutes.
    pub history: History,
    /// The machine's CPU and memory use over the last readings.
    pub machine: Machine,
    /// The machine's history shown (`v`); `None`: when the screen is tall enough.
    pub graphs: Option<bool>,
    /// The screen's size when last drawn, set by the renderer.
    pub screen_height: u16,
    pub screen_width: u16,
}

impl Default for Meters {
    fn default() -> Meters {
        Meters {
            shown: true,
            reading: None,
            error: None,
            history: History::new(),
            machine: Machine::default(),
            graphs: None,
            screen_height: 0,
            screen_width: 0,
        }
    }
}

/// The counts of the tasks shown, from the model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tasks {
    pub processes: usize,
    /// Under a filter (`/`, `u`): the live rows it leaves, of `processes`.
    pub shown: Option<usize>,
    pub zombies: usize,
    pub running: usize,
}

impl Tasks {
    pub fn of(model: &Model) -> Tasks {
        let mut t = Tasks::default();
        for n in model.nodes.values().filter(|n| !n.exited && !n.vacant()) {
            t.processes += 1;
            match n.info.state {
                b'Z' => t.zombies += 1,
                b'R' => t.running += 1,
                _ => {}
            }
        }
        t
    }
}

/// What the meters show, rounded as shown: equal texts draw the same meters.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Texts {
    /// Each core's (nice, user, system) in whole percent.
    pub cores: Vec<[u8; 3]>,
    pub total: Option<[u8; 3]>,
    /// Used and total memory (`1.2G`), and the used percent.
    pub mem: (String, String, u8),
    pub swap: (String, String, u8),
    /// `0.52 0.40 0.31`.
    pub load: String,
    pub tasks: Tasks,
    pub threads: u32,
    /// `3h07m` (coarse, like AGE: it changes once a minute).
    pub uptime: String,
    /// The selected process's history as drawn (see [`History::levels`]).
    pub history: Option<crate::top::history::Levels>,
    /// The machine's history when shown: the last CPU and memory percent, and the levels of
    /// each, newest first.
    pub machine: Option<MachineTexts>,
    pub error: Option<String>,
}

/// The machine's history as drawn.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MachineTexts {
    pub cpu: u8,
    pub mem: u8,
    pub cpu_levels: Vec<u8>,
    pub mem_levels: Vec<u8>,
}

/// Whole percent of a fraction.
fn pct(f: f64) -> u8 {
    (f * 100.0).round().clamp(0.0, 100.0) as u8
}

fn share_pct(s: &CpuShare) -> [u8; 3] {
    [pct(s.nice), pct(s.user), pct(s.system)]
}

fn ratio(used: u64, total: u64) -> u8 {
    if total == 0 {
        0
    } else {
        pct(used as f64 / total as f64)
    }
}

impl Meters {
    /// Takes a reading of the machine, or why it failed (the last reading stays).
    pub fn take(&mut self, r: Result<Reading, MetersError>) {
        match r {
            Ok(r) => {
                if let Some(t) = &r.total {
                    self.machine
                        .record(pct(t.busy()), ratio(r.mem_used, r.mem_total));
                }
                self.reading = Some(r);
                self.error = None;
            }
            Err(e) => self.error = Some(e.0),
        }
    }

    /// What the meters show now, for the selected process `selected`.
    pub fn texts(
        &self,
        model: &Model,
        selected: Option<crate::process::identity::Identity>,
    ) -> Texts {
        if !self.shown {
            return Texts::default();
        }
        let r = self.reading.clone().unwrap_or_default();
        Texts {
            cores: r.cores.iter().map(share_pct).collect(),
            total: r.total.as_ref().map(share_pct),
            mem: (
                fmt_bytes(r.mem_used),
                fmt_bytes(r.mem_total),
                ratio(r.mem_used, r.mem_total),
            ),
            swap: (
                fmt_bytes(r.swap_used),
                fmt_bytes(r.swap_total),
                ratio(r.swap_used, r.swap_total),
            ),
            load: format!("{:.2} {:.2} {:.2}", r.load[0], r.load[1], r.load[2]),
            tasks: Tasks::of(model),
            threads: r.threads,
            uptime: fmt_age(r.uptime_secs),
            history: selected.and_then(|id| self.history.levels(id)),
            machine: self.machine_texts(),
            error: self.error.clone(),
        }
    }

    /// Whether the machine's history is shown on a screen `height` lines tall.
    pub fn graphs_on(&self, height: u16) -> bool {
        self.graphs.unwrap_or(height >= GRAPHS_HEIGHT)
    }

    /// The machine's history as drawn, when shown (its line is there from the first reading,
    /// so the tree does not move when the first point comes).
    fn machine_texts(&self) -> Option<MachineTexts> {
        if !self.graphs_on(self.screen_height) {
            return None;
        }
        let r = self.reading.as_ref()?;
        // No more points than a graph (half the screen at most) draws: points that scrolled
        // off do not make a new frame.
        let (cpu_levels, mem_levels) = self.machine.levels(self.screen_width as usize / 2);
        Some(MachineTexts {
            cpu: r.total.as_ref().map_or(0, |t| pct(t.busy())),
            mem: ratio(r.mem_used, r.mem_total),
            cpu_levels,
            mem_levels,
        })
    }
}

/// A terminal at least this wide and tall gets the full meters (a bar per core).
pub const FULL_WIDTH: u16 = 120;
pub const FULL_HEIGHT: u16 = 40;
/// A terminal at least this tall shows the machine's history at first.
pub const GRAPHS_HEIGHT: u16 = 45;
/// Below this height, no meters: the tree needs the rows.
pub const MIN_HEIGHT: u16 = 12;
/// Core bars per column at most in the full meters; more cores make more columns.
const CORE_ROWS: usize = 8;

fn full(area: Rect) -> bool {
    area.width >= FULL_WIDTH && area.height >= FULL_HEIGHT
}

/// (columns, rows) of the grid of `n` core bars.
fn core_grid(n: usize) -> (usize, usize) {
    let n = n.max(1);
    let cols = n.div_ceil(CORE_ROWS);
    (cols, n.div_ceil(cols))
}

/// The rows the meters take on a terminal of `area` (0 when hidden, too small, or before the
/// first reading of the machine: no zeros that mean "not read yet").
pub fn height(area: Rect, m: &Meters) -> u16 {
    if !m.shown || area.height < MIN_HEIGHT || m.reading.is_none() {
        return 0;
    }
    let graphs = u16::from(m.graphs_on(area.height));
    if full(area) {
        let cores = m.reading.as_ref().map_or(0, |r| r.cores.len());
        (core_grid(cores).1 as u16 + 2).max(6) + graphs
    } else {
        3 + graphs
    }
}

/// A bar as htop draws one: `label[||||||      text]`, the parts in their styles, the text
/// over the right end of the bar.
fn bar(label: &str, parts: &[(f64, Style)], text: &str, width: usize) -> Line<'static> {
    let lw = Line::raw(label).width();
    let inner = width.saturating_sub(lw + 2);
    let mut cells: Vec<(char, Style)> = Vec::with_capacity(inner);
    let mut filled = 0.0;
    for (frac, style) in parts {
        filled += frac.clamp(0.0, 1.0);
        let upto = ((filled.min(1.0) * inner as f64).round() as usize).min(inner);
        while cells.len() < upto {
            cells.push(('|', *style));
        }
    }
    cells.resize(inner, (' ', Style::new()));
    let tw = text.chars().count();
    if tw <= inner {
        for (i, c) in text.chars().enumerate() {
            cells[inner - tw + i] = (c, Style::new());
        }
    }
    let mut spans = vec![
        Span::styled(label.to_string(), theme::LABEL),
        Span::raw("["),
    ];
    let mut run = String::new();
    let mut run_style = Style::new();
    for (c, st) in cells {
        if st != run_style && !run.is_empty() {
            spans.push(Span::styled(std::mem::take(&mut run), run_style));
        }
        run_style = st;
        run.push(c);
    }
    if !run.is_empty() {
        spans.push(Span::styled(run, run_style));
    }
    spans.push(Span::raw("]"));
    Line::from(spans)
}

fn cpu_parts(p: &[u8; 3]) -> [(f64, Style); 3] {
    [
        (p[0] as f64 / 100.0, theme::NICE),
        (p[1] as f64 / 100.0, theme::USER),
        (p[2] as f64 / 100.0, theme::SYSTEM),
    ]
}

fn cpu_text(p: Option<&[u8; 3]>) -> String {
    match p {
        Some(p) => format!("{}%", (p[0] as u16 + p[1] as u16 + p[2] as u16).min(100)),
        None => "…".to_string(),
    }
}

fn mem_bar(label: &str, m: &(String, String, u8), style: Style, width: usize) -> Line<'static> {
    bar(
        label,
        &[(m.2 as f64 / 100.0, style)],
        &format!("{}/{}", m.0, m.1),
        width,
    )
}

/// `95 tasks, 1 zombie, 2 running; 310 threads`.
fn tasks_line(t: &Texts, words: bool) -> Line<'static> {
    let n = t.tasks.processes;
    let mut spans = vec![Span::raw(match (words, t.tasks.shown, n) {
        (true, Some(k), _) => format!("{k} of {n} shown"),
        (true, None, _) => format!("{n} shown"),
        (false, Some(k), _) => format!("{k}/{n} tasks"),
        (false, None, 1) => "1 task".to_string(),
        (false, None, _) => format!("{n} tasks"),
    })];
    if t.tasks.zombies > 0 {
        spans.push(Span::raw(", "));
        spans.push(Span::styled(
            format!(
                "{} zombie{}",
                t.tasks.zombies,
                if t.tasks.zombies == 1 { "" } else { "s" }
            ),
            theme::state("Z"),
        ));
    }
    spans.push(Span::raw(format!(
        ", {} running; {} threads",
        t.tasks.running, t.threads
    )));
    if words {
        spans.push(Span::styled(" on the machine", theme::DIM));
    }
    Line::from(spans)
}

fn load_style(load: f32, cores: usize) -> Style {
    if cores > 0 && load >= cores as f32 {
        theme::ALERT
    } else {
        Style::new()
    }
}

/// What the meters draw: their texts, the reading (for the load's colours), and the
/// process whose history they show.
pub struct View<'a> {
    pub texts: Texts,
    pub reading: Option<&'a Reading>,
    pub model: &'a Model,
    pub cursor: Option<Identity>,
}

/// `1234 (sleep)` or `helper web's tree (1234)`, and what the history covers.
fn history_label(v: &View) -> Line<'static> {
    let Some(id) = v.cursor else {
        return Line::styled("history: no process selected", theme::DIM);
    };
    let l = v.texts.history.as_ref();
    let node = v.model.nodes.get(&id);
    let name = node.map(|n| escape(&n.info.comm)).unwrap_or_default();
    let helper = node
        .and_then(|n| n.info.supervision.as_ref())
        .and_then(|s| s.helper.as_deref());
    let who = match (l.is_some_and(|l| l.tree), helper) {
        (true, Some(h)) => format!("helper {}'s tree ({})", escape(h.as_bytes()), id.pid),
        _ => format!("{} ({name})", id.pid),
    };
    let span = match l {
        Some(l) if l.points > 1 => format!(" · last {}", fmt_age(l.span_secs)),
        _ => String::new(),
    };
    Line::from(vec![
        Span::styled("history of ", theme::LABEL),
        Span::raw(who),
        Span::styled(span, theme::DIM),
    ])
}

/// `CPU  12.5%` / `Mem   1.2M` and its sparkline in `area`.
fn spark(frame: &mut Frame, area: Rect, label: String, levels: &[u8], style: Style) {
    let lw = (Line::raw(label.as_str()).width() as u16 + 1).min(area.width);
    frame.render_widget(
        Paragraph::new(Line::styled(label, theme::LABEL)),
        Rect { width: lw, ..area },
    );
    let rest = Rect {
        x: area.x + lw,
        width: area.width - lw,
        ..area
    };
    let data: Vec<u64> = levels.iter().map(|&v| v as u64).collect();
    frame.render_widget(
        Sparkline::default()
            .data(&data)
            .max(8)
            .direction(RenderDirection::RightToLeft)
            .style(style),
        rest,
    );
}

fn spark_labels(l: Option<&Levels>) -> (String, String) {
    match l {
        Some(l) => (
            format!("CPU {:>5}%", fmt_cpu(Some(l.last.cpu_tenths as f64 / 10.0))),
            format!("Mem {:>6}", fmt_bytes(l.last.rss_kib as u64 * 1024)),
        ),
        None => ("CPU       ".into(), "Mem       ".into()),
    }
}

/// The load averages, each red when it reaches the number of cores.
fn load_spans(v: &View) -> Vec<Span<'static>> {
    let cores = v.texts.cores.len();
    let mut spans = vec![Span::styled("Load ", theme::LABEL)];
    for (i, part) in v.texts.load.split(' ').enumerate() {
        let l = v.reading.map_or(0.0, |r| r.load[i]);
        if i > 0 {
            spans.push(Span::raw(" "));
        }
        spans.push(Span::styled(part.to_string(), load_style(l, cores)));
    }
    spans
}

/// The history's two sparklines: (label, levels) of the CPU and of the memory.
fn sparks(t: &Texts) -> [(String, &[u8]); 2] {
    let (cpu_label, mem_label) = spark_labels(t.history.as_ref());
    let (cpu, mem): (&[u8], &[u8]) = t.history.as_ref().map_or((&[], &[]), |l| (&l.cpu, &l.mem));
    [(cpu_label, cpu), (mem_label, mem)]
}

/// Draws the meters in `area` (as tall as [`height`] said).
pub fn draw(frame: &mut Frame, area: Rect, v: &View, screen: Rect) {
    let mut area = area;
    if let Some(m) = v.texts.machine.as_ref().filter(|_| area.height > 1) {
        area.height -= 1;
        draw_machine(
            frame,
            Rect::new(area.x, area.y + area.height, area.width, 1),
            m,
        );
    }
    if full(screen) {
        draw_full(frame, area, v);
    } else {
        draw_compact(frame, area, v);
    }
}

/// The machine's history on one line: its CPU's on the left half, its memory's on the right.
fn draw_machine(frame: &mut Frame, area: Rect, m: &MachineTexts) {
    let label = Span::styled("machine ", theme::LABEL);
    let lw = (label.width() as u16).min(area.width);
    put_line(frame, Rect { width: lw, ..area }, Line::from(label));
    let rest = Rect {
        x: area.x + lw,
        width: area.width - lw,
        ..area
    };
    let [c, _, mm] = Layout::horizontal([
        Constraint::Fill(1),
        Constraint::Length(1),
        Constraint::Fill(1),
    ])
    .areas(rest);
    let cpu = format!("CPU {:>3}%", m.cpu);
    spark(frame, c, cpu, &m.cpu_levels, theme::SPARK_CPU);
    let mem = format!("Mem {:>3}%", m.mem);
    spark(frame, mm, mem, &m.mem_levels, theme::SPARK_MEM);
}

/// A bar per core on the left, memory and swap below them; tasks, load, uptime and the
/// history on the right.
fn draw_full(frame: &mut Frame, area: Rect, v: &View) {
    let t = &v.texts;
    let [left, _, right] = Layout::horizontal([
        Constraint::Percentage(50),
        Constraint::Length(2),
        Constraint::Fill(1),
    ])
    .areas(area);
    let rows = draw_cores(frame, left, t);
    let lw = left.width as usize;
    let y = left.y + rows as u16;
    let row = |y: u16| Rect::new(left.x, y, left.width, 1);
    frame.render_widget(
        Paragraph::new(mem_bar("Mem", &t.mem, theme::MEM_USED, lw)),
        row(y),
    );
    frame.render_widget(
        Paragraph::new(mem_bar("Swp", &t.swap, theme::SWAP_USED, lw)),
        row(y + 1),
    );
    let line = |i: u16| Rect::new(right.x, right.y + i, right.width, 1);
    let tasks = std::iter::once(Span::styled("Tasks ", theme::LABEL))
        .chain(tasks_line(t, true).spans)
        .collect::<Vec<_>>();
    put_line(frame, line(0), Line::from(tasks));
    put_line(frame, line(1), Line::from(load_spans(v)));
    let mut up = vec![
        Span::styled("Uptime ", theme::LABEL),
        Span::raw(t.uptime.clone()),
    ];
    if let Some(e) = &t.error {
        up.push(Span::styled(
            format!(" · {}", escape(e.as_bytes())),
            theme::ALERT,
        ));
    }
    put_line(frame, line(2), Line::from(up));
    put_line(frame, line(3), history_label(v));
    let [(cpu_label, cpu), (mem_label, mem)] = sparks(t);
    spark(frame, line(4), cpu_label, cpu, theme::SPARK_CPU);
    spark(frame, line(5), mem_label, mem, theme::SPARK_MEM);
}

/// One bar per core in `left`, in columns; returns the lines they take.
fn draw_cores(frame: &mut Frame, left: Rect, t: &Texts) -> usize {
    let cores = t.cores.len();
    let (cols, rows) = core_grid(cores);
    let col_w = (left.width as usize + 1) / cols;
    for (i, p) in t.cores.iter().enumerate() {
        let (c, r) = (i / rows, i % rows);
        let label = format!(
            "cpu{i:<width$}",
            width = cores.saturating_sub(1).to_string().len()
        );
        let x = left.x + (c * col_w) as u16;
        let cell = Rect::new(x, left.y + r as u16, (col_w.saturating_sub(1)) as u16, 1);
        let text = cpu_text(Some(p));
        let bar = bar(&label, &cpu_parts(p), &text, cell.width as usize);
        frame.render_widget(Paragraph::new(bar), cell);
    }
    if cores == 0 {
        frame.render_widget(
            Paragraph::new(bar("cpu", &[], "…", left.width as usize)),
            Rect { height: 1, ..left },
        );
    }
    rows
}

/// Compact: the bars of all cores, memory and swap on one line; load, tasks and uptime on
/// the next; the selected process's history on the third.
fn draw_compact(frame: &mut Frame, area: Rect, v: &View) {
    let t = &v.texts;
    let cores = t.cores.len();
    let third = area.width / 3;
    let [a, b, c] = Layout::horizontal([
        Constraint::Length(third),
        Constraint::Length(third),
        Constraint::Fill(1),
    ])
    .areas(Rect { height: 1, ..area });
    let total = t.total.as_ref();
    let bar_label = if cores > 1 {
        format!("CPU×{cores}")
    } else {
        "CPU".to_string()
    };
    let parts = total.map(cpu_parts).unwrap_or_default();
    let cpu = bar(
        &bar_label,
        &parts,
        &cpu_text(total),
        a.width.saturating_sub(1) as usize,
    );
    frame.render_widget(Paragraph::new(cpu), a);
    let mem = mem_bar(
        "Mem",
        &t.mem,
        theme::MEM_USED,
        b.width.saturating_sub(1) as usize,
    );
    frame.render_widget(Paragraph::new(mem), b);
    let swap = mem_bar("Swp", &t.swap, theme::SWAP_USED, c.width as usize);
    frame.render_widget(Paragraph::new(swap), c);
    let mut info = load_spans(v);
    info.push(Span::raw(" · "));
    info.extend(tasks_line(t, false).spans);
    info.push(Span::raw(format!(" · up {}", t.uptime)));
    if let Some(e) = &t.error {
        info.push(Span::styled(
            format!(" · {}", escape(e.as_bytes())),
            theme::ALERT,
        ));
    }
    let info_line = Rect::new(area.x, area.y + 1, area.width, 1);
    put_line(frame, info_line, Line::from(info));
    let hist = Rect::new(area.x, area.y + 2, area.width, 1);
    let label = history_label(v);
    let lw = (label.width() as u16 + 2).min(hist.width);
    put_line(frame, Rect { width: lw, ..hist }, label);
    let [hc, hm] = Layout::horizontal([Constraint::Fill(1), Constraint::Fill(1)]).areas(Rect {
        x: hist.x + lw,
        width: hist.width - lw,
        ..hist
    });
    let [(cpu_label, cpu), (mem_label, mem)] = sparks(t);
    spark(frame, hc, cpu_label, cpu, theme::SPARK_CPU);
    spark(frame, hm, mem_label, mem, theme::SPARK_MEM);
}

#[cfg(test)]
mod tests {
    use super::*;
    use procfs::{ExplicitSystemInfo, FromBufReadSI};

    fn stat(text: &str) -> procfs::KernelStats {
        let si = ExplicitSystemInfo {
            boot_time_secs: 0,
            ticks_per_second: 100,
            page_size: 4096,
            is_little_endian: true,
        };
        procfs::KernelStats::from_buf_read(text.as_bytes(), &si).unwrap()
    }

    const BEFORE: &str = "cpu  1000 100 500 8000 200 10 20 0 0 0\n\
                          cpu0 500 100 200 4000 100 10 10 0 0 0\n\
                          cpu1 500 0 300 4000 100 0 10 0 0 0\n\
                          ctxt 1\nbtime 1\nprocesses 1\nprocs_running 1\nprocs_blocked 0\n";
    // 100 ticks each core: cpu0 busy 50 user + 10 nice + 10 system + 10 irq/softirq, idle 20;
    // cpu1 all idle (its iowait went backwards: counted as 0, not as a huge number).
    const AFTER: &str = "cpu  1050 110 510 8080 250 15 25 0 0 0\n\
                         cpu0 550 110 210 4020 100 15 15 0 0 0\n\
                         cpu1 500 0 300 4080 50 0 10 0 0 0\n\
                         ctxt 2\nbtime 1\nprocesses 2\nprocs_running 1\nprocs_blocked 0\n";

    #[test]
    fn core_shares_from_two_readings() {
        let (b, a) = (stat(BEFORE), stat(AFTER));
        let c0 = cpu_use(&b.cpu_time[0], &a.cpu_time[0]);
        assert!((c0.user - 0.5).abs() < 1e-9, "{c0:?}");
        assert!((c0.nice - 0.1).abs() < 1e-9, "{c0:?}");
        assert!((c0.system - 0.2).abs() < 1e-9, "{c0:?}");
        assert!((c0.busy() - 0.8).abs() < 1e-9);
        let c1 = cpu_use(&b.cpu_time[1], &a.cpu_time[1]);
        assert_eq!(
            c1,
            CpuShare::default(),
            "an idle core whose iowait went back"
        );
        assert_eq!(share_pct(&c0), [10, 50, 20]);
    }

    #[test]
    fn no_time_between_readings_is_idle_and_never_divides_by_zero() {
        let b = stat(BEFORE);
        let s = cpu_use(&b.cpu_time[0], &b.cpu_time[0]);
        assert_eq!(s, CpuShare::default());
        // Reversed readings (counters that went back): no negative shares.
        let a = stat(AFTER);
        let r = cpu_use(&a.cpu_time[0], &b.cpu_time[0]);
        assert!(r.user >= 0.0 && r.nice >= 0.0 && r.system >= 0.0 && r.busy() <= 1.0);
    }

    #[test]
    fn the_sampler_pairs_cores_and_keeps_shares_a_reading_too_soon() {
        let mut s = Sampler::new();
        let t0 = Instant::now();
        assert_eq!(s.shares(t0, stat(BEFORE)), (Vec::new(), None));
        let (cores, total) = s.shares(t0 + Duration::from_secs(1), stat(AFTER));
        assert_eq!(cores.len(), 2);
        assert_eq!(share_pct(&cores[0]), [10, 50, 20]);
        assert!(total.is_some());
        // 10 ms later, the same counters again: the shares stay (not "all idle").
        let again = s.shares(t0 + Duration::from_millis(1010), stat(AFTER));
        assert_eq!(share_pct(&again.0[0]), [10, 50, 20]);
        // A core gone offline: no shares until two readings pair up again.
        let one_core = "cpu  1 1 1 1\ncpu0 1 1 1 1\nctxt 1\nbtime 1\nprocesses 1\n";
        assert_eq!(
            s.shares(t0 + Duration::from_secs(3), stat(one_core)),
            (Vec::new(), None)
        );
    }

    #[test]
    fn rounded_texts_hide_changes_below_a_percent() {
        let mut m = Meters::default();
        let model = Model::default();
        let r = |user: f64| Reading {
            cores: vec![CpuShare {
                user,
                ..CpuShare::default()
            }],
            mem_total: 4 << 30,
            mem_used: 1 << 30,
            load: [0.5, 0.4, 0.3],
            uptime_secs: 4000,
            ..Reading::default()
        };
        m.take(Ok(r(0.201)));
        let a = m.texts(&model, None);
        m.take(Ok(r(0.203)));
        assert_eq!(a, m.texts(&model, None));
        m.take(Ok(r(0.25)));
        assert_ne!(a, m.texts(&model, None));
        assert_eq!(a.mem, ("1.0G".into(), "4.0G".into(), 25));
        assert_eq!(a.load, "0.50 0.40 0.30");
        assert_eq!(a.uptime, "1h06m");
        m.take(Err("cannot read /proc/stat: gone".into()));
        assert!(m.reading.is_some(), "a failed reading keeps the last one");
        m.shown = false;
        assert_eq!(m.texts(&model, None), Texts::default());
    }
}
