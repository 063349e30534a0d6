//! Who reaps the orphans: PID 1, a child subreaper, or nobody (and what to tell the user).
//!
//! Owns the decision of `foster init`'s role and its message. As PID 1 of a PID namespace every
//! orphan of the namespace comes to foster. Otherwise foster makes itself a child subreaper
//! (`PR_SET_CHILD_SUBREAPER`, read back with `PR_GET_CHILD_SUBREAPER`) so that orphans of
//! PROGRAM's tree come to it rather than to the real init. When neither holds (`prctl` refused,
//! e.g. by a seccomp profile, or `FOSTER_SUBREAPER=0`), foster still runs PROGRAM and forwards
//! signals, but says plainly that orphans will not be reaped by it and what to do: that is the
//! confusion behind tini#141 and the many "two inits stacked" reports.

use std::fmt;

/// What the user asked for (`--subreaper`, `FOSTER_SUBREAPER`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SubreaperWish {
    /// Become a subreaper when not PID 1 (the default).
    #[default]
    Auto,
    /// Never become one (`FOSTER_SUBREAPER=0`): orphans go to the real init. Silences the
    /// warning.
    Off,
}

/// The role foster ends up with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// PID 1 of its PID namespace: every orphan of the namespace is foster's.
    Pid1,
    /// A child subreaper: orphans of PROGRAM's tree are foster's.
    Subreaper,
    /// Neither: orphans go to `reaper_pid` (the nearest subreaper above, or the real init).
    Unreaped { why: Why },
}

/// Why foster is neither PID 1 nor a subreaper.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Why {
    /// The user turned it off.
    TurnedOff,
    /// `prctl(PR_SET_CHILD_SUBREAPER)` failed with this errno.
    PrctlFailed(i32),
    /// `prctl` returned success but `PR_GET_CHILD_SUBREAPER` read back 0.
    NotKept,
}

/// The decision, from the facts: am I PID 1, what the user wished, and the result of trying to
/// become a subreaper (only called when needed: `try_subreaper` runs at most once).
pub fn decide(
    is_pid1: bool,
    wish: SubreaperWish,
    try_subreaper: impl FnOnce() -> Result<bool, i32>,
) -> Role {
    if is_pid1 {
        return Role::Pid1;
    }
    if wish == SubreaperWish::Off {
        return Role::Unreaped {
            why: Why::TurnedOff,
        };
    }
    match try_subreaper() {
        Ok(true) => Role::Subreaper,
        Ok(false) => Role::Unreaped { why: Why::NotKept },
        Err(errno) => Role::Unreaped {
            why: Why::PrctlFailed(errno),
        },
    }
}

/// Sets `PR_SET_CHILD_SUBREAPER` and reads it back: `Ok(true)` when it holds.
pub fn become_subreaper() -> Result<bool, i32> {
    // SAFETY: prctl with integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EINVAL));
    }
    Ok(is_subreaper())
}

/// Whether the calling process is a child subreaper (`PR_GET_CHILD_SUBREAPER`).
pub fn is_subreaper() -> bool {
    let mut v: libc::c_int = 0;
    // SAFETY: prctl writing one int to a stack value.
    let r = unsafe {
        libc::prctl(
            libc::PR_GET_CHILD_SUBREAPER,
            &mut v as *mut libc::c_int as libc::c_ulong,
            0,
            0,
            0,
        )
    };
    r == 0 && v != 0
}

/// The warning for [`Role::Unreaped`] (`None` when the user turned it off on purpose).
pub fn warning(role: &Role, my_pid: i32) -> Option<String> {
    let Role::Unreaped { why } = role else {
        return None;
    };
    let cause = match why {
        Why::TurnedOff => return None,
        Why::PrctlFailed(e) => format!(
            "prctl(PR_SET_CHILD_SUBREAPER) failed: {}{}",
            std::io::Error::from_raw_os_error(*e),
            if *e == libc::EPERM || *e == libc::EACCES {
                " (a seccomp profile or security module forbids it)"
            } else if *e == libc::EINVAL {
                " (the kernel predates Linux 3.4)"
            } else {
                ""
            }
        ),
        Why::NotKept => "PR_GET_CHILD_SUBREAPER read back 0 after setting it".to_string(),
    };
    Some(format!(
        "foster init is not PID 1 (it is pid {my_pid}) and cannot become a child subreaper: \
         {cause}.\n\
         PROGRAM runs and gets its signals, but processes orphaned in its tree go to another \
         init and their zombies are not reaped by foster.\n\
         To fix it: make foster the first process of the container (ENTRYPOINT [\"foster\", \
         \"init\", \"--\", ...]) and drop any other init in front of it (such as `docker run \
         --init`), or allow prctl(PR_SET_CHILD_SUBREAPER) in the seccomp profile.\n\
         Set FOSTER_SUBREAPER=0 to run without a subreaper and without this warning."
    ))
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Role::Pid1 => write!(f, "PID 1 of its PID namespace"),
            Role::Subreaper => write!(f, "child subreaper"),
            Role::Unreaped {
                why: Why::TurnedOff,
            } => {
                write!(f, "neither PID 1 nor a subreaper (FOSTER_SUBREAPER=0)")
            }
            Role::Unreaped { .. } => write!(f, "neither PID 1 nor a subreaper"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pid1_never_tries_the_prctl() {
        let r = decide(true, SubreaperWish::Auto, || panic!("must not try"));
        assert_eq!(r, Role::Pid1);
        assert_eq!(warning(&r, 1), None);
    }

    #[test]
    fn turned_off_is_silent() {
        let r = decide(false, SubreaperWish::Off, || panic!("must not try"));
        assert_eq!(warning(&r, 7), None);
        assert!(r.to_string().contains("FOSTER_SUBREAPER=0"));
    }

    #[test]
    fn refused_prctl_says_why_and_what_to_do() {
        let r = decide(false, SubreaperWish::Auto, || Err(libc::EPERM));
        let w = warning(&r, 42).unwrap();
        assert!(w.contains("not PID 1 (it is pid 42)"), "{w}");
        assert!(w.contains("seccomp"), "{w}");
        assert!(w.contains("ENTRYPOINT"), "{w}");
        assert!(w.contains("FOSTER_SUBREAPER=0"), "{w}");
        let r = decide(false, SubreaperWish::Auto, || Ok(false));
        assert!(warning(&r, 42).unwrap().contains("read back 0"));
        assert_eq!(
            decide(false, SubreaperWish::Auto, || Ok(true)),
            Role::Subreaper
        );
    }
}
