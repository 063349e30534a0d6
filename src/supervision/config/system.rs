//! The checks of `foster run --check` against the system the helpers would run on
//! ([`super::Scope::System`]): each helper's user and group known to the user database (read
//! as its launch reads them: [`user_id`], [`group_id`], [`Credentials::resolve`]); its program
//! found as the spawner finds it ([`gate::resolve_program`], [`gate::check_target`]) and
//! executable by the user it runs as, and so are its probes' (`ready.exec`, `health.exec`);
//! its working directory a directory that user can enter; its log file one foster may write
//! ([`RotatingFile::check_owned`]: foster opens it, not the helper). The same reading of the
//! mode bits tells the supervisor whether a helper of another user can reach its notify
//! socket ([`helper_reaches`]).
//!
//! Permissions are read from the mode bits (owner, group, others; root enters and reads
//! anything, and executes a file with an execute bit) and from a `noexec` mount; ACLs and
//! security modules are not read. A helper without `user` is checked for the user running the
//! check. What the check misses, or what changes after it, the launch meets: a failed launch
//! counts as an exit (127, 126, 125) and goes through the restart rules.

use std::fs::Metadata;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use super::collect::{Document, KeyPath, Read};
use super::error::ConfigError;
use super::schema::{Config, Helper};
use crate::base::logfile::RotatingFile;
use crate::gate::spawner::{Credentials, group_id, user_id};
use crate::gate::{self, EXIT_GATE_ERROR, EXIT_NOT_EXECUTABLE, TargetError};

/// Checks every helper of `config` against the system; the mistakes go to `errors`. What was
/// taken out of the file for a mistake of its own is not checked again.
pub(super) fn check(
    config: &Config,
    doc: &Document<'_>,
    read: &Read<Config>,
    errors: &mut Vec<ConfigError>,
) {
    for (i, h) in config.helpers.iter().enumerate() {
        let at = KeyPath::root().key("helper").index(i);
        let mut c = Checking {
            h,
            at,
            who: None,
            doc,
            read,
        };
        c.who = who_runs(&c, errors);
        check_command(&c, errors);
        check_probes(&c, errors);
        check_cwd(&c, errors);
        check_log(&c, errors);
        env_files(&c, errors);
    }
}

/// One helper being checked: it, its place in the file, who it runs as (`None` when that
/// cannot be told), the file and what was taken out of it.
struct Checking<'a, 'd> {
    h: &'a Helper,
    at: KeyPath,
    who: Option<Who>,
    doc: &'a Document<'d>,
    read: &'a Read<Config>,
}

/// Who helper `h` (at `at`) runs as: `None` when that cannot be told (a user or group
/// unknown, or credentials that do not resolve), the reason reported to `errors`.
fn who_runs(c: &Checking<'_, '_>, errors: &mut Vec<ConfigError>) -> Option<Who> {
    let Checking {
        h, at, doc, read, ..
    } = c;
    let mut fail = |path: &KeyPath, message: String| {
        errors.push(doc.error_at(path, None, message));
    };
    let (user_at, group_at) = (at.key("user"), at.key("group"));
    let mut known = true;
    let mut id = |value: &Option<String>, path: &KeyPath, lookup: fn(&str) -> _| match value {
        Some(_) if read.skipped(path) => {
            known = false;
            None
        }
        Some(v) => match lookup(v) {
            Ok(id) => Some(id),
            Err(e) => {
                fail(
                    path,
                    format!("{e} (at launch: exit status {EXIT_GATE_ERROR})"),
                );
                known = false;
                None
            }
        },
        None => None,
    };
    let uid = id(&h.user, &user_at, user_id);
    let gid = id(&h.group, &group_at, group_id);
    if !known {
        return None;
    }
    match Credentials::resolve(uid, gid) {
        Ok(c) => Some(Who::of(&c, h.user.as_deref())),
        Err(e) => {
            let path = if uid.is_some() { &user_at } else { &group_at };
            fail(
                path,
                format!("{e} (at launch: exit status {EXIT_GATE_ERROR})"),
            );
            None
        }
    }
}

/// The program of helper `h`'s command, found and executable as `who`.
fn check_command(c: &Checking<'_, '_>, errors: &mut Vec<ConfigError>) {
    let Checking {
        h, at, doc, read, ..
    } = c;
    let who = c.who.as_ref();
    let command = at.key("command");
    if !read.skipped(&command)
        && let Err(e) = program(h.command.program(), who)
    {
        // At the program's own place when the command is a list.
        let place = doc
            .span_of(&command.index(0))
            .or_else(|| doc.span_of(&command));
        errors.push(doc.error_at(&command, place, e.to_string()));
    }
}

/// The programs of helper `h`'s probes (`ready.exec`, `health.exec`): they run as it does.
fn check_probes(c: &Checking<'_, '_>, errors: &mut Vec<ConfigError>) {
    let Checking {
        h, at, doc, read, ..
    } = c;
    let who = c.who.as_ref();
    let probes = [
        ("ready", h.ready.as_ref().and_then(|r| r.exec.as_ref())),
        ("health", h.health.as_ref().and_then(|r| r.exec.as_ref())),
    ];
    for (section, probe) in probes {
        let path = at.key(section).key("exec");
        if let Some(probe) = probe
            && !read.skipped(&path)
            && let Err(e) = program(probe.program(), who)
        {
            let place = doc.span_of(&path.index(0)).or_else(|| doc.span_of(&path));
            errors.push(doc.error_at(&path, place, format!("the probe: {e}")));
        }
    }
}

/// Helper `h`'s working directory, one `who` can enter.
fn check_cwd(c: &Checking<'_, '_>, errors: &mut Vec<ConfigError>) {
    let Checking {
        h, at, doc, read, ..
    } = c;
    let who = c.who.as_ref();
    let cwd = at.key("cwd");
    if let Some(dir) = &h.cwd
        && !read.skipped(&cwd)
        && let Err(e) = directory(dir, who)
    {
        errors.push(doc.error_at(&cwd, None, e.to_string()));
    }
}

/// Helper `h`'s log file: one foster (not the helper) opens at its start, with the checks of
/// that opening.
fn check_log(c: &Checking<'_, '_>, errors: &mut Vec<ConfigError>) {
    let Checking {
        h, at, doc, read, ..
    } = c;
    let log = at.key("log");
    if let Some(spec) = &h.log
        && !read.skipped(&log)
        && let Err(e) = RotatingFile::check_owned(&spec.file, spec.rotation(), "log file")
    {
        errors.push(doc.error_at(
            &log.key("file"),
            None,
            format!("{e} (foster run would not start: exit status 1)"),
        ));
    }
}

/// Each `env_file` of helper `h` (at `at`) read as its launch reads it.
fn env_files(c: &Checking<'_, '_>, errors: &mut Vec<ConfigError>) {
    let Checking {
        h, at, doc, read, ..
    } = c;
    let path = at.key("env_file");
    if read.skipped(&path) {
        return;
    }
    for (k, file) in h.env_file.iter().enumerate() {
        if let Err(e) = super::envfile::read(file) {
            let place = doc.span_of(&path.index(k)).or_else(|| doc.span_of(&path));
            errors.push(doc.error_at(
                &path,
                place,
                format!("{e} (at launch: exit status {EXIT_GATE_ERROR})"),
            ));
        }
    }
}

/// Who a helper runs as: ids, groups, and its name in messages.
struct Who {
    uid: u32,
    gid: u32,
    groups: Vec<u32>,
    name: String,
}

impl Who {
    /// The credentials a launch would set, foster's own where they leave them.
    fn of(c: &Credentials, user: Option<&str>) -> Who {
        let uid = c.uid.unwrap_or_else(|| nix::unistd::geteuid().as_raw());
        let gid = c.gid.unwrap_or_else(|| nix::unistd::getegid().as_raw());
        let groups = c.groups.clone().unwrap_or_else(|| {
            nix::unistd::getgroups()
                .map(|g| g.into_iter().map(|g| g.as_raw()).collect())
                .unwrap_or_default()
        });
        let name = match user {
            Some(u) if u.parse::<u32>().is_err() => format!("user {u:?} (uid {uid})"),
            Some(_) => format!("uid {uid}"),
            None => format!("this user (uid {uid})"),
        };
        Who {
            uid,
            gid,
            groups,
            name,
        }
    }

    /// Whether the mode bits of `meta` let this user search a directory or execute a file.
    fn may_execute(&self, meta: &Metadata) -> bool {
        let mode = meta.mode();
        if self.uid == 0 {
            return meta.is_dir() || mode & 0o111 != 0;
        }
        let shift = if meta.uid() == self.uid {
            6
        } else if meta.gid() == self.gid || self.groups.contains(&meta.gid()) {
            3
        } else {
            0
        };
        (mode >> shift) & 1 != 0
    }

    /// Every directory on the way to `path` (not `path` itself) can be entered.
    fn reaches(&self, path: &Path) -> Result<(), Unreachable> {
        let dirs = path
            .ancestors()
            .skip(1)
            .filter(|d| !d.as_os_str().is_empty());
        for dir in dirs {
            if let Ok(m) = std::fs::metadata(dir)
                && m.is_dir()
                && !self.may_execute(&m)
            {
                return Err(Unreachable {
                    name: self.name.clone(),
                    dir: show(dir),
                    bits: bits(&m),
                });
            }
        }
        Ok(())
    }
}

/// Whether the user helper `h` runs as (its `user`, `group` and groups, resolved as its launch
/// resolves them) may enter every directory on the way to `path`, read from the mode bits as
/// the check reads them; why not otherwise. A user or group that cannot be resolved is left to
/// the launch to report.
pub(crate) fn helper_reaches(h: &Helper, path: &Path) -> Result<(), Unreachable> {
    let uid = h.user.as_deref().map(user_id).transpose();
    let gid = h.group.as_deref().map(group_id).transpose();
    let (Ok(uid), Ok(gid)) = (uid, gid) else {
        return Ok(());
    };
    match Credentials::resolve(uid, gid) {
        Ok(c) => Who::of(&c, h.user.as_deref()).reaches(path),
        Err(_) => Ok(()),
    }
}

fn show(p: &Path) -> String {
    String::from_utf8_lossy(p.as_os_str().as_bytes()).into_owned()
}

fn bits(m: &Metadata) -> String {
    format!(
        "mode {:04o}, owner {}:{}",
        m.mode() & 0o7777,
        m.uid(),
        m.gid()
    )
}

/// What a file is, in words.
fn kind(m: &Metadata) -> &'static str {
    let t = m.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_file() {
        "a regular file"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else {
        "of an unknown type"
    }
}

/// A directory on the way to a path that a helper's user may not enter.
#[derive(Debug, thiserror::Error)]
#[error("{name} may not enter {dir} ({bits})")]
pub(crate) struct Unreachable {
    name: String,
    dir: String,
    bits: String,
}

/// Why a helper's program (or probe) would not be launched, and what its launch would count
/// as (`status`, the exit status).
#[derive(Debug, thiserror::Error)]
enum ProgramError {
    /// A name not found in `PATH` (`hint`: how to write a command with spaces).
    #[error(
        "program {program:?} is not found in PATH ({path}): expected the name of an \
         executable file in one of its directories, or the path of one (at launch: exit status \
         {status}){hint}"
    )]
    NotInPath {
        program: String,
        path: String,
        status: i32,
        hint: String,
    },
    /// A path to nothing.
    #[error(
        "program {program:?}: no such file: expected the path of an executable file (at \
         launch: exit status {status})"
    )]
    NoSuchFile { program: String, status: i32 },
    /// Not an executable file (`what` it is).
    #[error(
        "program {program:?}: {path} is {what}: expected an executable file (at launch: exit \
         status {status})"
    )]
    NotExecutable {
        program: String,
        path: String,
        what: &'static str,
        status: i32,
    },
    /// Set-user-ID, set-group-ID or with file capabilities (`what`).
    #[error(
        "program {program:?}: {path} {what}: its exec would clear the parent-death signal, so \
         foster does not launch it (at launch: exit status {status})"
    )]
    ClearsPdeath {
        program: String,
        path: String,
        what: &'static str,
        status: i32,
    },
    /// A directory on its way may not be entered.
    #[error(
        "program {program:?}: {source}: its exec would fail with EACCES (at launch: exit \
         status {status})"
    )]
    Unreachable {
        program: String,
        source: Unreachable,
        status: i32,
    },
    /// Its metadata cannot be read.
    #[error("program {program:?}: {source}")]
    Metadata {
        program: String,
        source: std::io::Error,
    },
    /// Its user may not execute it.
    #[error(
        "program {program:?}: {name} may not execute {path} ({bits}): its exec would fail with \
         EACCES (at launch: exit status {status})"
    )]
    MayNotExecute {
        program: String,
        name: String,
        path: String,
        bits: String,
        status: i32,
    },
    /// It is on a `noexec` mount.
    #[error(
        "program {program:?}: {path} is on a file system mounted noexec: its exec would fail \
         with EACCES (at launch: exit status {status})"
    )]
    NoExec {
        program: String,
        path: String,
        status: i32,
    },
}

/// `program` is found as the spawner finds it, is a program it launches, and `who` (when
/// known) may execute it.
fn program(program: &str, who: Option<&Who>) -> Result<(), ProgramError> {
    let resolved = gate::resolve_program(Path::new(program))
        .and_then(|p| gate::check_target(&p).map(|()| p))
        .map_err(|e| refused(program, &e))?;
    let Some(who) = who else { return Ok(()) };
    let (status, program) = (EXIT_NOT_EXECUTABLE, program.to_string());
    if let Err(source) = who.reaches(&resolved) {
        return Err(ProgramError::Unreachable {
            program,
            source,
            status,
        });
    }
    let m = match std::fs::metadata(&resolved) {
        Ok(m) => m,
        Err(source) => return Err(ProgramError::Metadata { program, source }),
    };
    let path = show(&resolved);
    if !who.may_execute(&m) {
        let (name, bits) = (who.name.clone(), bits(&m));
        return Err(ProgramError::MayNotExecute {
            program,
            name,
            path,
            bits,
            status,
        });
    }
    if let Ok(fs) = nix::sys::statvfs::statvfs(&resolved)
        && fs.flags().contains(nix::sys::statvfs::FsFlags::ST_NOEXEC)
    {
        return Err(ProgramError::NoExec {
            program,
            path,
            status,
        });
    }
    Ok(())
}

/// For a program name with spaces (a command written as one string, `"python3 -m
/// http.server"`, is one program name, never split): how to write what was meant.
fn shell_hint(program: &str) -> String {
    let words: Vec<&str> = program.split_whitespace().collect();
    if words.len() < 2 {
        return String::new();
    }
    let list: Vec<String> = words.iter().map(|w| format!("{w:?}")).collect();
    format!(
        "; a command string is one program name, not split into words: write a list, \
         command = [{}], or run a shell, command = [\"sh\", \"-c\", {program:?}]",
        list.join(", ")
    )
}

/// Why the spawner would not launch `program`, with what was expected and what the launch
/// would count as.
fn refused(program: &str, e: &TargetError) -> ProgramError {
    let status = e.exit_status();
    let program = program.to_string();
    match e {
        TargetError::NotFound(_) if !program.contains('/') => {
            let path = std::env::var_os("PATH")
                .map(|p| String::from_utf8_lossy(p.as_bytes()).into_owned())
                .unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
            let hint = shell_hint(&program);
            ProgramError::NotInPath {
                program,
                path,
                status,
                hint,
            }
        }
        TargetError::NotFound(_) => ProgramError::NoSuchFile { program, status },
        TargetError::NotExecutable(p) => {
            let what = std::fs::metadata(p).map_or("not a file", |m| {
                if m.is_file() {
                    "a regular file without an execute bit"
                } else {
                    kind(&m)
                }
            });
            let path = show(p);
            ProgramError::NotExecutable {
                program,
                path,
                what,
                status,
            }
        }
        TargetError::SetUid(p) | TargetError::SetGid(p) | TargetError::FileCaps(p) => {
            let what = match e {
                TargetError::SetUid(_) => "is set-user-ID",
                TargetError::SetGid(_) => "is set-group-ID",
                _ => "has file capabilities",
            };
            let path = show(p);
            ProgramError::ClearsPdeath {
                program,
                path,
                what,
                status,
            }
        }
    }
}

/// Why a helper's working directory would fail its launch's `chdir` (at launch: exit status
/// [`EXIT_GATE_ERROR`]).
#[derive(Debug, thiserror::Error)]
enum DirError {
    /// It does not exist.
    #[error(
        "working directory {dir}: no such directory: expected an existing directory (at \
         launch: exit status {status})"
    )]
    NotFound { dir: String, status: i32 },
    /// Its metadata cannot be read.
    #[error(
        "working directory {dir}: {source}: expected an existing directory (at launch: exit \
         status {status})"
    )]
    Unreadable {
        dir: String,
        source: std::io::Error,
        status: i32,
    },
    /// It is not a directory (`kind`: what it is).
    #[error(
        "working directory {dir} is {kind}: expected a directory (at launch: exit status \
         {status})"
    )]
    NotADirectory {
        dir: String,
        kind: &'static str,
        status: i32,
    },
    /// A directory on its way may not be entered.
    #[error("working directory {dir}: {source} (at launch: exit status {status})")]
    Unreachable {
        dir: String,
        source: Unreachable,
        status: i32,
    },
    /// Its user may not enter it.
    #[error(
        "working directory {dir}: {name} may not enter it ({bits}) (at launch: exit status \
         {status})"
    )]
    MayNotEnter {
        dir: String,
        name: String,
        bits: String,
        status: i32,
    },
}

/// `dir` is a directory `who` (when known) can enter, as the launch's `chdir` needs.
fn directory(dir: &Path, who: Option<&Who>) -> Result<(), DirError> {
    let (status, shown) = (EXIT_GATE_ERROR, show(dir));
    let m = match std::fs::metadata(dir) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(DirError::NotFound { dir: shown, status });
        }
        Err(source) => {
            return Err(DirError::Unreadable {
                dir: shown,
                source,
                status,
            });
        }
    };
    if !m.is_dir() {
        let kind = kind(&m);
        return Err(DirError::NotADirectory {
            dir: shown,
            kind,
            status,
        });
    }
    let Some(who) = who else { return Ok(()) };
    if let Err(source) = who.reaches(dir) {
        return Err(DirError::Unreachable {
            dir: shown,
            source,
            status,
        });
    }
    if !who.may_execute(&m) {
        return Err(DirError::MayNotEnter {
            dir: shown,
            name: who.name.clone(),
            bits: bits(&m),
            status,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who(uid: u32, gid: u32, groups: &[u32]) -> Who {
        Who {
            uid,
            gid,
            groups: groups.to_vec(),
            name: format!("uid {uid}"),
        }
    }

    #[test]
    fn mode_bits_are_read_for_owner_group_and_others() {
        use std::os::unix::fs::PermissionsExt;
        let d = std::env::temp_dir().join(format!("foster-system-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let f = d.join("f");
        std::fs::write(&f, "").unwrap();
        let meta = |mode: u32| {
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(mode)).unwrap();
            std::fs::metadata(&f).unwrap()
        };
        // Owned by others than root where that can be had: root's bits are not the owner's.
        if nix::unistd::geteuid().is_root() {
            std::os::unix::fs::chown(&f, Some(4242), Some(4343)).unwrap();
        }
        let m = meta(0o700);
        let (owner, group) = (m.uid(), m.gid());
        let stranger = owner.wrapping_add(4242);
        assert!(who(owner, 1, &[]).may_execute(&m));
        assert!(!who(stranger, group, &[]).may_execute(&m));
        let m = meta(0o710);
        assert!(who(stranger, group, &[]).may_execute(&m));
        assert!(
            who(stranger, 1, &[group]).may_execute(&m),
            "a group of the list"
        );
        assert!(!who(stranger, 1, &[]).may_execute(&m));
        let m = meta(0o601);
        assert!(who(stranger, 1, &[]).may_execute(&m), "others");
        assert!(
            !who(owner, 1, &[]).may_execute(&m),
            "the owner's bits, not others'"
        );
        assert!(who(0, 0, &[]).may_execute(&m), "root: any execute bit");
        let m = meta(0o600);
        assert!(!who(0, 0, &[]).may_execute(&m), "root: none");
        assert!(who(0, 0, &[]).may_execute(&std::fs::metadata(&d).unwrap()));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
