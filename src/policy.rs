//! Parent-death policies: what a launched generation does when its supervisor is lost.
//!
//! Owns [`Policy`] (signal, [`Reaction`], grace, and the policy of the *next* generation), its
//! compact text form and the environment variables through which a policy and the expected
//! parent identity travel to an exec'd generation:
//!
//! - `FOSTER_PARENT=PID:STARTTIME`: the identity of the process that must be this process's
//!   parent (see [`crate::identity`]). It is checked, never trusted: a value inherited from an
//!   older generation names a process that is not the actual parent, and the gate refuses it.
//! - `FOSTER_POLICY=GEN[;GEN]...`: this generation's policy first, then the next generation's,
//!   and so on. One generation is `SIGNAL[:REACTION[:GRACE]]`:
//!   - `SIGNAL`: a name with or without `SIG` (`TERM`, `SIGHUP`, `RTMIN+2`) or a number;
//!   - `REACTION`: `exit` (bounded cleanup, then exit within the grace), `notify` (close
//!     admission, hand the event to the program's event loop) or `kill` (SIGKILL: nothing to
//!     handle; the signal must then be `KILL` or left out);
//!   - `GRACE`: `500ms`, `5s`, `2m`, or a plain number of seconds.
//!
//!   Defaults: reaction `exit` (`kill` for `KILL`), grace `5s`. Examples: `TERM`,
//!   `TERM:exit:10s;KILL`, `USR1:notify:2s;TERM:exit:1s`.
//!
//! A generation with no next policy launches its own children unarmed unless they are given one.
//!
//! Also owns the signal vocabulary of policies: [`signal_number`] reads every form above,
//! [`parse_signal`] refuses `STOP`, and [`ending_signal`] says whether a signal can serve as a
//! parent-death or orphan signal at all. A chain names at most [`MAX_GENERATIONS`] generations.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyError(pub String);

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PolicyError {}

/// One generation's parent-death policy, and the policy its children get.
///
/// `signal` is a raw signal number so that the gate's own failure path (an invalid number, which
/// `prctl` rejects with `EINVAL`) can be exercised; [`Policy::new`] and the parser only build
/// valid ones.
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

/// The highest signal number Linux accepts (`SIGRTMAX`).
pub fn max_signal() -> i32 {
    libc::SIGRTMAX()
}

const NAMED: &[(&str, i32)] = &[
    ("HUP", libc::SIGHUP),
    ("INT", libc::SIGINT),
    ("QUIT", libc::SIGQUIT),
    ("ILL", libc::SIGILL),
    ("TRAP", libc::SIGTRAP),
    ("ABRT", libc::SIGABRT),
    ("BUS", libc::SIGBUS),
    ("FPE", libc::SIGFPE),
    ("KILL", libc::SIGKILL),
    ("USR1", libc::SIGUSR1),
    ("SEGV", libc::SIGSEGV),
    ("USR2", libc::SIGUSR2),
    ("PIPE", libc::SIGPIPE),
    ("ALRM", libc::SIGALRM),
    ("TERM", libc::SIGTERM),
    ("STKFLT", libc::SIGSTKFLT),
    ("CHLD", libc::SIGCHLD),
    ("CONT", libc::SIGCONT),
    ("STOP", libc::SIGSTOP),
    ("TSTP", libc::SIGTSTP),
    ("TTIN", libc::SIGTTIN),
    ("TTOU", libc::SIGTTOU),
    ("URG", libc::SIGURG),
    ("XCPU", libc::SIGXCPU),
    ("XFSZ", libc::SIGXFSZ),
    ("VTALRM", libc::SIGVTALRM),
    ("PROF", libc::SIGPROF),
    ("WINCH", libc::SIGWINCH),
    ("IO", libc::SIGIO),
    ("PWR", libc::SIGPWR),
    ("SYS", libc::SIGSYS),
];

/// Resolves a signal written as a name with or without `SIG` (any case), `RTMIN`, `RTMIN+N`,
/// `RTMAX`, `RTMAX-N`, or a decimal number, to its number: any signal Linux can deliver, from 1
/// to `SIGRTMAX`. The error says what is wrong; callers add their own rules (see
/// [`parse_signal`] and [`ending_signal`]).
pub fn signal_number(s: &str) -> Result<i32, PolicyError> {
    let bad = |why: &str| PolicyError(format!("signal {s:?}: {why}"));
    let t = s.trim();
    if t.is_empty() {
        return Err(bad("empty"));
    }
    let n = if t.bytes().all(|b| b.is_ascii_digit()) {
        t.parse::<i32>().map_err(|_| bad("number out of range"))?
    } else {
        let up = t.to_ascii_uppercase();
        let name = up.strip_prefix("SIG").unwrap_or(&up);
        if let Some(&(_, n)) = NAMED.iter().find(|(n, _)| *n == name) {
            n
        } else if let Some(off) = name.strip_prefix("RTMIN") {
            libc::SIGRTMIN() + rt_offset(off, '+').ok_or_else(|| bad("expected RTMIN+N"))?
        } else if let Some(off) = name.strip_prefix("RTMAX") {
            libc::SIGRTMAX() - rt_offset(off, '-').ok_or_else(|| bad("expected RTMAX-N"))?
        } else {
            return Err(bad("unknown signal name"));
        }
    };
    if n < 1 || n > max_signal() {
        return Err(bad(&format!("not a signal number (1 to {})", max_signal())));
    }
    Ok(n)
}

/// Parses a signal (the forms of [`signal_number`]). Only signals Linux can deliver are
/// accepted; `STOP` is refused (a stopped helper is not a reaction).
pub fn parse_signal(s: &str) -> Result<i32, PolicyError> {
    let n = signal_number(s)?;
    if n == libc::SIGSTOP {
        return Err(PolicyError(format!(
            "signal {s:?}: SIGSTOP stops the helper instead of ending it; choose another"
        )));
    }
    Ok(n)
}

/// Parses a parent-death or orphan signal: the forms of [`signal_number`], and only a signal
/// whose default action ends a process ([`ending_signal`]).
pub fn parse_pdeath_signal(s: &str) -> Result<i32, PolicyError> {
    let n = signal_number(s)?;
    ending_signal(n)?;
    Ok(n)
}

/// Why `sig` cannot be a parent-death or orphan signal, or `Ok` when it can. Such a signal
/// must end a process that does not handle it (its default action is to terminate): `STOP`,
/// `TSTP`, `TTIN` and `TTOU` would leave the process stopped in the tree, and `CHLD`, `CONT`,
/// `URG` and `WINCH` are ignored by default, so the process would go on running.
pub fn ending_signal(sig: i32) -> Result<(), PolicyError> {
    let why = match sig {
        libc::SIGSTOP | libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU => {
            "it stops the process instead of ending it: the process would stay in the tree, \
             stopped, until something sent it SIGKILL"
        }
        libc::SIGCHLD | libc::SIGCONT | libc::SIGURG | libc::SIGWINCH => {
            "it is ignored by default: a process that does not handle it would go on running"
        }
        _ => return Ok(()),
    };
    Err(PolicyError(format!(
        "SIG{} cannot be a parent-death or orphan signal: {why}; choose one whose default \
         action ends a process, such as TERM, HUP, INT, USR1 or KILL",
        signal_name(sig)
    )))
}

/// `N` after `RTMIN+` / `RTMAX-` (the sign given), from 0 to the width of the real-time range.
fn rt_offset(s: &str, sign: char) -> Option<i32> {
    if s.is_empty() {
        return Some(0);
    }
    let digits = s.strip_prefix(sign)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: i32 = digits.parse().ok()?;
    (0..=libc::SIGRTMAX() - libc::SIGRTMIN())
        .contains(&n)
        .then_some(n)
}

/// The short name of a signal (`TERM`, `RTMIN+2`), or its number when it has none.
pub fn signal_name(sig: i32) -> String {
    if let Some((n, _)) = NAMED.iter().find(|(_, v)| *v == sig) {
        return (*n).to_string();
    }
    let (min, max) = (libc::SIGRTMIN(), libc::SIGRTMAX());
    if sig == min {
        "RTMIN".into()
    } else if sig > min && sig <= max {
        format!("RTMIN+{}", sig - min)
    } else {
        sig.to_string()
    }
}

/// Parses a grace period: `500ms`, `5s`, `2m`, or a plain number of seconds.
pub fn parse_grace(s: &str) -> Result<Duration, PolicyError> {
    let bad = |why: &str| PolicyError(format!("grace {s:?}: {why}"));
    let t = s.trim();
    let (num, unit) = match t.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => t.split_at(i),
        None => (t, "s"),
    };
    if num.is_empty() {
        return Err(bad("expected a number followed by ms, s or m"));
    }
    let n: u64 = num.parse().map_err(|_| bad("number out of range"))?;
    let d = match unit {
        "ms" => Duration::from_millis(n),
        "s" => Duration::from_secs(n),
        "m" => Duration::from_secs(n.checked_mul(60).ok_or_else(|| bad("out of range"))?),
        _ => return Err(bad("unknown unit (expected ms, s or m)")),
    };
    Ok(d)
}

fn format_grace(d: Duration) -> String {
    if d.subsec_millis() != 0 || d.as_secs() == 0 && !d.is_zero() {
        format!("{}ms", d.as_millis())
    } else {
        format!("{}s", d.as_secs())
    }
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
                "reaction kill is delivered as SIGKILL, not SIG{}: leave the signal out or use KILL",
                signal_name(self.signal)
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

    /// This generation alone, in text form (`TERM:exit:5s`).
    pub fn generation_text(&self) -> String {
        format!(
            "{}:{}:{}",
            signal_name(self.signal),
            self.reaction,
            format_grace(self.grace)
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
        parse_pdeath_signal(sig_text).map_err(ctx)?
    };
    let reaction = reaction.unwrap_or(if signal == libc::SIGKILL {
        Reaction::Kill
    } else {
        Reaction::Exit
    });
    let grace = grace_text
        .map(parse_grace)
        .transpose()
        .map_err(ctx)?
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
    fn signal_forms_resolve_or_say_why_not() {
        assert_eq!(signal_number("RTMAX"), Ok(libc::SIGRTMAX()));
        assert_eq!(signal_number("rtmax-1"), Ok(libc::SIGRTMAX() - 1));
        assert_eq!(
            signal_number(&format!("RTMIN+{}", libc::SIGRTMAX() - libc::SIGRTMIN())),
            Ok(libc::SIGRTMAX())
        );
        assert_eq!(signal_number("STOP"), Ok(libc::SIGSTOP));
        for text in [
            "RTMIN+2147483647",
            "RTMIN+-5",
            "RTMIN+",
            "RTMAX-",
            "rtmin+99",
        ] {
            assert!(signal_number(text).is_err(), "{text:?} was accepted");
        }
        assert!(parse_signal("STOP").is_err());
    }

    #[test]
    fn only_signals_that_end_a_process_can_be_parent_death_signals() {
        for sig in [
            libc::SIGSTOP,
            libc::SIGTSTP,
            libc::SIGTTIN,
            libc::SIGTTOU,
            libc::SIGCHLD,
            libc::SIGCONT,
            libc::SIGURG,
            libc::SIGWINCH,
        ] {
            let e = ending_signal(sig).unwrap_err().to_string();
            assert!(
                e.contains(&format!("SIG{} cannot be a parent-death", signal_name(sig))),
                "{e}"
            );
        }
        assert!(
            ending_signal(libc::SIGCHLD)
                .unwrap_err()
                .0
                .contains("ignored")
        );
        assert!(
            ending_signal(libc::SIGSTOP)
                .unwrap_err()
                .0
                .contains("stops")
        );
        for sig in [
            libc::SIGKILL,
            libc::SIGTERM,
            libc::SIGHUP,
            libc::SIGINT,
            libc::SIGUSR1,
            libc::SIGRTMIN(),
            libc::SIGRTMAX(),
        ] {
            assert_eq!(ending_signal(sig), Ok(()), "{}", signal_name(sig));
        }
    }

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
            "TERM:exit:10s;KILL:kill:5s;USR1:notify:250ms"
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
        assert_eq!(signal_name(rt.signal), "RTMIN+2");
        assert_eq!(parse_grace("2m").unwrap(), Duration::from_secs(120));
    }

    #[test]
    fn errors_name_what_is_wrong() {
        for (text, why) in [
            ("", "policy is empty"),
            ("TERM:explode", "unknown reaction \"explode\""),
            ("BOGUS", "unknown signal name"),
            ("0", "not a signal number"),
            ("99", "not a signal number"),
            ("STOP", "SIGSTOP cannot be a parent-death or orphan signal"),
            ("CHLD", "SIGCHLD cannot be a parent-death or orphan signal"),
            ("TERM:kill", "reaction kill is delivered as SIGKILL"),
            ("KILL:exit", "SIGKILL cannot be handled"),
            ("TERM:exit:5h", "unknown unit"),
            ("TERM:exit:5s:x", "expected SIGNAL[:REACTION[:GRACE]]"),
            ("TERM;", "generation 2"),
            ("TERM;HUP:nope", "generation 2 (\"HUP:nope\")"),
            (":exit", "the signal is missing"),
            ("RTMIN+2147483647", "expected RTMIN+N"),
            ("RTMIN+-5", "expected RTMIN+N"),
            ("RTMIN++5", "expected RTMIN+N"),
            ("RTMAX-99", "expected RTMAX-N"),
            ("99999999999", "number out of range"),
        ] {
            let e = text.parse::<Policy>().unwrap_err().to_string();
            assert!(e.contains(why), "{text:?} gave {e:?}, wanted {why:?}");
        }
    }
}
