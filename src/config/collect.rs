//! Reading a configuration to its end: every mistake of a file at once, each where it was
//! written.
//!
//! The toml crate parses the text into a tree that keeps where each key and value was written
//! ([`DeTable`]); a syntax error stops it, so syntax errors come one at a time. serde then stops
//! at the first field it cannot take: [`Document::deserialize`] notes that mistake, takes the
//! field out of the tree (the deepest key whose key or value holds the place of the error) and
//! deserializes again, until the rest goes through. A required field that is missing, or that
//! was taken out, gets a placeholder so that the other fields of its table are still read. The
//! checks that follow (`Config::validate`, the system checks of `--check`) skip what was taken
//! out ([`Read::taken_out`]), so no mistake is reported twice and none is reported about a
//! default that stands in for a field written wrong. At most [`MAX_MISTAKES`] are collected.

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;
use std::path::Path;

use serde::Deserialize;
use toml::Spanned;
use toml::de::{DeTable, DeValue, ValueDeserializer};

use super::{ConfigError, ConfigErrors, at_span, line_col};

/// The most mistakes one reading lists; with more, a last line says that more may follow.
pub const MAX_MISTAKES: usize = 100;

/// One step from a table to a value: a key, or an index in an array (from 0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Key(String),
    Index(usize),
}

/// Where a value sits, from the root of the file: `helper[2].backoff.max` is the key `helper`,
/// its element 1, the key `backoff`, the key `max`. Shown with arrays numbered from 1, as the
/// errors name them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyPath(pub Vec<Step>);

impl KeyPath {
    /// The root.
    pub fn root() -> KeyPath {
        KeyPath::default()
    }

    /// This path, then `key`.
    pub fn key(&self, key: &str) -> KeyPath {
        let mut p = self.clone();
        p.0.push(Step::Key(key.to_string()));
        p
    }

    /// This path, then element `i` (from 0).
    pub fn index(&self, i: usize) -> KeyPath {
        let mut p = self.clone();
        p.0.push(Step::Index(i));
        p
    }

    /// Whether one of the two paths leads into the other (or they are the same).
    pub fn overlaps(&self, other: &KeyPath) -> bool {
        let n = self.0.len().min(other.0.len());
        self.0[..n] == other.0[..n]
    }

    /// The path cut after its last key (an element of an array is taken out with its key).
    fn to_last_key(&self) -> KeyPath {
        let end = self
            .0
            .iter()
            .rposition(|s| matches!(s, Step::Key(_)))
            .map_or(0, |i| i + 1);
        KeyPath(self.0[..end].to_vec())
    }
}

impl fmt::Display for KeyPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (n, step) in self.0.iter().enumerate() {
            match step {
                Step::Index(i) => write!(f, "[{}]", i + 1)?,
                Step::Key(k) => {
                    if n > 0 {
                        f.write_str(".")?;
                    }
                    let bare = !k.is_empty()
                        && k.bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
                    if bare {
                        f.write_str(k)?;
                    } else {
                        write!(f, "\"{}\"", k.replace('\\', "\\\\").replace('"', "\\\""))?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// What [`Document::deserialize`] read: the value (when the rest of the file went through),
/// the mistakes, and the paths taken out or filled with a placeholder on the way.
#[derive(Debug)]
pub struct Read<T> {
    pub value: Option<T>,
    pub mistakes: Vec<ConfigError>,
    pub taken_out: Vec<KeyPath>,
    /// [`MAX_MISTAKES`] were collected and reading stopped there.
    pub more: bool,
}

impl<T> Read<T> {
    /// Whether a check of `path` must be skipped: something in it, or around it, was taken out.
    pub fn skipped(&self, path: &KeyPath) -> bool {
        self.taken_out.iter().any(|t| t.overlaps(path))
    }
}

/// A parsed file: its name, its text and the tree of what was written where.
pub struct Document<'i> {
    file: &'i Path,
    text: &'i str,
    root: Spanned<DeTable<'i>>,
}

/// The place given to a placeholder: past the end of any file, so that an error at it is
/// told apart.
fn placeholder_span() -> Range<usize> {
    usize::MAX..usize::MAX
}

impl<'i> Document<'i> {
    /// Parses `text` (the syntax only); the error is the first syntax error, located.
    pub fn parse(file: &'i Path, text: &'i str) -> Result<Document<'i>, ConfigErrors> {
        match DeTable::parse(text) {
            Ok(root) => Ok(Document { file, text, root }),
            Err(e) => Err(at_span(file, text, e.span(), e.message().trim_end().to_string()).into()),
        }
    }

    /// The file's name, as errors show it.
    pub fn file(&self) -> &Path {
        self.file
    }

    /// Deserializes the whole file as `T`, collecting every mistake serde finds (see the
    /// module's documentation).
    pub fn deserialize<T: Deserialize<'i>>(&self) -> Read<T> {
        let mut root = self.root.get_ref().clone();
        let mut read = Read {
            value: None,
            mistakes: Vec::new(),
            taken_out: Vec::new(),
            more: false,
        };
        let mut placed: Vec<KeyPath> = Vec::new();
        loop {
            let whole = Spanned::new(self.root.span(), DeValue::Table(root.clone()));
            let e = match T::deserialize(ValueDeserializer::from(whole)) {
                Ok(v) => {
                    read.value = Some(v);
                    return read;
                }
                Err(e) => e,
            };
            if read.mistakes.len() >= MAX_MISTAKES {
                read.more = true;
                return read;
            }
            let message = e.message().trim_end().to_string();
            let Some(at) = e.span() else {
                read.mistakes
                    .push(self.error_at(&KeyPath::root(), None, message));
                return read;
            };
            if at == placeholder_span() {
                // A placeholder that does not fit: nothing more can be read past it.
                return read;
            }
            let node = deepest(&root, &at);
            if let Some(field) = missing_field(&message).map(str::to_string) {
                let field = field.as_str();
                let path = node.key(field);
                if !read.taken_out.contains(&path) {
                    read.mistakes.push(self.error_at(&path, Some(at), message));
                    read.taken_out.push(path.clone());
                }
                if placed.contains(&path) || !place(&mut root, &node, field) {
                    return read;
                }
                placed.push(path);
                continue;
            }
            // An error about a table as a whole after a key of it was taken out: a required
            // field whose type words its absence its own way. That key's mistake was reported
            // already: its placeholder goes in.
            let retaken = read.taken_out.iter().rev().find(|t| {
                t.0.len() == node.0.len() + 1 && t.overlaps(&node) && !placed.contains(t)
            });
            if let Some(path) = retaken.filter(|_| self.is_table_at(&node, &at)).cloned() {
                let Some(Step::Key(field)) = path.0.last() else {
                    return read;
                };
                if !place(&mut root, &node, field) {
                    return read;
                }
                placed.push(path);
                continue;
            }
            read.mistakes.push(self.error_at(&node, Some(at), message));
            let key = node.to_last_key();
            if key.0.is_empty() || !take_out(&mut root, &key) {
                return read;
            }
            read.taken_out.push(key);
        }
    }

    /// Where the value at `path` was written: its span, or that of the nearest table or array
    /// it would be in (a default that was not written).
    pub fn span_of(&self, path: &KeyPath) -> Option<Range<usize>> {
        let mut span = None;
        let mut here: &DeValue<'_> = &DeValue::Boolean(false);
        let root = self.root.get_ref();
        for (n, step) in path.0.iter().enumerate() {
            let next = match (n, step) {
                (0, Step::Key(k)) => root.get(k.as_str()),
                (_, Step::Key(k)) => here.as_table().and_then(|t| t.get(k.as_str())),
                (_, Step::Index(i)) => here.as_array().and_then(|a| a.get(*i)),
            };
            match next {
                Some(v) => {
                    span = Some(v.span());
                    here = v.get_ref();
                }
                None => break,
            }
        }
        span
    }

    /// Whether `path` leads to a table written at `at` (its header, or its braces).
    fn is_table_at(&self, path: &KeyPath, at: &Range<usize>) -> bool {
        let mut here = self.root.get_ref();
        let mut span = self.root.span();
        let mut value: Option<&DeValue<'_>> = None;
        for step in &path.0 {
            let next = match (step, value) {
                (Step::Key(k), None) => here.get(k.as_str()),
                (Step::Key(k), Some(DeValue::Table(t))) => t.get(k.as_str()),
                (Step::Index(i), Some(DeValue::Array(a))) => a.get(*i),
                _ => None,
            };
            let Some(next) = next else { return false };
            span = next.span();
            value = Some(next.get_ref());
            if let DeValue::Table(t) = next.get_ref() {
                here = t;
            }
        }
        span == *at && value.is_none_or(|v| v.is_table())
    }

    /// The name of the helper `path` is in (`helper[N]...`), when it was written as a string.
    pub fn helper_name(&self, path: &KeyPath) -> Option<String> {
        match path.0.as_slice() {
            [Step::Key(k), Step::Index(i), ..] if k == "helper" => self
                .root
                .get_ref()
                .get("helper")
                .and_then(|h| h.get_ref().as_array())
                .and_then(|a| a.get(*i))
                .and_then(|t| t.get_ref().as_table())
                .and_then(|t| t.get("name"))
                .and_then(|n| n.get_ref().as_str())
                .filter(|n| !n.is_empty())
                .map(str::to_string),
            _ => None,
        }
    }

    /// A mistake about the value at `path`, written at `span` (else where [`Document::span_of`]
    /// finds it), naming its helper and its key.
    pub fn error_at(
        &self,
        path: &KeyPath,
        span: Option<Range<usize>>,
        message: String,
    ) -> ConfigError {
        let span = span.or_else(|| self.span_of(path));
        let (line, column) = span
            .and_then(|s| line_col(self.text, s.start))
            .map_or((None, None), |(l, c)| (Some(l), Some(c)));
        ConfigError {
            file: self.file.to_path_buf(),
            line,
            column,
            helper: self.helper_name(path),
            key: (!path.0.is_empty()).then(|| path.to_string()),
            message,
        }
    }
}

/// `missing field `NAME``, serde's words for a required field that is not there.
fn missing_field(message: &str) -> Option<&str> {
    message
        .strip_prefix("missing field `")?
        .split('`')
        .next()
        .filter(|f| !f.is_empty())
}

fn holds(outer: &Range<usize>, inner: &Range<usize>) -> bool {
    outer.start <= inner.start && inner.end <= outer.end
}

/// The deepest key or array element whose key or value holds `at` (the root when none does).
/// Every node is visited: a table opened by a header (`[[helper]]`) has the header as its
/// span, not the keys that follow it.
fn deepest(root: &DeTable<'_>, at: &Range<usize>) -> KeyPath {
    fn table(t: &DeTable<'_>, path: &mut KeyPath, at: &Range<usize>, best: &mut KeyPath) {
        for (k, v) in t.iter() {
            path.0.push(Step::Key(k.get_ref().to_string()));
            if (holds(&k.span(), at) || holds(&v.span(), at)) && path.0.len() > best.0.len() {
                *best = path.clone();
            }
            value(v.get_ref(), path, at, best);
            path.0.pop();
        }
    }
    fn value(v: &DeValue<'_>, path: &mut KeyPath, at: &Range<usize>, best: &mut KeyPath) {
        match v {
            DeValue::Table(t) => table(t, path, at, best),
            DeValue::Array(a) => {
                for (i, e) in a.iter().enumerate() {
                    path.0.push(Step::Index(i));
                    if holds(&e.span(), at) && path.0.len() > best.0.len() {
                        *best = path.clone();
                    }
                    value(e.get_ref(), path, at, best);
                    path.0.pop();
                }
            }
            _ => {}
        }
    }
    let mut best = KeyPath::root();
    table(root, &mut KeyPath::root(), at, &mut best);
    best
}

/// The table at `path` (the root for an empty path), to change.
fn table_mut<'a, 'i>(root: &'a mut DeTable<'i>, path: &KeyPath) -> Option<&'a mut DeTable<'i>> {
    let mut here: &'a mut DeTable<'i> = root;
    let mut steps = path.0.iter().peekable();
    while let Some(step) = steps.next() {
        let Step::Key(k) = step else { return None };
        let mut v: &'a mut DeValue<'i> = here.get_mut(k.as_str())?.get_mut();
        while let Some(Step::Index(i)) = steps.peek() {
            let DeValue::Array(a) = v else { return None };
            v = a.get_mut(*i)?.get_mut();
            steps.next();
        }
        let DeValue::Table(t) = v else { return None };
        here = t;
    }
    Some(here)
}

/// Takes the key at `path` out of its table; false when there is none.
fn take_out(root: &mut DeTable<'_>, path: &KeyPath) -> bool {
    let Some((Step::Key(k), parent)) = path.0.split_last() else {
        return false;
    };
    table_mut(root, &KeyPath(parent.to_vec()))
        .and_then(|t| t.remove(k.as_str()))
        .is_some()
}

/// Puts a placeholder for the required `field` into the table at `table`: a string, which
/// every required field takes (a name, a command given as its program alone).
fn place(root: &mut DeTable<'_>, table: &KeyPath, field: &str) -> bool {
    let Some(t) = table_mut(root, table) else {
        return false;
    };
    t.insert(
        Spanned::new(placeholder_span(), Cow::Owned(field.to_string())),
        Spanned::new(placeholder_span(), DeValue::String(Cow::Borrowed("-"))),
    );
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_shown_as_the_errors_name_them() {
        let p = KeyPath::root()
            .key("helper")
            .index(1)
            .key("backoff")
            .key("max");
        assert_eq!(p.to_string(), "helper[2].backoff.max");
        let p = KeyPath::root().key("helper").index(0).key("env").key("A=B");
        assert_eq!(p.to_string(), "helper[1].env.\"A=B\"");
        assert_eq!(KeyPath::root().key("a\"b\\").to_string(), "\"a\\\"b\\\\\"");
        assert!(p.overlaps(&KeyPath::root().key("helper").index(0)));
        assert!(!p.overlaps(&KeyPath::root().key("helper").index(1)));
        assert_eq!(
            KeyPath::root().key("a").index(3).to_last_key(),
            KeyPath::root().key("a")
        );
    }

    #[test]
    fn the_deepest_node_holding_a_place_is_found_under_headers_too() {
        let text = "[[helper]]\nname = \"a\"\n[helper.backoff]\nmax = \"x\"\n\
                    [[helper]]\ngeneration = [{ signal = 1 }]\n";
        let doc = Document::parse(Path::new("f"), text).unwrap();
        let root = doc.root.get_ref();
        let at = |needle: &str| {
            let i = text.find(needle).unwrap();
            i..i + needle.len()
        };
        assert_eq!(
            deepest(root, &at("\"x\"")).to_string(),
            "helper[1].backoff.max"
        );
        assert_eq!(
            deepest(root, &at("1 }")).to_string().as_str(),
            "helper[2].generation[1]",
            "a place inside an inline table's braces but no value: the table"
        );
        assert_eq!(
            deepest(root, &at("1")).to_string(),
            "helper[2].generation[1].signal"
        );
        let mut t = root.clone();
        assert!(take_out(
            &mut t,
            &KeyPath::root()
                .key("helper")
                .index(0)
                .key("backoff")
                .key("max")
        ));
        assert!(!take_out(
            &mut t,
            &KeyPath::root()
                .key("helper")
                .index(0)
                .key("backoff")
                .key("max")
        ));
        assert!(place(
            &mut t,
            &KeyPath::root().key("helper").index(1),
            "name"
        ));
        assert_eq!(
            doc.span_of(&KeyPath::root().key("helper").index(0).key("nope")),
            doc.span_of(&KeyPath::root().key("helper").index(0)),
            "a key not written: the place of its table"
        );
        assert_eq!(
            doc.helper_name(&KeyPath::root().key("helper").index(0).key("x"))
                .as_deref(),
            Some("a")
        );
        assert_eq!(
            doc.helper_name(&KeyPath::root().key("helper").index(1)),
            None
        );
    }
}
