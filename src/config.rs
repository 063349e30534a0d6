//! The configuration of `foster run`: a TOML file declaring the helpers to supervise.
//!
//! Owns parsing and validation, nothing else: [`Config::load`] reads a file and returns either a
//! config that every later step can trust (names unique, commands non-empty, signals known,
//! durations positive) or one [`ConfigError`] naming the file, line, column, key and what was
//! expected. Unknown keys are errors, so a misspelt key never silently falls back to a default.
//! The reference of every key is `docs/run.md`.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sys::signal::Signal;
use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};
use toml::Spanned;

/// The whole file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Settings of the supervisor itself (`[supervisor]`, optional).
    #[serde(default)]
    pub supervisor: SupervisorSection,
    /// The helpers (`[[helper]]`), in launch order.
    #[serde(default, rename = "helper")]
    pub helpers: Vec<Helper>,
}

/// `[supervisor]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SupervisorSection {
    /// The policy for adopted processes whose helper foster cannot tell.
    #[serde(default)]
    pub orphan_policy: GenerationPolicy,
}

/// One `[[helper]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Helper {
    /// Unique name, used in events and logs.
    pub name: Spanned<HelperName>,
    /// Program and arguments; the program is looked up in `PATH` when it has no `/`.
    pub command: CommandLine,
    /// Variables added to (or replacing those of) foster's own environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Working directory (default: foster's).
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// User to run as (name or number; default: foster's).
    #[serde(default)]
    pub user: Option<String>,
    /// Group to run as (name or number; default: the user's primary group, or foster's).
    #[serde(default)]
    pub group: Option<String>,
    /// When to start the helper again after it ends.
    #[serde(default)]
    pub restart: RestartMode,
    /// Delays between restarts and how many in a row before giving up.
    #[serde(default)]
    pub backoff: Backoff,
    /// The signal that asks the helper to stop (default `TERM`).
    #[serde(default = "default_stop_signal")]
    pub stop_signal: SignalName,
    /// How long the helper (and its tree) may take to stop before SIGKILL (default `10s`).
    #[serde(default = "default_stop_grace")]
    pub stop_grace: PositiveDuration,
    /// The helper is itself a subreaper (nested `foster run` is recognised without this).
    #[serde(default)]
    pub subreaper: bool,
    /// Policy per generation: the first applies to the helper itself, the second to its
    /// children, and so on; the last one applies to every deeper generation.
    #[serde(default, rename = "generation")]
    pub generations: Vec<GenerationPolicy>,
}

impl Helper {
    /// The gate policy chain of the helper: its own generation first, then its children's...
    pub fn policy_chain(&self) -> crate::policy::Policy {
        let gens: Vec<GenerationPolicy> = if self.generations.is_empty() {
            vec![GenerationPolicy::default()]
        } else {
            self.generations.clone()
        };
        let mut chain: Option<crate::policy::Policy> = None;
        for g in gens.iter().rev() {
            let p = g.to_policy();
            chain = Some(match chain {
                Some(next) => p.with_next(next),
                None => p,
            });
        }
        chain.expect("at least one generation")
    }

    /// The policy of generation `n` (1 = the helper itself).
    pub fn generation(&self, n: u32) -> GenerationPolicy {
        let i = (n.max(1) - 1) as usize;
        self.generations
            .get(i)
            .or(self.generations.last())
            .cloned()
            .unwrap_or_default()
    }

    /// The helper's name.
    pub fn name(&self) -> &str {
        &self.name.get_ref().0
    }
}

fn default_stop_signal() -> SignalName {
    SignalName(Signal::SIGTERM as i32)
}

fn default_stop_grace() -> PositiveDuration {
    PositiveDuration(Duration::from_secs(10))
}

/// What one generation gets when its parent dies (`[[helper.generation]]`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct GenerationPolicy {
    /// The parent-death signal (default `TERM`, or `KILL` for reaction `kill`).
    #[serde(default)]
    pub signal: Option<SignalName>,
    /// What the process does with it: `exit`, `notify` or `kill` (default `exit`).
    #[serde(default = "default_reaction")]
    pub reaction: Reaction,
    /// How long it may take before SIGKILL (default `5s`).
    #[serde(default = "default_grace")]
    pub grace: PositiveDuration,
}

fn default_reaction() -> Reaction {
    Reaction::Exit
}

fn default_grace() -> PositiveDuration {
    PositiveDuration(Duration::from_secs(5))
}

impl GenerationPolicy {
    /// The signal number: the one given, else `KILL` for reaction `kill`, else `TERM`.
    pub fn signal(&self) -> i32 {
        match (self.signal, self.reaction) {
            (Some(s), _) => s.0,
            (None, Reaction::Kill) => libc::SIGKILL,
            (None, _) => libc::SIGTERM,
        }
    }

    /// This generation as a gate policy (without a next generation).
    pub fn to_policy(&self) -> crate::policy::Policy {
        crate::policy::Policy::new(self.signal(), self.reaction).with_grace(self.grace.0)
    }
}

impl Default for GenerationPolicy {
    fn default() -> Self {
        GenerationPolicy {
            signal: None,
            reaction: Reaction::Exit,
            grace: default_grace(),
        }
    }
}

/// A generation's reaction to its parent's death (`exit`, `notify`, `kill`).
pub use crate::policy::Reaction;

/// `restart = "never" | "on-failure" | "always"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RestartMode {
    /// Never start it again.
    #[default]
    Never,
    /// Again when it ends with a non-zero code or by a signal.
    OnFailure,
    /// Again whenever it ends.
    Always,
}

/// `backoff = { initial = "1s", max = "30s", limit = 5, reset_after = "60s" }`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Backoff {
    /// The delay before the first restart; each further one doubles it.
    #[serde(default = "default_initial")]
    pub initial: PositiveDuration,
    /// The longest delay.
    #[serde(default = "default_max")]
    pub max: PositiveDuration,
    /// How many restarts in a row before foster gives up on the helper (0: none).
    #[serde(default = "default_limit")]
    pub limit: u32,
    /// A run at least this long resets the count and the delay.
    #[serde(default = "default_reset_after")]
    pub reset_after: PositiveDuration,
}

fn default_initial() -> PositiveDuration {
    PositiveDuration(Duration::from_secs(1))
}
fn default_max() -> PositiveDuration {
    PositiveDuration(Duration::from_secs(30))
}
fn default_limit() -> u32 {
    5
}
fn default_reset_after() -> PositiveDuration {
    PositiveDuration(Duration::from_secs(60))
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            initial: default_initial(),
            max: default_max(),
            limit: default_limit(),
            reset_after: default_reset_after(),
        }
    }
}

/// A helper name: non-empty, no control characters (it appears in logs and events).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HelperName(pub String);

impl<'de> Deserialize<'de> for HelperName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if s.is_empty() {
            return Err(de::Error::custom(
                "the helper name is empty: expected a non-empty name",
            ));
        }
        if s.chars().any(char::is_control) {
            return Err(de::Error::custom(
                "the helper name contains a control character: expected printable text",
            ));
        }
        Ok(HelperName(s))
    }
}

/// A non-empty command: program then arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandLine(pub Vec<String>);

impl CommandLine {
    /// The program (first word).
    pub fn program(&self) -> &str {
        &self.0[0]
    }
    /// The arguments after the program.
    pub fn args(&self) -> &[String] {
        &self.0[1..]
    }
}

impl<'de> Deserialize<'de> for CommandLine {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Form {
            List(Vec<String>),
            One(String),
        }
        let words = match Form::deserialize(d).map_err(|_| {
            de::Error::custom(
                "expected a list of strings, program first: command = [\"/bin/sleep\", \"60\"]",
            )
        })? {
            Form::List(v) => v,
            Form::One(s) => vec![s],
        };
        match words.first() {
            None => Err(de::Error::custom(
                "the command is empty: expected at least the program, e.g. [\"/bin/sleep\", \"60\"]",
            )),
            Some(p) if p.is_empty() => Err(de::Error::custom(
                "the program (first word of the command) is an empty string",
            )),
            Some(_) if words.iter().any(|w| w.contains('\0')) => {
                Err(de::Error::custom("the command contains a NUL byte"))
            }
            Some(_) => Ok(CommandLine(words)),
        }
    }
}

/// A signal given by name (`TERM`, `SIGTERM`, `sigterm`, `RTMIN+3`) or number (`15`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(into = "String")]
pub struct SignalName(pub i32);

impl From<SignalName> for String {
    fn from(s: SignalName) -> String {
        crate::reaper::signal_name(s.0)
    }
}

impl SignalName {
    /// Parses the text forms above; the error says what was expected.
    pub fn parse(text: &str) -> Result<SignalName, String> {
        let t = text.trim();
        let bad = || {
            format!(
                "unknown signal {text:?}: expected a name such as TERM, SIGTERM, HUP, KILL, \
                 USR1, RTMIN+3, or a number from 1 to {}",
                libc::SIGRTMAX()
            )
        };
        if let Ok(n) = t.parse::<i32>() {
            if (1..=libc::SIGRTMAX()).contains(&n) {
                return Ok(SignalName(n));
            }
            return Err(bad());
        }
        let upper = t.to_ascii_uppercase();
        let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
        if let Some(rest) = bare.strip_prefix("RTMIN") {
            let off = if rest.is_empty() {
                0
            } else {
                rest.strip_prefix('+')
                    .and_then(|n| n.parse::<i32>().ok())
                    .ok_or_else(bad)?
            };
            let n = libc::SIGRTMIN() + off;
            return if n <= libc::SIGRTMAX() {
                Ok(SignalName(n))
            } else {
                Err(bad())
            };
        }
        let full = format!("SIG{bare}");
        match full.parse::<Signal>() {
            Ok(s) => Ok(SignalName(s as i32)),
            Err(_) => Err(bad()),
        }
    }
}

impl<'de> Deserialize<'de> for SignalName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Form {
            Num(i64),
            Text(String),
        }
        match Form::deserialize(d)
            .map_err(|_| de::Error::custom("expected a signal name such as \"TERM\" or a number"))?
        {
            Form::Num(n) => SignalName::parse(&n.to_string()).map_err(de::Error::custom),
            Form::Text(s) => SignalName::parse(&s).map_err(de::Error::custom),
        }
    }
}

/// A duration greater than zero, written `"250ms"`, `"5s"`, `"1.5s"`, `"2m"`, `"1h"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct PositiveDuration(pub Duration);

impl PositiveDuration {
    /// Parses the text forms above; the error says what was expected.
    pub fn parse(text: &str) -> Result<PositiveDuration, String> {
        let t = text.trim();
        let expected = "expected a positive duration with a unit: \"250ms\", \"5s\", \"1.5s\", \
                        \"2m\" or \"1h\"";
        if t.starts_with('-') {
            return Err(format!("negative duration {text:?}: {expected}"));
        }
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let value: f64 = num
            .parse()
            .map_err(|_| format!("duration {text:?} has no number: {expected}"))?;
        let scale = match unit.trim() {
            "ms" => 1e-3,
            "s" => 1.0,
            "m" | "min" => 60.0,
            "h" => 3600.0,
            "" => return Err(format!("duration {text:?} has no unit: {expected}")),
            u => {
                return Err(format!(
                    "duration {text:?} has an unknown unit {u:?}: {expected}"
                ));
            }
        };
        let secs = value * scale;
        if secs <= 0.0 {
            return Err(format!("zero duration {text:?}: {expected}"));
        }
        if !secs.is_finite() || secs > 1e9 {
            return Err(format!("duration {text:?} is too long: {expected}"));
        }
        Ok(PositiveDuration(Duration::from_secs_f64(secs)))
    }
}

impl<'de> Deserialize<'de> for PositiveDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Form {
            Num(f64),
            Text(String),
        }
        match Form::deserialize(d)
            .map_err(|_| de::Error::custom("expected a duration such as \"5s\""))?
        {
            Form::Num(n) if n <= 0.0 => Err(de::Error::custom(format!(
                "{} duration {n}: expected a positive duration with a unit, such as \"5s\"",
                if n < 0.0 { "negative" } else { "zero" }
            ))),
            Form::Num(n) => Err(de::Error::custom(format!(
                "the duration {n} has no unit: write it as a string, such as \"{n}s\" or \"{n}ms\""
            ))),
            Form::Text(s) => PositiveDuration::parse(&s).map_err(de::Error::custom),
        }
    }
}

/// A configuration that could not be loaded: where, which key, what was expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file.
    pub file: PathBuf,
    /// 1-based line and column of the problem, when known.
    pub line: Option<usize>,
    pub column: Option<usize>,
    /// The key at fault, as a dotted path with the table (`helper[2].stop_grace`), when known.
    pub key: Option<String>,
    /// What was wrong and what was expected.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
            if let Some(c) = self.column {
                write!(f, ":{c}")?;
            }
        }
        write!(f, ": ")?;
        if let Some(k) = &self.key {
            write!(f, "key `{k}`: ")?;
        }
        write!(f, "{}", self.message)
    }
}

impl std::error::Error for ConfigError {}

impl Config {
    /// Reads and validates `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: path.to_path_buf(),
            line: None,
            column: None,
            key: None,
            message: format!("cannot read the configuration: {e}"),
        })?;
        Config::parse(path, &text)
    }

    /// Parses and validates `text`, naming `file` in errors.
    pub fn parse(file: &Path, text: &str) -> Result<Config, ConfigError> {
        let config: Config = toml::from_str(text).map_err(|e| {
            let msg = e.message().trim_end().to_string();
            at_span(file, text, e.span(), msg)
        })?;
        config.validate(file, text)?;
        Ok(config)
    }

    fn validate(&self, file: &Path, text: &str) -> Result<(), ConfigError> {
        if self.helpers.is_empty() {
            return Err(ConfigError {
                file: file.to_path_buf(),
                line: None,
                column: None,
                key: None,
                message: "no helper declared: expected at least one [[helper]] table with a name \
                          and a command"
                    .into(),
            });
        }
        let mut seen: HashSet<&str> = HashSet::new();
        for h in &self.helpers {
            if !seen.insert(h.name()) {
                return Err(at_span(
                    file,
                    text,
                    Some(h.name.span()),
                    format!(
                        "duplicate helper name {:?}: each helper needs its own name",
                        h.name()
                    ),
                ));
            }
        }
        for h in &self.helpers {
            for (i, g) in h.generations.iter().enumerate() {
                if let Err(e) = g.to_policy().validate() {
                    return Err(ConfigError {
                        file: file.to_path_buf(),
                        line: line_col(text, h.name.span().start).map(|x| x.0),
                        column: None,
                        key: Some(format!("helper {:?} generation[{}]", h.name(), i + 1)),
                        message: e.to_string(),
                    });
                }
            }
            let b = &h.backoff;
            if b.max < b.initial {
                return Err(ConfigError {
                    file: file.to_path_buf(),
                    line: line_col(text, h.name.span().start).map(|x| x.0),
                    column: None,
                    key: Some(format!("helper {:?} backoff.max", h.name())),
                    message: format!(
                        "backoff.max ({:?}) is shorter than backoff.initial ({:?}): expected max >= initial",
                        b.max.0, b.initial.0
                    ),
                });
            }
        }
        Ok(())
    }

    /// Looks a helper up by name.
    pub fn helper(&self, name: &str) -> Option<&Helper> {
        self.helpers.iter().find(|h| h.name() == name)
    }
}

/// 1-based (line, column) of byte `offset` in `text`.
fn line_col(text: &str, offset: usize) -> Option<(usize, usize)> {
    if offset > text.len() {
        return None;
    }
    let before = &text[..offset];
    let line = before.bytes().filter(|&b| b == b'\n').count() + 1;
    let col = before
        .rfind('\n')
        .map_or(before.len(), |i| before.len() - i - 1)
        + 1;
    Some((line, col))
}

/// Builds an error at `span`, naming the key found there and the table it belongs to.
fn at_span(
    file: &Path,
    text: &str,
    span: Option<std::ops::Range<usize>>,
    message: String,
) -> ConfigError {
    let Some(span) = span else {
        return ConfigError {
            file: file.to_path_buf(),
            line: None,
            column: None,
            key: None,
            message,
        };
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
        key,
        message,
    }
}

/// The dotted key at `offset`: the enclosing table header (with the index of an array of
/// tables) and the key of the line, e.g. `helper[2].stop_grace`.
fn key_at(text: &str, offset: usize) -> Option<String> {
    let offset = offset.min(text.len());
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[offset..].find('\n').map_or(text.len(), |i| offset + i);
    let line = &text[line_start..line_end];
    let trimmed = line.trim_start();
    if trimmed.starts_with('[') {
        // The error is in a header itself.
        return Some(
            trimmed
                .trim_matches(|c| c == '[' || c == ']' || c == ' ')
                .to_string(),
        );
    }
    // The key of this line: for `a = { b = 1, c = 2 }` the innermost key left of the offset.
    let col = offset - line_start;
    let left = &line[..col.min(line.len())];
    let mut key = None;
    let mut inner = None;
    if let Some(eq) = line.find('=') {
        key = Some(line[..eq].trim().trim_matches('"').to_string());
        if col > eq {
            // inline table: the last `name =` before the offset, after a `{` or `,`
            if let Some(brace) = left.rfind('{') {
                let seg = &left[brace + 1..];
                let seg = seg.rsplit(',').next().unwrap_or(seg);
                if let Some(e) = seg.find('=') {
                    inner = Some(seg[..e].trim().trim_matches('"').to_string());
                } else if !seg.trim().is_empty() {
                    inner = Some(seg.trim().to_string());
                }
            }
        }
    } else if !trimmed.is_empty() && !trimmed.starts_with('#') {
        key = Some(trimmed.split_whitespace().next().unwrap_or("").to_string());
    }
    let key = key.filter(|k| !k.is_empty());
    let table = table_at(text, line_start);
    let mut parts: Vec<String> = Vec::new();
    if let Some(t) = table {
        parts.push(t);
    }
    if let Some(k) = key {
        parts.push(k);
    }
    if let Some(i) = inner.filter(|k| !k.is_empty()) {
        parts.push(i);
    }
    if parts.is_empty() {
        None
    } else {
        Some(parts.join("."))
    }
}

/// The header of the table that contains byte `offset`, arrays of tables numbered from 1
/// (`helper[2]`, `helper[2].generation[1]`).
fn table_at(text: &str, offset: usize) -> Option<String> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> ConfigError {
        Config::parse(Path::new("f.toml"), text).unwrap_err()
    }

    #[test]
    fn durations_and_signals() {
        assert_eq!(
            PositiveDuration::parse("250ms").unwrap().0,
            Duration::from_millis(250)
        );
        assert_eq!(
            PositiveDuration::parse("1.5s").unwrap().0,
            Duration::from_millis(1500)
        );
        assert_eq!(
            PositiveDuration::parse("2m").unwrap().0,
            Duration::from_secs(120)
        );
        assert!(PositiveDuration::parse("0s").unwrap_err().contains("zero"));
        assert!(
            PositiveDuration::parse("-1s")
                .unwrap_err()
                .contains("negative")
        );
        assert!(
            PositiveDuration::parse("5")
                .unwrap_err()
                .contains("no unit")
        );
        assert!(
            PositiveDuration::parse("5 weeks")
                .unwrap_err()
                .contains("unknown unit")
        );
        assert_eq!(SignalName::parse("TERM").unwrap().0, libc::SIGTERM);
        assert_eq!(SignalName::parse("sigkill").unwrap().0, libc::SIGKILL);
        assert_eq!(SignalName::parse("9").unwrap().0, 9);
        assert_eq!(
            SignalName::parse("RTMIN+2").unwrap().0,
            libc::SIGRTMIN() + 2
        );
        assert!(
            SignalName::parse("TREM")
                .unwrap_err()
                .contains("unknown signal \"TREM\"")
        );
        assert!(SignalName::parse("0").is_err());
    }

    #[test]
    fn a_full_config_parses() {
        let c = Config::parse(
            Path::new("f.toml"),
            r#"
[supervisor]
orphan_policy = { signal = "HUP", grace = "2s" }

[[helper]]
name = "a"
command = ["/bin/sleep", "60"]
env = { X = "1" }
restart = "on-failure"
backoff = { initial = "100ms", max = "1s", limit = 3 }
stop_signal = "INT"
stop_grace = "3s"

[[helper.generation]]
signal = "TERM"
grace = "1s"

[[helper.generation]]
signal = "KILL"
reaction = "kill"
grace = "500ms"

[[helper]]
name = "b"
command = "/bin/true"
"#,
        )
        .unwrap();
        assert_eq!(c.helpers.len(), 2);
        let a = &c.helpers[0];
        assert_eq!(a.command.program(), "/bin/sleep");
        assert_eq!(a.restart, RestartMode::OnFailure);
        assert_eq!(a.backoff.limit, 3);
        assert_eq!(a.stop_signal.0, libc::SIGINT);
        assert_eq!(a.generation(1).signal(), libc::SIGTERM);
        assert_eq!(a.generation(2).reaction, Reaction::Kill);
        assert_eq!(a.generation(7).reaction, Reaction::Kill);
        assert_eq!(c.helpers[1].generation(1), GenerationPolicy::default());
        assert_eq!(c.supervisor.orphan_policy.signal(), libc::SIGHUP);
    }

    #[test]
    fn each_mistake_has_its_own_message() {
        let e = err("[[helper]]\nname = \"a\"\ncomand = [\"x\"]\n");
        assert_eq!(e.line, Some(3));
        assert!(e.message.contains("unknown field `comand`"), "{e}");
        assert_eq!(e.key.as_deref(), Some("helper[1].comand"), "{e}");

        let e = err("[[helper]]\nname = \"a\"\ncommand = []\n");
        assert!(e.message.contains("command is empty"), "{e}");
        assert_eq!(e.key.as_deref(), Some("helper[1].command"));

        let e = err(
            "[[helper]]\nname = \"a\"\ncommand = [\"x\"]\n[[helper]]\nname = \"a\"\ncommand = [\"y\"]\n",
        );
        assert!(e.message.contains("duplicate helper name \"a\""), "{e}");
        assert_eq!(e.line, Some(5));
        assert_eq!(e.key.as_deref(), Some("helper[2].name"));

        let e = err("[[helper]]\nname = \"a\"\ncommand = [\"x\"]\nstop_signal = \"TREM\"\n");
        assert!(e.message.contains("unknown signal \"TREM\""), "{e}");
        assert_eq!(e.line, Some(4));

        let e = err("[[helper]]\nname = \"a\"\ncommand = [\"x\"]\nstop_grace = \"0s\"\n");
        assert!(e.message.contains("zero duration"), "{e}");
        let e = err("[[helper]]\nname = \"a\"\ncommand = [\"x\"]\nstop_grace = \"-2s\"\n");
        assert!(e.message.contains("negative duration"), "{e}");
        let e = err("[[helper]]\nname = \"a\"\ncommand = [\"x\"]\nstop_grace = -2\n");
        assert!(e.message.contains("negative duration"), "{e}");

        let e = err(
            "[[helper]]\nname = \"a\"\ncommand = [\"x\"]\nbackoff = { initial = \"1s\", max = \"0ms\" }\n",
        );
        assert!(e.message.contains("zero duration"), "{e}");
        assert_eq!(e.key.as_deref(), Some("helper[1].backoff.max"), "{e}");

        let e = err("[[helper]]\nname = \"a\"\ncommand = [\"x\"]\nrestart = \"sometimes\"\n");
        assert!(e.message.contains("sometimes"), "{e}");
        assert!(e.message.contains("on-failure"), "{e}");

        let e = err("[[helper]]\ncommand = [\"x\"]\n");
        assert!(e.message.contains("missing field `name`"), "{e}");

        let e = err("");
        assert!(e.message.contains("no helper declared"), "{e}");

        let e = err(
            "[[helper]]\nname = \"a\"\ncommand = [\"x\"]\n[[helper.generation]]\nsignal = \"TERM\"\n[[helper.generation]]\ngrace = \"0s\"\n",
        );
        assert_eq!(
            e.key.as_deref(),
            Some("helper[1].generation[2].grace"),
            "{e}"
        );

        let e = err("[[helper]]\nname = \"a\"\ncommand = [\"x\"\n");
        assert!(e.line.is_some(), "{e}");
        let shown = e.to_string();
        assert!(shown.starts_with("f.toml:"), "{shown}");
    }
}
