//! The socket a client talks to when none is given: the one order every client follows.
//!
//! Owns [`resolve_socket`] (`foster ctl` without `--socket` or `--config`, `foster top
//! --attach`, `foster tree --attach`, completion): the path given, else FOSTER_SOCKET, else the
//! supervisor of the one configuration file (`*.toml`) of the current directory that a
//! supervisor listening now runs; never a guess among the other sockets of the default
//! directory, which the error lists. docs/ctl.md says this order; the other docs point there.
//! Also [`private_default_dir`] (the default directory, checked as `foster run` checks it) and
//! `listening_socket_paths` (`/proc/net/unix`). Uses [`super::connection`]'s error and the
//! server's directory checks.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::connection::ClientError;
use crate::base::sanitize::escape;

/// How many entries of the current directory are looked at for configuration files.
const MAX_DIR_ENTRIES: usize = 1024;
/// How many `*.toml` files of the current directory are looked up (each a lock to read).
const MAX_CONFIGS: usize = 32;
/// How many sockets an error lists (the others counted).
const MAX_LISTED: usize = 8;

/// The socket a client talks to: `given` (`--socket PATH`, `--attach PATH`), else
/// FOSTER_SOCKET when set and not empty, else that of the supervisor of a configuration file of
/// the current directory (the lock `foster run` holds of it names its socket), when exactly one
/// such file is run by a supervisor listening now. Anything else is an error that lists the
/// sockets listening in the default directory; `hint` says how to choose (`--socket PATH`).
pub fn resolve_socket(given: Option<&Path>, hint: &str) -> Result<PathBuf, ClientError> {
    if let Some(p) = given {
        return Ok(p.to_path_buf());
    }
    match std::env::var_os("FOSTER_SOCKET") {
        Some(p) if !p.is_empty() => return Ok(PathBuf::from(p)),
        _ => {}
    }
    let dir = private_default_dir(hint)?;
    let listening = listening_socket_paths();
    let mut here = of_current_dir(listening.as_ref());
    match here.len() {
        1 => Ok(here.remove(0).1),
        0 => Err(not_here(&dir, listening.as_ref(), hint)),
        _ => {
            let list: Vec<String> = here
                .iter()
                .map(|(c, s)| format!("{} ({})", shown(c), shown(s)))
                .collect();
            Err(ClientError::new(format!(
                "several configuration files here are run by a supervisor: {}; choose one \
                 with {hint}",
                list.join(", ")
            )))
        }
    }
}

/// The default directory of sockets and locks, when it is a private directory of this user,
/// as `foster run` requires (one squatted by another user is refused, never read).
fn private_default_dir(hint: &str) -> Result<PathBuf, ClientError> {
    let dir = crate::supervision::control::server::default_dir();
    match default_dir_is_private()? {
        true => Ok(dir),
        false => Err(ClientError::new(format!(
            "no supervisor socket in {} (no such directory): is foster run running? use {hint}",
            dir.display()
        ))),
    }
}

/// Whether the default directory is there (false: it is missing), checked as `foster run`
/// checks it: an error when it is not a private directory of this user's.
pub fn default_dir_is_private() -> Result<bool, ClientError> {
    use crate::supervision::control::server::{DirProblem, open_private_dir};
    match open_private_dir(&crate::supervision::control::server::default_dir()) {
        Ok(_) => Ok(true),
        Err(DirProblem::Missing) => Ok(false),
        Err(DirProblem::Refused(m)) => Err(ClientError::new(m)),
    }
}

/// The configuration files (`*.toml`, the first [`MAX_CONFIGS`] of the first
/// [`MAX_DIR_ENTRIES`] entries) of the current directory whose supervisor listens now (every
/// one named when `/proc/net/unix` cannot be read), with its socket, each socket once.
fn of_current_dir(listening: Option<&HashSet<PathBuf>>) -> Vec<(PathBuf, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(".") else {
        return Vec::new();
    };
    let mut found: Vec<(PathBuf, PathBuf)> = Vec::new();
    let configs = entries
        .take(MAX_DIR_ENTRIES)
        .flatten()
        .filter(|e| e.file_name().as_encoded_bytes().ends_with(b".toml"))
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file() || t.is_symlink()))
        .take(MAX_CONFIGS);
    for e in configs {
        let Ok(Some(socket)) = crate::supervision::instance::recorded_socket(&e.path()) else {
            continue;
        };
        if listening.is_none_or(|l| l.contains(&socket)) && !found.iter().any(|f| f.1 == socket) {
            found.push((PathBuf::from(e.file_name()), socket));
        }
    }
    found.sort();
    found
}

/// The error when no configuration file here is run by a supervisor: the sockets listening in
/// `dir` (a file left by a SIGKILLed foster has no listener: skipped), at most [`MAX_LISTED`].
fn not_here(dir: &Path, listening: Option<&HashSet<PathBuf>>, hint: &str) -> ClientError {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| {
            d.take(MAX_DIR_ENTRIES)
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "sock"))
                .filter(|p| listening.is_none_or(|l| l.contains(p)))
                .collect()
        })
        .unwrap_or_default();
    if found.is_empty() {
        return ClientError::new(format!(
            "no supervisor socket in {}: is foster run running? use {hint}",
            dir.display()
        ));
    }
    found.sort();
    let n = found.len();
    let mut list: Vec<String> = found.iter().take(MAX_LISTED).map(|p| shown(p)).collect();
    if n > MAX_LISTED {
        list.push(format!("and {} more", n - MAX_LISTED));
    }
    ClientError::new(format!(
        "no configuration file (*.toml) of the current directory is run by a supervisor, and \
         foster does not guess among the {n} socket{} in {}: {}; choose with {hint}",
        if n == 1 { "" } else { "s" },
        dir.display(),
        list.join(", ")
    ))
}

/// A path for an error message, its control characters escaped.
fn shown(p: &Path) -> String {
    escape(p.as_os_str().as_encoded_bytes())
}

/// The paths of the Unix sockets listening in this network namespace, from `/proc/net/unix`
/// (flag `__SO_ACCEPTCON`, 0x10000), so stale socket files are told apart without connecting
/// to anyone. `None` when the file cannot be read: then every socket file counts.
pub(in crate::supervision::control) fn listening_socket_paths() -> Option<HashSet<PathBuf>> {
    let text = std::fs::read_to_string("/proc/net/unix").ok()?;
    Some(
        text.lines()
            .skip(1)
            .filter_map(|line| {
                let mut cols = line.split_whitespace();
                let flags = u32::from_str_radix(cols.nth(3)?, 16).ok()?;
                let path = cols.nth(3)?;
                (flags & 0x10000 != 0 && path.starts_with('/')).then(|| PathBuf::from(path))
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::listening_socket_paths;
    use std::os::unix::net::UnixListener;

    #[test]
    fn stale_socket_files_are_not_listening() {
        let dir = std::env::temp_dir().join(format!("foster-client-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let live = dir.join("live.sock");
        let stale = dir.join("stale.sock");
        let _listener = UnixListener::bind(&live).unwrap();
        drop(UnixListener::bind(&stale).unwrap()); // the file stays, nobody listens
        let listening = listening_socket_paths().expect("/proc/net/unix is readable");
        let (has_live, has_stale) = (listening.contains(&live), listening.contains(&stale));
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(has_live, "a bound, listening socket is listed");
        assert!(!has_stale, "a socket file without a listener is not");
    }
}
