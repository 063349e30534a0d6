//! The socket a client talks to when none is given.
//!
//! Owns [`resolve_socket`] (`foster top --attach`'s lookup: the path given, FOSTER_SOCKET, else
//! the default directory's only one), [`find_default_socket`] (the only listening socket of
//! the default directory, checked as `foster run` checks it) and `listening_socket_paths`
//! (`/proc/net/unix`). Uses [`super::connection`]'s error and the server's directory checks.

use std::path::{Path, PathBuf};

use super::connection::ClientError;

/// The socket a client talks to: `given` (`--socket PATH`, `--attach PATH`), else
/// FOSTER_SOCKET when set and not empty, else [`find_default_socket`]. `option` names the
/// option in the hints of the errors.
pub fn resolve_socket(given: Option<&Path>, option: &str) -> Result<PathBuf, ClientError> {
    if let Some(p) = given {
        return Ok(p.to_path_buf());
    }
    match std::env::var_os("FOSTER_SOCKET") {
        Some(p) if !p.is_empty() => Ok(PathBuf::from(p)),
        _ => find_default_socket(option),
    }
}

/// The socket `foster ctl` uses without `--socket`: the only `*.sock` in the default
/// directory, which must be a private directory of this user, as `foster run` requires (a
/// directory squatted by another user is refused, not searched). The error lists the sockets
/// when there are several.
pub fn find_default_socket(option: &str) -> Result<PathBuf, ClientError> {
    use crate::supervision::control::server::{DirProblem, open_private_dir};
    let dir = crate::supervision::control::server::default_dir();
    match open_private_dir(&dir) {
        Ok(_) => {}
        Err(DirProblem::Missing) => {
            return Err(ClientError::new(format!(
                "no supervisor socket in {} (no such directory): is foster run running? use \
                 {option}",
                dir.display()
            )));
        }
        Err(DirProblem::Refused(m)) => return Err(ClientError::new(m)),
    }
    let listening = listening_socket_paths();
    let mut found: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "sock"))
                // A file left by a foster that was SIGKILLed has no listener: skip it.
                .filter(|p| listening.as_ref().is_none_or(|l| l.contains(p)))
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(ClientError::new(format!(
            "no supervisor socket in {}: is foster run running? use {option}",
            dir.display()
        ))),
        _ => Err(ClientError::new(format!(
            "several supervisor sockets in {}: choose one with {option}: {}",
            dir.display(),
            found
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// The paths of the Unix sockets listening in this network namespace, from `/proc/net/unix`
/// (flag `__SO_ACCEPTCON`, 0x10000), so stale socket files are told apart without connecting
/// to anyone. `None` when the file cannot be read: then every socket file counts.
pub(in crate::supervision::control) fn listening_socket_paths()
-> Option<std::collections::HashSet<PathBuf>> {
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
