//! The serde types of the file: the whole [`Config`], its supervisor section and its helpers,
//! each field's default and the deserializer that checks it alone. Uses the values of
//! `value.rs` and the sections of `checks.rs`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::checks;
use super::error::ConfigError;
use super::value::{CommandLine, FieldError, PositiveDuration, parse_id};
use crate::gate::policy::{Policy, PolicyError, Reaction};
use crate::process::signal::Sig;
use crate::process::state::Condition;

/// The whole file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Settings of the supervisor itself (`[supervisor]`, optional).
    #[serde(default)]
    pub supervisor: SupervisorSection,
    /// The helpers (`[[helper]]`), in launch order.
    #[serde(default, rename = "helper")]
    pub helpers: Vec<Helper>,
    /// What the file gives that is legal but likely not meant, each at its place as an error
    /// would be; none is a mistake (`foster run` and `--check` say them as warnings).
    #[serde(skip)]
    pub warnings: Vec<ConfigError>,
}

/// `[supervisor]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SupervisorSection {
    /// The policy for adopted processes whose helper foster cannot tell.
    #[serde(default)]
    pub orphan_policy: GenerationPolicy,
    /// Where the kernel does not announce births in the tree: read the tree this often as well
    /// (none by default: foster then wakes up only when something happens). See `docs/run.md`.
    #[serde(default)]
    pub rescan: Option<PositiveDuration>,
}

/// One `[[helper]]`. Its `PartialEq` is how a reload tells a changed helper from an unchanged
/// one: every field counts (the name's place in the file does not).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Helper {
    /// Unique name, used in events and logs.
    pub name: Spanned<HelperName>,
    /// Program and arguments; the program is looked up in `PATH` when it has no `/`.
    pub command: CommandLine,
    /// Variables added to (or replacing those of) foster's own environment; names are
    /// non-empty and hold neither `=` nor NUL, values hold no NUL.
    #[serde(default, deserialize_with = "environment")]
    pub env: BTreeMap<String, String>,
    /// Files of `KEY=VALUE` lines (`envfile.rs`), read at each launch, in order; `env`
    /// overrides them. One path or a list; a relative path is from foster's directory.
    #[serde(default, deserialize_with = "env_files")]
    pub env_file: Vec<PathBuf>,
    /// Working directory (default: foster's); non-empty, no NUL.
    #[serde(default, deserialize_with = "working_directory")]
    pub cwd: Option<PathBuf>,
    /// User to run as (default: foster's): a name, or a uid as an integer or a string of
    /// digits, kept here as its decimal text (see [`parse_id`]).
    #[serde(default, deserialize_with = "user")]
    pub user: Option<String>,
    /// Group to run as (default: the user's primary group, or foster's): the forms of `user`.
    #[serde(default, deserialize_with = "group")]
    pub group: Option<String>,
    /// Whether `foster run` (and a reload that adds it) launches it; `false`: declared,
    /// `stopped` until `foster ctl start`, and its dependents wait (default `true`).
    #[serde(default = "default_autostart")]
    pub autostart: bool,
    /// When to start the helper again after it ends.
    #[serde(default)]
    pub restart: RestartMode,
    /// Delays between restarts and how many in a row before giving up.
    #[serde(default)]
    pub backoff: Backoff,
    /// The signal that asks the helper to stop (default `TERM`; not one that stops it).
    #[serde(default = "default_stop_signal", deserialize_with = "stop_signal")]
    pub stop_signal: Sig,
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
    /// Where its standard output and error go: `capture` (the default: kept, relayed named,
    /// logged), `inherit` (foster's own) or `null`.
    #[serde(default)]
    pub output: crate::supervision::output::Mode,
    /// A file of its own for its captured lines, rotated by size.
    #[serde(default)]
    pub log: Option<LogSpec>,
    /// The bounds of its last lines kept in memory (`ctl logs`, the dashboard, `ready = { log
    /// }`): `ring = { lines = 1000, bytes = "1MiB" }`.
    #[serde(default)]
    pub ring: RingSpec,
    /// The helpers it waits for before each launch, each with its condition: `depends_on =
    /// { db = "ready", migrate = "completed" }`, or a list of names, each `started`:
    /// `depends_on = ["db"]` (`depends.rs`).
    #[serde(default)]
    pub depends_on: DependsOn,
    /// When the helper counts as ready (`ready = { notify = true }`, `{ fd = 3 }`, `{ exec =
    /// [...] }`, `{ tcp = "..." }`, `{ log = "..." }`); none: ready once launched.
    #[serde(default)]
    pub ready: Option<checks::ReadySection>,
    /// A liveness check, from readiness on (`health = { exec = [...] }` or `{ tcp = "..." }`).
    #[serde(default)]
    pub health: Option<checks::HealthSection>,
    /// The notify protocol's watchdog: without `WATCHDOG=1` within this long, the helper has
    /// failed.
    #[serde(default)]
    pub watchdog: Option<PositiveDuration>,
}

/// `log = { file = "PATH", max_size = "10MB", keep = 5 }`: a helper's captured lines in a file
/// of its own, each with its time and stream, rotated by size as logrotate names the files
/// (`docs/output.md`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogSpec {
    /// The file; a relative path is taken from foster's working directory. Non-empty, no NUL.
    #[serde(deserialize_with = "log_file")]
    pub file: PathBuf,
    /// Rotate before a write would take the file past this size: [`crate::base::size`]'s grammar
    /// (`"10MB"`, `"10MiB"`), or bytes as an integer; 0: never (default 10 MiB).
    #[serde(default = "default_log_max_size", deserialize_with = "log_size")]
    pub max_size: u64,
    /// Rotated files kept, `FILE.1` (the newest) to `FILE.N`; 0: the file starts anew;
    /// at most [`crate::base::logfile::Rotation::MAX_KEEP`] (default 5).
    #[serde(default = "default_log_keep", deserialize_with = "log_keep")]
    pub keep: u32,
}

impl LogSpec {
    /// Its rotation.
    pub fn rotation(&self) -> crate::base::logfile::Rotation {
        crate::base::logfile::Rotation {
            max_size: self.max_size,
            keep: self.keep,
        }
    }
}

/// `ring = { lines = 1000, bytes = "1MiB" }`: how many of a helper's last lines are kept in
/// memory, and within how many bytes (each line counted as its bytes and
/// [`crate::supervision::output::ring::LINE_OVERHEAD`]); the oldest go first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RingSpec {
    /// From 0 (nothing kept) to [`crate::supervision::output::ring::MAX_LINES`] (default 1000).
    #[serde(default = "default_ring_lines", deserialize_with = "ring_lines")]
    pub lines: usize,
    /// [`crate::base::size`]'s grammar or bytes as an integer, at most
    /// [`crate::supervision::output::ring::MAX_BYTES`] (default 1 MiB).
    #[serde(default = "default_ring_bytes", deserialize_with = "ring_bytes")]
    pub bytes: usize,
}

impl Default for RingSpec {
    fn default() -> RingSpec {
        RingSpec {
            lines: default_ring_lines(),
            bytes: default_ring_bytes(),
        }
    }
}

impl RingSpec {
    /// The ring's bounds.
    pub fn bounds(&self) -> crate::supervision::output::ring::Bounds {
        crate::supervision::output::ring::Bounds {
            lines: self.lines,
            bytes: self.bytes,
        }
    }
}

fn default_ring_lines() -> usize {
    crate::supervision::output::ring::DEFAULT_LINES
}

fn default_ring_bytes() -> usize {
    crate::supervision::output::ring::DEFAULT_BYTES
}

/// `ring.lines`: from 0 to [`crate::supervision::output::ring::MAX_LINES`].
fn ring_lines<'de, D: Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
    let max = crate::supervision::output::ring::MAX_LINES;
    let n = i64::deserialize(d).map_err(|_| {
        de::Error::custom(format!(
            "expected how many lines to keep in memory, a number from 0 to {max}"
        ))
    })?;
    usize::try_from(n)
        .ok()
        .filter(|&k| k <= max)
        .ok_or_else(|| {
            de::Error::custom(format!(
                "lines = {n}: expected a number of lines kept in memory from 0 to {max}"
            ))
        })
}

/// `ring.bytes`: a size as [`crate::base::size::parse_size`] reads it, or bytes as an integer, at
/// most [`crate::supervision::output::ring::MAX_BYTES`].
fn ring_bytes<'de, D: Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
    let max = crate::supervision::output::ring::MAX_BYTES;
    let n = log_size(d)?;
    usize::try_from(n)
        .ok()
        .filter(|&b| b <= max)
        .ok_or_else(|| {
            de::Error::custom(format!(
                "bytes = {n}: the lines kept in memory may take at most {max} bytes (256 MiB)"
            ))
        })
}

fn default_log_max_size() -> u64 {
    crate::base::logfile::Rotation::DEFAULT_MAX_SIZE
}

fn default_log_keep() -> u32 {
    crate::base::logfile::Rotation::DEFAULT_KEEP
}

/// `log.file`: a non-empty path without NUL.
fn log_file<'de, D: Deserializer<'de>>(d: D) -> Result<PathBuf, D::Error> {
    let path = String::deserialize(d)
        .map_err(|_| de::Error::custom("expected the path of the log file, as a string"))?;
    if path.is_empty() {
        return Err(de::Error::custom(
            "the log file's path is empty: expected a path, or leave log out",
        ));
    }
    if path.contains('\0') {
        return Err(de::Error::custom("the log file's path contains a NUL byte"));
    }
    Ok(PathBuf::from(path))
}

/// `log.max_size`: a size as [`crate::base::size::parse_size`] reads it, or bytes as an integer.
fn log_size<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Form {
        Bytes(i64),
        Text(String),
    }
    match Form::deserialize(d)
        .map_err(|_| de::Error::custom("expected a size such as \"10MB\", \"512KiB\" or 0"))?
    {
        Form::Bytes(n) => u64::try_from(n).map_err(|_| {
            de::Error::custom(format!(
                "negative size {n}: expected a size such as \"10MB\""
            ))
        }),
        Form::Text(t) => crate::base::size::parse_size(&t).map_err(de::Error::custom),
    }
}

/// `log.keep`: from 0 to [`crate::base::logfile::Rotation::MAX_KEEP`].
/// `backoff.limit`: a count of restarts, or `"unlimited"` ([`Backoff::UNLIMITED`]), said in
/// words rather than as a Rust type.
fn backoff_limit<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Form {
        Count(i64),
        Text(String),
    }
    let max = Backoff::UNLIMITED - 1;
    let expected = format!(
        "expected how many restarts in a row before giving up: a whole number from 0 (never \
         restart) to {max}, or \"unlimited\""
    );
    match Form::deserialize(d).map_err(|_| de::Error::custom(&expected))? {
        Form::Text(t) if t == "unlimited" => Ok(Backoff::UNLIMITED),
        Form::Text(t) => Err(de::Error::custom(format!("limit = {t:?}: {expected}"))),
        Form::Count(n) => u32::try_from(n)
            .ok()
            .filter(|&k| k <= max)
            .ok_or_else(|| de::Error::custom(format!("limit = {n}: {expected}"))),
    }
}

fn log_keep<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    let max = crate::base::logfile::Rotation::MAX_KEEP;
    let n = i64::deserialize(d).map_err(|_| {
        de::Error::custom(format!(
            "expected how many rotated files to keep, a number from 0 to {max}"
        ))
    })?;
    u32::try_from(n).ok().filter(|&k| k <= max).ok_or_else(|| {
        de::Error::custom(format!(
            "keep = {n}: expected a number of rotated files from 0 to {max}"
        ))
    })
}

impl Helper {
    /// The gate policy chain of the helper: its own generation first, then its children's...
    /// (one default generation when none is declared).
    pub fn policy_chain(&self) -> Policy {
        let mut gens = self.generations.iter().rev();
        let last = gens.next().map_or_else(
            || GenerationPolicy::default().to_policy(),
            |g| g.to_policy(),
        );
        gens.fold(last, |next, g| g.to_policy().with_next(next))
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

    /// Whether the helper has a readiness check: launched, it is `starting` until the check
    /// passes; without one it is `running`, which counts as ready (as systemd's
    /// `Type=simple`).
    pub fn has_readiness(&self) -> bool {
        self.ready.is_some()
    }
}

fn default_autostart() -> bool {
    true
}

fn default_stop_signal() -> Sig {
    Sig::TERM
}

fn default_stop_grace() -> PositiveDuration {
    PositiveDuration(Duration::from_secs(10))
}

/// What one generation gets when its parent dies (`[[helper.generation]]`). The signal and
/// the reaction keep where they were written, for the errors of [`Config::parse`]; they compare
/// equal whatever their place.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct GenerationPolicy {
    /// The parent-death signal, when given (see [`GenerationPolicy::signal`]).
    #[serde(default)]
    pub signal: Option<Spanned<Sig>>,
    /// What the process does with it, when given (see [`GenerationPolicy::reaction`]).
    #[serde(default)]
    pub reaction: Option<Spanned<Reaction>>,
    /// How long it may take before SIGKILL (default `5s`).
    #[serde(default = "default_grace")]
    pub grace: PositiveDuration,
}

fn default_grace() -> PositiveDuration {
    PositiveDuration(Duration::from_secs(5))
}

impl GenerationPolicy {
    /// The signal number: the one given, else `KILL` for reaction `kill`, else `TERM`.
    pub fn signal(&self) -> i32 {
        match (&self.signal, self.reaction()) {
            (Some(s), _) => s.get_ref().number(),
            (None, Reaction::Kill) => libc::SIGKILL,
            (None, _) => libc::SIGTERM,
        }
    }

    /// The reaction: the one given, else `kill` for signal `KILL` (which cannot be handled),
    /// else `exit`. The same defaults as the policy's text form and `foster exec --signal`.
    pub fn reaction(&self) -> Reaction {
        match (&self.reaction, &self.signal) {
            (Some(r), _) => *r.get_ref(),
            (None, Some(s)) if *s.get_ref() == Sig::KILL => Reaction::Kill,
            (None, _) => Reaction::Exit,
        }
    }

    /// This generation as a gate policy (without a next generation). It is consistent once
    /// [`GenerationPolicy::check`] passed, which [`Config::parse`] does for every generation.
    pub fn to_policy(&self) -> Policy {
        Policy {
            signal: self.signal(),
            reaction: self.reaction(),
            grace: self.grace.0,
            next: None,
        }
    }

    /// Checks the signal (one that ends a process, see [`Sig::ending`]) and
    /// that the signal and the reaction agree; the error names the field at fault and where it
    /// was written.
    pub fn check(&self) -> Result<(), FieldError> {
        let at = |s: &Option<Spanned<Sig>>| s.as_ref().map(Spanned::span);
        if let Some(s) = &self.signal {
            s.get_ref().ending().map_err(|e| FieldError {
                field: "signal",
                span: Some(s.span()),
                message: e.to_string(),
            })?;
        }
        self.to_policy().validate().map_err(|PolicyError(message)| {
            // KILL with exit or notify: the reaction was given (KILL alone means kill); kill
            // with another signal: the signal was given (kill alone means KILL).
            if self.reaction() == Reaction::Kill {
                FieldError {
                    field: "signal",
                    span: at(&self.signal),
                    message,
                }
            } else {
                FieldError {
                    field: "reaction",
                    span: self.reaction.as_ref().map(Spanned::span),
                    message,
                }
            }
        })
    }
}

impl Default for GenerationPolicy {
    fn default() -> Self {
        GenerationPolicy {
            signal: None,
            reaction: None,
            grace: default_grace(),
        }
    }
}

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
    /// How many restarts in a row before foster gives up on the helper (0: none;
    /// [`Backoff::UNLIMITED`]: never gives up).
    #[serde(default = "default_limit", deserialize_with = "backoff_limit")]
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

impl Backoff {
    /// `limit = "unlimited"`: restarted whatever the number of restarts in a row.
    pub const UNLIMITED: u32 = u32::MAX;
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

/// `stop_signal`: a signal that asks the helper to end, so not one that stops it (`STOP`,
/// `TSTP`, `TTIN`, `TTOU`: the helper would sit stopped through its whole grace). A signal a
/// helper may handle as its stop request (`WINCH` for some servers) is accepted.
fn stop_signal<'de, D: Deserializer<'de>>(d: D) -> Result<Sig, D::Error> {
    let s = Sig::deserialize(d)?;
    if s.stops() {
        return Err(de::Error::custom(format!(
            "{s} stops the helper instead of asking it to end: expected a signal such as \
             TERM, INT, HUP or QUIT"
        )));
    }
    Ok(s)
}

/// `env`: a table of strings whose names and values `execve` can carry.
fn environment<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, String>, D::Error> {
    let vars = BTreeMap::<String, String>::deserialize(d)?;
    for (name, value) in &vars {
        let wrong = if name.is_empty() {
            Some("is empty")
        } else if name.contains('=') {
            Some("contains '=' (the environment splits NAME=VALUE at the first '=')")
        } else if name.contains('\0') {
            Some("contains a NUL byte")
        } else {
            None
        };
        if let Some(wrong) = wrong {
            return Err(de::Error::custom(format!(
                "the environment variable name {name:?} {wrong}: expected a non-empty name \
                 without '=' or NUL"
            )));
        }
        if value.contains('\0') {
            return Err(de::Error::custom(format!(
                "the value of the environment variable {name:?} contains a NUL byte"
            )));
        }
    }
    Ok(vars)
}

/// `env_file`: a path or a list of paths, each non-empty and without NUL.
fn env_files<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<PathBuf>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Form {
        One(String),
        List(Vec<String>),
    }
    let paths = match Form::deserialize(d).map_err(|_| {
        de::Error::custom("expected the path of a file of KEY=VALUE lines, or a list of paths")
    })? {
        Form::One(p) => vec![p],
        Form::List(v) => v,
    };
    if let Some(p) = paths.iter().find(|p| p.is_empty() || p.contains('\0')) {
        return Err(de::Error::custom(format!(
            "env_file path {p:?} is empty or holds a NUL byte: expected a path"
        )));
    }
    Ok(paths.into_iter().map(PathBuf::from).collect())
}

/// `cwd`: a non-empty path without NUL.
fn working_directory<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PathBuf>, D::Error> {
    let path = String::deserialize(d)?;
    if path.is_empty() {
        return Err(de::Error::custom(
            "the working directory is empty: expected a path, or leave cwd out for foster's",
        ));
    }
    if path.contains('\0') {
        return Err(de::Error::custom(
            "the working directory contains a NUL byte",
        ));
    }
    Ok(Some(PathBuf::from(path)))
}

fn user<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    id_field(d, "user")
}

fn group<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    id_field(d, "group")
}

fn id_field<'de, D: Deserializer<'de>>(d: D, kind: &str) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Form {
        Num(i64),
        Text(String),
    }
    let text = match Form::deserialize(d).map_err(|_| {
        de::Error::custom(format!(
            "expected a {kind} name or number, such as \"nobody\" or 65534"
        ))
    })? {
        Form::Num(n) => n.to_string(),
        Form::Text(t) => t,
    };
    parse_id(kind, &text).map(Some).map_err(de::Error::custom)
}

impl Config {
    /// Looks a helper up by name.
    pub fn helper(&self, name: &str) -> Option<&Helper> {
        self.helpers.iter().find(|h| h.name() == name)
    }
}

/// `depends_on`: the helpers a helper waits for, each with the [`Condition`] it must reach.
/// Written as a table, `{ db = "ready", migrate = "completed", cache = "started" }`, or as a
/// list of names, `["db", "cache"]`, each then `started` (as Docker Compose's short form).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DependsOn {
    /// Each dependency and its condition: a list's in its order, a table's by name.
    pub items: Vec<(String, Condition)>,
    /// Whether it was written as a list (its entries are then named by index in errors).
    pub listed: bool,
}

const DEPENDS_ON: &str = "a table of helper names and conditions, { db = \"ready\", migrate = \
                          \"completed\", cache = \"started\" }, or a list of helper names, \
                          [\"db\"] (each then \"started\")";

impl<'de> Deserialize<'de> for DependsOn {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(DependsOnVisitor)
    }
}

struct DependsOnVisitor;

impl<'de> de::Visitor<'de> for DependsOnVisitor {
    type Value = DependsOn;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(DEPENDS_ON)
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<DependsOn, A::Error> {
        let mut items = Vec::new();
        while let Some(name) = seq.next_element::<String>()? {
            items.push((dependency_name(name)?, Condition::Started));
        }
        Ok(DependsOn {
            items,
            listed: true,
        })
    }

    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<DependsOn, A::Error> {
        let mut items = Vec::new();
        while let Some(name) = map.next_key::<String>()? {
            let name = dependency_name(name)?;
            let condition = map.next_value::<String>().map_err(|_| {
                de::Error::custom(format!(
                    "the condition of dependency {name:?} is not a string: expected \
                     \"started\", \"ready\" or \"completed\""
                ))
            })?;
            let condition = match condition.as_str() {
                "started" => Condition::Started,
                "ready" => Condition::Ready,
                "completed" => Condition::Completed,
                other => {
                    return Err(de::Error::custom(format!(
                        "the condition of dependency {name:?} is {other:?}: expected \
                         \"started\", \"ready\" or \"completed\""
                    )));
                }
            };
            items.push((name, condition));
        }
        Ok(DependsOn {
            items,
            listed: false,
        })
    }
}

/// A dependency's name as written: a possible helper name (whether a helper has it is
/// checked with the whole file).
fn dependency_name<E: de::Error>(name: String) -> Result<String, E> {
    if name.is_empty() || name.chars().any(char::is_control) {
        return Err(E::custom(format!(
            "dependency {name:?} cannot be a helper's name: expected the name of a helper of \
             this file"
        )));
    }
    Ok(name)
}
