//! The spawner: the one long-lived thread on which every fork happens ([`Spawner`]).
//!
//! The kernel sends the parent-death signal when the **thread** that created a process exits,
//! not its process: so every launch is a request over a channel to one dedicated thread that
//! lives as long as the spawner (foster's **creating-thread contract**). The thread forks with
//! `clone(CLONE_VM | CLONE_VFORK | CLONE_PIDFD)`, like `posix_spawn`, and never waits.
//!
//! - [`spec`]: what a launch asks for and gives back, its errors.
//! - [`credentials`]: the user and groups a launch runs as, resolved before fork.
//! - `env`: the environment a launch execs with (the process's, read once, and its changes).
//! - [`report`]: the child's failure report on its pipe, the setup steps.
//! - [`slots`]: the child's guarded stack and the descriptor numbers it shares.
//! - [`child`]: what runs between clone and exec.
//! - [`launch`]: one launch: prepared, cloned, its report read.
//! - [`valgrind`]: whether foster runs under valgrind, which copies the table at clone.

pub mod child;
pub mod credentials;
mod env;
pub mod launch;
pub mod report;
pub mod slots;
pub mod spec;
pub mod valgrind;

use std::io;
use std::os::fd::AsRawFd;
use std::sync::OnceLock;
use std::sync::mpsc;

use crate::process::identity::{Identity, pidfd_open};

pub use self::credentials::{CredentialError, Credentials, NO_CHANGE_ID, group_id, user_id};
pub use self::report::SetupStep;
pub use self::spec::{ExecSignals, LaunchSpec, Launched, SpawnError};

use self::env::ProcessEnv;
use self::launch::Creator;
use self::slots::{CHILD_STACK, ChildStack, LowSlots, above_stdio};

type Reply = mpsc::Sender<Result<Launched, SpawnError>>;

/// A handle to the spawner thread. Cloning shares the same thread.
#[derive(Clone, Debug)]
pub struct Spawner {
    tx: mpsc::Sender<(Vec<LaunchSpec>, Reply)>,
    identity: Identity,
    thread_tid: i32,
    child_stack: std::ops::Range<usize>,
}

impl Spawner {
    /// Starts a dedicated spawner thread. It ends when the last handle is dropped, and every
    /// helper it launched then gets its parent-death signal: keep a handle for as long as the
    /// helpers must live, or use [`Spawner::global`]. Helpers get the process's environment
    /// as it is now, with their own changes ([`LaunchSpec::env`]): a program with threads
    /// must not change its environment any more.
    pub fn start() -> io::Result<Spawner> {
        let identity = Identity::current().map_err(io::Error::other)?;
        let (tx, rx) = mpsc::channel::<(Vec<LaunchSpec>, Reply)>();
        let (tid_tx, tid_rx) = mpsc::channel();
        // The children's stack, mapped once: every launch reuses it.
        let mut stack = ChildStack::map(CHILD_STACK)?;
        let child_stack = stack.usable();
        std::thread::Builder::new()
            .name("foster-spawner".into())
            .spawn(move || {
                // A pidfd of this process, inherited by each child until its exec (close-on-exec):
                // the gate's lifeline when getppid() cannot tell.
                let own_pidfd = pidfd_open(identity.pid).and_then(above_stdio).ok();
                // Reserved after the pidfd, so that it lies below the boundary too; and before
                // `start` returns, so that the boundary lies below what its caller opens next.
                let low = LowSlots::reserve();
                let process_env = ProcessEnv::read();
                // SAFETY: gettid has no preconditions.
                let _ = tid_tx.send(unsafe { libc::gettid() });
                let creator = Creator {
                    me: identity,
                    own_pidfd: own_pidfd.as_ref().map(|f| f.as_raw_fd()),
                    low: low.as_ref(),
                    stack_top: stack.top(),
                    process_env: &process_env,
                };
                // A request is one launch or a batch: each outcome is sent as it comes.
                for (specs, reply) in rx {
                    for spec in specs {
                        let _ = reply.send(creator.launch(spec));
                    }
                }
            })?;
        let thread_tid = tid_rx
            .recv()
            .map_err(|_| io::Error::other("spawner thread died"))?;
        Ok(Spawner {
            tx,
            identity,
            thread_tid,
            child_stack,
        })
    }

    /// The process-wide spawner, started on first use and never dropped.
    pub fn global() -> &'static Spawner {
        static GLOBAL: OnceLock<Spawner> = OnceLock::new();
        GLOBAL.get_or_init(|| Spawner::start().expect("cannot start the foster spawner thread"))
    }

    /// The identity every helper of this spawner expects as its parent.
    pub fn identity(&self) -> Identity {
        self.identity
    }

    /// The thread id of the spawner thread (the kernel's "parent" of every helper).
    pub fn thread_id(&self) -> i32 {
        self.thread_tid
    }

    /// The addresses of the stack the children run on between clone and exec (the page below
    /// is the guard), for inspection (`/proc/self/maps`).
    pub fn child_stack(&self) -> std::ops::Range<usize> {
        self.child_stack.clone()
    }

    /// Launches a helper on the spawner thread; returns once it has exec'd or failed.
    pub fn launch(&self, spec: LaunchSpec) -> Result<Launched, SpawnError> {
        self.launch_all(vec![spec])
            .next()
            .unwrap_or(Err(SpawnError::SpawnerGone))
    }

    /// Launches `specs` on the spawner thread in one request, in their order: the launches
    /// follow one another there with no wake-up between them, while the caller takes each
    /// outcome as it comes (one per spec, in order; [`SpawnError::SpawnerGone`] for any the
    /// thread did not answer).
    pub fn launch_all(&self, specs: Vec<LaunchSpec>) -> Outcomes {
        let (rtx, rx) = mpsc::channel();
        let left = specs.len();
        // A request that cannot be sent is dropped with its reply sender: every `recv` fails.
        let _ = self.tx.send((specs, rtx));
        Outcomes { rx, left }
    }
}

/// The outcomes of [`Spawner::launch_all`], in the order of its specs.
#[derive(Debug)]
pub struct Outcomes {
    rx: mpsc::Receiver<Result<Launched, SpawnError>>,
    left: usize,
}

impl Iterator for Outcomes {
    type Item = Result<Launched, SpawnError>;

    /// The next launch's outcome, waiting for it.
    fn next(&mut self) -> Option<Self::Item> {
        self.left = self.left.checked_sub(1)?;
        Some(self.rx.recv().unwrap_or(Err(SpawnError::SpawnerGone)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::TargetError;
    use crate::gate::policy::Policy;

    /// Each setup step reads back from its number on the wire; an unknown number is none.
    #[test]
    fn setup_steps_read_back_from_the_wire() {
        for step in SetupStep::ALL {
            assert_eq!(SetupStep::from_wire(step as u32), Some(step));
        }
        assert_eq!(SetupStep::from_wire(8), None);
        assert_eq!(SetupStep::Chdir.text(), "chdir");
    }

    /// The group list a resolution leads to: the one it sets, or the caller's it leaves.
    fn groups_after(c: &Credentials) -> Vec<u32> {
        c.groups.clone().unwrap_or_else(|| {
            let mut v: Vec<u32> = nix::unistd::getgroups()
                .unwrap()
                .into_iter()
                .map(|g| g.as_raw())
                .collect();
            v.sort_unstable();
            v.dedup();
            v
        })
    }

    #[test]
    fn credentials_follow_the_user_database() {
        assert_eq!(
            Credentials::resolve(None, None).unwrap(),
            Credentials::default()
        );
        assert!(!Credentials::default().changes());
        for (uid, gid, kind) in [
            (Some(NO_CHANGE_ID), None, "uid"),
            (None, Some(NO_CHANGE_ID), "gid"),
        ] {
            let e = Credentials::resolve(uid, gid).unwrap_err();
            assert!(matches!(e, CredentialError::Refused(_)), "{e:?}");
            assert!(e.to_string().contains(&format!("({kind}_t)-1")), "{e}");
        }
        // A gid alone: the list is cleared.
        let c = Credentials::resolve(None, Some(4242)).unwrap();
        assert_eq!((c.uid, c.gid, groups_after(&c)), (None, Some(4242), vec![]));
        // root, with its entry: its primary group and its list from the database.
        let root = nix::unistd::User::from_uid(0.into()).unwrap().unwrap();
        let mut want: Vec<u32> = nix::unistd::getgrouplist(c"root", root.gid)
            .unwrap()
            .into_iter()
            .map(|g| g.as_raw())
            .collect();
        want.sort_unstable();
        want.dedup();
        let c = Credentials::resolve(Some(0), None).unwrap();
        assert_eq!((c.uid, c.gid), (Some(0), Some(root.gid.as_raw())));
        assert_eq!(groups_after(&c), want);
        // Another group than the user's primary one replaces the user's groups.
        let c = Credentials::resolve(Some(0), Some(4242)).unwrap();
        assert_eq!((c.gid, groups_after(&c)), (Some(4242), vec![]));
        // A uid without an entry: a gid is required, and then the list is cleared.
        let stranger = (54321..)
            .find(|&u| matches!(nix::unistd::User::from_uid(u.into()), Ok(None)))
            .unwrap();
        let e = Credentials::resolve(Some(stranger), None).unwrap_err();
        assert!(matches!(e, CredentialError::Refused(_)), "{e:?}");
        assert!(
            e.to_string().contains("no entry in the user database"),
            "{e}"
        );
        let c = Credentials::resolve(Some(stranger), Some(stranger)).unwrap();
        assert_eq!(
            (c.uid, c.gid, groups_after(&c)),
            (Some(stranger), Some(stranger), vec![])
        );
    }

    #[test]
    fn an_empty_program_name_is_refused_before_fork() {
        // Joined to the first PATH directory, "" would name that directory.
        let s = Spawner::start().unwrap();
        let e = s
            .launch(LaunchSpec::new("", [""; 0], Policy::term()))
            .unwrap_err();
        assert!(
            matches!(&e, SpawnError::Target(TargetError::NotFound(p)) if p.as_os_str().is_empty()),
            "{e:?}"
        );
        assert_eq!(e.to_string(), "empty program name");
        assert!(e.pid().is_none(), "no child was created");
    }
}
