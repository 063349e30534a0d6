//! The child's stack and descriptors: the guarded stack it runs on ([`ChildStack`]), the
//! reserved low numbers a launch shares the table through ([`LowSlots`]), what the child uses
//! ([`ChildFds`]).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::gate::Trace;

pub(super) const CHILD_STACK: usize = 256 * 1024;

/// The stack of the `CLONE_VM` child: a mapping of its own with a `PROT_NONE` guard page below
/// it, so that an overflow faults in the child instead of writing into the launcher's memory
/// (a heap buffer had nothing below it but other allocations).
pub(super) struct ChildStack {
    base: *mut libc::c_void,
    len: usize,
    guard: usize,
}

// SAFETY: a private mapping owned by one value; moved once, to the spawner thread.
unsafe impl Send for ChildStack {}

impl ChildStack {
    pub(super) fn map(size: usize) -> io::Result<ChildStack> {
        let guard = procfs::page_size() as usize;
        let len = size.next_multiple_of(guard) + guard;
        // SAFETY: a fresh anonymous mapping, then protection of its lowest page.
        unsafe {
            let base = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            );
            if base == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            let stack = ChildStack { base, len, guard };
            if libc::mprotect(base, guard, libc::PROT_NONE) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(stack)
        }
    }

    /// The usable addresses, above the guard page.
    pub(super) fn usable(&self) -> std::ops::Range<usize> {
        self.base as usize + self.guard..self.base as usize + self.len
    }

    /// The initial stack pointer (the stack grows down), 16-byte aligned.
    pub(super) fn top(&mut self) -> *mut libc::c_void {
        (self.usable().end & !15) as *mut libc::c_void
    }
}

impl Drop for ChildStack {
    fn drop(&mut self) {
        // SAFETY: our own mapping; no child runs on it once the spawner thread ends.
        unsafe { libc::munmap(self.base, self.len) };
    }
}

/// The lowest number of a reserved slot: the numbers below are left to a launch's extra
/// descriptors (the notification descriptor of s6's protocol is 3 to 9 in practice), which
/// the child places over whatever lies there.
const SLOT_BASE: RawFd = 10;
/// Reserved slots per spawner: stdio, the report pipe, an extra descriptor, the lifeline, the
/// terminal and the trace hooks' two, the most one launch needs but for many extra descriptors.
const SLOTS: usize = 8;

/// A spawner thread's reserved low descriptor numbers, which make a launch cost the
/// descriptors it uses and not the thousands the launcher holds (two pipe ends per captured
/// stream, a pidfd per helper and per watched parent, all close-on-exec).
///
/// A fork copies the whole descriptor table and the exec then closes every close-on-exec
/// descriptor in it, one by one: with 1,000 helpers, 5,000 each, and 2.5 million to start
/// them. Instead, a launch whose descriptors fit is cloned with `CLONE_FILES` (the table
/// shared, nothing copied) and the child's first step is `close_range(boundary, ~0,
/// CLOSE_RANGE_UNSHARE)`, which gives it a table of its own holding copies of the
/// descriptors below `boundary` only: the numbers this process had open when the spawner
/// started (its standard ones, those its caller passed, its first own ones) and the reserved
/// slots. Before the clone, the spawner thread `dup3`s each descriptor the child needs that
/// lies at `boundary` or above onto a slot (close-on-exec); after it, each used slot gets its
/// placeholder back.
///
/// The invariants:
/// - a slot always holds a descriptor (a placeholder on `/dev/null` between launches), so no
///   other thread's open ever lands on it, and only this spawner thread writes it;
/// - every slot is at [`SLOT_BASE`] or above and below `boundary`, which also lies above
///   every descriptor open when the spawner started: so what foster's caller passed without
///   close-on-exec still reaches every helper, as with a copied table. A descriptor opened
///   later without close-on-exec at `boundary` or above reaches none (foster opens everything
///   close-on-exec; a launch passes a descriptor explicitly, as stdio or an extra one);
/// - a launch falls back to the copied table when its descriptors do not fit: an extra
///   descriptor at the first slot's number or above, more than [`SLOTS`] to place.
pub(super) struct LowSlots {
    null: OwnedFd,
    /// Ascending.
    slots: Vec<OwnedFd>,
    boundary: RawFd,
}

impl LowSlots {
    /// Reserves the slots and reads the boundary; `None` (every launch copies the table) when
    /// `close_range` is missing (before Linux 5.9, or filtered), or `/dev/null` or
    /// `/proc/self/fd` cannot be read.
    pub(super) fn reserve() -> Option<LowSlots> {
        // Flags 0 and a range where nothing is open: closes nothing, fails only when the call
        // is not there. (With CLOSE_RANGE_UNSHARE it would unshare this thread's table.)
        // SAFETY: see above.
        if unsafe { libc::syscall(libc::SYS_close_range, u32::MAX, u32::MAX, 0) } != 0 {
            return None;
        }
        let null: OwnedFd = std::fs::File::open("/dev/null").ok()?.into();
        let mut slots = Vec::with_capacity(SLOTS);
        for _ in 0..SLOTS {
            // SAFETY: duplicates a descriptor we own; the duplicate is owned from here on.
            let d = unsafe { libc::fcntl(null.as_raw_fd(), libc::F_DUPFD_CLOEXEC, SLOT_BASE) };
            if d < 0 {
                return None;
            }
            // SAFETY: `d` was just returned by fcntl(F_DUPFD_CLOEXEC): open and owned by nobody
            // else.
            slots.push(unsafe { OwnedFd::from_raw_fd(d) });
        }
        // Read once the slots are held: every number open now, slots included, lies below.
        let highest = std::fs::read_dir("/proc/self/fd")
            .ok()?
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<RawFd>().ok())
            .max()?;
        Some(LowSlots {
            null,
            slots,
            boundary: highest + 1,
        })
    }

    /// Moves the descriptors of one launch below the boundary (`fds` and `report` rewritten
    /// to the numbers the child finds them at), or `None`, with nothing changed, when they do
    /// not fit. `floor`: one above the highest extra descriptor number, which no descriptor
    /// the child still needs once its stdio is placed may lie under.
    pub(super) fn place(
        &self,
        floor: RawFd,
        fds: &mut ChildFds,
        report: &mut RawFd,
    ) -> Option<Placed<'_>> {
        if floor > self.slots[0].as_raw_fd() {
            return None;
        }
        let mut pl = Placed {
            low: self,
            used: Vec::with_capacity(SLOTS),
        };
        let mut f = fds.clone();
        for fd in f.stdio.iter_mut() {
            *fd = pl.low(*fd)?;
        }
        for (src, _) in f.extra.iter_mut() {
            *src = pl.low(*src)?;
        }
        if let Some(fd) = &mut f.lifeline {
            *fd = pl.low(*fd)?;
        }
        f.foreground_tty = pl.low(f.foreground_tty)?;
        if let Some(t) = &mut f.trace {
            t.fd = pl.low(t.fd)?;
            t.go_fd = pl.low(t.go_fd)?;
        }
        let r = pl.low(*report)?;
        *fds = f;
        *report = r;
        Some(pl)
    }
}

/// The slots one launch uses; dropped, each gets its placeholder back (a pipe's end left on a
/// slot would keep that pipe open).
pub(super) struct Placed<'a> {
    low: &'a LowSlots,
    /// `(source, slot)`.
    used: Vec<(RawFd, RawFd)>,
}

impl Placed<'_> {
    pub(super) fn boundary(&self) -> RawFd {
        self.low.boundary
    }

    /// The number the child finds `fd` at: itself below the boundary (and -1, none), else
    /// the slot it is copied onto; `None` when no slot is left.
    fn low(&mut self, fd: RawFd) -> Option<RawFd> {
        if fd < self.low.boundary {
            return Some(fd);
        }
        if let Some(&(_, slot)) = self.used.iter().find(|(src, _)| *src == fd) {
            return Some(slot);
        }
        let slot = self.low.slots.get(self.used.len())?.as_raw_fd();
        // SAFETY: replaces the content of a slot this thread owns with a descriptor the launch
        // holds; atomic, so the number is never free for another thread's open.
        if unsafe { libc::dup3(fd, slot, libc::O_CLOEXEC) } != slot {
            return None;
        }
        self.used.push((fd, slot));
        Some(slot)
    }
}

impl Drop for Placed<'_> {
    fn drop(&mut self) {
        for &(_, slot) in &self.used {
            // SAFETY: as in `low`, the placeholder back on the slot.
            unsafe { libc::dup3(self.low.null.as_raw_fd(), slot, libc::O_CLOEXEC) };
        }
    }
}

/// `fd`, or a close-on-exec duplicate above 2 when it is 0, 1 or 2 (a launcher started with
/// its standard descriptors closed): a descriptor the child uses itself must not be one of the
/// numbers its stdio overwrites.
pub(super) fn above_stdio(fd: OwnedFd) -> io::Result<OwnedFd> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    // SAFETY: duplicates a descriptor we own; the duplicate is owned from here on.
    let d = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
    if d < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(d) })
}

/// The descriptors the child uses, by number in the launcher's table: its stdio sources, its
/// extra descriptors' sources, the gate's lifeline, the terminal, the trace hooks'.
#[derive(Clone)]
pub(super) struct ChildFds {
    pub(super) stdio: [RawFd; 3],
    pub(super) extra: Vec<(RawFd, RawFd)>,
    pub(super) lifeline: Option<RawFd>,
    pub(super) foreground_tty: RawFd,
    pub(super) trace: Option<Trace>,
}
