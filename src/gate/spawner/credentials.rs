//! Who a launched process becomes: a user and group resolved from the user database before
//! fork ([`Credentials`]), set in the child with raw system calls.

use std::ffi::CString;
use std::io;

use crate::base::sys::errno;

use super::report::SetupStep;

/// Why a requested uid/gid could not be resolved into [`Credentials`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CredentialError {
    /// The request itself is refused (`(uid_t)-1`, a uid without a group to take).
    #[error("{0}")]
    Refused(String),
    /// The user database could not be read.
    #[error("{0}")]
    Lookup(String),
}

/// A `user` as a configuration writes it (a name, or a uid as digits:
/// [`crate::supervision::config::parse_id`]'s forms) → the uid to [`Credentials::resolve`]:
/// a name through the user database, digits as they are (whether that uid needs an entry is
/// `resolve`'s rule).
/// The one lookup of a helper's user, for its launch and for `foster run --check`.
pub fn user_id(user: &str) -> Result<u32, CredentialError> {
    if let Ok(uid) = user.parse::<u32>() {
        return Ok(uid);
    }
    match nix::unistd::User::from_name(user) {
        Ok(Some(pw)) => Ok(pw.uid.as_raw()),
        Ok(None) => Err(CredentialError::Refused(format!(
            "no user {user:?} in the user database: expected the name of an existing user, or \
             a uid"
        ))),
        Err(e) => Err(CredentialError::Lookup(format!(
            "user {user:?}: cannot read the user database: {e}"
        ))),
    }
}

/// A `group` as a configuration writes it → the gid, as [`user_id`] does for a user: a name
/// through the group database, digits as they are.
pub fn group_id(group: &str) -> Result<u32, CredentialError> {
    if let Ok(gid) = group.parse::<u32>() {
        return Ok(gid);
    }
    match nix::unistd::Group::from_name(group) {
        Ok(Some(gr)) => Ok(gr.gid.as_raw()),
        Ok(None) => Err(CredentialError::Refused(format!(
            "no group {group:?} in the group database: expected the name of an existing \
             group, or a gid"
        ))),
        Err(e) => Err(CredentialError::Lookup(format!(
            "group {group:?}: cannot read the group database: {e}"
        ))),
    }
}

/// `(uid_t)-1` and `(gid_t)-1`: "no change" to `setresuid`/`setresgid`, never an id to run as.
pub const NO_CHANGE_ID: u32 = u32::MAX;

/// Who a launched process becomes: the group list, gid and uid to set, in that order, resolved
/// from a requested uid and/or gid before fork (the user database is read here, never in the
/// child, which only makes the three syscalls on this data).
///
/// The rules (the same for `foster exec --uid/--gid` and a helper's `user`/`group`):
/// - a uid with an entry in the user database takes that user's primary group when no gid is
///   given, and then the user's group list (`getgrouplist`, the primary group included), as
///   `runuser -u` and `setpriv --init-groups` do; a given gid that is the user's primary group
///   is the same request;
/// - a given gid that is not the user's primary group replaces the user's groups: the list is
///   cleared (as `runuser -g` does), and so is it for a gid given alone;
/// - a uid without an entry has no group to take: a gid must be given (the caller's group
///   is never kept silently), and the list is cleared;
/// - `4294967295`, `(uid_t)-1`, is refused for either.
///
/// A group list already equal to the caller's is left alone (`groups: None`), so a process
/// without the privilege to set groups can still "change" to its own ids.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Credentials {
    /// The supplementary group list to set (`setgroups`); `None` leaves the caller's.
    pub groups: Option<Vec<u32>>,
    /// The real, effective and saved gid to set; `None` leaves the caller's.
    pub gid: Option<u32>,
    /// The real, effective and saved uid to set; `None` leaves the caller's.
    pub uid: Option<u32>,
}

impl Credentials {
    /// Resolves a requested `uid` / `gid` (see the rules above). The error names the id and
    /// what to do.
    pub fn resolve(uid: Option<u32>, gid: Option<u32>) -> Result<Credentials, CredentialError> {
        use CredentialError::{Lookup, Refused};
        for (id, kind) in [(uid, "uid"), (gid, "gid")] {
            if id == Some(NO_CHANGE_ID) {
                return Err(Refused(format!(
                    "{kind} {NO_CHANGE_ID} is ({kind}_t)-1, which the kernel takes as \"no \
                     change\": expected a {kind} from 0 to 4294967294"
                )));
            }
        }
        let (groups, gid) = match uid {
            None => (gid.map(|_| Vec::new()), gid),
            Some(u) => {
                let user = nix::unistd::User::from_uid(u.into())
                    .map_err(|e| Lookup(format!("uid {u}: cannot read the user database: {e}")))?;
                // The user's own groups: its list from the database, its primary group.
                let own = |pw: nix::unistd::User| {
                    let name = CString::new(pw.name.as_bytes())
                        .map_err(|_| Lookup(format!("uid {u}: the user name holds a NUL byte")))?;
                    let list = nix::unistd::getgrouplist(&name, pw.gid).map_err(|e| {
                        Lookup(format!(
                            "uid {u} ({}): cannot read its groups: {e}",
                            pw.name
                        ))
                    })?;
                    Ok::<_, CredentialError>((
                        Some(list.into_iter().map(|g| g.as_raw()).collect::<Vec<u32>>()),
                        Some(pw.gid.as_raw()),
                    ))
                };
                match (user, gid) {
                    (Some(pw), None) => own(pw)?,
                    (Some(pw), Some(g)) if g == pw.gid.as_raw() => own(pw)?,
                    (_, Some(g)) => (Some(Vec::new()), Some(g)),
                    (None, None) => {
                        return Err(Refused(format!(
                            "uid {u} has no entry in the user database, so it has no group to \
                             take: give a gid too (--gid, or the helper's group)"
                        )));
                    }
                }
            }
        };
        let groups = groups.map(|mut g| {
            g.sort_unstable();
            g.dedup();
            g
        });
        let current = nix::unistd::getgroups().ok().map(|g| {
            let mut v: Vec<u32> = g.into_iter().map(|g| g.as_raw()).collect();
            v.sort_unstable();
            v.dedup();
            v
        });
        Ok(Credentials {
            groups: groups.filter(|g| Some(g) != current.as_ref()),
            gid,
            uid,
        })
    }

    /// Whether anything changes.
    pub fn changes(&self) -> bool {
        self.groups.is_some() || self.gid.is_some() || self.uid.is_some()
    }

    /// Sets the group list, the gid, the uid, in that order, with raw syscalls on this data:
    /// async-signal-safe and allocation-free, for a child between clone and exec. Raw syscalls
    /// change the calling thread only: call it where that is the whole process (a fresh child,
    /// a single-threaded process). The error is the step that failed and its errno.
    pub(super) fn apply_raw(&self) -> Result<(), (SetupStep, i32)> {
        // SAFETY: credential syscalls on data that outlives them.
        unsafe {
            if let Some(g) = &self.groups
                && libc::syscall(libc::SYS_setgroups, g.len(), g.as_ptr()) != 0
            {
                return Err((SetupStep::Groups, errno()));
            }
            if let Some(g) = self.gid
                && libc::syscall(libc::SYS_setresgid, g, g, g) != 0
            {
                return Err((SetupStep::Gid, errno()));
            }
            if let Some(u) = self.uid
                && libc::syscall(libc::SYS_setresuid, u, u, u) != 0
            {
                return Err((SetupStep::Uid, errno()));
            }
        }
        Ok(())
    }

    /// [`Credentials::apply_raw`] for a single-threaded process (`foster exec` before its
    /// exec), with the error as text.
    pub fn apply_single_threaded(&self) -> io::Result<()> {
        // Another thread would keep the old credentials: refuse rather than leave one behind.
        let stat = std::fs::read("/proc/self/stat")?;
        let threads = crate::process::procstat::StatFields::parse(&stat)
            .map_err(|e| io::Error::other(format!("/proc/self/stat: {e}")))?
            .num_threads;
        if threads != 1 {
            return Err(io::Error::other(format!(
                "cannot change credentials: this process has {threads} threads, not one"
            )));
        }
        self.apply_raw().map_err(|(step, errno)| {
            let what = match step {
                SetupStep::Groups => {
                    format!("setgroups({:?})", self.groups.as_deref().unwrap_or(&[]))
                }
                SetupStep::Gid => format!("setresgid({})", self.gid.unwrap_or_default()),
                _ => format!("setresuid({})", self.uid.unwrap_or_default()),
            };
            let e = io::Error::from_raw_os_error(errno);
            io::Error::new(e.kind(), format!("{what}: {e}"))
        })
    }
}
