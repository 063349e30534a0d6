//! A helper's `env_file`: `KEY=VALUE` lines read when its launch is planned (never between fork
//! and exec), as systemd's `EnvironmentFile=` and Docker's `--env-file` read them. Owns the
//! grammar ([`parse`]) and the guarded read ([`read`]): the file is judged as one another local
//! user could have planted, with the rule of `crate::base::ownership` for files foster uses.

use std::io::Read as _;
use std::os::fd::AsFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The largest environment file read, in bytes.
pub const MAX_SIZE: u64 = 1 << 20;

/// Why an environment file was not taken; the message names the file, and the line when one
/// is at fault (`FILE:LINE: ...`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvFileError {
    /// It could not be opened or read.
    #[error("env_file {}: {why}", path.display())]
    Unreadable { path: PathBuf, why: String },
    /// Another user could have written it, or it is not a regular file.
    #[error(
        "env_file {}: {why}: not read (another user could have written it; expected a regular \
         file of foster's user or root that only its owner may write)",
        path.display()
    )]
    Unsafe { path: PathBuf, why: String },
    /// Larger than [`MAX_SIZE`].
    #[error(
        "env_file {}: larger than {MAX_SIZE} bytes: expected a short file of KEY=VALUE lines",
        path.display()
    )]
    TooLarge { path: PathBuf },
    /// A line that is not `KEY=VALUE`, a comment or blank.
    #[error("env_file {}:{line}: {why}", path.display())]
    Line {
        path: PathBuf,
        line: usize,
        why: String,
    },
}

/// The variables of the file at `path`, in its order. The file and its directory must be
/// foster's user's or root's and writable by no one else (the directory may be sticky, as
/// `/tmp`); a symbolic link, FIFO or device is refused; at most [`MAX_SIZE`] bytes.
pub fn read(path: &Path) -> Result<Vec<(String, String)>, EnvFileError> {
    use crate::base::ownership::{DirRule, Owner, open_dir, owner_of, parent_dir};
    let unsafe_ = |why: String| EnvFileError::Unsafe {
        path: path.to_path_buf(),
        why,
    };
    let unreadable = |why: String| EnvFileError::Unreadable {
        path: path.to_path_buf(),
        why,
    };
    open_dir(parent_dir(path), DirRule::Given("the env file"), false)
        .map_err(|e| unsafe_(format!("its directory {}", e)))?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NOCTTY | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => unsafe_("it is a symbolic link".to_string()),
            _ => unreadable(e.to_string()),
        })?;
    let m = file.metadata().map_err(|e| unreadable(e.to_string()))?;
    if !m.file_type().is_file() {
        return Err(unsafe_("it is not a regular file".to_string()));
    }
    match owner_of(Some(file.as_fd()), m.uid(), m.dev(), m.ino()) {
        Owner::Me | Owner::Root => {}
        _ => {
            let who = crate::base::ownership::uid_text(m.uid());
            return Err(unsafe_(format!(
                "it belongs to {who}, not to foster's user or root"
            )));
        }
    }
    if m.mode() & 0o022 != 0 {
        return Err(unsafe_(format!(
            "group or others may write to it (mode {:04o})",
            m.mode() & 0o7777
        )));
    }
    let mut bytes = Vec::new();
    file.take(MAX_SIZE + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| unreadable(e.to_string()))?;
    if bytes.len() as u64 > MAX_SIZE {
        return Err(EnvFileError::TooLarge {
            path: path.to_path_buf(),
        });
    }
    parse(path, &bytes)
}

/// The `KEY=VALUE` lines of `bytes` (the file `path`, for the errors). Blank lines and lines
/// whose first non-blank character is `#` or `;` are skipped; a leading `export ` is allowed;
/// white space around the key and an unquoted value is dropped; a value in single quotes is
/// taken as it is, one in double quotes with `\"`, `\\`, `\$` and `\n` unescaped.
pub fn parse(path: &Path, bytes: &[u8]) -> Result<Vec<(String, String)>, EnvFileError> {
    let mut vars = Vec::new();
    for (n, raw) in bytes.split(|b| *b == b'\n').enumerate() {
        let fail = |why: String| EnvFileError::Line {
            path: path.to_path_buf(),
            line: n + 1,
            why,
        };
        let text = std::str::from_utf8(raw).map_err(|_| fail("not UTF-8".to_string()))?;
        let text = text.strip_suffix('\r').unwrap_or(text).trim();
        if text.is_empty() || text.starts_with('#') || text.starts_with(';') {
            continue;
        }
        let text = text.strip_prefix("export ").unwrap_or(text);
        let Some((key, value)) = text.split_once('=') else {
            return Err(fail(format!(
                "{:?} is not KEY=VALUE: expected a variable, a comment (#) or a blank line",
                crate::base::sanitize::escape(text.as_bytes())
            )));
        };
        let key = key.trim();
        if key.is_empty() || key.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(fail(format!(
                "the name {:?} is empty or holds white space: expected KEY=VALUE",
                crate::base::sanitize::escape(key.as_bytes())
            )));
        }
        let value = unquote(value.trim()).map_err(fail)?;
        if value.contains('\0') {
            return Err(fail(format!("the value of {key:?} holds a NUL byte")));
        }
        vars.push((key.to_string(), value));
    }
    Ok(vars)
}

/// A value without its quotes (see [`parse`]).
fn unquote(v: &str) -> Result<String, String> {
    let quoted = |q: char| v.len() >= 2 && v.starts_with(q) && v.ends_with(q);
    if quoted('\'') {
        return Ok(v[1..v.len() - 1].to_string());
    }
    if !quoted('"') {
        if v.starts_with(['"', '\'']) {
            return Err(format!(
                "the value {v:?} opens a quote it does not close (a value is one line)"
            ));
        }
        return Ok(v.to_string());
    }
    let mut out = String::new();
    let mut chars = v[1..v.len() - 1].chars();
    while let Some(c) = chars.next() {
        match (c, c == '\\') {
            (_, true) => match chars.next() {
                Some('n') => out.push('\n'),
                Some(e @ ('"' | '\\' | '$')) => out.push(e),
                Some(e) => {
                    out.push('\\');
                    out.push(e);
                }
                None => return Err(format!("the value {v:?} ends in a lone backslash")),
            },
            ('"', false) => {
                return Err(format!(
                    "the value {v:?} has a quote inside its quotes: write it \\\""
                ));
            }
            (c, false) => out.push(c),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(text: &str) -> Vec<(String, String)> {
        parse(Path::new("e.env"), text.as_bytes()).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn err(text: &str) -> String {
        parse(Path::new("e.env"), text.as_bytes())
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn lines_comments_quotes() {
        let got = vars(
            "# a comment\n\n  ; another\nA=1\nexport B = two words \nC='x \"y\" $z'\n\
             D=\"a\\\"b\\\\c\\nd\"\nE=\nF=x=y\r\n",
        );
        let want = [
            ("A", "1"),
            ("B", "two words"),
            ("C", "x \"y\" $z"),
            ("D", "a\"b\\c\nd"),
            ("E", ""),
            ("F", "x=y"),
        ];
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_bad_line_is_named_by_file_and_line() {
        assert!(err("A=1\nnot a variable\n").starts_with("env_file e.env:2: "));
        assert!(err("A=1\n\nB=\"open\n").contains("e.env:3: the value"));
        assert!(err("=1\n").contains("e.env:1: the name"));
        assert!(err("A B=1\n").contains("white space"));
        assert!(err("A=\"x\"y\"\n").contains("quote inside"));
    }
}
