//! An exec held in its middle, for real: a FUSE file system of the test's own (the kernel's
//! protocol on `/dev/fuse`, no library) serving one executable, a copy of a real program. The
//! first page the kernel reads into memory for it is held until the test says so.
//!
//! Why that page is inside `execve`: `execve` reads the program's header and segment table with
//! small direct reads (the file is opened `FOPEN_DIRECT_IO`), then swaps in the new memory, sets
//! the new name, places the argument area (`arg_start`), and maps the segments; zeroing the end
//! of a segment's last file page (`padzero`, before the `.bss`) faults that page in, a page-sized
//! read, before the argument and environment pointers are written (`arg_end`, `env_end`) and
//! before the code addresses are set (`start_code`). While that read is held, the process shows
//! its new name, an empty command line and an empty environment, exactly as one caught there
//! by chance does.
//!
//! Needs root (the mount) and `/dev/fuse`; [`HeldExec::mount`] says why when it cannot be had,
//! for the test to skip with that reason ([`held_shell`] skips so itself).

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

const FUSE_LOOKUP: u32 = 1;
const FUSE_FORGET: u32 = 2;
const FUSE_GETATTR: u32 = 3;
const FUSE_OPEN: u32 = 14;
const FUSE_READ: u32 = 15;
const FUSE_RELEASE: u32 = 18;
const FUSE_GETXATTR: u32 = 22;
const FUSE_FLUSH: u32 = 25;
const FUSE_INIT: u32 = 26;
const FUSE_INTERRUPT: u32 = 36;
const FUSE_BATCH_FORGET: u32 = 42;
const FOPEN_DIRECT_IO: u32 = 1;
const ROOT: u64 = 1;
const FILE: u64 = 2;
const IN_HEADER: usize = 40;

/// A mounted file system serving one executable whose first page read is held.
pub struct HeldExec {
    mnt: PathBuf,
    name: String,
    server: Option<std::thread::JoinHandle<()>>,
    held: mpsc::Receiver<i32>,
    release: Option<mpsc::Sender<()>>,
    _dev: Arc<OwnedFd>,
}

/// A copy of `/bin/sh` named `name`, held at its first page, on a file system mounted on `mnt`
/// in the test's directory `d`; `None`, the test's skip said with the reason, where that cannot
/// be had here. Dropped before `d` (declared after it), it is unmounted first.
pub fn held_shell(d: &super::Dir, name: &str) -> Option<HeldExec> {
    let mnt = d.path("mnt");
    std::fs::create_dir(&mnt).unwrap();
    match HeldExec::mount(&mnt, name, Path::new("/bin/sh")) {
        Ok(h) => Some(h),
        Err(why) => {
            super::skip::refused(why);
            None
        }
    }
}

impl HeldExec {
    /// Mounts, at `mnt` (an empty directory), a file system with one file, `name`, executable,
    /// with the bytes of `program`. Err: why it cannot be done here (not root, no `/dev/fuse`).
    pub fn mount(mnt: &Path, name: &str, program: &Path) -> Result<HeldExec, String> {
        if !nix::unistd::geteuid().is_root() {
            return Err("needs root to mount a FUSE file system".into());
        }
        let bytes = std::fs::read(program).map_err(|e| format!("{}: {e}", program.display()))?;
        let dev = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/fuse")
            .map_err(|e| format!("/dev/fuse: {e}"))?;
        let dev: OwnedFd = dev.into();
        let opts = format!("fd={},rootmode=40000,user_id=0,group_id=0", dev.as_raw_fd());
        nix::mount::mount(
            Some("foster-test"),
            mnt,
            Some("fuse"),
            nix::mount::MsFlags::MS_NOSUID | nix::mount::MsFlags::MS_NODEV,
            Some(opts.as_str()),
        )
        .map_err(|e| format!("mount fuse on {}: {e}", mnt.display()))?;
        let dev = Arc::new(dev);
        let (held_tx, held) = mpsc::channel();
        let (release, release_rx) = mpsc::channel();
        let server = {
            let dev = Arc::clone(&dev);
            let name = name.to_string();
            std::thread::spawn(move || serve(&dev, &name, &bytes, &held_tx, &release_rx))
        };
        Ok(HeldExec {
            mnt: mnt.to_path_buf(),
            name: name.to_string(),
            server: Some(server),
            held,
            release: Some(release),
            _dev: dev,
        })
    }

    /// The executable's path.
    pub fn path(&self) -> PathBuf {
        self.mnt.join(&self.name)
    }

    /// Waits until an exec of the file is held in its middle; returns the pid (as this
    /// namespace sees it) of the process held. Fails the test after `limit`.
    pub fn wait_held(&self, limit: Duration) -> i32 {
        self.held
            .recv_timeout(limit)
            .unwrap_or_else(|e| panic!("no exec of the held file within {limit:?}: {e}"))
    }

    /// Lets the held exec go on (and every later read be answered at once).
    pub fn release(&mut self) {
        self.release.take();
    }

    /// The release as a guard of its own, which lets the exec go on when it is dropped: take it
    /// after the guard that kills and reaps the held process, so that a failing test drops it
    /// first. A held process cannot be killed: it waits, uninterruptibly, for the read.
    pub fn releaser(&mut self) -> Release {
        Release(self.release.take())
    }
}

/// Lets a held exec go on when dropped ([`HeldExec::releaser`]).
pub struct Release(Option<mpsc::Sender<()>>);

impl Release {
    /// Lets the held exec go on now.
    pub fn release(&mut self) {
        self.0.take();
    }
}

impl Drop for HeldExec {
    /// Releases the exec and unmounts, lazily: a process still running the program keeps the
    /// file system until it ends, and the server thread ends when the kernel ends the
    /// connection (it is not waited for).
    fn drop(&mut self) {
        self.release();
        let _ = nix::mount::umount2(&self.mnt, nix::mount::MntFlags::MNT_DETACH);
        self.server.take();
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(b[at..at + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_ne_bytes(b[at..at + 8].try_into().unwrap())
}

/// `struct fuse_attr` (88 bytes).
fn attr(ino: u64, size: u64, mode: u32) -> Vec<u8> {
    let mut a = Vec::with_capacity(88);
    a.extend(ino.to_ne_bytes());
    a.extend(size.to_ne_bytes());
    a.extend(size.div_ceil(512).to_ne_bytes()); // blocks
    a.extend([0u8; 24]); // atime, mtime, ctime
    a.extend([0u8; 12]); // their nanoseconds
    a.extend(mode.to_ne_bytes());
    a.extend(1u32.to_ne_bytes()); // nlink
    a.extend([0u8; 12]); // uid, gid, rdev
    a.extend(4096u32.to_ne_bytes()); // blksize
    a.extend(0u32.to_ne_bytes()); // flags
    a
}

fn reply(dev: &OwnedFd, unique: u64, error: i32, body: &[u8]) {
    let mut out = Vec::with_capacity(16 + body.len());
    out.extend(((16 + body.len()) as u32).to_ne_bytes());
    out.extend(error.to_ne_bytes());
    out.extend(unique.to_ne_bytes());
    out.extend_from_slice(body);
    // SAFETY: writes a buffer we own to the device; a request the kernel dropped meanwhile
    // (ENOENT) needs nothing more.
    unsafe { libc::write(dev.as_raw_fd(), out.as_ptr().cast(), out.len()) };
}

/// The server: answers the few requests an exec makes, holds the first page-sized read.
fn serve(
    dev: &OwnedFd,
    name: &str,
    bytes: &[u8],
    held: &mpsc::Sender<i32>,
    release: &mpsc::Receiver<()>,
) {
    let size = bytes.len() as u64;
    let file_attr = attr(FILE, size, libc::S_IFREG | 0o755);
    let mut holding = true;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        // SAFETY: reads one request into our buffer.
        let n = unsafe { libc::read(dev.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            match foster::base::sys::errno() {
                libc::EINTR | libc::ENOENT | libc::EAGAIN => continue,
                _ => return, // ENODEV: unmounted and ended
            }
        }
        let req = &buf[..n as usize];
        if req.len() < IN_HEADER {
            continue;
        }
        let (opcode, unique, node) = (u32_at(req, 4), u64_at(req, 8), u64_at(req, 16));
        let pid = u32_at(req, 32) as i32;
        let body = &req[IN_HEADER..];
        match opcode {
            FUSE_INIT => {
                // fuse_init_out: major 7, minor 31, max_readahead as asked, no flags,
                // max_background and congestion threshold 0, max_write 128 KiB, time_gran 1.
                let mut o = Vec::with_capacity(64);
                o.extend(7u32.to_ne_bytes());
                o.extend(31u32.to_ne_bytes());
                o.extend(u32_at(body, 8).to_ne_bytes());
                o.extend(0u32.to_ne_bytes());
                o.extend([0u8; 4]);
                o.extend((128u32 << 10).to_ne_bytes());
                o.extend(1u32.to_ne_bytes());
                o.resize(64, 0);
                reply(dev, unique, 0, &o);
            }
            FUSE_LOOKUP => {
                let asked = body.split(|&b| b == 0).next().unwrap_or_default();
                if node == ROOT && asked == name.as_bytes() {
                    let mut o = Vec::with_capacity(128);
                    o.extend(FILE.to_ne_bytes());
                    o.extend(1u64.to_ne_bytes()); // generation
                    o.extend(3600u64.to_ne_bytes()); // entry_valid
                    o.extend(3600u64.to_ne_bytes()); // attr_valid
                    o.extend([0u8; 8]);
                    o.extend_from_slice(&file_attr);
                    reply(dev, unique, 0, &o);
                } else {
                    reply(dev, unique, -libc::ENOENT, &[]);
                }
            }
            FUSE_GETATTR => {
                let a = if node == ROOT {
                    attr(ROOT, 0, libc::S_IFDIR | 0o755)
                } else {
                    file_attr.clone()
                };
                let mut o = Vec::with_capacity(104);
                o.extend(3600u64.to_ne_bytes());
                o.extend([0u8; 8]);
                o.extend(a);
                reply(dev, unique, 0, &o);
            }
            FUSE_OPEN if node == FILE => {
                let mut o = Vec::with_capacity(16);
                o.extend(1u64.to_ne_bytes()); // fh
                o.extend(FOPEN_DIRECT_IO.to_ne_bytes());
                o.extend(0u32.to_ne_bytes());
                reply(dev, unique, 0, &o);
            }
            FUSE_READ => {
                let (off, len) = (u64_at(body, 8), u32_at(body, 16) as u64);
                if holding && len >= 4096 {
                    // A page fault of the mapped program: the exec is in its middle.
                    holding = false;
                    let _ = held.send(pid);
                    let _ = release.recv(); // until released (or the test's end)
                }
                let from = off.min(size) as usize;
                let to = off.saturating_add(len).min(size) as usize;
                reply(dev, unique, 0, &bytes[from..to]);
            }
            FUSE_RELEASE | FUSE_FLUSH => reply(dev, unique, 0, &[]),
            FUSE_GETXATTR => reply(dev, unique, -libc::ENODATA, &[]),
            FUSE_FORGET | FUSE_BATCH_FORGET | FUSE_INTERRUPT => {} // no answer expected
            _ => reply(dev, unique, -libc::ENOSYS, &[]),
        }
    }
}
