//! The values of single fields: durations, commands, user and group ids, and the error of a
//! field that is wrong. Uses only base and process.

use std::ops::Range;
use std::time::Duration;

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};

/// The shortest duration a configuration may give (a grace, a delay): 1 ms
/// ([`crate::base::duration::MIN`]). Shorter ones, `"0.0000000001s"` as much as `"0s"`, are errors
/// rather than rounded to zero.
pub const MIN_DURATION: Duration = crate::base::duration::MIN;

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

/// The shell of `command = { shell = "..." }`.
pub const SHELL: &str = "/bin/sh";

/// `command = { shell = "python3 -m http.server" }`: one string for [`SHELL`] `-c`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ShellForm {
    shell: String,
}

impl<'de> Deserialize<'de> for CommandLine {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Form {
            List(Vec<String>),
            One(String),
            Shell(ShellForm),
        }
        let words = match Form::deserialize(d).map_err(|e: D::Error| {
            // A command left out is told as such (serde asks for a missing field through the
            // same path).
            if e.to_string().starts_with("missing field") {
                return e;
            }
            de::Error::custom(
                "expected a list of strings, program first: command = [\"/bin/sleep\", \"60\"], \
                 or a line for the shell: command = { shell = \"sleep 60\" }",
            )
        })? {
            Form::List(v) => v,
            Form::One(s) if s.trim() != s || s.contains(char::is_whitespace) => {
                return Err(de::Error::custom(one_string_with_spaces(&s)));
            }
            Form::One(s) => vec![s],
            Form::Shell(ShellForm { shell }) if shell.trim().is_empty() => {
                return Err(de::Error::custom(
                    "the shell line is empty: expected a command, e.g. { shell = \"sleep 60\" }",
                ));
            }
            Form::Shell(ShellForm { shell }) => vec![SHELL.into(), "-c".into(), shell],
        };
        match words.first() {
            None => Err(de::Error::custom(
                "the command is empty: expected at least the program, e.g. \
                 [\"/bin/sleep\", \"60\"]",
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

/// A command written as one string with white space: a string is a program alone (no shell
/// splits it), so say the two forms that mean what was likely meant.
fn one_string_with_spaces(s: &str) -> String {
    let words: Vec<String> = s.split_whitespace().map(|w| format!("{w:?}")).collect();
    format!(
        "{s:?} is one string with spaces, which would be taken as the name of one program: \
         write a list, command = [{}], or use the shell, command = {{ shell = {s:?} }} (run \
         by {SHELL} -c)",
        words.join(", ")
    )
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
