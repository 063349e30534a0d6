//! A configuration's mistakes: one [`ConfigError`], every one of a file ([`ConfigErrors`]), and
//! where a byte of the text is (its line, column, key and table).

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The most mistakes one reading lists; with more, a last line says that more may follow.
pub const MAX_MISTAKES: usize = 100;

/// One mistake of a configuration: where, which helper and key, what was expected. Shown as
/// `FILE:LINE:COLUMN: helper "NAME": key `KEY`: MESSAGE`, escaped for a terminal: the name, the
/// key and the message may quote the file's own text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.located())]
pub struct ConfigError {
    /// The file.
    pub file: PathBuf,
    /// 1-based line and column of the problem, when known.
    pub line: Option<usize>,
    pub column: Option<usize>,
    /// The name of the helper at fault, when the mistake is in a helper that has one.
    pub helper: Option<String>,
    /// The key at fault, as a dotted path with the table (`helper[2].stop_grace`), when known.
    pub key: Option<String>,
    /// What was wrong and what was expected.
    pub message: String,
}

impl ConfigError {
    /// The error as it is shown.
    fn located(&self) -> String {
        use crate::base::sanitize::escape;
        let mut out = escape(self.file.as_os_str().as_bytes()).to_string();
        if let Some(l) = self.line {
            out.push_str(&format!(":{l}"));
            if let Some(c) = self.column {
                out.push_str(&format!(":{c}"));
            }
        }
        out.push_str(": ");
        if let Some(h) = &self.helper {
            out.push_str(&format!("helper \"{}\": ", escape(h.as_bytes())));
        }
        if let Some(k) = &self.key {
            out.push_str(&format!("key `{}`: ", escape(k.as_bytes())));
        }
        out.push_str(&escape(self.message.as_bytes()));
        out
    }

    /// An error about the file as a whole.
    pub(super) fn whole(file: &Path, message: String) -> ConfigError {
        ConfigError {
            file: file.to_path_buf(),
            line: None,
            column: None,
            helper: None,
            key: None,
            message,
        }
    }
}

/// Every mistake of a configuration (at least one), in the order of the file: one per line
/// when shown. A syntax error comes alone, since the parser stops at it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.lines().join("\n"))]
pub struct ConfigErrors {
    errors: Vec<ConfigError>,
    /// Reading stopped after [`MAX_MISTAKES`]: more may follow.
    more: bool,
}

impl ConfigErrors {
    /// The mistakes, sorted by their place (those without one last), the first
    /// [`MAX_MISTAKES`] of them; never empty.
    pub(super) fn new(file: &Path, mut errors: Vec<ConfigError>, more: bool) -> ConfigErrors {
        if errors.is_empty() {
            errors.push(ConfigError::whole(
                file,
                "the configuration cannot be read".into(),
            ));
        }
        errors.sort_by_key(|e| (e.line.unwrap_or(usize::MAX), e.column.unwrap_or(0)));
        let more = more || errors.len() > MAX_MISTAKES;
        errors.truncate(MAX_MISTAKES);
        ConfigErrors { errors, more }
    }

    /// The first mistake of the file.
    pub fn first(&self) -> &ConfigError {
        &self.errors[0]
    }

    /// Every mistake, in the order of the file.
    pub fn iter(&self) -> std::slice::Iter<'_, ConfigError> {
        self.errors.iter()
    }

    /// How many mistakes were found.
    pub fn len(&self) -> usize {
        self.errors.len()
    }

    /// Never true: there is at least one mistake (for clippy's `len_without_is_empty`).
    pub fn is_empty(&self) -> bool {
        self.errors.is_empty()
    }

    /// Whether reading stopped at [`MAX_MISTAKES`] mistakes, so more may follow.
    pub fn more(&self) -> bool {
        self.more
    }

    /// Each mistake as it is shown, then a last line when more may follow.
    pub fn lines(&self) -> Vec<String> {
        let mut out: Vec<String> = self.errors.iter().map(ToString::to_string).collect();
        if self.more {
            out.push(format!(
                "{}: more mistakes may follow: the first {} are shown",
                crate::base::sanitize::escape(self.errors[0].file.as_os_str().as_bytes()),
                self.errors.len()
            ));
        }
        out
    }
}

impl From<ConfigError> for ConfigErrors {
    fn from(e: ConfigError) -> ConfigErrors {
        ConfigErrors {
            errors: vec![e],
            more: false,
        }
    }
}

/// `offset`, moved back to the start of the character it falls in (spans come from the
/// parser; this keeps a wrong one from panicking a slice).
fn char_start(text: &str, offset: usize) -> usize {
    let mut o = offset.min(text.len());
    while !text.is_char_boundary(o) {
        o -= 1;
    }
    o
}

/// 1-based (line, column) of byte `offset` in `text`, the column counted in characters.
pub(super) fn line_col(text: &str, offset: usize) -> Option<(usize, usize)> {
    if offset > text.len() {
        return None;
    }
    let before = &text[..char_start(text, offset)];
    let line = before.bytes().filter(|&b| b == b'\n').count() + 1;
    let col = before[before.rfind('\n').map_or(0, |i| i + 1)..]
        .chars()
        .count()
        + 1;
    Some((line, col))
}

/// Builds an error at `span`, naming the key found there and the table it belongs to.
pub(super) fn at_span(
    file: &Path,
    text: &str,
    span: Option<std::ops::Range<usize>>,
    message: String,
) -> ConfigError {
    let Some(span) = span else {
        return ConfigError::whole(file, message);
    };
    let (line, column) = match line_col(text, span.start) {
        Some((l, c)) => (Some(l), Some(c)),
        None => (None, None),
    };
    let key = key_at(text, span.start);
    ConfigError {
        file: file.to_path_buf(),
        line,
        column,
        helper: None,
        key,
        message,
    }
}

/// The dotted key at `offset`: the enclosing table header (with the index of an array of
/// tables) and the key of the line, e.g. `helper[2].stop_grace`.
pub(super) fn key_at(text: &str, offset: usize) -> Option<String> {
    let offset = char_start(text, offset);
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[offset..].find('\n').map_or(text.len(), |i| offset + i);
    let line = &text[line_start..line_end];
    let trimmed = line.trim_start();
    if trimmed.starts_with('[') {
        // The error is in a header itself: the table it opens, numbered.
        return table_at(text, line_start + 1).or_else(|| {
            Some(
                trimmed
                    .trim_matches(|c| c == '[' || c == ']' || c == ' ')
                    .to_string(),
            )
        });
    }
    let (key, inner) = line_keys(line, offset - line_start);
    let parts: Vec<String> = [
        table_at(text, line_start),
        key.filter(|k| !k.is_empty()),
        inner.filter(|k| !k.is_empty()),
    ]
    .into_iter()
    .flatten()
    .collect();
    if parts.is_empty() {
        None
    } else {
        Some(parts.join("."))
    }
}

/// The key of `line` (not a header) and, for `a = { b = 1, c = 2 }`, the innermost key left
/// of column `col`.
fn line_keys(line: &str, col: usize) -> (Option<String>, Option<String>) {
    let trimmed = line.trim_start();
    let Some(eq) = line.find('=') else {
        let key = (!trimmed.is_empty() && !trimmed.starts_with('#'))
            .then(|| trimmed.split_whitespace().next().unwrap_or("").to_string());
        return (key, None);
    };
    let key = Some(line[..eq].trim().trim_matches('"').to_string());
    let inner = if col > eq {
        inline_key(&line[..col])
    } else {
        None
    };
    (key, inner)
}

/// In `left`, the text of an inline table's line up to the error: the last `name =` after a
/// `{` or `,`.
fn inline_key(left: &str) -> Option<String> {
    let brace = left.rfind('{')?;
    let seg = &left[brace + 1..];
    let seg = seg.rsplit(',').next().unwrap_or(seg);
    if let Some(e) = seg.find('=') {
        Some(seg[..e].trim().trim_matches('"').to_string())
    } else if !seg.trim().is_empty() {
        Some(seg.trim().to_string())
    } else {
        None
    }
}

/// The header of the table that contains byte `offset`, arrays of tables numbered from 1
/// (`helper[2]`, `helper[2].generation[1]`).
pub(super) fn table_at(text: &str, offset: usize) -> Option<String> {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut current: Option<String> = None;
    let mut pos = 0;
    for line in text.split_inclusive('\n') {
        if pos >= offset {
            break;
        }
        pos += line.len();
        let t = line.trim();
        if let Some(name) = t.strip_prefix("[[").and_then(|r| r.split("]]").next()) {
            let name = name.trim().to_string();
            let n = counts.entry(name.clone()).or_insert(0);
            *n += 1;
            // Sub-arrays restart their count under each new parent element.
            let prefix = format!("{name}.");
            counts.retain(|k, _| !k.starts_with(&prefix));
            let mut label = String::new();
            let mut path = String::new();
            for (i, seg) in name.split('.').enumerate() {
                if i > 0 {
                    path.push('.');
                    label.push('.');
                }
                path.push_str(seg);
                label.push_str(seg);
                if let Some(c) = counts.get(&path) {
                    label.push_str(&format!("[{c}]"));
                }
            }
            current = Some(label);
        } else if let Some(name) = t.strip_prefix('[').and_then(|r| r.split(']').next()) {
            current = Some(name.trim().to_string());
        }
    }
    current
}
