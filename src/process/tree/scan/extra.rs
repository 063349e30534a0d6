//! What a reader shows of some processes only (the dashboard's optional columns): `io`,
//! `cgroup`, the PID namespace's inode, read through the scanner's `/proc` and buffer.

use std::os::fd::AsRawFd;

use procfs::FromRead;

use super::Scanner;
use super::files::{pid_path, read_at};

/// What [`Scanner::read_extra`] reads of a process besides `stat`: each is one more file (or
/// `fstatat`) per process, so a reader asks only for what it shows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExtraWants {
    /// `/proc/<pid>/io`: bytes read from and written to storage.
    pub io: bool,
    /// `/proc/<pid>/cgroup`: the control group.
    pub cgroup: bool,
    /// `/proc/<pid>/ns/pid`: the PID namespace's inode number.
    pub pidns: bool,
}

impl ExtraWants {
    /// Whether it asks for anything.
    pub fn any(self) -> bool {
        self.io || self.cgroup || self.pidns
    }
}

/// What [`Scanner::read_extra`] found of one process: each `None` when not asked for or not
/// readable (`/proc/<pid>/io` is readable only by who may trace the process).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Extra {
    /// Bytes read from and written to storage (`read_bytes`, `write_bytes` of `io`).
    pub io: Option<(u64, u64)>,
    /// The control group's path: the cgroup v2 entry (`0::/path`), else the first hierarchy's.
    pub cgroup: Option<String>,
    /// The inode number of its PID namespace (as `ls -l /proc/<pid>/ns/pid` shows it).
    pub pidns: Option<u64>,
}

impl Scanner {
    /// Reads what `want` asks of the process `pid`, through the scanner's own `/proc`
    /// descriptor and buffer (`io` and `cgroup` parsed by procfs). A pid read here should have
    /// been read by a scan just before: the files are those of whatever process holds the pid
    /// now.
    pub fn read_extra(&mut self, pid: i32, want: ExtraWants) -> Extra {
        use procfs::process::Io;
        let mut out = Extra::default();
        if !want.any() {
            return out;
        }
        if self.bufs.is_empty() {
            self.bufs.push(Vec::with_capacity(4096));
        }
        let dir = self.proc_fd.as_raw_fd();
        let mut path = [0u8; 40];
        let buf = &mut self.bufs[0];
        if want.io {
            let len = pid_path(&mut path, pid, b"io");
            if read_at(dir, &path[..len], buf, false).is_ok()
                && let Ok(io) = Io::from_read(&buf[..])
            {
                out.io = Some((io.read_bytes, io.write_bytes));
            }
        }
        if want.cgroup {
            let len = pid_path(&mut path, pid, b"cgroup");
            if read_at(dir, &path[..len], buf, false).is_ok()
                && let Ok(groups) = procfs::ProcessCGroups::from_read(&buf[..])
            {
                let groups = groups.0;
                out.cgroup = groups
                    .iter()
                    .find(|g| g.hierarchy == 0)
                    .or(groups.first())
                    .map(|g| g.pathname.clone());
            }
        }
        if want.pidns {
            pid_path(&mut path, pid, b"ns/pid");
            // SAFETY: a zeroed `stat` is a valid output buffer; the path is NUL-terminated.
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            // SAFETY: fstatat fills `st`, a stack struct; the path is NUL-terminated.
            if unsafe { libc::fstatat(dir, path.as_ptr().cast(), &mut st, 0) } == 0 {
                out.pidns = Some(st.st_ino);
            }
        }
        out
    }
}
