//! Starting PROGRAM: the one function `foster init` calls to create it.
//!
//! Owns the child side of PROGRAM's launch: its process group, the terminal's foreground group,
//! the signal state foster inherited (dispositions and mask), and the exec itself, with exec
//! failures reported through a close-on-exec pipe so foster can name PROGRAM in its message.
//! The program is resolved in `PATH` before the fork, so the child only runs raw syscalls:
//! nothing allocates or locks between fork and exec.
//!
//! foster never waits here: PROGRAM, even one whose exec failed, is the reaper's to reap, and
//! its status (126 or 127 after a failed exec) reaches the owner registered for its pid.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::signals::Inherited;
use super::tty::Terminal;

/// Exit status when PROGRAM exists but cannot be executed (as shells do).
pub const EXIT_NOT_EXECUTABLE: i32 = 126;
/// Exit status when PROGRAM is not found (as shells do).
pub const EXIT_NOT_FOUND: i32 = 127;

/// Everything the launch needs, computed before the fork.
#[derive(Debug)]
pub struct LaunchPlan {
    /// PROGRAM as the user gave it (for messages and `argv[0]`).
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Put PROGRAM in a process group of its own (its pid).
    pub own_group: bool,
    /// Hand this terminal's foreground to PROGRAM's group (implies `own_group`).
    pub terminal: Option<Terminal>,
    /// The signal state PROGRAM gets back.
    pub inherited: Inherited,
}

/// A created PROGRAM. When `exec_errno` is set, the exec failed and the child has already
/// ended with [`EXIT_NOT_EXECUTABLE`] or [`EXIT_NOT_FOUND`]; the reaper will reap it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Launched {
    pub pid: i32,
    pub exec_errno: Option<i32>,
}

/// Why PROGRAM could not even be created.
#[derive(Debug)]
pub enum LaunchError {
    /// Not found in `PATH` or at the given path: status 127.
    NotFound { program: OsString },
    /// Found but not executable (permission, a directory...): status 126.
    NotExecutable { path: PathBuf, errno: i32 },
    /// An argument held a NUL byte, or fork/pipe failed.
    Io(String),
}

impl LaunchError {
    /// The exit status foster ends with.
    pub fn exit_status(&self) -> i32 {
        match self {
            LaunchError::NotFound { .. } => EXIT_NOT_FOUND,
            LaunchError::NotExecutable { .. } | LaunchError::Io(_) => EXIT_NOT_EXECUTABLE,
        }
    }
}

impl std::fmt::Display for LaunchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LaunchError::NotFound { program } => {
                let p = crate::sanitize::escape(program.as_bytes());
                if program.as_bytes().contains(&b'/') {
                    write!(f, "cannot run {p}: no such file")
                } else {
                    write!(f, "cannot run {p}: not found in PATH")
                }
            }
            LaunchError::NotExecutable { path, errno } => write!(
                f,
                "cannot execute {}: {}",
                crate::sanitize::escape(path.as_os_str().as_bytes()),
                io::Error::from_raw_os_error(*errno)
            ),
            LaunchError::Io(e) => write!(f, "{e}"),
        }
    }
}

/// Resolves PROGRAM as `execvp` would: a name with a `/` as is, otherwise the first executable
/// regular file of that name in `PATH` (default `/usr/local/bin:/usr/bin:/bin`).
pub fn resolve(program: &OsStr) -> Result<PathBuf, LaunchError> {
    let not_found = || LaunchError::NotFound {
        program: program.to_owned(),
    };
    if program.is_empty() {
        return Err(not_found());
    }
    if program.as_bytes().contains(&b'/') {
        let p = PathBuf::from(program);
        return match std::fs::metadata(&p) {
            Ok(_) => Ok(p),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Err(not_found()),
            Err(e) => Err(LaunchError::NotExecutable {
                path: p,
                errno: e.raw_os_error().unwrap_or(libc::EACCES),
            }),
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    let mut denied: Option<PathBuf> = None;
    for dir in path.as_bytes().split(|&b| b == b':') {
        let dir = if dir.is_empty() { b"." as &[u8] } else { dir };
        let candidate = Path::new(OsStr::from_bytes(dir)).join(program);
        let Ok(meta) = std::fs::metadata(&candidate) else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        let c = CString::new(candidate.as_os_str().as_bytes()).map_err(|_| not_found())?;
        // SAFETY: a valid C string.
        if unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0 {
            return Ok(candidate);
        }
        denied.get_or_insert(candidate);
    }
    match denied {
        Some(path) => Err(LaunchError::NotExecutable {
            path,
            errno: libc::EACCES,
        }),
        None => Err(not_found()),
    }
}

fn cstring(what: &str, b: &[u8]) -> Result<CString, LaunchError> {
    CString::new(b).map_err(|_| LaunchError::Io(format!("{what} contains a NUL byte")))
}

/// Creates PROGRAM. Returns once it has exec'd or failed to.
pub fn launch(plan: &LaunchPlan) -> Result<Launched, LaunchError> {
    let resolved = resolve(&plan.program)?;
    let path = cstring("the program path", resolved.as_os_str().as_bytes())?;
    let mut argv = vec![cstring("PROGRAM", plan.program.as_bytes())?];
    for a in &plan.args {
        argv.push(cstring("an argument", a.as_bytes())?);
    }
    let argv_ptrs: Vec<*const libc::c_char> = argv
        .iter()
        .map(|c| c.as_ptr())
        .chain([std::ptr::null()])
        .collect();
    let own_group = plan.own_group || plan.terminal.is_some();
    let inherited = plan.inherited;
    let terminal = plan.terminal;

    let mut fds = [0; 2];
    // SAFETY: pipe2 into a stack array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(LaunchError::Io(format!(
            "pipe for the exec report: {}",
            io::Error::last_os_error()
        )));
    }
    // SAFETY: fresh descriptors we own.
    let (rd, wr) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };

    // SAFETY: the child runs only async-signal-safe syscalls on data prepared above, then
    // exec or _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(LaunchError::Io(format!(
            "fork: {}",
            io::Error::last_os_error()
        )));
    }
    if pid == 0 {
        // SAFETY: see above.
        unsafe {
            if own_group {
                libc::setpgid(0, 0);
            }
            if let Some(t) = terminal {
                t.give_to_self_in_child();
            }
            inherited.apply_in_child();
            libc::execv(path.as_ptr(), argv_ptrs.as_ptr());
            let e = *libc::__errno_location();
            let b = e.to_ne_bytes();
            libc::write(wr.as_raw_fd(), b.as_ptr().cast(), b.len());
            libc::_exit(if e == libc::ENOENT {
                EXIT_NOT_FOUND
            } else {
                EXIT_NOT_EXECUTABLE
            });
        }
    }
    if own_group {
        // Both sides set the group, so that it exists whichever runs first.
        // SAFETY: plain setpgid on our child.
        unsafe { libc::setpgid(pid, pid) };
    }
    drop(wr);
    let mut b = [0u8; 4];
    let mut got = 0;
    while got < b.len() {
        // SAFETY: reads into the rest of a stack buffer.
        let n = unsafe { libc::read(rd.as_raw_fd(), b[got..].as_mut_ptr().cast(), b.len() - got) };
        if n < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
            continue;
        }
        if n <= 0 {
            break;
        }
        got += n as usize;
    }
    Ok(Launched {
        pid,
        exec_errno: (got == b.len()).then(|| i32::from_ne_bytes(b)),
    })
}
