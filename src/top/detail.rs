//! A process's details (`Enter`, `d`): its command line, executable, working directory,
//! environment's size, open files, limits, cgroup and threads, read once from `/proc` when
//! asked (nothing is read while the view is closed), after checking that the pid still names
//! the same process. Owns [`Detail`] and [`read`].
//!
//! Uses [`crate::top::model`] and the crate's escaping.

use std::io;

use crate::base::sanitize::{escape, escape_args};
use crate::process::identity::Identity;
use crate::top::model::Node;

/// What the detail view shows of one process: its title and labelled lines, escaped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Detail {
    pub id: Identity,
    /// `4242 (sleep)`.
    pub title: String,
    /// Each line's label and value.
    pub lines: Vec<(&'static str, String)>,
}

/// The limits the view shows, by their name in `/proc/PID/limits`, with a shorter one.
const LIMITS: [(&str, &str); 4] = [
    ("Max open files", "max open files"),
    ("Max processes", "max processes"),
    ("Max core file size", "max core file"),
    ("Max stack size", "max stack"),
];

/// The details of `n`'s process, read now from `/proc`; on a helper's row with no process, or
/// a process gone (its pid free, or another process's now), what the model knows.
pub fn read(n: &Node) -> Detail {
    let id = n.info.id;
    let mut lines = Vec::new();
    if let Some(s) = &n.info.supervision
        && let Some(h) = &s.helper
    {
        let state = s.helper_state.as_ref().map_or(String::new(), |h| {
            format!(
                ", {}{}",
                h.state,
                h.detail.as_ref().map_or(String::new(), |d| format!(" {d}"))
            )
        });
        lines.push(("helper", escape(format!("{h}{state}").as_bytes())));
        if let Some(r) = s.restarts {
            lines.push(("restarts", r.to_string()));
        }
        if let Some(e) = &s.last_exit {
            lines.push(("last exit", escape(e.as_bytes())));
        }
    }
    if n.vacant() {
        return Detail {
            id,
            title: format!("helper {}", escape(&n.info.comm)),
            lines,
        };
    }
    let title = format!("{} ({})", id.pid, escape(&n.info.comm));
    if Identity::of(id.pid).ok() != Some(id) {
        lines.push((
            "process",
            "gone: its pid is free or another process's".into(),
        ));
        return Detail { id, title, lines };
    }
    let proc = |f: &str| format!("/proc/{}/{f}", id.pid);
    let link =
        |f: &str| std::fs::read_link(proc(f)).map(|p| escape(p.as_os_str().as_encoded_bytes()));
    lines.push(("command", escape_args(&n.info.cmdline)));
    lines.push(("executable", or_why(link("exe"))));
    lines.push(("cwd", or_why(link("cwd"))));
    lines.push(("environment", or_why(environment(&proc("environ")))));
    let open_files = std::fs::read_dir(proc("fd")).map(|d| d.count().to_string());
    lines.push(("open files", or_why(open_files)));
    lines.push(("threads", or_why(status_field(&proc("status"), "Threads:"))));
    lines.push(("cgroup", or_why(cgroup(&proc("cgroup")))));
    match std::fs::read_to_string(proc("limits")) {
        Ok(text) => lines.extend(limits(&text)),
        Err(e) => lines.push(("limits", why(&e))),
    }
    Detail { id, title, lines }
}

/// A value read, or why it could not be.
fn or_why(r: io::Result<String>) -> String {
    r.unwrap_or_else(|e| why(&e))
}

/// Why a file could not be read, in words: `- (not readable: permission denied)`.
fn why(e: &io::Error) -> String {
    let text = e.to_string();
    let text = text
        .split(" (os error")
        .next()
        .unwrap_or_default()
        .to_lowercase();
    format!("- (not readable: {text})")
}

/// `23 variables, 1.9K` from `environ`.
fn environment(path: &str) -> io::Result<String> {
    let env = std::fs::read(path)?;
    let count = env.split(|b| *b == 0).filter(|v| !v.is_empty()).count();
    Ok(format!(
        "{count} variable{}, {}",
        if count == 1 { "" } else { "s" },
        crate::top::model::fmt_bytes(env.len() as u64)
    ))
}

/// The value of `field` in `status` (`Threads:`).
fn status_field(path: &str, field: &str) -> io::Result<String> {
    let text = std::fs::read_to_string(path)?;
    Ok(text
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .map(|v| escape(v.trim().as_bytes()))
        .unwrap_or_else(|| "-".into()))
}

/// The cgroup v2 path, else every hierarchy's line.
fn cgroup(path: &str) -> io::Result<String> {
    let text = std::fs::read_to_string(path)?;
    let v2 = text.lines().find_map(|l| l.strip_prefix("0::"));
    Ok(escape(v2.unwrap_or(text.trim()).as_bytes()))
}

/// The limits of [`LIMITS`] in `limits`'s text: `soft / hard units`.
fn limits(text: &str) -> Vec<(&'static str, String)> {
    LIMITS
        .iter()
        .filter_map(|(name, short)| {
            let rest = text.lines().find_map(|l| l.strip_prefix(name))?;
            let mut w = rest.split_whitespace();
            let (soft, hard) = (w.next()?, w.next()?);
            let units = w.next().map_or(String::new(), |u| format!(" {u}"));
            Some((*short, escape(format!("{soft} / {hard}{units}").as_bytes())))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The limits shown are read from their lines, soft then hard, with their units.
    #[test]
    fn limits_are_read_from_their_lines() {
        let text = "Limit                     Soft Limit   Hard Limit   Units     \n\
                    Max stack size            8388608      unlimited    bytes     \n\
                    Max core file size        0            unlimited    bytes     \n\
                    Max processes             63432        63432        processes \n\
                    Max open files            1024         524288       files     \n";
        let got = limits(text);
        assert_eq!(
            got[0],
            ("max open files", "1024 / 524288 files".to_string())
        );
        assert_eq!(
            got[3],
            ("max stack", "8388608 / unlimited bytes".to_string())
        );
        assert_eq!(got.len(), 4);
    }
}
