//! Parent-death policies: what a launched generation does when its supervisor is lost.
//!
//! Owns [`Policy`] (signal, [`Reaction`], grace, and the policy of the *next* generation), its
//! compact text form (`FOSTER_POLICY`: `TERM:exit:10s;KILL`, [`Policy`] gives the grammar) and
//! the environment variables through which a policy and the expected parent identity travel to
//! an exec'd generation (`FOSTER_PARENT=PID:STARTTIME`, checked, never trusted). A chain names
//! at most [`MAX_GENERATIONS`] generations.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::process::signal::{Sig, SignalError};

/// The environment variable carrying the expected parent identity, `PID:STARTTIME`.
pub const ENV_PARENT: &str = "FOSTER_PARENT";
/// The environment variable carrying the policy chain, `GEN[;GEN]...`.
pub const ENV_POLICY: &str = "FOSTER_POLICY";

/// The default grace period of the `exit` and `notify` reactions.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(5);

/// The most generations a policy chain may name (the last one applies to every deeper
/// generation, so a longer chain says nothing more; the bound keeps the chain, its text and
/// every walk along it small).
pub const MAX_GENERATIONS: usize = 32;

/// What a generation does when its parent-death notification arrives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Reaction {
    /// Bounded cleanup, then exit within the grace period.
    Exit,
    /// Close admission and hand the event to the program's event loop; the program decides.
    Notify,
    /// The kernel kills the process with SIGKILL; nothing runs.
    Kill,
}

impl Reaction {
    /// The reaction's name in the text form.
    pub fn name(self) -> &'static str {
        match self {
            Reaction::Exit => "exit",
            Reaction::Notify => "notify",
            Reaction::Kill => "kill",
        }
    }
}

impl FromStr for Reaction {
    type Err = PolicyError;
    fn from_str(s: &str) -> Result<Reaction, PolicyError> {
        match s.to_ascii_lowercase().as_str() {
            "exit" => Ok(Reaction::Exit),
            "notify" => Ok(Reaction::Notify),
            "kill" => Ok(Reaction::Kill),
            _ => Err(PolicyError(format!(
                "unknown reaction {s:?} (expected exit, notify or kill)"
            ))),
        }
    }
}

impl fmt::Display for Reaction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A policy could not be parsed or is not consistent; the text says what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PolicyError(pub String);

impl From<SignalError> for PolicyError {
    fn from(e: SignalError) -> PolicyError {
        PolicyError(e.to_string())
    }
}

/// One generation's parent-death policy, and the policy its children get.
///
/// `signal` is a raw signal number so that the gate's own failure path (an invalid number, which
/// `prctl` rejects with `EINVAL`) can be exercised; [`Policy::new`] and the parser only build
/// valid ones.
///
/// A policy: signal, [`Reaction`], grace, and the policy of the *next* generation; its
/// compact text form and the environment variables through which a policy and the expected
/// parent identity travel to an exec'd generation:
///
/// - `FOSTER_PARENT=PID:STARTTIME`: the identity of the process that must be this process's
///   parent (see [`crate::process::identity`]). It is checked, never trusted: a value inherited
///   from an
///   older generation names a process that is not the actual parent, and the gate refuses it.
/// - `FOSTER_POLICY=GEN[;GEN]...`: this generation's policy first, then the next generation's,
///   and so on. One generation is `SIGNAL[:REACTION[:GRACE]]`:
///   - `SIGNAL`: a name with or without `SIG` (`TERM`, `SIGHUP`, `RTMIN+2`) or a number, one
///     whose default action ends a process;
///   - `REACTION`: `exit` (bounded cleanup, then exit within the grace), `notify` (close
///     admission, hand the event to the program's event loop) or `kill` (SIGKILL: nothing to
///     handle; the signal must then be `KILL` or left out);
///   - `GRACE`: a duration of [`crate::base::duration`]'s grammar: `500ms`, `1.5s`, `2m`, or a
///     plain
///     number of seconds; at least 1 ms.
///
///   Defaults: reaction `exit` (`kill` for `KILL`), grace `5s`. Examples: `TERM`,
///   `TERM:exit:10s;KILL`, `USR1:notify:2s;TERM:exit:1s`.
///
/// A generation with no next policy launches its own children unarmed unless they are given one.
///
/// Signals are read and written by [`crate::process::signal`] (a generation's signal must end a
/// process:
/// [`Sig::ending`]); the text form writes them `SIGTERM`. A chain names at most
/// [`MAX_GENERATIONS`] generations.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Policy {
    /// The signal armed with `PR_SET_PDEATHSIG`.
    pub signal: i32,
    /// What the generation does when it arrives.
    pub reaction: Reaction,
    /// How long cleanup may take before the process is ended regardless.
    pub grace: Duration,
    /// The policy the next generation (this one's children) gets, if any.
    pub next: Option<Box<Policy>>,
}

impl Policy {
    /// A policy with `signal` and `reaction`, the default grace and no next generation, or
    /// the error of [`Policy::validate`] when they are inconsistent.
    pub fn checked(signal: i32, reaction: Reaction) -> Result<Policy, PolicyError> {
        let p = Policy {
            signal,
            reaction,
            grace: DEFAULT_GRACE,
            next: None,
        };
        p.validate()?;
        Ok(p)
    }

    /// [`Policy::checked`] for values fixed in the code. Panics when they are inconsistent:
    /// anything that comes from input goes through [`Policy::checked`] or the text form.
    pub fn new(signal: i32, reaction: Reaction) -> Policy {
        match Policy::checked(signal, reaction) {
            Ok(p) => p,
            Err(e) => panic!("{e}"),
        }
    }

    /// `SIGTERM`, reaction `exit`, 5 s grace: the default of `foster exec`.
    pub fn term() -> Policy {
        Policy::new(libc::SIGTERM, Reaction::Exit)
    }

    /// Sets the grace period.
    pub fn with_grace(mut self, grace: Duration) -> Policy {
        self.grace = grace;
        self
    }

    /// Sets the next generation's policy.
    pub fn with_next(mut self, next: Policy) -> Policy {
        self.next = Some(Box::new(next));
        self
    }

    /// Checks that this generation's fields agree with each other (the chain is checked by
    /// [`Policy::from_str`]).
    pub fn validate(&self) -> Result<(), PolicyError> {
        match (self.reaction, self.signal == libc::SIGKILL) {
            (Reaction::Kill, false) => Err(PolicyError(format!(
                "reaction kill is delivered as SIGKILL, not {}: leave the signal out or use KILL",
                crate::process::signal::name(self.signal)
            ))),
            (Reaction::Exit | Reaction::Notify, true) => Err(PolicyError(format!(
                "SIGKILL cannot be handled, so reaction {} cannot run: use reaction kill or \
                 another signal",
                self.reaction
            ))),
            _ => Ok(()),
        }
    }

    /// The number of generations in the chain, this one included.
    pub fn depth(&self) -> usize {
        1 + self.next.as_ref().map_or(0, |n| n.depth())
    }

    /// This generation alone, in text form (`SIGTERM:exit:5s`).
    pub fn generation_text(&self) -> String {
        format!(
            "{}:{}:{}",
            crate::process::signal::name(self.signal),
            self.reaction,
            crate::base::duration::Text(self.grace)
        )
    }
}

impl fmt::Display for Policy {
    /// The whole chain, `GEN[;GEN]...`: the value of `FOSTER_POLICY`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.generation_text())?;
        if let Some(n) = &self.next {
            write!(f, ";{n}")?;
        }
        Ok(())
    }
}

fn parse_generation(text: &str, index: usize) -> Result<Policy, PolicyError> {
    let ctx = |e: PolicyError| PolicyError(format!("generation {} ({text:?}): {e}", index + 1));
    let mut parts = text.split(':');
    let sig_text = parts.next().unwrap_or("");
    let reaction_text = parts.next();
    let grace_text = parts.next();
    if parts.next().is_some() {
        return Err(ctx(PolicyError(
            "expected SIGNAL[:REACTION[:GRACE]]".into(),
        )));
    }
    let reaction = reaction_text
        .filter(|r| !r.is_empty())
        .map(str::parse)
        .transpose()
        .map_err(ctx)?;
    let signal = if sig_text.trim().is_empty() {
        match reaction {
            Some(Reaction::Kill) => libc::SIGKILL,
            _ => return Err(ctx(PolicyError("the signal is missing".into()))),
        }
    } else {
        Sig::parse_ending(sig_text)
            .map_err(|e| ctx(e.into()))?
            .number()
    };
    let reaction = reaction.unwrap_or(if signal == libc::SIGKILL {
        Reaction::Kill
    } else {
        Reaction::Exit
    });
    let grace = grace_text
        .map(|g| crate::base::duration::parse(g).map_err(|e| ctx(PolicyError(e.to_string()))))
        .transpose()?
        .unwrap_or(DEFAULT_GRACE);
    let p = Policy {
        signal,
        reaction,
        grace,
        next: None,
    };
    p.validate().map_err(ctx)?;
    Ok(p)
}

impl FromStr for Policy {
    type Err = PolicyError;

    /// Parses `GEN[;GEN]...`; errors name the generation and the field that is wrong.
    fn from_str(s: &str) -> Result<Policy, PolicyError> {
        if s.trim().is_empty() {
            return Err(PolicyError(
                "policy is empty (expected SIGNAL[:REACTION[:GRACE]])".into(),
            ));
        }
        let gens: Vec<&str> = s.split(';').collect();
        if gens.len() > MAX_GENERATIONS {
            return Err(PolicyError(format!(
                "{} generations: at most {MAX_GENERATIONS} (the last one applies to every deeper \
                 generation)",
                gens.len()
            )));
        }
        let mut policy: Option<Policy> = None;
        for (i, g) in gens.iter().enumerate().rev() {
            let mut p = parse_generation(g, i)?;
            p.next = policy.map(Box::new);
            policy = Some(p);
        }
        policy.ok_or_else(|| PolicyError("policy is empty".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inconsistent_policies_are_errors_not_panics() {
        assert!(Policy::checked(libc::SIGKILL, Reaction::Exit).is_err());
        assert!(Policy::checked(libc::SIGKILL, Reaction::Notify).is_err());
        assert!(Policy::checked(libc::SIGTERM, Reaction::Kill).is_err());
        assert_eq!(
            Policy::checked(libc::SIGTERM, Reaction::Exit),
            Ok(Policy::term())
        );
    }

    #[test]
    fn a_chain_has_a_bounded_length() {
        let longest = vec!["TERM"; MAX_GENERATIONS].join(";");
        assert_eq!(longest.parse::<Policy>().unwrap().depth(), MAX_GENERATIONS);
        let e = format!("{longest};TERM").parse::<Policy>().unwrap_err();
        assert!(e.0.contains(&format!("at most {MAX_GENERATIONS}")), "{e}");
    }

    #[test]
    fn round_trip_chain() {
        let p: Policy = "TERM:exit:10s;KILL;USR1:notify:250ms".parse().unwrap();
        assert_eq!(p.signal, libc::SIGTERM);
        assert_eq!(p.reaction, Reaction::Exit);
        assert_eq!(p.grace, Duration::from_secs(10));
        let n = p.next.as_ref().unwrap();
        assert_eq!((n.signal, n.reaction), (libc::SIGKILL, Reaction::Kill));
        let nn = n.next.as_ref().unwrap();
        assert_eq!(
            (nn.signal, nn.reaction, nn.grace),
            (libc::SIGUSR1, Reaction::Notify, Duration::from_millis(250))
        );
        assert_eq!(p.depth(), 3);
        assert_eq!(
            p.to_string(),
            "SIGTERM:exit:10s;SIGKILL:kill:5s;SIGUSR1:notify:250ms"
        );
        assert_eq!(p.to_string().parse::<Policy>().unwrap(), p);
    }

    #[test]
    fn defaults_and_spellings() {
        let p: Policy = "sigterm".parse().unwrap();
        assert_eq!(p, Policy::term());
        assert_eq!("15".parse::<Policy>().unwrap(), Policy::term());
        assert_eq!(":kill".parse::<Policy>().unwrap().signal, libc::SIGKILL);
        let rt: Policy = "RTMIN+2:notify:1".parse().unwrap();
        assert_eq!(rt.signal, libc::SIGRTMIN() + 2);
        assert_eq!(rt.grace, Duration::from_secs(1));
        assert_eq!(rt.generation_text(), "SIGRTMIN+2:notify:1s");
        let p: Policy = "TERM:exit:1.5s;HUP:notify:2m".parse().unwrap();
        assert_eq!(p.grace, Duration::from_millis(1500));
        assert_eq!(p.next.as_ref().unwrap().grace, Duration::from_secs(120));
        assert_eq!(p.to_string(), "SIGTERM:exit:1.5s;SIGHUP:notify:120s");
    }

    #[test]
    fn errors_name_what_is_wrong() {
        for (text, why) in [
            ("", "policy is empty"),
            ("TERM:explode", "unknown reaction \"explode\""),
            ("BOGUS", "unknown signal \"BOGUS\""),
            ("0", "not a signal number"),
            ("99", "not a signal number"),
            ("STOP", "SIGSTOP cannot be a parent-death or orphan signal"),
            ("CHLD", "SIGCHLD cannot be a parent-death or orphan signal"),
            ("TERM:kill", "reaction kill is delivered as SIGKILL"),
            ("KILL:exit", "SIGKILL cannot be handled"),
            ("TERM:exit:5d", "unknown unit"),
            ("TERM:exit:0s", "zero duration"),
            ("TERM:exit:5s:x", "expected SIGNAL[:REACTION[:GRACE]]"),
            ("TERM;", "generation 2"),
            ("TERM;HUP:nope", "generation 2 (\"HUP:nope\")"),
            (":exit", "the signal is missing"),
            ("RTMIN+2147483647", "expected RTMIN+N"),
            ("RTMIN+-5", "expected RTMIN+N"),
            ("RTMIN++5", "expected RTMIN+N"),
            ("RTMAX-99", "expected RTMIN+N or RTMAX-N"),
            ("99999999999", "not a signal number"),
        ] {
            let e = text.parse::<Policy>().unwrap_err().to_string();
            assert!(e.contains(why), "{text:?} gave {e:?}, wanted {why:?}");
        }
    }
}
