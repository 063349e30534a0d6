//! The dashboard's colours: one palette, legible on dark and light terminals, and none at all
//! under `NO_COLOR`.
//!
//! Owns the styles of what carries meaning (process states, CPU and memory over a threshold,
//! the meters' parts) and [`finish`], run on every frame: under `NO_COLOR` (set and not empty,
//! <https://no-color.org>) it takes every colour out of the frame and shows what had a
//! background colour (the header, badges) in reverse video instead, so nothing loses its
//! emphasis. The palette uses the terminal's own eight colours as foregrounds on the default
//! background only where they read on both light and dark backgrounds (green, red, blue,
//! magenta, and dark grey for what is secondary), never white, black or yellow text on the
//! default background.

use std::sync::OnceLock;

use ratatui::buffer::Buffer;
use ratatui::style::{Color, Modifier, Style};

/// CPU% of one process at or above which it is drawn as busy, and as very busy.
pub const CPU_BUSY: f64 = 50.0;
pub const CPU_HOT: f64 = 90.0;

/// The share of the machine's memory at or above which a process's RSS is drawn as large, and
/// as very large.
pub const MEM_LARGE: f64 = 0.025;
pub const MEM_HUGE: f64 = 0.10;

/// Whether `NO_COLOR` asks for no colour (set and not empty), read once.
pub fn no_color() -> bool {
    static NO: OnceLock<bool> = OnceLock::new();
    *NO.get_or_init(|| std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()))
}

/// The style of a state letter: running green, uninterruptible (disk) wait red, zombie
/// magenta, stopped or traced blue, idle kernel threads dim; sleeping plain.
pub fn state(letter: &str) -> Style {
    match letter {
        "R" => Style::new().fg(Color::Green).add_modifier(Modifier::BOLD),
        "D" => Style::new().fg(Color::Red).add_modifier(Modifier::BOLD),
        "Z" => Style::new().fg(Color::Magenta).add_modifier(Modifier::BOLD),
        "T" | "t" => Style::new().fg(Color::Blue).add_modifier(Modifier::BOLD),
        "I" | "exit" => Style::new().fg(Color::DarkGray),
        _ => Style::new(),
    }
}

/// The style of a CPU% (of one core).
pub fn cpu(pct: f64) -> Style {
    if pct >= CPU_HOT {
        Style::new().fg(Color::Red).add_modifier(Modifier::BOLD)
    } else if pct >= CPU_BUSY {
        Style::new().fg(Color::Magenta)
    } else {
        Style::new()
    }
}

/// The style of a resident memory of `bytes` on a machine of `total` bytes (0: unknown).
pub fn mem(bytes: u64, total: u64) -> Style {
    if total == 0 {
        return Style::new();
    }
    let share = bytes as f64 / total as f64;
    if share >= MEM_HUGE {
        Style::new().fg(Color::Red).add_modifier(Modifier::BOLD)
    } else if share >= MEM_LARGE {
        Style::new().fg(Color::Magenta)
    } else {
        Style::new()
    }
}

/// The meters' parts.
pub const NICE: Style = Style::new().fg(Color::Blue);
pub const USER: Style = Style::new().fg(Color::Green);
pub const SYSTEM: Style = Style::new().fg(Color::Red);
pub const MEM_USED: Style = Style::new().fg(Color::Green);
pub const SWAP_USED: Style = Style::new().fg(Color::Red);
pub const LABEL: Style = Style::new().add_modifier(Modifier::BOLD);
pub const DIM: Style = Style::new().fg(Color::DarkGray);
pub const ALERT: Style = Style::new().fg(Color::Red).add_modifier(Modifier::BOLD);
pub const SPARK_CPU: Style = Style::new().fg(Color::Green);
pub const SPARK_MEM: Style = Style::new().fg(Color::Blue);
/// Text that matches the filter or the search: black on yellow, a background of its own (as
/// the header's), so it reads on light and dark terminals; reverse video under `NO_COLOR`.
pub const MATCH: Style = Style::new()
    .fg(Color::Black)
    .bg(Color::Yellow)
    .add_modifier(Modifier::BOLD);
/// A key named in the help, a prompt's cursor, a notice of the log pane.
pub const KEY: Style = Style::new().fg(Color::Blue).add_modifier(Modifier::BOLD);

/// Applies `NO_COLOR` to a drawn frame (see the module's header); nothing otherwise.
pub fn finish(buf: &mut Buffer) {
    if no_color() {
        decolour(buf);
    }
}

/// Every cell's colours reset; a cell that had a background colour reversed instead.
pub fn decolour(buf: &mut Buffer) {
    for cell in buf.content.iter_mut() {
        if !matches!(cell.bg, Color::Reset) {
            cell.modifier.insert(Modifier::REVERSED);
        }
        cell.fg = Color::Reset;
        cell.bg = Color::Reset;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::layout::Rect;

    #[test]
    fn thresholds() {
        assert_eq!(cpu(10.0), Style::new());
        assert_eq!(cpu(CPU_BUSY).fg, Some(Color::Magenta));
        assert_eq!(cpu(150.0).fg, Some(Color::Red));
        assert_eq!(mem(1, 0), Style::new());
        assert_eq!(mem(30, 1000).fg, Some(Color::Magenta));
        assert_eq!(mem(100, 1000).fg, Some(Color::Red));
        assert_eq!(state("Z").fg, Some(Color::Magenta));
        assert_eq!(state("S"), Style::new());
    }

    #[test]
    fn without_colour_backgrounds_become_reverse_video() {
        let mut b = Buffer::empty(Rect::new(0, 0, 3, 1));
        b[(0, 0)].set_style(Style::new().fg(Color::Black).bg(Color::Green));
        b[(1, 0)].set_style(Style::new().fg(Color::Red).add_modifier(Modifier::BOLD));
        decolour(&mut b);
        for c in b.content.iter() {
            assert_eq!((c.fg, c.bg), (Color::Reset, Color::Reset));
        }
        assert!(b[(0, 0)].modifier.contains(Modifier::REVERSED));
        assert!(b[(1, 0)].modifier.contains(Modifier::BOLD));
        assert!(!b[(1, 0)].modifier.contains(Modifier::REVERSED));
    }
}
