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

/// The module names `src/lib.rs` lists as its layers, lowest first; modules listed on one
/// line (`supervisor`, `contain`) share a rank.
fn layers() -> Vec<(String, usize)> {
    let lib = std::fs::read_to_string(root().join("src/lib.rs")).unwrap();
    let mut out = Vec::new();
    let mut rank = 0;
    for line in lib.lines() {
        let Some(item) = line.strip_prefix("//! - ") else {
            continue;
        };
        // The names before the colon: "[`supervisor`], [`contain`]: ...".
        let head = item.split(':').next().unwrap_or("");
        let mut any = false;
        for part in head.split(',') {
            let name = part.trim().trim_start_matches("[`").trim_end_matches("`]");
            if !name.is_empty() && name.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
                out.push((name.to_string(), rank));
                any = true;
            }
        }
        if any {
            rank += 1;
        }
    }
    out
}

/// The files of module `m`: `src/m.rs` and everything under `src/m/`.
fn module_files(m: &str) -> Vec<PathBuf> {
    let src = root().join("src");
    let mut files = Vec::new();
    let single = src.join(format!("{m}.rs"));
    if single.exists() {
        files.push(single);
    }
    files.extend(rust_files(&src.join(m)));
    files
}

/// The crate's modules named by `crate::NAME` (or `crate::{A, B}`) on `line`.
fn crate_refs(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for part in group[..end].split(',') {
                let name: String = part
                    .trim()
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                    .collect();
                out.push(name);
            }
        } else {
            out.push(
                rest.chars()
                    .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                    .collect(),
            );
        }
    }
    out
}

/// Each module uses only the modules listed above it in `src/lib.rs` (or on its own line);
/// `tree`'s rendering used `control::protocol::Role`, three layers above it.
#[test]
fn each_module_uses_only_the_modules_lib_rs_lists_before_it() {
    let layers = layers();
    let rank = |m: &str| layers.iter().find(|(n, _)| n == m).map(|(_, r)| *r);
    // Every module the crate declares is listed.
    let lib = std::fs::read_to_string(root().join("src/lib.rs")).unwrap();
    for line in lib.lines() {
        if let Some(m) = line
            .strip_prefix("pub mod ")
            .and_then(|r| r.strip_suffix(';'))
        {
            assert!(
                rank(m).is_some(),
                "src/lib.rs: pub mod {m} is not in the layer list"
            );
        }
    }
    let mut wrong = Vec::new();
    for (m, r) in &layers {
        for file in module_files(m) {
            let text = std::fs::read_to_string(&file).unwrap();
            for (n, code) in code_lines(&text) {
                for used in crate_refs(code) {
                    if let Some(u) = rank(&used)
                        && u > *r
                    {
                        wrong.push(format!(
                            "{}:{n}: {m} uses {used}, listed after it in src/lib.rs (a higher layer)",
                            file.strip_prefix(root()).unwrap().display()
                        ));
                    }
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
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
            if allowed.iter().any(|a| rel.starts_with(a)) || rel == "tests/vocabulary.rs" {
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
    let found = occurrences("SYS_pidfd_open", &["src/identity.rs"]);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// One `/proc` walker, `tree::Scanner` (and `tree::children_of` / `descendants_of` on it): no
/// other listing of `/proc` in `src/` or `tests/` (a process's own `fd` or `task` directory is
/// not a walk of the processes).
#[test]
fn one_proc_walker() {
    let mut found = occurrences("read_dir(\"/proc\")", &["src/tree/"]);
    found.extend(occurrences("read_dir(\"/proc/\")", &["src/tree/"]));
    found.extend(occurrences("opendir", &["src/tree/"]));
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// One reading of a pidfd's `fdinfo`, `identity::PidfdInfo` (its `Pid:` and `NSpid:` lines,
/// the latter by `procstat::parse_nspid`, the one `NSpid` parser): the gate, the scanner and
/// two tests each read one of its lines their own way.
#[test]
fn one_reader_of_a_pidfds_fdinfo() {
    let mut found = occurrences("Pid:\"", &["src/identity.rs", "src/procstat.rs"]);
    found.extend(occurrences("self/fdinfo/", &["src/identity.rs"]));
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// One signal parser, `signal::Sig` (names with or without `SIG`, numbers, `RTMIN+N`,
/// `RTMAX-N`): the real-time forms are read nowhere else (policy, reaper and control had
/// parsers of their own before).
#[test]
fn one_signal_parser() {
    let mut found = occurrences("starts_with(\"RTMIN", &["src/signal.rs"]);
    found.extend(occurrences("starts_with(\"RTMAX", &["src/signal.rs"]));
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// One duration grammar, `duration::parse` and its writer: their units are matched nowhere
/// else (exec, init, policy text and the configuration each had a parser before).
#[test]
fn one_duration_grammar() {
    let mut found = occurrences("\"ms\" =>", &["src/duration.rs"]);
    found.extend(occurrences("strip_suffix(\"ms\")", &["src/duration.rs"]));
    found.extend(occurrences(
        "Duration::from_secs_f64(",
        &["src/duration.rs"],
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
        &["src/sys.rs"],
        &["libc::pollfd", "libc::poll(", "nix::poll"],
    );
}

/// One signalfd, `signal::SignalFd` over a `SigBits` (which holds real-time signals, where
/// nix's `SigSet` cannot): four constructors (nix's type in three places, raw calls in two,
/// an own type in `init`) before.
#[test]
fn one_signalfd() {
    only_in(
        &["src/signal.rs"],
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
        &["src/sys.rs"],
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
    only_in(&["src/signal.rs"], &["u64::from_str_radix("]);
}

/// One list of the control requests, the `Request` enum: the names and each request's fields
/// are read from it (`protocol::request_names`, `protocol::request_fields`), not written again
/// beside it (a `REQUESTS` list and a table of allowed fields had to follow every change).
#[test]
fn one_request_list() {
    // The supervisor names a request in its replies; the control module never lists them.
    let others = ["src/supervisor", "tests/"];
    only_in(&others, &["\"reopen_logs\"", "\"backlog\", \"follow\""]);
}

/// One `ctl` command enum, `control::client::CtlCommand`, which clap reads directly: the
/// command line had a second one of the same eleven variants, mapped by hand onto it.
#[test]
fn one_ctl_command_enum() {
    only_in(&["src/control/client.rs"], &["enum CtlCommand"]);
}

/// Typed errors where `String` stood: init and contain return `thiserror` types that keep
/// their cause (`InitError`, `PdeathError`, `RewriteError`, `ContainError`).
#[test]
fn no_string_errors_in_init_and_contain() {
    let found: Vec<String> = occurrences(", String>", &[])
        .into_iter()
        .filter(|f| f.starts_with("src/init/") || f.starts_with("src/contain.rs"))
        .collect();
    assert!(found.is_empty(), "{}", found.join("\n"));
}
