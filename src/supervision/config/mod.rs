//! The configuration of `foster run`: a TOML file declaring the helpers to supervise.
//!
//! Owns parsing and validation, nothing else: [`Config::load`] reads a file (a regular file of
//! at most [`MAX_CONFIG_BYTES`], read with that bound) and returns either a config that every
//! later step can trust (names unique, commands non-empty, signals known and fit for their use,
//! policies consistent, durations at least [`MIN_DURATION`], environment names and user and
//! group ids usable) or [`ConfigErrors`]: every mistake of the file at once (`collect.rs`),
//! each naming the file, line, column, helper, key and what was expected (a syntax error stops
//! the reading, and comes alone). [`Scope::System`] (`foster run --check`) also checks the file
//! against the system the helpers would run on (`system.rs`: programs, working directories,
//! users and groups, log files). What is legal but likely not meant (a health check's
//! `timeout` not shorter than its `interval`) is kept with the config as
//! [`Config::warnings`], for `foster run` and `--check` to say. No input panics. Unknown keys are errors, so a misspelt key never silently
//! falls back to a default. The reference of every key is `docs/run.md`.

pub mod checks;
mod collect;
mod depends;
mod system;

pub use collect::MAX_MISTAKES;
pub use depends::DependsOn;
pub(crate) use system::helper_reaches;

use std::collections::BTreeMap;
use std::fs::Metadata;
use std::io::Read;
use std::ops::Range;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::gate::policy::{MAX_GENERATIONS, Policy, PolicyError};
use crate::process::signal::Sig;
pub use crate::process::state::Condition;

/// The largest configuration foster reads: 16 MiB. A larger file, or standard input that goes
/// on longer, is an error (the bound is applied while reading, whatever the file claims).
pub const MAX_CONFIG_BYTES: u64 = 16 * 1024 * 1024;

/// The shortest duration a configuration may give (a grace, a delay): 1 ms
/// ([`crate::base::duration::MIN`]). Shorter ones, `"0.0000000001s"` as much as `"0s"`, are errors
/// rather than rounded to zero.
pub const MIN_DURATION: Duration = crate::base::duration::MIN;

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
/// `backoff.limit`: a count of restarts, said in words rather than as a Rust type.
fn backoff_limit<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    let expected = format!(
        "expected how many restarts in a row before giving up, a whole number from 0 (none) to \
         {}",
        u32::MAX
    );
    let n = i64::deserialize(d).map_err(|_| de::Error::custom(&expected))?;
    u32::try_from(n).map_err(|_| de::Error::custom(format!("limit = {n}: {expected}")))
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

/// A field of a table that is wrong: its key, where its value was written, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The key within its table (`signal`, `reaction`).
    pub field: &'static str,
    /// The bytes of the value in the file, when known.
    pub span: Option<Range<usize>>,
    /// What is wrong and what was expected.
    pub message: String,
}

/// A generation's reaction to its parent's death (`exit`, `notify`, `kill`).
pub use crate::gate::policy::Reaction;

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
        let words = match Form::deserialize(d).map_err(|e: D::Error| {
            // A command left out is told as such (serde asks for a missing field through the
            // same path).
            if e.to_string().starts_with("missing field") {
                return e;
            }
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

/// A `user` or `group` (`kind`) as written: a name, or an id from 0 to 4294967294 given as
/// digits. Returns the name, or the id as plain decimal text (`"007"` becomes `"7"`). Refused:
/// an empty name, one with a control character, white space or `:`; a negative or signed
/// number; 4294967295, which is `(uid_t)-1` (`(gid_t)-1`), "no change" to the kernel, so the
/// helper would keep foster's own id; and larger numbers.
pub fn parse_id(kind: &str, text: &str) -> Result<String, IdError> {
    let kind = kind.to_string();
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    if let Some(rest) = text.strip_prefix('-').filter(|r| digits(r)) {
        let rest = rest.to_string();
        return Err(IdError::Negative { kind, rest });
    }
    if text.strip_prefix('+').is_some_and(digits) {
        let text = text.to_string();
        return Err(IdError::Signed { kind, text });
    }
    if digits(text) {
        return match text.parse::<u64>() {
            Ok(n) if n < u64::from(u32::MAX) => Ok(n.to_string()),
            Ok(n) if n == u64::from(u32::MAX) => Err(IdError::NoChange {
                id: if kind == "group" { "gid" } else { "uid" },
                kind,
                n,
            }),
            _ => Err(IdError::OutOfRange {
                kind,
                text: text.to_string(),
            }),
        };
    }
    let wrong = if text.is_empty() {
        Some("is empty")
    } else if text.chars().any(char::is_control) {
        Some("contains a control character")
    } else if text.chars().any(char::is_whitespace) {
        Some("contains white space")
    } else if text.contains(':') {
        Some("contains ':'")
    } else {
        None
    };
    match wrong {
        Some(wrong) => Err(IdError::BadName {
            kind,
            text: text.to_string(),
            wrong,
        }),
        None => Ok(text.to_string()),
    }
}

/// Why a `user` or `group` ([`parse_id`]) is refused; `kind` says which.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// A negative number.
    #[error("{kind} -{rest} is negative: {ID_RANGE}")]
    Negative { kind: String, rest: String },
    /// A number with a `+`.
    #[error("{kind} {text:?}: write the number without a sign")]
    Signed { kind: String, text: String },
    /// `(uid_t)-1` or `(gid_t)-1` (`id` says which).
    #[error(
        "{kind} {n} is ({id}_t)-1, which the kernel takes as \"no change\": the helper would keep \
         foster's own {kind}; {ID_RANGE}"
    )]
    NoChange {
        kind: String,
        n: u64,
        id: &'static str,
    },
    /// A number above the range.
    #[error("{kind} {text} is out of range: {ID_RANGE}")]
    OutOfRange { kind: String, text: String },
    /// A name that cannot be one (`wrong` says why).
    #[error("the {kind} name {text:?} {wrong}: {ID_RANGE}")]
    BadName {
        kind: String,
        text: String,
        wrong: &'static str,
    },
}

/// What a `user` or `group` may be, as its errors say.
const ID_RANGE: &str = "expected a name or a number from 0 to 4294967294";

/// A duration of at least [`MIN_DURATION`], written `"250ms"`, `"5s"`, `"1.5s"`, `"2m"`, `"1h"`
/// ([`crate::base::duration`]'s grammar). A bare TOML number is refused: `grace = 500` could mean
/// seconds or milliseconds, so a configuration writes the unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct PositiveDuration(pub Duration);

impl PositiveDuration {
    /// Parses the grammar of [`crate::base::duration`]; the error says what was expected.
    pub fn parse(text: &str) -> Result<PositiveDuration, crate::base::duration::DurationError> {
        crate::base::duration::parse(text).map(PositiveDuration)
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
            Form::Num(n) if !n.is_finite() => Err(de::Error::custom(format!(
                "{n} is not a duration: expected a positive duration with a unit, such as \"5s\""
            ))),
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
    fn whole(file: &Path, message: String) -> ConfigError {
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
    fn new(file: &Path, mut errors: Vec<ConfigError>, more: bool) -> ConfigErrors {
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

/// What a reading checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Scope {
    /// The file alone: what `foster run` checks before it starts anything.
    #[default]
    File,
    /// The file, and the system the helpers would run on: each program found and executable
    /// by the user its helper runs as, each working directory a directory that user can enter,
    /// each user and group known to the user database, each log file one foster would open
    /// (`foster run --check`). What is true now
    /// may not be at launch: a launch that fails then counts as an exit (127 for a program not
    /// found) and goes through the restart rules.
    System,
}

/// Refuses what is not a regular file (a directory, FIFO, device or socket): reading one could
/// block, never end, or act on a device.
fn regular_file(meta: &Metadata) -> Result<(), NotRegular> {
    let t = meta.file_type();
    let what = if t.is_file() {
        return Ok(());
    } else if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "of an unknown type"
    };
    Err(NotRegular(what))
}

/// The configuration is not a regular file: what it is instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "the configuration is {0}, not a regular file: expected the path of a file, or - to read \
     standard input"
)]
struct NotRegular(&'static str);

impl Config {
    /// Reads and validates `path`: a regular file (refused before it is opened, and checked
    /// again on the descriptor opened), read through [`Config::read`].
    pub fn load(path: &Path) -> Result<Config, ConfigErrors> {
        Config::load_with(path, Scope::File)
    }

    /// [`Config::load`], checking what `scope` says.
    pub fn load_with(path: &Path, scope: Scope) -> Result<Config, ConfigErrors> {
        let fail = |message: String| ConfigError::whole(path, message);
        let cannot = |e: std::io::Error| fail(format!("cannot read the configuration: {e}"));
        let not_regular = |e: NotRegular| fail(e.to_string());
        regular_file(&std::fs::metadata(path).map_err(cannot)?).map_err(not_regular)?;
        // Non-blocking, so that a file swapped for a FIFO since the check cannot hang the open.
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(path)
            .map_err(cannot)?;
        let meta = file.metadata().map_err(cannot)?;
        regular_file(&meta).map_err(not_regular)?;
        if meta.len() > MAX_CONFIG_BYTES {
            return Err(fail(too_large()).into());
        }
        Config::read_with(path, file, scope)
    }

    /// Reads at most [`MAX_CONFIG_BYTES`] from `input` (a file, or standard input for `-`),
    /// then parses it as [`Config::parse`] does; `file` names it in errors. More input than
    /// the bound, or text that is not UTF-8, is an error.
    pub fn read(file: &Path, input: impl Read) -> Result<Config, ConfigErrors> {
        Config::read_with(file, input, Scope::File)
    }

    /// [`Config::read`], checking what `scope` says.
    pub fn read_with(file: &Path, input: impl Read, scope: Scope) -> Result<Config, ConfigErrors> {
        let mut bytes = Vec::new();
        input
            .take(MAX_CONFIG_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| ConfigError::whole(file, format!("cannot read the configuration: {e}")))?;
        if bytes.len() as u64 > MAX_CONFIG_BYTES {
            return Err(ConfigError::whole(file, too_large()).into());
        }
        let text = match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(e) => {
                let good = e.utf8_error().valid_up_to();
                let bytes = e.as_bytes();
                let before = String::from_utf8_lossy(&bytes[..good]);
                let (line, column) = line_col(&before, good).unwrap_or((1, 1));
                return Err(ConfigError {
                    file: file.to_path_buf(),
                    line: Some(line),
                    column: Some(column),
                    helper: None,
                    key: None,
                    message: format!(
                        "the configuration is not UTF-8 text: byte 0x{:02x} cannot start a \
                         character here",
                        bytes.get(good).copied().unwrap_or_default()
                    ),
                }
                .into());
            }
        };
        Config::parse_with(file, &text, scope)
    }

    /// Parses and validates `text`, naming `file` in errors.
    pub fn parse(file: &Path, text: &str) -> Result<Config, ConfigErrors> {
        Config::parse_with(file, text, Scope::File)
    }

    /// [`Config::parse`], checking what `scope` says: every mistake is collected (see
    /// `collect.rs`), then the checks across fields run on what could be read, then, for
    /// [`Scope::System`], the checks against the system.
    pub fn parse_with(file: &Path, text: &str, scope: Scope) -> Result<Config, ConfigErrors> {
        let doc = collect::Document::parse(file, text)?;
        let read = doc.deserialize::<Config, Helper>("helper", |c, helpers| c.helpers = helpers);
        let mut errors = read.mistakes.clone();
        if let Some(config) = &read.value {
            config.validate(&doc, &read, &mut errors);
            if scope == Scope::System {
                system::check(config, &doc, &read, &mut errors);
            }
        }
        match read.value {
            Some(mut config) if errors.is_empty() => {
                config.warnings = config.warnings_in(&doc);
                Ok(config)
            }
            _ => Err(ConfigErrors::new(file, errors, read.more)),
        }
    }

    /// [`Config::warnings`] of a valid config read from `doc`: a health check whose `timeout`
    /// is not shorter than its `interval` ([`checks::HealthSection::warning`]).
    fn warnings_in(&self, doc: &collect::Document<'_>) -> Vec<ConfigError> {
        let helpers = collect::KeyPath::root().key("helper");
        let mut warnings = Vec::new();
        for (hi, h) in self.helpers.iter().enumerate() {
            if let Some((field, message)) = h.health.as_ref().and_then(|hs| hs.warning()) {
                let at = helpers.index(hi).key("health").key(field);
                warnings.push(doc.error_at(&at, None, message));
            }
        }
        warnings
    }

    /// The checks across fields, on what could be read; those that involve a field taken out
    /// for a mistake of its own are skipped.
    fn validate(
        &self,
        doc: &collect::Document<'_>,
        read: &collect::Read<Config>,
        errors: &mut Vec<ConfigError>,
    ) {
        use collect::KeyPath;
        let orphan = KeyPath::root().key("supervisor").key("orphan_policy");
        if !read.skipped(&orphan)
            && let Err(e) = self.supervisor.orphan_policy.check()
        {
            errors.push(doc.error_at(
                &orphan.key(e.field),
                e.span,
                format!("the orphan policy: {}", e.message),
            ));
        }
        let helpers = KeyPath::root().key("helper");
        if self.helpers.is_empty() && !read.skipped(&helpers) {
            errors.push(ConfigError::whole(
                doc.file(),
                "no helper declared: expected at least one [[helper]] table with a name and a \
                 command"
                    .into(),
            ));
        }
        let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
        let mut logs: BTreeMap<&Path, usize> = BTreeMap::new();
        for (hi, h) in self.helpers.iter().enumerate() {
            let at = helpers.index(hi);
            let mut check = HelperCheck {
                doc,
                read,
                errors: &mut *errors,
            };
            check.log(h, hi, &at, &mut logs);
            check.name(h, hi, &at, &mut seen);
            check.generations(h, &at);
            check.probes(h, &at);
            check.backoff(h, &at);
        }
        depends::check(self, doc, read, errors);
    }

    /// Looks a helper up by name.
    pub fn helper(&self, name: &str) -> Option<&Helper> {
        self.helpers.iter().find(|h| h.name() == name)
    }
}

/// The checks of one helper across its fields ([`Config::validate`]'s), each skipped when the
/// field was taken out for a mistake of its own.
struct HelperCheck<'a, 'd> {
    doc: &'a collect::Document<'d>,
    read: &'a collect::Read<Config>,
    errors: &'a mut Vec<ConfigError>,
}

impl<'a, 'd> HelperCheck<'a, 'd> {
    /// A log file only with captured output, and no two helpers with the same file.
    fn log<'h>(
        &mut self,
        h: &'h Helper,
        hi: usize,
        at: &collect::KeyPath,
        logs: &mut BTreeMap<&'h Path, usize>,
    ) {
        let (doc, read, errors) = (self.doc, self.read, &mut *self.errors);
        let log = at.key("log");
        if let Some(spec) = h.log.as_ref().filter(|_| !read.skipped(&log)) {
            if h.output != crate::supervision::output::Mode::Capture {
                errors.push(doc.error_at(
                    &log,
                    None,
                    format!(
                        "a log file takes the lines foster captures, but output is {:?}: \
                         remove output, or set it to \"capture\"",
                        serde_json::to_value(h.output)
                            .ok()
                            .and_then(|v| v.as_str().map(str::to_string))
                            .unwrap_or_default()
                    ),
                ));
            }
            if let Some(first) = logs.get(spec.file.as_path()) {
                errors.push(doc.error_at(
                    &log.key("file"),
                    None,
                    format!(
                        "{} is helper[{}]'s log file already: each helper needs a file of \
                         its own (their rotations would rename each other's)",
                        spec.file.display(),
                        first + 1
                    ),
                ));
            } else {
                logs.insert(spec.file.as_path(), hi);
            }
        }
    }

    /// No two helpers with the same name.
    fn name<'h>(
        &mut self,
        h: &'h Helper,
        hi: usize,
        at: &collect::KeyPath,
        seen: &mut BTreeMap<&'h str, usize>,
    ) {
        let (doc, read, errors) = (self.doc, self.read, &mut *self.errors);
        let name = at.key("name");
        if !read.skipped(&name) {
            if let Some(first) = seen.get(h.name()) {
                errors.push(doc.error_at(
                    &name,
                    Some(h.name.span()),
                    format!(
                        "duplicate helper name {:?}: helper[{}] has it already; each \
                         helper needs its own name",
                        h.name(),
                        first + 1
                    ),
                ));
            } else {
                seen.insert(h.name(), hi);
            }
        }
    }

    /// At most [`MAX_GENERATIONS`] generations, each consistent.
    fn generations(&mut self, h: &Helper, at: &collect::KeyPath) {
        let (doc, read, errors) = (self.doc, self.read, &mut *self.errors);
        let generations = at.key("generation");
        if h.generations.len() > MAX_GENERATIONS && !read.skipped(&generations) {
            errors.push(doc.error_at(
                &generations,
                None,
                format!(
                    "{} generations declared: at most {MAX_GENERATIONS} (the last one \
                     applies to every deeper generation)",
                    h.generations.len()
                ),
            ));
        }
        for (gi, g) in h.generations.iter().enumerate() {
            let at = generations.index(gi);
            if read.skipped(&at) {
                continue;
            }
            if let Err(e) = g.check() {
                errors.push(doc.error_at(&at.key(e.field), e.span, e.message));
            }
        }
    }

    /// The readiness and health checks, each well formed; a log check only of captured output.
    fn probes(&mut self, h: &Helper, at: &collect::KeyPath) {
        let (doc, read, errors) = (self.doc, self.read, &mut *self.errors);
        let ready = at.key("ready");
        if let Some(r) = &h.ready
            && !read.skipped(&ready)
        {
            match r.check() {
                Err(e) => {
                    let path = if e.field.is_empty() {
                        ready.clone()
                    } else {
                        ready.key(e.field)
                    };
                    errors.push(doc.error_at(&path, e.span, e.message));
                }
                Ok(checks::ReadyCheck::Log(_))
                    if h.output != crate::supervision::output::Mode::Capture
                        && !read.skipped(&at.key("output")) =>
                {
                    errors.push(doc.error_at(
                        &ready.key("log"),
                        None,
                        format!(
                            "log reads the helper's captured output, and its output is {}: \
                             leave output out (capture is the default) or choose another \
                             readiness check",
                            serde_json::to_value(h.output)
                                .ok()
                                .and_then(|v| v.as_str().map(str::to_string))
                                .unwrap_or_default()
                        ),
                    ));
                }
                Ok(_) => {}
            }
        }
        let health = at.key("health");
        if let Some(hs) = &h.health
            && !read.skipped(&health)
            && let Err(e) = hs.probe()
        {
            let path = if e.field.is_empty() {
                health.clone()
            } else {
                health.key(e.field)
            };
            errors.push(doc.error_at(&path, e.span, e.message));
        }
    }

    /// The backoff's maximum not below its start.
    fn backoff(&mut self, h: &Helper, at: &collect::KeyPath) {
        let (doc, read, errors) = (self.doc, self.read, &mut *self.errors);
        let backoff = at.key("backoff");
        let b = &h.backoff;
        if b.max < b.initial && !read.skipped(&backoff) {
            errors.push(doc.error_at(
                &backoff.key("max"),
                None,
                format!(
                    "backoff.max ({}) is shorter than backoff.initial ({}): expected max >= \
                     initial",
                    crate::base::duration::Text(b.max.0),
                    crate::base::duration::Text(b.initial.0)
                ),
            ));
        }
    }
}

fn too_large() -> String {
    format!(
        "the configuration is larger than {} MiB ({MAX_CONFIG_BYTES} bytes), the most foster \
         reads",
        MAX_CONFIG_BYTES >> 20
    )
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
fn line_col(text: &str, offset: usize) -> Option<(usize, usize)> {
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
fn at_span(
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
fn key_at(text: &str, offset: usize) -> Option<String> {
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
    // The key of this line: for `a = { b = 1, c = 2 }` the innermost key left of the offset.
    let col = offset - line_start;
    let left = &line[..col];
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

    /// The first mistake of `text`.
    fn err(text: &str) -> ConfigError {
        Config::parse(Path::new("f.toml"), text)
            .unwrap_err()
            .first()
            .clone()
    }

    const HELPER: &str = "[[helper]]\nname = \"a\"\ncommand = [\"x\"]\n";

    fn ok(text: &str) -> Config {
        Config::parse(Path::new("f.toml"), text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    /// The error of `HELPER` followed by `extra`.
    fn helper_err(extra: &str) -> ConfigError {
        err(&format!("{HELPER}{extra}"))
    }

    /// `supervisor.rescan`: off by default, a duration of the one grammar, a bad one named.
    #[test]
    fn rescan_is_off_by_default_and_a_duration() {
        assert_eq!(ok(HELPER).supervisor.rescan, None);
        let c = ok(&format!("[supervisor]\nrescan = \"1.5s\"\n{HELPER}"));
        assert_eq!(
            c.supervisor.rescan,
            Some(PositiveDuration(Duration::from_millis(1500)))
        );
        for bad in ["\"0s\"", "\"often\"", "1"] {
            let e = err(&format!("[supervisor]\nrescan = {bad}\n{HELPER}"));
            assert_eq!(e.key.as_deref(), Some("supervisor.rescan"), "{bad}: {e}");
            assert_eq!(e.line, Some(2), "{bad}: {e}");
        }
    }

    #[test]
    fn helpers_compare_by_definition_not_by_place() {
        let one = ok("[[helper]]\nname = \"a\"\ncommand = [\"sleep\", \"1\"]\n");
        let moved = ok("\n\n[[helper]]\nname = \"a\"\ncommand = [\"sleep\", \"1\"]\n");
        assert_eq!(
            one.helpers[0], moved.helpers[0],
            "the same definition elsewhere"
        );
        for other in [
            "command = [\"sleep\", \"2\"]",
            "command = [\"sleep\", \"1\"]\nstop_grace = \"1s\"",
            "command = [\"sleep\", \"1\"]\nenv = { X = \"1\" }",
            "command = [\"sleep\", \"1\"]\noutput = \"null\"",
        ] {
            let c = ok(&format!("[[helper]]\nname = \"a\"\n{other}\n"));
            assert_ne!(one.helpers[0], c.helpers[0], "{other}");
        }
    }

    #[test]
    fn kill_and_reaction_agree_or_the_error_names_helper_generation_and_field() {
        // KILL alone: reaction kill, as in the policy's text form and `foster exec --signal`.
        let c = ok(&format!(
            "{HELPER}[[helper.generation]]\nsignal = \"KILL\"\n"
        ));
        assert_eq!(c.helpers[0].generation(1).reaction(), Reaction::Kill);
        assert_eq!(c.helpers[0].policy_chain().to_string(), "SIGKILL:kill:5s");
        let c = ok(&format!(
            "{HELPER}[[helper.generation]]\nreaction = \"kill\"\n"
        ));
        assert_eq!(c.helpers[0].generation(1).signal(), libc::SIGKILL);

        for reaction in ["exit", "notify"] {
            let e = helper_err(&format!(
                "[[helper.generation]]\nsignal = \"TERM\"\n\
                 [[helper.generation]]\nsignal = \"KILL\"\nreaction = \"{reaction}\"\n"
            ));
            assert_eq!(
                e.key.as_deref(),
                Some("helper[1].generation[2].reaction"),
                "{e}"
            );
            assert_eq!((e.line, e.column), (Some(8), Some(12)), "{e}");
            assert_eq!(e.helper.as_deref(), Some("a"), "{e}");
            assert!(
                e.to_string().contains(&format!(
                    "f.toml:8:12: helper \"a\": key `helper[1].generation[2].reaction`: \
                     SIGKILL cannot be handled, so reaction {reaction} cannot run"
                )),
                "{e}"
            );
            assert!(e.message.contains("SIGKILL cannot be handled"), "{e}");
            assert!(
                e.message
                    .contains(&format!("reaction {reaction} cannot run")),
                "{e}"
            );
        }
        let e = helper_err("[[helper.generation]]\nsignal = \"TERM\"\nreaction = \"kill\"\n");
        assert_eq!(
            e.key.as_deref(),
            Some("helper[1].generation[1].signal"),
            "{e}"
        );
        assert_eq!(e.line, Some(5), "{e}");
        assert!(
            e.message.contains("reaction kill is delivered as SIGKILL"),
            "{e}"
        );

        // The inline form and the orphan policy get the same checks.
        let e = helper_err("generation = [{ signal = \"KILL\", reaction = \"exit\" }]\n");
        assert_eq!(
            e.key.as_deref(),
            Some("helper[1].generation[1].reaction"),
            "{e}"
        );
        assert_eq!(e.line, Some(4), "{e}");
        let e = err(&format!(
            "[supervisor]\norphan_policy = {{ signal = \"KILL\", reaction = \"notify\" }}\n{HELPER}"
        ));
        assert_eq!(
            e.key.as_deref(),
            Some("supervisor.orphan_policy.reaction"),
            "{e}"
        );
        assert!(e.message.contains("SIGKILL cannot be handled"), "{e}");
        let c = ok(&format!(
            "[supervisor]\norphan_policy = {{ signal = \"KILL\" }}\n{HELPER}"
        ));
        assert_eq!(c.supervisor.orphan_policy.signal(), libc::SIGKILL);
    }

    #[test]
    fn parent_death_and_orphan_signals_must_end_a_process() {
        for sig in [
            "STOP", "TSTP", "TTIN", "TTOU", "CHLD", "CONT", "URG", "WINCH", "20",
        ] {
            let e = helper_err(&format!("[[helper.generation]]\nsignal = \"{sig}\"\n"));
            assert_eq!(
                e.key.as_deref(),
                Some("helper[1].generation[1].signal"),
                "{e}"
            );
            assert!(
                e.message
                    .contains("cannot be a parent-death or orphan signal"),
                "{sig}: {e}"
            );
            let e = err(&format!(
                "[supervisor]\norphan_policy = {{ signal = \"{sig}\" }}\n{HELPER}"
            ));
            assert_eq!(
                e.key.as_deref(),
                Some("supervisor.orphan_policy.signal"),
                "{e}"
            );
            assert!(e.message.contains("cannot be a parent-death"), "{sig}: {e}");
        }
        assert!(
            helper_err("generation = [{ signal = \"CHLD\" }]\n")
                .message
                .contains("ignored")
        );
        assert!(
            helper_err("generation = [{ signal = \"STOP\" }]\n")
                .message
                .contains("stops")
        );
        for sig in [
            "KILL", "TERM", "HUP", "INT", "QUIT", "USR1", "USR2", "RTMIN+3", "RTMAX",
        ] {
            ok(&format!(
                "{HELPER}generation = [{{ signal = \"{sig}\" }}]\n"
            ));
        }
        // A stop signal may be one a helper handles, but not one that stops it.
        for sig in ["STOP", "TSTP", "TTIN", "TTOU"] {
            let e = helper_err(&format!("stop_signal = \"{sig}\"\n"));
            assert_eq!(e.key.as_deref(), Some("helper[1].stop_signal"), "{e}");
            assert!(e.message.contains("stops the helper"), "{e}");
        }
        ok(&format!("{HELPER}stop_signal = \"WINCH\"\n"));
        // Out-of-range real-time forms are errors, not an overflow or another signal.
        for sig in [
            "RTMIN+2147483647",
            "RTMIN+-5",
            "RTMIN+99",
            "RTMAX-99",
            "2147483648",
        ] {
            let e = helper_err(&format!("stop_signal = \"{sig}\"\n"));
            assert!(
                e.message.contains(&format!("signal {sig:?}: "))
                    && (e
                        .message
                        .contains("expected RTMIN+N or RTMAX-N with N from 0 to")
                        || e.message.contains("not a signal number (1 to")),
                "{sig}: {e}"
            );
        }
        let e = helper_err("stop_signal = 9223372036854775807\n");
        assert!(e.message.contains("not a signal number"), "{e}");
    }

    #[test]
    fn durations_are_at_least_one_millisecond() {
        for text in ["0.0000000001s", "0.5ms", "0.0009s", "0.000001m"] {
            let e = helper_err(&format!("stop_grace = \"{text}\"\n"));
            assert!(e.message.contains("shorter than 1ms"), "{text}: {e}");
            assert_eq!(e.key.as_deref(), Some("helper[1].stop_grace"), "{e}");
        }
        for text in ["1ms", "0.001s", "1.0ms"] {
            let c = ok(&format!("{HELPER}stop_grace = \"{text}\"\n"));
            assert_eq!(c.helpers[0].stop_grace.0, MIN_DURATION, "{text}");
        }
        let e = helper_err("[[helper.generation]]\ngrace = \"0.1ms\"\n");
        assert!(e.message.contains("shorter than 1ms"), "{e}");
        for text in ["nan", "inf", "-inf"] {
            let e = helper_err(&format!("stop_grace = {text}\n"));
            assert!(e.message.contains("is not a duration"), "{text}: {e}");
        }
    }

    #[test]
    fn environment_names_and_values_must_reach_the_environment_intact() {
        for (env, why) in [
            ("{ \"A=B\" = \"x\" }", "name \"A=B\" contains '='"),
            ("{ \"\" = \"y\" }", "name \"\" is empty"),
            ("{ \"=\" = \"y\" }", "contains '='"),
            ("{ \"A\\u0000\" = \"x\" }", "contains a NUL byte"),
            (
                "{ A = \"x\\u0000y\" }",
                "value of the environment variable \"A\"",
            ),
        ] {
            let e = helper_err(&format!("env = {env}\n"));
            assert!(e.message.contains(why), "{env}: {e}");
            assert_eq!(e.key.as_deref(), Some("helper[1].env"), "{e}");
        }
        let c = ok(&format!(
            "{HELPER}env = {{ A_1 = \"x=y\", \"lower.dot\" = \"\" }}\n"
        ));
        assert_eq!(c.helpers[0].env["A_1"], "x=y");
    }

    #[test]
    fn user_and_group_are_names_or_numbers() {
        for (value, want) in [
            ("0", "0"),
            ("\"0\"", "0"),
            ("65534", "65534"),
            ("\"007\"", "7"),
            ("4294967294", "4294967294"),
            ("\"nobody\"", "nobody"),
            ("\"_apt\"", "_apt"),
        ] {
            let c = ok(&format!("{HELPER}user = {value}\ngroup = {value}\n"));
            assert_eq!(c.helpers[0].user.as_deref(), Some(want), "{value}");
            assert_eq!(c.helpers[0].group.as_deref(), Some(want), "{value}");
        }
        for (value, why) in [
            ("-1", "is negative"),
            ("\"-1\"", "is negative"),
            ("4294967295", "(uid_t)-1"),
            ("\"4294967295\"", "\"no change\""),
            ("4294967296", "out of range"),
            ("\"99999999999999999999999\"", "out of range"),
            ("\"+0\"", "without a sign"),
            ("\"\"", "is empty"),
            ("\" 0\"", "white space"),
            ("\"a:b\"", "contains ':'"),
            ("\"a\\u0000\"", "control character"),
            ("1.5", "expected a user name or number"),
            ("true", "expected a user name or number"),
        ] {
            let e = helper_err(&format!("user = {value}\n"));
            assert!(e.message.contains(why), "{value}: {e}");
            assert_eq!(e.key.as_deref(), Some("helper[1].user"), "{e}");
        }
        let e = helper_err("group = 4294967295\n");
        assert!(e.message.contains("(gid_t)-1"), "{e}");
        assert_eq!(e.key.as_deref(), Some("helper[1].group"), "{e}");
    }

    #[test]
    fn output_is_capture_inherit_or_null() {
        use crate::supervision::output::Mode;
        assert_eq!(ok(HELPER).helpers[0].output, Mode::Capture);
        for (text, mode) in [
            ("capture", Mode::Capture),
            ("inherit", Mode::Inherit),
            ("null", Mode::Null),
        ] {
            let c = ok(&format!("{HELPER}output = \"{text}\"\n"));
            assert_eq!(c.helpers[0].output, mode);
        }
        let e = helper_err("output = \"file\"\n");
        assert_eq!(e.key.as_deref(), Some("helper[1].output"), "{e}");
        assert!(e.message.contains("`capture`, `inherit`, `null`"), "{e}");
    }

    #[test]
    fn a_ring_is_bounded_in_lines_and_bytes() {
        let c = ok(HELPER);
        assert_eq!(
            c.helpers[0].ring.bounds(),
            crate::supervision::output::ring::Bounds::default()
        );
        let c = ok(&format!(
            "{HELPER}ring = {{ lines = 5, bytes = \"64KiB\" }}\n"
        ));
        assert_eq!(
            (c.helpers[0].ring.lines, c.helpers[0].ring.bytes),
            (5, 65536)
        );
        let c = ok(&format!("{HELPER}ring = {{ lines = 0 }}\n"));
        assert_eq!(
            (c.helpers[0].ring.lines, c.helpers[0].ring.bytes),
            (0, 1 << 20)
        );
        for (ring, key, why) in [
            (
                "{ lines = 1000001 }",
                "helper[1].ring.lines",
                "from 0 to 1000000",
            ),
            (
                "{ lines = -1 }",
                "helper[1].ring.lines",
                "from 0 to 1000000",
            ),
            (
                "{ lines = \"many\" }",
                "helper[1].ring.lines",
                "from 0 to 1000000",
            ),
            (
                "{ bytes = \"1GiB\" }",
                "helper[1].ring.bytes",
                "at most 268435456 bytes",
            ),
            ("{ bytes = -5 }", "helper[1].ring.bytes", "negative size"),
            (
                "{ size = 3 }",
                "helper[1].ring.size",
                "unknown field `size`",
            ),
        ] {
            let e = helper_err(&format!("ring = {ring}\n"));
            assert_eq!(e.key.as_deref(), Some(key), "{ring}: {e}");
            assert!(e.message.contains(why), "{ring}: {e}");
        }
    }

    #[test]
    fn a_log_is_a_file_a_size_and_a_count() {
        let c = ok(&format!("{HELPER}log = {{ file = \"a.log\" }}\n"));
        let log = c.helpers[0].log.as_ref().unwrap();
        assert_eq!(log.file, Path::new("a.log"));
        assert_eq!(log.rotation(), crate::base::logfile::Rotation::default());
        let c = ok(&format!(
            "{HELPER}log = {{ file = \"/l/a.log\", max_size = \"10MB\", keep = 0 }}\n"
        ));
        let log = c.helpers[0].log.as_ref().unwrap();
        assert_eq!((log.max_size, log.keep), (10_000_000, 0));
        let c = ok(&format!(
            "{HELPER}log = {{ file = \"a\", max_size = 4096 }}\n"
        ));
        assert_eq!(c.helpers[0].log.as_ref().unwrap().max_size, 4096);
        for (log, key, why) in [
            ("{ file = \"\" }", "helper[1].log.file", "path is empty"),
            (
                "{ file = \"a\", max_size = \"10 parsecs\" }",
                "helper[1].log.max_size",
                "unknown unit",
            ),
            (
                "{ file = \"a\", max_size = -1 }",
                "helper[1].log.max_size",
                "negative size",
            ),
            (
                "{ file = \"a\", keep = 1001 }",
                "helper[1].log.keep",
                "from 0 to 1000",
            ),
            (
                "{ file = \"a\", keep = -1 }",
                "helper[1].log.keep",
                "from 0 to 1000",
            ),
            (
                "{ file = \"a\", rotate = 3 }",
                "helper[1].log.rotate",
                "unknown field `rotate`",
            ),
            (
                "{ max_size = \"1M\" }",
                "helper[1].log.file",
                "missing field `file`",
            ),
        ] {
            let e = helper_err(&format!("log = {log}\n"));
            assert_eq!(e.key.as_deref(), Some(key), "{log}: {e}");
            assert!(e.message.contains(why), "{log}: {e}");
        }
        let e = helper_err("output = \"inherit\"\nlog = { file = \"a\" }\n");
        assert_eq!(e.key.as_deref(), Some("helper[1].log"), "{e}");
        assert!(e.message.contains("output is \"inherit\""), "{e}");
        let e = err(&format!(
            "{HELPER}log = {{ file = \"same\" }}\n[[helper]]\nname = \"b\"\ncommand = [\"x\"]\n\
             log = {{ file = \"same\" }}\n"
        ));
        assert_eq!(e.key.as_deref(), Some("helper[2].log.file"), "{e}");
        assert!(e.message.contains("helper[1]'s log file already"), "{e}");
    }

    #[test]
    fn cwd_is_a_usable_path() {
        let e = helper_err("cwd = \"\"\n");
        assert!(e.message.contains("working directory is empty"), "{e}");
        let e = helper_err("cwd = \"/a\\u0000b\"\n");
        assert!(e.message.contains("NUL"), "{e}");
    }

    #[test]
    fn a_chain_has_at_most_max_generations() {
        let gens = |n: usize| "[[helper.generation]]\n".repeat(n);
        let c = ok(&format!("{HELPER}{}", gens(MAX_GENERATIONS)));
        assert_eq!(c.helpers[0].policy_chain().depth(), MAX_GENERATIONS);
        let e = helper_err(&gens(MAX_GENERATIONS + 1));
        assert!(e.message.contains("at most 32"), "{e}");
        assert_eq!(e.key.as_deref(), Some("helper[1].generation"), "{e}");
    }

    #[test]
    fn reading_is_bounded_and_wants_utf8() {
        let e = Config::read(Path::new("-"), std::io::repeat(b'#'))
            .unwrap_err()
            .first()
            .clone();
        assert!(e.message.contains("larger than 16 MiB"), "{e}");
        let fits = format!("{HELPER}{}", "#".repeat(1000));
        assert!(Config::read(Path::new("-"), fits.as_bytes()).is_ok());
        let mut bytes = HELPER.as_bytes().to_vec();
        bytes.extend_from_slice(b"# caf\xc3\xa9 \xff\n");
        let e = Config::read(Path::new("-"), &bytes[..])
            .unwrap_err()
            .first()
            .clone();
        assert!(e.message.contains("not UTF-8"), "{e}");
        assert!(e.message.contains("0xff"), "{e}");
        assert_eq!((e.line, e.column), (Some(4), Some(8)), "{e}");
    }

    #[test]
    fn errors_are_escaped_and_positions_never_split_a_character() {
        let e = helper_err("\"\\u001b]0;owned\\u0007\" = 1\n");
        let shown = e.to_string();
        assert!(
            !shown.contains('\x1b') && !shown.contains('\x07'),
            "{shown:?}"
        );
        assert!(shown.contains("\\e]0;owned"), "{shown:?}");
        let text = "é\n[[helper]]\nnamé = 1\n";
        for offset in 0..=text.len() + 2 {
            let _ = line_col(text, offset);
            let _ = key_at(text, offset);
            let _ = table_at(text, offset);
        }
        assert_eq!(line_col("é", 1), Some((1, 1)));
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
        let e = |text: &str| PositiveDuration::parse(text).unwrap_err().to_string();
        assert!(e("0s").contains("zero"));
        assert!(e("-1s").contains("negative"));
        assert_eq!(
            PositiveDuration::parse("5").unwrap().0,
            Duration::from_secs(5)
        );
        assert!(e("5 weeks").contains("unknown unit"));
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
        assert_eq!(a.stop_signal, Sig::INT);
        assert_eq!(a.generation(1).signal(), libc::SIGTERM);
        assert_eq!(a.generation(2).reaction(), Reaction::Kill);
        assert_eq!(a.generation(7).reaction(), Reaction::Kill);
        assert_eq!(c.helpers[1].generation(1), GenerationPolicy::default());
        assert_eq!(c.supervisor.orphan_policy.signal(), libc::SIGHUP);
    }

    #[test]
    fn every_mistake_of_a_file_is_reported_at_once_in_its_order() {
        let text = "[[helper]]\nname = \"web\"\ncommand = [\"x\"]\nstop_grace = \"0s\"\n\
                    restart = \"often\"\nbackoff = { initial = \"1h\", max = \"0ms\" }\n\
                    [[helper]]\nname = \"web\"\ncommand = []\nuser = -1\ncolour = 1\n\
                    [[helper.generation]]\nsignal = \"KILL\"\nreaction = \"exit\"\n\
                    [[helper]]\ncommand = 5\n";
        let all = Config::parse(Path::new("f.toml"), text).unwrap_err();
        let got: Vec<(Option<usize>, Option<&str>, Option<&str>)> = all
            .iter()
            .map(|e| (e.line, e.helper.as_deref(), e.key.as_deref()))
            .collect();
        assert_eq!(
            got,
            [
                (Some(4), Some("web"), Some("helper[1].stop_grace")),
                (Some(5), Some("web"), Some("helper[1].restart")),
                (Some(6), Some("web"), Some("helper[1].backoff.max")),
                (Some(8), Some("web"), Some("helper[2].name")),
                (Some(9), Some("web"), Some("helper[2].command")),
                (Some(10), Some("web"), Some("helper[2].user")),
                (Some(11), Some("web"), Some("helper[2].colour")),
                (
                    Some(14),
                    Some("web"),
                    Some("helper[2].generation[1].reaction")
                ),
                (Some(15), None, Some("helper[3].name")),
                (Some(16), None, Some("helper[3].command")),
            ],
            "{all}"
        );
        let shown = all.to_string();
        assert_eq!(shown.lines().count(), 10, "{shown}");
        assert!(
            shown.starts_with("f.toml:4:14: helper \"web\": key `helper[1].stop_grace`: zero"),
            "{shown}"
        );
        // A field taken out for its own mistake is not checked again against the others: the
        // zero max is one mistake, not also "shorter than the initial delay".
        assert!(!shown.contains("shorter than backoff.initial"), "{shown}");
        assert!(
            shown.contains("duplicate helper name \"web\": helper[1] has it"),
            "{shown}"
        );
        // A helper whose name is missing is not a duplicate of another without one.
        let e = Config::parse(
            Path::new("f.toml"),
            "[[helper]]\ncommand = \"x\"\n[[helper]]\ncommand = \"y\"\n",
        )
        .unwrap_err();
        assert_eq!(e.len(), 2, "{e}");
        assert!(e.iter().all(|e| e.message == "missing field `name`"), "{e}");
    }

    #[test]
    fn helpers_that_are_not_tables_are_one_mistake_each() {
        let e = Config::parse(Path::new("f.toml"), "helper = 5\n").unwrap_err();
        assert_eq!(e.len(), 1, "not also \"no helper declared\": {e}");
        assert_eq!(e.first().key.as_deref(), Some("helper"), "{e}");
        assert!(e.first().message.contains("expected a sequence"), "{e}");
        let e = Config::parse(
            Path::new("f.toml"),
            "helper = [1, { name = \"a\", command = \"x\", stop_grace = \"0s\" }, \"b\"]\n",
        )
        .unwrap_err();
        let keys: Vec<_> = e.iter().map(|e| e.key.as_deref().unwrap_or("")).collect();
        assert_eq!(
            keys,
            ["helper[1]", "helper[2].stop_grace", "helper[3]"],
            "{e}"
        );
        assert!(e.first().message.contains("expected struct Helper"), "{e}");
        assert_eq!(e.iter().nth(1).unwrap().helper.as_deref(), Some("a"), "{e}");
    }

    #[test]
    fn cross_field_checks_run_when_their_fields_were_read() {
        let e = helper_err("backoff = { initial = \"2s\", max = \"1s\" }\n");
        assert_eq!(e.key.as_deref(), Some("helper[1].backoff.max"), "{e}");
        assert_eq!((e.line, e.column), (Some(4), Some(35)), "{e}");
        assert!(
            e.message
                .contains("backoff.max (1s) is shorter than backoff.initial (2s)"),
            "{e}"
        );
        let e = Config::parse(
            Path::new("f.toml"),
            &format!("{HELPER}backoff = {{ initial = \"2x\", max = \"500ms\" }}\n"),
        )
        .unwrap_err();
        // Not also "max shorter than initial": the default initial (1s) stands in for the one
        // written wrong, and is not compared.
        assert_eq!(e.len(), 1, "{e}");
        assert_eq!(
            e.first().key.as_deref(),
            Some("helper[1].backoff.initial"),
            "{e}"
        );
    }

    #[test]
    fn a_file_of_many_mistakes_stops_at_the_bound_and_says_so() {
        let one = "[[helper]]\nname = \"h\"\ncommand = [\"x\"]\nstop_grace = \"0s\"\n";
        let text: String = (0..MAX_MISTAKES + 20)
            .map(|i| one.replace("\"h\"", &format!("\"h{i}\"")))
            .collect();
        let e = Config::parse(Path::new("f.toml"), &text).unwrap_err();
        assert_eq!(e.len(), MAX_MISTAKES);
        assert!(e.more());
        let lines = e.lines();
        assert_eq!(lines.len(), MAX_MISTAKES + 1);
        assert_eq!(
            lines.last().unwrap(),
            "f.toml: more mistakes may follow: the first 100 are shown"
        );
        // The checks across fields are bounded too: 119 duplicates of one name.
        let one = "[[helper]]\nname = \"h\"\ncommand = [\"x\"]\n";
        let e = Config::parse(Path::new("f.toml"), &one.repeat(MAX_MISTAKES + 20)).unwrap_err();
        assert_eq!((e.len(), e.more()), (MAX_MISTAKES, true));
        assert_eq!(e.first().key.as_deref(), Some("helper[2].name"));
    }

    #[test]
    fn each_mistake_has_its_own_message() {
        let all = Config::parse(
            Path::new("f.toml"),
            "[[helper]]\nname = \"a\"\ncomand = [\"x\"]\n",
        )
        .unwrap_err();
        assert_eq!(all.len(), 2, "{all}");
        // In the order of the file: the table that lacks its command, then the misspelt key.
        let e = all.first();
        assert_eq!((e.line, e.column), (Some(1), Some(1)), "{e}");
        assert!(e.message.contains("missing field `command`"), "{e}");
        assert_eq!(e.key.as_deref(), Some("helper[1].command"), "{e}");
        let e = all.iter().nth(1).unwrap();
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
