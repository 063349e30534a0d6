//! Scaffolding shared by the integration tests: a temporary directory of the test's own,
//! removed on drop, with files and FIFOs in it; the tests' one way to read the process tree
//! (the product's own walker, `foster::process::tree::Scanner`) and a process's state; ids and
//! signal sets of `/proc/<pid>/status`; a signal sent (`send`); `foster run --check` (`check`);
//! a child's output within a bound (`child`); descriptors put on fixed numbers in a child
//! (`fd`); a FIFO barrier read within a bound (`fifo`); a `foster run` read through its events
//! log (`foster_run`); an exec held in its middle (`fuse`); a stream's lines read on a thread
//! (`lines`); a supervisor's events as JSON (`events`); a `foster run` driven through its socket
//! (`supervised`); a helper with a command line longer than any terminal (`long_command`); a
//! tmux server to drive the dashboard in (`tmux`); a program run as another uid (`as_user`);
//! skips, counted (`skip`); the one bound of every wait (`LIMIT`) and the one wait for a
//! process's end (`wait_gone`).

#![allow(dead_code)] // each test binary uses its own part of it

pub mod check;
pub mod child;
pub mod events;
pub mod fd;
pub mod fifo;
pub mod foster_run;
pub mod fuse;
pub mod lines;
pub mod long_command;
pub mod skip;
pub mod supervised;
pub mod tmux;

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::Duration;

use foster::process::identity::Identity;
use foster::process::tree::graph::{ProcessNode, Snapshot};
use foster::process::tree::scan::{ScanOptions, Scanner};

/// The bound of every wait of the tests: a safety net, never reached when foster is right.
pub const LIMIT: Duration = Duration::from_secs(30);

pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// `setpriv` as `uid` (and its group), no supplementary groups, running `program`.
pub fn as_user(uid: u32, program: &str) -> std::process::Command {
    let mut c = std::process::Command::new("setpriv");
    c.arg(format!("--reuid={uid}"))
        .arg(format!("--regid={uid}"))
        .arg("--clear-groups")
        .arg("--")
        .arg(program);
    c
}

/// Runs `c` to its end: the test fails unless it succeeds.
pub fn ok(c: &mut std::process::Command) {
    let out = c.output().unwrap();
    assert!(out.status.success(), "{c:?}: {out:?}");
}

/// `foster-PREFIX-TAG-PID` under the temporary directory, mode 0755 whatever the umask (a test
/// child running as another uid must reach the sockets in it), removed on drop.
pub struct Dir(pub PathBuf);
impl Dir {
    pub fn new(prefix: &str, tag: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("foster-{prefix}-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        Dir(d)
    }
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
    pub fn file(&self, name: &str, text: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }
    pub fn fifo(&self, name: &str) -> PathBuf {
        let p = self.0.join(name);
        nix::unistd::mkfifo(&p, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        p
    }
}
impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What the user database gives `user` (a name or a uid), by `id`, an implementation
/// independent of foster's: its primary gid and its group list (sorted, the primary included).
pub fn groups_of(user: &str) -> (u32, Vec<u32>) {
    let id = |flag: &str| {
        let o = std::process::Command::new("id")
            .args([flag, user])
            .output()
            .unwrap();
        assert!(o.status.success(), "id {flag} {user}: {o:?}");
        let mut v: Vec<u32> = String::from_utf8(o.stdout)
            .unwrap()
            .split_whitespace()
            .map(|g| g.parse().unwrap())
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    (id("-g")[0], id("-G"))
}

/// A user of the user database with a supplementary group besides its primary one: (name, uid).
pub fn user_with_supplementary_groups() -> Option<(String, u32)> {
    let groups = std::fs::read_to_string("/etc/group").ok()?;
    for line in groups.lines() {
        let Some(members) = line.split(':').nth(3) else {
            continue;
        };
        for name in members.split(',').filter(|m| !m.is_empty()) {
            if let Ok(Some(u)) = nix::unistd::User::from_name(name)
                && groups_of(name).1.len() > 1
            {
                return Some((name.to_string(), u.uid.as_raw()));
            }
        }
    }
    None
}

/// The ids of a `/proc/<pid>/status` line (`Uid:`, `Gid:`, `Groups:`), sorted for `Groups:`.
pub fn status_ids(status: &str, field: &str) -> Vec<u32> {
    let line = status
        .lines()
        .find(|l| l.starts_with(field))
        .unwrap_or_else(|| panic!("no {field} in {status}"));
    let mut v: Vec<u32> = line[field.len()..]
        .split_whitespace()
        .map(|g| g.parse().unwrap())
        .collect();
    if field == "Groups:" {
        v.sort_unstable();
    }
    v
}

/// A uid the user database does not know.
pub fn uid_without_entry() -> u32 {
    (54321..)
        .find(|&u| matches!(nix::unistd::User::from_uid(u.into()), Ok(None)))
        .unwrap()
}

/// A signal set of a `/proc/<pid>/status` line (`SigBlk:`, `SigIgn:`, `SigCgt:`): bit `n - 1`
/// for signal `n`.
pub fn status_sigset(status: &str, field: &str) -> u64 {
    foster::process::signal::SigBits::from_status(status, field)
        .unwrap_or_else(|| panic!("no {field} in {status}"))
        .0
}

/// `status_sigset` of a live process.
pub fn sigset_of(pid: i32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status_sigset(&status, field)
}

/// The bit of signal `sig` in a `/proc` signal set.
pub fn sigbit(sig: i32) -> u64 {
    1u64 << (sig - 1)
}

/// `cmd` starts with signals 32 and 33 (the C library's) at their default, as a shell's fork
/// and exec give them: this test process may have them ignored (the C library's `posix_spawn`,
/// which cargo's launch of a test uses, gives a child both ignored), and a child would inherit
/// that.
pub fn libc_signals_at_default(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: rt_sigaction with stack values, between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            for sig in foster::process::signal::LIBC_RESERVED {
                foster::process::signal::set_raw_disposition(sig, false);
            }
            Ok(())
        });
    }
}

// ---- Signals, states and a process's end ----

/// Sends `sig` (a number: real-time signals have no nix name) to `pid`, a process of the
/// test's; the test fails, naming both, if kill(2) does.
pub fn send(pid: i32, sig: i32) {
    // SAFETY: kill(2) with integer arguments.
    let r = unsafe { libc::kill(pid, sig) };
    let err = std::io::Error::last_os_error();
    let name = foster::process::signal::name(sig);
    assert_eq!(r, 0, "kill {name} to {pid}: {err}");
}

/// The state letter of process `pid` (`S`, `T` when stopped, `Z`...), `None` once reaped.
pub fn state_of(pid: i32) -> Option<char> {
    process(pid).map(|p| p.state as char)
}

/// Waits until the state of `pid` is `want` (the kernel stops or resumes a process as a signal
/// is delivered, just after kill(2) returns): a bounded poll of its `/proc` entry.
pub fn wait_state(pid: i32, want: char) {
    let t = std::time::Instant::now();
    while state_of(pid) != Some(want) {
        assert!(
            t.elapsed() < LIMIT,
            "pid {pid} stayed in state {:?}, never {want}",
            state_of(pid)
        );
        // Safety net only: the state changes as the signal is delivered.
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Waits until the process `id` has ended (exited: a zombie or reaped) or `limit` passes;
/// true when it ended. Its pidfd is polled, no sleeping; a pid that names another process
/// now, or none, has ended.
pub fn wait_gone(id: Identity, limit: Duration) -> bool {
    match foster::process::identity::ProcessRef::open(id) {
        Ok(p) => p.wait(Some(limit)),
        Err(foster::process::identity::IdentityError::NoSuchProcess(_)) => true,
        Err(e) => panic!("pidfd of {id}: {e}"),
    }
}

/// Waits until the process `id` is gone from `/proc`, reaped by whoever reaps it (its parent,
/// or what adopted it): its end on its pidfd, then, as nothing tells of another process's
/// reaping, a bounded poll of `/proc`. Past [`LIMIT`] the test fails, naming `what`.
pub fn wait_reaped(id: Identity, what: &str) {
    assert!(wait_gone(id, LIMIT), "{what} ({id}) did not end");
    let t = std::time::Instant::now();
    while id.is_alive() {
        assert!(t.elapsed() < LIMIT, "{what} ({id}) was never reaped");
        // Safety net only: its reaper is woken by its end, which has come.
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// [`wait_gone`] for the process that `pid` names now.
pub fn wait_pid_gone(pid: i32, limit: Duration) -> bool {
    Identity::of(pid).map_or(true, |id| wait_gone(id, limit))
}

// ---- The process tree, read by the product's walker ----

/// A scanner on `/proc` working on the calling thread (a test may have blocked signals in it),
/// without command lines.
fn scanner() -> Scanner {
    Scanner::new(ScanOptions {
        cmdline: false,
        threads: 1,
        ..ScanOptions::default()
    })
    .expect("open /proc")
}

/// Every process of the machine, now.
pub fn processes() -> Snapshot {
    scanner().scan().expect("list /proc")
}

/// Process `pid` now (its state, parent, name...), `None` once it is gone (reaped).
pub fn process(pid: i32) -> Option<ProcessNode> {
    scanner().scan_pids(&[pid]).by_pid(pid).cloned()
}

/// The children of `pid` now, by pid.
pub fn children_of(pid: i32) -> Vec<i32> {
    let kids = foster::process::tree::children_of(pid).expect("list /proc");
    kids.iter().map(|n| n.pid).collect()
}

/// Every process below `pid` now, parents before their children (`pid` itself not included).
pub fn descendants_of(pid: i32) -> Vec<Identity> {
    let below = foster::process::tree::descendants_of(pid).expect("list /proc");
    below.iter().map(|n| n.identity).collect()
}

/// The processes whose environment holds the entry `entry` (`NAME=VALUE`), now; zombies have
/// no environment and are never among them.
pub fn processes_with_env(entry: &str) -> Vec<ProcessNode> {
    let mut s = scanner();
    let mut nodes: Vec<ProcessNode> = s
        .scan()
        .expect("list /proc")
        .nodes()
        .filter(|n| !n.kernel_thread)
        .cloned()
        .collect();
    let mut refs: Vec<&mut ProcessNode> = nodes.iter_mut().collect();
    s.read_environ(&mut refs, entry.as_bytes());
    nodes.retain(|n| n.environ.iter().any(|v| v == entry.as_bytes()));
    nodes
}
