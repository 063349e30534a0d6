//! `foster ctl status` for people: the supervisor, its helpers, then the tree.
//!
//! Owns [`render_status`] (roles, generations, policies, expected and actual parents, command
//! lines cut to a terminal's width) and [`uptime_text`]. Whatever the server sent goes through
//! [`crate::base::sanitize::escape`]. Uses the protocol's types only.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use crate::base::sanitize::escape;
use crate::process::identity::Identity;
use crate::supervision::control::protocol::{
    HelperInfo, ProcessInfo, Role, Status, SupervisorInfo,
};

/// The status for people: the supervisor, its helpers, then the tree. With `width` (a
/// terminal's), each process's command line is cut so that its line fits, when it can (the
/// command keeps at least [`MIN_COMMAND`] columns); without it nothing is cut.
pub fn render_status(s: &Status, width: Option<usize>) -> String {
    let mut out = String::new();
    supervisor_lines(&mut out, &s.supervisor);
    let _ = writeln!(out, "\nhelpers:");
    let w = s
        .helpers
        .iter()
        .map(|h| h.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    for h in &s.helpers {
        let mut line = helper_line(h, w, &s.processes);
        // Its process's age: start times are ticks since boot, as `now_ticks` is.
        if let Some(id) = h.identity
            && s.hz > 0
        {
            let secs = s.now_ticks.saturating_sub(id.start_time) / s.hz;
            let _ = write!(line, "  up {}", uptime_text(secs));
        }
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(out, "\ntree:");
    let sup = &s.supervisor;
    let by_pid: HashMap<i32, &ProcessInfo> = s.processes.iter().map(|p| (p.pid, p)).collect();
    let mut kids: HashMap<i32, Vec<&ProcessInfo>> = HashMap::new();
    let mut roots = Vec::new();
    for p in &s.processes {
        match p.parent.filter(|q| by_pid.contains_key(&q.pid)) {
            Some(q) if p.pid != sup.identity.pid => kids.entry(q.pid).or_default().push(p),
            _ => roots.push(p),
        }
    }
    let live: HashSet<Identity> = s
        .processes
        .iter()
        .map(ProcessInfo::identity)
        .chain([sup.identity])
        .collect();
    for r in roots {
        tree_lines(&mut out, r, (&kids, &live), "", "", width);
    }
    out
}

/// How long a process has run, in its two largest units: `42s`, `3m05s`, `2h07m`, `4d03h`.
pub fn uptime_text(secs: u64) -> String {
    let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, m) => format!("{m}m{s:02}s"),
        (0, h, m) => format!("{h}h{m:02}m"),
        (d, h, _) => format!("{d}d{h:02}h"),
    }
}

/// The first lines of `ctl status`: the supervisor, its socket, its metrics' address.
fn supervisor_lines(out: &mut String, sup: &SupervisorInfo) {
    let _ = writeln!(
        out,
        "supervisor {} ({}){}{}",
        sup.identity.pid,
        if sup.config.is_empty() {
            "configuration from standard input".to_string()
        } else {
            escape(sup.config.as_bytes())
        },
        if sup.contained { ", contained" } else { "" },
        if sup.shutting_down {
            ", shutting down"
        } else {
            ""
        }
    );
    let _ = writeln!(out, "socket {}", escape(sup.socket.as_bytes()));
    if let Some(v) = &sup.version {
        let _ = writeln!(out, "version foster {}", escape(v.as_bytes()));
    }
    if let Some(addr) = &sup.metrics {
        let _ = writeln!(out, "metrics http://{}/metrics", escape(addr.as_bytes()));
    }
}

/// One helper's line of `ctl status`, its name padded to `w` columns.
fn helper_line(h: &HelperInfo, w: usize, processes: &[ProcessInfo]) -> String {
    let mut line = format!(
        "  {:w$}  {:9} pid {:>7}  launched {}x  restart {}",
        escape(h.name.as_bytes()),
        h.state.text(),
        id_text(h.identity),
        h.launches,
        escape(h.restart.as_bytes())
    );
    if h.restarts_in_a_row > 0 {
        let _ = write!(line, " ({} in a row)", h.restarts_in_a_row);
    }
    if let Some(e) = &h.last_exit {
        let _ = write!(line, "  last: {e}");
    }
    if let Some(ms) = h.next_launch_in_ms {
        let _ = write!(line, "  next launch in {}", ms_text(ms));
    }
    if let Some(d) = &h.detail {
        let _ = write!(line, "  {} {}", h.state.text(), escape(d.as_bytes()));
    }
    if h.health_failures > 0 {
        let _ = write!(line, "  health: {} failed in a row", h.health_failures);
    }
    if let Some(t) = &h.status_text {
        let _ = write!(line, "  status: {}", escape(t.as_bytes()));
    }
    // Its state is foster's; that the kernel holds its process stopped is said beside it.
    if let Some(id) = h.identity
        && processes
            .iter()
            .any(|p| p.pid == id.pid && p.start_time == id.start_time && p.state == "T")
    {
        let _ = write!(
            line,
            "  its process is stopped (SIGSTOP or SIGTSTP): it does nothing until SIGCONT"
        );
    }
    if let Some(e) = h.errno {
        let _ = write!(line, " (errno {e})");
    }
    // MAINPID=, when it names another process than the one foster launched.
    if let Some(p) = h
        .main_pid
        .filter(|&p| h.identity.is_none_or(|i| i.pid != p))
    {
        let _ = write!(line, "  main pid {p}");
    }
    line
}

fn id_text(id: Option<Identity>) -> String {
    id.map_or_else(|| "-".to_string(), |i| i.pid.to_string())
}

fn role_text(r: Role) -> &'static str {
    match r {
        Role::Supervisor => "supervisor",
        Role::Helper => "helper",
        Role::Descendant => "descendant",
        Role::AdoptedOrphan => "adopted orphan",
    }
}

fn ms_text(ms: u64) -> String {
    if ms >= 1000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else {
        format!("{ms}ms")
    }
}

/// The parent a process should have, as `ctl status` names it: its pid while it lives; once it
/// has ended, its identity marked gone (`?` for a pid never seen from the caller's PID
/// namespace, which the translation reports as 0).
fn expected_text(e: Identity, live: &HashSet<Identity>) -> String {
    if live.contains(&e) {
        e.pid.to_string()
    } else if e.pid > 0 {
        format!("{e}, gone")
    } else {
        format!("?:{}, gone", e.start_time)
    }
}

/// The fewest columns a command line is cut to in `ctl status`, however narrow the terminal.
const MIN_COMMAND: usize = 12;

/// The tree's lines from `p` down; `kids` by parent pid, `live`: the identities of the
/// snapshot's processes and of the supervisor.
fn tree_lines(
    out: &mut String,
    p: &ProcessInfo,
    (kids, live): (&HashMap<i32, Vec<&ProcessInfo>>, &HashSet<Identity>),
    lead: &str,
    rest: &str,
    width: Option<usize>,
) {
    let name = if p.cmdline.is_empty() {
        escape(&p.comm.0)
    } else {
        let args: Vec<&[u8]> = p.cmdline.iter().map(|a| a.0.as_slice()).collect();
        crate::base::sanitize::escape_args(&args)
    };
    let head = format!("{lead}{} {} ", p.pid, escape(p.state.as_bytes()));
    let line = tree_notes(p, live);
    let name = match width {
        Some(w) => {
            let room = w.saturating_sub(text_width(&head) + text_width(&line));
            crate::base::sanitize::fit(&name, room.max(MIN_COMMAND))
        }
        None => name,
    };
    let _ = writeln!(out, "{head}{name}{line}");
    let children = kids.get(&p.pid).map(Vec::as_slice).unwrap_or(&[]);
    for (i, c) in children.iter().enumerate() {
        let last = i + 1 == children.len();
        let (l, r) = if last {
            ("└─ ", "   ")
        } else {
            ("├─ ", "│  ")
        };
        tree_lines(
            out,
            c,
            (kids, live),
            &format!("{rest}{l}"),
            &format!("{rest}{r}"),
            width,
        );
    }
}

/// What follows a process's command line in the tree: its role, helper, generation and policy
/// in brackets, its parent when not the expected one, its adoption.
fn tree_notes(p: &ProcessInfo, live: &HashSet<Identity>) -> String {
    let mut tags = vec![role_text(p.role).to_string()];
    if let Some(h) = &p.helper {
        tags.push(format!("of {}", escape(h.as_bytes())));
    }
    tags.push(format!("gen {}", p.generation));
    if let Some(pol) = &p.policy {
        tags.push(escape(pol.as_bytes()));
    }
    let mut line = format!(" [{}]", tags.join(" · "));
    match (p.expected_parent, p.parent) {
        (Some(e), Some(a)) if e != a => {
            let _ = write!(
                line,
                "  parent {} (expected {})",
                a.pid,
                expected_text(e, live)
            );
        }
        (Some(e), None) => {
            let _ = write!(
                line,
                "  parent {} (expected {})",
                p.ppid,
                expected_text(e, live)
            );
        }
        _ => {}
    }
    if let Some(a) = &p.adoption {
        let class = serde_json::to_value(a.classification)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        let _ = write!(
            line,
            "  adopted by {}: {}",
            a.to.pid,
            class.replace('_', " ")
        );
    }
    line
}

fn text_width(s: &str) -> usize {
    unicode_width::UnicodeWidthStr::width(s)
}

#[cfg(test)]
mod tests {
    use super::render_status;

    /// A snapshot of a supervisor (4700) and an orphan (4755) whose expected parent is
    /// `expected`.
    fn orphan_status(expected: &str) -> super::Status {
        let doc = format!(
            r#"{{"supervisor":{{"identity":{{"pid":4700,"start_time":912345}},"config":"a.toml",
              "socket":"a.sock","contained":false,"shutting_down":false,"started_ms":0}},
            "helpers":[],"now_ticks":913000,"hz":100,"processes":[
            {{"pid":4700,"start_time":912345,"role":"supervisor","helper":null,"generation":0,
              "policy":null,"expected_parent":null,"parent":{{"pid":4650,"start_time":912000}},
              "ppid":4650,"adoption":null,"state":"S","comm":"foster","cmdline":["foster"],
              "uid":0,"threads":1,"rss_bytes":0,"cpu_ticks":0}},
            {{"pid":4712,"start_time":912360,"role":"helper","helper":"h","generation":1,
              "policy":null,"expected_parent":{{"pid":4700,"start_time":912345}},
              "parent":{{"pid":4700,"start_time":912345}},"ppid":4700,"adoption":null,
              "state":"S","comm":"sh","cmdline":["sh"],"uid":0,"threads":1,"rss_bytes":0,
              "cpu_ticks":0}},
            {{"pid":4755,"start_time":912410,"role":"adopted_orphan","helper":"h",
              "generation":2,"policy":null,"expected_parent":{expected},
              "parent":{{"pid":4700,"start_time":912345}},"ppid":4700,"adoption":null,
              "state":"S","comm":"sleep","cmdline":["sleep","300"],"uid":0,"threads":1,
              "rss_bytes":0,"cpu_ticks":0}}]}}"#
        );
        serde_json::from_str(&doc).unwrap()
    }

    fn orphan_line(expected: &str) -> String {
        let text = render_status(&orphan_status(expected), None);
        text.lines()
            .find(|l| l.contains("sleep 300"))
            .unwrap_or_else(|| panic!("no orphan in {text}"))
            .to_string()
    }

    #[test]
    fn an_expected_parent_that_ended_is_named_gone_never_0() {
        // Alive: its pid.
        let l = orphan_line(r#"{"pid":4712,"start_time":912360}"#);
        assert!(l.contains("parent 4700 (expected 4712)"), "{l}");
        // Ended (its pid was taken by another process since, or nobody): its identity, gone.
        let l = orphan_line(r#"{"pid":4712,"start_time":912355}"#);
        assert!(l.contains("(expected 4712:912355, gone)"), "{l}");
        // Ended before the caller could see it across PID namespaces: the translation's 0
        // is not shown as a pid.
        let l = orphan_line(r#"{"pid":0,"start_time":912350}"#);
        assert!(l.contains("(expected ?:912350, gone)"), "{l}");
        assert!(!l.contains("expected 0"), "{l}");
    }
}
