//! The environment a launch execs with: the process's ([`ProcessEnv`], read once when the
//! spawner starts), the launch's changes, foster's variables ([`LaunchEnv`]).
//!
//! Read once: a program with more than one thread must not change its own environment
//! (`std::env::set_var` says so), and a program with a spawner has its thread. A launch then
//! copies only what it changes; `envp` points at the process's entries where they stand.

use std::ffi::{CString, OsStr, OsString};
use std::os::unix::ffi::OsStrExt;

use crate::gate::policy::ENV_PARENT;
use crate::gate::{self, ENV_GATED};
use crate::process::identity::Identity;

use super::spec::{LaunchSpec, SpawnError, cstring};

/// The process's environment as `NAME=VALUE` C strings, each with its name.
pub(super) struct ProcessEnv {
    entries: Vec<(OsString, CString)>,
}

impl ProcessEnv {
    /// The process's environment now. (A variable cannot hold a NUL byte: none is left out.)
    pub(super) fn read() -> ProcessEnv {
        let entries = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.clone(), entry(&k, &v).ok()?)))
            .collect();
        ProcessEnv { entries }
    }
}

/// A change to the environment: a variable set, or removed (`None`).
type EnvChange = (OsString, Option<OsString>);

/// One launch's environment: the entries it adds, and `envp` without its terminating null
/// (the child's identity slots go after it): the process's entries that no change names,
/// then the launch's own, pointing into `own` and into the [`ProcessEnv`] it was built from,
/// which must outlive the launch.
pub(super) struct LaunchEnv {
    pub(super) own: Vec<CString>,
    pub(super) ptrs: Vec<*const libc::c_char>,
}

impl LaunchEnv {
    /// The environment of `spec`'s launch by the spawner of identity `me`.
    pub(super) fn new(
        process: &ProcessEnv,
        spec: &LaunchSpec,
        me: Identity,
    ) -> Result<LaunchEnv, SpawnError> {
        let changes = env_changes(spec, me);
        let mut own = Vec::with_capacity(changes.len());
        for (k, v) in &changes {
            if let Some(v) = v {
                own.push(entry(k, v)?);
            }
        }
        let mut ptrs = Vec::with_capacity(process.entries.len() + own.len() + 3);
        for (name, e) in &process.entries {
            if !changes.iter().any(|(n, _)| n == name) {
                ptrs.push(e.as_ptr());
            }
        }
        // A CString's bytes stay where they are when the vector moves: these stay valid.
        ptrs.extend(own.iter().map(|c| c.as_ptr()));
        Ok(LaunchEnv { own, ptrs })
    }
}

/// What a launch changes in the process's environment, in order, a name at most once (the
/// last change of a name wins and goes last): the spec's, then foster's variables, then the
/// pid variable the child fills removed. The parent's identity is removed too: a gated child
/// fills it in its slot.
fn env_changes(spec: &LaunchSpec, me: Identity) -> Vec<EnvChange> {
    let mut changes: Vec<EnvChange> = Vec::with_capacity(spec.env.len() + 6);
    let mut set = |k: OsString, v: Option<OsString>| {
        changes.retain(|(n, _)| *n != k);
        changes.push((k, v));
    };
    for (k, v) in &spec.env {
        set(k.clone(), v.clone());
    }
    if spec.gated {
        for (k, v) in gate::env_for_children(me, me, &spec.policy) {
            let v = if k == ENV_GATED {
                Some(format!("{me};{}", spec.policy))
            } else {
                v.filter(|_| k != ENV_PARENT)
            };
            set(k.into(), v.map(OsString::from));
        }
    }
    if let Some(name) = &spec.pid_env {
        set(name.clone(), None);
    }
    changes
}

/// `NAME=VALUE` as a C string, built in one allocation.
fn entry(k: &OsStr, v: &OsStr) -> Result<CString, SpawnError> {
    let mut kv = Vec::with_capacity(k.len() + v.len() + 2);
    kv.extend_from_slice(k.as_bytes());
    kv.push(b'=');
    kv.extend_from_slice(v.as_bytes());
    cstring("an environment variable", kv)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::policy::Policy;
    use std::ffi::CStr;

    fn texts(e: &LaunchEnv) -> Vec<String> {
        e.ptrs
            .iter()
            // SAFETY: each pointer is a NUL-terminated entry of `e` or of the process's
            // environment read by the test, both alive here.
            .map(|&p| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
            .collect()
    }

    /// The launch's changes replace the process's variables of the same name, the last
    /// change of a name wins, a removal removes, foster's parent identity is left to the slot.
    #[test]
    fn changes_replace_remove_and_go_last() {
        let process = ProcessEnv {
            entries: [("A", "1"), ("B", "2"), (ENV_PARENT, "9:9"), ("C", "3")]
                .iter()
                .map(|(k, v)| (k.into(), entry(k.as_ref(), v.as_ref()).unwrap()))
                .collect(),
        };
        let mut spec = LaunchSpec::new("/bin/true", [""; 0], Policy::term());
        spec.gated = false;
        spec.env = vec![
            ("A".into(), Some("x".into())),
            ("B".into(), None),
            ("D".into(), Some("4".into())),
            ("A".into(), Some("y".into())),
        ];
        let me = Identity::current().unwrap();
        let e = LaunchEnv::new(&process, &spec, me).unwrap();
        assert_eq!(
            texts(&e),
            [&format!("{ENV_PARENT}=9:9"), "C=3", "D=4", "A=y"]
        );
        spec.gated = true;
        let e = LaunchEnv::new(&process, &spec, me).unwrap();
        let t = texts(&e);
        assert!(
            !t.iter().any(|v| v.starts_with(&format!("{ENV_PARENT}="))),
            "{t:?}"
        );
        assert!(
            t.contains(&format!("{ENV_GATED}={me};{}", spec.policy)),
            "{t:?}"
        );
    }
}
