//! Reading a configuration to its end: every mistake of a file at once, each where it was
//! written.
//!
//! The toml crate parses the text into a tree that keeps where each key and value was written
//! ([`DeTable`]); a syntax error stops it, so syntax errors come one at a time. serde then stops
//! at the first field it cannot take: [`Document::deserialize`] notes that mistake, takes the
//! field out of the tree (the deepest key whose key or value holds the place of the error) and
//! deserializes again, until the rest goes through; each element of the long array of the file
//! (the helpers) is read apart, so that a mistake costs a new reading of its helper only. A
//! required field that is missing, or that was taken out, gets a placeholder so that the other
//! fields of its table are still read. The
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

use super::error::{ConfigError, ConfigErrors, MAX_MISTAKES, at_span, line_col};

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

/// A parsed file: its name, its text and the tree of what was written where (a table).
pub struct Document<'i> {
    file: &'i Path,
    text: &'i str,
    root: Spanned<DeValue<'i>>,
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
            Ok(root) => {
                let span = root.span();
                let root = Spanned::new(span, DeValue::Table(root.into_inner()));
                Ok(Document { file, text, root })
            }
            Err(e) => Err(at_span(file, text, e.span(), e.message().trim_end().to_string()).into()),
        }
    }

    /// The file's name, as errors show it.
    pub fn file(&self) -> &Path {
        self.file
    }

    /// Deserializes the whole file as `T`, collecting every mistake serde finds (see the
    /// module's documentation): the file without its array `key` (of tables, `[[key]]`) as
    /// `T`, then each element of that array as `E`, given to `T` by `set`. A mistake then costs
    /// a new reading of its element, not of the whole file (a file of a hundred thousand
    /// helpers with a mistake in each of the first hundred would otherwise be read again a
    /// hundred times). A `key` that is not an array is read with the rest, and refused as `T`
    /// says.
    pub fn deserialize<T: Deserialize<'i>, E: Deserialize<'i>>(
        &self,
        key: &str,
        set: impl FnOnce(&mut T, Vec<E>),
    ) -> Read<T> {
        let mut read = Read {
            value: None,
            mistakes: Vec::new(),
            taken_out: Vec::new(),
            more: false,
        };
        let mut rest = self.root.clone();
        let mut elements = Vec::new();
        if let DeValue::Table(t) = rest.get_mut()
            && let Some(v) = t.get_mut(key)
            && let DeValue::Array(a) = v.get_mut()
        {
            elements = std::mem::replace(a, std::iter::empty().collect())
                .into_iter()
                .collect();
        }
        let value = self.read_value::<T, T>(&KeyPath::root(), rest, &mut read);
        let base = KeyPath::root().key(key);
        let mut read_elements = Vec::with_capacity(elements.len());
        for (i, e) in elements.into_iter().enumerate() {
            read_elements.push(self.read_value::<E, T>(&base.index(i), e, &mut read));
        }
        // An element that could not be read at all leaves the others without their places.
        let all: Option<Vec<E>> = read_elements.into_iter().collect();
        read.value = value.zip(all).map(|(mut v, all)| {
            set(&mut v, all);
            v
        });
        read
    }

    /// Deserializes `value`, written at `base`, as `T`: on each error, the mistake is noted
    /// (in `read`) and the field at fault taken out, then `value` is read again.
    fn read_value<T: Deserialize<'i>, R>(
        &self,
        base: &KeyPath,
        mut value: Spanned<DeValue<'i>>,
        read: &mut Read<R>,
    ) -> Option<T> {
        let mut placed: Vec<KeyPath> = Vec::new();
        loop {
            let e = match T::deserialize(ValueDeserializer::from(value.clone())) {
                Ok(v) => return Some(v),
                Err(e) => e,
            };
            if read.mistakes.len() >= MAX_MISTAKES {
                read.more = true;
                return None;
            }
            let message = e.message().trim_end().to_string();
            let Some(at) = e.span() else {
                read.mistakes.push(self.error_at(base, None, message));
                return None;
            };
            if at == placeholder_span() {
                // A placeholder that does not fit: nothing more can be read past it.
                return None;
            }
            if !self.mend(base, value.get_mut(), at, message, read, &mut placed) {
                return None;
            }
        }
    }

    /// Notes mistake `message`, at `at` in `value` (written at `base`), and mends `value` so
    /// that it can be read again past it: a placeholder for a missing field, or the field at
    /// fault taken out. False when it cannot be mended.
    fn mend<R>(
        &self,
        base: &KeyPath,
        value: &mut DeValue<'i>,
        at: Range<usize>,
        message: String,
        read: &mut Read<R>,
        placed: &mut Vec<KeyPath>,
    ) -> bool {
        let node = deepest(value, &at);
        if let Some(field) = missing_field(&message).map(str::to_string) {
            let path = under(base, &node.key(&field));
            if !read.taken_out.contains(&path) {
                read.mistakes.push(self.error_at(&path, Some(at), message));
                read.taken_out.push(path.clone());
            }
            return place_once(value, &node, &field, path, placed);
        }
        // An error about a table as a whole after a key of it was taken out: a required
        // field whose type words its absence its own way. That key's mistake was reported
        // already: its placeholder goes in.
        let table = under(base, &node);
        if let Some(path) = self.retaken(&table, &at, &read.taken_out, placed) {
            let Some(Step::Key(field)) = path.0.last().cloned() else {
                return false;
            };
            return place_once(value, &node, &field, path, placed);
        }
        read.mistakes.push(self.error_at(&table, Some(at), message));
        let key = node.to_last_key();
        if key.0.is_empty() || !take_out(value, &key) {
            return false;
        }
        read.taken_out.push(under(base, &key));
        true
    }

    /// The key of the table at `table` (written at `at`) taken out last and not given its
    /// placeholder yet, if any.
    fn retaken(
        &self,
        table: &KeyPath,
        at: &Range<usize>,
        taken_out: &[KeyPath],
        placed: &[KeyPath],
    ) -> Option<KeyPath> {
        let retaken = taken_out
            .iter()
            .rev()
            .find(|t| t.0.len() == table.0.len() + 1 && t.overlaps(table) && !placed.contains(t));
        retaken.filter(|_| self.is_table_at(table, at)).cloned()
    }

    /// The value at `path` as written, if it was.
    fn get(&self, path: &KeyPath) -> Option<&Spanned<DeValue<'i>>> {
        let mut here = &self.root;
        for step in &path.0 {
            here = match step {
                Step::Key(k) => here.get_ref().as_table()?.get(k.as_str())?,
                Step::Index(i) => here.get_ref().as_array()?.get(*i)?,
            };
        }
        Some(here)
    }

    /// Where the value at `path` was written: its span, or that of the nearest table or array
    /// it would be in (a default that was not written).
    pub fn span_of(&self, path: &KeyPath) -> Option<Range<usize>> {
        (0..=path.0.len())
            .rev()
            .find_map(|n| self.get(&KeyPath(path.0[..n].to_vec())))
            .map(Spanned::span)
    }

    /// Whether `path` leads to a table written at `at` (its header, or its braces).
    fn is_table_at(&self, path: &KeyPath, at: &Range<usize>) -> bool {
        self.get(path)
            .is_some_and(|v| v.span() == *at && v.get_ref().is_table())
    }

    /// The name of the helper `path` is in (`helper[N]...`), when it was written as a string.
    pub fn helper_name(&self, path: &KeyPath) -> Option<String> {
        match path.0.as_slice() {
            [Step::Key(k), Step::Index(i), ..] if k == "helper" => self
                .get(&KeyPath::root().key("helper").index(*i).key("name"))
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
fn deepest(root: &DeValue<'_>, at: &Range<usize>) -> KeyPath {
    fn value(v: &DeValue<'_>, path: &mut KeyPath, at: &Range<usize>, best: &mut KeyPath) {
        let mut visit = |step: Step, key: Option<Range<usize>>, v: &Spanned<DeValue<'_>>| {
            path.0.push(step);
            let here = key.is_some_and(|k| holds(&k, at)) || holds(&v.span(), at);
            if here && path.0.len() > best.0.len() {
                *best = path.clone();
            }
            value(v.get_ref(), path, at, best);
            path.0.pop();
        };
        match v {
            DeValue::Table(t) => {
                for (k, v) in t.iter() {
                    visit(Step::Key(k.get_ref().to_string()), Some(k.span()), v);
                }
            }
            DeValue::Array(a) => {
                for (i, e) in a.iter().enumerate() {
                    visit(Step::Index(i), None, e);
                }
            }
            _ => {}
        }
    }
    let mut best = KeyPath::root();
    value(root, &mut KeyPath::root(), at, &mut best);
    best
}

/// The table at `path` under `root` (`root` itself for an empty path), to change.
fn table_mut<'a, 'i>(root: &'a mut DeValue<'i>, path: &KeyPath) -> Option<&'a mut DeTable<'i>> {
    let mut here: &'a mut DeValue<'i> = root;
    for step in &path.0 {
        here = match (step, here) {
            (Step::Key(k), DeValue::Table(t)) => t.get_mut(k.as_str())?.get_mut(),
            (Step::Index(i), DeValue::Array(a)) => a.get_mut(*i)?.get_mut(),
            _ => return None,
        };
    }
    match here {
        DeValue::Table(t) => Some(t),
        _ => None,
    }
}

/// Takes the key at `path` out of its table; false when there is none.
fn take_out(root: &mut DeValue<'_>, path: &KeyPath) -> bool {
    let Some((Step::Key(k), parent)) = path.0.split_last() else {
        return false;
    };
    table_mut(root, &KeyPath(parent.to_vec()))
        .and_then(|t| t.remove(k.as_str()))
        .is_some()
}

/// Puts a placeholder for the required `field` into the table at `table`: a string, which
/// every required field takes (a name, a command given as its program alone).
fn place(root: &mut DeValue<'_>, table: &KeyPath, field: &str) -> bool {
    let Some(t) = table_mut(root, table) else {
        return false;
    };
    t.insert(
        Spanned::new(placeholder_span(), Cow::Owned(field.to_string())),
        Spanned::new(placeholder_span(), DeValue::String(Cow::Borrowed("-"))),
    );
    true
}

/// Puts a placeholder for `field` (at `path`) into the table at `table`, unless it had one
/// already; false when it had, or when there is no such table.
fn place_once(
    root: &mut DeValue<'_>,
    table: &KeyPath,
    field: &str,
    path: KeyPath,
    placed: &mut Vec<KeyPath>,
) -> bool {
    if placed.contains(&path) || !place(root, table, field) {
        return false;
    }
    placed.push(path);
    true
}

/// Path `rel`, taken from `base`.
fn under(base: &KeyPath, rel: &KeyPath) -> KeyPath {
    let mut p = base.clone();
    p.0.extend(rel.0.iter().cloned());
    p
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
