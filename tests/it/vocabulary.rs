//! One vocabulary beneath every command, checked on the sources: the layers `src/lib.rs` lists
//! are the layers the code imports (each module uses only those listed above it), and the
//! things foster has one of (the pidfd opener, the `/proc` walker, the reader of a pidfd's
//! `fdinfo`) are not written a second time in `src/` or `tests/`. A check names the file and
//! line that breaks it.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The lines of `text` that are code: comments (`//`, `///`, `//!`) left out, and the unit
/// tests (from `#[cfg(test)]` followed by `mod tests`) cut off.
fn code_lines(text: &str) -> Vec<(usize, &str)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let t = l.trim_start();
        if t == "#[cfg(test)]"
            && lines
                .get(i + 1)
                .is_some_and(|n| n.trim_start().starts_with("mod tests"))
        {
            break;
        }
        if t.starts_with("//") {
            continue;
        }
        let code = match l.find("//") {
            // A `//` inside a string ("http://") is rare in this code base; a comment after
            // code is cut.
            Some(at) if !l[..at].contains('"') => &l[..at],
            _ => l,
        };
        out.push((i + 1, code));
    }
    out
}

/// The subsystems `src/lib.rs` lists, lowest first.
fn subsystems() -> Vec<String> {
    let lib = std::fs::read_to_string(root().join("src/lib.rs")).unwrap();
    listed(&lib)
}

/// The names a module header lists as `//! - [`name`]: ...` (several on one line allowed).
fn listed(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some(item) = line.strip_prefix("//! - ") else {
            continue;
        };
        let head = item.split("]:").next().unwrap_or("");
        for part in head.split(',') {
            let name = part
                .trim()
                .trim_matches(|c| c == '[' || c == ']' || c == '`');
            if !name.is_empty() && name.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
                out.push(name.to_string());
            }
        }
    }
    out
}

/// The modules a file declares (`mod x;`, `pub mod x;`), test modules aside.
fn declared(text: &str) -> Vec<String> {
    code_lines(text)
        .into_iter()
        .filter_map(|(_, l)| {
            let l = l.trim();
            let l = l.strip_prefix("pub ").unwrap_or(l);
            l.strip_prefix("mod ")?
                .strip_suffix(';')
                .map(str::to_string)
        })
        .collect()
}

/// A file of the library and its module path.
type ModuleFile = (Vec<String>, PathBuf);

/// Every file of the library with its module path (`src/gate/spawner.rs` is `gate::spawner`,
/// `src/gate/mod.rs` is `gate`); `main.rs` is not part of the library.
fn module_files() -> Vec<ModuleFile> {
    let src = root().join("src");
    let mut out = Vec::new();
    for file in rust_files(&src) {
        let rel = file
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if rel == "main.rs" || rel.starts_with("bin/") {
            continue;
        }
        let rel = rel.strip_suffix(".rs").unwrap();
        let mut path: Vec<String> = rel.split('/').map(str::to_string).collect();
        if matches!(path.last().map(String::as_str), Some("mod" | "lib")) {
            path.pop();
        }
        out.push((path, file));
    }
    out
}

/// The paths a line names from the crate's root, groups expanded: `crate::{a::B, c}` gives
/// `a::B` and `c`; `super::x` and `self::x` are made absolute from `here`, the module of the
/// file (its parent's for `super`).
fn paths_on(line: &str, here: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for (prefix, base) in [
        ("crate::", Vec::new()),
        ("super::", here[..here.len().saturating_sub(1)].to_vec()),
        ("self::", here.to_vec()),
    ] {
        let mut rest = line;
        while let Some(at) = rest.find(prefix) {
            let before = rest[..at].chars().last();
            rest = &rest[at + prefix.len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':' || c == '$') {
                continue;
            }
            expand(rest, &base, &mut out);
        }
    }
    out
}

/// Expands the path text at the start of `text` (after a `::`) onto `base`.
fn expand(text: &str, base: &[String], out: &mut Vec<Vec<String>>) {
    let mut path = base.to_vec();
    let mut rest = text;
    loop {
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let end = group
                .char_indices()
                .find(|&(_, c)| {
                    depth += match c {
                        '{' => 1,
                        '}' => -1,
                        _ => 0,
                    };
                    depth == 0
                })
                .map_or(group.len(), |(i, _)| i);
            let mut start = 0;
            let mut d = 0;
            let body = &group[..end];
            for (i, c) in body.char_indices().chain([(body.len(), ',')]) {
                match c {
                    '{' => d += 1,
                    '}' => d -= 1,
                    ',' if d == 0 => {
                        expand(body[start..i].trim(), &path, out);
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            return;
        }
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() || name == "self" {
            break;
        }
        path.push(name.clone());
        rest = &rest[name.len()..];
        match rest.strip_prefix("::") {
            Some(r) => rest = r,
            None => break,
        }
    }
    out.push(path);
}

/// The names a module file re-exports from a child (`pub use self::child::{A, B}`,
/// `pub use child::*`): name (or `*`) to child.
fn reexports(text: &str) -> Vec<(String, String)> {
    let joined: String = code_lines(text)
        .iter()
        .map(|(_, l)| *l)
        .collect::<Vec<_>>()
        .join(" ");
    let mut out = Vec::new();
    for stmt in joined.split(';') {
        let Some(rest) = stmt.trim().strip_prefix("pub use ") else {
            continue;
        };
        let rest = rest.strip_prefix("self::").unwrap_or(rest);
        let Some((child, names)) = rest.split_once("::") else {
            continue;
        };
        for name in names.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '*')) {
            if !name.is_empty() {
                out.push((name.to_string(), child.trim().to_string()));
            }
        }
    }
    out
}

/// The file a path names: its longest prefix that is a module, followed through that module's
/// re-exports when the next name comes from a child.
fn resolve(path: &[String], files: &[(Vec<String>, PathBuf)], texts: &[String]) -> Option<usize> {
    let module = (0..=path.len()).rev().find_map(|n| {
        files
            .iter()
            .position(|(p, _)| p[..] == path[..n])
            .map(|i| (i, n))
    })?;
    let (at, n) = module;
    let Some(next) = path.get(n) else {
        return Some(at);
    };
    let Some(child) = reexports(&texts[at])
        .into_iter()
        .find(|(name, _)| name == next || name == "*")
        .map(|(_, child)| child)
    else {
        return Some(at);
    };
    let mut full = path[..n].to_vec();
    full.push(child);
    files.iter().position(|(p, _)| *p == full).or(Some(at))
}

/// Which file uses which: an arrow for every path a file's code names (re-exports and module
/// declarations aside, which are not uses).
fn file_arrows() -> (Vec<ModuleFile>, Vec<Vec<(usize, usize)>>) {
    let files = module_files();
    let texts: Vec<String> = files
        .iter()
        .map(|(_, f)| std::fs::read_to_string(f).unwrap())
        .collect();
    let mut arrows = vec![Vec::new(); files.len()];
    for (i, (here, _)) in files.iter().enumerate() {
        for (n, line) in code_lines(&texts[i]) {
            if line.trim_start().starts_with("pub use ") {
                continue;
            }
            // `super` is the parent of the file's module, whether it is `x.rs` or `x/mod.rs`.
            let own = here.clone();
            for path in paths_on(line, &own) {
                let path: Vec<String> = path.into_iter().filter(|s| !s.is_empty()).collect();
                if let Some(j) = resolve(&path, &files, &texts).filter(|&j| j != i) {
                    arrows[i].push((j, n));
                }
            }
        }
    }
    (files, arrows)
}

/// The subsystem of a module path: its first name.
fn subsystem_of(path: &[String]) -> &str {
    path.first().map_or("", String::as_str)
}

/// Each subsystem uses only the subsystems `src/lib.rs` lists above it.
#[test]
fn each_subsystem_uses_only_those_lib_rs_lists_before_it() {
    let order = subsystems();
    let lib = std::fs::read_to_string(root().join("src/lib.rs")).unwrap();
    for m in declared(&lib) {
        assert!(
            order.contains(&m),
            "src/lib.rs: pub mod {m} is not in the list of subsystems"
        );
    }
    assert!(
        order.len() <= 10,
        "src/ has {} subsystems; at most ten",
        order.len()
    );
    let rank = |m: &str| order.iter().position(|n| n == m);
    let (files, arrows) = file_arrows();
    let mut wrong = Vec::new();
    for (i, out) in arrows.iter().enumerate() {
        let (from, to_of) = (subsystem_of(&files[i].0), |j: usize| {
            subsystem_of(&files[j].0)
        });
        for &(j, line) in out {
            if let (Some(a), Some(b)) = (rank(from), rank(to_of(j))) {
                if b > a {
                    wrong.push(format!(
                        "{}:{line}: {from} uses {}, listed after it in src/lib.rs",
                        files[i].1.strip_prefix(root()).unwrap().display(),
                        to_of(j)
                    ));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Each folder's `mod.rs` lists every module it declares in its header, so the header that
/// says what the folder holds stays true.
#[test]
fn each_folder_header_lists_its_modules() {
    let mut missing = Vec::new();
    for (path, file) in module_files() {
        if path.len() != 1 || !file.ends_with("mod.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let header: String = text
            .lines()
            .take_while(|l| l.starts_with("//!"))
            .collect::<Vec<_>>()
            .join("\n");
        for m in declared(&text) {
            let named = [format!("`{m}`"), format!("`{m}.rs`"), format!("`{m}/`")];
            if !named.iter().any(|n| header.contains(n.as_str())) {
                missing.push(format!("src/{}/mod.rs: {m} is not in its header", path[0]));
            }
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

/// No circle between files: if a file uses another, that one does not use it back, directly
/// or through others.
#[test]
fn no_circle_between_files() {
    let (files, arrows) = file_arrows();
    let name = |i: usize| {
        files[i]
            .1
            .strip_prefix(root())
            .unwrap()
            .display()
            .to_string()
    };
    let mut circles = Vec::new();
    // 0 unvisited, 1 on the current path, 2 done.
    let mut mark = vec![0u8; files.len()];
    fn visit(
        i: usize,
        arrows: &[Vec<(usize, usize)>],
        mark: &mut [u8],
        path: &mut Vec<usize>,
        found: &mut Vec<Vec<usize>>,
    ) {
        mark[i] = 1;
        path.push(i);
        for &(j, _) in &arrows[i] {
            if mark[j] == 1 {
                let from = path.iter().position(|&p| p == j).unwrap();
                found.push(path[from..].to_vec());
            } else if mark[j] == 0 {
                visit(j, arrows, mark, path, found);
            }
        }
        path.pop();
        mark[i] = 2;
    }
    let mut found = Vec::new();
    for i in 0..files.len() {
        if mark[i] == 0 {
            visit(i, &arrows, &mut mark, &mut Vec::new(), &mut found);
        }
    }
    for c in found {
        let names: Vec<String> = c.iter().map(|&i| name(i)).collect();
        let line = format!("{} -> {}", names.join(" -> "), names[0]);
        if !circles.contains(&line) {
            circles.push(line);
        }
    }
    assert!(
        circles.is_empty(),
        "circles between files:\n{}",
        circles.join("\n")
    );
}

/// The files of `src/` and `tests/` whose code (comments aside) contains `needle`, with the
/// line, except those under `allowed` (paths relative to the crate's root).
fn occurrences(needle: &str, allowed: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    for dir in ["src", "tests"] {
        for file in rust_files(&root().join(dir)) {
            let rel = file
                .strip_prefix(root())
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if allowed.iter().any(|a| rel.starts_with(a)) || rel == "tests/it/vocabulary.rs" {
                continue;
            }
            let text = std::fs::read_to_string(&file).unwrap();
            for (n, code) in code_lines(&text) {
                if code.contains(needle) {
                    found.push(format!("{rel}:{n}: {}", code.trim()));
                }
            }
        }
    }
    found
}

/// One pidfd opener, `identity::pidfd_open`: the raw system call nowhere else, tests
/// included (`tests/common/fd.rs` and `tests/docs.rs` made it themselves).
#[test]
fn one_pidfd_opener() {
    let found = occurrences("SYS_pidfd_open", &["src/process/identity.rs"]);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// One `/proc` walker, `tree::Scanner` (and `tree::children_of` / `descendants_of` on it): no
/// other listing of `/proc` in `src/` or `tests/` (a process's own `fd` or `task` directory is
/// not a walk of the processes).
#[test]
fn one_proc_walker() {
    let mut found = occurrences("read_dir(\"/proc\")", &["src/process/tree/"]);
    found.extend(occurrences("read_dir(\"/proc/\")", &["src/process/tree/"]));
    found.extend(occurrences("opendir", &["src/process/tree/"]));
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// One reading of a pidfd's `fdinfo`, `identity::PidfdInfo` (its `Pid:` and `NSpid:` lines,
/// the latter by `procstat::parse_nspid`, the one `NSpid` parser): the gate, the scanner and
/// two tests each read one of its lines their own way.
#[test]
fn one_reader_of_a_pidfds_fdinfo() {
    let mut found = occurrences(
        "Pid:\"",
        &["src/process/identity.rs", "src/process/procstat.rs"],
    );
    found.extend(occurrences("self/fdinfo/", &["src/process/identity.rs"]));
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// One signal parser, `signal::Sig` (names with or without `SIG`, numbers, `RTMIN+N`,
/// `RTMAX-N`): the real-time forms are read nowhere else (policy, reaper and control had
/// parsers of their own before).
#[test]
fn one_signal_parser() {
    let mut found = occurrences("starts_with(\"RTMIN", &["src/process/signal.rs"]);
    found.extend(occurrences(
        "starts_with(\"RTMAX",
        &["src/process/signal.rs"],
    ));
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// One duration grammar, `duration::parse` and its writer: their units are matched nowhere
/// else (exec, init, policy text and the configuration each had a parser before).
#[test]
fn one_duration_grammar() {
    let mut found = occurrences("\"ms\" =>", &["src/base/duration.rs"]);
    found.extend(occurrences(
        "strip_suffix(\"ms\")",
        &["src/base/duration.rs"],
    ));
    found.extend(occurrences(
        "Duration::from_secs_f64(",
        &["src/base/duration.rs"],
    ));
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// Fails, naming each file and line, when any of `needles` occurs in the code of `src/` or
/// `tests/` outside `allowed`.
fn only_in(allowed: &[&str], needles: &[&str]) {
    let found: Vec<String> = needles
        .iter()
        .flat_map(|n| occurrences(n, allowed))
        .collect();
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// One poll, `sys::poll` / `sys::poll_until` over `sys::PollFd`: no hand-built `pollfd` and
/// no raw `poll` call elsewhere (17 were written by hand, each with its own `EINTR` loop,
/// several restarting the full timeout after a signal).
#[test]
fn one_poll() {
    only_in(
        &["src/base/sys.rs"],
        &["libc::pollfd", "libc::poll(", "nix::poll"],
    );
}

/// One signalfd, `signal::SignalFd` over a `SigBits` (which holds real-time signals, where
/// nix's `SigSet` cannot): four constructors (nix's type in three places, raw calls in two,
/// an own type in `init`) before.
#[test]
fn one_signalfd() {
    only_in(
        &["src/process/signal.rs"],
        &[
            "libc::signalfd(",
            "signalfd::",
            "SfdFlags",
            "struct SignalFd",
        ],
    );
}

/// One reading of `errno`, `sys::errno`: three helpers of their own and raw
/// `__errno_location` reads in the tests before.
#[test]
fn one_errno() {
    only_in(
        &["src/base/sys.rs"],
        &[
            "__errno_location",
            "fn errno(",
            "fn last_errno(",
            "last_os_error().raw_os_error()",
        ],
    );
}

/// One reader of the signal sets of `/proc/<pid>/status` (`SigBlk`, `SigIgn`, `SigCgt`),
/// `signal::SigBits::from_status` and `from_hex`: six hexadecimal parsers of their own before,
/// in the qualification cases and the tests.
#[test]
fn one_signal_set_reader() {
    only_in(&["src/process/signal.rs"], &["u64::from_str_radix("]);
}

/// One list of the control requests, the `Request` enum: the names and each request's fields
/// are read from it (`protocol::request_names`, `protocol::request_fields`), not written again
/// beside it (a `REQUESTS` list and a table of allowed fields had to follow every change).
#[test]
fn one_request_list() {
    // The supervisor names a request in its replies; the control module never lists them.
    let others = ["src/supervision/supervisor/", "tests/"];
    only_in(&others, &["\"reopen_logs\"", "\"backlog\", \"follow\""]);
}

/// One `ctl` command enum, `control::client::CtlCommand`, which clap reads directly: the
/// command line had a second one of the same eleven variants, mapped by hand onto it.
#[test]
fn one_ctl_command_enum() {
    only_in(
        &["src/supervision/control/client/command.rs"],
        &["enum CtlCommand"],
    );
}

/// Typed errors where `String` stood: init and contain return `thiserror` types that keep
/// their cause (`InitError`, `PdeathError`, `RewriteError`, `ContainError`).
#[test]
fn no_string_errors_in_init_and_contain() {
    let found: Vec<String> = occurrences(", String>", &[])
        .into_iter()
        .filter(|f| f.starts_with("src/init/") || f.starts_with("src/supervision/contain.rs"))
        .collect();
    assert!(found.is_empty(), "{}", found.join("\n"));
}
