//! Checks of a program before it is launched: found (a name searched in `PATH` as `execvp`
//! does), an executable regular file, and neither set-user-ID, set-group-ID nor carrying file
//! capabilities (any of which makes exec clear the parent-death signal). Run by the launcher,
//! before fork.

use std::ffi::CString;
use std::fs::Metadata;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::{EXIT_NOT_EXECUTABLE, EXIT_NOT_FOUND, EXIT_REFUSED_TARGET};

/// Why a target program was refused or could not be resolved.
/// Names are escaped: a program name may come from a configuration file.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// Not found in `PATH` (a name without `/`), or the path does not exist; an empty name
    /// (refused by the callers before any search) shows as "empty program name".
    #[error("{}", not_found(.0))]
    NotFound(PathBuf),
    /// Exists but is not an executable regular file.
    #[error("{}: not an executable regular file", show(.0))]
    NotExecutable(PathBuf),
    /// Set-user-ID: its exec would clear the parent-death signal.
    #[error("{} is set-user-ID: {SETID_TAIL}", show(.0))]
    SetUid(PathBuf),
    /// Set-group-ID: its exec would clear the parent-death signal.
    #[error("{} is set-group-ID: {SETID_TAIL}", show(.0))]
    SetGid(PathBuf),
    /// Has file capabilities (`security.capability`): its exec would clear the signal.
    #[error("{} has file capabilities: {SETID_TAIL}", show(.0))]
    FileCaps(PathBuf),
}

const SETID_TAIL: &str = "its exec would clear the parent-death signal; pass --allow-setid to \
                          run it anyway, unsupervised after exec";

fn show(p: &Path) -> String {
    crate::base::sanitize::escape(p.as_os_str().as_bytes()).to_string()
}

fn not_found(p: &Path) -> String {
    if p.as_os_str().is_empty() {
        "empty program name".into()
    } else if !p.as_os_str().as_bytes().contains(&b'/') {
        format!("{}: not found in PATH", show(p))
    } else {
        format!("{}: no such file", show(p))
    }
}

impl TargetError {
    /// The exit status `foster exec` ends with for this error.
    pub fn exit_status(&self) -> i32 {
        match self {
            TargetError::NotFound(_) => EXIT_NOT_FOUND,
            TargetError::NotExecutable(_) => EXIT_NOT_EXECUTABLE,
            _ => EXIT_REFUSED_TARGET,
        }
    }

    /// The errno `execve` gives for what this error found before it, when it is one `execve`
    /// would have met: `ENOENT` for a program not found, `EACCES` for one not executable (a
    /// directory too); `None` for a refusal of foster's (set-id, file capabilities).
    pub fn exec_errno(&self) -> Option<i32> {
        match self {
            TargetError::NotFound(_) => Some(libc::ENOENT),
            TargetError::NotExecutable(_) => Some(libc::EACCES),
            _ => None,
        }
    }

    /// True for set-user-ID, set-group-ID and file-capability refusals.
    pub fn is_privileged(&self) -> bool {
        matches!(
            self,
            TargetError::SetUid(_) | TargetError::SetGid(_) | TargetError::FileCaps(_)
        )
    }
}

/// Resolves `program` like `execvp` does (a name without `/` is searched in `PATH`).
pub fn resolve_program(program: &Path) -> Result<PathBuf, TargetError> {
    resolve_with_metadata(program).map(|(p, _)| p)
}

/// [`resolve_program`], then [`check_target`] on what it found, with one `stat` for both
/// (the launcher's path): the resolved path, and the check's outcome.
pub fn resolve_checked(program: &Path) -> Result<(PathBuf, Result<(), TargetError>), TargetError> {
    let (path, m) = resolve_with_metadata(program)?;
    let checked = check_metadata(&path, &m);
    Ok((path, checked))
}

/// The resolved path and its metadata.
fn resolve_with_metadata(program: &Path) -> Result<(PathBuf, Metadata), TargetError> {
    if program.as_os_str().as_bytes().contains(&b'/') {
        return match std::fs::metadata(program) {
            Ok(m) => Ok((program.to_path_buf(), m)),
            Err(_) => Err(TargetError::NotFound(program.to_path_buf())),
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    let mut not_exec = None;
    for dir in std::env::split_paths(&path) {
        let cand = dir.join(program);
        if let Ok(m) = std::fs::metadata(&cand) {
            if m.is_file() && m.mode() & 0o111 != 0 {
                return Ok((cand, m));
            }
            not_exec.get_or_insert(cand);
        }
    }
    match not_exec {
        Some(p) => Err(TargetError::NotExecutable(p)),
        None => Err(TargetError::NotFound(program.to_path_buf())),
    }
}

/// Checks a resolved target: an executable regular file, neither set-user-ID, set-group-ID nor
/// carrying file capabilities (any of which makes exec clear `PR_SET_PDEATHSIG`).
pub fn check_target(path: &Path) -> Result<(), TargetError> {
    let m = std::fs::metadata(path).map_err(|_| TargetError::NotFound(path.to_path_buf()))?;
    check_metadata(path, &m)
}

/// [`check_target`] on metadata already read.
fn check_metadata(path: &Path, m: &Metadata) -> Result<(), TargetError> {
    if !m.is_file() || m.mode() & 0o111 == 0 {
        return Err(TargetError::NotExecutable(path.to_path_buf()));
    }
    if m.mode() & libc::S_ISUID != 0 {
        return Err(TargetError::SetUid(path.to_path_buf()));
    }
    if m.mode() & libc::S_ISGID != 0 && m.mode() & 0o010 != 0 {
        return Err(TargetError::SetGid(path.to_path_buf()));
    }
    if has_file_caps(path) {
        return Err(TargetError::FileCaps(path.to_path_buf()));
    }
    Ok(())
}

fn has_file_caps(path: &Path) -> bool {
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: a size query (null buffer) of one attribute of a NUL-terminated path.
    let n = unsafe {
        libc::getxattr(
            c.as_ptr(),
            c"security.capability".as_ptr(),
            std::ptr::null_mut(),
            0,
        )
    };
    n > 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_checked() {
        assert!(
            check_target(Path::new("/bin/true")).is_ok()
                || check_target(Path::new("/usr/bin/true")).is_ok()
        );
        assert!(matches!(
            resolve_program(Path::new("no-such-program-xyz")),
            Err(TargetError::NotFound(_))
        ));
        assert!(matches!(
            check_target(Path::new("/proc/self/stat")),
            Err(TargetError::NotExecutable(_))
        ));
        let su = Path::new("/usr/bin/su");
        if su.exists() {
            let e = check_target(su).unwrap_err();
            assert!(e.is_privileged());
            assert!(e.to_string().contains("set-user-ID"), "{e}");
            assert_eq!(e.exit_status(), EXIT_REFUSED_TARGET);
        }
    }
}
