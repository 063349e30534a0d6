//! Scaffolding shared by the integration tests: a temporary directory of the test's own,
//! removed on drop, with files and FIFOs in it.

#![allow(dead_code)] // each test binary uses its own part of it

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
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
