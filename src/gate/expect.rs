//! What a process must expect of its parent, and what it passes on.
//!
//! Owns [`Expectation`], read from `FOSTER_PARENT` and `FOSTER_POLICY` (or `FOSTER_GATED` in a
//! process foster already gated) by [`Expectation::from_env`], and [`env_for_children`], the
//! variables a gated process hands its children.

use std::fmt;

use crate::identity::Identity;
use crate::policy::{ENV_PARENT, ENV_POLICY, Policy};

/// The environment variable that keeps, in a gated process, what it was checked against.
pub const ENV_GATED: &str = "FOSTER_GATED";

/// What a process expects of its parent: read from the environment by [`Expectation::from_env`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expectation {
    /// The identity the parent must have.
    pub parent: Identity,
    /// This process's policy chain (its own generation first).
    pub policy: Policy,
}

/// The environment did not say what to expect; the text names the variable and the problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvError(pub String);

impl fmt::Display for EnvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for EnvError {}

impl Expectation {
    /// Reads `FOSTER_PARENT` and `FOSTER_POLICY` (or, when `FOSTER_PARENT` names this very
    /// process, i.e. foster already gated it, `FOSTER_GATED`). `default_policy` is used when no
    /// policy variable is set.
    pub fn from_env(default_policy: Option<&Policy>) -> Result<Expectation, EnvError> {
        let var = |name: &str| -> Result<Option<String>, EnvError> {
            match std::env::var(name) {
                Ok(v) => Ok(Some(v)),
                Err(std::env::VarError::NotPresent) => Ok(None),
                Err(std::env::VarError::NotUnicode(_)) => {
                    Err(EnvError(format!("{name} is not valid text")))
                }
            }
        };
        let me = Identity::current().map_err(|e| EnvError(format!("own identity: {e}")))?;
        let parent_text = var(ENV_PARENT)?.ok_or_else(|| {
            EnvError(format!(
                "{ENV_PARENT} is not set: the launcher must say which parent to expect \
                 ({ENV_PARENT}=$(foster identity $$), or --parent PID:STARTTIME)"
            ))
        })?;
        let parent: Identity = parent_text
            .parse()
            .map_err(|e| EnvError(format!("{ENV_PARENT}: {e}")))?;
        if parent == me {
            let gated = var(ENV_GATED)?.ok_or_else(|| {
                EnvError(format!(
                    "{ENV_PARENT} ({parent}) names this process itself, and {ENV_GATED} is not \
                     set: the shell that took its own identity ran this command in its own \
                     place (the last command of `sh -c` or `bash -c`, or `exec`), so that shell \
                     is not its parent; run it as a child instead (`... foster exec -- PROGRAM \
                     & wait $!`)"
                ))
            })?;
            let (p, chain) = gated.split_once(';').ok_or_else(|| {
                EnvError(format!(
                    "{ENV_GATED} {gated:?}: expected PID:STARTTIME;POLICY"
                ))
            })?;
            let parent = p
                .parse()
                .map_err(|e| EnvError(format!("{ENV_GATED}: {e}")))?;
            let policy = chain
                .parse()
                .map_err(|e| EnvError(format!("{ENV_GATED}: {e}")))?;
            return Ok(Expectation { parent, policy });
        }
        let policy = match var(ENV_POLICY)? {
            Some(t) => t
                .parse()
                .map_err(|e| EnvError(format!("{ENV_POLICY}: {e}")))?,
            None => default_policy.cloned().ok_or_else(|| {
                EnvError(format!("{ENV_POLICY} is not set and no policy was given"))
            })?,
        };
        Ok(Expectation { parent, policy })
    }
}

/// The environment a gated process passes on: `FOSTER_PARENT` = itself, `FOSTER_POLICY` = the
/// next generation's chain (removed when there is none), `FOSTER_GATED` = what it was checked
/// against. Returned as (name, value-or-None-to-remove).
pub fn env_for_children(
    me: Identity,
    expected: Identity,
    policy: &Policy,
) -> Vec<(String, Option<String>)> {
    vec![
        (ENV_PARENT.into(), Some(me.to_string())),
        (
            ENV_POLICY.into(),
            policy.next.as_ref().map(|n| n.to_string()),
        ),
        (ENV_GATED.into(), Some(format!("{expected};{policy}"))),
    ]
}
